//! Which prover backends the engine gets: `auto` (every GPU that opens with
//! kiln's kernels, else the CPU), `cpu`, or `gpu` (an error without one).

use std::sync::Arc;

use anyhow::{bail, Result};
use kiln_groth16::{CpuBackend, GpuBackend, GpuContext, ProverBackend};

/// The chosen backends: one engine worker per entry of `workers`.
pub struct Backends {
    pub workers: Vec<Arc<dyn ProverBackend>>,
    /// The GPUs behind the GPU workers (for GetStatus), one per device.
    pub gpus: Vec<Arc<GpuContext>>,
    /// A line for the log saying what was chosen and why.
    pub why: String,
}

/// How parameters are placed on each GPU.
#[derive(Clone, Copy, Debug)]
pub struct GpuPlacement {
    /// Cap on the VRAM resident parameters take (`None`: what is free).
    pub srs_vram_bytes: Option<u64>,
    /// Chunk size of streamed parameter sections.
    pub stream_chunk_bytes: usize,
}

/// Opens the backends `choice` asks for, on the GPUs `devices` lists (every
/// visible GPU when `None`).
pub fn choose(choice: &str, workers_per_gpu: usize, devices: Option<&[usize]>, placement: GpuPlacement) -> Result<Backends> {
    let cpu = |why: String| Backends { workers: vec![Arc::new(CpuBackend) as Arc<dyn ProverBackend>], gpus: Vec::new(), why };
    match choice {
        "cpu" => Ok(cpu("cpu (asked for)".into())),
        "auto" | "gpu" => {
            // Opening every GPU fails quietly without libcuda or without
            // kernels in this build; both mean "no GPU" here. GPUs named in
            // the configuration must open.
            let gpu_workers = match devices {
                None => GpuBackend::all(workers_per_gpu),
                Some(list) => GpuBackend::on_devices(list, workers_per_gpu)
                    .map_err(|e| anyhow::anyhow!("gpu_devices {list:?}: {e}"))?,
            };
            if gpu_workers.is_empty() {
                if choice == "gpu" {
                    bail!("backend gpu: no usable GPU (no CUDA driver, no device, or a build without kernels)");
                }
                return Ok(cpu("cpu (no usable GPU: no CUDA driver, no device, or a build without kernels)".into()));
            }
            let mut gpus: Vec<Arc<GpuContext>> = Vec::new();
            for w in &gpu_workers {
                if !gpus.iter().any(|g| Arc::ptr_eq(g, w.context())) {
                    gpus.push(w.context().clone());
                }
            }
            for g in &gpus {
                g.set_srs_vram_limit(placement.srs_vram_bytes);
                g.set_stream_chunk_bytes(placement.stream_chunk_bytes);
            }
            let ordinals: Vec<usize> = gpus.iter().map(|g| g.device().info().ordinal).collect();
            let why = format!("gpu (GPUs {ordinals:?}, {} workers each)", workers_per_gpu.max(1));
            let workers = gpu_workers.into_iter().map(|w| Arc::new(w) as Arc<dyn ProverBackend>).collect();
            Ok(Backends { workers, gpus, why })
        }
        other => bail!("unknown backend {other:?} (expected auto, cpu or gpu)"),
    }
}
