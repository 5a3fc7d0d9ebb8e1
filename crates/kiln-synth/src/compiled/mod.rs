//! Compiled synthesis: record a circuit's constraints once as sparse
//! matrices, then synthesize every later instance of the same circuit by
//! computing only its witness and evaluating `a = A.w`, `b = B.w`, `c = C.w`
//! in parallel.
//!
//! Why: an ordinary synthesis builds three heap-allocated linear combinations
//! per constraint and evaluates them one after the other on one thread. The
//! witness alone is the part that must run in circuit order; the products are
//! independent row by row and split over every core. The matrices depend only
//! on the circuit's structure, which a Groth16 circuit must keep fixed (its
//! parameters encode it), so one recording serves every proof against the same
//! parameters.
//!
//! A witness whose circuit took a different shape (a circuit bug) is caught
//! by counting variables and constraints ([`SynthError::StructureChanged`]);
//! the prover's a*b = c check and proof verification remain behind it.
//!
//! ```
//! use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
//! use kiln_synth::{synthesize, AssignmentBuffers, CompiledR1cs};
//!
//! let circuit = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 10, 2);
//! let (first, r1cs) = CompiledR1cs::compile(circuit.with_witness(1), AssignmentBuffers::heap()).unwrap();
//! let fast = r1cs.synthesize(circuit.with_witness(2), AssignmentBuffers::heap()).unwrap();
//! let plain = synthesize(circuit.with_witness(2), AssignmentBuffers::heap()).unwrap();
//! assert_eq!((fast.a(), fast.b(), fast.c()), (plain.a(), plain.b(), plain.c()));
//! assert_eq!(fast.shape(), first.shape());
//! ```

mod matrix;
mod native;
mod overlap;
mod segmented;
mod segmented_compile;
mod witness;

pub use matrix::CompileLimit;
pub use segmented::{SegmentedCircuit, Whole};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, Index, Variable};
use blstrs::Scalar;
use ff::Field;
use crate::buffer::AssignmentBuffers;
use crate::density::Density;
use crate::{Assignment, CircuitShape, Products, SynthError};
use matrix::SparseRows;
use witness::{CompilingCs, WitnessCs};

/// A circuit's R1CS, recorded once: the A, B and C matrices (8 bytes per
/// non-zero term, coefficients deduplicated), the variable counts and the
/// density bitmaps.
pub struct CompiledR1cs {
    /// Unique to this recording (see [`id`](Self::id)).
    id: u64,
    num_inputs: usize,
    num_aux: usize,
    a: SparseRows,
    b: SparseRows,
    c: SparseRows,
    coeffs: Vec<Scalar>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
    /// Per block of `overlap::BLOCK_ROWS` rows: the aux and input counts
    /// its rows need (for evaluating them while the witness runs).
    block_needs: Vec<(usize, usize)>,
}

/// One compiled matrix in compressed-row form, as a prover that evaluates
/// a/b/c itself (a GPU backend) reads it: row `r` is
/// `terms[row_start[r] as usize..row_start[r + 1] as usize]`, each term
/// `[column, coefficient id]`. The column is an aux index, or an input
/// index with [`CompiledR1cs::INPUT_BIT`] set; the id indexes
/// [`CompiledR1cs::coefficients`], whose entries 0 and 1 are always 1 and
/// -1 (no multiplication needed).
#[derive(Clone, Copy, Debug)]
pub struct MatrixView<'a> {
    pub row_start: &'a [u32],
    pub terms: &'a [[u32; 2]],
}

/// Where a synthesis on the compiled path leaves a/b/c: `None` evaluates
/// them into the caller's buffers; `Some(r1cs)` (this very recording,
/// shared) leaves them to the prover ([`Products::Deferred`]).
pub(crate) type DeferTo<'a> = Option<&'a Arc<CompiledR1cs>>;

/// A synthesis of the compiled path that did not produce an assignment but
/// can be retried the ordinary way: the caller's buffers come back with it.
pub(crate) enum Retry {
    /// The circuit is too large for the compiled form.
    TooLarge(CompileLimit, AssignmentBuffers),
    /// This instance's shape differs from the recorded one.
    Changed(SynthError, AssignmentBuffers),
}

impl CompiledR1cs {
    /// Bit 31 of a term's column marks a public input ([`MatrixView`]).
    pub const INPUT_BIT: u32 = matrix::INPUT_BIT;

    /// Synthesize `circuit` the compiled way's first time: compute its
    /// witness, record its constraints, and evaluate a/b/c from the record.
    pub fn compile<C: Circuit<Scalar>>(circuit: C, buffers: AssignmentBuffers) -> Result<(Assignment, CompiledR1cs), SynthError> {
        match Self::try_compile(circuit, buffers, usize::MAX)? {
            Ok(done) => Ok(done),
            Err(Retry::TooLarge(l, _)) => Err(SynthError::TooLargeToCompile(l.0)),
            Err(Retry::Changed(e, _)) => Err(e),
        }
    }

    /// Synthesize another instance of the compiled circuit: witness only,
    /// then the three matrix-vector products in parallel.
    pub fn synthesize<C: Circuit<Scalar>>(&self, circuit: C, buffers: AssignmentBuffers) -> Result<Assignment, SynthError> {
        match self.try_synthesize_overlapped(circuit, buffers, None)?.map(|(asg, _, _)| asg) {
            Ok(a) => Ok(a),
            Err(Retry::TooLarge(l, _)) => Err(SynthError::TooLargeToCompile(l.0)),
            Err(Retry::Changed(e, _)) => Err(e),
        }
    }

    /// [`compile`](Self::compile), with the recording's memory capped at
    /// `max_bytes` (beyond it: [`Retry::TooLarge`]).
    pub(crate) fn try_compile<C: Circuit<Scalar>>(
        circuit: C,
        buffers: AssignmentBuffers,
        max_bytes: usize,
    ) -> Result<Result<(Assignment, CompiledR1cs), Retry>, SynthError> {
        let _span = tracing::debug_span!("compile_r1cs").entered();
        let mut cs = CompilingCs::with_buffers(buffers, max_bytes);
        cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        for i in 0..cs.w.input.len() {
            cs.enforce(|| "", |lc| lc + Variable::new_unchecked(Index::Input(i)), |lc| lc, |lc| lc);
        }
        cs.check_memory();
        let CompilingCs { w, a, b, c, coeffs, limit, .. } = cs;
        if let Some(l) = limit {
            return Ok(Err(Retry::TooLarge(l, w.bufs)));
        }
        let r1cs = Self::from_rows(w.input.len(), w.num_aux, [a, b, c], coeffs.into_values());
        let asg = r1cs.evaluate(w, 0)?;
        Ok(Ok((asg, r1cs)))
    }

    /// The compiled form of recorded matrices (every input's `x * 0 = 0`
    /// row included).
    fn from_rows(num_inputs: usize, num_aux: usize, [mut a, mut b, mut c]: [SparseRows; 3], coeffs: Vec<Scalar>) -> Self {
        for m in [&mut a, &mut b, &mut c] {
            m.shrink_to_fit();
        }
        let density = |m: &SparseRows, inputs: bool| {
            let mut d = Density::with_len(if inputs { num_inputs } else { num_aux });
            for r in 0..m.rows() {
                for v in m.row_vars(r) {
                    match (v.split(), inputs) {
                        (Ok(i), true) | (Err(i), false) => d.set(i),
                        _ => {}
                    }
                }
            }
            d
        };
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        CompiledR1cs {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            num_inputs,
            num_aux,
            block_needs: overlap::block_needs([&a, &b, &c]),
            a_aux_density: density(&a, false),
            b_input_density: density(&b, true),
            b_aux_density: density(&b, false),
            a,
            b,
            c,
            coeffs,
        }
    }

    /// Another instance's witness, then a/b/c (or, with `defer`, not: see
    /// [`DeferTo`]), saying how many leading rows of a/b/c were evaluated
    /// while the witness ran, and how long the witness took.
    pub(crate) fn try_synthesize_overlapped<C: Circuit<Scalar>>(
        &self,
        circuit: C,
        buffers: AssignmentBuffers,
        defer: DeferTo<'_>,
    ) -> Result<Result<(Assignment, usize, std::time::Duration), Retry>, SynthError> {
        let _span = tracing::debug_span!("synthesize_compiled").entered();
        let t = std::time::Instant::now();
        let n = self.num_constraints();
        let mut cs = WitnessCs::with_buffers(buffers);
        // Every buffer at its final size before the witness starts: the
        // evaluator reads aux while it is written, so nothing may grow.
        // (Deferred products need no a/b/c at all.)
        let bufs = &mut cs.bufs;
        let sized = (defer.is_some() || [&mut bufs.a, &mut bufs.b, &mut bufs.c].into_iter().all(|b| b.as_slice().len() >= n || b.try_grow(n)))
            && (bufs.aux.as_slice().len() >= self.num_aux || bufs.aux.try_grow(self.num_aux));
        let mut evaluated = 0;
        if sized && defer.is_none() && overlap::enabled() {
            let empty = || Box::new(Vec::<Scalar>::new()) as Box<dyn crate::ScalarBuffer>;
            let mut abc = [std::mem::replace(&mut cs.bufs.a, empty()), std::mem::replace(&mut cs.bufs.b, empty()), std::mem::replace(&mut cs.bufs.c, empty())];
            // SAFETY: until `reader` and `cs.feed` are dropped below, the aux
            // buffer is used only through them, and its Box is not touched.
            let (writer, reader) = unsafe { overlap::feed(&mut cs.bufs.aux.as_mut_slice()[..self.num_aux], self.num_inputs) };
            cs.feed = Some(writer);
            let done = std::sync::atomic::AtomicBool::new(false);
            let witness = std::thread::scope(|s| {
                let [a, b, c] = &mut abc;
                let (reader, done) = (&reader, &done);
                // No thread to be had (a process limit): the products all run after the witness.
                let evaluator = std::thread::Builder::new()
                    .name("kiln-abc".into())
                    .spawn_scoped(s, move || self.follow(reader, done, [a.as_mut_slice(), b.as_mut_slice(), c.as_mut_slice()]))
                    .ok();
                let witness = {
                    let _done = overlap::DoneOnDrop(done);
                    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE)).and_then(|_| circuit.synthesize(&mut cs))
                };
                if let Some(e) = evaluator {
                    evaluated = e.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                }
                witness
            });
            cs.feed = None;
            drop(reader);
            [cs.bufs.a, cs.bufs.b, cs.bufs.c] = abc;
            witness?;
        } else {
            cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
            circuit.synthesize(&mut cs)?;
        }
        let witness = t.elapsed();
        let found = (cs.input.len(), cs.num_aux, cs.num_constraints + cs.input.len());
        let want = (self.num_inputs, self.num_aux, self.num_constraints());
        if found != want {
            let e = SynthError::StructureChanged {
                found: format!("{} inputs, {} aux, {} constraints", found.0, found.1, found.2),
                recorded: format!("{} inputs, {} aux, {} constraints", want.0, want.1, want.2),
            };
            return Ok(Err(Retry::Changed(e, cs.bufs)));
        }
        let assignment = self.finish(cs, evaluated, defer)?;
        tracing::debug!(
            witness_ms = witness.as_secs_f64() * 1e3,
            rows_during_witness = evaluated,
            rest_ms = (t.elapsed() - witness).as_secs_f64() * 1e3,
            "compiled synthesis"
        );
        Ok(Ok((assignment, evaluated, witness)))
    }

    /// The assignment of a complete witness: a/b/c evaluated (rows below
    /// `from` are already there), or left to the prover with `defer`.
    fn finish(&self, w: WitnessCs, from: usize, defer: DeferTo<'_>) -> Result<Assignment, SynthError> {
        match defer {
            None => self.evaluate(w, from),
            Some(r1cs) => {
                debug_assert!(std::ptr::eq(&**r1cs, self), "deferred to another recording");
                if let Some(capacity) = w.aux_overflow {
                    return Err(SynthError::BufferTooSmall { which: "aux", needed: w.num_aux, capacity });
                }
                let WitnessCs { bufs, input, num_aux, .. } = w;
                Ok(self.assignment(bufs, input, num_aux, Products::Deferred(r1cs.clone())))
            }
        }
    }

    /// An assignment of this circuit over `buffers`.
    pub(crate) fn assignment(&self, buffers: AssignmentBuffers, input: Vec<Scalar>, num_aux: usize, products: Products) -> Assignment {
        Assignment {
            buffers,
            input,
            num_constraints: self.num_constraints(),
            num_aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
            products,
        }
    }

    /// a/b/c from a complete witness, into the witness system's buffers;
    /// rows below `from` are already there.
    fn evaluate(&self, w: WitnessCs, from: usize) -> Result<Assignment, SynthError> {
        if let Some(capacity) = w.aux_overflow {
            return Err(SynthError::BufferTooSmall { which: "aux", needed: w.num_aux, capacity });
        }
        let WitnessCs { mut bufs, input, num_aux, .. } = w;
        let n = self.num_constraints();
        let aux = &bufs.aux.as_slice()[..num_aux];
        for (buf, m, which) in [(&mut bufs.a, &self.a, "a"), (&mut bufs.b, &self.b, "b"), (&mut bufs.c, &self.c, "c")] {
            if buf.as_slice().len() < n && !buf.try_grow(n) {
                return Err(SynthError::BufferTooSmall { which, needed: n, capacity: buf.as_slice().len() });
            }
            m.mul_rows(from, &self.coeffs, &input, aux, &mut buf.as_mut_slice()[from..n], true);
        }
        Ok(self.assignment(bufs, input, num_aux, Products::Host))
    }

    /// Identifies this recording: two compiled circuits never share an id
    /// in one process (even one compiled again after the first was dropped),
    /// so a copy of the matrices kept elsewhere (in VRAM) can be keyed by it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The A, B and C matrices.
    pub fn matrices(&self) -> [MatrixView<'_>; 3] {
        [&self.a, &self.b, &self.c].map(|m| MatrixView { row_start: m.starts(), terms: m.terms() })
    }

    /// The distinct coefficients the matrices' terms name by id.
    pub fn coefficients(&self) -> &[Scalar] {
        &self.coeffs
    }

    /// Constraints, counting one `input * 0 = 0` per input.
    pub fn num_constraints(&self) -> usize {
        self.a.rows()
    }

    /// The circuit's dimensions.
    pub fn shape(&self) -> CircuitShape {
        CircuitShape {
            num_constraints: self.num_constraints(),
            num_inputs: self.num_inputs,
            num_aux: self.num_aux,
            a_aux_count: self.a_aux_density.count(),
            b_input_count: self.b_input_density.count(),
            b_aux_count: self.b_aux_density.count(),
        }
    }

    /// Non-zero terms of A, B and C together.
    pub fn nnz(&self) -> usize {
        self.a.nnz() + self.b.nnz() + self.c.nnz()
    }

    /// Heap memory held (what a cache of compiled circuits accounts for).
    pub fn heap_bytes(&self) -> usize {
        let density = |d: &Density| d.words().len() * 8;
        self.a.heap_bytes()
            + self.b.heap_bytes()
            + self.c.heap_bytes()
            + self.coeffs.capacity() * std::mem::size_of::<Scalar>()
            + density(&self.a_aux_density)
            + density(&self.b_input_density)
            + density(&self.b_aux_density)
            + self.block_needs.capacity() * std::mem::size_of::<(usize, usize)>()
    }
}

impl std::fmt::Debug for CompiledR1cs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledR1cs")
            .field("shape", &self.shape())
            .field("nnz", &self.nnz())
            .field("coefficients", &self.coeffs.len())
            .field("heap_bytes", &self.heap_bytes())
            .finish()
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod deferred_tests;
