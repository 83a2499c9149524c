//! A recording session: load and attach, drain the ring buffer, convert, write or print,
//! count losses, stop on a signal, a time limit or the end of the traced command.

use std::fmt::Write as _;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use iodump_format::{Device, EndInfo, Event, Header, Loss, LossReason, Writer, WriterOptions};

use iodump_format::expr::{Expr, ResolvedView};
use iodump_format::inthash::IntMap;
use iodump_format::units::format_bytes;
use iodump_host::mounts::MountTable;
use iodump_output::parts::{now_pair, PartsConfig, RotatingTrace};
use iodump_output::OutputFile;

use crate::abi::{self, counter, IoEvent, PathEvent};
use crate::bpf::{BpfSettings, Program};
use crate::cgroups::{CgroupInfo, Resolver};
use crate::convert::{Converter, NewEntries};
use crate::devices;
use crate::error::RecordError;
use crate::flight::{Flight, FlightConfig, Snapshot};
use crate::notify::Notifier;
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
    /// `--container ID`: only I/O of tasks in this container or pod (its cgroup and below;
    /// see [`crate::cgroups::Identity::matches_container`]). Not with `bpf.cgroup`.
    pub container: Option<String>,
    /// Write the trace as a sequence of files in a directory (`-o DIR/`, `--rotate`,
    /// `--keep`, `--max-total`); `output` is then not used for the trace.
    pub parts: Option<PartsConfig>,
    /// Keep the last window in memory and save snapshots of it (`--ring`, `--trigger`).
    pub flight: Option<FlightConfig>,
    /// Forget files and threads without I/O for about this long ([`FORGET_IDLE`] when
    /// `None`): memory then holds those of the last while, not every one a recording of
    /// months has seen. One that comes back is learnt again (its path sent again by the
    /// kernel, its process entry written again).
    pub forget_idle: Option<Duration>,
    /// Set (by a SIGUSR1 handler) to ask for a snapshot of the ring; cleared when taken.
    pub snapshot: Option<&'static AtomicBool>,
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
    /// Times the kernel skipped each program as nested in itself, raw, by program name.
    pub skipped_nested: Vec<(&'static str, u64)>,
    /// Of `lost_events`, the I/Os lost to those skips (loss reason `nested`).
    pub nested_lost: u64,
    /// A recording in parts: the parts written and those retention deleted.
    pub parts: Option<iodump_output::parts::PartsStats>,
    /// The part being written when recording stopped (the last one).
    pub last_part: Option<PathBuf>,
    /// Snapshots of the ring started (written whole, or cut short).
    pub snapshots: u32,
    /// Of those, and of the ones that could not be started, snapshots not written whole (the
    /// ring went on).
    pub failed_snapshots: u64,
    /// The first of them: its file, and why.
    pub first_failed_snapshot: Option<(PathBuf, String)>,
    /// Older snapshot files deleted by `--keep-dumps` and `--max-dumps-total`.
    pub deleted_snapshots: u64,
    /// Files' names and threads forgotten after `forget_idle` without I/O.
    pub forgotten: crate::convert::Forgotten,
    /// Files' names (with labels) and threads known at the end.
    pub known: (usize, usize),
    /// I/Os started and not completed when recording stopped (not recorded, not lost: they
    /// end after it), when the kernel's tables could be read.
    pub in_flight_at_end: Option<u64>,
    /// In-flight entries the once-a-second looks left out as stale (their device's kernel
    /// count said nothing was in flight: a completion the recorder missed), over all looks.
    pub stale_in_flight: u64,
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
    /// Called once per pass of the session loop (at least every ~100 ms), with the
    /// recorder's own state; returns true to stop recording.
    fn tick(&mut self, status: &RecorderStatus) -> bool;
    /// True when it wants the once-a-second look at the I/Os in flight ([`LiveSink::in_flight`]).
    fn wants_in_flight(&self) -> bool {
        false
    }
    /// The once-a-second look at the I/Os in flight for a while, when it wants it, with the
    /// converter (device names).
    fn in_flight(&mut self, _look: &crate::in_flight::InFlightLook, _conv: &Converter) {}
}

/// The recorder's own state, given to the live sink on each tick: what `--serve` exports
/// about the recorder itself, besides the I/O it records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderStatus {
    /// Events lost so far (updated once a second).
    pub lost_events: u64,
    /// The flight recorder's counters and ring, with `--ring`.
    pub flight: Option<crate::flight::FlightStats>,
    /// What the recording in parts wrote and deleted, with `-o DIR/`.
    pub parts: Option<iodump_output::parts::PartsStats>,
}

/// Where events go: a trace file, a recording in parts, the flight recorder's ring, a
/// printer, a live sink, or several.
struct Sinks<'a> {
    writer: Option<Writer<File>>,
    parts: Option<RotatingTrace>,
    flight: Option<Flight>,
    printer: Option<Printer>,
    live: Option<&'a mut dyn LiveSink>,
}

impl Sinks<'_> {
    /// True when a trace of any kind is written (the tables are kept).
    fn traces(&self) -> bool {
        self.writer.is_some() || self.parts.is_some() || self.flight.is_some()
    }
    fn add_device(&mut self, d: Device) -> Result<(), RecordError> {
        if let Some(f) = &mut self.flight {
            f.add_device(&d)?;
        }
        if let Some(p) = &mut self.parts {
            p.add_device(d.clone())?;
        }
        if let Some(w) = &mut self.writer {
            w.add_device(d).map_err(write_err)?;
        }
        Ok(())
    }
    fn add_process(&mut self, pr: iodump_format::Process) -> Result<(), RecordError> {
        if let Some(f) = &mut self.flight {
            f.add_process(&pr)?;
        }
        if let Some(p) = &mut self.parts {
            p.add_process(pr.clone())?;
        }
        if let Some(w) = &mut self.writer {
            w.add_process(pr).map_err(write_err)?;
        }
        Ok(())
    }
    fn add_path(&mut self, pe: iodump_format::PathEntry) -> Result<(), RecordError> {
        if let Some(f) = &mut self.flight {
            f.add_path(&pe)?;
        }
        if let Some(p) = &mut self.parts {
            p.add_path(pe.clone())?;
        }
        if let Some(w) = &mut self.writer {
            w.add_path(pe).map_err(write_err)?;
        }
        Ok(())
    }
    /// Forgets path entries and threads the converter forgot (no later event refers to them).
    fn forget(&mut self, path_ids: &[u32], tids: &[u32]) {
        if let Some(f) = &mut self.flight {
            f.forget(path_ids, tids);
        }
        if let Some(p) = &mut self.parts {
            p.forget(path_ids, tids);
        }
    }
    fn add_cgroup(&mut self, c: iodump_format::cgroup::Cgroup) -> Result<(), RecordError> {
        if let Some(f) = &mut self.flight {
            f.add_cgroup(&c)?;
        }
        if let Some(p) = &mut self.parts {
            p.add_cgroup(c.clone())?;
        }
        if let Some(w) = &mut self.writer {
            w.add_cgroup(c).map_err(write_err)?;
        }
        Ok(())
    }
    fn add_loss(&mut self, l: Loss) -> Result<(), RecordError> {
        if let Some(f) = &mut self.flight {
            f.add_loss(l)?;
        }
        if let Some(p) = &mut self.parts {
            p.add_loss(l)?;
        }
        if let Some(w) = &mut self.writer {
            w.add_loss(l).map_err(write_err)?;
        }
        Ok(())
    }
    #[inline]
    fn push(&mut self, e: &Event) -> Result<(), RecordError> {
        if let Some(w) = &mut self.writer {
            w.push(e).map_err(write_err)?;
        }
        if let Some(p) = &mut self.parts {
            p.push(e)?;
            // Checked here too, not only between drains of the ring buffer: at full speed a
            // drain can last long. The event's timestamp is on the clock parts are aged by.
            if p.due(e.timestamp_ns) {
                let (wall, mono) = now_pair();
                let end = EndInfo {
                    end_monotonic_ns: mono,
                    ..EndInfo::default()
                };
                p.rotate(end, (wall, mono))?;
            }
        }
        if let Some(f) = &mut self.flight {
            f.push(e)?;
        }
        Ok(())
    }
    /// Writes what the trace sinks buffer (once a second and at the end).
    fn flush(&mut self, now_mono_ns: u64) -> Result<(), RecordError> {
        if let Some(w) = &mut self.writer {
            w.flush().map_err(write_err)?;
        }
        if let Some(p) = &mut self.parts {
            p.flush()?;
        }
        if let Some(f) = &mut self.flight {
            f.flush(now_mono_ns)?;
        }
        Ok(())
    }
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
    let mut session = Session::start(cfg, live, stop)?;
    let result = session.run(stop);
    session.finish(result)
}

/// The devices `-d` names, each whole disk with its partitions (empty: every device).
fn wanted_devices(names: &[String], all: &[Device]) -> Result<Vec<Device>, RecordError> {
    let mut wanted: Vec<Device> = Vec::new();
    for d in names {
        let dev = devices::resolve(d, all)?;
        // A whole disk includes its partitions.
        for p in all.iter().filter(|p| p.partition_of == Some(dev.dev)) {
            wanted.push(p.clone());
        }
        wanted.push(dev);
    }
    Ok(wanted)
}

/// Narrows `list` (empty: everything) to what `keep` also allows; when nothing is left,
/// nothing can match and the op mask is cleared.
fn intersect<T: PartialEq>(list: &mut Vec<T>, keep: Vec<T>, op_mask: &mut u32) {
    if list.is_empty() {
        *list = keep;
    } else {
        list.retain(|x| keep.contains(x));
        if list.is_empty() {
            *op_mask = 0;
        }
    }
}

/// Applies in the kernel what the `-f` expression implies (it keeps a superset of what the
/// expression keeps; the expression itself runs per event in [`Ingest`]).
fn push_filter_down(settings: &mut BpfSettings, f: &Expr) {
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
        intersect(&mut settings.pids, pids, &mut settings.op_mask);
    }
    if let Some(comms) = p.comms {
        let comms: Vec<Vec<u8>> = comms.into_iter().map(String::into_bytes).collect();
        intersect(&mut settings.comms, comms, &mut settings.op_mask);
    }
}

/// The cgroup directory of `--container ID`: the one outermost cgroup of the container or
/// pod (what [`Identity::matches_container`](crate::cgroups::Identity::matches_container)
/// matches), under the cgroup2 mount.
fn container_cgroup(resolver: &Resolver, id: &str) -> Result<PathBuf, RecordError> {
    let bad = |what: String| RecordError::BadOption { what };
    let root = resolver
        .root()
        .ok_or_else(|| bad(format!("--container {id}: no cgroup2 mount")))?;
    match resolver.outermost_matching(id).as_slice() {
        [] => Err(bad(format!(
            "--container {id}: no container or pod of docker, containerd, CRI-O, podman or \
             LXC has a cgroup matching it (cgroups under {})",
            root.display()
        ))),
        [one] => Ok(root.join(one.path.trim_start_matches('/'))),
        many => Err(bad(format!(
            "--container {id}: matches {} cgroups ({}); give more of the id",
            many.len(),
            many.iter()
                .map(|c| c.identity.label())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The kernel side's settings: devices, the filter's pushdown, the container, our own pid.
fn kernel_settings(
    cfg: &RecordConfig,
    all: &[Device],
    resolver: &Resolver,
) -> Result<BpfSettings, RecordError> {
    let mut settings = cfg.bpf.clone();
    settings.devices = wanted_devices(&cfg.devices, all)?
        .iter()
        .map(|d| d.dev)
        .collect();
    if let Some(f) = &cfg.filter {
        push_filter_down(&mut settings, f);
    }
    if let Some(id) = &cfg.container {
        if settings.cgroup.is_some() {
            return Err(RecordError::BadOption {
                what: "--container and --cgroup: give one of them".into(),
            });
        }
        settings.cgroup = Some(container_cgroup(resolver, id)?);
    }
    settings.exclude_tgid = std::process::id();
    Ok(settings)
}

/// The trace header: the clocks, the host, the command lines, what the program attached.
fn trace_header(cfg: &RecordConfig, prog: &Program) -> Header {
    let (wall, mono) = now_pair();
    let mut metadata = cfg.metadata.clone();
    metadata.push(("iodump.variant".into(), prog.attached.variant.clone()));
    metadata.push(("iodump.hooks".into(), prog.attached.hooks_line()));
    if !prog.attached.off.is_empty() {
        metadata.push(("iodump.off".into(), prog.attached.off.join("; ")));
    }
    Header {
        wall_clock_ns: wall,
        monotonic_ns: mono,
        hostname: read_trim("/proc/sys/kernel/hostname"),
        kernel_release: read_trim("/proc/sys/kernel/osrelease"),
        tool_version: format!("iodump {}", env!("CARGO_PKG_VERSION")),
        recorder_argv: cfg.recorder_argv.clone(),
        command_argv: (!cfg.command.is_empty()).then(|| cfg.command.clone()),
        metadata,
    }
}

impl<'a> Sinks<'a> {
    /// The trace writer (onto `output`), the printer and the live sink `cfg` asks for; the
    /// device table is written and the printer's header printed.
    fn open(
        cfg: &RecordConfig,
        header: &Header,
        all: &[Device],
        output: Option<&OutputFile>,
        live: Option<&'a mut dyn LiveSink>,
    ) -> Result<Sinks<'a>, RecordError> {
        let live_only = live.is_some();
        let writer = match output {
            Some(o) => {
                let opts = WriterOptions {
                    memory_limit_bytes: cfg.memory_limit_bytes.max(4 << 20),
                    ..WriterOptions::default()
                };
                let mut w = Writer::new(o.try_clone_file()?, header, opts).map_err(write_err)?;
                for d in all {
                    w.add_device(d.clone()).map_err(write_err)?;
                }
                Some(w)
            }
            None => None,
        };
        let opts = WriterOptions {
            memory_limit_bytes: cfg.memory_limit_bytes.max(4 << 20),
            ..WriterOptions::default()
        };
        let parts = match &cfg.parts {
            Some(pc) => {
                let mut t = RotatingTrace::create(
                    pc.clone(),
                    header.clone(),
                    opts.clone(),
                    recording_id(),
                    (header.wall_clock_ns, header.monotonic_ns),
                )?;
                for d in all {
                    t.add_device(d.clone())?;
                }
                Some(t)
            }
            None => None,
        };
        let flight = match &cfg.flight {
            Some(fc) => {
                let mut f = Flight::new(fc.clone(), header.clone(), opts)?;
                for d in all {
                    f.add_device(d)?;
                }
                Some(f)
            }
            None => None,
        };
        let printer = match (cfg.print, &cfg.output) {
            (Some(f), _) => Some(f),
            (None, None) if !live_only => Some(PrintFormat::Text),
            (None, _) => None,
        }
        .map(|f| {
            let mut p = Printer::new(f, header, all, cfg.print_to.clone());
            p.header();
            p
        });
        Ok(Sinks {
            live,
            writer,
            parts,
            flight,
            printer,
        })
    }
}

/// Starts the command to trace, if any.
fn spawn_command(command: &[String]) -> Result<Option<Child>, RecordError> {
    let Some((program, args)) = command.split_first() else {
        return Ok(None);
    };
    let mut c = Command::new(program);
    c.args(args);
    // The traced command is not the service systemd was told about.
    for v in crate::notify::ENV_VARS {
        c.env_remove(v);
    }
    c.spawn().map(Some).map_err(|source| RecordError::Command {
        program: program.clone(),
        source,
    })
}

/// Stops the traced command with SIGTERM and waits for it; its exit status.
fn terminate(c: &mut Child) -> Option<i32> {
    // SAFETY: kill(2) on our own child's pid, which it keeps until we wait for it.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    c.wait().ok().map(exit_status)
}

/// One recording: [`Session::start`] loads, attaches and opens the outputs, [`Session::run`]
/// polls until told to stop, [`Session::finish`] detaches, drains, accounts for losses and
/// closes the trace.
struct Session<'c, 'l> {
    cfg: &'c RecordConfig,
    prog: Program,
    sinks: Sinks<'l>,
    ingest: Ingest<'c>,
    child: Option<Child>,
    losses: LossTracker,
    /// The monotonic clock when the program was attached.
    start_mono_ns: u64,
    started: Instant,
    last_flush: Instant,
    /// Times a full file system was reported (a recording in parts goes on by deleting its
    /// oldest parts).
    disk_full_reported: u32,
    /// I/Os the kernel's tables held when the programs were detached (started, never seen
    /// to complete), once known; `None` before, or if the tables could not be read.
    in_flight_at_end: Option<u64>,
    /// Starts and completions the kernel skipped as nested, counted as lost, once the
    /// programs were detached (`None` before, or if the counters could not be read).
    nested_at_end: Option<u64>,
    /// When the I/Os in flight were last tried against the trigger.
    last_in_flight_look: Instant,
    /// The in-flight tables could not be read (said once).
    in_flight_unreadable: bool,
    /// In-flight entries the looks left out as stale ([`crate::in_flight::InFlightLook::stale`]).
    stale_in_flight: u64,
    /// The devices with I/O in flight for a second or more at the last look (the status line).
    slow_in_flight: Vec<(String, crate::in_flight::DeviceInFlight)>,
    /// Which kernel counts of I/Os in flight the looks believe.
    believed: crate::in_flight::Believed,
    last_batch_flush: Instant,
    command_status: Option<i32>,
    /// When idle files and threads were last looked for, how often, and after how many
    /// looks without I/O they are forgotten ([`Converter::sweep`]).
    last_sweep: Instant,
    sweep_every: Duration,
    idle_sweeps: u32,
    /// Kernel keys of idle files still to delete, a slice per pass of the loop.
    to_unsend: std::collections::VecDeque<(u32, u64, u32)>,
    /// systemd's notifications, when run as a `Type=notify` service.
    notify: Option<Notifier>,
}

impl<'c, 'l> Session<'c, 'l> {
    /// Loads and attaches the program, opens the outputs, starts the command. The trace
    /// file takes its path only once all of that worked (so a failure, or `stop` set while
    /// loading, leaves an existing file as it was); then the "recording" line is printed.
    fn start(
        cfg: &'c RecordConfig,
        live: Option<&'l mut dyn LiveSink>,
        stop: &AtomicBool,
    ) -> Result<Session<'c, 'l>, RecordError> {
        let all = devices::list()?;
        let mut resolver = Resolver::new();
        if cfg.container.is_some() || cfg.output.is_some() || cfg.flight.is_some() {
            resolver.scan();
        }
        let settings = kernel_settings(cfg, &all, &resolver)?;
        // Create the output before loading, so a bad path fails fast: a private temporary
        // file beside it, renamed over it only once recording has really started.
        let single_file = cfg.parts.is_none() && cfg.flight.is_none();
        let mut output = match &cfg.output {
            Some(o) if single_file => Some(OutputFile::create(o)?),
            _ => None,
        };
        let prog = Program::load(&settings)?;
        for o in &prog.attached.off {
            eprintln!("iodump: warning: off on this kernel: {o}");
        }
        let header = trace_header(cfg, &prog);
        let mut sinks = Sinks::open(cfg, &header, &all, output.as_ref(), live)?;
        let filter_reads_cgroups = cfg.filter.as_ref().is_some_and(Expr::uses_cgroup_table);
        let trigger_reads_cgroups = cfg
            .flight
            .as_ref()
            .and_then(|f| f.trigger.as_ref())
            .is_some_and(Expr::uses_cgroup_table);
        let filter_reads_cgroups = filter_reads_cgroups || trigger_reads_cgroups;
        let track_cgroups = sinks.traces() || filter_reads_cgroups;
        let mut ingest = Ingest {
            conv: Converter::new(&all, MountTable::read()),
            entries: NewEntries::default(),
            filter: cfg.filter.as_ref(),
            filter_reads_cgroups,
            cgroups: track_cgroups.then(|| CgroupTable::new(resolver)),
            trigger_names: cfg
                .flight
                .as_ref()
                .and_then(|f| f.trigger.as_ref())
                .is_some_and(Expr::uses_names),
            utc_offset_ns: header.to_utc_ns(0),
            events: 0,
            in_flight_matched: Vec::new(),
        };
        if let Some(t) = &mut ingest.cgroups {
            if let Some(root) = t.write_root() {
                sinks.add_cgroup(root)?;
            }
        }
        // Stopped while loading (which takes seconds): the user meant to abort, not to keep
        // a moment of recording in place of the file named.
        if stop.load(Ordering::Relaxed) {
            return Err(RecordError::Interrupted);
        }
        let mut child = spawn_command(&cfg.command)?;
        // Attached and the command running: recording has started, the trace takes its path.
        if let Err(e) = commit_output(output.as_mut(), &mut sinks) {
            if let Some(c) = &mut child {
                terminate(c);
            }
            return Err(e);
        }
        let what = announce(cfg, &prog);
        let mut notify = Notifier::from_env();
        if let Some(n) = &mut notify {
            n.ready(&what);
        }
        let (sweep_every, idle_sweeps) = sweep_schedule(cfg.forget_idle.unwrap_or(FORGET_IDLE));
        Ok(Session {
            cfg,
            prog,
            sinks,
            ingest,
            child,
            losses: LossTracker {
                last_ns: header.monotonic_ns,
                ..LossTracker::default()
            },
            start_mono_ns: header.monotonic_ns,
            started: Instant::now(),
            last_flush: Instant::now(),
            disk_full_reported: 0,
            in_flight_at_end: None,
            nested_at_end: None,
            last_in_flight_look: Instant::now(),
            in_flight_unreadable: false,
            stale_in_flight: 0,
            slow_in_flight: Vec::new(),
            believed: crate::in_flight::Believed::default(),
            last_batch_flush: Instant::now(),
            command_status: None,
            last_sweep: Instant::now(),
            sweep_every,
            idle_sweeps,
            to_unsend: std::collections::VecDeque::new(),
            notify,
        })
    }

    /// Polls until `stop` is set, the time limit passes, the command exits or the live
    /// sink says stop; then drains once more.
    fn run(&mut self, stop: &AtomicBool) -> Result<(), RecordError> {
        // The live sink's first tick starts its first interval, before the first drain: the
        // I/O of the first poll belongs to it.
        let mut stopping = self.should_stop(stop);
        loop {
            self.wait_for_data();
            self.ingest
                .drain(&mut self.prog, &mut self.sinks, Some(DRAIN_SLICE))?;
            if stopping || self.last_flush.elapsed() >= Duration::from_secs(1) {
                self.ingest.resettle(&mut self.sinks)?;
                self.flush()?;
            }
            self.snapshot_on_signal()?;
            if let Some(f) = &mut self.sinks.flight {
                f.tick(monotonic_ns())?;
            }
            self.look_in_flight()?;
            if self.last_sweep.elapsed() >= self.sweep_every {
                self.sweep();
            }
            self.unsend_some();
            self.follow_new_stacks();
            if let Some(mut n) = self.notify.take() {
                n.tick(|| self.status_line());
                if stopping {
                    n.stopping();
                }
                self.notify = Some(n);
            }
            if !stopping
                && self
                    .sinks
                    .parts
                    .as_ref()
                    .is_some_and(|p| p.due(monotonic_ns()))
            {
                self.rotate()?;
            }
            if stopping {
                return Ok(());
            }
            stopping = self.should_stop(stop);
            if stopping {
                // Give in-flight I/O a moment to complete, then one more drain and flush.
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Once a second, with a trigger or a live sink that wants it: the I/Os in flight for
    /// [`IN_FLIGHT_MIN_AGE_NS`] or more, less the entries the kernel's own counts contradict
    /// ([`crate::in_flight::look`]), are tried against the trigger with the time they have
    /// taken so far, so that an I/O that hangs (and may never complete) fires it too
    /// ([`Ingest::in_flight`]), and given to the live sink (`--serve`'s gauges).
    fn look_in_flight(&mut self) -> Result<(), RecordError> {
        let trigger = self
            .sinks
            .flight
            .as_ref()
            .is_some_and(|f| f.trigger().is_some() && !f.busy());
        let live = self
            .sinks
            .live
            .as_ref()
            .is_some_and(|l| l.wants_in_flight());
        if !(trigger || live || self.notify.is_some())
            || self.in_flight_unreadable
            || self.last_in_flight_look.elapsed() < IN_FLIGHT_LOOK
        {
            return Ok(());
        }
        self.last_in_flight_look = Instant::now();
        let now = monotonic_ns();
        let recs = match self
            .prog
            .in_flight_events(now.saturating_sub(IN_FLIGHT_MIN_AGE_NS), now)
        {
            Ok(recs) => recs,
            Err(e) => {
                self.in_flight_unreadable = true;
                eprintln!(
                    "iodump: warning: the kernel's in-flight tables cannot be read ({e}): the trigger sees I/Os when they complete only, --serve shows no I/O in flight"
                );
                return Ok(());
            }
        };
        let sysfs = iodump_host::sysfs::Sysfs::new();
        let believed = &mut self.believed;
        let (recs, look) = crate::in_flight::look(recs, now, |dev, bio_based| {
            believed.count(dev, bio_based, sysfs.in_flight(dev))
        });
        self.stale_in_flight += look.stale;
        self.slow_in_flight = look.slow_devices(&self.ingest.conv, |_| true);
        if trigger {
            self.ingest.in_flight(&recs, &mut self.sinks, now)?;
        }
        if let Some(l) = self.sinks.live.as_deref_mut().filter(|_| live) {
            l.in_flight(&look, &self.ingest.conv);
        }
        Ok(())
    }

    /// Forgets the files and threads that had no I/O for `idle_sweeps` sweeps: the kernel's
    /// record of their paths first, the converter's and the sinks' a sweep later.
    fn sweep(&mut self) {
        self.last_sweep = Instant::now();
        let s = self.ingest.conv.sweep(self.idle_sweeps);
        self.to_unsend.extend(s.unsend);
        if !(s.paths.is_empty() && s.threads.is_empty()) {
            self.sinks.forget(&s.paths, &s.threads);
        }
    }

    /// Stacked devices made while recording (an LVM snapshot, a dm-crypt volume opened, an
    /// md array assembled): the kernel side follows their I/O below them from now on, or, if
    /// it cannot, a warning says so once per device.
    fn follow_new_stacks(&mut self) {
        let new = self.ingest.conv.take_new_stacked();
        if new.is_empty() {
            return;
        }
        let devs: Vec<iodump_format::DevT> = new.iter().map(|d| d.dev).collect();
        let Err(why) = self.prog.add_stacked(&devs) else {
            for d in new.iter().filter(|d| crate::devices::is_raid456(d)) {
                if let Err(why) = self.prog.follow_raid456() {
                    eprintln!(
                        "iodump: warning: {} appeared while recording: {}",
                        d.name,
                        crate::bpf::raid456_off(&d.name, &d.label, &why)
                    );
                }
            }
            for d in new.iter().filter(|d| crate::devices::is_bcache(d)) {
                if let Err(why) = self.prog.follow_bcache() {
                    eprintln!(
                        "iodump: warning: {} appeared while recording: {}",
                        d.name,
                        crate::bpf::bcache_off(&d.name, &why)
                    );
                }
            }
            return;
        };
        for d in &new {
            eprintln!(
                "iodump: warning: {} ({}) appeared while recording, stacked on {}: the I/O it \
                 sends below is not attributed to its files and processes ({why})",
                d.name,
                d.label,
                d.stacked_on
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    /// Deletes the next [`UNSEND_SLICE`] idle files' keys from the kernel's map (a system
    /// call each: a long list is spread over passes of the loop, so that draining the ring
    /// buffer waits a few milliseconds at most).
    fn unsend_some(&mut self) {
        if self.to_unsend.is_empty() {
            return;
        }
        let n = self.to_unsend.len().min(UNSEND_SLICE);
        let keys: Vec<(u32, u64, u32)> = self.to_unsend.drain(..n).collect();
        self.prog.unsend_paths(&keys);
        self.ingest.conv.unsent(&keys);
    }

    /// Waits up to 100 ms for the ring buffer; fetches the kernel's partial batches when
    /// they have waited a tick.
    fn wait_for_data(&mut self) {
        let mut pfd = libc::pollfd {
            fd: self.prog.ring.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on our stack; the fd is the ring buffer map's, alive
        // as long as `self.prog`.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        // Partial batches wait in the kernel at most one tick (plus this poll).
        if self.last_batch_flush.elapsed() >= BATCH_TICK {
            self.last_batch_flush = Instant::now();
            self.prog.flush_batches();
        }
    }

    /// Once a second (and at the end): loss records of the counters' deltas, then the
    /// writers' and the printer's buffers out.
    fn flush(&mut self) -> Result<(), RecordError> {
        self.last_flush = Instant::now();
        let mut result = Ok(());
        let now = monotonic_ns();
        if let Ok(c) = self.prog.counters() {
            for l in self.losses.update(&c, now) {
                if let Err(e) = self.sinks.add_loss(l) {
                    result = Err(e);
                }
            }
        }
        if let Err(e) = self.sinks.flush(now) {
            result = Err(e);
        }
        if let Some(p) = &self.sinks.parts {
            let st = p.stats();
            if st.disk_full > self.disk_full_reported {
                self.disk_full_reported = st.disk_full;
                eprintln!(
                    "iodump: warning: no space left in {}: deleted its oldest parts to go on (nothing lost)",
                    p.current_path().parent().unwrap_or(Path::new(".")).display(),
                );
            }
        }
        if let Some(p) = &mut self.sinks.printer {
            p.flush();
        }
        result
    }

    /// Closes the part being written and starts the next: the losses counted so far go
    /// into the part they belong to first, so that none is counted twice or lost.
    fn rotate(&mut self) -> Result<(), RecordError> {
        self.flush()?;
        let (wall, mono) = now_pair();
        let end = EndInfo {
            end_monotonic_ns: mono,
            ..EndInfo::default()
        };
        if let Some(p) = &mut self.sinks.parts {
            p.rotate(end, (wall, mono))?;
        }
        Ok(())
    }

    /// A snapshot of the ring when SIGUSR1 asked for one.
    fn snapshot_on_signal(&mut self) -> Result<(), RecordError> {
        let Some(flag) = self.cfg.snapshot else {
            return Ok(());
        };
        if !flag.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        match &mut self.sinks.flight {
            Some(f) => {
                if !f.busy() {
                    f.fire(Snapshot::Signal, now_pair(), None)
                } else {
                    eprintln!("iodump: SIGUSR1: a snapshot is being written already; not another");
                    Ok(())
                }
            }
            None => {
                eprintln!("iodump: SIGUSR1: no --ring, so there is no window to save");
                Ok(())
            }
        }
    }

    /// True when the live sink, the command, `stop` or the time limit ends the recording.
    fn should_stop(&mut self, stop: &AtomicBool) -> bool {
        let mut stopping = false;
        if let Some(l) = &mut self.sinks.live {
            let status = RecorderStatus {
                lost_events: self.losses.total,
                flight: self.sinks.flight.as_ref().map(|f| f.stats()),
                parts: self.sinks.parts.as_ref().map(|p| p.stats()),
            };
            stopping |= l.tick(&status);
        }
        if let Some(c) = &mut self.child {
            if let Ok(Some(st)) = c.try_wait() {
                self.command_status = Some(exit_status(st));
                stopping = true;
            }
        }
        let timed_out = self
            .cfg
            .duration
            .is_some_and(|d| self.started.elapsed() >= d);
        // Lines were all it made, and whoever read them has gone (`iodump record | head`).
        let unread = self.sinks.printer.as_ref().is_some_and(|p| p.broken)
            && !self.sinks.traces()
            && self.sinks.live.is_none();
        stopping || timed_out || unread || stop.load(Ordering::Relaxed)
    }

    /// Detaches, drains what is left, writes the last loss records, stops the command and
    /// closes the trace; `result` is how [`Session::run`] ended.
    fn finish(mut self, mut result: Result<(), RecordError>) -> Result<RecordSummary, RecordError> {
        // Stopping on an error too (the loop says so when it stops on its own).
        if let Some(n) = &mut self.notify {
            n.stopping();
        }
        // Detach, then drain what is left: from here on the counters no longer move, so the
        // I/Os that vanished from the in-flight tables can be counted exactly.
        self.prog.detach();
        let (leftover, leftover_events) = self.prog.drain_batches();
        if result.is_ok() {
            result = self.ingest.drain(&mut self.prog, &mut self.sinks, None);
        }
        for rec in &leftover {
            if result.is_ok() {
                result = self.ingest.record(rec, &mut self.sinks);
            }
        }
        result = result.and(self.final_losses(leftover_events));
        if let Some(mut c) = self.child.take() {
            if self.command_status.is_none() {
                // Stopped by a signal or the time limit: the command gets SIGTERM.
                self.command_status = terminate(&mut c);
            }
        }
        let mut summary = self.summary();
        if let Some(p) = &mut self.sinks.printer {
            p.flush();
        }
        let end_mono = monotonic_ns();
        if let Some(mut f) = self.sinks.flight.take() {
            result = result.and(f.finish(end_mono));
            summary.snapshots = f.dumps;
            summary.failed_snapshots = f.failed_dumps;
            summary.first_failed_snapshot = f.first_failed_dump.take();
            summary.deleted_snapshots = f.deleted_dumps;
        }
        if let Some(p) = self.sinks.parts.take() {
            summary.last_part = Some(p.current_path().to_path_buf());
            let end = EndInfo {
                end_monotonic_ns: end_mono,
                command_exit_status: self.command_status,
                ..EndInfo::default()
            };
            match p.finish(end) {
                Ok(st) => {
                    summary.bytes_written = st.bytes_written;
                    summary.parts = Some(st);
                }
                Err(e) => result = result.and(Err(e.into())),
            }
        }
        if let Some(w) = self.sinks.writer.take() {
            let end = EndInfo {
                end_monotonic_ns: monotonic_ns(),
                command_exit_status: self.command_status,
                ..EndInfo::default()
            };
            // After a failed write (a full file system) the file is cut at its last
            // complete chunk.
            match w.finish_or_cut(end) {
                Ok(f) => {
                    let _ = f.sync_all();
                    summary.bytes_written = f.metadata().map(|m| m.len()).unwrap_or(0);
                }
                Err((e, kept_bytes)) => {
                    summary.bytes_written = kept_bytes;
                    result = result.and(Err(write_err(e)));
                }
            }
        }
        result.map(|()| summary)
    }

    /// The last loss records, once detached: the counters' last deltas, the I/Os evicted
    /// from the in-flight tables (tracked but neither emitted nor otherwise accounted for)
    /// and the programs the kernel skipped as nested.
    fn final_losses(&mut self, leftover_events: u64) -> Result<(), RecordError> {
        let Ok(c) = self.prog.counters() else {
            return Ok(());
        };
        let now = monotonic_ns();
        let mut losses = self.losses.update(&c, now);
        let sum = |i: u32| c[i as usize].iter().sum::<u64>();
        // Unreadable tables: their entries are counted as evicted (lost), not hidden.
        self.in_flight_at_end = self.prog.in_flight();
        let accounted = leftover_events
            + sum(counter::EMITTED)
            + sum(counter::LOST_RINGBUF)
            + sum(counter::SIZE_FILTERED)
            + sum(counter::RQ_MERGED)
            + sum(counter::LOST_STALE)
            + self.in_flight_at_end.unwrap_or(0);
        let evicted = sum(counter::TRACKED).saturating_sub(accounted);
        let nested = self.prog.recursion_misses();
        self.nested_at_end = Some(nested);
        for (count, reason) in [(evicted, LossReason::Evicted), (nested, LossReason::Nested)] {
            if count > 0 {
                self.losses.total += count;
                losses.push(Loss {
                    cpu: ALL_CPUS,
                    reason,
                    count,
                    start_ns: self.start_mono_ns,
                    end_ns: now,
                });
            }
        }
        let mut result = Ok(());
        for l in losses {
            result = result.and(self.sinks.add_loss(l));
        }
        result
    }

    /// What the session did (`bytes_written` is filled in when the trace is closed).
    /// What `systemctl status` shows of a recorder run as a service: events and losses so
    /// far, the parts, the snapshots and the ring.
    fn status_line(&self) -> String {
        let (events, lost) = (self.ingest.events, self.losses.total);
        let mut s = format!(
            "recording for {:.0} s: {events} events, {lost} lost ({:.3}%)",
            self.started.elapsed().as_secs_f64(),
            lost as f64 * 100.0 / (events + lost).max(1) as f64
        );
        if let Some(p) = &self.sinks.parts {
            let st = p.stats();
            let _ = write!(
                s,
                "; {} part{} ({} deleted), {} written",
                st.parts,
                if st.parts == 1 { "" } else { "s" },
                st.deleted,
                format_bytes(st.bytes_written as f64)
            );
        }
        if let Some(f) = &self.sinks.flight {
            let st = f.stats();
            let _ = write!(
                s,
                "; {} snapshots ({} failed); ring {} over {:.0} s",
                st.snapshots_triggered + st.snapshots_signalled,
                st.snapshots_failed,
                format_bytes(st.ring_bytes as f64),
                st.ring_span_ns as f64 / 1e9
            );
        }
        if !self.slow_in_flight.is_empty() {
            let _ = write!(
                s,
                "; in flight 1 s or more: {}",
                crate::in_flight::slow_text(&self.slow_in_flight)
            );
        }
        s
    }

    fn summary(&self) -> RecordSummary {
        let kernel_counters = self
            .prog
            .counters()
            .map(|c| {
                counter::NAMES
                    .iter()
                    .zip(&c)
                    .map(|(n, v)| (*n, v.iter().sum()))
                    .collect()
            })
            .unwrap_or_default();
        RecordSummary {
            kernel_counters,
            skipped_nested: self.prog.recursion_misses_by_program(),
            nested_lost: self
                .nested_at_end
                .unwrap_or_else(|| self.prog.recursion_misses()),
            events: self.ingest.events,
            lost_events: self.losses.total,
            command_status: self.command_status,
            hooks: self.prog.attached.hooks.clone(),
            attributed: self.ingest.conv.attributed,
            duration: self.started.elapsed(),
            forgotten: self.ingest.conv.forgotten,
            known: self.ingest.conv.known(),
            in_flight_at_end: self.in_flight_at_end,
            stale_in_flight: self.stale_in_flight,
            ..RecordSummary::default()
        }
    }
}

/// Says that recording has started (scripts and tests wait for this line before starting a
/// workload); returns what is recorded, as said.
fn announce(cfg: &RecordConfig, prog: &Program) -> String {
    let what = format!(
        "recording {} ({})",
        if cfg.devices.is_empty() {
            "every device".to_string()
        } else {
            cfg.devices.join(", ")
        },
        prog.attached.hooks_line(),
    );
    eprintln!(
        "iodump: {what}; {}",
        if cfg.command.is_empty() {
            "Ctrl-C to stop"
        } else {
            "until the command exits"
        }
    );
    what
}

/// The cgroups table of the trace being written: each cgroup id met in an event or a
/// process entry is resolved ([`Resolver`]: a walk of the cgroup2 mount at most once a
/// second for ids it does not know) and written once. An id still unknown after two more
/// walks (a cgroup removed before it was looked up) is given up.
struct CgroupTable {
    resolver: Resolver,
    state: IntMap<u64, CgroupState>,
    /// The id of the previous event, settled: most events repeat it.
    last_id: u64,
}

#[derive(Clone, Copy)]
enum CgroupState {
    Written,
    /// Not found by the walk with this number.
    Unknown {
        since_scan: u64,
    },
    GivenUp,
}

impl CgroupTable {
    fn new(resolver: Resolver) -> CgroupTable {
        CgroupTable {
            resolver,
            state: IntMap::default(),
            last_id: u64::MAX,
        }
    }

    /// The root cgroup's entry, to write so that the trace has a cgroups table even when no
    /// event comes (readers tell "not resolved" from "no table" by it).
    fn write_root(&mut self) -> Option<iodump_format::cgroup::Cgroup> {
        let root = self
            .resolver
            .root()
            .and_then(|r| std::fs::metadata(r).ok())
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))?;
        self.settle(root)
    }

    /// Makes sure `id` was looked up; its entry when it resolves for the first time (to be
    /// written).
    fn settle(&mut self, id: u64) -> Option<iodump_format::cgroup::Cgroup> {
        if id == 0 || id == self.last_id {
            return None;
        }
        let scans = self.resolver.scans;
        let mut entry = None;
        let state = match self.state.get(&id) {
            Some(CgroupState::Written | CgroupState::GivenUp) => {
                self.last_id = id;
                return None;
            }
            Some(CgroupState::Unknown { since_scan }) if scans >= since_scan + 2 => {
                CgroupState::GivenUp
            }
            _ => match self.resolver.get(id) {
                Some(c) => {
                    entry = Some(c.clone());
                    CgroupState::Written
                }
                None => match self.state.get(&id) {
                    Some(s) => *s,
                    None => CgroupState::Unknown {
                        since_scan: self.resolver.scans,
                    },
                },
            },
        };
        if !matches!(state, CgroupState::Unknown { .. }) {
            self.last_id = id;
        }
        self.state.insert(id, state);
        entry
    }

    /// The entry of `id`, if resolved.
    fn known(&self, id: u64) -> Option<&CgroupInfo> {
        self.resolver.known(id)
    }
}

/// Writes what the writer holds (the device table), then renames the output over its path
/// (or gives the first part of a recording in parts its name): from here on the trace at the
/// path is readable whenever the recorder stops, even killed.
fn commit_output(o: Option<&mut OutputFile>, sinks: &mut Sinks) -> Result<(), RecordError> {
    if let Some(o) = o {
        if let Some(w) = &mut sinks.writer {
            w.flush().map_err(write_err)?;
        }
        o.commit()?;
    }
    if let Some(p) = &mut sinks.parts {
        p.commit_first()?;
    }
    Ok(())
}

/// A new recording's id: 16 hex digits from the kernel's random source (the clock and pid
/// if it cannot be read).
fn recording_id() -> String {
    use std::io::Read;
    let mut b = [0u8; 8];
    let random = File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    let v = match random {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => now_pair().0 as u64 ^ ((std::process::id() as u64) << 40),
    };
    format!("{v:016x}")
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
    /// The filter reads the cgroups table: each event's cgroup is looked up for it.
    filter_reads_cgroups: bool,
    /// Kept when a trace is written or the filter reads cgroup paths or containers.
    cgroups: Option<CgroupTable>,
    /// The flight recorder's trigger reads the path, comm or device name.
    trigger_names: bool,
    /// UTC minus monotonic ns (the trace header's clock pair), for `time` in expressions.
    utc_offset_ns: i64,
    events: u64,
    /// The I/Os in flight that matched the trigger at the last look, by (device, start,
    /// thread): each is counted once as a match, however long it stays in flight, and not
    /// again when it completes.
    in_flight_matched: Vec<(u32, u64, u32)>,
}

/// Files and threads without I/O for this long are forgotten (`RecordConfig::forget_idle`).
pub const FORGET_IDLE: Duration = Duration::from_secs(600);

/// Kernel keys deleted per pass of the session loop (a few ms of system calls).
const UNSEND_SLICE: usize = 4096;

/// The shortest time between two sweeps: events the kernel sent before a sweep deleted a
/// file's record reach the converter within about two seconds.
const SWEEP_MIN: Duration = Duration::from_secs(3);

/// How often to sweep, and after how many sweeps without I/O to forget, to forget after
/// about `idle`: ten sweeps per `idle`, at least [`SWEEP_MIN`] apart.
fn sweep_schedule(idle: Duration) -> (Duration, u32) {
    let every = (idle / 10).max(SWEEP_MIN);
    let sweeps = idle.as_secs_f64() / every.as_secs_f64();
    (every, (sweeps.ceil() as u32).max(1))
}

/// How often the I/Os in flight are tried against the trigger ([`Session::trigger_on_in_flight`]).
const IN_FLIGHT_LOOK: Duration = Duration::from_secs(1);

/// The I/Os in flight tried against the trigger are those that started this long ago or
/// more (the others are left to their completion, which is near).
const IN_FLIGHT_MIN_AGE_NS: u64 = 100_000_000;

/// How often partial batches of events are fetched from the kernel (`flush_batch`).
const BATCH_TICK: Duration = Duration::from_millis(100);

/// The longest the session loop drains the ring buffer before it looks at signals, the
/// clock and the flight recorder's snapshots again: under a load the consumer cannot keep up
/// with, the ring never empties, and a drain until empty would hold them off for seconds.
const DRAIN_SLICE: Duration = Duration::from_millis(100);

/// Ring-buffer records handled between two looks at the clock while draining.
const RECORDS_PER_CLOCK_LOOK: u32 = 256;

impl Ingest<'_> {
    /// Handles the records waiting in the ring buffer: every one, or (with `slice`) those
    /// handled within about that long.
    fn drain(
        &mut self,
        prog: &mut Program,
        sinks: &mut Sinks,
        slice: Option<Duration>,
    ) -> Result<(), RecordError> {
        let start = Instant::now();
        let mut n = 0u32;
        while let Some(item) = prog.ring.next() {
            let rec: &[u8] = &item;
            self.record(rec, sinks)?;
            n = n.wrapping_add(1);
            if n.is_multiple_of(RECORDS_PER_CLOCK_LOOK)
                && slice.is_some_and(|s| start.elapsed() >= s)
            {
                break;
            }
        }
        Ok(())
    }

    /// Handles one ring-buffer record: a batch of I/O events, one I/O event or a path.
    fn record(&mut self, rec: &[u8], sinks: &mut Sinks) -> Result<(), RecordError> {
        if let Some(batch) = abi::batch_events(rec) {
            for r in batch {
                self.one(r, sinks)?;
            }
            return Ok(());
        }
        self.one(rec, sinks)
    }

    fn one(&mut self, rec: &[u8], sinks: &mut Sinks) -> Result<(), RecordError> {
        if rec.len() < 2 {
            return Ok(());
        }
        match u16::from_le_bytes([rec[0], rec[1]]) {
            abi::EV_IO => {
                if let Some(r) = IoEvent::parse(rec) {
                    self.io(&r, sinks)?;
                }
            }
            abi::EV_PATH => {
                if let Some(p) = PathEvent::parse(rec) {
                    if let Some(entry) = self.conv.path_record(&p) {
                        sinks.add_path(entry)?;
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Converts an I/O event, writes the table entries it brought (even when the filter
    /// drops the event: the converter will not announce them again), filters it and hands
    /// it to the sinks.
    fn io(&mut self, r: &IoEvent, sinks: &mut Sinks) -> Result<(), RecordError> {
        let e: Event = self.conv.io_record(r, &mut self.entries);
        self.write_entries(&e, sinks)?;
        if let Some(f) = self.filter {
            if !f.eval(&e, &self.view(&e, r, true)) {
                return Ok(());
            }
        }
        sinks.push(&e)?;
        if let Some(fl) = &mut sinks.flight {
            if let Some(t) = fl.trigger() {
                // Names are looked up only for a trigger that reads them: it runs on every I/O.
                let v = self.view(&e, r, self.trigger_names);
                // (an I/O that matched while in flight was counted then)
                if t.eval(&e, &v)
                    && !self.in_flight_matched.contains(&(r.dev, r.start_ns, r.tid))
                    && fl.may_fire(monotonic_ns(), e.timestamp_ns.saturating_add(e.latency_ns))
                {
                    fl.fire(Snapshot::Trigger(&e), now_pair(), None)?;
                }
            }
        }
        if let Some(p) = &mut sinks.printer {
            p.event(&e, r, self.conv.path(e.path_id), self.conv.args(e.pid));
        }
        if let Some(l) = &mut sinks.live {
            l.event(&e, r, &self.conv);
        }
        self.events += 1;
        Ok(())
    }

    /// Tries the I/Os still in flight (`recs`, as if completing at `now`: their latency is the
    /// time taken so far) against the trigger. One fires it when the expression holds for
    /// it both with that latency and with any longer one (so `latency > 200ms` does, and
    /// `latency < 1s` never does on an I/O not yet complete); each is counted as one match
    /// ([`Flight::may_fire`]) once, however long it stays in flight. What the filter drops
    /// is not tried. The I/Os are not recorded here: they are when they complete.
    fn in_flight(
        &mut self,
        recs: &[[u8; abi::IO_EVENT_BYTES]],
        sinks: &mut Sinks,
        now: u64,
    ) -> Result<(), RecordError> {
        let Some(trigger) = sinks.flight.as_ref().and_then(|f| f.trigger()).cloned() else {
            return Ok(());
        };
        // Trying an I/O is not recording it: the attribution figures stay as they were.
        let attributed = self.conv.attributed;
        let mut matched = Vec::new();
        let mut fire = None;
        for rec in recs {
            let Some(r) = IoEvent::parse(rec) else {
                continue;
            };
            let key = (r.dev, r.start_ns, r.tid);
            if self.in_flight_matched.contains(&key) {
                matched.push(key);
                continue;
            }
            let e: Event = self.conv.io_record(&r, &mut self.entries);
            self.write_entries(&e, sinks)?;
            if let Some(f) = self.filter {
                if !f.eval(&e, &self.view(&e, &r, true)) {
                    continue;
                }
            }
            let v = self.view(&e, &r, self.trigger_names);
            let longer = Event {
                latency_ns: u64::MAX / 4,
                ..e
            };
            if !(trigger.eval(&e, &v) && trigger.eval(&longer, &v)) {
                continue;
            }
            matched.push(key);
            let fires = sinks.flight.as_mut().is_some_and(|f| f.may_fire(now, now));
            if fires && fire.is_none() {
                fire = Some(e);
            }
        }
        self.conv.attributed = attributed;
        self.in_flight_matched = matched;
        if let (Some(e), Some(f)) = (fire, &mut sinks.flight) {
            f.fire(Snapshot::InFlight(&e), now_pair(), None)?;
        }
        Ok(())
    }

    /// What a filter expression reads of an event beside its fields (the path and the
    /// device's name left empty unless `names`).
    fn view<'v>(&'v self, e: &Event, r: &'v IoEvent, names: bool) -> ResolvedView<'v> {
        ResolvedView {
            comm: r.comm(),
            path: if names {
                self.conv.recorded_path(e.path_id)
            } else {
                b""
            },
            dev: if names {
                self.conv.dev_label(e.dev)
            } else {
                ""
            },
            cgroup: match &self.cgroups {
                Some(t) if self.filter_reads_cgroups => t.known(e.cgroup_id),
                _ => None,
            },
            utc_ns: Some(self.utc_offset_ns.wrapping_add(e.timestamp_ns as i64)),
        }
    }

    /// Once a second: the bcache devices met before their cache set attached them get
    /// their entry again once it has ([`Converter::resettle`]).
    fn resettle(&mut self, sinks: &mut Sinks) -> Result<(), RecordError> {
        self.conv.resettle(&mut self.entries);
        self.write_devices(sinks)
    }

    /// The device entries waiting in `entries` into the traces (dropped when none is
    /// written).
    fn write_devices(&mut self, sinks: &mut Sinks) -> Result<(), RecordError> {
        if !sinks.traces() {
            self.entries.devices.clear();
            return Ok(());
        }
        for d in self.entries.devices.drain(..) {
            sinks.add_device(d)?;
        }
        Ok(())
    }

    /// The device, process, path and cgroup entries the last event brought.
    fn write_entries(&mut self, e: &Event, sinks: &mut Sinks) -> Result<(), RecordError> {
        let process = self.entries.process.take();
        if let Some(t) = &mut self.cgroups {
            if let Some(p) = &process {
                if let Some(c) = t.settle(p.cgroup_id) {
                    sinks.add_cgroup(c)?;
                }
            }
            if let Some(c) = t.settle(e.cgroup_id) {
                sinks.add_cgroup(c)?;
            }
        }
        self.write_devices(sinks)?;
        if !sinks.traces() {
            self.entries.path = None;
            return Ok(());
        }
        if let Some(p) = process {
            sinks.add_process(p)?;
        }
        if let Some(p) = self.entries.path.take() {
            sinks.add_path(p)?;
        }
        Ok(())
    }
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
            (counter::LOST_RINGBUF, LossReason::RingBufferFull),
            (counter::LOST_INFLIGHT, LossReason::InFlightFull),
            (counter::LOST_STALE, LossReason::Evicted),
            (counter::CHAIN_UNTRACED, LossReason::CompletionNotTraced),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_narrow_what_the_kernel_keeps() {
        let mut op_mask = u32::MAX;
        let mut pids = Vec::new();
        intersect(&mut pids, vec![7, 8], &mut op_mask);
        assert_eq!((pids.clone(), op_mask), (vec![7, 8], u32::MAX));
        intersect(&mut pids, vec![8, 9], &mut op_mask);
        assert_eq!((pids.clone(), op_mask), (vec![8], u32::MAX));
        // Nothing in common: nothing can match.
        intersect(&mut pids, vec![1], &mut op_mask);
        assert_eq!((pids.len(), op_mask), (0, 0));

        let mut s = BpfSettings {
            pids: vec![5, 6],
            min_bytes: 512,
            ..BpfSettings::default()
        };
        let all_ops = s.op_mask;
        push_filter_down(
            &mut s,
            &Expr::parse("iosize >= 4k && pid == 6 && rw == W").unwrap(),
        );
        assert_eq!((s.min_bytes, s.pids.as_slice()), (4096, &[6][..]));
        assert_eq!(s.op_mask, all_ops & (1 << iodump_format::Op::Write.code()));
        let mut s = BpfSettings::default();
        push_filter_down(&mut s, &Expr::parse("iosize < 1").unwrap());
        assert_eq!(s.op_mask, 1 << iodump_format::Op::Flush.code());
        let mut s = BpfSettings::default();
        let before = s.clone();
        push_filter_down(
            &mut s,
            &Expr::parse("path =~ '/var/*' || container == ''").unwrap(),
        );
        assert_eq!(
            (
                s.min_bytes,
                s.max_bytes,
                s.op_mask,
                s.pids.len(),
                s.comms.len()
            ),
            (before.min_bytes, before.max_bytes, before.op_mask, 0, 0)
        );
    }

    /// What the filter drops still brings its table entries into the trace (the converter
    /// will not announce them again); what it keeps is written and counted.
    #[test]
    fn filtered_events_still_write_their_table_entries() {
        use crate::abi::path_kind;
        use iodump_format::{PathKind, Reader};
        let p = std::env::temp_dir().join(format!("iodump-ingest-{}.iod", std::process::id()));
        let f = File::create(&p).unwrap();
        let w = Writer::new(f, &Header::default(), WriterOptions::default()).unwrap();
        let mut sinks = Sinks {
            writer: Some(w),
            parts: None,
            flight: None,
            printer: None,
            live: None,
        };
        let filter = Expr::parse("rw == W").unwrap();
        let mut ingest = Ingest {
            conv: Converter::new(&[], MountTable::default()),
            entries: NewEntries::default(),
            filter: Some(&filter),
            filter_reads_cgroups: false,
            cgroups: None,
            trigger_names: false,
            utc_offset_ns: 0,
            events: 0,
            in_flight_matched: Vec::new(),
        };
        // A metadata read, dropped by the filter: its process and label still go in.
        let read = crate::convert::sample_io(path_kind::META, 0);
        ingest.io(&read, &mut sinks).unwrap();
        let mut write = crate::convert::sample_io(path_kind::UNKNOWN, 0);
        write.op = iodump_format::Op::Write.code();
        ingest.io(&write, &mut sinks).unwrap();
        assert_eq!(ingest.events, 1);
        sinks.writer.unwrap().finish(EndInfo::default()).unwrap();
        let r = Reader::open(&p).unwrap();
        let _ = std::fs::remove_file(&p);
        let events: Vec<Event> = r.events().collect();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].op, iodump_format::Op::Write);
        let kinds: Vec<PathKind> = r.tables().paths().map(|p| p.kind).collect();
        assert!(kinds.contains(&PathKind::Metadata), "{kinds:?}");
        assert!(kinds.contains(&PathKind::Unknown), "{kinds:?}");
        assert_eq!(
            r.tables().processes().map(|p| p.tid).collect::<Vec<_>>(),
            [11]
        );
    }

    #[test]
    fn cgroups_are_looked_up_once_and_given_up_after_two_more_walks() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("iodump-cgtable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let leaf = dir.join("system.slice/docker-0123456789abcdef.scope");
        std::fs::create_dir_all(&leaf).unwrap();
        let leaf_id = std::fs::metadata(&leaf).unwrap().ino();
        let mut t = CgroupTable::new(Resolver::with_root(Some(dir.clone())));
        t.resolver.scan();
        t.settle(leaf_id);
        assert!(matches!(t.state.get(&leaf_id), Some(CgroupState::Written)));
        assert_eq!(
            t.known(leaf_id).unwrap().identity.label(),
            "docker:0123456789ab"
        );
        assert_eq!(t.last_id, leaf_id);
        // An id no walk finds: retried while the resolver walks again, then given up.
        let gone = u64::MAX - 1;
        t.settle(gone);
        assert!(matches!(
            t.state.get(&gone),
            Some(CgroupState::Unknown { .. })
        ));
        t.resolver.scan();
        t.resolver.scan();
        t.settle(gone);
        assert!(matches!(t.state.get(&gone), Some(CgroupState::GivenUp)));
        let scans = t.resolver.scans;
        t.settle(gone);
        assert_eq!(t.resolver.scans, scans, "a given-up id walks no more");
        // 0 is "unknown" in the trace: never looked up.
        t.settle(0);
        assert!(!t.state.contains_key(&0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
