//! Constraint evaluation on the device: a circuit's compiled R1CS matrices
//! uploaded once ([`GpuDevice::upload_r1cs`]: row offsets, 4-byte columns,
//! narrow coefficient ids, the coefficient table), then per proof only the
//! witness goes up and [`GpuDevice::r1cs_products`] computes a = A.w,
//! b = B.w, c = C.w into domain-sized device vectors, checking a*b = c on
//! every row in the same pass (cuda/r1cs.cuh).

mod pack;

use cudarc::driver::CudaSlice;

pub use pack::{HostMatrix, HostR1cs, IdWidth, R1CS_INPUT_BIT};
use pack::{pack_terms, Id};

use crate::buffers::{as_words, DeviceScalars};
use crate::device::{GpuDevice, GpuStream};
use crate::error::GpuError;
use crate::launch::{blocks, launch, raw, Arg, Csr};

/// Terms packed and copied at a time while uploading (48 MiB of host
/// staging at most with 4-byte ids).
const UPLOAD_TERMS: usize = 1 << 22;

/// Rows per kernel launch: ~1 ms of work on an H200, so a launch of a
/// more urgent stream waits at most about that long for the SMs.
const LAUNCH_ROWS: usize = 1 << 22;

/// Threads per block (cuda/r1cs.cuh's `KILN_R1CS_THREADS`, which its
/// launch bounds assume).
const THREADS: u32 = 256;

/// `KILN_R1CS_WARP_ROWS=1`, read once: the products kernel that sums rows
/// longer than 32 terms with the whole warp (`row_value_warp`), for the
/// long bit-packing rows of real Filecoin matrices. Off by default until it
/// is checked and timed against the one-thread-per-row kernel on a GPU.
fn warp_rows() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("KILN_R1CS_WARP_ROWS").is_ok_and(|v| v == "1"))
}

/// Coefficient ids of one matrix, at the width of the circuit's table.
enum Ids {
    U8(CudaSlice<u8>),
    U16(CudaSlice<u16>),
    U32(CudaSlice<u32>),
}

/// One matrix on the device.
struct DeviceMatrix {
    start: CudaSlice<u32>,
    cols: CudaSlice<u32>,
    ids: Ids,
}

/// A circuit's A, B and C matrices in VRAM, with its coefficient table:
/// read-only once uploaded, so proofs on any stream of the device may use
/// it at once.
pub struct DeviceR1cs {
    matrices: [DeviceMatrix; 3],
    coeffs: CudaSlice<u64>,
    rows: usize,
    num_inputs: usize,
    num_aux: usize,
    width: IdWidth,
    bytes: u64,
}

impl DeviceR1cs {
    /// Constraints (rows).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// VRAM held (what [`HostR1cs::device_bytes`] predicted).
    pub fn device_bytes(&self) -> u64 {
        self.bytes
    }

    pub fn id_width(&self) -> IdWidth {
        self.width
    }
}

/// a, b, c of one proof on the device, over the whole evaluation domain
/// (rows past the circuit's are zero), and the first row with a*b != c.
pub struct DeviceProducts {
    pub a: DeviceScalars,
    pub b: DeviceScalars,
    pub c: DeviceScalars,
    pub first_unsatisfied: Option<usize>,
}

impl GpuDevice {
    /// Uploads `r`'s matrices on `stream`, checking every offset, column
    /// and id on the way (so the kernel never reads out of bounds); the
    /// terms go up a piece at a time through one reused host staging
    /// buffer. Returns once the host slices may be reused.
    pub fn upload_r1cs(&self, s: &GpuStream, r: &HostR1cs) -> Result<DeviceR1cs, GpuError> {
        r.check_shape().map_err(GpuError::InvalidArgument)?;
        let width = r.id_width();
        let up = |m: &HostMatrix| -> Result<DeviceMatrix, GpuError> {
            let start = s.clone_htod(m.row_start)?;
            let (cols, ids) = match width {
                IdWidth::U8 => upload_terms::<u8>(s, r, m.terms).map(|(c, i)| (c, Ids::U8(i)))?,
                IdWidth::U16 => upload_terms::<u16>(s, r, m.terms).map(|(c, i)| (c, Ids::U16(i)))?,
                IdWidth::U32 => upload_terms::<u32>(s, r, m.terms).map(|(c, i)| (c, Ids::U32(i)))?,
            };
            Ok(DeviceMatrix { start, cols, ids })
        };
        let matrices = [up(&r.matrices[0])?, up(&r.matrices[1])?, up(&r.matrices[2])?];
        let coeffs = s.clone_htod(as_words(r.coeffs))?;
        s.synchronize()?;
        Ok(DeviceR1cs { matrices, coeffs, rows: r.rows(), num_inputs: r.num_inputs, num_aux: r.num_aux, width, bytes: r.device_bytes() })
    }

    /// a, b, c = A.w, B.w, C.w for the witness `w = (inputs, aux)` (device
    /// vectors at least as long as the circuit's), as new vectors of
    /// `domain` elements, and the first row where a*b != c. Waits for the
    /// result.
    pub fn r1cs_products(&self, s: &GpuStream, m: &DeviceR1cs, inputs: &DeviceScalars, aux: &DeviceScalars, domain: usize) -> Result<DeviceProducts, GpuError> {
        if domain < m.rows {
            return Err(GpuError::InvalidArgument(format!("products of {} rows into a domain of {domain}", m.rows)));
        }
        let fresh = || -> Result<DeviceScalars, GpuError> {
            // SAFETY: `r1cs_products_into` writes every element (rows by the
            // kernel, the rest zeroed) before anything reads them, and u64
            // limbs have no invalid values.
            let buf = unsafe { s.alloc::<u64>(domain.max(1) * 4) }?;
            Ok(DeviceScalars::new(buf))
        };
        let (mut a, mut b, mut c) = (fresh()?, fresh()?, fresh()?);
        let first_unsatisfied = self.r1cs_products_into(s, m, inputs, aux, [&mut a, &mut b, &mut c])?;
        Ok(DeviceProducts { a, b, c, first_unsatisfied })
    }

    /// [`r1cs_products`](Self::r1cs_products) into `out` (three vectors of
    /// one length, at least the circuit's rows; elements past the rows are
    /// zeroed), returning the first row where a*b != c.
    pub fn r1cs_products_into(&self, s: &GpuStream, m: &DeviceR1cs, inputs: &DeviceScalars, aux: &DeviceScalars, out: [&mut DeviceScalars; 3]) -> Result<Option<usize>, GpuError> {
        let len = out[0].len();
        if inputs.len() < m.num_inputs || aux.len() < m.num_aux || len < m.rows || out.iter().any(|o| o.len() != len) {
            return Err(GpuError::InvalidArgument(format!(
                "products of {} rows over {} inputs and {} aux: given {} inputs, {} aux, outputs of {:?} elements",
                m.rows,
                m.num_inputs,
                m.num_aux,
                inputs.len(),
                aux.len(),
                out.iter().map(|o| o.len()).collect::<Vec<_>>()
            )));
        }
        let [a, b, c] = out;
        if len > m.rows {
            for o in [&mut *a, &mut *b, &mut *c] {
                s.memset_zeros(&mut o.buf.slice_mut(m.rows * 4..))?;
            }
        }
        let first_bad = s.clone_htod(&[u32::MAX])?;
        let kernel = match (m.width, warp_rows()) {
            (IdWidth::U8, false) => &self.k.r1cs_products_u8,
            (IdWidth::U16, false) => &self.k.r1cs_products_u16,
            (IdWidth::U32, false) => &self.k.r1cs_products_u32,
            (IdWidth::U8, true) => &self.k.r1cs_products_warp_u8,
            (IdWidth::U16, true) => &self.k.r1cs_products_warp_u16,
            (IdWidth::U32, true) => &self.k.r1cs_products_warp_u32,
        };
        let csr = |d: &DeviceMatrix| Csr {
            start: raw(&d.start, s),
            cols: raw(&d.cols, s),
            ids: match &d.ids {
                Ids::U8(x) => raw(x, s),
                Ids::U16(x) => raw(x, s),
                Ids::U32(x) => raw(x, s),
            },
        };
        let [ma, mb, mc] = &m.matrices;
        let mut lo = 0;
        while lo < m.rows {
            let hi = (lo + LAUNCH_ROWS).min(m.rows);
            // SAFETY: the signature of KILN_R1CS_PRODUCTS in cuda/r1cs.cuh:
            // (Csr a, Csr b, Csr c, const Fr* inputs, const Fr* aux, const Fr*
            // coeffs, Fr* out_a, Fr* out_b, Fr* out_c, u32 first, u32 end,
            // u32* first_bad), Csr's id width the kernel's. Every offset,
            // column and id was checked against these lengths at upload
            // (inputs, aux and the outputs were checked above), and
            // everything outlives the synchronize below.
            unsafe {
                launch(s, kernel, blocks(hi - lo, THREADS), THREADS, &[
                    Arg::Csr(csr(ma)),
                    Arg::Csr(csr(mb)),
                    Arg::Csr(csr(mc)),
                    Arg::U64(inputs.ptr(s)),
                    Arg::U64(aux.ptr(s)),
                    Arg::U64(raw(&m.coeffs, s)),
                    Arg::U64(a.ptr(s)),
                    Arg::U64(b.ptr(s)),
                    Arg::U64(c.ptr(s)),
                    Arg::U32(lo as u32),
                    Arg::U32(hi as u32),
                    Arg::U64(raw(&first_bad, s)),
                ])?
            };
            lo = hi;
        }
        let bad = s.clone_dtoh(&first_bad)?;
        s.synchronize()?;
        Ok(bad.first().copied().filter(|&r| r != u32::MAX).map(|r| r as usize))
    }
}

/// One matrix's columns and ids on the device, packed and checked a piece
/// at a time through one reused host staging buffer.
fn upload_terms<I: Id>(s: &GpuStream, r: &HostR1cs, terms: &[[u32; 2]]) -> Result<(CudaSlice<u32>, CudaSlice<I>), GpuError> {
    let n = terms.len().max(1);
    let (mut cols, mut ids) = (s.alloc_zeros::<u32>(n)?, s.alloc_zeros::<I>(n)?);
    let piece = UPLOAD_TERMS.min(terms.len());
    let (mut hc, mut hi) = (vec![0u32; piece], vec![I::default(); piece]);
    for (k, chunk) in terms.chunks(UPLOAD_TERMS).enumerate() {
        let (hc, hi) = (&mut hc[..chunk.len()], &mut hi[..chunk.len()]);
        pack_terms(r, chunk, hc, hi).map_err(GpuError::InvalidArgument)?;
        let at = k * UPLOAD_TERMS;
        s.memcpy_htod(hc, &mut cols.slice_mut(at..at + chunk.len()))?;
        s.memcpy_htod(hi, &mut ids.slice_mut(at..at + chunk.len()))?;
        // The staging is pageable memory reused for the next piece.
        s.synchronize()?;
    }
    Ok((cols, ids))
}
