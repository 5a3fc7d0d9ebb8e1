//! `kiln`: the proving engine's command line.

use clap::{Parser, Subcommand};
use kiln_daemon::{cli, demo, serve};

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
    /// Serve the cuzk.v1 gRPC interface (unix socket or TCP) and /status, /metrics over HTTP.
    Serve(cli::ServeArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The daemon logs what it does at info; the demo prints its own report.
    let default_filter = match cli.cmd {
        Cmd::Serve(_) => "info",
        Cmd::Demo(_) => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KILN_LOG").unwrap_or_else(|_| default_filter.into()),
        )
        .with_writer(std::io::stderr)
        // No colour codes in journald or log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match cli.cmd {
        Cmd::Demo(args) => demo::run(args),
        Cmd::Serve(args) => {
            let config = args.resolve()?;
            if args.print_config {
                print!("{}", config.to_toml());
                return Ok(());
            }
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("kiln-rt")
                .build()?
                .block_on(serve::run(config))
        }
    }
}
