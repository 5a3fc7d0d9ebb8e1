//! kiln's own random-parameter generator: the same parameters bellperson's
//! `generate_random_parameters` makes (same layout, same query filtering),
//! an order of magnitude faster, with progress reporting.
//!
//! The circuit's QAP is evaluated at tau ([`super::qap`]); every point is
//! then `scalar * G` for a fixed generator G ([`super::table`]). The
//! scalars alone ([`SetupScalars`]) are also what a test setup made on the
//! GPU keeps ([`super::test_setup`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use bellpepper_core::{Circuit, SynthesisError};
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use rand_core::RngCore;
use rayon::prelude::*;

use super::qap::{self, Qap};
use super::table::{g1_table, g2_table};

/// Progress of a generation: points done and points in all.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// The toxic waste of a random setup.
#[derive(Clone, Copy, Debug)]
pub struct Secrets {
    pub tau: Scalar,
    pub alpha: Scalar,
    pub beta: Scalar,
    pub gamma: Scalar,
    pub delta: Scalar,
}

impl Secrets {
    pub fn random(rng: &mut impl RngCore) -> Self {
        Secrets {
            tau: Scalar::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
        }
    }

    /// The verifying key over the standard generators, with `ic` = `ic_scalars * G1`.
    pub fn verifying_key(&self, ic_scalars: &[Scalar]) -> VerifyingKey<Bls12> {
        let (g1, g2) = (G1Projective::generator(), G2Projective::generator());
        VerifyingKey::<Bls12> {
            alpha_g1: (g1 * self.alpha).to_affine(),
            beta_g1: (g1 * self.beta).to_affine(),
            beta_g2: (g2 * self.beta).to_affine(),
            gamma_g2: (g2 * self.gamma).to_affine(),
            delta_g1: (g1 * self.delta).to_affine(),
            delta_g2: (g2 * self.delta).to_affine(),
            ic: g1_table().mul_all(ic_scalars, &|_| {}),
        }
    }
}

/// Every point of a proving key as a multiple of the standard generator:
/// the key is `h * G1`, `l * G1`, `a * G1`, `b * G1` and `b * G2`.
/// A third of the key's bytes (a scalar is 32 bytes, a point 96 or 192).
#[derive(Clone, Debug, Default)]
pub struct SetupScalars {
    /// `tau^i Z(tau) / delta`, i < domain - 1.
    pub h: Vec<Scalar>,
    /// `(beta A_i + alpha B_i + C_i) / delta` for every aux variable.
    pub l: Vec<Scalar>,
    /// `A_i(tau)` for every variable (inputs first) whose A is not zero.
    pub a: Vec<Scalar>,
    /// `B_i(tau)` for every variable (inputs first) whose B is not zero.
    pub b: Vec<Scalar>,
    /// How many of `b` belong to inputs.
    pub b_inputs: usize,
}

impl SetupScalars {
    /// The proving-key scalars of `qap` under `secrets`, and the
    /// verifying key's `ic` scalars. Consumes the QAP (it is as large as the
    /// key), freeing each evaluation as soon as it is used.
    pub fn from_qap(qap: Qap, s: &Secrets) -> Result<(Self, Vec<Scalar>), SynthesisError> {
        let Qap { num_inputs: ni, domain, at, bt, ct, z_tau, .. } = qap;
        let (gamma_inv, delta_inv) = (s.gamma.invert().unwrap(), s.delta.invert().unwrap());
        let ext = |i: usize| s.beta * at[i] + s.alpha * bt[i] + ct[i];
        let ic: Vec<Scalar> = (0..ni).map(|i| ext(i) * gamma_inv).collect();
        let l: Vec<Scalar> = (ni..at.len()).into_par_iter().map(|i| ext(i) * delta_inv).collect();
        if l.par_iter().any(|s| bool::from(s.is_zero())) {
            return Err(SynthesisError::UnconstrainedVariable);
        }
        drop(ct);
        // The filter reuses the evaluation's buffer, so it keeps every page the
        // evaluation touched (at 32 GiB ~2 GB over A's and B's lengths);
        // shrinking a buffer that large hands the tail back without a copy.
        let nonzero = |v: Vec<Scalar>| -> Vec<Scalar> {
            let mut kept: Vec<Scalar> = v.into_iter().filter(|s| !bool::from(s.is_zero())).collect();
            kept.shrink_to_fit();
            kept
        };
        let b_inputs = bt[..ni].iter().filter(|s| !bool::from(s.is_zero())).count();
        let (a, b) = (nonzero(at), nonzero(bt));
        let h: Vec<Scalar> = crate::ntt::powers(s.tau, domain - 1).into_par_iter().map(|t| t * z_tau * delta_inv).collect();
        Ok((SetupScalars { h, l, a, b, b_inputs }, ic))
    }

    /// Points in G1 (H, L, A, B) and G2 (B) the key holds.
    pub fn g1_points(&self) -> usize {
        self.h.len() + self.l.len() + self.a.len() + self.b.len()
    }

    /// Host bytes the scalars take (their lengths: `from_qap` shrinks the
    /// buffers to them).
    pub fn bytes(&self) -> u64 {
        ((self.g1_points()) * std::mem::size_of::<Scalar>()) as u64
    }
}

/// Generate random Groth16 parameters for `circuit` (its witness is not
/// needed). `progress(done, total)` is called as points are computed.
pub fn generate_fast<C: Circuit<Scalar> + Clone>(
    circuit: C,
    rng: &mut impl RngCore,
    progress: Progress<'_>,
) -> Result<Parameters<Bls12>, SynthesisError> {
    let secrets = Secrets::random(rng);
    let qap = qap::evaluate(circuit, secrets.tau, &mut |_| Ok(()))?;
    let (sc, ic) = SetupScalars::from_qap(qap, &secrets)?;

    // G2 points cost about three G1 points.
    let total = (sc.g1_points() + 3 * sc.b.len() + ic.len()) as u64;
    let done = AtomicU64::new(0);
    let tick = |n: usize, weight: u64| progress(done.fetch_add(n as u64 * weight, Ordering::Relaxed) + n as u64 * weight, total);
    progress(0, total);
    let (t1, t2) = (g1_table(), g2_table());
    let h = t1.mul_all(&sc.h, &|n| tick(n, 1));
    let l = t1.mul_all(&sc.l, &|n| tick(n, 1));
    let a = t1.mul_all(&sc.a, &|n| tick(n, 1));
    let b_g1 = t1.mul_all(&sc.b, &|n| tick(n, 1));
    let b_g2 = t2.mul_all(&sc.b, &|n| tick(n, 3));
    let vk = secrets.verifying_key(&ic);
    tick(ic.len(), 1);
    Ok(Parameters { vk, h: Arc::new(h), l: Arc::new(l), a: Arc::new(a), b_g1: Arc::new(b_g1), b_g2: Arc::new(b_g2) })
}
