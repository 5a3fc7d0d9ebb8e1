//! gpu_bench's Pasta parts: `pasta-ntt` (NTTs over both Pasta scalar
//! fields) and `pallas` (Pallas MSMs 2^20..2^26, random scalars), each next
//! to a CPU peer in the same run - halo2_proofs' own `best_fft` and
//! `best_multiexp` on all cores (halo2 0.3, the pasta_curves 0.5 it uses).
//! `KILN_BENCH_NO_CPU=1` leaves the CPU peers out (they take minutes at 2^26).
use std::time::Instant;

use group::Curve;
use halo2_proofs::arithmetic::{best_fft, best_multiexp};
use kiln_gpu::{DeviceField, GpuDevice, GpuStream, NttDirection};
use pasta_curves::pallas;

use crate::common::pasta::{random_field, Chain};
use crate::common::rng;
use crate::time;

fn cpu_peers() -> bool {
    std::env::var("KILN_BENCH_NO_CPU").is_err()
}

/// Wall time of one call on the CPU, in ms.
fn cpu_ms(f: impl FnOnce()) -> f64 {
    let t0 = Instant::now();
    f();
    t0.elapsed().as_secs_f64() * 1e3
}

fn peer_row(what: &str, gpu_ms: f64, cpu: Option<f64>) {
    match cpu {
        Some(c) => println!("| {what} | {gpu_ms:.1} | {c:.1} | {:.1}x |", c / gpu_ms),
        None => println!("| {what} | {gpu_ms:.1} | - | - |"),
    }
}

fn header() {
    println!("\n| Pasta (GPU vs CPU peer: halo2_proofs 0.3 on {} threads) | GPU ms (median) | CPU ms | CPU / GPU |", rayon::current_num_threads());
    println!("| --- | --- | --- | --- |");
}

fn ntt_field<F: DeviceField>(dev: &GpuDevice, s: &GpuStream) {
    for log_n in [20u32, 22, 24, 26] {
        let n = 1usize << log_n;
        let x: Vec<F> = random_field(n, 1);
        let mut buf = dev.upload_scalars(s, &x).unwrap();
        let ms = time(s, 5, || dev.ntt(s, &mut buf, log_n, NttDirection::Forward, false).unwrap());
        let cpu = cpu_peers().then(|| {
            let mut y = x.clone();
            let w = kiln_gpu::root_of_unity_of::<F>(log_n);
            cpu_ms(|| best_fft(&mut y, w, log_n))
        });
        peer_row(&format!("{} NTT 2^{log_n}", F::NAME), ms, cpu);
    }
}

/// `pasta-ntt`: forward NTTs over Pasta Fp and Fq.
pub fn ntt(dev: &GpuDevice, s: &GpuStream) {
    header();
    ntt_field::<pasta_curves::Fp>(dev, s);
    ntt_field::<pasta_curves::Fq>(dev, s);
}

/// `pallas`: Pallas MSMs of random scalars (`KILN_BENCH_PALLAS_LOGS=20,24`
/// picks the sizes).
pub fn pallas_msm(dev: &GpuDevice, s: &GpuStream) {
    header();
    let logs: Vec<u32> = match std::env::var("KILN_BENCH_PALLAS_LOGS") {
        Ok(v) => v.split(',').map(|x| x.trim().parse().expect("KILN_BENCH_PALLAS_LOGS: log sizes")).collect(),
        Err(_) => vec![20, 22, 24, 26],
    };
    let Some(&max) = logs.iter().max() else { return };
    let max = 1usize << max;
    let points: Vec<pallas::Affine> = Chain::<pasta_curves::Fq>::new(&mut rng()).points::<pallas::Point>(max);
    let scalars: Vec<pasta_curves::Fq> = random_field(max, 3);
    let dp = dev.upload_points::<pallas::Point>(s, &points).unwrap();
    let sc = dev.upload_scalars(s, &scalars).unwrap();
    for log_n in logs {
        let n = 1usize << log_n;
        let mut got = pallas::Point::default();
        let ms = time(s, 3, || got = dev.msm(s, &dp, &sc, n, None).unwrap());
        let cpu = cpu_peers().then(|| {
            let mut want = pallas::Point::default();
            let t = cpu_ms(|| want = best_multiexp(&scalars[..n], &points[..n]));
            // The peer is also the check: a wrong GPU sum is not a timing.
            assert_eq!(got.to_affine(), want.to_affine(), "Pallas MSM 2^{log_n}: GPU and halo2 differ");
            t
        });
        peer_row(&format!("Pallas MSM 2^{log_n} random (c={})", dev.msm_window(n)), ms, cpu);
    }
}
