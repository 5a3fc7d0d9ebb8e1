//! GPU against CPU (blstrs) on small fresh random inputs; prints
//! "no GPU: skipped" where there is no GPU or no embedded kernels.
//! The full sweep is the `gpu_check` example. Pasta (Pallas, Vesta, their
//! scalar fields) against pasta_curves.
#[path = "../examples/common/mod.rs"]
mod common;

use blstrs::{G1Projective, G2Projective, Scalar};
use common::*;
use ff::{Field, PrimeField};
use group::Group;
use kiln_gpu::{GpuDevice, NttDirection};

fn device() -> Option<GpuDevice> {
    if GpuDevice::count() == 0 || !kiln_gpu::HAS_KERNELS {
        println!("no GPU: skipped");
        return None;
    }
    Some(GpuDevice::open(0).expect("open GPU 0"))
}

#[test]
fn open_without_driver_is_an_error_not_a_panic() {
    if GpuDevice::count() == 0 {
        assert!(GpuDevice::open(0).is_err());
    }
}

/// NTTs over `F` (plain and coset, both ways) against the CPU NTT.
fn ntt_matches_cpu_in<F: kiln_gpu::DeviceField>(dev: &GpuDevice, s: &kiln_gpu::GpuStream) {
    for log_n in [1u32, 2, 5, 11, 14] {
        let x: Vec<F> = random_field(1 << log_n, rand::random());
        for (dir, coset) in [(NttDirection::Forward, false), (NttDirection::Inverse, false), (NttDirection::Forward, true), (NttDirection::Inverse, true)] {
            let mut buf = dev.upload_scalars(s, &x).unwrap();
            dev.ntt(s, &mut buf, log_n, dir, coset).unwrap();
            let mut want = x.clone();
            cpu_ntt(&mut want, dir == NttDirection::Inverse, coset);
            assert_eq!(dev.download_scalars(s, &buf).unwrap(), want, "{} 2^{log_n} {dir:?} coset={coset}", F::NAME);
        }
    }
}

#[test]
fn ntt_matches_cpu() {
    let Some(dev) = device() else { return };
    ntt_matches_cpu_in::<Scalar>(&dev, &dev.new_stream().unwrap());
}

/// The CPU reference itself (runs without a GPU): a DFT at every point of
/// the domain (or its coset) for each field, and its inverse undoes it.
#[test]
fn the_cpu_ntt_is_the_dft_over_kiln_gpus_roots() {
    fn one<F: ff::PrimeField>() {
        for log_n in [0u32, 1, 3, 6] {
            let n = 1usize << log_n;
            let x: Vec<F> = random_field(n, 9 + u64::from(log_n));
            for coset in [false, true] {
                let mut y = x.clone();
                cpu_ntt(&mut y, false, coset);
                let g = if coset { F::MULTIPLICATIVE_GENERATOR } else { F::ONE };
                let w = root_of::<F>(log_n);
                for (j, v) in y.iter().enumerate() {
                    assert_eq!(*v, horner(&x, g * w.pow_vartime([j as u64])), "2^{log_n} coset={coset} point {j}");
                }
                cpu_ntt(&mut y, true, coset);
                assert_eq!(y, x, "2^{log_n} coset={coset}: the inverse");
            }
        }
        assert_eq!(root_of::<F>(F::S).pow_vartime([1u64 << (F::S - 1)]), -F::ONE, "a primitive root");
    }
    one::<Scalar>();
    one::<pasta_curves::Fp>();
    one::<pasta_curves::Fq>();
    // The coset generators kiln-gpu's NTTs use (F::MULTIPLICATIVE_GENERATOR).
    assert_eq!(Scalar::MULTIPLICATIVE_GENERATOR, Scalar::from(7u64));
    assert_eq!(pasta_curves::Fp::MULTIPLICATIVE_GENERATOR, pasta_curves::Fp::from(5u64));
}

#[test]
fn h_pipeline_matches_cpu() {
    let Some(dev) = device() else { return };
    let s = dev.new_stream().unwrap();
    for (n, log_m) in [(1usize, 1u32), (3, 2), (1000, 10), (5000, 13)] {
        let (a, b, c) = (random_scalars(n, 1), random_scalars(n, 2), random_scalars(n, 3));
        let m = 1 << log_m;
        let mut bufs = [&a, &b, &c].map(|v| {
            let mut d = dev.alloc_scalars(&s, m).unwrap();
            dev.write_scalars(&s, &mut d, v).unwrap();
            d
        });
        let [da, db, dc] = &mut bufs;
        dev.h_pipeline(&s, da, db, dc, n, log_m).unwrap();
        assert_eq!(dev.download_scalars(&s, da).unwrap(), cpu_h(&a, &b, &c, m));
    }
}

#[test]
fn msm_matches_cpu() {
    let Some(dev) = device() else { return };
    let s = dev.new_stream().unwrap();
    let mut r = rng();
    for n in [1usize, 2, 3, 100, 5000] {
        let chain = ChainPoints::new(&mut r);
        let mut scalars = random_scalars(n, rand::random());
        scalars[0] = Scalar::ONE;
        if n > 2 {
            scalars[1] = Scalar::ZERO;
            scalars[2] = -Scalar::ONE;
        }
        let bitmap: Vec<u64> = (0..n.div_ceil(64)).map(|_| rand::random()).collect();
        let sc = dev.upload_scalars(&s, &scalars).unwrap();
        for bm in [None, Some(bitmap.as_slice())] {
            let t = terms(&scalars, bm);
            let p1 = dev.upload_points::<G1Projective>(&s, &chain.g1(n)).unwrap();
            let got = dev.msm(&s, &p1, &sc, n, bm).unwrap();
            assert_eq!(got, G1Projective::generator() * chain.dlog(&t), "G1 n={n}");
            let p2 = dev.upload_points::<G2Projective>(&s, &chain.g2(n)).unwrap();
            let got = dev.msm(&s, &p2, &sc, n, bm).unwrap();
            assert_eq!(got, G2Projective::generator() * chain.dlog(&t), "G2 n={n}");
        }
    }
}

/// Pasta NTTs (both scalar fields) against the CPU NTT over pasta_curves.
#[test]
fn pasta_ntt_matches_cpu() {
    let Some(dev) = device() else { return };
    let s = dev.new_stream().unwrap();
    ntt_matches_cpu_in::<pasta_curves::Fp>(&dev, &s);
    ntt_matches_cpu_in::<pasta_curves::Fq>(&dev, &s);
}

/// Pallas and Vesta MSMs (edge scalars 0, 1, -1, 2; with and without a
/// bitmap; a point at infinity) against pasta_curves.
#[test]
fn pasta_msm_matches_cpu() {
    use common::pasta::{field_terms, naive_sum, random_field, Chain};
    use group::prime::PrimeCurveAffine;
    use group::Curve;
    fn one<C>(dev: &GpuDevice, s: &kiln_gpu::GpuStream)
    where
        C: kiln_gpu::DeviceGroup + Curve<AffineRepr = <C as kiln_gpu::DeviceGroup>::Affine>,
        <C as kiln_gpu::DeviceGroup>::Affine: PrimeCurveAffine<Scalar = C::Scalar, Curve = C>,
    {
        let mut r = rng();
        for n in [1usize, 2, 3, 100, 5000] {
            let chain = Chain::<C::Scalar>::new(&mut r);
            let mut scalars: Vec<C::Scalar> = random_field(n, rand::random());
            scalars[0] = C::Scalar::ONE;
            if n > 3 {
                scalars[1] = C::Scalar::ZERO;
                scalars[2] = -C::Scalar::ONE;
                scalars[3] = C::Scalar::from(2u64);
            }
            let bitmap: Vec<u64> = (0..n.div_ceil(64)).map(|_| rand::random()).collect();
            let sc = dev.upload_scalars(s, &scalars).unwrap();
            for bm in [None, Some(bitmap.as_slice())] {
                let mut t = field_terms(&scalars, bm);
                let mut pts = chain.points::<C>(n);
                if n > 3 {
                    // A point at infinity (0, 0) contributes nothing.
                    pts[1] = <C as kiln_gpu::DeviceGroup>::Affine::identity();
                    t.retain(|(_, i)| *i != 1);
                }
                let dp = dev.upload_points::<C>(s, &pts).unwrap();
                let got = dev.msm(s, &dp, &sc, n, bm).unwrap();
                assert_eq!(got, C::generator() * chain.dlog(&t), "{} n={n} bitmap={}", C::NAME, bm.is_some());
                if n <= 100 {
                    assert_eq!(got, naive_sum(&pts, &t), "{} n={n}", C::NAME);
                }
            }
        }
    }
    let Some(dev) = device() else { return };
    let s = dev.new_stream().unwrap();
    one::<pasta_curves::pallas::Point>(&dev, &s);
    one::<pasta_curves::vesta::Point>(&dev, &s);
}
