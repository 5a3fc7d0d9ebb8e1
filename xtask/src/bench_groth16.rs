//! `cargo xtask bench groth16 --peer supraseal`: kiln's GPU prover against
//! SupraSeal C2 on the same circuits, parameters and GPU, in one run.
//!
//! It builds three things, then runs the driver:
//! - the kernels (`cargo xtask kernels`, which also finds or installs nvcc),
//! - the peer, `bench/peer-supraseal`: its own Cargo workspace (so bellperson's
//!   `cuda-supraseal` never unifies with kiln's bellperson; versions pinned by
//!   its own Cargo.lock), built with that nvcc into target/peer-supraseal (sppark compiles with nvcc; no
//!   GPU is needed to build),
//! - the driver, xtask's `bench-groth16` binary (release).
//!
//! With `--build-only` it copies both stripped binaries into `--out`
//! (default `.gpu-peer/`, gitignored) for a GPU machine without Rust, and
//! prints the command to run there. Otherwise it runs the driver here, with
//! `--out` as its results directory; driver flags go after `--`.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

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

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

fn run_ok(cmd: &mut Command, what: &str) -> Result<()> {
    eprintln!("xtask bench groth16: {what}");
    if !cmd.status().with_context(|| format!("starting: {what}"))?.success() {
        bail!("{what} failed");
    }
    Ok(())
}

/// Builds bench/peer-supraseal with the nvcc toolkit at `cuda_root`; returns the binary.
fn build_peer(root: &Path, target: &Path, cuda_root: &Path) -> Result<PathBuf> {
    let peer_target = target.join("peer-supraseal");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![cuda_root.join("bin")];
    paths.extend(std::env::split_paths(&path));
    // sppark links the static CUDA runtime (cudart_static); the PyPI wheels
    // keep it in lib/ (lib64 is a link to it that `find_nvcc` makes), which
    // no default search path covers. These flags are for the peer's build
    // only: in kiln's they would change every crate's fingerprint.
    let rustflags = format!("-L {} -L {}", cuda_root.join("lib").display(), cuda_root.join("lib64").display());
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root.join("bench/peer-supraseal"))
        // Not `--locked`: a dependency added to kiln-synth (a path dependency)
        // must not break this build; the lock still pins every version it has.
        .args(["build", "--release", "--target-dir"])
        .arg(&peer_target)
        .env("CUDA_HOME", cuda_root)
        .env("CUDA_PATH", cuda_root)
        .env("PATH", std::env::join_paths(paths)?)
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_TARGET_DIR");
    run_ok(&mut cmd, "building bench/peer-supraseal (bellperson cuda-supraseal; sppark's nvcc build takes minutes the first time)")?;
    Ok(peer_target.join("release/peer-supraseal"))
}

fn build_driver(root: &Path, target: &Path) -> Result<PathBuf> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root).args(["build", "--release", "-p", "xtask", "--bin", "bench-groth16"]);
    run_ok(&mut cmd, "building the driver (xtask bench-groth16, release)")?;
    Ok(target.join("release/bench-groth16"))
}

/// Copies `bin` into `dir`, stripped of symbols (the release profile keeps
/// line tables, which the GPU machine does not need).
fn copy_stripped(bin: &Path, dir: &Path) -> Result<u64> {
    let name = bin.file_name().context("binary without a name")?;
    let dest = dir.join(name);
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    let stripped = Command::new("strip").arg("--strip-all").arg("-o").arg(&tmp).arg(bin).status().map(|s| s.success()).unwrap_or(false);
    if !stripped {
        eprintln!("xtask bench groth16: `strip` unavailable or failed; copying {} unstripped", bin.display());
        std::fs::copy(bin, &tmp)?;
    }
    std::fs::rename(&tmp, &dest)?;
    Ok(std::fs::metadata(&dest)?.len())
}

pub fn run(args: Args) -> Result<()> {
    let Peer::Supraseal = args.peer;
    let root = crate::workspace_root();
    let target = target_dir(&root);
    // nvcc as `cargo xtask kernels` finds it: $KILN_NVCC, $CUDA_HOME, PATH,
    // else NVIDIA's PyPI wheels in target/nvcc (installed when missing).
    crate::kernels::run(crate::kernels::Args::default())?;
    let nvcc = crate::kernels::find_nvcc(None, &target)?;
    let nvcc = if nvcc.components().count() == 1 { which_in_path(&nvcc).unwrap_or(nvcc) } else { nvcc };
    let cuda_root = nvcc
        .canonicalize()
        .ok()
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
        .with_context(|| format!("no toolkit root above {}", nvcc.display()))?;
    let peer = build_peer(&root, &target, &cuda_root)?;
    let driver = build_driver(&root, &target)?;

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
            a as f64 / (1u64 << 20) as f64,
            b as f64 / (1u64 << 20) as f64
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

/// `nvcc` as found on PATH, so its toolkit root can be derived.
fn which_in_path(name: &Path) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}
