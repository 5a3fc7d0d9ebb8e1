//! CPU references for the Pasta curves (pasta_curves alone), shared by
//! gpu_check's Pasta cases and tests/gpu_vs_cpu.rs: MSM terms and a naive
//! sum; the chain points and random elements are the generic ones of
//! `common` (re-exported here), as is the NTT (`common::cpu_ntt`).
use group::Group;

pub use super::{random_field, Chain};

/// (scalar, point rank) pairs that take part, under an optional bitmap.
pub fn field_terms<F: Copy>(scalars: &[F], bitmap: Option<&[u64]>) -> Vec<(F, usize)> {
    let mut rank = 0;
    let mut out = Vec::new();
    for (i, s) in scalars.iter().enumerate() {
        match bitmap {
            None => out.push((*s, i)),
            Some(bm) if (bm[i / 64] >> (i % 64)) & 1 == 1 => {
                out.push((*s, rank));
                rank += 1;
            }
            Some(_) => {}
        }
    }
    out
}

/// Direct sum of s * P over the terms, for small MSMs.
pub fn naive_sum<A: group::prime::PrimeCurveAffine>(points: &[A], terms: &[(A::Scalar, usize)]) -> A::Curve {
    terms.iter().fold(A::Curve::identity(), |acc, (s, i)| acc + points[*i].to_curve() * *s)
}
