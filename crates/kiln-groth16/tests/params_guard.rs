//! Parameter files changed on disk while they are open: truncated, written
//! in place, replaced by a rename. A proof reading a changed file fails
//! with a reason (never a SIGBUS, never an unverified proof); a replaced
//! file leaves the open one valid. And the `.vk` beside a `.params` must be
//! its verifying key.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bellperson::groth16::{verify_proof, Parameters};
use blstrs::Bls12;
use kiln_groth16::{finish, prove_start, setup, CpuBackend, ParamsError, ParamsFile, ProveError, Randomness, Section};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const CIRCUIT: SyntheticCircuit = SyntheticCircuit { kind: WorkloadKind::FilecoinLike, constraints: 900, inputs: 2, structure_seed: 5, witness_seed: None };

fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// Parameters of `CIRCUIT` from setup `seed`, in the file format.
fn params_bytes(seed: u64) -> (Parameters<Bls12>, Vec<u8>) {
    let p = setup::generate(CIRCUIT, &mut rng(seed)).unwrap();
    let mut bytes = Vec::new();
    p.write(&mut bytes).unwrap();
    (p, bytes)
}

fn write_new(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn prove(params: &Arc<ParamsFile>, w: u64) -> Result<(), ProveError> {
    let c = CIRCUIT.with_witness(w);
    let asg = synthesize(c, AssignmentBuffers::heap())?;
    let proved = finish(prove_start(&CpuBackend, params, asg, Randomness::random(&mut rng(w)))?)?;
    // finish verified it; check again independently.
    assert!(verify_proof(params.prepared_vk(), &proved.proof, &c.public_inputs()).unwrap(), "an unverified proof was returned");
    Ok(())
}

fn is_changed(e: &ProveError) -> bool {
    matches!(e, ProveError::Params(ParamsError::Changed { .. }))
}

/// Waits past the file system's timestamp granularity, so that a write
/// after it gets a new modification time.
fn tick() {
    std::thread::sleep(Duration::from_millis(20));
}

fn setup_dir() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.params");
    let (_, bytes) = params_bytes(1);
    write_new(&path, &bytes);
    (dir, path, bytes)
}

#[test]
fn a_file_truncated_while_open_fails_its_proofs_with_a_reason() {
    let (_dir, path, bytes) = setup_dir();
    let params = Arc::new(ParamsFile::open(&path).unwrap());
    prove(&params, 1).unwrap();
    assert!(params.stale().is_none());
    // A GPU's streamed reads of a section, begun before the cut: `pread`
    // past the new end is an error, where a mapping would have been a SIGBUS.
    let streaming = params.raw(Section::L, 0..params.len(Section::L)).unwrap();
    let mut block = vec![0u8; streaming.len()];
    streaming.read_into(0, &mut block).unwrap();
    for cut in [bytes.len() / 2, 2000, 0] {
        OpenOptions::new().write(true).open(&path).unwrap().set_len(cut as u64).unwrap();
        let err = prove(&params, 2).unwrap_err();
        assert!(is_changed(&err), "cut {cut}: {err}");
        assert!(err.to_string().contains("changed on disk while in use"), "{err}");
        assert!(err.to_string().contains(&format!("to {cut} bytes")), "{err}");
        // Every read path refuses, the GPU's streamed reads included.
        let mut out = Vec::new();
        assert!(matches!(params.g1_points(Section::L, 0..params.len(Section::L), &mut out), Err(ParamsError::Changed { .. })));
        assert!(matches!(params.g2_points(0..1, &mut out_g2()), Err(ParamsError::Changed { .. })));
        assert!(matches!(params.raw(Section::H, 0..params.len(Section::H)), Err(ParamsError::Changed { .. })));
        if cut < bytes.len() / 2 {
            let err = streaming.read_into(0, &mut block).unwrap_err();
            assert!(matches!(err, ParamsError::Changed { .. }), "{err}");
        }
        assert!(params.stale().is_some_and(|w| w.contains("length went from")));
        // Opening it again says what is wrong with the file now.
        let reopened = ParamsFile::open(&path).unwrap_err();
        assert!(matches!(reopened, ParamsError::Truncated { .. }), "{reopened}");
    }
    // Restored in place: still refused (it changed), until opened again.
    std::fs::write(&path, &bytes).unwrap();
    assert!(is_changed(&prove(&params, 3).unwrap_err()));
    prove(&Arc::new(ParamsFile::open(&path).unwrap()), 4).unwrap();
}

fn out_g2() -> Vec<blstrs::G2Affine> {
    Vec::new()
}

#[test]
fn a_file_written_in_place_while_open_fails_its_proofs() {
    let (_dir, path, bytes) = setup_dir();
    let params = Arc::new(ParamsFile::open(&path).unwrap());
    tick();
    // Same length, other bytes: another setup's points over the L section.
    let (_, other) = params_bytes(2);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    let mid = bytes.len() / 2;
    f.write_all_at(&other[mid..mid + 4096], mid as u64).unwrap();
    let err = prove(&params, 1).unwrap_err();
    assert!(is_changed(&err), "{err}");
    assert!(err.to_string().contains("written in place"), "{err}");
    assert!(params.stale().is_some());
}

#[test]
fn a_file_replaced_by_a_rename_leaves_the_open_one_valid() {
    let (_dir, path, _) = setup_dir();
    let params = Arc::new(ParamsFile::open(&path).unwrap());
    let (other, other_bytes) = params_bytes(2);
    write_new(&path, &other_bytes);
    // The open file is intact: proofs against it still verify.
    prove(&params, 1).unwrap();
    assert!(params.stale().is_some_and(|w| w.contains("replaced")), "{:?}", params.stale());
    let reopened = Arc::new(ParamsFile::open(&path).unwrap());
    assert_eq!(reopened.vk(), &other.vk);
    assert_ne!(reopened.vk(), params.vk());
    prove(&reopened, 2).unwrap();
    // Removed: the open file still serves, and is not stale (nothing to open).
    std::fs::remove_file(&path).unwrap();
    prove(&reopened, 3).unwrap();
    assert!(reopened.stale().is_none());
}

#[test]
fn the_vk_file_beside_the_params_must_be_their_verifying_key() {
    let (_dir, path, _) = setup_dir();
    let vk_path = path.with_extension("vk");
    let params = ParamsFile::open(&path).unwrap();
    let mut vk = Vec::new();
    params.vk().write(&mut vk).unwrap();
    std::fs::write(&vk_path, &vk).unwrap();
    ParamsFile::open(&path).expect("the matching .vk is accepted");

    let (other, _) = params_bytes(2);
    let mut other_vk = Vec::new();
    other.vk.write(&mut other_vk).unwrap();
    std::fs::write(&vk_path, &other_vk).unwrap();
    let err = ParamsFile::open(&path).unwrap_err();
    assert!(matches!(err, ParamsError::VkMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("are refused") && msg.contains("c.vk") && msg.contains("alpha_g1") && msg.contains("delta_g2"), "{msg}");

    std::fs::write(&vk_path, b"not a key").unwrap();
    let err = ParamsFile::open(&path).unwrap_err();
    assert!(err.to_string().contains("is not a verifying key"), "{err}");

    let mut longer = vk.clone();
    longer.push(0);
    std::fs::write(&vk_path, &longer).unwrap();
    assert!(ParamsFile::open(&path).unwrap_err().to_string().contains("trailing bytes"));
}

/// Proofs run on one thread while another truncates, rewrites and replaces
/// the file over and over; the prover re-opens stale parameters the way
/// the engine does. No fault; each proof verifies or fails saying the file
/// changed (or, once re-opened, what is wrong with it now).
#[test]
fn proofs_against_a_file_that_keeps_changing_verify_or_fail_never_crash() {
    let (_dir, path, bytes) = setup_dir();
    let (_, other) = params_bytes(2);
    let stop = Arc::new(AtomicBool::new(false));
    let vandal = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let f = OpenOptions::new().write(true).open(&path).unwrap();
                match round % 4 {
                    0 => f.set_len(bytes.len() as u64 / 3).unwrap(),
                    1 => f.write_all_at(&bytes, 0).unwrap(), // restored in place (longer again)
                    2 => f.write_all_at(&other[4096..8192], 4096).unwrap(),
                    _ => write_new(&path, if round % 8 == 3 { &bytes } else { &other }),
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(30 + (round * 37) % 120));
            }
            round
        })
    };
    let (mut ok, mut changed, mut refused) = (0, 0, 0);
    let mut params: Option<Arc<ParamsFile>> = None;
    let started = Instant::now();
    let mut w = 0;
    while started.elapsed() < Duration::from_secs(3) || ok == 0 || changed == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "ok {ok} changed {changed} refused {refused}");
        w += 1;
        if params.as_ref().is_none_or(|p| p.stale().is_some()) {
            match ParamsFile::open(&path) {
                Ok(p) => params = Some(Arc::new(p)),
                Err(e) => {
                    assert!(matches!(e, ParamsError::Truncated { .. } | ParamsError::Changed { .. } | ParamsError::InvalidPoint { .. }), "{e}");
                    refused += 1;
                    params = None;
                    continue;
                }
            }
        }
        match prove(params.as_ref().unwrap(), w) {
            Ok(()) => ok += 1,
            Err(e) if is_changed(&e) => changed += 1,
            // Bytes of another setup read between two checks that saw the
            // same length and time (a write within one timestamp tick).
            Err(e @ (ProveError::NotVerified(_) | ProveError::Params(ParamsError::InvalidPoint { .. }))) => {
                eprintln!("refused: {e}");
                changed += 1
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = vandal.join().unwrap();
    eprintln!("{rounds} changes to the file; {ok} proofs verified, {changed} failed (file changed), {refused} re-opens refused");
}
