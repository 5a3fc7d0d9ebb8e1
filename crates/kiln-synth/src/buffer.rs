//! Where synthesis writes its output: any slab of `Scalar`s the caller owns.

use blstrs::Scalar;
use ff::Field;

/// A caller-owned slab of field elements that synthesis writes into.
///
/// Implemented for `Vec<Scalar>` (grows on demand) and, in the layers above,
/// for page-locked buffers from kiln-memory's `PinnedPool` (fixed size), so
/// a/b/c land where the GPU copy engine reads them, with no staging copy.
pub trait ScalarBuffer: Send + Sync {
    /// The whole writable area.
    fn as_slice(&self) -> &[Scalar];
    /// The whole writable area, mutably.
    fn as_mut_slice(&mut self) -> &mut [Scalar];
    /// Make room for at least `min_len` elements, zero-filled. Returns false
    /// when the buffer cannot grow (a fixed pinned buffer): synthesis then
    /// fails with [`crate::SynthError::BufferTooSmall`].
    fn try_grow(&mut self, _min_len: usize) -> bool {
        false
    }
}

impl ScalarBuffer for Vec<Scalar> {
    fn as_slice(&self) -> &[Scalar] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        self
    }
    fn try_grow(&mut self, min_len: usize) -> bool {
        if min_len > self.len() {
            let new_len = min_len.max(self.len() * 2).max(1024);
            self.resize(new_len, Scalar::ZERO);
        }
        true
    }
}

impl ScalarBuffer for Box<dyn ScalarBuffer> {
    fn as_slice(&self) -> &[Scalar] {
        (**self).as_slice()
    }
    fn as_mut_slice(&mut self) -> &mut [Scalar] {
        (**self).as_mut_slice()
    }
    fn try_grow(&mut self, min_len: usize) -> bool {
        (**self).try_grow(min_len)
    }
}

/// The four large outputs of synthesis: the A/B/C evaluations (one element per
/// constraint) and the auxiliary (private) assignment (one per aux variable).
pub struct AssignmentBuffers {
    pub a: Box<dyn ScalarBuffer>,
    pub b: Box<dyn ScalarBuffer>,
    pub c: Box<dyn ScalarBuffer>,
    pub aux: Box<dyn ScalarBuffer>,
}

impl AssignmentBuffers {
    /// Growable heap buffers: for tests and callers that don't know the shape.
    pub fn heap() -> Self {
        Self::heap_with_capacity(0, 0)
    }

    /// Heap buffers sized for `constraints` constraints and `aux` aux variables.
    pub fn heap_with_capacity(constraints: usize, aux: usize) -> Self {
        let v = |n| Box::new(vec![Scalar::ZERO; n]) as Box<dyn ScalarBuffer>;
        AssignmentBuffers { a: v(constraints), b: v(constraints), c: v(constraints), aux: v(aux) }
    }

    /// Buffers from any source (e.g. pinned memory).
    pub fn new(
        a: Box<dyn ScalarBuffer>,
        b: Box<dyn ScalarBuffer>,
        c: Box<dyn ScalarBuffer>,
        aux: Box<dyn ScalarBuffer>,
    ) -> Self {
        AssignmentBuffers { a, b, c, aux }
    }
}

impl std::fmt::Debug for AssignmentBuffers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AssignmentBuffers")
            .field("a", &self.a.as_slice().len())
            .field("b", &self.b.as_slice().len())
            .field("c", &self.c.as_slice().len())
            .field("aux", &self.aux.as_slice().len())
            .finish()
    }
}
