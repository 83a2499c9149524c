//! Command-line definitions (clap) and the small commands that only glue flags to a library.

use std::fs::File;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use iodump_format::synth::{SynthParams, Workload};
use iodump_format::synth_writer::write_synth;
use iodump_format::WriterOptions;

/// Record every block I/O with eBPF, store it compactly, analyse and replay it offline.
#[derive(Debug, Parser)]
#[command(name = "iodump", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what traces hold: header, events, time span, devices, losses, integrity.
    Info(InfoArgs),
    /// Write a realistic synthetic trace (deterministic per seed), for tests and benchmarks.
    Synth(SynthArgs),
    /// Record every block I/O with eBPF, to a trace file or as lines on stdout.
    Record(Box<RecordArgs>),
    /// Write a trace's events as CSV (the original iodump's columns first), JSON lines, or
    /// a fio iolog (version 3) that `fio --read_iolog` replays.
    Export(ExportArgs),
    /// Query traces: summary, top files, top processes, latency percentiles.
    Analyze(AnalyzeArgs),
    /// Convert traces to Parquet tables (io, processes, files, devices, losses) in a
    /// directory, for DuckDB, polars, pandas, Spark (schemas/parquet-tables.md).
    Convert(ConvertArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TableFormat {
    /// Aligned columns for the terminal.
    Table,
    /// CSV with a header line.
    Csv,
    /// A JSON array of objects.
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ByArg {
    /// Number of I/Os.
    Ios,
    /// Bytes transferred.
    Bytes,
    /// p99 latency.
    Latency,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LatByArg {
    /// Everything together.
    All,
    /// Per device.
    Dev,
    /// Per operation.
    Op,
    /// Per process (comm).
    Proc,
    /// Per file.
    File,
}

#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// Trace files (.iod), or directories written by `iodump convert`; several form one
    /// dataset.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Key figures on one screen (the default).
    #[arg(long, group = "query")]
    pub summary: bool,
    /// Per file: I/Os, IOPS, bytes read and written, mean and p99 latency, main process.
    #[arg(long, group = "query")]
    pub top_files: bool,
    /// Per process: I/Os, IOPS, bytes read and written, MB/s.
    #[arg(long, group = "query")]
    pub top_procs: bool,
    /// Latency percentiles and the queue/device split.
    #[arg(long, group = "query")]
    pub latency: bool,
    /// IOPS, MB/s and p99 latency per interval, device and op.
    #[arg(long, group = "query")]
    pub timeline: bool,
    /// Interval of --timeline: 100ms, 1s, 10s, 1m…
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub interval: String,
    /// Sequential versus random: seek distances per device (btt's seek statistics).
    #[arg(long, group = "query")]
    pub seek: bool,
    /// Large sequential writes: runs of contiguous writes per device and file.
    #[arg(long, group = "query")]
    pub seq_writes: bool,
    /// Smallest run shown by --seq-writes: 1M, 64k, 4096…
    #[arg(long, default_value = "1M", value_name = "SIZE")]
    pub min_bytes: String,
    /// A polars SQL query over the tables io, processes and files, e.g.
    /// "SELECT op, count(*) AS n FROM io GROUP BY op".
    #[arg(long, group = "query", value_name = "QUERY")]
    pub sql: Option<String>,
    /// Ranking of --top-files.
    #[arg(long, value_enum, default_value = "ios")]
    pub by: ByArg,
    /// Grouping of --latency.
    #[arg(long = "group-by", value_enum, default_value = "all")]
    pub group_by: LatByArg,
    /// Only I/O matching EXPR (same language as `record -f`).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: TableFormat,
    /// Most rows shown.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Trace files (.iod); several form one dataset (columns trace and host tell them apart).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output directory (created): io.parquet, processes.parquet, files.parquet,
    /// devices.parquet, losses.parquet.
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Write a hive-style dataset partitioned by `host`, `date` (UTC day of the I/O) or
    /// both (`host,date`): DIR/io/host=H/date=D/part-0.parquet, DIR/files/host=H/…
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub partition_by: Vec<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormatArg {
    /// CSV: timestamp,pid,comm,iosize,rw,lba,path, then the other fields (RFC 4180).
    Csv,
    /// One JSON object per event.
    Jsonl,
    /// fio iolog version 3: one file per device (/dev/NAME), offsets in bytes on the device.
    FioIolog,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Trace file (.iod).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: ExportFormatArg,
    /// Output file (`-` for stdout).
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PrintArg {
    /// Aligned text, one line per I/O.
    Text,
    /// CSV: timestamp,pid,comm,iosize,rw,lba,path first (the original iodump's columns).
    Csv,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Device to record (sda, sda1, nvme0n1, dm-0, vda, zram0, /dev/X or MAJ:MIN); repeatable.
    /// A disk includes its partitions. Default: every device.
    #[arg(
        short = 'd',
        long = "device",
        visible_short_alias = 'p',
        value_name = "DEV"
    )]
    pub devices: Vec<String>,
    /// Write the trace to FILE (created mode 0600). Without it, print one line per I/O.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Stop after SECS seconds.
    #[arg(short = 't', long = "time", value_name = "SECS")]
    pub seconds: Option<f64>,
    /// Record a sample of the I/O: `10%` or `1/N` (per CPU, in the kernel).
    #[arg(long, value_name = "RATE")]
    pub sample: Option<String>,
    /// Only I/O matching EXPR, e.g. 'iosize > 1M && rw == W' (see
    /// schemas/filter-expressions.md); what it implies for size, op, pid and comm is applied
    /// in the kernel.
    #[arg(short = 'f', long = "filter", value_name = "EXPR")]
    pub filter: Option<String>,
    /// Only I/O submitted by this process id; repeatable.
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Only I/O submitted by a thread with this command name; repeatable.
    #[arg(long = "comm", value_name = "NAME")]
    pub comms: Vec<String>,
    /// Only I/O submitted by tasks in this cgroup v2 (a directory, or a path under the
    /// cgroup2 mount such as /system.slice/nginx.service) or below it.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// Only these operations: read, write, flush, discard, secure_erase, write_zeroes, other
    /// (comma-separated).
    #[arg(long, value_name = "OPS", value_delimiter = ',')]
    pub ops: Vec<String>,
    /// Only I/O of at least this many bytes.
    #[arg(long, value_name = "BYTES")]
    pub min_bytes: Option<u32>,
    /// Print one line per I/O in this format (also with -o).
    #[arg(long, value_enum)]
    pub print: Option<PrintArg>,
    /// Kernel ring buffer size in bytes (rounded up to a power of two; default 8 MiB).
    #[arg(long, value_name = "BYTES")]
    pub buffer_size: Option<u64>,
    /// Print the kernel side's counters at the end (tracked, emitted, merged, filtered…).
    #[arg(long)]
    pub stats: bool,
    /// Do not resolve file paths (I/O is still recorded).
    #[arg(long)]
    pub no_paths: bool,
    /// Metadata for the trace header, KEY=VALUE; repeatable.
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub metadata: Vec<String>,
    /// The command to run and record until it exits (after `--`); iodump exits with its status.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Trace files (.iod).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// One JSON object per file, one per line, instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WorkloadArg {
    /// fio-like 4k random reads plus background activity.
    Randread,
    /// Large sequential writes, writeback and journal.
    Seqwrite,
    /// A database: random 16k reads, redo log writes with fsync, journal, metadata.
    Oltp,
    /// A bit of everything, readahead, page faults, discards, errors.
    Mixed,
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Output trace file.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Number of events.
    #[arg(long, value_name = "N")]
    pub events: u64,
    /// Workload shape.
    #[arg(long, value_enum)]
    pub workload: WorkloadArg,
    /// Seed: the same seed gives the same trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Events per segment (smaller segments: finer damage granularity, slightly larger file).
    #[arg(long, value_name = "N", default_value_t = 65_536,
          value_parser = clap::value_parser!(u32).range(1..=4_194_304))]
    pub segment_events: u32,
}

pub fn run_synth(a: &SynthArgs) -> anyhow::Result<ExitCode> {
    let workload = match a.workload {
        WorkloadArg::Randread => Workload::RandRead,
        WorkloadArg::Seqwrite => Workload::SeqWrite,
        WorkloadArg::Oltp => Workload::Oltp,
        WorkloadArg::Mixed => Workload::Mixed,
    };
    let params = SynthParams {
        events: a.events,
        workload,
        seed: a.seed,
    };
    let f =
        File::create(&a.output).with_context(|| format!("cannot create {}", a.output.display()))?;
    let opts = WriterOptions {
        segment_events: a.segment_events as usize,
        ..WriterOptions::default()
    };
    let (summary, f) =
        write_synth(&params, f, opts).with_context(|| format!("writing {}", a.output.display()))?;
    f.sync_all()
        .with_context(|| format!("writing {}", a.output.display()))?;
    let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "iodump: wrote {} ({} events, {} lost, {} bytes, {:.2} bytes/event)",
        a.output.display(),
        summary.events,
        summary.lost_events,
        bytes,
        if summary.events > 0 {
            bytes as f64 / summary.events as f64
        } else {
            0.0
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run_export(a: &ExportArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::{export, ExportFormat};
    let r =
        iodump_format::Reader::open(&a.file).with_context(|| format!("{}", a.file.display()))?;
    let fmt = match a.format {
        ExportFormatArg::Csv => ExportFormat::Csv,
        ExportFormatArg::Jsonl => ExportFormat::Jsonl,
        ExportFormatArg::FioIolog => ExportFormat::FioIolog,
    };
    let s = if a.output.as_os_str() == "-" {
        export(&r, fmt, &mut std::io::stdout().lock())?
    } else {
        let mut f = File::create(&a.output)
            .with_context(|| format!("cannot create {}", a.output.display()))?;
        export(&r, fmt, &mut f)?
    };
    let mut damaged = s.damaged;
    damaged.extend(r.damage().iter().cloned());
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
        if s.events == 0 {
            anyhow::bail!(
                "{}: nothing could be read (first damage: {d})",
                a.file.display()
            );
        }
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

fn announced_events(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .filter_map(|f| iodump_format::Reader::open(f).ok())
        .map(|r| r.announced_events())
        .sum()
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
    let pb = progress_bar(total, "converting");
    let s = iodump_analyze::convert::convert_with_progress(&inputs, &a.output, part, &|n| {
        if let Some(pb) = &pb {
            pb.inc(n);
        }
    })?;
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    eprintln!(
        "iodump: converted {} events into {} files under {}",
        s.events,
        s.files.len(),
        a.output.display()
    );
    if let Some(d) = s.damaged.first() {
        if s.events == 0 {
            anyhow::bail!("nothing could be read (first damage: {d})");
        }
        eprintln!(
            "iodump: warning: {} damaged chunk(s) skipped (first: {d})",
            s.damaged.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_analyze(a: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::query::{self, Dataset};
    let filter = match &a.filter {
        Some(f) => Some(
            iodump_format::expr::Expr::parse(f)
                .map_err(|e| anyhow::anyhow!("bad --filter expression {f:?}: {e}"))?,
        ),
        None => None,
    };
    let paths: Vec<&std::path::Path> = a.files.iter().map(|p| p.as_path()).collect();
    let dirs = a.files.iter().filter(|p| p.is_dir()).count();
    let d = if dirs == 0 {
        let pb = progress_bar(announced_events(&a.files), "decoding");
        let d = Dataset::load_with_progress(&paths, filter.as_ref(), &|n| {
            if let Some(pb) = &pb {
                pb.inc(n);
            }
        })?;
        if let Some(pb) = pb {
            pb.finish_and_clear();
        }
        d
    } else if dirs == a.files.len() {
        if filter.is_some() {
            anyhow::bail!("--filter works on .iod traces only (use --sql on Parquet datasets)");
        }
        let mut d = Dataset::load_parquet(&a.files[0])?;
        for p in &a.files[1..] {
            d.append(Dataset::load_parquet(p)?)?;
        }
        d
    } else {
        anyhow::bail!(
            "give either .iod traces or directories written by `iodump convert`, not both"
        );
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
    print_table(a.format, &names, &rows);
    if let Some((trace, dmg)) = d.damaged.first() {
        eprintln!(
            "iodump: warning: {trace}: {} damaged chunk(s) skipped (first: {dmg})",
            d.damaged.len()
        );
        if d.io.height() == 0 {
            anyhow::bail!("nothing could be read");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_query(
    a: &AnalyzeArgs,
    d: &iodump_analyze::query::Dataset,
) -> anyhow::Result<iodump_analyze::query::DataFrame> {
    use iodump_analyze::query::{self, LatencyBy, RankBy};
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
        let min = iodump_format::expr::parse_number(&a.min_bytes)
            .filter(|v| *v >= 0.0)
            .ok_or_else(|| {
                anyhow::anyhow!("--min-bytes {}: give a size such as 1M", a.min_bytes)
            })?;
        query::seq_writes(d, min as u64, a.limit)?
    } else if let Some(q) = &a.sql {
        query::sql(d, q)?
    } else if a.latency {
        let by = match a.group_by {
            LatByArg::All => LatencyBy::All,
            LatByArg::Dev => LatencyBy::Dev,
            LatByArg::Op => LatencyBy::Op,
            LatByArg::Proc => LatencyBy::Proc,
            LatByArg::File => LatencyBy::File,
        };
        query::latency(d, by)?
    } else {
        query::summary(d)?
    })
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
    if !(ns >= 1e3 && ns.is_finite()) {
        anyhow::bail!("--interval {s}: at least 1us");
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
