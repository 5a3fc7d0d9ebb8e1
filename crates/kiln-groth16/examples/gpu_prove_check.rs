//! GPU backend check: prove random circuits of several sizes and both
//! witness shapes on the GPU, verify every proof, check that for the same
//! r, s the GPU proof equals the CPU proof bit for bit (small sizes), and
//! time the steady state. Each size runs twice on the same parameters,
//! synthesized as the engine does (compiled): a/b/c computed on the host
//! beside the witness and copied up ("host"), then left to the prover
//! ("gpu": only the witness is copied, and a/b/c are evaluated and checked
//! on the GPU from the circuit's matrices in VRAM); each row gives the
//! synthesis time beside the proving time. Skips (exit 0) without a GPU or
//! kernels.
//!
//! `gpu_prove_check [log sizes, default 10,12,14,16,18,20,22] [proofs per size, default 3]`
//!
//! `KILN_SRS_VRAM_BYTES=N` caps the VRAM parameters may take (0: every
//! section is streamed from the host) and `KILN_STREAM_CHUNK_BYTES=N` sets
//! the streaming chunk, to check and time the streamed path;
//! `KILN_COMPARE_STREAMED=1` times each size resident, then streamed;
//! `KILN_MATRIX_VRAM_BYTES=N` caps the VRAM of the circuit's matrices (0:
//! "gpu" rows evaluate a/b/c on the host and upload them).

use std::sync::Arc;
use std::time::Instant;

use kiln_groth16::{finish, prove_start, setup, CpuBackend, GpuBackend, GpuContext, ParamsFile, ProverBackend, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{Assignment, AssignmentBuffers, CircuitCache};
use rand::SeedableRng;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let logs: Vec<u32> = args
        .get(1)
        .map(|s| s.split(',').map(|x| x.parse().expect("log size")).collect())
        .unwrap_or_else(|| vec![10, 12, 14, 16, 18, 20, 22]);
    let proofs: usize = args.get(2).map(|s| s.parse().expect("proof count")).unwrap_or(3);
    if kiln_gpu::GpuDevice::count() == 0 {
        println!("no GPU: skipped");
        return;
    }
    let ctx = match GpuContext::open(0) {
        Ok(c) => c,
        Err(e) => {
            println!("GPU present but unusable ({e}): skipped");
            return;
        }
    };
    let env_bytes = |k: &str| std::env::var(k).ok().map(|v| v.parse::<u64>().unwrap_or_else(|_| panic!("{k} must be a byte count")));
    let vram_limit = env_bytes("KILN_SRS_VRAM_BYTES");
    ctx.set_srs_vram_limit(vram_limit);
    ctx.set_matrix_vram_limit(env_bytes("KILN_MATRIX_VRAM_BYTES"));
    let compare_streamed = std::env::var_os("KILN_COMPARE_STREAMED").is_some();
    if let Some(c) = env_bytes("KILN_STREAM_CHUNK_BYTES") {
        ctx.set_stream_chunk_bytes(c as usize);
    }
    let info = ctx.device().info().clone();
    println!("device: {} ({} SMs), {} rayon threads", info.name, info.sm_count, rayon::current_num_threads());
    let gpu = GpuBackend::new(&ctx, 0).expect("GPU worker");
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut failures = 0;
    let cache = CircuitCache::unbounded();
    println!("| circuit | a/b/c | params gen s | equal to CPU | verified | synthesis ms (median) | GPU prove ms (median) | phases of the last proof (ms) |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for kind in [WorkloadKind::FilecoinLike, WorkloadKind::Dense] {
        for &log in &logs {
            let shape = SyntheticCircuit::filling_domain(kind, log, 4);
            let t = Instant::now();
            let params = Arc::new(ParamsFile::from_parameters(&setup::generate(shape, &mut rng).expect("params")));
            let gen_s = t.elapsed().as_secs_f64();
            let p = params.shape();
            let key = format!("{}-{log}", kind.name());
            // Compiled synthesis, as the engine runs it: a/b/c on the host
            // (beside the witness) or left to the GPU; and its wall time.
            let synth = |seed: u64, on_gpu: bool| -> (Assignment, f64) {
                let sctx = cache.context(&key, usize::MAX);
                let t = Instant::now();
                let asg = match cache.compiled(&key).filter(|_| on_gpu) {
                    Some(r1cs) => sctx.with_deferred_products(&r1cs).synthesize(|| Ok(shape.with_witness(seed)), AssignmentBuffers::heap_with_capacity(0, p.l_len)),
                    None => sctx.synthesize(|| Ok(shape.with_witness(seed)), AssignmentBuffers::heap_with_capacity(p.domain(), p.l_len)),
                };
                (asg.expect("synthesis"), t.elapsed().as_secs_f64() * 1e3)
            };
            synth(0, false); // records the circuit
            for on_gpu in [false, true] {
                let mut equal = "-".to_string();
                if log <= 16 {
                    let rs = Randomness::random(&mut rng);
                    let run = |b: &dyn ProverBackend, on_gpu: bool| prove_start(b, &params, synth(77, on_gpu).0, rs).and_then(finish);
                    match (run(&gpu, on_gpu), run(&CpuBackend, false)) {
                        (Ok(g), Ok(cpu)) => {
                            let same = g.proof == cpu.proof;
                            failures += usize::from(!same);
                            equal = if same { "yes".into() } else { "NO".into() };
                        }
                        (g, cpu) => {
                            failures += 1;
                            equal = format!("error: gpu {:?} / cpu {:?}", g.err(), cpu.err());
                        }
                    }
                }
                // With KILN_COMPARE_STREAMED set, each parameter set is timed
                // resident and then with every section streamed from the host.
                for streamed_pass in [false, true] {
                    if streamed_pass {
                        if !compare_streamed {
                            break;
                        }
                        ctx.set_srs_vram_limit(Some(0));
                    }
                    let (mut times, mut synth_ms) = (Vec::new(), Vec::new());
                    let mut verified = 0;
                    let mut last = String::new();
                    for i in 0..=proofs {
                        let (asg, ms) = synth(i as u64 + 1, on_gpu);
                        let t = Instant::now();
                        match prove_start(&gpu, &params, asg, Randomness::random(&mut rng)).and_then(finish) {
                            Ok(pp) => {
                                verified += 1;
                                if i > 0 {
                                    times.push(t.elapsed().as_secs_f64() * 1e3);
                                    synth_ms.push(ms);
                                }
                                last = pp.timings.phases.iter().map(|(n, d)| format!("{n} {:.1}", d.as_secs_f64() * 1e3)).collect::<Vec<_>>().join(", ");
                            }
                            Err(e) => {
                                failures += 1;
                                last = format!("ERROR {e}");
                            }
                        }
                    }
                    let streamed = ctx.resident().iter().find(|r| r.params_id == params.id()).map_or(0, |r| r.streamed_bytes);
                    let name = if streamed > 0 { format!("{} 2^{log} ({} MiB streamed)", kind.name(), streamed >> 20) } else { format!("{} 2^{log}", kind.name()) };
                    let abc = if on_gpu { "gpu" } else { "host" };
                    println!("| {name} | {abc} | {gen_s:.1} | {equal} | {verified}/{} | {:.1} | {:.1} | {last} |", proofs + 1, median(synth_ms), median(times));
                    ctx.evict(params.id());
                }
                ctx.set_srs_vram_limit(vram_limit);
            }
            cache.evict(&key);
        }
    }
    if failures > 0 {
        println!("{failures} FAILURES");
        std::process::exit(1);
    }
    println!("all GPU proofs verified");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
