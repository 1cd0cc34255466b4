//! SVG plots (plotters, SVG backend): per-metric strip plots, sweep curves, lock-site bars.

use std::collections::BTreeSet;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::tables::fmt_num;
use super::{file_stem, LockSiteTable, Plot, ReportError};
use gt_compare::{Comparison, MetricRow, Summary};
use gt_results::metrics::registry;

const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];
const FONT: &str = "sans-serif";

/// A chart of f64 against f64 on the SVG backend.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Axis tick label: up to 3 decimals, trailing zeros dropped (`1000`, `2.5`, `0.125`).
fn tick(v: &f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-3..1e7).contains(&a) {
        return format!("{v:.1e}");
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

pub(super) fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

pub(super) fn err<E: std::fmt::Display>(name: &str) -> impl Fn(E) -> ReportError + '_ {
    move |e| ReportError::Plot {
        name: name.to_string(),
        message: e.to_string(),
    }
}

/// Metrics to plot: the selection (or the headline list) plus every flagged metric.
fn selected(c: &Comparison, select: &[String]) -> Vec<String> {
    let mut out = BTreeSet::new();
    for r in &c.rows {
        let chosen = if select.is_empty() {
            registry::is_headline(&r.metric)
        } else {
            select.iter().any(|s| r.metric.contains(s.as_str()))
        };
        if chosen || r.versus.iter().any(|v| v.flag) {
            out.insert(r.metric.clone());
        }
    }
    out.into_iter().collect()
}

/// Every plot of the report.
pub(super) fn all(
    c: &Comparison,
    sites: &[LockSiteTable],
    select: &[String],
) -> Result<Vec<Plot>, ReportError> {
    let mut plots = Vec::new();
    for m in selected(c, select) {
        let rows: Vec<&MetricRow> = c.metric(&m).collect();
        plots.push(strip(&m, &c.kernels, &rows, c.several_suites())?);
        // One sweep curve per series of the sweep (a grid's running vCPUs), each needing two
        // points or more on the axis.
        let series: BTreeSet<Option<&str>> = rows
            .iter()
            .filter_map(|r| Some(r.sweep.as_ref()?.series.as_deref()))
            .collect();
        for s in series {
            let of_series: Vec<&MetricRow> = rows
                .iter()
                .copied()
                .filter(|r| r.sweep.as_ref().is_some_and(|p| p.series.as_deref() == s))
                .collect();
            let swept: BTreeSet<String> = of_series
                .iter()
                .filter_map(|r| r.sweep.as_ref().map(|s| format!("{}", s.value)))
                .collect();
            if swept.len() >= 2 {
                plots.push(sweep(&m, &c.kernels, &of_series, s)?);
            }
        }
    }
    for t in sites {
        plots.push(lock_sites(t, c.several_suites())?);
    }
    Ok(plots)
}

fn y_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let lo = if lo >= 0.0 { 0.0 } else { lo };
    let span = (hi - lo).abs().max(hi.abs() * 0.1).max(1e-9);
    (
        lo - if lo < 0.0 { span * 0.08 } else { 0.0 },
        hi + span * 0.08,
    )
}

pub(super) fn render(
    name: &str,
    size: (u32, u32),
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, size).into_drawing_area();
        root.fill(&WHITE).map_err(err(name))?;
        draw(&root)?;
        root.present().map_err(err(name))?;
    }
    Ok(buf)
}

/// Deterministic horizontal jitter for the j-th point of a strip.
fn jitter(j: usize) -> f64 {
    ((j as f64 * 0.618_034).fract() - 0.5) * 0.36
}

/// Strip plot: one column per (cell, kernel), every run a point, the median a bar, the 95 %
/// CI of the mean a thin whisker beside it.
fn strip(
    metric: &str,
    kernels: &[String],
    rows: &[&MetricRow],
    several_suites: bool,
) -> Result<Plot, ReportError> {
    let cols = strip_columns(kernels, rows, several_suites);
    let (lo, hi) = y_range(cols.iter().flat_map(|(_, ki, r)| {
        let v = &r.values[&kernels[*ki]];
        let ci = r
            .summary(&kernels[*ki])
            .and_then(|s| s.ci95)
            .map(|(a, b)| [a, b])
            .unwrap_or([v[0], v[0]]);
        v.iter().copied().chain(ci)
    }));
    let n = cols.len().max(1);
    let width = (160 + 110 * n as u32).clamp(420, 1400);
    let unit = rows.first().map_or_else(String::new, |r| r.unit.clone());
    let svg = render(metric, (width, 380), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(metric, (FONT, 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), lo..hi)
            .map_err(err(metric))?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(unit.as_str())
            .y_label_formatter(&tick)
            .draw()
            .map_err(err(metric))?;
        for (i, (label, ki, r)) in cols.iter().enumerate() {
            let c = color(*ki);
            let x = i as f64;
            let k = &kernels[*ki];
            strip_column(&mut chart, x, c, &r.values[k], r.summary(k), metric)?;
            let (px, py) = chart.backend_coord(&(x, lo));
            root.draw(&Text::new(
                label.clone(),
                (px, py + 8),
                (FONT, 13)
                    .into_font()
                    .color(&c)
                    .pos(Pos::new(HPos::Center, VPos::Top)),
            ))
            .map_err(err(metric))?;
        }
        Ok(())
    })?;
    Ok(Plot {
        file: format!("strip-{}.svg", file_stem(metric)),
        caption: format!(
            "{metric}: every run (dots), median (black bar), interquartile range (box, n >= 4), 95 % CI of the mean (whisker)"
        ),
        svg,
    })
}

/// The strip plot's columns: (label, kernel index, row) for each cell's kernels with values.
fn strip_columns<'r>(
    kernels: &[String],
    rows: &[&'r MetricRow],
    several_suites: bool,
) -> Vec<(String, usize, &'r MetricRow)> {
    rows.iter()
        .flat_map(|r| {
            kernels.iter().enumerate().filter_map(move |(ki, k)| {
                r.values.get(k)?;
                let cell = r.cell_label(several_suites);
                let label = if cell.is_empty() {
                    k.clone()
                } else {
                    format!("{k} {cell}")
                };
                Some((label, ki, *r))
            })
        })
        .collect()
}

/// One strip column at `x`: the interquartile box (n >= 4), every run a point, the median a
/// black bar and the 95 % CI of the mean a whisker beside it.
fn strip_column(
    chart: &mut Chart<'_, '_>,
    x: f64,
    c: RGBColor,
    vals: &[f64],
    summary: Option<&Summary>,
    metric: &str,
) -> Result<(), ReportError> {
    if let Some(s) = summary.filter(|s| s.n >= 4) {
        // Interquartile box behind the points.
        let corners = [(x - 0.25, s.q1), (x + 0.25, s.q3)];
        chart
            .draw_series([
                Rectangle::new(corners, c.mix(0.15).filled()),
                Rectangle::new(corners, c.mix(0.6).stroke_width(1)),
            ])
            .map_err(err(metric))?;
    }
    chart
        .draw_series(
            vals.iter()
                .enumerate()
                .map(|(j, v)| Circle::new((x + jitter(j), *v), 4, c.mix(0.75).filled())),
        )
        .map_err(err(metric))?;
    if let Some(s) = summary {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(x - 0.3, s.median), (x + 0.3, s.median)],
                BLACK.stroke_width(3),
            )))
            .map_err(err(metric))?;
        if let Some((a, b)) = s.ci95 {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x + 0.38, a), (x + 0.38, b)],
                    c.stroke_width(2),
                )))
                .map_err(err(metric))?;
        }
    }
    Ok(())
}

/// (sweep value, mean, 95 % CI of the mean)
type SweepPt = (f64, f64, Option<(f64, f64)>);

/// Sweep curve: the metric's mean against the sweep value, per kernel, with 95 % CI whiskers.
fn sweep(
    metric: &str,
    kernels: &[String],
    rows: &[&MetricRow],
    series: Option<&str>,
) -> Result<Plot, ReportError> {
    let param = rows
        .iter()
        .find_map(|r| r.sweep.as_ref().map(|s| s.param.clone()))
        .unwrap_or_default();
    let pts = |k: &str| -> Vec<SweepPt> {
        let mut v: Vec<_> = rows
            .iter()
            .filter_map(|r| {
                let s = r.summary(k)?;
                Some((r.sweep.as_ref()?.value, s.mean, s.ci95))
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let xs: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.sweep.as_ref().map(|s| s.value))
        .collect();
    let xmin = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let xmax = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = ((xmax - xmin) * 0.05).max(1e-9);
    let (lo, hi) = y_range(kernels.iter().flat_map(|k| {
        pts(k)
            .into_iter()
            .flat_map(|(_, m, ci)| [m, ci.map_or(m, |c| c.0), ci.map_or(m, |c| c.1)])
    }));
    let name = format!("sweep {metric}");
    let title = match series {
        Some(s) => format!("{metric} vs {param}, {s}"),
        None => format!("{metric} vs {param}"),
    };
    let svg = render(&name, (720, 420), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((xmin - pad)..(xmax + pad), lo..hi)
            .map_err(err(&name))?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .x_desc(param.as_str())
            .y_desc(match rows.first().map(|r| r.unit.as_str()) {
                Some(u) if !u.is_empty() => format!("{metric} (mean, {u})"),
                _ => format!("{metric} (mean)"),
            })
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .draw()
            .map_err(err(&name))?;
        for (ki, k) in kernels.iter().enumerate() {
            let p = pts(k);
            if !p.is_empty() {
                sweep_curve(&mut chart, k, color(ki), &p, pad * 0.3, &name)?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err(&name))?;
        Ok(())
    })?;
    Ok(Plot {
        file: match series {
            Some(s) => format!("sweep-{}-{}.svg", file_stem(metric), file_stem(s)),
            None => format!("sweep-{}.svg", file_stem(metric)),
        },
        caption: match series {
            Some(s) => {
                format!("{metric} against {param}, {s}: mean per kernel with 95 % CI whiskers")
            }
            None => format!("{metric} against {param}: mean per kernel with 95 % CI whiskers"),
        },
        svg,
    })
}

/// One kernel's sweep curve: the means joined by a line (in the legend as `k`), a dot each and
/// the 95 % CI whiskers with caps `cap` wide.
fn sweep_curve(
    chart: &mut Chart<'_, '_>,
    k: &str,
    c: RGBColor,
    p: &[SweepPt],
    cap: f64,
    name: &str,
) -> Result<(), ReportError> {
    chart
        .draw_series(LineSeries::new(
            p.iter().map(|(x, m, _)| (*x, *m)),
            c.stroke_width(2),
        ))
        .map_err(err(name))?
        .label(k)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    chart
        .draw_series(
            p.iter()
                .map(|(x, m, _)| Circle::new((*x, *m), 4, c.filled())),
        )
        .map_err(err(name))?;
    chart
        .draw_series(p.iter().filter_map(|(x, _, ci)| {
            let (a, b) = (*ci)?;
            Some(PathElement::new(
                vec![
                    (x - cap, a),
                    (x + cap, a),
                    (*x, a),
                    (*x, b),
                    (x - cap, b),
                    (x + cap, b),
                ],
                c.stroke_width(1),
            ))
        }))
        .map_err(err(name))?;
    Ok(())
}

/// Grouped horizontal bars: D switches per lock site, one bar per kernel.
fn lock_sites(t: &LockSiteTable, several_suites: bool) -> Result<Plot, ReportError> {
    let label = t.label(several_suites);
    let name = format!("lock sites {label}");
    let ns = t.sites.len().max(1);
    let nk = t.kernels.len().max(1);
    let xmax = t
        .sites
        .iter()
        .flat_map(|s| t.kernels.iter().map(|(_, k)| k.rate(s, t.per_kio)))
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.18;
    let longest = t.sites.iter().map(|s| s.len()).max().unwrap_or(8);
    let left = (longest as u32 * 7 + 16).clamp(80, 320);
    let height = (90 + ns as u32 * (14 * nk as u32 + 14)).clamp(220, 1600);
    let svg = render(&name, (760 + left, height), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!("{label}: irq-thread D switches by lock site"),
                (FONT, 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(left)
            .build_cartesian_2d(0f64..xmax, -0.5f64..(ns as f64 - 0.5))
            .map_err(err(&name))?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .disable_y_mesh()
            .y_labels(0)
            .x_desc(t.unit())
            .x_label_formatter(&tick)
            .draw()
            .map_err(err(&name))?;
        let h = 0.8 / nk as f64;
        for (ki, (k, ks)) in t.kernels.iter().enumerate() {
            let c = color(ki);
            let bars: Vec<(f64, f64, f64)> = t
                .sites
                .iter()
                .enumerate()
                .map(|(si, s)| {
                    let y = (ns - 1 - si) as f64 + 0.4 - ki as f64 * h;
                    (ks.rate(s, t.per_kio), y - h, y)
                })
                .collect();
            labelled_bars(&mut chart, k, c, &bars, xmax * 0.01, &name)?;
        }
        for (si, s) in t.sites.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(0.0, (ns - 1 - si) as f64));
            root.draw(&Text::new(
                s.clone(),
                (px - 6, py),
                (FONT, 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Right, VPos::Center)),
            ))
            .map_err(err(&name))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err(&name))?;
        Ok(())
    })?;
    Ok(Plot {
        file: format!("locksites-{}.svg", file_stem(&label)),
        caption: format!("{label}: irq-thread D switches by lock site ({})", t.unit()),
        svg,
    })
}

/// One kernel's horizontal bars (value, y0, y1), in the legend as `k`, each with its value
/// written `gap` to the right of its end.
fn labelled_bars(
    chart: &mut Chart<'_, '_>,
    k: &str,
    c: RGBColor,
    bars: &[(f64, f64, f64)],
    gap: f64,
    name: &str,
) -> Result<(), ReportError> {
    chart
        .draw_series(
            bars.iter()
                .map(|(v, y0, y1)| Rectangle::new([(0.0, *y0), (*v, *y1)], c.filled())),
        )
        .map_err(err(name))?
        .label(k)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    chart
        .draw_series(bars.iter().map(|(v, y0, y1)| {
            Text::new(
                fmt_num(*v),
                (*v + gap, (y0 + y1) / 2.0),
                (FONT, 11)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            )
        }))
        .map_err(err(name))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks() {
        assert_eq!(tick(&1.0), "1");
        assert_eq!(tick(&1000.0), "1000");
        assert_eq!(tick(&2.5), "2.5");
        assert_eq!(tick(&0.125), "0.125");
        assert_eq!(tick(&-0.0), "0");
        assert_eq!(tick(&2.5e-6), "2.5e-6");
    }

    #[test]
    fn jitter_stays_inside_the_column() {
        assert!((0..100).all(|j| jitter(j).abs() <= 0.18));
    }
}
