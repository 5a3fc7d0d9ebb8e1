//! Payloads that decode but carry wrong values, through synthesis (issue
//! 22, part 1). A PoRep C1 output is only decoded when its job is built
//! (its values are checked by the proof's verification), and filecoin-proofs'
//! PoSt checks cover the challenges, not every Merkle path value, so such
//! values reach the native witness generators and the circuits.
//!
//! Each case builds the mutated payload's job; when it builds, partition 0
//! is synthesized twice: the ordinary way, and through a circuit cache that
//! recorded the valid payload's circuit first (so the native generator is
//! taken, its witness checked against the recording, and the gadget path
//! redone after a rejection). Pass: no panic in kiln's own code (a panic
//! inside filecoin-proofs' gadgets is allowed: the pipeline fails that job
//! only), and both syntheses end the same way: the same assignment bit for
//! bit, or both an error.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_pipeline::JobSource;
use kiln_synth::{Assignment, AssignmentBuffers, CircuitCache, SynthContext, SynthError};
use proptest::prop_assert;
use proptest::test_runner::{TestCaseError, TestRunner};

use super::{mutate, payloads};

/// Panics raised in this workspace's code (their location is a path under
/// `crates/`; dependencies' are absolute), recorded by a hook installed once.
static KILN_PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn watch_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.location().is_some_and(|l| l.file().starts_with("crates/")) {
                KILN_PANICS.lock().unwrap_or_else(|e| e.into_inner()).push(format!("{info}"));
            }
            previous(info)
        }));
    });
}

fn kiln_panics() -> Vec<String> {
    std::mem::take(&mut *KILN_PANICS.lock().unwrap_or_else(|e| e.into_inner()))
}

/// How the cases ended, for the summary line.
#[derive(Default)]
struct Tally {
    refused: AtomicU64,
    both_failed: AtomicU64,
    gadget_panicked: AtomicU64,
    unsatisfied: AtomicU64,
    satisfied: AtomicU64,
    native_taken: AtomicU64,
    native_rejected: AtomicU64,
}

impl Tally {
    fn line(&self) -> String {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "refused when built {}, both syntheses failed {} (gadget panics {}), same unsatisfied assignment {}, same satisfied assignment {}; native witnesses taken {}, rejected {}",
            n(&self.refused),
            n(&self.both_failed),
            n(&self.gadget_panicked),
            n(&self.unsatisfied),
            n(&self.satisfied),
            n(&self.native_taken),
            n(&self.native_rejected)
        )
    }
}

type Synthesized = std::thread::Result<Result<Assignment, SynthError>>;

fn synthesize(job: &dyn JobSource, ctx: SynthContext<'_>) -> Synthesized {
    catch_unwind(AssertUnwindSafe(|| job.synthesize(0, AssignmentBuffers::heap(), ctx)))
}

fn same(a: &Assignment, b: &Assignment) -> bool {
    a.shape() == b.shape() && a.input == b.input && a.aux() == b.aux() && (a.a(), a.b(), a.c()) == (b.a(), b.b(), b.c())
}

const KEY: &str = "fuzz-synthesis";

/// One case: `mutated` (a mutation of `valid`) built and synthesized both
/// ways; `recording` holds a cache with `valid`'s circuit recorded (made
/// here when empty).
fn case(valid: &Payload, mutated: &Payload, recording: &Mutex<Option<CircuitCache>>, tally: &Tally) -> Result<(), TestCaseError> {
    let job = match kiln_filecoin::job_for_payload(mutated) {
        Ok(j) => j,
        Err(m) => {
            prop_assert!(m.len() > 10, "an unclear refusal: {m:?}");
            tally.refused.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
    };
    let mut slot = recording.lock().unwrap_or_else(|e| e.into_inner());
    let cache = slot.get_or_insert_with(|| {
        let cache = CircuitCache::unbounded();
        let valid = kiln_filecoin::job_for_payload(valid).expect("the valid payload builds");
        valid.synthesize(0, AssignmentBuffers::heap(), cache.context(KEY, usize::MAX)).expect("the valid payload synthesizes");
        cache
    });
    kiln_panics();
    let before = cache.stats();
    let plain = synthesize(&*job, SynthContext::plain());
    let cached = synthesize(&*job, cache.context(KEY, usize::MAX));
    let stats = cache.stats();
    tally.native_taken.fetch_add(stats.native_syntheses - before.native_syntheses, Ordering::Relaxed);
    tally.native_rejected.fetch_add(stats.native_rejections - before.native_rejections, Ordering::Relaxed);
    if stats.compiles != 1 {
        *slot = None; // the case's circuit took the key over: record the valid one again
    }
    let panics = kiln_panics();
    prop_assert!(panics.is_empty(), "kiln's code panicked: {panics:#?}");
    match (&plain, &cached) {
        (Ok(Ok(p)), Ok(Ok(c))) => {
            prop_assert!(same(p, c), "the cached synthesis differs from the ordinary one ({stats:?})");
            match p.check_satisfied() {
                Ok(()) => tally.satisfied.fetch_add(1, Ordering::Relaxed),
                Err(_) => tally.unsatisfied.fetch_add(1, Ordering::Relaxed),
            };
        }
        (Ok(Err(_)) | Err(_), Ok(Err(_)) | Err(_)) => {
            if plain.is_err() {
                tally.gadget_panicked.fetch_add(1, Ordering::Relaxed);
            }
            if let Ok(Err(e)) = &cached {
                prop_assert!(e.to_string().len() > 10, "an unclear synthesis error: {e:?}");
            }
            tally.both_failed.fetch_add(1, Ordering::Relaxed);
        }
        _ => {
            let said = |s: &Synthesized| match s {
                Ok(Ok(_)) => "an assignment".to_string(),
                Ok(Err(e)) => format!("error {e}"),
                Err(_) => "a panic".to_string(),
            };
            return Err(TestCaseError::fail(format!(
                "the ordinary synthesis gave {}, the cached one {} ({:?})",
                said(&plain),
                said(&cached),
                stats
            )));
        }
    }
    Ok(())
}

/// Cases for these slower properties: `KILN_FUZZ_SYNTH_CASES`, else a
/// hundredth of `KILN_FUZZ_CASES`, at least `default`.
fn synth_cases(default: u32) -> u32 {
    match std::env::var("KILN_FUZZ_SYNTH_CASES").ok().and_then(|v| v.parse().ok()) {
        Some(n) => n,
        None => (super::cases(0) / 100).max(default),
    }
}

fn run(valid: Payload, mutate: impl Fn(&mut Payload, &[mutate::Op])) {
    watch_panics();
    let kind = valid.proof_kind;
    let tally = Tally::default();
    let recording = Mutex::new(None);
    let cases = synth_cases(6);
    let mut runner = TestRunner::new(super::config(cases));
    let t = std::time::Instant::now();
    let result = runner.run(&mutate::ops(3), |ops| {
        let mut p = valid.clone();
        mutate(&mut p, &ops);
        case(&valid, &p, &recording, &tally)
    });
    eprintln!("{kind:?}: {cases} mutated payloads in {:.1?}: {}", t.elapsed(), tally.line());
    if let Err(e) = result {
        panic!("{kind:?}: {e}");
    }
    let reached = tally.native_taken.load(Ordering::Relaxed) + tally.native_rejected.load(Ordering::Relaxed);
    let built = u64::from(cases) - tally.refused.load(Ordering::Relaxed);
    assert!(built == 0 || reached > 0, "{kind:?}: no case reached the native generator");
}

/// The PoRep payload the cases mutate: one challenge of the partition's
/// two keeps a case quick.
fn porep_valid() -> Payload {
    kiln_filecoin::porep::cut_to_challenges(&payloads::payload(PayloadKind::PorepSealCommit), 1).unwrap()
}

fn porep_mutation(p: &mut Payload, ops: &[mutate::Op]) {
    p.vanilla_proof = mutate::porep_values(&p.vanilla_proof, ops);
}

#[test]
fn porep_c1_values_through_synthesis() {
    run(porep_valid(), porep_mutation);
}

/// What the first long run found: a path position past its level's
/// children made the native generator panic (caught, and the partition
/// redone on the gadget path, which reads only the position's low bits);
/// the generator now refuses it with an error, and the gadget path's
/// assignment (unsatisfied: proving it would fail) is the answer.
#[test]
fn a_porep_path_position_past_its_children_is_an_error() {
    watch_panics();
    let valid = porep_valid();
    let mut p = valid.clone();
    porep_mutation(&mut p, &[mutate::Op { what: 4, at: 8326657610776957184, arg: 2 }]);
    let (tally, recording) = (Tally::default(), Mutex::new(None));
    case(&valid, &p, &recording, &tally).unwrap();
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    assert_eq!((n(&tally.native_rejected), n(&tally.unsatisfied)), (1, 1), "{}", tally.line());
}

#[test]
fn post_proof_bytes_through_synthesis() {
    for kind in [PayloadKind::WindowPostPartition, PayloadKind::WinningPost] {
        run(payloads::payload(kind), |p, ops| mutate::proofs(&mut p.vanilla_proofs, ops));
    }
}
