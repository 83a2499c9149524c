//! The offline commands that need the analysis crate (`export`, `convert`, `analyze`,
//! `report`, `plot`);
//! left out of builds with `--no-default-features`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use iodump_analyze::ColumnKind;
use iodump_format::recording::{open_trace, open_traces};
use iodump_format::Damage;
use iodump_output::OutputFile;

use crate::args::{usage, usage_bail, TableFormat};

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
    /// Interval of --timeline: 100ms, 1s, 10s, 1m… (default 1s).
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,
    /// Sequential versus random: seek distances per device (btt's seek statistics).
    #[arg(long, group = "query")]
    pub seek: bool,
    /// Large sequential writes: runs of contiguous writes per device and file.
    #[arg(long, group = "query")]
    pub seq_writes: bool,
    /// Smallest run shown by --seq-writes: 1M, 64k, 4096… (default 1M).
    #[arg(long, value_name = "SIZE")]
    pub min_bytes: Option<String>,
    /// A polars SQL query over the tables io, processes and files, e.g.
    /// "SELECT op, count(*) AS n FROM io GROUP BY op".
    #[arg(long, group = "query", value_name = "QUERY")]
    pub sql: Option<String>,
    /// Ranking of --top-files (default ios).
    #[arg(long, value_enum)]
    pub by: Option<ByArg>,
    /// Grouping of --latency (default all).
    #[arg(long = "group-by", value_enum)]
    pub group_by: Option<LatByArg>,
    /// Only I/O matching EXPR (same language as `record -f`).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Only I/O of this device, named as `iodump info` lists it (sda, sda1, dm-0, md127, or
    /// MAJ:MIN); repeatable. The disk below LVM, dm-crypt or md RAID answers with the files and
    /// processes its I/O served.
    #[arg(short = 'd', long = "device", value_name = "DEV")]
    pub devices: Vec<String>,
    /// Only I/O of tasks of this container or pod, from the trace's cgroups table: a prefix
    /// of the container id or pod UID, `RUNTIME:ID` or `pod:UID` (as `record --container`).
    #[arg(long, value_name = "ID")]
    pub container: Option<String>,
    /// Only I/O of tasks in this cgroup or below it, from the trace's cgroups table: a path
    /// under the cgroup2 mount (/system.slice/nginx.service) or under /sys/fs/cgroup.
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: TableFormat,
    /// Most rows shown by --top-files, --top-procs and --seq-writes (0: all; default 20).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Query engine: `one-pass` answers every query but --sql while reading the input once
    /// (little memory); `polars` loads every I/O into a polars table first (what --sql uses;
    /// about 450 bytes per I/O). Both give the same rows.
    #[arg(long, value_enum, default_value = "one-pass")]
    pub engine: EngineArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// One parallel pass over trace segments or Parquet row groups.
    OnePass,
    /// The whole polars table.
    Polars,
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
    /// Only the I/Os this keeps in the io table (the -f language), e.g. a window of time of
    /// a day of parts; the segments a window leaves out are not read. The processes, files,
    /// devices and losses tables stay whole.
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Trace files (.iod). One: its report. Two: the comparison of B with A (the baseline),
    /// as `iodump diff A B` (which also takes Parquet datasets). Three or more (or two with
    /// `--sections`): one section per trace, each with its own time axis.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output HTML file.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Compare two traces (A, the baseline, and B) as `iodump diff` does, on one page: latency
    /// CDFs overlaid, IOPS and throughput timelines aligned at their starts, the largest
    /// changes. What two traces give anyway; with any other number, an error.
    #[arg(long, conflicts_with = "sections")]
    pub diff: bool,
    /// One section per trace, also for two traces (which are otherwise compared).
    #[arg(long)]
    pub sections: bool,
    /// When two traces are compared: compare what is intact of a damaged one (refused by
    /// default: the comparison would be biased). A report of one trace or of sections shows
    /// what can be decoded anyway.
    #[arg(long)]
    pub allow_damaged: bool,
    /// Only the I/Os this keeps (the -f language), e.g. a window of time of a day of parts:
    /// `time >= 2026-12-04T03:10:00Z && time < 2026-12-04T03:20:00Z`. The plots' time axes
    /// span the kept I/Os. When two traces are compared, as `iodump diff --filter`.
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// When two traces are compared: only the I/Os this keeps in A (as `iodump diff
    /// --filter-a`: two windows of time of one recording).
    #[arg(long = "filter-a", value_name = "EXPR")]
    pub filter_a: Option<String>,
    /// When two traces are compared: only the I/Os this keeps in B.
    #[arg(long = "filter-b", value_name = "EXPR")]
    pub filter_b: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlotKindArg {
    /// I/O per second over time, per device and op.
    Iops,
    /// Bytes per second over time, per device and op.
    Throughput,
    /// Latency over time as a heatmap (log latency bins).
    LatencyHeatmap,
    /// Offset over time on one device, coloured by op (seekwatcher's view).
    Offset,
    /// Latency histogram (log bins), stacked by op.
    LatencyHistogram,
    /// Top processes by I/Os.
    TopProcs,
    /// Top files by I/Os.
    TopFiles,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Trace file (.iod).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// What to draw.
    #[arg(long, value_enum)]
    pub kind: PlotKindArg,
    /// Output file: .svg or .png.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Image width in pixels.
    #[arg(long, default_value_t = 1200)]
    pub width: u32,
    /// Image height in pixels.
    #[arg(long, default_value_t = 600)]
    pub height: u32,
    /// Offset plot: the device (name such as nvme0n1, or MAJ:MIN); default the busiest.
    #[arg(long, value_name = "DEV")]
    pub device: Option<String>,
    /// Only the I/Os this keeps (the -f language; a window of time, a device, a path…).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ExportFormatArg {
    /// CSV: timestamp,pid,comm,iosize,rw,lba,path, then the other fields (RFC 4180).
    Csv,
    /// One JSON object per event.
    Jsonl,
    /// fio iolog version 3: one file per device (/dev/NAME), offsets in bytes on the device.
    FioIolog,
    /// Perfetto trace (TrackEvent protobuf) for ui.perfetto.dev: a track per device with a
    /// slice per I/O (queue and device time nested), a track per process, counters.
    Perfetto,
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
    /// Only the I/Os this keeps (the -f language: `time >= 2026-12-04T03:12:00Z && time <
    /// 2026-12-04T03:15:00Z`, `comm == postgres`).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
}

pub fn run_export(a: &ExportArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::{export, ExportFormat};
    note_snapshots_left_out(std::slice::from_ref(&a.file));
    let filter = a
        .filter
        .as_deref()
        .map(|f| crate::args::parse_filter("--filter", f))
        .transpose()?;
    let r = open_trace(&a.file)?.reader;
    let fmt = match a.format {
        ExportFormatArg::Csv => ExportFormat::Csv,
        ExportFormatArg::Jsonl => ExportFormat::Jsonl,
        ExportFormatArg::FioIolog => ExportFormat::FioIolog,
        ExportFormatArg::Perfetto => ExportFormat::Perfetto,
    };
    // A file output replaces what was there only once the export succeeded.
    let mut file = None;
    if a.output.as_os_str() != "-" {
        iodump_output::check_not_input(&a.output, std::slice::from_ref(&a.file))?;
    }
    let s = if a.output.as_os_str() == "-" {
        export(&r, fmt, filter.as_ref(), &mut std::io::stdout().lock())?
    } else {
        export(
            &r,
            fmt,
            filter.as_ref(),
            file.insert(OutputFile::create(&a.output)?),
        )?
    };
    let mut damaged = s.damaged;
    damaged.extend(r.damage().iter().cloned());
    if let Some(d) = damaged.first() {
        if s.events == 0 && s.skipped == 0 && s.lower == 0 {
            anyhow::bail!(
                "{}: nothing could be read (first damage: {d})",
                a.file.display()
            );
        }
    }
    if let Some(f) = &mut file {
        f.commit()?;
    }
    let mut left_out = Vec::new();
    if s.skipped > 0 {
        left_out.push(format!("{} operations fio cannot replay", s.skipped));
    }
    if s.lower > 0 {
        left_out.push(format!(
            "{} sent down by a stacked device whose own I/O is in the log",
            s.lower
        ));
    }
    eprintln!(
        "iodump: exported {} events{}",
        s.events,
        if left_out.is_empty() {
            String::new()
        } else {
            format!(" (left out: {})", left_out.join("; "))
        }
    );
    if let Some(d) = damaged.first() {
        eprintln!(
            "iodump: warning: {}: {} skipped (first: {d})",
            a.file.display(),
            Damage::count_in_words(&damaged)
        );
    }
    if s.events == 0 && s.skipped == 0 && s.lower == 0 {
        if filter.is_some() {
            eprintln!(
                "iodump: warning: --filter keeps no I/O of {}: the export holds none",
                a.file.display()
            );
        } else if damaged.is_empty() {
            warn_no_io(false, &a.file.display().to_string());
        }
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
pub(crate) fn with_progress<T>(
    total: u64,
    what: &str,
    f: impl FnOnce(&(dyn Fn(u64) + Sync)) -> T,
) -> T {
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

pub fn run_convert(a: &ConvertArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::to_parquet::Partitioning;
    use iodump_analyze::Input;
    note_snapshots_left_out(&a.files);
    let mut part = Partitioning::default();
    for k in &a.partition_by {
        match k.as_str() {
            "host" => part.host = true,
            "date" => part.date = true,
            other => usage_bail!("--partition-by {other}: the keys are host and date"),
        }
    }
    // A dataset beside trace files makes their directory two inputs in one.
    if iodump_analyze::input::is_trace_dir(&a.output) {
        anyhow::bail!(
            "-o {}: it holds trace files (*.iod); write the dataset to a directory of its own",
            a.output.display()
        );
    }
    let readers: Vec<(String, iodump_format::Reader)> = open_traces(&a.files)?
        .into_iter()
        .map(|t| (t.name, t.reader))
        .collect();
    let inputs: Vec<Input<'_>> = readers
        .iter()
        .map(|(name, r)| Input {
            name: name.clone(),
            reader: r,
        })
        .collect();
    let filter = a
        .filter
        .as_deref()
        .map(|f| crate::args::parse_filter("--filter", f))
        .transpose()?;
    let total: u64 = readers.iter().map(|(_, r)| r.announced_events()).sum();
    let s = with_progress(total, "converting", |tick| {
        iodump_analyze::to_parquet::convert_with_progress(
            &inputs,
            &a.output,
            part,
            filter.as_ref(),
            tick,
        )
    })?;
    if s.events == 0 && s.damaged.is_empty() {
        let of: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
        warn_no_io(filter.is_some(), &of.join(", "));
    }
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
            "iodump: warning: {} skipped (first: {d})",
            Damage::count_in_words(&s.damaged)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--filter`, `--device`, `--container` and `--cgroup` as one expression.
fn analyze_filter(a: &AnalyzeArgs) -> anyhow::Result<Option<iodump_format::expr::Expr>> {
    use iodump_format::expr::Expr;
    let mut parts: Vec<Expr> = Vec::new();
    if let Some(f) = a.filter.as_deref() {
        parts.push(crate::args::parse_filter("--filter", f)?);
    }
    if !a.devices.is_empty() {
        let inputs = iodump_analyze::input::InputPath::expand(&a.files)?;
        let devs = iodump_analyze::input::select_devices(&inputs, &a.devices)?;
        let any: Vec<String> = devs.iter().map(|d| format!("dev == {d:?}")).collect();
        parts.push(crate::args::parse_filter("--device", &any.join(" || "))?);
    }
    if let Some(c) = &a.container {
        parts.push(Expr::for_container(c));
    }
    if let Some(c) = &a.cgroup {
        parts.push(Expr::for_cgroup(c));
    }
    Ok(parts.into_iter().reduce(Expr::and))
}

/// The flags of `iodump analyze` as a typed query.
fn analyze_query(a: &AnalyzeArgs) -> anyhow::Result<iodump_analyze::Query> {
    use iodump_analyze::query::RankBy;
    use iodump_analyze::{Engine, Question};
    let filter = analyze_filter(a)?;
    // 0: every row, as diff's and top's --limit 0.
    let limit = match a.limit.unwrap_or(20) {
        0 => u32::MAX as usize,
        n => n,
    };
    // The other questions show every row they have: a limit given to them would be ignored.
    if a.limit.is_some() && !(a.top_files || a.top_procs || a.seq_writes) {
        usage_bail!(
            "--limit applies to --top-files, --top-procs and --seq-writes (the other questions \
             show every row; --sql: LIMIT in the query)"
        );
    }
    // A question's own flag given to another would be ignored.
    for (given, applies, flag, question) in [
        (a.by.is_some(), a.top_files, "--by", "--top-files"),
        (a.interval.is_some(), a.timeline, "--interval", "--timeline"),
        (
            a.min_bytes.is_some(),
            a.seq_writes,
            "--min-bytes",
            "--seq-writes",
        ),
        (a.group_by.is_some(), a.latency, "--group-by", "--latency"),
    ] {
        if given && !applies {
            usage_bail!("{flag} applies to {question} only");
        }
    }
    // The flags of the questions are exclusive (clap group "query").
    let question = if a.top_files {
        let by = match a.by.unwrap_or(ByArg::Ios) {
            ByArg::Ios => RankBy::Ios,
            ByArg::Bytes => RankBy::Bytes,
            ByArg::Latency => RankBy::Latency,
        };
        Question::TopFiles { by, limit }
    } else if a.top_procs {
        Question::TopProcs { limit }
    } else if a.timeline {
        Question::Timeline {
            interval_ns: parse_interval(a.interval.as_deref().unwrap_or("1s"))?,
        }
    } else if a.seek {
        Question::Seek
    } else if a.seq_writes {
        Question::SeqWrites {
            min_bytes: parse_min_bytes(a.min_bytes.as_deref().unwrap_or("1M"))?,
            limit,
        }
    } else if let Some(q) = &a.sql {
        Question::Sql(q.clone())
    } else if a.latency {
        Question::Latency {
            by: lat_by(a.group_by.unwrap_or(LatByArg::All)),
        }
    } else {
        Question::Summary
    };
    let engine = match a.engine {
        EngineArg::OnePass => Engine::OnePass,
        EngineArg::Polars => Engine::Polars,
    };
    Ok(iodump_analyze::Query {
        question,
        engine,
        filter,
    })
}

/// The progress of `iodump analyze`: a bar on stderr per decoding step (when stderr is a
/// terminal), notes as `iodump: note:` lines.
#[derive(Default)]
struct AnalyzeProgress {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
}

impl AnalyzeProgress {
    fn bar(&self) -> std::sync::MutexGuard<'_, Option<indicatif::ProgressBar>> {
        self.bar.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl iodump_analyze::Progress for AnalyzeProgress {
    fn begin(&self, what: &'static str, total_events: u64) {
        *self.bar() = progress_bar(total_events, what);
    }
    fn advance(&self, events: u64) {
        if let Some(pb) = &*self.bar() {
            pb.inc(events);
        }
    }
    fn end(&self) {
        if let Some(pb) = self.bar().take() {
            pb.finish_and_clear();
        }
    }
    fn note(&self, note: iodump_analyze::Note) {
        eprintln!("iodump: note: {note}");
    }
}

/// A failed SQL query is shown by its first line only (the engine's message goes on with its
/// plan); other errors keep their chain of causes.
fn one_line_sql_error(e: iodump_analyze::AnalyzeError) -> anyhow::Error {
    match e {
        e @ iodump_analyze::AnalyzeError::Sql { .. } => anyhow::anyhow!("{e}"),
        e => e.into(),
    }
}

pub fn run_analyze(a: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let query = analyze_query(a)?;
    note_snapshots_left_out(&a.files);
    let answer = iodump_analyze::run(&query, &a.files, &AnalyzeProgress::default())
        .map_err(one_line_sql_error)?;
    if let Some((trace, dmg)) = answer.damaged.first() {
        eprintln!(
            "iodump: warning: {trace}: {} skipped (first: {dmg})",
            Damage::count_in_words(answer.damaged.iter().map(|(_, d)| d))
        );
    }
    if answer.ios == 0 {
        warn_no_io(query.filter.is_some(), "the input");
    }
    print_table(a.format, &answer.columns, &answer.kinds, &answer.rows);
    Ok(ExitCode::SUCCESS)
}

/// The warning for an answer of no I/O (not an error: an empty table is an answer, but a
/// silent one would look like a tool that found nothing for another reason).
/// Says which snapshot files the directories named leave out (read beside their parts, a
/// snapshot's I/O would count twice: [`iodump_format::recording::trace_files_in`]).
pub(crate) fn note_snapshots_left_out(paths: &[PathBuf]) {
    for dir in paths.iter().filter(|p| p.is_dir()) {
        let left = iodump_format::recording::snapshots_left_out(dir);
        if !left.is_empty() {
            eprintln!(
                "iodump: note: {}: {} snapshot file{} (trigger-*.iod) not read: copies of I/O its parts hold; name one to read it",
                iodump_format::text::escape_controls(&dir.display().to_string()),
                left.len(),
                if left.len() == 1 { "" } else { "s" }
            );
        }
    }
}

pub(crate) fn warn_no_io(filtered: bool, of: &str) {
    if filtered {
        eprintln!("iodump: warning: the filter kept no I/O of {of}");
    } else {
        eprintln!("iodump: warning: {of} holds no I/O");
    }
}

/// `--min-bytes`: 1M, 64k, 4096…
fn parse_min_bytes(s: &str) -> anyhow::Result<u64> {
    iodump_format::expr::parse_number(s)
        .filter(|v| *v >= 0.0)
        .map(|v| v as u64)
        .ok_or_else(|| usage(format!("--min-bytes {s}: give a size such as 1M")))
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
/// `--interval`: a duration in the one grammar of every duration flag
/// (`iodump_format::units`), from 1us to 292 years.
fn parse_interval(s: &str) -> anyhow::Result<i64> {
    let ns = iodump_format::units::parse_duration_ns(s)
        .map_err(|e| usage(format!("--interval {s}: {e}")))?;
    if ns < 1_000 {
        usage_bail!("--interval {s}: at least 1us");
    }
    i64::try_from(ns).map_err(|_| usage(format!("--interval {s}: at most 292 years (2562047h)")))
}

/// Prints the answer's rows on stdout in `fmt`.
pub(crate) fn print_table(
    fmt: TableFormat,
    names: &[String],
    kinds: &[ColumnKind],
    rows: &[Vec<Option<String>>],
) {
    use std::io::Write;
    let text = match fmt {
        TableFormat::Table => aligned_table(names, rows),
        TableFormat::Csv => csv_table(names, rows),
        TableFormat::Json => format!("{}\n", json_table(names, kinds, rows)),
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Columns padded to their widest cell, two spaces apart, nulls as `-`; control characters
/// in a cell (a file, process or cgroup name may hold any) escaped, so that a name can
/// neither break a row nor send the terminal an escape sequence.
fn aligned_table(names: &[String], rows: &[Vec<Option<String>>]) -> String {
    use iodump_format::text::escape_controls;
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|c| escape_controls(c.as_deref().unwrap_or("-")))
                .collect()
        })
        .collect();
    let mut w: Vec<usize> = names.iter().map(|n| n.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut l = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string();
        l.push('\n');
        l
    };
    let mut out = line(names.iter().map(|s| s.as_str()).collect());
    for r in &rows {
        out.push_str(&line(r.iter().map(|c| c.as_ref()).collect()));
    }
    out
}

/// CSV with a header line, nulls empty.
fn csv_table(names: &[String], rows: &[Vec<Option<String>>]) -> String {
    let esc = |s: &str| {
        let mut v = Vec::new();
        iodump_format::text::escape_csv(&mut v, s.as_bytes());
        String::from_utf8_lossy(&v).into_owned()
    };
    let mut out = names.iter().map(|n| esc(n)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for r in rows {
        let cells: Vec<String> = r.iter().map(|c| esc(c.as_deref().unwrap_or(""))).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// An array of one object per row, its keys in the columns' order; a cell of a
/// [`ColumnKind::Number`] column is a number, of a `Text` one a string, of a `Bool` one a
/// boolean, of a `Mixed` one a number when it reads as one.
fn json_table(names: &[String], kinds: &[ColumnKind], rows: &[Vec<Option<String>>]) -> String {
    let key = |n: &String| serde_json::Value::String(n.clone()).to_string();
    let objects: Vec<String> = rows
        .iter()
        .map(|r| {
            let fields: Vec<String> = names
                .iter()
                .zip(kinds)
                .zip(r)
                .map(|((n, kind), c)| {
                    let v = match (c.as_deref(), kind) {
                        (None, _) => serde_json::Value::Null,
                        (Some(c), ColumnKind::Text) => serde_json::Value::String(c.to_string()),
                        (Some("true"), ColumnKind::Bool) => serde_json::Value::Bool(true),
                        (Some("false"), ColumnKind::Bool) => serde_json::Value::Bool(false),
                        (Some(c), ColumnKind::Bool) => serde_json::Value::String(c.to_string()),
                        (Some(c), ColumnKind::Number | ColumnKind::Mixed) => json_cell(c),
                    };
                    format!("{}:{v}", key(n))
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect();
    format!("[{}]", objects.join(","))
}

/// A cell as JSON: an integer, else a finite float, else a string.
fn json_cell(s: &str) -> serde_json::Value {
    if let Ok(i) = s.parse::<i64>() {
        return serde_json::Value::from(i);
    }
    if let Ok(i) = s.parse::<u64>() {
        return serde_json::Value::from(i);
    }
    s.parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
        .and_then(serde_json::Number::from_f64)
        .map(serde_json::Value::Number)
        .unwrap_or_else(|| serde_json::Value::String(s.to_string()))
}

pub fn run_report(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    if a.output.as_os_str() == "-" {
        usage_bail!("-o -: the report is a file (a page of several MB); give its name");
    }
    iodump_output::check_not_input(&a.output, &a.files)?;
    note_snapshots_left_out(&a.files);
    if a.diff || (a.files.len() == 2 && !a.sections) {
        return run_report_diff(a);
    }
    let given: Vec<&str> = [("--filter-a", &a.filter_a), ("--filter-b", &a.filter_b)]
        .into_iter()
        .filter(|(_, f)| f.is_some())
        .map(|(flag, _)| flag)
        .collect();
    if !given.is_empty() {
        usage_bail!(
            "{} {} to the comparison of two traces (report A B); --filter applies to every trace",
            given.join(" and "),
            if given.len() == 1 { "applies" } else { "apply" }
        );
    }
    let filter = report_filter(&a.filter)?;
    let readers: Vec<(String, iodump_format::Reader)> = open_traces(&a.files)?
        .into_iter()
        .map(|t| (t.name, t.reader))
        .collect();
    let inputs: Vec<(String, &iodump_format::Reader)> =
        readers.iter().map(|(n, r)| (n.clone(), r)).collect();
    let total: u64 = readers.iter().map(|(_, r)| r.announced_events()).sum();
    let s = with_progress(total, "aggregating", |tick| {
        iodump_analyze::report::write_report(&inputs, &a.output, filter.as_ref(), tick)
    })?;
    eprintln!(
        "iodump: wrote {} ({} events, {} bytes)",
        a.output.display(),
        s.events,
        s.html_bytes
    );
    if s.events == 0 && s.damage.is_empty() {
        let of: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
        warn_no_io(filter.is_some(), &of.join(", "));
    }
    if let Some((trace, d)) = s.damage.first() {
        eprintln!(
            "iodump: warning: {} skipped, the report shows what could be decoded (first: {trace}: {d})",
            Damage::count_in_words(s.damage.iter().map(|(_, d)| d))
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--filter` of `report` and `plot`, parsed.
fn report_filter(
    f: &Option<String>,
) -> anyhow::Result<Option<iodump_analyze::report::ReportFilter>> {
    Ok(match f {
        Some(text) => Some(iodump_analyze::report::ReportFilter {
            expr: crate::args::parse_filter("--filter", text)?,
            text: text.clone(),
        }),
        None => None,
    })
}

/// `report A B` (or `--diff`): the comparison of `iodump diff` as one page.
fn run_report_diff(a: &ReportArgs) -> anyhow::Result<ExitCode> {
    let [fa, fb] = &a.files[..] else {
        usage_bail!(
            "report --diff compares two traces: give A and B ({} given)",
            a.files.len()
        );
    };
    let mut cfg = iodump_analyze::diff::DiffConfig::new(vec![fa.clone()], vec![fb.clone()]);
    cfg.allow_damaged = a.allow_damaged;
    let parse = |flag: &str, f: &Option<String>| {
        f.as_deref()
            .map(|f| crate::args::parse_filter(flag, f))
            .transpose()
    };
    cfg.filter = parse("--filter", &a.filter)?;
    cfg.filter_a = parse("--filter-a", &a.filter_a)?;
    cfg.filter_b = parse("--filter-b", &a.filter_b)?;
    let s = iodump_analyze::report_diff::write_diff_report(&cfg, &a.output, &|_| {})?;
    eprintln!(
        "iodump: wrote {} (A {} I/Os, B {} I/Os, {} figures changed significantly, {} bytes)",
        a.output.display(),
        s.events[0],
        s.events[1],
        s.significant,
        s.html_bytes
    );
    for (label, path, events, own) in [("A", fa, s.events[0], true), ("B", fb, s.events[1], false)]
    {
        if events == 0 {
            warn_no_io(
                cfg.side_filter(own).is_some(),
                &format!("{label} ({})", path.display()),
            );
        }
    }
    if let Some((trace, d)) = s.damaged.first() {
        eprintln!(
            "iodump: warning: {} skipped, the comparison is of what could be decoded (first: {trace}: {d})",
            Damage::count_in_words(s.damaged.iter().map(|(_, d)| d))
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_plot(a: &PlotArgs) -> anyhow::Result<ExitCode> {
    use iodump_analyze::plot::{ImageFormat, PlotKind, PlotOptions};
    note_snapshots_left_out(std::slice::from_ref(&a.file));
    if ImageFormat::from_path(&a.output).is_none() {
        usage_bail!(
            "{}: the output must end in .svg or .png",
            a.output.display()
        );
    }
    if a.device.is_some() && !matches!(a.kind, PlotKindArg::Offset) {
        usage_bail!("--device applies to --kind offset only (--filter 'dev == \"DEV\"' plots one device's I/O)");
    }
    // Refused before the work (plot() creates it once the aggregation is done).
    iodump_output::check(&a.output)?;
    iodump_output::check_not_input(&a.output, std::slice::from_ref(&a.file))?;
    let t = open_trace(&a.file)?;
    let (name, r) = (t.name, t.reader);
    let kind = match a.kind {
        PlotKindArg::Iops => PlotKind::Iops,
        PlotKindArg::Throughput => PlotKind::Throughput,
        PlotKindArg::LatencyHeatmap => PlotKind::LatencyHeatmap,
        PlotKindArg::Offset => PlotKind::Offset,
        PlotKindArg::LatencyHistogram => PlotKind::LatencyHistogram,
        PlotKindArg::TopProcs => PlotKind::TopProcs,
        PlotKindArg::TopFiles => PlotKind::TopFiles,
    };
    let filter = report_filter(&a.filter)?;
    let rep = with_progress(r.announced_events(), "aggregating", |tick| {
        iodump_analyze::report::aggregate_with_progress(&name, &r, filter.as_ref(), tick)
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
            "iodump: warning: {}: {} skipped, the plot shows what could be decoded (first: {d})",
            a.file.display(),
            Damage::count_in_words(&rep.damage)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_in_each_format() {
        let names = vec!["dev".to_string(), "ios".to_string(), "p99_us".to_string()];
        let rows = vec![
            vec![Some("sda".to_string()), Some("12".to_string()), None],
            vec![
                Some("a,b".to_string()),
                Some("3".to_string()),
                Some("1.5".to_string()),
            ],
        ];
        assert_eq!(
            aligned_table(&names, &rows),
            "dev  ios  p99_us\nsda  12   -\na,b  3    1.5\n"
        );
        assert_eq!(
            csv_table(&names, &rows),
            "dev,ios,p99_us\nsda,12,\n\"a,b\",3,1.5\n"
        );
        let kinds = [ColumnKind::Text, ColumnKind::Number, ColumnKind::Number];
        assert_eq!(
            json_table(&names, &kinds, &rows),
            r#"[{"dev":"sda","ios":12,"p99_us":null},{"dev":"a,b","ios":3,"p99_us":1.5}]"#
        );
        // Text stays text whatever it reads like; keys keep the columns' order; integers
        // are exact past 2^53, negative ones too.
        let odd = vec![
            "s".to_string(),
            "big".to_string(),
            "n".to_string(),
            "a".to_string(),
        ];
        let row = vec![vec![
            Some("007".to_string()),
            Some("-9007199254740993".to_string()),
            Some("18446744073709551615".to_string()),
            Some("1e3".to_string()),
        ]];
        let kinds = [
            ColumnKind::Text,
            ColumnKind::Number,
            ColumnKind::Number,
            ColumnKind::Mixed,
        ];
        assert_eq!(
            json_table(&odd, &kinds, &row),
            r#"[{"s":"007","big":-9007199254740993,"n":18446744073709551615,"a":1000.0}]"#
        );
        // A name with control characters stays on its row and sends no escape sequence;
        // CSV and JSON keep it as it is (quoted, escaped by JSON).
        let evil = vec![vec![
            Some("/d/x\u{1b}[2J\ny".to_string()),
            Some("1".to_string()),
            None,
        ]];
        assert_eq!(
            aligned_table(&names, &evil),
            "dev             ios  p99_us\n/d/x\\x1b[2J\\ny  1    -\n"
        );
        assert_eq!(
            csv_table(&names, &evil),
            "dev,ios,p99_us\n\"/d/x\u{1b}[2J\ny\",1,\n"
        );
        assert_eq!(json_cell("inf"), serde_json::Value::String("inf".into()));
        assert_eq!(json_cell("-2"), serde_json::json!(-2));
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("250ms").unwrap(), 250_000_000);
        assert_eq!(parse_interval("1us").unwrap(), 1_000);
        assert_eq!(
            parse_interval("2562047h").unwrap(),
            9_223_369_200_000_000_000
        );
        // the grammar of every duration flag (`top -i 2` too): a bare number is seconds
        assert_eq!(parse_interval("5").unwrap(), 5_000_000_000);
        assert_eq!(parse_interval("1.5m").unwrap(), 90_000_000_000);
        for (bad, why) in [
            ("0.5us", "at least 1us"),
            ("0", "at least 1us"),
            ("2562048h", "at most 292 years"),
            ("-1s", "is not a duration"),
            ("1e-300s", "is not a duration"),
            ("1e12d", "is not a duration"),
            ("1000000000d", "at most 292 years"),
            ("infs", "is not a duration"),
            ("nans", "is not a duration"),
            ("5 fortnights", "is not a duration"),
        ] {
            let e = parse_interval(bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("--interval {bad}: ")) && e.contains(why),
                "{e}"
            );
        }
    }
}
