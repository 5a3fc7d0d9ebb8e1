//! Whether a partition can ever run: admission at submit and again when a
//! partition is sized (its parameters may have been generated meanwhile).

use crate::buffers::PartitionFootprint;
use crate::engine::Shared;
use crate::job::SrsSpec;
use crate::lanes::Lane;

/// Whether a partition of `footprint` in `lane` with parameters of
/// `srs_bytes` can ever run; the message says what does not fit. A bulk
/// partition must fit in the budget less the critical reserve.
pub(crate) fn check_fits(shared: &Shared, lane: Lane, spec: &SrsSpec, srs_bytes: u64, footprint: &PartitionFootprint) -> Result<(), String> {
    let (budget, pool) = match lane {
        Lane::Bulk => (&shared.budget, &shared.pool),
        Lane::Critical => shared.lanes.critical_memory(),
    };
    let capacity = budget.capacity();
    let need = srs_bytes + footprint.total();
    if need > capacity {
        let room = if capacity < budget.total() {
            format!("the memory budget less the critical reserve is {} ({} - {})", mib(capacity), mib(budget.total()), mib(budget.total() - capacity))
        } else {
            format!("the memory budget is {}", mib(capacity))
        };
        return Err(format!(
            "one partition needs {} (a/b/c/aux buffers {}, prover scratch {}, bookkeeping {}) plus {} for parameters {:?}, but {room}",
            mib(need), mib(footprint.buffer_bytes), mib(footprint.scratch_bytes), mib(footprint.overhead_bytes),
            mib(srs_bytes), spec.id
        ));
    }
    if footprint.buffer_bytes > pool.max_bytes() {
        return Err(format!(
            "one partition's a/b/c/aux buffers need {} but the buffer pool is capped at {}",
            mib(footprint.buffer_bytes), mib(pool.max_bytes())
        ));
    }
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}
