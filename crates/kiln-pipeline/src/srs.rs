//! The SRS (parameter) manager: maps `.params` files by [`SrsSpec`],
//! generating missing ones when the spec allows, keeps them mapped between
//! jobs, and pays for the loaded ones from the memory budget.
//!
//! Tiers: **hot** = mapped and its size reserved in the budget (ready to
//! prove); **warm** = mapped but not reserved (e.g. opened at submission to
//! size a job; must be reserved before use); **cold** = on disk only.
//!
//! A [`SrsLease`] counts one partition using the parameters (`ref_count`);
//! hot parameters with no lease are idle and may be evicted when memory is
//! needed: by the budget's [`Evictor`] hook, when a lease is dropped while
//! reservations wait, or by [`evict`](SrsManager::evict).
//!
//! Parameters the critical lane proved with stay loaded through memory
//! pressure while they fit in its reserve: a WinningPoSt that had to load
//! (or make) its parameters again after bulk work took their memory would
//! lose seconds to it (32 GiB on an H100: 1-2.7 s per job). Only
//! [`evict`](SrsManager::evict) unloads them.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use kiln_groth16::{ParamsFile, ProverBackend};
use kiln_memory::{Evictor, MemoryBudget, MemoryClass, MemoryReservation, PinnedPool};
use parking_lot::Mutex;
use serde::Serialize;

use crate::job::SrsSpec;
use crate::lanes::Lane;
use crate::wait::block_on_abortable;

/// How long a reservation waits before idle pool buffers are freed for it.
pub(crate) const POOL_EVICT_AFTER: Duration = Duration::from_millis(500);

/// Where a parameter set is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SrsTier {
    /// Mapped and counted in the budget: ready.
    Hot,
    /// Mapped, not counted: must be reserved (re-pinned) before use.
    Warm,
    /// On disk only.
    Cold,
}

impl SrsTier {
    pub fn name(self) -> &'static str {
        match self {
            SrsTier::Hot => "hot",
            SrsTier::Warm => "warm",
            SrsTier::Cold => "cold",
        }
    }
}

/// One parameter set in [`EngineStatus`](crate::EngineStatus).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SrsStatus {
    pub id: String,
    pub tier: SrsTier,
    /// File size (0 while cold and never opened).
    pub size_bytes: u64,
    /// Partitions using it now.
    pub ref_count: usize,
    pub path: std::path::PathBuf,
    /// `ParamsFile::id` (a digest of the file) once it has been mapped.
    #[serde(skip)]
    pub params_id: Option<u64>,
    /// Devices holding its points in their memory ("gpu0", ...): there it
    /// is resident whatever its host tier; the engine fills this in.
    pub device_resident: Vec<String>,
    /// Devices where part of its points did not fit and are streamed from
    /// the host mapping for every proof (a subset of `device_resident`).
    pub device_streamed: Vec<String>,
}

/// What [`Engine::preload_srs`](crate::Engine::preload_srs) did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PreloadResult {
    /// It was hot already; nothing was done.
    pub already_loaded: bool,
    /// Time spent generating, mapping and reserving.
    pub load_time: Duration,
}

/// What [`Engine::evict_srs`](crate::Engine::evict_srs) did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EvictResult {
    /// It was hot or warm.
    pub was_loaded: bool,
    /// Budget bytes given back (0 unless it was hot).
    pub freed_bytes: u64,
}

struct Entry {
    spec: SrsSpec,
    params: Option<Arc<ParamsFile>>,
    /// `Some` exactly when hot.
    reservation: Option<MemoryReservation>,
    size: u64,
    /// [`ParamsFile::id`] once the file has been mapped; kept when the
    /// mapping is dropped, since a device may still hold the points.
    params_id: Option<u64>,
    refs: usize,
    last_used: Instant,
    /// Leased for the critical lane at least once: kept through memory
    /// pressure while the critical reserve holds it
    /// ([`SrsManager::evict_idle_srs`]).
    critical: bool,
}

impl Entry {
    fn tier(&self) -> SrsTier {
        match (&self.params, &self.reservation) {
            (Some(_), Some(_)) => SrsTier::Hot,
            (Some(_), None) => SrsTier::Warm,
            _ => SrsTier::Cold,
        }
    }

    /// One more partition of `lane` uses it.
    fn lease_for(&mut self, lane: Lane) {
        self.refs += 1;
        self.last_used = Instant::now();
        self.critical |= lane == Lane::Critical;
    }

    /// The id of made (not file-backed) parameters that are loaded.
    fn made_params_id(&self) -> Option<u64> {
        self.spec.open.as_ref().and(self.params.as_ref()).map(|p| p.id())
    }

    /// Unmaps and unreserves; the caller drops what is returned outside the lock.
    fn unload(&mut self) -> (Option<Arc<ParamsFile>>, Option<MemoryReservation>) {
        (self.params.take(), self.reservation.take())
    }
}

/// Which idle parameters an eviction may unload: parameters made by an
/// opener (a test setup held as scalars) cost seconds to minutes to make
/// again, so a waiter that may yet be served by a finishing partition
/// unloads only file-backed ones (remapped in milliseconds).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Remakeable {
    /// File-backed parameters only.
    Cheap,
    /// Any idle parameters, made ones last.
    Any,
}

/// Called with the [`ParamsFile::id`] of parameters whose device copies
/// must go: opened again because their file changed, or made ones (a test
/// setup) unloaded, whose device copies may hold host memory counted with
/// them ([`PlacementHost`]).
pub(crate) type EvictDevices = Box<dyn Fn(u64) + Send + Sync>;

/// Host memory the devices will hold for parameters once they place them,
/// beyond the parameters' own bytes (ProverBackend::placement_host_bytes
/// summed over the devices): reserved with the parameters.
pub(crate) type PlacementHost = Box<dyn Fn(&ParamsFile) -> u64 + Send + Sync>;

/// The manager; shared by the engine's threads.
pub(crate) struct SrsManager {
    budget: MemoryBudget,
    pool: PinnedPool,
    evict_devices: EvictDevices,
    placement_host: PlacementHost,
    /// Bytes of critical-lane parameters kept through memory pressure:
    /// the critical reserve.
    critical_keep: u64,
    entries: Mutex<HashMap<String, Entry>>,
    /// One lock per id, held while its file is generated (so it is made once).
    generating: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

/// One partition's use of a hot parameter set; keeps it from eviction.
pub(crate) struct SrsLease {
    manager: Arc<SrsManager>,
    id: String,
    params: Arc<ParamsFile>,
}

impl SrsLease {
    pub(crate) fn params(&self) -> &Arc<ParamsFile> {
        &self.params
    }
}

impl Drop for SrsLease {
    fn drop(&mut self) {
        let idle = {
            let mut entries = self.manager.entries.lock();
            let e = entries.get_mut(&self.id).expect("leased entries are never removed");
            e.refs -= 1;
            e.last_used = Instant::now();
            e.refs == 0
        };
        // Reservations may be waiting for memory this set holds; they asked
        // the evictor when they started waiting, when it was still in use.
        if idle {
            let snap = self.manager.budget.snapshot();
            let short = snap.waiting_bytes.saturating_sub(snap.available);
            if short > 0 {
                self.manager.evict_idle_srs(short, None, Remakeable::Cheap);
            }
        }
    }
}

impl SrsManager {
    pub(crate) fn new(budget: MemoryBudget, pool: PinnedPool, evict_devices: EvictDevices, placement_host: PlacementHost, critical_keep: u64) -> Arc<Self> {
        let manager = Arc::new(SrsManager {
            budget: budget.clone(),
            pool,
            evict_devices,
            placement_host,
            critical_keep,
            entries: Mutex::new(HashMap::new()),
            generating: Mutex::new(HashMap::new()),
        });
        budget.set_evictor(Arc::new(IdleEvictor(Arc::downgrade(&manager))));
        manager
    }

    /// Records `spec` (cold), or checks it agrees with the spec already known by that id.
    pub(crate) fn register(&self, spec: &SrsSpec) -> Result<(), String> {
        let mut entries = self.entries.lock();
        match entries.get(&spec.id) {
            Some(e) if e.spec.path != spec.path => Err(format!(
                "parameters {:?} are already known at {}, not {}",
                spec.id,
                e.spec.path.display(),
                spec.path.display()
            )),
            Some(_) => Ok(()),
            None => {
                let entry = Entry { spec: spec.clone(), params: None, reservation: None, size: 0, params_id: None, refs: 0, last_used: Instant::now(), critical: false };
                entries.insert(spec.id.clone(), entry);
                Ok(())
            }
        }
    }

    /// Makes sure the file exists, generating it (once per id) if the spec
    /// allows. Returns whether it had to be generated.
    pub(crate) fn ensure_file(&self, spec: &SrsSpec) -> Result<bool, String> {
        if spec.open.is_some() || spec.path.exists() {
            return Ok(false);
        }
        let Some(generate) = &spec.generate else {
            return Err(format!("parameters {:?} not found at {} (and no way to generate them)", spec.id, spec.path.display()));
        };
        let lock = self.generating.lock().entry(spec.id.clone()).or_default().clone();
        let _one_at_a_time = lock.lock();
        if spec.path.exists() {
            return Ok(false); // another thread made it while we waited
        }
        let started = Instant::now();
        tracing::info!(id = %spec.id, path = %spec.path.display(), "generating missing parameters");
        generate(&spec.path).map_err(|e| format!("generating parameters {:?} failed: {e}", spec.id))?;
        if !spec.path.exists() {
            return Err(format!("the generator of parameters {:?} did not create {}", spec.id, spec.path.display()));
        }
        tracing::info!(id = %spec.id, elapsed = ?started.elapsed(), "parameters generated");
        Ok(true)
    }

    /// The mapped parameters (mapping them, warm, if needed), without
    /// reserving their memory: for sizing a job. The file must exist.
    /// Parameters whose file changed in place or was replaced since they
    /// were opened are opened again (partitions still using the old ones
    /// keep them; those reading a changed file fail).
    pub(crate) fn probe(&self, spec: &SrsSpec) -> Result<Arc<ParamsFile>, String> {
        self.register(spec)?;
        let known = self.entries.lock().get(&spec.id).and_then(|e| e.params.clone());
        if let Some(p) = known {
            match p.stale() {
                None => return Ok(p),
                Some(why) => self.forget_stale(&spec.id, &p, &why),
            }
        }
        // Map (or make) outside the lock: it reads the verifying key from
        // disk, or makes a test setup (seconds to minutes, once per id).
        let params = match &spec.open {
            None => Arc::new(ParamsFile::open(&spec.path).map_err(|e| e.to_string())?),
            Some(open) => {
                let lock = self.generating.lock().entry(spec.id.clone()).or_default().clone();
                let _one_at_a_time = lock.lock();
                if let Some(p) = self.entries.lock().get(&spec.id).and_then(|e| e.params.clone()) {
                    return Ok(p); // made by another thread while we waited
                }
                let started = Instant::now();
                tracing::info!(id = %spec.id, "making parameters (test setup)");
                let made = open(&self.budget).map_err(|e| format!("making parameters {:?} failed: {e}", spec.id))?;
                tracing::info!(id = %spec.id, elapsed = ?started.elapsed(), bytes = made.size_bytes(), "parameters made");
                // Kept before the lock goes: a thread waiting for it must
                // find them rather than make them again.
                return Ok(self.keep_probed(&spec.id, Arc::new(made)));
            }
        };
        Ok(self.keep_probed(&spec.id, params))
    }

    /// Keeps `params` as `id`'s (or the ones another thread kept first).
    fn keep_probed(&self, id: &str, params: Arc<ParamsFile>) -> Arc<ParamsFile> {
        let mut entries = self.entries.lock();
        let e = entries.get_mut(id).expect("registered by probe");
        e.size = params.size_bytes();
        e.params_id = Some(params.id());
        e.params.get_or_insert(params).clone()
    }

    /// Drops `stale` from `id`'s entry (with its reservation when no
    /// partition uses it) so that the next probe opens the file again.
    fn forget_stale(&self, id: &str, stale: &Arc<ParamsFile>, why: &str) {
        let dropped = {
            let mut entries = self.entries.lock();
            let Some(e) = entries.get_mut(id) else { return };
            if !e.params.as_ref().is_some_and(|p| Arc::ptr_eq(p, stale)) {
                return; // another thread did it
            }
            tracing::warn!(id, why, in_use_by = e.refs, "parameter file changed on disk; opening it again");
            if e.refs == 0 {
                e.unload()
            } else {
                (e.params.take(), None)
            }
        };
        drop(dropped);
        (self.evict_devices)(stale.id());
    }

    /// Makes the parameters hot (reserving their size through `budget`, the
    /// engine's budget or its priority handle, evicting idle ones if
    /// needed) and leases them for a partition of `lane`. Gives up with
    /// `Ok(None)` when `abort()` turns true while waiting for memory.
    pub(crate) fn lease(
        self: &Arc<Self>,
        spec: &SrsSpec,
        budget: &MemoryBudget,
        lane: Lane,
        abort: impl Fn() -> bool,
    ) -> Result<Option<SrsLease>, String> {
        let params = self.probe(spec)?;
        if let Some(lease) = self.try_lease_hot(&spec.id, lane) {
            return Ok(Some(lease));
        }
        // With what the devices will keep on the host for them (asked
        // before they place them, which they do for the first partition).
        let placed_on_host = (self.placement_host)(&params);
        let size = params.size_bytes() + placed_on_host;
        let started = Instant::now();
        let reserve = budget.reserve(size, MemoryClass::Srs);
        let tick = || self.relieve(Some(&spec.id), started.elapsed());
        let reservation = match block_on_abortable(reserve, &abort, tick) {
            None => return Ok(None),
            Some(r) => r.map_err(|e| format!("parameters {:?} do not fit: {e}", spec.id))?,
        };
        let mut entries = self.entries.lock();
        let e = entries.get_mut(&spec.id).expect("registered by probe");
        let spare = if e.reservation.is_some() { Some(reservation) } else { e.reservation = Some(reservation); None };
        e.params.get_or_insert(params);
        e.size = size;
        e.lease_for(lane);
        let params = e.params.clone().expect("set above");
        drop(entries);
        drop(spare); // someone made it hot meanwhile
        tracing::info!(id = %spec.id, bytes = size, placed_on_host, waited = ?started.elapsed(), "parameters loaded (hot)");
        Ok(Some(SrsLease { manager: self.clone(), id: spec.id.clone(), params }))
    }

    fn try_lease_hot(self: &Arc<Self>, id: &str, lane: Lane) -> Option<SrsLease> {
        let mut entries = self.entries.lock();
        let e = entries.get_mut(id)?;
        if e.tier() != SrsTier::Hot {
            return None;
        }
        e.lease_for(lane);
        Some(SrsLease { manager: self.clone(), id: id.to_string(), params: e.params.clone().expect("hot") })
    }

    /// The budget bytes `params` (of `id`) take when hot: what their
    /// reservation holds if they are, else their own bytes and what the
    /// devices will keep on the host for them.
    pub(crate) fn hot_bytes(&self, id: &str, params: &ParamsFile) -> u64 {
        let hot = self.entries.lock().get(id).filter(|e| e.tier() == SrsTier::Hot).map(|e| e.size);
        hot.unwrap_or_else(|| params.size_bytes() + (self.placement_host)(params))
    }

    /// Whether `id` is hot now.
    pub(crate) fn is_hot(&self, id: &str) -> bool {
        self.entries.lock().get(id).is_some_and(|e| e.tier() == SrsTier::Hot)
    }

    /// Unloads `id` if no partition uses it.
    pub(crate) fn evict(&self, id: &str) -> Result<EvictResult, String> {
        let unloaded_made = {
            let mut entries = self.entries.lock();
            let Some(e) = entries.get_mut(id) else {
                return Ok(EvictResult { was_loaded: false, freed_bytes: 0 });
            };
            if e.refs > 0 {
                return Err(format!("parameters {id:?} are in use by {} partition(s)", e.refs));
            }
            let was_loaded = e.tier() != SrsTier::Cold;
            let made = e.made_params_id();
            let unloaded = e.unload();
            let freed = unloaded.1.as_ref().map_or(0, MemoryReservation::bytes);
            (unloaded, made, EvictResult { was_loaded, freed_bytes: freed })
        };
        let (unloaded, made, freed) = unloaded_made;
        self.drop_device_copies(made);
        drop(unloaded);
        tracing::info!(id, freed_bytes = freed.freed_bytes, "parameters evicted");
        Ok(freed)
    }

    /// Unloads idle hot parameters, least recently used first (those made
    /// by an opener after every file-backed set), until `wanted` bytes are
    /// freed; never `except`, nor the critical lane's kept sets
    /// ([`SrsManager::kept_for_critical`]), and made ones only when `which`
    /// allows. Returns the bytes freed.
    pub(crate) fn evict_idle_srs(&self, wanted: u64, except: Option<&str>, which: Remakeable) -> u64 {
        let unloaded: Vec<_> = {
            let mut entries = self.entries.lock();
            let kept = self.kept_for_critical(&entries);
            let mut idle: Vec<_> = entries
                .values_mut()
                .filter(|e| e.refs == 0 && e.tier() == SrsTier::Hot && Some(e.spec.id.as_str()) != except)
                .filter(|e| !kept.contains(&e.spec.id))
                .filter(|e| which == Remakeable::Any || e.spec.open.is_none())
                .collect();
            idle.sort_by_key(|e| (e.spec.open.is_some(), e.last_used));
            let mut freed = 0;
            let mut out = Vec::new();
            for e in idle {
                if freed >= wanted {
                    break;
                }
                freed += e.size;
                tracing::info!(id = %e.spec.id, bytes = e.size, "evicting idle parameters for memory");
                out.push((e.made_params_id(), e.unload()));
            }
            out
        };
        let freed = unloaded.iter().filter_map(|(_, (_, r))| r.as_ref()).map(MemoryReservation::bytes).sum();
        for (made, _) in &unloaded {
            self.drop_device_copies(*made);
        }
        drop(unloaded);
        freed
    }

    /// The hot parameter sets the critical lane proved with that its
    /// reserve holds: most recently used first, while their sizes add up
    /// to no more than the reserve.
    fn kept_for_critical(&self, entries: &HashMap<String, Entry>) -> Vec<String> {
        let mut critical: Vec<&Entry> = entries.values().filter(|e| e.critical && e.tier() == SrsTier::Hot).collect();
        critical.sort_by_key(|e| std::cmp::Reverse(e.last_used));
        let mut held = 0;
        critical
            .into_iter()
            .take_while(|e| {
                held += e.size;
                held <= self.critical_keep
            })
            .map(|e| e.spec.id.clone())
            .collect()
    }

    /// Every parameter set's device copies, when the engine shuts down:
    /// backends can outlive it (a caller may start the next engine with the
    /// same backends), but what they placed for these parameters was
    /// counted in this engine's budget only.
    pub(crate) fn release_devices(&self) {
        let placed: Vec<u64> = self.entries.lock().values().filter_map(|e| e.params_id).collect();
        for params_id in placed {
            (self.evict_devices)(params_id);
        }
    }

    /// Made parameters' device copies go with them: what they keep on the
    /// host was reserved with the parameters ([`PlacementHost`]).
    fn drop_device_copies(&self, made: Option<u64>) {
        if let Some(params_id) = made {
            (self.evict_devices)(params_id);
        }
    }

    /// Called periodically by whoever waits for budget bytes (and has
    /// waited `waited` so far): frees idle memory for the waiters' shortfall.
    /// Idle parameters other than `except` go at once (the waiter's own
    /// wait began when they were still in use, so the budget's evictor did
    /// not see them idle); idle pool buffers only after
    /// [`POOL_EVICT_AFTER`], since a finishing partition usually frees
    /// memory sooner and page-locked buffers are slow to remake.
    pub(crate) fn relieve(&self, except: Option<&str>, waited: Duration) {
        let snap = self.budget.snapshot();
        let short = snap.waiting_bytes.saturating_sub(snap.available);
        if short == 0 {
            return;
        }
        let mut freed = self.evict_idle_srs(short, except, Remakeable::Cheap);
        if freed < short && waited >= POOL_EVICT_AFTER {
            let pinned = self.pool.release_idle(short - freed);
            if pinned > 0 {
                tracing::info!(bytes = pinned, "released idle pool buffers for waiting reservations");
            }
            freed += pinned;
            if freed < short {
                self.evict_idle_srs(short - freed, except, Remakeable::Any);
            }
        }
    }

    /// Gives idle memory back: idle pool buffers first (cheaper to remake
    /// than re-reading parameters), then idle parameters.
    pub(crate) fn evict_idle(&self, wanted: u64) -> u64 {
        let pinned = self.pool.release_idle(wanted);
        if pinned >= wanted {
            return pinned;
        }
        pinned + self.evict_idle_srs(wanted - pinned, None, Remakeable::Any)
    }

    pub(crate) fn statuses(&self) -> Vec<SrsStatus> {
        let entries = self.entries.lock();
        let mut out: Vec<_> = entries
            .values()
            .map(|e| SrsStatus {
                id: e.spec.id.clone(),
                tier: e.tier(),
                size_bytes: e.size,
                ref_count: e.refs,
                path: e.spec.path.clone(),
                params_id: e.params_id,
                device_resident: Vec::new(),
                device_streamed: Vec::new(),
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }
}

/// The budget's [`Evictor`]: idle pool buffers and idle parameters. Holds
/// the manager weakly so the budget does not keep it alive.
struct IdleEvictor(Weak<SrsManager>);

impl Evictor for IdleEvictor {
    fn evict(&self, wanted_bytes: u64) -> u64 {
        self.0.upgrade().map_or(0, |m| m.evict_idle(wanted_bytes))
    }
}

/// [`PlacementHost`] over `backends`: each device counted once (its
/// workers share its placed parameters).
pub(crate) fn placement_host(backends: &[Arc<dyn ProverBackend>]) -> PlacementHost {
    let one_per_device = kiln_groth16::one_per_device(backends);
    Box::new(move |params| one_per_device.iter().map(|b| b.placement_host_bytes(params)).sum())
}
