// Pippenger MSM with signed c-bit windows, templated: scalar-side passes on
// the scalar field (KILN_MSM_SCALARS: BLS12-381's Fr, the Pasta fields in
// pasta_kernels.cuh), point-side passes on the curve (KILN_MSM_CURVE: G1,
// G2; Pallas, Vesta).
//
// Scalars come in Montgomery form (blst's, pasta_curves'). Passes, all on the caller's stream:
//  0. kiln_msm_classify: class each scalar (0: skipped, 1: "one", 2:
//                       general), count the general ones and list the points
//                       of the ones. The host reads the counts back and
//                       sizes the window for the general scalars alone:
//                       Filecoin witnesses are mostly bits, and a window
//                       sized for all of them wastes its bucket reduction.
//  1. kiln_msm_count:   count the general scalars falling in each (window,
//                       bucket).
//  2. kiln_msm_scan:    per-window exclusive prefix sums -> bucket offsets.
//  3. kiln_msm_scatter: write each general scalar's point index (sign in bit
//                       31) into its bucket's slot: a counting sort.
//  4. bucket_acc/fix:   threads add up equal chunks of the sorted points
//                       (mixed XYZZ); buckets crossing chunks are fixed up.
//  5. bucket_reduce:    one thread per run of L buckets computes
//                       sum_b (b+1) * bucket_b over its run.
//  6. sum:              sums groups of G consecutive XYZZ points (window
//                       totals, and the partial sums of the ones).
//  7. ones:             sums the listed points whose scalar is 1, every
//                       thread a strided share (they would otherwise pile
//                       into a single bucket).
// Passes 1-6 run once per group of windows (all of them unless their
// buffers would pass the device's share for one MSM): count and scatter
// take the group's first window and carry the signed digits up to it.
// The host combines window totals (Horner in 2^c) with blstrs or pasta_curves.
//
// Density bitmap (optional): scalar i takes part iff bit i of bitmap is set,
// and uses point rank(i) = popcount of bitmap bits below i; prefix[w] holds
// the popcount of words below w (computed on the host).
#pragma once
#include "field.cuh"
#include "curve.cuh"

struct Selection {
    const uint64_t* bitmap;  // null: every scalar, point i for scalar i
    const uint32_t* prefix;
};

// Returns whether scalar i takes part; sets its point index.
__device__ __forceinline__ bool select_point(const Selection& sel, uint32_t i, uint32_t& pidx) {
    if (!sel.bitmap) { pidx = i; return true; }
    uint64_t word = sel.bitmap[i >> 6];
    uint32_t bit = i & 63;
    if (!((word >> bit) & 1)) return false;
    pidx = sel.prefix[i >> 6] + __popcll(word & ((1ull << bit) - 1));
    return true;
}

// Class of scalar i and its plain-integer limbs (zero-padded by 2 limbs so
// every window can read two limbs). S is the scalar field (Fr, or a Pasta
// field: all have 8 limbs and leave the top bit free, so a signed window's
// carry never runs past the padding).
template <class S>
__device__ __forceinline__ uint32_t classify(const S* scalars, const Selection& sel, uint32_t i,
                                             uint32_t& pidx, uint32_t s[S::N + 2]) {
    if (!select_point(sel, i, pidx)) return 0;
    S v = scalars[i].from_mont();
#pragma unroll
    for (int j = 0; j < S::N; j++) s[j] = v.v[j];
    s[S::N] = 0; s[S::N + 1] = 0;
    uint32_t hi = 0;
#pragma unroll
    for (int j = 1; j < S::N; j++) hi |= s[j];
    if (hi == 0 && s[0] == 0) return 0;
    if (hi == 0 && s[0] == 1) return 1;
    return 2;
}

// Signed digit of window w; carry in/out. Returns magnitude (0..2^(c-1)).
__device__ __forceinline__ uint32_t window_digit(const uint32_t* s, uint32_t w, uint32_t c,
                                                 uint32_t& carry, bool& neg) {
    uint32_t off = w * c, limb = off >> 5, sh = off & 31;
    uint64_t two = ((uint64_t)s[limb + 1] << 32) | s[limb];
    uint32_t v = (uint32_t)((two >> sh) & ((1ull << c) - 1)) + carry;
    if (v > (1u << (c - 1))) {
        carry = 1; neg = true;
        return (1u << c) - v;
    }
    carry = 0; neg = false;
    return v;
}

// totals[0] += general scalars, totals[1] += ones; ones[] gets the point
// index of every one (in no particular order: the sum does not care).
template <class S>
__device__ __forceinline__ void msm_classify(const S* scalars, Selection sel, uint32_t n, uint8_t* cls,
                                             uint32_t* totals, uint32_t* ones) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t k = 0, pidx = 0;
    if (i < n) {  // no early return: the whole warp takes part in the ballots
        uint32_t s[S::N + 2];
        k = classify<S>(scalars, sel, i, pidx, s);
        cls[i] = (uint8_t)k;
    }
    // One atomic per warp and class, not one per scalar.
    const uint32_t lane = threadIdx.x & 31;
    const uint32_t general = __ballot_sync(0xffffffffu, k == 2);
    if (lane == 0 && general) atomicAdd(&totals[0], (uint32_t)__popc(general));
    const uint32_t one = __ballot_sync(0xffffffffu, k == 1);
    if (one) {
        uint32_t base = 0;
        if (lane == 0) base = atomicAdd(&totals[1], (uint32_t)__popc(one));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (k == 1) ones[base + __popc(one & ((1u << lane) - 1))] = pidx;
    }
}

// Plain-integer limbs of scalar i, zero-padded as in classify.
template <class S>
__device__ __forceinline__ void plain(const S* scalars, uint32_t i, uint32_t s[S::N + 2]) {
    S v = scalars[i].from_mont();
#pragma unroll
    for (int j = 0; j < S::N; j++) s[j] = v.v[j];
    s[S::N] = 0; s[S::N + 1] = 0;
}

// The carry into window `wfirst`: a pass over windows [wfirst, wfirst +
// windows) starts from the digits below it (see msm_buckets' passes).
__device__ __forceinline__ uint32_t carry_into(const uint32_t* s, uint32_t wfirst, uint32_t c) {
    uint32_t carry = 0;
    for (uint32_t w = 0; w < wfirst; w++) {
        bool neg;
        window_digit(s, w, c, carry, neg);
    }
    return carry;
}

// Counts of the pass's windows [wfirst, wfirst + windows), indexed from
// its first window.
template <class S>
__device__ __forceinline__ void msm_count(const S* scalars, const uint8_t* cls, uint32_t n, uint32_t c,
                                          uint32_t wfirst, uint32_t windows, uint32_t* counts) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || cls[i] != 2) return;
    uint32_t s[S::N + 2];
    plain<S>(scalars, i, s);
    const uint32_t B = 1u << (c - 1);
    uint32_t carry = carry_into(s, wfirst, c);
    for (uint32_t w = 0; w < windows; w++) {
        bool neg;
        uint32_t d = window_digit(s, wfirst + w, c, carry, neg);
        if (d) atomicAdd(&counts[(size_t)w * B + d - 1], 1u);
    }
}

// One block (1024 threads) per window: exclusive scan of that window's B counts.
extern "C" __global__ void kiln_msm_scan(const uint32_t* counts, uint32_t* offsets, uint32_t* cursor, uint32_t B) {
    __shared__ uint32_t part[1024];
    const uint32_t* cw = counts + (size_t)blockIdx.x * B;
    uint32_t per = (B + blockDim.x - 1) / blockDim.x;
    uint32_t lo = threadIdx.x * per, hi = min(lo + per, B);
    uint32_t sum = 0;
    for (uint32_t b = lo; b < hi; b++) sum += cw[b];
    part[threadIdx.x] = sum;
    __syncthreads();
    // Hillis-Steele inclusive scan of the per-thread sums.
    for (uint32_t d = 1; d < blockDim.x; d <<= 1) {
        uint32_t x = threadIdx.x >= d ? part[threadIdx.x - d] : 0;
        __syncthreads();
        part[threadIdx.x] += x;
        __syncthreads();
    }
    uint32_t run = part[threadIdx.x] - sum;
    for (uint32_t b = lo; b < hi; b++) {
        size_t g = (size_t)blockIdx.x * B + b;
        offsets[g] = run;
        cursor[g] = run;
        run += cw[b];
    }
}

// Window wfirst + w's sorted list starts at sorted + w * stride (stride:
// the number of general scalars, which no window exceeds). Windows go in batches of
// KILN_MSM_SCATTER_BATCH: a batch's atomics are all issued before the
// first write that waits for one's answer (with 1, each write waits for
// its atomic's round trip; 8 measured 1 % faster on G1 2^24, within noise).
#ifndef KILN_MSM_SCATTER_BATCH
#define KILN_MSM_SCATTER_BATCH 8
#endif
template <class S>
__device__ __forceinline__ void msm_scatter(const S* scalars, Selection sel, const uint8_t* cls, uint32_t n,
                                            uint32_t c, uint32_t wfirst, uint32_t windows, uint32_t stride,
                                            uint32_t* cursor, uint32_t* sorted) {
    constexpr uint32_t BATCH = KILN_MSM_SCATTER_BATCH;
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || cls[i] != 2) return;
    uint32_t s[S::N + 2], pidx;
    select_point(sel, i, pidx);
    plain<S>(scalars, i, s);
    const uint32_t B = 1u << (c - 1);
    uint32_t carry = carry_into(s, wfirst, c);
    for (uint32_t w0 = 0; w0 < windows; w0 += BATCH) {
        uint32_t pos[BATCH], val[BATCH];
#pragma unroll
        for (uint32_t j = 0; j < BATCH; j++) {
            pos[j] = ~0u;
            const uint32_t w = w0 + j;
            if (w < windows) {
                bool neg;
                uint32_t d = window_digit(s, wfirst + w, c, carry, neg);
                if (d) {
                    pos[j] = atomicAdd(&cursor[(size_t)w * B + d - 1], 1u);
                    val[j] = pidx | (neg ? 0x80000000u : 0u);
                }
            }
        }
#pragma unroll
        for (uint32_t j = 0; j < BATCH; j++)
            if (pos[j] != ~0u) sorted[(size_t)(w0 + j) * stride + pos[j]] = val[j];
    }
}

// The scalar-side kernels of one scalar field, named kiln_msm_<pass><SUFFIX>
// (Fr's with an empty suffix: the names kiln has always loaded).
#define KILN_MSM_SCALARS(SUFFIX, S)                                                                          \
    extern "C" __global__ void kiln_msm_classify##SUFFIX(const S* scalars, Selection sel, uint32_t n,         \
                                                        uint8_t* cls, uint32_t* totals, uint32_t* ones) {     \
        msm_classify<S>(scalars, sel, n, cls, totals, ones);                                                 \
    }                                                                                                       \
    extern "C" __global__ void kiln_msm_count##SUFFIX(const S* scalars, const uint8_t* cls, uint32_t n,      \
                                                     uint32_t c, uint32_t wfirst, uint32_t windows,          \
                                                     uint32_t* counts) {                                     \
        msm_count<S>(scalars, cls, n, c, wfirst, windows, counts);                                           \
    }                                                                                                       \
    extern "C" __global__ void kiln_msm_scatter##SUFFIX(const S* scalars, Selection sel, const uint8_t* cls, \
                                                       uint32_t n, uint32_t c, uint32_t wfirst,              \
                                                       uint32_t windows, uint32_t stride, uint32_t* cursor,  \
                                                       uint32_t* sorted) {                                   \
        msm_scatter<S>(scalars, sel, cls, n, c, wfirst, windows, stride, cursor, sorted);                    \
    }

KILN_MSM_SCALARS(, Fr)

// Bucket accumulation, balanced: window w's sorted entries are cut into
// chunks of K; a thread adds up one chunk. A bucket that lies inside one
// chunk is written straight to buckets[]; a bucket that crosses a chunk edge
// leaves partial sums - in last[] of the chunk where it starts and in first[]
// of every later chunk it covers - which bucket_fix adds up. So a bucket with
// very many points (all scalars equal, say) is spread over many threads.

// Bucket of window-relative position pos: the largest b with off[b] <= pos
// (an empty bucket shares its offset with the next one, so this is the
// non-empty bucket holding pos).
__device__ __forceinline__ uint32_t bucket_of(const uint32_t* off, uint32_t B, uint32_t pos) {
    uint32_t lo = 0, hi = B;  // off[lo] <= pos < off[hi] (off[B] = +inf)
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) >> 1;
        if (off[mid] <= pos) lo = mid; else hi = mid;
    }
    return lo;
}

template <class F, bool INL>
__device__ __forceinline__ void bucket_acc(const Affine<F>* points, const uint32_t* sorted,
                                           const uint32_t* offsets, const uint32_t* counts, uint32_t n,
                                           uint32_t c, uint32_t windows, uint32_t K, Xyzz<F>* buckets,
                                           Xyzz<F>* first, Xyzz<F>* last) {
    const uint32_t B = 1u << (c - 1);
    const uint32_t C = (n + K - 1) / K;  // chunks per window
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= (size_t)windows * C) return;
    const uint32_t w = (uint32_t)(g / C), ch = (uint32_t)(g % C);
    const uint32_t* off = offsets + (size_t)w * B;
    const uint32_t* cnt = counts + (size_t)w * B;
    const uint32_t total = off[B - 1] + cnt[B - 1];
    const uint32_t lo = ch * K;
    if (lo >= total) return;
    const uint32_t hi = min(lo + K, total);
    const uint32_t* list = sorted + (size_t)w * n;
    uint32_t b = bucket_of(off, B, lo);
    uint32_t start = off[b], end = start + cnt[b];
    // Where a finished run goes: see the comment above.
    auto flush = [&](const Xyzz<F>& acc) {
        if (start < lo) first[g] = acc;
        else if (end > hi) last[g] = acc;
        else buckets[(size_t)w * B + b] = acc;
    };
    // One flat loop, one addition per step for every lane: bucket changes
    // are a short divergent flush, so the warp stays converged on the
    // additions (nested per-bucket loops left ~40 % of lanes idle).
    Xyzz<F> acc = Xyzz<F>::inf();
    for (uint32_t pos = lo; pos < hi; pos++) {
        if (pos == end) {
            flush(acc);
            acc = Xyzz<F>::inf();
            b = bucket_of(off, B, pos);
            start = pos;
            end = pos + cnt[b];
        }
        uint32_t e = list[pos];
        Affine<F> q = points[e & 0x7fffffffu];
        if (e >> 31) q.y = q.y.neg();
        if (INL) acc.add_affine_inl(q); else acc.add_affine(q);
    }
    flush(acc);
}

// Adds the partial sums of buckets that cross chunk edges.
template <class F>
__device__ __forceinline__ void bucket_fix(const uint32_t* offsets, const uint32_t* counts, uint32_t n,
                                           uint32_t c, uint32_t windows, uint32_t K, Xyzz<F>* buckets,
                                           const Xyzz<F>* first, const Xyzz<F>* last) {
    const uint32_t B = 1u << (c - 1);
    const uint32_t C = (n + K - 1) / K;
    size_t gb = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (gb >= (size_t)windows * B) return;
    uint32_t cnt = counts[gb];
    if (cnt == 0) return;
    size_t w = gb / B;
    uint32_t start = offsets[gb], end = start + cnt;
    uint32_t c0 = start / K, c1 = (end - 1) / K;
    if (c0 == c1) return;
    const size_t base = w * C;
    Xyzz<F> acc = last[base + c0];
    for (uint32_t k = c0 + 1; k <= c1; k++) acc.add(first[base + k]);
    buckets[gb] = acc;
}

// Segment s of window w covers buckets [s*L, s*L + L) (B is a multiple of L).
template <class F>
__device__ __forceinline__ void bucket_reduce(const Xyzz<F>* buckets, uint32_t B, uint32_t L,
                                              uint32_t segments_total, Xyzz<F>* out) {
    uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= segments_total) return;
    uint32_t S = B / L;
    uint32_t w = g / S, s = g % S;
    const Xyzz<F>* bw = buckets + (size_t)w * B;
    uint32_t start = s * L;
    Xyzz<F> run = Xyzz<F>::inf(), tot = Xyzz<F>::inf();
    for (uint32_t b = start + L; b-- > start;) {
        run.add(bw[b]);
        tot.add(run);
    }
    // + start * run: bucket b holds digit b + 1.
    Xyzz<F> q = Xyzz<F>::inf();
    for (int bit = 31; bit >= 0; bit--) {
        q = q.dbl();
        if ((start >> bit) & 1) q.add(run);
    }
    tot.add(q);
    out[g] = tot;
}

template <class F>
__device__ __forceinline__ void sum_groups(const Xyzz<F>* in, uint32_t count, uint32_t G, Xyzz<F>* out) {
    uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t lo = t * G;
    if (lo >= count) return;
    uint32_t hi = min(lo + G, count);
    Xyzz<F> acc = Xyzz<F>::inf();
    for (uint32_t k = lo; k < hi; k++) acc.add(in[k]);
    out[t] = acc;
}

// Thread t of T adds up ones[t], ones[t + T], ...: neighbouring lanes read
// neighbouring entries, and every lane adds at every step but the last.
template <class F, bool INL>
__device__ __forceinline__ void ones_sum(const Affine<F>* points, const uint32_t* ones, uint32_t count,
                                         Xyzz<F>* out) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x, T = gridDim.x * blockDim.x;
    Xyzz<F> acc = Xyzz<F>::inf();
    for (uint32_t i = t; i < count; i += T) {
        if (INL) acc.add_affine_inl(points[ones[i]]); else acc.add_affine(points[ones[i]]);
    }
    out[t] = acc;
}

// Bucket accumulation is latency-bound on its serial carry chains, so more
// resident warps beat fewer spills: MIN_BLOCKS blocks of 128 threads must fit
// an SM, which caps registers at 65536 / (128 * MIN_BLOCKS). Measured on the
// H200 (G1 2^26 / G2 2^24 random, ms): G1 at 1 block (182 registers) 935,
// 3 (168) 831, 4 (128, 276 B of spills) 675; G2 at 1 (252 registers, its
// Fp2 products out of line) 735, 3: 815, 4: 787.
#ifndef KILN_MSM_ACC_MIN_BLOCKS_G1
#define KILN_MSM_ACC_MIN_BLOCKS_G1 4
#endif
#ifndef KILN_MSM_ACC_MIN_BLOCKS_G2
#define KILN_MSM_ACC_MIN_BLOCKS_G2 1
#endif

#define KILN_MSM_CURVE(SUFFIX, F, INL, MIN_BLOCKS)                                                                       \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) kiln_msm_bucket_acc_##SUFFIX(const Affine<F>* points, const uint32_t* sorted, \
                                                            const uint32_t* offsets, const uint32_t* counts, \
                                                            uint32_t n, uint32_t c, uint32_t windows,        \
                                                            uint32_t K, Xyzz<F>* buckets, Xyzz<F>* first,    \
                                                            Xyzz<F>* last) {                                 \
        bucket_acc<F, INL>(points, sorted, offsets, counts, n, c, windows, K, buckets, first, last);             \
    }                                                                                                       \
    extern "C" __global__ void kiln_msm_bucket_fix_##SUFFIX(const uint32_t* offsets, const uint32_t* counts, \
                                                            uint32_t n, uint32_t c, uint32_t windows,        \
                                                            uint32_t K, Xyzz<F>* buckets,                    \
                                                            const Xyzz<F>* first, const Xyzz<F>* last) {     \
        bucket_fix<F>(offsets, counts, n, c, windows, K, buckets, first, last);                             \
    }                                                                                                       \
    extern "C" __global__ void kiln_msm_bucket_reduce_##SUFFIX(const Xyzz<F>* buckets, uint32_t B, uint32_t L, \
                                                               uint32_t total, Xyzz<F>* out) {               \
        bucket_reduce<F>(buckets, B, L, total, out);                                                        \
    }                                                                                                       \
    extern "C" __global__ void kiln_msm_sum_##SUFFIX(const Xyzz<F>* in, uint32_t count, uint32_t G,          \
                                                     Xyzz<F>* out) {                                         \
        sum_groups<F>(in, count, G, out);                                                                   \
    }                                                                                                       \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) kiln_msm_ones_##SUFFIX(const Affine<F>* points, \
                                                      const uint32_t* ones, uint32_t count, Xyzz<F>* out) {  \
        ones_sum<F, INL>(points, ones, count, out);                                                         \
    }

KILN_MSM_CURVE(g1, Fp, true, KILN_MSM_ACC_MIN_BLOCKS_G1)
KILN_MSM_CURVE(g2, Fp2, false, KILN_MSM_ACC_MIN_BLOCKS_G2)
