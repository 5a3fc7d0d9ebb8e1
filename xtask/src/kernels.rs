//! `cargo xtask kernels`: compile crates/kiln-gpu/cuda/kiln.cu into target/kernels/kiln.fatbin
//! (sm_90a machine code + compute_90 PTX), which kiln-gpu's build.rs embeds
//! in preference to its own cached build. A plain `cargo build` compiles the
//! kernels by itself; this command is for a chosen nvcc and for reading
//! registers and spills (`--verbose`).
//!
//! Finding nvcc (PATH, `$KILN_NVCC`, `$CUDA_HOME`, or NVIDIA's wheels from
//! PyPI in target/nvcc) and the nvcc flags are kiln-gpu's build code, shared.
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

// The build script's cache key (`sources`, `source_key`) is not used here:
// this command always compiles, into target/kernels.
#[allow(dead_code)]
#[path = "../../crates/kiln-gpu/build/nvcc.rs"]
mod nvcc;

#[derive(clap::Args, Default)]
pub struct Args {
    /// nvcc to use (else $KILN_NVCC, $CUDA_HOME/bin/nvcc, PATH, target/nvcc).
    #[arg(long)]
    nvcc: Option<PathBuf>,
    /// Also print registers / spills per kernel (nvcc -Xptxas -v).
    #[arg(long)]
    verbose: bool,
}

/// nvcc as this command finds it (installing the wheels when nothing else is there).
pub fn find_nvcc(explicit: Option<PathBuf>, target: &Path) -> Result<PathBuf> {
    nvcc::find_nvcc(explicit, target, true).map_err(|e| anyhow!(e))
}

pub fn run(args: Args) -> Result<()> {
    let root = crate::workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    let nvcc = find_nvcc(args.nvcc, &target)?;
    let out_dir = target.join("kernels");
    std::fs::create_dir_all(&out_dir)?;
    let out = out_dir.join("kiln.fatbin");
    let extra: &[&str] = if args.verbose { &["--ptxas-options=-v"] } else { &[] };
    eprintln!("xtask kernels: {} -> {}", nvcc.display(), out.display());
    nvcc::compile(&nvcc, &root.join("crates/kiln-gpu/cuda"), &out, extra).map_err(|e| anyhow!(e))?;
    eprintln!("xtask kernels: wrote {} ({} bytes)", out.display(), std::fs::metadata(&out)?.len());
    Ok(())
}
