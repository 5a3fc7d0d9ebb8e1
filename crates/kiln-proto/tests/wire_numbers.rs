//! Pins the cuzk.v1 wire facts (field numbers, enum values, RPC paths) to
//! the table in cuzk-v1-api.md: Curio's client must work unchanged, so a
//! renumbered field is a bug even when everything else still compiles.

// The macro fills one field and defaults the rest; for single-field messages
// the `..Default::default()` is redundant but keeps the macro uniform.
#![allow(clippy::needless_update)]

use kiln_proto::v1::*;
use prost::Message;

/// The field number of the only field set in `m`.
fn field_number(m: &impl Message) -> u64 {
    let bytes = m.encode_to_vec();
    assert!(!bytes.is_empty(), "the field was not encoded");
    let key = prost::encoding::decode_varint(&mut &bytes[..]).unwrap();
    key >> 3
}

macro_rules! numbers {
    ($ty:ident { $($field:ident : $value:expr => $num:expr),* $(,)? }) => {
        $(
            let m = $ty { $field: $value, ..Default::default() };
            assert_eq!(field_number(&m), $num, "{}.{}", stringify!($ty), stringify!($field));
        )*
    };
}

#[test]
fn field_numbers_match_cuzk_v1() {
    numbers!(SubmitProofRequest {
        request_id: "x".into() => 1, proof_kind: 1 => 2, sector_size: 1 => 3, registered_proof: 1 => 4, priority: 1 => 5,
        vanilla_proof: vec![1] => 10, vanilla_proofs: vec![vec![1]] => 11, sector_number: 1 => 20, miner_id: 1 => 21,
        randomness: vec![1] => 22, partition_index: 1 => 23, comm_r_old: vec![1] => 30, comm_r_new: vec![1] => 31,
        comm_d_new: vec![1] => 32,
    });
    numbers!(SubmitProofResponse { job_id: "x".into() => 1, queue_position: 1 => 2, assigned_gpu: "x".into() => 3 });
    numbers!(AwaitProofRequest { job_id: "x".into() => 1, timeout_ms: 1 => 2 });
    numbers!(AwaitProofResponse {
        job_id: "x".into() => 1, status: 1 => 2, proof: vec![1] => 3, error_message: "x".into() => 4, queue_wait_ms: 1 => 10,
        srs_load_ms: 1 => 11, synthesis_ms: 1 => 12, gpu_compute_ms: 1 => 13, total_ms: 1 => 14,
    });
    numbers!(ProveRequest { submit: Some(SubmitProofRequest::default()) => 1 });
    numbers!(ProveResponse { result: Some(AwaitProofResponse::default()) => 1 });
    numbers!(CancelProofRequest { job_id: "x".into() => 1 });
    numbers!(CancelProofResponse { was_running: true => 1 });
    numbers!(GetStatusResponse {
        gpus: vec![GpuStatus::default()] => 1, loaded_srs: vec![SrsStatus::default()] => 2, queues: vec![QueueStatus::default()] => 3,
        total_proofs_completed: 1 => 4, total_proofs_failed: 1 => 5, uptime_seconds: 1 => 6, pinned_memory_bytes: 1 => 7,
        pinned_memory_limit_bytes: 1 => 8,
    });
    numbers!(GpuStatus {
        ordinal: 1 => 1, name: "x".into() => 2, vram_total_bytes: 1 => 3, vram_free_bytes: 1 => 4, current_job_id: "x".into() => 5,
        current_proof_kind: "x".into() => 6,
    });
    numbers!(SrsStatus { circuit_id: "x".into() => 1, tier: 1 => 2, size_bytes: 1 => 3, ref_count: 1 => 4 });
    numbers!(QueueStatus { proof_kind: "x".into() => 1, pending: 1 => 2, in_progress: 1 => 3 });
    numbers!(PreloadSrsRequest { circuit_id: "x".into() => 1 });
    numbers!(PreloadSrsResponse { already_loaded: true => 1, load_time_ms: 1 => 2 });
    numbers!(EvictSrsRequest { circuit_id: "x".into() => 1 });
    numbers!(EvictSrsResponse { was_loaded: true => 1, freed_bytes: 1 => 2 });
    numbers!(GetMetricsResponse { prometheus_text: "x".into() => 1 });
}

#[test]
fn kiln_additions_stay_at_100_and_up() {
    numbers!(SubmitProofRequest {
        synthetic_log_size: 1 => 100, synthetic_partitions: 1 => 101, synthetic_kind: "x".into() => 102,
        synthetic_inputs: 1 => 103, synthetic_seed: 1 => 104, deadline_ms: 1 => 110,
    });
    numbers!(SubmitProofResponse { existing: true => 100 });
    numbers!(CancelProofResponse { found: true => 100 });
    numbers!(GetStatusResponse {
        host_memory_used_bytes: 1 => 100, host_memory_limit_bytes: 1 => 101, buffer_stages: vec![BufferStageStatus::default()] => 102,
        backends: vec!["x".into()] => 103, total_proofs_cancelled: 1 => 104,
    });
    assert_eq!(ProofKind::KilnSynthetic as i32, 100);
}

#[test]
fn enum_values_match_cuzk_v1() {
    use await_proof_response::Status;
    use srs_status::Tier;
    let kinds = [ProofKind::Unspecified, ProofKind::PorepSealCommit, ProofKind::SnapDealsUpdate, ProofKind::WindowPostPartition, ProofKind::WinningPost];
    assert_eq!(kinds.map(|k| k as i32), [0, 1, 2, 3, 4]);
    assert_eq!(ProofKind::PorepSealCommit.as_str_name(), "POREP_SEAL_COMMIT");
    assert_eq!(ProofKind::Unspecified.as_str_name(), "PROOF_KIND_UNSPECIFIED");
    let prios = [Priority::Unspecified, Priority::Low, Priority::Normal, Priority::High, Priority::Critical];
    assert_eq!(prios.map(|p| p as i32), [0, 1, 2, 3, 4]);
    assert_eq!(Priority::Critical.as_str_name(), "CRITICAL");
    let st = [Status::Unknown, Status::Completed, Status::Failed, Status::Cancelled, Status::Timeout];
    assert_eq!(st.map(|s| s as i32), [0, 1, 2, 3, 4]);
    assert_eq!([Tier::Hot, Tier::Warm, Tier::Cold].map(|t| t as i32), [0, 1, 2]);
}

#[test]
fn service_and_rpc_names_match_cuzk_v1() {
    use kiln_proto::v1::proving_engine_server::SERVICE_NAME;
    assert_eq!(SERVICE_NAME, "cuzk.v1.ProvingEngine");
    let proto = include_str!("../../../proto/cuzk/v1/proving.proto");
    assert!(proto.contains("package cuzk.v1;"));
    for rpc in ["SubmitProof", "AwaitProof", "Prove", "CancelProof", "GetStatus", "GetMetrics", "PreloadSRS", "EvictSRS"] {
        assert!(proto.contains(&format!("rpc {rpc}(")), "rpc {rpc}");
    }
}
