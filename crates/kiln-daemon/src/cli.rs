//! The `kiln` command line: its subcommands, and `kiln serve`'s flags. Each
//! serve flag is one more configuration layer on top of the file and the
//! environment (see [`crate::config`]).

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::client::ClientCmd;
use crate::config::{self, DaemonConfig, LogFormat, Sources};

/// `kiln`.
#[derive(clap::Parser, Debug)]
#[command(name = "kiln", version = crate::version(), about = "GPU proving engine for Groth16 over BLS12-381")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum Cmd {
    /// Prove a built-in workload end to end and print per-proof timings.
    Demo(crate::demo::DemoArgs),
    /// Serve the cuzk.v1 gRPC interface (unix socket or TCP) and /status, /metrics over HTTP.
    Serve(ServeArgs),
    #[command(flatten)]
    Client(ClientCmd),
}

/// Runs `kiln` as parsed.
pub fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Demo(args) => {
            // The demo prints its own report; the log is for warnings.
            crate::logging::init(LogFormat::Text, "warn")?;
            crate::demo::run(args)
        }
        Cmd::Serve(args) => {
            let config = args.resolve()?;
            if args.print_config {
                print!("{}", config.to_toml());
                return Ok(());
            }
            crate::logging::init(config.log_format, &config.log_level)?;
            for warning in &config.warnings {
                tracing::warn!("{warning}");
            }
            // Before any thread exists: filecoin-proofs reads it once, from the environment.
            config.export_filecoin_params_dir();
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("kiln-rt")
                .build()?
                .block_on(crate::serve::run(config))
        }
        Cmd::Client(cmd) => {
            crate::logging::init(LogFormat::Text, "warn")?;
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(crate::client::run(cmd, &mut std::io::stdout()))
        }
    }
}

/// Serve the cuzk.v1 gRPC interface (and /status, /metrics over HTTP).
#[derive(clap::Args, Debug, Default)]
pub struct ServeArgs {
    /// TOML configuration file [env: KILN_CONFIG].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// gRPC listener: unix:PATH, tcp:HOST:PORT or HOST:PORT [default: unix:$XDG_RUNTIME_DIR/kiln/kiln.sock or /run/kiln/kiln.sock].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// HTTP /status + /metrics listener, HOST:PORT, or "off" [default: 127.0.0.1:9464].
    #[arg(long, value_name = "ADDR")]
    pub status_listen: Option<String>,
    /// Seconds running jobs get to finish on SIGTERM/SIGINT before they are cancelled [default: 30].
    #[arg(long, value_name = "SECS")]
    pub shutdown_grace_secs: Option<u64>,
    /// Cache of the synthetic workload's parameters [default: ~/.cache/kiln/params].
    #[arg(long, value_name = "DIR")]
    pub synthetic_params_dir: Option<PathBuf>,
    /// Deprecated name of --synthetic-params-dir.
    #[arg(long, value_name = "DIR", hide = true)]
    pub params_dir: Option<PathBuf>,
    /// Filecoin parameter files (.params/.vk) [default: /var/tmp/filecoin-proof-parameters;
    /// FIL_PROOFS_PARAMETER_CACHE wins when set].
    #[arg(long, value_name = "DIR")]
    pub filecoin_params_dir: Option<PathBuf>,
    /// Prover backend: auto (GPUs if usable, else CPU), cpu or gpu [default: auto].
    #[arg(long)]
    pub backend: Option<String>,
    /// Synthesis worker threads [default: three quarters of the cores, 1..=32].
    #[arg(long, value_name = "N")]
    pub synthesis_workers: Option<usize>,
    /// Host memory budget, e.g. 64GiB [default: host RAM (or cgroup limit) minus 4 GiB].
    #[arg(long, value_name = "SIZE")]
    pub memory_budget: Option<String>,
    /// Any other knob: KEY=VALUE, e.g. engine.gpu_queue_depth=2 (repeatable; see docs/CONFIG.md).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
}

impl ServeArgs {
    /// The flags as `key=value` overrides, the named flags after `--set`
    /// (a named flag is the more specific of the two).
    pub fn overrides(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for kv in &self.set {
            let Some((k, v)) = kv.split_once('=') else { bail!("--set {kv:?}: expected KEY=VALUE") };
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
        let mut named = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push((k.to_string(), v));
            }
        };
        named("listen", self.listen.clone());
        named("status_listen", self.status_listen.clone());
        named("shutdown_grace_secs", self.shutdown_grace_secs.map(|v| v.to_string()));
        named("params_dir", self.params_dir.as_ref().map(|p| p.display().to_string()));
        named("synthetic_params_dir", self.synthetic_params_dir.as_ref().map(|p| p.display().to_string()));
        named("filecoin_params_dir", self.filecoin_params_dir.as_ref().map(|p| p.display().to_string()));
        named("backend", self.backend.clone());
        named("engine.synthesis_workers", self.synthesis_workers.map(|v| v.to_string()));
        named("engine.memory_budget_bytes", self.memory_budget.clone());
        Ok(out)
    }

    /// Resolves the configuration: flags > KILN_* environment > file > defaults.
    pub fn resolve(&self) -> Result<DaemonConfig> {
        let file = self.config.clone().or_else(|| std::env::var_os("KILN_CONFIG").filter(|v| !v.is_empty()).map(PathBuf::from));
        config::resolve(&Sources::gather(file.as_deref(), self.overrides()?)?)
    }
}
