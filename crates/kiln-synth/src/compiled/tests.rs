use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::workload::{SyntheticCircuit, WorkloadKind};
use crate::{synthesize, Assignment, AssignmentBuffers, CircuitCache, CompiledR1cs, ScalarBuffer, SynthContext, SynthError};

/// A random R1CS: the structure (which variables, which coefficients,
/// including 0, 1 and -1, repeated variables) from `structure`, the values
/// from `witness`; optionally part of it in sub-systems appended with
/// `extend`, whose own ONE appears in B. Constraints need not hold: the test
/// compares evaluations, not satisfiability.
#[derive(Clone, Copy, Debug)]
pub(super) struct RandomR1cs {
    pub(super) structure: u64,
    pub(super) witness: u64,
    pub(super) inputs: usize,
    pub(super) constraints: usize,
    pub(super) subsystems: usize,
}

fn coeff(r: &mut ChaCha8Rng) -> Scalar {
    match r.gen_range(0..6) {
        0 => Scalar::ZERO,
        1 | 2 => Scalar::ONE,
        3 => -Scalar::ONE,
        4 => Scalar::from(r.gen_range(2u64..9)),
        _ => Scalar::random(&mut *r),
    }
}

fn random_lc(r: &mut ChaCha8Rng, vars: &[Variable]) -> LinearCombination<Scalar> {
    let terms = r.gen_range(0..5);
    (0..terms).fold(LinearCombination::zero(), |lc, _| lc + (coeff(r), vars[r.gen_range(0..vars.len())]))
}

fn build<CS: ConstraintSystem<Scalar>>(cs: &mut CS, sr: &mut ChaCha8Rng, wr: &mut ChaCha8Rng, inputs: usize, constraints: usize) -> Result<(), SynthesisError> {
    let mut vars = vec![CS::one()];
    for _ in 0..inputs {
        let v = Scalar::random(&mut *wr);
        vars.push(cs.alloc_input(|| "x", || Ok(v))?);
    }
    for _ in 0..constraints {
        if sr.gen_bool(0.6) {
            let v = Scalar::random(&mut *wr);
            vars.push(cs.alloc(|| "v", || Ok(v))?);
        }
        let (a, b, c) = (random_lc(sr, &vars), random_lc(sr, &vars), random_lc(sr, &vars));
        cs.enforce(|| "", |_| a, |_| b, |_| c);
    }
    Ok(())
}

impl Circuit<Scalar> for RandomR1cs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut sr = ChaCha8Rng::seed_from_u64(self.structure);
        let mut wr = ChaCha8Rng::seed_from_u64(self.witness);
        build(cs, &mut sr, &mut wr, self.inputs, self.constraints)?;
        if CS::is_extensible() {
            for _ in 0..self.subsystems {
                let mut sub = CS::new();
                sub.alloc_input(|| "temp ONE", || Ok(Scalar::ONE))?;
                build(&mut sub, &mut sr, &mut wr, 1, self.constraints / 2 + 1)?;
                cs.extend(&sub);
            }
        }
        Ok(())
    }
}

pub(super) fn assert_same(fast: &Assignment, plain: &Assignment) {
    assert_eq!(fast.num_constraints, plain.num_constraints);
    assert_eq!(fast.num_aux, plain.num_aux);
    assert_eq!(fast.input, plain.input);
    assert_eq!(fast.aux(), plain.aux());
    assert!(fast.a() == plain.a(), "a differs");
    assert!(fast.b() == plain.b(), "b differs");
    assert!(fast.c() == plain.c(), "c differs");
    assert_eq!(fast.a_aux_density, plain.a_aux_density);
    assert_eq!(fast.b_input_density, plain.b_input_density);
    assert_eq!(fast.b_aux_density, plain.b_aux_density);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The compiled path (compile on one witness, synthesize another) gives
    /// exactly what ordinary synthesis gives: a/b/c, assignments, densities.
    #[test]
    fn compiled_equals_plain(structure: u64, w1: u64, w2: u64, inputs in 0usize..4, constraints in 0usize..60, subsystems in 0usize..3) {
        let c = |witness| RandomR1cs { structure, witness, inputs, constraints, subsystems };
        let (first, r1cs) = CompiledR1cs::compile(c(w1), AssignmentBuffers::heap()).unwrap();
        assert_same(&first, &synthesize(c(w1), AssignmentBuffers::heap()).unwrap());
        let fast = r1cs.synthesize(c(w2), AssignmentBuffers::heap()).unwrap();
        assert_same(&fast, &synthesize(c(w2), AssignmentBuffers::heap()).unwrap());
        prop_assert_eq!(r1cs.shape(), fast.shape());
    }
}

#[test]
fn synthetic_workloads_match_and_stay_satisfied() {
    for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
        let c = SyntheticCircuit::filling_domain(kind, 12, 3);
        let (_, r1cs) = CompiledR1cs::compile(c.with_witness(1), AssignmentBuffers::heap()).unwrap();
        let fast = r1cs.synthesize(c.with_witness(2), AssignmentBuffers::heap()).unwrap();
        fast.check_satisfied().unwrap();
        assert_same(&fast, &synthesize(c.with_witness(2), AssignmentBuffers::heap()).unwrap());
        // 8 bytes per term and 4 per row, 32 per distinct coefficient (dense
        // draws 4 random ones per constraint), and vector slack.
        let floor = r1cs.nnz() * 8 + 3 * 4096 * 4;
        assert!(r1cs.heap_bytes() < 2 * floor + 4 * 4096 * 32, "{r1cs:?}");
    }
}

/// Allocates one more variable and constraint when its witness is odd: a
/// circuit bug the compiled path must catch.
#[derive(Clone, Copy)]
pub(super) struct ShapeShifter(pub(super) u64);

impl Circuit<Scalar> for ShapeShifter {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::from(self.0)))?;
        cs.enforce(|| "", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + x);
        if self.0 % 2 == 1 {
            let y = cs.alloc(|| "y", || Ok(Scalar::from(self.0)))?;
            cs.enforce(|| "", |lc| lc + y, |lc| lc + CS::one(), |lc| lc + x);
        }
        Ok(())
    }
}

#[test]
fn a_changed_shape_is_caught() {
    let (_, r1cs) = CompiledR1cs::compile(ShapeShifter(2), AssignmentBuffers::heap()).unwrap();
    r1cs.synthesize(ShapeShifter(4), AssignmentBuffers::heap()).unwrap();
    match r1cs.synthesize(ShapeShifter(3), AssignmentBuffers::heap()) {
        Err(SynthError::StructureChanged { found, recorded }) => {
            assert_eq!(found, "1 inputs, 2 aux, 3 constraints");
            assert_eq!(recorded, "1 inputs, 1 aux, 2 constraints");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn cache_falls_back_to_plain_when_the_shape_changes() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("shifter", usize::MAX);
    ctx.synthesize(|| Ok(ShapeShifter(2)), AssignmentBuffers::heap()).unwrap();
    let asg = ctx.synthesize(|| Ok(ShapeShifter(3)), AssignmentBuffers::heap()).unwrap();
    asg.check_satisfied().unwrap();
    assert_same(&asg, &synthesize(ShapeShifter(3), AssignmentBuffers::heap()).unwrap());
    let s = cache.stats();
    assert_eq!((s.compiles, s.structure_changes, s.plain_syntheses, s.circuits), (1, 1, 1, 0));
    assert!(cache.refusal("shifter").unwrap().contains("shape changed"));
    // From then on the key is synthesized the ordinary way.
    ctx.synthesize(|| Ok(ShapeShifter(4)), AssignmentBuffers::heap()).unwrap();
    assert_eq!(cache.stats().plain_syntheses, 2);
}

/// A structure recorded on probation is used by no one else until it is
/// confirmed; dropped unconfirmed (its synthesis came from a malformed
/// input), it is forgotten and the next synthesis records the key again,
/// instead of every later instance being held to the bad shape.
#[test]
fn a_recording_on_probation_is_dropped_unless_confirmed() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("shifter", usize::MAX);
    // A malformed first instance records a shape of its own.
    let slot = std::sync::OnceLock::new();
    ctx.with_probation(&slot).synthesize(|| Ok(ShapeShifter(3)), AssignmentBuffers::heap()).unwrap();
    let bad = slot.into_inner().expect("the compile put its recording in the slot");
    assert_eq!(bad.key(), "shifter");
    // While on probation, others take the ordinary path.
    ctx.synthesize(|| Ok(ShapeShifter(2)), AssignmentBuffers::heap()).unwrap();
    assert_eq!((cache.stats().plain_syntheses, cache.stats().structure_changes), (1, 0));
    drop(bad); // its proof never verified
    assert_eq!(cache.stats().circuits, 0);
    // The next instance records the key again; confirmed, it serves everyone.
    let slot = std::sync::OnceLock::new();
    ctx.with_probation(&slot).synthesize(|| Ok(ShapeShifter(2)), AssignmentBuffers::heap()).unwrap();
    slot.into_inner().unwrap().confirm();
    let asg = ctx.synthesize(|| Ok(ShapeShifter(4)), AssignmentBuffers::heap()).unwrap();
    asg.check_satisfied().unwrap();
    let s = cache.stats();
    assert_eq!((s.compiles, s.compiled_syntheses, s.structure_changes, s.circuits), (2, 1, 0, 1));
    // A compiled (not compiling) synthesis leaves its slot empty.
    let slot = std::sync::OnceLock::new();
    ctx.with_probation(&slot).synthesize(|| Ok(ShapeShifter(6)), AssignmentBuffers::heap()).unwrap();
    assert!(slot.get().is_none());
}

/// A buffer that cannot grow, like a pinned one.
struct FixedBuf(Vec<Scalar>);
impl ScalarBuffer for FixedBuf {
    fn as_slice(&self) -> &[Scalar] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        &mut self.0
    }
}

fn fixed(abc: usize, aux: usize) -> AssignmentBuffers {
    let f = |n| Box::new(FixedBuf(vec![Scalar::ZERO; n])) as Box<dyn ScalarBuffer>;
    AssignmentBuffers::new(f(abc), f(abc), f(abc), f(aux))
}

#[test]
fn fixed_buffers_too_small_are_clear_errors() {
    let c = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 6, 2);
    let (_, r1cs) = CompiledR1cs::compile(c.with_witness(1), AssignmentBuffers::heap()).unwrap();
    let aux = r1cs.shape().num_aux;
    let ok = r1cs.synthesize(c.with_witness(2), fixed(64, aux)).unwrap();
    ok.check_satisfied().unwrap();
    match r1cs.synthesize(c.with_witness(2), fixed(10, aux)) {
        Err(SynthError::BufferTooSmall { which: "a", needed: 64, capacity: 10 }) => {}
        other => panic!("unexpected {other:?}"),
    }
    match r1cs.synthesize(c.with_witness(2), fixed(64, 7)) {
        Err(SynthError::BufferTooSmall { which: "aux", needed, capacity: 7 }) => assert_eq!(needed, aux),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_failed_compile_is_retried_and_plain_context_never_caches() {
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("k", usize::MAX);
    let c = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 6, 1);
    // No witness seed: the circuit's own synthesis fails, during the compile.
    assert!(matches!(ctx.synthesize(|| Ok(c), AssignmentBuffers::heap()), Err(SynthError::Circuit(_))));
    assert_eq!(cache.stats().compiles, 0);
    ctx.synthesize(|| Ok(c.with_witness(1)), AssignmentBuffers::heap()).unwrap();
    assert_eq!((cache.stats().compiles, cache.stats().circuits), (1, 1));
    let plain = SynthContext::plain();
    plain.synthesize(|| Ok(c.with_witness(1)), AssignmentBuffers::heap()).unwrap();
    assert_eq!(cache.stats().plain_syntheses, 0);
    assert!(cache.evict("k"));
    assert_eq!(cache.stats().circuits, 0);
}

/// An admission that takes one of `slots` and gives it back when dropped.
struct Slot(Arc<AtomicUsize>);
impl crate::Admission for Slot {}
impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A cache admitting a compiled circuit while one of `slots` is free.
fn cache_with_slots(slots: &Arc<AtomicUsize>) -> CircuitCache {
    let s = slots.clone();
    CircuitCache::new(move |_bytes| {
        s.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).map_err(|_| "no room".to_string())?;
        Ok(Box::new(Slot(s.clone())) as Box<dyn crate::Admission>)
    })
}

#[test]
fn admission_evicts_the_least_recently_used_then_refuses() {
    // Admit at most one compiled circuit at a time: the held token is the budget.
    let slots = Arc::new(AtomicUsize::new(1));
    let cache = cache_with_slots(&slots);
    let circuit = |log| SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, log, 1).with_witness(5);
    cache.context("a", usize::MAX).synthesize(|| Ok(circuit(6)), AssignmentBuffers::heap()).unwrap();
    cache.context("b", usize::MAX).synthesize(|| Ok(circuit(7)), AssignmentBuffers::heap()).unwrap();
    let s = cache.stats();
    assert_eq!((s.circuits, s.compiles, s.refusals), (1, 2, 0), "a was evicted for b");
    assert!(cache.evict("b"));
    assert_eq!(slots.load(Ordering::SeqCst), 1, "eviction returned the slot");
}

#[test]
fn a_circuit_still_held_is_not_dropped_for_memory() {
    let slots = Arc::new(AtomicUsize::new(2));
    let cache = cache_with_slots(&slots);
    let c = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 6, 1).with_witness(3);
    cache.context("a", usize::MAX).synthesize(|| Ok(c), AssignmentBuffers::heap()).unwrap();
    cache.context("b", usize::MAX).synthesize(|| Ok(c), AssignmentBuffers::heap()).unwrap();
    // a is the least recently used, but a synthesis holds it: b goes.
    let held = cache.compiled("a").expect("a is compiled");
    let _ = cache.compiled("b");
    assert!(cache.evict_least_recent(None).is_some());
    assert_eq!((cache.stats().circuits, slots.load(Ordering::SeqCst)), (1, 1), "b dropped, its admission returned");
    assert_eq!(cache.evict_least_recent(None), None, "a is held: nothing to drop");
    assert_eq!(slots.load(Ordering::SeqCst), 1, "a's admission is kept while it is held");
    drop(held);
    assert!(cache.evict_least_recent(None).is_some());
    assert_eq!((cache.stats().circuits, slots.load(Ordering::SeqCst)), (0, 2), "a dropped, every slot free");
}

#[test]
fn concurrent_workers_share_one_compile() {
    let cache = CircuitCache::unbounded();
    let c = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 10, 2);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let cache = &cache;
            s.spawn(move || {
                for i in 0..3 {
                    let asg = cache.context("fc", usize::MAX).synthesize(|| Ok(c.with_witness(t * 10 + i)), AssignmentBuffers::heap()).unwrap();
                    asg.check_satisfied().unwrap();
                }
            });
        }
    });
    let s = cache.stats();
    assert_eq!(s.compiles, 1);
    assert_eq!(s.compiles + s.compiled_syntheses + s.plain_syntheses, 12);
}

#[test]
fn a_recording_past_its_allowance_falls_back_to_plain() {
    let cache = CircuitCache::unbounded();
    let c = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 12, 1);
    let ctx = cache.context("fc", 64 << 10);
    let asg = ctx.synthesize(|| Ok(c.with_witness(1)), AssignmentBuffers::heap()).unwrap();
    assert_same(&asg, &synthesize(c.with_witness(1), AssignmentBuffers::heap()).unwrap());
    let s = cache.stats();
    assert_eq!((s.compiles, s.circuits, s.refusals, s.plain_syntheses), (0, 0, 1, 1));
    assert!(cache.refusal("fc").unwrap().contains("allowance"), "{:?}", cache.refusal("fc"));
}
