//! Framing (file signature, chunk headers, checksums) and the payload codecs of every chunk
//! type except event segments (see `segment.rs`).

use crate::bytes::{put_bytes, put_varint, unzigzag, zigzag, Cursor};
use crate::cgroup::{Cgroup, Identity, Runtime};
use crate::error::DecodeError;
use crate::event::{DevT, Device, EndInfo, Header, Loss, LossReason, PathEntry, PathKind, Process};

/// First 8 bytes of every trace.
pub const MAGIC: [u8; 8] = [0x89, b'I', b'O', b'D', b'\r', b'\n', 0x1a, b'\n'];
/// Major version written; readers refuse files with a larger major version.
pub const VERSION_MAJOR: u16 = 1;
/// Minor version written; readers accept any minor version of their major version.
pub const VERSION_MINOR: u16 = 6;
/// Size of the file signature (magic, major, minor, CRC-32 of the first 12 bytes).
pub const SIGNATURE_BYTES: usize = 16;
/// Sync marker that starts every chunk header.
pub const CHUNK_SYNC: [u8; 4] = *b"IODC";
/// Size of a chunk header.
pub const CHUNK_HEADER_BYTES: usize = 32;
/// Largest payload (stored or raw) a chunk may have.
pub const MAX_CHUNK_PAYLOAD: u32 = 1 << 30;
/// Chunk flag: the payload is one zstd frame.
pub const FLAG_ZSTD: u16 = 1;
/// Magic at the very end of a file that has a footer.
pub const FOOTER_MAGIC: [u8; 8] = *b"IODFOOT1";
/// Bytes of the footer trailer (footer chunk offset + magic).
pub const FOOTER_TRAILER_BYTES: usize = 16;

/// Chunk types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChunkType {
    /// The recording's header; always the first chunk.
    Header,
    /// New device table entries.
    Devices,
    /// New process table entries.
    Processes,
    /// New path table entries.
    Paths,
    /// An event segment.
    Events,
    /// Loss records.
    Losses,
    /// End-of-recording information.
    End,
    /// The footer index; always the last chunk.
    Footer,
    /// New cgroup table entries (since 1.2).
    Cgroups,
    /// A type this version does not know (skipped).
    Unknown(u16),
}

impl ChunkType {
    /// Decodes a stored code.
    pub fn from_code(c: u16) -> ChunkType {
        match c {
            1 => ChunkType::Header,
            2 => ChunkType::Devices,
            3 => ChunkType::Processes,
            4 => ChunkType::Paths,
            5 => ChunkType::Events,
            6 => ChunkType::Losses,
            7 => ChunkType::End,
            8 => ChunkType::Footer,
            9 => ChunkType::Cgroups,
            other => ChunkType::Unknown(other),
        }
    }
    /// The stored code.
    pub fn code(self) -> u16 {
        match self {
            ChunkType::Header => 1,
            ChunkType::Devices => 2,
            ChunkType::Processes => 3,
            ChunkType::Paths => 4,
            ChunkType::Events => 5,
            ChunkType::Losses => 6,
            ChunkType::End => 7,
            ChunkType::Footer => 8,
            ChunkType::Cgroups => 9,
            ChunkType::Unknown(c) => c,
        }
    }
    /// Name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            ChunkType::Header => "header",
            ChunkType::Devices => "devices",
            ChunkType::Processes => "processes",
            ChunkType::Paths => "paths",
            ChunkType::Events => "events",
            ChunkType::Losses => "losses",
            ChunkType::End => "end",
            ChunkType::Footer => "footer",
            ChunkType::Cgroups => "cgroups",
            ChunkType::Unknown(_) => "unknown",
        }
    }
}

/// The signature block: magic, major and minor version, CRC-32 of those 12 bytes.
pub fn signature() -> [u8; SIGNATURE_BYTES] {
    let mut s = [0u8; SIGNATURE_BYTES];
    s[..8].copy_from_slice(&MAGIC);
    s[8..10].copy_from_slice(&VERSION_MAJOR.to_le_bytes());
    s[10..12].copy_from_slice(&VERSION_MINOR.to_le_bytes());
    let crc = crc32fast::hash(&s[..12]);
    s[12..16].copy_from_slice(&crc.to_le_bytes());
    s
}

/// Parses a signature block: `Some((major, minor))` when magic and checksum are right.
pub fn parse_signature(s: &[u8]) -> Option<(u16, u16)> {
    if s.len() < SIGNATURE_BYTES || s[..8] != MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes([s[12], s[13], s[14], s[15]]);
    if crc32fast::hash(&s[..12]) != crc {
        return None;
    }
    Some((
        u16::from_le_bytes([s[8], s[9]]),
        u16::from_le_bytes([s[10], s[11]]),
    ))
}

/// A parsed, checksum-verified chunk header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Type.
    pub kind: ChunkType,
    /// Flags ([`FLAG_ZSTD`]).
    pub flags: u16,
    /// Bytes of payload following the header.
    pub stored_len: u32,
    /// Bytes of the payload once decompressed.
    pub raw_len: u32,
    /// Entries (table chunks), events (segments) or 0.
    pub records: u32,
    /// CRC-32 of the stored payload.
    pub payload_crc: u32,
}

impl ChunkHeader {
    /// Total bytes of the chunk on disk.
    pub fn total_len(&self) -> u64 {
        CHUNK_HEADER_BYTES as u64 + self.stored_len as u64
    }

    /// Serialises the header (with its own checksum).
    pub fn to_bytes(&self) -> [u8; CHUNK_HEADER_BYTES] {
        let mut h = [0u8; CHUNK_HEADER_BYTES];
        h[0..4].copy_from_slice(&CHUNK_SYNC);
        h[4..6].copy_from_slice(&self.kind.code().to_le_bytes());
        h[6..8].copy_from_slice(&self.flags.to_le_bytes());
        h[8..12].copy_from_slice(&self.stored_len.to_le_bytes());
        h[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        h[16..20].copy_from_slice(&self.records.to_le_bytes());
        // 20..24 reserved, zero.
        h[24..28].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32fast::hash(&h[..28]);
        h[28..32].copy_from_slice(&crc.to_le_bytes());
        h
    }

    /// Parses and verifies a header; `None` when the sync marker, checksum or limits are off.
    pub fn parse(h: &[u8]) -> Option<ChunkHeader> {
        if h.len() < CHUNK_HEADER_BYTES || h[0..4] != CHUNK_SYNC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        if crc32fast::hash(&h[..28]) != u32_at(28) {
            return None;
        }
        let hdr = ChunkHeader {
            kind: ChunkType::from_code(u16::from_le_bytes([h[4], h[5]])),
            flags: u16::from_le_bytes([h[6], h[7]]),
            stored_len: u32_at(8),
            raw_len: u32_at(12),
            records: u32_at(16),
            payload_crc: u32_at(24),
        };
        if hdr.stored_len > MAX_CHUNK_PAYLOAD || hdr.raw_len > MAX_CHUNK_PAYLOAD {
            return None;
        }
        if hdr.flags & FLAG_ZSTD == 0 && hdr.stored_len != hdr.raw_len {
            return None;
        }
        Some(hdr)
    }
}

/// Decompresses (if needed) a stored payload whose checksum was verified.
pub fn decompress(hdr: &ChunkHeader, stored: &[u8]) -> Result<Vec<u8>, DecodeError> {
    if hdr.flags & FLAG_ZSTD == 0 {
        return Ok(stored.to_vec());
    }
    let raw =
        zstd::bulk::decompress(stored, hdr.raw_len as usize).map_err(|e| DecodeError::Zstd {
            message: e.to_string(),
        })?;
    if raw.len() != hdr.raw_len as usize {
        return Err(DecodeError::Inconsistent {
            what: "decompressed payload length",
            expected: hdr.raw_len as u64,
            actual: raw.len() as u64,
        });
    }
    Ok(raw)
}

/// Decompresses (if needed) a verified payload into `raw`, reusing its buffer and `dctx`.
pub fn decompress_into(
    hdr: &ChunkHeader,
    stored: &[u8],
    raw: &mut Vec<u8>,
    dctx: &mut zstd::bulk::Decompressor<'static>,
) -> Result<(), DecodeError> {
    raw.clear();
    if hdr.flags & FLAG_ZSTD == 0 {
        raw.extend_from_slice(stored);
        return Ok(());
    }
    raw.reserve(hdr.raw_len as usize);
    let n = dctx
        .decompress_to_buffer(stored, raw)
        .map_err(|e| DecodeError::Zstd {
            message: e.to_string(),
        })?;
    if n != hdr.raw_len as usize || raw.len() != n {
        return Err(DecodeError::Inconsistent {
            what: "decompressed payload length",
            expected: hdr.raw_len as u64,
            actual: n as u64,
        });
    }
    Ok(())
}

// ---- header (TLV) ----

mod tag {
    pub const WALL_CLOCK_NS: u64 = 1;
    pub const MONOTONIC_NS: u64 = 2;
    pub const HOSTNAME: u64 = 3;
    pub const KERNEL_RELEASE: u64 = 4;
    pub const TOOL_VERSION: u64 = 5;
    pub const RECORDER_ARGV: u64 = 6;
    pub const COMMAND_ARGV: u64 = 7;
    pub const METADATA: u64 = 8;

    pub const END_MONOTONIC_NS: u64 = 1;
    pub const END_EVENTS: u64 = 2;
    pub const END_LOST: u64 = 3;
    pub const END_EXIT_STATUS: u64 = 4;
}

fn put_tlv(out: &mut Vec<u8>, t: u64, value: &[u8]) {
    put_varint(out, t);
    put_bytes(out, value);
}

fn varint_bytes(v: u64) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, v);
    b
}

fn strlist(items: &[String]) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, items.len() as u64);
    for s in items {
        put_bytes(&mut b, s.as_bytes());
    }
    b
}

fn read_strlist(v: &[u8]) -> Result<Vec<String>, DecodeError> {
    let mut c = Cursor::new(v);
    let n = c.varint_max(v.len() as u64, "list length")?;
    (0..n).map(|_| c.string()).collect()
}

/// Encodes the header chunk payload.
pub fn encode_header(h: &Header) -> Vec<u8> {
    let mut out = Vec::new();
    put_tlv(&mut out, tag::WALL_CLOCK_NS, &h.wall_clock_ns.to_le_bytes());
    put_tlv(&mut out, tag::MONOTONIC_NS, &h.monotonic_ns.to_le_bytes());
    put_tlv(&mut out, tag::HOSTNAME, h.hostname.as_bytes());
    put_tlv(&mut out, tag::KERNEL_RELEASE, h.kernel_release.as_bytes());
    put_tlv(&mut out, tag::TOOL_VERSION, h.tool_version.as_bytes());
    put_tlv(&mut out, tag::RECORDER_ARGV, &strlist(&h.recorder_argv));
    if let Some(cmd) = &h.command_argv {
        put_tlv(&mut out, tag::COMMAND_ARGV, &strlist(cmd));
    }
    for (k, v) in &h.metadata {
        let mut kv = Vec::new();
        put_bytes(&mut kv, k.as_bytes());
        put_bytes(&mut kv, v.as_bytes());
        put_tlv(&mut out, tag::METADATA, &kv);
    }
    out
}

fn fixed8(v: &[u8], what: &'static str) -> Result<[u8; 8], DecodeError> {
    v.try_into().map_err(|_| DecodeError::Inconsistent {
        what,
        expected: 8,
        actual: v.len() as u64,
    })
}

/// Decodes the header chunk payload; unknown tags are skipped.
pub fn decode_header(p: &[u8]) -> Result<Header, DecodeError> {
    let mut h = Header::default();
    let mut c = Cursor::new(p);
    while !c.is_empty() {
        let t = c.varint()?;
        let v = c.bytes()?;
        match t {
            tag::WALL_CLOCK_NS => {
                h.wall_clock_ns = i64::from_le_bytes(fixed8(v, "wall clock field length")?)
            }
            tag::MONOTONIC_NS => {
                h.monotonic_ns = u64::from_le_bytes(fixed8(v, "monotonic field length")?)
            }
            tag::HOSTNAME => h.hostname = String::from_utf8_lossy(v).into_owned(),
            tag::KERNEL_RELEASE => h.kernel_release = String::from_utf8_lossy(v).into_owned(),
            tag::TOOL_VERSION => h.tool_version = String::from_utf8_lossy(v).into_owned(),
            tag::RECORDER_ARGV => h.recorder_argv = read_strlist(v)?,
            tag::COMMAND_ARGV => h.command_argv = Some(read_strlist(v)?),
            tag::METADATA => {
                let mut kv = Cursor::new(v);
                let k = kv.string()?;
                let val = kv.string()?;
                h.metadata.push((k, val));
            }
            _ => {}
        }
    }
    Ok(h)
}

/// Encodes the end chunk payload.
pub fn encode_end(e: &EndInfo) -> Vec<u8> {
    let mut out = Vec::new();
    put_tlv(
        &mut out,
        tag::END_MONOTONIC_NS,
        &varint_bytes(e.end_monotonic_ns),
    );
    put_tlv(&mut out, tag::END_EVENTS, &varint_bytes(e.events));
    put_tlv(&mut out, tag::END_LOST, &varint_bytes(e.lost_events));
    if let Some(s) = e.command_exit_status {
        put_tlv(
            &mut out,
            tag::END_EXIT_STATUS,
            &varint_bytes(zigzag(s as i64)),
        );
    }
    out
}

/// Decodes the end chunk payload; unknown tags are skipped.
pub fn decode_end(p: &[u8]) -> Result<EndInfo, DecodeError> {
    let mut e = EndInfo::default();
    let mut c = Cursor::new(p);
    while !c.is_empty() {
        let t = c.varint()?;
        let v = c.bytes()?;
        let num = || Cursor::new(v).varint();
        match t {
            tag::END_MONOTONIC_NS => e.end_monotonic_ns = num()?,
            tag::END_EVENTS => e.events = num()?,
            tag::END_LOST => e.lost_events = num()?,
            tag::END_EXIT_STATUS => e.command_exit_status = Some(unzigzag(num()?) as i32),
            _ => {}
        }
    }
    Ok(e)
}

// ---- tables: every entry is length-prefixed so that later versions can append fields ----

fn put_entry(out: &mut Vec<u8>, scratch: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    scratch.clear();
    f(scratch);
    put_bytes(out, scratch);
}

fn entries<'a, T>(
    p: &'a [u8],
    records: u32,
    mut f: impl FnMut(&mut Cursor<'a>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
    let mut c = Cursor::new(p);
    let mut out = Vec::with_capacity((records as usize).min(p.len()));
    for _ in 0..records {
        let e = c.bytes()?;
        out.push(f(&mut Cursor::new(e))?);
    }
    if !c.is_empty() {
        return Err(DecodeError::TrailingBytes {
            what: "table entries",
            extra: c.remaining(),
        });
    }
    Ok(out)
}

/// Encodes device entries.
pub fn encode_devices(ds: &[Device], out: &mut Vec<u8>) {
    let mut s = Vec::new();
    for d in ds {
        put_entry(out, &mut s, |b| {
            put_varint(b, d.dev.0 as u64);
            put_bytes(b, d.name.as_bytes());
            let flags = d.partition_of.is_some() as u64 | ((d.bio_based as u64) << 1);
            put_varint(b, flags);
            if let Some(p) = d.partition_of {
                put_varint(b, p.0 as u64);
            }
            put_varint(b, d.sector_size as u64);
            put_varint(b, d.start_sector);
            put_bytes(b, d.label.as_bytes());
            put_varint(b, d.stacked_on.len() as u64);
            for s in &d.stacked_on {
                put_varint(b, s.0 as u64);
            }
        });
    }
}

/// Decodes device entries.
pub fn decode_devices(p: &[u8], records: u32) -> Result<Vec<Device>, DecodeError> {
    entries(p, records, |c| {
        let dev = DevT(c.varint_u32("dev")?);
        let name = c.string()?;
        let flags = c.varint()?;
        let partition_of = if flags & 1 != 0 {
            Some(DevT(c.varint_u32("partition_of")?))
        } else {
            None
        };
        let sector_size = c.varint_u32("sector_size")?;
        let start_sector = c.varint()?;
        // since 1.3: what a stacked device is and what it is stacked on
        let (mut label, mut stacked_on) = (String::new(), Vec::new());
        if !c.is_empty() {
            label = c.string()?;
            let n = c.varint()?;
            for _ in 0..n.min(c.remaining() as u64) {
                stacked_on.push(DevT(c.varint_u32("stacked_on")?));
            }
        }
        Ok(Device {
            dev,
            name,
            partition_of,
            sector_size,
            start_sector,
            bio_based: flags & 2 != 0,
            label,
            stacked_on,
        })
    })
}

/// Encodes process entries.
pub fn encode_processes(ps: &[Process], out: &mut Vec<u8>) {
    let mut s = Vec::new();
    for p in ps {
        put_entry(out, &mut s, |b| {
            put_varint(b, p.tid as u64);
            put_varint(b, p.pid as u64);
            put_bytes(b, &p.comm);
            put_varint(b, p.cgroup_id);
            // Since 1.1; absent (or empty) = unknown.
            if let Some(a) = &p.args {
                put_bytes(b, a);
            }
        });
    }
}

/// Decodes process entries.
pub fn decode_processes(p: &[u8], records: u32) -> Result<Vec<Process>, DecodeError> {
    entries(p, records, |c| {
        Ok(Process {
            tid: c.varint_u32("tid")?,
            pid: c.varint_u32("pid")?,
            comm: c.bytes()?.to_vec(),
            cgroup_id: c.varint()?,
            // A 1.0 entry ends here.
            args: if c.is_empty() {
                None
            } else {
                Some(c.bytes()?.to_vec()).filter(|a| !a.is_empty())
            },
        })
    })
}

/// Encodes path entries.
pub fn encode_paths(ps: &[PathEntry], out: &mut Vec<u8>) {
    let mut s = Vec::new();
    for p in ps {
        put_entry(out, &mut s, |b| {
            put_varint(b, p.path_id as u64);
            put_varint(b, p.dev.0 as u64);
            put_varint(b, p.inode);
            b.push(p.kind as u8);
            b.push(p.truncated as u8 | ((p.deleted as u8) << 1));
            put_bytes(b, &p.path);
            // Since 1.1; absent = unknown.
            if let Some(g) = p.generation {
                put_varint(b, g.into());
            }
        });
    }
}

/// Decodes path entries.
pub fn decode_paths(p: &[u8], records: u32) -> Result<Vec<PathEntry>, DecodeError> {
    entries(p, records, |c| {
        let path_id = c.varint_u32("path_id")?;
        let dev = DevT(c.varint_u32("dev")?);
        let inode = c.varint()?;
        let kind = PathKind::from_code(c.u8()?);
        let flags = c.u8()?;
        Ok(PathEntry {
            path_id,
            dev,
            inode,
            kind,
            truncated: flags & 1 != 0,
            deleted: flags & 2 != 0,
            path: c.bytes()?.to_vec(),
            // A 1.0 entry ends here.
            generation: if c.is_empty() {
                None
            } else {
                Some(c.varint_u32("generation")?)
            },
        })
    })
}

/// Encodes cgroup entries (since 1.2).
pub fn encode_cgroups(cs: &[Cgroup], out: &mut Vec<u8>) {
    let mut s = Vec::new();
    for c in cs {
        put_entry(out, &mut s, |b| {
            let i = &c.identity;
            put_varint(b, c.id);
            put_bytes(b, c.path.as_bytes());
            b.push(i.runtime.map_or(0, Runtime::code));
            b.push(i.monitor as u8);
            for f in [&i.container_id, &i.pod_uid, &i.qos, &i.unit] {
                put_bytes(b, f.as_deref().unwrap_or("").as_bytes());
            }
        });
    }
}

/// Decodes cgroup entries.
pub fn decode_cgroups(p: &[u8], records: u32) -> Result<Vec<Cgroup>, DecodeError> {
    entries(p, records, |c| {
        let id = c.varint()?;
        let path = c.string()?;
        let runtime = Runtime::from_code(c.u8()?);
        let monitor = c.u8()? & 1 != 0;
        let mut text = || -> Result<Option<String>, DecodeError> {
            Ok(Some(c.string()?).filter(|s| !s.is_empty()))
        };
        Ok(Cgroup {
            id,
            path,
            identity: Identity {
                runtime,
                monitor,
                container_id: text()?,
                pod_uid: text()?,
                qos: text()?,
                unit: text()?,
            },
        })
    })
}

/// Encodes loss records.
pub fn encode_losses(ls: &[Loss], out: &mut Vec<u8>) {
    let mut s = Vec::new();
    for l in ls {
        put_entry(out, &mut s, |b| {
            put_varint(b, l.cpu as u64);
            b.push(l.reason as u8);
            put_varint(b, l.count);
            put_varint(b, l.start_ns);
            put_varint(b, l.end_ns);
        });
    }
}

/// Decodes loss records.
pub fn decode_losses(p: &[u8], records: u32) -> Result<Vec<Loss>, DecodeError> {
    entries(p, records, |c| {
        Ok(Loss {
            cpu: c.varint_max(u16::MAX as u64, "cpu")? as u16,
            reason: LossReason::from_code(c.u8()?),
            count: c.varint()?,
            start_ns: c.varint()?,
            end_ns: c.varint()?,
        })
    })
}

// ---- footer ----

/// One footer index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Offset of the chunk header in the file.
    pub offset: u64,
    /// Chunk type code.
    pub kind: u16,
    /// The chunk header's `records`.
    pub records: u32,
    /// For event segments: first (smallest) timestamp; else 0.
    pub first_timestamp_ns: u64,
    /// For event segments: last (largest) timestamp; else 0.
    pub last_timestamp_ns: u64,
}

/// Encodes the footer payload, trailer included.
pub fn encode_footer(entries: &[IndexEntry], footer_offset: u64) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, entries.len() as u64);
    let mut prev = 0u64;
    for e in entries {
        put_varint(&mut out, e.offset - prev);
        prev = e.offset;
        put_varint(&mut out, e.kind as u64);
        put_varint(&mut out, e.records as u64);
        put_varint(&mut out, e.first_timestamp_ns);
        put_varint(
            &mut out,
            e.last_timestamp_ns.wrapping_sub(e.first_timestamp_ns),
        );
    }
    out.extend_from_slice(&footer_offset.to_le_bytes());
    out.extend_from_slice(&FOOTER_MAGIC);
    out
}

/// Decodes the footer payload (trailer included); checks offsets increase.
pub fn decode_footer(p: &[u8]) -> Result<(Vec<IndexEntry>, u64), DecodeError> {
    if p.len() < FOOTER_TRAILER_BYTES || p[p.len() - 8..] != FOOTER_MAGIC {
        return Err(DecodeError::Inconsistent {
            what: "footer trailer",
            expected: FOOTER_TRAILER_BYTES as u64,
            actual: p.len() as u64,
        });
    }
    let body = &p[..p.len() - FOOTER_TRAILER_BYTES];
    let off = fixed8(&p[p.len() - 16..p.len() - 8], "footer offset")?;
    let mut c = Cursor::new(body);
    let n = c.varint_max(body.len() as u64, "footer entries")?;
    let mut out = Vec::with_capacity(n as usize);
    let mut prev = 0u64;
    for i in 0..n {
        let delta = c.varint()?;
        if i > 0 && delta == 0 {
            return Err(DecodeError::Inconsistent {
                what: "footer offsets not increasing",
                expected: 1,
                actual: 0,
            });
        }
        let offset = prev.checked_add(delta).ok_or(DecodeError::OutOfRange {
            what: "footer offset",
            at: c.pos(),
            value: delta,
            max: u64::MAX - prev,
        })?;
        prev = offset;
        let kind = c.varint_max(u16::MAX as u64, "chunk type")? as u16;
        let records = c.varint_u32("records")?;
        let first = c.varint()?;
        let last = first.wrapping_add(c.varint()?);
        out.push(IndexEntry {
            offset,
            kind,
            records,
            first_timestamp_ns: first,
            last_timestamp_ns: last,
        });
    }
    if !c.is_empty() {
        return Err(DecodeError::TrailingBytes {
            what: "footer",
            extra: c.remaining(),
        });
    }
    Ok((out, u64::from_le_bytes(off)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = Header {
            wall_clock_ns: -5,
            monotonic_ns: u64::MAX,
            hostname: "db1".into(),
            kernel_release: "6.18.0".into(),
            tool_version: "iodump 0.1.0".into(),
            recorder_argv: vec!["iodump".into(), "record".into(), "".into()],
            command_argv: Some(vec!["fio".into(), "job.fio".into()]),
            metadata: vec![("fio_job".into(), "[global]\nrw=randread\n".into())],
        };
        assert_eq!(decode_header(&encode_header(&h)).unwrap(), h);
        let h2 = Header::default();
        assert_eq!(decode_header(&encode_header(&h2)).unwrap(), h2);
    }

    #[test]
    fn end_round_trip() {
        for s in [None, Some(0), Some(-1), Some(137)] {
            let e = EndInfo {
                end_monotonic_ns: 99,
                events: 1 << 40,
                lost_events: 3,
                command_exit_status: s,
            };
            assert_eq!(decode_end(&encode_end(&e)).unwrap(), e);
        }
    }

    #[test]
    fn chunk_header_round_trip_and_checks() {
        let h = ChunkHeader {
            kind: ChunkType::Events,
            flags: FLAG_ZSTD,
            stored_len: 10,
            raw_len: 100,
            records: 7,
            payload_crc: 0xdead_beef,
        };
        let b = h.to_bytes();
        assert_eq!(ChunkHeader::parse(&b), Some(h));
        for bit in 0..(CHUNK_HEADER_BYTES * 8) {
            let mut c = b;
            c[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(ChunkHeader::parse(&c), None, "bit {bit}");
        }
    }

    /// Process entries of 1.1 (with `args`) and of 1.0 (without) read back; a 1.0 reader,
    /// which reads tid, pid, comm and cgroup_id and ignores the rest of each entry, reads 1.1
    /// entries too.
    #[test]
    fn process_args_are_compatible_both_ways() {
        let ps = vec![
            Process {
                tid: 7,
                pid: 7,
                comm: b"postgres".to_vec(),
                cgroup_id: 3,
                args: Some(b"postgres: checkpointer".to_vec()),
            },
            Process {
                tid: 8,
                pid: 7,
                comm: b"kworker/0:1".to_vec(),
                cgroup_id: 0,
                args: None,
            },
        ];
        let mut p = Vec::new();
        encode_processes(&ps, &mut p);
        assert_eq!(decode_processes(&p, 2).unwrap(), ps);
        // As 1.0 read them (`entries` ignores what follows the fields it knows).
        let old = entries(&p, 2, |c| {
            Ok((
                c.varint_u32("tid")?,
                c.varint_u32("pid")?,
                c.bytes()?.to_vec(),
                c.varint()?,
            ))
        })
        .unwrap();
        assert_eq!(old[0], (7, 7, b"postgres".to_vec(), 3));
        assert_eq!(old[1], (8, 7, b"kworker/0:1".to_vec(), 0));
        // A 1.0 entry (no args) and an empty args field: unknown.
        let mut e10 = Vec::new();
        let mut s = Vec::new();
        for empty_args in [false, true] {
            put_entry(&mut e10, &mut s, |b| {
                put_varint(b, 9);
                put_varint(b, 9);
                put_bytes(b, b"dd");
                put_varint(b, 0);
                if empty_args {
                    put_bytes(b, b"");
                }
            });
        }
        let got = decode_processes(&e10, 2).unwrap();
        assert!(got
            .iter()
            .all(|p| p.args.is_none() && p.args_or_comm() == b"dd"));
    }

    /// Cgroup entries read back; unknown runtime codes read as none, and fields a later
    /// version appends are skipped.
    #[test]
    fn cgroup_entries_round_trip() {
        let cs = vec![
            Cgroup {
                id: 4242,
                path: "/system.slice/docker-0123456789abcdef.scope".into(),
                identity: Identity {
                    runtime: Some(Runtime::Docker),
                    container_id: Some("0123456789abcdef".into()),
                    ..Identity::default()
                },
            },
            Cgroup {
                id: 1,
                path: "/".into(),
                identity: Identity::default(),
            },
            Cgroup {
                id: 9,
                path: "/kubepods.slice/kubepods-burstable-pod1a2b.slice/crio-conmon-ab.scope"
                    .into(),
                identity: Identity {
                    runtime: Some(Runtime::CriO),
                    container_id: Some("ab".into()),
                    monitor: true,
                    pod_uid: Some("1a2b".into()),
                    qos: Some("burstable".into()),
                    unit: Some("x.service".into()),
                },
            },
        ];
        let mut p = Vec::new();
        encode_cgroups(&cs, &mut p);
        assert_eq!(decode_cgroups(&p, 3).unwrap(), cs);
        // A runtime code from a later version, and a field appended after `unit`.
        let mut later = Vec::new();
        let mut s = Vec::new();
        put_entry(&mut later, &mut s, |b| {
            put_varint(b, 5);
            put_bytes(b, b"/lxc.payload.web");
            b.push(200);
            b.push(0);
            for f in ["web", "", "", ""] {
                put_bytes(b, f.as_bytes());
            }
            put_varint(b, 77);
        });
        let got = decode_cgroups(&later, 1).unwrap();
        assert_eq!(got[0].identity.runtime, None);
        assert_eq!(got[0].identity.container_id.as_deref(), Some("web"));
        assert_eq!(got[0].identity.unit, None);
        assert!(decode_cgroups(&later[..later.len() - 3], 1).is_err());
    }

    /// Path entries of 1.1 (with the inode generation) read back, and a 1.0 reader's fields
    /// are where they were; a 1.0 entry has no generation.
    #[test]
    fn path_generations_are_compatible_both_ways() {
        let e = |generation| PathEntry {
            path_id: 3,
            dev: DevT::new(8, 1),
            inode: 12,
            kind: PathKind::File,
            truncated: false,
            deleted: true,
            path: b"/db/wal".to_vec(),
            generation,
        };
        let ps = vec![e(Some(0)), e(None), e(Some(u32::MAX))];
        let mut p = Vec::new();
        encode_paths(&ps, &mut p);
        assert_eq!(decode_paths(&p, 3).unwrap(), ps);
        let old = entries(&p, 3, |c| {
            let id = c.varint_u32("path_id")?;
            let (_, _, _, _) = (c.varint()?, c.varint()?, c.u8()?, c.u8()?);
            Ok((id, c.bytes()?.to_vec()))
        })
        .unwrap();
        assert!(old.iter().all(|o| *o == (3, b"/db/wal".to_vec())));
    }

    #[test]
    fn footer_round_trip() {
        let es = vec![
            IndexEntry {
                offset: 16,
                kind: 1,
                records: 0,
                first_timestamp_ns: 0,
                last_timestamp_ns: 0,
            },
            IndexEntry {
                offset: 100,
                kind: 5,
                records: 65536,
                first_timestamp_ns: 5,
                last_timestamp_ns: 9,
            },
        ];
        let p = encode_footer(&es, 4242);
        assert_eq!(decode_footer(&p).unwrap(), (es, 4242));
    }
}
