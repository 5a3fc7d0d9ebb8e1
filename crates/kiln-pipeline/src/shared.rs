//! [`Shared`]: what the engine's threads share (queues, budget, caches,
//! registry, health, totals), and how a job ends.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use kiln_groth16::ProverBackend;
use kiln_memory::{MemoryBudget, PinnedPool};
use kiln_synth::CircuitCache;
use parking_lot::Mutex;

use crate::config::EngineConfig;
use crate::counters::StageCounters;
use crate::health::Health;
use crate::job::JobOutcome;
use crate::jobs::Job;
use crate::lanes::Lanes;
use crate::queue::WorkQueue;
use crate::registry::Registry;
use crate::requests::Requests;
use crate::srs::SrsManager;
use crate::status::GpuWorkerStatus;
use crate::workers::{PartitionTask, Proving, Synthesized};

/// Everything the threads share.
pub(crate) struct Shared {
    pub(crate) config: EngineConfig,
    pub(crate) budget: MemoryBudget,
    pub(crate) pool: PinnedPool,
    pub(crate) srs: Arc<SrsManager>,
    /// Compiled circuits by parameter id.
    pub(crate) circuits: CircuitCache,
    pub(crate) counters: Arc<StageCounters>,
    pub(crate) synth_queue: WorkQueue<PartitionTask>,
    pub(crate) gpu_queue: WorkQueue<Synthesized>,
    pub(crate) final_queue: WorkQueue<Proving>,
    /// Held by the one bulk synthesis worker acquiring memory (parameters,
    /// pool buffer, reservation), so two workers never each hold part of
    /// what both need: whoever waits at the gate holds nothing (the
    /// critical lane has its own: see `acquire.rs`).
    pub(crate) acquire_gate: Mutex<()>,
    /// What the critical lane owns: its reserve, pool, gate and threads.
    pub(crate) lanes: Lanes,
    pub(crate) jobs: Mutex<Registry>,
    /// Request memory and the queue cap.
    pub(crate) requests: Requests,
    pub(crate) gpu_workers: Vec<Mutex<GpuWorkerStatus>>,
    /// The workers' backends, for device residency (status, eviction) and
    /// where a/b/c are computed (products.rs).
    pub(crate) backends: Vec<Arc<dyn ProverBackend>>,
    /// Faults and quarantine per device; the watchdog's limits.
    pub(crate) health: Health,
    pub(crate) synthesis_busy: AtomicUsize,
    /// No new jobs.
    pub(crate) accepting: AtomicBool,
    /// Workers exit.
    pub(crate) stopping: AtomicBool,
    pub(crate) totals: Totals,
    pub(crate) started: Instant,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Default)]
pub(crate) struct Totals {
    pub(crate) submitted: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) cancelled: AtomicU64,
    pub(crate) deadline_missed: AtomicU64,
    pub(crate) partitions_proved: AtomicU64,
    /// Partitions whose a/b/c, left to the prover, were rejected (redone
    /// on the reference path).
    pub(crate) products_rejected: AtomicU64,
    /// Partition starts on a prover, by where their a/b/c were computed:
    /// during synthesis on the host ...
    pub(crate) products_in_synthesis: AtomicU64,
    /// ... or by the prover, from the witness alone.
    pub(crate) products_by_prover: AtomicU64,
}

impl Shared {
    /// Ends `job` with `outcome` (first end wins), drops its queued
    /// partitions (freeing their memory) and counts it.
    pub(crate) fn end_job(&self, job: &Arc<Job>, outcome: JobOutcome) {
        let name = outcome.name();
        let message = match &outcome {
            JobOutcome::Failed(m) => Some(m.clone()),
            _ => None,
        };
        let late = job.deadline.is_some_and(|d| Instant::now() > d);
        let t = &self.totals;
        let ended = job.end(outcome, |o| {
            match o {
                JobOutcome::Completed { .. } => t.completed.fetch_add(1, Ordering::Relaxed),
                JobOutcome::Failed(_) => t.failed.fetch_add(1, Ordering::Relaxed),
                _ => t.cancelled.fetch_add(1, Ordering::Relaxed),
            };
            if late {
                t.deadline_missed.fetch_add(1, Ordering::Relaxed);
            }
        });
        if !ended {
            return;
        }
        self.jobs.lock().ended(job);
        if late {
            tracing::warn!(job = %job.id, kind = %job.kind, "job ended after its deadline");
        }
        let timings = job.timings();
        tracing::info!(
            job = %job.id, kind = %job.kind, outcome = name, error = message.as_deref(),
            queue_wait_ms = timings.queue_wait.as_millis() as u64, srs_load_ms = timings.srs_load.as_millis() as u64,
            synthesis_ms = timings.synthesis.as_millis() as u64, gpu_compute_ms = timings.gpu_compute.as_millis() as u64,
            total_ms = timings.total.as_millis() as u64, "job ended"
        );
        // Dropped here, outside the queues' locks: their memory goes back now.
        let queued = self.synth_queue.remove_where(|t| Arc::ptr_eq(&t.job, job));
        let synthesized = self.gpu_queue.remove_where(|s| Arc::ptr_eq(&s.job, job));
        let proving = self.final_queue.remove_where(|p| Arc::ptr_eq(&p.job, job));
        drop((queued, synthesized, proving));
        // Workers blocked pushing this job's partitions re-check and give up.
        self.gpu_queue.wake_all();
    }

    /// Every prover device is quarantined (`why`): fails every job not
    /// ended (new ones are refused: [`SubmitError::NoProver`](crate::SubmitError::NoProver)).
    pub(crate) fn no_prover_left(&self, why: &str) {
        tracing::error!(reason = why, "NO PROVER IS LEFT: failing every job and refusing new ones until kiln is restarted");
        // `submit` checks the health under the registry lock: a job it
        // queues after this snapshot is refused instead.
        let jobs: Vec<Arc<Job>> = self.jobs.lock().jobs().filter(|j| !j.is_stopped()).cloned().collect();
        for job in jobs {
            self.end_job(&job, JobOutcome::Failed(why.to_string()));
        }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Forgets the job that ended first (its record and answer go back to
    /// the request memory); false when none is left to forget.
    pub(crate) fn forget_oldest_ended(&self) -> bool {
        self.jobs.lock().forget_oldest_ended()
    }

    /// Jobs queued or running.
    pub(crate) fn live_jobs(&self) -> u64 {
        let t = &self.totals;
        let ended = t.completed.load(Ordering::Acquire) + t.failed.load(Ordering::Acquire) + t.cancelled.load(Ordering::Acquire);
        t.submitted.load(Ordering::Acquire).saturating_sub(ended)
    }
}
