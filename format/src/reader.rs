//! The [`Reader`]: walks the chunks of a trace (resynchronising past damage), loads the
//! tables, and decodes event segments on demand, one at a time or in parallel with rayon.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::chunk::{
    self, ChunkHeader, ChunkType, IndexEntry, CHUNK_HEADER_BYTES, CHUNK_SYNC, MAGIC,
    SIGNATURE_BYTES, VERSION_MAJOR,
};
use crate::error::{Damage, DamageKind, DecodeError, ReadError};
use crate::event::{DevT, Device, EndInfo, Event, Header, Loss, PathEntry, Process};
use crate::frames;
use crate::segment::{
    col, decode_columns, decode_segment_projected, Columns, DecodeScratch, EventBatch,
};

/// More trace files than this opened together (a recording's parts) are opened with
/// [`Reader::open_closed`]: kept open, they could use up the process's descriptors (its
/// limit is often 1,024). A quarter of the limit when that is less.
pub const KEPT_OPEN_FILES_MAX: usize = 256;

/// The process's soft limit on open files, when it has one.
#[cfg(unix)]
fn open_files_limit() -> Option<usize> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which lives on this stack.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY)
        .then(|| usize::try_from(r.rlim_cur).unwrap_or(usize::MAX))
}

#[cfg(not(unix))]
fn open_files_limit() -> Option<usize> {
    None
}

/// Files kept open when that many are opened together: [`KEPT_OPEN_FILES_MAX`], or a
/// quarter of the process's limit when that is less.
fn kept_open_files() -> usize {
    open_files_limit().map_or(KEPT_OPEN_FILES_MAX, |l| KEPT_OPEN_FILES_MAX.min(l / 4))
}

/// Where the bytes come from.
enum Source {
    File(File),
    Memory(Vec<u8>),
    /// A file opened again for each read ([`Reader::open_closed`]).
    Closed(ClosedFile),
    /// The files of one recording end to end ([`Reader::concat`]): each with the offset at
    /// which it starts. No chunk spans two of them. Closed files are read through the pool.
    Parts(Vec<(u64, Source)>, FilePool),
}

/// A trace file that is not kept open: its path and the identity it had when it was opened,
/// so that a file replaced since is not read in its place.
struct ClosedFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl ClosedFile {
    fn of(path: &Path, f: &File) -> io::Result<ClosedFile> {
        let (dev, ino) = identity(&f.metadata()?);
        Ok(ClosedFile {
            path: path.to_path_buf(),
            dev,
            ino,
        })
    }

    fn open(&self) -> io::Result<File> {
        let f = File::open(&self.path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => io::Error::new(
                e.kind(),
                format!(
                    "{} was deleted since it was opened (a live recording's retention?)",
                    self.path.display()
                ),
            ),
            _ => e,
        })?;
        if identity(&f.metadata()?) != (self.dev, self.ino) {
            return Err(io::Error::other(format!(
                "{} is another file than the one opened",
                self.path.display()
            )));
        }
        Ok(f)
    }
}

#[cfg(unix)]
fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (m.dev(), m.ino())
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> (u64, u64) {
    (0, 0)
}

/// The closed parts of a recording kept open for now: the most recently read (at most 64,
/// an eighth of the process's limit on open files when that is less), so that reading a
/// recording of many thousand parts holds a bounded number of descriptors, and a
/// segment's reads cost no open.
struct FilePool {
    kept: usize,
    open: std::sync::Mutex<Vec<(usize, std::sync::Arc<File>)>>,
}

impl Default for FilePool {
    fn default() -> FilePool {
        FilePool {
            kept: (kept_open_files() / 4).clamp(1, 64),
            open: std::sync::Mutex::default(),
        }
    }
}

impl FilePool {
    /// Part `i`'s file, opened if the pool does not hold it (the least recently used
    /// closed when the pool is full; all of them, and once more, when the process has no
    /// descriptor left).
    fn get(&self, i: usize, c: &ClosedFile) -> io::Result<std::sync::Arc<File>> {
        let lock = || self.open.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut open = lock();
            if let Some(k) = open.iter().position(|(j, _)| *j == i) {
                let hit = open.remove(k);
                let f = hit.1.clone();
                open.push(hit);
                return Ok(f);
            }
        }
        // Opened without the lock: other threads go on reading meanwhile.
        let f = match c.open() {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                lock().clear();
                c.open()?
            }
            r => r?,
        };
        let f = std::sync::Arc::new(f);
        let mut open = lock();
        if open.len() >= self.kept {
            open.remove(0);
        }
        open.push((i, f.clone()));
        Ok(f)
    }
}

impl Source {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        match self {
            Source::Memory(m) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX);
                let end = start.checked_add(buf.len());
                match end.and_then(|e| m.get(start..e)) {
                    Some(s) => {
                        buf.copy_from_slice(s);
                        Ok(())
                    }
                    None => Err(io::ErrorKind::UnexpectedEof.into()),
                }
            }
            Source::File(f) => read_exact_at(f, buf, offset),
            Source::Closed(c) => read_exact_at(&c.open()?, buf, offset),
            Source::Parts(parts, pool) => {
                let (i, start, part) = Source::part_at(parts, offset)?;
                match part {
                    Source::Closed(c) => read_exact_at(&*pool.get(i, c)?, buf, offset - start),
                    _ => part.read_at(offset - start, buf),
                }
            }
        }
    }
    fn part_at(parts: &[(u64, Source)], offset: u64) -> io::Result<(usize, u64, &Source)> {
        let i = parts.partition_point(|(start, _)| *start <= offset);
        match i.checked_sub(1).and_then(|i| parts.get(i).map(|p| (i, p))) {
            Some((i, (start, part))) => Ok((i, *start, part)),
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
    fn read_vec(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut v = vec![0u8; len];
        self.read_at(offset, &mut v)?;
        Ok(v)
    }
    /// The first offset ≥ `offset` that may hold data: past a hole of a sparse file (which
    /// reads as zeros), `None` when only a hole follows. Where holes are not known (memory,
    /// file systems without `SEEK_DATA`, other systems) that is `offset` itself.
    fn next_data(&self, offset: u64) -> Option<u64> {
        match self {
            Source::Memory(_) | Source::Parts(..) => Some(offset),
            Source::File(f) => seek_data(f, offset),
            Source::Closed(c) => c.open().map_or(Some(offset), |f| seek_data(&f, offset)),
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn seek_data(f: &File, offset: u64) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let Ok(off) = libc::off_t::try_from(offset) else {
        return Some(offset);
    };
    // SAFETY: lseek only reads the descriptor, which `f` keeps open; it moves the file
    // position, which the reader never uses (every read is a pread at an explicit offset).
    let r = unsafe { libc::lseek(f.as_raw_fd(), off, libc::SEEK_DATA) };
    if r >= 0 {
        Some((r as u64).max(offset))
    } else if io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
        None
    } else {
        Some(offset)
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn seek_data(_: &File, offset: u64) -> Option<u64> {
    Some(offset)
}

#[cfg(unix)]
fn read_exact_at(f: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(f: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(f, buf, offset) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One chunk found in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkInfo {
    /// Offset of its header.
    pub offset: u64,
    /// Its verified header.
    pub header: ChunkHeader,
}

/// One event segment found in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Position among the segments (0-based).
    pub index: usize,
    /// Offset of its chunk header.
    pub offset: u64,
    /// Events it holds (from the chunk header).
    pub events: u32,
    /// Bytes on disk (header and payload).
    pub chunk_bytes: u64,
    /// Smallest and largest timestamp, when the footer gives them.
    pub time_range_ns: Option<(u64, u64)>,
    /// Its chunk header.
    pub header: ChunkHeader,
}

/// Reusable buffers and zstd context for decoding segments; one per thread.
pub struct SegmentDecoder {
    stored: Vec<u8>,
    raw: Vec<u8>,
    scratch: DecodeScratch,
    dctx: zstd::bulk::Decompressor<'static>,
}

impl SegmentDecoder {
    /// A new, cold decoder.
    pub fn new() -> SegmentDecoder {
        SegmentDecoder {
            stored: Vec::new(),
            raw: Vec::new(),
            scratch: DecodeScratch::default(),
            dctx: zstd::bulk::Decompressor::new().expect("zstd decompression context"),
        }
    }
}

impl Default for SegmentDecoder {
    fn default() -> Self {
        SegmentDecoder::new()
    }
}

/// The device, process and path tables, as of any segment.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    devices: HashMap<DevT, Device>,
    device_order: Vec<DevT>,
    /// Per tid: entries with the index of the first segment they apply to.
    processes: HashMap<u32, Vec<(usize, Process)>>,
    process_entries: usize,
    paths: HashMap<u32, PathEntry>,
    cgroups: HashMap<u64, crate::cgroup::Cgroup>,
    /// True when the trace has a cgroups table chunk (format 1.2 recorders write one).
    has_cgroup_table: bool,
}

impl Tables {
    /// A device by number.
    pub fn device(&self, dev: DevT) -> Option<&Device> {
        self.devices.get(&dev)
    }
    /// Devices in the order the trace lists them.
    pub fn devices(&self) -> impl Iterator<Item = &Device> {
        self.device_order.iter().filter_map(|d| self.devices.get(d))
    }
    /// A path table entry by id.
    pub fn path(&self, path_id: u32) -> Option<&PathEntry> {
        self.paths.get(&path_id)
    }
    /// All path entries (in no particular order).
    pub fn paths(&self) -> impl Iterator<Item = &PathEntry> {
        self.paths.values()
    }
    /// Device number (`DevT.0`) → name, for filters ([`crate::expr::Expr::eval_in`]) and labels.
    pub fn device_names(&self) -> std::collections::HashMap<u32, String> {
        self.devices().map(|d| (d.dev.0, d.name.clone())).collect()
    }
    /// The cgroups table entry of a cgroup v2 id (format 1.2).
    pub fn cgroup(&self, id: u64) -> Option<&crate::cgroup::Cgroup> {
        self.cgroups.get(&id)
    }
    /// All cgroup entries, by id.
    pub fn cgroups(&self) -> impl Iterator<Item = &crate::cgroup::Cgroup> {
        let mut v: Vec<_> = self.cgroups.values().collect();
        v.sort_by_key(|c| c.id);
        v.into_iter()
    }
    /// True when the trace holds a cgroups table (written by recorders of format 1.2 on),
    /// even an empty one: without it, nothing is known of the cgroups behind `cgroup_id`.
    pub fn has_cgroup_table(&self) -> bool {
        self.has_cgroup_table
    }
    /// Number of path entries.
    pub fn path_count(&self) -> usize {
        self.paths.len()
    }
    /// Number of distinct threads in the process table.
    pub fn thread_count(&self) -> usize {
        self.processes.len()
    }
    /// Number of distinct process ids in the process table.
    pub fn process_count(&self) -> usize {
        let mut pids: Vec<u32> = self
            .processes
            .values()
            .flat_map(|v| v.iter().map(|(_, p)| p.pid))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids.len()
    }
    /// Total process entries (including re-used tids).
    pub fn process_entries(&self) -> usize {
        self.process_entries
    }
    /// The process entry of thread `tid` in force for segment `segment` (the latest entry
    /// written before that segment, else the earliest one).
    pub fn process(&self, tid: u32, segment: usize) -> Option<&Process> {
        let v = self.processes.get(&tid)?;
        v.iter()
            .rev()
            .find(|(from, _)| *from <= segment)
            .or_else(|| v.first())
            .map(|(_, p)| p)
    }
    /// Adds the tables of the next part of a recording, whose segments start at `seg0`.
    fn merge(&mut self, other: Tables, seg0: usize) {
        for dev in other.device_order {
            if let Some(d) = other.devices.get(&dev) {
                if !self.devices.contains_key(&dev) {
                    self.device_order.push(dev);
                }
                self.devices.insert(dev, d.clone());
            }
        }
        for (tid, entries) in other.processes {
            let mine = self.processes.entry(tid).or_default();
            for (seg, p) in entries {
                // A part repeats the entries of the parts before: keep one of each.
                if mine.last().map(|(_, q)| q) != Some(&p) {
                    self.process_entries += 1;
                    mine.push((seg + seg0, p));
                }
            }
        }
        self.paths.extend(other.paths);
        self.cgroups.extend(other.cgroups);
        self.has_cgroup_table |= other.has_cgroup_table;
    }

    /// All process entries, latest per tid.
    pub fn processes(&self) -> impl Iterator<Item = &Process> {
        self.processes
            .values()
            .filter_map(|v| v.last().map(|(_, p)| p))
    }
}

/// A trace opened for reading.
pub struct Reader {
    source: Source,
    file_bytes: u64,
    version: (u16, u16),
    header: Header,
    header_ok: bool,
    tables: Tables,
    losses: Vec<Loss>,
    end: Option<EndInfo>,
    chunks: Vec<ChunkInfo>,
    segments: Vec<SegmentInfo>,
    damage: Vec<Damage>,
    footer_used: bool,
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> ReadError {
    let context = context.into();
    move |source| ReadError::Io { context, source }
}

impl Reader {
    /// Opens a trace file: reads the signature, walks every chunk header, loads the tables.
    /// Damage found on the way is recorded (see [`Reader::damage`]), not fatal.
    pub fn open(path: impl AsRef<Path>) -> Result<Reader, ReadError> {
        let path = path.as_ref();
        // Checked before opening: opening a FIFO waits for a writer, and a trace is read
        // from its end (the footer), which only a regular file allows.
        let kind = |m: &std::fs::Metadata| not_a_trace_file(path, m.file_type());
        if let Ok(m) = std::fs::metadata(path) {
            kind(&m)?;
        }
        let f = File::open(path).map_err(io_err(format!("opening {}", path.display())))?;
        let meta = f
            .metadata()
            .map_err(io_err(format!("reading {}", path.display())))?;
        kind(&meta)?;
        Reader::from_source(Source::File(f), meta.len())
    }

    /// As [`Reader::open`], but the file is closed once the tables are read and opened again
    /// to read segments (and checked to be the same file): for the parts of a recording too
    /// many to keep open at once. Joined by [`Reader::concat`], the parts most recently
    /// read stay open (a bounded number).
    pub fn open_closed(path: impl AsRef<Path>) -> Result<Reader, ReadError> {
        let path = path.as_ref();
        let mut r = Reader::open(path)?;
        if let Source::File(f) = &r.source {
            let c =
                ClosedFile::of(path, f).map_err(io_err(format!("reading {}", path.display())))?;
            r.source = Source::Closed(c);
        }
        Ok(r)
    }

    /// [`Reader::open`] for one of `files` trace files opened together (a recording's
    /// parts): [`Reader::open_closed`] when they are more than [`KEPT_OPEN_FILES_MAX`] (or a
    /// quarter of the process's limit on open files).
    pub fn open_one_of(path: impl AsRef<Path>, files: usize) -> Result<Reader, ReadError> {
        if files > kept_open_files() {
            Reader::open_closed(path)
        } else {
            Reader::open(path)
        }
    }

    /// Reads a trace held in memory.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Reader, ReadError> {
        let len = bytes.len() as u64;
        Reader::from_source(Source::Memory(bytes), len)
    }

    /// A reader of `source` with nothing read yet.
    fn empty(source: Source, file_bytes: u64) -> Reader {
        Reader {
            source,
            file_bytes,
            version: (0, 0),
            header: Header::default(),
            header_ok: false,
            tables: Tables::default(),
            losses: Vec::new(),
            end: None,
            chunks: Vec::new(),
            segments: Vec::new(),
            damage: Vec::new(),
            footer_used: false,
        }
    }

    fn from_source(source: Source, file_bytes: u64) -> Result<Reader, ReadError> {
        let mut r = Reader::empty(source, file_bytes);
        let sig_len = file_bytes.min(SIGNATURE_BYTES as u64) as usize;
        let mut sig = vec![0u8; sig_len];
        r.source
            .read_at(0, &mut sig)
            .map_err(io_err("reading the signature"))?;
        let magic_len = sig_len.min(MAGIC.len());
        let magic_ok = sig_len > 0 && sig[..magic_len] == MAGIC[..magic_len];
        if sig_len < SIGNATURE_BYTES {
            if magic_ok {
                r.damage.push(Damage {
                    offset: 0,
                    chunk: None,
                    kind: DamageKind::Truncated {
                        expected_bytes: SIGNATURE_BYTES as u64,
                        available_bytes: sig_len as u64,
                    },
                });
                return Ok(r);
            }
            return Err(ReadError::NotATrace {
                found: sig[..magic_len].to_vec(),
            });
        }
        if let Some((major, minor)) = chunk::parse_signature(&sig) {
            if major > VERSION_MAJOR {
                return Err(ReadError::UnsupportedVersion {
                    major,
                    supported: VERSION_MAJOR,
                });
            }
            r.version = (major, minor);
        } else {
            // Damaged signature: accept it only if a valid header chunk follows, and then
            // assume the first minor version of the major version this reader knows.
            let mut h = [0u8; CHUNK_HEADER_BYTES];
            let ok = r.source.read_at(SIGNATURE_BYTES as u64, &mut h).is_ok()
                && ChunkHeader::parse(&h).is_some_and(|c| c.kind == ChunkType::Header);
            if !ok {
                return Err(ReadError::NotATrace {
                    found: sig[..8].to_vec(),
                });
            }
            r.version = (VERSION_MAJOR, 0);
            r.damage.push(Damage {
                offset: 0,
                chunk: None,
                kind: DamageKind::BadSignature,
            });
        }
        r.walk()?;
        r.load()?;
        Ok(r)
    }

    /// Walks chunk headers from the signature to the end, resynchronising after damage, and
    /// stops where another trace starts.
    fn walk(&mut self) -> Result<(), ReadError> {
        let mut pos = SIGNATURE_BYTES as u64;
        let mut hbuf = [0u8; CHUNK_HEADER_BYTES];
        let mut seen_header = false;
        while pos < self.file_bytes {
            let left = self.file_bytes - pos;
            let parsed = if left >= CHUNK_HEADER_BYTES as u64 {
                self.source
                    .read_at(pos, &mut hbuf)
                    .map_err(io_err(format!("reading the chunk header at byte {pos}")))?;
                ChunkHeader::parse(&hbuf)
            } else {
                None
            };
            if let Some(at) = self.another_trace(pos, parsed.as_ref(), seen_header) {
                self.damage.push(Damage {
                    offset: at,
                    chunk: None,
                    kind: DamageKind::AnotherTrace {
                        skipped_bytes: self.file_bytes - at,
                    },
                });
                break;
            }
            seen_header |= parsed.is_some_and(|h| h.kind == ChunkType::Header);
            match parsed {
                Some(h) if pos + h.total_len() <= self.file_bytes => {
                    self.chunks.push(ChunkInfo {
                        offset: pos,
                        header: h,
                    });
                    pos += h.total_len();
                }
                Some(h) => {
                    self.damage.push(Damage {
                        offset: pos,
                        chunk: Some(h.kind.name()),
                        kind: DamageKind::Truncated {
                            expected_bytes: h.total_len(),
                            available_bytes: left,
                        },
                    });
                    break;
                }
                None => {
                    let next = self.resync(pos + 1)?;
                    if next.is_none()
                        && left < CHUNK_HEADER_BYTES as u64
                        && hbuf_is_prefix(&self.source, pos, left as usize)
                    {
                        self.damage.push(Damage {
                            offset: pos,
                            chunk: None,
                            kind: DamageKind::Truncated {
                                expected_bytes: CHUNK_HEADER_BYTES as u64,
                                available_bytes: left,
                            },
                        });
                        break;
                    }
                    let to = next.unwrap_or(self.file_bytes);
                    self.damage.push(Damage {
                        offset: pos,
                        chunk: None,
                        kind: DamageKind::BadChunkHeader {
                            skipped_bytes: to - pos,
                        },
                    });
                    pos = to;
                }
            }
        }
        Ok(())
    }

    /// Where another trace starts, when one starts at `pos`: a valid signature there, or a
    /// second `header` chunk (`parsed`, the chunk header at `pos`) behind its signature
    /// (when that is intact) or alone.
    fn another_trace(
        &self,
        pos: u64,
        parsed: Option<&ChunkHeader>,
        seen_header: bool,
    ) -> Option<u64> {
        let signature_at = |at: u64| {
            let mut sig = [0u8; SIGNATURE_BYTES];
            at + SIGNATURE_BYTES as u64 <= self.file_bytes
                && self.source.read_at(at, &mut sig).is_ok()
                && chunk::parse_signature(&sig).is_some()
        };
        match parsed {
            None if signature_at(pos) => Some(pos),
            Some(h) if h.kind == ChunkType::Header && seen_header => {
                let before = pos.checked_sub(SIGNATURE_BYTES as u64);
                Some(before.filter(|&b| signature_at(b)).unwrap_or(pos))
            }
            _ => None,
        }
    }

    /// Finds the next offset ≥ `from` holding a valid chunk header: reads 1 MiB at a time,
    /// looks for the sync marker 8 bytes at a time (so runs of zeros pass at memory speed) and
    /// jumps over the holes of a sparse file without reading them (no header starts in one).
    fn resync(&self, from: u64) -> Result<Option<u64>, ReadError> {
        const BLOCK: u64 = 1 << 20;
        let mut start = from;
        while start + CHUNK_HEADER_BYTES as u64 <= self.file_bytes {
            match self.source.next_data(start) {
                None => break,
                Some(data) if data > start => {
                    start = data;
                    continue;
                }
                Some(_) => {}
            }
            let len = (self.file_bytes - start).min(BLOCK + CHUNK_HEADER_BYTES as u64) as usize;
            let buf = self
                .source
                .read_vec(start, len)
                .map_err(io_err(format!("reading byte {start}")))?;
            let mut i = 0;
            while i + CHUNK_HEADER_BYTES <= buf.len() {
                match memfind(&buf[i..], &CHUNK_SYNC) {
                    Some(j) if i + j + CHUNK_HEADER_BYTES <= buf.len() => {
                        let at = i + j;
                        if ChunkHeader::parse(&buf[at..at + CHUNK_HEADER_BYTES]).is_some() {
                            return Ok(Some(start + at as u64));
                        }
                        i = at + 1;
                    }
                    _ => break,
                }
            }
            if (len as u64) < BLOCK {
                break;
            }
            start += BLOCK;
        }
        Ok(None)
    }

    /// Reads, verifies and decompresses a chunk's payload (with the thread's decoder for
    /// tables: a zstd context is costly to make, and a recording of thousands of parts opens
    /// several table chunks per part).
    fn payload(&self, c: &ChunkInfo) -> Result<Vec<u8>, Damage> {
        thread_local! {
            static TABLES: std::cell::RefCell<SegmentDecoder> =
                std::cell::RefCell::new(SegmentDecoder::new());
        }
        TABLES.with_borrow_mut(|d| {
            self.payload_into(c, d)?;
            Ok(std::mem::take(&mut d.raw))
        })
    }

    /// Reads, verifies and decompresses a chunk's payload into `d.raw`.
    fn payload_into(&self, c: &ChunkInfo, d: &mut SegmentDecoder) -> Result<(), Damage> {
        self.stored_into(c, d)?;
        chunk::decompress_into(&c.header, &d.stored, &mut d.raw, &mut d.dctx).map_err(|e| Damage {
            offset: c.offset,
            chunk: Some(c.header.kind.name()),
            kind: DamageKind::Undecodable(e),
        })
    }

    /// Reads the stored payload of chunk `c` into `d.stored` and checks its CRC.
    fn stored_into(&self, c: &ChunkInfo, d: &mut SegmentDecoder) -> Result<(), Damage> {
        let damage = |kind| Damage {
            offset: c.offset,
            chunk: Some(c.header.kind.name()),
            kind,
        };
        // Every byte is read over, so only new room is zeroed.
        let len = c.header.stored_len as usize;
        d.stored.truncate(len);
        d.stored.resize(len, 0);
        self.source
            .read_at(c.offset + CHUNK_HEADER_BYTES as u64, &mut d.stored)
            .map_err(|e| {
                damage(DamageKind::Unreadable {
                    message: e.to_string(),
                })
            })?;
        let crc = crc32fast::hash(&d.stored);
        if crc != c.header.payload_crc {
            return Err(damage(DamageKind::ChecksumMismatch {
                expected: c.header.payload_crc,
                actual: crc,
            }));
        }
        Ok(())
    }

    /// Loads header, tables, losses, end and footer; lists segments.
    fn load(&mut self) -> Result<(), ReadError> {
        let chunks = std::mem::take(&mut self.chunks);
        let mut footer: Option<(ChunkInfo, Vec<IndexEntry>)> = None;
        for c in &chunks {
            let kind = c.header.kind;
            if kind == ChunkType::Events {
                self.segments.push(SegmentInfo {
                    index: self.segments.len(),
                    offset: c.offset,
                    events: c.header.records,
                    chunk_bytes: c.header.total_len(),
                    time_range_ns: None,
                    header: c.header,
                });
                continue;
            }
            if let ChunkType::Unknown(_) = kind {
                continue;
            }
            let p = match self.payload(c) {
                Ok(p) => p,
                Err(d) => {
                    self.damage.push(d);
                    continue;
                }
            };
            let segment = self.segments.len();
            let n = c.header.records;
            let res: Result<(), DecodeError> = (|| {
                match kind {
                    ChunkType::Header if !self.header_ok => {
                        self.header = chunk::decode_header(&p)?;
                        self.header_ok = true;
                    }
                    ChunkType::Devices => {
                        for d in chunk::decode_devices(&p, n)? {
                            if !self.tables.devices.contains_key(&d.dev) {
                                self.tables.device_order.push(d.dev);
                            }
                            self.tables.devices.insert(d.dev, d);
                        }
                    }
                    ChunkType::Processes => {
                        for pr in chunk::decode_processes(&p, n)? {
                            self.tables.process_entries += 1;
                            self.tables
                                .processes
                                .entry(pr.tid)
                                .or_default()
                                .push((segment, pr));
                        }
                    }
                    ChunkType::Paths => {
                        for pe in chunk::decode_paths(&p, n)? {
                            self.tables.paths.insert(pe.path_id, pe);
                        }
                    }
                    ChunkType::Cgroups => {
                        self.tables.has_cgroup_table = true;
                        for c in chunk::decode_cgroups(&p, n)? {
                            self.tables.cgroups.insert(c.id, c);
                        }
                    }
                    ChunkType::Losses => self.losses.extend(chunk::decode_losses(&p, n)?),
                    ChunkType::End => self.end = Some(chunk::decode_end(&p)?),
                    ChunkType::Footer => footer = Some((*c, chunk::decode_footer(&p)?.0)),
                    _ => {}
                }
                Ok(())
            })();
            if let Err(e) = res {
                self.damage.push(Damage {
                    offset: c.offset,
                    chunk: Some(kind.name()),
                    kind: DamageKind::Undecodable(e),
                });
            }
        }
        self.chunks = chunks;
        if let Some((fc, entries)) = footer {
            self.apply_footer(&fc, &entries);
        }
        Ok(())
    }

    /// Uses the footer's timestamps when its index agrees with the chunks walked.
    fn apply_footer(&mut self, fc: &ChunkInfo, entries: &[IndexEntry]) {
        let walked: Vec<&ChunkInfo> = self
            .chunks
            .iter()
            .filter(|c| c.header.kind != ChunkType::Footer)
            .collect();
        let agrees = walked.len() == entries.len()
            && walked.iter().zip(entries).all(|(c, e)| {
                c.offset == e.offset
                    && c.header.kind.code() == e.kind
                    && c.header.records == e.records
            });
        if !agrees {
            self.damage.push(Damage {
                offset: fc.offset,
                chunk: Some("footer"),
                kind: DamageKind::BadFooter,
            });
            return;
        }
        let mut seg = self.segments.iter_mut();
        for e in entries {
            if e.kind == ChunkType::Events.code() {
                if let Some(s) = seg.next() {
                    s.time_range_ns = Some((e.first_timestamp_ns, e.last_timestamp_ns));
                }
            }
        }
        self.footer_used = true;
    }

    /// One trace of the files of one recording written in parts (`iodump record --rotate`),
    /// each opened with [`Reader::open`], in order: their chunks and segments end to end
    /// (offsets count from the start of the first file, as if the files were one), their
    /// tables merged (every part repeats the entries its events use, with the same ids),
    /// their losses together. The header is the first part's; the end is the last part's,
    /// with the events and losses of all, when every part has one.
    /// Reports `kind` at the start of this file, before the damage found in it.
    pub(crate) fn damage_at_start(&mut self, kind: DamageKind) {
        self.damage.insert(
            0,
            Damage {
                offset: 0,
                chunk: None,
                kind,
            },
        );
    }

    pub fn concat(parts: Vec<Reader>) -> Reader {
        let mut it = parts.into_iter();
        let Some(mut r) = it.next() else {
            return Reader::empty(Source::Memory(Vec::new()), 0);
        };
        let first = std::mem::replace(&mut r.source, Source::Memory(Vec::new()));
        let mut sources = vec![(0u64, first)];
        let mut ends = r.end.take().into_iter().collect::<Vec<_>>();
        let mut parts_seen = 1;
        for mut p in it {
            parts_seen += 1;
            let start = r.file_bytes;
            let seg0 = r.segments.len();
            r.file_bytes += p.file_bytes;
            r.version.1 = r.version.1.max(p.version.1);
            r.header_ok &= p.header_ok;
            r.footer_used &= p.footer_used;
            r.chunks.extend(p.chunks.iter().map(|c| ChunkInfo {
                offset: c.offset + start,
                ..*c
            }));
            r.segments.extend(p.segments.iter().map(|s| SegmentInfo {
                index: s.index + seg0,
                offset: s.offset + start,
                ..*s
            }));
            r.damage.extend(p.damage.drain(..).map(|d| Damage {
                offset: d.offset + start,
                ..d
            }));
            r.losses.append(&mut p.losses);
            r.tables.merge(std::mem::take(&mut p.tables), seg0);
            ends.extend(p.end.take());
            sources.push((
                start,
                std::mem::replace(&mut p.source, Source::Memory(Vec::new())),
            ));
        }
        if ends.len() == parts_seen {
            let mut end = ends.last().cloned().unwrap_or_default();
            end.events = ends.iter().map(|e| e.events).sum();
            end.lost_events = ends.iter().map(|e| e.lost_events).sum();
            r.end = Some(end);
        }
        r.source = if sources.len() == 1 {
            sources
                .pop()
                .map(|(_, s)| s)
                .unwrap_or(Source::Memory(Vec::new()))
        } else {
            Source::Parts(sources, FilePool::default())
        };
        r
    }

    /// The recording's header (default values if the header chunk is damaged).
    pub fn header(&self) -> &Header {
        &self.header
    }
    /// False when the header chunk was missing or damaged.
    pub fn header_ok(&self) -> bool {
        self.header_ok
    }
    /// Format version `(major, minor)` of the file.
    pub fn version(&self) -> (u16, u16) {
        self.version
    }
    /// Size of the file in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }
    /// The tables.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }
    /// Loss records.
    pub fn losses(&self) -> &[Loss] {
        &self.losses
    }
    /// Sum of all loss records.
    pub fn lost_events(&self) -> u64 {
        self.losses.iter().map(|l| l.count).sum()
    }
    /// The end chunk, if the recording finished cleanly.
    pub fn end(&self) -> Option<&EndInfo> {
        self.end.as_ref()
    }
    /// Every readable chunk, in file order.
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }
    /// Event segments, in file order.
    pub fn segments(&self) -> &[SegmentInfo] {
        &self.segments
    }
    /// True when a consistent footer index was found.
    pub fn has_footer(&self) -> bool {
        self.footer_used
    }
    /// Events announced by the segment headers (decode to be sure they are intact).
    pub fn announced_events(&self) -> u64 {
        self.segments.iter().map(|s| s.events as u64).sum()
    }
    /// Damage found while opening (bad headers, truncation, damaged tables). Damage inside
    /// event segments is found when they are decoded; see [`Reader::validate`].
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    /// Decodes segment `index`. A damaged segment gives its [`Damage`] and no events.
    pub fn decode_segment(&self, index: usize) -> Result<EventBatch, Damage> {
        let mut b = EventBatch::default();
        self.decode_segment_into(index, &mut b, &mut SegmentDecoder::new())?;
        Ok(b)
    }

    /// Decodes segment `index` into `out`, reusing `out`'s and `dec`'s buffers (a warm
    /// decoder allocates nothing). On damage `out` is left empty.
    pub fn decode_segment_into(
        &self,
        index: usize,
        out: &mut EventBatch,
        dec: &mut SegmentDecoder,
    ) -> Result<(), Damage> {
        self.decode_segment_projected(index, Columns::ALL, out, dec)
    }

    /// Decodes the columns `want` of segment `index` (and those they need,
    /// [`Columns::needed`]) into `out`; its other columns are left empty. A segment whose
    /// columns are compressed apart (spec §4.5) has only those columns' frames decompressed.
    /// On damage `out` is left empty.
    pub fn decode_segment_projected(
        &self,
        index: usize,
        want: Columns,
        out: &mut EventBatch,
        dec: &mut SegmentDecoder,
    ) -> Result<(), Damage> {
        out.clear();
        let s = self.segments.get(index).ok_or(Damage {
            offset: self.file_bytes,
            chunk: Some("events"),
            kind: DamageKind::Undecodable(DecodeError::OutOfRange {
                what: "segment index",
                at: 0,
                value: index as u64,
                max: self.segments.len() as u64,
            }),
        })?;
        let c = ChunkInfo {
            offset: s.offset,
            header: s.header,
        };
        let damage = |e| Damage {
            offset: c.offset,
            chunk: Some("events"),
            kind: DamageKind::Undecodable(e),
        };
        let needed = want.needed();
        // A framed segment is decoded through its index whatever is wanted, so that an index
        // that does not match its frames is damage for every reader (spec §4.5), not only for
        // those that decode some columns.
        let r = if c.header.flags & chunk::FLAG_ZSTD == 0 {
            self.payload_into(&c, dec)?;
            decode_segment_projected(&dec.raw, want, out, &mut dec.scratch).map_err(damage)
        } else {
            self.stored_into(&c, dec)?;
            match frames::parse_index(&dec.stored, c.header.raw_len as usize) {
                Ok(Some(idx)) => decode_framed(&idx, needed, out, dec).map_err(damage),
                Ok(None) => {
                    chunk::decompress_into(&c.header, &dec.stored, &mut dec.raw, &mut dec.dctx)
                        .and_then(|()| {
                            decode_segment_projected(&dec.raw, want, out, &mut dec.scratch)
                        })
                        .map_err(damage)
                }
                Err(e) => Err(damage(e)),
            }
        };
        if r.is_ok() && out.len() != s.events as usize {
            let n = out.len();
            out.clear();
            return Err(damage(DecodeError::Inconsistent {
                what: "events in segment versus chunk header",
                expected: s.events as u64,
                actual: n as u64,
            }));
        }
        if r.is_err() {
            out.clear();
        }
        r
    }

    /// Decodes every segment in parallel (rayon) and maps each batch with `f`; results come
    /// back in segment order. Each thread reuses one batch, so only a few are in memory.
    pub fn par_map_segments<T, F>(&self, f: F) -> Vec<(usize, Result<T, Damage>)>
    where
        T: Send,
        F: Fn(usize, &EventBatch) -> T + Sync + Send,
    {
        self.par_map_segments_where(|_| true, f)
    }

    /// As [`Reader::par_map_segments`], of the segments `keep` keeps only (the others are
    /// not decoded: e.g. those a window of time leaves out).
    pub fn par_map_segments_where<T, F>(
        &self,
        keep: impl Fn(usize) -> bool + Sync + Send,
        f: F,
    ) -> Vec<(usize, Result<T, Damage>)>
    where
        T: Send,
        F: Fn(usize, &EventBatch) -> T + Sync + Send,
    {
        (0..self.segments.len())
            .into_par_iter()
            .filter(|&i| keep(i))
            .map_init(
                || (EventBatch::default(), SegmentDecoder::new()),
                |(batch, dec), i| {
                    (
                        i,
                        self.decode_segment_into(i, batch, dec)
                            .map(|()| f(i, batch)),
                    )
                },
            )
            .collect()
    }

    /// Decodes every segment in file order, one thread, reusing one batch.
    pub fn for_each_segment(&self, mut f: impl FnMut(usize, Result<&EventBatch, Damage>)) {
        let mut batch = EventBatch::default();
        let mut dec = SegmentDecoder::new();
        for i in 0..self.segments.len() {
            match self.decode_segment_into(i, &mut batch, &mut dec) {
                Ok(()) => f(i, Ok(&batch)),
                Err(d) => f(i, Err(d)),
            }
        }
    }

    /// Decodes every segment in parallel and returns all damage: what [`Reader::damage`]
    /// found while opening plus every segment that fails to decode.
    pub fn validate(&self) -> Vec<Damage> {
        let mut d = self.damage.clone();
        d.extend(
            self.par_map_segments(|_, _| ())
                .into_iter()
                .filter_map(|(_, r)| r.err()),
        );
        d.sort_by_key(|x| x.offset);
        d
    }

    /// Decoded segments in file order, one at a time.
    pub fn batches(&self) -> impl Iterator<Item = (usize, Result<EventBatch, Damage>)> + '_ {
        (0..self.segments.len()).map(move |i| (i, self.decode_segment(i)))
    }

    /// Every event of every intact segment, in file order (damaged segments are skipped;
    /// [`Reader::validate`] names them). Decodes one segment at a time into a reused batch.
    pub fn events(&self) -> Events<'_> {
        Events {
            reader: self,
            next_segment: 0,
            row: 0,
            batch: EventBatch::default(),
            dec: SegmentDecoder::new(),
        }
    }

    /// The comm of thread `tid` (falling back to the process `pid`) as of segment `segment`.
    pub fn comm(&self, pid: u32, tid: u32, segment: usize) -> Option<&[u8]> {
        self.process_of(pid, tid, segment)
            .map(|p| p.comm.as_slice())
    }

    /// The process entry of thread `tid` (falling back to the process `pid`) as of segment
    /// `segment`.
    pub fn process_of(&self, pid: u32, tid: u32, segment: usize) -> Option<&Process> {
        self.tables
            .process(tid, segment)
            .or_else(|| self.tables.process(pid, segment))
    }

    /// The command line of the process of thread `tid` (falling back to the process `pid`) as
    /// of segment `segment`, or its comm when the trace does not know it
    /// ([`Process::args_or_comm`]).
    pub fn args(&self, pid: u32, tid: u32, segment: usize) -> Option<&[u8]> {
        self.process_of(pid, tid, segment).map(|p| p.args_or_comm())
    }
}

fn hbuf_is_prefix(src: &Source, pos: u64, len: usize) -> bool {
    let mut b = vec![0u8; len];
    src.read_at(pos, &mut b).is_ok() && b.iter().zip(CHUNK_SYNC.iter()).all(|(a, s)| a == s)
}

/// The first position of `needle` in `hay`.
fn memfind(hay: &[u8], needle: &[u8; 4]) -> Option<usize> {
    let mut i = 0;
    while let Some(j) = find_byte(&hay[i..], needle[0]) {
        let at = i + j;
        match hay.get(at..at + 4) {
            Some(w) if w == needle => return Some(at),
            Some(_) => i = at + 1,
            None => return None,
        }
    }
    None
}

/// The first position of byte `b` in `hay`, testing 8 bytes at a time: a word holds `b` when
/// the word XOR `b` repeated has a zero byte.
fn find_byte(hay: &[u8], b: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pattern = LO * b as u64;
    let mut words = hay.chunks_exact(8);
    let mut base = 0;
    for w in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(w);
        let x = u64::from_le_bytes(bytes) ^ pattern;
        if x.wrapping_sub(LO) & !x & HI != 0 {
            if let Some(p) = w.iter().position(|&c| c == b) {
                return Some(base + p);
            }
        }
        base += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&c| c == b)
        .map(|p| base + p)
}

/// Iterator over the events of a trace; see [`Reader::events`].
pub struct Events<'a> {
    reader: &'a Reader,
    next_segment: usize,
    row: usize,
    batch: EventBatch,
    dec: SegmentDecoder,
}

impl Iterator for Events<'_> {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        while self.row >= self.batch.len() {
            if self.next_segment >= self.reader.segments.len() {
                return None;
            }
            let i = self.next_segment;
            self.next_segment += 1;
            self.row = 0;
            // A damaged segment leaves the batch empty: skip it.
            let _ = self
                .reader
                .decode_segment_into(i, &mut self.batch, &mut self.dec);
        }
        let e = self.batch.get(self.row);
        self.row += 1;
        Some(e)
    }
}

/// Decodes the columns `needed` of a framed segment whose stored payload is in `dec.stored`
/// and whose index is `idx`: only their frames are decompressed (into `dec.raw`).
fn decode_framed(
    idx: &frames::Index,
    needed: Columns,
    out: &mut EventBatch,
    dec: &mut SegmentDecoder,
) -> Result<(), DecodeError> {
    let SegmentDecoder {
        stored,
        raw,
        scratch,
        dctx,
    } = dec;
    raw.clear();
    let mut seen = Columns::NONE;
    let mut ranges = [(0usize, 0usize); col::COUNT];
    for (k, f) in idx.frames.iter().enumerate() {
        let known = (1..=col::COUNT as u64).contains(&f.column_id);
        if known {
            if seen.contains(f.column_id) {
                return Err(DecodeError::Inconsistent {
                    what: "column present twice",
                    expected: 1,
                    actual: 2,
                });
            }
            seen = seen.union(Columns::of(&[f.column_id]));
        }
        if !known || !needed.contains(f.column_id) {
            continue;
        }
        // Decompressed straight after what `raw` holds (no copy): the frame's varints, then
        // the column's block, whose range is kept.
        let at = raw.len();
        raw.reserve(f.raw_len);
        let mut tail = std::io::Cursor::new(&mut *raw);
        tail.set_position(at as u64);
        let n = dctx
            .decompress_to_buffer(&stored[f.offset..f.offset + f.stored_len], &mut tail)
            .map_err(|e| DecodeError::Zstd {
                message: e.to_string(),
            })?;
        if n != f.raw_len || raw.len() != at + n {
            return Err(DecodeError::Inconsistent {
                what: "decompressed frame length",
                expected: f.raw_len as u64,
                actual: n as u64,
            });
        }
        let mut c = crate::bytes::Cursor::new(&raw[at..at + n]);
        if k == 0 {
            let rows = c.varint()?;
            c.varint()?; // ncols
            if rows != idx.rows as u64 {
                return Err(DecodeError::Inconsistent {
                    what: "segment rows versus its index",
                    expected: idx.rows as u64,
                    actual: rows,
                });
            }
        }
        let id = c.varint()?;
        if id != f.column_id {
            return Err(DecodeError::Inconsistent {
                what: "column id versus the segment index",
                expected: f.column_id,
                actual: id,
            });
        }
        let len = c.varint_max(c.remaining() as u64, "column length")? as usize;
        let start = n - c.remaining();
        if c.remaining() != len {
            return Err(DecodeError::TrailingBytes {
                what: "column frame",
                extra: c.remaining().saturating_sub(len),
            });
        }
        ranges[f.column_id as usize - 1] = (at + start, at + start + len);
    }
    let mut blocks: [&[u8]; col::COUNT] = [&[]; col::COUNT];
    for (b, &(a, z)) in blocks.iter_mut().zip(&ranges) {
        *b = &raw[a..z];
    }
    decode_columns(idx.rows, &blocks, seen, needed, out, scratch)
}

/// `Err` when a file of type `ft` cannot hold a trace: anything but a regular file.
fn not_a_trace_file(path: &Path, ft: std::fs::FileType) -> Result<(), ReadError> {
    use std::os::unix::fs::FileTypeExt;
    let what = if ft.is_file() {
        return Ok(());
    } else if ft.is_dir() {
        "is a directory"
    } else if ft.is_fifo() {
        "is a FIFO, not a trace file (a trace is read from its end: save it to a file first)"
    } else if ft.is_socket() {
        "is a socket, not a trace file"
    } else if ft.is_block_device() || ft.is_char_device() {
        "is a device, not a trace file"
    } else {
        "is not a regular file"
    };
    Err(ReadError::Io {
        context: format!("reading {}", path.display()),
        source: io::Error::other(what),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memfind_agrees_with_a_naive_search() {
        let mut x = 1u32;
        for len in 0..200 {
            for _ in 0..20 {
                // Bytes from a small alphabet, so that partial and whole markers are common.
                let hay: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                        [0, b'I', b'O', b'D', b'C', b'I'][(x >> 16) as usize % 6]
                    })
                    .collect();
                let naive = hay.windows(4).position(|w| w == CHUNK_SYNC);
                assert_eq!(memfind(&hay, &CHUNK_SYNC), naive, "{hay:?}");
                assert_eq!(find_byte(&hay, b'D'), hay.iter().position(|&c| c == b'D'));
            }
        }
    }
}
