//! `kiln serve` configuration: defaults < TOML file < `KILN_*` environment <
//! flags. docs/CONFIG.md lists every knob; keep it in step with this file.
//!
//! Every layer is turned into a TOML table and merged key by key before one
//! deserialization, so each knob is parsed (and its errors reported) in one
//! place whatever layer it came from, and a new engine knob needs no code
//! here: it appears in the file (`[engine]`), the environment
//! (`KILN_ENGINE_<KEY>`) and `--set engine.<key>=...` by itself.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use kiln_pipeline::EngineConfig;
use serde::{Deserialize, Serialize};

mod listen;

pub use listen::{default_socket_candidates, default_socket_path, Listen, SocketAccess};

/// The resolved configuration of `kiln serve`.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The gRPC (cuzk.v1) listener.
    pub listen: Listen,
    /// The HTTP `/status` + `/metrics` listener, `HOST:PORT`; `None` = off.
    pub status_listen: Option<String>,
    /// On SIGTERM/SIGINT: how long running jobs may take to finish before
    /// they are cancelled.
    pub shutdown_grace_secs: u64,
    /// Who may open the UNIX socket (mode, group).
    pub socket: SocketAccess,
    /// Where parameters of the built-in synthetic workload are cached
    /// (generated on first use). Formerly `params_dir`.
    pub synthetic_params_dir: PathBuf,
    /// filecoin-proofs' parameter cache, where the Filecoin kinds' `.params`
    /// / `.vk` files live: `FIL_PROOFS_PARAMETER_CACHE` when set (the
    /// environment filecoin-proofs, Lotus and Curio read), else the
    /// `filecoin_params_dir` setting.
    pub filecoin_params_dir: PathBuf,
    /// Where [`filecoin_params_dir`](Self::filecoin_params_dir) came from.
    pub filecoin_params_dir_source: ParamsDirSource,
    /// Log filter (`tracing` syntax) when neither `KILN_LOG` nor `RUST_LOG` is set.
    pub log_level: String,
    /// Log lines as human-readable text or one JSON object per line.
    pub log_format: LogFormat,
    /// Prover backend: `auto`, `cpu` or `gpu`.
    pub backend: String,
    /// GPU workers per device (each with its own copy stream and compute
    /// thread, so one worker's copies overlap another's kernels).
    pub gpu_workers_per_device: usize,
    /// GPU ordinals to use; `None` = every visible GPU.
    pub gpu_devices: Option<Vec<usize>>,
    /// Most VRAM the resident parameters may take on each GPU (`None`:
    /// whatever is free); parameter sections beyond it are streamed from the
    /// host for every proof.
    pub gpu_srs_vram_bytes: Option<u64>,
    /// Chunk size of streamed parameter sections (each GPU worker that
    /// streams pins two chunks of host memory).
    pub gpu_stream_chunk_bytes: u64,
    /// Upper bound on `synthetic_log_size` in requests.
    pub max_synthetic_log_size: u32,
    /// Largest gRPC message accepted or sent (PoRep C1 outputs are tens of MiB).
    pub max_message_bytes: usize,
    /// Most gRPC calls one connection may have open at once.
    pub max_streams_per_connection: u32,
    /// The engine's knobs (kiln-pipeline's `EngineConfig`).
    pub engine: EngineConfig,
    /// Things worth a warning in the log (deprecated names, overridden
    /// settings), said once logging is up.
    pub warnings: Vec<String>,
}

/// Where the Filecoin parameter directory came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamsDirSource {
    /// `FIL_PROOFS_PARAMETER_CACHE` in the environment.
    Environment,
    /// The `filecoin_params_dir` setting (or its default).
    Setting,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    fn parse(s: &str) -> Result<LogFormat> {
        match s.trim() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => bail!("log_format must be \"text\" or \"json\", not {other:?}"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

/// filecoin-proofs' parameter cache variable, which wins over the setting.
pub const FIL_PARAMS_ENV: &str = "FIL_PROOFS_PARAMETER_CACHE";
/// filecoin-proofs' default parameter cache.
pub const DEFAULT_FILECOIN_PARAMS_DIR: &str = "/var/tmp/filecoin-proof-parameters";
/// The old name of `synthetic_params_dir`, still accepted.
const DEPRECATED_PARAMS_DIR: &str = "params_dir";

/// The merged layers, before defaults that need the filesystem.
#[derive(Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct Raw {
    listen: Option<String>,
    status_listen: String,
    shutdown_grace_secs: u64,
    socket_mode: String,
    socket_group: String,
    synthetic_params_dir: Option<PathBuf>,
    filecoin_params_dir: Option<PathBuf>,
    log_level: String,
    log_format: String,
    backend: String,
    gpu_workers_per_device: usize,
    gpu_devices: String,
    gpu_srs_vram_bytes: Option<u64>,
    gpu_stream_chunk_bytes: u64,
    max_synthetic_log_size: u32,
    max_message_bytes: u64,
    max_streams_per_connection: u32,
    engine: EngineConfig,
}

impl Default for Raw {
    fn default() -> Self {
        Raw {
            listen: None,
            status_listen: DEFAULT_STATUS_LISTEN.into(),
            shutdown_grace_secs: 30,
            socket_mode: "0600".into(),
            socket_group: String::new(),
            synthetic_params_dir: None,
            filecoin_params_dir: None,
            log_level: "info".into(),
            log_format: "text".into(),
            backend: "auto".into(),
            gpu_workers_per_device: 2,
            gpu_devices: "all".into(),
            gpu_srs_vram_bytes: None,
            gpu_stream_chunk_bytes: kiln_groth16::DEFAULT_STREAM_CHUNK_BYTES as u64,
            max_synthetic_log_size: 20,
            max_message_bytes: 512 << 20,
            max_streams_per_connection: 256,
            engine: EngineConfig::default(),
        }
    }
}

/// `"all"` or comma-separated GPU ordinals ("0,2"), each at most once.
fn parse_gpu_devices(text: &str) -> Result<Option<Vec<usize>>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    let mut list = Vec::new();
    for part in text.split(',') {
        let ordinal: usize = part
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("gpu_devices must be \"all\" or GPU ordinals like \"0,1\", not {text:?}"))?;
        if list.contains(&ordinal) {
            bail!("gpu_devices lists GPU {ordinal} twice ({text:?}); use gpu_workers_per_device for more workers");
        }
        list.push(ordinal);
    }
    Ok(Some(list))
}

/// The default `/status` + `/metrics` address: loopback only, so the
/// daemon's internals are not exposed unless an operator asks.
pub const DEFAULT_STATUS_LISTEN: &str = "127.0.0.1:9464";

/// Top-level knobs and whether their value is a string (environment values
/// of other knobs are parsed as TOML values: numbers, booleans).
const TOP_LEVEL: &[(&str, bool)] = &[
    ("listen", true),
    ("status_listen", true),
    ("shutdown_grace_secs", false),
    ("socket_mode", true),
    ("socket_group", true),
    ("synthetic_params_dir", true),
    ("filecoin_params_dir", true),
    ("log_level", true),
    ("log_format", true),
    ("backend", true),
    ("gpu_workers_per_device", false),
    ("gpu_devices", true),
    ("gpu_srs_vram_bytes", false),
    ("gpu_stream_chunk_bytes", false),
    ("max_synthetic_log_size", false),
    ("max_message_bytes", false),
    ("max_streams_per_connection", false),
];

/// The layers above the defaults, as the command line collected them.
#[derive(Debug, Default)]
pub struct Sources {
    /// The TOML file's text and its path (for error messages).
    pub file: Option<(PathBuf, String)>,
    /// The process environment (only `KILN_*` variables are read).
    pub env: Vec<(String, String)>,
    /// Flag overrides as `key=value` (`engine.key=value` for engine knobs).
    pub flags: Vec<(String, String)>,
}

impl Sources {
    /// Reads the file named by `config` (if any) and the process environment.
    pub fn gather(config: Option<&Path>, flags: Vec<(String, String)>) -> Result<Sources> {
        let file = match config {
            Some(p) => Some((p.to_owned(), std::fs::read_to_string(p).with_context(|| format!("reading config file {}", p.display()))?)),
            None => None,
        };
        Ok(Sources { file, env: std::env::vars().collect(), flags })
    }
}

/// Merges the layers (flags > env > file > defaults) and validates the result.
pub fn resolve(src: &Sources) -> Result<DaemonConfig> {
    let mut table = toml::Table::new();
    let mut warnings = Vec::new();
    if let Some((path, text)) = &src.file {
        table = toml::from_str(text).with_context(|| format!("parsing config file {}", path.display()))?;
        if let Some(value) = table.remove(DEPRECATED_PARAMS_DIR) {
            if table.contains_key("synthetic_params_dir") {
                bail!("config file {} sets both synthetic_params_dir and its old name params_dir", path.display());
            }
            warnings.push(deprecated_params_dir(&format!("config file {}", path.display())));
            table.insert("synthetic_params_dir".into(), value);
        }
    }
    for (var, value) in &src.env {
        if let Some(key) = env_key(var) {
            set(&mut table, &key, value, &format!("environment variable {var}"), &mut warnings)?;
        }
    }
    for (key, value) in &src.flags {
        set(&mut table, key, value, &format!("flag setting {key}"), &mut warnings)?;
    }
    normalize_sizes(&mut table)?;
    let raw: Raw = toml::Value::Table(table).try_into().context("invalid configuration")?;
    raw.engine.validate().map_err(|e| anyhow::anyhow!("invalid engine configuration: {e}"))?;
    let listen = match &raw.listen {
        Some(s) => Listen::parse(s)?,
        None => Listen::Unix(default_socket_path()),
    };
    let status_listen = match raw.status_listen.trim() {
        "" | "off" | "none" => None,
        s => Some(s.to_string()),
    };
    raw.backend.parse::<kiln_groth16::BackendChoice>()?;
    if !(1..=16).contains(&raw.gpu_workers_per_device) {
        bail!("gpu_workers_per_device must be between 1 and 16, not {}", raw.gpu_workers_per_device);
    }
    let gpu_devices = parse_gpu_devices(&raw.gpu_devices)?;
    if !((1 << 20)..=(16 << 30)).contains(&raw.gpu_stream_chunk_bytes) {
        bail!("gpu_stream_chunk_bytes must be between 1MiB and 16GiB, not {}", raw.gpu_stream_chunk_bytes);
    }
    if !(1..=28).contains(&raw.max_synthetic_log_size) {
        bail!("max_synthetic_log_size must be between 1 and 28, not {}", raw.max_synthetic_log_size);
    }
    if raw.max_message_bytes < 4096 {
        bail!("max_message_bytes must be at least 4096, not {}", raw.max_message_bytes);
    }
    if raw.max_streams_per_connection == 0 {
        bail!("max_streams_per_connection must be at least 1");
    }
    let socket = SocketAccess::parse(&raw.socket_mode, &raw.socket_group)?;
    let log_format = LogFormat::parse(&raw.log_format)?;
    tracing_subscriber::EnvFilter::try_new(&raw.log_level).with_context(|| format!("log_level {:?} is not a log filter (e.g. info, kiln_pipeline=debug)", raw.log_level))?;
    let fil_env = src.env.iter().find(|(k, v)| k == FIL_PARAMS_ENV && !v.is_empty()).map(|(_, v)| PathBuf::from(v));
    let (filecoin_params_dir, filecoin_params_dir_source) = match (fil_env, raw.filecoin_params_dir) {
        (Some(env), configured) => {
            if let Some(c) = configured.filter(|c| *c != env) {
                warnings.push(format!(
                    "{FIL_PARAMS_ENV}={} overrides filecoin_params_dir = {} (the environment wins, as it does for filecoin-proofs, Lotus and Curio)",
                    env.display(),
                    c.display()
                ));
            }
            (env, ParamsDirSource::Environment)
        }
        (None, configured) => (configured.unwrap_or_else(|| DEFAULT_FILECOIN_PARAMS_DIR.into()), ParamsDirSource::Setting),
    };
    Ok(DaemonConfig {
        listen,
        status_listen,
        shutdown_grace_secs: raw.shutdown_grace_secs,
        socket,
        synthetic_params_dir: raw.synthetic_params_dir.unwrap_or_else(default_synthetic_params_dir),
        filecoin_params_dir,
        filecoin_params_dir_source,
        log_level: raw.log_level,
        log_format,
        backend: raw.backend,
        gpu_workers_per_device: raw.gpu_workers_per_device,
        gpu_devices,
        gpu_srs_vram_bytes: raw.gpu_srs_vram_bytes,
        gpu_stream_chunk_bytes: raw.gpu_stream_chunk_bytes,
        max_synthetic_log_size: raw.max_synthetic_log_size,
        max_message_bytes: usize::try_from(raw.max_message_bytes).unwrap_or(usize::MAX),
        max_streams_per_connection: raw.max_streams_per_connection,
        engine: raw.engine,
        warnings,
    })
}

fn deprecated_params_dir(origin: &str) -> String {
    format!("{origin}: params_dir is deprecated, it is now called synthetic_params_dir (KILN_SYNTHETIC_PARAMS_DIR, --synthetic-params-dir)")
}

impl DaemonConfig {
    /// Puts [`filecoin_params_dir`](Self::filecoin_params_dir) where
    /// filecoin-proofs reads it (`FIL_PROOFS_PARAMETER_CACHE`, read once per
    /// process) unless the environment already set it. Call before any
    /// thread starts: changing the environment races with threads reading it.
    pub fn export_filecoin_params_dir(&self) {
        if self.filecoin_params_dir_source == ParamsDirSource::Setting {
            std::env::set_var(FIL_PARAMS_ENV, &self.filecoin_params_dir);
        }
    }

    /// The effective configuration as TOML (what `kiln serve --print-config` shows).
    pub fn to_toml(&self) -> String {
        let raw = Raw {
            listen: Some(self.listen.to_string()),
            status_listen: self.status_listen.clone().unwrap_or_else(|| "off".into()),
            shutdown_grace_secs: self.shutdown_grace_secs,
            socket_mode: self.socket.mode_text(),
            socket_group: self.socket.group.as_ref().map(|(name, _)| name.clone()).unwrap_or_default(),
            synthetic_params_dir: Some(self.synthetic_params_dir.clone()),
            filecoin_params_dir: Some(self.filecoin_params_dir.clone()),
            log_level: self.log_level.clone(),
            log_format: self.log_format.name().into(),
            backend: self.backend.clone(),
            gpu_workers_per_device: self.gpu_workers_per_device,
            gpu_devices: match &self.gpu_devices {
                None => "all".into(),
                Some(list) => list.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
            },
            gpu_srs_vram_bytes: self.gpu_srs_vram_bytes,
            gpu_stream_chunk_bytes: self.gpu_stream_chunk_bytes,
            max_synthetic_log_size: self.max_synthetic_log_size,
            max_message_bytes: self.max_message_bytes as u64,
            max_streams_per_connection: self.max_streams_per_connection,
            engine: self.engine.clone(),
        };
        toml::to_string(&raw).unwrap_or_else(|e| format!("# cannot render the configuration: {e}\n"))
    }
}

/// `KILN_LISTEN` -> `listen`, `KILN_ENGINE_SYNTHESIS_WORKERS` ->
/// `engine.synthesis_workers`; other variables (`KILN_LOG`, `KILN_CONFIG`,
/// anything not `KILN_*`) are not configuration knobs.
fn env_key(var: &str) -> Option<String> {
    let rest = var.strip_prefix("KILN_")?;
    if let Some(engine_key) = rest.strip_prefix("ENGINE_") {
        return Some(format!("engine.{}", engine_key.to_ascii_lowercase()));
    }
    let key = rest.to_ascii_lowercase();
    (key == DEPRECATED_PARAMS_DIR || TOP_LEVEL.iter().any(|(k, _)| *k == key)).then_some(key)
}

/// Sets `key` (`name` or `engine.name`) from a string, typed like TOML.
fn set(table: &mut toml::Table, key: &str, value: &str, origin: &str, warnings: &mut Vec<String>) -> Result<()> {
    let key = if key == DEPRECATED_PARAMS_DIR {
        warnings.push(deprecated_params_dir(origin));
        "synthetic_params_dir"
    } else {
        key
    };
    let (section, name) = match key.split_once('.') {
        Some(("engine", name)) => (Some("engine"), name),
        Some(_) => bail!("{origin}: unknown configuration key {key:?} (only engine.* has sub-keys)"),
        None => (None, key),
    };
    let value = match (section, TOP_LEVEL.iter().find(|(k, _)| *k == name)) {
        (Some(_), _) => typed(value),
        (None, Some((_, true))) => toml::Value::String(value.to_string()),
        (None, Some((_, false))) => typed(value),
        (None, None) => bail!("{origin}: unknown configuration key {key:?}"),
    };
    let target = match section {
        Some(s) => table
            .entry(s)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .with_context(|| format!("{origin}: [{s}] is not a table in the config file"))?,
        None => table,
    };
    target.insert(name.to_string(), value);
    Ok(())
}

/// A TOML scalar if the text is one (`4`, `true`, `1.5`), else a string.
fn typed(value: &str) -> toml::Value {
    match toml::from_str::<toml::Table>(&format!("v = {value}")) {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(value.into())),
        Err(_) => toml::Value::String(value.into()),
    }
}

/// Lets every `*_bytes` knob be written as a size (`"16GiB"`, `"512MiB"`).
fn normalize_sizes(table: &mut toml::Table) -> Result<()> {
    fn sizes_in(table: &mut toml::Table, prefix: &str) -> Result<()> {
        for (key, value) in table.iter_mut() {
            if let (true, toml::Value::String(s)) = (key.ends_with("_bytes"), &*value) {
                let bytes = parse_size(s).with_context(|| format!("{prefix}{key}"))?;
                *value = toml::Value::Integer(i64::try_from(bytes).context("size too large")?);
            }
        }
        Ok(())
    }
    sizes_in(table, "")?;
    match table.get_mut("engine").and_then(|v| v.as_table_mut()) {
        Some(engine) => sizes_in(engine, "engine."),
        None => Ok(()),
    }
}

/// Parses `1073741824`, `1GiB`, `512MiB`, `64KiB`, `2G`, `100M` (binary units).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().with_context(|| format!("{s:?} is not a size (e.g. 1073741824, 16GiB, 512MiB)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        u => bail!("{s:?}: unknown size unit {u:?} (use KiB, MiB, GiB or TiB)"),
    };
    n.checked_mul(1u64 << shift).with_context(|| format!("{s:?} is too large"))
}

/// The default cache of the synthetic workload's parameters,
/// `~/.cache/kiln/params`: the directory `kiln demo` uses too, so the
/// daemon and the demo share generated parameters.
pub fn default_synthetic_params_dir() -> PathBuf {
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("kiln").join("params")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(file: Option<&str>, env: &[(&str, &str)], flags: &[(&str, &str)]) -> Sources {
        Sources {
            file: file.map(|t| (PathBuf::from("test.toml"), t.to_string())),
            env: env.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
            flags: flags.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
        }
    }

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let file = "listen = \"tcp:127.0.0.1:1\"\nshutdown_grace_secs = 5\n[engine]\nsynthesis_workers = 3\ngpu_queue_depth = 4\n";
        let env = [("KILN_LISTEN", "tcp:127.0.0.1:2"), ("KILN_ENGINE_SYNTHESIS_WORKERS", "5"), ("KILN_LOG", "debug")];
        let flags = [("listen", "unix:/tmp/x.sock")];
        let c = resolve(&src(Some(file), &env, &flags)).unwrap();
        assert_eq!(c.listen, Listen::Unix("/tmp/x.sock".into()));
        assert_eq!(c.engine.synthesis_workers, 5, "env beats file");
        assert_eq!(c.engine.gpu_queue_depth, 4, "file beats default");
        assert_eq!(c.shutdown_grace_secs, 5);
        assert_eq!(c.engine.finalizer_threads, EngineConfig::default().finalizer_threads);
        assert_eq!(c.status_listen.as_deref(), Some(DEFAULT_STATUS_LISTEN));
    }

    #[test]
    fn gpu_devices_all_or_a_list() {
        assert_eq!(resolve(&src(None, &[], &[])).unwrap().gpu_devices, None);
        let c = resolve(&src(None, &[("KILN_GPU_DEVICES", "1, 0")], &[])).unwrap();
        assert_eq!(c.gpu_devices, Some(vec![1, 0]));
        let c = resolve(&src(Some("gpu_devices = \"2\""), &[], &[("gpu_devices", "all")])).unwrap();
        assert_eq!(c.gpu_devices, None, "the flag beats the file");
        for bad in ["0,0", "gpu0", "", "1,,2"] {
            let err = resolve(&src(None, &[("KILN_GPU_DEVICES", bad)], &[])).unwrap_err();
            assert!(format!("{err:#}").contains("gpu_devices"), "{bad:?}: {err:#}");
        }
        // The rendered configuration reads back the same.
        let c = resolve(&src(None, &[("KILN_GPU_DEVICES", "3,1")], &[])).unwrap();
        let again = resolve(&src(Some(&c.to_toml()), &[], &[])).unwrap();
        assert_eq!(again.gpu_devices, Some(vec![3, 1]));
    }

    #[test]
    fn sizes_and_off() {
        let c = resolve(&src(None, &[("KILN_ENGINE_MEMORY_BUDGET_BYTES", "2GiB")], &[("status_listen", "off")])).unwrap();
        assert_eq!(c.engine.memory_budget_bytes, Some(2 << 30));
        assert_eq!(c.status_listen, None);
        assert_eq!(parse_size("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("7").unwrap(), 7);
        assert!(parse_size("3 parsecs").is_err());
    }

    #[test]
    fn mistakes_are_reported() {
        let unknown_file = resolve(&src(Some("lisen = \"tcp:1.2.3.4:5\""), &[], &[])).unwrap_err();
        assert!(format!("{unknown_file:#}").contains("lisen"), "{unknown_file:#}");
        let unknown_engine = resolve(&src(None, &[("KILN_ENGINE_SYNTH_WORKERS", "2")], &[])).unwrap_err();
        assert!(format!("{unknown_engine:#}").contains("synth_workers"), "{unknown_engine:#}");
        let bad_type = resolve(&src(None, &[], &[("engine.synthesis_workers", "many")])).unwrap_err();
        assert!(format!("{bad_type:#}").contains("synthesis_workers"), "{bad_type:#}");
        assert!(resolve(&src(None, &[], &[("engine.synthesis_workers", "0")])).is_err());
        assert!(resolve(&src(None, &[], &[("nope", "1")])).is_err());
        assert!(resolve(&src(None, &[], &[("backend", "quantum")])).is_err());
    }

    #[test]
    fn params_dir_is_an_accepted_old_name() {
        let c = resolve(&src(Some("params_dir = \"/a\""), &[], &[])).unwrap();
        assert_eq!(c.synthetic_params_dir, PathBuf::from("/a"));
        assert!(c.warnings.iter().any(|w| w.contains("params_dir is deprecated") && w.contains("config file")), "{:?}", c.warnings);
        let c = resolve(&src(Some("synthetic_params_dir = \"/a\""), &[("KILN_PARAMS_DIR", "/b")], &[])).unwrap();
        assert_eq!(c.synthetic_params_dir, PathBuf::from("/b"), "the environment's old name beats the file's new one");
        assert!(c.warnings.iter().any(|w| w.contains("KILN_PARAMS_DIR")), "{:?}", c.warnings);
        let c = resolve(&src(None, &[("KILN_SYNTHETIC_PARAMS_DIR", "/c")], &[("params_dir", "/d")])).unwrap();
        assert_eq!(c.synthetic_params_dir, PathBuf::from("/d"));
        let c = resolve(&src(None, &[("KILN_SYNTHETIC_PARAMS_DIR", "/c")], &[])).unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let both = resolve(&src(Some("params_dir = \"/a\"\nsynthetic_params_dir = \"/b\""), &[], &[])).unwrap_err();
        assert!(format!("{both:#}").contains("both"), "{both:#}");
    }

    #[test]
    fn filecoin_params_dir_setting_and_environment() {
        let c = resolve(&src(None, &[], &[])).unwrap();
        assert_eq!((c.filecoin_params_dir.as_path(), c.filecoin_params_dir_source), (Path::new(DEFAULT_FILECOIN_PARAMS_DIR), ParamsDirSource::Setting));
        let c = resolve(&src(Some("filecoin_params_dir = \"/data/params\""), &[], &[])).unwrap();
        assert_eq!(c.filecoin_params_dir, PathBuf::from("/data/params"));
        let c = resolve(&src(Some("filecoin_params_dir = \"/data/params\""), &[(FIL_PARAMS_ENV, "/env/params")], &[])).unwrap();
        assert_eq!((c.filecoin_params_dir.as_path(), c.filecoin_params_dir_source), (Path::new("/env/params"), ParamsDirSource::Environment));
        assert!(c.warnings.iter().any(|w| w.contains("overrides filecoin_params_dir")), "{:?}", c.warnings);
        let c = resolve(&src(None, &[(FIL_PARAMS_ENV, "/env/params")], &[])).unwrap();
        assert!(c.warnings.is_empty(), "the environment alone is no conflict: {:?}", c.warnings);
    }

    #[test]
    fn socket_logging_and_listen_settings() {
        let c = resolve(&src(Some("socket_mode = \"0660\"\nsocket_group = \"root\"\nlog_format = \"json\""), &[("KILN_LISTEN", "127.0.0.1:9820")], &[])).unwrap();
        assert_eq!(c.socket, SocketAccess { mode: 0o660, group: Some(("root".into(), 0)) });
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.listen, Listen::Tcp("127.0.0.1:9820".into()), "cuzk's bare host:port");
        let again = resolve(&src(Some(&c.to_toml()), &[], &[])).unwrap();
        assert_eq!((again.socket, again.log_format), (c.socket, c.log_format));
        for (key, value, words) in [("log_format", "yaml", "log_format"), ("log_level", "kiln=loud", "log_level"), ("socket_mode", "rw", "socket_mode")] {
            let e = resolve(&src(None, &[], &[(key, value)])).unwrap_err();
            assert!(format!("{e:#}").contains(words), "{key}={value}: {e:#}");
        }
    }

    /// contrib/kiln.toml (what contrib/kiln.service reads) is a valid
    /// configuration; its group is left out (no curio group here).
    #[test]
    fn contrib_kiln_toml_is_valid() {
        let c = resolve(&src(Some(include_str!("../../../contrib/kiln.toml")), &[], &[("socket_group", "")])).unwrap();
        assert_eq!(c.listen, Listen::Unix("/run/kiln/kiln.sock".into()));
        assert_eq!(c.socket.mode, 0o660);
        assert_eq!(c.filecoin_params_dir, PathBuf::from(DEFAULT_FILECOIN_PARAMS_DIR));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    /// docs/CONFIG.md must name every knob, the engine's included (which
    /// kiln-pipeline may add to at any time).
    #[test]
    fn config_md_lists_every_knob() {
        let doc = include_str!("../../../docs/CONFIG.md");
        let engine = serde_json::to_value(EngineConfig::default()).unwrap();
        let engine_keys = engine.as_object().unwrap().keys().cloned();
        let top_keys = TOP_LEVEL.iter().map(|(k, _)| k.to_string());
        for key in engine_keys.chain(top_keys) {
            assert!(doc.contains(&format!("| `{key}` |")), "docs/CONFIG.md has no row for `{key}`");
        }
    }

    #[test]
    fn print_config_round_trips() {
        let c = resolve(&src(None, &[], &[("listen", "tcp:127.0.0.1:7"), ("engine.gpu_queue_depth", "2")])).unwrap();
        let again = resolve(&src(Some(&c.to_toml()), &[], &[])).unwrap();
        assert_eq!(again.listen, c.listen);
        assert_eq!(again.engine, c.engine);
        assert_eq!(again.synthetic_params_dir, c.synthetic_params_dir);
        assert_eq!(again.socket, c.socket);
        assert_eq!(again.filecoin_params_dir, c.filecoin_params_dir);
    }
}
