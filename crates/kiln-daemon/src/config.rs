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

/// Where the gRPC server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A UNIX socket at this path (mode 0600; a stale socket is replaced).
    Unix(PathBuf),
    /// A TCP address, `HOST:PORT` (port 0 picks a free port).
    Tcp(String),
}

impl Listen {
    /// Parses `unix:PATH`, `unix://PATH` (Curio writes `unix:///run/curio/cuzk.sock`),
    /// `tcp:HOST:PORT` or `tcp://HOST:PORT`.
    pub fn parse(s: &str) -> Result<Listen> {
        if let Some(rest) = s.strip_prefix("unix:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                bail!("listen address {s:?} has no socket path (expected unix:/path/to/kiln.sock)");
            }
            return Ok(Listen::Unix(PathBuf::from(path)));
        }
        if let Some(rest) = s.strip_prefix("tcp:") {
            let addr = rest.strip_prefix("//").unwrap_or(rest);
            if !addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) {
                bail!("listen address {s:?} is not tcp:HOST:PORT (e.g. tcp:127.0.0.1:9820)");
            }
            return Ok(Listen::Tcp(addr.to_string()));
        }
        bail!("listen address {s:?} must start with unix: or tcp: (e.g. unix:/run/kiln/kiln.sock, tcp:127.0.0.1:9820)")
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Unix(p) => write!(f, "unix:{}", p.display()),
            Listen::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

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
    /// Where parameters of the built-in synthetic workload are cached.
    pub params_dir: PathBuf,
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
    /// The engine's knobs (kiln-pipeline's `EngineConfig`).
    pub engine: EngineConfig,
}

/// The merged layers, before defaults that need the filesystem.
#[derive(Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
struct Raw {
    listen: Option<String>,
    status_listen: String,
    shutdown_grace_secs: u64,
    params_dir: Option<PathBuf>,
    backend: String,
    gpu_workers_per_device: usize,
    gpu_devices: String,
    gpu_srs_vram_bytes: Option<u64>,
    gpu_stream_chunk_bytes: u64,
    max_synthetic_log_size: u32,
    max_message_bytes: u64,
    engine: EngineConfig,
}

impl Default for Raw {
    fn default() -> Self {
        Raw {
            listen: None,
            status_listen: DEFAULT_STATUS_LISTEN.into(),
            shutdown_grace_secs: 30,
            params_dir: None,
            backend: "auto".into(),
            gpu_workers_per_device: 2,
            gpu_devices: "all".into(),
            gpu_srs_vram_bytes: None,
            gpu_stream_chunk_bytes: kiln_groth16::gpu::DEFAULT_STREAM_CHUNK_BYTES as u64,
            max_synthetic_log_size: 20,
            max_message_bytes: 512 << 20,
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
    ("params_dir", true),
    ("backend", true),
    ("gpu_workers_per_device", false),
    ("gpu_devices", true),
    ("gpu_srs_vram_bytes", false),
    ("gpu_stream_chunk_bytes", false),
    ("max_synthetic_log_size", false),
    ("max_message_bytes", false),
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
    if let Some((path, text)) = &src.file {
        table = toml::from_str(text).with_context(|| format!("parsing config file {}", path.display()))?;
    }
    for (var, value) in &src.env {
        if let Some(key) = env_key(var) {
            set(&mut table, &key, value, &format!("environment variable {var}"))?;
        }
    }
    for (key, value) in &src.flags {
        set(&mut table, key, value, &format!("flag setting {key}"))?;
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
    if !matches!(raw.backend.as_str(), "auto" | "cpu" | "gpu") {
        bail!("unknown backend {:?} (expected auto, cpu or gpu)", raw.backend);
    }
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
    Ok(DaemonConfig {
        listen,
        status_listen,
        shutdown_grace_secs: raw.shutdown_grace_secs,
        params_dir: raw.params_dir.unwrap_or_else(default_params_dir),
        backend: raw.backend,
        gpu_workers_per_device: raw.gpu_workers_per_device,
        gpu_devices,
        gpu_srs_vram_bytes: raw.gpu_srs_vram_bytes,
        gpu_stream_chunk_bytes: raw.gpu_stream_chunk_bytes,
        max_synthetic_log_size: raw.max_synthetic_log_size,
        max_message_bytes: usize::try_from(raw.max_message_bytes).unwrap_or(usize::MAX),
        engine: raw.engine,
    })
}

impl DaemonConfig {
    /// The effective configuration as TOML (what `kiln serve --print-config` shows).
    pub fn to_toml(&self) -> String {
        let raw = Raw {
            listen: Some(self.listen.to_string()),
            status_listen: self.status_listen.clone().unwrap_or_else(|| "off".into()),
            shutdown_grace_secs: self.shutdown_grace_secs,
            params_dir: Some(self.params_dir.clone()),
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
    TOP_LEVEL.iter().any(|(k, _)| *k == key).then_some(key)
}

/// Sets `key` (`name` or `engine.name`) from a string, typed like TOML.
fn set(table: &mut toml::Table, key: &str, value: &str, origin: &str) -> Result<()> {
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

/// The default parameter cache, `~/.cache/kiln/params`: the directory
/// `kiln demo` uses, so the daemon and the demo share generated parameters.
pub fn default_params_dir() -> PathBuf {
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("kiln").join("params")
}

/// The default socket: `$XDG_RUNTIME_DIR/kiln/kiln.sock` when that variable
/// is set (a user session), else `/run/kiln/kiln.sock` (a system service),
/// else the first writable of the user's runtime dir, cache dir
/// (`~/.cache/kiln/kiln.sock`) and the temp dir.
pub fn default_socket_path() -> PathBuf {
    let mut dirs_to_try: Vec<PathBuf> = Vec::new();
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        dirs_to_try.push(PathBuf::from(x).join("kiln"));
    }
    dirs_to_try.push(PathBuf::from("/run/kiln"));
    dirs_to_try.extend(dirs::runtime_dir().map(|d| d.join("kiln")));
    dirs_to_try.extend(dirs::cache_dir().map(|d| d.join("kiln")));
    let fallback = std::env::temp_dir().join(format!("kiln-{}", whoami()));
    dirs_to_try
        .into_iter()
        .find(|d| writable_dir(d))
        .unwrap_or(fallback)
        .join("kiln.sock")
}

fn whoami() -> String {
    std::env::var("USER").unwrap_or_else(|_| "user".into())
}

/// True if `dir` exists or can be created, and a file can be made in it.
fn writable_dir(dir: &Path) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    let probe = dir.join(format!(".kiln-probe-{}", std::process::id()));
    let ok = std::fs::File::create(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
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
    fn listen_forms() {
        assert_eq!(Listen::parse("unix:///run/curio/cuzk.sock").unwrap(), Listen::Unix("/run/curio/cuzk.sock".into()));
        assert_eq!(Listen::parse("unix:rel.sock").unwrap(), Listen::Unix("rel.sock".into()));
        assert_eq!(Listen::parse("tcp:localhost:0").unwrap(), Listen::Tcp("localhost:0".into()));
        assert_eq!(Listen::parse("tcp://[::1]:9820").unwrap(), Listen::Tcp("[::1]:9820".into()));
        for bad in ["127.0.0.1:80", "tcp:nohost", "tcp::80", "unix:", "http://x"] {
            assert!(Listen::parse(bad).is_err(), "{bad}");
        }
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
        assert_eq!(again.params_dir, c.params_dir);
    }
}
