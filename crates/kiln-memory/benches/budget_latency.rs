//! Reserve/release latency of the memory budget, and checkout/return of the
//! pinned pool's recycle path.
//!
//! `cargo bench -p kiln-memory --bench budget_latency`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use criterion::{criterion_group, criterion_main, Criterion};
use kiln_memory::{MemoryBudget, MemoryClass, PinnedPool};

const C: MemoryClass = MemoryClass::Synthesis;

fn uncontended(c: &mut Criterion) {
    let budget = MemoryBudget::new(1 << 40);
    let mut g = c.benchmark_group("uncontended");
    g.bench_function("try_reserve+drop", |b| {
        b.iter(|| budget.try_reserve(4096, C).unwrap())
    });
    g.bench_function("reserve_blocking+drop", |b| {
        b.iter(|| budget.reserve_blocking(4096, C).unwrap())
    });
    g.bench_function("reserve(async, ready)+drop", |b| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        b.iter(|| rt.block_on(budget.reserve(4096, C)).unwrap())
    });
    g.bench_function("shrink+split", |b| {
        b.iter(|| {
            let mut r = budget.try_reserve(3 << 20, C).unwrap();
            r.shrink(1 << 20);
            r.split(1 << 20)
        })
    });
    let pool = PinnedPool::pageable(&budget, 64 << 20);
    drop(pool.checkout(1 << 20).unwrap());
    g.bench_function("pool checkout+return (recycled 1 MiB)", |b| {
        b.iter(|| pool.checkout(1 << 20).unwrap())
    });
    g.finish();
}

/// Background threads reserve and release in a loop while the measured
/// thread does the same; the budget is large, so nobody waits: this is lock
/// contention only.
fn contended(c: &mut Criterion) {
    let budget = MemoryBudget::new(1 << 40);
    let stop = Arc::new(AtomicBool::new(false));
    let noise: Vec<_> = (0..2)
        .map(|_| {
            let (budget, stop) = (budget.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    drop(budget.try_reserve(4096, MemoryClass::Other).unwrap());
                }
            })
        })
        .collect();
    let mut g = c.benchmark_group("contended (2 threads churning)");
    g.bench_function("try_reserve+drop", |b| {
        b.iter(|| budget.try_reserve(4096, C).unwrap())
    });
    g.bench_function("reserve_blocking+drop", |b| {
        b.iter(|| budget.reserve_blocking(4096, C).unwrap())
    });
    g.finish();
    stop.store(true, Ordering::Relaxed);
    noise.into_iter().for_each(|t| t.join().unwrap());
}

/// The whole budget ping-pongs between two threads: every reserve waits for
/// the other thread's release, so this is the wake-up (hand-off) latency of a
/// FIFO waiter, park to unpark, per round trip.
fn handoff(c: &mut Criterion) {
    let budget = MemoryBudget::new(1 << 20);
    let stop = Arc::new(AtomicBool::new(false));
    let partner = {
        let (budget, stop) = (budget.clone(), stop.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let r = budget
                    .reserve_blocking(1 << 20, MemoryClass::Other)
                    .unwrap();
                thread::yield_now();
                drop(r);
            }
        })
    };
    c.bench_function(
        "handoff: reserve_blocking of the whole budget, waiting for the other thread",
        |b| {
            b.iter(|| {
                let r = budget.reserve_blocking(1 << 20, C).unwrap();
                thread::yield_now();
                r
            })
        },
    );
    stop.store(true, Ordering::Relaxed);
    partner.join().unwrap();
}

criterion_group!(benches, uncontended, contended, handoff);
criterion_main!(benches);
