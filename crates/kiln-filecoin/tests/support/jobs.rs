//! A payload -> the JobSource of its kind, as the daemon builds it from the
//! wire's request fields (shared by the test binaries).

use std::sync::Arc;

use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::porep::PorepRequest;
use kiln_filecoin::post::PostRequest;
use kiln_filecoin::snap::SnapRequest;
use kiln_filecoin::{porep, post, snap, PoStType};
use kiln_pipeline::JobSource;

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
