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

use super::{CompiledR1cs, DeferTo};
use crate::buffer::AssignmentBuffers;
use crate::native::AssignmentWriter;
use crate::{Assignment, Products, SynthError};

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
    ///
    /// With `defer`, a/b/c are neither evaluated nor checked here: the
    /// assignment's products are [`Products::Deferred`], and the prover
    /// that evaluates them checks every row (the a/b/c buffers may be empty).
    pub(crate) fn try_native<N>(&self, generate: N, mut bufs: AssignmentBuffers, defer: DeferTo<'_>) -> Result<NativeOutcome, SynthError>
    where
        N: FnOnce(&mut AssignmentWriter<'_>) -> Result<(), String>,
    {
        let _span = tracing::debug_span!("synthesize_native").entered();
        let n = self.num_constraints();
        let abc_len = if defer.is_some() { 0 } else { n };
        for (buf, which, len) in [(&mut bufs.a, "a", abc_len), (&mut bufs.b, "b", abc_len), (&mut bufs.c, "c", abc_len), (&mut bufs.aux, "aux", self.num_aux)] {
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
        if let Some(r1cs) = defer {
            tracing::debug!(witness_ms = witness.as_secs_f64() * 1e3, "native witness written; a/b/c left to the prover");
            return Ok(Ok((self.assignment(bufs, input, self.num_aux, Products::Deferred(r1cs.clone())), witness)));
        }
        let first_bad_row = {
            let aux = &bufs.aux.as_slice()[..self.num_aux];
            let (a, b, c) = (&mut bufs.a, &mut bufs.b, &mut bufs.c);
            self.products_checked(0, &input, aux, [&mut a.as_mut_slice()[..n], &mut b.as_mut_slice()[..n], &mut c.as_mut_slice()[..n]])
        };
        if let Some(row) = first_bad_row {
            let reason = format!("constraint {row} of {n} is not satisfied (a*b != c)");
            return Ok(Err((Rejection { first_bad_row: Some(row), reason }, bufs)));
        }
        tracing::debug!(witness_ms = witness.as_secs_f64() * 1e3, "native witness checked");
        Ok(Ok((self.assignment(bufs, input, self.num_aux, Products::Host), witness)))
    }

    /// a/b/c of rows `first..first + a.len()` (`a`, `b`, `c` of one
    /// length) from the inputs and aux of a complete witness, on every
    /// core; each block of rows is checked (a*b = c) right after its
    /// products, while they are in cache. Returns the first row that is
    /// not satisfied. What a prover runs for an assignment whose products
    /// are [`Products::Deferred`] when it evaluates them on the host.
    ///
    /// # Panics
    /// If the rows pass the last constraint or the slices' lengths differ,
    /// or `input`/`aux` are shorter than the circuit's.
    pub fn products_checked(&self, first: usize, input: &[Scalar], aux: &[Scalar], [a, b, c]: [&mut [Scalar]; 3]) -> Option<usize> {
        assert!(a.len() == b.len() && b.len() == c.len() && first + a.len() <= self.num_constraints(), "rows out of range");
        assert!(input.len() >= self.num_inputs && aux.len() >= self.num_aux, "the witness is shorter than the circuit");
        a.par_chunks_mut(ROWS_PER_TASK)
            .zip(b.par_chunks_mut(ROWS_PER_TASK))
            .zip(c.par_chunks_mut(ROWS_PER_TASK))
            .enumerate()
            .filter_map(|(task, ((a, b), c))| self.products_checked_serial(first + task * ROWS_PER_TASK, input, aux, [a, b, c]))
            .min()
    }

    /// The first row that `input` and `aux` do not satisfy, evaluating
    /// every row on every core without keeping a/b/c.
    pub fn first_unsatisfied(&self, input: &[Scalar], aux: &[Scalar]) -> Option<usize> {
        let n = self.num_constraints();
        (0..n.div_ceil(ROWS_PER_TASK))
            .into_par_iter()
            .filter_map(|task| {
                let first = task * ROWS_PER_TASK;
                let len = ROWS_PER_TASK.min(n - first);
                let mut abc = vec![Scalar::ZERO; 3 * len];
                let (a, bc) = abc.split_at_mut(len);
                let (b, c) = bc.split_at_mut(len);
                self.products_checked_serial(first, input, aux, [a, b, c])
            })
            .min()
    }

    /// [`products_checked`](Self::products_checked) on this thread, for one task's rows.
    fn products_checked_serial(&self, first: usize, input: &[Scalar], aux: &[Scalar], [a, b, c]: [&mut [Scalar]; 3]) -> Option<usize> {
        self.a.mul_block(first, &self.coeffs, input, aux, a);
        self.b.mul_block(first, &self.coeffs, input, aux, b);
        self.c.mul_block(first, &self.coeffs, input, aux, c);
        a.iter().zip(b.iter()).zip(c.iter()).position(|((a, b), c)| *a * b != *c).map(|k| first + k)
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
#[path = "native_tests.rs"]
mod tests;
