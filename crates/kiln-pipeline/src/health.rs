//! Prover health: faults counted per device, quarantine, and the
//! watchdog's limit for a partition's wait on a prover.
//!
//! A device (all workers whose `ProverBackend::device` is the same, the
//! critical lane's included) is quarantined, i.e. its workers stop taking
//! work for good, when one of its errors is sticky
//! (`ProveError::DeviceLost`: an Xid), when a wait on it outlives the
//! watchdog (a hang), or after `quarantine_after_faults` prover faults in a
//! row (errors, panics, proofs that did not verify). Its partitions are
//! retried on the other devices. A device quarantined for faults in a row
//! (its context intact) is tried again after `quarantine_probation_secs`,
//! on probation: one more fault quarantines it again for twice as long (up
//! to 8x), a verified proof clears it. When every device is quarantined
//! there is no prover left: the engine fails its jobs saying so and refuses
//! new ones, and the daemon exits so that its supervisor restarts it (a
//! reset GPU comes back with the process); no device returns after that.
//!
//! The watchdog's limit for a partition on a device is
//! `max(prover_watchdog_secs, prover_watchdog_factor x the median of the
//! last successful proofs of its parameter set on that device)`, and
//! `prover_watchdog_secs x prover_watchdog_factor` before there is one (a
//! first, cold proof may load parameters onto the device).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;

use crate::config::EngineConfig;
use crate::lanes::Lane;
use crate::workers::Takes;

/// Successful proof times kept per (device, parameter set) for the median.
const HISTORY: usize = 32;

/// What went wrong on a prover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// An error, a panic or a proof that did not verify: counted, and
    /// quarantine after `quarantine_after_faults` in a row.
    Error,
    /// The device is gone (`ProveError::DeviceLost`): quarantine now.
    Sticky,
    /// The watchdog expired: quarantine now (the device may never answer).
    Hang,
}

/// Probation waits grow to at most this many times the configured one.
const MAX_PROBATION_FACTOR: u32 = 8;

/// One device's record.
#[derive(Default)]
struct Device {
    name: String,
    consecutive: u32,
    faults: u64,
    watchdog_expiries: u64,
    quarantined: Option<String>,
    /// When a device quarantined for faults in a row is tried again.
    probation_at: Option<Instant>,
    /// The next probation wait, as a multiple of the configured one.
    probation_factor: u32,
    /// Back from quarantine, not yet with a verified proof.
    on_probation: bool,
    returns: u64,
}

/// Where a quarantined worker's device stands.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Probation {
    /// Not quarantined (any more): the worker takes work again.
    Back,
    /// Quarantined until this moment, then tried again.
    At(Instant),
    /// Quarantined until a restart (a sticky fault, a hang, no prover left,
    /// or probation off).
    Never,
}

/// Health of every device behind the engine's prover workers.
pub(crate) struct Health {
    /// Device index of each worker.
    worker_device: Vec<usize>,
    worker_takes: Vec<Takes>,
    /// Per device, read without the lock by workers choosing work.
    quarantined: Vec<AtomicBool>,
    state: Mutex<State>,
    floor: Duration,
    factor: f64,
    after_faults: u32,
    probation: Duration,
}

struct State {
    devices: Vec<Device>,
    /// Recent successful prove times by (device, parameter set id).
    times: HashMap<(usize, String), VecDeque<Duration>>,
    /// Set once every device is quarantined: why.
    no_prover: Option<String>,
}

/// What a fault led to.
pub(crate) struct Verdict {
    /// The device was quarantined by this fault (why), ...
    pub(crate) quarantined_now: Option<String>,
    /// ... or is already (its partitions' retries are not charged).
    pub(crate) quarantined: bool,
    /// No device is left: why (set once, by the fault that did it).
    pub(crate) no_prover_now: Option<String>,
}

/// A device as `/status` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceHealth {
    /// `ProverBackend::device` ("gpu0", "cpu").
    pub device: String,
    /// Taken out of service, and why; `None` while it proves.
    pub quarantined: Option<String>,
    /// Prover faults seen (errors, panics, proofs that did not verify,
    /// watchdog expiries).
    pub faults: u64,
    /// Faults since its last verified proof.
    pub consecutive_faults: u32,
    /// Waits the watchdog cut short.
    pub watchdog_expiries: u64,
    /// Quarantined for faults in a row: seconds until it is tried again.
    pub probation_in_secs: Option<f64>,
    /// Back from quarantine without a verified proof yet: one more fault
    /// quarantines it again.
    pub on_probation: bool,
    /// Times it came back from quarantine.
    pub returns: u64,
}

/// The provers' health, for `/status`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProverHealth {
    pub devices: Vec<DeviceHealth>,
    /// Devices not quarantined.
    pub usable_devices: usize,
    /// Set when every device is quarantined: the engine fails its jobs
    /// and refuses new ones; the daemon exits (non-zero) to be restarted.
    pub no_prover_left: Option<String>,
}

impl Health {
    /// `workers`: each prover worker's device and what it takes.
    pub(crate) fn new(workers: &[(String, Takes)], config: &EngineConfig) -> Health {
        let mut devices: Vec<Device> = Vec::new();
        let worker_device = workers
            .iter()
            .map(|(name, _)| match devices.iter().position(|d| &d.name == name) {
                Some(i) => i,
                None => {
                    devices.push(Device { name: name.clone(), ..Default::default() });
                    devices.len() - 1
                }
            })
            .collect();
        Health {
            worker_device,
            worker_takes: workers.iter().map(|(_, t)| *t).collect(),
            quarantined: devices.iter().map(|_| AtomicBool::new(false)).collect(),
            state: Mutex::new(State { devices, times: HashMap::new(), no_prover: None }),
            floor: Duration::from_secs_f64(config.prover_watchdog_secs.max(0.0)),
            factor: config.prover_watchdog_factor.max(0.0),
            after_faults: config.quarantine_after_faults,
            probation: Duration::from_secs_f64(config.quarantine_probation_secs.max(0.0)),
        }
    }

    /// Whether `worker`'s device is out of service.
    pub(crate) fn is_quarantined(&self, worker: usize) -> bool {
        self.quarantined[self.worker_device[worker]].load(Ordering::Acquire)
    }

    /// Whether a worker not quarantined takes partitions of `lane` (when
    /// none does, the others take them whatever their lane: a device that
    /// had the critical workers may be gone).
    pub(crate) fn lane_served(&self, lane: Lane) -> bool {
        self.worker_takes.iter().enumerate().any(|(w, t)| !self.is_quarantined(w) && (*t == Takes::Any || *t == Takes::Only(lane)))
    }

    /// Why no prover is left, once none is.
    pub(crate) fn no_prover_left(&self) -> Option<String> {
        self.state.lock().no_prover.clone()
    }

    /// The device's name.
    pub(crate) fn device_of(&self, worker: usize) -> String {
        self.state.lock().devices[self.worker_device[worker]].name.clone()
    }

    /// A verified proof of parameters `srs_id` took `took` on `worker`'s prover.
    pub(crate) fn succeeded(&self, worker: usize, srs_id: &str, took: Duration) {
        let d = self.worker_device[worker];
        let mut s = self.state.lock();
        let dev = &mut s.devices[d];
        dev.consecutive = 0;
        if dev.on_probation {
            dev.on_probation = false;
            dev.probation_factor = 1;
            tracing::info!(device = %dev.name, "prover device proved again: off probation");
        }
        let times = s.times.entry((d, srs_id.to_string())).or_default();
        if times.len() == HISTORY {
            times.pop_front();
        }
        times.push_back(took);
    }

    /// How long a prover worker waits for a device's `start`: the limit of
    /// a cold first proof (floor x factor), whatever the device's recent
    /// times. A start may place a parameter set again (evicted, or changed
    /// on disk: ~1 min at 32 GiB) or wait for the device's other proofs,
    /// neither of which the proofs' median knows about; a hung device
    /// still costs one limit. `None`: the watchdog is off.
    pub(crate) fn start_limit(&self) -> Option<Duration> {
        (!self.floor.is_zero()).then(|| self.floor.mul_f64(self.factor.max(1.0)))
    }

    /// How long a finalizer waits for a partition of `srs_id` on `worker`'s
    /// prover; `None`: the watchdog is off.
    pub(crate) fn watchdog_limit(&self, worker: usize, srs_id: &str) -> Option<Duration> {
        if self.floor.is_zero() {
            return None;
        }
        let s = self.state.lock();
        let median = s.times.get(&(self.worker_device[worker], srs_id.to_string())).and_then(|t| {
            let mut v: Vec<Duration> = t.iter().copied().collect();
            v.sort();
            v.get(v.len() / 2).copied()
        });
        let expected = median.unwrap_or(self.floor);
        Some(self.floor.max(expected.mul_f64(self.factor.max(1.0))))
    }

    /// Counts a fault of `kind` on `worker`'s device and quarantines it if
    /// that is what the fault calls for.
    pub(crate) fn fault(&self, worker: usize, kind: FaultKind, message: &str) -> Verdict {
        let d = self.worker_device[worker];
        let mut s = self.state.lock();
        let dev = &mut s.devices[d];
        dev.faults += 1;
        dev.consecutive += 1;
        if kind == FaultKind::Hang {
            dev.watchdog_expiries += 1;
        }
        if dev.quarantined.is_some() {
            return Verdict { quarantined_now: None, quarantined: true, no_prover_now: None };
        }
        let why = match kind {
            FaultKind::Sticky => Some(format!("a sticky fault: {message}")),
            FaultKind::Hang => Some(format!("a hang: {message}")),
            FaultKind::Error if dev.on_probation => Some(format!("a fault on probation: {message}")),
            FaultKind::Error if self.after_faults > 0 && dev.consecutive >= self.after_faults => {
                Some(format!("{} prover faults in a row, the last: {message}", dev.consecutive))
            }
            FaultKind::Error => None,
        };
        let Some(why) = why else {
            return Verdict { quarantined_now: None, quarantined: false, no_prover_now: None };
        };
        dev.quarantined = Some(why.clone());
        dev.on_probation = false;
        // Errors leave the device's context usable: try it again later.
        // After a sticky fault or a hang it may never answer again.
        dev.probation_at = (kind == FaultKind::Error && !self.probation.is_zero()).then(|| {
            let factor = dev.probation_factor.clamp(1, MAX_PROBATION_FACTOR);
            dev.probation_factor = (factor * 2).min(MAX_PROBATION_FACTOR);
            Instant::now() + self.probation * factor
        });
        self.quarantined[d].store(true, Ordering::Release);
        let no_prover_now = if s.devices.iter().all(|d| d.quarantined.is_some()) && s.no_prover.is_none() {
            // The process ends (and restarts): no device comes back.
            s.devices.iter_mut().for_each(|d| d.probation_at = None);
            let each: Vec<String> = s.devices.iter().map(|d| format!("{}: {}", d.name, d.quarantined.as_deref().unwrap_or(""))).collect();
            let why = format!("no prover is left: every prover device is quarantined ({}); kiln must be restarted", each.join("; "));
            s.no_prover = Some(why.clone());
            Some(why)
        } else {
            None
        };
        Verdict { quarantined_now: Some(why), quarantined: true, no_prover_now }
    }

    /// Where `worker`'s device stands; a device whose probation is due is
    /// taken back into service here (by the first of its workers to ask).
    pub(crate) fn probation(&self, worker: usize) -> Probation {
        let d = self.worker_device[worker];
        let mut s = self.state.lock();
        if s.no_prover.is_some() {
            return Probation::Never;
        }
        let after_faults = self.after_faults;
        let dev = &mut s.devices[d];
        if dev.quarantined.is_none() {
            return Probation::Back;
        }
        match dev.probation_at {
            None => Probation::Never,
            Some(at) if Instant::now() < at => Probation::At(at),
            Some(_) => {
                let why = dev.quarantined.take().unwrap_or_default();
                dev.probation_at = None;
                dev.on_probation = true;
                // One more fault in a row quarantines it again.
                dev.consecutive = after_faults.saturating_sub(1);
                dev.returns += 1;
                self.quarantined[d].store(false, Ordering::Release);
                tracing::warn!(device = %dev.name, quarantined_for = %why, "prover device back from quarantine, on probation");
                Probation::Back
            }
        }
    }

    pub(crate) fn status(&self) -> ProverHealth {
        let s = self.state.lock();
        let devices: Vec<DeviceHealth> = s
            .devices
            .iter()
            .map(|d| DeviceHealth {
                device: d.name.clone(),
                quarantined: d.quarantined.clone(),
                faults: d.faults,
                consecutive_faults: d.consecutive,
                watchdog_expiries: d.watchdog_expiries,
                probation_in_secs: d.probation_at.map(|at| at.saturating_duration_since(Instant::now()).as_secs_f64()),
                on_probation: d.on_probation,
                returns: d.returns,
            })
            .collect();
        ProverHealth {
            usable_devices: devices.iter().filter(|d| d.quarantined.is_none()).count(),
            devices,
            no_prover_left: s.no_prover.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(after_faults: u32) -> Health {
        health_with_probation(after_faults, 600.0)
    }

    fn health_with_probation(after_faults: u32, probation_secs: f64) -> Health {
        let cfg = EngineConfig {
            prover_watchdog_secs: 1.0,
            prover_watchdog_factor: 5.0,
            quarantine_after_faults: after_faults,
            quarantine_probation_secs: probation_secs,
            ..Default::default()
        };
        let workers = [("gpu0".into(), Takes::Only(Lane::Bulk)), ("gpu1".into(), Takes::Only(Lane::Bulk)), ("gpu0".into(), Takes::Only(Lane::Critical))];
        Health::new(&workers, &cfg)
    }

    #[test]
    fn the_limit_follows_the_median_above_the_floor() {
        let h = health(3);
        assert_eq!(h.watchdog_limit(0, "p"), Some(Duration::from_secs(5)), "no history: floor x factor");
        for ms in [100, 300, 200] {
            h.succeeded(0, "p", Duration::from_millis(ms));
        }
        assert_eq!(h.watchdog_limit(0, "p"), Some(Duration::from_secs(1)), "5 x 200 ms is under the floor");
        for _ in 0..4 {
            h.succeeded(2, "p", Duration::from_secs(2)); // the same device
        }
        assert_eq!(h.watchdog_limit(0, "p"), Some(Duration::from_secs(10)));
        assert_eq!(h.watchdog_limit(1, "p"), Some(Duration::from_secs(5)), "another device has its own");
        assert_eq!(h.start_limit(), Some(Duration::from_secs(5)), "a start may place parameters again: floor x factor whatever the median");
        let off = Health::new(&[("cpu".into(), Takes::Any)], &EngineConfig { prover_watchdog_secs: 0.0, ..Default::default() });
        assert_eq!(off.watchdog_limit(0, "p"), None);
        assert_eq!(off.start_limit(), None);
    }

    #[test]
    fn quarantine_by_count_sticky_and_hang_until_none_is_left() {
        let h = health(2);
        assert!(h.fault(0, FaultKind::Error, "e1").quarantined_now.is_none());
        h.succeeded(0, "p", Duration::from_millis(1));
        assert!(h.fault(0, FaultKind::Error, "e2").quarantined_now.is_none(), "a success resets the count");
        let v = h.fault(2, FaultKind::Error, "e3");
        assert_eq!(v.quarantined_now.as_deref(), Some("2 prover faults in a row, the last: e3"));
        assert!(h.is_quarantined(0) && h.is_quarantined(2) && !h.is_quarantined(1), "the whole device");
        assert!(!h.lane_served(Lane::Critical) && h.lane_served(Lane::Bulk));
        assert!(h.fault(0, FaultKind::Sticky, "x").quarantined, "already");
        let v = h.fault(1, FaultKind::Hang, "no answer in 1 s");
        assert_eq!(v.quarantined_now.as_deref(), Some("a hang: no answer in 1 s"));
        let why = v.no_prover_now.unwrap();
        assert!(why.starts_with("no prover is left: every prover device is quarantined (gpu0: 2 prover faults"), "{why}");
        let s = h.status();
        assert_eq!((s.usable_devices, s.devices[1].watchdog_expiries, s.devices[0].faults), (0, 1, 4));
        assert_eq!(h.no_prover_left(), Some(why));
    }

    #[test]
    fn a_device_quarantined_for_faults_comes_back_on_probation() {
        let h = health_with_probation(2, 0.05);
        h.fault(0, FaultKind::Error, "e1");
        assert!(h.fault(0, FaultKind::Error, "e2").quarantined_now.is_some());
        let Probation::At(at) = h.probation(2) else { panic!("a probation is due") };
        assert!(at > Instant::now() && h.is_quarantined(0));
        assert!(h.status().devices[0].probation_in_secs.unwrap() <= 0.05);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(h.probation(2), Probation::Back, "any worker of the device takes it back");
        assert!(!h.is_quarantined(0) && h.lane_served(Lane::Critical));
        assert_eq!(h.probation(0), Probation::Back);
        let d = &h.status().devices[0];
        assert!((d.on_probation, d.returns, d.quarantined.is_none(), d.probation_in_secs.is_none()) == (true, 1, true, true), "{d:?}");

        // One fault on probation quarantines it again, for twice as long.
        let v = h.fault(0, FaultKind::Error, "e3");
        assert_eq!(v.quarantined_now.as_deref(), Some("a fault on probation: e3"));
        let wait = h.status().devices[0].probation_in_secs.unwrap();
        assert!(wait > 0.05 && wait <= 0.1, "{wait}");
        std::thread::sleep(Duration::from_millis(110));
        assert_eq!(h.probation(0), Probation::Back);
        // A verified proof ends the probation: faults count from zero again.
        h.succeeded(0, "p", Duration::from_millis(1));
        assert!(!h.status().devices[0].on_probation);
        assert!(h.fault(0, FaultKind::Error, "e4").quarantined_now.is_none());
    }

    #[test]
    fn sticky_faults_hangs_and_no_prover_left_are_for_good() {
        let h = health_with_probation(1, 0.01);
        h.fault(1, FaultKind::Sticky, "xid");
        assert_eq!(h.probation(1), Probation::Never);
        assert!(h.status().devices[1].probation_in_secs.is_none());
        // The last device quarantined for an error: no prover is left, and
        // its probation is cancelled (the daemon restarts instead).
        assert!(h.fault(0, FaultKind::Error, "e").no_prover_now.is_some());
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(h.probation(0), Probation::Never);
        assert!(h.is_quarantined(0));
        let off = health_with_probation(1, 0.0);
        off.fault(0, FaultKind::Error, "e");
        assert_eq!(off.probation(0), Probation::Never, "probation off");
        let h = health_with_probation(1, 0.01);
        h.fault(0, FaultKind::Hang, "no answer");
        assert_eq!(h.probation(0), Probation::Never);
    }
}
