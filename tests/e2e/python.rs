//! A client of another gRPC stack: Python grpcio (gRPC's C core) calls
//! every cuzk.v1 RPC with default options, over the UNIX socket (where it
//! sends the socket path as `:authority`) and over TCP. The stubs are
//! generated from proto/ at test time with grpcio-tools.
//!
//! Without grpcio and grpcio-tools the test says so and skips, except under
//! CI (`CI` set), where .ci/run installs them and their absence is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kiln_daemon::serve::Bound;

use crate::harness::{start, Transport};
use crate::SERIAL;

/// Whether `python3` can import grpc and grpc_tools.
fn grpcio_available() -> bool {
    Command::new("python3").args(["-c", "import grpc, grpc_tools"]).output().is_ok_and(|o| o.status.success())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the repository").to_path_buf()
}

/// Generates the Python stubs of proto/cuzk/v1/proving.proto into `out`.
fn generate_stubs(out: &Path) {
    let proto = repo().join("proto");
    let o = Command::new("python3")
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(&proto)
        .arg(format!("--python_out={}", out.display()))
        .arg(format!("--grpc_python_out={}", out.display()))
        .arg(proto.join("cuzk/v1/proving.proto"))
        .output()
        .expect("runs python3 -m grpc_tools.protoc");
    assert!(o.status.success(), "grpc_tools.protoc failed: {}", String::from_utf8_lossy(&o.stderr));
}

/// Runs grpc_client.py against `target`; its JSON report.
async fn run_client(stubs: &Path, target: String) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/grpc_client.py");
    let stubs = stubs.to_path_buf();
    let o = tokio::task::spawn_blocking(move || Command::new("python3").arg(script).arg(stubs).arg(&target).output().expect("runs python3"))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "the Python client failed:\n{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not the client's JSON ({e}): {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_calls_every_rpc_over_both_transports() {
    if !grpcio_available() {
        assert!(std::env::var_os("CI").is_none(), "CI must have Python grpcio and grpcio-tools (.ci/run installs them)");
        eprintln!("SKIPPED python_grpcio_calls_every_rpc_over_both_transports: python3 cannot import grpc and grpc_tools (pip install grpcio grpcio-tools)");
        return;
    }
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(8);
    crate::harness::ensure_params(10);
    let stubs = tempfile::tempdir().unwrap();
    generate_stubs(stubs.path());
    for transport in [Transport::Unix, Transport::Tcp] {
        // One synthesis worker, so the job submitted behind a long one waits.
        let d = start(transport, &[("engine.synthesis_workers", "1")]).await;
        let target = match d.grpc() {
            Bound::Unix(path) => format!("unix:{}", path.display()),
            Bound::Tcp(addr) => addr.to_string(),
        };
        let r = run_client(stubs.path(), target.clone()).await;
        let what = format!("{transport:?} ({target}): {r:#}");
        // The ordinary worker and the critical lane's, both on the CPU.
        let backends = r["status_backends"].as_array().unwrap_or_else(|| panic!("{what}"));
        assert!(!backends.is_empty() && backends.iter().all(|b| b == "cpu"), "{what}");
        assert_eq!(r["metrics_has_build_info"], true, "{what}");
        assert_eq!(r["preload_already_loaded"], false, "{what}");
        assert_eq!(r["prove"]["status"], "COMPLETED", "{what}");
        assert_eq!(r["prove"]["proof_bytes"], 192, "{what}");
        assert_eq!((&r["await"]["status"], &r["await"]["proof_bytes"]), (&"COMPLETED".into(), &384.into()), "{what}");
        assert_eq!(r["cancel"]["found"], true, "{what}");
        assert_eq!(r["cancel"]["was_running"], false, "{what}");
        assert_eq!(r["cancel"]["then"], "CANCELLED", "{what}");
        assert_eq!(r["evict"]["was_loaded"], true, "{what}");
        assert!(r["evict"]["freed_bytes"].as_u64().unwrap() > 0, "{what}");
        assert_eq!(r["unknown_preload"], "NOT_FOUND", "{what}");
        d.wait_idle(Duration::from_secs(30)).await;
        d.stop().await;
    }
}
