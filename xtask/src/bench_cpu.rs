//! `cargo xtask bench cpu`: kiln's CPU prover against bellperson's CPU
//! prover, on the same circuits and the same parameter file, in one run.
//!
//! Both provers start from the circuit (synthesis included) and end with a
//! 192-byte proof; kiln also verifies each proof, bellperson does not, so the
//! comparison is conservative for kiln. Proofs alternate between the two
//! provers after one warm-up proof each, and medians are reported.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bellperson::groth16::{create_random_proof, Parameters};
use blstrs::Bls12;
use kiln_groth16::{prove, setup, CpuBackend};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use rand::SeedableRng;

#[derive(clap::Args)]
pub struct Args {
    /// Smallest log2 circuit size.
    #[arg(long, default_value_t = 14)]
    min_log: u32,
    /// Largest log2 circuit size.
    #[arg(long, default_value_t = 18)]
    max_log: u32,
    /// Timed proofs per prover and size (after one warm-up each).
    #[arg(long, default_value_t = 3)]
    proofs: usize,
    /// Workload kinds (dense, filecoin-like).
    #[arg(long, value_delimiter = ',', default_value = "dense,filecoin-like")]
    kinds: Vec<WorkloadKind>,
    /// Also time parameter generation, kiln's against bellperson's, for the
    /// dense circuits up to this log size (bellperson's takes minutes above 2^16 on 2 cores).
    #[arg(long)]
    compare_setup_up_to: Option<u32>,
    /// Parameter cache directory (shared with `kiln demo`).
    #[arg(long, env = "KILN_PARAMS_DIR")]
    params_dir: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let dir = args
        .params_dir
        .clone()
        .unwrap_or_else(|| dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("kiln").join("params"));
    println!(
        "kiln CPU prover vs bellperson 0.27 CPU prover; {} rayon threads; {} timed proofs each after 1 warm-up",
        rayon::current_num_threads(),
        args.proofs
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    if let Some(up_to) = args.compare_setup_up_to {
        compare_setup(args.min_log..=up_to.min(args.max_log), &mut rng)?;
    }
    println!("| circuit | constraints | bellperson ms | kiln ms | kiln / bellperson |");
    println!("| --- | --- | --- | --- | --- |");
    for &kind in &args.kinds {
        for log in args.min_log..=args.max_log {
            let shape = SyntheticCircuit::filling_domain(kind, log, 4);
            let path = dir.join(format!("kiln-synthetic-{}-2^{}-4in-v1.params", kind.name(), log));
            let t = Instant::now();
            let params = Arc::new(
                setup::load_or_generate(shape, &path, &mut rng, &|done, _total| {
                    if done == 0 {
                        eprintln!("generating parameters for {} 2^{log} (once; cached at {})", kind.name(), path.display())
                    }
                })
                .with_context(|| format!("parameters at {}", path.display()))?,
            );
            let bp: Parameters<Bls12> = {
                let f = std::fs::File::open(&path)?;
                Parameters::read(std::io::BufReader::new(f), false)?
            };
            eprintln!("parameters for 2^{log} ready in {:.1} s", t.elapsed().as_secs_f64());

            let mut ours = Vec::new();
            let mut theirs = Vec::new();
            for i in 0..=args.proofs {
                let c = shape.with_witness(i as u64);
                let t = Instant::now();
                create_random_proof(c, &bp, &mut rng).context("bellperson failed")?;
                let tb = t.elapsed();
                let t = Instant::now();
                prove(&CpuBackend, &params, c, &mut rng).context("kiln failed")?;
                let tk = t.elapsed();
                if i > 0 {
                    theirs.push(tb);
                    ours.push(tk);
                }
            }
            let (b, k) = (median(&mut theirs), median(&mut ours));
            println!(
                "| {} 2^{log} | {} | {:.0} | {:.0} | {:.2} |",
                kind.name(),
                params.shape().domain(),
                ms(b),
                ms(k),
                k.as_secs_f64() / b.as_secs_f64()
            );
        }
    }
    Ok(())
}

/// Parameter generation, kiln's generator against bellperson's, same circuit.
fn compare_setup(logs: std::ops::RangeInclusive<u32>, rng: &mut rand::rngs::StdRng) -> Result<()> {
    println!("| parameters for | bellperson generate s | kiln generate s | kiln / bellperson |");
    println!("| --- | --- | --- | --- |");
    for log in logs {
        let c = SyntheticCircuit::filling_domain(WorkloadKind::Dense, log, 4);
        let t = Instant::now();
        setup::generate_with_bellperson(c, rng)?;
        let b = t.elapsed();
        let t = Instant::now();
        setup::generate(c, rng)?;
        let k = t.elapsed();
        println!("| dense 2^{log} | {:.1} | {:.1} | {:.2} |", b.as_secs_f64(), k.as_secs_f64(), k.as_secs_f64() / b.as_secs_f64());
    }
    println!();
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}
