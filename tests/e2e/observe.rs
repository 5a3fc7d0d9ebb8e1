//! What an operator sees: /status, /metrics, GetStatus, GetMetrics, and the
//! SRS cache through PreloadSRS / EvictSRS.

use std::time::Duration;

use crate::harness::{start, synthetic, verify, Transport};
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::srs_status::Tier;
use kiln_proto::v1::{EvictSrsRequest, GetMetricsRequest, GetStatusRequest, PreloadSrsRequest, Priority, ProveRequest};
use tonic::Code;

use crate::SERIAL;

const STAGES: [&str; 6] = ["synthesizing", "synthesized_waiting", "in_gpu_queue", "on_gpu", "finalizing", "freeing"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_metrics_over_http_and_grpc() {
    let _serial = SERIAL.lock().await;
    let d = start(Transport::Unix, &[("engine.memory_budget_bytes", "192MiB")]).await;
    let mut c = d.client().await;
    let req = synthetic("observed", 9, 2, Priority::High, 3);
    let r = c.prove(ProveRequest { submit: Some(req.clone()) }).await.unwrap().into_inner().result.unwrap();
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    verify(&req, &r.proof).unwrap();
    d.wait_idle(Duration::from_secs(10)).await;

    let (code, ctype, text) = d.http_get("/metrics").await;
    assert_eq!(code, 200);
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    for line in [
        // 192 MiB configured: 3 MiB of it (1/64) kept for requests, the rest for proving.
        "kiln_memory_budget_bytes 198180864".to_string(),
        "kiln_request_memory_bytes 3145728".to_string(),
        "kiln_jobs_total{outcome=\"completed\"} 1".to_string(),
        "kiln_partitions_proved_total 2".to_string(),
        "kiln_jobs_in_flight 0".to_string(),
    ]
    .into_iter()
    .chain(STAGES.iter().flat_map(|s| [format!("kiln_buffers{{stage=\"{s}\"}} 0"), format!("kiln_buffer_bytes{{stage=\"{s}\"}} 0")]))
    {
        assert!(text.lines().any(|l| l == line), "/metrics lacks {line:?}:\n{text}");
    }
    let grpc_text = c.get_metrics(GetMetricsRequest {}).await.unwrap().into_inner().prometheus_text;
    let families = |t: &str| t.lines().filter(|l| l.starts_with("# TYPE")).map(String::from).collect::<Vec<_>>();
    assert_eq!(families(&grpc_text), families(&text), "GetMetrics and /metrics expose the same families");

    let st = d.status_json().await;
    assert_eq!(st["version"], kiln_daemon::version(), "the version and what the kernels are built for, as `kiln --version`");
    assert!(st["version"].as_str().unwrap().starts_with(env!("CARGO_PKG_VERSION")), "{st:#}");
    let backend = st["backend"].as_str().unwrap();
    assert!(backend.starts_with(&crate::harness::backend()), "/status names the backend chosen at start and why: {backend:?}");
    assert!(st["listen"].as_str().unwrap().starts_with("unix:"), "{st:#}");
    assert_eq!(st["process"]["pid"], std::process::id(), "the daemon runs in this test's process");
    assert!(st["process"]["rss_bytes"].as_u64().unwrap() > 0, "{st:#}");
    let e = &st["engine"];
    assert_eq!(e["budget"]["total"], (192u64 - 3) << 20);
    assert_eq!(e["requests"]["memory"]["total"], 3u64 << 20);
    assert_eq!(e["jobs"]["completed"], 1);
    let names: Vec<_> = e["buffers"]["stages"].as_array().unwrap().iter().map(|s| s["stage"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, STAGES);

    let (code, _, _) = d.http_get("/nope").await;
    assert_eq!(code, 404);

    let gs = c.get_status(GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(gs.host_memory_limit_bytes, 192 << 20);
    assert_eq!(gs.pinned_memory_bytes, 0, "no CUDA driver, no page-locked memory reported");
    let srs = gs.loaded_srs.iter().find(|s| s.circuit_id == "synthetic-filecoin-like-2^9-4in").expect("the job's SRS is listed");
    assert_eq!((srs.tier(), srs.ref_count), (Tier::Hot, 0), "{srs:?}");
    assert!(srs.size_bytes > 0);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preload_and_evict_srs_by_circuit_id() {
    let _serial = SERIAL.lock().await;
    let d = start(Transport::Tcp, &[]).await;
    let mut c = d.client().await;
    let id = "synthetic-filecoin-like-2^8";
    let first = c.preload_srs(PreloadSrsRequest { circuit_id: id.into() }).await.unwrap().into_inner();
    assert!(!first.already_loaded);
    let again = c.preload_srs(PreloadSrsRequest { circuit_id: id.into() }).await.unwrap().into_inner();
    assert!(again.already_loaded);
    let hot = |st: &kiln_proto::v1::GetStatusResponse| {
        st.loaded_srs.iter().find(|s| s.circuit_id == "synthetic-filecoin-like-2^8-4in").map(|s| (s.tier(), s.size_bytes))
    };
    let st = c.get_status(GetStatusRequest {}).await.unwrap().into_inner();
    let (tier, size) = hot(&st).expect("listed after preload");
    assert_eq!(tier, Tier::Hot);
    assert!(st.host_memory_used_bytes >= size, "a hot SRS is paid for from the budget");

    let ev = c.evict_srs(EvictSrsRequest { circuit_id: id.into() }).await.unwrap().into_inner();
    assert!(ev.was_loaded);
    assert_eq!(ev.freed_bytes, size);
    let st = c.get_status(GetStatusRequest {}).await.unwrap().into_inner();
    assert_ne!(hot(&st).map(|h| h.0), Some(Tier::Hot));
    let ev = c.evict_srs(EvictSrsRequest { circuit_id: id.into() }).await.unwrap().into_inner();
    assert!(!ev.was_loaded);

    // A Filecoin id this build knows, whose production parameters are not
    // on this machine: refused with the way to get them (never generated).
    let e = c.preload_srs(PreloadSrsRequest { circuit_id: "porep-32GiB".into() }).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("production parameters are never generated"), "{e:?}");

    for bad in ["porep-3GiB", "synthetic-dense-2^99", ""] {
        let e = c.preload_srs(PreloadSrsRequest { circuit_id: bad.into() }).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{bad}: {e:?}");
        assert!(e.message().contains(bad), "{e:?}");
        let e = c.evict_srs(EvictSrsRequest { circuit_id: bad.into() }).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{bad}: {e:?}");
    }
    d.stop().await;
}
