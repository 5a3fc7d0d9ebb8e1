//! `bench-groth16`: kiln's GPU Groth16 prover against SupraSeal C2 on the
//! same circuits, the same parameter files and the same GPU, in one run
//! (issue 5's peer comparison). `cargo xtask bench groth16 --peer supraseal`
//! builds it and the peer and runs it; `--build-only --out DIR` puts both
//! stripped binaries in DIR for a GPU machine without Rust, where it runs as
//!
//! ```text
//! ./bench-groth16 --peer-bin ./peer-supraseal --sizes 20,22 --out $OUT
//! ```
//!
//! For each shape (kind x size): make or reuse the parameter file (kiln's
//! generator, bellperson's format, the engine's cache name), prove with kiln
//! (one at a time, then a steady stream), then run the peer binary on the
//! same file and the same witness seeds, and print the table (ms per proof,
//! kiln / SupraSeal, GPU busy % during each stream). Every proof of both
//! provers is verified. Without a GPU the peer is skipped (SupraSeal needs
//! CUDA) and kiln runs on its CPU backend: a dry run of everything else.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use kiln_groth16::{setup, BackendOptions, Backends, ParamsFile};
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::EngineConfig;
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use bench_support::Outputs;
use serde_json::json;

mod busy;
#[path = "../../bench_support.rs"]
mod bench_support;
mod kiln_side;
mod peer;
mod report;

use kiln_side::{KilnCounts, KilnSetup};
use peer::PeerCounts;
use report::{render_table, PeerOutcome, Shape, ShapeReport};

#[derive(Parser, Debug)]
#[command(name = "bench-groth16", about = "kiln's Groth16 prover against SupraSeal C2, same circuits, same run")]
struct Args {
    /// log2 circuit sizes (constraints filling the domain).
    #[arg(long, value_delimiter = ',', default_value = "20,22")]
    sizes: Vec<u32>,
    /// Circuit kinds: dense (random values) and filecoin-like (mostly bits, B ~25 % dense).
    #[arg(long, value_delimiter = ',', default_value = "dense,filecoin-like")]
    kinds: Vec<WorkloadKind>,
    /// Public inputs per circuit.
    #[arg(long, default_value_t = 4)]
    inputs: usize,
    /// kiln's backend: auto (every GPU with kernels, else the CPU), gpu, cpu.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// kiln prover workers per GPU (the daemon's default is 2).
    #[arg(long, default_value_t = 2)]
    gpu_workers: usize,
    /// kiln synthesis workers (default: the engine's, three quarters of the cores up to 32).
    #[arg(long)]
    synthesis_workers: Option<usize>,
    /// Warm-up proofs per prover and shape, not counted (SupraSeal JIT-compiles its PTX on first use; kiln uploads the SRS to VRAM).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// kiln's one-at-a-time proofs per shape.
    #[arg(long, default_value_t = 3)]
    single: usize,
    /// kiln's timed stream proofs per shape, after the pipeline fill (which is proved too, not counted).
    #[arg(long, default_value_t = 8)]
    stream: usize,
    /// The peer binary (default: peer-supraseal next to this one).
    #[arg(long)]
    peer_bin: Option<PathBuf>,
    /// Do not run the peer.
    #[arg(long)]
    no_peer: bool,
    /// The peer's one-at-a-time proofs per shape (default 2 up to 2^20, 1 above: the peer takes seconds per proof).
    #[arg(long)]
    peer_single: Option<usize>,
    /// The peer's stream proofs per shape (default 4 up to 2^20, 2 above).
    #[arg(long)]
    peer_stream: Option<usize>,
    /// Circuits per SupraSeal call in the peer's stream (its batch API).
    #[arg(long, default_value_t = 2)]
    peer_batch: usize,
    /// Where parameter files are made and reused (never under --out: they are GiBs).
    #[arg(long, env = "KILN_PARAMS_DIR")]
    params_dir: Option<PathBuf>,
    /// Write table.md, results.json and proofs.jsonl here.
    #[arg(long)]
    out: Option<PathBuf>,
}

impl Args {
    fn peer_counts(&self, shape: Shape) -> PeerCounts {
        let big = shape.log > 20;
        PeerCounts {
            warmup: self.warmup,
            single: self.peer_single.unwrap_or(if big { 1 } else { 2 }),
            stream: self.peer_stream.unwrap_or(if big { 2 } else { 4 }),
            batch: self.peer_batch.max(1),
        }
    }
}

/// kiln's backends as the daemon picks them (kiln-groth16's
/// `Backends::open`; `auto`: every GPU that opens with kernels, else the CPU).
fn kiln_setup(args: &Args) -> Result<KilnSetup> {
    let mut config = EngineConfig::default();
    if let Some(w) = args.synthesis_workers {
        config.synthesis_workers = w;
    }
    let options = BackendOptions { workers_per_gpu: args.gpu_workers, ..Default::default() };
    let chosen = Backends::open(args.backend.parse()?, &options)?;
    Ok(KilnSetup { backends: chosen.workers, config, description: format!("kiln {}", chosen.why) })
}

/// The parameter file of `shape`, at the path kiln's engine uses for it,
/// generated (kiln's fast generator) when missing.
fn params_for(shape: Shape, dir: &Path) -> Result<(PathBuf, ParamsFile)> {
    let path = SyntheticJob::srs_spec(shape.kind, shape.log, shape.inputs, dir).path;
    let circuit = SyntheticCircuit::filling_domain(shape.kind, shape.log, shape.inputs);
    let t = Instant::now();
    let existed = path.exists();
    let params = setup::load_or_generate(circuit, &path, &mut rand::thread_rng(), &|done, total| {
        // A line every ~10 %, so a log file shows progress without a bar.
        let tenth = (done * 10 / total.max(1)).min(10);
        if done == 0 || done == total || tenth != (done.saturating_sub(1) * 10 / total.max(1)) {
            eprintln!("bench-groth16: generating parameters for {}: {}%", shape.label(), tenth * 10);
        }
    })
    .with_context(|| format!("parameters at {}", path.display()))?;
    eprintln!(
        "bench-groth16: parameters for {} {} in {:.1} s: {} ({:.0} MiB)",
        shape.label(),
        if existed { "loaded" } else { "generated" },
        t.elapsed().as_secs_f64(),
        path.display(),
        params.size_bytes() as f64 / (1u64 << 20) as f64
    );
    Ok((path, params))
}

fn main() -> Result<()> {
    let args = Args::parse();
    let shapes = Shape::all(&args.kinds, &args.sizes, args.inputs);
    let dir = args
        .params_dir
        .clone()
        .unwrap_or_else(|| dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("kiln").join("params"));
    let setup = kiln_setup(&args)?;
    let gpu_present = kiln_gpu::GpuDevice::count() > 0;
    let peer_bin = args.peer_bin.clone().or_else(|| {
        let p = std::env::current_exe().ok()?.with_file_name("peer-supraseal");
        p.exists().then_some(p)
    });
    let peer_skip = if args.no_peer {
        Some("--no-peer".to_string())
    } else if !gpu_present {
        Some("no GPU on this machine (SupraSeal needs CUDA and a device)".to_string())
    } else if peer_bin.is_none() {
        Some("no peer-supraseal binary (--peer-bin, or build it with `cargo xtask bench groth16 --build-only`)".to_string())
    } else {
        None
    };
    let counts = KilnCounts { warmup: args.warmup, single: args.single, stream: args.stream };
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let header = format!(
        "kiln vs SupraSeal C2 (bellperson 0.27 cuda-supraseal): {}; host {} cores; kiln: {} one-at-a-time + {} stream proofs after {} fill, {} warm-up",
        setup.description,
        cores,
        counts.single,
        counts.stream,
        setup.fill(),
        counts.warmup
    );
    println!("{header}");
    if let Some(why) = &peer_skip {
        println!("SupraSeal peer skipped: {why}");
    }
    let meta = json!({
        "kiln": setup.description,
        "host_cores": cores,
        "synthesis_workers": setup.config.synthesis_workers,
        "fill": setup.fill(),
        "args": format!("{args:?}"),
    });

    let mut out = Outputs::new(args.out.clone())?;
    let mut reports = Vec::new();
    // The same witness seeds for both provers, shape by shape.
    let seed = 1;
    for &shape in &shapes {
        println!("== {}", shape.label());
        let (path, params) = params_for(shape, &dir)?;
        let label = shape.label();
        let kiln = kiln_side::run_shape(&setup, shape, &dir, &params, counts, seed, &mut |p| {
            eprintln!("bench-groth16: kiln {label} {} seed {}: {:.1} ms (verified)", p.mode, p.seed, p.ms);
            out.line(json!({
                "prover": "kiln", "shape": label, "mode": p.mode, "seed": p.seed,
                // For stream proofs: the completion instant since the stream's submission.
                if p.mode == "stream" { "completed_at_ms" } else { "ms" }: p.ms,
                "synthesis_ms": p.synthesis_ms, "prove_ms": p.prove_ms, "verified": true,
            }));
        })
        .with_context(|| format!("kiln on {label}"))?;
        drop(params);
        let peer = match (&peer_skip, &peer_bin) {
            (None, Some(bin)) => peer::run_shape(bin, shape, &path, args.peer_counts(shape), seed, &mut |line| {
                eprintln!("bench-groth16: peer {label}: {line}");
                if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(line) {
                    v["prover"] = json!("supraseal");
                    v["shape"] = json!(label);
                    out.line(v);
                }
            }),
            (Some(why), _) => PeerOutcome::Skipped { why: why.clone() },
            (None, None) => unreachable!("peer_skip is set when there is no binary"),
        };
        reports.push(ShapeReport { shape, label: shape.label(), kiln, peer });
        out.write(&format!("{header}\n{}", render_table(&reports)), &json!({"run": meta, "shapes": reports}))?;
        println!("{}", render_table(&reports[reports.len() - 1..]));
    }
    println!("\n{header}\n\n{}", render_table(&reports));
    for r in &reports {
        for n in &r.kiln.notes {
            println!("{}: kiln: {n}", r.label);
        }
        if let PeerOutcome::Ran(p) = &r.peer {
            for n in &p.notes {
                println!("{}: SupraSeal: {n}", r.label);
            }
        }
    }
    if let Some(d) = &args.out {
        println!("wrote {}/table.md, results.json, proofs.jsonl", d.display());
    }
    if reports.iter().any(|r| matches!(r.peer, PeerOutcome::Failed { .. })) {
        bail!("the peer failed on at least one shape (see the table)");
    }
    Ok(())
}
