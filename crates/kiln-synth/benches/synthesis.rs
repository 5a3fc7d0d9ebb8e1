//! Ordinary synthesis against the compiled path, per built-in workload.
//!
//! `cargo bench -p kiln-synth --bench synthesis` (sizes: `KILN_BENCH_LOGS`,
//! default `16,20`). Buffers are allocated and touched outside the timed
//! part, as the engine's pool hands them out warm. The ordinary path follows
//! bellperson's `ProvingAssignment` step for step (same evaluation and
//! density rules), so it stands in for bellperson's synthesis, which that
//! crate does not expose on its own.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers, CompiledR1cs};

fn logs() -> Vec<u32> {
    std::env::var("KILN_BENCH_LOGS")
        .unwrap_or_else(|_| "16,20".into())
        .split(',')
        .map(|s| s.trim().parse().expect("KILN_BENCH_LOGS: comma-separated log2 sizes"))
        .collect()
}

fn bench(c: &mut Criterion) {
    for kind in [WorkloadKind::FilecoinLike, WorkloadKind::Dense] {
        for log in logs() {
            let circuit = SyntheticCircuit::filling_domain(kind, log, 4);
            let (first, r1cs) = CompiledR1cs::compile(circuit.with_witness(0), AssignmentBuffers::heap()).unwrap();
            let (n, aux) = (first.num_constraints, first.num_aux);
            drop(first);
            let mut g = c.benchmark_group(format!("synthesis/{}/2^{log}", kind.name()));
            g.sample_size(10);
            let mut seed = 1;
            let mut next = || {
                seed += 1;
                (circuit.with_witness(seed), AssignmentBuffers::heap_with_capacity(n, aux))
            };
            g.bench_function("ordinary", |b| {
                b.iter_batched(&mut next, |(c, bufs)| synthesize(c, bufs).unwrap(), BatchSize::PerIteration)
            });
            g.bench_function("compiled", |b| {
                b.iter_batched(&mut next, |(c, bufs)| r1cs.synthesize(c, bufs).unwrap(), BatchSize::PerIteration)
            });
            g.finish();
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
