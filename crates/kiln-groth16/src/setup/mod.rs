//! Parameter generation for circuits that have no published parameters
//! (the built-in workloads, tests, benchmarks): a random setup (kiln's fast
//! generator in [`fast`], or bellperson's), written once to a cache file in
//! the standard format and mapped from then on; or, at sizes where a file
//! is too large to make and keep, a [`test_setup`] held as scalars and
//! turned into points on the GPU.
//!
//! These parameters come from a local random "ceremony": fine for tests,
//! demos and benchmarks, never for production proofs.

use std::io::Write;
use std::path::Path;

use bellperson::groth16::{generate_random_parameters, Parameters};
use bellpepper_core::Circuit;
use blstrs::{Bls12, Scalar};
use rand_core::RngCore;

use crate::error::{ParamsError, ProveError};
use crate::params::ParamsFile;

pub mod fast;
pub mod qap;
pub mod table;
pub mod test_setup;
pub use fast::{generate_fast, Progress, Secrets, SetupScalars};
pub use qap::{peak_bytes, Admit};
pub use test_setup::{test_setup, test_setup_segmented};

/// Generate random parameters for `circuit` (its witness is not needed) with
/// kiln's generator.
pub fn generate<C: Circuit<Scalar> + Clone>(circuit: C, rng: &mut impl RngCore) -> Result<Parameters<Bls12>, ProveError> {
    generate_fast(circuit, rng, &|_, _| {}).map_err(|e| ProveError::Synth(e.into()))
}

/// Generate random parameters with bellperson's generator (the reference
/// kiln's generator is tested against).
pub fn generate_with_bellperson<C: Circuit<Scalar>>(circuit: C, rng: &mut impl RngCore) -> Result<Parameters<Bls12>, ProveError> {
    generate_random_parameters::<Bls12, _, _>(circuit, rng).map_err(|e| ProveError::Synth(e.into()))
}

/// Map the parameters at `path`, generating and writing them first if the
/// file does not exist. `progress(done, total)` is called while generating
/// (never when the file exists). The file appears atomically.
pub fn load_or_generate<C: Circuit<Scalar> + Clone>(
    circuit: C,
    path: &Path,
    rng: &mut impl RngCore,
    progress: Progress<'_>,
) -> Result<ParamsFile, ProveError> {
    if path.exists() {
        return Ok(ParamsFile::open(path)?);
    }
    let params = generate_fast(circuit, rng, progress).map_err(|e| ProveError::Synth(e.into()))?;
    let io = |source| ParamsError::Io { path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = dir.join(format!(".{}.{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("params"), std::process::id()));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        params.write(&mut f).map_err(io)?;
        f.flush().map_err(io)?;
        f.get_ref().sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(ParamsFile::open(path)?)
}
