//! The four Filecoin kinds at 2 KiB through the real daemon over gRPC:
//! inputs made here on the CPU (a freshly sealed sector, C1, vanilla
//! proofs), proofs made by kiln, answers checked with filecoin-proofs' own
//! verifiers. Malformed payloads get clear errors and the daemon keeps
//! serving.
//!
//! Parameters are filecoin-proofs' files in one cache shared by every test
//! binary of a run (`target/tmp/fil-params`), generated on first use with
//! kiln's generator (PoRep and SnapDeals take a few minutes on 2 cores).
//!
//! `KILN_E2E_FIL_SECTOR_SIZE=8MiB` runs the round trip at another test size
//! (with `KILN_E2E_BACKEND=gpu` on a GPU host: kiln's GPU timings of real
//! Filecoin circuits); the malformed-payload test always uses 2 KiB.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::{registered, vanilla, verify};
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{AwaitProofRequest, AwaitProofResponse, ProveRequest, SubmitProofRequest};
use rand::SeedableRng;
use tonic::Code;

use crate::harness::{start, synthetic, Daemon, Transport};
use crate::SERIAL;

/// Room for the PoRep 2 KiB parameters (1.1 GB, held while proving) and
/// one 2^22-constraint partition.
const BUDGET: (&str, &str) = ("engine.memory_budget_bytes", "8GiB");
/// For larger test sectors (8 MiB, 512 MiB), on a larger host.
const BIG_BUDGET: (&str, &str) = ("engine.memory_budget_bytes", "64GiB");

/// The round trip's sector size: `KILN_E2E_FIL_SECTOR_SIZE`, default 2 KiB.
fn round_trip_sector_size() -> u64 {
    std::env::var("KILN_E2E_FIL_SECTOR_SIZE").map(|s| registered::parse_sector_size(&s).expect("KILN_E2E_FIL_SECTOR_SIZE")).unwrap_or(2048)
}

/// filecoin-proofs' parameter cache for this run. filecoin-proofs reads
/// its settings once per process, so this is set before anything asks.
pub fn fil_params_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fil-params");
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", dir.join("parents"));
        dir
    })
    .clone()
}

/// The four payloads of one freshly sealed sector of `size` bytes.
fn seal(size: u64) -> Vec<Payload> {
    fil_params_dir();
    let work = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let p = vanilla::generate(size, work.path(), &mut rand_chacha::ChaCha8Rng::seed_from_u64(size)).unwrap();
    eprintln!("filecoin e2e: sealed a {} sector and made C1 + vanilla proofs in {:?}", registered::sector_size_name(size), started.elapsed());
    p
}

/// The four payloads of one sealed 2 KiB sector.
fn payloads() -> &'static [Payload] {
    static P: OnceLock<Vec<Payload>> = OnceLock::new();
    P.get_or_init(|| seal(2048))
}

pub(crate) fn payload(kind: PayloadKind) -> Payload {
    payloads().iter().find(|p| p.proof_kind == kind).unwrap().clone()
}

/// The SubmitProofRequest Curio would send for `p`.
pub fn request(p: &Payload, request_id: &str) -> SubmitProofRequest {
    SubmitProofRequest { request_id: request_id.to_string(), ..p.clone().into_request() }
}

/// The length of filecoin-proofs' own answer to `p`: its proof length per
/// partition times the partitions.
fn filecoin_proofs_len(p: &Payload) -> usize {
    match p.proof_kind {
        PayloadKind::PorepSealCommit => {
            let r = registered::seal_proof(p.registered_proof).unwrap();
            r.single_partition_proof_len() * usize::from(r.partitions())
        }
        PayloadKind::SnapDealsUpdate => {
            let r = registered::update_proof(p.registered_proof).unwrap();
            r.single_partition_proof_len() * usize::from(r.partitions())
        }
        PayloadKind::WindowPostPartition | PayloadKind::WinningPost => {
            registered::post_proof(p.registered_proof).unwrap().single_partition_proof_len()
        }
    }
}

async fn submit_and_await(d: &Daemon, req: SubmitProofRequest) -> AwaitProofResponse {
    let mut c = d.client().await;
    let sub = c.submit_proof(req).await.unwrap().into_inner();
    c.await_proof(AwaitProofRequest { job_id: sub.job_id, timeout_ms: 0 }).await.unwrap().into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_filecoin_kind_round_trips_and_passes_filecoin_proofs_verifiers() {
    let _serial = SERIAL.lock().await;
    let size = round_trip_sector_size();
    let all = tokio::task::spawn_blocking(move || if size == 2048 { payloads().to_vec() } else { seal(size) }).await.unwrap();
    let d = start(Transport::Unix, &[if size == 2048 { BUDGET } else { BIG_BUDGET }]).await;
    // Smallest first, so a failure in the plumbing shows before the
    // minutes of PoRep parameter generation.
    for kind in [PayloadKind::WindowPostPartition, PayloadKind::WinningPost, PayloadKind::SnapDealsUpdate, PayloadKind::PorepSealCommit] {
        let p = all.iter().find(|p| p.proof_kind == kind).unwrap().clone();
        let started = Instant::now();
        let r = submit_and_await(&d, request(&p, &format!("fil-{kind:?}"))).await;
        assert_eq!(r.status(), Status::Completed, "{kind:?}: {}", r.error_message);
        assert_eq!(r.proof.len(), filecoin_proofs_len(&p), "{kind:?}: the answer is as long as filecoin-proofs' own");
        let proof = r.proof.clone();
        let checked = p.clone();
        tokio::task::spawn_blocking(move || verify::verify(&checked, &proof)).await.unwrap().unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        eprintln!(
            "filecoin e2e: {kind:?} {} proved and verified by filecoin-proofs in {:?} (srs load {} ms incl. generation, synthesis {} ms, prover {} ms)",
            registered::sector_size_name(size),
            started.elapsed(),
            r.srs_load_ms,
            r.synthesis_ms,
            r.gpu_compute_ms
        );
    }
    d.wait_idle(Duration::from_secs(30)).await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_filecoin_payloads_get_clear_errors_and_the_daemon_keeps_serving() {
    let _serial = SERIAL.lock().await;
    tokio::task::spawn_blocking(payloads).await.unwrap();
    let d = start(Transport::Tcp, &[BUDGET]).await;
    let mut c = d.client().await;

    let porep = payload(PayloadKind::PorepSealCommit);
    let snap = payload(PayloadKind::SnapDealsUpdate);
    let window = payload(PayloadKind::WindowPostPartition);
    let winning = payload(PayloadKind::WinningPost);
    let with = |p: &Payload, f: &dyn Fn(&mut SubmitProofRequest)| {
        let mut r = request(p, "");
        f(&mut r);
        r
    };
    let env: serde_json::Value = serde_json::from_slice(&porep.vanilla_proof).unwrap();
    let phase1 = env["Phase1Out"].as_str().unwrap().to_string();
    let bad: Vec<(&str, SubmitProofRequest, &str)> = vec![
        (
            "bad base64",
            with(&porep, &|r| r.vanilla_proof = br#"{"SectorNum": 1, "Phase1Out": "not*base64", "SectorSize": 2048}"#.to_vec()),
            "Phase1Out is not base64",
        ),
        (
            "truncated C1 JSON",
            with(&porep, &|r| {
                let mut e = env.clone();
                e["Phase1Out"] = serde_json::Value::String(phase1[..phase1.len() / 8 * 4].to_string());
                r.vanilla_proof = serde_json::to_vec(&e).unwrap();
            }),
            "is not a filecoin-proofs 19 SealCommitPhase1Output",
        ),
        ("wrong sector size (PoRep)", with(&porep, &|r| r.sector_size = 8 << 20), "sector_size 8388608 disagrees with vanilla_proof.SectorSize 2048"),
        ("wrong sector size (WindowPoSt)", with(&window, &|r| r.sector_size = 32 << 30), "sector_size 34359738368 does not match registered_proof 10"),
        ("unknown registered proof", with(&winning, &|r| r.registered_proof = 42), "unknown registered PoSt proof 42"),
        ("a WindowPoSt proof for WinningPoSt", with(&winning, &|r| r.registered_proof = 10), "is a Window PoSt proof, not a Winning one"),
        (
            "truncated bincode",
            with(&snap, &|r| {
                let n = r.vanilla_proofs[0].len() - 7;
                r.vanilla_proofs[0].truncate(n);
            }),
            "vanilla_proofs[0] is not a bincode PartitionProof of a 2KiB sector",
        ),
        (
            "wrong partition count",
            with(&snap, &|r| {
                let first = r.vanilla_proofs[0].clone();
                r.vanilla_proofs.push(first);
            }),
            "has 1 partitions, got 2 vanilla_proofs",
        ),
        ("short commitment", with(&snap, &|r| r.comm_d_new.truncate(31)), "comm_d_new must be 32 bytes, got 31"),
        ("short randomness", with(&window, &|r| r.randomness.truncate(16)), "randomness must be 32 bytes, got 16"),
        ("someone else's randomness", with(&window, &|r| r.randomness[3] ^= 0x10), "do not fit this request"),
    ];
    for (what, req, words) in bad {
        let e = c.submit_proof(req.clone()).await.expect_err(what);
        assert_eq!(e.code(), Code::InvalidArgument, "{what}: {}", e.message());
        assert!(e.message().contains(words), "{what}: {:?} lacks {words:?}", e.message());
        // Curio's call, Prove: the request ends FAILED with the same message.
        let r = c.prove(ProveRequest { submit: Some(req) }).await.expect(what).into_inner().result.unwrap();
        assert_eq!(r.status(), Status::Failed, "{what} via Prove");
        assert!(r.error_message.contains(words), "{what} via Prove: {:?} lacks {words:?}", r.error_message);
    }

    // Swapped commitments: the vanilla proofs are checked at submission.
    let swapped = with(&snap, &|r| std::mem::swap(&mut r.comm_r_old, &mut r.comm_r_new));
    let e = c.submit_proof(swapped).await.expect_err("swapped commitments");
    assert!(e.message().contains("the vanilla proofs do not prove comm_r_old -> comm_r_new"), "{}", e.message());

    // Well-formed, but the C1 output's comm_r is not the sector's: only the
    // circuit can tell, so the job itself ends FAILED, saying where.
    let mut c1: serde_json::Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, phase1.as_bytes()).unwrap(),
    )
    .unwrap();
    c1["comm_r"][0] = serde_json::json!((c1["comm_r"][0].as_u64().unwrap() + 1) % 256);
    let tampered = with(&porep, &|r| {
        let mut e = env.clone();
        e["Phase1Out"] = serde_json::Value::String(base64::Engine::encode(&base64::engine::general_purpose::STANDARD, serde_json::to_vec(&c1).unwrap()));
        r.vanilla_proof = serde_json::to_vec(&e).unwrap();
    });
    let r = submit_and_await(&d, tampered).await;
    assert_eq!(r.status(), Status::Failed);
    assert!(r.error_message.contains("not satisfied by the witness"), "{}", r.error_message);
    eprintln!("filecoin e2e: a C1 output with a foreign comm_r ended FAILED: {}", r.error_message);

    // The daemon still serves, Filecoin and synthetic alike.
    let r = submit_and_await(&d, request(&window, "window-after-malformed")).await;
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    let (proof, checked) = (r.proof.clone(), window.clone());
    tokio::task::spawn_blocking(move || verify::verify(&checked, &proof)).await.unwrap().unwrap();
    let s = submit_and_await(&d, synthetic("synthetic-after-malformed", 8, 1, kiln_proto::v1::Priority::Normal, 3)).await;
    assert_eq!(s.status(), Status::Completed, "{}", s.error_message);
    d.wait_idle(Duration::from_secs(30)).await;
    d.stop().await;
}
