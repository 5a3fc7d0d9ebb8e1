//! Device residency: a backend that keeps parameters in device memory shows
//! them in status (JSON and Prometheus), and evicting the parameters drops
//! them from the device too. The backend here is the CPU one with a
//! pretend device, so this runs without a GPU; the GPU backend implements
//! the same two trait methods over its resident-SRS table.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use kiln_groth16::{CpuBackend, DeviceResidency, ParamsFile, PendingMsms, ProveError, ProverBackend};
use kiln_synth::Assignment;
use kiln_pipeline::{Engine, JobOutcome, JobRequest, JobSource, Priority};
use parking_lot::Mutex;

const MIB: u64 = 1 << 20;

/// Proves on the CPU and pretends to keep every parameter set it used on
/// "gpu7", part of it streamed from the host (it "did not fit").
#[derive(Default)]
struct PretendDevice {
    resident: Mutex<HashSet<u64>>,
    evicted: Mutex<Vec<u64>>,
}

impl ProverBackend for PretendDevice {
    fn name(&self) -> String {
        "pretend-gpu".into()
    }
    fn start(&self, params: &Arc<ParamsFile>, asg: Assignment) -> Result<Box<dyn PendingMsms>, ProveError> {
        self.resident.lock().insert(params.id());
        CpuBackend.start(params, asg)
    }
    fn host_scratch_ratio(&self) -> f64 {
        CpuBackend.host_scratch_ratio()
    }
    fn device_resident(&self) -> Vec<DeviceResidency> {
        self.resident.lock().iter().map(|&params_id| DeviceResidency { device: "gpu7".into(), params_id, bytes: 1, streamed_bytes: 2 }).collect()
    }
    fn evict_device(&self, params_id: u64) -> u64 {
        self.evicted.lock().push(params_id);
        u64::from(self.resident.lock().remove(&params_id))
    }
}

#[test]
fn device_resident_parameters_show_in_status_and_are_evicted_from_the_device() {
    ensure_params(10);
    let backend = Arc::new(PretendDevice::default());
    let engine = Engine::start(config(256 * MIB), vec![backend.clone()]).unwrap();
    let job = synthetic(10, 2, 3);
    let spec = job.srs();
    engine.submit(JobRequest::new("r", Priority::Normal, job)).unwrap();
    assert!(matches!(engine.wait_blocking("r", Some(Duration::from_secs(120))), JobOutcome::Completed { .. }));

    let entry = engine.status().srs.into_iter().find(|s| s.id == spec.id).unwrap();
    assert_eq!(entry.device_resident, vec!["gpu7".to_string()]);
    assert_eq!(entry.device_streamed, vec!["gpu7".to_string()]);
    let metrics = engine.metrics_text();
    assert!(metrics.contains(&format!("kiln_srs_device_streamed{{id=\"{}\",device=\"gpu7\"}} 1", spec.id)), "{metrics}");
    assert!(metrics.contains(&format!("kiln_srs_device_resident{{id=\"{}\",device=\"gpu7\"}} 1", spec.id)), "{metrics}");
    let json = serde_json::to_value(engine.status()).unwrap();
    assert!(json.to_string().contains("\"device_resident\":[\"gpu7\"]"), "{json}");

    let params_id = *backend.resident.lock().iter().next().unwrap();
    engine.evict_srs(&spec.id).unwrap();
    assert_eq!(*backend.evicted.lock(), vec![params_id], "evicting the parameters evicts them from the device");
    let entry = engine.status().srs.into_iter().find(|s| s.id == spec.id).unwrap();
    assert!(entry.device_resident.is_empty());
}

#[test]
fn parameters_placed_for_an_engine_leave_the_device_when_it_shuts_down() {
    // Backends may be shared by engines started one after another; a
    // device placement the first engine's budget paid for must not stay
    // behind, unaccounted, for the next.
    ensure_params(10);
    let backend = Arc::new(PretendDevice::default());
    let engine = Engine::start(config(256 * MIB), vec![backend.clone()]).unwrap();
    engine.submit(JobRequest::new("r", Priority::Normal, synthetic(10, 1, 3))).unwrap();
    assert!(matches!(engine.wait_blocking("r", Some(Duration::from_secs(120))), JobOutcome::Completed { .. }));
    let params_id = *backend.resident.lock().iter().next().unwrap();
    assert!(backend.evicted.lock().is_empty(), "nothing is evicted while the engine runs");
    engine.shutdown_blocking(Duration::from_secs(10));
    assert_eq!(*backend.evicted.lock(), vec![params_id]);
    assert!(backend.resident.lock().is_empty());
}
