//! The host side of the compiled R1CS in VRAM: what the matrices look like
//! to the caller ([`HostR1cs`]), what they become on the device (columns as
//! they are, coefficient ids in the narrowest width the coefficient table
//! allows), how many device bytes that takes, and the checks that make
//! every index the kernel reads in bounds. No device code: tested on CPU.

use blstrs::Scalar;
use ff::Field;
use rayon::prelude::*;

/// Bit 31 of a column marks a public input (cuda/r1cs.cuh's
/// `KILN_R1CS_INPUT_BIT`; kiln-synth's `CompiledR1cs::INPUT_BIT`).
pub const R1CS_INPUT_BIT: u32 = 1 << 31;

/// One matrix in compressed-row form: row `r` is
/// `terms[row_start[r] as usize..row_start[r + 1] as usize]`, each term
/// `[column, coefficient id]` (kiln-synth's `MatrixView`).
#[derive(Clone, Copy, Debug)]
pub struct HostMatrix<'a> {
    pub row_start: &'a [u32],
    pub terms: &'a [[u32; 2]],
}

/// A circuit's A, B and C matrices as the host holds them, over the
/// witness `(inputs, aux)`: a column is an aux index, or an input index
/// with [`R1CS_INPUT_BIT`] set; an id indexes `coeffs`, whose entries 0 and
/// 1 must be 1 and -1 (the kernel adds or subtracts those without a
/// multiplication).
#[derive(Clone, Copy, Debug)]
pub struct HostR1cs<'a> {
    pub num_inputs: usize,
    pub num_aux: usize,
    pub coeffs: &'a [Scalar],
    pub matrices: [HostMatrix<'a>; 3],
}

/// How wide a coefficient id is on the device: the narrowest that holds
/// every id of the table (Filecoin circuits: a few hundred distinct
/// coefficients, so 2 bytes; the synthetic Filecoin-like workload: 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdWidth {
    U8,
    U16,
    U32,
}

impl IdWidth {
    /// The width for a table of `len` coefficients.
    pub fn for_table(len: usize) -> Self {
        if len <= 1 << 8 {
            IdWidth::U8
        } else if len <= 1 << 16 {
            IdWidth::U16
        } else {
            IdWidth::U32
        }
    }

    pub fn bytes(self) -> usize {
        match self {
            IdWidth::U8 => 1,
            IdWidth::U16 => 2,
            IdWidth::U32 => 4,
        }
    }
}

impl HostR1cs<'_> {
    /// Constraints (rows of each matrix).
    pub fn rows(&self) -> usize {
        self.matrices[0].row_start.len().saturating_sub(1)
    }

    /// Non-zero terms of A, B and C together.
    pub fn nnz(&self) -> usize {
        self.matrices.iter().map(|m| m.terms.len()).sum()
    }

    pub fn id_width(&self) -> IdWidth {
        IdWidth::for_table(self.coeffs.len())
    }

    /// The VRAM [`GpuDevice::upload_r1cs`](crate::GpuDevice::upload_r1cs)
    /// allocates for these matrices: per matrix its row offsets (4 bytes
    /// a row, plus one), per term a 4-byte column and an id, and the
    /// coefficient table (32 bytes each).
    pub fn device_bytes(&self) -> u64 {
        let offsets = 3 * (self.rows() as u64 + 1) * 4;
        let terms = self.nnz() as u64 * (4 + self.id_width().bytes() as u64);
        offsets + terms + self.coeffs.len() as u64 * 32
    }

    /// Everything the kernel relies on: three matrices of the same number
    /// of rows (fewer than 2^32 - 1), offsets that start at 0, never
    /// decrease and end at the term count, and a coefficient table that
    /// starts with 1 and -1. The terms themselves are checked as they are
    /// packed ([`pack_terms`]).
    pub fn check_shape(&self) -> Result<(), String> {
        let rows = self.rows();
        if self.matrices[0].row_start.is_empty() {
            return Err("a matrix without its leading row offset".into());
        }
        if rows >= u32::MAX as usize {
            return Err(format!("{rows} rows: at most 2^32 - 2 on the device"));
        }
        if self.num_inputs > R1CS_INPUT_BIT as usize || self.num_aux > R1CS_INPUT_BIT as usize {
            return Err("2^31 or more inputs or aux variables".into());
        }
        for (m, name) in self.matrices.iter().zip(["A", "B", "C"]) {
            if m.row_start.len() != rows + 1 {
                return Err(format!("{name} has {} rows, A has {rows}", m.row_start.len().saturating_sub(1)));
            }
            if m.row_start[0] != 0 || m.row_start[rows] as usize != m.terms.len() || m.row_start.windows(2).any(|w| w[0] > w[1]) {
                return Err(format!("{name}'s row offsets do not run from 0 up to its {} terms", m.terms.len()));
            }
        }
        if self.coeffs.len() < 2 || self.coeffs[0] != Scalar::ONE || self.coeffs[1] != -Scalar::ONE {
            return Err("the coefficient table must start with 1 and -1".into());
        }
        Ok(())
    }
}

/// A coefficient id as stored on the device.
pub(crate) trait Id: Copy + Default + Send + Sync + TryFrom<u32> + cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + 'static {}
impl Id for u8 {}
impl Id for u16 {}
impl Id for u32 {}

/// Splits `terms` into `cols` and `ids` (each as long as `terms`),
/// checking every term: an input column below `num_inputs`, an aux column
/// below `num_aux`, an id below the table's length (and so within `I`).
pub(crate) fn pack_terms<I: Id>(r: &HostR1cs, terms: &[[u32; 2]], cols: &mut [u32], ids: &mut [I]) -> Result<(), String> {
    const PIECE: usize = 1 << 14;
    assert!(cols.len() == terms.len() && ids.len() == terms.len(), "packing buffers of the terms' length");
    let table = r.coeffs.len();
    let check = |&[col, id]: &[u32; 2]| -> Result<I, String> {
        let ok_col = if col & R1CS_INPUT_BIT != 0 { ((col ^ R1CS_INPUT_BIT) as usize) < r.num_inputs } else { (col as usize) < r.num_aux };
        if !ok_col {
            let (what, i, of) = if col & R1CS_INPUT_BIT != 0 { ("input", col ^ R1CS_INPUT_BIT, r.num_inputs) } else { ("aux", col, r.num_aux) };
            return Err(format!("a term names {what} {i} of {of}"));
        }
        match I::try_from(id) {
            Ok(x) if (id as usize) < table => Ok(x),
            _ => Err(format!("a term names coefficient {id} of {table}")),
        }
    };
    terms.par_chunks(PIECE).zip(cols.par_chunks_mut(PIECE)).zip(ids.par_chunks_mut(PIECE)).try_for_each(|((t, c), d)| {
        for ((term, col), id) in t.iter().zip(c.iter_mut()).zip(d.iter_mut()) {
            *id = check(term)?;
            *col = term[0];
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coeffs(n: usize) -> Vec<Scalar> {
        let mut v = vec![Scalar::ONE, -Scalar::ONE];
        v.extend((2..n as u64).map(Scalar::from));
        v
    }

    /// Row 0: aux 0 + input 1; row 1: empty; row 2: 3 * aux 2.
    fn sample<'a>(c: &'a [Scalar], starts: &'a [u32], terms: &'a [[u32; 2]]) -> HostR1cs<'a> {
        let m = HostMatrix { row_start: starts, terms };
        HostR1cs { num_inputs: 2, num_aux: 3, coeffs: c, matrices: [m, m, m] }
    }

    #[test]
    fn id_width_is_the_narrowest_that_holds_the_table() {
        assert_eq!(IdWidth::for_table(2), IdWidth::U8);
        assert_eq!(IdWidth::for_table(256), IdWidth::U8);
        assert_eq!(IdWidth::for_table(257), IdWidth::U16);
        assert_eq!(IdWidth::for_table(65536), IdWidth::U16);
        assert_eq!(IdWidth::for_table(65537), IdWidth::U32);
        assert_eq!([IdWidth::U8, IdWidth::U16, IdWidth::U32].map(IdWidth::bytes), [1, 2, 4]);
    }

    #[test]
    fn device_bytes_count_offsets_terms_and_the_table() {
        let c = coeffs(4);
        let (starts, terms) = ([0, 2, 2, 3], [[0, 0], [1 | R1CS_INPUT_BIT, 0], [2, 3]]);
        let r = sample(&c, &starts, &terms);
        assert_eq!((r.rows(), r.nnz()), (3, 9));
        assert_eq!(r.device_bytes(), 3 * 4 * 4 + 9 * 5 + 4 * 32);
        let wide = coeffs(300);
        assert_eq!(HostR1cs { coeffs: &wide, ..r }.device_bytes(), 3 * 4 * 4 + 9 * 6 + 300 * 32);
        // PoRep 32 GiB partition: 130,278,869 rows, 722M non-zeros, 2-byte ids: ~5.9 GB.
        let porep = 3 * (130_278_870u64) * 4 + 722_000_000 * 6;
        assert!(porep > 5_800_000_000 && porep < 6_000_000_000);
    }

    #[test]
    fn terms_are_split_and_narrowed() {
        let c = coeffs(300);
        let (starts, terms) = ([0, 2, 2, 3], [[0, 0], [1 | R1CS_INPUT_BIT, 1], [2, 299]]);
        let r = sample(&c, &starts, &terms);
        r.check_shape().unwrap();
        let (mut cols, mut ids) = (vec![0u32; 3], vec![0u16; 3]);
        pack_terms(&r, &terms, &mut cols, &mut ids).unwrap();
        assert_eq!((cols, ids), (vec![0, 1 | R1CS_INPUT_BIT, 2], vec![0, 1, 299]));
        // Many pieces, in parallel, keep their order.
        let many: Vec<[u32; 2]> = (0..100_000u32).map(|i| [i % 3, i % 300]).collect();
        let (mut cols, mut ids) = (vec![0u32; many.len()], vec![0u16; many.len()]);
        pack_terms(&r, &many, &mut cols, &mut ids).unwrap();
        assert!(cols.iter().zip(&ids).zip(&many).all(|((c, i), t)| *c == t[0] && u32::from(*i) == t[1]));
    }

    #[test]
    fn out_of_range_terms_are_refused() {
        let c = coeffs(4);
        let starts = [0, 1, 1, 1];
        for (bad, what) in [([3, 0], "aux 3 of 3"), ([2 | R1CS_INPUT_BIT, 0], "input 2 of 2"), ([0, 4], "coefficient 4 of 4")] {
            let terms = [bad];
            let r = sample(&c, &starts, &terms);
            let e = pack_terms(&r, &terms, &mut [0u32], &mut [0u8]).unwrap_err();
            assert!(e.contains(what), "{e}");
        }
        // An id that fits the table but not the width (a table too wide for u8).
        let wide = coeffs(300);
        let terms = [[0, 280]];
        let e = pack_terms(&sample(&wide, &starts, &terms), &terms, &mut [0u32], &mut [0u8]).unwrap_err();
        assert!(e.contains("coefficient 280"), "{e}");
    }

    #[test]
    fn malformed_shapes_are_refused() {
        let c = coeffs(4);
        let terms = [[0, 0], [1, 0], [2, 0]];
        let ok = sample(&c, &[0, 2, 2, 3], &terms);
        ok.check_shape().unwrap();
        let short = HostMatrix { row_start: &[0, 3], terms: &terms };
        assert!(HostR1cs { matrices: [ok.matrices[0], short, ok.matrices[2]], ..ok }.check_shape().unwrap_err().contains("B has 1 rows"));
        for starts in [&[1u32, 2, 2, 3][..], &[0, 2, 1, 3], &[0, 2, 2, 2]] {
            let m = HostMatrix { row_start: starts, terms: &terms };
            assert!(HostR1cs { matrices: [m, ok.matrices[1], ok.matrices[2]], ..ok }.check_shape().unwrap_err().contains("row offsets"));
        }
        let swapped = [-Scalar::ONE, Scalar::ONE, Scalar::from(2u64)];
        assert!(HostR1cs { coeffs: &swapped, ..ok }.check_shape().unwrap_err().contains("1 and -1"));
        let empty = HostMatrix { row_start: &[], terms: &[] };
        assert!(HostR1cs { matrices: [empty; 3], ..ok }.check_shape().is_err());
    }
}
