//! Proving your own circuit: a [`CircuitProver`] takes the parameters you
//! made with bellperson (`generate_random_parameters`, or a `.params`
//! file) and proves any bellperson [`Circuit`] over BLS12-381 on the GPUs
//! when this build and host have one, else on the CPU
//! ([`Backends::open`] decides and [`CircuitProver::backends_why`] says
//! why). Its proofs are bellperson's [`Proof`]: check them with
//! bellperson's `verify_proof`, as every proof has already been checked
//! before it is returned.
//!
//! This is the library path without kiln's engine: one proof per call,
//! synthesized into heap buffers on the calling thread. Many proofs at a
//! time under a memory budget are what kiln-pipeline is for.
//!
//! ```
//! use bellperson::groth16::{generate_random_parameters, prepare_verifying_key, verify_proof};
//! use bellperson::{Circuit, ConstraintSystem, SynthesisError};
//! use blstrs::{Bls12, Scalar};
//! use ff::Field;
//! use kiln_groth16::CircuitProver;
//!
//! /// "I know x such that x^3 + x + 5 = out", with `out` public.
//! #[derive(Clone)]
//! struct Cubic { x: Option<Scalar> }
//!
//! impl Circuit<Scalar> for Cubic {
//!     fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
//!         let x_val = self.x;
//!         let x = cs.alloc(|| "x", || x_val.ok_or(SynthesisError::AssignmentMissing))?;
//!         let sq_val = x_val.map(|x| x.square());
//!         let sq = cs.alloc(|| "x^2", || sq_val.ok_or(SynthesisError::AssignmentMissing))?;
//!         cs.enforce(|| "x * x = x^2", |lc| lc + x, |lc| lc + x, |lc| lc + sq);
//!         let cube_val = sq_val.zip(x_val).map(|(s, x)| s * x);
//!         let cube = cs.alloc(|| "x^3", || cube_val.ok_or(SynthesisError::AssignmentMissing))?;
//!         cs.enforce(|| "x^2 * x = x^3", |lc| lc + sq, |lc| lc + x, |lc| lc + cube);
//!         let out_val = cube_val.zip(x_val).map(|(c, x)| c + x + Scalar::from(5u64));
//!         let out = cs.alloc_input(|| "out", || out_val.ok_or(SynthesisError::AssignmentMissing))?;
//!         cs.enforce(
//!             || "(x^3 + x + 5) * 1 = out",
//!             |lc| lc + cube + x + (Scalar::from(5u64), CS::one()),
//!             |lc| lc + CS::one(),
//!             |lc| lc + out,
//!         );
//!         Ok(())
//!     }
//! }
//!
//! let mut rng = rand::thread_rng();
//! // Your trusted setup, made with bellperson from the circuit without a witness.
//! let params = generate_random_parameters::<Bls12, _, _>(Cubic { x: None }, &mut rng)?;
//!
//! let prover = CircuitProver::new(&params);
//! println!("proving on {}", prover.backends_why());
//! let proof = prover.prove(Cubic { x: Some(Scalar::from(3u64)) }, &mut rng)?;
//!
//! // bellperson's verifier accepts it, with the public input 3^3 + 3 + 5 = 35.
//! let pvk = prepare_verifying_key(&params.vk);
//! assert!(verify_proof(&pvk, &proof, &[Scalar::from(35u64)])?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bellperson::groth16::{Parameters, Proof, VerifyingKey};
use bellpepper_core::Circuit;
use blstrs::{Bls12, Scalar};
use rand_core::RngCore;

use crate::backends::{BackendChoice, BackendOptions, Backends};
use crate::error::{ParamsError, ProveError};
use crate::params::ParamsFile;
use crate::prover::{prove, ProverBackend};

/// Proves one circuit's instances with one set of parameters. `Send +
/// Sync`: share it between threads; concurrent calls go to the backends'
/// workers in turn.
pub struct CircuitProver {
    params: Arc<ParamsFile>,
    backends: Backends,
    next: AtomicUsize,
}

impl CircuitProver {
    /// A prover for the circuit `params` were generated for, on every usable
    /// GPU or else the CPU. The parameters are copied into kiln's own
    /// (bellperson's file) layout in memory; for large circuits write them
    /// to a file once and use [`CircuitProver::from_file`], which maps it.
    pub fn new(params: &Parameters<Bls12>) -> Self {
        Self::with_backends(Arc::new(ParamsFile::from_parameters(params)), Self::auto())
    }

    /// A prover over a `.params` file in bellperson's format
    /// (`Parameters::write`, or Filecoin's parameter files), memory-mapped.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ParamsError> {
        Ok(Self::with_backends(Arc::new(ParamsFile::open(path)?), Self::auto()))
    }

    /// A prover on backends of the caller's choosing, e.g.
    /// `Backends::open(BackendChoice::Cpu, &BackendOptions::default())`.
    pub fn with_backends(params: Arc<ParamsFile>, backends: Backends) -> Self {
        CircuitProver { params, backends, next: AtomicUsize::new(0) }
    }

    /// `Auto` with default options never fails (only listed devices must
    /// open); should it, the CPU is used and the reason kept.
    fn auto() -> Backends {
        Backends::open(BackendChoice::Auto, &BackendOptions::default()).unwrap_or_else(|e| Backends::cpu(&e.0))
    }

    /// What the proofs run on and why (e.g. why not on a GPU).
    pub fn backends_why(&self) -> &str {
        &self.backends.why
    }

    /// The verifying key of the parameters, for bellperson's verifier.
    pub fn verifying_key(&self) -> &VerifyingKey<Bls12> {
        self.params.vk()
    }

    /// Synthesizes `circuit` (with its witness) and proves it. The proof
    /// has been verified against the verifying key before it is returned;
    /// a circuit whose witness does not satisfy its constraints, or that is
    /// not the circuit of the parameters, is an error.
    pub fn prove<C: Circuit<Scalar>>(&self, circuit: C, rng: &mut impl RngCore) -> Result<Proof<Bls12>, ProveError> {
        let workers = &self.backends.workers;
        if workers.is_empty() {
            return Err(ProveError::Backend { backend: "none", message: "the prover was given no backend workers".into() });
        }
        let worker: &dyn ProverBackend = workers[self.next.fetch_add(1, Ordering::Relaxed) % workers.len()].as_ref();
        Ok(prove(worker, &self.params, circuit, rng)?.proof)
    }
}
