//! Test setups for Filecoin circuits (kiln_filecoin::test_setup): with a
//! test-setup directory set and no `.params` file, a 2 KiB PoSt is proved
//! against a test setup by kiln and accepted by filecoin-proofs' own
//! verifier reading the `.vk` kiln wrote; the seed is kept, so the set is
//! the same when made again, and a `.vk` that is not the seed's is refused.
//! (32 GiB runs the same code on the GPU: docs/BENCHMARKS.md.)

use std::sync::{Arc, OnceLock};

use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::post::PostRequest;
use kiln_filecoin::{post, test_setup, vanilla, verify, PoStType};
use kiln_groth16::{finish, prove_start, CpuBackend, Randomness};
use kiln_memory::MemoryBudget;
use kiln_pipeline::JobSource;
use kiln_synth::{AssignmentBuffers, SynthContext};
use rand::SeedableRng;

/// One directory is both filecoin-proofs' parameter cache (read once per
/// process) and the test-setup directory, and holds no `.params` file.
fn setup_dir() -> &'static std::path::Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().unwrap();
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", d.path());
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", d.path().join("parents"));
        test_setup::set_dir(Some(d.path().to_path_buf()));
        d
    })
    .path()
}

fn payloads() -> &'static [Payload] {
    static P: OnceLock<Vec<Payload>> = OnceLock::new();
    P.get_or_init(|| {
        setup_dir();
        let work = tempfile::tempdir().unwrap();
        vanilla::generate(2048, work.path(), &mut rand_chacha::ChaCha8Rng::seed_from_u64(21)).unwrap()
    })
}

/// The tests share one test-setup directory; those that change its files
/// run alone.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn post_job(kind: PayloadKind) -> (Payload, Arc<dyn JobSource>) {
    let p = payloads().iter().find(|p| p.proof_kind == kind).unwrap().clone();
    let typ = if kind == PayloadKind::WinningPost { PoStType::Winning } else { PoStType::Window };
    let req = PostRequest { registered_proof: p.registered_proof, sector_size: 0, miner_id: p.miner_id, randomness: &p.randomness, vanilla_proofs: &p.vanilla_proofs, partition_index: p.partition_index };
    let j = post::job(typ, &req).unwrap();
    (p, j)
}

#[test]
fn post_proofs_against_a_test_setup_pass_filecoin_proofs_verifiers() {
    let _one_at_a_time = serial();
    let budget = MemoryBudget::new(8 << 30);
    for kind in [PayloadKind::WindowPostPartition, PayloadKind::WinningPost] {
        let (p, j) = post_job(kind);
        let spec = j.srs();
        let open = spec.open.as_ref().expect("no .params file and a test-setup directory: a test setup");
        assert!(spec.path.starts_with(setup_dir()), "{}", spec.path.display());
        let params = Arc::new(open(&budget).unwrap());
        assert!(params.is_test_setup());
        assert!(spec.path.exists(), "the .vk is written under filecoin-proofs' name");
        assert_eq!(budget.snapshot().reserved, 0, "the working memory was given back");
        let shape = j.partition_shape(&params, 0);
        let proofs = (0..j.num_partitions())
            .map(|i| {
                let asg = j.synthesize(i, AssignmentBuffers::heap_with_capacity(shape.domain(), shape.num_aux), SynthContext::plain()).unwrap();
                finish(prove_start(&CpuBackend, &params, asg, Randomness::random(&mut rand::thread_rng())).unwrap()).unwrap()
            })
            .collect();
        let bytes = j.finalize(proofs).unwrap();
        verify::verify(&p, &bytes).unwrap_or_else(|e| panic!("{kind:?}: filecoin-proofs refused kiln's proof: {e}"));
        if kind == PayloadKind::WindowPostPartition {
            // Made again from the kept seed: the same keys.
            let again = open(&budget).unwrap();
            assert_eq!(again.vk(), params.vk(), "the seed is kept");
        }
    }
}

#[test]
fn a_verifying_key_that_is_not_the_seeds_is_refused() {
    // It rewrites the shared directory's seed file in place (not atomically,
    // not under the directory's lock): no other test may read it meanwhile.
    let _one_at_a_time = serial();
    let (_, j) = post_job(PayloadKind::WindowPostPartition);
    let spec = j.srs();
    let open = spec.open.as_ref().unwrap();
    let budget = MemoryBudget::new(8 << 30);
    open(&budget).unwrap();
    // A new seed beside the old key: the key is no longer this setup's.
    let seed_file = spec.path.with_extension("kiln-test-setup");
    let text = std::fs::read_to_string(&seed_file).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let other = if json["seed"].as_str().unwrap().starts_with("ab") { "cd" } else { "ab" }.repeat(32);
    json["seed"] = serde_json::Value::String(other);
    std::fs::write(&seed_file, serde_json::to_vec(&json).unwrap()).unwrap();
    let err = open(&budget).unwrap_err();
    std::fs::write(&seed_file, text).unwrap();
    assert!(err.contains("is not the verifying key of the test setup"), "{err}");
}
