//! The proof-kind table: for each cuzk.v1 `ProofKind`, its default
//! priority, a check of the request's wire shape, and the factory that turns
//! the request into a [`JobSource`] (or none, when this build cannot prove
//! the kind). Adding a kind is one entry in `KINDS`; nothing else in the
//! daemon branches on kinds.
//!
//! The checks here are about the wire (sizes, encodings, required fields);
//! parsing what the payloads mean belongs to the factories (kiln-filecoin's
//! for the Filecoin kinds), whose errors are INVALID_ARGUMENT too. The
//! Filecoin parameters live in filecoin-proofs' cache
//! (`FIL_PROOFS_PARAMETER_CACHE`, default /var/tmp/filecoin-proof-parameters).

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use kiln_filecoin::porep::PorepRequest;
use kiln_filecoin::post::PostRequest;
use kiln_filecoin::snap::SnapRequest;
use kiln_filecoin::PoStType;
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{JobSource, Priority, SrsSpec};
use kiln_proto::v1::{Priority as WirePriority, ProofKind, SubmitProofRequest};
use kiln_synth::workload::WorkloadKind;

/// What factories need from the daemon's configuration.
#[derive(Clone, Debug)]
pub struct KindContext {
    /// Where synthetic parameters are cached (and generated on first use).
    pub synthetic_params_dir: PathBuf,
    /// Largest `synthetic_log_size` accepted.
    pub max_synthetic_log_size: u32,
}

/// A request turned into engine terms.
pub struct BuiltJob {
    pub source: Arc<dyn JobSource>,
    pub priority: Priority,
}

/// Why a request cannot become a job.
#[derive(Debug, PartialEq, Eq)]
pub enum KindError {
    /// The request is malformed (INVALID_ARGUMENT).
    Invalid(String),
    /// A valid kind this build cannot prove (UNIMPLEMENTED).
    Unsupported(String),
}

type Check = fn(&SubmitProofRequest, &KindContext) -> Result<(), String>;
type Factory = fn(&SubmitProofRequest, &KindContext) -> Result<Arc<dyn JobSource>, String>;
/// Resolves a `circuit_id` this kind owns to its parameters (`None`: not this kind's id).
type SrsResolver = fn(&str, &KindContext) -> Option<Result<SrsSpec, String>>;

struct KindEntry {
    kind: ProofKind,
    /// Used when the request says PRIORITY_UNSPECIFIED.
    default_priority: Priority,
    check: Check,
    /// `None`: this build cannot prove the kind.
    factory: Option<Factory>,
    srs: Option<SrsResolver>,
}

/// Every kind the wire names. The four Filecoin kinds get their factories
/// from kiln-filecoin; their SRS ids ("porep-32GiB", "window-post-2KiB", or
/// filecoin-proofs' cache ids) resolve once, through the PoRep entry.
const KINDS: &[KindEntry] = &[
    KindEntry {
        kind: ProofKind::PorepSealCommit,
        default_priority: Priority::Normal,
        check: check_porep,
        factory: Some(build_porep),
        srs: Some(resolve_filecoin_srs),
    },
    KindEntry { kind: ProofKind::SnapDealsUpdate, default_priority: Priority::Normal, check: check_snap, factory: Some(build_snap), srs: None },
    KindEntry { kind: ProofKind::WindowPostPartition, default_priority: Priority::High, check: check_post, factory: Some(build_window_post), srs: None },
    KindEntry { kind: ProofKind::WinningPost, default_priority: Priority::Critical, check: check_post, factory: Some(build_winning_post), srs: None },
    KindEntry {
        kind: ProofKind::KilnSynthetic,
        default_priority: Priority::Normal,
        check: check_synthetic,
        factory: Some(build_synthetic),
        srs: Some(resolve_synthetic_srs),
    },
];

/// Checks `req` and builds its job.
pub fn build(req: &SubmitProofRequest, ctx: &KindContext) -> Result<BuiltJob, KindError> {
    let kind = ProofKind::try_from(req.proof_kind)
        .map_err(|_| KindError::Invalid(format!("unknown proof_kind {} (see cuzk.v1 ProofKind)", req.proof_kind)))?;
    let entry = KINDS.iter().find(|e| e.kind == kind).ok_or_else(|| {
        KindError::Invalid("proof_kind is required (PROOF_KIND_UNSPECIFIED is not a proof kind)".to_string())
    })?;
    let name = kind.as_str_name();
    let priority = match WirePriority::try_from(req.priority) {
        Ok(WirePriority::Unspecified) => entry.default_priority,
        Ok(WirePriority::Low) => Priority::Low,
        Ok(WirePriority::Normal) => Priority::Normal,
        Ok(WirePriority::High) => Priority::High,
        Ok(WirePriority::Critical) => Priority::Critical,
        Err(_) => return Err(KindError::Invalid(format!("unknown priority {} (see cuzk.v1 Priority)", req.priority))),
    };
    (entry.check)(req, ctx).map_err(|m| KindError::Invalid(format!("{name}: {m}")))?;
    let factory = entry.factory.ok_or_else(|| {
        KindError::Unsupported(format!("proof kind {name} is not supported by this build"))
    })?;
    let source = factory(req, ctx).map_err(|m| KindError::Invalid(format!("{name}: {m}")))?;
    Ok(BuiltJob { source, priority })
}

/// The parameters named by `circuit_id`, for PreloadSRS/EvictSRS; the error
/// says which ids this build knows.
pub fn resolve_srs(circuit_id: &str, ctx: &KindContext) -> Result<SrsSpec, String> {
    KINDS
        .iter()
        .filter_map(|e| e.srs)
        .find_map(|resolve| resolve(circuit_id, ctx))
        .unwrap_or_else(|| {
            Err(format!(
                "unknown circuit_id {circuit_id:?}: this build knows synthetic ids such as \
                 \"synthetic-filecoin-like-2^12\" or \"synthetic-dense-2^10-4in\", and Filecoin ids such as \
                 cuzk's \"porep-32g\", \"snap-32g\", \"wpost-32g\", \"winning-32g\", kiln's \"porep-32GiB\", \
                 \"window-post-2KiB\", \"winning-post-8MiB\", or filecoin-proofs' cache ids (\"stacked-proof-of-replication-...\")"
            ))
        })
}

fn need_32(field: &str, v: &[u8]) -> Result<(), String> {
    if v.len() != 32 {
        return Err(format!("{field} must be 32 bytes, got {}", v.len()));
    }
    Ok(())
}

fn need_vanilla_proofs(req: &SubmitProofRequest) -> Result<(), String> {
    if req.vanilla_proofs.is_empty() {
        return Err("vanilla_proofs is empty".into());
    }
    if let Some(i) = req.vanilla_proofs.iter().position(|p| p.is_empty()) {
        return Err(format!("vanilla_proofs[{i}] is empty"));
    }
    Ok(())
}

/// `vanilla_proof` must be `{"SectorNum": int, "Phase1Out": base64, "SectorSize": uint}`.
fn check_porep(req: &SubmitProofRequest, _: &KindContext) -> Result<(), String> {
    if req.vanilla_proof.is_empty() {
        return Err("vanilla_proof (the C1 output JSON) is empty".into());
    }
    let v: serde_json::Value =
        serde_json::from_slice(&req.vanilla_proof).map_err(|e| format!("vanilla_proof is not JSON: {e}"))?;
    let obj = v.as_object().ok_or("vanilla_proof must be a JSON object {SectorNum, Phase1Out, SectorSize}")?;
    obj.get("SectorNum").and_then(|n| n.as_i64()).ok_or("vanilla_proof.SectorNum must be an integer")?;
    let size = obj.get("SectorSize").and_then(|n| n.as_u64()).ok_or("vanilla_proof.SectorSize must be an unsigned integer")?;
    let p1 = obj.get("Phase1Out").and_then(|s| s.as_str()).ok_or("vanilla_proof.Phase1Out must be a base64 string")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(p1)
        .map_err(|e| format!("vanilla_proof.Phase1Out is not base64: {e}"))?;
    if decoded.is_empty() {
        return Err("vanilla_proof.Phase1Out is empty".into());
    }
    if req.sector_size != 0 && req.sector_size != size {
        return Err(format!("sector_size {} disagrees with vanilla_proof.SectorSize {size}", req.sector_size));
    }
    Ok(())
}

fn check_snap(req: &SubmitProofRequest, _: &KindContext) -> Result<(), String> {
    need_vanilla_proofs(req)?;
    need_32("comm_r_old", &req.comm_r_old)?;
    need_32("comm_r_new", &req.comm_r_new)?;
    need_32("comm_d_new", &req.comm_d_new)
}

/// WindowPoSt and WinningPoSt share one payload form.
fn check_post(req: &SubmitProofRequest, _: &KindContext) -> Result<(), String> {
    need_vanilla_proofs(req)?;
    need_32("randomness", &req.randomness)
}

fn build_porep(req: &SubmitProofRequest, _: &KindContext) -> Result<Arc<dyn JobSource>, String> {
    let porep = PorepRequest { sector_size: req.sector_size, registered_proof: req.registered_proof, sector_number: req.sector_number };
    kiln_filecoin::porep::job(&req.vanilla_proof, &porep)
}

fn build_snap(req: &SubmitProofRequest, _: &KindContext) -> Result<Arc<dyn JobSource>, String> {
    kiln_filecoin::snap::job(&SnapRequest {
        registered_proof: req.registered_proof,
        sector_size: req.sector_size,
        vanilla_proofs: &req.vanilla_proofs,
        comm_r_old: &req.comm_r_old,
        comm_r_new: &req.comm_r_new,
        comm_d_new: &req.comm_d_new,
    })
}

fn post_request(req: &SubmitProofRequest) -> PostRequest<'_> {
    PostRequest {
        registered_proof: req.registered_proof,
        sector_size: req.sector_size,
        vanilla_proofs: &req.vanilla_proofs,
        randomness: &req.randomness,
        miner_id: req.miner_id,
        partition_index: req.partition_index,
    }
}

fn build_window_post(req: &SubmitProofRequest, _: &KindContext) -> Result<Arc<dyn JobSource>, String> {
    kiln_filecoin::post::job(PoStType::Window, &post_request(req))
}

fn build_winning_post(req: &SubmitProofRequest, _: &KindContext) -> Result<Arc<dyn JobSource>, String> {
    kiln_filecoin::post::job(PoStType::Winning, &post_request(req))
}

fn resolve_filecoin_srs(id: &str, _: &KindContext) -> Option<Result<SrsSpec, String>> {
    kiln_filecoin::srs_for_circuit_id(&cuzk_circuit_id(id))
}

/// cuzk's PreloadSRS ids in kiln's spelling: cuzk names WindowPoSt
/// `wpost-<size>` and WinningPoSt `winning-<size>` (`wpost-32g`,
/// `winning-32g`); its `porep-32g` and `snap-64g` already read as kiln's.
fn cuzk_circuit_id(id: &str) -> String {
    if let Some(size) = id.strip_prefix("wpost-") {
        return format!("window-post-{size}");
    }
    match id.strip_prefix("winning-") {
        Some(size) if !size.starts_with("post-") => format!("winning-post-{size}"),
        _ => id.to_string(),
    }
}

/// Public inputs per partition when a synthetic request leaves it at 0 (what `kiln demo` uses).
pub const SYNTHETIC_DEFAULT_INPUTS: usize = 4;
/// Most partitions a synthetic request may ask for.
pub const SYNTHETIC_MAX_PARTITIONS: u32 = 256;
/// Most public inputs a synthetic circuit may have (each distinct count is
/// its own parameter set, generated and kept on disk).
pub const SYNTHETIC_MAX_INPUTS: usize = 64;

/// A synthetic circuit of 2^`log` constraints can hold `inputs` public
/// inputs (and is not one of too many parameter sets).
fn check_synthetic_inputs(inputs: usize, log: u32) -> Result<(), String> {
    if inputs > SYNTHETIC_MAX_INPUTS {
        return Err(format!("synthetic_inputs must be at most {SYNTHETIC_MAX_INPUTS}, got {inputs}"));
    }
    // The prover adds one constraint per input (and ONE): leave room for the circuit.
    if inputs + 1 >= (1usize << log) / 2 {
        return Err(format!("synthetic_inputs {inputs} leaves no room in a 2^{log} circuit"));
    }
    Ok(())
}

fn synthetic_kind(s: &str) -> Result<WorkloadKind, String> {
    if s.is_empty() {
        Ok(WorkloadKind::FilecoinLike)
    } else {
        s.parse()
    }
}

fn synthetic_inputs(req: &SubmitProofRequest) -> usize {
    if req.synthetic_inputs == 0 {
        SYNTHETIC_DEFAULT_INPUTS
    } else {
        req.synthetic_inputs as usize
    }
}

fn check_synthetic(req: &SubmitProofRequest, ctx: &KindContext) -> Result<(), String> {
    if !req.vanilla_proof.is_empty() || !req.vanilla_proofs.is_empty() {
        return Err("takes no vanilla_proof(s): the circuit is described by the synthetic_* fields".into());
    }
    let max = ctx.max_synthetic_log_size;
    if !(2..=max).contains(&req.synthetic_log_size) {
        return Err(format!("synthetic_log_size must be between 2 and {max}, got {}", req.synthetic_log_size));
    }
    if req.synthetic_partitions > SYNTHETIC_MAX_PARTITIONS {
        return Err(format!("synthetic_partitions must be at most {SYNTHETIC_MAX_PARTITIONS}, got {}", req.synthetic_partitions));
    }
    check_synthetic_inputs(synthetic_inputs(req), req.synthetic_log_size)?;
    synthetic_kind(&req.synthetic_kind).map(drop)
}

fn build_synthetic(req: &SubmitProofRequest, ctx: &KindContext) -> Result<Arc<dyn JobSource>, String> {
    let job = SyntheticJob::new(
        synthetic_kind(&req.synthetic_kind)?,
        req.synthetic_log_size,
        synthetic_inputs(req),
        req.synthetic_partitions.max(1) as usize,
        ctx.synthetic_params_dir.clone(),
    )
    .with_seed(req.synthetic_seed);
    Ok(Arc::new(job))
}

/// `synthetic-<kind>-2^<log>` with an optional `-<n>in` (default 4 inputs),
/// the ids SyntheticJob's parameters carry.
fn resolve_synthetic_srs(id: &str, ctx: &KindContext) -> Option<Result<SrsSpec, String>> {
    let rest = id.strip_prefix("synthetic-")?;
    let (kind, rest) = rest.split_once("-2^")?;
    Some((|| {
        let kind: WorkloadKind = kind.parse()?;
        let (log, inputs) = match rest.split_once('-') {
            Some((log, n)) => (log, n.strip_suffix("in").and_then(|n| n.parse().ok()).ok_or(format!("bad inputs suffix in {id:?} (expected -<n>in)"))?),
            None => (rest, SYNTHETIC_DEFAULT_INPUTS),
        };
        let log: u32 = log.parse().map_err(|_| format!("bad log size in {id:?}"))?;
        if !(2..=ctx.max_synthetic_log_size).contains(&log) {
            return Err(format!("{id:?}: log size must be between 2 and {}", ctx.max_synthetic_log_size));
        }
        check_synthetic_inputs(inputs, log).map_err(|e| format!("{id:?}: {e}"))?;
        Ok(SyntheticJob::srs_spec(kind, log, inputs, &ctx.synthetic_params_dir))
    })())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> KindContext {
        KindContext { synthetic_params_dir: "/nonexistent/params".into(), max_synthetic_log_size: 16 }
    }

    fn req(kind: ProofKind) -> SubmitProofRequest {
        SubmitProofRequest { proof_kind: kind as i32, ..Default::default() }
    }

    fn err(r: &SubmitProofRequest) -> KindError {
        build(r, &ctx()).err().expect("refused")
    }

    #[test]
    fn every_wire_kind_has_one_entry() {
        for k in [ProofKind::PorepSealCommit, ProofKind::SnapDealsUpdate, ProofKind::WindowPostPartition, ProofKind::WinningPost, ProofKind::KilnSynthetic] {
            assert_eq!(KINDS.iter().filter(|e| e.kind == k).count(), 1, "{k:?}");
        }
    }

    #[test]
    fn unknown_and_unspecified_kinds() {
        let mut r = req(ProofKind::Unspecified);
        assert!(matches!(err(&r), KindError::Invalid(m) if m.contains("proof_kind is required")));
        r.proof_kind = 77;
        assert!(matches!(err(&r), KindError::Invalid(m) if m.contains("unknown proof_kind 77")));
    }

    #[test]
    fn filecoin_kinds_check_the_wire_then_parse_the_payload() {
        let mut w = req(ProofKind::WinningPost);
        w.vanilla_proofs = vec![vec![1, 2, 3]];
        w.randomness = vec![0; 31];
        assert_eq!(err(&w), KindError::Invalid("WINNING_POST: randomness must be 32 bytes, got 31".into()));
        w.randomness = vec![0; 32];
        assert!(matches!(err(&w), KindError::Invalid(m) if m.starts_with("WINNING_POST: vanilla_proofs[0] is not a bincode FallbackPoStSectorProof")));
        w.registered_proof = 10;
        assert!(matches!(err(&w), KindError::Invalid(m) if m.contains("is a Window PoSt proof, not a Winning one")));
        w.registered_proof = 77;
        assert!(matches!(err(&w), KindError::Invalid(m) if m.contains("unknown registered PoSt proof 77")));

        let mut s = req(ProofKind::SnapDealsUpdate);
        s.vanilla_proofs = vec![vec![1]];
        s.comm_r_old = vec![0; 32];
        s.comm_r_new = vec![0; 33];
        s.comm_d_new = vec![0; 32];
        assert!(matches!(err(&s), KindError::Invalid(m) if m.contains("comm_r_new must be 32 bytes, got 33")));

        let mut p = req(ProofKind::PorepSealCommit);
        p.vanilla_proof = b"\x00garbage".to_vec();
        assert!(matches!(err(&p), KindError::Invalid(m) if m.contains("not JSON")));
        p.vanilla_proof = br#"{"SectorNum": 1, "Phase1Out": "%%%", "SectorSize": 2048}"#.to_vec();
        assert!(matches!(err(&p), KindError::Invalid(m) if m.contains("Phase1Out is not base64")));
        p.vanilla_proof = br#"{"SectorNum": 1, "Phase1Out": "e30=", "SectorSize": 2048}"#.to_vec();
        assert!(matches!(err(&p), KindError::Invalid(m) if m.contains("is not a filecoin-proofs 19 SealCommitPhase1Output")));
        p.sector_size = 4096;
        assert!(matches!(err(&p), KindError::Invalid(m) if m.contains("disagrees")));
    }

    #[test]
    fn synthetic_requests() {
        let mut r = req(ProofKind::KilnSynthetic);
        r.synthetic_log_size = 10;
        r.synthetic_partitions = 3;
        r.priority = WirePriority::High as i32;
        let built = build(&r, &ctx()).unwrap();
        assert_eq!(built.priority, Priority::High);
        assert_eq!(built.source.num_partitions(), 3);
        assert_eq!(built.source.srs().id, "synthetic-filecoin-like-2^10-4in");

        r.priority = 9;
        assert!(matches!(err(&r), KindError::Invalid(m) if m.contains("unknown priority 9")));
        r.priority = 0;
        r.synthetic_log_size = 17;
        assert!(matches!(err(&r), KindError::Invalid(m) if m.contains("between 2 and 16")));
        r.synthetic_log_size = 10;
        r.synthetic_kind = "sparse".into();
        assert!(matches!(err(&r), KindError::Invalid(m) if m.contains("unknown workload kind")));
        r.synthetic_kind = "dense".into();
        r.vanilla_proof = vec![1];
        assert!(matches!(err(&r), KindError::Invalid(m) if m.contains("takes no vanilla_proof")));
    }

    #[test]
    fn default_priority_comes_from_the_kind() {
        let mut r = req(ProofKind::KilnSynthetic);
        r.synthetic_log_size = 8;
        assert_eq!(build(&r, &ctx()).unwrap().priority, Priority::Normal);
        assert_eq!(KINDS.iter().find(|e| e.kind == ProofKind::WinningPost).unwrap().default_priority, Priority::Critical);
    }

    #[test]
    fn srs_ids() {
        let c = ctx();
        assert_eq!(resolve_srs("synthetic-filecoin-like-2^12", &c).unwrap().id, "synthetic-filecoin-like-2^12-4in");
        assert_eq!(resolve_srs("synthetic-dense-2^9-2in", &c).unwrap().id, "synthetic-dense-2^9-2in");
        let porep = resolve_srs("porep-32GiB", &c).unwrap();
        assert!(porep.id.starts_with("stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"), "{}", porep.id);
        assert_eq!(resolve_srs(&porep.id, &c).unwrap().id, porep.id);
        assert!(resolve_srs("porep-3GiB", &c).unwrap_err().contains("no porep registered proof"));
        assert!(resolve_srs("stacked-proof-of-replication-nope", &c).unwrap_err().contains("no parameter set"));
        assert!(resolve_srs("porep", &c).unwrap_err().contains("unknown circuit_id \"porep\""));
        assert!(resolve_srs("synthetic-dense-2^40", &c).unwrap_err().contains("between 2 and 16"));
        assert!(resolve_srs("synthetic-weird-2^9", &c).unwrap_err().contains("unknown workload kind"));
        // Hostile input counts are refused before anything is sized from them.
        assert!(resolve_srs("synthetic-dense-2^10-18446744073709551615in", &c).unwrap_err().contains("at most 64"));
        assert!(resolve_srs("synthetic-dense-2^4-7in", &c).unwrap_err().contains("leaves no room"));
    }

    /// Every circuit id cuzk's PreloadSRS takes names the parameter file
    /// cuzk loads for it (the published file names).
    #[test]
    fn cuzk_circuit_ids_name_the_same_parameter_files() {
        let c = ctx();
        for (cuzk_id, file) in [
            ("porep-32g", "stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820"),
            ("porep-64g", "stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-2-sha256_hasher-96f1b4a04c5c51e4759bbf224bbc2ef5a42c7100f16ec0637123f16a845ddfb2"),
            ("wpost-32g", "proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-0377ded656c6f524f1618760bffe4e0a1c51d5a70c4509eedae8a27555733edc"),
            ("winning-32g", "proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-559e581f022bb4e4ec6e719e563bf0e026ad6de42e56c18714a2c692b1b88d7e"),
            ("snap-32g", "empty-sector-update-merkletree-poseidon_hasher-8-8-0-3b7f44a9362e3985369454947bc94022e118211e49fd672d52bec1cbfd599d18"),
            ("snap-64g", "empty-sector-update-merkletree-poseidon_hasher-8-8-2-102e1444a7e9a97ebf1e3d6855dcc77e66c011ea66f936d9b2c508f87f2f83a7"),
        ] {
            let spec = resolve_srs(cuzk_id, &c).unwrap_or_else(|e| panic!("{cuzk_id}: {e}"));
            assert_eq!(spec.id, file, "{cuzk_id}");
            assert!(spec.path.ends_with(format!("v28-{file}.params")), "{cuzk_id}: {}", spec.path.display());
        }
        assert_eq!(resolve_srs("wpost-2k", &c).unwrap().id, resolve_srs("window-post-2KiB", &c).unwrap().id);
        assert_eq!(resolve_srs("winning-2KiB", &c).unwrap().id, resolve_srs("winning-post-2KiB", &c).unwrap().id);
        assert!(resolve_srs("wpost-3g", &c).unwrap_err().contains("no window-post registered proof"));
    }
}
