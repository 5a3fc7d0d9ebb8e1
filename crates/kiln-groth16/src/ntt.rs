//! Number-theoretic transforms over BLS12-381's scalar field (CPU, rayon).
//!
//! Radix-2, decimation in time. The first stages run inside cache-sized
//! blocks (one pass over memory for all of them); the remaining stages are
//! done one pass each, parallel over butterflies.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use blstrs::Scalar;
use ff::{Field, PrimeField};
use rayon::prelude::*;

/// Elements per cache block for the first stages (2^12 * 32 B = 128 KiB).
const LOG_BLOCK: u32 = 12;
/// Below this many elements per task, rayon splitting costs more than it saves.
const MIN_PAR: usize = 1 << 11;

/// An evaluation domain of size `2^log_n` with its twiddle factors.
pub struct Domain {
    pub log_n: u32,
    pub n: usize,
    /// Twiddles `omega^i`, `i < n/2`.
    tw: Vec<Scalar>,
    /// Twiddles `omega^-i`, `i < n/2`.
    itw: Vec<Scalar>,
    pub n_inv: Scalar,
}

impl Domain {
    /// The domain of size `2^log_n`, built once per size and shared.
    pub fn get(log_n: u32) -> Arc<Domain> {
        static CACHE: OnceLock<Mutex<HashMap<u32, Arc<Domain>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(d) = cache.lock().expect("domain cache").get(&log_n) {
            return d.clone();
        }
        let d = Arc::new(Domain::new(log_n));
        cache.lock().expect("domain cache").entry(log_n).or_insert(d).clone()
    }

    fn new(log_n: u32) -> Self {
        assert!(log_n <= Scalar::S, "domain 2^{log_n} exceeds the field's 2-adicity {}", Scalar::S);
        let n = 1usize << log_n;
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        let omega_inv = omega.invert().unwrap();
        Domain {
            log_n,
            n,
            tw: powers(omega, n / 2),
            itw: powers(omega_inv, n / 2),
            n_inv: Scalar::from(n as u64).invert().unwrap(),
        }
    }

    /// Evaluations from coefficients (in place).
    pub fn fft(&self, v: &mut [Scalar]) {
        self.transform(v, &self.tw);
    }

    /// Coefficients from evaluations, without the 1/n factor (callers fold
    /// it into their next pointwise pass).
    pub fn ifft_unscaled(&self, v: &mut [Scalar]) {
        self.transform(v, &self.itw);
    }

    /// Coefficients from evaluations (in place).
    pub fn ifft(&self, v: &mut [Scalar]) {
        self.ifft_unscaled(v);
        scale(v, self.n_inv);
    }

    fn transform(&self, v: &mut [Scalar], tw: &[Scalar]) {
        assert_eq!(v.len(), self.n, "vector length must equal the domain size");
        if self.n == 1 {
            return;
        }
        bit_reverse(v, self.log_n);
        let log_block = LOG_BLOCK.min(self.log_n);
        let block = 1usize << log_block;
        // Stages whose butterflies stay inside one block.
        v.par_chunks_mut(block).for_each(|b| {
            for s in 0..log_block {
                let half = 1usize << s;
                let stride = self.n >> (s + 1);
                for pair in b.chunks_mut(2 * half) {
                    let (lo, hi) = pair.split_at_mut(half);
                    butterflies(lo, hi, tw, 0, stride);
                }
            }
        });
        // The rest: one pass per stage.
        for s in log_block..self.log_n {
            let half = 1usize << s;
            let stride = self.n >> (s + 1);
            v.par_chunks_mut(2 * half).for_each(|pair| {
                let (lo, hi) = pair.split_at_mut(half);
                lo.par_chunks_mut(MIN_PAR)
                    .zip(hi.par_chunks_mut(MIN_PAR))
                    .enumerate()
                    .for_each(|(i, (l, h))| butterflies(l, h, tw, i * MIN_PAR, stride));
            });
        }
    }
}

#[inline]
fn butterflies(lo: &mut [Scalar], hi: &mut [Scalar], tw: &[Scalar], first: usize, stride: usize) {
    for (k, (x, y)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let t = *y * tw[(first + k) * stride];
        *y = *x - t;
        *x += t;
    }
}

fn bit_reverse(v: &mut [Scalar], log_n: u32) {
    let shift = usize::BITS - log_n;
    for i in 0..v.len() {
        let j = i.reverse_bits() >> shift;
        if i < j {
            v.swap(i, j);
        }
    }
}

/// `[1, g, g^2, .., g^(n-1)]`, in parallel.
pub fn powers(g: Scalar, n: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(MIN_PAR).enumerate().for_each(|(ci, c)| {
        let mut x = g.pow_vartime([(ci * MIN_PAR) as u64]);
        for e in c {
            *e = x;
            x *= g;
        }
    });
    out
}

/// `v[i] *= c * g^i`, in parallel.
pub fn mul_by_powers(v: &mut [Scalar], c: Scalar, g: Scalar) {
    v.par_chunks_mut(MIN_PAR).enumerate().for_each(|(ci, chunk)| {
        let mut x = c * g.pow_vartime([(ci * MIN_PAR) as u64]);
        for e in chunk {
            *e *= x;
            x *= g;
        }
    });
}

/// `v[i] *= c`, in parallel.
pub fn scale(v: &mut [Scalar], c: Scalar) {
    v.par_chunks_mut(MIN_PAR).for_each(|chunk| chunk.iter_mut().for_each(|e| *e *= c));
}

/// The coset generator (the field's multiplicative generator, as bellperson uses).
pub fn coset_generator() -> Scalar {
    Scalar::MULTIPLICATIVE_GENERATOR
}

/// The Groth16 quotient: given the evaluations a, b, c of the constraint
/// polynomials over the domain (each padded with zeros to `domain.n`),
/// compute the coefficients of `h = (a*b - c) / Z` into `a`. `b` and `c` are
/// used as scratch. Only the first `n - 1` coefficients can be non-zero.
pub fn h_polynomial(domain: &Domain, a: &mut [Scalar], b: &mut [Scalar], c: &mut [Scalar]) {
    let g = coset_generator();
    let g_inv = g.invert().unwrap();
    // iNTT, then move to the coset; the 1/n of the iNTT is folded into the
    // coset shift so each vector takes one pointwise pass, not two.
    for v in [&mut *a, &mut *b, &mut *c] {
        domain.ifft_unscaled(v);
        mul_by_powers(v, domain.n_inv, g);
        domain.fft(v);
    }
    // On the coset, Z(g w^i) = g^n - 1 for every i.
    let z_inv = (g.pow_vartime([domain.n as u64]) - Scalar::ONE).invert().unwrap();
    a.par_chunks_mut(MIN_PAR)
        .zip(b.par_chunks(MIN_PAR))
        .zip(c.par_chunks(MIN_PAR))
        .for_each(|((a, b), c)| {
            for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                *a = (*a * b - c) * z_inv;
            }
        });
    domain.ifft_unscaled(a);
    mul_by_powers(a, domain.n_inv, g_inv);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Direct O(n^2) evaluation: the reference the fast transform must match.
    fn naive_eval(coeffs: &[Scalar], log_n: u32) -> Vec<Scalar> {
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in log_n..Scalar::S {
            omega = omega.square();
        }
        (0..coeffs.len())
            .map(|i| {
                let x = omega.pow_vartime([i as u64]);
                coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c)
            })
            .collect()
    }

    #[test]
    fn fft_matches_naive_and_inverts() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        for log_n in [0, 1, 2, 3, 5, 8, 13] {
            let d = Domain::get(log_n);
            let v: Vec<Scalar> = (0..d.n).map(|_| Scalar::random(&mut rng)).collect();
            let mut w = v.clone();
            d.fft(&mut w);
            if log_n <= 8 {
                assert_eq!(w, naive_eval(&v, log_n), "log_n {log_n}");
            }
            d.ifft(&mut w);
            assert_eq!(w, v, "roundtrip log_n {log_n}");
        }
    }

    #[test]
    fn h_polynomial_divides() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        let log_n = 6;
        let d = Domain::get(log_n);
        let n = d.n;
        let a: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let b: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        // Over the domain, c = a*b exactly (evaluations); h must come out 0.
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
        let (mut a2, mut b2, mut c2) = (a.clone(), b.clone(), c.clone());
        h_polynomial(&d, &mut a2, &mut b2, &mut c2);
        // a*b - c vanishes on the domain but a*b has degree up to 2n-2, so
        // h is the true quotient; verify a(x)b(x) - c(x) = h(x) Z(x) at a random point.
        let x = Scalar::random(&mut rng);
        let ev = |coeffs: &[Scalar]| coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c);
        let (mut ac, mut bc, mut cc) = (a.clone(), b.clone(), c.clone());
        d.ifft(&mut ac);
        d.ifft(&mut bc);
        d.ifft(&mut cc);
        let z = x.pow_vartime([n as u64]) - Scalar::ONE;
        assert_eq!(ev(&ac) * ev(&bc) - ev(&cc), ev(&a2) * z);
        assert_eq!(a2[n - 1], Scalar::ZERO, "degree of h is at most n-2");
    }
}
