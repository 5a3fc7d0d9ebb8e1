//! The groups kiln's kernels work in, behind sealed traits, so that each
//! MSM, copy and fixed-base entry point is one generic function:
//! `dev.msm::<G1Projective>(..)`, `dev.msm::<pallas::Point>(..)` run the
//! same host code over each group's kernels (cuda/, templated per curve).
//!
//! [`DeviceGroup`] (MSM, point copies): BLS12-381's G1 and G2 and the Pasta
//! curves' Pallas and Vesta. [`ParamsGroup`] (points read from a `.params`
//! file: streamed MSMs, fixed-base setup): BLS12-381's only.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use pasta_curves::{pallas, vesta};

use crate::field::DeviceField;
use crate::msm::{g1_from_xyzz, g2_from_xyzz, pasta_from_xyzz};
use crate::stream_check;

/// A group whose points kiln's CUDA MSM kernels handle. Sealed: a new group
/// needs its kernels first. Its scalars are `group::Group`'s associated
/// `Scalar` (blstrs::Scalar for G1/G2, pasta_curves' Fq for Pallas and Fp
/// for Vesta), a [`DeviceField`]: MSMs take `DeviceScalars<G::Scalar>`.
pub trait DeviceGroup: sealed::Kernels + group::Group<Scalar: DeviceField> {
    /// Its affine points as the host holds them (blst's or pasta_curves'
    /// layout, which the kernels read as they are).
    type Affine: sealed::Limbs + Copy + Default + Send + Sync + 'static;
    /// "G1", "G2", "Pallas", "Vesta", for messages.
    const NAME: &'static str;
}

/// A BLS12-381 group whose points kiln reads from Groth16 `.params` files
/// (uncompressed, big-endian) and converts on the device: streamed MSMs
/// ([`crate::GpuDevice::msm_streamed`]) and fixed-base setups. The Pasta
/// curves have no such kernels.
pub trait ParamsGroup: DeviceGroup + group::Group<Scalar = blstrs::Scalar> + sealed::ParamsKernels {
    /// Bytes of one point in the `.params` encoding (uncompressed).
    const RAW_BYTES: usize;
}

impl DeviceGroup for G1Projective {
    type Affine = G1Affine;
    const NAME: &'static str = "G1";
}
impl ParamsGroup for G1Projective {
    const RAW_BYTES: usize = 96;
}

impl DeviceGroup for G2Projective {
    type Affine = G2Affine;
    const NAME: &'static str = "G2";
}
impl ParamsGroup for G2Projective {
    const RAW_BYTES: usize = 192;
}

impl DeviceGroup for pallas::Point {
    type Affine = pallas::Affine;
    const NAME: &'static str = "Pallas";
}

impl DeviceGroup for vesta::Point {
    type Affine = vesta::Affine;
    const NAME: &'static str = "Vesta";
}

pub(crate) mod sealed {
    use cudarc::driver::CudaFunction;

    pub use crate::buffers::Limbs;
    use crate::launch::Kernels as Loaded;
    use crate::stream_check::CheckCurve;

    /// A group's point-side MSM kernels (see cuda/msm.cuh).
    pub struct GroupKernels<'a> {
        pub acc: &'a CudaFunction,
        pub fix: &'a CudaFunction,
        pub reduce: &'a CudaFunction,
        pub sum: &'a CudaFunction,
        pub ones: &'a CudaFunction,
        /// u64 words of one XYZZ point (a bucket or window sum).
        pub xyzz_words: usize,
    }

    pub trait Kernels: group::Group + Copy + Send + Sync + 'static {
        fn kernels(k: &Loaded) -> GroupKernels<'_>;
        /// An XYZZ point's words (from a window sum) as a projective point.
        fn from_xyzz(words: &[u64]) -> Self;
    }

    /// The `.params` kernels of a BLS12-381 group (points.cuh, setup.cuh).
    pub trait ParamsKernels: Kernels {
        /// `.params` points -> device affine points.
        fn from_raw(k: &Loaded) -> &CudaFunction;
        fn fixed_base(k: &Loaded) -> &CudaFunction;
        /// What `KILN_STREAM_CHECK` needs of the group.
        fn check_curve() -> CheckCurve<Self>;
    }
}

/// A group's point kernels (kiln_msm_<pass>_<suffix>) and its XYZZ size.
macro_rules! group_kernels {
    ($t:ty, $words:expr, $from:expr, $acc:ident, $fix:ident, $reduce:ident, $sum:ident, $ones:ident) => {
        impl sealed::Kernels for $t {
            fn kernels(k: &crate::launch::Kernels) -> sealed::GroupKernels<'_> {
                sealed::GroupKernels { acc: &k.$acc, fix: &k.$fix, reduce: &k.$reduce, sum: &k.$sum, ones: &k.$ones, xyzz_words: $words }
            }
            fn from_xyzz(words: &[u64]) -> Self {
                $from(words)
            }
        }
    };
}

group_kernels!(G1Projective, 24, g1_from_xyzz, msm_bucket_acc_g1, msm_bucket_fix_g1, msm_bucket_reduce_g1, msm_sum_g1, msm_ones_g1);
group_kernels!(G2Projective, 48, g2_from_xyzz, msm_bucket_acc_g2, msm_bucket_fix_g2, msm_bucket_reduce_g2, msm_sum_g2, msm_ones_g2);
group_kernels!(
    pallas::Point, 16, pasta_from_xyzz::<pallas::Point>,
    msm_bucket_acc_pallas, msm_bucket_fix_pallas, msm_bucket_reduce_pallas, msm_sum_pallas, msm_ones_pallas
);
group_kernels!(
    vesta::Point, 16, pasta_from_xyzz::<vesta::Point>,
    msm_bucket_acc_vesta, msm_bucket_fix_vesta, msm_bucket_reduce_vesta, msm_sum_vesta, msm_ones_vesta
);

impl sealed::ParamsKernels for G1Projective {
    fn from_raw(k: &crate::launch::Kernels) -> &cudarc::driver::CudaFunction {
        &k.points_from_raw_g1
    }
    fn fixed_base(k: &crate::launch::Kernels) -> &cudarc::driver::CudaFunction {
        &k.fixed_base_g1
    }
    fn check_curve() -> stream_check::CheckCurve<Self> {
        stream_check::g1()
    }
}

impl sealed::ParamsKernels for G2Projective {
    fn from_raw(k: &crate::launch::Kernels) -> &cudarc::driver::CudaFunction {
        &k.points_from_raw_g2
    }
    fn fixed_base(k: &crate::launch::Kernels) -> &cudarc::driver::CudaFunction {
        &k.fixed_base_g2
    }
    fn check_curve() -> stream_check::CheckCurve<Self> {
        stream_check::g2()
    }
}
