//! Unit tests of the budget: deterministic ones drive the futures by hand
//! (so "who was granted when" is exact), the concurrent ones use real threads
//! and tokio tasks.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use proptest::prelude::*;

use super::*;

/// A waker that counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll_once(fut: &mut Reserve, waker: &Waker) -> Poll<Result<MemoryReservation, BudgetError>> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

fn pending(fut: &mut Reserve) -> bool {
    poll_once(fut, Waker::noop()).is_pending()
}

fn ready(fut: &mut Reserve) -> MemoryReservation {
    match poll_once(fut, Waker::noop()) {
        Poll::Ready(Ok(r)) => r,
        Poll::Ready(Err(e)) => panic!("reserve failed: {e}"),
        Poll::Pending => panic!("reserve still pending"),
    }
}

const C: MemoryClass = MemoryClass::Other;

#[test]
fn too_large_fails_at_once_everywhere() {
    let budget = MemoryBudget::new(100);
    let _all = budget.try_reserve(100, C).unwrap();
    let expected = BudgetError::Exceeds {
        requested: 101,
        total: 100,
    };
    assert_eq!(budget.try_reserve(101, C).unwrap_err(), expected);
    assert_eq!(budget.reserve_blocking(101, C).unwrap_err(), expected);
    match poll_once(&mut budget.reserve(101, C), Waker::noop()) {
        Poll::Ready(Err(e)) => assert_eq!(e, expected),
        _ => panic!("a too-large request must fail on its first poll"),
    }
    assert!(
        expected.to_string().contains("101 bytes can never fit"),
        "{expected}"
    );
    assert_eq!(budget.snapshot().waiting_reservations, 0);
}

#[test]
fn small_request_never_overtakes_a_waiting_large_one() {
    let budget = MemoryBudget::new(100);
    let mut held = budget.try_reserve(70, C).unwrap();
    let mut large = budget.reserve(50, C);
    assert!(pending(&mut large));
    let mut small = budget.reserve(10, C);
    // 30 bytes are free, the small one would fit, but the large one is first.
    assert!(pending(&mut small));
    assert!(matches!(
        budget.try_reserve(10, C),
        Err(BudgetError::Unavailable { waiting: 2, .. })
    ));
    let snap = budget.snapshot();
    assert_eq!((snap.waiting_reservations, snap.waiting_bytes), (2, 60));

    held.shrink(20); // 50 free: the large one fits, then the small one does not
    let large = ready(&mut large);
    assert!(pending(&mut small));
    held.shrink(10);
    let small = ready(&mut small);
    assert_eq!(budget.snapshot().reserved, 40 + 50 + 10);
    drop((held, large, small));
    assert_eq!(budget.snapshot().reserved, 0);
}

#[test]
fn waiters_are_woken_in_order_and_only_when_granted() {
    let budget = MemoryBudget::new(100);
    let mut held = budget.try_reserve(100, C).unwrap();
    let wakers: Vec<Arc<CountingWaker>> = (0..3).map(|_| Arc::default()).collect();
    let mut futs: Vec<Reserve> = [30, 30, 30].iter().map(|&b| budget.reserve(b, C)).collect();
    for (f, w) in futs.iter_mut().zip(&wakers) {
        assert!(poll_once(f, &Waker::from(w.clone())).is_pending());
    }
    let woken = || {
        wakers
            .iter()
            .map(|w| w.0.load(Ordering::SeqCst))
            .collect::<Vec<_>>()
    };
    held.shrink(30);
    assert_eq!(woken(), [1, 0, 0]);
    held.shrink(50);
    assert_eq!(
        woken(),
        [1, 1, 0],
        "60 free: the second fits, not yet the third"
    );
    held.shrink(20);
    assert_eq!(woken(), [1, 1, 1]);
    let got: Vec<_> = futs.iter_mut().map(ready).collect();
    assert_eq!(got.iter().map(MemoryReservation::bytes).sum::<u64>(), 90);
}

#[test]
fn dropping_a_pending_head_unblocks_the_queue() {
    let budget = MemoryBudget::new(100);
    let _held = budget.try_reserve(60, C).unwrap();
    let mut big = budget.reserve(80, C);
    let mut small = budget.reserve(30, C);
    assert!(pending(&mut big) && pending(&mut small));
    drop(big);
    // The small one was granted when the big one left the queue.
    assert_eq!(budget.snapshot().waiting_reservations, 0);
    assert_eq!(ready(&mut small).bytes(), 30);
}

#[test]
fn dropping_a_granted_but_unclaimed_future_returns_its_bytes() {
    let budget = MemoryBudget::new(100);
    let held = budget.try_reserve(100, C).unwrap();
    let mut waiting = budget.reserve(40, C);
    assert!(pending(&mut waiting));
    drop(held);
    assert_eq!(budget.snapshot().reserved, 40, "granted at release time");
    drop(waiting);
    let snap = budget.snapshot();
    assert_eq!(
        (
            snap.reserved,
            snap.waiting_reservations,
            snap.reserved_by_class.sum()
        ),
        (0, 0, 0)
    );
}

#[test]
fn never_polled_future_holds_nothing() {
    let budget = MemoryBudget::new(100);
    let fut = budget.reserve(100, C);
    assert_eq!(fut.bytes(), 100);
    assert_eq!(budget.snapshot().reserved, 0);
    drop(fut);
    assert!(budget.try_reserve(100, C).is_ok());
}

/// Holds a reservation and gives it up when asked.
struct Cache {
    held: Mutex<Option<MemoryReservation>>,
    asked: Mutex<Vec<u64>>,
}

impl Evictor for Cache {
    fn evict(&self, wanted: u64) -> u64 {
        self.asked.lock().unwrap().push(wanted);
        self.held.lock().unwrap().take().map_or(0, |r| r.bytes())
    }
}

#[test]
fn evictor_is_asked_for_the_shortfall_and_its_release_serves_the_waiter() {
    let budget = MemoryBudget::new(100);
    let cache = Arc::new(Cache {
        held: Mutex::new(Some(budget.try_reserve(70, MemoryClass::Srs).unwrap())),
        asked: Mutex::new(Vec::new()),
    });
    budget.set_evictor(cache.clone());
    let _fits = budget.try_reserve(10, C).unwrap();
    assert!(
        cache.asked.lock().unwrap().is_empty(),
        "no wait, no eviction"
    );
    // 20 free, 50 wanted: shortfall 30. The cache drops its 70 inside evict.
    let mut fut = budget.reserve(50, C);
    assert_eq!(ready(&mut fut).bytes(), 50);
    assert_eq!(*cache.asked.lock().unwrap(), [30]);
    assert_eq!(budget.snapshot().reserved_by_class.srs, 0);
}

#[test]
fn shrink_split_reclassify_and_permanent_keep_the_counters_exact() {
    let budget = MemoryBudget::new(1000);
    let mut r = budget.try_reserve(600, MemoryClass::Synthesis).unwrap();
    let mut part = r.split(200);
    assert_eq!((r.bytes(), part.bytes()), (400, 200));
    part.reclassify(MemoryClass::GpuStaging);
    r.shrink(100);
    let snap = budget.snapshot();
    assert_eq!(snap.reserved, 500);
    assert_eq!(
        (
            snap.reserved_by_class.synthesis,
            snap.reserved_by_class.gpu_staging
        ),
        (300, 200)
    );
    assert_eq!(snap.peak_reserved, 600);

    let srs = budget
        .try_reserve(400, MemoryClass::Srs)
        .unwrap()
        .into_permanent();
    assert_eq!(budget.snapshot().permanent, 400);
    srs.release();
    let snap = budget.snapshot();
    assert_eq!((snap.permanent, snap.reserved), (0, 500));

    budget
        .try_reserve(100, MemoryClass::Srs)
        .unwrap()
        .into_permanent()
        .leak();
    drop((r, part));
    let snap = budget.snapshot();
    assert_eq!(
        (snap.reserved, snap.permanent, snap.reserved_by_class.srs),
        (100, 100, 100)
    );
    budget.reset_peak();
    assert_eq!(budget.snapshot().peak_reserved, 100);
}

#[test]
#[should_panic(expected = "shrink by 11 bytes")]
fn shrinking_more_than_held_panics() {
    let budget = MemoryBudget::new(100);
    budget.try_reserve(10, C).unwrap().shrink(11);
}

#[test]
fn blocking_and_async_waiters_share_one_queue() {
    let budget = MemoryBudget::new(100);
    let held = budget.try_reserve(100, C).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let b2 = budget.clone();
    let thread = std::thread::spawn(move || b2.reserve_blocking(80, C).map(|r| r.bytes()));
    while budget.snapshot().waiting_reservations < 1 {
        std::thread::sleep(Duration::from_millis(1));
    }
    // The async request arrives second: it must wait for the thread's.
    let mut task = budget.reserve(30, C);
    assert!(pending(&mut task));
    drop(held);
    assert_eq!(thread.join().unwrap().unwrap(), 80);
    let got = rt.block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await });
    assert_eq!(got.unwrap().unwrap().bytes(), 30);
}

/// Many threads and tasks hammer the budget; a counter of bytes held by live
/// reservations (raised after a grant, lowered before a release) must never
/// exceed the total, and everything returns to zero.
fn hammer(total: u64, threads: usize, tasks: usize, ops: usize, seed: u64) {
    let budget = MemoryBudget::new(total);
    let held = Arc::new(AtomicU64::new(0));
    let check = move |held: &AtomicU64, bytes: u64| {
        let now = held.fetch_add(bytes, Ordering::SeqCst) + bytes;
        assert!(now <= total, "budget exceeded: {now} > {total}");
    };
    let work = {
        let (budget, held) = (budget.clone(), held.clone());
        move |id: u64, blocking: bool| {
            let mut x = seed ^ (id.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
            let mut rnd = move |n: u64| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            };
            let mut mine: Vec<MemoryReservation> = Vec::new();
            let budget = budget.clone();
            let held = held.clone();
            async move {
                for _ in 0..ops {
                    match rnd(7) {
                        0 | 1 => {
                            // Hold nothing while waiting: an actor that holds
                            // bytes and waits for more can deadlock any budget.
                            for r in mine.drain(..) {
                                held.fetch_sub(r.bytes(), Ordering::SeqCst);
                            }
                            let bytes = 1 + rnd(total / 2);
                            let r = if blocking {
                                budget.reserve_blocking(bytes, C)
                            } else {
                                budget.reserve(bytes, C).await
                            };
                            let r = r.unwrap();
                            check(&held, r.bytes());
                            mine.push(r);
                        }
                        2 if !mine.is_empty() => {
                            let i = rnd(mine.len() as u64) as usize;
                            let by = rnd(mine[i].bytes() + 1);
                            held.fetch_sub(by, Ordering::SeqCst);
                            mine[i].shrink(by);
                        }
                        3 if !mine.is_empty() => {
                            let i = rnd(mine.len() as u64) as usize;
                            let by = rnd(mine[i].bytes() + 1);
                            let part = mine[i].split(by);
                            mine.push(part);
                        }
                        4 => {
                            // A reservation abandoned while waiting (bounded, so
                            // it may hold bytes meanwhile).
                            let bytes = 1 + rnd(total);
                            let _ = tokio::time::timeout(
                                Duration::from_micros(50),
                                budget.reserve(bytes, C),
                            )
                            .await;
                        }
                        5 => {
                            if let Ok(r) = budget.try_reserve(1 + rnd(total / 4), C) {
                                check(&held, r.bytes());
                                mine.push(r);
                            }
                        }
                        _ => {}
                    }
                    while mine.len() > 3 {
                        let r = mine.remove(0);
                        held.fetch_sub(r.bytes(), Ordering::SeqCst);
                    }
                    if blocking {
                        std::thread::yield_now();
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
                for r in mine {
                    held.fetch_sub(r.bytes(), Ordering::SeqCst);
                }
            }
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    let handles: Vec<_> = (0..threads as u64)
        .map(|id| {
            let w = work.clone();
            let handle = rt.handle().clone();
            // A plain thread using reserve_blocking; the timeout op needs a runtime context.
            std::thread::spawn(move || {
                let _guard = handle.enter();
                crate::block_on::block_on(w(id, true))
            })
        })
        .collect();
    rt.block_on(async {
        let tasks: Vec<_> = (0..tasks as u64)
            .map(|id| tokio::spawn(work(1000 + id, false)))
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for h in handles {
        h.join().unwrap();
    }
    let snap = budget.snapshot();
    assert_eq!(
        (snap.reserved, snap.waiting_reservations, snap.waiting_bytes),
        (0, 0, 0),
        "{snap:?}"
    );
    assert!(snap.peak_reserved <= total);
}

#[test]
fn concurrent_threads_and_tasks_never_exceed_the_budget() {
    hammer(1 << 20, 3, 4, 300, 0xC0FFEE);
}

/// One step of the sequential model test.
#[derive(Clone, Debug)]
enum Op {
    Try(u64),
    Queue(u64),
    Shrink(usize, u64),
    Split(usize, u64),
    DropHeld(usize),
    DropPending(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..=120).prop_map(Op::Try),
        (1u64..=100).prop_map(Op::Queue),
        (any::<usize>(), 0u64..50).prop_map(|(i, b)| Op::Shrink(i, b)),
        (any::<usize>(), 0u64..50).prop_map(|(i, b)| Op::Split(i, b)),
        any::<usize>().prop_map(Op::DropHeld),
        any::<usize>().prop_map(Op::DropPending),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// After every operation: reserved equals what live reservations hold,
    /// never exceeds the total, grants follow queue order, and the head of
    /// the queue waits only if it really does not fit.
    #[test]
    fn model_fifo_and_exact_accounting(ops in proptest::collection::vec(op(), 1..60)) {
        const TOTAL: u64 = 100;
        let budget = MemoryBudget::new(TOTAL);
        let mut held: Vec<MemoryReservation> = Vec::new();
        let mut queue: Vec<Reserve> = Vec::new(); // oldest first
        for op in ops {
            match op {
                Op::Try(b) => match budget.try_reserve(b, C) {
                    Ok(r) => held.push(r),
                    Err(BudgetError::Exceeds { .. }) => prop_assert!(b > TOTAL),
                    Err(BudgetError::Unavailable { .. }) => {
                        let s = budget.snapshot();
                        prop_assert!(s.waiting_reservations > 0 || s.available < b);
                    }
                },
                Op::Queue(b) => queue.push(budget.reserve(b, C)),
                Op::Shrink(i, b) if !held.is_empty() => {
                    let i = i % held.len();
                    let by = b.min(held[i].bytes());
                    held[i].shrink(by);
                }
                Op::Split(i, b) if !held.is_empty() => {
                    let i = i % held.len();
                    let by = b.min(held[i].bytes());
                    let part = held[i].split(by);
                    held.push(part);
                }
                Op::DropHeld(i) if !held.is_empty() => { drop(held.swap_remove(i % held.len())); }
                Op::DropPending(i) if !queue.is_empty() => { drop(queue.remove(i % queue.len())); }
                _ => {}
            }
            // Poll every queued future; the completed ones must be a prefix.
            let mut done_prefix = true;
            let mut still = Vec::new();
            for mut f in queue.drain(..) {
                match poll_once(&mut f, Waker::noop()) {
                    Poll::Ready(r) => {
                        prop_assert!(done_prefix, "a later request was granted before an earlier one");
                        held.push(r.unwrap());
                    }
                    Poll::Pending => { done_prefix = false; still.push(f); }
                }
            }
            queue = still;
            let s = budget.snapshot();
            prop_assert_eq!(s.reserved, held.iter().map(MemoryReservation::bytes).sum::<u64>());
            prop_assert!(s.reserved <= TOTAL);
            prop_assert_eq!(s.waiting_reservations, queue.len());
            if let Some(head) = queue.first() {
                prop_assert!(head.bytes() > s.available, "the head waits although it fits");
            }
        }
        drop(queue);
        drop(held);
        prop_assert_eq!(budget.snapshot().reserved, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// The concurrent hammer with generated shapes (few cases: each runs threads).
    #[test]
    fn concurrent_shapes_never_exceed_the_budget(
        total in 1u64..(1 << 24), threads in 1usize..4, tasks in 1usize..5, seed in any::<u64>()
    ) {
        hammer(total.max(2), threads, tasks, 80, seed);
    }
}

#[test]
fn priority_handles_use_the_reserve_and_overtake_ordinary_waiters() {
    let budget = MemoryBudget::new(100);
    budget.set_priority_reserve(20);
    let urgent = budget.priority();
    assert!(urgent.is_priority() && !budget.is_priority());
    assert_eq!((budget.capacity(), urgent.capacity()), (80, 100));
    assert!(matches!(
        budget.try_reserve(81, C),
        Err(BudgetError::Exceeds { total: 80, .. })
    ));
    let bulk = budget.try_reserve(80, C).unwrap();
    let mut waiting = budget.reserve(10, C);
    assert!(pending(&mut waiting), "the reserve is not for ordinary reservations");
    // A priority reservation inside the reserve is granted at once, ahead
    // of the ordinary waiter; its bytes count as the reserve's.
    let within = ready(&mut urgent.reserve(20, C));
    let snap = budget.snapshot();
    assert_eq!((snap.priority_reserved, snap.priority_waiting, snap.available), (20, 0, 0));
    // One beyond it waits, and while it does no ordinary one is granted.
    let mut beyond = urgent.reserve(30, C);
    assert!(pending(&mut beyond));
    assert_eq!(budget.snapshot().priority_waiting, 1);
    let mut bulk = bulk;
    bulk.shrink(20);
    assert!(pending(&mut beyond) && pending(&mut waiting), "20 free: neither fits / may go");
    bulk.shrink(10);
    let beyond = ready(&mut beyond);
    assert!(pending(&mut waiting), "nothing left for it");
    drop((within, beyond));
    let waiting = ready(&mut waiting);
    drop((bulk, waiting));
    let snap = budget.snapshot();
    assert_eq!((snap.reserved, snap.priority_reserved, snap.available), (0, 0, 80));
}

#[test]
fn a_pool_over_a_priority_handle_pays_from_the_reserve() {
    let budget = MemoryBudget::new(1 << 20);
    budget.set_priority_reserve(256 << 10);
    let bulk = crate::PinnedPool::pageable(&budget, 1 << 20);
    let urgent = crate::PinnedPool::pageable(&budget.priority(), 1 << 20);
    let held = bulk.checkout(768 << 10).unwrap();
    assert!(bulk.try_checkout(4096).is_err(), "the ordinary pool cannot take the reserve");
    let buf = urgent.try_checkout(200 << 10).unwrap();
    assert_eq!(budget.snapshot().priority_reserved, buf.capacity() as u64);
    drop((held, buf));
}
