//! Segmented witnesses: a circuit made of a shared prefix and segments that
//! do not depend on one another (one per challenge, say) has its segments'
//! witnesses computed on every core at once, each written straight into its
//! place in the caller's aux buffer.
//!
//! Why: a circuit's witness code runs on one thread (gadgets compute values
//! as they allocate), and for a lone Filecoin partition that thread is the
//! critical path of the whole proof. The compiled path already knows the
//! circuit's sizes, so each segment's place in the assignment is known
//! before it runs.

use std::sync::atomic::{AtomicU64, Ordering};

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

use super::witness::WitnessCs;
use super::{CompiledR1cs, DeferTo, Retry};
use crate::buffer::AssignmentBuffers;
use crate::{Assignment, SynthError};

/// A circuit whose synthesis is a prefix followed by `segments()` segments
/// of one shape, each depending on the prefix's values but not on another
/// segment's: Filecoin's PoRep partition is its public commitments followed
/// by one segment per challenge.
///
/// The contract, which the compiled path checks where it can (sizes, and the
/// prefix's values in every segment's run) and proof verification checks
/// behind it:
/// - [`synthesize_whole`](Self::synthesize_whole) allocates the prefix, then
///   segment 0, 1, ... in order: it *is* the circuit (recorded once);
/// - [`synthesize_part`](Self::synthesize_part)`(None)` allocates exactly the
///   prefix, and `(Some(k))` the prefix followed by segment `k` alone, with
///   the same values as in the whole circuit.
pub trait SegmentedCircuit: Sync {
    /// How many segments follow the prefix.
    fn segments(&self) -> usize;

    /// The whole circuit.
    fn synthesize_whole<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS) -> Result<(), SynthesisError>;

    /// The prefix, followed by segment `segment` when there is one.
    fn synthesize_part<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS, segment: Option<usize>) -> Result<(), SynthesisError>;
}

/// A [`SegmentedCircuit`] as an ordinary circuit (its whole synthesis).
pub struct Whole<'a, S>(pub &'a S);

impl<S: SegmentedCircuit> Circuit<Scalar> for Whole<'_, S> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.0.synthesize_whole(cs)
    }
}

/// Sizes of one part of a synthesis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sizes {
    pub(super) inputs: usize,
    pub(super) aux: usize,
    pub(super) constraints: usize,
}

/// Runs one segment's part: checks the prefix's values as they are
/// allocated again, writes the segment's aux values into `out`, keeps its
/// inputs.
struct SegmentCs<'a> {
    prefix_aux: &'a [Scalar],
    prefix_input: &'a [Scalar],
    out: &'a mut [Scalar],
    input: Vec<Scalar>,
    sizes: Sizes,
    /// The first difference from the prefix or from the segment's place.
    fault: Option<String>,
}

impl SegmentCs<'_> {
    fn fault(&mut self, what: impl FnOnce() -> String) {
        if self.fault.is_none() {
            self.fault = Some(what());
        }
    }
}

impl ConstraintSystem<Scalar> for SegmentCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        let idx = self.sizes.aux;
        let p = self.prefix_aux.len();
        if idx < p {
            if self.prefix_aux[idx] != v {
                self.fault(|| format!("aux {idx} of the prefix differs in a segment's run"));
            }
        } else if let Some(slot) = self.out.get_mut(idx - p) {
            *slot = v;
        } else {
            let room = self.out.len();
            self.fault(|| format!("a segment allocates more than the {room} aux variables of its place"));
        }
        self.sizes.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(idx)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        let idx = self.sizes.inputs;
        if idx < self.prefix_input.len() {
            if self.prefix_input[idx] != v {
                self.fault(|| format!("input {idx} of the prefix differs in a segment's run"));
            }
        } else {
            self.input.push(v);
        }
        self.sizes.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(idx)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.sizes.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

impl CompiledR1cs {
    /// The witness of a segmented circuit with its segments in parallel
    /// (counted in `parallel`, its wall time added to `witness_ns`); when
    /// the recorded sizes do not split into segments of one shape, the
    /// whole circuit on this thread instead.
    pub(crate) fn try_synthesize_segmented<S: SegmentedCircuit>(
        &self,
        circuit: &S,
        buffers: AssignmentBuffers,
        parallel: &AtomicU64,
        witness_ns: &AtomicU64,
        defer: DeferTo<'_>,
    ) -> Result<Result<Assignment, Retry>, SynthError> {
        let _span = tracing::debug_span!("synthesize_segmented", segments = circuit.segments()).entered();
        let t = std::time::Instant::now();
        let mut cs = WitnessCs::with_buffers(buffers);
        cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize_part(&mut cs, None)?;
        let prefix = Sizes { inputs: cs.input.len(), aux: cs.num_aux, constraints: cs.num_constraints };
        let Some(seg) = self.segment_sizes(prefix, circuit.segments()) else {
            return Ok(self.try_synthesize_overlapped(Whole(circuit), cs.bufs, defer)?.map(|(asg, _, witness)| {
                witness_ns.fetch_add(witness.as_nanos() as u64, Ordering::Relaxed);
                asg
            }));
        };
        if cs.aux_overflow.is_some() || (cs.bufs.aux.as_slice().len() < self.num_aux && !cs.bufs.aux.try_grow(self.num_aux)) {
            let capacity = cs.bufs.aux.as_slice().len();
            return Err(SynthError::BufferTooSmall { which: "aux", needed: self.num_aux, capacity });
        }
        let (prefix_aux, rest) = cs.bufs.aux.as_mut_slice()[..self.num_aux].split_at_mut(prefix.aux);
        let prefix_input = &cs.input[..];
        let runs = rest
            .par_chunks_mut(seg.aux)
            .enumerate()
            .map(|(k, out)| {
                // Input 0, ONE, is the caller's (allocated above, before the prefix).
                let sizes = Sizes { inputs: 1, aux: 0, constraints: 0 };
                let mut s = SegmentCs { prefix_aux, prefix_input, out, input: Vec::new(), sizes, fault: None };
                circuit.synthesize_part(&mut s, Some(k))?;
                let want = Sizes { inputs: prefix.inputs + seg.inputs, aux: prefix.aux + seg.aux, constraints: prefix.constraints + seg.constraints };
                let got = s.sizes;
                if got != want {
                    s.fault(|| format!("segment {k} has {got:?}, its place {want:?}"));
                }
                Ok((s.input, s.fault))
            })
            .collect::<Result<Vec<_>, SynthesisError>>()?;
        let mut fault = None;
        for (input, f) in runs {
            cs.input.extend(input);
            fault = fault.or(f);
        }
        cs.num_aux = self.num_aux;
        cs.num_constraints = prefix.constraints + seg.constraints * circuit.segments();
        if let Some(f) = fault {
            let e = SynthError::StructureChanged { found: f, recorded: format!("{} segments of {seg:?} after a prefix of {prefix:?}", circuit.segments()) };
            return Ok(Err(Retry::Changed(e, cs.bufs)));
        }
        parallel.fetch_add(1, Ordering::Relaxed);
        witness_ns.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(Ok(self.finish(cs, 0, defer)?))
    }

    /// The one shape the recording's sizes give `segments` segments after
    /// `prefix`, if they split evenly into non-empty segments.
    fn segment_sizes(&self, prefix: Sizes, segments: usize) -> Option<Sizes> {
        // The recording counts one `input * 0 = 0` row per input besides the circuit's own.
        let constraints = self.num_constraints().checked_sub(self.num_inputs)?;
        let rest = Sizes {
            inputs: self.num_inputs.checked_sub(prefix.inputs)?,
            aux: self.num_aux.checked_sub(prefix.aux)?,
            constraints: constraints.checked_sub(prefix.constraints)?,
        };
        let even = |n: usize| (segments > 0 && n.is_multiple_of(segments)).then(|| n / segments);
        let seg = Sizes { inputs: even(rest.inputs)?, aux: even(rest.aux)?, constraints: even(rest.constraints)? };
        (seg.aux > 0).then_some(seg)
    }
}

#[cfg(test)]
#[path = "segmented_tests.rs"]
mod tests;
