//! The GPU backend against the CPU backend: same r, s => the same proof,
//! bit for bit, and every GPU proof verifies. Skips (and says so) without a
//! GPU; the CPU tests in prove.rs cover the shared logic (shape checks,
//! assembly, verification) on every machine.

use std::sync::Arc;

use kiln_groth16::{finish, prove_start, setup, CpuBackend, GpuBackend, GpuContext, ParamsFile, ProverBackend, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers};
use rand::SeedableRng;

#[test]
fn gpu_proofs_equal_cpu_proofs_and_verify() {
    if kiln_gpu::GpuDevice::count() == 0 {
        eprintln!("no GPU: skipped (the CPU prover tests cover the shared logic)");
        return;
    }
    let ctx = match GpuContext::open(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("GPU present but not usable ({e}): skipped");
            return;
        }
    };
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
        for (constraints, inputs) in [(1, 0), (5, 3), (1000, 2), (4093, 8)] {
            let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 3, witness_seed: Some(4) };
            let params = Arc::new(ParamsFile::from_parameters(&setup::generate(c, &mut rng).unwrap()));
            let rs = Randomness::random(&mut rng);
            let run = |b: &dyn ProverBackend| {
                let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
                finish(prove_start(b, &params, asg, rs).unwrap()).unwrap().proof
            };
            assert_eq!(run(&gpu), run(&CpuBackend), "{kind:?} {constraints}");
        }
    }
}
