//! `bench-filecoin`: kiln against filecoin-proofs' SupraSeal path on the
//! four Filecoin proof kinds (PoRep C2, SnapDeals, WindowPoSt, WinningPoSt),
//! same inputs, same parameter files, same GPU, one run (issue 7).
//! `cargo xtask bench filecoin --peer supraseal` builds it and the peer and
//! runs it; `--build-only` puts both stripped binaries, the 8 MiB inputs and
//! a `run.sh` into `.gpu-fil8/` for a GPU machine without Rust.
//!
//! 1. Parameters: every kind's set is made with kiln's generator where
//!    missing (test sector sizes only; the four sets at once, each using
//!    every core), in `--param-cache` / FIL_PROOFS_PARAMETER_CACHE.
//! 2. Per kind: kiln proves `--warmup` + `--timed` proofs through its engine
//!    (kiln_side), then the peer binary does the same with filecoin-proofs'
//!    own prover (peer). Every proof of both is checked by filecoin-proofs'
//!    verifier.
//! 3. table.md, results.json and proofs.jsonl under `--out`, rewritten after
//!    each kind so an interrupted run keeps what it measured.
//!
//! Without a GPU the peer is skipped (SupraSeal needs CUDA and a device)
//! and kiln runs on its CPU backend: a dry run of everything else, e.g. at
//! 2 KiB on a build machine.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};
use clap::Parser;
use kiln_filecoin::payload::Payload;
use kiln_pipeline::EngineConfig;
use bench_support::Outputs;
use serde_json::json;

#[path = "../../bench_support.rs"]
mod bench_support;
#[path = "../../kiln_bench.rs"]
mod kiln_bench;
#[path = "../bench-groth16/busy.rs"]
mod busy;
mod kiln_side;
mod peer;
mod report;
mod synth_only;

use kiln_side::KilnSetup;
use report::{render_table, KindReport, PeerOutcome};

#[derive(Parser, Debug)]
#[command(name = "bench-filecoin", about = "kiln against filecoin-proofs' SupraSeal path on the Filecoin proof kinds, same inputs, same run")]
struct Args {
    /// The payloads `cargo xtask gen-vanilla` wrote (porep-c2.json, snap-deals.json, window-post.json, winning-post.json).
    #[arg(long)]
    inputs: PathBuf,
    /// Kinds to prove: porep, snap, window, winning (or kiln's labels porep-c2, ...).
    #[arg(long, value_delimiter = ',', default_value = "porep,snap,window,winning")]
    kinds: Vec<String>,
    /// Warm-up proofs per kind and prover, not counted (parameter loading, SupraSeal's PTX JIT, kiln's SRS upload).
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Timed proofs per kind and prover.
    #[arg(long, default_value_t = 2)]
    timed: usize,
    /// Where the parameter files are (made here when missing); default FIL_PROOFS_PARAMETER_CACHE, else filecoin-proofs' default.
    #[arg(long)]
    param_cache: Option<PathBuf>,
    /// Only make sure the parameters exist, then stop.
    #[arg(long)]
    params_only: bool,
    /// kiln's backend: auto (every GPU with kernels, else the CPU), gpu, cpu.
    #[arg(long, default_value = "auto")]
    backend: String,
    /// kiln prover workers per GPU (the daemon's default is 2).
    #[arg(long, default_value_t = 2)]
    gpu_workers: usize,
    /// The peer binary (default: peer-filecoin next to this one).
    #[arg(long)]
    peer_bin: Option<PathBuf>,
    /// Do not run the peer.
    #[arg(long)]
    no_peer: bool,
    /// Only time kiln's synthesis on this host's CPU, this many witness-only
    /// runs per kind after the recording one (no parameters, no GPU, no peer).
    #[arg(long)]
    synth_only: Option<usize>,
    /// With `--synth-only`: at most this many partitions at once in the
    /// all-partitions run (default: as many as fit in half of this host's
    /// available memory; at 32 GiB each holds ~17 GB of buffers).
    #[arg(long)]
    synth_at_once: Option<usize>,
    /// With `--synth-only`: skip the one-core CPU-time runs (minutes each
    /// at production sizes).
    #[arg(long)]
    no_one_core: bool,
    /// With `--synth-only`: cut each PoRep partition to its first N
    /// challenges (production-size challenges on a machine without the
    /// memory for a whole partition; see kiln_filecoin::porep::cut_to_challenges).
    #[arg(long)]
    challenges: Option<usize>,
    /// Write table.md, results.json and proofs.jsonl here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Prove against test setups kept in this directory where a kind's
    /// `.params` file is absent (production sizes on a test machine; see
    /// kiln_filecoin::test_setup). It is also filecoin-proofs' parameter
    /// cache for the run: its verifiers read the `.vk` kiln writes there.
    /// The peer is skipped (it needs the `.params` files).
    #[arg(long)]
    test_setup: Option<PathBuf>,
    /// After the one-at-a-time proofs, this many jobs of each kind
    /// submitted at once (at least 2): the steady-state time per proof and
    /// the GPU busy % while they run.
    #[arg(long, default_value_t = 0)]
    steady: usize,
    /// kiln's memory budget (e.g. `100GiB`); default the engine's (host
    /// memory less a margin). The peak RSS is reported against it.
    #[arg(long)]
    memory_budget: Option<String>,
}

static START: OnceLock<Instant> = OnceLock::new();

/// One progress line on stderr, with the UTC time of day and the seconds
/// since the start (the device run has a time budget).
pub fn progress(msg: &str) {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) % 86_400;
    let since = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    eprintln!("[{:02}:{:02}:{:02} +{since:6.1}s] bench-filecoin: {msg}", secs / 3600, secs / 60 % 60, secs % 60);
}

/// kiln's backends as the daemon picks them, and the engine's settings.
fn kiln_setup(args: &Args) -> Result<KilnSetup> {
    let (backends, description) = kiln_bench::backends(&args.backend, args.gpu_workers)?;
    let mut config = EngineConfig::default();
    if let Some(b) = &args.memory_budget {
        config.memory_budget_bytes = Some(kiln_filecoin::registered::parse_sector_size(b).map_err(|e| anyhow!("--memory-budget: {e}"))?);
    }
    Ok(KilnSetup { backends, config, description })
}

/// The process's peak resident set (VmHWM), bytes.
fn peak_rss() -> Option<u64> {
    proc_bytes("/proc/self/status", "VmHWM:")
}

/// A `key: N kB` line of a /proc file, in bytes.
fn proc_bytes(path: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let kb: u64 = text.lines().find_map(|l| l.strip_prefix(key))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// What each side's time covers, for the table's header.
const TIMED: &str = "kiln: one job submitted to kiln's engine (payload decoded once before) until its answer: \
synthesis of every partition, the prover (H, MSMs), assembly and the engine's own check of each partition proof. \
SupraSeal: one filecoin-proofs call (seal_commit_phase2, generate_empty_sector_update_proof_with_vanilla, \
generate_single_window_post_with_vanilla, generate_winning_post_with_vanilla): synthesis + SupraSeal C2 + \
filecoin-proofs' own checks (PoRep: the vanilla proofs before, verify_seal after). \
Then every proof of both is verified by filecoin-proofs' verifier, outside the times.";

/// `--synth-only`: synthesis times per kind, one line each, and
/// `synthesis.json` in `--out`.
fn synth_only_run(payloads: &[Payload], timed: usize, args: &Args) -> Result<()> {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("kiln synthesis only, host {cores} cores, rayon threads {}", rayon::current_num_threads());
    let mut all = Vec::new();
    let mut different = Vec::new();
    for p in payloads {
        let cut;
        let p = match args.challenges {
            Some(n) if p.proof_kind == kiln_filecoin::payload::PayloadKind::PorepSealCommit => {
                cut = kiln_filecoin::porep::cut_to_challenges(p, n).map_err(|e| anyhow!("--challenges: {e}"))?;
                println!("PoRep partitions cut to their first {n} challenge(s)");
                &cut
            }
            _ => p,
        };
        let job = kiln_bench::job_for(p).map_err(|e| anyhow!("{:?} payload: {e}", p.proof_kind))?;
        let opts = synth_only::Options { timed, at_once: args.synth_at_once, one_core: !args.no_one_core };
        let t = synth_only::run(&job, &opts)?;
        println!("{}", t.line());
        if let Some(Err(e)) = t.native.as_ref().map(|n| &n.equal_to_gadget) {
            different.push(format!("{}: {e}", t.label));
        }
        all.push(t.json());
    }
    if let Some(d) = &args.out {
        std::fs::create_dir_all(d)?;
        std::fs::write(d.join("synthesis.json"), serde_json::to_string_pretty(&json!({"host_cores": cores, "kinds": all}))?)?;
    }
    if !different.is_empty() {
        return Err(anyhow!("the native witness is not the gadget witness: {}", different.join("; ")));
    }
    Ok(())
}

fn main() -> Result<()> {
    START.get_or_init(Instant::now);
    kiln_bench::log_to_stderr();
    let args = Args::parse();
    // filecoin-proofs reads its settings once, at first use: set before any.
    if let Some(dir) = &args.test_setup {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        kiln_filecoin::test_setup::set_dir(Some(dir.canonicalize()?));
    }
    let cache = args
        .test_setup
        .clone()
        .or_else(|| args.param_cache.clone())
        .or_else(|| std::env::var_os("FIL_PROOFS_PARAMETER_CACHE").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/var/tmp/filecoin-proof-parameters"));
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let cache = cache.canonicalize()?;
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &cache);
    let kinds = args.kinds.iter().map(|k| kiln_bench::kind_of(k)).collect::<Result<Vec<_>>>()?;
    let payloads = kinds
        .iter()
        .map(|k| kiln_filecoin::vanilla::read_payload(&args.inputs.join(k.file_name())).map_err(|e| anyhow!(e)))
        .collect::<Result<Vec<_>>>()?;
    let size = kiln_filecoin::registered::sector_size_name(payloads.first().map(|p| p.sector_size).context("no kinds")?);
    progress(&format!("{} kinds at {size} from {}; parameters in {}", payloads.len(), args.inputs.display(), cache.display()));
    if args.challenges.is_some() && args.synth_only.is_none() {
        return Err(anyhow!("--challenges cuts the circuits to another shape than the parameters': it needs --synth-only"));
    }
    if let Some(timed) = args.synth_only {
        return synth_only_run(&payloads, timed, &args);
    }
    kiln_bench::ensure_params(&payloads, &progress)?;
    if args.params_only {
        progress("parameters ready (--params-only)");
        return Ok(());
    }

    let setup = kiln_setup(&args)?;
    let gpu_present = kiln_gpu::GpuDevice::count() > 0;
    let peer_bin = args.peer_bin.clone().or_else(|| {
        let p = std::env::current_exe().ok()?.with_file_name("peer-filecoin");
        p.exists().then_some(p)
    });
    let peer_skip = if args.no_peer {
        Some("--no-peer".to_string())
    } else if args.test_setup.is_some() {
        Some("--test-setup (the peer needs the .params files)".to_string())
    } else if !gpu_present {
        Some("no GPU on this machine (SupraSeal needs CUDA and a device)".to_string())
    } else if peer_bin.is_none() {
        Some("no peer-filecoin binary (--peer-bin, or build it with `cargo xtask bench filecoin --build-only`)".to_string())
    } else {
        None
    };
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let header = format!(
        "kiln vs filecoin-proofs 19.1 + SupraSeal C2 (cuda-supraseal), Filecoin kinds at {size}: {}; host {cores} cores; \
         per kind and prover {} warm-up (not counted) + {} timed proofs, one at a time.\n\n{TIMED}",
        setup.description, args.warmup, args.timed
    );
    println!("{header}");
    if let Some(why) = &peer_skip {
        println!("SupraSeal peer skipped: {why}");
    }
    let meta = json!({
        "kiln": setup.description, "host_cores": cores, "sector_size": size, "param_cache": cache,
        "synthesis_workers": setup.config.synthesis_workers, "peer_skipped": peer_skip, "args": format!("{args:?}"),
    });

    let mut out = Outputs::new(args.out.clone())?;
    let mut reports = Vec::new();
    for p in &payloads {
        let job = kiln_bench::job_for(p).map_err(|e| anyhow!("{:?} payload: {e}", p.proof_kind))?;
        let label = job.kind_label().to_string();
        let (_, registered) = kiln_bench::param_set_for(p).map_err(|e| anyhow!(e))?;
        progress(&format!("== {label} ({registered}, {} partition(s)): kiln", job.num_partitions()));
        if args.steady >= 2 {
            progress(&format!("== {label}: then {} jobs at once in the same engine (steady state)", args.steady));
        }
        let (mut kiln, steady) = kiln_side::run_kind(&setup, p, &job, (args.warmup, args.timed, args.steady), &mut |k| {
            progress(&format!(
                "kiln {label} {} {}: {:.1} ms (synthesis {:.1} + prover {:.1}); verified by filecoin-proofs in {:.1} ms",
                k.mode, k.index, k.ms, k.synthesis_ms, k.prove_ms, k.verify_ms
            ));
            out.line(json!({
                "prover": "kiln", "kind": label, "mode": k.mode, "index": k.index, "ms": k.ms,
                "synthesis_ms": k.synthesis_ms, "prove_ms": k.prove_ms, "verify_ms": k.verify_ms, "verified": true,
            }));
        })
        .with_context(|| format!("kiln on {label}"))?;
        if let Some(st) = steady {
            let busy = st.gpu_busy.map_or("no GPU watched".into(), |b| format!("GPU busy {b:.0} %"));
            let note = format!(
                "steady state: {} jobs at once, {:.1} ms per proof once the pipeline is full (partition rate over the last {} partitions; {:.0} proofs/hour), {busy}; all {} in {:.1} s, every proof verified by filecoin-proofs",
                st.jobs,
                st.per_proof_ms,
                st.partitions_timed,
                3.6e6 / st.per_proof_ms,
                st.jobs,
                st.total_ms / 1e3
            );
            progress(&format!("kiln {label} {note}"));
            out.line(json!({"prover": "kiln", "kind": label, "mode": "steady", "jobs": st.jobs, "per_proof_ms": st.per_proof_ms, "partitions_timed": st.partitions_timed, "gpu_busy": st.gpu_busy, "total_ms": st.total_ms}));
            kiln.notes.push(note);
        }
        let peer = match (&peer_skip, &peer_bin) {
            (None, Some(bin)) => {
                progress(&format!("== {label}: SupraSeal"));
                peer::run_kind(bin, &args.inputs, &cache, &label, args.warmup, args.timed, &mut |line| {
                    progress(&format!("peer {label}: {line}"));
                    if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(line) {
                        v["prover"] = json!("supraseal");
                        out.line(v);
                    }
                })
            }
            (Some(why), _) => PeerOutcome::Skipped { why: why.clone() },
            (None, None) => unreachable!("peer_skip is set when there is no binary"),
        };
        reports.push(KindReport { kind: label, registered_proof: registered, partitions: job.num_partitions(), kiln, peer });
        out.write(&format!("{header}\n\n{}", render_table(&reports)), &json!({"run": meta, "kinds": reports}))?;
        println!("{}", render_table(&reports[reports.len() - 1..]));
    }
    println!("\n{header}\n\n{}", render_table(&reports));
    for r in &reports {
        for n in &r.kiln.notes {
            println!("{}: {n}", r.kind);
        }
    }
    if let Some(d) = &args.out {
        println!("wrote {}/table.md, results.json, proofs.jsonl", d.display());
    }
    let budget = setup.config.memory_budget_bytes.map_or("the engine's default".to_string(), |b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64));
    if let Some(peak) = peak_rss() {
        println!("peak RSS of this process: {:.1} GiB (memory budget {budget})", peak as f64 / (1u64 << 30) as f64);
    }
    progress("done");
    if reports.iter().any(|r| matches!(r.peer, PeerOutcome::Failed { .. })) {
        bail!("the peer failed on at least one kind (see the table)");
    }
    Ok(())
}
