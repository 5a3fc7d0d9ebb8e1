//! kiln-groth16 from outside its workspace, through its public API only:
//! parameters made with bellperson, proofs from kiln on the CPU backend
//! (and on the GPU when this build and host have one), every proof checked
//! with bellperson's own verifier.

use bellperson::groth16::{generate_random_parameters, prepare_verifying_key, verify_proof, Parameters};
use blstrs::{Bls12, Scalar};
use ff::Field;
use kiln_groth16::{BackendChoice, BackendOptions, Backends, CircuitProver, ParamsFile};
use kiln_outside_user::ProductAndSum;
use rand::SeedableRng;

fn setup(rng: &mut rand::rngs::StdRng) -> Parameters<Bls12> {
    generate_random_parameters::<Bls12, _, _>(ProductAndSum { a: None, b: None, extra: 100 }, rng).unwrap()
}

fn prove_and_verify(prover: &CircuitProver, params: &Parameters<Bls12>, rng: &mut rand::rngs::StdRng) {
    let pvk = prepare_verifying_key(&params.vk);
    for _ in 0..3 {
        let (a, b) = (Scalar::random(&mut *rng), Scalar::random(&mut *rng));
        let proof = prover.prove(ProductAndSum { a: Some(a), b: Some(b), extra: 100 }, rng).unwrap();
        let inputs = ProductAndSum::public_inputs(a, b);
        assert!(verify_proof(&pvk, &proof, &inputs).unwrap(), "bellperson rejects kiln's proof ({})", prover.backends_why());
        // And not for other public inputs.
        assert!(!verify_proof(&pvk, &proof, &[inputs[0], inputs[1] + Scalar::ONE]).unwrap());
    }
}

#[test]
fn a_user_circuit_proves_on_the_cpu_and_bellperson_verifies_it() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let params = setup(&mut rng);
    let cpu = Backends::open(BackendChoice::Cpu, &BackendOptions::default()).unwrap();
    let prover = CircuitProver::with_backends(ParamsFile::from_parameters(&params).into(), cpu);
    assert!(prover.backends_why().starts_with("cpu"), "{}", prover.backends_why());
    prove_and_verify(&prover, &params, &mut rng);
}

/// The default prover: a GPU when this host has a usable one, else the CPU
/// (and it says why).
#[test]
fn the_default_prover_uses_a_gpu_when_there_is_one() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let params = setup(&mut rng);
    let prover = CircuitProver::new(&params);
    let why = prover.backends_why();
    assert!(why.starts_with("gpu: ") || why.contains("no usable GPU: "), "{why}");
    prove_and_verify(&prover, &params, &mut rng);
}

#[test]
fn a_wrong_witness_is_an_error_not_a_proof() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let params = setup(&mut rng);
    let prover = CircuitProver::new(&params);
    // Parameters of another circuit (other size): refused before any work.
    let other = ProductAndSum { a: Some(Scalar::ONE), b: Some(Scalar::ONE), extra: 7 };
    let e = prover.prove(other, &mut rng).unwrap_err();
    assert!(e.to_string().contains("another circuit"), "{e}");
}

/// Parameters written to a file with bellperson and mapped by kiln.
#[test]
fn parameters_from_a_file() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let params = setup(&mut rng);
    let path = std::env::temp_dir().join(format!("kiln-outside-user-{}.params", std::process::id()));
    params.write(std::fs::File::create(&path).unwrap()).unwrap();
    let prover = CircuitProver::from_file(&path).unwrap();
    prove_and_verify(&prover, &params, &mut rng);
    std::fs::remove_file(&path).unwrap();
}
