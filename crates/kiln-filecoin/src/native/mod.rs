//! Native witness generators of the Filecoin circuits: the aux and input
//! assignment computed straight from the vanilla proofs, in exactly the
//! order the circuits' gadgets allocate it, from kiln-synth's native pieces
//! (`kiln_synth::native`). Each kind's `JobSource` hands its generator to
//! `SynthContext::synthesize_native`, with the gadget path as the fallback:
//! every native witness is checked against the compiled R1CS first. The
//! independent parts of a partition (PoRep's and SnapDeals' challenges,
//! PoSt's sectors) are written in parallel.

pub(crate) mod porep;
pub mod post;
pub(crate) mod snap;
mod tree_d;

use blstrs::Scalar;
use kiln_synth::native::poseidon::Poseidon;
use kiln_synth::native::AssignmentWriter;

/// filecoin-hashers' Poseidon of `arity` (tree_r / tree_c nodes, columns,
/// comm_r), or why there is none.
pub(crate) fn poseidon(arity: usize) -> Result<&'static Poseidon, String> {
    Poseidon::filecoin(arity).ok_or_else(|| format!("no Filecoin Poseidon of arity {arity}"))
}

/// A tree_r / tree_c node as a path's hash: the Poseidon of its arity.
/// Callers check every level's arity with [`poseidon`] before writing.
pub(crate) fn poseidon_node(w: &mut AssignmentWriter<'_>, children: &[Scalar]) -> Scalar {
    Poseidon::filecoin(children.len()).expect("every level's arity is checked before the path is written").hash(w, children)
}
