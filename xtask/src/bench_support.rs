//! What the two peer-comparison drivers (`bench-groth16`, `bench-filecoin`)
//! share: their medians and ratios, and their `--out` files. Included in each
//! by `#[path]` (xtask has no library target); nothing here touches a GPU.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};

/// The median of `v` (the lower middle for an even count); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(|a, b| a.total_cmp(b));
    Some(s[(s.len() - 1) / 2])
}

/// kiln's time over the peer's: below 1 kiln is faster (issue 5's target is <= 0.5).
pub fn ratio(kiln_ms: Option<f64>, peer_ms: Option<f64>) -> Option<f64> {
    match (kiln_ms, peer_ms) {
        (Some(k), Some(p)) if p > 0.0 && k.is_finite() && p.is_finite() => Some(k / p),
        _ => None,
    }
}

/// The outputs under `--out`: `proofs.jsonl` (one line per proof, as they
/// come), and `table.md` + `results.json`, rewritten after every row so an
/// interrupted run keeps what it measured.
pub struct Outputs {
    dir: Option<PathBuf>,
    proofs: Option<File>,
}

impl Outputs {
    pub fn new(dir: Option<PathBuf>) -> Result<Self> {
        let proofs = match &dir {
            Some(d) => {
                std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
                Some(File::create(d.join("proofs.jsonl"))?)
            }
            None => None,
        };
        Ok(Outputs { dir, proofs })
    }

    pub fn line(&mut self, v: serde_json::Value) {
        if let Some(f) = &mut self.proofs {
            let _ = writeln!(f, "{v}");
        }
    }

    pub fn write(&self, table_md: &str, results: &serde_json::Value) -> Result<()> {
        if let Some(d) = &self.dir {
            std::fs::write(d.join("table.md"), table_md)?;
            std::fs::write(d.join("results.json"), serde_json::to_string_pretty(results)?)?;
        }
        Ok(())
    }
}
