//! `iodump report A B -o diff.html`: the comparison of `iodump diff` as one
//! self-contained page.
//!
//! This module owns that page: the data it embeds (each side's latency CDF in the report's
//! latency bins and its IOPS and throughput per time bin, binned through the one-pass driver
//! from the same inputs as the comparison, traces or Parquet datasets, and the largest changes
//! of [`crate::diff::diff`]), and its script (`assets/diff.js`; the page and style are the
//! report's). Like the report, nothing in it grows with the number of I/Os.

use std::path::{Path, PathBuf};

use iodump_format::expr::Expr;
use iodump_format::segment::{col, Columns};
use iodump_format::{EventBatch, Header};
use serde_json::{json, Value};

use crate::diff::{diff, Diff, DiffBy, DiffConfig};
use crate::input::InputPath;
use crate::onepass::{pass, Layers, Rows};
use crate::report::{fill, latency_bin, latency_bin_lower_ns, write_page, LATENCY_BINS, TIME_BINS};
use crate::AnalyzeError;

// The report's page and style (the script sets the page's heading), this module's script.
const TEMPLATE: &str = include_str!("../assets/report.html");
const STYLE: &str = include_str!("../assets/report.css");
const SCRIPT: &str = include_str!("../assets/diff.js");

/// Rows of the table of changes.
pub const DIFF_ROWS: usize = 40;

/// What [`write_diff_report`] did.
#[derive(Clone, Debug, Default)]
pub struct DiffReportSummary {
    /// I/Os of A and of B.
    pub events: [u64; 2],
    /// Figures that changed significantly.
    pub significant: usize,
    /// Bytes of HTML written.
    pub html_bytes: u64,
    /// Damaged chunks skipped, of A then B (only with [`DiffConfig::allow_damaged`]).
    pub damaged: Vec<(String, iodump_format::Damage)>,
}

/// One side's picture, of the I/Os the comparison's filter keeps: I/Os and bytes per time
/// bin from its first I/O, and its latency histogram (the report's bins).
struct Picture {
    name: String,
    events: u64,
    span_ns: u64,
    bin_ns: u64,
    ios: Vec<u64>,
    bytes: Vec<u64>,
    latency: Vec<u64>,
}

/// What a worker bins: I/Os, bytes and latencies.
#[derive(Clone)]
struct Bins {
    ios: Vec<u64>,
    bytes: Vec<u64>,
    latency: Vec<u64>,
}

impl Bins {
    fn new() -> Bins {
        Bins {
            ios: vec![0; TIME_BINS],
            bytes: vec![0; TIME_BINS],
            latency: vec![0; LATENCY_BINS],
        }
    }

    fn merge(&mut self, o: Bins) {
        for (a, b) in [
            (&mut self.ios, o.ios),
            (&mut self.bytes, o.bytes),
            (&mut self.latency, o.latency),
        ] {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }
}

/// The picture of one side (a trace, a recording's parts, a Parquet dataset), through the
/// one-pass driver as the comparison reads it: a pass for the time range of the kept I/Os
/// (a trace's footer gives it without decoding), then one that bins them.
fn picture(
    path: &Path,
    filter: Option<&Expr>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Picture, AnalyzeError> {
    let inputs = InputPath::expand_recording(&[path.to_path_buf()])?;
    let name = inputs.first().map_or_else(String::new, InputPath::name);
    let nothing = |_: &mut (), _: &Header, _: &EventBatch, _: Rows<'_>| {};
    let range = pass(
        Columns::NONE,
        &inputs,
        filter,
        Layers::Each,
        &|_| {},
        || (),
        nothing,
        |_, _| {},
        |_| {},
    )?
    .ts_range;
    let (t0_ns, t1_ns) = range.unwrap_or((0, 0));
    let span_ns = t1_ns.saturating_sub(t0_ns).max(0) as u64;
    // Bins cover [t0, t0 + TIME_BINS * bin_ns), which holds t1.
    let bin_ns = span_ns / TIME_BINS as u64 + 1;
    let mut bins = Bins::new();
    let want = Columns::of(&[col::TIMESTAMP_NS, col::BYTES, col::LATENCY_NS]);
    let info = pass(
        want,
        &inputs,
        filter,
        Layers::Once,
        progress,
        Bins::new,
        |acc, h, b, rows| {
            for &k in rows.keep {
                let i = k as usize;
                let since_ns = h.to_utc_ns(b.timestamp_ns[i]).saturating_sub(t0_ns).max(0) as u64;
                let t = ((since_ns / bin_ns) as usize).min(TIME_BINS - 1);
                acc.ios[t] += 1;
                acc.bytes[t] += u64::from(b.bytes[i]);
                acc.latency[latency_bin(b.latency_ns[i])] += 1;
            }
        },
        Bins::merge,
        |t| bins.merge(t.acc),
    )?;
    Ok(Picture {
        name,
        events: info.kept,
        span_ns,
        bin_ns,
        ios: bins.ios,
        bytes: bins.bytes,
        latency: bins.latency,
    })
}

/// One side's JSON: name, I/Os, duration, I/Os and bytes per time bin, and the latency CDF
/// as (upper edge of a histogram bin in ns, share of I/Os at or below).
fn side_json(t: &Picture) -> Value {
    // The bins that hold the recording (the last ones are empty past its end).
    let used = ((t.span_ns / t.bin_ns.max(1)) as usize + 1).min(TIME_BINS);
    let total: u64 = t.latency.iter().sum();
    let mut cdf = Vec::new();
    let mut seen = 0u64;
    for (i, &c) in t.latency.iter().enumerate() {
        if c == 0 {
            continue;
        }
        if cdf.is_empty() {
            cdf.push(json!([latency_bin_lower_ns(i), 0.0]));
        }
        seen += c;
        cdf.push(json!([
            latency_bin_lower_ns(i + 1).saturating_sub(1),
            seen as f64 / total as f64
        ]));
    }
    json!({
        "name": t.name,
        "events": t.events,
        "duration_ns": t.span_ns,
        "bin_ns": t.bin_ns,
        "ios": &t.ios[..used],
        "bytes": &t.bytes[..used],
        "latency_cdf": cdf,
    })
}

/// The page's data: both sides and the largest changes.
fn page_data(a: &Picture, b: &Picture, d: &Diff) -> Value {
    let (columns, rows) = d.table(DiffBy::Change, DIFF_ROWS);
    json!({
        "a": side_json(a),
        "b": side_json(b),
        "columns": columns,
        "rows": rows,
        "significant": d.significant(),
    })
}

/// Compares `cfg.a` with `cfg.b` (one trace or recording each) and writes the page to `out`
/// (created first, so that a refused output fails before the work; replaced only once the
/// page is complete).
pub fn write_diff_report(
    cfg: &DiffConfig,
    out: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DiffReportSummary, AnalyzeError> {
    let file = iodump_output::OutputFile::create(out)?;
    let one = |v: &[PathBuf]| -> Result<PathBuf, AnalyzeError> {
        match v {
            [p] => Ok(p.clone()),
            _ => Err(AnalyzeError::Query {
                message: "report --diff compares two traces: give A and B".into(),
            }),
        }
    };
    let (pa, pb) = (one(&cfg.a)?, one(&cfg.b)?);
    let d = diff(cfg, progress)?;
    let (fa, fb) = (cfg.side_filter(true), cfg.side_filter(false));
    let (mut ra, mut rb) = (
        picture(&pa, fa.as_ref(), progress)?,
        picture(&pb, fb.as_ref(), progress)?,
    );
    // Two sides of one file name (`a/run.iod`, `b/run.iod`) are named by their paths as
    // given, as the analysis names its traces.
    if ra.name == rb.name {
        ra.name = pa.display().to_string();
        rb.name = pb.display().to_string();
    }
    let data = page_data(&ra, &rb, &d).to_string().replace('<', "\\u003c");
    let title = format!("{} vs {}", ra.name, rb.name)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let script = SCRIPT.replace("</script", "<\\/script");
    let html = fill(
        TEMPLATE,
        &[
            ("/*IODUMP_STYLE*/", STYLE),
            ("IODUMP_TITLE", &title),
            ("IODUMP_DATA", &data),
            ("/*IODUMP_SCRIPT*/", &script),
        ],
    );
    write_page(file, out, &html)?;
    Ok(DiffReportSummary {
        events: [d.a.events, d.b.events],
        significant: d.significant(),
        html_bytes: html.len() as u64,
        damaged: [&d.a, &d.b]
            .into_iter()
            .flat_map(|s| s.damaged.iter().cloned())
            .collect(),
    })
}
