//! The engine's cache of compiled circuits (kiln-synth's [`CircuitCache`]),
//! with its memory drawn from the engine's budget.
//!
//! Every partition of a job, and every job against the same parameters,
//! shares one circuit structure, so the cache key is the parameters' id: the
//! first partition compiles the circuit, the rest only compute their
//! witnesses and multiply the recorded matrices by them (see
//! `kiln_synth::CompiledR1cs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kiln_memory::{MemoryBudget, MemoryClass, MemoryReservation};
use kiln_synth::{Admission, CircuitCache, CircuitShape};

use crate::config::EngineConfig;

/// Compile allowance per constraint: what the recording may grow to before
/// the circuit is judged too large and synthesized the ordinary way. The
/// synthetic circuits need 57 (Filecoin-like) to 190 (dense, one random
/// coefficient per term) bytes a constraint; the allowance is reserved
/// from the budget while compiling and shrunk to the real size after.
const ALLOWANCE_PER_CONSTRAINT: u64 = 256;

/// A compiled circuit's share of the budget, plus its part of the cache cap.
struct BudgetAdmission {
    reservation: MemoryReservation,
    cached: Arc<AtomicU64>,
}

impl Admission for BudgetAdmission {
    fn shrink_to(&mut self, bytes: usize) {
        let held = self.reservation.bytes();
        let give_back = held.saturating_sub(bytes as u64);
        self.reservation.shrink(give_back);
        self.cached.fetch_sub(give_back, Ordering::AcqRel);
    }
}

impl Drop for BudgetAdmission {
    fn drop(&mut self) {
        self.cached.fetch_sub(self.reservation.bytes(), Ordering::AcqRel);
    }
}

/// The engine's circuit cache: admission reserves from `budget` and keeps
/// the cache under `config.compiled_circuits_bytes` (default: a quarter of
/// the budget).
pub(crate) fn circuit_cache(config: &EngineConfig, budget: &MemoryBudget) -> CircuitCache {
    let cap = cache_cap(config, budget);
    let budget = budget.clone();
    let cached = Arc::new(AtomicU64::new(0));
    CircuitCache::new(move |bytes| {
        let bytes = bytes as u64;
        let now = cached.fetch_add(bytes, Ordering::AcqRel) + bytes;
        if now > cap {
            cached.fetch_sub(bytes, Ordering::AcqRel);
            return Err(format!("compiled circuits would hold {now} bytes, over their cap of {cap}"));
        }
        match budget.try_reserve(bytes, MemoryClass::CompiledCircuits) {
            Ok(reservation) => Ok(Box::new(BudgetAdmission { reservation, cached: cached.clone() }) as Box<dyn Admission>),
            Err(e) => {
                cached.fetch_sub(bytes, Ordering::AcqRel);
                Err(e.to_string())
            }
        }
    })
}

/// While reservations wait for memory the budget does not have, drop the
/// least recently used compiled circuit, the waiter's own included (a job
/// that fits the budget must never wait on its own cache): it is rebuilt
/// by the next synthesis of its circuit. Not when the compiled circuits'
/// bytes would not let the waiters in anyway and partitions in flight will
/// give memory back: dropping the circuit then gains nothing and sends
/// every later synthesis of it down the gadget path (a 32 GiB PoRep
/// partition: about ten times the compiled witness time).
pub(crate) fn relieve(circuits: &CircuitCache, budget: &MemoryBudget, partitions_in_flight: bool) {
    let snap = budget.snapshot();
    let compiled = circuits.stats().bytes as u64;
    if partitions_in_flight && snap.available + compiled < snap.waiting_bytes {
        return;
    }
    if snap.waiting_bytes > snap.available {
        if let Some(bytes) = circuits.evict_least_recent(None) {
            tracing::info!(bytes, "compiled circuit dropped for waiting reservations");
        }
    }
}

/// How much compiling a partition of `shape` may use.
/// The most memory compiled circuits may hold: `compiled_circuits_bytes`,
/// else a quarter of the budget.
fn cache_cap(config: &EngineConfig, budget: &MemoryBudget) -> u64 {
    config.compiled_circuits_bytes.unwrap_or(budget.total() / 4)
}

pub(crate) fn compile_allowance(config: &EngineConfig, budget: &MemoryBudget, shape: &CircuitShape) -> usize {
    let cap = cache_cap(config, budget);
    (shape.num_constraints as u64).saturating_mul(ALLOWANCE_PER_CONSTRAINT).min(cap) as usize
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Waker};

    use kiln_synth::workload::{SyntheticCircuit, WorkloadKind};
    use kiln_synth::AssignmentBuffers;

    use super::*;

    /// A compiled circuit is dropped for a waiting reservation when that
    /// lets the waiter in or nothing else will free memory; not when it
    /// would not help and partitions in flight will.
    #[test]
    fn a_waiter_drops_the_compiled_circuit_only_when_that_helps() {
        let budget = MemoryBudget::new(1 << 30);
        let config = EngineConfig { compiled_circuits_bytes: Some(1 << 29), ..EngineConfig::default() };
        let cache = circuit_cache(&config, &budget);
        let circuit = SyntheticCircuit::filling_domain(WorkloadKind::FilecoinLike, 10, 1);
        let turn = cache.take_turn("k", 1 << 24);
        let ctx = cache.context("k", 1 << 24).with_turn(turn.as_ref());
        ctx.synthesize(|| Ok(circuit.with_witness(1)), AssignmentBuffers::heap()).unwrap();
        drop(turn);
        assert_eq!(cache.stats().circuits, 1);
        let held = budget.snapshot().reserved;
        let rest = budget.try_reserve(budget.total() - held, MemoryClass::Other).unwrap();
        let poll = |w: &mut kiln_memory::Reserve| Pin::new(w).poll(&mut Context::from_waker(Waker::noop())).is_ready();
        // A waiter larger than the compiled circuit: dropping it would not help.
        let mut large = budget.reserve(held * 2, MemoryClass::Synthesis);
        assert!(!poll(&mut large));
        relieve(&cache, &budget, true);
        assert_eq!(cache.stats().circuits, 1, "kept: partitions in flight will serve the waiter");
        drop(large);
        // One the compiled circuit's bytes would serve.
        let mut small = budget.reserve(held / 2, MemoryClass::Synthesis);
        assert!(!poll(&mut small));
        relieve(&cache, &budget, true);
        assert_eq!(cache.stats().circuits, 0, "dropped: that lets the waiter in");
        assert!(poll(&mut small));
        drop(rest);
    }
}
