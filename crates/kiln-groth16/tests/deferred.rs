//! Assignments whose a/b/c were left to the prover (`Products::Deferred`)
//! on the CPU backend: it evaluates and checks them itself, the proofs are
//! the host path's bit for bit, and a witness that breaks a row is an
//! error naming that row. (tests/gpu.rs runs the same on the GPU.)

use std::sync::Arc;

use kiln_groth16::{finish, prove_start, setup, CpuBackend, ParamsFile, ProductsSupport, ProveError, ProverBackend, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers, CircuitCache, SynthError};
use rand::SeedableRng;

mod common;
use common::{break_one, deferred};

#[test]
fn deferred_products_prove_like_host_ones_and_bad_rows_are_named() {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
    let cache = CircuitCache::unbounded();
    for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
        for (constraints, inputs) in [(0, 0), (5, 3), (1000, 2), (4093, 8)] {
            let key = format!("{kind:?}-{constraints}");
            let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 3, witness_seed: Some(4) };
            let params = Arc::new(ParamsFile::from_parameters(&setup::generate(c, &mut rng).unwrap()));
            let rs = Randomness::random(&mut rng);
            let host = synthesize(c, AssignmentBuffers::heap()).unwrap();
            let want = finish(prove_start(&CpuBackend, &params, host, rs).unwrap()).unwrap().proof;
            let (asg, r1cs) = deferred(&cache, &key, c);
            assert_eq!(finish(prove_start(&CpuBackend, &params, asg, rs).unwrap()).unwrap().proof, want, "{key}");
            assert_eq!(CpuBackend.device_products(&params, &r1cs), ProductsSupport::No);
            // A value changed: the backend finds the first row it breaks.
            let (mut bad, r1cs) = deferred(&cache, &key, c);
            let Some(row) = break_one(&mut bad, &r1cs) else {
                assert_eq!(bad.num_aux, 0, "{key}: no aux value is constrained");
                continue;
            };
            match prove_start(&CpuBackend, &params, bad, rs) {
                Err(ProveError::Synth(SynthError::Unsatisfied { index, total })) => assert_eq!((index, total), (row, r1cs.num_constraints()), "{key}"),
                Err(e) => panic!("{key}: {e}"),
                Ok(_) => panic!("{key}: a broken witness was proved"),
            }
        }
    }
}
