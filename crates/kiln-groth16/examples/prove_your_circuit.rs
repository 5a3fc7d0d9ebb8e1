//! Prove your own circuit with kiln: a bellperson circuit, parameters made
//! with bellperson's `generate_random_parameters`, proofs from kiln (on the
//! GPU when this build and host have one, else on the CPU), checked with
//! bellperson's verifier.
//!
//! ```text
//! cargo run --release -p kiln-groth16 --example prove_your_circuit [-- --cpu] [-- <rounds>]
//! ```
//!
//! The circuit: "I know a preimage x such that applying x -> x^5 + k_i
//! `rounds` times gives `out`", a MiMC-like chain with the result public,
//! so the number of constraints grows with `rounds` (three per round).

use std::time::Instant;

use bellperson::groth16::{generate_random_parameters, prepare_verifying_key, verify_proof};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use ff::Field;
use kiln_groth16::{BackendChoice, BackendOptions, Backends, CircuitProver, ParamsFile};

/// x_{i+1} = x_i^5 + k_i, `out` = x_rounds public. `x` is `None` when the
/// circuit is only laid out (for the parameters).
#[derive(Clone)]
struct FifthPowerChain {
    x: Option<Scalar>,
    constants: Vec<Scalar>,
}

impl FifthPowerChain {
    /// What the circuit computes, outside it: the public input of a proof.
    fn output(&self, x: Scalar) -> Scalar {
        self.constants.iter().fold(x, |x, k| x.square().square() * x + k)
    }
}

impl Circuit<Scalar> for FifthPowerChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let missing = || SynthesisError::AssignmentMissing;
        let mut value = self.x;
        let mut var = cs.alloc(|| "x", || value.ok_or_else(missing))?;
        let rounds = self.constants.len();
        for (i, k) in self.constants.iter().enumerate() {
            let sq_val = value.map(|x| x.square());
            let sq = cs.alloc(|| format!("round {i}: x^2"), || sq_val.ok_or_else(missing))?;
            cs.enforce(|| format!("round {i}: x * x"), |lc| lc + var, |lc| lc + var, |lc| lc + sq);
            let quad_val = sq_val.map(|s| s.square());
            let quad = cs.alloc(|| format!("round {i}: x^4"), || quad_val.ok_or_else(missing))?;
            cs.enforce(|| format!("round {i}: x^2 * x^2"), |lc| lc + sq, |lc| lc + sq, |lc| lc + quad);
            // x^4 * x = next - k; the last round's `next` is the public output.
            let next_val = quad_val.zip(value).map(|(q, x)| q * x + k);
            let next = if i + 1 == rounds {
                cs.alloc_input(|| "out", || next_val.ok_or_else(missing))?
            } else {
                cs.alloc(|| format!("round {i}: next"), || next_val.ok_or_else(missing))?
            };
            cs.enforce(|| format!("round {i}: x^4 * x + k"), |lc| lc + quad, |lc| lc + var, |lc| lc + next - (*k, CS::one()));
            value = next_val;
            var = next;
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cpu_only = args.iter().any(|a| a == "--cpu");
    let rounds: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(1000).max(1);
    let mut rng = rand::thread_rng();
    let constants: Vec<Scalar> = (0..rounds).map(|_| Scalar::random(&mut rng)).collect();
    let blank = FifthPowerChain { x: None, constants: constants.clone() };

    // 1. Your setup, with bellperson (kiln's `setup::generate` is a faster
    //    generator of the same parameters, for tests).
    let t = Instant::now();
    let params = generate_random_parameters::<Bls12, _, _>(blank, &mut rng)?;
    println!("parameters for {} constraints made by bellperson in {:.2} s", rounds * 3, t.elapsed().as_secs_f64());

    // 2. A kiln prover over them: GPUs when usable, else the CPU (or the
    //    CPU because you asked).
    let prover = if cpu_only {
        let backends = Backends::open(BackendChoice::Cpu, &BackendOptions::default())?;
        CircuitProver::with_backends(ParamsFile::from_parameters(&params).into(), backends)
    } else {
        CircuitProver::new(&params)
    };
    println!("backend: {}", prover.backends_why());

    // 3. Prove instances, and check each with bellperson's own verifier.
    let pvk = prepare_verifying_key(prover.verifying_key());
    for i in 0..3 {
        let x = Scalar::random(&mut rng);
        let circuit = FifthPowerChain { x: Some(x), constants: constants.clone() };
        let out = circuit.output(x);
        let t = Instant::now();
        let proof = prover.prove(circuit, &mut rng)?;
        let took = t.elapsed();
        let ok = verify_proof(&pvk, &proof, &[out])?;
        println!("proof {i}: {:.1} ms, bellperson's verifier says {ok}", took.as_secs_f64() * 1e3);
        if !ok {
            return Err("bellperson rejected a kiln proof".into());
        }
    }

    // A wrong witness is refused, not proved.
    let mut bad = FifthPowerChain { x: Some(Scalar::ONE), constants };
    bad.constants[0] += Scalar::ONE; // not the circuit of the parameters' constants
    match prover.prove(bad, &mut rng) {
        Ok(_) => return Err("a circuit with other constants was proved".into()),
        Err(e) => println!("another circuit's witness is refused: {e}"),
    }
    Ok(())
}
