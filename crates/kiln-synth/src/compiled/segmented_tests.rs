use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::SegmentedCircuit;
use crate::{synthesize, Assignment, AssignmentBuffers, CircuitCache, CircuitCacheStats, Whole};

/// A prefix (an input and its square) and `segments` chains: each takes
/// its own input, multiplies it by the prefix's square and squares the
/// result `len` times (plus `k % 2` more when `uneven`). `lie` makes a
/// segment's run compute a different prefix than the whole circuit does.
struct Chains {
    seed: u64,
    segments: usize,
    len: usize,
    uneven: bool,
    lie: bool,
}

impl Chains {
    fn value(&self, what: u64) -> Scalar {
        Scalar::random(ChaCha8Rng::seed_from_u64(self.seed * 1000 + what))
    }

    fn prefix<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS, lie: bool) -> Result<(bellpepper_core::Variable, Scalar), SynthesisError> {
        let x = self.value(0) + if lie { Scalar::ONE } else { Scalar::ZERO };
        let xv = cs.alloc_input(|| "x", || Ok(x))?;
        let p = x.square();
        let pv = cs.alloc(|| "p", || Ok(p))?;
        cs.enforce(|| "p = x^2", |lc| lc + xv, |lc| lc + xv, |lc| lc + pv);
        Ok((pv, p))
    }

    fn segment<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS, k: usize, (pv, p): (bellpepper_core::Variable, Scalar)) -> Result<(), SynthesisError> {
        let y = self.value(1 + k as u64);
        let yv = cs.alloc_input(|| "y", || Ok(y))?;
        let mut v = p * y;
        let mut vv = cs.alloc(|| "v", || Ok(v))?;
        cs.enforce(|| "v = p y", |lc| lc + pv, |lc| lc + yv, |lc| lc + vv);
        for _ in 0..self.len + if self.uneven { k % 2 } else { 0 } {
            let w = v.square();
            let wv = cs.alloc(|| "w", || Ok(w))?;
            cs.enforce(|| "w = v^2", |lc| lc + vv, |lc| lc + vv, |lc| lc + wv);
            (v, vv) = (w, wv);
        }
        Ok(())
    }
}

impl SegmentedCircuit for Chains {
    fn segments(&self) -> usize {
        self.segments
    }

    fn synthesize_whole<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        let p = self.prefix(cs, false)?;
        (0..self.segments).try_for_each(|k| self.segment(cs, k, p))
    }

    fn synthesize_part<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS, segment: Option<usize>) -> Result<(), SynthesisError> {
        let p = self.prefix(cs, self.lie && segment.is_some())?;
        segment.map_or(Ok(()), |k| self.segment(cs, k, p))
    }
}

fn assert_same(x: &Assignment, y: &Assignment) {
    assert_eq!(x.shape(), y.shape());
    assert_eq!(x.input, y.input);
    assert_eq!(x.aux(), y.aux());
    assert_eq!((x.a(), x.b(), x.c()), (y.a(), y.b(), y.c()));
}

/// The segmented witness equals the whole circuit's ordinary synthesis,
/// and its segments really took the parallel path (no structure change, no
/// plain fallback).
#[test]
fn segments_in_parallel_give_the_whole_circuits_assignment() {
    for (segments, len) in [(1, 5), (2, 1), (7, 30), (16, 3)] {
        let cache = CircuitCache::unbounded();
        for seed in 1..4 {
            let c = Chains { seed, segments, len, uneven: false, lie: false };
            let got = cache.context("chains", usize::MAX).synthesize_segmented(&c, AssignmentBuffers::heap()).unwrap();
            let want = synthesize(Whole(&c), AssignmentBuffers::heap()).unwrap();
            assert_same(&got, &want);
            got.check_satisfied().unwrap();
        }
        let s = cache.stats();
        assert_eq!((s.compiles, s.compiled_syntheses, s.segmented_syntheses, s.plain_syntheses, s.structure_changes), (1, 2, 2, 0, 0), "{segments} segments");
    }
}

/// Segments of different shapes cannot be placed before they run: the
/// compiled path then runs the whole circuit on one thread, still exact.
#[test]
fn uneven_segments_fall_back_to_one_thread() {
    let cache = CircuitCache::unbounded();
    for seed in 1..4 {
        let c = Chains { seed, segments: 5, len: 4, uneven: true, lie: false };
        let got = cache.context("uneven", usize::MAX).synthesize_segmented(&c, AssignmentBuffers::heap()).unwrap();
        assert_same(&got, &synthesize(Whole(&c), AssignmentBuffers::heap()).unwrap());
    }
    let s = cache.stats();
    assert_eq!((s.compiled_syntheses, s.segmented_syntheses, s.structure_changes), (2, 0, 0));
}

/// A circuit that breaks the contract (its segments recompute a different
/// prefix) is caught and synthesized the ordinary way, never mixed.
#[test]
fn a_prefix_that_differs_in_a_segment_is_caught() {
    let cache = CircuitCache::unbounded();
    let honest = Chains { seed: 9, segments: 4, len: 6, uneven: false, lie: false };
    cache.context("liar", usize::MAX).synthesize_segmented(&honest, AssignmentBuffers::heap()).unwrap();
    let liar = Chains { lie: true, ..honest };
    let got = cache.context("liar", usize::MAX).synthesize_segmented(&liar, AssignmentBuffers::heap()).unwrap();
    assert_same(&got, &synthesize(Whole(&liar), AssignmentBuffers::heap()).unwrap());
    let s = cache.stats();
    assert_eq!((s.structure_changes, s.plain_syntheses, s.segmented_syntheses), (1, 1, 0));
}

/// Recorded segment by segment on every core, a circuit compiles to the
/// matrices its whole recording gives: later instances (even, uneven
/// segments) synthesize to the ordinary assignment, and the compile's own
/// assignment is the ordinary one too.
#[test]
fn compiling_segments_in_parallel_gives_the_whole_circuits_matrices() {
    use super::CompiledR1cs;
    use std::sync::atomic::AtomicU64;
    for (segments, len, uneven) in [(3, 2, false), (7, 30, false), (16, 3, false), (5, 4, true)] {
        let c = Chains { seed: 1, segments, len, uneven, lie: false };
        let (first, r1cs) = match CompiledR1cs::try_compile_segmented(&c, AssignmentBuffers::heap(), usize::MAX, &AtomicU64::new(0), &AtomicU64::new(0)).unwrap() {
            Ok(done) => done,
            Err(_) => panic!("{segments} segments: not compiled"),
        };
        let (_, whole) = CompiledR1cs::compile(Whole(&c), AssignmentBuffers::heap()).unwrap();
        assert_eq!(r1cs.shape(), whole.shape(), "{segments} segments");
        assert_eq!(r1cs.nnz(), whole.nnz(), "{segments} segments");
        assert_same(&first, &synthesize(Whole(&c), AssignmentBuffers::heap()).unwrap());
        for seed in 2..4 {
            let c = Chains { seed, ..c };
            let got = r1cs.synthesize(Whole(&c), AssignmentBuffers::heap()).unwrap();
            assert_same(&got, &synthesize(Whole(&c), AssignmentBuffers::heap()).unwrap());
            got.check_satisfied().unwrap();
        }
    }
}

/// While one worker compiles a segmented circuit (its memory admitted),
/// another waits for the compiled form instead of synthesizing the
/// ordinary way on one core beside it.
#[test]
fn a_second_worker_waits_for_a_segmented_compile() {
    let cache = CircuitCache::unbounded();
    let slow = Chains { seed: 1, segments: 4, len: 20_000, uneven: false, lie: false };
    std::thread::scope(|s| {
        let first = s.spawn(|| cache.context("wait", usize::MAX).synthesize_segmented(&slow, AssignmentBuffers::heap()).unwrap());
        while !cache.is_compiling("wait") && !first.is_finished() {
            std::thread::yield_now();
        }
        // Past its (immediate) admission: the second worker must wait, or
        // find the compile done; either way it never goes the ordinary way.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let c = Chains { seed: 2, ..slow };
        let got = cache.context("wait", usize::MAX).synthesize_segmented(&c, AssignmentBuffers::heap()).unwrap();
        assert_same(&got, &synthesize(Whole(&c), AssignmentBuffers::heap()).unwrap());
        first.join().unwrap();
    });
    let st = cache.stats();
    assert_eq!((st.compiles, st.compiled_syntheses, st.plain_syntheses), (1, 1, 0), "{st:?}");
}

/// With deferred products the segments' witnesses still run in parallel,
/// and the products evaluated afterwards are the whole circuit's.
#[test]
fn deferred_products_of_a_segmented_circuit_are_the_whole_circuits() {
    use crate::compiled::deferred_tests::aux_only;
    let c = |seed| Chains { seed, segments: 7, len: 30, uneven: false, lie: false };
    let cache = CircuitCache::unbounded();
    let ctx = cache.context("chains", usize::MAX);
    ctx.synthesize_segmented(&c(1), AssignmentBuffers::heap()).unwrap();
    let r1cs = cache.compiled("chains").unwrap();
    let got = ctx.with_deferred_products(&r1cs).synthesize_segmented(&c(2), aux_only(r1cs.shape().num_aux)).unwrap();
    let want = synthesize(Whole(&c(2)), AssignmentBuffers::heap()).unwrap();
    assert!(!got.products_on_host());
    assert!(got.input == want.input && got.aux() == want.aux());
    let n = want.num_constraints;
    let mut abc = [vec![Scalar::ZERO; n], vec![Scalar::ZERO; n], vec![Scalar::ZERO; n]];
    let [a, b, cc] = &mut abc;
    assert_eq!(r1cs.products_checked(0, &got.input, got.aux(), [a, b, cc]), None);
    assert!(abc[0] == want.a() && abc[1] == want.b() && abc[2] == want.c());
    let s = cache.stats();
    assert_eq!((s.segmented_syntheses, s.deferred_products), (1, 1), "the recording is not counted");
}

/// Two syntheses of one segmented circuit in one rayon pool, as the engine's
/// synthesis workers run them (each `install`s its partition): while the
/// first compiles, the second must not block a pool thread. A pool thread
/// that waits in the compile's parallel recording takes up queued jobs, the
/// second synthesis among them; blocked there until the compile ends, it
/// would hold the compile's own unfinished frame under it forever.
#[test]
fn a_second_synthesis_in_the_compiles_pool_does_not_deadlock_it() {
    two_syntheses_sharing_a_pool("pool", std::time::Duration::from_millis(20), |cache, pool, _, c| {
        pool.install(|| cache.context("pool", usize::MAX).synthesize_segmented(c, AssignmentBuffers::heap()).unwrap())
    });
}

/// Synthesizes seeds 1 and 2 of a slow segmented circuit on threads of
/// their own sharing one 2-thread pool, as the engine's workers do; seed 2
/// starts `settle` after seed 1 begins compiling `key`. Fails if either
/// does not end within a minute.
fn two_syntheses_sharing_a_pool(
    key: &'static str,
    settle: std::time::Duration,
    synthesize: fn(&CircuitCache, &rayon::ThreadPool, u64, &Chains) -> Assignment,
) -> CircuitCacheStats {
    use std::sync::{mpsc, Arc};
    let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap());
    let cache = Arc::new(CircuitCache::unbounded());
    let slow = Chains { seed: 1, segments: 16, len: 100_000, uneven: false, lie: false };
    let (tx, rx) = mpsc::channel();
    for seed in [1, 2] {
        let (pool, cache, tx) = (pool.clone(), cache.clone(), tx.clone());
        std::thread::spawn(move || {
            if seed == 2 {
                while !cache.is_compiling(key) {
                    std::thread::yield_now();
                }
                std::thread::sleep(settle);
            }
            let c = Chains { seed, ..slow };
            synthesize(&cache, &pool, seed, &c).check_satisfied().unwrap();
            tx.send(seed).unwrap();
        });
    }
    for _ in 0..2 {
        rx.recv_timeout(std::time::Duration::from_secs(60)).expect("a synthesis in the pool never ended: the pool deadlocked");
    }
    cache.stats()
}

/// The engine's way: each synthesis takes its compile turn on its own
/// thread before entering the pool, so the second waits there for the
/// compile and then takes the compiled path instead of the ordinary one.
#[test]
fn a_turn_taken_outside_the_pool_waits_for_the_compile_and_uses_it() {
    let s = two_syntheses_sharing_a_pool("turn", std::time::Duration::ZERO, |cache, pool, seed, c| {
        let turn = cache.take_turn("turn", usize::MAX);
        assert_eq!(turn.is_some(), seed == 1, "the first compiles, the second waits for it");
        let ctx = cache.context("turn", usize::MAX).with_turn(turn.as_ref());
        pool.install(|| ctx.synthesize_segmented(c, AssignmentBuffers::heap()).unwrap())
    });
    assert_eq!((s.compiles, s.plain_syntheses), (1, 0), "{s:?}");
    assert!(s.segmented_syntheses >= 1, "the second synthesis used the compiled form: {s:?}");
}

/// A turn dropped unused gives the claim back: the next synthesis compiles.
#[test]
fn an_unused_turn_gives_its_claim_back() {
    let cache = CircuitCache::unbounded();
    let turn = cache.take_turn("unused", usize::MAX).expect("nothing compiled yet");
    assert!(cache.is_compiling("unused"));
    drop(turn);
    assert!(!cache.is_compiling("unused"));
    assert!(cache.take_turn("unused", usize::MAX).is_some(), "the claim is free again");
}

/// A compile that records the whole circuit on one thread takes as long as
/// an ordinary synthesis: a turn taken meanwhile does not wait for it.
#[test]
fn a_turn_does_not_wait_for_a_whole_circuit_compile() {
    use std::sync::Arc;
    let cache = Arc::new(CircuitCache::unbounded());
    let slow = Chains { seed: 1, segments: 16, len: 100_000, uneven: false, lie: false };
    let first = {
        let cache = cache.clone();
        std::thread::spawn(move || {
            let turn = cache.take_turn("whole", usize::MAX).expect("nothing compiled yet");
            let ctx = cache.context("whole", usize::MAX).with_turn(Some(&turn));
            let c = Chains { seed: 1, ..slow };
            ctx.synthesize(|| Ok(Whole(&c)), AssignmentBuffers::heap()).unwrap().check_satisfied().unwrap();
        })
    };
    while !cache.is_compiling("whole") {
        std::thread::yield_now();
    }
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(cache.take_turn("whole", usize::MAX).is_none(), "the key is being compiled");
    let c = Chains { seed: 2, ..slow };
    cache.context("whole", usize::MAX).synthesize(|| Ok(Whole(&c)), AssignmentBuffers::heap()).unwrap().check_satisfied().unwrap();
    first.join().unwrap();
    let s = cache.stats();
    assert_eq!((s.compiles, s.plain_syntheses), (1, 1), "the second went the ordinary way while the first compiled: {s:?}");
}
