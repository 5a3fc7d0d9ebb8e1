//! The GPU backend: a/b/c and the witness go to the device at copy-engine
//! speed (or, for an assignment whose products were left to the prover,
//! the witness alone, and a/b/c are evaluated there from the circuit's
//! matrices kept in VRAM: products.rs), the H polynomial and all five MSMs
//! (G2 included) run there against parameter points that stay resident in
//! VRAM, and only the few input-query points (one per public input) are
//! summed on the CPU.
//!
//! Each [`GpuBackend`] is one worker: a copy stream that `start` uses (it
//! returns once the host buffers have been copied, so pinned buffers go
//! back to their pool at once) and a compute thread with its own stream that
//! runs the kernels in FIFO order. Several workers per GPU share one
//! [`GpuContext`] (device + resident parameters) so one worker's copies
//! overlap another's kernels; no device buffer is shared between proofs.
//!
//! Parameter sections that do not fit in VRAM are streamed from the host
//! mapping for each proof (srs.rs decides, kiln-gpu's stream.rs streams).
//!
//! Phase timings (`h2d`, `h_pipeline`, `msm_*`) are device times from CUDA
//! events on the phase's stream; `msm_host` is the host's share of the MSMs
//! and `gpu_queue_wait` the time a proof waited for its worker.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Projective, G2Projective, Scalar};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use kiln_gpu::{DevicePoints, DeviceScalars, ParamsGroup, DeviceSpan, GpuDevice, GpuError, GpuStream, MsmTiming, PointStreamer};
use kiln_synth::{Assignment, CompiledR1cs, Density, Products};

use crate::error::ProveError;
use crate::msm::{msm_g1, msm_g2};
use crate::params::ParamsFile;
use crate::prover::{DeviceResidency, DeviceStatus, MsmResults, PendingMsms, PhaseTimings, ProductsSupport, ProverBackend};

mod gate;
mod products;
mod setup;
mod srs;

pub use products::host_r1cs;
pub use srs::{GpuContext, ResidentInfo, DEFAULT_STREAM_CHUNK_BYTES};
use srs::{gpu_err, Points, ResidentSrs};

/// One worker on one GPU.
pub struct GpuBackend {
    ctx: Arc<GpuContext>,
    copy: GpuStream,
    jobs: Sender<Job>,
    label: String,
}

/// A proof's device buffers, handed from `start` to the compute thread.
struct Job {
    /// Its place on the device, given up when the compute thread is done with it.
    admitted: gate::Admitted,
    params: Arc<ParamsFile>,
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
        let (copy, compute) = (ctx.device.new_stream()?, ctx.device.new_stream()?);
        Self::with_streams(ctx, worker.to_string(), copy, compute)
    }

    /// A worker for deadline proofs on `ctx`'s device: its copies and
    /// kernels run on streams of the device's highest priority, so they go
    /// ahead of ordinary workers' when both wait for the GPU.
    pub fn urgent(ctx: &Arc<GpuContext>) -> Result<Self, GpuError> {
        let (copy, compute) = (ctx.device.new_urgent_stream()?, ctx.device.new_urgent_stream()?);
        Self::with_streams(ctx, "urgent".into(), copy, compute)
    }

    fn with_streams(ctx: &Arc<GpuContext>, worker: String, copy: GpuStream, compute: GpuStream) -> Result<Self, GpuError> {
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

    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// The witness on the device: a, b, c padded to the domain `m` (or
    /// evaluated there from the witness), and aux. The copies are complete
    /// when this returns, so the host buffers may be released.
    fn upload_witness(&self, params: &ParamsFile, asg: &Assignment, m: usize, t: &mut PhaseTimings) -> Result<[DeviceScalars; 4], ProveError> {
        let (dev, s) = (&self.ctx.device, &self.copy);
        match &asg.products {
            Products::Deferred(r1cs) => products::upload_and_evaluate(&self.ctx, s, params, r1cs, asg, m, t),
            Products::Host => {
                let h2d = DeviceSpan::begin(s).map_err(gpu_err)?;
                let upload = |v: &[Scalar], len: usize| -> Result<DeviceScalars, GpuError> {
                    let mut d = dev.alloc_scalars(s, len.max(1))?;
                    dev.write_scalars(s, &mut d, v)?;
                    Ok(d)
                };
                let uploaded = (|| -> Result<_, GpuError> {
                    Ok([upload(asg.a(), m)?, upload(asg.b(), m)?, upload(asg.c(), m)?, upload(asg.aux(), asg.num_aux)?])
                })()
                .map_err(gpu_err)?;
                t.push("h2d", h2d.end().map_err(gpu_err)?);
                Ok(uploaded)
            }
        }
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
        self.ctx
            .resident()
            .into_iter()
            .map(|r| DeviceResidency { device: device.clone(), params_id: r.params_id, bytes: r.device_bytes, streamed_bytes: r.streamed_bytes })
            .collect()
    }

    fn evict_device(&self, params_id: u64) -> u64 {
        self.ctx.evict(params_id).unwrap_or(0)
    }

    fn placement_host_bytes(&self, params: &ParamsFile) -> u64 {
        self.ctx.placement_host_bytes(params)
    }

    fn device_products(&self, params: &ParamsFile, r1cs: &CompiledR1cs) -> ProductsSupport {
        self.ctx.products_support(params, r1cs)
    }

    fn device(&self) -> String {
        format!("gpu{}", self.ctx.device.info().ordinal)
    }

    fn device_status(&self) -> Option<DeviceStatus> {
        let i = self.ctx.device.info();
        Some(DeviceStatus {
            ordinal: i.ordinal,
            name: i.name.clone(),
            sm_count: i.sm_count,
            compute_capability: i.compute_capability,
            total_memory: i.total_memory as u64,
            free_memory: self.ctx.device.memory().ok().map(|(free, _)| free as u64),
        })
    }

    /// A worker on the same device with high-priority streams ([`GpuBackend::urgent`]).
    fn urgent_worker(&self) -> Result<Option<Arc<dyn ProverBackend>>, ProveError> {
        let worker = GpuBackend::urgent(&self.ctx).map_err(gpu_err)?;
        Ok(Some(Arc::new(worker)))
    }

    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        let mut t = PhaseTimings::default();
        let s = &self.copy;
        let b_inputs = asg.b_input_density.count();
        let t0 = Instant::now();
        let (srs, uploaded) = self.ctx.resident_srs(params, b_inputs, s).map_err(|e| gate::DeviceGate::qualify_with(self.ctx.proofs_on_device(), e))?;
        if uploaded {
            t.push("gpu_srs_upload", t0.elapsed());
        }
        // The witness goes up only when the device has room for this proof
        // beside those still running there.
        let mut admitted = self.ctx.admit(params);
        // Each step of a proof on the device at debug level: where a proof
        // that never answers stopped.
        tracing::debug!(worker = %self.label, "parameters placed; copying the witness");
        let shape = params.shape();
        let m = shape.domain();
        let log_m = m.trailing_zeros();
        let n = asg.num_constraints;
        // Device memory that ran out while other proofs held some of it is
        // tried once more when this proof is the device's only one.
        let [a, b, c, aux] = match self.upload_witness(params, &asg, m, &mut t) {
            Err(ProveError::DeviceFull { message, .. }) if admitted.has_company() => {
                tracing::warn!(worker = %self.label, error = %message, "device memory ran out beside other proofs; copying the witness again when they are done");
                admitted = admitted.alone();
                self.upload_witness(params, &asg, m, &mut t)
            }
            uploaded => uploaded,
        }
        .map_err(|e| admitted.qualify(e))?;
        let Assignment { input, num_aux, a_aux_density, b_input_density, b_aux_density, buffers, .. } = asg;
        drop(buffers); // pinned buffers go back to their pool now
        let (reply, rx) = bounded(1);
        let job = Job {
            admitted,
            params: params.clone(),
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
        tracing::debug!(worker = %self.label, "witness on the device; queued for the kernels");
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
    // Pinned staging for streamed sections, made on the first proof that needs it.
    let mut streamer: Option<PointStreamer> = None;
    for job in jobs {
        let reply = job.reply.clone();
        // A panic in one proof fails that proof, not the worker.
        let out = catch_unwind(AssertUnwindSafe(|| compute(&ctx, &stream, &mut streamer, job))).unwrap_or_else(|p| {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            Err(ProveError::Backend { backend: "gpu", message: format!("panic: {}", msg.unwrap_or_default()) })
        });
        let _ = reply.send(out);
    }
}

/// One MSM's inputs: the scalars (aux or h), how many, and the density.
struct MsmInput<'a> {
    scalars: &'a DeviceScalars,
    len: usize,
    bitmap: Option<&'a Density>,
}

/// Runs the MSMs of one proof over resident or streamed points.
struct Msms<'a> {
    dev: &'a GpuDevice,
    s: &'a GpuStream,
    params: &'a ParamsFile,
    streamer: &'a mut Option<PointStreamer>,
    chunk_bytes: usize,
    timings: &'a mut PhaseTimings,
    host: Duration,
}

impl Msms<'_> {
    fn streamer(&mut self) -> Result<&mut PointStreamer, ProveError> {
        if self.streamer.is_none() {
            *self.streamer = Some(self.dev.point_streamer(self.chunk_bytes).map_err(gpu_err)?);
        }
        Ok(self.streamer.as_mut().expect("just made"))
    }

    fn record(&mut self, name: &'static str, t: MsmTiming) {
        self.timings.push(name, t.device);
        self.host += t.host;
    }

    fn msm<G: ParamsGroup>(&mut self, name: &'static str, points: Option<&Points<DevicePoints<G>>>, m: MsmInput) -> Result<G, ProveError> {
        let bits = m.bitmap.map(|d| d.words());
        let (sum, t) = match points {
            None => return Ok(G::identity()),
            Some(Points::Device(p)) => self.dev.msm_timed(self.s, p, m.scalars, m.len, bits),
            Some(Points::Host { section, range }) => {
                let (dev, s, raw) = (self.dev, self.s, self.params.raw(*section, range.clone())?);
                let r = dev.msm_streamed::<G>(s, self.streamer()?, &raw, m.scalars, m.len, bits);
                // Points of a file changed during the stream are not an
                // answer, and a read that failed because the file changed
                // is the file's fault, not the device's.
                self.params.check_unchanged()?;
                r
            }
            Some(Points::Memory(raw)) => {
                let (dev, s) = (self.dev, self.s);
                dev.msm_streamed::<G>(s, self.streamer()?, raw, m.scalars, m.len, bits)
            }
        }
        .map_err(gpu_err)?;
        self.record(name, t);
        Ok(sum)
    }
}

fn compute(ctx: &GpuContext, s: &GpuStream, streamer: &mut Option<PointStreamer>, job: Job) -> Result<(MsmResults, PhaseTimings), ProveError> {
    let Job { admitted, params, srs, a, b, c, aux, n, log_m, num_aux, inputs, a_aux_density, b_input_density, b_aux_density, queued, mut timings, .. } = job;
    timings.push("gpu_queue_wait", queued.elapsed());
    let densities = [&a_aux_density, &b_aux_density];
    let on_device = DeviceWork { ctx, s, params: &params, srs: &srs, n, log_m, num_aux, densities };
    // The device buffers are gone when this returns (aux last): the next
    // proof may go up.
    let sums = on_device.run(streamer, [a, b, c, aux], &mut timings).map_err(|e| admitted.qualify(e))?;
    drop(admitted);
    let t0 = Instant::now();
    let b_in: Vec<Scalar> = b_input_density.iter_set().map(|i| inputs[i]).collect();
    let a_q = sums.a_aux + msm_g1(&srs.a_inputs, &inputs);
    let b_g1 = sums.b_g1_aux + msm_g1(&srs.b_g1_inputs, &b_in);
    let b_g2 = sums.b_g2_aux + msm_g2(&srs.b_g2_inputs, &b_in);
    timings.push("msm_host", sums.host + t0.elapsed());
    Ok((MsmResults { h: sums.h, l: sums.l, a: a_q, b_g1, b_g2 }, timings))
}

/// The device's part of one proof: H, then the MSMs over the witness.
struct DeviceWork<'a> {
    ctx: &'a GpuContext,
    s: &'a GpuStream,
    params: &'a ParamsFile,
    srs: &'a ResidentSrs,
    n: usize,
    log_m: u32,
    num_aux: usize,
    /// A's and B's aux densities.
    densities: [&'a Density; 2],
}

/// What [`DeviceWork::run`] sums; the input-query terms are added on the host.
struct DeviceSums {
    h: G1Projective,
    l: G1Projective,
    a_aux: G1Projective,
    b_g1_aux: G1Projective,
    b_g2_aux: G2Projective,
    /// Host time inside the MSMs (bitmap ranks, window combination).
    host: Duration,
}

impl DeviceWork<'_> {
    fn run(&self, streamer: &mut Option<PointStreamer>, [mut a, mut b, mut c, aux]: [DeviceScalars; 4], timings: &mut PhaseTimings) -> Result<DeviceSums, ProveError> {
        let (dev, s, srs) = (&self.ctx.device, self.s, self.srs);
        let span = DeviceSpan::begin(s).map_err(gpu_err)?;
        dev.h_pipeline(s, &mut a, &mut b, &mut c, self.n, self.log_m).map_err(gpu_err)?;
        timings.push("h_pipeline", span.end().map_err(gpu_err)?);
        tracing::debug!("H computed; MSMs next");
        drop((b, c));
        // Each MSM's device time comes from CUDA events; its host share
        // (bitmap ranks, window combination) adds up under "msm_host".
        let chunk_bytes = self.ctx.stream_chunk_bytes();
        let mut msms = Msms { dev, s, params: self.params, streamer, chunk_bytes, timings, host: Duration::ZERO };
        let m = 1usize << self.log_m;
        let h = msms.msm("msm_h", Some(&srs.h), MsmInput { scalars: &a, len: m - 1, bitmap: None })?;
        drop(a);
        let all = |bitmap| MsmInput { scalars: &aux, len: self.num_aux, bitmap };
        let [a_density, b_density] = self.densities;
        let l = msms.msm("msm_l", Some(&srs.l), all(None))?;
        let a_aux = msms.msm("msm_a", srs.a_aux.as_ref(), all(Some(a_density)))?;
        let b_g1_aux = msms.msm("msm_b_g1", srs.b_g1_aux.as_ref(), all(Some(b_density)))?;
        let b_g2_aux = msms.msm("msm_b_g2", srs.b_g2_aux.as_ref(), all(Some(b_density)))?;
        tracing::debug!("MSMs done");
        Ok(DeviceSums { h, l, a_aux, b_g1_aux, b_g2_aux, host: msms.host })
    }
}

/// Streamed sections are read with `pread` on the parameter file.
impl kiln_gpu::RawSource for crate::params::RawPoints<'_> {
    fn len(&self) -> usize {
        crate::params::RawPoints::len(self)
    }
    fn read_into(&self, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        crate::params::RawPoints::read_into(self, offset, dst).map_err(|e| e.to_string())
    }
}
