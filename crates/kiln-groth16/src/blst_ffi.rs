//! The only unsafe code of the CPU backend: calls into blst's batch point
//! addition and Pippenger MSM on blstrs' point types.

use blst::{
    blst_p1, blst_p1_affine, blst_p1s_add, blst_p1s_mult_pippenger, blst_p1s_mult_pippenger_scratch_sizeof,
    blst_p2, blst_p2_affine, blst_p2s_add, blst_p2s_mult_pippenger, blst_p2s_mult_pippenger_scratch_sizeof, limb_t,
};
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::Group;

/// An affine point type blst can add up and multi-exponentiate.
pub trait BlstCurve: Sized + Sync + Send + 'static {
    type Projective: Group + Send;
    /// Sum of the points.
    fn sum(points: &[&Self]) -> Self::Projective;
    /// `sum scalars[i] * points[i]`, scalars as 32 little-endian bytes (canonical form).
    fn pippenger(points: &[&Self], scalars: &[[u8; 32]]) -> Self::Projective;
}

macro_rules! impl_blst_curve {
    ($aff:ty, $proj:ty, $raw_aff:ty, $raw_proj:ty, $add:ident, $mult:ident, $scratch:ident) => {
        // blstrs' point types are #[repr(transparent)] wrappers of blst's.
        const _: () = assert!(std::mem::size_of::<$aff>() == std::mem::size_of::<$raw_aff>());
        const _: () = assert!(std::mem::size_of::<$proj>() == std::mem::size_of::<$raw_proj>());

        impl BlstCurve for $aff {
            type Projective = $proj;

            fn sum(points: &[&Self]) -> $proj {
                if points.is_empty() {
                    return <$proj>::identity();
                }
                let mut out = <$raw_proj>::default();
                // SAFETY: `points` is a valid array of `points.len()` pointers
                // to live affine points; blstrs' affine type is a transparent
                // wrapper of blst's (checked by the size assertion above), and
                // blst reads exactly `npoints` pointers.
                unsafe {
                    $add(&mut out, points.as_ptr() as *const *const $raw_aff, points.len());
                    std::mem::transmute::<$raw_proj, $proj>(out)
                }
            }

            fn pippenger(points: &[&Self], scalars: &[[u8; 32]]) -> $proj {
                assert_eq!(points.len(), scalars.len());
                let n = points.len();
                if n == 0 {
                    return <$proj>::identity();
                }
                let scalar_ptrs: Vec<*const u8> = scalars.iter().map(|s| s.as_ptr()).collect();
                // SAFETY: blst asks for this many bytes of scratch for `n` points.
                let words = unsafe { $scratch(n) }.div_ceil(std::mem::size_of::<limb_t>());
                let mut scratch: Vec<limb_t> = vec![0; words];
                let mut out = <$raw_proj>::default();
                // SAFETY: `points` and `scalar_ptrs` hold `n` valid pointers
                // each (to affine points, and to 32-byte scalars, of which blst
                // reads 255 bits); scratch has the size blst asked for.
                unsafe {
                    $mult(
                        &mut out,
                        points.as_ptr() as *const *const $raw_aff,
                        n,
                        scalar_ptrs.as_ptr(),
                        255,
                        scratch.as_mut_ptr(),
                    );
                    std::mem::transmute::<$raw_proj, $proj>(out)
                }
            }
        }
    };
}

impl_blst_curve!(
    G1Affine,
    G1Projective,
    blst_p1_affine,
    blst_p1,
    blst_p1s_add,
    blst_p1s_mult_pippenger,
    blst_p1s_mult_pippenger_scratch_sizeof
);
impl_blst_curve!(
    G2Affine,
    G2Projective,
    blst_p2_affine,
    blst_p2,
    blst_p2s_add,
    blst_p2s_mult_pippenger,
    blst_p2s_mult_pippenger_scratch_sizeof
);
