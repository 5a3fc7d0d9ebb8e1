//! [`PinnedBuffer`]: one checked-out pool buffer.

use std::mem::MaybeUninit;
use std::sync::Arc;

use super::{Block, PoolInner};

/// A buffer checked out of a [`PinnedPool`](super::PinnedPool); it goes back to
/// the pool when dropped (it is never freed on that path).
///
/// Its contents on checkout are unspecified (whatever the previous user left,
/// zeros for a new buffer) but always initialised, so reading them is sound.
/// The memory is page-aligned, so it can be viewed as a slice of any element
/// type: synthesis writes `blstrs::Scalar`s straight into it.
///
/// ```
/// use kiln_memory::{MemoryBudget, PinnedPool};
///
/// let budget = MemoryBudget::new(64 << 20);
/// let pool = PinnedPool::pageable(&budget, 32 << 20);
/// let mut buf = pool.checkout(1000 * 8)?;
/// buf.as_pod_slice_mut::<u64>().iter_mut().enumerate().for_each(|(i, x)| *x = i as u64);
/// assert_eq!(buf.as_pod_slice::<u64>()[999], 999);
/// assert_eq!(buf.len(), 8000);
/// # Ok::<(), kiln_memory::PoolError>(())
/// ```
pub struct PinnedBuffer {
    /// `Some` until dropped.
    block: Option<Block>,
    len: usize,
    pool: Arc<PoolInner>,
}

impl PinnedBuffer {
    pub(super) fn new(block: Block, len: usize, pool: Arc<PoolInner>) -> Self {
        debug_assert!(len <= block.alloc.len());
        PinnedBuffer {
            block: Some(block),
            len,
            pool,
        }
    }

    fn block(&self) -> &Block {
        self.block.as_ref().expect("present until drop")
    }

    fn block_mut(&mut self) -> &mut Block {
        self.block.as_mut().expect("present until drop")
    }

    /// Bytes requested at checkout; every view covers exactly these.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-byte checkout.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the underlying allocation (the size class, >= `len`).
    pub fn capacity(&self) -> usize {
        self.block().alloc.len()
    }

    /// True only if the memory really is page-locked (allocated by the CUDA
    /// driver), i.e. the GPU can DMA from it at full PCIe speed.
    pub fn is_pinned(&self) -> bool {
        self.pool.allocator.page_locked()
    }

    /// Start of the buffer (page-aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.block().alloc.as_ptr()
    }

    /// Start of the buffer (page-aligned), for FFI writes.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.block_mut().alloc.as_mut_ptr()
    }

    /// The `len` bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.block().alloc.as_slice()[..self.len]
    }

    /// The `len` bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        let len = self.len;
        &mut self.block_mut().alloc.as_mut_slice()[..len]
    }

    /// The buffer as `len / size_of::<T>()` elements of a plain-old-data type.
    pub fn as_pod_slice<T: bytemuck::Pod>(&self) -> &[T] {
        let whole = self.len - self.len % size_of::<T>();
        // Cannot fail: page-aligned start, length a multiple of size_of::<T>.
        bytemuck::cast_slice(&self.as_bytes()[..whole])
    }

    /// [`as_pod_slice`](Self::as_pod_slice), writable.
    pub fn as_pod_slice_mut<T: bytemuck::Pod>(&mut self) -> &mut [T] {
        let whole = self.len - self.len % size_of::<T>();
        bytemuck::cast_slice_mut(&mut self.as_bytes_mut()[..whole])
    }

    /// The buffer as `len / size_of::<T>()` slots for any `T` (such as
    /// `blstrs::Scalar`, which is not `Pod`), to be written with
    /// `MaybeUninit::write`. Safe: nothing is read as a `T`.
    pub fn as_uninit_slice_mut<T>(&mut self) -> &mut [MaybeUninit<T>] {
        let n = self.len / size_of::<T>().max(1);
        assert!(
            align_of::<T>() <= super::host_alloc::PAGE,
            "alignment above a page"
        );
        // SAFETY: the start is page-aligned (>= align_of::<T>), `n` elements fit
        // in `len` bytes, MaybeUninit<T> has no validity requirement, and the
        // borrow of `self` is unique for the slice's lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr().cast::<MaybeUninit<T>>(), n) }
    }

    /// The first `n` elements as `&[T]`.
    ///
    /// # Safety
    /// Those elements must hold valid values of `T` (for example written
    /// earlier through [`as_uninit_slice_mut`](Self::as_uninit_slice_mut)).
    ///
    /// # Panics
    /// If `n` elements do not fit in `len` bytes.
    pub unsafe fn as_slice_of<T>(&self, n: usize) -> &[T] {
        self.check_fits::<T>(n);
        // SAFETY: aligned and in bounds (checked), validity is the caller's promise.
        unsafe { std::slice::from_raw_parts(self.as_ptr().cast::<T>(), n) }
    }

    /// The first `n` elements as `&mut [T]`.
    ///
    /// # Safety
    /// As [`as_slice_of`](Self::as_slice_of): the elements must hold valid
    /// values of `T`. For a `T` whose every bit pattern is valid (such as
    /// `blstrs::Scalar` over `[u64; 4]`, as far as memory safety goes) that
    /// always holds, since the bytes are initialised.
    ///
    /// # Panics
    /// If `n` elements do not fit in `len` bytes.
    pub unsafe fn as_mut_slice_of<T>(&mut self, n: usize) -> &mut [T] {
        self.check_fits::<T>(n);
        // SAFETY: aligned and in bounds (checked), unique borrow, validity is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.as_mut_ptr().cast::<T>(), n) }
    }

    fn check_fits<T>(&self, n: usize) {
        assert!(
            align_of::<T>() <= super::host_alloc::PAGE,
            "alignment above a page"
        );
        let bytes = n
            .checked_mul(size_of::<T>())
            .expect("element count overflows");
        assert!(
            bytes <= self.len,
            "{n} elements of {} bytes exceed the buffer's {} bytes",
            size_of::<T>(),
            self.len
        );
    }
}

impl std::ops::Deref for PinnedBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::ops::DerefMut for PinnedBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_bytes_mut()
    }
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("ptr", &self.as_ptr())
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("pinned", &self.is_pinned())
            .finish()
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Some(block) = self.block.take() {
            PoolInner::give_back(&self.pool, block);
        }
    }
}
