//! RAII holders of reserved bytes.

use std::sync::Arc;

use super::{BudgetInner, Lane};
use crate::class::MemoryClass;

/// Bytes reserved from a [`MemoryBudget`](super::MemoryBudget); given back
/// when dropped.
///
/// ```
/// use kiln_memory::{MemoryBudget, MemoryClass};
///
/// let budget = MemoryBudget::new(100);
/// let mut abc = budget.try_reserve(90, MemoryClass::Synthesis)?;
/// let c = abc.split(30); // two reservations now, 60 + 30 bytes
/// abc.shrink(60);        // a/b copied to the GPU: give them back
/// assert_eq!((abc.bytes(), c.bytes()), (0, 30));
/// assert_eq!(budget.snapshot().reserved, 30);
/// # Ok::<(), kiln_memory::BudgetError>(())
/// ```
#[must_use = "dropping a reservation gives its bytes back at once"]
pub struct MemoryReservation {
    budget: Arc<BudgetInner>,
    bytes: u64,
    class: MemoryClass,
    lane: Lane,
}

impl MemoryReservation {
    pub(crate) fn new(budget: Arc<BudgetInner>, bytes: u64, class: MemoryClass, lane: Lane) -> Self {
        MemoryReservation {
            budget,
            bytes,
            class,
            lane,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The class the bytes are counted under.
    pub fn class(&self) -> MemoryClass {
        self.class
    }

    /// Gives `bytes` back to the budget now (waking waiters that then fit)
    /// and keeps the rest.
    ///
    /// # Panics
    /// If `bytes` is more than this reservation holds.
    pub fn shrink(&mut self, bytes: u64) {
        assert!(
            bytes <= self.bytes,
            "shrink by {bytes} bytes, but the reservation holds {}",
            self.bytes
        );
        if bytes == 0 {
            return;
        }
        self.bytes -= bytes;
        let (class, lane) = (self.class, self.lane);
        self.budget
            .with_state(|s, wake| s.release(bytes, class, lane, wake));
    }

    /// Moves `bytes` of this reservation into a new one of the same class
    /// (nothing is released or taken from the budget).
    ///
    /// # Panics
    /// If `bytes` is more than this reservation holds.
    pub fn split(&mut self, bytes: u64) -> MemoryReservation {
        assert!(
            bytes <= self.bytes,
            "split off {bytes} bytes, but the reservation holds {}",
            self.bytes
        );
        self.bytes -= bytes;
        MemoryReservation::new(self.budget.clone(), bytes, self.class, self.lane)
    }

    /// Counts the bytes under another class from now on (e.g. a pinned buffer
    /// going from idle to in use).
    pub fn reclassify(&mut self, class: MemoryClass) {
        if class != self.class {
            let (bytes, from) = (self.bytes, self.class);
            self.budget
                .with_state(|s, _| s.reclassify(bytes, from, class));
            self.class = class;
        }
    }

    /// Turns this into a long-lived reservation for a cache, counted under
    /// `permanent` in the snapshot until the returned handle is dropped (or
    /// forever, after [`PermanentReservation::leak`]).
    pub fn into_permanent(mut self) -> PermanentReservation {
        // Take the bytes out so dropping `self` releases nothing.
        let bytes = std::mem::take(&mut self.bytes);
        self.budget.with_state(|s, _| s.add_permanent(bytes));
        PermanentReservation {
            budget: self.budget.clone(),
            bytes,
            class: self.class,
            lane: self.lane,
        }
    }
}

impl Drop for MemoryReservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let (bytes, class, lane) = (self.bytes, self.class, self.lane);
            self.budget
                .with_state(|s, wake| s.release(bytes, class, lane, wake));
        }
    }
}

impl std::fmt::Debug for MemoryReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryReservation")
            .field("bytes", &self.bytes)
            .field("class", &self.class)
            .finish()
    }
}

/// A reservation held for the long run (a resident SRS, a cache entry),
/// reported as `permanent` in [`BudgetSnapshot`](super::BudgetSnapshot).
///
/// Dropping it (or [`release`](Self::release)) gives the bytes back, so a
/// forgotten handle cannot shrink the budget by accident; memory that truly
/// lives as long as the process is marked so with [`leak`](Self::leak).
#[must_use = "dropping a permanent reservation gives its bytes back at once"]
pub struct PermanentReservation {
    budget: Arc<BudgetInner>,
    bytes: u64,
    class: MemoryClass,
    lane: Lane,
}

impl PermanentReservation {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The class the bytes are counted under.
    pub fn class(&self) -> MemoryClass {
        self.class
    }

    /// Gives the bytes back (the same as dropping it, spelled out).
    pub fn release(self) {}

    /// Keeps the bytes reserved for the rest of the process's life.
    pub fn leak(self) {
        std::mem::forget(self);
    }
}

impl Drop for PermanentReservation {
    fn drop(&mut self) {
        let (bytes, class, lane) = (self.bytes, self.class, self.lane);
        self.budget.with_state(|s, wake| {
            s.remove_permanent(bytes);
            s.release(bytes, class, lane, wake);
        });
    }
}

impl std::fmt::Debug for PermanentReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermanentReservation")
            .field("bytes", &self.bytes)
            .field("class", &self.class)
            .finish()
    }
}
