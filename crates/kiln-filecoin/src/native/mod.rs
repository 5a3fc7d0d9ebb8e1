//! Native witness generators of the Filecoin circuits: each kind's
//! partition assignment computed straight from its vanilla proofs with
//! kiln-synth's native pieces (SHA-256, Poseidon, Merkle paths, bit
//! decompositions), in exactly the order its gadget path allocates, the
//! independent parts (challenges) in parallel. The job sources hand them to
//! `SynthContext::synthesize_native`, which checks every row of the
//! recorded R1CS before the witness is used and falls back to the gadget
//! path when one fails.

pub(crate) mod porep;
pub(crate) mod snap;
mod tree_d;
