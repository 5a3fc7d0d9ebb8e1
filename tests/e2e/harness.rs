//! The harness of the end-to-end tests. It starts the real daemon
//! (`kiln_daemon::serve::start`, configured through the same layers as
//! `kiln serve`) in-process on a UNIX socket in a temp dir or on loopback
//! TCP, connects real tonic clients, reads `/status` and `/metrics` over
//! real HTTP, and verifies returned proofs independently of the daemon
//! (bellperson's `verify_proof` against the parameter file's verifying key).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof};
use kiln_daemon::config::{self, Sources};
use kiln_daemon::serve::{self, Bound, Running};
use kiln_groth16::ParamsFile;
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_proto::v1::{Priority, ProofKind, SubmitProofRequest};
use kiln_proto::ProvingEngineClient;
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

/// The synthetic workload the tests prove.
pub const KIND: WorkloadKind = WorkloadKind::FilecoinLike;
/// Public inputs per partition (the daemon's default for `synthetic_inputs = 0`).
pub const INPUTS: usize = 4;

/// One parameter cache for every test of every run: small circuits'
/// parameters are generated once, then reused.
pub fn params_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kiln-e2e-params")
}

/// The parameters of 2^`log` synthetic circuits, generated if missing.
pub fn ensure_params(log: u32) -> ParamsFile {
    let spec = SyntheticJob::srs_spec(KIND, log, INPUTS, &params_dir());
    if !spec.path.exists() {
        std::fs::create_dir_all(params_dir()).unwrap();
        (spec.generate.as_ref().expect("synthetic parameters can be generated"))(&spec.path).unwrap();
    }
    ParamsFile::open(&spec.path).unwrap()
}

/// The prover backend the test daemons use: `cpu` unless
/// `KILN_E2E_BACKEND` says otherwise (`gpu` on a GPU host runs the same
/// suite through the GPU backend).
pub fn backend() -> String {
    std::env::var("KILN_E2E_BACKEND").unwrap_or_else(|_| "cpu".into())
}

/// Which transport a test daemon listens on.
#[derive(Clone, Copy, Debug)]
pub enum Transport {
    Unix,
    Tcp,
}

/// A daemon running in this process, with its temp dir.
pub struct Daemon {
    pub running: Option<Running>,
    /// Holds the socket; removed (after the daemon) when the test ends.
    _dir: tempfile::TempDir,
}

/// Starts a daemon. `settings` are `--set`-style `key=value` overrides on
/// top of the test defaults (small budget, pageable buffers, ephemeral
/// status port, the shared parameter cache).
pub async fn start(transport: Transport, settings: &[(&str, &str)]) -> Daemon {
    let dir = tempfile::tempdir().unwrap();
    let listen = match transport {
        Transport::Unix => format!("unix:{}", dir.path().join("kiln.sock").display()),
        Transport::Tcp => "tcp:127.0.0.1:0".to_string(),
    };
    let running = serve::start(test_config(&listen, settings)).await.expect("daemon starts");
    Daemon { running: Some(running), _dir: dir }
}

/// The test daemons' configuration listening on `listen`, with
/// `settings` over the test defaults (see [`start`]).
pub fn test_config(listen: &str, settings: &[(&str, &str)]) -> config::DaemonConfig {
    // filecoin-proofs reads its parameter cache location once per process:
    // point it at the run's shared cache before any daemon can ask.
    crate::filecoin::fil_params_dir();
    let listen = listen.to_string();
    let mut flags: Vec<(String, String)> = vec![
        ("listen".into(), listen),
        ("status_listen".into(), "127.0.0.1:0".into()),
        ("synthetic_params_dir".into(), params_dir().display().to_string()),
        ("shutdown_grace_secs".into(), "0".into()),
        ("backend".into(), backend()),
        ("engine.memory_budget_bytes".into(), "256MiB".into()),
        ("engine.pin_host_buffers".into(), "false".into()),
        ("engine.synthesis_workers".into(), "2".into()),
        ("engine.finalizer_threads".into(), "1".into()),
        ("engine.counter_log_interval_ms".into(), "200".into()),
    ];
    flags.extend(settings.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    // Only the layers under test: no file, no process environment but the
    // Filecoin parameter cache this process already uses.
    let env = vec![("FIL_PROOFS_PARAMETER_CACHE".to_string(), crate::filecoin::fil_params_dir().display().to_string())];
    config::resolve(&Sources { file: None, env, flags }).expect("valid test configuration")
}

impl Daemon {
    fn running(&self) -> &Running {
        self.running.as_ref().expect("daemon is running")
    }

    /// Where the gRPC listener is.
    pub fn grpc(&self) -> &Bound {
        &self.running().grpc
    }

    /// A new gRPC client (a new connection).
    pub async fn client(&self) -> ProvingEngineClient<Channel> {
        connect(self.grpc()).await.expect("connects")
    }

    /// `GET path` on the status listener: (HTTP status, content type, body).
    pub async fn http_get(&self, path: &str) -> (u16, String, String) {
        http_get(self.running().status.expect("status listener on"), path).await.expect("HTTP GET")
    }

    /// `/status` as JSON.
    pub async fn status_json(&self) -> serde_json::Value {
        let (code, _, body) = self.http_get("/status").await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("/status is JSON")
    }

    /// Waits until no job is in flight and every buffer counter is zero
    /// (read over HTTP), or fails after `within`.
    pub async fn wait_idle(&self, within: Duration) -> serde_json::Value {
        let deadline = Instant::now() + within;
        loop {
            let st = self.status_json().await;
            if is_idle(&st) {
                return st;
            }
            if Instant::now() > deadline {
                panic!("not idle after {within:?}: {st:#}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Graceful shutdown, as on SIGTERM.
    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await.expect("clean shutdown");
        }
    }
}

/// No job in flight, no partition queued, every buffer counter at zero.
pub fn is_idle(st: &serde_json::Value) -> bool {
    let e = &st["engine"];
    e["jobs"]["in_flight"] == 0
        && e["queues"].as_array().is_some_and(|q| q.is_empty())
        && e["buffers"]["stages"].as_array().is_some_and(|s| s.iter().all(|s| s["count"] == 0 && s["bytes"] == 0))
        && e["pinned_pool"]["pinned_in_use_bytes"] == 0
        && e["budget"]["waiting_reservations"] == 0
}

/// Connects a tonic client over a UNIX socket or TCP (`kiln`'s own client connection).
pub async fn connect(bound: &Bound) -> Result<ProvingEngineClient<Channel>> {
    kiln_daemon::client::connect(&bound.to_string()).await
}

/// A minimal HTTP/1.1 GET (one request per connection).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> Result<(u16, String, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let text = String::from_utf8(raw).context("HTTP answer is UTF-8")?;
    let (head, body) = text.split_once("\r\n\r\n").context("HTTP answer has headers")?;
    let code: u16 = head.split_whitespace().nth(1).context("status line")?.parse()?;
    let ctype = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_default();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        bail!("chunked answers are not expected from /status or /metrics");
    }
    Ok((code, ctype, body.to_string()))
}

/// A KILN_SYNTHETIC request: `partitions` proofs of 2^`log` constraints.
pub fn synthetic(request_id: &str, log: u32, partitions: u32, priority: Priority, seed: u64) -> SubmitProofRequest {
    SubmitProofRequest {
        request_id: request_id.to_string(),
        proof_kind: ProofKind::KilnSynthetic as i32,
        priority: priority as i32,
        synthetic_log_size: log,
        synthetic_partitions: partitions,
        synthetic_seed: seed,
        ..Default::default()
    }
}

/// Checks `proof` holds one valid 192-byte Groth16 proof per partition of
/// `req`, each against its own public inputs, with bellperson's verifier
/// and the verifying key from the parameter file.
pub fn verify(req: &SubmitProofRequest, proof: &[u8]) -> Result<()> {
    let partitions = req.synthetic_partitions.max(1) as usize;
    if proof.len() != partitions * 192 {
        bail!("expected {partitions} proofs of 192 bytes, got {} bytes", proof.len());
    }
    let params = ensure_params(req.synthetic_log_size);
    let pvk = prepare_verifying_key(params.vk());
    let shape = SyntheticCircuit::filling_domain(KIND, req.synthetic_log_size, INPUTS);
    for (i, bytes) in proof.chunks(192).enumerate() {
        let p = Proof::<blstrs::Bls12>::read(bytes).with_context(|| format!("partition {i}: not a proof encoding"))?;
        let inputs = shape.with_witness(req.synthetic_seed.wrapping_add(i as u64)).public_inputs();
        if !verify_proof(&pvk, &p, &inputs).with_context(|| format!("partition {i}: verifier error"))? {
            bail!("partition {i}: the proof does not verify");
        }
    }
    Ok(())
}

/// The socket file's permission bits.
pub fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}
