//! `--synth-only`: the CPU half of a Filecoin proof on its own. Per kind,
//! partition 0 is synthesized once the recording way (the compiled path's
//! first time) and then `timed` times the witness-only way, which is what
//! every later partition against the same parameters costs; then all
//! partitions at once on the engine's synthesis workers. Needs no
//! parameters and no GPU, so the witness code can be measured on any host.
//! The witness-only runs get buffers of the recorded size, allocated and
//! written before the clock starts, as the engine's pool hands them out
//! (else first-touch page faults would be timed as synthesis).
//!
//! Those runs take the gadget path (the circuit's own witness code). For
//! kinds with a native witness generator the same number of runs then take
//! the native path (checked against the recorded R1CS), and both paths run
//! once more per timed run on a single core (a one-thread pool), measured
//! in CPU time, so that other work on the host does not count: the pool
//! thread's CPU time, split between witness and the rest by the wall-time
//! share the cache's counters give (the witness's core-seconds), and the
//! process's CPU time (the whole synthesis's, a/b/c beside the witness
//! included); the least of the runs. The floor is writing the aux vector
//! once at this host's single-core memory write bandwidth (measured here,
//! same run).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use kiln_groth16::msm::{scalar_mix, ScalarMix};
use kiln_pipeline::JobSource;
use kiln_synth::{AssignmentBuffers, CircuitCache, CircuitCacheStats};
use rayon::prelude::*;
use serde_json::json;

use crate::report::median;

#[path = "cpu_clock.rs"]
mod cpu_clock;

/// What a `--synth-only` run does.
pub struct Options {
    /// Witness-only runs per path after the recording one.
    pub timed: usize,
    /// At most this many partitions at once (default: what fits in half of
    /// the host's available memory).
    pub at_once: Option<usize>,
    /// Also time each path on one core (CPU time).
    pub one_core: bool,
}

/// One kind's synthesis times (ms).
pub struct SynthTimes {
    pub label: String,
    pub partitions: usize,
    pub compile_ms: f64,
    pub witness_ms: Vec<f64>,
    pub all_partitions_ms: f64,
    /// How many partitions the all-partitions run synthesized at once.
    pub at_once: usize,
    /// Witness-only syntheses whose circuit segments ran in parallel.
    pub segmented: u64,
    pub shape: kiln_synth::CircuitShape,
    /// Partition 0's aux values by MSM class (0 skipped, 1 summed apart,
    /// the rest bucketed: what an MSM's cost depends on): all of them (the
    /// L query), those in the A query and those in the B query.
    pub classes: [ScalarMix; 3],
    /// Witness time of the gadget-path runs (ms, from the cache's counters).
    pub gadget_witness_ms: Vec<f64>,
    /// The native path, for kinds that have a generator.
    pub native: Option<NativeTimes>,
}

/// The native path's times, and both witnesses on one core.
pub struct NativeTimes {
    /// Whole syntheses (witness, a/b/c, the check), every core.
    pub synth_ms: Vec<f64>,
    /// Their witnesses alone.
    pub witness_ms: Vec<f64>,
    /// One core, CPU time, the least of the runs: each path's witness and
    /// whole synthesis (`None` with `--no-one-core`).
    pub one_core: Option<OneCore>,
    /// Writing the aux vector once at the single-core write bandwidth.
    pub floor_ms: f64,
    pub write_gb_s: f64,
    /// Partition 0's native assignment against the gadget path's, bit for
    /// bit (inputs, aux, a/b/c): `Ok` or where they first differ.
    pub equal_to_gadget: Result<(), String>,
}

/// Both paths on one core.
#[derive(Clone, Copy, Debug)]
pub struct OneCore {
    pub gadget: CoreTimes,
    pub native: CoreTimes,
}

/// CPU milliseconds of one synthesis on one core.
#[derive(Clone, Copy, Debug)]
pub struct CoreTimes {
    pub witness_ms: f64,
    pub synthesis_ms: f64,
}

impl NativeTimes {
    fn json(&self, constraints: usize) -> serde_json::Value {
        let per_m = |ms: f64| ms / 1e3 / (constraints as f64 / 1e6);
        let one_core = self.one_core.map(|o| {
            json!({"one_core_cpu_ms": {"gadget": {"witness": o.gadget.witness_ms, "synthesis": o.gadget.synthesis_ms},
                                       "native": {"witness": o.native.witness_ms, "synthesis": o.native.synthesis_ms}},
                   "core_s_per_m_constraints": {"gadget_witness": per_m(o.gadget.witness_ms), "native_witness": per_m(o.native.witness_ms),
                                                "gadget_synthesis": per_m(o.gadget.synthesis_ms), "native_synthesis": per_m(o.native.synthesis_ms)},
                   "witness_speedup": o.gadget.witness_ms / o.native.witness_ms})
        });
        json!({"synth_ms": self.synth_ms, "synth_median_ms": median(&self.synth_ms),
               "witness_ms": self.witness_ms, "witness_median_ms": median(&self.witness_ms),
               "one_core": one_core, "floor_ms": self.floor_ms, "write_gb_s_1core": self.write_gb_s,
               "equal_to_gadget": self.equal_to_gadget.as_ref().map_or_else(|e| json!(e), |()| json!(true))})
    }

    fn line(&self, constraints: usize) -> String {
        let per_m = |ms: f64| ms / 1e3 / (constraints as f64 / 1e6);
        let one_core = match self.one_core {
            Some(OneCore { gadget: g, native: n }) => format!(
                "; one core, CPU time (least of the runs): witness gadget {:.1} ms ({:.3} core-s/M constraints), native {:.2} ms ({:.4} core-s/M), {:.1}x; whole synthesis gadget {:.1} ms ({:.3} core-s/M), native {:.1} ms ({:.3} core-s/M)",
                g.witness_ms,
                per_m(g.witness_ms),
                n.witness_ms,
                per_m(n.witness_ms),
                g.witness_ms / n.witness_ms,
                g.synthesis_ms,
                per_m(g.synthesis_ms),
                n.synthesis_ms,
                per_m(n.synthesis_ms)
            ),
            None => String::new(),
        };
        format!(
            "  native: synthesis {:.1} ms, witness {:.1} ms (medians of {}, every core){one_core}; floor {:.2} ms (aux written once at {:.1} GB/s); partition 0 against the gadget path: {}",
            median(&self.synth_ms).unwrap_or(f64::NAN),
            median(&self.witness_ms).unwrap_or(f64::NAN),
            self.synth_ms.len(),
            self.floor_ms,
            self.write_gb_s,
            match &self.equal_to_gadget {
                Ok(()) => "equal bit for bit (inputs, aux, a/b/c)".to_string(),
                Err(e) => format!("DIFFERENT: {e}"),
            }
        )
    }
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
               "all_partitions_ms": self.all_partitions_ms, "at_once": self.at_once,
               "segmented_syntheses": self.segmented, "shape": format!("{:?}", self.shape),
               "gadget_witness_ms": self.gadget_witness_ms, "gadget_witness_median_ms": median(&self.gadget_witness_ms),
               "native": self.native.as_ref().map(|n| n.json(self.shape.num_constraints)),
               "aux_classes": {"l": mix_json(&self.classes[0]), "a": mix_json(&self.classes[1]), "b": mix_json(&self.classes[2])}})
    }

    pub fn line(&self) -> String {
        let native = self.native.as_ref().map(|n| format!("\n{}", n.line(self.shape.num_constraints))).unwrap_or_default();
        format!(
            "{}: {} partition(s) of {:?}; partition 0 recorded in {:.1} ms, then witness-only {:.1} ms on the gadget path (its witness {:.1} ms; median of {}, {} with parallel segments); {} partition(s) at once {:.1} ms; aux scalars: L {}, A {}, B {}{native}",
            self.label,
            self.partitions,
            self.shape,
            self.compile_ms,
            median(&self.witness_ms).unwrap_or(f64::NAN),
            median(&self.gadget_witness_ms).unwrap_or(f64::NAN),
            self.witness_ms.len(),
            self.segmented,
            self.at_once,
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
pub fn run(job: &Arc<dyn JobSource>, opts: &Options) -> Result<SynthTimes> {
    let timed = opts.timed;
    let label = job.kind_label().to_string();
    let cache = CircuitCache::unbounded();
    let key = format!("synth-only-{label}");
    let synth = |i: usize, buffers: AssignmentBuffers, native: bool| -> Result<(f64, kiln_synth::Assignment)> {
        let t = Instant::now();
        let ctx = cache.context(&key, usize::MAX).with_native(native);
        let asg = job.synthesize(i, buffers, ctx).map_err(|e| anyhow!("{label} partition {i}: {e}"))?;
        let elapsed = ms(t);
        asg.check_satisfied().map_err(|e| anyhow!("{label} partition {i}: a*b != c: {e}"))?;
        Ok((elapsed, asg))
    };
    // One synthesis: (ms, witness ms from the cache's counters, shape).
    let once = |i: usize, buffers: AssignmentBuffers, native: bool| {
        let before = cache.stats();
        let (ms, asg) = synth(i, buffers, native)?;
        let after = cache.stats();
        if after.native_rejections > before.native_rejections {
            return Err(anyhow!("{label} partition {i}: the native witness was rejected (see the log)"));
        }
        let witness = |s: &CircuitCacheStats| if native { s.native_witness_ns } else { s.compiled_witness_ns };
        Ok((ms, (witness(&after) - witness(&before)) as f64 / 1e6, asg.shape(), after.native_syntheses > before.native_syntheses))
    };
    let (compile_ms, first) = synth(0, AssignmentBuffers::heap(), false)?;
    let shape = first.shape();
    let aux = first.aux();
    let query = |d: &kiln_synth::Density| d.iter_set().map(|i| aux[i]).collect::<Vec<_>>();
    let classes = [scalar_mix(aux), scalar_mix(&query(&first.a_aux_density)), scalar_mix(&query(&first.b_aux_density))];
    drop(first);
    // vec![x; n] writes every element: the pages are touched here.
    let touched = || AssignmentBuffers::heap_with_capacity(shape.num_constraints, shape.num_aux);
    let gadget_runs = (0..timed).map(|_| once(0, touched(), false)).collect::<Result<Vec<_>>>()?;
    let stats = cache.stats();
    if stats.compiled_syntheses < timed as u64 {
        return Err(anyhow!("{label}: the witness-only path was not taken ({stats:?})"));
    }
    let witness_ms = gadget_runs.iter().map(|r| r.0).collect();
    let gadget_witness_ms = gadget_runs.iter().map(|r| r.1).collect();
    // Each partition's buffers: aux, and a/b/c per constraint.
    let per_partition = ((shape.num_aux + 3 * shape.num_constraints) * 32) as u64;
    let fits = crate::proc_bytes("/proc/meminfo", "MemAvailable:").map_or(job.num_partitions(), |m| (m / 2 / per_partition.max(1)) as usize);
    let at_once = opts.at_once.unwrap_or(fits).clamp(1, job.num_partitions());
    let buffers: Vec<AssignmentBuffers> = (0..at_once).map(|_| touched()).collect();
    let t = Instant::now();
    buffers.into_par_iter().enumerate().map(|(i, b)| once(i, b, false)).collect::<Result<Vec<_>>>()?;
    let all_partitions_ms = ms(t);
    let segmented = cache.stats().segmented_syntheses;
    let native = if once(0, touched(), true)?.3 {
        let mut times = native_times(&once, &touched, timed, shape.num_aux, opts.one_core)?;
        // One assignment of each path at a time beside the other: two
        // partitions' buffers, as the all-partitions run held.
        let gadget = synth(0, touched(), false)?.1;
        times.equal_to_gadget = same_assignment(&gadget, &synth(0, touched(), true)?.1);
        Some(times)
    } else {
        None
    };
    Ok(SynthTimes { label, partitions: job.num_partitions(), compile_ms, witness_ms, all_partitions_ms, at_once, segmented, shape, classes, gadget_witness_ms, native })
}

/// One synthesis: its ms, its witness ms, its shape, whether it took the native path.
type Once = (f64, f64, kiln_synth::CircuitShape, bool);

/// The native path's runs, then both witnesses on one core, and the floor.
fn native_times(
    once: &(dyn Fn(usize, AssignmentBuffers, bool) -> Result<Once> + Sync),
    touched: &(dyn Fn() -> AssignmentBuffers + Sync),
    timed: usize,
    num_aux: usize,
    one_core_runs: bool,
) -> Result<NativeTimes> {
    let runs = (0..timed).map(|_| once(0, touched(), true)).collect::<Result<Vec<_>>>()?;
    let one_core = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let least = |native: bool| -> Result<CoreTimes> {
        let mut best = CoreTimes { witness_ms: f64::INFINITY, synthesis_ms: f64::INFINITY };
        for _ in 0..timed.max(1) {
            let buffers = touched();
            let process0 = cpu_clock::process_seconds();
            let (wall_ms, witness_wall_ms, thread) = one_core.install(|| {
                let thread0 = cpu_clock::thread_seconds();
                once(0, buffers, native).map(|r| (r.0, r.1, cpu_clock::thread_seconds() - thread0))
            })?;
            let process = cpu_clock::process_seconds() - process0;
            // The pool thread ran the witness and the products not done
            // beside it; its CPU time splits as their wall times do.
            best.witness_ms = best.witness_ms.min(thread * 1e3 * (witness_wall_ms / wall_ms).min(1.0));
            best.synthesis_ms = best.synthesis_ms.min(process * 1e3);
        }
        Ok(best)
    };
    let one_core_times = if one_core_runs { Some(OneCore { gadget: least(false)?, native: least(true)? }) } else { None };
    let write_gb_s = one_core.install(single_core_write_gb_s);
    Ok(NativeTimes {
        synth_ms: runs.iter().map(|r| r.0).collect(),
        witness_ms: runs.iter().map(|r| r.1).collect(),
        one_core: one_core_times,
        floor_ms: (num_aux * 32) as f64 / (write_gb_s * 1e9) * 1e3,
        write_gb_s,
        equal_to_gadget: Err("not compared".into()),
    })
}

/// `native` against `gadget`, bit for bit: the shape, the public inputs,
/// the aux vector and (where both hold them) a/b/c; or where they first differ.
fn same_assignment(gadget: &kiln_synth::Assignment, native: &kiln_synth::Assignment) -> Result<(), String> {
    if gadget.shape() != native.shape() {
        return Err(format!("shapes differ: gadget {:?}, native {:?}", gadget.shape(), native.shape()));
    }
    let first_difference = |name: &str, g: &[blstrs::Scalar], n: &[blstrs::Scalar]| match g.par_iter().zip(n).position_first(|(g, n)| g != n) {
        Some(i) => Err(format!("{name}[{i}] of {}: gadget {:?}, native {:?}", g.len(), g[i], n[i])),
        None => Ok(()),
    };
    first_difference("input", &gadget.input, &native.input)?;
    first_difference("aux", gadget.aux(), native.aux())?;
    if gadget.products_on_host() && native.products_on_host() {
        first_difference("a", gadget.a(), native.a())?;
        first_difference("b", gadget.b(), native.b())?;
        first_difference("c", gadget.c(), native.c())?;
    }
    Ok(())
}

/// This thread's memory write bandwidth (GB/s): the best of five passes
/// storing field elements over 256 MiB that is already touched, the way a
/// witness generator writes its aux vector.
fn single_core_write_gb_s() -> f64 {
    let mut buf = vec![blstrs::Scalar::from(0u64); (256 << 20) / 32];
    let best = (1..=5u64)
        .map(|k| {
            let v = blstrs::Scalar::from(k);
            let t = Instant::now();
            buf.iter_mut().for_each(|x| *x = v);
            std::hint::black_box(&buf);
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    (buf.len() * 32) as f64 / best / 1e9
}
