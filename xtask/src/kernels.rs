//! `cargo xtask kernels`: compile crates/kiln-gpu/cuda/kiln.cu into target/kernels/kiln.fatbin
//! (machine code for kiln-gpu's targets, sm_80..sm_120, or those
//! `$KILN_CUDA_ARCHS` names, plus compute_80 PTX), which kiln-gpu's build.rs embeds
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
    let targets = nvcc::targets().map_err(|e| anyhow!(e))?;
    let holds = nvcc::describe(&targets);
    nvcc::compile(&nvcc, &root.join("crates/kiln-gpu/cuda"), &targets, &out, extra).map_err(|e| anyhow!(e))?;
    // What it holds, for kiln-gpu's KERNEL_TARGETS (read by its build.rs).
    std::fs::write(out.with_extension("targets"), &holds)?;
    eprintln!("xtask kernels: wrote {} ({holds}, {} bytes)", out.display(), std::fs::metadata(&out)?.len());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::nvcc;

    #[test]
    fn every_target_gets_machine_code_and_the_oldest_ptx() {
        let all = nvcc::parse_targets(None).unwrap();
        assert_eq!(all, ["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120"]);
        let flags = nvcc::arch_flags(&all);
        assert_eq!(flags[3], "-gencode=arch=compute_90a,code=sm_90a");
        assert_eq!(flags[5], "-gencode=arch=compute_120,code=sm_120");
        assert_eq!(flags.last().unwrap(), "-gencode=arch=compute_80,code=compute_80");
        assert_eq!(nvcc::describe(&all), "sm_80 sm_86 sm_89 sm_90a sm_100 sm_120 + compute_80 PTX");
    }

    #[test]
    fn kiln_cuda_archs_narrows_the_targets_and_rejects_others() {
        assert_eq!(nvcc::parse_targets(Some("sm_90a, sm_89")).unwrap(), ["sm_90a", "sm_89"]);
        assert_eq!(nvcc::parse_targets(Some(" ")).unwrap().len(), 6);
        let err = nvcc::parse_targets(Some("sm_90")).unwrap_err();
        assert!(err.contains("\"sm_90\" is not one of sm_80, sm_86, sm_89, sm_90a, sm_100, sm_120"), "{err}");
    }

    #[test]
    fn the_cache_key_changes_with_the_targets() {
        let cuda = crate::workspace_root().join("crates/kiln-gpu/cuda");
        assert_ne!(nvcc::source_key(&cuda, &["sm_90a"]), nvcc::source_key(&cuda, &["sm_80", "sm_90a"]));
    }
}
