//! Measures what guarding parameter files costs (docs/RELIABILITY.md,
//! "Parameter files"): decoding a section read with `pread` (what
//! `ParamsFile` does) against decoding it straight from a mapping (what it
//! did before, which a truncation turns into a SIGBUS), and one `fstat`.
//!
//! `cargo run --release -p kiln-groth16 --example params_read -- [log2 points]`

use std::io::Write;
use std::time::{Duration, Instant};

use blstrs::{G1Affine, Scalar};
use group::prime::PrimeCurveAffine;
use kiln_groth16::{setup, ParamsFile, Section};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use rand::SeedableRng;
use rayon::prelude::*;

fn main() {
    let log: u32 = std::env::args().nth(1).map_or(20, |a| a.parse().expect("log2 of the points"));
    let n = 1usize << log;
    // A small key's verifying key, then an L section of n copies of the
    // generator (valid points: decoding costs what it costs on real ones).
    let c = SyntheticCircuit { kind: WorkloadKind::Dense, constraints: 4, inputs: 1, structure_seed: 0, witness_seed: None };
    let p = setup::generate(c, &mut rand_chacha::ChaCha8Rng::seed_from_u64(1)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.params");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    p.vk.write(&mut f).unwrap();
    let g = G1Affine::generator().to_uncompressed();
    f.write_all(&0u32.to_be_bytes()).unwrap(); // h
    f.write_all(&(n as u32).to_be_bytes()).unwrap(); // l
    for _ in 0..n {
        f.write_all(&g).unwrap();
    }
    for _ in 0..3 {
        f.write_all(&0u32.to_be_bytes()).unwrap(); // a, b_g1, b_g2
    }
    f.flush().unwrap();
    drop(f);
    let params = ParamsFile::open(&path).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: a private temporary file nothing else writes.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let offset = map.len() - 12 - n * 96;
    let chunk = 1 << 20;
    let mut out = Vec::new();
    let best = |f: &mut dyn FnMut()| (0..5).map(|_| time(&mut *f)).min().unwrap();
    let pread = best(&mut || {
        for s in (0..n).step_by(chunk) {
            params.g1_points(Section::L, s..(s + chunk).min(n), &mut out).unwrap();
        }
    });
    let mut out2: Vec<G1Affine> = Vec::new();
    let mapped = best(&mut || {
        for s in (0..n).step_by(chunk) {
            let raw = &map[offset + s * 96..offset + (s + chunk).min(n) * 96];
            out2.clear();
            out2.resize(raw.len() / 96, G1Affine::default());
            out2.par_chunks_mut(4096).zip(raw.par_chunks(4096 * 96)).for_each(|(d, r)| {
                for (p, b) in d.iter_mut().zip(r.chunks(96)) {
                    *p = Option::from(G1Affine::from_uncompressed_unchecked(b.try_into().unwrap())).unwrap();
                }
            });
        }
    });
    assert_eq!(out.last(), out2.last());
    let copy_only = best(&mut || {
        let mut buf = vec![0u8; chunk.min(n) * 96];
        for s in (0..n).step_by(chunk) {
            let len = ((s + chunk).min(n) - s) * 96;
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf[..len], (offset + s * 96) as u64).unwrap();
        }
    });
    let scalars: Vec<Scalar> = {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(2);
        (0..out.len()).map(|_| <Scalar as ff::Field>::random(&mut r)).collect()
    };
    let msm = time(&mut || {
        std::hint::black_box(kiln_groth16::msm::msm_g1(&out, &scalars));
    });
    let stats = 100_000;
    let t = Instant::now();
    for _ in 0..stats {
        params.check_unchanged().unwrap();
    }
    let fstat = t.elapsed() / stats;
    println!("{n} G1 points ({} MiB), {} threads, best of 5:", (n * 96) >> 20, rayon::current_num_threads());
    println!("  decode from the mapping:      {:>8.1?}  ({:.0} Mpoints/s)", mapped, rate(n, mapped));
    println!("  decode via pread (ParamsFile): {:>8.1?}  ({:.0} Mpoints/s)", pread, rate(n, pread));
    println!("  pread alone, 96 MiB chunks:   {:>8.1?}", copy_only);
    println!("  one fstat check:              {:>8.1?}", fstat);
    println!("  the CPU MSM over the last chunk ({} random scalars): {:.1?}", scalars.len(), msm);
}

fn time(f: &mut dyn FnMut()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64() / 1e6
}
