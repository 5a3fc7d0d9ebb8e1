//! filecoin-proofs' own vanilla verifiers over a payload (sparse or
//! sealed): what C1 and the vanilla provers check before they answer, so
//! an input that passes is one the circuits are satisfied by.

use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::parameters::public_params;
use filecoin_proofs::{
    generate_fallback_sector_challenges, with_shape, DefaultPieceDomain, DefaultPieceHasher, FallbackPoStSectorProof, VanillaSealProof,
};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::update::verify_partition_proofs;
use filecoin_proofs_api::{PartitionProofBytes, SectorId};
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{self, StackedDrg};

use crate::job_for_payload;
use crate::payload::{decode_vanilla, Payload, PayloadKind};
use crate::porep::{decode_envelope, PorepRequest};
use crate::registered::{post_proof, prover_id, update_proof};

/// Runs filecoin-proofs' vanilla verification of `p`'s kind:
/// - PoRep: `StackedDrg::verify_all_partitions` over the C1 output's
///   proofs (each challenge's openings, columns, labels and encoding),
///   and storage-proofs' `MerkleProof::verify` of each challenge's tree_d
///   and tree_r_last paths, which that verifier leaves to the circuit (it
///   checks only their indices and roots);
/// - SnapDeals: filecoin-proofs-api's `update::verify_partition_proofs`;
/// - PoSt: kiln's job parsing ([`crate::post::job`]), which arranges the sector
///   proofs with filecoin-proofs' `single_partition_vanilla_proofs` /
///   `partition_vanilla_proofs`, and those run `FallbackPoSt::verify`;
///   for WinningPoSt, whose verifier pairs its one public sector with the
///   first of the 66 unrolled proofs only, also every inclusion proof
///   against its challenge (`MerkleProof::validate`), as the circuit does.
///
/// `Err` says what failed.
pub fn check_vanilla(p: &Payload) -> Result<(), String> {
    match p.proof_kind {
        PayloadKind::PorepSealCommit => {
            let (c1, _) = decode_envelope(&p.vanilla_proof, &PorepRequest::default())?;
            with_shape!(u64::from(c1.registered_proof.sector_size()), check_porep, c1)
        }
        PayloadKind::SnapDealsUpdate => {
            let proof = update_proof(p.registered_proof)?;
            let comm = |name: &str, v: &[u8]| <[u8; 32]>::try_from(v).map_err(|_| format!("{name} must be 32 bytes, got {}", v.len()));
            let partitions: Vec<PartitionProofBytes> = p.vanilla_proofs.iter().cloned().map(PartitionProofBytes).collect();
            let (old, new, d_new) = (comm("comm_r_old", &p.comm_r_old)?, comm("comm_r_new", &p.comm_r_new)?, comm("comm_d_new", &p.comm_d_new)?);
            match verify_partition_proofs(proof, &partitions, old, new, d_new) {
                Ok(true) => Ok(()),
                Ok(false) => Err("filecoin-proofs' verify_partition_proofs rejects the SnapDeals vanilla proofs".into()),
                Err(e) => Err(format!("filecoin-proofs' verify_partition_proofs fails: {e:#}")),
            }
        }
        PayloadKind::WindowPostPartition | PayloadKind::WinningPost => {
            job_for_payload(p)?;
            if p.proof_kind == PayloadKind::WinningPost {
                with_shape!(p.sector_size, check_winning_paths, p)?;
            }
            Ok(())
        }
    }
}

fn check_porep<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(c1: SealCommitPhase1Output) -> Result<(), String> {
    let config = c1.registered_proof.as_v1_config();
    let proofs: Vec<Vec<VanillaSealProof<Tree>>> =
        c1.vanilla_proofs.try_into().map_err(|e: anyhow::Error| format!("the C1 vanilla proofs do not fit {:?}: {e:#}", c1.registered_proof))?;
    if proofs.len() != usize::from(config.partitions) || proofs.iter().any(Vec::is_empty) {
        return Err(format!("{:?} has {} partitions of proofs; the C1 output holds {:?}", c1.registered_proof, usize::from(config.partitions), proofs.iter().map(Vec::len).collect::<Vec<_>>()));
    }
    let domain = |name: &str, v: &[u8; 32]| <PoseidonHasher as Hasher>::Domain::try_from_bytes(v).map_err(|e| format!("{name}: {e:#}"));
    let pub_inputs = stacked::PublicInputs {
        replica_id: c1.replica_id,
        tau: Some(stacked::Tau {
            comm_d: DefaultPieceDomain::try_from_bytes(&c1.comm_d).map_err(|e| format!("comm_d: {e:#}"))?,
            comm_r: domain("comm_r", &c1.comm_r)?,
        }),
        k: None,
        seed: Some(c1.seed),
    };
    let pub_params = public_params::<Tree>(&config).map_err(|e| format!("PoRep public parameters: {e:#}"))?;
    for (k, partition) in proofs.iter().enumerate() {
        for (i, proof) in partition.iter().enumerate() {
            if !proof.comm_d_proofs.verify() || !proof.comm_r_last_proof.verify() {
                return Err(format!("partition {k}, challenge {i}: a tree_d or tree_r_last path does not hash to its root"));
            }
        }
    }
    match StackedDrg::<Tree, DefaultPieceHasher>::verify_all_partitions(&pub_params, &pub_inputs, &proofs) {
        Ok(true) => Ok(()),
        Ok(false) => Err("filecoin-proofs' StackedDrg::verify_all_partitions rejects the C1 vanilla proofs".into()),
        Err(e) => Err(format!("filecoin-proofs' StackedDrg::verify_all_partitions fails: {e:#}")),
    }
}

fn check_winning_paths<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(p: &Payload) -> Result<(), String> {
    let config = post_proof(p.registered_proof)?.as_v1_config();
    let sectors: Vec<FallbackPoStSectorProof<Tree>> = decode_vanilla(&p.vanilla_proofs, "FallbackPoStSectorProof", p.sector_size)?;
    let randomness: [u8; 32] = p.randomness.as_slice().try_into().map_err(|_| format!("randomness must be 32 bytes, got {}", p.randomness.len()))?;
    let ids: Vec<SectorId> = sectors.iter().map(|s| s.sector_id).collect();
    let challenges = generate_fallback_sector_challenges::<Tree>(&config, &randomness, &ids, prover_id(p.miner_id)).map_err(|e| format!("PoSt challenges: {e:#}"))?;
    for sector in &sectors {
        let mine = &challenges[&sector.sector_id];
        for proof in &sector.vanilla_proof.sectors {
            if proof.inclusion_proofs.len() != mine.len() {
                return Err(format!("sector {:?}: {} inclusion proofs for {} challenges", sector.sector_id, proof.inclusion_proofs.len(), mine.len()));
            }
            for (n, (incl, &c)) in proof.inclusion_proofs.iter().zip(mine).enumerate() {
                if !incl.validate(c as usize) || incl.root() != proof.comm_r_last {
                    return Err(format!("sector {:?}: inclusion proof {n} does not open challenge {c} of its comm_r_last", sector.sector_id));
                }
            }
        }
    }
    Ok(())
}
