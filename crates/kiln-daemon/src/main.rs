//! `kiln`: the proving engine's command line (see [`kiln_daemon::cli`]).

use clap::Parser;

fn main() -> anyhow::Result<()> {
    kiln_daemon::cli::run(kiln_daemon::cli::Cli::parse())
}
