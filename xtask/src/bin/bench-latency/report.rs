//! The latency benchmark's figures and table: pure, unit-tested.

use std::fmt::Write;

use serde::Serialize;

use kiln_soak::stats::Latency;

/// One critical kind's end-to-end times in one mode.
#[derive(Clone, Debug, Serialize)]
pub struct CriticalReport {
    pub kind: String,
    /// On the idle engine.
    pub unloaded: Latency,
    /// While the bulk load keeps every worker busy.
    pub loaded: Latency,
    /// Medians of the engine's own split of a job's time (summed over its
    /// partitions): synthesis, and the prover (H, MSMs, assembly, check).
    pub unloaded_synthesis_ms: f64,
    pub loaded_synthesis_ms: f64,
    pub unloaded_prover_ms: f64,
    pub loaded_prover_ms: f64,
}

impl CriticalReport {
    /// Issue 25's target at test sector sizes: the p99 under a full bulk
    /// load at most 1.5x the unloaded p50 plus 50 ms.
    pub fn target_ms(&self) -> f64 {
        1.5 * self.unloaded.p50_ms + 50.0
    }

    pub fn meets_target(&self) -> bool {
        self.loaded.p99_ms <= self.target_ms()
    }
}

/// One mode's run (one engine configuration).
#[derive(Clone, Debug, Serialize)]
pub struct ModeReport {
    pub mode: String,
    /// The engine settings the mode changes, as given.
    pub settings: String,
    pub critical: Vec<CriticalReport>,
    /// Bulk partitions proved per second with the bulk load alone, and
    /// while critical jobs arrived one after another.
    pub bulk_alone_per_s: f64,
    pub bulk_with_critical_per_s: f64,
    /// Bulk partitions per CPU-second of this process, bulk load alone:
    /// what the isolation costs in CPU, whatever else runs on the host.
    pub bulk_per_cpu_s: f64,
}

/// Bulk throughput the first mode loses against the second, as fractions
/// (0.03 = 3 % fewer), bulk load alone: partitions per second, and
/// partitions per CPU-second of the process.
pub fn bulk_lost(isolated: &ModeReport, shared: &ModeReport) -> Option<(f64, f64)> {
    let lost = |a: f64, b: f64| (b > 0.0).then(|| 1.0 - a / b);
    Some((lost(isolated.bulk_alone_per_s, shared.bulk_alone_per_s)?, lost(isolated.bulk_per_cpu_s, shared.bulk_per_cpu_s)?))
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The markdown table: one row per mode and critical kind.
pub fn render_table(modes: &[ModeReport]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "| mode | critical kind | unloaded p50 / p99 (ms) | under bulk load p50 / p90 / p99 / max (ms) | target p99 <= 1.5 x p50 + 50 ms | synthesis unloaded -> loaded (ms) | prover unloaded -> loaded (ms) | bulk partitions/s alone / with critical | bulk partitions per CPU-s |"
    );
    let _ = writeln!(o, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for m in modes {
        for c in &m.critical {
            let _ = writeln!(
                o,
                "| {} | {} ({} + {} jobs) | {} / {} | {} / {} / {} / {} | {} ({}) | {} -> {} | {} -> {} | {:.2} / {:.2} | {:.3} |",
                m.mode,
                c.kind,
                c.unloaded.jobs,
                c.loaded.jobs,
                ms(c.unloaded.p50_ms),
                ms(c.unloaded.p99_ms),
                ms(c.loaded.p50_ms),
                ms(c.loaded.p90_ms),
                ms(c.loaded.p99_ms),
                ms(c.loaded.max_ms),
                if c.meets_target() { "met" } else { "MISSED" },
                ms(c.target_ms()),
                ms(c.unloaded_synthesis_ms),
                ms(c.loaded_synthesis_ms),
                ms(c.unloaded_prover_ms),
                ms(c.loaded_prover_ms),
                m.bulk_alone_per_s,
                m.bulk_with_critical_per_s,
                m.bulk_per_cpu_s,
            );
        }
    }
    if let [first, .., last] = modes {
        if let Some((per_s, per_cpu_s)) = bulk_lost(first, last) {
            let _ = writeln!(
                o,
                "\nBulk throughput lost to the isolation ({} against {}, bulk load alone): {:.1} % of partitions per second, {:.1} % of partitions per CPU-second",
                first.mode,
                last.mode,
                per_s * 100.0,
                per_cpu_s * 100.0
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn critical(unloaded: &[f64], loaded: &[f64]) -> CriticalReport {
        CriticalReport {
            kind: "winning".into(),
            unloaded: Latency::of(unloaded).unwrap(),
            loaded: Latency::of(loaded).unwrap(),
            unloaded_synthesis_ms: 1.0,
            loaded_synthesis_ms: 2.0,
            unloaded_prover_ms: 3.0,
            loaded_prover_ms: 4.0,
        }
    }

    fn mode(name: &str, c: CriticalReport, bulk: f64) -> ModeReport {
        ModeReport {
            mode: name.into(),
            settings: String::new(),
            critical: vec![c],
            bulk_alone_per_s: bulk,
            bulk_with_critical_per_s: bulk / 2.0,
            bulk_per_cpu_s: bulk / 4.0,
        }
    }

    #[test]
    fn the_target_is_the_issues_and_the_loss_is_relative_to_the_shared_mode() {
        let met = critical(&[100.0, 100.0, 100.0], &[150.0, 190.0, 200.0]);
        assert_eq!(met.target_ms(), 200.0);
        assert!(met.meets_target(), "200 ms is exactly the target");
        let missed = critical(&[100.0, 100.0, 100.0], &[150.0, 190.0, 201.0]);
        assert!(!missed.meets_target());
        let (iso, shared) = (mode("isolated", met, 9.7), mode("shared", missed, 10.0));
        let (per_s, per_cpu_s) = bulk_lost(&iso, &shared).unwrap();
        assert!((per_s - 0.03).abs() < 1e-9 && (per_cpu_s - 0.03).abs() < 1e-9, "{per_s} {per_cpu_s}");
        let table = render_table(&[iso, shared]);
        assert!(table.contains("| isolated | winning (3 + 3 jobs) | 100 / 100 | 190 / 200 / 200 / 200 | met (200) |"), "{table}");
        assert!(table.contains("| MISSED (200) |"), "{table}");
        assert!(table.contains("lost to the isolation (isolated against shared, bulk load alone): 3.0 % of partitions per second, 3.0 %"), "{table}");
    }

    #[test]
    fn no_loss_figure_without_bulk_throughput() {
        let c = critical(&[1.0], &[1.0]);
        assert_eq!(bulk_lost(&mode("a", c.clone(), 1.0), &mode("b", c, 0.0)), None);
    }
}
