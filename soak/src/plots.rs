//! The report's PNG plots (plotters, bitmap backend). Text is drawn with
//! ab_glyph from a TTF compiled into the binary (the `dejavu` crate), so
//! plotting needs no system font library or font files: CI and the GPU
//! host have neither fontconfig nor freetype.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::coord::Shift;
use plotters::style::FontStyle;

use super::sample::Sample;

const W: u32 = 1100;
const H: u32 = 420;
const PALETTE: [RGBColor; 6] =
    [RGBColor(31, 119, 180), RGBColor(255, 127, 14), RGBColor(44, 160, 44), RGBColor(214, 39, 40), RGBColor(148, 103, 189), RGBColor(140, 86, 75)];

fn register_font() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .map_err(|_| anyhow!("the embedded DejaVu Sans font did not load"));
    });
    result
}

/// A named line.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Lines over time, the warm-up shaded grey, an optional dashed level.
/// `y_max` fixes the axis top (percentages); otherwise it fits the data.
pub fn lines(
    path: &Path,
    title: &str,
    y_desc: &str,
    series: &[Series],
    warmup_end: f64,
    level: Option<(String, f64)>,
    y_max: Option<f64>,
) -> Result<()> {
    register_font()?;
    let x_max = x_extent(series.iter().flat_map(|s| &s.points));
    let y_top = series.iter().flat_map(|s| &s.points).map(|p| p.1).chain(level.iter().map(|l| l.1)).fold(0.0, f64::max);
    let y_max = y_max.unwrap_or_else(|| nice_top(y_top));
    let root = canvas(path)?;
    let mut chart = axes(&root, title, y_desc, x_max, y_max)?;
    shade_warmup(&mut chart, warmup_end, y_max)?;
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    if let Some((label, y)) = level {
        let dashes = (0..40).map(|k| k as f64 * x_max / 40.0).map(|x0| PathElement::new(vec![(x0, y), (x0 + x_max / 80.0, y)], BLACK));
        chart
            .draw_series(dashes)
            .map_err(err)?
            .label(label)
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    }
    legend(&mut chart)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Stacked areas: `layers[k]` is drawn on top of the layers before it.
pub fn stacked(path: &Path, title: &str, y_desc: &str, layers: &[Series], warmup_end: f64) -> Result<()> {
    register_font()?;
    let x_max = x_extent(layers.iter().flat_map(|s| &s.points));
    // Running sums, layer by layer (every layer has the same x values).
    let mut tops: Vec<Vec<(f64, f64)>> = Vec::new();
    for l in layers {
        let below = tops.last();
        tops.push(l.points.iter().enumerate().map(|(i, &(x, y))| (x, y + below.map_or(0.0, |b| b[i].1))).collect());
    }
    let y_max = nice_top(tops.last().into_iter().flatten().map(|p| p.1).fold(0.0, f64::max));
    let root = canvas(path)?;
    let mut chart = axes(&root, title, y_desc, x_max, y_max)?;
    // Highest running sum first, so each lower layer paints over the one above it.
    for (i, (layer, top)) in layers.iter().zip(&tops).enumerate().rev() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(AreaSeries::new(top.iter().copied(), 0.0, color.mix(0.85).filled()))
            .map_err(err)?
            .label(layer.label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    shade_warmup(&mut chart, warmup_end, y_max)?;
    legend(&mut chart)?;
    root.present().map_err(err)?;
    Ok(())
}

/// A white W x H bitmap at `path`.
fn canvas(path: &Path) -> Result<DrawingArea<BitMapBackend<'_>, Shift>> {
    let root = BitMapBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    Ok(root)
}

/// The chart every plot shares: title, time on x from 0, y from 0 to `y_max`.
fn axes<'a, 'b>(root: &'a DrawingArea<BitMapBackend<'b>, Shift>, title: &str, y_desc: &str, x_max: f64, y_max: f64) -> Result<Chart<'a, 'b>> {
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart.configure_mesh().x_desc("seconds since start").y_desc(y_desc).label_style(("sans-serif", 13)).draw().map_err(err)?;
    Ok(chart)
}

type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;

fn shade_warmup(chart: &mut Chart<'_, '_>, warmup_end: f64, y_max: f64) -> Result<()> {
    if warmup_end > 0.0 {
        chart
            .draw_series([Rectangle::new([(0.0, 0.0), (warmup_end, y_max)], RGBColor(128, 128, 128).mix(0.18).filled())])
            .map_err(err)?
            .label("warm-up (discarded)")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], RGBColor(128, 128, 128).mix(0.35).filled()));
    }
    Ok(())
}

fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> Result<()> {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)
}

fn x_extent<'a>(points: impl Iterator<Item = &'a (f64, f64)>) -> f64 {
    points.map(|p| p.0).fold(1.0, f64::max)
}

/// A round axis top a little above `v` (1, 2 or 5 times a power of ten).
pub fn nice_top(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let v = v * 1.08;
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|&t| t >= v).unwrap_or(10.0 * p)
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plotting: {e:?}")
}

/// All four plots of a run into `dir`; returns the file names written.
pub fn all(dir: &Path, samples: &[Sample], w: f64, warmup_end: f64, steady_rate: f64) -> Result<Vec<&'static str>> {
    let t: Vec<f64> = samples.iter().map(|s| s.t_s).collect();
    let at = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> { samples.iter().filter_map(|s| Some((s.t_s, f(s)?))).collect() };

    // Throughput: proofs completed over the trailing window, per second.
    let rate: Vec<(f64, f64)> = samples
        .iter()
        .map(|s| {
            let j = t.partition_point(|&x| x < s.t_s - w);
            let dt = s.t_s - t[j];
            (s.t_s, if dt > 0.0 { (s.proofs_completed - samples[j].proofs_completed) as f64 / dt } else { 0.0 })
        })
        .collect();
    lines(
        &dir.join("throughput.png"),
        &format!("Throughput (proofs per second over a trailing {w:.0} s window)"),
        "proofs / s",
        &[Series { label: "proofs / s".into(), points: rate }],
        warmup_end,
        Some((format!("steady state {steady_rate:.3} / s"), steady_rate)),
        None,
    )?;

    let gpus = samples.iter().map(|s| s.gpus.len()).max().unwrap_or(0);
    let mut busy: Vec<Series> = (0..gpus)
        .map(|i| Series {
            label: format!("GPU {i} busy % (NVML)"),
            points: at(&|s| s.gpus.iter().find(|g| g.index as usize == i).map(|g| g.busy_percent as f64)),
        })
        .collect();
    busy.push(Series {
        label: "prover workers in prove_start % (daemon)".into(),
        points: at(&|s| s.daemon.as_ref().filter(|d| d.prover_workers > 0).map(|d| 100.0 * d.prover_workers_busy as f64 / d.prover_workers as f64)),
    });
    let title = if gpus == 0 { "Prover busy % (no NVML on this host: no GPU figures)" } else { "GPU busy %" };
    lines(&dir.join("gpu_busy.png"), title, "%", &busy, warmup_end, None, Some(105.0))?;

    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    lines(
        &dir.join("rss.png"),
        "Daemon RSS against the memory budget",
        "GiB",
        // RSS last, so it is drawn over the reservation line it usually sits near.
        &[
            Series { label: "budget".into(), points: at(&|s| s.daemon.as_ref().map(|d| gib(d.budget_total))) },
            Series { label: "reserved from the budget".into(), points: at(&|s| s.daemon.as_ref().map(|d| gib(d.budget_reserved))) },
            Series { label: "RSS".into(), points: at(&|s| s.daemon.as_ref()?.rss.map(gib)) },
        ],
        warmup_end,
        None,
        None,
    )?;

    let with_daemon: Vec<&Sample> = samples.iter().filter(|s| s.daemon.is_some()).collect();
    let layers: Vec<Series> = kiln_pipeline::Stage::ALL
        .iter()
        .enumerate()
        .map(|(k, stage)| Series {
            label: stage.name().replace('_', " "),
            points: with_daemon.iter().map(|s| (s.t_s, s.daemon.as_ref().expect("filtered").stages[k].0 as f64)).collect(),
        })
        .collect();
    stacked(&dir.join("buffers.png"), "Buffer counters by pipeline stage (partitions)", "partitions", &layers, warmup_end)?;
    Ok(vec!["throughput.png", "gpu_busy.png", "rss.png", "buffers.png"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_tops_are_round_and_above() {
        assert_eq!(nice_top(0.0), 1.0);
        assert_eq!(nice_top(0.9), 1.0);
        assert_eq!(nice_top(1.0), 2.0);
        assert_eq!(nice_top(3.3), 5.0);
        assert_eq!(nice_top(47.0), 100.0);
        assert_eq!(nice_top(100.0), 200.0);
    }

    #[test]
    fn plots_render_without_system_fonts() {
        let dir = tempfile::tempdir().unwrap();
        let pts = |k: f64| (0..50).map(|i| (i as f64, k * (i as f64).sqrt())).collect::<Vec<_>>();
        lines(&dir.path().join("l.png"), "title", "y", &[Series { label: "a".into(), points: pts(1.0) }], 10.0, Some(("lvl".into(), 3.0)), None)
            .unwrap();
        stacked(&dir.path().join("s.png"), "t", "y", &[Series { label: "a".into(), points: pts(1.0) }, Series { label: "b".into(), points: pts(2.0) }], 5.0)
            .unwrap();
        for f in ["l.png", "s.png"] {
            let bytes = std::fs::read(dir.path().join(f)).unwrap();
            assert_eq!(&bytes[1..4], b"PNG", "{f}");
        }
    }
}
