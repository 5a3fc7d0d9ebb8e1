//! `cargo xtask bench groth16 --peer supraseal`: kiln's GPU prover against
//! SupraSeal C2 on the same circuits, parameters and GPU, in one run.
//!
//! It builds three things, then runs the driver:
//! - the kernels (`cargo xtask kernels`, which also finds or installs nvcc),
//! - the peer, `bench/peer-supraseal` (see [`crate::peer_build`]),
//! - the driver, xtask's `bench-groth16` binary (release).
//!
//! With `--build-only` it copies both stripped binaries into `--out`
//! (default `.gpu-peer/`, gitignored) for a GPU machine without Rust, and
//! prints the command to run there. Otherwise it runs the driver here, with
//! `--out` as its results directory; driver flags go after `--`.
use std::path::PathBuf;
use std::process::Command;

use anyhow::Result;

use crate::peer_build::{build_peer, build_xtask_bin, copy_stripped, kernels_and_cuda_root, mib, run_ok, target_dir};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// bellperson 0.27 with `cuda-supraseal` (SupraSeal C2 on sppark).
    Supraseal,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The prover to compare against.
    #[arg(long, value_enum, default_value = "supraseal")]
    peer: Peer,
    /// log2 circuit sizes (passed to the driver).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<u32>,
    /// Only build the stripped driver and peer binaries into --out.
    #[arg(long)]
    build_only: bool,
    /// With --build-only: where the binaries go (default .gpu-peer/).
    /// Otherwise: where the driver writes table.md, results.json, proofs.jsonl.
    #[arg(long)]
    out: Option<PathBuf>,
    /// More driver flags (see `bench-groth16 --help`), after `--`.
    #[arg(last = true)]
    driver_args: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    let Peer::Supraseal = args.peer;
    let root = crate::workspace_root();
    let target = target_dir(&root);
    let cuda_root = kernels_and_cuda_root(&target)?;
    let peer = build_peer(&root, &target, &cuda_root)?.join("peer-supraseal");
    let driver = build_xtask_bin(&root, &target, "bench-groth16")?;

    let mut driver_args: Vec<String> = Vec::new();
    if !args.sizes.is_empty() {
        driver_args.push("--sizes".into());
        driver_args.push(args.sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(","));
    }
    driver_args.extend(args.driver_args.iter().cloned());

    if args.build_only {
        let dir = args.out.clone().unwrap_or_else(|| root.join(".gpu-peer"));
        std::fs::create_dir_all(&dir)?;
        let a = copy_stripped(&driver, &dir)?;
        let b = copy_stripped(&peer, &dir)?;
        eprintln!(
            "xtask bench groth16: {} holds bench-groth16 ({:.1} MiB) and peer-supraseal ({:.1} MiB)",
            dir.display(),
            mib(a),
            mib(b)
        );
        let extra = if driver_args.is_empty() { "--sizes 20,22".to_string() } else { driver_args.join(" ") };
        println!("on the GPU machine, in that directory: ./bench-groth16 --peer-bin ./peer-supraseal {extra} --params-dir /tmp/kiln-params --out $OUT");
        return Ok(());
    }
    let mut cmd = Command::new(&driver);
    cmd.arg("--peer-bin").arg(&peer).args(&driver_args);
    if let Some(out) = &args.out {
        cmd.arg("--out").arg(out);
    }
    run_ok(&mut cmd, "running bench-groth16")
}
