//! For tests: real 2 KiB inputs of every kind, sealed once per test
//! process (the parameter cache under the target's tmp dir is set up first:
//! filecoin-proofs reads its settings once), and the job each becomes.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::porep::PorepRequest;
use kiln_filecoin::post::PostRequest;
use kiln_filecoin::snap::SnapRequest;
use kiln_filecoin::{porep, post, snap, vanilla, PoStType};
use kiln_pipeline::JobSource;
use rand::SeedableRng;

/// The payloads of one sealed 2 KiB sector, made once for all tests (the
/// parameter cache is set up first: filecoin-proofs reads its settings once).
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

pub fn job(p: &Payload) -> Result<Arc<dyn JobSource>, String> {
    match p.proof_kind {
        PayloadKind::PorepSealCommit => porep::job(
            &p.vanilla_proof,
            &PorepRequest { sector_size: p.sector_size, registered_proof: p.registered_proof, sector_number: p.sector_number },
        ),
        PayloadKind::SnapDealsUpdate => snap::job(&SnapRequest {
            registered_proof: p.registered_proof,
            sector_size: p.sector_size,
            vanilla_proofs: &p.vanilla_proofs,
            comm_r_old: &p.comm_r_old,
            comm_r_new: &p.comm_r_new,
            comm_d_new: &p.comm_d_new,
        }),
        PayloadKind::WindowPostPartition | PayloadKind::WinningPost => {
            let typ = if p.proof_kind == PayloadKind::WinningPost { PoStType::Winning } else { PoStType::Window };
            post::job(
                typ,
                &PostRequest {
                    registered_proof: p.registered_proof,
                    sector_size: p.sector_size,
                    vanilla_proofs: &p.vanilla_proofs,
                    randomness: &p.randomness,
                    miner_id: p.miner_id,
                    partition_index: p.partition_index,
                },
            )
        }
    }
}

