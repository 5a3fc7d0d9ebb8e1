// The Pasta fields (Pallas and Vesta, as in pasta_curves 0.5): the same
// Montgomery arithmetic as BLS12-381's (field.cuh's Fe<P>), other moduli.
//
// Pallas's base field Fp is Vesta's scalar field and Vesta's base field Fq
// is Pallas's scalar field. pasta_curves keeps an element as four
// little-endian u64 limbs in Montgomery form with R = 2^256, fully reduced:
// byte for byte Fe<P> with N = 8 32-bit limbs, so host buffers of
// pasta_curves values are used as they are.
//
// What field.cuh assumes of a modulus, checked for these: it leaves the top
// bit free (both are 255-bit: 2^254 + small), so sums of reduced values and
// Montgomery products before their final subtraction fit 256 bits. Not true
// of them: 4p < R, which only Fp2's unreduced Karatsuba sums need - Fp2 and
// the lazy sums stay BLS-only. The constants are cross-checked against
// pasta_curves by kiln-gpu's tests (tests/pasta_consts.rs, field_host.rs).
//
// Included after every BLS12-381 header (kiln.cu): the constants below are
// placed after the BLS ones, so the BLS kernels' machine code is unchanged.
#pragma once
#include "field.cuh"

// p = 0x40000000000000000000000000000000224698fc094cf91b992d30ed00000001
__constant__ uint32_t KILN_PASTA_FP_MOD[8] = {0x00000001, 0x992d30ed, 0x094cf91b, 0x224698fc,
                                              0x00000000, 0x00000000, 0x00000000, 0x40000000};
// 2^256 mod p: one in Montgomery form.
__constant__ uint32_t KILN_PASTA_FP_ONE[8] = {0xfffffffd, 0x34786d38, 0xe41914ad, 0x992c350b,
                                              0xffffffff, 0xffffffff, 0xffffffff, 0x3fffffff};
// q = 0x40000000000000000000000000000000224698fc0994a8dd8c46eb2100000001
__constant__ uint32_t KILN_PASTA_FQ_MOD[8] = {0x00000001, 0x8c46eb21, 0x0994a8dd, 0x224698fc,
                                              0x00000000, 0x00000000, 0x00000000, 0x40000000};
__constant__ uint32_t KILN_PASTA_FQ_ONE[8] = {0xfffffffd, 0x5b2b3e9c, 0xe3420567, 0x992c350b,
                                              0xffffffff, 0xffffffff, 0xffffffff, 0x3fffffff};

struct PastaFpParams {
    static constexpr int N = 8;
    static constexpr uint32_t INV = 0xffffffffu;  // -p^-1 mod 2^32 (p = 1 mod 2^32)
    static __device__ __forceinline__ uint32_t mod(int i) { return KILN_PASTA_FP_MOD[i]; }
    static __device__ __forceinline__ uint32_t one(int i) { return KILN_PASTA_FP_ONE[i]; }
};
struct PastaFqParams {
    static constexpr int N = 8;
    static constexpr uint32_t INV = 0xffffffffu;  // -q^-1 mod 2^32 (q = 1 mod 2^32)
    static __device__ __forceinline__ uint32_t mod(int i) { return KILN_PASTA_FQ_MOD[i]; }
    static __device__ __forceinline__ uint32_t one(int i) { return KILN_PASTA_FQ_ONE[i]; }
};

using PastaFp = Fe<PastaFpParams>;  // Pallas base field, Vesta scalars
using PastaFq = Fe<PastaFqParams>;  // Vesta base field, Pallas scalars
