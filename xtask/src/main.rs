//! `cargo xtask`: kiln's build, benchmark and CI tasks, in Rust instead of scripts.
//!
//! - `cargo xtask kernels`        build `crates/kiln-gpu/cuda/` into the fatbin kiln-gpu embeds (installs nvcc from PyPI if needed)
//! - `cargo xtask bench cpu`      kiln's CPU prover against bellperson's on the same circuits
//! - `cargo xtask bench kernels`  GPU kernel timings next to their floors (needs a GPU)
//! - `cargo xtask gen-vanilla --sector-size 2KiB`  real Filecoin inputs of every kind (seal, C1, vanilla proofs) as request payloads
//!   (`--sector-size 32GiB` / `64GiB`, or `--sparse`: valid inputs from a sparse CC sector, no sealing)
//! - `cargo xtask soak`           drive a kiln daemon with a workload file for `--duration`; steady-state report + plots
//!   (the harness is its own crate, kiln-soak, in `soak/`)
//! - `cargo xtask fuzz --cases 10000`  the fuzz targets (requests of every kind, payload mutations, SRS ids, ParamsFile bytes), longer than CI
//! - `cargo xtask kill-loop --iterations 100`  SIGTERM and SIGKILL a real daemon at random moments, restart, check clients and proofs
//! - `cargo xtask bench groth16 --peer supraseal`  kiln's GPU prover against SupraSeal C2, same run
//!   (`--build-only` puts the binaries for a GPU machine without Rust in `.gpu-peer/`)
//! - `cargo xtask bench filecoin --peer supraseal`  kiln against filecoin-proofs' SupraSeal path on
//!   the four Filecoin kinds (`--build-only`: binaries, 8 MiB inputs and run.sh in `.gpu-fil8/`)
//! - `cargo xtask bench latency`  critical jobs' latency unloaded and under a full bulk load, kiln's
//!   critical lane on and off (`--build-only`: the driver, 8 MiB inputs and run.sh in `.gpu-latency/`)

use anyhow::Result;
use clap::{Parser, Subcommand};

mod bench_cpu;
mod bench_filecoin;
mod bench_groth16;
mod bench_kernels;
mod bench_latency;
mod fuzz;
mod gen_vanilla;
mod kernels;
mod kill_loop;
mod peer_build;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "kiln's build, benchmark and CI tasks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the CUDA kernels (crates/kiln-gpu/cuda/) into the fatbin that kiln-gpu embeds.
    Kernels(kernels::Args),
    /// Run a benchmark suite.
    Bench {
        #[command(subcommand)]
        suite: BenchSuite,
    },
    /// Write valid payloads of every Filecoin proof kind: a sealed test-size sector, or a sparse CC sector (32/64 GiB, --sparse).
    GenVanilla(gen_vanilla::Args),
    /// Drive a kiln daemon with a workload for a long time; report steady-state figures and plots.
    Soak(kiln_soak::Args),
    /// Run the fuzz targets (proptest) with many cases: --cases N.
    Fuzz(fuzz::Args),
    /// Kill a real daemon (SIGTERM, SIGKILL) at random moments and restart it: every client answered, no invalid proof, one daemon.
    KillLoop(kill_loop::Args),
}

#[derive(Subcommand)]
enum BenchSuite {
    /// kiln's CPU Groth16 prover against bellperson's CPU prover, same circuits and parameters.
    Cpu(bench_cpu::Args),
    /// GPU kernels (NTT, H pipeline, MSM G1/G2) against their floors.
    Kernels(bench_kernels::Args),
    /// kiln's GPU Groth16 prover against SupraSeal C2: same circuits, parameters and GPU, one run.
    Groth16(bench_groth16::Args),
    /// kiln against filecoin-proofs' SupraSeal path on PoRep C2, SnapDeals, WindowPoSt and WinningPoSt: same inputs, one run.
    Filecoin(bench_filecoin::Args),
    /// Critical jobs' latency unloaded and under a full bulk load, with kiln's critical lane and without.
    Latency(bench_latency::Args),
}

fn main() -> Result<()> {
    match Cli::parse().cmd {
        Cmd::Kernels(args) => kernels::run(args),
        Cmd::Soak(args) => kiln_soak::run(args, &workspace_root()),
        Cmd::KillLoop(args) => kill_loop::run(args),
        Cmd::Fuzz(args) => fuzz::run(args),
        Cmd::GenVanilla(args) => gen_vanilla::run(args),
        Cmd::Bench { suite } => match suite {
            BenchSuite::Cpu(args) => bench_cpu::run(args),
            BenchSuite::Kernels(args) => bench_kernels::run(args),
            BenchSuite::Groth16(args) => bench_groth16::run(args),
            BenchSuite::Filecoin(args) => bench_filecoin::run(args),
            BenchSuite::Latency(args) => bench_latency::run(args),
        },
    }
}

/// The workspace root (xtask lives one level below it).
pub fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask has a parent directory")
        .to_path_buf()
}
