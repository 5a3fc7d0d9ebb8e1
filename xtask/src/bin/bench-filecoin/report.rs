//! The pure part of the driver: the peer's JSON lines, per-kind figures
//! (medians, ratios) and the table. Nothing here touches a GPU, a process
//! or a clock, so all of it is unit-tested on any machine.

use std::fmt::Write as _;

use serde::Serialize;

pub use crate::bench_support::{median, ratio};

/// What one prover did on one kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    /// Milliseconds of each warm-up proof (not counted).
    pub warmup_ms: Vec<f64>,
    /// Milliseconds of each timed proof.
    pub timed_ms: Vec<f64>,
    /// Milliseconds of filecoin-proofs' verification of each proof (not in the times above).
    pub verify_ms: Vec<f64>,
    /// Proofs made (warm-up included) and how many filecoin-proofs accepted.
    pub proofs: usize,
    pub verified: usize,
    /// Free-form detail (phases, backend).
    pub notes: Vec<String>,
}

impl Side {
    pub fn timed_median(&self) -> Option<f64> {
        median(&self.timed_ms)
    }
}

/// The peer's side of a kind: measured, or why not.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PeerOutcome {
    Ran(Side),
    Skipped { why: String },
    Failed { why: String },
}

/// Both provers on one kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindReport {
    /// kiln's label (`porep-c2`, `snap-deals`, `window-post`, `winning-post`).
    pub kind: String,
    pub registered_proof: String,
    pub partitions: usize,
    pub kiln: Side,
    pub peer: PeerOutcome,
}

/// A peer-filecoin stdout line (see bench/peer-supraseal/src/bin/peer-filecoin).
#[derive(Clone, Debug, PartialEq)]
pub enum PeerEvent {
    Kind { kind: String, registered_proof: String },
    Proof { kind: String, mode: String, ms: f64, verify_ms: f64, verified: bool },
    Done,
}

/// Parses one line of the peer's output; anything that is not one of its
/// JSON events is an error (the peer prints nothing else on stdout).
pub fn parse_peer_line(line: &str) -> Result<PeerEvent, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("peer line is not JSON ({e}): {line}"))?;
    let s = |k: &str| v[k].as_str().map(str::to_string).ok_or_else(|| format!("peer line without {k:?}: {line}"));
    let f = |k: &str| v[k].as_f64().ok_or_else(|| format!("peer line without a number {k:?}: {line}"));
    match v["event"].as_str() {
        Some("kind") => Ok(PeerEvent::Kind { kind: s("kind")?, registered_proof: s("registered_proof")? }),
        Some("proof") => Ok(PeerEvent::Proof {
            kind: s("kind")?,
            mode: s("mode")?,
            ms: f("ms")?,
            verify_ms: f("verify_ms")?,
            verified: v["verified"].as_bool().unwrap_or(false),
        }),
        Some("done") => Ok(PeerEvent::Done),
        _ => Err(format!("unknown peer event: {line}")),
    }
}

/// The peer's side of `kind` from its events; an error when it made no
/// timed proof or one of its proofs did not verify.
pub fn peer_side(events: &[PeerEvent], kind: &str) -> Result<Side, String> {
    let mut side = Side::default();
    for e in events {
        if let PeerEvent::Proof { kind: k, mode, ms, verify_ms, verified } = e {
            if k != kind {
                continue;
            }
            side.proofs += 1;
            if !verified {
                return Err(format!("a SupraSeal {kind} proof did not verify"));
            }
            side.verified += 1;
            side.verify_ms.push(*verify_ms);
            match mode.as_str() {
                "warmup" => side.warmup_ms.push(*ms),
                "timed" => side.timed_ms.push(*ms),
                other => return Err(format!("unknown peer mode {other:?}")),
            }
        }
    }
    if side.timed_ms.is_empty() {
        return Err(format!("the peer reported no timed {kind} proof"));
    }
    Ok(side)
}

fn cell(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into())
}

fn list(v: &[f64]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(", ")
    }
}

/// The markdown table: one row per kind, then the peer's status when it did not run.
pub fn render_table<'a>(reports: &'a [KindReport]) -> String {
    let mut t = String::from(
        "| kind | registered proof | partitions | kiln ms/proof (median) | SupraSeal ms/proof (median) | kiln / SupraSeal | kiln timed ms | SupraSeal timed ms | warm-up ms kiln / SupraSeal | verified kiln / SupraSeal |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    // (what happened to the peer, the kinds it happened on), in order.
    let mut notes: Vec<(String, Vec<&str>)> = Vec::new();
    let mut note = |text: String, kind: &'a str| match notes.iter_mut().find(|(t, _)| *t == text) {
        Some((_, kinds)) => kinds.push(kind),
        None => notes.push((text, vec![kind])),
    };
    for r in reports {
        let (peer_med, peer_timed, peer_warm, peer_verified) = match &r.peer {
            PeerOutcome::Ran(p) => (p.timed_median(), list(&p.timed_ms), list(&p.warmup_ms), format!("{}/{}", p.verified, p.proofs)),
            PeerOutcome::Skipped { why } => {
                note(format!("SupraSeal skipped: {why}"), &r.kind);
                (None, "skipped".into(), "-".into(), "-".into())
            }
            PeerOutcome::Failed { why } => {
                note(format!("SupraSeal FAILED: {why}"), &r.kind);
                (None, "failed".into(), "-".into(), "-".into())
            }
        };
        let k = r.kiln.timed_median();
        let ratio = ratio(k, peer_med).map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {ratio} | {} | {peer_timed} | {} / {peer_warm} | {}/{} / {peer_verified} |",
            r.kind,
            r.registered_proof,
            r.partitions,
            cell(k),
            cell(peer_med),
            list(&r.kiln.timed_ms),
            list(&r.kiln.warmup_ms),
            r.kiln.verified,
            r.kiln.proofs,
        );
    }
    for (text, kinds) in notes {
        let _ = writeln!(t, "\n{}: {text}", kinds.join(", "));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(timed: &[f64]) -> Side {
        Side { timed_ms: timed.to_vec(), warmup_ms: vec![900.0], proofs: timed.len() + 1, verified: timed.len() + 1, ..Side::default() }
    }

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(1.0));
        assert_eq!(median(&[]), None);
        assert_eq!(ratio(Some(50.0), Some(200.0)), Some(0.25));
        assert_eq!(ratio(Some(50.0), None), None);
        assert_eq!(ratio(Some(50.0), Some(0.0)), None);
    }

    #[test]
    fn peer_lines_become_a_side_per_kind() {
        let lines = [
            r#"{"event":"kind","kind":"porep-c2","registered_proof":"StackedDrg8MiBV1_1"}"#,
            r#"{"event":"proof","kind":"porep-c2","mode":"warmup","index":0,"ms":9000.0,"verify_ms":20.0,"bytes":192,"verified":true}"#,
            r#"{"event":"proof","kind":"porep-c2","mode":"timed","index":0,"ms":3000.0,"verify_ms":20.0,"bytes":192,"verified":true}"#,
            r#"{"event":"proof","kind":"porep-c2","mode":"timed","index":1,"ms":2800.0,"verify_ms":21.0,"bytes":192,"verified":true}"#,
            r#"{"event":"done"}"#,
        ];
        let events: Vec<_> = lines.iter().map(|l| parse_peer_line(l).unwrap()).collect();
        assert_eq!(events[0], PeerEvent::Kind { kind: "porep-c2".into(), registered_proof: "StackedDrg8MiBV1_1".into() });
        let s = peer_side(&events, "porep-c2").unwrap();
        assert_eq!((s.warmup_ms.clone(), s.timed_ms.clone(), s.proofs, s.verified), (vec![9000.0], vec![3000.0, 2800.0], 3, 3));
        assert_eq!(s.timed_median(), Some(2800.0));
        assert!(peer_side(&events, "snap-deals").unwrap_err().contains("no timed"));
        assert!(parse_peer_line("hello").is_err());
        assert!(parse_peer_line(r#"{"event":"proof","kind":"x"}"#).is_err());
        let bad = parse_peer_line(r#"{"event":"proof","kind":"x","mode":"timed","ms":1,"verify_ms":1,"verified":false}"#).unwrap();
        assert!(peer_side(&[bad], "x").unwrap_err().contains("did not verify"));
    }

    #[test]
    fn table_has_a_row_per_kind_and_says_why_the_peer_is_missing() {
        let reports = vec![
            KindReport {
                kind: "porep-c2".into(),
                registered_proof: "StackedDrg8MiBV1_1".into(),
                partitions: 1,
                kiln: side(&[1000.0, 1200.0]),
                peer: PeerOutcome::Ran(side(&[4000.0, 4100.0])),
            },
            KindReport {
                kind: "winning-post".into(),
                registered_proof: "StackedDrgWinning8MiBV1".into(),
                partitions: 1,
                kiln: side(&[100.0]),
                peer: PeerOutcome::Skipped { why: "no GPU".into() },
            },
        ];
        let t = render_table(&reports);
        assert!(t.contains("| porep-c2 | StackedDrg8MiBV1_1 | 1 | 1000.0 | 4000.0 | 0.25 | 1000, 1200 | 4000, 4100 | 900 / 900 | 3/3 / 3/3 |"), "{t}");
        assert!(t.contains("| winning-post | StackedDrgWinning8MiBV1 | 1 | 100.0 | - | - | 100 | skipped |"), "{t}");
        assert!(t.contains("\nwinning-post: SupraSeal skipped: no GPU"), "{t}");
        let mut twice = reports.clone();
        twice[0].peer = PeerOutcome::Skipped { why: "no GPU".into() };
        assert!(render_table(&twice).contains("\nporep-c2, winning-post: SupraSeal skipped: no GPU\n"));
    }
}
