//! The engine's queues: most urgent first, FIFO within a priority level,
//! optionally bounded, with removal of a cancelled job's entries.
//!
//! One type serves the synthesis queue (unbounded), the GPU queue (bounded:
//! a full queue blocks the synthesis worker that holds the partition, which
//! is the point) and the finalizer queue.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::job::Priority;

/// Where an entry sorts among those of its priority: job submission order,
/// then partition index.
pub(crate) type Order = (u64, usize);

struct Entry<T> {
    priority: Priority,
    order: Order,
    item: T,
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    /// The max-heap's top is the highest priority, then the lowest order.
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.priority.cmp(&other.priority).then_with(|| other.order.cmp(&self.order))
    }
}

struct State<T> {
    heap: BinaryHeap<Entry<T>>,
    closed: bool,
}

/// A priority queue shared by threads.
pub(crate) struct WorkQueue<T> {
    state: Mutex<State<T>>,
    not_empty: Condvar,
    not_full: Condvar,
    capacity: Option<usize>,
}

/// How long a blocked push naps before re-checking its abort condition
/// (cancellation also wakes it at once through [`WorkQueue::wake_all`]).
const RECHECK: Duration = Duration::from_millis(50);

impl<T> WorkQueue<T> {
    /// A queue that holds at most `capacity` entries (`None`: unbounded).
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        assert!(capacity != Some(0), "a bounded queue needs room for one entry");
        WorkQueue { state: Mutex::new(State { heap: BinaryHeap::new(), closed: false }), not_empty: Condvar::new(), not_full: Condvar::new(), capacity }
    }

    /// Adds `item`, waiting while the queue is full. `on_accept` runs under
    /// the queue's lock just before the item becomes visible to takers (so
    /// a counter moved there is exact). Gives the item back if `abort()`
    /// turns true or the queue is closed before there is room.
    pub(crate) fn push(
        &self,
        priority: Priority,
        order: Order,
        mut item: T,
        abort: impl Fn() -> bool,
        on_accept: impl FnOnce(&mut T),
    ) -> Result<(), T> {
        let mut s = self.state.lock();
        loop {
            if s.closed || abort() {
                return Err(item);
            }
            if self.capacity.is_none_or(|cap| s.heap.len() < cap) {
                on_accept(&mut item);
                s.heap.push(Entry { priority, order, item });
                // All: a taker that only wants some priorities must not
                // swallow the wake-up meant for one that takes anything.
                self.not_empty.notify_all();
                return Ok(());
            }
            self.not_full.wait_for(&mut s, RECHECK);
        }
    }

    /// Takes the most urgent entry, waiting while the queue is empty;
    /// `on_take` runs under the lock. `None` once the queue is closed.
    pub(crate) fn pop(&self, on_take: impl FnOnce(&mut T)) -> Option<T> {
        self.pop_if(|_| true, on_take)
    }

    /// Takes the most urgent entry once there is one whose priority `wanted`
    /// accepts (waiting until then). `None` once the queue is closed.
    pub(crate) fn pop_if(&self, wanted: impl Fn(Priority) -> bool, on_take: impl FnOnce(&mut T)) -> Option<T> {
        let mut s = self.state.lock();
        loop {
            if s.closed {
                return None;
            }
            if s.heap.peek().is_some_and(|top| wanted(top.priority)) {
                let mut e = s.heap.pop().expect("peeked");
                on_take(&mut e.item);
                self.not_full.notify_one();
                return Some(e.item);
            }
            self.not_empty.wait(&mut s);
        }
    }

    /// Removes (and returns, for the caller to drop outside the lock) every
    /// entry `pred` selects.
    pub(crate) fn remove_where(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut s = self.state.lock();
        let (removed, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut s.heap).into_iter().partition(|e| pred(&e.item));
        s.heap = kept.into();
        if !removed.is_empty() {
            self.not_full.notify_all();
        }
        removed.into_iter().map(|e| e.item).collect()
    }

    /// Entries at `priority` or more urgent: those a new entry at
    /// `priority` would wait behind.
    pub(crate) fn count_ahead(&self, priority: Priority) -> usize {
        self.state.lock().heap.iter().filter(|e| e.priority >= priority).count()
    }

    /// Entries now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.state.lock().heap.len()
    }

    /// Wakes blocked pushers so they re-check their abort condition.
    pub(crate) fn wake_all(&self) {
        let _s = self.state.lock();
        self.not_full.notify_all();
    }

    /// Refuses new entries, wakes every waiter, and returns what was queued.
    pub(crate) fn close(&self) -> Vec<T> {
        let mut s = self.state.lock();
        s.closed = true;
        self.not_full.notify_all();
        self.not_empty.notify_all();
        std::mem::take(&mut s.heap).into_iter().map(|e| e.item).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    #[test]
    fn most_urgent_first_then_fifo() {
        let q = WorkQueue::new(None);
        let push = |p, o: Order, v: &'static str| q.push(p, o, v, || false, |_| {}).unwrap();
        push(Priority::Normal, (1, 0), "n1");
        push(Priority::Low, (0, 0), "l0");
        push(Priority::Normal, (1, 1), "n1b");
        push(Priority::Critical, (5, 0), "c5");
        push(Priority::Normal, (0, 3), "n0");
        let got: Vec<_> = (0..5).map(|_| q.pop(|_| {}).unwrap()).collect();
        assert_eq!(got, ["c5", "n0", "n1", "n1b", "l0"]);
    }

    #[test]
    fn a_selective_taker_waits_for_what_it_wants_and_others_still_wake() {
        let q = Arc::new(WorkQueue::new(None));
        let (q1, q2) = (q.clone(), q.clone());
        let critical_only = std::thread::spawn(move || q1.pop_if(|p| p == Priority::Critical, |_| {}));
        std::thread::sleep(Duration::from_millis(20));
        q.push(Priority::Normal, (0, 0), "normal", || false, |_| {}).unwrap();
        let anything = std::thread::spawn(move || q2.pop(|_| {}));
        assert_eq!(anything.join().unwrap(), Some("normal"));
        assert!(!critical_only.is_finished());
        q.push(Priority::Critical, (1, 0), "critical", || false, |_| {}).unwrap();
        assert_eq!(critical_only.join().unwrap(), Some("critical"));
    }

    #[test]
    fn full_queue_blocks_until_taken_or_aborted() {
        let q = Arc::new(WorkQueue::new(Some(1)));
        q.push(Priority::Normal, (0, 0), 1, || false, |_| {}).unwrap();
        assert_eq!(q.push(Priority::Normal, (0, 1), 2, || true, |_| {}), Err(2), "abort gives the item back");
        let q2 = q.clone();
        let t = std::thread::spawn(move || q2.push(Priority::Normal, (0, 1), 2, || false, |_| {}));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(q.len(), 1, "the second push waits");
        assert_eq!(q.pop(|_| {}), Some(1));
        t.join().unwrap().unwrap();
        assert_eq!(q.pop(|_| {}), Some(2));
        assert_eq!(q.close(), Vec::<i32>::new());
        assert_eq!(q.pop(|_| {}), None);
    }

    proptest! {
        /// Whatever the pushes, pops come out sorted by (priority desc, order asc),
        /// and removal takes exactly the selected entries.
        #[test]
        fn pops_are_sorted(entries in proptest::collection::vec((0u8..4, 0u64..20, 0usize..5), 0..60)) {
            let q = WorkQueue::new(None);
            for (i, &(p, job, part)) in entries.iter().enumerate() {
                q.push(Priority::ALL[p as usize], (job, part), (p, job, part, i), || false, |_| {}).unwrap();
            }
            let removed = q.remove_where(|&(_, job, _, _)| job % 3 == 0);
            prop_assert!(removed.iter().all(|e| e.1 % 3 == 0));
            let mut out = Vec::new();
            while q.len() > 0 { out.push(q.pop(|_| {}).unwrap()); }
            prop_assert_eq!(out.len() + removed.len(), entries.len());
            for w in out.windows(2) {
                let (a, b) = (w[0], w[1]);
                prop_assert!(a.0 > b.0 || (a.0 == b.0 && (a.1, a.2) <= (b.1, b.2)));
            }
        }
    }
}
