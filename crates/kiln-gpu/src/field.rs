//! The scalar fields kiln's kernels work in, behind one sealed trait, so the
//! MSM's scalar passes and the NTT are one generic function each:
//! BLS12-381's Fr (blstrs::Scalar) and the Pasta scalar fields
//! (pasta_curves' Fp, Vesta's scalars, and Fq, Pallas's scalars), each
//! with its own kernels (cuda/msm.cuh's KILN_MSM_SCALARS, ntt.cuh's
//! KILN_NTT_FIELD, instantiated per field).
//!
//! All three keep four little-endian u64 limbs in Montgomery form with
//! R = 2^256, fully reduced - exactly what the kernels read - so buffers
//! are byte copies. tests/pasta_consts.rs checks cuda/pasta.cuh's constants
//! against pasta_curves.
use ff::PrimeField;

use crate::buffers::Limbs;

/// A field whose elements kiln's kernels handle as MSM scalars and NTT
/// data. Sealed: a new field needs its kernels first.
pub trait DeviceField: PrimeField + Limbs + sealed::FieldKernels + Default + Send + Sync + 'static {
    /// For messages: "Fr" (BLS12-381), "Pasta Fp", "Pasta Fq".
    const NAME: &'static str;
}

impl DeviceField for blstrs::Scalar {
    const NAME: &'static str = "Fr";
}
impl DeviceField for pasta_curves::Fp {
    const NAME: &'static str = "Pasta Fp";
}
impl DeviceField for pasta_curves::Fq {
    const NAME: &'static str = "Pasta Fq";
}

pub(crate) mod sealed {
    use cudarc::driver::CudaFunction;

    use crate::launch::Kernels as Loaded;

    /// A field's scalar-side MSM kernels (cuda/msm.cuh).
    pub struct ScalarKernels<'a> {
        pub classify: &'a CudaFunction,
        pub count: &'a CudaFunction,
        pub scatter: &'a CudaFunction,
    }

    /// A field's NTT kernels (cuda/ntt.cuh).
    pub struct NttKernels<'a> {
        pub dif: &'a CudaFunction,
        pub dit: &'a CudaFunction,
        pub twiddles: &'a CudaFunction,
    }

    pub trait FieldKernels {
        /// Tells the fields apart in the device's NTT table cache.
        const ID: u8;
        fn scalar_kernels(k: &Loaded) -> ScalarKernels<'_>;
        fn ntt_kernels(k: &Loaded) -> NttKernels<'_>;
    }
}

/// One field's sealed::FieldKernels from its kernel names' suffix.
macro_rules! field_kernels {
    ($t:ty, $id:literal, $classify:ident, $count:ident, $scatter:ident, $dif:ident, $dit:ident, $tw:ident) => {
        impl sealed::FieldKernels for $t {
            const ID: u8 = $id;
            fn scalar_kernels(k: &crate::launch::Kernels) -> sealed::ScalarKernels<'_> {
                sealed::ScalarKernels { classify: &k.$classify, count: &k.$count, scatter: &k.$scatter }
            }
            fn ntt_kernels(k: &crate::launch::Kernels) -> sealed::NttKernels<'_> {
                sealed::NttKernels { dif: &k.$dif, dit: &k.$dit, twiddles: &k.$tw }
            }
        }
    };
}

field_kernels!(blstrs::Scalar, 0, msm_classify, msm_count, msm_scatter, ntt_dif, ntt_dit, ntt_twiddles);
field_kernels!(
    pasta_curves::Fp, 1, msm_classify_pasta_fp, msm_count_pasta_fp, msm_scatter_pasta_fp,
    ntt_dif_pasta_fp, ntt_dit_pasta_fp, ntt_twiddles_pasta_fp
);
field_kernels!(
    pasta_curves::Fq, 2, msm_classify_pasta_fq, msm_count_pasta_fq, msm_scatter_pasta_fq,
    ntt_dif_pasta_fq, ntt_dit_pasta_fq, ntt_twiddles_pasta_fq
);

/// Primitive 2^log_n-th root of unity of `F`: `F::ROOT_OF_UNITY` (of order
/// 2^S) squared S - log_n times, as bellperson's and halo2's domains take it.
pub fn root_of_unity_of<F: PrimeField>(log_n: u32) -> F {
    assert!(log_n <= F::S, "no 2^{log_n}-th root of unity in a field of two-adicity {}", F::S);
    let mut w = F::ROOT_OF_UNITY;
    for _ in log_n..F::S {
        w = w.square();
    }
    w
}
