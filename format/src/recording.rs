//! Recordings written as several files: what ties the files of one recording together (a
//! recording id and a part number in each header), the table entries every part repeats
//! ([`TableMirror`]), and the reading side: turning the paths a user gives (files,
//! directories, globs already expanded by the shell) into traces, the parts of one recording
//! read as one ([`open_traces`]).
//!
//! A part is a complete trace on its own: its header, then the device, process, path and
//! cgroup entries that the recording knew when the part began (its events refer to no entry
//! of another part), then events. See `schemas/iod-format.md`, "Recordings in parts".

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::cgroup::Cgroup;
use crate::error::{ReadError, WriteError};
use crate::event::{Device, Header, PathEntry, Process};
use crate::inthash::IntMap;
use crate::reader::Reader;
use crate::writer::Writer;

/// Header metadata key: the id of the recording a file belongs to (16 hex digits), the same
/// in every part.
pub const META_RECORDING: &str = "iodump.recording";
/// Header metadata key: the part number of the file within its recording, from 1.
pub const META_PART: &str = "iodump.part";
/// Header metadata key of a flight recorder's snapshot: why it was written (`trigger: EXPR`
/// or `SIGUSR1`).
pub const META_SNAPSHOT: &str = "iodump.snapshot";
/// Header metadata key: the I/O that fired a trigger, `timestamp_ns dev sector bytes op
/// latency_ns` (its timestamp on the trace's clock, the device as `MAJ:MIN`).
pub const META_TRIGGER_IO: &str = "iodump.trigger.io";

/// The recording id and part number a header carries, when it has them.
pub fn part_of(h: &Header) -> Option<(String, u32)> {
    let get = |k: &str| h.metadata.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    let id = get(META_RECORDING)?.clone();
    let part = get(META_PART)?.parse().ok()?;
    Some((id, part))
}

/// The I/O that fired a snapshot's trigger: its timestamp (trace clock), when the header says.
pub fn trigger_timestamp_ns(h: &Header) -> Option<u64> {
    let v = h.metadata.iter().find(|(k, _)| k == META_TRIGGER_IO)?;
    v.1.split_whitespace().next()?.parse().ok()
}

/// The latest entry of each table key the recording has written: what a new part (or a
/// snapshot) takes its entries from — the devices and cgroups at its start, each process and
/// path entry before the first of its events that refers to it — so that its events refer
/// to nothing outside it.
#[derive(Clone, Debug, Default)]
pub struct TableMirror {
    devices: Vec<Device>,
    processes: IntMap<u32, Process>,
    paths: IntMap<u32, PathEntry>,
    cgroups: IntMap<u64, Cgroup>,
}

impl TableMirror {
    /// Notes a device entry.
    pub fn device(&mut self, d: &Device) {
        match self.devices.iter_mut().find(|x| x.dev == d.dev) {
            Some(x) => *x = d.clone(),
            None => self.devices.push(d.clone()),
        }
    }
    /// Notes a process entry (the latest per thread id is kept).
    pub fn process(&mut self, p: &Process) {
        self.processes.insert(p.tid, p.clone());
    }
    /// Notes a path entry.
    pub fn path(&mut self, p: &PathEntry) {
        self.paths.insert(p.path_id, p.clone());
    }
    /// Notes a cgroup entry.
    pub fn cgroup(&mut self, c: &Cgroup) {
        self.cgroups.insert(c.id, c.clone());
    }
    /// Forgets path entries and threads no event will refer to again (the recorder forgot
    /// them: a file or thread that comes back gets entries anew).
    pub fn forget(&mut self, path_ids: &[u32], tids: &[u32]) {
        for id in path_ids {
            self.paths.remove(id);
        }
        for t in tids {
            self.processes.remove(t);
        }
    }
    /// Entries held, all tables together.
    pub fn len(&self) -> usize {
        self.devices.len() + self.processes.len() + self.paths.len() + self.cgroups.len()
    }
    /// True when nothing was noted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The latest process entry of thread `tid`, if noted.
    #[inline]
    pub fn process_entry(&self, tid: u32) -> Option<&Process> {
        self.processes.get(&tid)
    }
    /// Every process entry (the latest of each thread), in no order.
    pub fn processes(&self) -> impl Iterator<Item = &Process> {
        self.processes.values()
    }
    /// Every path entry, in no order.
    pub fn paths(&self) -> impl Iterator<Item = &PathEntry> {
        self.paths.values()
    }
    /// The path entry `path_id`, if noted.
    #[inline]
    pub fn path_entry(&self, path_id: u32) -> Option<&PathEntry> {
        self.paths.get(&path_id)
    }
    /// Adds the devices (in the order first seen) and the cgroups (by id) to `w`: what a
    /// part starts with, its process and path entries being added before the first of its
    /// events that refers to them.
    pub fn write_devices_and_cgroups<W: Write>(&self, w: &mut Writer<W>) -> Result<(), WriteError> {
        for d in &self.devices {
            w.add_device(d.clone())?;
        }
        let mut ids: Vec<&u64> = self.cgroups.keys().collect();
        ids.sort_unstable();
        for i in ids {
            w.add_cgroup(self.cgroups[i].clone())?;
        }
        Ok(())
    }
}

/// One trace as the user gave it: a file, or the parts of one recording.
pub struct TraceInput {
    /// Its name: the file name (of the first part, for a recording in parts).
    pub name: String,
    /// Its files, in part order.
    pub files: Vec<PathBuf>,
    /// The recording id, for a recording in parts.
    pub recording: Option<String>,
    /// Part numbers of `files`, for a recording in parts.
    pub parts: Vec<u32>,
    /// The files read as one trace.
    pub reader: Reader,
}

/// Why [`open_traces`] failed: the path and what went wrong.
#[derive(Debug)]
pub struct InputError {
    /// The file or directory.
    pub path: PathBuf,
    /// What went wrong.
    pub source: ReadError,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.source)
    }
}

impl std::error::Error for InputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Whether a file name is a part's, as the recorder names them (`iodump-….iod`, spec §8).
fn is_part_file_name(name: &str) -> bool {
    name.starts_with("iodump-") && name.ends_with(".iod")
}

/// Whether a file name is a flight recorder snapshot's (`trigger-….iod`, spec §8).
fn is_snapshot_file_name(name: &str) -> bool {
    name.starts_with("trigger-") && name.ends_with(".iod")
}

/// The trace files of a directory read as what it records: [`all_trace_files_in`], but its
/// snapshot files (`trigger-*.iod`) left out when it holds parts (`iodump-*.iod`): a
/// snapshot is a copy of I/O the parts hold (the always-on service writes both into one
/// directory), and read with them it would be counted twice. Named one by one, snapshots
/// are read; a directory of snapshots alone is read whole. [`snapshots_left_out`] says which.
pub fn trace_files_in(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let mut files = all_trace_files_in(dir)?;
    let name = |p: &PathBuf| p.file_name().map(|n| n.to_string_lossy().into_owned());
    if files
        .iter()
        .any(|f| name(f).is_some_and(|n| is_part_file_name(&n)))
    {
        files.retain(|f| !name(f).is_some_and(|n| is_snapshot_file_name(&n)));
    }
    Ok(files)
}

/// The snapshot files [`trace_files_in`] leaves out of directory `dir` (none when it cannot
/// be listed: reading it says why).
pub fn snapshots_left_out(dir: &Path) -> Vec<PathBuf> {
    let (Ok(all), Ok(read)) = (all_trace_files_in(dir), trace_files_in(dir)) else {
        return Vec::new();
    };
    all.into_iter().filter(|f| !read.contains(f)).collect()
}

/// The trace files of a directory: its `*.iod` files that are not hidden (a recorder's
/// temporary files are), by name (part files are named by their start time, so by name is
/// in time order).
pub fn all_trace_files_in(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let err = |source: std::io::Error| InputError {
        path: dir.to_path_buf(),
        source: ReadError::Io {
            context: format!("listing {}", dir.display()),
            source,
        },
    };
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).map_err(err)? {
        let e = e.map_err(err)?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".iod") {
            continue;
        }
        if e.file_type().map_err(err)?.is_file() {
            files.push(e.path());
        }
    }
    files.sort();
    if files.is_empty() {
        // `iodump convert`'s output (its `io` table, flat or hive-style) is not a recording.
        let why = if dir.join("io.parquet").is_file() || dir.join("io").is_dir() {
            "no trace files (*.iod) in it: it holds a Parquet dataset (`iodump convert`'s \
             output), not a recording"
        } else {
            "no trace files (*.iod) in it"
        };
        return Err(err(std::io::Error::other(why)));
    }
    Ok(files)
}

/// Opens what the user named: each file, and each directory's trace files
/// ([`trace_files_in`]). Files of one recording in parts (the same recording id) become one
/// trace, their parts in order, wherever they were named; every other file is a trace of
/// its own. Traces come in the order their first file was named.
///
/// A file a directory listed that is gone when it is opened (a live recording's retention
/// deleted it meanwhile) is left out, as if it had been deleted before the listing; a file
/// named that is not there is an error.
pub fn open_traces(paths: &[PathBuf]) -> Result<Vec<TraceInput>, InputError> {
    open_listed(paths, trace_files_in)
}

/// [`open_traces`], a directory's snapshots included ([`all_trace_files_in`]): what a
/// directory holds, for `iodump info`.
pub fn open_all_traces(paths: &[PathBuf]) -> Result<Vec<TraceInput>, InputError> {
    open_listed(paths, all_trace_files_in)
}

/// Opens the files named and those `list` gives of each directory named.
fn open_listed(
    paths: &[PathBuf],
    list: fn(&Path) -> Result<Vec<PathBuf>, InputError>,
) -> Result<Vec<TraceInput>, InputError> {
    // (file, whether a directory listed it)
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            files.extend(list(p)?.into_iter().map(|f| (f, true)));
        } else {
            files.push((p.clone(), false));
        }
    }
    open_files(files)
}

/// [`open_traces`] of the files named or listed: (file, whether a directory listed it).
fn open_files(files: Vec<(PathBuf, bool)>) -> Result<Vec<TraceInput>, InputError> {
    let mut opened: Vec<Option<Opened>> = Vec::new();
    let count = files.len();
    // Each file once, however it was named (`x.iod`, `./x.iod`, a directory and a part in
    // it, a hard link): by device and inode (one that cannot be stat'ed cannot be opened
    // either: its error follows).
    let mut ids: std::collections::HashSet<(u64, u64)> = std::collections::HashSet::new();
    for (f, listed) in files {
        if let Ok(m) = std::fs::metadata(&f) {
            use std::os::unix::fs::MetadataExt;
            if !ids.insert((m.dev(), m.ino())) {
                continue;
            }
        }
        let reader = match Reader::open_one_of(&f, count) {
            Ok(r) => r,
            Err(e) if listed && e.is_not_found() => continue,
            Err(source) => return Err(InputError { path: f, source }),
        };
        opened.push(Some(Opened {
            part: part_of(reader.header()),
            path: f,
            reader,
        }));
    }
    let mut out = Vec::new();
    for i in 0..opened.len() {
        let Some(first) = opened[i].take() else {
            continue;
        };
        let Some((id, _)) = first.part.clone() else {
            out.push(TraceInput {
                name: file_name(&first.path),
                files: vec![first.path],
                recording: None,
                parts: Vec::new(),
                reader: first.reader,
            });
            continue;
        };
        let mut members = vec![first];
        for slot in opened[i + 1..].iter_mut() {
            if let Some(o) = slot.take_if(|o| o.part.as_ref().is_some_and(|(r, _)| *r == id)) {
                members.push(o);
            }
        }
        members.sort_by(|a, b| (a.number(), &a.path).cmp(&(b.number(), &b.path)));
        let name = file_name(&members[0].path);
        let parts = members.iter().map(Opened::number).collect();
        let mut files = Vec::new();
        let mut readers = Vec::new();
        for m in members {
            files.push(m.path);
            readers.push(m.reader);
        }
        out.push(TraceInput {
            name,
            files,
            recording: Some(id),
            parts,
            reader: concat_parts(readers),
        });
    }
    unique_names(&mut out);
    Ok(out)
}

/// The parts of one recording, in order, as one trace ([`Reader::concat`]). A gap in their
/// numbers — parts lost, deleted by hand or to a disk's errors (retention deletes the oldest
/// only, which leaves no gap) — is damage ([`crate::DamageKind::MissingParts`]), reported
/// where the part after it starts.
pub fn concat_parts(mut parts: Vec<Reader>) -> Reader {
    let mut previous: Option<u32> = None;
    for r in &mut parts {
        let Some((_, n)) = part_of(r.header()) else {
            continue;
        };
        if let Some(p) = previous.filter(|&p| n > p + 1) {
            r.damage_at_start(crate::error::DamageKind::MissingParts {
                first: p + 1,
                last: n - 1,
            });
        }
        previous = Some(n);
    }
    Reader::concat(parts)
}

/// Makes the traces' names unique: a trace is told from the others by its name (the `trace`
/// column of the Parquet tables, the key of its processes and files), so two traces of one
/// file name in different directories (`host1/run.iod`, `host2/run.iod`) are named by their
/// paths as given, and any left equal get ` #2`, ` #3`.
fn unique_names(traces: &mut [TraceInput]) {
    use std::collections::{HashMap, HashSet};
    let mut count: HashMap<String, usize> = HashMap::new();
    for t in traces.iter() {
        *count.entry(t.name.clone()).or_default() += 1;
    }
    for t in traces.iter_mut() {
        if count[&t.name] > 1 {
            t.name = t.files[0].display().to_string();
        }
    }
    let mut taken: HashSet<String> = HashSet::new();
    for t in traces.iter_mut() {
        let base = t.name.clone();
        let mut n = 1;
        while !taken.insert(t.name.clone()) {
            n += 1;
            t.name = format!("{base} #{n}");
        }
    }
}

/// A file named, opened, with the recording and part its header names.
struct Opened {
    part: Option<(String, u32)>,
    path: PathBuf,
    reader: Reader,
}

impl Opened {
    fn number(&self) -> u32 {
        self.part.as_ref().map_or(0, |p| p.1)
    }
}

/// Opens what `path` names as one trace: a file, or a directory holding one recording (its
/// parts). A directory holding several recordings is refused (name one of its files).
pub fn open_trace(path: &Path) -> Result<TraceInput, InputError> {
    let mut v = open_traces(&[path.to_path_buf()])?;
    let err = |what: String| InputError {
        path: path.to_path_buf(),
        source: ReadError::Io {
            context: format!("reading {}", path.display()),
            source: std::io::Error::other(what),
        },
    };
    if v.len() > 1 {
        let names: Vec<&str> = v.iter().take(3).map(|t| t.name.as_str()).collect();
        return Err(err(format!(
            "it holds {} traces ({}…); name one of its files",
            v.len(),
            names.join(", ")
        )));
    }
    v.pop().ok_or_else(|| err("no trace in it".into()))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listed file gone when opened (deleted by retention since the listing) is left out;
    /// a file named that is not there is an error.
    #[test]
    fn listed_files_gone_are_left_out() {
        let dir = std::env::temp_dir().join(format!("iodump-gone-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b, gone) = (dir.join("a.iod"), dir.join("b.iod"), dir.join("gone.iod"));
        for f in [&a, &b] {
            let w = crate::Writer::new(
                std::fs::File::create(f).unwrap(),
                &crate::Header::default(),
                crate::WriterOptions::default(),
            )
            .unwrap();
            w.finish(crate::EndInfo::default()).unwrap();
        }
        let traces = open_files(vec![(gone.clone(), true), (a.clone(), true), (b, true)]).unwrap();
        assert_eq!(traces.len(), 2);
        assert_eq!(traces[0].files, std::slice::from_ref(&a));
        let Err(e) = open_files(vec![(gone.clone(), false), (a, true)]) else {
            panic!("a file named and not there opened");
        };
        assert_eq!(e.path, gone);
        assert!(e.source.is_not_found());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file named twice (`x.iod`, `./x.iod`, a hard link) is one trace; two traces of one
    /// file name in different directories get their paths as names.
    #[test]
    fn a_file_is_one_trace_and_names_are_unique() {
        let dir = std::env::temp_dir().join(format!("iodump-names-{}", std::process::id()));
        let (h1, h2) = (dir.join("h1"), dir.join("h2"));
        for d in [&h1, &h2] {
            std::fs::create_dir_all(d).unwrap();
            let w = crate::Writer::new(
                std::fs::File::create(d.join("run.iod")).unwrap(),
                &crate::Header::default(),
                crate::WriterOptions::default(),
            )
            .unwrap();
            w.finish(crate::EndInfo::default()).unwrap();
        }
        let (a, b) = (h1.join("run.iod"), h2.join("run.iod"));
        let link = h1.join("link.iod");
        std::fs::hard_link(&a, &link).unwrap();
        let named = |v: &[PathBuf]| {
            let files = v.iter().map(|p| (p.clone(), false)).collect();
            let names: Vec<String> = open_files(files)
                .unwrap()
                .into_iter()
                .map(|t| t.name)
                .collect();
            names
        };
        assert_eq!(
            named(&[a.clone(), h1.join(".").join("run.iod"), link]),
            ["run.iod"]
        );
        assert_eq!(
            named(&[a.clone(), b.clone()]),
            [a.display().to_string(), b.display().to_string()]
        );
        let x = || TraceInput {
            name: "x".into(),
            files: vec![a.clone()],
            recording: None,
            parts: Vec::new(),
            reader: Reader::open(&a).unwrap(),
        };
        let mut two = vec![x(), x()];
        unique_names(&mut two);
        assert_eq!(two[1].name, format!("{} #2", a.display()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
