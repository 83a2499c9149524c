//! The offline commands that need the analysis crate (`export`, `convert`, `analyze`,
//! `report`, `plot`);
//! left out of builds with `--no-default-features`.

use std::process::ExitCode;

use anyhow::Context;
use iodump_output::OutputFile;

use crate::cli::{
    AnalyzeArgs, ByArg, ConvertArgs, EngineArg, ExportArgs, ExportFormatArg, LatByArg, PlotArgs,
    PlotKindArg, ReportArgs, TableFormat,
};

pub fn run_export(a: &ExportArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::{export, ExportFormat};
    let r =
        iodump_format::Reader::open(&a.file).with_context(|| format!("{}", a.file.display()))?;
    let fmt = match a.format {
        ExportFormatArg::Csv => ExportFormat::Csv,
        ExportFormatArg::Jsonl => ExportFormat::Jsonl,
        ExportFormatArg::FioIolog => ExportFormat::FioIolog,
    };
    // A file output replaces what was there only once the export succeeded.
    let mut file = None;
    let s = if a.output.as_os_str() == "-" {
        export(&r, fmt, &mut std::io::stdout().lock())?
    } else {
        export(&r, fmt, file.insert(OutputFile::create(&a.output)?))?
    };
    let mut damaged = s.damaged;
    damaged.extend(r.damage().iter().cloned());
    if let Some(d) = damaged.first() {
        if s.events == 0 && s.skipped == 0 {
            anyhow::bail!(
                "{}: nothing could be read (first damage: {d})",
                a.file.display()
            );
        }
    }
    if let Some(f) = &mut file {
        f.commit()?;
    }
    eprintln!(
        "iodump: exported {} events{}",
        s.events,
        if s.skipped > 0 {
            format!(" ({} left out: operations fio cannot replay)", s.skipped)
        } else {
            String::new()
        }
    );
    if let Some(d) = damaged.first() {
        eprintln!(
            "iodump: warning: {}: {} damaged chunk(s) skipped (first: {d})",
            a.file.display(),
            damaged.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A progress bar on stderr over `total` events, only when stderr is a terminal.
pub fn progress_bar(total: u64, what: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() || total == 0 {
        return None;
    }
    let pb = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:40}] {human_pos}/{human_len} events ({per_sec}, {eta})",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    pb.set_style(style);
    pb.set_message(what.to_string());
    Some(pb)
}

/// Runs `f` with a progress callback that advances a bar on stderr (when it is a terminal),
/// then clears the bar.
fn with_progress<T>(total: u64, what: &str, f: impl FnOnce(&(dyn Fn(u64) + Sync)) -> T) -> T {
    let pb = progress_bar(total, what);
    let out = f(&|n| {
        if let Some(pb) = &pb {
            pb.inc(n);
        }
    });
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    out
}

/// One warning line when damaged chunks were skipped, or, when nothing could be read (no row,
/// and no filter that could explain it), one error line instead.
fn warn_damaged(
    damaged: &[(String, iodump_format::Damage)],
    rows: u64,
    filtered: bool,
) -> anyhow::Result<()> {
    if let Some((trace, dmg)) = damaged.first() {
        if rows == 0 && !filtered {
            anyhow::bail!("{trace}: nothing could be read (first damage: {dmg})");
        }
        eprintln!(
            "iodump: warning: {trace}: {} damaged chunk(s) skipped (first: {dmg})",
            damaged.len()
        );
    }
    Ok(())
}

pub fn run_convert(a: &ConvertArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::convert::Partitioning;
    use iodump_analyze::Input;
    let mut part = Partitioning::default();
    for k in &a.partition_by {
        match k.as_str() {
            "host" => part.host = true,
            "date" => part.date = true,
            other => anyhow::bail!("--partition-by {other}: the keys are host and date"),
        }
    }
    let mut readers = Vec::new();
    for f in &a.files {
        readers.push((
            f.file_name().map_or_else(
                || f.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
            iodump_format::Reader::open(f).with_context(|| format!("{}", f.display()))?,
        ));
    }
    let inputs: Vec<Input<'_>> = readers
        .iter()
        .map(|(name, r)| Input {
            name: name.clone(),
            reader: r,
        })
        .collect();
    let total: u64 = readers.iter().map(|(_, r)| r.announced_events()).sum();
    let s = with_progress(total, "converting", |tick| {
        iodump_analyze::convert::convert_with_progress(&inputs, &a.output, part, tick)
    })?;
    if let Some(d) = s.damaged.first() {
        if s.events == 0 {
            anyhow::bail!("nothing could be read (first damage: {d})");
        }
    }
    eprintln!(
        "iodump: converted {} events into {} files under {}",
        s.events,
        s.files.len(),
        a.output.display()
    );
    // (Nothing readable at all is the library's error: the directory is left as it was.)
    if let Some(d) = s.damaged.first() {
        eprintln!(
            "iodump: warning: {} damaged chunk(s) skipped (first: {d})",
            s.damaged.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_analyze(a: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::query::{self, Dataset};
    let filter = a
        .filter
        .as_deref()
        .map(|f| crate::cli::parse_filter("--filter", f))
        .transpose()?;
    let paths: Vec<&std::path::Path> = a.files.iter().map(|p| p.as_path()).collect();
    let dirs = a.files.iter().filter(|p| p.is_dir()).count();
    if dirs > 0 && dirs < a.files.len() {
        anyhow::bail!(
            "give either .iod traces or directories written by `iodump convert`, not both"
        );
    }
    if a.sql.is_none() && a.engine == EngineArg::OnePass {
        // Answered in one pass over the traces or Parquet row groups, without the polars
        // table.
        let by = match a.by {
            ByArg::Ios => query::RankBy::Ios,
            ByArg::Bytes => query::RankBy::Bytes,
            ByArg::Latency => query::RankBy::Latency,
        };
        let interval_ns = if a.timeline {
            parse_interval(&a.interval)?
        } else {
            0
        };
        let min_bytes = if a.seq_writes {
            parse_min_bytes(&a.min_bytes)?
        } else {
            0
        };
        let f = filter.as_ref();
        let total = iodump_analyze::fast::announced_rows(&paths);
        let fr = with_progress(total, "decoding", |tick| {
            use iodump_analyze::fast;
            if a.top_files {
                fast::top_files(&paths, f, by, a.limit, tick).map(Some)
            } else if a.top_procs {
                fast::top_procs(&paths, f, a.limit, tick).map(Some)
            } else if a.timeline {
                fast::timeline(&paths, f, interval_ns, tick).map(Some)
            } else if a.seek {
                fast::seek(&paths, f, tick)
            } else if a.seq_writes {
                fast::seq_writes(&paths, f, min_bytes, a.limit, tick)
            } else if a.latency {
                fast::latency(&paths, f, lat_by(a.group_by), tick).map(Some)
            } else {
                fast::summary(&paths, f, tick).map(Some)
            }
        })?;
        if let Some(fr) = fr {
            let (names, rows) = query::rows(&fr.frame);
            warn_damaged(&fr.damaged, fr.events, f.is_some())?;
            print_table(a.format, &names, &rows);
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "iodump: note: I/Os are too far out of time order in the trace to follow them in \
             one pass; sorting the whole table instead (slower, more memory)"
        );
    }
    if dirs == 0 && filter.is_none() {
        check_table_fits(iodump_analyze::fast::announced_rows(&paths))?;
    }
    let d = if dirs == 0 {
        with_progress(
            iodump_analyze::fast::announced_rows(&paths),
            "decoding",
            |tick| Dataset::load_with_progress(&paths, filter.as_ref(), tick),
        )?
    } else {
        let mut d = Dataset::load_parquet(&a.files[0], filter.as_ref())?;
        for p in &a.files[1..] {
            d.append(Dataset::load_parquet(p, filter.as_ref())?)?;
        }
        d
    };
    // The query engine reports some problems by panicking: turn that into one error line.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_query(a, &d)));
    std::panic::set_hook(previous_hook);
    let df = match result {
        Ok(r) => r?,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            anyhow::bail!("the query engine failed: {msg}");
        }
    };
    let (names, rows) = query::rows(&df);
    warn_damaged(&d.damaged, d.io.height() as u64, filter.is_some())?;
    print_table(a.format, &names, &rows);
    Ok(ExitCode::SUCCESS)
}

fn run_query(
    a: &AnalyzeArgs,
    d: &iodump_analyze::query::Dataset,
) -> anyhow::Result<iodump_analyze::query::DataFrame> {
    use iodump_analyze::query::{self, RankBy};
    Ok(if a.top_files {
        let by = match a.by {
            ByArg::Ios => RankBy::Ios,
            ByArg::Bytes => RankBy::Bytes,
            ByArg::Latency => RankBy::Latency,
        };
        query::top_files(d, by, a.limit)?
    } else if a.top_procs {
        query::top_procs(d, a.limit)?
    } else if a.timeline {
        let ns = parse_interval(&a.interval)?;
        query::timeline(d, ns)?
    } else if a.seek {
        query::seek(d)?
    } else if a.seq_writes {
        query::seq_writes(d, parse_min_bytes(&a.min_bytes)?, a.limit)?
    } else if let Some(q) = &a.sql {
        query::sql(d, q)?
    } else if a.latency {
        query::latency(d, lat_by(a.group_by))?
    } else {
        query::summary(d)?
    })
}

/// Bytes of memory the polars `io` table takes per event (measured: 4.5 GB for 10M events).
const TABLE_BYTES_PER_EVENT: u64 = 460;

/// Refuses, in one line, to build a polars table that cannot fit in the memory available
/// (the process would be killed part-way instead).
fn check_table_fits(events: u64) -> anyhow::Result<()> {
    let need = events.saturating_mul(TABLE_BYTES_PER_EVENT);
    let avail = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    if let Some(avail) = avail {
        if need > avail {
            anyhow::bail!(
                "the in-memory table of {events} events needs about {:.1} GB and {:.1} GB are \
                 available: narrow it with --filter, or `iodump convert` the trace and query \
                 the Parquet with DuckDB",
                need as f64 / 1e9,
                avail as f64 / 1e9
            );
        }
    }
    Ok(())
}

/// `--min-bytes`: 1M, 64k, 4096…
fn parse_min_bytes(s: &str) -> anyhow::Result<u64> {
    iodump_format::expr::parse_number(s)
        .filter(|v| *v >= 0.0)
        .map(|v| v as u64)
        .ok_or_else(|| anyhow::anyhow!("--min-bytes {s}: give a size such as 1M"))
}

fn lat_by(g: LatByArg) -> iodump_analyze::query::LatencyBy {
    use iodump_analyze::query::LatencyBy;
    match g {
        LatByArg::All => LatencyBy::All,
        LatByArg::Dev => LatencyBy::Dev,
        LatByArg::Op => LatencyBy::Op,
        LatByArg::Proc => LatencyBy::Proc,
        LatByArg::File => LatencyBy::File,
    }
}

/// `100ms`, `1s`, `10s`, `1m`, `1h` → nanoseconds.
fn parse_interval(s: &str) -> anyhow::Result<i64> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60e9)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600e9)
    } else {
        anyhow::bail!("--interval {s}: give a duration such as 100ms, 1s, 1m")
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--interval {s}: give a duration such as 100ms, 1s, 1m"))?;
    let ns = (v * mult).round();
    if ns.is_nan() {
        anyhow::bail!("--interval {s}: give a duration such as 100ms, 1s, 1m");
    }
    if ns < 1e3 {
        anyhow::bail!("--interval {s}: at least 1us");
    }
    if ns > i64::MAX as f64 {
        anyhow::bail!("--interval {s}: at most 292 years (2562047h)");
    }
    Ok(ns as i64)
}

fn print_table(fmt: TableFormat, names: &[String], rows: &[Vec<Option<String>>]) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match fmt {
        TableFormat::Table => {
            let mut w: Vec<usize> = names.iter().map(|n| n.chars().count()).collect();
            for r in rows {
                for (i, c) in r.iter().enumerate() {
                    w[i] = w[i].max(c.as_deref().unwrap_or("-").chars().count());
                }
            }
            let line = |cells: Vec<&str>| -> String {
                cells
                    .iter()
                    .enumerate()
                    .map(|(i, c)| format!("{c:<width$}", width = w[i]))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_string()
            };
            let _ = writeln!(out, "{}", line(names.iter().map(|s| s.as_str()).collect()));
            for r in rows {
                let _ = writeln!(
                    out,
                    "{}",
                    line(r.iter().map(|c| c.as_deref().unwrap_or("-")).collect())
                );
            }
        }
        TableFormat::Csv => {
            let esc = |s: &str| {
                let mut v = Vec::new();
                iodump_format::text::escape_csv(&mut v, s.as_bytes());
                String::from_utf8_lossy(&v).into_owned()
            };
            let _ = writeln!(
                out,
                "{}",
                names.iter().map(|n| esc(n)).collect::<Vec<_>>().join(",")
            );
            for r in rows {
                let _ = writeln!(
                    out,
                    "{}",
                    r.iter()
                        .map(|c| esc(c.as_deref().unwrap_or("")))
                        .collect::<Vec<_>>()
                        .join(",")
                );
            }
        }
        TableFormat::Json => {
            let arr: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    let mut m = serde_json::Map::new();
                    for (n, c) in names.iter().zip(r) {
                        let v = match c {
                            None => serde_json::Value::Null,
                            Some(s) => {
                                if let Ok(i) = s.parse::<u64>() {
                                    serde_json::Value::from(i)
                                } else {
                                    s.parse::<f64>()
                                        .ok()
                                        .filter(|f| f.is_finite())
                                        .and_then(serde_json::Number::from_f64)
                                        .map(serde_json::Value::Number)
                                        .unwrap_or_else(|| serde_json::Value::String(s.clone()))
                                }
                            }
                        };
                        m.insert(n.clone(), v);
                    }
                    serde_json::Value::Object(m)
                })
                .collect();
            let _ = writeln!(out, "{}", serde_json::Value::Array(arr));
        }
    }
}

fn trace_name(p: &std::path::Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

pub fn run_report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let mut readers = Vec::new();
    for f in &a.files {
        readers.push((
            trace_name(f),
            iodump_format::Reader::open(f).with_context(|| format!("{}", f.display()))?,
        ));
    }
    let inputs: Vec<(String, &iodump_format::Reader)> =
        readers.iter().map(|(n, r)| (n.clone(), r)).collect();
    let total: u64 = readers.iter().map(|(_, r)| r.announced_events()).sum();
    let s = with_progress(total, "aggregating", |tick| {
        iodump_analyze::report::write_report(&inputs, &a.output, tick)
    })?;
    eprintln!(
        "iodump: wrote {} ({} events, {} bytes)",
        a.output.display(),
        s.events,
        s.html_bytes
    );
    if let Some((trace, d)) = s.damage.first() {
        eprintln!(
            "iodump: warning: {} damaged chunk(s) skipped, the report shows what could be decoded (first: {trace}: {d})",
            s.damage.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_plot(a: &PlotArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::plot::{ImageFormat, PlotKind, PlotOptions};
    if ImageFormat::from_path(&a.output).is_none() {
        anyhow::bail!(
            "{}: the output must end in .svg or .png",
            a.output.display()
        );
    }
    // Refused before the work (plot() creates it once the aggregation is done).
    iodump_output::check(&a.output)?;
    let r =
        iodump_format::Reader::open(&a.file).with_context(|| format!("{}", a.file.display()))?;
    let kind = match a.kind {
        PlotKindArg::Iops => PlotKind::Iops,
        PlotKindArg::Throughput => PlotKind::Throughput,
        PlotKindArg::LatencyHeatmap => PlotKind::LatencyHeatmap,
        PlotKindArg::Offset => PlotKind::Offset,
        PlotKindArg::LatencyHistogram => PlotKind::LatencyHistogram,
        PlotKindArg::TopProcs => PlotKind::TopProcs,
        PlotKindArg::TopFiles => PlotKind::TopFiles,
    };
    let rep = with_progress(r.announced_events(), "aggregating", |tick| {
        iodump_analyze::report::aggregate_with_progress(&trace_name(&a.file), &r, tick)
    });
    let opts = PlotOptions {
        kind,
        width_px: a.width,
        height_px: a.height,
        device: a.device.clone(),
    };
    iodump_analyze::plot::plot(&rep, &opts, &a.output)?;
    eprintln!(
        "iodump: wrote {} ({} of {} events)",
        a.output.display(),
        kind.name(),
        rep.agg.events
    );
    if let Some(d) = rep.damage.first() {
        eprintln!(
            "iodump: warning: {}: {} damaged chunk(s) skipped, the plot shows what could be decoded (first: {d})",
            a.file.display(),
            rep.damage.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("250ms").unwrap(), 250_000_000);
        assert_eq!(parse_interval("1us").unwrap(), 1_000);
        assert_eq!(
            parse_interval("2562047h").unwrap(),
            9_223_369_200_000_000_000
        );
        for (bad, why) in [
            ("0.5us", "at least 1us"),
            ("-1s", "at least 1us"),
            ("1e-300s", "at least 1us"),
            ("1e300s", "at most 292 years"),
            ("infs", "at most 292 years"),
            ("1e12s", "at most 292 years"),
            ("nans", "such as"),
            ("5", "such as"),
        ] {
            let e = parse_interval(bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--interval {bad}: ")) && e.contains(why),
                "{e}"
            );
        }
    }
}
