//! `cargo xtask bench kernels`: build the kernels and the release bench
//! binary (kiln-gpu's `gpu_bench` example), then run it. Needs a GPU to
//! measure; without one the binary says "no GPU: skipped". To run on a GPU
//! machine without Rust, copy target/release/examples/gpu_bench there.
use std::process::Command;

use anyhow::{bail, Result};

#[derive(clap::Args)]
pub struct Args {
    /// Which parts to run (ntt, h, g1, g2, pasta-ntt, pallas); all when none
    /// given. The Pasta parts time halo2's CPU peers too (KILN_BENCH_NO_CPU=1: not).
    parts: Vec<String>,
    /// Print per-stage MSM timings (sets KILN_PROFILE).
    #[arg(long)]
    profile: bool,
}

pub fn run(args: Args) -> Result<()> {
    crate::kernels::run(crate::kernels::Args::default())?;
    let root = crate::workspace_root();
    let ok = Command::new(env!("CARGO")).current_dir(&root)
        .args(["build", "--release", "-p", "kiln-gpu", "--example", "gpu_bench"]).status()?.success();
    if !ok {
        bail!("building gpu_bench failed");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map(std::path::PathBuf::from).unwrap_or_else(|| root.join("target"));
    let mut cmd = Command::new(target.join("release/examples/gpu_bench"));
    cmd.args(&args.parts);
    if args.profile {
        cmd.env("KILN_PROFILE", "1");
    }
    if !cmd.status()?.success() {
        bail!("gpu_bench failed");
    }
    Ok(())
}
