//! a/b/c left to the prover (`device_products`), on any machine: a backend
//! that answers as a GPU backend does (here the CPU backend, which
//! evaluates deferred products itself, every row checked) gets, after the
//! circuit's recording, assignments whose synthesis wrote the witness alone
//! into an aux-only pool buffer; every proof verifies; a witness it rejects
//! is redone on the reference path (gadget witness, a/b/c on the host) and
//! counted; the setting and every backend's answer decide.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use kiln_groth16::{CpuBackend, ParamsFile, PendingMsms, ProductsSupport, ProveError, ProverBackend};
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{DeviceProducts, Engine, EngineConfig, EngineStatus, JobOutcome, JobRequest, JobSource, Priority, SrsSpec};
use kiln_synth::{Assignment, AssignmentBuffers, CompiledR1cs, SynthContext, SynthError};

/// The CPU backend answering `support` about device products, recording
/// each start as (products on the host, length of the a buffer).
struct DeviceLike {
    support: ProductsSupport,
    starts: Mutex<Vec<(bool, usize)>>,
}

impl ProverBackend for DeviceLike {
    fn name(&self) -> String {
        "device-like".into()
    }
    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        self.starts.lock().unwrap().push((asg.products_on_host(), asg.buffers.a.as_slice().len()));
        CpuBackend.start(params, asg)
    }
    fn host_scratch_ratio(&self) -> f64 {
        CpuBackend.host_scratch_ratio()
    }
    fn device_products(&self, _: &ParamsFile, _: &CompiledR1cs) -> ProductsSupport {
        self.support
    }
}

struct Run {
    status: EngineStatus,
    /// The first backend's starts.
    starts: Vec<(bool, usize)>,
    metrics: String,
}

/// A 1-partition job that records the circuit (its recording is on
/// probation until that proof verifies), then a 4-partition job, proved
/// with one synthesis worker under `setting`, by backends answering
/// `support` (`None`: a plain CPU backend), the second job's partition
/// `corrupt` with a wrong native witness.
fn run(setting: DeviceProducts, support: &[Option<ProductsSupport>], corrupt: Option<usize>) -> Run {
    run_with(setting, support, |inner| Arc::new(WithNative { inner, corrupt }))
}

/// [`run`] with the second job's source made by `source` from its
/// synthetic job.
fn run_with(setting: DeviceProducts, support: &[Option<ProductsSupport>], source: impl FnOnce(Arc<SyntheticJob>) -> Arc<dyn JobSource>) -> Run {
    ensure_params(10);
    let first = Arc::new(DeviceLike { support: support[0].unwrap_or(ProductsSupport::No), starts: Mutex::new(Vec::new()) });
    let backends: Vec<Arc<dyn ProverBackend>> = support
        .iter()
        .enumerate()
        .map(|(k, s)| match (k, s) {
            (0, _) => first.clone() as Arc<dyn ProverBackend>,
            (_, Some(s)) => Arc::new(DeviceLike { support: *s, starts: Mutex::new(Vec::new()) }),
            (_, None) => Arc::new(CpuBackend),
        })
        .collect();
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, device_products: setting, ..config(1 << 30) }, backends).unwrap();
    let recorder = synthetic(10, 1, 12);
    engine.submit(JobRequest::new("records", Priority::Normal, recorder.clone())).unwrap();
    match engine.wait_blocking("records", Some(Duration::from_secs(120))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&recorder, &proof),
        other => panic!("{other:?}"),
    }
    let inner = synthetic(10, 4, 13);
    engine.submit(JobRequest::new("products", Priority::Normal, source(inner.clone()))).unwrap();
    match engine.wait_blocking("products", Some(Duration::from_secs(120))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&inner, &proof),
        other => panic!("{other:?}"),
    }
    assert_idle(&engine);
    let starts = first.starts.lock().unwrap().clone();
    Run { status: engine.status(), starts, metrics: engine.metrics_text() }
}

const DOMAIN: usize = 1 << 10;

#[test]
fn products_left_to_the_prover_arrive_without_abc_and_prove() {
    let r = run(DeviceProducts::Auto, &[Some(ProductsSupport::Yes)], None);
    // The first job records the circuit (a/b/c on the host); once its
    // proof verified, the second job's partitions leave them to the
    // prover, their pool buffers without a/b/c.
    assert_eq!(r.starts, vec![(true, DOMAIN), (false, 0), (false, 0), (false, 0), (false, 0)]);
    let c = &r.status.circuits;
    assert_eq!((c.compiles, c.native_syntheses, c.deferred_products, c.native_rejections), (1, 4, 4, 0), "{c:?}");
    let j = &r.status.jobs;
    assert_eq!((j.products_in_synthesis, j.products_by_prover, j.products_rejected), (1, 4, 0), "{j:?}");
    assert!(r.metrics.contains("kiln_partition_products_total{computed=\"synthesis\"} 1"), "{}", r.metrics);
    assert!(r.metrics.contains("kiln_partition_products_total{computed=\"prover\"} 4"), "{}", r.metrics);
}

#[test]
fn a_witness_the_prover_rejects_is_redone_on_the_reference_path() {
    let r = run(DeviceProducts::Auto, &[Some(ProductsSupport::Yes)], Some(2));
    // Partition 2's native witness is not checked during synthesis (the
    // prover checks it); it is rejected there and redone with a/b/c on the
    // host, from the gadget witness.
    assert_eq!(r.starts.len(), 6, "{:?}", r.starts);
    assert_eq!(r.starts.iter().filter(|s| s.0).count(), 2, "the recording and the redo: {:?}", r.starts);
    let c = &r.status.circuits;
    assert_eq!((c.native_syntheses, c.native_rejections, c.deferred_products), (4, 0, 4), "{c:?}");
    let j = &r.status.jobs;
    assert_eq!((j.products_in_synthesis, j.products_by_prover, j.products_rejected), (2, 4, 1), "{j:?}");
    assert!(r.metrics.contains("kiln_products_rejections_total 1"), "{}", r.metrics);
}

#[test]
fn the_setting_and_every_backends_answer_decide() {
    let host_only = |r: &Run| {
        let j = &r.status.jobs;
        r.starts.iter().all(|&(host, len)| host && len == DOMAIN) && r.status.circuits.deferred_products == 0 && (j.products_in_synthesis, j.products_by_prover) == (5, 0)
    };
    let yes = Some(ProductsSupport::Yes);
    let no_room = Some(ProductsSupport::NoRoom);
    assert!(host_only(&run(DeviceProducts::Never, &[yes], None)), "never");
    assert!(host_only(&run(DeviceProducts::Auto, &[no_room], None)), "auto, no room in VRAM");
    assert!(host_only(&run(DeviceProducts::Auto, &[yes, None], None)), "auto, beside a CPU backend");
    let forced = run(DeviceProducts::Always, &[no_room], None);
    assert_eq!((forced.status.circuits.deferred_products, forced.status.jobs.products_by_prover), (4, 4), "always, even without room");
}

/// [`WithNative`] whose synthesis of one partition fails the first time
/// (as a native generator that meets a payload it cannot handle would).
struct FailsOnce {
    inner: WithNative,
    partition: usize,
    failed: AtomicBool,
}

impl JobSource for FailsOnce {
    fn kind_label(&self) -> &str {
        self.inner.kind_label()
    }
    fn srs(&self) -> SrsSpec {
        self.inner.srs()
    }
    fn num_partitions(&self) -> usize {
        self.inner.num_partitions()
    }
    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        if i == self.partition && !self.failed.swap(true, Ordering::SeqCst) {
            return Err(SynthError::Unsatisfied { index: 0, total: 1 });
        }
        self.inner.synthesize(i, buffers, ctx)
    }
}

#[test]
fn a_synthesis_that_fails_while_products_are_deferred_is_redone_on_the_reference_path() {
    let fails_once = |inner| Arc::new(FailsOnce { inner: WithNative { inner, corrupt: None }, partition: 1, failed: AtomicBool::new(false) }) as Arc<dyn JobSource>;
    let r = run_with(DeviceProducts::Auto, &[Some(ProductsSupport::Yes)], fails_once);
    // Partition 1's failed deferred synthesis started nothing; it was redone
    // with a/b/c on the host (the recording job's start and the redo).
    assert_eq!(r.starts.len(), 5, "{:?}", r.starts);
    assert_eq!(r.starts.iter().filter(|s| s.0).count(), 2, "{:?}", r.starts);
    let j = &r.status.jobs;
    assert_eq!((j.products_in_synthesis, j.products_by_prover, j.products_rejected, j.failed), (2, 3, 1, 0), "{j:?}");
}

#[test]
fn without_deferred_products_the_same_failure_fails_the_job() {
    ensure_params(10);
    let engine = Engine::start(EngineConfig { synthesis_workers: 1, device_products: DeviceProducts::Never, ..config(1 << 30) }, vec![Arc::new(CpuBackend)]).unwrap();
    let job = Arc::new(FailsOnce { inner: WithNative { inner: synthetic(10, 2, 14), corrupt: None }, partition: 1, failed: AtomicBool::new(false) });
    engine.submit(JobRequest::new("fails", Priority::Normal, job)).unwrap();
    match engine.wait_blocking("fails", Some(Duration::from_secs(120))) {
        JobOutcome::Failed(reason) => assert!(reason.contains("partition 1: synthesis failed"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert_idle(&engine);
    assert_eq!(engine.status().jobs.products_rejected, 0);
}
