//! [`EngineStatus`] (JSON for `/status`) and its Prometheus metric families.

use std::fmt;

use kiln_memory::{BudgetSnapshot, PoolSnapshot};
use kiln_synth::CircuitCacheStats;
use serde::Serialize;

use crate::counters::BufferCounters;
use crate::health::ProverHealth;
use crate::srs::SrsStatus;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeCounterValue, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

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
    /// Prover devices: faults, quarantine, whether any prover is left.
    pub provers: ProverHealth,
    /// Compiled circuits and how partitions were synthesized.
    pub circuits: CircuitCacheStats,
    pub jobs: JobTotals,
    /// What the critical lane holds apart from bulk work.
    pub lanes: LaneStatus,
    /// The request memory (`request_memory_bytes`, apart from `budget`)
    /// and the queue cap.
    pub requests: RequestStatus,
}

/// What requests hold and may hold.
#[derive(Clone, Debug, Serialize)]
pub struct RequestStatus {
    /// Messages being received, payloads of queued and running jobs,
    /// records and answers of ended ones.
    pub memory: BudgetSnapshot,
    /// `max_queued_jobs`.
    pub max_queued_jobs: usize,
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
    /// The device it runs on ("cpu", "gpu0"): faults and quarantine are per device.
    pub device: String,
    /// Its device is quarantined: the worker waits for its probation, or
    /// has stopped.
    pub quarantined: bool,
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
    /// Partitions whose a/b/c were left to the prover and rejected there
    /// (a row failed a*b = c), or could not be synthesized that way: each
    /// was redone on the reference path (gadget witness, a/b/c on the host).
    pub products_rejected: u64,
    /// Partition starts on a prover whose a/b/c synthesis computed on the
    /// host (beside the witness) ...
    pub products_in_synthesis: u64,
    /// ... and whose a/b/c the prover computed from the witness alone (on
    /// its GPU, from the circuit's matrices: `device_products`).
    pub products_by_prover: u64,
}

impl EngineStatus {
    /// Writes the engine's metric families (buffers, memory, queues,
    /// workers, parameters, jobs) through a Prometheus encoder: the
    /// daemon's `/metrics` collects them from here on every scrape.
    pub fn encode_metrics(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let status = self;
        let mut f = Families(encoder);
        let one = |v: u64| vec![(Vec::new(), v)];
        let b = &status.budget;
        f.gauge("kiln_uptime_seconds", "Seconds since the engine started.", one(status.uptime_secs))?;
        f.gauge("kiln_memory_budget_bytes", "The host memory budget for proving (memory_budget_bytes less request_memory_bytes).", one(b.total))?;
        f.gauge("kiln_memory_reserved_bytes", "Bytes reserved from the budget, by class.",
            b.reserved_by_class.iter().map(|(c, v)| (vec![("class", c.name().to_string())], v)).collect())?;
        f.gauge("kiln_memory_reserved_peak_bytes", "Highest reserved bytes seen.", one(b.peak_reserved))?;
        f.gauge("kiln_memory_waiting_reservations", "Reservations waiting for memory.", one(b.waiting_reservations as u64))?;
        f.gauge("kiln_memory_waiting_bytes", "Bytes the waiting reservations ask for.", one(b.waiting_bytes))?;
        let r = &status.requests;
        f.gauge("kiln_request_memory_bytes", "Memory kept for requests (request_memory_bytes), apart from the budget.", one(r.memory.total))?;
        f.gauge("kiln_request_memory_reserved_bytes", "Request memory held: messages being received, payloads of queued and running jobs, ended jobs' answers.", one(r.memory.reserved))?;
        f.gauge("kiln_max_queued_jobs", "The most jobs queued or running at once (max_queued_jobs).", one(r.max_queued_jobs as u64))?;
        let l = &status.lanes;
        f.gauge("kiln_critical_reserve_bytes", "Budget bytes bulk work leaves free for critical partitions.", one(l.critical_reserve_bytes))?;
        f.gauge("kiln_critical_reserved_bytes", "Budget bytes critical partitions hold.", one(l.critical_reserved_bytes))?;
        f.gauge("kiln_critical_waiting_reservations", "Critical reservations waiting for memory.", one(l.critical_waiting as u64))?;
        f.gauge("kiln_critical_pinned_pool_bytes", "Bytes of buffers the critical lane's pool holds.", one(l.critical_pinned_pool.pinned_total_bytes))?;
        let p = &status.pinned_pool;
        f.gauge("kiln_pinned_pool_bytes", "Bytes of buffers the pool holds.", one(p.pinned_total_bytes))?;
        f.gauge("kiln_pinned_pool_in_use_bytes", "Bytes of pool buffers checked out.", one(p.pinned_in_use_bytes))?;
        f.gauge("kiln_pinned_pool_limit_bytes", "The pool's cap.", one(p.max_bytes))?;
        f.gauge("kiln_pinned_pool_page_locked", "1 if pool buffers are page-locked.", one(p.page_locked as u64))?;
        let stages = &status.buffers.stages;
        let stage = |s: &crate::counters::StageCount| vec![("stage", s.stage.name().to_string())];
        f.gauge("kiln_buffers", "Partitions holding buffers, by pipeline stage.", stages.iter().map(|s| (stage(s), s.count as u64)).collect())?;
        f.gauge("kiln_buffer_bytes", "Bytes held by partitions, by pipeline stage.", stages.iter().map(|s| (stage(s), s.bytes)).collect())?;
        f.gauge("kiln_buffers_synthesized_not_started_peak", "Most partitions ever synthesized but not started on a GPU.",
            one(status.buffers.peak_synthesized_not_started as u64))?;
        let q = |v: fn(&QueueStatus) -> usize| status.queues.iter().map(|q| (vec![("kind", q.kind_label.clone())], v(q) as u64)).collect();
        f.gauge("kiln_jobs_pending", "Jobs waiting to start, by kind.", q(|q| q.pending_jobs))?;
        f.gauge("kiln_jobs_in_progress", "Jobs in progress, by kind.", q(|q| q.in_progress_jobs))?;
        f.gauge("kiln_partitions_pending", "Partitions waiting for synthesis, by kind.", q(|q| q.pending_partitions))?;
        f.gauge("kiln_partitions_in_progress", "Partitions in progress, by kind.", q(|q| q.in_progress_partitions))?;
        let w = &status.workers;
        f.gauge("kiln_synthesis_workers", "Synthesis worker threads.", one(w.synthesis_workers as u64))?;
        f.gauge("kiln_synthesis_critical_lane_workers", "Synthesis workers reserved for critical partitions.", one(w.critical_lane_workers as u64))?;
        f.gauge("kiln_synthesis_workers_busy", "Synthesis workers holding a partition.", one(w.synthesis_busy as u64))?;
        let gpu = |g: &GpuWorkerStatus| {
            let lane = if g.critical_only { "critical" } else { "any" };
            vec![("worker", g.index.to_string()), ("backend", g.backend.clone()), ("lane", lane.to_string())]
        };
        f.gauge("kiln_gpu_worker_busy", "1 while a GPU worker proves a partition.",
            w.gpu_workers.iter().map(|g| (gpu(g), g.current_job_id.is_some() as u64)).collect())?;
        f.counter("kiln_gpu_worker_partitions_started", "Partitions started per GPU worker.",
            w.gpu_workers.iter().map(|g| (gpu(g), g.partitions_started)).collect())?;
        let pr = &status.provers;
        let device = |d: &crate::health::DeviceHealth| vec![("device", d.device.clone())];
        f.gauge("kiln_backend_quarantined", "1 for a prover device taken out of service (a sticky fault, a hang or repeated faults).",
            pr.devices.iter().map(|d| (device(d), d.quarantined.is_some() as u64)).collect())?;
        f.counter("kiln_backend_faults", "Prover faults per device: errors, panics, proofs that did not verify, watchdog expiries.",
            pr.devices.iter().map(|d| (device(d), d.faults)).collect())?;
        f.counter("kiln_prover_watchdog_expiries", "Partitions whose prover gave no answer within the watchdog's limit, per device.",
            pr.devices.iter().map(|d| (device(d), d.watchdog_expiries)).collect())?;
        f.counter("kiln_backend_returns", "Times a device quarantined for faults in a row came back into service on probation.",
            pr.devices.iter().map(|d| (device(d), d.returns)).collect())?;
        f.gauge("kiln_provers_usable", "Prover devices not quarantined; 0 means no prover is left (jobs fail, the daemon exits).",
            one(pr.usable_devices as u64))?;
        f.gauge("kiln_srs_bytes", "Size of each known parameter set, by tier.",
            status.srs.iter().map(|s| (vec![("id", s.id.clone()), ("tier", s.tier.name().to_string())], s.size_bytes)).collect())?;
        let per_device = |devices: fn(&SrsStatus) -> &Vec<String>| {
            status.srs.iter().flat_map(|s| devices(s).iter().map(move |d| (vec![("id", s.id.clone()), ("device", d.clone())], 1))).collect()
        };
        f.gauge("kiln_srs_device_resident", "1 for each device holding a parameter set in its memory.", per_device(|s| &s.device_resident))?;
        f.gauge("kiln_srs_device_streamed",
            "1 for each device streaming part of a parameter set from the host per proof (it did not fit in VRAM).", per_device(|s| &s.device_streamed))?;
        f.gauge("kiln_srs_ref_count", "Partitions using each parameter set.",
            status.srs.iter().map(|s| (vec![("id", s.id.clone())], s.ref_count as u64)).collect())?;
        let c = &status.circuits;
        f.gauge("kiln_compiled_circuits", "Compiled circuits held.", one(c.circuits as u64))?;
        f.gauge("kiln_compiled_circuits_bytes", "Memory the compiled circuits hold.", one(c.bytes as u64))?;
        let path = |p: &str| vec![("path", p.to_string())];
        f.counter("kiln_syntheses", "Partition syntheses by path.",
            vec![(path("compile"), c.compiles), (path("compiled"), c.compiled_syntheses), (path("native"), c.native_syntheses), (path("ordinary"), c.plain_syntheses)])?;
        f.counter("kiln_parallel_witness_syntheses",
            "Compiled syntheses whose circuit segments (e.g. PoRep challenges) computed their witnesses in parallel.", one(c.segmented_syntheses))?;
        let when = |w: &str| vec![("when", w.to_string())];
        f.counter("kiln_compiled_rows", "Rows of a/b/c evaluated by compiled syntheses, while their witness still ran or after it.",
            vec![(when("beside_witness"), c.rows_beside_witness), (when("after_witness"), c.rows_after_witness)])?;
        f.counter("kiln_native_witness_rejections",
            "Native witnesses that failed the check against the compiled R1CS; each partition was redone on the gadget path.", one(c.native_rejections))?;
        let computed = |w: &str| vec![("computed", w.to_string())];
        f.counter("kiln_partition_products",
            "Partition starts on a prover, by where their a/b/c were computed: during synthesis on the host, or by the prover (on its GPU) from the witness alone.",
            vec![(computed("synthesis"), status.jobs.products_in_synthesis), (computed("prover"), status.jobs.products_by_prover)])?;
        f.counter("kiln_products_rejections",
            "Partitions whose a/b/c, left to the prover, were rejected (a*b != c on a row); each was redone on the gadget path with a/b/c on the host.",
            one(status.jobs.products_rejected))?;
        f.counter("kiln_witness_seconds", "Wall time of witness computation, by path.",
            vec![(path("compiled"), c.compiled_witness_ns as f64 * 1e-9), (path("native"), c.native_witness_ns as f64 * 1e-9)])?;
        f.counter("kiln_compiled_circuit_refusals",
            "Circuits not compiled (no memory, too large) or dropped (an instance changed shape).", one(c.refusals + c.structure_changes))?;
        let j = &status.jobs;
        let outcome = |o: &str| vec![("outcome", o.to_string())];
        f.counter("kiln_jobs", "Jobs by how they ended (submitted counts every new job).", vec![
            (outcome("submitted"), j.submitted),
            (outcome("completed"), j.completed),
            (outcome("failed"), j.failed),
            (outcome("cancelled"), j.cancelled),
        ])?;
        f.gauge("kiln_jobs_in_flight", "Jobs not ended yet.", one(j.in_flight as u64))?;
        f.counter("kiln_jobs_deadline_missed", "Jobs that ended after their deadline.", one(j.deadline_missed))?;
        f.counter("kiln_partitions_proved", "Partitions proved and verified.", one(j.partitions_proved))
    }
}

/// Label pairs of one sample.
type Labels = Vec<(&'static str, String)>;

/// Writes families of samples.
struct Families<'a, 'e>(&'a mut DescriptorEncoder<'e>);

impl Families<'_, '_> {
    fn gauge(&mut self, name: &str, help: &str, samples: Vec<(Labels, u64)>) -> fmt::Result {
        let mut family = self.0.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, value) in samples {
            family.encode_family(&labels)?.encode_gauge(&value)?;
        }
        Ok(())
    }

    /// `name` without `_total`: the encoder adds it.
    fn counter<V: EncodeCounterValue>(&mut self, name: &str, help: &str, samples: Vec<(Labels, V)>) -> fmt::Result {
        let mut family = self.0.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (labels, value) in samples {
            family.encode_family(&labels)?.encode_counter::<NoLabelSet, V, u64>(&value, None)?;
        }
        Ok(())
    }
}

/// One status, as a collector (for [`prometheus_text`]).
#[derive(Debug)]
struct Snapshot(EngineStatus);

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        self.0.encode_metrics(&mut encoder)
    }
}

/// Renders `status` in the Prometheus text exposition format (0.0.4).
pub(crate) fn prometheus_text(status: &EngineStatus) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(status.clone())));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry);
    out
}
