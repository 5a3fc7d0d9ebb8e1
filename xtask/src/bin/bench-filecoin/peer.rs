//! The peer's side: runs `peer-filecoin` (bench/peer-supraseal) on one kind
//! with the same inputs and parameter cache, and reads its JSON lines.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::report::{parse_peer_line, peer_side, PeerOutcome};

/// Runs the peer on `kind` (kiln's label); every line goes to `log` as it arrives.
pub fn run_kind(bin: &Path, inputs: &Path, param_cache: &Path, kind: &str, warmup: usize, timed: usize, log: &mut dyn FnMut(&str)) -> PeerOutcome {
    let mut cmd = Command::new(bin);
    cmd.arg("--inputs")
        .arg(inputs)
        .args(["--kinds", kind, "--warmup", &warmup.to_string(), "--timed", &timed.to_string()])
        // filecoin-proofs reads its parameters from here (they must exist: a
        // SupraSeal build cannot generate them).
        .env("FIL_PROOFS_PARAMETER_CACHE", param_cache)
        .stdout(Stdio::piped())
        // SupraSeal's and filecoin-proofs' own messages and any error go straight to our stderr.
        .stderr(Stdio::inherit());
    crate::progress(&format!("{cmd:?}"));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return PeerOutcome::Failed { why: format!("could not start {}: {e}", bin.display()) },
    };
    let mut events = Vec::new();
    let mut bad_line = None;
    for line in BufReader::new(child.stdout.take().expect("piped stdout")).lines() {
        let Ok(line) = line else { break };
        // A library's message on stdout is passed on, not taken for an event.
        if !line.trim_start().starts_with('{') {
            crate::progress(&format!("peer stdout: {line}"));
            continue;
        }
        log(&line);
        match parse_peer_line(&line) {
            Ok(e) => events.push(e),
            Err(e) => bad_line = bad_line.or(Some(e)),
        }
    }
    match child.wait() {
        Ok(s) if s.success() => {}
        Ok(s) => return PeerOutcome::Failed { why: format!("peer-filecoin exited with {s} (its stderr is above)") },
        Err(e) => return PeerOutcome::Failed { why: format!("waiting for peer-filecoin: {e}") },
    }
    if let Some(e) = bad_line {
        return PeerOutcome::Failed { why: e };
    }
    match peer_side(&events, kind) {
        Ok(s) => PeerOutcome::Ran(s),
        Err(why) => PeerOutcome::Failed { why },
    }
}
