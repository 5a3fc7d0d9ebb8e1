//! Finding nvcc and compiling cuda/ into a fatbin: shared by kiln-gpu's
//! build.rs (which compiles the kernels as part of every build that can)
//! and `cargo xtask kernels` (`#[path]`-included by both; std only).
//!
//! nvcc is taken from an explicit path, `$KILN_NVCC`, `$CUDA_HOME/bin/nvcc`,
//! PATH, or NVIDIA's nvcc wheels under `<target>/nvcc`, which are installed
//! there from PyPI (`python3 -m pip install --target`) when nothing else is
//! found: no GPU and no CUDA install are needed to build kernels.

use std::path::{Path, PathBuf};
use std::process::Command;

/// NVIDIA's wheels that make a working nvcc 13.0 (the H200 driver's CUDA).
pub const WHEELS: &[&str] = &[
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-cccl==13.0.*",
];

/// The GPUs the kernels are compiled for, as machine code: Ampere (A100,
/// RTX 30xx), Ada (RTX 40xx, L40S), Hopper (H100/H200, with its
/// architecture-specific features), Blackwell data-center and consumer
/// (B200, RTX 50xx). `$KILN_CUDA_ARCHS` (a comma list of these) narrows it,
/// for a quicker build that runs on fewer GPUs.
pub const TARGETS: &[&str] = &["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100", "sm_120"];
/// PTX for the oldest target, which the driver JIT-compiles for any later
/// GPU none of the machine code fits.
pub const PTX: &str = "compute_80";
/// The variable that narrows [`TARGETS`].
pub const ARCHS_ENV: &str = "KILN_CUDA_ARCHS";
const FLAGS: &[&str] = &["-fatbin", "-O3", "-std=c++17", "--threads", "0"];

/// The machine-code targets of this build: [`TARGETS`], or those
/// `$KILN_CUDA_ARCHS` names (each must be one of them).
pub fn targets() -> Result<Vec<&'static str>, String> {
    parse_targets(std::env::var(ARCHS_ENV).ok().as_deref())
}

/// [`targets`] for a given value of `$KILN_CUDA_ARCHS`.
pub fn parse_targets(value: Option<&str>) -> Result<Vec<&'static str>, String> {
    let Some(wanted) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(TARGETS.to_vec());
    };
    wanted
        .split(',')
        .map(|w| {
            let w = w.trim();
            TARGETS.iter().copied().find(|t| *t == w).ok_or_else(|| format!("{ARCHS_ENV}={wanted:?}: {w:?} is not one of {}", TARGETS.join(", ")))
        })
        .collect()
}

/// nvcc's `-gencode` arguments for `targets` plus the PTX.
pub fn arch_flags(targets: &[&str]) -> Vec<String> {
    let mut flags: Vec<String> = targets.iter().map(|sm| format!("-gencode=arch={},code={sm}", sm.replacen("sm_", "compute_", 1))).collect();
    flags.push(format!("-gencode=arch={PTX},code={PTX}"));
    flags
}

/// What a fatbin of `targets` holds, in words (for `kiln --version` and
/// the error when a GPU cannot load it).
pub fn describe(targets: &[&str]) -> String {
    format!("{} + {PTX} PTX", targets.join(" "))
}

fn works(nvcc: &Path) -> bool {
    Command::new(nvcc).arg("--version").output().map(|o| o.status.success()).unwrap_or(false)
}

/// The toolkit root the wheels make under `dir`: `nvidia/cu13` of a
/// `pip install --target`, or of a venv's site-packages (older xtask runs).
fn wheel_root(dir: &Path) -> Option<PathBuf> {
    let direct = dir.join("nvidia/cu13");
    if direct.join("bin/nvcc").exists() {
        return Some(direct);
    }
    std::fs::read_dir(dir.join("lib")).ok()?.flatten().map(|e| e.path().join("site-packages/nvidia/cu13")).find(|r| r.join("bin/nvcc").exists())
}

/// Installs the wheels into `dir` (through a temporary folder renamed into
/// place, so concurrent builds never see half an install).
fn install_wheels(dir: &Path) -> Result<PathBuf, String> {
    let tmp = dir.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let out = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target"])
        .arg(&tmp)
        .args(WHEELS)
        .output()
        .map_err(|e| format!("no nvcc found, and python3 to install NVIDIA's nvcc wheels cannot run: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        return Err(format!("no nvcc found, and `python3 -m pip install` of NVIDIA's nvcc wheels failed: {last}"));
    }
    if std::fs::rename(&tmp, dir).is_err() {
        // Another build installed them meanwhile: use theirs.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    wheel_root(dir).ok_or_else(|| format!("{} holds no nvidia/cu13/bin/nvcc after installing NVIDIA's nvcc wheels (remove it and build again)", dir.display()))
}

/// A working nvcc (see the module doc); `install` allows installing the
/// wheels into `<target>/nvcc`.
pub fn find_nvcc(explicit: Option<PathBuf>, target: &Path, install: bool) -> Result<PathBuf, String> {
    let candidates = [
        explicit,
        std::env::var_os("KILN_NVCC").map(PathBuf::from),
        std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("bin/nvcc")),
        Some(PathBuf::from("nvcc")),
    ];
    if let Some(found) = candidates.into_iter().flatten().find(|c| works(c)) {
        return Ok(found);
    }
    let dir = target.join("nvcc");
    let root = match wheel_root(&dir) {
        Some(r) => r,
        None if install => install_wheels(&dir)?,
        None => return Err("no nvcc on PATH, in $KILN_NVCC or $CUDA_HOME, nor NVIDIA's wheels in target/nvcc".into()),
    };
    // The wheels ship lib/ but nvcc's profile looks in lib64/.
    let lib64 = root.join("lib64");
    if !lib64.exists() {
        let _ = std::os::unix::fs::symlink("lib", &lib64);
    }
    Ok(root.join("bin/nvcc"))
}

/// The kernel sources (`cuda/*.cu`, `cuda/*.cuh`), sorted.
pub fn sources(cuda: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(cuda)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("cu" | "cuh"))).collect())
        .unwrap_or_default();
    all.sort();
    all
}

/// A name for this exact build of the kernels: FNV-1a over the flags, the
/// targets and every source file's name and bytes (a cache key, not a
/// security hash).
pub fn source_key(cuda: &Path, targets: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for flag in FLAGS.iter().map(|f| f.to_string()).chain(arch_flags(targets)) {
        eat(flag.as_bytes());
    }
    for path in sources(cuda) {
        eat(path.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default());
        eat(&std::fs::read(&path).unwrap_or_default());
    }
    format!("{h:016x}")
}

/// Compiles `cuda/kiln.cu` for `targets` into `out` (written under a
/// temporary name and renamed, so a reader never sees part of it); `extra`
/// are more nvcc arguments (e.g. `--ptxas-options=-v`).
pub fn compile(nvcc: &Path, cuda: &Path, targets: &[&str], out: &Path, extra: &[&str]) -> Result<(), String> {
    let tmp = out.with_extension(format!("tmp-{}", std::process::id()));
    let output = Command::new(nvcc)
        .args(FLAGS)
        .args(arch_flags(targets))
        .args(extra)
        .arg("-o")
        .arg(&tmp)
        .arg(cuda.join("kiln.cu"))
        .output()
        .map_err(|e| format!("running {}: {e}", nvcc.display()))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{} failed:\n{}", nvcc.display(), String::from_utf8_lossy(&output.stderr)));
    }
    // ptxas -v and friends report on stderr.
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    std::fs::rename(&tmp, out).map_err(|e| format!("placing {}: {e}", out.display()))
}
