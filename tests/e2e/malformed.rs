//! Malformed requests get a clear gRPC error and never become jobs, while a
//! real job keeps going.

use std::time::Duration;

use crate::harness::{start, synthetic, verify, Transport};
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{
    AwaitProofRequest, GetStatusRequest, Priority, ProofKind, ProveRequest, SubmitProofRequest,
};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Code;

use crate::SERIAL;

fn kind(k: ProofKind) -> SubmitProofRequest {
    SubmitProofRequest { proof_kind: k as i32, ..Default::default() }
}

/// (what, request, expected code, words the message must contain)
fn bad_requests() -> Vec<(&'static str, SubmitProofRequest, Code, &'static str)> {
    let post = |k| SubmitProofRequest { vanilla_proofs: vec![vec![7; 100]], randomness: vec![1; 32], ..kind(k) };
    let snap = SubmitProofRequest {
        vanilla_proofs: vec![vec![7; 10]],
        comm_r_old: vec![0; 32],
        comm_r_new: vec![0; 32],
        comm_d_new: vec![0; 32],
        ..kind(ProofKind::SnapDealsUpdate)
    };
    let porep_ok_shape = br#"{"SectorNum": 3, "Phase1Out": "eyJyZWdpc3RlcmVkX3Byb29mIjoiU3RhY2tlZERyZzJLaUJWMV8xIn0=", "SectorSize": 2048}"#;
    vec![
        ("unknown kind", SubmitProofRequest { proof_kind: 77, ..Default::default() }, Code::InvalidArgument, "unknown proof_kind 77"),
        ("unspecified kind", kind(ProofKind::Unspecified), Code::InvalidArgument, "proof_kind is required"),
        (
            "unknown priority",
            SubmitProofRequest { priority: 12, ..synthetic("p", 8, 1, Priority::Normal, 0) },
            Code::InvalidArgument,
            "unknown priority 12",
        ),
        ("short randomness", SubmitProofRequest { randomness: vec![1; 31], ..post(ProofKind::WinningPost) }, Code::InvalidArgument, "randomness must be 32 bytes, got 31"),
        ("no vanilla proofs", SubmitProofRequest { vanilla_proofs: vec![], ..post(ProofKind::WindowPostPartition) }, Code::InvalidArgument, "vanilla_proofs is empty"),
        ("long commitment", SubmitProofRequest { comm_d_new: vec![0; 64], ..snap.clone() }, Code::InvalidArgument, "comm_d_new must be 32 bytes, got 64"),
        (
            "garbage C1 payload",
            SubmitProofRequest { vanilla_proof: vec![0xff, 0x00, 0x13, 0x37], ..kind(ProofKind::PorepSealCommit) },
            Code::InvalidArgument,
            "vanilla_proof is not JSON",
        ),
        (
            "C1 JSON without base64",
            SubmitProofRequest { vanilla_proof: br#"{"SectorNum": 3, "Phase1Out": "!!", "SectorSize": 2048}"#.to_vec(), ..kind(ProofKind::PorepSealCommit) },
            Code::InvalidArgument,
            "Phase1Out is not base64",
        ),
        (
            "PoRep envelope around a C1 output with fields missing",
            SubmitProofRequest { vanilla_proof: porep_ok_shape.to_vec(), ..kind(ProofKind::PorepSealCommit) },
            Code::InvalidArgument,
            "POREP_SEAL_COMMIT: vanilla_proof.Phase1Out is not a filecoin-proofs 19 SealCommitPhase1Output",
        ),
        ("WinningPoSt of junk bytes", post(ProofKind::WinningPost), Code::InvalidArgument, "vanilla_proofs[0] is not a bincode FallbackPoStSectorProof"),
        ("SnapDeals of junk bytes", snap, Code::InvalidArgument, "vanilla_proofs[0] is not a bincode PartitionProof"),
        ("synthetic size 0", synthetic("s0", 0, 1, Priority::Normal, 0), Code::InvalidArgument, "synthetic_log_size must be between 2 and 20, got 0"),
        ("synthetic size 40", synthetic("s40", 40, 1, Priority::Normal, 0), Code::InvalidArgument, "got 40"),
        (
            "synthetic with a payload",
            SubmitProofRequest { vanilla_proof: b"junk".to_vec(), ..synthetic("sj", 8, 1, Priority::Normal, 0) },
            Code::InvalidArgument,
            "takes no vanilla_proof",
        ),
        (
            "synthetic unknown shape",
            SubmitProofRequest { synthetic_kind: "sparse".into(), ..synthetic("sk", 8, 1, Priority::Normal, 0) },
            Code::InvalidArgument,
            "unknown workload kind",
        ),
    ]
}

/// Sends raw bytes as the request message (not a valid protobuf) and
/// decodes nothing: what a broken or hostile client sends.
#[derive(Clone, Default)]
struct RawCodec;
impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = ();
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}
impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}
impl Decoder for RawCodec {
    type Item = ();
    type Error = tonic::Status;
    fn decode(&mut self, _src: &mut DecodeBuf<'_>) -> Result<Option<()>, tonic::Status> {
        Ok(Some(()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_clear_errors_while_other_jobs_complete() {
    let _serial = SERIAL.lock().await;
    let d = start(Transport::Unix, &[]).await;
    let mut c = d.client().await;
    let good = synthetic("good", 10, 3, Priority::Normal, 11);
    let sub = c.submit_proof(good.clone()).await.unwrap().into_inner();

    for (what, req, code, words) in bad_requests() {
        let e = c.submit_proof(req.clone()).await.expect_err(what);
        assert_eq!(e.code(), code, "{what}: {e:?}");
        assert!(e.message().contains(words), "{what}: {:?} lacks {words:?}", e.message());
        // Prove answers with a FAILED result saying the same.
        let r = c.prove(ProveRequest { submit: Some(req) }).await.expect(what).into_inner().result.unwrap();
        assert_eq!(r.status(), Status::Failed, "{what} via Prove");
        assert!(r.error_message.contains(&format!("({code:?})")) && r.error_message.contains(words), "{what} via Prove: {:?}", r.error_message);
    }
    let e = c.prove(ProveRequest { submit: None }).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    // Bytes that are no protobuf at all.
    let mut raw = tonic::client::Grpc::new(kiln_daemon::client::channel(&d.grpc().to_string()).await.unwrap());
    raw.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/cuzk.v1.ProvingEngine/SubmitProof");
    let e = raw.unary(tonic::Request::new(vec![0xff; 64]), path, RawCodec).await.unwrap_err();
    assert_ne!(e.code(), Code::Ok);
    assert!(e.message().to_lowercase().contains("decode"), "{e:?}");

    // Unknown ids are answered, not crashed on.
    let r = c.await_proof(AwaitProofRequest { job_id: "no-such-job".into(), timeout_ms: 10 }).await.unwrap().into_inner();
    assert_eq!(r.status(), Status::Unknown);
    assert!(r.error_message.contains("no job \"no-such-job\""), "{}", r.error_message);
    let e = c.await_proof(AwaitProofRequest { job_id: String::new(), timeout_ms: 0 }).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    let r = c.await_proof(AwaitProofRequest { job_id: sub.job_id, timeout_ms: 0 }).await.unwrap().into_inner();
    assert_eq!(r.status(), Status::Completed, "{}", r.error_message);
    verify(&good, &r.proof).unwrap();
    let st = c.get_status(GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!((st.total_proofs_completed, st.total_proofs_failed), (1, 0), "refused requests never became jobs");
    d.wait_idle(Duration::from_secs(10)).await;
    d.stop().await;
}
