//! The cuzk.v1 `ProvingEngine` service: translates wire messages to engine
//! calls and engine answers back to wire messages. What a proof kind means
//! is [`crate::kinds`]'s business; scheduling is the engine's.

use std::sync::Arc;
use std::time::Duration;

use kiln_groth16::Devices;
use kiln_pipeline::{Engine, JobOutcome, JobRequest, SubmitError};
use kiln_proto::v1::{
    await_proof_response, srs_status, AwaitProofRequest, AwaitProofResponse, BufferStageStatus, CancelProofRequest,
    CancelProofResponse, EvictSrsRequest, EvictSrsResponse, GetMetricsRequest, GetMetricsResponse, GetStatusRequest,
    GetStatusResponse, GpuStatus, PreloadSrsRequest, PreloadSrsResponse, ProveRequest, ProveResponse, QueueStatus,
    SrsStatus, SubmitProofRequest, SubmitProofResponse,
};
use kiln_proto::ProvingEngine;
use tonic::{Code, Request, Response, Status};

use crate::kinds::{self, KindContext, KindError};
use crate::limits::MessageMemory;
use crate::metrics::Metrics;

/// The service: a handle on the engine and what building jobs needs.
#[derive(Clone)]
pub struct Service {
    engine: Engine,
    kinds: Arc<KindContext>,
    gpus: Devices,
    metrics: Arc<Metrics>,
}

impl Service {
    /// A service that submits to `engine`, whose GPU workers run on `gpus`,
    /// and counts what it does in `metrics`.
    pub fn new(engine: Engine, kinds: KindContext, gpus: Devices, metrics: Arc<Metrics>) -> Self {
        Service { engine, kinds: Arc::new(kinds), gpus, metrics }
    }

    /// Checks the request, builds its job and queues it. Refusals are gRPC
    /// errors: INVALID_ARGUMENT (malformed), UNIMPLEMENTED (a kind this build
    /// cannot prove), RESOURCE_EXHAUSTED (can never fit the memory budget),
    /// UNAVAILABLE (shutting down).
    async fn submit(&self, req: SubmitProofRequest) -> Result<SubmitProofResponse, Status> {
        let wire_kind = kiln_proto::v1::ProofKind::try_from(req.proof_kind).map(|k| k.as_str_name()).unwrap_or("UNKNOWN");
        let submitted = match id_too_long("request_id", &req.request_id, Code::InvalidArgument) {
            None => self.submit_job(&req).await.map_err(capped),
            Some(e) => Err(e),
        };
        if let Err(e) = &submitted {
            self.metrics.jobs().refused(wire_kind, e.code());
        }
        submitted
    }

    async fn submit_job(&self, req: &SubmitProofRequest) -> Result<SubmitProofResponse, Status> {
        let job = kinds::build(req, &self.kinds).map_err(|e| {
            let status = match e {
                KindError::Invalid(m) => Status::invalid_argument(m),
                KindError::Unsupported(m) => Status::unimplemented(m),
            };
            tracing::info!(request_id = %req.request_id, code = ?status.code(), error = status.message(), "request refused");
            status
        })?;
        let kind_label = job.source.kind_label().to_string();
        let mut request =
            JobRequest::new(req.request_id.clone(), job.priority, job.source).with_payload_bytes(crate::limits::payload_bytes(req));
        if req.deadline_ms > 0 {
            request = request.with_deadline_in(Duration::from_millis(req.deadline_ms));
        }
        let engine = self.engine.clone();
        // Submission may map (or, for a first job, probe) a parameter file:
        // keep that off the async workers.
        let submitted = tokio::task::spawn_blocking(move || engine.submit(request))
            .await
            .map_err(|e| Status::internal(format!("submission panicked: {e}")))?
            .map_err(|e| match e {
                SubmitError::TooLarge(_) | SubmitError::Busy(_) => Status::resource_exhausted(e.to_string()),
                SubmitError::Invalid(_) => Status::invalid_argument(e.to_string()),
                SubmitError::ShuttingDown | SubmitError::NoProver(_) => Status::unavailable(e.to_string()),
            })?;
        if !submitted.existing {
            self.metrics.jobs().watch(self.engine.clone(), submitted.job_id.clone(), kind_label);
        }
        Ok(SubmitProofResponse {
            job_id: submitted.job_id,
            queue_position: u32::try_from(submitted.queue_position).unwrap_or(u32::MAX),
            // The engine places partitions on whichever worker is free, so
            // there is no single GPU to name at submission.
            assigned_gpu: String::new(),
            existing: submitted.existing,
        })
    }

    async fn await_job(&self, job_id: &str, timeout_ms: u64) -> Result<AwaitProofResponse, Status> {
        if job_id.is_empty() {
            return Err(Status::invalid_argument("job_id is required"));
        }
        if let Some(e) = id_too_long("job_id", job_id, Code::InvalidArgument) {
            return Err(e);
        }
        let timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms));
        let outcome = self.engine.wait(job_id, timeout).await;
        let cancelled = outcome == JobOutcome::Cancelled;
        let mut answer = outcome_to_wire(job_id, outcome);
        if cancelled && self.engine.is_shutting_down() {
            answer.error_message = "cancelled: kiln is shutting down (SIGTERM) and the job did not finish within its \
                                    shutdown_grace_secs; submit it again once kiln is back"
                .into();
        }
        Ok(answer)
    }
}

/// Maps an engine outcome to `AwaitProofResponse` (status, proof, timings).
pub fn outcome_to_wire(job_id: &str, outcome: JobOutcome) -> AwaitProofResponse {
    use await_proof_response::Status as S;
    let mut r = AwaitProofResponse { job_id: job_id.to_string(), ..Default::default() };
    match outcome {
        JobOutcome::Completed { proof, timings } => {
            r.set_status(S::Completed);
            r.proof = proof;
            r.queue_wait_ms = ms(timings.queue_wait);
            r.srs_load_ms = ms(timings.srs_load);
            r.synthesis_ms = ms(timings.synthesis);
            r.gpu_compute_ms = ms(timings.gpu_compute);
            r.total_ms = ms(timings.total);
        }
        JobOutcome::Failed(m) => {
            r.set_status(S::Failed);
            r.error_message = m;
        }
        JobOutcome::Cancelled => {
            r.set_status(S::Cancelled);
            r.error_message = "the job was cancelled".into();
        }
        JobOutcome::Timeout => {
            r.set_status(S::Timeout);
            r.error_message = "the job has not ended yet (it keeps running)".into();
        }
        JobOutcome::Unknown => {
            r.set_status(S::Unknown);
            r.error_message = format!("no job {job_id:?} (never submitted, or forgotten after its retention period)");
        }
    }
    r
}

/// Whether a submission error is about the request itself (an answer to
/// give back), not about the daemon (shutting down, a bug).
fn refused_for_its_content(code: Code) -> bool {
    matches!(code, Code::InvalidArgument | Code::Unimplemented | Code::ResourceExhausted)
}

/// The FAILED result of a request that never became a job.
fn refused(e: &Status) -> AwaitProofResponse {
    let mut r = AwaitProofResponse::default();
    r.set_status(await_proof_response::Status::Failed);
    r.error_message = format!("request refused ({:?}): {}", e.code(), e.message());
    r
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn clamp32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Maps the engine's status to `GetStatusResponse`; `gpus` are the devices
/// behind the GPU workers (none on a CPU-only engine, which lists its
/// backends in the kiln `backends` field instead).
pub fn status_to_wire(engine: &Engine, gpus: &Devices) -> GetStatusResponse {
    let st = engine.status();
    let gpus = gpus
        .status()
        .into_iter()
        .map(|info| {
            let (free, total) = (info.free_memory.unwrap_or(0), info.total_memory);
            // GPU workers are labelled "gpu<ordinal>:<worker>"; report the
            // job of the first busy worker on this device.
            let prefix = format!("gpu{}:", info.ordinal);
            let busy = st.workers.gpu_workers.iter().find(|w| w.backend.starts_with(&prefix) && w.current_job_id.is_some());
            GpuStatus {
                ordinal: info.ordinal as u32,
                name: info.name,
                vram_total_bytes: total,
                vram_free_bytes: free,
                current_job_id: busy.and_then(|w| w.current_job_id.clone()).unwrap_or_default(),
                current_proof_kind: busy.and_then(|w| w.current_kind_label.clone()).unwrap_or_default(),
            }
        })
        .collect();
    let loaded_srs = st
        .srs
        .iter()
        .map(|s| {
            let mut out = SrsStatus {
                circuit_id: s.id.clone(),
                size_bytes: s.size_bytes,
                ref_count: clamp32(s.ref_count),
                ..Default::default()
            };
            // Points resident in a device's memory are ready whatever the
            // host mapping's tier; points a device streams from the host
            // mapping for each proof are warm.
            out.set_tier(match s.tier {
                _ if !s.device_streamed.is_empty() => srs_status::Tier::Warm,
                _ if !s.device_resident.is_empty() => srs_status::Tier::Hot,
                kiln_pipeline::SrsTier::Hot => srs_status::Tier::Hot,
                kiln_pipeline::SrsTier::Warm => srs_status::Tier::Warm,
                kiln_pipeline::SrsTier::Cold => srs_status::Tier::Cold,
            });
            out
        })
        .collect();
    let queues = st
        .queues
        .iter()
        .map(|q| QueueStatus {
            proof_kind: q.kind_label.clone(),
            pending: clamp32(q.pending_jobs),
            in_progress: clamp32(q.in_progress_jobs),
        })
        .collect();
    let buffer_stages = st
        .buffers
        .stages
        .iter()
        .map(|s| BufferStageStatus { stage: s.stage.name().to_string(), count: s.count as u64, bytes: s.bytes })
        .collect();
    // Report pinned memory only when it really is page-locked; on a host
    // without a CUDA driver the pool holds ordinary memory (it is still
    // inside the host budget, reported in the kiln fields).
    let (pinned, pinned_limit) =
        if st.pinned_pool.page_locked { (st.pinned_pool.pinned_total_bytes, st.pinned_pool.max_bytes) } else { (0, 0) };
    GetStatusResponse {
        gpus,
        loaded_srs,
        queues,
        total_proofs_completed: st.jobs.completed,
        total_proofs_failed: st.jobs.failed,
        uptime_seconds: st.uptime_secs,
        pinned_memory_bytes: pinned,
        pinned_memory_limit_bytes: pinned_limit,
        // The whole budget: proving memory and the request memory beside it.
        host_memory_used_bytes: st.budget.reserved + st.requests.memory.reserved,
        host_memory_limit_bytes: st.budget.total + st.requests.memory.total,
        buffer_stages,
        backends: st.workers.gpu_workers.iter().map(|w| w.backend.clone()).collect(),
        total_proofs_cancelled: st.jobs.cancelled,
    }
}

#[tonic::async_trait]
impl ProvingEngine for Service {
    async fn submit_proof(&self, req: Request<SubmitProofRequest>) -> Result<Response<SubmitProofResponse>, Status> {
        // The message's request memory is held until it has become a job.
        let _message = req.extensions().get::<MessageMemory>().cloned();
        self.submit(req.into_inner()).await.map(Response::new)
    }

    async fn await_proof(&self, req: Request<AwaitProofRequest>) -> Result<Response<AwaitProofResponse>, Status> {
        let r = req.into_inner();
        self.await_job(&r.job_id, r.timeout_ms).await.map(Response::new)
    }

    /// Submit and wait without a limit. If the client goes away the job
    /// keeps running: resubmitting its request_id picks the answer up.
    ///
    /// A request refused for what it holds (malformed, a kind this build
    /// cannot prove, too large for the memory budget) ends as a FAILED
    /// result whose message says why: Curio's client reads the outcome of a
    /// Prove from its status. SubmitProof answers the same refusals with
    /// gRPC errors, having no status to put them in.
    async fn prove(&self, req: Request<ProveRequest>) -> Result<Response<ProveResponse>, Status> {
        let message = req.extensions().get::<MessageMemory>().cloned();
        let submit = req.into_inner().submit.ok_or_else(|| Status::invalid_argument("ProveRequest.submit is required"))?;
        let submitted = self.submit(submit).await;
        drop(message); // a job now (holding its payload's share), or refused
        let submitted = match submitted {
            Ok(s) => s,
            Err(e) if refused_for_its_content(e.code()) => return Ok(Response::new(ProveResponse { result: Some(refused(&e)) })),
            Err(e) => return Err(e),
        };
        let result = self.await_job(&submitted.job_id, 0).await?;
        Ok(Response::new(ProveResponse { result: Some(result) }))
    }

    async fn cancel_proof(&self, req: Request<CancelProofRequest>) -> Result<Response<CancelProofResponse>, Status> {
        let id = req.into_inner().job_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("job_id is required"));
        }
        if let Some(e) = id_too_long("job_id", &id, Code::InvalidArgument) {
            return Err(e);
        }
        let answer = self.engine.cancel(&id);
        if answer.is_some() {
            tracing::info!(job = %id, "cancelled over gRPC");
        }
        Ok(Response::new(CancelProofResponse { was_running: answer.unwrap_or(false), found: answer.is_some() }))
    }

    async fn get_status(&self, _req: Request<GetStatusRequest>) -> Result<Response<GetStatusResponse>, Status> {
        Ok(Response::new(status_to_wire(&self.engine, &self.gpus)))
    }

    async fn get_metrics(&self, _req: Request<GetMetricsRequest>) -> Result<Response<GetMetricsResponse>, Status> {
        Ok(Response::new(GetMetricsResponse { prometheus_text: self.metrics.render() }))
    }

    async fn preload_srs(&self, req: Request<PreloadSrsRequest>) -> Result<Response<PreloadSrsResponse>, Status> {
        let id = req.into_inner().circuit_id;
        if let Some(e) = id_too_long("circuit_id", &id, Code::NotFound) {
            return Err(e);
        }
        let spec = kinds::resolve_srs(&id, &self.kinds).map_err(|m| capped(Status::new(Code::NotFound, m)))?;
        let engine = self.engine.clone();
        // Loading may generate or map gigabytes and wait for memory.
        let res = tokio::task::spawn_blocking(move || engine.preload_srs(spec))
            .await
            .map_err(|e| Status::internal(format!("preload panicked: {e}")))?
            .map_err(|e| Status::failed_precondition(format!("cannot preload {id:?}: {e}")))?;
        Ok(Response::new(PreloadSrsResponse { already_loaded: res.already_loaded, load_time_ms: ms(res.load_time) }))
    }

    async fn evict_srs(&self, req: Request<EvictSrsRequest>) -> Result<Response<EvictSrsResponse>, Status> {
        let id = req.into_inner().circuit_id;
        // Only ids a kind can name are valid, loaded or not: a typo is
        // NOT_FOUND rather than a silent "was not loaded".
        if let Some(e) = id_too_long("circuit_id", &id, Code::NotFound) {
            return Err(e);
        }
        let spec = kinds::resolve_srs(&id, &self.kinds).map_err(|m| capped(Status::new(Code::NotFound, m)))?;
        let res = self.engine.evict_srs(&spec.id).map_err(|e| Status::failed_precondition(format!("cannot evict {id:?}: {e}")))?;
        Ok(Response::new(EvictSrsResponse { was_loaded: res.was_loaded, freed_bytes: res.freed_bytes }))
    }
}

/// Longest request, job or circuit id taken. Ids are kept per job and
/// echoed in answers; none the daemon makes or Curio sends comes near.
pub const MAX_ID_BYTES: usize = 256;

/// Longest gRPC error message sent. It travels in the `grpc-message`
/// trailer, and a client's HTTP/2 stack drops the whole connection
/// (GOAWAY) over a header list larger than it takes (16 KiB for hyper's),
/// so an error echoing a hostile input must not carry all of it.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 2048;

/// The refusal (with `code`) of an id longer than [`MAX_ID_BYTES`],
/// which does not echo it.
fn id_too_long(field: &str, id: &str, code: Code) -> Option<Status> {
    (id.len() > MAX_ID_BYTES).then(|| Status::new(code, format!("{field} is {} bytes long; ids are at most {MAX_ID_BYTES} bytes", id.len())))
}

/// `status` with its message cut to [`MAX_ERROR_MESSAGE_BYTES`] (at a
/// character boundary, saying how much was left out).
fn capped(status: Status) -> Status {
    let m = status.message();
    if m.len() <= MAX_ERROR_MESSAGE_BYTES {
        return status;
    }
    let mut end = MAX_ERROR_MESSAGE_BYTES;
    while !m.is_char_boundary(end) {
        end -= 1;
    }
    Status::new(status.code(), format!("{}... ({} more bytes)", &m[..end], m.len() - end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_error_messages_are_cut_at_a_character_and_long_ids_are_not_echoed() {
        let short = capped(Status::not_found("no such id"));
        assert_eq!(short.message(), "no such id");
        // 'é' is two bytes: the cut may not land inside one.
        let long = capped(Status::invalid_argument(format!("x{}", "é".repeat(5000))));
        assert_eq!(long.code(), Code::InvalidArgument);
        assert!(long.message().len() < MAX_ERROR_MESSAGE_BYTES + 32, "{}", long.message().len());
        // 1 + 2 x 5000 bytes, cut at 2047 (2048 is inside an 'é').
        assert!(long.message().ends_with("é... (7954 more bytes)"), "{}", long.message());
        let id = "9".repeat(MAX_ID_BYTES + 1);
        let e = id_too_long("circuit_id", &id, Code::NotFound).unwrap();
        assert_eq!(e.code(), Code::NotFound);
        assert!(!e.message().contains(&id[..64]) && e.message().contains("257 bytes"), "{}", e.message());
        assert!(id_too_long("request_id", &id[..MAX_ID_BYTES], Code::InvalidArgument).is_none());
    }
}
