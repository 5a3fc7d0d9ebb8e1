//! kiln's side: each Filecoin payload becomes the job kiln's daemon would
//! make of it (kiln-filecoin's job sources), proved through kiln's engine
//! (kiln-pipeline) with its GPU backend, or its CPU backend on a machine
//! without a GPU, one job at a time; every answer is then checked by
//! filecoin-proofs' own verifier (kiln-filecoin's `verify`), untimed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kiln_filecoin::payload::Payload;
use kiln_groth16::ProverBackend;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, JobSource, Priority};

use crate::report::{median, Side};

/// The backends and engine settings shared by every kind of a run.
pub struct KilnSetup {
    pub backends: Vec<Arc<dyn ProverBackend>>,
    pub config: EngineConfig,
    /// What runs the proofs, for the report.
    pub description: String,
}

/// One proof kiln made.
pub struct KilnProof {
    pub mode: &'static str,
    pub index: usize,
    pub ms: f64,
    pub synthesis_ms: f64,
    pub prove_ms: f64,
    pub verify_ms: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `warmup` then `timed` proofs of `payload`'s job, one at a time: each
/// timed from submission to the engine's answer (synthesis of every
/// partition, the prover, assembly and the engine's own check of each
/// partition proof), then verified by filecoin-proofs (not timed). Then,
/// when `steady >= 2`, that many jobs at once in the same engine (warm:
/// parameters placed, circuit compiled), see [`run_steady`].
pub fn run_kind(
    setup: &KilnSetup,
    payload: &Payload,
    job: &Arc<dyn JobSource>,
    (warmup, timed, steady): (usize, usize, usize),
    log: &mut dyn FnMut(&KilnProof),
) -> Result<(Side, Option<Steady>)> {
    let engine = Engine::start(setup.config.clone(), setup.backends.clone()).context("starting kiln's engine")?;
    let mut side = Side::default();
    let (mut synth, mut prove) = (Vec::new(), Vec::new());
    for i in 0..warmup + timed {
        let (mode, index) = if i < warmup { ("warmup", i) } else { ("timed", i - warmup) };
        let t = Instant::now();
        let sub = engine.submit(JobRequest::new(format!("{}-{mode}-{index}", job.kind_label()), Priority::Normal, job.clone()))?;
        let outcome = engine.wait_blocking(&sub.job_id, None);
        let took = ms(t.elapsed());
        let (proof, timings) = match outcome {
            JobOutcome::Completed { proof, timings } => (proof, timings),
            other => bail!("kiln's {} {mode} proof {index} ended {}: {other:?}", job.kind_label(), other.name()),
        };
        side.proofs += 1;
        let v = Instant::now();
        kiln_filecoin::verify::verify(payload, &proof).map_err(|e| anyhow::anyhow!("kiln's {} {mode} proof {index}: {e}", job.kind_label()))?;
        let verify_ms = ms(v.elapsed());
        side.verified += 1;
        side.verify_ms.push(verify_ms);
        let p = KilnProof { mode, index, ms: took, synthesis_ms: ms(timings.synthesis), prove_ms: ms(timings.gpu_compute), verify_ms };
        if mode == "timed" {
            side.timed_ms.push(took);
            synth.push(p.synthesis_ms);
            prove.push(p.prove_ms);
        } else {
            side.warmup_ms.push(took);
        }
        log(&p);
    }
    let steady = if steady >= 2 { Some(run_steady(&engine, payload, job, steady)?) } else { None };
    let j = engine.status().jobs;
    side.notes.push(format!(
        "kiln partitions' a/b/c: {} computed during synthesis (host), {} by the prover (GPU, device_products), {} rejected by the prover and redone",
        j.products_in_synthesis, j.products_by_prover, j.products_rejected
    ));
    engine.shutdown_blocking(Duration::from_secs(30));
    if let (Some(s), Some(p)) = (median(&synth), median(&prove)) {
        side.notes.push(format!("kiln timed proofs: synthesis {s:.1} ms + prover {p:.1} ms (medians, summed over partitions)"));
    }
    Ok((side, steady))
}

/// What `n` jobs submitted at once showed.
pub struct Steady {
    pub jobs: usize,
    /// Time per proof once the pipeline is full: the mean interval between
    /// partition completions over the run's last two thirds of them, times
    /// the partitions of one proof. The jobs' partitions interleave, so
    /// their answers come close together and say little about the rate.
    pub per_proof_ms: f64,
    /// Partitions that interval was taken over.
    pub partitions_timed: usize,
    /// All `jobs` from submission to the last answer.
    pub total_ms: f64,
    /// Mean GPU busy % over that same window (NVML), if a GPU is watched.
    pub gpu_busy: Option<f64>,
}

/// `n` jobs of `payload` submitted at once (n >= 2) to `engine`, each
/// answer verified by filecoin-proofs: the steady-state time per proof.
/// The engine is the one the one-at-a-time proofs warmed (a fresh one
/// would make or load the parameters and record the circuit again).
fn run_steady(engine: &Engine, payload: &Payload, job: &Arc<dyn JobSource>, n: usize) -> Result<Steady> {
    let busy = crate::busy::BusyRecorder::start();
    let t0 = Instant::now();
    let proved0 = engine.status().jobs.partitions_proved;
    let ids: Vec<String> = (0..n)
        .map(|i| engine.submit(JobRequest::new(format!("{}-steady-{i}", job.kind_label()), Priority::Normal, job.clone())).map(|s| s.job_id))
        .collect::<Result<_, _>>()?;
    let total = (n * job.num_partitions()) as u64;
    // When each partition finished, from the engine's counter (polled: a
    // 32 GiB partition takes seconds, so 10 ms is well inside the noise).
    let mut finished: Vec<Instant> = Vec::with_capacity(total as usize);
    let mut seen = 0;
    let mut outcomes = Vec::new();
    while outcomes.len() < ids.len() {
        let proved = engine.status().jobs.partitions_proved - proved0;
        let now = Instant::now();
        finished.extend((seen..proved.min(total)).map(|_| now));
        seen = seen.max(proved.min(total));
        match engine.wait_blocking(&ids[outcomes.len()], Some(Duration::from_millis(10))) {
            JobOutcome::Timeout => {}
            o => outcomes.push(o),
        }
    }
    let total_ms = ms(t0.elapsed());
    for (id, o) in ids.iter().zip(outcomes) {
        match o {
            JobOutcome::Completed { proof, .. } => {
                kiln_filecoin::verify::verify(payload, &proof).map_err(|e| anyhow::anyhow!("kiln's {} steady proof {id}: {e}", job.kind_label()))?
            }
            other => bail!("kiln's {} steady job {id} ended {}: {other:?}", job.kind_label(), other.name()),
        }
    }
    let end = Instant::now();
    finished.extend((finished.len() as u64..total).map(|_| end));
    // From the first third's last completion (the pipeline has filled) to the end.
    let (first, last) = (finished.len() / 3, finished.len() - 1);
    let partitions_timed = last - first;
    let per_partition = ms(finished[last] - finished[first]) / partitions_timed.max(1) as f64;
    let gpu_busy = busy.map(|b| b.stop()).and_then(|samples| {
        let window: Vec<f64> =
            samples.iter().filter(|(t, _)| *t >= finished[first] && *t <= finished[last]).map(|(_, b)| f64::from(*b)).collect();
        (!window.is_empty()).then(|| window.iter().sum::<f64>() / window.len() as f64)
    });
    Ok(Steady { jobs: n, per_proof_ms: per_partition * job.num_partitions() as f64, partitions_timed, total_ms, gpu_busy })
}
