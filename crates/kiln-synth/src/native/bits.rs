//! Boolean decomposition and packing, natively: what bellpepper's
//! `AllocatedNum::to_bits_le` / `to_bits_le_strict` and the `multipack`
//! gadgets allocate, in their order.

use std::sync::OnceLock;

use blstrs::Scalar;
use ff::{Field, PrimeField};

use super::AssignmentWriter;

/// Bits of a field element as the decompositions allocate them (`NUM_BITS`).
pub const FIELD_BITS: usize = Scalar::NUM_BITS as usize;

/// Bits a packed input or number holds (`CAPACITY`).
pub const PACK_BITS: usize = Scalar::CAPACITY as usize;

/// Bit `i` (little-endian) of `v`'s canonical representation.
#[inline]
fn bit(repr: &[u8; 32], i: usize) -> bool {
    (repr[i / 8] >> (i % 8)) & 1 == 1
}

/// `to_bits_le` (bellpepper's `field_into_allocated_bits_le`, also
/// storage-proofs-update's `allocated_num_to_allocated_bits`): the
/// [`FIELD_BITS`] bits of `v`, least significant first, one `AllocatedBit`
/// each. Returns them.
pub fn to_bits_le(w: &mut AssignmentWriter<'_>, v: Scalar) -> [bool; FIELD_BITS] {
    let repr = v.to_repr();
    std::array::from_fn(|i| {
        let b = bit(&repr, i);
        w.bit(b);
        b
    })
}

/// `to_bits_le_strict`: the [`FIELD_BITS`] bits of `v`, allocated most
/// significant first, with the ANDs that prove the bits below the modulus
/// allocated between them (each run of ones in `r - 1`, closed by a zero,
/// is AND-ed with the previous runs' AND, one variable per AND). Returns the
/// bits least significant first, as the gadget does.
pub fn to_bits_le_strict(w: &mut AssignmentWriter<'_>, v: Scalar) -> [bool; FIELD_BITS] {
    let repr = v.to_repr();
    let mut out = [false; FIELD_BITS];
    // The AND of the last closed run (and the runs before it), and the
    // bits of the run of ones being read.
    let mut last_run: Option<bool> = None;
    let mut run = [false; FIELD_BITS + 1];
    let mut run_len = 0;
    for (i, &modulus_bit) in modulus_minus_one_bits().iter().enumerate().rev() {
        let b = bit(&repr, i);
        if modulus_bit {
            run[run_len] = b;
            run_len += 1;
        } else if run_len > 0 {
            // A zero closes the run: AND it with the runs before it
            // (kary_and: the first value as is, then one AND per further one).
            if let Some(prev) = last_run {
                run[run_len] = prev;
                run_len += 1;
            }
            let mut acc = run[0];
            for &x in &run[1..run_len] {
                acc &= x;
                w.bit(acc);
            }
            last_run = Some(acc);
            run_len = 0;
        }
        w.bit(b);
        out[i] = b;
    }
    out
}

/// The [`FIELD_BITS`] bits of `r - 1`, least significant first.
fn modulus_minus_one_bits() -> &'static [bool; FIELD_BITS] {
    static BITS: OnceLock<[bool; FIELD_BITS]> = OnceLock::new();
    BITS.get_or_init(|| {
        let repr = (-Scalar::ONE).to_repr();
        std::array::from_fn(|i| bit(&repr, i))
    })
}

/// `bits` (least significant first, at most [`PACK_BITS`] of them) as a number.
pub fn pack(bits: &[bool]) -> Scalar {
    debug_assert!(bits.len() <= PACK_BITS);
    let mut repr = [0u8; 32];
    for (i, &b) in bits.iter().enumerate() {
        repr[i / 8] |= u8::from(b) << (i % 8);
    }
    Option::from(Scalar::from_repr(repr)).expect("fewer than CAPACITY bits are below the modulus")
}

/// `multipack::pack_bits`: the first [`PACK_BITS`] bits as one aux
/// variable. Returns it.
pub fn pack_bits(w: &mut AssignmentWriter<'_>, bits: &[bool]) -> Scalar {
    let v = pack(&bits[..bits.len().min(PACK_BITS)]);
    w.aux(v);
    v
}

/// `multipack::pack_into_inputs`: one public input per [`PACK_BITS`] bits.
pub fn pack_into_inputs(w: &mut AssignmentWriter<'_>, bits: &[bool]) {
    for chunk in bits.chunks(PACK_BITS) {
        w.input(pack(chunk));
    }
}
