//! [`CircuitCache`]: compiled circuits shared by every synthesis worker, and
//! [`SynthContext`], the handle a job's synthesis goes through.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use bellpepper_core::Circuit;
use blstrs::Scalar;

use crate::compiled::{CompiledR1cs, DeferTo, Retry, SegmentedCircuit, Whole};
use crate::native::AssignmentWriter;
use crate::{synthesize, Assignment, AssignmentBuffers, SynthError};

mod turn;
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
        SynthContext { cache: Some((self, key, allowance)), native: true, origin: None, deferred: None, probation: None, turn: None }
    }

    /// Drop `key`'s compiled circuit (and any refusal), releasing its memory.
    pub fn evict(&self, key: &str) -> bool {
        let mut entries = self.lock();
        matches!(entries.get(key), Some(Entry::Ready { .. } | Entry::Refused { .. })) && entries.remove(key).is_some()
    }

    /// Drop the least recently used compiled circuit (other than `except`'s);
    /// returns its size, or `None` if there was none to drop.
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
                Entry::Ready { last_used, .. } if Some(k.as_str()) != except => Some((*last_used, k)),
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

/// How one synthesis is done: through a [`CircuitCache`] under a structure
/// key, or the ordinary way ([`SynthContext::plain`]); whether native
/// witness generators may be used; which partition it is, for the logs.
#[derive(Clone, Copy)]
pub struct SynthContext<'a> {
    cache: Option<(&'a CircuitCache, &'a str, usize)>,
    native: bool,
    origin: Option<(&'a str, usize)>,
    deferred: DeferTo<'a>,
    probation: Option<&'a OnceLock<Recording>>,
    turn: Option<&'a CompileTurn<'a>>,
}

impl SynthContext<'static> {
    /// Ordinary synthesis, nothing cached.
    pub fn plain() -> Self {
        SynthContext { cache: None, native: true, origin: None, deferred: None, probation: None, turn: None }
    }
}

impl<'a> SynthContext<'a> {
    /// Whether [`synthesize_native`](Self::synthesize_native) may use its
    /// native generator (on by default); off, it always takes the gadget path.
    pub fn with_native(mut self, on: bool) -> Self {
        self.native = on;
        self
    }

    /// Names the work for the logs: a proof kind and partition index.
    pub fn for_partition(mut self, kind: &'a str, partition: usize) -> Self {
        self.origin = Some((kind, partition));
        self
    }

    /// Synthesize against `r1cs` (the key's compiled circuit, taken from
    /// [`CircuitCache::compiled`] and held by the caller) and leave a/b/c
    /// to the prover: the witness alone is computed, into the aux buffer,
    /// and the assignment's products are [`crate::Products::Deferred`], so
    /// the a/b/c buffers may be empty. For a prover that evaluates the
    /// products itself (a GPU backend with the matrices in VRAM); it also
    /// checks every row, so native witnesses are not checked here.
    ///
    /// A synthesis that cannot take the compiled path (the instance's shape
    /// changed) needs a/b/c buffers and fails with
    /// [`SynthError::BufferTooSmall`] when they are empty: the caller then
    /// synthesizes again with buffers for a/b/c. Ignored by a plain context.
    pub fn with_deferred_products(mut self, r1cs: &'a Arc<CompiledR1cs>) -> Self {
        self.deferred = Some(r1cs);
        self
    }

    /// This synthesis compiles its key with the memory `turn` admitted
    /// ([`CircuitCache::take_turn`], taken outside the thread pool the
    /// synthesis runs in); `None` changes nothing.
    pub fn with_turn(mut self, turn: Option<&'a CompileTurn<'a>>) -> Self {
        self.turn = turn;
        self
    }

    /// A structure this synthesis records goes on probation, its
    /// [`Recording`] into `slot`: the caller confirms it once the proof
    /// made from this synthesis verifies, or drops it.
    pub fn with_probation(mut self, slot: &'a OnceLock<Recording>) -> Self {
        self.probation = Some(slot);
        self
    }
}

impl SynthContext<'_> {
    /// Synthesize the circuit `make` builds into `buffers`. `make` may be
    /// called twice: when an instance's shape differs from the recorded one,
    /// it is synthesized again the ordinary way.
    pub fn synthesize<C, F>(&self, make: F, buffers: AssignmentBuffers) -> Result<Assignment, SynthError>
    where
        C: Circuit<Scalar>,
        F: Fn() -> Result<C, SynthError>,
    {
        self.run(
            &make,
            |cache, r1cs, buffers, defer| {
                Ok(r1cs.try_synthesize_overlapped(make()?, buffers, defer)?.map(|(asg, beside, witness)| {
                    cache.compiled_witness_ns.fetch_add(witness.as_nanos() as u64, Ordering::Relaxed);
                    if asg.products_on_host() {
                        cache.rows_beside_witness.fetch_add(beside as u64, Ordering::Relaxed);
                        cache.rows_after_witness.fetch_add((asg.num_constraints - beside) as u64, Ordering::Relaxed);
                    }
                    asg
                }))
            },
            |_, buffers, allowance| CompiledR1cs::try_compile(make()?, buffers, allowance),
            false,
            buffers,
        )
    }

    /// [`synthesize`](Self::synthesize) for a [`SegmentedCircuit`]: once
    /// its structure is compiled, its segments' witnesses are computed in
    /// parallel. The first synthesis (the recording) and the ordinary path
    /// run it whole, on one thread.
    pub fn synthesize_segmented<S: SegmentedCircuit>(&self, circuit: &S, buffers: AssignmentBuffers) -> Result<Assignment, SynthError> {
        self.run(
            &|| Ok(Whole(circuit)),
            |cache, r1cs, buffers, defer| {
                r1cs.try_synthesize_segmented(circuit, buffers, &cache.segmented_syntheses, &cache.compiled_witness_ns, defer)
            },
            // Recorded segment by segment on every core (its own witness
            // counts as the compile, not as a later compiled synthesis).
            |_, buffers, allowance| {
                CompiledR1cs::try_compile_segmented(circuit, buffers, allowance, &AtomicU64::new(0), &AtomicU64::new(0))
            },
            true,
            buffers,
        )
    }

    /// Synthesize with a native witness generator, checked, the gadget path
    /// behind it.
    ///
    /// `native` writes the circuit's public inputs (after ONE) and its aux
    /// assignment, in exactly the order the gadget path allocates them,
    /// through the [`AssignmentWriter`] it is given (sized to the recorded
    /// circuit). a/b/c are then evaluated from the circuit's recorded
    /// matrices and every row is checked (a*b = c), so a native witness
    /// that is wrong anywhere never reaches the prover.
    ///
    /// `gadget` synthesizes the same circuit the ordinary way through the
    /// context it is given (e.g. `|ctx, b| ctx.synthesize(build, b)` or
    /// `ctx.synthesize_segmented`). It runs instead of `native` when no
    /// R1CS is recorded for this key yet (the first synthesis of a shape
    /// records it, and native witnesses are checked against that record),
    /// for a plain context, when native generation is switched off
    /// ([`with_native`](Self::with_native)), and after a native witness
    /// was rejected: then the partition is redone on the gadget path in the
    /// same buffers, a warning names the partition and the first bad row,
    /// and the cache counts it ([`CircuitCacheStats::native_rejections`]).
    pub fn synthesize_native<N, G>(&self, native: N, gadget: G, buffers: AssignmentBuffers) -> Result<Assignment, SynthError>
    where
        N: FnOnce(&mut AssignmentWriter<'_>) -> Result<(), String>,
        G: FnOnce(SynthContext<'_>, AssignmentBuffers) -> Result<Assignment, SynthError>,
    {
        let Some((cache, key, _)) = self.cache.filter(|_| self.native) else {
            return gadget(*self, buffers);
        };
        let Some(r1cs) = self.deferred.cloned().or_else(|| cache.compiled(key)) else {
            return gadget(*self, buffers);
        };
        match r1cs.try_native(native, buffers, self.deferred)? {
            Ok((asg, witness)) => {
                cache.native_witness_ns.fetch_add(witness.as_nanos() as u64, Ordering::Relaxed);
                cache.native_syntheses.fetch_add(1, Ordering::Relaxed);
                if !asg.products_on_host() {
                    cache.deferred_products.fetch_add(1, Ordering::Relaxed);
                }
                Ok(asg)
            }
            Err((rejection, buffers)) => {
                cache.native_rejections.fetch_add(1, Ordering::Relaxed);
                let (kind, partition) = self.origin.map_or((key, None), |(k, p)| (k, Some(p)));
                tracing::warn!(
                    kind,
                    partition,
                    first_bad_row = rejection.first_bad_row,
                    reason = %rejection.reason,
                    "native witness rejected; redoing the partition on the gadget path"
                );
                gadget(*self, buffers)
            }
        }
    }

    /// The cache's decision: `make`'s circuit the ordinary or the recording
    /// way, or `compiled` against a recorded structure.
    /// `wait`: while another worker compiles the key (its memory admitted),
    /// wait for the compiled form instead of synthesizing the ordinary way
    /// (worth it where the compile is quick beside an ordinary synthesis,
    /// e.g. a segmented circuit, compiled and then synthesized on every core);
    /// never on a rayon pool's thread (see `turn`'s module doc).
    fn run<C, F, P, K>(&self, make: &F, compiled: P, compile: K, wait: bool, buffers: AssignmentBuffers) -> Result<Assignment, SynthError>
    where
        C: Circuit<Scalar>,
        F: Fn() -> Result<C, SynthError>,
        P: FnOnce(&CircuitCache, &Arc<CompiledR1cs>, AssignmentBuffers, DeferTo<'_>) -> Result<Result<Assignment, Retry>, SynthError>,
        K: FnOnce(&CircuitCache, AssignmentBuffers, usize) -> Result<Result<(Assignment, CompiledR1cs), Retry>, SynthError>,
    {
        let Some((cache, key, allowance)) = self.cache else {
            return synthesize(make()?, buffers);
        };
        let plain = |buffers| {
            cache.plain_syntheses.fetch_add(1, Ordering::Relaxed);
            synthesize(make()?, buffers)
        };
        let admitted = self.turn.filter(|t| t.key() == key).and_then(CompileTurn::take);
        let lookup = match (self.deferred, admitted) {
            (Some(r1cs), _) => Lookup::Ready(r1cs.clone()),
            (None, Some(admission)) => Lookup::Admitted(admission),
            (None, None) => loop {
                match cache.lookup(key) {
                    // Never on a pool thread: see `turn`'s module doc.
                    Lookup::Compiling if wait && rayon::current_thread_index().is_none() => cache.wait_compiled(key),
                    other => break other,
                }
            },
        };
        match lookup {
            Lookup::Plain | Lookup::Compiling => plain(buffers),
            Lookup::Probation(..) if !wait => plain(buffers),
            Lookup::Ready(ref r1cs) | Lookup::Probation(ref r1cs, _) => match compiled(cache, r1cs, buffers, self.deferred)? {
                Ok(a) => {
                    cache.compiled_syntheses.fetch_add(1, Ordering::Relaxed);
                    if !a.products_on_host() {
                        cache.deferred_products.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(a)
                }
                Err(Retry::Changed(e, buffers)) => {
                    cache.structure_changes.fetch_add(1, Ordering::Relaxed);
                    match probation_of(&lookup) {
                        // The recording is as suspect as this instance: drop
                        // it (the next synthesis records the key again)
                        // rather than refuse the key for good.
                        Some(generation) => cache.drop_on_probation(key, generation, &e.to_string()),
                        None => cache.refuse(key, e.to_string()),
                    }
                    plain(buffers)
                }
                Err(Retry::TooLarge(l, buffers)) => {
                    cache.refuse(key, format!("too large to compile: {l}"));
                    plain(buffers)
                }
            },
            Lookup::Admitted(admission) => self.compile_admitted(CompilingMark { cache, key, armed: true }, admission, wait, compile, plain, buffers),
            Lookup::Compile => {
                let mut mark = CompilingMark { cache, key, armed: true };
                let admission = match cache.admit_for(key, allowance) {
                    Ok(a) => a,
                    Err(e) => {
                        mark.armed = false;
                        cache.refuse_for_now(key, format!("compile allowance of {allowance} bytes refused: {e}"));
                        return plain(buffers);
                    }
                };
                cache.mark_admitted(key);
                self.compile_admitted(mark, admission, wait, compile, plain, buffers)
            }
        }
    }

    /// Compiles the key (`mark`ed as compiling, its memory admitted) in
    /// this synthesis and keeps the compiled form; `plain` when it is too
    /// large or its shape changes. Without `wait` (a whole-circuit compile)
    /// those waiting for their turn are told not to wait for it.
    #[allow(clippy::too_many_arguments)]
    fn compile_admitted<K, P>(&self, mut mark: CompilingMark<'_>, admission: Box<dyn Admission>, wait: bool, compile: K, plain: P, buffers: AssignmentBuffers) -> Result<Assignment, SynthError>
    where
        K: FnOnce(&CircuitCache, AssignmentBuffers, usize) -> Result<Result<(Assignment, CompiledR1cs), Retry>, SynthError>,
        P: FnOnce(AssignmentBuffers) -> Result<Assignment, SynthError>,
    {
        let (cache, key) = (mark.cache, mark.key);
        if !wait {
            cache.mark_whole(key);
        }
        let allowance = self.cache.map_or(usize::MAX, |(_, _, allowance)| allowance);
        match compile(cache, buffers, allowance)? {
            Ok((asg, r1cs)) => {
                cache.compiles.fetch_add(1, Ordering::Relaxed);
                mark.armed = false;
                if let Some(recording) = cache.insert_ready(key, r1cs, admission, self.probation.is_some()) {
                    let slot = self.probation.expect("probation asked for");
                    // A slot serves one synthesis; a second recording into it is not kept.
                    drop(slot.set(recording));
                }
                Ok(asg)
            }
            Err(Retry::TooLarge(l, buffers)) => {
                mark.armed = false;
                cache.refuse(key, format!("too large to compile: {l}"));
                plain(buffers)
            }
            Err(Retry::Changed(e, buffers)) => {
                mark.armed = false;
                cache.refuse(key, e.to_string());
                plain(buffers)
            }
        }
    }
}
