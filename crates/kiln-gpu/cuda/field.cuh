// Montgomery arithmetic for the BLS12-381 fields, templated on the modulus.
//
// Layout: an element is N little-endian 32-bit limbs, which is byte-for-byte
// blst's little-endian u64 limbs (blst_fr = [u64;4], blst_fp = [u64;6]) on a
// little-endian machine, so buffers of blstrs values are used as they are.
// Values are kept in Montgomery form with R = 2^(32N), fully reduced (< p),
// exactly as blst keeps them.
#pragma once
#include <cstdint>

// Carry-chain primitives (PTX). The carry flag lives between consecutive
// volatile asm statements of one chain; only other chain members sit there.
// Without __CUDA_ARCH__ (host compilation of the unit test in
// cuda/test/field_host.cpp) the flag is emulated, so the chain logic can be
// checked on a machine without a GPU.
#ifdef __CUDA_ARCH__
#define KILN_PTX(op, ...) asm volatile(op : __VA_ARGS__)
#endif
namespace ptx {
#ifdef __CUDA_ARCH__
// Two-operand chain members: add/sub, setting (.cc) and/or taking (c) the flag.
#define KILN_PTX_2(name, op)                                                     \
    __device__ __forceinline__ uint32_t name(uint32_t a, uint32_t b) {            \
        uint32_t r; KILN_PTX(op " %0, %1, %2;", "=r"(r) : "r"(a), "r"(b)); return r; \
    }
KILN_PTX_2(add_cc, "add.cc.u32")
KILN_PTX_2(addc_cc, "addc.cc.u32")
KILN_PTX_2(addc, "addc.u32")
KILN_PTX_2(sub_cc, "sub.cc.u32")
KILN_PTX_2(subc_cc, "subc.cc.u32")
KILN_PTX_2(subc, "subc.u32")
#undef KILN_PTX_2
__device__ __forceinline__ uint32_t mad_lo_cc(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; KILN_PTX("mad.lo.cc.u32 %0, %1, %2, %3;", "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ uint32_t madc_lo_cc(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; KILN_PTX("madc.lo.cc.u32 %0, %1, %2, %3;", "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ uint32_t madc_hi_cc(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; KILN_PTX("madc.hi.cc.u32 %0, %1, %2, %3;", "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
__device__ __forceinline__ uint32_t madc_hi(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t r; KILN_PTX("madc.hi.u32 %0, %1, %2, %3;", "=r"(r) : "r"(a), "r"(b), "r"(c)); return r;
}
#else
inline thread_local uint32_t host_cf = 0;
inline uint32_t host_add(uint64_t s, bool keep) { if (keep) host_cf = (uint32_t)(s >> 32); return (uint32_t)s; }
inline uint32_t add_cc(uint32_t a, uint32_t b) { return host_add((uint64_t)a + b, true); }
inline uint32_t addc_cc(uint32_t a, uint32_t b) { return host_add((uint64_t)a + b + host_cf, true); }
inline uint32_t addc(uint32_t a, uint32_t b) { return host_add((uint64_t)a + b + host_cf, false); }
// PTX's borrow is the carry flag inverted (a - b = a + ~b + 1); here the
// flag holds the borrow itself, which is all the chains below rely on.
inline uint32_t host_sub(uint64_t d, bool keep) { if (keep) host_cf = (uint32_t)(d >> 63); return (uint32_t)d; }
inline uint32_t sub_cc(uint32_t a, uint32_t b) { return host_sub((uint64_t)a - b, true); }
inline uint32_t subc_cc(uint32_t a, uint32_t b) { return host_sub((uint64_t)a - b - host_cf, true); }
inline uint32_t subc(uint32_t a, uint32_t b) { return host_sub((uint64_t)a - b - host_cf, false); }
inline uint32_t lo(uint32_t a, uint32_t b) { return (uint32_t)((uint64_t)a * b); }
inline uint32_t hi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
inline uint32_t mad_lo_cc(uint32_t a, uint32_t b, uint32_t c) { return host_add((uint64_t)lo(a, b) + c, true); }
inline uint32_t madc_lo_cc(uint32_t a, uint32_t b, uint32_t c) { return host_add((uint64_t)lo(a, b) + c + host_cf, true); }
inline uint32_t madc_hi_cc(uint32_t a, uint32_t b, uint32_t c) { return host_add((uint64_t)hi(a, b) + c + host_cf, true); }
inline uint32_t madc_hi(uint32_t a, uint32_t b, uint32_t c) { return host_add((uint64_t)hi(a, b) + c + host_cf, false); }
#endif

// Chains over limb pairs. A product a[2k+s] * b of a row is added to a
// 64-bit pair (acc[2k], acc[2k+1]) of one accumulator, so each pair stays
// an aligned register pair and ptxas makes every lo/hi couple one
// IMAD.WIDE.U32(.X): no moves between products.

// acc[2k..2k+1] += a[2k+S] * b over k as one carry chain. CI: take the
// flag set before as carry into acc[0]; CO: leave the top's carry in the
// flag (else the caller knows there is none).
template <int N, int S, bool CI, bool CO>
__device__ __forceinline__ void mac_pairs(uint32_t acc[N], const uint32_t a[N], uint32_t b) {
    acc[0] = CI ? madc_lo_cc(a[S], b, acc[0]) : mad_lo_cc(a[S], b, acc[0]);
#pragma unroll
    for (int k = 0; k < N; k += 2) {
        if (k > 0) acc[k] = madc_lo_cc(a[k + S], b, acc[k]);
        if (CO || k + 2 < N) acc[k + 1] = madc_hi_cc(a[k + S], b, acc[k + 1]);
        else acc[k + 1] = madc_hi(a[k + S], b, acc[k + 1]);
    }
}
}  // namespace ptx

// ---- moduli and constants (little-endian 32-bit limbs) ----
__constant__ uint32_t KILN_FR_MOD[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                                        0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
__constant__ uint32_t KILN_FR_ONE[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                                        0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
__constant__ uint32_t KILN_FP_MOD[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe,
                                         0xf6b0f624, 0x6730d2a0, 0xf38512bf, 0x64774b84,
                                         0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
__constant__ uint32_t KILN_FP_ONE[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b,
                                         0x53c758ba, 0x5f489857, 0x70525745, 0x77ce5853,
                                         0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};

struct FrParams {
    static constexpr int N = 8;
    static constexpr uint32_t INV = 0xffffffffu;  // -r^-1 mod 2^32
    static __device__ __forceinline__ uint32_t mod(int i) { return KILN_FR_MOD[i]; }
    static __device__ __forceinline__ uint32_t one(int i) { return KILN_FR_ONE[i]; }
};
struct FpParams {
    static constexpr int N = 12;
    static constexpr uint32_t INV = 0xfffcfffdu;  // -p^-1 mod 2^32
    static __device__ __forceinline__ uint32_t mod(int i) { return KILN_FP_MOD[i]; }
    static __device__ __forceinline__ uint32_t one(int i) { return KILN_FP_ONE[i]; }
};

// Both moduli leave the top bit of the top limb free (255 of 256, 381 of 384
// bits), so a + b < 2^(32N) and the Montgomery product of reduced inputs is
// < 2p before its final subtraction: no carry word beyond N limbs is needed.
template <class P>
struct alignas(16) Fe {
    static constexpr int N = P::N;
    uint32_t v[N];

    static __device__ __forceinline__ Fe zero() {
        Fe r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = 0;
        return r;
    }
    static __device__ __forceinline__ Fe one() {
        Fe r;
#pragma unroll
        for (int i = 0; i < N; i++) r.v[i] = P::one(i);
        return r;
    }
    __device__ __forceinline__ bool is_zero() const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    __device__ __forceinline__ bool operator==(const Fe& o) const {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }

    // Additions and subtractions as explicit PTX carry chains (the default),
    // or in 64-bit C++ (KILN_FIELD_ADD_PTX=0), which ptxas compiled into
    // more instructions and registers: H200, 2026-12-03, the C++ form took
    // 58.6 ms for an Fr NTT of 2^27 (chains: 48.9), 202 / 743 ms for G1 /
    // G2 MSMs of 2^24 (168 / 539). Both forms are checked on the host by
    // kiln-gpu's field_host test.
#ifndef KILN_FIELD_ADD_PTX
#define KILN_FIELD_ADD_PTX 1
#endif
    // r = a - p if a >= p, else a.
    static __device__ __forceinline__ Fe reduce_once(const Fe& a) {
        Fe t;
#if KILN_FIELD_ADD_PTX
        t.v[0] = ptx::sub_cc(a.v[0], P::mod(0));
#pragma unroll
        for (int i = 1; i < N; i++) t.v[i] = ptx::subc_cc(a.v[i], P::mod(i));
        const uint32_t below = ptx::subc(0, 0);  // all ones iff a < p
#pragma unroll
        for (int i = 0; i < N; i++) t.v[i] = below ? a.v[i] : t.v[i];
        return t;
#else
        uint32_t borrow = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t d = (uint64_t)a.v[i] - P::mod(i) - borrow;
            t.v[i] = (uint32_t)d;
            borrow = (uint32_t)(d >> 63);
        }
        return borrow ? a : t;
#endif
    }

    // a + b without the final subtraction: < 2p for reduced a, b, which
    // is a valid input of Fp's Montgomery product (see operator*).
    static __device__ __forceinline__ Fe add_unreduced(const Fe& a, const Fe& b) {
        Fe s;
        s.v[0] = ptx::add_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) s.v[i] = i + 1 < N ? ptx::addc_cc(a.v[i], b.v[i]) : ptx::addc(a.v[i], b.v[i]);
        return s;
    }

    // a + b < 2^(32N) (both moduli leave the top bit free): no carry out.
    __device__ __forceinline__ friend Fe operator+(const Fe& a, const Fe& b) {
#if KILN_FIELD_ADD_PTX
        return reduce_once(add_unreduced(a, b));
#else
        Fe s;
        uint32_t carry = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t t = (uint64_t)a.v[i] + b.v[i] + carry;
            s.v[i] = (uint32_t)t;
            carry = (uint32_t)(t >> 32);
        }
        return reduce_once(s);
#endif
    }

    __device__ __forceinline__ friend Fe operator-(const Fe& a, const Fe& b) {
        Fe d;
#if KILN_FIELD_ADD_PTX
        d.v[0] = ptx::sub_cc(a.v[0], b.v[0]);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = ptx::subc_cc(a.v[i], b.v[i]);
        const uint32_t under = ptx::subc(0, 0);  // all ones iff a < b: add p back
        d.v[0] = ptx::add_cc(d.v[0], P::mod(0) & under);
#pragma unroll
        for (int i = 1; i < N; i++) d.v[i] = i + 1 < N ? ptx::addc_cc(d.v[i], P::mod(i) & under) : ptx::addc(d.v[i], P::mod(i) & under);
#else
        uint32_t borrow = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            uint64_t t = (uint64_t)a.v[i] - b.v[i] - borrow;
            d.v[i] = (uint32_t)t;
            borrow = (uint32_t)(t >> 63);
        }
        if (borrow) {  // went below zero: add p back
            uint32_t carry = 0;
#pragma unroll
            for (int i = 0; i < N; i++) {
                uint64_t t = (uint64_t)d.v[i] + P::mod(i) + carry;
                d.v[i] = (uint32_t)t;
                carry = (uint32_t)(t >> 32);
            }
        }
#endif
        return d;
    }

    __device__ __forceinline__ Fe neg() const { return is_zero() ? *this : zero() - *this; }
    __device__ __forceinline__ Fe dbl() const { return *this + *this; }

    // Montgomery product a*b*R^-1 mod p: CIOS over 32-bit limbs with the
    // running sum T kept in two accumulators, T = Z + X + 2^32 Y, so every
    // product lands on an aligned limb pair (ptx::mac_pairs): even limbs of
    // a and p go to X, odd limbs to Y (one limb up). A row adds a * b_i,
    // picks m from T's low limb (which is X[0] + Z), adds m * p and divides
    // by 2^32: then X[1] becomes the next Z, Y the next X, and X[2..] the next
    // Y - a shift by whole pairs, folded into the next row's chain.
    // Bounds: T < 2p * 2^32 < 2^(32(N+1)) throughout (p < 2^(32N-1)), and
    // X, Y, Z >= 0 add up to T exactly, so Y never carries out of its top.
    // Inputs below 2p (Fp2's unreduced sums) keep T < 4p * 2^32 <
    // 2^(32(N+1)), and the result (ab + Mp)/R < p + 4p^2/R stays below 2p
    // where 4p < R: true of Fp (p < 2^381, R = 2^384), not of Fr.
    __device__ __forceinline__ friend Fe operator*(const Fe& a, const Fe& b) {
        static_assert(N % 2 == 0, "limbs are handled in pairs");
        uint32_t X[N], Y[N], p[N], Z = 0;
#pragma unroll
        for (int i = 0; i < N; i++) { X[i] = 0; Y[i] = 0; p[i] = P::mod(i); }
#pragma unroll
        for (int i = 0; i < N; i++) {
            // T += a * b_i. Z joins X[0]; that carry belongs one limb up,
            // where the Y chain starts.
            X[0] = ptx::add_cc(X[0], Z);
            ptx::mac_pairs<N, 1, true, false>(Y, a.v, b.v[i]);
            ptx::mac_pairs<N, 0, false, true>(X, a.v, b.v[i]);
            Y[N - 1] = ptx::addc(Y[N - 1], 0);  // X's top carry, position N
            // T += m * p with m chosen so that T's low limb becomes 0.
            const uint32_t m = X[0] * P::INV;
            ptx::mac_pairs<N, 1, false, false>(Y, p, m);
            ptx::mac_pairs<N, 0, false, true>(X, p, m);
            Y[N - 1] = ptx::addc(Y[N - 1], 0);
            // T /= 2^32: X[0] is 0 now.
            Z = X[1];
#pragma unroll
            for (int k = 0; k < N; k++) {
                const uint32_t y = Y[k];
                Y[k] = k + 2 < N ? X[k + 2] : 0;
                X[k] = y;
            }
        }
        // T = Z + X + 2^32 Y < 2p < 2^(32N): Y's top limb and the last
        // carry are 0.
        Fe r;
        r.v[0] = ptx::add_cc(X[0], Z);
#pragma unroll
        for (int k = 1; k < N; k++) r.v[k] = k + 1 < N ? ptx::addc_cc(X[k], Y[k - 1]) : ptx::addc(X[k], Y[k - 1]);
        return reduce_once(r);
    }

    __device__ __forceinline__ Fe sqr() const { return *this * *this; }

    // Montgomery form -> plain integer (multiply by 1 = R^-1 scaling).
    __device__ __forceinline__ Fe from_mont() const {
        Fe one_raw = zero();
        one_raw.v[0] = 1;
        return *this * one_raw;
    }
};

using Fr = Fe<FrParams>;
using Fp = Fe<FpParams>;

// Fp2 = Fp[u]/(u^2 + 1), laid out as blst_fp2 {c0, c1}.
//
// The Karatsuba sums a0 + a1, b0 + b1 go into the product unreduced
// (< 2p; KILN_FP2_LAZY=0 reduces them): the Montgomery product of inputs
// below 2p is still below 2p before its final subtraction (4p < R =
// 2^384), so the result is exact and reduced. H200, G2 MSM 2^24: 534.2 ->
// 530.2 ms, within noise, but never slower. The products stay out of line:
// inlined, the G2 MSM took 831 ms (register spills).
#ifndef KILN_FP2_LAZY
#define KILN_FP2_LAZY 1
#endif
struct alignas(16) Fp2 {
    Fp c0, c1;
    static __device__ __forceinline__ Fp2 zero() { return {Fp::zero(), Fp::zero()}; }
    static __device__ __forceinline__ Fp2 one() { return {Fp::one(), Fp::zero()}; }
    __device__ __forceinline__ bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    __device__ __forceinline__ friend Fp2 operator+(const Fp2& a, const Fp2& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
    __device__ __forceinline__ friend Fp2 operator-(const Fp2& a, const Fp2& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
    __device__ __forceinline__ Fp2 neg() const { return {c0.neg(), c1.neg()}; }
    __device__ __forceinline__ Fp2 dbl() const { return {c0.dbl(), c1.dbl()}; }
    static __device__ __forceinline__ Fp sum(const Fp& x, const Fp& y) {
#if KILN_FP2_LAZY
        return Fp::add_unreduced(x, y);
#else
        return x + y;
#endif
    }
    // Karatsuba: 3 base-field products.
    __device__ __noinline__ friend Fp2 operator*(const Fp2& a, const Fp2& b) {
        Fp t0 = a.c0 * b.c0;
        Fp t1 = a.c1 * b.c1;
        Fp t2 = sum(a.c0, a.c1) * sum(b.c0, b.c1);
        return {t0 - t1, t2 - t0 - t1};
    }
    // (a + bu)^2 = (a+b)(a-b) + 2ab u: 2 base-field products.
    __device__ __noinline__ Fp2 sqr() const {
        Fp t = c0 * c1;
        return {sum(c0, c1) * (c0 - c1), t.dbl()};
    }
};
