//! The budget's bookkeeping: counters and the FIFO queue of waiting
//! reservations. Plain data behind the budget's one mutex; it never wakes
//! anything itself, it hands the wakers back so the caller wakes them after
//! unlocking (a woken task may run at once on another core and would only
//! contend for the lock we still hold).

use std::collections::VecDeque;
use std::task::Waker;

use super::{BudgetSnapshot, Lane};
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
    /// Bytes kept for the priority lane: ordinary reservations may use the
    /// budget only up to `total - (reserve - priority_reserved)`.
    reserve: u64,
    /// Bytes held by priority-lane reservations (inside `reserved`).
    priority_reserved: u64,
    /// Ordinary waiters in arrival order. Only the head is ever granted: a
    /// small request behind a large one waits, so the large one cannot starve.
    queue: VecDeque<Waiter>,
    /// Priority waiters in arrival order, served before any ordinary one.
    priority_queue: VecDeque<Waiter>,
    /// Bytes both queues ask for.
    waiting_bytes: u64,
    priority_waiting_bytes: u64,
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
            reserve: 0,
            priority_reserved: 0,
            queue: VecDeque::new(),
            priority_queue: VecDeque::new(),
            waiting_bytes: 0,
            priority_waiting_bytes: 0,
            granted: Vec::new(),
            next_ticket: 0,
        }
    }

    fn account(&mut self, bytes: u64, class: MemoryClass, lane: Lane) {
        self.reserved += bytes;
        debug_assert!(self.reserved <= self.total, "budget exceeded");
        self.by_class[class.index()] += bytes;
        if lane == Lane::Priority {
            self.priority_reserved += bytes;
        }
        self.peak = self.peak.max(self.reserved);
    }

    /// The part of the priority reserve the priority lane does not hold now:
    /// ordinary reservations must leave it free.
    fn kept(&self) -> u64 {
        self.reserve.saturating_sub(self.priority_reserved)
    }

    /// Bytes a reservation of `lane` could take now (queues aside).
    pub(crate) fn room(&self, lane: Lane) -> u64 {
        let free = self.total - self.reserved;
        match lane {
            Lane::Priority => free,
            Lane::Ordinary => free.saturating_sub(self.kept()),
        }
    }

    /// The most a reservation of `lane` can ever be granted.
    pub(crate) fn capacity(&self, lane: Lane) -> u64 {
        match lane {
            Lane::Priority => self.total,
            Lane::Ordinary => self.total - self.reserve,
        }
    }

    fn queue_of(&mut self, lane: Lane) -> &mut VecDeque<Waiter> {
        match lane {
            Lane::Ordinary => &mut self.queue,
            Lane::Priority => &mut self.priority_queue,
        }
    }

    /// Takes `bytes` now if nobody of the same or a higher lane is waiting
    /// and they fit.
    pub(crate) fn try_take(&mut self, bytes: u64, class: MemoryClass, lane: Lane) -> bool {
        let ahead = match lane {
            Lane::Priority => !self.priority_queue.is_empty(),
            Lane::Ordinary => !self.queue.is_empty() || !self.priority_queue.is_empty(),
        };
        if !ahead && bytes <= self.room(lane) {
            self.account(bytes, class, lane);
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
        lane: Lane,
        waker: Waker,
    ) -> (Ticket, u64) {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.queue_of(lane).push_back(Waiter {
            ticket,
            bytes,
            class,
            waker: Some(waker),
        });
        self.waiting_bytes += bytes;
        if lane == Lane::Priority {
            self.priority_waiting_bytes += bytes;
        }
        // Priority waiters come first and may use the reserve; ordinary ones
        // wait behind every waiter and must leave the reserve free.
        let needed = match lane {
            Lane::Priority => self.reserved + self.priority_waiting_bytes,
            Lane::Ordinary => self.reserved + self.waiting_bytes + self.kept(),
        };
        (ticket, needed.saturating_sub(self.total))
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
        let mut waiters = self.queue.iter_mut().chain(self.priority_queue.iter_mut());
        if let Some(w) = waiters.find(|w| w.ticket == ticket) {
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
        lane: Lane,
        wake: &mut Vec<Waker>,
    ) {
        if self.claim(ticket) {
            self.release(bytes, class, lane, wake);
        } else if let Some(i) = self.queue_of(lane).iter().position(|w| w.ticket == ticket) {
            self.queue_of(lane).remove(i);
            self.waiting_bytes -= bytes;
            if lane == Lane::Priority {
                self.priority_waiting_bytes -= bytes;
            }
            // It may have been the head that blocked smaller requests behind it.
            self.grant_waiters(wake);
        }
    }

    pub(crate) fn release(&mut self, bytes: u64, class: MemoryClass, lane: Lane, wake: &mut Vec<Waker>) {
        self.reserved -= bytes;
        self.by_class[class.index()] -= bytes;
        if lane == Lane::Priority {
            self.priority_reserved -= bytes;
        }
        self.grant_waiters(wake);
    }

    /// Keeps `bytes` (at most the whole budget) for the priority lane from
    /// now on. Reservations already held stay; ordinary ones are granted
    /// again once the reserve is free.
    pub(crate) fn set_reserve(&mut self, bytes: u64, wake: &mut Vec<Waker>) {
        self.reserve = bytes.min(self.total);
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

    /// Grants queued requests from the heads for as long as they fit:
    /// priority waiters first; ordinary ones only once no priority waiter
    /// is left (the bytes it waits for must not go to anyone else).
    fn grant_waiters(&mut self, wake: &mut Vec<Waker>) {
        for lane in [Lane::Priority, Lane::Ordinary] {
            while let Some(head) = self.queue_of(lane).front() {
                if head.bytes > self.room(lane) {
                    break;
                }
                let mut head = self.queue_of(lane).pop_front().expect("front exists");
                self.waiting_bytes -= head.bytes;
                if lane == Lane::Priority {
                    self.priority_waiting_bytes -= head.bytes;
                }
                self.account(head.bytes, head.class, lane);
                self.granted.push(head.ticket);
                wake.extend(head.waker.take());
            }
            if !self.priority_queue.is_empty() {
                return;
            }
        }
    }

    pub(crate) fn priority_waiters(&self) -> usize {
        self.priority_queue.len()
    }

    pub(crate) fn snapshot(&self) -> BudgetSnapshot {
        BudgetSnapshot {
            total: self.total,
            reserved: self.reserved,
            available: self.room(Lane::Ordinary),
            reserved_by_class: ClassBytes::from_array(self.by_class),
            permanent: self.permanent,
            waiting_reservations: self.queue.len() + self.priority_queue.len(),
            waiting_bytes: self.waiting_bytes,
            peak_reserved: self.peak,
            priority_reserve: self.reserve,
            priority_reserved: self.priority_reserved,
            priority_waiting: self.priority_queue.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    const O: Lane = Lane::Ordinary;
    const P: Lane = Lane::Priority;

    fn noop() -> Waker {
        Waker::noop().clone()
    }

    #[test]
    fn head_blocks_smaller_requests_behind_it() {
        let mut s = BudgetState::new(100);
        assert!(s.try_take(60, MemoryClass::Other, O));
        let (big, shortfall) = s.enqueue(80, MemoryClass::Other, O, noop());
        assert_eq!(shortfall, 40);
        let (small, _) = s.enqueue(10, MemoryClass::Other, O, noop());
        // 40 bytes are free, enough for `small`, yet it must not overtake.
        assert!(!s.try_take(10, MemoryClass::Other, O));
        assert!(!s.claim(small));
        let mut wake = Vec::new();
        s.release(60, MemoryClass::Other, O, &mut wake);
        assert_eq!(wake.len(), 2, "both fit once 60 are back");
        assert!(s.claim(big));
        assert!(s.claim(small));
        assert!(!s.claim(small), "a grant is claimed once");
        assert_eq!(s.snapshot().reserved, 90);
    }

    #[test]
    fn cancelling_the_head_lets_the_next_through() {
        let mut s = BudgetState::new(100);
        assert!(s.try_take(50, MemoryClass::Srs, O));
        let (big, _) = s.enqueue(90, MemoryClass::Other, O, noop());
        let (small, _) = s.enqueue(30, MemoryClass::Other, O, noop());
        let mut wake = Vec::new();
        s.cancel(big, 90, MemoryClass::Other, O, &mut wake);
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
        assert!(s.try_take(100, MemoryClass::Other, O));
        let (t, _) = s.enqueue(70, MemoryClass::Synthesis, O, noop());
        let mut wake = Vec::new();
        s.release(100, MemoryClass::Other, O, &mut wake);
        assert_eq!(s.snapshot().reserved_by_class.synthesis, 70);
        s.cancel(t, 70, MemoryClass::Synthesis, O, &mut wake);
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

    #[test]
    fn ordinary_reservations_leave_the_reserve_free_and_priority_ones_use_it() {
        let mut s = BudgetState::new(100);
        let mut wake = Vec::new();
        s.set_reserve(30, &mut wake);
        assert_eq!((s.capacity(O), s.capacity(P)), (70, 100));
        assert!(s.try_take(60, MemoryClass::Other, O));
        assert!(!s.try_take(20, MemoryClass::Other, O), "only 10 ordinary bytes are left");
        assert_eq!(s.snapshot().available, 10);
        assert!(s.try_take(35, MemoryClass::Other, P), "the reserve and the free rest");
        // The priority lane holds more than the reserve: nothing is kept now.
        assert_eq!((s.room(O), s.room(P)), (5, 5));
        s.release(35, MemoryClass::Other, P, &mut wake);
        assert_eq!((s.room(O), s.room(P)), (10, 40));
        let snap = s.snapshot();
        assert_eq!((snap.priority_reserve, snap.priority_reserved), (30, 0));
    }

    #[test]
    fn a_priority_waiter_overtakes_ordinary_waiters_and_holds_them_back() {
        let mut s = BudgetState::new(100);
        let mut wake = Vec::new();
        s.set_reserve(10, &mut wake);
        assert!(s.try_take(90, MemoryClass::Other, O));
        let (ordinary, _) = s.enqueue(20, MemoryClass::Other, O, noop());
        let (urgent, shortfall) = s.enqueue(40, MemoryClass::Other, P, noop());
        assert_eq!(shortfall, 30, "a priority waiter counts only itself");
        assert!(!s.try_take(5, MemoryClass::Other, P), "priority waiters are FIFO among themselves");
        s.release(20, MemoryClass::Other, O, &mut wake);
        assert!(!s.claim(urgent), "30 free, 40 wanted");
        assert!(!s.claim(ordinary), "20 would fit the ordinary one, but the priority waiter needs them");
        s.release(10, MemoryClass::Other, O, &mut wake);
        assert!(s.claim(urgent));
        assert!(!s.claim(ordinary), "nothing is left");
        s.release(40, MemoryClass::Other, P, &mut wake);
        assert!(s.claim(ordinary), "40 free, 10 of them kept: 20 fit");
        assert_eq!(s.snapshot().reserved, 80);
    }
}
