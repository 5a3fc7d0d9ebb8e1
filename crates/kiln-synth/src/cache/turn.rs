//! [`CompileTurn`]: a synthesis's place in its key's compile, settled on the
//! caller's own thread before the synthesis enters a thread pool.
//!
//! Why: a synthesis that finds its key being compiled waits for the
//! compiled form (a segmented circuit's compile is quick beside one thread's
//! ordinary synthesis). Waiting on a rayon pool's thread can deadlock that
//! pool: a pool thread that waits for part of the compile's parallel
//! recording runs other queued jobs meanwhile, and a queued synthesis that
//! blocks there until the compile ends sits on top of the compile's own
//! unfinished frame. So the engine's workers take their turn first, outside
//! the pool ([`CircuitCache::take_turn`]): they wait there while the key is
//! compiled, or claim the compile (its memory admitted) and hand the claim
//! to the synthesis ([`SynthContext::with_turn`](super::SynthContext::with_turn)).
//! A synthesis on a pool thread never blocks on the cache: should it still
//! find the key compiling, it synthesizes the ordinary way.

use std::sync::Mutex;

use super::{Admission, CircuitCache, Entry, Lookup};

/// The claim on compiling a key: whoever holds it compiles the key with
/// the memory it admitted. Handed to one synthesis
/// ([`SynthContext::with_turn`](super::SynthContext::with_turn)); dropped
/// unused, the claim is given up and the next synthesis of the key may
/// compile it.
pub struct CompileTurn<'c> {
    cache: &'c CircuitCache,
    key: String,
    admission: Mutex<Option<Box<dyn Admission>>>,
}

impl CompileTurn<'_> {
    /// The admitted memory, once: the synthesis that takes it compiles.
    pub(super) fn take(&self) -> Option<Box<dyn Admission>> {
        self.admission.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The key this turn compiles.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl Drop for CompileTurn<'_> {
    fn drop(&mut self) {
        if self.take().is_some() {
            let mut entries = self.cache.lock();
            if matches!(entries.get(&self.key), Some(Entry::Compiling { .. })) {
                entries.remove(&self.key);
            }
            drop(entries);
            self.cache.compiled.notify_all();
        }
    }
}

impl std::fmt::Debug for CompileTurn<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileTurn").field("key", &self.key).finish()
    }
}

impl CircuitCache {
    /// Settles, on this thread, how the next synthesis of `key` meets the
    /// cache: waits while another synthesis compiles `key` (unless that
    /// compile records the whole circuit on one thread, which takes as
    /// long as an ordinary synthesis: then it returns `None` at once and
    /// the synthesis goes the ordinary way), then returns
    /// the claim to compile it when it is not compiled yet and its
    /// `allowance` is admitted (`None`: it is compiled, refused, or the
    /// allowance was refused, and the synthesis looks it up as usual).
    /// Call it outside any thread pool the synthesis runs in, and pass the
    /// turn to that synthesis's context (see the module doc for why).
    ///
    /// ```
    /// use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
    /// use kiln_synth::{AssignmentBuffers, CircuitCache};
    ///
    /// let cache = CircuitCache::unbounded();
    /// let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    /// let circuit = SyntheticCircuit::filling_domain(WorkloadKind::Dense, 8, 1);
    /// for seed in 0..2 {
    ///     let turn = cache.take_turn("dense-2^8", usize::MAX);
    ///     assert_eq!(turn.is_some(), seed == 0, "the first synthesis compiles");
    ///     let ctx = cache.context("dense-2^8", usize::MAX).with_turn(turn.as_ref());
    ///     let asg = pool.install(|| ctx.synthesize(|| Ok(circuit.with_witness(seed)), AssignmentBuffers::heap())).unwrap();
    ///     asg.check_satisfied().unwrap();
    /// }
    /// assert_eq!((cache.stats().compiles, cache.stats().compiled_syntheses), (1, 1));
    /// ```
    pub fn take_turn(&self, key: &str, allowance: usize) -> Option<CompileTurn<'_>> {
        loop {
            match self.lookup(key) {
                Lookup::Compile => break,
                Lookup::Compiling | Lookup::Plain if self.compiling_worth_waiting(key) => self.wait_while_compiling(key),
                _ => return None,
            }
        }
        // Claimed (the entry is Compiling, not yet admitted): admit its memory.
        match self.admit_for(key, allowance) {
            Ok(admission) => {
                self.mark_admitted(key);
                Some(CompileTurn { cache: self, key: key.to_string(), admission: Mutex::new(Some(admission)) })
            }
            Err(e) => {
                self.refuse_for_now(key, format!("compile allowance of {allowance} bytes refused: {e}"));
                None
            }
        }
    }

    fn compiling_worth_waiting(&self, key: &str) -> bool {
        matches!(self.lock().get(key), Some(Entry::Compiling { whole: false, .. }))
    }

    /// Blocks while `key` is being compiled in a way worth waiting for
    /// (its memory admitted or not).
    fn wait_while_compiling(&self, key: &str) {
        self.wait_while(key, |e| matches!(e, Some(Entry::Compiling { whole: false, .. })));
    }
}
