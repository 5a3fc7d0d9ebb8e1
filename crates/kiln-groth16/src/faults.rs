//! Fault injection: [`FaultyBackend`] wraps any [`ProverBackend`] and makes
//! it fail the way a sick GPU does, so the pipeline's retries, watchdog and
//! quarantine can be tested on any host (CI has no GPU, and a real GPU
//! fails too rarely to test against).
//!
//! What it injects, per call of `start` (one draw of a seeded RNG picks at
//! most one fault; their probabilities must sum to at most 1):
//!
//! | key | fault | like |
//! | --- | --- | --- |
//! | `start_err` | `start` fails with [`ProveError::Backend`] | an allocation or launch failure |
//! | `full` | `start` fails with [`ProveError::DeviceFull`] | device memory held by the device's other proofs |
//! | `finish_err` | the work starts, `wait` fails with [`ProveError::Backend`] | an error at synchronization |
//! | `wrong` | `wait` returns a corrupted result (the H MSM is off by the generator) | a silent miscomputation: the proof does not verify, so `finish` refuses it |
//! | `hang` | `wait` never returns until [`FaultyBackend::release_hangs`] | a kernel that never finishes |
//! | `start_hang` | `start` never returns until [`FaultyBackend::release_hangs`] | a copy to a hung device |
//! | `sticky_after=N` | from call N on (0-based), every call fails with [`ProveError::DeviceLost`], and so does every `wait` still pending | an Xid: the device is gone until reset |
//! | `faulty_for=N` | only the first N calls (0-based, per device) draw faults; later ones are clean | a transient fault that passes |
//! | `seed` | the RNG's seed (default 0) | |
//!
//! In code: `FaultPlan::default().start_err(0.1).sticky_after(20)`. From the
//! environment: `KILN_FAULTS="start_err=0.1,finish_err=0.05,wrong=0.05,hang=0.02,sticky_after=200,seed=7"`,
//! which [`crate::Backends::open`] reads: when it is set, every backend it
//! opens is wrapped, with a loud warning in the log. Workers on one device
//! (and its urgent worker) share one fault state, so a sticky fault takes
//! the whole device, as an Xid does.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use group::Group;
use parking_lot::{Condvar, Mutex};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::backends::BackendError;
use crate::error::ProveError;
use crate::params::ParamsFile;
use crate::prover::{DeviceResidency, DeviceStatus, MsmResults, PendingMsms, PhaseTimings, ProductsSupport, ProverBackend};
use kiln_synth::{Assignment, CompiledR1cs};

/// The environment variable [`crate::Backends::open`] reads a [`FaultPlan`] from.
pub const FAULTS_ENV: &str = "KILN_FAULTS";

/// Which faults to inject, and how often (probabilities per `start` call).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    pub start_err: f64,
    pub full: f64,
    pub finish_err: f64,
    pub wrong: f64,
    pub hang: f64,
    pub start_hang: f64,
    /// From this call on (0-based, counted per device) every call fails
    /// for good: [`ProveError::DeviceLost`].
    pub sticky_after: Option<u64>,
    /// Only a device's first N calls draw faults; later calls are clean
    /// (a device that recovers, as after a transient fault).
    pub faulty_for: Option<u64>,
    pub seed: u64,
}

impl FaultPlan {
    pub fn start_err(mut self, p: f64) -> Self {
        self.start_err = p;
        self
    }
    pub fn full(mut self, p: f64) -> Self {
        self.full = p;
        self
    }
    pub fn finish_err(mut self, p: f64) -> Self {
        self.finish_err = p;
        self
    }
    pub fn wrong(mut self, p: f64) -> Self {
        self.wrong = p;
        self
    }
    pub fn hang(mut self, p: f64) -> Self {
        self.hang = p;
        self
    }
    pub fn start_hang(mut self, p: f64) -> Self {
        self.start_hang = p;
        self
    }
    pub fn sticky_after(mut self, calls: u64) -> Self {
        self.sticky_after = Some(calls);
        self
    }
    pub fn faulty_for(mut self, calls: u64) -> Self {
        self.faulty_for = Some(calls);
        self
    }
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Injects nothing at all.
    pub fn is_empty(&self) -> bool {
        self.start_err + self.full + self.finish_err + self.wrong + self.hang + self.start_hang == 0.0 && self.sticky_after.is_none()
    }

    /// The plan in [`FAULTS_ENV`]: `None` when it is unset or empty; an
    /// error saying what is wrong when it does not parse.
    pub fn from_env() -> Result<Option<FaultPlan>, BackendError> {
        Self::from_env_value(std::env::var(FAULTS_ENV).ok().as_deref())
    }

    /// [`from_env`](Self::from_env) given the variable's value.
    pub fn from_env_value(value: Option<&str>) -> Result<Option<FaultPlan>, BackendError> {
        match value.map(str::trim) {
            None | Some("") => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|e| BackendError(format!("{FAULTS_ENV}={v:?}: {e}"))),
        }
    }

    fn check(&self) -> Result<(), String> {
        for (key, p) in [("start_err", self.start_err), ("full", self.full), ("finish_err", self.finish_err), ("wrong", self.wrong), ("hang", self.hang), ("start_hang", self.start_hang)] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{key} must be a probability in 0..=1, not {p}"));
            }
        }
        let sum = self.start_err + self.full + self.finish_err + self.wrong + self.hang + self.start_hang;
        if sum > 1.0 + 1e-9 {
            return Err(format!("the probabilities add up to {sum}, more than 1 (one call gets at most one fault)"));
        }
        Ok(())
    }
}

impl FromStr for FaultPlan {
    type Err = String;
    /// `key=value` pairs separated by commas (keys in the module docs).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut plan = FaultPlan::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!("{item:?} is not key=value"));
            };
            let (key, value) = (key.trim(), value.trim());
            let prob = || value.parse::<f64>().map_err(|_| format!("{key}={value:?}: not a number"));
            let count = || value.parse::<u64>().map_err(|_| format!("{key}={value:?}: not a whole number"));
            match key {
                "start_err" => plan.start_err = prob()?,
                "full" => plan.full = prob()?,
                "finish_err" => plan.finish_err = prob()?,
                "wrong" => plan.wrong = prob()?,
                "hang" => plan.hang = prob()?,
                "start_hang" => plan.start_hang = prob()?,
                "sticky_after" => plan.sticky_after = Some(count()?),
                "faulty_for" => plan.faulty_for = Some(count()?),
                "seed" => plan.seed = count()?,
                other => return Err(format!("unknown key {other:?} (known: start_err, full, finish_err, wrong, hang, start_hang, sticky_after, faulty_for, seed)")),
            }
        }
        plan.check()?;
        Ok(plan)
    }
}

impl fmt::Display for FaultPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "start_err={},full={},finish_err={},wrong={},hang={}", self.start_err, self.full, self.finish_err, self.wrong, self.hang)?;
        if self.start_hang > 0.0 {
            write!(f, ",start_hang={}", self.start_hang)?;
        }
        if let Some(n) = self.sticky_after {
            write!(f, ",sticky_after={n}")?;
        }
        if let Some(n) = self.faulty_for {
            write!(f, ",faulty_for={n}")?;
        }
        write!(f, ",seed={}", self.seed)
    }
}

/// Faults injected so far on one device (all its workers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// `start` calls.
    pub calls: u64,
    pub start_err: u64,
    pub full: u64,
    pub finish_err: u64,
    pub wrong: u64,
    pub hang: u64,
    pub start_hang: u64,
    /// Calls (and pending waits) failed by the sticky fault.
    pub sticky: u64,
}

/// What one call does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    StartErr,
    Full,
    FinishErr,
    Wrong,
    Hang,
    StartHang,
    Sticky,
}

/// One device's fault state, shared by its workers and their pending work.
struct FaultState {
    plan: FaultPlan,
    device: String,
    rng: Mutex<ChaCha8Rng>,
    counts: Mutex<FaultCounts>,
    /// The sticky fault has happened: every later call and wait fails.
    lost: AtomicBool,
    calls: AtomicU64,
    /// Hung waits block on this until released.
    released: Mutex<bool>,
    release: Condvar,
}

impl FaultState {
    fn new(plan: FaultPlan, device: String) -> Arc<Self> {
        // Each device draws its own sequence from the one seed.
        let seed = plan.seed ^ device.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        Arc::new(FaultState {
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            plan,
            device,
            counts: Mutex::new(FaultCounts::default()),
            lost: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            released: Mutex::new(false),
            release: Condvar::new(),
        })
    }

    fn draw(&self) -> Fault {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let p = &self.plan;
        let fault = if p.sticky_after.is_some_and(|k| n >= k) || self.lost.load(Ordering::SeqCst) {
            self.lost.store(true, Ordering::SeqCst);
            Fault::Sticky
        } else if p.faulty_for.is_some_and(|k| n >= k) {
            Fault::None
        } else {
            let u: f64 = self.rng.lock().gen();
            let mut edge = 0.0;
            let mut pick = Fault::None;
            for (prob, fault) in [(p.start_err, Fault::StartErr), (p.full, Fault::Full), (p.finish_err, Fault::FinishErr), (p.wrong, Fault::Wrong), (p.hang, Fault::Hang), (p.start_hang, Fault::StartHang)] {
                edge += prob;
                if u < edge {
                    pick = fault;
                    break;
                }
            }
            pick
        };
        let mut c = self.counts.lock();
        c.calls += 1;
        match fault {
            Fault::None => {}
            Fault::StartErr => c.start_err += 1,
            Fault::Full => c.full += 1,
            Fault::FinishErr => c.finish_err += 1,
            Fault::Wrong => c.wrong += 1,
            Fault::Hang => c.hang += 1,
            Fault::StartHang => c.start_hang += 1,
            Fault::Sticky => c.sticky += 1,
        }
        fault
    }

    /// Blocks until [`FaultyBackend::release_hangs`].
    fn hold_until_released(&self) {
        let mut released = self.released.lock();
        while !*released {
            self.release.wait(&mut released);
        }
    }

    fn lost_error(&self) -> ProveError {
        ProveError::DeviceLost {
            backend: "faulty",
            message: format!("injected sticky fault on {}: the device is unusable until it is reset (like an Xid)", self.device),
        }
    }
}

/// A backend that injects the faults of a [`FaultPlan`] into another's work.
pub struct FaultyBackend {
    inner: Arc<dyn ProverBackend>,
    state: Arc<FaultState>,
}

impl FaultyBackend {
    /// `inner`, failing as `plan` says (a fault state of its own).
    pub fn new(inner: Arc<dyn ProverBackend>, plan: FaultPlan) -> Self {
        let state = FaultState::new(plan, inner.device());
        FaultyBackend { inner, state }
    }

    /// Wraps each worker; workers on one device share a fault state.
    pub fn wrap_all(workers: Vec<Arc<dyn ProverBackend>>, plan: &FaultPlan) -> Vec<Arc<FaultyBackend>> {
        let mut states: Vec<Arc<FaultState>> = Vec::new();
        workers
            .into_iter()
            .map(|inner| {
                let device = inner.device();
                let state = match states.iter().find(|s| s.device == device) {
                    Some(s) => s.clone(),
                    None => {
                        states.push(FaultState::new(plan.clone(), device));
                        states.last().expect("just pushed").clone()
                    }
                };
                Arc::new(FaultyBackend { inner, state })
            })
            .collect()
    }

    /// Ends every hung wait of this device, now and later (each returns an
    /// error): what a device reset or the end of the process does.
    pub fn release_hangs(&self) {
        *self.state.released.lock() = true;
        self.state.release.notify_all();
    }

    /// What has been injected so far on this device.
    pub fn counts(&self) -> FaultCounts {
        *self.state.counts.lock()
    }

    pub fn plan(&self) -> &FaultPlan {
        &self.state.plan
    }
}

impl ProverBackend for FaultyBackend {
    fn name(&self) -> String {
        format!("{}+faults", self.inner.name())
    }

    fn start(&self, params: &Arc<ParamsFile>, assignment: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        let fault = self.state.draw();
        match fault {
            // The assignment is dropped here: its buffers go back at once,
            // as when a real start fails.
            Fault::Sticky => return Err(self.state.lost_error()),
            Fault::StartErr => {
                return Err(ProveError::Backend { backend: "faulty", message: format!("injected fault at start on {}", self.state.device) })
            }
            Fault::StartHang => {
                self.state.hold_until_released();
                return Err(ProveError::Backend { backend: "faulty", message: format!("injected hang at start on {} released", self.state.device) });
            }
            Fault::Full => {
                return Err(ProveError::DeviceFull {
                    backend: "faulty",
                    message: format!("injected out-of-memory beside other proofs on {}", self.state.device),
                })
            }
            _ => {}
        }
        let inner = self.inner.start(params, assignment)?;
        Ok(Box::new(FaultyPending { inner, fault, state: self.state.clone() }))
    }

    fn device_products(&self, params: &ParamsFile, r1cs: &CompiledR1cs) -> ProductsSupport {
        self.inner.device_products(params, r1cs)
    }
    fn host_scratch_ratio(&self) -> f64 {
        self.inner.host_scratch_ratio()
    }
    fn device_resident(&self) -> Vec<DeviceResidency> {
        self.inner.device_resident()
    }
    fn evict_device(&self, params_id: u64) -> u64 {
        self.inner.evict_device(params_id)
    }
    fn placement_host_bytes(&self, params: &ParamsFile) -> u64 {
        self.inner.placement_host_bytes(params)
    }
    fn device(&self) -> String {
        self.inner.device()
    }
    /// The inner backend's urgent worker, sharing this device's faults.
    fn urgent_worker(&self) -> Result<Option<Arc<dyn ProverBackend>>, ProveError> {
        Ok(self.inner.urgent_worker()?.map(|w| Arc::new(FaultyBackend { inner: w, state: self.state.clone() }) as Arc<dyn ProverBackend>))
    }
    fn device_status(&self) -> Option<DeviceStatus> {
        self.inner.device_status()
    }
}

/// Started work whose `wait` carries the fault drawn at start.
struct FaultyPending {
    inner: Box<dyn PendingMsms>,
    fault: Fault,
    state: Arc<FaultState>,
}

impl PendingMsms for FaultyPending {
    fn wait(self: Box<Self>) -> Result<(MsmResults, PhaseTimings), ProveError> {
        let FaultyPending { inner, fault, state } = *self;
        if fault == Fault::Hang {
            // Hold the inner work (as a hung kernel holds its memory) until released.
            state.hold_until_released();
            drop(inner);
            return Err(ProveError::Backend { backend: "faulty", message: format!("injected hang on {} released", state.device) });
        }
        let result = inner.wait();
        // Work in flight when the device was lost fails with it.
        if state.lost.load(Ordering::SeqCst) {
            state.counts.lock().sticky += 1;
            return Err(state.lost_error());
        }
        let (mut msms, timings) = result?;
        match fault {
            Fault::FinishErr => {
                Err(ProveError::Backend { backend: "faulty", message: format!("injected fault at synchronization on {}", state.device) })
            }
            Fault::Wrong => {
                msms.h += blstrs::G1Projective::generator();
                Ok((msms, timings))
            }
            _ => Ok((msms, timings)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_parse_and_print() {
        let p: FaultPlan = "start_err=0.1, full=0.1, finish_err=0.05,wrong=0.05,hang=0.02,start_hang=0.01,sticky_after=7,faulty_for=5,seed=3".parse().unwrap();
        assert_eq!(p, FaultPlan::default().start_err(0.1).full(0.1).finish_err(0.05).wrong(0.05).hang(0.02).start_hang(0.01).sticky_after(7).faulty_for(5).seed(3));
        assert_eq!(p.to_string().parse::<FaultPlan>().unwrap(), p);
        assert_eq!(FaultPlan::from_env_value(None).unwrap(), None);
        assert_eq!(FaultPlan::from_env_value(Some("  ")).unwrap(), None);
        assert!(FaultPlan::default().is_empty() && !FaultPlan::default().sticky_after(0).is_empty());
    }

    #[test]
    fn bad_plans_say_what_is_wrong() {
        let err = |s: &str| FaultPlan::from_env_value(Some(s)).unwrap_err().0;
        assert_eq!(err("oops=1"), "KILN_FAULTS=\"oops=1\": unknown key \"oops\" (known: start_err, full, finish_err, wrong, hang, start_hang, sticky_after, faulty_for, seed)");
        assert_eq!(err("hang"), "KILN_FAULTS=\"hang\": \"hang\" is not key=value");
        assert_eq!(err("hang=x"), "KILN_FAULTS=\"hang=x\": hang=\"x\": not a number");
        assert_eq!(err("wrong=1.5"), "KILN_FAULTS=\"wrong=1.5\": wrong must be a probability in 0..=1, not 1.5");
        assert_eq!(err("sticky_after=-1"), "KILN_FAULTS=\"sticky_after=-1\": sticky_after=\"-1\": not a whole number");
        assert!(err("start_err=0.6,hang=0.6").contains("add up to 1.2"), "{}", err("start_err=0.6,hang=0.6"));
    }

    #[test]
    fn draws_follow_the_plan() {
        let state = FaultState::new(FaultPlan::default().start_err(0.25).wrong(0.25).sticky_after(1000), "dev".into());
        let draws: Vec<Fault> = (0..1000).map(|_| state.draw()).collect();
        let share = |f| draws.iter().filter(|&&d| d == f).count();
        assert!((180..320).contains(&share(Fault::StartErr)), "{}", share(Fault::StartErr));
        assert!((180..320).contains(&share(Fault::Wrong)), "{}", share(Fault::Wrong));
        assert_eq!(share(Fault::Hang) + share(Fault::FinishErr) + share(Fault::Sticky), 0);
        assert_eq!(state.draw(), Fault::Sticky, "call 1000 and every later one");
        assert_eq!(state.draw(), Fault::Sticky);
        let c = *state.counts.lock();
        assert_eq!((c.calls, c.sticky), (1002, 2));
    }

    #[test]
    fn faulty_for_n_calls_then_clean() {
        let state = FaultState::new(FaultPlan::default().start_err(1.0).faulty_for(3), "dev".into());
        let draws: Vec<Fault> = (0..6).map(|_| state.draw()).collect();
        assert_eq!(draws, [Fault::StartErr, Fault::StartErr, Fault::StartErr, Fault::None, Fault::None, Fault::None]);
    }
}
