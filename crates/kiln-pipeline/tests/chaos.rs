//! Random mixes of jobs, faults, cancellations, budgets and thread counts,
//! and of prover faults on one to three devices (errors, wrong results,
//! hangs, sticky faults): whatever happens, every job ends the way its
//! faults say, every answer verifies, memory stays in the budget, and the
//! engine returns to idle.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_groth16::{FaultPlan, FaultyBackend, ProverBackend};
use kiln_pipeline::{Engine, EngineConfig, JobOutcome, JobRequest, JobSource, PartitionFootprint, Priority};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct JobPlan {
    priority: Priority,
    partitions: usize,
    fault: Option<Fault>,
    /// Cancel after this many milliseconds.
    cancel_after_ms: Option<u64>,
}

fn job_plan() -> impl Strategy<Value = JobPlan> {
    (0usize..4, 1usize..4, 0u8..6, proptest::option::weighted(0.3, 0u64..60)).prop_map(|(p, partitions, f, cancel_after_ms)| {
        let fault = match f {
            0 => Some(Fault::Fail(partitions - 1)),
            1 => Some(Fault::Panic(0)),
            _ => None,
        };
        JobPlan { priority: Priority::ALL[p], partitions, fault, cancel_after_ms }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_mix_of_jobs_ends_cleanly(
        plans in proptest::collection::vec(job_plan(), 1..6),
        partitions_that_fit in 1u64..4,
        workers in 1usize..4,
        lane in 0usize..2,
        depth in 1usize..3,
    ) {
        let srs = ensure_params(10);
        let probe = config(u64::MAX / 4);
        let params = kiln_groth16::ParamsFile::open(synthetic(10, 1, 0).srs().path).unwrap();
        let part = PartitionFootprint::of(&kiln_pipeline::shape_from_params(&params), &probe).total();
        let budget = srs + part * partitions_that_fit + part / 2;
        let cfg = EngineConfig { synthesis_workers: workers, critical_lane_workers: lane, gpu_queue_depth: depth, ..config(budget) };
        let engine = Engine::start(cfg, vec![SlowBackend::new(Duration::from_millis(5))]).unwrap();

        let mut submitted = Vec::new();
        for (k, plan) in plans.iter().enumerate() {
            let inner = synthetic(10, plan.partitions, 1000 * k as u64);
            let source: Arc<dyn JobSource> = match plan.fault {
                Some(fault) => Arc::new(Faulty { inner: inner.clone(), fault }),
                None => inner.clone(),
            };
            let id = format!("chaos-{k}");
            engine.submit(JobRequest::new(id.clone(), plan.priority, source)).unwrap();
            submitted.push((id, inner, plan.clone()));
        }
        let cancellers: Vec<_> = submitted
            .iter()
            .filter_map(|(id, _, plan)| plan.cancel_after_ms.map(|ms| (id.clone(), ms)))
            .map(|(id, ms)| {
                let e = engine.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(ms));
                    e.cancel(&id)
                })
            })
            .collect();
        for (id, inner, plan) in &submitted {
            let outcome = engine.wait_blocking(id, Some(Duration::from_secs(60)));
            match (&outcome, plan.fault, plan.cancel_after_ms) {
                (JobOutcome::Completed { proof, .. }, None, _) => assert_valid_proofs(inner, proof),
                (JobOutcome::Failed(_), Some(_), _) => {}
                (JobOutcome::Cancelled, _, Some(_)) => {}
                _ => prop_assert!(false, "{id} ({plan:?}) ended as {outcome:?}"),
            }
        }
        for c in cancellers {
            prop_assert!(c.join().unwrap().is_some());
        }
        assert_idle(&engine);
        let s = engine.status();
        prop_assert!(s.budget.peak_reserved <= budget);
        prop_assert!(s.buffers.peak_synthesized_not_started <= workers + lane + depth);
        prop_assert_eq!(s.jobs.in_flight, 0);
        prop_assert_eq!(s.jobs.completed + s.jobs.failed + s.jobs.cancelled, plans.len() as u64);
    }
}

/// Faults of one device: each kind off or on, a sticky fault or none,
/// faults only in the first few calls (a device that recovers) or always.
fn fault_plan() -> impl Strategy<Value = FaultPlan> {
    (0u8..64, proptest::option::weighted(0.3, 0u64..8), proptest::option::weighted(0.3, 1u64..6), any::<u64>()).prop_map(
        |(bits, sticky_after, faulty_for, seed)| {
            let on = |bit: u8, p: f64| if bits & (1 << bit) != 0 { p } else { 0.0 };
            FaultPlan { start_err: on(0, 0.2), full: on(4, 0.2), finish_err: on(1, 0.1), wrong: on(2, 0.2), hang: on(3, 0.1), start_hang: on(5, 0.05), sticky_after, faulty_for, seed }
        },
    )
}

proptest! {
    // `KILN_CHAOS_CASES=N` runs it longer.
    #![proptest_config(ProptestConfig { cases: chaos_cases(8), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_mix_of_prover_faults_ends_cleanly(
        plans in proptest::collection::vec(fault_plan(), 1..4),
        jobs in proptest::collection::vec((0usize..4, 1usize..4), 1..6),
        retries in 0u32..3,
        quarantine_after in 0u32..4,
        probation in prop_oneof![Just(0.0), Just(600.0), 0.02f64..0.3],
    ) {
        ensure_params(10);
        let devices: Vec<Arc<FaultyBackend>> = plans
            .iter()
            .enumerate()
            .map(|(i, plan)| {
                let inner = OnDevice::named(&format!("dev{i}"), SlowBackend::new(Duration::from_millis(2)));
                // Starts are watched on accelerators only (a CPU's start is its whole proof).
                let inner: Arc<dyn ProverBackend> = if plan.start_hang > 0.0 || i % 2 == 1 { Arc::new(AsAccelerator(inner)) } else { inner };
                Arc::new(FaultyBackend::new(inner, plan.clone()))
            })
            .collect();
        let cfg = EngineConfig {
            partition_retries: retries,
            quarantine_after_faults: quarantine_after,
            quarantine_probation_secs: probation,
            prover_watchdog_secs: 0.3,
            prover_watchdog_factor: 1.0,
            ..config(256 << 20)
        };
        let engine = Engine::start(cfg, devices.iter().map(|d| d.clone() as Arc<dyn ProverBackend>).collect()).unwrap();
        let submitted: Vec<_> = jobs
            .iter()
            .enumerate()
            .map(|(k, &(p, partitions))| {
                let job = synthetic(10, partitions, 1000 * k as u64 + 7);
                let id = format!("faults-{k}");
                engine.submit(JobRequest::new(id.clone(), Priority::ALL[p], job.clone())).unwrap();
                (id, job)
            })
            .collect();
        for (id, job) in &submitted {
            match engine.wait_blocking(id, Some(Duration::from_secs(60))) {
                JobOutcome::Completed { proof, .. } => assert_valid_proofs(job, &proof),
                JobOutcome::Failed(m) => prop_assert!(
                    ["injected", "failed verification", "prover watchdog", "quarantined", "no prover is left"].iter().any(|w| m.contains(w)),
                    "{id} failed for another reason: {m}"
                ),
                other => prop_assert!(false, "{id} ended as {other:?}; {:#?}", engine.status().provers),
            }
        }
        let s = engine.status();
        // A device without faults is never quarantined; no prover is left
        // exactly when every device is quarantined.
        for (d, plan) in s.provers.devices.iter().zip(&plans) {
            prop_assert!(!(plan.is_empty() && d.quarantined.is_some()), "{d:?}");
        }
        prop_assert_eq!(s.provers.no_prover_left.is_some(), s.provers.usable_devices == 0);
        prop_assert_eq!(engine.no_prover_left(), s.provers.no_prover_left.clone());
        prop_assert_eq!(s.jobs.completed + s.jobs.failed, jobs.len() as u64);
        // Hung waits hold nothing of the engine's; a hung start keeps its
        // witness buffers until it returns.
        if plans.iter().any(|p| p.start_hang > 0.0) {
            devices.iter().for_each(|d| d.release_hangs());
        }
        assert_idle(&engine);
        let injected: Vec<_> = devices.iter().map(|d| d.counts()).collect();
        let quarantined = s.provers.devices.iter().filter(|d| d.quarantined.is_some()).count();
        let returns: u64 = s.provers.devices.iter().map(|d| d.returns).sum();
        // Only a device quarantined for faults in a row comes back, and
        // never once no prover is left.
        for d in &s.provers.devices {
            prop_assert!(d.returns == 0 || probation > 0.0, "{d:?}");
            prop_assert!(d.probation_in_secs.is_none() || s.provers.no_prover_left.is_none(), "{d:?}");
        }
        eprintln!(
            "chaos-faults: devices={} jobs={} completed={} failed={} quarantined={quarantined} returns={returns} no_prover={} injected={injected:?}",
            plans.len(), jobs.len(), s.jobs.completed, s.jobs.failed, s.provers.no_prover_left.is_some()
        );
        for d in &devices {
            d.release_hangs();
        }
    }
}

fn chaos_cases(default: u32) -> u32 {
    std::env::var("KILN_CHAOS_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The shrunk case of a CI failure: a critical job whose first partition
/// panics, then a bulk job, one partition in the budget, one worker per lane.
#[test]
fn a_panicking_critical_job_does_not_stall_the_next() {
    let srs = ensure_params(10);
    let probe = config(u64::MAX / 4);
    let params = kiln_groth16::ParamsFile::open(synthetic(10, 1, 0).srs().path).unwrap();
    let part = PartitionFootprint::of(&kiln_pipeline::shape_from_params(&params), &probe).total();
    let budget = srs + part + part / 2;
    let cfg = EngineConfig { synthesis_workers: 1, critical_lane_workers: 1, gpu_queue_depth: 1, ..config(budget) };
    let engine = Engine::start(cfg, vec![SlowBackend::new(Duration::from_millis(5))]).unwrap();
    let faulty = Arc::new(Faulty { inner: synthetic(10, 2, 0), fault: Fault::Panic(0) });
    engine.submit(JobRequest::new("panics", Priority::Critical, faulty)).unwrap();
    let bulk = synthetic(10, 2, 1000);
    engine.submit(JobRequest::new("bulk", Priority::Low, bulk.clone())).unwrap();
    assert!(matches!(engine.wait_blocking("panics", Some(Duration::from_secs(60))), JobOutcome::Failed(_)));
    match engine.wait_blocking("bulk", Some(Duration::from_secs(60))) {
        JobOutcome::Completed { proof, .. } => assert_valid_proofs(&bulk, &proof),
        other => panic!("bulk ended as {other:?}; status {:#?}", engine.status()),
    }
    assert_idle(&engine);
}

proptest! {
    // `KILN_CHAOS_CASES=N` runs it longer.
    #![proptest_config(ProptestConfig { cases: chaos_cases(6), failure_persistence: None, ..ProptestConfig::default() })]

    /// Jobs of two parameter sets while another thread preloads and evicts
    /// them at random moments, and maybe a shutdown mid-run: no panic, no
    /// hang, every answer verifies, a refused eviction says why, a job ends
    /// CANCELLED or FAILED only because of the shutdown, and the memory
    /// all comes back.
    #[test]
    fn preload_evict_and_shutdown_during_work_end_cleanly(
        jobs in proptest::collection::vec((0usize..4, 1usize..4, any::<bool>()), 1..6),
        ops in proptest::collection::vec((any::<bool>(), any::<bool>(), 0u64..25), 0..12),
        shutdown_after_ms in proptest::option::weighted(0.5, 0u64..150),
        grace_ms in 0u64..100,
    ) {
        ensure_params(10);
        ensure_params(11);
        let specs = [synthetic(10, 1, 0).srs(), synthetic(11, 1, 0).srs()];
        let budget = 256 << 20;
        let engine = Engine::start(config(budget), vec![SlowBackend::new(Duration::from_millis(2))]).unwrap();
        let submitted: Vec<_> = jobs
            .iter()
            .enumerate()
            .map(|(k, &(p, partitions, big))| {
                let job = synthetic(if big { 11 } else { 10 }, partitions, 1000 * k as u64 + 3);
                let id = format!("srs-chaos-{k}");
                engine.submit(JobRequest::new(id.clone(), Priority::ALL[p], job.clone())).unwrap();
                (id, job)
            })
            .collect();
        let operator = {
            let (engine, specs) = (engine.clone(), specs.clone());
            std::thread::spawn(move || {
                let mut refused = Vec::new();
                for (evict, which, delay_ms) in ops {
                    std::thread::sleep(Duration::from_millis(delay_ms));
                    let spec = &specs[usize::from(which)];
                    let result = if evict { engine.evict_srs(&spec.id).map(drop) } else { engine.preload_srs(spec.clone()).map(drop) };
                    if let Err(e) = result {
                        refused.push(e.to_string());
                    }
                }
                refused
            })
        };
        let stopper = shutdown_after_ms.map(|ms| {
            let engine = engine.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(ms));
                let t = std::time::Instant::now();
                engine.shutdown_blocking(Duration::from_millis(grace_ms));
                t.elapsed()
            })
        });
        for (id, job) in &submitted {
            match engine.wait_blocking(id, Some(Duration::from_secs(60))) {
                JobOutcome::Completed { proof, .. } => assert_valid_proofs(job, &proof),
                JobOutcome::Cancelled | JobOutcome::Failed(_) if shutdown_after_ms.is_some() => {}
                other => prop_assert!(false, "{id} ended as {other:?}; status {:#?}", engine.status()),
            }
        }
        if let Some(stopper) = stopper {
            let took = stopper.join().unwrap();
            prop_assert!(took < Duration::from_secs(30), "shutdown took {took:?}");
            let refused = engine.submit(JobRequest::new("after-shutdown", Priority::Normal, synthetic(10, 1, 9)));
            prop_assert!(refused.is_err(), "a job was accepted after shutdown");
        }
        let refused = operator.join().unwrap();
        for message in &refused {
            prop_assert!(!message.trim().is_empty(), "a refused preload or eviction without a reason");
        }
        assert_idle(&engine);
        let s = engine.status();
        prop_assert!(s.budget.peak_reserved <= budget);
        eprintln!(
            "chaos-srs: jobs={} completed={} cancelled={} failed={} shutdown={shutdown_after_ms:?} refused={refused:?}",
            jobs.len(), s.jobs.completed, s.jobs.cancelled, s.jobs.failed
        );
    }
}
