//! What a request may take from the daemon: every byte of a message is
//! reserved from the engine's request memory as it arrives
//! ([`RequestMemoryLayer`]), and the job made from it reserves what its
//! decoded payload holds ([`payload_bytes`]) for as long as it runs. A
//! request that does not fit is refused with RESOURCE_EXHAUSTED, and
//! nothing else changes: proving memory is never touched by a client.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use kiln_memory::MemoryReservation;
use kiln_pipeline::Engine;
use kiln_proto::v1::SubmitProofRequest;
use parking_lot::Mutex;
use tonic::body::BoxBody;
use tonic::Status;

/// Bytes held per byte of a message while it is received and decoded:
/// tonic's receive buffer (grown by doubling, so up to twice the message)
/// and the decoded message.
pub const MESSAGE_COPIES: u64 = 3;

/// Bytes a decoded job holds per byte of its wire payload, by what the
/// payload is, as an upper estimate: PoRep's C1 JSON is base64 of JSON,
/// denser once parsed; bincode vanilla proofs grow into vectors of field
/// elements and Merkle paths.
pub const JSON_PAYLOAD_FACTOR: u64 = 2;
pub const BINCODE_PAYLOAD_FACTOR: u64 = 3;

/// What the job built from `req` holds for its payload, as reserved from
/// the request memory while it is queued or running.
pub fn payload_bytes(req: &SubmitProofRequest) -> u64 {
    let json = req.vanilla_proof.len() as u64;
    let bincode: u64 = req.vanilla_proofs.iter().map(|p| p.len() as u64).sum();
    json * JSON_PAYLOAD_FACTOR + bincode * BINCODE_PAYLOAD_FACTOR
}

/// The request memory one call's message holds, shared between the body
/// that reserves it as frames arrive and the handler that keeps it until
/// the message is turned into a job (found in the request's extensions).
#[derive(Clone, Default)]
pub struct MessageMemory(Arc<Mutex<Vec<MemoryReservation>>>);

impl MessageMemory {
    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        self.0.lock().iter().map(MemoryReservation::bytes).sum()
    }
}

/// A tower layer (tonic's `Server::layer`) that counts every request body
/// against the engine's request memory.
#[derive(Clone)]
pub struct RequestMemoryLayer {
    engine: Engine,
}

impl RequestMemoryLayer {
    pub fn new(engine: Engine) -> Self {
        RequestMemoryLayer { engine }
    }
}

impl<S> tower::Layer<S> for RequestMemoryLayer {
    type Service = RequestMemoryService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        RequestMemoryService { inner, engine: self.engine.clone() }
    }
}

#[derive(Clone)]
pub struct RequestMemoryService<S> {
    inner: S,
    engine: Engine,
}

impl<S> tower::Service<http::Request<BoxBody>> for RequestMemoryService<S>
where
    S: tower::Service<http::Request<BoxBody>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<BoxBody>) -> Self::Future {
        let memory = MessageMemory::default();
        req.extensions_mut().insert(memory.clone());
        let engine = self.engine.clone();
        self.inner.call(req.map(|inner| tonic::body::boxed(CountedBody { inner, engine, memory })))
    }
}

/// A request body whose data frames are reserved from the request memory
/// before they are handed on; over the limit it ends with
/// RESOURCE_EXHAUSTED, which the call answers.
struct CountedBody {
    inner: BoxBody,
    engine: Engine,
    memory: MessageMemory,
}

impl Body for CountedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            other => return other,
        };
        if let Some(data) = frame.data_ref() {
            let bytes = data.len() as u64 * MESSAGE_COPIES;
            match self.engine.reserve_request_memory(bytes) {
                Ok(r) => self.memory.0.lock().push(r),
                Err(why) => {
                    let held = self.memory.bytes();
                    tracing::info!(held, refused = bytes, error = %why, "request refused while it was received");
                    return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                        "the message does not fit the request memory (its first {held} bytes held): {why}"
                    )))));
                }
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
