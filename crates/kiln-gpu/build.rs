//! Builds the CUDA kernels of this crate's `cuda/` into a fatbin and embeds it, so a
//! plain `cargo build` gives a GPU binary wherever nvcc (or NVIDIA's nvcc
//! wheels from PyPI) can be had, on a machine with or without a GPU.
//!
//! Which fatbin is embedded, first that applies:
//! 1. `$KILN_FATBIN`, when it is at least as new as `cuda/`;
//! 2. `<target>/kernels/kiln.fatbin` from `cargo xtask kernels`, when at
//!    least as new as `cuda/`;
//! 3. unless `KILN_KERNELS=off`: `<target>/kernels-cache/kiln-<key>.fatbin`,
//!    compiled here when missing (`<key>` names the sources and flags, so
//!    debug and release builds share one compile), with nvcc from
//!    `$KILN_NVCC`, `$CUDA_HOME`, PATH or the wheels in `<target>/nvcc`
//!    (installed on first need: `python3 -m pip`, about 300 MB).
//!
//! Without any, the crate builds without kernels and says why in a cargo
//! warning (the binary then proves on the CPU only, and `kiln --version`
//! says so); `KILN_KERNELS=require` makes that a build error instead.
//!
//! The sources are inside the crate so that a packaged kiln-gpu (a
//! dependency from a registry or by path) builds its kernels the same way.
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

#[path = "build/nvcc.rs"]
mod nvcc;

fn newest_source(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let t = entry.metadata().ok()?.modified().ok()?;
        newest = Some(newest.map_or(t, |n: SystemTime| n.max(t)));
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
    newest
}

fn up_to_date(fatbin: &Path, newest_source: Option<SystemTime>) -> bool {
    let built = std::fs::metadata(fatbin).and_then(|m| m.modified()).ok();
    matches!((built, newest_source), (Some(b), Some(s)) if b >= s)
}

/// Fatbins of other sources or target sets kept in the cache beside the current one.
const KEEP_OTHER_FATBINS: usize = 3;

/// Embeds `fatbin`; `holds` says which GPUs it has code for (kiln-gpu's
/// `KERNEL_TARGETS`).
fn embed(fatbin: &Path, holds: &str) {
    println!("cargo:rustc-cfg=kiln_kernels");
    println!("cargo:rustc-env=KILN_FATBIN_PATH={}", fatbin.display());
    // A fatbin removed since (another target set's build prunes the cache)
    // builds it again rather than failing to include it.
    println!("cargo:rerun-if-changed={}", fatbin.display());
    println!("cargo:rustc-env=KILN_KERNEL_TARGETS={holds}");
}

fn main() {
    for var in ["KILN_FATBIN", "KILN_KERNELS", "KILN_NVCC", "CUDA_HOME", nvcc::ARCHS_ENV] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let cuda = manifest.join("cuda");
    println!("cargo:rerun-if-changed={}", cuda.display());
    let newest = newest_source(&cuda);
    let target = target_dir(&manifest);

    if let Some(explicit) = std::env::var_os("KILN_FATBIN").map(PathBuf::from) {
        // A missing watched file counts as changed for cargo (a rebuild of
        // everything above kiln-gpu on every build): watch it only if it exists.
        if explicit.exists() {
            println!("cargo:rerun-if-changed={}", explicit.display());
        }
        if up_to_date(&explicit, newest) {
            return embed(&explicit, &format!("KILN_FATBIN={}", explicit.display()));
        }
        println!("cargo:warning=kiln-gpu: KILN_FATBIN={} is missing or older than cuda/; building without kernels", explicit.display());
        return;
    }

    // `cargo xtask kernels` writes here; its folder is watched (created
    // here), so that write triggers a rebuild.
    let from_xtask = target.join("kernels").join("kiln.fatbin");
    if let Some(dir) = from_xtask.parent() {
        if std::fs::create_dir_all(dir).is_ok() {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }
    if up_to_date(&from_xtask, newest) {
        // xtask writes what it compiled for beside the fatbin.
        let holds = std::fs::read_to_string(from_xtask.with_extension("targets")).unwrap_or_else(|_| "cargo xtask kernels' targets".into());
        return embed(&from_xtask, holds.trim());
    }

    let mode = std::env::var("KILN_KERNELS").unwrap_or_default();
    let why_not = match mode.as_str() {
        "off" => "KILN_KERNELS=off".to_string(),
        "" | "auto" | "require" => match build_cached(&cuda, &target) {
            Ok((fatbin, holds)) => return embed(&fatbin, &holds),
            Err(e) => e,
        },
        other => panic!("KILN_KERNELS={other:?}: expected auto (the default), require or off"),
    };
    if mode == "require" {
        panic!("KILN_KERNELS=require but the CUDA kernels cannot be built: {why_not}");
    }
    for line in format!(
        "kiln-gpu: building WITHOUT CUDA kernels ({why_not}). This kiln proves on the CPU only. \
         To build them install the CUDA toolkit (or python3 with pip, for NVIDIA's nvcc wheels), \
         set KILN_NVCC or CUDA_HOME if nvcc is not on PATH, and build again; KILN_KERNELS=require makes this an error."
    )
    .lines()
    {
        println!("cargo:warning={line}");
    }
}

/// Where the kernel cache, `cargo xtask kernels`' fatbin and the nvcc
/// wheels live: `$CARGO_TARGET_DIR`, else kiln's `target/` when this is
/// kiln's own checkout (`crates/kiln-gpu` of the workspace), else, for a
/// kiln-gpu built as another project's dependency, the target directory
/// its build outputs are in (`OUT_DIR` is `<target>/<profile>/build/<pkg>/out`).
fn target_dir(manifest: &Path) -> PathBuf {
    let root = manifest.parent().and_then(Path::parent).map(Path::to_path_buf).unwrap_or_else(|| manifest.to_path_buf());
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from) {
        return if t.is_absolute() { t } else { root.join(t) };
    }
    if root.join("crates/kiln-gpu/Cargo.toml").exists() && root.join("Cargo.toml").exists() {
        return root.join("target");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    out.ancestors().nth(4).map(Path::to_path_buf).unwrap_or(out)
}

/// The cached fatbin of these sources and targets (compiled first when
/// missing), and what it holds in words.
fn build_cached(cuda: &Path, target: &Path) -> Result<(PathBuf, String), String> {
    let targets = nvcc::targets()?;
    let holds = nvcc::describe(&targets);
    let cache = target.join("kernels-cache");
    let fatbin = cache.join(format!("kiln-{}.fatbin", nvcc::source_key(cuda, &targets)));
    if fatbin.exists() {
        return Ok((fatbin, holds));
    }
    std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let nvcc_path = nvcc::find_nvcc(None, target, true)?;
    let started = Instant::now();
    nvcc::compile(&nvcc_path, cuda, &targets, &fatbin, &[])?;
    // Older sources' fatbins are not worth keeping, but a few recent ones
    // are: builds for other target sets (KILN_CUDA_ARCHS, a release and a
    // dev build) share this cache, and each would recompile if the other's
    // fatbin went.
    let mut fatbins: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&cache)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p != &fatbin && p.extension().is_some_and(|e| e == "fatbin"))
        .filter_map(|p| Some((std::fs::metadata(&p).and_then(|m| m.modified()).ok()?, p)))
        .collect();
    fatbins.sort();
    for (_, old) in fatbins.iter().rev().skip(KEEP_OTHER_FATBINS) {
        let _ = std::fs::remove_file(old);
    }
    println!(
        "cargo:warning=kiln-gpu: compiled the CUDA kernels ({holds}) with {} in {:.0} s (cached as {})",
        nvcc_path.display(),
        started.elapsed().as_secs_f64(),
        fatbin.display()
    );
    Ok((fatbin, holds))
}
