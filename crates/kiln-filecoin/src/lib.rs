//! kiln-filecoin: the Filecoin proof kinds. It turns cuzk.v1 payloads into
//! partition circuits and parameter identities with filecoin-proofs 19
//! (CPU features only: kiln does the proving), and kiln's partition proofs
//! back into exactly the bytes filecoin-proofs' own prover returns.
//!
//! One [`JobSource`](kiln_pipeline::JobSource) per kind: [`porep`] (C2 from
//! Curio's C1 envelope; non-interactive PoRep's answer is the SnarkPack
//! aggregate [`ni_porep`] makes with filecoin-proofs), [`snap`] (SnapDeals from vanilla partition
//! proofs), [`post`] (WindowPoSt partitions and WinningPoSt). The answer of
//! every kind but NI-PoRep is its partition proofs (192 bytes each) in
//! partition order, which is what filecoin-proofs writes too, so the
//! pipeline's default `finalize` packs it; NI-PoRep's `finalize` aggregates.
//!
//! Parameters ([`params`]) live where filecoin-proofs keeps them
//! (`FIL_PROOFS_PARAMETER_CACHE`, its file names); test sector sizes are
//! generated on first use with kiln's generator, production ones never.
//!
//! The test tooling is behind the `testkit` feature, for tests, demos and
//! benchmarks: `vanilla` makes real inputs of every kind on the CPU (seal a
//! random sector, C1, vanilla proofs; test sizes), `sparse` valid inputs at
//! any size (32 and 64 GiB included) from a CC sector materialized only
//! where the proofs look, `verify` checks answers with filecoin-proofs'
//! verifiers, and `porep::cut_to_challenges` makes synthesis-only PoRep
//! payloads of fewer challenges. Without it the crate is the proof kinds
//! alone ([`payload`], the request fields as JSON, stays: kiln's client
//! reads it).

/// The README's example, compiled and run as a doc test so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use bellperson::SynthesisError;
use kiln_pipeline::SrsSpec;
use kiln_synth::SynthError;

pub mod native;
pub mod ni_porep;
pub mod params;
pub mod payload;
pub mod porep;
pub mod post;
pub mod registered;
pub mod snap;
// A test sector size's PoRep test setup is made from a sparse sector's
// partition (`sparse::porep_partition_instance`), so the sparse sector is
// always built; its payloads and checks, and the module's API, are testkit.
#[cfg(feature = "testkit")]
pub mod sparse;
#[cfg(not(feature = "testkit"))]
mod sparse;
pub mod test_setup;
#[cfg(feature = "testkit")]
pub mod vanilla;
#[cfg(feature = "testkit")]
pub mod verify;

pub use filecoin_proofs::PoStType;
pub use params::ParamSet;

/// A circuit that could not be built from its (already checked) inputs.
pub(crate) fn circuit_error(msg: String) -> SynthError {
    SynthError::Circuit(SynthesisError::IoError(std::io::Error::other(msg)))
}

/// Runs `f`, which hands a request's untrusted values to filecoin-proofs /
/// storage-proofs code. Some of that code panics on malformed values (a
/// Poseidon domain element that is not a canonical field element panics in
/// filecoin-hashers while a vanilla proof is checked: found by the fuzz
/// targets of kiln-daemon), so a panic here is the request's error.
pub(crate) fn untrusted<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
        Err(format!("{what} are malformed (filecoin-proofs refused them: {msg})"))
    })
}

/// The parameter set named `id`, for preloading and eviction: a short name
/// (`porep-2KiB`, `snap-32GiB`, `window-post-2KiB`, `winning-post-8MiB`;
/// the current registered proof of that kind and size) or filecoin-proofs'
/// cache id itself (`stacked-proof-of-replication-...`, what kiln's SRS ids
/// are). `None`: not a Filecoin id.
pub fn srs_for_circuit_id(id: &str) -> Option<Result<SrsSpec, String>> {
    const FULL_PREFIXES: [&str; 3] = ["stacked-proof-of-replication-", "empty-sector-update-", "proof-of-spacetime-fallback-"];
    if FULL_PREFIXES.iter().any(|p| id.starts_with(p)) {
        return Some(all_param_sets().and_then(|sets| {
            sets.into_iter()
                .find(|s| s.cache_id == id)
                .map(|s| s.srs_spec())
                .ok_or_else(|| format!("{id:?} is no parameter set of a registered proof filecoin-proofs 19 knows"))
        }));
    }
    let (kind, size) = ["porep-", "snap-", "window-post-", "winning-post-"].iter().find_map(|k| id.strip_prefix(k).map(|s| (*k, s)))?;
    Some((|| {
        let bytes = registered::parse_sector_size(size)?;
        let unknown = || format!("{id:?}: no {} registered proof for sector size {size}", kind.trim_end_matches('-'));
        let set = match kind {
            "porep-" => porep::param_set(current_seal_proof(bytes).ok_or_else(unknown)?)?,
            "snap-" => snap::param_set(current_update_proof(bytes).ok_or_else(unknown)?),
            "window-post-" => post::param_set(current_post_proof(PoStType::Window, bytes).ok_or_else(unknown)?)?,
            _ => post::param_set(current_post_proof(PoStType::Winning, bytes).ok_or_else(unknown)?)?,
        };
        Ok(set.srs_spec())
    })())
}

/// The job kiln's daemon makes of this payload (kiln-daemon's `kinds.rs`
/// maps the wire's fields the same way): for tests, tools and benchmarks
/// that start from payloads (`cargo xtask gen-vanilla`'s files, or
/// `vanilla`'s and `sparse`'s with the `testkit` feature).
pub fn job_for_payload(p: &payload::Payload) -> Result<std::sync::Arc<dyn kiln_pipeline::JobSource>, String> {
    use payload::PayloadKind;
    match p.proof_kind {
        PayloadKind::PorepSealCommit => porep::job(
            &p.vanilla_proof,
            &porep::PorepRequest { sector_size: p.sector_size, registered_proof: p.registered_proof, sector_number: p.sector_number },
        ),
        PayloadKind::SnapDealsUpdate => snap::job(&snap::SnapRequest {
            registered_proof: p.registered_proof,
            sector_size: p.sector_size,
            vanilla_proofs: &p.vanilla_proofs,
            comm_r_old: &p.comm_r_old,
            comm_r_new: &p.comm_r_new,
            comm_d_new: &p.comm_d_new,
        }),
        PayloadKind::WindowPostPartition | PayloadKind::WinningPost => {
            let typ = if p.proof_kind == PayloadKind::WinningPost { PoStType::Winning } else { PoStType::Window };
            let req = post::PostRequest {
                registered_proof: p.registered_proof,
                sector_size: p.sector_size,
                vanilla_proofs: &p.vanilla_proofs,
                randomness: &p.randomness,
                miner_id: p.miner_id,
                partition_index: p.partition_index,
            };
            post::job(typ, &req)
        }
    }
}

fn find<T>(by_number: impl Fn(u64) -> Result<T, String>, count: u64, pred: impl Fn(&T) -> bool) -> Option<T> {
    (0..count).rev().filter_map(|n| by_number(n).ok()).find(pred)
}

/// The newest interactive PoRep of this sector size (V1_1).
pub fn current_seal_proof(sector_size: u64) -> Option<filecoin_proofs_api::RegisteredSealProof> {
    (5..10).filter_map(|n| registered::seal_proof(n).ok()).find(|p| u64::from(p.sector_size()) == sector_size)
}

/// The non-interactive PoRep of this sector size (V1_2_Feat_NonInteractivePoRep).
pub fn ni_seal_proof(sector_size: u64) -> Option<filecoin_proofs_api::RegisteredSealProof> {
    (15..20).filter_map(|n| registered::seal_proof(n).ok()).find(|p| u64::from(p.sector_size()) == sector_size)
}

/// The update proof (SnapDeals) of this sector size.
pub fn current_update_proof(sector_size: u64) -> Option<filecoin_proofs_api::RegisteredUpdateProof> {
    find(registered::update_proof, 5, |p| u64::from(p.sector_size()) == sector_size)
}

/// The newest PoSt proof of this type and sector size (WindowPoSt V1_2).
pub fn current_post_proof(typ: PoStType, sector_size: u64) -> Option<filecoin_proofs_api::RegisteredPoStProof> {
    find(registered::post_proof, 15, |p| p.typ() == typ && u64::from(p.sector_size()) == sector_size)
}

/// Every parameter set of every registered proof kiln proves (several
/// registered proofs share one set).
pub fn all_param_sets() -> Result<Vec<ParamSet>, String> {
    let mut sets: Vec<ParamSet> = Vec::new();
    let mut add = |s: ParamSet| {
        if !sets.iter().any(|t| t.cache_id == s.cache_id) {
            sets.push(s);
        }
    };
    for n in 0..20 {
        let p = registered::seal_proof(n)?;
        add(porep::param_set(p)?);
    }
    for n in 0..5 {
        add(snap::param_set(registered::update_proof(n)?));
    }
    for n in 0..15 {
        add(post::param_set(registered::post_proof(n)?)?);
    }
    Ok(sets)
}
