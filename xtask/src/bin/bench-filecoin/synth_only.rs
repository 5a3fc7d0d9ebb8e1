//! `--synth-only`: the CPU half of a Filecoin proof on its own. Per kind,
//! partition 0 is synthesized once the recording way (the compiled path's
//! first time) and then `timed` times the witness-only way, which is what
//! every later partition against the same parameters costs; then all
//! partitions at once on the engine's synthesis workers. Needs no
//! parameters and no GPU, so the witness code can be measured on any host.
//! The witness-only runs get buffers of the recorded size, allocated and
//! written before the clock starts, as the engine's pool hands them out
//! (else first-touch page faults would be timed as synthesis).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use blstrs::Scalar;
use ff::Field;
use kiln_pipeline::JobSource;
use kiln_synth::{AssignmentBuffers, CircuitCache};
use rayon::prelude::*;
use serde_json::json;

use crate::report::median;

/// One kind's synthesis times (ms).
pub struct SynthTimes {
    pub label: String,
    pub partitions: usize,
    pub compile_ms: f64,
    pub witness_ms: Vec<f64>,
    pub all_partitions_ms: f64,
    /// Witness-only syntheses whose circuit segments ran in parallel.
    pub segmented: u64,
    pub shape: kiln_synth::CircuitShape,
    /// Partition 0's aux values by MSM class: all of them (the L query),
    /// those in the A query and those in the B query.
    pub classes: [ScalarClasses; 3],
}

/// How many of an MSM's scalars are 0 (skipped), 1 (summed apart) and
/// anything else (bucketed): what an MSM's cost depends on.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScalarClasses {
    pub zero: usize,
    pub one: usize,
    pub other: usize,
}

impl ScalarClasses {
    fn of<'a>(values: impl Iterator<Item = &'a Scalar>) -> ScalarClasses {
        let mut c = ScalarClasses::default();
        for v in values {
            if bool::from(v.is_zero()) {
                c.zero += 1;
            } else if *v == Scalar::ONE {
                c.one += 1;
            } else {
                c.other += 1;
            }
        }
        c
    }

    fn json(&self) -> serde_json::Value {
        json!({"zero": self.zero, "one": self.one, "other": self.other})
    }
}

impl std::fmt::Display for ScalarClasses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = (self.zero + self.one + self.other).max(1) as f64;
        write!(f, "{} ({:.1} % 0, {:.1} % 1, {} other)", self.zero + self.one + self.other, 100.0 * self.zero as f64 / n, 100.0 * self.one as f64 / n, self.other)
    }
}

impl SynthTimes {
    pub fn json(&self) -> serde_json::Value {
        json!({"kind": self.label, "partitions": self.partitions, "compile_ms": self.compile_ms,
               "witness_ms": self.witness_ms, "witness_median_ms": median(&self.witness_ms),
               "all_partitions_ms": self.all_partitions_ms,
               "segmented_syntheses": self.segmented, "shape": format!("{:?}", self.shape),
               "aux_classes": {"l": self.classes[0].json(), "a": self.classes[1].json(), "b": self.classes[2].json()}})
    }

    pub fn line(&self) -> String {
        format!(
            "{}: {} partition(s) of {:?}; partition 0 recorded in {:.1} ms, then witness-only {:.1} ms (median of {}, {} with parallel segments); all partitions at once {:.1} ms; aux scalars: L {}, A {}, B {}",
            self.label,
            self.partitions,
            self.shape,
            self.compile_ms,
            median(&self.witness_ms).unwrap_or(f64::NAN),
            self.witness_ms.len(),
            self.segmented,
            self.all_partitions_ms,
            self.classes[0],
            self.classes[1],
            self.classes[2]
        )
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Synthesis times of `payload`'s job (see the module doc).
pub fn run(job: &Arc<dyn JobSource>, timed: usize) -> Result<SynthTimes> {
    let label = job.kind_label().to_string();
    let cache = CircuitCache::unbounded();
    let key = format!("synth-only-{label}");
    let synth = |i: usize, buffers: AssignmentBuffers| -> Result<(f64, kiln_synth::Assignment)> {
        let t = Instant::now();
        let asg = job.synthesize(i, buffers, cache.context(&key, usize::MAX)).map_err(|e| anyhow!("{label} partition {i}: {e}"))?;
        let elapsed = ms(t);
        asg.check_satisfied().map_err(|e| anyhow!("{label} partition {i}: a*b != c: {e}"))?;
        Ok((elapsed, asg))
    };
    let once = |i: usize, buffers: AssignmentBuffers| synth(i, buffers).map(|(ms, asg)| (ms, asg.shape()));
    let (compile_ms, first) = synth(0, AssignmentBuffers::heap())?;
    let shape = first.shape();
    let aux = first.aux();
    let classes = [
        ScalarClasses::of(aux.iter()),
        ScalarClasses::of(first.a_aux_density.iter_set().map(|i| &aux[i])),
        ScalarClasses::of(first.b_aux_density.iter_set().map(|i| &aux[i])),
    ];
    drop(first);
    // vec![x; n] writes every element: the pages are touched here.
    let touched = || AssignmentBuffers::heap_with_capacity(shape.num_constraints, shape.num_aux);
    let witness_ms = (0..timed).map(|_| once(0, touched()).map(|(ms, _)| ms)).collect::<Result<Vec<_>>>()?;
    let stats = cache.stats();
    if stats.compiled_syntheses < timed as u64 {
        return Err(anyhow!("{label}: the witness-only path was not taken ({stats:?})"));
    }
    let buffers: Vec<AssignmentBuffers> = (0..job.num_partitions()).map(|_| touched()).collect();
    let t = Instant::now();
    buffers.into_par_iter().enumerate().map(|(i, b)| once(i, b)).collect::<Result<Vec<_>>>()?;
    let all_partitions_ms = ms(t);
    let segmented = cache.stats().segmented_syntheses;
    Ok(SynthTimes { label, partitions: job.num_partitions(), compile_ms, witness_ms, all_partitions_ms, segmented, shape, classes })
}
