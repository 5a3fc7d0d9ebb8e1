//! Typed device buffers holding blstrs and pasta_curves values byte for byte.
//!
//! blstrs::Scalar is `#[repr(transparent)]` over blst_fr (`[u64; 4]`), Fp over
//! blst_fp (`[u64; 6]`), G1Affine over blst_p1_affine (`{x, y}`: `[u64; 12]`)
//! and G2Affine over blst_p2_affine (`[u64; 24]`); pasta_curves' Fp and Fq
//! are `#[repr(transparent)]` over `[u64; 4]` and, with its `repr-c`
//! feature, its affine points `#[repr(C)]` `{x, y}` (`[u64; 8]`); so a slice
//! of any of them is a slice of u64 limbs, which is what the kernels read.
use std::marker::PhantomData;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use pasta_curves::{pallas, vesta};
use cudarc::driver::{CudaSlice, DevicePtr};

use crate::curve::DeviceGroup;
use crate::device::{GpuDevice, GpuStream};
use crate::error::GpuError;
use crate::field::DeviceField;

const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<pasta_curves::Fp>() == 32);
const _: () = assert!(std::mem::size_of::<pasta_curves::Fq>() == 32);
const _: () = assert!(std::mem::size_of::<pallas::Affine>() == 64);
const _: () = assert!(std::mem::size_of::<vesta::Affine>() == 64);
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);

/// `T` is a blstrs type made only of `WORDS` u64 limbs (checked above).
///
/// # Safety
/// Implement only for `#[repr(transparent)]`/`#[repr(C)]` types that are
/// exactly `WORDS` u64s, valid for any bit pattern.
pub unsafe trait Limbs: Sized {
    const WORDS: usize;
}
// SAFETY: the asserts above and blstrs' repr(transparent) over blst's repr(C) limb structs.
unsafe impl Limbs for Scalar {
    const WORDS: usize = 4;
}
unsafe impl Limbs for G1Affine {
    const WORDS: usize = 12;
}
unsafe impl Limbs for G2Affine {
    const WORDS: usize = 24;
}
// SAFETY: the asserts above; pasta_curves' Fp/Fq are repr(transparent) over
// [u64; 4] (any bit pattern is a valid, if unreduced, value; the kernels
// write reduced ones), its affine points repr(C) {x, y} with the `repr-c`
// feature this crate turns on.
unsafe impl Limbs for pasta_curves::Fp {
    const WORDS: usize = 4;
}
unsafe impl Limbs for pasta_curves::Fq {
    const WORDS: usize = 4;
}
unsafe impl Limbs for pallas::Affine {
    const WORDS: usize = 8;
}
unsafe impl Limbs for vesta::Affine {
    const WORDS: usize = 8;
}

pub(crate) fn as_words<T: Limbs>(v: &[T]) -> &[u64] {
    // SAFETY: T is exactly T::WORDS initialized u64s with u64 alignment (Limbs).
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u64, v.len() * T::WORDS) }
}

fn as_words_mut<T: Limbs>(v: &mut [T]) -> &mut [u64] {
    // SAFETY: as above; every bit pattern is a valid T for blst's plain limb
    // structs, and the kernels write reduced Montgomery values.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u64, v.len() * T::WORDS) }
}

/// Values of `T` from their limbs (`w.len()` a multiple of `T::WORDS`).
pub(crate) fn from_words<T: Limbs + Default + Clone>(w: &[u64]) -> Vec<T> {
    let mut out = vec![T::default(); w.len() / T::WORDS];
    as_words_mut(&mut out).copy_from_slice(w);
    out
}

/// Elements of the field `S` on the device, Montgomery form (its host
/// layout): MSM scalars and NTT data. `S` defaults to BLS12-381's Fr, so
/// `DeviceScalars` alone is what it always was.
pub struct DeviceScalars<S: DeviceField = Scalar> {
    pub(crate) buf: CudaSlice<u64>,
    field: PhantomData<S>,
}

impl<S: DeviceField> DeviceScalars<S> {
    pub(crate) fn new(buf: CudaSlice<u64>) -> Self {
        DeviceScalars { buf, field: PhantomData }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.buf.len() / S::WORDS
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub(crate) fn ptr(&self, stream: &GpuStream) -> u64 {
        self.buf.device_ptr(stream).0
    }
}

/// Affine points of `G` on the device, in blst's layout (the point at
/// infinity all-zero).
pub struct DevicePoints<G: DeviceGroup> {
    pub(crate) buf: CudaSlice<u64>,
    group: PhantomData<G>,
}

/// G1 affine points on the device (blst_p1_affine layout).
pub type DeviceG1 = DevicePoints<G1Projective>;
/// G2 affine points on the device (blst_p2_affine layout).
pub type DeviceG2 = DevicePoints<G2Projective>;
/// Pallas affine points on the device (pasta_curves' layout).
pub type DevicePallas = DevicePoints<pallas::Point>;
/// Vesta affine points on the device (pasta_curves' layout).
pub type DeviceVesta = DevicePoints<vesta::Point>;

impl<G: DeviceGroup> DevicePoints<G> {
    pub(crate) fn new(buf: CudaSlice<u64>) -> Self {
        DevicePoints { buf, group: PhantomData }
    }
    /// Number of points.
    pub fn len(&self) -> usize {
        self.buf.len() / <G::Affine as Limbs>::WORDS
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub(crate) fn ptr(&self, stream: &GpuStream) -> u64 {
        self.buf.device_ptr(stream).0
    }
}

impl GpuDevice {
    /// Uploads field elements: blstrs Scalars or a Pasta field's.
    pub fn upload_scalars<S: DeviceField>(&self, stream: &GpuStream, v: &[S]) -> Result<DeviceScalars<S>, GpuError> {
        Ok(DeviceScalars::new(stream.clone_htod(as_words(v))?))
    }
    /// `len` zero Fr scalars (BLS12-381; [`GpuDevice::alloc_field`] for any field).
    pub fn alloc_scalars(&self, stream: &GpuStream, len: usize) -> Result<DeviceScalars, GpuError> {
        self.alloc_field::<Scalar>(stream, len)
    }
    /// `len` zero elements of `S`.
    pub fn alloc_field<S: DeviceField>(&self, stream: &GpuStream, len: usize) -> Result<DeviceScalars<S>, GpuError> {
        Ok(DeviceScalars::new(stream.alloc_zeros::<u64>(len * S::WORDS)?))
    }
    /// Copies `v` into the start of `dst` (which must be at least as long).
    pub fn write_scalars<S: DeviceField>(&self, stream: &GpuStream, dst: &mut DeviceScalars<S>, v: &[S]) -> Result<(), GpuError> {
        if v.len() > dst.len() {
            return Err(GpuError::InvalidArgument(format!("{} scalars into a buffer of {}", v.len(), dst.len())));
        }
        let mut view = dst.buf.slice_mut(0..v.len() * S::WORDS);
        stream.memcpy_htod(as_words(v), &mut view)?;
        Ok(())
    }
    /// Copies `v` into `dst` from element `at` on. Returns once `v` may be reused.
    pub fn write_scalars_at<S: DeviceField>(&self, stream: &GpuStream, dst: &mut DeviceScalars<S>, at: usize, v: &[S]) -> Result<(), GpuError> {
        write_at(stream, &mut dst.buf, at, v)
    }
    /// Copies `src` into the start of `dst` on the device.
    pub fn copy_scalars<S: DeviceField>(&self, stream: &GpuStream, src: &DeviceScalars<S>, dst: &mut DeviceScalars<S>) -> Result<(), GpuError> {
        if src.len() > dst.len() {
            return Err(GpuError::InvalidArgument(format!("{} scalars into a buffer of {}", src.len(), dst.len())));
        }
        stream.memcpy_dtod(&src.buf, &mut dst.buf.slice_mut(0..src.buf.len()))?;
        Ok(())
    }
    pub fn download_scalars<S: DeviceField>(&self, stream: &GpuStream, v: &DeviceScalars<S>) -> Result<Vec<S>, GpuError> {
        download_all(stream, &v.buf)
    }
    /// Points `indices` of `v`, read back one by one (for spot checks).
    pub fn download_points<G: DeviceGroup>(&self, stream: &GpuStream, v: &DevicePoints<G>, indices: &[usize]) -> Result<Vec<G::Affine>, GpuError> {
        gather(stream, &v.buf, indices)
    }
    /// Every point of `v`, in one copy.
    pub fn download_all_points<G: DeviceGroup>(&self, stream: &GpuStream, v: &DevicePoints<G>) -> Result<Vec<G::Affine>, GpuError> {
        download_all(stream, &v.buf)
    }
    /// `len` points (all-zero: the point at infinity), to be filled with
    /// [`GpuDevice::write_points`].
    pub fn alloc_points<G: DeviceGroup>(&self, stream: &GpuStream, len: usize) -> Result<DevicePoints<G>, GpuError> {
        Ok(DevicePoints::new(stream.alloc_zeros::<u64>(len * <G::Affine as Limbs>::WORDS)?))
    }
    /// Copies `v` into `dst` from point `at` on (a section uploaded chunk by
    /// chunk, so no host copy of it is whole). Returns once `v` may be reused.
    pub fn write_points<G: DeviceGroup>(&self, stream: &GpuStream, dst: &mut DevicePoints<G>, at: usize, v: &[G::Affine]) -> Result<(), GpuError> {
        write_at(stream, &mut dst.buf, at, v)
    }
    pub fn upload_points<G: DeviceGroup>(&self, stream: &GpuStream, v: &[G::Affine]) -> Result<DevicePoints<G>, GpuError> {
        Ok(DevicePoints::new(stream.clone_htod(as_words(v))?))
    }
}

fn write_at<T: Limbs>(s: &GpuStream, buf: &mut CudaSlice<u64>, at: usize, v: &[T]) -> Result<(), GpuError> {
    let n = buf.len() / T::WORDS;
    if at + v.len() > n {
        return Err(GpuError::InvalidArgument(format!("elements {at}..{} into a buffer of {n}", at + v.len())));
    }
    let mut view = buf.slice_mut(at * T::WORDS..(at + v.len()) * T::WORDS);
    s.memcpy_htod(as_words(v), &mut view)?;
    // The source is pageable host memory the caller reuses at once.
    s.synchronize()?;
    Ok(())
}

fn download_all<T: Limbs + Default + Clone>(s: &GpuStream, buf: &CudaSlice<u64>) -> Result<Vec<T>, GpuError> {
    let mut out = vec![T::default(); buf.len() / T::WORDS];
    s.memcpy_dtoh(buf, as_words_mut(&mut out))?;
    s.synchronize()?;
    Ok(out)
}

fn gather<T: Limbs + Default + Clone>(s: &GpuStream, buf: &CudaSlice<u64>, indices: &[usize]) -> Result<Vec<T>, GpuError> {
    let n = buf.len() / T::WORDS;
    let mut words = Vec::with_capacity(indices.len() * T::WORDS);
    for &i in indices {
        if i >= n {
            return Err(GpuError::InvalidArgument(format!("element {i} of a buffer of {n}")));
        }
        words.extend(s.clone_dtoh(&buf.slice(i * T::WORDS..(i + 1) * T::WORDS))?);
    }
    Ok(from_words(&words))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::prime::PrimeCurveAffine;

    #[test]
    fn scalar_words_are_montgomery_limbs() {
        // 1 in Montgomery form is R mod r.
        let w = as_words(&[Scalar::ONE]).to_vec();
        assert_eq!(w, vec![0x00000001fffffffe, 0x5884b7fa00034802, 0x998c4fefecbc4ff5, 0x1824b159acc5056f]);
    }

    #[test]
    fn affine_infinity_is_all_zero() {
        assert!(as_words(&[G1Affine::identity()]).iter().all(|&x| x == 0));
        assert!(as_words(&[G2Affine::identity()]).iter().all(|&x| x == 0));
        // pasta_curves writes infinity as (0, 0) too: curve.cuh's test.
        assert!(as_words(&[pallas::Affine::identity()]).iter().all(|&x| x == 0));
        assert!(as_words(&[vesta::Affine::identity()]).iter().all(|&x| x == 0));
    }

    #[test]
    fn pasta_words_are_montgomery_limbs_and_coordinates_in_order() {
        use group::{Curve, Group};
        use pasta_curves::arithmetic::CurveAffine;
        // 1 in Montgomery form is 2^256 mod p (cuda/pasta.cuh's *_ONE).
        assert_eq!(as_words(&[pasta_curves::Fp::ONE]), [0x34786d38fffffffd, 0x992c350be41914ad, 0xffffffffffffffff, 0x3fffffffffffffff]);
        assert_eq!(as_words(&[pasta_curves::Fq::ONE]), [0x5b2b3e9cfffffffd, 0x992c350be3420567, 0xffffffffffffffff, 0x3fffffffffffffff]);
        // An affine point is x's limbs then y's.
        let p = (pallas::Point::generator() * pasta_curves::Fq::from(77u64)).to_affine();
        let c = p.coordinates().unwrap();
        let want: Vec<u64> = as_words(&[*c.x(), *c.y()]).to_vec();
        assert_eq!(as_words(&[p]), want.as_slice());
        let v = (vesta::Point::generator() * pasta_curves::Fp::from(78u64)).to_affine();
        let c = v.coordinates().unwrap();
        assert_eq!(as_words(&[v]), as_words(&[*c.x(), *c.y()]));
        let back: Vec<pallas::Affine> = from_words(as_words(&[p]));
        assert_eq!(back[0], p);
    }
}
