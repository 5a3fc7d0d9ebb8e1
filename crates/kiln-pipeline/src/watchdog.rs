//! The prover watchdog: a finalizer waits for a partition's prover work
//! (`kiln_groth16::finish`: the device's results, assembly, verification)
//! for a limited time, so a device that never answers costs one limit,
//! not a finalizer, a job and the engine's shutdown.
//!
//! A backend's wait cannot be interrupted (a hung kernel's stream sync
//! blocks its thread), so `finish` runs on a thread of its own and the
//! finalizer waits on a channel: when the limit passes, the job ends or
//! the engine stops, the finalizer moves on and the thread is left to
//! end whenever the backend lets it (dropping the result); the thread
//! holds only the proof's backend state, while the partition's memory
//! (its reservation and parameter lease) stays with the finalizer and is
//! freed or retried at once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use kiln_groth16::{finish, PendingProof, ProveError, ProvedProof};

/// How often a waiting finalizer checks whether to give up early.
const POLL: Duration = Duration::from_millis(20);

/// How a watched wait ended.
pub(crate) enum Waited {
    /// `finish` returned (or panicked). Boxed: a proof is large beside
    /// the other outcomes.
    Done(Box<std::thread::Result<Result<ProvedProof, ProveError>>>),
    /// No answer within the limit.
    Expired(Duration),
    /// The job ended or the engine is stopping: nobody needs the answer.
    Abandoned,
    /// The device was quarantined meanwhile: its answer is not awaited.
    DeviceQuarantined,
}

/// Runs `finish(pending)`, waiting at most `limit` (`None`: inline, with
/// no limit), giving up early when `abandon()` or `quarantined()` turns true.
pub(crate) fn finish_watched(
    pending: PendingProof,
    limit: Option<Duration>,
    abandon: impl Fn() -> bool,
    quarantined: impl Fn() -> bool,
) -> Waited {
    let Some(limit) = limit else {
        return Waited::Done(Box::new(catch_unwind(AssertUnwindSafe(|| finish(pending)))));
    };
    let (tx, rx) = sync_channel(1);
    let spawned = std::thread::Builder::new().name("kiln-finish".into()).spawn(move || {
        // Nobody may be listening any more: that is fine.
        let _ = tx.send(catch_unwind(AssertUnwindSafe(|| finish(pending))));
    });
    if let Err(e) = spawned {
        let message = format!("cannot start a thread to wait for the prover: {e}");
        return Waited::Done(Box::new(Ok(Err(ProveError::Backend { backend: "engine", message }))));
    }
    let started = Instant::now();
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match rx.recv_timeout(left.clamp(Duration::from_millis(1), POLL)) {
            Ok(result) => return Waited::Done(Box::new(result)),
            Err(RecvTimeoutError::Disconnected) => {
                let message = "the thread waiting for the prover ended without an answer".to_string();
                return Waited::Done(Box::new(Ok(Err(ProveError::Backend { backend: "engine", message }))));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        if abandon() {
            return Waited::Abandoned;
        }
        if quarantined() {
            return Waited::DeviceQuarantined;
        }
        if started.elapsed() >= limit {
            return Waited::Expired(limit);
        }
    }
}
