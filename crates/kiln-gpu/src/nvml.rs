//! GPU utilization, memory, temperature and power through NVML, for
//! benchmarks and soaks that want "how busy were the GPUs" next to their
//! own figures, and for the daemon's `/metrics`.
//!
//! NVML (`libnvidia-ml.so.1`, shipped with the driver) is loaded at run time
//! by `nvml-wrapper`, so this needs neither CUDA nor the driver at build
//! time, and a host without them gets `None` from [`GpuSampler::open`]
//! instead of an error: "no GPU" is a normal answer for a sampler.
//!
//! NVML's busy figure is the share of its last sample period (between 1/6 s
//! and 1 s, depending on the product) during which at least one kernel was
//! running. It counts every process on the device, not only this one, and
//! says nothing about how much of the GPU each kernel used; a sampler polled
//! about once a second sees each period once.
//!
//! ```no_run
//! if let Some(gpus) = kiln_gpu::nvml::GpuSampler::open() {
//!     for s in gpus.sample() {
//!         println!("gpu {}: {}% busy, {} of {} bytes used", s.index, s.busy_percent, s.mem_used, s.mem_total);
//!     }
//! }
//! ```

use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::Nvml;

/// One device at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuSample {
    /// NVML's device index (the same order as CUDA's unless
    /// `CUDA_VISIBLE_DEVICES` or `CUDA_DEVICE_ORDER` reorder CUDA's).
    pub index: u32,
    /// Percent of NVML's last sample period during which a kernel ran (0..=100).
    pub busy_percent: u32,
    /// Device memory in use, in bytes (every process, plus the driver's own).
    pub mem_used: u64,
    /// Device memory, in bytes.
    pub mem_total: u64,
    /// GPU core temperature, degrees Celsius (`None` where NVML cannot read it).
    pub temperature_celsius: Option<u32>,
    /// Power draw of the whole board, milliwatts (`None` on products
    /// without power readings).
    pub power_milliwatts: Option<u32>,
}

/// An open NVML session and the number of devices it sees.
pub struct GpuSampler {
    nvml: Nvml,
    count: u32,
}

impl GpuSampler {
    /// Loads NVML and counts the devices; `None` when the library is
    /// missing, fails to initialize (no driver loaded) or sees no device.
    pub fn open() -> Option<Self> {
        let nvml = Nvml::init().ok()?;
        let count = nvml.device_count().ok().filter(|&n| n > 0)?;
        Some(Self { nvml, count })
    }

    /// How many devices NVML sees (all of them, not only those CUDA is allowed to use).
    pub fn device_count(&self) -> u32 {
        self.count
    }

    /// One sample per device, in index order. A device NVML cannot read at
    /// this moment (it fell off the bus, it is being reset) is left out
    /// rather than reported as idle, so a caller never averages in a
    /// made-up zero.
    pub fn sample(&self) -> Vec<GpuSample> {
        (0..self.count)
            .filter_map(|index| {
                let dev = self.nvml.device_by_index(index).ok()?;
                let busy = dev.utilization_rates().ok()?;
                let mem = dev.memory_info().ok()?;
                Some(GpuSample {
                    index,
                    busy_percent: busy.gpu.min(100),
                    mem_used: mem.used,
                    mem_total: mem.total,
                    temperature_celsius: dev.temperature(TemperatureSensor::Gpu).ok(),
                    power_milliwatts: dev.power_usage().ok(),
                })
            })
            .collect()
    }
}

impl std::fmt::Debug for GpuSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSampler").field("devices", &self.count).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a host without NVML this checks that opening fails quietly; on a
    /// GPU host, that the samples are in range and one per device.
    #[test]
    fn open_is_none_without_nvml_and_samples_are_sane_with_it() {
        let Some(s) = GpuSampler::open() else {
            eprintln!("no NVML on this host: GpuSampler::open() is None, as it should be");
            return;
        };
        let samples = s.sample();
        assert_eq!(samples.len() as u32, s.device_count(), "{samples:?}");
        for (i, g) in samples.iter().enumerate() {
            assert_eq!(g.index, i as u32);
            assert!(g.busy_percent <= 100);
            assert!(g.mem_total > 0 && g.mem_used <= g.mem_total, "{g:?}");
            assert!(g.temperature_celsius.is_none_or(|t| (1..=130).contains(&t)), "{g:?}");
            assert!(g.power_milliwatts.is_none_or(|p| p > 0 && p < 5_000_000), "{g:?}");
        }
    }
}
