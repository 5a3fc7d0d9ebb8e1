//! Test setups (parameters held as scalars, points made when needed): the
//! same keys kiln's file generator makes from the same secrets, the
//! segmented QAP equal to the whole circuit's, proofs that verify.
//! The GPU's placement of a test setup is checked in gpu.rs.

use std::sync::Arc;

use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use kiln_groth16::{finish, prove_start, setup, CpuBackend, ParamsFile, Randomness, Section};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers, SegmentedCircuit, Whole};
use rand::SeedableRng;

fn same_keys(a: &ParamsFile, b: &ParamsFile, what: &str) {
    assert_eq!(a.shape(), b.shape(), "{what}: shape");
    assert_eq!(a.vk(), b.vk(), "{what}: verifying key");
    for s in [Section::H, Section::L, Section::A, Section::BG1] {
        let (mut pa, mut pb) = (Vec::new(), Vec::new());
        a.g1_points(s, 0..a.len(s), &mut pa).unwrap();
        b.g1_points(s, 0..b.len(s), &mut pb).unwrap();
        assert_eq!(pa, pb, "{what}: section {}", s.name());
    }
    let (mut pa, mut pb) = (Vec::new(), Vec::new());
    a.g2_points(0..a.len(Section::BG2), &mut pa).unwrap();
    b.g2_points(0..b.len(Section::BG2), &mut pb).unwrap();
    assert_eq!(pa, pb, "{what}: b_g2");
}

#[test]
fn a_test_setup_is_the_generators_key_for_the_same_secrets() {
    let seed = [7u8; 32];
    for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
        for (constraints, inputs) in [(1, 0), (7, 3), (300, 8)] {
            let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 5, witness_seed: None };
            let file = ParamsFile::from_parameters(&setup::generate(c, &mut rand_chacha::ChaCha20Rng::from_seed(seed)).unwrap());
            let ts = setup::test_setup(c, seed, &mut |_| Ok(())).unwrap();
            assert!(ts.is_test_setup() && !file.is_test_setup());
            assert_eq!(ts.size_bytes(), 32 * (ts.len(Section::H) + ts.len(Section::L) + ts.len(Section::A) + ts.len(Section::BG1)) as u64);
            same_keys(&ts, &file, &format!("{kind:?} {constraints}"));
        }
    }
}

#[test]
fn the_cpu_proves_with_a_test_setup_and_the_proof_verifies() {
    let c = SyntheticCircuit { kind: WorkloadKind::FilecoinLike, constraints: 1000, inputs: 4, structure_seed: 2, witness_seed: None };
    let params = Arc::new(setup::test_setup(c, [1u8; 32], &mut |_| Ok(())).unwrap());
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    for w in 0..3 {
        let asg = synthesize(c.with_witness(w), AssignmentBuffers::heap()).unwrap();
        finish(prove_start(&CpuBackend, &params, asg, Randomness::random(&mut rng)).unwrap()).expect("the proof verifies");
    }
    // Another seed is another key: the proof of one does not verify under the other.
    let other = Arc::new(setup::test_setup(c, [2u8; 32], &mut |_| Ok(())).unwrap());
    assert_ne!(other.vk(), params.vk());
}

/// A circuit of a prefix (input x, aux y = x^2) and `segments` segments,
/// each with an input z = x + k and `per` aux values tied to y and x; with
/// `irregular`, segment 1 has one constraint more than the others.
#[derive(Clone, Copy)]
struct Toy {
    segments: usize,
    per: usize,
    x: Option<Scalar>,
    irregular: bool,
}

impl Toy {
    fn prefix<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS) -> Result<(bellpepper_core::Variable, bellpepper_core::Variable), SynthesisError> {
        let x = cs.alloc_input(|| "x", || self.x.ok_or(SynthesisError::AssignmentMissing))?;
        let y = cs.alloc(|| "y", || self.x.map(|x| x.square()).ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        Ok((x, y))
    }

    fn segment<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS, k: usize, x: bellpepper_core::Variable, y: bellpepper_core::Variable) -> Result<(), SynthesisError> {
        let kk = Scalar::from(k as u64 + 1);
        let z = cs.alloc_input(|| "z", || self.x.map(|x| x + kk).ok_or(SynthesisError::AssignmentMissing))?;
        cs.enforce(|| "z", |lc| lc + x + (kk, CS::one()), |lc| lc + CS::one(), |lc| lc + z);
        let mut prev = z;
        for j in 0..self.per {
            let c = Scalar::from((k * 31 + j) as u64 + 2);
            let w = cs.alloc(|| "w", || self.x.map(|x| x.square() * c).ok_or(SynthesisError::AssignmentMissing))?;
            cs.enforce(|| "y*c=w", |lc| lc + (c, y), |lc| lc + CS::one(), |lc| lc + w);
            // Ties the segment's own variables together and to the prefix.
            cs.enforce(|| "w*1=w", |lc| lc + w, |lc| lc + CS::one() + prev - prev, |lc| lc + w);
            prev = w;
        }
        if self.irregular && k == 1 {
            cs.enforce(|| "extra", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        }
        Ok(())
    }
}

impl SegmentedCircuit for Toy {
    fn segments(&self) -> usize {
        self.segments
    }
    fn synthesize_whole<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        let (x, y) = self.prefix(cs)?;
        (0..self.segments).try_for_each(|k| self.segment(cs, k, x, y))
    }
    fn synthesize_part<CS: ConstraintSystem<Scalar>>(&self, cs: &mut CS, segment: Option<usize>) -> Result<(), SynthesisError> {
        let (x, y) = self.prefix(cs)?;
        segment.map_or(Ok(()), |k| self.segment(cs, k, x, y))
    }
}

/// The whole circuit as a `Clone` circuit, for the one-thread path.
#[derive(Clone, Copy)]
struct AsWhole(Toy);

impl Circuit<Scalar> for AsWhole {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.0.synthesize_whole(cs)
    }
}

#[test]
fn the_segmented_qap_is_the_whole_circuits() {
    for (segments, per) in [(0, 3), (1, 0), (1, 4), (5, 3), (16, 40)] {
        let toy = Toy { segments, per, x: None, irregular: false };
        let seg = setup::test_setup_segmented(&toy, [9u8; 32], &mut |_| Ok(())).unwrap();
        let whole = setup::test_setup(AsWhole(toy), [9u8; 32], &mut |_| Ok(())).unwrap();
        same_keys(&seg, &whole, &format!("{segments} segments of {per}"));
        // And a proof with it verifies.
        let filled = Toy { x: Some(Scalar::from(3u64)), ..toy };
        let params = Arc::new(seg);
        let asg = synthesize(Whole(&filled), AssignmentBuffers::heap()).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(segments as u64);
        finish(prove_start(&CpuBackend, &params, asg, Randomness::random(&mut rng)).unwrap()).expect("verifies");
    }
}

#[test]
fn a_refused_admission_stops_the_setup_with_a_memory_error() {
    let c = SyntheticCircuit { kind: WorkloadKind::Dense, constraints: 100, inputs: 1, structure_seed: 1, witness_seed: None };
    let mut asked = 0;
    let err = setup::test_setup(c, [0; 32], &mut |bytes| {
        asked = bytes;
        Err("the budget is full".into())
    })
    .unwrap_err();
    assert_eq!(asked, setup::peak_bytes(102, 128), "asked for the peak of 102 variables over a domain of 128");
    assert!(matches!(&err, kiln_groth16::ProveError::Memory(m) if m.contains("the budget is full")), "{err}");
}

#[test]
fn a_segment_of_another_shape_is_refused() {
    let toy = Toy { segments: 3, per: 2, x: None, irregular: true };
    let err = setup::test_setup_segmented(&toy, [1u8; 32], &mut |_| Ok(())).unwrap_err().to_string();
    assert!(err.contains("segment 1") && err.contains("changed shape"), "{err}");
}
