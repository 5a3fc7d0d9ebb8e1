//! Limits on requests: the queue cap and the request memory refuse a
//! request at once (nothing else changes), a job's payload is counted while
//! it runs and given back when it ends, and ended jobs are forgotten,
//! oldest first, when a new request needs their memory.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, Priority, SubmitError};

const MIB: u64 = 1 << 20;
const REQUESTS: u64 = 64 << 10;

fn engine(max_queued_jobs: usize) -> Engine {
    let cfg = EngineConfig {
        synthesis_workers: 1,
        max_queued_jobs,
        memory_budget_bytes: Some(256 * MIB + REQUESTS),
        request_memory_bytes: Some(REQUESTS),
        ..config(256 * MIB)
    };
    Engine::start(cfg, vec![]).unwrap()
}

fn busy(r: Result<kiln_pipeline::Submitted, SubmitError>) -> String {
    match r {
        Err(SubmitError::Busy(m)) => m,
        other => panic!("expected a refusal for now, got {other:?}"),
    }
}

#[test]
fn the_queue_cap_and_the_request_memory_refuse_at_once_and_nothing_else_changes() {
    ensure_params(10);
    let engine = engine(3);
    let slow = |seed| Arc::new(Faulty { inner: synthetic(10, 1, seed), fault: Fault::Slow(Duration::from_millis(200)) });
    for k in 0..3 {
        engine.submit(JobRequest::new(format!("q{k}"), Priority::Normal, slow(k))).unwrap();
    }
    let m = busy(engine.submit(JobRequest::new("q3", Priority::Normal, synthetic(10, 1, 3))));
    assert!(m.contains("3 jobs are queued or running") && m.contains("max_queued_jobs"), "{m}");
    // A resubmission of a known id is an answer, not a new job: never refused.
    assert!(engine.submit(JobRequest::new("q0", Priority::Normal, synthetic(10, 1, 0))).unwrap().existing);
    // A critical job (WinningPoSt) is not held to a queue full of bulk work.
    let critical = synthetic(10, 1, 9);
    engine.submit(JobRequest::new("critical", Priority::Critical, critical.clone())).unwrap();
    match engine.wait_blocking("critical", Some(Duration::from_secs(60))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&critical, &proof),
        other => panic!("{other:?}"),
    }
    for k in 0..3 {
        assert!(matches!(engine.wait_blocking(&format!("q{k}"), Some(Duration::from_secs(60))), JobOutcome::Completed { .. }));
    }
    assert_eq!(engine.poll("q3"), JobOutcome::Unknown, "the refused request left nothing behind");

    // A payload larger than the request memory.
    let m = busy(engine.submit(JobRequest::new("huge", Priority::Normal, synthetic(10, 1, 4)).with_payload_bytes(REQUESTS)));
    assert!(m.contains("request memory") && m.contains("request_memory_bytes"), "{m}");
    let s = engine.status();
    assert_eq!((s.jobs.submitted, s.jobs.completed), (4, 4));
    assert_idle(&engine);
}

#[test]
fn a_payload_is_counted_while_its_job_runs_and_ended_jobs_make_room_oldest_first() {
    ensure_params(10);
    let engine = engine(100);
    let reserved = |e: &Engine| e.status().requests.memory.reserved;
    let slow = Arc::new(Faulty { inner: synthetic(10, 1, 1), fault: Fault::Slow(Duration::from_millis(300)) });
    engine.submit(JobRequest::new("carrying", Priority::Normal, slow).with_payload_bytes(40 << 10)).unwrap();
    assert!(reserved(&engine) >= 40 << 10, "the payload is counted while the job runs");
    assert!(matches!(engine.wait_blocking("carrying", Some(Duration::from_secs(60))), JobOutcome::Completed { .. }));
    let after = reserved(&engine);
    assert!(after < 8 << 10, "ended, the job keeps its record and answer only: {after} bytes");

    // Many more ended jobs than the request memory holds records of: each
    // new one is accepted, the oldest are forgotten.
    for k in 0..40 {
        let id = format!("small-{k}");
        engine.submit(JobRequest::new(id.clone(), Priority::Normal, synthetic(10, 1, 100 + k))).unwrap();
        assert!(matches!(engine.wait_blocking(&id, Some(Duration::from_secs(60))), JobOutcome::Completed { .. }));
    }
    assert_eq!(engine.poll("carrying"), JobOutcome::Unknown, "the oldest ended job was forgotten for room");
    assert!(matches!(engine.poll("small-39"), JobOutcome::Completed { .. }), "the newest is remembered");
    let s = engine.status();
    assert!(s.requests.memory.peak_reserved <= REQUESTS, "{:?}", s.requests);
    assert_eq!(s.jobs.completed, 41);
    assert_idle(&engine);
}
