//! `cargo xtask fuzz --cases N`: the fuzz targets of issue 22 (part 1) run
//! longer than CI runs them. They are ordinary proptest properties in the
//! crates' test suites (kiln-daemon `tests/fuzz/`: SubmitProof requests of
//! every kind, C1 JSON and bincode vanilla-proof mutations, PreloadSRS ids,
//! and mutated payloads that decode taken through synthesis; kiln-groth16
//! `tests/fuzz_params.rs`: ParamsFile bytes), where CI runs a few dozen
//! cases each; this runs them with `KILN_FUZZ_CASES=N` (the synthesis
//! properties, ~1 s a case, run N/100 unless `--synth-cases` says).
//! Failures print the shrunk input; nothing is written to the tree.

use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Result};

/// The targets: (package, test binary).
const TARGETS: [(&str, &str); 2] = [("kiln-groth16", "fuzz_params"), ("kiln-daemon", "fuzz")];

/// `cargo xtask fuzz` arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Cases per property (CI runs 48-64).
    #[arg(long, default_value_t = 10_000)]
    cases: u32,
    /// Cases per synthesis property (default: a hundredth of `--cases`).
    #[arg(long)]
    synth_cases: Option<u32>,
    /// Build with `--release` (faster cases; a separate build).
    #[arg(long)]
    release: bool,
    /// Only targets whose test binary name contains this.
    #[arg(long)]
    only: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    for (package, test) in TARGETS.iter().filter(|(_, t)| args.only.as_deref().is_none_or(|o| t.contains(o))) {
        let t = Instant::now();
        let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        cmd.args(["test", "-p", package, "--test", test]);
        if args.release {
            cmd.arg("--release");
        }
        cmd.args(["--", "--nocapture"]).env("KILN_FUZZ_CASES", args.cases.to_string());
        if let Some(n) = args.synth_cases {
            cmd.env("KILN_FUZZ_SYNTH_CASES", n.to_string());
        }
        eprintln!("fuzz: {package} --test {test}, {} cases per property", args.cases);
        let status = cmd.status()?;
        if !status.success() {
            bail!("{package} --test {test} failed ({status}); the shrunk input is printed above");
        }
        eprintln!("fuzz: {package} --test {test} passed in {:.1?}", t.elapsed());
    }
    eprintln!("fuzz: all targets passed, {} cases per property, in {:.1?}", args.cases, started.elapsed());
    Ok(())
}
