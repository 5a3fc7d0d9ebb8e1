//! kiln's own random-parameter generator: the same parameters bellperson's
//! `generate_random_parameters` makes (same layout, same query filtering),
//! an order of magnitude faster, with progress reporting.
//!
//! Two passes over the circuit's structure: one counts constraints (to fix the
//! domain), the next accumulates each variable's QAP polynomials evaluated at
//! tau through the Lagrange basis. Every point is then `scalar * G` for a
//! fixed generator G, done with a table of 32 byte-windows (32 mixed
//! additions per point instead of a full scalar multiplication).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use std::sync::OnceLock;

use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::{Curve, Group};
use rand_core::RngCore;
use rayon::prelude::*;

use kiln_synth::CircuitShape;

/// Progress of a generation: points done and points in all.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Generate random Groth16 parameters for `circuit` (its witness is not
/// needed). `progress(done, total)` is called as points are computed.
pub fn generate_fast<C: Circuit<Scalar> + Clone>(
    circuit: C,
    rng: &mut impl RngCore,
    progress: Progress<'_>,
) -> Result<Parameters<Bls12>, SynthesisError> {
    let shape = CircuitShape::of(circuit.clone())?;
    let m = shape.domain();
    let log_m = m.trailing_zeros();

    let tau = Scalar::random(&mut *rng);
    let alpha = Scalar::random(&mut *rng);
    let beta = Scalar::random(&mut *rng);
    let gamma = Scalar::random(&mut *rng);
    let delta = Scalar::random(&mut *rng);
    // The standard generators: the secrets are tau, alpha, beta, gamma and
    // delta, and fixed generators let the window tables be built once.
    let (g1, g2) = (G1Projective::generator(), G2Projective::generator());
    let (gamma_inv, delta_inv) = (gamma.invert().unwrap(), delta.invert().unwrap());

    // L_i(tau) = (tau^m - 1)/m * w^i / (tau - w^i).
    let mut omega = Scalar::ROOT_OF_UNITY;
    for _ in log_m..Scalar::S {
        omega = omega.square();
    }
    let z_tau = tau.pow_vartime([m as u64]) - Scalar::ONE;
    let omegas = crate::ntt::powers(omega, m);
    let mut lagrange: Vec<Scalar> = omegas.par_iter().map(|w| tau - w).collect();
    batch_invert(&mut lagrange);
    let scale = z_tau * Scalar::from(m as u64).invert().unwrap();
    lagrange.par_iter_mut().zip(omegas.par_iter()).for_each(|(l, w)| *l *= scale * w);

    // Evaluate every variable's A, B, C polynomials at tau.
    let mut qap = QapCs::new(&lagrange, shape.num_inputs, shape.num_aux);
    qap.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut qap)?;
    for i in 0..qap.inputs {
        qap.enforce(|| "", |lc| lc + Variable::new_unchecked(Index::Input(i)), |lc| lc, |lc| lc);
    }
    if qap.inputs != shape.num_inputs || qap.aux != shape.num_aux || qap.next != shape.num_constraints {
        // The circuit's structure depends on something other than itself.
        return Err(SynthesisError::Unsatisfiable);
    }
    let QapCs { at, bt, ct, .. } = qap;
    let ni = shape.num_inputs;

    let ext = |i: usize| beta * at[i] + alpha * bt[i] + ct[i];
    let ic_s: Vec<Scalar> = (0..ni).map(|i| ext(i) * gamma_inv).collect();
    let l_s: Vec<Scalar> = (ni..at.len()).into_par_iter().map(|i| ext(i) * delta_inv).collect();
    if l_s.par_iter().any(|s| bool::from(s.is_zero())) {
        return Err(SynthesisError::UnconstrainedVariable);
    }
    let nonzero = |v: &[Scalar]| -> Vec<Scalar> { v.iter().copied().filter(|s| !bool::from(s.is_zero())).collect() };
    let a_s = nonzero(&at);
    let b_s = nonzero(&bt);
    let h_s: Vec<Scalar> = crate::ntt::powers(tau, m - 1).into_par_iter().map(|t| t * z_tau * delta_inv).collect();

    // G2 points cost about three G1 points.
    let total = (h_s.len() + l_s.len() + a_s.len() + b_s.len() + ic_s.len() + 3 * b_s.len()) as u64;
    let done = AtomicU64::new(0);
    let tick = |n: usize, weight: u64| progress(done.fetch_add(n as u64 * weight, Ordering::Relaxed) + n as u64 * weight, total);
    progress(0, total);

    static TABLES: OnceLock<(Table<G1Projective>, Table<G2Projective>)> = OnceLock::new();
    let (t1, t2) = TABLES.get_or_init(|| (Table::new(G1Projective::generator()), Table::new(G2Projective::generator())));
    let h = t1.mul_all(&h_s, &|n| tick(n, 1));
    let l = t1.mul_all(&l_s, &|n| tick(n, 1));
    let a = t1.mul_all(&a_s, &|n| tick(n, 1));
    let b_g1 = t1.mul_all(&b_s, &|n| tick(n, 1));
    let b_g2 = t2.mul_all(&b_s, &|n| tick(n, 3));
    let ic = t1.mul_all(&ic_s, &|n| tick(n, 1));

    let (g1a, g2a) = (g1.to_affine(), g2.to_affine());
    let vk = VerifyingKey::<Bls12> {
        alpha_g1: (g1a * alpha).to_affine(),
        beta_g1: (g1a * beta).to_affine(),
        beta_g2: (g2a * beta).to_affine(),
        gamma_g2: (g2a * gamma).to_affine(),
        delta_g1: (g1a * delta).to_affine(),
        delta_g2: (g2a * delta).to_affine(),
        ic,
    };
    Ok(Parameters { vk, h: Arc::new(h), l: Arc::new(l), a: Arc::new(a), b_g1: Arc::new(b_g1), b_g2: Arc::new(b_g2) })
}

/// Montgomery's batch inversion, in parallel chunks (no element is zero:
/// tau is not in the domain with overwhelming probability).
fn batch_invert(v: &mut [Scalar]) {
    v.par_chunks_mut(1 << 12).for_each(|chunk| {
        let mut prefix = Vec::with_capacity(chunk.len());
        let mut acc = Scalar::ONE;
        for x in chunk.iter() {
            prefix.push(acc);
            acc *= x;
        }
        let mut inv = acc.invert().unwrap();
        for (x, p) in chunk.iter_mut().zip(prefix).rev() {
            let next = inv * *x;
            *x = inv * p;
            inv = next;
        }
    });
}

/// A constraint system that accumulates, per variable, its A/B/C
/// polynomials evaluated at tau (sum of coeff * L_i(tau) over constraints i).
struct QapCs<'a> {
    lagrange: &'a [Scalar],
    inputs: usize,
    aux: usize,
    next: usize,
    /// Indexed inputs first, then aux (as the A/B queries are laid out).
    at: Vec<Scalar>,
    bt: Vec<Scalar>,
    ct: Vec<Scalar>,
    num_inputs: usize,
}

impl<'a> QapCs<'a> {
    fn new(lagrange: &'a [Scalar], num_inputs: usize, num_aux: usize) -> Self {
        let n = num_inputs + num_aux;
        QapCs { lagrange, inputs: 0, aux: 0, next: 0, at: vec![Scalar::ZERO; n], bt: vec![Scalar::ZERO; n], ct: vec![Scalar::ZERO; n], num_inputs }
    }

    fn add(&mut self, which: usize, lc: &LinearCombination<Scalar>, li: Scalar) {
        for (var, coeff) in lc.iter() {
            let idx = match var.get_unchecked() {
                Index::Input(i) => i,
                Index::Aux(i) => self.num_inputs + i,
            };
            let Some(slot) = [&mut self.at, &mut self.bt, &mut self.ct][which].get_mut(idx) else { continue };
            *slot += li * coeff;
        }
    }
}

impl ConstraintSystem<Scalar> for QapCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let li = self.lagrange.get(self.next).copied().unwrap_or(Scalar::ZERO);
        self.next += 1;
        self.add(0, &a(LinearCombination::zero()), li);
        self.add(1, &b(LinearCombination::zero()), li);
        self.add(2, &c(LinearCombination::zero()), li);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// `d * 2^(8k) * G` for every byte value d and window k: a scalar times G is
/// then the sum of one entry per byte of the scalar.
struct Table<P: Curve> {
    windows: Vec<Vec<P::AffineRepr>>,
}

impl<P> Table<P>
where
    P: Curve + Group<Scalar = Scalar> + Send + Sync + for<'x> std::ops::AddAssign<&'x P::AffineRepr>,
    P::AffineRepr: Send + Sync + Copy + Default,
{
    fn new(g: P) -> Self {
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
        Table { windows }
    }

    fn mul_all(&self, scalars: &[Scalar], tick: &(dyn Fn(usize) + Sync)) -> Vec<P::AffineRepr> {
        let mut out = vec![P::AffineRepr::default(); scalars.len()];
        out.par_chunks_mut(1024).zip(scalars.par_chunks(1024)).for_each(|(o, s)| {
            let proj: Vec<P> = s
                .iter()
                .map(|s| {
                    let bytes = s.to_bytes_le();
                    let mut acc = P::identity();
                    for (k, &d) in bytes.iter().enumerate() {
                        if d != 0 {
                            acc += &self.windows[k][d as usize];
                        }
                    }
                    acc
                })
                .collect();
            P::batch_normalize(&proj, o);
            tick(s.len());
        });
        out
    }
}
