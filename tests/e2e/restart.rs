//! One daemon per socket, and what a client's retry finds. (Killing and
//! restarting a real `kiln serve` process: `cargo xtask kill-loop`, of
//! which CI runs a few rounds.)

use std::time::{Duration, Instant};

use kiln_daemon::serve;
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{AwaitProofRequest, CancelProofRequest, GetStatusRequest, Priority, ProveRequest};

use crate::harness::{connect, start, synthetic, test_config, verify, Transport};
use crate::SERIAL;

/// Two daemons started at the same moment on one socket: exactly one
/// serves, the other says who holds it; once the first stops, a new one
/// starts (the lock file stays, the lock does not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_started_at_once_on_one_socket_exactly_one_serves() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("kiln.sock");
    let listen = format!("unix:{}", sock.display());
    for round in 0..5 {
        let (a, b) = tokio::join!(serve::start(test_config(&listen, &[])), serve::start(test_config(&listen, &[])));
        let (running, refused) = match (a, b) {
            (Ok(r), Err(e)) | (Err(e), Ok(r)) => (r, e),
            (Ok(_), Ok(_)) => panic!("round {round}: both daemons started on {}", sock.display()),
            (Err(a), Err(b)) => panic!("round {round}: neither started: {a:#} / {b:#}"),
        };
        let why = format!("{refused:#}");
        let pid = format!("(pid {})", std::process::id());
        assert!(why.contains("is in use by a running daemon") && why.contains(&pid) && why.contains("kiln.sock.lock"), "{why}");
        let mut c = connect(&running.grpc).await.unwrap();
        c.get_status(GetStatusRequest {}).await.unwrap();
        running.shutdown().await.unwrap();
        assert!(!sock.exists(), "the socket goes with its daemon");
        assert!(dir.path().join("kiln.sock.lock").exists(), "the lock file stays (only the lock is released)");
    }
}

/// A client's retry of a request id whose job was cancelled proves it
/// again (Curio's ids are deterministic: `porep-<miner>-<sector>`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_cancellation_proves_again() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(11);
    let d = start(Transport::Unix, &[("engine.synthesis_workers", "1")]).await;
    let mut c = d.client().await;
    let long = synthetic("porep-1000-42", 11, 64, Priority::Normal, 1);
    c.submit_proof(long).await.unwrap();
    let t0 = Instant::now();
    while d.status_json().await["engine"]["jobs"]["partitions_proved"] == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = c.cancel_proof(CancelProofRequest { job_id: "porep-1000-42".into() }).await.unwrap().into_inner();
    assert!(r.found && r.was_running, "{r:?}");
    let cancelled = c.await_proof(AwaitProofRequest { job_id: "porep-1000-42".into(), timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(cancelled.status(), Status::Cancelled);

    // The retry: same id, proved now, not the cancellation again.
    let retry = synthetic("porep-1000-42", 10, 2, Priority::Normal, 7);
    let r = c.prove(ProveRequest { submit: Some(retry.clone()) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    verify(&retry, &r.proof).unwrap();
    // Completed, the id keeps answering with that proof.
    let again = c.submit_proof(retry).await.unwrap().into_inner();
    assert!(again.existing, "{again:?}");
    d.wait_idle(Duration::from_secs(30)).await;
    d.stop().await;
}

/// SIGTERM while a job runs and the grace period is too short for it: the
/// waiting client is told so (CANCELLED, saying kiln is shutting down and
/// to submit it again), the socket goes, and nothing listens after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_past_the_grace_period_tells_waiters_why() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(11);
    let d = start(Transport::Unix, &[("engine.synthesis_workers", "1"), ("shutdown_grace_secs", "1")]).await;
    let bound = d.grpc().clone();
    let mut c = d.client().await;
    c.submit_proof(synthetic("long", 11, 64, Priority::Normal, 3)).await.unwrap();
    let waiter = {
        let mut c = c.clone();
        tokio::spawn(async move { c.await_proof(AwaitProofRequest { job_id: "long".into(), timeout_ms: 0 }).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    d.stop().await;
    assert!(t0.elapsed() < Duration::from_secs(20), "shutdown took {:?}", t0.elapsed());
    let w = waiter.await.unwrap().expect("answered before the server closed").into_inner();
    assert_eq!(w.status(), Status::Cancelled, "{w:?}");
    assert!(w.error_message.contains("shutting down") && w.error_message.contains("submit it again"), "{}", w.error_message);
    assert!(connect(&bound).await.is_err());
}
