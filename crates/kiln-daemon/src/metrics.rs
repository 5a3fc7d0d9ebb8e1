//! What `/metrics` and GetMetrics serve (Prometheus text format 0.0.4,
//! through prometheus-client): the engine's families (collected from its
//! status at each scrape), per-kind job latency histograms and outcome
//! counters (kept here, fed by one watcher per submitted job), GPU
//! utilization, memory, temperature and power from NVML, and build info.
//! docs/CONFIG.md lists every family.

use std::fmt;
use std::sync::Arc;

use kiln_gpu::nvml::{GpuSample, GpuSampler};
use kiln_pipeline::{Engine, JobOutcome};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The `Content-Type` of what [`Metrics::render`] returns.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Bucket bounds of the job latency histograms, in seconds: from a 2 KiB
/// WindowPoSt on a GPU (milliseconds) to a 32 GiB PoRep on the CPU or on a
/// loaded host (tens of minutes; Curio's ProveTimeout defaults to 30).
const LATENCY_BUCKETS: [f64; 18] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0];

type KindLabel = Vec<(&'static str, String)>;
type Histograms = Family<KindLabel, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// Per-kind job figures the daemon keeps (the engine keeps totals only).
#[derive(Debug)]
pub struct JobMetrics {
    duration: Histograms,
    queue_wait: Histograms,
    srs_load: Histograms,
    synthesis: Histograms,
    gpu: Histograms,
    outcomes: Family<Vec<(&'static str, String)>, Counter>,
    refused: Family<Vec<(&'static str, String)>, Counter>,
}

impl JobMetrics {
    fn new() -> Self {
        let h = || Histograms::new_with_constructor(latency_histogram as fn() -> Histogram);
        JobMetrics {
            duration: h(),
            queue_wait: h(),
            srs_load: h(),
            synthesis: h(),
            gpu: h(),
            outcomes: Family::default(),
            refused: Family::default(),
        }
    }

    /// Counts how a job of `kind` (the engine's kind label) ended; a
    /// completed job's phase times go into the histograms.
    pub fn ended(&self, kind: &str, outcome: &JobOutcome) {
        let label = vec![("kind", kind.to_string())];
        let name = match outcome {
            JobOutcome::Completed { timings, .. } => {
                self.duration.get_or_create(&label).observe(timings.total.as_secs_f64());
                self.queue_wait.get_or_create(&label).observe(timings.queue_wait.as_secs_f64());
                self.srs_load.get_or_create(&label).observe(timings.srs_load.as_secs_f64());
                self.synthesis.get_or_create(&label).observe(timings.synthesis.as_secs_f64());
                self.gpu.get_or_create(&label).observe(timings.gpu_compute.as_secs_f64());
                "completed"
            }
            JobOutcome::Failed(_) => "failed",
            JobOutcome::Cancelled => "cancelled",
            // The watcher waits without a timeout; a job forgotten before
            // its watcher looked is the only way here.
            JobOutcome::Timeout | JobOutcome::Unknown => "unknown",
        };
        self.outcomes.get_or_create(&vec![("kind", kind.to_string()), ("outcome", name.to_string())]).inc();
    }

    /// Counts a request refused at submission (`kind`: the wire's
    /// ProofKind name, `code`: the gRPC status code).
    pub fn refused(&self, kind: &str, code: tonic::Code) {
        self.refused.get_or_create(&vec![("kind", kind.to_string()), ("code", format!("{code:?}"))]).inc();
    }

    /// Records job `job_id`'s end once it comes (a task on the current
    /// tokio runtime; it ends with the job).
    pub fn watch(self: &Arc<Self>, engine: Engine, job_id: String, kind: String) {
        let me = self.clone();
        tokio::spawn(async move {
            let outcome = engine.wait(&job_id, None).await;
            me.ended(&kind, &outcome);
        });
    }
}

/// Everything `/metrics` shows.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    jobs: Arc<JobMetrics>,
}

impl Metrics {
    /// The registry of a daemon running `engine`; GPU figures come from
    /// NVML when it loads and sees a device (none otherwise).
    pub fn new(engine: Engine) -> Self {
        Self::with_gpus(engine, GpuSampler::open())
    }

    fn with_gpus(engine: Engine, gpus: Option<GpuSampler>) -> Self {
        let mut registry = Registry::default();
        let jobs = Arc::new(JobMetrics::new());
        let histograms: [(&str, &str, &Histograms); 5] = [
            ("kiln_job_duration_seconds", "Completed jobs: submission to answer, by kind", &jobs.duration),
            (
                "kiln_job_queue_wait_seconds",
                "Completed jobs: submission until the first partition started synthesis, by kind",
                &jobs.queue_wait,
            ),
            (
                "kiln_job_srs_load_seconds",
                "Completed jobs: time spent waiting for parameters to be loaded (or generated), by kind",
                &jobs.srs_load,
            ),
            ("kiln_job_synthesis_seconds", "Completed jobs: synthesis time summed over partitions, by kind", &jobs.synthesis),
            (
                "kiln_job_gpu_seconds",
                "Completed jobs: prover time (H polynomial, MSMs, assembly, verification; on the GPU backend the GPU's) summed over partitions, by kind",
                &jobs.gpu,
            ),
        ];
        for (name, help, family) in histograms {
            registry.register(name, help, family.clone());
        }
        registry.register("kiln_job_outcomes", "Jobs ended, by kind and outcome (completed, failed, cancelled)", jobs.outcomes.clone());
        registry.register(
            "kiln_requests_refused",
            "Requests refused at submission (never became jobs), by wire proof kind and gRPC code",
            jobs.refused.clone(),
        );
        let kernels = if kiln_gpu::HAS_KERNELS { "built_in" } else { "none" };
        registry.register(
            "kiln_build",
            "The kiln build: version and whether CUDA kernels are built in",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION").to_string()), ("kernels", kernels.to_string())]),
        );
        registry.register_collector(Box::new(EngineCollector(engine)));
        registry.register_collector(Box::new(GpuCollector(gpus)));
        Metrics { registry, jobs }
    }

    /// The per-kind job figures, to feed.
    pub fn jobs(&self) -> &Arc<JobMetrics> {
        &self.jobs
    }

    /// The Prometheus text exposition (format 0.0.4) of everything.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

/// The engine's families, from its status at scrape time.
struct EngineCollector(Engine);

impl fmt::Debug for EngineCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EngineCollector")
    }
}

impl Collector for EngineCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        self.0.status().encode_metrics(&mut encoder)
    }
}

/// NVML's figures for every device, read at scrape time.
struct GpuCollector(Option<GpuSampler>);

impl fmt::Debug for GpuCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuCollector({:?})", self.0)
    }
}

impl Collector for GpuCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        match &self.0 {
            Some(nvml) => encode_gpu_samples(&nvml.sample(), &mut encoder),
            None => Ok(()),
        }
    }
}

/// The GPU families (nothing at all without samples: a host without a GPU
/// shows no GPU metrics rather than zeros).
fn encode_gpu_samples(samples: &[GpuSample], encoder: &mut DescriptorEncoder) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    let label = |s: &GpuSample| vec![("gpu", s.index.to_string())];
    fn family<T: prometheus_client::encoding::EncodeGaugeValue>(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        samples: impl Iterator<Item = (Vec<(&'static str, String)>, T)>,
    ) -> fmt::Result {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, value) in samples {
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
    family(
        encoder,
        "kiln_gpu_utilization_ratio",
        "Share of NVML's last sample period (1/6 s to 1 s) in which a kernel ran on the GPU, any process's (0..1)",
        samples.iter().map(|s| (label(s), f64::from(s.busy_percent) / 100.0)),
    )?;
    family(encoder, "kiln_gpu_memory_used_bytes", "Device memory in use, every process's and the driver's", samples.iter().map(|s| (label(s), s.mem_used)))?;
    family(encoder, "kiln_gpu_memory_total_bytes", "Device memory", samples.iter().map(|s| (label(s), s.mem_total)))?;
    family(
        encoder,
        "kiln_gpu_temperature_celsius",
        "GPU core temperature",
        samples.iter().filter_map(|s| s.temperature_celsius.map(|t| (label(s), u64::from(t)))),
    )?;
    family(
        encoder,
        "kiln_gpu_power_watts",
        "Board power draw",
        samples.iter().filter_map(|s| s.power_milliwatts.map(|p| (label(s), f64::from(p) / 1000.0))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed(Vec<GpuSample>);

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            encode_gpu_samples(&self.0, &mut encoder)
        }
    }

    fn render(c: Fixed) -> String {
        let mut r = Registry::default();
        r.register_collector(Box::new(c));
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &r).unwrap();
        out
    }

    #[test]
    fn gpu_figures_in_base_units() {
        let h200 = GpuSample { index: 0, busy_percent: 87, mem_used: 5 << 30, mem_total: 140 << 30, temperature_celsius: Some(54), power_milliwatts: Some(412_345) };
        let unread = GpuSample { index: 1, busy_percent: 0, mem_used: 1, mem_total: 2, temperature_celsius: None, power_milliwatts: None };
        let text = render(Fixed(vec![h200, unread]));
        for line in [
            "kiln_gpu_utilization_ratio{gpu=\"0\"} 0.87",
            "kiln_gpu_utilization_ratio{gpu=\"1\"} 0.0",
            "kiln_gpu_memory_used_bytes{gpu=\"0\"} 5368709120",
            "kiln_gpu_memory_total_bytes{gpu=\"0\"} 150323855360",
            "kiln_gpu_temperature_celsius{gpu=\"0\"} 54",
            "kiln_gpu_power_watts{gpu=\"0\"} 412.345",
            "# TYPE kiln_gpu_power_watts gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert!(!text.contains("kiln_gpu_temperature_celsius{gpu=\"1\"}"), "an unreadable sensor is left out, not zero:\n{text}");
        assert_eq!(render(Fixed(Vec::new())), "", "no GPU, no GPU families");
    }

    /// docs/CONFIG.md names every family /metrics can show.
    #[test]
    fn config_md_lists_every_family() {
        let doc = include_str!("../../../docs/CONFIG.md");
        let config = kiln_pipeline::EngineConfig { memory_budget_bytes: Some(64 << 20), pin_host_buffers: false, ..Default::default() };
        let engine = Engine::start(config, Vec::new()).unwrap();
        let sample = GpuSample { index: 0, busy_percent: 1, mem_used: 1, mem_total: 2, temperature_celsius: Some(40), power_milliwatts: Some(1) };
        let text = Metrics::with_gpus(engine, None).render() + &render(Fixed(vec![sample]));
        let families: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
        assert!(families.len() > 40, "{text}");
        let missing: Vec<&str> = families.into_iter().filter(|name| !(doc.contains(&format!("`{name}`")) || doc.contains(&format!("`{name}{{")))).collect();
        assert!(missing.is_empty(), "docs/CONFIG.md does not name {}", missing.join(", "));
    }

    #[test]
    fn job_histograms_and_outcomes_by_kind() {
        let jobs = JobMetrics::new();
        let timings = kiln_pipeline::JobTimings {
            queue_wait: std::time::Duration::from_millis(3),
            srs_load: std::time::Duration::ZERO,
            synthesis: std::time::Duration::from_millis(700),
            gpu_compute: std::time::Duration::from_millis(120),
            total: std::time::Duration::from_millis(830),
        };
        jobs.ended("porep-c2", &JobOutcome::Completed { proof: vec![0; 192], timings });
        jobs.ended("porep-c2", &JobOutcome::Failed("x".into()));
        jobs.ended("winning-post", &JobOutcome::Cancelled);
        jobs.refused("SNAP_DEALS_UPDATE", tonic::Code::InvalidArgument);
        let mut r = Registry::default();
        r.register("kiln_job_duration_seconds", "d", jobs.duration.clone());
        r.register("kiln_job_outcomes", "o", jobs.outcomes.clone());
        r.register("kiln_requests_refused", "r", jobs.refused.clone());
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &r).unwrap();
        for line in [
            "# TYPE kiln_job_duration_seconds histogram",
            "kiln_job_duration_seconds_bucket{kind=\"porep-c2\",le=\"0.5\"} 0",
            "kiln_job_duration_seconds_bucket{kind=\"porep-c2\",le=\"1\"} 1",
            "kiln_job_duration_seconds_count{kind=\"porep-c2\"} 1",
            "kiln_job_outcomes_total{kind=\"porep-c2\",outcome=\"completed\"} 1",
            "kiln_job_outcomes_total{kind=\"porep-c2\",outcome=\"failed\"} 1",
            "kiln_job_outcomes_total{kind=\"winning-post\",outcome=\"cancelled\"} 1",
            "kiln_requests_refused_total{kind=\"SNAP_DEALS_UPDATE\",code=\"InvalidArgument\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }
}
