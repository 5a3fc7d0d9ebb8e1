//! kiln-daemon: the `kiln` binary's modules, as a library so the end-to-end
//! tests (`tests/`, crate kiln-e2e) can run the real daemon in-process.
//!
//! The daemon is thin: [`config`] and [`cli`] resolve the knobs, [`serve`]
//! starts the engine (kiln-pipeline) on the backends kiln-groth16's
//! `Backends::open` picks (GPUs, else the CPU, and why) and the listeners
//! (UNIX sockets through `uds`, which mends gRPC clients' `:authority`),
//! [`grpc`] translates cuzk.v1 messages to engine calls, [`kinds`] maps
//! proof kinds to job sources, [`http`] serves `/status` and `/metrics`
//! (rendered by [`metrics`]), [`logging`] sets up the log. [`demo`] is
//! `kiln demo`; [`client`] is `kiln prove | status | preload | evict |
//! metrics`, a client of a running daemon.

pub mod cli;
pub mod client;
pub mod config;
pub mod demo;
pub mod grpc;
pub mod http;
pub mod kinds;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod serve;
mod sys;
mod uds;

/// `kiln --version`: the version and whether CUDA kernels are built in,
/// for which GPUs.
pub fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| match kiln_gpu::KERNEL_TARGETS {
        Some(holds) if kiln_gpu::HAS_KERNELS => format!("{} (CUDA kernels built in: {holds})", env!("CARGO_PKG_VERSION")),
        _ => format!("{} (no CUDA kernels: proves on the CPU only)", env!("CARGO_PKG_VERSION")),
    })
}
