//! A test setup's points made on the device: every section of the proving
//! key is `scalars * G` (ParamsFile::setup_scalars), computed by kiln-gpu's
//! fixed-base kernel straight into VRAM, where it stays like an uploaded
//! parameter set. Nothing of the points crosses PCIe but the scalars (a
//! third of the points' bytes) and the few input-query points, made on the
//! CPU.
//!
//! A faster path that can be wrong is checked: a sample of every section's
//! points is read back and compared with the CPU's multiples (and every
//! proof is verified).

use blstrs::{G1Affine, G2Affine};
use kiln_gpu::{DeviceG1, DeviceG2, GpuDevice, GpuStream};

use super::srs::{gpu_err, Points, ResidentSrs};
use crate::error::ProveError;
use crate::params::{ParamsFile, Section};
use crate::setup::table::{g1_table, g2_table};

/// Points of each section compared with the CPU after the kernel ran.
const SAMPLES: usize = 16;

pub(super) fn place_test_setup(dev: &GpuDevice, params: &ParamsFile, b_inputs: usize, s: &GpuStream) -> Result<ResidentSrs, ProveError> {
    let shape = params.shape();
    let n_in = shape.num_inputs;
    let scalars = |sec| params.setup_scalars(sec).expect("a test setup has scalars");
    if b_inputs > shape.b_g1_len || n_in > shape.a_len {
        return Err(ProveError::ShapeMismatch { what: "the B input query", circuit: b_inputs, params: shape.b_g1_len });
    }
    let g1_bytes = 96 * (shape.h_len + shape.l_len + shape.a_len - n_in + shape.b_g1_len - b_inputs) as u64;
    let device_bytes = g1_bytes + 192 * (shape.b_g2_len - b_inputs) as u64;
    let (free, _) = dev.memory().map_err(gpu_err)?;
    // The proofs' own buffers (a, b, c, aux, MSM scratch) need room too.
    let working = 8 * 32 * (shape.h_len + 1 + shape.l_len) as u64;
    if device_bytes + working > free as u64 {
        // Not a fault of the device: the job is too large for it.
        return Err(ProveError::Memory(format!(
            "this test setup's points take {:.1} GiB of device memory and proofs need {:.1} GiB more; {:.1} GiB are free \
             on this GPU (test setups are never streamed from the host)",
            gib(device_bytes),
            gib(working),
            gib(free as u64)
        )));
    }
    let (t1, t2) = (g1_table().flat(), g2_table().flat());
    let g1 = |sec: Section, from: usize| -> Result<Option<Points<DeviceG1>>, ProveError> {
        let sc = &scalars(sec)[from..];
        if sc.is_empty() {
            return Ok(None);
        }
        let pts = dev.fixed_base_g1(s, &t1, sc).map_err(gpu_err)?;
        check_sample(sc.len(), |idx| dev.download_g1(s, &pts, idx), |i| g1_table().mul(&sc[i]).into())?;
        Ok(Some(Points::Device(pts)))
    };
    let h = g1(Section::H, 0)?.ok_or_else(|| empty("the H query"))?;
    let l = g1(Section::L, 0)?.ok_or_else(|| empty("the L query"))?;
    let a_aux = g1(Section::A, n_in)?;
    let b_g1_aux = g1(Section::BG1, b_inputs)?;
    let b_sc = &scalars(Section::BG2)[b_inputs..];
    let b_g2_aux = if b_sc.is_empty() {
        None
    } else {
        let pts = dev.fixed_base_g2(s, &t2, b_sc).map_err(gpu_err)?;
        check_sample(b_sc.len(), |idx| dev.download_g2(s, &pts, idx), |i| g2_table().mul(&b_sc[i]).into())?;
        Some(Points::Device::<DeviceG2>(pts))
    };
    let mut a_inputs = Vec::new();
    params.g1_points(Section::A, 0..n_in, &mut a_inputs)?;
    let mut b_g1_inputs = Vec::new();
    params.g1_points(Section::BG1, 0..b_inputs, &mut b_g1_inputs)?;
    let mut b_g2_inputs = Vec::new();
    params.g2_points(0..b_inputs, &mut b_g2_inputs)?;
    tracing::info!(gib = gib(device_bytes), "test setup points made on the device");
    Ok(ResidentSrs { h, l, a_aux, b_g1_aux, b_g2_aux, a_inputs, b_g1_inputs, b_g2_inputs, device_bytes, streamed_bytes: 0 })
}

/// Reads back the first, the last and some spread points of a section of
/// `n` and compares them with the CPU's.
fn check_sample<P: PartialEq>(
    n: usize,
    download: impl Fn(&[usize]) -> Result<Vec<P>, kiln_gpu::GpuError>,
    cpu: impl Fn(usize) -> P,
) -> Result<(), ProveError> {
    let mut idx: Vec<usize> = (0..SAMPLES).map(|k| (k * 7919 * n / SAMPLES + k) % n).collect();
    idx.extend([0, n - 1]);
    let got = download(&idx).map_err(gpu_err)?;
    match idx.iter().zip(&got).find(|(&i, p)| **p != cpu(i)) {
        None => Ok(()),
        Some((i, _)) => Err(ProveError::Backend { backend: "gpu", message: format!("test setup point {i} made on the device differs from the CPU's") }),
    }
}

fn empty(what: &'static str) -> ProveError {
    ProveError::ShapeMismatch { what, circuit: 1, params: 0 }
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

const _: () = assert!(std::mem::size_of::<G1Affine>() == 96 && std::mem::size_of::<G2Affine>() == 192);
