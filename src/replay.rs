//! `iodump replay`: flags → [`ReplayConfig`], the steps of an [`iodump_replay::Session`],
//! a progress line, and the report on stdout (text or JSON).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

#[cfg(feature = "analyze")]
use anyhow::Context;
use clap::{Args, ValueEnum};
use iodump_replay::{Beyond, EngineKind, ReplayConfig, Session};

/// Engines.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum EngineArg {
    /// io_uring (falls back to psync when io_uring is unavailable).
    #[value(name = "io_uring")]
    IoUring,
    /// A thread pool doing pread/pwrite.
    Psync,
}

/// What to do with I/O past the target's end.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BeyondArg {
    /// Wrap the offset around, keeping its alignment up to 1 MiB.
    Wrap,
    /// Skip the I/O and count it.
    Skip,
}

/// Re-issue a recorded workload against a device or file, keeping its timing, order and
/// concurrency.
///
/// One stream per recorded thread: each stream keeps its order, its inter-arrival gaps and
/// the in-flight depth the recording showed (an I/O waits until fewer of its stream's earlier
/// I/Os are in flight than were at its recorded issue). O_DIRECT with aligned buffers;
/// offsets are the recorded sectors × 512, rounded to the target's logical block size.
///
/// Safety: reads only by default. Writes, discards and write-zeroes are skipped and counted
/// unless --allow-writes. With --allow-writes, a target that is mounted, in use (swap,
/// device-mapper, a loop device's backing file) or a block device holding a filesystem or
/// partition-table signature is refused unless --force, whatever path names it (files are
/// compared by device and inode, devices by number: a hard link, bind mount or symbolic link
/// is refused like the original).
///
/// I/O past the target's end is wrapped by default (offset modulo the largest multiple of
/// 1 MiB that fits, so it keeps its alignment: a 4 KiB-aligned read stays 4 KiB-aligned), or
/// skipped with --beyond skip; I/O larger than the whole target is always skipped. Nothing is
/// ever written past the end.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ReplayArgs {
    /// Trace to replay, or a directory holding one recording in parts (`record -o DIR/
    /// --rotate`).
    pub file: PathBuf,
    /// Block device or regular file that receives the I/O of every recorded device not
    /// given with --map.
    #[arg(long, value_name = "PATH")]
    pub target: Option<PathBuf>,
    /// Send one recorded device (name, /dev/NAME or MAJ:MIN) to its own target.
    #[arg(long, value_name = "DEV=PATH")]
    pub map: Vec<String>,
    /// Time scale: 2 halves the gaps between I/Os, 0.5 doubles them.
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub speed: f64,
    /// Ignore recorded times: issue as fast as order and depth allow.
    #[arg(long)]
    pub no_stall: bool,
    /// Replay writes, discards and write-zeroes (destroys the target's data).
    #[arg(long)]
    pub allow_writes: bool,
    /// With --allow-writes: write even to a mounted or in-use target or one holding a
    /// filesystem.
    #[arg(long, requires = "allow_writes")]
    pub force: bool,
    /// Replay only I/O matching this expression (schemas/filter-expressions.md).
    #[arg(short = 'f', long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Replay the trace N times back to back.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub loops: u32,
    /// I/O engine.
    #[arg(long, value_enum, default_value = "io_uring")]
    pub engine: EngineArg,
    /// Scheduler threads, each with its own engine and its share of the streams (0: one per
    /// CPU but one, or one per CPU with --no-stall; never more than there are streams). In a
    /// timed replay each CPU they leave free runs a helper thread for one of them.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub threads: usize,
    /// I/O past the target's end: wrap around or skip.
    #[arg(long, value_enum, default_value = "wrap")]
    pub beyond: BeyondArg,
    /// Record the replay's own I/O on the targets into this trace (needs BPF), to compare with
    /// `iodump analyze`. Same rule as `record -o`; never the trace replayed nor a target.
    #[arg(short = 'o', long, value_name = "REPLAY.iod")]
    pub output: Option<PathBuf>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// With -o: score the replay against the recording (I/Os issued, order per stream,
    /// issue-time error, IOPS correlation, latency), as `iodump diff --replay FILE REPLAY.iod`:
    /// one more line of report, or a `verify` object in the JSON.
    #[cfg(feature = "analyze")]
    #[arg(long, requires = "output")]
    pub verify: bool,
}

/// Rewrites one progress line on stderr until `finished` (with the loop under way when the
/// trace is replayed `loops` times).
fn progress(done_ios: &AtomicU64, total: u64, loops: u32, finished: &AtomicBool) {
    let per_loop = total / u64::from(loops.max(1));
    let start = std::time::Instant::now();
    let mut shown = false;
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(500));
        if finished.load(Ordering::Relaxed) {
            break;
        }
        let n = done_ios.load(Ordering::Relaxed);
        let secs = start.elapsed().as_secs_f64();
        let lap = if loops > 1 {
            format!(
                ", loop {} of {loops}",
                (n / per_loop.max(1) + 1).min(u64::from(loops))
            )
        } else {
            String::new()
        };
        eprint!(
            "\r\x1b[Kiodump: replayed {n} of {total} I/Os ({:.0}%{lap}), {:.0} IOPS",
            n as f64 * 100.0 / total.max(1) as f64,
            n as f64 / secs.max(1e-9)
        );
        shown = true;
    }
    if shown {
        eprint!("\r\x1b[K");
    }
}

/// The flags as the replay crate's configuration (the crate checks the values).
fn config(a: &ReplayArgs) -> anyhow::Result<ReplayConfig> {
    let mut map = Vec::new();
    for m in &a.map {
        let (d, p) = m
            .split_once('=')
            .ok_or_else(|| crate::args::usage(format!("--map {m:?}: expected DEV=PATH")))?;
        map.push((d.to_string(), PathBuf::from(p)));
    }
    let filter = a
        .filter
        .as_deref()
        .map(|f| crate::args::parse_filter("-f", f))
        .transpose()?;
    Ok(ReplayConfig {
        trace: a.file.clone(),
        target: a.target.clone(),
        map,
        speed: a.speed,
        no_stall: a.no_stall,
        allow_writes: a.allow_writes,
        force: a.force,
        filter,
        loops: a.loops,
        engine: match a.engine {
            EngineArg::IoUring => EngineKind::IoUring,
            EngineArg::Psync => EngineKind::Psync,
        },
        beyond: match a.beyond {
            BeyondArg::Wrap => Beyond::Wrap,
            BeyondArg::Skip => Beyond::Skip,
        },
        threads: a.threads,
        output: a.output.clone(),
        ..ReplayConfig::default()
    })
}

/// `--verify`: the replay's recording scored against the trace replayed (its summary line
/// and JSON), once the replay is over.
#[cfg(feature = "analyze")]
fn verify(a: &ReplayArgs) -> anyhow::Result<Option<(String, serde_json::Value)>> {
    let (true, Some(replayed)) = (a.verify, &a.output) else {
        return Ok(None);
    };
    let cfg = iodump_analyze::verify::VerifyConfig {
        original: a.file.clone(),
        replayed: replayed.clone(),
        filter: a
            .filter
            .as_deref()
            .map(|f| crate::args::parse_filter("-f", f))
            .transpose()?,
        speed: if a.no_stall { 0.0 } else { a.speed },
        reads_only: !a.allow_writes,
    };
    let v = iodump_analyze::verify::verify(&cfg)
        .with_context(|| format!("verifying the replay against {}", a.file.display()))?;
    Ok(Some((v.summary(), v.json())))
}

pub fn run(a: &ReplayArgs) -> anyhow::Result<ExitCode> {
    // The score pairs each recorded I/O with its replay: of N loops, it compared one loop
    // with all of them (IOPS correlation 0.3 for a faithful replay of 2 loops).
    #[cfg(feature = "analyze")]
    if a.verify && a.loops > 1 {
        crate::args::usage_bail!(
            "--verify scores one pass of the trace: give --loops 1 (or replay the loops \
             without --verify)"
        );
    }
    let mut session = Session::prepare(config(a)?)?;
    // A score that cannot be made is refused before the replay, not after it.
    #[cfg(feature = "analyze")]
    if a.verify {
        let filter = a
            .filter
            .as_deref()
            .map(|f| crate::args::parse_filter("-f", f))
            .transpose()?;
        iodump_analyze::verify::check_before_replay(
            &a.file,
            filter.as_ref(),
            !a.allow_writes,
            session.planned_ios(),
            a.loops,
        )
        .context("--verify (nothing was replayed)")?;
    }
    for n in session.notices() {
        eprintln!("iodump: {n}");
    }
    session.start_recording()?;
    crate::signals::install();
    let done_ios = AtomicU64::new(0);
    let finished = AtomicBool::new(false);
    let total = session.planned_ios();
    let result = std::thread::scope(|scope| {
        // Progress on a terminal: one line, rewritten twice a second.
        if std::io::stderr().is_terminal() && !a.json {
            scope.spawn(|| progress(&done_ios, total, a.loops, &finished));
        }
        let r = session.execute(&crate::signals::STOP, &done_ios);
        finished.store(true, Ordering::Relaxed);
        r
    });
    let done = session.finish(result)?;
    #[cfg(feature = "analyze")]
    let verified = verify(a)?;
    #[cfg(not(feature = "analyze"))]
    let verified: Option<(String, serde_json::Value)> = None;
    // The replay is done (and its trace closed): a reader gone from stdout loses nothing.
    let mut stdout = std::io::stdout().lock();
    if a.json {
        let mut j = done.report.json();
        if let (Some((_, v)), Some(o)) = (verified, j.as_object_mut()) {
            o.insert("verify".into(), v);
        }
        let _ = writeln!(stdout, "{j}");
    } else {
        let _ = write!(stdout, "{}", done.report.text());
        if let Some((line, _)) = verified {
            let _ = writeln!(stdout, "{line}");
        }
    }
    drop(stdout);
    for l in &done.recorder_lines {
        eprintln!("{l}");
    }
    let failed = done.report.failed_ios();
    if failed > 0 {
        eprintln!("iodump: {failed} replayed I/Os failed");
        return Ok(ExitCode::from(1));
    }
    Ok(if done.report.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
