//! Parameter points on one GPU: each section of a parameter set is either
//! resident in VRAM (uploaded once, kept between proofs) or, when it does not
//! fit, streamed from the host mapping in chunks for every proof.
//!
//! Placement is decided once per parameter set and device: the sections are
//! kept resident largest first while they fit in the VRAM left for
//! parameters (free memory less each proof's working space, capped by
//! [`GpuContext::set_srs_vram_limit`]); the rest are streamed, after
//! reserving room for the streaming buffers.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use kiln_gpu::{DeviceG1, DeviceG2, DeviceGroup, DevicePoints, GpuDevice, GpuError, GpuStream};
use parking_lot::Mutex;

use crate::error::{ParamsError, ProveError};
use crate::params::{ParamsFile, ParamsShape, Section};
use super::gate::{Admitted, DeviceGate};
use super::products::ResidentMatrices;

/// A CUDA error as a proof's error: [`ProveError::DeviceLost`] for the
/// sticky ones (the context is unusable until the process restarts, so a
/// pipeline quarantines the device), [`ProveError::DeviceFull`] for memory
/// that ran out (the caller qualifies it: [`super::gate::DeviceGate::qualify_with`]),
/// [`ProveError::Backend`] for the rest.
pub(super) fn gpu_err(e: GpuError) -> ProveError {
    let cuda_name = match &e {
        GpuError::Cuda(d) => Some(format!("{:?}", d.0)),
        _ => None,
    };
    let sticky = cuda_name.as_deref().is_some_and(is_sticky_cuda);
    let full = cuda_name.as_deref() == Some("CUDA_ERROR_OUT_OF_MEMORY");
    let message = e.to_string();
    if sticky {
        ProveError::DeviceLost { backend: "gpu", message }
    } else if full {
        ProveError::DeviceFull { backend: "gpu", message }
    } else {
        ProveError::Backend { backend: "gpu", message }
    }
}

/// CUDA driver results (by name) after which the CUDA documentation says
/// the context "cannot be used" and the process must restart: a kernel's
/// memory or instruction fault, a launch failure or timeout, an
/// uncorrectable ECC error.
fn is_sticky_cuda(name: &str) -> bool {
    const STICKY: &[&str] = &[
        "CUDA_ERROR_ILLEGAL_ADDRESS",
        "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_LAUNCH_TIMEOUT",
        "CUDA_ERROR_HARDWARE_STACK_ERROR",
        "CUDA_ERROR_ILLEGAL_INSTRUCTION",
        "CUDA_ERROR_MISALIGNED_ADDRESS",
        "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        "CUDA_ERROR_INVALID_PC",
        "CUDA_ERROR_ECC_UNCORRECTABLE",
        "CUDA_ERROR_ASSERT",
    ];
    STICKY.contains(&name)
}

pub use crate::backends::DEFAULT_STREAM_CHUNK_BYTES;

/// One GPU and the parameters placed on it, shared by its workers.
pub struct GpuContext {
    pub(super) device: GpuDevice,
    resident: Mutex<HashMap<u64, Arc<ResidentSrs>>>,
    /// Compiled circuits' matrices by parameter id (products.rs), evicted
    /// with the parameters.
    pub(super) matrices: Mutex<HashMap<u64, Arc<ResidentMatrices>>>,
    /// Held while matrices are uploaded (one upload at a time per device).
    pub(super) matrix_upload: Mutex<()>,
    /// Held while a parameter set is placed: one placement at a time per
    /// device, so workers that want the same set wait for its one copy
    /// rather than each making their own (two copies of a 32 GiB test
    /// setup's host-kept points do not fit beside each other).
    placing: Mutex<()>,
    /// Sections chosen to stay resident by [`GpuContext::placement_host_bytes`]
    /// for parameters not yet placed: the placement keeps to what the
    /// caller reserved host memory for.
    planned: Mutex<HashMap<u64, [bool; 5]>>,
    /// Proofs holding buffers on the device ([`GpuContext::admit`]).
    gate: Arc<DeviceGate>,
    pub(super) limits: Mutex<Limits>,
}

#[derive(Clone, Copy)]
pub(super) struct Limits {
    /// Most VRAM resident parameters may take on this device (all of them together).
    srs_vram: Option<u64>,
    /// Most VRAM one circuit's matrices may take (`None`: what is free).
    pub(super) matrix_vram: Option<u64>,
    pub(super) chunk_bytes: usize,
}

/// A section's points as the MSMs see them.
pub(super) enum Points<D> {
    /// Uploaded; stays in VRAM.
    Device(D),
    /// Streamed from the parameter file for each proof: points `range` of `section`.
    Host { section: Section, range: Range<usize> },
    /// Streamed for each proof from host memory, in the file's encoding: a
    /// test setup's points that do not fit in VRAM (made on the device,
    /// read back once).
    Memory(Vec<u8>),
}

impl<D> Points<D> {
    fn streamed_bytes(&self, point: u64) -> u64 {
        match self {
            Points::Device(_) => 0,
            Points::Host { range, .. } => range.len() as u64 * point,
            Points::Memory(raw) => raw.len() as u64,
        }
    }
}

/// A parameter set placed on one device. Input-query points stay on the host.
pub(super) struct ResidentSrs {
    pub h: Points<DeviceG1>,
    pub l: Points<DeviceG1>,
    pub a_aux: Option<Points<DeviceG1>>,
    pub b_g1_aux: Option<Points<DeviceG1>>,
    pub b_g2_aux: Option<Points<DeviceG2>>,
    pub a_inputs: Vec<G1Affine>,
    pub b_g1_inputs: Vec<G1Affine>,
    pub b_g2_inputs: Vec<G2Affine>,
    /// VRAM the resident sections take.
    pub device_bytes: u64,
    /// Bytes streamed from the host for each proof.
    pub streamed_bytes: u64,
}

/// What one parameter set occupies on a device (for status and eviction).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResidentInfo {
    pub params_id: u64,
    /// VRAM held by its resident sections.
    pub device_bytes: u64,
    /// Bytes of its sections that do not fit and are streamed per proof.
    pub streamed_bytes: u64,
}

impl GpuContext {
    /// Open device `ordinal`.
    pub fn open(ordinal: usize) -> Result<Arc<Self>, GpuError> {
        Ok(Arc::new(GpuContext {
            device: GpuDevice::open(ordinal)?,
            resident: Mutex::new(HashMap::new()),
            matrices: Mutex::new(HashMap::new()),
            matrix_upload: Mutex::new(()),
            placing: Mutex::new(()),
            planned: Mutex::new(HashMap::new()),
            gate: Arc::new(DeviceGate::default()),
            limits: Mutex::new(Limits { srs_vram: None, matrix_vram: None, chunk_bytes: DEFAULT_STREAM_CHUNK_BYTES }),
        }))
    }

    pub fn device(&self) -> &GpuDevice {
        &self.device
    }

    /// Caps the VRAM resident parameters may take on this device (`None`:
    /// whatever is free); sections beyond it are streamed. Applies to
    /// parameter sets placed after the call.
    pub fn set_srs_vram_limit(&self, bytes: Option<u64>) {
        self.limits.lock().srs_vram = bytes;
    }

    /// Size of each streaming chunk (each worker that streams pins two).
    pub fn set_stream_chunk_bytes(&self, bytes: usize) {
        self.limits.lock().chunk_bytes = bytes.max(1 << 16);
    }

    pub(super) fn stream_chunk_bytes(&self) -> usize {
        self.limits.lock().chunk_bytes
    }

    /// Parameter sets placed on this device; their bytes include the
    /// matrices of their circuit when those are resident too.
    pub fn resident(&self) -> Vec<ResidentInfo> {
        let mut out: HashMap<u64, ResidentInfo> = self
            .resident
            .lock()
            .iter()
            .map(|(&params_id, r)| (params_id, ResidentInfo { params_id, device_bytes: r.device_bytes, streamed_bytes: r.streamed_bytes }))
            .collect();
        for (&params_id, m) in self.matrices.lock().iter() {
            out.entry(params_id).or_insert(ResidentInfo { params_id, device_bytes: 0, streamed_bytes: 0 }).device_bytes += m.device_bytes();
        }
        out.into_values().collect()
    }

    /// Drop a parameter set, and its circuit's matrices, from VRAM
    /// (in-flight proofs keep their reference until they finish). Returns
    /// the bytes that will be freed.
    pub fn evict(&self, params_id: u64) -> Option<u64> {
        self.planned.lock().remove(&params_id);
        let matrices = self.matrices.lock().remove(&params_id).map(|m| m.device_bytes());
        let srs = self.resident.lock().remove(&params_id).map(|r| r.device_bytes);
        match (srs, matrices) {
            (None, None) => None,
            (s, m) => Some(s.unwrap_or(0) + m.unwrap_or(0)),
        }
    }

    /// Whether `params_id`'s parameters are placed on this device.
    pub(super) fn srs_placed(&self, params_id: u64) -> bool {
        self.resident.lock().contains_key(&params_id)
    }

    /// The placed copy of `params`, placing it (uploading on `stream`) first
    /// if needed. `b_inputs` is how many B-query points belong to inputs (the
    /// parameters do not record it; it is the circuit's B input density).
    pub(super) fn resident_srs(&self, params: &ParamsFile, b_inputs: usize, stream: &GpuStream) -> Result<(Arc<ResidentSrs>, bool), ProveError> {
        let key = params.id();
        let placed = || self.resident.lock().get(&key).filter(|r| r.b_g1_inputs.len() == b_inputs).cloned();
        if let Some(r) = placed() {
            return Ok((r, false));
        }
        let _one_at_a_time = self.placing.lock();
        if let Some(r) = placed() {
            return Ok((r, false)); // placed by another worker while this one waited
        }
        let r = Arc::new(self.place_srs(params, b_inputs, stream)?);
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        tracing::info!(
            params_id = key,
            device = self.device.info().ordinal,
            vram_gib = gib(r.device_bytes),
            streamed_gib = gib(r.streamed_bytes),
            proof_working_gib = gib(self.proof_working_bytes(&params.shape())),
            "parameters placed"
        );
        self.resident.lock().insert(key, r.clone());
        Ok((r, true))
    }

    /// Proofs holding buffers on this device now.
    pub(super) fn proofs_on_device(&self) -> usize {
        self.gate.admitted()
    }

    /// Waits until a proof of `params`' shape fits on the device beside
    /// the proofs already there (see gate.rs); the admission ends when it
    /// is dropped, with the proof's device buffers.
    pub(super) fn admit(&self, params: &ParamsFile) -> Admitted {
        let shape = params.shape();
        self.gate.admit(self.proof_working_bytes(&shape), || self.proof_capacity(&shape))
    }

    /// `bytes` of device memory taken beside the proofs admitted now, if
    /// they fit in `shape`'s proof capacity (see [`DeviceGate::try_admit`]).
    pub(super) fn try_reserve(&self, bytes: u64, shape: &ParamsShape) -> Option<Admitted> {
        self.gate.try_admit(bytes, || self.proof_capacity(shape))
    }

    /// Device memory for the proofs of `shape`'s circuit together: all of
    /// it less what is placed (parameters, matrices), the NTT tables of
    /// its domain (made by its first proof, they stay) and the context's
    /// margin. What the gate admits proofs into.
    pub(super) fn proof_capacity(&self, shape: &ParamsShape) -> u64 {
        let total = self.device.info().total_memory as u64;
        let tables = self.device.ntt_tables_bytes::<Scalar>(shape.domain().trailing_zeros());
        let placed: u64 = self.resident().iter().map(|r| r.device_bytes).sum();
        total.saturating_sub(placed + tables + CONTEXT_MARGIN)
    }

    /// Host memory placing `params` on this device will hold (see
    /// [`crate::ProverBackend::placement_host_bytes`]): the sections of a
    /// test setup that do not fit in the VRAM free now. The choice is kept
    /// for the placement. File-backed sections that do not fit are streamed
    /// from the file's mapping, which the parameters' own bytes count.
    pub fn placement_host_bytes(&self, params: &ParamsFile) -> u64 {
        if !params.is_test_setup() || self.srs_placed(params.id()) {
            return 0;
        }
        let sections = device_sections(&params.shape(), 0);
        let resident = match self.residency(params, &sections) {
            Ok(r) => r,
            Err(_) => return 0, // the placement will say why
        };
        self.planned.lock().insert(params.id(), resident);
        (0..5).filter(|&i| !resident[i]).map(|i| section_bytes(&sections[i])).sum()
    }

    /// Which sections stay in VRAM: all that fit in what is free now less
    /// one proof's working space, within the configured cap.
    fn residency(&self, params: &ParamsFile, sections: &[(Section, Range<usize>); 5]) -> Result<[bool; 5], ProveError> {
        let room = self.room_beside_a_proof(&params.shape())?;
        let limits = *self.limits.lock();
        Ok(choose_resident(sections, limits.srs_vram.map_or(room, |cap| cap.min(room)), limits.chunk_bytes))
    }

    fn place_srs(&self, params: &ParamsFile, b_inputs: usize, stream: &GpuStream) -> Result<ResidentSrs, ProveError> {
        let shape = params.shape();
        let n_in = shape.num_inputs;
        if b_inputs > shape.b_g1_len || n_in > shape.a_len {
            return Err(ProveError::ShapeMismatch { what: "the B input query", circuit: b_inputs, params: shape.b_g1_len });
        }
        if shape.h_len == 0 || shape.l_len == 0 {
            let what = if shape.h_len == 0 { "the H query" } else { "the L query" };
            return Err(ProveError::ShapeMismatch { what, circuit: 1, params: 0 });
        }
        let sections = device_sections(&shape, b_inputs);
        let planned = self.planned.lock().remove(&params.id());
        let resident = match planned {
            Some(plan) => plan,
            None => self.residency(params, &sections)?,
        };
        if params.is_test_setup() {
            return super::setup::place_test_setup(&self.device, params, stream, &sections, resident);
        }
        let (dev, place) = (&self.device, |i: usize| (params, sections[i].clone(), resident[i]));
        let h = place_section(dev, stream, place(0))?.expect("H is not empty");
        let l = place_section(dev, stream, place(1))?.expect("L is not empty");
        let a_aux = place_section(dev, stream, place(2))?;
        let b_g1_aux = place_section(dev, stream, place(3))?;
        let b_g2_aux = place_section(dev, stream, place(4))?;
        stream.synchronize().map_err(|e| gpu_err(e.into()))?;
        ResidentSrs::new(params, &sections, resident, [h, l], [a_aux, b_g1_aux], b_g2_aux)
    }
}

impl ResidentSrs {
    /// The placed sections (`sections` and `resident` as
    /// [`choose_resident`] took them; `[h, l]`, `[a_aux, b_g1_aux]`) with
    /// the input-query points, read on the host, and what they occupy.
    pub(super) fn new(
        params: &ParamsFile,
        sections: &[(Section, Range<usize>); 5],
        resident: [bool; 5],
        [h, l]: [Points<DeviceG1>; 2],
        [a_aux, b_g1_aux]: [Option<Points<DeviceG1>>; 2],
        b_g2_aux: Option<Points<DeviceG2>>,
    ) -> Result<Self, ProveError> {
        let (n_in, b_inputs) = (sections[2].1.start, sections[3].1.start);
        let mut a_inputs = Vec::new();
        params.g1_points(Section::A, 0..n_in, &mut a_inputs)?;
        let mut b_g1_inputs = Vec::new();
        params.g1_points(Section::BG1, 0..b_inputs, &mut b_g1_inputs)?;
        let mut b_g2_inputs = Vec::new();
        params.g2_points(0..b_inputs, &mut b_g2_inputs)?;
        let device_bytes = (0..5).filter(|&i| resident[i]).map(|i| section_bytes(&sections[i])).sum();
        let streamed_bytes = h.streamed_bytes(96)
            + l.streamed_bytes(96)
            + a_aux.as_ref().map_or(0, |p| p.streamed_bytes(96))
            + b_g1_aux.as_ref().map_or(0, |p| p.streamed_bytes(96))
            + b_g2_aux.as_ref().map_or(0, |p| p.streamed_bytes(192));
        Ok(ResidentSrs { h, l, a_aux, b_g1_aux, b_g2_aux, a_inputs, b_g1_inputs, b_g2_inputs, device_bytes, streamed_bytes })
    }
}

/// The sections kept on the device (input-query points stay on the host),
/// as (section, points): H, L, A, B G1, B G2.
pub(super) fn device_sections(shape: &ParamsShape, b_inputs: usize) -> [(Section, Range<usize>); 5] {
    [
        (Section::H, 0..shape.h_len),
        (Section::L, 0..shape.l_len),
        (Section::A, shape.num_inputs.min(shape.a_len)..shape.a_len),
        (Section::BG1, b_inputs.min(shape.b_g1_len)..shape.b_g1_len),
        (Section::BG2, b_inputs.min(shape.b_g2_len)..shape.b_g2_len),
    ]
}

fn section_bytes((s, r): &(Section, Range<usize>)) -> u64 {
    r.len() as u64 * s.point_bytes() as u64
}

/// Which of `sections` stay in VRAM when `budget` bytes are theirs: all if
/// they fit, else the largest that fit once the streaming buffers (two raw
/// slots, the converted chunk and its MSM scratch per worker, `chunk_bytes`
/// each) are set aside; the rest are streamed for each proof.
pub(super) fn choose_resident(sections: &[(Section, Range<usize>); 5], budget: u64, chunk_bytes: usize) -> [bool; 5] {
    if sections.iter().map(section_bytes).sum::<u64>() <= budget {
        return [true; 5];
    }
    let budget = budget.saturating_sub(4 * chunk_bytes as u64);
    let mut order: Vec<usize> = (0..5).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(section_bytes(&sections[i])));
    let (mut used, mut resident) = (0, [false; 5]);
    for i in order {
        if used + section_bytes(&sections[i]) <= budget {
            used += section_bytes(&sections[i]);
            resident[i] = true;
        }
    }
    resident
}

/// VRAM the sections of `shape` take when all are resident.
pub(super) fn srs_device_bytes(shape: &ParamsShape, b_inputs: usize) -> u64 {
    device_sections(shape, b_inputs).iter().map(section_bytes).sum()
}

impl GpuContext {
    /// The most device memory one proof of `shape` holds at once on this
    /// device: what placement keeps free beside the parameters and
    /// matrices, and what the gate admits a proof for. Its largest phase
    /// (the H pipeline runs in place):
    /// - the witness: a, b, c over the domain, aux and the inputs;
    /// - the H MSM: a (now h), aux, and the MSM's scratch over the domain;
    /// - the aux MSMs: aux, and the larger of the G1 and G2 scratch;
    ///
    /// plus a streamed section's device chunks (converted points and two
    /// raw slots), and 1/16 and `ALLOCATOR_SLACK` for the allocator's
    /// rounding and small buffers.
    /// The NTT tables are counted apart: they are made once per domain and
    /// stay.
    pub fn proof_working_bytes(&self, shape: &ParamsShape) -> u64 {
        let (dev, m, aux) = (&self.device, shape.domain(), shape.l_len);
        let scalars = |count: usize| 32 * count as u64;
        let witness = scalars(3 * m + aux + shape.num_inputs);
        let h_msm = scalars(m + aux) + dev.msm_scratch_bytes::<G1Projective>(m);
        let aux_msms = scalars(aux) + dev.msm_scratch_bytes::<G1Projective>(aux).max(dev.msm_scratch_bytes::<G2Projective>(aux));
        let peak = witness.max(h_msm).max(aux_msms) + 3 * self.stream_chunk_bytes() as u64;
        peak + peak / 16 + ALLOCATOR_SLACK
    }

    /// VRAM free now for parameters or matrices of `shape`'s circuit: the
    /// device's free memory less one proof's working space and the NTT
    /// tables still to be made.
    pub(super) fn room_beside_a_proof(&self, shape: &ParamsShape) -> Result<u64, ProveError> {
        let (free, _) = self.device.memory().map_err(gpu_err)?;
        let log_m = shape.domain().trailing_zeros();
        let tables = if self.device.has_ntt_tables::<Scalar>(log_m) { 0 } else { self.device.ntt_tables_bytes::<Scalar>(log_m) };
        Ok((free as u64).saturating_sub(self.proof_working_bytes(shape) + tables))
    }
}

/// What one proof's allocations may take beyond their sizes: the
/// stream-ordered pool reserves device memory in its own granules.
const ALLOCATOR_SLACK: u64 = 64 << 20;

/// Device memory not counted for parameters or proofs: the CUDA
/// context, kernels, the streamers' slots.
const CONTEXT_MARGIN: u64 = 2 << 30;

/// Points decoded and uploaded at a time when a section is placed.
const UPLOAD_BLOCK: usize = 1 << 20;

/// `f(block, host)` for consecutive blocks of `range`, with one host
/// vector reused for every block.
fn in_blocks<P>(range: Range<usize>, mut f: impl FnMut(Range<usize>, &mut Vec<P>) -> Result<(), ProveError>) -> Result<(), ProveError> {
    let mut host = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let block = at..(at + UPLOAD_BLOCK).min(range.end);
        f(block.clone(), &mut host)?;
        at = block.end;
    }
    Ok(())
}

/// A group whose points a parameter file holds: G1 in every section but
/// b_g2, G2 there.
trait FilePoints: DeviceGroup {
    fn read(params: &ParamsFile, section: Section, range: Range<usize>, out: &mut Vec<Self::Affine>) -> Result<(), ParamsError>;
}

impl FilePoints for G1Projective {
    fn read(params: &ParamsFile, section: Section, range: Range<usize>, out: &mut Vec<G1Affine>) -> Result<(), ParamsError> {
        params.g1_points(section, range, out)
    }
}

impl FilePoints for G2Projective {
    fn read(params: &ParamsFile, _: Section, range: Range<usize>, out: &mut Vec<G2Affine>) -> Result<(), ParamsError> {
        params.g2_points(range, out)
    }
}

/// Points `range` of `section` placed as planned (`None` when empty):
/// uploaded a block at a time through one reused host block when
/// `resident` (a production section, ~12 GiB, is never decoded whole into
/// host memory), else streamed from the file for each proof.
fn place_section<G: FilePoints>(
    dev: &GpuDevice,
    stream: &GpuStream,
    (params, (section, range), resident): (&ParamsFile, (Section, Range<usize>), bool),
) -> Result<Option<Points<DevicePoints<G>>>, ProveError> {
    if range.is_empty() {
        return Ok(None);
    }
    if !resident {
        validate::<G>(params, section, range.clone())?;
        return Ok(Some(Points::Host { section, range }));
    }
    let mut dst = dev.alloc_points::<G>(stream, range.len()).map_err(gpu_err)?;
    in_blocks(range.clone(), |block, host| {
        G::read(params, section, block.clone(), host)?;
        dev.write_points(stream, &mut dst, block.start - range.start, host).map_err(gpu_err)
    })?;
    Ok(Some(Points::Device(dst)))
}

/// Streamed points are sent in the file's encoding and converted on the
/// device without checks, so they are checked here once, as the resident
/// path's decoding checks them (on the curve, not infinity), a block at a
/// time so no decoded copy is kept.
fn validate<G: FilePoints>(params: &ParamsFile, section: Section, range: Range<usize>) -> Result<(), ProveError> {
    in_blocks(range, |block, out: &mut Vec<G::Affine>| Ok(G::read(params, section, block, out)?))
}

#[cfg(test)]
mod sticky_tests {
    use super::*;

    /// By name: `gpu_err` matches the `Debug` name of cudarc's `CUresult`.
    #[test]
    fn sticky_cuda_errors_lose_the_device() {
        assert!(is_sticky_cuda("CUDA_ERROR_ILLEGAL_ADDRESS") && is_sticky_cuda("CUDA_ERROR_ECC_UNCORRECTABLE"));
        assert!(!is_sticky_cuda("CUDA_ERROR_OUT_OF_MEMORY") && !is_sticky_cuda("CUDA_ERROR_INVALID_VALUE"));
        assert!(!gpu_err(GpuError::InvalidArgument("x".into())).is_sticky());
    }
}
