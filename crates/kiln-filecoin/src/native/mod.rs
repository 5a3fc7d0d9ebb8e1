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
