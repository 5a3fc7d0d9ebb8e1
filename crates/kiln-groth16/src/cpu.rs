//! The CPU backend: H polynomial through kiln's NTT, MSMs through blst's
//! Pippenger with the zero/one split, points decoded from the mapped
//! parameters in bounded chunks.

use std::sync::Arc;

use blstrs::{G1Projective, G2Projective, Scalar};
use ff::Field;
use group::Group;

use crate::error::{ParamsError, ProveError};
use crate::msm::{msm_g1, msm_g2};
use crate::ntt::{h_polynomial, Domain};
use crate::params::{ParamsFile, Section};
use crate::prover::{MsmResults, PendingMsms, PhaseTimings, ProverBackend, Ready};
use kiln_synth::{Assignment, Density, Products, SynthError};

/// Points decoded at a time: bounds the decoded copy of a section in RAM
/// (2^20 G1 points = 96 MiB) however large the parameter file.
const CHUNK: usize = 1 << 20;

/// Groth16 on the CPU (all cores, via rayon).
#[derive(Clone, Debug, Default)]
pub struct CpuBackend;

impl ProverBackend for CpuBackend {
    fn name(&self) -> String {
        "cpu".into()
    }

    /// a/b/c are copied into domain-sized vectors, and the selected scalars
    /// of the density-filtered MSMs are gathered: about the assignment's size.
    fn host_scratch_ratio(&self) -> f64 {
        1.0
    }

    fn device(&self) -> String {
        "cpu".into()
    }

    /// Another CPU backend: it keeps no state, and its work runs on the
    /// rayon pool of the thread that calls it, so what makes it urgent is
    /// the pool its caller runs it in.
    fn urgent_worker(&self) -> Result<Option<Arc<dyn ProverBackend>>, ProveError> {
        Ok(Some(Arc::new(CpuBackend)))
    }

    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        let mut t = PhaseTimings::default();
        let shape = params.shape();
        let domain = Domain::get(shape.domain().trailing_zeros());
        // Copy a/b/c into owned, domain-sized vectors: the NTT works in place
        // and the caller's buffers may be fixed-size pinned memory. Deferred
        // ones are evaluated into them, every row checked.
        let (mut a, mut b, mut c) = match &asg.products {
            Products::Host => t.time("copy_abc", || {
                let pad = |v: &[Scalar]| {
                    let mut out = Vec::with_capacity(domain.n);
                    out.extend_from_slice(v);
                    out.resize(domain.n, Scalar::ZERO);
                    out
                };
                (pad(asg.a()), pad(asg.b()), pad(asg.c()))
            }),
            Products::Deferred(r1cs) => t.time("abc", || {
                let n = asg.num_constraints;
                let (mut a, mut b, mut c) = (vec![Scalar::ZERO; domain.n], vec![Scalar::ZERO; domain.n], vec![Scalar::ZERO; domain.n]);
                match r1cs.products_checked(0, &asg.input, asg.aux(), [&mut a[..n], &mut b[..n], &mut c[..n]]) {
                    Some(index) => Err(SynthError::Unsatisfied { index, total: n }),
                    None => Ok((a, b, c)),
                }
            })?,
        };
        t.time("h_poly", || h_polynomial(&domain, &mut a, &mut b, &mut c));
        drop((b, c));
        a.truncate(shape.h_len);
        let h = t.time("msm_h", || g1_section_msm(params, Section::H, 0, &a))?;
        drop(a);

        let aux = asg.aux();
        let inputs = &asg.input;
        let l = t.time("msm_l", || g1_section_msm(params, Section::L, 0, aux))?;
        let a_q = t.time("msm_a", || -> Result<_, ProveError> {
            let a_in = g1_section_msm(params, Section::A, 0, inputs)?;
            let sel = select(aux, &asg.a_aux_density);
            Ok(a_in + g1_section_msm(params, Section::A, inputs.len(), &sel)?)
        })?;
        let b_in_sel = select(inputs, &asg.b_input_density);
        let b_aux_sel = select(aux, &asg.b_aux_density);
        let b_g1 = t.time("msm_b_g1", || -> Result<_, ProveError> {
            Ok(g1_section_msm(params, Section::BG1, 0, &b_in_sel)?
                + g1_section_msm(params, Section::BG1, b_in_sel.len(), &b_aux_sel)?)
        })?;
        let b_g2 = t.time("msm_b_g2", || -> Result<_, ProveError> {
            Ok(g2_msm(params, 0, &b_in_sel)? + g2_msm(params, b_in_sel.len(), &b_aux_sel)?)
        })?;
        Ok(Box::new(Ready(MsmResults { h, l, a: a_q, b_g1, b_g2 }, t)))
    }
}

/// The scalars whose density bit is set, in order (they pair with the
/// stored query points one to one).
fn select(values: &[Scalar], density: &Density) -> Vec<Scalar> {
    density.iter_set().map(|i| values[i]).collect()
}

/// `sum scalars[i] * section[first + i]`, decoding points chunk by chunk.
fn g1_section_msm(params: &ParamsFile, section: Section, first: usize, scalars: &[Scalar]) -> Result<G1Projective, ProveError> {
    chunked_msm(first, scalars, |range, pts| params.g1_points(section, range, pts), msm_g1)
}

/// The same over the b_g2 section.
fn g2_msm(params: &ParamsFile, first: usize, scalars: &[Scalar]) -> Result<G2Projective, ProveError> {
    chunked_msm(first, scalars, |range, pts| params.g2_points(range, pts), msm_g2)
}

/// Decode the points paired with each chunk of `scalars` (skipping chunks
/// whose scalars are all zero) and sum the chunk MSMs.
fn chunked_msm<A: Default + Copy, P: Group>(
    first: usize,
    scalars: &[Scalar],
    decode: impl Fn(std::ops::Range<usize>, &mut Vec<A>) -> Result<(), ParamsError>,
    msm: impl Fn(&[A], &[Scalar]) -> P,
) -> Result<P, ProveError> {
    let mut acc = P::identity();
    let mut pts: Vec<A> = Vec::new();
    for (ci, s) in scalars.chunks(CHUNK).enumerate() {
        if s.iter().all(|x| bool::from(x.is_zero())) {
            continue;
        }
        let start = first + ci * CHUNK;
        decode(start..start + s.len(), &mut pts)?;
        acc += msm(&pts, s);
    }
    Ok(acc)
}
