//! The native witnesses of PoRep and SnapDeals on real 2 KiB inputs (a
//! sector sealed here): once the circuit is recorded, the job's synthesis
//! takes the native generator, the recorded R1CS accepts it, and its
//! assignment equals the gadget path's bit for bit (inputs, aux, a/b/c).
//! Proofs made from native witnesses pass filecoin-proofs' verifiers
//! (ignored tests: minutes of parameter generation and CPU proving).

#[path = "support/inputs.rs"]
mod inputs;

use inputs::{params_of, payload};
use kiln_filecoin::job_for_payload as job;
use kiln_filecoin::payload::{Payload, PayloadKind};
use kiln_filecoin::verify;
use kiln_groth16::{finish, prove_start, CpuBackend, Randomness};
use kiln_pipeline::JobSource;
use kiln_synth::{Assignment, AssignmentBuffers, CircuitCache, SynthContext};

/// Partition 0 the ordinary way, then through a cache: the recording
/// (gadget path), then the native generator. Returns (ordinary, native).
fn gadget_and_native(j: &dyn JobSource, key: &str) -> (Assignment, Assignment) {
    let want = j.synthesize(0, AssignmentBuffers::heap(), SynthContext::plain()).unwrap();
    let cache = CircuitCache::unbounded();
    j.synthesize(0, AssignmentBuffers::heap(), cache.context(key, usize::MAX)).unwrap();
    let got = j.synthesize(0, AssignmentBuffers::heap(), cache.context(key, usize::MAX)).unwrap();
    let s = cache.stats();
    assert_eq!((s.compiles, s.native_syntheses, s.native_rejections), (1, 1, 0), "the native witness was not taken: {s:?}");
    (want, got)
}

fn assert_same(kind: &str, want: &Assignment, got: &Assignment) {
    assert_eq!(got.shape(), want.shape(), "{kind}");
    assert_eq!(got.input, want.input, "{kind}: public inputs");
    if let Some(i) = got.aux().iter().zip(want.aux()).position(|(g, w)| g != w) {
        panic!("{kind}: aux {i} of {} differs: native {:?}, gadget {:?}", want.num_aux, got.aux()[i], want.aux()[i]);
    }
    assert!((got.a(), got.b(), got.c()) == (want.a(), want.b(), want.c()), "{kind}: a/b/c differ");
    got.check_satisfied().unwrap();
}

#[test]
fn porep_native_witness_is_the_gadget_witness() {
    let (want, got) = gadget_and_native(&*job(&payload(PayloadKind::PorepSealCommit)).unwrap(), "porep-2k");
    assert_same("PoRep", &want, &got);
}

#[test]
fn snap_native_witness_is_the_gadget_witness() {
    let (want, got) = gadget_and_native(&*job(&payload(PayloadKind::SnapDealsUpdate)).unwrap(), "snap-2k");
    assert_same("SnapDeals", &want, &got);
}

/// Proves a partition of `j` with kiln's CPU prover from its native
/// witness (the recording first, then the native synthesis that is
/// proved) and checks the answer with filecoin-proofs' verifier.
fn prove_natively_and_verify(j: &dyn JobSource, p: &Payload) {
    let spec = j.srs();
    let params = params_of(j);
    let cache = CircuitCache::unbounded();
    let mut proofs = Vec::new();
    for i in 0..j.num_partitions() {
        let shape = j.partition_shape(&params, i);
        let buffers = || AssignmentBuffers::heap_with_capacity(shape.domain(), shape.num_aux);
        if i == 0 {
            j.synthesize(0, buffers(), cache.context(&spec.id, usize::MAX)).unwrap();
        }
        let assignment = j.synthesize(i, buffers(), cache.context(&spec.id, usize::MAX)).unwrap();
        let proved = finish(prove_start(&CpuBackend, &params, assignment, Randomness::random(&mut rand::thread_rng())).unwrap()).unwrap();
        proofs.push(proved);
    }
    let s = cache.stats();
    assert_eq!((s.native_syntheses, s.native_rejections), (j.num_partitions() as u64, 0), "{s:?}");
    let bytes = j.finalize(proofs).unwrap();
    verify::verify(p, &bytes).unwrap();
}

/// Minutes on 2 cores (the 2 KiB PoRep parameters, when not cached, and a
/// CPU proof of 2.7M constraints): run with `--ignored`.
#[test]
#[ignore]
fn porep_proved_from_the_native_witness_passes_verify_seal() {
    let p = payload(PayloadKind::PorepSealCommit);
    prove_natively_and_verify(&*job(&p).unwrap(), &p);
}

/// Minutes on 2 cores, as above (SnapDeals' 1.7M constraints).
#[test]
#[ignore]
fn snap_proved_from_the_native_witness_passes_verification() {
    let p = payload(PayloadKind::SnapDealsUpdate);
    prove_natively_and_verify(&*job(&p).unwrap(), &p);
}

/// A 32 GiB PoRep partition cut to one challenge (~7.2 M constraints: the
/// production tree shapes, 11 layers, 30-level paths to tree_c, tree_r's
/// 8-8 sub-trees): the native witness is the gadget witness bit for bit.
/// Inputs from a sparse 32 GiB CC sector (seconds).
#[test]
fn porep_32gib_native_witness_is_the_gadget_witness() {
    use rand::SeedableRng;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(32);
    let all = kiln_filecoin::sparse::generate(32 << 30, &mut rng).unwrap();
    let full = all.into_iter().find(|p| p.proof_kind == PayloadKind::PorepSealCommit).unwrap();
    let cut = kiln_filecoin::porep::cut_to_challenges(&full, 1).unwrap();
    let j = job(&cut).unwrap();
    let (want, got) = gadget_and_native(&*j, "porep-32g-1");
    assert_same("PoRep 32 GiB, one challenge", &want, &got);
    assert!(want.shape().num_constraints > 7_000_000, "{:?}", want.shape());
}
