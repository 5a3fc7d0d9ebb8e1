// Short Weierstrass points (a = 0) over F = Fp (G1) or Fp2 (G2), or a Pasta
// base field (Pallas, Vesta: y^2 = x^3 + 5, pasta_kernels.cuh).
//
// Inputs are affine points {x, y} in Montgomery form (blst's, pasta_curves');
// both write the point at infinity as all-zero bytes, which is never on the
// curve (b != 0), so all-zero x and y is tested as infinity. Accumulators use XYZZ
// coordinates (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2): a mixed addition costs
// 8M + 2S with no inversion. ZZ = 0 marks infinity.
// The point operations are __noinline__: inlining them into every kernel
// made ptxas take minutes and spill more, for no measurable gain.
#pragma once
#include "field.cuh"

template <class F>
struct Affine {
    F x, y;
    __device__ __forceinline__ bool is_inf() const { return x.is_zero() && y.is_zero(); }
};

template <class F>
struct Xyzz {
    F X, Y, ZZ, ZZZ;

    static __device__ __forceinline__ Xyzz inf() {
        return {F::zero(), F::zero(), F::zero(), F::zero()};
    }
    __device__ __forceinline__ bool is_inf() const { return ZZ.is_zero(); }

    // dbl-2008-s-1 (a = 0).
    __device__ __noinline__ Xyzz dbl() const {
        if (is_inf()) return *this;
        F U = Y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = X * V;
        F X2 = X.sqr();
        F M = X2.dbl() + X2;
        Xyzz r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * Y;
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }

    // this += affine q (madd-2008-s), doubling and inverse cases handled.
    __device__ __noinline__ void add_affine(const Affine<F>& q) { add_affine_inl(q); }
    __device__ __forceinline__ void add_affine_inl(const Affine<F>& q) {
        if (q.is_inf()) return;
        if (is_inf()) {
            X = q.x; Y = q.y; ZZ = F::one(); ZZZ = F::one();
            return;
        }
        F U2 = q.x * ZZ;
        F S2 = q.y * ZZZ;
        F P = U2 - X;
        F R = S2 - Y;
        if (P.is_zero()) {
            add_affine_equal_x(q, R.is_zero());
            return;
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = X * PP;
        F X3 = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X3) - Y * PPP;
        X = X3;
        ZZ = ZZ * PP;
        ZZZ = ZZZ * PPP;
    }

    // this += q where q.x = x: 2q if also q.y = y (mdbl-2008-s), else 0.
    // Inlined: out of line, the call made the accumulator addressable and
    // ptxas kept it in local memory across the whole accumulation loop.
    __device__ __forceinline__ void add_affine_equal_x(const Affine<F>& q, bool same) {
        if (!same) {
            *this = inf();
            return;
        }
        F U = q.y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = q.x * V;
        F X2 = q.x.sqr();
        F M = X2.dbl() + X2;
        X = M.sqr() - S.dbl();
        Y = M * (S - X) - W * q.y;
        ZZ = V;
        ZZZ = W;
    }

    // this += q, both XYZZ (add-2008-s).
    __device__ __noinline__ void add(const Xyzz& q) {
        if (q.is_inf()) return;
        if (is_inf()) { *this = q; return; }
        F U1 = X * q.ZZ;
        F U2 = q.X * ZZ;
        F S1 = Y * q.ZZZ;
        F S2 = q.Y * ZZZ;
        F P = U2 - U1;
        F R = S2 - S1;
        if (P.is_zero()) {
            if (R.is_zero()) *this = dbl();
            else *this = inf();
            return;
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = U1 * PP;
        F X3 = R.sqr() - PPP - Q.dbl();
        Y = R * (Q - X3) - S1 * PPP;
        X = X3;
        ZZ = ZZ * q.ZZ * PP;
        ZZZ = ZZZ * q.ZZZ * PPP;
    }
};
