//! `cargo xtask kernels`: compile cuda/kiln.cu into target/kernels/kiln.fatbin
//! (sm_90a machine code + compute_90 PTX), which kiln-gpu's build.rs embeds.
//!
//! nvcc is taken from `--nvcc`, `$KILN_NVCC`, `$CUDA_HOME/bin/nvcc`, PATH, or
//! a venv at target/nvcc; when none exists, NVIDIA's nvcc wheels are
//! installed from PyPI into that venv (no GPU or CUDA install needed).
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// NVIDIA's wheels that make a working nvcc 13.0 (the H200 driver's CUDA).
const WHEELS: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-cccl==13.0.*",
];

#[derive(clap::Args, Default)]
pub struct Args {
    /// nvcc to use (else $KILN_NVCC, $CUDA_HOME/bin/nvcc, PATH, target/nvcc).
    #[arg(long)]
    nvcc: Option<PathBuf>,
    /// Also print registers / spills per kernel (nvcc -Xptxas -v).
    #[arg(long)]
    verbose: bool,
}

fn works(nvcc: &Path) -> bool {
    Command::new(nvcc).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

/// The toolkit root inside the wheel venv (site-packages/nvidia/cu13).
fn venv_root(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    for e in std::fs::read_dir(&lib).ok()?.flatten() {
        let root = e.path().join("site-packages/nvidia/cu13");
        if root.join("bin/nvcc").exists() {
            return Some(root);
        }
    }
    None
}

fn install_wheels(venv: &Path) -> Result<PathBuf> {
    eprintln!("xtask kernels: installing nvcc wheels from PyPI into {}", venv.display());
    let ok = Command::new("python3").args(["-m", "venv"]).arg(venv).status()?.success();
    if !ok {
        bail!("python3 -m venv {} failed", venv.display());
    }
    let ok = Command::new(venv.join("bin/pip")).args(["install", "-q"]).args(WHEELS).status()?.success();
    if !ok {
        bail!("pip install of the nvcc wheels failed");
    }
    venv_root(venv).context("nvcc wheels installed but no nvidia/cu13/bin/nvcc found")
}

pub fn find_nvcc(explicit: Option<PathBuf>, target: &Path) -> Result<PathBuf> {
    let candidates = [
        explicit,
        std::env::var_os("KILN_NVCC").map(PathBuf::from),
        std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("bin/nvcc")),
        Some(PathBuf::from("nvcc")),
    ];
    for c in candidates.into_iter().flatten() {
        if works(&c) {
            return Ok(c);
        }
    }
    let venv = target.join("nvcc");
    let root = match venv_root(&venv) {
        Some(r) => r,
        None => install_wheels(&venv)?,
    };
    // The wheels ship lib/ but nvcc's profile looks in lib64/.
    let lib64 = root.join("lib64");
    if !lib64.exists() {
        std::os::unix::fs::symlink("lib", &lib64).ok();
    }
    Ok(root.join("bin/nvcc"))
}

pub fn run(args: Args) -> Result<()> {
    let root = crate::workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let nvcc = find_nvcc(args.nvcc, &target)?;
    let out_dir = target.join("kernels");
    std::fs::create_dir_all(&out_dir)?;
    let out = out_dir.join("kiln.fatbin");
    let tmp = out_dir.join("kiln.fatbin.tmp");
    let mut cmd = Command::new(&nvcc);
    cmd.args(["-fatbin", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_90,code=compute_90"]);
    if args.verbose {
        cmd.arg("--ptxas-options=-v");
    }
    cmd.arg("-o").arg(&tmp).arg(root.join("cuda/kiln.cu"));
    eprintln!("xtask kernels: {:?}", cmd);
    if !cmd.status().with_context(|| format!("running {}", nvcc.display()))?.success() {
        bail!("nvcc failed");
    }
    // Renamed only when complete, so build.rs never embeds a partial file.
    std::fs::rename(&tmp, &out)?;
    eprintln!("xtask kernels: wrote {} ({} bytes)", out.display(), std::fs::metadata(&out)?.len());
    Ok(())
}
