//! Checks an answer with filecoin-proofs' own verifiers (`verify_seal`,
//! `verify_empty_sector_update_proof`, `verify_window_post`,
//! `verify_winning_post`), reading the same parameter cache kiln proves
//! against: what a client of kiln would do, for tests and benchmarks.

use std::collections::BTreeMap;

use filecoin_proofs::{with_shape, FallbackPoStSectorProof};
use filecoin_proofs_api::{PublicReplicaInfo, RegisteredPoStProof, SectorId};
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::payload::{Payload, PayloadKind};
use crate::porep::{decode_envelope, PorepRequest};
use crate::registered::{post_proof, prover_id, update_proof};

fn arr32(name: &str, v: &[u8]) -> Result<[u8; 32], String> {
    v.try_into().map_err(|_| format!("{name} must be 32 bytes, got {}", v.len()))
}

/// `Ok(())` when filecoin-proofs accepts `proof` as the answer to `payload`.
/// A WindowPoSt payload must hold every sector of the proof (its partition 0
/// is then the whole proof, which is what `verify_window_post` checks).
pub fn verify(payload: &Payload, proof: &[u8]) -> Result<(), String> {
    let _span = tracing::info_span!("filecoin_verify", kind = ?payload.proof_kind).entered();
    let ok = match payload.proof_kind {
        PayloadKind::PorepSealCommit => {
            let req = PorepRequest {
                sector_size: payload.sector_size,
                registered_proof: payload.registered_proof,
                sector_number: payload.sector_number,
            };
            let (c1, sector) = decode_envelope(&payload.vanilla_proof, &req)?;
            crate::porep::param_set(c1.registered_proof)?.ensure()?;
            filecoin_proofs_api::seal::verify_seal(
                c1.registered_proof,
                c1.comm_r,
                c1.comm_d,
                prover_id(payload.miner_id),
                SectorId::from(sector),
                c1.ticket,
                c1.seed,
                proof,
            )
        }
        PayloadKind::SnapDealsUpdate => {
            let p = update_proof(payload.registered_proof)?;
            crate::snap::param_set(p).ensure()?;
            filecoin_proofs_api::update::verify_empty_sector_update_proof(
                p,
                proof,
                arr32("comm_r_old", &payload.comm_r_old)?,
                arr32("comm_r_new", &payload.comm_r_new)?,
                arr32("comm_d_new", &payload.comm_d_new)?,
            )
        }
        PayloadKind::WindowPostPartition | PayloadKind::WinningPost => {
            let p = post_proof(payload.registered_proof)?;
            crate::post::param_set(p)?.ensure()?;
            if payload.proof_kind == PayloadKind::WindowPostPartition && payload.partition_index != 0 {
                return Err("verify checks whole WindowPoSt proofs: give it partition 0 of a one-partition proof".into());
            }
            let replicas = with_shape!(u64::from(p.sector_size()), replicas_of, p, &payload.vanilla_proofs)?;
            let randomness = arr32("randomness", &payload.randomness)?;
            if payload.proof_kind == PayloadKind::WinningPost {
                filecoin_proofs_api::post::verify_winning_post(&randomness, proof, &replicas, prover_id(payload.miner_id))
            } else {
                filecoin_proofs_api::post::verify_window_post(&randomness, &[(p, proof)], &replicas, prover_id(payload.miner_id))
            }
        }
    };
    match ok {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("filecoin-proofs rejects the {:?} proof ({} bytes)", payload.proof_kind, proof.len())),
        Err(e) => Err(format!("filecoin-proofs could not verify the {:?} proof: {e:#}", payload.proof_kind)),
    }
}

/// The sectors (id, comm_r) the vanilla proofs are about.
fn replicas_of<Tree: 'static + MerkleTreeTrait>(
    p: RegisteredPoStProof,
    vanilla: &[Vec<u8>],
) -> Result<BTreeMap<SectorId, PublicReplicaInfo>, String> {
    vanilla
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let s: FallbackPoStSectorProof<Tree> = bincode::deserialize(b).map_err(|e| format!("vanilla_proofs[{i}]: {e}"))?;
            let comm_r = filecoin_proofs::commitment_from_fr(s.comm_r.into());
            Ok((s.sector_id, PublicReplicaInfo::new(p, comm_r)))
        })
        .collect()
}
