//! The constraint system that records a circuit's assignment while it is
//! synthesized: the same evaluation rules as bellperson's prover, so the
//! result pairs with parameters made by bellperson's generator.

use bellpepper_core::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::buffer::{AssignmentBuffers, ScalarBuffer};
use crate::density::Density;

/// Records A/B/C evaluations, the assignment and the densities into
/// caller-provided buffers.
pub(crate) struct RecordingCs {
    pub(crate) bufs: AssignmentBuffers,
    pub(crate) input: Vec<Scalar>,
    pub(crate) num_constraints: usize,
    pub(crate) num_aux: usize,
    pub(crate) a_aux_density: Density,
    pub(crate) b_input_density: Density,
    pub(crate) b_aux_density: Density,
    /// Set when a fixed buffer ran out of room; `enforce` cannot return an
    /// error, so the first overflow is remembered and reported at the end.
    pub(crate) overflow: Option<Overflow>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Overflow {
    pub(crate) which: &'static str,
    pub(crate) needed: usize,
    pub(crate) capacity: usize,
}

impl RecordingCs {
    pub(crate) fn with_buffers(bufs: AssignmentBuffers) -> Self {
        RecordingCs {
            bufs,
            input: Vec::new(),
            num_constraints: 0,
            num_aux: 0,
            a_aux_density: Density::new(),
            b_input_density: Density::new(),
            b_aux_density: Density::new(),
            overflow: None,
        }
    }

    /// Ensure `buf` has room for index `idx`; record an overflow otherwise.
    fn room(
        buf: &mut dyn ScalarBuffer,
        idx: usize,
        which: &'static str,
        overflow: &mut Option<Overflow>,
    ) -> bool {
        if idx < buf.as_slice().len() || buf.try_grow(idx + 1) {
            return true;
        }
        overflow.get_or_insert(Overflow { which, needed: idx + 1, capacity: buf.as_slice().len() });
        false
    }

    fn push_constraint(&mut self, a: Scalar, b: Scalar, c: Scalar) {
        let n = self.num_constraints;
        self.num_constraints += 1;
        let ov = &mut self.overflow;
        for (buf, v, which) in [(&mut self.bufs.a, a, "a"), (&mut self.bufs.b, b, "b"), (&mut self.bufs.c, c, "c")] {
            if Self::room(buf.as_mut(), n, which, ov) {
                buf.as_mut_slice()[n] = v;
            }
        }
    }

    fn aux_values(&self) -> &[Scalar] {
        let aux = self.bufs.aux.as_slice();
        &aux[..self.num_aux.min(aux.len())]
    }
}

/// Evaluate `lc`, marking the variables it uses in the density maps given
/// (the rule bellperson's prover and generator both follow: a variable counts
/// when its coefficient is non-zero).
#[inline]
fn eval_tracked(
    lc: &LinearCombination<Scalar>,
    input_density: Option<&mut Density>,
    aux_density: Option<&mut Density>,
    input: &[Scalar],
    aux: &[Scalar],
) -> Scalar {
    let mut acc = Scalar::ZERO;
    let mut input_density = input_density;
    for (&i, coeff) in lc.iter_inputs() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += if *coeff == Scalar::ONE { input[i] } else { input[i] * coeff };
        if let Some(d) = input_density.as_deref_mut() {
            d.set(i);
        }
    }
    let mut aux_density = aux_density;
    for (&i, coeff) in lc.iter_aux() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        // An index past what was allocated is a circuit bug; reading zero
        // keeps synthesis going and the satisfaction check reports it.
        let v = aux.get(i).copied().unwrap_or(Scalar::ZERO);
        acc += if *coeff == Scalar::ONE { v } else { v * coeff };
        if let Some(d) = aux_density.as_deref_mut() {
            d.set(i);
        }
    }
    acc
}

impl ConstraintSystem<Scalar> for RecordingCs {
    type Root = Self;

    fn new() -> Self {
        // Sub-systems made for parallel synthesis (`is_extensible`) record
        // into growable heap buffers and are appended with `extend`.
        RecordingCs::with_buffers(AssignmentBuffers::heap())
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let value = f()?;
        let idx = self.num_aux;
        if Self::room(self.bufs.aux.as_mut(), idx, "aux", &mut self.overflow) {
            self.bufs.aux.as_mut_slice()[idx] = value;
        }
        self.num_aux += 1;
        self.a_aux_density.push();
        self.b_aux_density.push();
        Ok(Variable::new_unchecked(Index::Aux(idx)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input_density.push();
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = a(LinearCombination::zero());
        let b = b(LinearCombination::zero());
        let c = c(LinearCombination::zero());
        let (av, bv, cv) = {
            let aux = {
                let s = self.bufs.aux.as_slice();
                &s[..self.num_aux.min(s.len())]
            };
            let input = &self.input;
            // Inputs have full density in A (every input gets an `x * 0 = 0`
            // constraint at the end), so only A's aux part is tracked.
            let av = eval_tracked(&a, None, Some(&mut self.a_aux_density), input, aux);
            let bv = eval_tracked(
                &b,
                Some(&mut self.b_input_density),
                Some(&mut self.b_aux_density),
                input,
                aux,
            );
            let cv = eval_tracked(&c, None, None, input, aux);
            (av, bv, cv)
        };
        self.push_constraint(av, bv, cv);
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
        if let Some(o) = other.overflow {
            self.overflow.get_or_insert(o);
        }
        let n = other.num_constraints;
        let base = self.num_constraints;
        for (dst, src, which) in [
            (&mut self.bufs.a, &other.bufs.a, "a"),
            (&mut self.bufs.b, &other.bufs.b, "b"),
            (&mut self.bufs.c, &other.bufs.c, "c"),
        ] {
            if n > 0 && Self::room(dst.as_mut(), base + n - 1, which, &mut self.overflow) {
                dst.as_mut_slice()[base..base + n].copy_from_slice(&src.as_slice()[..n]);
            }
        }
        self.num_constraints += n;

        let naux = other.num_aux;
        let abase = self.num_aux;
        if naux > 0 && Self::room(self.bufs.aux.as_mut(), abase + naux - 1, "aux", &mut self.overflow) {
            self.bufs.aux.as_mut_slice()[abase..abase + naux].copy_from_slice(other.aux_values());
        }
        self.num_aux += naux;
        self.a_aux_density.extend(&other.a_aux_density);
        self.b_aux_density.extend(&other.b_aux_density);
        // The sub-system's first input is its own copy of ONE.
        self.b_input_density.extend_skip_first(&other.b_input_density);
        self.input.extend_from_slice(other.input.get(1..).unwrap_or(&[]));
    }
}
