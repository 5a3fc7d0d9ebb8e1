//! The native SHA-256 witness against bellperson's gadget run in kiln's
//! recording constraint system: the same aux values, bit for bit, the same
//! count, the same digest, and the same constant / negated pattern in the
//! digest's words (what the next gadget's allocations depend on).

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::sha256::{sha256_compression_function, sha256 as sha256_gadget};
use bellperson::gadgets::uint32::UInt32;
use blstrs::Scalar;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::super::gadget_tests::{native, record};
use super::super::AssignmentWriter;
use super::{compress, digest_bytes, sha256, Word};
use crate::cs::RecordingCs;

/// How the gadget sees one bit.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Const,
    Is,
    Not,
}

/// A bit as the test describes it: its kind and its boolean value.
type TestBit = (Kind, bool);

/// The gadget's `Boolean`s for `bits`, allocating a variable for each
/// non-constant one (a `Not` bit's variable holds the negated value).
fn booleans(cs: &mut RecordingCs, bits: &[TestBit]) -> Vec<Boolean> {
    bits.iter()
        .map(|&(kind, v)| match kind {
            Kind::Const => Boolean::constant(v),
            Kind::Is => Boolean::from(AllocatedBit::alloc(&mut *cs, Some(v)).unwrap()),
            Kind::Not => Boolean::from(AllocatedBit::alloc(&mut *cs, Some(!v)).unwrap()).not(),
        })
        .collect()
}

/// The native words for `bits`, 32 per word, the first bit most significant.
fn words(bits: &[TestBit]) -> Vec<Word> {
    bits.chunks(32)
        .map(|chunk| {
            let mut w = Word::constant(0);
            for (j, &(kind, v)) in chunk.iter().enumerate() {
                let m = 1u32 << (31 - j);
                w.value |= if v { m } else { 0 };
                match kind {
                    Kind::Const => {}
                    Kind::Is => w.constant &= !m,
                    Kind::Not => {
                        w.constant &= !m;
                        w.negated |= m;
                    }
                }
            }
            w
        })
        .collect()
}

/// A gadget word as a native one (its bits least significant first).
fn word_of(bits_le: &[Boolean]) -> Word {
    let mut w = Word::constant(0);
    for (i, b) in bits_le.iter().enumerate() {
        let m = 1u32 << i;
        w.value |= if b.get_value().unwrap() { m } else { 0 };
        match b {
            Boolean::Constant(_) => {}
            Boolean::Is(_) => w.constant &= !m,
            Boolean::Not(_) => {
                w.constant &= !m;
                w.negated |= m;
            }
        }
    }
    w
}

/// The message's variables as the native side writes them before the
/// hash (the gadget side allocates them in `booleans`).
fn message_variables(w: &mut AssignmentWriter<'_>, bits: &[TestBit]) {
    for &(kind, v) in bits {
        match kind {
            Kind::Const => {}
            Kind::Is => w.bit(v),
            Kind::Not => w.bit(!v),
        }
    }
}

/// Gadget and native runs of one hash: the same variables, bit for bit
/// (the native run must fill exactly the gadget's count), the same digest.
fn assert_same(gadget: &(Vec<Scalar>, Vec<Scalar>), gadget_digest: &[Word], native_run: &(Vec<Scalar>, Vec<Scalar>), native_digest: &[Word]) {
    let (want, got) = (&gadget.1, &native_run.1);
    if let Some(i) = want.iter().zip(got).position(|(g, n)| g != n) {
        panic!("aux {i} of {} differs: gadget {:?}, native {:?}", want.len(), want[i], got[i]);
    }
    assert_eq!(gadget_digest, native_digest, "digest words (values, constant and negated masks)");
}

/// The whole hash, gadget and native, on `bits`.
fn check_hash(bits: &[TestBit]) {
    let mut gadget_digest = Vec::new();
    let want = record(|cs| {
        let input = booleans(cs, bits);
        let be = sha256_gadget(&mut *cs, &input)?;
        gadget_digest = be.chunks(32).map(|w| word_of(&w.iter().rev().cloned().collect::<Vec<_>>())).collect();
        Ok(())
    });
    let mut native_digest = Vec::new();
    let got = native((want.0.len(), want.1.len()), |w| {
        message_variables(w, bits);
        native_digest = sha256(&words(bits), w).to_vec();
    });
    assert_same(&want, &gadget_digest, &got, &native_digest);
}

fn test_bit() -> impl Strategy<Value = TestBit> {
    (prop_oneof![Just(Kind::Const), Just(Kind::Is), Just(Kind::Not)], any::<bool>())
}

/// A word's 32 bits in one of the styles the gadget meets: all variables,
/// all constants, or any mixture of constants and plain and negated views.
fn test_word() -> impl Strategy<Value = Vec<TestBit>> {
    prop_oneof![
        2 => any::<u32>().prop_map(|v| (0..32).map(|j| (Kind::Is, (v >> (31 - j)) & 1 == 1)).collect()),
        1 => any::<u32>().prop_map(|v| (0..32).map(|j| (Kind::Const, (v >> (31 - j)) & 1 == 1)).collect()),
        2 => proptest::collection::vec(test_bit(), 32),
    ]
}

fn test_words(n: impl Into<proptest::collection::SizeRange>) -> impl Strategy<Value = Vec<TestBit>> {
    proptest::collection::vec(test_word(), n).prop_map(|ws| ws.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// One compression of a random block into a random chaining value,
    /// every bit of either of any kind.
    #[test]
    fn compression_of_random_blocks_matches_the_gadget(block in test_words(16), state in test_words(8)) {
        let mut gadget_digest = Vec::new();
        let want = record(|cs| {
            let input = booleans(cs, &block);
            let state_bits = booleans(cs, &state);
            let state_words: Vec<UInt32> = state_bits.chunks(32).map(UInt32::from_bits_be).collect();
            let out = sha256_compression_function(&mut *cs, &input, &state_words)?;
            gadget_digest = out.into_iter().map(|w| word_of(&w.into_bits())).collect();
            Ok(())
        });
        let native_state: [Word; 8] = words(&state).try_into().unwrap();
        let native_block: [Word; 16] = words(&block).try_into().unwrap();
        let mut native_digest = Vec::new();
        let got = native((want.0.len(), want.1.len()), |w| {
            message_variables(w, &block);
            message_variables(w, &state);
            native_digest = compress(&native_state, &native_block, w).to_vec();
        });
        assert_same(&want, &gadget_digest, &got, &native_digest);
    }

    /// Whole hashes of random messages of 0 to 40 words: every tail length,
    /// so both paddings (in the last block, or in a block of its own).
    #[test]
    fn hashes_of_random_messages_match_the_gadget(message in test_words(0..=40usize)) {
        check_hash(&message);
    }
}

/// A 256-bit field element's bits as Filecoin hashes them: `to_bits_le`'s
/// 255 variables, a constant zero for the 256th, bytes reversed
/// (`reverse_bit_numbering`), so the constant is bit 248.
fn element_bits(rng: &mut ChaCha8Rng) -> Vec<TestBit> {
    (0..256).map(|p| if p == 248 { (Kind::Const, false) } else { (Kind::Is, rng.gen()) }).collect()
}

/// A PoRep label (`create_label_circuit`): replica_id, layer index (a
/// constant) and challenged node (64 variables), zero padding to 64 bytes,
/// then 37 parents of 32 bytes: 20 blocks, the last all padding.
#[test]
fn a_porep_label_matches_the_gadget() {
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let mut bits = element_bits(&mut rng);
    let layer: u32 = 7;
    bits.extend((0..32).map(|j| (Kind::Const, (layer >> (31 - j)) & 1 == 1)));
    bits.extend((0..64).map(|_| (Kind::Is, rng.gen())));
    bits.resize(512, (Kind::Const, false));
    for _ in 0..37 {
        bits.extend(element_bits(&mut rng));
    }
    assert_eq!(bits.len(), 39 * 256);
    check_hash(&bits);
}

/// A tree_d node (`Sha256Function::hash2_circuit`): two children of 32
/// bytes, each a field element's bits.
#[test]
fn a_tree_d_node_matches_the_gadget() {
    let mut rng = ChaCha8Rng::seed_from_u64(20);
    for _ in 0..4 {
        let mut bits = element_bits(&mut rng);
        bits.extend(element_bits(&mut rng));
        check_hash(&bits);
    }
}

/// The values are SHA-256's: known digests of byte messages (FIPS 180-4's
/// "abc" and the empty message), with no variable at all.
#[test]
fn digests_are_sha256() {
    let hash = |bytes: &[u8]| {
        let message: Vec<Word> = bytes.chunks(4).map(|c| Word::constant(u32::from_be_bytes(c.try_into().unwrap()))).collect();
        let (mut no_inputs, mut no_aux): ([Scalar; 0], [Scalar; 0]) = ([], []);
        let mut w = AssignmentWriter::new(&mut no_inputs, &mut no_aux);
        let digest = digest_bytes(&sha256(&message, &mut w));
        w.finish().unwrap();
        digest
    };
    let hex = |d: [u8; 32]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(hex(hash(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    // "abcd" as one word: sha256("abcd").
    assert_eq!(hex(hash(b"abcd")), "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589");
}
