//! kiln-synth's native Merkle pieces against storage-proofs-core's gadgets
//! (which kiln-synth does not depend on): `insert`, `select` and the PoR
//! inclusion path, on random values and random path positions, over the
//! replica trees' shapes. Each gadget runs in kiln's recording constraint
//! system (its constraints must hold); the native routine must write the
//! same public inputs and aux values, bit for bit.

use std::marker::PhantomData;

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar;
use ff::Field;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_4, POSEIDON_CONSTANTS_8};
use generic_array::typenum::{U0, U2, U4, U8};
use kiln_synth::native::merkle::{insert, por, select, PathLevel};
use kiln_synth::native::poseidon::Poseidon;
use kiln_synth::native::AssignmentWriter;
use kiln_synth::{synthesize, AssignmentBuffers};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use storage_proofs_core::gadgets::insertion;
use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
use storage_proofs_core::gadgets::variables::Root;
use storage_proofs_core::merkle::{DiskTree, MerkleTreeTrait};

/// The circuit's public inputs (after ONE) and aux, recorded; its
/// constraints must hold.
fn record(circuit: impl Circuit<Scalar>) -> (Vec<Scalar>, Vec<Scalar>) {
    let asg = synthesize(circuit, AssignmentBuffers::heap()).unwrap();
    asg.check_satisfied().unwrap();
    (asg.input[1..].to_vec(), asg.aux().to_vec())
}

/// What `write` writes into areas of the recorded sizes (all of them).
fn native(sizes: (usize, usize), write: impl FnOnce(&mut AssignmentWriter<'_>)) -> (Vec<Scalar>, Vec<Scalar>) {
    AssignmentWriter::fill_new(sizes.0, sizes.1, write).unwrap()
}

fn random(r: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
    (0..n).map(|_| Scalar::random(&mut *r)).collect()
}

fn alloc_nums<CS: ConstraintSystem<Scalar>>(cs: &mut CS, values: &[Scalar]) -> Result<Vec<AllocatedNum<Scalar>>, SynthesisError> {
    values.iter().map(|&v| AllocatedNum::alloc(cs.namespace(|| "v"), || Ok(v))).collect()
}

fn alloc_bits<CS: ConstraintSystem<Scalar>>(cs: &mut CS, index: usize, count: u32) -> Result<Vec<Boolean>, SynthesisError> {
    (0..count).map(|i| AllocatedBit::alloc(cs.namespace(|| "bit"), Some((index >> i) & 1 == 1)).map(Boolean::from)).collect()
}

/// `insertion::insert` (or, with `select_only`, `insertion::select`) of
/// allocated values at an allocated index.
struct Insertion {
    element: Scalar,
    siblings: Vec<Scalar>,
    index: usize,
    select_only: bool,
}

impl Circuit<Scalar> for Insertion {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let arity = self.siblings.len() + 1;
        let element = AllocatedNum::alloc(cs.namespace(|| "element"), || Ok(self.element))?;
        let bits = alloc_bits(cs, self.index, arity.trailing_zeros())?;
        let siblings = alloc_nums(cs, &self.siblings)?;
        if self.select_only {
            let from: Vec<_> = std::iter::once(element).chain(siblings).collect();
            insertion::select(cs.namespace(|| "select"), &from, &bits)?;
        } else {
            insertion::insert(&mut cs.namespace(|| "insert"), &element, &bits, &siblings)?;
        }
        Ok(())
    }
}

fn check_insertion(seed: u64, arity: usize, select_only: bool) {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let (element, siblings, index) = (Scalar::random(&mut r), random(&mut r, arity - 1), r.gen_range(0..arity));
    let want = record(Insertion { element, siblings: siblings.clone(), index, select_only });
    let got = native((0, want.1.len()), |w| {
        w.aux(element);
        for i in 0..arity.trailing_zeros() {
            w.bit((index >> i) & 1 == 1);
        }
        for &s in &siblings {
            w.aux(s);
        }
        if select_only {
            let from: Vec<Scalar> = std::iter::once(element).chain(siblings.iter().copied()).collect();
            assert_eq!(select(w, &from, index), from[index]);
        } else {
            let mut out = vec![Scalar::ZERO; arity];
            insert(w, element, index, &siblings, &mut out);
            let mut expected = siblings.clone();
            expected.insert(index, element);
            assert_eq!(out, expected);
        }
    });
    assert!(got == want, "arity {arity}, index {index}, select {select_only}: the variables differ from the gadget's");
}

/// Plain Poseidon of a tree node's children (filecoin-hashers' constants).
fn node_hash(children: &[Scalar]) -> Scalar {
    match children.len() {
        2 => neptune::Poseidon::new_with_preimage(children, &*POSEIDON_CONSTANTS_2).hash(),
        4 => neptune::Poseidon::new_with_preimage(children, &*POSEIDON_CONSTANTS_4).hash(),
        8 => neptune::Poseidon::new_with_preimage(children, &*POSEIDON_CONSTANTS_8).hash(),
        n => panic!("no tree of arity {n}"),
    }
}

/// `PoRCircuit` as FallbackPoSt (a leaf value) or PoRep (an allocated
/// leaf) uses it: private, its root allocated before it.
struct Por<Tree> {
    leaf: Scalar,
    leaf_allocated: bool,
    levels: Vec<(Vec<Scalar>, usize)>,
    root: Scalar,
    _tree: PhantomData<Tree>,
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Scalar> for Por<Tree> {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let root = AllocatedNum::alloc(cs.namespace(|| "root"), || Ok(self.root))?;
        let leaf = match self.leaf_allocated {
            true => Root::Var(AllocatedNum::alloc(cs.namespace(|| "leaf"), || Ok(self.leaf))?),
            false => Root::Val(Some(self.leaf)),
        };
        let opts: Vec<(Vec<Option<Scalar>>, Option<usize>)> =
            self.levels.iter().map(|(s, i)| (s.iter().copied().map(Some).collect(), Some(*i))).collect();
        let path: AuthPath<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity> = opts.into();
        PoRCircuit::<Tree>::synthesize(cs.namespace(|| "por"), leaf, path, Root::Var(root), true)
    }
}

fn check_por<Tree: 'static + MerkleTreeTrait>(seed: u64, base_levels: usize, leaf_allocated: bool) {
    use generic_array::typenum::Unsigned;
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    let arities: Vec<usize> = std::iter::repeat_n(Tree::Arity::to_usize(), base_levels)
        .chain([Tree::SubTreeArity::to_usize(), Tree::TopTreeArity::to_usize()].into_iter().filter(|&a| a > 0))
        .collect();
    let leaf = Scalar::random(&mut r);
    let levels: Vec<(Vec<Scalar>, usize)> = arities.iter().map(|&a| (random(&mut r, a - 1), r.gen_range(0..a))).collect();
    let root = levels.iter().fold(leaf, |cur, (siblings, index)| {
        let mut children = siblings.clone();
        children.insert(*index, cur);
        node_hash(&children)
    });
    let want = record(Por::<Tree> { leaf, leaf_allocated, levels: levels.clone(), root, _tree: PhantomData });
    let got = native((want.0.len(), want.1.len()), |w| {
        w.aux(root);
        if leaf_allocated {
            w.aux(leaf);
        }
        let path = levels.iter().map(|(siblings, index)| PathLevel { siblings, index: *index });
        let computed = por(w, leaf, !leaf_allocated, path, |w, children| Poseidon::filecoin(children.len()).unwrap().hash(w, children));
        assert_eq!(computed, root);
    });
    assert!(got == want, "{} with {base_levels} base levels: the variables differ from the gadget's", Tree::display());
    // The one public input is the challenged leaf's index.
    let mut challenge = 0u64;
    let mut shift = 0;
    for ((_, index), a) in levels.iter().zip(&arities) {
        challenge |= (*index as u64) << shift;
        shift += a.trailing_zeros();
    }
    assert_eq!(want.0, vec![Scalar::from(challenge)]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn insert_and_select_allocate_what_the_gadgets_allocate(seed in any::<u64>()) {
        for arity in [2, 4, 8, 16] {
            check_insertion(seed, arity, false);
            check_insertion(seed, arity, true);
        }
    }

    #[test]
    fn inclusion_paths_allocate_what_porcircuit_allocates(seed in any::<u64>(), base_levels in 1usize..6, leaf_allocated in any::<bool>()) {
        // The replica trees' shapes: 2 KiB .. 512 MiB (8, 0, 0), 4 KiB (8, 2, 0),
        // 16 KiB and 32 GiB (8, 8, 0), 32 KiB and 64 GiB (8, 8, 2); and binary
        // and quad trees.
        check_por::<DiskTree<PoseidonHasher, U8, U0, U0>>(seed, base_levels, leaf_allocated);
        check_por::<DiskTree<PoseidonHasher, U8, U2, U0>>(seed, base_levels, leaf_allocated);
        check_por::<DiskTree<PoseidonHasher, U8, U8, U0>>(seed, base_levels, leaf_allocated);
        check_por::<DiskTree<PoseidonHasher, U8, U8, U2>>(seed, base_levels, leaf_allocated);
        check_por::<DiskTree<PoseidonHasher, U2, U0, U0>>(seed, base_levels, leaf_allocated);
        check_por::<DiskTree<PoseidonHasher, U4, U2, U0>>(seed, base_levels, leaf_allocated);
    }
}
