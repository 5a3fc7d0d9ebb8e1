//! kiln's soak harness, the code behind `cargo xtask soak`: drive a kiln
//! daemon with a workload file for a long time, sample it every second,
//! and report its steady state with plots.
//!
//! It starts `kiln serve` (built in release unless `--kiln-bin` names a
//! binary) or connects to a running daemon (`--connect`), sends the
//! workload file's jobs over cuzk.v1 gRPC (closed loop with N clients, or
//! Poisson arrivals), and every second records the clients' counters, the
//! daemon's `/status` (budget, buffer counters by stage, queues, workers,
//! RSS) and NVML's GPU busy % and VRAM. After `--duration` it stops
//! sending, waits for the jobs in flight, checks that the daemon went back
//! to idle, and writes a report directory (`report.rs`) with plots.
//! Steady-state figures exclude a warm-up: `--warmup`, or detected where
//! throughput settles (`analysis::detect_warmup`); the report says which.
//!
//! It exits non-zero when a check fails (a failed or unverifiable proof,
//! peak RSS above the budget, buffer counters not back to zero), which is
//! what CI's soak relies on.
//!
//! A crate of its own, beside xtask: `cargo test -p kiln-soak` builds and
//! tests it without xtask's other tasks (kiln-filecoin, the benchmark
//! drivers), and its parts are a library for the tasks that drive a real
//! daemon too (`cargo xtask kill-loop` uses [`daemon`], [`load`] and
//! [`workload`]). [`stats`] (nearest-rank percentiles) is shared with
//! xtask's latency benchmark. The built `xtask` binary runs the soak on a
//! host without cargo: `xtask soak --kiln-bin ./kiln --workload h200.toml
//! --out DIR`.

mod analysis;
pub mod daemon;
pub mod load;
mod plots;
mod report;
mod run;
mod sample;
pub mod stats;
pub mod workload;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

/// `cargo xtask soak` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The workload file (TOML; see xtask/soak/demo.toml).
    #[arg(long, default_value = "xtask/soak/demo.toml")]
    pub workload: PathBuf,
    /// How long to send work, e.g. 90s, 10m, 1h30m.
    #[arg(long, value_parser = parse_duration, default_value = "2m")]
    pub duration: Duration,
    /// Discard this long from the start; detected from throughput when not given.
    #[arg(long, value_parser = parse_duration)]
    pub warmup: Option<Duration>,
    /// The report directory (default: target/soak/<UTC time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Use a running daemon at `unix:PATH` or `tcp:HOST:PORT` instead of
    /// starting one (the workload's [daemon] settings are then ignored).
    #[arg(long)]
    pub connect: Option<String>,
    /// The running daemon's status listener (with --connect).
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub status: std::net::SocketAddr,
    /// The `kiln` binary to start; built with `cargo build --release` when not given.
    #[arg(long)]
    pub kiln_bin: Option<PathBuf>,
    /// Parameter cache the started daemon uses and the soak verifies
    /// against (default: the daemon's, ~/.cache/kiln/params).
    #[arg(long)]
    pub params_dir: Option<PathBuf>,
    /// More `--set KEY=VALUE` settings for the started daemon, after the workload's.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// How long to wait for jobs in flight after --duration.
    #[arg(long, value_parser = parse_duration, default_value = "5m")]
    pub drain: Duration,
    /// Do not load (or generate) the workload's parameters before the clock
    /// starts: their first use then falls inside the warm-up.
    #[arg(long)]
    pub no_preload: bool,
    /// Seed for the job mix and witnesses (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Run nothing: redraw the plots of the report in this directory from
    /// its samples.csv and summary.json (e.g. a report copied off a GPU
    /// machine without its PNGs).
    #[arg(long, value_name = "DIR")]
    pub replot: Option<PathBuf>,
}

/// Runs the soak; an error when it could not run. A failed check exits
/// with status 1 after the report is written (the report says why; an
/// error's backtrace would only bury that).
///
/// `root` is the kiln checkout (xtask passes its workspace root): a
/// relative `--workload` that does not exist from the current directory
/// is read from there, the report goes to `root/target/soak/<UTC time>`
/// unless `--out` says otherwise, and without `--kiln-bin` the daemon is
/// built there with `cargo build --release`.
pub fn run(args: Args, root: &Path) -> Result<()> {
    if let Some(dir) = &args.replot {
        return replot(dir);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    if !rt.block_on(run::soak(args, root))? {
        eprintln!("soak: FAILED (a check failed; see the report)");
        std::process::exit(1);
    }
    Ok(())
}

/// Redraws a report's plots from its samples and summary.
fn replot(dir: &Path) -> Result<()> {
    use anyhow::Context;
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).with_context(|| format!("reading {}", dir.join(name).display()));
    let samples = sample::parse_csv(&read("samples.csv")?)?;
    let summary: serde_json::Value = serde_json::from_str(&read("summary.json")?).context("summary.json")?;
    let field = |path: &[&str]| -> Result<f64> {
        path.iter()
            .try_fold(&summary, |v, k| v.get(k))
            .and_then(serde_json::Value::as_f64)
            .with_context(|| format!("summary.json has no number at {}", path.join(".")))
    };
    let files = plots::all(dir, &samples, field(&["window_s"])?, field(&["warmup", "end_s"])?, field(&["steady", "proofs_per_s"])?)?;
    eprintln!("soak: redrew {} in {}", files.join(", "), dir.display());
    Ok(())
}

/// Parses `90s`, `10m`, `1h30m`, `500ms` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return (secs >= 0.0 && secs.is_finite()).then(|| Duration::from_secs_f64(secs)).ok_or(format!("{s:?}: negative"));
    }
    let mut total = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let unit_len = rest[num_len..].find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len() - num_len);
        let (num, unit) = (&rest[..num_len], &rest[num_len..num_len + unit_len]);
        let n: f64 = num.parse().map_err(|_| format!("{s:?}: expected a duration like 90s, 10m or 1h30m"))?;
        total += n * match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
        };
        rest = &rest[num_len + unit_len..];
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    Ok(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "3x", "m", "-5", "1h30"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shipped_workloads_parse() {
        for f in ["demo.toml", "h200.toml"] {
            // The workload files stay beside xtask: the paths CI and the docs give `cargo xtask soak`.
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../xtask/soak").join(f);
            workload::Workload::load(&path).unwrap_or_else(|e| panic!("{f}: {e:#}"));
        }
        // The 32 GiB workload reads its payloads from in32/ beside it (made on
        // the machine that runs it): here 2 KiB ones stand in for them.
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../xtask/soak/h200-32g.toml")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(1);
        kiln_filecoin::sparse::generate_to_dir(2048, &dir.path().join("in32"), &mut rng).unwrap();
        let w = workload::Workload::parse_in(&text, dir.path()).unwrap_or_else(|e| panic!("h200-32g.toml: {e:#}"));
        assert!(w.jobs.iter().all(|j| j.filecoin.is_some()));
    }
}
