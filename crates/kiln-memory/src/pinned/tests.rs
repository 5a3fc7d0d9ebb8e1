//! Pool tests. They run the pageable backend (no GPU here); `PinnedPool::new`
//! picks it too on a machine without a driver, and must behave the same.

use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::*;

const MIB: usize = 1 << 20;

fn poll_once(fut: &mut Checkout) -> Poll<Result<PinnedBuffer, PoolError>> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

/// Pool and budget counters agree: the budget's pinned classes are exactly
/// the pool's buffers.
fn assert_consistent(pool: &PinnedPool, budget: &MemoryBudget) {
    let p = pool.snapshot();
    let b = budget.snapshot().reserved_by_class;
    assert_eq!(b.pinned_in_use, p.pinned_in_use_bytes, "{p:?} {b:?}");
    assert_eq!(
        b.pinned_in_use + b.pinned_idle,
        p.pinned_total_bytes,
        "{p:?} {b:?}"
    );
    assert_eq!(pool.idle_bytes(), b.pinned_idle);
    assert!(p.pinned_total_bytes <= p.max_bytes);
}

#[test]
fn a_returned_buffer_is_reused_for_its_size_class() {
    for pool_of in [PinnedPool::pageable, PinnedPool::new] {
        let budget = MemoryBudget::new(64 * MIB as u64);
        let pool = pool_of(&budget, 32 * MIB as u64);
        assert!(!pool.is_page_locked(), "no GPU on the test machine");
        let a = pool.checkout(MIB).unwrap();
        let ptr = a.as_ptr();
        assert_eq!(ptr as usize % 4096, 0);
        assert!(!a.is_pinned());
        assert_consistent(&pool, &budget);
        drop(a);
        let snap = pool.snapshot();
        assert_eq!(
            (
                snap.buffers_total,
                snap.buffers_free,
                snap.pinned_in_use_bytes
            ),
            (1, 1, 0)
        );
        assert_eq!(budget.snapshot().reserved_by_class.pinned_idle, MIB as u64);
        // A slightly smaller request has the same size class: same buffer.
        let b = pool.checkout(MIB - 100).unwrap();
        assert_eq!(b.as_ptr(), ptr);
        assert_eq!((b.len(), b.capacity()), (MIB - 100, MIB));
        assert_eq!(pool.snapshot().buffers_total, 1);
        assert_consistent(&pool, &budget);
        drop(b);
        assert_eq!(pool.release_idle(u64::MAX), MIB as u64);
        assert_eq!(budget.snapshot().reserved, 0);
    }
}

#[test]
fn oversized_requests_fail_at_once() {
    let budget = MemoryBudget::new(8 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, 4 * MIB as u64);
    assert!(
        matches!(pool.checkout(5 * MIB), Err(PoolError::ExceedsPool { class_bytes, .. }) if class_bytes == 5 * MIB as u64)
    );
    let big_cap = PinnedPool::pageable(&budget, 64 * MIB as u64);
    assert!(matches!(
        big_cap.checkout(9 * MIB),
        Err(PoolError::Budget(BudgetError::Exceeds { .. }))
    ));
    assert_eq!(budget.snapshot().reserved, 0);
}

#[test]
fn at_the_cap_a_checkout_waits_for_a_return_and_gets_that_buffer() {
    let budget = MemoryBudget::new(64 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, 2 * MIB as u64);
    let first = pool.checkout(2 * MIB).unwrap();
    let ptr = first.as_ptr() as usize;
    assert!(matches!(
        pool.try_checkout(2 * MIB),
        Err(PoolError::WouldWait { .. })
    ));
    assert_eq!(
        pool.snapshot().waiting_checkouts,
        0,
        "try_checkout leaves no waiter"
    );
    let p2 = pool.clone();
    let waiter = std::thread::spawn(move || p2.checkout(2 * MIB).map(|b| b.as_ptr() as usize));
    while pool.snapshot().waiting_checkouts == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(first);
    assert_eq!(waiter.join().unwrap().unwrap(), ptr);
    assert_eq!(pool.snapshot().buffers_total, 1);
    assert_consistent(&pool, &budget);
}

#[test]
fn a_full_budget_is_waited_for_and_a_returned_buffer_serves_the_waiter() {
    let budget = MemoryBudget::new(3 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, 64 * MIB as u64);
    let held = pool.checkout(MIB).unwrap();
    let ptr = held.as_ptr();
    let other = budget
        .try_reserve(2 * MIB as u64, MemoryClass::Synthesis)
        .unwrap();
    let mut growing = pool.checkout_async(MIB);
    assert!(poll_once(&mut growing).is_pending());
    assert_eq!(
        budget.snapshot().waiting_reservations,
        1,
        "queued in the budget to grow"
    );
    drop(held); // handed straight to the waiter, which stops waiting on the budget
    match poll_once(&mut growing) {
        Poll::Ready(Ok(b)) => assert_eq!(b.as_ptr(), ptr),
        other => panic!("expected the returned buffer, got {other:?}"),
    }
    assert_eq!(budget.snapshot().waiting_reservations, 0);
    drop(other);
    assert_consistent(&pool, &budget);
}

#[test]
fn a_new_size_evicts_idle_buffers_of_other_sizes_when_at_the_cap() {
    let budget = MemoryBudget::new(64 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, 4 * MIB as u64);
    pool.preallocate(&[MIB, MIB, MIB, MIB]).unwrap();
    assert_eq!(pool.snapshot().buffers_free, 4);
    let big = pool.checkout(3 * MIB).unwrap();
    let snap = pool.snapshot();
    assert_eq!(
        (
            snap.buffers_total,
            snap.buffers_free,
            snap.pinned_total_bytes
        ),
        (2, 1, 4 * MIB as u64)
    );
    drop(big);
    assert_consistent(&pool, &budget);
}

#[test]
fn preallocated_buffers_serve_checkouts_without_growth() {
    let budget = MemoryBudget::new(64 * MIB as u64);
    let pool =
        PinnedPool::with_preallocated(&budget, 16 * MIB as u64, &[4 * MIB, 4 * MIB]).unwrap();
    let before = pool.snapshot();
    assert_eq!((before.buffers_total, before.buffers_free), (2, 2));
    let a = pool.checkout(4 * MIB).unwrap();
    let b = pool.checkout(4 * MIB).unwrap();
    assert_ne!(a.as_ptr(), b.as_ptr());
    assert_eq!(pool.snapshot().buffers_total, 2);
    assert!(PinnedPool::with_preallocated(&budget, 4 * MIB as u64, &[4 * MIB, 4 * MIB]).is_err());
    assert_eq!(
        budget.snapshot().reserved,
        8 * MIB as u64,
        "a failed preallocation keeps nothing"
    );
}

#[test]
fn dropping_pending_checkouts_leaks_nothing() {
    let budget = MemoryBudget::new(64 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, MIB as u64);
    let held = pool.checkout(MIB).unwrap();
    let mut never = pool.checkout_async(MIB);
    let mut handed_then_dropped = pool.checkout_async(MIB);
    let mut last = pool.checkout_async(MIB);
    assert!(poll_once(&mut never).is_pending());
    assert!(poll_once(&mut handed_then_dropped).is_pending());
    assert!(poll_once(&mut last).is_pending());
    drop(never); // cancelled while queued
    drop(held); // handed to `handed_then_dropped`...
    drop(handed_then_dropped); // ...which passes it on to `last`
    let Poll::Ready(Ok(buf)) = poll_once(&mut last) else {
        panic!("the passed-on buffer is ready")
    };
    let snap = pool.snapshot();
    assert_eq!(
        (
            snap.waiting_checkouts,
            snap.buffers_total,
            snap.pinned_in_use_bytes
        ),
        (0, 1, MIB as u64)
    );
    drop((buf, last));
    assert_consistent(&pool, &budget);
}

/// The shape of `blstrs::Scalar`: 32 bytes, `repr(transparent)` over limbs.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(transparent)]
struct Scalar([u64; 4]);

#[test]
fn typed_views_write_scalars_in_place() {
    let budget = MemoryBudget::new(8 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, 8 * MIB as u64);
    let n = 1000;
    let mut buf = pool.checkout(n * 32 + 5).unwrap();
    let slots: &mut [MaybeUninit<Scalar>] = buf.as_uninit_slice_mut();
    assert_eq!(slots.len(), n);
    for (i, s) in slots.iter_mut().enumerate() {
        s.write(Scalar([i as u64, 0, 0, 1]));
    }
    // SAFETY: all n scalars were written just above.
    let scalars = unsafe { buf.as_slice_of::<Scalar>(n) };
    assert_eq!(scalars[999], Scalar([999, 0, 0, 1]));
    assert_eq!(
        buf.as_pod_slice::<u64>().len(),
        n * 4,
        "the 5 trailing bytes are no whole u64"
    );
    assert_eq!(buf.as_pod_slice::<u64>()[4 * 7], 7);
    // SAFETY: every bit pattern is a valid Scalar.
    unsafe { buf.as_mut_slice_of::<Scalar>(2)[1] = Scalar([9; 4]) };
    assert_eq!(&buf[32..40], &9u64.to_ne_bytes());
}

#[test]
#[should_panic(expected = "exceed the buffer")]
fn typed_view_past_the_end_panics() {
    let budget = MemoryBudget::new(MIB as u64);
    let pool = PinnedPool::pageable(&budget, MIB as u64);
    let buf = pool.checkout(64).unwrap();
    // SAFETY: never reached: the length check panics first.
    let _ = unsafe { buf.as_slice_of::<Scalar>(3) };
}

/// Threads check out mixed sizes, stamp each buffer with their id and verify
/// the stamp after yielding: a buffer handed to two users at once shows up.
#[test]
fn many_threads_share_the_pool_exclusively() {
    let budget = MemoryBudget::new(24 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, 12 * MIB as u64);
    let _other = budget
        .try_reserve(8 * MIB as u64, MemoryClass::Synthesis)
        .unwrap();
    let threads: Vec<_> = (0..6u8)
        .map(|id| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                let sizes = [MIB / 2, MIB, 3 * MIB, 64 << 10];
                for round in 0..60usize {
                    let mut buf = pool
                        .checkout(sizes[(round + id as usize) % sizes.len()])
                        .unwrap();
                    buf.as_bytes_mut().fill(id);
                    std::thread::yield_now();
                    assert!(
                        buf.iter().all(|&b| b == id),
                        "buffer shared between threads"
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let snap = pool.snapshot();
    assert_eq!((snap.pinned_in_use_bytes, snap.waiting_checkouts), (0, 0));
    assert_eq!(snap.buffers_free, snap.buffers_total);
    assert_consistent(&pool, &budget);
}

#[test]
fn async_checkouts_from_tokio_tasks() {
    let budget = MemoryBudget::new(16 * MIB as u64);
    let pool = PinnedPool::pageable(&budget, 4 * MIB as u64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let pool = pool.clone();
                tokio::spawn(async move {
                    for _ in 0..20 {
                        let buf = pool.checkout_async(MIB * (1 + i % 2)).await.unwrap();
                        tokio::task::yield_now().await;
                        drop(buf);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    assert_eq!(pool.snapshot().pinned_in_use_bytes, 0);
    assert_consistent(&pool, &budget);
}

#[test]
fn snapshots_serialize_for_status_json() {
    let budget = MemoryBudget::new(MIB as u64);
    let pool = PinnedPool::pageable(&budget, MIB as u64);
    let _b = pool.checkout(4096).unwrap();
    let json = serde_json::to_value(pool.snapshot()).unwrap();
    assert_eq!(json["pinned_in_use_bytes"], 4096);
    assert_eq!(json["page_locked"], false);
    let json = serde_json::to_value(budget.snapshot()).unwrap();
    assert_eq!(json["reserved_by_class"]["pinned_in_use"], 4096);
    let _ = Arc::new(pool); // Send + Sync handle
}
