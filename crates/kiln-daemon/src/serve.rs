//! `kiln serve`: starts the engine and the two listeners, and stops them in
//! order. [`start`] is also what the end-to-end tests run in-process.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kiln_groth16::{BackendChoice, BackendOptions, Backends, GpuPlacement};
use kiln_pipeline::Engine;
use kiln_proto::ProvingEngineServer;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tokio_stream::StreamExt;

use crate::config::{DaemonConfig, Listen, ParamsDirSource, SocketAccess};
use crate::grpc::Service;
use crate::kinds::KindContext;
use crate::metrics::Metrics;
use crate::uds::MendedStream;

/// Where a running daemon can be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The socket file.
    Unix(PathBuf),
    /// The bound address (the real port when 0 was asked for).
    Tcp(SocketAddr),
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Unix(p) => write!(f, "unix:{}", p.display()),
            Bound::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// A started daemon: the engine and the servers' tasks.
pub struct Running {
    /// The gRPC listener.
    pub grpc: Bound,
    /// The `/status` + `/metrics` listener, if enabled.
    pub status: Option<SocketAddr>,
    /// The engine (for in-process callers such as tests).
    pub engine: Engine,
    grace: Duration,
    stop: watch::Sender<bool>,
    grpc_task: JoinHandle<Result<()>>,
    http_task: Option<JoinHandle<Result<()>>>,
    socket: Option<OwnedSocket>,
}

/// Starts the engine and both listeners; returns once they accept connections.
pub async fn start(config: DaemonConfig) -> Result<Running> {
    // First the socket's lock: of two daemons started at the same moment on
    // one socket exactly one gets past this line, before either opens a GPU.
    let mut lock = match &config.listen {
        Listen::Unix(path) => Some(lock_socket(path)?),
        Listen::Tcp(_) => None,
    };
    let choice: BackendChoice = config.backend.parse()?;
    let options = BackendOptions {
        workers_per_gpu: config.gpu_workers_per_device,
        devices: config.gpu_devices.clone(),
        placement: GpuPlacement {
            srs_vram_bytes: config.gpu_srs_vram_bytes,
            stream_chunk_bytes: usize::try_from(config.gpu_stream_chunk_bytes).unwrap_or(usize::MAX),
        },
    };
    // Opening GPUs loads kernels and creates streams: off the async workers.
    let chosen = tokio::task::spawn_blocking(move || Backends::open(choice, &options))
        .await
        .context("choosing backends panicked")??;
    tracing::info!(backend = %chosen.why, "prover backend");
    let backend_why = chosen.why.clone();
    if !kiln_gpu::HAS_KERNELS {
        tracing::warn!("this kiln was built without CUDA kernels: it proves on the CPU only (README: Build)");
    }
    let gpus = chosen.devices();
    let backends = chosen.workers;
    let engine_config = config.engine.clone();
    let engine = tokio::task::spawn_blocking(move || Engine::start(engine_config, backends))
        .await
        .context("starting the engine panicked")?
        .context("starting the engine")?;
    let metrics = Arc::new(Metrics::new(engine.clone()));
    let service = Service::new(
        engine.clone(),
        KindContext { synthetic_params_dir: config.synthetic_params_dir.clone(), max_synthetic_log_size: config.max_synthetic_log_size },
        gpus,
        metrics.clone(),
    );
    let grpc_server = ProvingEngineServer::new(service)
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes);
    let (stop, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    // Bind both listeners before serving on either, so a taken port fails
    // the start without leaving a half-started daemon behind.
    let status_listener = match &config.status_listen {
        Some(addr) => Some(TcpListener::bind(addr).await.with_context(|| format!("binding status listener {addr}"))?),
        None => None,
    };
    // Every request body is counted against the request memory as it
    // arrives; a client opens at most `max_streams_per_connection` calls at
    // once on one connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS).
    let router = tonic::transport::Server::builder()
        .max_concurrent_streams(config.max_streams_per_connection)
        .layer(crate::limits::RequestMemoryLayer::new(engine.clone()))
        .add_service(grpc_server);
    if config.max_message_bytes as u64 * crate::limits::MESSAGE_COPIES > engine.status().requests.memory.total {
        tracing::warn!(
            max_message_bytes = config.max_message_bytes,
            request_memory_bytes = engine.status().requests.memory.total,
            "a message of max_message_bytes needs {}x its size of request memory while it is received: larger messages than the request memory allows are refused (RESOURCE_EXHAUSTED)",
            crate::limits::MESSAGE_COPIES
        );
    }
    let (grpc, socket, grpc_task) = match &config.listen {
        Listen::Unix(path) => {
            let (listener, owned) = bind_unix(path, &config.socket, lock.take().expect("locked above"))?;
            // gRPC C-core and Java clients send the socket path as :authority; see crate::uds.
            let incoming = UnixListenerStream::new(listener).map(|s| s.map(MendedStream::new));
            let task = tokio::spawn({
                let stopped = stopped();
                async move { router.serve_with_incoming_shutdown(incoming, stopped).await.context("gRPC server (unix)") }
            });
            (Bound::Unix(path.clone()), Some(owned), task)
        }
        Listen::Tcp(addr) => {
            let listener = TcpListener::bind(addr).await.with_context(|| format!("binding gRPC listener tcp:{addr}"))?;
            let local = listener.local_addr()?;
            // Proof answers are small and latency matters more than batching.
            let incoming = TcpListenerStream::new(listener).map(|s| s.and_then(|s| s.set_nodelay(true).map(|()| s)));
            let task = tokio::spawn({
                let stopped = stopped();
                async move { router.serve_with_incoming_shutdown(incoming, stopped).await.context("gRPC server (tcp)") }
            });
            (Bound::Tcp(local), None, task)
        }
    };

    let (status, http_task) = match status_listener {
        Some(listener) => {
            let local = listener.local_addr()?;
            let app = crate::http::router(engine.clone(), grpc.to_string(), backend_why.clone(), metrics.clone());
            let stopped = stopped();
            let task = tokio::spawn(async move { crate::http::serve(listener, app, stopped).await.context("status server") });
            (Some(local), Some(task))
        }
        None => (None, None),
    };
    tracing::info!(
        grpc = %grpc,
        status = %status.map(|a| format!("http://{a}")).unwrap_or_else(|| "off".into()),
        filecoin_params_dir = %config.filecoin_params_dir.display(),
        filecoin_params_from = match config.filecoin_params_dir_source {
            ParamsDirSource::Environment => "FIL_PROOFS_PARAMETER_CACHE",
            ParamsDirSource::Setting => "filecoin_params_dir",
        },
        synthetic_params_dir = %config.synthetic_params_dir.display(),
        "kiln serving cuzk.v1"
    );
    Ok(Running {
        grpc,
        status,
        engine,
        grace: Duration::from_secs(config.shutdown_grace_secs),
        stop,
        grpc_task,
        http_task,
        socket,
    })
}

impl Running {
    /// Stops accepting connections, lets running jobs finish for up to the
    /// grace period (then cancels them, which answers their waiters), waits
    /// for the servers to close, and removes the socket file.
    pub async fn shutdown(self) -> Result<()> {
        tracing::info!(grace_secs = self.grace.as_secs(), "kiln shutting down: no new connections; draining jobs");
        let _ = self.stop.send(true);
        self.engine.shutdown(self.grace).await;
        // Every job has ended, so open AwaitProof/Prove calls have answered;
        // the bound only guards against clients that keep a stream open.
        let mut result = Ok(());
        for (name, task) in std::iter::once(("gRPC", self.grpc_task)).chain(self.http_task.map(|t| ("status", t))) {
            match tokio::time::timeout(Duration::from_secs(5), task).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => result = Err(e),
                Ok(Err(join)) => result = Err(anyhow::anyhow!("{name} server task failed: {join}")),
                Err(_) => tracing::warn!("{name} server did not close within 5 s after the engine stopped; leaving it"),
            }
        }
        drop(self.socket);
        tracing::info!("kiln stopped");
        result
    }
}

/// A socket file this process bound; removed on drop if it is still ours.
/// The lock beside it is released after (when the file closes).
struct OwnedSocket {
    path: PathBuf,
    ino: u64,
    _lock: File,
}

impl Drop for OwnedSocket {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds a UNIX socket at `path` with the mode and group of `access`.
///
/// It is bound under a temporary name, given its group and mode and then
/// renamed into place, so there is no moment at which anyone else can
/// connect. A stale socket left by a dead daemon is replaced; a live one
/// (something accepts connections on it) or a non-socket file at `path` is
/// an error. `lock` is [`lock_socket`]'s: while it is held, these checks
/// race with no other kiln.
fn bind_unix(path: &Path, access: &SocketAccess, lock: File) -> Result<(UnixListener, OwnedSocket)> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            bail!("{} exists and is not a socket; refusing to replace it", path.display());
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!("{} is in use by a running daemon", path.display());
        }
        tracing::info!(path = %path.display(), "replacing a stale socket");
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).with_context(|| {
        format!("binding unix socket {} (socket paths must be under 108 bytes)", tmp.display())
    })?;
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", tmp.display()))
        .and_then(|()| match &access.group {
            Some((name, gid)) => std::os::unix::fs::chown(&tmp, None, Some(*gid)).with_context(|| {
                format!("giving the socket to group {name} (gid {gid}): the daemon's user must be a member of it (socket_group)")
            }),
            None => Ok(()),
        })
        .and_then(|()| std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(access.mode)).with_context(|| format!("socket_mode on {}", tmp.display())))
        .and_then(|()| std::fs::rename(&tmp, path).with_context(|| format!("placing the socket at {}", path.display())));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let ino = std::fs::symlink_metadata(path)?.ino();
    Ok((listener, OwnedSocket { path: path.to_owned(), ino, _lock: lock }))
}

/// Takes `<socket>.lock` (an exclusive `flock`, held until the process
/// exits or the socket is dropped) and writes this process's id into it.
/// Another daemon holding it is an error naming its pid. The file is never
/// removed: a lock file removed while held would let a third daemon lock a
/// new file of the same name while the first still serves.
fn lock_socket(socket: &Path) -> Result<File> {
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating the socket directory {}", dir.display()))?;
    }
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    let path = PathBuf::from(name);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("opening the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            // The holder writes its pid just after it locks: give it a moment.
            let mut holder = String::new();
            for _ in 0..20 {
                holder.clear();
                let _ = file.seek(SeekFrom::Start(0)).and_then(|_| file.read_to_string(&mut holder));
                if holder.ends_with('\n') {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let holder = holder.trim();
            let who = if holder.is_empty() { String::new() } else { format!(" (pid {holder})") };
            bail!("{} is in use by a running daemon{who}: it holds {}", socket.display(), path.display());
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e).with_context(|| format!("locking {}", path.display())),
    }
    file.set_len(0).and_then(|()| file.write_all(format!("{}\n", std::process::id()).as_bytes())).with_context(|| format!("writing {}", path.display()))?;
    Ok(file)
}

/// Runs the daemon until SIGTERM or SIGINT, then shuts down gracefully. A
/// second signal during the grace period exits at once. When the engine
/// has no prover left (every device quarantined after a sticky fault, a
/// hang or repeated faults), it shuts down the same way and returns the
/// reason as an error: the process exits non-zero and its service manager
/// (systemd's `Restart=on-failure`) starts it again, with reset devices.
pub async fn run(config: DaemonConfig) -> Result<()> {
    let running = start(config).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let lost = tokio::select! {
        _ = term.recv() => { tracing::info!("SIGTERM"); None }
        _ = tokio::signal::ctrl_c() => { tracing::info!("SIGINT"); None }
        why = no_prover_left(&running.engine) => {
            tracing::error!(reason = %why, "no prover is left: kiln shuts down so that its service manager restarts it");
            Some(why)
        }
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = tokio::signal::ctrl_c() => {},
        }
        eprintln!("kiln: second signal, exiting without waiting for jobs");
        std::process::exit(130);
    });
    running.shutdown().await?;
    match lost {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

/// Resolves, with the reason, once `engine` has no prover left.
async fn no_prover_left(engine: &Engine) -> String {
    loop {
        if let Some(why) = engine.no_prover_left() {
            return why;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_groth16::{CpuBackend, FaultPlan, FaultyBackend, ProverBackend};
    use kiln_pipeline::synthetic::SyntheticJob;
    use kiln_pipeline::{EngineConfig, JobRequest, Priority};
    use kiln_synth::workload::WorkloadKind;

    /// A device lost on its first call: the job fails and the serve loop's
    /// watch resolves with the reason (`run` then exits non-zero).
    #[tokio::test]
    async fn the_serve_loop_sees_when_no_prover_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig { memory_budget_bytes: Some(256 << 20), pin_host_buffers: false, ..Default::default() };
        let lost = Arc::new(FaultyBackend::new(Arc::new(CpuBackend), FaultPlan::default().sticky_after(0))) as Arc<dyn ProverBackend>;
        let engine = Engine::start(config, vec![lost]).unwrap();
        let job = SyntheticJob::new(WorkloadKind::Dense, 8, 1, 1, dir.path());
        engine.submit(JobRequest::new("doomed", Priority::Normal, Arc::new(job))).unwrap();
        let why = tokio::time::timeout(Duration::from_secs(60), no_prover_left(&engine)).await.expect("no prover left within a minute");
        assert!(why.starts_with("no prover is left: every prover device is quarantined (cpu: a sticky fault: "), "{why}");
        assert!(matches!(engine.wait("doomed", None).await, kiln_pipeline::JobOutcome::Failed(m) if m == why));
        engine.shutdown(Duration::ZERO).await;
    }
}
