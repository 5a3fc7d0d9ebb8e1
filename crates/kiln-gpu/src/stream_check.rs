//! `KILN_STREAM_CHECK=1`: checks every chunk of a streamed MSM against the
//! CPU - the converted points byte for byte against blstrs' decoding of the
//! raw chunk, the chunk's MSM against blstrs' multi_exp - and, when the MSM
//! is wrong, runs it again on the same device points, to tell a bad
//! conversion, a bad MSM and a race apart. Slow (CPU MSMs); for diagnosing
//! on a GPU machine, never on in production.
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cudarc::driver::CudaSlice;
use group::Group;

use crate::buffers::{as_words, DeviceScalars};
use crate::device::GpuStream;
use crate::error::GpuError;
use crate::stream::Chunk;

pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("KILN_STREAM_CHECK").is_ok_and(|v| v == "1"))
}

/// What the check needs of a curve.
pub(crate) struct CheckCurve<P> {
    pub raw_bytes: usize,
    /// Raw points -> blst affine words.
    pub decode: fn(&[u8]) -> Vec<u64>,
    /// blst affine words and scalars -> the sum on the CPU.
    pub cpu: fn(&[u64], &[Scalar]) -> P,
}

pub(crate) fn g1() -> CheckCurve<G1Projective> {
    CheckCurve {
        raw_bytes: 96,
        decode: |raw| {
            let pts: Vec<G1Affine> = raw.chunks(96).map(|b| G1Affine::from_uncompressed_unchecked(b.try_into().unwrap()).unwrap()).collect();
            as_words(&pts).to_vec()
        },
        cpu: |w, s| {
            let pts: Vec<G1Projective> = w.chunks(12).map(|p| G1Projective::from(words_to::<G1Affine>(p))).collect();
            G1Projective::multi_exp(&pts, s)
        },
    }
}

pub(crate) fn g2() -> CheckCurve<G2Projective> {
    CheckCurve {
        raw_bytes: 192,
        decode: |raw| {
            let pts: Vec<G2Affine> = raw.chunks(192).map(|b| G2Affine::from_uncompressed_unchecked(b.try_into().unwrap()).unwrap()).collect();
            as_words(&pts).to_vec()
        },
        cpu: |w, s| {
            let pts: Vec<G2Projective> = w.chunks(24).map(|p| G2Projective::from(words_to::<G2Affine>(p))).collect();
            G2Projective::multi_exp(&pts, s)
        },
    }
}

fn words_to<T: Copy>(w: &[u64]) -> T {
    assert_eq!(std::mem::size_of_val(w), std::mem::size_of::<T>());
    // SAFETY: T is a blst affine point (plain u64 limbs, any bit pattern
    // valid), exactly as large as `w` (asserted).
    unsafe { std::ptr::read_unaligned(w.as_ptr() as *const T) }
}

/// Checks one chunk after its MSM gave `part`; `rerun` runs the chunk's MSM
/// again on the same device points. Prints one line per bad chunk.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_chunk<P: Group>(
    cc: &CheckCurve<P>,
    s: &GpuStream,
    c: &Chunk,
    raw_points: &[u8],
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
    let sc: Vec<Scalar> = sc_words.chunks(4).map(words_to::<Scalar>).collect();
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
pub(crate) fn converted<P>(cc: &CheckCurve<P>, s: &GpuStream, c: &Chunk, raw_points: &[u8], points: &CudaSlice<u64>) -> Result<(Vec<u64>, usize), GpuError> {
    let words = cc.raw_bytes / 8;
    let want = (cc.decode)(&raw_points[c.points.start * cc.raw_bytes..c.points.end * cc.raw_bytes]);
    let got = s.clone_dtoh(&points.slice(0..c.points.len() * words))?;
    let bad = want.chunks(words).zip(got.chunks(words)).filter(|(a, b)| a != b).count();
    Ok((want, bad))
}

