//! `peer-filecoin`: the peer prover of `cargo xtask bench filecoin --peer supraseal`.
//!
//! It proves the four Filecoin proof kinds (PoRep C2, SnapDeals, WindowPoSt,
//! WinningPoSt) from the payloads `cargo xtask gen-vanilla` writes, with
//! filecoin-proofs 19's own functions on a `cuda-supraseal` build (what
//! Curio runs: SupraSeal C2 on sppark), against the parameter files in
//! `FIL_PROOFS_PARAMETER_CACHE` (kiln's, generated beforehand: a SupraSeal
//! build cannot generate parameters). Every proof is verified with
//! filecoin-proofs' verifier. One JSON object per line on stdout:
//!
//! - `{"event":"kind","kind":"porep-c2","registered_proof":"StackedDrg8MiBV1_1"}` before a kind's proofs,
//! - `{"event":"proof","kind":..,"mode":"warmup"|"timed","index":i,"ms":..,"verify_ms":..,"bytes":n,"verified":true}`
//!   after each proof (`ms` is the prover call alone, verification excluded),
//! - `{"event":"done"}` last. A failure ends the process with a non-zero
//!   status and a message on stderr.
//!
//! The first proof of a kind (the warm-up) also loads that kind's
//! parameters into filecoin-proofs' memory cache and, on an H200,
//! JIT-compiles sppark's `compute_80` PTX; it is reported but not counted.
//!
//! The payload and registered-proof modules are kiln-filecoin's own files,
//! included by path (they depend on filecoin-proofs-api, serde, base64 and
//! bincode only), so both sides read the inputs with the same code.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::json;

#[allow(dead_code)]
#[path = "../../../../../crates/kiln-filecoin/src/payload.rs"]
mod payload;
#[allow(dead_code)]
#[path = "../../../../../crates/kiln-filecoin/src/registered.rs"]
mod registered;

mod kinds;

use kinds::Kind;

const USAGE: &str = "usage: peer-filecoin --inputs DIR [--kinds porep,snap,window,winning] [--warmup N] [--timed N]\n\
(parameters are read from FIL_PROOFS_PARAMETER_CACHE; they must exist)";

#[derive(Debug)]
struct Args {
    inputs: PathBuf,
    kinds: Vec<Kind>,
    warmup: usize,
    timed: usize,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args { inputs: PathBuf::new(), kinds: Kind::ALL.to_vec(), warmup: 1, timed: 2 };
    let mut inputs = None;
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.to_string());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--inputs" => inputs = Some(PathBuf::from(value)),
            "--kinds" => a.kinds = value.split(',').filter(|s| !s.is_empty()).map(Kind::parse).collect::<Result<_, _>>()?,
            "--warmup" => a.warmup = num(&value)?,
            "--timed" => a.timed = num(&value)?,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    a.inputs = inputs.ok_or_else(|| format!("--inputs is required\n{USAGE}"))?;
    Ok(a)
}

/// Prints one JSON line and flushes, so the driver sees progress as it happens.
fn emit(v: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{v}").and_then(|_| out.flush()).expect("stdout");
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn run_kind(args: &Args, kind: Kind) -> Result<(), String> {
    let file = args.inputs.join(kind.payload_kind().file_name());
    let bytes = std::fs::read(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    let payload: payload::Payload = serde_json::from_slice(&bytes).map_err(|e| format!("{} is not a payload: {e}", file.display()))?;
    let prepared = kind.prepare(&payload).map_err(|e| format!("{}: {e}", file.display()))?;
    emit(json!({"event": "kind", "kind": kind.label(), "registered_proof": prepared.registered()}));
    for i in 0..args.warmup + args.timed {
        let (mode, index) = if i < args.warmup { ("warmup", i) } else { ("timed", i - args.warmup) };
        let inputs = prepared.inputs();
        let t = Instant::now();
        let proof = prepared.prove(inputs).map_err(|e| format!("{} {mode} {index}: {e}", kind.label()))?;
        let took = ms(t);
        let v = Instant::now();
        prepared.verify(&proof).map_err(|e| format!("{} {mode} {index}: {e}", kind.label()))?;
        emit(json!({
            "event": "proof", "kind": kind.label(), "mode": mode, "index": index,
            "ms": took, "verify_ms": ms(v), "bytes": proof.len(), "verified": true,
        }));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if std::env::var_os("FIL_PROOFS_PARAMETER_CACHE").is_none() {
        eprintln!("peer-filecoin: FIL_PROOFS_PARAMETER_CACHE is not set; filecoin-proofs reads /var/tmp/filecoin-proof-parameters");
    }
    for &kind in &args.kinds {
        if let Err(e) = run_kind(&args, kind) {
            eprintln!("peer-filecoin: {e}");
            return ExitCode::FAILURE;
        }
    }
    emit(json!({"event": "done"}));
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_parse() {
        let a = args("--inputs d --kinds porep,winning-post --timed 3").unwrap();
        assert_eq!((a.kinds, a.warmup, a.timed), (vec![Kind::Porep, Kind::Winning], 1, 3));
        assert_eq!(args("--inputs d").unwrap().kinds, Kind::ALL.to_vec());
        assert!(args("--kinds porep").unwrap_err().contains("--inputs"));
        assert!(args("--inputs d --kinds nope").is_err());
    }
}
