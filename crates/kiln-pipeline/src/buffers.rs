//! A partition's memory: how much it needs ([`PartitionFootprint`], from
//! its circuit's dimensions only) and its a/b/c/aux buffers carved out of
//! one pool buffer (aux alone when the prover computes a/b/c on its GPU).
//!
//! Why one pool buffer per partition rather than four: a worker that took
//! a, b and c and then waited for aux while another worker held the other
//! aux buffers would deadlock. One checkout is all or nothing.

use std::ptr::NonNull;
use std::sync::Arc;

use blstrs::Scalar;
use kiln_memory::{PinnedBuffer, PinnedPool};
use kiln_synth::{AssignmentBuffers, CircuitShape, ScalarBuffer};
use serde::Serialize;

use crate::config::EngineConfig;

const SCALAR_BYTES: u64 = std::mem::size_of::<Scalar>() as u64;

/// The host memory one partition holds while it is in the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PartitionFootprint {
    /// Scalars requested from the pool: a, b, c over the domain (when
    /// `products_on_host`), then aux.
    pub domain: usize,
    pub num_aux: usize,
    /// Whether synthesis computes a/b/c into the buffer (else the prover
    /// computes them on its GPU from the witness alone: no a/b/c here).
    pub products_on_host: bool,
    /// The pool buffer's capacity (its size class); the pool reserves these
    /// bytes in the budget itself.
    pub buffer_bytes: u64,
    /// Reserved for the backend's own host allocations while it starts the
    /// proof; given back when it returns.
    pub scratch_bytes: u64,
    /// Reserved for bookkeeping (densities, inputs, proof) until the
    /// partition is finished.
    pub overhead_bytes: u64,
}

impl PartitionFootprint {
    /// The footprint of a partition of `shape` under `config` whose a/b/c
    /// synthesis computes (the most a partition of `shape` needs).
    pub fn of(shape: &CircuitShape, config: &EngineConfig) -> Self {
        Self::sized(shape, config, true)
    }

    /// The footprint of a partition of `shape` whose a/b/c the prover
    /// computes on its GPU: its buffer holds the aux vector alone.
    pub fn witness_only(shape: &CircuitShape, config: &EngineConfig) -> Self {
        Self::sized(shape, config, false)
    }

    fn sized(shape: &CircuitShape, config: &EngineConfig, products_on_host: bool) -> Self {
        let domain = shape.domain();
        let abc = if products_on_host { 3 * domain } else { 0 };
        let requested = (abc + shape.num_aux) as u64 * SCALAR_BYTES;
        let buffer_bytes = PinnedPool::capacity_for(requested as usize) as u64;
        let scratch_bytes = (requested as f64 * config.backend_scratch_ratio.unwrap_or(1.0)).ceil() as u64;
        // Three density bitmaps (A aux, B inputs, B aux) and the inputs.
        let densities = (2 * shape.num_aux as u64 + shape.num_inputs as u64).div_ceil(8);
        let overhead_bytes = config.partition_overhead_bytes + densities + shape.num_inputs as u64 * SCALAR_BYTES;
        PartitionFootprint { domain, num_aux: shape.num_aux, products_on_host, buffer_bytes, scratch_bytes, overhead_bytes }
    }

    /// Length of each of the a, b, c buffers (0 when the prover computes them).
    pub fn abc_len(&self) -> usize {
        if self.products_on_host { self.domain } else { 0 }
    }

    /// Bytes to ask the pool for.
    pub fn buffer_request_bytes(&self) -> usize {
        (3 * self.abc_len() + self.num_aux) * SCALAR_BYTES as usize
    }

    /// Bytes reserved from the budget besides the pool buffer.
    pub fn work_bytes(&self) -> u64 {
        self.scratch_bytes + self.overhead_bytes
    }

    /// Everything at once: what must fit in the budget for the partition to run.
    pub fn total(&self) -> u64 {
        self.buffer_bytes + self.work_bytes()
    }
}

/// Splits one pool buffer of `footprint.buffer_request_bytes()` into the
/// four synthesis buffers (a, b, c empty when the prover computes them).
/// The pool buffer goes back to the pool when the last of the four is
/// dropped.
pub(crate) fn assignment_buffers(mut buffer: PinnedBuffer, footprint: &PartitionFootprint) -> AssignmentBuffers {
    let (d, aux) = (footprint.abc_len(), footprint.num_aux);
    assert!(buffer.len() >= (3 * d + aux) * SCALAR_BYTES as usize, "pool buffer smaller than the footprint");
    let base = NonNull::new(buffer.as_mut_ptr().cast::<Scalar>()).expect("pool buffers are never null");
    let owner = Arc::new(buffer);
    let view = |start: usize, len: usize| -> Box<dyn ScalarBuffer> {
        // SAFETY: `start + len <= 3d + aux` elements, which fit in the buffer
        // (asserted above), so the pointer stays inside the allocation.
        let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(start)) };
        Box::new(PinnedScalars { ptr, len, _owner: owner.clone() })
    };
    AssignmentBuffers::new(view(0, d), view(d, d), view(2 * d, d), view(3 * d, aux))
}

/// A run of scalars inside a shared pool buffer.
///
/// Invariants that make the slices sound:
/// - the four views of one buffer cover disjoint ranges, and nothing else
///   reads or writes the buffer's bytes while a view exists (the
///   `PinnedBuffer` is only kept alive through `_owner`, never accessed);
/// - the allocation does not move or go away while `_owner` lives, and it is
///   page-aligned, so every element is aligned for `Scalar` (offsets are
///   whole elements);
/// - the bytes are always initialised (the pool guarantees it) and any bit
///   pattern is a memory-safe `Scalar` (four `u64` limbs; a non-canonical
///   value is a wrong answer, which verification catches, not UB).
struct PinnedScalars {
    ptr: NonNull<Scalar>,
    len: usize,
    _owner: Arc<PinnedBuffer>,
}

// SAFETY: the view owns its range exclusively (disjoint from its siblings);
// `&self` only reads and `&mut self` is unique, so sharing or sending it
// across threads is as safe as for a `Vec<Scalar>`. `PinnedBuffer` is itself
// Send + Sync (it goes back to a thread-safe pool).
unsafe impl Send for PinnedScalars {}
// SAFETY: as above: `&PinnedScalars` gives read-only access to its own range.
unsafe impl Sync for PinnedScalars {}

impl ScalarBuffer for PinnedScalars {
    fn as_slice(&self) -> &[Scalar] {
        // SAFETY: see the type's invariants: in bounds, aligned, initialised,
        // and no one writes the range while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        // SAFETY: as for `as_slice`, and `&mut self` makes this the only
        // access to the range for the slice's lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use kiln_memory::MemoryBudget;

    fn shape(domain: usize, aux: usize) -> CircuitShape {
        CircuitShape { num_constraints: domain, num_inputs: 2, num_aux: aux, ..Default::default() }
    }

    #[test]
    fn footprint_follows_the_shape() {
        let cfg = EngineConfig { backend_scratch_ratio: Some(0.5), partition_overhead_bytes: 100, ..Default::default() };
        let f = PartitionFootprint::of(&shape(1 << 12, 3000), &cfg);
        let abc_aux = (3 * 4096 + 3000) * 32;
        assert_eq!(f.buffer_request_bytes(), abc_aux);
        assert!(f.buffer_bytes >= abc_aux as u64 && f.buffer_bytes <= abc_aux as u64 * 17 / 16 + 4096);
        assert_eq!(f.scratch_bytes, abc_aux as u64 / 2);
        assert_eq!(f.overhead_bytes, 100 + (2 * 3000 + 2u64).div_ceil(8) + 2 * 32);
        let bigger = PartitionFootprint::of(&shape(1 << 13, 3000), &cfg);
        assert!(bigger.total() > f.total());
        // a/b/c computed by the prover: the buffer and the scratch hold aux alone.
        let w = PartitionFootprint::witness_only(&shape(1 << 12, 3000), &cfg);
        assert_eq!((w.abc_len(), w.buffer_request_bytes(), w.scratch_bytes), (0, 3000 * 32, 3000 * 32 / 2));
        assert_eq!(w.overhead_bytes, f.overhead_bytes);
        assert!(w.buffer_bytes >= 3000 * 32 && w.buffer_bytes < f.buffer_bytes / 4);
    }

    #[test]
    fn four_disjoint_views_and_the_buffer_returns_when_all_are_dropped() {
        let budget = MemoryBudget::new(64 << 20);
        let pool = PinnedPool::pageable(&budget, 32 << 20);
        let f = PartitionFootprint::of(&shape(1024, 700), &EngineConfig::default());
        let buf = pool.checkout(f.buffer_request_bytes()).unwrap();
        let mut bufs = assignment_buffers(buf, &f);
        for (k, b) in [&mut bufs.a, &mut bufs.b, &mut bufs.c, &mut bufs.aux].into_iter().enumerate() {
            b.as_mut_slice().fill(Scalar::from(k as u64 + 1));
        }
        assert_eq!(bufs.a.as_slice().len(), 1024);
        assert_eq!(bufs.aux.as_slice().len(), 700);
        assert!(bufs.a.as_slice().iter().all(|x| *x == Scalar::ONE));
        assert!(bufs.c.as_slice().iter().all(|x| *x == Scalar::from(3u64)));
        assert!(bufs.aux.as_slice().iter().all(|x| *x == Scalar::from(4u64)));
        assert!(!bufs.a.try_grow(5000), "pool buffers have a fixed size");
        let AssignmentBuffers { a, b, c, aux } = bufs;
        drop((a, b, c));
        assert_eq!(pool.snapshot().buffers_free, 0, "aux still holds the buffer");
        drop(aux);
        assert_eq!(pool.snapshot().buffers_free, 1);
        // Aux alone: three empty views, aux over the start of the buffer.
        let w = PartitionFootprint::witness_only(&shape(1024, 700), &EngineConfig::default());
        let mut bufs = assignment_buffers(pool.checkout(w.buffer_request_bytes()).unwrap(), &w);
        assert!([&bufs.a, &bufs.b, &bufs.c].iter().all(|b| b.as_slice().is_empty()));
        assert!(!bufs.a.try_grow(1));
        bufs.aux.as_mut_slice().fill(Scalar::from(9u64));
        assert_eq!(bufs.aux.as_slice(), &vec![Scalar::from(9u64); 700][..]);
    }
}
