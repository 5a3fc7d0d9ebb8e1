// MSM and NTT kernels over the Pasta curves, instantiated from the same
// templates as BLS12-381's (msm.cuh, ntt.cuh, curve.cuh).
//
// Both curves are y^2 = x^3 + 5 (a = 0), so curve.cuh's XYZZ formulas hold
// as they are; pasta_curves writes the affine point at infinity as (0, 0),
// which is never on either curve (b != 0) - curve.cuh's all-zero test.
//
// Names: scalar-side MSM kernels and NTTs per field (_pasta_fp: Vesta's
// scalars, _pasta_fq: Pallas's scalars), point-side MSM kernels per curve
// (_pallas: points over Fp, _vesta: points over Fq). kiln_bitrev serves
// every 8-limb field. Fixed-base and .params conversions stay BLS-only.
#pragma once
#include "pasta.cuh"
#include "msm.cuh"
#include "ntt.cuh"

KILN_MSM_SCALARS(_pasta_fp, PastaFp)
KILN_MSM_SCALARS(_pasta_fq, PastaFq)

// 8-limb coordinates like BLS12-381's Fr, fewer than G1's 12: G1's register
// budget (4 blocks of 128 threads per SM) and inlined point additions.
// Not yet tuned on a GPU.
#ifndef KILN_MSM_ACC_MIN_BLOCKS_PASTA
#define KILN_MSM_ACC_MIN_BLOCKS_PASTA 4
#endif
KILN_MSM_CURVE(pallas, PastaFp, true, KILN_MSM_ACC_MIN_BLOCKS_PASTA)
KILN_MSM_CURVE(vesta, PastaFq, true, KILN_MSM_ACC_MIN_BLOCKS_PASTA)

KILN_NTT_FIELD(_pasta_fp, PastaFp)
KILN_NTT_FIELD(_pasta_fq, PastaFq)
