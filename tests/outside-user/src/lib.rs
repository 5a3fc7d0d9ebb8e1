//! A user's own circuit, as another project would write it: nothing of
//! kiln's in here. `tests/prove.rs` proves it with kiln-groth16.

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;

/// "I know `a` and `b` whose product is `product` and whose sum is `sum`",
/// both results public, with `extra` squarings of `a` chained on to give the
/// circuit some size.
#[derive(Clone)]
pub struct ProductAndSum {
    pub a: Option<Scalar>,
    pub b: Option<Scalar>,
    pub extra: usize,
}

impl ProductAndSum {
    /// The public inputs a proof of `a`, `b` is checked against: product, sum.
    pub fn public_inputs(a: Scalar, b: Scalar) -> Vec<Scalar> {
        vec![a * b, a + b]
    }
}

impl Circuit<Scalar> for ProductAndSum {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let missing = || SynthesisError::AssignmentMissing;
        let a = cs.alloc(|| "a", || self.a.ok_or_else(missing))?;
        let b = cs.alloc(|| "b", || self.b.ok_or_else(missing))?;
        let product = cs.alloc_input(|| "product", || self.a.zip(self.b).map(|(a, b)| a * b).ok_or_else(missing))?;
        cs.enforce(|| "a * b = product", |lc| lc + a, |lc| lc + b, |lc| lc + product);
        let sum = cs.alloc_input(|| "sum", || self.a.zip(self.b).map(|(a, b)| a + b).ok_or_else(missing))?;
        cs.enforce(|| "(a + b) * 1 = sum", |lc| lc + a + b, |lc| lc + CS::one(), |lc| lc + sum);
        let (mut value, mut var) = (self.a, a);
        for i in 0..self.extra {
            let next_value = value.map(|v| v.square());
            let next = cs.alloc(|| format!("a^(2^{})", i + 1), || next_value.ok_or_else(missing))?;
            cs.enforce(|| format!("square {i}"), |lc| lc + var, |lc| lc + var, |lc| lc + next);
            (value, var) = (next_value, next);
        }
        Ok(())
    }
}
