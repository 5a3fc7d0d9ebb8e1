//! Compiled circuits in the engine: the first partition against a parameter
//! set compiles the circuit, later ones take the compiled path; the cache's
//! memory is in the budget, and evicting the parameters drops it.

mod common;

use std::time::Duration;

use common::*;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, Priority};

fn run(engine: &Engine, id: &str, partitions: usize, seed: u64) {
    let job = synthetic(10, partitions, seed);
    engine.submit(JobRequest::new(id, Priority::Normal, job.clone())).unwrap();
    match engine.wait_blocking(id, Some(Duration::from_secs(120))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&job, &proof),
        other => panic!("{id}: {other:?}"),
    }
}

#[test]
fn partitions_after_the_first_take_the_compiled_path() {
    ensure_params(10);
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, ..config(1 << 30) }, vec![]).unwrap();
    // One partition first: a recording serves others only once the proof
    // of the partition it came from has verified.
    run(&engine, "one", 1, 1);
    run(&engine, "two", 4, 2);
    let s = engine.status();
    let c = &s.circuits;
    assert_eq!((c.circuits, c.compiles, c.compiled_syntheses, c.plain_syntheses), (1, 1, 4, 0), "{c:?}");
    assert!(c.bytes > 0);
    assert_eq!(s.budget.reserved_by_class.compiled_circuits, c.bytes as u64, "the cache is in the budget, at its real size");
    assert_idle(&engine);

    let id = s.srs[0].id.clone();
    engine.evict_srs(&id).unwrap();
    let s = engine.status();
    assert_eq!((s.circuits.circuits, s.budget.reserved_by_class.compiled_circuits), (0, 0));
    // Compiled again on the next use.
    run(&engine, "three", 1, 3);
    assert_eq!(engine.status().circuits.compiles, 2);
}

#[test]
fn compiling_can_be_switched_off_or_capped() {
    ensure_params(10);
    let off = Engine::start(EngineConfig { compile_circuits: false, ..config(1 << 30) }, vec![]).unwrap();
    run(&off, "off", 2, 4);
    let c = off.status().circuits;
    assert_eq!((c.compiles, c.compiled_syntheses, c.plain_syntheses), (0, 0, 0), "plain context: nothing counted");

    let capped = Engine::start(EngineConfig { compiled_circuits_bytes: Some(4 << 10), ..config(1 << 30) }, vec![]).unwrap();
    run(&capped, "capped", 2, 5);
    let s = capped.status();
    let c = &s.circuits;
    assert_eq!((c.circuits, c.compiles, c.plain_syntheses, c.refusals), (0, 0, 2, 1), "{c:?}");
    assert_eq!(s.budget.reserved_by_class.compiled_circuits, 0);
    let metrics = capped.metrics_text();
    assert!(metrics.contains("kiln_syntheses_total{path=\"ordinary\"} 2"), "{metrics}");
}
