//! Jobs end to end on the CPU backend: mixed priorities, idempotency,
//! failures that stay inside their job, waiting, SRS preload/evict,
//! admission, shutdown.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_pipeline::{Engine, JobOutcome, JobRequest, JobSource, Priority, SrsTier, SubmitError};

const MIB: u64 = 1 << 20;

#[test]
fn concurrent_jobs_of_mixed_priorities_all_complete_with_valid_proofs() {
    ensure_params(10);
    let engine = Engine::start(config(256 * MIB), vec![]).unwrap();
    let jobs: Vec<_> = [(Priority::Low, 2), (Priority::Normal, 3), (Priority::High, 1), (Priority::Critical, 1), (Priority::Normal, 2)]
        .into_iter()
        .enumerate()
        .map(|(k, (priority, parts))| {
            let job = synthetic(10, parts, 100 * k as u64);
            let sub = engine.submit(JobRequest::new(format!("mixed-{k}"), priority, job.clone())).unwrap();
            assert!(!sub.existing);
            assert_eq!(sub.job_id, format!("mixed-{k}"));
            (sub.job_id, job)
        })
        .collect();
    for (id, job) in &jobs {
        match engine.wait_blocking(id, Some(Duration::from_secs(120))) {
            JobOutcome::Completed { proof, timings } => {
                assert_valid_proofs(job, &proof);
                assert!(timings.total >= timings.queue_wait && timings.synthesis > Duration::ZERO, "{timings:?}");
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    let s = engine.status();
    assert_eq!((s.jobs.completed, s.jobs.failed, s.jobs.in_flight), (5, 0, 0));
    assert_eq!(s.jobs.partitions_proved, 9);
    assert_idle(&engine);
}

#[test]
fn resubmitting_a_request_id_returns_the_existing_job() {
    ensure_params(10);
    let engine = Engine::start(config(256 * MIB), vec![]).unwrap();
    let job = synthetic(10, 1, 7);
    let first = engine.submit(JobRequest::new("same", Priority::Normal, job.clone())).unwrap();
    let again = engine.submit(JobRequest::new("same", Priority::High, synthetic(10, 3, 8))).unwrap();
    assert!(!first.existing);
    assert!(again.existing);
    assert_eq!(again.job_id, first.job_id);
    let JobOutcome::Completed { proof, .. } = engine.wait_blocking("same", Some(Duration::from_secs(60))) else { panic!() };
    assert_valid_proofs(&job, &proof);
    // After completion too: the same job, the same answer, nothing new proved.
    let after = engine.submit(JobRequest::new("same", Priority::Normal, job.clone())).unwrap();
    assert!(after.existing);
    match engine.wait_blocking("same", None) {
        JobOutcome::Completed { proof: again, .. } => assert_eq!(again, proof),
        other => panic!("{other:?}"),
    }
    let s = engine.status();
    assert_eq!((s.jobs.submitted, s.jobs.partitions_proved), (1, 1));
    // Empty request ids get fresh job ids.
    let a = engine.submit(JobRequest::new("", Priority::Low, synthetic(10, 1, 9))).unwrap();
    let b = engine.submit(JobRequest::new("", Priority::Low, synthetic(10, 1, 9))).unwrap();
    assert_ne!(a.job_id, b.job_id);
}

#[test]
fn failing_or_panicking_partitions_fail_their_job_only() {
    ensure_params(10);
    let backend = Arc::new(SlowBackend { delay: Duration::ZERO, calls: Default::default(), panic_on: vec![0] });
    let cfg = kiln_pipeline::EngineConfig { partition_retries: 0, ..config(256 * MIB) };
    let engine = Engine::start(cfg, vec![backend.clone()]).unwrap();
    // The backend panics on its first call: whichever job that is fails alone.
    let victim = engine.submit(JobRequest::new("backend-victim", Priority::Critical, synthetic(10, 1, 1))).unwrap();
    assert!(matches!(engine.wait_blocking(&victim.job_id, Some(Duration::from_secs(60))),
        JobOutcome::Failed(m) if m.contains("panicked") && m.contains("backend fault")));

    let good = synthetic(10, 2, 2);
    let faults = [("fails", Fault::Fail(1)), ("panics", Fault::Panic(0))];
    for (id, fault) in faults {
        engine.submit(JobRequest::new(id, Priority::Normal, Arc::new(Faulty { inner: synthetic(10, 3, 3), fault }))).unwrap();
    }
    engine.submit(JobRequest::new("good", Priority::Low, good.clone())).unwrap();
    match engine.wait_blocking("fails", Some(Duration::from_secs(60))) {
        JobOutcome::Failed(m) => assert!(m.contains("partition 1") && m.contains("synthesis failed"), "{m}"),
        other => panic!("{other:?}"),
    }
    match engine.wait_blocking("panics", Some(Duration::from_secs(60))) {
        JobOutcome::Failed(m) => assert!(m.contains("partition 0") && m.contains("exploded"), "{m}"),
        other => panic!("{other:?}"),
    }
    match engine.wait_blocking("good", Some(Duration::from_secs(60))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&good, &proof),
        other => panic!("{other:?}"),
    }
    let s = engine.status();
    assert_eq!((s.jobs.completed, s.jobs.failed), (1, 3));
    assert_idle(&engine);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_honours_its_timeout_and_the_job_goes_on() {
    ensure_params(10);
    let engine = Engine::start(config(256 * MIB), vec![SlowBackend::new(Duration::from_millis(300))]).unwrap();
    let job = synthetic(10, 1, 4);
    let sub = engine.submit(JobRequest::new("slow", Priority::Normal, job.clone())).unwrap();
    let t = std::time::Instant::now();
    assert_eq!(engine.wait(&sub.job_id, Some(Duration::from_millis(20))).await, JobOutcome::Timeout);
    assert!(t.elapsed() < Duration::from_millis(250), "returned after {:?}", t.elapsed());
    match engine.wait(&sub.job_id, None).await {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&job, &proof),
        other => panic!("{other:?}"),
    }
    assert_eq!(engine.wait("no-such-job", Some(Duration::from_millis(1))).await, JobOutcome::Unknown);
    assert_eq!(engine.cancel("no-such-job"), None);
    assert_eq!(engine.cancel("slow"), Some(false), "an ended job is left as it was");
    assert!(matches!(engine.poll("slow"), JobOutcome::Completed { .. }));
    engine.shutdown(Duration::from_secs(1)).await;
}

#[test]
fn srs_preload_and_evict_move_parameters_between_tiers_inside_the_budget() {
    let size = ensure_params(10);
    let engine = Engine::start(config(256 * MIB), vec![]).unwrap();
    let spec = synthetic(10, 1, 0).srs();
    let first = engine.preload_srs(spec.clone()).unwrap();
    assert!(!first.already_loaded);
    assert!(engine.preload_srs(spec.clone()).unwrap().already_loaded);
    let s = engine.status();
    let entry = s.srs.iter().find(|x| x.id == spec.id).unwrap();
    assert_eq!((entry.tier, entry.size_bytes, entry.ref_count), (SrsTier::Hot, size, 0));
    assert_eq!(s.budget.reserved_by_class.srs, size, "hot parameters are paid for from the budget");

    let evicted = engine.evict_srs(&spec.id).unwrap();
    assert!(evicted.was_loaded);
    assert_eq!(evicted.freed_bytes, size);
    let s = engine.status();
    assert_eq!(s.srs.iter().find(|x| x.id == spec.id).unwrap().tier, SrsTier::Cold);
    assert_eq!(s.budget.reserved_by_class.srs, 0);
    assert!(!engine.evict_srs("never-heard-of").unwrap().was_loaded);

    // In use: not evictable. A slow backend keeps a partition in flight.
    let engine = Engine::start(config(256 * MIB), vec![SlowBackend::new(Duration::from_millis(400))]).unwrap();
    engine.submit(JobRequest::new("busy", Priority::Normal, synthetic(10, 1, 5))).unwrap();
    assert!(wait_until(Duration::from_secs(30), || engine.status().srs.iter().any(|x| x.ref_count > 0)));
    let err = engine.evict_srs(&spec.id).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    assert!(matches!(engine.wait_blocking("busy", Some(Duration::from_secs(60))), JobOutcome::Completed { .. }));
}

#[test]
fn a_job_that_can_never_fit_is_refused_at_submit() {
    let srs = ensure_params(12);
    // Room for the parameters, not for a partition of 2^12 (~640 KiB of
    // buffers, as much again of prover scratch).
    let engine = Engine::start(config(srs + 700 * 1024), vec![]).unwrap();
    let err = engine.submit(JobRequest::new("huge", Priority::High, synthetic(12, 2, 0))).unwrap_err();
    match &err {
        SubmitError::TooLarge(m) => assert!(m.contains("memory budget") && m.contains("a/b/c/aux buffers"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(engine.poll("huge"), JobOutcome::Unknown, "nothing was queued");
    // A job whose parameters are missing and cannot be made is refused too.
    let mut missing = synthetic(12, 1, 0).srs();
    missing.generate = None;
    missing.path = params_dir().join("does-not-exist.params");
    missing.id = "missing".into();
    struct Missing(kiln_pipeline::SrsSpec);
    impl JobSource for Missing {
        fn kind_label(&self) -> &str {
            "missing"
        }
        fn srs(&self) -> kiln_pipeline::SrsSpec {
            self.0.clone()
        }
        fn num_partitions(&self) -> usize {
            1
        }
        fn synthesize(&self, _: usize, _: kiln_synth::AssignmentBuffers, _: kiln_synth::SynthContext<'_>) -> Result<kiln_synth::Assignment, kiln_synth::SynthError> {
            unreachable!("never scheduled")
        }
    }
    let err = engine.submit(JobRequest::new("m", Priority::Normal, Arc::new(Missing(missing)))).unwrap_err();
    assert!(matches!(&err, SubmitError::Invalid(m) if m.contains("not found")), "{err:?}");
    // And a job with no partitions.
    let err = engine.submit(JobRequest::new("empty", Priority::Normal, synthetic(10, 0, 0))).unwrap_err();
    assert!(matches!(err, SubmitError::Invalid(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_within_grace_then_cancels_the_rest() {
    ensure_params(10);
    let engine = Engine::start(config(256 * MIB), vec![SlowBackend::new(Duration::from_millis(200))]).unwrap();
    engine.submit(JobRequest::new("quick", Priority::High, synthetic(10, 1, 1))).unwrap();
    engine.submit(JobRequest::new("long", Priority::Low, synthetic(10, 20, 2))).unwrap();
    // The grace covers "quick" (one partition) but not 20 slow partitions.
    engine.shutdown(Duration::from_millis(1500)).await;
    assert!(matches!(engine.poll("quick"), JobOutcome::Completed { .. }), "{:?}", engine.poll("quick"));
    assert_eq!(engine.poll("long"), JobOutcome::Cancelled);
    let err = engine.submit(JobRequest::new("late", Priority::Normal, synthetic(10, 1, 3))).unwrap_err();
    assert_eq!(err, SubmitError::ShuttingDown);
    assert!(is_idle(&engine.status()), "{:#?}", engine.status());
}

#[test]
fn parameters_are_generated_on_demand_and_then_the_job_is_sized() {
    let srs = ensure_params(10); // the same shape: the same file size
    let dir = tempfile::tempdir().unwrap();
    let job = |seed| Arc::new(kiln_pipeline::synthetic::SyntheticJob::new(KIND, 10, INPUTS, 1, dir.path()).with_seed(seed));
    // Too small for a partition: refused once the parameters exist.
    let engine = Engine::start(config(srs + (100 << 10)), vec![]).unwrap();
    let sub = engine.submit(JobRequest::new("later-refused", Priority::Normal, job(1))).unwrap();
    match engine.wait_blocking(&sub.job_id, Some(Duration::from_secs(60))) {
        JobOutcome::Failed(m) => assert!(m.contains("job refused") && m.contains("memory budget"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(job(1).srs().path.exists(), "the parameters were generated");
    assert_idle(&engine);
    // Now that they exist, the same job is refused at submission.
    assert!(matches!(engine.submit(JobRequest::new("now-refused", Priority::Normal, job(2))), Err(SubmitError::TooLarge(_))));
    // With room, the generated parameters prove.
    let engine = Engine::start(config(256 * MIB), vec![]).unwrap();
    let ok = job(3);
    engine.submit(JobRequest::new("ok", Priority::Normal, ok.clone())).unwrap();
    match engine.wait_blocking("ok", Some(Duration::from_secs(60))) {
        JobOutcome::Completed { proof, timings } => {
            assert_valid_proofs(&ok, &proof);
            assert!(timings.srs_load > Duration::ZERO);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_prover_fault_is_retried_from_synthesis_then_fails_the_job() {
    ensure_params(10);
    // Calls 0, 3 and 4 panic: the first job's first prover call fails once
    // and that partition is retried (calls 1, 2 succeed); the second job's
    // partition fails twice (calls 3, 4; one retry allowed) and fails.
    let backend = Arc::new(SlowBackend { delay: Duration::ZERO, calls: Default::default(), panic_on: vec![0, 3, 4] });
    let cfg = kiln_pipeline::EngineConfig { synthesis_workers: 1, partition_retries: 1, ..config(256 * MIB) };
    let engine = Engine::start(cfg, vec![backend.clone()]).unwrap();
    let first = synthetic(10, 2, 1);
    engine.submit(JobRequest::new("retried", Priority::Normal, first.clone())).unwrap();
    match engine.wait_blocking("retried", Some(Duration::from_secs(60))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&first, &proof),
        other => panic!("{other:?}"),
    }
    assert_eq!(backend.calls.load(std::sync::atomic::Ordering::SeqCst), 3, "two partitions, one retry");
    engine.submit(JobRequest::new("gives-up", Priority::Normal, synthetic(10, 1, 2))).unwrap();
    match engine.wait_blocking("gives-up", Some(Duration::from_secs(60))) {
        JobOutcome::Failed(m) => assert!(m.contains("backend fault on call 4"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Synthesis errors are the job's own: never retried.
    let faulty = Arc::new(Faulty { inner: synthetic(10, 1, 3), fault: Fault::Fail(0) });
    engine.submit(JobRequest::new("no-retry", Priority::Normal, faulty)).unwrap();
    assert!(matches!(engine.wait_blocking("no-retry", Some(Duration::from_secs(60))), JobOutcome::Failed(_)));
    assert_eq!(backend.calls.load(std::sync::atomic::Ordering::SeqCst), 5);
    let s = engine.status();
    assert!(s.queues.iter().all(|q| q.pending_partitions == 0 && q.in_progress_partitions == 0), "{:?}", s.queues);
    assert_idle(&engine);
}
