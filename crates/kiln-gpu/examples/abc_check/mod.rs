//! `gpu_check --abc-only`: constraint evaluation on the device
//! (`upload_r1cs` + `r1cs_products`) against the CPU, and its time on a
//! PoRep-shaped partition against the memory floor.
//!
//! Correctness: compiled circuits from kiln-synth (dense with random
//! coefficients: 1-, 2- and 4-byte ids; Filecoin-like; 1 row, odd sizes,
//! 0..17 inputs) give exactly ordinary synthesis's a/b/c (and zeros up to
//! the domain) with no bad row; a corrupted witness gives kiln-synth's
//! CPU products and its first bad row; witnesses of edge values (0, 1,
//! r-1, 2) and hand-made matrices (a 100k-term row, empty rows, the id
//! width boundaries, the last aux column) agree with a term-by-term
//! reference. Time: a partition shaped like a 32 GiB PoRep one, timed
//! with CUDA events (median of 7), beside the floor of moving its bytes
//! once at the device-to-device copy rate measured in the same run.

mod porep;

use blstrs::Scalar;
use ff::Field;
use kiln_gpu::{GpuDevice, GpuError, GpuStream, HostMatrix, HostR1cs, R1CS_INPUT_BIT};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers, CompiledR1cs};
use rand::Rng;
use rayon::prelude::*;

use super::Table;
use crate::common::{random_scalars, rng};

/// The device form of a compiled circuit's matrices.
fn host_r1cs(r: &CompiledR1cs) -> HostR1cs<'_> {
    let shape = r.shape();
    let matrices = r.matrices().map(|m| HostMatrix { row_start: m.row_start, terms: m.terms });
    HostR1cs { num_inputs: shape.num_inputs, num_aux: shape.num_aux, coeffs: r.coefficients(), matrices }
}

/// Row `row` of matrix `m`, term by term (the reference for hand-made matrices).
pub(crate) fn host_row(r: &HostR1cs, m: usize, row: usize, inputs: &[Scalar], aux: &[Scalar]) -> Scalar {
    let mat = &r.matrices[m];
    mat.terms[mat.row_start[row] as usize..mat.row_start[row + 1] as usize].iter().fold(Scalar::ZERO, |acc, &[col, id]| {
        let v = if col & R1CS_INPUT_BIT != 0 { inputs[(col ^ R1CS_INPUT_BIT) as usize] } else { aux[col as usize] };
        acc + v * r.coeffs[id as usize]
    })
}

/// Device a/b/c over `domain` and the first bad row, for witness (inputs, aux).
fn device_products(dev: &GpuDevice, s: &GpuStream, r: &HostR1cs, inputs: &[Scalar], aux: &[Scalar], domain: usize) -> Result<([Vec<Scalar>; 3], Option<usize>), GpuError> {
    let m = dev.upload_r1cs(s, r)?;
    let din = dev.upload_scalars(s, &pad1(inputs))?;
    let daux = dev.upload_scalars(s, &pad1(aux))?;
    let p = dev.r1cs_products(s, &m, &din, &daux, domain)?;
    let abc = [dev.download_scalars(s, &p.a)?, dev.download_scalars(s, &p.b)?, dev.download_scalars(s, &p.c)?];
    Ok((abc, p.first_unsatisfied))
}

/// Device vectors are never empty.
fn pad1(v: &[Scalar]) -> Vec<Scalar> {
    if v.is_empty() { vec![Scalar::ZERO] } else { v.to_vec() }
}

/// The first `n` of each vector are `want`'s, the rest (up to the domain) zero.
fn same(got: &[Vec<Scalar>; 3], want: [&[Scalar]; 3]) -> bool {
    got.iter().zip(want).all(|(g, w)| g.len() >= w.len() && &g[..w.len()] == w && g[w.len()..].iter().all(|x| x.is_zero_vartime()))
}

/// kiln-synth's CPU products and first bad row for a witness.
fn cpu_products(r1cs: &CompiledR1cs, inputs: &[Scalar], aux: &[Scalar]) -> ([Vec<Scalar>; 3], Option<usize>) {
    let n = r1cs.num_constraints();
    let mut abc = [vec![Scalar::ZERO; n], vec![Scalar::ZERO; n], vec![Scalar::ZERO; n]];
    let [a, b, c] = &mut abc;
    let bad = r1cs.products_checked(0, inputs, aux, [a, b, c]);
    (abc, bad)
}

fn compiled_case(dev: &GpuDevice, s: &GpuStream, t: &mut Table, kind: WorkloadKind, constraints: usize, inputs: usize) -> Result<(), GpuError> {
    let circuit = SyntheticCircuit { kind, constraints, inputs, structure_seed: rand::random(), witness_seed: None };
    let (_, r1cs) = CompiledR1cs::compile(circuit.with_witness(rand::random()), AssignmentBuffers::heap()).expect("compile");
    let plain = synthesize(circuit.with_witness(rand::random()), AssignmentBuffers::heap()).expect("synthesize");
    let host = host_r1cs(&r1cs);
    let domain = plain.shape().domain();
    let label = format!("abc {} n={} inputs={} ids={:?}", kind.name(), plain.num_constraints, inputs, host.id_width());
    let (got, bad) = device_products(dev, s, &host, &plain.input, plain.aux(), domain)?;
    t.row(label.clone(), same(&got, [plain.a(), plain.b(), plain.c()]) && bad.is_none(), format!("domain 2^{}, {} terms, bad row {bad:?}", domain.trailing_zeros(), host.nnz()));
    // One aux value changed (or an input, when there is no aux): the CPU's
    // products and first bad row.
    let (mut input, mut aux) = (plain.input.clone(), plain.aux().to_vec());
    match aux.len() {
        0 => input[0] += Scalar::ONE,
        n => aux[rng().gen_range(0..n)] += Scalar::ONE,
    }
    let (want, want_bad) = cpu_products(&r1cs, &input, &aux);
    let (got, bad) = device_products(dev, s, &host, &input, &aux, domain)?;
    t.row(format!("{label} corrupted"), same(&got, [&want[0], &want[1], &want[2]]) && bad == want_bad, format!("bad row {bad:?}, cpu {want_bad:?}"));
    Ok(())
}

/// Edge values: a compiled circuit's matrices over inputs and aux drawn
/// from 0, 1, r-1, 2 and random values.
fn edge_case(dev: &GpuDevice, s: &GpuStream, t: &mut Table, kind: WorkloadKind, log: u32) -> Result<(), GpuError> {
    let circuit = SyntheticCircuit::filling_domain(kind, log, 5);
    let (_, r1cs) = CompiledR1cs::compile(circuit.with_witness(1), AssignmentBuffers::heap()).expect("compile");
    let shape = r1cs.shape();
    let mut r = rng();
    let mut edge = |n: usize| -> Vec<Scalar> {
        (0..n).map(|_| match r.gen_range(0..5) { 0 => Scalar::ZERO, 1 => Scalar::ONE, 2 => -Scalar::ONE, 3 => Scalar::from(2u64), _ => Scalar::random(&mut r) }).collect()
    };
    let (inputs, aux) = (edge(shape.num_inputs), edge(shape.num_aux));
    let (want, want_bad) = cpu_products(&r1cs, &inputs, &aux);
    let (got, bad) = device_products(dev, s, &host_r1cs(&r1cs), &inputs, &aux, shape.domain())?;
    t.row(format!("abc edge values {} 2^{log}", kind.name()), same(&got, [&want[0], &want[1], &want[2]]) && bad == want_bad, format!("bad row {bad:?}, cpu {want_bad:?}"));
    Ok(())
}

/// Hand-made matrices: `rows` rows, row 0 of `long` terms, every 7th row
/// empty, the rest 1-4 terms over the whole witness (the last aux column
/// included) with ids drawn from a table of `table` coefficients, half of
/// them 1 or -1.
fn handmade_case(dev: &GpuDevice, s: &GpuStream, t: &mut Table, rows: usize, long: usize, table: usize) -> Result<(), GpuError> {
    let (num_inputs, num_aux) = (3usize, rows + 11);
    let mut r = rng();
    let mut coeffs = vec![Scalar::ONE, -Scalar::ONE];
    coeffs.extend(random_scalars(table - 2, rand::random()));
    let term = |r: &mut rand_chacha::ChaCha20Rng| {
        let col = if r.gen_bool(0.1) { r.gen_range(0..num_inputs as u32) | R1CS_INPUT_BIT } else if r.gen_bool(0.01) { num_aux as u32 - 1 } else { r.gen_range(0..num_aux as u32) };
        let id = if r.gen_bool(0.5) { r.gen_range(0..2) } else { r.gen_range(0..table as u32) };
        [col, id]
    };
    let mut mats: Vec<(Vec<u32>, Vec<[u32; 2]>)> = Vec::new();
    for _ in 0..3 {
        let (mut starts, mut terms) = (vec![0u32], Vec::new());
        for row in 0..rows {
            let k = if row == 0 { long } else if row % 7 == 3 { 0 } else { r.gen_range(1..5) };
            terms.extend((0..k).map(|_| term(&mut r)));
            starts.push(terms.len() as u32);
        }
        mats.push((starts, terms));
    }
    let m = |i: usize| HostMatrix { row_start: &mats[i].0, terms: &mats[i].1 };
    let host = HostR1cs { num_inputs, num_aux, coeffs: &coeffs, matrices: [m(0), m(1), m(2)] };
    let (inputs, aux) = (random_scalars(num_inputs, rand::random()), random_scalars(num_aux, rand::random()));
    let domain = rows.next_power_of_two();
    let (got, bad) = device_products(dev, s, &host, &inputs, &aux, domain)?;
    let want: Vec<Vec<Scalar>> = (0..3).map(|k| (0..rows).into_par_iter().map(|row| host_row(&host, k, row, &inputs, &aux)).collect()).collect();
    let want_bad = (0..rows).find(|&i| want[0][i] * want[1][i] != want[2][i]);
    let ok = same(&got, [&want[0], &want[1], &want[2]]) && bad == want_bad;
    t.row(format!("abc handmade rows={rows} long={long} table={table} ids={:?}", host.id_width()), ok, format!("bad row {bad:?}, cpu {want_bad:?}"));
    Ok(())
}

/// Every case; `quick` leaves out the largest and the PoRep-shaped timing.
pub(crate) fn run(dev: &GpuDevice, s: &GpuStream, t: &mut Table, quick: bool) {
    let report = |t: &mut Table, name: String, r: Result<(), GpuError>| {
        if let Err(e) = r {
            t.row(name, false, format!("error: {e}"));
        }
    };
    let mut cases = vec![
        (WorkloadKind::Dense, 0, 0), // 1 row: ONE's `x * 0 = 0`
        (WorkloadKind::Dense, 1, 1),
        (WorkloadKind::Dense, 3, 2),
        (WorkloadKind::Dense, 37, 0),
        (WorkloadKind::Dense, 1000, 3),
        (WorkloadKind::Dense, 4097, 17),
        (WorkloadKind::Dense, (1 << 14) + 1, 1),
        (WorkloadKind::FilecoinLike, 0, 1),
        (WorkloadKind::FilecoinLike, 5, 0),
        (WorkloadKind::FilecoinLike, 1001, 4),
        (WorkloadKind::FilecoinLike, (1 << 16) + 3, 2),
        (WorkloadKind::FilecoinLike, (1 << 20) - 5, 17),
    ];
    if !quick {
        cases.push((WorkloadKind::Dense, (1 << 18) - 3, 2));
        cases.push((WorkloadKind::FilecoinLike, (1 << 22) + 1, 3));
    }
    for (kind, n, inputs) in cases {
        let r = compiled_case(dev, s, t, kind, n, inputs);
        report(t, format!("abc {} n={n}", kind.name()), r);
    }
    for (kind, log) in [(WorkloadKind::Dense, 10), (WorkloadKind::FilecoinLike, 12), (WorkloadKind::FilecoinLike, 17)] {
        let r = edge_case(dev, s, t, kind, log);
        report(t, format!("abc edge {} 2^{log}", kind.name()), r);
    }
    for (rows, long, table) in [(1, 1, 2), (2, 100_000, 256), (1000, 5000, 257), (70_001, 100_000, 65_536), (5000, 300, 65_537)] {
        let r = handmade_case(dev, s, t, rows, long, table);
        report(t, format!("abc handmade rows={rows}"), r);
    }
    if !quick {
        let r = porep::time(dev, s, t);
        report(t, "abc porep-shaped".into(), r);
    }
}
