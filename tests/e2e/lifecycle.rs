//! Cancellation, timeouts and shutdown over the wire.

use std::time::{Duration, Instant};

use crate::harness::{connect, start, synthetic, verify, Transport};
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{AwaitProofRequest, CancelProofRequest, GetStatusRequest, Priority, ProveRequest};

use crate::SERIAL;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_frees_everything() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(11);
    let d = start(Transport::Unix, &[("engine.synthesis_workers", "1")]).await;
    let mut c = d.client().await;
    let running = synthetic("cancel-running", 11, 64, Priority::Low, 1);
    let queued = synthetic("cancel-queued", 10, 2, Priority::Low, 2);
    c.submit_proof(running.clone()).await.unwrap();
    c.submit_proof(queued.clone()).await.unwrap();
    let t0 = Instant::now();
    while d.status_json().await["engine"]["jobs"]["partitions_proved"] == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiter = {
        let mut c = c.clone();
        tokio::spawn(async move { c.await_proof(AwaitProofRequest { job_id: "cancel-running".into(), timeout_ms: 0 }).await })
    };

    let q = c.cancel_proof(CancelProofRequest { job_id: "cancel-queued".into() }).await.unwrap().into_inner();
    assert!(q.found && !q.was_running, "{q:?}");
    let r = c.cancel_proof(CancelProofRequest { job_id: "cancel-running".into() }).await.unwrap().into_inner();
    assert!(r.found && r.was_running, "{r:?}");
    let w = waiter.await.unwrap().unwrap().into_inner();
    assert_eq!(w.status(), Status::Cancelled, "a waiter learns of the cancellation");
    let q = c.await_proof(AwaitProofRequest { job_id: "cancel-queued".into(), timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(q.status(), Status::Cancelled);
    let none = c.cancel_proof(CancelProofRequest { job_id: "never-was".into() }).await.unwrap().into_inner();
    assert!(!none.found && !none.was_running);
    let twice = c.cancel_proof(CancelProofRequest { job_id: "cancel-running".into() }).await.unwrap().into_inner();
    assert!(twice.found && !twice.was_running, "an ended job is left as it was");

    // Everything the jobs held comes back, and the daemon keeps proving.
    let st = d.wait_idle(Duration::from_secs(30)).await;
    assert_eq!(st["engine"]["jobs"]["cancelled"], 2, "{st:#}");
    let gs = c.get_status(GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(gs.total_proofs_cancelled, 2);
    assert!(gs.buffer_stages.iter().all(|s| s.count == 0 && s.bytes == 0), "{:?}", gs.buffer_stages);
    let after = synthetic("after-cancel", 9, 1, Priority::Normal, 3);
    let r = c.prove(ProveRequest { submit: Some(after.clone()) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    verify(&after, &r.proof).unwrap();
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_timeout_then_shutdown_cancels_waiters_and_removes_the_socket() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(11);
    let d = start(Transport::Unix, &[("engine.synthesis_workers", "1")]).await;
    let bound = d.grpc().clone();
    let kiln_daemon::serve::Bound::Unix(sock) = bound.clone() else { unreachable!() };
    let mut c = d.client().await;
    c.submit_proof(synthetic("long", 11, 64, Priority::Normal, 1)).await.unwrap();

    let t0 = Instant::now();
    let r = c.await_proof(AwaitProofRequest { job_id: "long".into(), timeout_ms: 50 }).await.unwrap().into_inner();
    assert_eq!(r.status(), Status::Timeout, "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5), "timeout_ms is honoured: {:?}", t0.elapsed());

    let waiter = {
        let mut c = c.clone();
        tokio::spawn(async move { c.await_proof(AwaitProofRequest { job_id: "long".into(), timeout_ms: 0 }).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Grace 0 (the test default): running work is cancelled at once.
    let t0 = Instant::now();
    d.stop().await;
    assert!(t0.elapsed() < Duration::from_secs(20), "shutdown took {:?}", t0.elapsed());
    let w = waiter.await.unwrap().expect("the open AwaitProof is answered before the server closes").into_inner();
    assert_eq!(w.status(), Status::Cancelled, "{w:?}");
    assert!(!sock.exists(), "socket removed");
    assert!(connect(&bound).await.is_err(), "nothing listens any more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_grace_lets_running_jobs_finish() {
    let _serial = SERIAL.lock().await;
    let d = start(Transport::Tcp, &[("shutdown_grace_secs", "60")]).await;
    let mut c = d.client().await;
    let req = synthetic("drained", 10, 4, Priority::Normal, 8);
    c.submit_proof(req.clone()).await.unwrap();
    let waiter = {
        let mut c = c.clone();
        tokio::spawn(async move { c.await_proof(AwaitProofRequest { job_id: "drained".into(), timeout_ms: 0 }).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    // As on SIGTERM: no new connections, but the queued job is proved
    // within the grace period and its waiter gets the proof.
    d.stop().await;
    let r = waiter.await.unwrap().expect("answered before the server closed").into_inner();
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    verify(&req, &r.proof).unwrap();
}

/// `socket_mode` and `socket_group`: the socket Curio's user opens (through
/// a shared group) gets them before it is reachable, and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_group_and_mode_settings() {
    use std::os::unix::fs::MetadataExt;
    let _serial = SERIAL.lock().await;
    // The daemon's own group, by number (any group would do for root, but
    // a non-root user may only give its files to its own groups).
    let gid = own_group();
    let d = start(Transport::Unix, &[("socket_mode", "0660"), ("socket_group", &gid.to_string())]).await;
    let kiln_daemon::serve::Bound::Unix(sock) = d.grpc().clone() else { unreachable!() };
    assert_eq!(crate::harness::mode_of(&sock), 0o660);
    assert_eq!(std::fs::metadata(&sock).unwrap().gid(), gid);
    let mut c = d.client().await;
    c.get_status(GetStatusRequest {}).await.unwrap();
    d.stop().await;
}

/// The group of files this process creates (its effective group id).
fn own_group() -> u32 {
    use std::os::unix::fs::MetadataExt;
    let f = tempfile::NamedTempFile::new().unwrap();
    f.as_file().metadata().unwrap().gid()
}
