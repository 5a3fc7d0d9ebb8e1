//! `bench-latency`: how long deadline work takes with the box full of bulk
//! work (issue 25). kiln's engine runs in this process; for each mode (an
//! engine configuration) it proves critical jobs one at a time on the idle
//! engine, then starts a bulk load that keeps every worker busy, measures
//! the bulk throughput alone, and proves the critical jobs again, one at a
//! time, under the load. It reports the critical jobs' latency percentiles
//! unloaded and loaded, issue 25's target (loaded p99 <= 1.5x unloaded
//! p50 + 50 ms), where their time went (synthesis, prover), and the bulk
//! throughput each mode keeps.
//!
//! Modes: `isolated` (the engine's defaults: the critical lane with its
//! own rayon pool, niced bulk threads, its own prover worker on
//! high-priority streams, its own memory reserve), `shared` (all of those
//! off: critical work shares the bulk threads and prover workers, only
//! ordered first in kiln's queues: kiln before issue 25), and modes with
//! one part off, to see what each does (`mode_settings`). The bulk
//! throughput lost to the isolation is the first mode's against the last's.
//!
//! Workloads: synthetic circuits (`--critical-log`, `--bulk-log`), or with
//! `--inputs DIR` the real Filecoin kinds from `cargo xtask gen-vanilla`
//! payloads (`--critical winning,window --bulk porep,snap`; their
//! parameters are made where missing, test sector sizes only).
//! `cargo xtask bench latency` builds and runs it; `--build-only` carries
//! it to a GPU machine.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bench_support::Outputs;
use clap::Parser;
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::EngineConfig;
use kiln_synth::workload::WorkloadKind;
use serde_json::json;

#[path = "../../bench_support.rs"]
#[allow(dead_code)]
mod bench_support;
#[path = "../../kiln_bench.rs"]
mod kiln_bench;
mod cpu;
mod report;
mod run;

use report::{render_table, ModeReport};
use run::{Mode, Plan, Workload};

#[derive(Parser, Debug)]
#[command(name = "bench-latency", about = "critical jobs' latency unloaded and under a full bulk load, with and without kiln's critical lane")]
struct Args {
    /// Modes to run, in order: isolated (kiln's defaults), shared (the critical lane's isolation off),
    /// no-nice, no-critical-pool, no-critical-prover (one part off), bulk-leaves-a-core.
    #[arg(long, value_delimiter = ',', default_value = "isolated,shared")]
    modes: Vec<String>,
    /// Critical jobs per kind, unloaded and again under load.
    #[arg(long, default_value_t = 30)]
    samples: usize,
    /// Milliseconds between two critical jobs.
    #[arg(long, default_value_t = 200)]
    gap_ms: u64,
    /// Bulk jobs kept in flight (enough to keep every synthesis and prover worker busy).
    #[arg(long, default_value_t = 8)]
    bulk_in_flight: usize,
    /// Seconds the bulk load runs before anything is measured (and until
    /// two bulk partitions have been proved).
    #[arg(long, default_value_t = 10)]
    settle_s: u64,
    /// Seconds the bulk load runs alone, for its throughput; the loaded
    /// phase then lasts at least as long (more critical jobs than
    /// --samples if need be), for the throughput beside critical jobs.
    #[arg(long, default_value_t = 20)]
    bulk_window_s: u64,
    /// Synthetic critical job: 2^N constraints, one partition (WinningPoSt-like).
    #[arg(long, default_value_t = 16)]
    critical_log: u32,
    /// Synthetic bulk jobs: 2^N constraints per partition (PoRep-like).
    #[arg(long, default_value_t = 20)]
    bulk_log: u32,
    /// Partitions per synthetic bulk job.
    #[arg(long, default_value_t = 4)]
    bulk_partitions: usize,
    /// Where synthetic parameters are (generated there when missing).
    #[arg(long)]
    params_dir: Option<PathBuf>,
    /// gen-vanilla payloads of one sector size: prove the Filecoin kinds instead of synthetic circuits.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// With --inputs: the critical kinds (winning, window), each measured on its own.
    #[arg(long, value_delimiter = ',', default_value = "winning,window")]
    critical: Vec<String>,
    /// With --inputs: the bulk kinds (porep, snap), submitted in turn.
    #[arg(long, value_delimiter = ',', default_value = "porep,snap")]
    bulk: Vec<String>,
    /// Only make sure the workloads' parameters exist (Filecoin: generated
    /// where missing), then stop: a separate first step where time is short.
    #[arg(long)]
    params_only: bool,
    /// kiln's backend: auto (every GPU with kernels, else the CPU), gpu, cpu.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// kiln prover workers per GPU (the daemon's default is 2).
    #[arg(long, default_value_t = 2)]
    gpu_workers: usize,
    /// Engine settings for every mode, as the daemon's `--set engine.KEY=VALUE` takes them
    /// (e.g. synthesis_workers=12); a mode's own settings come after.
    #[arg(long = "engine", value_name = "KEY=VALUE")]
    engine: Vec<String>,
    /// Write table.md, results.json and proofs.jsonl (one line per critical job) here.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// The settings a mode changes: `isolated` is the engine's defaults, each
/// `no-*` mode turns one part of the critical lane's CPU isolation off,
/// `bulk-leaves-a-core` sizes the bulk pool one below the cores instead of
/// lowering its priority, and `shared` turns all of it off.
fn mode_settings(mode: &str, cores: usize) -> Result<Vec<String>> {
    let s: Vec<String> = match mode {
        "isolated" => vec![],
        "no-nice" => vec!["bulk_nice=0".into()],
        "no-critical-pool" => vec!["critical_threads=0".into()],
        "no-critical-prover" => vec!["critical_prover_workers=0".into()],
        "bulk-leaves-a-core" => vec!["bulk_nice=0".into(), format!("bulk_threads={}", cores.saturating_sub(1).max(1))],
        "shared" => ["critical_threads=0", "bulk_nice=0", "critical_prover_workers=0", "critical_reserve_bytes=0"].map(String::from).into(),
        other => bail!("unknown mode {other:?} (isolated, no-nice, no-critical-pool, no-critical-prover, bulk-leaves-a-core, shared)"),
    };
    Ok(s)
}

/// `EngineConfig::default()` with `KEY=VALUE` settings applied (values read
/// as JSON when they parse, else as strings; unknown keys are errors).
fn engine_config(settings: &[String]) -> Result<EngineConfig> {
    let mut v = serde_json::to_value(EngineConfig::default())?;
    for s in settings {
        let (key, value) = s.split_once('=').with_context(|| format!("--engine {s:?}: not KEY=VALUE"))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
        v[key.trim_start_matches("engine.")] = value;
    }
    serde_json::from_value(v).map_err(|e| anyhow!("engine settings {settings:?}: {e}"))
}

/// Synthetic workloads, or the Filecoin kinds of `--inputs`.
fn workloads(args: &Args) -> Result<(Vec<Workload>, Vec<Workload>, String)> {
    let Some(inputs) = &args.inputs else {
        let dir = args
            .params_dir
            .clone()
            .unwrap_or_else(|| dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("kiln").join("params"));
        let job = |log, partitions| Arc::new(SyntheticJob::new(WorkloadKind::FilecoinLike, log, 4, partitions, &dir));
        let critical = Workload { label: format!("synthetic 2^{}", args.critical_log), source: job(args.critical_log, 1) };
        let bulk_label = format!("synthetic 2^{} x{}", args.bulk_log, args.bulk_partitions);
        let bulk = Workload { label: bulk_label.clone(), source: job(args.bulk_log, args.bulk_partitions) };
        return Ok((vec![critical], vec![bulk.clone()], format!("synthetic Filecoin-like circuits: critical {}, bulk {bulk_label}", args.critical_log)));
    };
    let load = |names: &[String]| -> Result<Vec<(Workload, kiln_filecoin::payload::Payload)>> {
        names
            .iter()
            .map(|n| {
                let kind = kiln_bench::kind_of(n)?;
                let payload = kiln_filecoin::vanilla::read_payload(&inputs.join(kind.file_name())).map_err(|e| anyhow!(e))?;
                let source = kiln_bench::job_for(&payload).map_err(|e| anyhow!("{n}: {e}"))?;
                Ok((Workload { label: source.kind_label().to_string(), source }, payload))
            })
            .collect()
    };
    let (critical, bulk) = (load(&args.critical)?, load(&args.bulk)?);
    let payloads: Vec<_> = critical.iter().chain(&bulk).map(|(_, p)| p.clone()).collect();
    kiln_bench::ensure_params(&payloads, &|m| eprintln!("bench-latency: {m}"))?;
    let size = kiln_filecoin::registered::sector_size_name(payloads[0].sector_size);
    let what = format!("Filecoin kinds at {size} from {}", inputs.display());
    Ok((critical.into_iter().map(|(w, _)| w).collect(), bulk.into_iter().map(|(w, _)| w).collect(), what))
}

fn main() -> Result<()> {
    kiln_bench::log_to_stderr();
    let args = Args::parse();
    if args.samples == 0 {
        bail!("--samples must be at least 1");
    }
    if args.inputs.is_some() && std::env::var_os("FIL_PROOFS_PARAMETER_CACHE").is_none() {
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", "/var/tmp/filecoin-proof-parameters");
    }
    let (critical, bulk, what) = workloads(&args)?;
    if args.params_only {
        // Synthetic parameters are made by the engine on first use: make them now.
        for w in critical.iter().chain(&bulk) {
            let spec = w.source.srs();
            if let Some(generate) = spec.generate.as_ref().filter(|_| !spec.path.exists()) {
                eprintln!("bench-latency: generating {}", spec.path.display());
                generate(&spec.path).map_err(|e| anyhow!("parameters of {}: {e}", w.label))?;
            }
        }
        println!("parameters ready (--params-only): {what}");
        return Ok(());
    }
    let (backends, description) = kiln_bench::backends(&args.backend, args.gpu_workers)?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let plan = Plan {
        samples: args.samples,
        gap: Duration::from_millis(args.gap_ms),
        bulk_in_flight: args.bulk_in_flight.max(1),
        settle: Duration::from_secs(args.settle_s),
        bulk_window: Duration::from_secs(args.bulk_window_s),
    };
    let header = format!(
        "critical-job latency, unloaded and under a full bulk load: {what}; {description}; host {cores} cores; \
         {} critical jobs per kind and phase, one at a time, {} ms apart; {} bulk jobs in flight; engine settings {:?}",
        plan.samples, args.gap_ms, plan.bulk_in_flight, args.engine
    );
    println!("{header}");
    let mut out = Outputs::new(args.out.clone())?;
    let mut reports: Vec<ModeReport> = Vec::new();
    let started = Instant::now();
    for mode in &args.modes {
        let own = mode_settings(mode, cores)?;
        let settings: Vec<String> = args.engine.iter().chain(&own).cloned().collect();
        let config = engine_config(&settings)?;
        eprintln!("bench-latency: == {mode} ({:.0} s so far)", started.elapsed().as_secs_f64());
        let m = Mode { name: mode.clone(), settings: own.join(" "), config };
        let report = run::run_mode(m, &backends, (&critical, &bulk), plan, &mut |mode, phase, kind, i, s| {
            eprintln!("bench-latency: {mode} {phase} {kind} {i}: {:.1} ms (synthesis {:.1}, prover {:.1})", s.total, s.synthesis, s.prover);
            out.line(json!({"mode": mode, "phase": phase, "kind": kind, "index": i, "ms": s.total, "synthesis_ms": s.synthesis, "prover_ms": s.prover}));
        })
        .with_context(|| format!("mode {mode}"))?;
        reports.push(report);
        out.write(&format!("{header}\n\n{}", render_table(&reports)), &json!({"header": header, "modes": reports}))?;
    }
    println!("\n{}", render_table(&reports));
    if let Some(d) = &args.out {
        println!("wrote {}/table.md, results.json, proofs.jsonl", d.display());
    }
    Ok(())
}
