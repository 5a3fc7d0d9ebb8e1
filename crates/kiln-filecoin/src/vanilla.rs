//! Real inputs of every Filecoin proof kind, made on the CPU with
//! filecoin-proofs: seal a sector of random data (PreCommit 1 and 2), run
//! C1, snap new random data into it (SnapDeals vanilla partition proofs),
//! and prove WindowPoSt and WinningPoSt vanilla proofs over it; on request
//! a second sector sealed for non-interactive PoRep and its C1. For test
//! sector sizes this takes well under a second; no Groth16 parameters are
//! needed. What `cargo xtask gen-vanilla` writes, and what the tests prove.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use filecoin_proofs_api::{
    post, seal, update, PaddedBytesAmount, PieceInfo, PoStType, PrivateReplicaInfo, RegisteredSealProof, SectorId, UnpaddedBytesAmount,
};
use rand::{Rng, RngCore};

use crate::payload::{Payload, PayloadKind};
use crate::registered::{post_proof_number, prover_id, sector_size_name, seal_proof_number, update_proof_number};
use crate::sparse::random_32;
use crate::{current_post_proof, current_seal_proof, current_update_proof};

pub use crate::sparse::{MINER_ID, SECTOR_NUMBER};

/// The four payloads (PoRep C2, SnapDeals, WindowPoSt partition 0,
/// WinningPoSt) of one freshly sealed sector of `sector_size` bytes, built
/// in `work_dir` (which keeps the sector's files).
pub fn generate(sector_size: u64, work_dir: &Path, rng: &mut impl RngCore) -> Result<Vec<Payload>, String> {
    let _span = tracing::info_span!("gen_vanilla", sector_size = %sector_size_name(sector_size)).entered();
    let e = |what: &'static str| move |err: anyhow::Error| format!("{what}: {err:#}");
    let io = |what: &'static str| move |err: std::io::Error| format!("{what}: {err}");
    let seal_proof = current_seal_proof(sector_size).ok_or_else(|| format!("no registered seal proof for {}", sector_size_name(sector_size)))?;
    let prover = prover_id(MINER_ID);
    let sector = SectorId::from(SECTOR_NUMBER);
    let dir = |name: &str| -> Result<std::path::PathBuf, String> {
        let d = work_dir.join(name);
        fs::create_dir_all(&d).map_err(|err| format!("creating {}: {err}", d.display()))?;
        Ok(d)
    };
    let update_cache = dir("update-cache")?;
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(sector_size));
    let Sealed { porep, p2, cache, sealed } = seal_and_c1(seal_proof, work_dir, rng)?;

    // SnapDeals: new random data encoded into the sealed sector.
    let update_proof =
        current_update_proof(sector_size).ok_or_else(|| format!("no registered update proof for {}", sector_size_name(sector_size)))?;
    let new_staged = work_dir.join("update-staged");
    let new_piece = write_piece(seal_proof, &new_staged, unpadded, rng)?;
    let new_replica = work_dir.join("update-replica");
    // filecoin-proofs writes the new replica in place: it must already have the sector's size.
    File::create(&new_replica).and_then(|f| f.set_len(sector_size)).map_err(io("creating the update replica"))?;
    let encoded = update::empty_sector_update_encode_into(
        update_proof,
        &new_replica,
        &update_cache,
        &sealed,
        &cache,
        &new_staged,
        std::slice::from_ref(&new_piece),
    )
    .map_err(e("SnapDeals encode"))?;
    let partition_proofs = update::generate_partition_proofs(
        update_proof,
        p2.comm_r,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sealed,
        &cache,
        &new_replica,
        &update_cache,
    )
    .map_err(e("SnapDeals vanilla proofs"))?;
    let mut snap = Payload::new(PayloadKind::SnapDealsUpdate, sector_size, update_proof_number(update_proof));
    snap.vanilla_proofs = partition_proofs.into_iter().map(|p| p.0).collect();
    snap.comm_r_old = p2.comm_r.to_vec();
    snap.comm_r_new = encoded.comm_r_new.to_vec();
    snap.comm_d_new = encoded.comm_d_new.to_vec();

    // PoSt over the sealed sector.
    let mut posts = Vec::new();
    for (typ, kind) in [(PoStType::Window, PayloadKind::WindowPostPartition), (PoStType::Winning, PayloadKind::WinningPost)] {
        let proof = current_post_proof(typ.clone(), sector_size).ok_or_else(|| format!("no {typ:?} PoSt proof for {}", sector_size_name(sector_size)))?;
        let randomness = random_randomness(rng);
        let replica = PrivateReplicaInfo::new(proof, p2.comm_r, cache.clone(), sealed.clone());
        let challenges = post::generate_fallback_sector_challenges(proof, &randomness, &[sector], prover).map_err(e("PoSt challenges"))?;
        let mine = challenges.get(&sector).ok_or("PoSt challenges name no challenge for the sector")?;
        let vanilla = post::generate_single_vanilla_proof(proof, sector, &replica, mine).map_err(e("PoSt vanilla proof"))?;
        let mut p = Payload::new(kind, sector_size, post_proof_number(proof));
        p.vanilla_proofs = vec![vanilla];
        p.randomness = randomness.to_vec();
        p.miner_id = MINER_ID;
        posts.push(p);
    }
    let mut all = vec![porep, snap];
    all.extend(posts);
    Ok(all)
}

/// A sealed sector and the PoRep C2 payload of its C1 output.
struct Sealed {
    porep: Payload,
    p2: seal::SealPreCommitPhase2Output,
    cache: PathBuf,
    sealed: PathBuf,
}

/// Seals a sector of random data (one piece) with `seal_proof` in
/// `work_dir` (PreCommit 1 and 2) and runs C1 over it.
fn seal_and_c1(seal_proof: RegisteredSealProof, work_dir: &Path, rng: &mut impl RngCore) -> Result<Sealed, String> {
    let e = |what: &'static str| move |err: anyhow::Error| format!("{what}: {err:#}");
    let sector_size = u64::from(seal_proof.sector_size());
    let prover = prover_id(MINER_ID);
    let sector = SectorId::from(SECTOR_NUMBER);
    let cache = work_dir.join("cache");
    fs::create_dir_all(&cache).map_err(|err| format!("creating {}: {err}", cache.display()))?;
    let unpadded = UnpaddedBytesAmount::from(PaddedBytesAmount(sector_size));
    let staged = work_dir.join("staged");
    let piece = write_piece(seal_proof, &staged, unpadded, rng)?;
    let sealed = work_dir.join("sealed");
    File::create(&sealed).map_err(|err| format!("creating the sealed file: {err}"))?;
    let ticket = random_32(rng);
    let p1 = seal::seal_pre_commit_phase1(seal_proof, &cache, &staged, &sealed, prover, sector, ticket, std::slice::from_ref(&piece))
        .map_err(e("PreCommit 1"))?;
    let p2 = seal::seal_pre_commit_phase2(p1, &cache, &sealed).map_err(e("PreCommit 2"))?;
    let seed = random_32(rng);
    let c1 = seal::seal_commit_phase1(&cache, &sealed, prover, sector, ticket, seed, p2.clone(), std::slice::from_ref(&piece))
        .map_err(e("C1"))?;
    Ok(Sealed { porep: porep_payload(&c1, SECTOR_NUMBER)?, p2, cache, sealed })
}

/// The PoRep C2 payload of a C1 output: Curio's envelope
/// `{SectorNum, Phase1Out: base64(C1 JSON), SectorSize}`, for [`MINER_ID`].
pub(crate) fn porep_payload(c1: &seal::SealCommitPhase1Output, sector_number: u64) -> Result<Payload, String> {
    let sector_size = u64::from(c1.registered_proof.sector_size());
    let c1_json = serde_json::to_vec(c1).map_err(|err| format!("C1 JSON: {err}"))?;
    let envelope = serde_json::json!({
        "SectorNum": sector_number,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(&c1_json),
        "SectorSize": sector_size,
    });
    let mut porep = Payload::new(PayloadKind::PorepSealCommit, sector_size, seal_proof_number(c1.registered_proof));
    porep.vanilla_proof = serde_json::to_vec(&envelope).map_err(|err| format!("envelope JSON: {err}"))?;
    porep.sector_number = sector_number;
    porep.miner_id = MINER_ID;
    Ok(porep)
}

/// The file [`generate_ni_porep_to_dir`] writes.
pub const NI_POREP_FILE: &str = "porep-c2-ni.json";

/// A non-interactive PoRep C2 payload (`StackedDrg<size>V1_2_Feat_NonInteractivePoRep`):
/// a sector of its own (the registered proof is part of the replica id)
/// sealed in `work_dir`, and its C1 output. Proving it needs the SnarkPack
/// SRS besides the PoRep parameters (see [`crate::ni_porep`]).
pub fn generate_ni_porep(sector_size: u64, work_dir: &Path, rng: &mut impl RngCore) -> Result<Payload, String> {
    let _span = tracing::info_span!("gen_vanilla_ni_porep", sector_size = %sector_size_name(sector_size)).entered();
    let proof = crate::ni_seal_proof(sector_size).ok_or_else(|| format!("no non-interactive PoRep for {}", sector_size_name(sector_size)))?;
    Ok(seal_and_c1(proof, work_dir, rng)?.porep)
}

/// [`generate_ni_porep`], written to `out_dir/`[`NI_POREP_FILE`]. Returns the file.
pub fn generate_ni_porep_to_dir(sector_size: u64, out_dir: &Path, rng: &mut impl RngCore) -> Result<PathBuf, String> {
    fs::create_dir_all(out_dir).map_err(|err| format!("creating {}: {err}", out_dir.display()))?;
    let work = tempfile::Builder::new().prefix("kiln-gen-vanilla-ni").tempdir().map_err(|err| format!("a work directory: {err}"))?;
    let payload = generate_ni_porep(sector_size, work.path(), rng)?;
    let path = out_dir.join(NI_POREP_FILE);
    write_payload(&payload, &path)?;
    Ok(path)
}

fn write_payload(p: &Payload, path: &Path) -> Result<(), String> {
    let json = serde_json::to_vec_pretty(p).map_err(|err| format!("payload JSON: {err}"))?;
    fs::write(path, json).map_err(|err| format!("writing {}: {err}", path.display()))
}

/// PoSt randomness: 32 random bytes that are a field element, as chain randomness is made to be.
pub(crate) fn random_randomness(rng: &mut (impl RngCore + ?Sized)) -> [u8; 32] {
    let mut b = random_32(rng);
    b[31] &= 0x3f;
    b
}

/// Writes one piece of random data, fr32-padded, to `staged`.
fn write_piece(proof: RegisteredSealProof, staged: &Path, unpadded: UnpaddedBytesAmount, rng: &mut impl RngCore) -> Result<PieceInfo, String> {
    let data: Vec<u8> = (0..u64::from(unpadded)).map(|_| rng.gen()).collect();
    let mut target = File::create(staged).map_err(|err| format!("creating {}: {err}", staged.display()))?;
    let (piece, _) = seal::add_piece(proof, &data[..], &mut target, unpadded, &[]).map_err(|err| format!("add_piece: {err:#}"))?;
    target.flush().map_err(|err| format!("writing {}: {err}", staged.display()))?;
    Ok(piece)
}

/// [`generate`], then each payload written to `out_dir` as
/// [`PayloadKind::file_name`] (pretty JSON). Returns the files.
pub fn generate_to_dir(sector_size: u64, out_dir: &Path, rng: &mut impl RngCore) -> Result<Vec<PathBuf>, String> {
    let work = tempfile::Builder::new().prefix("kiln-gen-vanilla").tempdir().map_err(|err| format!("a work directory: {err}"))?;
    write_payloads(&generate(sector_size, work.path(), rng)?, out_dir)
}

/// Writes each payload to `out_dir` as [`PayloadKind::file_name`] (pretty JSON). Returns the files.
pub(crate) fn write_payloads(payloads: &[Payload], out_dir: &Path) -> Result<Vec<PathBuf>, String> {
    fs::create_dir_all(out_dir).map_err(|err| format!("creating {}: {err}", out_dir.display()))?;
    payloads
        .iter()
        .map(|p| {
            let path = out_dir.join(p.proof_kind.file_name());
            write_payload(p, &path)?;
            Ok(path)
        })
        .collect()
}

/// Reads a payload `generate_to_dir` wrote.
pub fn read_payload(path: &Path) -> Result<Payload, String> {
    let bytes = fs::read(path).map_err(|err| format!("reading {}: {err}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|err| format!("{} is not a payload: {err}", path.display()))
}
