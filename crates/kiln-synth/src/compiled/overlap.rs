//! a/b/c evaluated while the witness is still being computed.
//!
//! Why: a compiled synthesis is the circuit's witness code on one thread,
//! then the three matrix-vector products. A row can be evaluated as soon as
//! every variable it names has its value, and a circuit allocates a
//! variable before a constraint can name it, so rows become ready in order
//! while the witness runs. An evaluator thread follows the witness a block
//! of rows at a time, on one core (the witness thread keeps its own); what
//! is left when the witness ends is evaluated on every core. On a SnapDeals
//! partition (10M constraints, 2-core build machine) the products were
//! ~40 % of the synthesis, after the witness; now nearly all run beside it.
//!
//! The witness thread publishes its aux values through a feed: it
//! writes each value into the caller's aux buffer, then advances a counter
//! (release); the evaluator reads only below the counter (acquire). Inputs,
//! a handful, go through one `OnceLock` each.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use blstrs::Scalar;

use super::matrix::SparseRows;
use super::CompiledR1cs;

/// Whether to evaluate beside the witness: yes unless `KILN_SYNTH_OVERLAP=0`
/// (read once; for timing the two ways with one binary).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("KILN_SYNTH_OVERLAP").map_or(true, |v| v != "0"))
}

/// Rows per block the evaluator takes at a time.
pub(crate) const BLOCK_ROWS: usize = 1 << 14;

/// The aux buffer and inputs as the witness fills them in.
struct Shared {
    aux: *mut Scalar,
    cap: usize,
    /// aux[..written] hold their final values and are never written again.
    written: AtomicUsize,
    inputs: Box<[OnceLock<Scalar>]>,
}

// SAFETY: `aux` is written only by the one `FeedWriter` (at indices >=
// `written`, before publishing them) and read only below `written`, so no
// element is read and written at once; the memory outlives both sides (see
// `feed`).
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

/// The witness side (exactly one per feed).
pub(crate) struct FeedWriter(Arc<Shared>);

/// The evaluator side.
pub(crate) struct FeedReader(Arc<Shared>);

/// A feed over `aux` (filled from index 0) and `inputs` inputs.
///
/// # Safety
/// Until both returned halves are dropped, `aux` must stay allocated and
/// must not be read or written except through them.
pub(crate) unsafe fn feed(aux: &mut [Scalar], inputs: usize) -> (FeedWriter, FeedReader) {
    let shared = Arc::new(Shared {
        aux: aux.as_mut_ptr(),
        cap: aux.len(),
        written: AtomicUsize::new(0),
        inputs: (0..inputs).map(|_| OnceLock::new()).collect(),
    });
    (FeedWriter(shared.clone()), FeedReader(shared))
}

impl FeedWriter {
    /// Appends the next aux value; false when the buffer is full.
    pub(crate) fn push(&mut self, v: Scalar) -> bool {
        let s = &*self.0;
        let i = s.written.load(Ordering::Relaxed);
        if i >= s.cap {
            return false;
        }
        // SAFETY: i < cap, and only this writer (there is one, and it is
        // borrowed mutably) writes, at i = `written`, which no reader reads
        // before the store below publishes it.
        unsafe { s.aux.add(i).write(v) };
        s.written.store(i + 1, Ordering::Release);
        true
    }

    /// Records input `i` (inputs past the recorded count are not shared).
    pub(crate) fn input(&self, i: usize, v: Scalar) {
        if let Some(slot) = self.0.inputs.get(i) {
            let _ = slot.set(v);
        }
    }

    /// The values pushed so far.
    pub(crate) fn written(&self) -> &[Scalar] {
        read(&self.0)
    }
}

fn read(s: &Shared) -> &[Scalar] {
    let n = s.written.load(Ordering::Acquire);
    // SAFETY: aux[..n] were written before `written` reached n (release /
    // acquire) and are never written again; the buffer outlives `s`.
    unsafe { std::slice::from_raw_parts(s.aux, n) }
}

impl FeedReader {
    fn aux(&self) -> &[Scalar] {
        read(&self.0)
    }

    /// The leading inputs recorded so far.
    fn inputs(&self) -> Vec<Scalar> {
        self.0.inputs.iter().map_while(|x| x.get().copied()).collect()
    }
}

/// Sets the flag when dropped, so that the evaluator stops even when the
/// witness fails or panics.
pub(crate) struct DoneOnDrop<'a>(pub(crate) &'a AtomicBool);

impl Drop for DoneOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl CompiledR1cs {
    /// The evaluator: follows the feed, evaluating whole blocks of rows of
    /// a/b/c (`out`, each covering every row) as their variables arrive,
    /// until `done` is set. Returns how many leading rows it evaluated; the
    /// caller does the rest on every core.
    pub(crate) fn follow(&self, feed: &FeedReader, done: &AtomicBool, mut out: [&mut [Scalar]; 3]) -> usize {
        let rows = self.num_constraints();
        let blocks = self.block_needs.len();
        let mut next = 0;
        while next < blocks && !done.load(Ordering::Acquire) {
            let (aux, inputs) = (feed.aux(), feed.inputs());
            // A few ready blocks at a time (a short batch, so that the
            // witness's end never waits long for this thread).
            let mut end = next;
            while end < blocks.min(next + 8) && self.block_needs[end].0 <= aux.len() && self.block_needs[end].1 <= inputs.len() {
                end += 1;
            }
            if end - next < 4 && end < blocks {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
            let (lo, hi) = (next * BLOCK_ROWS, (end * BLOCK_ROWS).min(rows));
            for (m, o) in [&self.a, &self.b, &self.c].into_iter().zip(out.iter_mut()) {
                m.mul_rows(lo, &self.coeffs, &inputs, aux, &mut o[lo..hi], false);
            }
            next = end;
        }
        (next * BLOCK_ROWS).min(rows)
    }
}

/// Per block of [`BLOCK_ROWS`] rows of A, B and C together: one past the
/// largest aux index and one past the largest input index they name.
pub(crate) fn block_needs(ms: [&SparseRows; 3]) -> Vec<(usize, usize)> {
    let per = ms.map(|m| m.block_needs(BLOCK_ROWS));
    (0..per[0].len()).map(|k| per.iter().fold((0, 0), |(aux, input), p| (aux.max(p[k].0), input.max(p[k].1)))).collect()
}

#[cfg(test)]
#[path = "overlap_tests.rs"]
mod tests;
