//! kiln-groth16: the Groth16 prover over BLS12-381.
//!
//! - [`ParamsFile`]: proving keys in bellperson's `.params` format, memory-mapped.
//! - [`prove_start`] / [`finish`]: the split API GPU provers need — once
//!   `prove_start` returns, the assignment's (pinned) buffers are free again;
//!   `finish` waits for the MSMs, assembles A, B, C with the randomizers and
//!   verifies the proof against the verifying key. [`prove`] does all of it.
//! - [`ProverBackend`]: where the H polynomial and the five MSMs run;
//!   [`CpuBackend`] here, the GPU backend beside it (feature `gpu`, on by
//!   default; without it the crate builds with no CUDA crate at all).
//! - [`Backends::open`]: which backends a process gets (every usable GPU,
//!   else the CPU) and why — the one place kiln's daemon, benchmarks and
//!   library users choose.
//! - [`FaultyBackend`]: injects the faults of a sick GPU (errors, wrong
//!   results, hangs, a sticky fault) into any backend, for tests and for
//!   a daemon started with `KILN_FAULTS` set.
//! - [`CircuitProver`]: prove your own bellperson circuit from parameters
//!   you made with bellperson, GPU when present, else CPU (its module docs
//!   have a complete example).
//!
//! Proofs are bellperson's `Proof<Bls12>`: byte-compatible with what
//! bellperson and filecoin-proofs produce and verify.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kiln_groth16::{prove, CpuBackend, ParamsFile};
//! use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
//!
//! let params = Arc::new(ParamsFile::open("circuit.params")?);
//! let circuit = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 16, 4).with_witness(1);
//! let proved = prove(&CpuBackend, &params, circuit, &mut rand::thread_rng())?;
//! assert_eq!(proved.to_bytes().len(), 192);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

/// The README's example, compiled and run as a doc test so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod backends;
mod blst_ffi;
pub mod circuit_prover;
pub mod cpu;
pub mod error;
pub mod faults;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod msm;
pub mod ntt;
pub mod params;
pub mod prover;
pub mod setup;

pub use backends::{one_per_device, BackendChoice, BackendError, BackendOptions, Backends, Devices, GpuPlacement, DEFAULT_STREAM_CHUNK_BYTES};
pub use circuit_prover::CircuitProver;
pub use cpu::CpuBackend;
pub use error::{ParamsError, ProveError};
pub use faults::{FaultCounts, FaultPlan, FaultyBackend, FAULTS_ENV};
#[cfg(feature = "gpu")]
pub use gpu::{GpuBackend, GpuContext};
pub use params::{ParamsFile, ParamsShape, RawPoints, Section};
pub use prover::{
    check_shape, finish, prove, prove_start, DeviceResidency, DeviceStatus, MsmResults, PendingMsms, PendingProof, PhaseTimings, ProductsSupport,
    ProvedProof, ProverBackend, Randomness, Ready,
};

pub use bellperson::groth16::{Proof, VerifyingKey};
pub use blstrs::Bls12;
