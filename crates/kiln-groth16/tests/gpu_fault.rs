//! A real CUDA fault, not an injected one: a kernel that stores through a
//! null pointer leaves GPU 0's context with a sticky error
//! (`CUDA_ERROR_ILLEGAL_ADDRESS`). From then on the GPU backend must fail
//! every proof on that device with [`ProveError::DeviceLost`] - the error a
//! pipeline quarantines the device for - and never answer one.
//!
//! A test binary of its own: the fault ruins the device's context for the
//! rest of the process. Skips without a GPU; on every machine the CUDA
//! error names are classified by unit tests (gpu/srs.rs), and the
//! quarantine that follows a `DeviceLost` runs with injected faults in
//! kiln-pipeline's tests.

use std::sync::Arc;

use cudarc::driver::{LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use kiln_groth16::{finish, prove_start, setup, GpuBackend, ParamsFile, ProveError, Randomness};
use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
use kiln_synth::{synthesize, AssignmentBuffers};
use rand::SeedableRng;

mod common;
use common::gpu_context;

/// One thread that stores to `address` (PTX, compiled by the driver: no
/// CUDA toolkit needed where the test runs).
const FAULT_PTX: &str = r#"
.version 7.0
.target sm_52
.address_size 64
.visible .entry kiln_test_store(.param .u64 address)
{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    ld.param.u64 %rd1, [address];
    mov.u32 %r1, 1;
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

#[test]
fn a_real_illegal_address_makes_every_later_proof_on_the_device_fail_as_device_lost() {
    let Some(ctx) = gpu_context(0, "CUDA error classification is unit-tested in gpu/srs.rs") else { return };
    let gpu = GpuBackend::new(&ctx, 0).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let c = SyntheticCircuit { kind: WorkloadKind::FilecoinLike, constraints: 3000, inputs: 2, structure_seed: 1, witness_seed: Some(2) };
    let params = Arc::new(ParamsFile::from_parameters(&setup::generate(c, &mut rng).unwrap()));
    let prove = |b: &GpuBackend| {
        let asg = synthesize(c, AssignmentBuffers::heap()).unwrap();
        prove_start(b, &params, asg, Randomness::random(&mut rand_chacha::ChaCha8Rng::seed_from_u64(7))).and_then(finish)
    };
    // The device works, and the kernel stores fine through a real address.
    prove(&gpu).expect("a proof before the fault");
    let s = ctx.device().new_stream().unwrap();
    let module = s.context().load_module(Ptx::from_src(FAULT_PTX)).unwrap();
    let store = module.load_function("kiln_test_store").unwrap();
    let cell = s.alloc_zeros::<u32>(1).unwrap();
    let launch = |address: u64| {
        let mut b = s.launch_builder(&store);
        b.arg(&address);
        // SAFETY: one thread storing one u32 at `address`: a real buffer
        // first, then address 0 on purpose (the fault under test).
        unsafe { b.launch(LaunchConfig::for_num_elems(1)) }.map(|_| ())
    };
    let (ptr, _sync) = cudarc::driver::DevicePtr::device_ptr(&cell, &s);
    launch(ptr).unwrap();
    s.synchronize().unwrap();
    assert_eq!(s.clone_dtoh(&cell).unwrap(), vec![1]);
    // The fault.
    let _ = launch(0);
    let err = s.synchronize().expect_err("a store through a null pointer faults");
    assert!(format!("{err:?}").contains("ILLEGAL_ADDRESS"), "the fault: {err:?}");
    // Every later proof on the device fails as a lost device, from the
    // worker made before the fault or from a new one (whose own making may
    // already fail so).
    let lost = |what: &str, e: ProveError| assert!(matches!(e, ProveError::DeviceLost { .. }) && e.is_sticky(), "{what}: {e} should be a lost device");
    match prove(&gpu) {
        Ok(_) => panic!("a proof came back from a device with a sticky fault"),
        Err(e) => lost("the worker from before", e),
    }
    match GpuBackend::new(&ctx, 1) {
        Err(e) => assert!(format!("{e:?}").contains("ILLEGAL_ADDRESS"), "making a new worker: {e:?}"),
        Ok(fresh) => match prove(&fresh) {
            Ok(_) => panic!("a new worker proved on a device with a sticky fault"),
            Err(e) => lost("a new worker", e),
        },
    }
}
