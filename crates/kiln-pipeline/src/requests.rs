//! Memory for what requests hold, apart from proving memory: a share of the
//! budget (`request_memory_bytes`) that messages being received, decoded
//! payloads of queued and running jobs, and the records and answers of
//! ended ones are reserved from. Nothing ever waits for it: a request that
//! does not fit is refused, after the oldest ended jobs are forgotten to
//! make room. Proving never waits on a client, and a client never takes
//! memory from proving.

use kiln_memory::{MemoryBudget, MemoryClass, MemoryReservation};

use crate::config::EngineConfig;
use crate::engine::Shared;

/// Default share of the budget for requests, its cap, and its floor
/// (for small budgets; never more than an eighth of the budget).
const DEFAULT_SHARE: u64 = 64;
const DEFAULT_CAP: u64 = 2 << 30;
const DEFAULT_FLOOR: u64 = 256 << 10;

/// The request memory and the limits on requests.
pub(crate) struct Requests {
    pub(crate) budget: MemoryBudget,
    pub(crate) max_queued_jobs: usize,
}

impl Requests {
    /// Splits a budget of `total` bytes: (bytes left for proving, requests).
    pub(crate) fn split(total: u64, config: &EngineConfig) -> Result<(u64, Requests), String> {
        let bytes = config.request_memory_bytes.unwrap_or_else(|| (total / DEFAULT_SHARE).clamp(DEFAULT_FLOOR.min(total / 8), DEFAULT_CAP));
        if bytes >= total {
            return Err(format!("request_memory_bytes ({bytes}) must be less than the memory budget ({total})"));
        }
        Ok((total - bytes, Requests { budget: MemoryBudget::new(bytes), max_queued_jobs: config.max_queued_jobs }))
    }
}

/// Reserves `bytes` of request memory now, forgetting the oldest ended jobs
/// while it does not fit; the error says what is held.
pub(crate) fn reserve(shared: &Shared, bytes: u64) -> Result<MemoryReservation, String> {
    let budget = &shared.requests.budget;
    loop {
        match budget.try_reserve(bytes, MemoryClass::Other) {
            Ok(r) => return Ok(r),
            Err(e) => {
                if !shared.forget_oldest_ended() {
                    let snap = budget.snapshot();
                    return Err(format!(
                        "the request needs {bytes} bytes of request memory; {} of {} are held by requests being received and jobs \
                         queued or running (request_memory_bytes): {e}",
                        snap.reserved, snap.total
                    ));
                }
            }
        }
    }
}
