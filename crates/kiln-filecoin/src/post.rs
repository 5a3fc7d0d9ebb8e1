//! WindowPoSt (one partition) and WinningPoSt: bincode
//! `FallbackPoStSectorProof`s, the randomness and the miner -> one
//! FallbackPoSt circuit; the answer is what
//! `generate_single_window_post_with_vanilla` /
//! `generate_winning_post_with_vanilla` return (one 192-byte proof).

use std::sync::Arc;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::parameters::{window_post_public_params, winning_post_public_params};
use filecoin_proofs::{
    partition_vanilla_proofs, single_partition_vanilla_proofs, with_shape, FallbackPoStSectorProof, PoStConfig, PoStType, VanillaProof,
};
use filecoin_proofs_api::RegisteredPoStProof;
use kiln_pipeline::{JobSource, SrsSpec};
use kiln_synth::{Assignment, AssignmentBuffers, SegmentedCircuit, SynthContext, SynthError};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector};

use crate::circuit_error;
use crate::params::ParamSet;
use crate::payload::decode_vanilla;
use crate::registered::{post_proof, prover_id, sector_size_name};

/// A WindowPoSt or WinningPoSt request as it arrives.
#[derive(Clone, Copy, Debug)]
pub struct PostRequest<'a> {
    pub registered_proof: u64,
    /// 0: take the registered proof's.
    pub sector_size: u64,
    pub vanilla_proofs: &'a [Vec<u8>],
    pub randomness: &'a [u8],
    pub miner_id: u64,
    /// WindowPoSt only.
    pub partition_index: u32,
}

/// A WindowPoSt (one partition) or WinningPoSt job; `typ` is what the wire's
/// proof kind asked for, and the registered proof must be of that type.
pub fn job(typ: PoStType, req: &PostRequest<'_>) -> Result<Arc<dyn JobSource>, String> {
    let proof = post_proof(req.registered_proof)?;
    if proof.typ() != typ {
        return Err(format!("registered_proof {} ({proof:?}) is a {:?} PoSt proof, not a {typ:?} one", req.registered_proof, proof.typ()));
    }
    let size = u64::from(proof.sector_size());
    if req.sector_size != 0 && req.sector_size != size {
        return Err(format!("sector_size {} does not match registered_proof {} ({proof:?}, {})", req.sector_size, req.registered_proof, sector_size_name(size)));
    }
    if typ == PoStType::Winning && req.partition_index != 0 {
        return Err(format!("WinningPoSt has one partition; partition_index {} is out of range", req.partition_index));
    }
    crate::untrusted("the PoSt vanilla proofs", || with_shape!(size, build, proof, req))
}

/// The parameters of a registered PoSt proof.
pub fn param_set(proof: RegisteredPoStProof) -> Result<ParamSet, String> {
    with_shape!(u64::from(proof.sector_size()), param_set_of, &proof.as_v1_config())
}

fn public_params<Tree: 'static + MerkleTreeTrait>(config: &PoStConfig) -> Result<fallback::PublicParams, String> {
    match config.typ {
        PoStType::Window => window_post_public_params::<Tree>(config),
        PoStType::Winning => winning_post_public_params::<Tree>(config),
    }
    .map_err(|e| format!("PoSt public parameters: {e:#}"))
}

fn param_set_of<Tree: 'static + MerkleTreeTrait>(config: &PoStConfig) -> Result<ParamSet, String> {
    let pub_params = public_params::<Tree>(config)?;
    let cache_id = config.get_cache_identifier::<Tree>().map_err(|e| format!("PoSt cache id: {e:#}"))?;
    let size = u64::from(config.sector_size);
    let label = format!("{:?}PoSt {}", config.typ, sector_size_name(size));
    let blank = Arc::new(move || <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::blank_circuit(&pub_params));
    let sectors = blank.clone();
    // The test setup from the sectors on every core: a WindowPoSt
    // partition of 2349 sectors is ~125M constraints, minutes on one thread.
    Ok(ParamSet::new(cache_id, size, label, move || blank())
        .with_segmented_test_setup(move |seed, admit| kiln_groth16::setup::test_setup_segmented(&PostSectors(sectors()), seed, admit)))
}

/// A FallbackPoSt circuit as segments, one per sector with no shared prefix
/// (the sectors do not depend on one another), so that its compile, its
/// gadget-path witness and its test setup run on every core. The whole is
/// the circuit filecoin-proofs synthesizes (its `synthesize_default`: the
/// sectors in order; namespaces do not change the constraints).
struct PostSectors<Tree: MerkleTreeTrait>(FallbackPoStCircuit<Tree>);

impl<Tree: 'static + MerkleTreeTrait> PostSectors<Tree> {
    fn sector<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS, k: usize) -> Result<(), SynthesisError> {
        (&self.0.sectors[k]).synthesize(&mut cs.namespace(|| format!("sector_{k}")))
    }
}

impl<Tree: 'static + MerkleTreeTrait> SegmentedCircuit for PostSectors<Tree> {
    fn segments(&self) -> usize {
        self.0.sectors.len()
    }

    fn synthesize_whole<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS) -> Result<(), SynthesisError> {
        (0..self.segments()).try_for_each(|k| self.sector(cs, k))
    }

    fn synthesize_part<CS: ConstraintSystem<Fr>>(&self, cs: &mut CS, segment: Option<usize>) -> Result<(), SynthesisError> {
        segment.map_or(Ok(()), |k| self.sector(cs, k))
    }
}

struct PostJob<Tree: 'static + MerkleTreeTrait> {
    label: &'static str,
    params: ParamSet,
    pub_inputs: fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    pub_params: fallback::PublicParams,
    /// This partition's vanilla proof (the sectors, padded as filecoin-proofs pads them).
    partition: VanillaProof<Tree>,
}

fn build<Tree: 'static + MerkleTreeTrait>(proof: RegisteredPoStProof, req: &PostRequest<'_>) -> Result<Arc<dyn JobSource>, String> {
    let config = proof.as_v1_config();
    let size = u64::from(config.sector_size);
    let sectors: Vec<FallbackPoStSectorProof<Tree>> = decode_vanilla(req.vanilla_proofs, "FallbackPoStSectorProof", size)?;
    match config.typ {
        PoStType::Winning if sectors.len() != config.sector_count => {
            return Err(format!("{proof:?} proves {} sector(s), got {} vanilla_proofs", config.sector_count, sectors.len()))
        }
        PoStType::Window if sectors.len() > config.sector_count => {
            return Err(format!("{proof:?} proves at most {} sectors per partition, got {} vanilla_proofs", config.sector_count, sectors.len()))
        }
        _ => {}
    }
    let randomness: [u8; 32] = req.randomness.try_into().map_err(|_| format!("randomness must be 32 bytes, got {}", req.randomness.len()))?;
    let domain = |name: &str, v: &[u8; 32]| <Tree::Hasher as Hasher>::Domain::try_from_bytes(v).map_err(|e| format!("{name} is not a field element: {e:#}"));
    let pub_params = public_params::<Tree>(&config)?;
    let pub_inputs = fallback::PublicInputs {
        randomness: domain("randomness", &randomness)?,
        prover_id: domain("prover id", &prover_id(req.miner_id))?,
        sectors: sectors.iter().map(|s| PublicSector { id: s.sector_id, comm_r: s.comm_r }).collect(),
        k: (config.typ == PoStType::Window).then_some(req.partition_index as usize),
    };
    // filecoin-proofs' own arrangement of the sector proofs into the
    // partition's proof; it also checks each proof answers this
    // randomness's challenges, so a mismatch is refused here, not in the circuit.
    let partition = match config.typ {
        PoStType::Window => single_partition_vanilla_proofs(&config, &pub_params, &pub_inputs, &sectors),
        PoStType::Winning => partition_vanilla_proofs(&config, &pub_params, &pub_inputs, 1, &sectors).and_then(|mut v| {
            anyhow::ensure!(v.len() == 1, "expected one partition, got {}", v.len());
            Ok(v.remove(0))
        }),
    }
    .map_err(|e| format!("the vanilla proofs do not fit this request (randomness, miner, sectors): {e:#}"))?;
    let label = match config.typ {
        PoStType::Window => "window-post",
        PoStType::Winning => "winning-post",
    };
    Ok(Arc::new(PostJob::<Tree> { label, params: param_set_of::<Tree>(&config)?, pub_inputs, pub_params, partition }))
}

impl<Tree: 'static + MerkleTreeTrait> JobSource for PostJob<Tree> {
    fn kind_label(&self) -> &str {
        self.label
    }

    fn srs(&self) -> SrsSpec {
        self.params.srs_spec()
    }

    fn num_partitions(&self) -> usize {
        1
    }

    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        let _span = tracing::debug_span!("post_partition", kind = self.label, partition = ?self.pub_inputs.k).entered();
        // The public inputs hold this partition's sectors only, so the
        // circuit takes chunk 0 of them (as filecoin-proofs' single-partition prover does).
        let circuit = <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, FallbackPoStCircuit<Tree>>>::circuit(
            &self.pub_inputs,
            Default::default(),
            &self.partition,
            &self.pub_params,
            Some(i),
        )
        .map_err(|e| circuit_error(format!("{} circuit: {e:#}", self.label)))?;
        let sectors = PostSectors(circuit);
        // The native generator takes the same sectors the circuit takes.
        let public = self.pub_inputs.sectors.chunks(self.pub_params.sector_count).nth(i).unwrap_or(&[]);
        ctx.synthesize_native(
            |w| crate::native::post::write_partition::<Tree>(w, public, &self.partition),
            |ctx, buffers| ctx.synthesize_segmented(&sectors, buffers),
            buffers,
        )
    }
}
