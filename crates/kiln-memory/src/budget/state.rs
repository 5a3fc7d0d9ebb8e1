//! The budget's bookkeeping: counters and the FIFO queue of waiting
//! reservations. Plain data behind the budget's one mutex; it never wakes
//! anything itself, it hands the wakers back so the caller wakes them after
//! unlocking (a woken task may run at once on another core and would only
//! contend for the lock we still hold).

use std::collections::VecDeque;
use std::task::Waker;

use super::BudgetSnapshot;
use crate::class::{ClassBytes, MemoryClass};

/// Identifies one waiting reservation in the queue.
pub(crate) type Ticket = u64;

struct Waiter {
    ticket: Ticket,
    bytes: u64,
    class: MemoryClass,
    waker: Option<Waker>,
}

pub(crate) struct BudgetState {
    total: u64,
    reserved: u64,
    by_class: [u64; MemoryClass::COUNT],
    permanent: u64,
    peak: u64,
    /// Waiters in arrival order. Only the head is ever granted: a small
    /// request behind a large one waits, so the large one cannot starve.
    queue: VecDeque<Waiter>,
    waiting_bytes: u64,
    /// Tickets granted (their bytes already counted as reserved) whose future
    /// has not yet picked the reservation up.
    granted: Vec<Ticket>,
    next_ticket: Ticket,
}

impl BudgetState {
    pub(crate) fn new(total: u64) -> Self {
        BudgetState {
            total,
            reserved: 0,
            by_class: [0; MemoryClass::COUNT],
            permanent: 0,
            peak: 0,
            queue: VecDeque::new(),
            waiting_bytes: 0,
            granted: Vec::new(),
            next_ticket: 0,
        }
    }

    fn account(&mut self, bytes: u64, class: MemoryClass) {
        self.reserved += bytes;
        debug_assert!(self.reserved <= self.total, "budget exceeded");
        self.by_class[class.index()] += bytes;
        self.peak = self.peak.max(self.reserved);
    }

    /// Takes `bytes` now if nobody is waiting and they fit.
    pub(crate) fn try_take(&mut self, bytes: u64, class: MemoryClass) -> bool {
        if self.queue.is_empty() && bytes <= self.total - self.reserved {
            self.account(bytes, class);
            true
        } else {
            false
        }
    }

    /// Queues a request; returns its ticket and how many bytes must be freed
    /// before it (and everything queued before it) can be granted.
    pub(crate) fn enqueue(
        &mut self,
        bytes: u64,
        class: MemoryClass,
        waker: Waker,
    ) -> (Ticket, u64) {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.queue.push_back(Waiter {
            ticket,
            bytes,
            class,
            waker: Some(waker),
        });
        self.waiting_bytes += bytes;
        let shortfall = (self.reserved + self.waiting_bytes).saturating_sub(self.total);
        (ticket, shortfall)
    }

    /// True (once) if `ticket` was granted; the bytes then belong to the caller.
    pub(crate) fn claim(&mut self, ticket: Ticket) -> bool {
        match self.granted.iter().position(|&t| t == ticket) {
            Some(i) => {
                self.granted.swap_remove(i);
                true
            }
            None => false,
        }
    }

    pub(crate) fn update_waker(&mut self, ticket: Ticket, waker: &Waker) {
        if let Some(w) = self.queue.iter_mut().find(|w| w.ticket == ticket) {
            match &w.waker {
                Some(old) if old.will_wake(waker) => {}
                _ => w.waker = Some(waker.clone()),
            }
        }
    }

    /// A waiting future went away: give back whatever it had or held up.
    pub(crate) fn cancel(
        &mut self,
        ticket: Ticket,
        bytes: u64,
        class: MemoryClass,
        wake: &mut Vec<Waker>,
    ) {
        if self.claim(ticket) {
            self.release(bytes, class, wake);
        } else if let Some(i) = self.queue.iter().position(|w| w.ticket == ticket) {
            self.queue.remove(i);
            self.waiting_bytes -= bytes;
            // It may have been the head that blocked smaller requests behind it.
            self.grant_waiters(wake);
        }
    }

    pub(crate) fn release(&mut self, bytes: u64, class: MemoryClass, wake: &mut Vec<Waker>) {
        self.reserved -= bytes;
        self.by_class[class.index()] -= bytes;
        self.grant_waiters(wake);
    }

    pub(crate) fn reclassify(&mut self, bytes: u64, from: MemoryClass, to: MemoryClass) {
        self.by_class[from.index()] -= bytes;
        self.by_class[to.index()] += bytes;
    }

    pub(crate) fn add_permanent(&mut self, bytes: u64) {
        self.permanent += bytes;
    }

    pub(crate) fn remove_permanent(&mut self, bytes: u64) {
        self.permanent -= bytes;
    }

    pub(crate) fn reset_peak(&mut self) {
        self.peak = self.reserved;
    }

    /// Grants queued requests from the head for as long as they fit.
    fn grant_waiters(&mut self, wake: &mut Vec<Waker>) {
        while let Some(head) = self.queue.front() {
            if head.bytes > self.total - self.reserved {
                break;
            }
            let mut head = self.queue.pop_front().expect("front exists");
            self.waiting_bytes -= head.bytes;
            self.account(head.bytes, head.class);
            self.granted.push(head.ticket);
            wake.extend(head.waker.take());
        }
    }

    pub(crate) fn snapshot(&self) -> BudgetSnapshot {
        BudgetSnapshot {
            total: self.total,
            reserved: self.reserved,
            available: self.total - self.reserved,
            reserved_by_class: ClassBytes::from_array(self.by_class),
            permanent: self.permanent,
            waiting_reservations: self.queue.len(),
            waiting_bytes: self.waiting_bytes,
            peak_reserved: self.peak,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn noop() -> Waker {
        Waker::noop().clone()
    }

    #[test]
    fn head_blocks_smaller_requests_behind_it() {
        let mut s = BudgetState::new(100);
        assert!(s.try_take(60, MemoryClass::Other));
        let (big, shortfall) = s.enqueue(80, MemoryClass::Other, noop());
        assert_eq!(shortfall, 40);
        let (small, _) = s.enqueue(10, MemoryClass::Other, noop());
        // 40 bytes are free, enough for `small`, yet it must not overtake.
        assert!(!s.try_take(10, MemoryClass::Other));
        assert!(!s.claim(small));
        let mut wake = Vec::new();
        s.release(60, MemoryClass::Other, &mut wake);
        assert_eq!(wake.len(), 2, "both fit once 60 are back");
        assert!(s.claim(big));
        assert!(s.claim(small));
        assert!(!s.claim(small), "a grant is claimed once");
        assert_eq!(s.snapshot().reserved, 90);
    }

    #[test]
    fn cancelling_the_head_lets_the_next_through() {
        let mut s = BudgetState::new(100);
        assert!(s.try_take(50, MemoryClass::Srs));
        let (big, _) = s.enqueue(90, MemoryClass::Other, noop());
        let (small, _) = s.enqueue(30, MemoryClass::Other, noop());
        let mut wake = Vec::new();
        s.cancel(big, 90, MemoryClass::Other, &mut wake);
        assert_eq!(wake.len(), 1);
        assert!(s.claim(small));
        let snap = s.snapshot();
        assert_eq!(
            (snap.reserved, snap.waiting_reservations, snap.waiting_bytes),
            (80, 0, 0)
        );
    }

    #[test]
    fn cancelling_after_grant_returns_the_bytes() {
        let mut s = BudgetState::new(100);
        assert!(s.try_take(100, MemoryClass::Other));
        let (t, _) = s.enqueue(70, MemoryClass::Synthesis, noop());
        let mut wake = Vec::new();
        s.release(100, MemoryClass::Other, &mut wake);
        assert_eq!(s.snapshot().reserved_by_class.synthesis, 70);
        s.cancel(t, 70, MemoryClass::Synthesis, &mut wake);
        let snap = s.snapshot();
        assert_eq!(
            (
                snap.reserved,
                snap.reserved_by_class.sum(),
                snap.peak_reserved
            ),
            (0, 0, 100)
        );
    }
}
