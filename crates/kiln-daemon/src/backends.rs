//! Which prover backends the engine gets, and why: `auto` (every GPU that
//! opens with kiln's kernels, else the CPU), `cpu`, or `gpu` (an error
//! without one). When there is no usable GPU the reason names what is
//! missing: kernels in this build, the driver library (with the loader's
//! own message), a device, or the driver's error opening one. `kiln serve`
//! logs it and `kiln demo` prints it.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Result};
use kiln_groth16::{CpuBackend, GpuBackend, GpuContext, ProverBackend};

/// The chosen backends: one engine worker per entry of `workers`.
pub struct Backends {
    pub workers: Vec<Arc<dyn ProverBackend>>,
    /// The GPUs behind the GPU workers (for GetStatus), one per device.
    pub gpus: Vec<Arc<GpuContext>>,
    /// What was chosen and why, for the log.
    pub why: String,
}

/// How parameters are placed on each GPU.
#[derive(Clone, Copy, Debug)]
pub struct GpuPlacement {
    /// Cap on the VRAM resident parameters take (`None`: what is free).
    pub srs_vram_bytes: Option<u64>,
    /// Chunk size of streamed parameter sections.
    pub stream_chunk_bytes: usize,
}

impl Default for GpuPlacement {
    fn default() -> Self {
        GpuPlacement { srs_vram_bytes: None, stream_chunk_bytes: kiln_groth16::gpu::DEFAULT_STREAM_CHUNK_BYTES }
    }
}

/// Opens the backends `choice` asks for, on the GPUs `devices` lists (every
/// visible GPU when `None`).
pub fn choose(choice: &str, workers_per_gpu: usize, devices: Option<&[usize]>, placement: GpuPlacement) -> Result<Backends> {
    let cpu = |why: String| Backends {
        workers: vec![Arc::new(CpuBackend) as Arc<dyn ProverBackend>],
        gpus: Vec::new(),
        why: format!("cpu ({} threads): {why}", rayon::current_num_threads()),
    };
    match choice {
        "cpu" => Ok(cpu("asked for (backend = \"cpu\")".into())),
        "auto" | "gpu" => {
            let opened = match open_gpus(devices, workers_per_gpu)? {
                Ok(opened) => opened,
                Err(why_not) if choice == "gpu" => bail!("backend = \"gpu\" but no GPU is usable: {why_not}"),
                Err(why_not) => return Ok(cpu(format!("no usable GPU: {why_not}"))),
            };
            for g in &opened.gpus {
                g.set_srs_vram_limit(placement.srs_vram_bytes);
                g.set_stream_chunk_bytes(placement.stream_chunk_bytes);
            }
            let names: Vec<String> = opened
                .gpus
                .iter()
                .map(|g| {
                    let i = g.device().info();
                    let (major, minor) = i.compute_capability;
                    format!("GPU {} {} (sm_{major}{minor}, {} SMs, {} GiB)", i.ordinal, i.name, i.sm_count, i.total_memory >> 30)
                })
                .collect();
            let mut why = format!("gpu: {}; GPU workers per GPU: {}", names.join(", "), workers_per_gpu.max(1));
            if !opened.failed.is_empty() {
                why.push_str(&format!("; not used: {}", opened.failed.join("; ")));
            }
            Ok(Backends { workers: opened.workers, gpus: opened.gpus, why })
        }
        other => bail!("unknown backend {other:?} (expected auto, cpu or gpu)"),
    }
}

/// GPUs that opened, and why the others did not.
struct Opened {
    workers: Vec<Arc<dyn ProverBackend>>,
    gpus: Vec<Arc<GpuContext>>,
    failed: Vec<String>,
}

/// Opens the GPUs: `Ok(Err(reason))` when none is usable; an error when a
/// GPU listed in `devices` does not open (a listed GPU must).
fn open_gpus(devices: Option<&[usize]>, workers_per_gpu: usize) -> Result<Result<Opened, String>> {
    let probe = probe();
    if let Some(reason) = probe.reason_unusable() {
        if devices.is_some() {
            bail!("gpu_devices {devices:?}: {reason}");
        }
        return Ok(Err(reason));
    }
    let ordinals: Vec<usize> = devices.map(<[usize]>::to_vec).unwrap_or_else(|| (0..probe.device_count.unwrap_or(0)).collect());
    let mut opened = Opened { workers: Vec::new(), gpus: Vec::new(), failed: Vec::new() };
    for ordinal in ordinals {
        match GpuBackend::on_devices(&[ordinal], workers_per_gpu) {
            Ok(workers) => {
                if let Some(w) = workers.first() {
                    opened.gpus.push(w.context().clone());
                }
                opened.workers.extend(workers.into_iter().map(|w| Arc::new(w) as Arc<dyn ProverBackend>));
            }
            Err(e) if devices.is_some() => bail!("gpu_devices {devices:?}: GPU {ordinal} did not open: {e}"),
            Err(e) => opened.failed.push(format!("GPU {ordinal} did not open: {e}")),
        }
    }
    if opened.gpus.is_empty() {
        return Ok(Err(opened.failed.join("; ")));
    }
    Ok(Ok(opened))
}

/// What this build and this host have, as far as the GPU backend goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct GpuProbe {
    /// This build embeds kiln's kernels (or `KILN_KERNELS_FILE` names some).
    kernels: bool,
    /// The NVIDIA kernel driver shows a GPU (`/proc/driver/nvidia/gpus`, `/dev/nvidia0`).
    nvidia_gpu_present: bool,
    /// Why `libcuda.so.1` does not load (the loader's message), if it does not.
    driver_load_error: Option<String>,
    /// The CUDA driver's error from initializing or counting devices.
    driver_error: Option<String>,
    /// Devices the CUDA driver sees (when it answered).
    device_count: Option<usize>,
}

impl GpuProbe {
    /// Why no GPU can be used, or `None` when the driver sees devices and
    /// kernels are there (whether each device opens is found out next).
    fn reason_unusable(&self) -> Option<String> {
        let present = if self.nvidia_gpu_present { "an NVIDIA GPU is present on this host" } else { "no NVIDIA GPU is visible on this host" };
        if !self.kernels {
            let hint = if self.nvidia_gpu_present {
                "; rebuild kiln where nvcc or python3 with pip is available (README: Build) to use it"
            } else {
                ""
            };
            return Some(format!(
                "this kiln binary was built without CUDA kernels (no nvcc and no NVIDIA nvcc wheels at build time); {present}{hint}"
            ));
        }
        if let Some(e) = &self.driver_load_error {
            return Some(if self.nvidia_gpu_present {
                format!("{present} but the CUDA driver library cannot be loaded: {e}")
            } else {
                format!("no CUDA driver ({e}) and {present}")
            });
        }
        if let Some(e) = &self.driver_error {
            return Some(format!("the CUDA driver failed: {e} ({present})"));
        }
        match self.device_count {
            Some(0) | None => {
                let visible = std::env::var("CUDA_VISIBLE_DEVICES").map(|v| format!(" (CUDA_VISIBLE_DEVICES={v:?})")).unwrap_or_default();
                Some(format!("the CUDA driver sees no device{visible}; {present}"))
            }
            Some(_) => None,
        }
    }
}

/// Looks at the build and the host, never panicking without a driver.
fn probe() -> GpuProbe {
    let mut p = GpuProbe {
        kernels: kiln_gpu::HAS_KERNELS || std::env::var_os("KILN_KERNELS_FILE").is_some(),
        nvidia_gpu_present: nvidia_gpu_present(Path::new("/")),
        ..Default::default()
    };
    if !p.kernels {
        return p;
    }
    p.driver_load_error = crate::sys::cuda_driver_load_error();
    if p.driver_load_error.is_some() {
        return p;
    }
    // The library loads, so cudarc's calls below cannot panic for want of it.
    match cudarc::driver::result::init().and_then(|()| cudarc::driver::result::device::get_count()) {
        Ok(n) => p.device_count = Some(usize::try_from(n).unwrap_or(0)),
        Err(e) => p.driver_error = Some(e.to_string()),
    }
    p
}

/// Whether the NVIDIA kernel driver reports a GPU under `root` (`/` on a
/// real host): a GPU is there even when the CUDA library is not.
fn nvidia_gpu_present(root: &Path) -> bool {
    let listed = std::fs::read_dir(root.join("proc/driver/nvidia/gpus")).is_ok_and(|mut d| d.next().is_some());
    listed || root.join("dev/nvidia0").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_what_is_missing() {
        let no_kernels = GpuProbe { nvidia_gpu_present: true, ..Default::default() };
        let r = no_kernels.reason_unusable().unwrap();
        assert!(r.contains("built without CUDA kernels") && r.contains("an NVIDIA GPU is present") && r.contains("rebuild"), "{r}");

        let no_lib = GpuProbe { kernels: true, nvidia_gpu_present: true, driver_load_error: Some("libcuda.so.1: cannot open shared object file".into()), ..Default::default() };
        let r = no_lib.reason_unusable().unwrap();
        assert!(r.contains("present on this host but the CUDA driver library cannot be loaded: libcuda.so.1: cannot open"), "{r}");

        let no_gpu = GpuProbe { kernels: true, driver_load_error: Some("libcuda.so.1: not found".into()), ..Default::default() };
        assert!(no_gpu.reason_unusable().unwrap().starts_with("no CUDA driver (libcuda.so.1: not found) and no NVIDIA GPU"));

        let mismatch = GpuProbe { kernels: true, nvidia_gpu_present: true, driver_error: Some("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH".into()), ..Default::default() };
        assert!(mismatch.reason_unusable().unwrap().contains("the CUDA driver failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"));

        let none_seen = GpuProbe { kernels: true, device_count: Some(0), ..Default::default() };
        assert!(none_seen.reason_unusable().unwrap().contains("sees no device"));

        let fine = GpuProbe { kernels: true, nvidia_gpu_present: true, device_count: Some(2), ..Default::default() };
        assert_eq!(fine.reason_unusable(), None);
    }

    #[test]
    fn gpu_presence_from_the_kernel_driver() {
        let root = tempfile::tempdir().unwrap();
        assert!(!nvidia_gpu_present(root.path()));
        std::fs::create_dir_all(root.path().join("proc/driver/nvidia/gpus/0000:01:00.0")).unwrap();
        assert!(nvidia_gpu_present(root.path()));
    }

    /// On this host, whatever it has: the probe answers (never panics) and
    /// a CPU-only host gets a reason.
    #[test]
    fn probing_this_host() {
        let p = probe();
        if !p.kernels || p.driver_load_error.is_some() {
            assert!(p.reason_unusable().is_some(), "{p:?}");
        }
        let chosen = choose("auto", 1, None, GpuPlacement::default()).unwrap();
        assert!(!chosen.workers.is_empty());
        assert!(chosen.why.starts_with("gpu: ") || chosen.why.contains("no usable GPU: "), "{}", chosen.why);
    }
}
