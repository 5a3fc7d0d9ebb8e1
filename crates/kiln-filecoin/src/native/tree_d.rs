//! SHA-256 the way Filecoin's circuits hash field elements (tree_d nodes,
//! PoRep labels), natively: which message bits are variables, and how the
//! digest becomes a field element.
//!
//! A 32-byte element enters a SHA-256 gadget as its `to_bits_le` (255
//! allocated bits) padded with one constant zero bit and put in byte order
//! (`reverse_bit_numbering`, or the same chunking in filecoin-hashers'
//! `Sha256Function`): the message bytes are the element's little-endian
//! representation, with bit 7 of the last byte a constant. The digest's
//! bits go back in the same byte order, and the first 254 of them are
//! packed into one variable (`multipack::pack_bits`): the digest bytes
//! read little-endian with the top two bits dropped, which is
//! `Sha256Domain::trim_to_fr32`.

use blstrs::Scalar as Fr;
use ff::PrimeField;
use kiln_synth::native::bits::to_bits_le;
use kiln_synth::native::sha256::{digest_bytes, sha256, Word};
use kiln_synth::native::AssignmentWriter;

/// An element's eight message words: its representation's bytes, all bits
/// variables but the 256th (bit 7 of byte 31: the constant padding bit).
pub(crate) fn element_words(v: &Fr) -> [Word; 8] {
    let repr = v.to_repr();
    let mut words: [Word; 8] = std::array::from_fn(|k| Word::variable(u32::from_be_bytes([repr[4 * k], repr[4 * k + 1], repr[4 * k + 2], repr[4 * k + 3]])));
    // Byte 31 is the low byte of word 7 (big-endian words); its bit 7 is the padding.
    words[7].constant = 0x80;
    words
}

/// The digest as the element the gadget packs (its first 254 bits in byte
/// order). Always below the modulus: 254 bits.
pub(crate) fn digest_element(digest: &[Word; 8]) -> Fr {
    let mut bytes = digest_bytes(digest);
    bytes[31] &= 0x3f;
    Option::from(Fr::from_repr(bytes)).expect("254 bits are below the modulus")
}

/// `Sha256Function::hash_multi_leaf_circuit` (and `hash2_circuit`, the same
/// for two children): each child's `to_bits_le`, the SHA-256 of their
/// bytes, the packed digest. Returns the node.
pub(crate) fn hash_node(w: &mut AssignmentWriter<'_>, children: &[Fr]) -> Fr {
    let mut message = Vec::with_capacity(8 * children.len());
    for c in children {
        to_bits_le(w, *c);
        message.extend_from_slice(&element_words(c));
    }
    let node = digest_element(&sha256(&message, w));
    w.aux(node);
    node
}
