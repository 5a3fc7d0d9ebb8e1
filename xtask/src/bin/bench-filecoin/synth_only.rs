//! `--synth-only`: the CPU half of a Filecoin proof on its own. Per kind,
//! partition 0 is synthesized once the recording way (the compiled path's
//! first time), then `timed` times with the gadget path's witness
//! (`with_native(false)`) and `timed` times with the native witness
//! generator (the engine's default), each on every core and again on one
//! core; then all partitions at once on the engine's synthesis workers.
//! Needs no parameters and no GPU, so the witness code can be measured on
//! any host. The witness-only runs get buffers of the recorded size,
//! allocated and written before the clock starts, as the engine's pool
//! hands them out (else first-touch page faults would be timed as
//! synthesis).
//!
//! Witness time is what the circuit cache records for the witness alone
//! (gadget path: the witness code, segments in parallel where the circuit
//! has them; native: the generator), without the a/b/c products and the
//! native path's row check. Run on a one-thread pool it is the witness's
//! core time, reported as core-seconds per million constraints.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use kiln_groth16::msm::{scalar_mix, ScalarMix};
use kiln_pipeline::JobSource;
use kiln_synth::{AssignmentBuffers, CircuitCache, CircuitCacheStats};
use rayon::prelude::*;
use serde_json::json;

use crate::report::median;

/// One witness path's times (ms), from the circuit cache's witness clock.
#[derive(Default)]
pub struct PathTimes {
    /// Witness wall time, every core available.
    pub wall_ms: Vec<f64>,
    /// Witness time on a one-thread pool: its core time.
    pub one_core_ms: Vec<f64>,
}

impl PathTimes {
    /// Core-seconds of witness per million constraints (one-core median).
    pub fn core_s_per_mconstraint(&self, constraints: usize) -> Option<f64> {
        median(&self.one_core_ms).map(|ms| ms / 1e3 / (constraints as f64 / 1e6))
    }

    fn json(&self, constraints: usize) -> serde_json::Value {
        json!({"wall_ms": self.wall_ms, "wall_median_ms": median(&self.wall_ms), "one_core_ms": self.one_core_ms,
               "one_core_median_ms": median(&self.one_core_ms), "core_s_per_mconstraint": self.core_s_per_mconstraint(constraints)})
    }
}

/// One kind's synthesis times (ms).
pub struct SynthTimes {
    pub label: String,
    pub partitions: usize,
    pub compile_ms: f64,
    /// Whole syntheses of partition 0 (witness, a/b/c, checks) the engine's
    /// way (native witness where the kind has one), every core.
    pub synth_ms: Vec<f64>,
    /// The gadget path's witness.
    pub gadget: PathTimes,
    /// The native generator's witness (`None`: the kind has none).
    pub native: Option<PathTimes>,
    pub all_partitions_ms: f64,
    /// Gadget-path witness-only syntheses whose circuit segments ran in parallel.
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
    /// Gadget witness core time over native witness core time.
    pub fn speedup(&self) -> Option<f64> {
        let n = self.native.as_ref()?;
        Some(median(&self.gadget.one_core_ms)? / median(&n.one_core_ms)?)
    }

    pub fn json(&self) -> serde_json::Value {
        let c = self.shape.num_constraints;
        json!({"kind": self.label, "partitions": self.partitions, "constraints": c, "compile_ms": self.compile_ms,
               "synth_ms": self.synth_ms, "synth_median_ms": median(&self.synth_ms),
               "gadget_witness": self.gadget.json(c), "native_witness": self.native.as_ref().map(|n| n.json(c)),
               "native_speedup_core_time": self.speedup(),
               "all_partitions_ms": self.all_partitions_ms,
               "segmented_syntheses": self.segmented, "shape": format!("{:?}", self.shape),
               "aux_classes": {"l": mix_json(&self.classes[0]), "a": mix_json(&self.classes[1]), "b": mix_json(&self.classes[2])}})
    }

    pub fn line(&self) -> String {
        let c = self.shape.num_constraints;
        let path = |p: &PathTimes| {
            format!(
                "{:.1} ms on every core, {:.1} ms on one ({:.3} core-s per M constraints)",
                median(&p.wall_ms).unwrap_or(f64::NAN),
                median(&p.one_core_ms).unwrap_or(f64::NAN),
                p.core_s_per_mconstraint(c).unwrap_or(f64::NAN)
            )
        };
        let native = match (&self.native, self.speedup()) {
            (Some(n), Some(x)) => format!("native {} = {x:.1}x less core time", path(n)),
            _ => "no native generator".into(),
        };
        format!(
            "{}: {} partition(s) of {:?}; partition 0 recorded in {:.1} ms, then synthesized in {:.1} ms (median of {}); \
             witness medians: gadget {} ({} with parallel segments), {native}; all partitions at once {:.1} ms; aux scalars: L {}, A {}, B {}",
            self.label,
            self.partitions,
            self.shape,
            self.compile_ms,
            median(&self.synth_ms).unwrap_or(f64::NAN),
            self.synth_ms.len(),
            path(&self.gadget),
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
    let synth = |i: usize, buffers: AssignmentBuffers, native: bool| -> Result<(f64, kiln_synth::Assignment)> {
        let t = Instant::now();
        let asg = job.synthesize(i, buffers, cache.context(&key, usize::MAX).with_native(native)).map_err(|e| anyhow!("{label} partition {i}: {e}"))?;
        let elapsed = ms(t);
        asg.check_satisfied().map_err(|e| anyhow!("{label} partition {i}: a*b != c: {e}"))?;
        Ok((elapsed, asg))
    };
    let (compile_ms, first) = synth(0, AssignmentBuffers::heap(), true)?;
    let shape = first.shape();
    let aux = first.aux();
    let query = |d: &kiln_synth::Density| d.iter_set().map(|i| aux[i]).collect::<Vec<_>>();
    let classes = [scalar_mix(aux), scalar_mix(&query(&first.a_aux_density)), scalar_mix(&query(&first.b_aux_density))];
    drop(first);
    // vec![x; n] writes every element: the pages are touched here.
    let touched = || AssignmentBuffers::heap_with_capacity(shape.num_constraints, shape.num_aux);
    let one_core = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    // One timed synthesis of partition 0: its whole time and its witness's
    // (the cache's witness clock of the path that ran; the native path
    // must have been taken and accepted when asked for).
    let witness_run = |native: bool| -> Result<(f64, f64)> {
        let before = cache.stats();
        let (total, _) = synth(0, touched(), native)?;
        let after = cache.stats();
        let d = |f: fn(&CircuitCacheStats) -> u64| f(&after) - f(&before);
        if d(|s| s.native_rejections) > 0 {
            return Err(anyhow!("{label}: the native witness was rejected ({after:?})"));
        }
        let ns = match native {
            true if d(|s| s.native_syntheses) == 1 => d(|s| s.native_witness_ns),
            true => return Err(anyhow!("{label}: no native witness was taken ({after:?})")),
            false => d(|s| s.compiled_witness_ns),
        };
        Ok((total, ns as f64 / 1e6))
    };
    let has_native = {
        let before = cache.stats().native_syntheses;
        synth(0, touched(), true)?;
        cache.stats().native_syntheses > before
    };
    let segmented_before = cache.stats().segmented_syntheses;
    let mut synth_ms = Vec::new();
    let mut paths = Vec::new();
    for native in [false, true].into_iter().filter(|&n| !n || has_native) {
        let mut p = PathTimes::default();
        for _ in 0..timed {
            let (total, witness) = witness_run(native)?;
            p.wall_ms.push(witness);
            if native == has_native {
                synth_ms.push(total);
            }
        }
        for _ in 0..timed {
            p.one_core_ms.push(one_core.install(|| witness_run(native))?.1);
        }
        paths.push(p);
    }
    let segmented = cache.stats().segmented_syntheses - segmented_before;
    let native = if has_native { paths.pop() } else { None };
    let gadget = paths.pop().ok_or_else(|| anyhow!("{label}: no gadget-path times"))?;
    let buffers: Vec<AssignmentBuffers> = (0..job.num_partitions()).map(|_| touched()).collect();
    let t = Instant::now();
    buffers.into_par_iter().enumerate().map(|(i, b)| synth(i, b, true).map(|_| ())).collect::<Result<Vec<_>>>()?;
    let all_partitions_ms = ms(t);
    Ok(SynthTimes { label, partitions: job.num_partitions(), compile_ms, synth_ms, gadget, native, all_partitions_ms, segmented, shape, classes })
}
