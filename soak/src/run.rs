//! One soak run, start to report: daemon, sampler, clients, drain, analysis.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use kiln_gpu::nvml::GpuSampler;
use kiln_proto::v1::GetStatusRequest;

use super::analysis::{self, Latency, Outcome};
use super::daemon::{self, Spawned, Target};
use super::load::{self, Ctx, JobRecord, Tally, Verifier};
use super::report::{self, DaemonTimes, Memory, Steady, Summary, Totals};
use super::sample::{self, DaemonSample, Sample};
use super::workload::{Load, Workload};
use super::{plots, Args};

/// Runs the soak and writes its report; `Ok(passed)`.
pub async fn soak(args: Args, root: &Path) -> Result<bool> {
    let workload_path = if args.workload.is_relative() && !args.workload.exists() { root.join(&args.workload) } else { args.workload.clone() };
    let workload = Workload::load(&workload_path)?;
    let started = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_secs();
    let out = args.out.clone().unwrap_or_else(|| root.join("target/soak").join(report::utc(started).replace([' ', ':'], "-")));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    std::fs::copy(&workload_path, out.join("workload.toml"))?;
    let params_dir = args.params_dir.clone().unwrap_or_else(default_params_dir);

    // The daemon: started here, or already running.
    let (spawned, target, daemon_desc) = match &args.connect {
        Some(grpc) => (None, Target { grpc: grpc.clone(), status: args.status }, format!("connected to {grpc}")),
        None => {
            let kiln = match &args.kiln_bin {
                Some(b) => b.clone(),
                None => build_kiln(root)?,
            };
            let mut settings = workload.daemon_settings.clone();
            for kv in &args.set {
                let Some((k, v)) = kv.split_once('=') else { bail!("--set {kv:?}: expected KEY=VALUE") };
                settings.push((k.to_string(), v.to_string()));
            }
            eprintln!("soak: starting {} serve (log: {})", kiln.display(), out.join("daemon.log").display());
            let d = Spawned::start(&kiln, &params_dir, &settings, &out.join("daemon.log")).await?;
            let desc = format!(
                "started `{} serve` with {}",
                kiln.display(),
                if settings.is_empty() { "default settings".into() } else { settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ") }
            );
            let target = d.target.clone();
            (Some(d), target, desc)
        }
    };
    let client = daemon::connect(&target.grpc).await?;
    let st = client.clone().get_status(GetStatusRequest {}).await.context("GetStatus")?.into_inner();
    let gpu_names: Vec<String> = st.gpus.iter().map(|g| g.name.clone()).collect();
    let daemon_desc = format!(
        "{daemon_desc}; backends [{}]{}",
        st.backends.join(", "),
        if gpu_names.is_empty() { String::new() } else { format!(", GPUs [{}]", gpu_names.join(", ")) }
    );
    let preload = if args.no_preload { Vec::new() } else { preload(&client, &workload).await? };
    let nvml = GpuSampler::open();
    let gpus = nvml.as_ref().map_or(0, |n| n.device_count() as usize);
    eprintln!("soak: {daemon_desc}; NVML: {}", if gpus == 0 { "none (no GPU figures)".into() } else { format!("{gpus} GPU(s)") });

    // Clients and the sampler.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let seed = args.seed.unwrap_or(started);
    let t0 = Instant::now();
    let ctx = Arc::new(Ctx {
        workload: workload.clone(),
        client,
        t0,
        tally: Tally::default(),
        records: tx,
        verifier: Verifier::new(params_dir.clone(), args.connect.is_none()),
        run_id: format!("{started}-{}", std::process::id()),
        next_id: Default::default(),
    });
    let samples = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let pid = spawned.as_ref().map(Spawned::pid);
    let stop_sampling = Arc::new(tokio::sync::Notify::new());
    let sampler = tokio::spawn(sample_loop(SamplerCtx {
        ctx: ctx.clone(),
        target: target.clone(),
        pid,
        nvml,
        gpus,
        csv: out.join("samples.csv"),
        samples: samples.clone(),
        stop: stop_sampling.clone(),
        duration: args.duration,
    }));
    let stop_at = t0 + args.duration;
    let unanswered = load::drive(ctx.clone(), seed, stop_at, args.drain).await;
    let run_s = args.duration.as_secs_f64();

    // After the drain: the daemon must go back to idle with every counter at zero.
    let idle = wait_idle(target.status, Duration::from_secs(30)).await;
    stop_sampling.notify_one();
    sampler.await.context("sampler task")??;
    let mut exit = String::new();
    if let Some(d) = spawned {
        exit = match d.stop(Duration::from_secs(60)).await {
            Ok(status) => format!("; stopped with SIGTERM ({status})"),
            Err(e) => format!("; {e}"),
        };
    }
    let tally = (ctx.tally.sent.load(Ordering::Relaxed), ctx.tally.shed.load(Ordering::Relaxed));
    // Every answered job was sent before `drive` returned (abandoned ones never send).
    let mut records = Vec::new();
    while let Ok(r) = rx.try_recv() {
        records.push(r);
    }
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));

    // Analysis.
    let names: Vec<String> = workload.jobs.iter().map(|j| j.name.clone()).collect();
    report::write_jobs_csv(&out.join("jobs.csv"), &records, &names)?;
    let ok: Vec<&JobRecord> = records.iter().filter(|r| r.ok()).collect();
    let events: Vec<(f64, u64)> = ok.iter().map(|r| (r.answered_s, r.partitions as u64)).collect();
    let median_latency_s = analysis::percentile(&ok.iter().map(|r| r.latency_ms() / 1e3).collect::<Vec<_>>(), 50.0).unwrap_or(0.0);
    let w = analysis::window_s(run_s, median_latency_s);
    let warmup = analysis::choose_warmup(args.warmup.map(|d| d.as_secs_f64()), &events, run_s, w);
    let steady = steady(&ok, &samples, &names, warmup.end_s, run_s, gpus);
    let peak_rss = samples.iter().filter_map(|s| s.daemon.as_ref()?.rss_peak.or(s.daemon.as_ref()?.rss)).max();
    let last = samples.iter().rev().find_map(|s| s.daemon.clone());
    let budget = last.as_ref().map_or(0, |d| d.budget_total);
    let totals = Totals::of(&records, tally.0, unanswered, tally.1);
    let outcome = Outcome {
        jobs_completed: totals.jobs_completed,
        jobs_failed: totals.jobs_failed,
        jobs_unanswered: unanswered,
        proofs_unchecked: totals.proofs_not_checked_here,
        require_checked: args.connect.is_none(),
        peak_rss,
        budget_total: budget,
        idle_at_end: idle.as_ref().map(|d| d.idle()).ok(),
        idle_detail: match &idle {
            Ok(d) => d.busy_summary(),
            Err(e) => format!("{e:#}"),
        },
    };
    let checks = analysis::checks(&outcome);
    let passed = checks.iter().all(|c| c.pass);
    let plot_files = plots::all(&out, &samples, w, warmup.end_s, steady.proofs_per_s)?;
    let summary = Summary {
        started_utc: report::utc(started),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        daemon: format!("{daemon_desc}{exit}"),
        preload,
        workload_file: workload_path.display().to_string(),
        workload_toml: std::fs::read_to_string(&workload_path)?,
        load: match workload.load {
            Load::Closed { clients } => format!("closed loop, {clients} clients"),
            Load::Open { per_sec, max_outstanding } => format!("open loop, {:.2} jobs/min (Poisson), at most {max_outstanding} outstanding", per_sec * 60.0),
        },
        duration_s: run_s,
        warmup,
        window_s: w,
        steady,
        totals,
        memory: Memory {
            budget_bytes: budget,
            peak_rss_bytes: peak_rss,
            peak_reserved_bytes: samples.iter().filter_map(|s| Some(s.daemon.as_ref()?.budget_reserved)).max().unwrap_or(0),
        },
        checks,
        passed,
    };
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)?)?;
    let index = report::index_md(&summary, &plot_files);
    std::fs::write(out.join("index.md"), &index)?;
    print_summary(&summary, &out);
    Ok(passed)
}

fn default_params_dir() -> PathBuf {
    std::env::var_os("KILN_PARAMS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("kiln").join("params"))
}

/// `cargo build --release --bin kiln`; the binary's path.
fn build_kiln(root: &Path) -> Result<PathBuf> {
    eprintln!("soak: building kiln (release)");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = std::process::Command::new(cargo)
        .current_dir(root)
        .args(["build", "--release", "-p", "kiln-daemon", "--bin", "kiln"])
        .status()
        .context("running cargo build")?
        .success();
    if !ok {
        bail!("cargo build --release --bin kiln failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    Ok(target.join("release/kiln"))
}

/// PreloadSRS for every parameter set the workload uses, before the clock
/// starts: parameters are files an operator has ahead of time (synthetic
/// ones are generated on first use), so their one-off cost is no part of a
/// steady state. Returns one line per set.
async fn preload(client: &kiln_proto::ProvingEngineClient<tonic::transport::Channel>, workload: &Workload) -> Result<Vec<String>> {
    let mut ids: Vec<String> = workload.jobs.iter().map(|j| j.srs_id()).collect();
    ids.sort();
    ids.dedup();
    let mut lines = Vec::new();
    for id in ids {
        eprintln!("soak: preloading parameters {id} (generated if missing)");
        let t = Instant::now();
        let r = client
            .clone()
            .preload_srs(kiln_proto::v1::PreloadSrsRequest { circuit_id: id.clone() })
            .await
            .with_context(|| format!("PreloadSRS {id}"))?
            .into_inner();
        lines.push(format!(
            "{id}: {} in {:.2} s",
            if r.already_loaded { "already loaded" } else { "loaded (generated first if missing)" },
            t.elapsed().as_secs_f64()
        ));
    }
    Ok(lines)
}

/// Polls `/status` until the daemon is idle or `within` passes; the last reading.
async fn wait_idle(status: std::net::SocketAddr, within: Duration) -> Result<DaemonSample> {
    let deadline = Instant::now() + within;
    loop {
        let d = DaemonSample::from_status(&serde_json::from_str(&daemon::http_get(status, "/status").await?)?);
        if d.idle() || Instant::now() > deadline {
            return Ok(d);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

struct SamplerCtx {
    ctx: Arc<Ctx>,
    target: Target,
    pid: Option<u32>,
    nvml: Option<GpuSampler>,
    gpus: usize,
    csv: PathBuf,
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<tokio::sync::Notify>,
    duration: Duration,
}

/// Every second until told to stop: one [`Sample`], appended to the CSV
/// file at once (a run that dies still leaves its data), and the progress line.
async fn sample_loop(s: SamplerCtx) -> Result<()> {
    let mut csv = std::io::BufWriter::new(std::fs::File::create(&s.csv)?);
    writeln!(csv, "{}", sample::csv_header(s.gpus))?;
    let bar = progress_bar(s.duration);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_line = Instant::now();
    let stopped = s.stop.notified();
    tokio::pin!(stopped);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut stopped => break,
        }
        let sample = take_sample(&s).await;
        writeln!(csv, "{}", sample::csv_row(&sample, s.gpus))?;
        csv.flush()?;
        let msg = progress_message(&sample);
        if bar.is_hidden() {
            // No terminal (CI): a plain line every 10 s instead of a bar.
            if last_line.elapsed() >= Duration::from_secs(10) {
                eprintln!("soak: {:>5.0} s  {msg}", sample.t_s);
                last_line = Instant::now();
            }
        } else {
            bar.set_position(sample.t_s.min(s.duration.as_secs_f64()) as u64);
            bar.set_message(msg);
        }
        s.samples.lock().expect("samples").push(sample);
    }
    bar.finish_and_clear();
    Ok(())
}

async fn take_sample(s: &SamplerCtx) -> Sample {
    let t = &s.ctx.tally;
    let mut daemon = match daemon::http_get(s.target.status, "/status").await {
        Ok(body) => serde_json::from_str(&body).ok().map(|v| DaemonSample::from_status(&v)),
        Err(_) => None,
    };
    // A daemon started here: /proc is the authority on its RSS.
    if let (Some(d), Some((rss, peak))) = (daemon.as_mut(), s.pid.and_then(daemon::proc_rss)) {
        (d.rss, d.rss_peak) = (Some(rss), Some(peak));
    }
    Sample {
        t_s: s.ctx.t0.elapsed().as_secs_f64(),
        jobs_sent: t.sent.load(Ordering::Relaxed),
        jobs_completed: t.completed.load(Ordering::Relaxed),
        jobs_failed: t.failed.load(Ordering::Relaxed),
        proofs_completed: t.proofs.load(Ordering::Relaxed),
        jobs_in_flight: t.in_flight.load(Ordering::Relaxed),
        jobs_shed: t.shed.load(Ordering::Relaxed),
        daemon,
        gpus: s.nvml.as_ref().map(GpuSampler::sample).unwrap_or_default(),
    }
}

fn progress_bar(duration: Duration) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(duration.as_secs());
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30.cyan/blue}] {pos}/{len} s  {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar
}

fn progress_message(s: &Sample) -> String {
    let rate = if s.t_s > 0.0 { s.proofs_completed as f64 / s.t_s } else { 0.0 };
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let mem = s.daemon.as_ref().map_or("status n/a".into(), |d| {
        format!("RSS {} / budget {:.1} GiB", d.rss.map_or("n/a".into(), |r| format!("{:.2}", gib(r))), gib(d.budget_total))
    });
    let gpu = s.gpu_busy_mean().map_or(String::new(), |b| format!(" | GPU {b:.0} %"));
    format!("{} proofs ({} jobs, {} failed) | {rate:.2} proofs/s | {mem}{gpu}", s.proofs_completed, s.jobs_completed, s.jobs_failed)
}

/// The steady-state figures from jobs answered and samples taken in `[from, to]`.
fn steady(ok: &[&JobRecord], samples: &[Sample], names: &[String], from: f64, to: f64, gpus: usize) -> Steady {
    let inside: Vec<&&JobRecord> = ok.iter().filter(|r| (from..=to).contains(&r.answered_s)).collect();
    let span = (to - from).max(1e-9);
    let proofs: u64 = inside.iter().map(|r| r.partitions as u64).sum();
    let mut latency = BTreeMap::new();
    let mut daemon_median_ms = BTreeMap::new();
    for (i, name) in names.iter().enumerate() {
        let mine: Vec<&&&JobRecord> = inside.iter().filter(|r| r.spec == i).collect();
        let med = |f: fn(&JobRecord) -> u64| analysis::percentile(&mine.iter().map(|r| f(r) as f64).collect::<Vec<_>>(), 50.0).unwrap_or(0.0);
        if let Some(l) = Latency::of(&mine.iter().map(|r| r.latency_ms()).collect::<Vec<_>>()) {
            latency.insert(name.clone(), l);
            daemon_median_ms.insert(name.clone(), DaemonTimes {
                queue_wait: med(|r| r.queue_wait_ms),
                synthesis: med(|r| r.synthesis_ms),
                gpu_compute: med(|r| r.gpu_compute_ms),
                total: med(|r| r.total_ms),
            });
        }
    }
    let over = |f: &dyn Fn(&Sample) -> Option<f64>| analysis::mean_over(samples.iter().map(|s| (s.t_s, f(s))), from, to);
    let in_window = || samples.iter().filter(|s| (from..=to).contains(&s.t_s));
    Steady {
        from_s: from,
        to_s: to,
        jobs: inside.len(),
        proofs,
        proofs_per_s: proofs as f64 / span,
        jobs_per_s: inside.len() as f64 / span,
        latency,
        daemon_median_ms,
        gpu_busy_pct: over(&|s| s.gpu_busy_mean()),
        gpu_busy_pct_per_gpu: (0..gpus)
            .filter_map(|i| over(&|s| s.gpus.iter().find(|g| g.index as usize == i).map(|g| g.busy_percent as f64)))
            .collect(),
        prover_workers_busy_pct: over(&|s| {
            s.daemon.as_ref().filter(|d| d.prover_workers > 0).map(|d| 100.0 * d.prover_workers_busy as f64 / d.prover_workers as f64)
        }),
        vram_used_peak_bytes: in_window().flat_map(|s| s.gpus.iter().map(|g| g.mem_used)).max(),
        vram_total_bytes: samples.last().filter(|s| !s.gpus.is_empty()).map(|s| s.gpus.iter().map(|g| g.mem_total).sum()),
    }
}

fn print_summary(s: &Summary, out: &Path) {
    let st = &s.steady;
    eprintln!("\nsoak: warm-up {}", s.warmup.how);
    eprintln!(
        "soak: steady state {:.0}..{:.0} s: {} proofs, {:.3} proofs/s; GPU busy {}; prover workers in prove_start {}",
        st.from_s,
        st.to_s,
        st.proofs,
        st.proofs_per_s,
        st.gpu_busy_pct.map_or("n/a".into(), |v| format!("{v:.1} %")),
        st.prover_workers_busy_pct.map_or("n/a".into(), |v| format!("{v:.1} %"))
    );
    for (name, l) in &st.latency {
        eprintln!("soak:   {name}: {} jobs, latency p50 {:.0} ms, p90 {:.0} ms, p99 {:.0} ms, max {:.0} ms", l.jobs, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms);
    }
    for c in &s.checks {
        eprintln!("soak: [{}] {}: {}", if c.pass { "pass" } else { "FAIL" }, c.name, c.detail);
    }
    eprintln!("soak: report in {}", out.join("index.md").display());
}
