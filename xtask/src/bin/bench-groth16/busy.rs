//! GPU busy % while something runs: a thread that polls NVML
//! (`kiln_gpu::nvml`) and keeps timestamped samples, so a window of the run
//! (a steady stream, not its fill) can be averaged afterwards.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kiln_gpu::nvml::GpuSampler;

/// NVML averages its busy figure over its own sample period (1/6 s to 1 s);
/// polling faster than that repeats values, slower misses periods.
const POLL: Duration = Duration::from_millis(100);

/// A running poller; [`stop`](Self::stop) returns `(when, busy %)` pairs,
/// each the mean over the devices NVML sees (one H200 here).
pub struct BusyRecorder {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(Instant, u32)>>,
}

impl BusyRecorder {
    /// Starts polling; `None` when NVML is unavailable (no driver, no GPU).
    pub fn start() -> Option<Self> {
        let sampler = GpuSampler::open()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("bench-nvml".into())
            .spawn(move || {
                let mut samples = Vec::new();
                while !flag.load(Ordering::Acquire) {
                    let s = sampler.sample();
                    if !s.is_empty() {
                        let mean = s.iter().map(|g| g.busy_percent).sum::<u32>() / s.len() as u32;
                        samples.push((Instant::now(), mean));
                    }
                    std::thread::sleep(POLL);
                }
                samples
            })
            .ok()?;
        Some(BusyRecorder { stop, thread })
    }

    pub fn stop(self) -> Vec<(Instant, u32)> {
        self.stop.store(true, Ordering::Release);
        self.thread.join().unwrap_or_default()
    }
}
