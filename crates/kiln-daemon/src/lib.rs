//! kiln-daemon: the `kiln` binary's modules, as a library so the end-to-end
//! tests (`tests/`, crate kiln-e2e) can run the real daemon in-process.
//!
//! The daemon is thin: [`config`] and [`cli`] resolve the knobs, [`serve`]
//! starts the engine (kiln-pipeline) on the [`backends`] and the listeners, [`grpc`] translates
//! cuzk.v1 messages to engine calls, [`kinds`] maps proof kinds to job
//! sources, [`http`] serves `/status` and `/metrics`. [`demo`] is `kiln demo`.

pub mod backends;
pub mod cli;
pub mod config;
pub mod demo;
pub mod grpc;
pub mod http;
pub mod kinds;
pub mod serve;
