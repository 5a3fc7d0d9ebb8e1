//! The load generator: clients that send the workload's jobs over gRPC
//! (`Prove`, the call Curio makes), time them, and verify every returned
//! proof here, independently of the daemon (bellperson's verifier against
//! the parameter file's verifying key).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proof, Proof};
use blstrs::Bls12;
use kiln_groth16::ParamsFile;
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{ProveRequest, SubmitProofRequest};
use kiln_proto::ProvingEngineClient;
use kiln_synth::workload::SyntheticCircuit;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tonic::transport::Channel;

use super::workload::{JobSpec, Load, Workload};

/// One job as the client saw it.
#[derive(Clone, Debug)]
pub struct JobRecord {
    /// Index of its entry in the workload's `jobs`.
    pub spec: usize,
    pub request_id: String,
    /// Seconds since the run started.
    pub sent_s: f64,
    pub answered_s: f64,
    pub partitions: u32,
    /// `None` when it completed; what went wrong otherwise.
    pub error: Option<String>,
    /// Whether the soak verified every returned proof itself; `None` when it
    /// could not (no parameter file here, e.g. with `--connect`).
    pub verified: Option<bool>,
    /// The daemon's own timings (ms).
    pub queue_wait_ms: u64,
    pub synthesis_ms: u64,
    pub gpu_compute_ms: u64,
    pub total_ms: u64,
}

impl JobRecord {
    /// Client-side latency, request to answer.
    pub fn latency_ms(&self) -> f64 {
        (self.answered_s - self.sent_s) * 1e3
    }

    /// Completed, and not proven wrong by the soak's own check.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.verified != Some(false)
    }
}

/// Live counters for the progress line and the samples.
#[derive(Default)]
pub struct Tally {
    pub sent: AtomicU64,
    pub completed: AtomicU64,
    pub failed: AtomicU64,
    /// Partitions (proofs) in completed jobs.
    pub proofs: AtomicU64,
    pub in_flight: AtomicU64,
    /// Open loop: arrivals dropped because `max_outstanding` jobs were unanswered.
    pub shed: AtomicU64,
}

/// Everything the clients share.
pub struct Ctx {
    pub workload: Workload,
    pub client: ProvingEngineClient<Channel>,
    pub t0: Instant,
    pub tally: Tally,
    pub records: mpsc::UnboundedSender<JobRecord>,
    pub verifier: Verifier,
    /// Unique per run, so a long-lived daemon never sees a request id twice.
    pub run_id: String,
    pub next_id: AtomicU64,
}

/// Sends the workload until `stop_at`, then waits up to `drain` for jobs in
/// flight; returns how many were still unanswered then (they are abandoned).
pub async fn drive(ctx: Arc<Ctx>, seed: u64, stop_at: Instant, drain: Duration) -> usize {
    let mut tasks = JoinSet::new();
    match ctx.workload.load {
        Load::Closed { clients } => {
            for c in 0..clients {
                let ctx = ctx.clone();
                tasks.spawn(async move {
                    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(c as u64));
                    while Instant::now() < stop_at {
                        let spec = pick(&ctx, &mut rng);
                        one_job(&ctx, spec, &mut rng).await;
                    }
                });
            }
        }
        Load::Open { per_sec, max_outstanding } => {
            let mut rng = StdRng::seed_from_u64(seed);
            loop {
                // Exponential inter-arrival times: a Poisson process.
                let gap = -(1.0 - rng.gen::<f64>()).ln() / per_sec;
                let at = Instant::now() + Duration::from_secs_f64(gap);
                if at >= stop_at {
                    break;
                }
                tokio::time::sleep_until(at.into()).await;
                if ctx.tally.in_flight.load(Ordering::Relaxed) >= max_outstanding as u64 {
                    ctx.tally.shed.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let (ctx, spec, mut job_rng) = (ctx.clone(), pick(&ctx, &mut rng), StdRng::seed_from_u64(rng.gen()));
                tasks.spawn(async move { one_job(&ctx, spec, &mut job_rng).await });
            }
            tokio::time::sleep_until(stop_at.into()).await;
        }
    }
    let deadline = Instant::now().max(stop_at) + drain;
    while !tasks.is_empty() {
        if tokio::time::timeout_at(deadline.into(), tasks.join_next()).await.is_err() {
            tasks.abort_all();
            break;
        }
    }
    ctx.tally.in_flight.load(Ordering::Relaxed) as usize
}

fn pick(ctx: &Ctx, rng: &mut StdRng) -> usize {
    let spec = ctx.workload.pick(rng);
    ctx.workload.jobs.iter().position(|j| std::ptr::eq(j, spec)).expect("picked from the list")
}

async fn one_job(ctx: &Arc<Ctx>, spec_index: usize, rng: &mut StdRng) {
    let spec = &ctx.workload.jobs[spec_index];
    let id = format!("soak-{}-{}", ctx.run_id, ctx.next_id.fetch_add(1, Ordering::Relaxed));
    let req = spec.request(id.clone(), rng.gen());
    let t = &ctx.tally;
    t.sent.fetch_add(1, Ordering::Relaxed);
    t.in_flight.fetch_add(1, Ordering::Relaxed);
    let sent_s = ctx.t0.elapsed().as_secs_f64();
    let answer = ctx.client.clone().prove(ProveRequest { submit: Some(req.clone()) }).await;
    let answered_s = ctx.t0.elapsed().as_secs_f64();
    let mut rec = JobRecord {
        spec: spec_index,
        request_id: id,
        sent_s,
        answered_s,
        partitions: spec.partitions,
        error: None,
        verified: None,
        queue_wait_ms: 0,
        synthesis_ms: 0,
        gpu_compute_ms: 0,
        total_ms: 0,
    };
    match answer.map(|a| a.into_inner().result) {
        Err(status) => rec.error = Some(format!("{:?}: {}", status.code(), status.message())),
        Ok(None) => rec.error = Some("ProveResponse without a result".into()),
        Ok(Some(r)) => {
            (rec.queue_wait_ms, rec.synthesis_ms, rec.gpu_compute_ms, rec.total_ms) =
                (r.queue_wait_ms, r.synthesis_ms, r.gpu_compute_ms, r.total_ms);
            if r.status() != Status::Completed {
                rec.error = Some(format!("{:?}: {}", r.status(), r.error_message));
            } else {
                let (verifier, spec) = (ctx.verifier.clone(), spec.clone());
                // A pairing check per partition: off the runtime's threads.
                rec.verified = tokio::task::spawn_blocking(move || verifier.check(&spec, &req, &r.proof))
                    .await
                    .unwrap_or(Some(false));
            }
        }
    }
    if rec.ok() {
        t.completed.fetch_add(1, Ordering::Relaxed);
        t.proofs.fetch_add(spec.partitions as u64, Ordering::Relaxed);
    } else {
        t.failed.fetch_add(1, Ordering::Relaxed);
        if rec.error.is_none() {
            rec.error = Some("a returned proof does not verify".into());
        }
    }
    t.in_flight.fetch_sub(1, Ordering::Relaxed);
    let _ = ctx.records.send(rec);
}

/// Verifies synthetic proofs against the parameter files in `params_dir`
/// (the files the daemon uses when it shares the directory), and Filecoin
/// ones with filecoin-proofs' verifiers when the daemon shares this
/// process's parameter cache.
#[derive(Clone)]
pub struct Verifier {
    params_dir: PathBuf,
    /// Whether the daemon shares this process's environment (the soak
    /// started it), so the verifying keys of the Filecoin parameters it
    /// proved with are where filecoin-proofs looks. Not so, a Filecoin
    /// check could make parameters here from scratch: they go unchecked.
    filecoin_keys_here: bool,
    /// Parameter files (memory-mapped; only the verifying key is read) by
    /// path; `None` when the file is not here.
    keys: Arc<Mutex<HashMap<PathBuf, Option<Arc<ParamsFile>>>>>,
}

impl Verifier {
    pub fn new(params_dir: PathBuf, filecoin_keys_here: bool) -> Self {
        Self { params_dir, filecoin_keys_here, keys: Arc::default() }
    }

    /// `Some(true)` when `proof` holds one valid 192-byte proof per
    /// partition, each against the public inputs of its witness seed;
    /// `None` when the parameters are not available here.
    pub fn check(&self, spec: &JobSpec, req: &SubmitProofRequest, proof: &[u8]) -> Option<bool> {
        if let Some(fc) = &spec.filecoin {
            return self.filecoin_keys_here.then(|| kiln_filecoin::verify::verify(&fc.payload, proof).is_ok());
        }
        let path = SyntheticJob::srs_spec(spec.circuit, spec.log_size, spec.effective_inputs(), &self.params_dir).path;
        let params = {
            let mut keys = self.keys.lock().expect("verifier lock");
            keys.entry(path.clone())
                .or_insert_with(|| ParamsFile::open(&path).ok().map(Arc::new))
                .clone()?
        };
        if proof.len() != spec.partitions as usize * 192 {
            return Some(false);
        }
        let shape = SyntheticCircuit::filling_domain(spec.circuit, spec.log_size, spec.effective_inputs());
        Some(proof.chunks(192).enumerate().all(|(i, bytes)| {
            let inputs = shape.with_witness(req.synthetic_seed.wrapping_add(i as u64)).public_inputs();
            Proof::<Bls12>::read(bytes).is_ok_and(|p| verify_proof(params.prepared_vk(), &p, &inputs).unwrap_or(false))
        }))
    }
}
