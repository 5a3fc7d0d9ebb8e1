//! The GPU backend against the CPU backend: same r, s => the same proof,
//! bit for bit, and every GPU proof verifies. Skips (and says so) without a
//! GPU; the CPU tests in prove.rs cover the shared logic (shape checks,
//! assembly, verification) on every machine.

use std::sync::Arc;

use kiln_groth16::gpu::host_r1cs;
use kiln_groth16::{finish, prove_start, setup, CpuBackend, GpuBackend, ParamsFile, ProductsSupport, ProveError, ProverBackend, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers, CircuitCache, SynthError};
use rand::SeedableRng;

mod common;
use common::{break_one, deferred, gpu_context};

#[test]
fn gpu_proofs_equal_cpu_proofs_and_verify() {
    let Some(ctx) = gpu_context(0, "the CPU prover tests cover the shared logic") else { return };
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
        for (constraints, inputs) in [(1, 0), (5, 3), (1000, 2), (4093, 8)] {
            let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 3, witness_seed: Some(4) };
            let params = Arc::new(ParamsFile::from_parameters(&setup::generate(c, &mut rng).unwrap()));
            let rs = Randomness::random(&mut rng);
            let run = |b: &dyn ProverBackend| {
                let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
                finish(prove_start(b, &params, asg, rs).unwrap()).unwrap().proof
            };
            assert_eq!(run(&gpu), run(&CpuBackend), "{kind:?} {constraints}");
        }
    }
}

/// Two device contexts (two GPUs when there are two, else two contexts on
/// GPU 0, each with its own resident parameters and streams), two workers
/// each, proving different circuits at once from several threads: every
/// proof must equal the CPU proof of its own circuit. A worker that read
/// another context's or another proof's device state would produce a proof
/// of the wrong circuit (the field bug: per-worker state shared between
/// GPUs). Skips without a GPU; the engine-level isolation runs on the CPU.
#[test]
fn two_device_contexts_never_mix_proofs() {
    let Some(c0) = gpu_context(0, "the CPU prover tests cover the shared logic") else { return };
    let second = usize::from(kiln_gpu::GpuDevice::count() > 1);
    let Some(c1) = gpu_context(second, "the CPU prover tests cover the shared logic") else { return };
    let workers: Vec<GpuBackend> = [&c0, &c0, &c1, &c1].iter().enumerate().map(|(i, c)| GpuBackend::new(c, i % 2).unwrap()).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    // Four circuits of one shape (same parameter sizes, different structure),
    // so a mix-up cannot be caught by a shape check, only by the proof.
    let circuits: Vec<_> = (0..4u64)
        .map(|i| {
            let kind = if i % 2 == 0 { WorkloadKind::Dense } else { WorkloadKind::FilecoinLike };
            let c = SyntheticCircuit { kind, constraints: 3000, inputs: 3, structure_seed: 20 + i, witness_seed: Some(30 + i) };
            (c, Arc::new(ParamsFile::from_parameters(&setup::generate(c, &mut rng).unwrap())))
        })
        .collect();
    let jobs: Vec<(usize, usize, Randomness)> =
        (0..16).map(|j| (j % 4, (j / 4 + j) % 4, Randomness::random(&mut rng))).collect();
    std::thread::scope(|s| {
        for chunk in jobs.chunks(4) {
            let (workers, circuits) = (&workers, &circuits);
            s.spawn(move || {
                for &(w, ci, rs) in chunk {
                    let (c, params) = &circuits[ci];
                    let run = |b: &dyn ProverBackend| {
                        let asg = synthesize(*c, AssignmentBuffers::heap()).unwrap();
                        finish(prove_start(b, params, asg, rs).unwrap()).unwrap().proof
                    };
                    assert_eq!(run(&workers[w]), run(&CpuBackend), "worker {w}, circuit {ci}");
                }
            });
        }
    });
    assert_eq!((c0.resident().len(), c1.resident().len()), (4, 4), "each context holds its own copy of the four parameter sets");
}

/// Parameters that do not fit in the VRAM allowed for them: with no VRAM
/// for parameters every section is streamed from the host mapping (small
/// chunks, so each MSM takes several); with a cap between the section sizes
/// some stay resident and the rest stream. Every proof must equal the CPU
/// proof for the same r, s, and the context must report the streamed bytes.
/// Skips without a GPU; the chunk planning is unit-tested in kiln-gpu.
#[test]
fn streamed_parameters_give_the_same_proofs() {
    let Some(ctx) = gpu_context(0, "kiln-gpu's stream tests cover the chunk planning") else { return };
    ctx.set_stream_chunk_bytes(1 << 16);
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
    for (kind, constraints, inputs, cap) in [
        (WorkloadKind::Dense, 3000, 2, Some(0)),
        (WorkloadKind::FilecoinLike, 5000, 5, Some(0)),
        // About what H and L take: the B sections must stream.
        (WorkloadKind::FilecoinLike, 20_000, 3, Some(2 * 96 * 32_768 + 4 * (1 << 16))),
        (WorkloadKind::Dense, 20_000, 3, None),
    ] {
        ctx.set_srs_vram_limit(cap);
        let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 5, witness_seed: Some(6) };
        let params = Arc::new(ParamsFile::from_parameters(&setup::generate(c, &mut rng).unwrap()));
        let rs = Randomness::random(&mut rng);
        let run = |b: &dyn ProverBackend| {
            let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
            finish(prove_start(b, &params, asg, rs).unwrap()).unwrap().proof
        };
        assert_eq!(run(&gpu), run(&CpuBackend), "{kind:?} {constraints}, cap {cap:?}");
        let placed = ctx.resident().into_iter().find(|r| r.params_id == params.id()).unwrap();
        match cap {
            Some(0) => assert_eq!(placed.device_bytes, 0, "nothing resident with no VRAM for parameters"),
            Some(_) => assert!(placed.device_bytes > 0 && placed.streamed_bytes > 0, "{placed:?}"),
            None => assert_eq!(placed.streamed_bytes, 0, "everything fits"),
        }
        if cap.is_some() {
            assert!(placed.streamed_bytes > 0);
        }
    }
}

/// A test setup's points made on the device (fixed-base kernel) give the
/// same proofs as the CPU, which makes the same points from the same
/// scalars with blstrs: fully resident, and with too little VRAM for them
/// (no room at all, or room for H and L only), when the rest are read back
/// once and streamed from host memory for each proof.
#[test]
fn test_setup_points_made_on_the_device_give_the_cpus_proofs() {
    let Some(ctx) = gpu_context(0, "tests/test_setup.rs covers test setups on the CPU") else { return };
    ctx.set_stream_chunk_bytes(1 << 16);
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    for (kind, constraints, inputs, cap) in [
        (WorkloadKind::Dense, 1, 0, None),
        (WorkloadKind::FilecoinLike, 5, 3, None),
        (WorkloadKind::Dense, 3001, 2, None),
        (WorkloadKind::FilecoinLike, 70_000, 4, None),
        (WorkloadKind::Dense, 3001, 2, Some(0)),
        (WorkloadKind::FilecoinLike, 5, 3, Some(0)),
        // About what H and L take: the A and B sections are kept on the host.
        (WorkloadKind::FilecoinLike, 70_000, 4, Some(2 * 96 * 131_072 + 4 * (1 << 16))),
    ] {
        ctx.set_srs_vram_limit(cap);
        let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 8, witness_seed: Some(9) };
        let params = Arc::new(setup::test_setup(c, [constraints as u8; 32], &mut |_| Ok(())).unwrap());
        let rs = Randomness::random(&mut rng);
        let run = |b: &dyn ProverBackend| {
            let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
            finish(prove_start(b, &params, asg, rs).unwrap()).unwrap().proof
        };
        assert_eq!(run(&gpu), run(&CpuBackend), "{kind:?} {constraints}, cap {cap:?}");
        let placed = ctx.resident().into_iter().find(|r| r.params_id == params.id()).unwrap();
        match cap {
            None => assert!(placed.device_bytes > 0 && placed.streamed_bytes == 0, "{placed:?}"),
            Some(0) => assert!(placed.device_bytes == 0 && placed.streamed_bytes > 0, "{placed:?}"),
            Some(_) => assert!(placed.device_bytes > 0 && placed.streamed_bytes > 0, "{placed:?}"),
        }
    }
    ctx.set_srs_vram_limit(None);
}

/// Two workers of one device start their first proofs against a test
/// setup at once, with VRAM for about H and L only: the setup is placed
/// once (the second worker waits for it, it does not make its own copy),
/// keeps on the host exactly what `placement_host_bytes` said beforehand
/// (what a pipeline reserves), and both workers then stream those points
/// at the same time, every proof equal to the CPU's. (The 32 GiB PoRep run
/// on an H100 had a second worker that never answered.)
#[test]
fn two_workers_place_a_test_setup_once_and_both_stream_it() {
    let Some(ctx) = gpu_context(0, "tests/test_setup.rs covers test setups on the CPU") else { return };
    ctx.set_stream_chunk_bytes(1 << 16);
    ctx.set_srs_vram_limit(Some(2 * 96 * 131_072 + 4 * (1 << 16)));
    let workers = [GpuBackend::new(&ctx, 0).unwrap(), GpuBackend::new(&ctx, 1).unwrap()];
    let c = SyntheticCircuit { kind: WorkloadKind::FilecoinLike, constraints: 70_000, inputs: 4, structure_seed: 12, witness_seed: Some(13) };
    let params = Arc::new(setup::test_setup(c, [77; 32], &mut |_| Ok(())).unwrap());
    let said = workers[0].placement_host_bytes(&params);
    assert!(said > 0, "A and B do not fit under the cap");
    assert_eq!(workers[1].placement_host_bytes(&params), said, "workers of one device agree");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    let rs: Vec<Randomness> = (0..6).map(|_| Randomness::random(&mut rng)).collect();
    let barrier = std::sync::Barrier::new(2);
    let proofs: Vec<Vec<_>> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(w, gpu)| {
                let (params, rs, barrier) = (&params, &rs, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    (0..3)
                        .map(|k| {
                            let r = rs[w * 3 + k];
                            let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
                            (r, finish(prove_start(gpu, params, asg, r).unwrap()).unwrap().proof)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (r, proof) in proofs.into_iter().flatten() {
        let cpu = finish(prove_start(&CpuBackend, &params, synthesize(c, AssignmentBuffers::heap()).unwrap(), r).unwrap()).unwrap().proof;
        assert_eq!(proof, cpu);
    }
    let placed: Vec<_> = ctx.resident().into_iter().filter(|r| r.params_id == params.id()).collect();
    assert_eq!(placed.len(), 1);
    // Said before the B input count was known: at most those few points over.
    let over = said - placed[0].streamed_bytes.min(said);
    assert!(placed[0].streamed_bytes <= said && over <= 5 * (96 + 192), "kept {} on the host, said {said}", placed[0].streamed_bytes);
    assert_eq!(workers[0].placement_host_bytes(&params), 0, "placed: nothing more to reserve");
    ctx.evict(params.id());
    ctx.set_srs_vram_limit(None);
}

/// Products left to the prover, on the GPU: with the circuit's matrices
/// resident (a/b/c evaluated and checked on the device) and with no VRAM
/// allowed for them (evaluated and checked on the host, then uploaded),
/// every proof equals the CPU's proof of the host path for the same r, s;
/// a witness that breaks a row is refused naming the CPU's first bad row;
/// the matrices count in the context's residency and leave with eviction.
#[test]
fn deferred_products_on_the_gpu_give_the_cpus_proofs() {
    let Some(ctx) = gpu_context(0, "tests/deferred.rs covers deferred products on the CPU") else { return };
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
    let cache = CircuitCache::unbounded();
    for cap in [None, Some(0)] {
        ctx.set_matrix_vram_limit(cap);
        for kind in [WorkloadKind::Dense, WorkloadKind::FilecoinLike] {
            // (A 1-row circuit has no H query, which the GPU backend refuses.)
            for (constraints, inputs) in [(1, 0), (5, 3), (1000, 2), (4093, 8), (70_001, 4)] {
                let key = format!("{kind:?}-{constraints}");
                let c = SyntheticCircuit { kind, constraints, inputs, structure_seed: 3, witness_seed: Some(4) };
                let params = Arc::new(ParamsFile::from_parameters(&setup::generate(c, &mut rng).unwrap()));
                let rs = Randomness::random(&mut rng);
                let want = finish(prove_start(&CpuBackend, &params, synthesize(c, AssignmentBuffers::heap()).unwrap(), rs).unwrap()).unwrap().proof;
                let (asg, r1cs) = deferred(&cache, &key, c);
                let expect = if cap == Some(0) { ProductsSupport::NoRoom } else { ProductsSupport::Yes };
                assert_eq!(gpu.device_products(&params, &r1cs), expect, "{key} cap {cap:?}");
                let proved = finish(prove_start(&gpu, &params, asg, rs).unwrap()).unwrap();
                assert_eq!(proved.proof, want, "{key} cap {cap:?}");
                let phases: Vec<&str> = proved.timings.phases.iter().map(|(n, _)| *n).collect();
                assert!(phases.contains(if cap == Some(0) { &"abc_host" } else { &"abc" }), "{key} cap {cap:?}: {phases:?}");
                assert_eq!(gpu.device_products(&params, &r1cs), expect, "{key} cap {cap:?}, after a proof");
                let (mut bad, r1cs) = deferred(&cache, &key, c);
                if let Some(row) = break_one(&mut bad, &r1cs) {
                    match prove_start(&gpu, &params, bad, rs) {
                        Err(ProveError::Synth(SynthError::Unsatisfied { index, .. })) => assert_eq!(index, row, "{key} cap {cap:?}"),
                        Err(e) => panic!("{key} cap {cap:?}: {e}"),
                        Ok(_) => panic!("{key} cap {cap:?}: a broken witness was proved"),
                    }
                }
                let placed = ctx.resident().into_iter().find(|r| r.params_id == params.id()).unwrap();
                let matrices = host_r1cs(&r1cs).device_bytes();
                if cap.is_none() {
                    assert!(placed.device_bytes > matrices, "{key}: {placed:?} holds the {matrices} bytes of matrices");
                }
                assert_eq!(ctx.evict(params.id()), Some(placed.device_bytes));
                assert!(ctx.resident().iter().all(|r| r.params_id != params.id()));
            }
        }
    }
}

/// Streamed sections come from the parameter file through `pread`: proofs
/// equal the CPU's, and a file cut short while open fails its proof with
/// the file's reason (not a device fault, never a SIGBUS). A source that
/// fails in the middle of a streamed MSM ends that MSM with an error and
/// leaves the device and the streamer usable.
#[test]
fn streamed_sections_are_read_from_the_file_and_a_failed_read_is_an_error() {
    use kiln_groth16::{ParamsError, Section};
    let Some(ctx) = gpu_context(0, "params_guard.rs covers pread on a cut file on the CPU") else { return };
    ctx.set_stream_chunk_bytes(1 << 16);
    ctx.set_srs_vram_limit(Some(0));
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(21);
    let c = SyntheticCircuit { kind: WorkloadKind::FilecoinLike, constraints: 6000, inputs: 3, structure_seed: 9, witness_seed: Some(4) };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streamed.params");
    let mut bytes = Vec::new();
    setup::generate(c, &mut rng).unwrap().write(&mut bytes).unwrap();
    std::fs::write(&path, &bytes).unwrap();
    let params = Arc::new(ParamsFile::open(&path).unwrap());
    let rs = Randomness::random(&mut rng);
    let run = |b: &dyn ProverBackend| -> Result<_, ProveError> {
        let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
        Ok(finish(prove_start(b, &params, asg, rs)?)?.proof)
    };
    assert_eq!(run(&gpu).unwrap(), run(&CpuBackend).unwrap());
    let placed = ctx.resident().into_iter().find(|r| r.params_id == params.id()).unwrap();
    assert!(placed.device_bytes == 0 && placed.streamed_bytes > 0, "{placed:?}");

    // A source failing at its third block, then the same points whole.
    struct FailsAt(Vec<u8>, usize);
    impl kiln_gpu::RawSource for FailsAt {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn read_into(&self, offset: usize, dst: &mut [u8]) -> Result<(), String> {
            if offset + dst.len() > self.1 {
                return Err(format!("injected read error at byte {offset}"));
            }
            dst.copy_from_slice(&self.0[offset..offset + dst.len()]);
            Ok(())
        }
    }
    let dev = ctx.device();
    let s = dev.new_stream().unwrap();
    let n = params.len(Section::L);
    let raw = params.raw(Section::L, 0..n).unwrap();
    let mut all = vec![0u8; raw.len()];
    raw.read_into(0, &mut all).unwrap();
    let scalars: Vec<blstrs::Scalar> = (0..n).map(|i| blstrs::Scalar::from(i as u64 * 7 + 1)).collect();
    let sc = dev.upload_scalars(&s, &scalars).unwrap();
    let mut st = dev.point_streamer(1 << 16).unwrap();
    let failing = FailsAt(all.clone(), 3 << 16);
    let err = dev.msm_streamed::<blstrs::G1Projective>(&s, &mut st, &failing, &sc, n, None).unwrap_err().to_string();
    assert!(err.contains("injected read error"), "{err}");
    let (sum, _) = dev.msm_streamed::<blstrs::G1Projective>(&s, &mut st, &all, &sc, n, None).unwrap();
    let mut points = Vec::new();
    params.g1_points(Section::L, 0..n, &mut points).unwrap();
    let want: blstrs::G1Projective = points.iter().zip(&scalars).map(|(p, k)| blstrs::G1Projective::from(*p) * k).sum();
    assert_eq!(sum, want, "the device and the streamer work after a failed read");

    // Cut while open: the proof fails with the file's reason.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(2000).unwrap();
    let err = run(&gpu).unwrap_err();
    assert!(matches!(err, ProveError::Params(ParamsError::Changed { .. })), "{err}");
}

/// One proof's device memory stays within what the gate admits it for and
/// placement leaves free (`GpuContext::proof_working_bytes`), and the
/// estimate is not far above it: the device pool's high-water mark during a
/// proof that runs alone (its parameters placed and its NTT tables made by
/// an earlier proof), less what was allocated before it, is at most the
/// estimate and more than half of it (beyond the allocator's slack). Sizes
/// from tiny to 2^20, where the MSMs' scratch sets the peak.
#[test]
fn a_proofs_device_memory_stays_within_its_working_bytes() {
    let Some(ctx) = gpu_context(0, "the estimate is made of kiln-gpu's own sizes, which the kernels' checks exercise") else { return };
    // Small streaming chunks: the estimate's allowance for them is not what is measured here.
    ctx.set_stream_chunk_bytes(1 << 16);
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
    for constraints in [3001, 70_000, (1 << 20) - 100] {
        let c = SyntheticCircuit { kind: WorkloadKind::FilecoinLike, constraints, inputs: 4, structure_seed: 5, witness_seed: Some(6) };
        let params = Arc::new(setup::test_setup(c, [3; 32], &mut |_| Ok(())).unwrap());
        let mut prove = || {
            let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
            finish(prove_start(&gpu, &params, asg, Randomness::random(&mut rng)).unwrap()).unwrap()
        };
        prove();
        let dev = ctx.device();
        let (before, _) = dev.allocated_bytes().unwrap();
        dev.reset_allocation_peak().unwrap();
        prove();
        let (_, high) = dev.allocated_bytes().unwrap();
        let peak = high.saturating_sub(before);
        let estimate = ctx.proof_working_bytes(&params.shape());
        eprintln!("{constraints} constraints: device memory peak {peak} B, estimate {estimate} B");
        assert!(peak > 0, "{constraints} constraints: the pool says {before} B before the proof and {high} B at most during it");
        assert!(peak <= estimate, "{constraints} constraints: a proof took {peak} B of device memory, {estimate} B were allowed for it");
        assert!(estimate < 2 * peak + (80 << 20), "{constraints} constraints: the estimate {estimate} B is far above the {peak} B a proof took");
    }
}
