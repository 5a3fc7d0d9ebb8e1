//! Embeds the kernel fatbin that `cargo xtask kernels` builds from `cuda/`.
//!
//! The fatbin is looked up at `$KILN_FATBIN`, else `<target>/kernels/kiln.fatbin`.
//! It is embedded only when it is at least as new as every file in `cuda/`
//! (a stale fatbin would silently run old kernels); otherwise the crate builds
//! without kernels and says so at run time. nvcc is never run here, so a
//! workspace build stays fast and works on machines without a CUDA toolkit.
use std::path::{Path, PathBuf};
use std::time::SystemTime;

fn newest_source(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let t = entry.metadata().ok()?.modified().ok()?;
        newest = Some(newest.map_or(t, |n: SystemTime| n.max(t)));
        println!("cargo:rerun-if-changed={}", entry.path().display());
    }
    newest
}

fn main() {
    println!("cargo:rerun-if-env-changed=KILN_FATBIN");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.parent().and_then(Path::parent).unwrap().to_path_buf();
    let cuda = root.join("cuda");
    println!("cargo:rerun-if-changed={}", cuda.display());
    let fatbin = match std::env::var_os("KILN_FATBIN") {
        Some(p) => PathBuf::from(p),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| root.join("target"));
            let target = if target.is_absolute() { target } else { root.join(target) };
            target.join("kernels").join("kiln.fatbin")
        }
    };
    // A missing watched file counts as changed for cargo, which would then
    // rebuild kiln-gpu and all its dependents on every build of a checkout
    // without kernels. So: an explicit $KILN_FATBIN is watched only if it
    // exists; the default one through its folder target/kernels (created
    // here, so xtask's write into it triggers a rebuild).
    if std::env::var_os("KILN_FATBIN").is_some() {
        if fatbin.exists() {
            println!("cargo:rerun-if-changed={}", fatbin.display());
        }
    } else if let Some(dir) = fatbin.parent() {
        if std::fs::create_dir_all(dir).is_ok() {
            println!("cargo:rerun-if-changed={}", dir.display());
        }
    }
    let newest = newest_source(&cuda);
    let built = std::fs::metadata(&fatbin).and_then(|m| m.modified()).ok();
    match (built, newest) {
        (Some(b), Some(s)) if b >= s => {
            println!("cargo:rustc-cfg=kiln_kernels");
            println!("cargo:rustc-env=KILN_FATBIN_PATH={}", fatbin.display());
        }
        (Some(_), _) => println!(
            "cargo:warning=kiln-gpu: {} is older than cuda/; building without kernels (run `cargo xtask kernels`)",
            fatbin.display()
        ),
        (None, _) => {}
    }
}
