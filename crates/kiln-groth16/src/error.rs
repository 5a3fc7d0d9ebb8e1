//! Errors of the prover and of parameter files.

use std::path::PathBuf;

/// A parameter file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("cannot read parameters {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("parameters are truncated: {what} needs bytes up to offset {needed}, the file has {actual}")]
    Truncated { what: String, needed: u64, actual: u64 },
    #[error("parameters have {extra} unexpected bytes after the last section")]
    TrailingBytes { extra: u64 },
    #[error("parameters are invalid: {what} element {index} is {reason}")]
    InvalidPoint { what: &'static str, index: usize, reason: &'static str },
    /// The file changed on disk while it was in use (truncated or written in
    /// place): what was read from it cannot be trusted. The proof reading it
    /// fails; the parameters are opened again for later work.
    #[error("parameters {path} changed on disk while in use: {why}")]
    Changed { path: PathBuf, why: String },
    /// The verifying key inside the `.params` file is not the one in the
    /// `.vk` file beside it (what filecoin-proofs verifies with).
    #[error("parameters {params} are refused: their verifying key is not the one in {vk}: {why}")]
    VkMismatch { params: PathBuf, vk: PathBuf, why: String },
}

/// Proving failed. Nothing of it is fatal to the process.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    #[error(transparent)]
    Synth(#[from] kiln_synth::SynthError),
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The circuit and the parameters disagree: parameters of another circuit.
    #[error("these parameters belong to another circuit: {what} is {circuit} in the circuit but {params} in the parameters")]
    ShapeMismatch { what: &'static str, circuit: usize, params: usize },
    /// delta is the identity in the verifying key: a subverted setup.
    #[error("the verifying key's delta is the point at infinity (subverted parameters)")]
    UnexpectedIdentity,
    /// The finished proof does not verify; it is never returned.
    #[error("the proof failed verification against the verifying key ({0})")]
    NotVerified(String),
    /// Memory for the work could not be had (e.g. a budget refused it).
    #[error("not enough memory: {0}")]
    Memory(String),
    /// A backend-specific failure (e.g. a CUDA error) affecting this proof only.
    #[error("{backend} backend failed: {message}")]
    Backend { backend: &'static str, message: String },
    /// The device's memory ran out while other proofs held part of it: not
    /// a fault of the device or of the job. A pipeline retries the proof
    /// without charging it (a backend turns this into [`ProveError::Backend`]
    /// when the proof had the device to itself, so retries stay bounded).
    #[error("{backend} device memory ran out beside other proofs: {message}")]
    DeviceFull { backend: &'static str, message: String },
    /// The device is unusable until it is reset (a sticky error, such as
    /// an Xid): this proof and every later one on it fail. A pipeline
    /// takes such a backend out of service (quarantine).
    #[error("{backend} backend is unusable: {message}")]
    DeviceLost { backend: &'static str, message: String },
}

impl ProveError {
    /// Whether the device that failed is gone for good ([`ProveError::DeviceLost`]).
    pub fn is_sticky(&self) -> bool {
        matches!(self, ProveError::DeviceLost { .. })
    }
}
