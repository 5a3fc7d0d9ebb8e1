//! Sparse Merkle trees: a tree over up to 2^31 leaves of which only a few
//! hold values of their own; every other leaf is the default (zero), so
//! every subtree without a materialized leaf is its level's default hash,
//! computed once per level. Building costs one hash per node that has a
//! materialized leaf below it; a proof of any leaf (materialized or not)
//! costs only look-ups.
//!
//! Levels can have different arities, which is what storage-proofs'
//! compound trees are: an oct-tree base, then a sub-tree level (8 base
//! roots) and a top level (2 sub-tree roots). A leaf's index is read
//! mixed-radix from the leaves up, exactly as `MerkleProof::path_index`
//! reads it, and each node is hashed with the hasher's `multi_node` over
//! its children, as `InclusionPath::root` (the verifiers') does.

use std::collections::HashMap;
use std::sync::Arc;

use filecoin_hashers::{Hasher, PoseidonArity};
use generic_array::typenum::Unsigned;
use merkletree::hash::Algorithm;
use rayon::prelude::*;
use storage_proofs_core::merkle::{compound_path_length, MerkleProof, MerkleTreeTrait};

/// The levels of a tree (arity of each, from the leaves up) and the value
/// of an all-default subtree at each height. Shared by every tree of one
/// shape (PoSt makes thousands).
pub(crate) struct TreeShape<H: Hasher> {
    /// (arity, height passed to `multi_node`) of each level of parents, from the leaves up.
    levels: Vec<(usize, usize)>,
    /// `defaults[l]`: a node at height `l` with only default leaves below it (`defaults[0]`: the zero leaf).
    defaults: Vec<H::Domain>,
    leaves: u64,
}

impl<H: Hasher> TreeShape<H> {
    /// A binary tree over `leaves` leaves (tree_d: SHA-256 over the sector's nodes).
    pub(crate) fn binary(leaves: u64) -> Result<Arc<Self>, String> {
        if !leaves.is_power_of_two() || leaves < 2 {
            return Err(format!("a binary tree needs a power of two of at least 2 leaves, not {leaves}"));
        }
        Ok(Self::new((0..leaves.trailing_zeros() as usize).map(|h| (2, h)).collect()))
    }

    /// The shape of storage-proofs' `Tree` (tree_c, tree_r_last) over
    /// `leaves` leaves: base oct-tree levels, then the sub-tree and top
    /// levels when `Tree` has them. The verifier hashes each part of a
    /// path with heights counted from 0 (`InclusionPath::root`); so do we.
    pub(crate) fn of<Tree: MerkleTreeTrait>(leaves: u64) -> Result<Arc<Self>, String> {
        let (base, sub, top) = (Tree::Arity::to_usize(), Tree::SubTreeArity::to_usize(), Tree::TopTreeArity::to_usize());
        let base_leaves = leaves / sub.max(1) as u64 / top.max(1) as u64;
        let mut levels = Vec::new();
        let mut width = 1u64;
        while width < base_leaves {
            levels.push((base, levels.len()));
            width *= base as u64;
        }
        if width != base_leaves || base_leaves * (sub.max(1) * top.max(1)) as u64 != leaves {
            return Err(format!("{leaves} leaves do not fit a tree of arities {base}-{sub}-{top}"));
        }
        levels.extend([sub, top].into_iter().filter(|&a| a > 0).map(|a| (a, 0)));
        let want = compound_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(leaves as usize);
        if levels.len() != want {
            return Err(format!("{leaves} leaves in a {base}-{sub}-{top} tree: {} levels, storage-proofs says {want}", levels.len()));
        }
        Ok(Self::new(levels))
    }

    fn new(levels: Vec<(usize, usize)>) -> Arc<Self> {
        let mut defaults = vec![H::Domain::default()];
        for &(arity, height) in &levels {
            let below = *defaults.last().expect("starts with the leaf");
            defaults.push(hash_children::<H>(&vec![below; arity], height));
        }
        let leaves = levels.iter().map(|&(a, _)| a as u64).product();
        Arc::new(TreeShape { levels, defaults, leaves })
    }

}

/// One node's hash from its children, as storage-proofs' verifiers compute it.
fn hash_children<H: Hasher>(children: &[H::Domain], height: usize) -> H::Domain {
    H::Function::default().multi_node(children, height)
}

/// A tree of `shape` whose leaves are default except the materialized ones.
pub(crate) struct SparseTree<H: Hasher> {
    shape: Arc<TreeShape<H>>,
    /// `nodes[l]`: the nodes at height `l` with a materialized leaf below them, by index in their row.
    nodes: Vec<HashMap<u64, H::Domain>>,
}

impl<H: Hasher> SparseTree<H> {
    /// The tree whose leaf `i` is `value` for each `(i, value)` of `leaves`
    /// and the default everywhere else.
    pub(crate) fn new(shape: Arc<TreeShape<H>>, leaves: impl IntoIterator<Item = (u64, H::Domain)>) -> Result<Self, String> {
        let row: HashMap<u64, H::Domain> = leaves.into_iter().collect();
        if let Some(&i) = row.keys().find(|&&i| i >= shape.leaves) {
            return Err(format!("leaf {i} is outside a tree of {} leaves", shape.leaves));
        }
        let mut nodes = vec![row];
        for (l, &(arity, height)) in shape.levels.iter().enumerate() {
            let below = &nodes[l];
            let mut parents: Vec<u64> = below.keys().map(|i| i / arity as u64).collect();
            parents.sort_unstable();
            parents.dedup();
            let default = shape.defaults[l];
            let row = parents
                .into_par_iter()
                .map(|p| {
                    let children: Vec<H::Domain> =
                        (0..arity as u64).map(|j| below.get(&(p * arity as u64 + j)).copied().unwrap_or(default)).collect();
                    (p, hash_children::<H>(&children, height))
                })
                .collect();
            nodes.push(row);
        }
        Ok(SparseTree { shape, nodes })
    }

    pub(crate) fn root(&self) -> H::Domain {
        self.node(self.shape.levels.len(), 0)
    }

    /// The node at `height` (0: the leaves) and `index` in its row.
    pub(crate) fn node(&self, height: usize, index: u64) -> H::Domain {
        self.nodes[height].get(&index).copied().unwrap_or(self.shape.defaults[height])
    }

    /// The path from leaf `leaf` to the root as storage-proofs'
    /// `MerkleProof::from_parts` takes it: per level, the other children
    /// of the node's parent, in order, and the node's place among them.
    fn path(&self, leaf: u64) -> Vec<(Vec<H::Domain>, usize)> {
        let mut index = leaf;
        self.shape
            .levels
            .iter()
            .enumerate()
            .map(|(l, &(arity, _))| {
                let arity = arity as u64;
                let (parent, place) = (index / arity, index % arity);
                let siblings = (0..arity).filter(|&j| j != place).map(|j| self.node(l, parent * arity + j)).collect();
                index = parent;
                (siblings, place as usize)
            })
            .collect()
    }

    /// storage-proofs' Merkle proof of leaf `leaf` for a tree of arities
    /// `A` (base), `B` (sub-tree, 0 if none), `C` (top, 0 if none), which
    /// must be this tree's shape.
    pub(crate) fn proof<A: PoseidonArity, B: PoseidonArity, C: PoseidonArity>(&self, leaf: u64) -> MerkleProof<H, A, B, C> {
        debug_assert_eq!(self.shape.levels.len(), compound_path_length::<A, B, C>(self.shape.leaves as usize), "proof arities differ from the tree's shape");
        MerkleProof::from_parts(self.node(0, leaf), self.root(), self.path(leaf))
    }
}

#[cfg(test)]
mod tests {
    use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
    use filecoin_hashers::sha256::Sha256Hasher;
    use filecoin_hashers::Domain;
    use filecoin_proofs::{SectorShape2KiB, SectorShape32GiB, SectorShape32KiB};
    use generic_array::typenum::{U0, U2, U8};
    use merkletree::store::VecStore;
    use rand::SeedableRng;
    use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeWrapper};

    use super::*;

    type Tree32KiB = SectorShape32KiB;

    /// A sparse tree equals the full tree storage-proofs builds over the
    /// same leaves (the default ones spelled out), root and proofs alike,
    /// for a compound shape (8-8-2: base, sub-tree and top levels).
    #[test]
    fn a_sparse_tree_is_the_full_tree_over_the_same_leaves() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let leaves = 1024u64; // 32 KiB of 32-byte nodes: 8^3 * 8 * 2... as filecoin-proofs shapes it.
        let shape = TreeShape::<PoseidonHasher>::of::<Tree32KiB>(leaves).unwrap();
        let materialized: Vec<(u64, PoseidonDomain)> = [0u64, 5, 6, 511, 512, 1000].iter().map(|&i| (i, PoseidonDomain::random(&mut rng))).collect();
        let sparse = SparseTree::new(shape, materialized.clone()).unwrap();
        let mut all = vec![PoseidonDomain::default(); leaves as usize];
        for &(i, v) in &materialized {
            all[i as usize] = v;
        }
        // storage-proofs' compound tree: 16 base trees of 64 leaves, under 8-ary sub-trees and a binary top.
        type Base = MerkleTreeWrapper<PoseidonHasher, VecStore<PoseidonDomain>, U8, U0, U0>;
        type Sub = MerkleTreeWrapper<PoseidonHasher, VecStore<PoseidonDomain>, U8, U8, U0>;
        type Top = MerkleTreeWrapper<PoseidonHasher, VecStore<PoseidonDomain>, U8, U8, U2>;
        let bases: Vec<Base> = all.chunks(64).map(|c| Base::new(c.iter().copied()).unwrap()).collect();
        let mut bases = bases.into_iter();
        let subs: Vec<Sub> = (0..2).map(|_| Sub::from_trees(bases.by_ref().take(8).collect()).unwrap()).collect();
        let full = Top::from_sub_trees(subs).unwrap();
        assert_eq!(sparse.root(), full.root());
        for i in [0u64, 1, 5, 6, 63, 64, 511, 512, 777, 1000, 1023] {
            let theirs = full.gen_proof(i as usize).unwrap();
            let ours = sparse.proof::<U8, U8, U2>(i);
            assert!(ours.verify() && ours.validate(i as usize), "leaf {i}");
            assert_eq!((ours.leaf(), ours.root(), ours.path()), (theirs.leaf(), theirs.root(), theirs.path()), "leaf {i}");
        }
    }

    /// The zero tree_d of a sector is its data commitment of all zeros,
    /// which filecoin-proofs computes by streaming zeros (2 KiB here).
    #[test]
    fn the_empty_binary_tree_is_the_zero_data_commitment() {
        let empty = SparseTree::new(TreeShape::<Sha256Hasher>::binary(64).unwrap(), []).unwrap();
        let comm_d = filecoin_proofs::compute_comm_d(filecoin_proofs::SectorSize(2048), &[]).unwrap();
        assert_eq!(empty.root().into_bytes(), comm_d.to_vec());
        let p = empty.proof::<U2, U0, U0>(37);
        assert!(p.verify() && p.validate(37));
    }

    #[test]
    fn shapes_match_filecoin_proofs_trees_and_bad_ones_are_refused() {
        assert_eq!(TreeShape::<PoseidonHasher>::of::<SectorShape2KiB>(64).unwrap().levels.len(), 2);
        assert_eq!(TreeShape::<PoseidonHasher>::of::<SectorShape32GiB>(1 << 30).unwrap().levels.len(), 10);
        assert!(TreeShape::<PoseidonHasher>::of::<SectorShape2KiB>(128).is_err());
        assert!(TreeShape::<Sha256Hasher>::binary(96).is_err());
        let shape = TreeShape::<PoseidonHasher>::of::<SectorShape2KiB>(64).unwrap();
        let refused = SparseTree::new(shape, [(64, PoseidonDomain::default())]).err().expect("leaf 64 of 64 is refused");
        assert!(refused.contains("leaf 64 is outside"), "{refused}");
    }
}
