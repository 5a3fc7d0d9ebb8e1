//! [`Engine`]: the public face of the pipeline. Submission, waiting,
//! cancellation, status and shutdown; the threads live in `workers`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_groth16::ProverBackend;
use kiln_memory::{MemoryBudget, MemoryReservation, PinnedPool};
use parking_lot::Mutex;

use crate::admission::check_fits;
use crate::buffers::PartitionFootprint;
use crate::config::EngineConfig;
use crate::counters::StageCounters;
use crate::health::Health;
use crate::job::{JobOutcome, JobRequest, SrsSpec, SubmitError, Submitted};
use crate::jobs::{Job, JOB_RECORD_BYTES};
use crate::lanes::{Lane, Lanes};
use crate::queue::WorkQueue;
use crate::registry::Registry;
use crate::requests::Requests;
use crate::srs::{EvictResult, PreloadResult, SrsManager, SrsStatus};
use crate::status::{prometheus_text, EngineStatus, GpuWorkerStatus, JobTotals, QueueStatus, RequestStatus, WorkerStatus};
use crate::workers::{self, PartitionTask, Takes};

pub(crate) use crate::shared::{Shared, Totals};

/// The engine could not start, or an SRS operation failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("invalid engine configuration: {0}")]
    Config(String),
    #[error("cannot size the memory budget from the host: {0}")]
    Memory(String),
    #[error("cannot start engine threads: {0}")]
    Thread(#[from] std::io::Error),
    #[error("{0}")]
    Srs(String),
    #[error("the engine is shut down")]
    ShutDown,
}

/// The proving engine. Cheap to clone (all clones drive the same engine).
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, Priority};
/// use kiln_pipeline::synthetic::SyntheticJob;
/// use kiln_synth::workload::WorkloadKind;
///
/// let engine = Engine::start(EngineConfig::default(), vec![])?; // CPU backend
/// let job = SyntheticJob::new(WorkloadKind::Dense, 10, 2, 3, "/tmp/kiln-params");
/// let sub = engine.submit(JobRequest::new("req-1", Priority::Normal, Arc::new(job)))?;
/// match engine.wait_blocking(&sub.job_id, Some(Duration::from_secs(60))) {
///     JobOutcome::Completed { proof, .. } => assert_eq!(proof.len(), 3 * 192),
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Engine {
    handle: Arc<Handle>,
}

/// Stops the threads when the last `Engine` clone goes away.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        stop_threads(&self.shared);
    }
}

fn stop_threads(shared: &Shared) {
    shared.accepting.store(false, Ordering::Release);
    shared.stopping.store(true, Ordering::Release);
    drop(shared.synth_queue.close());
    drop(shared.gpu_queue.close());
    drop(shared.final_queue.close());
}

impl Engine {
    /// Starts the threads: `config.synthesis_workers` synthesis workers, one
    /// GPU worker per entry of `backends` (list a backend twice for two
    /// workers on one GPU; an empty list means one [`kiln_groth16::CpuBackend`]
    /// worker), and `config.finalizer_threads` finalizers.
    pub fn start(mut config: EngineConfig, backends: Vec<Arc<dyn ProverBackend>>) -> Result<Engine, EngineError> {
        config.validate().map_err(EngineError::Config)?;
        let whole = MemoryBudget::from_config(config.memory_budget_bytes, config.memory_margin_bytes)
            .map_err(|e| EngineError::Memory(e.to_string()))?;
        let (proving, requests) = Requests::split(whole.total(), &config).map_err(EngineError::Config)?;
        let budget = MemoryBudget::new(proving);
        let pool_cap = config.pinned_pool_bytes.unwrap_or(budget.total()).min(budget.total());
        let pool = if config.pin_host_buffers { PinnedPool::new(&budget, pool_cap) } else { PinnedPool::pageable(&budget, pool_cap) };
        let lanes = Lanes::new(&config, &budget, pool_cap).map_err(EngineError::Config)?;
        let backends: Vec<Arc<dyn ProverBackend>> =
            if backends.is_empty() { vec![Arc::new(kiln_groth16::CpuBackend)] } else { backends };
        let urgent = crate::lanes::urgent_workers(&backends, config.critical_prover_workers);
        // The ordinary workers, then the critical lane's: one status entry each.
        let workers: Vec<(Arc<dyn ProverBackend>, Takes)> = {
            let bulk = if urgent.is_empty() { Takes::Any } else { Takes::Only(Lane::Bulk) };
            let ordinary = backends.iter().map(|b| (b.clone(), bulk));
            ordinary.chain(urgent.into_iter().map(|b| (b, Takes::Only(Lane::Critical)))).collect()
        };
        // Unless configured, reserve what the hungriest backend says it needs.
        config.backend_scratch_ratio.get_or_insert_with(|| backends.iter().map(|b| b.host_scratch_ratio()).fold(0.0, f64::max));
        let evict_devices = {
            let backends = backends.clone();
            Box::new(move |params_id| {
                backends.iter().for_each(|b| {
                    b.evict_device(params_id);
                })
            })
        };
        let health = Health::new(&workers.iter().map(|(b, takes)| (b.device(), *takes)).collect::<Vec<_>>(), &config);
        let shared = Arc::new(Shared {
            srs: SrsManager::new(budget.clone(), pool.clone(), evict_devices, crate::srs::placement_host(&backends), lanes.reserve_bytes),
            circuits: crate::circuits::circuit_cache(&config, &budget),
            counters: StageCounters::new(config.counter_log_interval_ms),
            synth_queue: WorkQueue::new(None),
            gpu_queue: WorkQueue::new(Some(config.gpu_queue_depth.max(1))),
            final_queue: WorkQueue::new(None),
            acquire_gate: Mutex::new(()),
            lanes,
            jobs: Mutex::new(Registry::default()),
            requests,
            gpu_workers: workers
                .iter()
                .enumerate()
                .map(|(index, (b, takes))| {
                    Mutex::new(GpuWorkerStatus {
                        index,
                        backend: b.name(),
                        device: b.device(),
                        quarantined: false,
                        current_job_id: None,
                        current_kind_label: None,
                        partitions_started: 0,
                        critical_only: *takes == Takes::Only(Lane::Critical),
                    })
                })
                .collect(),
            backends: backends.clone(),
            health,
            synthesis_busy: AtomicUsize::new(0),
            accepting: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            totals: Totals::default(),
            started: Instant::now(),
            threads: Mutex::new(Vec::new()),
            budget,
            pool,
            config,
        });
        let engine = Engine { handle: Arc::new(Handle { shared: shared.clone() }) };
        let threads = workers::spawn_all(&shared, workers)?;
        *shared.threads.lock() = threads;
        let snap = shared.budget.snapshot();
        tracing::info!(
            budget_bytes = snap.total,
            request_memory_bytes = shared.requests.budget.total(),
            max_queued_jobs = shared.requests.max_queued_jobs,
            pool_cap_bytes = shared.pool.max_bytes(),
            page_locked = shared.pool.is_page_locked(),
            synthesis_workers = shared.config.synthesis_workers,
            gpu_workers = shared.gpu_workers.len(),
            critical_reserve_bytes = shared.lanes.reserve_bytes,
            gpu_queue_depth = shared.config.gpu_queue_depth.max(1),
            "kiln engine started"
        );
        Ok(engine)
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.handle.shared
    }

    /// Queues a job and returns at once.
    ///
    /// - A `request_id` the engine already knows returns that job
    ///   (`existing: true`) and queues nothing, while it is queued, running
    ///   or completed. One that ended FAILED or CANCELLED is proved again:
    ///   the new job takes the id over (waiters of the old one have had
    ///   their answer), so a client's retry after a fault is a retry.
    /// - A job one of whose partitions (with its parameters) can never fit
    ///   the memory budget or the buffer pool is refused with
    ///   [`SubmitError::TooLarge`]. When its parameters must first be
    ///   generated, that check happens once they exist, and the job fails
    ///   with the same message.
    pub fn submit(&self, req: JobRequest) -> Result<Submitted, SubmitError> {
        let shared = self.shared();
        if !shared.accepting.load(Ordering::Acquire) {
            return Err(SubmitError::ShuttingDown);
        }
        if let Some(existing) = self.existing(&req.request_id) {
            return Ok(existing);
        }
        let source = req.source.clone();
        let (num_partitions, spec) = catch_unwind(AssertUnwindSafe(|| (source.num_partitions(), source.srs())))
            .map_err(|p| SubmitError::Invalid(format!("the job's description panicked: {}", workers::panic_message(&p))))?;
        if num_partitions == 0 {
            return Err(SubmitError::Invalid("the job has no partitions".into()));
        }
        shared.srs.register(&spec).map_err(SubmitError::Invalid)?;
        // Parameters that must be made (generated files, test setups) are
        // sized by the worker that makes them, not here: submit stays quick.
        if spec.open.is_none() && spec.path.exists() {
            let params = shared.srs.probe(&spec).map_err(|e| SubmitError::Invalid(format!("cannot read the job's parameters: {e}")))?;
            let worst = (0..num_partitions)
                .map(|i| catch_unwind(AssertUnwindSafe(|| source.partition_shape(&params, i))))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|p| SubmitError::Invalid(format!("sizing the job's partitions panicked: {}", workers::panic_message(&p))))?
                .iter()
                .map(|shape| PartitionFootprint::of(shape, &shared.config))
                .max_by_key(PartitionFootprint::total)
                .expect("at least one partition");
            check_fits(shared, Lane::of(req.priority), &spec, params.size_bytes(), &worst).map_err(SubmitError::TooLarge)?;
            if Lane::of(req.priority) == Lane::Critical {
                shared.lanes.note_critical_need(source.kind_label(), params.size_bytes() + worst.total());
            }
        } else if spec.generate.is_none() && spec.open.is_none() {
            return Err(SubmitError::Invalid(format!(
                "parameters {:?} not found at {} (and no way to generate them)",
                spec.id,
                spec.path.display()
            )));
        }

        let mut reg = shared.jobs.lock();
        reg.prune(Duration::from_secs(shared.config.finished_job_retention_secs));
        if let Some(job) = (!req.request_id.is_empty()).then(|| reg.get(&req.request_id)).flatten() {
            if answers_resubmission(job) {
                let job = job.clone();
                drop(reg);
                return Ok(self.describe_existing(&job));
            }
            tracing::info!(job = %job.id, ended = job.outcome().map_or("?", |o| o.name()), "request resubmitted after its job failed or was cancelled: proving it again");
        }
        // A critical job (WinningPoSt) is never refused for a queue full of
        // bulk work: it has its own lane and a deadline of seconds.
        let live = shared.live_jobs();
        if live >= shared.requests.max_queued_jobs as u64 && Lane::of(req.priority) == Lane::Bulk {
            return Err(SubmitError::Busy(format!(
                "{live} jobs are queued or running, the most this engine takes (max_queued_jobs); submit it again later"
            )));
        }
        drop(reg);
        // Room for the job's record and payload (forgetting ended jobs if
        // need be: that takes the registry lock, so it is not held here).
        let memory = crate::requests::reserve(shared, JOB_RECORD_BYTES + req.payload_bytes).map_err(SubmitError::Busy)?;
        let mut reg = shared.jobs.lock();
        if let Some(job) = (!req.request_id.is_empty()).then(|| reg.get(&req.request_id)).flatten().filter(|j| answers_resubmission(j)) {
            let job = job.clone();
            drop(reg);
            return Ok(self.describe_existing(&job)); // submitted meanwhile by another caller
        }
        // Under the registry lock: see `Shared::no_prover_left`.
        if let Some(why) = shared.health.no_prover_left() {
            return Err(SubmitError::NoProver(why));
        }
        let seq = reg.next_seq();
        let id: Arc<str> = if req.request_id.is_empty() { format!("job-{seq}").into() } else { req.request_id.as_str().into() };
        let job = Job::new(id.clone(), seq, req.priority, req.source, spec, num_partitions, req.deadline, memory);
        let queue_position = shared.synth_queue.count_ahead(req.priority);
        reg.insert(job.clone());
        // Queue while holding the registry lock, so a resubmission cannot
        // see the job before its partitions are queued.
        for index in 0..num_partitions {
            let task = PartitionTask { job: job.clone(), index, retries: 0, reference: false };
            if shared.synth_queue.push(req.priority, (seq, index), task, || false, |_| {}).is_err() {
                drop(reg);
                shared.end_job(&job, JobOutcome::Cancelled);
                return Err(SubmitError::ShuttingDown);
            }
        }
        drop(reg);
        shared.totals.submitted.fetch_add(1, Ordering::Relaxed);
        tracing::info!(job = %id, kind = %job.kind, priority = job.priority.name(), partitions = num_partitions, queue_position, "job queued");
        Ok(Submitted { job_id: id.to_string(), queue_position, existing: false })
    }

    fn existing(&self, request_id: &str) -> Option<Submitted> {
        if request_id.is_empty() {
            return None;
        }
        let job = self.shared().jobs.lock().get(request_id).filter(|j| answers_resubmission(j)).cloned()?;
        Some(self.describe_existing(&job))
    }

    fn describe_existing(&self, job: &Arc<Job>) -> Submitted {
        let (started, _) = job.progress();
        let queue_position = if started == 0 && !job.is_stopped() {
            self.shared().synth_queue.count_ahead(job.priority)
        } else {
            0
        };
        Submitted { job_id: job.id.to_string(), queue_position, existing: true }
    }

    fn job(&self, job_id: &str) -> Option<Arc<Job>> {
        self.shared().jobs.lock().get(job_id).cloned()
    }

    /// Waits until the job ends or `timeout` passes (`None`: no limit).
    /// A timeout does not affect the job. Needs a tokio runtime with time.
    pub async fn wait(&self, job_id: &str, timeout: Option<Duration>) -> JobOutcome {
        match self.job(job_id) {
            Some(job) => job.wait(timeout).await,
            None => JobOutcome::Unknown,
        }
    }

    /// [`wait`](Self::wait) for plain threads.
    pub fn wait_blocking(&self, job_id: &str, timeout: Option<Duration>) -> JobOutcome {
        match self.job(job_id) {
            Some(job) => job.wait_blocking(timeout),
            None => JobOutcome::Unknown,
        }
    }

    /// The outcome if the job has ended, `Timeout` if it is still running,
    /// `Unknown` if there is no such job. Never waits.
    pub fn poll(&self, job_id: &str) -> JobOutcome {
        match self.job(job_id) {
            Some(job) => job.outcome().unwrap_or(JobOutcome::Timeout),
            None => JobOutcome::Unknown,
        }
    }

    /// Cancels a job: its queued partitions are dropped and their memory
    /// returned at once; partitions being synthesized or proved are dropped
    /// at their next step. `None` for an unknown job; `Some(was_running)`
    /// otherwise (`Some(false)` also for a job that had already ended,
    /// which is left as it was).
    pub fn cancel(&self, job_id: &str) -> Option<bool> {
        let job = self.job(job_id)?;
        if job.is_stopped() {
            return Some(false);
        }
        let (started, _) = job.progress();
        self.shared().end_job(&job, JobOutcome::Cancelled);
        Some(started > 0)
    }

    /// Makes a parameter set hot ahead of work (generating it if missing and
    /// allowed). Waits for memory if needed, evicting idle parameters.
    pub fn preload_srs(&self, spec: SrsSpec) -> Result<PreloadResult, EngineError> {
        let shared = self.shared();
        let started = Instant::now();
        shared.srs.register(&spec).map_err(EngineError::Srs)?;
        if shared.srs.is_hot(&spec.id) {
            return Ok(PreloadResult { already_loaded: true, load_time: Duration::ZERO });
        }
        shared.srs.ensure_file(&spec).map_err(EngineError::Srs)?;
        // A preload is one more acquirer of memory: take the gate like a worker.
        let _gate = shared.acquire_gate.lock();
        let lease =
            shared.srs.lease(&spec, &shared.budget, Lane::Bulk, || shared.is_stopping()).map_err(EngineError::Srs)?.ok_or(EngineError::ShutDown)?;
        drop(lease); // hot and idle: cached until evicted
        Ok(PreloadResult { already_loaded: false, load_time: started.elapsed() })
    }

    /// Unloads parameters `id` (an error if a partition is using them) from
    /// host memory and from every device, and drops its compiled circuit.
    pub fn evict_srs(&self, id: &str) -> Result<EvictResult, EngineError> {
        let shared = self.shared();
        let params_id = shared.srs.statuses().into_iter().find(|s| s.id == id).and_then(|s| s.params_id);
        let result = shared.srs.evict(id).map_err(EngineError::Srs)?;
        if shared.circuits.evict(id) {
            tracing::info!(id, "compiled circuit dropped with its parameters");
        }
        if let Some(pid) = params_id {
            let device_bytes: u64 = shared.backends.iter().map(|b| b.evict_device(pid)).sum();
            if device_bytes > 0 {
                tracing::info!(id, device_bytes, "parameters evicted from device memory");
            }
        }
        Ok(result)
    }

    /// Everything the engine can say about itself now.
    pub fn status(&self) -> EngineStatus {
        let shared = self.shared();
        let jobs: Vec<Arc<Job>> = shared.jobs.lock().jobs().cloned().collect();
        let mut queues: BTreeMap<String, QueueStatus> = BTreeMap::new();
        let mut in_flight = 0;
        for job in jobs.iter().filter(|j| !j.is_stopped()) {
            in_flight += 1;
            let (started, proved) = job.progress();
            let q = queues.entry(job.kind.clone()).or_insert_with(|| QueueStatus { kind_label: job.kind.clone(), ..Default::default() });
            if started < job.num_partitions {
                q.pending_jobs += 1;
            }
            if started > 0 {
                q.in_progress_jobs += 1;
            }
            q.pending_partitions += job.num_partitions - started;
            q.in_progress_partitions += started - proved;
        }
        let t = &shared.totals;
        let budget = shared.budget.snapshot();
        let gpu_workers: Vec<GpuWorkerStatus> = shared
            .gpu_workers
            .iter()
            .map(|w| {
                let mut w = w.lock().clone();
                w.quarantined = shared.health.is_quarantined(w.index);
                w
            })
            .collect();
        let lanes = shared.lanes.status(&shared.config, &budget, gpu_workers.iter().filter(|w| w.critical_only).count());
        EngineStatus {
            uptime_secs: shared.started.elapsed().as_secs(),
            budget,
            lanes,
            pinned_pool: shared.pool.snapshot(),
            buffers: shared.counters.snapshot(),
            queues: queues.into_values().collect(),
            workers: WorkerStatus {
                synthesis_workers: shared.config.synthesis_workers,
                critical_lane_workers: shared.config.critical_lane_workers,
                synthesis_busy: shared.synthesis_busy.load(Ordering::Relaxed),
                gpu_queue_depth: shared.config.gpu_queue_depth.max(1),
                gpu_workers,
                finalizer_threads: shared.config.finalizer_threads,
            },
            srs: with_device_residency(shared.srs.statuses(), &shared.backends),
            provers: shared.health.status(),
            circuits: shared.circuits.stats(),
            requests: RequestStatus { memory: shared.requests.budget.snapshot(), max_queued_jobs: shared.requests.max_queued_jobs },
            jobs: JobTotals {
                submitted: t.submitted.load(Ordering::Relaxed),
                completed: t.completed.load(Ordering::Relaxed),
                failed: t.failed.load(Ordering::Relaxed),
                cancelled: t.cancelled.load(Ordering::Relaxed),
                in_flight,
                deadline_missed: t.deadline_missed.load(Ordering::Relaxed),
                partitions_proved: t.partitions_proved.load(Ordering::Relaxed),
                products_rejected: t.products_rejected.load(Ordering::Relaxed),
                products_in_synthesis: t.products_in_synthesis.load(Ordering::Relaxed),
                products_by_prover: t.products_by_prover.load(Ordering::Relaxed),
            },
        }
    }

    /// [`status`](Self::status) in the Prometheus text format, for `/metrics`.
    pub fn metrics_text(&self) -> String {
        prometheus_text(&self.status())
    }

    /// Why no prover is left, once every prover device is quarantined
    /// (after a sticky fault, a hang or repeated faults on each): the
    /// engine has failed its jobs and refuses new ones. A daemon should
    /// exit (non-zero) so that its supervisor restarts it.
    pub fn no_prover_left(&self) -> Option<String> {
        self.shared().health.no_prover_left()
    }

    /// True once [`shutdown`](Self::shutdown) has begun: no new jobs, and
    /// jobs still running when its grace period ends are cancelled.
    pub fn is_shutting_down(&self) -> bool {
        !self.shared().accepting.load(Ordering::Acquire)
    }

    /// Reserves `bytes` of request memory (`request_memory_bytes`) for
    /// something a request holds outside the engine (e.g. a daemon's
    /// message while it is received and decoded). Never waits: when it does
    /// not fit, the oldest ended jobs are forgotten, and if it still does
    /// not, the error says what holds it.
    pub fn reserve_request_memory(&self, bytes: u64) -> Result<MemoryReservation, String> {
        crate::requests::reserve(self.shared(), bytes)
    }

    /// The memory budget every component draws from (e.g. for a daemon's
    /// own large buffers).
    pub fn budget(&self) -> &MemoryBudget {
        &self.shared().budget
    }

    /// Stops accepting jobs, lets in-flight jobs finish for up to `grace`,
    /// cancels the rest, and joins every thread (a partition in the middle
    /// of synthesis or proving finishes that step first). Idempotent.
    pub async fn shutdown(&self, grace: Duration) {
        let shared = self.shared().clone();
        shared.accepting.store(false, Ordering::Release);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.in_flight() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.cancel_all();
        stop_threads(&shared);
        let threads = std::mem::take(&mut *shared.threads.lock());
        for t in threads {
            while !t.is_finished() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = t.join();
        }
        tracing::info!("kiln engine stopped");
    }

    /// [`shutdown`](Self::shutdown) for plain threads.
    pub fn shutdown_blocking(&self, grace: Duration) {
        let shared = self.shared().clone();
        shared.accepting.store(false, Ordering::Release);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.in_flight() > 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.cancel_all();
        stop_threads(&shared);
        for t in std::mem::take(&mut *shared.threads.lock()) {
            let _ = t.join();
        }
        shared.srs.release_devices();
    }

    fn in_flight(&self) -> usize {
        self.shared().jobs.lock().jobs().filter(|j| !j.is_stopped()).count()
    }

    fn cancel_all(&self) {
        let jobs: Vec<_> = self.shared().jobs.lock().jobs().cloned().collect();
        for job in jobs.iter().filter(|j| !j.is_stopped()) {
            tracing::warn!(job = %job.id, "cancelled by shutdown");
            self.shared().end_job(job, JobOutcome::Cancelled);
        }
    }
}

/// Whether a resubmission of `job`'s request id gets `job` back: yes
/// unless it ended FAILED or CANCELLED (then the request is proved again).
fn answers_resubmission(job: &Job) -> bool {
    !matches!(job.outcome(), Some(JobOutcome::Failed(_) | JobOutcome::Cancelled))
}

/// Fills in which devices hold each parameter set.
fn with_device_residency(mut srs: Vec<SrsStatus>, backends: &[Arc<dyn ProverBackend>]) -> Vec<SrsStatus> {
    let resident: Vec<_> = backends.iter().flat_map(|b| b.device_resident()).collect();
    for s in &mut srs {
        let devices = |streamed_only: bool| {
            let mut d: Vec<String> = resident
                .iter()
                .filter(|r| Some(r.params_id) == s.params_id && (!streamed_only || r.streamed_bytes > 0))
                .map(|r| r.device.clone())
                .collect();
            d.sort();
            d.dedup();
            d
        };
        (s.device_resident, s.device_streamed) = (devices(false), devices(true));
    }
    srs
}
