//! Native witnesses in the engine: once a circuit is compiled, a job
//! source's native generator writes the witness; a wrong one is caught by
//! the check against the compiled R1CS, its partition is redone on the
//! gadget path, the proof still verifies, and the rejection is counted in
//! /status and /metrics.

mod common;

use std::sync::Arc;
use std::time::Duration;

use blstrs::Scalar;
use common::*;
use ff::Field;
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, JobSource, Priority, SrsSpec};
use kiln_synth::{Assignment, AssignmentBuffers, SynthContext, SynthError};

/// A synthetic job with a native generator (the test's stand-in: the
/// ordinary synthesis's values, copied), wrong for one partition.
struct WithNative {
    inner: Arc<SyntheticJob>,
    /// This partition's native witness has aux 0 (a copy of an input, so
    /// constrained) off by one.
    corrupt: Option<usize>,
}

impl JobSource for WithNative {
    fn kind_label(&self) -> &str {
        "native-synthetic"
    }
    fn srs(&self) -> SrsSpec {
        self.inner.srs()
    }
    fn num_partitions(&self) -> usize {
        self.inner.num_partitions()
    }
    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        let native = |w: &mut kiln_synth::native::AssignmentWriter<'_>| {
            let asg = kiln_synth::synthesize(self.inner.circuit(i), AssignmentBuffers::heap()).map_err(|e| e.to_string())?;
            for &x in &asg.input[1..] {
                w.input(x);
            }
            for (k, &x) in asg.aux().iter().enumerate() {
                w.aux(if k == 0 && self.corrupt == Some(i) { x + Scalar::ONE } else { x });
            }
            Ok(())
        };
        ctx.synthesize_native(native, |ctx, b| self.inner.synthesize(i, b, ctx), buffers)
    }
}

fn prove(engine: &Engine, id: &str, corrupt: Option<usize>) {
    let inner = synthetic(10, 4, 11);
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
    // One worker: partition 0 compiles the circuit before the others run.
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, ..config(1 << 30) }, vec![]).unwrap();
    prove(&engine, "corrupt", Some(2));
    let c = engine.status().circuits;
    assert_eq!((c.compiles, c.native_syntheses, c.native_rejections, c.compiled_syntheses), (1, 2, 1, 1), "{c:?}");
    let metrics = engine.metrics_text();
    assert!(metrics.contains("kiln_native_witness_rejections_total 1"), "{metrics}");
    assert!(metrics.contains("kiln_syntheses_total{path=\"native\"} 2"), "{metrics}");
    prove(&engine, "clean", None);
    let c = engine.status().circuits;
    assert_eq!((c.native_syntheses, c.native_rejections), (6, 1), "{c:?}");
    assert_idle(&engine);
}

#[test]
fn the_native_path_can_be_switched_off() {
    ensure_params(10);
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, native_witness: false, ..config(1 << 30) }, vec![]).unwrap();
    prove(&engine, "off", Some(1));
    let c = engine.status().circuits;
    assert_eq!((c.compiles, c.compiled_syntheses, c.native_syntheses, c.native_rejections), (1, 3, 0, 0), "{c:?}");
}
