//! The checked native path: a correct native witness is used as is, a
//! wrong one (any value, a missing one, a panic) is caught and the
//! partition is redone on the gadget path.

use blstrs::Scalar;
use ff::Field;

use crate::native::AssignmentWriter;
use crate::workload::{SyntheticCircuit, WorkloadKind};
use crate::{synthesize, Assignment, AssignmentBuffers, CircuitCache, SynthContext, SynthError};

/// Dense: every aux variable is fixed by its own constraint (an input's
/// copy, or a product), so any changed value breaks a row.
fn circuit(seed: u64) -> SyntheticCircuit {
    SyntheticCircuit::filling_domain(WorkloadKind::Dense, 10, 3).with_witness(seed)
}

/// What a native generator of `circuit(seed)` must write (the test's
/// stand-in for a real generator: the ordinary synthesis's values).
fn expected(seed: u64) -> Assignment {
    synthesize(circuit(seed), AssignmentBuffers::heap()).unwrap()
}

/// How a test generator goes wrong.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    Aux(usize),
    Input(usize),
    Short,
    Panic,
}

fn generator(want: &Assignment, fault: Fault) -> impl FnOnce(&mut AssignmentWriter<'_>) -> Result<(), String> + '_ {
    move |w| {
        let aux = want.aux();
        let inputs = &want.input[1..];
        for (i, &x) in inputs.iter().enumerate() {
            w.input(if matches!(fault, Fault::Input(k) if k == i) { x + Scalar::ONE } else { x });
        }
        let aux_len = if matches!(fault, Fault::Short) { aux.len() - 1 } else { aux.len() };
        for (i, &x) in aux[..aux_len].iter().enumerate() {
            w.aux(if matches!(fault, Fault::Aux(k) if k == i) { x.double() + Scalar::ONE } else { x });
        }
        if matches!(fault, Fault::Panic) {
            panic!("a generator bug");
        }
        Ok(())
    }
}

fn run(ctx: SynthContext<'_>, seed: u64, fault: Fault) -> Assignment {
    let want = expected(seed);
    ctx.synthesize_native(generator(&want, fault), |ctx, b| ctx.synthesize(|| Ok(circuit(seed)), b), AssignmentBuffers::heap()).unwrap()
}

fn assert_same(got: &Assignment, want: &Assignment) {
    assert_eq!(got.shape(), want.shape());
    assert!(got.input == want.input && got.aux() == want.aux(), "the assignment differs");
    assert!((got.a(), got.b(), got.c()) == (want.a(), want.b(), want.c()), "a/b/c differ");
    got.check_satisfied().unwrap();
}

#[test]
fn the_first_synthesis_records_then_native_witnesses_are_used() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("native", usize::MAX).for_partition("test", 0);
    assert_same(&run(ctx, 1, Fault::None), &expected(1));
    let s = cache.stats();
    assert_eq!((s.compiles, s.native_syntheses, s.native_rejections), (1, 0, 0), "no recorded R1CS yet: the gadget path");
    for seed in 2..4 {
        assert_same(&run(ctx, seed, Fault::None), &expected(seed));
    }
    let s = cache.stats();
    assert_eq!((s.compiles, s.compiled_syntheses, s.native_syntheses, s.native_rejections), (1, 0, 2, 0), "{s:?}");
    assert!(s.native_witness_ns > 0);
}

#[test]
fn a_wrong_native_witness_is_caught_and_redone_on_the_gadget_path() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("native", usize::MAX);
    run(ctx, 1, Fault::None); // records
    let aux = expected(2).num_aux;
    let faults = [Fault::Aux(0), Fault::Aux(aux / 2), Fault::Aux(aux - 1), Fault::Input(0), Fault::Input(2), Fault::Short, Fault::Panic];
    for (k, fault) in faults.into_iter().enumerate() {
        let got = run(ctx, 2, fault);
        assert_same(&got, &expected(2));
        let s = cache.stats();
        assert_eq!((s.native_rejections, s.compiled_syntheses, s.native_syntheses), (k as u64 + 1, k as u64 + 1, 0), "{fault:?}: {s:?}");
    }
}

#[test]
fn the_first_bad_row_is_reported() {
    let cache = CircuitCache::unbounded();
    let r1cs = {
        run(cache.context("rows", usize::MAX), 1, Fault::None);
        cache.compiled("rows").unwrap()
    };
    let want = expected(5);
    // The last aux value is defined by the circuit's last constraint, and
    // no row before it names it.
    let outcome = r1cs.try_native(generator(&want, Fault::Aux(want.num_aux - 1)), AssignmentBuffers::heap(), None).unwrap();
    let Err((rejection, _)) = outcome else { panic!("the changed witness was accepted") };
    let row = rejection.first_bad_row.expect("a row");
    assert!(row > want.num_constraints / 2 && row < want.num_constraints, "{rejection:?}");
    assert!(rejection.reason.contains(&format!("constraint {row} of {}", want.num_constraints)), "{rejection:?}");
    let Err((short, _)) = r1cs.try_native(generator(&want, Fault::Short), AssignmentBuffers::heap(), None).unwrap() else { panic!("accepted") };
    assert_eq!(short.first_bad_row, None);
    assert!(short.reason.contains("into room for"), "{short:?}");
}

#[test]
fn switched_off_or_plain_the_gadget_path_runs() {
    let cache = CircuitCache::unbounded();
    let off = cache.context("off", usize::MAX).with_native(false);
    for seed in 1..4 {
        // A generator that would be rejected is never called.
        assert_same(&run(off, seed, Fault::Panic), &expected(seed));
    }
    let s = cache.stats();
    assert_eq!((s.compiles, s.compiled_syntheses, s.native_syntheses, s.native_rejections), (1, 2, 0, 0));
    assert_same(&run(SynthContext::plain(), 4, Fault::Panic), &expected(4));
}

#[test]
fn a_buffer_too_small_for_the_recorded_circuit_is_an_error() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("small", usize::MAX);
    run(ctx, 1, Fault::None);
    let want = expected(2);
    let fixed = |n| Box::new(crate::tests::FixedBuf(vec![Scalar::ZERO; n])) as Box<dyn crate::ScalarBuffer>;
    let bufs = AssignmentBuffers::new(fixed(4096), fixed(4096), fixed(4096), fixed(want.num_aux - 1));
    let e = ctx.synthesize_native(generator(&want, Fault::None), |_, _| panic!("not reached"), bufs).err().unwrap();
    assert!(matches!(e, SynthError::BufferTooSmall { which: "aux", .. }), "{e}");
}

/// With deferred products the native witness is not checked here: the
/// prover evaluates and checks it, and finds the row the host path would
/// have rejected. A generator that fails is still redone on the gadget
/// path, whose products are deferred too.
#[test]
fn a_deferred_native_witness_is_left_to_the_prover_to_check() {
    use crate::compiled::deferred_tests::aux_only;
    let cache = CircuitCache::unbounded();
    run(cache.context("deferred", usize::MAX), 1, Fault::None);
    let r1cs = cache.compiled("deferred").unwrap();
    let ctx = cache.context("deferred", usize::MAX).with_deferred_products(&r1cs);
    let want = expected(5);
    let good = ctx.synthesize_native(generator(&want, Fault::None), |_, _| panic!("gadget path"), aux_only(want.num_aux)).unwrap();
    assert!(!good.products_on_host());
    assert!(good.input == want.input && good.aux() == want.aux());
    good.check_satisfied().unwrap();
    let fault = Fault::Aux(want.num_aux - 1);
    let bad = ctx.synthesize_native(generator(&want, fault), |_, _| panic!("not checked here"), aux_only(want.num_aux)).unwrap();
    let Err((host, _)) = r1cs.try_native(generator(&want, fault), AssignmentBuffers::heap(), None).unwrap() else { panic!("accepted") };
    match bad.check_satisfied() {
        Err(SynthError::Unsatisfied { index, .. }) => assert_eq!(Some(index), host.first_bad_row),
        other => panic!("unexpected {other:?}"),
    }
    let redo = ctx
        .synthesize_native(generator(&want, Fault::Panic), |ctx, b| ctx.synthesize(|| Ok(circuit(5)), b), aux_only(want.num_aux))
        .unwrap();
    assert!(!redo.products_on_host() && redo.aux() == want.aux());
    let s = cache.stats();
    assert_eq!((s.native_syntheses, s.native_rejections, s.deferred_products), (2, 1, 3));
}
