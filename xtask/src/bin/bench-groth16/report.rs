//! The pure part of the driver: shapes, the peer's JSON lines, the figures
//! (medians, steady-state time per proof, ratios, busy %) and the table.
//! Nothing here touches a GPU, a process or a clock, so all of it is
//! unit-tested on any machine.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kiln_synth::workload::WorkloadKind;
use serde::Serialize;

/// A circuit shape both provers prove.
///
/// Only kiln's synthetic circuits exist today. The third shape of issue 5,
/// a real Filecoin circuit at a 2 KiB test sector, becomes a second variant
/// once `crates/kiln-filecoin` exists: the driver then needs its circuit,
/// its parameter file (FIL_PROOFS_PARAMETER_CACHE) and a `JobSource` for
/// kiln's engine, and the peer a `--filecoin` mode that builds the same
/// circuit; the table and ratio logic below take any `label()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shape {
    #[serde(serialize_with = "kind_name")]
    pub kind: WorkloadKind,
    pub log: u32,
    pub inputs: usize,
}

fn kind_name<S: serde::Serializer>(k: &WorkloadKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

impl Shape {
    pub fn label(&self) -> String {
        format!("{} 2^{}", self.kind.name(), self.log)
    }

    /// Every kind at every size, kinds outermost (so one kind's table rows stay together).
    pub fn all(kinds: &[WorkloadKind], logs: &[u32], inputs: usize) -> Vec<Shape> {
        kinds.iter().flat_map(|&kind| logs.iter().map(move |&log| Shape { kind, log, inputs })).collect()
    }
}

pub use crate::bench_support::{median, ratio};

/// Steady-state milliseconds per proof of a stream, from the instants its
/// proofs completed: the time between the completion of proof `skip` and
/// the last one, over the proofs completed in between. Skipping the first
/// completions leaves out the pipeline's fill (the first proofs wait for a
/// synthesis with nothing overlapped, and the pool allocates its buffers).
/// `None` when fewer than two completions remain.
pub fn steady_ms_per_proof(completions: &[Instant], skip: usize) -> Option<f64> {
    let mut c = completions.to_vec();
    c.sort();
    let c = c.get(skip..)?;
    if c.len() < 2 {
        return None;
    }
    let span = *c.last()? - c[0];
    Some(span.as_secs_f64() * 1e3 / (c.len() - 1) as f64)
}

/// Mean busy % of the samples taken inside `[from, to]`; `None` without any.
pub fn mean_busy(samples: &[(Instant, u32)], from: Instant, to: Instant) -> Option<f64> {
    let inside: Vec<f64> = samples.iter().filter(|(t, _)| *t >= from && *t <= to).map(|&(_, b)| b as f64).collect();
    if inside.is_empty() {
        None
    } else {
        Some(inside.iter().sum::<f64>() / inside.len() as f64)
    }
}

/// What one prover did on one shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SideResult {
    /// Milliseconds of each one-at-a-time proof (warm-up excluded).
    pub single_ms: Vec<f64>,
    /// Steady-state milliseconds per proof of the stream.
    pub stream_ms_per_proof: Option<f64>,
    /// Proofs in the stream (all of them, the skipped fill included).
    pub stream_proofs: usize,
    /// Mean GPU busy % while the stream ran (NVML), when sampled.
    pub stream_gpu_busy: Option<f64>,
    /// Proofs made (warm-up included) and how many of them verified.
    pub proofs: usize,
    pub verified: usize,
    /// Free-form detail for the report (backend, batch size, phases...).
    pub notes: Vec<String>,
}

impl SideResult {
    pub fn single_median(&self) -> Option<f64> {
        median(&self.single_ms)
    }
}

/// The peer's side of a shape: measured, or why not.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PeerOutcome {
    Ran(SideResult),
    Skipped { why: String },
    Failed { why: String },
}

impl PeerOutcome {
    fn side(&self) -> Option<&SideResult> {
        match self {
            PeerOutcome::Ran(s) => Some(s),
            _ => None,
        }
    }
}

/// Both provers on one shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShapeReport {
    pub shape: Shape,
    pub label: String,
    pub kiln: SideResult,
    pub peer: PeerOutcome,
}

/// A peer-supraseal stdout line (see bench/peer-supraseal/src/main.rs).
#[derive(Clone, Debug, PartialEq)]
pub enum PeerEvent {
    SrsLoaded { ms: f64 },
    Proof { mode: String, ms: f64, verified: bool },
    StreamStart,
    Stream { proofs: usize, batch: usize, wall_ms: f64 },
    Done,
}

/// Parses one line of the peer's output; anything that is not one of its
/// JSON events is an error (the peer prints nothing else on stdout).
pub fn parse_peer_line(line: &str) -> Result<PeerEvent, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not a peer event ({e}): {line:?}"))?;
    let num = |k: &str| v.get(k).and_then(|x| x.as_f64()).ok_or_else(|| format!("peer event without a number {k:?}: {line}"));
    match v.get("event").and_then(|e| e.as_str()) {
        Some("srs_loaded") => Ok(PeerEvent::SrsLoaded { ms: num("ms")? }),
        Some("proof") => Ok(PeerEvent::Proof {
            mode: v.get("mode").and_then(|m| m.as_str()).ok_or_else(|| format!("proof event without a mode: {line}"))?.to_string(),
            ms: num("ms")?,
            verified: v.get("verified").and_then(|b| b.as_bool()).unwrap_or(false),
        }),
        Some("stream_start") => Ok(PeerEvent::StreamStart),
        Some("stream") => Ok(PeerEvent::Stream { proofs: num("proofs")? as usize, batch: num("batch")? as usize, wall_ms: num("wall_ms")? }),
        Some("done") => Ok(PeerEvent::Done),
        _ => Err(format!("unknown peer event: {line}")),
    }
}

/// The peer's figures from its events: the one-at-a-time proofs, and the
/// stream's time per proof (the sum of its proofs' times over their count;
/// the peer reports each batched proof as its batch's time over the batch
/// size). Fails unless every proof verified and the peer said `done`.
pub fn peer_result(events: &[PeerEvent]) -> Result<SideResult, String> {
    let mut r = SideResult::default();
    let mut stream = Vec::new();
    let mut done = false;
    for e in events {
        match e {
            PeerEvent::Proof { mode, ms, verified } => {
                r.proofs += 1;
                if !verified {
                    return Err(format!("a SupraSeal {mode} proof did not verify"));
                }
                r.verified += 1;
                match mode.as_str() {
                    "single" => r.single_ms.push(*ms),
                    "stream" => stream.push(*ms),
                    "warmup" => {}
                    other => return Err(format!("unknown proof mode {other:?}")),
                }
            }
            PeerEvent::SrsLoaded { ms } => r.notes.push(format!("SRS load {:.0} ms", ms)),
            PeerEvent::Stream { batch, wall_ms, proofs } => {
                r.notes.push(format!("stream: {proofs} proofs in batches of {batch}, {:.0} ms wall with verification", wall_ms))
            }
            PeerEvent::StreamStart => {}
            PeerEvent::Done => done = true,
        }
    }
    if !done {
        return Err("the peer ended without saying done".into());
    }
    r.stream_proofs = stream.len();
    if !stream.is_empty() {
        r.stream_ms_per_proof = Some(stream.iter().sum::<f64>() / stream.len() as f64);
    }
    Ok(r)
}

fn cell(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "-".into())
}

fn busy_cell(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.0} %")).unwrap_or_else(|| "-".into())
}

/// The markdown table: per shape, a row for one proof at a time and one
/// for the steady stream; then a line per shape whose peer did not run.
pub fn render_table(reports: &[ShapeReport]) -> String {
    let mut s = String::new();
    s.push_str("| circuit | mode | kiln ms/proof | SupraSeal ms/proof | kiln / SupraSeal | GPU busy kiln | GPU busy SupraSeal | verified kiln / SupraSeal |\n");
    s.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for r in reports {
        let peer = r.peer.side();
        let verified = format!(
            "{}/{} / {}",
            r.kiln.verified,
            r.kiln.proofs,
            peer.map(|p| format!("{}/{}", p.verified, p.proofs)).unwrap_or_else(|| "-".into())
        );
        let (k1, p1) = (r.kiln.single_median(), peer.and_then(|p| p.single_median()));
        let _ = writeln!(
            s,
            "| {} | one at a time (median of {}) | {} | {} | {} | - | - | {} |",
            r.label,
            r.kiln.single_ms.len(),
            cell(k1, 1),
            cell(p1, 1),
            cell(ratio(k1, p1), 2),
            verified
        );
        let (k2, p2) = (r.kiln.stream_ms_per_proof, peer.and_then(|p| p.stream_ms_per_proof));
        let _ = writeln!(
            s,
            "| {} | steady stream ({} / {} proofs) | {} | {} | {} | {} | {} | |",
            r.label,
            r.kiln.stream_proofs,
            peer.map(|p| p.stream_proofs.to_string()).unwrap_or_else(|| "-".into()),
            cell(k2, 1),
            cell(p2, 1),
            cell(ratio(k2, p2), 2),
            busy_cell(r.kiln.stream_gpu_busy),
            busy_cell(peer.and_then(|p| p.stream_gpu_busy)),
        );
    }
    for r in reports {
        match &r.peer {
            PeerOutcome::Skipped { why } => {
                let _ = writeln!(s, "\n{}: SupraSeal skipped: {why}", r.label);
            }
            PeerOutcome::Failed { why } => {
                let _ = writeln!(s, "\n{}: SupraSeal FAILED: {why}", r.label);
            }
            PeerOutcome::Ran(_) => {}
        }
    }
    s
}

/// `Duration` to milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_takes_the_lower_middle_and_ignores_nan() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median(&[f64::NAN, 7.0]), Some(7.0));
    }

    #[test]
    fn steady_state_skips_the_fill_and_divides_by_the_intervals() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Fill: the first proof after 5 s, then one every 100 ms (out of order on purpose).
        let c = [at(5300), at(5000), at(5100), at(5200), at(5400)];
        assert_eq!(steady_ms_per_proof(&c, 0), Some(100.0));
        let c = [at(5000), at(9000), at(9100), at(9200)];
        assert_eq!(steady_ms_per_proof(&c, 1), Some(100.0));
        assert!((steady_ms_per_proof(&c, 0).unwrap() - 4200.0 / 3.0).abs() < 1e-9);
        assert_eq!(steady_ms_per_proof(&c, 3), None);
        assert_eq!(steady_ms_per_proof(&c, 9), None);
        assert_eq!(steady_ms_per_proof(&[], 0), None);
    }

    #[test]
    fn busy_is_the_mean_of_the_samples_inside_the_window() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let s = [(at(0), 0), (at(100), 90), (at(200), 100), (at(300), 95), (at(400), 10)];
        assert_eq!(mean_busy(&s, at(100), at(300)), Some(95.0));
        assert_eq!(mean_busy(&s, at(1000), at(2000)), None);
    }

    #[test]
    fn ratio_needs_both_sides() {
        assert_eq!(ratio(Some(250.0), Some(1000.0)), Some(0.25));
        assert_eq!(ratio(None, Some(1.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
    }

    fn events(lines: &[&str]) -> Vec<PeerEvent> {
        lines.iter().map(|l| parse_peer_line(l).unwrap()).collect()
    }

    #[test]
    fn peer_lines_parse_into_figures() {
        let ev = events(&[
            r#"{"event":"srs_loaded","ms":812.5}"#,
            r#"{"event":"proof","mode":"warmup","index":0,"ms":11000.0,"verified":true}"#,
            r#"{"event":"proof","mode":"single","index":0,"ms":4500.0,"verified":true}"#,
            r#"{"event":"proof","mode":"single","index":1,"ms":4400.0,"verified":true}"#,
            r#"{"event":"proof","mode":"single","index":2,"ms":4600.0,"verified":true}"#,
            r#"{"event":"stream_start"}"#,
            r#"{"event":"proof","mode":"stream","index":0,"ms":3600.0,"verified":true}"#,
            r#"{"event":"proof","mode":"stream","index":1,"ms":3600.0,"verified":true}"#,
            r#"{"event":"proof","mode":"stream","index":2,"ms":3800.0,"verified":true}"#,
            r#"{"event":"proof","mode":"stream","index":3,"ms":3800.0,"verified":true}"#,
            r#"{"event":"stream","proofs":4,"batch":2,"wall_ms":15000.0}"#,
            r#"{"event":"done"}"#,
        ]);
        let r = peer_result(&ev).unwrap();
        assert_eq!(r.single_median(), Some(4500.0));
        assert_eq!(r.stream_ms_per_proof, Some(3700.0));
        assert_eq!((r.proofs, r.verified, r.stream_proofs), (8, 8, 4));
    }

    #[test]
    fn a_peer_that_did_not_verify_or_finish_is_an_error() {
        let bad = events(&[r#"{"event":"proof","mode":"single","index":0,"ms":1.0,"verified":false}"#, r#"{"event":"done"}"#]);
        assert!(peer_result(&bad).unwrap_err().contains("did not verify"));
        let cut = events(&[r#"{"event":"proof","mode":"single","index":0,"ms":1.0,"verified":true}"#]);
        assert!(peer_result(&cut).unwrap_err().contains("done"));
        assert!(parse_peer_line("SupraSeal says hi").is_err());
        assert!(parse_peer_line(r#"{"event":"proof","ms":1}"#).is_err());
        assert!(parse_peer_line(r#"{"event":"party"}"#).is_err());
    }

    #[test]
    fn the_table_has_two_rows_per_shape_with_ratios_and_says_why_a_peer_is_missing() {
        let shape = Shape { kind: WorkloadKind::Dense, log: 20, inputs: 4 };
        let kiln = SideResult {
            single_ms: vec![1100.0, 1000.0, 1200.0],
            stream_ms_per_proof: Some(300.0),
            stream_proofs: 12,
            stream_gpu_busy: Some(97.4),
            proofs: 16,
            verified: 16,
            notes: vec![],
        };
        let peer = SideResult {
            single_ms: vec![4000.0, 4400.0],
            stream_ms_per_proof: Some(3000.0),
            stream_proofs: 4,
            stream_gpu_busy: Some(21.0),
            proofs: 7,
            verified: 7,
            notes: vec![],
        };
        let fl = Shape { kind: WorkloadKind::FilecoinLike, log: 20, inputs: 4 };
        let reports = vec![
            ShapeReport { shape, label: shape.label(), kiln: kiln.clone(), peer: PeerOutcome::Ran(peer) },
            ShapeReport { shape: fl, label: fl.label(), kiln, peer: PeerOutcome::Skipped { why: "no GPU".into() } },
        ];
        let t = render_table(&reports);
        assert!(t.contains("| dense 2^20 | one at a time (median of 3) | 1100.0 | 4000.0 | 0.28 | - | - | 16/16 / 7/7 |"), "{t}");
        assert!(t.contains("| dense 2^20 | steady stream (12 / 4 proofs) | 300.0 | 3000.0 | 0.10 | 97 % | 21 % | |"), "{t}");
        assert!(t.contains("| filecoin-like 2^20 | one at a time (median of 3) | 1100.0 | - | - | - | - | 16/16 / - |"), "{t}");
        assert!(t.contains("filecoin-like 2^20: SupraSeal skipped: no GPU"), "{t}");
    }

    #[test]
    fn shapes_are_every_kind_at_every_size() {
        let s = Shape::all(&[WorkloadKind::Dense, WorkloadKind::FilecoinLike], &[20, 22], 4);
        let labels: Vec<_> = s.iter().map(|s| s.label()).collect();
        assert_eq!(labels, ["dense 2^20", "dense 2^22", "filecoin-like 2^20", "filecoin-like 2^22"]);
    }
}
