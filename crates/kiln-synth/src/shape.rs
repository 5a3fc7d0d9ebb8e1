//! A circuit's dimensions, found without computing its witness.

use bellpepper_core::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;

use crate::density::Density;

/// The dimensions that size a circuit's buffers and its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct CircuitShape {
    /// Constraints, counting one `input * 0 = 0` per input.
    pub num_constraints: usize,
    /// Public inputs, counting the constant ONE.
    pub num_inputs: usize,
    /// Aux (private) variables.
    pub num_aux: usize,
    /// Aux variables in the A query (= stored A points past the inputs).
    pub a_aux_count: usize,
    /// Inputs in the B query.
    pub b_input_count: usize,
    /// Aux variables in the B query.
    pub b_aux_count: usize,
}

impl CircuitShape {
    /// Walk the circuit's structure without evaluating any witness value
    /// (allocation closures are not called), the way a parameter generator
    /// does. Cost: one pass over the constraints, no field arithmetic.
    pub fn of<C: Circuit<Scalar>>(circuit: C) -> Result<Self, SynthesisError> {
        let mut cs = ShapeCs::default();
        cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut cs)?;
        let inputs = cs.b_input.len();
        Ok(CircuitShape {
            num_constraints: cs.constraints + inputs,
            num_inputs: inputs,
            num_aux: cs.a_aux.len(),
            a_aux_count: cs.a_aux.count(),
            b_input_count: cs.b_input.count(),
            b_aux_count: cs.b_aux.count(),
        })
    }

    /// log2 of the evaluation domain: the smallest power of two holding every constraint.
    pub fn log_domain(&self) -> u32 {
        self.num_constraints.max(1).next_power_of_two().trailing_zeros()
    }

    /// Size of the evaluation domain.
    pub fn domain(&self) -> usize {
        1usize << self.log_domain()
    }

    /// Host bytes of one assignment's large vectors (a, b, c over the domain, aux).
    pub fn assignment_bytes(&self) -> u64 {
        let fr = std::mem::size_of::<Scalar>() as u64;
        (3 * self.domain() as u64 + self.num_aux as u64) * fr
    }
}

#[derive(Default)]
struct ShapeCs {
    constraints: usize,
    a_aux: Density,
    b_input: Density,
    b_aux: Density,
}

fn mark(lc: &LinearCombination<Scalar>, inputs: Option<&mut Density>, aux: Option<&mut Density>) {
    let mut inputs = inputs;
    let mut aux = aux;
    for (v, coeff) in lc.iter() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        match v.get_unchecked() {
            Index::Input(i) => {
                if let Some(d) = inputs.as_deref_mut() {
                    if i < d.len() {
                        d.set(i);
                    }
                }
            }
            Index::Aux(i) => {
                if let Some(d) = aux.as_deref_mut() {
                    if i < d.len() {
                        d.set(i);
                    }
                }
            }
        }
    }
}

impl ConstraintSystem<Scalar> for ShapeCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.a_aux.push();
        self.b_aux.push();
        Ok(Variable::new_unchecked(Index::Aux(self.a_aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.b_input.push();
        Ok(Variable::new_unchecked(Index::Input(self.b_input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, _c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        mark(&a(LinearCombination::zero()), None, Some(&mut self.a_aux));
        mark(&b(LinearCombination::zero()), Some(&mut self.b_input), Some(&mut self.b_aux));
        self.constraints += 1;
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
