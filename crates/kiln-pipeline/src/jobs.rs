//! A job inside the engine: its request, its progress, its outcome, and
//! the wake-ups of whoever waits for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_groth16::ProvedProof;
use kiln_memory::MemoryReservation;
use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

use crate::job::{JobOutcome, JobSource, JobTimings, Priority, SrsSpec};

/// A job and its state; shared by the registry and every partition in flight.
pub(crate) struct Job {
    pub(crate) id: Arc<str>,
    /// Submission order: FIFO within a priority level.
    pub(crate) seq: u64,
    pub(crate) priority: Priority,
    /// What the job proves; dropped when it ends (with the payload it holds).
    source: Mutex<Option<Arc<dyn JobSource>>>,
    pub(crate) kind: String,
    pub(crate) srs: SrsSpec,
    pub(crate) num_partitions: usize,
    pub(crate) deadline: Option<Instant>,
    pub(crate) submitted: Instant,
    /// Set when the job ends for any reason: workers drop its partitions.
    stopped: AtomicBool,
    state: Mutex<JobState>,
    ended: Condvar,
    ended_async: Notify,
    /// The request memory this job holds (its record and payload while it
    /// runs; its record and answer once ended).
    memory: Mutex<Option<MemoryReservation>>,
}

/// Request memory a job's record takes, beside its payload and answer.
pub(crate) const JOB_RECORD_BYTES: u64 = 4 << 10;

#[derive(Default)]
struct JobState {
    outcome: Option<JobOutcome>,
    proofs: Vec<Option<ProvedProof>>,
    proved: usize,
    /// Partitions that have started synthesis (got their memory).
    started: usize,
    first_start: Option<Instant>,
    srs_load: Duration,
    synthesis: Duration,
    gpu_compute: Duration,
}

/// What recording a partition's proof led to.
pub(crate) enum Progress {
    /// More partitions to go.
    Pending,
    /// That was the last one: here are all the proofs, in partition order.
    AllProved(Vec<ProvedProof>),
    /// The job had already ended; the proof is discarded.
    Ended,
}

impl Job {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: Arc<str>,
        seq: u64,
        priority: Priority,
        source: Arc<dyn JobSource>,
        srs: SrsSpec,
        num_partitions: usize,
        deadline: Option<Instant>,
        memory: MemoryReservation,
    ) -> Arc<Self> {
        let kind = source.kind_label().to_string();
        Arc::new(Job {
            id,
            seq,
            priority,
            source: Mutex::new(Some(source)),
            kind,
            srs,
            num_partitions,
            deadline,
            submitted: Instant::now(),
            stopped: AtomicBool::new(false),
            state: Mutex::new(JobState { proofs: (0..num_partitions).map(|_| None).collect(), ..Default::default() }),
            ended: Condvar::new(),
            ended_async: Notify::new(),
            memory: Mutex::new(Some(memory)),
        })
    }

    /// What the job proves; `None` once it has ended.
    pub(crate) fn source(&self) -> Option<Arc<dyn JobSource>> {
        self.source.lock().clone()
    }

    /// True once the job has ended: nothing more should be done for it.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The outcome, once the job has ended.
    pub(crate) fn outcome(&self) -> Option<JobOutcome> {
        self.state.lock().outcome.clone()
    }

    /// (partitions started, partitions proved), for status.
    pub(crate) fn progress(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.started, s.proved)
    }

    pub(crate) fn add_srs_load(&self, d: Duration) {
        self.state.lock().srs_load += d;
    }

    pub(crate) fn add_synthesis(&self, d: Duration) {
        self.state.lock().synthesis += d;
    }

    pub(crate) fn add_gpu_compute(&self, d: Duration) {
        self.state.lock().gpu_compute += d;
    }

    /// A partition got its memory and starts synthesis.
    pub(crate) fn partition_started(&self) {
        let mut s = self.state.lock();
        s.started += 1;
        s.first_start.get_or_insert_with(Instant::now);
    }

    /// A started partition goes back to the synthesis queue (a retry).
    pub(crate) fn partition_requeued(&self) {
        let mut s = self.state.lock();
        s.started = s.started.saturating_sub(1);
    }

    /// Records partition `i`'s verified proof.
    pub(crate) fn partition_proved(&self, i: usize, proof: ProvedProof) -> Progress {
        let mut s = self.state.lock();
        if s.outcome.is_some() {
            return Progress::Ended;
        }
        if s.proofs[i].replace(proof).is_none() {
            s.proved += 1;
        }
        if s.proved < self.num_partitions {
            return Progress::Pending;
        }
        Progress::AllProved(s.proofs.iter_mut().map(|p| p.take().expect("all proved")).collect())
    }

    /// The timings so far, `total` measured now.
    pub(crate) fn timings(&self) -> JobTimings {
        let s = self.state.lock();
        let now = Instant::now();
        JobTimings {
            queue_wait: s.first_start.unwrap_or(now).duration_since(self.submitted),
            srs_load: s.srs_load,
            synthesis: s.synthesis,
            gpu_compute: s.gpu_compute,
            total: now.duration_since(self.submitted),
        }
    }

    /// Ends the job with `outcome` unless it has ended already; returns
    /// whether this call ended it. `count` runs before anyone can see the
    /// outcome (so totals are never behind what a waiter observed). Wakes
    /// every waiter.
    pub(crate) fn end(&self, outcome: JobOutcome, count: impl FnOnce(&JobOutcome)) -> bool {
        {
            let mut s = self.state.lock();
            if s.outcome.is_some() {
                return false;
            }
            count(&outcome);
            let answer = match &outcome {
                JobOutcome::Completed { proof, .. } => proof.len() as u64,
                JobOutcome::Failed(m) => m.len() as u64,
                _ => 0,
            };
            s.outcome = Some(outcome);
            s.proofs = Vec::new();
            self.stopped.store(true, Ordering::Release);
            // Ended, the job keeps its record and its answer, not its payload.
            if let Some(memory) = self.memory.lock().as_mut() {
                memory.shrink(memory.bytes().saturating_sub(JOB_RECORD_BYTES + answer));
            }
        }
        // Partitions still in flight hold their own clone until they stop.
        let source = self.source.lock().take();
        drop(source);
        self.ended.notify_all();
        self.ended_async.notify_waiters();
        true
    }

    /// Waits (blocking) until the job ends or `timeout` passes.
    pub(crate) fn wait_blocking(&self, timeout: Option<Duration>) -> JobOutcome {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut s = self.state.lock();
        loop {
            if let Some(o) = &s.outcome {
                return o.clone();
            }
            match deadline {
                None => self.ended.wait(&mut s),
                Some(d) => {
                    if self.ended.wait_until(&mut s, d).timed_out() && s.outcome.is_none() {
                        return JobOutcome::Timeout;
                    }
                }
            }
        }
    }

    /// Waits (async) until the job ends or `timeout` passes.
    pub(crate) async fn wait(&self, timeout: Option<Duration>) -> JobOutcome {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        loop {
            let notified = self.ended_async.notified();
            tokio::pin!(notified);
            // Register before checking, so an end between the check and the
            // await still wakes us.
            notified.as_mut().enable();
            if let Some(o) = self.outcome() {
                return o;
            }
            match deadline {
                None => notified.await,
                Some(d) => {
                    if tokio::time::timeout_at(d, notified).await.is_err() {
                        return self.outcome().unwrap_or(JobOutcome::Timeout);
                    }
                }
            }
        }
    }
}
