//! PoRep's native witness: a partition's `StackedCircuit` assignment
//! computed straight from the C1 vanilla proofs, in the order
//! `StackedCircuit::synthesize` allocates it, the challenges in parallel.
//!
//! The prefix (what `PorepPartition`'s prefix part allocates): replica_id
//! (aux, input, its 255 bits), comm_d and comm_r (aux, input), comm_r_last
//! and comm_c (aux), Poseidon(comm_c, comm_r_last). Then per challenge
//! (`stacked::circuit::params::Proof::synthesize`), all of one size, each
//! written into its own share of the buffer on its own core:
//! - the data leaf, its tree_d path (SHA-256 nodes);
//! - per DRG parent, then per expander parent: the column's values, its
//!   Poseidon hash, its tree_c path;
//! - the challenge's 64 bits (and its packed input);
//! - per layer: the 255 bits of every parent label the layer reads, the
//!   label (SHA-256 of replica_id, layer, node and 37 parents) packed;
//! - the encoded node (last label + data leaf) and its tree_r path;
//! - the Poseidon hash of the column of labels and its tree_c path.
//!
//! Paths are kiln-synth's `merkle::por` (leaf already allocated, no root
//! input), hashing with tree_d's SHA-256 or filecoin-hashers' Poseidon.

use blstrs::Scalar as Fr;
use filecoin_hashers::Hasher;
use filecoin_proofs::VanillaSealProof;
use kiln_synth::native::bits::{pack_into_inputs, to_bits_le};
use kiln_synth::native::merkle::{por, PathLevel};
use kiln_synth::native::sha256::{sha256, Word};
use kiln_synth::native::AssignmentWriter;
use rayon::prelude::*;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{ColumnProof, LabelingProof, TOTAL_PARENTS};

use super::tree_d::{self, digest_element, element_words};
use super::{poseidon, poseidon_node};

/// A partition's public values, as field elements.
pub(crate) struct PartitionValues {
    pub(crate) replica_id: Fr,
    pub(crate) comm_d: Fr,
    pub(crate) comm_r: Fr,
    pub(crate) comm_r_last: Fr,
    pub(crate) comm_c: Fr,
}

/// A Merkle path: per level, the siblings and the node's position.
type Path = Vec<(Vec<Fr>, usize)>;

/// A column opening: the column's values (one per layer) and its tree_c path.
struct Column {
    rows: Vec<Fr>,
    path: Path,
}

/// What one challenge's segment is computed from.
struct Challenge {
    node: u64,
    data_leaf: Fr,
    comm_d_path: Path,
    drg_parents: Vec<Column>,
    exp_parents: Vec<Column>,
    comm_r_last_path: Path,
    c_x_path: Path,
}

/// Writes one partition's inputs (after ONE) and aux assignment.
pub(crate) fn write_partition<Tree: 'static + MerkleTreeTrait>(
    w: &mut AssignmentWriter<'_>,
    values: &PartitionValues,
    challenges: &[VanillaSealProof<Tree>],
) -> Result<(), String> {
    let poseidon2 = poseidon(2)?;
    let PartitionValues { replica_id, comm_d, comm_r, comm_r_last, comm_c } = *values;
    w.aux(replica_id);
    w.input(replica_id);
    to_bits_le(w, replica_id);
    w.aux(comm_d);
    w.input(comm_d);
    w.aux(comm_r);
    w.input(comm_r);
    w.aux(comm_r_last);
    w.aux(comm_c);
    poseidon2.hash(w, &[comm_c, comm_r_last]);

    let replica_words = element_words(&replica_id);
    let parts = w.split_rest(challenges.len())?;
    parts.into_par_iter().zip(challenges.par_iter()).enumerate().try_for_each(|(k, (mut part, proof))| {
        let challenge = Challenge::of::<Tree>(proof).map_err(|e| format!("challenge {k}: {e}"))?;
        challenge.write(&mut part, &replica_words).map_err(|e| format!("challenge {k}: {e}"))?;
        part.finish().map_err(|e| format!("challenge {k}: {e}"))
    })
}

impl Challenge {
    /// The values `Proof::synthesize` reads, from the vanilla proof (and
    /// checked to have the shapes the circuit asserts).
    fn of<Tree: 'static + MerkleTreeTrait>(proof: &VanillaSealProof<Tree>) -> Result<Challenge, String> {
        let columns = proof.replica_column_proofs.drg_parents.iter().chain(&proof.replica_column_proofs.exp_parents);
        let mut columns = columns.map(column).collect::<Result<Vec<_>, _>>()?;
        let exp_parents = columns.split_off(proof.replica_column_proofs.drg_parents.len());
        let drg_parents = columns;
        let layers = drg_parents.first().ok_or("no DRG parents")?.rows.len();
        if exp_parents.is_empty() || drg_parents.iter().chain(&exp_parents).any(|c| c.rows.len() != layers) || layers == 0 {
            return Err(format!("the parents' columns are not all of {layers} layers, or there are none"));
        }
        let first_label = proof.labeling_proofs.first().ok_or("no labeling proofs")?;
        let c_x = column(&proof.replica_column_proofs.c_x)?;
        let challenge = Challenge {
            node: labeling_node(first_label)?,
            data_leaf: proof.comm_d_proofs.leaf().into(),
            comm_d_path: path(&proof.comm_d_proofs),
            drg_parents,
            exp_parents,
            comm_r_last_path: path(&proof.comm_r_last_proof),
            c_x_path: c_x.path,
        };
        let poseidon_paths = || [&challenge.comm_r_last_path, &challenge.c_x_path].into_iter().chain(challenge.drg_parents.iter().chain(&challenge.exp_parents).map(|c| &c.path));
        for (siblings, _) in poseidon_paths().flatten() {
            poseidon(siblings.len() + 1)?;
        }
        if challenge.comm_d_path.iter().any(|(s, _)| s.len() != 1) {
            return Err("the tree_d path is not binary".into());
        }
        // A position past its level's children would be another circuit
        // (the gadget asserts it as well).
        for (siblings, index) in poseidon_paths().chain([&challenge.comm_d_path]).flatten() {
            if *index > siblings.len() {
                return Err(format!("a path level puts its node at position {index} of {} children", siblings.len() + 1));
            }
        }
        Ok(challenge)
    }

    fn write(&self, w: &mut AssignmentWriter<'_>, replica_words: &[Word; 8]) -> Result<(), String> {
        w.aux(self.data_leaf);
        por(w, self.data_leaf, false, levels(&self.comm_d_path), tree_d::hash_node);
        for column in self.drg_parents.iter().chain(&self.exp_parents) {
            for &v in &column.rows {
                w.aux(v);
            }
            let hash = column_hash(w, &column.rows)?;
            por(w, hash, false, levels(&column.path), poseidon_node);
        }

        let node_bits: [bool; 64] = std::array::from_fn(|i| (self.node >> i) & 1 == 1);
        for &b in &node_bits {
            w.bit(b);
        }
        pack_into_inputs(w, &node_bits);

        let layers = self.drg_parents[0].rows.len();
        let mut labels = Vec::with_capacity(layers);
        let mut parents = Vec::with_capacity(self.drg_parents.len() + self.exp_parents.len());
        for layer in 1..=layers {
            // Layer 1 reads only the DRG parents; later layers also the
            // expander parents' labels of the layer before.
            parents.clear();
            parents.extend(self.drg_parents.iter().map(|c| c.rows[layer - 1]));
            if layer > 1 {
                parents.extend(self.exp_parents.iter().map(|c| c.rows[layer - 2]));
            }
            let words: Vec<[Word; 8]> = parents
                .iter()
                .map(|p| {
                    to_bits_le(w, *p);
                    element_words(p)
                })
                .collect();
            labels.push(label(w, replica_words, layer as u32, self.node, &expand_parents(&words, layer)?));
        }

        let encoded = labels[layers - 1] + self.data_leaf;
        w.aux(encoded);
        por(w, encoded, false, levels(&self.comm_r_last_path), poseidon_node);
        let column_hash = column_hash(w, &labels)?;
        por(w, column_hash, false, levels(&self.c_x_path), poseidon_node);
        Ok(())
    }
}

/// The 37 parents a label hashes, repeated as the circuit repeats them:
/// layer 1's DRG parents six times and the first once more; later layers'
/// 14 parents twice and the first 9 again.
fn expand_parents(parents: &[[Word; 8]], layer: usize) -> Result<Vec<[Word; 8]>, String> {
    let mut expanded = Vec::with_capacity(TOTAL_PARENTS);
    if layer > 1 {
        expanded.extend_from_slice(parents);
        expanded.extend_from_slice(parents);
        expanded.extend_from_slice(parents.get(..9).ok_or("fewer than 9 parents")?);
    } else {
        for _ in 0..6 {
            expanded.extend_from_slice(parents);
        }
        expanded.push(parents[0]);
    }
    if expanded.len() != TOTAL_PARENTS {
        return Err(format!("layer {layer} hashes {} parents, not {TOTAL_PARENTS}", expanded.len()));
    }
    Ok(expanded)
}

/// `create_label_circuit`: SHA-256 of replica_id (32 bytes), the layer (4
/// bytes, a constant), the node (8 bytes), zeros to 64 bytes, the parents;
/// the digest packed. Returns the label.
fn label(w: &mut AssignmentWriter<'_>, replica: &[Word; 8], layer: u32, node: u64, parents: &[[Word; 8]]) -> Fr {
    let mut message = Vec::with_capacity(16 + 8 * parents.len());
    message.extend_from_slice(replica);
    message.push(Word::constant(layer));
    message.push(Word::variable((node >> 32) as u32));
    message.push(Word::variable(node as u32));
    message.resize(16, Word::constant(0));
    for p in parents {
        message.extend_from_slice(p);
    }
    let label = digest_element(&sha256(&message, w));
    w.aux(label);
    label
}

/// `hash_single_column`: Poseidon of the column (2 or 11 layers).
fn column_hash(w: &mut AssignmentWriter<'_>, rows: &[Fr]) -> Result<Fr, String> {
    match rows.len() {
        2 | 11 => Ok(poseidon(rows.len())?.hash(w, rows)),
        n => Err(format!("columns of {n} layers are not hashed by the circuit (2 or 11)")),
    }
}

fn levels(path: &Path) -> impl Iterator<Item = PathLevel<'_>> {
    path.iter().map(|(siblings, index)| PathLevel { siblings, index: *index })
}

fn path<P: MerkleProofTrait>(proof: &P) -> Path {
    proof.path().into_iter().map(|(siblings, index)| (siblings.into_iter().map(Into::into).collect(), index)).collect()
}

/// A column opening's values and path. storage-proofs keeps both fields
/// of its `ColumnProof` crate-private (its circuit reads them directly);
/// they are public in its serde form, so they are read from there.
fn column<P: MerkleProofTrait>(proof: &ColumnProof<P>) -> Result<Column, String> {
    #[derive(Deserialize)]
    struct Fields<D, P> {
        column: ColumnFields<D>,
        #[serde(bound = "P: DeserializeOwned")]
        inclusion_proof: P,
    }
    #[derive(Deserialize)]
    struct ColumnFields<D> {
        rows: Vec<D>,
    }
    let v = serde_json::to_value(proof).map_err(|e| format!("a column proof does not serialize: {e}"))?;
    let fields: Fields<<P::Hasher as Hasher>::Domain, P> =
        serde_json::from_value(v).map_err(|e| format!("a column proof is not {{column: {{rows}}, inclusion_proof}}: {e}"))?;
    Ok(Column { rows: fields.column.rows.into_iter().map(Into::into).collect(), path: path(&fields.inclusion_proof) })
}

/// The challenged node, as the circuit takes it (`labeling_proofs[0].node`,
/// crate-private like the column proofs' fields).
fn labeling_node<H: Hasher>(proof: &LabelingProof<H>) -> Result<u64, String> {
    #[derive(Deserialize)]
    struct Fields {
        node: u64,
    }
    let v = serde_json::to_value(proof).map_err(|e| format!("a labeling proof does not serialize: {e}"))?;
    serde_json::from_value::<Fields>(v).map(|f| f.node).map_err(|e| format!("a labeling proof has no node: {e}"))
}

