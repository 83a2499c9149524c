//! `iodump plot`: one plot of a trace as an SVG or PNG file, for papers and tickets.
//!
//! This module owns the drawing of single plots with `plotters` (SVG backend, and the bitmap
//! backend for PNG). It draws from the same binned [`TraceReport`] as the HTML report, so a
//! plot of 100M I/Os costs one parallel pass and a few thousand shapes. Text is rendered with
//! an embedded subset of DejaVu Sans (`assets/fonts/`, Bitstream Vera licence, see
//! `LICENSE-DejaVu.txt` there): no system font or font library is needed.

use std::path::Path;
use std::sync::Once;

use iodump_format::text::escape_controls;
use iodump_format::units::{format_bytes, format_duration_ns, DurationStyle};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::{
    TraceReport, CLASSES, HEAT_LATENCY_BINS, HEAT_LATENCY_MERGE, HEAT_TIME_BINS, LATENCY_BINS,
    OFFSET_BINS, OFFSET_TIME_BINS, SERIES_DEVICES, TIME_BINS,
};
use crate::AnalyzeError;

/// What to draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotKind {
    /// I/O per second over time, per device and op.
    Iops,
    /// Bytes per second over time, per device and op.
    Throughput,
    /// Latency over time: time bins × log latency bins, colour = number of I/Os.
    LatencyHeatmap,
    /// Offset over time on one device, coloured by op (seekwatcher's view).
    Offset,
    /// Latency histogram (log bins), stacked by op class.
    LatencyHistogram,
    /// Top processes by I/Os.
    TopProcs,
    /// Top files by I/Os.
    TopFiles,
}

impl PlotKind {
    /// Every kind, with its command-line name.
    pub const ALL: [(PlotKind, &'static str); 7] = [
        (PlotKind::Iops, "iops"),
        (PlotKind::Throughput, "throughput"),
        (PlotKind::LatencyHeatmap, "latency-heatmap"),
        (PlotKind::Offset, "offset"),
        (PlotKind::LatencyHistogram, "latency-histogram"),
        (PlotKind::TopProcs, "top-procs"),
        (PlotKind::TopFiles, "top-files"),
    ];
    /// The command-line name.
    pub fn name(self) -> &'static str {
        PlotKind::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map_or("?", |(_, n)| n)
    }
}

/// Output image format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// SVG (text stays text).
    Svg,
    /// PNG (RGB).
    Png,
}

impl ImageFormat {
    /// From a file name's extension (`.svg`, `.png`, any case).
    pub fn from_path(p: &Path) -> Option<ImageFormat> {
        let ext = p.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "svg" => Some(ImageFormat::Svg),
            "png" => Some(ImageFormat::Png),
            _ => None,
        }
    }
}

/// How to draw.
#[derive(Clone, Debug)]
pub struct PlotOptions {
    /// What.
    pub kind: PlotKind,
    /// Image size in pixels.
    pub width_px: u32,
    /// Image size in pixels.
    pub height_px: u32,
    /// Offset plot: the device (name); default the busiest.
    pub device: Option<String>,
}

const FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans-subset.ttf");
static FONT_ONCE: Once = Once::new();

fn register_font() {
    FONT_ONCE.call_once(|| {
        // The font is part of the binary and known to parse (tested); a failure would only
        // leave text undrawn, which the plot call then reports.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

fn perr(e: impl std::error::Error + Send + Sync + 'static) -> AnalyzeError {
    AnalyzeError::Draw {
        source: Box::new(e),
    }
}

const SERIES_COLORS: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];
const CLASS_COLORS: [RGBColor; 3] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
];

/// Viridis-like ramp, `f` in 0..=1.
fn ramp(f: f64) -> RGBColor {
    const R: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let f = f.clamp(0.0, 1.0) * (R.len() - 1) as f64;
    let i = (f.floor() as usize).min(R.len() - 2);
    let u = f - i as f64;
    let (a, b) = (R[i], R[i + 1]);
    RGBColor(
        (a.0 + (b.0 - a.0) * u) as u8,
        (a.1 + (b.1 - a.1) * u) as u8,
        (a.2 + (b.2 - a.2) * u) as u8,
    )
}

/// An axis label of nanoseconds (`1.5 ms`, `2 s`).
fn label_ns(ns: f64) -> String {
    format_duration_ns(ns, DurationStyle::Label)
}

fn fmt_si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Draws `kind` of `rep` into `path` (SVG or PNG, from its extension; an
/// [`OutputFile`](iodump_output::OutputFile): a file already there is replaced only once the
/// plot is drawn).
pub fn plot(rep: &TraceReport, opts: &PlotOptions, path: &Path) -> Result<(), AnalyzeError> {
    let fmt = ImageFormat::from_path(path).ok_or_else(|| AnalyzeError::Plot {
        message: format!("{}: the output must end in .svg or .png", path.display()),
    })?;
    if rep.agg.events == 0 {
        return Err(match rep.damage.first() {
            Some(d) => AnalyzeError::NothingReadable {
                trace: rep.name.clone(),
                damage: d.to_string(),
            },
            None => AnalyzeError::Plot {
                message: match &rep.filter {
                    Some(f) => format!(
                        "{}: --filter {f} keeps no I/O, nothing to plot",
                        escape_controls(&rep.name)
                    ),
                    None => format!(
                        "{}: the trace holds no I/O, nothing to plot",
                        escape_controls(&rep.name)
                    ),
                },
            },
        });
    }
    if !(100..=20_000).contains(&opts.width_px) || !(100..=20_000).contains(&opts.height_px) {
        return Err(AnalyzeError::Plot {
            message: "width and height must be between 100 and 20000 pixels".to_string(),
        });
    }
    register_font();
    let size = (opts.width_px, opts.height_px);
    // Drawn into the output's temporary file (its name ends in the output's, so the PNG
    // encoder sees the extension), renamed over `path` once complete.
    let mut out = iodump_output::OutputFile::create(path)?;
    let temp = out
        .temp_path()
        .expect("an output file is a temporary file until committed")
        .to_path_buf();
    match fmt {
        ImageFormat::Svg => {
            let root = SVGBackend::new(&temp, size).into_drawing_area();
            draw(&root, rep, opts)?;
            root.present().map_err(perr)?;
        }
        ImageFormat::Png => {
            let root = BitMapBackend::new(&temp, size).into_drawing_area();
            draw(&root, rep, opts)?;
            root.present().map_err(perr)?;
        }
    }
    out.commit()?;
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rep: &TraceReport,
    opts: &PlotOptions,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(perr)?;
    match opts.kind {
        PlotKind::Iops | PlotKind::Throughput => lines(root, rep, opts.kind),
        PlotKind::LatencyHeatmap => heatmap(root, rep),
        PlotKind::Offset => offset(root, rep, opts.device.as_deref()),
        PlotKind::LatencyHistogram => histogram(root, rep),
        PlotKind::TopProcs => {
            let rows: Vec<(String, u64)> = rep
                .top_procs
                .iter()
                .map(|p| (p.label(), p.counters.ios))
                .collect();
            bars(
                root,
                &format!("{}: top processes by I/Os", escape_controls(&rep.name)),
                &rows,
            )
        }
        PlotKind::TopFiles => {
            let rows: Vec<(String, u64)> = rep
                .top_files
                .iter()
                .map(|f| (f.label(), f.counters.ios))
                .collect();
            bars(
                root,
                &format!("{}: top files by I/Os", escape_controls(&rep.name)),
                &rows,
            )
        }
    }
}

fn span_s(rep: &TraceReport, bins: usize, bin_ns: u64) -> f64 {
    (rep.span_ns.max(1) as f64 / 1e9).min(bins as f64 * bin_ns as f64 / 1e9)
}

fn lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rep: &TraceReport,
    kind: PlotKind,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    // One I/O, or all at one instant: a rate over no time is undefined (a bin of 1 ns would
    // draw it at a billion per second).
    if rep.span_ns == 0 {
        return Err(AnalyzeError::Plot {
            message: format!(
                "{}: all of its I/O at one instant, no {} over time to plot",
                escape_controls(&rep.name),
                if kind == PlotKind::Iops {
                    "IOPS"
                } else {
                    "throughput"
                }
            ),
        });
    }
    let secs = rep.bin_ns as f64 / 1e9;
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for (device, d) in rep.series() {
        for o in iodump_format::Op::ALL {
            let k = o.code() as usize * TIME_BINS;
            let ios = &d.ios[k..k + TIME_BINS];
            if ios.iter().all(|&x| x == 0) {
                continue;
            }
            let v: Vec<f64> = if kind == PlotKind::Iops {
                ios.iter().map(|&x| x as f64 / secs).collect()
            } else {
                d.bytes[k..k + TIME_BINS]
                    .iter()
                    .map(|&x| x as f64 / secs)
                    .collect()
            };
            series.push((format!("{} {}", escape_controls(&device), o.name()), v));
        }
    }
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.05;
    let xmax = span_s(rep, TIME_BINS, rep.bin_ns);
    let (title, ylabel) = if kind == PlotKind::Iops {
        ("IOPS", "I/O per second")
    } else {
        ("throughput", "bytes per second")
    };
    let yfmt = |v: &f64| {
        if kind == PlotKind::Iops {
            fmt_si(*v)
        } else {
            format!("{}/s", format_bytes(*v))
        }
    };
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: {title} per device and op", escape_controls(&rep.name)),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(perr)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first I/O")
        .y_desc(ylabel)
        .y_label_formatter(&yfmt)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(perr)?;
    loss_marks(&mut chart, rep, ymax)?;
    for (i, (name, v)) in series.iter().enumerate() {
        let color = SERIES_COLORS[i % SERIES_COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                v.iter()
                    .enumerate()
                    .map(|(b, &y)| ((b as f64 + 0.5) * secs, y))
                    .filter(|(x, _)| *x <= xmax),
                color.stroke_width(1),
            ))
            .map_err(perr)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(perr)
}

/// Loss windows as light red spans over a time chart (x in seconds).
fn loss_marks<DB: DrawingBackend>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    rep: &TraceReport,
    ymax: f64,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    let red = RGBColor(0xdd, 0, 0);
    for &(s, e, _, _, _) in &rep.losses {
        let a = (s as f64 / 1e9).max(0.0);
        let b = (e.max(s) as f64 / 1e9).max(a);
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(a, 0.0), (b, ymax)],
                red.mix(0.15).filled(),
            )))
            .map_err(perr)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(b, 0.0), (b, ymax * 0.03)],
                red.stroke_width(2),
            )))
            .map_err(perr)?;
    }
    Ok(())
}

fn heatmap<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rep: &TraceReport,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    let a = &rep.agg;
    let cells = HEAT_TIME_BINS * HEAT_LATENCY_BINS;
    let mut sum = vec![0u64; cells];
    for c in 0..CLASSES.len() {
        for (i, v) in sum.iter_mut().enumerate() {
            *v += a.heat[c * cells + i] as u64;
        }
    }
    let (mut lo, mut hi) = (HEAT_LATENCY_BINS, 0);
    for t in 0..HEAT_TIME_BINS {
        let row = &sum[t * HEAT_LATENCY_BINS..(t + 1) * HEAT_LATENCY_BINS];
        if let Some(f) = row.iter().position(|&x| x > 0) {
            lo = lo.min(f);
        }
        if let Some(l) = row.iter().rposition(|&x| x > 0) {
            hi = hi.max(l + 1);
        }
    }
    let edge =
        |j: usize| (crate::report::latency_bin_lower_ns(j * HEAT_LATENCY_MERGE) as f64).max(1.0);
    let bin_s = rep.bin_ns as f64 * 4.0 / 1e9;
    let xmax = span_s(rep, HEAT_TIME_BINS, rep.bin_ns * 4);
    let max = sum.iter().copied().max().unwrap_or(1).max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!(
                "{}: latency over time (colour: I/Os, log scale)",
                escape_controls(&rep.name)
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..xmax, (edge(lo)..edge(hi)).log_scale())
        .map_err(perr)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("seconds since the first I/O")
        .y_desc("latency")
        .y_label_formatter(&|v| label_ns(*v))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(perr)?;
    let mut rects = Vec::new();
    for t in 0..HEAT_TIME_BINS {
        for j in lo..hi {
            let v = sum[t * HEAT_LATENCY_BINS + j];
            if v == 0 {
                continue;
            }
            let color = ramp((1.0 + v as f64).ln() / (1.0 + max).ln());
            let x0 = t as f64 * bin_s;
            rects.push(Rectangle::new(
                [(x0, edge(j)), ((x0 + bin_s).min(xmax), edge(j + 1))],
                color.filled(),
            ));
        }
    }
    chart.draw_series(rects).map_err(perr)?;
    Ok(())
}

/// True when `name` is the kernel's name of a partition of disk `disk` (`sda1` of `sda`,
/// `nvme0n1p2` of `nvme0n1`).
fn is_partition_name(name: &str, disk: &str) -> bool {
    let Some(rest) = name.strip_prefix(disk) else {
        return false;
    };
    let rest = if disk.ends_with(|c: char| c.is_ascii_digit()) {
        match rest.strip_prefix('p') {
            Some(r) => r,
            None => return false,
        }
    } else {
        rest
    };
    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
}

fn offset<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rep: &TraceReport,
    device: Option<&str>,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    let (d, series) = match device {
        Some(name) => {
            let d = rep
                .agg
                .devices
                .iter()
                .find(|d| {
                    rep.device_name(d.dev) == name || iodump_format::DevT(d.dev).to_string() == name
                })
                .ok_or_else(|| {
                    let names: Vec<String> = rep
                        .agg
                        .devices
                        .iter()
                        .map(|d| rep.device_name(d.dev))
                        .collect();
                    // A disk's partitions are devices of their own, with offsets of their own.
                    let parts: Vec<&String> = names
                        .iter()
                        .filter(|n| is_partition_name(n, name))
                        .collect();
                    let message = if parts.is_empty() {
                        format!(
                            "{}: no I/O on device {name} (devices: {})",
                            escape_controls(&rep.name),
                            names.join(", ")
                        )
                    } else {
                        format!(
                        "{}: no I/O on device {name} itself; its partitions, each plotted on its \
                         own, have some: {}",
                        escape_controls(&rep.name),
                        parts.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
                    )
                    };
                    AnalyzeError::Plot { message }
                })?;
            let series = d.series.as_deref().ok_or_else(|| AnalyzeError::Plot {
                message: format!(
                    "{}: device {name} is not among the {SERIES_DEVICES} busiest, whose offsets \
                     are kept: plot it alone with --filter 'dev == \"{name}\"'",
                    escape_controls(&rep.name)
                ),
            })?;
            (d, series)
        }
        None => rep
            .offset_devices()
            .into_iter()
            .next()
            .ok_or_else(|| AnalyzeError::Plot {
                message: format!(
                    "{}: no I/O with data, no offsets to plot",
                    escape_controls(&rep.name)
                ),
            })?,
    };
    let bpb = (1u64 << series.offset_shift) as f64 * 512.0;
    let rows = ((d.max_end_sector as f64 / (1u64 << series.offset_shift) as f64).ceil() as usize)
        .clamp(1, OFFSET_BINS);
    let ymax = rows as f64 * bpb;
    let bin_s = rep.bin_ns as f64 * 6.0 / 1e9;
    let xmax = span_s(rep, OFFSET_TIME_BINS, rep.bin_ns * 6);
    let cells = OFFSET_TIME_BINS * OFFSET_BINS;
    let max = series
        .offset_cells
        .iter()
        .copied()
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let name = escape_controls(&rep.device_name(d.dev)).into_owned();
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: offset over time on {name}", escape_controls(&rep.name)),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)
        .map_err(perr)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("seconds since the first I/O")
        .y_desc("offset")
        .y_label_formatter(&|v| format_bytes(*v))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(perr)?;
    loss_marks(&mut chart, rep, ymax)?;
    for c in [2usize, 1, 0] {
        let color = CLASS_COLORS[c];
        let mut rects = Vec::new();
        for (i, &v) in series.offset_cells[c * cells..(c + 1) * cells]
            .iter()
            .enumerate()
        {
            if v == 0 {
                continue;
            }
            let (t, o) = (i / OFFSET_BINS, i % OFFSET_BINS);
            let alpha = 0.25 + 0.75 * (1.0 + v as f64).ln() / (1.0 + max).ln();
            let x0 = t as f64 * bin_s;
            rects.push(Rectangle::new(
                [
                    (x0, o as f64 * bpb),
                    ((x0 + bin_s).min(xmax), (o + 1) as f64 * bpb),
                ],
                color.mix(alpha).filled(),
            ));
        }
        chart
            .draw_series(rects)
            .map_err(perr)?
            .label(CLASSES[c])
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(perr)
}

fn histogram<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    rep: &TraceReport,
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    let all = rep.latency_histogram();
    let lo = all.iter().position(|&x| x > 0).unwrap_or(0);
    let hi = all.iter().rposition(|&x| x > 0).map_or(1, |x| x + 1);
    let edge = |i: usize| (crate::report::latency_bin_lower_ns(i) as f64).max(0.5);
    let ymax = all[lo..hi].iter().copied().max().unwrap_or(1).max(1) as f64 * 1.05;
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: latency histogram", escape_controls(&rep.name)),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((edge(lo)..edge(hi)).log_scale(), 0f64..ymax)
        .map_err(perr)?;
    chart
        .configure_mesh()
        .x_desc("latency (log scale)")
        .y_desc("I/Os")
        .x_label_formatter(&|v| label_ns(*v))
        .y_label_formatter(&|v| fmt_si(*v))
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(perr)?;
    let mut base = vec![0u64; LATENCY_BINS];
    for (c, class) in CLASSES.iter().enumerate() {
        let color = CLASS_COLORS[c];
        let h = &rep.agg.histogram[c * LATENCY_BINS..(c + 1) * LATENCY_BINS];
        let mut rects = Vec::new();
        for i in lo..hi {
            if h[i] == 0 {
                continue;
            }
            rects.push(Rectangle::new(
                [
                    (edge(i), base[i] as f64),
                    (edge(i + 1), (base[i] + h[i]) as f64),
                ],
                color.filled(),
            ));
            base[i] += h[i];
        }
        chart
            .draw_series(rects)
            .map_err(perr)?
            .label(*class)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 12))
        .draw()
        .map_err(perr)
}

/// Keeps the end of a long label (paths: the file name matters most), its control characters
/// escaped (they would make the SVG invalid XML).
fn shorten(s: &str, max_chars: usize) -> String {
    let s = escape_controls(s);
    let n = s.chars().count();
    if n <= max_chars {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - (max_chars - 3)).collect();
    format!("...{tail}")
}

fn bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    rows: &[(String, u64)],
) -> Result<(), AnalyzeError>
where
    DB::ErrorType: 'static,
{
    let n = rows.len().max(1);
    let xmax = rows.iter().map(|r| r.1).max().unwrap_or(1).max(1) as f64 * 1.1;
    let labels: Vec<String> = rows.iter().map(|r| shorten(&r.0, 48)).collect();
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(330)
        .build_cartesian_2d(0f64..xmax, (0..n as i32).into_segmented())
        .map_err(perr)?;
    // Row 0 (the largest) at the top.
    let ylab = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(k) if *k >= 0 && (*k as usize) < n => {
            labels.get(n - 1 - *k as usize).cloned().unwrap_or_default()
        }
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("I/Os")
        .x_label_formatter(&|v| fmt_si(*v))
        .y_labels(n)
        .y_label_formatter(&ylab)
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(perr)?;
    chart
        .draw_series(rows.iter().enumerate().map(|(i, r)| {
            let k = (n - 1 - i) as i32;
            Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(k)),
                    (r.1 as f64, SegmentValue::Exact(k + 1)),
                ],
                SERIES_COLORS[0].filled(),
            )
        }))
        .map_err(perr)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_font_parses() {
        assert!(plotters::style::register_font("iodump-test", FontStyle::Normal, FONT).is_ok());
    }

    #[test]
    fn partition_names() {
        for (name, disk) in [
            ("sda1", "sda"),
            ("nvme0n1p2", "nvme0n1"),
            ("mmcblk0p1", "mmcblk0"),
        ] {
            assert!(is_partition_name(name, disk), "{name} of {disk}");
        }
        for (name, disk) in [
            ("sdab", "sda"),
            ("sda", "sda"),
            ("nvme0n10", "nvme0n1"),
            ("sdb1", "sda"),
        ] {
            assert!(!is_partition_name(name, disk), "{name} of {disk}");
        }
    }

    #[test]
    fn labels() {
        assert_eq!(label_ns(1.5e6), "1.5 ms");
        assert_eq!(label_ns(2e9), "2 s");
        assert_eq!(shorten("/a/very/long/path", 10), "...ng/path");
        assert_eq!(shorten("abc", 10), "abc");
        assert_eq!(shorten("d\u{1b}[2Jd", 10), "d\\x1b[2Jd");
        assert_eq!(
            ImageFormat::from_path(Path::new("x.PNG")),
            Some(ImageFormat::Png)
        );
        assert_eq!(ImageFormat::from_path(Path::new("x.jpg")), None);
        assert_eq!(PlotKind::LatencyHeatmap.name(), "latency-heatmap");
    }
}
