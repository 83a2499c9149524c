//! Command-line definitions (clap) and the small commands that only glue flags to a library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use iodump_format::WriterOptions;
use iodump_synth::{write_synth, SynthParams, Workload};

/// Record every block I/O with eBPF, store it compactly, analyse and replay it offline.
#[derive(Debug, Parser)]
#[command(
    name = "iodump",
    version,
    about,
    propagate_version = true,
    after_help = "The original iodump's command line works too, without a subcommand: \
                  iodump -p DEV [-t SECS] [-s FILE] [-H] [-o FIELDS|csv|json] [-O FIELDS] \
                  [-S N] [-c COMM] [-C TEXT] [-P PID] [-a ACTION] [--sample PCT] [-f EXPR]; \
                  its help: iodump -p DEV --help."
)]
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
    /// Live block I/O per file, process, device or cgroup (container, pod), with latency:
    /// a full-screen view, or snapshots as text or JSON (-b).
    Top(Box<crate::top::TopArgs>),
    /// Re-issue a recorded workload against a device or file with its timing, order and
    /// concurrency; reads only unless --allow-writes.
    Replay(Box<crate::replay::ReplayArgs>),
    #[cfg(feature = "analyze")]
    /// Write a trace's events as CSV (the original iodump's columns first), JSON lines, a
    /// fio iolog (version 3) that `fio --read_iolog` replays, or a Perfetto trace.
    Export(ExportArgs),
    /// Query traces or Parquet datasets: summary, top files and processes, latency, timeline,
    /// seeks, sequential writes, SQL.
    #[cfg(feature = "analyze")]
    Analyze(AnalyzeArgs),
    /// Convert traces to Parquet tables (io, processes, files, devices, losses) in a
    /// directory, for DuckDB, polars, pandas, Spark (schemas/parquet-tables.md).
    #[cfg(feature = "analyze")]
    Convert(ConvertArgs),
    /// Write one self-contained HTML report of traces (opens offline): summary, IOPS and
    /// throughput over time, latency heatmap, offsets, latency histogram, top processes and
    /// files, losses.
    #[cfg(feature = "analyze")]
    Report(ReportArgs),
    /// Draw one plot of a trace as SVG or PNG, for papers and tickets.
    #[cfg(feature = "analyze")]
    Plot(PlotArgs),
    /// Compare two recordings (traces, recordings in parts or Parquet datasets): per
    /// device, process, file and cgroup, what changed and whether it is significant.
    #[cfg(feature = "analyze")]
    Diff(Box<crate::diff::DiffArgs>),
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
    /// Most rows shown.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
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
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Trace files (.iod). One: its report. Two: the comparison of B with A (the baseline),
    /// as `iodump diff A B`. Three or more (or two with `--sections`): one section per trace,
    /// each with its own time axis.
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
    /// Write the trace to FILE: a new file, mode 0600, that replaces an existing FILE only once
    /// recording has started (a link or another user's file is refused). Without it, print
    /// one line per I/O.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Stop after SECS seconds (-1: no limit, the default).
    #[arg(
        short = 't',
        long = "time",
        value_name = "SECS",
        allow_hyphen_values = true
    )]
    pub seconds: Option<f64>,
    /// Record a sample of the I/O: a percentage (`10%`, or `10`) or one in N (`1/N`), per
    /// CPU, in the kernel.
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
    #[arg(long, value_name = "PATH", conflicts_with = "container")]
    pub cgroup: Option<PathBuf>,
    /// Only I/O submitted by tasks of this container or pod: a prefix of its id (docker,
    /// containerd, CRI-O, podman; an LXC container's name), `RUNTIME:ID` (docker:0123ab),
    /// or `pod:UID` (a Kubernetes pod). Its cgroup must exist when recording starts; like
    /// --cgroup, writeback that kernel threads submit for it is not included.
    #[arg(long, value_name = "ID")]
    pub container: Option<String>,
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
    /// The kernel's BTF from FILE, for a kernel without /sys/kernel/btf/vmlinux (BTFHub has
    /// such files for many distribution kernels); raw tracepoints only.
    #[arg(long, value_name = "FILE")]
    pub btf: Option<PathBuf>,
    /// Benchmarks only: obey the BPF map `bench_ctl` (bench/paths-ab.sh, bench/record-ab.sh).
    #[arg(long, hide = true)]
    pub bench_ctl: bool,
    /// Metadata for the trace header, KEY=VALUE; repeatable.
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub metadata: Vec<String>,
    /// With -o DIR/: close the file being written and start the next after this long or
    /// this size (`1h`, `10m`, `30s`; `256M`, `1G`); files are named by their start time (UTC).
    #[arg(long, value_name = "DURATION|SIZE", allow_hyphen_values = true)]
    pub rotate: Option<String>,
    /// With -o DIR/: keep at most N trace files in DIR (the oldest are deleted).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub keep: Option<String>,
    /// With -o DIR/: keep DIR's trace files within SIZE (`10G`; the oldest are deleted).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub max_total: Option<String>,
    /// Keep the last DURATION (or SIZE) of I/O in memory only (`60s`, `256M`); --trigger and
    /// SIGUSR1 save it to -o DIR/ as a trace of its own.
    #[arg(long, value_name = "DURATION|SIZE", allow_hyphen_values = true)]
    pub ring: Option<String>,
    /// With --ring: save the window when an I/O matches EXPR (the -f language, e.g.
    /// 'latency > 200ms', 'error != 0').
    #[arg(long, value_name = "EXPR", requires = "ring")]
    pub trigger: Option<String>,
    /// With --ring: go on writing a snapshot for this long after its trigger (default 10s).
    #[arg(
        long,
        value_name = "DURATION",
        requires = "ring",
        allow_hyphen_values = true
    )]
    pub after: Option<String>,
    /// With --trigger: no trigger fires sooner than this after the last (default 60s).
    #[arg(
        long,
        value_name = "DURATION",
        requires = "trigger",
        allow_hyphen_values = true
    )]
    pub cooldown: Option<String>,
    /// With --trigger: at most N snapshots in this run (default: no limit).
    #[arg(
        long,
        value_name = "N",
        requires = "trigger",
        allow_hyphen_values = true
    )]
    pub max_dumps: Option<String>,
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
    /// Write a recording in parts into the directory -o DIR/, as `iodump record --rotate`
    /// does: a part closed after this size or this long of the events' time (`1M`, `10s`).
    #[arg(long, value_name = "DURATION|SIZE", allow_hyphen_values = true)]
    pub rotate: Option<String>,
}

/// A number as the user would write it: `1.5`, `-1`, `1e20`, `1e-300` (not 21 digits).
pub fn show_f64(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Parses the filter expression given with `flag` (`-f`, `--filter`). The error is one line:
/// an expression longer than 80 bytes is quoted only around the column at fault.
pub fn parse_filter(flag: &str, text: &str) -> anyhow::Result<iodump_format::expr::Expr> {
    iodump_format::expr::Expr::parse(text).map_err(|e| {
        if text.len() <= 80 {
            return anyhow::anyhow!("bad {flag} expression {text:?}: {e}");
        }
        let floor = |mut i: usize| {
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let from = floor(e.at.saturating_sub(30));
        let to = floor((e.at + 30).min(text.len()));
        anyhow::anyhow!(
            "bad {flag} expression ({} bytes) near {}{:?}{}: {e}",
            text.len(),
            if from > 0 { "…" } else { "" },
            &text[from..to],
            if to < text.len() { "…" } else { "" },
        )
    })
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
    let opts = WriterOptions {
        segment_events: a.segment_events as usize,
        ..WriterOptions::default()
    };
    if let Some(r) = &a.rotate {
        use iodump_format::units::{parse_span, Span};
        let mut cfg = iodump_output::parts::PartsConfig {
            dir: a.output.clone(),
            ..Default::default()
        };
        match parse_span(r) {
            Ok(Span::Duration(0)) | Ok(Span::Bytes(0)) => {
                anyhow::bail!("--rotate {r}: give a positive duration (10s) or size (1M)")
            }
            Ok(Span::Duration(ns)) => cfg.rotate_ns = Some(ns),
            Ok(Span::Bytes(b)) => cfg.rotate_bytes = Some(b),
            Err(e) => anyhow::bail!("--rotate {r}: {e}"),
        }
        let (summary, st) = iodump_synth::write_synth_parts(&params, cfg, opts)
            .with_context(|| format!("writing {}", a.output.display()))?;
        eprintln!(
            "iodump: wrote {} files in {} ({} events, {} lost, {} bytes)",
            st.parts,
            a.output.display(),
            summary.events,
            summary.lost_events,
            st.bytes_written
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Replaces what was there only once complete (and synced).
    let mut out = iodump_output::OutputFile::create(&a.output)?;
    let (summary, f) = write_synth(&params, out.try_clone_file()?, opts)
        .with_context(|| format!("writing {}", a.output.display()))?;
    out.commit()?;
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
