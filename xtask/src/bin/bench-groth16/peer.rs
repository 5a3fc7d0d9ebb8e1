//! The peer's side: runs the `peer-supraseal` binary (bench/peer-supraseal)
//! on one shape and the same parameter file, reads its JSON lines, and
//! samples GPU busy % between its `stream_start` and `stream` events.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::busy::BusyRecorder;
use crate::report::{mean_busy, parse_peer_line, peer_result, PeerEvent, PeerOutcome, Shape};

/// How many proofs the peer makes per shape.
#[derive(Clone, Copy, Debug)]
pub struct PeerCounts {
    pub warmup: usize,
    pub single: usize,
    pub stream: usize,
    pub batch: usize,
}

/// Runs the peer; every line it prints goes to `log` as it arrives.
pub fn run_shape(bin: &Path, shape: Shape, params: &Path, counts: PeerCounts, seed: u64, log: &mut dyn FnMut(&str)) -> PeerOutcome {
    let mut cmd = Command::new(bin);
    cmd.arg("--params")
        .arg(params)
        .args(["--kind", shape.kind.name(), "--log", &shape.log.to_string(), "--inputs", &shape.inputs.to_string()])
        .args(["--warmup", &counts.warmup.to_string(), "--single", &counts.single.to_string()])
        .args(["--stream", &counts.stream.to_string(), "--batch", &counts.batch.to_string(), "--seed", &seed.to_string()])
        .stdout(Stdio::piped())
        // SupraSeal's own messages and any error go straight to our stderr.
        .stderr(Stdio::inherit());
    eprintln!("bench-groth16: {cmd:?}");
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return PeerOutcome::Failed { why: format!("could not start {}: {e}", bin.display()) },
    };
    let recorder = BusyRecorder::start();
    let mut events = Vec::new();
    let (mut from, mut to) = (None, None);
    let mut bad_line = None;
    for line in BufReader::new(child.stdout.take().expect("piped stdout")).lines() {
        let Ok(line) = line else { break };
        // The peer prints only JSON objects; anything else on its stdout
        // (a library's message) is passed on, not taken for an event.
        if !line.trim_start().starts_with('{') {
            eprintln!("bench-groth16: peer stdout: {line}");
            continue;
        }
        log(&line);
        match parse_peer_line(&line) {
            Ok(e) => {
                match e {
                    PeerEvent::StreamStart => from = Some(Instant::now()),
                    PeerEvent::Stream { .. } => to = Some(Instant::now()),
                    _ => {}
                }
                events.push(e);
            }
            Err(e) => bad_line = bad_line.or(Some(e)),
        }
    }
    let status = child.wait();
    let samples = recorder.map(BusyRecorder::stop).unwrap_or_default();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => return PeerOutcome::Failed { why: format!("peer-supraseal exited with {s} (its stderr is above)") },
        Err(e) => return PeerOutcome::Failed { why: format!("waiting for peer-supraseal: {e}") },
    }
    if let Some(e) = bad_line {
        return PeerOutcome::Failed { why: e };
    }
    match peer_result(&events) {
        Ok(mut r) => {
            if let (Some(f), Some(t)) = (from, to) {
                r.stream_gpu_busy = mean_busy(&samples, f, t);
            }
            PeerOutcome::Ran(r)
        }
        Err(why) => PeerOutcome::Failed { why },
    }
}
