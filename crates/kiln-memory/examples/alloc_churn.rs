//! Allocator churn: does the process's RSS follow what the budget says is
//! reserved, when several threads allocate and free mixed sizes?
//!
//! ```text
//! cargo run --release -p kiln-memory --example alloc_churn                      # glibc
//! cargo run --release -p kiln-memory --example alloc_churn -- --trim            # glibc + malloc_trim(0) per round
//! cargo run --release -p kiln-memory --example alloc_churn --features mimalloc
//! cargo run --release -p kiln-memory --example alloc_churn --features jemalloc
//! ```
//!
//! Each worker thread runs rounds shaped like a proof partition's host work:
//! thousands of small vectors (1-64 KiB), dozens of medium ones (256 KiB to
//! 16 MiB, the range where glibc's dynamic mmap threshold moves them from
//! mmap into its arenas) and one or two large ones (64-256 MiB), every page
//! written. A few small and medium blocks survive into the next rounds (a
//! cache, long-lived results), which is what pins fragmented arena memory.
//! Every allocation is reserved from a `MemoryBudget` first, so "reserved" is
//! exactly the live bytes. A sampler thread reads RSS from /proc/self/statm
//! every 5 ms. Prints one markdown table row.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kiln_memory::{resident_set_bytes, trim_heap, MemoryBudget, MemoryClass, MemoryReservation};

#[cfg(all(feature = "mimalloc", feature = "jemalloc"))]
compile_error!("choose one of the features mimalloc and jemalloc");

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;

fn allocator_name(trim: bool) -> &'static str {
    match (cfg!(feature = "mimalloc"), cfg!(feature = "jemalloc"), trim) {
        (true, _, false) => "mimalloc",
        (true, _, true) => "mimalloc + trim_heap",
        (_, true, false) => "jemalloc",
        (_, true, true) => "jemalloc + trim_heap",
        (_, _, false) => "glibc malloc",
        (_, _, true) => "glibc + malloc_trim(0) per round",
    }
}

/// xorshift64: deterministic per thread, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

/// A live allocation and the budget bytes that pay for it.
struct Block {
    data: Vec<u8>,
    _reservation: MemoryReservation,
}

fn allocate(budget: &MemoryBudget, bytes: usize) -> Block {
    let reservation = budget
        .reserve_blocking(bytes as u64, MemoryClass::Synthesis)
        .expect("fits the budget");
    let mut data = Vec::<u8>::with_capacity(bytes);
    // Write every page, as synthesis does, so it is resident.
    data.resize(bytes, 1);
    Block {
        data,
        _reservation: reservation,
    }
}

fn round(budget: &MemoryBudget, rng: &mut Rng, survivors: &mut Vec<Block>) {
    let mut live = Vec::new();
    for _ in 0..rng.between(1, 2) {
        live.push(allocate(budget, rng.between(64 * MIB, 256 * MIB)));
    }
    for _ in 0..rng.between(20, 40) {
        live.push(allocate(budget, rng.between(256 * KIB, 16 * MIB)));
    }
    for _ in 0..rng.between(2000, 4000) {
        live.push(allocate(budget, rng.between(KIB, 64 * KIB)));
    }
    // Free in an order unlike allocation order, keeping a few survivors.
    while !live.is_empty() {
        let block = live.swap_remove(rng.below(live.len()));
        if block.data.len() <= 16 * MIB && rng.below(100) < 2 {
            survivors.push(block);
        }
    }
    // Survivors are evicted oldest-first beyond a small working set.
    while survivors.len() > 60 {
        survivors.remove(0);
    }
}

#[derive(Default)]
struct Samples {
    max_rss: u64,
    max_reserved: u64,
    max_excess: u64,
    sum_ratio: f64,
    n: u64,
}

fn main() {
    let trim = std::env::args().any(|a| a == "--trim");
    let threads: usize = std::env::var("CHURN_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let rounds: usize = std::env::var("CHURN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let budget = MemoryBudget::new(12 << 30);
    let baseline = resident_set_bytes().expect("/proc/self/statm");

    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(Samples::default()));
    let sampler = {
        let (budget, stop, samples) = (budget.clone(), stop.clone(), samples.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let rss = resident_set_bytes().unwrap().saturating_sub(baseline);
                let reserved = budget.snapshot().reserved;
                let mut s = samples.lock().unwrap();
                s.max_rss = s.max_rss.max(rss);
                s.max_reserved = s.max_reserved.max(reserved);
                s.max_excess = s.max_excess.max(rss.saturating_sub(reserved));
                if reserved > 0 {
                    s.sum_ratio += rss as f64 / reserved as f64;
                    s.n += 1;
                }
                drop(s);
                thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let started = Instant::now();
    // After all rounds every thread keeps its survivors alive while the
    // quiet-time RSS is read, then frees them.
    let quiet = Arc::new(Barrier::new(threads + 1));
    let done = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|id| {
            let (budget, quiet, done) = (budget.clone(), quiet.clone(), done.clone());
            thread::spawn(move || {
                let mut rng = Rng(
                    0x2545_F491_4F6C_DD1D ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                );
                let mut survivors = Vec::new();
                for _ in 0..rounds {
                    round(&budget, &mut rng, &mut survivors);
                    if trim {
                        trim_heap();
                    }
                }
                quiet.wait();
                done.wait();
                drop(survivors);
            })
        })
        .collect();
    quiet.wait();
    let elapsed = started.elapsed();
    thread::sleep(Duration::from_millis(50));
    let quiet_rss = resident_set_bytes().unwrap().saturating_sub(baseline);
    let quiet_reserved = budget.snapshot().reserved;
    done.wait();
    workers.into_iter().for_each(|w| w.join().unwrap());
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    if trim {
        trim_heap();
    }
    let end_rss = resident_set_bytes().unwrap().saturating_sub(baseline);
    assert_eq!(budget.snapshot().reserved, 0);

    let s = samples.lock().unwrap();
    let gib = |b: u64| b as f64 / GIB;
    println!(
        "| allocator | threads x rounds | time | peak reserved | peak RSS | max RSS - reserved | mean RSS / reserved | quiet: reserved -> RSS | RSS after all freed |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    println!(
        "| {} | {threads} x {rounds} | {:.1} s | {:.2} GiB | {:.2} GiB | {:.2} GiB | {:.2} | {:.0} MiB -> {:.0} MiB | {:.0} MiB |",
        allocator_name(trim),
        elapsed.as_secs_f64(),
        gib(s.max_reserved),
        gib(s.max_rss),
        gib(s.max_excess),
        s.sum_ratio / s.n.max(1) as f64,
        quiet_reserved as f64 / MIB as f64,
        quiet_rss as f64 / MIB as f64,
        end_rss as f64 / MIB as f64,
    );
}
