//! kiln-gpu: NTT and MSM on CUDA GPUs, for kiln's Groth16 GPU backend
//! (BLS12-381), and over the Pasta curves (Pallas, Vesta) from the same
//! kernel templates: [`DeviceGroup`] and [`DeviceField`] name what each
//! generic entry point works in. The `.params` paths (streamed MSMs,
//! fixed-base setup, [`ParamsGroup`]) and the H pipeline are BLS12-381 only.
//!
//! Kernels live in this crate's `cuda/` (CUDA C++, templated on field and curve) and are
//! built by `cargo xtask kernels` into a fatbin (machine code for sm_80 to
//! sm_120 plus compute_80 PTX, see [`KERNEL_TARGETS`]) that this crate embeds at build time; without it the crate
//! still builds and [`GpuDevice::open`] returns [`GpuError::NoKernels`].
//!
//! Data stays in blstrs' memory layout on both sides (Montgomery limbs,
//! blst affine points with all-zero infinity), so uploads and downloads are
//! byte copies. Every operation runs on a caller-given [`GpuStream`], so
//! several workers can share one device; a buffer must only be used on the
//! stream it was made on (or after synchronizing), since this crate turns off
//! cudarc's per-buffer event tracking.
//!
//! ```no_run
//! use kiln_gpu::{GpuDevice, NttDirection};
//! # fn main() -> Result<(), kiln_gpu::GpuError> {
//! let dev = GpuDevice::open(0)?;
//! let stream = dev.new_stream()?;
//! let scalars = vec![blstrs::Scalar::from(3u64); 1 << 10];
//! let mut buf = dev.upload_scalars(&stream, &scalars)?;
//! dev.ntt(&stream, &mut buf, 10, NttDirection::Forward, false)?;
//! let evals = dev.download_scalars(&stream, &buf)?;
//! # Ok(()) }
//! ```

/// The README's example, compiled and run as a doc test so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod buffers;
mod curve;
mod device;
mod error;
mod field;
pub mod host;
mod launch;
mod msm;
mod ntt;
#[cfg(feature = "nvml")]
pub mod nvml;
mod probe;
mod r1cs;
mod setup;
mod stream;
mod stream_check;

pub use buffers::{DeviceG1, DeviceG2, DevicePallas, DevicePoints, DeviceScalars, DeviceVesta};
pub use curve::{DeviceGroup, ParamsGroup};
pub use device::{DeviceInfo, DeviceSpan, GpuDevice, GpuStream};
pub use error::GpuError;
pub use field::{root_of_unity_of, DeviceField};
pub use msm::MsmTiming;
pub use ntt::NttDirection;
pub use probe::{cuda_driver_load_error, probe, GpuProbe};
pub use r1cs::{DeviceProducts, DeviceR1cs, HostMatrix, HostR1cs, IdWidth, R1CS_INPUT_BIT};
pub use setup::WINDOW_TABLE_LEN;
pub use stream::{PointStreamer, RawSource};

/// Whether this build embeds the CUDA kernels (`cargo xtask kernels` was run
/// before building). Without them every device operation fails with
/// [`GpuError::NoKernels`].
pub const HAS_KERNELS: bool = cfg!(kiln_kernels);

/// The GPUs the embedded kernels have code for, in words, e.g. `sm_80
/// sm_86 sm_89 sm_90a sm_100 sm_120 + compute_80 PTX` (`None` without
/// kernels). The build's `KILN_CUDA_ARCHS` narrows the machine code.
pub const KERNEL_TARGETS: Option<&str> = option_env!("KILN_KERNEL_TARGETS");
