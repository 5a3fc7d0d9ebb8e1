//! Where pool memory comes from: page-locked memory from the CUDA driver when
//! one is present, anonymous `mmap` otherwise. All of the pool's `unsafe` is
//! here: raw allocations owned by [`HostAllocation`], freed exactly once on drop.

use std::ptr::NonNull;
use std::sync::Arc;

use cudarc::driver::{result as cu, sys as cusys, CudaContext};

/// Alignment of every allocation (the page size; cudaHostAlloc and mmap both
/// return page-aligned memory), so any element type can be viewed in place.
pub(crate) const PAGE: usize = 4096;

/// The source of pool memory.
#[derive(Clone)]
pub(crate) enum HostAllocator {
    /// `cuMemHostAlloc(PORTABLE)`: page-locked, and usable by every CUDA
    /// context in the process, so one pool serves all GPUs. Allocated while the
    /// primary context of device 0 is current (the driver needs a context).
    Cuda(Arc<CudaContext>),
    /// Anonymous private `mmap`: page-aligned, zero-filled, not page-locked.
    Pageable,
}

impl HostAllocator {
    /// CUDA when `libcuda` loads and device 0 initialises, else pageable.
    pub(crate) fn detect() -> Self {
        // SAFETY: is_culib_present only tries to dlopen the library by name.
        if !unsafe { cusys::is_culib_present() } {
            tracing::info!("no CUDA driver: pinned pool uses ordinary page-aligned memory");
            return HostAllocator::Pageable;
        }
        // CudaContext::new loads symbols lazily; with the library present it
        // returns errors (no device, driver too old) instead of panicking.
        match CudaContext::new(0) {
            Ok(ctx) => {
                tracing::info!("pinned pool allocates page-locked memory through the CUDA driver");
                HostAllocator::Cuda(ctx)
            }
            Err(err) => {
                tracing::warn!(%err, "CUDA driver present but device 0 unusable: pinned pool uses ordinary memory");
                HostAllocator::Pageable
            }
        }
    }

    pub(crate) fn page_locked(&self) -> bool {
        matches!(self, HostAllocator::Cuda(_))
    }

    pub(crate) fn kind(&self) -> &'static str {
        match self {
            HostAllocator::Cuda(_) => "page-locked (cuMemHostAlloc)",
            HostAllocator::Pageable => "pageable (mmap)",
        }
    }

    /// A zero-filled, page-aligned allocation of `len` bytes (`len` > 0, a
    /// multiple of [`PAGE`]). Zero-filled so that every byte is initialised
    /// and may be read as `&[u8]`; for CUDA memory that costs one memset, paid
    /// once per buffer on the (cold) growth path.
    pub(crate) fn allocate(&self, len: usize) -> Result<HostAllocation, String> {
        assert!(
            len > 0 && len % PAGE == 0,
            "allocation of {len} bytes is not whole pages"
        );
        let ptr = match self {
            HostAllocator::Cuda(ctx) => {
                ctx.bind_to_thread().map_err(|e| e.to_string())?;
                // SAFETY: a context is current on this thread; the result is
                // either an error or a fresh allocation of `len` bytes.
                let raw = unsafe { cu::malloc_host(len, cusys::CU_MEMHOSTALLOC_PORTABLE) }
                    .map_err(|e| e.to_string())?;
                let ptr = NonNull::new(raw.cast::<u8>()).ok_or("cuMemHostAlloc returned null")?;
                // SAFETY: `ptr` points to `len` writable bytes that nothing else references.
                unsafe { ptr.as_ptr().write_bytes(0, len) };
                ptr
            }
            HostAllocator::Pageable => {
                // SAFETY: anonymous private mapping with no address hint: no
                // existing memory is affected; MAP_FAILED is checked below.
                let raw = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                if raw == libc::MAP_FAILED {
                    return Err(std::io::Error::last_os_error().to_string());
                }
                // Anonymous mappings are zero-filled by the kernel.
                NonNull::new(raw.cast::<u8>()).ok_or("mmap returned null")?
            }
        };
        Ok(HostAllocation {
            ptr,
            len,
            owner: self.clone(),
        })
    }
}

/// One allocation, owned: freed with the function matching how it was made.
pub(crate) struct HostAllocation {
    ptr: NonNull<u8>,
    len: usize,
    owner: HostAllocator,
}

// SAFETY: the allocation is plain host memory exclusively owned by this value;
// shared access only hands out `&[u8]`, mutation needs `&mut self`.
unsafe impl Send for HostAllocation {}
// SAFETY: as above; `&HostAllocation` permits only reads.
unsafe impl Sync for HostAllocation {}

impl HostAllocation {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes (zero-filled at allocation, written
        // only through `&mut self` since), alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostAllocation {
    fn drop(&mut self) {
        match &self.owner {
            HostAllocator::Cuda(ctx) => {
                let freed = ctx.bind_to_thread().and_then(|()| {
                    // SAFETY: `ptr` came from cuMemHostAlloc and is freed once, here.
                    unsafe { cu::free_host(self.ptr.as_ptr().cast()) }
                });
                if let Err(err) = freed {
                    tracing::error!(%err, bytes = self.len, "cuMemFreeHost failed; the memory is leaked");
                }
            }
            HostAllocator::Pageable => {
                // SAFETY: `ptr`/`len` are exactly the mapping made in `allocate`, unmapped once.
                let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
                if rc != 0 {
                    tracing::error!(err = %std::io::Error::last_os_error(), bytes = self.len, "munmap failed");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pageable_allocation_is_aligned_zeroed_and_writable() {
        let a = HostAllocator::Pageable;
        let mut m = a.allocate(3 * PAGE).unwrap();
        assert_eq!(m.as_ptr() as usize % PAGE, 0);
        assert!(m.as_slice().iter().all(|&b| b == 0));
        m.as_mut_slice()[3 * PAGE - 1] = 7;
        assert_eq!(m.as_slice()[3 * PAGE - 1], 7);
        assert!(!a.page_locked());
    }

    #[test]
    fn detect_without_a_driver_falls_back_to_pageable() {
        // SAFETY: only probes for the library.
        if unsafe { cusys::is_culib_present() } {
            return; // a GPU host: the CUDA path is exercised by the h2d example
        }
        assert!(!HostAllocator::detect().page_locked());
    }
}
