//! `peer-supraseal`: the peer prover of `cargo xtask bench groth16 --peer supraseal`.
//!
//! It proves kiln's own synthetic circuits (`kiln_synth::workload`, the same
//! structure seed, the same witness seeds) with bellperson 0.27 built with
//! `cuda-supraseal` (SupraSeal C2 on sppark), reading the very parameter file
//! kiln proves with (bellperson's `.params` format), and verifies every proof
//! with bellperson's verifier against the verifying key at the head of that
//! file. It prints one JSON object per line on stdout, which the driver
//! (`bench-groth16`) parses:
//!
//! - `{"event":"srs_loaded","ms":..}` once,
//! - `{"event":"proof","mode":"warmup"|"single"|"stream","index":i,"ms":..,"verified":true}`
//!   for every proof (stream proofs of one batch share the batch's time, see below),
//! - `{"event":"stream_start"}` before the stream and
//!   `{"event":"stream","proofs":n,"batch":b,"wall_ms":..}` after it,
//! - `{"event":"done"}` last; any failure ends the process with a non-zero
//!   status and a message on stderr instead.
//!
//! Modes, in this order:
//! 1. `--warmup` proofs, not counted: SupraSeal's sppark kernels are
//!    `compute_80` PTX, which the driver JIT-compiles on first use on an
//!    H200 (seconds), and the first call also uploads nothing but allocates.
//! 2. `--single` proofs one at a time: each call synthesizes and proves one
//!    circuit (`create_random_proof`), timed from the circuit to the proof.
//! 3. `--stream` proofs back to back, in calls of `--batch` circuits each
//!    (`create_random_proof_batch`: SupraSeal's native throughput mode, the
//!    one Filecoin uses for the partitions of one sector, synthesizing the
//!    batch in parallel and then proving it). The stream's figure is its
//!    wall time over its proofs.
//!
//! Verification happens after each timed call and is not part of any time
//! (kiln's times include its own verification, so the ratio is conservative
//! for kiln).

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use bellperson::groth16::{
    create_random_proof, create_random_proof_batch, prepare_verifying_key, verify_proof, PreparedVerifyingKey, Proof,
    SuprasealParameters, VerifyingKey,
};
use blstrs::Bls12;
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde_json::json;

const USAGE: &str = "usage: peer-supraseal --params FILE --kind dense|filecoin-like --log N \
[--inputs K] [--warmup N] [--single N] [--stream N] [--batch B] [--seed S]";

/// What to prove and how many times; parsed from the command line.
#[derive(Debug)]
struct Args {
    params: PathBuf,
    kind: WorkloadKind,
    log: u32,
    inputs: usize,
    warmup: usize,
    single: usize,
    stream: usize,
    batch: usize,
    seed: u64,
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut params = None;
    let mut kind = None;
    let mut log = None;
    let mut a = Args {
        params: PathBuf::new(),
        kind: WorkloadKind::Dense,
        log: 0,
        inputs: 4,
        warmup: 1,
        single: 3,
        stream: 4,
        batch: 2,
        seed: 1,
    };
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.to_string());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--params" => params = Some(PathBuf::from(value)),
            "--kind" => kind = Some(value.parse::<WorkloadKind>()?),
            "--log" => log = Some(num(&value)? as u32),
            "--inputs" => a.inputs = num(&value)? as usize,
            "--warmup" => a.warmup = num(&value)? as usize,
            "--single" => a.single = num(&value)? as usize,
            "--stream" => a.stream = num(&value)? as usize,
            "--batch" => a.batch = (num(&value)? as usize).max(1),
            "--seed" => a.seed = num(&value)?,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    a.params = params.ok_or_else(|| format!("--params is required\n{USAGE}"))?;
    a.kind = kind.ok_or_else(|| format!("--kind is required\n{USAGE}"))?;
    a.log = log.ok_or_else(|| format!("--log is required\n{USAGE}"))?;
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

struct Peer {
    args: Args,
    srs: SuprasealParameters<Bls12>,
    pvk: PreparedVerifyingKey<Bls12>,
    /// Witness seeds are consumed in order so that no two proofs of a run
    /// share a witness (and kiln's side uses the same sequence).
    next_seed: u64,
    rng: ChaCha20Rng,
}

impl Peer {
    fn circuit(&mut self) -> SyntheticCircuit {
        let seed = self.next_seed;
        self.next_seed += 1;
        SyntheticCircuit::filling_domain(self.args.kind, self.args.log, self.args.inputs).with_witness(seed)
    }

    fn verify(&self, circuit: &SyntheticCircuit, proof: &Proof<Bls12>) -> Result<(), String> {
        let ok = verify_proof(&self.pvk, proof, &circuit.public_inputs()).map_err(|e| format!("verifier error: {e}"))?;
        if ok {
            Ok(())
        } else {
            Err(format!("SupraSeal proof for witness seed {:?} does NOT verify", circuit.witness_seed))
        }
    }

    /// One call to SupraSeal with one circuit; returns the call's time.
    fn one(&mut self, mode: &str, index: usize) -> Result<(), String> {
        let c = self.circuit();
        let t = Instant::now();
        let proof = create_random_proof(c, &self.srs, &mut self.rng).map_err(|e| format!("SupraSeal: {e}"))?;
        let took = ms(t);
        self.verify(&c, &proof)?;
        emit(json!({"event": "proof", "mode": mode, "index": index, "ms": took, "verified": true}));
        Ok(())
    }

    /// `n` proofs back to back in batches; every proof of a batch is
    /// reported with the batch's time divided by its size.
    fn stream(&mut self, n: usize) -> Result<(), String> {
        // Marks the start for the driver, which samples GPU busy % between
        // this line and the `stream` line.
        emit(json!({"event": "stream_start"}));
        let start = Instant::now();
        let mut done = 0;
        while done < n {
            let b = self.args.batch.min(n - done);
            let circuits: Vec<_> = (0..b).map(|_| self.circuit()).collect();
            let t = Instant::now();
            let proofs =
                create_random_proof_batch(circuits.clone(), &self.srs, &mut self.rng).map_err(|e| format!("SupraSeal: {e}"))?;
            let each = ms(t) / b as f64;
            for (c, p) in circuits.iter().zip(&proofs) {
                self.verify(c, p)?;
                emit(json!({"event": "proof", "mode": "stream", "index": done, "ms": each, "verified": true}));
                done += 1;
            }
        }
        // Wall time of the whole stream, verification included: the driver
        // uses the sum of the per-proof prove times, this is for the record.
        emit(json!({"event": "stream", "proofs": n, "batch": self.args.batch, "wall_ms": ms(start)}));
        Ok(())
    }
}

fn run(args: Args) -> Result<(), String> {
    let vk = VerifyingKey::<Bls12>::read(BufReader::new(
        File::open(&args.params).map_err(|e| format!("{}: {e}", args.params.display()))?,
    ))
    .map_err(|e| format!("verifying key in {}: {e}", args.params.display()))?;
    let pvk = prepare_verifying_key(&vk);
    let t = Instant::now();
    // SupraSeal reads the whole parameter file into its own host memory here.
    let srs = SuprasealParameters::<Bls12>::new(args.params.clone())
        .map_err(|e| format!("SupraSeal could not load {}: {e}", args.params.display()))?;
    emit(json!({"event": "srs_loaded", "ms": ms(t)}));
    let mut peer = Peer { next_seed: args.seed, rng: ChaCha20Rng::seed_from_u64(args.seed ^ 0x5eed), args, srs, pvk };
    for i in 0..peer.args.warmup {
        peer.one("warmup", i)?;
    }
    for i in 0..peer.args.single {
        peer.one("single", i)?;
    }
    let n = peer.args.stream;
    if n > 0 {
        peer.stream(n)?;
    }
    emit(json!({"event": "done"}));
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
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("peer-supraseal: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn flags_parse_and_required_ones_are_checked() {
        let a = args("--params p --kind filecoin-like --log 20 --single 2 --stream 6 --batch 3").unwrap();
        assert_eq!((a.kind, a.log, a.single, a.stream, a.batch, a.inputs), (WorkloadKind::FilecoinLike, 20, 2, 6, 3, 4));
        assert!(args("--kind dense --log 20").unwrap_err().contains("--params"));
        assert!(args("--params p --kind nope --log 3").is_err());
        assert!(args("--params p --kind dense --log").unwrap_err().contains("needs a value"));
        assert_eq!(args("--params p --kind dense --log 3 --batch 0").unwrap().batch, 1);
    }
}
