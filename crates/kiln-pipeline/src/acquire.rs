//! The acquire gate: what a synthesis worker takes before it synthesizes a
//! partition (its parameters made hot and leased, one pool buffer, the
//! scratch and bookkeeping reservation), all or nothing.
//!
//! One acquirer per lane at a time, under the lane's gate, so two workers
//! never each hold part of what both need: whoever waits at a gate holds
//! nothing. The lanes have separate gates so a bulk acquirer waiting for
//! memory never holds a critical one up; they draw on the same budget, so
//! a bulk acquirer must not hold part of what a critical one waits for
//! either. It does not: critical reservations wait in the budget's
//! priority queue, and while one waits a bulk acquirer does not start, and
//! one that is waiting gives back what it holds; both wait until the
//! critical waiters are served, then start again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_memory::{MemoryClass, MemoryReservation, PinnedBuffer};

use crate::buffers::PartitionFootprint;
use crate::engine::Shared;
use crate::jobs::Job;
use crate::lanes::Lane;
use crate::srs::SrsLease;
use crate::wait::{block_on_abortable, TICK};

/// What a partition holds from its memory grant on.
pub(crate) struct Acquired {
    pub(crate) lease: SrsLease,
    pub(crate) buffer: PinnedBuffer,
    /// Scratch + bookkeeping bytes (the pool buffer pays for itself).
    pub(crate) work: MemoryReservation,
}

pub(crate) enum Acquisition {
    Got(Acquired),
    /// The job ended or the engine is stopping.
    Stopped,
    Failed(String),
}

enum Attempt {
    Done(Acquisition),
    /// A bulk attempt gave way to a waiting critical reservation.
    YieldedToCritical,
}

/// Acquires what a partition of `job` with `footprint` needs, in its lane;
/// the time spent making its parameters hot is added to the job's.
pub(crate) fn acquire(shared: &Shared, job: &Arc<Job>, footprint: &PartitionFootprint) -> Acquisition {
    let lane = Lane::of(job.priority);
    let stopped = || job.is_stopped() || shared.is_stopping();
    loop {
        match attempt(shared, job, footprint, lane, &stopped) {
            Attempt::Done(outcome) => return outcome,
            Attempt::YieldedToCritical => {
                tracing::debug!("bulk acquisition gave way to a waiting critical reservation");
                while shared.budget.priority_waiters() > 0 {
                    if stopped() {
                        return Acquisition::Stopped;
                    }
                    std::thread::sleep(TICK);
                }
            }
        }
    }
}

fn attempt(shared: &Shared, job: &Arc<Job>, footprint: &PartitionFootprint, lane: Lane, stopped: &dyn Fn() -> bool) -> Attempt {
    let (budget, pool, gate) = match lane {
        Lane::Bulk => (&shared.budget, &shared.pool, &shared.acquire_gate),
        Lane::Critical => {
            let (budget, pool) = shared.lanes.critical_memory();
            (budget, pool, &shared.lanes.critical_gate)
        }
    };
    let _gate = gate.lock();
    let yields = || lane == Lane::Bulk && budget.priority_waiters() > 0;
    let abort = || stopped() || yields();
    // Why a wait ended without its memory.
    let interrupted = || if stopped() { Attempt::Done(Acquisition::Stopped) } else { Attempt::YieldedToCritical };
    if stopped() {
        return Attempt::Done(Acquisition::Stopped);
    }
    // Not even memory that needs no waiting (an idle pool buffer): the
    // critical waiter may be waiting for just that.
    if yields() {
        return Attempt::YieldedToCritical;
    }
    let t_lease = Instant::now();
    let lease = match shared.srs.lease(&job.srs, budget, lane, abort) {
        Ok(Some(lease)) => lease,
        Ok(None) => return interrupted(),
        Err(e) => return Attempt::Done(Acquisition::Failed(e)),
    };
    job.add_srs_load(t_lease.elapsed());
    let waiting_since = Instant::now();
    let relieve = || relieve_memory(shared, job, waiting_since.elapsed());
    let buffer = match block_on_abortable(pool.checkout_async(footprint.buffer_request_bytes()), abort, relieve) {
        None => return interrupted(),
        Some(Ok(b)) => b,
        Some(Err(e)) => return Attempt::Done(Acquisition::Failed(format!("no buffer: {e}"))),
    };
    let reserve = budget.reserve(footprint.work_bytes(), MemoryClass::Synthesis);
    let work = match block_on_abortable(reserve, abort, relieve) {
        None => return interrupted(),
        Some(Ok(r)) => r,
        Some(Err(e)) => return Attempt::Done(Acquisition::Failed(e.to_string())),
    };
    Attempt::Done(Acquisition::Got(Acquired { lease, buffer, work }))
}

/// Run while waiting for memory: idle parameters, idle pool buffers,
/// idle critical buffers beyond the lane's reserve (a critical partition
/// that failed in synthesis never reached the prover's trim) and compiled
/// circuits go for the waiters' shortfall.
fn relieve_memory(shared: &Shared, job: &Job, waited: Duration) {
    shared.srs.relieve(Some(&job.srs.id), waited);
    shared.lanes.trim_critical_pool();
    crate::circuits::relieve(&shared.circuits, &shared.budget, !shared.counters.snapshot().is_idle());
}
