//! The products of a partition shaped like a 32 GiB PoRep one (130,278,869
//! rows in a 2^27 domain, 130,169,893 aux, 328 inputs; A 2.4, B 1.0 and
//! C 2.2 terms a row; 90 % of the coefficients 1 or -1, the rest from a
//! table of 300, so 2-byte ids; 90 % of the aux values bits), timed against
//! the floor of moving its bytes once at the device-to-device copy rate
//! measured here. Twice: with columns mostly near the row's own variables
//! (what a circuit's gadgets give: 90 % among the 4096 variables allocated
//! just before the row's place, 10 % anywhere) and with every column
//! anywhere (no locality at all, the worst case for the gathers). Then
//! once more with local columns and the long rows real PoRep matrices have
//! (`Packed`): a run of 12 rows in every 4096 whose A rows are ONE and 256
//! bits (928 in the first), the first 4 of which have C rows of 256 bits,
//! all with general coefficients (the 2^k of a bit packing): 0.29 % of
//! A's rows holding ~120 M terms, 0.1 % of C's holding ~33 M. A 32 GiB PoRep partition cut to one challenge has
//! 0.30 % rows longer than 32 terms, up to 929 in A and 256 in C, a median
//! of 4 rows apart; they hold 36 % of A's terms and 11 % of C's.

use std::time::Duration;

use blstrs::Scalar;
use ff::Field;
use kiln_gpu::{DeviceSpan, GpuDevice, GpuError, GpuStream, HostMatrix, HostR1cs, R1CS_INPUT_BIT};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::host_row;
use crate::common::random_scalars;
use crate::Table;

const ROWS: usize = 130_278_869;
const AUX: usize = 130_169_893;
const INPUTS: usize = 328;
const LOG_DOMAIN: u32 = 27;
const TABLE: usize = 300;
const TARGET: Duration = Duration::from_millis(30);
/// Rows generated per task.
const CHUNK: usize = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Columns {
    Local,
    Uniform,
    /// Local, with runs of long bit-packing rows.
    Packed,
}

/// Of every PACKED_EVERY rows, the first PACKED_RUN are packings (`Packed`).
const PACKED_EVERY: usize = 4096;
const PACKED_RUN: usize = 12;

/// One matrix: (row offsets, terms). `kind` 0, 1, 2 for A, B, C.
fn matrix(kind: usize, cols: Columns, seed: u64) -> (Vec<u32>, Vec<[u32; 2]>) {
    let parts: Vec<(Vec<u32>, Vec<[u32; 2]>)> = (0..ROWS.div_ceil(CHUNK))
        .into_par_iter()
        .map(|k| {
            let mut r = ChaCha8Rng::seed_from_u64(seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ kind as u64);
            let rows = k * CHUNK..((k + 1) * CHUNK).min(ROWS);
            let mut counts = Vec::with_capacity(rows.len());
            let mut terms = Vec::with_capacity(rows.len() * 3);
            for row in rows {
                let place = (row as u64 * AUX as u64 / ROWS as u64) as u32;
                let aux = |r: &mut ChaCha8Rng| match cols {
                    Columns::Local | Columns::Packed if r.gen_bool(0.9) => place.saturating_sub(r.gen_range(0..4096)),
                    _ => r.gen_range(0..AUX as u32),
                };
                let run = row % PACKED_EVERY;
                if cols == Columns::Packed && ((kind == 0 && run < PACKED_RUN) || (kind == 2 && run < PACKED_RUN / 3)) {
                    // A: ONE x constant + 256 bits (928 in one row of the
                    // run); C: 256 bits; 2^k coefficients.
                    let before = terms.len();
                    if kind == 0 {
                        terms.push([R1CS_INPUT_BIT, r.gen_range(2..TABLE as u32)]);
                    }
                    let bits = if kind == 0 && run == 0 { 928 } else { 256 };
                    let base = place.saturating_sub(bits);
                    terms.extend((0..bits).map(|k| [base + k, r.gen_range(2..TABLE as u32)]));
                    counts.push((terms.len() - before) as u32);
                    continue;
                }
                let id = |r: &mut ChaCha8Rng| match r.gen_range(0..20) {
                    0..=10 => 0,
                    11..=17 => 1,
                    _ => r.gen_range(2..TABLE as u32),
                };
                let before = terms.len();
                let n = match kind {
                    0 => 2 + usize::from(r.gen_bool(0.4)),
                    2 => 2 + usize::from(r.gen_bool(0.2)),
                    _ => match r.gen_range(0..8) {
                        0 => 0,
                        1 => 2,
                        _ => 1,
                    },
                };
                if kind == 1 && n > 0 && r.gen_bool(0.66) {
                    // B = ONE (a linear constraint) or ONE - b (booleanity).
                    terms.push([R1CS_INPUT_BIT, 0]);
                }
                while terms.len() - before < n {
                    let col = if r.gen_bool(0.001) { R1CS_INPUT_BIT | r.gen_range(1..INPUTS as u32) } else { aux(&mut r) };
                    terms.push([col, id(&mut r)]);
                }
                counts.push(n as u32);
            }
            (counts, terms)
        })
        .collect();
    let mut starts = Vec::with_capacity(ROWS + 1);
    starts.push(0u32);
    let mut terms = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
    for (counts, t) in parts {
        for c in counts {
            starts.push(starts.last().unwrap() + c);
        }
        terms.extend_from_slice(&t);
    }
    (starts, terms)
}

/// Device-to-device copy rate, counting bytes read and written (median of 5 copies of 4 GiB).
fn copy_rate(dev: &GpuDevice, s: &GpuStream) -> Result<f64, GpuError> {
    let n = 1usize << 29;
    let src = dev.alloc_scalars(s, n / 4)?;
    let mut dst = dev.alloc_scalars(s, n / 4)?;
    let mut times = Vec::new();
    for _ in 0..6 {
        let span = DeviceSpan::begin(s)?;
        dev.copy_scalars(s, &src, &mut dst)?;
        times.push(span.end()?);
    }
    times.remove(0);
    times.sort();
    Ok(2.0 * (n * 8) as f64 / times[times.len() / 2].as_secs_f64())
}

pub(crate) fn time(dev: &GpuDevice, s: &GpuStream, t: &mut Table) -> Result<(), GpuError> {
    let rate = copy_rate(dev, s)?;
    println!("device-to-device copy: {:.0} GB/s (read + write)", rate / 1e9);
    let mut coeffs = vec![Scalar::ONE, -Scalar::ONE];
    coeffs.extend(random_scalars(TABLE - 2, rand::random()));
    let mut inputs = random_scalars(INPUTS, rand::random());
    inputs[0] = Scalar::ONE;
    let aux: Vec<Scalar> = {
        let rnd = random_scalars(AUX, rand::random());
        rnd.into_par_iter().map(|x| if x.to_bytes_le()[0] < 230 { Scalar::from(u64::from(x.to_bytes_le()[1] & 1)) } else { x }).collect()
    };
    let din = dev.upload_scalars(s, &inputs)?;
    let daux = dev.upload_scalars(s, &aux)?;
    let domain = 1usize << LOG_DOMAIN;
    for cols in [Columns::Local, Columns::Uniform, Columns::Packed] {
        let t0 = std::time::Instant::now();
        let seed: u64 = rand::random();
        let mats: Vec<_> = (0..3).map(|k| matrix(k, cols, seed)).collect();
        let m = |k: usize| HostMatrix { row_start: &mats[k].0, terms: &mats[k].1 };
        let host = HostR1cs { num_inputs: INPUTS, num_aux: AUX, coeffs: &coeffs, matrices: [m(0), m(1), m(2)] };
        let made = t0.elapsed();
        let t1 = std::time::Instant::now();
        let dm = dev.upload_r1cs(s, &host)?;
        let uploaded = t1.elapsed();
        let (mut a, mut b, mut c) = (dev.alloc_scalars(s, domain)?, dev.alloc_scalars(s, domain)?, dev.alloc_scalars(s, domain)?);
        let mut times = Vec::new();
        let mut bad = None;
        for _ in 0..8 {
            let span = DeviceSpan::begin(s)?;
            bad = dev.r1cs_products_into(s, &dm, &din, &daux, [&mut a, &mut b, &mut c])?;
            times.push(span.end()?);
        }
        times.remove(0); // warm-up
        times.sort();
        let median = times[times.len() / 2];
        // Correctness at this size: a million random rows, the launch
        // boundaries and the ends, and the first bad row (a random witness
        // fails early), against the term-by-term reference.
        let got = [dev.download_scalars(s, &a)?, dev.download_scalars(s, &b)?, dev.download_scalars(s, &c)?];
        let mut rows: Vec<usize> = (0..1_000_000).map(|k| (k * 7919 + 13) * 1_000_003 % ROWS).collect();
        rows.extend((1..32).flat_map(|k| [k << 22, (k << 22) - 1]).filter(|&r| r < ROWS));
        rows.extend([0, 1, ROWS - 1]);
        let ok_rows = rows.par_iter().all(|&r| (0..3).all(|k| got[k][r] == host_row(&host, k, r, &inputs, &aux)));
        let tail_zero = (ROWS..domain).into_par_iter().all(|r| got.iter().all(|v| v[r].is_zero_vartime()));
        let want_bad = (0..ROWS).find(|&r| {
            let [x, y, z] = [0, 1, 2].map(|k| host_row(&host, k, r, &inputs, &aux));
            x * y != z
        });
        let matrix_bytes = dm.device_bytes() as f64;
        let all_bytes = matrix_bytes + (AUX * 32 + 3 * domain * 32) as f64;
        let floor = |bytes: f64| Duration::from_secs_f64(bytes / rate);
        let detail = format!(
            "median {:.2} ms (min {:.2}, max {:.2}); floor: matrices once {:.2} ms, + aux once + a/b/c written {:.2} ms; target <= {} ms {}; {} terms, {:.2} GB of matrices; made {:.1} s, uploaded {:.1} s; bad row {bad:?}, cpu {want_bad:?}",
            median.as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
            floor(matrix_bytes).as_secs_f64() * 1e3,
            floor(all_bytes).as_secs_f64() * 1e3,
            TARGET.as_millis(),
            if median <= TARGET { "met" } else { "MISSED" },
            host.nnz(),
            matrix_bytes / 1e9,
            made.as_secs_f64(),
            uploaded.as_secs_f64(),
        );
        t.row(format!("abc porep-shaped 2^27 {cols:?} columns"), ok_rows && tail_zero && bad == want_bad, detail);
    }
    Ok(())
}
