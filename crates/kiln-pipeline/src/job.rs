//! What callers hand the engine and what they get back: [`JobRequest`],
//! [`JobSource`] (the one trait a proof kind implements), [`JobOutcome`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kiln_groth16::{ParamsFile, ProvedProof};
use kiln_memory::MemoryBudget;
use kiln_synth::{Assignment, AssignmentBuffers, CircuitShape, SynthContext, SynthError};
use serde::{Deserialize, Serialize};

/// How urgent a job is. Synthesis workers and GPU workers always take the
/// most urgent partition first (`Critical > High > Normal > Low`), and
/// partitions of one level in submission order (FIFO), so a `Critical` job
/// overtakes everything queued before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
    /// Must finish within a short deadline (e.g. WinningPoSt within an epoch).
    Critical,
}

impl Priority {
    /// Every level, least urgent first.
    pub const ALL: [Priority; 4] = [Priority::Low, Priority::Normal, Priority::High, Priority::Critical];

    /// A stable lowercase name, for metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }
}

/// Makes a missing parameter file: called with the path the file must appear
/// at (atomically, e.g. by `kiln_groth16::setup::load_or_generate`).
pub type SrsGenerator = Arc<dyn Fn(&Path) -> Result<(), String> + Send + Sync>;

/// Makes parameters that have no `.params` file, such as a test setup held
/// as scalars (`kiln_groth16::setup::test_setup`): called once per id when
/// the engine first needs them, with the budget its working memory must be
/// reserved from while it runs. The result is kept like a mapped file
/// (hot while its [`ParamsFile::size_bytes`] are reserved).
pub type SrsOpener = Arc<dyn Fn(&MemoryBudget) -> Result<ParamsFile, String> + Send + Sync>;

/// Which Groth16 parameters (SRS) a job proves against.
///
/// Two specs with the same `id` must name the same parameters: the engine
/// keeps one mapping per id and shares it between jobs.
#[derive(Clone)]
pub struct SrsSpec {
    /// A stable name, e.g. `"porep-32g"` (shown in status, used by preload/evict).
    pub id: String,
    /// The `.params` file (for parameters made by an opener, the file that
    /// names them, e.g. a test setup's `.vk`: shown in status only).
    pub path: PathBuf,
    /// How to make the file when it does not exist (test and demo
    /// parameters); `None` means a missing file fails the job.
    pub generate: Option<SrsGenerator>,
    /// Parameters that are made, not read from `path` (test setups).
    pub open: Option<SrsOpener>,
}

impl SrsSpec {
    /// Parameters that must already exist on disk.
    pub fn existing(id: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        SrsSpec { id: id.into(), path: path.into(), generate: None, open: None }
    }

    /// A file made by `generate` when it does not exist yet.
    pub fn generated(id: impl Into<String>, path: impl Into<PathBuf>, generate: SrsGenerator) -> Self {
        SrsSpec { id: id.into(), path: path.into(), generate: Some(generate), open: None }
    }

    /// Parameters made by `open` (no `.params` file); `path` names them in status.
    pub fn opened(id: impl Into<String>, path: impl Into<PathBuf>, open: SrsOpener) -> Self {
        SrsSpec { id: id.into(), path: path.into(), generate: None, open: Some(open) }
    }
}

impl fmt::Debug for SrsSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SrsSpec")
            .field("id", &self.id)
            .field("path", &self.path)
            .field("generate", &self.generate.is_some())
            .field("open", &self.open.is_some())
            .finish()
    }
}

/// One proof request, as a proof-kind crate describes it to the engine.
///
/// The engine knows jobs, partitions, bytes and priorities; everything about
/// what is being proved lives behind this trait. A job of `N` partitions is
/// `N` independent Groth16 proofs against one SRS, packed by
/// [`finalize`](Self::finalize) into the answer.
///
/// Methods are called from engine threads (synthesis workers, finalizers),
/// possibly concurrently for different partitions. A panic in any of them
/// fails this job only.
///
/// ```
/// use kiln_pipeline::{JobSource, SrsSpec};
/// use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
/// use kiln_synth::{Assignment, AssignmentBuffers, SynthContext, SynthError};
///
/// /// Three proofs of one circuit; the answer is their 192-byte proofs, concatenated.
/// struct ThreeSquares;
///
/// impl JobSource for ThreeSquares {
///     fn kind_label(&self) -> &str { "three-squares" }
///     fn srs(&self) -> SrsSpec { SrsSpec::existing("squares-v1", "/var/lib/params/squares-v1.params") }
///     fn num_partitions(&self) -> usize { 3 }
///     fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
///         let circuit = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 10, 1).with_witness(i as u64);
///         ctx.synthesize(|| Ok(circuit), buffers)
///     }
/// }
/// assert_eq!(ThreeSquares.srs().id, "squares-v1");
/// ```
pub trait JobSource: Send + Sync + 'static {
    /// A label for statistics, e.g. `"porep-c2"` or `"synthetic"`. Never
    /// used for scheduling decisions.
    fn kind_label(&self) -> &str;

    /// The parameters every partition is proved against.
    fn srs(&self) -> SrsSpec;

    /// How many partitions (independent proofs) the job has; at least 1.
    fn num_partitions(&self) -> usize;

    /// The dimensions of partition `i`, which size its memory reservation
    /// and its buffers. The default reads them from the parameters (exact
    /// for the domain, inputs and aux counts, which is all sizing needs).
    fn partition_shape(&self, params: &ParamsFile, i: usize) -> CircuitShape {
        let _ = i;
        shape_from_params(params)
    }

    /// Synthesize partition `i` into `buffers` (a, b, c sized for the
    /// evaluation domain, aux for the aux variables of
    /// [`partition_shape`](Self::partition_shape)).
    ///
    /// Build the circuit inside `ctx.synthesize(|| ..., buffers)`: the
    /// engine's context compiles the circuit on first use and takes the
    /// compiled path after (it may build the circuit twice if an instance
    /// changes shape).
    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError>;

    /// Pack the verified partition proofs (in partition order) into the
    /// answer. The default concatenates their 192-byte encodings.
    fn finalize(&self, proofs: Vec<ProvedProof>) -> Result<Vec<u8>, String> {
        Ok(proofs.iter().flat_map(|p| p.to_bytes()).collect())
    }
}

/// The circuit dimensions a parameter file implies: the domain, the inputs
/// and the aux count exactly; the B split between inputs and aux is not
/// recorded in the file, so all of B is counted as aux.
pub fn shape_from_params(params: &ParamsFile) -> CircuitShape {
    let p = params.shape();
    CircuitShape {
        num_constraints: p.domain(),
        num_inputs: p.num_inputs,
        num_aux: p.l_len,
        a_aux_count: p.a_len.saturating_sub(p.num_inputs),
        b_input_count: 0,
        b_aux_count: p.b_g1_len,
    }
}

/// A job to run.
#[derive(Clone)]
pub struct JobRequest {
    /// The caller's idempotency key: submitting the same id again returns
    /// the existing job. Empty means "make one up".
    pub request_id: String,
    pub priority: Priority,
    pub source: Arc<dyn JobSource>,
    /// When the answer is needed. The engine does not drop late jobs (a late
    /// proof may still be useful to the caller); it logs and counts them
    /// (`jobs.deadline_missed` in status).
    pub deadline: Option<Instant>,
    /// Host memory the source holds for its payload (decoded vanilla
    /// proofs, ...), reserved from the request memory while the job is
    /// queued or running. 0 for sources that hold next to nothing.
    pub payload_bytes: u64,
}

impl JobRequest {
    /// A request without a deadline.
    pub fn new(request_id: impl Into<String>, priority: Priority, source: Arc<dyn JobSource>) -> Self {
        JobRequest { request_id: request_id.into(), priority, source, deadline: None, payload_bytes: 0 }
    }

    /// The same request, its source holding `bytes` of payload.
    pub fn with_payload_bytes(mut self, bytes: u64) -> Self {
        self.payload_bytes = bytes;
        self
    }

    /// The same request with a deadline `within` from now.
    pub fn with_deadline_in(mut self, within: Duration) -> Self {
        self.deadline = Some(Instant::now() + within);
        self
    }
}

impl fmt::Debug for JobRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobRequest")
            .field("request_id", &self.request_id)
            .field("priority", &self.priority)
            .field("kind", &self.source.kind_label())
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// What [`Engine::submit`](crate::Engine::submit) answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Submitted {
    /// The id to wait on or cancel (the request id, when one was given).
    pub job_id: String,
    /// Partitions queued ahead of this job's first one (at its priority or higher).
    pub queue_position: usize,
    /// True when `request_id` named a job the engine already had: that job
    /// was returned and nothing new was queued.
    pub existing: bool,
}

/// Why a job was refused at submission.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// One partition (with its SRS) needs more memory than the budget (or
    /// the buffer pool) will ever have: it could never run.
    #[error("job refused: {0}")]
    TooLarge(String),
    /// The job itself is malformed (no partitions, unreadable parameters, ...).
    #[error("job refused: {0}")]
    Invalid(String),
    /// A limit on requests is reached (the queue cap, the request memory);
    /// the same request may succeed later.
    #[error("job refused for now: {0}")]
    Busy(String),
    /// The engine is shutting down.
    #[error("the engine is shutting down and accepts no new jobs")]
    ShuttingDown,
    /// Every prover device is quarantined: nothing can prove the job
    /// until kiln is restarted. The message says why.
    #[error("job refused: {0}")]
    NoProver(String),
}

/// Where a job's time went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobTimings {
    /// From submission until its first partition started synthesis.
    pub queue_wait: Duration,
    /// Spent waiting for its parameters to be generated and loaded.
    pub srs_load: Duration,
    /// Synthesis, summed over partitions.
    pub synthesis: Duration,
    /// Prover work (H polynomial, MSMs, assembly and verification), summed over partitions.
    pub gpu_compute: Duration,
    /// From submission until the answer was ready.
    pub total: Duration,
}

/// How a job ended, or why there is no end to report yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every partition proved and verified; `proof` is what
    /// [`JobSource::finalize`] packed.
    Completed { proof: Vec<u8>, timings: JobTimings },
    /// The job failed (a partition failed, synthesis panicked, ...); the
    /// engine and other jobs are unaffected.
    Failed(String),
    /// Cancelled before it completed.
    Cancelled,
    /// `wait` timed out; the job continues.
    Timeout,
    /// No such job (never submitted, or forgotten after its retention period).
    Unknown,
}

impl JobOutcome {
    /// True for `Completed`, `Failed` and `Cancelled`: the job has ended.
    pub fn is_final(&self) -> bool {
        matches!(self, JobOutcome::Completed { .. } | JobOutcome::Failed(_) | JobOutcome::Cancelled)
    }

    /// A stable lowercase name (`completed`, `failed`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            JobOutcome::Completed { .. } => "completed",
            JobOutcome::Failed(_) => "failed",
            JobOutcome::Cancelled => "cancelled",
            JobOutcome::Timeout => "timeout",
            JobOutcome::Unknown => "unknown",
        }
    }
}
