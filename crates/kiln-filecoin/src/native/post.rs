//! FallbackPoSt (WindowPoSt and WinningPoSt), natively.
//!
//! storage-proofs-post's `FallbackPoStCircuit` allocates, per sector (the
//! partition's sectors in order, the last public sector repeated for the
//! padding proofs, as `FallbackPoStCompound::circuit` pairs them):
//! `comm_r_last`, `comm_c`, `comm_r` (aux), `comm_r` again as a public
//! input, the Poseidon (arity 2) of `comm_c || comm_r_last`, then per
//! challenge a `PoRCircuit` with the leaf allocated and the root
//! (`comm_r_last`) private: the leaf, per level of the replica tree its
//! index bits, siblings, insert network and Poseidon, and the path's bits
//! packed into one public input (the challenged leaf's index). With
//! `extend` (kiln's constraint systems) the sectors are synthesized in
//! sub-systems and appended in order, which allocates the same sequence.
//!
//! Sectors have one shape and so do challenges, so the writer's remainder
//! splits evenly: sectors are written in parallel, and each sector's
//! challenges too (WinningPoSt is one sector of many challenges).

use blstrs::Scalar;
use filecoin_hashers::Hasher;
use filecoin_proofs::VanillaProof;
use generic_array::typenum::Unsigned;
use kiln_synth::native::merkle::{por, PathLevel};
use super::{poseidon, poseidon_node};
use kiln_synth::native::AssignmentWriter;
use rayon::prelude::*;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_post::fallback::{PublicSector, SectorProof};

/// Writes the partition's whole assignment: `sectors` are its public
/// sectors (chunk `k` of the request's, as the circuit takes them) and
/// `proof` its vanilla proof (padded to the circuit's sector count).
pub fn write_partition<Tree: 'static + MerkleTreeTrait>(
    w: &mut AssignmentWriter<'_>,
    sectors: &[PublicSector<<Tree::Hasher as Hasher>::Domain>],
    proof: &VanillaProof<Tree>,
) -> Result<(), String> {
    let last = sectors.last().ok_or("a PoSt partition without sectors")?;
    let tree = arities::<Tree>();
    let mut parts = w.split_rest(proof.sectors.len())?;
    parts.par_iter_mut().zip(&proof.sectors).enumerate().try_for_each(|(i, (w, sector))| {
        let comm_r: Scalar = sectors.get(i).unwrap_or(last).comm_r.into();
        write_sector(w, comm_r, sector, tree).map_err(|e| format!("sector {i}: {e}"))?;
        w.finish().map_err(|e| format!("sector {i}: {e}"))
    })
}

/// One sector (see the module doc).
fn write_sector<P: MerkleProofTrait>(w: &mut AssignmentWriter<'_>, comm_r: Scalar, sector: &SectorProof<P>, tree: [usize; 3]) -> Result<(), String> {
    let (comm_c, comm_r_last): (Scalar, Scalar) = (sector.comm_c.into(), sector.comm_r_last.into());
    w.aux(comm_r_last);
    w.aux(comm_c);
    w.aux(comm_r);
    w.input(comm_r);
    poseidon(2)?.hash(w, &[comm_c, comm_r_last]);
    let mut challenges = w.split_rest(sector.inclusion_proofs.len())?;
    challenges.par_iter_mut().zip(&sector.inclusion_proofs).enumerate().try_for_each(|(c, (w, proof))| {
        write_inclusion(w, proof, tree).map_err(|e| format!("challenge {c}: {e}"))?;
        w.finish().map_err(|e| format!("challenge {c}: {e}"))
    })
}

/// One challenge's `PoRCircuit` over the replica tree: base levels of
/// arity `tree[0]`, then one sub-tree level (`tree[1]`) and one top-tree
/// level (`tree[2]`) when the tree has them.
fn write_inclusion<P: MerkleProofTrait>(w: &mut AssignmentWriter<'_>, proof: &P, tree: [usize; 3]) -> Result<(), String> {
    let path = proof.path();
    let upper = tree[1..].iter().filter(|&&a| a > 0).count();
    let base = path.len().checked_sub(upper).ok_or("the path is shorter than the tree's sub and top levels")?;
    let siblings: Vec<Vec<Scalar>> = path.iter().map(|(hashes, _)| hashes.iter().map(|&h| h.into()).collect()).collect();
    let mut levels = Vec::with_capacity(path.len());
    for (k, ((_, index), siblings)) in path.iter().zip(&siblings).enumerate() {
        let arity = match k {
            k if k < base => tree[0],
            k if k == base => tree[1..].iter().copied().find(|&a| a > 0).unwrap_or(0),
            _ => tree[2],
        };
        if siblings.len() + 1 != arity || *index >= arity {
            return Err(format!("level {k} has {} siblings and index {index}; the tree's arity there is {arity}", siblings.len()));
        }
        poseidon(arity)?;
        levels.push(PathLevel { siblings, index: *index });
    }
    por(w, proof.leaf().into(), true, levels, poseidon_node);
    Ok(())
}

/// The tree's base, sub-tree and top-tree arity (0: no such level).
fn arities<Tree: MerkleTreeTrait>() -> [usize; 3] {
    [Tree::Arity::to_usize(), Tree::SubTreeArity::to_usize(), Tree::TopTreeArity::to_usize()]
}
