//! The GPU backend: a/b/c and the witness go to the device at copy-engine
//! speed, the H polynomial and all five MSMs (G2 included) run there against
//! parameter points that stay resident in VRAM, and only the few input-query
//! points (one per public input) are summed on the CPU.
//!
//! Each [`GpuBackend`] is one worker: a copy stream that `start` uses (it
//! returns once the host buffers have been copied, so pinned buffers go
//! back to their pool at once) and a compute thread with its own stream that
//! runs the kernels in FIFO order. Several workers per GPU share one
//! [`GpuContext`] (device + resident parameters) so one worker's copies
//! overlap another's kernels; no device buffer is shared between proofs.
//!
//! Phase timings (`h2d`, `h_pipeline`, `msm_*`) are device times from CUDA
//! events on the phase's stream; `msm_host` is the host's share of the MSMs
//! and `gpu_queue_wait` the time a proof waited for its worker.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use group::Group;
use kiln_gpu::{DeviceG1, DeviceG2, DeviceScalars, DeviceSpan, GpuDevice, GpuError, GpuStream};
use kiln_synth::{Assignment, Density};
use parking_lot::Mutex;

use crate::error::ProveError;
use crate::msm::{msm_g1, msm_g2};
use crate::params::{ParamsFile, Section};
use crate::prover::{DeviceResidency, MsmResults, PendingMsms, PhaseTimings, ProverBackend};

fn gpu_err(e: GpuError) -> ProveError {
    ProveError::Backend { backend: "gpu", message: e.to_string() }
}

/// One GPU and the parameters resident on it, shared by its workers.
pub struct GpuContext {
    device: GpuDevice,
    resident: Mutex<HashMap<u64, Arc<ResidentSrs>>>,
}

/// A parameter set uploaded to one device. Input-query points stay on the host.
struct ResidentSrs {
    h: DeviceG1,
    l: DeviceG1,
    a_aux: Option<DeviceG1>,
    b_g1_aux: Option<DeviceG1>,
    b_g2_aux: Option<DeviceG2>,
    a_inputs: Vec<G1Affine>,
    b_g1_inputs: Vec<G1Affine>,
    b_g2_inputs: Vec<G2Affine>,
    device_bytes: u64,
}

/// What one resident parameter set occupies (for status and eviction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResidentInfo {
    pub params_id: u64,
    pub device_bytes: u64,
}

impl GpuContext {
    /// Open device `ordinal`.
    pub fn open(ordinal: usize) -> Result<Arc<Self>, GpuError> {
        Ok(Arc::new(GpuContext { device: GpuDevice::open(ordinal)?, resident: Mutex::new(HashMap::new()) }))
    }

    /// Every visible GPU (empty without a driver or kernels).
    pub fn open_all() -> Vec<Arc<Self>> {
        (0..GpuDevice::count()).filter_map(|i| Self::open(i).ok()).collect()
    }

    pub fn device(&self) -> &GpuDevice {
        &self.device
    }

    /// Parameter sets resident on this device.
    pub fn resident(&self) -> Vec<ResidentInfo> {
        self.resident.lock().iter().map(|(&params_id, r)| ResidentInfo { params_id, device_bytes: r.device_bytes }).collect()
    }

    /// Drop a parameter set from VRAM (in-flight proofs keep their reference
    /// until they finish). Returns the bytes that will be freed.
    pub fn evict(&self, params_id: u64) -> Option<u64> {
        self.resident.lock().remove(&params_id).map(|r| r.device_bytes)
    }

    /// The resident copy of `params`, uploading it on `stream` first if
    /// needed. `b_inputs` is how many B-query points belong to inputs (the
    /// parameters do not record it; it is the circuit's B input density).
    fn resident_srs(&self, params: &ParamsFile, b_inputs: usize, stream: &GpuStream) -> Result<(Arc<ResidentSrs>, bool), ProveError> {
        let key = params.id();
        if let Some(r) = self.resident.lock().get(&key) {
            if r.b_g1_inputs.len() == b_inputs {
                return Ok((r.clone(), false));
            }
        }
        let r = Arc::new(self.upload_srs(params, b_inputs, stream)?);
        let mut map = self.resident.lock();
        // Two workers may race to upload; keep one copy.
        let kept = map.entry(key).and_modify(|old| {
            if old.b_g1_inputs.len() != b_inputs {
                *old = r.clone()
            }
        });
        Ok((kept.or_insert(r).clone(), true))
    }

    fn upload_srs(&self, params: &ParamsFile, b_inputs: usize, stream: &GpuStream) -> Result<ResidentSrs, ProveError> {
        let shape = params.shape();
        let n_in = shape.num_inputs;
        if b_inputs > shape.b_g1_len || n_in > shape.a_len {
            return Err(ProveError::ShapeMismatch { what: "the B input query", circuit: b_inputs, params: shape.b_g1_len });
        }
        let need = (shape.h_len + shape.l_len + shape.a_len + shape.b_g1_len) as u64 * 96 + shape.b_g2_len as u64 * 192;
        let (free, _) = self.device.memory().map_err(gpu_err)?;
        // Keep a margin for the proofs' own buffers (a, b, c, aux, MSM scratch).
        let working = 8 * 32 * (shape.h_len + 1 + shape.l_len) as u64;
        if need + working > free as u64 {
            return Err(ProveError::Backend {
                backend: "gpu",
                message: format!(
                    "parameters need {} MiB of VRAM plus {} MiB of working space, {} MiB are free; \
                     streaming parameters that do not fit is not supported yet",
                    need >> 20,
                    working >> 20,
                    free >> 20
                ),
            });
        }
        let mut host = Vec::new();
        let mut g1 = |section: Section, range: std::ops::Range<usize>| -> Result<Option<DeviceG1>, ProveError> {
            if range.is_empty() {
                return Ok(None);
            }
            params.g1_points(section, range, &mut host)?;
            Ok(Some(self.device.upload_g1(stream, &host).map_err(gpu_err)?))
        };
        let h = g1(Section::H, 0..shape.h_len)?;
        let l = g1(Section::L, 0..shape.l_len)?;
        let a_aux = g1(Section::A, n_in..shape.a_len)?;
        let b_g1_aux = g1(Section::BG1, b_inputs..shape.b_g1_len)?;
        let b_g2_aux = if b_inputs < shape.b_g2_len {
            let mut h2 = Vec::new();
            params.g2_points(b_inputs..shape.b_g2_len, &mut h2)?;
            Some(self.device.upload_g2(stream, &h2).map_err(gpu_err)?)
        } else {
            None
        };
        let mut a_inputs = Vec::new();
        params.g1_points(Section::A, 0..n_in, &mut a_inputs)?;
        let mut b_g1_inputs = Vec::new();
        params.g1_points(Section::BG1, 0..b_inputs, &mut b_g1_inputs)?;
        let mut b_g2_inputs = Vec::new();
        params.g2_points(0..b_inputs, &mut b_g2_inputs)?;
        stream.synchronize().map_err(|e| gpu_err(e.into()))?;
        Ok(ResidentSrs {
            h: h.ok_or(ProveError::ShapeMismatch { what: "the H query", circuit: 1, params: 0 })?,
            l: l.ok_or(ProveError::ShapeMismatch { what: "the L query", circuit: 1, params: 0 })?,
            a_aux,
            b_g1_aux,
            b_g2_aux,
            a_inputs,
            b_g1_inputs,
            b_g2_inputs,
            device_bytes: need,
        })
    }
}

/// One worker on one GPU.
pub struct GpuBackend {
    ctx: Arc<GpuContext>,
    copy: GpuStream,
    jobs: Sender<Job>,
    label: String,
}

/// A proof's device buffers, handed from `start` to the compute thread.
struct Job {
    srs: Arc<ResidentSrs>,
    a: DeviceScalars,
    b: DeviceScalars,
    c: DeviceScalars,
    aux: DeviceScalars,
    n: usize,
    log_m: u32,
    num_aux: usize,
    inputs: Vec<Scalar>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
    queued: Instant,
    timings: PhaseTimings,
    reply: Sender<Result<(MsmResults, PhaseTimings), ProveError>>,
}

impl GpuBackend {
    /// A worker on `ctx`'s device: its own copy stream and compute thread.
    pub fn new(ctx: &Arc<GpuContext>, worker: usize) -> Result<Self, GpuError> {
        let copy = ctx.device.new_stream()?;
        let compute = ctx.device.new_stream()?;
        let (tx, rx) = unbounded::<Job>();
        let dev_ctx = ctx.clone();
        let label = format!("gpu{}:{}", ctx.device.info().ordinal, worker);
        std::thread::Builder::new()
            .name(format!("kiln-{label}"))
            .spawn(move || compute_loop(dev_ctx, compute, rx))
            .map_err(|e| GpuError::InvalidArgument(format!("cannot start a GPU worker thread: {e}")))?;
        Ok(GpuBackend { ctx: ctx.clone(), copy, jobs: tx, label })
    }

    /// `workers_per_gpu` workers on each GPU in `ordinals`; an ordinal that
    /// does not open is an error (the caller asked for that device).
    pub fn on_devices(ordinals: &[usize], workers_per_gpu: usize) -> Result<Vec<GpuBackend>, GpuError> {
        let mut out = Vec::new();
        for &ordinal in ordinals {
            let ctx = GpuContext::open(ordinal)?;
            for w in 0..workers_per_gpu.max(1) {
                out.push(GpuBackend::new(&ctx, w)?);
            }
        }
        Ok(out)
    }

    /// `workers_per_gpu` workers on every visible GPU (empty without a GPU).
    pub fn all(workers_per_gpu: usize) -> Vec<GpuBackend> {
        GpuContext::open_all()
            .iter()
            .flat_map(|ctx| (0..workers_per_gpu.max(1)).filter_map(move |w| GpuBackend::new(ctx, w).ok()))
            .collect()
    }

    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }
}

impl ProverBackend for GpuBackend {
    fn name(&self) -> String {
        self.label.clone()
    }

    /// a/b/c/aux go from the caller's (pinned) buffers straight to the device.
    fn host_scratch_ratio(&self) -> f64 {
        0.0
    }

    fn device_resident(&self) -> Vec<DeviceResidency> {
        let device = format!("gpu{}", self.ctx.device.info().ordinal);
        self.ctx.resident().into_iter().map(|r| DeviceResidency { device: device.clone(), params_id: r.params_id, bytes: r.device_bytes }).collect()
    }

    fn evict_device(&self, params_id: u64) -> u64 {
        self.ctx.evict(params_id).unwrap_or(0)
    }

    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        let mut t = PhaseTimings::default();
        let dev = &self.ctx.device;
        let s = &self.copy;
        let b_inputs = asg.b_input_density.count();
        let t0 = Instant::now();
        let (srs, uploaded) = self.ctx.resident_srs(params, b_inputs, s)?;
        if uploaded {
            t.push("gpu_srs_upload", t0.elapsed());
        }
        let shape = params.shape();
        let m = shape.domain();
        let log_m = m.trailing_zeros();
        let n = asg.num_constraints;
        let h2d = DeviceSpan::begin(s).map_err(gpu_err)?;
        let upload = |v: &[Scalar], len: usize| -> Result<DeviceScalars, GpuError> {
            let mut d = dev.alloc_scalars(s, len.max(1))?;
            dev.write_scalars(s, &mut d, v)?;
            Ok(d)
        };
        let (a, b, c, aux) = (|| -> Result<_, GpuError> {
            Ok((upload(asg.a(), m)?, upload(asg.b(), m)?, upload(asg.c(), m)?, upload(asg.aux(), asg.num_aux)?))
        })()
        .map_err(gpu_err)?;
        // The copies must be complete before the host buffers are released
        // (DeviceSpan::end waits for them).
        t.push("h2d", h2d.end().map_err(gpu_err)?);
        let Assignment { input, num_aux, a_aux_density, b_input_density, b_aux_density, buffers, .. } = asg;
        drop(buffers); // pinned buffers go back to their pool now
        let (reply, rx) = bounded(1);
        let job = Job {
            srs,
            a,
            b,
            c,
            aux,
            n,
            log_m,
            num_aux,
            inputs: input,
            a_aux_density,
            b_input_density,
            b_aux_density,
            queued: Instant::now(),
            timings: t,
            reply,
        };
        self.jobs.send(job).map_err(|_| ProveError::Backend { backend: "gpu", message: "GPU worker thread has stopped".into() })?;
        Ok(Box::new(GpuPending(rx)))
    }
}

struct GpuPending(Receiver<Result<(MsmResults, PhaseTimings), ProveError>>);

impl PendingMsms for GpuPending {
    fn wait(self: Box<Self>) -> Result<(MsmResults, PhaseTimings), ProveError> {
        self.0.recv().unwrap_or_else(|_| Err(ProveError::Backend { backend: "gpu", message: "GPU worker dropped the proof".into() }))
    }
}

fn compute_loop(ctx: Arc<GpuContext>, stream: GpuStream, jobs: Receiver<Job>) {
    for job in jobs {
        let reply = job.reply.clone();
        // A panic in one proof fails that proof, not the worker.
        let out = catch_unwind(AssertUnwindSafe(|| compute(&ctx.device, &stream, job))).unwrap_or_else(|p| {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            Err(ProveError::Backend { backend: "gpu", message: format!("panic: {}", msg.unwrap_or_default()) })
        });
        let _ = reply.send(out);
    }
}

fn compute(dev: &GpuDevice, s: &GpuStream, job: Job) -> Result<(MsmResults, PhaseTimings), ProveError> {
    let Job { srs, mut a, mut b, mut c, aux, n, log_m, num_aux, inputs, a_aux_density, b_input_density, b_aux_density, queued, mut timings, .. } = job;
    timings.push("gpu_queue_wait", queued.elapsed());
    let span = DeviceSpan::begin(s).map_err(gpu_err)?;
    dev.h_pipeline(s, &mut a, &mut b, &mut c, n, log_m).map_err(gpu_err)?;
    timings.push("h_pipeline", span.end().map_err(gpu_err)?);
    drop((b, c));
    // Each MSM's device time comes from CUDA events; its host share (bitmap
    // ranks, window combination) and the CPU sums over the few input-query
    // points add up under "msm_host".
    let mut host = Duration::ZERO;
    let mut g1 = |name: &'static str, points: Option<&DeviceG1>, scalars: &DeviceScalars, len: usize, bitmap: Option<&Density>| {
        let Some(points) = points else { return Ok(G1Projective::identity()) };
        let (sum, t) = dev.msm_g1_timed(s, points, scalars, len, bitmap.map(|d| d.words())).map_err(gpu_err)?;
        timings.push(name, t.device);
        host += t.host;
        Ok::<_, ProveError>(sum)
    };
    let m = 1usize << log_m;
    let h = g1("msm_h", Some(&srs.h), &a, m - 1, None)?;
    drop(a);
    let l = g1("msm_l", Some(&srs.l), &aux, num_aux, None)?;
    let a_aux = g1("msm_a", srs.a_aux.as_ref(), &aux, num_aux, Some(&a_aux_density))?;
    let b_g1_aux = g1("msm_b_g1", srs.b_g1_aux.as_ref(), &aux, num_aux, Some(&b_aux_density))?;
    let b_g2_aux = match &srs.b_g2_aux {
        Some(p) => {
            let (sum, t) = dev.msm_g2_timed(s, p, &aux, num_aux, Some(b_aux_density.words())).map_err(gpu_err)?;
            timings.push("msm_b_g2", t.device);
            host += t.host;
            sum
        }
        None => G2Projective::identity(),
    };
    let t0 = Instant::now();
    let b_in: Vec<Scalar> = b_input_density.iter_set().map(|i| inputs[i]).collect();
    let a_q = a_aux + msm_g1(&srs.a_inputs, &inputs);
    let b_g1 = b_g1_aux + msm_g1(&srs.b_g1_inputs, &b_in);
    let b_g2 = b_g2_aux + msm_g2(&srs.b_g2_inputs, &b_in);
    timings.push("msm_host", host + t0.elapsed());
    Ok((MsmResults { h, l, a: a_q, b_g1, b_g2 }, timings))
}
