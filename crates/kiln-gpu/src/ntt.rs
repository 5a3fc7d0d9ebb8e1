//! NTTs over any [`DeviceField`] (BLS12-381's Fr, the Pasta scalar fields)
//! and the Groth16 H pipeline, BLS12-381 only (see cuda/ntt.cuh for the kernels).
use std::sync::Arc;

use blstrs::Scalar;
use cudarc::driver::CudaSlice;
use ff::{Field, PrimeField};

use crate::buffers::{as_words, DeviceScalars};
use crate::field::sealed::{FieldKernels, NttKernels};
use crate::field::{root_of_unity_of, DeviceField};
use crate::device::{GpuDevice, GpuStream};
use crate::error::GpuError;
use crate::host::{plan_passes, NttPass};
use crate::launch::{blocks, launch, Arg, Scale};

/// Transform direction. Forward: coefficients -> evaluations at w^i (or
/// g w^i on the coset); Inverse: the way back, including the 1/n.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NttDirection {
    Forward,
    Inverse,
}

/// Coset generator: Fr's multiplicative generator 7, as bellperson uses.
pub fn coset_generator() -> Scalar {
    Scalar::MULTIPLICATIVE_GENERATOR
}

/// Two-level table of c * g^e: hi[a] = c g^(a 2^bits), lo[b] = g^b.
struct ScaleTable {
    hi: CudaSlice<u64>,
    lo: CudaSlice<u64>,
    bits: u32,
}

/// Per-size device tables: twiddles both ways and the four scalings used.
pub(crate) struct NttTables {
    tw_fwd: CudaSlice<u64>,
    tw_inv: CudaSlice<u64>,
    inv_plain: ScaleTable,   // 1/n
    inv_coset: ScaleTable,   // g^-e / n
    fwd_coset: ScaleTable,   // g^e
    h_first: ScaleTable,     // g^e / n (iNTT then shift onto the coset)
}

impl GpuDevice {
    fn scale_table<F: DeviceField>(&self, s: &GpuStream, log_n: u32, c: F, g: F) -> Result<ScaleTable, GpuError> {
        let bits = log_n.div_ceil(2);
        let lo: Vec<F> = std::iter::successors(Some(F::ONE), |x| Some(*x * g)).take(1 << bits).collect();
        let step = lo[(1 << bits) - 1] * g; // g^(2^bits)
        let hi: Vec<F> =
            std::iter::successors(Some(c), |x| Some(*x * step)).take(1 << (log_n - bits)).collect();
        Ok(ScaleTable { hi: s.clone_htod(as_words(&hi))?, lo: s.clone_htod(as_words(&lo))?, bits })
    }

    fn twiddles<F: DeviceField>(&self, s: &GpuStream, log_n: u32, w: F) -> Result<CudaSlice<u64>, GpuError> {
        let half = 1usize << (log_n - 1);
        let pows: Vec<F> = std::iter::successors(Some(w), |x| Some(x.square())).take(log_n as usize).collect();
        let pows = s.clone_htod(as_words(&pows))?;
        let tw = unsafe { s.alloc::<u64>(half * 4) }?;
        let (twp, pp) = (crate::launch::raw(&tw, s), crate::launch::raw(&pows, s));
        // SAFETY: kiln_ntt_twiddles*(F* tw, const F* pows, u32 count); tw holds
        // `half` elements, pows log_n >= bits of any j < half.
        unsafe { launch(s, F::ntt_kernels(&self.k).twiddles, blocks(half, 256), 256, &[Arg::U64(twp), Arg::U64(pp), Arg::U32(half as u32)])? };
        s.synchronize()?; // pows is freed on return
        Ok(tw)
    }

    /// The tables of `F`'s transforms of 2^log_n, made once per device.
    /// The coset generator is `F::MULTIPLICATIVE_GENERATOR` (Fr: 7, as
    /// bellperson; Pasta: 5, as halo2).
    pub(crate) fn ntt_tables<F: DeviceField>(&self, s: &GpuStream, log_n: u32) -> Result<Arc<NttTables>, GpuError> {
        if let Some(t) = self.ntt_tables.lock().unwrap().get(&(F::ID, log_n)) {
            return Ok(t.clone());
        }
        let w = root_of_unity_of::<F>(log_n);
        let winv = w.invert().unwrap();
        let ninv = F::from(1u64 << log_n).invert().unwrap();
        let g = F::MULTIPLICATIVE_GENERATOR;
        let ginv = g.invert().unwrap();
        let t = Arc::new(NttTables {
            tw_fwd: self.twiddles(s, log_n, w)?,
            tw_inv: self.twiddles(s, log_n, winv)?,
            inv_plain: self.scale_table(s, log_n, ninv, F::ONE)?,
            inv_coset: self.scale_table(s, log_n, ninv, ginv)?,
            fwd_coset: self.scale_table(s, log_n, F::ONE, g)?,
            h_first: self.scale_table(s, log_n, ninv, g)?,
        });
        s.synchronize()?;
        self.ntt_tables.lock().unwrap().insert((F::ID, log_n), t.clone());
        Ok(t)
    }

    /// Device memory the NTT tables of 2^`log_n` in `F` take, in bytes:
    /// two twiddle tables of 2^(log_n - 1) elements and four two-part
    /// scale tables. They are made by the first NTT or H pipeline of that
    /// size here and stay for the device's life.
    pub fn ntt_tables_bytes<F: DeviceField>(&self, log_n: u32) -> u64 {
        if log_n == 0 {
            return 0;
        }
        let bits = log_n.div_ceil(2);
        32 * (2 * (1u64 << (log_n - 1)) + 4 * ((1u64 << bits) + (1u64 << (log_n - bits))))
    }

    /// Whether the NTT tables of 2^`log_n` in `F` are made on this device.
    pub fn has_ntt_tables<F: DeviceField>(&self, log_n: u32) -> bool {
        self.ntt_tables.lock().unwrap().contains_key(&(F::ID, log_n))
    }

    /// Runs all passes of one DIF (natural -> bit-reversed) or DIT
    /// (bit-reversed -> natural) transform in place on 2^log_n elements.
    #[allow(clippy::too_many_arguments)]
    fn ntt_passes(
        &self,
        s: &GpuStream,
        f: &NttKernels,
        data: u64,
        log_n: u32,
        dit: bool,
        tw: &CudaSlice<u64>,
        pre: Option<(&ScaleTable, bool)>,
        post: Option<(&ScaleTable, bool)>,
    ) -> Result<(), GpuError> {
        let mut passes: Vec<NttPass> = plan_passes(log_n);
        if !dit {
            passes.reverse();
        }
        let scale = |t: Option<(&ScaleTable, bool)>| match t {
            Some((t, rev)) => Scale {
                hi: crate::launch::raw(&t.hi, s),
                lo: crate::launch::raw(&t.lo, s),
                bits: t.bits,
                rev: rev as u32,
            },
            None => Scale::default(),
        };
        let last = passes.len().saturating_sub(1);
        let f = if dit { f.dit } else { f.dif };
        let twp = crate::launch::raw(tw, s);
        for (i, p) in passes.iter().enumerate() {
            let e = 1u32 << (p.k + p.t);
            let threads = (e / 2).clamp(1, 256);
            let grid = 1u32 << (log_n - p.k - p.t);
            let pre_s = if i == 0 { scale(pre) } else { Scale::default() };
            let post_s = if i == last { scale(post) } else { Scale::default() };
            // SAFETY: kiln_ntt_{dif,dit}(Fr*, const Fr* tw, u32 log_n, u32 lo, u32 k,
            // u32 t, Scale pre, Scale post); data holds 2^log_n elements, tw 2^(log_n-1),
            // scale tables cover indices < 2^log_n; grid * tile = 2^log_n.
            unsafe {
                launch(s, f, grid, threads, &[
                    Arg::U64(data), Arg::U64(twp), Arg::U32(log_n), Arg::U32(p.lo), Arg::U32(p.k),
                    Arg::U32(p.t), Arg::Scale(pre_s), Arg::Scale(post_s),
                ])?
            };
        }
        Ok(())
    }

    fn bitrev(&self, s: &GpuStream, data: u64, log_n: u32) -> Result<(), GpuError> {
        let n = 1usize << log_n;
        // SAFETY: kiln_bitrev(Fr*, u32 log_n) on 2^log_n elements of 32
        // bytes (every device field's size: it only moves them).
        unsafe { launch(s, &self.k.bitrev, blocks(n, 256), 256, &[Arg::U64(data), Arg::U32(log_n)]) }
    }

    fn check_len<F: DeviceField>(buf: &DeviceScalars<F>, log_n: u32) -> Result<(), GpuError> {
        if log_n > 31 || buf.len() < (1usize << log_n) {
            return Err(GpuError::InvalidArgument(format!("NTT of 2^{log_n} on a buffer of {}", buf.len())));
        }
        Ok(())
    }

    /// In-place NTT of the first 2^log_n elements of `F` (Fr, or a Pasta
    /// scalar field), natural order in and out, over `F`'s 2^log_n-th roots
    /// ([`root_of_unity_of`]). `coset`: evaluate on (or interpolate from)
    /// g * <w>, g = `F::MULTIPLICATIVE_GENERATOR` (Fr: 7, Pasta: 5).
    pub fn ntt<F: DeviceField>(&self, s: &GpuStream, data: &mut DeviceScalars<F>, log_n: u32, dir: NttDirection, coset: bool) -> Result<(), GpuError> {
        Self::check_len(data, log_n)?;
        if log_n == 0 {
            return Ok(());
        }
        if log_n > F::S {
            return Err(GpuError::InvalidArgument(format!("NTT of 2^{log_n} in {}, whose two-adicity is {}", F::NAME, F::S)));
        }
        let t = self.ntt_tables::<F>(s, log_n)?;
        let k = F::ntt_kernels(&self.k);
        let p = data.ptr(s);
        match dir {
            NttDirection::Forward => {
                let pre = coset.then_some((&t.fwd_coset, false));
                self.ntt_passes(s, &k, p, log_n, false, &t.tw_fwd, pre, None)?;
            }
            NttDirection::Inverse => {
                let post = if coset { &t.inv_coset } else { &t.inv_plain };
                self.ntt_passes(s, &k, p, log_n, false, &t.tw_inv, None, Some((post, true)))?;
            }
        }
        self.bitrev(s, p, log_n)
    }

    /// Groth16's H polynomial. a, b, c hold n evaluations each over the
    /// domain of m = 2^log_m points (buffers of at least m; entries n..m are
    /// zeroed here). Computes h = (A B - C) / Z on the coset g<w> and writes
    /// h's m coefficients, natural order, into `a` (the H MSM uses the first
    /// m - 1). b and c are clobbered.
    pub fn h_pipeline(&self, s: &GpuStream, a: &mut DeviceScalars, b: &mut DeviceScalars, c: &mut DeviceScalars, n: usize, log_m: u32) -> Result<(), GpuError> {
        let m = 1usize << log_m;
        for x in [&*a, &*b, &*c] {
            Self::check_len(x, log_m)?;
        }
        if n > m || log_m == 0 {
            return Err(GpuError::InvalidArgument(format!("H pipeline: n = {n} over a domain of 2^{log_m}")));
        }
        let t = self.ntt_tables::<Scalar>(s, log_m)?;
        let k = Scalar::ntt_kernels(&self.k);
        for x in [&mut *a, &mut *b, &mut *c] {
            if n < m {
                let mut tail = x.buf.slice_mut(n * 4..m * 4);
                s.memset_zeros(&mut tail)?;
            }
            let p = x.ptr(s);
            // Coefficients (bit-reversed, shifted onto the coset) ...
            self.ntt_passes(s, &k, p, log_m, false, &t.tw_inv, None, Some((&t.h_first, true)))?;
            // ... then evaluations on the coset, natural order.
            self.ntt_passes(s, &k, p, log_m, true, &t.tw_fwd, None, None)?;
        }
        // Z(g w^i) = g^m - 1 for every i.
        let zinv = (coset_generator().pow_vartime([m as u64]) - Scalar::ONE).invert().unwrap();
        let zinv = s.clone_htod(as_words(&[zinv]))?;
        let (pa, pb, pc) = (a.ptr(s), b.ptr(s), c.ptr(s));
        // SAFETY: kiln_ab_minus_c(Fr* a, const Fr* b, const Fr* c, const Fr* k, u32 n) over m elements.
        unsafe {
            launch(s, &self.k.ab_minus_c, blocks(m, 256), 256, &[
                Arg::U64(pa), Arg::U64(pb), Arg::U64(pc), Arg::U64(crate::launch::raw(&zinv, s)), Arg::U32(m as u32),
            ])?
        };
        self.ntt_passes(s, &k, pa, log_m, false, &t.tw_inv, None, Some((&t.inv_coset, true)))?;
        self.bitrev(s, pa, log_m)?;
        s.synchronize()?; // zinv is freed on return
        Ok(())
    }
}
