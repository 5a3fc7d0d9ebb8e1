//! `cargo xtask bench latency`: critical jobs' latency unloaded and under a
//! full bulk load, with kiln's critical lane and without (issue 25). It
//! builds the driver (xtask's `bench-latency`, release) and runs it here;
//! driver flags go after `--` (`bench-latency --help`).
//!
//! With `--build-only` it builds the kernels and the driver and puts into
//! `--out` (default `.gpu-latency/`, gitignored) what a GPU machine without
//! Rust needs: the stripped driver, the Filecoin inputs of `--sector-size`
//! (gen-vanilla payloads, made here when missing) and a `run.sh` that runs
//! the synthetic workload, then WinningPoSt and WindowPoSt against PoRep
//! and SnapDeals (their parameters are made there where missing).
use std::path::PathBuf;
use std::process::Command;

use anyhow::{anyhow, bail, Result};
use kiln_filecoin::registered::{is_test_sector_size, parse_sector_size, sector_size_name};

use crate::peer_build::{build_xtask_bin, carry, kernels_and_cuda_root, mib, run_ok, target_dir};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only build; put the driver, the inputs and run.sh into --out.
    #[arg(long)]
    build_only: bool,
    /// With --build-only: the Filecoin inputs' sector size (2KiB, 8MiB, 512MiB).
    #[arg(long, default_value = "8MiB")]
    sector_size: String,
    /// With --build-only: the directory to carry (default .gpu-latency/).
    /// Otherwise: where the driver writes table.md, results.json, proofs.jsonl.
    #[arg(long)]
    out: Option<PathBuf>,
    /// More driver flags (see `bench-latency --help`), after `--`.
    #[arg(last = true)]
    driver_args: Vec<String>,
}

/// The GPU machine's entry point.
fn run_sh(size: &str) -> String {
    format!(
        r#"#!/usr/bin/env bash
# Critical jobs' latency unloaded and under a full bulk load, kiln's critical
# lane on (isolated) and off (shared), on a GPU machine without Rust (written
# by `cargo xtask bench latency --build-only`).
#   ./run.sh                synthetic (WinningPoSt-like 2^16 against PoRep-like
#                           2^20 x4), then the Filecoin kinds at {size}
#   ./run.sh synthetic      only the synthetic workload
#   ./run.sh filecoin ...   only the Filecoin kinds (more bench-latency flags after)
#   ./run.sh all --params-only   only the parameters (a first step where time is short)
# Filecoin parameters: $FIL_PROOFS_PARAMETER_CACHE (default /tmp/kiln-fil-params,
# made where missing). Results (table.md, results.json, proofs.jsonl, log.txt
# per workload): $OUT (default ./results).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export FIL_PROOFS_PARAMETER_CACHE="${{FIL_PROOFS_PARAMETER_CACHE:-/tmp/kiln-fil-params}}"
out="${{OUT:-$here/results}}"
what="${{1:-all}}"; shift || true
mkdir -p "$out"
{{ echo "host: $(nproc) cores"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true; }} | tee -a "$out/log.txt"
# The daemon's H200 settings (xtask/soak/h200.toml): synthesis is the CPU's share.
engine=(--engine synthesis_workers=12 --engine gpu_queue_depth=2)
if [ "$what" = all ] || [ "$what" = synthetic ]; then
  mkdir -p "$out/synthetic"
  "$here/bench-latency" "${{engine[@]}}" --params-dir /tmp/kiln-params --out "$out/synthetic" "$@" 2>&1 | tee -a "$out/synthetic/log.txt"
fi
if [ "$what" = all ] || [ "$what" = filecoin ]; then
  mkdir -p "$out/filecoin"
  "$here/bench-latency" "${{engine[@]}}" --inputs "$here/inputs" --samples 20 --out "$out/filecoin" "$@" 2>&1 | tee -a "$out/filecoin/log.txt"
fi
"#
    )
}

pub fn run(args: Args) -> Result<()> {
    let root = crate::workspace_root();
    let target = target_dir(&root);
    if args.build_only {
        let size = parse_sector_size(&args.sector_size).map_err(|e| anyhow!(e))?;
        if !is_test_sector_size(size) {
            bail!("the carried inputs are of a test sector size (2KiB, 8MiB, 512MiB): kiln generates their parameters");
        }
        let name = sector_size_name(size);
        let inputs = crate::bench_filecoin::ensure_inputs(size, &target.join("filecoin-inputs").join(&name), 1)?;
        kernels_and_cuda_root(&target)?;
        let driver = build_xtask_bin(&root, &target, "bench-latency")?;
        let dir = args.out.clone().unwrap_or_else(|| root.join(".gpu-latency"));
        let total = carry(&dir, &[&driver], &inputs, &run_sh(&name))?;
        eprintln!("xtask bench latency: {} holds {:.1} MiB (bench-latency, {name} inputs, run.sh)", dir.display(), mib(total));
        let limit = crate::bench_filecoin::CARRY_LIMIT;
        if total > limit {
            bail!("{} holds {:.1} MiB, over the {:.0} MiB a GPU run can carry", dir.display(), mib(total), mib(limit));
        }
        let extra = if args.driver_args.is_empty() { String::new() } else { format!(" all {}", args.driver_args.join(" ")) };
        println!("on the GPU machine, in that directory: OUT=$OUT ./run.sh{extra}");
        return Ok(());
    }
    let driver = build_xtask_bin(&root, &target, "bench-latency")?;
    let mut cmd = Command::new(&driver);
    cmd.args(&args.driver_args);
    if let Some(out) = &args.out {
        cmd.arg("--out").arg(out);
    }
    run_ok(&mut cmd, "running bench-latency")
}
