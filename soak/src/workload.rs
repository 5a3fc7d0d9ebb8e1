//! The workload file: what to prove, how often, and how the daemon the soak
//! starts is configured.
//!
//! ```toml
//! [load]
//! clients = 2              # closed loop: each client sends its next job when the last one ends
//! # rate_per_min = 30      # or open loop: Poisson arrivals at this mean rate
//! # max_outstanding = 64   # open loop: arrivals beyond this many unanswered jobs are shed (and counted)
//!
//! [daemon]                 # `--set` overrides for a daemon the soak starts (ignored with --connect)
//! "engine.memory_budget_bytes" = "2GiB"
//!
//! [[job]]
//! name = "fc-2^16"         # the label in the report
//! kind = "synthetic"       # KILN_SYNTHETIC
//! circuit = "filecoin-like"
//! log_size = 16
//! partitions = 1
//! priority = "normal"
//! weight = 1               # relative share of jobs
//!
//! [[job]]
//! name = "porep 32GiB"
//! kind = "filecoin"        # the proof kind and its fields come from the payload
//! payload = "in32/porep-c2.json"   # `cargo xtask gen-vanilla`'s file, relative to this file
//! ```
//!
//! A Filecoin job is sent as Curio sends it (the payload's fields are the
//! request's); its partitions are the payload's. Its answer is checked with
//! filecoin-proofs' verifier, which reads the verifying key from
//! `FIL_PROOFS_PARAMETER_CACHE` (with test setups, `KILN_TEST_SETUP_DIR`
//! too: the daemon the soak starts shares the environment).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use kiln_filecoin::payload::Payload;
use kiln_proto::v1::{Priority, ProofKind, SubmitProofRequest};
use kiln_synth::workload::WorkloadKind;
use rand::Rng;
use serde::Deserialize;

/// A parsed and checked workload file.
#[derive(Clone, Debug)]
pub struct Workload {
    pub load: Load,
    /// `key=value` overrides for a daemon the soak starts, in file order of keys (sorted).
    pub daemon_settings: Vec<(String, String)>,
    pub jobs: Vec<JobSpec>,
    total_weight: u32,
}

/// How requests arrive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Load {
    /// `clients` tasks, each with one job outstanding at all times.
    Closed { clients: usize },
    /// Poisson arrivals at `per_sec` on average; at most `max_outstanding`
    /// unanswered jobs (further arrivals are shed and counted).
    Open { per_sec: f64, max_outstanding: usize },
}

/// One entry of the mix. `circuit`, `log_size` and `inputs` describe a
/// synthetic entry; a Filecoin one has `filecoin` instead.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    pub name: String,
    pub circuit: WorkloadKind,
    pub log_size: u32,
    /// Partitions per job (a Filecoin payload's own count).
    pub partitions: u32,
    /// Public inputs per partition (the daemon's default, 4, when 0).
    pub inputs: u32,
    pub priority: Priority,
    pub weight: u32,
    pub filecoin: Option<Arc<FilecoinJob>>,
}

/// A Filecoin entry: the payload every job of it sends.
#[derive(Debug, PartialEq)]
pub struct FilecoinJob {
    pub payload: Payload,
    /// Where it was read from.
    pub path: PathBuf,
    /// The parameters' id (what PreloadSRS takes).
    pub srs_id: String,
}

impl FilecoinJob {
    /// Reads a `gen-vanilla` payload and works out its parameters and
    /// partitions the way the daemon will.
    fn read(path: &Path) -> Result<(Self, u32)> {
        let bytes = std::fs::read(path).with_context(|| format!("reading payload {}", path.display()))?;
        let payload: Payload = serde_json::from_slice(&bytes).with_context(|| format!("payload {}", path.display()))?;
        let job = kiln_filecoin::job_for_payload(&payload).map_err(|e| anyhow!("payload {}: {e}", path.display()))?;
        let partitions = job.num_partitions() as u32;
        Ok((FilecoinJob { srs_id: job.srs().id, payload, path: path.to_path_buf() }, partitions))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    load: LoadFile,
    #[serde(default)]
    daemon: BTreeMap<String, toml::Value>,
    #[serde(rename = "job")]
    jobs: Vec<JobFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadFile {
    clients: Option<usize>,
    rate_per_min: Option<f64>,
    max_outstanding: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobFile {
    name: String,
    kind: String,
    circuit: Option<String>,
    log_size: Option<u32>,
    partitions: Option<u32>,
    inputs: Option<u32>,
    payload: Option<PathBuf>,
    #[serde(default = "default_priority")]
    priority: String,
    #[serde(default = "one")]
    weight: u32,
}

fn default_priority() -> String {
    "normal".into()
}
fn one() -> u32 {
    1
}

impl Workload {
    /// Reads and checks a workload file (payload paths are relative to it).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse_in(&text, dir).with_context(|| format!("workload {}", path.display()))
    }

    /// Parses and checks workload TOML (payload paths relative to the
    /// current directory).
    pub fn parse(text: &str) -> Result<Self> {
        Self::parse_in(text, Path::new("."))
    }

    /// Parses and checks workload TOML, payload paths relative to `dir`.
    pub fn parse_in(text: &str, dir: &Path) -> Result<Self> {
        let f: File = toml::from_str(text)?;
        let load = match (f.load.clients, f.load.rate_per_min) {
            (Some(c), None) if c > 0 => Load::Closed { clients: c },
            (None, Some(r)) if r > 0.0 && r.is_finite() => {
                Load::Open { per_sec: r / 60.0, max_outstanding: f.load.max_outstanding.unwrap_or(64).max(1) }
            }
            (Some(_), Some(_)) => bail!("[load]: give either clients (closed loop) or rate_per_min (open loop), not both"),
            (None, None) => bail!("[load]: give clients (closed loop) or rate_per_min (open loop)"),
            _ => bail!("[load]: clients and rate_per_min must be positive"),
        };
        if f.jobs.is_empty() {
            bail!("no [[job]] entries");
        }
        let mut jobs = Vec::new();
        for j in f.jobs {
            if jobs.iter().any(|o: &JobSpec| o.name == j.name) {
                bail!("job name {:?} is used twice", j.name);
            }
            let (name, weight) = (j.name.clone(), j.weight);
            let priority = parse_priority(&j.priority).with_context(|| format!("job {name:?}"))?;
            let spec = match j.kind.as_str() {
                "synthetic" => {
                    let (log_size, partitions) = (j.log_size.unwrap_or(0), j.partitions.unwrap_or(1));
                    if j.payload.is_some() {
                        bail!("job {name:?}: a synthetic job takes no payload");
                    }
                    if weight == 0 || partitions == 0 || !(2..=28).contains(&log_size) {
                        bail!("job {name:?}: weight and partitions must be >= 1 and log_size in 2..=28");
                    }
                    let circuit = j.circuit.as_deref().unwrap_or("filecoin-like");
                    JobSpec {
                        circuit: circuit.parse().map_err(anyhow::Error::msg).with_context(|| format!("job {name:?}"))?,
                        log_size,
                        partitions,
                        inputs: j.inputs.unwrap_or(0),
                        filecoin: None,
                        name,
                        priority,
                        weight,
                    }
                }
                "filecoin" => {
                    let Some(payload) = &j.payload else { bail!("job {name:?}: a filecoin job needs payload = \"FILE\" (cargo xtask gen-vanilla)") };
                    if j.circuit.is_some() || j.log_size.is_some() || j.partitions.is_some() || j.inputs.is_some() {
                        bail!("job {name:?}: a filecoin job's circuit, log_size, partitions and inputs come from its payload");
                    }
                    if weight == 0 {
                        bail!("job {name:?}: weight must be >= 1");
                    }
                    let (fc, partitions) = FilecoinJob::read(&dir.join(payload)).with_context(|| format!("job {name:?}"))?;
                    JobSpec {
                        circuit: WorkloadKind::FilecoinLike,
                        log_size: 0,
                        partitions,
                        inputs: 0,
                        filecoin: Some(Arc::new(fc)),
                        name,
                        priority,
                        weight,
                    }
                }
                other => bail!("job {name:?}: kind {other:?} is not one the soak can build requests for (\"synthetic\" or \"filecoin\")"),
            };
            jobs.push(spec);
        }
        let mut daemon_settings = Vec::new();
        flatten("", f.daemon, &mut daemon_settings)?;
        let total_weight = jobs.iter().map(|j| j.weight).sum();
        Ok(Self { load, daemon_settings, jobs, total_weight })
    }

    /// Picks a job entry with probability proportional to its weight.
    pub fn pick(&self, rng: &mut impl Rng) -> &JobSpec {
        let mut x = rng.gen_range(0..self.total_weight);
        for j in &self.jobs {
            if x < j.weight {
                return j;
            }
            x -= j.weight;
        }
        unreachable!("x < total_weight, the sum of the weights")
    }
}

/// `[daemon]` as `key=value` pairs: quoted dotted keys
/// (`"engine.synthesis_workers" = 2`) and nested tables (`[daemon.engine]`)
/// both give `engine.synthesis_workers`.
fn flatten(prefix: &str, table: BTreeMap<String, toml::Value>, out: &mut Vec<(String, String)>) -> Result<()> {
    for (k, v) in table {
        let key = if prefix.is_empty() { k } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::String(s) => out.push((key, s)),
            toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => out.push((key, v.to_string())),
            toml::Value::Table(t) => flatten(&key, t.into_iter().collect(), out)?,
            _ => bail!("[daemon] {key}: expected a string, number or boolean"),
        }
    }
    Ok(())
}

fn parse_priority(s: &str) -> Result<Priority> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "low" => Priority::Low,
        "normal" => Priority::Normal,
        "high" => Priority::High,
        "critical" => Priority::Critical,
        _ => bail!("priority {s:?}: expected low, normal, high or critical"),
    })
}

impl JobSpec {
    /// The request for one job of this entry; `seed` picks the witnesses
    /// (partition i gets seed + i), so its proofs can be verified here.
    pub fn request(&self, request_id: String, seed: u64) -> SubmitProofRequest {
        if let Some(fc) = &self.filecoin {
            return SubmitProofRequest { request_id, priority: self.priority as i32, ..fc.payload.clone().into_request() };
        }
        SubmitProofRequest {
            request_id,
            proof_kind: ProofKind::KilnSynthetic as i32,
            priority: self.priority as i32,
            synthetic_log_size: self.log_size,
            synthetic_partitions: self.partitions,
            synthetic_kind: self.circuit.name().to_string(),
            synthetic_inputs: self.inputs,
            synthetic_seed: seed,
            ..Default::default()
        }
    }

    /// The daemon's id for this entry's parameters (what PreloadSRS takes).
    pub fn srs_id(&self) -> String {
        if let Some(fc) = &self.filecoin {
            return fc.srs_id.clone();
        }
        format!("synthetic-{}-2^{}-{}in", self.circuit.name(), self.log_size, self.effective_inputs())
    }

    /// Public inputs per partition as the daemon counts them.
    pub fn effective_inputs(&self) -> usize {
        if self.inputs == 0 {
            4
        } else {
            self.inputs as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const FILE: &str = r#"
        [load]
        clients = 3
        [daemon]
        "engine.memory_budget_bytes" = "2GiB"
        backend = "cpu"
        [daemon.engine]
        synthesis_workers = 2
        [[job]]
        name = "small"
        kind = "synthetic"
        log_size = 10
        weight = 3
        [[job]]
        name = "big"
        kind = "synthetic"
        circuit = "dense"
        log_size = 12
        partitions = 2
        priority = "HIGH"
    "#;

    #[test]
    fn parses_a_closed_loop_mix_with_defaults() {
        let w = Workload::parse(FILE).unwrap();
        assert_eq!(w.load, Load::Closed { clients: 3 });
        assert_eq!(w.daemon_settings, vec![
            ("backend".to_string(), "cpu".to_string()),
            ("engine.synthesis_workers".to_string(), "2".to_string()),
            ("engine.memory_budget_bytes".to_string(), "2GiB".to_string()),
        ]);
        assert_eq!(w.jobs[0].circuit, WorkloadKind::FilecoinLike);
        assert_eq!((w.jobs[0].partitions, w.jobs[0].priority, w.jobs[0].effective_inputs()), (1, Priority::Normal, 4));
        assert_eq!((w.jobs[1].circuit, w.jobs[1].partitions, w.jobs[1].priority), (WorkloadKind::Dense, 2, Priority::High));
        let r = w.jobs[1].request("id".into(), 7);
        assert_eq!((r.synthetic_log_size, r.synthetic_partitions, r.synthetic_seed), (12, 2, 7));
        assert_eq!(r.synthetic_kind, "dense");
        assert_eq!(w.jobs[1].srs_id(), "synthetic-dense-2^12-4in");
    }

    #[test]
    fn open_loop_rate_is_per_second() {
        let w = Workload::parse(&FILE.replace("clients = 3", "rate_per_min = 30")).unwrap();
        assert_eq!(w.load, Load::Open { per_sec: 0.5, max_outstanding: 64 });
    }

    #[test]
    fn picks_follow_the_weights() {
        let w = Workload::parse(FILE).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let small = (0..4000).filter(|_| w.pick(&mut rng).name == "small").count();
        // 3/4 expected; 4000 draws put 3 sigma at about +-80.
        assert!((2900..3100).contains(&small), "{small}");
    }

    #[test]
    fn a_filecoin_job_is_its_payload_sent_as_curio_sends_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        kiln_filecoin::sparse::generate_to_dir(2048, &dir.path().join("in2k"), &mut rng).unwrap();
        let text = r#"
            [load]
            clients = 1
            [[job]]
            name = "porep"
            kind = "filecoin"
            payload = "in2k/porep-c2.json"
            [[job]]
            name = "winning"
            kind = "filecoin"
            payload = "in2k/winning-post.json"
            priority = "critical"
        "#;
        let w = Workload::parse_in(text, dir.path()).unwrap();
        let porep = &w.jobs[0];
        let fc = porep.filecoin.as_ref().expect("a filecoin entry");
        assert_eq!(porep.partitions, 1, "a 2 KiB PoRep proof is one partition");
        assert!(fc.srs_id.starts_with("stacked-proof-of-replication"), "{}", fc.srs_id);
        let r = porep.request("id-1".into(), 9);
        assert_eq!((r.proof_kind, r.priority, r.request_id.as_str()), (ProofKind::PorepSealCommit as i32, Priority::Normal as i32, "id-1"));
        assert_eq!((r.sector_size, r.registered_proof, r.sector_number, r.miner_id), (2048, fc.payload.registered_proof, fc.payload.sector_number, fc.payload.miner_id));
        assert_eq!(r.vanilla_proof, fc.payload.vanilla_proof);
        assert_eq!(r.synthetic_log_size, 0, "no synthetic fields");
        let winning = w.jobs[1].request("id-2".into(), 0);
        assert_eq!((winning.proof_kind, winning.priority), (ProofKind::WinningPost as i32, Priority::Critical as i32));
        assert_eq!((winning.vanilla_proofs.len(), winning.randomness.len()), (w.jobs[1].filecoin.as_ref().unwrap().payload.vanilla_proofs.len(), 32));
        assert!(w.jobs[1].srs_id().starts_with("proof-of-spacetime-fallback"), "{}", w.jobs[1].srs_id());
        // What a payload fixes cannot be given too; a missing file says which.
        let e = format!("{:#}", Workload::parse_in(&text.replace("priority = \"critical\"", "log_size = 10"), dir.path()).unwrap_err());
        assert!(e.contains("come from its payload"), "{e}");
        let e = format!("{:#}", Workload::parse_in(&text.replace("in2k/porep", "in2k/nope"), dir.path()).unwrap_err());
        assert!(e.contains("nope-c2.json"), "{e}");
    }

    #[test]
    fn mistakes_are_errors_that_say_what() {
        let cases = [
            (FILE.replace("clients = 3", "clients = 3\nrate_per_min = 1"), "not both"),
            (FILE.replace("clients = 3", ""), "give clients"),
            (FILE.replace("kind = \"synthetic\"\n        log_size = 10", "kind = \"porep\"\n        log_size = 10"), "\"synthetic\" or \"filecoin\""),
            (FILE.replace("kind = \"synthetic\"\n        log_size = 10", "kind = \"filecoin\"\n        log_size = 10"), "needs payload"),
            (FILE.replace("log_size = 10", "log_size = 10\n        payload = \"x.json\""), "takes no payload"),
            (FILE.replace("\"HIGH\"", "\"urgent\""), "priority"),
            (FILE.replace("name = \"big\"", "name = \"small\""), "used twice"),
            (FILE.replace("weight = 3", "wieght = 3"), "unknown field"),
            (FILE.replace("log_size = 12", "log_size = 40"), "log_size"),
        ];
        for (text, want) in cases {
            let e = format!("{:#}", Workload::parse(&text).unwrap_err());
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
    }
}
