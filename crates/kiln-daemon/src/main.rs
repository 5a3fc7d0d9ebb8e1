//! `kiln`: the proving engine's command line.

use clap::{Parser, Subcommand};

mod demo;

#[derive(Parser)]
#[command(name = "kiln", version, about = "GPU proving engine for Groth16 over BLS12-381")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Prove a built-in workload end to end and print per-proof timings.
    Demo(demo::DemoArgs),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KILN_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().cmd {
        Cmd::Demo(args) => demo::run(args),
    }
}
