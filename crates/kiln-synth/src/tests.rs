use super::*;
use crate::workload::{SyntheticCircuit, WorkloadKind};
use bellpepper_core::{Circuit, ConstraintSystem, SynthesisError};

/// x * y = z with z public, plus a sub-system appended through `extend`.
struct Extending {
    x: u64,
    y: u64,
}

impl Circuit<Scalar> for Extending {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(Scalar::from(self.x)))?;
        let y = cs.alloc(|| "y", || Ok(Scalar::from(self.y)))?;
        let z = cs.alloc_input(|| "z", || Ok(Scalar::from(self.x * self.y)))?;
        cs.enforce(|| "xy", |lc| lc + x, |lc| lc + y, |lc| lc + z);
        if CS::is_extensible() {
            let mut sub = CS::new();
            sub.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
            let w = sub.alloc(|| "w", || Ok(Scalar::from(7u64)))?;
            sub.enforce(|| "w*1=w", |lc| lc + w, |lc| lc + CS::one(), |lc| lc + w);
            cs.extend(&sub);
        }
        Ok(())
    }
}

#[test]
fn extend_appends_subsystem() {
    let asg = synthesize(Extending { x: 3, y: 5 }, AssignmentBuffers::heap()).unwrap();
    // xy, w*1=w, then two input constraints.
    assert_eq!(asg.num_constraints, 4);
    assert_eq!(asg.num_aux, 3);
    assert_eq!(asg.aux()[2], Scalar::from(7u64));
    assert_eq!(asg.input.len(), 2);
    assert_eq!(asg.a_aux_density.iter_set().collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(asg.b_aux_density.iter_set().collect::<Vec<_>>(), vec![1]);
    asg.check_satisfied().unwrap();
}

#[test]
fn fixed_buffers_too_small_is_a_clear_error() {
    let c = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 6, 2).with_witness(1);
    let bufs = AssignmentBuffers::new(
        Box::new(FixedBuf(vec![Scalar::ZERO; 10])),
        Box::new(FixedBuf(vec![Scalar::ZERO; 64])),
        Box::new(FixedBuf(vec![Scalar::ZERO; 64])),
        Box::new(FixedBuf(vec![Scalar::ZERO; 64])),
    );
    match synthesize(c, bufs) {
        Err(SynthError::BufferTooSmall { which: "a", needed: 64, capacity: 10 }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

/// A buffer that cannot grow, like a pinned one.
pub(crate) struct FixedBuf(pub(crate) Vec<Scalar>);
impl ScalarBuffer for FixedBuf {
    fn as_slice(&self) -> &[Scalar] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        &mut self.0
    }
}

#[test]
fn shape_matches_synthesis_and_fixed_buffers_work() {
    for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
        let c = SyntheticCircuit::filling_domain(kind, 10, 3);
        let shape = CircuitShape::of(c).unwrap();
        assert_eq!(shape.num_constraints, 1024);
        assert_eq!(shape.domain(), 1024);
        let n = shape.num_constraints;
        let bufs = AssignmentBuffers::new(
            Box::new(FixedBuf(vec![Scalar::ZERO; n])),
            Box::new(FixedBuf(vec![Scalar::ZERO; n])),
            Box::new(FixedBuf(vec![Scalar::ZERO; n])),
            Box::new(FixedBuf(vec![Scalar::ZERO; shape.num_aux])),
        );
        let asg = synthesize(c.with_witness(9), bufs).unwrap();
        assert_eq!(asg.shape(), shape);
        asg.check_satisfied().unwrap();
        assert_eq!(&asg.input[1..], &c.with_witness(9).public_inputs()[..]);
    }
}

#[test]
fn filecoin_like_statistics() {
    let c = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 14, 4).with_witness(3);
    let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
    let s = asg.shape();
    let bits = asg.aux().iter().filter(|v| **v == Scalar::ZERO || **v == Scalar::ONE).count();
    let bit_frac = bits as f64 / s.num_aux as f64;
    let b_frac = s.b_aux_count as f64 / s.num_aux as f64;
    let a_frac = s.a_aux_count as f64 / s.num_aux as f64;
    assert!(bit_frac > 0.85, "bits {bit_frac}");
    assert!((0.2..0.45).contains(&b_frac), "B density {b_frac}");
    assert!(a_frac > 0.95, "A density {a_frac}");
}

#[test]
fn unsatisfied_witness_is_reported_with_its_index() {
    struct Bad;
    impl Circuit<Scalar> for Bad {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(2u64)))?;
            cs.enforce(|| "ok", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + x);
            cs.enforce(|| "bad", |lc| lc + x, |lc| lc + x, |lc| lc + x);
            Ok(())
        }
    }
    let asg = synthesize(Bad, AssignmentBuffers::heap()).unwrap();
    match asg.check_satisfied() {
        Err(SynthError::Unsatisfied { index: 1, total: 3 }) => {}
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn missing_witness_is_a_circuit_error() {
    let c = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 5, 1); // no witness seed
    assert!(matches!(synthesize(c, AssignmentBuffers::heap()), Err(SynthError::Circuit(_))));
}

#[test]
fn many_in_parallel_match_one_by_one() {
    let base = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 8, 2);
    let work = (0..4).map(|i| (base.with_witness(i), AssignmentBuffers::heap())).collect();
    let many = synthesize_many(work);
    for (i, r) in many.into_iter().enumerate() {
        let one = synthesize(base.with_witness(i as u64), AssignmentBuffers::heap()).unwrap();
        let r = r.unwrap();
        assert_eq!(r.a(), one.a());
        assert_eq!(r.aux(), one.aux());
    }
}
