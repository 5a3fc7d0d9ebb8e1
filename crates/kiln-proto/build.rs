//! Generates the cuzk.v1 types from `proto/cuzk/v1/proving.proto`.
//!
//! protoc comes from `protoc-bin-vendored` rather than the host: build
//! machines and CI have none installed, and a pinned protoc makes the
//! generated code the same everywhere. `PROTOC` in the environment still wins,
//! for hosts the vendored binaries do not cover.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read at run time: `env!` would bake in the path of the checkout that
    // compiled this script, and cargo reuses the compiled script for another
    // checkout of the same workspace sharing the target directory.
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let proto = root.join("cuzk/v1/proving.proto");
    if std::env::var_os("PROTOC").is_none() {
        std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    }
    println!("cargo:rerun-if-changed={}", proto.display());
    println!("cargo:rerun-if-env-changed=PROTOC");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&[&proto], &[&root])?;
    Ok(())
}
