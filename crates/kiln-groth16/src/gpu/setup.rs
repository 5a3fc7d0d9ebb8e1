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

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use group::{Curve, UncompressedEncoding};
use kiln_gpu::{DevicePoints, GpuDevice, GpuStream, ParamsGroup};
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
    let section = |i: usize| &params.setup_scalars(sections[i].0).expect("a test setup has scalars")[sections[i].1.clone()];
    let h = made_on(dev, s, section(0), resident[0])?.ok_or_else(|| empty("the H query"))?;
    let l = made_on(dev, s, section(1), resident[1])?.ok_or_else(|| empty("the L query"))?;
    let a_aux = made_on(dev, s, section(2), resident[2])?;
    let b_g1_aux = made_on(dev, s, section(3), resident[3])?;
    let b_g2_aux = made_on(dev, s, section(4), resident[4])?;
    let placed = ResidentSrs::new(params, sections, resident, [h, l], [a_aux, b_g1_aux], b_g2_aux)?;
    tracing::info!(device_gib = gib(placed.device_bytes), host_gib = gib(placed.streamed_bytes), "test setup points made on the device");
    Ok(placed)
}

/// A group whose test-setup points the device makes: its generator's
/// byte-window table (built once on the CPU), the table flat for the
/// kernel, and the CPU's multiple to check the device's against.
trait SetupGroup: ParamsGroup<Affine: UncompressedEncoding + PartialEq> {
    fn table() -> Vec<Self::Affine>;
    fn cpu(s: &Scalar) -> Self::Affine;
}

macro_rules! setup_group {
    ($group:ty, $table:ident) => {
        impl SetupGroup for $group {
            fn table() -> Vec<Self::Affine> {
                $table().flat()
            }
            fn cpu(s: &Scalar) -> Self::Affine {
                $table().mul(s).to_affine()
            }
        }
    };
}
setup_group!(G1Projective, g1_table);
setup_group!(G2Projective, g2_table);

/// The points `scalars[i] * G` of one section (`None` when it has none):
/// in VRAM when it stays `resident`, else made a chunk at a time and kept
/// on the host in the file's encoding. A sample is checked against the CPU.
fn made_on<G: SetupGroup>(dev: &GpuDevice, s: &GpuStream, sc: &[Scalar], resident: bool) -> Result<Option<Points<DevicePoints<G>>>, ProveError> {
    if sc.is_empty() {
        return Ok(None);
    }
    let table = G::table();
    let cpu = |k: usize| G::cpu(&sc[k]);
    if !resident {
        let make = |chunk: &[Scalar]| dev.download_all_points(s, &dev.fixed_base::<G>(s, &table, chunk)?);
        let raw = made_on_host(sc, G::RAW_BYTES, make, |p: &G::Affine| p.to_uncompressed())?;
        check_sample(sc.len(), |idx| Ok(idx.iter().map(|&k| decode::<G::Affine>(&raw, k)).collect()), cpu)?;
        return Ok(Some(Points::Memory(raw)));
    }
    let pts = dev.fixed_base::<G>(s, &table, sc).map_err(gpu_err)?;
    check_sample(sc.len(), |idx| dev.download_points(s, &pts, idx), cpu)?;
    Ok(Some(Points::Device(pts)))
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
