//! One row per second: the clients' counters, the daemon's `/status`
//! (budget, buffer counters by stage, queues, workers, its own RSS), and
//! NVML's view of the GPUs; written as `samples.csv`.

use kiln_gpu::nvml::GpuSample;
use kiln_pipeline::Stage;
use serde_json::Value;

/// What the daemon's `/status` says, reduced to the figures the soak tracks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DaemonSample {
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    pub partitions_proved: u64,
    /// RSS now and its high-water mark, when the daemon reports them (or the
    /// soak can read them from /proc for a daemon it started).
    pub rss: Option<u64>,
    pub rss_peak: Option<u64>,
    pub budget_total: u64,
    pub budget_reserved: u64,
    pub budget_waiting: u64,
    pub pool_in_use: u64,
    pub pool_total: u64,
    /// (partitions, bytes) per stage, in [`Stage::ALL`] order.
    pub stages: [(u64, u64); 6],
    pub partitions_pending: u64,
    pub partitions_in_progress: u64,
    pub synthesis_busy: u64,
    pub prover_workers: u64,
    pub prover_workers_busy: u64,
    pub jobs_in_flight: u64,
    pub budget_waiters_and_pool_idle: bool,
}

impl DaemonSample {
    /// Reads a `/status` document; fields it lacks read as zero / absent.
    pub fn from_status(doc: &Value) -> Self {
        let e = &doc["engine"];
        let u = |v: &Value| v.as_u64().unwrap_or(0);
        let mut stages = [(0, 0); 6];
        for (slot, stage) in stages.iter_mut().zip(Stage::ALL) {
            if let Some(s) = e["buffers"]["stages"].as_array().and_then(|a| a.iter().find(|s| s["stage"] == stage.name())) {
                *slot = (u(&s["count"]), u(&s["bytes"]));
            }
        }
        let queues = e["queues"].as_array().map(Vec::as_slice).unwrap_or_default();
        let gpu_workers = e["workers"]["gpu_workers"].as_array().map(Vec::as_slice).unwrap_or_default();
        Self {
            jobs_completed: u(&e["jobs"]["completed"]),
            jobs_failed: u(&e["jobs"]["failed"]),
            partitions_proved: u(&e["jobs"]["partitions_proved"]),
            rss: doc["process"]["rss_bytes"].as_u64(),
            rss_peak: doc["process"]["rss_peak_bytes"].as_u64(),
            budget_total: u(&e["budget"]["total"]),
            budget_reserved: u(&e["budget"]["reserved"]),
            budget_waiting: u(&e["budget"]["waiting_reservations"]),
            pool_in_use: u(&e["pinned_pool"]["pinned_in_use_bytes"]),
            pool_total: u(&e["pinned_pool"]["pinned_total_bytes"]),
            stages,
            partitions_pending: queues.iter().map(|q| u(&q["pending_partitions"])).sum(),
            partitions_in_progress: queues.iter().map(|q| u(&q["in_progress_partitions"])).sum(),
            synthesis_busy: u(&e["workers"]["synthesis_busy"]),
            prover_workers: gpu_workers.len() as u64,
            prover_workers_busy: gpu_workers.iter().filter(|g| !g["current_job_id"].is_null()).count() as u64,
            jobs_in_flight: u(&e["jobs"]["in_flight"]),
            budget_waiters_and_pool_idle: u(&e["budget"]["waiting_reservations"]) == 0
                && u(&e["pinned_pool"]["pinned_in_use_bytes"]) == 0,
        }
    }

    /// What keeps the daemon from being idle, in words (for the report).
    pub fn busy_summary(&self) -> String {
        let stages: Vec<String> = Stage::ALL
            .iter()
            .zip(self.stages)
            .filter(|(_, (c, b))| *c != 0 || *b != 0)
            .map(|(s, (c, b))| format!("{} {c} ({b} bytes)", s.name()))
            .collect();
        format!(
            "{} jobs in flight, {} partitions pending, {} in progress; stages: {}; pool bytes out {}, budget waiters {}",
            self.jobs_in_flight,
            self.partitions_pending,
            self.partitions_in_progress,
            if stages.is_empty() { "all zero".to_string() } else { stages.join(", ") },
            self.pool_in_use,
            self.budget_waiting
        )
    }

    /// No job in flight, nothing queued, every buffer counter at zero, no
    /// pool buffer checked out, nobody waiting for memory.
    pub fn idle(&self) -> bool {
        self.jobs_in_flight == 0
            && self.partitions_pending == 0
            && self.partitions_in_progress == 0
            && self.stages.iter().all(|&(c, b)| c == 0 && b == 0)
            && self.budget_waiters_and_pool_idle
    }
}

/// One row of `samples.csv`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// Seconds since the run started.
    pub t_s: f64,
    pub jobs_sent: u64,
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    /// Partitions in the jobs completed so far (the throughput unit).
    pub proofs_completed: u64,
    pub jobs_in_flight: u64,
    pub jobs_shed: u64,
    /// `None` when `/status` did not answer this second.
    pub daemon: Option<DaemonSample>,
    /// One per device NVML sees; empty without NVML.
    pub gpus: Vec<GpuSample>,
}

impl Sample {
    /// Mean busy % over the GPUs, `None` without any.
    pub fn gpu_busy_mean(&self) -> Option<f64> {
        (!self.gpus.is_empty()).then(|| self.gpus.iter().map(|g| g.busy_percent as f64).sum::<f64>() / self.gpus.len() as f64)
    }
}

/// The CSV header for `gpus` devices.
pub fn csv_header(gpus: usize) -> String {
    let mut cols: Vec<String> = [
        "t_s", "jobs_sent", "jobs_completed", "jobs_failed", "proofs_completed", "jobs_in_flight", "jobs_shed",
        "daemon_jobs_completed", "daemon_jobs_failed", "daemon_partitions_proved", "rss_bytes", "rss_peak_bytes",
        "budget_total_bytes", "budget_reserved_bytes", "budget_waiting_reservations", "pool_in_use_bytes",
        "pool_total_bytes", "partitions_pending", "partitions_in_progress", "synthesis_busy", "prover_workers",
        "prover_workers_busy",
    ]
    .map(String::from)
    .to_vec();
    cols.extend(Stage::ALL.iter().map(|s| format!("buffers_{}", s.name())));
    cols.extend(Stage::ALL.iter().map(|s| format!("buffer_bytes_{}", s.name())));
    cols.push("gpu_busy_mean_pct".into());
    for i in 0..gpus {
        cols.extend([format!("gpu{i}_busy_pct"), format!("gpu{i}_mem_used_bytes"), format!("gpu{i}_mem_total_bytes")]);
    }
    cols.join(",")
}

/// One CSV line (no newline) with `gpus` device column groups; absent
/// values are empty cells, never zeros.
pub fn csv_row(s: &Sample, gpus: usize) -> String {
    let mut cells: Vec<String> = [s.jobs_sent, s.jobs_completed, s.jobs_failed, s.proofs_completed, s.jobs_in_flight, s.jobs_shed]
        .iter()
        .map(u64::to_string)
        .collect();
    cells.insert(0, format!("{:.3}", s.t_s));
    let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
    match &s.daemon {
        Some(d) => {
            cells.extend([d.jobs_completed, d.jobs_failed, d.partitions_proved].map(|v| v.to_string()));
            cells.extend([opt(d.rss), opt(d.rss_peak)]);
            cells.extend(
                [
                    d.budget_total,
                    d.budget_reserved,
                    d.budget_waiting,
                    d.pool_in_use,
                    d.pool_total,
                    d.partitions_pending,
                    d.partitions_in_progress,
                    d.synthesis_busy,
                    d.prover_workers,
                    d.prover_workers_busy,
                ]
                .map(|v| v.to_string()),
            );
            cells.extend(d.stages.iter().map(|(c, _)| c.to_string()));
            cells.extend(d.stages.iter().map(|(_, b)| b.to_string()));
        }
        // 15 daemon figures and 12 stage columns, all unknown this second.
        None => cells.extend(std::iter::repeat_n(String::new(), 15 + 12)),
    }
    cells.push(s.gpu_busy_mean().map(|v| format!("{v:.1}")).unwrap_or_default());
    for i in 0..gpus {
        match s.gpus.iter().find(|g| g.index as usize == i) {
            Some(g) => cells.extend([g.busy_percent as u64, g.mem_used, g.mem_total].map(|v| v.to_string())),
            None => cells.extend(std::iter::repeat_n(String::new(), 3)),
        }
    }
    cells.join(",")
}

/// Reads `samples.csv` back (the inverse of [`csv_header`] + [`csv_row`]),
/// so a kept report can be re-plotted.
pub fn parse_csv(text: &str) -> anyhow::Result<Vec<Sample>> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or_else(|| anyhow::anyhow!("samples.csv is empty"))?.split(',').collect();
    let gpus = header.iter().filter(|h| h.ends_with("_busy_pct") && h.starts_with("gpu") && **h != "gpu_busy_mean_pct").count();
    anyhow::ensure!(header.join(",") == csv_header(gpus), "samples.csv: unexpected header (written by another version?)");
    let mut out = Vec::new();
    for (n, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').collect();
        anyhow::ensure!(cells.len() == header.len(), "samples.csv line {}: {} cells, header has {}", n + 2, cells.len(), header.len());
        let bad = |i: usize| anyhow::anyhow!("samples.csv line {}: column {} = {:?}", n + 2, header[i], cells[i]);
        let num = |i: usize| cells[i].parse::<u64>().map_err(|_| bad(i));
        let opt = |i: usize| if cells[i].is_empty() { Ok(None) } else { num(i).map(Some) };
        let mut sample = Sample {
            t_s: cells[0].parse().map_err(|_| bad(0))?,
            jobs_sent: num(1)?,
            jobs_completed: num(2)?,
            jobs_failed: num(3)?,
            proofs_completed: num(4)?,
            jobs_in_flight: num(5)?,
            jobs_shed: num(6)?,
            daemon: None,
            gpus: Vec::new(),
        };
        if !cells[7].is_empty() {
            let mut stages = [(0, 0); 6];
            for (k, slot) in stages.iter_mut().enumerate() {
                *slot = (num(22 + k)?, num(28 + k)?);
            }
            let (budget_waiting, pool_in_use) = (num(14)?, num(15)?);
            sample.daemon = Some(DaemonSample {
                jobs_completed: num(7)?,
                jobs_failed: num(8)?,
                partitions_proved: num(9)?,
                rss: opt(10)?,
                rss_peak: opt(11)?,
                budget_total: num(12)?,
                budget_reserved: num(13)?,
                budget_waiting,
                pool_in_use,
                pool_total: num(16)?,
                stages,
                partitions_pending: num(17)?,
                partitions_in_progress: num(18)?,
                synthesis_busy: num(19)?,
                prover_workers: num(20)?,
                prover_workers_busy: num(21)?,
                // Not a column: in flight is only known from the clients' side.
                jobs_in_flight: 0,
                budget_waiters_and_pool_idle: budget_waiting == 0 && pool_in_use == 0,
            });
        }
        for g in 0..gpus {
            let i = 35 + 3 * g;
            if let (Some(busy), Some(mem_used), Some(mem_total)) = (opt(i)?, opt(i + 1)?, opt(i + 2)?) {
                sample.gpus.push(GpuSample { index: g as u32, busy_percent: busy as u32, mem_used, mem_total, temperature_celsius: None, power_milliwatts: None });
            }
        }
        out.push(sample);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_read_back() {
        let d = DaemonSample::from_status(&serde_json::from_str(STATUS).unwrap());
        let full = Sample { t_s: 1.5, jobs_sent: 9, jobs_completed: 4, jobs_failed: 1, proofs_completed: 12, jobs_in_flight: 3, jobs_shed: 0, daemon: Some(d.clone()), gpus: vec![GpuSample { index: 0, busy_percent: 97, mem_used: 5, mem_total: 10, temperature_celsius: None, power_milliwatts: None }] };
        let bare = Sample { t_s: 2.5, daemon: None, gpus: vec![], ..full.clone() };
        let text = [csv_header(1), csv_row(&full, 1), csv_row(&bare, 1)].join("\n");
        let back = parse_csv(&text).unwrap();
        let mut expect = full.clone();
        expect.daemon.as_mut().unwrap().jobs_in_flight = 0;
        assert_eq!(back, vec![expect, bare]);
        assert!(parse_csv(&text.replacen("t_s", "time", 1)).is_err());
        assert!(parse_csv(&format!("{text}\n1,2")).is_err());
    }

    const STATUS: &str = r#"{
      "version": "0.1.0", "listen": "unix:/x",
      "process": {"pid": 7, "rss_bytes": 1000, "rss_peak_bytes": 2000},
      "engine": {
        "budget": {"total": 4096, "reserved": 1024, "waiting_reservations": 1, "peak_reserved": 2048},
        "pinned_pool": {"pinned_in_use_bytes": 512, "pinned_total_bytes": 1024},
        "buffers": {"stages": [
          {"stage": "synthesizing", "count": 2, "bytes": 20},
          {"stage": "synthesized_waiting", "count": 0, "bytes": 0},
          {"stage": "in_gpu_queue", "count": 1, "bytes": 10},
          {"stage": "on_gpu", "count": 1, "bytes": 5},
          {"stage": "finalizing", "count": 0, "bytes": 0},
          {"stage": "freeing", "count": 0, "bytes": 0}]},
        "queues": [{"kind_label": "a", "pending_partitions": 3, "in_progress_partitions": 2},
                   {"kind_label": "b", "pending_partitions": 1, "in_progress_partitions": 2}],
        "workers": {"synthesis_busy": 2, "gpu_workers": [{"current_job_id": "j"}, {"current_job_id": null}]},
        "jobs": {"completed": 5, "failed": 1, "partitions_proved": 9, "in_flight": 4}
      }}"#;

    #[test]
    fn status_documents_are_read() {
        let d = DaemonSample::from_status(&serde_json::from_str(STATUS).unwrap());
        assert_eq!((d.jobs_completed, d.jobs_failed, d.partitions_proved), (5, 1, 9));
        assert_eq!((d.rss, d.rss_peak), (Some(1000), Some(2000)));
        assert_eq!(d.stages, [(2, 20), (0, 0), (1, 10), (1, 5), (0, 0), (0, 0)]);
        assert_eq!((d.partitions_pending, d.partitions_in_progress), (4, 4));
        assert_eq!((d.prover_workers, d.prover_workers_busy, d.synthesis_busy), (2, 1, 2));
        assert!(!d.idle());
        assert_eq!(
            d.busy_summary(),
            "4 jobs in flight, 4 partitions pending, 4 in progress; stages: synthesizing 2 (20 bytes), in_gpu_queue 1 (10 bytes), \
             on_gpu 1 (5 bytes); pool bytes out 512, budget waiters 1"
        );
        let idle = DaemonSample { budget_waiters_and_pool_idle: true, ..Default::default() };
        assert!(idle.idle());
        // A daemon without the `process` section (older builds).
        let old = DaemonSample::from_status(&serde_json::from_str(&STATUS.replace("\"process\"", "\"other\"")).unwrap());
        assert_eq!(old.rss, None);
    }

    #[test]
    fn rows_have_as_many_cells_as_the_header() {
        let d = DaemonSample::from_status(&serde_json::from_str(STATUS).unwrap());
        let gpu = GpuSample { index: 1, busy_percent: 80, mem_used: 5, mem_total: 10, temperature_celsius: None, power_milliwatts: None };
        for (daemon, gpus) in [(Some(d), vec![gpu.clone()]), (None, vec![]), (None, vec![gpu])] {
            let s = Sample { t_s: 1.5, jobs_completed: 3, daemon, gpus, ..Default::default() };
            let header = csv_header(2);
            let row = csv_row(&s, 2);
            assert_eq!(row.split(',').count(), header.split(',').count(), "{header}\n{row}");
            let cell = |name: &str| row.split(',').nth(header.split(',').position(|h| h == name).unwrap()).unwrap().to_string();
            assert_eq!(cell("jobs_completed"), "3");
            if s.daemon.is_some() {
                assert_eq!((cell("buffers_synthesizing"), cell("buffer_bytes_on_gpu"), cell("rss_bytes")), ("2".into(), "5".into(), "1000".into()));
            } else {
                assert_eq!(cell("rss_bytes"), "", "absent is empty, not zero");
            }
            assert_eq!((cell("gpu0_busy_pct"), cell("gpu1_busy_pct")), (String::new(), if s.gpus.is_empty() { String::new() } else { "80".into() }));
        }
    }
}
