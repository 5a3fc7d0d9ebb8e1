//! Real 2 KiB inputs of every kind (sealed here, on the CPU) become jobs of
//! the right shape; WindowPoSt (the smallest circuit) is proved by kiln's
//! CPU prover straight from the JobSource and accepted by filecoin-proofs'
//! verifier; malformed payloads are refused with messages that say why.
//! The daemon-level round trip of every kind is in tests/e2e (filecoin.rs).
//! Non-interactive PoRep's full path (13 PoRep partitions, twice: tens of
//! minutes on 2 cores) is an ignored test here; its cheap checks are in
//! ni_porep.rs.

#[path = "support/fake_srs.rs"]
mod fake_srs;
#[path = "support/inputs.rs"]
mod inputs;

use inputs::{params_of, payload, payloads};
use kiln_filecoin::job_for_payload as job;
use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::porep::PorepRequest;
use kiln_filecoin::{ni_porep, porep, registered, vanilla, verify};
use kiln_groth16::{finish, prove_start, CpuBackend, Randomness};
use kiln_synth::{AssignmentBuffers, CircuitCache, SynthContext};
use rand::SeedableRng;

fn refused(p: &Payload) -> String {
    match job(p) {
        Ok(_) => panic!("{:?} was accepted", p.proof_kind),
        Err(e) => e,
    }
}

#[test]
fn every_kind_becomes_a_job_of_the_right_shape() {
    let want = [
        (PayloadKind::PorepSealCommit, 1, "porep-c2", "stacked-proof-of-replication-"),
        (PayloadKind::SnapDealsUpdate, 1, "snap-deals", "empty-sector-update-"),
        (PayloadKind::WindowPostPartition, 1, "window-post", "proof-of-spacetime-fallback-"),
        (PayloadKind::WinningPost, 1, "winning-post", "proof-of-spacetime-fallback-"),
    ];
    for (kind, partitions, label, srs) in want {
        let j = job(&payload(kind)).unwrap();
        assert_eq!(j.num_partitions(), partitions, "{kind:?}");
        assert_eq!(j.kind_label(), label);
        let spec = j.srs();
        assert!(spec.id.starts_with(srs), "{kind:?}: {}", spec.id);
        assert!(spec.path.file_name().unwrap().to_str().unwrap().starts_with(&format!("v28-{}", spec.id)));
    }
    let ids: Vec<String> = PayloadKind::ALL.iter().map(|&k| job(&payload(k)).unwrap().srs().id).collect();
    assert_ne!(ids[2], ids[3], "WindowPoSt and WinningPoSt have different circuits");
}

/// PoRep's challenges are synthesized in parallel once the circuit is
/// compiled: that assignment equals the whole circuit's ordinary synthesis
/// bit for bit (the ordinary one is what the e2e test proves and
/// filecoin-proofs' verify_seal accepts). The native witness is switched
/// off here: this is the gadget path it falls back to (tests/native.rs
/// checks the native one).
#[test]
fn porep_challenges_in_parallel_give_the_ordinary_assignment() {
    let j = job(&payload(PayloadKind::PorepSealCommit)).unwrap();
    let want = j.synthesize(0, AssignmentBuffers::heap(), SynthContext::plain()).unwrap();
    let cache = CircuitCache::unbounded();
    for round in 0..3 {
        let got = j.synthesize(0, AssignmentBuffers::heap(), cache.context("porep-2k", usize::MAX).with_native(false)).unwrap();
        assert_eq!(got.shape(), want.shape(), "round {round}");
        assert_eq!(got.input, want.input, "round {round}");
        assert!(got.aux() == want.aux(), "round {round}: aux differs");
        assert!((got.a(), got.b(), got.c()) == (want.a(), want.b(), want.c()), "round {round}: a/b/c differ");
    }
    let s = cache.stats();
    assert_eq!((s.compiles, s.compiled_syntheses, s.segmented_syntheses, s.plain_syntheses, s.structure_changes), (1, 2, 2, 0, 0));
    want.check_satisfied().unwrap();
}

#[test]
fn window_post_is_proved_by_kiln_and_accepted_by_filecoin_proofs() {
    let p = payload(PayloadKind::WindowPostPartition);
    let j = job(&p).unwrap();
    let spec = j.srs();
    let params = params_of(&*j);
    let shape = j.partition_shape(&params, 0);
    let buffers = || AssignmentBuffers::heap_with_capacity(shape.domain(), shape.num_aux);
    // The compiled gadget path (its sectors compiled and synthesized as
    // segments on every core) gives what ordinary synthesis gives. (The
    // native path: native_post.rs.)
    let plain = j.synthesize(0, buffers(), SynthContext::plain()).unwrap();
    let cache = CircuitCache::unbounded();
    let gadget = || cache.context(&spec.id, usize::MAX).with_native(false);
    j.synthesize(0, buffers(), gadget()).unwrap();
    let assignment = j.synthesize(0, buffers(), gadget()).unwrap();
    let stats = cache.stats();
    assert_eq!((stats.compiles, stats.compiled_syntheses, stats.segmented_syntheses, stats.plain_syntheses), (1, 1, 1, 0), "{stats:?}");
    assert_eq!(assignment.shape(), plain.shape());
    assert!(assignment.a() == plain.a() && assignment.b() == plain.b() && assignment.c() == plain.c());
    assert!(assignment.aux() == plain.aux() && assignment.input == plain.input);
    assert_eq!(assignment.b_input_density, plain.b_input_density);
    let mut rng = rand::thread_rng();
    let proved = finish(prove_start(&CpuBackend, &params, assignment, Randomness::random(&mut rng)).unwrap()).unwrap();
    let bytes = j.finalize(vec![proved]).unwrap();
    assert_eq!(bytes.len(), 192, "one partition proof, as filecoin-proofs writes it");
    verify::verify(&p, &bytes).unwrap();
    // filecoin-proofs' own CPU prover, from the same inputs and parameter
    // files: the same encoding and length (the randomizers r, s differ).
    let randomness: [u8; 32] = p.randomness.clone().try_into().unwrap();
    let theirs = filecoin_proofs_api::post::generate_single_window_post_with_vanilla(
        registered::post_proof(p.registered_proof).unwrap(),
        &randomness,
        registered::prover_id(p.miner_id),
        &p.vanilla_proofs,
        0,
    )
    .unwrap();
    assert_eq!(theirs.0.len(), bytes.len());
    verify::verify(&p, &theirs.0).unwrap();
    // Another partition's randomness: filecoin-proofs must say no.
    let mut other = p.clone();
    other.randomness[0] ^= 1;
    assert!(verify::verify(&other, &bytes).is_err());
}

#[test]
fn malformed_payloads_are_refused_with_clear_messages() {
    let porep_p = payload(PayloadKind::PorepSealCommit);
    let mut p = porep_p.clone();
    p.vanilla_proof = br#"{"SectorNum": 1, "Phase1Out": "%%%", "SectorSize": 2048}"#.to_vec();
    assert!(refused(&p).contains("Phase1Out is not base64"));
    let mut p = porep_p.clone();
    p.sector_size = 8 << 20;
    assert!(refused(&p).contains("sector_size 8388608 does not match"), "{}", refused(&p));
    let mut p = porep_p.clone();
    p.registered_proof = 99;
    assert!(refused(&p).contains("unknown registered seal proof 99"));
    let mut p = porep_p.clone();
    p.sector_number = 2;
    assert!(refused(&p).contains("disagrees with vanilla_proof.SectorNum 1"));
    // A C1 output cut short inside its base64 JSON.
    let env: serde_json::Value = serde_json::from_slice(&porep_p.vanilla_proof).unwrap();
    let mut cut = env.clone();
    let s = env["Phase1Out"].as_str().unwrap();
    cut["Phase1Out"] = serde_json::Value::String(s[..s.len() / 2 / 4 * 4].to_string());
    let mut p = porep_p.clone();
    p.vanilla_proof = serde_json::to_vec(&cut).unwrap();
    assert!(refused(&p).contains("is not a filecoin-proofs 19 SealCommitPhase1Output"), "{}", refused(&p));

    let snap_p = payload(PayloadKind::SnapDealsUpdate);
    let mut p = snap_p.clone();
    let half = p.vanilla_proofs[0].len() / 2;
    p.vanilla_proofs[0].truncate(half);
    assert!(refused(&p).contains("vanilla_proofs[0] is not a bincode PartitionProof of a 2KiB sector"), "{}", refused(&p));
    let mut p = snap_p.clone();
    let first = p.vanilla_proofs[0].clone();
    p.vanilla_proofs.push(first);
    assert!(refused(&p).contains("has 1 partitions, got 2 vanilla_proofs"), "{}", refused(&p));
    let mut p = snap_p.clone();
    p.comm_r_new.pop();
    assert!(refused(&p).contains("comm_r_new must be 32 bytes, got 31"));
    let mut p = snap_p.clone();
    p.registered_proof = 7;
    assert!(refused(&p).contains("unknown registered update proof 7"));

    let win = payload(PayloadKind::WinningPost);
    let mut p = win.clone();
    p.registered_proof = 10; // a WindowPoSt proof
    assert!(refused(&p).contains("is a Window PoSt proof, not a Winning one"), "{}", refused(&p));
    let mut p = win.clone();
    p.sector_size = 4096;
    assert!(refused(&p).contains("sector_size 4096 does not match"));
    let mut p = win.clone();
    p.vanilla_proofs[0].truncate(100);
    assert!(refused(&p).contains("vanilla_proofs[0] is not a bincode FallbackPoStSectorProof"));
    let mut p = win.clone();
    p.randomness[0] ^= 1;
    assert!(refused(&p).contains("do not fit this request"), "{}", refused(&p));
    let window = payload(PayloadKind::WindowPostPartition);
    let mut p = window.clone();
    p.vanilla_proofs = vec![p.vanilla_proofs[0].clone(); 3];
    assert!(refused(&p).contains("at most 2 sectors per partition, got 3"), "{}", refused(&p));
}

/// The full NI-PoRep path at 2 KiB: kiln proves the 13 partitions (CPU),
/// its `finalize` aggregates them with filecoin-proofs (fake SnarkPack SRS
/// in the test cache), `verify_seal` accepts the answer, and filecoin-proofs'
/// own `seal_commit_phase2` answers the same request in the same form.
/// Ignored: 26 PoRep partition proofs (kiln's and filecoin-proofs'), about
/// 30 minutes on a 2-core machine (kiln 14, filecoin-proofs 17, the
/// aggregation and its check 0.5 s); run it with
/// `cargo test -p kiln-filecoin --test kinds -- --ignored ni_porep`.
#[test]
#[ignore]
fn ni_porep_is_proved_by_kiln_and_accepted_by_verify_seal() {
    payloads(); // the parameter cache first
    let work = tempfile::tempdir().unwrap();
    let p = vanilla::generate_ni_porep(2048, work.path(), &mut rand_chacha::ChaCha8Rng::seed_from_u64(13)).unwrap();
    fake_srs::ensure_fake_srs(&ni_porep::srs_path());
    let j = job(&p).unwrap();
    assert_eq!((j.num_partitions(), j.kind_label()), (13, "ni-porep-c2"));
    let params = params_of(&*j);
    let mut rng = rand::thread_rng();
    let started = std::time::Instant::now();
    let proofs: Vec<_> = (0..j.num_partitions())
        .map(|i| {
            let shape = j.partition_shape(&params, i);
            let buffers = AssignmentBuffers::heap_with_capacity(shape.domain(), shape.num_aux);
            let assignment = j.synthesize(i, buffers, SynthContext::plain()).unwrap();
            finish(prove_start(&CpuBackend, &params, assignment, Randomness::random(&mut rng)).unwrap()).unwrap()
        })
        .collect();
    eprintln!("kiln proved the 13 NI-PoRep partitions in {:?}", started.elapsed());
    let t = std::time::Instant::now();
    let ours = j.finalize(proofs).unwrap();
    eprintln!("aggregated ({} bytes) and verified in {:?}", ours.len(), t.elapsed());
    verify::verify(&p, &ours).unwrap();
    let mut bad = ours.clone();
    let last = bad.len() - 1;
    bad[last / 2] ^= 1;
    assert!(verify::verify(&p, &bad).is_err(), "a changed aggregate is rejected");

    // filecoin-proofs' own CPU prover on the same C1 output.
    let (c1, sector) = porep::decode_envelope(&p.vanilla_proof, &PorepRequest::default()).unwrap();
    let t = std::time::Instant::now();
    let theirs = filecoin_proofs_api::seal::seal_commit_phase2(c1, registered::prover_id(p.miner_id), sector.into()).unwrap().proof;
    eprintln!("filecoin-proofs' seal_commit_phase2: {:?}", t.elapsed());
    assert_eq!(ours.len(), theirs.len(), "the same form as filecoin-proofs' answer");
    let read = |b: &[u8]| bellperson::groth16::aggregate::AggregateProof::<blstrs::Bls12>::read(std::io::Cursor::new(b)).unwrap();
    let (a, b) = (read(&ours), read(&theirs));
    assert_eq!((a.tmipp.gipa.nproofs, b.tmipp.gipa.nproofs), (16, 16), "13 partitions padded to 16");
    let mut rewritten = Vec::new();
    a.write(&mut rewritten).unwrap();
    assert_eq!(rewritten, ours, "kiln's bytes are the aggregate's own encoding");
    verify::verify(&p, &theirs).unwrap();
}
