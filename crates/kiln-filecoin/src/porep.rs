//! PoRep C2: the C1 output (Curio's JSON envelope around
//! `filecoin_proofs_api::seal::SealCommitPhase1Output`) -> one StackedDrg
//! circuit per partition; the answer is what `seal_commit_phase2` returns:
//! the partition proofs, 192 bytes each, concatenated, or for
//! non-interactive PoRep their SnarkPack aggregate ([`crate::ni_porep`]).

use std::marker::PhantomData;
use std::sync::Arc;

use base64::Engine as _;
use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{
    parameters::public_params, with_shape, DefaultPieceDomain, DefaultPieceHasher, PoRepConfig, VanillaSealProof,
};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{ApiFeature, RegisteredSealProof};
use kiln_groth16::{ProveError, ProvedProof};
use kiln_pipeline::{JobSource, SrsSpec};
use bellperson::{ConstraintSystem, SynthesisError};
use kiln_synth::{Assignment, AssignmentBuffers, SegmentedCircuit, SynthContext, SynthError};
use serde::Deserialize;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{self, StackedCircuit, StackedCompound, StackedDrg};

use crate::native;
use crate::ni_porep::{self, Aggregation};
use crate::params::ParamSet;
use crate::registered::{seal_proof, seal_proof_number, sector_size_name};
use crate::circuit_error;

/// Curio's `vanilla_proof` for POREP_SEAL_COMMIT.
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "SectorNum")]
    sector_num: i64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

/// What a PoRep C2 request carries besides the envelope.
#[derive(Clone, Copy, Debug, Default)]
pub struct PorepRequest {
    /// `sector_size` on the wire (0: take the envelope's).
    pub sector_size: u64,
    /// `registered_proof` on the wire (0 is also StackedDrg2KiBV1, so a
    /// mismatch is reported only for a non-zero value).
    pub registered_proof: u64,
    /// `sector_number` on the wire (0: take the envelope's `SectorNum`).
    pub sector_number: u64,
}

/// The C1 output inside `envelope` (its `Phase1Out`), decoded and checked
/// against the request.
pub fn decode_envelope(envelope: &[u8], req: &PorepRequest) -> Result<(SealCommitPhase1Output, u64), String> {
    let env: Envelope = serde_json::from_slice(envelope)
        .map_err(|e| format!("vanilla_proof is not the C1 envelope {{SectorNum, Phase1Out, SectorSize}}: {e}"))?;
    let sector = u64::try_from(env.sector_num).map_err(|_| format!("vanilla_proof.SectorNum {} is negative", env.sector_num))?;
    if req.sector_number != 0 && req.sector_number != sector {
        return Err(format!("sector_number {} disagrees with vanilla_proof.SectorNum {sector}", req.sector_number));
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(env.phase1_out.as_bytes())
        .map_err(|e| format!("vanilla_proof.Phase1Out is not base64: {e}"))?;
    let c1: SealCommitPhase1Output =
        serde_json::from_slice(&raw).map_err(|e| format!("vanilla_proof.Phase1Out is not a filecoin-proofs 19 SealCommitPhase1Output: {e}"))?;
    let size = u64::from(c1.registered_proof.sector_size());
    if env.sector_size != size {
        return Err(format!(
            "vanilla_proof.SectorSize {} does not match the C1 output's {:?} ({})",
            env.sector_size,
            c1.registered_proof,
            sector_size_name(size)
        ));
    }
    if req.sector_size != 0 && req.sector_size != size {
        return Err(format!("sector_size {} does not match the C1 output's {:?} ({})", req.sector_size, c1.registered_proof, sector_size_name(size)));
    }
    if req.registered_proof != 0 && seal_proof(req.registered_proof)? != c1.registered_proof {
        return Err(format!(
            "registered_proof {} ({:?}) disagrees with the C1 output's {:?} ({})",
            req.registered_proof,
            seal_proof(req.registered_proof)?,
            c1.registered_proof,
            seal_proof_number(c1.registered_proof)
        ));
    }
    Ok((c1, sector))
}

/// A PoRep C2 job from Curio's envelope. A non-interactive PoRep is
/// refused when the inner-product SRS it is aggregated with is missing.
pub fn job(envelope: &[u8], req: &PorepRequest) -> Result<Arc<dyn JobSource>, String> {
    let (c1, sector) = decode_envelope(envelope, req)?;
    let size = u64::from(c1.registered_proof.sector_size());
    let _ = sector; // C1 already bound the sector and prover ids into replica_id.
    crate::untrusted("the C1 output's vanilla proofs", || with_shape!(size, build, c1))
}

/// `payload` (a PoRep C2 payload) with every partition cut to its first
/// `challenges` challenges: partitions made of production-size challenges
/// (a 32 GiB challenge is ~7.2 M constraints, 18 to a partition) that fit
/// a small machine, for measuring and testing synthesis per challenge.
/// Its circuits have another shape than the registered proof's, so its
/// proofs never verify against the published parameters: use it for
/// synthesis only. (Feature `testkit`.)
#[cfg(feature = "testkit")]
pub fn cut_to_challenges(payload: &crate::payload::Payload, challenges: usize) -> Result<crate::payload::Payload, String> {
    use filecoin_proofs_api::seal::VanillaSealProof as C1Proofs;
    if challenges == 0 {
        return Err("a partition needs at least one challenge".into());
    }
    let (mut c1, sector) = decode_envelope(&payload.vanilla_proof, &PorepRequest::default())?;
    macro_rules! cut {
        ($partitions:expr) => {
            $partitions.iter_mut().for_each(|p| p.truncate(challenges))
        };
    }
    match &mut c1.vanilla_proofs {
        C1Proofs::StackedDrg2KiBV1(p) => cut!(p),
        C1Proofs::StackedDrg8MiBV1(p) => cut!(p),
        C1Proofs::StackedDrg512MiBV1(p) => cut!(p),
        C1Proofs::StackedDrg32GiBV1(p) => cut!(p),
        C1Proofs::StackedDrg64GiBV1(p) => cut!(p),
    }
    let mut cut = payload.clone();
    cut.vanilla_proof = crate::vanilla::porep_payload(&c1, sector)?.vanilla_proof;
    Ok(cut)
}

/// The parameters of a registered seal proof.
pub fn param_set(proof: RegisteredSealProof) -> Result<ParamSet, String> {
    let size = u64::from(proof.sector_size());
    with_shape!(size, param_set_of, &proof.as_v1_config())
}

fn param_set_of<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(config: &PoRepConfig) -> Result<ParamSet, String> {
    let pub_params = public_params::<Tree>(config).map_err(|e| format!("PoRep public parameters: {e:#}"))?;
    let cache_id = config.get_cache_identifier::<Tree>().map_err(|e| format!("PoRep cache id: {e:#}"))?;
    let label = format!("PoRep {}", sector_size_name(u64::from(config.sector_size)));
    let set = ParamSet::new(cache_id, u64::from(config.sector_size), label, move || {
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::blank_circuit(&pub_params)
    });
    // Its test setup (when one is used), made from a sparse sector's
    // partition segment by segment on every core; a job replaces this by
    // its own partition (no sector to make).
    let config = config.clone();
    Ok(set.with_segmented_test_setup(move |seed, admit| {
        let (inputs, first) = crate::sparse::porep_partition_instance::<Tree>(&config).map_err(|e| ProveError::Synth(circuit_error(e)))?;
        segmented_test_setup::<Tree>(&inputs, &first, seed, admit)
    }))
}

/// The test setup of the PoRep partition `first` (one partition's vanilla
/// proofs) is an instance of, from its segments on every core.
fn segmented_test_setup<Tree: 'static + MerkleTreeTrait>(
    inputs: &PubInputs<Tree>,
    first: &[VanillaSealProof<Tree>],
    seed: [u8; 32],
    admit: kiln_groth16::setup::Admit<'_>,
) -> Result<kiln_groth16::ParamsFile, ProveError> {
    let partition = PorepPartition::<Tree>::new(inputs, first).map_err(|e| ProveError::Synth(circuit_error(e)))?;
    kiln_groth16::setup::test_setup_segmented(&partition, seed, admit)
}

type PubInputs<Tree> = stacked::PublicInputs<<<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain, DefaultPieceDomain>;

struct PorepJob<Tree: 'static + MerkleTreeTrait> {
    params: ParamSet,
    pub_inputs: PubInputs<Tree>,
    pub_params: stacked::PublicParams<Tree>,
    vanilla: Vec<Vec<VanillaSealProof<Tree>>>,
    /// Non-interactive PoRep: how the partition proofs become the answer.
    ni: Option<Aggregation>,
    _tree: PhantomData<Tree>,
}

fn build<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(c1: SealCommitPhase1Output) -> Result<Arc<dyn JobSource>, String> {
    let config = c1.registered_proof.as_v1_config();
    let partitions = usize::from(config.partitions);
    let ni = if c1.registered_proof.feature_enabled(ApiFeature::NonInteractivePoRep) {
        ni_porep::check_srs(c1.registered_proof)?;
        Some(Aggregation { config: config.clone(), comm_r: c1.comm_r, seed: c1.seed })
    } else {
        None
    };
    // filecoin-proofs' own checks, in its words' spirit.
    if c1.comm_d == [0; 32] || c1.comm_r == [0; 32] {
        return Err("the C1 output has an all-zero comm_d or comm_r".into());
    }
    if c1.seed == [0; 32] {
        return Err("the C1 output has an all-zero seed".into());
    }
    let vanilla: Vec<Vec<VanillaSealProof<Tree>>> =
        c1.vanilla_proofs.try_into().map_err(|e: anyhow::Error| format!("the C1 vanilla proofs do not fit {:?}: {e:#}", c1.registered_proof))?;
    if vanilla.len() != partitions {
        return Err(format!("the C1 output holds {} partitions of vanilla proofs; {:?} has {partitions}", vanilla.len(), c1.registered_proof));
    }
    if let Some(k) = vanilla.iter().position(|p| p.is_empty()) {
        return Err(format!("partition {k} of the C1 output has no vanilla proofs"));
    }
    let comm_r = <Tree::Hasher as Hasher>::Domain::try_from_bytes(&c1.comm_r).map_err(|e| format!("comm_r: {e:#}"))?;
    let comm_d = DefaultPieceDomain::try_from_bytes(&c1.comm_d).map_err(|e| format!("comm_d: {e:#}"))?;
    let replica_id: Fr = c1.replica_id.into();
    let pub_inputs = stacked::PublicInputs {
        replica_id: replica_id.into(),
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let pub_params = public_params::<Tree>(&config).map_err(|e| format!("PoRep public parameters: {e:#}"))?;
    // A test setup (when one is used) is made from this job's first
    // partition, segment by segment on every core: the circuit's structure
    // is the same for every job of the set, and filecoin-proofs gives no
    // blank circuit that can be split by challenge.
    let (first, inputs) = (vanilla[0].clone(), pub_inputs.clone());
    let params = param_set_of::<Tree>(&config)?.with_segmented_test_setup(move |seed, admit| segmented_test_setup::<Tree>(&inputs, &first, seed, admit));
    Ok(Arc::new(PorepJob { params, pub_inputs, pub_params, vanilla, ni, _tree: PhantomData }))
}

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// One partition's circuit, filecoin-proofs' `StackedCircuit`, seen as a
/// [`SegmentedCircuit`]: its prefix allocates the public commitments and
/// checks comm_r = H(comm_c, comm_r_last); then one segment per challenge,
/// each using only the prefix's variables. So once the circuit is compiled,
/// the challenges' witnesses (SHA-256 labels, Merkle paths) are computed on
/// every core at once instead of one after the other. Each part is the
/// circuit itself, made by `StackedCircuit::synthesize` with the same
/// commitments and a subset of the challenges (none for the prefix alone).
/// Once compiled, a partition's witness is computed natively instead
/// ([`native::porep`]), checked against the recorded R1CS, this circuit
/// behind it.
struct PorepPartition<'a, Tree: 'static + MerkleTreeTrait> {
    replica_id: TreeDomain<Tree>,
    comm_d: DefaultPieceDomain,
    comm_r: TreeDomain<Tree>,
    comm_r_last: TreeDomain<Tree>,
    comm_c: TreeDomain<Tree>,
    challenges: &'a [VanillaSealProof<Tree>],
}

impl<'a, Tree: 'static + MerkleTreeTrait> PorepPartition<'a, Tree> {
    /// The values `StackedCompound::circuit` builds its circuit from, with
    /// its consistency checks.
    fn new(pub_inputs: &PubInputs<Tree>, challenges: &'a [VanillaSealProof<Tree>]) -> Result<Self, String> {
        let first = challenges.first().ok_or("no vanilla proofs")?;
        let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
        if challenges.iter().any(|p| p.comm_r_last() != comm_r_last) {
            return Err("inconsistent comm_r_lasts".into());
        }
        if challenges.iter().any(|p| p.comm_c() != comm_c) {
            return Err("inconsistent comm_cs".into());
        }
        let tau = pub_inputs.tau.as_ref().ok_or("no comm_d and comm_r in the public inputs")?;
        Ok(PorepPartition { replica_id: pub_inputs.replica_id, comm_d: tau.comm_d, comm_r: tau.comm_r, comm_r_last, comm_c, challenges })
    }

    /// The partition's public values, for the native witness.
    fn values(&self) -> native::porep::PartitionValues {
        native::porep::PartitionValues {
            replica_id: self.replica_id.into(),
            comm_d: self.comm_d.into(),
            comm_r: self.comm_r.into(),
            comm_r_last: self.comm_r_last.into(),
            comm_c: self.comm_c.into(),
        }
    }

    fn synthesize_challenges<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS, challenges: &[VanillaSealProof<Tree>]) -> Result<(), SynthesisError> {
        StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
            cs,
            Some(self.replica_id),
            Some(self.comm_d),
            Some(self.comm_r),
            Some(self.comm_r_last),
            Some(self.comm_c),
            challenges.iter().cloned().map(Into::into).collect(),
        )
    }
}

impl<Tree: 'static + MerkleTreeTrait> SegmentedCircuit for PorepPartition<'_, Tree> {
    fn segments(&self) -> usize {
        self.challenges.len()
    }

    fn synthesize_whole<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.synthesize_challenges(cs, self.challenges)
    }

    fn synthesize_part<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS, segment: Option<usize>) -> Result<(), SynthesisError> {
        self.synthesize_challenges(cs, segment.map_or(&[][..], |k| &self.challenges[k..=k]))
    }
}

impl<Tree: 'static + MerkleTreeTrait> JobSource for PorepJob<Tree> {
    fn kind_label(&self) -> &str {
        if self.ni.is_some() {
            "ni-porep-c2"
        } else {
            "porep-c2"
        }
    }

    fn srs(&self) -> SrsSpec {
        self.params.srs_spec()
    }

    fn num_partitions(&self) -> usize {
        self.vanilla.len()
    }

    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        let _span = tracing::debug_span!("porep_partition", partition = i).entered();
        let partition = PorepPartition::<Tree>::new(&self.pub_inputs, &self.vanilla[i]).map_err(|e| circuit_error(format!("PoRep partition {i}: {e}")))?;
        ctx.synthesize_native(
            |w| native::porep::write_partition(w, &partition.values(), partition.challenges),
            |ctx, buffers| ctx.synthesize_segmented(&partition, buffers),
            buffers,
        )
    }

    fn finalize(&self, proofs: Vec<ProvedProof>) -> Result<Vec<u8>, String> {
        let bytes: Vec<u8> = proofs.iter().flat_map(|p| p.to_bytes()).collect();
        match &self.ni {
            None => Ok(bytes),
            Some(ni) => {
                // filecoin-proofs reads the verifying key from its `.vk` file.
                self.params.ensure()?;
                ni.aggregate::<Tree>(&self.pub_inputs, &self.pub_params, bytes)
            }
        }
    }
}
