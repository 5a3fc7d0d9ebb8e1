//! [`SynthContext`]: how one synthesis is done (through the cache under a
//! structure key, or plainly), and the paths it takes: compiled, native,
//! segmented, or recording a structure for the others.

use std::sync::{Arc, OnceLock};

use bellpepper_core::Circuit;
use blstrs::Scalar;

use super::*;

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

impl<'a> SynthContext<'a> {
    /// Synthesis through `cache` under the structure `key` (see [`CircuitCache::context`]).
    pub(super) fn cached(cache: &'a CircuitCache, key: &'a str, allowance: usize) -> Self {
        SynthContext { cache: Some((cache, key, allowance)), native: true, origin: None, deferred: None, probation: None, turn: None }
    }
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
