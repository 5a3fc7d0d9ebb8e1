//! Parameter files changed on disk under a running engine (issue 22, part
//! 4): truncated, written in place, replaced by a rename, while jobs use
//! them. The engine keeps serving; a job fails saying what happened to the
//! file, or completes with proofs that verify against the parameters it
//! was proved with. Never a crash, never an unverified proof.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proof, Proof, VerifyingKey};
use blstrs::Bls12;
use common::*;
use kiln_groth16::{setup, ParamsFile};
use kiln_pipeline::synthetic::SyntheticJob;
use kiln_pipeline::{Engine, JobOutcome, JobRequest, JobSource, Priority};
use kiln_synth::workload::SyntheticCircuit;
use rand::SeedableRng;

const LOG: u32 = 10;
const MIB: u64 = 1 << 20;

/// A private copy of the shared 2^10 parameters (the tests change it), and
/// another valid setup of the same circuit, as file bytes.
fn private_params() -> (tempfile::TempDir, PathBuf, Vec<u8>, Vec<u8>) {
    ensure_params(LOG);
    let shared = SyntheticJob::srs_spec(KIND, LOG, INPUTS, &params_dir()).path;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(shared.file_name().unwrap());
    let bytes = std::fs::read(&shared).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let circuit = SyntheticCircuit::filling_domain(KIND, LOG, INPUTS);
    let other = setup::generate(circuit, &mut rand_chacha::ChaCha8Rng::seed_from_u64(77)).unwrap();
    let mut other_bytes = Vec::new();
    other.write(&mut other_bytes).unwrap();
    (dir, path, bytes, other_bytes)
}

fn job(dir: &Path, partitions: usize, seed: u64) -> Arc<SyntheticJob> {
    Arc::new(SyntheticJob::new(KIND, LOG, INPUTS, partitions, dir).with_seed(seed))
}

fn vk_of(bytes: &[u8]) -> VerifyingKey<Bls12> {
    ParamsFile::from_bytes(bytes.to_vec()).unwrap().vk().clone()
}

/// Each partition's proof verifies against one of `vks`.
fn assert_verifies_against_one_of(job: &SyntheticJob, packed: &[u8], vks: &[&VerifyingKey<Bls12>]) {
    assert_eq!(packed.len(), job.num_partitions() * 192);
    for (i, bytes) in packed.chunks(192).enumerate() {
        let proof = Proof::read(bytes).unwrap();
        let inputs = job.circuit(i).public_inputs();
        let ok = vks.iter().any(|vk| verify_proof(&bellperson::groth16::prepare_verifying_key(vk), &proof, &inputs).unwrap());
        assert!(ok, "partition {i}'s proof verifies against none of the parameters");
    }
}

fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn outcome(engine: &Engine, id: &str) -> JobOutcome {
    engine.wait_blocking(id, Some(Duration::from_secs(120)))
}

#[test]
fn a_truncated_parameter_file_fails_jobs_with_a_reason_and_a_restored_one_proves() {
    let (dir, path, bytes, _) = private_params();
    let engine = Engine::start(config(256 * MIB), vec![]).unwrap();
    let j = job(dir.path(), 2, 1);
    engine.submit(JobRequest::new("before", Priority::Normal, j.clone())).unwrap();
    let JobOutcome::Completed { proof, .. } = outcome(&engine, "before") else { panic!("the first job proves") };
    assert_valid_proofs(&j, &proof);

    // Truncated while hot (mapped, reserved): the next job is refused with
    // what is wrong with the file, and nothing faults.
    OpenOptions::new().write(true).open(&path).unwrap().set_len(bytes.len() as u64 / 2).unwrap();
    // (Submit sizes the job from the parameters, so it may refuse it.)
    let why = match engine.submit(JobRequest::new("truncated", Priority::Normal, job(dir.path(), 2, 2))) {
        Err(e) => e.to_string(),
        Ok(_) => match outcome(&engine, "truncated") {
            JobOutcome::Failed(why) => why,
            other => panic!("a job against a truncated file: {other:?}"),
        },
    };
    assert!(why.contains("truncated") && why.contains("needs bytes up to offset"), "{why}");
    // Put back (atomically): the engine opens it again and proves.
    replace(&path, &bytes);
    let j = job(dir.path(), 2, 3);
    engine.submit(JobRequest::new("restored", Priority::Normal, j.clone())).unwrap();
    let JobOutcome::Completed { proof, .. } = outcome(&engine, "restored") else { panic!("the restored file proves") };
    assert_valid_proofs(&j, &proof);
    assert_idle(&engine);
}

/// Jobs keep running while the file is truncated, written in place and
/// replaced (by this setup or another) over and over.
#[test]
fn jobs_while_the_parameter_file_keeps_changing_fail_or_verify() {
    let (dir, path, bytes, other) = private_params();
    let (vk, other_vk) = (vk_of(&bytes), vk_of(&other));
    let engine = Engine::start(config(256 * MIB), vec![]).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let vandal = {
        let (path, stop, bytes) = (path.clone(), stop.clone(), bytes.clone());
        std::thread::spawn(move || {
            let mut changes = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(40 + (changes * 53) % 160));
                let f = OpenOptions::new().write(true).open(&path).unwrap();
                match changes % 5 {
                    0 => f.set_len(bytes.len() as u64 / 3).unwrap(),
                    1 => replace(&path, &bytes),
                    2 => f.write_all_at(&other[2048..6144], 2048).unwrap(),
                    3 => replace(&path, &other),
                    _ => f.write_all_at(&bytes, 0).unwrap(),
                }
                changes += 1;
            }
            replace(&path, &bytes);
            changes
        })
    };
    let (mut completed, mut failed) = (0, 0);
    let started = Instant::now();
    let mut seed = 10;
    while started.elapsed() < Duration::from_secs(6) || completed == 0 || failed == 0 {
        assert!(started.elapsed() < Duration::from_secs(120), "completed {completed} failed {failed}");
        let ids: Vec<(String, Arc<SyntheticJob>)> = (0..3)
            .map(|k| {
                seed += 1;
                (format!("job-{seed}-{k}"), job(dir.path(), 2, seed))
            })
            .collect();
        let clear = ["changed on disk", "truncated", "parameters are invalid", "failed verification"];
        let mut submitted = Vec::new();
        for (id, j) in &ids {
            match engine.submit(JobRequest::new(id.clone(), Priority::Normal, j.clone())) {
                Ok(_) => submitted.push((id, j)),
                Err(e) => {
                    let why = e.to_string();
                    assert!(clear.iter().any(|c| why.contains(c)), "{id}: unclear refusal: {why}");
                    failed += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        for (id, j) in submitted {
            match outcome(&engine, id) {
                JobOutcome::Completed { proof, .. } => {
                    assert_verifies_against_one_of(j, &proof, &[&vk, &other_vk]);
                    completed += 1;
                }
                JobOutcome::Failed(why) => {
                    assert!(clear.iter().any(|c| why.contains(c)), "{id}: unclear reason: {why}");
                    failed += 1;
                }
                other => panic!("{id}: {other:?}"),
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let changes = vandal.join().unwrap();
    eprintln!("{changes} changes to the file: {completed} jobs completed (verified), {failed} refused or failed with a reason");
    // Serving still, on the restored file.
    let j = job(dir.path(), 2, 999);
    engine.submit(JobRequest::new("after", Priority::Normal, j.clone())).unwrap();
    let JobOutcome::Completed { proof, .. } = outcome(&engine, "after") else { panic!("the engine proves after the changes") };
    assert_valid_proofs(&j, &proof);
    assert_idle(&engine);
}
