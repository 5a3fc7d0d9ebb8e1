//! Helpers shared by the test binaries.
#![allow(dead_code)]

use std::sync::Arc;

use blstrs::Scalar;
use kiln_synth::workload::SyntheticCircuit;
use kiln_synth::{Assignment, AssignmentBuffers, CircuitCache, CompiledR1cs};

/// GPU `ordinal`'s context, or `None` after saying why the test is
/// skipped: no GPU (`covered` names the CPU tests that cover the same
/// logic), or a GPU that does not open (with its error).
pub fn gpu_context(ordinal: usize, covered: &str) -> Option<Arc<kiln_groth16::GpuContext>> {
    if kiln_gpu::GpuDevice::count() == 0 {
        eprintln!("no GPU: skipped ({covered})");
        return None;
    }
    match kiln_groth16::GpuContext::open(ordinal) {
        Ok(ctx) => Some(ctx),
        Err(e) => {
            eprintln!("GPU present but not usable ({e}): skipped");
            None
        }
    }
}

/// `c`'s assignment with its products left to the prover (compiling `c`
/// under `key` first).
pub fn deferred(cache: &CircuitCache, key: &str, c: SyntheticCircuit) -> (Assignment, Arc<CompiledR1cs>) {
    let ctx = cache.context(key, usize::MAX);
    if cache.compiled(key).is_none() {
        ctx.synthesize(|| Ok(c), AssignmentBuffers::heap()).unwrap();
    }
    let r1cs = cache.compiled(key).unwrap();
    let asg = ctx.with_deferred_products(&r1cs).synthesize(|| Ok(c), AssignmentBuffers::heap()).unwrap();
    assert!(!asg.products_on_host());
    (asg, r1cs)
}

/// Changes the last aux value some row constrains (a Filecoin-like packing
/// bit is free) and returns the first row that no longer holds; `None`
/// when no aux value is constrained (a circuit of inputs only).
pub fn break_one(asg: &mut Assignment, r1cs: &CompiledR1cs) -> Option<usize> {
    let five = Scalar::from(5u64);
    (0..asg.num_aux).rev().find_map(|k| {
        asg.buffers.aux.as_mut_slice()[k] += five;
        let row = r1cs.first_unsatisfied(&asg.input, asg.aux());
        if row.is_none() {
            asg.buffers.aux.as_mut_slice()[k] -= five;
        }
        row
    })
}
