//! Multi-scalar multiplication on the CPU, over blst's Pippenger.
//!
//! Before Pippenger runs, scalars are sorted into three kinds: zero (skipped),
//! one (the point is simply added, with blst's batch-affine addition) and the
//! rest. Filecoin witnesses are mostly bits, so this removes most of the work.
//! Work is split into one piece per rayon thread; each piece is one blst call.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::Group;
use rayon::prelude::*;

use crate::blst_ffi::BlstCurve;

/// Below this many points per piece, splitting across threads does not pay.
const MIN_PIECE: usize = 1 << 12;

/// `sum scalars[i] * points[i]` in G1.
pub fn msm_g1(points: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    msm::<G1Affine>(points, scalars)
}

/// `sum scalars[i] * points[i]` in G2.
pub fn msm_g2(points: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
    msm::<G2Affine>(points, scalars)
}

/// Counts of the scalar kinds in one MSM (for tracing and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScalarMix {
    pub zeros: usize,
    pub ones: usize,
    pub others: usize,
}

/// Classify scalars: the zero/one/other split that decides the MSM's cost.
pub fn scalar_mix(scalars: &[Scalar]) -> ScalarMix {
    scalars
        .par_iter()
        .fold(ScalarMix::default, |mut m, s| {
            if bool::from(s.is_zero()) {
                m.zeros += 1
            } else if *s == Scalar::ONE {
                m.ones += 1
            } else {
                m.others += 1
            }
            m
        })
        .reduce(ScalarMix::default, |a, b| ScalarMix {
            zeros: a.zeros + b.zeros,
            ones: a.ones + b.ones,
            others: a.others + b.others,
        })
}

fn msm<A: BlstCurve>(points: &[A], scalars: &[Scalar]) -> A::Projective {
    assert_eq!(points.len(), scalars.len(), "MSM needs one scalar per point");
    let threads = rayon::current_num_threads().max(1);
    let piece = points.len().div_ceil(threads).max(MIN_PIECE);
    points
        .par_chunks(piece)
        .zip(scalars.par_chunks(piece))
        .map(|(p, s)| msm_piece(p, s))
        .reduce(A::Projective::identity, |a, b| a + b)
}

/// One thread's share: split off ones and zeros, Pippenger over the rest.
fn msm_piece<A: BlstCurve>(points: &[A], scalars: &[Scalar]) -> A::Projective {
    let mut ones: Vec<&A> = Vec::new();
    let mut big_points: Vec<&A> = Vec::with_capacity(points.len());
    let mut big_scalars: Vec<[u8; 32]> = Vec::with_capacity(points.len());
    for (p, s) in points.iter().zip(scalars) {
        if bool::from(s.is_zero()) {
            continue;
        }
        if *s == Scalar::ONE {
            ones.push(p);
        } else {
            big_points.push(p);
            big_scalars.push(s.to_bytes_le());
        }
    }
    A::sum(&ones) + A::pippenger(&big_points, &big_scalars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;
    use rand::SeedableRng;

    fn naive<P: Group<Scalar = Scalar>>(points: &[P], scalars: &[Scalar]) -> P {
        points.iter().zip(scalars).fold(P::identity(), |acc, (p, s)| acc + *p * s)
    }

    #[test]
    fn matches_naive_on_mixed_scalars_g1_g2() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [0usize, 1, 2, 3, 17, 100, 5000] {
            let proj: Vec<G1Projective> = (0..n).map(|_| G1Projective::random(&mut rng)).collect();
            let mut aff = vec![G1Affine::default(); n];
            G1Projective::batch_normalize(&proj, &mut aff);
            let minus_one = -Scalar::ONE;
            let scalars: Vec<Scalar> = (0..n)
                .map(|i| match i % 5 {
                    0 => Scalar::ZERO,
                    1 => Scalar::ONE,
                    2 => minus_one,
                    _ => Scalar::random(&mut rng),
                })
                .collect();
            assert_eq!(msm_g1(&aff, &scalars), naive(&proj, &scalars), "G1 n={n}");
            if n <= 100 {
                let p2: Vec<G2Projective> = (0..n).map(|_| G2Projective::random(&mut rng)).collect();
                let a2: Vec<G2Affine> = p2.iter().map(|p| p.to_affine()).collect();
                assert_eq!(msm_g2(&a2, &scalars), naive(&p2, &scalars), "G2 n={n}");
            }
        }
    }

    #[test]
    fn repeated_points_and_identity() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
        let p = G1Projective::random(&mut rng);
        let aff = vec![p.to_affine(); 9];
        let scalars = vec![Scalar::ONE; 9];
        assert_eq!(msm_g1(&aff, &scalars), p * Scalar::from(9u64));
        let with_inf = vec![G1Affine::default(), p.to_affine()];
        let s = vec![Scalar::from(5u64), Scalar::from(3u64)];
        assert_eq!(msm_g1(&with_inf, &s), p * Scalar::from(3u64));
    }
}
