//! Poseidon, natively: the values neptune's (legacy) Poseidon circuit
//! allocates, in its order, computed without building a linear combination.
//!
//! neptune's `circuit::poseidon_hash` (what filecoin-hashers' Poseidon
//! gadgets and storage-proofs' column hashes call) runs the optimized
//! permutation: compressed round constants, one pre-sparse and then sparse
//! matrices over the partial rounds. Its state is a vector of elements
//! that are either allocated variables or linear combinations of them; an
//! S-box allocates its input if it is a combination, then `l^2`, `l^4` and
//! `l^5` (+ round key). Per hash of arity `t - 1` (width `t`), in order:
//! - first full round: for each preimage element (the domain tag's S-box is
//!   a constant), `(l + k)^2`, `l^4`, `l^4 (l + k) + k'`: 3 variables;
//! - every other full round, for each of the `t` elements, and every
//!   partial round, for element 0: the input, `l^2`, `l^4`, `l^5 (+ k)`: 4;
//! - the output, element 1, allocated at the end: 1.
//!
//! The gadget spends most of its time merging and scaling those linear
//! combinations (heap vectors); here the state is `t` field elements on the
//! stack and a round is a handful of multiplications.

use std::sync::OnceLock;

use blstrs::Scalar;
use ff::Field;
use generic_array::typenum::{U11, U2, U4, U8};
use neptune::poseidon::{Arity, PoseidonConstants};

use super::AssignmentWriter;

/// The widest state handled (arity 36, neptune's widest Filecoin arity).
const MAX_WIDTH: usize = 37;

/// One Poseidon instance (arity and constants), laid out for the native
/// permutation. Build it once per constants set: [`Poseidon::filecoin`]
/// for filecoin-hashers' own, [`Poseidon::new`] for any other neptune
/// constants (e.g. SnapDeals' randomness hash).
#[derive(Clone, Debug)]
pub struct Poseidon {
    width: usize,
    domain_tag: Scalar,
    half_full_rounds: usize,
    partial_rounds: usize,
    round_constants: Vec<Scalar>,
    /// The MDS matrix, column by column: `mds[j * width + i] = M[i][j]`.
    mds: Vec<Scalar>,
    /// The pre-sparse matrix, the same layout.
    pre_sparse: Vec<Scalar>,
    /// Per partial round: `w_hat` (width values), then `v_rest` (width - 1).
    sparse: Vec<Scalar>,
}

impl Poseidon {
    /// The native form of neptune's `constants`.
    ///
    /// # Panics
    /// If the width exceeds 37 (arity 36).
    pub fn new<A: Arity<Scalar>>(constants: &PoseidonConstants<Scalar, A>) -> Self {
        let width = constants.width();
        assert!(width <= MAX_WIDTH, "Poseidon width {width} is wider than the {MAX_WIDTH} handled");
        let by_column = |m: &Vec<Vec<Scalar>>| (0..width).flat_map(|j| (0..width).map(move |i| m[i][j])).collect();
        let sparse = constants.sparse_matrixes.iter().flat_map(|s| s.w_hat.iter().chain(&s.v_rest).copied()).collect();
        Poseidon {
            width,
            domain_tag: constants.domain_tag,
            half_full_rounds: constants.half_full_rounds,
            partial_rounds: constants.partial_rounds,
            round_constants: constants.compressed_round_constants.clone(),
            mds: by_column(&constants.mds_matrices.m),
            pre_sparse: by_column(&constants.pre_sparse_matrix),
            sparse,
        }
    }

    /// filecoin-hashers' Poseidon of `arity` (2, 4, 8 or 11): its
    /// `POSEIDON_CONSTANTS_<arity>`, neptune's default constants for Merkle
    /// tree hashing, as `hash2_circuit`, `hash_multi_leaf_circuit` and
    /// PoRep's column hashes use them. `None` for other arities.
    pub fn filecoin(arity: usize) -> Option<&'static Poseidon> {
        static P2: OnceLock<Poseidon> = OnceLock::new();
        static P4: OnceLock<Poseidon> = OnceLock::new();
        static P8: OnceLock<Poseidon> = OnceLock::new();
        static P11: OnceLock<Poseidon> = OnceLock::new();
        Some(match arity {
            2 => P2.get_or_init(|| Poseidon::new(&PoseidonConstants::<Scalar, U2>::new())),
            4 => P4.get_or_init(|| Poseidon::new(&PoseidonConstants::<Scalar, U4>::new())),
            8 => P8.get_or_init(|| Poseidon::new(&PoseidonConstants::<Scalar, U8>::new())),
            11 => P11.get_or_init(|| Poseidon::new(&PoseidonConstants::<Scalar, U11>::new())),
            _ => return None,
        })
    }

    /// Elements hashed at once.
    pub fn arity(&self) -> usize {
        self.width - 1
    }

    /// Aux variables one hash allocates.
    pub fn aux_per_hash(&self) -> usize {
        let full_after_first = 2 * self.half_full_rounds - 1;
        3 * self.arity() + 4 * (full_after_first * self.width + self.partial_rounds) + 1
    }

    /// Hashes `preimage` (exactly [`arity`](Self::arity) elements), writing
    /// every variable the gadget allocates; returns the hash.
    ///
    /// # Panics
    /// If `preimage` is not `arity` elements long (a caller bug: the
    /// gadget asserts the same).
    pub fn hash(&self, w: &mut AssignmentWriter<'_>, preimage: &[Scalar]) -> Scalar {
        let t = self.width;
        assert_eq!(preimage.len(), t - 1, "a Poseidon of arity {} hashes that many elements", t - 1);
        let mut state = [Scalar::ZERO; MAX_WIDTH];
        let state = &mut state[..t];
        state[0] = self.domain_tag;
        state[1..].copy_from_slice(preimage);
        let keys = &self.round_constants;

        // First full round: keys before and after every S-box. The tag's
        // S-box is a constant (nothing allocated); the preimage elements
        // are allocated already.
        let (pre, post) = (&keys[..t], &keys[t..2 * t]);
        let mut k = 2 * t;
        state[0] = pow5(state[0] + pre[0]) + post[0];
        for i in 1..t {
            let l = state[i] + pre[i];
            let l2 = l.square();
            let l4 = l2.square();
            let l5 = l4 * l + post[i];
            w.aux(l2);
            w.aux(l4);
            w.aux(l5);
            state[i] = l5;
        }
        let mut round = 0;
        self.mix(state, round);
        round += 1;

        // The other full rounds of the first half: every element.
        for _ in 1..self.half_full_rounds {
            for s in state.iter_mut() {
                *s = sbox(w, *s, Some(keys[k]));
                k += 1;
            }
            self.mix(state, round);
            round += 1;
        }
        // Partial rounds: element 0 only.
        for _ in 0..self.partial_rounds {
            state[0] = sbox(w, state[0], Some(keys[k]));
            k += 1;
            self.mix(state, round);
            round += 1;
        }
        // The second half; the last round adds no key.
        for r in 0..self.half_full_rounds {
            let last = r + 1 == self.half_full_rounds;
            for s in state.iter_mut() {
                let key = (!last).then(|| keys[k]);
                k += usize::from(!last);
                *s = sbox(w, *s, key);
            }
            self.mix(state, round);
            round += 1;
        }
        w.aux(state[1]);
        state[1]
    }

    /// The linear layer after round `round`: the pre-sparse matrix after
    /// the first half's last full round, sparse ones over the partial
    /// rounds, the MDS matrix otherwise (neptune's `product_mds`).
    fn mix(&self, state: &mut [Scalar], round: usize) {
        let t = self.width;
        let sparse_from = self.half_full_rounds - 1;
        if round == sparse_from {
            dense_product(state, &self.pre_sparse);
        } else if round > sparse_from && round < self.half_full_rounds + self.partial_rounds {
            let m = &self.sparse[(round - sparse_from - 1) * (2 * t - 1)..][..2 * t - 1];
            let (w_hat, v_rest) = m.split_at(t);
            let first = state[0];
            state[0] = dot(state, w_hat);
            for (s, v) in state[1..].iter_mut().zip(v_rest) {
                *s += first * v;
            }
        } else {
            dense_product(state, &self.mds);
        }
    }
}

/// `state = state . M`, `m` column by column.
#[inline]
fn dense_product(state: &mut [Scalar], m: &[Scalar]) {
    let t = state.len();
    let mut out = [Scalar::ZERO; MAX_WIDTH];
    for (j, o) in out[..t].iter_mut().enumerate() {
        *o = dot(state, &m[j * t..(j + 1) * t]);
    }
    state.copy_from_slice(&out[..t]);
}

#[inline]
fn dot(a: &[Scalar], b: &[Scalar]) -> Scalar {
    a.iter().zip(b).fold(Scalar::ZERO, |acc, (x, y)| acc + *x * y)
}

#[inline]
fn pow5(l: Scalar) -> Scalar {
    l.square().square() * l
}

/// An S-box on a state element that is a linear combination: its value is
/// allocated, then `l^2`, `l^4` and `l^5 + key`.
#[inline]
fn sbox(w: &mut AssignmentWriter<'_>, l: Scalar, key: Option<Scalar>) -> Scalar {
    let l2 = l.square();
    let l4 = l2.square();
    let mut l5 = l4 * l;
    if let Some(k) = key {
        l5 += k;
    }
    w.aux(l);
    w.aux(l2);
    w.aux(l4);
    w.aux(l5);
    l5
}
