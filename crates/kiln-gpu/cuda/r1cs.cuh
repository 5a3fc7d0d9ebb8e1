// Constraint evaluation on the device: a = A.w, b = B.w, c = C.w from a
// circuit's compiled R1CS matrices kept in VRAM (kiln-gpu's r1cs.rs uploads
// them once per circuit shape), and the run-time check a*b = c of every row,
// fused into the same pass: the first row that fails is reported.
//
// One thread per row evaluates its row of A, B and C in turn and writes the
// three values (consecutive threads write consecutive elements: coalesced).
// Rows are short (a PoRep partition averages 2.4, 1.0 and 2.2 terms in A,
// B and C) and most coefficients are 1 or -1, which cost one addition or
// subtraction; any other coefficient costs one Montgomery product. The
// witness gathers (aux[col]) are 32-byte read-only loads; what neighbouring
// rows name is mostly close together, so they share L2 lines.
//
// w = (inputs, aux): a column with KILN_R1CS_INPUT_BIT set is an input
// index, else an aux index (kiln-synth's compiled form). Columns and
// coefficient ids are checked against the vectors' lengths when the
// matrices are uploaded, so nothing here reads out of bounds.
#pragma once
#include "field.cuh"

#define KILN_R1CS_INPUT_BIT 0x80000000u

// One matrix in compressed-row form: row r's terms are k in
// [start[r], start[r + 1]), column cols[k], coefficient coeffs[ids[k]].
// Ids 0 and 1 are always 1 and -1. Mirrors `Csr` in kiln-gpu's launch.rs
// (three device addresses; the id width is the kernel's template argument).
template <typename Id>
struct Csr {
    const uint32_t* start;
    const uint32_t* cols;
    const Id* ids;
};

// A field element through the read-only data path, 16 bytes at a time.
template <class F>
__device__ __forceinline__ F load_ro(const F* p) {
    static_assert(sizeof(F) % 16 == 0, "16-byte loads");
    F r;
    const uint4* src = reinterpret_cast<const uint4*>(p);
    uint4* dst = reinterpret_cast<uint4*>(r.v);
#pragma unroll
    for (int i = 0; i < int(sizeof(F) / 16); i++) dst[i] = __ldg(src + i);
    return r;
}

// acc + term k of m (coefficient id 0: +1, 1: -1, else a product).
template <class F, typename Id>
__device__ __forceinline__ F add_term(const F& acc, const Csr<Id>& m, uint32_t k, const F* __restrict__ inputs,
                                      const F* __restrict__ aux, const F* __restrict__ coeffs) {
    const uint32_t col = __ldg(m.cols + k);
    const uint32_t id = __ldg(m.ids + k);
    const F v = load_ro((col & KILN_R1CS_INPUT_BIT) ? inputs + (col ^ KILN_R1CS_INPUT_BIT) : aux + col);
    if (id == 0) return acc + v;
    if (id == 1) return acc - v;
    return acc + v * load_ro(coeffs + id);
}

template <class F, typename Id>
__device__ __forceinline__ F row_value(const Csr<Id>& m, uint32_t r, const F* __restrict__ inputs,
                                       const F* __restrict__ aux, const F* __restrict__ coeffs) {
    const uint32_t lo = __ldg(m.start + r), hi = __ldg(m.start + r + 1);
    F acc = F::zero();
    for (uint32_t k = lo; k < hi; k++) acc = add_term(acc, m, k, inputs, aux, coeffs);
    return acc;
}

// Row r's value as above, for rows of at most KILN_R1CS_WARP_ROW terms; a
// longer row is summed by the whole warp (lane k takes terms k, k + 32, ...,
// then a butterfly of shuffles), so one long row no longer keeps 31 lanes
// idle for its length. Real Filecoin matrices need it: a 32 GiB PoRep
// partition has ~0.3 % rows of up to 929 terms (bit packings with 2^k
// coefficients), clustered, which leave one lane of a warp busy for
// hundreds of steps while the rest wait. Every lane of the warp must call
// it (`live` false for lanes past the last row).
#ifndef KILN_R1CS_WARP_ROW
#define KILN_R1CS_WARP_ROW 32
#endif

template <class F>
__device__ __forceinline__ F shfl_xor_all(const F& x, int mask) {
    F r;
#pragma unroll
    for (int i = 0; i < F::N; i++) r.v[i] = __shfl_xor_sync(0xffffffffu, x.v[i], mask);
    return r;
}

template <class F, typename Id>
__device__ __forceinline__ F row_value_warp(const Csr<Id>& m, uint32_t r, bool live, const F* __restrict__ inputs,
                                            const F* __restrict__ aux, const F* __restrict__ coeffs) {
    uint32_t lo = 0, hi = 0;
    if (live) {
        lo = __ldg(m.start + r);
        hi = __ldg(m.start + r + 1);
    }
    const bool wide = hi - lo > KILN_R1CS_WARP_ROW;
    F acc = F::zero();
    if (live && !wide) {
        for (uint32_t k = lo; k < hi; k++) acc = add_term(acc, m, k, inputs, aux, coeffs);
    }
    const uint32_t lane = threadIdx.x & 31;
    for (uint32_t wides = __ballot_sync(0xffffffffu, wide); wides; wides &= wides - 1) {
        const int owner = __ffs(wides) - 1;
        const uint32_t l = __shfl_sync(0xffffffffu, lo, owner), h = __shfl_sync(0xffffffffu, hi, owner);
        F part = F::zero();
        for (uint32_t k = l + lane; k < h; k += 32) part = add_term(part, m, k, inputs, aux, coeffs);
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) part = part + shfl_xor_all(part, d);
        if (lane == (uint32_t)owner) acc = part;
    }
    return acc;
}

// Rows [first, end): out_a/b/c[r] = row r of A/B/C times w; *first_bad is
// lowered to the least row with a*b != c (the host sets it to 0xffffffff).
// WARP: rows longer than KILN_R1CS_WARP_ROW are summed by their warp
// (row_value_warp), so no lane leaves before the rows are evaluated.
template <class F, typename Id, bool WARP>
__device__ __forceinline__ void r1cs_products(const Csr<Id>& a, const Csr<Id>& b, const Csr<Id>& c,
                                              const F* __restrict__ inputs, const F* __restrict__ aux,
                                              const F* __restrict__ coeffs, F* __restrict__ out_a,
                                              F* __restrict__ out_b, F* __restrict__ out_c, uint32_t first,
                                              uint32_t end, uint32_t* first_bad) {
    const uint32_t r = first + blockIdx.x * blockDim.x + threadIdx.x;
    const bool live = r < end;
    if (!WARP && !live) return;
    auto value = [&](const Csr<Id>& m) {
        return WARP ? row_value_warp(m, r, live, inputs, aux, coeffs) : row_value(m, r, inputs, aux, coeffs);
    };
    const F va = value(a);
    const F vb = value(b);
    const F vc = value(c);
    if (!live) return;
    out_a[r] = va;
    out_b[r] = vb;
    out_c[r] = vc;
    if (!(va * vb == vc)) atomicMin(first_bad, r);
}

// 256 threads and at least 4 blocks per SM: 62 registers, no spills
// (sm_90a, ptxas 13.0); unbounded it takes 66, which leaves 3 blocks (768
// threads) per SM to hide the gathers' latency instead of 1024.
#define KILN_R1CS_THREADS 256
#define KILN_R1CS_PRODUCTS(name, Id, WARP)                                                                    \
    extern "C" __global__ void __launch_bounds__(KILN_R1CS_THREADS, 4) name(Csr<Id> a, Csr<Id> b, Csr<Id> c, const Fr* inputs, \
                                                            const Fr* aux, const Fr* coeffs, Fr* out_a,       \
                                                            Fr* out_b, Fr* out_c, uint32_t first,            \
                                                            uint32_t end, uint32_t* first_bad) {             \
        r1cs_products<Fr, Id, WARP>(a, b, c, inputs, aux, coeffs, out_a, out_b, out_c, first, end, first_bad); \
    }

KILN_R1CS_PRODUCTS(kiln_r1cs_products_u8, uint8_t, false)
KILN_R1CS_PRODUCTS(kiln_r1cs_products_u16, uint16_t, false)
KILN_R1CS_PRODUCTS(kiln_r1cs_products_u32, uint32_t, false)
KILN_R1CS_PRODUCTS(kiln_r1cs_products_warp_u8, uint8_t, true)
KILN_R1CS_PRODUCTS(kiln_r1cs_products_warp_u16, uint16_t, true)
KILN_R1CS_PRODUCTS(kiln_r1cs_products_warp_u32, uint32_t, true)
