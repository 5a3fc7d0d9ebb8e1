use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use super::BLOCK_ROWS;
use crate::compiled::tests::assert_same;
use crate::{synthesize, AssignmentBuffers, CompiledR1cs, SynthError};

/// A chain of `len` constraints whose witness pauses every few thousand
/// variables (a slow witness, so the evaluator runs beside it), with a
/// public input allocated in the middle and named by every later row, and
/// `extra` variables past the recorded shape (a circuit bug) or a panic at
/// `panic_at`.
#[derive(Clone, Copy)]
struct SlowChain {
    len: usize,
    seed: u64,
    extra: usize,
    panic_at: Option<usize>,
}

impl SlowChain {
    fn new(len: usize, seed: u64) -> Self {
        SlowChain { len, seed, extra: 0, panic_at: None }
    }
}

impl Circuit<Scalar> for SlowChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut value = Scalar::from(self.seed + 2);
        let mut prev = cs.alloc(|| "x0", || Ok(value))?;
        let mut input: Option<(Variable, Scalar)> = None;
        for i in 1..self.len + self.extra {
            if Some(i) == self.panic_at {
                panic!("the circuit's own bug at {i}");
            }
            if i == self.len / 2 {
                let x = Scalar::from(self.seed * 7 + 1);
                input = Some((cs.alloc_input(|| "mid", || Ok(x))?, x));
            }
            // prev * prev = v - i, then prev * (prev + x) = v - x.
            let next = match input {
                Some((_, x)) => value * (value + x) + x,
                None => value.square() + Scalar::from(i as u64),
            };
            let v = cs.alloc(
                || "v",
                || {
                    if i % 4096 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(3));
                    }
                    Ok(next)
                },
            )?;
            match input {
                Some((x, _)) => cs.enforce(|| "", |lc| lc + prev, |lc| lc + prev + x, |lc| lc + v - x),
                None => cs.enforce(|| "", |lc| lc + prev, |lc| lc + prev, |lc| lc + v - (Scalar::from(i as u64), CS::one())),
            }
            prev = v;
            value = next;
        }
        Ok(())
    }
}

#[test]
fn rows_are_evaluated_while_the_witness_runs_and_match_plain_synthesis() {
    let len = 12 * BLOCK_ROWS + 1234;
    let (_, r1cs) = CompiledR1cs::compile(SlowChain::new(len, 1), AssignmentBuffers::heap()).unwrap();
    for seed in [2, 3] {
        let (fast, during, _) = r1cs.try_synthesize_overlapped(SlowChain::new(len, seed), AssignmentBuffers::heap(), None).unwrap().ok().unwrap();
        let plain = synthesize(SlowChain::new(len, seed), AssignmentBuffers::heap()).unwrap();
        assert_same(&fast, &plain);
        // The witness sleeps ~3 ms every 4096 variables: the evaluator has
        // time to follow it, inputs included.
        assert!(during >= 4 * BLOCK_ROWS, "only {during} rows evaluated during the witness");
        assert_eq!(during % BLOCK_ROWS, 0);
    }
}

#[test]
fn a_longer_or_shorter_witness_is_a_changed_structure_not_a_fault() {
    let len = 6 * BLOCK_ROWS;
    let (_, r1cs) = CompiledR1cs::compile(SlowChain::new(len, 1), AssignmentBuffers::heap()).unwrap();
    // Past the recorded aux count the feed refuses to write (its buffer
    // never grows under the evaluator); the counts catch it.
    let longer = SlowChain { extra: 5000, ..SlowChain::new(len, 2) };
    assert!(matches!(r1cs.synthesize(longer, AssignmentBuffers::heap()), Err(SynthError::StructureChanged { .. })));
    let shorter = SlowChain::new(len - 3 * BLOCK_ROWS, 2);
    assert!(matches!(r1cs.synthesize(shorter, AssignmentBuffers::heap()), Err(SynthError::StructureChanged { .. })));
    // And the next good witness is unaffected.
    let asg = r1cs.synthesize(SlowChain::new(len, 3), AssignmentBuffers::heap()).unwrap();
    assert_same(&asg, &synthesize(SlowChain::new(len, 3), AssignmentBuffers::heap()).unwrap());
}

#[test]
fn a_panicking_witness_stops_the_evaluator_and_propagates() {
    let len = 4 * BLOCK_ROWS;
    let (_, r1cs) = CompiledR1cs::compile(SlowChain::new(len, 1), AssignmentBuffers::heap()).unwrap();
    let bad = SlowChain { panic_at: Some(3 * BLOCK_ROWS), ..SlowChain::new(len, 2) };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r1cs.synthesize(bad, AssignmentBuffers::heap())));
    assert!(r.is_err(), "the panic reaches the caller (and the evaluator thread was joined)");
    r1cs.synthesize(SlowChain::new(len, 3), AssignmentBuffers::heap()).unwrap().check_satisfied().unwrap();
}

#[test]
fn block_needs_name_the_variables_each_block_reads() {
    let len = 3 * BLOCK_ROWS + 17;
    let (asg, r1cs) = CompiledR1cs::compile(SlowChain::new(len, 1), AssignmentBuffers::heap()).unwrap();
    // One input row per input at the end (ONE and "mid"), so 4 blocks.
    assert_eq!(r1cs.block_needs.len(), (len - 1 + 2).div_ceil(BLOCK_ROWS));
    // Row r (r >= 0) names v_r and v_(r+1) (aux r, r + 1); "mid" from row len/2 - 1.
    assert_eq!(r1cs.block_needs[0], (BLOCK_ROWS + 1, 1));
    assert_eq!(r1cs.block_needs[1], (2 * BLOCK_ROWS + 1, 2));
    assert_eq!(r1cs.block_needs.last().unwrap().0, asg.num_aux);
    asg.check_satisfied().unwrap();
}

#[test]
fn the_cache_counts_rows_beside_and_after_the_witness() {
    let len = 8 * BLOCK_ROWS;
    let cache = crate::CircuitCache::unbounded();
    let ctx = cache.context("chain", usize::MAX);
    ctx.synthesize(|| Ok(SlowChain::new(len, 1)), AssignmentBuffers::heap()).unwrap();
    let asg = ctx.synthesize(|| Ok(SlowChain::new(len, 2)), AssignmentBuffers::heap()).unwrap();
    asg.check_satisfied().unwrap();
    let s = cache.stats();
    assert_eq!((s.compiles, s.compiled_syntheses), (1, 1));
    assert_eq!(s.rows_beside_witness + s.rows_after_witness, asg.num_constraints as u64);
    assert!(s.rows_beside_witness >= 4 * BLOCK_ROWS as u64, "{s:?}");
}
