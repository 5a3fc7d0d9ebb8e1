//! Fixed-base multiplication tables: `d * 2^(8k) * G` for every byte value d
//! and window k, so `s * G` is the sum of one entry per byte of s (at most
//! 32 mixed additions instead of a full scalar multiplication). Built once
//! per generator; the GPU's fixed-base kernel reads the same table.

use std::sync::OnceLock;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::{Curve, Group};
use rayon::prelude::*;

/// The table of one generator: 32 windows of 256 affine points (entry 0 of
/// each window is the point at infinity and never added).
pub struct WindowTable<P: Curve> {
    windows: Vec<Vec<P::AffineRepr>>,
}

impl<P> WindowTable<P>
where
    P: Curve + Group<Scalar = Scalar> + Send + Sync + for<'x> std::ops::AddAssign<&'x P::AffineRepr>,
    P::AffineRepr: Send + Sync + Copy + Default,
{
    pub fn new(g: P) -> Self {
        let mut base = g;
        let windows = (0..32)
            .map(|_| {
                let mut proj = vec![P::identity(); 256];
                for d in 1..256 {
                    proj[d] = proj[d - 1] + base;
                }
                for _ in 0..8 {
                    base = base.double();
                }
                let mut aff = vec![P::AffineRepr::default(); 256];
                P::batch_normalize(&proj, &mut aff);
                aff
            })
            .collect();
        WindowTable { windows }
    }

    /// `s * G` in projective form.
    pub fn mul(&self, s: &Scalar) -> P {
        let mut acc = P::identity();
        for (k, &d) in s.to_bytes_le().iter().enumerate() {
            if d != 0 {
                acc += &self.windows[k][d as usize];
            }
        }
        acc
    }

    /// `s * G` for every scalar, affine, on every core; `tick(n)` after
    /// each block of n points.
    pub fn mul_all(&self, scalars: &[Scalar], tick: &(dyn Fn(usize) + Sync)) -> Vec<P::AffineRepr> {
        let mut out = vec![P::AffineRepr::default(); scalars.len()];
        self.mul_into(scalars, &mut out, tick);
        out
    }

    /// As [`mul_all`](Self::mul_all), into `out` (`out.len() == scalars.len()`).
    pub fn mul_into(&self, scalars: &[Scalar], out: &mut [P::AffineRepr], tick: &(dyn Fn(usize) + Sync)) {
        assert_eq!(scalars.len(), out.len(), "one point per scalar");
        out.par_chunks_mut(1024).zip(scalars.par_chunks(1024)).for_each(|(o, s)| {
            let proj: Vec<P> = s.iter().map(|s| self.mul(s)).collect();
            P::batch_normalize(&proj, o);
            tick(s.len());
        });
    }

    /// The table flattened, entry `k * 256 + d` = `d * 2^(8k) * G`: the
    /// layout the GPU's fixed-base kernel reads (`kiln_gpu::WINDOW_TABLE_LEN` points).
    pub fn flat(&self) -> Vec<P::AffineRepr> {
        self.windows.concat()
    }
}

/// The table of the standard G1 generator (built on first use, ~0.1 s).
pub fn g1_table() -> &'static WindowTable<G1Projective> {
    static T: OnceLock<WindowTable<G1Projective>> = OnceLock::new();
    T.get_or_init(|| WindowTable::new(G1Projective::generator()))
}

/// The table of the standard G2 generator.
pub fn g2_table() -> &'static WindowTable<G2Projective> {
    static T: OnceLock<WindowTable<G2Projective>> = OnceLock::new();
    T.get_or_init(|| WindowTable::new(G2Projective::generator()))
}

const _: () = assert!(std::mem::size_of::<G1Affine>() == 96 && std::mem::size_of::<G2Affine>() == 192);

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use rand::SeedableRng;

    #[test]
    fn table_multiples_equal_scalar_multiplication() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut scalars: Vec<Scalar> = (0..40).map(|_| Scalar::random(&mut rng)).collect();
        scalars.extend([Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(255u64), Scalar::from(256u64)]);
        let g1 = g1_table().mul_all(&scalars, &|_| {});
        let g2 = g2_table().mul_all(&scalars, &|_| {});
        for (i, s) in scalars.iter().enumerate() {
            assert_eq!(g1[i], (G1Projective::generator() * s).to_affine(), "G1, scalar {i}");
            assert_eq!(g2[i], (G2Projective::generator() * s).to_affine(), "G2, scalar {i}");
        }
        let flat = g1_table().flat();
        assert_eq!(flat.len(), 32 * 256);
        assert_eq!(flat[5 * 256 + 7], (G1Projective::generator() * Scalar::from(7u64 << 40)).to_affine());
    }
}
