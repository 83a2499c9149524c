//! `iodump replay`: flags → [`ReplayConfig`], an optional recorder child for `-o`, the report.

use std::io::{BufRead, BufReader, IsTerminal};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use iodump_replay::report::{fmt_ns, scheduler_lag, timing_error, QUANTILES};
use iodump_replay::run::quantile;
use iodump_replay::target::TargetKind;
use iodump_replay::{Beyond, EngineKind, IoKind, ReplayConfig, RunOptions};

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
    /// Wrap the offset around (modulo the target's size, aligned).
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
/// I/O past the target's end is wrapped (offset modulo the target's size) by default, or
/// skipped with --beyond skip; I/O larger than the whole target is always skipped. Nothing is
/// ever written past the end.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ReplayArgs {
    /// Trace to replay.
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
    /// CPU but one, or one per CPU with --no-stall; never more than there are streams).
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
}

/// A recorder child (`iodump record`) running in its own process group.
struct RecorderChild {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl RecorderChild {
    fn start(devices: &[String], output: &PathBuf) -> anyhow::Result<RecorderChild> {
        let exe = std::env::current_exe().context("cannot find the iodump executable")?;
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("record");
        for d in devices {
            cmd.arg("-d").arg(d);
        }
        cmd.arg("--pid")
            .arg(std::process::id().to_string())
            .arg("-o")
            .arg(output)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C stops the replay, which then stops the recorder.
            .process_group(0);
        let mut child = cmd.spawn().context("cannot start the recorder")?;
        let stderr = child.stderr.take().context("recorder has no stderr")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut rc = RecorderChild { child, lines: rx };
        let mut last = String::new();
        loop {
            match rc.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(l) if l.starts_with("iodump: recording") => return Ok(rc),
                Ok(l) => last = l,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let _ = rc.child.kill();
                    bail!("the recorder did not start within 30 s");
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let _ = rc.child.wait();
                    let last = last.trim_start_matches("iodump: error: ");
                    bail!("cannot record the replay (-o): {last}");
                }
            }
        }
    }

    fn stop(mut self) -> anyhow::Result<Vec<String>> {
        // SAFETY: kill only sends a signal to our child's pid.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGINT);
        }
        let st = self.child.wait().context("waiting for the recorder")?;
        let lines: Vec<String> = self.lines.try_iter().collect();
        if !st.success() {
            bail!(
                "the recorder failed: {}",
                lines.last().map(String::as_str).unwrap_or("(no message)")
            );
        }
        Ok(lines)
    }
}

/// The device to record for a target: itself, or the device holding a file.
fn record_device(kind: TargetKind, path: &std::path::Path) -> anyhow::Result<String> {
    match kind {
        TargetKind::BlockDevice { major, minor } => Ok(format!("{major}:{minor}")),
        TargetKind::File { major, minor } => {
            if major == 0 {
                bail!(
                    "-o: {} is on a filesystem without a single block device (btrfs, tmpfs, overlay): record a block device target instead",
                    path.display()
                );
            }
            Ok(format!("{major}:{minor}"))
        }
    }
}

/// Rewrites one progress line on stderr until `finished`.
fn progress(done_ios: &AtomicU64, total: u64, finished: &AtomicBool) {
    let start = std::time::Instant::now();
    let mut shown = false;
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(500));
        if finished.load(Ordering::Relaxed) {
            break;
        }
        let n = done_ios.load(Ordering::Relaxed);
        let secs = start.elapsed().as_secs_f64();
        eprint!(
            "\r\x1b[Kiodump: replayed {n} of {total} I/Os ({:.0}%), {:.0} IOPS",
            n as f64 * 100.0 / total.max(1) as f64,
            n as f64 / secs.max(1e-9)
        );
        shown = true;
    }
    if shown {
        eprint!("\r\x1b[K");
    }
}

/// The trace's name of a recorded device.
fn device_name(p: &iodump_replay::Prepared, dev: iodump_format::DevT) -> String {
    p.device_names
        .iter()
        .find(|(d, _)| *d == dev)
        .map_or_else(|| dev.to_string(), |(_, n)| n.clone())
}

pub fn run(a: &ReplayArgs) -> anyhow::Result<ExitCode> {
    if !(a.speed > 0.0 && a.speed.is_finite()) {
        bail!(
            "--speed {}: give a positive, finite factor (2 = twice as fast)",
            crate::cli::show_f64(a.speed)
        );
    }
    if a.loops == 0 {
        bail!("--loops 0: give at least 1");
    }
    let mut map = Vec::new();
    for m in &a.map {
        let (d, p) = m
            .split_once('=')
            .with_context(|| format!("--map {m:?}: expected DEV=PATH"))?;
        map.push((d.to_string(), PathBuf::from(p)));
    }
    if a.target.is_none() && map.is_empty() {
        bail!("give a target: --target PATH (every device) or --map DEV=PATH");
    }
    // -o follows the output rule (checked here so that nothing runs when it is refused; the
    // recorder checks again as it creates the file): what is there is replaced, once the
    // replay's recording has started, only when it is a regular file of this user.
    let existing_output = match &a.output {
        Some(o) => iodump_output::check(o)?.map(|m| (m.dev(), m.ino())),
        None => None,
    };
    let output_is = |what: &str| {
        anyhow::anyhow!(
            "refusing to record the replay into {}: it is {what}",
            a.output.as_deref().unwrap_or(Path::new("")).display()
        )
    };
    if let (Some(id), Ok(m)) = (existing_output, std::fs::metadata(&a.file)) {
        if id == (m.dev(), m.ino()) {
            return Err(output_is("the trace being replayed"));
        }
    }
    let filter = a
        .filter
        .as_deref()
        .map(|f| crate::cli::parse_filter("-f", f))
        .transpose()?;
    let cfg = ReplayConfig {
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
        ..ReplayConfig::default()
    };
    let prepared = iodump_replay::prepare(&cfg)?;
    if let Some(id) = existing_output {
        for t in &prepared.targets {
            if t.file.metadata().is_ok_and(|m| id == (m.dev(), m.ino())) {
                return Err(output_is("a replay target"));
            }
        }
    }
    if !a.no_stall {
        // The scheduler's due times are u64 ns: a slower replay would overflow them.
        let last_ns = prepared.plan.ios.iter().map(|io| io.sched_ns).max();
        let stretched_ns = last_ns.unwrap_or(0) as f64 / a.speed;
        if stretched_ns >= u64::MAX as f64 {
            bail!(
                "--speed {}: the replay would last more than 584 years (what its clock holds): give a larger factor",
                crate::cli::show_f64(a.speed),
            );
        }
    }
    for t in &prepared.targets {
        if !t.direct {
            eprintln!(
                "iodump: {} does not support O_DIRECT: replaying through the page cache",
                t.path.display()
            );
        }
    }
    for (ti, devs) in prepared.plan.devices_on_target.iter().enumerate() {
        if devs.len() > 1 {
            let names: Vec<String> = devs.iter().map(|d| device_name(&prepared, *d)).collect();
            eprintln!(
                "iodump: warning: {} are replayed onto {}: their offsets overlap (give each its own target with --map DEV=PATH)",
                names.join(", "),
                prepared.targets[ti].path.display()
            );
        }
    }
    if let Some(first) = prepared.plan.damage.first() {
        eprintln!(
            "iodump: warning: {} is damaged, replaying what is intact ({} damaged parts; first: {first})",
            a.file.display(),
            prepared.plan.damage.len()
        );
    }
    let recorder = match &a.output {
        Some(out) => {
            let mut devs = Vec::new();
            for t in &prepared.targets {
                let d = record_device(t.kind, &t.path)?;
                if !devs.contains(&d) {
                    devs.push(d);
                }
            }
            Some(RecorderChild::start(&devs, out)?)
        }
        None => None,
    };
    crate::signals::install();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = match a.threads {
        // Timed replay keeps one CPU free: spinning schedulers on every CPU get preempted
        // by the kernel's own work, which shows as ms of timing error.
        0 if !a.no_stall => cpus.saturating_sub(1).max(1),
        0 => cpus,
        n => n,
    };
    let done_ios = AtomicU64::new(0);
    let finished = AtomicBool::new(false);
    let total = prepared.plan.ios.len() as u64;
    let result = std::thread::scope(|scope| {
        // Progress on a terminal: one line, rewritten twice a second.
        if std::io::stderr().is_terminal() && !a.json {
            scope.spawn(|| progress(&done_ios, total, &finished));
        }
        let r = iodump_replay::execute(
            &prepared,
            cfg.engine,
            threads,
            RunOptions {
                speed: a.speed,
                no_stall: a.no_stall,
            },
            &crate::signals::STOP,
            &done_ios,
        );
        finished.store(true, Ordering::Relaxed);
        r
    });
    // Stop the recorder whatever happened, so that its trace is complete.
    let rec_lines = recorder.map(RecorderChild::stop);
    let mut res = result?;
    let rec_lines = rec_lines.transpose()?;
    // With -o: the replay's block-layer latencies, from its own recording.
    let block = match (&a.output, &rec_lines) {
        (Some(out), Some(_)) => Some(block_latencies(&prepared.plan, out)?),
        _ => None,
    };
    if a.json {
        let mut v = json_report(&prepared.plan, &mut res, a);
        if let Some(rows) = &block {
            v["block_latency"] = block_json(rows);
        }
        println!("{v}");
    } else {
        print!(
            "{}",
            iodump_replay::report::render(&prepared.plan, &mut res, a.speed, a.no_stall)
        );
        if let Some(rows) = &block {
            print!("{}", iodump_replay::report::render_block_latency(rows));
        }
    }
    for l in rec_lines.into_iter().flatten() {
        eprintln!("{l}");
    }
    let failed: u64 = res.kinds.iter().map(|k| k.errors).sum();
    if failed > 0 {
        eprintln!("iodump: {failed} replayed I/Os failed");
        return Ok(ExitCode::from(1));
    }
    Ok(if res.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

fn json_report(
    plan: &iodump_replay::Plan,
    res: &mut iodump_replay::RunResult,
    a: &ReplayArgs,
) -> serde_json::Value {
    use serde_json::json;
    let mut ops = serde_json::Map::new();
    for k in IoKind::ALL {
        let i = k as usize;
        let r = &mut res.kinds[i];
        if plan.recorded_count[i] == 0 && r.issued == 0 {
            continue;
        }
        let mut lat = serde_json::Map::new();
        for (q, name) in QUANTILES {
            lat.insert(
                name.to_string(),
                json!({
                    "recorded_ns": quantile(&mut r.recorded_latency_ns, q),
                    "replayed_ns": quantile(&mut r.latency_ns, q),
                }),
            );
        }
        ops.insert(
            k.name().to_string(),
            json!({
                "recorded": plan.recorded_count[i],
                "recorded_bytes": plan.recorded_bytes[i],
                "replayed": r.issued,
                "ok": r.ok,
                "errors": r.errors,
                "replayed_bytes": r.bytes,
                "skipped_not_allowed": plan.skipped.not_allowed[i],
                "latency": lat,
            }),
        );
    }
    let te = timing_error(res);
    let lag = scheduler_lag(res);
    json!({
        "engine": res.engine,
        "speed": a.speed,
        "no_stall": a.no_stall,
        "streams": plan.streams.len(),
        "threads": res.threads,
        "planned": plan.ios.len(),
        "recorded_span_ns": plan.span_ns,
        "loops": plan.loops,
        "elapsed_ns": res.elapsed_ns,
        "interrupted": res.interrupted,
        "ops": ops,
        "skipped": {
            "beyond_end": plan.skipped.beyond_end,
            "unmapped": plan.skipped.unmapped,
            "unsupported_op": plan.skipped.unsupported_op,
            "filtered": plan.skipped.filtered,
        },
        "wrapped": plan.wrapped,
        "realigned": plan.realigned,
        "timing_error_ns": te.map(|(p50, p90, p99, max)| json!({"p50": p50, "p90": p90, "p99": p99, "max": max})),
        "scheduler_lag_ns": lag.map(|(p50, p99, max)| json!({"p50": p50, "p99": p99, "max": max})),
        "depth_waits": res.depth_waits,
        "max_in_flight": res.max_in_flight,
        "inline": res.inline,
        "summary": fmt_ns(res.elapsed_ns),
    })
}

use iodump_replay::report::LatencyRows as BlockRows;

/// Block-layer latencies of the replay's recording next to the recorded ones.
fn block_latencies(plan: &iodump_replay::Plan, out: &std::path::Path) -> anyhow::Result<BlockRows> {
    let r = iodump_format::Reader::open(out)
        .with_context(|| format!("cannot read the replay's recording {}", out.display()))?;
    let mut lat: [Vec<u64>; 5] = Default::default();
    for e in r.events() {
        let k = match e.op {
            iodump_format::Op::Read => IoKind::Read,
            iodump_format::Op::Write => IoKind::Write,
            iodump_format::Op::Flush => IoKind::Flush,
            iodump_format::Op::Discard => IoKind::Discard,
            iodump_format::Op::WriteZeroes => IoKind::WriteZeroes,
            _ => continue,
        };
        lat[k as usize].push(e.latency_ns);
    }
    Ok(iodump_replay::report::block_latency_rows(plan, &mut lat))
}

fn block_json(rows: &BlockRows) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for (k, cells) in rows {
        let mut q = serde_json::Map::new();
        for ((_, name), (a, b)) in QUANTILES.iter().zip(cells) {
            q.insert(
                name.to_string(),
                serde_json::json!({"recorded_ns": a, "replayed_ns": b}),
            );
        }
        m.insert(k.name().to_string(), serde_json::Value::Object(q));
    }
    serde_json::Value::Object(m)
}
