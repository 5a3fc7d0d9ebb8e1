//! Valid inputs of every Filecoin proof kind at any sector size (32 and
//! 64 GiB included) without sealing: a committed-capacity sector is
//! materialized only where the proofs look (see [`sector`]): the PoRep
//! challenges, their parents' columns and the Merkle paths to them; every
//! other subtree is a default hash ([`tree`]). From it: the C1 output of
//! the current interactive PoRep (Curio's envelope), the SnapDeals
//! partition proofs of an all-zero update, a full WindowPoSt partition's
//! vanilla proofs and a WinningPoSt request, as the same [`Payload`]s
//! [`crate::vanilla`] makes by sealing. A 32 GiB set takes seconds and
//! little memory; [`check`] runs filecoin-proofs' own vanilla verifiers
//! over any payload.
//!
//! Not covered: non-interactive and synthetic PoRep, whose challenges are
//! drawn from comm_r (which the challenged labels make).
//!
//! Feature `testkit`; without it only the sparse sector itself is built,
//! for `porep_partition_instance` (a PoRep test setup's circuit).

#[cfg(feature = "testkit")]
mod check;
#[cfg(feature = "testkit")]
mod post;
mod sector;
#[cfg(feature = "testkit")]
mod snap;
mod tree;

use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_proofs::VanillaSealProof;
use rand::RngCore;
use storage_proofs_core::merkle::MerkleTreeTrait;

use crate::registered::prover_id;
use sector::{SectorIdentity, SparseSector};

#[cfg(feature = "testkit")]
pub use check::check_vanilla;
#[cfg(feature = "testkit")]
use {
    crate::payload::Payload,
    crate::registered::sector_size_name,
    crate::vanilla,
    crate::{current_post_proof, current_seal_proof, current_update_proof},
    filecoin_hashers::Domain,
    filecoin_proofs::{with_shape, PoStType},
    filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof as C1VanillaProofs},
    filecoin_proofs_api::RegisteredSealProof,
    std::any::Any,
    std::path::{Path, PathBuf},
};

// The generated inputs' identity lives here, not in `vanilla` (which
// re-exports it), because `porep_partition_instance` is built without testkit.

/// The miner every generated input is for (`f01000`), sealed or sparse.
pub const MINER_ID: u64 = 1000;
/// The sector number every generated input is for.
pub const SECTOR_NUMBER: u64 = 1;

pub(crate) fn random_32(rng: &mut (impl RngCore + ?Sized)) -> [u8; 32] {
    let mut b = [0u8; 32];
    rng.fill_bytes(&mut b);
    b
}

/// The four payloads (PoRep C2, SnapDeals, WindowPoSt partition 0,
/// WinningPoSt) of one sparse CC sector of `sector_size` bytes, for
/// miner [`MINER_ID`] and sector [`SECTOR_NUMBER`]; `rng` gives the
/// ticket, seed, randomness and every label nothing constrains.
#[cfg(feature = "testkit")]
pub fn generate(sector_size: u64, rng: &mut impl RngCore) -> Result<Vec<Payload>, String> {
    let _span = tracing::info_span!("gen_sparse", sector_size = %sector_size_name(sector_size)).entered();
    let seal_proof = current_seal_proof(sector_size).ok_or_else(|| format!("no registered seal proof for {}", sector_size_name(sector_size)))?;
    let rng: &mut dyn RngCore = rng;
    with_shape!(sector_size, generate_shaped, seal_proof, rng)
}

#[cfg(feature = "testkit")]
fn generate_shaped<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    seal_proof: RegisteredSealProof,
    rng: &mut dyn RngCore,
) -> Result<Vec<Payload>, String> {
    let sector_size = u64::from(seal_proof.sector_size());
    let name = sector_size_name(sector_size);
    let mut seed = random_32(rng);
    seed[0] |= 1; // filecoin-proofs refuses an all-zero seed.
    let id = SectorIdentity { prover_id: prover_id(MINER_ID), sector_id: SECTOR_NUMBER, ticket: random_32(rng), seed };
    let sector = SparseSector::<Tree>::seal(&seal_proof.as_v1_config(), &id, rng)?;
    let c1 = SealCommitPhase1Output {
        registered_proof: seal_proof,
        vanilla_proofs: c1_vanilla_proofs::<Tree>(sector.vanilla_proofs())?,
        comm_r: bytes(&sector.comm_r),
        comm_d: bytes(&sector.comm_d),
        replica_id: sector.replica_id,
        seed: id.seed,
        ticket: id.ticket,
    };
    let porep = vanilla::porep_payload(&c1, SECTOR_NUMBER)?;
    let update = current_update_proof(sector_size).ok_or_else(|| format!("no registered update proof for {name}"))?;
    let snap = snap::payload(update, &sector)?;
    let mut all = vec![porep, snap];
    for typ in [PoStType::Window, PoStType::Winning] {
        let proof = current_post_proof(typ.clone(), sector_size).ok_or_else(|| format!("no {typ:?} PoSt proof for {name}"))?;
        all.push(post::payload::<Tree>(proof, &sector, rng)?);
    }
    Ok(all)
}

/// PoRep's public inputs as the sparse instances make them.
type PorepPublicInputs = storage_proofs_porep::stacked::PublicInputs<PoseidonDomain, filecoin_proofs::DefaultPieceDomain>;

/// A real instance of partition 0 of a PoRep of `config` (a sparse CC
/// sector's: its replica id, comm_d, comm_r and vanilla proofs): the
/// circuit's structure without a job, so its test setup can be made from
/// its segments on every core (filecoin-proofs' blank circuit cannot be
/// split by challenge).
pub(crate) fn porep_partition_instance<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    config: &filecoin_proofs::PoRepConfig,
) -> Result<(PorepPublicInputs, Vec<VanillaSealProof<Tree>>), String> {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    let rng: &mut dyn RngCore = &mut rng;
    let mut seed = random_32(rng);
    seed[0] |= 1;
    let id = SectorIdentity { prover_id: prover_id(MINER_ID), sector_id: SECTOR_NUMBER, ticket: random_32(rng), seed };
    let sector = SparseSector::<Tree>::seal(config, &id, rng)?;
    let inputs = storage_proofs_porep::stacked::PublicInputs {
        replica_id: sector.replica_id,
        tau: Some(storage_proofs_porep::stacked::Tau { comm_d: sector.comm_d, comm_r: sector.comm_r }),
        k: None,
        seed: Some(seed),
    };
    let first = sector.vanilla_proofs().into_iter().next().ok_or("a sector without partitions")?;
    Ok((inputs, first))
}

/// [`generate`], then each payload written to `out_dir` under its kind's
/// file name, as [`vanilla::generate_to_dir`] writes them. Returns the files.
#[cfg(feature = "testkit")]
pub fn generate_to_dir(sector_size: u64, out_dir: &Path, rng: &mut impl RngCore) -> Result<Vec<PathBuf>, String> {
    vanilla::write_payloads(&generate(sector_size, rng)?, out_dir)
}

#[cfg(feature = "testkit")]
fn bytes(d: &impl Domain) -> [u8; 32] {
    d.as_ref().try_into().expect("a domain element is 32 bytes")
}

/// The C1 output's form of the vanilla proofs: filecoin-proofs-api keeps
/// them in an enum with one variant per tree shape (what its private
/// `from_raw` does by downcasting, done here the same way).
#[cfg(feature = "testkit")]
fn c1_vanilla_proofs<Tree: 'static + MerkleTreeTrait>(proofs: Vec<Vec<VanillaSealProof<Tree>>>) -> Result<C1VanillaProofs, String> {
    use filecoin_proofs::{SectorShape2KiB, SectorShape32GiB, SectorShape512MiB, SectorShape64GiB, SectorShape8MiB};
    let proofs: Box<dyn Any> = Box::new(proofs);
    macro_rules! shape {
        ($proofs:expr, $($shape:ty => $variant:ident),+) => {{
            let mut any = $proofs;
            $(any = match any.downcast::<Vec<Vec<VanillaSealProof<$shape>>>>() {
                Ok(p) => return Ok(C1VanillaProofs::$variant(*p)),
                Err(other) => other,
            };)+
            drop(any);
        }};
    }
    shape!(proofs,
        SectorShape2KiB => StackedDrg2KiBV1,
        SectorShape8MiB => StackedDrg8MiBV1,
        SectorShape512MiB => StackedDrg512MiBV1,
        SectorShape32GiB => StackedDrg32GiBV1,
        SectorShape64GiB => StackedDrg64GiBV1);
    Err(format!("a C1 output has no form for vanilla proofs of tree {}", Tree::display()))
}
