//! Density bitmaps: which variables take part in the A and B queries.

/// A bitmap over variables: bit `i` is set when variable `i` appears (with a
/// non-zero coefficient) in some constraint's A (or B) linear combination.
///
/// The Groth16 parameters store a query point only for variables whose bit is
/// set, so the k-th set bit pairs its scalar with the k-th stored point.
/// Layout: bit `i` is bit `i % 64` of word `i / 64` (what the GPU kernels read).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
    count: usize,
}

impl Density {
    /// An empty bitmap over zero variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// A bitmap over `len` variables, none set.
    pub fn with_len(len: usize) -> Self {
        Density { words: vec![0; len.div_ceil(64)], len, count: 0 }
    }

    /// Append one variable (unset).
    pub fn push(&mut self) {
        self.len += 1;
        if self.words.len() * 64 < self.len {
            self.words.push(0);
        }
    }

    /// Mark variable `i` as used.
    #[inline]
    pub fn set(&mut self, i: usize) {
        debug_assert!(i < self.len, "density index {i} out of {}", self.len);
        let (w, b) = (i / 64, i % 64);
        let mask = 1u64 << b;
        if self.words[w] & mask == 0 {
            self.words[w] |= mask;
            self.count += 1;
        }
    }

    /// Whether variable `i` is used.
    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1u64 << (i % 64)) != 0
    }

    /// Number of variables covered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the bitmap covers no variable.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits (= number of query points stored for this part).
    pub fn count(&self) -> usize {
        self.count
    }

    /// The raw words (bit `i` of the map is bit `i % 64` of word `i / 64`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Indices of the set bits, in order.
    pub fn iter_set(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(wi * 64 + b)
            })
        })
    }

    /// Append all of `other`'s bits after this map's.
    pub fn extend(&mut self, other: &Density) {
        let base = self.len;
        self.len += other.len;
        self.words.resize(self.len.div_ceil(64), 0);
        for i in other.iter_set() {
            self.set(base + i);
        }
    }

    /// Append `other`'s bits, skipping its first variable (the sub-system's own
    /// copy of the constant ONE input, as bellperson's `extend` does). ONE is
    /// ONE in both systems, so its bit is OR-ed into ours: a sub-system that
    /// uses ONE in B makes ONE dense in B (bellperson's `DensityTracker::extend`
    /// does the same; dropping it made extended circuits, e.g. Filecoin's
    /// PoSt, disagree with their parameters by one B point).
    pub fn extend_skip_first(&mut self, other: &Density) {
        if other.len > 0 && other.get(0) && self.len > 0 {
            self.set(0);
        }
        let base = self.len;
        let add = other.len.saturating_sub(1);
        self.len += add;
        self.words.resize(self.len.div_ceil(64), 0);
        for i in other.iter_set().filter(|&i| i > 0) {
            self.set(base + i - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_count_iter() {
        let mut d = Density::with_len(130);
        for i in [0, 63, 64, 129, 64] {
            d.set(i);
        }
        assert_eq!(d.count(), 4);
        assert!(d.get(63) && d.get(64) && !d.get(65) && !d.get(500));
        assert_eq!(d.iter_set().collect::<Vec<_>>(), vec![0, 63, 64, 129]);
    }

    #[test]
    fn push_and_extend() {
        let mut a = Density::new();
        for _ in 0..70 {
            a.push();
        }
        a.set(69);
        let mut b = Density::with_len(3);
        b.set(0);
        b.set(2);
        let mut c = a.clone();
        c.extend(&b);
        assert_eq!(c.len(), 73);
        assert_eq!(c.iter_set().collect::<Vec<_>>(), vec![69, 70, 72]);
        a.extend_skip_first(&b);
        assert_eq!(a.len(), 72);
        assert_eq!(a.iter_set().collect::<Vec<_>>(), vec![0, 69, 71], "other's ONE bit lands on ours");
        let mut d = Density::with_len(2);
        d.extend_skip_first(&Density::with_len(3));
        assert_eq!(d.count(), 0, "an unset ONE bit sets nothing");
    }
}
