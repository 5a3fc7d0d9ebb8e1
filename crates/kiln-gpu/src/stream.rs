//! MSM over parameter points that stay on the host: for parameter sets
//! larger than the VRAM left for them.
//!
//! The points are streamed in the `.params` file's own encoding, in chunks,
//! with two staging slots: while the GPU runs the MSM of chunk j, an uploader
//! thread reads chunk j+1 from its [`RawSource`] (`pread` on the file, for
//! kiln-groth16's parameters) into a pinned staging buffer and copies it on
//! to the device on its own stream. On the device a small
//! kernel turns the raw big-endian coordinates into Montgomery affine points
//! (cuda/points.cuh), so the host does no decoding per proof. Each chunk's
//! MSM is an ordinary one over a range of scalars; the chunk sums are added
//! on the host.
use std::ops::Range;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Instant;

use blstrs::G2Projective;
use cudarc::driver::{CudaEvent, CudaSlice, PinnedHostSlice};
use rayon::prelude::*;

use crate::buffers::DeviceScalars;
use crate::device::{DeviceSpan, GpuDevice, GpuStream};
use crate::error::GpuError;
use crate::launch::{blocks, launch, raw, Arg};
use crate::curve::ParamsGroup;
use crate::msm::MsmTiming;
use crate::stream_check;

/// Where a streamed MSM reads its raw points from: bytes in memory, or a
/// reader such as `pread` on a parameter file (a file cut short is then a
/// read error, not a SIGBUS as through a mapping). Read from several
/// threads at once, in blocks of up to 1 MiB.
pub trait RawSource: Sync {
    /// Bytes available.
    fn len(&self) -> usize;
    /// No bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `dst` with the bytes at `offset..offset + dst.len()`.
    fn read_into(&self, offset: usize, dst: &mut [u8]) -> Result<(), String>;
}

/// Bytes in memory.
impl RawSource for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }
    fn read_into(&self, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        let src = offset.checked_add(dst.len()).and_then(|end| self.get(offset..end)).ok_or_else(|| format!("bytes {offset}..+{} of {}", dst.len(), <[u8]>::len(self)))?;
        dst.copy_from_slice(src);
        Ok(())
    }
}

/// Bytes in memory.
impl RawSource for Vec<u8> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
    fn read_into(&self, offset: usize, dst: &mut [u8]) -> Result<(), String> {
        self.as_slice().read_into(offset, dst)
    }
}

/// Bytes read per block (and per thread) from a [`RawSource`].
const READ_BLOCK: usize = 1 << 20;

/// Reads `dst.len()` bytes at `offset` of `src`, blocks in parallel.
pub(crate) fn read_parallel(src: &dyn RawSource, offset: usize, dst: &mut [u8]) -> Result<(), GpuError> {
    dst.par_chunks_mut(READ_BLOCK)
        .enumerate()
        .try_for_each(|(i, d)| src.read_into(offset + i * READ_BLOCK, d))
        .map_err(|e| GpuError::InvalidArgument(format!("reading the points to stream: {e}")))
}

/// Per-worker staging for streamed MSMs: its own copy stream and two pinned
/// buffers of `chunk_bytes`, reused by every streamed MSM of the worker
/// (pinning memory is slow; allocating it per proof would cost more than
/// the copies). The device slots are allocated per MSM, stream-ordered.
pub struct PointStreamer {
    copy: GpuStream,
    staging: [PinnedHostSlice<u8>; 2],
    chunk_bytes: usize,
}

impl PointStreamer {
    /// Host memory this streamer pins (two staging buffers).
    pub fn pinned_bytes(&self) -> usize {
        2 * self.chunk_bytes
    }
}

/// One chunk of a streamed MSM: scalars `first..first + n` (first a
/// multiple of 64, so the bitmap slice starts on a word) and the points
/// they use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub first: usize,
    pub n: usize,
    pub points: Range<usize>,
}

/// Splits scalars `0..n` into chunks that each use at most `max_points`
/// points (`max_points >= 64`). With a bitmap, scalar i uses point rank(i)
/// if bit i is set and chunks are cut at word boundaries; chunks that use
/// no point are left out.
pub(crate) fn plan_chunks(n: usize, bitmap: Option<&[u64]>, max_points: usize) -> Vec<Chunk> {
    assert!(max_points >= 64, "a chunk holds at least one bitmap word");
    let mut out = Vec::new();
    let Some(bm) = bitmap else {
        let step = max_points / 64 * 64;
        let mut first = 0;
        while first < n {
            let len = step.min(n - first);
            out.push(Chunk { first, n: len, points: first..first + len });
            first += len;
        }
        return out;
    };
    let words = n.div_ceil(64);
    // Bits past n do not count.
    let word = |w: usize| -> u64 {
        let v = bm[w];
        if w + 1 == words && !n.is_multiple_of(64) {
            v & ((1u64 << (n % 64)) - 1)
        } else {
            v
        }
    };
    let (mut w, mut rank) = (0, 0);
    while w < words {
        let (start_w, start_rank) = (w, rank);
        while w < words && rank - start_rank + word(w).count_ones() as usize <= max_points {
            rank += word(w).count_ones() as usize;
            w += 1;
        }
        if rank > start_rank {
            let first = start_w * 64;
            out.push(Chunk { first, n: (w * 64).min(n) - first, points: start_rank..rank });
        }
    }
    out
}

impl GpuDevice {
    /// A streamer for this device with staging buffers of `chunk_bytes`
    /// (at least one G2 point's worth of 64 points).
    pub fn point_streamer(&self, chunk_bytes: usize) -> Result<PointStreamer, GpuError> {
        let chunk_bytes = chunk_bytes.max(64 * <G2Projective as ParamsGroup>::RAW_BYTES);
        // Plain (cacheable) pinned memory rather than cudarc's default
        // write-combined: several CPU threads fill a staging buffer right
        // before the copy engine reads it, and cacheable memory needs no
        // write-combining flush between the two.
        let pin = || -> Result<PinnedHostSlice<u8>, GpuError> {
            // SAFETY: the staging bytes are written before any copy reads them.
            Ok(unsafe { self.ctx.alloc_pinned_with_flags::<u8>(chunk_bytes, 0) }?)
        };
        Ok(PointStreamer { copy: self.new_stream()?, staging: [pin()?, pin()?], chunk_bytes })
    }

    /// [`GpuDevice::msm_timed`] with the points on the host: `raw` holds
    /// points rank 0.. in the `.params` encoding (uncompressed, big-endian),
    /// already validated by the caller (on the curve, not infinity).
    pub fn msm_streamed<G: ParamsGroup>(
        &self,
        s: &GpuStream,
        st: &mut PointStreamer,
        raw_points: &dyn RawSource,
        scalars: &DeviceScalars,
        n: usize,
        bitmap: Option<&[u64]>,
    ) -> Result<(G, MsmTiming), GpuError> {
        let (conv, raw_bytes) = (G::from_raw(&self.k), G::RAW_BYTES);
        let t0 = Instant::now();
        if let Some(bm) = bitmap {
            if bm.len() * 64 < n {
                return Err(GpuError::InvalidArgument(format!("bitmap of {} bits for {n} scalars", bm.len() * 64)));
            }
        }
        let max_points = st.chunk_bytes / raw_bytes;
        let plan = plan_chunks(n, bitmap, max_points);
        let needed = plan.last().map_or(0, |c| c.points.end);
        if needed * raw_bytes > raw_points.len() {
            return Err(GpuError::InvalidArgument(format!("{needed} points needed, {} given", raw_points.len() / raw_bytes)));
        }
        let slot_points = plan.iter().map(|c| c.points.len()).max().unwrap_or(0);
        let span = DeviceSpan::begin(s)?;
        let mut sum = G::identity();
        if slot_points > 0 {
            // Converted points of the current chunk, then the two raw slots.
            let points = unsafe { s.alloc::<u64>(slot_points * raw_bytes / 8) }?;
            let mut slots: Vec<CudaSlice<u8>> = (0..2).map(|_| unsafe { st.copy.alloc::<u8>(slot_points * raw_bytes) }).collect::<Result<_, _>>()?;
            // The slots were allocated on the copy stream; the compute stream
            // must not touch them before that allocation is ordered.
            s.join(&st.copy)?;
            let slot_ptrs: Vec<u64> = slots.iter().map(|b| raw(b, &st.copy)).collect();
            let (ready_tx, ready_rx) = channel::<Result<(usize, CudaEvent), GpuError>>();
            let (free_tx, free_rx) = channel::<()>();
            free_tx.send(()).and_then(|_| free_tx.send(())).expect("receiver alive");
            let PointStreamer { copy, staging, .. } = st;
            sum = std::thread::scope(|scope| -> Result<G, GpuError> {
                // Only references go to the uploader: a `move` closure naming
                // `slots` would move the slots into the thread and free them
                // when it finishes - while the last chunk is still being read
                // here, and with the pool free to hand that memory to this
                // stream's next allocation (wrong last chunks on the H200).
                let (plan_ref, slots_ref) = (&plan, &mut slots);
                scope.spawn(move || upload_chunks(plan_ref, raw_points, raw_bytes, copy, staging, slots_ref, free_rx, ready_tx));
                // Owned here, so that on an early return (an error) they are
                // dropped before the scope joins the uploader, which then
                // stops instead of waiting for a free slot forever.
                let (free_tx, ready_rx) = (free_tx, ready_rx);
                let mut acc = G::identity();
                for c in &plan {
                    let (slot, ready) = ready_rx.recv().map_err(|_| GpuError::InvalidArgument("point uploader stopped".into()))??;
                    s.wait(&ready)?;
                    let count = c.points.len();
                    // SAFETY: kiln_points_from_raw_*(raw, out, n): the slot
                    // holds `count` raw points (uploaded before `ready`),
                    // `points` has room for slot_points >= count.
                    unsafe { launch(s, conv, blocks(count, 128), 128, &[Arg::U64(slot_ptrs[slot]), Arg::U64(raw(&points, s)), Arg::U32(count as u32)])? };
                    let bits = bitmap.map(|bm| &bm[c.first / 64..]);
                    let before_bad = if stream_check::enabled() { stream_check::converted(&G::check_curve(), s, c, raw_points, &points)?.1 } else { 0 };
                    // msm synchronizes `s` before returning, so the slot has
                    // been read and can be refilled.
                    let (part, _) = self.msm_range::<G>(s, raw(&points, s), count, scalars, c.first, c.n, bits)?;
                    if stream_check::enabled() {
                        let mut rerun = || self.msm_range::<G>(s, raw(&points, s), count, scalars, c.first, c.n, bits).map(|r| r.0);
                        stream_check::check_chunk(&G::check_curve(), s, c, raw_points, &points, scalars, bitmap, before_bad, part, &mut rerun)?;
                    }
                    acc += part;
                    let _ = free_tx.send(());
                }
                Ok(acc)
            })?;
            drop(points);
            // The slots are freed on the copy stream, which has not seen the
            // reads on `s`: those are complete (msm synchronized `s`).
            drop(slots);
        }
        let device = span.end()?;
        Ok((sum, MsmTiming::new(device, t0.elapsed())))
    }
}

/// The uploader: for each chunk, wait for a free slot, copy its raw points
/// into that slot's pinned staging buffer (in parallel) and on to the device
/// on the copy stream, and hand the slot over with the copy's event.
#[allow(clippy::too_many_arguments)]
fn upload_chunks(
    plan: &[Chunk],
    raw_points: &dyn RawSource,
    raw_bytes: usize,
    copy: &GpuStream,
    staging: &mut [PinnedHostSlice<u8>; 2],
    slots: &mut [CudaSlice<u8>],
    free: Receiver<()>,
    ready: Sender<Result<(usize, CudaEvent), GpuError>>,
) {
    let mut done: [Option<CudaEvent>; 2] = [None, None];
    for (j, c) in plan.iter().enumerate() {
        if free.recv().is_err() {
            return; // the MSM stopped (an error): nothing more to upload
        }
        let slot = j % 2;
        let res = (|| -> Result<CudaEvent, GpuError> {
            // The staging buffer's previous copy must be finished before it
            // is overwritten.
            if let Some(ev) = done[slot].take() {
                ev.synchronize()?;
            }
            let len = c.points.len() * raw_bytes;
            let host = staging[slot].as_mut_slice()?;
            read_parallel(raw_points, c.points.start * raw_bytes, &mut host[..len])?;
            let dst = raw(&slots[slot], copy);
            // SAFETY: the slot holds slot_points * raw_bytes >= len
            // bytes; the staging buffer is pinned and is not written again
            // before `ev` (recorded after the copy) completes; the caller
            // synchronizes the copy stream before the buffers are freed.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, &host[..len], copy.cu_stream()) }?;
            let ev = copy.record_event(None)?;
            done[slot] = Some(copy.record_event(None)?);
            Ok(ev)
        })();
        let failed = res.is_err();
        if ready.send(res.map(|ev| (slot, ev))).is_err() || failed {
            break;
        }
    }
    // Every copy must be finished before the slots and staging are reused or freed.
    let _ = copy.synchronize();
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Every scalar is covered once, in order; each chunk's points are its
    /// scalars' ranks; no chunk exceeds the cap; empty chunks are skipped.
    fn check(n: usize, bm: Option<&[u64]>, max: usize) {
        let plan = plan_chunks(n, bm, max);
        let set = |i: usize| bm.is_none_or(|b| b[i / 64] >> (i % 64) & 1 == 1);
        let mut rank = 0;
        let mut next = 0;
        for c in &plan {
            assert_eq!(c.first % 64, 0);
            assert!(c.first >= next && c.first + c.n <= n);
            // Skipped scalars use no point.
            assert!((next..c.first).all(|i| !set(i)));
            assert_eq!(c.points.start, rank);
            rank += (c.first..c.first + c.n).filter(|&i| set(i)).count();
            assert_eq!(c.points.end, rank);
            assert!(!c.points.is_empty() && c.points.len() <= max, "{c:?} max {max}");
            next = c.first + c.n;
        }
        assert!((next..n).all(|i| !set(i)));
        assert_eq!(rank, (0..n).filter(|&i| set(i)).count());
    }

    #[test]
    fn chunks_cover_dense_scalars() {
        for n in [0, 1, 63, 64, 65, 1000, 4096, 5000] {
            for max in [64, 100, 128, 1 << 12] {
                check(n, None, max);
            }
        }
    }

    #[test]
    fn chunks_follow_bitmap_ranks() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for n in [1usize, 63, 64, 65, 777, 4096, 10_001] {
            for density in [0.0, 0.02, 0.25, 0.5, 1.0] {
                let words: Vec<u64> = (0..n.div_ceil(64) + 1)
                    .map(|_| (0..64).fold(0u64, |w, b| w | (u64::from(rng.gen_bool(density)) << b)))
                    .collect();
                for max in [64, 65, 200, 1 << 10] {
                    check(n, Some(&words), max);
                }
            }
        }
    }

    #[test]
    fn raw_sources_read_in_parallel_blocks_and_refuse_short_ranges() {
        let bytes: Vec<u8> = (0..(3 * READ_BLOCK + 12345)).map(|i| (i * 7 % 251) as u8).collect();
        for (offset, len) in [(0, 1), (5, READ_BLOCK), (READ_BLOCK - 3, 2 * READ_BLOCK + 7), (0, bytes.len())] {
            let mut dst = vec![0u8; len];
            read_parallel(&bytes, offset, &mut dst).unwrap();
            assert_eq!(dst, bytes[offset..offset + len]);
            read_parallel(&&bytes[..], offset, &mut dst).unwrap();
        }
        let mut dst = vec![0u8; 10];
        let err = read_parallel(&bytes, bytes.len() - 5, &mut dst).unwrap_err().to_string();
        assert!(err.contains("reading the points to stream"), "{err}");
    }

    #[test]
    fn bits_past_n_do_not_count() {
        let plan = plan_chunks(70, Some(&[u64::MAX, u64::MAX]), 64);
        assert_eq!(plan, vec![Chunk { first: 0, n: 64, points: 0..64 }, Chunk { first: 64, n: 6, points: 64..70 }]);
    }
}
