//! The four Filecoin proof kinds through filecoin-proofs-api's own entry
//! points, exactly as Curio / Lotus call them on a SupraSeal build:
//! [`Kind::prepare`] decodes a payload (what `cargo xtask gen-vanilla`
//! writes) once, [`Prepared::prove`] makes one proof (the timed part) and
//! [`Prepared::verify`] checks it with filecoin-proofs' verifier.

use std::collections::BTreeMap;

use base64::Engine as _;
use filecoin_proofs::{with_shape, FallbackPoStSectorProof};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{post, seal, update, PartitionProofBytes, PublicReplicaInfo, RegisteredPoStProof, SectorId};
use serde::Deserialize;
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::payload::{Payload, PayloadKind};
use crate::registered::{post_proof, prover_id, update_proof};

/// A proof kind, named as kiln's job sources name them (`kind_label`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Porep,
    Snap,
    Window,
    Winning,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Porep, Kind::Snap, Kind::Window, Kind::Winning];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Porep => "porep-c2",
            Kind::Snap => "snap-deals",
            Kind::Window => "window-post",
            Kind::Winning => "winning-post",
        }
    }

    pub fn payload_kind(self) -> PayloadKind {
        match self {
            Kind::Porep => PayloadKind::PorepSealCommit,
            Kind::Snap => PayloadKind::SnapDealsUpdate,
            Kind::Window => PayloadKind::WindowPostPartition,
            Kind::Winning => PayloadKind::WinningPost,
        }
    }

    /// Accepts the label or a short name (`porep`, `snap`, `window`, `winning`).
    pub fn parse(s: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.label() == s || k.label().split('-').next() == Some(s))
            .ok_or_else(|| format!("unknown kind {s:?} (porep-c2, snap-deals, window-post, winning-post)"))
    }

    /// Decodes `p` into what filecoin-proofs' prover and verifier take.
    pub fn prepare(self, p: &Payload) -> Result<Prepared, String> {
        if p.proof_kind != self.payload_kind() {
            return Err(format!("the payload is a {:?}, not a {}", p.proof_kind, self.label()));
        }
        let arr = |name: &str, v: &[u8]| -> Result<[u8; 32], String> { v.try_into().map_err(|_| format!("{name} must be 32 bytes, got {}", v.len())) };
        let prover = prover_id(p.miner_id);
        Ok(match self {
            Kind::Porep => {
                let (c1, sector) = decode_envelope(&p.vanilla_proof)?;
                Prepared::Porep { c1, sector: SectorId::from(sector), prover }
            }
            Kind::Snap => Prepared::Snap {
                proof: update_proof(p.registered_proof)?,
                vanilla: p.vanilla_proofs.clone(),
                comm_r_old: arr("comm_r_old", &p.comm_r_old)?,
                comm_r_new: arr("comm_r_new", &p.comm_r_new)?,
                comm_d_new: arr("comm_d_new", &p.comm_d_new)?,
            },
            Kind::Window | Kind::Winning => {
                let proof = post_proof(p.registered_proof)?;
                let replicas = with_shape!(u64::from(proof.sector_size()), replicas_of, proof, &p.vanilla_proofs)?;
                let post = Post { proof, randomness: arr("randomness", &p.randomness)?, prover, vanilla: p.vanilla_proofs.clone(), replicas };
                if self == Kind::Window {
                    Prepared::Window { post, partition: p.partition_index as usize }
                } else {
                    Prepared::Winning(post)
                }
            }
        })
    }
}

/// Curio's `vanilla_proof` for POREP_SEAL_COMMIT: `Phase1Out` is the
/// base64 of filecoin-proofs-api's `SealCommitPhase1Output` JSON.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
}

fn decode_envelope(envelope: &[u8]) -> Result<(SealCommitPhase1Output, u64), String> {
    let env: Envelope = serde_json::from_slice(envelope).map_err(|e| format!("vanilla_proof is not the C1 envelope: {e}"))?;
    let raw = base64::engine::general_purpose::STANDARD.decode(env.phase1_out.as_bytes()).map_err(|e| format!("Phase1Out is not base64: {e}"))?;
    let c1 = serde_json::from_slice(&raw).map_err(|e| format!("Phase1Out is not a SealCommitPhase1Output: {e}"))?;
    Ok((c1, env.sector_num))
}

/// The sectors (id, comm_r) the PoSt vanilla proofs are about, which the
/// PoSt verifiers need (the payload names them only inside those proofs).
fn replicas_of<Tree: 'static + MerkleTreeTrait>(p: RegisteredPoStProof, vanilla: &[Vec<u8>]) -> Result<BTreeMap<SectorId, PublicReplicaInfo>, String> {
    vanilla
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let s: FallbackPoStSectorProof<Tree> = bincode::deserialize(b).map_err(|e| format!("vanilla_proofs[{i}]: {e}"))?;
            Ok((s.sector_id, PublicReplicaInfo::new(p, filecoin_proofs::commitment_from_fr(s.comm_r.into()))))
        })
        .collect()
}

pub struct Post {
    proof: RegisteredPoStProof,
    randomness: [u8; 32],
    prover: [u8; 32],
    vanilla: Vec<Vec<u8>>,
    replicas: BTreeMap<SectorId, PublicReplicaInfo>,
}

/// One payload, decoded.
pub enum Prepared {
    Porep { c1: SealCommitPhase1Output, sector: SectorId, prover: [u8; 32] },
    Snap { proof: filecoin_proofs_api::RegisteredUpdateProof, vanilla: Vec<Vec<u8>>, comm_r_old: [u8; 32], comm_r_new: [u8; 32], comm_d_new: [u8; 32] },
    Window { post: Post, partition: usize },
    Winning(Post),
}

impl Prepared {
    /// What filecoin-proofs calls the registered proof, for the report.
    pub fn registered(&self) -> String {
        match self {
            Prepared::Porep { c1, .. } => format!("{:?}", c1.registered_proof),
            Prepared::Snap { proof, .. } => format!("{proof:?}"),
            Prepared::Window { post, .. } | Prepared::Winning(post) => format!("{:?}", post.proof),
        }
    }

    /// Copies of the inputs the prover consumes, made before the clock starts.
    pub fn inputs(&self) -> Inputs {
        match self {
            Prepared::Porep { c1, .. } => Inputs::C1(Box::new(c1.clone())),
            Prepared::Snap { vanilla, .. } => Inputs::Partitions(vanilla.iter().cloned().map(PartitionProofBytes).collect()),
            Prepared::Window { .. } | Prepared::Winning(_) => Inputs::None,
        }
    }

    /// One proof with filecoin-proofs' prover (SupraSeal C2 on this build).
    /// PoRep: `seal_commit_phase2` (which also checks the vanilla proofs and
    /// verifies its own answer before returning, as filecoin-proofs always does).
    pub fn prove(&self, inputs: Inputs) -> Result<Vec<u8>, String> {
        let e = |what: &str| {
            let what = what.to_string();
            move |err: anyhow::Error| format!("{what}: {err:#}")
        };
        match (self, inputs) {
            (Prepared::Porep { sector, prover, .. }, Inputs::C1(c1)) => {
                seal::seal_commit_phase2(*c1, *prover, *sector).map(|o| o.proof).map_err(e("seal_commit_phase2"))
            }
            (Prepared::Snap { proof, comm_r_old, comm_r_new, comm_d_new, .. }, Inputs::Partitions(v)) => {
                update::generate_empty_sector_update_proof_with_vanilla(*proof, v, *comm_r_old, *comm_r_new, *comm_d_new)
                    .map(|p| p.0)
                    .map_err(e("generate_empty_sector_update_proof_with_vanilla"))
            }
            (Prepared::Window { post, partition }, Inputs::None) => {
                post::generate_single_window_post_with_vanilla(post.proof, &post.randomness, post.prover, &post.vanilla, *partition)
                    .map(|p| p.0)
                    .map_err(e("generate_single_window_post_with_vanilla"))
            }
            (Prepared::Winning(post), Inputs::None) => {
                let mut proofs = post::generate_winning_post_with_vanilla(post.proof, &post.randomness, post.prover, &post.vanilla)
                    .map_err(e("generate_winning_post_with_vanilla"))?;
                match proofs.len() {
                    1 => Ok(proofs.remove(0).1),
                    n => Err(format!("generate_winning_post_with_vanilla returned {n} proofs, expected 1")),
                }
            }
            _ => Err("inputs of another kind".into()),
        }
    }

    /// `Ok(())` when filecoin-proofs' verifier accepts `proof`.
    pub fn verify(&self, proof: &[u8]) -> Result<(), String> {
        let ok = match self {
            Prepared::Porep { c1, sector, prover } => {
                seal::verify_seal(c1.registered_proof, c1.comm_r, c1.comm_d, *prover, *sector, c1.ticket, c1.seed, proof)
            }
            Prepared::Snap { proof: p, comm_r_old, comm_r_new, comm_d_new, .. } => {
                update::verify_empty_sector_update_proof(*p, proof, *comm_r_old, *comm_r_new, *comm_d_new)
            }
            Prepared::Window { post, .. } => post::verify_window_post(&post.randomness, &[(post.proof, proof)], &post.replicas, post.prover),
            Prepared::Winning(post) => post::verify_winning_post(&post.randomness, proof, &post.replicas, post.prover),
        };
        match ok {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("filecoin-proofs rejects the {} proof ({} bytes)", self.registered(), proof.len())),
            Err(e) => Err(format!("filecoin-proofs could not verify the {} proof: {e:#}", self.registered())),
        }
    }
}

/// What one call of the prover consumes.
pub enum Inputs {
    C1(Box<SealCommitPhase1Output>),
    Partitions(Vec<PartitionProofBytes>),
    None,
}
