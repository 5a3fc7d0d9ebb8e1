//! `kiln prove | status | preload | evict | metrics` against a running
//! daemon: the command lines are parsed as the binary parses them and run
//! over real gRPC (UNIX socket and TCP), their reports read as an operator
//! would.

use std::time::Duration;

use clap::Parser;
use kiln_daemon::cli::{Cli, Cmd};
use kiln_daemon::serve::Bound;
use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_proto::v1::Priority;

use crate::harness::{start, synthetic, verify, Transport};
use crate::SERIAL;

/// Runs `kiln <args>` (a client subcommand) in this process: its report, or its error.
async fn kiln(args: &[&str]) -> Result<String, String> {
    let cli = Cli::try_parse_from(std::iter::once("kiln").chain(args.iter().copied())).map_err(|e| e.to_string())?;
    let Cmd::Client(cmd) = cli.cmd else { panic!("{args:?} is not a client subcommand") };
    let mut out = Vec::new();
    match kiln_daemon::client::run(cmd, &mut out).await {
        Ok(()) => Ok(String::from_utf8(out).unwrap()),
        Err(e) => Err(format!("{e:#}")),
    }
}

fn addr(bound: &Bound) -> String {
    match bound {
        Bound::Unix(p) => format!("unix://{}", p.display()),
        // cuzk's bare HOST:PORT form.
        Bound::Tcp(a) => a.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_subcommands_drive_a_running_daemon() {
    let _serial = SERIAL.lock().await;
    crate::harness::ensure_params(8);
    let d = start(Transport::Unix, &[]).await;
    let a = addr(d.grpc());
    let dir = tempfile::tempdir().unwrap();
    let proof_file = dir.path().join("proof.bin");

    let report = kiln(&["prove", "--addr", &a, "--kind", "synthetic", "--log-size", "8", "--partitions", "2", "--out", proof_file.to_str().unwrap()])
        .await
        .unwrap();
    assert!(report.starts_with("COMPLETED KILN_SYNTHETIC job "), "{report}");
    assert!(report.contains("synthesis ") && report.contains(" ms (in the daemon)") && report.contains("proof written to"), "{report}");
    let proof = std::fs::read(&proof_file).unwrap();
    verify(&synthetic("-", 8, 2, Priority::Normal, 0), &proof).expect("the written proof verifies");

    let status = kiln(&["status", "--addr", &a]).await.unwrap();
    for words in ["proofs completed 1 · failed 0", "backends: cpu", "queues: empty", "parameters synthetic-filecoin-like-2^8-4in: HOT", "buffers: none held"] {
        assert!(status.contains(words), "`kiln status` lacks {words:?}:\n{status}");
    }

    let already = kiln(&["preload", "--addr", &a, "synthetic-filecoin-like-2^8"]).await.unwrap();
    assert_eq!(already, "synthetic-filecoin-like-2^8: already loaded\n");
    let evicted = kiln(&["evict", "--addr", &a, "synthetic-filecoin-like-2^8"]).await.unwrap();
    assert!(evicted.starts_with("synthetic-filecoin-like-2^8: evicted, ") && evicted.contains("iB freed"), "{evicted}");
    let again = kiln(&["evict", "--addr", &a, "synthetic-filecoin-like-2^8"]).await.unwrap();
    assert_eq!(again, "synthetic-filecoin-like-2^8: was not loaded\n");
    let loaded = kiln(&["preload", "--addr", &a, "synthetic-filecoin-like-2^8"]).await.unwrap();
    assert!(loaded.contains(": loaded in "), "{loaded}");
    let unknown = kiln(&["preload", "--addr", &a, "porep-3g"]).await.unwrap_err();
    assert!(unknown.contains("PreloadSRS \"porep-3g\"") && unknown.contains("NotFound"), "{unknown}");

    // A request the daemon refuses: the error says why, and the refusal is counted.
    let bad = dir.path().join("bad-winning.json");
    let mut p = Payload::new(PayloadKind::WinningPost, 2048, 0);
    p.vanilla_proofs = vec![vec![1, 2, 3]];
    p.randomness = vec![0; 32];
    std::fs::write(&bad, serde_json::to_vec(&p).unwrap()).unwrap();
    let refused = kiln(&["prove", "--addr", &a, "--payload", bad.to_str().unwrap()]).await.unwrap_err();
    assert!(refused.contains("SubmitProof (WINNING_POST)") && refused.contains("not a bincode FallbackPoStSectorProof"), "{refused}");
    let wrong_kind = kiln(&["prove", "--addr", &a, "--kind", "snap", "--payload", bad.to_str().unwrap()]).await.unwrap_err();
    assert!(wrong_kind.contains("holds a WINNING_POST request, not --kind Snap"), "{wrong_kind}");
    for (args, words) in [
        (&["prove", "--addr", &a, "--kind", "porep"][..], "--kind porep needs --c1 FILE"),
        (&["prove", "--addr", &a][..], "say what to prove"),
        (&["prove", "--addr", &a, "--kind", "wpost", "--c1", "x.json"][..], "--c1 is a PoRep C1 output"),
        (&["status", "--addr", "unix:/nonexistent/kiln.sock"][..], "connecting to the daemon at unix:/nonexistent/kiln.sock"),
    ] {
        let e = kiln(args).await.unwrap_err();
        assert!(e.contains(words), "{args:?}: {e}");
    }

    let metrics = kiln(&["metrics", "--addr", &a]).await.unwrap();
    for line in [
        "kiln_job_duration_seconds_count{kind=\"synthetic\"} 1",
        "kiln_job_gpu_seconds_count{kind=\"synthetic\"} 1",
        "kiln_job_outcomes_total{kind=\"synthetic\",outcome=\"completed\"} 1",
        "kiln_requests_refused_total{kind=\"WINNING_POST\",code=\"InvalidArgument\"} 1",
        "kiln_jobs_total{outcome=\"completed\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "`kiln metrics` lacks {line:?}:\n{metrics}");
    }
    assert!(metrics.lines().any(|l| l.starts_with("kiln_build_info{version=\"") && l.ends_with(" 1")), "{metrics}");
    d.wait_idle(Duration::from_secs(10)).await;
    d.stop().await;
}

/// A real Filecoin kind from the payload file `cargo xtask gen-vanilla`
/// would write, over TCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kiln_prove_takes_a_gen_vanilla_payload_file() {
    let _serial = SERIAL.lock().await;
    let p = tokio::task::spawn_blocking(|| crate::filecoin::payload(PayloadKind::WindowPostPartition)).await.unwrap();
    let d = start(Transport::Tcp, &[("engine.memory_budget_bytes", "2GiB")]).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(PayloadKind::WindowPostPartition.file_name());
    std::fs::write(&file, serde_json::to_vec_pretty(&p).unwrap()).unwrap();
    let proof_file = dir.path().join("proof.bin");
    let a = addr(d.grpc());
    let report = kiln(&["prove", "--addr", &a, "--kind", "wpost", "--payload", file.to_str().unwrap(), "--out", proof_file.to_str().unwrap()])
        .await
        .unwrap();
    assert!(report.starts_with("COMPLETED WINDOW_POST_PARTITION job "), "{report}");
    let proof = std::fs::read(&proof_file).unwrap();
    tokio::task::spawn_blocking(move || kiln_filecoin::verify::verify(&p, &proof)).await.unwrap().expect("filecoin-proofs accepts it");
    d.wait_idle(Duration::from_secs(30)).await;
    d.stop().await;
}
