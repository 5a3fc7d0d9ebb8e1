//! Products left to the prover (`Products::Deferred`): the witness alone is
//! computed, and what a prover evaluates from the matrices, through
//! `products_checked` or the public `matrices()` view, is exactly what the
//! host path computes, with the same first unsatisfied row.

use blstrs::Scalar;
use ff::Field;
use proptest::prelude::*;

use super::tests::{RandomR1cs, ShapeShifter};
use crate::tests::FixedBuf;
use crate::workload::{SyntheticCircuit, WorkloadKind};
use crate::{synthesize, Assignment, AssignmentBuffers, CircuitCache, CompiledR1cs, Products, ScalarBuffer, SynthError};

/// No room for a/b/c at all (what the engine gives a partition whose
/// products run on the GPU), aux as large as the circuit needs.
pub(crate) fn aux_only(aux: usize) -> AssignmentBuffers {
    let f = |n| Box::new(FixedBuf(vec![Scalar::ZERO; n])) as Box<dyn ScalarBuffer>;
    AssignmentBuffers::new(f(0), f(0), f(0), f(aux))
}

/// a/b/c from the public matrix view alone, term by term: the encoding a
/// GPU backend uploads (bit 31 marks an input, ids index `coefficients`).
fn from_view(r1cs: &CompiledR1cs, input: &[Scalar], aux: &[Scalar]) -> [Vec<Scalar>; 3] {
    let coeffs = r1cs.coefficients();
    assert_eq!((coeffs[0], coeffs[1]), (Scalar::ONE, -Scalar::ONE), "ids 0 and 1 are the fast paths");
    r1cs.matrices().map(|m| {
        (0..m.row_start.len() - 1)
            .map(|r| {
                m.terms[m.row_start[r] as usize..m.row_start[r + 1] as usize].iter().fold(Scalar::ZERO, |acc, &[col, id]| {
                    let v = if col & CompiledR1cs::INPUT_BIT != 0 { input[(col ^ CompiledR1cs::INPUT_BIT) as usize] } else { aux[col as usize] };
                    acc + v * coeffs[id as usize]
                })
            })
            .collect()
    })
}

fn first_bad(plain: &Assignment, from: usize) -> Option<usize> {
    (from..plain.num_constraints).find(|&i| plain.a()[i] * plain.b()[i] != plain.c()[i])
}

fn deferred_r1cs(asg: &Assignment) -> &CompiledR1cs {
    match &asg.products {
        Products::Deferred(r) => r,
        Products::Host => panic!("the products were computed on the host"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A deferred synthesis writes the same witness as ordinary synthesis,
    /// and its products, evaluated later (all rows or a tail of them, or
    /// from the matrix view), equal ordinary synthesis's, with the same
    /// first unsatisfied row (random constraints rarely hold).
    #[test]
    fn deferred_products_equal_the_host_path(structure: u64, w1: u64, w2: u64, inputs in 0usize..4, constraints in 0usize..60, subsystems in 0usize..3, split in 0usize..100) {
        let c = |witness| RandomR1cs { structure, witness, inputs, constraints, subsystems };
        let cache = CircuitCache::unbounded();
        let ctx = cache.context("random", usize::MAX);
        ctx.synthesize(|| Ok(c(w1)), AssignmentBuffers::heap()).unwrap();
        let r1cs = cache.compiled("random").unwrap();
        let got = ctx.with_deferred_products(&r1cs).synthesize(|| Ok(c(w2)), aux_only(r1cs.shape().num_aux)).unwrap();
        let plain = synthesize(c(w2), AssignmentBuffers::heap()).unwrap();
        prop_assert!(!got.products_on_host());
        prop_assert_eq!(deferred_r1cs(&got).id(), r1cs.id());
        prop_assert_eq!(got.shape(), plain.shape());
        prop_assert!(got.input == plain.input && got.aux() == plain.aux());
        let n = plain.num_constraints;
        let mut abc = [vec![Scalar::ZERO; n], vec![Scalar::ZERO; n], vec![Scalar::ZERO; n]];
        let [a, b, cc] = &mut abc;
        let bad = r1cs.products_checked(0, &got.input, got.aux(), [a, b, cc]);
        prop_assert!(abc[0] == plain.a() && abc[1] == plain.b() && abc[2] == plain.c());
        prop_assert_eq!(bad, first_bad(&plain, 0));
        prop_assert!(from_view(&r1cs, &got.input, got.aux()) == [plain.a().to_vec(), plain.b().to_vec(), plain.c().to_vec()]);
        let k = split * n / 100;
        let mut tail = [vec![Scalar::ONE; n - k], vec![Scalar::ONE; n - k], vec![Scalar::ONE; n - k]];
        let [a, b, cc] = &mut tail;
        prop_assert_eq!(r1cs.products_checked(k, &got.input, got.aux(), [a, b, cc]), first_bad(&plain, k));
        prop_assert!(tail[0] == plain.a()[k..] && tail[1] == plain.b()[k..] && tail[2] == plain.c()[k..]);
        let check = |r: Result<(), SynthError>| match r { Ok(()) => None, Err(SynthError::Unsatisfied { index, .. }) => Some(index), Err(e) => panic!("{e}") };
        prop_assert_eq!(check(got.check_satisfied()), check(plain.check_satisfied()));
        prop_assert_eq!(cache.stats().deferred_products, 1);
        // Growable buffers stay empty: nothing is written to a/b/c.
        let heap = ctx.with_deferred_products(&r1cs).synthesize(|| Ok(c(w2)), AssignmentBuffers::heap()).unwrap();
        prop_assert!(heap.aux() == plain.aux());
        prop_assert!([&heap.buffers.a, &heap.buffers.b, &heap.buffers.c].iter().all(|b| b.as_slice().is_empty()));
    }
}

/// Rows past the tasks' boundaries (4096 rows each) are checked as well:
/// one wrong aux value on a satisfied circuit is found at its first row.
#[test]
fn a_bad_value_is_found_at_its_first_row_across_tasks() {
    let circuit = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 14, 2);
    let (_, r1cs) = CompiledR1cs::compile(circuit.with_witness(1), AssignmentBuffers::heap()).unwrap();
    let mut plain = synthesize(circuit.with_witness(3), AssignmentBuffers::heap()).unwrap();
    assert_eq!(r1cs.first_unsatisfied(&plain.input, plain.aux()), None);
    // Change the last aux variable named in the second task's rows.
    let col = r1cs.matrices()[0].terms[r1cs.matrices()[0].row_start[5000] as usize][0];
    assert_eq!(col & CompiledR1cs::INPUT_BIT, 0, "an aux variable");
    let target = col as usize;
    plain.buffers.aux.as_mut_slice()[target] += Scalar::ONE;
    let n = r1cs.num_constraints();
    let mut abc = [vec![Scalar::ZERO; n], vec![Scalar::ZERO; n], vec![Scalar::ZERO; n]];
    let [a, b, c] = &mut abc;
    let bad = r1cs.products_checked(0, &plain.input, plain.aux(), [a, b, c]).expect("the change breaks a row");
    let named = |r: usize| r1cs.matrices().iter().any(|m| m.terms[m.row_start[r] as usize..m.row_start[r + 1] as usize].iter().any(|t| t[0] as usize == target));
    assert!(named(bad) && bad <= 5000, "row {bad}");
    assert_eq!(r1cs.first_unsatisfied(&plain.input, plain.aux()), Some(bad));
}

/// A deferred synthesis that cannot take the compiled path (its shape
/// changed) needs a/b/c buffers: without them it is an error the engine
/// answers by synthesizing again with buffers.
#[test]
fn a_changed_shape_under_deferred_products_is_an_error_without_abc_buffers() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("shifter", usize::MAX);
    ctx.synthesize(|| Ok(ShapeShifter(2)), AssignmentBuffers::heap()).unwrap();
    let r1cs = cache.compiled("shifter").unwrap();
    let ok = ctx.with_deferred_products(&r1cs).synthesize(|| Ok(ShapeShifter(4)), aux_only(1)).unwrap();
    ok.check_satisfied().unwrap();
    match ctx.with_deferred_products(&r1cs).synthesize(|| Ok(ShapeShifter(3)), aux_only(2)) {
        Err(SynthError::BufferTooSmall { which: "a", capacity: 0, .. }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
#[should_panic(expected = "left to the prover")]
fn deferred_products_are_not_read_as_host_ones() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("shifter", usize::MAX);
    ctx.synthesize(|| Ok(ShapeShifter(2)), AssignmentBuffers::heap()).unwrap();
    let r1cs = cache.compiled("shifter").unwrap();
    let asg = ctx.with_deferred_products(&r1cs).synthesize(|| Ok(ShapeShifter(4)), aux_only(1)).unwrap();
    let _ = asg.a();
}
