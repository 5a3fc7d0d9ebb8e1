//! Parameters made by an opener (a test setup held as scalars, no
//! `.params` file): made once per id however many jobs need them, their
//! working memory reserved from the engine's budget while they are made,
//! and proofs against them verify.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_groth16::{setup, ParamsFile};
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
