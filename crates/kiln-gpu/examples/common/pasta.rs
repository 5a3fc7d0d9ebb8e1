//! CPU references for the Pasta curves (pasta_curves alone), shared by
//! gpu_check's Pasta cases and tests/gpu_vs_cpu.rs: a radix-2 NTT over any
//! prime field with its own roots, chain points and the MSM's expected
//! discrete log, generic over Pallas and Vesta.
use ff::{Field, PrimeField};
use group::{Curve, Group};
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

/// `n` random field elements from `seed` (parallel, reproducible).
pub fn random_field<F: PrimeField>(n: usize, seed: u64) -> Vec<F> {
    (0..n)
        .into_par_iter()
        .chunks(1 << 14)
        .flat_map_iter(|c| {
            let mut r = rand_chacha::ChaCha20Rng::seed_from_u64(seed ^ (c[0] as u64).wrapping_mul(0x9e3779b97f4a7c15));
            c.into_iter().map(move |_| F::random(&mut r)).collect::<Vec<_>>()
        })
        .collect()
}

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

/// Points (r0 + i d) G for i < n in group `C`, made by additions, so a
/// large MSM has an O(n) reference.
pub struct Chain<F> {
    pub r0: F,
    pub d: F,
}

impl<F: PrimeField> Chain<F> {
    pub fn new(r: &mut impl Rng) -> Self {
        Self { r0: F::random(&mut *r), d: F::random(&mut *r) }
    }
    pub fn points<C: Group<Scalar = F> + Curve>(&self, n: usize) -> Vec<C::AffineRepr>
    where
        C::AffineRepr: Copy + Send + Sync,
    {
        const CH: usize = 1 << 12;
        let mut out = vec![C::generator().to_affine(); n];
        out.par_chunks_mut(CH).enumerate().for_each(|(k, chunk)| {
            let step = C::generator() * self.d;
            let mut p = C::generator() * (self.r0 + self.d * F::from((k * CH) as u64));
            let mut proj = Vec::with_capacity(chunk.len());
            for _ in 0..chunk.len() {
                proj.push(p);
                p += step;
            }
            C::batch_normalize(&proj, chunk);
        });
        out
    }
    /// sum_i s_i (r0 + idx_i d): the discrete log of the expected MSM.
    pub fn dlog(&self, terms: &[(F, usize)]) -> F {
        terms.par_iter().map(|(s, i)| *s * (self.r0 + self.d * F::from(*i as u64))).reduce(|| F::ZERO, |a, b| a + b)
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
