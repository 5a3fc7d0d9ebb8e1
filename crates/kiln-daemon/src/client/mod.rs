//! `kiln prove | status | preload | evict | metrics`: a client of a running
//! daemon over the same cuzk.v1 gRPC API Curio uses (what cuzk-bench's
//! `single`, `status`, `preload` and `metrics` do for cuzk).
//!
//! The daemon is found at `--addr`, else `$KILN_ADDR`, else the first
//! default socket path that exists (where `kiln serve` on defaults puts it).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use hyper_util::rt::TokioIo;
use kiln_proto::v1::{srs_status, EvictSrsRequest, GetMetricsRequest, GetStatusRequest, GetStatusResponse, PreloadSrsRequest};
use kiln_proto::ProvingEngineClient;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::config::{default_socket_candidates, Listen};

mod prove;

pub use prove::{ProveArgs, ProveKind};

/// Largest message the client sends or accepts (a 32 GiB PoRep C1 output
/// is tens of MiB; the daemon's default limit is 512 MiB).
const MAX_MESSAGE_BYTES: usize = 512 << 20;

/// Where the daemon is.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Target {
    /// Daemon address: unix:PATH, unix:///PATH, tcp:HOST:PORT, HOST:PORT or http://HOST:PORT
    /// [env: KILN_ADDR; default: the socket `kiln serve` uses on defaults].
    #[arg(long, value_name = "ADDR")]
    pub addr: Option<String>,
}

/// A client subcommand.
#[derive(clap::Subcommand, Debug)]
pub enum ClientCmd {
    /// Prove one request through the daemon and wait for it, showing progress.
    Prove(ProveArgs),
    /// Show the daemon's GPUs, queues, loaded parameters and memory.
    Status(Target),
    /// Load a circuit's parameters ahead of work (e.g. porep-32g, wpost-32g, winning-32g, snap-32g).
    Preload(SrsArgs),
    /// Drop a circuit's loaded parameters.
    Evict(SrsArgs),
    /// Print the daemon's Prometheus metrics (what GET /metrics serves).
    Metrics(Target),
}

/// `kiln preload` / `kiln evict`.
#[derive(clap::Args, Debug)]
pub struct SrsArgs {
    #[command(flatten)]
    pub target: Target,
    /// Circuit id: cuzk's (porep-32g, snap-32g, wpost-32g, winning-32g), kiln's
    /// (porep-32GiB, window-post-2KiB, synthetic-filecoin-like-2^12) or a filecoin-proofs cache id.
    pub circuit_id: String,
}

/// Runs `cmd`, writing its report to `out` (progress goes to stderr).
pub async fn run(cmd: ClientCmd, out: &mut (dyn Write + Send)) -> Result<()> {
    match cmd {
        ClientCmd::Prove(args) => prove::run(args, out).await,
        ClientCmd::Status(target) => {
            let status = connect_target(&target).await?.get_status(GetStatusRequest {}).await.context("GetStatus")?.into_inner();
            write!(out, "{}", render_status(&status))?;
            Ok(())
        }
        ClientCmd::Metrics(target) => {
            let text = connect_target(&target).await?.get_metrics(GetMetricsRequest {}).await.context("GetMetrics")?.into_inner();
            write!(out, "{}", text.prometheus_text)?;
            Ok(())
        }
        ClientCmd::Preload(a) => {
            let started = std::time::Instant::now();
            let r = connect_target(&a.target)
                .await?
                .preload_srs(PreloadSrsRequest { circuit_id: a.circuit_id.clone() })
                .await
                .with_context(|| format!("PreloadSRS {:?}", a.circuit_id))?
                .into_inner();
            if r.already_loaded {
                writeln!(out, "{}: already loaded", a.circuit_id)?;
            } else {
                writeln!(out, "{}: loaded in {} ms (call took {:.1} s)", a.circuit_id, r.load_time_ms, started.elapsed().as_secs_f64())?;
            }
            Ok(())
        }
        ClientCmd::Evict(a) => {
            let r = connect_target(&a.target)
                .await?
                .evict_srs(EvictSrsRequest { circuit_id: a.circuit_id.clone() })
                .await
                .with_context(|| format!("EvictSRS {:?}", a.circuit_id))?
                .into_inner();
            if r.was_loaded {
                writeln!(out, "{}: evicted, {} freed", a.circuit_id, bytes(r.freed_bytes))?;
            } else {
                writeln!(out, "{}: was not loaded", a.circuit_id)?;
            }
            Ok(())
        }
    }
}

/// Connects to the daemon `target` names (see the module doc).
pub async fn connect_target(target: &Target) -> Result<ProvingEngineClient<Channel>> {
    let addr = match target.addr.clone().or_else(|| std::env::var("KILN_ADDR").ok().filter(|a| !a.is_empty())) {
        Some(a) => a,
        None => {
            let candidates = default_socket_candidates();
            match candidates.iter().find(|p| p.exists()) {
                Some(p) => format!("unix:{}", p.display()),
                None => bail!(
                    "no daemon socket at the default places ({}); is `kiln serve` running? Pass --addr (or set KILN_ADDR)",
                    candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                ),
            }
        }
    };
    connect(&addr).await
}

/// Connects to `addr` (`unix:PATH`, `tcp:HOST:PORT`, `HOST:PORT`, `http://HOST:PORT`).
pub async fn connect(addr: &str) -> Result<ProvingEngineClient<Channel>> {
    let channel = channel(addr).await?;
    Ok(ProvingEngineClient::new(channel).max_decoding_message_size(MAX_MESSAGE_BYTES).max_encoding_message_size(MAX_MESSAGE_BYTES))
}

/// A gRPC channel to `addr` (the forms [`connect`] takes).
pub async fn channel(addr: &str) -> Result<Channel> {
    let listen = match addr.strip_prefix("http://") {
        Some(host_port) => Listen::Tcp(host_port.trim_end_matches('/').to_string()),
        None => Listen::parse(addr).with_context(|| format!("daemon address {addr:?}"))?,
    };
    match &listen {
        Listen::Tcp(host_port) => Endpoint::from_shared(format!("http://{host_port}"))?.connect().await,
        Listen::Unix(path) => unix_channel(path.clone()).await,
    }
    .with_context(|| format!("connecting to the daemon at {addr}"))
}

/// A channel over a UNIX socket (the URI is required by tonic but unused:
/// the connector dials the socket).
async fn unix_channel(path: PathBuf) -> Result<Channel, tonic::transport::Error> {
    Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
        }))
        .await
}

/// `GetStatus` as an operator reads it.
pub fn render_status(s: &GetStatusResponse) -> String {
    let mut t = String::new();
    let mut line = |l: String| {
        t.push_str(&l);
        t.push('\n');
    };
    line(format!(
        "uptime {} s · proofs completed {} · failed {} · cancelled {}",
        s.uptime_seconds, s.total_proofs_completed, s.total_proofs_failed, s.total_proofs_cancelled
    ));
    line(format!("backends: {}", if s.backends.is_empty() { "-".to_string() } else { s.backends.join(", ") }));
    line(format!("host memory: {} of {} reserved", bytes(s.host_memory_used_bytes), bytes(s.host_memory_limit_bytes)));
    if s.pinned_memory_limit_bytes > 0 {
        line(format!("pinned memory: {} of {}", bytes(s.pinned_memory_bytes), bytes(s.pinned_memory_limit_bytes)));
    }
    for g in &s.gpus {
        let job = if g.current_job_id.is_empty() { "idle".to_string() } else { format!("proving {} ({})", g.current_job_id, g.current_proof_kind) };
        line(format!("gpu {} {}: {} of {} VRAM free, {job}", g.ordinal, g.name, bytes(g.vram_free_bytes), bytes(g.vram_total_bytes)));
    }
    if s.queues.is_empty() {
        line("queues: empty".into());
    }
    for q in &s.queues {
        line(format!("queue {}: {} pending, {} in progress", q.proof_kind, q.pending, q.in_progress));
    }
    for p in &s.loaded_srs {
        let tier = srs_status::Tier::try_from(p.tier).map(|t| t.as_str_name()).unwrap_or("?");
        line(format!("parameters {}: {tier}, {}, {} in use", p.circuit_id, bytes(p.size_bytes), p.ref_count));
    }
    let busy: Vec<String> = s.buffer_stages.iter().filter(|b| b.count > 0).map(|b| format!("{} {} ({})", b.stage, b.count, bytes(b.bytes))).collect();
    line(format!("buffers: {}", if busy.is_empty() { "none held".to_string() } else { busy.join(", ") }));
    t
}

/// `1.5 GiB`, `512 MiB`, `12 KiB`, `100 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_well() {
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(47 << 30), "47.0 GiB");
    }

    #[tokio::test]
    async fn addresses_that_are_not_addresses_are_refused() {
        for bad in ["ftp://x", "/no/scheme.sock", "tcp:nohost"] {
            let e = connect(bad).await.unwrap_err();
            assert!(format!("{e:#}").contains("daemon address"), "{bad}: {e:#}");
        }
        let e = connect("unix:/nonexistent/kiln-test.sock").await.unwrap_err();
        assert!(format!("{e:#}").contains("connecting to the daemon at unix:/nonexistent/kiln-test.sock"), "{e:#}");
    }
}
