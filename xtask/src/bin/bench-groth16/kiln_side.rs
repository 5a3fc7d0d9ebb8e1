//! kiln's side: the same circuits through kiln's engine (kiln-pipeline) with
//! its GPU backend (or the CPU backend on a machine without a GPU).
//!
//! Both modes go through the engine, as a user of kiln would: synthesis into
//! pool buffers (page-locked when a driver is present), the prover backend,
//! assembly and verification by the engine's finalizers.
//! - one at a time: one single-partition job submitted, waited for, then the
//!   next; the time is from submission to the verified proof (synthesis included).
//! - steady stream: many jobs submitted at once; the engine overlaps
//!   synthesis (several workers) with the prover. The figure is the
//!   completion rate after the pipeline has filled (see
//!   [`report::steady_ms_per_proof`]).
//!
//! Every returned proof is verified a second time here, independently of
//! the engine, against the verifying key in the parameter file.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bellperson::groth16::{verify_proof, Proof};
use blstrs::Bls12;
use kiln_groth16::{ParamsFile, ProverBackend};
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, Priority};

use crate::busy::BusyRecorder;
use crate::report::{median, ms, steady_ms_per_proof, mean_busy, Shape, SideResult};

/// How many proofs kiln makes per shape.
#[derive(Clone, Copy, Debug)]
pub struct KilnCounts {
    pub warmup: usize,
    pub single: usize,
    /// Timed stream proofs, after the fill.
    pub stream: usize,
}

/// The backends and engine settings shared by every shape of a run.
pub struct KilnSetup {
    pub backends: Vec<Arc<dyn ProverBackend>>,
    pub config: EngineConfig,
    /// What runs the proofs, for the report.
    pub description: String,
}

impl KilnSetup {
    /// Proofs in flight before the stream reaches its steady state: each
    /// synthesis worker holds one, the GPU queue holds its depth, each
    /// prover worker one. Their completions are left out of the figure.
    pub fn fill(&self) -> usize {
        self.config.synthesis_workers + self.config.gpu_queue_depth.max(1) + self.backends.len().max(1)
    }
}

/// One proof kiln made: which witness and when it completed.
pub struct KilnProof {
    pub mode: &'static str,
    pub seed: u64,
    pub ms: f64,
    pub synthesis_ms: f64,
    pub prove_ms: f64,
}

/// Proves `shape` one at a time and as a stream; `seed` is the first
/// witness seed (the peer uses the same sequence). `log` gets every proof.
pub fn run_shape(
    setup: &KilnSetup,
    shape: Shape,
    params_dir: &Path,
    params: &ParamsFile,
    counts: KilnCounts,
    seed: u64,
    log: &mut dyn FnMut(&KilnProof),
) -> Result<SideResult> {
    let engine = Engine::start(setup.config.clone(), setup.backends.clone()).context("starting kiln's engine")?;
    let job = |seed: u64| Arc::new(SyntheticJob::new(shape.kind, shape.log, shape.inputs, 1, params_dir).with_seed(seed));
    let mut r = SideResult::default();
    let mut next_seed = seed;
    let mut synth = Vec::new();
    let mut prove = Vec::new();

    for i in 0..counts.warmup + counts.single {
        let mode = if i < counts.warmup { "warmup" } else { "single" };
        let j = job(next_seed);
        let t = Instant::now();
        let sub = engine.submit(JobRequest::new(format!("{}-{mode}-{i}", shape.label()), Priority::Normal, j.clone()))?;
        let outcome = engine.wait_blocking(&sub.job_id, None);
        let took = ms(t.elapsed());
        let timings = check(&outcome, &j, params)?;
        r.proofs += 1;
        r.verified += 1;
        let p = KilnProof { mode, seed: next_seed, ms: took, synthesis_ms: ms(timings.0), prove_ms: ms(timings.1) };
        if mode == "single" {
            r.single_ms.push(took);
            synth.push(p.synthesis_ms);
            prove.push(p.prove_ms);
        }
        log(&p);
        next_seed += 1;
    }
    if let (Some(s), Some(p)) = (median(&synth), median(&prove)) {
        r.notes.push(format!("one at a time: synthesis {s:.1} ms + prove/verify {p:.1} ms (medians)"));
    }

    if counts.stream > 0 {
        let fill = setup.fill();
        let n = fill + counts.stream;
        let jobs: Vec<_> = (0..n as u64).map(|i| job(next_seed + i)).collect();
        let recorder = BusyRecorder::start();
        let mut ids = Vec::new();
        let t0 = Instant::now();
        for (i, j) in jobs.iter().enumerate() {
            ids.push(engine.submit(JobRequest::new(format!("{}-stream-{i}", shape.label()), Priority::Normal, j.clone()))?.job_id);
        }
        // One waiter per job, so each completion instant is exact whatever
        // order the jobs finish in.
        let done: Vec<(JobOutcome, Instant)> = std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .iter()
                .map(|id| {
                    let engine = &engine;
                    s.spawn(move || {
                        let o = engine.wait_blocking(id, None);
                        (o, Instant::now())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("waiter thread")).collect()
        });
        let samples = recorder.map(BusyRecorder::stop).unwrap_or_default();
        let mut completions = Vec::new();
        for (i, ((outcome, at), j)) in done.iter().zip(&jobs).enumerate() {
            let timings = check(outcome, j, params)?;
            r.proofs += 1;
            r.verified += 1;
            completions.push(*at);
            log(&KilnProof {
                mode: "stream",
                seed: next_seed + i as u64,
                ms: ms(*at - t0),
                synthesis_ms: ms(timings.0),
                prove_ms: ms(timings.1),
            });
        }
        r.stream_proofs = n;
        r.stream_ms_per_proof = steady_ms_per_proof(&completions, fill);
        let mut sorted = completions.clone();
        sorted.sort();
        if let (Some(from), Some(to)) = (sorted.get(fill), sorted.last()) {
            r.stream_gpu_busy = mean_busy(&samples, *from, *to);
        }
        r.notes.push(format!(
            "stream: {n} jobs submitted at once, the first {fill} completions (pipeline fill) left out; all done in {:.0} ms",
            ms(t0.elapsed())
        ));
    }
    let j = engine.status().jobs;
    r.notes.push(format!(
        "partitions' a/b/c: {} computed during synthesis (host), {} by the prover (GPU, device_products), {} rejected by the prover and redone",
        j.products_in_synthesis, j.products_by_prover, j.products_rejected
    ));
    engine.shutdown_blocking(Duration::from_secs(30));
    Ok(r)
}

/// A completed job's proof, verified again here; returns its synthesis and
/// prover times. Anything else is an error naming the job's witness.
fn check(outcome: &JobOutcome, job: &SyntheticJob, params: &ParamsFile) -> Result<(Duration, Duration)> {
    let circuit = job.circuit(0);
    match outcome {
        JobOutcome::Completed { proof, timings } => {
            if proof.len() != 192 {
                bail!("kiln returned {} proof bytes for one partition (expected 192)", proof.len());
            }
            let p = Proof::<Bls12>::read(&proof[..]).context("kiln's proof bytes do not decode")?;
            let ok = verify_proof(params.prepared_vk(), &p, &circuit.public_inputs())
                .map_err(|e| anyhow::anyhow!("verifier error: {e}"))?;
            if !ok {
                bail!("kiln's proof for witness seed {:?} does NOT verify", circuit.witness_seed);
            }
            Ok((timings.synthesis, timings.gpu_compute))
        }
        other => bail!("kiln job (witness seed {:?}) ended {}: {other:?}", circuit.witness_seed, other.name()),
    }
}
