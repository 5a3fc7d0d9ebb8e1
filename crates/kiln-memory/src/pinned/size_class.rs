//! Buffer size classes.
//!
//! A request is rounded up to a class, and a free buffer is reused for any
//! request of the same class. Sixteen classes per power of two (and whole
//! pages below 64 KiB) bound the waste at 1/16 = 6.25 %. Why not powers of two:
//! pinned memory is the scarcest host memory there is, and a SnapDeals a/b/c
//! vector of ~81M scalars (2.6 GB) would take a 4 GiB buffer, wasting a third
//! of it (16 steps: 2.5 GiB); in general up to half.
//! Why not exact sizes: lengths that differ by a few constraints (WindowPoSt
//! partitions, circuit versions) would each need their own buffers that are
//! never reused. Both ends stay cheap: at most 16 classes per octave.

use super::host_alloc::PAGE;

/// Steps per power of two.
const STEPS_PER_OCTAVE: u64 = 16;

/// The capacity a buffer of `bytes` gets: a whole number of pages, at most
/// 6.25 % above `bytes` for large sizes.
pub(crate) fn size_class(bytes: u64) -> u64 {
    let bytes = bytes.max(1);
    let octave = 1u64 << (63 - bytes.leading_zeros());
    let step = (octave / STEPS_PER_OCTAVE).max(PAGE as u64);
    bytes.div_ceil(step).saturating_mul(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn examples() {
        assert_eq!(size_class(0), 4096);
        assert_eq!(size_class(1), 4096);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 8192);
        assert_eq!(size_class(1 << 30), 1 << 30);
        // A PoRep a/b/c vector (130,278,869 scalars of 32 bytes) fits 4 GiB.
        assert_eq!(size_class(130_278_869 * 32), 4 << 30);
        // A SnapDeals one (~81M scalars, 2.59 GB): 2.5 GiB, not 4 GiB.
        assert_eq!(size_class(81_000_000 * 32), (2 << 30) + (4 << 27));
    }

    proptest! {
        #[test]
        fn covers_is_page_aligned_and_wastes_little(bytes in 1u64..(1 << 40)) {
            let c = size_class(bytes);
            prop_assert!(c >= bytes);
            prop_assert_eq!(c % PAGE as u64, 0);
            if bytes >= 64 << 10 {
                prop_assert!((c - bytes) * 16 <= bytes, "{} -> {}", bytes, c);
            }
            prop_assert_eq!(size_class(c), c, "a class maps to itself");
        }

        #[test]
        fn is_monotonic(a in 1u64..(1 << 36), b in 1u64..(1 << 36)) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(size_class(lo) <= size_class(hi));
        }
    }
}
