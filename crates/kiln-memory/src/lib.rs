//! kiln-memory owns host memory for the whole kiln process: one byte budget
//! that every large buffer is reserved from, and a pool of page-locked host
//! buffers that GPU copies read at PCIe line rate.
//!
//! - [`MemoryBudget`]: FIFO reservations ([`MemoryReservation`], RAII) for
//!   async tasks and plain threads alike, with an [`Evictor`] hook for caches,
//!   per-[`MemoryClass`] counters and a [`BudgetSnapshot`] for `/status`.
//!   A request larger than the budget fails at once ([`BudgetError::Exceeds`]),
//!   so a job that can never fit is refused at admission instead of OOMing.
//! - [`PinnedPool`]: page-locked buffers (`cuMemHostAlloc`, portable across
//!   GPUs) when a CUDA driver is present, page-aligned `mmap` memory otherwise,
//!   recycled by size class and paid for from the budget. A [`PinnedBuffer`]
//!   can be viewed as `&mut [T]` so synthesis writes a/b/c straight into it.
//! - [`trim_heap`] and [`resident_set_bytes`]: keeping the process's RSS close
//!   to what the budget says is reserved.
//!
//! The budget knows nothing of what it budgets: classes are labels for the
//! counters, never policy.
//!
//! ```
//! use kiln_memory::{MemoryBudget, MemoryClass, PinnedPool};
//!
//! let budget = MemoryBudget::new(256 << 20);
//! let pool = PinnedPool::new(&budget, 128 << 20); // page-locked if a GPU is present
//! let scratch = budget.reserve_blocking(64 << 20, MemoryClass::Synthesis)?;
//! let abc = pool.checkout(3 * 4096 * 32)?;       // counted in the budget too
//! let snap = budget.snapshot();
//! assert_eq!(snap.reserved, (64 << 20) + 3 * 4096 * 32);
//! drop((scratch, abc));
//! assert_eq!(budget.snapshot().reserved_by_class.get(MemoryClass::Synthesis), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Choosing the allocator
//!
//! The budget counts what components reserve; the kernel counts what the
//! allocator keeps. Under many threads they drift apart: glibc gives threads
//! their own arenas and keeps freed memory there, pinned behind a few
//! long-lived blocks. `examples/alloc_churn.rs` measures it (8 threads
//! allocating and freeing 1 KiB to 256 MiB blocks, ~4 GiB at peak; full table
//! in `docs/BENCHMARKS.md`, section "kiln-memory"). With 103 MiB still
//! reserved after the churn, the process's RSS was:
//!
//! | allocator | RSS at rest | RSS - reserved, worst moment |
//! | --- | --- | --- |
//! | glibc | 3.4 GiB | 3.2 GiB |
//! | glibc + [`trim_heap`] after each round | 0.15 GiB | 0.7 GiB |
//! | mimalloc | 1.0 GiB (kept after everything was freed) | 2.4 GiB |
//! | jemalloc (default decay) | 1.4 GiB | 1.3 GiB |
//!
//! The recommendation is **glibc plus [`trim_heap`] after each partition**:
//! it keeps RSS closest to the reservations, costs no measurable time, adds no
//! dependency and forces no global allocator on users of the library (this
//! crate never installs one). Large buffers (the pinned pool, `mmap`ed SRS)
//! bypass the heap altogether.

/// The README's example, compiled and run as a doc test so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod block_on;
mod budget;
mod class;
mod heap;
mod pinned;
mod system;

pub use budget::{
    BudgetError, BudgetSnapshot, Evictor, MemoryBudget, MemoryReservation, PermanentReservation,
    Reserve,
};
pub use class::{ClassBytes, MemoryClass};
pub use heap::{resident_set_bytes, trim_heap};
pub use pinned::{Checkout, PinnedBuffer, PinnedPool, PoolError, PoolSnapshot};
pub use system::{DetectError, HostMemory};
