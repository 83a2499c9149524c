//! `iodump record`: flags → [`RecordConfig`], signals → a stop flag, summary on stderr.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use iodump_format::units::{parse_duration_ns, parse_size_bytes, parse_span, Span};
use iodump_format::Op;
use iodump_output::parts::PartsConfig;
use iodump_record::bpf::BpfSettings;
use iodump_record::flight::{is_dir_path, FlightConfig, DEFAULT_RING_BYTES};
use iodump_record::print::PrintFormat;
use iodump_record::{record_live, LiveSink, RecordConfig};

use crate::args::{usage, usage_bail, Selection};
use crate::serving::Serving;

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
    #[command(flatten)]
    pub select: Selection,
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
    /// Only these operations: read, write, flush, discard, secure_erase, write_zeroes, other
    /// (comma-separated).
    #[arg(long, value_name = "OPS", value_delimiter = ',')]
    pub ops: Vec<String>,
    /// Only I/O of at least this size: 4096, 64k, 1M…
    #[arg(long, value_name = "SIZE")]
    pub min_bytes: Option<String>,
    /// Print one line per I/O in this format (also with -o).
    #[arg(long, value_enum)]
    pub print: Option<PrintArg>,
    /// Kernel ring buffer size: 4k to 1G, rounded up to a power of two (default 8M).
    #[arg(long, value_name = "SIZE")]
    pub buffer_size: Option<String>,
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
    /// 'latency > 200ms', 'error != 0'); I/Os still in flight are tried once a second with
    /// the time they have taken so far, so one that hangs fires it too.
    #[arg(long, value_name = "EXPR", requires = "ring")]
    pub trigger: Option<String>,
    /// With --trigger: fire only when N I/Os matched it within --trigger-window (a sustained
    /// slowdown rather than one slow I/O; default 1).
    #[arg(
        long,
        value_name = "N",
        requires = "trigger",
        allow_hyphen_values = true
    )]
    pub trigger_count: Option<String>,
    /// With --trigger-count: the time the N matching I/Os must complete within (default 10s).
    #[arg(
        long,
        value_name = "DURATION",
        requires = "trigger_count",
        allow_hyphen_values = true
    )]
    pub trigger_window: Option<String>,
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
    /// With --ring: keep at most N snapshot files in DIR, of this run and earlier ones (the
    /// oldest are deleted, never the one being written).
    #[arg(long, value_name = "N", requires = "ring", allow_hyphen_values = true)]
    pub keep_dumps: Option<String>,
    /// With --ring: keep DIR's snapshot files within SIZE (`1G`), of this run and earlier
    /// ones (the oldest are deleted, never the one being written).
    #[arg(
        long,
        value_name = "SIZE",
        requires = "ring",
        allow_hyphen_values = true
    )]
    pub max_dumps_total: Option<String>,
    /// Forget files and threads without I/O for this long (default 10m): memory holds those
    /// of the last while, not every one a long recording has seen; one that comes back is
    /// learnt again (its path and process entries written again).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub forget_idle: Option<String>,
    /// Serve Prometheus/OpenMetrics metrics of what is recorded on http://ADDR:PORT/metrics
    /// (as `iodump top --serve`): PORT or :PORT listen on 127.0.0.1; another address must be
    /// given (0.0.0.0:9100).
    #[arg(long, value_name = "ADDR:PORT")]
    pub serve: Option<String>,
    /// --serve: files exported (the busiest by I/Os; file paths are unbounded label values).
    #[arg(long, value_name = "N", default_value_t = 100, requires = "serve")]
    pub serve_files: usize,
    /// The command to run and record until it exits (after `--`); iodump exits with its status.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Parses `--sample`: `10%` or a bare `10` (a percentage, as the seed article writes it), or
/// `1/N`, into "one in N".
pub fn parse_sample(s: &str) -> anyhow::Result<u32> {
    let s = s.trim();
    if let Some(n) = s.strip_prefix("1/") {
        let n: u32 = n
            .trim()
            .parse::<u32>()
            .map_err(|e| usage(format!("bad --sample {s:?}: {e}")))?;
        if n == 0 {
            usage_bail!("--sample 1/0: N must be at least 1");
        }
        return Ok(n);
    }
    let p = s.strip_suffix('%').unwrap_or(s).trim();
    let Ok(p) = p.parse::<f64>() else {
        usage_bail!("--sample takes a percentage (10 or 10%) or 1/N, not {s:?}")
    };
    if !(p > 0.0 && p <= 100.0) {
        usage_bail!("--sample {s}: the percentage must be in (0, 100]");
    }
    Ok((100.0 / p).round().max(1.0) as u32)
}

/// `-t SECS`: how long to record. `-1` means no limit (the original iodump's convention); any
/// other value must be a positive number of seconds that a [`Duration`] holds.
pub fn time_limit(secs: f64) -> anyhow::Result<Option<Duration>> {
    if secs == -1.0 {
        return Ok(None);
    }
    let shown = crate::args::show_f64(secs);
    if secs.is_nan() || secs <= 0.0 {
        usage_bail!("-t {shown}: give a positive number of seconds, or -1 for no limit");
    }
    match Duration::try_from_secs_f64(secs) {
        Ok(d) => Ok(Some(d)),
        Err(_) => usage_bail!(
            "-t {shown}: at most {} seconds, or -1 for no limit",
            Duration::MAX.as_secs()
        ),
    }
}

fn op_mask(ops: &[String]) -> anyhow::Result<u32> {
    if ops.is_empty() {
        return Ok(0x7f);
    }
    let mut m = 0;
    for o in ops {
        let op = Op::ALL
            .iter()
            .find(|x| x.name() == o.as_str() || x.letter().to_string() == o.to_uppercase())
            .ok_or_else(|| usage(format!("unknown op {o:?} (read, write, flush, discard, secure_erase, write_zeroes, other)")))?;
        m |= 1 << op.code();
    }
    Ok(m)
}

/// `-o csv`, `-o json`, `-o text`: a name that reads as a format, not a file.
fn warn_format_name(p: &Path) {
    let name = p.to_string_lossy();
    let fmt = match name.to_ascii_lowercase().as_str() {
        "csv" => "csv",
        "json" | "jsonl" => "json",
        "text" | "txt" => "text",
        _ => return,
    };
    eprintln!(
        "iodump: warning: -o {name} writes a binary trace to a file named {name:?}; \
         for {fmt} lines use --print {fmt} (the original iodump's -o {fmt}: iodump -p DEV -o {fmt})"
    );
}

/// A whole number of at least 1 for `flag`.
fn count(flag: &str, v: &str, what: &str) -> anyhow::Result<u64> {
    match v.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => usage_bail!("{flag} {v}: give a whole number of {what}, at least 1"),
    }
}

fn duration(flag: &str, v: &str) -> anyhow::Result<u64> {
    parse_duration_ns(v).map_err(|e| usage(format!("{flag} {v}: {e}")))
}

/// The most I/Os `--trigger-count` may ask for (the times of the last N matches are kept:
/// 8 MB at this bound).
const MAX_TRIGGER_COUNT: u64 = 1_000_000;

/// `--trigger-count N` and `--trigger-window DURATION` (1 and 10 s when not given); a window
/// longer than a ring of time (`ring_ns`) is refused: a snapshot could not hold the I/Os that
/// fired it.
fn trigger_count(a: &RecordArgs, ring_ns: Option<u64>) -> anyhow::Result<(u32, u64)> {
    let Some(n) = &a.trigger_count else {
        return Ok((1, 0));
    };
    let count = count("--trigger-count", n, "I/Os")?;
    if count > MAX_TRIGGER_COUNT {
        usage_bail!("--trigger-count {n}: give at most {MAX_TRIGGER_COUNT}");
    }
    let window_ns = match &a.trigger_window {
        None => 10_000_000_000,
        Some(w) => match duration("--trigger-window", w)? {
            0 => usage_bail!("--trigger-window {w}: give a positive duration (10s)"),
            ns => ns,
        },
    };
    if let (Some(ring_ns), Some(w)) = (ring_ns, &a.trigger_window) {
        if window_ns > ring_ns {
            usage_bail!(
                "--trigger-window {w} is longer than --ring {}: a snapshot could not hold the I/Os that fired it",
                a.ring.as_deref().unwrap_or_default()
            );
        }
    }
    Ok((count as u32, window_ns))
}

/// `-o DIR/` with `--rotate`, `--keep`, `--max-total`: the recording in parts; with
/// `--ring`, `--trigger`…: the flight recorder. Both are checked here, before anything is
/// recorded.
fn always_on(a: &RecordArgs) -> anyhow::Result<(Option<PartsConfig>, Option<FlightConfig>)> {
    let parts_flags = a.rotate.is_some() || a.keep.is_some() || a.max_total.is_some();
    let dir_output = a.output.as_deref().is_some_and(is_dir_path);
    if !(parts_flags || a.ring.is_some() || dir_output) {
        return Ok((None, None));
    }
    let Some(dir) = a.output.clone().filter(|_| dir_output) else {
        let flag = if a.ring.is_some() && !parts_flags {
            "--ring"
        } else {
            "--rotate, --keep and --max-total"
        };
        usage_bail!("{flag} write into a directory: give -o DIR/ (with the trailing slash, or an existing directory)");
    };
    let mut parts = PartsConfig {
        dir: dir.clone(),
        ..PartsConfig::default()
    };
    if let Some(r) = &a.rotate {
        match parse_span(r) {
            Ok(Span::Duration(0)) | Ok(Span::Bytes(0)) => {
                usage_bail!("--rotate {r}: give a positive duration (1h, 10m) or size (256M)")
            }
            Ok(Span::Duration(ns)) => parts.rotate_ns = Some(ns),
            Ok(Span::Bytes(b)) => parts.rotate_bytes = Some(b),
            Err(e) => usage_bail!("--rotate {r}: {e}"),
        }
    }
    if let Some(k) = &a.keep {
        parts.keep = Some(count("--keep", k, "files")? as usize);
    }
    if let Some(m) = &a.max_total {
        let b = parse_size_bytes(m).map_err(|e| usage(format!("--max-total {m}: {e}")))?;
        if b < 1 << 20 {
            usage_bail!("--max-total {m}: give at least 1M");
        }
        if parts.rotate_bytes.is_some_and(|r| r > b / 2) {
            usage_bail!("--rotate {}: at most half of --max-total {m}, so that an older file fits beside the one being written", a.rotate.as_deref().unwrap_or(""));
        }
        parts.max_total_bytes = Some(b);
    }
    let flight = match &a.ring {
        None => None,
        Some(r) => {
            let (window_ns, window_bytes) = match parse_span(r) {
                Ok(Span::Duration(0)) | Ok(Span::Bytes(0)) => {
                    usage_bail!("--ring {r}: give a positive duration (60s) or size (256M)")
                }
                Ok(Span::Duration(ns)) => (Some(ns), DEFAULT_RING_BYTES),
                Ok(Span::Bytes(b)) => (None, b),
                Err(e) => usage_bail!("--ring {r}: {e}"),
            };
            let trigger = a
                .trigger
                .as_deref()
                .map(|t| crate::args::parse_filter("--trigger", t))
                .transpose()?;
            let (trigger_count, trigger_window_ns) = trigger_count(a, window_ns)?;
            let max_dumps = a
                .max_dumps
                .as_deref()
                .map(|m| count("--max-dumps", m, "snapshots"))
                .transpose()?
                .map(|n| n.min(u32::MAX as u64) as u32);
            let keep_dumps = a
                .keep_dumps
                .as_deref()
                .map(|k| count("--keep-dumps", k, "snapshots"))
                .transpose()?
                .map(|n| n as usize);
            let max_dumps_total_bytes = match &a.max_dumps_total {
                None => None,
                Some(m) => {
                    let b = parse_size_bytes(m)
                        .map_err(|e| usage(format!("--max-dumps-total {m}: {e}")))?;
                    if b < 1 << 20 {
                        usage_bail!("--max-dumps-total {m}: give at least 1M");
                    }
                    Some(b)
                }
            };
            Some(FlightConfig {
                dir,
                window_ns,
                window_bytes,
                trigger,
                trigger_text: a.trigger.clone(),
                trigger_count,
                trigger_window_ns,
                after_ns: a
                    .after
                    .as_deref()
                    .map_or(Ok(10_000_000_000), |v| duration("--after", v))?,
                cooldown_ns: a
                    .cooldown
                    .as_deref()
                    .map_or(Ok(60_000_000_000), |v| duration("--cooldown", v))?,
                max_dumps,
                keep_dumps,
                max_dumps_total_bytes,
            })
        }
    };
    writable_dir(&parts.dir)?;
    // With a ring, the recording goes to disk only when asked to.
    let parts = (flight.is_none() || parts_flags).then_some(parts);
    Ok((parts, flight))
}

/// Makes sure files can be written in `dir` (creating it if need be) before anything is
/// recorded: a file is created there by the output rule, and removed.
fn writable_dir(dir: &Path) -> anyhow::Result<()> {
    iodump_output::check_dir(dir)?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("-o {}: cannot create the directory", dir.display()))?;
    drop(iodump_output::OutputFile::create(&dir.join("probe"))?);
    Ok(())
}

pub fn run(a: &RecordArgs) -> anyhow::Result<ExitCode> {
    // `-o DIR/` made for this run and left empty by a failure (a bad flag checked late, a
    // missing device, no privilege): removed again, as if never asked for.
    let new_dir = a.output.as_ref().filter(|p| !p.exists()).cloned();
    let r = record(a);
    if let (Err(_), Some(dir)) = (&r, new_dir) {
        let _ = std::fs::remove_dir(dir);
    }
    r
}

fn record(a: &RecordArgs) -> anyhow::Result<ExitCode> {
    if let Some(p) = &a.output {
        warn_format_name(p);
    }
    let (parts, flight) = always_on(a)?;
    let mut bpf = BpfSettings::default();
    if let Some(s) = &a.sample {
        bpf.sample_every = parse_sample(s)?;
    }
    bpf.pids = a.select.pids.clone();
    bpf.comms = a
        .select
        .comms
        .iter()
        .map(|c| c.as_bytes().to_vec())
        .collect();
    bpf.op_mask = op_mask(&a.ops)?;
    bpf.min_bytes = match &a.min_bytes {
        None => 0,
        Some(m) => parse_size_bytes(m)
            .map_err(|e| usage(format!("--min-bytes {m}: {e}")))
            .and_then(|b| {
                u32::try_from(b).map_err(|_| usage(format!("--min-bytes {m}: at most 4G - 1")))
            })?,
    };
    bpf.cgroup = a.select.cgroup.clone();
    bpf.paths = !a.no_paths;
    bpf.bench_ctl = a.bench_ctl;
    bpf.btf_file = a.btf.clone();
    if let Some(text) = &a.buffer_size {
        let b = parse_size_bytes(text).map_err(|e| usage(format!("--buffer-size {text}: {e}")))?;
        if !(4096..=(1 << 30)).contains(&b) {
            usage_bail!(
                "--buffer-size {text}: must be between 4k and 1G (4096 and 1073741824 bytes)"
            );
        }
        bpf.ring_bytes = (b as u32).next_power_of_two();
    }
    let duration = match a.seconds {
        Some(s) => time_limit(s)?,
        None => None,
    };
    let mut metadata = Vec::new();
    for m in &a.metadata {
        let (k, v) = m
            .split_once('=')
            .ok_or_else(|| usage(format!("--meta {m:?}: expected KEY=VALUE")))?;
        metadata.push((k.to_string(), v.to_string()));
    }
    let filter = a
        .select
        .filter
        .as_deref()
        .map(|f| crate::args::parse_filter("-f", f))
        .transpose()?;
    let forget_idle = match &a.forget_idle {
        None => None,
        Some(v) => {
            let ns = self::duration("--forget-idle", v)?;
            if ns < 10_000_000_000 {
                usage_bail!("--forget-idle {v}: at least 10s");
            }
            Some(Duration::from_nanos(ns))
        }
    };
    let cfg = RecordConfig {
        forget_idle,
        filter,
        devices: a.select.devices.clone(),
        output: a.output.clone(),
        duration,
        // Without -o, the lines are printed as ever, --serve or not (the session prints
        // nothing by itself beside a live sink).
        print: a
            .print
            .map(|p| match p {
                PrintArg::Text => PrintFormat::Text,
                PrintArg::Csv => PrintFormat::Csv,
                PrintArg::Json => PrintFormat::Json,
            })
            .or((a.output.is_none()).then_some(PrintFormat::Text)),
        bpf,
        command: a.command.clone(),
        recorder_argv: std::env::args().collect(),
        memory_limit_bytes: 64 << 20,
        metadata,
        print_to: None,
        container: a.select.container.clone(),
        // Without a ring, SIGUSR1 is answered with a line saying so (it must not kill the
        // recorder, its default action).
        snapshot: Some(&crate::signals::SNAPSHOT),
        parts,
        flight,
    };
    // The port is taken before anything is loaded: one in use is an error up front.
    let serving = a
        .serve
        .as_deref()
        .map(|spec| Serving::start(spec, cfg.container.clone(), a.serve_files))
        .transpose()?;
    execute(&cfg, a.stats, serving)
}

/// Bytes per event (0 without events).
fn per_event(bytes: u64, events: u64) -> f64 {
    if events > 0 {
        bytes as f64 / events as f64
    } else {
        0.0
    }
}

/// Records as `cfg` says (serving metrics of it with `serving`), then the summary on stderr
/// (with the kernel's counters if `stats`); exits with the traced command's status.
/// A recorder's error as the user reads it: a failed write names the trace (or directory)
/// and says that what was written before is kept.
pub(crate) fn in_context(
    e: iodump_record::error::RecordError,
    cfg: &RecordConfig,
) -> anyhow::Error {
    match (&e, &cfg.output) {
        (iodump_record::error::RecordError::Write(_), Some(p)) => {
            let hint = match &cfg.parts {
                Some(pc) if pc.keep.is_none() && pc.max_total_bytes.is_none() => {
                    "; with --keep or --max-total the oldest parts are deleted to go on when the file system is full"
                }
                _ => "",
            };
            anyhow::Error::new(e).context(format!(
                "{}: recording stopped (the trace keeps what was written before{hint})",
                p.display()
            ))
        }
        _ => e.into(),
    }
}

pub fn execute(
    cfg: &RecordConfig,
    stats: bool,
    serving: Option<Serving>,
) -> anyhow::Result<ExitCode> {
    crate::signals::install();
    if cfg.snapshot.is_some() {
        crate::signals::install_snapshot();
    }
    let mut serving = serving;
    let live = serving.as_mut().map(|s| s as &mut dyn LiveSink);
    let s = record_live(cfg, &crate::signals::STOP, live).map_err(|e| in_context(e, cfg))?;
    let total = s.events + s.lost_events;
    let lost_pct = if total > 0 {
        s.lost_events as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    let mut line = format!(
        "iodump: recorded {} events in {:.1} s, lost {} ({lost_pct:.3}%)",
        s.events,
        s.duration.as_secs_f64(),
        s.lost_events
    );
    let counter = |name: &str| {
        s.kernel_counters
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v)
    };
    let chained = counter("chain_untraced");
    if chained > 0 {
        line.push_str(&format!(
            ", {chained} of them chained bios whose completion this kernel does not trace \
             (the bios of a discard or zero-out run but its last, on a bio-based device; \
             README, Limits)"
        ));
    }
    if s.nested_lost > 0 {
        line.push_str(&format!(
            ", {} of them I/Os whose start or completion the kernel skipped our program for \
             (it was running on that CPU already; README, Limits; --stats names the programs)",
            s.nested_lost
        ));
    }
    if let (Some(st), Some(dir)) = (&s.parts, cfg.parts.as_ref().map(|p| &p.dir)) {
        line.push_str(&format!(
            "; wrote {} file{} in {} ({} bytes, {:.2} bytes/event{})",
            st.parts,
            if st.parts == 1 { "" } else { "s" },
            dir.display(),
            s.bytes_written,
            per_event(s.bytes_written, s.events),
            if st.deleted > 0 {
                format!("; {} deleted by retention", st.deleted)
            } else {
                String::new()
            }
        ));
    } else if let (Some(p), None) = (&cfg.output, &cfg.flight) {
        line.push_str(&format!(
            "; wrote {} ({} bytes, {:.2} bytes/event)",
            p.display(),
            s.bytes_written,
            per_event(s.bytes_written, s.events)
        ));
    }
    if cfg.flight.is_some() {
        line.push_str(&format!("; {} snapshot(s) saved", s.snapshots));
        if s.failed_snapshots > 0 {
            line.push_str(&format!(
                ", {} not saved whole (warnings above)",
                s.failed_snapshots
            ));
        }
        if s.deleted_snapshots > 0 {
            line.push_str(&format!(
                "; {} older snapshot(s) deleted by retention",
                s.deleted_snapshots
            ));
        }
    }
    // Completions without a start, less those of requests filtered or sampled out at
    // their start (which had a start, not tracked on purpose).
    let unmatched = counter("no_start").saturating_sub(counter("rq_untracked"));
    if unmatched > 0 {
        line.push_str(&format!(
            "; {unmatched} completions without a start seen (not recorded)"
        ));
    }
    if let Some(n) = s.in_flight_at_end.filter(|&n| n > 0) {
        line.push_str(&format!(
            "; {n} I/O{} still in flight at the end (not recorded)",
            if n == 1 { "" } else { "s" }
        ));
    }
    eprintln!("{line}");
    if let Some(n) = s.parts.map(|st| st.disk_full).filter(|&n| n > 0) {
        eprintln!(
            "iodump: warning: the file system was full {n} time{}: the oldest parts were deleted to go on, nothing was lost (a part cut there has no end chunk)",
            if n == 1 { "" } else { "s" },
        );
    }
    // I/O in flight when the programs attached completes without a start: up to a queue
    // depth or so per device. Far more than that means the start hooks miss I/O.
    if unmatched > 256 && unmatched * 100 > s.events + unmatched {
        eprintln!(
            "iodump: warning: {unmatched} of {} completed I/Os had no start this recorder saw: \
             more than I/O in flight when recording began; this kernel's start hooks miss I/O \
             (hooks: {})",
            s.events + unmatched,
            s.hooks
                .iter()
                .map(|(tp, k)| format!("{tp}:{k}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if s.events > 0 {
        let [f, l, n] = s.attributed;
        eprintln!(
            "iodump: attribution: file path {:.1}%, label {:.1}%, neither {:.1}%",
            f as f64 * 100.0 / s.events as f64,
            l as f64 * 100.0 / s.events as f64,
            n as f64 * 100.0 / s.events as f64
        );
    }
    if stats {
        let parts: Vec<String> = s
            .kernel_counters
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        eprintln!("iodump: kernel counters: {}", parts.join(" "));
        if s.stale_in_flight > 0 {
            eprintln!(
                "iodump: in-flight entries the once-a-second look left out, their device's kernel count saying none was in flight (completions missed): {} (over all looks)",
                s.stale_in_flight
            );
        }
        eprintln!(
            "iodump: names in memory at the end: {} paths, {} threads; forgotten after --forget-idle: {} paths, {} threads",
            s.known.0, s.known.1, s.forgotten.paths, s.forgotten.threads
        );
        let skipped: Vec<String> = s
            .skipped_nested
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        if !skipped.is_empty() {
            eprintln!(
                "iodump: programs the kernel skipped as nested: {}",
                skipped.join(" ")
            );
        }
    }
    if let Some(st) = s.command_status {
        return Ok(ExitCode::from(st.clamp(0, 255) as u8));
    }
    if let Some((p, why)) = &s.first_failed_snapshot {
        eprintln!(
            "iodump: error: {} snapshot(s) could not be saved whole (first: {}: {why})",
            s.failed_snapshots,
            p.display()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_rates() {
        assert_eq!(parse_sample("10%").unwrap(), 10);
        assert_eq!(parse_sample("100%").unwrap(), 1);
        assert_eq!(parse_sample("1/7").unwrap(), 7);
        assert!(parse_sample("0%").is_err());
        assert!(parse_sample("1/0").is_err());
        assert!(parse_sample("half").is_err());
        // A bare number is a percentage (the seed article's `--sample 10`).
        assert_eq!(parse_sample("10").unwrap(), 10);
        assert_eq!(parse_sample("25").unwrap(), 4);
        assert_eq!(parse_sample("0.1").unwrap(), 1000);
        assert!(parse_sample("0").is_err());
        assert!(parse_sample("101").is_err());
        assert!(parse_sample("-5").is_err());
    }

    #[test]
    fn time_limits() {
        assert_eq!(time_limit(-1.0).unwrap(), None);
        assert_eq!(time_limit(1.5).unwrap(), Some(Duration::from_millis(1500)));
        assert_eq!(
            time_limit(1e19).unwrap(),
            Some(Duration::from_secs(10_000_000_000_000_000_000))
        );
        for bad in [
            1e20,
            f64::INFINITY,
            f64::NAN,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            -0.5,
            -2.0,
        ] {
            let e = time_limit(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("-t ") && e.ends_with("or -1 for no limit"),
                "{e}"
            );
        }
    }

    #[test]
    fn ops() {
        assert_eq!(op_mask(&[]).unwrap(), 0x7f);
        assert_eq!(op_mask(&["read".into(), "W".into()]).unwrap(), 0b11);
        assert!(op_mask(&["bogus".into()]).is_err());
    }
}
