//! The prover watchdog: a worker waits for the prover's part of a
//! partition for a limited time, so a device that never answers costs one
//! limit, not a worker thread, a job and the engine's shutdown. It covers
//! both calls into a backend: `start` (a GPU's placement and witness
//! copies, which a hung device can block) and `finish` (the device's
//! results, assembly, verification).
//!
//! A backend's call cannot be interrupted (a hung kernel's stream sync
//! blocks its thread), so the call runs on a thread of its own and the
//! worker waits on a channel: when the limit passes, the job ends or the
//! engine stops, the worker moves on and the thread is left to end
//! whenever the backend lets it (dropping the result); the thread holds
//! only what the call was given (the proof's backend state, or the
//! witness), while the partition's memory (its reservation and parameter
//! lease) stays with the worker and is freed or retried at once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::time::{Duration, Instant};

use kiln_groth16::ProveError;

/// How often a waiting worker checks whether to give up early.
const POLL: Duration = Duration::from_millis(20);

/// How a watched call ended.
pub(crate) enum Waited<T> {
    /// The call returned (or panicked). Boxed: a proof is large beside
    /// the other outcomes.
    Done(Box<std::thread::Result<Result<T, ProveError>>>),
    /// No answer within the limit.
    Expired(Duration),
    /// The job ended or the engine is stopping: nobody needs the answer.
    Abandoned,
    /// The device was quarantined meanwhile: its answer is not awaited.
    DeviceQuarantined,
}

/// Runs `call` on a thread named `name`, waiting at most `limit` (`None`:
/// inline, with no limit), giving up early when `abandon()` or
/// `quarantined()` turns true.
pub(crate) fn watched<T: Send + 'static>(
    name: &str,
    call: impl FnOnce() -> Result<T, ProveError> + Send + 'static,
    limit: Option<Duration>,
    abandon: impl Fn() -> bool,
    quarantined: impl Fn() -> bool,
) -> Waited<T> {
    let Some(limit) = limit else {
        return Waited::Done(Box::new(catch_unwind(AssertUnwindSafe(call))));
    };
    let (tx, rx) = sync_channel(1);
    let spawned = std::thread::Builder::new().name(name.into()).spawn(move || {
        // Nobody may be listening any more: that is fine.
        let _ = tx.send(catch_unwind(AssertUnwindSafe(call)));
    });
    if let Err(e) = spawned {
        let message = format!("cannot start a thread to call the prover: {e}");
        return Waited::Done(Box::new(Ok(Err(ProveError::Backend { backend: "engine", message }))));
    }
    let started = Instant::now();
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match rx.recv_timeout(left.clamp(Duration::from_millis(1), POLL)) {
            Ok(result) => return Waited::Done(Box::new(result)),
            Err(RecvTimeoutError::Disconnected) => {
                let message = "the thread calling the prover ended without an answer".to_string();
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
