//! GPU kernel timings next to their floors; `cargo xtask bench kernels`.
//! Each figure: median of several runs after a warm-up, CUDA events around
//! the call on its stream. Floors: 32x32->64 multiply-adds (256 per Fr
//! Montgomery product, 576 per Fp one) over 132 SMs x 64/clk x 1.98 GHz, and
//! bytes over 4.3 TB/s. The Pasta parts (`pasta-ntt`, `pallas`) print
//! their own table, each figure next to a CPU peer (pasta_bench).
mod common;
mod pasta_bench;

use blstrs::Scalar;
use common::*;
use kiln_gpu::{GpuDevice, GpuStream, NttDirection};

const IMAD_PER_S: f64 = 132.0 * 64.0 * 1.98e9;
const BYTES_PER_S: f64 = 4.3e12;

pub(crate) fn time(s: &GpuStream, reps: usize, mut f: impl FnMut()) -> f64 {
    f(); // warm-up (tables, module, allocator)
    let mut v: Vec<f64> = (0..reps).map(|_| {
        let a = s.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
        f();
        let b = s.record_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)).unwrap();
        b.synchronize().unwrap();
        a.elapsed_ms(&b).unwrap() as f64
    }).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn row(what: &str, ms: f64, imads: f64, bytes: f64, target: &str) {
    let fc = imads / IMAD_PER_S * 1e3;
    let fm = bytes / BYTES_PER_S * 1e3;
    println!("| {what} | {ms:.1} | {fc:.1} | {fm:.1} | {:.2}x | {target} |", ms / fc.max(fm));
}

fn main() {
    if GpuDevice::count() == 0 || !kiln_gpu::HAS_KERNELS {
        println!("no GPU: skipped");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let only = |k: &str| args.len() < 2 || args[1..].iter().any(|a| a == k);
    let dev = GpuDevice::open(0).unwrap();
    let info = dev.info().clone();
    let s = dev.new_stream().unwrap();
    println!("device: {} ({} SMs, {} MiB)", info.name, info.sm_count, info.total_memory >> 20);
    println!("| what | ms (median) | floor: IMAD ms | floor: bytes ms | x floor | target |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let fr_mul = 256.0;
    if only("ntt") {
        for log_n in [20u32, 22, 24, 26, 27] {
            let n = 1usize << log_n;
            let mut buf = dev.upload_scalars(&s, &random_scalars(n, 1)).unwrap();
            let ms = time(&s, 5, || dev.ntt(&s, &mut buf, log_n, NttDirection::Forward, false).unwrap());
            let passes = kiln_gpu::host::plan_passes(log_n).len() as f64 + 1.0; // + bit reversal
            row(&format!("Fr NTT 2^{log_n}"), ms, (n / 2) as f64 * log_n as f64 * fr_mul, passes * 64.0 * n as f64, if log_n == 27 { "<= 40 ms" } else { "" });
        }
    }
    if only("h") {
        let log_m = 27u32;
        let m = 1usize << log_m;
        let x = random_scalars(m, 2);
        let mut a = dev.upload_scalars(&s, &x).unwrap();
        let mut b = dev.upload_scalars(&s, &x).unwrap();
        let mut c = dev.upload_scalars(&s, &x).unwrap();
        let ms = time(&s, 3, || dev.h_pipeline(&s, &mut a, &mut b, &mut c, m - 1000, log_m).unwrap());
        let passes = 7.0 * kiln_gpu::host::plan_passes(log_m).len() as f64 + 4.0 + 1.0;
        row("H pipeline 2^27", ms, 7.0 * (m / 2) as f64 * log_m as f64 * fr_mul, passes * 64.0 * m as f64, "<= 200 ms");
    }
    let fp_mul = 576.0;
    for g2 in [false, true] {
        if !only(if g2 { "g2" } else { "g1" }) {
            continue;
        }
        // KILN_BENCH_MSM_LOGS=24,26 times those sizes instead (variant
        // sweeps; small sizes show the fixed cost of a call); an entry
        // above 40 is a count of scalars, not a log (10007508: a SnapDeals
        // partition's aux).
        let all: &[u32] = if g2 { &[20, 22, 24] } else { &[20, 22, 24, 26] };
        let sizes: Vec<usize> = match std::env::var("KILN_BENCH_MSM_LOGS") {
            Ok(v) => v.split(',').map(|x| x.trim().parse::<usize>().expect("KILN_BENCH_MSM_LOGS: log sizes or counts")).map(|x| if x > 40 { x } else { 1 << x }).collect(),
            Err(_) => all.iter().map(|&l| 1usize << l).collect(),
        };
        let Some(&max) = sizes.iter().max() else { continue };
        let chain = ChainPoints::new(&mut rng());
        let (p1, p2) = if g2 { (None, Some(dev.upload_points::<blstrs::G2Projective>(&s, &chain.g2(max)).unwrap())) } else { (Some(dev.upload_points::<blstrs::G1Projective>(&s, &chain.g1(max)).unwrap()), None) };
        let scal = random_scalars(max, 3);
        let sc = dev.upload_scalars(&s, &scal).unwrap();
        for &n in &sizes {
            let size = if n.is_power_of_two() { format!("2^{}", n.trailing_zeros()) } else { n.to_string() };
            let ms = time(&s, 3, || {
                if g2 { dev.msm(&s, p2.as_ref().unwrap(), &sc, n, None).unwrap(); } else { dev.msm(&s, p1.as_ref().unwrap(), &sc, n, None).unwrap(); }
            });
            let c = dev.msm_window(n);
            let w = kiln_gpu::host::msm_windows(c) as f64;
            // 10 field products per mixed addition; Fp2 products are 3 Fp ones.
            let per_add = 10.0 * fp_mul * if g2 { 3.0 } else { 1.0 };
            let pt = if g2 { 192.0 } else { 96.0 };
            let target = match (g2, n) { (false, 0x400_0000) => "<= 350 ms", (true, 0x100_0000) => "<= 400 ms", _ => "" };
            row(&format!("{} MSM {size} random (c={c})", if g2 { "G2" } else { "G1" }), ms, w * n as f64 * per_add, n as f64 * (pt + 32.0), target);
        }
        if !g2 && max == 1 << 26 {
            // Filecoin-like: 40% zero, 50% one, 10% random.
            let n = max;
            let fil: Vec<Scalar> = scal.iter().enumerate().map(|(i, x)| match i % 10 { 0..=3 => Scalar::from(0u64), 4..=8 => Scalar::from(1u64), _ => *x }).collect();
            let fsc = dev.upload_scalars(&s, &fil).unwrap();
            let ms = time(&s, 3, || { dev.msm(&s, p1.as_ref().unwrap(), &fsc, n, None).unwrap(); });
            row("G1 MSM 2^26 Filecoin-like (40% 0, 50% 1)", ms, 0.0, n as f64 * 128.0, "");
        }
    }
    if only("pasta-ntt") {
        pasta_bench::ntt(&dev, &s);
    }
    if only("pallas") {
        pasta_bench::pallas_msm(&dev, &s);
    }
}
