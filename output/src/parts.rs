//! A trace written as a sequence of files in a directory (`iodump record -o DIR/ --rotate`):
//! each part a complete trace, created by the output rule ([`OutputFile`]: private, hidden
//! until its header and tables are written), named by its start time in UTC so that names
//! sort in time order (`iodump-20261201T031200.123Z-000001.iod`), and the directory kept
//! within a count and a size (retention deletes the oldest parts, of any recording, never
//! another kind of file).

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use iodump_format::idtable::IdTable;
use iodump_format::recording::{TableMirror, META_PART, META_RECORDING};
use iodump_format::{
    cgroup::Cgroup, Device, EndInfo, Event, Header, Loss, PathEntry, Process, WriteError, Writer,
    WriterOptions,
};

use crate::{OutputError, OutputFile};

/// When to close a part and start the next, and what the directory may hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartsConfig {
    /// The directory (it must exist).
    pub dir: PathBuf,
    /// Close a part once it holds this many bytes.
    pub rotate_bytes: Option<u64>,
    /// Close a part once it is this old (on the recording's monotonic clock).
    pub rotate_ns: Option<u64>,
    /// Keep at most this many part files in the directory (the one being written included).
    pub keep: Option<usize>,
    /// Keep the part files of the directory within this many bytes (the one being written
    /// included; checked at each flush and rotation).
    pub max_total_bytes: Option<u64>,
}

impl PartsConfig {
    /// The size at which a part is closed: `rotate_bytes`, and with `max_total_bytes` at
    /// most a quarter of it (so that older parts fit beside the one being written).
    pub fn part_limit_bytes(&self) -> Option<u64> {
        let by_total = self.max_total_bytes.map(|t| (t / 4).max(1));
        match (self.rotate_bytes, by_total) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Why a part could not be created, written or removed.
#[derive(Debug)]
pub enum PartsError {
    /// Creating, committing or removing a file.
    Output(OutputError),
    /// Writing the trace.
    Write(WriteError),
}

impl std::fmt::Display for PartsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartsError::Output(e) => e.fmt(f),
            PartsError::Write(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for PartsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PartsError::Output(e) => Some(e),
            PartsError::Write(e) => Some(e),
        }
    }
}

impl From<WriteError> for PartsError {
    fn from(e: WriteError) -> Self {
        PartsError::Write(e)
    }
}
impl From<OutputError> for PartsError {
    fn from(e: OutputError) -> Self {
        PartsError::Output(e)
    }
}

/// What the parts hold, all together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PartsStats {
    /// Parts started.
    pub parts: u32,
    /// Events written, every part.
    pub events: u64,
    /// Events lost, every part.
    pub lost_events: u64,
    /// Bytes written, every part (deleted ones included).
    pub bytes_written: u64,
    /// Parts deleted by retention.
    pub deleted: u32,
    /// Times the file system was full and the oldest parts were deleted to go on (only with
    /// a retention bound: [`PartsConfig::keep`] or [`PartsConfig::max_total_bytes`]).
    pub disk_full: u32,
}

/// The file name of a part: `iodump-YYYYmmddTHHMMSS.mmmZ-NNNNNN.iod`.
pub fn part_name(start_wall_ns: i64, part: u32) -> String {
    let secs = start_wall_ns.div_euclid(1_000_000_000);
    let ms = start_wall_ns.rem_euclid(1_000_000_000) / 1_000_000;
    let (y, m, d) = iodump_format::summary::civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "iodump-{y:04}{m:02}{d:02}T{:02}{:02}{:02}.{ms:03}Z-{part:06}.iod",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// The time `YYYYmmddTHHMMSS.mmmZ` (as in part and snapshot names) in ns since the epoch.
pub fn parse_name_time(when: &str) -> Option<i64> {
    let b = when.as_bytes();
    if b.len() != 20 || b[8] != b'T' || b[15] != b'.' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = when.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, sec, ms) = (num(9..11)?, num(11..13)?, num(13..15)?, num(16..19)?);
    if !((1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && sec < 61) {
        return None;
    }
    let days = iodump_format::summary::days_from_civil(y, mo, d);
    Some((((days * 24 + h) * 60 + mi) * 60 + sec) * 1_000_000_000 + ms * 1_000_000)
}

/// The time the name of a new file carries, given the newest such name in its directory:
/// its start time, or 1 ms after that name when the clock reads earlier (it was set back:
/// an NTP step after boot, a clock kept in local time). Names then sort in the order the
/// files were made, which is the order retention deletes them in; the header holds the
/// true clock.
pub fn name_time_after(now_wall_ns: i64, newest_ns: Option<i64>) -> i64 {
    const MS: i64 = 1_000_000;
    match newest_ns {
        Some(n) if now_wall_ns.div_euclid(MS) <= n.div_euclid(MS) => (n.div_euclid(MS) + 1) * MS,
        _ => now_wall_ns,
    }
}

/// The time in a part's name ([`part_name`]).
pub fn part_name_time(name: &str) -> Option<i64> {
    is_part_name(name).then(|| parse_name_time(&name["iodump-".len().."iodump-".len() + 20]))?
}

/// True for a name [`part_name`] makes (the part number in 6 digits or more: part 1,000,000
/// comes after 11.6 days of 1 s parts): what retention may delete.
pub fn is_part_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("iodump-") else {
        return false;
    };
    let Some(rest) = rest.strip_suffix(".iod") else {
        return false;
    };
    let b = rest.as_bytes();
    b.len() >= 27
        && b[8] == b'T'
        && b[15] == b'.'
        && b[19] == b'Z'
        && b[20] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 8 | 15 | 19 | 20) || c.is_ascii_digit())
}

/// A recording written in parts. Every table entry added is kept ([`TableMirror`]); each
/// new part starts, after its header (the template's, with the part's own clock pair, the
/// recording id and the part number), with the devices and cgroups, and holds each process
/// and path entry from just before the first of its events that refers to it
/// ([`PartTables`]): a part holds what its events need and no more, however many files and
/// threads the recording has seen.
pub struct RotatingTrace {
    cfg: PartsConfig,
    template: Header,
    opts: WriterOptions,
    recording: String,
    mirror: TableMirror,
    tables: PartTables,
    part: u32,
    /// The time in the newest part's name ([`name_time_after`]).
    newest_name_ns: i64,
    writer: Option<Writer<File>>,
    current: OutputFile,
    part_start_mono_ns: u64,
    stats: PartsStats,
    syncer: Syncer,
}

impl RotatingTrace {
    /// Creates part 1, starting at `now` (wall-clock and monotonic ns), hidden until
    /// [`commit_first`](RotatingTrace::commit_first).
    pub fn create(
        cfg: PartsConfig,
        template: Header,
        opts: WriterOptions,
        recording: String,
        now: (i64, u64),
    ) -> Result<RotatingTrace, PartsError> {
        crate::check_dir(&cfg.dir)?;
        if !cfg.dir.exists() {
            std::fs::create_dir_all(&cfg.dir).map_err(|source| OutputError::Io {
                path: cfg.dir.clone(),
                what: "cannot create the directory".into(),
                source,
            })?;
        }
        let mirror = TableMirror::default();
        // The newest part name in the directory (of an earlier run too): names go on after it.
        let newest = list_parts(&cfg.dir)
            .unwrap_or_default()
            .iter()
            .filter_map(|(p, _)| part_name_time(&p.file_name()?.to_string_lossy()))
            .max();
        let name_ns = name_time_after(now.0, newest);
        let (current, writer) = open_part(
            &cfg.dir, &template, &opts, &recording, 1, now, name_ns, &mirror,
        )?;
        Ok(RotatingTrace {
            cfg,
            template,
            opts,
            recording,
            mirror,
            tables: PartTables::default(),
            part: 1,
            newest_name_ns: name_ns,
            writer: Some(writer),
            current,
            part_start_mono_ns: now.1,
            stats: PartsStats {
                parts: 1,
                ..PartsStats::default()
            },
            syncer: Syncer::start(),
        })
    }

    /// Gives part 1 its name (recording has started) and applies retention.
    pub fn commit_first(&mut self) -> Result<(), PartsError> {
        self.writer_mut()?.flush()?;
        self.current.commit()?;
        self.retain()
    }

    /// The recording id.
    pub fn recording(&self) -> &str {
        &self.recording
    }

    /// The path of the part being written.
    pub fn current_path(&self) -> &Path {
        self.current.path()
    }

    /// What has been written, every part.
    pub fn stats(&self) -> PartsStats {
        let mut s = self.stats;
        if let Some(w) = &self.writer {
            let ws = w.stats();
            s.events += ws.events;
            s.lost_events += ws.lost_events;
            s.bytes_written += ws.bytes_written;
        }
        s
    }

    fn writer_mut(&mut self) -> Result<&mut Writer<File>, PartsError> {
        self.writer.as_mut().ok_or_else(|| {
            PartsError::Write(WriteError::Invalid {
                what: "the part was not reopened after a failed rotation".into(),
            })
        })
    }

    /// Adds a device entry.
    pub fn add_device(&mut self, d: Device) -> Result<(), PartsError> {
        self.mirror.device(&d);
        let r = self.writer_mut()?.add_device(d);
        self.go_on_if(r)
    }
    /// Adds a process entry (a new thread, or one with a new name).
    pub fn add_process(&mut self, p: Process) -> Result<(), PartsError> {
        self.mirror.process(&p);
        self.tables.wrote_process(p.tid, self.part);
        let r = self.writer_mut()?.add_process(p);
        self.go_on_if(r)
    }
    /// Adds a path entry.
    pub fn add_path(&mut self, p: PathEntry) -> Result<(), PartsError> {
        self.mirror.path(&p);
        self.tables.wrote_path(p.path_id, self.part);
        let r = self.writer_mut()?.add_path(p);
        self.go_on_if(r)
    }
    /// Adds a cgroup entry.
    pub fn add_cgroup(&mut self, c: Cgroup) -> Result<(), PartsError> {
        self.mirror.cgroup(&c);
        let r = self.writer_mut()?.add_cgroup(c);
        self.go_on_if(r)
    }
    /// Forgets path entries and threads no later event will refer to
    /// ([`TableMirror::forget`]): later parts do not hold them.
    pub fn forget(&mut self, path_ids: &[u32], tids: &[u32]) {
        self.mirror.forget(path_ids, tids);
        self.tables.forget(path_ids, tids);
    }
    /// Adds a loss record (to the part being written).
    pub fn add_loss(&mut self, l: Loss) -> Result<(), PartsError> {
        let r = self.writer_mut()?.add_loss(l);
        self.go_on_if(r)
    }

    /// After adding a table entry or a loss record, which writes the entries buffered so far
    /// once they fill their share of the writer's memory: a full file system there goes on
    /// as anywhere else ([`RotatingTrace::go_on_after`]). The entry is in the mirror (or the
    /// loss among the unwritten ones), so the next part holds it where its events need it.
    fn go_on_if(&mut self, r: Result<(), WriteError>) -> Result<(), PartsError> {
        match r {
            Ok(()) => Ok(()),
            Err(err) => self.go_on_after(err.into()),
        }
    }

    /// Adds an event to the part being written ([`due`](RotatingTrace::due) says when to
    /// start the next).
    #[inline]
    pub fn push(&mut self, e: &Event) -> Result<(), PartsError> {
        let Some(w) = self.writer.as_mut() else {
            return Err(self.writer_mut().err().expect("no writer"));
        };
        if let Err(err) = self.tables.add_for(e, self.part, &self.mirror, w) {
            // The file system filled while the event's entries were written: the next part
            // (once there is room) holds them and the event. Each time round deletes a part
            // at least, so this ends.
            self.go_on_after(err.into())?;
            return self.push(e);
        }
        if let Err(err) = w.push(e) {
            return self.go_on_after(err.into());
        }
        let w = self.writer_mut()?;
        if w.buffered_events() == 0 && self.cfg.max_total_bytes.is_some() {
            // A segment was just written: the directory may have grown past its bound.
            self.retain()?;
        }
        Ok(())
    }

    /// Writes what is buffered (once a second), keeps the directory within its bounds, and
    /// every few seconds has the part synced to disk (in the background).
    pub fn flush(&mut self) -> Result<(), PartsError> {
        if let Err(err) = self.writer_mut()?.flush() {
            return self.go_on_after(err.into());
        }
        if self.syncer.due() {
            if let Ok(f) = self.current.try_clone_file() {
                self.syncer.sync(f);
            }
        }
        self.retain()
    }

    /// True when the part being written is due to be closed at monotonic time `now_mono_ns`.
    pub fn due(&self, now_mono_ns: u64) -> bool {
        let Some(w) = &self.writer else {
            return false;
        };
        let by_size = self
            .cfg
            .part_limit_bytes()
            .is_some_and(|b| w.stats().bytes_written >= b);
        let by_age = self
            .cfg
            .rotate_ns
            .is_some_and(|d| now_mono_ns.saturating_sub(self.part_start_mono_ns) >= d);
        by_size || by_age
    }

    /// Creates part `self.part`, starting at `now` ([`open_part`]).
    fn open_next(&mut self, now: (i64, u64)) -> Result<(OutputFile, Writer<File>), PartsError> {
        self.newest_name_ns = name_time_after(now.0, Some(self.newest_name_ns));
        open_part(
            &self.cfg.dir,
            &self.template,
            &self.opts,
            &self.recording,
            self.part,
            now,
            self.newest_name_ns,
            &self.mirror,
        )
    }

    /// Closes the part being written (everything buffered goes into it; then its end and
    /// footer) and starts the next at `now`. `end` says when and how the part ended.
    pub fn rotate(&mut self, end: EndInfo, now: (i64, u64)) -> Result<(), PartsError> {
        // What is buffered goes into this part first; a full file system there starts the
        // next part as anywhere else ([`RotatingTrace::go_on_after`]).
        if let Err(err) = self.writer_mut()?.flush() {
            return self.go_on_after(err.into());
        }
        let closed = self.current.path().to_path_buf();
        if let Err(e) = self.close_current(end) {
            // Only its end and footer are missing (the part is cut before them).
            if !(self.bounded() && is_disk_full(&e)) {
                return Err(e);
            }
        }
        self.part += 1;
        self.start_next(now, &closed, &[], &[], None)?;
        self.retain()
    }

    /// True when the directory has a retention bound: its old parts are there to be deleted.
    fn bounded(&self) -> bool {
        self.cfg.keep.is_some() || self.cfg.max_total_bytes.is_some()
    }

    /// Starts part `self.part` at `now` with `losses` and `events` (what a failed write
    /// held) in it, committed only once they are written; when the file system is full and
    /// the directory has a retention bound, deletes the oldest parts but `keep` one at a time
    /// until it fits (counted in [`PartsStats::disk_full`]). `full` is the error that made
    /// room necessary already, returned when no part is left to delete.
    fn start_next(
        &mut self,
        now: (i64, u64),
        keep: &Path,
        losses: &[Loss],
        events: &[Event],
        mut full: Option<PartsError>,
    ) -> Result<(), PartsError> {
        let mut made_room = false;
        loop {
            if let Some(err) = full.take() {
                if !self.delete_oldest(keep)? {
                    return Err(err);
                }
                made_room = true;
            }
            let part = self.part;
            let opened = self.open_next(now);
            let (mirror, tables) = (&self.mirror, &mut self.tables);
            let next = opened.and_then(|(mut current, mut writer)| {
                for l in losses {
                    writer.add_loss(*l)?;
                }
                for e in events {
                    tables.add_for(e, part, mirror, &mut writer)?;
                }
                writer.extend_buffered(events);
                writer.flush()?;
                current.commit()?;
                Ok((current, writer))
            });
            match next {
                Ok((current, writer)) => {
                    self.current = current;
                    self.writer = Some(writer);
                    self.part_start_mono_ns = now.1;
                    self.stats.parts += 1;
                    self.stats.disk_full += u32::from(made_room);
                    return Ok(());
                }
                Err(e) if self.bounded() && is_disk_full(&e) => {
                    // The entries added for the events are not in any file: the next
                    // attempt adds them again.
                    self.tables.unmark(part);
                    full = Some(e)
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn close_current(&mut self, end: EndInfo) -> Result<(), PartsError> {
        let Some(w) = self.writer.take() else {
            return Ok(());
        };
        let ws = w.stats();
        self.stats.events += ws.events;
        self.stats.lost_events += ws.lost_events;
        // After a failed write (a full file system) the part is cut at its last complete
        // chunk.
        match w.finish_or_cut(end) {
            Ok(f) => {
                self.stats.bytes_written += f.metadata().map(|m| m.len()).unwrap_or(0);
                self.syncer.sync(f);
                Ok(())
            }
            Err((e, kept_bytes)) => {
                self.stats.bytes_written += kept_bytes;
                Err(e.into())
            }
        }
    }

    /// Closes the last part and waits for every part to be on disk.
    pub fn finish(mut self, end: EndInfo) -> Result<PartsStats, PartsError> {
        // What is buffered goes in first, a full file system there going on as anywhere
        // else; then the end and footer, which a full file system leaves out as at a
        // rotation (the last part then reads as one without an end, nothing lost).
        let flushed = match self.writer_mut().and_then(|w| Ok(w.flush()?)) {
            Err(err) => self.go_on_after(err),
            Ok(()) => Ok(()),
        };
        // Closed also when that failed (a full file system without a retention bound): the
        // part is then cut at its last complete chunk, readable as one without an end.
        let closed = match self.close_current(end) {
            Err(e) if self.bounded() && is_disk_full(&e) => Ok(()),
            r => r,
        };
        let r = flushed.and(closed);
        self.syncer.stop();
        r?;
        self.retain()?;
        Ok(self.stats)
    }

    /// After `err` writing the part: when it is the file system being full and the directory
    /// has a retention bound (its old parts are there to be deleted), the part is cut at its
    /// last complete chunk (a part without an end, read as such), and the oldest parts are
    /// deleted until the next part can be started with what the failed write held (the
    /// segment and loss records that found no room): nothing is lost, the recording goes on.
    /// Otherwise, and when no older part is left to delete, `err`.
    #[cold]
    fn go_on_after(&mut self, err: PartsError) -> Result<(), PartsError> {
        if !self.bounded() || !is_disk_full(&err) {
            return Err(err);
        }
        let Some(mut w) = self.writer.take() else {
            return Err(err);
        };
        let pending = w.take_buffered();
        let unwritten: Vec<Loss> = w.unwritten_losses().to_vec();
        let ws = w.stats();
        let cut = w.cut_at_last_chunk();
        drop(w);
        cut.map_err(|source| {
            PartsError::Output(OutputError::Io {
                path: self.current.path().to_path_buf(),
                what: "cannot cut the part at its last complete chunk".into(),
                source,
            })
        })?;
        let unwritten_lost: u64 = unwritten.iter().map(|l| l.count).sum();
        self.stats.events += ws.events;
        self.stats.lost_events += ws.lost_events - unwritten_lost;
        self.stats.bytes_written += ws.bytes_written;
        let cut = self.current.path().to_path_buf();
        self.part += 1;
        self.start_next(now_pair(), &cut, &unwritten, &pending, Some(err))
    }

    /// Deletes the oldest part file of the directory but `keep_path` (the part just cut) and
    /// the one being written; false when there is none.
    fn delete_oldest(&mut self, keep_path: &Path) -> Result<bool, PartsError> {
        let parts = list_parts(&self.cfg.dir).map_err(|e| {
            PartsError::Output(OutputError::Io {
                path: self.cfg.dir.clone(),
                what: "cannot list the directory".into(),
                source: e,
            })
        })?;
        let mut deletable = parts
            .into_iter()
            .filter(|(p, _)| p != keep_path)
            .filter(|(p, _)| matches!(candidate(p), Ok(Candidate::Delete)));
        let Some((p, _)) = deletable.next() else {
            return Ok(false);
        };
        match std::fs::remove_file(&p) {
            Ok(()) => {
                self.stats.deleted += 1;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
            Err(e) => Err(PartsError::Output(OutputError::Io {
                path: p,
                what: "cannot delete it (retention)".into(),
                source: e,
            })),
        }
    }

    /// Deletes the oldest part files of the directory (by name: by start time) while there are
    /// more than `keep` or they hold more than `max_total_bytes`; never the part being written.
    fn retain(&mut self) -> Result<(), PartsError> {
        if self.cfg.keep.is_none() && self.cfg.max_total_bytes.is_none() {
            return Ok(());
        }
        let current = self.current.path().to_path_buf();
        let parts = list_parts(&self.cfg.dir).map_err(|e| {
            PartsError::Output(OutputError::Io {
                path: self.cfg.dir.clone(),
                what: "cannot list the directory".into(),
                source: e,
            })
        })?;
        let mut failed = None;
        self.stats.deleted += delete_oldest_beyond(
            parts,
            &current,
            self.cfg.keep,
            self.cfg.max_total_bytes,
            |p, e| {
                failed = Some((p.to_path_buf(), e));
                false
            },
        );
        match failed {
            Some((path, source)) => Err(PartsError::Output(OutputError::Io {
                path,
                what: "cannot delete it (retention)".into(),
                source,
            })),
            None => Ok(()),
        }
    }
}

/// True when `e` comes from the file system being full (or a quota reached).
fn is_disk_full(e: &PartsError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
            ) {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

/// Wall-clock and monotonic ns (`CLOCK_REALTIME`, `CLOCK_MONOTONIC`), read together: a
/// trace's header ties the two.
pub fn now_pair() -> (i64, u64) {
    let mut rt = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut mono = rt;
    // SAFETY: clock_gettime only writes the timespecs we pass, which live on our stack.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut mono);
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut rt);
    }
    (
        rt.tv_sec * 1_000_000_000 + rt.tv_nsec,
        mono.tv_sec as u64 * 1_000_000_000 + mono.tv_nsec as u64,
    )
}

/// The part files of `dir` (regular files only, links are not followed) with their sizes,
/// oldest first.
pub fn list_parts(dir: &Path) -> std::io::Result<Vec<(PathBuf, u64)>> {
    list_named(dir, is_part_name)
}

/// What retention may do with a file named like its own ([`candidate`]).
#[derive(Debug, PartialEq, Eq)]
enum Candidate {
    /// A trace file of this user that nothing writes: delete it.
    Delete,
    /// A trace file being written (another recorder in the same directory): leave it.
    Busy,
    /// Not a trace file (a person's file named like a part): not one of retention's files.
    NotATrace,
}

/// Whether retention may delete `p`, a regular file of this user named like one of its own
/// ([`list_named`]): only when it begins as a trace does (the trace signature, or as much of
/// it as the file holds: a part cut as it was made) and no process holds it open for writing
/// (every file iodump writes is locked while open: [`crate::OutputFile::create`]) — never a
/// person's file that happens to be named like a part, nor the part or snapshot another
/// recorder sharing the directory is writing.
fn candidate(p: &Path) -> std::io::Result<Candidate> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(p)?;
    let signature = iodump_format::chunk::signature();
    let mut head = Vec::with_capacity(signature.len());
    (&f).take(signature.len() as u64).read_to_end(&mut head)?;
    if head[..] != signature[..head.len()] {
        return Ok(Candidate::NotATrace);
    }
    // SAFETY: flock only takes the open descriptor `f` owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
    {
        return Ok(Candidate::Busy);
    }
    Ok(Candidate::Delete)
}

/// Deletes the oldest of `files` (oldest first, with their sizes: [`list_named`]) but
/// `current` while there are more than `keep` or they hold more than `max_bytes`; a file
/// already gone counts as deleted, one that is not a trace as not there, one being written
/// (by another recorder: it holds the file's lock) is left. A file that cannot be deleted is
/// handed to `failed`, which says whether to go on. Returns how many were deleted.
pub fn delete_oldest_beyond(
    files: Vec<(PathBuf, u64)>,
    current: &Path,
    keep: Option<usize>,
    max_bytes: Option<u64>,
    mut failed: impl FnMut(&Path, std::io::Error) -> bool,
) -> u32 {
    let mut total: u64 = files.iter().map(|(_, len)| len).sum();
    let mut count = files.len();
    let mut deleted = 0;
    for (p, len) in files.into_iter().filter(|(p, _)| p != current) {
        let over_count = keep.is_some_and(|k| count > k);
        let over_size = max_bytes.is_some_and(|m| total > m);
        if !(over_count || over_size) {
            break;
        }
        match candidate(&p) {
            Ok(Candidate::Delete) => {}
            Ok(Candidate::Busy) => continue,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                if failed(&p, e) {
                    continue;
                }
                break;
            }
            // Not one of retention's files, or gone: not there.
            Ok(Candidate::NotATrace) | Err(_) => {
                total -= len;
                count -= 1;
                continue;
            }
        }
        match std::fs::remove_file(&p) {
            Ok(()) => deleted += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                if failed(&p, e) {
                    continue;
                }
                break;
            }
        }
        total -= len;
        count -= 1;
    }
    deleted
}

/// The regular files of `dir` of the user running iodump whose names `is_name` accepts
/// (links are not followed; another user's file is never retention's), with their sizes,
/// sorted by name: by time, for names that start with their UTC start time.
pub fn list_named(dir: &Path, is_name: fn(&str) -> bool) -> std::io::Result<Vec<(PathBuf, u64)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        if !is_name(&name.to_string_lossy()) {
            continue;
        }
        // A file deleted or moved away meanwhile (a person cleaning up, a shipper taking
        // closed parts) is not there: not an error.
        let meta = match std::fs::symlink_metadata(e.path()) {
            Ok(m) => m,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        // SAFETY: geteuid takes nothing and cannot fail.
        if meta.is_file() && meta.uid() == unsafe { libc::geteuid() } {
            v.push((e.path(), meta.len()));
        }
    }
    v.sort();
    Ok(v)
}

/// Which process and path entries the part being written holds (or a flight recorder's
/// snapshot): each is added to a part before the first of its events that refers to it (its
/// thread, the dirtier of its pages, its file or label), once per part. Parts are numbered
/// from 1.
#[derive(Default)]
pub struct PartTables {
    /// Path id → the part it was last added to (0: none). Path ids are dense from 1.
    paths: IdTable<u32>,
    /// Thread id → the part its entry was last added to.
    threads: iodump_format::inthash::IntMap<u32, u32>,
    /// The thread of the previous event and its part: most events follow one of the same
    /// thread.
    last_thread: (u32, u32),
}

impl PartTables {
    /// Notes that part `part` holds the entry of `path_id`.
    pub fn wrote_path(&mut self, path_id: u32, part: u32) {
        self.paths.set(path_id, part);
    }

    /// Forgets path entries and threads no later event will refer to (a thread that comes
    /// back is added again).
    pub fn forget(&mut self, path_ids: &[u32], tids: &[u32]) {
        for &id in path_ids {
            self.paths.set(id, 0);
        }
        for t in tids {
            self.threads.remove(t);
        }
        self.last_thread = (0, 0);
    }

    /// Notes that part `part` holds the entry of thread `tid`.
    pub fn wrote_process(&mut self, tid: u32, part: u32) {
        self.threads.insert(tid, part);
    }

    /// Forgets that part `part` holds any entry: its file was not written after all (a
    /// full file system), and the next attempt at it must add them again.
    pub fn unmark(&mut self, part: u32) {
        self.paths.retain(|_, p| p != part);
        self.threads.retain(|_, p| *p != part);
        self.last_thread = (0, 0);
    }

    /// Adds to `w` (part `part`) the entries of `e` that the part does not hold yet.
    #[inline]
    pub fn add_for(
        &mut self,
        e: &Event,
        part: u32,
        mirror: &TableMirror,
        w: &mut Writer<File>,
    ) -> Result<(), WriteError> {
        if e.path_id != 0 && self.paths.get(e.path_id) != part {
            self.wrote_path(e.path_id, part);
            if let Some(p) = mirror.path_entry(e.path_id) {
                w.add_path(p.clone())?;
            }
        }
        if self.last_thread != (e.tid, part) {
            self.thread(e.tid, part, mirror, w)?;
            self.last_thread = (e.tid, part);
        }
        if let Some(d) = e.dirtier_pid {
            self.thread(d, part, mirror, w)?;
        }
        Ok(())
    }

    fn thread(
        &mut self,
        tid: u32,
        part: u32,
        mirror: &TableMirror,
        w: &mut Writer<File>,
    ) -> Result<(), WriteError> {
        if self.threads.insert(tid, part) != Some(part) {
            if let Some(p) = mirror.process_entry(tid) {
                w.add_process(p.clone())?;
            }
        }
        Ok(())
    }
}

/// Creates part `part`: its file (hidden, named with `name_ns`: [`name_time_after`]), its
/// header (with the clock pair `now`), the mirror's devices and cgroups (not flushed).
#[allow(clippy::too_many_arguments)]
fn open_part(
    dir: &Path,
    template: &Header,
    opts: &WriterOptions,
    recording: &str,
    part: u32,
    now: (i64, u64),
    name_ns: i64,
    mirror: &TableMirror,
) -> Result<(OutputFile, Writer<File>), PartsError> {
    let mut header = template.clone();
    header.wall_clock_ns = now.0;
    header.monotonic_ns = now.1;
    header
        .metadata
        .retain(|(k, _)| k != META_RECORDING && k != META_PART);
    header
        .metadata
        .push((META_RECORDING.into(), recording.to_string()));
    header.metadata.push((META_PART.into(), part.to_string()));
    let out = OutputFile::create(&dir.join(part_name(name_ns, part)))?;
    let mut w = Writer::new(out.try_clone_file()?, &header, opts.clone())?;
    mirror.write_devices_and_cgroups(&mut w)?;
    Ok((out, w))
}

/// Syncs closed parts (and, every few seconds, the part being written) on a thread of its
/// own, so that the recorder never waits for the disk.
struct Syncer {
    tx: Option<mpsc::Sender<File>>,
    thread: Option<std::thread::JoinHandle<()>>,
    last: Instant,
}

/// How often the part being written is synced.
const SYNC_EVERY: Duration = Duration::from_secs(5);

impl Syncer {
    fn start() -> Syncer {
        let (tx, rx) = mpsc::channel::<File>();
        let thread = std::thread::Builder::new()
            .name("iodump-sync".into())
            .spawn(move || {
                for f in rx {
                    let _ = f.sync_all();
                }
            })
            .ok();
        Syncer {
            tx: Some(tx),
            thread,
            last: Instant::now(),
        }
    }
    fn due(&self) -> bool {
        self.last.elapsed() >= SYNC_EVERY
    }
    fn sync(&mut self, f: File) {
        self.last = Instant::now();
        match (&self.tx, &self.thread) {
            (Some(tx), Some(_)) => {
                let _ = tx.send(f);
            }
            _ => {
                let _ = f.sync_all();
            }
        }
    }
    fn stop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty directory of the temporary directory, named after `name` and this process.
    fn empty_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("iodump-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A part holds the process and path entries its own events refer to (their thread, the
    /// dirtier of their pages, their file), however many the recording has seen, so that
    /// each part reads alone; one with no event holds none.
    #[test]
    fn a_part_holds_the_entries_its_events_need() {
        use iodump_format::{DevT, Reader};
        let dir = empty_dir("parts-tables");
        let cfg = PartsConfig {
            dir: dir.clone(),
            ..PartsConfig::default()
        };
        let mut t = started(cfg);
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
        // Part 1: 1,000 files and 10 threads, each with an event.
        for tid in 1..=10 {
            t.add_process(Process {
                tid,
                pid: tid,
                comm: format!("t{tid}").into_bytes(),
                cgroup_id: 0,
                args: None,
            })
            .unwrap();
        }
        for id in 1..=1000u32 {
            t.add_path(PathEntry::file(
                id,
                dev,
                id as u64,
                format!("/f{id}").into_bytes(),
            ))
            .unwrap();
            t.push(&ev(id as u64 * 1000, 1 + id % 10, id, None))
                .unwrap();
        }
        let second = |t: &mut RotatingTrace, at: u64| {
            t.rotate(
                EndInfo::default(),
                (1_764_625_930_000_000_000 + at as i64, at),
            )
            .unwrap();
            t.current_path().to_path_buf()
        };
        // Part 2: no event. Part 3: file 7 written by thread 3, then file 9 written back by
        // thread 4 for thread 5's pages.
        let empty = second(&mut t, 2_000_000);
        let third = second(&mut t, 3_000_000);
        t.push(&ev(3_000_001, 3, 7, None)).unwrap();
        t.push(&ev(3_000_002, 4, 9, Some(5))).unwrap();
        t.finish(EndInfo::default()).unwrap();
        let r = Reader::open(&empty).unwrap();
        assert_eq!(
            (r.tables().paths().count(), r.tables().processes().count()),
            (0, 0)
        );
        let r = Reader::open(&third).unwrap();
        let mut paths: Vec<u32> = r.tables().paths().map(|p| p.path_id).collect();
        paths.sort();
        assert_eq!(paths, [7, 9]);
        let mut tids: Vec<u32> = r.tables().processes().map(|p| p.tid).collect();
        tids.sort();
        assert_eq!(tids, [3, 4, 5]);
        let events: Vec<Event> = r.events().collect();
        assert_eq!(events.len(), 2);
        assert_eq!(r.tables().path(events[0].path_id).unwrap().path, b"/f7");
        assert_eq!(r.comm(events[1].pid, events[1].tid, 0), Some(&b"t4"[..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A small tmpfs on `dir` (root only), unmounted when dropped; None (the test skipped)
    /// when it cannot be mounted and root is not required (`IODUMP_REQUIRE_BPF=1`: CI runs
    /// as root).
    struct SmallFs(PathBuf);
    impl SmallFs {
        fn mount(dir: &Path, size: &str) -> Option<SmallFs> {
            std::fs::create_dir_all(dir).unwrap();
            let ok = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(dir)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                assert!(
                    std::env::var("IODUMP_REQUIRE_BPF").as_deref() != Ok("1"),
                    "cannot mount a tmpfs on {} (root needed)",
                    dir.display()
                );
                eprintln!("skipped: cannot mount a tmpfs (root needed)");
                return None;
            }
            Some(SmallFs(dir.to_path_buf()))
        }
    }
    impl Drop for SmallFs {
        fn drop(&mut self) {
            // Lazily: a file still open (a failed assertion's reader) must not leave the
            // mount behind.
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// The file system fills up while table entries are written (a burst of new files whose
    /// paths fill the writer's table buffer, not a segment): with a retention bound the
    /// oldest parts are deleted and the recording goes on, as when a segment finds no room;
    /// every part left reads whole, and each of its events finds its path.
    #[test]
    fn a_full_file_system_while_writing_table_entries_costs_old_parts() {
        use iodump_format::{DevT, Reader};
        let base = std::env::temp_dir().join(format!("iodump-parts-full-{}", std::process::id()));
        let Some(fs) = SmallFs::mount(&base, "1M") else {
            return;
        };
        let cfg = PartsConfig {
            dir: fs.0.join("rec"),
            rotate_bytes: Some(192 << 10),
            max_total_bytes: Some(1 << 30),
            ..PartsConfig::default()
        };
        let opts = WriterOptions {
            memory_limit_bytes: 4 << 20,
            ..WriterOptions::default()
        };
        let mut t = RotatingTrace::create(
            cfg,
            Header::default(),
            opts,
            "rec".into(),
            (1_764_625_920_000_000_000, 1_000),
        )
        .unwrap();
        t.commit_first().unwrap();
        let dev = DevT::new(8, 0);
        // Names that do not compress: 1,000 bytes of a pseudo-random walk over hex digits.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut name = |id: u32| {
            let mut v = format!("/data/{id}/").into_bytes();
            while v.len() < 1000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.push(b"0123456789abcdef"[(x & 15) as usize]);
            }
            v
        };
        let mut mono = 1_000u64;
        for id in 1..=6_000u32 {
            t.add_path(PathEntry::file(id, dev, id as u64, name(id)))
                .unwrap_or_else(|e| panic!("adding path {id}: {e}"));
            mono += 1_000;
            t.push(&Event {
                timestamp_ns: mono,
                dev,
                bytes: 4096,
                pid: 1,
                tid: 1,
                path_id: id,
                ..Event::default()
            })
            .unwrap_or_else(|e| panic!("event {id}: {e}"));
            if t.due(mono) {
                t.rotate(
                    EndInfo::default(),
                    (1_764_625_920_000_000_000 + mono as i64, mono),
                )
                .unwrap_or_else(|e| panic!("rotating after {id}: {e}"));
            }
        }
        let stats = t.finish(EndInfo::default()).unwrap();
        assert!(
            stats.disk_full >= 1,
            "the file system never filled: {stats:?}"
        );
        assert!(stats.deleted >= 1, "{stats:?}");
        let files = list_parts(&fs.0.join("rec")).unwrap();
        assert!(files.len() >= 2, "{files:?}");
        let mut events = 0;
        for (f, _) in &files {
            let r = Reader::open(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert!(r.validate().is_empty(), "{} damaged", f.display());
            for e in r.events() {
                let p = r.tables().path(e.path_id);
                let prefix = format!("/data/{}/", e.path_id);
                assert!(
                    p.is_some_and(|p| p.path.starts_with(prefix.as_bytes())),
                    "{}: the event of path {} finds no path",
                    f.display(),
                    e.path_id
                );
                events += 1;
            }
        }
        // The last part holds the last event.
        assert!(events >= 1);
        let last = Reader::open(&files.last().unwrap().0).unwrap();
        assert_eq!(last.events().last().map(|e| e.path_id), Some(6_000));
        drop(last);
        let mount = fs.0.clone();
        drop(fs);
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
        assert!(
            !mounts.contains(&*mount.to_string_lossy()),
            "{} still mounted",
            mount.display()
        );
    }

    /// A recording in parts of `cfg`, its first part committed.
    fn started(cfg: PartsConfig) -> RotatingTrace {
        let mut t = RotatingTrace::create(
            cfg,
            Header::default(),
            WriterOptions::default(),
            "rec".into(),
            (1_764_625_920_000_000_000, 1_000),
        )
        .unwrap();
        t.commit_first().unwrap();
        t
    }

    /// The file system fills up with no retention bound: the recording stops with the error,
    /// and the part being written is cut at its last complete chunk (it read as damaged:
    /// a chunk cut short), as `-o FILE` is.
    #[test]
    fn a_full_file_system_without_retention_leaves_the_part_whole() {
        use iodump_format::{DevT, Reader};
        let base =
            std::env::temp_dir().join(format!("iodump-parts-full-nb-{}", std::process::id()));
        let Some(fs) = SmallFs::mount(&base, "512K") else {
            return;
        };
        let cfg = PartsConfig {
            dir: fs.0.join("rec"),
            rotate_ns: Some(3_600_000_000_000),
            ..PartsConfig::default()
        };
        let mut t = started(cfg);
        let dev = DevT::new(8, 0);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut failed = None;
        for i in 1..=2_000_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let e = Event {
                timestamp_ns: i * 1_000 + (x & 0xff),
                dev,
                sector: x >> 20,
                bytes: 4096 << (x & 3),
                latency_ns: x & 0xfffff,
                pid: 1,
                tid: 1 + (x >> 60) as u32,
                ..Event::default()
            };
            if let Err(err) = t
                .push(&e)
                .and_then(|()| if i % 4_096 == 0 { t.flush() } else { Ok(()) })
            {
                failed = Some(err);
                break;
            }
        }
        let err = failed.expect("the file system never filled");
        assert!(is_disk_full(&err), "{err}");
        assert!(t.finish(EndInfo::default()).is_err());
        let files = list_parts(&fs.0.join("rec")).unwrap();
        assert_eq!(files.len(), 1, "{files:?}");
        let r = Reader::open(&files[0].0).unwrap();
        assert!(r.validate().is_empty(), "damaged: {:?}", r.validate());
        assert!(r.events().count() > 0);
        drop(r);
        drop(fs);
    }

    /// Retention deletes the oldest parts, and only files that are parts nothing writes: not
    /// a person's file named like a part, not another user's, not the part another recorder
    /// in the directory is writing (locked while open), and nothing but regular files.
    #[test]
    fn retention_deletes_only_parts_nothing_writes() {
        let dir = empty_dir("parts-retention-others");
        let t0 = 1_764_625_920_000_000_000i64;
        let s = 1_000_000_000i64;
        let part = |n: i64| dir.join(part_name(t0 + n * s, n as u32));
        let mut trace = iodump_format::chunk::signature().to_vec();
        trace.extend_from_slice(b"a cut part");
        // Oldest first: a person's notes, another recorder's part being written, a part of
        // an earlier run, another user's part, a directory, then this run's parts.
        std::fs::write(part(1), b"my notes").unwrap();
        let busy = OutputFile::create(&part(2)).unwrap();
        std::fs::write(busy.temp_path().unwrap(), &trace).unwrap();
        let mut busy = busy;
        busy.commit().unwrap();
        std::fs::write(part(3), &trace).unwrap();
        std::fs::write(part(4), &trace).unwrap();
        // SAFETY: chown of a path we made, to `nobody`.
        let c = std::ffi::CString::new(part(4).as_os_str().as_encoded_bytes()).unwrap();
        let chowned = unsafe { libc::chown(c.as_ptr(), 65534, 65534) } == 0;
        // SAFETY: geteuid takes nothing and cannot fail. (Only root may give a file away.)
        assert!(
            chowned || unsafe { libc::geteuid() } != 0,
            "chown as root failed"
        );
        std::fs::create_dir(part(5)).unwrap();
        let mut mine = Vec::new();
        for n in 6..=9 {
            std::fs::write(part(n), &trace).unwrap();
            mine.push(part(n));
        }
        let files = list_parts(&dir).unwrap();
        let current = part(9);
        let deleted = delete_oldest_beyond(files, &current, Some(2), None, |p, e| {
            panic!("{}: {e}", p.display())
        });
        // Six parts (2, 3, 6, 7, 8, 9), two kept: the busy one, which stays, and the current.
        assert_eq!(deleted, 4);
        assert!(part(1).exists(), "a person's file");
        assert_eq!(std::fs::read(part(1)).unwrap(), b"my notes");
        assert!(part(2).exists(), "a part being written");
        assert!(!part(3).exists());
        if chowned {
            assert!(part(4).exists(), "another user's");
        }
        assert!(part(5).is_dir());
        assert!(!part(6).exists() && !part(7).exists() && !part(8).exists());
        assert!(part(9).exists());
        // Once its writer is done, the part is one like any other.
        drop(busy);
        let files = list_parts(&dir).unwrap();
        let deleted = delete_oldest_beyond(files, &current, Some(1), None, |p, e| {
            panic!("{}: {e}", p.display())
        });
        assert_eq!(deleted, 1);
        assert!(!part(2).exists() && part(1).exists() && part(9).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The clock set back (an NTP step after boot, a clock kept in local time): new parts'
    /// names go on after the newest name in the directory, of an earlier run too, so that
    /// retention deletes the oldest parts, not the newest; their headers keep the true clock.
    #[test]
    fn names_go_on_when_the_clock_is_set_back() {
        use iodump_format::Reader;
        let dir = empty_dir("parts-clock");
        // An earlier run's part, named an hour ahead of this run's clock.
        let t0 = 1_764_625_920_000_000_000i64;
        let hour = 3_600_000_000_000i64;
        let earlier = dir.join(part_name(t0 + hour, 7));
        // (Cut as it was made: the signature and a few bytes.)
        let mut bytes = iodump_format::chunk::signature().to_vec();
        bytes.extend_from_slice(b"cut");
        std::fs::write(&earlier, bytes).unwrap();
        let cfg = PartsConfig {
            dir: dir.clone(),
            keep: Some(3),
            ..PartsConfig::default()
        };
        let mut t = RotatingTrace::create(
            cfg,
            Header::default(),
            WriterOptions::default(),
            "rec".into(),
            (t0, 1_000),
        )
        .unwrap();
        t.commit_first().unwrap();
        let mut made = vec![t.current_path().to_path_buf()];
        for i in 1..=3i64 {
            // The clock goes back another second each time.
            t.rotate(
                EndInfo::default(),
                (t0 - i * 1_000_000_000, 1_000 + i as u64),
            )
            .unwrap();
            made.push(t.current_path().to_path_buf());
        }
        t.finish(EndInfo::default()).unwrap();
        let left: Vec<PathBuf> = list_parts(&dir)
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(left, made[1..], "the newest three are kept");
        assert!(!earlier.exists());
        let times: Vec<i64> = made
            .iter()
            .map(|p| part_name_time(&p.file_name().unwrap().to_string_lossy()).unwrap())
            .collect();
        assert_eq!(times[0], t0 + hour + 1_000_000);
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
        let r = Reader::open(&made[3]).unwrap();
        assert_eq!(r.header().wall_clock_ns, t0 - 3_000_000_000);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn name_times_parse_and_go_on() {
        let t = 1_764_625_920_123_456_789;
        let name = part_name(t, 12);
        assert_eq!(part_name_time(&name), Some(t - 456_789));
        assert_eq!(
            part_name_time("iodump-20251301T215200.123Z-000001.iod"),
            None
        );
        assert_eq!(part_name_time("run.iod"), None);
        assert_eq!(parse_name_time("2025120xT215200.123Z"), None);
        assert_eq!(name_time_after(t, None), t);
        assert_eq!(name_time_after(t, Some(t - 2_000_000)), t);
        assert_eq!(
            name_time_after(t, Some(t - 456_789)),
            t - 456_789 + 1_000_000
        );
        assert_eq!(
            name_time_after(t, Some(t + 5_000_000_000)),
            t - 456_789 + 5_001_000_000
        );
    }

    #[test]
    fn part_names_sort_by_time_and_are_recognised() {
        let a = part_name(1_764_625_920_123_456_789, 1);
        assert_eq!(a, "iodump-20251201T215200.123Z-000001.iod");
        assert!(is_part_name(&a));
        let b = part_name(1_764_625_981_000_000_000, 2);
        assert!(a < b);
        assert!(!is_part_name("iodump-20251201T215200.123Z-00001.iod"));
        assert!(!is_part_name("trigger-20251201T215200.123Z-000001.iod"));
        assert!(!is_part_name("run.iod"));
        // Past part 999,999 (11.6 days of 1 s parts): still a part, its time still read.
        let big = part_name(1_764_625_920_123_456_789, 1_000_000);
        assert_eq!(big, "iodump-20251201T215200.123Z-1000000.iod");
        assert!(is_part_name(&big));
        assert_eq!(part_name_time(&big), part_name_time(&a));
        assert!(!is_part_name("iodump-20251201T215200.123Z-00000x1.iod"));
    }
}
