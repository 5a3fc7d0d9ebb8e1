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
//! allocator keeps. Under many threads they drift apart: glibc gives each
//! thread its own arena and keeps freed memory there. `examples/alloc_churn.rs`
//! measures it (figures in `docs/BENCHMARKS.md`, section "kiln-memory"): with
//! several threads allocating and freeing mixed sizes from KiB to hundreds of
//! MiB, plain glibc kept RSS well above the reserved bytes between rounds,
//! while glibc followed by [`trim_heap`] after each round returned to the
//! baseline, as did mimalloc and jemalloc. The recommendation is **glibc plus
//! [`trim_heap`] after each partition**: it matches the dedicated allocators
//! on RSS, adds no dependency or global-allocator decision for users of the
//! library, and large buffers (the pinned pool, `mmap`ed SRS) never touch the
//! heap anyway. This crate never installs a global allocator.

mod block_on;
mod budget;
mod class;
mod heap;
mod pinned;
mod system;

pub use budget::{BudgetError, BudgetSnapshot, Evictor, MemoryBudget, MemoryReservation, PermanentReservation, Reserve};
pub use class::{ClassBytes, MemoryClass};
pub use heap::{resident_set_bytes, trim_heap};
pub use pinned::{Checkout, PinnedBuffer, PinnedPool, PoolError, PoolSnapshot};
pub use system::{DetectError, HostMemory};
