//! Sparse inputs (kiln_filecoin::sparse): valid at every size, made in
//! seconds. At 32 and 64 GiB and at 2 KiB, filecoin-proofs' own vanilla
//! verifiers accept every payload (StackedDrg partitions, the update's
//! partition proofs, FallbackPoSt) and kiln's job parsing takes them as it
//! takes sealed ones; a payload with one flipped label or path element is
//! rejected. At 2 KiB kiln's CPU prover proves them and filecoin-proofs'
//! SNARK verifiers accept the proofs, so the circuits, not only the
//! vanilla checks, are satisfied by sparse sectors.
//!
//! Parameters (2 KiB only) are filecoin-proofs' files in the run's shared
//! cache, `target/tmp/fil-params`, generated on first use.

#[path = "support/cpu_prover.rs"]
mod cpu_prover;

use std::sync::OnceLock;
use std::time::Instant;

use base64::Engine as _;
use filecoin_proofs::SectorShape32GiB;
use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::registered::{self, sector_size_name};
use kiln_filecoin::{job_for_payload, sparse, verify};
use rand::SeedableRng;
use serde_json::Value;
use storage_proofs_update::PartitionProof;

const GIB: u64 = 1 << 30;

/// filecoin-proofs reads its settings once per process: the cache first.
fn use_test_parameter_cache() {
    static SET: OnceLock<()> = OnceLock::new();
    SET.get_or_init(|| {
        let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fil-params");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", cache.join("parents"));
    });
}

fn generate(size: u64, seed: u64) -> Vec<Payload> {
    use_test_parameter_cache();
    let started = Instant::now();
    let payloads = sparse::generate(size, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed)).unwrap();
    let bytes: Vec<usize> = payloads.iter().map(|p| p.vanilla_proof.len() + p.vanilla_proofs.iter().map(Vec::len).sum::<usize>()).collect();
    eprintln!("sparse {}: generated in {:.2?}, vanilla bytes {bytes:?}", sector_size_name(size), started.elapsed());
    payloads
}

fn payloads_32gib() -> &'static [Payload] {
    static P: OnceLock<Vec<Payload>> = OnceLock::new();
    P.get_or_init(|| generate(32 * GIB, 32))
}

fn payloads_2kib() -> &'static [Payload] {
    static P: OnceLock<Vec<Payload>> = OnceLock::new();
    P.get_or_init(|| generate(2048, 2))
}

fn find(payloads: &[Payload], kind: PayloadKind) -> Payload {
    payloads.iter().find(|p| p.proof_kind == kind).unwrap().clone()
}

/// Every payload passes filecoin-proofs' vanilla verifiers and becomes a
/// kiln job with the partitions its registered proof has (PoRep, SnapDeals;
/// a PoSt payload's vanilla check is its job parsing, one partition).
fn check_all(payloads: &[Payload], want_partitions: [usize; 2], window_sectors: usize) {
    let kinds: Vec<PayloadKind> = payloads.iter().map(|p| p.proof_kind).collect();
    assert_eq!(kinds, PayloadKind::ALL);
    for p in payloads {
        let t = Instant::now();
        sparse::check_vanilla(p).unwrap_or_else(|e| panic!("{:?}: {e}", p.proof_kind));
        eprintln!("  {:?}: vanilla check {:.2?}", p.proof_kind, t.elapsed());
    }
    for (p, want) in payloads.iter().zip(want_partitions) {
        let t = Instant::now();
        let j = job_for_payload(p).unwrap_or_else(|e| panic!("{:?}: {e}", p.proof_kind));
        assert_eq!(j.num_partitions(), want, "{:?}", p.proof_kind);
        eprintln!("  {:?}: job parse {:.2?}", p.proof_kind, t.elapsed());
    }
    assert_eq!(find(payloads, PayloadKind::WindowPostPartition).vanilla_proofs.len(), window_sectors);
    assert_eq!(find(payloads, PayloadKind::WinningPost).vanilla_proofs.len(), 1);
}

#[test]
fn sparse_32gib_inputs_pass_filecoin_proofs_vanilla_verifiers() {
    let p = payloads_32gib();
    for q in p {
        assert_eq!(q.sector_size, 32 * GIB);
    }
    check_all(p, [10, 16], 2349);
    // The C1 output is the current interactive PoRep's.
    assert_eq!(format!("{:?}", registered::seal_proof(p[0].registered_proof).unwrap()), "StackedDrg32GiBV1_1");
}

#[test]
fn sparse_64gib_inputs_pass_filecoin_proofs_vanilla_verifiers() {
    check_all(&generate(64 * GIB, 64), [10, 16], 2300);
}

#[test]
fn sparse_2kib_inputs_pass_filecoin_proofs_vanilla_verifiers_and_have_the_zero_comm_d() {
    let p = payloads_2kib();
    check_all(p, [1, 1], 2);
    // A CC sector's data commitment is filecoin-proofs' commitment of zeros.
    let zero = filecoin_proofs::compute_comm_d(filecoin_proofs::SectorSize(2048), &[]).unwrap();
    assert_eq!(c1_json(&p[0])["comm_d"], serde_json::to_value(zero).unwrap());
    assert_eq!(find(p, PayloadKind::SnapDealsUpdate).comm_d_new, zero.to_vec());
}

/// The same seed gives the same inputs (gen-vanilla --seed).
#[test]
fn sparse_inputs_follow_the_seed() {
    use_test_parameter_cache();
    let again = sparse::generate(2048, &mut rand_chacha::ChaCha8Rng::seed_from_u64(2)).unwrap();
    assert_eq!(again, payloads_2kib());
}

/// The C1 output (JSON) inside a PoRep payload's envelope.
fn c1_json(p: &Payload) -> Value {
    let env: Value = serde_json::from_slice(&p.vanilla_proof).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(env["Phase1Out"].as_str().unwrap()).unwrap()).unwrap()
}

fn with_c1_json(p: &Payload, c1: &Value) -> Payload {
    let mut env: Value = serde_json::from_slice(&p.vanilla_proof).unwrap();
    env["Phase1Out"] = Value::String(base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(c1).unwrap()));
    Payload { vanilla_proof: serde_json::to_vec(&env).unwrap(), ..p.clone() }
}

/// Flips the low bit of a field element (a JSON array of 32 bytes, least
/// significant first): another valid element, so only the proof's
/// meaning changes.
fn flip(element: &mut Value) {
    let bytes = element.as_array_mut().filter(|a| a.len() == 32).expect("a 32-byte element");
    bytes[0] = Value::from(bytes[0].as_u64().unwrap() ^ 1);
}

/// The first Merkle path element under `v` (the first sibling of its
/// first `hashes` list).
fn first_sibling(v: &mut Value) -> Option<&mut Value> {
    match v {
        Value::Object(map) => {
            if map.contains_key("hashes") {
                return map.get_mut("hashes").and_then(|h| h.get_mut(0));
            }
            map.values_mut().find_map(first_sibling)
        }
        Value::Array(items) => items.iter_mut().find_map(first_sibling),
        _ => None,
    }
}

fn rejected(p: &Payload, what: &str) {
    let e = sparse::check_vanilla(p).expect_err(what);
    eprintln!("  {what}: {e}");
}

/// One flipped label or path element, and filecoin-proofs' verifiers say no.
#[test]
fn a_corrupted_sparse_proof_is_rejected() {
    let payloads = payloads_32gib();
    let porep = &payloads[0];
    let c1 = c1_json(porep);
    let challenge = |c1: &mut Value| c1["vanilla_proofs"]["StackedDrg32GiBV1"][3][5].take();
    for (what, corrupt) in [
        ("a label in a challenge's column", (|proof: &mut Value| flip(&mut proof["replica_column_proofs"]["c_x"]["column"]["rows"][4])) as fn(&mut Value)),
        ("a label in an expander parent's column", |proof| flip(&mut proof["replica_column_proofs"]["exp_parents"][2]["column"]["rows"][7])),
        ("a parent label of a labeling proof", |proof| flip(&mut proof["labeling_proofs"][6]["parents"][3])),
        ("a sibling in the tree_r_last path", |proof| flip(first_sibling(&mut proof["comm_r_last_proof"]).unwrap())),
        ("a sibling in the tree_d path", |proof| flip(first_sibling(&mut proof["comm_d_proofs"]).unwrap())),
    ] {
        let mut bad = c1.clone();
        let mut proof = challenge(&mut bad);
        corrupt(&mut proof);
        bad["vanilla_proofs"]["StackedDrg32GiBV1"][3][5] = proof;
        rejected(&with_c1_json(porep, &bad), what);
    }
    sparse::check_vanilla(&with_c1_json(porep, &c1)).expect("the JSON round trip itself changes nothing");

    let snap = &payloads[1];
    let mut bad = snap.clone();
    let partition: PartitionProof<SectorShape32GiB> = bincode::deserialize(&snap.vanilla_proofs[9]).unwrap();
    let mut v = serde_json::to_value(&partition).unwrap();
    flip(first_sibling(&mut v["challenge_proofs"][40]["proof_r_old"]).unwrap());
    let partition: PartitionProof<SectorShape32GiB> = serde_json::from_value(v).unwrap();
    bad.vanilla_proofs[9] = bincode::serialize(&partition).unwrap();
    rejected(&bad, "a sibling in a SnapDeals tree_r_old path");

    // WinningPoSt: the first inclusion proof (FallbackPoSt::verify's) and a later one (the added check's).
    for (kind, sector, challenge) in [(PayloadKind::WindowPostPartition, 1200, 3), (PayloadKind::WinningPost, 0, 0), (PayloadKind::WinningPost, 0, 50)] {
        let mut bad = find(payloads, kind);
        let proof: filecoin_proofs::FallbackPoStSectorProof<SectorShape32GiB> = bincode::deserialize(&bad.vanilla_proofs[sector]).unwrap();
        let mut v = serde_json::to_value(&proof).unwrap();
        flip(first_sibling(&mut v["vanilla_proof"]["sectors"][0]["inclusion_proofs"][challenge]).unwrap());
        let proof: filecoin_proofs::FallbackPoStSectorProof<SectorShape32GiB> = serde_json::from_value(v).unwrap();
        bad.vanilla_proofs[sector] = bincode::serialize(&proof).unwrap();
        rejected(&bad, &format!("a sibling in {kind:?} inclusion path {challenge}"));
    }
}

fn snark_accepted(kind: PayloadKind) {
    let p = find(payloads_2kib(), kind);
    let j = job_for_payload(&p).unwrap();
    let proof = j.finalize(cpu_prover::prove_partitions(&*j)).unwrap();
    verify::verify(&p, &proof).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
}

#[test]
fn sparse_2kib_window_post_is_proved_and_accepted_by_filecoin_proofs() {
    snark_accepted(PayloadKind::WindowPostPartition);
}

#[test]
fn sparse_2kib_winning_post_is_proved_and_accepted_by_filecoin_proofs() {
    snark_accepted(PayloadKind::WinningPost);
}

#[test]
fn sparse_2kib_porep_is_proved_and_accepted_by_filecoin_proofs() {
    snark_accepted(PayloadKind::PorepSealCommit);
}

#[test]
fn sparse_2kib_snap_deals_is_proved_and_accepted_by_filecoin_proofs() {
    snark_accepted(PayloadKind::SnapDealsUpdate);
}
