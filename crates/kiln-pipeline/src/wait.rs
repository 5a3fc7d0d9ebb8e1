//! Waiting on kiln-memory's futures from a plain worker thread, while
//! staying responsive: the wait gives up when the job is cancelled or the
//! engine stops, and runs a periodic tick (used to evict idle caches).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

/// How often an abortable wait re-checks its abort condition and ticks.
/// A wake from the future ends the nap early, so this only bounds how long
/// a cancellation takes to be noticed.
pub(crate) const TICK: Duration = Duration::from_millis(20);

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives `future` on this thread until it completes (`Some`) or `abort()`
/// says to stop (`None`; the future is dropped, which for kiln-memory's
/// futures leaves nothing reserved or queued). `tick` runs every [`TICK`]
/// while the future is pending.
pub(crate) fn block_on_abortable<F: Future>(
    future: F,
    abort: impl Fn() -> bool,
    mut tick: impl FnMut(),
) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        if abort() {
            return None;
        }
        thread::park_timeout(TICK);
        if abort() {
            return None;
        }
        tick();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_memory::{MemoryBudget, MemoryClass};
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn completes_when_memory_is_freed_and_gives_up_on_abort() {
        let budget = MemoryBudget::new(100);
        let held = budget.try_reserve(80, MemoryClass::Other).unwrap();
        let releaser = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            drop(held);
        });
        let got = block_on_abortable(budget.reserve(50, MemoryClass::Other), || false, || {});
        assert_eq!(got.unwrap().unwrap().bytes(), 50);
        releaser.join().unwrap();

        let blocker = budget.try_reserve(100, MemoryClass::Other).unwrap();
        let stop = AtomicBool::new(false);
        let mut ticks = 0;
        let got = block_on_abortable(budget.reserve(10, MemoryClass::Other), || stop.load(Ordering::Relaxed), || {
            ticks += 1;
            if ticks == 3 {
                stop.store(true, Ordering::Relaxed);
            }
        });
        assert!(got.is_none());
        let snap = budget.snapshot();
        assert_eq!((snap.waiting_reservations, snap.reserved), (0, 100), "the abandoned wait left nothing behind");
        drop(blocker);
    }
}
