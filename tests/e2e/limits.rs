//! Hostile and heavy load over the wire, inside limits the test sets: the
//! request memory refuses what does not fit (RESOURCE_EXHAUSTED), the
//! queue cap refuses jobs past it, hostile PreloadSRS ids cost nothing, the
//! resident set stays bounded (sampled), and the daemon keeps serving.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_proto::v1::await_proof_response::Status as Wire;
use kiln_proto::v1::{PreloadSrsRequest, Priority, ProveRequest, SubmitProofRequest};
use tonic::Code;

use crate::harness::{start, synthetic, verify, Daemon, Transport};
use crate::SERIAL;

/// Samples this process's resident set (the daemon runs in it) every 20 ms.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl RssSampler {
    fn start() -> Self {
        let (stop, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let thread = std::thread::spawn({
            let (stop, peak) = (stop.clone(), peak.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(kiln_memory::resident_set_bytes().unwrap_or(0), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        RssSampler { stop, peak, thread }
    }

    /// The highest resident set seen.
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
        self.peak.load(Ordering::Relaxed)
    }
}

fn rss() -> u64 {
    kiln_memory::trim_heap();
    kiln_memory::resident_set_bytes().unwrap()
}

/// The daemon still proves, and verifiably.
async fn still_serves(d: &Daemon, id: &str) {
    let req = synthetic(id, 9, 1, Priority::Normal, 42);
    let r = d.client().await.prove(ProveRequest { submit: Some(req.clone()) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(r.status(), Wire::Completed, "{}", r.error_message);
    verify(&req, &r.proof).unwrap();
}

const MIB: u64 = 1 << 20;

/// A message of about `bytes` (a synthetic request padded with a payload
/// it may not carry: refused as malformed once it is decoded).
fn padded(id: &str, bytes: usize) -> SubmitProofRequest {
    SubmitProofRequest { vanilla_proof: vec![b'x'; bytes - 256], ..synthetic(id, 9, 1, Priority::Normal, 0) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_parallel_maximum_size_submits_stay_inside_the_request_memory() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(9);
    // Room for one message of the maximum size at a time (3 copies while
    // it is received and decoded), not two.
    let d = start(
        Transport::Unix,
        &[("max_message_bytes", "4MiB"), ("engine.request_memory_bytes", "16MiB"), ("engine.memory_budget_bytes", "272MiB")],
    )
    .await;
    still_serves(&d, "warm-up").await;
    let before = rss();
    let sampler = RssSampler::start();
    let mut calls = Vec::new();
    for k in 0..8 {
        let mut c = d.client().await; // one connection each
        calls.push(tokio::spawn(async move { c.submit_proof(padded(&format!("big-{k}"), 4 << 20)).await }));
    }
    let mut codes = Vec::new();
    for call in calls {
        let status = call.await.unwrap().expect_err("a padded request never becomes a job");
        assert!(matches!(status.code(), Code::InvalidArgument | Code::ResourceExhausted), "{status:?}");
        if status.code() == Code::ResourceExhausted {
            assert!(status.message().contains("request memory"), "{status:?}");
        }
        codes.push(status.code());
    }
    let peak = sampler.finish();
    eprintln!("8 parallel 4 MiB submits: {codes:?}; RSS {} MiB before, peak {} MiB", before / MIB, peak / MIB);
    // Request memory (16 MiB), tonic's and h2's per-connection buffers,
    // the test's own 8 x 4 MiB messages being sent: bounded, whatever the order.
    assert!(peak < before + 96 * MIB, "RSS grew from {} to {} MiB", before / MIB, peak / MIB);
    let st = d.status_json().await;
    assert!(st["engine"]["requests"]["memory"]["peak_reserved"].as_u64().unwrap() <= 16 * MIB, "{st:#}");

    // Alone, a message of the maximum size fits (and is refused as
    // malformed); one past max_message_bytes is refused by its header.
    let mut c = d.client().await;
    let alone = c.submit_proof(padded("alone", 4 << 20)).await.unwrap_err();
    assert_eq!(alone.code(), Code::InvalidArgument, "{alone:?}");
    let past_max = c.submit_proof(padded("past-max", (4 << 20) + 4096)).await.unwrap_err();
    assert_eq!(past_max.code(), Code::OutOfRange, "{past_max:?}");
    still_serves(&d, "after").await;
    d.wait_idle(Duration::from_secs(30)).await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_the_request_memory_is_refused_as_it_arrives() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(9);
    let d = start(Transport::Tcp, &[("max_message_bytes", "4MiB"), ("engine.request_memory_bytes", "8MiB")]).await;
    let mut c = d.client().await;
    let e = c.submit_proof(padded("too-big", 4 << 20)).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("request memory"), "{e:?}");
    // Prove answers the same refusal as a FAILED result.
    let r = c.prove(ProveRequest { submit: Some(padded("too-big", 4 << 20)) }).await;
    match r {
        Ok(r) => {
            let r = r.into_inner().result.unwrap();
            assert_eq!(r.status(), Wire::Failed);
            assert!(r.error_message.contains("ResourceExhausted"), "{}", r.error_message);
        }
        // The body is refused before the handler runs: the call's status.
        Err(e) => assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}"),
    }
    let st = d.status_json().await;
    assert!(st["engine"]["requests"]["memory"]["reserved"].as_u64().unwrap() < MIB, "nothing is left held: {st:#}");
    still_serves(&d, "after").await;
    d.stop().await;
}

/// How many small submits `a_hundred_thousand_small_submits` sends.
fn small_submits() -> usize {
    std::env::var("KILN_E2E_SMALL_SUBMITS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_small_submits_meet_the_queue_cap_and_memory_stays_bounded() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(5);
    let d = start(Transport::Unix, &[("engine.max_queued_jobs", "64"), ("engine.request_memory_bytes", "2MiB")]).await;
    let total = small_submits();
    let before = rss();
    let sampler = RssSampler::start();
    let t0 = Instant::now();
    let (accepted, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let clients = 32;
    let mut tasks = Vec::new();
    for t in 0..clients {
        let c = d.client().await;
        let (accepted, refused) = (accepted.clone(), refused.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = c;
            for k in (t..total).step_by(clients) {
                match c.submit_proof(synthetic(&format!("small-{k}"), 5, 1, Priority::Normal, k as u64)).await {
                    Ok(r) => {
                        assert!(!r.into_inner().existing);
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let took = t0.elapsed();
    let st = d.wait_idle(Duration::from_secs(120)).await;
    let peak = sampler.finish();
    let (accepted, refused) = (accepted.load(Ordering::Relaxed), refused.load(Ordering::Relaxed));
    eprintln!(
        "{total} small submits in {took:?}: {accepted} accepted, {refused} refused; RSS {} MiB before, peak {} MiB",
        before / MIB,
        peak / MIB
    );
    assert_eq!(accepted + refused, total as u64);
    assert!(accepted >= 64, "the queue takes up to its cap");
    let jobs = &st["engine"]["jobs"];
    assert_eq!(jobs["submitted"].as_u64().unwrap(), accepted, "{st:#}");
    assert_eq!(jobs["completed"].as_u64().unwrap(), accepted, "every accepted job was proved: {st:#}");
    assert!(st["engine"]["requests"]["memory"]["peak_reserved"].as_u64().unwrap() <= 2 * MIB);
    assert!(peak < before + 128 * MIB, "RSS grew from {} to {} MiB", before / MIB, peak / MIB);
    still_serves(&d, "after").await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_preload_ids_are_refused_and_cost_nothing() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(9);
    let d = start(Transport::Unix, &[]).await;
    let mut c = d.client().await;
    let before = rss();
    let long = format!("synthetic-dense-2^10-{}in", "9".repeat(100_000));
    for id in [
        "synthetic-dense-2^10-18446744073709551615in",
        "synthetic-filecoin-like-2^10-4294967296in",
        "synthetic-dense-2^4-7in",
        "synthetic-dense-2^64",
        "synthetic-dense-2^-1",
        "porep-18446744073709551615GiB",
        "stacked-proof-of-replication-\u{0}",
        "../../etc/passwd",
        long.as_str(),
    ] {
        let e = c.preload_srs(PreloadSrsRequest { circuit_id: id.to_string() }).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{id:.60}: {e:?}");
    }
    let after = rss();
    assert!(after < before + 32 * MIB, "RSS grew from {} to {} MiB", before / MIB, after / MIB);
    still_serves(&d, "after").await;
    d.stop().await;
}
