//! kiln-synth: turn a `bellpepper_core::Circuit<blstrs::Scalar>` into the
//! assignment a Groth16 prover consumes — the A/B/C evaluation vectors, the
//! input and aux assignments and the A/B density bitmaps — written straight
//! into buffers the caller provides (page-locked ones when a GPU is used, so
//! there is no staging copy before the host-to-device transfer).
//!
//! The evaluation rules are bellperson's, so an [`Assignment`] pairs with
//! parameters made by bellperson's `generate_random_parameters` (and with
//! Filecoin's `.params` files).
//!
//! ```
//! use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
//! use blstrs::Scalar;
//! use ff::Field;
//! use kiln_synth::{synthesize, AssignmentBuffers};
//!
//! /// Knows x such that x * x = y.
//! struct Square(Scalar);
//! impl Circuit<Scalar> for Square {
//!     fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
//!         let x = cs.alloc(|| "x", || Ok(self.0))?;
//!         let y = cs.alloc_input(|| "y", || Ok(self.0.square()))?;
//!         cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
//!         Ok(())
//!     }
//! }
//!
//! let asg = synthesize(Square(Scalar::from(3u64)), AssignmentBuffers::heap()).unwrap();
//! // One circuit constraint plus one `input * 0 = 0` constraint per input (ONE and y).
//! assert_eq!(asg.num_constraints, 3);
//! assert_eq!(asg.input, vec![Scalar::ONE, Scalar::from(9u64)]);
//! asg.check_satisfied().unwrap();
//! ```

/// The README's example, compiled and run as a doc test so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod buffer;
mod cache;
mod compiled;
mod cs;
mod density;
pub mod native;
mod shape;
pub mod workload;

pub use buffer::{AssignmentBuffers, ScalarBuffer};
pub use cache::{Admission, CircuitCache, CircuitCacheStats, CompileTurn, Recording, SynthContext};
pub use compiled::{CompileLimit, CompiledR1cs, MatrixView, SegmentedCircuit, Whole};
pub use density::Density;
pub use shape::CircuitShape;

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, Index, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use cs::RecordingCs;

/// Errors from synthesis.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The circuit's own synthesis failed (e.g. a missing witness value).
    #[error("circuit synthesis failed: {0}")]
    Circuit(#[from] SynthesisError),
    /// A fixed-size buffer was smaller than the circuit needs.
    #[error("the {which} buffer holds {capacity} elements but the circuit needs at least {needed}")]
    BufferTooSmall { which: &'static str, needed: usize, capacity: usize },
    /// The witness does not satisfy constraint `index` (a*b != c).
    #[error("constraint {index} of {total} is not satisfied by the witness (a*b != c)")]
    Unsatisfied { index: usize, total: usize },
    /// The circuit cannot be compiled ([`CompiledR1cs`]); synthesize it the ordinary way.
    #[error("the circuit is too large to compile: {0}")]
    TooLargeToCompile(&'static str),
    /// This instance of a compiled circuit took a different shape than the
    /// recorded one (a circuit whose structure depends on its witness).
    #[error("the circuit's shape changed since it was compiled: {found}, recorded {recorded}")]
    StructureChanged { found: String, recorded: String },
}

/// Where an assignment's A/B/C evaluations are.
#[derive(Clone)]
pub enum Products {
    /// In the assignment's a/b/c buffers.
    Host,
    /// Not computed: the witness (inputs and aux) is complete, and a/b/c =
    /// A.w, B.w, C.w are left to the prover, which evaluates them from
    /// these matrices (on a GPU, where they are kept) and must check
    /// a*b = c on every row before it uses them, since nothing has checked
    /// this witness yet. The a/b/c buffers may be empty.
    Deferred(Arc<CompiledR1cs>),
}

impl std::fmt::Debug for Products {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Products::Host => f.write_str("Host"),
            Products::Deferred(r) => write!(f, "Deferred(r1cs {})", r.id()),
        }
    }
}

/// A synthesized circuit: what the prover needs, in the caller's buffers.
///
/// Only the first `num_constraints` elements of `a`, `b`, `c` and the first
/// `num_aux` of `aux` are meaningful; buffers may be larger. When the
/// products are [`Products::Deferred`], a/b/c are not there at all.
pub struct Assignment {
    /// A/B/C evaluations and aux assignment.
    pub buffers: AssignmentBuffers,
    /// Public inputs; `input[0]` is the constant ONE.
    pub input: Vec<Scalar>,
    /// Constraints, counting one `input * 0 = 0` per input.
    pub num_constraints: usize,
    /// Aux (private) variables.
    pub num_aux: usize,
    /// Aux variables used by some A combination.
    pub a_aux_density: Density,
    /// Inputs used by some B combination.
    pub b_input_density: Density,
    /// Aux variables used by some B combination.
    pub b_aux_density: Density,
    /// Whether a/b/c are in `buffers` or left to the prover.
    pub products: Products,
}

impl Assignment {
    /// A evaluations, one per constraint.
    ///
    /// # Panics
    /// When the products are [`Products::Deferred`] (see [`products_on_host`](Self::products_on_host)).
    pub fn a(&self) -> &[Scalar] {
        self.product(&*self.buffers.a)
    }
    /// B evaluations, one per constraint (panics as [`a`](Self::a) does).
    pub fn b(&self) -> &[Scalar] {
        self.product(&*self.buffers.b)
    }
    /// C evaluations, one per constraint (panics as [`a`](Self::a) does).
    pub fn c(&self) -> &[Scalar] {
        self.product(&*self.buffers.c)
    }

    fn product<'a>(&self, buf: &'a dyn ScalarBuffer) -> &'a [Scalar] {
        assert!(self.products_on_host(), "a/b/c of this assignment are left to the prover (Products::Deferred)");
        &buf.as_slice()[..self.num_constraints]
    }

    /// Whether a/b/c are in the buffers (else the prover evaluates them).
    pub fn products_on_host(&self) -> bool {
        matches!(self.products, Products::Host)
    }
    /// The aux (private) assignment.
    pub fn aux(&self) -> &[Scalar] {
        &self.buffers.aux.as_slice()[..self.num_aux]
    }

    /// The circuit's dimensions.
    pub fn shape(&self) -> CircuitShape {
        CircuitShape {
            num_constraints: self.num_constraints,
            num_inputs: self.input.len(),
            num_aux: self.num_aux,
            a_aux_count: self.a_aux_density.count(),
            b_input_count: self.b_input_density.count(),
            b_aux_count: self.b_aux_density.count(),
        }
    }

    /// Check a*b = c for every constraint (in parallel). An unsatisfied
    /// circuit would otherwise yield a proof that merely fails to verify.
    /// Deferred products are evaluated for the check (and not kept).
    pub fn check_satisfied(&self) -> Result<(), SynthError> {
        let bad = match &self.products {
            Products::Deferred(r1cs) => r1cs.first_unsatisfied(&self.input, self.aux()),
            Products::Host => {
                let (a, b, c) = (self.a(), self.b(), self.c());
                (0..self.num_constraints).into_par_iter().with_min_len(4096).find_first(|&i| a[i] * b[i] != c[i])
            }
        };
        match bad {
            Some(index) => Err(SynthError::Unsatisfied { index, total: self.num_constraints }),
            None => Ok(()),
        }
    }

    /// Zero the part of a/b/c between `num_constraints` and `len` (the
    /// evaluation domain's padding), growing heap buffers as needed.
    /// Nothing to pad when the products are deferred.
    pub fn pad_abc_to(&mut self, len: usize) -> Result<(), SynthError> {
        if !self.products_on_host() {
            return Ok(());
        }
        let n = self.num_constraints;
        for (buf, which) in
            [(&mut self.buffers.a, "a"), (&mut self.buffers.b, "b"), (&mut self.buffers.c, "c")]
        {
            if buf.as_slice().len() < len && !buf.try_grow(len) {
                return Err(SynthError::BufferTooSmall { which, needed: len, capacity: buf.as_slice().len() });
            }
            buf.as_mut_slice()[n..len].fill(Scalar::ZERO);
        }
        Ok(())
    }
}

impl std::fmt::Debug for Assignment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assignment").field("shape", &self.shape()).field("products", &self.products).finish()
    }
}

/// Synthesize one circuit into `buffers`.
///
/// Follows bellperson's prover exactly: the constant ONE is input 0, and after
/// the circuit each input `x` gets a constraint `x * 0 = 0` (this keeps the
/// input polynomials linearly independent; the parameters assume it).
pub fn synthesize<C: Circuit<Scalar>>(circuit: C, buffers: AssignmentBuffers) -> Result<Assignment, SynthError> {
    let _span = tracing::debug_span!("synthesize").entered();
    let mut cs = RecordingCs::with_buffers(buffers);
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    for i in 0..cs.input.len() {
        cs.enforce(|| "", |lc| lc + Variable::new_unchecked(Index::Input(i)), |lc| lc, |lc| lc);
    }
    if let Some(o) = cs.overflow {
        return Err(SynthError::BufferTooSmall { which: o.which, needed: o.needed.max(cs_needed(&cs, o.which)), capacity: o.capacity });
    }
    Ok(Assignment {
        buffers: cs.bufs,
        input: cs.input,
        num_constraints: cs.num_constraints,
        num_aux: cs.num_aux,
        a_aux_density: cs.a_aux_density,
        b_input_density: cs.b_input_density,
        b_aux_density: cs.b_aux_density,
        products: Products::Host,
    })
}

/// The full size a buffer would have needed (synthesis continues counting
/// after the first overflow, so the error can say how much room to give).
fn cs_needed(cs: &RecordingCs, which: &str) -> usize {
    if which == "aux" { cs.num_aux } else { cs.num_constraints }
}

/// Synthesize several circuits in parallel (rayon), each into its own buffers.
pub fn synthesize_many<C>(work: Vec<(C, AssignmentBuffers)>) -> Vec<Result<Assignment, SynthError>>
where
    C: Circuit<Scalar> + Send,
{
    work.into_par_iter().map(|(c, b)| synthesize(c, b)).collect()
}

#[cfg(test)]
mod tests;
