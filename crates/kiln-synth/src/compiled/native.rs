//! A natively generated witness, checked: its a/b/c come from the recorded
//! matrices, and every row must satisfy a*b = c before the assignment is
//! handed on.
//!
//! Why the check is cheap: a/b/c are computed from the matrices anyway (a
//! sparse product of a few terms per row); the check is one multiplication
//! and a comparison per row, done in the same pass over each block of rows
//! while they are in cache. Why it is enough: an assignment that satisfies
//! every constraint of the circuit's R1CS, with the circuit's public
//! inputs, is a valid witness, so its proof verifies; a generator bug
//! that breaks any constraint is caught here, before any prover time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::CompiledR1cs;
use crate::buffer::AssignmentBuffers;
use crate::native::AssignmentWriter;
use crate::{Assignment, SynthError};

/// Why a native witness was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rejection {
    /// The first row with a*b != c, when the witness was complete.
    pub(crate) first_bad_row: Option<usize>,
    pub(crate) reason: String,
}

/// A native witness's outcome: the checked assignment and the time its
/// generator took, or why it was rejected (with the caller's buffers back).
pub(crate) type NativeOutcome = Result<(Assignment, Duration), (Rejection, AssignmentBuffers)>;

/// Rows per parallel task of the checked products.
const ROWS_PER_TASK: usize = 1 << 12;

impl CompiledR1cs {
    /// The assignment `generate` writes (public inputs after ONE, then aux,
    /// through an [`AssignmentWriter`] over exactly the recorded sizes),
    /// with a/b/c evaluated from the matrices and checked row by row.
    /// A generator error or panic, a wrong number of values or an
    /// unsatisfied row rejects it.
    pub(crate) fn try_native<N>(&self, generate: N, mut bufs: AssignmentBuffers) -> Result<NativeOutcome, SynthError>
    where
        N: FnOnce(&mut AssignmentWriter<'_>) -> Result<(), String>,
    {
        let _span = tracing::debug_span!("synthesize_native").entered();
        let n = self.num_constraints();
        for (buf, which, len) in [(&mut bufs.a, "a", n), (&mut bufs.b, "b", n), (&mut bufs.c, "c", n), (&mut bufs.aux, "aux", self.num_aux)] {
            if buf.as_slice().len() < len && !buf.try_grow(len) {
                return Err(SynthError::BufferTooSmall { which, needed: len, capacity: buf.as_slice().len() });
            }
        }
        let mut input = vec![Scalar::ZERO; self.num_inputs];
        input[0] = Scalar::ONE;
        let t = Instant::now();
        let generated = {
            let mut w = AssignmentWriter::new(&mut input[1..], &mut bufs.aux.as_mut_slice()[..self.num_aux]);
            catch_unwind(AssertUnwindSafe(|| generate(&mut w).and_then(|()| w.finish())))
        };
        let witness = t.elapsed();
        let failed = match generated {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(p) => Some(format!("the generator panicked: {}", panic_text(&*p))),
        };
        if let Some(reason) = failed {
            return Ok(Err((Rejection { first_bad_row: None, reason }, bufs)));
        }
        let first_bad_row = {
            let aux = &bufs.aux.as_slice()[..self.num_aux];
            let (a, b, c) = (&mut bufs.a, &mut bufs.b, &mut bufs.c);
            self.evaluate_checked(&input, aux, [&mut a.as_mut_slice()[..n], &mut b.as_mut_slice()[..n], &mut c.as_mut_slice()[..n]])
        };
        if let Some(row) = first_bad_row {
            let reason = format!("constraint {row} of {n} is not satisfied (a*b != c)");
            return Ok(Err((Rejection { first_bad_row: Some(row), reason }, bufs)));
        }
        tracing::debug!(witness_ms = witness.as_secs_f64() * 1e3, "native witness checked");
        let assignment = Assignment {
            buffers: bufs,
            input,
            num_constraints: n,
            num_aux: self.num_aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
        };
        Ok(Ok((assignment, witness)))
    }

    /// a/b/c for every row, on every core; each block of rows is checked
    /// (a*b = c) right after its products, while they are in cache.
    /// Returns the first row that is not satisfied.
    fn evaluate_checked(&self, input: &[Scalar], aux: &[Scalar], [a, b, c]: [&mut [Scalar]; 3]) -> Option<usize> {
        a.par_chunks_mut(ROWS_PER_TASK)
            .zip(b.par_chunks_mut(ROWS_PER_TASK))
            .zip(c.par_chunks_mut(ROWS_PER_TASK))
            .enumerate()
            .filter_map(|(task, ((a, b), c))| {
                let first = task * ROWS_PER_TASK;
                self.a.mul_block(first, &self.coeffs, input, aux, a);
                self.b.mul_block(first, &self.coeffs, input, aux, b);
                self.c.mul_block(first, &self.coeffs, input, aux, c);
                a.iter().zip(b.iter()).zip(c.iter()).position(|((a, b), c)| *a * b != *c).map(|k| first + k)
            })
            .min()
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
#[path = "native_tests.rs"]
mod tests;
