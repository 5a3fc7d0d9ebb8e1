//! [`MemoryBudget`]: one byte budget for the whole process.

mod reservation;
mod reserve;
mod state;

use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;
use serde::Serialize;

pub use reservation::{MemoryReservation, PermanentReservation};
pub use reserve::Reserve;

use crate::class::{ClassBytes, MemoryClass};
use crate::system::{self, DetectError, HostMemory};
use state::BudgetState;

/// Why a reservation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// The request is larger than the whole budget: it could never be granted,
    /// so it fails at once instead of waiting forever.
    #[error(
        "a reservation of {requested} bytes can never fit in the memory budget of {total} bytes"
    )]
    Exceeds {
        /// Bytes asked for.
        requested: u64,
        /// The budget's total.
        total: u64,
    },
    /// Only from [`MemoryBudget::try_reserve`]: the bytes are not free now, or
    /// others are already waiting (who come first).
    #[error("{requested} bytes are not available now ({available} bytes free, {waiting} reservations waiting)")]
    Unavailable {
        /// Bytes asked for.
        requested: u64,
        /// Bytes free when it was refused.
        available: u64,
        /// Reservations queued ahead of it.
        waiting: usize,
    },
}

/// Something that can give memory back when a reservation has to wait: a
/// cache such as the SRS manager.
///
/// The budget calls [`Evictor::evict`] once for every reservation that starts
/// waiting, on the thread that asked for it, never while holding the budget's
/// lock: the evictor frees memory by dropping its own [`MemoryReservation`]s,
/// which wakes the waiters. It should be quick (it may run on an async
/// executor's thread) and must not wait on the budget itself.
pub trait Evictor: Send + Sync {
    /// Try to release at least `wanted_bytes` of reservations; return how many
    /// bytes were released (used for logging only).
    fn evict(&self, wanted_bytes: u64) -> u64;
}

/// Counters of a [`MemoryBudget`] at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetSnapshot {
    /// The budget's size in bytes.
    pub total: u64,
    /// Bytes held by reservations (permanent ones included).
    pub reserved: u64,
    /// `total - reserved`.
    pub available: u64,
    /// `reserved`, split by class.
    pub reserved_by_class: ClassBytes,
    /// Bytes of `reserved` held by [`PermanentReservation`]s.
    pub permanent: u64,
    /// Reservations queued, waiting for bytes.
    pub waiting_reservations: usize,
    /// Bytes those waiting reservations ask for.
    pub waiting_bytes: u64,
    /// The highest `reserved` seen since creation or [`MemoryBudget::reset_peak`].
    pub peak_reserved: u64,
}

pub(crate) struct BudgetInner {
    total: u64,
    state: Mutex<BudgetState>,
    evictor: Mutex<Option<Arc<dyn Evictor>>>,
}

impl BudgetInner {
    /// Runs `f` under the lock, then wakes whatever it collected, unlocked.
    fn with_state<R>(&self, f: impl FnOnce(&mut BudgetState, &mut Vec<Waker>) -> R) -> R {
        let mut wake = Vec::new();
        let out = f(&mut self.state.lock(), &mut wake);
        wake.into_iter().for_each(Waker::wake);
        out
    }

    fn evict(&self, wanted_bytes: u64) {
        // Clone out so the evictor runs without any budget lock held.
        let evictor = self.evictor.lock().clone();
        if let Some(evictor) = evictor {
            let freed = evictor.evict(wanted_bytes);
            tracing::debug!(
                wanted_bytes,
                freed,
                "memory budget asked its evictor for memory"
            );
        }
    }
}

/// One byte budget for the process: SRS, pinned pool, synthesis working sets.
///
/// A cheap handle (an `Arc` inside): clone it into every component. Memory is
/// taken as [`MemoryReservation`]s, which give their bytes back when dropped.
/// Requests are served strictly first-in first-out, whether they come from
/// async tasks ([`reserve`](Self::reserve)) or plain threads
/// ([`reserve_blocking`](Self::reserve_blocking)): a small request never
/// overtakes a larger one queued before it.
///
/// ```
/// use kiln_memory::{MemoryBudget, MemoryClass};
///
/// let budget = MemoryBudget::new(1 << 30);
/// let mut r = budget.reserve_blocking(600 << 20, MemoryClass::Synthesis)?;
/// assert!(budget.try_reserve(600 << 20, MemoryClass::Other).is_err());
/// r.shrink(200 << 20); // partial release
/// let other = budget.try_reserve(600 << 20, MemoryClass::Other)?;
/// assert_eq!(budget.snapshot().reserved, 1000 << 20);
/// drop((r, other));
/// assert_eq!(budget.snapshot().reserved, 0);
/// # Ok::<(), kiln_memory::BudgetError>(())
/// ```
#[derive(Clone)]
pub struct MemoryBudget {
    inner: Arc<BudgetInner>,
}

impl std::fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MemoryBudget")
            .field(&self.snapshot())
            .finish()
    }
}

impl MemoryBudget {
    /// A budget of exactly `total_bytes`.
    pub fn new(total_bytes: u64) -> Self {
        MemoryBudget {
            inner: Arc::new(BudgetInner {
                total: total_bytes,
                state: Mutex::new(BudgetState::new(total_bytes)),
                evictor: Mutex::new(None),
            }),
        }
    }

    /// A budget sized from the host: the smaller of `MemTotal` and the cgroup
    /// memory limit (v2 `memory.max` or v1 `memory.limit_in_bytes`, the tightest
    /// along the process's cgroup path), minus `margin_bytes`.
    ///
    /// Prefer an explicit size (see [`from_config`](Self::from_config)) on VM
    /// hosts whose `MemTotal` grows as memory is touched (balloon / lazily
    /// backed guests): there `MemTotal` says nothing about what is safe to use.
    pub fn auto(margin_bytes: u64) -> Result<Self, DetectError> {
        let host = system::detect_host_memory()?;
        let total = host.usable(margin_bytes);
        tracing::info!(
            mem_total = host.mem_total,
            cgroup_limit = ?host.cgroup_limit,
            margin_bytes,
            total,
            "memory budget sized from the host"
        );
        Ok(Self::new(total))
    }

    /// The budget a daemon config describes: `explicit_total` when set (it
    /// always wins over detection), else [`auto`](Self::auto) with `margin_bytes`.
    pub fn from_config(
        explicit_total: Option<u64>,
        margin_bytes: u64,
    ) -> Result<Self, DetectError> {
        match explicit_total {
            Some(total) => {
                tracing::info!(total, "memory budget set explicitly");
                Ok(Self::new(total))
            }
            None => Self::auto(margin_bytes),
        }
    }

    /// What the host reports, for logs and `/status` (no budget is made).
    pub fn detect_host() -> Result<HostMemory, DetectError> {
        system::detect_host_memory()
    }

    /// The budget's size in bytes.
    pub fn total(&self) -> u64 {
        self.inner.total
    }

    /// Waits (FIFO) until `bytes` are free, then reserves them.
    ///
    /// Fails at once with [`BudgetError::Exceeds`] if `bytes > total`. When the
    /// request has to wait, the [`Evictor`] (if any) is asked for the shortfall.
    /// Dropping the returned future before it completes leaks nothing and
    /// lets the next waiter proceed.
    pub fn reserve(&self, bytes: u64, class: MemoryClass) -> Reserve {
        Reserve::new(self.clone(), bytes, class)
    }

    /// [`reserve`](Self::reserve) for plain threads (rayon, synthesis workers):
    /// parks the thread in the same FIFO queue as the async callers.
    pub fn reserve_blocking(
        &self,
        bytes: u64,
        class: MemoryClass,
    ) -> Result<MemoryReservation, BudgetError> {
        crate::block_on::block_on(self.reserve(bytes, class))
    }

    /// Reserves `bytes` only if that needs no waiting: they are free now and
    /// no one is queued (a queued request comes first).
    pub fn try_reserve(
        &self,
        bytes: u64,
        class: MemoryClass,
    ) -> Result<MemoryReservation, BudgetError> {
        self.check_fits_ever(bytes)?;
        self.inner.with_state(|s, _| {
            if s.try_take(bytes, class) {
                Ok(MemoryReservation::new(self.inner.clone(), bytes, class))
            } else {
                let snap = s.snapshot();
                Err(BudgetError::Unavailable {
                    requested: bytes,
                    available: snap.available,
                    waiting: snap.waiting_reservations,
                })
            }
        })
    }

    /// `Err(Exceeds)` if `bytes` could never be granted; use at admission to
    /// refuse a job larger than the budget before it starts.
    pub fn check_fits_ever(&self, bytes: u64) -> Result<(), BudgetError> {
        if bytes > self.inner.total {
            Err(BudgetError::Exceeds {
                requested: bytes,
                total: self.inner.total,
            })
        } else {
            Ok(())
        }
    }

    /// Installs the cache that is asked to give memory back when a
    /// reservation waits, replacing any earlier one. The budget keeps the
    /// `Arc`: an evictor that holds this budget forms a cycle that lives as
    /// long as the process (fine for the daemon's SRS manager).
    pub fn set_evictor(&self, evictor: Arc<dyn Evictor>) {
        *self.inner.evictor.lock() = Some(evictor);
    }

    /// Removes the evictor, if any.
    pub fn clear_evictor(&self) {
        *self.inner.evictor.lock() = None;
    }

    /// The counters now.
    pub fn snapshot(&self) -> BudgetSnapshot {
        self.inner.state.lock().snapshot()
    }

    /// Restarts `peak_reserved` from the current `reserved`, e.g. after a
    /// warm-up window so the steady-state peak is measured.
    pub fn reset_peak(&self) {
        self.inner.state.lock().reset_peak();
    }

    pub(crate) fn inner(&self) -> &Arc<BudgetInner> {
        &self.inner
    }
}

#[cfg(test)]
mod tests;
