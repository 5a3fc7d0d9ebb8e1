//! The cuzk.v1 `ProvingEngine` service: translates wire messages to engine
//! calls and engine answers back to wire messages. What a proof kind means
//! is [`crate::kinds`]'s business; scheduling is the engine's.

use std::sync::Arc;
use std::time::Duration;

use kiln_groth16::GpuContext;
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
use crate::metrics::Metrics;

/// The service: a handle on the engine and what building jobs needs.
#[derive(Clone)]
pub struct Service {
    engine: Engine,
    kinds: Arc<KindContext>,
    gpus: Arc<Vec<Arc<GpuContext>>>,
    metrics: Arc<Metrics>,
}

impl Service {
    /// A service that submits to `engine`, whose GPU workers run on `gpus`,
    /// and counts what it does in `metrics`.
    pub fn new(engine: Engine, kinds: KindContext, gpus: Vec<Arc<GpuContext>>, metrics: Arc<Metrics>) -> Self {
        Service { engine, kinds: Arc::new(kinds), gpus: Arc::new(gpus), metrics }
    }

    /// Checks the request, builds its job and queues it. Refusals are gRPC
    /// errors: INVALID_ARGUMENT (malformed), UNIMPLEMENTED (a kind this build
    /// cannot prove), RESOURCE_EXHAUSTED (can never fit the memory budget),
    /// UNAVAILABLE (shutting down).
    async fn submit(&self, req: SubmitProofRequest) -> Result<SubmitProofResponse, Status> {
        let wire_kind = kiln_proto::v1::ProofKind::try_from(req.proof_kind).map(|k| k.as_str_name()).unwrap_or("UNKNOWN");
        let submitted = self.submit_job(&req).await;
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
        let mut request = JobRequest::new(req.request_id.clone(), job.priority, job.source);
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
                SubmitError::TooLarge(_) => Status::resource_exhausted(e.to_string()),
                SubmitError::Invalid(_) => Status::invalid_argument(e.to_string()),
                SubmitError::ShuttingDown => Status::unavailable(e.to_string()),
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
        let timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms));
        let outcome = self.engine.wait(job_id, timeout).await;
        Ok(outcome_to_wire(job_id, outcome))
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
pub fn status_to_wire(engine: &Engine, gpus: &[Arc<GpuContext>]) -> GetStatusResponse {
    let st = engine.status();
    let gpus = gpus
        .iter()
        .map(|g| {
            let info = g.device().info();
            let (free, total) = g.device().memory().unwrap_or((0, info.total_memory));
            // GPU workers are labelled "gpu<ordinal>:<worker>"; report the
            // job of the first busy worker on this device.
            let prefix = format!("gpu{}:", info.ordinal);
            let busy = st.workers.gpu_workers.iter().find(|w| w.backend.starts_with(&prefix) && w.current_job_id.is_some());
            GpuStatus {
                ordinal: info.ordinal as u32,
                name: info.name.clone(),
                vram_total_bytes: total as u64,
                vram_free_bytes: free as u64,
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
        host_memory_used_bytes: st.budget.reserved,
        host_memory_limit_bytes: st.budget.total,
        buffer_stages,
        backends: st.workers.gpu_workers.iter().map(|w| w.backend.clone()).collect(),
        total_proofs_cancelled: st.jobs.cancelled,
    }
}

#[tonic::async_trait]
impl ProvingEngine for Service {
    async fn submit_proof(&self, req: Request<SubmitProofRequest>) -> Result<Response<SubmitProofResponse>, Status> {
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
        let submit = req.into_inner().submit.ok_or_else(|| Status::invalid_argument("ProveRequest.submit is required"))?;
        let submitted = match self.submit(submit).await {
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
        let spec = kinds::resolve_srs(&id, &self.kinds).map_err(|m| Status::new(Code::NotFound, m))?;
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
        let spec = kinds::resolve_srs(&id, &self.kinds).map_err(|m| Status::new(Code::NotFound, m))?;
        let res = self.engine.evict_srs(&spec.id).map_err(|e| Status::failed_precondition(format!("cannot evict {id:?}: {e}")))?;
        Ok(Response::new(EvictSrsResponse { was_loaded: res.was_loaded, freed_bytes: res.freed_bytes }))
    }
}
