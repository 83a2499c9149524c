//! The streaming [`Writer`]: buffers one segment of events and the table entries they need,
//! writes each chunk with a single `write_all`, and keeps its memory bounded.

use std::io::Write;

use crate::cgroup::Cgroup;
use crate::chunk::{
    self, signature, ChunkHeader, ChunkType, IndexEntry, CHUNK_HEADER_BYTES, FLAG_ZSTD,
};
use crate::error::WriteError;
use crate::event::{Device, EndInfo, Event, Header, Loss, PathEntry, Process};
use crate::inthash::IntMap;
use crate::literals::LiteralsCompressor;
use crate::segment::{encode_segment, SegmentScratch, MAX_SEGMENT_EVENTS};

/// Tuning of a [`Writer`].
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Upper bound of the writer's own memory (buffers, compressor), in bytes. Default 64 MiB;
    /// at least 4 MiB.
    pub memory_limit_bytes: usize,
    /// Events per segment (fewer if the memory limit requires it). Default 65 536.
    pub segment_events: usize,
    /// zstd level for compressed chunks. Default 3.
    pub zstd_level: i32,
    /// The shortest match zstd looks for, in bytes (zstd's `minMatch`, 3..=7); 0 keeps the
    /// level's own. Default 7: in byte planes a short match is mostly a coincidence that
    /// costs the decoder a sequence; with only long matches traces came out 0.2–2.4%
    /// smaller and decoded 2–16% faster (BENCHMARKS.md, trace format). Readers are not
    /// concerned: any zstd decoder reads the frames.
    pub zstd_min_match: u32,
    /// Write the footer index at [`Writer::finish`]. Default true.
    pub footer: bool,
    /// Compress each column of a segment of at least [`crate::frames::FRAMED_MIN_ROWS`]
    /// events apart (spec §4.5), so that a query decompresses only the columns it reads.
    /// Default true; false writes one frame per segment, as before 1.5.
    pub column_frames: bool,
    /// Within a column's frame, compress each byte plane of at least
    /// [`crate::frames::PLANE_FRAME_MIN_BYTES`] as a zstd frame of its own (spec §4.5, since
    /// 1.6). Default true; false writes one zstd frame per column, as 1.5 did.
    pub plane_frames: bool,
    /// Also compress each such plane as literals only (Huffman coding, no LZ matches;
    /// [`crate::literals`]) and keep that frame when it is no larger. Default true: on
    /// synthetic and real traces 2–3% smaller, and their frames decompressed in 0.6–0.7 of
    /// the time (BENCHMARKS.md, trace format). Readers are not concerned: both are standard
    /// zstd frames.
    pub literal_planes: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            memory_limit_bytes: 64 << 20,
            segment_events: 65_536,
            zstd_level: 3,
            zstd_min_match: 7,
            footer: true,
            column_frames: true,
            plane_frames: true,
            literal_planes: true,
        }
    }
}

/// Bytes of writer memory per buffered event: the event itself, the raw segment bytes
/// (at most ~60 per event) and the compressed copy.
const BYTES_PER_BUFFERED_EVENT: usize = std::mem::size_of::<Event>() + 2 * 80;
/// Memory set aside for the zstd contexts (the second, for literals-only planes, about
/// 0.9 MiB once used) and fixed buffers.
const FIXED_BYTES: usize = 4 << 20;

/// What a [`Writer`] has written so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Events written (including those still buffered).
    pub events: u64,
    /// Sum of the loss records written.
    pub lost_events: u64,
    /// Bytes written to the output so far.
    pub bytes_written: u64,
    /// Event segments written.
    pub segments: u64,
}

/// Writes a trace: `new` (signature and header), then any mix of table entries, events and
/// losses, then [`finish`](Writer::finish). Table entries must be added before the first
/// event that refers to them is flushed (adding them before the event is always enough).
///
/// Every chunk reaches the output in one `write_all`, so a file cut anywhere (crash, disk
/// full) still holds every chunk written before the cut.
pub struct Writer<W: Write> {
    out: W,
    opts: WriterOptions,
    segment_events: usize,
    events: Vec<Event>,
    devices: Vec<Device>,
    processes: Vec<Process>,
    /// Process entries added while events are buffered, with the number of events buffered
    /// when each came: a reader applies an entry from the segment after it (spec §3.3), so
    /// where the thread has events before it in the buffer (it exec'd or renamed itself),
    /// the segment is cut there ([`Writer::flush`]).
    held: Vec<(usize, Process)>,
    paths: Vec<PathEntry>,
    cgroups: Vec<Cgroup>,
    losses: Vec<Loss>,
    pending_table_bytes: usize,
    index: Vec<IndexEntry>,
    scratch: SegmentScratch,
    raw: Vec<u8>,
    chunk: Vec<u8>,
    compressed: Vec<u8>,
    compressor: zstd::bulk::Compressor<'static>,
    /// For [`WriterOptions::literal_planes`], made for the first segment with plane frames.
    literals: Option<LiteralsCompressor>,
    stats: WriterStats,
    failed: bool,
    /// When set, a copy of every chunk written goes here too ([`Writer::tap`]).
    sealed: Option<Vec<SealedChunk>>,
}

/// A chunk as written, header and payload, ready to be written again verbatim into another
/// trace ([`Writer::append_sealed`]): event segments and loss records refer to no other
/// chunk, so they can be copied between traces (the flight recorder's ring does).
#[derive(Clone, Debug)]
pub struct SealedChunk {
    /// The chunk's type.
    pub kind: ChunkType,
    /// Its header's `records`.
    pub records: u32,
    /// For event segments: first and last timestamp; else `(0, 0)`.
    pub ts_range_ns: (u64, u64),
    /// The whole chunk: its 32-byte header, then the payload.
    pub bytes: Vec<u8>,
}

impl Writer<std::fs::File> {
    /// Cuts the file at the end of its last complete chunk: after a failed write (a full file
    /// system) it may end in part of one, and would read as damaged; cut, it reads as a trace
    /// that did not finish.
    pub fn cut_at_last_chunk(&self) -> std::io::Result<()> {
        self.out.set_len(self.stats.bytes_written)
    }

    /// [`Writer::finish`], and when that fails, the file cut at the end of its last complete
    /// chunk ([`Writer::cut_at_last_chunk`]); the error comes with the bytes the file keeps.
    pub fn finish_or_cut(mut self, end: EndInfo) -> Result<std::fs::File, (WriteError, u64)> {
        if let Err(e) = self.flush() {
            let _ = self.cut_at_last_chunk();
            return Err((e, self.stats.bytes_written));
        }
        // Everything is written but the end and the footer.
        let (kept_bytes, file) = (self.stats.bytes_written, self.out.try_clone());
        self.finish(end).map_err(|e| {
            if let Ok(f) = file {
                let _ = f.set_len(kept_bytes);
            }
            (e, kept_bytes)
        })
    }
}

impl<W: Write> Writer<W> {
    /// Starts a trace: writes the signature and the header chunk.
    pub fn new(out: W, header: &Header, opts: WriterOptions) -> Result<Self, WriteError> {
        if opts.memory_limit_bytes < 4 << 20 {
            return Err(WriteError::BadOptions {
                what: format!(
                    "memory limit {} bytes is below the 4 MiB minimum",
                    opts.memory_limit_bytes
                ),
            });
        }
        if opts.segment_events == 0 || opts.segment_events > MAX_SEGMENT_EVENTS {
            return Err(WriteError::BadOptions {
                what: format!(
                    "segment_events {} not in 1..={MAX_SEGMENT_EVENTS}",
                    opts.segment_events
                ),
            });
        }
        let by_memory = (opts.memory_limit_bytes - FIXED_BYTES) / 2 / BYTES_PER_BUFFERED_EVENT;
        let segment_events = opts.segment_events.min(by_memory.max(1024));
        let mut compressor =
            zstd::bulk::Compressor::new(opts.zstd_level).map_err(|e| WriteError::BadOptions {
                what: format!("zstd level {}: {e}", opts.zstd_level),
            })?;
        if opts.zstd_min_match != 0 {
            compressor
                .set_parameter(zstd::zstd_safe::CParameter::MinMatch(opts.zstd_min_match))
                .map_err(|e| WriteError::BadOptions {
                    what: format!("zstd minimum match {}: {e}", opts.zstd_min_match),
                })?;
        }
        let mut w = Writer {
            out,
            opts,
            segment_events,
            events: Vec::with_capacity(segment_events),
            devices: Vec::new(),
            processes: Vec::new(),
            held: Vec::new(),
            paths: Vec::new(),
            cgroups: Vec::new(),
            losses: Vec::new(),
            pending_table_bytes: 0,
            index: Vec::new(),
            scratch: SegmentScratch::default(),
            raw: Vec::new(),
            chunk: Vec::new(),
            compressed: Vec::new(),
            compressor,
            literals: None,
            stats: WriterStats::default(),
            failed: false,
            sealed: None,
        };
        w.write_raw(&signature(), "file signature")?;
        let payload = chunk::encode_header(header);
        w.write_chunk(ChunkType::Header, 0, &payload, Compress::Never, (0, 0))?;
        Ok(w)
    }

    /// From now on, keeps a copy of every chunk written (tables, segments, losses, the end
    /// and footer) for [`Writer::take_sealed`]. A writer onto [`std::io::sink`] with a tap
    /// encodes into memory only.
    pub fn tap(&mut self) {
        self.sealed.get_or_insert_with(Vec::new);
    }

    /// The chunks written since the last call (with [`Writer::tap`]; else none), in order.
    pub fn take_sealed(&mut self) -> Vec<SealedChunk> {
        match &mut self.sealed {
            Some(v) => std::mem::take(v),
            None => Vec::new(),
        }
    }

    /// Writes a chunk sealed by another writer, verbatim (after the table entries pending
    /// here, so they precede it). Only event segments and loss records may be copied: other
    /// chunks belong to their own trace.
    pub fn append_sealed(&mut self, c: &SealedChunk) -> Result<(), WriteError> {
        if !matches!(c.kind, ChunkType::Events | ChunkType::Losses) {
            return Err(WriteError::Invalid {
                what: format!("a sealed {} chunk cannot be copied", c.kind.name()),
            });
        }
        self.flush_tables()?;
        let offset = self.stats.bytes_written;
        self.write_raw(&c.bytes, c.kind.name())?;
        self.index.push(IndexEntry {
            offset,
            kind: c.kind.code(),
            records: c.records,
            first_timestamp_ns: c.ts_range_ns.0,
            last_timestamp_ns: c.ts_range_ns.1,
        });
        match c.kind {
            ChunkType::Events => {
                self.stats.events += c.records as u64;
                self.stats.segments += 1;
            }
            _ => {
                self.stats.lost_events += sealed_lost_events(c);
            }
        }
        if let Some(s) = &mut self.sealed {
            s.push(c.clone());
        }
        Ok(())
    }

    /// Loss records added but not yet in a written chunk (after a failed write: those the
    /// output does not hold).
    pub fn unwritten_losses(&self) -> &[Loss] {
        &self.losses
    }

    /// The output (to cut a file at the end of its last complete chunk after a failed
    /// write: [`WriterStats::bytes_written`] counts only chunks written whole).
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Takes the events buffered, not in a written segment (after a failed write: those of
    /// the segment that could not be written), to be written elsewhere; they no longer count
    /// in [`WriterStats::events`].
    pub fn take_buffered(&mut self) -> Vec<Event> {
        // (Their events go elsewhere: the entries are written with the next tables.)
        for (_, p) in std::mem::take(&mut self.held) {
            self.processes.push(p);
        }
        let events = std::mem::take(&mut self.events);
        self.stats.events -= events.len() as u64;
        events
    }

    /// Buffers `events` (of [`Writer::take_buffered`] of another writer) as if pushed, without
    /// writing a segment: the next [`Writer::flush`] or push writes them.
    pub fn extend_buffered(&mut self, events: &[Event]) {
        self.events.extend_from_slice(events);
        self.stats.events += events.len() as u64;
    }

    /// Events buffered, not yet in a written segment.
    pub fn buffered_events(&self) -> usize {
        self.events.len()
    }

    /// Events per segment this writer uses (after the memory limit).
    pub fn segment_events(&self) -> usize {
        self.segment_events
    }

    /// What has been written so far.
    pub fn stats(&self) -> WriterStats {
        self.stats
    }

    /// Adds a device table entry.
    pub fn add_device(&mut self, d: Device) -> Result<(), WriteError> {
        self.pending_table_bytes += 32 + d.name.len();
        self.devices.push(d);
        self.maybe_flush_tables()
    }

    /// Adds a process table entry (a later entry for the same tid replaces the earlier one
    /// for the events that follow it: the thread exec'd or renamed itself; the segment
    /// being buffered is cut there when the thread has events before it).
    pub fn add_process(&mut self, p: Process) -> Result<(), WriteError> {
        self.pending_table_bytes += 32 + p.comm.len();
        if !self.events.is_empty() {
            self.held.push((self.events.len(), p));
            return Ok(());
        }
        self.processes.push(p);
        self.maybe_flush_tables()
    }

    /// Adds a path table entry.
    pub fn add_path(&mut self, p: PathEntry) -> Result<(), WriteError> {
        if p.path_id == 0 {
            return Err(WriteError::Invalid {
                what: "path id 0 (reserved for 'no path')".into(),
            });
        }
        self.pending_table_bytes += 48 + p.path.len();
        self.paths.push(p);
        self.maybe_flush_tables()
    }

    /// Adds a cgroup table entry (a later entry for the same id replaces the earlier one).
    pub fn add_cgroup(&mut self, c: Cgroup) -> Result<(), WriteError> {
        self.pending_table_bytes += 64 + c.path.len();
        self.cgroups.push(c);
        self.maybe_flush_tables()
    }

    /// Adds a loss record.
    pub fn add_loss(&mut self, l: Loss) -> Result<(), WriteError> {
        self.stats.lost_events += l.count;
        self.pending_table_bytes += 32;
        self.losses.push(l);
        self.maybe_flush_tables()
    }

    /// Adds one event; writes a segment when the buffer is full.
    pub fn push(&mut self, e: &Event) -> Result<(), WriteError> {
        self.events.push(*e);
        self.stats.events += 1;
        if self.events.len() >= self.segment_events {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes pending table entries, losses and buffered events now (e.g. on a timer, so
    /// that a crash loses little).
    pub fn flush(&mut self) -> Result<(), WriteError> {
        if self.held.is_empty() {
            self.flush_tables()?;
            return self.write_buffered();
        }
        // Where a held entry's thread has events before it, the segment ends there and the
        // entry is written between the two; the others apply to the whole segment.
        let held = std::mem::take(&mut self.held);
        let mut first: IntMap<u32, usize> = held.iter().map(|(_, p)| (p.tid, usize::MAX)).collect();
        for (i, e) in self.events.iter().enumerate() {
            if let Some(f) = first.get_mut(&e.tid) {
                if *f == usize::MAX {
                    *f = i;
                }
            }
        }
        let mut cuts: Vec<(usize, Process)> = Vec::new();
        for (at, p) in held {
            if first[&p.tid] < at {
                cuts.push((at, p));
            } else {
                self.processes.push(p);
            }
        }
        let mut rest = std::mem::take(&mut self.events);
        let mut done = 0;
        let mut cuts = cuts.into_iter().peekable();
        loop {
            let end = cuts.peek().map_or(done + rest.len(), |c| c.0);
            let tail = rest.split_off(end - done);
            self.events = std::mem::replace(&mut rest, tail);
            let r = self.flush_tables().and_then(|()| self.write_buffered());
            if let Err(e) = r {
                // What was not written stays buffered, its entries pending.
                self.events.append(&mut rest);
                self.processes.extend(cuts.map(|c| c.1));
                return Err(e);
            }
            done = end;
            match cuts.next() {
                Some((_, p)) => {
                    self.processes.push(p);
                    while let Some(c) = cuts.next_if(|c| c.0 == end) {
                        self.processes.push(c.1);
                    }
                }
                None => return Ok(()),
            }
        }
    }

    /// Writes the buffered events as one segment.
    fn write_buffered(&mut self) -> Result<(), WriteError> {
        if self.events.is_empty() {
            return Ok(());
        }
        let mut events = std::mem::take(&mut self.events);
        if !events.is_sorted_by_key(|e| e.timestamp_ns) {
            events.sort_by_key(|e| e.timestamp_ns);
        }
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        encode_segment(&events, &mut self.scratch, &mut raw);
        let range = (
            events.first().map_or(0, |e| e.timestamp_ns),
            events.last().map_or(0, |e| e.timestamp_ns),
        );
        // Large segments: each column its own frame, after an index (spec §4.5), so that a
        // query decompresses only the columns it reads.
        let framed = self.opts.column_frames && events.len() >= crate::frames::FRAMED_MIN_ROWS;
        let starts = std::mem::take(&mut self.scratch.starts);
        let cuts = std::mem::take(&mut self.scratch.plane_cuts);
        let r = self.write_chunk(
            ChunkType::Events,
            events.len() as u32,
            &raw,
            if framed {
                Compress::Framed(&starts, if self.opts.plane_frames { &cuts } else { &[] })
            } else {
                Compress::Whole
            },
            range,
        );
        self.scratch.starts = starts;
        self.scratch.plane_cuts = cuts;
        self.raw = raw;
        // A segment that could not be written stays buffered ([`Writer::take_buffered`]).
        if r.is_ok() {
            events.clear();
        }
        self.events = events;
        r?;
        self.stats.segments += 1;
        self.out.flush().map_err(|source| WriteError::Io {
            context: "flush",
            source,
        })
    }

    /// Flushes everything, writes the end chunk and the footer, and returns the output.
    /// `events` and `lost_events` of `end` are filled in from what was written.
    pub fn finish(mut self, mut end: EndInfo) -> Result<W, WriteError> {
        self.flush()?;
        end.events = self.stats.events;
        end.lost_events = self.stats.lost_events;
        let payload = chunk::encode_end(&end);
        self.write_chunk(ChunkType::End, 0, &payload, Compress::Never, (0, 0))?;
        if self.opts.footer {
            let footer_offset = self.stats.bytes_written;
            let payload = chunk::encode_footer(&self.index, footer_offset);
            self.write_chunk(
                ChunkType::Footer,
                self.index.len() as u32,
                &payload,
                Compress::Never,
                (0, 0),
            )?;
        }
        self.out.flush().map_err(|source| WriteError::Io {
            context: "flush",
            source,
        })?;
        Ok(self.out)
    }

    fn maybe_flush_tables(&mut self) -> Result<(), WriteError> {
        if self.pending_table_bytes > self.opts.memory_limit_bytes / 8 {
            self.flush_tables()?;
        }
        Ok(())
    }

    fn flush_tables(&mut self) -> Result<(), WriteError> {
        let mut raw = std::mem::take(&mut self.raw);
        let mut r = Ok(());
        macro_rules! table {
            ($field:ident, $enc:path, $kind:expr) => {
                if r.is_ok() && !self.$field.is_empty() {
                    raw.clear();
                    $enc(&self.$field, &mut raw);
                    let n = self.$field.len() as u32;
                    r = self.write_chunk($kind, n, &raw, Compress::Whole, (0, 0));
                    if r.is_ok() {
                        self.$field.clear();
                    }
                }
            };
        }
        table!(devices, chunk::encode_devices, ChunkType::Devices);
        table!(processes, chunk::encode_processes, ChunkType::Processes);
        table!(paths, chunk::encode_paths, ChunkType::Paths);
        table!(cgroups, chunk::encode_cgroups, ChunkType::Cgroups);
        table!(losses, chunk::encode_losses, ChunkType::Losses);
        self.raw = raw;
        if r.is_ok() {
            self.pending_table_bytes = 0;
        }
        r
    }

    fn write_raw(&mut self, bytes: &[u8], context: &'static str) -> Result<(), WriteError> {
        if self.failed {
            return Err(WriteError::Io {
                context,
                source: std::io::Error::other("an earlier write failed"),
            });
        }
        if let Err(source) = self.out.write_all(bytes) {
            self.failed = true;
            return Err(WriteError::Io { context, source });
        }
        self.stats.bytes_written += bytes.len() as u64;
        Ok(())
    }

    fn write_chunk(
        &mut self,
        kind: ChunkType,
        records: u32,
        raw: &[u8],
        compress: Compress<'_>,
        ts_range: (u64, u64),
    ) -> Result<(), WriteError> {
        if raw.len() > chunk::MAX_CHUNK_PAYLOAD as usize {
            return Err(WriteError::Invalid {
                what: format!("a {} chunk of {} bytes", kind.name(), raw.len()),
            });
        }
        let mut buf = std::mem::take(&mut self.chunk);
        buf.clear();
        buf.resize(CHUNK_HEADER_BYTES, 0);
        let mut flags = 0u16;
        if !matches!(compress, Compress::Never) && raw.len() > 64 {
            let mut z = std::mem::take(&mut self.compressed);
            z.clear();
            let cctx = &mut self.compressor;
            // (compress_to_buffer fills a Vec from its start: one piece at a time, appended)
            let mut pz = Vec::new();
            let mut one = |piece: &[u8], out: &mut Vec<u8>| -> std::io::Result<usize> {
                pz.clear();
                pz.reserve(zstd::zstd_safe::compress_bound(piece.len()));
                let n = cctx.compress_to_buffer(piece, &mut pz)?;
                out.extend_from_slice(&pz[..n]);
                Ok(n)
            };
            let ok = match compress {
                Compress::Framed(starts, cuts) if !starts.is_empty() => {
                    if self.literals.is_none() && self.opts.literal_planes && self.opts.plane_frames
                    {
                        self.literals = LiteralsCompressor::new(self.opts.zstd_level);
                    }
                    let literals = &mut self.literals;
                    // A plane's piece: the smaller of zstd's frame and one of literals only.
                    let best = |piece: &[u8], out: &mut Vec<u8>| -> std::io::Result<usize> {
                        let n = one(piece, out)?;
                        let Some(lit) = literals.as_mut() else {
                            return Ok(n);
                        };
                        if piece.len() < crate::frames::PLANE_FRAME_MIN_BYTES {
                            return Ok(n);
                        }
                        lit.keep_smaller(piece, out, n)
                    };
                    crate::frames::compress_framed(
                        raw,
                        records as usize,
                        starts,
                        cuts,
                        &mut z,
                        best,
                    )
                    .is_ok()
                }
                _ => one(raw, &mut z).is_ok(),
            };
            if ok && z.len() < raw.len() {
                flags |= FLAG_ZSTD;
                buf.extend_from_slice(&z);
            }
            self.compressed = z;
        }
        if flags & FLAG_ZSTD == 0 {
            buf.extend_from_slice(raw);
        }
        let payload = &buf[CHUNK_HEADER_BYTES..];
        let hdr = ChunkHeader {
            kind,
            flags,
            stored_len: payload.len() as u32,
            raw_len: raw.len() as u32,
            records,
            payload_crc: crc32fast::hash(payload),
        };
        buf[..CHUNK_HEADER_BYTES].copy_from_slice(&hdr.to_bytes());
        let offset = self.stats.bytes_written;
        let r = self.write_raw(&buf, kind.name());
        if r.is_ok() {
            if let Some(s) = &mut self.sealed {
                s.push(SealedChunk {
                    kind,
                    records,
                    ts_range_ns: ts_range,
                    bytes: buf.clone(),
                });
            }
        }
        self.chunk = buf;
        r?;
        if kind != ChunkType::Footer {
            self.index.push(IndexEntry {
                offset,
                kind: kind.code(),
                records,
                first_timestamp_ns: ts_range.0,
                last_timestamp_ns: ts_range.1,
            });
        }
        Ok(())
    }
}

/// How a chunk's payload is stored.
#[derive(Clone, Copy)]
enum Compress<'a> {
    /// As it is (header, end, footer).
    Never,
    /// One zstd frame, when that is smaller.
    Whole,
    /// An event segment: one zstd frame per column after an index frame (spec §4.5), the
    /// columns' blocks starting at these (column id, offset) in the raw payload, a column's
    /// frame cut into zstd frames at the offsets of the second slice.
    Framed(&'a [(u64, usize)], &'a [usize]),
}

/// The events a sealed loss chunk counts (0 if it does not decode: it was written by a
/// writer, so it does).
fn sealed_lost_events(c: &SealedChunk) -> u64 {
    let Some(hdr) = c
        .bytes
        .get(..CHUNK_HEADER_BYTES)
        .and_then(ChunkHeader::parse)
    else {
        return 0;
    };
    let Some(stored) = c.bytes.get(CHUNK_HEADER_BYTES..) else {
        return 0;
    };
    chunk::decompress(&hdr, stored)
        .and_then(|raw| chunk::decode_losses(&raw, hdr.records))
        .map_or(0, |ls| ls.iter().map(|l| l.count).sum())
}
