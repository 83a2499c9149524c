//! A recording session: load and attach, drain the ring buffer, convert, write or print,
//! count losses, stop on a signal, a time limit or the end of the traced command.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iodump_format::{Device, EndInfo, Event, Header, Loss, LossReason, Writer, WriterOptions};

use iodump_format::expr::{Expr, ResolvedView};
use iodump_output::OutputFile;

use crate::abi::{self, cnt, IoEvent, PathEvent};
use crate::bpf::{BpfSettings, Program};
use crate::convert::{Converter, NewEntries};
use crate::devices;
use crate::error::RecordError;
use crate::mounts::MountTable;
use crate::print::{PrintFormat, Printer};

/// Everything `iodump record` was asked to do.
#[derive(Clone, Debug, Default)]
pub struct RecordConfig {
    /// `-d` arguments (empty: every device).
    pub devices: Vec<String>,
    /// Trace file to write.
    pub output: Option<PathBuf>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Print one line per I/O in this format (default: text when there is no output file).
    pub print: Option<PrintFormat>,
    /// Kernel-side settings (filters, sampling, buffer); `devices` is filled from `devices`.
    pub bpf: BpfSettings,
    /// Command to run and trace until it exits.
    pub command: Vec<String>,
    /// The recorder's own command line (stored in the header).
    pub recorder_argv: Vec<String>,
    /// Writer memory limit.
    pub memory_limit_bytes: usize,
    /// Free metadata for the header.
    pub metadata: Vec<(String, String)>,
    /// `-f` expression: what it implies is applied in the kernel, the rest per event here.
    pub filter: Option<Expr>,
    /// Where printed lines go (appended): stdout when `None`.
    pub print_to: Option<std::sync::Arc<File>>,
}

/// What a session did.
#[derive(Clone, Debug, Default)]
pub struct RecordSummary {
    /// Events recorded.
    pub events: u64,
    /// Events lost (sum of loss records).
    pub lost_events: u64,
    /// Bytes of the trace file.
    pub bytes_written: u64,
    /// Exit status of the traced command.
    pub command_status: Option<i32>,
    /// Hooks and how they were attached.
    pub hooks: Vec<(&'static str, &'static str)>,
    /// Events with a file path, a label, neither.
    pub attributed: [u64; 3],
    /// Wall time recorded.
    pub duration: Duration,
    /// The kernel side's counters at the end, summed over CPUs, by name.
    pub kernel_counters: Vec<(&'static str, u64)>,
}

fn now_pair() -> (i64, u64) {
    let mut rt = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut mono = rt;
    // SAFETY: clock_gettime only writes the timespec we pass, which lives on our stack.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut mono);
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut rt);
    }
    (
        rt.tv_sec * 1_000_000_000 + rt.tv_nsec,
        mono.tv_sec as u64 * 1_000_000_000 + mono.tv_nsec as u64,
    )
}

/// Monotonic nanoseconds now (the clock of event timestamps).
pub fn monotonic_ns() -> u64 {
    now_pair().1
}

fn read_trim(p: &str) -> String {
    std::fs::read_to_string(p)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Receives each recorded event as it is converted (after the `-f` filter), and the
/// session loop's ticks: what `iodump top` aggregates live. See [`record_live`].
pub trait LiveSink {
    /// One event that passed the filter, with its kernel record (comm, inode) and the
    /// converter (path bytes of `e.path_id`, device names).
    fn event(&mut self, e: &Event, r: &IoEvent, conv: &Converter);
    /// Called once per pass of the session loop (at least every ~100 ms), with the events
    /// lost so far (updated once a second); returns true to stop recording.
    fn tick(&mut self, lost_events: u64) -> bool;
}

/// Where events go: a trace file, a printer, a live sink, or several.
struct Sinks<'a> {
    writer: Option<Writer<File>>,
    printer: Option<Printer>,
    live: Option<&'a mut dyn LiveSink>,
}

fn write_err(e: iodump_format::WriteError) -> RecordError {
    RecordError::Write(e)
}

/// Records until `stop` is set, the duration passes or the command exits.
pub fn record(cfg: &RecordConfig, stop: &AtomicBool) -> Result<RecordSummary, RecordError> {
    record_live(cfg, stop, None)
}

/// [`record`], handing every event to `live` as well (and stopping when its tick says so).
/// With a live sink and neither an output file nor `print`, nothing is printed.
pub fn record_live(
    cfg: &RecordConfig,
    stop: &AtomicBool,
    live: Option<&mut dyn LiveSink>,
) -> Result<RecordSummary, RecordError> {
    let all = devices::list()?;
    let mut wanted: Vec<Device> = Vec::new();
    for d in &cfg.devices {
        let dev = devices::resolve(d, &all)?;
        // A whole disk includes its partitions.
        for p in all.iter().filter(|p| p.partition_of == Some(dev.dev)) {
            wanted.push(p.clone());
        }
        wanted.push(dev);
    }
    let mut settings = cfg.bpf.clone();
    settings.devices = wanted.iter().map(|d| d.dev).collect();
    if let Some(f) = &cfg.filter {
        let p = f.pushdown();
        settings.min_bytes = settings.min_bytes.max(p.min_bytes);
        if let Some(m) = p.max_bytes {
            settings.max_bytes = if settings.max_bytes == 0 {
                m
            } else {
                settings.max_bytes.min(m)
            };
            if settings.max_bytes == 0 {
                // `iosize < 1`: only zero-byte I/O (flushes); the kernel's 0 means no limit.
                settings.op_mask &= 1 << iodump_format::Op::Flush.code();
            }
        }
        settings.op_mask &= p.op_mask;
        if let Some(pids) = p.pids {
            if settings.pids.is_empty() {
                settings.pids = pids;
            } else {
                settings.pids.retain(|x| pids.contains(x));
                if settings.pids.is_empty() {
                    settings.op_mask = 0;
                }
            }
        }
        if let Some(comms) = p.comms {
            let comms: Vec<Vec<u8>> = comms.into_iter().map(String::into_bytes).collect();
            if settings.comms.is_empty() {
                settings.comms = comms;
            } else {
                settings.comms.retain(|x| comms.contains(x));
                if settings.comms.is_empty() {
                    settings.op_mask = 0;
                }
            }
        }
    }
    settings.exclude_tgid = std::process::id();

    // Create the output before loading, so a bad path fails fast: a private temporary file
    // beside it, renamed over it only once recording has really started (below), so that a
    // failure before that leaves an existing trace as it was.
    let mut output = match &cfg.output {
        Some(p) => Some(OutputFile::create(p)?),
        None => None,
    };

    let mut prog = Program::load(&settings)?;
    for o in &prog.attached.off {
        eprintln!("iodump: warning: off on this kernel: {o}");
    }
    let (wall, mono) = now_pair();
    let mut metadata = cfg.metadata.clone();
    metadata.push(("iodump.variant".into(), prog.attached.variant.clone()));
    metadata.push(("iodump.hooks".into(), prog.attached.hooks_line()));
    if !prog.attached.off.is_empty() {
        metadata.push(("iodump.off".into(), prog.attached.off.join("; ")));
    }
    let header = Header {
        wall_clock_ns: wall,
        monotonic_ns: mono,
        hostname: read_trim("/proc/sys/kernel/hostname"),
        kernel_release: read_trim("/proc/sys/kernel/osrelease"),
        tool_version: format!("iodump {}", env!("CARGO_PKG_VERSION")),
        recorder_argv: cfg.recorder_argv.clone(),
        command_argv: (!cfg.command.is_empty()).then(|| cfg.command.clone()),
        metadata,
    };
    let live_only = live.is_some();
    let mut sinks = Sinks {
        live,
        writer: match &output {
            Some(o) => Some(
                Writer::new(
                    o.try_clone_file()?,
                    &header,
                    WriterOptions {
                        memory_limit_bytes: cfg.memory_limit_bytes.max(4 << 20),
                        ..WriterOptions::default()
                    },
                )
                .map_err(write_err)?,
            ),
            None => None,
        },
        printer: match (cfg.print, &cfg.output) {
            (Some(f), _) => Some(Printer::new(f, &header, &all, cfg.print_to.clone())),
            (None, None) if live_only => None,
            (None, None) => Some(Printer::new(
                PrintFormat::Text,
                &header,
                &all,
                cfg.print_to.clone(),
            )),
            (None, Some(_)) => None,
        },
    };
    if let Some(w) = &mut sinks.writer {
        for d in &all {
            w.add_device(d.clone()).map_err(write_err)?;
        }
    }
    if let Some(p) = &mut sinks.printer {
        p.header();
    }

    let mut child: Option<Child> = None;
    if let Some((prog_name, args)) = cfg.command.split_first() {
        child =
            Some(
                Command::new(prog_name)
                    .args(args)
                    .spawn()
                    .map_err(|e| RecordError::Command {
                        program: prog_name.clone(),
                        message: e.to_string(),
                    })?,
            );
    }
    // Attached and the command running: recording has started, the trace takes its path.
    if let Some(o) = &mut output {
        if let Err(e) = commit_output(o, sinks.writer.as_mut()) {
            if let Some(c) = &mut child {
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
                let _ = c.wait();
            }
            return Err(e);
        }
    }

    // Attached: say so (scripts and tests wait for this line before starting a workload).
    eprintln!(
        "iodump: recording {} ({}); {}",
        if cfg.devices.is_empty() {
            "every device".to_string()
        } else {
            cfg.devices.join(", ")
        },
        prog.attached.hooks_line(),
        if cfg.command.is_empty() {
            "Ctrl-C to stop"
        } else {
            "until the command exits"
        }
    );
    let mut ingest = Ingest {
        conv: Converter::new(&all, MountTable::read()),
        entries: NewEntries::default(),
        filter: cfg.filter.as_ref(),
        events: 0,
    };
    let started = Instant::now();
    let mut last_flush = Instant::now();
    let mut last_batch_flush = Instant::now();
    let mut losses = LossTracker {
        last_ns: mono,
        ..LossTracker::default()
    };
    let mut command_status = None;
    let fd = prog.ring.as_raw_fd();
    let mut result: Result<(), RecordError>;
    let mut stopping = false;
    loop {
        // Wait for data (or 100 ms).
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on our stack; the fd is the ring buffer map's, alive
        // as long as `prog`.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        // Partial batches wait in the kernel at most one tick (plus this poll).
        if last_batch_flush.elapsed() >= BATCH_TICK {
            last_batch_flush = Instant::now();
            prog.flush_batches();
        }
        result = ingest.drain(&mut prog, &mut sinks);
        if result.is_err() {
            break;
        }
        if last_flush.elapsed() >= Duration::from_secs(1) || stopping {
            last_flush = Instant::now();
            if let Ok(c) = prog.counters() {
                for l in losses.update(&c, monotonic_ns()) {
                    if let Some(w) = &mut sinks.writer {
                        if let Err(e) = w.add_loss(l) {
                            result = Err(write_err(e));
                        }
                    }
                }
            }
            if let Some(w) = &mut sinks.writer {
                if let Err(e) = w.flush() {
                    result = Err(write_err(e));
                }
            }
            if let Some(p) = &mut sinks.printer {
                p.flush();
            }
            if result.is_err() {
                break;
            }
        }
        if stopping {
            break;
        }
        if let Some(l) = &mut sinks.live {
            if l.tick(losses.total) {
                stopping = true;
            }
        }
        if let Some(c) = &mut child {
            if let Ok(Some(st)) = c.try_wait() {
                command_status = Some(exit_status(st));
                stopping = true;
            }
        }
        if stop.load(Ordering::Relaxed) || cfg.duration.is_some_and(|d| started.elapsed() >= d) {
            stopping = true;
        }
        if stopping {
            // Give in-flight I/O a moment to complete, then one more drain and flush.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Detach, then drain what is left: from here on the counters no longer move, so the
    // I/Os that vanished from the in-flight tables can be counted exactly.
    prog.detach();
    let (leftover, leftover_events) = prog.drain_batches();
    if result.is_ok() {
        result = ingest.drain(&mut prog, &mut sinks);
    }
    for rec in &leftover {
        if result.is_ok() {
            result = ingest.record(rec, &mut sinks);
        }
    }
    if let Ok(c) = prog.counters() {
        let now = monotonic_ns();
        let mut final_losses = losses.update(&c, now);
        let sum = |i: u32| c[i as usize].iter().sum::<u64>();
        let accounted = leftover_events
            + sum(cnt::EMITTED)
            + sum(cnt::LOST_RINGBUF)
            + sum(cnt::SIZE_FILTERED)
            + sum(cnt::RQ_MERGED)
            + sum(cnt::LOST_STALE)
            + prog.in_flight();
        let evicted = sum(cnt::TRACKED).saturating_sub(accounted);
        let nested = prog.recursion_misses();
        for (count, reason) in [(evicted, LossReason::Evicted), (nested, LossReason::Nested)] {
            if count > 0 {
                losses.total += count;
                final_losses.push(Loss {
                    cpu: ALL_CPUS,
                    reason,
                    count,
                    start_ns: mono,
                    end_ns: now,
                });
            }
        }
        if let Some(w) = &mut sinks.writer {
            for l in final_losses {
                if let Err(e) = w.add_loss(l) {
                    result = result.and(Err(write_err(e)));
                }
            }
        }
    }
    if let Some(mut c) = child.take() {
        if command_status.is_none() {
            // Stopped by a signal or the time limit: the command gets SIGTERM.
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            if let Ok(st) = c.wait() {
                command_status = Some(exit_status(st));
            }
        }
    }
    let kernel_counters = prog
        .counters()
        .map(|c| {
            cnt::NAMES
                .iter()
                .zip(&c)
                .map(|(n, v)| (*n, v.iter().sum()))
                .collect()
        })
        .unwrap_or_default();
    let mut summary = RecordSummary {
        kernel_counters,
        events: ingest.events,
        lost_events: losses.total,
        command_status,
        hooks: prog.attached.hooks.clone(),
        attributed: ingest.conv.attributed,
        duration: started.elapsed(),
        ..RecordSummary::default()
    };
    if let Some(p) = &mut sinks.printer {
        p.flush();
    }
    if let Some(w) = sinks.writer.take() {
        let end = EndInfo {
            end_monotonic_ns: monotonic_ns(),
            command_exit_status: command_status,
            ..EndInfo::default()
        };
        let stats_before = w.stats();
        match w.finish(end) {
            Ok(f) => {
                let _ = f.sync_all();
                summary.bytes_written = f.metadata().map(|m| m.len()).unwrap_or(0);
            }
            Err(e) => {
                summary.bytes_written = stats_before.bytes_written;
                result = result.and(Err(write_err(e)));
            }
        }
    }
    result.map(|()| summary)
}

/// Writes what the writer holds (the device table), then renames the output over its path: from
/// here on the trace at the path is readable whenever the recorder stops, even killed.
fn commit_output(o: &mut OutputFile, w: Option<&mut Writer<File>>) -> Result<(), RecordError> {
    if let Some(w) = w {
        w.flush().map_err(write_err)?;
    }
    o.commit()?;
    Ok(())
}

/// `Loss::cpu` of a loss counted for the whole machine rather than one CPU.
pub const ALL_CPUS: u16 = u16::MAX;

fn exit_status(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    }
}

/// The ingest state: converts ring-buffer records and hands them to the sinks.
struct Ingest<'a> {
    conv: Converter,
    entries: NewEntries,
    filter: Option<&'a Expr>,
    events: u64,
}

impl Ingest<'_> {
    /// Handles every record waiting in the ring buffer.
    fn drain(&mut self, prog: &mut Program, sinks: &mut Sinks) -> Result<(), RecordError> {
        while let Some(item) = prog.ring.next() {
            let rec: &[u8] = &item;
            self.record(rec, sinks)?;
        }
        Ok(())
    }

    /// Handles one ring-buffer record.
    fn record(&mut self, rec: &[u8], sinks: &mut Sinks) -> Result<(), RecordError> {
        if let Some(batch) = abi::batch_events(rec) {
            for r in batch {
                handle(
                    r,
                    &mut self.conv,
                    &mut self.entries,
                    sinks,
                    self.filter,
                    &mut self.events,
                )?;
            }
            return Ok(());
        }
        handle(
            rec,
            &mut self.conv,
            &mut self.entries,
            sinks,
            self.filter,
            &mut self.events,
        )
    }
}

/// How often partial batches of events are fetched from the kernel (`flush_batch`).
const BATCH_TICK: Duration = Duration::from_millis(100);

fn handle(
    rec: &[u8],
    conv: &mut Converter,
    entries: &mut NewEntries,
    sinks: &mut Sinks,
    filter: Option<&Expr>,
    events: &mut u64,
) -> Result<(), RecordError> {
    if rec.len() < 2 {
        return Ok(());
    }
    match u16::from_le_bytes([rec[0], rec[1]]) {
        abi::EV_IO => {
            let Some(r) = IoEvent::parse(rec) else {
                return Ok(());
            };
            let e: Event = conv.io_record(&r, entries);
            // Table entries are written even when the filter drops the event: the converter
            // will not announce them again.
            if let Some(w) = &mut sinks.writer {
                if let Some(d) = entries.device.take() {
                    w.add_device(d).map_err(write_err)?;
                }
                if let Some(p) = entries.process.take() {
                    w.add_process(p).map_err(write_err)?;
                }
                if let Some(p) = entries.path.take() {
                    w.add_path(p).map_err(write_err)?;
                }
            }
            if let Some(f) = filter {
                let v = ResolvedView {
                    comm: r.comm(),
                    path: conv.path(e.path_id),
                    dev: conv.dev_label(e.dev),
                };
                if !f.eval(&e, &v) {
                    return Ok(());
                }
            }
            if let Some(w) = &mut sinks.writer {
                w.push(&e).map_err(write_err)?;
            }
            if let Some(p) = &mut sinks.printer {
                p.event(&e, &r, conv.path(e.path_id), conv.args(e.pid));
            }
            if let Some(l) = &mut sinks.live {
                l.event(&e, &r, conv);
            }
            *events += 1;
        }
        abi::EV_PATH => {
            if let Some(p) = PathEvent::parse(rec) {
                if let Some(entry) = conv.path_record(&p) {
                    if let Some(w) = &mut sinks.writer {
                        w.add_path(entry).map_err(write_err)?;
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Turns the kernel's cumulative per-CPU loss counters into loss records of the deltas.
#[derive(Default)]
struct LossTracker {
    last: Vec<Vec<u64>>,
    last_ns: u64,
    total: u64,
}

impl LossTracker {
    fn update(&mut self, c: &[Vec<u64>], now_ns: u64) -> Vec<Loss> {
        let mut out = Vec::new();
        let reasons = [
            (cnt::LOST_RINGBUF, LossReason::RingBufferFull),
            (cnt::LOST_INFLIGHT, LossReason::InFlightFull),
            (cnt::LOST_STALE, LossReason::Evicted),
        ];
        if self.last.is_empty() {
            self.last = vec![Vec::new(); c.len()];
        }
        for (idx, reason) in reasons {
            let cur = &c[idx as usize];
            let last = &mut self.last[idx as usize];
            last.resize(cur.len(), 0);
            for (cpu, (&now, prev)) in cur.iter().zip(last.iter_mut()).enumerate() {
                if now > *prev {
                    out.push(Loss {
                        cpu: cpu as u16,
                        reason,
                        count: now - *prev,
                        start_ns: self.last_ns,
                        end_ns: now_ns,
                    });
                    self.total += now - *prev;
                    *prev = now;
                }
            }
        }
        self.last_ns = now_ns;
        out
    }
}
