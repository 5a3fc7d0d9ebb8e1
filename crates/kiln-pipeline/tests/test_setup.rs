//! Parameters made by an opener (a test setup held as scalars, no
//! `.params` file): made once per id however many jobs need them, their
//! working memory reserved from the engine's budget while they are made,
//! and proofs against them verify.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_groth16::{setup, CpuBackend, ParamsFile, PendingMsms, ProveError, ProverBackend};
use kiln_memory::MemoryClass;
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{Engine, JobOutcome, JobRequest, JobSource, Priority, SrsSpec, SrsTier};
use kiln_synth::workload::SyntheticCircuit;
use kiln_synth::{Assignment, AssignmentBuffers, SynthContext, SynthError};

const MIB: u64 = 1 << 20;
const SEED: [u8; 32] = [4; 32];

/// A synthetic job whose parameters are a test setup.
struct OnTestSetup {
    inner: SyntheticJob,
    opened: Arc<AtomicUsize>,
    reserved: Arc<AtomicUsize>,
}

impl JobSource for OnTestSetup {
    fn kind_label(&self) -> &str {
        "synthetic-test-setup"
    }
    fn srs(&self) -> SrsSpec {
        let (opened, reserved) = (self.opened.clone(), self.reserved.clone());
        let blank = SyntheticCircuit { witness_seed: None, ..self.inner.circuit(0) };
        SrsSpec::opened(
            "synthetic-test-setup",
            "/nonexistent/synthetic-test-setup.vk",
            Arc::new(move |budget: &kiln_memory::MemoryBudget| {
                opened.fetch_add(1, Ordering::SeqCst);
                let mut hold = None;
                let params = setup::test_setup(blank, SEED, &mut |bytes| {
                    hold = Some(budget.reserve_blocking(bytes, MemoryClass::Srs).map_err(|e| e.to_string())?);
                    reserved.store(budget.snapshot().reserved as usize, Ordering::SeqCst);
                    Ok(())
                });
                drop(hold);
                params.map_err(|e| e.to_string())
            }),
        )
    }
    fn num_partitions(&self) -> usize {
        self.inner.num_partitions()
    }
    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        self.inner.synthesize(i, buffers, ctx)
    }
}

#[test]
fn a_test_setup_is_made_once_inside_the_budget_and_proofs_verify() {
    let engine = Engine::start(config(256 * MIB), vec![]).unwrap();
    let (opened, reserved) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let jobs: Vec<Arc<OnTestSetup>> = (0..3)
        .map(|k| Arc::new(OnTestSetup { inner: SyntheticJob::new(KIND, 10, INPUTS, 2, params_dir()).with_seed(k), opened: opened.clone(), reserved: reserved.clone() }))
        .collect();
    for (k, job) in jobs.iter().enumerate() {
        engine.submit(JobRequest::new(format!("ts-{k}"), Priority::Normal, job.clone())).unwrap();
    }
    let vk_params = ParamsFile::from_setup_scalars(
        setup::test_setup(SyntheticCircuit { witness_seed: None, ..jobs[0].inner.circuit(0) }, SEED, &mut |_| Ok(())).unwrap().vk().clone(),
        Default::default(),
    );
    for (k, job) in jobs.iter().enumerate() {
        match engine.wait_blocking(&format!("ts-{k}"), Some(Duration::from_secs(120))) {
            JobOutcome::Completed { proof, .. } => {
                for (i, bytes) in proof.chunks(192).enumerate() {
                    let p = bellperson::groth16::Proof::read(bytes).unwrap();
                    let ok = bellperson::groth16::verify_proof(vk_params.prepared_vk(), &p, &job.inner.circuit(i).public_inputs()).unwrap();
                    assert!(ok, "job {k} partition {i}");
                }
            }
            other => panic!("job {k}: {other:?}"),
        }
    }
    assert_eq!(opened.load(Ordering::SeqCst), 1, "made once for every job of the id");
    assert!(reserved.load(Ordering::SeqCst) > 0, "its working memory was reserved from the budget");
    let st = engine.status();
    let srs = st.srs.iter().find(|s| s.id == "synthetic-test-setup").unwrap();
    assert_eq!(srs.tier, SrsTier::Hot);
    assert!(srs.size_bytes > 0, "the scalars are counted");
    assert_idle(&engine);
}

/// The CPU prover, as a device that keeps `host_bytes` of a test setup's
/// points on the host once it places them (a GPU whose VRAM cannot hold
/// them all), and records which parameters it was told to drop.
struct KeepsPointsOnHost {
    host_bytes: u64,
    placed: parking_lot::Mutex<Vec<u64>>,
    dropped: parking_lot::Mutex<Vec<u64>>,
}

impl ProverBackend for KeepsPointsOnHost {
    fn name(&self) -> String {
        "cpu-keeps-points".into()
    }
    fn start(&self, params: &Arc<ParamsFile>, assignment: kiln_synth::Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        let mut placed = self.placed.lock();
        if !placed.contains(&params.id()) {
            placed.push(params.id());
        }
        drop(placed);
        CpuBackend.start(params, assignment)
    }
    fn host_scratch_ratio(&self) -> f64 {
        CpuBackend.host_scratch_ratio()
    }
    fn placement_host_bytes(&self, params: &ParamsFile) -> u64 {
        if params.is_test_setup() && !self.placed.lock().contains(&params.id()) { self.host_bytes } else { 0 }
    }
    fn evict_device(&self, params_id: u64) -> u64 {
        self.placed.lock().retain(|&p| p != params_id);
        self.dropped.lock().push(params_id);
        0
    }
}

fn on_test_setup(seed: u64) -> Arc<OnTestSetup> {
    let inner = SyntheticJob::new(KIND, 10, INPUTS, 2, params_dir()).with_seed(seed);
    Arc::new(OnTestSetup { inner, opened: Arc::new(AtomicUsize::new(0)), reserved: Arc::new(AtomicUsize::new(0)) })
}

/// What a device keeps on the host for a test setup is reserved with the
/// parameters before the first partition is synthesized, is held while
/// they are hot, and goes (the device told to drop its copy) when they are
/// evicted; a job whose parameters and device copy cannot fit beside one
/// partition is refused at once instead of waiting for memory forever.
#[test]
fn points_a_device_keeps_on_the_host_are_reserved_with_the_test_setup() {
    let extra = 40 * MIB;
    let device = Arc::new(KeepsPointsOnHost { host_bytes: extra, placed: Default::default(), dropped: Default::default() });
    let engine = Engine::start(config(256 * MIB), vec![device.clone() as Arc<dyn ProverBackend>]).unwrap();
    let job = on_test_setup(0);
    engine.submit(JobRequest::new("kept-0", Priority::Normal, job.clone())).unwrap();
    match engine.wait_blocking("kept-0", Some(Duration::from_secs(120))) {
        JobOutcome::Completed { .. } => {}
        other => panic!("{other:?}"),
    }
    let st = engine.status();
    let srs = st.srs.iter().find(|s| s.id == "synthetic-test-setup").unwrap();
    let scalars = ParamsFile::size_bytes(&setup::test_setup(SyntheticCircuit { witness_seed: None, ..job.inner.circuit(0) }, SEED, &mut |_| Ok(())).unwrap());
    assert_eq!(srs.size_bytes, scalars + extra, "the scalars and the device's host copy");
    assert_eq!(st.budget.reserved_by_class.srs, scalars + extra, "reserved in the budget");
    let params_id = srs.params_id.unwrap();
    assert!(device.dropped.lock().is_empty());

    engine.evict_srs("synthetic-test-setup").unwrap();
    assert!(device.dropped.lock().contains(&params_id), "the device copy goes with the parameters");
    assert_eq!(engine.status().budget.reserved_by_class.srs, 0);

    // Made again on the next job, with its device copy reserved again.
    engine.submit(JobRequest::new("kept-1", Priority::Normal, on_test_setup(1))).unwrap();
    assert!(matches!(engine.wait_blocking("kept-1", Some(Duration::from_secs(120))), JobOutcome::Completed { .. }));
    assert_eq!(engine.status().budget.reserved_by_class.srs, scalars + extra);
    assert_idle(&engine);
    engine.shutdown_blocking(Duration::from_secs(10));

    // A device copy that leaves no room for a partition: refused, not stuck.
    let huge = Arc::new(KeepsPointsOnHost { host_bytes: 250 * MIB, placed: Default::default(), dropped: Default::default() });
    let engine = Engine::start(config(256 * MIB), vec![huge as Arc<dyn ProverBackend>]).unwrap();
    engine.submit(JobRequest::new("too-big", Priority::Normal, on_test_setup(2))).unwrap();
    match engine.wait_blocking("too-big", Some(Duration::from_secs(120))) {
        JobOutcome::Failed(error) => assert!(error.contains("job refused") && error.contains("synthetic-test-setup"), "{error}"),
        other => panic!("{other:?}"),
    }
}
