//! A committed-capacity sector sealed only where a proof looks at it.
//!
//! The order is the real one: the data is all zeros, so comm_d is the
//! zero commitment; comm_d gives replica_id; replica_id and the seed give
//! the interactive PoRep challenges of every partition (filecoin-proofs'
//! own derivation). Each challenged node's labels are then computed with
//! the real labeling function from its parents' labels, layer by layer:
//! a parent that is not challenged itself has random labels (nothing
//! checks how they were made), a parent that is challenged has its real
//! ones. The columns of the challenged nodes and of their parents are
//! tree_c's only materialized leaves, the challenged nodes' replica values
//! (last layer's label + zero data) tree_r_last's; every other leaf is
//! default, so both trees, comm_c, comm_r_last and comm_r cost a few
//! thousand hashes at any sector size.

use std::collections::{BTreeMap, BTreeSet};

use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonHasher};
use filecoin_hashers::sha256::{Sha256Domain, Sha256Hasher};
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{DefaultPieceHasher, PoRepConfig, VanillaSealProof};
use generic_array::typenum::{U0, U2};
use rand::RngCore;
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::{Graph, BASE_DEGREE};
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{
    self, Challenges, Column, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof, EXP_DEGREE, TOTAL_PARENTS,
};

use super::tree::{SparseTree, TreeShape};

/// The labels of one node, layer 1 first (its column in tree_c).
type Labels = Vec<PoseidonDomain>;

/// A sealed CC sector, materialized at its PoRep challenges and their parents.
pub(crate) struct SparseSector<Tree: MerkleTreeTrait<Hasher = PoseidonHasher>> {
    pub(crate) replica_id: PoseidonDomain,
    pub(crate) comm_d: Sha256Domain,
    /// (Read by the testkit's PoSt payloads only.)
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) comm_c: PoseidonDomain,
    pub(crate) comm_r: PoseidonDomain,
    /// Each partition's challenges, in filecoin-proofs' order.
    pub(crate) challenges: Vec<Vec<usize>>,
    pub(crate) tree_d: SparseTree<Sha256Hasher>,
    pub(crate) tree_r_last: SparseTree<PoseidonHasher>,
    tree_c: SparseTree<PoseidonHasher>,
    /// Every materialized node's labels (challenged nodes and their parents).
    columns: BTreeMap<u32, Labels>,
    /// Each challenged node's parents: BASE_DEGREE base parents, then EXP_DEGREE expander parents.
    parents: BTreeMap<u32, [u32; BASE_DEGREE + EXP_DEGREE]>,
    num_layers: usize,
    _tree: std::marker::PhantomData<Tree>,
}

/// What a sector's replica id is made of (besides comm_d and the PoRep id).
pub(crate) struct SectorIdentity {
    pub(crate) prover_id: [u8; 32],
    pub(crate) sector_id: u64,
    pub(crate) ticket: [u8; 32],
    pub(crate) seed: [u8; 32],
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>> SparseSector<Tree> {
    /// Seals a CC sector of `config`'s size where the interactive PoRep
    /// challenges of `id.seed` look. `rng` gives the labels of parents
    /// that are not challenged.
    pub(crate) fn seal(config: &PoRepConfig, id: &SectorIdentity, rng: &mut dyn RngCore) -> Result<Self, String> {
        let pub_params = filecoin_proofs::parameters::public_params::<Tree>(config).map_err(|e| format!("PoRep public parameters: {e:#}"))?;
        if !matches!(pub_params.challenges, Challenges::Interactive(_)) {
            // Synthetic and non-interactive challenges are drawn from comm_r, which
            // is made from the labels at the challenges: no sparse order exists.
            return Err(format!("sparse sectors answer interactive PoRep only, not {:?}'s challenges", config.api_features));
        }
        let graph = &pub_params.graph;
        let nodes = graph.size() as u64;
        let tree_d = SparseTree::new(TreeShape::<Sha256Hasher>::binary(nodes)?, [])?;
        let comm_d = tree_d.root();
        let replica_id =
            stacked::generate_replica_id::<PoseidonHasher, _>(&id.prover_id, id.sector_id, &id.ticket, comm_d, &config.porep_id);
        let pub_inputs = stacked::PublicInputs::<PoseidonDomain, Sha256Domain> { replica_id, seed: Some(id.seed), tau: None, k: None };
        let challenges: Vec<Vec<usize>> = (0..usize::from(config.partitions))
            .map(|k| pub_inputs.challenges(&pub_params.challenges, graph.size(), Some(k)))
            .collect();

        let challenged: BTreeSet<u32> = challenges.iter().flatten().map(|&c| c as u32).collect();
        let mut parents = BTreeMap::new();
        for &c in &challenged {
            let mut p = [0u32; BASE_DEGREE + EXP_DEGREE];
            graph.parents(c as usize, &mut p).map_err(|e| format!("parents of node {c}: {e:#}"))?;
            parents.insert(c, p);
        }
        let num_layers = pub_params.num_layers;
        // Random labels for every parent; the challenged nodes' are overwritten below.
        let mut columns: BTreeMap<u32, Labels> = BTreeMap::new();
        for &n in challenged.iter().chain(parents.values().flatten()) {
            columns.entry(n).or_insert_with(|| (0..num_layers).map(|_| PoseidonDomain::random(&mut &mut *rng)).collect());
        }
        // Layer by layer, then node by node: a label needs its base parents'
        // labels in this layer (smaller nodes) and its expander parents' in
        // the layer before, so a challenged parent's label is always made first.
        for layer in 1..=num_layers {
            for &c in &challenged {
                let value = label(&replica_id, layer, c, &label_parents(&columns, &parents[&c], layer));
                columns.get_mut(&c).expect("every challenged node has a column")[layer - 1] = value;
            }
        }

        let shape = TreeShape::<PoseidonHasher>::of::<Tree>(nodes)?;
        let column_hashes = columns.iter().map(|(&n, rows)| Column::<PoseidonHasher>::new(n, rows.clone()).map(|col| (u64::from(n), col.hash().into())));
        let tree_c = SparseTree::new(shape.clone(), column_hashes.collect::<Result<Vec<_>, _>>().map_err(|e| format!("a column: {e:#}"))?)?;
        // The replica is the last layer's label encoded with the data, which is zero.
        let replica = challenged.iter().map(|&c| (u64::from(c), columns[&c][num_layers - 1]));
        let tree_r_last = SparseTree::new(shape, replica)?;
        let comm_c = tree_c.root();
        let comm_r = <PoseidonHasher as Hasher>::Function::hash2(&comm_c, &tree_r_last.root());
        Ok(SparseSector {
            replica_id,
            comm_d,
            comm_c,
            comm_r,
            challenges,
            tree_d,
            tree_r_last,
            tree_c,
            columns,
            parents,
            num_layers,
            _tree: std::marker::PhantomData,
        })
    }

    /// The vanilla PoRep proofs of every partition, as C1 makes them.
    pub(crate) fn vanilla_proofs(&self) -> Vec<Vec<VanillaSealProof<Tree>>> {
        self.challenges.iter().map(|part| part.iter().map(|&c| self.challenge_proof(c as u32)).collect()).collect()
    }

    /// One challenge's proof: its data and replica openings, its column
    /// and its parents' columns in tree_c, and the labeling of each layer.
    fn challenge_proof(&self, c: u32) -> VanillaSealProof<Tree> {
        let column = |n: u32| ColumnProof::new(n, self.columns[&n].clone(), self.tree_c.proof(u64::from(n)));
        let parents = &self.parents[&c];
        let labeling = |layer: usize| label_parents(&self.columns, parents, layer);
        stacked::Proof::<Tree, DefaultPieceHasher> {
            comm_d_proofs: self.tree_d.proof::<U2, U0, U0>(u64::from(c)),
            comm_r_last_proof: self.tree_r_last.proof(u64::from(c)),
            replica_column_proofs: ReplicaColumnProof {
                c_x: column(c),
                drg_parents: parents[..BASE_DEGREE].iter().map(|&p| column(p)).collect(),
                exp_parents: parents[BASE_DEGREE..].iter().map(|&p| column(p)).collect(),
            },
            labeling_proofs: (1..=self.num_layers).map(|l| LabelingProof::new(l as u32, u64::from(c), labeling(l))).collect(),
            encoding_proof: EncodingProof::new(self.num_layers as u32, u64::from(c), labeling(self.num_layers)),
        }
    }
}

/// The parent labels a node's label in `layer` hashes, as the labeling
/// proofs list them: the base parents' labels in this layer, then (above
/// layer 1) the expander parents' in the layer below, repeated up to
/// TOTAL_PARENTS.
fn label_parents(columns: &BTreeMap<u32, Labels>, parents: &[u32; BASE_DEGREE + EXP_DEGREE], layer: usize) -> Vec<PoseidonDomain> {
    let base = parents[..BASE_DEGREE].iter().map(|p| columns[p][layer - 1]);
    let used: Vec<PoseidonDomain> = if layer == 1 { base.collect() } else { base.chain(parents[BASE_DEGREE..].iter().map(|p| columns[p][layer - 2])).collect() };
    used.iter().copied().cycle().take(TOTAL_PARENTS).collect()
}

/// The SDR labeling function (storage-proofs' `create_label` /
/// `LabelingProof`): SHA-256 of replica_id, the layer (u32 big-endian) and
/// the node (u64 big-endian) padded to 64 bytes, then the parents' labels;
/// the two top bits cleared so the label is a field element.
fn label(replica_id: &PoseidonDomain, layer: usize, node: u32, parents: &[PoseidonDomain]) -> PoseidonDomain {
    let mut head = [0u8; 32];
    head[..4].copy_from_slice(&(layer as u32).to_be_bytes());
    head[4..12].copy_from_slice(&u64::from(node).to_be_bytes());
    let mut hasher = Sha256::new();
    hasher.update(AsRef::<[u8]>::as_ref(replica_id));
    hasher.update(head);
    for p in parents {
        hasher.update(AsRef::<[u8]>::as_ref(p));
    }
    let mut digest: [u8; 32] = hasher.finalize().into();
    digest[31] &= 0b0011_1111;
    PoseidonDomain::try_from_bytes(&digest).expect("a 254-bit value is a field element")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The labeling function is storage-proofs' own: a labeling proof made
    /// of the same parents accepts the label and refuses another.
    #[test]
    fn labels_are_what_labeling_proofs_accept() {
        let mut rng = rand::thread_rng();
        let replica_id = PoseidonDomain::random(&mut rng);
        let distinct: Vec<PoseidonDomain> = (0..BASE_DEGREE + EXP_DEGREE).map(|_| PoseidonDomain::random(&mut rng)).collect();
        let parents: Vec<PoseidonDomain> = distinct.iter().copied().cycle().take(TOTAL_PARENTS).collect();
        let ours = label(&replica_id, 3, 123_456, &parents);
        assert!(LabelingProof::<PoseidonHasher>::new(3, 123_456, parents.clone()).verify(&replica_id, &ours));
        assert!(!LabelingProof::<PoseidonHasher>::new(4, 123_456, parents).verify(&replica_id, &ours));
    }
}
