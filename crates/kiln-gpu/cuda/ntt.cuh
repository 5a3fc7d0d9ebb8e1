// NTT kernels, templated on the field: Fr's (the names kiln has always
// loaded) and, in pasta.cuh, the Pasta scalar fields'. Nothing here depends
// on the modulus: roots, twiddle powers and scalings come from the host.
//
// A transform of n = 2^log_n elements runs as a few passes; each pass loads a
// tile of 2^(k+t) elements into shared memory, runs k radix-2 stages on it
// and writes it back. The tile's k "butterfly bits" are global index bits
// [lo, lo+k); its t low bits [0, t) make each row a run of 2^t consecutive
// elements so global loads are coalesced. The host plans the passes
// (kiln-gpu's ntt::plan_passes).
//
// DIF (Gentleman-Sande) maps natural order to bit-reversed order, DIT
// (Cooley-Tukey) maps bit-reversed order to natural order, so the Groth16 H
// pipeline chains inverse-DIF -> forward-DIT without permuting.
//
// Twiddles: tw[j] = w^j for j < n/2, w a primitive n-th root (or its inverse);
// the twiddle of stage bit p for a pair whose lower index has low bits j is
// w_{2^(p+1)}^j = tw[j << (log_n - 1 - p)].
//
// Optional scaling on load (first pass) and on store (last pass):
// element i is multiplied by hi[e >> bits] * lo[e & (2^bits - 1)], e = i or
// bitrev(i): coset shifts g^i and the 1/n of inverse transforms cost no pass.
#pragma once
#include "field.cuh"

#define KILN_NTT_TILE_LOG 10

template <class F>
struct ScaleOf {
    const F* hi;    // null: no scaling
    const F* lo;
    uint32_t bits;
    uint32_t rev;   // index by bitrev(i) instead of i
};
using Scale = ScaleOf<Fr>;

__device__ __forceinline__ uint32_t bitrev(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

template <class F>
__device__ __forceinline__ F apply_scale(const F& x, const ScaleOf<F>& s, uint32_t i, uint32_t log_n) {
    uint32_t e = s.rev ? bitrev(i, log_n) : i;
    F f = s.hi[e >> s.bits] * s.lo[e & ((1u << s.bits) - 1)];
    return x * f;
}

template <class F, bool DIT>
__device__ __forceinline__ void ntt_pass(F* __restrict__ data, const F* __restrict__ tw,
                                         uint32_t log_n, uint32_t lo, uint32_t k, uint32_t t,
                                         ScaleOf<F> pre, ScaleOf<F> post) {
    __shared__ F tile[1 << KILN_NTT_TILE_LOG];
    const uint32_t E = 1u << (k + t);
    const uint32_t b = blockIdx.x;
    // Block bits fill global bits [t, lo) then [lo+k, log_n).
    const uint32_t mid_bits = lo - t;
    const uint32_t base = ((b & ((1u << mid_bits) - 1)) << t) | ((b >> mid_bits) << (lo + k));
    const uint32_t tmask = (1u << t) - 1;
    auto gidx = [&](uint32_t e) -> uint32_t { return base | (e & tmask) | ((e >> t) << lo); };

    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
        uint32_t g = gidx(e);
        F x = data[g];
        if (pre.hi) x = apply_scale(x, pre, g, log_n);
        tile[e] = x;
    }
    __syncthreads();

    for (uint32_t s = 0; s < k; s++) {
        const uint32_t r = DIT ? s : (k - 1 - s);  // tile row bit of this stage
        const uint32_t p = lo + r;                  // global bit
        const uint32_t lb = t + r;                  // tile bit
        const uint32_t lmask = (1u << lb) - 1;
        for (uint32_t bf = threadIdx.x; bf < E / 2; bf += blockDim.x) {
            uint32_t i0 = ((bf & ~lmask) << 1) | (bf & lmask);
            uint32_t i1 = i0 | (1u << lb);
            uint32_t j = gidx(i0) & ((1u << p) - 1);
            F w = tw[(size_t)j << (log_n - 1 - p)];
            F x = tile[i0], y = tile[i1];
            if (DIT) {
                y = y * w;
                tile[i0] = x + y;
                tile[i1] = x - y;
            } else {
                tile[i0] = x + y;
                tile[i1] = (x - y) * w;
            }
        }
        __syncthreads();
    }

    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
        uint32_t g = gidx(e);
        F x = tile[e];
        if (post.hi) x = apply_scale(x, post, g, log_n);
        data[g] = x;
    }
}

// tw[j] = w^j for j < count, from pows[b] = w^(2^b).
template <class F>
__device__ __forceinline__ void ntt_twiddles(F* tw, const F* pows, uint32_t count) {
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    F acc = F::one();
    for (uint32_t bit = 0; (j >> bit) != 0; bit++)
        if ((j >> bit) & 1) acc = acc * pows[bit];
    tw[j] = acc;
}

// The transform kernels of one field, named kiln_ntt_<kind><SUFFIX> (Fr's
// with an empty suffix).
#define KILN_NTT_FIELD(SUFFIX, F)                                                                            \
    extern "C" __global__ void kiln_ntt_dif##SUFFIX(F* data, const F* tw, uint32_t log_n, uint32_t lo,        \
                                                   uint32_t k, uint32_t t, ScaleOf<F> pre, ScaleOf<F> post) { \
        ntt_pass<F, false>(data, tw, log_n, lo, k, t, pre, post);                                            \
    }                                                                                                       \
    extern "C" __global__ void kiln_ntt_dit##SUFFIX(F* data, const F* tw, uint32_t log_n, uint32_t lo,        \
                                                   uint32_t k, uint32_t t, ScaleOf<F> pre, ScaleOf<F> post) { \
        ntt_pass<F, true>(data, tw, log_n, lo, k, t, pre, post);                                             \
    }                                                                                                       \
    extern "C" __global__ void kiln_ntt_twiddles##SUFFIX(F* tw, const F* pows, uint32_t count) {             \
        ntt_twiddles<F>(tw, pows, count);                                                                    \
    }

KILN_NTT_FIELD(, Fr)

// In-place bit-reversal permutation: each pair is swapped by its lower index.
// It only moves 32-byte elements, so it serves every 8-limb field.
extern "C" __global__ void kiln_bitrev(Fr* data, uint32_t log_n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (1u << log_n)) return;
    uint32_t j = bitrev(i, log_n);
    if (i < j) {
        Fr x = data[i], y = data[j];
        data[i] = y;
        data[j] = x;
    }
}

// a[i] = (a[i] * b[i] - c[i]) * k: a*b - c on the coset, divided by Z there.
extern "C" __global__ void kiln_ab_minus_c(Fr* a, const Fr* b, const Fr* c, const Fr* k, uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    a[i] = (a[i] * b[i] - c[i]) * k[0];
}
