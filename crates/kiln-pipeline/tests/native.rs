//! Native witnesses in the engine: once a circuit is compiled, a job
//! source's native generator writes the witness; a wrong one is caught by
//! the check against the compiled R1CS, its partition is redone on the
//! gadget path, the proof still verifies, and the rejection is counted in
//! /status and /metrics.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, Priority};

fn prove(engine: &Engine, id: &str, corrupt: Option<usize>) {
    prove_n(engine, id, 4, corrupt)
}

fn prove_n(engine: &Engine, id: &str, partitions: usize, corrupt: Option<usize>) {
    let inner = synthetic(10, partitions, 11);
    let job = Arc::new(WithNative { inner: inner.clone(), corrupt });
    engine.submit(JobRequest::new(id, Priority::Normal, job)).unwrap();
    match engine.wait_blocking(id, Some(Duration::from_secs(120))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&inner, &proof),
        other => panic!("{id}: {other:?}"),
    }
}

#[test]
fn a_corrupted_native_witness_falls_back_and_the_proof_still_verifies() {
    ensure_params(10);
    // A one-partition job compiles the circuit (a recording serves others
    // once its proof has verified); then every partition can go native.
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, ..config(1 << 30) }, vec![]).unwrap();
    prove_n(&engine, "compile", 1, None);
    prove(&engine, "corrupt", Some(2));
    let c = engine.status().circuits;
    assert_eq!((c.compiles, c.native_syntheses, c.native_rejections, c.compiled_syntheses), (1, 3, 1, 1), "{c:?}");
    let metrics = engine.metrics_text();
    assert!(metrics.contains("kiln_native_witness_rejections_total 1"), "{metrics}");
    assert!(metrics.contains("kiln_syntheses_total{path=\"native\"} 3"), "{metrics}");
    prove(&engine, "clean", None);
    let c = engine.status().circuits;
    assert_eq!((c.native_syntheses, c.native_rejections), (7, 1), "{c:?}");
    assert_idle(&engine);
}

#[test]
fn the_native_path_can_be_switched_off() {
    ensure_params(10);
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, native_witness: false, ..config(1 << 30) }, vec![]).unwrap();
    prove_n(&engine, "compile", 1, None);
    prove(&engine, "off", Some(1));
    let c = engine.status().circuits;
    assert_eq!((c.compiles, c.compiled_syntheses, c.native_syntheses, c.native_rejections), (1, 4, 0, 0), "{c:?}");
}
