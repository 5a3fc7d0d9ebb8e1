//! `cargo xtask kill-loop`: SIGTERM and SIGKILL a real `kiln serve` at
//! random moments of its work, restart it, and check what clients and the
//! next daemon see.
//!
//! Each round: a few `Prove` calls (synthetic jobs; some against
//! parameters that do not exist yet, so the daemon is generating them),
//! a random delay, the signal, the phase the daemon was in (from its
//! `/status` just before: parameter generation, synthesis, prover,
//! finalization, ...). Then:
//! - every waiting client has a final answer (COMPLETED with a proof that
//!   verifies, CANCELLED saying kiln is shutting down, or the call's
//!   transport error when the process died) and none hangs;
//! - SIGTERM ends the process with status 0 within its grace period;
//! - two daemons started at the same moment on the socket: exactly one
//!   serves, the other says the socket is in use;
//! - the new daemon proves the same request ids again, every proof
//!   verifying against the parameter files on disk: nothing half-written
//!   (a parameter file cut short by the kill) is used.
//!
//! Fails (exit status 1) on any invalid proof, hang, crash or a round that
//! does not restart. CI runs a few rounds; the campaign in docs/RELIABILITY.md
//! runs 100 per signal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{ProveRequest, SubmitProofRequest};
use kiln_synth::workload::WorkloadKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use kiln_soak::daemon::{self, Spawned};
use kiln_soak::load::Verifier;
use kiln_soak::workload::JobSpec;

/// `cargo xtask kill-loop` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rounds per signal (SIGTERM, then SIGKILL).
    #[arg(long, default_value_t = 100)]
    pub iterations: usize,
    /// The `kiln` binary; `target/debug/kiln` (built first) when not given.
    #[arg(long)]
    pub kiln_bin: Option<PathBuf>,
    /// Seed for the delays and jobs (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Where the daemons' logs and the rounds' table go (default target/kill-loop).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// The daemons' settings: a short grace period, so a SIGTERM round ends in
/// seconds; a small budget; the prover backend is the host's (`auto`).
const SETTINGS: &[(&str, &str)] = &[
    ("shutdown_grace_secs", "2"),
    ("engine.memory_budget_bytes", "1GiB"),
    ("engine.synthesis_workers", "2"),
    ("engine.counter_log_interval_ms", "1000"),
];
const GRACE: Duration = Duration::from_secs(2);
/// Longest any call may take before it counts as a hang.
const CALL_LIMIT: Duration = Duration::from_secs(180);
/// 2^16 constraints: about half a second a partition on the build machine's CPU
/// backend, so kills land in every phase.
const LOG_SIZE: u32 = 16;

pub fn run(args: Args) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    if !rt.block_on(campaign(args))? {
        eprintln!("kill-loop: FAILED (see above and the report)");
        std::process::exit(1);
    }
    Ok(())
}

/// What one client got.
#[derive(Debug)]
enum Answer {
    Completed { verified: bool },
    /// CANCELLED, with its message.
    Cancelled(String),
    Failed(String),
    /// The call itself ended with this gRPC status (the process died under it).
    Transport(String),
    Hung,
}

impl Answer {
    fn name(&self) -> &'static str {
        match self {
            Answer::Completed { verified: true } => "completed",
            Answer::Completed { verified: false } => "INVALID PROOF",
            Answer::Cancelled(_) => "cancelled",
            Answer::Failed(_) => "FAILED",
            Answer::Transport(_) => "connection ended",
            Answer::Hung => "HUNG",
        }
    }
}

/// One round's record.
struct Round {
    signal: &'static str,
    phase: String,
    delay_ms: u64,
    answers: Vec<Answer>,
    /// What went wrong, if anything.
    problems: Vec<String>,
}

async fn campaign(args: Args) -> Result<bool> {
    let root = crate::workspace_root();
    let kiln = match &args.kiln_bin {
        Some(b) => b.clone(),
        None => build_debug_kiln(&root)?,
    };
    let out = args.out.clone().unwrap_or_else(|| root.join("target/kill-loop"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    // A short path: unix socket paths are limited to 107 bytes.
    let state = tempfile::Builder::new().prefix("kiln-kill-").tempdir()?;
    let socket = state.path().join("kiln.sock");
    let params = state.path().join("params");
    let settings: Vec<(String, String)> = SETTINGS.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let seed = args.seed.unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64));
    let mut rng = StdRng::seed_from_u64(seed);
    let verifier = Verifier::new(params.clone(), false);
    eprintln!("kill-loop: {} rounds per signal, seed {seed}, {} (logs in {})", args.iterations, kiln.display(), out.display());

    let mut launches = 0usize;
    let mut log = |out: &Path| {
        launches += 1;
        out.join(format!("daemon-{launches:04}.log"))
    };
    let first_log = log(&out);
    let mut daemon = Spawned::launch(&kiln, &socket, &params, &settings, &first_log)?;
    daemon.wait_ready(&first_log, Duration::from_secs(120)).await?;
    let mut rounds = Vec::new();
    let mut next_inputs = 5u32; // fresh parameter sets for generation rounds (up to 64 inputs)
    let t0 = Instant::now();
    for (signal, signo) in [("SIGTERM", libc::SIGTERM), ("SIGKILL", libc::SIGKILL)] {
        for i in 0..args.iterations {
            let generate = rng.gen_bool(0.25) && next_inputs <= 64;
            let fresh = generate.then(|| {
                next_inputs += 1;
                next_inputs - 1
            });
            let jobs = jobs(&mut rng, fresh);
            let round_no = rounds.len();
            let (round, next) = one_round(&kiln, &socket, &params, &settings, &mut log, &out, daemon, &verifier, &mut rng, signal, signo, &jobs, round_no).await?;
            eprintln!(
                "kill-loop: {signal} {}/{}: after {} ms, in {}: {}{}",
                i + 1,
                args.iterations,
                round.delay_ms,
                round.phase,
                round.answers.iter().map(Answer::name).collect::<Vec<_>>().join(", "),
                if round.problems.is_empty() { String::new() } else { format!(" -- PROBLEMS: {}", round.problems.join("; ")) }
            );
            rounds.push(round);
            daemon = next;
        }
    }
    let exit = daemon_stop(daemon).await;
    let leftovers = std::fs::read_dir(&params).map(|d| d.filter_map(|e| e.ok()).filter(|e| e.file_name().to_string_lossy().ends_with(".tmp")).count()).unwrap_or(0);
    report(&out, &rounds, seed, t0.elapsed(), leftovers, exit)
}

/// The round's jobs: 1-3 synthetic jobs of 1-3 partitions; with `fresh`,
/// the first uses parameters that do not exist yet (the daemon generates
/// them: a kill may land in the middle).
fn jobs(rng: &mut StdRng, fresh: Option<u32>) -> Vec<JobSpec> {
    (0..rng.gen_range(1..=3))
        .map(|k| JobSpec {
            name: format!("kill-{k}"),
            circuit: WorkloadKind::FilecoinLike,
            log_size: LOG_SIZE,
            partitions: rng.gen_range(1..=3),
            inputs: if k == 0 { fresh.unwrap_or(0) } else { 0 },
            priority: kiln_proto::v1::Priority::Normal,
            weight: 1,
            filecoin: None,
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
async fn one_round(
    kiln: &Path,
    socket: &Path,
    params: &Path,
    settings: &[(String, String)],
    log: &mut impl FnMut(&Path) -> PathBuf,
    out: &Path,
    mut daemon: Spawned,
    verifier: &Verifier,
    rng: &mut StdRng,
    signal: &'static str,
    signo: libc::c_int,
    jobs: &[JobSpec],
    round_no: usize,
) -> Result<(Round, Spawned)> {
    let requests: Vec<(JobSpec, SubmitProofRequest)> =
        jobs.iter().enumerate().map(|(k, j)| (j.clone(), j.request(format!("round-{round_no}-{k}"), rng.gen()))).collect();
    let mut calls = Vec::new();
    for (spec, req) in &requests {
        let (grpc, spec, req, verifier) = (daemon.target.grpc.clone(), spec.clone(), req.clone(), verifier.clone());
        calls.push(tokio::spawn(async move { prove(&grpc, &spec, req, &verifier).await }));
    }
    // The kill lands anywhere from before the first partition to after the last answer.
    let delay = Duration::from_millis(rng.gen_range(0..1500));
    let t = Instant::now();
    let mut last = None;
    while t.elapsed() < delay {
        if let Ok(body) = daemon::http_get(daemon.target.status, "/status").await {
            last = serde_json::from_str::<serde_json::Value>(&body).ok();
        }
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    let phase = phase_of(last.as_ref(), &requests, params);
    let mut problems = Vec::new();
    daemon.signal(signo);
    let within = if signo == libc::SIGTERM { GRACE + Duration::from_secs(20) } else { Duration::from_secs(10) };
    match daemon.wait_exit(within).await? {
        Some(status) if signo == libc::SIGTERM && !status.success() => problems.push(format!("exited {status} on SIGTERM (a crash)")),
        Some(_) => {}
        None => problems.push(format!("still running {within:?} after {signal}")),
    }
    let mut answers = Vec::new();
    for call in calls {
        let answer = call.await.context("client task")?;
        match &answer {
            Answer::Completed { verified: false } => problems.push("a returned proof does not verify".into()),
            Answer::Failed(m) => problems.push(format!("a job FAILED: {m}")),
            Answer::Hung => problems.push("a client never got an answer".into()),
            Answer::Cancelled(m) if !m.contains("shutting down") => problems.push(format!("cancelled without saying why: {m}")),
            // SIGTERM: a client whose call reached the daemon gets a final
            // status, not a dropped connection (one that could not connect,
            // the socket already gone, is told so by its connect error).
            Answer::Transport(m) if signo == libc::SIGTERM && !m.starts_with("connect:") => {
                problems.push(format!("a call ended without a final status on SIGTERM: {m}"))
            }
            _ => {}
        }
        answers.push(answer);
    }
    drop(daemon);

    // Two daemons at once on the socket: exactly one serves.
    let (log_a, log_b) = (log(out), log(out));
    let mut a = Spawned::launch(kiln, socket, params, settings, &log_a)?;
    let mut b = Spawned::launch(kiln, socket, params, settings, &log_b)?;
    let (ra, rb) = tokio::join!(a.wait_ready(&log_a, Duration::from_secs(120)), b.wait_ready(&log_b, Duration::from_secs(120)));
    let (next, loser, loser_log) = match (ra, rb) {
        (Ok(()), Err(_)) => (a, b, log_b),
        (Err(_), Ok(())) => (b, a, log_a),
        (Ok(()), Ok(())) => bail!("round {round_no}: two daemons serve {} at once", socket.display()),
        (Err(e), Err(_)) => bail!("round {round_no}: no daemon restarted after {signal}: {e:#}"),
    };
    let mut loser = loser;
    match loser.wait_exit(Duration::from_secs(30)).await? {
        Some(status) if !status.success() => {}
        other => problems.push(format!("the second daemon did not refuse to start: {other:?}")),
    }
    // Its error is the log's first line (a backtrace may follow).
    if !std::fs::read_to_string(&loser_log).unwrap_or_default().contains("is in use by a running daemon") {
        problems.push(format!("the second daemon failed for another reason: {}", daemon::tail(&loser_log, 5)));
    }

    // The same ids again: proved again, against what is on disk now.
    for (spec, req) in requests {
        match prove(&next.target.grpc, &spec, req, verifier).await {
            Answer::Completed { verified: true } => {}
            other => problems.push(format!("after the restart a job ended {other:?}")),
        }
    }
    Ok((Round { signal, phase, delay_ms: delay.as_millis() as u64, answers, problems }, next))
}

/// One `Prove` call and what came of it.
async fn prove(grpc: &str, spec: &JobSpec, req: SubmitProofRequest, verifier: &Verifier) -> Answer {
    let call = async {
        let mut client = daemon::connect(grpc).await.map_err(|e| format!("connect: {e:#}"))?;
        client.prove(ProveRequest { submit: Some(req.clone()) }).await.map_err(|s| format!("{:?}: {}", s.code(), s.message()))
    };
    let answer = match tokio::time::timeout(CALL_LIMIT, call).await {
        Err(_) => return Answer::Hung,
        Ok(Err(e)) => return Answer::Transport(e),
        Ok(Ok(r)) => r.into_inner().result,
    };
    let Some(r) = answer else { return Answer::Failed("ProveResponse without a result".into()) };
    match r.status() {
        Status::Completed => {
            let (verifier, spec) = (verifier.clone(), spec.clone());
            let verified = tokio::task::spawn_blocking(move || verifier.check(&spec, &req, &r.proof)).await.ok().flatten();
            Answer::Completed { verified: verified == Some(true) }
        }
        Status::Cancelled => Answer::Cancelled(r.error_message),
        other => Answer::Failed(format!("{other:?}: {}", r.error_message)),
    }
}

/// Where the daemon was, from its last `/status`: generating parameters a
/// job needs, or the latest pipeline stage holding a partition.
fn phase_of(status: Option<&serde_json::Value>, requests: &[(JobSpec, SubmitProofRequest)], params: &Path) -> String {
    let Some(st) = status else { return "starting".into() };
    let e = &st["engine"];
    let missing = requests.iter().any(|(spec, _)| {
        !kiln_pipeline::synthetic::SyntheticJob::srs_spec(spec.circuit, spec.log_size, spec.effective_inputs(), params).path.exists()
    });
    if missing && e["jobs"]["in_flight"].as_u64().unwrap_or(0) > 0 {
        return "parameter generation".into();
    }
    let count = |stage: &str| {
        e["buffers"]["stages"].as_array().and_then(|s| s.iter().find(|x| x["stage"] == stage)).and_then(|x| x["count"].as_u64()).unwrap_or(0)
    };
    for (stage, name) in [("finalizing", "finalization"), ("on_gpu", "prover (copy, H, MSM)"), ("in_gpu_queue", "prover queue"), ("synthesized_waiting", "prover queue"), ("synthesizing", "synthesis")] {
        if count(stage) > 0 {
            return name.into();
        }
    }
    if e["jobs"]["in_flight"].as_u64().unwrap_or(0) > 0 { "queued".into() } else { "idle (all answered)".into() }
}

async fn daemon_stop(d: Spawned) -> String {
    d.stop(GRACE + Duration::from_secs(30)).await.unwrap_or_else(|e| format!("{e:#}"))
}

/// Writes `rounds.csv` and `summary.json` and prints the figures; whether
/// every round passed.
fn report(out: &Path, rounds: &[Round], seed: u64, took: Duration, leftovers: usize, exit: String) -> Result<bool> {
    let mut csv = String::from("round,signal,delay_ms,phase,answers,problems\n");
    let mut by_phase: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut by_answer: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in rounds.iter().enumerate() {
        *by_phase.entry((r.signal, r.phase.as_str())).or_default() += 1;
        for a in &r.answers {
            *by_answer.entry(a.name()).or_default() += 1;
        }
        let answers: Vec<_> = r.answers.iter().map(Answer::name).collect();
        csv.push_str(&format!("{i},{},{},{},{},\"{}\"\n", r.signal, r.delay_ms, r.phase, answers.join("|"), r.problems.join("; ").replace('"', "'")));
    }
    std::fs::write(out.join("rounds.csv"), csv)?;
    let failed: Vec<_> = rounds.iter().enumerate().filter(|(_, r)| !r.problems.is_empty()).map(|(i, _)| i).collect();
    let summary = serde_json::json!({
        "seed": seed,
        "rounds": rounds.len(),
        "seconds": took.as_secs(),
        "kills_by_signal_and_phase": by_phase.iter().map(|((s, p), n)| serde_json::json!({"signal": s, "phase": p, "rounds": n})).collect::<Vec<_>>(),
        "answers": by_answer,
        "rounds_with_problems": failed,
        "leftover_tmp_parameter_files": leftovers,
        "last_daemon_exit": exit,
    });
    std::fs::write(out.join("summary.json"), serde_json::to_string_pretty(&summary)?)?;
    eprintln!("kill-loop: {} rounds in {:?} (seed {seed})", rounds.len(), took);
    for ((signal, phase), n) in &by_phase {
        eprintln!("  {signal} during {phase}: {n}");
    }
    eprintln!("  client answers: {by_answer:?}");
    eprintln!("  rounds with problems: {failed:?}; leftover temporary parameter files (never used): {leftovers}; last daemon: {exit}");
    Ok(failed.is_empty())
}

fn build_debug_kiln(root: &Path) -> Result<PathBuf> {
    eprintln!("kill-loop: building kiln (debug)");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let ok = std::process::Command::new(cargo).current_dir(root).args(["build", "-p", "kiln-daemon", "--bin", "kiln"]).status()?.success();
    if !ok {
        bail!("cargo build --bin kiln failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    Ok(target.join("debug/kiln"))
}
