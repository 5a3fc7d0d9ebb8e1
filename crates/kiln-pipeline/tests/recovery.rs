//! What a client's retry finds: a request id whose job failed or was
//! cancelled is proved again, and a malformed partition leaves nothing
//! behind that later jobs of its circuit are held to.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, JobSource, Priority, SrsSpec};
use kiln_synth::workload::SyntheticCircuit;
use kiln_synth::{Assignment, AssignmentBuffers, SynthContext, SynthError};

const MIB: u64 = 1 << 20;

fn completed(engine: &Engine, id: &str, job: &SyntheticJob) {
    match engine.wait_blocking(id, Some(Duration::from_secs(60))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(job, &proof),
        other => panic!("{id}: {other:?}"),
    }
}

#[test]
fn a_request_id_that_failed_or_was_cancelled_is_proved_again() {
    ensure_params(10);
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, ..config(256 * MIB) }, vec![]).unwrap();

    // Curio's ids are deterministic: the retry of a failed task reuses it.
    let faulty = Arc::new(Faulty { inner: synthetic(10, 2, 1), fault: Fault::Fail(1) });
    engine.submit(JobRequest::new("porep-1000-7", Priority::Normal, faulty)).unwrap();
    assert!(matches!(engine.wait_blocking("porep-1000-7", Some(Duration::from_secs(60))), JobOutcome::Failed(_)));
    let good = synthetic(10, 2, 1);
    let again = engine.submit(JobRequest::new("porep-1000-7", Priority::Normal, good.clone())).unwrap();
    assert!(!again.existing, "a failed job is not the answer to a retry: {again:?}");
    completed(&engine, "porep-1000-7", &good);
    // Completed, the id answers with that proof from then on.
    assert!(engine.submit(JobRequest::new("porep-1000-7", Priority::Normal, synthetic(10, 2, 1))).unwrap().existing);

    // Cancelled (queued behind a slow job), then retried.
    let slow = Arc::new(Faulty { inner: synthetic(10, 1, 2), fault: Fault::Slow(Duration::from_millis(300)) });
    engine.submit(JobRequest::new("slow", Priority::Normal, slow)).unwrap();
    engine.submit(JobRequest::new("snap-1000-9", Priority::Normal, synthetic(10, 1, 3))).unwrap();
    assert_eq!(engine.cancel("snap-1000-9"), Some(false));
    assert_eq!(engine.poll("snap-1000-9"), JobOutcome::Cancelled);
    let retry = synthetic(10, 1, 3);
    assert!(!engine.submit(JobRequest::new("snap-1000-9", Priority::Normal, retry.clone())).unwrap().existing);
    completed(&engine, "snap-1000-9", &retry);
    assert!(matches!(engine.wait_blocking("slow", Some(Duration::from_secs(60))), JobOutcome::Completed { .. }));
    let s = engine.status();
    assert_eq!((s.jobs.completed, s.jobs.failed, s.jobs.cancelled), (3, 1, 1));
    assert_idle(&engine);
}

/// Its first partition builds the circuit of a malformed payload: half the
/// constraints (think of a C1 output with short Merkle paths); the others
/// are the real circuit.
struct MalformedFirst(Arc<SyntheticJob>);

impl JobSource for MalformedFirst {
    fn kind_label(&self) -> &str {
        "malformed-first"
    }
    fn srs(&self) -> SrsSpec {
        self.0.srs()
    }
    fn num_partitions(&self) -> usize {
        self.0.num_partitions()
    }
    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        if i > 0 {
            return self.0.synthesize(i, buffers, ctx);
        }
        let wrong = SyntheticCircuit::filling_domain(KIND, 9, INPUTS).with_witness(5);
        ctx.synthesize(|| Ok(wrong), buffers)
    }
}

/// The first synthesis of a circuit records its structure for every later
/// one. Recorded from a malformed partition, it used to be kept until
/// eviction: every later partition of that circuit then failed its shape
/// check and was refused the compiled path. Now it is kept only once the
/// partition it came from has a verified proof.
#[test]
fn a_malformed_first_partition_does_not_poison_its_compiled_circuit() {
    ensure_params(10);
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, partition_retries: 0, ..config(256 * MIB) }, vec![]).unwrap();
    let bad = Arc::new(MalformedFirst(synthetic(10, 1, 1)));
    engine.submit(JobRequest::new("bad", Priority::Normal, bad)).unwrap();
    match engine.wait_blocking("bad", Some(Duration::from_secs(60))) {
        JobOutcome::Failed(m) => assert!(m.contains("another circuit"), "{m}"),
        other => panic!("{other:?}"),
    }
    let s = engine.status().circuits;
    assert_eq!((s.compiles, s.circuits), (1, 0), "the malformed recording is dropped with its partition: {s:?}");

    // The next job records the circuit again; once its proof verifies,
    // the recording serves every later partition.
    let first = synthetic(10, 1, 10);
    engine.submit(JobRequest::new("first", Priority::Normal, first.clone())).unwrap();
    completed(&engine, "first", &first);
    let next = synthetic(10, 2, 20);
    engine.submit(JobRequest::new("next", Priority::Normal, next.clone())).unwrap();
    completed(&engine, "next", &next);
    let s = engine.status().circuits;
    assert_eq!(s.structure_changes, 0, "{s:?}");
    assert_eq!((s.compiles, s.compiled_syntheses, s.circuits), (2, 2, 1), "recorded again, then used: {s:?}");
    assert_idle(&engine);
}
