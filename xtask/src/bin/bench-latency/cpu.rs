//! CPU time this process has used: on a host shared with other work, bulk
//! partitions per CPU-second of kiln stay comparable between modes when
//! partitions per second do not.

use std::time::Duration;

/// User + system time of every thread of this process so far.
pub fn process_cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is given
    // and reads nothing from it; RUSAGE_SELF always exists.
    let usage = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) != 0 {
            return Duration::ZERO;
        }
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}
