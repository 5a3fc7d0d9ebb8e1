//! One mode's run: an engine with the mode's settings; critical jobs one at
//! a time on it idle, then a bulk load that keeps every worker busy (alone
//! for a while, to measure its throughput), then critical jobs one at a
//! time again under that load.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kiln_groth16::ProverBackend;
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, JobSource, Priority};

use crate::cpu::process_cpu_time;
use crate::report::{CriticalReport, ModeReport};
use kiln_soak::stats::{percentile, Latency};

/// A job to submit again and again.
#[derive(Clone)]
pub struct Workload {
    pub label: String,
    pub source: Arc<dyn JobSource>,
}

/// How long and how often.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Critical jobs per kind and phase, at least (the loaded phase goes on
    /// until it has lasted `bulk_window`).
    pub samples: usize,
    /// Pause between two critical jobs, so each meets the load at another
    /// point of its cycle.
    pub gap: Duration,
    /// Bulk jobs kept in flight.
    pub bulk_in_flight: usize,
    /// Time the bulk load runs before anything is measured.
    pub settle: Duration,
    /// Time the bulk load runs alone, measured.
    pub bulk_window: Duration,
}

/// One critical job's figures (ms).
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub total: f64,
    pub synthesis: f64,
    pub prover: f64,
}

/// Submits `w` at `priority` and waits for its answer.
fn prove(engine: &Engine, w: &Workload, id: String, priority: Priority) -> Result<Sample> {
    let t = Instant::now();
    engine.submit(JobRequest::new(id.clone(), priority, w.source.clone()))?;
    match engine.wait_blocking(&id, None) {
        JobOutcome::Completed { timings, .. } => Ok(Sample {
            total: t.elapsed().as_secs_f64() * 1e3,
            synthesis: timings.synthesis.as_secs_f64() * 1e3,
            prover: timings.gpu_compute.as_secs_f64() * 1e3,
        }),
        other => bail!("{id} ended {}: {other:?}", other.name()),
    }
}

/// Bulk jobs kept in flight by a thread until stopped (then cancelled).
struct BulkLoad {
    stop: Arc<AtomicBool>,
    handle: thread::JoinHandle<Result<()>>,
}

impl BulkLoad {
    fn start(engine: &Engine, bulk: &[Workload], in_flight: usize, mode: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (engine, bulk, mode, s) = (engine.clone(), bulk.to_vec(), mode.to_string(), stop.clone());
        let handle = thread::spawn(move || -> Result<()> {
            let mut running: Vec<String> = Vec::new();
            let mut next = 0usize;
            while !s.load(Ordering::Relaxed) {
                for id in std::mem::take(&mut running) {
                    match engine.poll(&id) {
                        JobOutcome::Completed { .. } => {}
                        JobOutcome::Timeout => running.push(id),
                        other => bail!("bulk job {id} ended {}: {other:?}", other.name()),
                    }
                }
                while running.len() < in_flight {
                    let w = &bulk[next % bulk.len()];
                    let id = format!("{mode}-bulk-{}-{next}", w.label);
                    engine.submit(JobRequest::new(id.clone(), Priority::Normal, w.source.clone()))?;
                    running.push(id);
                    next += 1;
                }
                thread::sleep(Duration::from_millis(10));
            }
            for id in &running {
                engine.cancel(id);
            }
            Ok(())
        });
        BulkLoad { stop, handle }
    }

    fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().map_err(|_| anyhow::anyhow!("the bulk load thread panicked"))?
    }
}

fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0).unwrap_or(f64::NAN)
}

/// Partitions proved so far (bulk and critical).
fn proved(engine: &Engine) -> u64 {
    engine.status().jobs.partitions_proved
}

/// An engine configuration to measure.
pub struct Mode {
    pub name: String,
    /// The settings that make it differ from the engine's defaults, for the report.
    pub settings: String,
    pub config: EngineConfig,
}

/// Runs one mode; `log` gets a line per critical job.
pub fn run_mode(
    m: Mode,
    backends: &[Arc<dyn ProverBackend>],
    (critical, bulk): (&[Workload], &[Workload]),
    plan: Plan,
    log: &mut dyn FnMut(&str, &str, &str, usize, Sample),
) -> Result<ModeReport> {
    let mode = m.name.as_str();
    let engine = Engine::start(m.config, backends.to_vec()).context("starting kiln's engine")?;
    // Warm-up (not counted): parameters generated or loaded and made hot,
    // circuits compiled, parameters uploaded to the GPU, for every kind.
    for w in critical.iter().chain(bulk) {
        let priority = if critical.iter().any(|c| c.label == w.label) { Priority::Critical } else { Priority::Normal };
        let s = prove(&engine, w, format!("{mode}-warmup-{}", w.label), priority)?;
        eprintln!("bench-latency: {mode}: warm-up {}: {:.1} ms", w.label, s.total);
    }
    // `plan.samples` critical jobs of each kind, one kind after another,
    // then one of each kind in turn until `at_least` has passed: the loaded
    // phase lasts as long as the bulk-alone window, so the bulk rate beside
    // the critical jobs counts as many bulk partitions as the rate alone.
    let phase = |name: &str, engine: &Engine, log: &mut dyn FnMut(&str, &str, &str, usize, Sample), at_least: Duration| -> Result<Vec<Vec<Sample>>> {
        let t = Instant::now();
        let mut all: Vec<Vec<Sample>> = vec![Vec::new(); critical.len()];
        let mut one = |k: usize, all: &mut Vec<Vec<Sample>>| -> Result<()> {
            let (w, i) = (&critical[k], all[k].len());
            let s = prove(engine, w, format!("{mode}-{name}-{}-{i}", w.label), Priority::Critical)?;
            log(mode, name, &w.label, i, s);
            all[k].push(s);
            thread::sleep(plan.gap);
            Ok(())
        };
        for k in 0..critical.len() {
            for _ in 0..plan.samples {
                one(k, &mut all)?;
            }
        }
        while t.elapsed() < at_least {
            for k in 0..critical.len() {
                one(k, &mut all)?;
            }
        }
        Ok(all)
    };
    let unloaded = phase("unloaded", &engine, log, Duration::ZERO)?;

    let (start, load) = (proved(&engine), BulkLoad::start(&engine, bulk, plan.bulk_in_flight, mode));
    thread::sleep(plan.settle);
    // And until two bulk partitions are out: at 32 GiB the first ones place
    // the circuit's matrices and run slow for a while, longer than a settle
    // time that suits small sectors.
    let filled = Instant::now();
    while proved(&engine) < start + 2 && filled.elapsed() < Duration::from_secs(600) {
        thread::sleep(Duration::from_millis(50));
    }
    let (p0, t0, c0) = (proved(&engine), Instant::now(), process_cpu_time());
    thread::sleep(plan.bulk_window);
    let bulk_partitions = (proved(&engine) - p0) as f64;
    let bulk_alone_per_s = bulk_partitions / t0.elapsed().as_secs_f64();
    let bulk_per_cpu_s = bulk_partitions / (process_cpu_time() - c0).as_secs_f64().max(1e-9);
    let (p0, t0) = (proved(&engine), Instant::now());
    let loaded = phase("loaded", &engine, log, plan.bulk_window);
    let elapsed = t0.elapsed().as_secs_f64();
    let proved_beside = proved(&engine) - p0;
    load.stop()?;
    let loaded = loaded?;
    let critical_partitions: u64 = critical.iter().zip(&loaded).map(|(w, l)| (w.source.num_partitions() * l.len()) as u64).sum();
    let bulk_with_critical_per_s = proved_beside.saturating_sub(critical_partitions) as f64 / elapsed;
    let status = engine.status();
    eprintln!(
        "bench-latency: {mode}: critical reserve {:.0} MiB, largest critical need {:.0} MiB, critical prover workers {}, bulk threads {} at nice +{}, critical threads {}",
        status.lanes.critical_reserve_bytes as f64 / (1u64 << 20) as f64,
        status.lanes.largest_critical_need_bytes as f64 / (1u64 << 20) as f64,
        status.lanes.critical_prover_workers,
        status.lanes.bulk_threads,
        status.lanes.bulk_nice,
        status.lanes.critical_threads,
    );
    engine.shutdown_blocking(Duration::from_secs(30));

    let figures = |v: &[Sample], f: fn(&Sample) -> f64| v.iter().map(f).collect::<Vec<f64>>();
    let reports = critical
        .iter()
        .zip(unloaded.iter().zip(&loaded))
        .map(|(w, (u, l))| CriticalReport {
            kind: w.label.clone(),
            unloaded: Latency::of(&figures(u, |s| s.total)).expect("samples >= 1"),
            loaded: Latency::of(&figures(l, |s| s.total)).expect("samples >= 1"),
            unloaded_synthesis_ms: median(&figures(u, |s| s.synthesis)),
            loaded_synthesis_ms: median(&figures(l, |s| s.synthesis)),
            unloaded_prover_ms: median(&figures(u, |s| s.prover)),
            loaded_prover_ms: median(&figures(l, |s| s.prover)),
        })
        .collect();
    Ok(ModeReport { mode: m.name, settings: m.settings, critical: reports, bulk_alone_per_s, bulk_per_cpu_s, bulk_with_critical_per_s })
}
