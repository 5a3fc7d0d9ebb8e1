//! SnapDeals' native witness: an `EmptySectorUpdateCircuit`'s assignment
//! computed from the values the circuit is built from, in the order its
//! `synthesize` allocates it, the challenges in parallel.
//!
//! The prefix: k_and_h_select (aux, input, its partition and h-select
//! bits), the partition packed, comm_r_old / comm_d_new / comm_r_new (aux,
//! input), phi = Poseidon(comm_d_new, comm_r_old), comm_c, root_r_old,
//! root_r_new, the apex leaves and the partition path's siblings,
//! Poseidon(comm_c, root_r_*) twice, the apex tree (SHA-256 nodes) and its
//! path to comm_d_new, then every challenge's bits (Poseidon digests of
//! comm_r_new and a digest index, decomposed). Then per challenge, all of
//! one size: rho from the challenge's high bits, the leaves and
//! `leaf_r_new = leaf_r_old + leaf_d_new * rho`, the tree_r_old and
//! tree_r_new paths (Poseidon), the apex leaf selected by the challenge's
//! middle bits and the tree_d path below it (SHA-256).
//!
//! The Merkle paths here are `por_no_challenge_input`: their position bits
//! are the challenge's (already allocated) and their siblings allocated
//! beforehand, so a level is the insert and the hash alone.

use std::sync::OnceLock;

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_proofs::TreeRHasher;
use kiln_synth::native::bits::{pack_bits, to_bits_le, PACK_BITS};
use kiln_synth::native::merkle::{insert, select};
use kiln_synth::native::poseidon::Poseidon;
use kiln_synth::native::AssignmentWriter;
use rayon::prelude::*;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::circuit::ChallengeProof;
use storage_proofs_update::constants::{hs, POSEIDON_CONSTANTS_GEN_RANDOMNESS};
use storage_proofs_update::EmptySectorUpdateCircuit;

use super::tree_d;
use super::{poseidon, poseidon_node};

/// Poseidon with the constants SnapDeals derives its randomness with (phi,
/// the challenge digests, rho).
fn gen_randomness() -> &'static Poseidon {
    static P: OnceLock<Poseidon> = OnceLock::new();
    P.get_or_init(|| Poseidon::new(&*POSEIDON_CONSTANTS_GEN_RANDOMNESS))
}

fn value(v: Option<Fr>, what: &str) -> Result<Fr, String> {
    v.ok_or_else(|| format!("the circuit has no value for {what}"))
}

/// Writes one partition's inputs (after ONE) and aux assignment.
pub(crate) fn write_partition<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    w: &mut AssignmentWriter<'_>,
    circuit: &EmptySectorUpdateCircuit<Tree>,
) -> Result<(), String> {
    let p = &circuit.pub_params;
    let (inputs, private) = (&circuit.pub_inputs, &circuit.priv_inputs);
    let first = private.challenge_proofs.first().ok_or("no challenge proofs")?;
    if private.challenge_proofs.len() != p.challenge_count || private.apex_leafs.len() != p.apex_leaf_count {
        return Err(format!(
            "{} challenge proofs and {} apex leaves, the sector size has {} and {}",
            private.challenge_proofs.len(),
            private.apex_leafs.len(),
            p.challenge_count,
            p.apex_leaf_count
        ));
    }
    let poseidon2 = poseidon(2)?;
    let hs = hs(p.sector_nodes);

    let k_and_h_select = value(inputs.k_and_h_select, "k_and_h_select")?;
    w.aux(k_and_h_select);
    w.input(k_and_h_select);
    let repr = k_and_h_select.to_repr();
    let selector_bits: Vec<bool> = (0..p.partition_bit_len + hs.len()).map(|i| (repr[i / 8] >> (i % 8)) & 1 == 1).collect();
    for &b in &selector_bits {
        w.bit(b);
    }
    let (partition_bits, h_select_bits) = selector_bits.split_at(p.partition_bit_len);
    let partition = pack_bits(w, partition_bits);

    let mut public = |v: Option<Fr>, what: &str| -> Result<Fr, String> {
        let v = value(v, what)?;
        w.aux(v);
        w.input(v);
        Ok(v)
    };
    let comm_r_old = public(inputs.comm_r_old, "comm_r_old")?;
    let comm_d_new = public(inputs.comm_d_new, "comm_d_new")?;
    let comm_r_new = public(inputs.comm_r_new, "comm_r_new")?;
    let phi = gen_randomness().hash(w, &[comm_d_new, comm_r_old]);

    let comm_c = value(private.comm_c, "comm_c")?;
    let root_r_old = value(private.root_r_old, "root_r_old")?;
    let root_r_new = value(private.root_r_new, "root_r_new")?;
    for v in [comm_c, root_r_old, root_r_new] {
        w.aux(v);
    }
    let apex_leafs = private.apex_leafs.iter().map(|v| value(*v, "an apex leaf")).collect::<Result<Vec<_>, _>>()?;
    for &v in &apex_leafs {
        w.aux(v);
    }
    let tree_d_top = first.path_d_new.get(p.challenge_bit_len - p.partition_bit_len..).ok_or("the tree_d path is too short")?;
    let partition_path = binary_siblings(tree_d_top)?;
    for &v in &partition_path {
        w.aux(v);
    }
    poseidon2.hash(w, &[comm_c, root_r_old]);
    poseidon2.hash(w, &[comm_c, root_r_new]);

    // The apex tree over this partition's apex leaves, then its root's path to comm_d_new.
    let mut row = apex_leafs.clone();
    while row.len() > 1 {
        row = row.chunks(2).map(|pair| tree_d::hash_node(w, pair)).collect();
    }
    let partition_path: Vec<Vec<Fr>> = partition_path.into_iter().map(|s| vec![s]).collect();
    por_no_challenge_input(w, partition_bits, row[0], &partition_path, tree_d::hash_node)?;

    let challenge_bits = gen_challenge_bits(w, comm_r_new, partition, p.challenge_count, p.challenge_bit_len - p.partition_bit_len)?;

    let shared = Shared { partition_bits, h_select_bits, hs: &hs, phi, apex_leafs: &apex_leafs, apex_leaf_bit_len: p.apex_leaf_bit_len };
    let parts = w.split_rest(p.challenge_count)?;
    parts.into_par_iter().zip(private.challenge_proofs.par_iter().zip(challenge_bits)).enumerate().try_for_each(|(k, (mut part, (proof, bits)))| {
        shared.write_challenge(&mut part, proof, bits).and_then(|()| part.finish()).map_err(|e| format!("challenge {k}: {e}"))
    })
}

/// `gen_challenge_bits`: per digest, its index (`k * digests + j`), the
/// Poseidon of comm_r_new and the index, its 255 bits; each challenge
/// takes the next `bits_per_challenge` of them (at most 254 / that per digest).
fn gen_challenge_bits(w: &mut AssignmentWriter<'_>, comm_r_new: Fr, partition: Fr, challenges: usize, bits_per_challenge: usize) -> Result<Vec<Vec<bool>>, String> {
    let per_digest = PACK_BITS / bits_per_challenge.max(1);
    if per_digest == 0 || bits_per_challenge == 0 {
        return Err(format!("{bits_per_challenge} bits per challenge"));
    }
    let digests = challenges.div_ceil(per_digest);
    let mut out = Vec::with_capacity(challenges);
    for j in 0..digests {
        let index = partition * Fr::from(digests as u64) + Fr::from(j as u64);
        w.aux(index);
        let digest = gen_randomness().hash(w, &[comm_r_new, index]);
        let bits = to_bits_le(w, digest);
        let take = if j == digests - 1 { challenges - out.len() } else { per_digest };
        out.extend(bits.chunks(bits_per_challenge).take(take).map(<[bool]>::to_vec));
    }
    Ok(out)
}

/// What every challenge's segment reads from the prefix.
struct Shared<'a> {
    partition_bits: &'a [bool],
    h_select_bits: &'a [bool],
    hs: &'a [usize],
    phi: Fr,
    apex_leafs: &'a [Fr],
    apex_leaf_bit_len: usize,
}

impl Shared<'_> {
    fn write_challenge<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
        &self,
        w: &mut AssignmentWriter<'_>,
        proof: &ChallengeProof<Tree>,
        generated: Vec<bool>,
    ) -> Result<(), String> {
        let mut c_bits = generated;
        c_bits.extend_from_slice(self.partition_bits);
        let bit_len = c_bits.len();

        // get_challenge_high_bits: every allowed h's high bits packed and
        // kept or zeroed by its select bit, then their sum.
        let mut c_high_selected = Fr::ZERO;
        for (&h, &selected) in self.hs.iter().zip(self.h_select_bits) {
            let high = c_bits.get(bit_len.checked_sub(h).ok_or("h exceeds the challenge's bits")?..).ok_or("h exceeds the challenge's bits")?;
            let c_high = pack_bits(w, high);
            let kept = if selected { c_high } else { Fr::ZERO };
            w.aux(kept);
            c_high_selected += kept;
        }
        w.aux(c_high_selected);
        let rho = gen_randomness().hash(w, &[self.phi, c_high_selected]);

        let leaf_r_old = value(proof.leaf_r_old, "leaf_r_old")?;
        let leaf_d_new = value(proof.leaf_d_new, "leaf_d_new")?;
        w.aux(leaf_r_old);
        w.aux(leaf_d_new);
        let scaled = leaf_d_new * rho;
        w.aux(scaled);
        let leaf_r_new = leaf_r_old + scaled;
        w.aux(leaf_r_new);

        for (leaf, path) in [(leaf_r_old, &proof.path_r_old), (leaf_r_new, &proof.path_r_new)] {
            let path = path.iter().map(|s| s.iter().map(|v| value(*v, "a tree_r sibling")).collect()).collect::<Result<Vec<Vec<Fr>>, _>>()?;
            for &v in path.iter().flatten() {
                w.aux(v);
            }
            for siblings in &path {
                poseidon(siblings.len() + 1)?;
            }
            por_no_challenge_input(w, &c_bits, leaf, &path, poseidon_node)?;
        }

        let to_apex = bit_len - self.partition_bits.len() - self.apex_leaf_bit_len;
        let apex_index = c_bits[to_apex..to_apex + self.apex_leaf_bit_len].iter().rev().fold(0, |acc, &b| acc << 1 | usize::from(b));
        let apex_leaf = select(w, self.apex_leafs, apex_index);
        let below_apex = proof.path_d_new.get(..to_apex).ok_or("the tree_d path is too short")?;
        let path: Vec<Vec<Fr>> = binary_siblings(below_apex)?.into_iter().map(|s| vec![s]).collect();
        for s in &path {
            w.aux(s[0]);
        }
        let root = por_no_challenge_input(w, &c_bits[..to_apex], leaf_d_new, &path, tree_d::hash_node)?;
        if root != apex_leaf {
            return Err("the tree_d path does not lead to the selected apex leaf".into());
        }
        Ok(())
    }
}

/// A tree_d path's siblings (one per level).
fn binary_siblings(path: &[Vec<Option<Fr>>]) -> Result<Vec<Fr>, String> {
    path.iter()
        .map(|s| match s[..] {
            [v] => value(v, "a tree_d sibling"),
            _ => Err(format!("a tree_d path level has {} siblings, not 1", s.len())),
        })
        .collect()
}

/// `por_no_challenge_input`: per level, the node inserted among its
/// (already allocated) siblings at the position the next bits of `bits`
/// give, then hashed. Every bit must be used. Returns the root.
fn por_no_challenge_input(
    w: &mut AssignmentWriter<'_>,
    bits: &[bool],
    leaf: Fr,
    path: &[Vec<Fr>],
    mut hash: impl FnMut(&mut AssignmentWriter<'_>, &[Fr]) -> Fr,
) -> Result<Fr, String> {
    let mut cur = leaf;
    let mut bits = bits.iter();
    let mut children = Vec::new();
    for siblings in path {
        let arity = siblings.len() + 1;
        if !arity.is_power_of_two() || arity < 2 {
            return Err(format!("a path level of arity {arity}"));
        }
        let mut index = 0;
        for i in 0..arity.trailing_zeros() {
            index |= usize::from(*bits.next().ok_or("fewer challenge bits than the path's levels need")?) << i;
        }
        children.resize(arity, Fr::ZERO);
        insert(w, cur, index, siblings, &mut children);
        cur = hash(w, &children);
    }
    if bits.next().is_some() {
        return Err("more challenge bits than the path's levels use".into());
    }
    Ok(cur)
}
