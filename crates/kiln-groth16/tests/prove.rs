//! End-to-end properties of the CPU prover over random satisfiable circuits.

use std::sync::{Arc, Mutex, OnceLock};

use bellperson::groth16::{create_proof, prepare_verifying_key, verify_proof, Parameters, Proof};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, G1Projective, Scalar};
use ff::Field;
use group::{Curve, Group};
use kiln_groth16::{finish, prove_start, setup, CpuBackend, ParamsError, ParamsFile, ProveError, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers, SynthError};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Parameters per circuit structure, generated once per test binary.
fn params_for(c: SyntheticCircuit) -> (Arc<ParamsFile>, Arc<Parameters<Bls12>>) {
    type Cache = Mutex<Vec<(SyntheticCircuit, Arc<ParamsFile>, Arc<Parameters<Bls12>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = SyntheticCircuit { witness_seed: None, ..c };
    let cache = CACHE.get_or_init(Default::default);
    if let Some((_, f, p)) = cache.lock().unwrap().iter().find(|(k, _, _)| *k == key) {
        return (f.clone(), p.clone());
    }
    let p = setup::generate(key, &mut rng(key.structure_seed ^ 99)).unwrap();
    let f = Arc::new(ParamsFile::from_parameters(&p));
    let p = Arc::new(p);
    cache.lock().unwrap().push((key, f.clone(), p.clone()));
    (f, p)
}

fn prove_kiln(params: &Arc<ParamsFile>, c: SyntheticCircuit, rs: Randomness) -> Result<Proof<Bls12>, ProveError> {
    let asg = synthesize(c, AssignmentBuffers::heap())?;
    Ok(finish(prove_start(&CpuBackend, params, asg, rs)?)?.proof)
}

fn circuit_strategy() -> impl Strategy<Value = SyntheticCircuit> {
    (
        prop_oneof![Just(WorkloadKind::Dense), Just(WorkloadKind::FilecoinLike)],
        prop_oneof![1usize..=8, 9usize..=200, Just(63), Just(64), Just(255)],
        0usize..=8,
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(kind, constraints, inputs, s, w)| SyntheticCircuit {
            kind,
            constraints,
            inputs,
            structure_seed: s % 4, // a few structures, so parameters are reused
            witness_seed: Some(w),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every proof verifies, and for the same r, s it is bit-for-bit the
    /// proof bellperson's own prover makes.
    #[test]
    fn proofs_verify_and_match_bellperson(c in circuit_strategy(), r in any::<u64>()) {
        let (params, bp) = params_for(c);
        let mut g = rng(r);
        let rs = Randomness::random(&mut g);
        let ours = prove_kiln(&params, c, rs).unwrap();
        let pvk = prepare_verifying_key(&bp.vk);
        prop_assert!(verify_proof(&pvk, &ours, &c.public_inputs()).unwrap());
        let theirs = create_proof(c, &*bp, rs.r, rs.s).unwrap();
        prop_assert_eq!(ours, theirs);
    }

    /// A tampered proof or a tampered public input does not verify.
    #[test]
    fn tampering_is_caught(c in circuit_strategy(), which in 0usize..4) {
        let (params, bp) = params_for(c);
        let proof = prove_kiln(&params, c, Randomness::random(&mut rng(5))).unwrap();
        let pvk = prepare_verifying_key(&bp.vk);
        let mut inputs = c.public_inputs();
        let mut bad = proof.clone();
        match which {
            0 => bad.a = (G1Projective::from(bad.a) + G1Projective::generator()).to_affine(),
            1 => bad.c = (G1Projective::from(bad.c).double()).to_affine(),
            2 => bad.b = (-blstrs::G2Projective::from(bad.b)).to_affine(),
            _ => {
                if inputs.is_empty() {
                    bad.a = (-G1Projective::from(bad.a)).to_affine();
                } else {
                    inputs[0] += Scalar::ONE;
                }
            }
        }
        prop_assert!(!verify_proof(&pvk, &bad, &inputs).unwrap_or(false));
    }
}

#[test]
fn unsatisfied_circuit_is_a_clear_error() {
    /// Claims x * x = y with the wrong y.
    #[derive(Clone, Copy)]
    struct Lies(bool);
    impl Circuit<Scalar> for Lies {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(3u64)))?;
            let y = cs.alloc_input(|| "y", || Ok(Scalar::from(if self.0 { 10u64 } else { 9 })))?;
            cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
            Ok(())
        }
    }
    let params = Arc::new(ParamsFile::from_parameters(&setup::generate(Lies(false), &mut rng(1)).unwrap()));
    let honest = synthesize(Lies(false), AssignmentBuffers::heap()).unwrap();
    finish(prove_start(&CpuBackend, &params, honest, Randomness::random(&mut rng(2))).unwrap()).unwrap();
    let asg = synthesize(Lies(true), AssignmentBuffers::heap()).unwrap();
    let err = prove_start(&CpuBackend, &params, asg, Randomness::random(&mut rng(2))).err().unwrap();
    assert!(matches!(err, ProveError::Synth(SynthError::Unsatisfied { index: 0, .. })), "{err}");
    assert!(err.to_string().contains("constraint 0"), "{err}");
}

#[test]
fn parameters_of_another_circuit_are_refused() {
    let a = SyntheticCircuit { kind: WorkloadKind::Dense, constraints: 40, inputs: 2, structure_seed: 1, witness_seed: Some(1) };
    // Another shape: a clear shape error before any work.
    let other_shape = SyntheticCircuit { constraints: 90, ..a };
    let (params, _) = params_for(other_shape);
    let err = prove_kiln(&params, a, Randomness::random(&mut rng(3))).unwrap_err();
    assert!(matches!(err, ProveError::ShapeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("another circuit"), "{err}");
    // Same shape, other structure: caught by the final verification.
    let same_shape = SyntheticCircuit { structure_seed: 2, ..a };
    let (params, _) = params_for(same_shape);
    match prove_kiln(&params, a, Randomness::random(&mut rng(3))) {
        Err(ProveError::NotVerified(_)) | Err(ProveError::ShapeMismatch { .. }) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn parameter_files_roundtrip_and_truncation_is_reported() {
    let c = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 7, 3).with_witness(4);
    let (params, bp) = params_for(c);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.params");
    let mut bytes = Vec::new();
    bp.write(&mut bytes).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let mapped = Arc::new(ParamsFile::open(&path).unwrap());
    assert_eq!(mapped.shape(), params.shape());
    let proof = prove_kiln(&mapped, c, Randomness::random(&mut rng(6))).unwrap();
    assert!(verify_proof(mapped.prepared_vk(), &proof, &c.public_inputs()).unwrap());

    for cut in [10, 900, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let err = ParamsFile::open(&path).unwrap_err();
        assert!(matches!(err, ParamsError::Truncated { .. }), "cut {cut}: {err}");
        assert!(err.to_string().contains("truncated"));
    }
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0; 7]);
    std::fs::write(&path, &longer).unwrap();
    assert!(matches!(ParamsFile::open(&path), Err(ParamsError::TrailingBytes { extra: 7 })));
    // A corrupted point is reported with its section and index.
    let mut bad = bytes.clone();
    let h_start = bad.len() - 4; // somewhere in b_g2: flip bytes of the last point
    bad[h_start - 100] ^= 0xff;
    let f = ParamsFile::from_bytes(bad).unwrap();
    let mut out = Vec::new();
    let err = f.g2_points(0..f.len(kiln_groth16::Section::BG2), &mut out).unwrap_err();
    assert!(matches!(err, ParamsError::InvalidPoint { what: "b_g2", .. }), "{err}");
}

/// kiln's generator makes parameters bellperson's own prover and verifier
/// accept, with the same query sizes as bellperson's generator.
#[test]
fn fast_generator_matches_bellperson_generator() {
    for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
        for (constraints, inputs) in [(1, 0), (7, 3), (300, 8)] {
            let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 11, witness_seed: None };
            let ours = setup::generate(c, &mut rng(1)).unwrap();
            let theirs = setup::generate_with_bellperson(c, &mut rng(2)).unwrap();
            let (fo, ft) = (ParamsFile::from_parameters(&ours), ParamsFile::from_parameters(&theirs));
            assert_eq!(fo.shape(), ft.shape(), "{kind:?} {constraints}");
            let w = c.with_witness(3);
            let proof = create_proof(w, &ours, Scalar::from(5u64), Scalar::from(6u64)).unwrap();
            let pvk = prepare_verifying_key(&ours.vk);
            assert!(verify_proof(&pvk, &proof, &w.public_inputs()).unwrap(), "{kind:?} {constraints}");
        }
    }
}

#[test]
fn load_or_generate_caches_on_disk() {
    let c = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 5, 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub").join("x.params");
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let count = |_: u64, _: u64| {
        calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    let p1 = setup::load_or_generate(c, &path, &mut rng(1), &count).unwrap();
    let after_first = calls.load(std::sync::atomic::Ordering::Relaxed);
    assert!(after_first >= 2, "progress is reported while generating");
    let p2 = setup::load_or_generate(c, &path, &mut rng(2), &count).unwrap();
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), after_first, "no generation the second time");
    assert_eq!(p1.shape(), p2.shape());
    assert_eq!(p1.vk(), p2.vk());
}
