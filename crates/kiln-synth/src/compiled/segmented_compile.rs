//! Compiling a segmented circuit on every core: the prefix is recorded
//! once, every segment (prefix + segment k, the prefix's rows dropped) on
//! its own core, and the segments' rows are appended in order with their
//! variables moved to their place in the whole circuit. The result is the
//! matrices the whole circuit's recording gives (the `SegmentedCircuit`
//! contract: the whole circuit is the prefix, then segment 0, 1, ...), in
//! a fraction of the time: a 32 GiB PoRep partition is 18 segments of
//! ~7 M constraints, ~2.5 minutes of recording on one thread.
//!
//! The partition's own witness then runs the compiled way, its segments in
//! parallel too. Segments of different sizes are allowed here (each is
//! placed after the ones before it); the segmented witness needs them
//! equal and otherwise runs the whole circuit on one thread.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::matrix::{Var, COEFF_ONE};
use super::segmented::{SegmentedCircuit, Sizes};
use super::witness::CompilingCs;
use super::{CompiledR1cs, Retry};
use crate::buffer::AssignmentBuffers;
use crate::{Assignment, SynthError};

/// Fewer segments than this compile on one thread (nothing to share out).
const MIN_SEGMENTS: usize = 3;

/// One part's recording, with its sizes.
struct Part {
    cs: CompilingCs,
    sizes: Sizes,
}

fn record<S: SegmentedCircuit>(circuit: &S, segment: Option<usize>, max_bytes: usize) -> Result<Part, SynthesisError> {
    let mut cs = CompilingCs::with_buffers(AssignmentBuffers::heap(), max_bytes);
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize_part(&mut cs, segment)?;
    cs.check_memory();
    let sizes = Sizes { inputs: cs.w.input.len(), aux: cs.w.num_aux, constraints: cs.a.rows() };
    Ok(Part { cs, sizes })
}

impl CompiledR1cs {
    /// The compiled form of a segmented circuit, its segments recorded in
    /// parallel, and this instance's assignment from it (its segments'
    /// witnesses in parallel too). Recordings larger than `max_bytes` in
    /// all are [`Retry::TooLarge`].
    pub(crate) fn try_compile_segmented<S: SegmentedCircuit>(
        circuit: &S,
        buffers: AssignmentBuffers,
        max_bytes: usize,
        parallel: &AtomicU64,
        witness_ns: &AtomicU64,
    ) -> Result<Result<(Assignment, CompiledR1cs), Retry>, SynthError> {
        let k = circuit.segments();
        if k < MIN_SEGMENTS {
            return Self::try_compile(super::Whole(circuit), buffers, max_bytes);
        }
        let _span = tracing::debug_span!("compile_segmented", segments = k).entered();
        let t = Instant::now();
        let prefix = record(circuit, None, max_bytes)?;
        let parts = (0..k).into_par_iter().map(|j| record(circuit, Some(j), max_bytes)).collect::<Result<Vec<_>, _>>()?;
        let recorded = t.elapsed();
        let r1cs = match assemble(prefix, parts, max_bytes) {
            Ok(r) => r,
            Err(limit) => return Ok(Err(Retry::TooLarge(limit, buffers))),
        };
        let assembled = t.elapsed();
        let result = r1cs.try_synthesize_segmented(circuit, buffers, parallel, witness_ns, None)?;
        // The phases of a first synthesis, which at production sizes is
        // the one long step before a shape's native witnesses can start.
        tracing::info!(
            segments = k,
            threads = rayon::current_num_threads(),
            record_ms = recorded.as_millis() as u64,
            assemble_ms = (assembled - recorded).as_millis() as u64,
            witness_ms = (t.elapsed() - assembled).as_millis() as u64,
            "segmented recording"
        );
        Ok(match result {
            Ok(asg) => Ok((asg, r1cs)),
            Err(retry) => Err(retry),
        })
    }
}

/// The whole circuit's matrices from the prefix's and the parts'.
fn assemble(prefix: Part, parts: Vec<Part>, max_bytes: usize) -> Result<CompiledR1cs, super::CompileLimit> {
    let p = prefix.sizes;
    let Part { cs: pcs, .. } = prefix;
    if let Some(l) = pcs.limit {
        return Err(l);
    }
    let (mut a, mut b, mut c, mut coeffs) = (pcs.a, pcs.b, pcs.c, pcs.coeffs);
    let (mut inputs, mut aux) = (p.inputs, p.aux);
    for part in parts {
        let Part { cs, sizes } = part;
        if let Some(l) = cs.limit {
            return Err(l);
        }
        // The part is the prefix again, then its segment.
        let (in_base, aux_base) = (inputs, aux);
        let map_var = |v: Var| match v.split() {
            Ok(i) if i < p.inputs => v,
            Err(j) if j < p.aux => v,
            Ok(i) => Var::input(in_base + i - p.inputs).expect("checked below"),
            Err(j) => Var::aux(aux_base + j - p.aux).expect("checked below"),
        };
        inputs += sizes.inputs - p.inputs;
        aux += sizes.aux - p.aux;
        Var::input(inputs)?;
        Var::aux(aux)?;
        let ids = cs.coeffs.values().iter().map(|v| coeffs.id(v)).collect::<Result<Vec<u32>, _>>()?;
        let map_coeff = |id: u32| ids[id as usize];
        a.append_rows_mapped(&cs.a, p.constraints, map_var, map_coeff)?;
        b.append_rows_mapped(&cs.b, p.constraints, map_var, map_coeff)?;
        c.append_rows_mapped(&cs.c, p.constraints, map_var, map_coeff)?;
        if a.heap_bytes() + b.heap_bytes() + c.heap_bytes() + coeffs.heap_bytes() > max_bytes {
            return Err(super::CompileLimit("the recording outgrew its memory allowance"));
        }
    }
    // Groth16's `input * 0 = 0`, one row per input, as the recording of the
    // whole circuit ends.
    for i in 0..inputs {
        a.push(Var::input(i)?, COEFF_ONE);
        a.end_row()?;
        b.end_row()?;
        c.end_row()?;
    }
    Ok(CompiledR1cs::from_rows(inputs, aux, [a, b, c], coeffs.into_values()))
}
