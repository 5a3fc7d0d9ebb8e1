//! CPU time of this thread and of the process (seconds), for core-second
//! figures on a host other work shares: a thread's CPU clock advances only
//! while it runs, where wall time also counts the time others had the core.

/// CPU time consumed by the calling thread.
pub fn thread_seconds() -> f64 {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time consumed by every thread of the process.
pub fn process_seconds() -> f64 {
    read(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn read(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration,
    // and both clock ids are supported by Linux for the calling thread.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime({clock}) failed");
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
