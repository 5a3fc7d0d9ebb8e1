//! The groups kiln's kernels work in, behind one sealed trait, so that each
//! MSM, copy and fixed-base entry point is one generic function:
//! `dev.msm::<G1Projective>(..)` and `dev.msm::<G2Projective>(..)` run the
//! same host code over each group's kernels (cuda/, templated per curve).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};

use crate::msm::{g1_from_xyzz, g2_from_xyzz};
use crate::stream_check;

/// A group whose points kiln's CUDA kernels handle: BLS12-381's G1 and G2.
/// Sealed: a new group needs its kernels first.
pub trait DeviceGroup: sealed::Kernels {
    /// Its affine points as the host holds them (blst's layout, which the
    /// kernels read as they are).
    type Affine: sealed::Limbs + Copy + Default + Send + Sync + 'static;
    /// "G1" or "G2", for messages.
    const NAME: &'static str;
    /// Bytes of one point in the `.params` encoding (uncompressed).
    const RAW_BYTES: usize;
}

impl DeviceGroup for G1Projective {
    type Affine = G1Affine;
    const NAME: &'static str = "G1";
    const RAW_BYTES: usize = 96;
}

impl DeviceGroup for G2Projective {
    type Affine = G2Affine;
    const NAME: &'static str = "G2";
    const RAW_BYTES: usize = 192;
}

pub(crate) mod sealed {
    use cudarc::driver::CudaFunction;

    pub use crate::buffers::Limbs;
    use crate::launch::Kernels as Loaded;
    use crate::stream_check::CheckCurve;

    /// A group's kernels and conversions (see cuda/msm.cuh, setup.cuh).
    pub struct GroupKernels<'a> {
        pub acc: &'a CudaFunction,
        pub fix: &'a CudaFunction,
        pub reduce: &'a CudaFunction,
        pub sum: &'a CudaFunction,
        pub ones: &'a CudaFunction,
        /// `.params` points -> device affine points.
        pub from_raw: &'a CudaFunction,
        pub fixed_base: &'a CudaFunction,
        /// u64 words of one XYZZ point (a bucket or window sum).
        pub xyzz_words: usize,
    }

    pub trait Kernels: group::Group + Copy + Send + Sync + 'static {
        fn kernels(k: &Loaded) -> GroupKernels<'_>;
        /// An XYZZ point's words (from a window sum) as a projective point.
        fn from_xyzz(words: &[u64]) -> Self;
        /// What `KILN_STREAM_CHECK` needs of the group.
        fn check_curve() -> CheckCurve<Self>;
    }
}

impl sealed::Kernels for G1Projective {
    fn kernels(k: &crate::launch::Kernels) -> sealed::GroupKernels<'_> {
        sealed::GroupKernels {
            acc: &k.msm_bucket_acc_g1,
            fix: &k.msm_bucket_fix_g1,
            reduce: &k.msm_bucket_reduce_g1,
            sum: &k.msm_sum_g1,
            ones: &k.msm_ones_g1,
            from_raw: &k.points_from_raw_g1,
            fixed_base: &k.fixed_base_g1,
            xyzz_words: 24,
        }
    }
    fn from_xyzz(words: &[u64]) -> Self {
        g1_from_xyzz(words)
    }
    fn check_curve() -> stream_check::CheckCurve<Self> {
        stream_check::g1()
    }
}

impl sealed::Kernels for G2Projective {
    fn kernels(k: &crate::launch::Kernels) -> sealed::GroupKernels<'_> {
        sealed::GroupKernels {
            acc: &k.msm_bucket_acc_g2,
            fix: &k.msm_bucket_fix_g2,
            reduce: &k.msm_bucket_reduce_g2,
            sum: &k.msm_sum_g2,
            ones: &k.msm_ones_g2,
            from_raw: &k.points_from_raw_g2,
            fixed_base: &k.fixed_base_g2,
            xyzz_words: 48,
        }
    }
    fn from_xyzz(words: &[u64]) -> Self {
        g2_from_xyzz(words)
    }
    fn check_curve() -> stream_check::CheckCurve<Self> {
        stream_check::g2()
    }
}
