//! Fuzzing (issue 22, part 1), bounded: hostile SubmitProof requests of
//! every kind, mutations of valid 2 KiB payloads (the PoRep C1 envelope's
//! JSON, the SnapDeals and PoSt vanilla proofs' bincode) and PreloadSRS ids
//! go through the daemon's request -> job path (`kinds::build`,
//! `kinds::resolve_srs`). Pass: no panic, and every refusal says something.
//!
//! Cases per property: `KILN_FUZZ_CASES` (default: a few dozen, so the set
//! runs in well under a minute in debug); `cargo xtask fuzz --cases N` runs
//! the same targets longer.

mod mutate;
mod payloads;
mod synthesis;

use kiln_daemon::kinds::{self, KindContext, KindError};
use kiln_proto::v1::{ProofKind, SubmitProofRequest};
use prost::Message;
use proptest::prelude::*;

pub fn cases(default: u32) -> u32 {
    std::env::var("KILN_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

pub fn config(default: u32) -> ProptestConfig {
    // Failures are reported with their input; no regression files are kept.
    ProptestConfig { cases: cases(default), failure_persistence: None, ..ProptestConfig::default() }
}

fn ctx() -> KindContext {
    KindContext { synthetic_params_dir: std::env::temp_dir().join("kiln-fuzz-params-unused"), max_synthetic_log_size: 16 }
}

/// `build` must not panic; a refusal must say why.
pub fn build_ok_or_clear(req: &SubmitProofRequest) -> Result<(), TestCaseError> {
    match kinds::build(req, &ctx()) {
        Ok(_) => Ok(()),
        Err(KindError::Invalid(m) | KindError::Unsupported(m)) => {
            prop_assert!(m.len() > 10, "an unclear refusal: {m:?}");
            Ok(())
        }
    }
}

const KINDS: [ProofKind; 6] = [
    ProofKind::Unspecified,
    ProofKind::PorepSealCommit,
    ProofKind::SnapDealsUpdate,
    ProofKind::WindowPostPartition,
    ProofKind::WinningPost,
    ProofKind::KilnSynthetic,
];

fn some_bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![Just(Vec::new()), proptest::collection::vec(any::<u8>(), 0..max), (0usize..64).prop_map(|n| vec![0; n])]
}

/// Numbers near the values the fields take, and any.
fn wire_u64() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..20, Just(2048), Just(8 << 20), Just(512 << 20), Just(32 << 30), Just(64 << 30), any::<u64>()]
}

prop_compose! {
    /// A request of any kind with fields of any shape.
    fn any_request()(
        kind in proptest::sample::select(&KINDS[..]).prop_map(|k| k as i32),
        odd_kind in any::<i32>(),
        priority in prop_oneof![0i32..5, any::<i32>()],
        registered_proof in wire_u64(),
        sector_size in wire_u64(),
        sector_number in wire_u64(),
        miner_id in wire_u64(),
        partition_index in prop_oneof![0u32..4, any::<u32>()],
        vanilla_proof in some_bytes(512),
        vanilla_proofs in proptest::collection::vec(some_bytes(256), 0..4),
        commitments in proptest::collection::vec(some_bytes(40), 4),
        synth in (0u32..40, any::<u32>(), 0u32..300, prop_oneof![Just(String::new()), Just("dense".to_string()), ".{0,12}"], any::<u64>()),
        use_odd in proptest::bool::weighted(0.1),
    ) -> SubmitProofRequest {
        let (log, inputs, partitions, synth_kind, seed) = synth;
        SubmitProofRequest {
            request_id: "fuzz".into(),
            proof_kind: if use_odd { odd_kind } else { kind },
            priority,
            registered_proof,
            sector_size,
            sector_number,
            miner_id,
            partition_index,
            vanilla_proof,
            vanilla_proofs,
            randomness: commitments[0].clone(),
            comm_r_old: commitments[1].clone(),
            comm_r_new: commitments[2].clone(),
            comm_d_new: commitments[3].clone(),
            synthetic_log_size: log,
            synthetic_inputs: inputs % 128,
            synthetic_partitions: partitions,
            synthetic_kind: synth_kind,
            synthetic_seed: seed,
            ..Default::default()
        }
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// Random bytes as a protobuf SubmitProofRequest: what decodes goes
    /// through `build` for its own kind and for every other kind.
    #[test]
    fn random_bytes_as_a_request(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        if let Ok(mut req) = SubmitProofRequest::decode(&bytes[..]) {
            build_ok_or_clear(&req)?;
            for k in KINDS {
                req.proof_kind = k as i32;
                build_ok_or_clear(&req)?;
            }
        }
    }

    /// Requests of every kind with fields of every shape.
    #[test]
    fn structured_requests(req in any_request()) {
        build_ok_or_clear(&req)?;
        // Through the wire form and back, as tonic hands it over.
        let back = SubmitProofRequest::decode(&req.encode_to_vec()[..]).unwrap();
        prop_assert_eq!(&back, &req);
    }

    /// PreloadSRS / EvictSRS ids: any string, and ones shaped like the ids
    /// the daemon knows, with hostile numbers in them.
    #[test]
    fn srs_ids(id in prop_oneof![
        ".{0,80}",
        "(synthetic-(dense|filecoin-like|[a-z]{0,6})-2\\^[0-9]{0,22}(-[0-9]{0,22}in)?)",
        "(porep|snap|wpost|winning|window-post|winning-post)-[0-9]{0,22}(g|k|m|GiB|KiB|MiB|[A-Za-z]{0,3})",
        "(stacked-proof-of-replication|proof-of-spacetime-fallback|empty-sector-update)-[a-z0-9_-]{0,90}",
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]) {
        if let Err(m) = kinds::resolve_srs(&id, &ctx()) {
            prop_assert!(m.len() > 10, "an unclear refusal: {:?}", m);
        }
    }
}

mod valid {
    use super::*;
    use kiln_filecoin::payload::PayloadKind;

    #[test]
    fn the_unmutated_payloads_build() {
        for k in PayloadKind::ALL {
            let req = payloads::request(k);
            if let Err(e) = kinds::build(&req, &ctx()) {
                panic!("{k:?}: {e:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(config(48))]

        /// The C1 output's JSON mutated: challenge counts, path lengths,
        /// truncated arrays, numbers out of range, missing keys.
        #[test]
        fn porep_c1_json_mutations(ops in mutate::ops(4)) {
            let mut req = payloads::request(PayloadKind::PorepSealCommit);
            req.vanilla_proof = mutate::porep_envelope(&req.vanilla_proof, &ops);
            build_ok_or_clear(&req)?;
        }

        /// SnapDeals partition proofs' bincode mutated.
        #[test]
        fn snap_bincode_mutations(ops in mutate::ops(4)) {
            let mut req = payloads::request(PayloadKind::SnapDealsUpdate);
            mutate::proofs(&mut req.vanilla_proofs, &ops);
            build_ok_or_clear(&req)?;
        }

        /// WindowPoSt and WinningPoSt sector proofs' bincode mutated.
        #[test]
        fn post_bincode_mutations(winning in any::<bool>(), ops in mutate::ops(4)) {
            let kind = if winning { PayloadKind::WinningPost } else { PayloadKind::WindowPostPartition };
            let mut req = payloads::request(kind);
            mutate::proofs(&mut req.vanilla_proofs, &ops);
            build_ok_or_clear(&req)?;
        }
    }
}
