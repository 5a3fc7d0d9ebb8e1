//! `kiln prove`: builds one SubmitProofRequest from a file (a PoRep C1
//! output, or a payload file of any Filecoin kind as `cargo xtask
//! gen-vanilla` writes them) or from synthetic sizes, submits it, and waits
//! with a progress line until the answer comes.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use kiln_filecoin::payload::Payload;
use kiln_proto::v1::await_proof_response::Status;
use kiln_proto::v1::{AwaitProofRequest, AwaitProofResponse, CancelProofRequest, GetStatusRequest, Priority, ProofKind, SubmitProofRequest};
use serde_json::Value;

use super::{bytes, connect_target, Target};

/// The proof kinds, by cuzk-bench's names (`porep`, `snap`, `wpost`, `winning`) and kiln's.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProveKind {
    #[value(alias = "porep-c2")]
    Porep,
    #[value(alias = "snap-deals")]
    Snap,
    #[value(alias = "window-post")]
    Wpost,
    #[value(alias = "winning-post")]
    Winning,
    /// kiln's built-in circuits (no Filecoin parameters needed).
    Synthetic,
}

impl ProveKind {
    fn wire(self) -> ProofKind {
        match self {
            ProveKind::Porep => ProofKind::PorepSealCommit,
            ProveKind::Snap => ProofKind::SnapDealsUpdate,
            ProveKind::Wpost => ProofKind::WindowPostPartition,
            ProveKind::Winning => ProofKind::WinningPost,
            ProveKind::Synthetic => ProofKind::KilnSynthetic,
        }
    }
}

/// `kiln prove`.
#[derive(clap::Args, Debug)]
pub struct ProveArgs {
    #[command(flatten)]
    pub target: Target,
    /// Proof kind: porep, snap, wpost, winning or synthetic [default: the payload file's kind].
    #[arg(long, value_enum)]
    pub kind: Option<ProveKind>,
    /// PoRep: the C1 output, as Curio sends it ({SectorNum, Phase1Out, SectorSize})
    /// or as filecoin-proofs writes it (SealCommitPhase1Output JSON).
    #[arg(long, value_name = "FILE", conflicts_with = "payload")]
    pub c1: Option<PathBuf>,
    /// Any Filecoin kind: a request payload as `cargo xtask gen-vanilla` writes it
    /// (porep-c2.json, snap-deals.json, window-post.json, winning-post.json).
    #[arg(long, value_name = "FILE")]
    pub payload: Option<PathBuf>,
    /// Sector number put in the envelope of a raw C1 output.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub sector_number: u64,
    /// Synthetic: log2 of the constraints per partition.
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub log_size: u32,
    /// Synthetic: partitions (proofs) in the job.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub partitions: u32,
    /// low, normal, high or critical [default: the kind's, as Curio sends it].
    #[arg(long, value_parser = ["low", "normal", "high", "critical"])]
    pub priority: Option<String>,
    /// The request's idempotency key [default: a new one].
    #[arg(long)]
    pub request_id: Option<String>,
    /// Write the proof bytes to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Stop waiting after this many seconds (the job keeps running in the daemon).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
}

/// Builds the request `args` describe.
pub fn request(args: &ProveArgs) -> Result<SubmitProofRequest> {
    let mut req = match (&args.c1, &args.payload, args.kind) {
        (Some(path), None, None | Some(ProveKind::Porep)) => porep_from_c1(&read(path)?, args.sector_number).with_context(|| format!("--c1 {}", path.display()))?,
        (Some(_), None, Some(other)) => bail!("--c1 is a PoRep C1 output; --kind {other:?} takes --payload FILE"),
        (Some(_), Some(_), _) => bail!("give --c1 or --payload, not both"),
        (None, Some(path), kind) => {
            let payload: Payload = serde_json::from_slice(&read(path)?)
                .with_context(|| format!("--payload {}: not a request payload file (as cargo xtask gen-vanilla writes)", path.display()))?;
            let req = payload.into_request();
            if let Some(k) = kind.filter(|k| k.wire() as i32 != req.proof_kind) {
                bail!("--payload {} holds a {} request, not --kind {k:?}", path.display(), ProofKind::try_from(req.proof_kind).map(|k| k.as_str_name()).unwrap_or("?"));
            }
            req
        }
        (None, None, Some(ProveKind::Synthetic)) => SubmitProofRequest {
            proof_kind: ProofKind::KilnSynthetic as i32,
            synthetic_log_size: args.log_size,
            synthetic_partitions: args.partitions,
            ..Default::default()
        },
        (None, None, Some(ProveKind::Porep)) => bail!("--kind porep needs --c1 FILE (or --payload FILE)"),
        (None, None, Some(k)) => bail!("--kind {k:?} needs --payload FILE (cargo xtask gen-vanilla writes them)"),
        (None, None, None) => bail!("say what to prove: --c1 FILE, --payload FILE, or --kind synthetic"),
    };
    req.request_id = args.request_id.clone().unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        format!("kiln-cli-{}-{nanos}", std::process::id())
    });
    if let Some(p) = &args.priority {
        req.priority = Priority::from_str_name(&p.to_ascii_uppercase()).context("priority")? as i32;
    }
    Ok(req)
}

fn read(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// A POREP_SEAL_COMMIT request from a C1 file: Curio's envelope as it is,
/// or filecoin-proofs' SealCommitPhase1Output JSON put in one.
pub fn porep_from_c1(data: &[u8], sector_number: u64) -> Result<SubmitProofRequest> {
    let json: Value = serde_json::from_slice(data).context("not JSON")?;
    let mut req = SubmitProofRequest { proof_kind: ProofKind::PorepSealCommit as i32, ..Default::default() };
    if json.get("Phase1Out").is_some() {
        req.sector_size = json.get("SectorSize").and_then(Value::as_u64).context("the C1 envelope has no SectorSize")?;
        req.sector_number = json.get("SectorNum").and_then(Value::as_u64).context("the C1 envelope has no SectorNum")?;
        req.vanilla_proof = data.to_vec();
        return Ok(req);
    }
    if json.get("proof_kind").is_some() {
        bail!("this is a request payload file: pass it with --payload");
    }
    let name = json
        .get("registered_proof")
        .and_then(Value::as_str)
        .context("neither Curio's C1 envelope {SectorNum, Phase1Out, SectorSize} nor a SealCommitPhase1Output (no registered_proof)")?;
    let (number, proof) = (0..32)
        .filter_map(|n| kiln_filecoin::registered::seal_proof(n).ok().map(|p| (n, p)))
        .find(|(_, p)| format!("{p:?}") == name)
        .with_context(|| format!("unknown registered_proof {name:?}"))?;
    req.sector_size = u64::from(proof.sector_size());
    req.registered_proof = number;
    req.sector_number = sector_number;
    let envelope = serde_json::json!({
        "SectorNum": sector_number,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(data),
        "SectorSize": req.sector_size,
    });
    req.vanilla_proof = serde_json::to_vec(&envelope)?;
    Ok(req)
}

/// How often the progress line asks the daemon for its queues.
const STATUS_EVERY: Duration = Duration::from_secs(1);

pub(super) async fn run(args: ProveArgs, out: &mut (dyn Write + Send)) -> Result<()> {
    let req = request(&args)?;
    let kind = ProofKind::try_from(req.proof_kind).map(|k| k.as_str_name()).unwrap_or("?");
    let mut client = connect_target(&args.target).await?;
    let started = Instant::now();
    let submitted = client.submit_proof(req.clone()).await.with_context(|| format!("SubmitProof ({kind})"))?.into_inner();
    let job = submitted.job_id.clone();
    let progress = Progress::new(&format!("{kind} job {job}"));
    progress.say(&format!("submitted{}", if submitted.existing { " (an existing job with this request id)" } else { "" }));
    let deadline = args.timeout.map(|s| started + Duration::from_secs(s));
    let mut last_status = Instant::now() - STATUS_EVERY;
    let answer: AwaitProofResponse = loop {
        if last_status.elapsed() >= STATUS_EVERY {
            last_status = Instant::now();
            if let Ok(st) = client.get_status(GetStatusRequest {}).await {
                let st = st.into_inner();
                let (pending, running) = st.queues.iter().fold((0, 0), |(p, r), q| (p + q.pending, r + q.in_progress));
                let gpus: Vec<String> = st.gpus.iter().filter(|g| g.current_job_id == job).map(|g| format!("gpu {}", g.ordinal)).collect();
                let on = if gpus.is_empty() { String::new() } else { format!(", on {}", gpus.join(" ")) };
                progress.say(&format!("waiting: daemon has {pending} jobs pending and {running} in progress{on}"));
            }
        }
        let wait = AwaitProofRequest { job_id: job.clone(), timeout_ms: 250 };
        let awaited = tokio::select! {
            r = client.await_proof(wait) => Some(r),
            _ = tokio::signal::ctrl_c() => None,
        };
        match awaited {
            Some(r) => {
                let r = r.context("AwaitProof")?.into_inner();
                if r.status() != Status::Timeout {
                    break r;
                }
            }
            None => {
                progress.finish();
                let c = client.cancel_proof(CancelProofRequest { job_id: job.clone() }).await.context("CancelProof")?.into_inner();
                bail!("interrupted: cancelled job {job} (it was {})", if c.was_running { "running" } else { "queued" });
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            progress.finish();
            bail!("gave up waiting after {} s; job {job} keeps running in the daemon", args.timeout.unwrap_or(0));
        }
    };
    progress.finish();
    match answer.status() {
        Status::Completed => {
            writeln!(out, "COMPLETED {kind} job {job}: {} of proof in {:.2} s", bytes(answer.proof.len() as u64), started.elapsed().as_secs_f64())?;
            writeln!(
                out,
                "  queue {} ms · parameters {} ms · synthesis {} ms · gpu {} ms · total {} ms (in the daemon)",
                answer.queue_wait_ms, answer.srs_load_ms, answer.synthesis_ms, answer.gpu_compute_ms, answer.total_ms
            )?;
            if let Some(path) = &args.out {
                std::fs::write(path, &answer.proof).with_context(|| format!("writing the proof to {}", path.display()))?;
                writeln!(out, "  proof written to {}", path.display())?;
            }
            Ok(())
        }
        other => bail!("{} {kind} job {job}: {}", other.as_str_name(), answer.error_message),
    }
}

/// The waiting line: redrawn in place on a terminal, a line every ten
/// seconds otherwise (logs, pipes).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    started: Instant,
    what: String,
    last_plain: std::sync::Mutex<Option<Instant>>,
}

impl Progress {
    fn new(what: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("valid template"));
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress { bar, started: Instant::now(), what: what.to_string(), last_plain: std::sync::Mutex::new(None) }
    }

    fn say(&self, msg: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(format!("{}: {msg}", self.what)),
            None => {
                let mut last = self.last_plain.lock().unwrap_or_else(|p| p.into_inner());
                if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    *last = Some(Instant::now());
                    eprintln!("[{:>6.1} s] {}: {msg}", self.started.elapsed().as_secs_f64(), self.what);
                }
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use kiln_filecoin::payload::PayloadKind;

    use super::*;

    #[test]
    fn c1_files_in_both_forms() {
        let envelope = br#"{"SectorNum": 7, "Phase1Out": "e30=", "SectorSize": 2048}"#;
        let r = porep_from_c1(envelope, 0).unwrap();
        assert_eq!((r.sector_size, r.sector_number, r.vanilla_proof.as_slice()), (2048, 7, &envelope[..]));

        let raw = br#"{"registered_proof": "StackedDrg2KiBV1_1", "vanilla_proofs": []}"#;
        let r = porep_from_c1(raw, 9).unwrap();
        assert_eq!((r.sector_size, r.registered_proof, r.sector_number), (2048, 5, 9));
        let env: Value = serde_json::from_slice(&r.vanilla_proof).unwrap();
        assert_eq!(env["SectorNum"], 9);
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(env["Phase1Out"].as_str().unwrap()).unwrap(), raw);

        for (bad, words) in [
            (&b"{}"[..], "neither Curio's C1 envelope"),
            (br#"{"registered_proof": "StackedDrg3KiBV1"}"#, "unknown registered_proof"),
            (br#"{"proof_kind": "WINNING_POST"}"#, "--payload"),
            (b"\x00", "not JSON"),
        ] {
            let e = format!("{:#}", porep_from_c1(bad, 0).unwrap_err());
            assert!(e.contains(words), "{e}");
        }
    }

    #[test]
    fn payload_fields_map_to_the_request() {
        let mut p = Payload::new(PayloadKind::WindowPostPartition, 2048, 10);
        p.vanilla_proofs = vec![vec![1, 2]];
        p.randomness = vec![3; 32];
        p.partition_index = 2;
        p.miner_id = 1000;
        let r = p.into_request();
        assert_eq!(r.proof_kind, ProofKind::WindowPostPartition as i32);
        assert_eq!((r.sector_size, r.registered_proof, r.partition_index, r.miner_id), (2048, 10, 2, 1000));
        assert_eq!((r.vanilla_proofs, r.randomness), (vec![vec![1, 2]], vec![3; 32]));
    }
}
