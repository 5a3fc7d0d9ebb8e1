//! Constraint systems for the compiled path: [`WitnessCs`] computes only the
//! assignment (it never builds a linear combination), [`CompilingCs`] also
//! records the constraints as matrices.

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use super::matrix::{CoeffTable, CompileLimit, SparseRows, Var};
use super::overlap::FeedWriter;
use crate::buffer::{AssignmentBuffers, ScalarBuffer};

/// Records the assignment: aux values into the caller's aux buffer, inputs
/// into a vector. `enforce` only counts: its closures are never called, which
/// is where an ordinary synthesis spends much of its time (each closure
/// builds a heap-allocated linear combination).
pub(crate) struct WitnessCs {
    pub(crate) bufs: AssignmentBuffers,
    pub(crate) input: Vec<Scalar>,
    pub(crate) num_aux: usize,
    pub(crate) num_constraints: usize,
    /// The aux buffer ran out of room at this many variables (reported at the end).
    pub(crate) aux_overflow: Option<usize>,
    /// While set, aux values and inputs also go to an evaluator thread, and
    /// aux values are written through it (never through `bufs.aux`).
    pub(crate) feed: Option<FeedWriter>,
}

impl WitnessCs {
    pub(crate) fn with_buffers(bufs: AssignmentBuffers) -> Self {
        WitnessCs { bufs, input: Vec::new(), num_aux: 0, num_constraints: 0, aux_overflow: None, feed: None }
    }

    fn push_aux(&mut self, v: Scalar) -> usize {
        let idx = self.num_aux;
        if let Some(feed) = &mut self.feed {
            // The feed's buffer is sized for the recorded circuit and never
            // grows (the evaluator reads it): a longer witness is a changed
            // structure, caught by the counts afterwards.
            if !feed.push(v) {
                self.aux_overflow.get_or_insert(idx);
            }
            self.num_aux += 1;
            return idx;
        }
        let aux = &mut self.bufs.aux;
        if idx < aux.as_slice().len() || aux.try_grow(idx + 1) {
            aux.as_mut_slice()[idx] = v;
        } else {
            self.aux_overflow.get_or_insert(aux.as_slice().len());
        }
        self.num_aux += 1;
        idx
    }

    /// The aux values written so far (all of them unless the buffer overflowed).
    pub(crate) fn aux_values(&self) -> &[Scalar] {
        if let Some(feed) = &self.feed {
            return feed.written();
        }
        let s = self.bufs.aux.as_slice();
        &s[..self.num_aux.min(s.len())]
    }

    fn extend_witness(&mut self, other: &WitnessCs) {
        if let Some(cap) = other.aux_overflow {
            self.aux_overflow.get_or_insert(cap);
        }
        for &v in other.aux_values() {
            self.push_aux(v);
        }
        // The sub-system's first input is its own copy of ONE.
        for &v in other.input.get(1..).unwrap_or(&[]) {
            if let Some(feed) = &self.feed {
                feed.input(self.input.len(), v);
            }
            self.input.push(v);
        }
        self.num_constraints += other.num_constraints;
    }
}

impl ConstraintSystem<Scalar> for WitnessCs {
    type Root = Self;

    fn new() -> Self {
        WitnessCs::with_buffers(AssignmentBuffers::heap())
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let idx = self.push_aux(f()?);
        Ok(Variable::new_unchecked(Index::Aux(idx)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        if let Some(feed) = &self.feed {
            feed.input(self.input.len(), v);
        }
        self.input.push(v);
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.num_constraints += 1;
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

    fn is_extensible() -> bool {
        true
    }

    fn extend(&mut self, other: &Self) {
        self.extend_witness(other);
    }
}

/// A [`WitnessCs`] that also records every constraint as a row of the A, B
/// and C matrices.
pub(crate) struct CompilingCs {
    pub(crate) w: WitnessCs,
    pub(crate) a: SparseRows,
    pub(crate) b: SparseRows,
    pub(crate) c: SparseRows,
    pub(crate) coeffs: CoeffTable,
    /// The first limit hit (`enforce` cannot return an error).
    pub(crate) limit: Option<CompileLimit>,
    /// Memory the recording may use (checked every 1024 constraints).
    pub(crate) max_bytes: usize,
}

impl CompilingCs {
    pub(crate) fn with_buffers(bufs: AssignmentBuffers, max_bytes: usize) -> Self {
        CompilingCs {
            w: WitnessCs::with_buffers(bufs),
            a: SparseRows::new(),
            b: SparseRows::new(),
            c: SparseRows::new(),
            coeffs: CoeffTable::new(),
            limit: None,
            max_bytes,
        }
    }

    /// Memory the recording holds now.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.a.heap_bytes() + self.b.heap_bytes() + self.c.heap_bytes() + self.coeffs.heap_bytes()
    }

    pub(crate) fn check_memory(&mut self) {
        if self.limit.is_none() && self.heap_bytes() > self.max_bytes {
            self.limit = Some(CompileLimit("the recording outgrew its memory allowance"));
        }
    }

    /// Append `lc` as the next row of `m`. Zero coefficients are dropped
    /// (bellperson's rule: such a term neither counts nor marks density).
    fn record(m: &mut SparseRows, coeffs: &mut CoeffTable, lc: &LinearCombination<Scalar>) -> Result<(), CompileLimit> {
        for (&i, c) in lc.iter_inputs() {
            if !bool::from(c.is_zero()) {
                m.push(Var::input(i)?, coeffs.id(c)?);
            }
        }
        for (&i, c) in lc.iter_aux() {
            if !bool::from(c.is_zero()) {
                m.push(Var::aux(i)?, coeffs.id(c)?);
            }
        }
        m.end_row()
    }

    fn append(&mut self, other: &CompilingCs) -> Result<(), CompileLimit> {
        if let Some(l) = other.limit {
            return Err(l);
        }
        let (input_base, aux_base) = (self.w.input.len(), self.w.num_aux);
        // A sub-system's input 0 is its own ONE: it maps onto ours.
        let map_var = |v: Var| match v.split() {
            Ok(0) => v,
            Ok(i) => Var::input(input_base + i - 1).expect("checked below"),
            Err(j) => Var::aux(aux_base + j).expect("checked below"),
        };
        Var::input(input_base + other.w.input.len())?;
        Var::aux(aux_base + other.w.num_aux)?;
        let ids = other.coeffs.values().iter().map(|c| self.coeffs.id(c)).collect::<Result<Vec<u32>, _>>()?;
        let map_coeff = |k: u32| ids[k as usize];
        self.a.append_mapped(&other.a, map_var, map_coeff)?;
        self.b.append_mapped(&other.b, map_var, map_coeff)?;
        self.c.append_mapped(&other.c, map_var, map_coeff)
    }
}

impl ConstraintSystem<Scalar> for CompilingCs {
    type Root = Self;

    fn new() -> Self {
        // A sub-system's rows are checked against the allowance when they
        // are appended to the root.
        CompilingCs::with_buffers(AssignmentBuffers::heap(), usize::MAX)
    }

    fn alloc<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.w.alloc(a, f)
    }

    fn alloc_input<F, A, AR>(&mut self, a: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.w.alloc_input(a, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.w.num_constraints += 1;
        if self.limit.is_some() {
            return;
        }
        let (a, b, c) = (a(LinearCombination::zero()), b(LinearCombination::zero()), c(LinearCombination::zero()));
        let r = Self::record(&mut self.a, &mut self.coeffs, &a)
            .and_then(|_| Self::record(&mut self.b, &mut self.coeffs, &b))
            .and_then(|_| Self::record(&mut self.c, &mut self.coeffs, &c));
        if let Err(l) = r {
            self.limit = Some(l);
        }
        if self.w.num_constraints.is_multiple_of(1024) {
            self.check_memory();
        }
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

    fn is_extensible() -> bool {
        true
    }

    fn extend(&mut self, other: &Self) {
        // Rows first: their mapping reads this system's sizes before the
        // witness grows.
        if self.limit.is_none() {
            if let Err(l) = self.append(other) {
                self.limit = Some(l);
            }
            self.check_memory();
        }
        self.w.extend_witness(&other.w);
    }
}
