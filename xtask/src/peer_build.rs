//! Building the peer workspace `bench/peer-supraseal` (both its binaries:
//! `peer-supraseal` for `bench groth16`, `peer-filecoin` for `bench
//! filecoin`) and carrying binaries to a GPU machine without Rust.
//!
//! The peer is its own Cargo workspace, so bellperson's `cuda-supraseal`
//! (and filecoin-proofs' CUDA crates) never unify with kiln's workspace; its
//! Cargo.lock pins every version. It is built with the nvcc that `cargo
//! xtask kernels` finds or installs (PyPI wheels on a build machine) into
//! `target/peer-supraseal`. No GPU is needed to build, but filecoin-proofs'
//! CUDA crates link `-lcuda` (rustacuda's cuda-driver-sys): on a machine
//! without a driver [`cuda_stub`] makes a stand-in `libcuda.so` (soname
//! `libcuda.so.1`, so the binary asks for the real driver library at run time).
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"))
}

/// Runs `cmd`, failing with `what` when it does not succeed.
pub fn run_ok(cmd: &mut Command, what: &str) -> Result<()> {
    eprintln!("xtask: {what}");
    if !cmd.status().with_context(|| format!("starting: {what}"))?.success() {
        bail!("{what} failed");
    }
    Ok(())
}

/// The CUDA toolkit root of the nvcc `cargo xtask kernels` uses, after
/// building the kernels (kiln's GPU backend embeds them).
pub fn kernels_and_cuda_root(target: &Path) -> Result<PathBuf> {
    // nvcc as `cargo xtask kernels` finds it: $KILN_NVCC, $CUDA_HOME, PATH,
    // else NVIDIA's PyPI wheels in target/nvcc (installed when missing).
    crate::kernels::run(crate::kernels::Args::default())?;
    let nvcc = crate::kernels::find_nvcc(None, target)?;
    let nvcc = if nvcc.components().count() == 1 { which_in_path(&nvcc).unwrap_or(nvcc) } else { nvcc };
    nvcc.canonicalize()
        .ok()
        .and_then(|p| p.parent()?.parent().map(Path::to_path_buf))
        .with_context(|| format!("no toolkit root above {}", nvcc.display()))
}

/// `nvcc` as found on PATH, so its toolkit root can be derived.
fn which_in_path(name: &Path) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// The source of the crate `name` as the peer workspace resolves it.
fn peer_dependency_dir(peer_dir: &Path, name: &str) -> Result<PathBuf> {
    let out = Command::new(env!("CARGO"))
        .current_dir(peer_dir)
        .args(["metadata", "--format-version", "1"])
        .output()
        .context("cargo metadata in bench/peer-supraseal")?;
    if !out.status.success() {
        bail!("cargo metadata in bench/peer-supraseal failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == name)
        .and_then(|p| Some(Path::new(p["manifest_path"].as_str()?).parent()?.to_path_buf()))
        .with_context(|| format!("{name} is not a dependency of bench/peer-supraseal"))
}

/// A directory `D` with `D/lib64/libcuda.so` for cuda-driver-sys to link
/// against (also where a driver is installed: one build, the same binary): a stub defining every
/// driver function cuda-driver-sys declares (each returns an error code;
/// none is ever called: at run time the loader takes the real
/// `libcuda.so.1` named by the stub's soname).
///
/// It reaches the build through `CUDA_LIBRARY_PATH` (read by
/// cuda-driver-sys' build script) rather than RUSTFLAGS, so the flags of
/// every other crate of the peer, and their build artifacts, stay the same.
fn cuda_stub(peer_dir: &Path, target: &Path) -> Result<PathBuf> {
    let dir = target.join("peer-supraseal/cuda-stub");
    let lib = dir.join("lib64/libcuda.so");
    if lib.exists() {
        return Ok(dir);
    }
    let sys = peer_dependency_dir(peer_dir, "cuda-driver-sys")?;
    let decls = std::fs::read_to_string(sys.join("src/cuda.rs")).with_context(|| format!("reading {}/src/cuda.rs", sys.display()))?;
    let mut names: Vec<&str> = decls
        .split("pub fn ")
        .skip(1)
        .filter_map(|s| s.split('(').next())
        .map(str::trim)
        .filter(|n| n.starts_with("cu") && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    names.sort_unstable();
    names.dedup();
    if names.len() < 50 {
        bail!("found only {} driver functions in {}/src/cuda.rs", names.len(), sys.display());
    }
    std::fs::create_dir_all(lib.parent().expect("lib64"))?;
    let c = dir.join("stub.c");
    std::fs::write(&c, names.iter().map(|n| format!("int {n}(void) {{ return 999; }}\n")).collect::<String>())?;
    let tmp = dir.join("lib64/.libcuda.so.tmp");
    run_ok(
        Command::new("cc").args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"]).arg(&tmp).arg(&c),
        &format!("making a stub libcuda.so ({} functions) for linking without a driver", names.len()),
    )?;
    std::fs::rename(&tmp, &lib)?;
    Ok(dir)
}

/// Builds bench/peer-supraseal (release) with the toolkit at `cuda_root`;
/// returns its release directory (`peer-supraseal`, `peer-filecoin`).
pub fn build_peer(root: &Path, target: &Path, cuda_root: &Path) -> Result<PathBuf> {
    let peer_dir = root.join("bench/peer-supraseal");
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
    cmd.current_dir(&peer_dir)
        // Not `--locked`: a dependency added to kiln-synth (a path dependency)
        // must not break this build; the lock still pins every version it has.
        .args(["build", "--release", "--target-dir"])
        .arg(&peer_target)
        .env("CUDA_HOME", cuda_root)
        .env("CUDA_PATH", cuda_root)
        .env("PATH", std::env::join_paths(paths)?)
        .env("RUSTFLAGS", rustflags)
        .env_remove("CARGO_TARGET_DIR");
    cmd.env("CUDA_LIBRARY_PATH", cuda_stub(&peer_dir, target)?);
    run_ok(&mut cmd, "building bench/peer-supraseal (SupraSeal via bellperson and filecoin-proofs; the nvcc builds take minutes the first time)")?;
    Ok(peer_target.join("release"))
}

/// Builds one of xtask's binaries (release) in kiln's workspace; returns it.
pub fn build_xtask_bin(root: &Path, target: &Path, bin: &str) -> Result<PathBuf> {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root).args(["build", "--release", "-p", "xtask", "--bin", bin]);
    run_ok(&mut cmd, &format!("building the driver (xtask {bin}, release)"))?;
    Ok(target.join("release").join(bin))
}

/// Copies `bin` into `dir`, stripped of symbols (the release profile keeps
/// line tables, which the GPU machine does not need); returns its size.
pub fn copy_stripped(bin: &Path, dir: &Path) -> Result<u64> {
    let name = bin.file_name().context("binary without a name")?;
    let dest = dir.join(name);
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    let stripped = Command::new("strip").arg("--strip-all").arg("-o").arg(&tmp).arg(bin).status().map(|s| s.success()).unwrap_or(false);
    if !stripped {
        eprintln!("xtask: `strip` unavailable or failed; copying {} unstripped", bin.display());
        std::fs::copy(bin, &tmp)?;
    }
    std::fs::rename(&tmp, &dest)?;
    Ok(std::fs::metadata(&dest)?.len())
}

/// Fills `dir` with what a GPU machine without Rust runs: the stripped
/// `binaries`, `inputs` under `inputs/`, and `script` as `run.sh`; returns
/// the bytes it holds.
pub fn carry(dir: &Path, binaries: &[&Path], inputs: &[PathBuf], script: &str) -> Result<u64> {
    std::fs::create_dir_all(dir.join("inputs"))?;
    let mut total = 0;
    for bin in binaries {
        let n = copy_stripped(bin, dir)?;
        eprintln!("xtask: {} ({:.1} MiB stripped)", bin.file_name().unwrap_or_default().to_string_lossy(), mib(n));
        total += n;
    }
    for f in inputs {
        total += std::fs::copy(f, dir.join("inputs").join(f.file_name().unwrap_or_default()))?;
    }
    let run = dir.join("run.sh");
    std::fs::write(&run, script)?;
    std::fs::set_permissions(&run, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(total + std::fs::metadata(&run)?.len())
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}
