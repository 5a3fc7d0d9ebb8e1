//! WindowPoSt and WinningPoSt through their native witness generators, on
//! real 2 KiB inputs: once the circuit is recorded, the native assignment
//! is taken (and passes the R1CS check), equals the gadget path's bit for
//! bit, and its proof (kiln's CPU prover) is accepted by filecoin-proofs'
//! verifier.

#[path = "support/inputs.rs"]
mod inputs;

use inputs::{params_of, payload};
use kiln_filecoin::job_for_payload as job;
use kiln_filecoin::payload::PayloadKind;
use kiln_filecoin::verify;
use kiln_groth16::{finish, prove_start, CpuBackend, Randomness};
use kiln_synth::{AssignmentBuffers, CircuitCache, SynthContext};

fn native_assignment_is_the_gadgets_and_its_proof_verifies(kind: PayloadKind) {
    let p = payload(kind);
    let j = job(&p).unwrap();
    let spec = j.srs();
    let params = params_of(&*j);
    let shape = j.partition_shape(&params, 0);
    let buffers = || AssignmentBuffers::heap_with_capacity(shape.domain(), shape.num_aux);
    let gadget = j.synthesize(0, buffers(), SynthContext::plain()).unwrap();
    let cache = CircuitCache::unbounded();
    j.synthesize(0, buffers(), cache.context(&spec.id, usize::MAX)).unwrap(); // records the R1CS
    let native = j.synthesize(0, buffers(), cache.context(&spec.id, usize::MAX)).unwrap();
    let s = cache.stats();
    assert_eq!((s.compiles, s.native_syntheses, s.native_rejections, s.compiled_syntheses), (1, 1, 0, 0), "{kind:?}: {s:?}");
    assert_eq!(native.shape(), gadget.shape(), "{kind:?}");
    assert!(native.input == gadget.input, "{kind:?}: the public inputs differ");
    if let Some(k) = (0..gadget.num_aux).find(|&k| native.aux()[k] != gadget.aux()[k]) {
        panic!("{kind:?}: aux {k} of {} differs", gadget.num_aux);
    }
    assert!((native.a(), native.b(), native.c()) == (gadget.a(), gadget.b(), gadget.c()), "{kind:?}: a/b/c differ");
    assert_eq!((&native.a_aux_density, &native.b_aux_density), (&gadget.a_aux_density, &gadget.b_aux_density));

    let proved = finish(prove_start(&CpuBackend, &params, native, Randomness::random(&mut rand::thread_rng())).unwrap()).unwrap();
    let bytes = j.finalize(vec![proved]).unwrap();
    verify::verify(&p, &bytes).unwrap();
}

#[test]
fn window_post() {
    native_assignment_is_the_gadgets_and_its_proof_verifies(PayloadKind::WindowPostPartition);
}

#[test]
fn winning_post() {
    native_assignment_is_the_gadgets_and_its_proof_verifies(PayloadKind::WinningPost);
}
