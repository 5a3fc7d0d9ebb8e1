//! Non-interactive PoRep (`StackedDrg*V1_2_Feat_NonInteractivePoRep`,
//! FIP-0090): the partitions are ordinary StackedDrg circuits (13 at test
//! sizes, 126 at 32/64 GiB) that kiln proves like any PoRep partition, but
//! the answer of `seal_commit_phase2` is not their concatenation: it is a
//! SnarkPack aggregate of them, made by filecoin-proofs'
//! `aggregate_seal_commit_proofs` (bellperson's `aggregate_proofs`, on the
//! CPU) against the inner-product SRS `v28-fil-inner-product-v1.srs`.
//!
//! kiln calls that same function on its (verified) partition proofs, so the
//! bytes are exactly filecoin-proofs' format, then checks the aggregate with
//! `verify_aggregate_seal_commit_proofs`, what `verify_seal` runs for these
//! proofs. The SRS is production data fetched by paramfetch (it is listed in
//! storage-proofs' `srs-inner-product.json`); kiln never makes it, and a job
//! is refused at once when the file is missing rather than after its
//! partitions were proved.

use std::path::PathBuf;
use std::time::Instant;

use bellperson::groth16::aggregate::AggregateVersion;
use filecoin_hashers::Hasher;
use filecoin_proofs::{aggregate_seal_commit_proofs, verify_aggregate_seal_commit_proofs, DefaultPieceDomain, DefaultPieceHasher, PoRepConfig, SealCommitOutput};
use filecoin_proofs_api::RegisteredSealProof;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{parameter_cache_dir, parameter_cache_srs_key_path, SRS_SHARED_KEY_NAME};
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg};

/// The SnarkPack version filecoin-proofs 19 uses for NI-PoRep (in
/// `seal_commit_phase2` and `verify_seal`).
const VERSION: AggregateVersion = AggregateVersion::V2;

/// Where filecoin-proofs reads the inner-product SRS: one file for every
/// sector size and proof count, `v28-fil-inner-product-v1.srs` in
/// `FIL_PROOFS_PARAMETER_CACHE`.
pub fn srs_path() -> PathBuf {
    parameter_cache_srs_key_path(SRS_SHARED_KEY_NAME, 0)
}

/// `Ok` when the SRS file is there; otherwise the error a request gets,
/// naming the file and the cache directory.
pub fn check_srs(proof: RegisteredSealProof) -> Result<(), String> {
    let path = srs_path();
    if path.is_file() {
        return Ok(());
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Err(format!(
        "{proof:?}: non-interactive PoRep aggregates its partition proofs with SnarkPack, which needs the inner-product SRS {name}; \
         it is missing from the parameter cache {} (FIL_PROOFS_PARAMETER_CACHE). kiln never generates it: fetch it with paramfetch \
         (storage-proofs' srs-inner-product.json; `curio fetch-params` / `lotus fetch-params` download it)",
        parameter_cache_dir().display()
    ))
}

type PubInputs<Tree> = stacked::PublicInputs<<<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain, DefaultPieceDomain>;

/// What turns a NI-PoRep job's partition proofs into its answer.
pub(crate) struct Aggregation {
    pub config: PoRepConfig,
    pub comm_r: [u8; 32],
    pub seed: [u8; 32],
}

impl Aggregation {
    /// The SnarkPack aggregate of `partition_proofs` (192 bytes each, in
    /// partition order), as `seal_commit_phase2` returns it, checked the
    /// way `verify_seal` checks it.
    pub fn aggregate<Tree: 'static + MerkleTreeTrait>(
        &self,
        pub_inputs: &PubInputs<Tree>,
        pub_params: &stacked::PublicParams<Tree>,
        partition_proofs: Vec<u8>,
    ) -> Result<Vec<u8>, String> {
        let started = Instant::now();
        let partitions = usize::from(self.config.partitions);
        let srs = srs_path();
        let fail = |what: &str, e: anyhow::Error| format!("{what} ({partitions} partition proofs, inner-product SRS {}): {e:#}", srs.display());
        let output = SealCommitOutput { proof: partition_proofs };
        let aggregate = aggregate_seal_commit_proofs::<Tree>(&self.config, &[self.comm_r], &[self.seed], &[output], VERSION)
            .map_err(|e| fail("SnarkPack aggregation of the NI-PoRep partition proofs failed", e))?;
        let aggregated = started.elapsed();
        // verify_seal's check, from the job's own public inputs (the C1
        // output's replica id) instead of the prover and sector ids.
        let inputs = (0..partitions)
            .map(|k| {
                <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::generate_public_inputs(
                    pub_inputs,
                    pub_params,
                    Some(k),
                )
            })
            .collect::<anyhow::Result<Vec<_>>>()
            .map_err(|e| format!("NI-PoRep public inputs: {e:#}"))?;
        let ok = verify_aggregate_seal_commit_proofs::<Tree>(&self.config, aggregate.clone(), &[self.comm_r], &[self.seed], inputs, VERSION)
            .map_err(|e| fail("verifying the NI-PoRep aggregate failed", e))?;
        if !ok {
            return Err(format!("the SnarkPack aggregate of {partitions} verified NI-PoRep partition proofs does not verify (inner-product SRS {})", srs.display()));
        }
        tracing::info!(partitions, bytes = aggregate.len(), ?aggregated, total = ?started.elapsed(), "NI-PoRep partition proofs aggregated and verified");
        Ok(aggregate)
    }
}
