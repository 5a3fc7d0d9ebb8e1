//! Merkle inclusion paths, natively: the variables storage-proofs-core's
//! `PoRCircuit` and its `insertion` gadgets allocate, in their order.
//!
//! Per level of a path (base tree levels, then the sub-tree's and the top
//! tree's level when the tree has them), `SubPath::synthesize` allocates
//! the node's position among its `arity` siblings as `log2(arity)` bits
//! (little-endian), the `arity - 1` sibling hashes, then `insert`s the
//! current node among them (a fixed network of `pick`s, 2 for arity 2, 8
//! for arity 4, 2 bits and 20 picks for arity 8, the general `select`
//! network otherwise) and hashes the result. After the last level the
//! path's bits are packed into public inputs.

use blstrs::Scalar;
use ff::Field;

use super::bits::pack_into_inputs;
use super::AssignmentWriter;

/// One level of an inclusion path.
#[derive(Clone, Copy, Debug)]
pub struct PathLevel<'a> {
    /// The other `arity - 1` children of the parent, in order.
    pub siblings: &'a [Scalar],
    /// The path node's position among the parent's `arity` children.
    pub index: usize,
}

impl PathLevel<'_> {
    /// Children per parent: the siblings and the node (a power of two).
    pub fn arity(&self) -> usize {
        self.siblings.len() + 1
    }
}

/// The gadget's `insert`: the index bits are allocated by the caller; this
/// writes the picks that put `element` at position `index` among
/// `siblings` and returns the resulting `arity` values in `out`.
///
/// # Panics
/// If the arity (`siblings.len() + 1`, also `out.len()`) is not a power of
/// two of at least 2, or `index` is not below it (the gadget asserts the same).
pub fn insert(w: &mut AssignmentWriter<'_>, element: Scalar, index: usize, siblings: &[Scalar], out: &mut [Scalar]) {
    let arity = siblings.len() + 1;
    assert!(arity >= 2 && arity.is_power_of_two() && out.len() == arity && index < arity, "insert at {index} of {arity}");
    let bit = |i: u32| (index >> i) & 1 == 1;
    match arity {
        2 => run_picks(w, element, siblings, [bit(0), false, false], &INSERT_2, out),
        4 => run_picks(w, element, siblings, [bit(0), bit(1), false], &INSERT_4, out),
        8 => {
            // insert_8 allocates `b0 nor b1` and `b0 and b1` first.
            let (b0, b1) = (bit(0), bit(1));
            w.bit(!b0 && !b1);
            w.bit(b0 && b1);
            run_picks(w, element, siblings, [b0, b1, bit(2)], &INSERT_8, out)
        }
        _ => {
            // The general network: for each output position, `select` over
            // what that position holds for every possible index.
            let mut choices = vec![Scalar::ZERO; arity];
            for (pos, o) in out.iter_mut().enumerate() {
                for (i, c) in choices.iter_mut().enumerate() {
                    *c = match pos.cmp(&i) {
                        std::cmp::Ordering::Less => siblings[pos],
                        std::cmp::Ordering::Equal => element,
                        std::cmp::Ordering::Greater => siblings[pos - 1],
                    };
                }
                *o = select(w, &choices, index);
            }
        }
    }
}

/// The gadget's `select`: the element of `from` at `index` (whose bits the
/// caller allocated), through a network of picks, most significant bit
/// first. `from.len()` must be a power of two and `index` below it.
pub fn select(w: &mut AssignmentWriter<'_>, from: &[Scalar], index: usize) -> Scalar {
    assert!(from.len().is_power_of_two() && index < from.len(), "select {index} of {}", from.len());
    let bits = from.len().trailing_zeros();
    let mut state = from.to_vec();
    let mut half = from.len() / 2;
    for i in (0..bits).rev() {
        let bit = (index >> i) & 1 == 1;
        for j in 0..half {
            let picked = if bit { state[half + j] } else { state[j] };
            w.aux(picked);
            state[j] = picked;
        }
        half /= 2;
    }
    state[0]
}

/// `PoRCircuit` as Filecoin's proofs use it: the root is allocated already
/// and private (FallbackPoSt's and PoRep's inclusion proofs). With
/// `allocate_leaf` the leaf is allocated first (a `Root::Val` leaf, as
/// FallbackPoSt's); then every level (bits, siblings, insert, then
/// `hash(w, children)`, which must write the hash's variables and return
/// it); then the path bits packed into public inputs. Returns the computed
/// root (the gadget's equality with the given root allocates nothing).
pub fn por<'l>(
    w: &mut AssignmentWriter<'_>,
    leaf: Scalar,
    allocate_leaf: bool,
    levels: impl IntoIterator<Item = PathLevel<'l>>,
    mut hash: impl FnMut(&mut AssignmentWriter<'_>, &[Scalar]) -> Scalar,
) -> Scalar {
    if allocate_leaf {
        w.aux(leaf);
    }
    let mut cur = leaf;
    let mut path_bits = Vec::with_capacity(64);
    let mut children = [Scalar::ZERO; 16];
    let mut wide = Vec::new();
    for level in levels {
        let arity = level.arity();
        let bit_count = arity.trailing_zeros();
        for i in 0..bit_count {
            let b = (level.index >> i) & 1 == 1;
            w.bit(b);
            path_bits.push(b);
        }
        for &s in level.siblings {
            w.aux(s);
        }
        let out = if arity <= children.len() {
            &mut children[..arity]
        } else {
            wide.resize(arity, Scalar::ZERO);
            &mut wide[..]
        };
        insert(w, cur, level.index, level.siblings, out);
        cur = hash(w, out);
    }
    pack_into_inputs(w, &path_bits);
    cur
}

/// A condition of a pick: an index bit, or one of the two bits `insert_8`
/// derives from bits 0 and 1.
#[derive(Clone, Copy)]
enum Cond {
    Bit(usize),
    Nor01,
    And01,
}

/// `pick(cond, if_true, if_false)`, operands as value slots: 0 is the
/// inserted element, 1.. the siblings, then each pick's result in order.
type Pick = (Cond, usize, usize);

/// A fixed insert network: its picks in allocation order, then which slots
/// are the output.
struct Network<const P: usize, const N: usize> {
    picks: [Pick; P],
    out: [usize; N],
}

use Cond::{And01, Bit, Nor01};

/// `insert_2`: "binary insert 0" and "binary insert 1".
const INSERT_2: Network<2, 2> = Network { picks: [(Bit(0), 1, 0), (Bit(0), 0, 1)], out: [2, 3] };

/// `insert_4`: p0_x0, p0, p1_x0, p1, p2_x1, p2, p3_x1, p3 (a = 0, b..d = 1..3).
const INSERT_4: Network<8, 4> = Network {
    picks: [(Bit(0), 1, 0), (Bit(1), 1, 4), (Bit(0), 0, 1), (Bit(1), 2, 6), (Bit(0), 3, 0), (Bit(1), 8, 2), (Bit(0), 0, 3), (Bit(1), 10, 3)],
    out: [5, 7, 9, 11],
};

/// `insert_8`: p0_xx0, p0, p1_x00, p1_xx0, p1, p2_x10, p2_xx0, p2, p3_xx0,
/// p3, p4_xx1, p4, p5_x01, p5_xx1, p5, p6_x11, p6_xx1, p6, p7_xx1, p7
/// (a = 0, b..h = 1..7).
const INSERT_8: Network<20, 8> = Network {
    picks: [
        (Nor01, 0, 1),
        (Bit(2), 1, 8),
        (Bit(0), 0, 1),
        (Bit(1), 2, 10),
        (Bit(2), 2, 11),
        (Bit(0), 3, 0),
        (Bit(1), 13, 2),
        (Bit(2), 3, 14),
        (And01, 0, 3),
        (Bit(2), 4, 16),
        (Nor01, 0, 5),
        (Bit(2), 18, 4),
        (Bit(0), 0, 5),
        (Bit(1), 6, 20),
        (Bit(2), 21, 5),
        (Bit(0), 7, 0),
        (Bit(1), 23, 6),
        (Bit(2), 24, 6),
        (And01, 0, 7),
        (Bit(2), 26, 7),
    ],
    out: [9, 12, 15, 17, 19, 22, 25, 27],
};

fn run_picks<const P: usize, const N: usize>(
    w: &mut AssignmentWriter<'_>,
    element: Scalar,
    siblings: &[Scalar],
    bits: [bool; 3],
    net: &Network<P, N>,
    out: &mut [Scalar],
) {
    let mut slots = [Scalar::ZERO; 28];
    slots[0] = element;
    slots[1..N].copy_from_slice(siblings);
    for (k, &(cond, t, f)) in net.picks.iter().enumerate() {
        let c = match cond {
            Bit(i) => bits[i],
            Nor01 => !bits[0] && !bits[1],
            And01 => bits[0] && bits[1],
        };
        let v = if c { slots[t] } else { slots[f] };
        w.aux(v);
        slots[N + k] = v;
    }
    for (o, &s) in out.iter_mut().zip(&net.out) {
        *o = slots[s];
    }
}
