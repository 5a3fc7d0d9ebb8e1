//! `cargo xtask bench filecoin --peer supraseal`: kiln against
//! filecoin-proofs' SupraSeal path (what Curio runs) on the four Filecoin
//! proof kinds, same inputs, parameter files and GPU, in one run (issue 7).
//!
//! It makes sure the inputs exist (`gen-vanilla` payloads of `--sector-size`,
//! default 8 MiB, in target/filecoin-inputs/<size>), builds the driver
//! (xtask's `bench-filecoin`, release) and, where it will be used, the peer
//! (`peer-filecoin` of bench/peer-supraseal, see [`crate::peer_build`]),
//! then runs the driver; driver flags go after `--`.
//!
//! With `--build-only` it builds the kernels, the peer and the driver and
//! puts in `--out` (default `.gpu-fil8/`, gitignored) everything a GPU
//! machine without Rust needs: both stripped binaries, the inputs and a
//! `run.sh` that makes the parameters (kiln's generator, every core) and
//! runs both provers. Without a GPU here, the peer is not built (the driver
//! would skip it anyway): kiln runs on its CPU backend, a dry run of the rest.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Result};
use kiln_filecoin::payload::PayloadKind;
use kiln_filecoin::registered::{is_test_sector_size, parse_sector_size, sector_size_name};
use rand::SeedableRng;

use crate::bench_groth16::Peer;
use crate::peer_build::{build_peer, build_xtask_bin, carry, kernels_and_cuda_root, mib, run_ok, target_dir};

/// The carried directory must fit the GPU machine's transfer limit (64 MiB, with room).
pub(crate) const CARRY_LIMIT: u64 = 60 << 20;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The prover to compare against.
    #[arg(long, value_enum, default_value = "supraseal")]
    peer: Peer,
    /// Sector size of the inputs: 2KiB (a CPU dry run), 8MiB, 512MiB.
    #[arg(long, default_value = "8MiB")]
    sector_size: String,
    /// The gen-vanilla payloads (default target/filecoin-inputs/<size>; generated there when missing).
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// Seed of generated inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only build; put binaries, inputs and run.sh into --out.
    #[arg(long)]
    build_only: bool,
    /// With --build-only: the directory to carry (default .gpu-fil8/ for 8MiB).
    /// Otherwise: where the driver writes table.md, results.json, proofs.jsonl.
    #[arg(long)]
    out: Option<PathBuf>,
    /// More driver flags (see `bench-filecoin --help`), after `--`.
    #[arg(last = true)]
    driver_args: Vec<String>,
}

/// The payloads of `size` in `dir`, sealed and proved here (seconds) when any is missing.
pub(crate) fn ensure_inputs(size: u64, dir: &Path, seed: u64) -> Result<Vec<PathBuf>> {
    let files: Vec<PathBuf> = PayloadKind::ALL.iter().map(|k| dir.join(k.file_name())).collect();
    if files.iter().all(|f| f.exists()) {
        return Ok(files);
    }
    eprintln!("xtask bench filecoin: sealing a {} sector for the inputs (seed {seed}) into {}", sector_size_name(size), dir.display());
    kiln_filecoin::vanilla::generate_to_dir(size, dir, &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed)).map_err(|e| anyhow!(e))
}

/// The GPU machine's entry point: parameters, then both provers, logged.
fn run_sh(size: &str) -> String {
    format!(
        r#"#!/usr/bin/env bash
# kiln against filecoin-proofs' SupraSeal path on the Filecoin proof kinds at
# {size}, on a GPU machine without Rust (written by `cargo xtask bench filecoin
# --build-only`).
#   ./run.sh                 parameters (kiln's generator where missing, every
#                            core), then per kind: kiln, then SupraSeal
#   ./run.sh --params-only   only the parameters (a separate first step)
#   ./run.sh --timed 3 ...   any other bench-filecoin flag (./bench-filecoin --help)
# Parameters: $FIL_PROOFS_PARAMETER_CACHE (default /tmp/kiln-fil-params, kept
# between runs). Results (table.md, results.json, proofs.jsonl, log.txt): $OUT
# (default ./results).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export FIL_PROOFS_PARAMETER_CACHE="${{FIL_PROOFS_PARAMETER_CACHE:-/tmp/kiln-fil-params}}"
out="${{OUT:-$here/results}}"
mkdir -p "$out"
{{ echo "host: $(nproc) cores"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true; }} | tee -a "$out/log.txt"
"$here/bench-filecoin" --inputs "$here/inputs" --peer-bin "$here/peer-filecoin" --out "$out" "$@" 2>&1 | tee -a "$out/log.txt"
"#
    )
}

pub fn run(args: Args) -> Result<()> {
    let Peer::Supraseal = args.peer;
    let root = crate::workspace_root();
    let target = target_dir(&root);
    let size = parse_sector_size(&args.sector_size).map_err(|e| anyhow!(e))?;
    if !is_test_sector_size(size) {
        bail!("bench filecoin proves test sector sizes (2KiB, 8MiB, 512MiB): kiln generates their parameters");
    }
    let name = sector_size_name(size);
    let inputs_dir = args.inputs.clone().unwrap_or_else(|| target.join("filecoin-inputs").join(&name));
    let inputs = ensure_inputs(size, &inputs_dir, args.seed)?;

    if args.build_only {
        let cuda_root = kernels_and_cuda_root(&target)?;
        let peer = build_peer(&root, &target, &cuda_root)?.join("peer-filecoin");
        let driver = build_xtask_bin(&root, &target, "bench-filecoin")?;
        let default_dir = if size == 8 << 20 { ".gpu-fil8".to_string() } else { format!(".gpu-fil-{name}") };
        let dir = args.out.clone().unwrap_or_else(|| root.join(default_dir));
        let total = carry(&dir, &[&driver, &peer], &inputs, &run_sh(&name))?;
        eprintln!("xtask bench filecoin: {} holds {:.1} MiB in all (binaries, {name} inputs, run.sh)", dir.display(), mib(total));
        if total > CARRY_LIMIT {
            bail!("{} holds {:.1} MiB, over the {:.0} MiB a GPU run can carry", dir.display(), mib(total), mib(CARRY_LIMIT));
        }
        let extra = if args.driver_args.is_empty() { String::new() } else { format!(" {}", args.driver_args.join(" ")) };
        println!("on the GPU machine, in that directory: OUT=$OUT ./run.sh{extra}   (./run.sh --params-only first if the time is short)");
        return Ok(());
    }

    let gpu = kiln_gpu::GpuDevice::count() > 0;
    let peer = if gpu {
        let cuda_root = kernels_and_cuda_root(&target)?;
        Some(build_peer(&root, &target, &cuda_root)?.join("peer-filecoin"))
    } else {
        eprintln!("xtask bench filecoin: no GPU here: the SupraSeal peer is not built and kiln runs on its CPU backend (a dry run)");
        None
    };
    let driver = build_xtask_bin(&root, &target, "bench-filecoin")?;
    let mut cmd = Command::new(&driver);
    cmd.arg("--inputs").arg(&inputs_dir);
    // Without a peer binary the driver finds no GPU and says why it skips the peer.
    if let Some(p) = &peer {
        cmd.arg("--peer-bin").arg(p);
    }
    if let Some(out) = &args.out {
        cmd.arg("--out").arg(out);
    }
    cmd.args(&args.driver_args);
    run_ok(&mut cmd, "running bench-filecoin")
}
