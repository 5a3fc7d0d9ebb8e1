//! The embedded fatbin, kernel handles, and the raw launch helper: the only
//! place kernel arguments are laid out, so the unsafe is fenced here.
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use crate::error::GpuError;

#[cfg(kiln_kernels)]
static FATBIN: &[u8] = include_bytes!(env!("KILN_FATBIN_PATH"));

/// The kernels to load: `$KILN_KERNELS_FILE` when set (a fatbin or cubin
/// from `cargo xtask kernels`, so kernel variants can be timed with one
/// binary), else the embedded fatbin.
pub(crate) fn fatbin() -> Result<Vec<u8>, GpuError> {
    if let Some(path) = std::env::var_os("KILN_KERNELS_FILE") {
        return std::fs::read(&path)
            .map_err(|e| GpuError::InvalidArgument(format!("KILN_KERNELS_FILE {}: {e}", path.to_string_lossy())));
    }
    #[cfg(kiln_kernels)]
    return Ok(FATBIN.to_vec());
    #[cfg(not(kiln_kernels))]
    Err(GpuError::NoKernels)
}

/// Mirrors `struct Scale` in cuda/ntt.cuh: optional per-element factor
/// hi[e >> bits] * lo[e & (2^bits-1)], e = i or bitrev(i).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Scale {
    pub hi: u64,
    pub lo: u64,
    pub bits: u32,
    pub rev: u32,
}
// SAFETY: plain #[repr(C)] data whose layout matches the CUDA struct.
unsafe impl DeviceRepr for Scale {}

/// Mirrors `struct Selection` in cuda/msm.cuh (density bitmap; 0 = dense).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Selection {
    pub bitmap: u64,
    pub prefix: u64,
}
// SAFETY: as for Scale.
unsafe impl DeviceRepr for Selection {}

/// Mirrors `Csr<Id>` in cuda/r1cs.cuh: one matrix's row offsets, columns
/// and coefficient ids (device addresses; the id width is the kernel's).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Csr {
    pub start: u64,
    pub cols: u64,
    pub ids: u64,
}
// SAFETY: as for Scale.
unsafe impl DeviceRepr for Csr {}

macro_rules! kernels {
    ($($field:ident),* $(,)?) => {
        pub struct Kernels { $(pub $field: CudaFunction,)* }
        impl Kernels {
            pub fn load(ctx: &Arc<CudaContext>, fatbin: Vec<u8>) -> Result<Self, GpuError> {
                let module = ctx.load_module(Ptx::from_binary(fatbin))?;
                Ok(Self { $($field: module.load_function(concat!("kiln_", stringify!($field)))?,)* })
            }

            /// The (PTX, binary) versions the first kernel was loaded with
            /// (the driver loads one code of the fatbin for all of them).
            pub fn ptx_and_binary_version(&self) -> Result<(i32, i32), GpuError> {
                let f = [$(&self.$field),*][0];
                Ok((f.ptx_version()?, f.binary_version()?))
            }
        }
    };
}

kernels!(
    ntt_dif, ntt_dit, ntt_twiddles, bitrev, ab_minus_c,
    msm_classify, msm_count, msm_scan, msm_scatter,
    msm_bucket_acc_g1, msm_bucket_fix_g1, msm_bucket_reduce_g1, msm_sum_g1, msm_ones_g1,
    msm_bucket_acc_g2, msm_bucket_fix_g2, msm_bucket_reduce_g2, msm_sum_g2, msm_ones_g2,
    points_from_raw_g1, points_from_raw_g2,
    fixed_base_g1, fixed_base_g2,
    r1cs_products_u8, r1cs_products_u16, r1cs_products_u32,
    r1cs_products_warp_u8, r1cs_products_warp_u16, r1cs_products_warp_u32,
    // Pasta (cuda/pasta_kernels.cuh): scalar sides and NTTs per field, points per curve.
    msm_classify_pasta_fp, msm_count_pasta_fp, msm_scatter_pasta_fp,
    msm_classify_pasta_fq, msm_count_pasta_fq, msm_scatter_pasta_fq,
    msm_bucket_acc_pallas, msm_bucket_fix_pallas, msm_bucket_reduce_pallas, msm_sum_pallas, msm_ones_pallas,
    msm_bucket_acc_vesta, msm_bucket_fix_vesta, msm_bucket_reduce_vesta, msm_sum_vesta, msm_ones_vesta,
    ntt_dif_pasta_fp, ntt_dit_pasta_fp, ntt_twiddles_pasta_fp,
    ntt_dif_pasta_fq, ntt_dit_pasta_fq, ntt_twiddles_pasta_fq,
);

/// One kernel argument. Device buffers are passed as raw addresses (u64),
/// which is what a `T*` parameter is.
pub(crate) enum Arg {
    U32(u32),
    U64(u64),
    Scale(Scale),
    Sel(Selection),
    Csr(Csr),
}

/// Launches `f` with `args` in order on `stream`.
///
/// SAFETY (for callers, hence `unsafe fn`): `args` must match the kernel's
/// parameter list in cuda/ exactly, every pointer must address a live device
/// allocation large enough for the launch geometry, and the buffers must
/// outlive the work on `stream` (callers synchronize before freeing).
pub(crate) unsafe fn launch(
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    grid: u32,
    block: u32,
    args: &[Arg],
) -> Result<(), GpuError> {
    if grid == 0 {
        return Ok(());
    }
    let mut b = stream.launch_builder(f);
    for a in args {
        match a {
            Arg::U32(v) => b.arg(v),
            Arg::U64(v) => b.arg(v),
            Arg::Scale(v) => b.arg(v),
            Arg::Sel(v) => b.arg(v),
            Arg::Csr(v) => b.arg(v),
        };
    }
    let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
    b.launch(cfg)?;
    Ok(())
}

/// Grid size for `n` threads in blocks of `block`.
pub(crate) fn blocks(n: usize, block: u32) -> u32 {
    n.div_ceil(block as usize) as u32
}

/// Raw device address of a buffer (event tracking is off, see device.rs).
pub(crate) fn raw<T>(buf: &cudarc::driver::CudaSlice<T>, s: &Arc<CudaStream>) -> u64 {
    use cudarc::driver::DevicePtr;
    buf.device_ptr(s).0
}
