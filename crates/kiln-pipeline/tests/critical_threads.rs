//! A critical partition's host work stays on the critical lane's threads:
//! the engine's own check of its proof (bellperson's verifier spawns rayon
//! tasks) does not queue in rayon's global pool, where bulk work runs (a
//! GPU worker's bulk start checks a*b = c there). Its own binary: the test
//! holds the global pool, which other tests would share.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kiln_pipeline::{Engine, JobOutcome, JobRequest, Priority};

#[test]
fn a_critical_jobs_proof_check_does_not_wait_for_rayons_global_pool() {
    ensure_params(10);
    let engine = Engine::start(config(1 << 30), vec![]).unwrap();
    prove_critical(&engine, "warm-up", &synthetic(10, 1, 3));
    let (unloaded, _) = prove_critical(&engine, "unloaded", &synthetic(10, 1, 4));
    // Every thread of the global pool busy for three seconds.
    let hold = Duration::from_secs(3);
    let busy = Instant::now();
    for _ in 0..rayon::current_num_threads() {
        rayon::spawn(move || std::thread::sleep(hold));
    }
    std::thread::sleep(Duration::from_millis(50));
    let job = synthetic(10, 1, 5);
    let t = Instant::now();
    engine.submit(JobRequest::new("global-pool-busy", Priority::Critical, job.clone())).unwrap();
    let outcome = engine.wait_blocking("global-pool-busy", Some(Duration::from_secs(60)));
    let (took, answered_after) = (t.elapsed(), busy.elapsed());
    // On an H100 under a 32 GiB PoRep load one WinningPoSt's check took 923 ms this way.
    assert!(took < unloaded * 3 + Duration::from_millis(500), "with rayon's global pool busy a critical job took {took:?}, unloaded {unloaded:?}");
    assert!(answered_after < hold, "the job outlasted the held pool ({answered_after:?}), so this shows nothing");
    // Checked here, by the test's own verifier (which waits for the pool).
    let JobOutcome::Completed { proof, .. } = outcome else { panic!("{outcome:?}") };
    assert_valid_proofs(&job, &proof);
    assert_idle(&engine);
}
