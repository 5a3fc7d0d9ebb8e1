//! A test setup's points made on the device: every section of the proving
//! key is `scalars * G` (ParamsFile::setup_scalars), computed by kiln-gpu's
//! fixed-base kernel straight into VRAM, where it stays like an uploaded
//! parameter set. Nothing of the points crosses PCIe but the scalars (a
//! third of the points' bytes) and the few input-query points, made on the
//! CPU.
//!
//! Sections that do not fit beside the proofs' buffers (a 32 GiB PoRep
//! setup on an 80 GB card) are made on the device a chunk at a time, read
//! back once into host memory in the file's encoding, and streamed for each
//! proof like the sections of a parameter file that does not fit.
//!
//! A faster path that can be wrong is checked: a sample of every section's
//! points is read back and compared with the CPU's multiples (and every
//! proof is verified).

use std::ops::Range;

use blstrs::{G1Affine, G2Affine, Scalar};
use group::UncompressedEncoding;
use kiln_gpu::{DeviceG1, DeviceG2, GpuDevice, GpuStream};
use rayon::prelude::*;

use super::srs::{gpu_err, Points, ResidentSrs};
use crate::error::ProveError;
use crate::params::{ParamsFile, Section};
use crate::setup::table::{g1_table, g2_table};

/// Points of each section compared with the CPU after the kernel ran.
const SAMPLES: usize = 16;

/// Points made and read back at a time for a section kept on the host.
const HOST_CHUNK: usize = 1 << 22;

/// `sections` as [`super::srs::device_sections`] lists them, `resident[i]`
/// whether section i stays in VRAM (else it is kept on the host).
pub(super) fn place_test_setup(
    dev: &GpuDevice,
    params: &ParamsFile,
    s: &GpuStream,
    sections: &[(Section, Range<usize>); 5],
    resident: [bool; 5],
) -> Result<ResidentSrs, ProveError> {
    let scalars = |sec: Section, range: &Range<usize>| &params.setup_scalars(sec).expect("a test setup has scalars")[range.clone()];
    let (t1, t2) = (g1_table().flat(), g2_table().flat());
    let g1 = |i: usize| -> Result<Option<Points<DeviceG1>>, ProveError> {
        let sc = scalars(sections[i].0, &sections[i].1);
        if sc.is_empty() {
            return Ok(None);
        }
        let cpu = |k: usize| -> G1Affine { g1_table().mul(&sc[k]).into() };
        if !resident[i] {
            let raw = made_on_host(sc, 96, |chunk| dev.download_all_g1(s, &dev.fixed_base_g1(s, &t1, chunk)?), |p: &G1Affine| p.to_uncompressed())?;
            check_sample(sc.len(), |idx| Ok(idx.iter().map(|&k| decode::<G1Affine>(&raw, k)).collect()), cpu)?;
            return Ok(Some(Points::Memory(raw)));
        }
        let pts = dev.fixed_base_g1(s, &t1, sc).map_err(gpu_err)?;
        check_sample(sc.len(), |idx| dev.download_g1(s, &pts, idx), cpu)?;
        Ok(Some(Points::Device(pts)))
    };
    let h = g1(0)?.ok_or_else(|| empty("the H query"))?;
    let l = g1(1)?.ok_or_else(|| empty("the L query"))?;
    let a_aux = g1(2)?;
    let b_g1_aux = g1(3)?;
    let b_sc = scalars(Section::BG2, &sections[4].1);
    let cpu2 = |k: usize| -> G2Affine { g2_table().mul(&b_sc[k]).into() };
    let b_g2_aux = if b_sc.is_empty() {
        None
    } else if !resident[4] {
        let raw = made_on_host(b_sc, 192, |chunk| dev.download_all_g2(s, &dev.fixed_base_g2(s, &t2, chunk)?), |p: &G2Affine| p.to_uncompressed())?;
        check_sample(b_sc.len(), |idx| Ok(idx.iter().map(|&k| decode::<G2Affine>(&raw, k)).collect()), cpu2)?;
        Some(Points::Memory(raw))
    } else {
        let pts = dev.fixed_base_g2(s, &t2, b_sc).map_err(gpu_err)?;
        check_sample(b_sc.len(), |idx| dev.download_g2(s, &pts, idx), cpu2)?;
        Some(Points::Device::<DeviceG2>(pts))
    };
    let placed = ResidentSrs::new(params, sections, resident, [h, l], [a_aux, b_g1_aux], b_g2_aux)?;
    tracing::info!(device_gib = gib(placed.device_bytes), host_gib = gib(placed.streamed_bytes), "test setup points made on the device");
    Ok(placed)
}

/// The points `scalars[i] * G` in the file's encoding (`bytes` each), made
/// on the device `HOST_CHUNK` at a time (`make`) and encoded on the host.
fn made_on_host<P: Sync, E: AsRef<[u8]>>(
    scalars: &[Scalar],
    bytes: usize,
    make: impl Fn(&[Scalar]) -> Result<Vec<P>, kiln_gpu::GpuError>,
    encode: impl Fn(&P) -> E + Sync,
) -> Result<Vec<u8>, ProveError> {
    let mut raw = vec![0u8; scalars.len() * bytes];
    for (sc, out) in scalars.chunks(HOST_CHUNK).zip(raw.chunks_mut(HOST_CHUNK * bytes)) {
        let pts = make(sc).map_err(gpu_err)?;
        out.par_chunks_mut(bytes).zip(pts.par_iter()).for_each(|(o, p)| o.copy_from_slice(encode(p).as_ref()));
    }
    Ok(raw)
}

/// Point `k` of raw points in the file's encoding (made by [`made_on_host`]).
fn decode<A: UncompressedEncoding + Default>(raw: &[u8], k: usize) -> A {
    let mut enc = A::Uncompressed::default();
    let n = enc.as_ref().len();
    enc.as_mut().copy_from_slice(&raw[k * n..(k + 1) * n]);
    // An encoding that does not decode is never equal to the CPU's point.
    Option::from(A::from_uncompressed_unchecked(&enc)).unwrap_or_default()
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
