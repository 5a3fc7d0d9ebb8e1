//! Which prover backends a process gets, and why — the one place that
//! decides it, so the daemon (`kiln serve`, `kiln demo`), the benchmark
//! drivers and a library user's [`crate::CircuitProver`] pick the same way:
//! [`BackendChoice::Auto`] takes every GPU that opens with kiln's kernels,
//! else the CPU; `Cpu` the CPU; `Gpu` the GPUs or an error. When no GPU is
//! usable, [`Backends::why`] names what is missing, from kiln-gpu's
//! `probe()`: kernels in this build, the driver library (with the
//! loader's own message), a device, or the driver's error opening one.
//!
//! A crate built without the `gpu` feature has no GPU backend: `Auto`
//! gives the CPU and says so, `Gpu` is an error.

use std::str::FromStr;
use std::sync::Arc;

use crate::cpu::CpuBackend;
use crate::faults::{FaultPlan, FaultyBackend, FAULTS_ENV};
use crate::prover::{DeviceStatus, ProverBackend};

/// Streaming chunk when none is configured (parameter sections a GPU
/// cannot keep resident are streamed from host memory): big enough that a
/// chunk's MSM takes far longer than its copy (G1: 2.8 M points, ~40 ms of
/// MSM against ~6 ms of copy at PCIe 5 rates), small enough to leave VRAM
/// to the rest. Here rather than in the GPU backend so that configuration
/// code builds without the `gpu` feature.
pub const DEFAULT_STREAM_CHUNK_BYTES: usize = 256 << 20;

/// What the caller asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// Every usable GPU, else the CPU.
    #[default]
    Auto,
    /// The CPU only.
    Cpu,
    /// The GPUs; an error when none is usable.
    Gpu,
}

impl FromStr for BackendChoice {
    type Err = BackendError;
    fn from_str(s: &str) -> Result<Self, BackendError> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cpu" => Ok(BackendChoice::Cpu),
            "gpu" => Ok(BackendChoice::Gpu),
            other => Err(BackendError(format!("unknown backend {other:?} (expected auto, cpu or gpu)"))),
        }
    }
}

/// Why the backends asked for cannot be had (a GPU asked for that is not
/// usable, or a device listed that does not open); the message says which.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

/// How parameters are placed on each GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuPlacement {
    /// Cap on the VRAM resident parameters take (`None`: what is free).
    pub srs_vram_bytes: Option<u64>,
    /// Chunk size of streamed parameter sections.
    pub stream_chunk_bytes: usize,
}

impl Default for GpuPlacement {
    fn default() -> Self {
        GpuPlacement { srs_vram_bytes: None, stream_chunk_bytes: DEFAULT_STREAM_CHUNK_BYTES }
    }
}

/// How many workers on which GPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendOptions {
    /// Workers per GPU (at least one): several let one proof's copies
    /// overlap another's kernels.
    pub workers_per_gpu: usize,
    /// The GPUs to use by ordinal (`None`: every visible one). A listed
    /// GPU must open: one that does not is an error, not a fallback.
    pub devices: Option<Vec<usize>>,
    pub placement: GpuPlacement,
}

impl Default for BackendOptions {
    fn default() -> Self {
        BackendOptions { workers_per_gpu: 1, devices: None, placement: GpuPlacement::default() }
    }
}

/// The chosen backends: one engine worker per entry of `workers`.
pub struct Backends {
    pub workers: Vec<Arc<dyn ProverBackend>>,
    /// What was chosen and why, for the log.
    pub why: String,
}

impl Backends {
    /// Opens the backends `choice` asks for. Opening GPUs loads kernels and
    /// starts worker threads: call it off any async executor.
    ///
    /// With [`crate::FAULTS_ENV`] (`KILN_FAULTS`) set, every backend is
    /// wrapped in a [`FaultyBackend`] injecting the faults it names (a
    /// test setting: the log says so loudly); a value that does not parse
    /// is an error.
    pub fn open(choice: BackendChoice, options: &BackendOptions) -> Result<Backends, BackendError> {
        let plan = FaultPlan::from_env()?;
        let backends = Self::open_real(choice, options)?;
        Ok(match plan {
            Some(plan) => backends.with_faults(&plan),
            None => backends,
        })
    }

    /// The same workers, each wrapped in a [`FaultyBackend`] following
    /// `plan` (workers of one device share its faults).
    pub fn with_faults(self, plan: &FaultPlan) -> Backends {
        tracing::warn!(
            plan = %plan,
            "{FAULTS_ENV} is set: INJECTING FAULTS into every prover backend (errors, wrong results, hangs, sticky faults). \
             This is a test setting; never run it in production"
        );
        let workers = FaultyBackend::wrap_all(self.workers, plan).into_iter().map(|w| w as Arc<dyn ProverBackend>).collect();
        Backends { workers, why: format!("{}; FAULTS INJECTED ({FAULTS_ENV}={plan})", self.why) }
    }

    fn open_real(choice: BackendChoice, options: &BackendOptions) -> Result<Backends, BackendError> {
        match choice {
            BackendChoice::Cpu => Ok(Self::cpu("asked for (backend = \"cpu\")")),
            BackendChoice::Auto | BackendChoice::Gpu => match open_gpus(options)? {
                Ok(gpus) => Ok(gpus),
                Err(why_not) if choice == BackendChoice::Gpu => {
                    Err(BackendError(format!("backend = \"gpu\" but no GPU is usable: {why_not}")))
                }
                Err(why_not) => Ok(Self::cpu(&format!("no usable GPU: {why_not}"))),
            },
        }
    }

    /// One [`CpuBackend`] worker (it uses every core of rayon's pool), and `why`.
    pub fn cpu(why: &str) -> Backends {
        Backends {
            workers: vec![Arc::new(CpuBackend) as Arc<dyn ProverBackend>],
            why: format!("cpu ({} threads): {why}", rayon::current_num_threads()),
        }
    }

    /// One worker standing for each device the workers run on (none for
    /// the CPU), to ask for its [`DeviceStatus`] when a status page wants it.
    pub fn devices(&self) -> Devices {
        Devices(one_per_device(&self.workers).into_iter().filter(|w| w.device_status().is_some()).collect())
    }
}

/// The first of `workers` on each device ([`ProverBackend::device`]), in
/// order: what to ask about a device once, however many workers it has.
pub fn one_per_device(workers: &[Arc<dyn ProverBackend>]) -> Vec<Arc<dyn ProverBackend>> {
    let mut out: Vec<Arc<dyn ProverBackend>> = Vec::new();
    for w in workers {
        if !out.iter().any(|o| o.device() == w.device()) {
            out.push(w.clone());
        }
    }
    out
}

/// The devices behind a set of backends, one worker for each.
#[derive(Clone, Default)]
pub struct Devices(Vec<Arc<dyn ProverBackend>>);

impl Devices {
    /// Each device's status now (free memory changes between calls).
    pub fn status(&self) -> Vec<DeviceStatus> {
        self.0.iter().filter_map(|w| w.device_status()).collect()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Opens the GPUs: `Ok(Err(reason))` when none is usable; an error when a
/// GPU listed in `options.devices` does not open (a listed GPU must).
#[cfg(feature = "gpu")]
fn open_gpus(options: &BackendOptions) -> Result<Result<Backends, String>, BackendError> {
    use crate::gpu::GpuBackend;

    let devices = options.devices.as_deref();
    let probe = kiln_gpu::probe();
    if let Some(reason) = probe.reason_unusable() {
        if devices.is_some() {
            return Err(BackendError(format!("gpu_devices {devices:?}: {reason}")));
        }
        return Ok(Err(reason));
    }
    let ordinals: Vec<usize> = devices.map(<[usize]>::to_vec).unwrap_or_else(|| probe.ordinals().collect());
    let (mut workers, mut names, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for ordinal in ordinals {
        match GpuBackend::on_devices(&[ordinal], options.workers_per_gpu) {
            Ok(opened) => {
                if let Some(w) = opened.first() {
                    let ctx = w.context();
                    ctx.set_srs_vram_limit(options.placement.srs_vram_bytes);
                    ctx.set_stream_chunk_bytes(options.placement.stream_chunk_bytes);
                    let i = ctx.device().info();
                    let (major, minor) = i.compute_capability;
                    names.push(format!("GPU {} {} (sm_{major}{minor}, {} SMs, {} GiB; kernels: {})", i.ordinal, i.name, i.sm_count, i.total_memory >> 30, i.kernel_code));
                }
                workers.extend(opened.into_iter().map(|w| Arc::new(w) as Arc<dyn ProverBackend>));
            }
            Err(e) if devices.is_some() => return Err(BackendError(format!("gpu_devices {devices:?}: GPU {ordinal} did not open: {e}"))),
            Err(e) => failed.push(format!("GPU {ordinal} did not open: {e}")),
        }
    }
    if names.is_empty() {
        return Ok(Err(failed.join("; ")));
    }
    let mut why = format!("gpu: {}; GPU workers per GPU: {}", names.join(", "), options.workers_per_gpu.max(1));
    if !failed.is_empty() {
        why.push_str(&format!("; not used: {}", failed.join("; ")));
    }
    Ok(Ok(Backends { workers, why }))
}

/// Without the `gpu` feature there is no GPU backend to open.
#[cfg(not(feature = "gpu"))]
fn open_gpus(options: &BackendOptions) -> Result<Result<Backends, String>, BackendError> {
    let reason = "kiln-groth16 was built without its `gpu` feature".to_string();
    match &options.devices {
        Some(devices) => Err(BackendError(format!("gpu_devices {:?}: {reason}", Some(devices)))),
        None => Ok(Err(reason)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_by_name() {
        assert_eq!("auto".parse::<BackendChoice>().unwrap(), BackendChoice::Auto);
        assert_eq!("cpu".parse::<BackendChoice>().unwrap(), BackendChoice::Cpu);
        assert_eq!("gpu".parse::<BackendChoice>().unwrap(), BackendChoice::Gpu);
        let e = "tpu".parse::<BackendChoice>().unwrap_err();
        assert_eq!(e.to_string(), "unknown backend \"tpu\" (expected auto, cpu or gpu)");
    }

    #[test]
    fn faults_wrap_every_worker_and_say_so() {
        let plan: FaultPlan = "start_err=1".parse().unwrap();
        let b = Backends::cpu("asked for").with_faults(&plan);
        assert!(b.why.ends_with("; FAULTS INJECTED (KILN_FAULTS=start_err=1,full=0,finish_err=0,wrong=0,hang=0,seed=0)"), "{}", b.why);
        assert_eq!(b.workers[0].name(), "cpu+faults");
        assert_eq!(b.workers[0].device(), "cpu");
    }

    #[test]
    fn the_cpu_when_asked() {
        let b = Backends::open(BackendChoice::Cpu, &BackendOptions::default()).unwrap();
        assert_eq!(b.workers.len(), 1);
        assert!(b.why.starts_with("cpu (") && b.why.ends_with("asked for (backend = \"cpu\")"), "{}", b.why);
        assert!(b.devices().is_empty());
    }

    /// On this host, whatever it has: `auto` always gives workers and says
    /// which; `gpu` either gives GPUs or says why not.
    #[test]
    fn choosing_on_this_host() {
        let auto = Backends::open(BackendChoice::Auto, &BackendOptions::default()).unwrap();
        assert!(!auto.workers.is_empty());
        if auto.why.starts_with("gpu: ") {
            assert!(!auto.devices().is_empty());
            assert!(auto.devices().status().iter().all(|d| d.total_memory > 0));
        } else {
            assert!(auto.why.contains("no usable GPU: "), "{}", auto.why);
            let err = Backends::open(BackendChoice::Gpu, &BackendOptions::default()).err().unwrap();
            assert!(err.0.starts_with("backend = \"gpu\" but no GPU is usable: "), "{err}");
            let listed = BackendOptions { devices: Some(vec![0]), ..Default::default() };
            let err = Backends::open(BackendChoice::Auto, &listed).err().unwrap();
            assert!(err.0.starts_with("gpu_devices Some([0]): "), "{err}");
        }
    }
}
