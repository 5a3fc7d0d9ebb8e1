//! Prover faults injected by `kiln_groth16::FaultyBackend` (the CPU
//! stand-in for a sick GPU): errors and wrong results are retried and never
//! answered, a hang is cut short by the watchdog and quarantines its
//! device, a sticky fault quarantines its device while the others prove
//! every job, and with no device left the engine fails its jobs saying so.
//! After each: the engine holds nothing, and every answer verifies.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use kiln_groth16::{CpuBackend, FaultPlan, FaultyBackend, ProverBackend};
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, Priority, SubmitError};

const MIB: u64 = 1 << 20;

/// A small engine with a short watchdog (0.5 s: far above a 2^10 proof's
/// wait, which is its verification, on a busy 2-core machine).
fn fault_config() -> EngineConfig {
    EngineConfig { prover_watchdog_secs: 0.5, prover_watchdog_factor: 1.0, ..config(256 * MIB) }
}

/// `plan` injected into a slowed CPU backend presented as device `name`.
fn faulty(name: &str, plan: FaultPlan) -> Arc<FaultyBackend> {
    Arc::new(FaultyBackend::new(OnDevice::named(name, SlowBackend::new(Duration::from_millis(2))), plan))
}

/// A device (watched like a GPU) whose every `start` hangs until released.
fn hung_starts(name: &str) -> Arc<FaultyBackend> {
    let inner = Arc::new(AsAccelerator(clean(name)));
    Arc::new(FaultyBackend::new(inner, FaultPlan::default().start_hang(1.0)))
}

fn clean(name: &str) -> Arc<dyn ProverBackend> {
    OnDevice::named(name, SlowBackend::new(Duration::from_millis(2)))
}

/// Submits `count` jobs of `partitions` partitions; returns their ids and sources.
fn submit_all(engine: &Engine, prefix: &str, count: usize, partitions: usize) -> Vec<(String, Arc<kiln_pipeline::synthetic::SyntheticJob>)> {
    (0..count)
        .map(|k| {
            let job = synthetic(10, partitions, 100 * k as u64 + partitions as u64);
            let id = format!("{prefix}-{k}");
            engine.submit(JobRequest::new(id.clone(), Priority::Normal, job.clone())).unwrap();
            (id, job)
        })
        .collect()
}

fn expect_completed(engine: &Engine, jobs: &[(String, Arc<kiln_pipeline::synthetic::SyntheticJob>)]) {
    for (id, job) in jobs {
        match engine.wait_blocking(id, Some(Duration::from_secs(60))) {
            JobOutcome::Completed { proof, .. } => assert_valid_proofs(job, &proof),
            other => panic!("{id}: {other:?}; status {:#?}", engine.status().provers),
        }
    }
}

#[test]
fn errors_and_wrong_results_are_retried_and_never_answered() {
    ensure_params(10);
    let t = Instant::now();
    let plan = FaultPlan::default().start_err(0.15).finish_err(0.1).wrong(0.15).seed(3);
    let dev = faulty("dev0", plan);
    // One device that must stay in service: no quarantine by count.
    let cfg = EngineConfig { partition_retries: 4, quarantine_after_faults: 0, ..fault_config() };
    let engine = Engine::start(cfg, vec![dev.clone()]).unwrap();
    let jobs = submit_all(&engine, "mixed", 6, 2);
    let (mut completed, mut failed) = (0, 0);
    for (id, job) in &jobs {
        match engine.wait_blocking(id, Some(Duration::from_secs(60))) {
            // A wrong result never becomes an answer: every answer verifies.
            JobOutcome::Completed { proof, .. } => {
                assert_valid_proofs(job, &proof);
                completed += 1;
            }
            JobOutcome::Failed(m) => {
                assert!(m.contains("injected fault") || m.contains("failed verification"), "{id}: {m}");
                failed += 1;
            }
            other => panic!("{id}: {other:?}"),
        }
    }
    let c = dev.counts();
    assert!(c.start_err > 0 && c.finish_err > 0 && c.wrong > 0, "seed 3 injects each kind: {c:?}");
    let s = engine.status();
    let d = &s.provers.devices[0];
    assert!(d.quarantined.is_none() && s.provers.usable_devices == 1, "{:?}", s.provers);
    // Each injected fault reached the engine as a fault of the device
    // (a wrong result as a proof that did not verify), unless its job had
    // already failed.
    let injected = c.start_err + c.finish_err + c.wrong;
    assert!(d.faults <= injected && d.faults >= injected.min(c.wrong + c.start_err), "{d:?} {c:?}");
    assert!(completed >= 4, "{completed} completed, {failed} failed; {c:?}");
    if failed == 0 {
        assert_eq!(s.jobs.partitions_proved, c.calls - injected, "every clean call is one verified partition");
    }
    assert_idle(&engine);
    eprintln!("errors/wrong: {completed} completed, {failed} failed, {c:?}, {:.2} s", t.elapsed().as_secs_f64());
}

/// Device memory that ran out beside other proofs (a CUDA out-of-memory
/// error the GPU backend saw with company on the device) is retried
/// without charge: with no retries allowed and quarantine after one
/// fault, every job still completes and the device has no fault.
#[test]
fn memory_that_other_proofs_held_is_retried_without_charge() {
    ensure_params(10);
    let dev = faulty("dev0", FaultPlan::default().full(0.4).seed(5));
    let cfg = EngineConfig { partition_retries: 0, quarantine_after_faults: 1, ..fault_config() };
    let engine = Engine::start(cfg, vec![dev.clone()]).unwrap();
    let jobs = submit_all(&engine, "full", 4, 2);
    expect_completed(&engine, &jobs);
    let c = dev.counts();
    assert!(c.full > 0, "seed 5 injects it: {c:?}");
    let s = engine.status();
    let d = &s.provers.devices[0];
    assert!(d.quarantined.is_none() && d.faults == 0, "not the device's fault: {d:?}");
    assert_eq!(s.jobs.partitions_proved, c.calls - c.full, "every other call is one verified partition");
    assert_idle(&engine);
}

#[test]
fn a_hang_is_cut_short_by_the_watchdog_and_its_device_quarantined() {
    ensure_params(10);
    let t = Instant::now();
    let hangs = faulty("dev0", FaultPlan::default().hang(1.0));
    let engine = Engine::start(fault_config(), vec![hangs.clone() as Arc<dyn ProverBackend>, clean("dev1")]).unwrap();
    let jobs = submit_all(&engine, "hang", 4, 2);
    expect_completed(&engine, &jobs);
    let s = engine.status();
    let d0 = &s.provers.devices[0];
    let why = d0.quarantined.as_deref().expect("dev0 quarantined");
    assert!(why.starts_with("a hang: partition ") && why.contains("gave no answer within 0.5 s (prover watchdog)"), "{why}");
    assert!(d0.watchdog_expiries >= 1 && hangs.counts().hang >= 1, "{d0:?}");
    assert!(s.provers.devices[1].quarantined.is_none() && s.provers.usable_devices == 1);
    assert!(s.workers.gpu_workers.iter().any(|w| w.device == "dev0" && w.quarantined));
    let metrics = engine.metrics_text();
    for line in ["kiln_backend_quarantined{device=\"dev0\"} 1", "kiln_backend_quarantined{device=\"dev1\"} 0", "kiln_provers_usable 1"] {
        assert!(metrics.lines().any(|l| l == line), "no {line:?} in\n{metrics}");
    }
    assert!(metrics.contains("kiln_prover_watchdog_expiries_total{device=\"dev0\"}"), "{metrics}");
    // The hung waits hold no memory of the engine's: it is idle before
    // they are released.
    assert_idle(&engine);
    hangs.release_hangs();
    eprintln!("hang: {} expiries, {:.2} s", d0.watchdog_expiries, t.elapsed().as_secs_f64());
}

/// A device whose `start` never returns (a copy to a hung GPU) costs one
/// watchdog limit: it is quarantined as a hang and its partitions are
/// proved on the other device; the engine holds nothing of the hung starts.
#[test]
fn a_start_that_never_returns_is_cut_short_by_the_watchdog() {
    ensure_params(10);
    let hangs = hung_starts("dev0");
    let other = Arc::new(AsAccelerator(clean("dev1")));
    let engine = Engine::start(fault_config(), vec![hangs.clone() as Arc<dyn ProverBackend>, other]).unwrap();
    let jobs = submit_all(&engine, "start-hang", 4, 2);
    expect_completed(&engine, &jobs);
    let s = engine.status();
    let d0 = &s.provers.devices[0];
    let why = d0.quarantined.as_deref().expect("dev0 quarantined");
    assert!(why.starts_with("a hang: partition ") && why.contains("did not take the partition within 0.5 s (prover watchdog)"), "{why}");
    assert!(d0.watchdog_expiries >= 1 && hangs.counts().start_hang >= 1, "{d0:?}");
    assert!(s.provers.devices[1].quarantined.is_none() && s.provers.usable_devices == 1);
    // A hung start keeps the witness buffers it was given (a hung copy may
    // still read them), and nothing else; they come back when it returns.
    assert!(s.pinned_pool.pinned_in_use_bytes > 0, "{:?}", s.pinned_pool);
    hangs.release_hangs();
    assert_idle(&engine);
}

/// Shutdown does not wait for a start that never returns.
#[test]
fn shutdown_is_not_held_by_a_hung_start() {
    ensure_params(10);
    let hangs = hung_starts("dev0");
    let cfg = EngineConfig { prover_watchdog_secs: 600.0, ..fault_config() };
    let engine = Engine::start(cfg, vec![hangs.clone() as Arc<dyn ProverBackend>]).unwrap();
    engine.submit(JobRequest::new("stuck", Priority::Normal, synthetic(10, 1, 7))).unwrap();
    assert!(wait_until(Duration::from_secs(30), || hangs.counts().start_hang == 1));
    let t = Instant::now();
    engine.shutdown_blocking(Duration::ZERO);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    assert_eq!(engine.poll("stuck"), JobOutcome::Cancelled);
    hangs.release_hangs();
    assert_idle(&engine);
}

#[test]
fn shutdown_is_not_held_by_a_hung_prover() {
    ensure_params(10);
    let hangs = faulty("dev0", FaultPlan::default().hang(1.0));
    // A watchdog far longer than the test: only shutdown ends the wait.
    let cfg = EngineConfig { prover_watchdog_secs: 600.0, ..fault_config() };
    let engine = Engine::start(cfg, vec![hangs.clone() as Arc<dyn ProverBackend>]).unwrap();
    engine.submit(JobRequest::new("stuck", Priority::Normal, synthetic(10, 1, 7))).unwrap();
    assert!(wait_until(Duration::from_secs(30), || hangs.counts().hang == 1));
    std::thread::sleep(Duration::from_millis(50)); // into the finalizer's wait
    let t = Instant::now();
    engine.shutdown_blocking(Duration::ZERO);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
    assert_eq!(engine.poll("stuck"), JobOutcome::Cancelled);
    assert_idle(&engine);
    hangs.release_hangs();
    eprintln!("shutdown with a hung prover: {:.0} ms", took.as_secs_f64() * 1e3);
}

#[test]
fn a_sticky_fault_quarantines_its_device_and_the_other_proves_every_job() {
    ensure_params(10);
    let t = Instant::now();
    // dev0: the CPU backend with its critical-lane worker (sharing dev0's
    // faults), lost after 2 calls; dev1 has no critical worker of its own,
    // so once dev0 is out its ordinary worker takes critical work too.
    let sticky = Arc::new(FaultyBackend::new(OnDevice::named("dev0", Arc::new(CpuBackend)), FaultPlan::default().sticky_after(2)));
    let engine = Engine::start(fault_config(), vec![sticky.clone() as Arc<dyn ProverBackend>, clean("dev1")]).unwrap();
    assert_eq!(engine.status().workers.gpu_workers.len(), 3, "dev0, dev1, dev0's critical worker");
    let jobs = submit_all(&engine, "sticky", 6, 2);
    expect_completed(&engine, &jobs);
    let critical = synthetic(10, 1, 99);
    prove_critical(&engine, "critical-after", &critical);
    let s = engine.status();
    let why = s.provers.devices[0].quarantined.as_deref().expect("dev0 quarantined");
    assert!(why.starts_with("a sticky fault: partition ") && why.contains("injected sticky fault on dev0"), "{why}");
    assert!(sticky.counts().sticky >= 1);
    assert!(s.workers.gpu_workers.iter().filter(|w| w.device == "dev0").all(|w| w.quarantined), "{:?}", s.workers.gpu_workers);
    assert_eq!((s.provers.usable_devices, s.jobs.failed), (1, 0));
    assert!(engine.no_prover_left().is_none());
    assert_idle(&engine);
    eprintln!("sticky with 2 devices: {:?}, {:.2} s", sticky.counts(), t.elapsed().as_secs_f64());
}

#[test]
fn a_device_failing_every_call_is_quarantined_after_n_faults_in_a_row() {
    ensure_params(10);
    let t = Instant::now();
    let broken = faulty("dev0", FaultPlan::default().start_err(1.0));
    let cfg = EngineConfig { quarantine_after_faults: 2, partition_retries: 1, ..fault_config() };
    let engine = Engine::start(cfg, vec![broken.clone() as Arc<dyn ProverBackend>, clean("dev1")]).unwrap();
    let jobs = submit_all(&engine, "broken", 4, 2);
    for (id, job) in &jobs {
        match engine.wait_blocking(id, Some(Duration::from_secs(60))) {
            JobOutcome::Completed { proof, .. } => assert_valid_proofs(job, &proof),
            // A partition may meet dev0 twice before its second fault in a
            // row quarantines it (one retry is charged, then it fails).
            JobOutcome::Failed(m) => assert!(m.contains("injected fault at start on dev0"), "{id}: {m}"),
            other => panic!("{id}: {other:?}"),
        }
    }
    let s = engine.status();
    let d0 = &s.provers.devices[0];
    assert_eq!(d0.quarantined.as_deref().map(|w| w.starts_with("2 prover faults in a row, the last: partition ")), Some(true), "{d0:?}");
    assert_eq!(broken.counts().start_err, 2, "no call after the quarantine");
    assert!(s.jobs.completed >= 3, "{:?}", s.jobs);
    assert_idle(&engine);
    eprintln!("2 faults in a row: {:?}, {:.2} s", s.jobs, t.elapsed().as_secs_f64());
}

#[test]
fn with_one_device_a_sticky_fault_fails_jobs_saying_no_prover_is_left() {
    ensure_params(10);
    let t = Instant::now();
    let sticky = faulty("dev0", FaultPlan::default().sticky_after(1));
    let engine = Engine::start(fault_config(), vec![sticky.clone() as Arc<dyn ProverBackend>]).unwrap();
    let first = submit_all(&engine, "first", 1, 1);
    expect_completed(&engine, &first);
    engine.submit(JobRequest::new("second", Priority::Normal, synthetic(10, 2, 5))).unwrap();
    match engine.wait_blocking("second", Some(Duration::from_secs(60))) {
        JobOutcome::Failed(m) => {
            assert!(m.starts_with("no prover is left: every prover device is quarantined (dev0: a sticky fault: "), "{m}");
            assert!(m.ends_with("kiln must be restarted"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    let why = engine.no_prover_left().expect("the engine says no prover is left");
    match engine.submit(JobRequest::new("third", Priority::Critical, synthetic(10, 1, 6))) {
        Err(SubmitError::NoProver(m)) => assert_eq!(m, why),
        other => panic!("{other:?}"),
    }
    let metrics = engine.metrics_text();
    assert!(metrics.lines().any(|l| l == "kiln_provers_usable 0"), "{metrics}");
    assert_eq!(engine.status().provers.no_prover_left, Some(why));
    assert_idle(&engine);
    eprintln!("sticky with 1 device: {:?}, {:.2} s", sticky.counts(), t.elapsed().as_secs_f64());
}

#[test]
fn a_device_quarantined_for_faults_in_a_row_comes_back_on_probation() {
    ensure_params(10);
    let t = Instant::now();
    // dev0 fails its first 2 calls, then recovers; dev1 is clean.
    let flaky = faulty("dev0", FaultPlan::default().start_err(1.0).faulty_for(2));
    let cfg = EngineConfig { quarantine_after_faults: 2, partition_retries: 2, quarantine_probation_secs: 1.0, ..fault_config() };
    let engine = Engine::start(cfg, vec![flaky.clone() as Arc<dyn ProverBackend>, clean("dev1")]).unwrap();
    let first = submit_all(&engine, "first", 4, 2);
    let dev0 = || engine.status().provers.devices[0].clone();
    let until = |what: &str, ok: &dyn Fn(&kiln_pipeline::DeviceHealth) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ok(&dev0()) {
            assert!(Instant::now() < deadline, "dev0 never {what}: {:?}", dev0());
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    until("quarantined", &|d| d.quarantined.is_some());
    let d0 = dev0();
    assert!(d0.quarantined.as_deref().is_some_and(|w| w.starts_with("2 prover faults in a row")), "{d0:?}");
    assert!(d0.probation_in_secs.is_some_and(|s| s <= 1.0), "{d0:?}");
    assert!(engine.metrics_text().lines().any(|l| l == r#"kiln_backend_quarantined{device="dev0"} 1"#));
    expect_completed(&engine, &first);

    // After its probation dev0 takes work again and proves it.
    until("came back", &|d| d.returns == 1);
    let calls_before = flaky.counts().calls;
    let second = submit_all(&engine, "second", 6, 2);
    expect_completed(&engine, &second);
    let d0 = engine.status().provers.devices[0].clone();
    assert_eq!((d0.quarantined.as_deref(), d0.returns, d0.on_probation), (None, 1, false), "{d0:?}");
    assert!(flaky.counts().calls > calls_before, "dev0 proved again: {:?}", flaky.counts());
    let metrics = engine.metrics_text();
    assert!(metrics.lines().any(|l| l == r#"kiln_backend_quarantined{device="dev0"} 0"#), "{metrics}");
    assert!(metrics.lines().any(|l| l == r#"kiln_backend_returns_total{device="dev0"} 1"#), "{metrics}");
    assert!(metrics.lines().any(|l| l == "kiln_provers_usable 2"), "{metrics}");
    assert_idle(&engine);
    eprintln!("probation: {:?}, {:.2} s", flaky.counts(), t.elapsed().as_secs_f64());
}

#[test]
fn shutdown_is_not_held_by_a_worker_waiting_for_its_probation() {
    ensure_params(10);
    let broken = faulty("dev0", FaultPlan::default().start_err(1.0));
    let cfg = EngineConfig { quarantine_after_faults: 1, quarantine_probation_secs: 600.0, ..fault_config() };
    let engine = Engine::start(cfg, vec![broken.clone() as Arc<dyn ProverBackend>, clean("dev1")]).unwrap();
    expect_completed(&engine, &submit_all(&engine, "job", 2, 1));
    assert!(engine.status().provers.devices[0].probation_in_secs.is_some_and(|s| s > 500.0));
    let t = Instant::now();
    engine.shutdown_blocking(Duration::from_secs(5));
    assert!(t.elapsed() < Duration::from_secs(2), "shutdown took {:?}", t.elapsed());
}
