//! gpu_check's Pasta cases (`--pasta-only`, and in the default run): MSMs
//! over Pallas and Vesta and NTTs over both Pasta scalar fields, against
//! pasta_curves on the CPU (common/pasta.rs). The same kernel templates as
//! BLS12-381's, other fields: edge scalars (0, 1, -1, 2), density bitmaps,
//! points at infinity, odd sizes and single points.
use std::time::Instant;

use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use group::Curve;
use kiln_gpu::{DeviceGroup, GpuDevice, GpuError, GpuStream};
use pasta_curves::{pallas, vesta};
use rand::Rng;

use crate::common::pasta::*;
use crate::common::rng;
use crate::{check_ntt, ms, run, Table};

/// The Pasta cases: both fields' NTTs (`ntt`), both curves' MSMs (`msm`).
pub fn checks(dev: &GpuDevice, s: &GpuStream, t: &mut Table, quick: bool, ntt: bool, msm: bool) {
    let ntt_sizes: &[u32] = if !ntt { &[] } else if quick { &[1, 2, 3, 10, 11, 16] } else { &[1, 2, 3, 4, 7, 10, 11, 13, 16, 18, 20, 22] };
    for &l in ntt_sizes {
        let r = check_ntt::<pasta_curves::Fp>(dev, s, t, l);
        run(t, &format!("ntt Pasta Fp 2^{l}"), r);
        let r = check_ntt::<pasta_curves::Fq>(dev, s, t, l);
        run(t, &format!("ntt Pasta Fq 2^{l}"), r);
    }
    if msm {
        msm_checks::<pallas::Point>(dev, s, t, quick);
        msm_checks::<vesta::Point>(dev, s, t, quick);
    }
}

#[derive(Clone, Copy, Debug)]
enum Mix {
    Random,
    Edge, // 0, 1, -1, 2 and random, mixed
    Bits, // mostly 0 and 1
    Const(u64),
    MinusOne,
}

fn make_scalars<F: PrimeField>(n: usize, mix: Mix) -> Vec<F> {
    let mut r = rng();
    random_field::<F>(n, rand::random())
        .into_iter()
        .map(|x| match mix {
            Mix::Random => x,
            Mix::Edge => match r.gen_range(0..5) { 0 => F::ZERO, 1 => F::ONE, 2 => -F::ONE, 3 => F::from(2), _ => x },
            Mix::Bits => match r.gen_range(0..10) { 0..=3 => F::ZERO, 4..=8 => F::ONE, _ => x },
            Mix::Const(k) => F::from(k),
            Mix::MinusOne => -F::ONE,
        })
        .collect()
}

/// One MSM: `bitmap_pct` of the scalars take part (None: all),
/// `same_point`: every point equal (one bucket gets everything),
/// `infinity`: some points are the point at infinity (0, 0).
#[allow(clippy::too_many_arguments)]
fn check_msm<C>(dev: &GpuDevice, s: &GpuStream, t: &mut Table, n: usize, mix: Mix, bitmap_pct: Option<u32>, same_point: bool, infinity: bool) -> Result<(), GpuError>
where
    C: DeviceGroup + Curve<AffineRepr = <C as DeviceGroup>::Affine>,
    <C as DeviceGroup>::Affine: PrimeCurveAffine<Scalar = C::Scalar, Curve = C>,
{
    let mut r = rng();
    let mut chain = Chain::<C::Scalar>::new(&mut r);
    if same_point {
        chain.d = C::Scalar::ZERO;
    }
    let scalars: Vec<C::Scalar> = make_scalars(n, mix);
    let bitmap: Option<Vec<u64>> = bitmap_pct.map(|pct| (0..n.div_ceil(64)).map(|_| (0..64).fold(0u64, |w, i| w | ((r.gen_range(0..100) < pct) as u64) << i)).collect());
    let mut terms = field_terms(&scalars, bitmap.as_deref());
    let npoints = terms.len().max(1);
    let inf: Vec<usize> = if infinity { (0..npoints.div_ceil(7)).map(|_| r.gen_range(0..npoints)).collect() } else { vec![] };
    terms.retain(|(_, i)| !inf.contains(i));
    let mut pts = chain.points::<C>(npoints);
    for &i in &inf {
        pts[i] = <C as DeviceGroup>::Affine::identity();
    }
    let label = format!(
        "msm {} n={n} {mix:?}{}{}{}",
        C::NAME,
        bitmap_pct.map_or(String::new(), |p| format!(" bitmap{p}%")),
        if same_point { " same-point" } else { "" },
        if infinity { " +inf" } else { "" }
    );
    let sc = dev.upload_scalars(s, &scalars)?;
    let dp = dev.upload_points::<C>(s, &pts)?;
    s.synchronize()?;
    let t0 = Instant::now();
    let got = dev.msm(s, &dp, &sc, n, bitmap.as_deref())?;
    let time = ms(t0);
    let want = C::generator() * chain.dlog(&terms);
    let ok = got == want && (n > 64 || got == naive_sum(&pts, &terms));
    t.row(label, ok, time);
    Ok(())
}

fn msm_checks<C>(dev: &GpuDevice, s: &GpuStream, t: &mut Table, quick: bool)
where
    C: DeviceGroup + Curve<AffineRepr = <C as DeviceGroup>::Affine>,
    <C as DeviceGroup>::Affine: PrimeCurveAffine<Scalar = C::Scalar, Curve = C>,
{
    let mut cases: Vec<(usize, Mix, Option<u32>, bool, bool)> = vec![
        (1, Mix::Random, None, false, false),
        (1, Mix::Const(0), None, false, false),
        (1, Mix::Const(1), None, false, false),
        (1, Mix::MinusOne, None, false, false),
        (1, Mix::Const(2), None, false, false),
        (2, Mix::Random, None, false, false),
        (3, Mix::Edge, None, false, false),
        (37, Mix::Edge, None, false, true),
        (64, Mix::Random, Some(50), false, false),
        (1000, Mix::Edge, None, false, false),
        (1000, Mix::Random, None, true, false),
        (4097, Mix::Edge, Some(30), false, true),
        (1 << 16, Mix::Const(0), None, false, false),
        (1 << 16, Mix::Const(1), None, false, false),
        (1 << 16, Mix::MinusOne, None, false, false),
        (1 << 16, Mix::Random, Some(100), false, false),
        (1 << 16, Mix::Random, Some(0), false, false),
        ((1 << 16) + 3, Mix::Random, Some(25), true, false),
        (100_003, Mix::Bits, Some(75), false, true),
        ((1 << 20) + 7, Mix::Random, None, false, false),
    ];
    if !quick {
        cases.push((1 << 22, Mix::Bits, Some(90), false, false));
        cases.push((1 << 24, Mix::Random, None, false, false));
    }
    for (n, mix, bits, same, inf) in cases {
        let r = check_msm::<C>(dev, s, t, n, mix, bits, same, inf);
        run(t, &format!("msm {} n={n}", C::NAME), r);
    }
}
