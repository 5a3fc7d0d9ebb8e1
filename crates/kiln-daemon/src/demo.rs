//! `kiln demo`: synthesize and prove a few built-in circuits, verify every
//! proof, print what each phase took.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kiln_groth16::{finish, prove_start, setup, BackendChoice, BackendOptions, Backends, ParamsFile, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers};
use rand::SeedableRng;

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Number of circuits (proofs) to prove.
    #[arg(long, default_value_t = 4)]
    pub proofs: usize,
    /// log2 of the constraints per circuit (the evaluation domain).
    #[arg(long, default_value_t = 16)]
    pub log_size: u32,
    /// Witness shape: dense or filecoin-like.
    #[arg(long, default_value = "filecoin-like")]
    pub kind: WorkloadKind,
    /// Public inputs per circuit.
    #[arg(long, default_value_t = 4)]
    pub inputs: usize,
    /// Backend: auto (GPU if present), cpu or gpu.
    #[arg(long, default_value = "auto")]
    pub backend: String,
    /// Where generated parameters are cached [default: ~/.cache/kiln/params].
    #[arg(long, alias = "params-dir", env = "KILN_SYNTHETIC_PARAMS_DIR")]
    pub synthetic_params_dir: Option<PathBuf>,
}

/// The parameter cache: the flag or KILN_SYNTHETIC_PARAMS_DIR, else the
/// old KILN_PARAMS_DIR (with a warning), else the default.
fn params_dir(args: &DemoArgs) -> PathBuf {
    if let Some(dir) = &args.synthetic_params_dir {
        return dir.clone();
    }
    match std::env::var_os("KILN_PARAMS_DIR").filter(|v| !v.is_empty()) {
        Some(old) => {
            eprintln!("kiln demo: KILN_PARAMS_DIR is deprecated, it is now called KILN_SYNTHETIC_PARAMS_DIR");
            PathBuf::from(old)
        }
        None => crate::config::default_synthetic_params_dir(),
    }
}

pub fn run(args: DemoArgs) -> Result<()> {
    if !(1..=24).contains(&args.log_size) {
        bail!("--log-size must be between 1 and 24");
    }
    // One worker on the first usable GPU, else the CPU; `why` says which and why.
    let choice: BackendChoice = args.backend.parse()?;
    let chosen = Backends::open(choice, &BackendOptions::default())?;
    let (backend, why) = (chosen.workers[0].clone(), chosen.why);
    let shape = SyntheticCircuit::filling_domain(args.kind, args.log_size, args.inputs);
    println!(
        "kiln demo: {} proofs of a {} circuit, 2^{} constraints, {} public inputs",
        args.proofs,
        args.kind.name(),
        args.log_size,
        args.inputs
    );
    println!("backend: {why}");

    let dir = params_dir(&args);
    let path = dir.join(format!("kiln-synthetic-{}-2^{}-{}in-v1.params", args.kind.name(), args.log_size, args.inputs));
    let params = Arc::new(load_params(shape, &path)?);
    println!("parameters: {} ({:.1} MiB)", path.display(), params.size_bytes() as f64 / (1 << 20) as f64);

    let mut rng = rand::rngs::StdRng::from_entropy();
    let p = params.shape();
    println!("{:>5} {:>12} {:>12} {:>12}  result", "proof", "synth ms", "prove ms", "total ms");
    let t_all = Instant::now();
    let mut prove_times = Vec::new();
    for i in 0..args.proofs {
        let t0 = Instant::now();
        let circuit = shape.with_witness(rand::Rng::gen(&mut rng));
        let asg = synthesize(circuit, AssignmentBuffers::heap_with_capacity(p.domain(), p.l_len))
            .context("synthesis failed")?;
        let t_synth = t0.elapsed();
        let t1 = Instant::now();
        let pending = prove_start(backend.as_ref(), &params, asg, Randomness::random(&mut rng))?;
        let proved = finish(pending)?;
        let t_prove = t1.elapsed();
        prove_times.push(t_prove);
        println!(
            "{:>5} {:>12.1} {:>12.1} {:>12.1}  verified ({} bytes)",
            i,
            ms(t_synth),
            ms(t_prove),
            ms(t0.elapsed()),
            proved.to_bytes().len()
        );
        tracing::info!(phases = ?proved.timings.phases, "proof {i}");
    }
    let wall = t_all.elapsed();
    println!(
        "{} proofs verified in {:.2} s ({:.2} proofs/s, median prove {:.1} ms)",
        args.proofs,
        wall.as_secs_f64(),
        args.proofs as f64 / wall.as_secs_f64(),
        median_ms(&mut prove_times)
    );
    Ok(())
}

fn load_params(circuit: SyntheticCircuit, path: &std::path::Path) -> Result<ParamsFile> {
    let bar = indicatif::ProgressBar::hidden();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "generating parameters (once, then cached) [{bar:40}] {percent}% {elapsed}/{duration}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let mut rng = rand::rngs::StdRng::from_entropy();
    let progress = |done: u64, total: u64| {
        if bar.is_hidden() {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        bar.set_length(total);
        bar.set_position(done);
    };
    let params = setup::load_or_generate(circuit, path, &mut rng, &progress)
        .with_context(|| format!("loading or generating parameters at {}", path.display()))?;
    bar.finish_and_clear();
    Ok(params)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median_ms(v: &mut [Duration]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort();
    ms(v[v.len() / 2])
}
