//! `KILN_STREAM_CHECK=1`: checks every chunk of a streamed MSM against the
//! CPU - the converted points byte for byte against blstrs' decoding of the
//! raw chunk, the chunk's MSM against blstrs' multi_exp - and, when the MSM
//! is wrong, runs it again on the same device points, to tell a bad
//! conversion, a bad MSM and a race apart. Slow (CPU MSMs); for diagnosing
//! on a GPU machine, never on in production.
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::CudaSlice;
use group::{Group, UncompressedEncoding};

use crate::buffers::{as_words, from_words, DeviceScalars, Limbs};
use crate::device::GpuStream;
use crate::error::GpuError;
use crate::stream::{Chunk, RawSource};

pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("KILN_STREAM_CHECK").is_ok_and(|v| v == "1"))
}

/// What the check needs of a curve.
pub struct CheckCurve<P> {
    pub raw_bytes: usize,
    /// Raw points -> blst affine words.
    pub decode: fn(&[u8]) -> Vec<u64>,
    /// blst affine words and scalars -> the sum on the CPU.
    pub cpu: fn(&[u64], &[Scalar]) -> P,
}

pub(crate) fn g1() -> CheckCurve<G1Projective> {
    CheckCurve { raw_bytes: 96, decode: decode::<G1Affine>, cpu: |w, s| G1Projective::multi_exp(&projective::<G1Affine, _>(w), s) }
}

pub(crate) fn g2() -> CheckCurve<G2Projective> {
    CheckCurve { raw_bytes: 192, decode: decode::<G2Affine>, cpu: |w, s| G2Projective::multi_exp(&projective::<G2Affine, _>(w), s) }
}

/// Raw points (validated by the caller) -> blst affine words.
fn decode<A: UncompressedEncoding + Limbs>(raw: &[u8]) -> Vec<u64> {
    let size = A::Uncompressed::default().as_ref().len();
    let pts: Vec<A> = raw
        .chunks(size)
        .map(|b| {
            let mut enc = A::Uncompressed::default();
            enc.as_mut().copy_from_slice(b);
            A::from_uncompressed_unchecked(&enc).unwrap()
        })
        .collect();
    as_words(&pts).to_vec()
}

fn projective<A: Limbs + Default + Clone, P: From<A>>(w: &[u64]) -> Vec<P> {
    from_words::<A>(w).into_iter().map(P::from).collect()
}

/// Checks one chunk after its MSM gave `part`; `rerun` runs the chunk's MSM
/// again on the same device points. Prints one line per bad chunk.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_chunk<P: Group>(
    cc: &CheckCurve<P>,
    s: &GpuStream,
    c: &Chunk,
    raw_points: &dyn RawSource,
    points: &CudaSlice<u64>,
    scalars: &DeviceScalars,
    bitmap: Option<&[u64]>,
    before_bad: usize,
    part: P,
    rerun: &mut dyn FnMut() -> Result<P, GpuError>,
) -> Result<bool, GpuError> {
    let count = c.points.len();
    let (want_pts, bad_pts) = converted(cc, s, c, raw_points, points)?;
    let sc_words = s.clone_dtoh(&scalars.buf.slice(c.first * 4..(c.first + c.n) * 4))?;
    let sc: Vec<Scalar> = from_words(&sc_words);
    let used: Vec<Scalar> = (0..c.n).filter(|&i| bitmap.is_none_or(|b| b[(c.first + i) / 64] >> ((c.first + i) % 64) & 1 == 1)).map(|i| sc[i]).collect();
    if used.len() != count {
        eprintln!("stream-check: chunk first={} n={} uses {} points, the plan says {count}", c.first, c.n, used.len());
        return Ok(false);
    }
    let want = (cc.cpu)(&want_pts, &used);
    let ok = part == want;
    if !ok || bad_pts > 0 {
        let reruns: Vec<bool> = (0..2).map(|_| rerun().map(|p| p == want)).collect::<Result<_, _>>()?;
        eprintln!("stream-check: chunk first={} n={} points={count} converted-bad before/after the MSM={before_bad}/{bad_pts} msm-ok={ok} reruns-ok={reruns:?}", c.first, c.n);
    }
    Ok(ok && bad_pts == 0)
}

/// The chunk's points decoded on the CPU, and how many of the device's
/// converted points differ from them.
pub(crate) fn converted<P>(cc: &CheckCurve<P>, s: &GpuStream, c: &Chunk, raw_points: &dyn RawSource, points: &CudaSlice<u64>) -> Result<(Vec<u64>, usize), GpuError> {
    let words = cc.raw_bytes / 8;
    let mut raw = vec![0u8; c.points.len() * cc.raw_bytes];
    crate::stream::read_parallel(raw_points, c.points.start * cc.raw_bytes, &mut raw)?;
    let want = (cc.decode)(&raw);
    let got = s.clone_dtoh(&points.slice(0..c.points.len() * words))?;
    let bad = want.chunks(words).zip(got.chunks(words)).filter(|(a, b)| a != b).count();
    Ok((want, bad))
}


#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;

    /// The CPU side of the check: raw encoding -> words -> points and sums
    /// agree with blstrs on both curves.
    #[test]
    fn decode_and_cpu_sum_match_blstrs() {
        let s: Vec<Scalar> = (1..=5u64).map(Scalar::from).collect();
        let p1: Vec<G1Projective> = (1..=5u64).map(|k| G1Projective::generator() * Scalar::from(k * 7)).collect();
        let raw1: Vec<u8> = p1.iter().flat_map(|p| p.to_affine().to_uncompressed()).collect();
        let w1 = (g1().decode)(&raw1);
        assert_eq!(projective::<G1Affine, G1Projective>(&w1), p1);
        assert_eq!((g1().cpu)(&w1, &s), G1Projective::multi_exp(&p1, &s));
        let p2: Vec<G2Projective> = (1..=5u64).map(|k| G2Projective::generator() * Scalar::from(k * 11)).collect();
        let raw2: Vec<u8> = p2.iter().flat_map(|p| p.to_affine().to_uncompressed()).collect();
        let w2 = (g2().decode)(&raw2);
        assert_eq!(projective::<G2Affine, G2Projective>(&w2), p2);
        assert_eq!((g2().cpu)(&w2, &s), G2Projective::multi_exp(&p2, &s));
    }
}
