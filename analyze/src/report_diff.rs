//! `iodump report A B -o diff.html`: the comparison of `iodump diff` as one
//! self-contained page.
//!
//! This module owns that page: the data it embeds (each side's latency CDF from the report's
//! latency histogram, its IOPS and throughput per time bin from the report's aggregation
//! ([`crate::report::aggregate_with_progress`]), and the largest changes of
//! [`crate::diff::diff`]), and its template and script (`assets/diff.html`, `assets/diff.js`;
//! the style is the report's). Like the report, nothing in it grows with the number of I/Os.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::diff::{diff, Diff, DiffBy, DiffConfig};
use crate::input::InputPath;
use crate::report::{
    aggregate_with_progress, fill, latency_bin_lower_ns, write_page, TraceReport, TIME_BINS,
};
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
}

/// The binned picture of one side (a trace, or a recording's parts as one).
fn side(path: &Path, progress: &(dyn Fn(u64) + Sync)) -> Result<TraceReport, AnalyzeError> {
    let inputs = InputPath::expand(&[path.to_path_buf()])?;
    let [input] = &inputs[..] else {
        return Err(AnalyzeError::Query {
            message: format!(
                "{}: give one trace or one recording per side, not {}",
                path.display(),
                inputs.len()
            ),
        });
    };
    let r = input.open_trace().map_err(|e| match e {
        AnalyzeError::Read(source) => AnalyzeError::Open {
            path: path.to_path_buf(),
            source,
        },
        e => e,
    })?;
    Ok(aggregate_with_progress(&input.name(), &r, progress))
}

/// One side's JSON: name, I/Os, duration, I/Os and bytes per time bin (all devices and ops),
/// and the latency CDF as (upper edge of a histogram bin in ns, share of I/Os at or below).
fn side_json(t: &TraceReport) -> Value {
    let mut ios = vec![0u64; TIME_BINS];
    let mut bytes = vec![0u64; TIME_BINS];
    for d in &t.agg.devices {
        for (i, &n) in d.ios.iter().enumerate() {
            ios[i % TIME_BINS] += u64::from(n);
        }
        for (i, &b) in d.bytes.iter().enumerate() {
            bytes[i % TIME_BINS] += b;
        }
    }
    // The bins that hold the recording (the last ones are empty past its end).
    let used = ((t.span_ns / t.bin_ns.max(1)) as usize + 1).min(TIME_BINS);
    let hist = t.latency_histogram();
    let total: u64 = hist.iter().sum();
    let mut cdf = Vec::new();
    let mut seen = 0u64;
    for (i, &c) in hist.iter().enumerate() {
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
        "events": t.agg.events,
        "duration_ns": t.span_ns,
        "bin_ns": t.bin_ns,
        "ios": &ios[..used],
        "bytes": &bytes[..used],
        "latency_cdf": cdf,
    })
}

/// The page's data: both sides and the largest changes.
fn page_data(a: &TraceReport, b: &TraceReport, d: &Diff) -> Value {
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
    let (ra, rb) = (side(&pa, progress)?, side(&pb, progress)?);
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
    })
}
