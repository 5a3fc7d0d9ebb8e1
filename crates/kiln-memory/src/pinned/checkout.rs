//! The future behind [`PinnedPool::checkout_async`](super::PinnedPool::checkout_async).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use super::size_class::size_class;
use super::{Block, PinnedBuffer, PinnedPool, PoolError};
use crate::budget::{BudgetError, MemoryReservation, Reserve};
use crate::class::MemoryClass;

/// Waits for a pool buffer; see [`PinnedPool::checkout_async`].
///
/// `'static + Send`; dropping it while it waits leaves nothing behind (a
/// buffer handed to it meanwhile goes on to the next waiter).
#[must_use = "a buffer is only checked out when the future is awaited"]
pub struct Checkout {
    pool: PinnedPool,
    len: usize,
    class: u64,
    /// Our place among the pool's waiters, once we had to wait.
    ticket: Option<u64>,
    /// We counted `class` bytes of growth against the pool's cap.
    cap_claimed: bool,
    /// Waiting in the budget's queue for the bytes of a new buffer.
    reserve: Option<Reserve>,
    done: bool,
}

enum Step {
    Got(Block),
    Grow,
    Wait,
}

impl Checkout {
    pub(super) fn new(pool: PinnedPool, len: usize) -> Self {
        let class = size_class(len as u64);
        Checkout {
            pool,
            len,
            class,
            ticket: None,
            cap_claimed: false,
            reserve: None,
            done: false,
        }
    }

    fn finish(
        &mut self,
        result: Result<PinnedBuffer, PoolError>,
    ) -> Poll<Result<PinnedBuffer, PoolError>> {
        self.done = true;
        // A buffer came back while we were growing: the growth is not needed.
        self.reserve = None;
        if std::mem::take(&mut self.cap_claimed) {
            self.pool.inner.unclaim(self.class);
        }
        Poll::Ready(result)
    }

    /// Leave the waiters' queue (if in it), returning a buffer that was
    /// handed to this checkout before it left.
    fn leave_queue(&mut self) -> Option<Block> {
        let t = self.ticket.take()?;
        let mut s = self.pool.inner.state.lock();
        let handed = s.take_handed(t);
        s.remove_waiter(t);
        handed
    }

    fn buffer(&self, block: Block) -> PinnedBuffer {
        PinnedBuffer::new(block, self.len, self.pool.inner.clone())
    }

    /// Under the pool lock: a returned or parked buffer, else claim cap room
    /// to grow, else queue. One lock for all three, so a buffer returned
    /// between the checks cannot be missed.
    fn step(&mut self, waker: &Waker) -> (Step, Vec<Block>) {
        let inner = &self.pool.inner;
        let mut s = inner.state.lock();
        if let Some(block) = self.ticket.and_then(|t| s.take_handed(t)) {
            self.ticket = None;
            return (Step::Got(block), Vec::new());
        }
        if let Some(block) = s.take_free(self.class, self.ticket) {
            self.ticket = None;
            return (Step::Got(block), Vec::new());
        }
        if self.cap_claimed {
            return (Step::Grow, Vec::new());
        }
        let over_cap = (s.committed_bytes + self.class).saturating_sub(inner.max_bytes);
        // Evict idle buffers of other classes only if that makes room.
        let evicted = if over_cap > 0 && s.idle_bytes() >= over_cap {
            s.take_idle(over_cap)
        } else {
            Vec::new()
        };
        if s.committed_bytes + self.class <= inner.max_bytes {
            s.committed_bytes += self.class;
            self.cap_claimed = true;
            (Step::Grow, evicted)
        } else {
            self.ticket = Some(s.register(self.ticket, self.class, waker));
            (Step::Wait, evicted)
        }
    }

    /// With cap room claimed: get the budget's bytes, then allocate.
    fn grow(&mut self, cx: &mut Context<'_>) -> Poll<Result<PinnedBuffer, PoolError>> {
        let budget = self.pool.inner.budget.clone();
        if self.reserve.is_none() {
            match budget.try_reserve(self.class, MemoryClass::PinnedInUse) {
                Ok(reservation) => return self.allocate(reservation),
                Err(BudgetError::Unavailable { available, .. }) => {
                    // Idle buffers hold budget bytes: give them back first if
                    // that is enough, rather than queue behind them.
                    let need = self.class.saturating_sub(available);
                    let evicted = {
                        let mut s = self.pool.inner.state.lock();
                        if need > 0 && s.idle_bytes() >= need {
                            s.take_idle(need)
                        } else {
                            Vec::new()
                        }
                    };
                    drop(evicted);
                    self.reserve = Some(budget.reserve(self.class, MemoryClass::PinnedInUse));
                }
                Err(e) => return self.finish(Err(e.into())),
            }
        }
        let reserve = self.reserve.as_mut().expect("set above");
        match Pin::new(reserve).poll(cx) {
            Poll::Ready(Ok(reservation)) => {
                self.reserve = None;
                self.allocate(reservation)
            }
            Poll::Ready(Err(e)) => self.finish(Err(e.into())),
            Poll::Pending => {
                // Also wait in the pool: a buffer of our class coming back
                // serves us sooner than the budget might.
                let got = {
                    let mut s = self.pool.inner.state.lock();
                    match self
                        .ticket
                        .and_then(|t| s.take_handed(t))
                        .or_else(|| s.take_free(self.class, self.ticket))
                    {
                        Some(block) => Some(block),
                        None => {
                            self.ticket = Some(s.register(self.ticket, self.class, cx.waker()));
                            None
                        }
                    }
                };
                match got {
                    Some(block) => {
                        self.ticket = None;
                        let buffer = self.buffer(block);
                        self.finish(Ok(buffer))
                    }
                    None => Poll::Pending,
                }
            }
        }
    }

    fn allocate(
        &mut self,
        reservation: MemoryReservation,
    ) -> Poll<Result<PinnedBuffer, PoolError>> {
        let inner = self.pool.inner.clone();
        // Leave the waiters' queue before the (slow) allocation; if a buffer
        // was handed to us in the meantime, take it instead.
        if let Some(block) = self.leave_queue() {
            drop(reservation);
            let buffer = self.buffer(block);
            return self.finish(Ok(buffer));
        }
        let started = Instant::now();
        match inner.allocator.allocate(self.class as usize) {
            Ok(alloc) => {
                {
                    let mut s = inner.state.lock();
                    s.live_bytes += self.class;
                    s.in_use_bytes += self.class;
                    s.buffers_total += 1;
                }
                // The committed cap room now belongs to the live buffer.
                self.cap_claimed = false;
                tracing::info!(
                    bytes = self.class,
                    kind = inner.allocator.kind(),
                    elapsed = ?started.elapsed(),
                    "pinned pool grew by one buffer"
                );
                let buffer = self.buffer(Block { alloc, reservation });
                self.finish(Ok(buffer))
            }
            Err(reason) => {
                tracing::error!(bytes = self.class, %reason, "pinned pool allocation failed");
                let kind = inner.allocator.kind();
                self.finish(Err(PoolError::Alloc {
                    bytes: self.class,
                    kind,
                    reason,
                }))
            }
        }
    }
}

impl Future for Checkout {
    type Output = Result<PinnedBuffer, PoolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(
            !this.done,
            "kiln_memory::Checkout polled after it completed"
        );
        let inner = &this.pool.inner;
        if this.class > inner.max_bytes {
            let (requested, class_bytes, max_bytes) =
                (this.len as u64, this.class, inner.max_bytes);
            return this.finish(Err(PoolError::ExceedsPool {
                requested,
                class_bytes,
                max_bytes,
            }));
        }
        if let Err(e) = inner.budget.check_fits_ever(this.class) {
            return this.finish(Err(e.into()));
        }
        let (step, evicted) = this.step(cx.waker());
        if !evicted.is_empty() {
            let bytes: u64 = evicted.iter().map(Block::bytes).sum();
            tracing::info!(
                buffers = evicted.len(),
                bytes,
                for_class = this.class,
                "pinned pool freed idle buffers of other sizes"
            );
            drop(evicted);
        }
        match step {
            Step::Got(block) => {
                let buffer = this.buffer(block);
                this.finish(Ok(buffer))
            }
            Step::Wait => Poll::Pending,
            Step::Grow => this.grow(cx),
        }
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let inner = self.pool.inner.clone();
        if let Some(block) = self.leave_queue() {
            super::PoolInner::give_back(&inner, block);
        }
        self.reserve = None;
        if self.cap_claimed {
            inner.unclaim(self.class);
        }
    }
}
