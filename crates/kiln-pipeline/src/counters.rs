//! Buffer counters by stage: how many partitions (and how many bytes of
//! their buffers and reservations) sit in each stage of the pipeline.
//!
//! A partition's counts move with a [`StageGuard`] that travels with it, so
//! whatever path it takes (completion, failure, cancellation, a panic
//! unwinding through a worker) the counters return to zero when it is gone.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde::Serialize;

/// Where a partition's buffers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Memory granted; a synthesis worker is writing a/b/c/aux.
    Synthesizing,
    /// Synthesized; its worker waits (holding its permit) for room in the GPU queue.
    SynthesizedWaiting,
    /// In the bounded GPU queue.
    InGpuQueue,
    /// A GPU worker is running the prover on it.
    OnGpu,
    /// Buffers back in the pool; the proof is being assembled and verified.
    Finalizing,
    /// Done, failed or cancelled: its memory is being given back.
    Freeing,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 6] =
        [Stage::Synthesizing, Stage::SynthesizedWaiting, Stage::InGpuQueue, Stage::OnGpu, Stage::Finalizing, Stage::Freeing];

    /// A stable lowercase name, for logs and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Synthesizing => "synthesizing",
            Stage::SynthesizedWaiting => "synthesized_waiting",
            Stage::InGpuQueue => "in_gpu_queue",
            Stage::OnGpu => "on_gpu",
            Stage::Finalizing => "finalizing",
            Stage::Freeing => "freeing",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One stage's counters at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct StageCount {
    pub stage: Stage,
    /// Partitions in the stage.
    pub count: usize,
    /// Bytes those partitions hold (buffers plus reservations).
    pub bytes: u64,
}

/// All stages' counters at an instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BufferCounters {
    /// One entry per [`Stage`], in pipeline order.
    pub stages: Vec<StageCount>,
    /// The most partitions ever synthesized but not yet started on a GPU
    /// (`synthesized_waiting + in_gpu_queue`). Bounded by
    /// `synthesis_workers + critical_lane_workers + 2 * gpu_queue_depth`
    /// (the GPU queue has that room for bulk and again for critical
    /// partitions): the synthesis permit is held until the GPU queue takes
    /// the partition.
    pub peak_synthesized_not_started: usize,
}

impl BufferCounters {
    /// The counters of one stage.
    pub fn get(&self, stage: Stage) -> StageCount {
        self.stages[stage.index()]
    }

    /// True when no partition is in any stage and no bytes are counted.
    pub fn is_idle(&self) -> bool {
        self.stages.iter().all(|s| s.count == 0 && s.bytes == 0)
    }
}

/// The live counters, shared by every worker.
pub(crate) struct StageCounters {
    count: [AtomicUsize; 6],
    bytes: [AtomicU64; 6],
    peak_not_started: AtomicUsize,
    started: Instant,
    last_log_ms: AtomicU64,
    log_interval_ms: u64,
    /// Makes each move (and each snapshot) one atomic step.
    peak_lock: Mutex<()>,
}

impl StageCounters {
    pub(crate) fn new(log_interval_ms: u64) -> Arc<Self> {
        Arc::new(StageCounters {
            count: Default::default(),
            bytes: Default::default(),
            peak_not_started: AtomicUsize::new(0),
            started: Instant::now(),
            last_log_ms: AtomicU64::new(0),
            log_interval_ms,
            peak_lock: Mutex::new(()),
        })
    }

    /// Moves one partition from `from` (holding `from_bytes`) to `to` (now
    /// holding `to_bytes`); either may be `None` (entering, leaving). One
    /// lock for the whole move, so no snapshot sees it in two stages or none.
    fn apply(&self, from: Option<(Stage, u64)>, to: Option<(Stage, u64)>) {
        let _g = self.peak_lock.lock();
        if let Some((stage, bytes)) = to {
            self.count[stage.index()].fetch_add(1, Ordering::SeqCst);
            self.bytes[stage.index()].fetch_add(bytes, Ordering::SeqCst);
        }
        if let Some((stage, bytes)) = from {
            self.count[stage.index()].fetch_sub(1, Ordering::SeqCst);
            self.bytes[stage.index()].fetch_sub(bytes, Ordering::SeqCst);
        }
        let not_started = self.count[Stage::SynthesizedWaiting.index()].load(Ordering::SeqCst)
            + self.count[Stage::InGpuQueue.index()].load(Ordering::SeqCst);
        self.peak_not_started.fetch_max(not_started, Ordering::SeqCst);
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> BufferCounters {
        let _g = self.peak_lock.lock();
        BufferCounters {
            stages: Stage::ALL
                .iter()
                .map(|&stage| StageCount {
                    stage,
                    count: self.count[stage.index()].load(Ordering::SeqCst),
                    bytes: self.bytes[stage.index()].load(Ordering::SeqCst),
                })
                .collect(),
            peak_synthesized_not_started: self.peak_not_started.load(Ordering::SeqCst),
        }
    }

    /// Logs a one-line summary, at most once per interval.
    fn log_transition(&self, from: Option<Stage>, to: Option<Stage>, job: &str, partition: usize) {
        tracing::trace!(job, partition, from = from.map(Stage::name), to = to.map(Stage::name), "buffer stage");
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.last_log_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < self.log_interval_ms && last != 0 {
            return;
        }
        if self.last_log_ms.compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_err() {
            return; // another thread is logging this interval
        }
        let snap = self.snapshot();
        let c = |s: Stage| snap.get(s);
        tracing::info!(
            synthesizing = c(Stage::Synthesizing).count,
            synthesizing_bytes = c(Stage::Synthesizing).bytes,
            synthesized_waiting = c(Stage::SynthesizedWaiting).count,
            synthesized_waiting_bytes = c(Stage::SynthesizedWaiting).bytes,
            in_gpu_queue = c(Stage::InGpuQueue).count,
            in_gpu_queue_bytes = c(Stage::InGpuQueue).bytes,
            on_gpu = c(Stage::OnGpu).count,
            on_gpu_bytes = c(Stage::OnGpu).bytes,
            finalizing = c(Stage::Finalizing).count,
            finalizing_bytes = c(Stage::Finalizing).bytes,
            freeing = c(Stage::Freeing).count,
            freeing_bytes = c(Stage::Freeing).bytes,
            "buffer counters"
        );
    }
}

/// Counts one partition in one stage at a time; uncounts it when dropped.
pub(crate) struct StageGuard {
    counters: Arc<StageCounters>,
    stage: Stage,
    bytes: u64,
    job: Arc<str>,
    partition: usize,
}

impl StageGuard {
    pub(crate) fn enter(counters: &Arc<StageCounters>, stage: Stage, bytes: u64, job: Arc<str>, partition: usize) -> Self {
        counters.apply(None, Some((stage, bytes)));
        counters.log_transition(None, Some(stage), &job, partition);
        StageGuard { counters: counters.clone(), stage, bytes, job, partition }
    }

    /// Moves the partition to `stage`, now holding `bytes`.
    pub(crate) fn advance(&mut self, stage: Stage, bytes: u64) {
        self.counters.apply(Some((self.stage, self.bytes)), Some((stage, bytes)));
        self.counters.log_transition(Some(self.stage), Some(stage), &self.job, self.partition);
        self.stage = stage;
        self.bytes = bytes;
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for StageGuard {
    fn drop(&mut self) {
        self.counters.apply(Some((self.stage, self.bytes)), None);
        self.counters.log_transition(Some(self.stage), None, &self.job, self.partition);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_move_counts_and_return_to_zero() {
        let c = StageCounters::new(1000);
        let job: Arc<str> = Arc::from("j");
        let mut a = StageGuard::enter(&c, Stage::Synthesizing, 100, job.clone(), 0);
        let mut b = StageGuard::enter(&c, Stage::Synthesizing, 50, job.clone(), 1);
        a.advance(Stage::SynthesizedWaiting, 100);
        b.advance(Stage::SynthesizedWaiting, 50);
        a.advance(Stage::InGpuQueue, 100);
        let s = c.snapshot();
        assert_eq!(s.get(Stage::Synthesizing).count, 0);
        assert_eq!((s.get(Stage::SynthesizedWaiting).count, s.get(Stage::SynthesizedWaiting).bytes), (1, 50));
        assert_eq!((s.get(Stage::InGpuQueue).count, s.get(Stage::InGpuQueue).bytes), (1, 100));
        assert_eq!(s.peak_synthesized_not_started, 2);
        a.advance(Stage::Finalizing, 10);
        drop(b);
        assert_eq!(c.snapshot().get(Stage::Finalizing).bytes, 10);
        drop(a);
        assert!(c.snapshot().is_idle());
    }
}
