//! [`PinnedPool`]: page-locked host buffers, recycled, inside the budget.

mod buffer;
mod checkout;
pub(crate) mod host_alloc;
mod size_class;

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;
use serde::Serialize;

pub use buffer::PinnedBuffer;
pub use checkout::Checkout;

use crate::budget::{BudgetError, MemoryBudget, MemoryReservation};
use crate::class::MemoryClass;
use host_alloc::HostAllocator;

/// Why a checkout failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The buffer's size class is larger than the pool's cap: it could never
    /// be served.
    #[error("a buffer of {requested} bytes (size class {class_bytes}) exceeds the pinned pool's cap of {max_bytes} bytes")]
    ExceedsPool {
        /// Bytes asked for.
        requested: u64,
        /// The size class it rounds up to.
        class_bytes: u64,
        /// The pool's cap.
        max_bytes: u64,
    },
    /// The budget refused the buffer's bytes.
    #[error(transparent)]
    Budget(#[from] BudgetError),
    /// The host allocator (CUDA driver or `mmap`) failed.
    #[error("allocating {bytes} bytes of {kind} host memory failed: {reason}")]
    Alloc {
        /// Bytes of the failed allocation.
        bytes: u64,
        /// Which allocator.
        kind: &'static str,
        /// Its error.
        reason: String,
    },
    /// Only from [`PinnedPool::try_checkout`]: serving it would mean waiting.
    #[error("no pinned buffer of {requested} bytes is available without waiting")]
    WouldWait {
        /// Bytes asked for.
        requested: u64,
    },
}

/// Counters of a [`PinnedPool`] at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PoolSnapshot {
    /// Bytes of all buffers the pool holds (in use or idle).
    pub pinned_total_bytes: u64,
    /// Bytes of buffers checked out (their capacity, not the requested length).
    pub pinned_in_use_bytes: u64,
    /// Buffers the pool holds.
    pub buffers_total: usize,
    /// Buffers parked in the pool, ready for reuse.
    pub buffers_free: usize,
    /// Checkouts waiting for a buffer.
    pub waiting_checkouts: usize,
    /// The pool's cap on `pinned_total_bytes`.
    pub max_bytes: u64,
    /// Whether buffers are really page-locked (a CUDA driver allocated them).
    pub page_locked: bool,
}

/// A pool allocation and the budget bytes that pay for it.
pub(crate) struct Block {
    alloc: host_alloc::HostAllocation,
    reservation: MemoryReservation,
}

impl Block {
    fn bytes(&self) -> u64 {
        self.alloc.len() as u64
    }
}

struct Waiter {
    ticket: u64,
    class: u64,
    waker: Waker,
}

#[derive(Default)]
struct PoolState {
    /// Idle buffers by size class; never holds an empty list.
    free: BTreeMap<u64, Vec<Block>>,
    /// Bytes of live buffers plus growth in flight: what the cap bounds.
    committed_bytes: u64,
    live_bytes: u64,
    in_use_bytes: u64,
    buffers_total: usize,
    buffers_free: usize,
    /// Checkouts waiting, oldest first. A returned buffer goes straight to the
    /// oldest waiter of its class, so a newcomer cannot take it first.
    waiters: VecDeque<Waiter>,
    /// Buffers handed to a waiter that has not picked them up yet.
    handed: Vec<(u64, Block)>,
    next_ticket: u64,
}

impl PoolState {
    /// A parked buffer of `class`, unless an older waiter of that class is queued.
    fn take_free(&mut self, class: u64, ticket: Option<u64>) -> Option<Block> {
        let older_waiter = self
            .waiters
            .iter()
            .any(|w| w.class == class && ticket.is_none_or(|t| w.ticket < t));
        if older_waiter {
            return None;
        }
        let list = self.free.get_mut(&class)?;
        let mut block = list.pop().expect("free lists are never empty");
        if list.is_empty() {
            self.free.remove(&class);
        }
        self.buffers_free -= 1;
        self.in_use_bytes += class;
        block.reservation.reclassify(MemoryClass::PinnedInUse);
        if let Some(t) = ticket {
            self.remove_waiter(t);
        }
        Some(block)
    }

    fn take_handed(&mut self, ticket: u64) -> Option<Block> {
        let i = self.handed.iter().position(|(t, _)| *t == ticket)?;
        Some(self.handed.swap_remove(i).1)
    }

    fn idle_bytes(&self) -> u64 {
        self.free
            .iter()
            .map(|(class, list)| class * list.len() as u64)
            .sum()
    }

    /// Removes idle buffers, largest first, until `wanted` bytes are taken
    /// (or none are left). The caller drops them outside the lock.
    fn take_idle(&mut self, wanted: u64) -> Vec<Block> {
        let mut taken = Vec::new();
        let mut bytes = 0;
        while bytes < wanted {
            let Some(mut largest) = self.free.last_entry() else {
                break;
            };
            let block = largest.get_mut().pop().expect("free lists are never empty");
            if largest.get().is_empty() {
                largest.remove();
            }
            bytes += block.bytes();
            self.committed_bytes -= block.bytes();
            self.live_bytes -= block.bytes();
            self.buffers_total -= 1;
            self.buffers_free -= 1;
            taken.push(block);
        }
        taken
    }

    /// Queues (or refreshes) a waiter; returns its ticket.
    fn register(&mut self, ticket: Option<u64>, class: u64, waker: &Waker) -> u64 {
        if let Some(t) = ticket {
            if let Some(w) = self.waiters.iter_mut().find(|w| w.ticket == t) {
                if !w.waker.will_wake(waker) {
                    w.waker = waker.clone();
                }
                return t;
            }
        }
        let t = self.next_ticket;
        self.next_ticket += 1;
        self.waiters.push_back(Waiter {
            ticket: t,
            class,
            waker: waker.clone(),
        });
        t
    }

    fn remove_waiter(&mut self, ticket: u64) {
        if let Some(i) = self.waiters.iter().position(|w| w.ticket == ticket) {
            self.waiters.remove(i);
        }
    }

    /// Wakers of every waiter: room appeared (cap freed, or an idle buffer
    /// another class could evict), so each re-checks what it can do.
    fn all_wakers(&self) -> Vec<Waker> {
        self.waiters.iter().map(|w| w.waker.clone()).collect()
    }
}

pub(crate) struct PoolInner {
    budget: MemoryBudget,
    allocator: HostAllocator,
    max_bytes: u64,
    state: Mutex<PoolState>,
}

impl PoolInner {
    /// A buffer comes back: to the oldest waiter of its class, else parked.
    fn give_back(this: &Arc<PoolInner>, mut block: Block) {
        let class = block.bytes();
        let wake = {
            let mut s = this.state.lock();
            if let Some(i) = s.waiters.iter().position(|w| w.class == class) {
                let w = s.waiters.remove(i).expect("index is valid");
                s.handed.push((w.ticket, block));
                vec![w.waker]
            } else {
                s.in_use_bytes -= class;
                block.reservation.reclassify(MemoryClass::PinnedIdle);
                s.free.entry(class).or_default().push(block);
                s.buffers_free += 1;
                s.all_wakers()
            }
        };
        wake.into_iter().for_each(Waker::wake);
    }

    /// Growth in flight was abandoned: free its cap room.
    fn unclaim(&self, class: u64) {
        let wake = {
            let mut s = self.state.lock();
            s.committed_bytes -= class;
            s.all_wakers()
        };
        wake.into_iter().for_each(Waker::wake);
    }
}

/// Page-locked host buffers, recycled by size class, inside the budget.
///
/// With a CUDA driver the buffers come from `cuMemHostAlloc` with the
/// `PORTABLE` flag, so one pool serves every GPU in the process; without one
/// they are page-aligned `mmap` memory with the same API
/// ([`is_page_locked`](Self::is_page_locked) says which).
///
/// - **Recycled**: a dropped [`PinnedBuffer`] goes back to the pool, never
///   freed on that path (allocating 4 GiB pinned costs ~2 s). Requests are
///   rounded up to a size class (16 per power of two, at most 6.25 % waste)
///   and a parked buffer serves any request of its class.
/// - **Inside the budget**: each buffer holds a [`MemoryReservation`] for its
///   capacity, counted as [`MemoryClass::PinnedInUse`] while checked out and
///   [`MemoryClass::PinnedIdle`] while parked. Callers should not reserve the
///   same bytes again.
/// - **Bounded**: the pool never holds more than `max_bytes`. A checkout that
///   needs a new buffer when the cap or the budget is reached first frees idle
///   buffers of other size classes (the workload changed shape), then waits,
///   first in first out, for a buffer of its class to come back or for the
///   budget to grant the bytes.
///
/// ```
/// use kiln_memory::{MemoryBudget, MemoryClass, PinnedPool};
///
/// let budget = MemoryBudget::new(1 << 30);
/// let pool = PinnedPool::pageable(&budget, 256 << 20);
/// let first = pool.checkout(10 << 20)?;
/// let ptr = first.as_ptr();
/// drop(first);
/// let again = pool.checkout(10 << 20)?; // the same buffer, recycled
/// assert_eq!(again.as_ptr(), ptr);
/// assert_eq!(budget.snapshot().reserved_by_class.get(MemoryClass::PinnedInUse), 10 << 20);
/// # Ok::<(), kiln_memory::PoolError>(())
/// ```
#[derive(Clone)]
pub struct PinnedPool {
    inner: Arc<PoolInner>,
}

impl std::fmt::Debug for PinnedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PinnedPool").field(&self.snapshot()).finish()
    }
}

impl PinnedPool {
    /// A pool of at most `max_bytes`, page-locked if a CUDA driver and a
    /// device are present, ordinary page-aligned memory otherwise.
    pub fn new(budget: &MemoryBudget, max_bytes: u64) -> Self {
        Self::with_allocator(budget, max_bytes, HostAllocator::detect())
    }

    /// A pool of ordinary page-aligned memory even when a GPU is present
    /// (CPU-only deployments, tests).
    pub fn pageable(budget: &MemoryBudget, max_bytes: u64) -> Self {
        Self::with_allocator(budget, max_bytes, HostAllocator::Pageable)
    }

    /// [`new`](Self::new), then [`preallocate`](Self::preallocate) `sizes`.
    pub fn with_preallocated(
        budget: &MemoryBudget,
        max_bytes: u64,
        sizes: &[usize],
    ) -> Result<Self, PoolError> {
        let pool = Self::new(budget, max_bytes);
        pool.preallocate(sizes)?;
        Ok(pool)
    }

    fn with_allocator(budget: &MemoryBudget, max_bytes: u64, allocator: HostAllocator) -> Self {
        PinnedPool {
            inner: Arc::new(PoolInner {
                budget: budget.clone(),
                allocator,
                max_bytes,
                state: Mutex::new(PoolState::default()),
            }),
        }
    }

    /// Makes sure the pool holds idle buffers for all of `sizes` at once
    /// (reusing those it has), so the first jobs pay no allocation. Fails
    /// instead of waiting when the cap or the budget is too small.
    pub fn preallocate(&self, sizes: &[usize]) -> Result<(), PoolError> {
        let started = std::time::Instant::now();
        let buffers = sizes
            .iter()
            .map(|&s| self.try_checkout(s))
            .collect::<Result<Vec<_>, _>>()?;
        let bytes: usize = buffers.iter().map(PinnedBuffer::capacity).sum();
        drop(buffers);
        tracing::info!(buffers = sizes.len(), bytes, elapsed = ?started.elapsed(), "pinned pool preallocated");
        Ok(())
    }

    /// Checks out a buffer of `bytes`, parking the thread while it waits.
    pub fn checkout(&self, bytes: usize) -> Result<PinnedBuffer, PoolError> {
        crate::block_on::block_on(self.checkout_async(bytes))
    }

    /// Checks out a buffer of `bytes`; waits (FIFO per size class) when the
    /// pool is at its cap or the budget is full. Growing the pool allocates
    /// inside this call (seconds for GiB of pinned memory): preallocate to keep
    /// that off async executors.
    pub fn checkout_async(&self, bytes: usize) -> Checkout {
        Checkout::new(self.clone(), bytes)
    }

    /// Checks out a buffer only if that needs no waiting. It may still grow
    /// the pool, free idle buffers of other sizes, or call the budget's evictor.
    pub fn try_checkout(&self, bytes: usize) -> Result<PinnedBuffer, PoolError> {
        let mut checkout = std::pin::pin!(self.checkout_async(bytes));
        let mut cx = std::task::Context::from_waker(Waker::noop());
        match checkout.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(result) => result,
            // Dropping the pending checkout leaves no trace in either queue.
            std::task::Poll::Pending => Err(PoolError::WouldWait {
                requested: bytes as u64,
            }),
        }
    }

    /// Frees idle buffers, largest first, until at least `wanted_bytes` are
    /// freed or none are idle; returns the bytes freed. For an
    /// [`Evictor`](crate::Evictor) that wants pinned memory back, or for shutdown.
    pub fn release_idle(&self, wanted_bytes: u64) -> u64 {
        let (taken, wake) = {
            let mut s = self.inner.state.lock();
            let taken = s.take_idle(wanted_bytes);
            (taken, s.all_wakers())
        };
        let freed = taken.iter().map(Block::bytes).sum();
        drop(taken);
        wake.into_iter().for_each(Waker::wake);
        freed
    }

    /// The buffer capacity (and budget bytes) a checkout of `bytes` takes.
    pub fn capacity_for(bytes: usize) -> usize {
        size_class::size_class(bytes as u64) as usize
    }

    /// The cap on the pool's total bytes.
    pub fn max_bytes(&self) -> u64 {
        self.inner.max_bytes
    }

    /// Whether buffers are really page-locked.
    pub fn is_page_locked(&self) -> bool {
        self.inner.allocator.page_locked()
    }

    /// The counters now.
    pub fn snapshot(&self) -> PoolSnapshot {
        let s = self.inner.state.lock();
        PoolSnapshot {
            pinned_total_bytes: s.live_bytes,
            pinned_in_use_bytes: s.in_use_bytes,
            buffers_total: s.buffers_total,
            buffers_free: s.buffers_free,
            waiting_checkouts: s.waiters.len(),
            max_bytes: self.inner.max_bytes,
            page_locked: self.inner.allocator.page_locked(),
        }
    }

    /// Idle bytes, for tests of the counters' consistency.
    #[cfg(test)]
    fn idle_bytes(&self) -> u64 {
        self.inner.state.lock().idle_bytes()
    }
}

#[cfg(test)]
mod tests;
