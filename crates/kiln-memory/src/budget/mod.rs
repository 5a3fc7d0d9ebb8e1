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
    /// The request is larger than the whole budget (for an ordinary handle:
    /// the budget less its priority reserve): it could never be granted, so
    /// it fails at once instead of waiting forever.
    #[error(
        "a reservation of {requested} bytes can never fit in the memory budget of {total} bytes"
    )]
    Exceeds {
        /// Bytes asked for.
        requested: u64,
        /// What the handle can ever grant (see [`MemoryBudget::capacity`]).
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

/// Which queue a budget handle's reservations wait in; see
/// [`MemoryBudget::priority`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lane {
    Ordinary,
    Priority,
}

/// Counters of a [`MemoryBudget`] at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BudgetSnapshot {
    /// The budget's size in bytes.
    pub total: u64,
    /// Bytes held by reservations (permanent ones included).
    pub reserved: u64,
    /// What an ordinary reservation could take now: `total - reserved`,
    /// less the part of the priority reserve the priority lane does not
    /// hold (`priority_reserve - priority_reserved`, when positive).
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
    /// Bytes kept for priority reservations
    /// ([`MemoryBudget::set_priority_reserve`]).
    pub priority_reserve: u64,
    /// Bytes of `reserved` held through priority handles.
    pub priority_reserved: u64,
    /// Priority reservations queued (also counted in `waiting_reservations`).
    pub priority_waiting: usize,
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
    lane: Lane,
}

impl std::fmt::Debug for MemoryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MemoryBudget")
            .field(&self.lane)
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
            lane: Lane::Ordinary,
        }
    }

    /// A handle to the same budget whose reservations are **priority**
    /// ones (deadline work): they may use the priority reserve, and they
    /// wait in a queue of their own that is served before any ordinary
    /// waiter (while one waits, no ordinary reservation is granted). Clones
    /// of the handle, and pools made over it, keep its lane.
    ///
    /// ```
    /// use kiln_memory::{MemoryBudget, MemoryClass};
    ///
    /// let budget = MemoryBudget::new(100);
    /// budget.set_priority_reserve(30);
    /// let bulk = budget.try_reserve(70, MemoryClass::Synthesis)?;
    /// assert!(budget.try_reserve(1, MemoryClass::Synthesis).is_err(), "the rest is kept");
    /// let urgent = budget.priority().try_reserve(30, MemoryClass::Synthesis)?;
    /// assert_eq!(budget.snapshot().priority_reserved, 30);
    /// drop((bulk, urgent));
    /// # Ok::<(), kiln_memory::BudgetError>(())
    /// ```
    pub fn priority(&self) -> MemoryBudget {
        MemoryBudget {
            inner: self.inner.clone(),
            lane: Lane::Priority,
        }
    }

    /// Whether this handle's reservations are priority ones.
    pub fn is_priority(&self) -> bool {
        self.lane == Lane::Priority
    }

    /// Keeps `bytes` of the budget (at most all of it) for priority
    /// reservations: ordinary ones may then hold at most `total - bytes`
    /// while the priority lane holds nothing, so a priority reservation of
    /// up to `bytes` never waits for memory ordinary ones hold. Bytes the
    /// priority lane holds count against its reserve first. Reservations
    /// held already are untouched.
    pub fn set_priority_reserve(&self, bytes: u64) {
        self.inner.with_state(|s, wake| s.set_reserve(bytes, wake));
    }

    /// The most a single reservation through this handle can ever get: the
    /// whole budget for a priority handle, the budget less the priority
    /// reserve for an ordinary one.
    pub fn capacity(&self) -> u64 {
        self.inner.state.lock().capacity(self.lane)
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
            if s.try_take(bytes, class, self.lane) {
                Ok(MemoryReservation::new(self.inner.clone(), bytes, class, self.lane))
            } else {
                let snap = s.snapshot();
                Err(BudgetError::Unavailable {
                    requested: bytes,
                    available: s.room(self.lane),
                    waiting: snap.waiting_reservations,
                })
            }
        })
    }

    /// `Err(Exceeds)` if `bytes` could never be granted through this handle
    /// (see [`capacity`](Self::capacity)); use at admission to refuse a job
    /// larger than the budget before it starts.
    pub fn check_fits_ever(&self, bytes: u64) -> Result<(), BudgetError> {
        let capacity = self.capacity();
        if bytes > capacity {
            Err(BudgetError::Exceeds {
                requested: bytes,
                total: capacity,
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

    /// Priority reservations waiting now (cheaper than a snapshot): an
    /// ordinary acquirer holding part of what it needs may give it back
    /// while there are any, so the priority waiter is served sooner.
    pub fn priority_waiters(&self) -> usize {
        self.inner.state.lock().priority_waiters()
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

    pub(crate) fn lane(&self) -> Lane {
        self.lane
    }
}

#[cfg(test)]
mod tests;
