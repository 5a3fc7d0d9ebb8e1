//! The two lanes work runs in: **critical** (partitions of `Critical`
//! jobs: WinningPoSt, deadline work) and **bulk** (everything else). Deadline
//! work must take about as long with the box full of bulk work as on an idle
//! one, so the critical lane owns what bulk work could otherwise hold it up
//! with:
//!
//! - **cores**: a rayon pool of its own (`critical_threads`) for its
//!   synthesis and prover work, while bulk work runs in the bulk pool
//!   (`bulk_threads`), whose threads run `bulk_nice` steps below normal
//!   priority, so the kernel gives the cores to critical threads the moment
//!   they are runnable;
//! - **memory**: a reserve of the budget (`critical_reserve_bytes`) that
//!   bulk reservations never take, a priority handle on the budget that is
//!   served before any bulk waiter, its own buffer pool, and its own
//!   acquire gate (a bulk worker waiting at its gate for memory never holds
//!   a critical one up; while a critical reservation waits, a bulk acquirer
//!   gives back what it holds and waits: see `acquire.rs`);
//! - **queues and threads**: its own place in the bounded GPU queue, its
//!   own prover workers (high-priority streams on each GPU: see
//!   `ProverBackend::urgent_worker`) and its own finalizer.
//!
//! A partition's lane follows its job's priority, whichever worker takes it.

use std::sync::Arc;

use kiln_groth16::ProverBackend;
use kiln_memory::{BudgetSnapshot, MemoryBudget, PinnedPool};
use parking_lot::Mutex;
use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::config::EngineConfig;
use crate::job::Priority;
use crate::status::LaneStatus;

/// The reserve when `critical_reserve_bytes` is not set (at most an eighth
/// of the budget): room for one 32 GiB WinningPoSt partition on a GPU
/// host, whose a/b/c over 2^22 and ~3.5M aux values take ~0.5 GiB in the
/// pool and whose parameters ~0.18 GiB.
pub(crate) const DEFAULT_CRITICAL_RESERVE: u64 = 1 << 30;

/// Which lane a partition runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    Bulk,
    Critical,
}

impl Lane {
    pub(crate) fn of(priority: Priority) -> Lane {
        if priority == Priority::Critical {
            Lane::Critical
        } else {
            Lane::Bulk
        }
    }
}

/// What the lanes own.
pub(crate) struct Lanes {
    /// Budget bytes bulk reservations leave free.
    pub(crate) reserve_bytes: u64,
    /// The engine's budget through its priority handle.
    critical_budget: MemoryBudget,
    /// Buffers of critical partitions, paid for through `critical_budget`.
    critical_pool: PinnedPool,
    /// The critical lane's acquire gate (`Shared::acquire_gate` is bulk's).
    pub(crate) critical_gate: Mutex<()>,
    bulk_cpu: ThreadPool,
    /// `None` with `critical_threads = 0`: critical work shares the bulk pool.
    critical_cpu: Option<ThreadPool>,
    /// The largest need (one partition and its parameters) of a critical
    /// job seen at submission, for status and the reserve's sizing.
    pub(crate) largest_critical_need: Mutex<u64>,
}

impl Lanes {
    /// Sets the reserve on `budget` and makes the critical pool and both
    /// thread pools.
    pub(crate) fn new(config: &EngineConfig, budget: &MemoryBudget, pool_cap: u64) -> Result<Self, String> {
        let reserve_bytes = config.critical_reserve_bytes.unwrap_or(DEFAULT_CRITICAL_RESERVE.min(budget.total() / 8));
        if reserve_bytes >= budget.total() {
            return Err(format!("critical_reserve_bytes ({reserve_bytes}) leaves nothing of the memory budget ({}) for bulk work", budget.total()));
        }
        budget.set_priority_reserve(reserve_bytes);
        let critical_budget = budget.priority();
        let critical_pool = if config.pin_host_buffers {
            PinnedPool::new(&critical_budget, pool_cap)
        } else {
            PinnedPool::pageable(&critical_budget, pool_cap)
        };
        let bulk_nice = config.bulk_nice;
        let bulk_cpu = ThreadPoolBuilder::new()
            .num_threads(config.bulk_threads)
            .thread_name(|i| format!("kiln-bulk-{i}"))
            .start_handler(move |i| lower_bulk_thread(i, bulk_nice))
            .build()
            .map_err(|e| format!("cannot start the bulk thread pool: {e}"))?;
        let critical_cpu = match config.critical_threads {
            0 => None,
            n => Some(
                ThreadPoolBuilder::new()
                    .num_threads(n)
                    .thread_name(|i| format!("kiln-crit-{i}"))
                    .build()
                    .map_err(|e| format!("cannot start the critical thread pool: {e}"))?,
            ),
        };
        Ok(Lanes {
            reserve_bytes,
            critical_budget,
            critical_pool,
            critical_gate: Mutex::new(()),
            bulk_cpu,
            critical_cpu,
            largest_critical_need: Mutex::new(0),
        })
    }

    /// Runs `f` in `lane`'s thread pool (rayon work inside it stays there)
    /// and waits for it.
    pub(crate) fn install<R: Send>(&self, lane: Lane, f: impl FnOnce() -> R + Send) -> R {
        match (lane, &self.critical_cpu) {
            (Lane::Critical, Some(pool)) => pool.install(f),
            _ => self.bulk_cpu.install(f),
        }
    }

    /// Runs a prover's start for `lane` and waits for it: in the lane's
    /// pool, except a bulk start on a device (the satisfaction check and the
    /// copies to the device), which runs on the calling thread with its
    /// parallel work on rayon's global pool. Not in the bulk pool: a bulk
    /// thread blocked in a join there takes queued work while it waits, and
    /// the queued work there is whole partition syntheses (seconds to
    /// minutes at 32 GiB); a start that picked one up would keep its device
    /// idle, and its partition's buffers held, until that synthesis ended.
    /// A CPU prover's start is the whole proof and stays in the bulk pool.
    pub(crate) fn run_start<R: Send>(&self, lane: Lane, on_device: bool, f: impl FnOnce() -> R + Send) -> R {
        match (lane, &self.critical_cpu) {
            (Lane::Critical, Some(pool)) => pool.install(f),
            (Lane::Bulk, _) if on_device => f(),
            _ => self.bulk_cpu.install(f),
        }
    }

    /// The critical lane's budget handle and pool (bulk uses the engine's own).
    pub(crate) fn critical_memory(&self) -> (&MemoryBudget, &PinnedPool) {
        (&self.critical_budget, &self.critical_pool)
    }

    /// Gives back idle critical buffers beyond the reserve: the reserve
    /// keeps the buffers it has room for (page-locking them again takes
    /// long), but a buffer past it holds memory bulk work may need.
    pub(crate) fn trim_critical_pool(&self) {
        let total = self.critical_pool.snapshot().pinned_total_bytes;
        if total > self.reserve_bytes {
            let freed = self.critical_pool.release_idle(total - self.reserve_bytes);
            if freed > 0 {
                tracing::debug!(freed, reserve = self.reserve_bytes, "idle critical buffers beyond the reserve released");
            }
        }
    }

    pub(crate) fn status(&self, config: &EngineConfig, budget: &BudgetSnapshot, critical_prover_workers: usize) -> LaneStatus {
        LaneStatus {
            critical_reserve_bytes: budget.priority_reserve,
            critical_reserved_bytes: budget.priority_reserved,
            critical_waiting: budget.priority_waiting,
            largest_critical_need_bytes: *self.largest_critical_need.lock(),
            critical_pinned_pool: self.critical_pool.snapshot(),
            critical_threads: self.critical_cpu.as_ref().map_or(0, ThreadPool::current_num_threads),
            bulk_threads: self.bulk_cpu.current_num_threads(),
            bulk_nice: config.bulk_nice,
            critical_prover_workers,
        }
    }

    /// Records a critical job's need (one partition and its parameters);
    /// says once per size when it exceeds the reserve.
    pub(crate) fn note_critical_need(&self, kind: &str, need: u64) {
        let mut largest = self.largest_critical_need.lock();
        if need <= *largest {
            return;
        }
        *largest = need;
        drop(largest);
        if need > self.reserve_bytes {
            tracing::warn!(
                kind, need_bytes = need, reserve_bytes = self.reserve_bytes,
                "a critical partition and its parameters need more than the critical reserve: under memory pressure it \
                 waits for memory bulk jobs hold (raise engine.critical_reserve_bytes to at least need_bytes)"
            );
        }
    }
}

/// `per_device` workers for critical partitions on each device the
/// `backends` run on, from the first backend of each device; none for a
/// backend that has no urgent worker (its ordinary workers then take
/// critical partitions first).
pub(crate) fn urgent_workers(backends: &[Arc<dyn ProverBackend>], per_device: usize) -> Vec<Arc<dyn ProverBackend>> {
    let mut devices: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for backend in backends {
        let device = backend.device();
        if devices.contains(&device) {
            continue;
        }
        devices.push(device.clone());
        for _ in 0..per_device {
            match backend.urgent_worker() {
                Ok(Some(worker)) => out.push(worker),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(device, error = %e, "no critical prover worker on this device: critical partitions share its workers");
                    break;
                }
            }
        }
    }
    out
}

/// A bulk pool thread's start: run `nice` steps below normal priority.
fn lower_bulk_thread(index: usize, nice: i32) {
    if nice <= 0 {
        return;
    }
    match crate::nice::lower_this_thread(nice) {
        Ok(now) if index == 0 => tracing::debug!(nice = now, "bulk threads run at a lower priority"),
        Ok(_) => {}
        // Every thread would say the same: once is enough.
        Err(e) if index == 0 => tracing::warn!(error = %e, "cannot lower the bulk threads' priority (engine.bulk_nice)"),
        Err(_) => {}
    }
}
