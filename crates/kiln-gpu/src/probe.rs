//! What this build and this host have for GPU proving, and why a GPU cannot
//! be used when it cannot. Whoever picks a prover backend (kiln-groth16's
//! `Backends::open`, which the daemon and the benchmarks use) asks
//! [`probe`] first, so "no GPU" always comes with its reason: kernels
//! missing from the build, the driver library missing (with the loader's
//! own message), the driver failing (its error), or no device. Nothing here
//! panics on a host without a driver: cudarc is only called once
//! `libcuda.so.1` is known to load.

use std::path::Path;

/// The GPU side of this build and host, as far as proving goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuProbe {
    /// This build embeds kiln's kernels (or `KILN_KERNELS_FILE` names some).
    pub kernels: bool,
    /// The NVIDIA kernel driver shows a GPU (`/proc/driver/nvidia/gpus`,
    /// `/dev/nvidia0`): a GPU is there even when the CUDA library is not.
    pub nvidia_gpu_present: bool,
    /// Why `libcuda.so.1` does not load (the loader's message), if it does not.
    pub driver_load_error: Option<String>,
    /// The CUDA driver's error from initializing or counting devices.
    pub driver_error: Option<String>,
    /// Devices the CUDA driver sees (when it answered).
    pub device_count: Option<usize>,
}

impl GpuProbe {
    /// Why no GPU can be used, or `None` when the driver sees devices and
    /// kernels are there (whether each device opens is found out by opening it).
    pub fn reason_unusable(&self) -> Option<String> {
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

    /// The ordinals of the devices the driver sees (none when it answered nothing).
    pub fn ordinals(&self) -> std::ops::Range<usize> {
        0..self.device_count.unwrap_or(0)
    }
}

/// Looks at the build and the host, never panicking without a driver.
pub fn probe() -> GpuProbe {
    let mut p = GpuProbe {
        kernels: crate::HAS_KERNELS || std::env::var_os("KILN_KERNELS_FILE").is_some(),
        nvidia_gpu_present: nvidia_gpu_present(Path::new("/")),
        ..Default::default()
    };
    if !p.kernels {
        return p;
    }
    p.driver_load_error = cuda_driver_load_error();
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
/// real host).
fn nvidia_gpu_present(root: &Path) -> bool {
    let listed = std::fs::read_dir(root.join("proc/driver/nvidia/gpus")).is_ok_and(|mut d| d.next().is_some());
    listed || root.join("dev/nvidia0").exists()
}

/// Tries to load the CUDA driver library the way cudarc does (by its
/// soname) and returns the loader's message when that fails: cudarc itself
/// only says that it failed.
pub fn cuda_driver_load_error() -> Option<String> {
    // SAFETY: loading libcuda runs its initializers, as cudarc itself does
    // when a GPU is opened; the handle is dropped (dlclose) at once and no
    // symbol is taken from it.
    match unsafe { libloading::Library::new("libcuda.so.1") } {
        Ok(_) => None,
        // "dlopen failed" alone; the loader's own words are its source.
        Err(e) => Some(match std::error::Error::source(&e) {
            Some(source) => source.to_string(),
            None => e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_name_what_is_missing() {
        let no_kernels = GpuProbe { nvidia_gpu_present: true, ..Default::default() };
        let r = no_kernels.reason_unusable().unwrap();
        assert!(r.contains("built without CUDA kernels") && r.contains("an NVIDIA GPU is present") && r.contains("rebuild"), "{r}");

        let no_lib = GpuProbe {
            kernels: true,
            nvidia_gpu_present: true,
            driver_load_error: Some("libcuda.so.1: cannot open shared object file".into()),
            ..Default::default()
        };
        let r = no_lib.reason_unusable().unwrap();
        assert!(r.contains("present on this host but the CUDA driver library cannot be loaded: libcuda.so.1: cannot open"), "{r}");

        let no_gpu = GpuProbe { kernels: true, driver_load_error: Some("libcuda.so.1: not found".into()), ..Default::default() };
        assert!(no_gpu.reason_unusable().unwrap().starts_with("no CUDA driver (libcuda.so.1: not found) and no NVIDIA GPU"));

        let mismatch = GpuProbe {
            kernels: true,
            nvidia_gpu_present: true,
            driver_error: Some("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH".into()),
            ..Default::default()
        };
        assert!(mismatch.reason_unusable().unwrap().contains("the CUDA driver failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"));

        let none_seen = GpuProbe { kernels: true, device_count: Some(0), ..Default::default() };
        assert!(none_seen.reason_unusable().unwrap().contains("sees no device"));
        assert!(none_seen.ordinals().is_empty());

        let fine = GpuProbe { kernels: true, nvidia_gpu_present: true, device_count: Some(2), ..Default::default() };
        assert_eq!(fine.reason_unusable(), None);
        assert_eq!(fine.ordinals(), 0..2);
    }

    #[test]
    fn gpu_presence_from_the_kernel_driver() {
        let root = std::env::temp_dir().join(format!("kiln-gpu-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        assert!(!nvidia_gpu_present(&root));
        std::fs::create_dir_all(root.join("proc/driver/nvidia/gpus/0000:01:00.0")).unwrap();
        assert!(nvidia_gpu_present(&root));
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Where the driver library is missing, the loader says so in its words.
    #[test]
    fn the_loaders_own_message() {
        if let Some(e) = cuda_driver_load_error() {
            assert!(e.contains("libcuda.so.1"), "{e}");
        }
    }

    /// On this host, whatever it has: the probe answers (never panics) and
    /// a host without kernels or a driver gets a reason.
    #[test]
    fn probing_this_host() {
        let p = probe();
        if !p.kernels || p.driver_load_error.is_some() {
            assert!(p.reason_unusable().is_some(), "{p:?}");
        }
    }
}
