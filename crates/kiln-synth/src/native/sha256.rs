//! The witness of bellperson's SHA-256 gadget (`bellperson::gadgets::sha256`,
//! what Filecoin's labels and tree_d paths hash with), computed with native
//! `u32` arithmetic: exactly the aux values the gadget allocates, in its
//! order, written as 0/1 field elements straight into the caller's slice.
//!
//! Why it has to mirror the gadget and not just hash: what the gadget
//! allocates depends on which bits are constants. Its `Boolean` is a
//! constant, a variable (`Is`) or a negated view of one (`Not`); an xor with
//! a constant allocates nothing, a `ch` or `maj` with a constant operand
//! becomes an `and` or nothing, an addition of constants is folded. The
//! padding, the IV and Filecoin's zero padding bytes are constants, so the
//! first rounds of every hash and whole padding blocks allocate less than a
//! fully variable block. A [`Word`] therefore carries, besides its bits'
//! values, which bits are constants and which are negated views; every
//! operation derives those masks word-wide (the gadget's per-bit case
//! analysis, as bit masks) and writes the allocated bits in the gadget's
//! order. Only `ch` and `maj` with a constant operand go bit by bit, which
//! happens in the first four rounds after the IV and nowhere else in
//! Filecoin's hashes.
//!
//! `MultiEq`, which the gadget wraps around its additions, only merges
//! constraints: it allocates nothing, so it has no counterpart here.

use blstrs::Scalar;
use ff::Field;

use super::AssignmentWriter;

/// SHA-256's round constants (FIPS 180-4, 4.2.2).
const ROUND_CONSTANTS: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be,
    0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa,
    0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85,
    0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3,
    0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f,
    0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
const IV: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// A 32-bit word as the gadget's `UInt32` holds it. Bit `i` of each field
/// is the gadget's bit `i` (least significant first); a word of the message
/// is its 32 bits read big-endian, as `UInt32::from_bits_be` reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word {
    /// Each bit's boolean value (a negated view's value is the negation).
    pub value: u32,
    /// Bits that are constants (`Boolean::Constant`): no variable behind them.
    pub constant: u32,
    /// Bits that are negated views (`Boolean::Not`) of a variable. Never set
    /// on a constant bit.
    pub negated: u32,
}

impl Word {
    /// A constant word (`UInt32::constant`).
    pub const fn constant(value: u32) -> Word {
        Word { value, constant: u32::MAX, negated: 0 }
    }

    /// A word whose 32 bits are all variables allocated earlier (`Boolean::Is`).
    pub const fn variable(value: u32) -> Word {
        Word { value, constant: 0, negated: 0 }
    }

    fn rotr(self, by: u32) -> Word {
        Word { value: self.value.rotate_right(by), constant: self.constant.rotate_right(by), negated: self.negated.rotate_right(by) }
    }

    /// The bits shifted in at the top are constant zeros.
    fn shr(self, by: u32) -> Word {
        Word { value: self.value >> by, constant: (self.constant >> by) | !(u32::MAX >> by), negated: self.negated >> by }
    }

    fn bit(self, i: u32) -> Bit {
        let v = (self.value >> i) & 1 == 1;
        if (self.constant >> i) & 1 == 1 {
            Bit::Const(v)
        } else if (self.negated >> i) & 1 == 1 {
            Bit::Not(!v)
        } else {
            Bit::Is(v)
        }
    }

    fn set_bit(&mut self, i: u32, bit: Bit) {
        let m = 1u32 << i;
        let (value, constant, negated) = match bit {
            Bit::Const(v) => (v, true, false),
            Bit::Is(v) => (v, false, false),
            Bit::Not(v) => (!v, false, true),
        };
        self.value = (self.value & !m) | if value { m } else { 0 };
        self.constant = (self.constant & !m) | if constant { m } else { 0 };
        self.negated = (self.negated & !m) | if negated { m } else { 0 };
    }
}

/// A bit as a field element, without a branch (the bits are random, a
/// branch on each would mostly be mispredicted).
const BITS: [Scalar; 2] = [Scalar::ZERO, Scalar::ONE];

/// The next aux variable, a bit.
#[inline]
fn put_bit(w: &mut AssignmentWriter<'_>, b: bool) {
    w.aux(BITS[usize::from(b)]);
}

/// The low `n` bits of `v`, least significant first.
#[inline]
fn put_bits(w: &mut AssignmentWriter<'_>, v: u64, n: usize) {
    for i in 0..n {
        w.aux(BITS[((v >> i) & 1) as usize]);
    }
}

/// The bits of `v` where `mask` is set, least significant first.
#[inline]
fn put_masked(w: &mut AssignmentWriter<'_>, v: u32, mask: u32) {
    if mask == u32::MAX {
        return put_bits(w, u64::from(v), 32);
    }
    let mut m = mask;
    while m != 0 {
        let i = m.trailing_zeros();
        put_bit(w, (v >> i) & 1 == 1);
        m &= m - 1;
    }
}

/// One bit as the gadget's `Boolean`, for the bit-by-bit paths. `Is(v)`
/// and `Not(v)` carry the value of the variable behind them.
#[derive(Clone, Copy)]
enum Bit {
    Const(bool),
    Is(bool),
    Not(bool),
}

impl Bit {
    fn get(self) -> bool {
        match self {
            Bit::Const(v) | Bit::Is(v) => v,
            Bit::Not(v) => !v,
        }
    }

    fn not(self) -> Bit {
        match self {
            Bit::Const(v) => Bit::Const(!v),
            Bit::Is(v) => Bit::Not(v),
            Bit::Not(v) => Bit::Is(v),
        }
    }

    /// `Boolean::and`: folds constants; any two variables (plain or
    /// negated) allocate their conjunction.
    fn and(a: Bit, b: Bit, w: &mut AssignmentWriter<'_>) -> Bit {
        match (a, b) {
            (Bit::Const(false), _) | (_, Bit::Const(false)) => Bit::Const(false),
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x,
            _ => {
                let v = a.get() & b.get();
                put_bit(w, v);
                Bit::Is(v)
            }
        }
    }

    /// `Boolean::sha256_ch`: (a and b) xor ((not a) and c), its cases in its order.
    fn ch(a: Bit, b: Bit, c: Bit, w: &mut AssignmentWriter<'_>) -> Bit {
        let v = (a.get() & b.get()) ^ (!a.get() & c.get());
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Bit::Const(v),
            (Bit::Const(false), _, c) => c,
            (a, Bit::Const(false), c) => Bit::and(a.not(), c, w),
            (a, b, Bit::Const(false)) => Bit::and(a, b, w),
            (a, b, Bit::Const(true)) => Bit::and(a, b.not(), w).not(),
            (a, Bit::Const(true), c) => Bit::and(a.not(), c.not(), w).not(),
            // a is constant true, or all three are variables.
            _ => {
                put_bit(w, v);
                Bit::Is(v)
            }
        }
    }

    /// `Boolean::sha256_maj`: (a and b) xor (a and c) xor (b and c), its
    /// cases in its order; the general case allocates maj, then b and c.
    fn maj(a: Bit, b: Bit, c: Bit, w: &mut AssignmentWriter<'_>) -> Bit {
        let v = (a.get() & b.get()) ^ (a.get() & c.get()) ^ (b.get() & c.get());
        match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Bit::Const(v),
            (Bit::Const(false), b, c) => Bit::and(b, c, w),
            (a, Bit::Const(false), c) => Bit::and(a, c, w),
            (a, b, Bit::Const(false)) => Bit::and(a, b, w),
            (a, b, Bit::Const(true)) => Bit::and(a.not(), b.not(), w).not(),
            (a, Bit::Const(true), c) => Bit::and(a.not(), c.not(), w).not(),
            (Bit::Const(true), b, c) => Bit::and(b.not(), c.not(), w).not(),
            _ => {
                put_bit(w, v);
                Bit::and(b, c, w);
                Bit::Is(v)
            }
        }
    }
}

/// `UInt32::xor`, word-wide. Per bit: a constant operand allocates nothing
/// (false passes the other bit through, true negates its view); two
/// variables allocate the xor of the variables behind them and the result
/// is negated when exactly one of them was.
fn xor(a: Word, b: Word, w: &mut AssignmentWriter<'_>) -> Word {
    let value = a.value ^ b.value;
    let constant = a.constant & b.constant;
    let allocated = !a.constant & !b.constant;
    // A constant true flips the other bit's view; constants carry no negation.
    let negated = (a.negated ^ b.negated ^ (a.constant & a.value) ^ (b.constant & b.value)) & !constant;
    put_masked(w, value ^ negated, allocated);
    Word { value, constant, negated }
}

/// `UInt32::sha256_ch` (e, f, g).
fn ch(a: Word, b: Word, c: Word, w: &mut AssignmentWriter<'_>) -> Word {
    let value = (a.value & b.value) ^ (!a.value & c.value);
    if a.constant | b.constant | c.constant == 0 {
        put_bits(w, u64::from(value), 32);
        return Word::variable(value);
    }
    let mut r = Word::constant(0);
    for i in 0..32 {
        r.set_bit(i, Bit::ch(a.bit(i), b.bit(i), c.bit(i), w));
    }
    r
}

/// `UInt32::sha256_maj` (a, b, c).
fn maj(a: Word, b: Word, c: Word, w: &mut AssignmentWriter<'_>) -> Word {
    if a.constant | b.constant | c.constant == 0 {
        let value = (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value);
        let bc = b.value & c.value;
        // Per bit: maj, then the `b and c` it is built from.
        let mut spread = 0u64;
        for i in 0..32 {
            spread |= u64::from((value >> i) & 1) << (2 * i) | u64::from((bc >> i) & 1) << (2 * i + 1);
        }
        put_bits(w, spread, 64);
        return Word::variable(value);
    }
    let mut r = Word::constant(0);
    for i in 0..32 {
        r.set_bit(i, Bit::maj(a.bit(i), b.bit(i), c.bit(i), w));
    }
    r
}

/// `UInt32::addmany`: the sum of 2 to 10 words. All constants fold into a
/// constant; otherwise every bit of the full sum is allocated, as many as
/// the largest possible sum needs (33 for two operands, up to 36), of
/// which the low 32 are the result.
fn addmany(operands: &[Word], w: &mut AssignmentWriter<'_>) -> Word {
    debug_assert!((2..=10).contains(&operands.len()));
    let sum: u64 = operands.iter().map(|op| u64::from(op.value)).sum();
    if operands.iter().all(|op| op.constant == u32::MAX) {
        return Word::constant(sum as u32);
    }
    let max = operands.len() as u64 * u64::from(u32::MAX);
    let width = (64 - max.leading_zeros()) as usize;
    put_bits(w, sum, width);
    Word::variable(sum as u32)
}

/// A working variable whose addition the gadget defers to the round that
/// reads it (`Maybe::Deferred`), so it can absorb more operands first.
#[derive(Clone, Copy)]
struct Pending {
    operands: [Word; 8],
    len: usize,
}

impl Pending {
    fn done(w: Word) -> Pending {
        Pending { operands: [w; 8], len: 1 }
    }

    fn sum_of(words: &[Word]) -> Pending {
        let mut p = Pending { operands: [Word::constant(0); 8], len: words.len() };
        p.operands[..words.len()].copy_from_slice(words);
        p
    }

    /// `Maybe::compute`: a concrete word is returned as it is (`others`
    /// is then ignored, as the gadget ignores it); a deferred sum is added
    /// up with `others` appended.
    fn compute(self, others: &[Word], w: &mut AssignmentWriter<'_>) -> Word {
        if self.len == 1 {
            return self.operands[0];
        }
        let mut ops = [Word::constant(0); 10];
        ops[..self.len].copy_from_slice(&self.operands[..self.len]);
        ops[self.len..self.len + others.len()].copy_from_slice(others);
        addmany(&ops[..self.len + others.len()], w)
    }
}

/// `sha256_compression_function`: one 512-bit block (16 message words)
/// into the chaining value `state`.
pub fn compress(state: &[Word; 8], block: &[Word; 16], w: &mut AssignmentWriter<'_>) -> [Word; 8] {
    let mut schedule = [Word::constant(0); 64];
    schedule[..16].copy_from_slice(block);
    for i in 16..64 {
        let s0 = xor(xor(schedule[i - 15].rotr(7), schedule[i - 15].rotr(18), w), schedule[i - 15].shr(3), w);
        let s1 = xor(xor(schedule[i - 2].rotr(17), schedule[i - 2].rotr(19), w), schedule[i - 2].shr(10), w);
        schedule[i] = addmany(&[schedule[i - 16], s0, schedule[i - 7], s1], w);
    }

    let mut a = Pending::done(state[0]);
    let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *state;
    let mut e = Pending::done(state[4]);
    for i in 0..64 {
        let new_e = e.compute(&[], w);
        let s1 = xor(xor(new_e.rotr(6), new_e.rotr(11), w), new_e.rotr(25), w);
        let ch = ch(new_e, f, g, w);
        let temp1 = [h, s1, ch, Word::constant(ROUND_CONSTANTS[i]), schedule[i]];
        let new_a = a.compute(&[], w);
        let s0 = xor(xor(new_a.rotr(2), new_a.rotr(13), w), new_a.rotr(22), w);
        let maj = maj(new_a, b, c, w);
        h = g;
        g = f;
        f = new_e;
        e = Pending::sum_of(&[temp1[0], temp1[1], temp1[2], temp1[3], temp1[4], d]);
        d = c;
        c = b;
        b = new_a;
        a = Pending::sum_of(&[temp1[0], temp1[1], temp1[2], temp1[3], temp1[4], s0, maj]);
    }

    let h0 = a.compute(&[state[0]], w);
    let h1 = addmany(&[state[1], b], w);
    let h2 = addmany(&[state[2], c], w);
    let h3 = addmany(&[state[3], d], w);
    let h4 = e.compute(&[state[4]], w);
    let h5 = addmany(&[state[5], f], w);
    let h6 = addmany(&[state[6], g], w);
    let h7 = addmany(&[state[7], h], w);
    [h0, h1, h2, h3, h4, h5, h6, h7]
}

/// The gadget's `sha256` of a message of whole 32-bit words (every message
/// Filecoin hashes is): the padding as constants, then one compression per
/// block from the IV. Returns the digest's words (big-endian: the first
/// word's most significant bit is the digest's first bit).
pub fn sha256(message: &[Word], w: &mut AssignmentWriter<'_>) -> [Word; 8] {
    let bit_len = message.len() as u64 * 32;
    let mut state = IV.map(Word::constant);
    let mut block = [Word::constant(0); 16];
    // The message's whole blocks, then the tail with the padding: a one
    // bit, zeros, and the length in bits as 64 bits, big-endian.
    let mut chunks = message.chunks_exact(16);
    for whole in &mut chunks {
        block.copy_from_slice(whole);
        state = compress(&state, &block, w);
    }
    let tail = chunks.remainder();
    block = [Word::constant(0); 16];
    block[..tail.len()].copy_from_slice(tail);
    block[tail.len()] = Word::constant(0x8000_0000);
    if tail.len() + 1 > 14 {
        state = compress(&state, &block, w);
        block = [Word::constant(0); 16];
    }
    block[14] = Word::constant((bit_len >> 32) as u32);
    block[15] = Word::constant(bit_len as u32);
    compress(&state, &block, w)
}

/// The digest's words as 32 bytes, as a byte-oriented SHA-256 returns them.
pub fn digest_bytes(digest: &[Word; 8]) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (chunk, w) in bytes.chunks_exact_mut(4).zip(digest) {
        chunk.copy_from_slice(&w.value.to_be_bytes());
    }
    bytes
}

#[cfg(test)]
#[path = "sha256_tests.rs"]
mod tests;
