//! The status listener: `GET /status` (JSON) and `GET /metrics` (Prometheus
//! text exposition 0.0.4). Read-only; bound to loopback by default.

use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use kiln_pipeline::Engine;
use serde::Serialize;

use crate::metrics::Metrics;

/// What `/status` serves: the daemon's identity and the engine's status.
#[derive(Serialize)]
struct StatusDoc {
    /// `kiln --version`: the version and the GPUs its kernels are built for.
    version: &'static str,
    /// The gRPC listener, e.g. `unix:/run/kiln/kiln.sock`.
    listen: String,
    /// The prover backend chosen at start and why, e.g. `gpu: GPU 0 ...`
    /// or `cpu (16 threads): no usable GPU: <the driver's error>`.
    backend: String,
    /// The daemon process itself (RSS includes what the budget does not
    /// count: code, heap, the runtime), so a soak connected to a running
    /// daemon can compare it with the budget.
    process: ProcessDoc,
    engine: kiln_pipeline::EngineStatus,
}

#[derive(Serialize)]
struct ProcessDoc {
    pid: u32,
    /// Resident set now (`VmRSS`), bytes; absent where /proc is not mounted.
    rss_bytes: Option<u64>,
    /// Highest resident set since the process started (`VmHWM`), bytes.
    rss_peak_bytes: Option<u64>,
}

impl ProcessDoc {
    fn now() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        Self {
            pid: std::process::id(),
            rss_bytes: proc_status_kib(&status, "VmRSS:").map(|k| k * 1024),
            rss_peak_bytes: proc_status_kib(&status, "VmHWM:").map(|k| k * 1024),
        }
    }
}

/// A `Name:   1234 kB` line of /proc/PID/status, in KiB.
fn proc_status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|l| l.strip_prefix(name))?.split_whitespace().next()?.parse().ok()
}

#[derive(Clone)]
struct AppState {
    engine: Engine,
    listen: String,
    backend: String,
    metrics: Arc<Metrics>,
}

/// The router (exposed so tests can drive it without a socket); `backend`
/// is the backend choice and its reason, as logged at start.
pub fn router(engine: Engine, listen: String, backend: String, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics_text))
        .route("/", get(index))
        .with_state(AppState { engine, listen, backend, metrics })
}

async fn status(State(s): State<AppState>) -> Json<StatusDoc> {
    Json(StatusDoc {
        version: crate::version(),
        listen: s.listen.clone(),
        backend: s.backend.clone(),
        process: ProcessDoc::now(),
        engine: s.engine.status(),
    })
}

async fn metrics_text(State(s): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], s.metrics.render()).into_response()
}

async fn index() -> Response {
    (StatusCode::OK, "kiln: GET /status (JSON) or /metrics (Prometheus)\n").into_response()
}

/// Serves `router` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_status_lines_are_read_in_kib() {
        let status = "Name:\tkiln\nVmHWM:\t  204800 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(proc_status_kib(status, "VmRSS:"), Some(10240));
        assert_eq!(proc_status_kib(status, "VmHWM:"), Some(204800));
        assert_eq!(proc_status_kib(status, "VmSwap:"), None);
        let me = ProcessDoc::now();
        assert!(me.rss_bytes.unwrap() > 0 && me.rss_peak_bytes.unwrap() >= me.rss_bytes.unwrap());
    }
}
