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
use std::sync::Arc;
use std::time::Instant;

use kiln_groth16::{finish, prove_start, PendingProof, ProveError, ProverBackend, Randomness};
use kiln_memory::{MemoryClass, MemoryReservation};
use kiln_synth::{Assignment, SynthContext};

use crate::buffers::{assignment_buffers, PartitionFootprint};
use crate::counters::{Stage, StageGuard};
use crate::engine::{check_fits, Shared};
use crate::job::{JobOutcome, Priority};
use crate::jobs::{Job, Progress};
use crate::srs::SrsLease;
use crate::wait::block_on_abortable;

/// A partition waiting for a synthesis worker.
pub(crate) struct PartitionTask {
    pub(crate) job: Arc<Job>,
    pub(crate) index: usize,
    /// Earlier attempts that failed in the prover (see [`retry_or_fail`]).
    pub(crate) retries: u32,
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
}

/// Text of a caught panic.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "(no message)".into())
}

fn fail(shared: &Shared, job: &Arc<Job>, message: String) {
    tracing::warn!(job = %job.id, kind = %job.kind, error = %message, "job failed");
    shared.end_job(job, JobOutcome::Failed(message));
}

/// Takes partitions in priority order; with `critical_only`, only
/// `Critical` ones (the critical lane).
/// Errors that may come from a faulty device rather than from the job:
/// a backend failure, or a proof that did not verify.
fn is_prover_fault(e: &ProveError) -> bool {
    matches!(e, ProveError::Backend { .. } | ProveError::NotVerified(_))
}

/// After the prover failed on a partition: queue it again from synthesis
/// (its buffers are gone) if it may be retried, else fail the job. The
/// partition's memory is freed first either way.
fn retry_or_fail(shared: &Shared, job: &Arc<Job>, index: usize, held: Held, retryable: bool, message: String) {
    let retries = held.retries;
    drop(held);
    if !retryable || retries >= shared.config.partition_retries || job.is_stopped() {
        return fail(shared, job, message);
    }
    tracing::warn!(job = %job.id, partition = index, attempt = retries + 1, error = %message, "prover failed; retrying the partition");
    job.partition_requeued();
    let task = PartitionTask { job: job.clone(), index, retries: retries + 1 };
    if shared.synth_queue.push(job.priority, (job.seq, index), task, || false, |_| {}).is_err() {
        fail(shared, job, message); // the engine is stopping
    }
}

pub(crate) fn synthesis_worker(shared: Arc<Shared>, critical_only: bool) {
    let wanted = |p: Priority| !critical_only || p == Priority::Critical;
    while let Some(task) = shared.synth_queue.pop_if(wanted, |_| {}) {
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
    let PartitionTask { job, index, retries } = task;
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
    let shape = match catch_unwind(AssertUnwindSafe(|| job.source.partition_shape(&params, index))) {
        Ok(s) => s,
        Err(p) => return fail(shared, &job, format!("partition {index}: sizing panicked: {}", panic_message(&*p))),
    };
    let footprint = PartitionFootprint::of(&shape, &shared.config);
    if let Err(e) = check_fits(shared, &job.srs, params.size_bytes(), &footprint) {
        return fail(shared, &job, format!("job refused: {e}"));
    }
    drop(params);
    let mut srs_time = t_srs.elapsed();

    // Memory, all under the gate: see `Shared::acquire_gate`.
    let gate = shared.acquire_gate.lock();
    if abort() {
        return;
    }
    let t_lease = Instant::now();
    let lease = match shared.srs.lease(&job.srs, abort) {
        Ok(Some(lease)) => lease,
        Ok(None) => return,
        Err(e) => return fail(shared, &job, e),
    };
    srs_time += t_lease.elapsed();
    job.add_srs_load(srs_time);
    let waiting_since = Instant::now();
    let relieve = || {
        shared.srs.relieve(Some(&job.srs.id), waiting_since.elapsed());
        crate::circuits::relieve(&shared.circuits, &shared.budget);
    };
    let Some(buffer) = block_on_abortable(shared.pool.checkout_async(footprint.buffer_request_bytes()), abort, relieve) else {
        return;
    };
    let buffer = match buffer {
        Ok(b) => b,
        Err(e) => return fail(shared, &job, format!("partition {index}: no buffer: {e}")),
    };
    let reserve = shared.budget.reserve(footprint.work_bytes(), MemoryClass::Synthesis);
    let work = match block_on_abortable(reserve, abort, relieve) {
        None => return,
        Some(Ok(r)) => r,
        Some(Err(e)) => return fail(shared, &job, format!("partition {index}: {e}")),
    };
    drop(gate);

    job.partition_started();
    let guard = StageGuard::enter(&shared.counters, Stage::Synthesizing, footprint.total(), job.id.clone(), index);
    let held = Held { work, footprint, lease, span: span.clone(), guard, retries };

    let t = Instant::now();
    let buffers = assignment_buffers(buffer, &footprint);
    let allowance = crate::circuits::compile_allowance(&shared.config, &shared.budget, &shape);
    let ctx = if shared.config.compile_circuits {
        shared.circuits.context(&job.srs.id, allowance).with_native(shared.config.native_witness).for_partition(&job.kind, index)
    } else {
        SynthContext::plain()
    };
    let result = catch_unwind(AssertUnwindSafe(|| job.source.synthesize(index, buffers, ctx)));
    let took = t.elapsed();
    job.add_synthesis(took);
    let assignment = match result {
        Ok(Ok(a)) => a,
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

pub(crate) fn gpu_worker(shared: Arc<Shared>, worker: usize, backend: Arc<dyn ProverBackend>) {
    while let Some(item) = shared.gpu_queue.pop(|it| {
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
        let Synthesized { job, index, assignment, mut held } = item;
        let span = held.span.clone();
        let _entered = span.enter();
        let t = Instant::now();
        let params = held.lease.params().clone();
        // The assignment moves into the prover; its pool buffer goes back to
        // the pool when `prove_start` returns (or unwinds).
        let result = catch_unwind(AssertUnwindSafe(|| {
            prove_start(&*backend, &params, assignment, Randomness::random(&mut rand::thread_rng()))
        }));
        let took = t.elapsed();
        job.add_gpu_compute(took);
        {
            let mut st = shared.gpu_workers[worker].lock();
            st.current_job_id = None;
            st.current_kind_label = None;
        }
        let pending = match result {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                let retryable = is_prover_fault(&e);
                retry_or_fail(&shared, &job, index, held, retryable, format!("partition {index}: {e}"));
                continue;
            }
            Err(p) => {
                let name = backend.name();
                let message = format!("partition {index}: the {name} backend panicked: {}", panic_message(&*p));
                retry_or_fail(&shared, &job, index, held, true, message);
                continue;
            }
        };
        tracing::debug!(backend = %backend.name(), prove_start_ms = took.as_millis() as u64, "partition started on the prover");
        // The backend is done with the host buffers and its scratch.
        held.work.shrink(held.footprint.scratch_bytes.min(held.work.bytes()));
        let remaining = held.work.bytes();
        held.guard.advance(Stage::Finalizing, remaining);
        let proving = Proving { job: job.clone(), index, pending, held };
        let queued = shared.final_queue.push(job.priority, (job.seq, index), proving, || false, |_| {});
        drop(queued);
    }
}

pub(crate) fn finalizer(shared: Arc<Shared>) {
    while let Some(item) = shared.final_queue.pop(|_| {}) {
        let Proving { job, index, pending, held } = item;
        if job.is_stopped() {
            continue;
        }
        let span = held.span.clone();
        let _entered = span.enter();
        let t = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| finish(pending)));
        job.add_gpu_compute(t.elapsed());
        let proved = match result {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                let retryable = is_prover_fault(&e);
                retry_or_fail(&shared, &job, index, held, retryable, format!("partition {index}: {e}"));
                continue;
            }
            Err(p) => {
                let message = format!("partition {index}: proof assembly panicked: {}", panic_message(&*p));
                retry_or_fail(&shared, &job, index, held, true, message);
                continue;
            }
        };
        let phases: Vec<String> = proved.timings.phases.iter().map(|(n, d)| format!("{n}={}ms", d.as_millis())).collect();
        tracing::info!(phases = %phases.join(" "), "partition proved and verified");
        shared.totals.partitions_proved.fetch_add(1, Ordering::Relaxed);
        // Free the partition before packing the answer.
        drop(held);
        kiln_memory::trim_heap();
        match job.partition_proved(index, proved) {
            Progress::Pending | Progress::Ended => {}
            Progress::AllProved(proofs) => {
                let source = job.source.clone();
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
