//! SnapDeals over a sparse CC sector: the update writes all-zero data, so
//! the new replica is the old one (each node gains data x rho = 0),
//! comm_r_new = comm_r_old and comm_d_new is the zero commitment. The
//! update's challenges are drawn from comm_r_new (storage-proofs'
//! `Challenges`); they open default leaves of the sector's trees as often
//! as not, which is as valid as any other leaf.

use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::Domain;
use filecoin_proofs::SectorUpdateConfig;
use filecoin_proofs_api::RegisteredUpdateProof;
use generic_array::typenum::{U0, U2};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::{ChallengeProof, Challenges, PartitionProof, PublicParams};

use super::sector::SparseSector;
use crate::payload::{Payload, PayloadKind};
use crate::registered::update_proof_number;

/// The SnapDeals payload of an all-zero update of `sector`.
pub(crate) fn payload<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    proof: RegisteredUpdateProof,
    sector: &SparseSector<Tree>,
) -> Result<Payload, String> {
    let size = u64::from(proof.sector_size());
    let config = SectorUpdateConfig::from_porep_config(&proof.as_v1_config());
    let pub_params = PublicParams::from_sector_size(size);
    if usize::from(config.update_partitions) != pub_params.partition_count {
        return Err(format!("{proof:?}: filecoin-proofs says {} partitions, storage-proofs {}", usize::from(config.update_partitions), pub_params.partition_count));
    }
    let (comm_r_old, comm_r_new, comm_d_new) = (sector.comm_r, sector.comm_r, sector.comm_d);
    // The apex leaves are tree_d's nodes at this height, `apex_leaf_count` per partition.
    let apex_height = pub_params.challenge_bit_len - pub_params.partition_bit_len - pub_params.apex_leaf_bit_len;
    let partitions = (0..pub_params.partition_count).map(|k| {
        let apex_leafs = (0..pub_params.apex_leaf_count).map(|i| sector.tree_d.node(apex_height, (k * pub_params.apex_leaf_count + i) as u64)).collect();
        let challenge_proofs = Challenges::new(pub_params.sector_nodes, comm_r_new, k)
            .map(|c| {
                let c = u64::from(c);
                let replica = sector.tree_r_last.proof(c);
                ChallengeProof::<Tree> { proof_r_old: replica.clone(), proof_d_new: sector.tree_d.proof::<U2, U0, U0>(c), proof_r_new: replica }
            })
            .collect();
        let partition = PartitionProof::<Tree> { comm_c: sector.comm_c, apex_leafs, challenge_proofs };
        bincode::serialize(&partition).map_err(|e| format!("SnapDeals partition {k}: {e}"))
    });
    let mut p = Payload::new(PayloadKind::SnapDealsUpdate, size, update_proof_number(proof));
    p.vanilla_proofs = partitions.collect::<Result<_, _>>()?;
    p.comm_r_old = comm_r_old.into_bytes();
    p.comm_r_new = comm_r_new.into_bytes();
    p.comm_d_new = comm_d_new.into_bytes();
    Ok(p)
}
