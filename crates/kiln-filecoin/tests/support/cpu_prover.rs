//! Every partition of a Filecoin job proved by kiln's CPU prover, in
//! partition order (ordinary synthesis), with the job's parameters, which
//! are generated on first use for test sector sizes.

use std::sync::Arc;
use std::time::Instant;

use kiln_groth16::{finish, prove_start, CpuBackend, ParamsFile, ProvedProof, Randomness};
use kiln_pipeline::JobSource;
use kiln_synth::{AssignmentBuffers, SynthContext};

pub fn prove_partitions(j: &dyn JobSource) -> Vec<ProvedProof> {
    let spec = j.srs();
    if !spec.path.exists() {
        let t = Instant::now();
        (spec.generate.as_ref().expect("test-size parameters can be generated"))(&spec.path).unwrap();
        eprintln!("  generated the {} parameters in {:.1?}", j.kind_label(), t.elapsed());
    }
    let params = Arc::new(ParamsFile::open(&spec.path).unwrap());
    let mut rng = rand::thread_rng();
    let started = Instant::now();
    let proofs = (0..j.num_partitions())
        .map(|i| {
            let shape = j.partition_shape(&params, i);
            let buffers = AssignmentBuffers::heap_with_capacity(shape.domain(), shape.num_aux);
            let assignment = j.synthesize(i, buffers, SynthContext::plain()).unwrap();
            finish(prove_start(&CpuBackend, &params, assignment, Randomness::random(&mut rng)).unwrap()).unwrap()
        })
        .collect();
    eprintln!("  kiln proved the {} partition(s) of {} in {:.1?}", j.num_partitions(), j.kind_label(), started.elapsed());
    proofs
}
