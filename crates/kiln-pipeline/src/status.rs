//! [`EngineStatus`] (JSON for `/status`) and its Prometheus rendering.

use std::fmt::Write;

use kiln_memory::{BudgetSnapshot, PoolSnapshot};
use kiln_synth::CircuitCacheStats;
use serde::Serialize;

use crate::counters::BufferCounters;
use crate::srs::SrsStatus;

/// Everything the engine can say about itself at one instant.
#[derive(Clone, Debug, Serialize)]
pub struct EngineStatus {
    pub uptime_secs: u64,
    /// The host memory budget (reserved bytes by class, waiters, peak).
    pub budget: BudgetSnapshot,
    /// The a/b/c/aux buffer pool.
    pub pinned_pool: PoolSnapshot,
    /// Partitions and bytes per pipeline stage.
    pub buffers: BufferCounters,
    /// Per job kind label: partitions waiting and in progress.
    pub queues: Vec<QueueStatus>,
    pub workers: WorkerStatus,
    /// Parameter sets the engine knows of.
    pub srs: Vec<SrsStatus>,
    /// Compiled circuits and how partitions were synthesized.
    pub circuits: CircuitCacheStats,
    pub jobs: JobTotals,
    /// What the critical lane holds apart from bulk work.
    pub lanes: LaneStatus,
}

/// The critical lane: the memory, threads and workers bulk work cannot take.
#[derive(Clone, Debug, Serialize)]
pub struct LaneStatus {
    /// Budget bytes bulk reservations leave free for critical partitions
    /// (`budget.priority_reserve`).
    pub critical_reserve_bytes: u64,
    /// Budget bytes critical partitions hold now (`budget.priority_reserved`).
    pub critical_reserved_bytes: u64,
    /// Critical reservations waiting for memory (`budget.priority_waiting`).
    pub critical_waiting: usize,
    /// The largest need (one partition and its parameters) of a critical job
    /// submitted so far: above `critical_reserve_bytes` it may wait for
    /// memory bulk jobs hold.
    pub largest_critical_need_bytes: u64,
    /// The critical lane's buffer pool.
    pub critical_pinned_pool: PoolSnapshot,
    /// Threads of the critical lane's rayon pool (0: it shares the bulk pool).
    pub critical_threads: usize,
    /// Threads of the bulk rayon pool, and the nice steps they run below normal.
    pub bulk_threads: usize,
    pub bulk_nice: i32,
    /// Prover workers that take only critical partitions (also listed in
    /// `workers.gpu_workers`, `critical_only`).
    pub critical_prover_workers: usize,
}

/// Work of one kind label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueStatus {
    pub kind_label: String,
    /// Jobs not finished whose partitions have not all started synthesis.
    pub pending_jobs: usize,
    /// Jobs with at least one partition started and not finished.
    pub in_progress_jobs: usize,
    /// Partitions waiting for a synthesis worker.
    pub pending_partitions: usize,
    /// Partitions between synthesis start and their proof.
    pub in_progress_partitions: usize,
}

/// The engine's threads.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerStatus {
    pub synthesis_workers: usize,
    /// Synthesis workers reserved for `Critical` partitions.
    pub critical_lane_workers: usize,
    /// Synthesis workers (both kinds) holding a partition (acquiring, synthesizing or
    /// waiting for the GPU queue).
    pub synthesis_busy: usize,
    pub gpu_queue_depth: usize,
    pub gpu_workers: Vec<GpuWorkerStatus>,
    pub finalizer_threads: usize,
}

/// One GPU worker (one per backend entry).
#[derive(Clone, Debug, Serialize)]
pub struct GpuWorkerStatus {
    pub index: usize,
    /// The backend's name ("cpu", "gpu:0").
    pub backend: String,
    /// The job whose partition it is proving now.
    pub current_job_id: Option<String>,
    pub current_kind_label: Option<String>,
    /// Partitions it has started.
    pub partitions_started: u64,
    /// It takes only critical partitions (the critical lane's prover worker).
    pub critical_only: bool,
}

/// Job totals since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobTotals {
    pub submitted: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Jobs not ended yet.
    pub in_flight: usize,
    /// Jobs that ended after their deadline.
    pub deadline_missed: u64,
    /// Partitions proved and verified.
    pub partitions_proved: u64,
}

/// Renders `status` in the Prometheus text exposition format (0.0.4).
pub(crate) fn prometheus_text(status: &EngineStatus) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let one = |v: f64| vec![(String::new(), v)];
    let b = &status.budget;
    family("kiln_uptime_seconds", "gauge", "Seconds since the engine started.", one(status.uptime_secs as f64));
    family("kiln_memory_budget_bytes", "gauge", "The host memory budget.", one(b.total as f64));
    family("kiln_memory_reserved_bytes", "gauge", "Bytes reserved from the budget, by class.",
        b.reserved_by_class.iter().map(|(c, v)| (format!("{{class=\"{}\"}}", c.name()), v as f64)).collect());
    family("kiln_memory_reserved_peak_bytes", "gauge", "Highest reserved bytes seen.", one(b.peak_reserved as f64));
    family("kiln_memory_waiting_reservations", "gauge", "Reservations waiting for memory.", one(b.waiting_reservations as f64));
    family("kiln_memory_waiting_bytes", "gauge", "Bytes the waiting reservations ask for.", one(b.waiting_bytes as f64));
    let l = &status.lanes;
    family("kiln_critical_reserve_bytes", "gauge", "Budget bytes bulk work leaves free for critical partitions.",
        one(l.critical_reserve_bytes as f64));
    family("kiln_critical_reserved_bytes", "gauge", "Budget bytes critical partitions hold.", one(l.critical_reserved_bytes as f64));
    family("kiln_critical_waiting_reservations", "gauge", "Critical reservations waiting for memory.", one(l.critical_waiting as f64));
    family("kiln_critical_pinned_pool_bytes", "gauge", "Bytes of buffers the critical lane's pool holds.",
        one(l.critical_pinned_pool.pinned_total_bytes as f64));
    let p = &status.pinned_pool;
    family("kiln_pinned_pool_bytes", "gauge", "Bytes of buffers the pool holds.", one(p.pinned_total_bytes as f64));
    family("kiln_pinned_pool_in_use_bytes", "gauge", "Bytes of pool buffers checked out.", one(p.pinned_in_use_bytes as f64));
    family("kiln_pinned_pool_limit_bytes", "gauge", "The pool's cap.", one(p.max_bytes as f64));
    family("kiln_pinned_pool_page_locked", "gauge", "1 if pool buffers are page-locked.", one(p.page_locked as u8 as f64));
    let stages = &status.buffers.stages;
    family("kiln_buffers", "gauge", "Partitions holding buffers, by pipeline stage.",
        stages.iter().map(|s| (format!("{{stage=\"{}\"}}", s.stage.name()), s.count as f64)).collect());
    family("kiln_buffer_bytes", "gauge", "Bytes held by partitions, by pipeline stage.",
        stages.iter().map(|s| (format!("{{stage=\"{}\"}}", s.stage.name()), s.bytes as f64)).collect());
    family("kiln_buffers_synthesized_not_started_peak", "gauge",
        "Most partitions ever synthesized but not started on a GPU.", one(status.buffers.peak_synthesized_not_started as f64));
    let q = |f: fn(&QueueStatus) -> usize| {
        status.queues.iter().map(|q| (format!("{{kind=\"{}\"}}", escape(&q.kind_label)), f(q) as f64)).collect()
    };
    family("kiln_jobs_pending", "gauge", "Jobs waiting to start, by kind.", q(|q| q.pending_jobs));
    family("kiln_jobs_in_progress", "gauge", "Jobs in progress, by kind.", q(|q| q.in_progress_jobs));
    family("kiln_partitions_pending", "gauge", "Partitions waiting for synthesis, by kind.", q(|q| q.pending_partitions));
    family("kiln_partitions_in_progress", "gauge", "Partitions in progress, by kind.", q(|q| q.in_progress_partitions));
    let w = &status.workers;
    family("kiln_synthesis_workers", "gauge", "Synthesis worker threads.", one(w.synthesis_workers as f64));
    family("kiln_synthesis_critical_lane_workers", "gauge", "Synthesis workers reserved for critical partitions.",
        one(w.critical_lane_workers as f64));
    family("kiln_synthesis_workers_busy", "gauge", "Synthesis workers holding a partition.", one(w.synthesis_busy as f64));
    family("kiln_gpu_worker_busy", "gauge", "1 while a GPU worker proves a partition.",
        w.gpu_workers.iter().map(|g| (gpu_labels(g), g.current_job_id.is_some() as u8 as f64)).collect());
    family("kiln_gpu_worker_partitions_started_total", "counter", "Partitions started per GPU worker.",
        w.gpu_workers.iter().map(|g| (gpu_labels(g), g.partitions_started as f64)).collect());
    family("kiln_srs_bytes", "gauge", "Size of each known parameter set, by tier.",
        status.srs.iter().map(|s| (format!("{{id=\"{}\",tier=\"{}\"}}", escape(&s.id), s.tier.name()), s.size_bytes as f64)).collect());
    family("kiln_srs_device_resident", "gauge", "1 for each device holding a parameter set in its memory.",
        status.srs.iter().flat_map(|s| s.device_resident.iter().map(move |d| (format!("{{id=\"{}\",device=\"{}\"}}", escape(&s.id), escape(d)), 1.0))).collect());
    family("kiln_srs_device_streamed", "gauge", "1 for each device streaming part of a parameter set from the host per proof (it did not fit in VRAM).",
        status.srs.iter().flat_map(|s| s.device_streamed.iter().map(move |d| (format!("{{id=\"{}\",device=\"{}\"}}", escape(&s.id), escape(d)), 1.0))).collect());
    family("kiln_srs_ref_count", "gauge", "Partitions using each parameter set.",
        status.srs.iter().map(|s| (format!("{{id=\"{}\"}}", escape(&s.id)), s.ref_count as f64)).collect());
    let c = &status.circuits;
    family("kiln_compiled_circuits", "gauge", "Compiled circuits held.", one(c.circuits as f64));
    family("kiln_compiled_circuits_bytes", "gauge", "Memory the compiled circuits hold.", one(c.bytes as f64));
    family("kiln_syntheses_total", "counter", "Partition syntheses by path.", vec![
        ("{path=\"compile\"}".into(), c.compiles as f64),
        ("{path=\"compiled\"}".into(), c.compiled_syntheses as f64),
        ("{path=\"ordinary\"}".into(), c.plain_syntheses as f64),
    ]);
    family("kiln_parallel_witness_syntheses_total", "counter",
        "Compiled syntheses whose circuit segments (e.g. PoRep challenges) computed their witnesses in parallel.",
        one(c.segmented_syntheses as f64));
    family("kiln_compiled_rows_total", "counter",
        "Rows of a/b/c evaluated by compiled syntheses, while their witness still ran or after it.", vec![
        ("{when=\"beside_witness\"}".into(), c.rows_beside_witness as f64),
        ("{when=\"after_witness\"}".into(), c.rows_after_witness as f64),
    ]);
    family("kiln_compiled_circuit_refusals_total", "counter",
        "Circuits not compiled (no memory, too large) or dropped (an instance changed shape).",
        one((c.refusals + c.structure_changes) as f64));
    let j = &status.jobs;
    family("kiln_jobs_total", "counter", "Jobs by how they ended (submitted counts every new job).", vec![
        ("{outcome=\"submitted\"}".into(), j.submitted as f64),
        ("{outcome=\"completed\"}".into(), j.completed as f64),
        ("{outcome=\"failed\"}".into(), j.failed as f64),
        ("{outcome=\"cancelled\"}".into(), j.cancelled as f64),
    ]);
    family("kiln_jobs_in_flight", "gauge", "Jobs not ended yet.", one(j.in_flight as f64));
    family("kiln_jobs_deadline_missed_total", "counter", "Jobs that ended after their deadline.", one(j.deadline_missed as f64));
    family("kiln_partitions_proved_total", "counter", "Partitions proved and verified.", one(j.partitions_proved as f64));
    out
}

fn gpu_labels(g: &GpuWorkerStatus) -> String {
    let lane = if g.critical_only { "critical" } else { "any" };
    format!("{{worker=\"{}\",backend=\"{}\",lane=\"{lane}\"}}", g.index, escape(&g.backend))
}

/// Escapes a label value (backslash, quote, newline).
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
