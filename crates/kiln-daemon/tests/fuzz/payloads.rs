//! Valid 2 KiB payloads of the four Filecoin kinds, sealed once per test
//! process (no Groth16 parameters needed: decoding and synthesis are fuzzed,
//! nothing is proved).

use std::sync::OnceLock;

use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_proto::v1::SubmitProofRequest;
use rand::SeedableRng;

pub fn request(kind: PayloadKind) -> SubmitProofRequest {
    payload(kind).into_request()
}

pub fn payload(kind: PayloadKind) -> Payload {
    static P: OnceLock<Vec<Payload>> = OnceLock::new();
    let all = P.get_or_init(|| {
        let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fil-params");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", cache.join("parents"));
        let work = tempfile::tempdir().unwrap();
        let t = std::time::Instant::now();
        let p = kiln_filecoin::vanilla::generate(2048, work.path(), &mut rand_chacha::ChaCha8Rng::seed_from_u64(22)).unwrap();
        eprintln!("sealed a 2 KiB sector for the fuzz payloads in {:.1?}", t.elapsed());
        p
    });
    all.iter().find(|p| p.proof_kind == kind).unwrap().clone()
}
