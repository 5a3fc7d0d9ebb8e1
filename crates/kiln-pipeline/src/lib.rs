//! kiln-pipeline: the proving engine. It turns jobs into partitions and
//! keeps the prover busy inside one host memory budget.
//!
//! The engine knows jobs, partitions, bytes and priorities, never proof
//! kinds: a proof kind is a [`JobSource`] implementation (kiln-filecoin's,
//! or the built-in [`synthetic::SyntheticJob`]).
//!
//! # How a partition flows
//! 1. [`Engine::submit`] checks the job can ever fit (one partition's
//!    footprint, computed from its circuit's dimensions, plus its parameters
//!    against the budget) and queues its partitions by priority
//!    (`Critical > High > Normal > Low`, FIFO within a level).
//! 2. A synthesis worker takes the most urgent partition and, at the acquire
//!    gate, makes its parameters hot (reserved in the budget), checks out one
//!    pool buffer for a/b/c/aux (aux alone when every prover computes a/b/c
//!    on its GPU from the compiled circuit: `EngineConfig::device_products`)
//!    and reserves the prover's scratch. Only then does it synthesize,
//!    straight into the pool buffer. Critical-lane
//!    workers take only `Critical` partitions, so a critical job never waits
//!    for a worker busy with a large partition.
//! 3. It hands the partition to the bounded GPU queue, **holding its permit
//!    (itself) until the queue accepts it**: at most `synthesis_workers +
//!    critical_lane_workers + 2 * gpu_queue_depth` partitions are ever
//!    synthesized but not started (critical partitions have their own room).
//! 4. A GPU worker runs `prove_start`; when it returns the pool buffer is
//!    back in the pool and the reservation shrinks to bookkeeping.
//! 5. A finalizer runs `finish` (assembly + verification); the job's proofs
//!    are packed by [`JobSource::finalize`] in partition order.
//!
//! Partitions of `Critical` jobs run in the **critical lane** (deadline
//! work such as WinningPoSt): their own acquire gate, a reserve in the
//! budget bulk work leaves free, their own buffer pool, rayon pool, prover
//! workers (high-priority GPU streams) and finalizer, while bulk work runs
//! in a rayon pool of lowered OS priority; so a critical job takes about as
//! long under a full bulk load as on an idle engine (`EngineConfig`'s
//! `critical_*` and `bulk_*` settings).
//!
//! Every buffer is counted by [`Stage`] (see [`EngineStatus::buffers`]);
//! a failure or panic in one partition fails its job only. A prover fault
//! (an error, a proof that does not verify, a wait past the watchdog) is
//! retried from synthesis; a device with a sticky fault, a hang or
//! repeated faults is quarantined and its work moves to the others
//! ([`EngineStatus::provers`]; `health.rs`).
//!
//! ```no_run
//! use std::sync::Arc;
//! use kiln_pipeline::{synthetic::SyntheticJob, Engine, EngineConfig, JobOutcome, JobRequest, Priority};
//! use kiln_synth::workload::WorkloadKind;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let engine = Engine::start(EngineConfig { memory_budget_bytes: Some(1 << 30), ..Default::default() }, vec![])?;
//! let job = Arc::new(SyntheticJob::new(WorkloadKind::FilecoinLike, 12, 4, 2, "/tmp/kiln-params"));
//! let sub = engine.submit(JobRequest::new("winning-1", Priority::Critical, job))?;
//! if let JobOutcome::Completed { proof, timings } = engine.wait(&sub.job_id, None).await {
//!     println!("{} bytes in {:?}", proof.len(), timings.total);
//! }
//! engine.shutdown(std::time::Duration::from_secs(5)).await;
//! # Ok(()) }
//! ```

/// The README's example, compiled and run as a doc test so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod acquire;
mod admission;
mod buffers;
mod circuits;
mod config;
mod counters;
mod engine;
mod health;
mod job;
mod jobs;
mod lanes;
mod nice;
mod products;
mod queue;
mod registry;
mod requests;
mod shared;
mod srs;
mod status;
pub mod synthetic;
mod wait;
mod watchdog;
mod workers;

pub use buffers::PartitionFootprint;
pub use config::EngineConfig;
pub use counters::{BufferCounters, Stage, StageCount};
pub use engine::{Engine, EngineError};
pub use health::{DeviceHealth, ProverHealth};
pub use job::{
    shape_from_params, JobOutcome, JobRequest, JobSource, JobTimings, Priority, SrsGenerator, SrsOpener, SrsSpec, SubmitError, Submitted,
};
pub use products::DeviceProducts;
pub use srs::{EvictResult, PreloadResult, SrsStatus, SrsTier};
pub use status::{EngineStatus, GpuWorkerStatus, JobTotals, LaneStatus, QueueStatus, RequestStatus, WorkerStatus};
