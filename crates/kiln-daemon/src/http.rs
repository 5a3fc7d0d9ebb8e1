//! The status listener: `GET /status` (JSON) and `GET /metrics` (Prometheus
//! text exposition 0.0.4). Read-only; bound to loopback by default.

use std::future::Future;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use kiln_pipeline::Engine;
use serde::Serialize;

/// What `/status` serves: the daemon's identity and the engine's status.
#[derive(Serialize)]
struct StatusDoc {
    version: &'static str,
    /// The gRPC listener, e.g. `unix:/run/kiln/kiln.sock`.
    listen: String,
    engine: kiln_pipeline::EngineStatus,
}

#[derive(Clone)]
struct AppState {
    engine: Engine,
    listen: String,
}

/// The router (exposed so tests can drive it without a socket).
pub fn router(engine: Engine, listen: String) -> Router {
    Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .with_state(AppState { engine, listen })
}

async fn status(State(s): State<AppState>) -> Json<StatusDoc> {
    Json(StatusDoc { version: env!("CARGO_PKG_VERSION"), listen: s.listen.clone(), engine: s.engine.status() })
}

async fn metrics(State(s): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.engine.metrics_text()).into_response()
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
