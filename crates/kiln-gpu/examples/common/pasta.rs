//! CPU references for the Pasta curves (pasta_curves alone), shared by
//! gpu_check's Pasta cases and tests/gpu_vs_cpu.rs: a radix-2 NTT over any
//! prime field with its own roots; the chain points and random elements
//! are the generic ones of `common` (re-exported here).
use ff::{Field, PrimeField};
use group::Group;

pub use super::{random_field, Chain};

/// Plain radix-2 NTT (natural order in and out) over `F`'s 2^log_n-th roots
/// (F::ROOT_OF_UNITY squared down, as kiln-gpu takes them); the inverse
/// includes 1/n. `coset`: on g<w>, g = F::MULTIPLICATIVE_GENERATOR.
pub fn cpu_ntt_field<F: PrimeField>(a: &mut [F], inverse: bool, coset: bool) {
    let n = a.len();
    let g = F::MULTIPLICATIVE_GENERATOR;
    if coset && !inverse {
        scale_by_powers(a, g);
    }
    if n > 1 {
        let log_n = n.trailing_zeros();
        let mut w = F::ROOT_OF_UNITY;
        for _ in log_n..F::S {
            w = w.square();
        }
        if inverse {
            w = w.invert().unwrap();
        }
        for i in 0..n {
            let j = i.reverse_bits() >> (usize::BITS - log_n);
            if i < j {
                a.swap(i, j);
            }
        }
        let mut len = 2;
        while len <= n {
            let wl = w.pow_vartime([(n / len) as u64]);
            for chunk in a.chunks_mut(len) {
                let mut t = F::ONE;
                for k in 0..len / 2 {
                    let (x, y) = (chunk[k], chunk[k + len / 2] * t);
                    chunk[k] = x + y;
                    chunk[k + len / 2] = x - y;
                    t *= wl;
                }
            }
            len <<= 1;
        }
        if inverse {
            let ninv = F::from(n as u64).invert().unwrap();
            a.iter_mut().for_each(|x| *x *= ninv);
        }
    }
    if coset && inverse {
        scale_by_powers(a, g.invert().unwrap());
    }
}

fn scale_by_powers<F: Field>(a: &mut [F], g: F) {
    let mut p = F::ONE;
    for x in a.iter_mut() {
        *x *= p;
        p *= g;
    }
}


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
