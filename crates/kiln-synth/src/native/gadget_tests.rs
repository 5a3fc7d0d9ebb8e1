//! The native pieces against the real gadgets: each gadget runs in kiln's
//! recording constraint system on random values, and the native routine
//! must write the same input and aux vectors, bit for bit. (The Merkle
//! pieces are checked against storage-proofs-core's gadgets in
//! kiln-filecoin's tests, which have that crate.)

use bellpepper_core::num::AllocatedNum;
use bellpepper_core::{ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::{Field, PrimeField};
use generic_array::typenum::{U11, U2, U4, U8};
use neptune::poseidon::{Arity, PoseidonConstants};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::bits::{pack_bits, pack_into_inputs, to_bits_le, to_bits_le_strict, FIELD_BITS};
use super::poseidon::Poseidon;
use super::AssignmentWriter;
use crate::cs::RecordingCs;
use crate::AssignmentBuffers;

/// The gadget's public inputs (after ONE) and aux, recorded by kiln's
/// recording constraint system; its constraints must hold.
pub(super) fn record(gadget: impl FnOnce(&mut RecordingCs) -> Result<(), SynthesisError>) -> (Vec<Scalar>, Vec<Scalar>) {
    let mut cs = RecordingCs::with_buffers(AssignmentBuffers::heap());
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE)).unwrap();
    gadget(&mut cs).unwrap();
    let (a, b, c) = (cs.bufs.a.as_slice(), cs.bufs.b.as_slice(), cs.bufs.c.as_slice());
    if let Some(row) = (0..cs.num_constraints).find(|&i| a[i] * b[i] != c[i]) {
        panic!("the gadget's constraint {row} does not hold");
    }
    (cs.input[1..].to_vec(), cs.bufs.aux.as_slice()[..cs.num_aux].to_vec())
}

/// What `write` writes into areas of the recorded sizes (all of them).
pub(super) fn native(sizes: (usize, usize), write: impl FnOnce(&mut AssignmentWriter<'_>)) -> (Vec<Scalar>, Vec<Scalar>) {
    AssignmentWriter::fill_new(sizes.0, sizes.1, write).unwrap()
}

fn elements(seed: u64, n: usize) -> Vec<Scalar> {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| Scalar::random(&mut r)).collect()
}

fn alloc_all<CS: ConstraintSystem<Scalar>>(cs: &mut CS, values: &[Scalar]) -> Result<Vec<AllocatedNum<Scalar>>, SynthesisError> {
    values.iter().map(|&v| AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(v))).collect()
}

fn check_poseidon<A: Arity<Scalar>>(seed: u64) {
    let constants = PoseidonConstants::<Scalar, A>::new();
    let arity = A::to_usize();
    let preimage = elements(seed, arity);
    let mut gadget_hash = None;
    let want = record(|cs| {
        let xs = alloc_all(cs, &preimage)?;
        gadget_hash = neptune::circuit::poseidon_hash(cs.namespace(|| "h"), xs, &constants)?.get_value();
        Ok(())
    });
    let p = Poseidon::filecoin(arity).unwrap();
    assert_eq!(p.arity(), arity);
    assert_eq!(p.aux_per_hash() + arity, want.1.len(), "arity {arity}: aux per hash");
    let mut hash = None;
    let got = native((0, want.1.len()), |w| {
        for &x in &preimage {
            w.aux(x);
        }
        hash = Some(p.hash(w, &preimage));
    });
    assert!(got == want, "arity {arity}, seed {seed}: the native Poseidon's variables differ from the gadget's");
    assert_eq!(hash, gadget_hash);
    // And the hash is Poseidon itself (neptune's plain, non-circuit hash).
    assert_eq!(hash, Some(neptune::Poseidon::new_with_preimage(&preimage, &constants).hash()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn poseidon_allocates_what_neptunes_circuit_allocates(seed in any::<u64>()) {
        check_poseidon::<U2>(seed);
        check_poseidon::<U4>(seed);
        check_poseidon::<U8>(seed);
        check_poseidon::<U11>(seed);
    }

    #[test]
    fn bit_decompositions_allocate_what_the_gadgets_allocate(seed in any::<u64>(), edge in 0usize..4) {
        // Random elements, and the edges of the strict decomposition: 0, 1, r - 1, r - 2.
        let v = match edge {
            0 => elements(seed, 1)[0],
            1 => [Scalar::ZERO, Scalar::ONE][seed as usize % 2],
            2 => -Scalar::ONE,
            _ => -Scalar::from(2u64),
        };
        for strict in [false, true] {
            let mut gadget_bits = Vec::new();
            let want = record(|cs| {
                let x = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(v))?;
                let bits = if strict { x.to_bits_le_strict(cs.namespace(|| "bits"))? } else { x.to_bits_le(cs.namespace(|| "bits"))? };
                gadget_bits = bits.iter().map(|b| b.get_value().unwrap()).collect();
                Ok(())
            });
            let got = native((0, want.1.len()), |w| {
                w.aux(v);
                let bits = if strict { to_bits_le_strict(w, v) } else { to_bits_le(w, v) };
                assert_eq!(bits.to_vec(), gadget_bits);
            });
            prop_assert!(got == want, "strict {}: {} aux variables, the gadget {}", strict, got.1.len(), want.1.len());
            prop_assert_eq!(gadget_bits.len(), FIELD_BITS);
        }
    }

    #[test]
    fn packing_allocates_what_multipack_allocates(seed in any::<u64>(), len in 0usize..600) {
        let bits: Vec<bool> = {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            (0..len).map(|_| rand::Rng::gen_bool(&mut r, 0.5)).collect()
        };
        let want = record(|cs| {
            let booleans = bits
                .iter()
                .map(|&b| bellpepper_core::boolean::AllocatedBit::alloc(cs.namespace(|| "b"), Some(b)).map(Into::into))
                .collect::<Result<Vec<bellpepper_core::boolean::Boolean>, _>>()?;
            bellpepper::gadgets::multipack::pack_into_inputs(cs.namespace(|| "inputs"), &booleans)?;
            bellpepper::gadgets::multipack::pack_bits(cs.namespace(|| "num"), &booleans)?;
            Ok(())
        });
        let got = native((want.0.len(), want.1.len()), |w| {
            for &b in &bits {
                w.bit(b);
            }
            pack_into_inputs(w, &bits);
            pack_bits(w, &bits);
        });
        prop_assert!(got == want);
        prop_assert_eq!(want.0.len(), len.div_ceil(Scalar::CAPACITY as usize));
    }
}
