//! kiln-proto: the cuzk.v1 gRPC interface, generated from
//! `proto/cuzk/v1/proving.proto` by tonic/prost at build time.
//!
//! This crate owns only the wire types: the messages and enums, the
//! `ProvingEngine` client ([`v1::proving_engine_client`]) and the server trait
//! ([`v1::proving_engine_server`]). It holds no logic; translating requests
//! into engine jobs is the daemon's business.
//!
//! Field numbers below 100 are Curio's cuzk.v1 interface and never change;
//! kiln's additions (the `KILN_SYNTHETIC` proof kind, the `synthetic_*`
//! request fields, the budget and buffer counters in `GetStatusResponse`)
//! use numbers from 100 up.

/// The `cuzk.v1` package.
pub mod v1 {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("cuzk.v1");
}

pub use v1::proving_engine_client::ProvingEngineClient;
pub use v1::proving_engine_server::{ProvingEngine, ProvingEngineServer};
