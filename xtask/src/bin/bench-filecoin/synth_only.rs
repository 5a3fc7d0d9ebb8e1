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
use kiln_groth16::msm::{scalar_mix, ScalarMix};
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
    /// Partition 0's aux values by MSM class (0 skipped, 1 summed apart,
    /// the rest bucketed: what an MSM's cost depends on): all of them (the
    /// L query), those in the A query and those in the B query.
    pub classes: [ScalarMix; 3],
}

/// One query's scalar classes, as a line.
fn mix_line(m: &ScalarMix) -> String {
    let total = m.zeros + m.ones + m.others;
    let n = total.max(1) as f64;
    format!("{total} ({:.1} % 0, {:.1} % 1, {} other)", 100.0 * m.zeros as f64 / n, 100.0 * m.ones as f64 / n, m.others)
}

fn mix_json(m: &ScalarMix) -> serde_json::Value {
    json!({"zero": m.zeros, "one": m.ones, "other": m.others})
}

impl SynthTimes {
    pub fn json(&self) -> serde_json::Value {
        json!({"kind": self.label, "partitions": self.partitions, "compile_ms": self.compile_ms,
               "witness_ms": self.witness_ms, "witness_median_ms": median(&self.witness_ms),
               "all_partitions_ms": self.all_partitions_ms,
               "segmented_syntheses": self.segmented, "shape": format!("{:?}", self.shape),
               "aux_classes": {"l": mix_json(&self.classes[0]), "a": mix_json(&self.classes[1]), "b": mix_json(&self.classes[2])}})
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
            mix_line(&self.classes[0]),
            mix_line(&self.classes[1]),
            mix_line(&self.classes[2])
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
    let query = |d: &kiln_synth::Density| d.iter_set().map(|i| aux[i]).collect::<Vec<_>>();
    let classes = [scalar_mix(aux), scalar_mix(&query(&first.a_aux_density)), scalar_mix(&query(&first.b_aux_density))];
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
