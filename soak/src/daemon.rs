//! The daemon under test: a `kiln serve` the soak starts (and stops), or
//! one it connects to; how to reach its gRPC and HTTP listeners; its RSS.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hyper_util::rt::TokioIo;
use kiln_proto::ProvingEngineClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::{Channel, Endpoint, Uri};

/// Where the daemon listens.
#[derive(Clone, Debug)]
pub struct Target {
    /// `unix:PATH` or `tcp:HOST:PORT`, as `kiln serve --listen` takes it.
    pub grpc: String,
    /// The `/status` + `/metrics` listener.
    pub status: SocketAddr,
}

/// A `kiln serve` child process; killed if dropped without [`stop`](Self::stop).
pub struct Spawned {
    child: Option<Child>,
    pub target: Target,
    /// Holds the socket's directory for as long as the daemon runs (when it made it).
    _dir: Option<tempfile::TempDir>,
}

impl Spawned {
    /// Starts `kiln serve` on a private unix socket and a free loopback
    /// status port, with `settings` as `--set` overrides and its log in
    /// `log`; returns once `/status` answers.
    pub async fn start(kiln: &Path, params_dir: &Path, settings: &[(String, String)], log: &Path) -> Result<Self> {
        // A short path: unix socket paths are limited to 107 bytes, and a
        // report directory under $OUT may be long.
        let dir = tempfile::Builder::new().prefix("kiln-soak-").tempdir().context("temp dir for the socket")?;
        let socket = dir.path().join("kiln.sock");
        let mut me = Self::launch(kiln, &socket, params_dir, settings, log)?;
        me._dir = Some(dir);
        me.wait_ready(log, Duration::from_secs(120)).await?;
        Ok(me)
    }

    /// Starts `kiln serve` on `socket` and a free loopback status port,
    /// without waiting for it (see [`wait_ready`](Self::wait_ready)).
    pub fn launch(kiln: &Path, socket: &Path, params_dir: &Path, settings: &[(String, String)], log: &Path) -> Result<Self> {
        let status = free_loopback_port()?;
        let target = Target { grpc: format!("unix:{}", socket.display()), status };
        let mut cmd = Command::new(kiln);
        cmd.arg("serve")
            .args(["--listen", &target.grpc, "--status-listen", &status.to_string()])
            .arg("--synthetic-params-dir")
            .arg(params_dir);
        for (k, v) in settings {
            cmd.args(["--set", &format!("{k}={v}")]);
        }
        let err = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null()).stdout(err.try_clone()?).stderr(err);
        if std::env::var_os("KILN_LOG").is_none() {
            cmd.env("KILN_LOG", "info");
        }
        let child = cmd.spawn().with_context(|| format!("starting {}", kiln.display()))?;
        Ok(Self { child: Some(child), target, _dir: None })
    }

    /// Waits until `/status` answers; an error (with the end of `log`)
    /// when the daemon exits first or `within` passes.
    pub async fn wait_ready(&mut self, log: &Path, within: Duration) -> Result<()> {
        let t0 = Instant::now();
        loop {
            if let Some(code) = self.child.as_mut().expect("running").try_wait()? {
                bail!("kiln serve exited ({code}) before it answered /status; its log:\n{}", tail(log, 40));
            }
            if http_get(self.target.status, "/status").await.is_ok() {
                return Ok(());
            }
            if t0.elapsed() > within {
                bail!("kiln serve did not answer /status within {within:?}; its log:\n{}", tail(log, 40));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `signal` (SIGTERM, SIGKILL, ...) and returns at once.
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) with a pid this process spawned and has not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        }
    }

    /// Waits up to `within` for the process to exit; its status, or `None`
    /// if it is still running.
    pub async fn wait_exit(&mut self, within: Duration) -> Result<Option<std::process::ExitStatus>> {
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.child.as_mut().expect("not reaped").try_wait()? {
                return Ok(Some(status));
            }
            if t0.elapsed() > within {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM (the daemon's orderly stop), then waits up to `within`;
    /// kills it after that. Returns how it exited.
    pub async fn stop(mut self, within: Duration) -> Result<String> {
        let mut child = self.child.take().expect("stopped once");
        // SAFETY: kill(2) with a pid this process spawned and has not reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status.to_string());
            }
            if t0.elapsed() > within {
                child.kill()?;
                bail!("kiln serve did not stop within {within:?} of SIGTERM; killed");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A loopback port nothing listens on now (bound, then released).
fn free_loopback_port() -> Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// The last `n` lines of a file (for error messages).
pub fn tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<_> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// RSS now and the high-water mark of a local process (`/proc/PID/status`).
pub fn proc_rss(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |name: &str| -> Option<u64> { s.lines().find_map(|l| l.strip_prefix(name))?.split_whitespace().next()?.parse().ok() };
    Some((kib("VmRSS:")? * 1024, kib("VmHWM:")? * 1024))
}

/// A gRPC client for `unix:PATH` (also `unix://PATH`) or `tcp:HOST:PORT`.
pub async fn connect(grpc: &str) -> Result<ProvingEngineClient<Channel>> {
    let channel = if let Some(path) = grpc.strip_prefix("unix:") {
        let path = PathBuf::from(path.trim_start_matches("//"));
        // The URI is required by the API but unused: the connector dials the socket.
        Endpoint::from_static("http://kiln.invalid")
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let path = path.clone();
                async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
            }))
            .await
            .with_context(|| format!("connecting to {grpc}"))?
    } else if let Some(addr) = grpc.strip_prefix("tcp:") {
        Endpoint::from_shared(format!("http://{addr}"))?.connect().await.with_context(|| format!("connecting to {grpc}"))?
    } else {
        bail!("{grpc:?}: expected unix:PATH or tcp:HOST:PORT");
    };
    // Answers are proofs (192 bytes each), but a job may have many partitions.
    Ok(ProvingEngineClient::new(channel).max_decoding_message_size(64 << 20))
}

/// `GET path` (HTTP/1.1, one request per connection): the body of a 200 answer.
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes()).await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        anyhow::Ok(raw)
    };
    let raw = tokio::time::timeout(Duration::from_secs(5), exchange).await.context("HTTP GET timed out")??;
    let text = String::from_utf8(raw).context("HTTP answer is not UTF-8")?;
    let (head, body) = text.split_once("\r\n\r\n").context("HTTP answer without headers")?;
    let code = head.split_whitespace().nth(1).context("HTTP status line")?;
    if code != "200" {
        bail!("GET {path}: HTTP {code}");
    }
    Ok(body.to_string())
}
