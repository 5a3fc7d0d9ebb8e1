//! What the drivers that run kiln's engine in-process share (`bench-filecoin`,
//! `bench-latency`; included in each by `#[path]`: xtask has no library
//! target): kiln's backends as the daemon picks them (kiln-groth16's
//! `Backends::open`), and the Filecoin
//! payloads `gen-vanilla` writes turned into the jobs and parameter sets
//! kiln's daemon would make of them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::registered::{post_proof, seal_proof, update_proof};
use kiln_filecoin::{porep, post, snap, ParamSet};
use kiln_groth16::{BackendOptions, Backends, ProverBackend};
use kiln_pipeline::JobSource;

/// kiln's own spans and events (per-partition phase timings at info from
/// kiln_pipeline) on stderr when `KILN_LOG` asks, as the daemon does.
pub fn log_to_stderr() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("KILN_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

/// kiln's backends for `choice` as the daemon opens them: `auto` (every
/// GPU that opens with kiln's kernels, `gpu_workers` workers each, else
/// the CPU), `gpu` (an error without one) or `cpu`; and a line saying what
/// runs the proofs and why.
pub fn backends(choice: &str, gpu_workers: usize) -> Result<(Vec<Arc<dyn ProverBackend>>, String)> {
    let options = BackendOptions { workers_per_gpu: gpu_workers, ..Default::default() };
    let chosen = Backends::open(choice.parse()?, &options)?;
    Ok((chosen.workers, format!("kiln {}", chosen.why)))
}

pub fn kind_of(name: &str) -> Result<PayloadKind> {
    let k = match name {
        "porep" | "porep-c2" => PayloadKind::PorepSealCommit,
        "snap" | "snap-deals" => PayloadKind::SnapDealsUpdate,
        "window" | "window-post" => PayloadKind::WindowPostPartition,
        "winning" | "winning-post" => PayloadKind::WinningPost,
        other => bail!("unknown kind {other:?} (porep, snap, window, winning)"),
    };
    Ok(k)
}

/// The job kiln's daemon makes of this payload (kiln-filecoin's one
/// payload -> job mapping).
pub fn job_for(p: &Payload) -> Result<Arc<dyn JobSource>, String> {
    kiln_filecoin::job_for_payload(p)
}

/// The parameter set of the payload's registered proof (the files both
/// provers and the verifiers read), and filecoin-proofs' name for that proof.
pub fn param_set_for(p: &Payload) -> Result<(ParamSet, String), String> {
    match p.proof_kind {
        PayloadKind::PorepSealCommit => {
            let proof = seal_proof(p.registered_proof)?;
            Ok((porep::param_set(proof)?, format!("{proof:?}")))
        }
        PayloadKind::SnapDealsUpdate => {
            let proof = update_proof(p.registered_proof)?;
            Ok((snap::param_set(proof), format!("{proof:?}")))
        }
        PayloadKind::WindowPostPartition | PayloadKind::WinningPost => {
            let proof = post_proof(p.registered_proof)?;
            Ok((post::param_set(proof)?, format!("{proof:?}")))
        }
    }
}

/// Makes every payload's parameter set exist, the missing ones generated
/// at the same time (kiln's generator spreads each over every core; the
/// sets' single-threaded phases then overlap).
pub fn ensure_params(payloads: &[Payload], progress: &(dyn Fn(&str) + Sync)) -> Result<()> {
    let sets = payloads.iter().map(param_set_for).collect::<Result<Vec<_>, _>>().map_err(|e| anyhow!(e))?;
    // Test setups are made by the engine when it first needs them.
    let (sets, test_setups): (Vec<_>, Vec<_>) = sets.into_iter().partition(|(set, _)| set.test_setup_dir().is_none());
    for (set, name) in &test_setups {
        progress(&format!("{name} ({}): no .params file; proved against a TEST SETUP in {}", set.label, set.test_setup_dir().expect("partitioned").display()));
    }
    let missing = sets.iter().filter(|(set, _)| !set.params_path().exists()).count();
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        // A line every 30 s while sets are generated (kiln's progress bar
        // draws only on a terminal, and a device run is logged to a file).
        if missing > 0 {
            let finished = &finished;
            s.spawn(move || {
                let t = Instant::now();
                let mut next = 30;
                while !finished.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    if t.elapsed().as_secs() >= next && !finished.load(Ordering::Relaxed) {
                        progress(&format!("still generating parameters ({missing} set(s) were missing, {next} s so far)"));
                        next += 30;
                    }
                }
            });
        }
        let handles: Vec<_> = sets
            .iter()
            .map(|(set, name)| {
                s.spawn(move || -> Result<()> {
                    let existed = set.params_path().exists();
                    if !existed {
                        progress(&format!("generating parameters for {name} ({})", set.label));
                    }
                    let t = Instant::now();
                    set.ensure().map_err(|e| anyhow!("parameters of {name}: {e}"))?;
                    let size = std::fs::metadata(set.params_path()).map(|m| m.len()).unwrap_or(0);
                    let what = if existed { "present".to_string() } else { format!("generated in {:.1} s", t.elapsed().as_secs_f64()) };
                    progress(&format!("parameters of {name} {what}: {} ({:.0} MiB)", set.params_path().display(), size as f64 / (1u64 << 20) as f64));
                    Ok(())
                })
            })
            .collect();
        let r = handles.into_iter().map(|h| h.join().map_err(|_| anyhow!("parameter generation panicked"))?).collect::<Result<Vec<()>>>();
        finished.store(true, Ordering::Relaxed);
        r
    })?;
    Ok(())
}
