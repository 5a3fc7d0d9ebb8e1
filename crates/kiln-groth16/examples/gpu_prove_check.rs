//! GPU backend check: prove random circuits of several sizes and both
//! witness shapes on the GPU, verify every proof, check that for the same
//! r, s the GPU proof equals the CPU proof bit for bit (small sizes), and
//! time the steady state. Skips (exit 0) without a GPU or kernels.
//!
//! `gpu_prove_check [log sizes, default 10,12,14,16,18,20,22] [proofs per size, default 3]`
//!
//! `KILN_SRS_VRAM_BYTES=N` caps the VRAM parameters may take (0: every
//! section is streamed from the host) and `KILN_STREAM_CHUNK_BYTES=N` sets
//! the streaming chunk, to check and time the streamed path;
//! `KILN_COMPARE_STREAMED=1` times each size resident, then streamed.

use std::sync::Arc;
use std::time::Instant;

use kiln_groth16::{finish, prove_start, setup, CpuBackend, GpuBackend, GpuContext, ParamsFile, ProverBackend, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers};
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
    let compare_streamed = std::env::var_os("KILN_COMPARE_STREAMED").is_some();
    if let Some(c) = env_bytes("KILN_STREAM_CHUNK_BYTES") {
        ctx.set_stream_chunk_bytes(c as usize);
    }
    let info = ctx.device().info().clone();
    println!("device: {} ({} SMs), {} rayon threads", info.name, info.sm_count, rayon::current_num_threads());
    let gpu = GpuBackend::new(&ctx, 0).expect("GPU worker");
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let mut failures = 0;
    println!("| circuit | params gen s | equal to CPU | verified | GPU prove ms (median) | phases of the last proof (ms) |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for kind in [WorkloadKind::FilecoinLike, WorkloadKind::Dense] {
        for &log in &logs {
            let shape = SyntheticCircuit::filling_domain(kind, log, 4);
            let t = Instant::now();
            let params = Arc::new(ParamsFile::from_parameters(&setup::generate(shape, &mut rng).expect("params")));
            let gen_s = t.elapsed().as_secs_f64();
            let p = params.shape();
            let mut equal = "-".to_string();
            if log <= 16 {
                let c = shape.with_witness(77);
                let rs = Randomness::random(&mut rng);
                let run = |b: &dyn ProverBackend| {
                    let asg = synthesize(c, AssignmentBuffers::heap_with_capacity(p.domain(), p.l_len)).unwrap();
                    finish(prove_start(b, &params, asg, rs)?)
                };
                match (run(&gpu), run(&CpuBackend)) {
                    (Ok(g), Ok(cpu)) => {
                        let same = g.proof == cpu.proof;
                        if !same {
                            failures += 1;
                        }
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
                let mut times = Vec::new();
                let mut verified = 0;
                let mut last = String::new();
                for i in 0..=proofs {
                    let asg = synthesize(shape.with_witness(i as u64), AssignmentBuffers::heap_with_capacity(p.domain(), p.l_len)).unwrap();
                    let t = Instant::now();
                    match prove_start(&gpu, &params, asg, Randomness::random(&mut rng)).and_then(finish) {
                        Ok(pp) => {
                            verified += 1;
                            if i > 0 {
                                times.push(t.elapsed().as_secs_f64() * 1e3);
                            }
                            last = pp.timings.phases.iter().map(|(n, d)| format!("{n} {:.1}", d.as_secs_f64() * 1e3)).collect::<Vec<_>>().join(", ");
                        }
                        Err(e) => {
                            failures += 1;
                            last = format!("ERROR {e}");
                        }
                    }
                }
                times.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let med = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
                let streamed = ctx.resident().iter().find(|r| r.params_id == params.id()).map_or(0, |r| r.streamed_bytes);
                let name = if streamed > 0 { format!("{} 2^{log} ({} MiB streamed)", kind.name(), streamed >> 20) } else { format!("{} 2^{log}", kind.name()) };
                println!("| {name} | {gen_s:.1} | {equal} | {verified}/{} | {med:.1} | {last} |", proofs + 1);
                ctx.evict(params.id());
            }
            ctx.set_srs_vram_limit(vram_limit);
        }
    }
    if failures > 0 {
        println!("{failures} FAILURES");
        std::process::exit(1);
    }
    println!("all GPU proofs verified");
}
