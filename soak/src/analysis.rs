//! From raw samples and job records to the report's figures: where the
//! warm-up ends, steady-state throughput, latency percentiles per job kind,
//! GPU busy %, and the pass/fail checks.

/// Where steady state starts, and how that was decided.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Warmup {
    /// Seconds since the start; figures use samples and jobs after this.
    pub end_s: f64,
    /// One sentence for the report.
    pub how: String,
}

/// Throughput must come within this fraction of the steady level for the
/// warm-up to count as over (proof counts per window are small integers on
/// slow hosts, so a tighter band would mistake counting noise for warm-up).
pub const SETTLE_TOLERANCE: f64 = 0.2;

/// The window for warm-up detection and throughput plots: a twentieth of
/// the run, but at least four typical job latencies (so a window holds
/// several completions per client), clamped to 5..=120 s.
pub fn window_s(run_s: f64, median_latency_s: f64) -> f64 {
    (run_s / 20.0).max(4.0 * median_latency_s).clamp(5.0, 120.0)
}

/// Proofs completed per second in consecutive windows of `w` seconds over
/// `[0, run_s)`, from (completion time, proofs) events.
pub fn windowed_rate(events: &[(f64, u64)], run_s: f64, w: f64) -> Vec<f64> {
    let n = (run_s / w).floor() as usize;
    let mut counts = vec![0u64; n];
    for &(t, k) in events {
        let i = (t / w).floor();
        if i >= 0.0 && (i as usize) < n {
            counts[i as usize] += k;
        }
    }
    counts.into_iter().map(|c| c as f64 / w).collect()
}

/// Finds the end of the warm-up from throughput alone: the reference level
/// is the median rate of the second half of the windows, and warm-up ends
/// at the first window (in the first half) that, with the one after it,
/// reaches `(1 - tol)` of that level. The first window is always discarded,
/// and so is everything before the first completion: they hold the cold
/// start (first pool buffers, parameters' first trip to the device, cold
/// caches), whose cost a count of completions per window can hide. `None`
/// when there are fewer than 4 windows, nothing completed, or throughput
/// never settled in the first half of the run.
pub fn detect_warmup(events: &[(f64, u64)], run_s: f64, w: f64, tol: f64) -> Option<f64> {
    let rates = windowed_rate(events, run_s, w);
    let n = rates.len();
    if n < 4 {
        return None;
    }
    let reference = median(&rates[n / 2..]);
    if reference <= 0.0 {
        return None;
    }
    let first_completion = events.iter().map(|e| e.0).fold(f64::INFINITY, f64::min);
    let floor = (1.0 - tol) * reference;
    (1..=n / 2)
        .find(|&i| rates[i] >= floor && rates.get(i + 1).is_some_and(|&r| r >= floor))
        .map(|i| (i as f64 * w).max(first_completion))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Decides the warm-up: a fixed one when given, else detected, else (with
/// a warning in `how`) a quarter of the run.
pub fn choose_warmup(fixed_s: Option<f64>, events: &[(f64, u64)], run_s: f64, w: f64) -> Warmup {
    if let Some(f) = fixed_s {
        return Warmup { end_s: f.min(run_s), how: format!("fixed by --warmup: the first {f:.0} s are discarded") };
    }
    match detect_warmup(events, run_s, w, SETTLE_TOLERANCE) {
        Some(end) => Warmup {
            end_s: end,
            how: format!(
                "detected: throughput in {w:.0} s windows reached {:.0} % of its steady level (the median of the run's \
                 second half) after {end:.0} s; everything before is discarded",
                (1.0 - SETTLE_TOLERANCE) * 100.0
            ),
        },
        None => Warmup {
            end_s: run_s / 4.0,
            how: format!(
                "NOT detected (throughput did not settle within the first half of the run, or too few {w:.0} s windows): \
                 the first quarter ({:.0} s) is discarded; treat these figures with care",
                run_s / 4.0
            ),
        },
    }
}

pub use crate::stats::{percentile, Latency};

/// Mean of the values of samples taken in `[from, to]`; `None` when none has one.
pub fn mean_over(samples: impl Iterator<Item = (f64, Option<f64>)>, from: f64, to: f64) -> Option<f64> {
    let (sum, n) = samples
        .filter(|(t, _)| (from..=to).contains(t))
        .filter_map(|(_, v)| v)
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// One pass/fail line of the report.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Check {
    pub name: &'static str,
    pub pass: bool,
    pub detail: String,
}

/// What the checks look at, gathered at the end of the run.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub jobs_completed: u64,
    pub jobs_failed: u64,
    /// Jobs still unanswered when the drain time ran out.
    pub jobs_unanswered: usize,
    /// Completed proofs the soak could not verify itself (no parameter file).
    pub proofs_unchecked: u64,
    /// Whether every proof must be verified here too (the soak started the
    /// daemon, so it shares its parameter files).
    pub require_checked: bool,
    pub peak_rss: Option<u64>,
    pub budget_total: u64,
    /// The daemon's counters after the drain: `Some(true)` idle with every
    /// buffer counter at zero, `Some(false)` not, `None` unreadable.
    pub idle_at_end: Option<bool>,
    /// What was not zero, when not idle.
    pub idle_detail: String,
}

/// The soak's pass/fail checks (CI fails the run on any failed one).
pub fn checks(o: &Outcome) -> Vec<Check> {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    vec![
        Check {
            name: "no failed proofs",
            pass: o.jobs_failed == 0 && o.jobs_unanswered == 0 && o.jobs_completed > 0,
            detail: format!(
                "{} jobs completed, {} failed (an error, or a proof that did not verify), {} unanswered at the end",
                o.jobs_completed, o.jobs_failed, o.jobs_unanswered
            ),
        },
        Check {
            name: "every proof verified by the soak",
            pass: !o.require_checked || o.proofs_unchecked == 0,
            detail: match (o.proofs_unchecked, o.require_checked) {
                (0, _) => "every completed proof verified again here (bellperson with the parameter file's key; filecoin-proofs' verifiers for Filecoin jobs)".into(),
                (n, true) => format!("{n} proofs could not be verified here although the daemon shares the parameter directory"),
                (n, false) => format!("{n} proofs not verified here (no parameter file for them; the daemon verified them)"),
            },
        },
        Check {
            name: "peak RSS within the memory budget",
            pass: o.peak_rss.is_some_and(|r| r <= o.budget_total),
            detail: match o.peak_rss {
                Some(r) => format!("peak RSS {:.0} MiB, budget {:.0} MiB", mib(r), mib(o.budget_total)),
                None => "the daemon's RSS could not be read".into(),
            },
        },
        Check {
            name: "buffer counters back to zero",
            pass: o.idle_at_end == Some(true),
            detail: match o.idle_at_end {
                Some(true) => "idle after the drain: every stage 0 partitions / 0 bytes, no pool buffer out, no waiter".into(),
                Some(false) => format!("not idle after the drain: {}", o.idle_detail),
                None => "the daemon's /status could not be read after the drain".into(),
            },
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Completions at `rate` per second from `start`, ramping linearly from
    /// zero over `ramp` seconds.
    fn ramp_events(run_s: f64, start: f64, ramp: f64, rate: f64) -> Vec<(f64, u64)> {
        let mut out = Vec::new();
        let mut t = start;
        while t < run_s {
            out.push((t, 1));
            let r = if t - start < ramp { rate * ((t - start) / ramp).max(0.1) } else { rate };
            t += 1.0 / r;
        }
        out
    }

    #[test]
    fn a_ramp_is_detected_where_it_flattens() {
        let ev = ramp_events(600.0, 20.0, 120.0, 2.0);
        let end = detect_warmup(&ev, 600.0, 30.0, SETTLE_TOLERANCE).unwrap();
        // 80 % of the rate is reached 96 s into the ramp (116 s); windows are 30 s.
        assert!((90.0..=150.0).contains(&end), "{end}");
    }

    #[test]
    fn steady_from_the_start_still_discards_the_cold_start() {
        // Steady from the first completion on: the first window still goes.
        let ev = ramp_events(300.0, 2.0, 0.0, 1.0);
        assert_eq!(detect_warmup(&ev, 300.0, 15.0, SETTLE_TOLERANCE), Some(15.0));
        // A first completion later than the first window: nothing before it counts.
        let ev = ramp_events(300.0, 16.0, 0.0, 1.0);
        assert_eq!(detect_warmup(&ev, 300.0, 15.0, SETTLE_TOLERANCE), Some(16.0));
    }

    #[test]
    fn no_settling_and_too_short_runs_are_not_detected() {
        // Still ramping at the end: the first half never gets near the second.
        let ev = ramp_events(300.0, 0.0, 1000.0, 5.0);
        assert_eq!(detect_warmup(&ev, 300.0, 15.0, SETTLE_TOLERANCE), None);
        assert_eq!(detect_warmup(&ramp_events(30.0, 1.0, 0.0, 1.0), 30.0, 10.0, SETTLE_TOLERANCE), None);
        assert_eq!(detect_warmup(&[], 300.0, 10.0, SETTLE_TOLERANCE), None);
        let w = choose_warmup(None, &[], 100.0, 10.0);
        assert_eq!(w.end_s, 25.0);
        assert!(w.how.starts_with("NOT detected"));
        assert_eq!(choose_warmup(Some(180.0), &[], 100.0, 10.0).end_s, 100.0);
    }

    #[test]
    fn windows_count_partitions_not_jobs() {
        let r = windowed_rate(&[(0.5, 2), (1.5, 3), (9.9, 1), (10.0, 7)], 10.0, 5.0);
        assert_eq!(r, vec![1.0, 0.2]);
    }


    proptest! {
        #[test]
        fn percentiles_are_members_and_monotone(v in prop::collection::vec(0.0f64..1e6, 1..200), p in 0.0f64..100.0, q in 0.0f64..100.0) {
            let (a, b) = (percentile(&v, p.min(q)).unwrap(), percentile(&v, p.max(q)).unwrap());
            prop_assert!(v.contains(&a) && v.contains(&b));
            prop_assert!(a <= b);
            // Nearest rank: at least p % of the values are <= the p-th percentile.
            let at_most = v.iter().filter(|&&x| x <= a).count() as f64;
            prop_assert!(at_most >= p.min(q) / 100.0 * v.len() as f64 - 1e-9);
        }

        #[test]
        fn detected_warmup_is_inside_the_first_half_and_after_the_first_proof(
            start in 0.5f64..60.0, ramp in 0.0f64..200.0, rate in 0.2f64..20.0,
        ) {
            let run = 600.0;
            let ev = ramp_events(run, start, ramp, rate);
            let w = window_s(run, 1.0 / rate);
            if let Some(end) = detect_warmup(&ev, run, w, SETTLE_TOLERANCE) {
                prop_assert!(end >= start && end >= w && end <= run / 2.0 + w, "{end}");
            }
        }
    }

    #[test]
    fn checks_fail_on_failures_rss_over_budget_and_busy_counters() {
        let good = Outcome {
            jobs_completed: 10,
            peak_rss: Some(100),
            budget_total: 100,
            idle_at_end: Some(true),
            ..Default::default()
        };
        assert!(checks(&good).iter().all(|c| c.pass), "{:?}", checks(&good));
        let bad = [
            Outcome { jobs_failed: 1, ..good.clone() },
            Outcome { jobs_unanswered: 1, ..good.clone() },
            Outcome { jobs_completed: 0, ..good.clone() },
            Outcome { peak_rss: Some(101), ..good.clone() },
            Outcome { peak_rss: None, ..good.clone() },
            Outcome { idle_at_end: Some(false), ..good.clone() },
            Outcome { idle_at_end: None, ..good.clone() },
            Outcome { proofs_unchecked: 1, require_checked: true, ..good.clone() },
        ];
        assert!(checks(&Outcome { proofs_unchecked: 3, ..good.clone() }).iter().all(|c| c.pass), "with --connect, unchecked is allowed");
        for o in bad {
            assert_eq!(checks(&o).iter().filter(|c| !c.pass).count(), 1, "{o:?}");
        }
    }

    #[test]
    fn mean_over_a_window_skips_absent_values() {
        let s = [(1.0, Some(10.0)), (2.0, None), (3.0, Some(20.0)), (9.0, Some(90.0))];
        assert_eq!(mean_over(s.into_iter(), 1.0, 3.0), Some(15.0));
        assert_eq!(mean_over(s.into_iter(), 4.0, 5.0), None);
    }
}
