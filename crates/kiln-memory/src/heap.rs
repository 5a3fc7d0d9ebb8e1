//! The process heap: returning freed memory to the OS, and reading RSS.
//!
//! See the crate docs ("Choosing the allocator") for why [`trim_heap`] exists:
//! under many threads glibc keeps freed memory in per-thread arenas, and the
//! process's RSS drifts far above what the budget says is reserved.

/// Asks the C heap to return free memory to the OS: glibc's `malloc_trim(0)`,
/// which also trims every thread arena, not only the top of the main heap.
/// Returns whether memory was released. A no-op returning `false` on targets
/// without glibc.
///
/// Cheap when there is nothing to release; call it after each partition (the
/// pipeline's natural quiet point), not per allocation.
pub fn trim_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only walks glibc's own heap structures under
        // their locks; it is safe to call at any time from any thread.
        unsafe { libc::malloc_trim(0) != 0 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// The process's resident set size in bytes (from `/proc/self/statm`), or
/// `None` where that file does not exist.
pub fn resident_set_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let resident_pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(resident_pages * page_size())
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_follows_touched_memory() {
        let before = resident_set_bytes().expect("linux has /proc/self/statm");
        let mut v = vec![0u8; 64 << 20];
        // Touch every page so it becomes resident.
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        std::hint::black_box(&v);
        let during = resident_set_bytes().unwrap();
        assert!(
            during >= before + (48 << 20),
            "before {before} during {during}"
        );
        drop(v);
        trim_heap();
    }
}
