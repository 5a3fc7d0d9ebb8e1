//! [`SyntheticJob`]: a built-in [`JobSource`] of synthetic circuits, for the
//! demo, the daemon's demo request, the soak tool and tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use kiln_groth16::setup;
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{Assignment, AssignmentBuffers, SynthContext, SynthError};

use crate::job::{JobSource, SrsSpec};

/// `partitions` proofs of one synthetic circuit (`kind`, `2^log_size`
/// constraints, `inputs` public inputs), each with its own witness.
/// Parameters are generated on first use (a local random setup: for tests
/// and demos only) and cached in `params_dir` under the same names
/// `kiln demo` uses.
///
/// ```no_run
/// use kiln_pipeline::synthetic::SyntheticJob;
/// use kiln_pipeline::JobSource;
/// use kiln_synth::workload::WorkloadKind;
///
/// let job = SyntheticJob::new(WorkloadKind::FilecoinLike, 12, 4, 2, "/tmp/kiln-params").with_seed(7);
/// assert_eq!(job.num_partitions(), 2);
/// assert_eq!(job.srs().id, "synthetic-filecoin-like-2^12-4in");
/// ```
#[derive(Clone, Debug)]
pub struct SyntheticJob {
    structure: SyntheticCircuit,
    log_size: u32,
    partitions: usize,
    params_dir: PathBuf,
    seed: u64,
}

impl SyntheticJob {
    /// A job of `partitions` proofs; witnesses from seed 0 (see [`with_seed`](Self::with_seed)).
    pub fn new(kind: WorkloadKind, log_size: u32, inputs: usize, partitions: usize, params_dir: impl Into<PathBuf>) -> Self {
        SyntheticJob {
            structure: SyntheticCircuit::filling_domain(kind, log_size, inputs),
            log_size,
            partitions,
            params_dir: params_dir.into(),
            seed: 0,
        }
    }

    /// Partition `i` gets the witness of seed `seed + i`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The circuit of partition `i`, with its witness.
    pub fn circuit(&self, i: usize) -> SyntheticCircuit {
        self.structure.with_witness(self.seed.wrapping_add(i as u64))
    }

    /// The parameters of synthetic circuits of this shape.
    pub fn srs_spec(kind: WorkloadKind, log_size: u32, inputs: usize, params_dir: &Path) -> SrsSpec {
        let structure = SyntheticCircuit::filling_domain(kind, log_size, inputs);
        let name = format!("kiln-synthetic-{}-2^{log_size}-{inputs}in-v1.params", kind.name());
        let generate = move |path: &Path| {
            // The generator writes through a temporary file named after the
            // process: two engines of one process must not write it at once.
            static GENERATING: Mutex<()> = Mutex::new(());
            let _one_at_a_time = GENERATING.lock();
            setup::load_or_generate(structure, path, &mut rand::thread_rng(), &|_, _| {})
                .map(drop)
                .map_err(|e| e.to_string())
        };
        SrsSpec::generated(format!("synthetic-{}-2^{log_size}-{inputs}in", kind.name()), params_dir.join(name), Arc::new(generate))
    }
}

impl JobSource for SyntheticJob {
    fn kind_label(&self) -> &str {
        "synthetic"
    }

    fn srs(&self) -> SrsSpec {
        Self::srs_spec(self.structure.kind, self.log_size, self.structure.inputs, &self.params_dir)
    }

    fn num_partitions(&self) -> usize {
        self.partitions
    }

    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        ctx.synthesize(|| Ok(self.circuit(i)), buffers)
    }
}
