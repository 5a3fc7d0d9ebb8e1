//! Helpers shared by the engine tests: small configs, job sources that fail
//! on purpose, a job with a native witness (wrong on request), a slow
//! backend, and an independent check of packed proofs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proof, Proof};
use blstrs::Scalar;
use ff::Field;
use kiln_groth16::{CpuBackend, DeviceStatus, ParamsFile, PendingMsms, ProveError, ProverBackend};
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{Engine, EngineConfig, EngineStatus, JobOutcome, JobRequest, JobSource, JobTimings, PartitionFootprint, Priority, SrsSpec};
use kiln_synth::workload::WorkloadKind;
use kiln_synth::{Assignment, AssignmentBuffers, SynthContext, SynthError};

/// Parameters are generated once per target dir and shared by every test.
pub fn params_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kiln-pipeline-params")
}

pub const KIND: WorkloadKind = WorkloadKind::FilecoinLike;
pub const INPUTS: usize = 2;

/// A synthetic job of `partitions` partitions of 2^`log` constraints.
pub fn synthetic(log: u32, partitions: usize, seed: u64) -> Arc<SyntheticJob> {
    Arc::new(SyntheticJob::new(KIND, log, INPUTS, partitions, params_dir()).with_seed(seed))
}

/// The footprint the engine computes for one 2^`log` synthetic partition.
pub fn footprint(log: u32, cfg: &EngineConfig) -> PartitionFootprint {
    let params = ParamsFile::open(synthetic(log, 1, 0).srs().path).unwrap();
    PartitionFootprint::of(&kiln_pipeline::shape_from_params(&params), cfg)
}

/// Makes sure the parameters of 2^`log` circuits exist; returns their size.
pub fn ensure_params(log: u32) -> u64 {
    let spec = SyntheticJob::srs_spec(KIND, log, INPUTS, &params_dir());
    if !spec.path.exists() {
        // (The generator serializes generation within the process.)
        (spec.generate.as_ref().unwrap())(&spec.path).unwrap();
    }
    ParamsFile::open(&spec.path).unwrap().size_bytes()
}

/// Request memory of the test engines, on top of their proving budget.
pub const REQUEST_MEMORY: u64 = 1 << 20;

/// A small engine: pageable buffers, CPU-sized thread counts, a proving
/// budget of `budget` bytes (and [`REQUEST_MEMORY`] beside it).
pub fn config(budget: u64) -> EngineConfig {
    EngineConfig {
        synthesis_workers: 2,
        gpu_queue_depth: 1,
        finalizer_threads: 1,
        memory_budget_bytes: Some(budget + REQUEST_MEMORY),
        request_memory_bytes: Some(REQUEST_MEMORY),
        pin_host_buffers: false,
        partition_overhead_bytes: 64 << 10,
        counter_log_interval_ms: 200,
        ..Default::default()
    }
}

/// Checks `packed` holds one valid proof per partition of `job`, in
/// partition order, independently of the engine (bellperson's verifier
/// against each partition's own public inputs).
pub fn assert_valid_proofs(job: &SyntheticJob, packed: &[u8]) {
    assert_eq!(packed.len(), job.num_partitions() * 192, "one 192-byte proof per partition");
    let params = ParamsFile::open(&job.srs().path).unwrap();
    for (i, bytes) in packed.chunks(192).enumerate() {
        let proof = Proof::read(bytes).expect("a well-formed proof");
        let inputs = job.circuit(i).public_inputs();
        assert!(verify_proof(params.prepared_vk(), &proof, &inputs).unwrap(), "partition {i}'s proof does not verify");
    }
}

/// Submits `job` as CRITICAL under `id`, waits for it (at most a minute),
/// checks its proofs; returns how long it took and the engine's timings.
pub fn prove_critical(engine: &Engine, id: &str, job: &Arc<SyntheticJob>) -> (Duration, JobTimings) {
    let t = Instant::now();
    engine.submit(JobRequest::new(id, Priority::Critical, job.clone())).unwrap();
    let outcome = engine.wait_blocking(id, Some(Duration::from_secs(60)));
    let took = t.elapsed();
    let JobOutcome::Completed { proof, timings } = outcome else { panic!("{id}: {outcome:?}") };
    assert_valid_proofs(job, &proof);
    (took, timings)
}

/// Polls `cond` until true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    cond()
}

/// Asserts the engine holds nothing: no partition in any stage, no buffer
/// checked out, no reservation but idle caches (parameters and parked pool
/// buffers), no parameters in use.
pub fn assert_idle(engine: &Engine) {
    let idle = wait_until(Duration::from_secs(10), || is_idle(&engine.status()));
    let s = engine.status();
    assert!(idle, "engine not idle: {s:#?}");
}

pub fn is_idle(s: &EngineStatus) -> bool {
    let by = &s.budget.reserved_by_class;
    s.buffers.is_idle()
        && s.pinned_pool.pinned_in_use_bytes == 0
        && by.synthesis == 0
        && by.pinned_in_use == 0
        && by.gpu_staging == 0
        && s.budget.waiting_reservations == 0
        && s.srs.iter().all(|x| x.ref_count == 0)
        && s.workers.synthesis_busy == 0
        && s.workers.gpu_workers.iter().all(|g| g.current_job_id.is_none())
}

/// What a [`Faulty`] job does wrong.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Synthesis of this partition returns an error.
    Fail(usize),
    /// Synthesis of this partition panics.
    Panic(usize),
    /// Every synthesis takes this long (then succeeds).
    Slow(Duration),
}

/// A synthetic job with a fault.
pub struct Faulty {
    pub inner: Arc<SyntheticJob>,
    pub fault: Fault,
}

impl JobSource for Faulty {
    fn kind_label(&self) -> &str {
        "faulty"
    }
    fn srs(&self) -> SrsSpec {
        self.inner.srs()
    }
    fn num_partitions(&self) -> usize {
        self.inner.num_partitions()
    }
    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        match self.fault {
            Fault::Fail(p) if p == i => Err(SynthError::Unsatisfied { index: 0, total: 1 }),
            Fault::Panic(p) if p == i => panic!("synthesis of partition {i} exploded"),
            Fault::Slow(d) => {
                std::thread::sleep(d);
                self.inner.synthesize(i, buffers, ctx)
            }
            _ => self.inner.synthesize(i, buffers, ctx),
        }
    }
}

/// The CPU backend, slowed down, counting calls; panics on chosen calls.
pub struct SlowBackend {
    pub delay: Duration,
    pub calls: AtomicUsize,
    /// 0-based call numbers that panic.
    pub panic_on: Vec<usize>,
}

impl SlowBackend {
    pub fn new(delay: Duration) -> Arc<Self> {
        Arc::new(SlowBackend { delay, calls: AtomicUsize::new(0), panic_on: Vec::new() })
    }
}

impl ProverBackend for SlowBackend {
    fn name(&self) -> String {
        "slow-cpu".into()
    }
    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.panic_on.contains(&n) {
            panic!("backend fault on call {n}");
        }
        std::thread::sleep(self.delay);
        CpuBackend.start(params, asg)
    }
    fn host_scratch_ratio(&self) -> f64 {
        CpuBackend.host_scratch_ratio()
    }
}

/// A synthetic job with a native generator (the test's stand-in: the
/// ordinary synthesis's values, copied), wrong for one partition.
pub struct WithNative {
    pub inner: Arc<SyntheticJob>,
    /// This partition's native witness has aux 0 (a copy of an input, so
    /// constrained) off by one.
    pub corrupt: Option<usize>,
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

/// `inner` presented as running on device `name` (its urgent worker too),
/// so that several test backends are several devices to the engine.
pub struct OnDevice(pub String, pub Arc<dyn ProverBackend>);

impl OnDevice {
    pub fn named(name: &str, inner: Arc<dyn ProverBackend>) -> Arc<dyn ProverBackend> {
        Arc::new(OnDevice(name.to_string(), inner))
    }
}

impl ProverBackend for OnDevice {
    fn name(&self) -> String {
        format!("{}@{}", self.1.name(), self.0)
    }
    fn device(&self) -> String {
        self.0.clone()
    }
    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        self.1.start(params, asg)
    }
    fn host_scratch_ratio(&self) -> f64 {
        self.1.host_scratch_ratio()
    }
    fn urgent_worker(&self) -> Result<Option<Arc<dyn ProverBackend>>, ProveError> {
        Ok(self.1.urgent_worker()?.map(|w| OnDevice::named(&self.0, w)))
    }
}

/// A backend presented as an accelerator (it reports a [`DeviceStatus`]):
/// the engine treats its start as a device's (watched, run on the
/// worker's thread), as with a GPU.
pub struct AsAccelerator(pub Arc<dyn ProverBackend>);

impl ProverBackend for AsAccelerator {
    fn name(&self) -> String {
        self.0.name()
    }
    fn device(&self) -> String {
        self.0.device()
    }
    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        self.0.start(params, asg)
    }
    fn host_scratch_ratio(&self) -> f64 {
        self.0.host_scratch_ratio()
    }
    fn device_status(&self) -> Option<DeviceStatus> {
        let name = format!("stand-in for {}", self.0.device());
        Some(DeviceStatus { ordinal: 0, name, sm_count: 1, compute_capability: (0, 0), total_memory: 1 << 30, free_memory: None })
    }
}
