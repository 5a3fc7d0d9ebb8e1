//! [`CircuitCache`]: compiled circuits shared by every synthesis worker, and
//! [`SynthContext`], the handle a job's synthesis goes through.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};


use crate::compiled::{CompiledR1cs, DeferTo, Retry, SegmentedCircuit, Whole};
use crate::native::AssignmentWriter;
use crate::{synthesize, Assignment, AssignmentBuffers, SynthError};

mod context;
mod turn;
pub use context::SynthContext;
pub use turn::CompileTurn;

/// What keeps a cached circuit's memory accounted for, e.g. a memory-budget
/// reservation: taken for the compile allowance before a circuit is
/// compiled, shrunk to the compiled size, dropped when the entry is evicted.
pub trait Admission: Send + Sync {
    /// The entry now needs only `bytes`.
    fn shrink_to(&mut self, bytes: usize) {
        let _ = bytes;
    }
}

impl Admission for () {}

type AdmitFn = dyn Fn(usize) -> Result<Box<dyn Admission>, String> + Send + Sync;

/// How long a circuit whose compiled form was refused memory is synthesized
/// the ordinary way before compiling it is tried again.
const REFUSAL_BACKOFF: Duration = Duration::from_secs(60);

/// Compiled circuits ([`CompiledR1cs`]) by structure key: every proof against
/// the same parameters shares one circuit structure, so the key is the
/// parameters' identity.
///
/// The first synthesis of a key compiles it (one synthesis that also records
/// the matrices); later ones take the compiled path. While one worker
/// compiles a key, others synthesize it the ordinary way, except that a
/// segmented circuit's compile (quick beside an ordinary synthesis) is
/// waited for: by a caller off any thread pool, or by one that took its
/// [`CompileTurn`] before entering the pool ([`take_turn`](Self::take_turn)).
/// A synthesis on a pool thread never blocks on the cache.
///
/// Memory: before compiling, the function given to [`new`](Self::new) admits
/// the context's allowance (e.g. reserves it from a memory budget); the
/// recording stops (and the circuit is synthesized the ordinary way) if it
/// outgrows the allowance; the admission is then shrunk to the compiled
/// size and held until the entry is evicted. When admission says no, least
/// recently used entries are evicted and it is asked again; a circuit that
/// still does not fit is synthesized the ordinary way, and compiling it is
/// tried again a minute later.
///
/// ```
/// use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
/// use kiln_synth::{AssignmentBuffers, CircuitCache};
///
/// let cache = CircuitCache::unbounded();
/// let circuit = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 8, 1);
/// for seed in 0..3 {
///     let ctx = cache.context("dense-2^8", usize::MAX);
///     let asg = ctx.synthesize(|| Ok(circuit.with_witness(seed)), AssignmentBuffers::heap()).unwrap();
///     asg.check_satisfied().unwrap();
/// }
/// let stats = cache.stats();
/// assert_eq!((stats.compiles, stats.compiled_syntheses), (1, 2));
/// ```
pub struct CircuitCache {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    /// Notified whenever a compile ends (ready, refused or abandoned).
    compiled: Condvar,
    admit: Box<AdmitFn>,
    tick: AtomicU64,
    compiles: AtomicU64,
    compiled_syntheses: AtomicU64,
    segmented_syntheses: AtomicU64,
    rows_beside_witness: AtomicU64,
    rows_after_witness: AtomicU64,
    plain_syntheses: AtomicU64,
    structure_changes: AtomicU64,
    refusals: AtomicU64,
    native_syntheses: AtomicU64,
    native_rejections: AtomicU64,
    deferred_products: AtomicU64,
    compiled_witness_ns: AtomicU64,
    native_witness_ns: AtomicU64,
}

type Entries = Mutex<HashMap<String, Entry>>;

enum Entry {
    /// Being compiled by one worker; `admitted` once its memory is
    /// reserved (from then on it waits for nothing but its own work);
    /// `whole` once the compile is known to record the whole circuit on
    /// one thread (not worth waiting for: see [`CircuitCache::take_turn`]).
    Compiling { admitted: bool, whole: bool },
    /// `probation`: recorded by a synthesis whose proof has not verified
    /// yet (see [`Recording`]); used only by syntheses that waited for the
    /// compile, until then.
    Ready { r1cs: Arc<CompiledR1cs>, _admission: Box<dyn Admission>, last_used: u64, probation: Option<u64> },
    /// Not compiled: `until` None means never (too large, or a shape that changes).
    Refused { reason: String, until: Option<Instant> },
}

/// Counters of a [`CircuitCache`].
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CircuitCacheStats {
    /// Compiled circuits held.
    pub circuits: usize,
    /// Their memory.
    pub bytes: usize,
    /// Compilations (each was also a synthesis).
    pub compiles: u64,
    /// Syntheses that took the compiled path.
    pub compiled_syntheses: u64,
    /// Of those, syntheses of a [`SegmentedCircuit`] whose segments' witnesses ran in parallel.
    pub segmented_syntheses: u64,
    /// Rows of a/b/c that compiled syntheses evaluated while their witness
    /// was still running ...
    pub rows_beside_witness: u64,
    /// ... and after it had ended.
    pub rows_after_witness: u64,
    /// Syntheses done the ordinary way (not compiled yet, compiling elsewhere, refused).
    pub plain_syntheses: u64,
    /// Instances whose shape differed from the recorded one (a circuit bug).
    pub structure_changes: u64,
    /// Compiled circuits that were refused memory or were too large.
    pub refusals: u64,
    /// Syntheses whose witness a native generator wrote and the recorded
    /// R1CS accepted (see [`SynthContext::synthesize_native`]).
    pub native_syntheses: u64,
    /// Native witnesses rejected by the check (or failed): each partition
    /// was synthesized again on the gadget path.
    pub native_rejections: u64,
    /// Compiled syntheses whose a/b/c were left to the prover
    /// ([`SynthContext::with_deferred_products`]).
    pub deferred_products: u64,
    /// Wall time of the witness code of compiled gadget-path syntheses, in ns ...
    pub compiled_witness_ns: u64,
    /// ... and of native generators whose witness was accepted.
    pub native_witness_ns: u64,
}

enum Lookup {
    Ready(Arc<CompiledR1cs>),
    Compile,
    Plain,
    /// Another worker is compiling it, with its memory admitted.
    Compiling,
    /// Recorded, on probation (its generation): only a synthesis that
    /// would have waited for the compile uses it.
    Probation(Arc<CompiledR1cs>, u64),
    /// This synthesis compiles it, its memory admitted beforehand (a
    /// [`CompileTurn`]).
    Admitted(Box<dyn Admission>),
}

impl CircuitCache {
    /// A cache whose entries are admitted by `admit(bytes)`: `Ok` holds the
    /// memory until the entry is evicted, `Err` says why not.
    pub fn new(admit: impl Fn(usize) -> Result<Box<dyn Admission>, String> + Send + Sync + 'static) -> Self {
        CircuitCache {
            entries: Arc::new(Mutex::new(HashMap::new())),
            compiled: Condvar::new(),
            admit: Box::new(admit),
            tick: AtomicU64::new(0),
            compiles: AtomicU64::new(0),
            compiled_syntheses: AtomicU64::new(0),
            segmented_syntheses: AtomicU64::new(0),
            rows_beside_witness: AtomicU64::new(0),
            rows_after_witness: AtomicU64::new(0),
            plain_syntheses: AtomicU64::new(0),
            structure_changes: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            native_syntheses: AtomicU64::new(0),
            native_rejections: AtomicU64::new(0),
            deferred_products: AtomicU64::new(0),
            compiled_witness_ns: AtomicU64::new(0),
            native_witness_ns: AtomicU64::new(0),
        }
    }

    /// A cache that admits every circuit (tests, tools, one-shot provers).
    pub fn unbounded() -> Self {
        Self::new(|_| Ok(Box::new(())))
    }

    /// The handle to synthesize circuits of structure `key` through;
    /// compiling one may use up to `allowance` bytes.
    pub fn context<'a>(&'a self, key: &'a str, allowance: usize) -> SynthContext<'a> {
        SynthContext::cached(self, key, allowance)
    }

    /// Drop `key`'s compiled circuit (and any refusal), releasing its memory.
    pub fn evict(&self, key: &str) -> bool {
        let mut entries = self.lock();
        matches!(entries.get(key), Some(Entry::Ready { .. } | Entry::Refused { .. })) && entries.remove(key).is_some()
    }

    /// Drop the least recently used compiled circuit (other than `except`'s)
    /// that nothing outside the cache holds; returns its size, or `None` if
    /// there was none to drop. A circuit a synthesis or a deferred
    /// assignment still holds is skipped: dropping it would free no memory
    /// until they finish, yet its admission's bytes would go back to the
    /// budget at once (a 32 GiB SnapDeals proof went 0.9 GiB over its
    /// budget that way) and later syntheses would take the gadget path.
    pub fn evict_least_recent(&self, except: Option<&str>) -> Option<usize> {
        let mut entries = self.lock();
        let victim = Self::least_recent(&entries, except)?;
        let entry = entries.remove(&victim);
        drop(entries);
        match entry {
            Some(Entry::Ready { r1cs, .. }) => Some(r1cs.heap_bytes()),
            _ => None,
        }
    }

    fn least_recent(entries: &HashMap<String, Entry>, except: Option<&str>) -> Option<String> {
        entries
            .iter()
            .filter_map(|(k, e)| match e {
                Entry::Ready { r1cs, last_used, .. } if Some(k.as_str()) != except && Arc::strong_count(r1cs) == 1 => {
                    Some((*last_used, k))
                }
                _ => None,
            })
            .min()
            .map(|(_, k)| k.clone())
    }

    /// Counters and current size.
    pub fn stats(&self) -> CircuitCacheStats {
        let entries = self.lock();
        let ready = entries.values().filter_map(|e| match e {
            Entry::Ready { r1cs, .. } => Some(r1cs.heap_bytes()),
            _ => None,
        });
        let (circuits, bytes) = ready.fold((0, 0), |(n, b), x| (n + 1, b + x));
        CircuitCacheStats {
            circuits,
            bytes,
            compiles: self.compiles.load(Ordering::Relaxed),
            compiled_syntheses: self.compiled_syntheses.load(Ordering::Relaxed),
            segmented_syntheses: self.segmented_syntheses.load(Ordering::Relaxed),
            rows_beside_witness: self.rows_beside_witness.load(Ordering::Relaxed),
            rows_after_witness: self.rows_after_witness.load(Ordering::Relaxed),
            plain_syntheses: self.plain_syntheses.load(Ordering::Relaxed),
            structure_changes: self.structure_changes.load(Ordering::Relaxed),
            refusals: self.refusals.load(Ordering::Relaxed),
            native_syntheses: self.native_syntheses.load(Ordering::Relaxed),
            native_rejections: self.native_rejections.load(Ordering::Relaxed),
            deferred_products: self.deferred_products.load(Ordering::Relaxed),
            compiled_witness_ns: self.compiled_witness_ns.load(Ordering::Relaxed),
            native_witness_ns: self.native_witness_ns.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        lock_entries(&self.entries)
    }

    /// `key`'s compiled circuit, if there is one and it is not on
    /// probation (marked as used).
    pub fn compiled(&self, key: &str) -> Option<Arc<CompiledR1cs>> {
        match self.lock().get_mut(key) {
            Some(Entry::Ready { r1cs, last_used, probation: None, .. }) => {
                *last_used = self.tick.fetch_add(1, Ordering::Relaxed);
                Some(r1cs.clone())
            }
            _ => None,
        }
    }

    fn lookup(&self, key: &str) -> Lookup {
        let mut entries = self.lock();
        match entries.get_mut(key) {
            Some(Entry::Ready { r1cs, last_used, probation: None, .. }) => {
                *last_used = self.tick.fetch_add(1, Ordering::Relaxed);
                Lookup::Ready(r1cs.clone())
            }
            Some(Entry::Ready { r1cs, probation: Some(generation), .. }) => Lookup::Probation(r1cs.clone(), *generation),
            Some(Entry::Compiling { admitted: true, .. }) => Lookup::Compiling,
            Some(Entry::Compiling { admitted: false, .. }) => Lookup::Plain,
            Some(Entry::Refused { until: Some(t), .. }) if Instant::now() >= *t => {
                entries.insert(key.to_string(), Entry::Compiling { admitted: false, whole: false });
                Lookup::Compile
            }
            Some(Entry::Refused { .. }) => Lookup::Plain,
            None => {
                entries.insert(key.to_string(), Entry::Compiling { admitted: false, whole: false });
                Lookup::Compile
            }
        }
    }

    /// `key`'s compile has its memory: from now on it waits for nothing
    /// but its own work, so others may wait for it.
    fn mark_admitted(&self, key: &str) {
        if let Some(Entry::Compiling { admitted, .. }) = self.lock().get_mut(key) {
            *admitted = true;
        }
    }

    /// `key`'s compile records the whole circuit on one thread: those
    /// waiting for their turn stop waiting and synthesize the ordinary way.
    fn mark_whole(&self, key: &str) {
        if let Some(Entry::Compiling { whole, .. }) = self.lock().get_mut(key) {
            *whole = true;
        }
        self.compiled.notify_all();
    }

    /// Blocks while another worker compiles `key` with its memory admitted.
    fn wait_compiled(&self, key: &str) {
        self.wait_while(key, |e| matches!(e, Some(Entry::Compiling { admitted: true, .. })));
    }

    /// Blocks while `key`'s entry is `still` so (woken by every change).
    fn wait_while(&self, key: &str, still: impl Fn(Option<&Entry>) -> bool) {
        let mut entries = self.lock();
        while still(entries.get(key)) {
            entries = self.compiled.wait(entries).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Admit `bytes` for compiling `key`, evicting least recently used
    /// entries while admission says no.
    fn admit_for(&self, key: &str, bytes: usize) -> Result<Box<dyn Admission>, String> {
        loop {
            let refused = match (self.admit)(bytes) {
                Ok(a) => return Ok(a),
                Err(e) => e,
            };
            let mut entries = self.lock();
            let Some(victim) = Self::least_recent(&entries, Some(key)) else { return Err(refused) };
            tracing::info!(evicted = %victim, for_key = %key, "compiled circuit evicted to make room");
            // Dropped outside the lock: its admission goes back first.
            let evicted = entries.remove(&victim);
            drop(entries);
            drop(evicted);
        }
    }

    /// Keeps `r1cs` under `key`; on probation (returning its [`Recording`])
    /// when `probation` asks for it, else trusted at once.
    fn insert_ready(&self, key: &str, r1cs: CompiledR1cs, mut admission: Box<dyn Admission>, probation: bool) -> Option<Recording> {
        let bytes = r1cs.heap_bytes();
        admission.shrink_to(bytes);
        tracing::info!(key, bytes, nnz = r1cs.nnz(), constraints = r1cs.num_constraints(), probation, "circuit compiled");
        let last_used = self.tick.fetch_add(1, Ordering::Relaxed);
        let generation = probation.then_some(last_used);
        self.lock().insert(key.to_string(), Entry::Ready { r1cs: Arc::new(r1cs), _admission: admission, last_used, probation: generation });
        self.compiled.notify_all();
        generation.map(|generation| Recording { entries: Arc::downgrade(&self.entries), key: key.to_string(), generation, done: false })
    }

    fn refuse_for_now(&self, key: &str, reason: String) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(key, %reason, "no memory to compile the circuit; synthesizing it the ordinary way");
        self.lock().insert(key.to_string(), Entry::Refused { reason, until: Some(Instant::now() + REFUSAL_BACKOFF) });
        self.compiled.notify_all();
    }

    fn refuse(&self, key: &str, reason: String) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(key, %reason, "circuit not compiled; synthesizing it the ordinary way");
        self.lock().insert(key.to_string(), Entry::Refused { reason, until: None });
        self.compiled.notify_all();
    }

    /// Drops `key`'s recording on probation `generation` (if it is still
    /// that one): an instance disagreed with it.
    fn drop_on_probation(&self, key: &str, generation: u64, why: &str) {
        let mut entries = self.lock();
        if matches!(entries.get(key), Some(Entry::Ready { probation: Some(g), .. }) if *g == generation) {
            let dropped = entries.remove(key);
            drop(entries);
            drop(dropped);
            tracing::warn!(key, reason = why, "an instance disagreed with the circuit recorded on probation: the recording is dropped");
        }
    }

    /// Whether a worker is compiling `key` now.
    pub fn is_compiling(&self, key: &str) -> bool {
        matches!(self.lock().get(key), Some(Entry::Compiling { .. }))
    }

    /// Why `key` is not compiled, if it was refused.
    pub fn refusal(&self, key: &str) -> Option<String> {
        match self.lock().get(key) {
            Some(Entry::Refused { reason, .. }) => Some(reason.clone()),
            _ => None,
        }
    }
}

impl std::fmt::Debug for CircuitCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitCache").field("stats", &self.stats()).finish()
    }
}

/// Clears a Compiling mark left by a compilation that failed or panicked,
/// so the next synthesis of the key tries again.
struct CompilingMark<'a> {
    cache: &'a CircuitCache,
    key: &'a str,
    armed: bool,
}

impl Drop for CompilingMark<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut entries = self.cache.lock();
            if matches!(entries.get(self.key), Some(Entry::Compiling { .. })) {
                entries.remove(self.key);
            }
            drop(entries);
            self.cache.compiled.notify_all();
        }
    }
}

fn probation_of(lookup: &Lookup) -> Option<u64> {
    match lookup {
        Lookup::Probation(_, generation) => Some(*generation),
        _ => None,
    }
}

fn lock_entries(entries: &Entries) -> MutexGuard<'_, HashMap<String, Entry>> {
    // The map stays consistent across a panic (every update is one insert or remove).
    entries.lock().unwrap_or_else(|p| p.into_inner())
}

/// A circuit structure recorded by one synthesis, on probation: other
/// syntheses of its key keep to the ordinary path until
/// [`confirm`](Self::confirm) says the recording synthesis led to a proof
/// that verified. Dropped unconfirmed (the synthesis failed, its proof did
/// not verify, its job ended), the recorded structure is dropped too and
/// the next synthesis of the key records it again. So a malformed first
/// partition (a payload that builds a circuit of another shape) never
/// becomes the structure every later partition of that key is held to.
///
/// Only a context given a slot ([`SynthContext::with_probation`]) puts a
/// recording on probation; without one it is trusted at once.
pub struct Recording {
    entries: Weak<Entries>,
    key: String,
    generation: u64,
    done: bool,
}

impl Recording {
    /// The recording synthesis proved sound: other syntheses may use it.
    pub fn confirm(mut self) {
        self.done = true;
        if let Some(entries) = self.entries.upgrade() {
            if let Some(Entry::Ready { probation, .. }) = lock_entries(&entries).get_mut(&self.key) {
                if *probation == Some(self.generation) {
                    *probation = None;
                }
            }
        }
    }

    /// The structure key it was recorded under.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let Some(entries) = self.entries.upgrade() else { return };
        let mut map = lock_entries(&entries);
        if matches!(map.get(&self.key), Some(Entry::Ready { probation: Some(g), .. }) if *g == self.generation) {
            let dropped = map.remove(&self.key);
            drop(map);
            drop(dropped);
            tracing::info!(key = %self.key, "compiled circuit dropped: the synthesis that recorded it did not lead to a verified proof");
        }
    }
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recording").field("key", &self.key).field("generation", &self.generation).finish()
    }
}
