//! MSM in any [`DeviceGroup`] (G1, G2, Pallas, Vesta; kernels in cuda/msm.cuh); the host
//! picks the window, ranks the density bitmap, and combines the window sums
//! with blstrs or pasta_curves.
use blst::{blst_fp, blst_fp2, blst_p1, blst_p2};
use std::time::{Duration, Instant};

use blstrs::{G1Projective, G2Projective};
use group::Group;

use crate::buffers::{from_words, DevicePoints, DeviceScalars, Limbs};
use crate::curve::sealed::GroupKernels;
use crate::curve::DeviceGroup;
use crate::field::sealed::{FieldKernels, ScalarKernels};
use crate::device::{DeviceSpan, GpuDevice, GpuStream};
use crate::error::GpuError;
use crate::host::{bitmap_prefix, msm_acc_chunk, msm_pass_bytes_override, msm_pass_windows, msm_reduce_run, msm_window_bits, msm_window_override, msm_windows};
use crate::launch::{blocks, launch, raw, Arg, Selection};

/// Threads per block of the bucket-accumulation kernels: the
/// `__launch_bounds__(128, ..)` their register budget in cuda/msm.cuh is
/// computed for.
const ACC_BLOCK: u32 = 128;

impl GpuDevice {
    /// sum_i scalars[i] * points[rank(i)] over the first `n` scalars, in
    /// `G`. Without a bitmap every scalar takes part with point i; with one,
    /// scalar i takes part iff bit i is set, with point rank(i) (the number
    /// of set bits below i), as Groth16's A/B queries store only dense points.
    pub fn msm<G: DeviceGroup>(&self, s: &GpuStream, points: &DevicePoints<G>, scalars: &DeviceScalars<G::Scalar>, n: usize, bitmap: Option<&[u64]>) -> Result<G, GpuError> {
        Ok(self.msm_timed(s, points, scalars, n, bitmap)?.0)
    }

    /// [`GpuDevice::msm`], also saying where its time went.
    pub fn msm_timed<G: DeviceGroup>(&self, s: &GpuStream, points: &DevicePoints<G>, scalars: &DeviceScalars<G::Scalar>, n: usize, bitmap: Option<&[u64]>) -> Result<(G, MsmTiming), GpuError> {
        let t0 = Instant::now();
        let (sum, device) = self.msm_range::<G>(s, points.ptr(s), points.len(), scalars, 0, n, bitmap)?;
        Ok((sum, MsmTiming::new(device, t0.elapsed())))
    }

    /// sum over scalars `first..first + n` (the bitmap, if any, starts at
    /// scalar `first`; `first` a multiple of 64 then) with points counted
    /// from `points`: the MSM and its device time from CUDA events.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn msm_range<G: DeviceGroup>(
        &self,
        s: &GpuStream,
        points: u64,
        npoints: usize,
        scalars: &DeviceScalars<G::Scalar>,
        first: usize,
        n: usize,
        bitmap: Option<&[u64]>,
    ) -> Result<(G, Duration), GpuError> {
        let cv = G::kernels(&self.k);
        let sk = G::Scalar::scalar_kernels(&self.k);
        let (len, sp) = (scalars.len(), scalars.ptr(s));
        let (windows, c, ones, device) = self.msm_windows(s, &sk, &cv, points, npoints, (sp, len), first, n, bitmap)?;
        Ok((combine(&windows, c, &ones, cv.xyzz_words, G::from_xyzz), device))
    }

    /// The window bits an MSM with `n` general scalars (neither 0 nor 1:
    /// the ones that go into buckets) uses on this device:
    /// `KILN_MSM_WINDOW` when set, else [`msm_window_bits`] for its
    /// accumulation chunks.
    pub fn msm_window(&self, n: usize) -> u32 {
        msm_window_override().unwrap_or_else(|| msm_window_bits(n, self.info.sm_count, Tuning::for_size(n).acc_chunk))
    }

    /// The bytes one pass of an MSM's bucket stage may allocate on this
    /// device: `KILN_MSM_PASS_BYTES` when set, else a twentieth of the
    /// device's memory. Larger MSMs run their windows in passes, so their
    /// scratch (which a proof keeps free beside the parameters) stays near
    /// this share; the extra passes each read the scalars once more.
    pub fn msm_pass_bytes(&self) -> u64 {
        msm_pass_bytes_override().unwrap_or(self.info.total_memory as u64 / 20)
    }

    /// Runs the kernels on `scalars` = (device address, length in 32-byte
    /// elements); returns (window sums as XYZZ words, c, sum of the points
    /// whose scalar is one, device time from CUDA events).
    #[allow(clippy::too_many_arguments)]
    fn msm_windows(&self, s: &GpuStream, sk: &ScalarKernels, cv: &GroupKernels, points: u64, npoints: usize, scalars: (u64, usize), first: usize, n: usize, bitmap: Option<&[u64]>) -> Result<(Vec<u64>, u32, Vec<u64>, Duration), GpuError> {
        if first.checked_add(n).is_none_or(|end| end > scalars.1) || n >= 1 << 31 {
            return Err(GpuError::InvalidArgument(format!("scalars {first}..+{n} from a buffer of {}", scalars.1)));
        }
        let (sel_bufs, needed) = match bitmap {
            Some(bm) => {
                if bm.len() * 64 < n {
                    return Err(GpuError::InvalidArgument(format!("bitmap of {} bits for {n} scalars", bm.len() * 64)));
                }
                // Bits past n must not count: trim the bitmap to n bits.
                let mut bm = bm[..n.div_ceil(64)].to_vec();
                if !n.is_multiple_of(64) {
                    *bm.last_mut().unwrap() &= (1u64 << (n % 64)) - 1;
                }
                let (prefix, total) = bitmap_prefix(&bm);
                (Some((s.clone_htod(&bm)?, s.clone_htod(&prefix)?)), total)
            }
            None => (None, n),
        };
        let span = DeviceSpan::begin(s)?;
        if needed > npoints {
            return Err(GpuError::InvalidArgument(format!("{needed} points needed, {npoints} given")));
        }
        let sel = match &sel_bufs {
            Some((bm, pre)) => Selection { bitmap: raw(bm, s), prefix: raw(pre, s) },
            None => Selection::default(),
        };
        let mut prof = Profile::new(s);
        let xw = cv.xyzz_words;
        // Every device field has 32-byte elements.
        let sp = scalars.0 + first as u64 * 32;
        let n32 = n as u32;
        // Classes first: the window is sized for the general scalars alone.
        let totals = s.alloc_zeros::<u32>(2)?;
        let cls = unsafe { s.alloc::<u8>(n.max(1)) }?;
        let ones_list = unsafe { s.alloc::<u32>(n.max(1)) }?;
        // SAFETY: kiln_msm_classify(scalars, sel, n, cls, totals, ones):
        // scalars hold first + n values (checked above), cls and ones n
        // entries, totals 2; everything lives until the copy below syncs.
        unsafe { launch(s, sk.classify, blocks(n, 256), 256, &[Arg::U64(sp), Arg::Sel(sel), Arg::U32(n32), Arg::U64(raw(&cls, s)), Arg::U64(raw(&totals, s)), Arg::U64(raw(&ones_list, s))])? };
        let counted = s.clone_dtoh(&totals)?;
        let (general, ones_count) = (counted[0] as usize, counted[1] as usize);
        prof.mark("classify");
        let (windows, c) = if general > 0 { self.msm_buckets(s, sk, cv, &mut prof, points, sp, sel, &cls, n, general)? } else { (Vec::new(), 1) };
        let ones = if ones_count > 0 { self.msm_ones(s, cv, points, &ones_list, ones_count)? } else { vec![0; xw] };
        prof.mark("ones");
        let device = span.end()?;
        prof.report(&format!("msm n={n} general={general} ones={ones_count} c={c}"));
        drop((cls, ones_list, totals, sel_bufs));
        Ok((windows, c, ones, device))
    }

    /// Pippenger over the `general` scalars of class 2 (`cls`): returns the
    /// window sums (XYZZ words, synchronized) and the window bits.
    #[allow(clippy::too_many_arguments)]
    fn msm_buckets(&self, s: &GpuStream, sk: &ScalarKernels, cv: &GroupKernels, prof: &mut Profile, points: u64, sp: u64, sel: Selection, cls: &cudarc::driver::CudaSlice<u8>, n: usize, general: usize) -> Result<(Vec<u64>, u32), GpuError> {
        let plan = BucketPlan::new(self, general, cv.xyzz_words);
        let BucketPlan { tune, c, w, pass, nb, xw, window_chunks, run, segs } = plan;
        // One set of buffers for `pass` windows, reused by every pass.
        let mut counts = s.alloc_zeros::<u32>(pass * nb)?;
        let offsets = unsafe { s.alloc::<u32>(pass * nb) }?;
        let cursor = unsafe { s.alloc::<u32>(pass * nb) }?;
        let sorted = unsafe { s.alloc::<u32>(pass * general) }?;
        // Zero = infinity: empty buckets are never written.
        let mut buckets = s.alloc_zeros::<u64>(pass * nb * xw)?;
        let first = unsafe { s.alloc::<u64>(pass * window_chunks * xw) }?;
        let last = unsafe { s.alloc::<u64>(pass * window_chunks * xw) }?;
        let (pfirst, plast, k32) = (raw(&first, s), raw(&last, s), tune.acc_chunk as u32);
        let (pc, po, pcur, pcls, psorted, pb) = (raw(&counts, s), raw(&offsets, s), raw(&cursor, s), raw(cls, s), raw(&sorted, s), raw(&buckets, s));
        let (n32, g32, c32) = (n as u32, general as u32, c);
        let mut windows = Vec::with_capacity(w * xw);
        for w0 in (0..w).step_by(pass) {
            let pw = pass.min(w - w0);
            if w0 > 0 {
                s.memset_zeros(&mut counts)?;
                s.memset_zeros(&mut buckets)?;
            }
            let red = unsafe { s.alloc::<u64>(pw * segs * xw) }?;
            let (w0_32, pw32) = (w0 as u32, pw as u32);
            // SAFETY (all launches below): argument lists match cuda/msm.cuh's
            // kernels; counts/offsets/cursor hold pass*B u32 (pw <= pass
            // windows used), cls n bytes, sorted pass*general u32 (no window
            // holds more than the general scalars), buckets pass*B XYZZ,
            // first/last pass*ceil(general/K) XYZZ, red pw*segs XYZZ; points
            // hold every rank used (checked by the caller); all buffers live
            // until the synchronize in the window sums below.
            unsafe {
                launch(s, sk.count, blocks(n, 256), 256, &[Arg::U64(sp), Arg::U64(pcls), Arg::U32(n32), Arg::U32(c32), Arg::U32(w0_32), Arg::U32(pw32), Arg::U64(pc)])?;
                prof.mark("count");
                launch(s, &self.k.msm_scan, pw32, 1024, &[Arg::U64(pc), Arg::U64(po), Arg::U64(pcur), Arg::U32(nb as u32)])?;
                prof.mark("scan");
                launch(s, sk.scatter, blocks(n, 256), 256, &[Arg::U64(sp), Arg::Sel(sel), Arg::U64(pcls), Arg::U32(n32), Arg::U32(c32), Arg::U32(w0_32), Arg::U32(pw32), Arg::U32(g32), Arg::U64(pcur), Arg::U64(psorted)])?;
                prof.mark("scatter");
                launch(s, cv.acc, blocks(pw * window_chunks, ACC_BLOCK), ACC_BLOCK, &[Arg::U64(points), Arg::U64(psorted), Arg::U64(po), Arg::U64(pc), Arg::U32(g32), Arg::U32(c32), Arg::U32(pw32), Arg::U32(k32), Arg::U64(pb), Arg::U64(pfirst), Arg::U64(plast)])?;
                prof.mark("acc");
                launch(s, cv.fix, blocks(pw * nb, 128), 128, &[Arg::U64(po), Arg::U64(pc), Arg::U32(g32), Arg::U32(c32), Arg::U32(pw32), Arg::U32(k32), Arg::U64(pb), Arg::U64(pfirst), Arg::U64(plast)])?;
                prof.mark("fix");
                launch(s, cv.reduce, blocks(pw * segs, 128), 128, &[Arg::U64(pb), Arg::U32(nb as u32), Arg::U32(run as u32), Arg::U32((pw * segs) as u32), Arg::U64(raw(&red, s))])?;
            }
            prof.mark("reduce");
            windows.extend(self.sum_down(s, cv, red, pw, segs, tune.sum_group)?);
            prof.mark("window sums");
        }
        drop((counts, offsets, cursor, sorted, buckets, first, last));
        Ok((windows, c))
    }

    /// The totals of `red`'s `groups` runs of `per` XYZZ points (a power
    /// of two), each run summed down to one in rounds of `sum_group`: the
    /// XYZZ words, synchronized.
    fn sum_down(&self, s: &GpuStream, cv: &GroupKernels, mut red: cudarc::driver::CudaSlice<u64>, groups: usize, mut per: usize, sum_group: usize) -> Result<Vec<u64>, GpuError> {
        let xw = cv.xyzz_words;
        while per > 1 {
            let g = per.min(sum_group);
            let out = unsafe { s.alloc::<u64>(groups * (per / g) * xw) }?;
            // SAFETY: kiln_msm_sum_*(in, count, G, out); out holds count/G points.
            unsafe { launch(s, cv.sum, blocks(groups * per / g, 128), 128, &[Arg::U64(raw(&red, s)), Arg::U32((groups * per) as u32), Arg::U32(g as u32), Arg::U64(raw(&out, s))])? };
            s.synchronize()?; // the old `red` is dropped (freed) next
            red = out;
            per /= g;
        }
        Ok(s.clone_dtoh(&red)?)
    }

    /// Sum of the `count` listed points (the scalars equal to one): every
    /// thread a strided share, then the partial sums summed down. Returns
    /// the XYZZ words (synchronized).
    fn msm_ones(&self, s: &GpuStream, cv: &GroupKernels, points: u64, list: &cudarc::driver::CudaSlice<u32>, count: usize) -> Result<Vec<u64>, GpuError> {
        let xw = cv.xyzz_words;
        let tune = Tuning::for_size(count);
        let threads = self.ones_threads(count, tune);
        let part = unsafe { s.alloc::<u64>(threads * xw) }?;
        // SAFETY: kiln_msm_ones_*(points, ones, count, out): the list holds
        // `count` ranks of `points`; out a point per launched thread
        // (threads is a multiple of the block).
        unsafe { launch(s, cv.ones, blocks(threads, ACC_BLOCK), ACC_BLOCK, &[Arg::U64(points), Arg::U64(raw(list, s)), Arg::U32(count as u32), Arg::U64(raw(&part, s))])? };
        self.sum_down(s, cv, part, 1, threads, tune.sum_group)
    }
}

impl GpuDevice {
    /// Threads of the ones-sum for `count` ones: up to ~8K per SM (a power
    /// of two, so the group sums divide evenly), each with about
    /// `ones_chunk` points, in whole blocks of ACC_BLOCK (every launched
    /// thread writes a partial).
    fn ones_threads(&self, count: usize, tune: Tuning) -> usize {
        let cap = (self.info.sm_count as usize * 8192).next_power_of_two() / 2;
        (count / tune.ones_chunk).next_power_of_two().clamp(ACC_BLOCK as usize, cap.max(ACC_BLOCK as usize))
    }

    /// The most device memory one [`GpuDevice::msm`] of `n` scalars in `G`
    /// allocates on this device beside its inputs, in bytes (all of it is
    /// freed before the call returns): what a caller must leave free for
    /// it. Counts every scalar as general (in a bucket) and as a one, and
    /// a density bitmap; the window is the one the call would choose.
    pub fn msm_scratch_bytes<G: DeviceGroup>(&self, n: usize) -> u64 {
        let xw = G::kernels(&self.k).xyzz_words;
        let n = n.max(1);
        // classify: n class bytes, n u32 ones, the bitmap and its prefix
        // sums (one u64 each per 64 scalars), two counters.
        let classes = n as u64 * (1 + 4) + 2 * 8 * n.div_ceil(64) as u64 + 8;
        let buckets = BucketPlan::new(self, n, xw).bytes(n);
        // The ones' partials, and the first group sum's output beside them.
        let ones = 2 * (self.ones_threads(n, Tuning::for_size(n)) * xw * 8) as u64;
        classes + buckets.max(ones)
    }
}

/// The window, the windows per pass and the sizes of the bucket stage's
/// buffers for `general` scalars: one place for what `msm_buckets`
/// allocates and what [`GpuDevice::msm_scratch_bytes`] says it will.
#[derive(Clone, Copy)]
struct BucketPlan {
    tune: Tuning,
    c: u32,
    /// Windows, windows per pass, and buckets per window (signed digits:
    /// 2^(c-1)).
    w: usize,
    pass: usize,
    nb: usize,
    /// u64 words of one XYZZ point.
    xw: usize,
    /// Accumulation chunks of one window.
    window_chunks: usize,
    /// Buckets per reduction thread, and reduction segments per window.
    run: usize,
    segs: usize,
}

impl BucketPlan {
    fn new(dev: &GpuDevice, general: usize, xw: usize) -> Self {
        let tune = Tuning::for_size(general);
        let c = dev.msm_window(general);
        let (w, nb) = (msm_windows(c) as usize, 1usize << (c - 1));
        let run = tune.reduce_run.min(nb);
        let one = BucketPlan { tune, c, w, pass: 1, nb, xw, window_chunks: general.div_ceil(tune.acc_chunk), run, segs: nb / run };
        BucketPlan { pass: msm_pass_windows(w, one.bytes(general), dev.msm_pass_bytes()), ..one }
    }

    /// Bytes of one pass's buffers, alive together: counts, offsets and
    /// cursors (u32 per bucket), the sorted ranks (u32 per window and
    /// scalar), the buckets, two partial sums per chunk, and the segment
    /// sums twice (each group-sum round allocates its output before the
    /// input goes).
    fn bytes(&self, general: usize) -> u64 {
        let (w, nb) = (self.pass as u64, self.nb as u64);
        let u32s = 3 * w * nb + w * general as u64;
        let points = w * nb + 2 * w * self.window_chunks as u64 + 2 * w * self.segs as u64;
        4 * u32s + 8 * self.xw as u64 * points
    }
}

/// The serial lengths of an MSM's stages: each accumulation thread walks
/// `acc_chunk` sorted points, each reduction thread `reduce_run` buckets,
/// each group sum `sum_group` points, each ones-sum thread `ones_chunk`
/// ones, one point operation after another. Large MSMs have threads to
/// spare and want long runs (less fix-up and combination work); small ones
/// are latency-bound on the longest chain. H200, G1 / G2 ms with runs of
/// 64/64/64 against 16/8/16: 2^10 8.2 / 17.2 -> 4.7 / 11.0, 2^16 9.6 / 20.4 ->
/// 5.1 / 12.0, 2^20 21.2 / 66.5 -> 17.3 / 59.8.
#[derive(Clone, Copy, Debug)]
struct Tuning {
    acc_chunk: usize,
    reduce_run: usize,
    sum_group: usize,
    ones_chunk: usize,
}

impl Tuning {
    /// The runs for an MSM of `n` scalars; `KILN_MSM_ACC_CHUNK`,
    /// `KILN_MSM_REDUCE_RUN`, `KILN_MSM_SUM_GROUP`, `KILN_MSM_ONES_CHUNK`
    /// (powers of two) override them, to time variants with one binary.
    fn for_size(n: usize) -> Tuning {
        let small = n < 1 << 22;
        let base = Tuning {
            acc_chunk: msm_acc_chunk(n),
            reduce_run: msm_reduce_run(n),
            sum_group: 8,
            ones_chunk: if small { 16 } else { 64 },
        };
        let o = overrides();
        Tuning {
            acc_chunk: o[0].unwrap_or(base.acc_chunk),
            reduce_run: o[1].unwrap_or(base.reduce_run),
            sum_group: o[2].unwrap_or(base.sum_group),
            ones_chunk: o[3].unwrap_or(base.ones_chunk),
        }
    }
}

fn overrides() -> [Option<usize>; 4] {
    static O: std::sync::OnceLock<[Option<usize>; 4]> = std::sync::OnceLock::new();
    *O.get_or_init(|| {
        ["KILN_MSM_ACC_CHUNK", "KILN_MSM_REDUCE_RUN", "KILN_MSM_SUM_GROUP", "KILN_MSM_ONES_CHUNK"]
            .map(|k| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok()).filter(|v| v.is_power_of_two() && *v >= 2))
    })
}

/// Where one MSM call's time went.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MsmTiming {
    /// On the stream, between CUDA events: every kernel and the copy of the
    /// window sums back.
    pub device: Duration,
    /// The rest of the call on the host: bitmap ranks, allocations and
    /// launches not overlapped with the device, the final window combination.
    pub host: Duration,
}

impl MsmTiming {
    pub(crate) fn new(device: Duration, total: Duration) -> Self {
        MsmTiming { device, host: total.saturating_sub(device) }
    }
}

/// Horner over the windows from the top: acc = acc * 2^c + window_w.
fn combine<P: Group>(windows: &[u64], c: u32, ones: &[u64], xw: usize, to_proj: impl Fn(&[u64]) -> P) -> P {
    let mut acc = P::identity();
    for wsum in windows.chunks(xw).rev() {
        for _ in 0..c {
            acc = acc.double();
        }
        acc += to_proj(wsum);
    }
    acc + to_proj(ones)
}


const _: () = assert!(std::mem::size_of::<G1Projective>() == std::mem::size_of::<blst_p1>());
const _: () = assert!(std::mem::size_of::<G2Projective>() == std::mem::size_of::<blst_p2>());

fn fp(w: &[u64]) -> blst_fp {
    blst_fp { l: w.try_into().unwrap() }
}

fn fp2(w: &[u64]) -> blst_fp2 {
    blst_fp2 { fp: [fp(&w[0..6]), fp(&w[6..12])] }
}

/// XYZZ (x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2) -> Jacobian (X ZZ^2, Y ZZZ^2, ZZZ);
/// ZZ = 0 is infinity, which blst writes as Z = 0. blstrs hides its Fp type,
/// so the arithmetic is blst's own.
pub(crate) fn g1_from_xyzz(p: &[u64]) -> G1Projective {
    let (x, y, zz, zzz) = (fp(&p[0..6]), fp(&p[6..12]), fp(&p[12..18]), fp(&p[18..24]));
    let mut out = blst_p1::default();
    if zz.l.iter().all(|&v| v == 0) {
        return G1Projective::identity();
    }
    let (mut zz2, mut zzz2) = (blst_fp::default(), blst_fp::default());
    // SAFETY: blst's field functions on valid, initialized values.
    unsafe {
        blst::blst_fp_sqr(&mut zz2, &zz);
        blst::blst_fp_sqr(&mut zzz2, &zzz);
        blst::blst_fp_mul(&mut out.x, &x, &zz2);
        blst::blst_fp_mul(&mut out.y, &y, &zzz2);
    }
    out.z = zzz;
    // SAFETY: G1Projective is repr(transparent) over blst_p1 (sizes asserted).
    unsafe { std::mem::transmute::<blst_p1, G1Projective>(out) }
}

pub(crate) fn g2_from_xyzz(p: &[u64]) -> G2Projective {
    let (x, y, zz, zzz) = (fp2(&p[0..12]), fp2(&p[12..24]), fp2(&p[24..36]), fp2(&p[36..48]));
    if zz.fp.iter().all(|f| f.l.iter().all(|&v| v == 0)) {
        return G2Projective::identity();
    }
    let mut out = blst_p2::default();
    let (mut zz2, mut zzz2) = (blst_fp2::default(), blst_fp2::default());
    // SAFETY: as in g1_from_xyzz.
    unsafe {
        blst::blst_fp2_sqr(&mut zz2, &zz);
        blst::blst_fp2_sqr(&mut zzz2, &zzz);
        blst::blst_fp2_mul(&mut out.x, &x, &zz2);
        blst::blst_fp2_mul(&mut out.y, &y, &zzz2);
    }
    out.z = zzz;
    // SAFETY: G2Projective is repr(transparent) over blst_p2 (sizes asserted).
    unsafe { std::mem::transmute::<blst_p2, G2Projective>(out) }
}

/// XYZZ words of a Pasta curve (4 coordinates of 4 Montgomery u64 limbs)
/// -> its Jacobian point (X ZZ^2, Y ZZZ^2, ZZZ), as for G1 above; ZZ = 0 is
/// infinity.
pub(crate) fn pasta_from_xyzz<C: pasta_curves::arithmetic::CurveExt>(p: &[u64]) -> C
where
    C::Base: Limbs + Default + Clone,
{
    use ff::Field as _;
    let f: Vec<C::Base> = from_words(&p[..16]);
    let (x, y, zz, zzz) = (f[0], f[1], f[2], f[3]);
    if bool::from(zz.is_zero()) {
        return C::identity();
    }
    // A window sum of points on the curve is on the curve: new_jacobian's
    // check only fails on a broken kernel, which the caller's checks catch.
    C::new_jacobian(x * zz.square(), y * zzz.square(), zzz).expect("an XYZZ point from the device is on the curve")
}

/// Stage timings of one MSM, printed to stderr when KILN_PROFILE is set.
struct Profile<'a> {
    s: &'a GpuStream,
    marks: Option<Vec<(&'static str, cudarc::driver::CudaEvent)>>,
}

impl<'a> Profile<'a> {
    fn new(s: &'a GpuStream) -> Self {
        let on = std::env::var_os("KILN_PROFILE").is_some();
        let mut p = Self { s, marks: on.then(Vec::new) };
        p.mark("start");
        p
    }
    fn mark(&mut self, name: &'static str) {
        if let Some(m) = &mut self.marks {
            if let Ok(e) = self.s.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)) {
                m.push((name, e));
            }
        }
    }
    fn report(&self, what: &str) {
        if let Some(m) = &self.marks {
            let parts: Vec<String> = m.windows(2).filter_map(|w| Some(format!("{} {:.2}", w[1].0, w[0].1.elapsed_ms(&w[1].1).ok()?))).collect();
            eprintln!("profile {what}: {} (ms)", parts.join(", "));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blst::{blst_p1_affine, blst_p2_affine};
    use blstrs::Scalar;
    use group::Curve;

    #[test]
    fn combine_is_horner_in_2_to_the_c() {
        let g = G1Projective::generator();
        let pts = [g * Scalar::from(3u64), g * Scalar::from(5u64), g * Scalar::from(7u64), g];
        let got = combine(&[0, 1, 2], 3, &[3], 1, |w| pts[w[0] as usize]);
        assert_eq!(got, g * Scalar::from(3 + 8 * 5 + 64 * 7 + 1u64));
    }

    #[test]
    fn g1_xyzz_to_projective() {
        let p = G1Projective::generator() * Scalar::from(123_456_789u64);
        // SAFETY: G1Affine is repr(transparent) over blst_p1_affine.
        let a: blst_p1_affine = unsafe { std::mem::transmute(p.to_affine()) };
        let z = a.y; // any non-zero Z
        let (mut zz, mut zzz, mut x, mut y) = Default::default();
        // SAFETY: blst field arithmetic on initialized values.
        unsafe {
            blst::blst_fp_sqr(&mut zz, &z);
            blst::blst_fp_mul(&mut zzz, &zz, &z);
            blst::blst_fp_mul(&mut x, &a.x, &zz);
            blst::blst_fp_mul(&mut y, &a.y, &zzz);
        }
        let w: Vec<u64> = [x, y, zz, zzz].iter().flat_map(|f: &blst_fp| f.l).collect();
        assert_eq!(g1_from_xyzz(&w), p);
        assert_eq!(g1_from_xyzz(&[0; 24]), G1Projective::identity());
    }

    #[test]
    fn g2_xyzz_to_projective() {
        let p = G2Projective::generator() * Scalar::from(987_654_321u64);
        // SAFETY: G2Affine is repr(transparent) over blst_p2_affine.
        let a: blst_p2_affine = unsafe { std::mem::transmute(p.to_affine()) };
        let z = a.x;
        let (mut zz, mut zzz, mut x, mut y) = Default::default();
        // SAFETY: as above.
        unsafe {
            blst::blst_fp2_sqr(&mut zz, &z);
            blst::blst_fp2_mul(&mut zzz, &zz, &z);
            blst::blst_fp2_mul(&mut x, &a.x, &zz);
            blst::blst_fp2_mul(&mut y, &a.y, &zzz);
        }
        let w: Vec<u64> = [x, y, zz, zzz].iter().flat_map(|f: &blst_fp2| f.fp.iter().flat_map(|e| e.l).collect::<Vec<_>>()).collect();
        assert_eq!(g2_from_xyzz(&w), p);
        assert_eq!(g2_from_xyzz(&[0; 48]), G2Projective::identity());
    }

    #[test]
    fn pasta_xyzz_to_projective() {
        use crate::buffers::as_words;
        use pasta_curves::arithmetic::CurveAffine;
        use pasta_curves::{pallas, vesta, Fp, Fq};
        // Affine (x, y) with Z = y: XYZZ (x Z^2, y Z^3, Z^2, Z^3).
        macro_rules! check {
            ($c:ty, $p:expr) => {{
                let p: $c = $p;
                let a = p.to_affine();
                let c = a.coordinates().unwrap();
                let z = *c.y();
                let (zz, zzz) = (z.square(), z.square() * z);
                let w = as_words(&[*c.x() * zz, *c.y() * zzz, zz, zzz]).to_vec();
                assert_eq!(pasta_from_xyzz::<$c>(&w), p);
                assert_eq!(pasta_from_xyzz::<$c>(&[0; 16]), <$c>::identity());
            }};
        }
        check!(pallas::Point, pallas::Point::generator() * Fq::from(123_456_789u64));
        check!(vesta::Point, vesta::Point::generator() * Fp::from(987_654_321u64));
    }
}
