//! Compares every kiln-gpu kernel with a CPU reference (blstrs; pasta_curves
//! for the Pasta cases) on fresh random inputs at many sizes and edge cases;
//! prints a pass/fail table.
//! `cargo run --release -p kiln-gpu --example gpu_check [-- --quick | --msm-only | --ntt-only | --setup-only | --abc-only | --pasta-only]`
mod abc_check;
mod common;
mod pasta_check;

use std::time::Instant;

use blstrs::{G1Projective, G2Projective, Scalar};
use common::*;
use ff::{BatchInvert, Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve, Group, UncompressedEncoding};
use kiln_gpu::{DeviceField, DeviceGroup, GpuDevice, GpuError, GpuStream, NttDirection, ParamsGroup};
use rand::Rng;
use rayon::prelude::*;

struct Table(Vec<(String, bool, String)>);

/// A check that could not run counts as a failure, with its error.
fn run(t: &mut Table, name: &str, r: Result<(), GpuError>) {
    if let Err(e) = r {
        t.row(name.to_string(), false, format!("error: {e}"));
    }
}
impl Table {
    fn row(&mut self, name: String, ok: bool, detail: String) {
        println!("{:<46} {:<4} {}", name, if ok { "PASS" } else { "FAIL" }, detail);
        self.0.push((name, ok, detail));
    }
}

fn ms(t: Instant) -> String {
    format!("{:.2} ms", t.elapsed().as_secs_f64() * 1e3)
}

/// Forward and inverse, plain and on the coset, against the CPU NTT (up to
/// 2^20), above that by the round trip and Horner at a few points.
pub(crate) fn check_ntt<F: DeviceField>(dev: &GpuDevice, s: &GpuStream, t: &mut Table, log_n: u32) -> Result<(), GpuError> {
    let n = 1usize << log_n;
    let x: Vec<F> = random_field(n, rand::random());
    for (dir, coset) in [(NttDirection::Forward, false), (NttDirection::Inverse, false), (NttDirection::Forward, true), (NttDirection::Inverse, true)] {
        let mut buf = dev.upload_scalars(s, &x)?;
        let t0 = Instant::now();
        dev.ntt(s, &mut buf, log_n, dir, coset)?;
        s.synchronize()?;
        let time = ms(t0);
        let got = dev.download_scalars(s, &buf)?;
        let inv = dir == NttDirection::Inverse;
        let ok = if log_n <= 20 {
            let mut want = x.clone();
            cpu_ntt(&mut want, inv, coset);
            got == want
        } else {
            let mut back = dev.upload_scalars(s, &got)?;
            let other = if inv { NttDirection::Forward } else { NttDirection::Inverse };
            dev.ntt(s, &mut back, log_n, other, coset)?;
            let round_trip = dev.download_scalars(s, &back)? == x;
            let w = root_of::<F>(log_n);
            let g = if coset { F::MULTIPLICATIVE_GENERATOR } else { F::ONE };
            let mut r = rng();
            round_trip && (inv || (0..3).all(|_| {
                let j: u64 = r.gen_range(0..n as u64);
                got[j as usize] == horner(&x, g * w.pow_vartime([j]))
            }))
        };
        t.row(format!("ntt {} {:?}{} 2^{}", F::NAME, dir, if coset { " coset" } else { "" }, log_n), ok, time);
    }
    Ok(())
}

/// Lagrange interpolation of evaluations `e` (zero past e.len()) over the
/// 2^log_m domain, evaluated at x (not in the domain).
fn barycentric(e: &[Scalar], log_m: u32, x: Scalar) -> Scalar {
    let m = 1u64 << log_m;
    let w = root_of::<Scalar>(log_m);
    const CH: usize = 1 << 14;
    let sum: Scalar = e.par_chunks(CH).enumerate().map(|(k, c)| {
        let mut wi = w.pow_vartime([(k * CH) as u64]);
        let mut num = Vec::with_capacity(c.len());
        let mut den = Vec::with_capacity(c.len());
        for a in c {
            num.push(*a * wi);
            den.push(x - wi);
            wi *= w;
        }
        den.batch_invert();
        num.iter().zip(&den).map(|(a, b)| *a * b).fold(Scalar::ZERO, |s, v| s + v)
    }).reduce(|| Scalar::ZERO, |a, b| a + b);
    sum * (x.pow_vartime([m]) - Scalar::ONE) * Scalar::from(m).invert().unwrap()
}

fn check_h(dev: &GpuDevice, s: &GpuStream, t: &mut Table, n: usize, log_m: u32) -> Result<(), GpuError> {
    let m = 1usize << log_m;
    let seed: u64 = rand::random();
    let (a, b, c) = (random_scalars(n, seed), random_scalars(n, seed ^ 1), random_scalars(n, seed ^ 2));
    let up = |v: &[Scalar]| -> Result<_, GpuError> {
        let mut buf = dev.alloc_scalars(s, m)?;
        // Poison the padding: the pipeline must zero it.
        dev.write_scalars(s, &mut buf, &vec![Scalar::from(5u64); m])?;
        dev.write_scalars(s, &mut buf, v)?;
        Ok(buf)
    };
    let (mut da, mut db, mut dc) = (up(&a)?, up(&b)?, up(&c)?);
    let t0 = Instant::now();
    dev.h_pipeline(s, &mut da, &mut db, &mut dc, n, log_m)?;
    let time = ms(t0);
    let h = dev.download_scalars(s, &da)?;
    let ok = if log_m <= 20 {
        h == cpu_h(&a, &b, &c, m)
    } else {
        // h(x) (g^m - 1) = A(x) B(x) - C(x) at coset points x = g w^j.
        let mut r = rng();
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let zm = g.pow_vartime([m as u64]) - Scalar::ONE;
        (0..2).all(|_| {
            let x = g * root_of::<Scalar>(log_m).pow_vartime([r.gen_range(0..m as u64)]);
            horner(&h, x) * zm == barycentric(&a, log_m, x) * barycentric(&b, log_m, x) - barycentric(&c, log_m, x)
        })
    };
    t.row(format!("h_pipeline n={} m=2^{}", n, log_m), ok, time);
    Ok(())
}

#[derive(Clone, Copy)]
enum Mix {
    Random,
    Edge,      // 0, 1, r-1, 2 and random, mixed
    Filecoin,  // mostly 0 and 1
    Const(u64),
    MinusOne,
}

fn make_scalars(n: usize, mix: Mix) -> Vec<Scalar> {
    let mut r = rng();
    let rnd = random_scalars(n, rand::random());
    rnd.into_iter().map(|x| match mix {
        Mix::Random => x,
        Mix::Edge => match r.gen_range(0..5) { 0 => Scalar::ZERO, 1 => Scalar::ONE, 2 => -Scalar::ONE, 3 => Scalar::from(2u64), _ => x },
        Mix::Filecoin => match r.gen_range(0..10) { 0..=3 => Scalar::ZERO, 4..=8 => Scalar::ONE, _ => x },
        Mix::Const(k) => Scalar::from(k),
        Mix::MinusOne => -Scalar::ONE,
    }).collect()
}

#[derive(Clone, Copy)]
enum Bits { None, Random(u32), All, Empty }

fn make_bitmap(n: usize, b: Bits) -> Option<Vec<u64>> {
    let words = n.div_ceil(64);
    let mut r = rng();
    match b {
        Bits::None => None,
        Bits::All => Some(vec![u64::MAX; words]),
        Bits::Empty => Some(vec![0; words]),
        Bits::Random(pct) => Some((0..words).map(|_| (0..64).fold(0u64, |w, i| w | ((r.gen_range(0..100) < pct) as u64) << i)).collect()),
    }
}

/// A group the checks run over: one of kiln-gpu's BLS12-381 groups (its
/// `.params` paths too: streamed MSMs, fixed-base), with what the CPU
/// reference needs of it from blstrs. The Pasta curves: pasta_check.
trait CheckGroup: ParamsGroup + Curve<AffineRepr = <Self as DeviceGroup>::Affine> + Group<Scalar = Scalar>
where
    <Self as DeviceGroup>::Affine: PrimeCurveAffine<Scalar = Scalar, Curve = Self> + UncompressedEncoding,
{
}
impl CheckGroup for G1Projective {}
impl CheckGroup for G2Projective {}

#[allow(clippy::too_many_arguments)]
fn check_msm<P: CheckGroup>(dev: &GpuDevice, s: &GpuStream, t: &mut Table, n: usize, mix: Mix, bits: Bits, same_point: bool, infinity: bool) -> Result<(), GpuError>
where
    P::Affine: PrimeCurveAffine<Scalar = Scalar, Curve = P> + UncompressedEncoding,
{
    check_msm_from::<P>(dev, s, t, n, mix, bits, same_point, infinity, None)
}

/// `streamed`: the points stay on the host in the .params encoding and are
/// streamed in chunks of that many bytes (no infinity: parameter files hold none).
#[allow(clippy::too_many_arguments)]
fn check_msm_from<P: CheckGroup>(dev: &GpuDevice, s: &GpuStream, t: &mut Table, n: usize, mix: Mix, bits: Bits, same_point: bool, infinity: bool, streamed: Option<usize>) -> Result<(), GpuError>
where
    P::Affine: PrimeCurveAffine<Scalar = Scalar, Curve = P> + UncompressedEncoding,
{
    let mut r = rng();
    let mut chain = ChainPoints::new(&mut r);
    if same_point {
        chain.d = Scalar::ZERO;
    }
    let scalars = make_scalars(n, mix);
    let bitmap = make_bitmap(n, bits);
    let mut terms = terms(&scalars, bitmap.as_deref());
    let npoints = terms.len().max(1);
    let inf: Vec<usize> = if infinity { (0..npoints.div_ceil(7)).map(|_| r.gen_range(0..npoints)).collect() } else { vec![] };
    terms.retain(|(_, i)| !inf.contains(i));
    let label = format!("msm {} n={} {}{}{}{}", P::NAME, n,
        match mix { Mix::Random => "random".into(), Mix::Edge => "edge(0,1,r-1,2)".into(), Mix::Filecoin => "filecoin(0/1)".into(), Mix::Const(k) => format!("all={k}"), Mix::MinusOne => "all=r-1".into() },
        match bits { Bits::None => String::new(), Bits::Random(p) => format!(" bitmap{p}%"), Bits::All => " bitmap-all".into(), Bits::Empty => " bitmap-empty".into() },
        if same_point { " same-point" } else { "" }, if infinity { " +inf" } else { "" });
    let label = match streamed { Some(c) => format!("{label} streamed/{}KiB", c >> 10), None => label };
    let mut streamer = streamed.map(|c| dev.point_streamer(c)).transpose()?;
    let sc = dev.upload_scalars(s, &scalars)?;
    let dlog = chain.dlog(&terms);
    let mut pts = chain.points::<P>(npoints);
    for &i in &inf { pts[i] = P::Affine::identity(); }
    let t0;
    let got = if let Some(st) = &mut streamer {
        let raw: Vec<u8> = pts.iter().flat_map(|p| p.to_uncompressed().as_ref().to_vec()).collect();
        t0 = Instant::now();
        dev.msm_streamed::<P>(s, st, &raw, &sc, n, bitmap.as_deref())?.0
    } else {
        let dp = dev.upload_points::<P>(s, &pts)?;
        s.synchronize()?;
        t0 = Instant::now();
        dev.msm(s, &dp, &sc, n, bitmap.as_deref())?
    };
    let time = ms(t0);
    let want = P::generator() * dlog;
    let ok = got == want && (n > 64 || got == naive(&pts, &terms));
    t.row(label, ok, time);
    Ok(())
}

/// `d * 2^(8k) * g` at entry `k * 256 + d`: the fixed-base kernel's table,
/// made here from blstrs alone.
fn window_table<P: Group<Scalar = Scalar> + group::Curve>(g: P) -> Vec<P::AffineRepr>
where
    P::AffineRepr: Default + Clone,
{
    let mut proj = Vec::with_capacity(kiln_gpu::WINDOW_TABLE_LEN);
    let mut base = g;
    for _ in 0..32 {
        let mut acc = P::identity();
        for _ in 0..256 {
            proj.push(acc);
            acc += base;
        }
        base = acc; // 256 * base
    }
    let mut aff = vec![P::AffineRepr::default(); proj.len()];
    P::batch_normalize(&proj, &mut aff);
    aff
}

/// The fixed-base kernel (test setups made on the device) against `s * G`
/// computed by blstrs: every point up to 2^16 points, 2000 spread ones above.
fn check_fixed_base<P: CheckGroup>(dev: &GpuDevice, s: &GpuStream, t: &mut Table, n: usize, mix: Mix) -> Result<(), GpuError>
where
    P::Affine: PrimeCurveAffine<Scalar = Scalar, Curve = P> + UncompressedEncoding,
{
    let sc = make_scalars(n, mix);
    let idx: Vec<usize> = if n <= 1 << 16 { (0..n).collect() } else { (0..2000).map(|k| (k * 7919 * 1_000_003) % n).chain([0, n - 1]).collect() };
    let t0 = Instant::now();
    let table = window_table(P::generator());
    let pts = dev.fixed_base::<P>(s, &table, &sc)?;
    let time = t0.elapsed();
    let got = dev.download_points(s, &pts, &idx)?;
    let ok = idx.par_iter().zip(got.par_iter()).all(|(&i, p)| *p == (P::generator() * sc[i]).to_affine());
    t.row(format!("fixed-base {} n={n} {}", P::NAME.to_lowercase(), mix_name(mix)), ok, format!("{:.2} ms", time.as_secs_f64() * 1e3));
    Ok(())
}

fn mix_name(m: Mix) -> &'static str {
    match m {
        Mix::Random => "random",
        Mix::Edge => "edge",
        Mix::Filecoin => "filecoin",
        Mix::Const(0) => "zeros",
        Mix::Const(_) => "const",
        Mix::MinusOne => "r-1",
    }
}

/// `--stream-debug`: small dense edge-scalar MSMs, streamed three times and
/// as the sum of resident MSMs over the same chunks, each against the CPU:
/// tells a fault in the streaming from a fault of the MSM at chunk sizes.
fn stream_debug(dev: &GpuDevice, s: &GpuStream) -> Result<(), GpuError> {
    let mut r = rng();
    let mut bad = 0;
    for trial in 0..24 {
        let n = r.gen_range(300..6000usize);
        let chunk = [16usize << 10, 64 << 10, 256 << 10][trial % 3];
        let edge = trial.is_multiple_of(2);
        let mix = if edge { Mix::Edge } else { Mix::Random };
        let chain = ChainPoints::new(&mut r);
        let scalars = make_scalars(n, mix);
        let want = G1Projective::generator() * chain.dlog(&terms(&scalars, None));
        let pts = chain.g1(n);
        let raw: Vec<u8> = pts.iter().flat_map(|p| p.to_uncompressed()).collect();
        let sc = dev.upload_scalars(s, &scalars)?;
        let mut st = dev.point_streamer(chunk)?;
        let streamed: Vec<bool> = (0..3).map(|_| dev.msm_streamed::<G1Projective>(s, &mut st, &raw, &sc, n, None).map(|(g, _)| g == want)).collect::<Result<_, _>>()?;
        let step = chunk / 96 / 64 * 64;
        let mut sum = G1Projective::identity();
        let mut chunks_ok = true;
        for lo in (0..n).step_by(step) {
            let hi = (lo + step).min(n);
            let dp = dev.upload_points::<G1Projective>(s, &pts[lo..hi])?;
            let dsc = dev.upload_scalars(s, &scalars[lo..hi])?;
            let part = dev.msm(s, &dp, &dsc, hi - lo, None)?;
            let part_want = G1Projective::generator() * chain.dlog(&terms(&scalars[lo..hi], None).into_iter().map(|(x, i)| (x, i + lo)).collect::<Vec<_>>());
            chunks_ok &= part == part_want;
            sum += part;
        }
        let resident = dev.msm(s, &dev.upload_points::<G1Projective>(s, &pts)?, &sc, n, None)? == want;
        let ok = streamed.iter().all(|&x| x) && chunks_ok && sum == want && resident;
        bad += usize::from(!ok);
        println!("trial {trial} n={n} chunk={chunk} {} streamed={streamed:?} chunk-msms={chunks_ok} chunk-sum={} resident={resident}", if edge { "edge" } else { "random" }, sum == want);
    }
    println!("stream-debug: {bad} bad trials");
    Ok(())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // --msm-only: the MSM cases alone (kernel variants that touch only the MSM).
    let msm_only = std::env::args().any(|a| a == "--msm-only");
    // --ntt-only: the NTT and H pipeline cases alone (variants of the NTT).
    let ntt_only = std::env::args().any(|a| a == "--ntt-only");
    if std::env::args().any(|a| a == "--stream-debug") && GpuDevice::count() > 0 && kiln_gpu::HAS_KERNELS {
        let dev = GpuDevice::open(0).expect("open GPU 0");
        let s = dev.new_stream().expect("stream");
        stream_debug(&dev, &s).expect("stream debug");
        return;
    }
    if GpuDevice::count() == 0 || !kiln_gpu::HAS_KERNELS {
        println!("no GPU: skipped (devices: {}, kernels embedded: {})", GpuDevice::count(), kiln_gpu::HAS_KERNELS);
        return;
    }
    let dev = GpuDevice::open(0).expect("open GPU 0");
    println!("device: {:?}", dev.info());
    let s = dev.new_stream().expect("stream");
    let mut t = Table(vec![]);
    // --pasta-only: the Pallas/Vesta MSMs and Pasta NTTs alone.
    if std::env::args().any(|a| a == "--pasta-only") {
        pasta_check::checks(&dev, &s, &mut t, quick, true, true);
        return finish(&t);
    }
    // --abc-only: constraint evaluation alone (a/b/c from compiled
    // matrices on the device), with the PoRep-shaped timing unless --quick.
    if std::env::args().any(|a| a == "--abc-only") {
        abc_check::run(&dev, &s, &mut t, quick);
        return finish(&t);
    }
    // --setup-only: the fixed-base kernel alone (test setups made on the device).
    let setup_only = std::env::args().any(|a| a == "--setup-only");
    if !msm_only && !ntt_only {
        let mut cases = vec![(1, Mix::Random), (2, Mix::Edge), (3, Mix::Random), (1, Mix::Const(0)), (1, Mix::MinusOne), (37, Mix::Edge), (1000, Mix::Edge), (4097, Mix::Filecoin), ((1 << 16) + 1, Mix::Random)];
        if !quick {
            cases.push(((1 << 20) + 7, Mix::Random));
        }
        for &(n, mix) in &cases {
            let r = check_fixed_base::<G1Projective>(&dev, &s, &mut t, n, mix);
            run(&mut t, &format!("fixed-base g1 n={n}"), r);
        }
        for &(n, mix) in &cases {
            let r = check_fixed_base::<G2Projective>(&dev, &s, &mut t, n, mix);
            run(&mut t, &format!("fixed-base g2 n={n}"), r);
        }
    }
    let ntt_sizes: Vec<u32> = if msm_only || setup_only { vec![] } else if quick { vec![1, 2, 3, 10, 11, 13, 18] } else { vec![1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 20, 24, 25] };
    for l in ntt_sizes {
        let r = check_ntt::<Scalar>(&dev, &s, &mut t, l);
        run(&mut t, &format!("ntt 2^{l}"), r);
    }
    let mut h_cases = vec![(1, 1), (2, 1), (3, 2), (5, 3), (1000, 10), (1024, 10), (1500, 11), (70000, 17), ((1 << 20) - 3, 20)];
    if !quick { h_cases.push(((1 << 24) - 12345, 24)); }
    if msm_only || setup_only { h_cases.clear(); }
    for (n, l) in h_cases {
        let r = check_h(&dev, &s, &mut t, n, l);
        run(&mut t, &format!("h n={n}"), r);
    }
    if !ntt_only && !setup_only {
        msm_checks::<G1Projective>(&dev, &s, &mut t, quick);
        msm_checks::<G2Projective>(&dev, &s, &mut t, quick);
    }
    if !setup_only {
        // --msm-only / --ntt-only narrow the Pasta cases the same way.
        pasta_check::checks(&dev, &s, &mut t, quick, !msm_only, !ntt_only);
    }
    finish(&t);
}

/// Every MSM case over group `P`: resident points, then points streamed
/// from the host.
fn msm_checks<P: CheckGroup>(dev: &GpuDevice, s: &GpuStream, t: &mut Table, quick: bool)
where
    P::Affine: PrimeCurveAffine<Scalar = Scalar, Curve = P> + UncompressedEncoding,
{
    let mut cases: Vec<(usize, Mix, Bits, bool, bool)> = vec![
        (1, Mix::Random, Bits::None, false, false),
        (2, Mix::Random, Bits::None, false, false),
        (3, Mix::Random, Bits::None, false, false),
        (1, Mix::Const(0), Bits::None, false, false),
        (1, Mix::Const(1), Bits::None, false, false),
        (1, Mix::MinusOne, Bits::None, false, false),
        (37, Mix::Edge, Bits::None, false, true),
        (64, Mix::Random, Bits::Random(50), false, false),
        (1000, Mix::Edge, Bits::None, false, false),
        (1000, Mix::Random, Bits::None, true, false),
        (4097, Mix::Edge, Bits::Random(30), false, true),
        (1 << 16, Mix::Const(0), Bits::None, false, false),
        (1 << 16, Mix::Const(1), Bits::None, false, false),
        (1 << 16, Mix::MinusOne, Bits::None, false, false),
        (1 << 16, Mix::Random, Bits::All, false, false),
        (1 << 16, Mix::Random, Bits::Empty, false, false),
        ((1 << 16) + 3, Mix::Random, Bits::Random(25), true, false),
        (100_003, Mix::Filecoin, Bits::Random(75), false, true),
        ((1 << 18) - 1000, Mix::Filecoin, Bits::None, false, false),
        (1 << 20, Mix::Random, Bits::None, false, false),
    ];
    if !quick {
        cases.push((1 << 22, Mix::Filecoin, Bits::Random(90), false, false));
        cases.push((1 << 24, Mix::Random, Bits::None, false, false));
    }
    for (n, mix, bits, same, inf) in cases {
        let r = check_msm::<P>(dev, s, t, n, mix, bits, same, inf);
        run(t, &format!("msm {} n={n}", P::NAME), r);
    }
    // Points streamed from the host (parameters larger than VRAM):
    // small chunks so most cases take many chunks.
    let mut streamed: Vec<(usize, Mix, Bits, usize)> = vec![
        (1, Mix::Random, Bits::None, 64 << 10),
        (1000, Mix::Edge, Bits::None, 64 << 10),
        (4097, Mix::Edge, Bits::Random(30), 64 << 10),
        (1 << 16, Mix::Random, Bits::Empty, 64 << 10),
        ((1 << 16) + 3, Mix::Random, Bits::Random(25), 256 << 10),
        (100_003, Mix::Filecoin, Bits::Random(75), 1 << 20),
        ((1 << 20) + 7, Mix::Random, Bits::None, 16 << 20),
    ];
    if !quick {
        streamed.push((1 << 22, Mix::Filecoin, Bits::Random(90), 64 << 20));
    }
    for (n, mix, bits, chunk) in streamed {
        let r = check_msm_from::<P>(dev, s, t, n, mix, bits, false, false, Some(chunk));
        run(t, &format!("msm {} streamed n={n}", P::NAME), r);
    }
}

/// The summary line; exits 1 when a check failed.
fn finish(t: &Table) {
    let fails = t.0.iter().filter(|r| !r.1).count();
    println!("\n{} checks, {} passed, {} failed", t.0.len(), t.0.len() - fails, fails);
    if fails > 0 {
        std::process::exit(1);
    }
}
