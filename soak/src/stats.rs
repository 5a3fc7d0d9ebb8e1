//! Latency percentiles, shared by the soak run (`analysis.rs`) and xtask's
//! latency benchmark (`bench-latency`, through `kiln_soak::stats`).

/// Nearest-rank percentile (`p` in 0..=100) of unsorted values; `None` when empty.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * s.len() as f64).ceil() as usize;
    Some(s[rank.clamp(1, s.len()) - 1])
}

/// Latency figures of one job kind in steady state (milliseconds).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Latency {
    pub jobs: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latency {
    pub fn of(latencies_ms: &[f64]) -> Option<Self> {
        let p = |q| percentile(latencies_ms, q);
        Some(Self {
            jobs: latencies_ms.len(),
            p50_ms: p(50.0)?,
            p90_ms: p(90.0)?,
            p99_ms: p(99.0)?,
            max_ms: p(100.0)?,
            mean_ms: latencies_ms.iter().sum::<f64>() / latencies_ms.len() as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(5.0));
        assert_eq!(percentile(&v, 90.0), Some(9.0));
        assert_eq!(percentile(&v, 99.0), Some(10.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 50.0), None);
        let l = Latency::of(&[30.0, 10.0, 20.0]).unwrap();
        assert_eq!((l.jobs, l.p50_ms, l.max_ms, l.mean_ms), (3, 20.0, 30.0, 20.0));
    }
}
