//! Test setups: random Groth16 parameters for circuits whose published
//! parameters are not at hand (production sizes on a test machine), made
//! in seconds to minutes and never written whole to disk.
//!
//! The proving key is kept as the scalars of its points ([`SetupScalars`],
//! a third of the file's size): the GPU backend turns them into points in
//! its own memory once (fixed-base multiplication on the device), the CPU
//! backend chunk by chunk as it proves. Only the verifying key is small
//! enough to write, and that is all a verifier needs.
//!
//! The secrets come from a seed, so the same seed and circuit give the same
//! keys in every process: a daemon that restarts finds the `.vk` it wrote
//! before still valid. These parameters are a local random "ceremony" whose
//! secrets anyone with the seed knows: for tests and benchmarks only.

use bellpepper_core::{Circuit, SynthesisError};
use blstrs::Scalar;
use kiln_synth::SegmentedCircuit;
use rand::SeedableRng;

use super::fast::{Secrets, SetupScalars};
use super::qap::{self, Qap};
use crate::error::ProveError;
use crate::params::ParamsFile;

/// The parameters of a test setup of `circuit` (its witness is not
/// needed), from `seed`.
pub fn test_setup<C: Circuit<Scalar> + Clone>(circuit: C, seed: [u8; 32]) -> Result<ParamsFile, ProveError> {
    let secrets = secrets(seed);
    finish(qap::evaluate(circuit, secrets.tau), &secrets)
}

/// As [`test_setup`], for a circuit made of segments, whose QAP is
/// evaluated on every core (one segment per task).
pub fn test_setup_segmented<S: SegmentedCircuit>(circuit: &S, seed: [u8; 32]) -> Result<ParamsFile, ProveError> {
    let secrets = secrets(seed);
    finish(qap::evaluate_segmented(circuit, secrets.tau), &secrets)
}

/// Host bytes a test setup of a circuit of this size needs while it is
/// made (the QAP's three evaluations per variable and the Lagrange basis,
/// before the scalars replace them), so a caller can reserve them first.
pub fn peak_bytes(num_variables: usize, domain: usize) -> u64 {
    let fr = std::mem::size_of::<Scalar>() as u64;
    (3 * num_variables as u64 + domain as u64) * fr + (num_variables as u64 + domain as u64) * fr
}

fn secrets(seed: [u8; 32]) -> Secrets {
    Secrets::random(&mut rand_chacha::ChaCha20Rng::from_seed(seed))
}

fn finish(qap: Result<Qap, SynthesisError>, secrets: &Secrets) -> Result<ParamsFile, ProveError> {
    let synth = |e: SynthesisError| ProveError::Synth(e.into());
    let (scalars, ic) = SetupScalars::from_qap(qap.map_err(synth)?, secrets).map_err(synth)?;
    Ok(ParamsFile::from_setup_scalars(secrets.verifying_key(&ic), scalars))
}
