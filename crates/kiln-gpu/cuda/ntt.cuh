// Fr NTT kernels.
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

struct Scale {
    const Fr* hi;   // null: no scaling
    const Fr* lo;
    uint32_t bits;
    uint32_t rev;   // index by bitrev(i) instead of i
};

__device__ __forceinline__ uint32_t bitrev(uint32_t i, uint32_t log_n) {
    return log_n == 0 ? 0 : (__brev(i) >> (32 - log_n));
}

__device__ __forceinline__ Fr apply_scale(const Fr& x, const Scale& s, uint32_t i, uint32_t log_n) {
    uint32_t e = s.rev ? bitrev(i, log_n) : i;
    Fr f = s.hi[e >> s.bits] * s.lo[e & ((1u << s.bits) - 1)];
    return x * f;
}

template <bool DIT>
__device__ __forceinline__ void ntt_pass(Fr* __restrict__ data, const Fr* __restrict__ tw,
                                         uint32_t log_n, uint32_t lo, uint32_t k, uint32_t t,
                                         Scale pre, Scale post) {
    __shared__ Fr tile[1 << KILN_NTT_TILE_LOG];
    const uint32_t E = 1u << (k + t);
    const uint32_t b = blockIdx.x;
    // Block bits fill global bits [t, lo) then [lo+k, log_n).
    const uint32_t mid_bits = lo - t;
    const uint32_t base = ((b & ((1u << mid_bits) - 1)) << t) | ((b >> mid_bits) << (lo + k));
    const uint32_t tmask = (1u << t) - 1;
    auto gidx = [&](uint32_t e) -> uint32_t { return base | (e & tmask) | ((e >> t) << lo); };

    for (uint32_t e = threadIdx.x; e < E; e += blockDim.x) {
        uint32_t g = gidx(e);
        Fr x = data[g];
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
            Fr w = tw[(size_t)j << (log_n - 1 - p)];
            Fr x = tile[i0], y = tile[i1];
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
        Fr x = tile[e];
        if (post.hi) x = apply_scale(x, post, g, log_n);
        data[g] = x;
    }
}

extern "C" __global__ void kiln_ntt_dif(Fr* data, const Fr* tw, uint32_t log_n, uint32_t lo, uint32_t k,
                                        uint32_t t, Scale pre, Scale post) {
    ntt_pass<false>(data, tw, log_n, lo, k, t, pre, post);
}

extern "C" __global__ void kiln_ntt_dit(Fr* data, const Fr* tw, uint32_t log_n, uint32_t lo, uint32_t k,
                                        uint32_t t, Scale pre, Scale post) {
    ntt_pass<true>(data, tw, log_n, lo, k, t, pre, post);
}

// tw[j] = w^j for j < count, from pows[b] = w^(2^b).
extern "C" __global__ void kiln_ntt_twiddles(Fr* tw, const Fr* pows, uint32_t count) {
    uint32_t j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    Fr acc = Fr::one();
    for (uint32_t bit = 0; (j >> bit) != 0; bit++)
        if ((j >> bit) & 1) acc = acc * pows[bit];
    tw[j] = acc;
}

// In-place bit-reversal permutation: each pair is swapped by its lower index.
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
