//! SnapDeals (empty-sector update): one bincode `PartitionProof` per
//! partition plus comm_r_old, comm_r_new, comm_d_new -> one
//! EmptySectorUpdate circuit per partition; the answer is what
//! `generate_empty_sector_update_proof_with_vanilla` returns (the partition
//! proofs, 192 bytes each, concatenated).

use std::sync::Arc;

use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{with_shape, DefaultPieceDomain, SectorUpdateConfig, TreeRHasher};
use filecoin_proofs_api::RegisteredUpdateProof;
use kiln_pipeline::{JobSource, SrsSpec};
use kiln_synth::{Assignment, AssignmentBuffers, SynthContext, SynthError};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::CacheableParameters;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::{EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PartitionProof, PublicInputs, PublicParams};

use crate::circuit_error;
use crate::native;
use crate::params::ParamSet;
use crate::payload::decode_vanilla;
use crate::registered::{sector_size_name, update_proof};

/// A SnapDeals request as it arrives.
#[derive(Clone, Copy, Debug)]
pub struct SnapRequest<'a> {
    pub registered_proof: u64,
    /// 0: take the registered proof's.
    pub sector_size: u64,
    pub vanilla_proofs: &'a [Vec<u8>],
    pub comm_r_old: &'a [u8],
    pub comm_r_new: &'a [u8],
    pub comm_d_new: &'a [u8],
}

fn commitment(name: &str, v: &[u8]) -> Result<[u8; 32], String> {
    v.try_into().map_err(|_| format!("{name} must be 32 bytes, got {}", v.len()))
}

/// A SnapDeals job.
pub fn job(req: &SnapRequest<'_>) -> Result<Arc<dyn JobSource>, String> {
    let proof = update_proof(req.registered_proof)?;
    let size = u64::from(proof.sector_size());
    if req.sector_size != 0 && req.sector_size != size {
        return Err(format!("sector_size {} does not match registered_proof {} ({proof:?}, {})", req.sector_size, req.registered_proof, sector_size_name(size)));
    }
    crate::untrusted("the SnapDeals vanilla proofs", || with_shape!(size, build, proof, req))
}

/// The parameters of a registered update proof.
pub fn param_set(proof: RegisteredUpdateProof) -> ParamSet {
    with_shape!(u64::from(proof.sector_size()), param_set_of, u64::from(proof.sector_size()))
}

fn param_set_of<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(sector_size: u64) -> ParamSet {
    let pub_params = PublicParams::from_sector_size(sector_size);
    // Not `RegisteredUpdateProof::cache_params_path`: in filecoin-proofs-api
    // 19 that names the PoRep parameters. This is what the prover loads.
    let cache_id = <EmptySectorUpdateCompound<Tree> as CacheableParameters<EmptySectorUpdateCircuit<Tree>, PublicParams>>::cache_identifier(&pub_params);
    ParamSet::new(cache_id, sector_size, format!("SnapDeals {}", sector_size_name(sector_size)), move || {
        <EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>>>::blank_circuit(&pub_params)
    })
}

struct SnapJob<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    params: ParamSet,
    pub_inputs: PublicInputs,
    pub_params: PublicParams,
    vanilla: Vec<PartitionProof<Tree>>,
}

fn build<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(proof: RegisteredUpdateProof, req: &SnapRequest<'_>) -> Result<Arc<dyn JobSource>, String> {
    let size = u64::from(proof.sector_size());
    let config = SectorUpdateConfig::from_porep_config(&proof.as_v1_config());
    let partitions = usize::from(config.update_partitions);
    if req.vanilla_proofs.len() != partitions {
        return Err(format!("{proof:?} has {partitions} partitions, got {} vanilla_proofs", req.vanilla_proofs.len()));
    }
    let vanilla: Vec<PartitionProof<Tree>> = decode_vanilla(req.vanilla_proofs, "PartitionProof", size)?;
    let domain = |name: &str, v: &[u8]| -> Result<<TreeRHasher as Hasher>::Domain, String> {
        <TreeRHasher as Hasher>::Domain::try_from_bytes(&commitment(name, v)?).map_err(|e| format!("{name} is not a field element: {e:#}"))
    };
    let comm_d_new = DefaultPieceDomain::try_from_bytes(&commitment("comm_d_new", req.comm_d_new)?)
        .map_err(|e| format!("comm_d_new is not a field element: {e:#}"))?;
    let pub_inputs = PublicInputs {
        k: partitions,
        comm_r_old: domain("comm_r_old", req.comm_r_old)?,
        comm_d_new,
        comm_r_new: domain("comm_r_new", req.comm_r_new)?,
        h: config.h,
    };
    let pub_params = PublicParams::from_sector_size(size);
    // The vanilla proofs must prove these commitments: checked here (cheap
    // Merkle-path checks), so a mismatch is refused at submission with a
    // reason instead of failing deep inside the circuit.
    match EmptySectorUpdate::<Tree>::verify_all_partitions(&pub_params, &pub_inputs, &vanilla) {
        Ok(true) => {}
        Ok(false) => return Err("the vanilla proofs do not prove comm_r_old -> comm_r_new with comm_d_new (wrong or swapped commitments, or another sector's proofs)".into()),
        Err(e) => return Err(format!("the vanilla proofs do not fit {proof:?}: {e:#}")),
    }
    Ok(Arc::new(SnapJob { params: param_set_of::<Tree>(size), pub_inputs, pub_params, vanilla }))
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> JobSource for SnapJob<Tree> {
    fn kind_label(&self) -> &str {
        "snap-deals"
    }

    fn srs(&self) -> SrsSpec {
        self.params.srs_spec()
    }

    fn num_partitions(&self) -> usize {
        self.vanilla.len()
    }

    fn synthesize(&self, i: usize, buffers: AssignmentBuffers, ctx: SynthContext<'_>) -> Result<Assignment, SynthError> {
        let _span = tracing::debug_span!("snap_partition", partition = i).entered();
        let build = || {
            <EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, EmptySectorUpdateCircuit<Tree>>>::circuit(
                &self.pub_inputs,
                (),
                &self.vanilla[i],
                &self.pub_params,
                Some(i),
            )
            .map_err(|e| circuit_error(format!("SnapDeals partition {i}: {e:#}")))
        };
        let circuit = build()?;
        ctx.synthesize_native(
            |w| native::snap::write_partition(w, &circuit),
            |ctx, buffers| ctx.synthesize(build, buffers),
            buffers,
        )
    }
}
