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
use super::qap::{self, Admit, Qap};
use crate::error::ProveError;
use crate::params::ParamsFile;

/// The parameters of a test setup of `circuit` (its witness is not
/// needed), from `seed`. `admit` is asked for the host bytes the making
/// needs at most, before they are allocated ([`qap::peak_bytes`]); the
/// result holds less ([`ParamsFile::size_bytes`]).
pub fn test_setup<C: Circuit<Scalar> + Clone>(circuit: C, seed: [u8; 32], admit: Admit<'_>) -> Result<ParamsFile, ProveError> {
    let secrets = secrets(seed);
    let mut refused = None;
    let qap = qap::evaluate(circuit, secrets.tau, &mut recording(admit, &mut refused));
    finish(qap, refused, &secrets)
}

/// As [`test_setup`], for a circuit made of segments, whose QAP is
/// evaluated on every core (one segment per task).
pub fn test_setup_segmented<S: SegmentedCircuit>(circuit: &S, seed: [u8; 32], admit: Admit<'_>) -> Result<ParamsFile, ProveError> {
    let secrets = secrets(seed);
    let mut refused = None;
    let qap = qap::evaluate_segmented(circuit, secrets.tau, &mut recording(admit, &mut refused));
    finish(qap, refused, &secrets)
}

/// `admit`, keeping its refusal so it is reported as such.
fn recording<'a>(admit: Admit<'a>, refused: &'a mut Option<String>) -> impl FnMut(u64) -> Result<(), String> + 'a {
    move |bytes| admit(bytes).inspect_err(|e| *refused = Some(e.clone()))
}

fn secrets(seed: [u8; 32]) -> Secrets {
    Secrets::random(&mut rand_chacha::ChaCha20Rng::from_seed(seed))
}

fn finish(qap: Result<Qap, SynthesisError>, refused: Option<String>, secrets: &Secrets) -> Result<ParamsFile, ProveError> {
    if let Some(why) = refused {
        return Err(ProveError::Memory(format!("making a test setup: {why}")));
    }
    let synth = |e: SynthesisError| ProveError::Synth(e.into());
    let (scalars, ic) = SetupScalars::from_qap(qap.map_err(synth)?, secrets).map_err(synth)?;
    Ok(ParamsFile::from_setup_scalars(secrets.verifying_key(&ic), scalars))
}
