//! Lowering the OS scheduling priority of one thread (its nice value), so
//! the threads of bulk work yield the cores to deadline work the moment it
//! wants them. On Linux the nice value is a per-thread attribute (what
//! `nice(2)` changes is the calling thread's), and threads inherit it from
//! the thread that creates them. Raising it needs no privilege; lowering
//! it again would (`RLIMIT_NICE`), so a niced thread stays niced: only
//! threads that do nothing but bulk work are niced.

use std::io;

/// Adds `increment` (> 0) to the calling thread's nice value (the kernel
/// caps it at 19); returns the new value.
#[cfg(target_os = "linux")]
pub(crate) fn lower_this_thread(increment: i32) -> io::Result<i32> {
    // SAFETY: errno is thread-local; clearing it is how a -1 that is a
    // valid new nice value is told from a failure (nice(2)'s manual).
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: nice() only changes the calling thread's scheduling priority.
    let new = unsafe { libc::nice(increment) };
    if new == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(0) {
            return Err(e);
        }
    }
    Ok(new)
}

/// Elsewhere the per-thread nice value does not exist.
#[cfg(not(target_os = "linux"))]
pub(crate) fn lower_this_thread(_increment: i32) -> io::Result<i32> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "per-thread nice values are Linux-only"))
}

/// The calling thread's nice value.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn this_thread_nice() -> i32 {
    // SAFETY: as above; PRIO_PROCESS with id 0 is the calling thread on Linux.
    unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn only_the_calling_thread_is_lowered() {
        let before = this_thread_nice();
        let lowered = std::thread::spawn(move || {
            let new = lower_this_thread(3).unwrap();
            assert_eq!(new, this_thread_nice());
            // Threads it starts inherit it.
            let child = std::thread::spawn(this_thread_nice).join().unwrap();
            (new, child)
        })
        .join()
        .unwrap();
        assert_eq!(lowered, ((before + 3).min(19), (before + 3).min(19)));
        assert_eq!(this_thread_nice(), before, "the spawning thread is untouched");
    }
}
