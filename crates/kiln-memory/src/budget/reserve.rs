//! The future behind [`MemoryBudget::reserve`](super::MemoryBudget::reserve).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::state::Ticket;
use super::{BudgetError, MemoryBudget, MemoryReservation};
use crate::class::MemoryClass;

enum Stage {
    /// Not polled yet: nothing is queued or held.
    Start,
    /// In the budget's queue under this ticket.
    Queued(Ticket),
    /// Returned its output; owns nothing.
    Done,
}

/// Waits for a reservation; see [`MemoryBudget::reserve`].
///
/// Owns a handle to the budget, so it is `'static + Send` and can be stored,
/// spawned or raced in `select!`. Dropping it while queued removes it from the
/// queue (or returns the bytes if they had just been granted).
#[must_use = "a reservation is only made when the future is awaited"]
pub struct Reserve {
    budget: MemoryBudget,
    bytes: u64,
    class: MemoryClass,
    stage: Stage,
}

impl Reserve {
    pub(super) fn new(budget: MemoryBudget, bytes: u64, class: MemoryClass) -> Self {
        Reserve {
            budget,
            bytes,
            class,
            stage: Stage::Start,
        }
    }

    /// Bytes this future asks for.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn granted(&mut self) -> Poll<Result<MemoryReservation, BudgetError>> {
        self.stage = Stage::Done;
        Poll::Ready(Ok(MemoryReservation::new(
            self.budget.inner().clone(),
            self.bytes,
            self.class,
            self.budget.lane(),
        )))
    }
}

enum FirstPoll {
    Taken,
    Queued(Ticket, u64),
}

impl Future for Reserve {
    type Output = Result<MemoryReservation, BudgetError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let inner = this.budget.inner().clone();
        let lane = this.budget.lane();
        match this.stage {
            Stage::Start => {
                if let Err(e) = this.budget.check_fits_ever(this.bytes) {
                    this.stage = Stage::Done;
                    return Poll::Ready(Err(e));
                }
                let first = inner.with_state(|s, _| {
                    if s.try_take(this.bytes, this.class, lane) {
                        FirstPoll::Taken
                    } else {
                        let (ticket, shortfall) =
                            s.enqueue(this.bytes, this.class, lane, cx.waker().clone());
                        FirstPoll::Queued(ticket, shortfall)
                    }
                });
                match first {
                    FirstPoll::Taken => this.granted(),
                    FirstPoll::Queued(ticket, shortfall) => {
                        this.stage = Stage::Queued(ticket);
                        tracing::debug!(bytes = this.bytes, class = %this.class, shortfall, "memory reservation waits");
                        inner.evict(shortfall);
                        // The evictor may have freed enough for us already.
                        if inner.with_state(|s, _| s.claim(ticket)) {
                            this.granted()
                        } else {
                            Poll::Pending
                        }
                    }
                }
            }
            Stage::Queued(ticket) => {
                let claimed = inner.with_state(|s, _| {
                    let claimed = s.claim(ticket);
                    if !claimed {
                        s.update_waker(ticket, cx.waker());
                    }
                    claimed
                });
                if claimed {
                    this.granted()
                } else {
                    Poll::Pending
                }
            }
            Stage::Done => panic!("kiln_memory::Reserve polled after it completed"),
        }
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        if let Stage::Queued(ticket) = self.stage {
            let (bytes, class, lane) = (self.bytes, self.class, self.budget.lane());
            self.budget
                .inner()
                .with_state(|s, wake| s.cancel(ticket, bytes, class, lane, wake));
        }
    }
}
