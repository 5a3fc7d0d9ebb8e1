//! The report directory: `summary.json` (every figure, for machines),
//! `index.md` (the same for people, with the plots), `jobs.csv` (one line
//! per job as the client saw it). `samples.csv` is written as the run goes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::analysis::{Check, Latency, Warmup};
use super::load::JobRecord;

/// Everything the report says about one run.
#[derive(Serialize)]
pub struct Summary {
    pub started_utc: String,
    /// How the soak was invoked.
    pub command: String,
    /// "started <binary>" or "connected to <target>", with its backends and GPUs.
    pub daemon: String,
    /// Parameter sets loaded before the clock started (PreloadSRS), and how long each took.
    pub preload: Vec<String>,
    pub workload_file: String,
    pub workload_toml: String,
    pub load: String,
    pub duration_s: f64,
    pub warmup: Warmup,
    pub window_s: f64,
    pub steady: Steady,
    pub totals: Totals,
    pub memory: Memory,
    pub checks: Vec<Check>,
    pub passed: bool,
}

/// Figures over the steady-state window only.
#[derive(Serialize)]
pub struct Steady {
    pub from_s: f64,
    pub to_s: f64,
    pub jobs: usize,
    pub proofs: u64,
    pub proofs_per_s: f64,
    pub jobs_per_s: f64,
    /// Client-side latency (request to answer) by workload entry.
    pub latency: BTreeMap<String, Latency>,
    /// The daemon's own split of the same jobs, medians in ms.
    pub daemon_median_ms: BTreeMap<String, DaemonTimes>,
    /// Mean NVML busy % over every GPU and sample; `None` without NVML.
    pub gpu_busy_pct: Option<f64>,
    pub gpu_busy_pct_per_gpu: Vec<f64>,
    /// Mean share of the daemon's prover workers inside `prove_start`
    /// (`/status` names the job then). With the CPU backend that is the
    /// whole proof; with the GPU backend only the copy to the device and
    /// the launch, the kernels run after it returns, so NVML's busy % is the
    /// GPU figure there.
    pub prover_workers_busy_pct: Option<f64>,
    pub vram_used_peak_bytes: Option<u64>,
    pub vram_total_bytes: Option<u64>,
}

#[derive(Serialize)]
pub struct DaemonTimes {
    pub queue_wait: f64,
    pub synthesis: f64,
    pub gpu_compute: f64,
    pub total: f64,
}

/// Whole-run totals, warm-up and drain included.
#[derive(Serialize)]
pub struct Totals {
    pub jobs_sent: u64,
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    pub jobs_unanswered: usize,
    pub jobs_shed: u64,
    pub proofs_completed: u64,
    /// Proofs the soak verified itself (bellperson's verifier; filecoin-proofs' for Filecoin jobs).
    pub proofs_verified_here: u64,
    /// Proofs it could not check (no parameter file here); the daemon
    /// verifies every proof before answering either way.
    pub proofs_not_checked_here: u64,
    /// The first failures, `request_id: error`.
    pub failures: Vec<String>,
}

#[derive(Serialize)]
pub struct Memory {
    pub budget_bytes: u64,
    pub peak_rss_bytes: Option<u64>,
    pub peak_reserved_bytes: u64,
}

impl Totals {
    pub fn of(records: &[JobRecord], sent: u64, unanswered: usize, shed: u64) -> Self {
        let ok: Vec<_> = records.iter().filter(|r| r.ok()).collect();
        let proofs = |f: &dyn Fn(&&JobRecord) -> bool| ok.iter().filter(|r| f(r)).map(|r| r.partitions as u64).sum();
        Self {
            jobs_sent: sent,
            jobs_completed: ok.len() as u64,
            jobs_failed: records.iter().filter(|r| !r.ok()).count() as u64,
            jobs_unanswered: unanswered,
            jobs_shed: shed,
            proofs_completed: proofs(&|_| true),
            proofs_verified_here: proofs(&|r| r.verified == Some(true)),
            proofs_not_checked_here: proofs(&|r| r.verified.is_none()),
            failures: records
                .iter()
                .filter(|r| !r.ok())
                .take(20)
                .map(|r| format!("{}: {}", r.request_id, r.error.as_deref().unwrap_or("?")))
                .collect(),
        }
    }
}

/// `jobs.csv`: one line per answered job.
pub fn write_jobs_csv(path: &Path, records: &[JobRecord], names: &[String]) -> Result<()> {
    let mut out = String::from(
        "request_id,job,partitions,sent_s,answered_s,latency_ms,ok,verified_here,queue_wait_ms,synthesis_ms,gpu_compute_ms,total_ms,error\n",
    );
    for r in records {
        let verified = r.verified.map_or("", |v| if v { "true" } else { "false" });
        let error = r.error.as_deref().unwrap_or("").replace([',', '\n', '"'], " ");
        let _ = writeln!(
            out,
            "{},{},{},{:.3},{:.3},{:.1},{},{verified},{},{},{},{},{error}",
            r.request_id,
            names[r.spec],
            r.partitions,
            r.sent_s,
            r.answered_s,
            r.latency_ms(),
            r.ok(),
            r.queue_wait_ms,
            r.synthesis_ms,
            r.gpu_compute_ms,
            r.total_ms
        );
    }
    std::fs::write(path, out)?;
    Ok(())
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.1} %"))
}

/// `index.md`: the summary for people, with the plots.
pub fn index_md(s: &Summary, plots: &[&str]) -> String {
    let mut o = String::new();
    let verdict = if s.passed { "PASSED" } else { "FAILED" };
    let _ = writeln!(o, "# kiln soak: {verdict}\n");
    let _ = writeln!(o, "- started: {} (UTC); duration {:.0} s", s.started_utc, s.duration_s);
    let _ = writeln!(o, "- command: `{}`", s.command);
    let _ = writeln!(o, "- daemon: {}", s.daemon);
    let _ = writeln!(o, "- workload: `{}`, {}", s.workload_file, s.load);
    if !s.preload.is_empty() {
        let _ = writeln!(o, "- before the clock: PreloadSRS {}", s.preload.join("; "));
    }
    let _ = writeln!(o, "- warm-up: {}", s.warmup.how);
    let _ = writeln!(o, "\n## Checks\n\n| check | result | detail |\n| --- | --- | --- |");
    for c in &s.checks {
        let _ = writeln!(o, "| {} | {} | {} |", c.name, if c.pass { "pass" } else { "**FAIL**" }, c.detail);
    }
    let st = &s.steady;
    let _ = writeln!(o, "\n## Steady state ({:.0} s to {:.0} s)\n\n| figure | value |\n| --- | --- |", st.from_s, st.to_s);
    let _ = writeln!(o, "| proofs completed | {} (in {} jobs) |", st.proofs, st.jobs);
    let _ = writeln!(o, "| throughput | {:.3} proofs/s ({:.1} proofs/min), {:.3} jobs/s |", st.proofs_per_s, st.proofs_per_s * 60.0, st.jobs_per_s);
    let per_gpu = st.gpu_busy_pct_per_gpu.iter().map(|v| format!("{v:.1}")).collect::<Vec<_>>().join(" / ");
    let _ = writeln!(o, "| GPU busy (NVML, mean) | {}{} |", pct(st.gpu_busy_pct), if per_gpu.is_empty() { String::new() } else { format!(" (per GPU: {per_gpu})") });
    let _ = writeln!(
        o,
        "| prover workers in prove_start (daemon, mean; the whole proof on the CPU backend, only the copy-in on the GPU) | {} |",
        pct(st.prover_workers_busy_pct)
    );
    if let (Some(u), Some(t)) = (st.vram_used_peak_bytes, st.vram_total_bytes) {
        let _ = writeln!(o, "| VRAM used, peak | {} of {} |", mib(u), mib(t));
    }
    let m = &s.memory;
    let _ = writeln!(
        o,
        "| daemon peak RSS (whole run) | {} of a {} budget (peak reserved {}) |",
        m.peak_rss_bytes.map_or("n/a".into(), mib),
        mib(m.budget_bytes),
        mib(m.peak_reserved_bytes)
    );
    let _ = writeln!(o, "\n### Latency per job kind (client side, request to answer, ms)\n");
    let _ = writeln!(o, "| job | jobs | p50 | p90 | p99 | max | mean | daemon: queue / synthesis / prover / total (medians) |");
    let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, l) in &st.latency {
        let d = st.daemon_median_ms.get(name).map_or(String::new(), |d| {
            format!("{:.0} / {:.0} / {:.0} / {:.0}", d.queue_wait, d.synthesis, d.gpu_compute, d.total)
        });
        let _ = writeln!(o, "| {name} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {d} |", l.jobs, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms, l.mean_ms);
    }
    let t = &s.totals;
    let _ = writeln!(o, "\n## Whole run (warm-up and drain included)\n");
    let _ = writeln!(
        o,
        "- jobs: {} sent, {} completed, {} failed, {} unanswered at the end, {} shed (open loop)",
        t.jobs_sent, t.jobs_completed, t.jobs_failed, t.jobs_unanswered, t.jobs_shed
    );
    let _ = writeln!(
        o,
        "- proofs: {} completed; {} verified again by the soak (bellperson; filecoin-proofs for Filecoin jobs), {} not checked here (no parameter file, or a daemon it did not start); \
         the daemon verifies every proof before answering",
        t.proofs_completed, t.proofs_verified_here, t.proofs_not_checked_here
    );
    for f in &t.failures {
        let _ = writeln!(o, "  - failure: {f}");
    }
    let _ = writeln!(o, "\n## Plots\n\nThe grey band is the discarded warm-up.\n");
    for p in plots {
        let _ = writeln!(o, "![{p}]({p})\n");
    }
    let _ = writeln!(
        o,
        "## Files\n\n- `samples.csv`: one row per second (client counters, the daemon's /status, NVML)\n\
         - `jobs.csv`: one row per job\n- `summary.json`: every figure above\n- `workload.toml`: the workload\n\
         - `daemon.log`: the daemon's log (when the soak started it)"
    );
    o
}

/// `YYYY-MM-DD HH:MM:SS` of a Unix time (UTC), without a date crate.
pub fn utc(unix_s: u64) -> String {
    let (days, rem) = (unix_s / 86_400, unix_s % 86_400);
    // Howard Hinnant's days-to-civil algorithm, for days since 1970-01-01.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(utc(1_798_761_599), "2026-12-31 23:59:59");
    }

    fn rec(ok: bool, verified: Option<bool>, partitions: u32) -> JobRecord {
        JobRecord {
            spec: 0,
            request_id: "r".into(),
            sent_s: 1.0,
            answered_s: 3.5,
            partitions,
            error: (!ok).then(|| "FAILED: boom, \"badly\"".to_string()),
            verified,
            queue_wait_ms: 1,
            synthesis_ms: 2,
            gpu_compute_ms: 3,
            total_ms: 4,
        }
    }

    #[test]
    fn totals_count_proofs_and_failures() {
        let r = [rec(true, Some(true), 2), rec(true, None, 3), rec(false, None, 1), rec(true, Some(false), 4)];
        let t = Totals::of(&r, 5, 1, 0);
        assert_eq!((t.jobs_completed, t.jobs_failed, t.proofs_completed), (2, 2, 5));
        assert_eq!((t.proofs_verified_here, t.proofs_not_checked_here), (2, 3));
        assert_eq!(t.failures.len(), 2);
    }

    #[test]
    fn jobs_csv_keeps_one_cell_per_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("jobs.csv");
        write_jobs_csv(&p, &[rec(false, None, 1), rec(true, Some(true), 2)], &["fc".into()]).unwrap();
        let text = std::fs::read_to_string(p).unwrap();
        let widths: Vec<_> = text.lines().map(|l| l.split(',').count()).collect();
        assert_eq!(widths, vec![13, 13, 13], "{text}");
        assert!(text.lines().nth(2).unwrap().contains(",2500.0,true,true,"), "{text}");
    }
}
