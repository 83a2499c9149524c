//! `iodump top`: flags → a recording with a live sink (the library's
//! [`iodump_record::live`]): batch snapshots as text or JSON (`-b`), or the full-screen view
//! (crossterm: raw mode, alternate screen; keys read from the terminal here).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use iodump_format::Event;
use iodump_record::abi::IoEvent;
use iodump_record::bpf::BpfSettings;
use iodump_record::cgroups::Resolver;
use iodump_record::convert::Converter;
use iodump_record::live::{parse_interval, Aggregator, Interval, Sort, View};
use iodump_record::{record_live, LiveSink, RecordConfig, RecorderStatus};

use crate::args::{parse_filter, usage, usage_bail, Selection};
use crate::serving::Serving;
use crate::top_view::{render, show_duration, BatchSink, Screen};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ViewArg {
    /// Per file: path, main process.
    File,
    /// Per process: pid, comm, container, argv.
    Proc,
    /// Per device.
    Dev,
    /// Per cgroup: container, pod, systemd unit.
    Cgroup,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SortArg {
    /// I/Os per second.
    Iops,
    /// MB per second.
    Throughput,
    /// p99 latency.
    Latency,
    /// Mean queue time.
    Queue,
}

#[derive(Debug, Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub select: Selection,
    /// Refresh interval: 1s, 500ms, 2 (seconds)…
    #[arg(short = 'i', long, default_value = "1s", value_name = "DURATION")]
    pub interval: String,
    /// What a row is.
    #[arg(long, value_enum, default_value = "file")]
    pub by: ViewArg,
    /// Row order (descending).
    #[arg(long, value_enum, default_value = "iops")]
    pub sort: SortArg,
    /// Batch mode: print snapshots on stdout (text, or --json) instead of a full-screen view.
    #[arg(short = 'b', long)]
    pub batch: bool,
    /// Stop after N snapshots.
    #[arg(short = 'n', long = "iterations", value_name = "N")]
    pub iterations: Option<u64>,
    /// Batch mode: one JSON object per snapshot and line.
    #[arg(long)]
    pub json: bool,
    /// Batch mode: most rows per snapshot (0: all).
    #[arg(short = 'l', long, default_value_t = 20)]
    pub limit: usize,
    /// Also write the trace to FILE (as `iodump record -o`).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Serve Prometheus/OpenMetrics metrics on http://ADDR:PORT/metrics: PORT or :PORT
    /// listen on 127.0.0.1; another address must be given (0.0.0.0:9100). With the screen,
    /// with -b, or alone when stdin or stdout is not a terminal.
    #[arg(long, value_name = "ADDR:PORT")]
    pub serve: Option<String>,
    /// --serve: files exported (the busiest by I/Os; file paths are unbounded label values).
    #[arg(long, value_name = "N", default_value_t = 100, requires = "serve")]
    pub serve_files: usize,
}

fn view(v: ViewArg) -> View {
    match v {
        ViewArg::File => View::File,
        ViewArg::Proc => View::Proc,
        ViewArg::Dev => View::Dev,
        ViewArg::Cgroup => View::Cgroup,
    }
}

fn sort(s: SortArg) -> Sort {
    match s {
        SortArg::Iops => Sort::Iops,
        SortArg::Throughput => Sort::Throughput,
        SortArg::Latency => Sort::Latency,
        SortArg::Queue => Sort::Queue,
    }
}

pub fn run(a: &TopArgs) -> anyhow::Result<ExitCode> {
    let interval = parse_interval(&a.interval).ok_or_else(|| {
        usage(format!(
            "-i {:?}: give a positive duration (500ms, 1s, 2.5s, 1m)",
            a.interval
        ))
    })?;
    // The recorder's loop wakes every 100 ms: a shorter interval could not be kept.
    if interval < iodump_record::live::MIN_INTERVAL {
        usage_bail!(
            "-i {}: the shortest interval is 100ms (the recorder reads the kernel's events every 100 ms)",
            a.interval
        );
    }
    if a.iterations == Some(0) {
        usage_bail!("-n 0: give at least one snapshot");
    }
    if a.json && !a.batch {
        usage_bail!("--json is for batch mode: add -b");
    }
    let filter = a
        .select
        .filter
        .as_deref()
        .map(|f| parse_filter("-f", f))
        .transpose()?;
    let bpf = BpfSettings {
        pids: a.select.pids.clone(),
        comms: a
            .select
            .comms
            .iter()
            .map(|c| c.as_bytes().to_vec())
            .collect(),
        cgroup: a.select.cgroup.clone(),
        ..BpfSettings::default()
    };
    let cfg = RecordConfig {
        filter,
        devices: a.select.devices.clone(),
        output: a.output.clone(),
        bpf,
        recorder_argv: std::env::args().collect(),
        memory_limit_bytes: 64 << 20,
        ..RecordConfig::default()
    };
    let container = a.select.container.clone().filter(|c| !c.trim().is_empty());
    // SAFETY: isatty has no preconditions.
    let terminal = unsafe { libc::isatty(0) == 1 && libc::isatty(1) == 1 };
    let serve_only = a.serve.is_some() && !a.batch && !terminal;
    if serve_only && a.iterations.is_some() {
        usage_bail!("-n counts refreshes of the screen or of -b; --serve alone runs until stopped");
    }
    // The port is taken before anything is loaded: one in use is an error up front.
    let mut serving = a
        .serve
        .as_deref()
        .map(|spec| Serving::start(spec, container.clone(), a.serve_files))
        .transpose()?;
    let agg = Aggregator::new(Resolver::new(), container);
    let limit = (a.limit > 0).then_some(a.limit);
    crate::signals::install();
    if serve_only {
        let serving = serving.as_mut().expect("serving");
        let s = record_live(&cfg, &crate::signals::STOP, Some(serving))
            .map_err(|e| crate::record::in_context(e, &cfg))?;
        finish(&cfg, &s);
        return Ok(ExitCode::SUCCESS);
    }
    if a.batch {
        let stdout = std::io::stdout().lock();
        let mut sink = BatchSink::new(
            agg,
            stdout,
            interval,
            a.iterations,
            view(a.by),
            sort(a.sort),
            limit,
            a.json,
        );
        let s = record_with(&cfg, serving.as_mut(), &mut sink)
            .map_err(|e| crate::record::in_context(e, &cfg))?;
        if let Some(e) = sink.error {
            if e.kind() != std::io::ErrorKind::BrokenPipe {
                return Err(e).context("writing to stdout");
            }
        }
        finish(&cfg, &s);
        return Ok(ExitCode::SUCCESS);
    }
    if !terminal {
        bail!("the full-screen view needs a terminal on stdin and stdout; use -b for batch mode");
    }
    let mut sink = Screenful::new(agg, interval, a.iterations, view(a.by), sort(a.sort));
    let result = record_with(&cfg, serving.as_mut(), &mut sink);
    sink.restore();
    let s = result.map_err(|e| crate::record::in_context(e, &cfg))?;
    if let Some(e) = sink.error.take() {
        return Err(e).context("drawing the screen");
    }
    finish(&cfg, &s);
    Ok(ExitCode::SUCCESS)
}

/// One line on stderr at the end when a trace was written too.
fn finish(cfg: &RecordConfig, s: &iodump_record::RecordSummary) {
    if let Some(p) = &cfg.output {
        eprintln!(
            "iodump: recorded {} events in {:.1} s, lost {}; wrote {} ({} bytes)",
            s.events,
            s.duration.as_secs_f64(),
            s.lost_events,
            p.display(),
            s.bytes_written
        );
    }
}

/// The metrics of `--serve` and the screen or batch sink.
/// Records with `view` (the screen or -b) as the live sink, and the metrics of `--serve` too.
fn record_with(
    cfg: &RecordConfig,
    serving: Option<&mut Serving>,
    view: &mut dyn LiveSink,
) -> Result<iodump_record::RecordSummary, iodump_record::error::RecordError> {
    match serving {
        Some(serving) => record_live(
            cfg,
            &crate::signals::STOP,
            Some(&mut Both { serving, view }),
        ),
        None => record_live(cfg, &crate::signals::STOP, Some(view)),
    }
}

struct Both<'a> {
    serving: &'a mut Serving,
    view: &'a mut dyn LiveSink,
}

impl LiveSink for Both<'_> {
    fn event(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        self.serving.metrics.add(e, r, conv);
        self.view.event(e, r, conv);
    }

    fn tick(&mut self, status: &RecorderStatus) -> bool {
        self.serving.step(status);
        self.view.tick(status)
    }

    fn wants_in_flight(&self) -> bool {
        true
    }

    fn in_flight(&mut self, look: &iodump_record::in_flight::InFlightLook, conv: &Converter) {
        self.serving.metrics.set_in_flight(look, conv);
        if self.view.wants_in_flight() {
            self.view.in_flight(look, conv);
        }
    }
}

/// A key read from the terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Quit,
    NextView,
    PrevView,
    View(View),
    NextSort,
    Pause,
    Redraw,
}

/// Keys in the bytes read from a terminal in raw mode (escape sequences other than
/// shift-tab are skipped).
fn keys(b: &[u8]) -> Vec<Key> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'q' | b'Q' | 0x03 | 0x04 => out.push(Key::Quit),
            b'v' | b'\t' => out.push(Key::NextView),
            b'V' => out.push(Key::PrevView),
            b'1' => out.push(Key::View(View::File)),
            b'2' => out.push(Key::View(View::Proc)),
            b'3' => out.push(Key::View(View::Dev)),
            b'4' => out.push(Key::View(View::Cgroup)),
            b's' | b'S' => out.push(Key::NextSort),
            b'p' | b' ' => out.push(Key::Pause),
            0x0c => out.push(Key::Redraw), // Ctrl-L
            0x1b => {
                // ESC [ Z: shift-tab; any other CSI sequence is skipped to its final byte.
                if b.get(i + 1) == Some(&b'[') {
                    let mut j = i + 2;
                    while j < b.len() && !(0x40..=0x7e).contains(&b[j]) {
                        j += 1;
                    }
                    if b.get(j) == Some(&b'Z') {
                        out.push(Key::PrevView);
                    }
                    i = j;
                } else if i + 1 == b.len() {
                    out.push(Key::Quit); // a lone Escape
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// How often the full-screen view reads keys and the terminal's size.
const POLL_EVERY: Duration = Duration::from_millis(50);

/// The full-screen view: aggregates, redraws each interval, on a key and on a resize.
struct Screenful {
    agg: Aggregator,
    interval: Duration,
    iterations: Option<u64>,
    done: u64,
    view: View,
    sort: Sort,
    paused: bool,
    next: Instant,
    last: Instant,
    polled: Instant,
    shown: Option<Interval>,
    size: (u16, u16),
    entered: bool,
    error: Option<std::io::Error>,
    /// stderr while the screen is up (None before, after, or when it could not be taken).
    capture: Option<StderrCapture>,
    /// The last line written to stderr while the screen is up, and how many there were.
    warning: Option<String>,
    warnings: usize,
}

impl Screenful {
    fn new(
        agg: Aggregator,
        interval: Duration,
        iterations: Option<u64>,
        view: View,
        sort: Sort,
    ) -> Screenful {
        let now = Instant::now();
        Screenful {
            agg,
            interval,
            iterations,
            done: 0,
            view,
            sort,
            paused: false,
            next: now + interval,
            last: now,
            polled: now,
            shown: None,
            size: (0, 0),
            entered: false,
            error: None,
            capture: None,
            warning: None,
            warnings: 0,
        }
    }

    fn enter(&mut self) -> std::io::Result<()> {
        use crossterm::{cursor, execute, terminal};
        terminal::enable_raw_mode()?;
        self.entered = true;
        execute!(
            std::io::stdout(),
            terminal::EnterAlternateScreen,
            cursor::Hide,
            terminal::Clear(terminal::ClearType::All)
        )?;
        // Without the capture, a warning is drawn over the screen until the next redraw.
        self.capture = StderrCapture::start().ok();
        Ok(())
    }

    /// Leaves the alternate screen and raw mode (also after an error).
    fn restore(&mut self) {
        use crossterm::{cursor, execute, terminal};
        if self.entered {
            self.entered = false;
            let _ = execute!(
                std::io::stdout(),
                cursor::Show,
                terminal::LeaveAlternateScreen
            );
            let _ = terminal::disable_raw_mode();
        }
        // What was written to stderr meanwhile, on the terminal's own screen now.
        if let Some(c) = self.capture.take() {
            c.stop();
        }
    }

    /// Bytes waiting on stdin (none: empty).
    fn read_input() -> Vec<u8> {
        let mut buf = [0u8; 256];
        let mut pfd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd on our stack; read(2) into our stack buffer.
        unsafe {
            if libc::poll(&mut pfd, 1, 0) <= 0 || pfd.revents & libc::POLLIN == 0 {
                return Vec::new();
            }
            let n = libc::read(0, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                return Vec::new();
            }
            buf[..n as usize].to_vec()
        }
    }

    fn draw(&mut self) -> std::io::Result<()> {
        use crossterm::{cursor, queue, terminal};
        let (cols, rows) = self.size;
        let (w, h) = (cols.max(1) as usize, rows.max(1) as usize);
        let status = if self.paused { "  [paused]" } else { "" };
        let mut lines = match &self.shown {
            Some(iv) => {
                let scr = Screen {
                    interval: self.interval,
                    status,
                    limit: Some(h.saturating_sub(4)),
                    width: Some(w),
                };
                render(iv, self.view, self.sort, &scr)
            }
            None => vec![format!(
                "iodump top - by {} (v)  sort {} (s){status}  collecting, first refresh in {}…",
                self.view.name(),
                self.sort.name(),
                show_duration(self.interval)
            )],
        };
        // A line written to stderr (a warning) stays above the footer.
        let warning = self.warning.as_ref().filter(|_| h > 2).map(|w| {
            if self.warnings > 1 {
                format!(
                    "{w}  ({} lines on stderr, all shown on exit)",
                    self.warnings
                )
            } else {
                w.clone()
            }
        });
        lines.truncate(h.saturating_sub(1 + warning.is_some() as usize));
        let footer = "v/tab view  1-4 file/proc/dev/cgroup  s sort  p/space pause  q quit";
        let mut out = std::io::stdout().lock();
        for (i, l) in lines.iter().enumerate() {
            let l: String = l.chars().take(w).collect();
            queue!(
                out,
                cursor::MoveTo(0, i as u16),
                crossterm::style::Print(l),
                terminal::Clear(terminal::ClearType::UntilNewLine)
            )?;
        }
        queue!(
            out,
            cursor::MoveTo(0, lines.len() as u16),
            terminal::Clear(terminal::ClearType::FromCursorDown)
        )?;
        if let Some(l) = warning {
            let l: String = l.chars().filter(|c| !c.is_control()).take(w).collect();
            queue!(
                out,
                cursor::MoveTo(0, (h - 2) as u16),
                crossterm::style::SetAttribute(crossterm::style::Attribute::Bold),
                crossterm::style::Print(l),
                crossterm::style::SetAttribute(crossterm::style::Attribute::Reset)
            )?;
        }
        if h > 1 {
            let f: String = footer.chars().take(w).collect();
            queue!(
                out,
                cursor::MoveTo(0, (h - 1) as u16),
                crossterm::style::SetAttribute(crossterm::style::Attribute::Reverse),
                crossterm::style::Print(f),
                crossterm::style::SetAttribute(crossterm::style::Attribute::Reset)
            )?;
        }
        out.flush()
    }

    /// One tick: keys, resize, the interval's end. True: quit.
    fn step(&mut self, lost_events: u64) -> std::io::Result<bool> {
        if !self.entered {
            // The first tick: recording has started, the first interval starts now.
            self.agg.end_interval(0.0, lost_events);
            self.last = Instant::now();
            self.next = self.last + self.interval;
            self.enter()?;
            self.size = crossterm::terminal::size()?;
            self.draw()?;
        }
        let now = Instant::now();
        // Keys and the terminal's size are looked at every 50 ms at most (the session loop
        // ticks far more often under load).
        if now < self.next && now.duration_since(self.polled) < POLL_EVERY {
            return Ok(false);
        }
        self.polled = now;
        let mut redraw = false;
        for k in keys(&Self::read_input()) {
            match k {
                Key::Quit => return Ok(true),
                Key::NextView => self.view = self.view.next(),
                Key::PrevView => self.view = self.view.prev(),
                Key::View(v) => self.view = v,
                Key::NextSort => {
                    self.sort = self.sort.next();
                    if let Some(iv) = &mut self.shown {
                        iv.sort(self.sort);
                    }
                }
                Key::Pause => self.paused = !self.paused,
                Key::Redraw => {}
            }
            redraw = true;
        }
        if let Some(c) = &mut self.capture {
            let new = c.lines();
            if let Some(last) = new.last() {
                self.warnings += new.len();
                self.warning = Some(last.clone());
                redraw = true;
            }
        }
        let size = crossterm::terminal::size()?;
        if size != self.size {
            self.size = size;
            redraw = true;
        }
        let mut quit = false;
        if now >= self.next {
            while self.next <= now {
                self.next += self.interval;
            }
            let secs = now.duration_since(self.last).as_secs_f64();
            self.last = now;
            let mut iv = self.agg.end_interval(secs, lost_events);
            if !self.paused {
                iv.sort(self.sort);
                self.shown = Some(iv);
                redraw = true;
                self.done += 1;
                quit = self.iterations.is_some_and(|n| self.done >= n);
            }
        }
        if redraw {
            self.draw()?;
        }
        Ok(quit)
    }
}

impl LiveSink for Screenful {
    fn event(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        self.agg.add(e, r, conv);
    }

    fn wants_in_flight(&self) -> bool {
        true
    }

    fn in_flight(&mut self, look: &iodump_record::in_flight::InFlightLook, conv: &Converter) {
        self.agg.set_in_flight(look, conv);
    }

    fn tick(&mut self, status: &RecorderStatus) -> bool {
        match self.step(status.lost_events) {
            Ok(quit) => quit,
            Err(e) => {
                self.error = Some(e);
                true
            }
        }
    }
}

/// stderr while the full screen is up: a warning the recorder prints (a stacked device that
/// appeared and cannot be followed, ...) would be drawn over the screen and lost when it is
/// left. Writes to fd 2 go to a memory file instead; the screen shows their last line, and
/// [`StderrCapture::stop`] puts stderr back and writes them there.
struct StderrCapture {
    /// The memory file on fd 2.
    file: std::fs::File,
    /// The real stderr.
    saved: std::os::fd::OwnedFd,
    /// Bytes of `file` already read by [`StderrCapture::lines`].
    read_bytes: u64,
    /// A line read without its newline yet.
    partial: Vec<u8>,
}

impl StderrCapture {
    fn start() -> std::io::Result<StderrCapture> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a NUL-terminated name; the call returns a new descriptor or -1.
        let fd = unsafe { libc::memfd_create(c"iodump-top-stderr".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd was just created and nothing else owns it.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        // SAFETY: duplicates fd 2 (valid or not: -1 then) to a new descriptor.
        let saved = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
        if saved < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: saved was just created and nothing else owns it.
        let saved = unsafe { std::os::fd::OwnedFd::from_raw_fd(saved) };
        std::io::stderr().flush()?;
        // SAFETY: both descriptors are open; fd 2 then refers to the memory file.
        if unsafe { libc::dup2(file.as_raw_fd(), 2) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(StderrCapture {
            file,
            saved,
            read_bytes: 0,
            partial: Vec::new(),
        })
    }

    /// The complete lines written since the last call.
    fn lines(&mut self) -> Vec<String> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 4096];
        let mut out = Vec::new();
        while let Ok(n) = self.file.read_at(&mut buf, self.read_bytes) {
            if n == 0 {
                break;
            }
            self.read_bytes += n as u64;
            for &b in &buf[..n] {
                if b == b'\n' {
                    out.push(String::from_utf8_lossy(&self.partial).into_owned());
                    self.partial.clear();
                } else {
                    self.partial.push(b);
                }
            }
        }
        out
    }

    /// Puts the real stderr back and writes everything captured to it.
    fn stop(self) {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::FileExt;
        let _ = std::io::stderr().flush();
        // SAFETY: both descriptors are open; fd 2 is the real stderr again.
        unsafe { libc::dup2(self.saved.as_raw_fd(), 2) };
        let mut at = 0u64;
        let mut buf = [0u8; 4096];
        let mut err = std::io::stderr().lock();
        while let Ok(n) = self.file.read_at(&mut buf, at) {
            if n == 0 || err.write_all(&buf[..n]).is_err() {
                break;
            }
            at += n as u64;
        }
        let _ = err.flush();
    }
}

impl Drop for Screenful {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_is_kept_while_the_screen_is_up_and_given_back() {
        use std::os::fd::AsRawFd;
        // Where "stderr" goes for this test: a file, so that what stop() writes is seen.
        let dir = std::env::temp_dir().join(format!("iodump-capture-{}", std::process::id()));
        let real = std::fs::File::create(&dir).unwrap();
        // SAFETY: duplicates fd 2, to restore it below.
        let orig = unsafe { libc::dup(2) };
        assert!(orig >= 0);
        // SAFETY: both descriptors are open; fd 2 then refers to the file.
        unsafe { libc::dup2(real.as_raw_fd(), 2) };
        let write2 = |s: &str| {
            // SAFETY: writes our buffer to fd 2.
            unsafe { libc::write(2, s.as_ptr().cast(), s.len()) };
        };
        let mut c = StderrCapture::start().unwrap();
        write2("iodump: warning: first\niodump: warning: sec");
        let first = c.lines();
        write2("ond\n");
        let second = c.lines();
        assert!(c.lines().is_empty());
        c.stop();
        write2("after\n");
        // SAFETY: fd 2 back to what the harness gave the process.
        unsafe {
            libc::dup2(orig, 2);
            libc::close(orig);
        }
        let seen = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        assert_eq!(first, ["iodump: warning: first"]);
        assert_eq!(second, ["iodump: warning: second"]);
        assert_eq!(
            seen,
            "iodump: warning: first\niodump: warning: second\nafter\n"
        );
    }

    #[test]
    fn key_bytes() {
        assert_eq!(keys(b"q"), vec![Key::Quit]);
        assert_eq!(
            keys(b"v\ts p"),
            vec![
                Key::NextView,
                Key::NextView,
                Key::NextSort,
                Key::Pause,
                Key::Pause
            ]
        );
        assert_eq!(keys(b"\x1b[Z"), vec![Key::PrevView]);
        // Arrow keys are skipped, not read as letters.
        assert_eq!(keys(b"\x1b[A\x1b[1;5Cq"), vec![Key::Quit]);
        assert_eq!(keys(b"\x1b"), vec![Key::Quit]);
        assert_eq!(keys(b"3"), vec![Key::View(View::Dev)]);
    }
}
