//! A minimal executor that drives one future on the calling thread.
//!
//! The blocking APIs (`reserve_blocking`, `PinnedPool::checkout`) are the async
//! ones driven here, so plain threads (rayon, synthesis workers) and tokio tasks
//! wait in the very same FIFO queues. Parking is the whole mechanism: the waker
//! unparks this thread, and a wake that lands before `park` leaves the thread's
//! token set, so `park` returns at once and no wake is ever lost.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

struct UnparkThread(Thread);

impl Wake for UnparkThread {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` to completion, parking the current thread while it is pending.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(UnparkThread(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(output) => return output,
            // Spurious unparks are fine: the loop just polls again.
            Poll::Pending => thread::park(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    /// Ready on the second poll, woken from another thread after a delay.
    struct WokenLater {
        fired: Arc<AtomicBool>,
        spawned: Option<thread::JoinHandle<()>>,
        waker: Arc<Mutex<Option<Waker>>>,
    }

    impl Future for WokenLater {
        type Output = u32;
        fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            if self.fired.load(Ordering::Acquire) {
                return Poll::Ready(7);
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            if self.spawned.is_none() {
                let fired = self.fired.clone();
                let waker = self.waker.clone();
                self.spawned = Some(thread::spawn(move || {
                    thread::sleep(std::time::Duration::from_millis(20));
                    fired.store(true, Ordering::Release);
                    if let Some(w) = waker.lock().unwrap().take() {
                        w.wake();
                    }
                }));
            }
            Poll::Pending
        }
    }

    #[test]
    fn drives_a_future_woken_from_another_thread() {
        let fut = WokenLater {
            fired: Arc::new(AtomicBool::new(false)),
            spawned: None,
            waker: Arc::new(Mutex::new(None)),
        };
        assert_eq!(block_on(fut), 7);
    }
}
