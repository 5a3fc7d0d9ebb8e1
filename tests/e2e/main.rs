//! End-to-end tests: the real daemon, real gRPC (unix socket and loopback
//! TCP), real HTTP. Tests that prove run one at a time (the [`SERIAL`] lock):
//! they measure ordering and memory, which other tests' load would blur on a
//! 2-core machine.

mod client;
mod filecoin;
mod harness;
mod jobs;
mod lifecycle;
mod limits;
mod malformed;
mod observe;
mod python;
mod restart;

/// Held by every test that runs proofs.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
