//! The flight recorder's ring (`iodump record --ring`): the last window of events kept in
//! memory as sealed, compressed segments (what a trace file would hold, nothing written),
//! and snapshots of it — on a trigger (an I/O matching a filter expression) or on SIGUSR1 —
//! written as traces of their own: the window before, then the events of `--after` more.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};

use iodump_format::cgroup::Cgroup;
use iodump_format::chunk::ChunkType;
use iodump_format::expr::Expr;
use iodump_format::idtable::IdTable;
use iodump_format::inthash::IntMap;
use iodump_format::recording::{TableMirror, META_SNAPSHOT, META_TRIGGER_IO};
use iodump_format::{
    Device, EndInfo, Event, Header, Loss, PathEntry, Process, SealedChunk, WriteError, Writer,
    WriterOptions,
};
use iodump_output::parts::{name_time_after, parse_name_time, PartTables};
use iodump_output::OutputFile;

use crate::error::{one_line, RecordError};

/// What the ring keeps and when it saves it.
#[derive(Clone, Debug)]
pub struct FlightConfig {
    /// Where snapshots go (a directory).
    pub dir: PathBuf,
    /// Keep the events of this long (monotonic ns, by the events' timestamps).
    pub window_ns: Option<u64>,
    /// Keep at most this many bytes of sealed segments (with a window of time too: whichever
    /// is reached first).
    pub window_bytes: u64,
    /// Save a snapshot when an I/O matches this.
    pub trigger: Option<Expr>,
    /// The trigger as given (stored in the snapshot's header, and its file name).
    pub trigger_text: Option<String>,
    /// The trigger fires when this many I/Os matched it (1: the first match).
    pub trigger_count: u32,
    /// ... and completed within this long, in ns (for a count above 1).
    pub trigger_window_ns: u64,
    /// Go on writing into a snapshot for this long after it fired.
    pub after_ns: u64,
    /// No trigger fires sooner than this after the last one fired.
    pub cooldown_ns: u64,
    /// At most this many snapshots in this run (then triggers are ignored, said once).
    pub max_dumps: Option<u32>,
    /// Keep at most this many snapshot files in the directory, of this run and earlier ones
    /// (the oldest are deleted; never the one being written).
    pub keep_dumps: Option<usize>,
    /// Keep the directory's snapshot files within this many bytes (the oldest are deleted;
    /// never the one being written).
    pub max_dumps_total_bytes: Option<u64>,
}

/// The most memory a ring of time takes when no size was given.
pub const DEFAULT_RING_BYTES: u64 = 512 << 20;

/// One snapshot being written.
struct Dump {
    out: OutputFile,
    writer: Writer<File>,
    until_mono_ns: u64,
}

/// The ring, the trigger and the snapshot being written.
pub struct Flight {
    cfg: FlightConfig,
    template: Header,
    opts: WriterOptions,
    /// Encodes into memory only (a tap on a sink).
    writer: Writer<std::io::Sink>,
    mirror: TableMirror,
    /// Which entries the ring's events refer to ([`Refs`]).
    refs: Refs,
    /// Path entries and threads forgotten by the recording that events in the ring still
    /// refer to: a snapshot needs them until those events leave the ring.
    forget_later: (Vec<u32>, IntMap<u32, ()>),
    /// Which entries the snapshot being written holds (snapshot n is "part" n).
    dump_tables: PartTables,
    ring: VecDeque<SealedChunk>,
    /// The sequence number ([`Refs`]) of the first event of each chunk of `ring`.
    ring_seq: VecDeque<u64>,
    /// Events in the chunks taken from the tap so far.
    sealed_events: u64,
    ring_bytes: u64,
    newest_ns: u64,
    dump: Option<Dump>,
    /// Snapshots started (written whole, or cut short); counts only, so that a recorder
    /// left running for a year holds no list of them.
    pub dumps: u32,
    /// Snapshots that could not be written whole (a full file system, the directory gone).
    /// The ring goes on.
    pub failed_dumps: u64,
    /// The first of those: its file, and why.
    pub first_failed_dump: Option<(PathBuf, String)>,
    /// Older snapshot files deleted to keep within `keep_dumps` and `max_dumps_total_bytes`.
    pub deleted_dumps: u64,
    last_fire_mono_ns: Option<u64>,
    /// With a trigger count above 1: the completion times of the last matches (at most
    /// that many), oldest first.
    matches_ns: VecDeque<u64>,
    said_max: bool,
    said_size: bool,
    /// Counters for [`Flight::stats`].
    counts: FlightStats,
}

/// What the flight recorder has done so far, for the recorder's own metrics (`--serve`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlightStats {
    /// I/Os that matched the trigger, whether or not they saved a snapshot (one during a
    /// snapshot, the cooldown or after `--max-dumps` saves none).
    pub trigger_matches: u64,
    /// Snapshots started by the trigger.
    pub snapshots_triggered: u64,
    /// Snapshots started by SIGUSR1.
    pub snapshots_signalled: u64,
    /// Snapshots that could not be written whole, or not at all.
    pub snapshots_failed: u64,
    /// Older snapshot files deleted to keep within `--keep-dumps` and `--max-dumps-total`.
    pub snapshots_deleted: u64,
    /// Wall clock at the start of the newest snapshot, ns since the epoch (0: none yet).
    pub last_snapshot_wall_ns: i64,
    /// A snapshot is being written (its `--after` has not passed).
    pub writing: bool,
    /// Bytes of sealed segments in the ring.
    pub ring_bytes: u64,
    /// Time from the ring's oldest event to its newest, ns.
    pub ring_span_ns: u64,
    /// With `--trigger-count` N above 1: (the matches completed within the last
    /// `--trigger-window`, counted up to N; N): the trigger fires when the first reaches N.
    pub trigger_window: Option<(u64, u32)>,
}

impl Flight {
    /// An empty ring; `template` is the header each snapshot starts from.
    pub fn new(
        cfg: FlightConfig,
        template: Header,
        opts: WriterOptions,
    ) -> Result<Flight, RecordError> {
        let mut writer =
            Writer::new(std::io::sink(), &template, opts.clone()).map_err(RecordError::Write)?;
        writer.tap();
        writer.take_sealed();
        Ok(Flight {
            cfg,
            template,
            opts,
            writer,
            mirror: TableMirror::default(),
            refs: Refs::default(),
            forget_later: (Vec::new(), IntMap::default()),
            dump_tables: PartTables::default(),
            ring: VecDeque::new(),
            ring_seq: VecDeque::new(),
            sealed_events: 0,
            ring_bytes: 0,
            newest_ns: 0,
            dump: None,
            dumps: 0,
            failed_dumps: 0,
            first_failed_dump: None,
            deleted_dumps: 0,
            last_fire_mono_ns: None,
            matches_ns: VecDeque::new(),
            said_max: false,
            said_size: false,
            counts: FlightStats::default(),
        })
    }

    /// What it has done so far, and what the ring holds now.
    pub fn stats(&self) -> FlightStats {
        let oldest_ns = self
            .ring
            .iter()
            .find(|c| c.kind == ChunkType::Events && c.records > 0)
            .map(|c| c.ts_range_ns.0);
        FlightStats {
            snapshots_failed: self.failed_dumps,
            snapshots_deleted: self.deleted_dumps,
            writing: self.dump.is_some(),
            ring_bytes: self.ring_bytes,
            ring_span_ns: oldest_ns.map_or(0, |o| self.newest_ns.saturating_sub(o)),
            trigger_window: (self.cfg.trigger_count > 1)
                .then(|| (self.matches_within_window(), self.cfg.trigger_count)),
            ..self.counts
        }
    }

    /// The trigger, if any.
    pub fn trigger(&self) -> Option<&Expr> {
        self.cfg.trigger.as_ref()
    }

    /// Bytes of sealed segments in the ring.
    pub fn ring_bytes(&self) -> u64 {
        self.ring_bytes
    }

    fn both<T: Clone>(
        &mut self,
        v: T,
        f: impl Fn(&mut Writer<std::io::Sink>, T) -> Result<(), WriteError>,
        g: impl Fn(&mut Writer<File>, T) -> Result<(), WriteError>,
    ) -> Result<(), RecordError> {
        if let Some(d) = &mut self.dump {
            if let Err(e) = g(&mut d.writer, v.clone()) {
                self.dump_failed(RecordError::Write(e));
            }
        }
        f(&mut self.writer, v).map_err(RecordError::Write)
    }

    /// Adds a device entry.
    pub fn add_device(&mut self, d: &Device) -> Result<(), RecordError> {
        self.mirror.device(d);
        self.both(d.clone(), |w, v| w.add_device(v), |w, v| w.add_device(v))
    }
    /// Adds a process entry.
    pub fn add_process(&mut self, p: &Process) -> Result<(), RecordError> {
        self.mirror.process(p);
        // A thread that came back is not forgotten when its earlier events leave the ring.
        self.forget_later.1.remove(&p.tid);
        if let Some(n) = self.dump_no() {
            self.dump_tables.wrote_process(p.tid, n);
        }
        self.both(p.clone(), |w, v| w.add_process(v), |w, v| w.add_process(v))
    }
    /// Adds a path entry.
    pub fn add_path(&mut self, p: &PathEntry) -> Result<(), RecordError> {
        self.mirror.path(p);
        if let Some(n) = self.dump_no() {
            self.dump_tables.wrote_path(p.path_id, n);
        }
        self.both(p.clone(), |w, v| w.add_path(v), |w, v| w.add_path(v))
    }
    /// Adds a cgroup entry.
    pub fn add_cgroup(&mut self, c: &Cgroup) -> Result<(), RecordError> {
        self.mirror.cgroup(c);
        self.both(c.clone(), |w, v| w.add_cgroup(v), |w, v| w.add_cgroup(v))
    }
    /// The number of the snapshot being written (from 1: its "part" for `dump_tables`).
    fn dump_no(&self) -> Option<u32> {
        self.dump.as_ref().map(|_| self.dumps)
    }
    /// Forgets path entries and threads no later event will refer to
    /// ([`TableMirror::forget`]) once no event in the ring refers to them either (a ring
    /// longer than `--forget-idle` holds events of files idle since).
    pub fn forget(&mut self, path_ids: &[u32], tids: &[u32]) {
        self.forget_later.0.extend_from_slice(path_ids);
        self.forget_later.1.extend(tids.iter().map(|&t| (t, ())));
        self.forget_unreferenced();
    }

    /// Forgets those of [`Flight::forget_later`]'s entries that no event in the ring refers
    /// to any more.
    fn forget_unreferenced(&mut self) {
        // Every event in the ring has a sequence number above this.
        let oldest = self.ring_seq.front().copied().unwrap_or(self.sealed_events);
        self.refs.settle();
        let refs = &self.refs;
        let (keep, paths): (Vec<u32>, Vec<u32>) = std::mem::take(&mut self.forget_later.0)
            .into_iter()
            .partition(|&id| refs.path_since(id, oldest));
        self.forget_later.0 = keep;
        let mut tids = Vec::new();
        self.forget_later.1.retain(|&t, _| {
            let keep = refs.thread_since(t, oldest);
            if !keep {
                tids.push(t);
            }
            keep
        });
        self.refs.forget(&paths, &tids);
        self.dump_tables.forget(&paths, &tids);
        self.mirror.forget(&paths, &tids);
    }
    /// Adds a loss record (into the ring; it reaches a snapshot with the window).
    pub fn add_loss(&mut self, l: Loss) -> Result<(), RecordError> {
        self.writer.add_loss(l).map_err(RecordError::Write)
    }

    /// Adds an event.
    #[inline]
    pub fn push(&mut self, e: &Event) -> Result<(), RecordError> {
        if e.timestamp_ns > self.newest_ns {
            self.newest_ns = e.timestamp_ns;
        }
        self.refs.note(e);
        if let Some(d) = &mut self.dump {
            // The entries of an event of `--after` that the snapshot does not hold yet, before
            // its segment is appended.
            let n = self.dumps;
            if let Err(err) = self.dump_tables.add_for(e, n, &self.mirror, &mut d.writer) {
                self.dump_failed(RecordError::Write(err));
            }
        }
        self.writer.push(e).map_err(RecordError::Write)?;
        if self.writer.buffered_events() == 0 {
            self.route()?;
            // At full speed the session's loop may not come round for a while: the events'
            // clock ends a snapshot too.
            if self
                .dump
                .as_ref()
                .is_some_and(|d| self.newest_ns >= d.until_mono_ns)
            {
                self.end_dump(self.newest_ns)?;
            }
        }
        Ok(())
    }

    /// Seals what is buffered (once a second) and ends a snapshot whose time is up.
    pub fn flush(&mut self, now_mono_ns: u64) -> Result<(), RecordError> {
        self.writer.flush().map_err(RecordError::Write)?;
        self.route()?;
        if !(self.forget_later.0.is_empty() && self.forget_later.1.is_empty()) {
            self.forget_unreferenced();
        }
        if self
            .dump
            .as_ref()
            .is_some_and(|d| now_mono_ns >= d.until_mono_ns)
        {
            self.end_dump(now_mono_ns)?;
        }
        Ok(())
    }

    /// Ends a snapshot whose `--after` has passed (called on every pass of the session
    /// loop, at least every ~100 ms).
    pub fn tick(&mut self, now_mono_ns: u64) -> Result<(), RecordError> {
        if self
            .dump
            .as_ref()
            .is_some_and(|d| now_mono_ns >= d.until_mono_ns)
        {
            self.flush(now_mono_ns)?;
        }
        Ok(())
    }

    /// Sealed chunks into the ring (and the snapshot being written); the oldest out.
    fn route(&mut self) -> Result<(), RecordError> {
        for c in self.writer.take_sealed() {
            if !matches!(c.kind, ChunkType::Events | ChunkType::Losses) {
                continue;
            }
            if let Some(d) = &mut self.dump {
                if let Err(e) = d.writer.append_sealed(&c) {
                    self.dump_failed(RecordError::Write(e));
                }
            }
            self.ring_bytes += c.bytes.len() as u64;
            self.ring_seq.push_back(self.sealed_events);
            if c.kind == ChunkType::Events {
                self.sealed_events += c.records as u64;
            }
            self.ring.push_back(c);
        }
        self.evict();
        Ok(())
    }

    fn evict(&mut self) {
        let horizon = self.cfg.window_ns.map(|w| self.newest_ns.saturating_sub(w));
        while let Some(front) = self.ring.front() {
            let too_old =
                front.kind == ChunkType::Events && horizon.is_some_and(|h| front.ts_range_ns.1 < h);
            let too_big = self.ring_bytes > self.cfg.window_bytes;
            if !(too_old || too_big) {
                break;
            }
            if too_big && !too_old && self.cfg.window_ns.is_some() && !self.said_size {
                self.said_size = true;
                eprintln!(
                    "iodump: warning: the ring holds less than its window: {} bytes reached \
                     (give --ring a size, e.g. --ring 1G, to keep more)",
                    self.cfg.window_bytes
                );
            }
            self.ring_bytes -= front.bytes.len() as u64;
            self.ring.pop_front();
            self.ring_seq.pop_front();
        }
        // Loss records older than every event kept go too.
        while self
            .ring
            .front()
            .is_some_and(|c| c.kind == ChunkType::Losses)
            && self.ring.len() > 1
        {
            if let Some(c) = self.ring.pop_front() {
                self.ring_bytes -= c.bytes.len() as u64;
                self.ring_seq.pop_front();
            }
        }
    }

    /// True while a snapshot is being written (its `--after` has not passed).
    pub fn busy(&self) -> bool {
        self.dump.is_some()
    }

    /// True when an I/O that matches the trigger (completed at `completed_ns`) fires it
    /// now: with `trigger_count`, it is the last of that many matches within
    /// `trigger_window_ns`; no snapshot is being written, the cooldown has passed and the
    /// snapshots are not used up. The caller evaluated the expression (it has the event's
    /// names at hand).
    pub fn may_fire(&mut self, now_mono_ns: u64, completed_ns: u64) -> bool {
        self.counts.trigger_matches += 1;
        if !self.enough_matches(completed_ns) {
            return false;
        }
        if self.dump.is_some() {
            return false;
        }
        if self
            .last_fire_mono_ns
            .is_some_and(|t| now_mono_ns < t + self.cfg.cooldown_ns)
        {
            return false;
        }
        // Triggered snapshots only: those of SIGUSR1 are not subject to it.
        if let Some(m) = self
            .cfg
            .max_dumps
            .filter(|&m| self.counts.snapshots_triggered >= u64::from(m))
        {
            if !self.said_max {
                self.said_max = true;
                eprintln!("iodump: warning: --max-dumps {m} reached: later triggers save nothing");
            }
            return false;
        }
        true
    }

    /// Notes a match completed at `completed_ns`; true when the last `trigger_count` matches
    /// (this one included) completed within `trigger_window_ns`.
    fn enough_matches(&mut self, completed_ns: u64) -> bool {
        let n = self.cfg.trigger_count as usize;
        if n <= 1 {
            return true;
        }
        if self.matches_ns.len() == n {
            self.matches_ns.pop_front();
        }
        self.matches_ns.push_back(completed_ns);
        self.matches_ns.len() == n
            && self.matches_ns.front().is_some_and(|&first| {
                completed_ns.saturating_sub(first) <= self.cfg.trigger_window_ns
            })
    }

    /// The matches kept (the last `trigger_count`) that completed within `trigger_window_ns`
    /// of the newest event (or match) seen: how close a counted trigger is to firing. The
    /// times are in arrival order, nearly sorted: a binary search.
    fn matches_within_window(&self) -> u64 {
        let now = self
            .newest_ns
            .max(self.matches_ns.back().copied().unwrap_or(0));
        let since = now.saturating_sub(self.cfg.trigger_window_ns);
        (self.matches_ns.len() - self.matches_ns.partition_point(|&t| t < since)) as u64
    }

    /// The trigger as the snapshot's header says it: the expression, and with a count the
    /// matches it took (`latency > 50ms; 100 I/Os within 10s`).
    fn trigger_words(&self) -> String {
        let t = self.cfg.trigger_text.clone().unwrap_or_default();
        if self.cfg.trigger_count <= 1 {
            return t;
        }
        format!(
            "{t}; {} I/Os within {}",
            self.cfg.trigger_count,
            iodump_format::units::format_duration_ns(
                self.cfg.trigger_window_ns as f64,
                iodump_format::units::DurationStyle::Exact
            )
        )
    }

    /// Starts a snapshot: its file (named by the time and `why`), its header (saying why,
    /// and which I/O fired it), every table entry, the ring; it goes on for `--after`.
    pub fn fire(
        &mut self,
        why: Snapshot<'_>,
        now: (i64, u64),
        after_ns: Option<u64>,
    ) -> Result<(), RecordError> {
        // The cooldown is the trigger's: a snapshot of SIGUSR1 does not start it.
        if !matches!(why, Snapshot::Signal) {
            self.last_fire_mono_ns = Some(now.1);
        }
        self.writer.flush().map_err(RecordError::Write)?;
        self.route()?;
        let mut header = self.template.clone();
        header.wall_clock_ns = now.0;
        header.monotonic_ns = now.1;
        let (reason, slug) = match &why {
            Snapshot::Trigger(e) | Snapshot::InFlight(e) => {
                let in_flight = matches!(why, Snapshot::InFlight(_));
                header.metadata.push((
                    META_TRIGGER_IO.into(),
                    format!(
                        "{} {} {} {} {} {}{}",
                        e.timestamp_ns,
                        e.dev,
                        e.sector,
                        e.bytes,
                        e.op.name(),
                        e.latency_ns,
                        if in_flight { " in_flight" } else { "" }
                    ),
                ));
                let t = self.cfg.trigger_text.clone().unwrap_or_default();
                let mut reason = format!("trigger: {}", self.trigger_words());
                if in_flight {
                    reason.push_str("; in flight");
                }
                (reason, slug(&t))
            }
            Snapshot::Signal => ("SIGUSR1".to_string(), "sigusr1".to_string()),
        };
        header.metadata.push((META_SNAPSHOT.into(), reason));
        // Named after the newest snapshot of the directory even when the clock was set back
        // since, so that retention deletes the oldest ([`name_time_after`]).
        let newest = iodump_output::parts::list_named(&self.cfg.dir, is_snapshot_name)
            .unwrap_or_default()
            .iter()
            .filter_map(|(p, _)| snapshot_name_time(&p.file_name()?.to_string_lossy()))
            .max();
        let name_ns = name_time_after(now.0, newest);
        let path = self
            .cfg
            .dir
            .join(snapshot_name(name_ns, &slug, self.dumps + 1));
        let n = self.dumps + 1;
        let (out, writer) = match self.start_dump(&path, &header, n) {
            Ok(d) => d,
            Err(e) => {
                // Nothing of it is left (its file was not given its name); the ring goes on.
                let why = one_line(&e);
                eprintln!(
                    "iodump: warning: snapshot {} not saved: {why}; the ring goes on",
                    path.display()
                );
                self.count_failure(path, why);
                return Ok(());
            }
        };
        eprintln!(
            "iodump: snapshot ({}): writing {}",
            match why {
                Snapshot::Trigger(_) => "trigger",
                Snapshot::InFlight(_) => "trigger, an I/O in flight",
                Snapshot::Signal => "SIGUSR1",
            },
            path.display()
        );
        self.retain_dumps(&path);
        self.dumps += 1;
        match why {
            Snapshot::Trigger(_) | Snapshot::InFlight(_) => self.counts.snapshots_triggered += 1,
            Snapshot::Signal => self.counts.snapshots_signalled += 1,
        }
        self.counts.last_snapshot_wall_ns = now.0;
        self.dump = Some(Dump {
            out,
            writer,
            until_mono_ns: now.1 + after_ns.unwrap_or(self.cfg.after_ns),
        });
        Ok(())
    }

    /// Deletes the directory's oldest snapshot files (of any run; by name, which is by time)
    /// while there are more than `--keep-dumps` or they hold more than `--max-dumps-total`;
    /// never `current`, the one being written. Run when a snapshot starts and when it ends.
    /// A file that cannot be deleted is a warning: the ring goes on.
    fn retain_dumps(&mut self, current: &Path) {
        let (keep, max_bytes) = (self.cfg.keep_dumps, self.cfg.max_dumps_total_bytes);
        if keep.is_none() && max_bytes.is_none() {
            return;
        }
        let files = match iodump_output::parts::list_named(&self.cfg.dir, is_snapshot_name) {
            Ok(f) => f,
            Err(e) => {
                eprintln!(
                    "iodump: warning: {}: cannot list the snapshots: {e}; none deleted",
                    self.cfg.dir.display()
                );
                return;
            }
        };
        let deleted =
            iodump_output::parts::delete_oldest_beyond(files, current, keep, max_bytes, |p, e| {
                eprintln!(
                    "iodump: warning: {}: cannot delete it (snapshot retention): {e}",
                    p.display()
                );
                true
            });
        self.deleted_dumps += u64::from(deleted);
    }

    /// A snapshot's file with its header, the devices and cgroups, the process and path
    /// entries the ring's events refer to, and the ring, given its name; it is snapshot
    /// `n` (for [`PartTables`]).
    fn start_dump(
        &mut self,
        path: &Path,
        header: &Header,
        n: u32,
    ) -> Result<(OutputFile, Writer<File>), RecordError> {
        let mut out = OutputFile::create(path)?;
        let mut writer = Writer::new(out.try_clone_file()?, header, self.opts.clone())
            .map_err(RecordError::Write)?;
        self.mirror
            .write_devices_and_cgroups(&mut writer)
            .map_err(RecordError::Write)?;
        // Every event in the ring has a sequence number from the first chunk's on.
        let oldest = self.ring_seq.front().copied().unwrap_or(self.sealed_events);
        self.refs.settle();
        let mut procs: Vec<&Process> = self
            .mirror
            .processes()
            .filter(|p| self.refs.thread_since(p.tid, oldest))
            .collect();
        procs.sort_unstable_by_key(|p| p.tid);
        for p in procs {
            self.dump_tables.wrote_process(p.tid, n);
            writer.add_process(p.clone()).map_err(RecordError::Write)?;
        }
        let mut paths: Vec<&PathEntry> = self
            .mirror
            .paths()
            .filter(|p| self.refs.path_since(p.path_id, oldest))
            .collect();
        paths.sort_unstable_by_key(|p| p.path_id);
        for p in paths {
            self.dump_tables.wrote_path(p.path_id, n);
            writer.add_path(p.clone()).map_err(RecordError::Write)?;
        }
        for c in &self.ring {
            writer.append_sealed(c).map_err(RecordError::Write)?;
        }
        writer.flush().map_err(RecordError::Write)?;
        out.commit()?;
        Ok((out, writer))
    }

    /// The snapshot being written failed (`e`): it ends there, cut at its last complete
    /// chunk (a trace that did not finish, not a damaged one); a warning says so, and the
    /// ring goes on.
    #[cold]
    fn dump_failed(&mut self, e: RecordError) {
        let Some(d) = self.dump.take() else {
            return;
        };
        let _ = d.writer.cut_at_last_chunk();
        self.cut_short(d.out.path(), &e);
    }

    /// Says that the snapshot at `path` was cut short by `e`, and counts it.
    fn cut_short(&mut self, path: &Path, e: &(dyn std::error::Error + 'static)) {
        let why = one_line(e);
        eprintln!(
            "iodump: warning: snapshot {} cut short: {why}; the ring goes on",
            path.display()
        );
        self.count_failure(path.to_path_buf(), why);
    }

    /// Counts a snapshot not written whole; the first one's file and reason are kept.
    fn count_failure(&mut self, path: PathBuf, why: String) {
        self.failed_dumps += 1;
        self.first_failed_dump.get_or_insert((path, why));
    }

    fn end_dump(&mut self, now_mono_ns: u64) -> Result<(), RecordError> {
        let Some(d) = self.dump.take() else {
            return Ok(());
        };
        let end = EndInfo {
            end_monotonic_ns: now_mono_ns,
            ..EndInfo::default()
        };
        let f = match d.writer.finish_or_cut(end) {
            Ok(f) => f,
            Err((e, _)) => {
                self.cut_short(d.out.path(), &e);
                return Ok(());
            }
        };
        // Now that its size is known.
        self.retain_dumps(d.out.path());
        drop(d.out);
        // On disk without holding up the recorder.
        std::thread::spawn(move || {
            let _ = f.sync_all();
        });
        Ok(())
    }

    /// Ends the snapshot being written, if any (recording stops).
    pub fn finish(&mut self, now_mono_ns: u64) -> Result<(), RecordError> {
        if self.dump.is_some() {
            self.writer.flush().map_err(RecordError::Write)?;
            self.route()?;
        }
        self.end_dump(now_mono_ns)
    }
}

/// Which process and path entries the ring's events refer to: each event pushed gets the
/// next sequence number (from 1), and each entry the number of the last event that referred
/// to it (as its thread, the dirtier of its pages, its file or label). A snapshot then
/// starts with the entries referred to from its oldest event on, not every one the
/// recording has seen.
#[derive(Default)]
struct Refs {
    seq: u64,
    /// Path id → the last event referring to it.
    paths: IdTable<u64>,
    /// Thread id → the last event referring to it, but for `last_thread`'s.
    threads: iodump_format::inthash::IntMap<u32, u64>,
    /// The thread of the previous event and that event's number: noted in `threads` when
    /// another thread's event comes (most events follow one of the same thread).
    last_thread: Option<(u32, u64)>,
}

impl Refs {
    #[inline]
    fn note(&mut self, e: &Event) {
        self.seq += 1;
        let s = self.seq;
        self.paths.set(e.path_id, s);
        match self.last_thread {
            Some((t, _)) if t == e.tid => {}
            Some((t, at)) => {
                self.threads.insert(t, at);
            }
            None => {}
        }
        self.last_thread = Some((e.tid, s));
        if let Some(d) = e.dirtier_pid {
            self.threads.insert(d, s);
        }
    }

    /// Notes the last thread's number in `threads`.
    fn settle(&mut self) {
        if let Some((t, at)) = self.last_thread {
            let x = self.threads.entry(t).or_insert(at);
            *x = (*x).max(at);
        }
    }

    /// True when an event numbered above `after` (a number of sealed events: the events
    /// after them are numbered from `after + 1`) refers to path `path_id`.
    fn path_since(&self, path_id: u32, after: u64) -> bool {
        self.paths.get(path_id) > after
    }

    /// Forgets path ids and threads (no event in the ring refers to them).
    fn forget(&mut self, path_ids: &[u32], tids: &[u32]) {
        for &id in path_ids {
            self.paths.set(id, 0);
        }
        for t in tids {
            self.threads.remove(t);
            if self.last_thread.is_some_and(|(l, _)| l == *t) {
                self.last_thread = None;
            }
        }
    }

    /// [`Refs::path_since`] for thread `tid` (after [`Refs::settle`]).
    fn thread_since(&self, tid: u32, after: u64) -> bool {
        self.threads.get(&tid).is_some_and(|&s| s > after)
    }
}

/// Why a snapshot is written.
pub enum Snapshot<'a> {
    /// This I/O matched the trigger.
    Trigger(&'a Event),
    /// This I/O, still in flight, matched the trigger with the time it has taken so far, and
    /// would whatever longer it takes (its `latency_ns` is that time).
    InFlight(&'a Event),
    /// SIGUSR1.
    Signal,
}

/// `trigger-YYYYmmddTHHMMSS.mmmZ-NNN-SLUG.iod`.
pub fn snapshot_name(wall_ns: i64, slug: &str, n: u32) -> String {
    let part = iodump_output::parts::part_name(wall_ns, 0);
    let when = &part["iodump-".len()..part.len() - "-000000.iod".len()];
    format!("trigger-{when}-{n:03}-{slug}.iod")
}

/// The time in a snapshot's name ([`snapshot_name`]).
pub fn snapshot_name_time(name: &str) -> Option<i64> {
    let when = name.get("trigger-".len().."trigger-".len() + 20)?;
    is_snapshot_name(name).then(|| parse_name_time(when))?
}

/// True for a name [`snapshot_name`] makes (`trigger-`, the UTC time, a number, a slug of
/// letters, digits, `.` and `-`, `.iod`): what snapshot retention may delete.
pub fn is_snapshot_name(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("trigger-")
        .and_then(|r| r.strip_suffix(".iod"))
    else {
        return false;
    };
    // The time as a part's name has it: `YYYYmmddTHHMMSS.mmmZ`.
    let (Some(when), Some(rest)) = (rest.get(..20), rest.get(20..)) else {
        return false;
    };
    if !iodump_output::parts::is_part_name(&format!("iodump-{when}-000000.iod")) {
        return false;
    }
    let Some((n, slug)) = rest.strip_prefix('-').and_then(|r| r.split_once('-')) else {
        return false;
    };
    n.len() >= 3
        && n.bytes().all(|c| c.is_ascii_digit())
        && !slug.is_empty()
        && slug
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-')
}

/// A file-name-safe rendering of a trigger: letters, digits, `.` kept, runs of anything else
/// as one `-`, at most 40 bytes.
fn slug(s: &str) -> String {
    // Operators spelled as words (`>=` is `ge`, not `gt`; `!=` is not dropped), longest first.
    const WORDS: [(&str, &str); 11] = [
        (">=", "ge"),
        ("<=", "le"),
        ("==", "eq"),
        ("!=", "ne"),
        ("=~", "match"),
        ("!~", "nomatch"),
        ("&&", "and"),
        ("||", "or"),
        (">", "gt"),
        ("<", "lt"),
        ("!", "not"),
    ];
    let mut spelled = String::new();
    let mut rest = s;
    'next: while let Some(c) = rest.chars().next() {
        for (op, word) in WORDS {
            if let Some(after) = rest.strip_prefix(op) {
                spelled.push('-');
                spelled.push_str(word);
                spelled.push('-');
                rest = after;
                continue 'next;
            }
        }
        if c.is_ascii_alphanumeric() || c == '.' {
            spelled.push(c);
        } else {
            spelled.push('-');
        }
        rest = &rest[c.len_utf8()..];
    }
    let mut out = String::new();
    for part in spelled.split('-').filter(|p| !p.is_empty()) {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(part);
    }
    out.truncate(40);
    if out.is_empty() {
        out.push_str("trigger");
    }
    out
}

/// True when `p` names a directory (or should: a path ending in `/`).
pub fn is_dir_path(p: &Path) -> bool {
    p.as_os_str().to_string_lossy().ends_with('/') || p.is_dir()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A flight recorder whose segments hold 16 events.
    fn small_segments(cfg: FlightConfig) -> Flight {
        let opts = WriterOptions {
            segment_events: 16,
            ..WriterOptions::default()
        };
        Flight::new(cfg, Header::default(), opts).unwrap()
    }

    /// An empty directory of the temporary directory, named after `name` and this process.
    /// The snapshot files in `dir`, oldest first (as retention lists them).
    fn snapshots_in(dir: &Path) -> Vec<PathBuf> {
        iodump_output::parts::list_named(dir, is_snapshot_name)
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    fn empty_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("iodump-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A ring of up to 1 GiB in `dir`, no window of time, no trigger, no `--after`, no bound
    /// on snapshots.
    fn config(dir: &Path) -> FlightConfig {
        FlightConfig {
            dir: dir.to_path_buf(),
            window_ns: None,
            window_bytes: 1 << 30,
            trigger: None,
            trigger_text: None,
            trigger_count: 1,
            trigger_window_ns: 0,
            after_ns: 0,
            cooldown_ns: 0,
            max_dumps: None,
            keep_dumps: None,
            max_dumps_total_bytes: None,
        }
    }

    /// With a count, the trigger fires on the match that makes N within the window, not
    /// before; matches go on counting during a snapshot and the cooldown; one slow I/O at a
    /// time never fires it.
    #[test]
    fn a_counted_trigger_fires_on_the_nth_match_within_its_window() {
        let dir = empty_dir("flight-count");
        let mut f = Flight::new(
            FlightConfig {
                trigger_text: Some("latency > 50ms".into()),
                trigger_count: 3,
                trigger_window_ns: 100,
                cooldown_ns: 1_000,
                ..config(&dir)
            },
            Header::default(),
            WriterOptions::default(),
        )
        .unwrap();
        // Matches completed at 0, 150, 300, 450: never three within 100 ns.
        let sparse: Vec<bool> = [0, 150, 300, 450].map(|t| f.may_fire(10, t)).to_vec();
        assert_eq!(sparse, [false; 4]);
        // 500, 520: with 450, three within 70 ns, fires on the third.
        assert!(!f.may_fire(10, 500));
        assert!(f.may_fire(10, 520));
        f.last_fire_mono_ns = Some(10);
        // In the cooldown (until 1,010) a burst does not fire; after it, the next match does
        // when the last three are within the window.
        assert!(!f.may_fire(500, 530));
        assert!(!f.may_fire(1_100, 2_000), "530 and 520 are too old");
        assert!(!f.may_fire(1_100, 2_010));
        assert!(f.may_fire(1_100, 2_020));
        assert_eq!(f.stats().trigger_matches, 10);
        // The last three (2,000, 2,010, 2,020) within 100 ns of the newest.
        assert_eq!(f.stats().trigger_window, Some((3, 3)));
        f.newest_ns = 2_115;
        assert_eq!(f.stats().trigger_window, Some((1, 3)), "2,020 only");
        assert_eq!(f.trigger_words(), "latency > 50ms; 3 I/Os within 100ns");
        f.cfg.trigger_count = 1;
        assert_eq!(f.trigger_words(), "latency > 50ms");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn snapshot_names() {
        assert_eq!(slug("latency > 200ms"), "latency-gt-200ms");
        assert_eq!(slug("error != 0"), "error-ne-0");
        assert_eq!(slug("iosize >= 1M"), "iosize-ge-1M");
        assert_eq!(slug("path =~ \"*pg_wal*\""), "path-match-pg-wal");
        assert_eq!(
            slug("!(latency<=1ms) || error==5"),
            "not-latency-le-1ms-or-error-eq-5"
        );
        assert_eq!(
            snapshot_name(1_764_625_920_123_456_789, "sigusr1", 2),
            "trigger-20251201T215200.123Z-002-sigusr1.iod"
        );
        assert_eq!(
            snapshot_name_time("trigger-20251201T215200.123Z-002-sigusr1.iod"),
            Some(1_764_625_920_123_000_000)
        );
        assert_eq!(snapshot_name_time("trigger-.iod"), None);
        // What snapshot retention may delete: the names it makes, nothing else.
        for t in ["latency > 200ms", "", "error != 0 || path =~ \"x\""] {
            let n = snapshot_name(1_764_625_920_123_456_789, &slug(t), 1234);
            assert!(is_snapshot_name(&n), "{n}");
        }
        for not in [
            "trigger-20251201T215200.123Z-002-sigusr1.iod.tmp",
            "trigger-20251201T215200.123Z-002-.iod",
            "trigger-20251201T215200.123Z-02-sigusr1.iod",
            "trigger-20251201T215200.123-002-sigusr1.iod",
            "trigger-2025120XT215200.123Z-002-sigusr1.iod",
            "trigger-20251201T215200.123Z-002-my notes.iod",
            "iodump-20251201T215200.123Z-000002.iod",
            "trigger-.iod",
            "run.iod",
        ] {
            assert!(!is_snapshot_name(not), "{not}");
        }
    }

    /// A snapshot holds the process and path entries its events refer to — those of the
    /// ring's events, then those of `--after`'s, one an old file's — not every entry the
    /// recording has seen; each of its events reads with its thread and file.
    #[test]
    fn a_snapshot_holds_the_entries_its_events_need() {
        use iodump_format::{DevT, Reader};
        let dir = empty_dir("flight-tables");
        let cfg = FlightConfig {
            // The last 100 µs of events: about the last 100 events below.
            window_ns: Some(100_000),
            after_ns: 1_000_000_000,
            ..config(&dir)
        };
        let mut f = small_segments(cfg);
        let dev = DevT::new(8, 0);
        let ev = |ts: u64, tid: u32, path_id: u32, dirtier: Option<u32>| Event {
            timestamp_ns: ts,
            dev,
            bytes: 4096,
            pid: tid,
            tid,
            path_id,
            dirtier_pid: dirtier,
            ..Event::default()
        };
        // 1,000 files, each written once by one of threads 1..=100, 1 µs apart.
        for tid in 1..=101 {
            f.add_process(&Process {
                tid,
                pid: tid,
                comm: format!("t{tid}").into_bytes(),
                cgroup_id: 0,
                args: None,
            })
            .unwrap();
        }
        for id in 1..=1000u32 {
            f.add_path(&PathEntry::file(
                id,
                dev,
                id as u64,
                format!("/f{id}").into_bytes(),
            ))
            .unwrap();
            f.push(&ev(id as u64 * 1000, 1 + id % 100, id, None))
                .unwrap();
        }
        f.fire(
            Snapshot::Signal,
            (1_764_625_920_000_000_000, 1_000_001),
            None,
        )
        .unwrap();
        // --after: file 3 (long out of the ring) written back by thread 101 for thread 7.
        f.push(&ev(1_000_002, 101, 3, Some(7))).unwrap();
        f.finish(2_000_000).unwrap();
        assert_eq!(f.failed_dumps, 0, "{:?}", f.first_failed_dump);
        let r = Reader::open(&snapshots_in(&f.cfg.dir)[0]).unwrap();
        let events: Vec<Event> = r.events().collect();
        assert!(
            (90..=120).contains(&events.len()),
            "{} events in the snapshot",
            events.len()
        );
        let mut want_paths: Vec<u32> = events.iter().map(|e| e.path_id).collect();
        want_paths.sort();
        want_paths.dedup();
        let mut paths: Vec<u32> = r.tables().paths().map(|p| p.path_id).collect();
        paths.sort();
        assert_eq!(paths, want_paths);
        assert!(paths.contains(&3));
        let mut want_tids: Vec<u32> = events
            .iter()
            .flat_map(|e| [Some(e.tid), e.dirtier_pid])
            .flatten()
            .collect();
        want_tids.sort();
        want_tids.dedup();
        let mut tids: Vec<u32> = r.tables().processes().map(|p| p.tid).collect();
        tids.sort();
        assert_eq!(tids, want_tids);
        for e in &events {
            let p = r.tables().path(e.path_id).unwrap();
            assert_eq!(p.path, format!("/f{}", e.path_id).into_bytes());
            assert!(r.comm(e.pid, e.tid, 0).is_some(), "{e:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A ring longer than `--forget-idle`: a file and a thread the recording forgets while
    /// events of theirs are still in the ring are named in a snapshot of those events, and
    /// are forgotten once their events have left the ring (a later snapshot does not hold
    /// them); a thread that comes back meanwhile stays.
    #[test]
    fn entries_forgotten_while_the_ring_holds_their_events_stay_until_they_leave() {
        use iodump_format::{DevT, Reader};
        let dir = empty_dir("flight-forget");
        let cfg = FlightConfig {
            window_ns: Some(1_000_000_000),
            ..config(&dir)
        };
        let mut f = small_segments(cfg);
        let dev = DevT::new(8, 0);
        let process = |tid: u32| Process {
            tid,
            pid: tid,
            comm: format!("t{tid}").into_bytes(),
            cgroup_id: 0,
            args: None,
        };
        let path = |id: u32| PathEntry::file(id, dev, id as u64, format!("/f{id}").into_bytes());
        let ev = |ts: u64, tid: u32, path_id: u32| Event {
            timestamp_ns: ts,
            dev,
            bytes: 4096,
            pid: tid,
            tid,
            path_id,
            ..Event::default()
        };
        let ms = 1_000_000u64;
        for tid in 1..=3 {
            f.add_process(&process(tid)).unwrap();
        }
        for id in 1..=2 {
            f.add_path(&path(id)).unwrap();
        }
        // File 1 by thread 1 and file 2 by thread 3 at the start, then file 2 by thread 2
        // every 10 ms.
        f.push(&ev(ms, 1, 1)).unwrap();
        f.push(&ev(ms + 1, 3, 2)).unwrap();
        let mut t = 10 * ms;
        let go_to = |f: &mut Flight, t: &mut u64, until: u64| {
            while *t < until {
                f.push(&ev(*t, 2, 2)).unwrap();
                *t += 10 * ms;
            }
            f.flush(*t).unwrap();
        };
        go_to(&mut f, &mut t, 500 * ms);
        // Forgotten at 0.5 s: file 1, threads 1 and 3; thread 3 comes back at once.
        f.forget(&[1], &[1, 3]);
        f.add_process(&process(3)).unwrap();
        f.push(&ev(t, 3, 2)).unwrap();
        f.fire(Snapshot::Signal, (1_764_625_920_000_000_000, t), None)
            .unwrap();
        f.flush(t + 1).unwrap();
        // 2 s later the first events have left the ring.
        go_to(&mut f, &mut t, 2_500 * ms);
        f.fire(Snapshot::Signal, (1_764_625_922_000_000_000, t), None)
            .unwrap();
        f.finish(t + 1).unwrap();
        assert_eq!(f.failed_dumps, 0, "{:?}", f.first_failed_dump);
        let dumps = snapshots_in(&f.cfg.dir);
        let names = |r: &Reader| {
            let mut p: Vec<u32> = r.tables().paths().map(|p| p.path_id).collect();
            let mut t: Vec<u32> = r.tables().processes().map(|p| p.tid).collect();
            p.sort();
            t.sort();
            (p, t)
        };
        let first = Reader::open(&dumps[0]).unwrap();
        assert_eq!(first.events().next().map(|e| e.path_id), Some(1));
        assert_eq!(names(&first), (vec![1, 2], vec![1, 2, 3]));
        for e in first.events() {
            assert!(first.tables().path(e.path_id).is_some(), "{e:?}");
        }
        let second = Reader::open(&dumps[1]).unwrap();
        assert_eq!(names(&second), (vec![2], vec![2]));
        assert!(f.mirror.path_entry(1).is_none());
        assert!(f.mirror.process_entry(1).is_none());
        assert!(f.mirror.process_entry(3).is_some());
        assert!(f.forget_later.0.is_empty() && f.forget_later.1.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Snapshot retention deletes the oldest snapshot files of the directory beyond the
    /// count and the size, never the one being written nor any other file.
    #[test]
    fn retention_keeps_the_newest_snapshots() {
        let dir = empty_dir("flight-ret");
        let name = |i: i64| snapshot_name(1_764_625_920_000_000_000 + i * 1_000_000_000, "x", 1);
        // 1,000 bytes that begin as a trace does (retention deletes trace files only).
        let mut snapshot = iodump_format::chunk::signature().to_vec();
        snapshot.resize(1000, 0);
        for i in 0..6 {
            std::fs::write(dir.join(name(i)), &snapshot).unwrap();
        }
        for other in [
            "run.iod",
            "iodump-20251201T215200.123Z-000002.iod",
            "notes.txt",
        ] {
            std::fs::write(dir.join(other), b"keep me").unwrap();
        }
        let cfg = FlightConfig {
            window_bytes: 1 << 20,
            keep_dumps: Some(4),
            ..config(&dir)
        };
        let mut f = Flight::new(cfg, Header::default(), WriterOptions::default()).unwrap();
        // The oldest is being written: kept whatever its age.
        f.retain_dumps(&dir.join(name(0)));
        let left = |d: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        // The snapshots left, and every other file.
        let with_others = |mut v: Vec<String>| {
            v.extend(
                [
                    "iodump-20251201T215200.123Z-000002.iod",
                    "notes.txt",
                    "run.iod",
                ]
                .map(String::from),
            );
            v.sort();
            v
        };
        assert_eq!(
            left(&dir),
            with_others(vec![name(0), name(3), name(4), name(5)])
        );
        assert_eq!(f.deleted_dumps, 2);
        // Within 2,500 bytes: two of 1,000 left, the one being written (the newest) among them.
        f.cfg.keep_dumps = None;
        f.cfg.max_dumps_total_bytes = Some(2_500);
        f.retain_dumps(&dir.join(name(5)));
        assert_eq!(left(&dir), with_others(vec![name(4), name(5)]));
        assert_eq!(f.deleted_dumps, 4);
        // The clock set back an hour: the next snapshot is named after the newest (name 5),
        // and retention keeps it and deletes the oldest.
        f.cfg.keep_dumps = Some(2);
        f.cfg.max_dumps_total_bytes = None;
        f.fire(
            Snapshot::Signal,
            (1_764_625_920_000_000_000 - 3_600_000_000_000, 1),
            None,
        )
        .unwrap();
        f.finish(2).unwrap();
        let new = snapshots_in(&f.cfg.dir)
            .pop()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            snapshot_name_time(&new),
            Some(1_764_625_920_000_000_000 + 5_001_000_000)
        );
        assert_eq!(left(&dir), with_others(vec![name(5), new]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
