//! Built-in synthetic circuits: the demo workload, benchmarks and tests.
//!
//! A [`SyntheticCircuit`] is an R1CS circuit whose *structure* is fixed by
//! `(kind, constraints, inputs, structure_seed)` — so parameters generated
//! once fit every instance — and whose *witness* comes from a per-proof seed.
//! Every constraint is satisfied by construction.

use bellpepper_core::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar;
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What the witness and the matrices look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    /// Random field elements everywhere; every constraint a product of two
    /// random linear combinations. The worst case for the MSMs.
    Dense,
    /// Shaped like a Filecoin PoRep partition: ~90 % of aux values are bits,
    /// A dense, B over aux ~25 % dense, a few non-zeros per row (mostly
    /// booleanity and linear packing constraints).
    FilecoinLike,
}

impl WorkloadKind {
    /// Short name used in CLI flags and reports.
    pub fn name(&self) -> &'static str {
        match self {
            WorkloadKind::Dense => "dense",
            WorkloadKind::FilecoinLike => "filecoin-like",
        }
    }
}

impl std::str::FromStr for WorkloadKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dense" => Ok(WorkloadKind::Dense),
            "filecoin-like" | "filecoin" => Ok(WorkloadKind::FilecoinLike),
            _ => Err(format!("unknown workload kind {s:?} (expected dense or filecoin-like)")),
        }
    }
}

/// A synthetic circuit with a fixed structure and a seeded witness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SyntheticCircuit {
    pub kind: WorkloadKind,
    /// Circuit constraints (the prover adds one per public input, ONE included).
    pub constraints: usize,
    /// Public inputs, not counting the constant ONE.
    pub inputs: usize,
    /// Fixes the structure (and so the parameters).
    pub structure_seed: u64,
    /// Fixes the witness; `None` for parameter generation (no values).
    pub witness_seed: Option<u64>,
}

impl SyntheticCircuit {
    /// A circuit whose constraint count, after the prover's per-input
    /// constraints, is exactly `2^log_size` (a full evaluation domain).
    pub fn filling_domain(kind: WorkloadKind, log_size: u32, inputs: usize) -> Self {
        let total = 1usize << log_size;
        SyntheticCircuit {
            kind,
            constraints: total.saturating_sub(inputs + 1).max(1),
            inputs,
            structure_seed: 0x6b69_6c6e,
            witness_seed: None,
        }
    }

    /// The same structure with a witness drawn from `seed`.
    pub fn with_witness(mut self, seed: u64) -> Self {
        self.witness_seed = Some(seed);
        self
    }

    /// The public inputs (without ONE) this instance exposes.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let seed = self.witness_seed.expect("public inputs need a witness seed");
        let mut wr = ChaCha8Rng::seed_from_u64(seed ^ 0x001a_7e57);
        (0..self.inputs).map(|_| Scalar::random(&mut wr)).collect()
    }
}

/// Values for a variable, present only when a witness is being computed.
type Val = Option<Scalar>;

fn alloc<CS: ConstraintSystem<Scalar>>(cs: &mut CS, v: Val) -> Result<Variable, SynthesisError> {
    cs.alloc(|| "", || v.ok_or(SynthesisError::AssignmentMissing))
}

fn lc_value(terms: &[(Variable, Scalar, Val)]) -> Val {
    terms.iter().try_fold(Scalar::ZERO, |acc, (_, c, v)| v.map(|v| acc + *c * v))
}

fn lc_of(terms: &[(Variable, Scalar, Val)]) -> LinearCombination<Scalar> {
    terms.iter().fold(LinearCombination::zero(), |lc, (var, c, _)| lc + (*c, *var))
}

impl Circuit<Scalar> for SyntheticCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut sr = ChaCha8Rng::seed_from_u64(self.structure_seed ^ (self.constraints as u64) << 8);
        let mut wr = self.witness_seed.map(ChaCha8Rng::seed_from_u64);
        let one = CS::one();

        // Earlier variables with their values; constraints draw operands here.
        let mut vars: Vec<(Variable, Val)> = Vec::with_capacity(self.constraints);
        let inputs = self.public_inputs_opt();
        let mut remaining = self.constraints;

        // Tie every public input to the circuit: v = x, enforced as x * 1 = v.
        // (So a circuit has at least `inputs` constraints.)
        for x in inputs {
            let xv = cs.alloc_input(|| "input", || x.ok_or(SynthesisError::AssignmentMissing))?;
            let v = alloc(cs, x)?;
            cs.enforce(|| "", |lc| lc + xv, |lc| lc + one, |lc| lc + v);
            vars.push((v, x));
            remaining = remaining.saturating_sub(1);
        }

        for _ in 0..remaining {
            let pick = |sr: &mut ChaCha8Rng, vars: &[(Variable, Val)]| vars[sr.gen_range(0..vars.len())];
            match self.kind {
                WorkloadKind::Dense => {
                    let fresh = |wr: &mut Option<ChaCha8Rng>| wr.as_mut().map(Scalar::random);
                    if vars.len() < 2 {
                        // Seed variables: v * 1 = v.
                        let val = fresh(&mut wr);
                        let v = alloc(cs, val)?;
                        cs.enforce(|| "", |lc| lc + v, |lc| lc + one, |lc| lc + v);
                        vars.push((v, val));
                        continue;
                    }
                    let (x, xv) = pick(&mut sr, &vars);
                    let (y, yv) = pick(&mut sr, &vars);
                    let (z, zv) = pick(&mut sr, &vars);
                    let (c1, c2, c3, c4) = (Scalar::random(&mut sr), Scalar::random(&mut sr), Scalar::random(&mut sr), Scalar::random(&mut sr));
                    let a = [(x, c1, xv), (y, c2, yv)];
                    let b = [(z, c3, zv), (one, c4, Some(Scalar::ONE))];
                    let prod = lc_value(&a).zip(lc_value(&b)).map(|(a, b)| a * b);
                    let v = alloc(cs, prod)?;
                    cs.enforce(|| "", |_| lc_of(&a), |_| lc_of(&b), |lc| lc + v);
                    vars.push((v, prod));
                }
                WorkloadKind::FilecoinLike => {
                    let roll: f64 = sr.gen();
                    let bit = wr.as_mut().map(|r| if r.gen_bool(0.5) { Scalar::ONE } else { Scalar::ZERO });
                    if roll < 0.25 || vars.len() < 3 {
                        // Booleanity: b * (1 - b) = 0.
                        let b = alloc(cs, bit)?;
                        cs.enforce(|| "", |lc| lc + b, |lc| lc + one - b, |lc| lc);
                        vars.push((b, bit));
                    } else if roll < 0.90 {
                        // Linear packing: (x + 2y + b) * 1 = (x + 2y + b).
                        let b = alloc(cs, bit)?;
                        let (x, xv) = pick(&mut sr, &vars);
                        let (y, yv) = pick(&mut sr, &vars);
                        let t = [(x, Scalar::ONE, xv), (y, Scalar::from(2u64), yv), (b, Scalar::ONE, bit)];
                        cs.enforce(|| "", |_| lc_of(&t), |lc| lc + one, |_| lc_of(&t));
                        vars.push((b, bit));
                    } else {
                        // A field-element product: (x + y) * z = v.
                        let (x, xv) = pick(&mut sr, &vars);
                        let (y, yv) = pick(&mut sr, &vars);
                        let (z, zv) = pick(&mut sr, &vars);
                        let a = [(x, Scalar::ONE, xv), (y, Scalar::from(3u64), yv)];
                        let bz = [(z, Scalar::ONE, zv), (one, Scalar::from(5u64), Some(Scalar::ONE))];
                        let prod = lc_value(&a).zip(lc_value(&bz)).map(|(a, b)| a * b);
                        let v = alloc(cs, prod)?;
                        cs.enforce(|| "", |_| lc_of(&a), |_| lc_of(&bz), |lc| lc + v);
                        vars.push((v, prod));
                    }
                }
            }
        }
        Ok(())
    }
}

impl SyntheticCircuit {
    fn public_inputs_opt(&self) -> Vec<Val> {
        match self.witness_seed {
            Some(_) => self.public_inputs().into_iter().map(Some).collect(),
            None => vec![None; self.inputs],
        }
    }
}
