//! The split prover API: `prove_start` (after which the assignment's
//! buffers may be reused) and `finish` (assembly and verification), over
//! any [`ProverBackend`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proof, Proof};
use bellpepper_core::Circuit;
use blstrs::{Bls12, G1Projective, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve};
use rand_core::RngCore;

use crate::error::ProveError;
use crate::params::ParamsFile;
use kiln_synth::{Assignment, AssignmentBuffers, CircuitShape, CompiledR1cs};

/// The five MSM results a backend computes for one proof.
#[derive(Clone, Copy, Debug)]
pub struct MsmResults {
    /// `sum h_i * H_i`.
    pub h: G1Projective,
    /// `sum aux_i * L_i`.
    pub l: G1Projective,
    /// A query: inputs and dense aux.
    pub a: G1Projective,
    /// B query in G1.
    pub b_g1: G1Projective,
    /// B query in G2.
    pub b_g2: G2Projective,
}

/// Wall time spent in each phase of one proof, as measured by the backend.
#[derive(Clone, Debug, Default)]
pub struct PhaseTimings {
    /// (phase name, duration) in the order they ran.
    pub phases: Vec<(&'static str, Duration)>,
}

impl PhaseTimings {
    pub fn push(&mut self, name: &'static str, d: Duration) {
        self.phases.push((name, d));
    }
    /// Run `f`, recording its wall time under `name`.
    pub fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.push(name, t.elapsed());
        out
    }
    pub fn total(&self) -> Duration {
        self.phases.iter().map(|(_, d)| *d).sum()
    }
}

/// Work a backend has started for one proof; `wait` blocks until the MSM
/// results are ready (a GPU backend returns before its kernels finish).
pub trait PendingMsms: Send {
    fn wait(self: Box<Self>) -> Result<(MsmResults, PhaseTimings), ProveError>;
}

/// MSM results that are already computed (the CPU backend's case).
pub struct Ready(pub MsmResults, pub PhaseTimings);

impl PendingMsms for Ready {
    fn wait(self: Box<Self>) -> Result<(MsmResults, PhaseTimings), ProveError> {
        Ok((self.0, self.1))
    }
}

/// Whether a backend evaluates a/b/c of a deferred assignment
/// ([`kiln_synth::Products::Deferred`]) on its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProductsSupport {
    /// No: it would evaluate them on the host (the CPU backend), where
    /// evaluating them during synthesis, beside the witness, is better.
    No,
    /// On its device, but the circuit's matrices do not fit there now:
    /// it would evaluate them on the host and upload them.
    NoRoom,
    /// On its device, from the circuit's matrices kept there.
    Yes,
}

/// A way to compute the H polynomial and the MSMs of a Groth16 proof.
pub trait ProverBackend: Send + Sync {
    /// A short name for logs ("cpu", "gpu:0").
    fn name(&self) -> String;
    /// Start the heavy work for one proof. Returns once `assignment`'s
    /// buffers are no longer needed (they are dropped, returning pinned
    /// buffers to their pool), possibly before the results are ready.
    /// The assignment's shape has already been checked against `params`.
    ///
    /// When the assignment's products are deferred, the backend evaluates
    /// them from the compiled circuit and checks a*b = c on every row
    /// before it uses them (nothing has checked that witness yet); a bad
    /// row is [`kiln_synth::SynthError::Unsatisfied`].
    fn start(&self, params: &Arc<ParamsFile>, assignment: Assignment) -> Result<Box<dyn PendingMsms>, ProveError>;
    /// Whether this backend evaluates the products of a deferred
    /// assignment of `r1cs` against `params` on its device (so that
    /// synthesis may leave them out). Default: [`ProductsSupport::No`].
    fn device_products(&self, params: &ParamsFile, r1cs: &CompiledR1cs) -> ProductsSupport {
        let _ = (params, r1cs);
        ProductsSupport::No
    }
    /// Host memory `start` allocates for one proof, as a multiple of the
    /// assignment's a/b/c + aux bytes (a pipeline reserves it in its budget).
    fn host_scratch_ratio(&self) -> f64;
    /// Parameter sets this backend keeps in device memory (none for a
    /// host-only backend). Workers sharing a device report the same sets.
    fn device_resident(&self) -> Vec<DeviceResidency> {
        Vec::new()
    }
    /// Drops parameter set `params_id` ([`ParamsFile::id`]) from device
    /// memory; proofs under way keep their copy until they finish. Returns
    /// the device bytes that will be freed (0 if it was not resident).
    fn evict_device(&self, params_id: u64) -> u64 {
        let _ = params_id;
        0
    }
    /// Host memory this backend's device will hold for `params` beyond the
    /// parameters' own bytes once it places them: a test setup whose points
    /// do not all fit in VRAM keeps the rest in host memory, read back from
    /// the device. 0 when `params` are placed already or nothing stays on
    /// the host. A pipeline reserves it with the parameters (once per
    /// device) and calls [`ProverBackend::evict_device`] when it lets them
    /// go. Default: 0.
    fn placement_host_bytes(&self, params: &ParamsFile) -> u64 {
        let _ = params;
        0
    }
    /// What the work runs on ("cpu", "gpu0"): workers reporting the same
    /// device share it. Default: the worker's name.
    fn device(&self) -> String {
        self.name()
    }
    /// A new worker on the same device for deadline work, whose work goes
    /// ahead of this one's (a GPU worker's streams at the device's highest
    /// priority), for a pipeline to give only its urgent proofs.
    /// `Ok(None)`: this backend has no such worker. Default: none.
    fn urgent_worker(&self) -> Result<Option<Arc<dyn ProverBackend>>, ProveError> {
        Ok(None)
    }
    /// The accelerator this worker runs on and its memory now, for status
    /// pages (`None`: a host-only backend). Workers sharing a device
    /// report the same one, so a caller lists each [`ProverBackend::device`] once.
    fn device_status(&self) -> Option<DeviceStatus> {
        None
    }
}

/// One accelerator behind a backend, as a status page shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceStatus {
    /// The driver's ordinal of the device.
    pub ordinal: usize,
    pub name: String,
    /// Streaming multiprocessors (or the device's equivalent).
    pub sm_count: u32,
    /// (major, minor), e.g. (9, 0) for an H100/H200.
    pub compute_capability: (i32, i32),
    pub total_memory: u64,
    /// Free device memory now; `None` when the driver did not answer.
    pub free_memory: Option<u64>,
}

/// One parameter set held in one device's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceResidency {
    /// The device, e.g. "gpu0".
    pub device: String,
    /// [`ParamsFile::id`] of the parameters.
    pub params_id: u64,
    /// VRAM its resident points take.
    pub bytes: u64,
    /// Points that did not fit and are streamed from the host per proof.
    pub streamed_bytes: u64,
}

/// The Groth16 randomizers of one proof.
#[derive(Clone, Copy, Debug)]
pub struct Randomness {
    pub r: Scalar,
    pub s: Scalar,
}

impl Randomness {
    pub fn random(rng: &mut impl RngCore) -> Self {
        Randomness { r: Scalar::random(&mut *rng), s: Scalar::random(&mut *rng) }
    }
}

/// A proof whose heavy work is under way.
pub struct PendingProof {
    params: Arc<ParamsFile>,
    msms: Box<dyn PendingMsms>,
    public_inputs: Vec<Scalar>,
    randomness: Randomness,
    started: Instant,
    start_timings: PhaseTimings,
}

/// A finished, verified proof with how long its phases took.
#[derive(Clone, Debug)]
pub struct ProvedProof {
    pub proof: Proof<Bls12>,
    pub timings: PhaseTimings,
}

impl ProvedProof {
    /// bellperson's 192-byte encoding (compressed A, B, C).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(192);
        self.proof.write(&mut v).expect("writing to a Vec cannot fail");
        v
    }
}

/// Check that `shape` is the circuit `params` were made for.
pub fn check_shape(params: &ParamsFile, shape: &CircuitShape) -> Result<(), ProveError> {
    let p = params.shape();
    let mismatch = |what, circuit, params| Err(ProveError::ShapeMismatch { what, circuit, params });
    if shape.num_inputs != p.num_inputs {
        return mismatch("the number of public inputs (with ONE)", shape.num_inputs, p.num_inputs);
    }
    if shape.domain() != p.domain() {
        return mismatch("the evaluation domain", shape.domain(), p.domain());
    }
    if shape.num_aux != p.l_len {
        return mismatch("the number of aux variables", shape.num_aux, p.l_len);
    }
    if shape.num_inputs + shape.a_aux_count != p.a_len {
        return mismatch("the A query size", shape.num_inputs + shape.a_aux_count, p.a_len);
    }
    let b = shape.b_input_count + shape.b_aux_count;
    if b != p.b_g1_len {
        return mismatch("the B query size (G1)", b, p.b_g1_len);
    }
    if b != p.b_g2_len {
        return mismatch("the B query size (G2)", b, p.b_g2_len);
    }
    Ok(())
}

/// Start a proof: check the assignment against the parameters (and that it
/// satisfies its constraints: here for a/b/c on the host, by the backend
/// as it evaluates deferred ones), then hand it to the backend.
pub fn prove_start(
    backend: &dyn ProverBackend,
    params: &Arc<ParamsFile>,
    assignment: Assignment,
    randomness: Randomness,
) -> Result<PendingProof, ProveError> {
    let started = Instant::now();
    let mut start_timings = PhaseTimings::default();
    check_shape(params, &assignment.shape())?;
    if assignment.products_on_host() {
        start_timings.time("check_satisfied", || assignment.check_satisfied())?;
    }
    if bool::from(params.vk().delta_g1.is_identity() | params.vk().delta_g2.is_identity()) {
        return Err(ProveError::UnexpectedIdentity);
    }
    let public_inputs = assignment.input[1..].to_vec();
    let t = Instant::now();
    let msms = backend.start(params, assignment)?;
    start_timings.push("backend_start", t.elapsed());
    Ok(PendingProof { params: params.clone(), msms, public_inputs, randomness, started, start_timings })
}

/// Wait for the backend, assemble the proof and verify it. An unverified
/// proof is never returned.
pub fn finish(pending: PendingProof) -> Result<ProvedProof, ProveError> {
    let PendingProof { params, msms, public_inputs, randomness, started, start_timings } = pending;
    let (m, backend_timings) = msms.wait()?;
    let mut timings = start_timings;
    timings.phases.extend(backend_timings.phases);
    let proof = timings.time("assemble", || assemble(&params, &m, randomness));
    let ok = timings.time("verify", || verify_proof(params.prepared_vk(), &proof, &public_inputs));
    match ok {
        Ok(true) => {}
        Ok(false) => return Err(ProveError::NotVerified("pairing check failed".into())),
        Err(e) => return Err(ProveError::NotVerified(e.to_string())),
    }
    tracing::debug!(total_ms = started.elapsed().as_millis() as u64, "proof finished and verified");
    Ok(ProvedProof { proof, timings })
}

/// A = alpha + a + r*delta; B = beta + b + s*delta;
/// C = s*a + r*b_g1 + r*s*delta + s*alpha + r*beta + h + l
/// (s*A + r*B - r*s*delta, expanded, as bellperson computes it).
fn assemble(params: &ParamsFile, m: &MsmResults, Randomness { r, s }: Randomness) -> Proof<Bls12> {
    let vk = params.vk();
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let g_a = G1Projective::from(vk.alpha_g1) + m.a + delta_g1 * r;
    let g_b = G2Projective::from(vk.beta_g2) + m.b_g2 + G2Projective::from(vk.delta_g2) * s;
    let g_c = m.a * s
        + m.b_g1 * r
        + delta_g1 * (r * s)
        + G1Projective::from(vk.alpha_g1) * s
        + G1Projective::from(vk.beta_g1) * r
        + m.h
        + m.l;
    Proof { a: g_a.to_affine(), b: g_b.to_affine(), c: g_c.to_affine() }
}

/// Synthesize `circuit` into heap buffers and prove it in one call.
pub fn prove<C: Circuit<Scalar>>(
    backend: &dyn ProverBackend,
    params: &Arc<ParamsFile>,
    circuit: C,
    rng: &mut impl RngCore,
) -> Result<ProvedProof, ProveError> {
    let p = params.shape();
    let mut t = PhaseTimings::default();
    let assignment =
        t.time("synthesize", || kiln_synth::synthesize(circuit, AssignmentBuffers::heap_with_capacity(p.domain(), p.l_len)))?;
    let pending = prove_start(backend, params, assignment, Randomness::random(rng))?;
    let mut proved = finish(pending)?;
    t.phases.append(&mut proved.timings.phases);
    proved.timings = t;
    Ok(proved)
}
