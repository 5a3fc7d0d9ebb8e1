//! Proving over the wire: concurrency, priorities, idempotency, memory.

use std::time::{Duration, Instant};

use crate::harness::{ensure_params, mode_of, start, synthetic, verify, Transport};
use kiln_pipeline::{shape_from_params, EngineConfig, PartitionFootprint};
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{AwaitProofRequest, GetStatusRequest, Priority, ProveRequest};

use crate::SERIAL;

const PRIORITIES: [Priority; 4] = [Priority::Low, Priority::Normal, Priority::High, Priority::Critical];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_concurrent_mixed_priorities_all_verify() {
    let _serial = SERIAL.lock().await;
    let d = start(Transport::Unix, &[]).await;
    let kiln_daemon::serve::Bound::Unix(sock) = d.grpc().clone() else { unreachable!() };
    assert_eq!(mode_of(&sock), 0o600, "socket is private to the daemon's user");

    let client = d.client().await;
    let mut tasks = Vec::new();
    for i in 0..8u32 {
        let req = synthetic(&format!("mixed-{i}"), 8 + i % 3, 1 + i % 3, PRIORITIES[i as usize % 4], 1000 + 10 * i as u64);
        let mut c = client.clone();
        tasks.push(tokio::spawn(async move {
            let sub = c.submit_proof(req.clone()).await.expect("accepted").into_inner();
            assert_eq!(sub.job_id, req.request_id, "the request id is the job id");
            assert!(!sub.existing);
            let r = c.await_proof(AwaitProofRequest { job_id: sub.job_id, timeout_ms: 0 }).await.unwrap().into_inner();
            (req, r)
        }));
    }
    for t in tasks {
        let (req, r) = t.await.unwrap();
        assert_eq!(r.status(), Status::Completed, "{}: {}", req.request_id, r.error_message);
        verify(&req, &r.proof).unwrap_or_else(|e| panic!("{}: {e:#}", req.request_id));
        // (srs_load, synthesis and gpu_compute are sums over partitions, so
        // with several partitions in flight they may exceed total.)
        assert!(r.total_ms >= r.queue_wait_ms, "{r:?}");
    }

    d.wait_idle(Duration::from_secs(10)).await;
    let st = d.client().await.get_status(GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!((st.total_proofs_completed, st.total_proofs_failed), (8, 0));
    assert_eq!(st.host_memory_limit_bytes, 256 << 20);
    assert!(st.queues.is_empty(), "{:?}", st.queues);
    assert_eq!(st.buffer_stages.len(), 6);
    assert!(st.buffer_stages.iter().all(|s| s.count == 0 && s.bytes == 0), "{:?}", st.buffer_stages);
    if crate::harness::backend() == "cpu" {
        // The ordinary worker and the critical lane's (critical_prover_workers).
        assert!(!st.backends.is_empty() && st.backends.iter().all(|b| b == "cpu"), "{:?}", st.backends);
        assert!(st.gpus.is_empty(), "a CPU-only engine reports no GPUs");
    } else {
        assert!(!st.gpus.is_empty() && st.gpus.iter().all(|g| g.vram_total_bytes > 0), "{:?}", st.gpus);
        assert!(st.backends.iter().all(|b| b.starts_with("gpu")), "{:?}", st.backends);
    }
    assert!(st.loaded_srs.iter().any(|s| s.circuit_id == "synthetic-filecoin-like-2^9-4in"), "{:?}", st.loaded_srs);
    d.stop().await;
    assert!(!sock.exists(), "the socket is removed on shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_prove_and_submit_await_all_verify() {
    let _serial = SERIAL.lock().await;
    let d = start(Transport::Tcp, &[]).await;
    assert!(matches!(d.grpc(), kiln_daemon::serve::Bound::Tcp(a) if a.ip().is_loopback() && a.port() != 0));
    let c = d.client().await;
    let mut tasks = Vec::new();
    for i in 0..2u32 {
        let req = synthetic(&format!("tcp-prove-{i}"), 9, 2, Priority::Normal, 77 + i as u64 * 5);
        let mut c = c.clone();
        tasks.push(tokio::spawn(async move {
            let r = c.prove(ProveRequest { submit: Some(req.clone()) }).await.unwrap().into_inner().result.unwrap();
            (req, r)
        }));
    }
    let req = synthetic("tcp-submit", 10, 1, Priority::High, 5);
    let mut c2 = c.clone();
    let sub = c2.submit_proof(req.clone()).await.unwrap().into_inner();
    let r = c2.await_proof(AwaitProofRequest { job_id: sub.job_id, timeout_ms: 60_000 }).await.unwrap().into_inner();
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    verify(&req, &r.proof).unwrap();
    for t in tasks {
        let (req, r) = t.await.unwrap();
        assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
        verify(&req, &r.proof).unwrap();
    }
    d.wait_idle(Duration::from_secs(10)).await;
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubmitted_request_id_returns_the_existing_job() {
    let _serial = SERIAL.lock().await;
    let d = start(Transport::Unix, &[]).await;
    let mut c = d.client().await;
    let req = synthetic("idem-1", 9, 2, Priority::Normal, 42);
    let first = c.submit_proof(req.clone()).await.unwrap().into_inner();
    let again = c.submit_proof(req.clone()).await.unwrap().into_inner();
    assert_eq!(first.job_id, again.job_id);
    assert!(!first.existing && again.existing, "{first:?} {again:?}");

    let done = c.await_proof(AwaitProofRequest { job_id: first.job_id.clone(), timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(done.status(), Status::Completed, "{}", done.error_message);
    verify(&req, &done.proof).unwrap();

    // After completion too: same job, same answer, nothing proved twice.
    let after = c.submit_proof(req.clone()).await.unwrap().into_inner();
    assert!(after.existing);
    let proved = c.prove(ProveRequest { submit: Some(req.clone()) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(proved.status(), Status::Completed);
    assert_eq!(proved.proof, done.proof, "Prove with a known request_id answers the existing job");
    let st = c.get_status(GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(st.total_proofs_completed, 1);
    let js = d.status_json().await;
    assert_eq!(js["engine"]["jobs"]["submitted"], 1, "{js:#}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn critical_job_overtakes_a_saturated_queue() {
    let _serial = SERIAL.lock().await;
    ensure_params(11);
    ensure_params(8);
    let d = start(Transport::Tcp, &[("engine.synthesis_workers", "1")]).await;
    let c = d.client().await;
    // A backlog of 13 large partitions...
    let mut backlog = Vec::new();
    for (i, (prio, parts)) in [(Priority::Normal, 4), (Priority::Normal, 4), (Priority::Normal, 4), (Priority::Low, 1)].into_iter().enumerate() {
        let req = synthetic(&format!("backlog-{i}"), 11, parts, prio, 500 + 10 * i as u64);
        let sub = c.clone().submit_proof(req.clone()).await.unwrap().into_inner();
        backlog.push((req, sub));
    }
    let positions: Vec<u32> = backlog.iter().map(|(_, s)| s.queue_position).collect();
    assert!(positions[1] > 0 && positions[2] > positions[1], "later jobs queue behind earlier ones: {positions:?}");
    let waiters: Vec<_> = backlog
        .iter()
        .map(|(req, sub)| {
            let (mut c, id, req) = (c.clone(), sub.job_id.clone(), req.clone());
            tokio::spawn(async move {
                let r = c.await_proof(AwaitProofRequest { job_id: id, timeout_ms: 0 }).await.unwrap().into_inner();
                (req, r, Instant::now())
            })
        })
        .collect();
    // ...is running when the CRITICAL job (WinningPoSt-like) arrives.
    let t0 = Instant::now();
    while d.status_json().await["engine"]["jobs"]["partitions_proved"] == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the backlog never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut crit = synthetic("winning", 8, 1, Priority::Critical, 9);
    crit.deadline_ms = 60_000;
    let mut cc = c.clone();
    let sub = cc.submit_proof(crit.clone()).await.unwrap().into_inner();
    assert_eq!(sub.queue_position, 0, "nothing queued is as urgent");
    let r = cc.await_proof(AwaitProofRequest { job_id: sub.job_id, timeout_ms: 0 }).await.unwrap().into_inner();
    let crit_done = Instant::now();
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    verify(&crit, &r.proof).unwrap();

    let mut ends = Vec::new();
    for w in waiters {
        let (req, r, at) = w.await.unwrap();
        assert_eq!(r.status(), Status::Completed, "{}: {}", req.request_id, r.error_message);
        verify(&req, &r.proof).unwrap();
        ends.push((req.request_id, at));
    }
    for (id, at) in &ends[2..] {
        assert!(crit_done < *at, "the CRITICAL job finished after {id}, queued before it");
    }
    let st = d.wait_idle(Duration::from_secs(10)).await;
    assert_eq!(st["engine"]["jobs"]["deadline_missed"], 0, "{st:#}");
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_budget_forces_waiting_and_is_never_exceeded() {
    let _serial = SERIAL.lock().await;
    let params = ensure_params(10);
    ensure_params(12);
    // Room for the parameters and one and a half partitions: the second
    // synthesis worker must wait for the first partition's memory.
    let foot = PartitionFootprint::of(&shape_from_params(&params), &EngineConfig::default());
    let budget = params.size_bytes() + foot.total() * 3 / 2;
    // The request memory (256 KiB) is beside the proving budget.
    let budget_s = (budget + (256 << 10)).to_string();
    let d = start(
        Transport::Unix,
        &[("engine.memory_budget_bytes", &budget_s), ("engine.request_memory_bytes", "256KiB"), ("engine.synthesis_workers", "2")],
    )
    .await;
    let c = d.client().await;

    // A job that can never fit is refused at once, with the numbers.
    let too_big = c.clone().submit_proof(synthetic("too-big", 12, 1, Priority::Normal, 1)).await.unwrap_err();
    assert_eq!(too_big.code(), tonic::Code::ResourceExhausted, "{too_big:?}");
    assert!(too_big.message().contains("memory budget"), "{}", too_big.message());

    let mut tasks = Vec::new();
    for i in 0..3u32 {
        let req = synthetic(&format!("tight-{i}"), 10, 2, Priority::Normal, 300 + 10 * i as u64);
        let mut c = c.clone();
        tasks.push(tokio::spawn(async move {
            let r = c.prove(ProveRequest { submit: Some(req.clone()) }).await.unwrap().into_inner().result.unwrap();
            (req, r)
        }));
    }
    let mut saw_waiting = false;
    let mut samples = 0;
    while !tasks.iter().all(|t| t.is_finished()) {
        let st = d.status_json().await;
        let b = &st["engine"]["budget"];
        assert_eq!(b["total"], budget, "{b}");
        assert!(b["reserved"].as_u64().unwrap() <= budget, "over budget: {b}");
        saw_waiting |= b["waiting_reservations"].as_u64().unwrap() > 0
            || st["engine"]["pinned_pool"]["waiting_checkouts"].as_u64().unwrap() > 0;
        samples += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for t in tasks {
        let (req, r) = t.await.unwrap();
        assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
        verify(&req, &r.proof).unwrap();
    }
    let st = d.wait_idle(Duration::from_secs(10)).await;
    assert!(st["engine"]["budget"]["peak_reserved"].as_u64().unwrap() <= budget, "{st:#}");
    assert!(saw_waiting, "no partition ever waited for memory in {samples} samples");
    d.stop().await;
}
