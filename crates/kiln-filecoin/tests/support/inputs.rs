//! For tests: real 2 KiB inputs of every kind, sealed once per test
//! process (the parameter cache under the target's tmp dir is set up first:
//! filecoin-proofs reads its settings once), and their parameter files.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::vanilla;
use kiln_groth16::ParamsFile;
use kiln_pipeline::JobSource;
use rand::SeedableRng;

/// The payloads of one sealed 2 KiB sector, made once for all tests (the
/// parameter cache is set up first: filecoin-proofs reads its settings once), and their parameter files.
pub fn payloads() -> &'static [Payload] {
    static P: OnceLock<Vec<Payload>> = OnceLock::new();
    P.get_or_init(|| {
        let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fil-params");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", cache.join("parents"));
        let work = tempfile::tempdir().unwrap();
        vanilla::generate(2048, work.path(), &mut rand_chacha::ChaCha8Rng::seed_from_u64(7)).unwrap()
    })
}

pub fn payload(kind: PayloadKind) -> Payload {
    payloads().iter().find(|p| p.proof_kind == kind).unwrap().clone()
}

/// The job's parameters, generated first when missing (test sizes), as the
/// engine does.
pub fn params_of(j: &dyn JobSource) -> Arc<ParamsFile> {
    let spec = j.srs();
    if !spec.path.exists() {
        (spec.generate.as_ref().expect("test sizes have a generator"))(&spec.path).unwrap();
    }
    Arc::new(ParamsFile::open(&spec.path).unwrap())
}
