// Fixed-base multiplication for test setups made on the device: out[i] =
// s_i * G for one fixed generator G, from a table of byte windows
// table[k * 256 + d] = d * 2^(8k) * G (entry d = 0 unused). A point costs
// at most 32 mixed additions and one inversion (to make it affine, since
// the MSM kernels read affine points) instead of a full scalar
// multiplication; a test setup of a 32 GiB PoRep partition is ~430 M such
// points. The table of a G1 generator is 786 KB and stays in L2.
//
// Scalars are blstrs' Montgomery form; a zero scalar gives the point at
// infinity, written as all-zero coordinates (blst's encoding).
#pragma once
#include "field.cuh"
#include "curve.cuh"

// a^(p-2) = a^-1 (Fermat), left to right over the bits of p - 2. The
// exponent's limbs are p's with 2 taken from the lowest (no borrow: p's
// lowest limb is 0xffffaaab). The branch is uniform across a warp.
__device__ __noinline__ Fp fp_inverse(const Fp& a) {
    Fp r = Fp::one();
    for (int i = 11; i >= 0; i--) {
        const uint32_t e = KILN_FP_MOD[i] - (i == 0 ? 2u : 0u);
        for (int b = 31; b >= 0; b--) {
            r = r.sqr();
            if ((e >> b) & 1) r = r * a;
        }
    }
    return r;
}

// (c0 + c1 u)^-1 = (c0 - c1 u) / (c0^2 + c1^2), as u^2 = -1.
__device__ __noinline__ Fp2 fp2_inverse(const Fp2& a) {
    const Fp t = fp_inverse(a.c0.sqr() + a.c1.sqr());
    return {a.c0 * t, (a.c1 * t).neg()};
}

__device__ __forceinline__ Fp field_inverse(const Fp& a) { return fp_inverse(a); }
__device__ __forceinline__ Fp2 field_inverse(const Fp2& a) { return fp2_inverse(a); }

// XYZZ -> affine: x = X / ZZ, y = Y / ZZZ with ZZ = Z^2, ZZZ = Z^3, so one
// inversion serves both: 1/ZZ = (ZZ / ZZZ)^2.
template <class F>
__device__ __forceinline__ Affine<F> to_affine(const Xyzz<F>& p) {
    if (p.is_inf()) return {F::zero(), F::zero()};
    const F zzz_inv = field_inverse(p.ZZZ);
    const F zz_inv = (zzz_inv * p.ZZ).sqr();
    return {p.X * zz_inv, p.Y * zzz_inv};
}

template <class F>
__device__ __forceinline__ void fixed_base(const Affine<F>* table, const Fr* scalars, Affine<F>* out, uint32_t n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Fr s = scalars[i].from_mont();
    Xyzz<F> acc = Xyzz<F>::inf();
#pragma unroll 1
    for (int k = 0; k < 32; k++) {
        const uint32_t d = (s.v[k >> 2] >> ((k & 3) * 8)) & 0xffu;
        if (d) acc.add_affine(table[k * 256 + d]);
    }
    out[i] = to_affine(acc);
}

extern "C" __global__ void kiln_fixed_base_g1(const Affine<Fp>* table, const Fr* scalars, Affine<Fp>* out, uint32_t n) {
    fixed_base(table, scalars, out, n);
}

extern "C" __global__ void kiln_fixed_base_g2(const Affine<Fp2>* table, const Fr* scalars, Affine<Fp2>* out, uint32_t n) {
    fixed_base(table, scalars, out, n);
}
