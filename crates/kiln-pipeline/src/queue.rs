//! The engine's queues: most urgent first, FIFO within a priority level,
//! optionally bounded, with removal of a cancelled job's entries.
//!
//! One type serves the synthesis queue (unbounded), the GPU queue (bounded:
//! a full queue blocks the synthesis worker that holds the partition, which
//! is the point) and the finalizer queue. A bounded queue bounds `Critical`
//! entries and the others separately, so a critical partition never waits
//! for room behind bulk ones; takers may take only some priorities and get
//! the most urgent entry among those (a bulk-only taker is not held up by a
//! critical entry at the head).

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::job::Priority;

/// Where an entry sorts among those of its priority: job submission order,
/// then partition index.
pub(crate) type Order = (u64, usize);

struct State<T> {
    /// One map per priority level (index: `Priority as usize`), each in
    /// `Order`, then push order for equal orders.
    levels: [BTreeMap<(Order, u64), T>; 4],
    pushed: u64,
    closed: bool,
}

impl<T> State<T> {
    fn level(p: Priority) -> usize {
        p as usize
    }

    /// Entries that share a capacity with one of `priority`: the critical
    /// ones, or all the others.
    fn lane_len(&self, priority: Priority) -> usize {
        let critical = priority == Priority::Critical;
        Priority::ALL.iter().filter(|&&p| (p == Priority::Critical) == critical).map(|&p| self.levels[Self::level(p)].len()).sum()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.levels.iter().map(BTreeMap::len).sum()
    }
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
    /// A queue that holds at most `capacity` critical entries and
    /// `capacity` others (`None`: unbounded).
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        assert!(capacity != Some(0), "a bounded queue needs room for one entry");
        let state = State { levels: Default::default(), pushed: 0, closed: false };
        WorkQueue { state: Mutex::new(state), not_empty: Condvar::new(), not_full: Condvar::new(), capacity }
    }

    /// Adds `item`, waiting while its part of the queue is full.
    /// `on_accept` runs under the queue's lock just before the item becomes
    /// visible to takers (so a counter moved there is exact). Gives the
    /// item back if `abort()` turns true or the queue is closed before
    /// there is room.
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
            if self.capacity.is_none_or(|cap| s.lane_len(priority) < cap) {
                on_accept(&mut item);
                let seq = s.pushed;
                s.pushed += 1;
                s.levels[State::<T>::level(priority)].insert((order, seq), item);
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
    #[cfg(test)]
    pub(crate) fn pop(&self, on_take: impl FnOnce(&mut T)) -> Option<T> {
        self.pop_if(|_| true, on_take)
    }

    /// Takes the most urgent entry among those whose priority `wanted`
    /// accepts (waiting until there is one). `None` once the queue is closed.
    pub(crate) fn pop_if(&self, wanted: impl Fn(Priority) -> bool, on_take: impl FnOnce(&mut T)) -> Option<T> {
        self.pop_unless(wanted, || false, on_take)
    }

    /// [`pop_if`](Self::pop_if) that also gives up (`None`) once
    /// `give_up()` is true: checked under the queue's lock before each
    /// wait, so [`wake_takers`](Self::wake_takers) after it turns true
    /// is never missed. `wanted` may change over time the same way.
    pub(crate) fn pop_unless(
        &self,
        wanted: impl Fn(Priority) -> bool,
        give_up: impl Fn() -> bool,
        on_take: impl FnOnce(&mut T),
    ) -> Option<T> {
        let mut s = self.state.lock();
        loop {
            if s.closed || give_up() {
                return None;
            }
            let level = Priority::ALL.iter().rev().filter(|&&p| wanted(p)).map(|&p| State::<T>::level(p)).find(|&l| !s.levels[l].is_empty());
            if let Some(l) = level {
                let (_, mut item) = s.levels[l].pop_first().expect("not empty");
                on_take(&mut item);
                // All: the freed place may belong to either lane's pushers.
                self.not_full.notify_all();
                return Some(item);
            }
            self.not_empty.wait(&mut s);
        }
    }

    /// Removes (and returns, for the caller to drop outside the lock) every
    /// entry `pred` selects.
    pub(crate) fn remove_where(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut s = self.state.lock();
        let mut removed = Vec::new();
        for level in &mut s.levels {
            let keys: Vec<_> = level.iter().filter(|(_, item)| pred(item)).map(|(k, _)| *k).collect();
            removed.extend(keys.iter().filter_map(|k| level.remove(k)));
        }
        if !removed.is_empty() {
            self.not_full.notify_all();
        }
        removed
    }

    /// Entries at `priority` or more urgent: those a new entry at
    /// `priority` would wait behind.
    pub(crate) fn count_ahead(&self, priority: Priority) -> usize {
        let s = self.state.lock();
        Priority::ALL.iter().filter(|&&p| p >= priority).map(|&p| s.levels[State::<T>::level(p)].len()).sum()
    }

    /// Entries now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.state.lock().len()
    }

    /// Wakes blocked takers so they re-check what they want and whether
    /// they give up.
    pub(crate) fn wake_takers(&self) {
        let _s = self.state.lock();
        self.not_empty.notify_all();
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
        let levels = std::mem::take(&mut s.levels);
        levels.into_iter().flat_map(BTreeMap::into_values).collect()
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

    #[test]
    fn a_taker_of_some_priorities_gets_the_most_urgent_of_those() {
        let q = WorkQueue::new(None);
        let push = |p, o: Order, v: &'static str| q.push(p, o, v, || false, |_| {}).unwrap();
        push(Priority::Critical, (0, 0), "c");
        push(Priority::Low, (1, 0), "l");
        push(Priority::High, (2, 0), "h");
        let bulk = |p: Priority| p != Priority::Critical;
        assert_eq!(q.pop_if(bulk, |_| {}), Some("h"), "the critical head does not hold up a bulk taker");
        assert_eq!(q.pop_if(bulk, |_| {}), Some("l"));
        assert_eq!(q.pop(|_| {}), Some("c"));
    }

    #[test]
    fn critical_entries_have_their_own_room_in_a_bounded_queue() {
        let q = WorkQueue::new(Some(1));
        q.push(Priority::Normal, (0, 0), "bulk", || false, |_| {}).unwrap();
        assert_eq!(q.push(Priority::High, (1, 0), "more bulk", || true, |_| {}), Err("more bulk"), "the bulk place is taken");
        q.push(Priority::Critical, (2, 0), "critical", || false, |_| {}).expect("a critical entry does not wait for bulk room");
        assert_eq!(q.push(Priority::Critical, (3, 0), "second", || true, |_| {}), Err("second"));
        assert_eq!(q.count_ahead(Priority::High), 1);
        assert_eq!(q.len(), 2);
    }
}
