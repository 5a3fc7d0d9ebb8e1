//! The engine's threads: synthesis workers, GPU workers and finalizers, and
//! what travels between them.
//!
//! A partition's path: synthesis queue -> (acquire gate: parameters, pool
//! buffer, reservation) -> synthesis -> GPU queue (the worker blocks, still
//! holding the partition, until the queue accepts it) -> GPU worker
//! (`prove_start`; the pool buffer goes back when it returns, and the
//! scratch part of the reservation with it) -> finalizer (`finish`:
//! assembly and verification) -> the job's proofs, in partition order.
//!
//! Everything a partition holds travels with it in [`Held`]; dropping a
//! partition at any point (failure, cancellation, shutdown) frees it all.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kiln_groth16::{finish, prove_start, ParamsError, PendingProof, ProveError, ProverBackend, Randomness};
use kiln_memory::MemoryReservation;
use kiln_synth::{Assignment, Recording, SynthContext, SynthError};

use crate::acquire::{acquire, Acquired, Acquisition};
use crate::buffers::{assignment_buffers, PartitionFootprint};
use crate::counters::{Stage, StageGuard};
use crate::admission::check_fits;
use crate::engine::Shared;
use crate::health::{FaultKind, Probation};
use crate::job::{JobOutcome, Priority};
use crate::jobs::{Job, Progress};
use crate::lanes::Lane;
use crate::srs::SrsLease;
use crate::watchdog::{watched, Waited};

/// A partition waiting for a synthesis worker.
pub(crate) struct PartitionTask {
    pub(crate) job: Arc<Job>,
    pub(crate) index: usize,
    /// Earlier attempts that failed in the prover (see [`retry_or_fail`]).
    pub(crate) retries: u32,
    /// Redo it on the reference path: the gadget witness, a/b/c on the
    /// host (after a/b/c left to the prover failed: see products.rs).
    pub(crate) reference: bool,
}

/// What a partition holds from memory grant to its end.
pub(crate) struct Held {
    /// Scratch + bookkeeping bytes (the pool buffer pays for itself).
    work: MemoryReservation,
    footprint: PartitionFootprint,
    /// Keeps the parameters hot.
    lease: SrsLease,
    span: tracing::Span,
    /// Earlier failed prover attempts of this partition.
    retries: u32,
    /// Its a/b/c are left to the prover ...
    products_on_prover: bool,
    /// ... or it is on the reference path.
    reference: bool,
    /// The circuit structure this partition's synthesis recorded, on
    /// probation until its proof verifies (dropped with the partition
    /// otherwise: see `kiln_synth::Recording`).
    recording: Option<Recording>,
    /// Counts the partition in its stage. Declared last so it is dropped
    /// last: the counters fall to zero only once everything else is free.
    guard: StageGuard,
}

impl Drop for Held {
    fn drop(&mut self) {
        // The fields are dropped after this: count the partition as
        // freeing until its reservation and lease are gone.
        let bytes = self.guard.bytes();
        self.guard.advance(Stage::Freeing, bytes);
    }
}

/// A synthesized partition, in the GPU queue or on its way there.
pub(crate) struct Synthesized {
    pub(crate) job: Arc<Job>,
    index: usize,
    assignment: Assignment,
    held: Held,
}

/// A partition whose prover work has started; waiting for a finalizer.
pub(crate) struct Proving {
    pub(crate) job: Arc<Job>,
    index: usize,
    pending: PendingProof,
    held: Held,
    /// The prover worker that started it, and how long its start took.
    worker: usize,
    start_took: Duration,
}

/// Starts the engine's threads: synthesis workers (the critical lane's
/// last), one thread per prover worker, bulk finalizers and the critical
/// lane's finalizer.
pub(crate) fn spawn_all(shared: &Arc<Shared>, provers: Vec<(Arc<dyn ProverBackend>, Takes)>) -> std::io::Result<Vec<JoinHandle<()>>> {
    let mut threads = Vec::new();
    let mut spawn = |name: String, f: Box<dyn FnOnce(Arc<Shared>) + Send>| -> std::io::Result<()> {
        let s = shared.clone();
        threads.push(std::thread::Builder::new().name(name).spawn(move || f(s))?);
        Ok(())
    };
    for i in 0..shared.config.synthesis_workers {
        spawn(format!("kiln-synth-{i}"), Box::new(|s| synthesis_worker(s, Takes::Any)))?;
    }
    for i in 0..shared.config.critical_lane_workers {
        spawn(format!("kiln-synth-crit-{i}"), Box::new(|s| synthesis_worker(s, Takes::Only(Lane::Critical))))?;
    }
    for (i, (backend, takes)) in provers.into_iter().enumerate() {
        spawn(format!("kiln-gpu-{i}"), Box::new(move |s| gpu_worker(s, i, backend, takes)))?;
    }
    // Bulk finalizers run below normal priority like the bulk pool (they
    // verify, and pack answers such as NI-PoRep's aggregate); one more
    // takes only critical partitions, so a critical proof is never
    // assembled behind bulk ones waiting for their GPU work.
    let nice = shared.config.bulk_nice;
    for i in 0..shared.config.finalizer_threads {
        spawn(format!("kiln-final-{i}"), Box::new(move |s| finalizer(s, Takes::Only(Lane::Bulk), nice)))?;
    }
    spawn("kiln-final-crit".into(), Box::new(|s| finalizer(s, Takes::Only(Lane::Critical), 0)))?;
    Ok(threads)
}

/// Text of a caught panic.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "(no message)".into())
}

fn fail(shared: &Shared, job: &Arc<Job>, message: String) {
    tracing::warn!(job = %job.id, kind = %job.kind, error = %message, "job failed");
    shared.end_job(job, JobOutcome::Failed(message));
}

/// Which partitions a worker takes (most urgent first among them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Takes {
    Any,
    /// Only `Critical` ones: a worker reserved for the critical lane.
    Only(Lane),
}

impl Takes {
    fn wants(self, priority: Priority) -> bool {
        match self {
            Takes::Any => true,
            Takes::Only(lane) => Lane::of(priority) == lane,
        }
    }
}

/// Errors that may come from a faulty device rather than from the job:
/// a backend failure, or a proof that did not verify.
fn is_prover_fault(e: &ProveError) -> bool {
    // A parameter file changed under the proof: the retry opens it again.
    // Device memory taken by other proofs is free again after them.
    device_fault(e).is_some() || matches!(e, ProveError::Params(ParamsError::Changed { .. }) | ProveError::DeviceFull { .. })
}

/// How an error counts against the device it came from (`None`: it is
/// not the device's: the job's, or a parameter file's).
fn device_fault(e: &ProveError) -> Option<FaultKind> {
    match e {
        ProveError::DeviceLost { .. } => Some(FaultKind::Sticky),
        // A proof that does not verify from a satisfied witness (checked
        // before the prover starts) was miscomputed.
        ProveError::Backend { .. } | ProveError::NotVerified(_) => Some(FaultKind::Error),
        _ => None,
    }
}

/// Counts a prover fault on `worker`'s device, quarantining the device
/// (and, when it was the last, failing every job) if the fault calls for
/// it. Returns whether the partition's retry is charged to it: not when
/// its device is quarantined (the fault is the device's, and the retry
/// runs on another).
fn prover_fault(shared: &Shared, worker: usize, kind: FaultKind, message: &str) -> bool {
    let verdict = shared.health.fault(worker, kind, message);
    if let Some(why) = &verdict.quarantined_now {
        let device = shared.health.device_of(worker);
        tracing::error!(%device, reason = %why, "PROVER DEVICE QUARANTINED: its workers take no more work; its partitions are retried on the other devices");
        // Its workers give up waiting for work; the others re-check what they take.
        shared.gpu_queue.wake_takers();
    }
    if let Some(why) = verdict.no_prover_now {
        shared.no_prover_left(&why);
    }
    !verdict.quarantined
}

/// The prover returned `e` for a partition `worker` took: counted against
/// its device when it is the device's fault, then retried or failed.
fn prover_error(shared: &Shared, job: &Arc<Job>, index: usize, held: Held, worker: usize, e: &ProveError) {
    let message = format!("partition {index}: {e}");
    // Memory the device's other proofs held is no one's fault: the retry
    // is not charged to the partition or to the device.
    let charged = !matches!(e, ProveError::DeviceFull { .. }) && device_fault(e).is_none_or(|kind| prover_fault(shared, worker, kind, &message));
    retry_or_fail(shared, job, index, held, is_prover_fault(e), charged, message);
}

/// `worker`'s device failed on a partition in a way that is always its
/// own (a panic, a hang): counted as `kind`, and the partition retried.
fn retry_device_fault(shared: &Shared, job: &Arc<Job>, index: usize, held: Held, worker: usize, kind: FaultKind, message: String) {
    let charged = prover_fault(shared, worker, kind, &message);
    retry_or_fail(shared, job, index, held, true, charged, message);
}

/// Which watched prover call a partition waited on.
#[derive(Clone, Copy)]
enum WatchedCall {
    Start,
    Finish,
}

/// The answer of a watched prover call with the partition's holdings, or
/// `None` once a call without one is dealt with: an abandoned call's answer
/// is dropped by its thread, an expired one is a hang charged to the device,
/// and one whose device was quarantined meanwhile is retried uncharged.
fn answered<T>(
    shared: &Shared,
    job: &Arc<Job>,
    index: usize,
    held: Held,
    worker: usize,
    waited: Waited<T>,
    call: WatchedCall,
) -> Option<(std::thread::Result<Result<T, ProveError>>, Held)> {
    let device = || shared.health.device_of(worker);
    match waited {
        Waited::Done(result) => Some((*result, held)),
        Waited::Abandoned => None,
        Waited::Expired(limit) => {
            let what = match call {
                WatchedCall::Start => "did not take the partition",
                WatchedCall::Finish => "gave no answer",
            };
            let message = format!("partition {index}: the prover on {} {what} within {:.1} s (prover watchdog)", device(), limit.as_secs_f64());
            retry_device_fault(shared, job, index, held, worker, FaultKind::Hang, message);
            None
        }
        Waited::DeviceQuarantined => {
            let when = match call {
                WatchedCall::Start => "started",
                WatchedCall::Finish => "ran",
            };
            let message = format!("partition {index}: its prover device {} was quarantined while it {when}", device());
            retry_or_fail(shared, job, index, held, true, false, message);
            None
        }
    }
}

/// After the prover failed on a partition: queue it again from synthesis
/// (its buffers are gone) if it may be retried, else fail the job. The
/// partition's memory is freed first either way. An uncharged retry (its
/// device was quarantined) does not count against `partition_retries`.
/// A retry of a partition whose a/b/c were left to the prover takes the
/// reference path.
fn retry_or_fail(shared: &Shared, job: &Arc<Job>, index: usize, held: Held, retryable: bool, charged: bool, message: String) {
    let (retries, reference) = (held.retries, held.reference || held.products_on_prover);
    drop(held);
    if !retryable || (charged && retries >= shared.config.partition_retries) || job.is_stopped() {
        return fail(shared, job, message);
    }
    let retries = if charged { retries + 1 } else { retries };
    tracing::warn!(job = %job.id, partition = index, retries, charged, error = %message, "prover failed; retrying the partition");
    requeue(shared, job, PartitionTask { job: job.clone(), index, retries, reference }, message);
}

/// A partition whose a/b/c were left to the prover was rejected (a row
/// failed a*b = c there) or could not be synthesized that way: it is done
/// again on the reference path (not counted as a retry), logged and counted.
fn redo_on_reference_path(shared: &Shared, job: &Arc<Job>, index: usize, held: Held, message: String) {
    let retries = held.retries;
    drop(held);
    shared.totals.products_rejected.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(job = %job.id, kind = %job.kind, partition = index, reason = %message,
        "a/b/c left to the prover were rejected; redoing the partition on the gadget path with a/b/c on the host");
    requeue(shared, job, PartitionTask { job: job.clone(), index, retries, reference: true }, message);
}

fn requeue(shared: &Shared, job: &Arc<Job>, task: PartitionTask, message: String) {
    if job.is_stopped() {
        return;
    }
    job.partition_requeued();
    if shared.synth_queue.push(job.priority, (job.seq, task.index), task, || false, |_| {}).is_err() {
        fail(shared, job, message); // the engine is stopping
    }
}

/// Takes partitions in priority order (only critical ones for a
/// critical-lane worker) and synthesizes them, each in its job's lane.
pub(crate) fn synthesis_worker(shared: Arc<Shared>, takes: Takes) {
    while let Some(task) = shared.synth_queue.pop_if(|p| takes.wants(p), |_| {}) {
        if task.job.is_stopped() {
            continue;
        }
        shared.synthesis_busy.fetch_add(1, Ordering::Relaxed);
        let job = task.job.clone();
        let index = task.index;
        // A bug anywhere below fails this job, never the worker.
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| synthesize_partition(&shared, task))) {
            fail(&shared, &job, format!("partition {index}: the engine panicked: {}", panic_message(&*p)));
        }
        shared.synthesis_busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Acquire, synthesize and hand one partition to the GPU queue.
fn synthesize_partition(shared: &Arc<Shared>, task: PartitionTask) {
    let PartitionTask { job, index, retries, reference } = task;
    let span = tracing::info_span!("partition", job = %job.id, kind = %job.kind, partition = index);
    let _entered = span.enter();
    let abort = || job.is_stopped() || shared.is_stopping();

    // Parameters: generate if missing (outside the gate: it can take
    // minutes and holds no memory of the budget), then size the partition.
    let t_srs = Instant::now();
    if let Err(e) = shared.srs.ensure_file(&job.srs) {
        return fail(shared, &job, e);
    }
    let params = match shared.srs.probe(&job.srs) {
        Ok(p) => p,
        Err(e) => return fail(shared, &job, format!("cannot read the job's parameters: {e}")),
    };
    let Some(source) = job.source() else { return }; // the job has ended
    let shape = match catch_unwind(AssertUnwindSafe(|| source.partition_shape(&params, index))) {
        Ok(s) => s,
        Err(p) => return fail(shared, &job, format!("partition {index}: sizing panicked: {}", panic_message(&*p))),
    };
    let compiled = if shared.config.compile_circuits { shared.circuits.compiled(&job.srs.id) } else { None };
    let deferred = crate::products::plan(shared.config.device_products, compiled, &params, &shared.backends, reference);
    let footprint = match deferred {
        Some(_) => PartitionFootprint::witness_only(&shape, &shared.config),
        None => PartitionFootprint::of(&shape, &shared.config),
    };
    let srs_bytes = shared.srs.hot_bytes(&job.srs.id, &params);
    if let Err(e) = check_fits(shared, Lane::of(job.priority), &job.srs, srs_bytes, &footprint) {
        return fail(shared, &job, format!("job refused: {e}"));
    }
    drop(params);
    job.add_srs_load(t_srs.elapsed());

    let lane = Lane::of(job.priority);
    let allowance = crate::circuits::compile_allowance(&shared.config, &shared.budget, &shape);
    // Settled on this worker's own thread: waiting for another worker's
    // compile inside the lane's pool could deadlock it. Deadline work never
    // waits for a compile; in its pool it goes the ordinary way.
    let wants_turn = shared.config.compile_circuits && deferred.is_none() && lane == Lane::Bulk;
    // The turn to compile (and its memory) is taken before the partition's
    // own memory when the allowance, the parameters and one partition fit
    // together: taken after, it finds the memory gone to the other
    // partitions started meanwhile and every partition goes the gadget way
    // (a 32 GiB PoRep on a 90 GiB budget). Partitions that find the circuit
    // compiling wait for it here, holding nothing.
    let early = wants_turn && srs_bytes + footprint.total() + allowance as u64 <= shared.budget.capacity();
    let early_turn = if early { shared.circuits.take_turn(&job.srs.id, allowance) } else { None };

    let Acquired { lease, buffer, work } = match acquire(shared, &job, &footprint) {
        Acquisition::Got(a) => a,
        Acquisition::Stopped => return,
        Acquisition::Failed(e) => return fail(shared, &job, format!("partition {index}: {e}")),
    };

    job.partition_started();
    let guard = StageGuard::enter(&shared.counters, Stage::Synthesizing, footprint.total(), job.id.clone(), index);
    let products_on_prover = deferred.is_some();
    let mut held = Held { work, footprint, lease, span: span.clone(), guard, retries, products_on_prover, reference, recording: None };

    let t = Instant::now();
    let buffers = assignment_buffers(buffer, &footprint);
    let recorded = OnceLock::new();
    let turn = match (early, wants_turn) {
        (true, _) => early_turn,
        (false, true) => shared.circuits.take_turn(&job.srs.id, allowance),
        (false, false) => None,
    };
    let ctx = if shared.config.compile_circuits {
        let ctx = shared.circuits.context(&job.srs.id, allowance).with_native(shared.config.native_witness && !reference).with_turn(turn.as_ref());
        let ctx = match &deferred {
            Some(r1cs) => ctx.with_deferred_products(r1cs),
            None => ctx,
        };
        ctx.for_partition(&job.kind, index).with_probation(&recorded)
    } else {
        SynthContext::plain()
    };
    let result = shared.lanes.install(lane, || catch_unwind(AssertUnwindSafe(|| source.synthesize(index, buffers, ctx))));
    drop((source, turn));
    held.recording = recorded.into_inner();
    let took = t.elapsed();
    job.add_synthesis(took);
    let assignment = match result {
        Ok(Ok(a)) => a,
        Ok(Err(e)) if products_on_prover => {
            let message = format!("partition {index}: synthesis with a/b/c left to the prover failed: {e}");
            return redo_on_reference_path(shared, &job, index, held, message);
        }
        Ok(Err(e)) => return fail(shared, &job, format!("partition {index}: synthesis failed: {e}")),
        Err(p) => return fail(shared, &job, format!("partition {index}: synthesis panicked: {}", panic_message(&*p))),
    };
    tracing::debug!(synthesis_ms = took.as_millis() as u64, "partition synthesized");

    // The permit (this worker) is held until the GPU queue takes the
    // partition: a full queue stops synthesis instead of piling up
    // synthesized partitions in memory.
    let mut item = Synthesized { job: job.clone(), index, assignment, held };
    let bytes = item.held.guard.bytes();
    item.held.guard.advance(Stage::SynthesizedWaiting, bytes);
    let pushed = shared.gpu_queue.push(job.priority, (job.seq, index), item, abort, |it| {
        it.held.guard.advance(Stage::InGpuQueue, bytes);
    });
    drop(pushed); // refused (cancelled or stopping): dropping frees it
}

/// Starts synthesized partitions on `backend`, most urgent first among
/// those it `takes`; the CPU side of the start (the satisfaction check, a
/// CPU backend's whole prover) runs in the partition's lane
/// ([`crate::lanes::Lanes::run_start`] says where).
///
/// Once its device is quarantined the worker pauses (waiting for work or
/// after the partition at hand) until the device's probation, or stops
/// when it has none. When no live worker takes one lane's partitions (the
/// device that had the critical workers is gone), the others take them too.
pub(crate) fn gpu_worker(shared: Arc<Shared>, worker: usize, backend: Arc<dyn ProverBackend>, takes: Takes) {
    loop {
        prove_partitions(&shared, worker, &backend, takes);
        if !shared.health.is_quarantined(worker) {
            return; // the engine stops
        }
        tracing::warn!(worker, backend = %backend.name(), "prover worker paused: its device is quarantined");
        if !wait_for_probation(&shared, worker) {
            tracing::warn!(worker, backend = %backend.name(), "prover worker stopped: its device is quarantined");
            return;
        }
        tracing::info!(worker, backend = %backend.name(), "prover worker takes work again: its device is on probation");
    }
}

/// Waits until `worker`'s device is back in service (true) or never will
/// be, or the engine stops (false).
fn wait_for_probation(shared: &Shared, worker: usize) -> bool {
    loop {
        if shared.is_stopping() {
            return false;
        }
        match shared.health.probation(worker) {
            Probation::Back => return true,
            Probation::Never => return false,
            // Short sleeps: a stopping engine is not kept waiting.
            Probation::At(at) => std::thread::sleep(at.saturating_duration_since(Instant::now()).min(Duration::from_millis(100))),
        }
    }
}

/// The worker's loop until the engine stops or its device is quarantined.
fn prove_partitions(shared: &Arc<Shared>, worker: usize, backend: &Arc<dyn ProverBackend>, takes: Takes) {
    let on_device = backend.device_status().is_some();
    let quarantined = || shared.health.is_quarantined(worker);
    let wants = |p: Priority| !quarantined() && (takes.wants(p) || !shared.health.lane_served(Lane::of(p)));
    while let Some(item) = shared.gpu_queue.pop_unless(wants, quarantined, |it| {
        let bytes = it.held.guard.bytes();
        it.held.guard.advance(Stage::OnGpu, bytes);
    }) {
        if item.job.is_stopped() {
            continue;
        }
        {
            let mut st = shared.gpu_workers[worker].lock();
            st.current_job_id = Some(item.job.id.to_string());
            st.current_kind_label = Some(item.job.kind.clone());
            st.partitions_started += 1;
        }
        let Synthesized { job, index, assignment, held } = item;
        let span = held.span.clone();
        let _entered = span.enter();
        let products = if held.products_on_prover { &shared.totals.products_by_prover } else { &shared.totals.products_in_synthesis };
        products.fetch_add(1, Ordering::Relaxed);
        let t = Instant::now();
        // The assignment moves into the prover; its pool buffer goes back to
        // the pool when `prove_start` returns (or unwinds). On a device the
        // start is watched: a device that blocks it (a hung copy or
        // placement) costs one limit and is quarantined. A CPU prover's
        // start is the whole proof, and a CPU does not hang that way.
        let lane = Lane::of(job.priority);
        let limit = if on_device { shared.health.start_limit() } else { None };
        let call = {
            let (shared, backend, params, span) = (shared.clone(), backend.clone(), held.lease.params().clone(), span.clone());
            move || {
                let _entered = span.enter();
                let randomness = Randomness::random(&mut rand::thread_rng());
                shared.lanes.run_start(lane, on_device, || prove_start(&*backend, &params, assignment, randomness))
            }
        };
        let waited = watched("kiln-start", call, limit, || job.is_stopped() || shared.is_stopping(), quarantined);
        if lane == Lane::Critical {
            shared.lanes.trim_critical_pool();
        }
        let took = t.elapsed();
        job.add_gpu_compute(took);
        {
            let mut st = shared.gpu_workers[worker].lock();
            st.current_job_id = None;
            st.current_kind_label = None;
        }
        let Some((result, mut held)) = answered(shared, &job, index, held, worker, waited, WatchedCall::Start) else { continue };
        let pending = match result {
            Ok(Ok(p)) => p,
            Ok(Err(e @ ProveError::Synth(SynthError::Unsatisfied { .. }))) if held.products_on_prover => {
                redo_on_reference_path(shared, &job, index, held, format!("partition {index}: {e}"));
                continue;
            }
            Ok(Err(e)) => {
                prover_error(shared, &job, index, held, worker, &e);
                continue;
            }
            Err(p) => {
                let name = backend.name();
                let message = format!("partition {index}: the {name} backend panicked: {}", panic_message(&*p));
                retry_device_fault(shared, &job, index, held, worker, FaultKind::Error, message);
                continue;
            }
        };
        let products = if held.products_on_prover { "prover" } else { "synthesis" };
        tracing::debug!(backend = %backend.name(), products, prove_start_ms = took.as_millis() as u64, "partition started on the prover");
        // The backend is done with the host buffers and its scratch.
        held.work.shrink(held.footprint.scratch_bytes.min(held.work.bytes()));
        let remaining = held.work.bytes();
        held.guard.advance(Stage::Finalizing, remaining);
        let proving = Proving { job: job.clone(), index, pending, held, worker, start_took: took };
        let queued = shared.final_queue.push(job.priority, (job.seq, index), proving, || false, |_| {});
        drop(queued);
    }
}

/// Waits for started partitions (most urgent first among those it
/// `takes`), assembles and verifies their proofs, and ends their jobs.
pub(crate) fn finalizer(shared: Arc<Shared>, takes: Takes, nice: i32) {
    if nice > 0 {
        if let Err(e) = crate::nice::lower_this_thread(nice) {
            tracing::debug!(error = %e, "finalizer runs at normal priority");
        }
    }
    while let Some(item) = shared.final_queue.pop_if(|p| takes.wants(p), |_| {}) {
        let Proving { job, index, pending, held, worker, start_took } = item;
        if job.is_stopped() {
            continue;
        }
        let span = held.span.clone();
        let _entered = span.enter();
        let t = Instant::now();
        let limit = shared.health.watchdog_limit(worker, &job.srs.id);
        // A critical partition's finish (its proof's check spawns rayon
        // tasks) runs in the critical lane's pool, not behind bulk work in
        // rayon's global one.
        let lane = Lane::of(job.priority);
        let pools = shared.clone();
        let finish_in_lane = move || if lane == Lane::Critical { pools.lanes.install(lane, || finish(pending)) } else { finish(pending) };
        let waited = watched("kiln-finish", finish_in_lane, limit, || job.is_stopped() || shared.is_stopping(), || shared.health.is_quarantined(worker));
        let took = t.elapsed();
        job.add_gpu_compute(took);
        let Some((result, mut held)) = answered(&shared, &job, index, held, worker, waited, WatchedCall::Finish) else { continue };
        let proved = match result {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                prover_error(&shared, &job, index, held, worker, &e);
                continue;
            }
            Err(p) => {
                let message = format!("partition {index}: proof assembly panicked: {}", panic_message(&*p));
                retry_device_fault(&shared, &job, index, held, worker, FaultKind::Error, message);
                continue;
            }
        };
        shared.health.succeeded(worker, &job.srs.id, start_took + took);
        let phases: Vec<String> = proved.timings.phases.iter().map(|(n, d)| format!("{n}={}ms", d.as_millis())).collect();
        tracing::info!(phases = %phases.join(" "), "partition proved and verified");
        shared.totals.partitions_proved.fetch_add(1, Ordering::Relaxed);
        // The structure it recorded (if it was the first of its circuit) is sound.
        if let Some(recording) = held.recording.take() {
            recording.confirm();
        }
        // Free the partition before packing the answer.
        drop(held);
        kiln_memory::trim_heap();
        match job.partition_proved(index, proved) {
            Progress::Pending | Progress::Ended => {}
            Progress::AllProved(proofs) => {
                let Some(source) = job.source() else { continue }; // ended meanwhile
                match catch_unwind(AssertUnwindSafe(move || source.finalize(proofs))) {
                    Ok(Ok(proof)) => {
                        let timings = job.timings();
                        shared.end_job(&job, JobOutcome::Completed { proof, timings });
                    }
                    Ok(Err(e)) => fail(&shared, &job, format!("packing the proofs failed: {e}")),
                    Err(p) => fail(&shared, &job, format!("packing the proofs panicked: {}", panic_message(&*p))),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job too large for a device's memory (a 32 GiB test setup on an
    /// 80 GB GPU) fails at once with the reason; it is not the device's
    /// fault, so it is neither retried nor counted towards a quarantine.
    #[test]
    fn too_little_device_memory_is_the_jobs_failure_not_the_devices() {
        let e = ProveError::Memory("this test setup's points take 44.1 GiB of device memory".into());
        assert!(device_fault(&e).is_none());
        assert!(!is_prover_fault(&e));
        let e = ProveError::Backend { backend: "gpu", message: "an illegal address".into() };
        assert_eq!(device_fault(&e), Some(FaultKind::Error));
    }
}
