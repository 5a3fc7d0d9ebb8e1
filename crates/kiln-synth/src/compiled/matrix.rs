//! The R1CS matrices of a compiled circuit: rows of (variable, coefficient)
//! terms, and their product with an assignment.

use std::collections::HashMap;

use blstrs::Scalar;
use ff::{Field, PrimeField};

/// Bit 31 of a term's variable marks a public input (else an aux variable).
pub(crate) const INPUT_BIT: u32 = 1 << 31;
/// Coefficient ids with a fast path: no multiplication.
pub(crate) const COEFF_ONE: u32 = 0;
pub(crate) const COEFF_MINUS_ONE: u32 = 1;

/// One non-zero entry of a row: `[variable, coefficient id]`, 8 bytes, so a
/// matrix streams through the cache at twice the rate a (usize, Scalar)
/// pair would. The variable is an aux index, or an input index with
/// [`INPUT_BIT`] set; the id indexes the coefficient table, where id 0 is 1
/// and id 1 is -1 (the fast paths). This is also the form a GPU backend
/// reads ([`MatrixView`](super::MatrixView)).
pub(crate) type Term = [u32; 2];

/// A sparse matrix in compressed-row form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SparseRows {
    /// Row `r` is `terms[start[r]..start[r + 1]]`.
    start: Vec<u32>,
    terms: Vec<Term>,
}

impl SparseRows {
    pub(crate) fn new() -> Self {
        SparseRows { start: vec![0], terms: Vec::new() }
    }

    pub(crate) fn rows(&self) -> usize {
        self.start.len() - 1
    }

    pub(crate) fn nnz(&self) -> usize {
        self.terms.len()
    }

    /// Give back the slack of the growing vectors.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.start.shrink_to_fit();
        self.terms.shrink_to_fit();
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.start.capacity() * 4 + self.terms.capacity() * std::mem::size_of::<Term>()
    }

    /// Close the row made of the terms pushed since the last call.
    /// Fails when the matrix outgrows 32-bit term offsets.
    pub(crate) fn end_row(&mut self) -> Result<(), CompileLimit> {
        let end = u32::try_from(self.terms.len()).map_err(|_| CompileLimit("more than 2^32 terms in one matrix"))?;
        self.start.push(end);
        Ok(())
    }

    pub(crate) fn push(&mut self, var: Var, coeff: u32) {
        self.terms.push([var.0, coeff]);
    }

    /// Row `r` is `terms()[starts()[r]..starts()[r + 1]]`.
    pub(crate) fn starts(&self) -> &[u32] {
        &self.start
    }

    pub(crate) fn terms(&self) -> &[Term] {
        &self.terms
    }

    fn row(&self, r: usize) -> &[Term] {
        &self.terms[self.start[r] as usize..self.start[r + 1] as usize]
    }

    /// The variables of row `r`.
    pub(crate) fn row_vars(&self, r: usize) -> impl Iterator<Item = Var> + '_ {
        self.row(r).iter().map(|t| Var(t[0]))
    }

    /// Append `other`'s rows, mapping each variable and coefficient id.
    pub(crate) fn append_mapped(
        &mut self,
        other: &SparseRows,
        map_var: impl Fn(Var) -> Var,
        map_coeff: impl Fn(u32) -> u32,
    ) -> Result<(), CompileLimit> {
        self.append_rows_mapped(other, 0, map_var, map_coeff)
    }

    /// Append `other`'s rows from row `from` on, mapping each variable and
    /// coefficient id.
    pub(crate) fn append_rows_mapped(
        &mut self,
        other: &SparseRows,
        from: usize,
        map_var: impl Fn(Var) -> Var,
        map_coeff: impl Fn(u32) -> u32,
    ) -> Result<(), CompileLimit> {
        self.terms.reserve(other.terms.len() - other.start[from.min(other.rows())] as usize);
        self.start.reserve(other.rows().saturating_sub(from));
        for r in from..other.rows() {
            for t in other.row(r) {
                self.push(map_var(Var(t[0])), map_coeff(t[1]));
            }
            self.end_row()?;
        }
        Ok(())
    }

    /// `out[r] = row r . (input, aux)`.
    ///
    /// The aux reads are scattered (a row names variables from anywhere in
    /// the circuit), so each block of rows first gathers its values in a loop
    /// of independent loads, which the core overlaps, and then does the
    /// arithmetic on the gathered copy. Evaluating term by term instead
    /// serializes the cache misses behind the field additions: ~1.9x slower
    /// on the synthetic 2^20 circuits (2-core build machine).
    ///
    /// Here for the rows `out` covers, `out[k]` being row `first + k`, on
    /// every core (`parallel`) or on this thread alone.
    pub(crate) fn mul_rows(&self, first: usize, coeffs: &[Scalar], input: &[Scalar], aux: &[Scalar], out: &mut [Scalar], parallel: bool) {
        use rayon::prelude::*;
        const ROWS_PER_TASK: usize = 1 << 12;
        let task = |(task, out): (usize, &mut [Scalar])| self.mul_block(first + task * ROWS_PER_TASK, coeffs, input, aux, out);
        if parallel {
            out.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(task);
        } else {
            out.chunks_mut(ROWS_PER_TASK).enumerate().for_each(task);
        }
    }

    pub(crate) fn mul_block(&self, first: usize, coeffs: &[Scalar], input: &[Scalar], aux: &[Scalar], out: &mut [Scalar]) {
        let mut gathered = Vec::with_capacity(GATHER_TERMS);
        let mut r = 0;
        while r < out.len() {
            // Rows r..end, as many as fit GATHER_TERMS terms (at least one).
            let t0 = self.start[first + r] as usize;
            let mut end = r + 1;
            while end < out.len() && self.start[first + end + 1] as usize - t0 <= GATHER_TERMS {
                end += 1;
            }
            let terms = &self.terms[t0..self.start[first + end] as usize];
            gathered.clear();
            gathered.extend(terms.iter().map(|t| {
                if t[0] & INPUT_BIT != 0 {
                    input[(t[0] & !INPUT_BIT) as usize]
                } else {
                    aux[t[0] as usize]
                }
            }));
            let mut k = 0;
            for (o, row) in out[r..end].iter_mut().zip(first + r..) {
                let n = (self.start[row + 1] - self.start[row]) as usize;
                *o = dot(&terms[k..k + n], &gathered[k..k + n], coeffs);
                k += n;
            }
            r = end;
        }
    }

    /// For each block of `block` rows: one past the largest aux index and
    /// one past the largest input index its terms name (0 when none).
    pub(crate) fn block_needs(&self, block: usize) -> Vec<(usize, usize)> {
        (0..self.rows().div_ceil(block))
            .map(|k| {
                let terms = &self.terms[self.start[k * block] as usize..self.start[((k + 1) * block).min(self.rows())] as usize];
                terms.iter().fold((0, 0), |(aux, input), t| {
                    if t[0] & INPUT_BIT != 0 {
                        (aux, input.max((t[0] & !INPUT_BIT) as usize + 1))
                    } else {
                        (aux.max(t[0] as usize + 1), input)
                    }
                })
            })
            .collect()
    }
}

/// Terms gathered per block: 16 KiB of values, well inside L1.
const GATHER_TERMS: usize = 512;

#[inline]
fn dot(terms: &[Term], values: &[Scalar], coeffs: &[Scalar]) -> Scalar {
    let mut acc = Scalar::ZERO;
    for (t, v) in terms.iter().zip(values) {
        match t[1] {
            COEFF_ONE => acc += v,
            COEFF_MINUS_ONE => acc -= v,
            k => acc += *v * coeffs[k as usize],
        }
    }
    acc
}

/// A variable as a matrix column: an input or an aux index in 31 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Var(u32);

impl Var {
    pub(crate) fn input(i: usize) -> Result<Var, CompileLimit> {
        u32::try_from(i).ok().filter(|&i| i < INPUT_BIT).map(|i| Var(i | INPUT_BIT)).ok_or(CompileLimit("2^31 or more inputs"))
    }
    pub(crate) fn aux(i: usize) -> Result<Var, CompileLimit> {
        u32::try_from(i).ok().filter(|&i| i < INPUT_BIT).map(Var).ok_or(CompileLimit("2^31 or more aux variables"))
    }
    /// `Ok(input index)` or `Err(aux index)`.
    pub(crate) fn split(self) -> Result<usize, usize> {
        if self.0 & INPUT_BIT != 0 {
            Ok((self.0 & !INPUT_BIT) as usize)
        } else {
            Err(self.0 as usize)
        }
    }
}

/// Why a circuit cannot be compiled (it is then synthesized the ordinary way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompileLimit(pub &'static str);

impl std::fmt::Display for CompileLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Coefficients looked up for reuse at most.
const DEDUP_LIMIT: usize = 1 << 16;

/// The distinct coefficients of a circuit: most are 1, -1 or small powers of
/// two, so a 4-byte id per term replaces a 32-byte field element.
#[derive(Clone, Debug)]
pub(crate) struct CoeffTable {
    values: Vec<Scalar>,
    ids: HashMap<[u8; 32], u32>,
}

impl CoeffTable {
    pub(crate) fn new() -> Self {
        let fixed = [(Scalar::ONE, COEFF_ONE), (-Scalar::ONE, COEFF_MINUS_ONE)];
        CoeffTable {
            values: fixed.iter().map(|(c, _)| *c).collect(),
            ids: fixed.iter().map(|(c, id)| (c.to_repr(), *id)).collect(),
        }
    }

    pub(crate) fn id(&mut self, c: &Scalar) -> Result<u32, CompileLimit> {
        if *c == Scalar::ONE {
            return Ok(COEFF_ONE);
        }
        let key = c.to_repr();
        if let Some(&id) = self.ids.get(&key) {
            return Ok(id);
        }
        let id = u32::try_from(self.values.len()).map_err(|_| CompileLimit("2^32 distinct coefficients"))?;
        self.values.push(*c);
        // Past DEDUP_LIMIT distinct values the circuit's coefficients are
        // mostly one-offs (random ones, say): storing repeats costs 32 bytes
        // each, a map entry for every value would cost more.
        if self.ids.len() < DEDUP_LIMIT {
            self.ids.insert(key, id);
        }
        Ok(id)
    }

    pub(crate) fn values(&self) -> &[Scalar] {
        &self.values
    }

    /// Memory held, the lookup map estimated at 48 bytes an entry.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<Scalar>() + self.ids.capacity() * 48
    }

    /// Drop the lookup map (only compiling needs it).
    pub(crate) fn into_values(self) -> Vec<Scalar> {
        self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficient_ids_dedup_up_to_the_limit_and_stay_exact_past_it() {
        let mut t = CoeffTable::new();
        let c = |i: u64| Scalar::from(i + 7);
        let first: Vec<u32> = (0..DEDUP_LIMIT as u64 + 100).map(|i| t.id(&c(i)).unwrap()).collect();
        assert_eq!(t.id(&c(3)).unwrap(), first[3], "early values are found again");
        let late = DEDUP_LIMIT as u64 + 50;
        let again = t.id(&c(late)).unwrap();
        assert_ne!(again, first[late as usize], "past the limit a repeat gets a new id");
        assert!(t.ids.len() <= DEDUP_LIMIT);
        assert_eq!((t.id(&Scalar::ONE).unwrap(), t.id(&-Scalar::ONE).unwrap()), (COEFF_ONE, COEFF_MINUS_ONE));
        let values = t.into_values();
        for (i, id) in first.iter().enumerate() {
            assert_eq!(values[*id as usize], c(i as u64));
        }
        assert_eq!(values[again as usize], c(late));
    }
}
