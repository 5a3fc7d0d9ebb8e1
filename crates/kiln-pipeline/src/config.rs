//! [`EngineConfig`]: every knob of the engine, with defaults, deserializable
//! from the daemon's TOML (`[engine]` table; any field may be left out).

use serde::{Deserialize, Serialize};

use crate::products::DeviceProducts;

/// How the engine is sized. `EngineConfig::default()` runs on any host.
///
/// ```
/// let cfg: kiln_pipeline::EngineConfig = serde_json::from_str(
///     r#"{ "synthesis_workers": 3, "memory_budget_bytes": 1073741824 }"#,
/// ).unwrap();
/// assert_eq!(cfg.synthesis_workers, 3);
/// assert_eq!(cfg.gpu_queue_depth, kiln_pipeline::EngineConfig::default().gpu_queue_depth);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineConfig {
    /// Threads that synthesize partitions; each holds at most one partition
    /// (its permit) from memory grant until the GPU queue accepts it.
    /// Default: three quarters of the cores, at least 1, at most 32. A GPU
    /// proves faster than one core synthesizes, so it takes many workers to
    /// keep it busy (H200, 16 cores, dense 2^22 stream: 8 workers kept the
    /// GPU 83 % busy, 12 kept it 100 %); memory stays bounded by the budget,
    /// which every worker reserves from before it synthesizes.
    pub synthesis_workers: usize,
    /// Extra synthesis workers that take only `Critical` partitions, so a
    /// critical job never waits for a worker busy with a large partition.
    /// (Ordinary workers take critical partitions too when they are free;
    /// a critical partition runs in the critical lane whoever takes it.)
    /// Default 1.
    pub critical_lane_workers: usize,
    /// Bytes of the memory budget kept for critical partitions: bulk
    /// reservations never take them, so a critical partition that needs
    /// no more (buffers, scratch and, unless already loaded, its
    /// parameters) never waits for memory bulk jobs hold. Bulk jobs must
    /// fit in the budget less this. Default: 1 GiB (a 32 GiB WinningPoSt
    /// partition and its parameters on a GPU host), at most an eighth of
    /// the budget.
    pub critical_reserve_bytes: Option<u64>,
    /// Threads of the critical lane's own rayon pool, which runs critical
    /// partitions' synthesis and CPU prover work; 0 runs them in the bulk
    /// pool. Default: the cores (critical work is short and, with
    /// `bulk_nice`, takes the cores ahead of bulk threads).
    pub critical_threads: usize,
    /// Threads of the bulk rayon pool, which runs bulk partitions'
    /// synthesis and CPU prover work. Default: the cores.
    pub bulk_threads: usize,
    /// Nice steps (0..=19) the bulk pool's threads run below the process,
    /// so the kernel schedules critical threads first (Linux; ignored
    /// elsewhere). Default 10.
    pub bulk_nice: i32,
    /// Prover workers per device that take only critical partitions, on
    /// the device's highest-priority streams (a backend that has no such
    /// worker gets none, and its ordinary workers take critical partitions
    /// first). Default 1.
    pub critical_prover_workers: usize,
    /// Synthesized partitions the GPU queue holds before synthesis workers
    /// block (0 = hand-off only), and as many critical ones again (a
    /// critical partition never waits for room behind bulk ones). Default 1.
    pub gpu_queue_depth: usize,
    /// Times a partition is synthesized and proved again after the prover
    /// failed on it in a way a faulty device could cause (a backend error
    /// or panic, a proof that did not verify); after that its job fails.
    /// Synthesis errors are never retried. Default 1.
    pub partition_retries: u32,
    /// The prover watchdog's floor, in seconds: a finalizer waits at
    /// least this long for a partition's prover work (and a worker this x
    /// the factor for a device's `start` of it) before it gives up on that
    /// device (a hang: the device is quarantined and the partition
    /// retried on another). The limit is `max(this, prover_watchdog_factor
    /// x the median of the device's recent proofs of the same parameters)`,
    /// and this x the factor before there is one. 0 turns the watchdog off
    /// (a hung device then holds its partition, and shutdown, forever).
    /// Default 60.
    pub prover_watchdog_secs: f64,
    /// How many times its usual time a partition may take on a prover
    /// before the watchdog gives up on it (at least 1). Default 10.
    pub prover_watchdog_factor: f64,
    /// Prover faults in a row (errors, panics, proofs that did not verify)
    /// after which a device is quarantined: its workers take no more work
    /// and its partitions go to the other devices. A sticky fault (the
    /// device is lost) or a hang quarantines it at once. 0: only those do.
    /// Default 3.
    pub quarantine_after_faults: u32,
    /// Seconds after which a device quarantined for faults in a row is
    /// tried again (on probation: one more fault quarantines it again, for
    /// twice as long, up to 8x; a verified proof clears it), while other
    /// devices prove. A sticky fault or a hang stays quarantined until a
    /// restart, and so does a device once no prover is left. 0: never.
    /// Default 600.
    pub quarantine_probation_secs: f64,
    /// Threads that assemble and verify bulk proofs off the GPU workers
    /// (one more always takes only critical ones). Default 2.
    pub finalizer_threads: usize,
    /// The host memory budget; `None` sizes it from the host (RAM or cgroup
    /// limit) minus `memory_margin_bytes`.
    pub memory_budget_bytes: Option<u64>,
    /// Kept free for everything the budget does not count, when the budget is
    /// sized from the host. Default 4 GiB.
    pub memory_margin_bytes: u64,
    /// Cap on the buffer pool (a/b/c/aux buffers); `None` = the whole budget
    /// (the pool is inside the budget either way).
    pub pinned_pool_bytes: Option<u64>,
    /// Page-lock pool buffers when a CUDA driver is present. Off: ordinary
    /// page-aligned memory (CPU-only hosts, tests).
    pub pin_host_buffers: bool,
    /// Host memory a backend allocates while it starts a proof, as a
    /// multiple of the partition's a/b/c + aux bytes; reserved with the
    /// partition and given back when the backend returns. The CPU backend
    /// copies a/b/c into its own vectors (1.0); a GPU backend that reads the
    /// pool buffers directly needs about 0. Default: unset, meaning the
    /// largest ratio the engine's backends report (`ProverBackend::host_scratch_ratio`).
    pub backend_scratch_ratio: Option<f64>,
    /// Compile circuits: the first partition against a parameter set records
    /// its constraints as sparse matrices; later ones compute only their
    /// witness and get a/b/c from the matrices, in parallel (2-3x less
    /// synthesis time on the built-in workloads). Default on.
    pub compile_circuits: bool,
    /// Use proof kinds' native witness generators (computed directly,
    /// without the circuit's gadget code) once a circuit is compiled. Every
    /// native witness is checked against the compiled R1CS (a*b = c on
    /// every row) and a partition whose witness fails is redone on the
    /// gadget path. Needs `compile_circuits`. Default on; off is the
    /// escape hatch and the comparison.
    pub native_witness: bool,
    /// Where a compiled circuit's a/b/c = A.w, B.w, C.w are computed.
    /// `auto` (default): on the GPU, from the circuit's matrices kept in
    /// VRAM beside its parameters, whenever every prover backend can hold
    /// them there; then synthesis computes only the witness, a partition's
    /// pool buffer holds only aux, only the witness crosses PCIe, and the
    /// GPU checks a*b = c on every row (a rejected partition is redone on
    /// the gadget path with a/b/c on the host). Else (no GPU, no room, a
    /// circuit not compiled yet) on the host during synthesis, beside the
    /// witness. `always` leaves them to any GPU backend even without room
    /// for the matrices (it then evaluates them on the host and uploads
    /// them), `never` keeps them on the host: for measurement.
    pub device_products: DeviceProducts,
    /// Cap on the memory compiled circuits hold (least recently used ones
    /// are evicted past it; they come out of the budget too). `None` = a
    /// quarter of the budget.
    pub compiled_circuits_bytes: Option<u64>,
    /// Per-partition bookkeeping beyond its buffers (densities, inputs,
    /// proof state) reserved on top of what the shape implies. Default 1 MiB.
    pub partition_overhead_bytes: u64,
    /// How long finished jobs are remembered for `wait` and resubmission
    /// (while the request memory has room: the oldest are forgotten first
    /// when a new request needs it). Default 600 s.
    pub finished_job_retention_secs: u64,
    /// The part of the memory budget kept for what requests hold: messages
    /// being received, the decoded payloads of queued and running jobs, the
    /// records and answers of finished ones. A request that does not fit is
    /// refused (the daemon answers RESOURCE_EXHAUSTED). `None`: 1/64 of the
    /// budget, at most 2 GiB, at least 256 KiB (or an eighth of a budget
    /// smaller than 2 MiB). The rest of the budget is for proving.
    pub request_memory_bytes: Option<u64>,
    /// Most jobs queued or running at once; a submission past it is refused
    /// (RESOURCE_EXHAUSTED) and nothing else changes; Critical jobs are not
    /// held to it. Default 1000.
    pub max_queued_jobs: usize,
    /// At most one buffer-counter summary per this many milliseconds in the
    /// logs (every transition is also logged at `trace`). Default 1000.
    pub counter_log_interval_ms: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
        EngineConfig {
            synthesis_workers: (cores * 3 / 4).clamp(1, 32),
            critical_lane_workers: 1,
            critical_reserve_bytes: None,
            critical_threads: cores,
            bulk_threads: cores,
            bulk_nice: 10,
            critical_prover_workers: 1,
            gpu_queue_depth: 1,
            partition_retries: 1,
            prover_watchdog_secs: 60.0,
            prover_watchdog_factor: 10.0,
            quarantine_after_faults: 3,
            quarantine_probation_secs: 600.0,
            finalizer_threads: 2,
            memory_budget_bytes: None,
            memory_margin_bytes: 4 << 30,
            pinned_pool_bytes: None,
            pin_host_buffers: true,
            backend_scratch_ratio: None,
            compile_circuits: true,
            native_witness: true,
            device_products: DeviceProducts::Auto,
            compiled_circuits_bytes: None,
            partition_overhead_bytes: 1 << 20,
            finished_job_retention_secs: 600,
            request_memory_bytes: None,
            max_queued_jobs: 1000,
            counter_log_interval_ms: 1000,
        }
    }
}

impl EngineConfig {
    /// Checks the values make sense together.
    pub fn validate(&self) -> Result<(), String> {
        if self.synthesis_workers == 0 {
            return Err("synthesis_workers must be at least 1".into());
        }
        if self.finalizer_threads == 0 {
            return Err("finalizer_threads must be at least 1".into());
        }
        if self.bulk_threads == 0 {
            return Err("bulk_threads must be at least 1".into());
        }
        if !(0..=19).contains(&self.bulk_nice) {
            return Err(format!("bulk_nice must be 0..=19, not {}", self.bulk_nice));
        }
        if let (Some(reserve), Some(budget)) = (self.critical_reserve_bytes, self.memory_budget_bytes) {
            if reserve >= budget {
                return Err(format!("critical_reserve_bytes ({reserve}) must be less than memory_budget_bytes ({budget})"));
            }
        }
        if let Some(r) = self.backend_scratch_ratio.filter(|r| !(r.is_finite() && *r >= 0.0)) {
            return Err(format!("backend_scratch_ratio must be a non-negative number, not {r}"));
        }
        if !(self.prover_watchdog_secs.is_finite() && self.prover_watchdog_secs >= 0.0) {
            return Err(format!("prover_watchdog_secs must be 0 (off) or a positive number of seconds, not {}", self.prover_watchdog_secs));
        }
        if !(self.quarantine_probation_secs.is_finite() && self.quarantine_probation_secs >= 0.0) {
            return Err(format!("quarantine_probation_secs must be a number of seconds, not {}", self.quarantine_probation_secs));
        }
        if !(self.prover_watchdog_factor.is_finite() && self.prover_watchdog_factor >= 1.0) {
            return Err(format!("prover_watchdog_factor must be a number of at least 1, not {}", self.prover_watchdog_factor));
        }
        if self.memory_budget_bytes == Some(0) {
            return Err("memory_budget_bytes must be more than 0".into());
        }
        if self.max_queued_jobs == 0 {
            return Err("max_queued_jobs must be at least 1".into());
        }
        if self.request_memory_bytes == Some(0) {
            return Err("request_memory_bytes must be more than 0".into());
        }
        Ok(())
    }
}
