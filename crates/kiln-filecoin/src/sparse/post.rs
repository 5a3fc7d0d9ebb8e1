//! WindowPoSt and WinningPoSt over sparse sectors. PoSt challenges depend
//! on the randomness and the sector ids, never on the trees, so each
//! sector can be made after its challenges are known: the PoRep sector
//! (sector [`SECTOR_NUMBER`]) answers from its own tree_r_last, and the
//! other sectors of a full WindowPoSt partition (2349 at 32 GiB) are trees
//! of their own whose challenged leaves are random values, with a random
//! comm_c.

use std::sync::Arc;

use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{FallbackPoStSectorProof, PoStType};
use filecoin_proofs_api::{RegisteredPoStProof, SectorId};
use rand::{RngCore, SeedableRng};
use rayon::prelude::*;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{Proof, SectorProof};

use super::sector::SparseSector;
use super::tree::{SparseTree, TreeShape};
use super::{MINER_ID, SECTOR_NUMBER};
use crate::payload::{Payload, PayloadKind};
use crate::registered::{post_proof_number, prover_id};
use crate::vanilla::random_randomness;

/// The PoSt payload of `proof` (WinningPoSt: the PoRep sector; WindowPoSt:
/// partition 0, full: the PoRep sector and as many sparse sectors as one
/// partition holds).
pub(crate) fn payload<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    proof: RegisteredPoStProof,
    sector: &SparseSector<Tree>,
    rng: &mut dyn RngCore,
) -> Result<Payload, String> {
    let config = proof.as_v1_config();
    let size = u64::from(config.sector_size);
    let sectors = match config.typ {
        PoStType::Winning => 1,
        PoStType::Window => config.sector_count as u64,
    };
    let ids: Vec<SectorId> = (SECTOR_NUMBER..SECTOR_NUMBER + sectors).map(SectorId::from).collect();
    let randomness = random_randomness(rng);
    let challenges = filecoin_proofs::generate_fallback_sector_challenges::<Tree>(&config, &randomness, &ids, prover_id(MINER_ID))
        .map_err(|e| format!("PoSt challenges: {e:#}"))?;
    let shape = TreeShape::<PoseidonHasher>::of::<Tree>(size / 32)?;
    // One seed per sector drawn here, so the sectors can be made in parallel and the output still follows the seed.
    let seeds: Vec<u64> = ids.iter().map(|_| rng.next_u64()).collect();
    let proofs: Vec<Vec<u8>> = ids
        .par_iter()
        .zip(seeds)
        .map(|(&id, seed)| {
            let mine = challenges.get(&id).ok_or_else(|| format!("PoSt challenges name none for sector {id:?}"))?;
            let vanilla = if u64::from(id) == SECTOR_NUMBER {
                sector_proof::<Tree>(id, sector.comm_c, &sector.tree_r_last, mine)
            } else {
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
                let leaves: Vec<(u64, PoseidonDomain)> = mine.iter().map(|&c| (c, PoseidonDomain::random(&mut rng))).collect();
                let tree = SparseTree::new(Arc::clone(&shape), leaves)?;
                sector_proof::<Tree>(id, PoseidonDomain::random(&mut rng), &tree, mine)
            };
            bincode::serialize(&vanilla).map_err(|e| format!("PoSt vanilla proof of sector {id:?}: {e}"))
        })
        .collect::<Result<_, String>>()?;
    let kind = match config.typ {
        PoStType::Winning => PayloadKind::WinningPost,
        PoStType::Window => PayloadKind::WindowPostPartition,
    };
    let mut p = Payload::new(kind, size, post_proof_number(proof));
    p.vanilla_proofs = proofs;
    p.randomness = randomness.to_vec();
    p.miner_id = MINER_ID;
    Ok(p)
}

/// One sector's vanilla PoSt proof (what `generate_single_vanilla_proof` returns).
fn sector_proof<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    id: SectorId,
    comm_c: PoseidonDomain,
    tree_r_last: &SparseTree<PoseidonHasher>,
    challenges: &[u64],
) -> FallbackPoStSectorProof<Tree> {
    let comm_r_last = tree_r_last.root();
    FallbackPoStSectorProof {
        sector_id: id,
        comm_r: <PoseidonHasher as Hasher>::Function::hash2(&comm_c, &comm_r_last),
        vanilla_proof: Proof {
            sectors: vec![SectorProof { inclusion_proofs: challenges.iter().map(|&c| tree_r_last.proof(c)).collect(), comm_c, comm_r_last }],
        },
    }
}
