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

template <class F, typename Id>
__device__ __forceinline__ F row_value(const Csr<Id>& m, uint32_t r, const F* __restrict__ inputs,
                                       const F* __restrict__ aux, const F* __restrict__ coeffs) {
    const uint32_t lo = __ldg(m.start + r), hi = __ldg(m.start + r + 1);
    F acc = F::zero();
    for (uint32_t k = lo; k < hi; k++) {
        const uint32_t col = __ldg(m.cols + k);
        const uint32_t id = __ldg(m.ids + k);
        const F v = load_ro((col & KILN_R1CS_INPUT_BIT) ? inputs + (col ^ KILN_R1CS_INPUT_BIT) : aux + col);
        if (id == 0)
            acc = acc + v;
        else if (id == 1)
            acc = acc - v;
        else
            acc = acc + v * load_ro(coeffs + id);
    }
    return acc;
}

// Rows [first, end): out_a/b/c[r] = row r of A/B/C times w; *first_bad is
// lowered to the least row with a*b != c (the host sets it to 0xffffffff).
template <class F, typename Id>
__device__ __forceinline__ void r1cs_products(const Csr<Id>& a, const Csr<Id>& b, const Csr<Id>& c,
                                              const F* __restrict__ inputs, const F* __restrict__ aux,
                                              const F* __restrict__ coeffs, F* __restrict__ out_a,
                                              F* __restrict__ out_b, F* __restrict__ out_c, uint32_t first,
                                              uint32_t end, uint32_t* first_bad) {
    const uint32_t r = first + blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= end) return;
    const F va = row_value(a, r, inputs, aux, coeffs);
    const F vb = row_value(b, r, inputs, aux, coeffs);
    const F vc = row_value(c, r, inputs, aux, coeffs);
    out_a[r] = va;
    out_b[r] = vb;
    out_c[r] = vc;
    if (!(va * vb == vc)) atomicMin(first_bad, r);
}

// 256 threads and at least 4 blocks per SM: 62 registers, no spills
// (sm_90a, ptxas 13.0); unbounded it takes 66, which leaves 3 blocks (768
// threads) per SM to hide the gathers' latency instead of 1024.
#define KILN_R1CS_THREADS 256
#define KILN_R1CS_PRODUCTS(name, Id)                                                                          \
    extern "C" __global__ void __launch_bounds__(KILN_R1CS_THREADS, 4) name(Csr<Id> a, Csr<Id> b, Csr<Id> c, const Fr* inputs, \
                                                            const Fr* aux, const Fr* coeffs, Fr* out_a,       \
                                                            Fr* out_b, Fr* out_c, uint32_t first,            \
                                                            uint32_t end, uint32_t* first_bad) {             \
        r1cs_products<Fr, Id>(a, b, c, inputs, aux, coeffs, out_a, out_b, out_c, first, end, first_bad);     \
    }

KILN_R1CS_PRODUCTS(kiln_r1cs_products_u8, uint8_t)
KILN_R1CS_PRODUCTS(kiln_r1cs_products_u16, uint16_t)
KILN_R1CS_PRODUCTS(kiln_r1cs_products_u32, uint32_t)
