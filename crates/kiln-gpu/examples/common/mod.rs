//! CPU references and test data shared by gpu_check, gpu_bench and the tests.
#![allow(dead_code)]
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand::{Rng, RngCore, SeedableRng};
use rayon::prelude::*;

pub mod pasta;

pub fn rng() -> rand_chacha::ChaCha20Rng {
    rand_chacha::ChaCha20Rng::seed_from_u64(rand::thread_rng().next_u64())
}

pub fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    random_field(n, seed)
}

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


/// `F`'s 2^log_n-th root of unity: `F::ROOT_OF_UNITY` squared down, the
/// root kiln-gpu's NTTs take (computed here on its own, as a reference).
pub fn root_of<F: PrimeField>(log_n: u32) -> F {
    let mut w = F::ROOT_OF_UNITY;
    for _ in log_n..F::S {
        w = w.square();
    }
    w
}

/// Plain radix-2 NTT (natural order in and out) over `F`'s roots
/// ([`root_of`]); the inverse includes 1/n. `coset`: on g<w>, g =
/// `F::MULTIPLICATIVE_GENERATOR` (Fr: 7, Pasta: 5), as kiln-gpu's.
pub fn cpu_ntt<F: PrimeField>(a: &mut [F], inverse: bool, coset: bool) {
    let g = F::MULTIPLICATIVE_GENERATOR;
    if coset && !inverse {
        scale_by_powers(a, g);
    }
    radix2(a, inverse);
    if coset && inverse {
        scale_by_powers(a, g.invert().unwrap());
    }
}

fn radix2<F: PrimeField>(a: &mut [F], inverse: bool) {
    let n = a.len();
    if n <= 1 {
        return;
    }
    let log_n = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - log_n);
        if i < j {
            a.swap(i, j);
        }
    }
    let mut w_n = root_of::<F>(log_n);
    if inverse {
        w_n = w_n.invert().unwrap();
    }
    let mut h = 1;
    while h < n {
        // w for this stage: w_n^(n / 2h)
        let w = w_n.pow_vartime([(n / (2 * h)) as u64]);
        let tw: Vec<F> = std::iter::successors(Some(F::ONE), |x| Some(*x * w)).take(h).collect();
        a.par_chunks_mut(2 * h).for_each(|blk| {
            let (lo, hi) = blk.split_at_mut(h);
            for j in 0..h {
                let t = hi[j] * tw[j];
                hi[j] = lo[j] - t;
                lo[j] += t;
            }
        });
        h *= 2;
    }
    if inverse {
        let ninv = F::from(n as u64).invert().unwrap();
        a.par_iter_mut().for_each(|x| *x *= ninv);
    }
}

fn scale_by_powers<F: Field>(a: &mut [F], g: F) {
    let mut p = F::ONE;
    for x in a.iter_mut() {
        *x *= p;
        p *= g;
    }
}

/// CPU H pipeline: inputs padded to m with zeros.
pub fn cpu_h(a: &[Scalar], b: &[Scalar], c: &[Scalar], m: usize) -> Vec<Scalar> {
    let pad = |v: &[Scalar]| {
        let mut x = v.to_vec();
        x.resize(m, Scalar::ZERO);
        cpu_ntt(&mut x, true, false);
        cpu_ntt(&mut x, false, true);
        x
    };
    let (mut a, b, c) = (pad(a), pad(b), pad(c));
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let zinv = (g.pow_vartime([m as u64]) - Scalar::ONE).invert().unwrap();
    a.par_iter_mut().zip(b.par_iter()).zip(c.par_iter()).for_each(|((x, y), z)| *x = (*x * y - z) * zinv);
    cpu_ntt(&mut a, true, true);
    a
}

/// Horner evaluation of coefficients at x.
pub fn horner<F: Field>(coeffs: &[F], x: F) -> F {
    coeffs.iter().rev().fold(F::ZERO, |acc, c| acc * x + c)
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

/// BLS12-381 chain points (G1, G2) over its scalar field.
pub type ChainPoints = Chain<Scalar>;

impl Chain<Scalar> {
    pub fn g1(&self, n: usize) -> Vec<G1Affine> {
        self.points::<G1Projective>(n)
    }
    pub fn g2(&self, n: usize) -> Vec<G2Affine> {
        self.points::<G2Projective>(n)
    }
}

/// Direct reference for small MSMs.
pub fn naive<A: PrimeCurveAffine<Scalar = Scalar>>(points: &[A], terms: &[(Scalar, usize)]) -> A::Curve {
    terms.iter().fold(A::Curve::identity(), |acc, (s, i)| acc + points[*i].to_curve() * s)
}

/// (scalar, point index) pairs that take part, under an optional bitmap.
pub fn terms(scalars: &[Scalar], bitmap: Option<&[u64]>) -> Vec<(Scalar, usize)> {
    let mut rank = 0;
    let mut out = Vec::new();
    for (i, s) in scalars.iter().enumerate() {
        match bitmap {
            None => out.push((*s, i)),
            Some(bm) => {
                if (bm[i / 64] >> (i % 64)) & 1 == 1 {
                    out.push((*s, rank));
                    rank += 1;
                }
            }
        }
    }
    out
}
