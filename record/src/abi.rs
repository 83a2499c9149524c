//! The kernel/user ABI of `ebpf/iodump.h`, mirrored: ring-buffer records and constants.
//! Records are parsed field by field from their bytes (no `unsafe`, no `#[repr(C)]` mirror);
//! the offsets below are the ones `iodump.h` pins with `_Static_assert`, and
//! `tests::offsets_match_the_header` checks them, the record sizes and every constant here
//! against the header text.

/// Record kinds (first u16 of every ring-buffer record).
pub const EV_IO: u16 = 1;
/// A path record.
pub const EV_PATH: u16 = 2;
/// A batch of I/O records: an 8-byte header (kind, `count` as u16 at offset 2) and `count`
/// `struct iodump_io_event`s (`struct iodump_batch`).
pub const EV_BATCH: u16 = 3;
/// Size of a batch record's header.
pub const BATCH_HDR_BYTES: usize = 8;
/// Most events in one batch (`IODUMP_BATCH_MAX`).
pub const BATCH_MAX: usize = 32;
/// `flush_batch` answered that another program was running on the CPU.
pub const FLUSH_BUSY: u32 = 1;

/// `IoEvent::ioflags` bits (`IODUMP_IOF_*`).
pub mod io_flag {
    /// Bio-based device: no issue time.
    pub const BIO_BASED: u8 = 1 << 0;
    /// `issue_ns` is valid.
    pub const ISSUED: u8 = 1 << 1;
    /// `dirtier_pid` is valid.
    pub const DIRTIER: u8 = 1 << 2;
    /// The path record for this inode could not be sent.
    pub const PATH_LOST: u8 = 1 << 3;
    /// The submitter is a kernel thread.
    pub const KTHREAD: u8 = 1 << 4;
}

/// Path kinds the kernel side reports (`IODUMP_PK_*`), in `IoEvent::path_kind` and
/// `PathEvent::path_kind`.
pub mod path_kind {
    /// Nothing recognised.
    pub const UNKNOWN: u8 = 0;
    /// Page-cache page of a file.
    pub const FILE: u8 = 1;
    /// Filesystem metadata (xfs buffers).
    pub const META: u8 = 2;
    /// Filesystem journal (xfs log).
    pub const JOURNAL: u8 = 3;
    /// Swap.
    pub const SWAP: u8 = 4;
    /// O_DIRECT on a block device node.
    pub const RAWDEV: u8 = 5;
    /// Page cache of a block device inode (buffer heads: ext4 metadata and journal).
    pub const BDEV: u8 = 6;
    /// Direct I/O on a file.
    pub const DIO: u8 = 7;
    /// User pages not attributed to a file.
    pub const USERMEM: u8 = 8;
}

/// `PathEvent::pflags` bits (`IODUMP_PF_*`).
pub mod path_flag {
    /// Cut from the root side.
    pub const TRUNCATED: u8 = 1 << 0;
    /// Unlinked while open.
    pub const DELETED: u8 = 1 << 1;
    /// The walk ended at a root that is not the superblock's root.
    pub const DISCONNECTED: u8 = 1 << 2;
    /// The inode has no dentry.
    pub const NO_DENTRY: u8 = 1 << 3;
}

/// Syscall field values that are not syscall numbers.
pub const SC_NONE: u16 = 0xffff;
/// A page fault (or another exception) rather than a syscall.
pub const SC_FAULT: u16 = 0xfffe;

/// Per-CPU counter indexes of the `counters` map (`IODUMP_CNT_*`).
pub mod counter {
    /// Ring buffer full: I/O event dropped.
    pub const LOST_RINGBUF: u32 = 0;
    /// In-flight map full: I/O not tracked.
    pub const LOST_INFLIGHT: u32 = 1;
    /// In-flight entry overwritten before completion.
    pub const LOST_STALE: u32 = 2;
    /// Path record not sent.
    pub const LOST_PATH: u32 = 3;
    /// I/Os tracked.
    pub const TRACKED: u32 = 4;
    /// I/O events emitted.
    pub const EMITTED: u32 = 5;
    /// Completions without a start.
    pub const NO_START: u32 = 6;
    /// Requests merged into another.
    pub const RQ_MERGED: u32 = 7;
    /// Path records sent.
    pub const PATHS: u32 = 8;
    /// Filtered out.
    pub const FILTERED: u32 = 10;
    /// Sampled out.
    pub const SAMPLED_OUT: u32 = 11;
    /// Dropped by the size filter.
    pub const SIZE_FILTERED: u32 = 12;
    /// Batch records sent.
    pub const BATCHES: u32 = 14;
    /// Completions of flush requests the block layer made itself (no start hook sees them),
    /// and the second completion, with no bytes, that ends the flush sequence of a write
    /// nothing tracks (a tracked one ends there: [`FLUSH_FOLLOWED`]).
    pub const FLUSH_NO_START: u32 = 15;
    /// Request starts seen but not tracked (filtered, sampled out): their completions
    /// count as [`NO_START`] too (passthrough commands and empty flushes, counted apart at
    /// their completion, are not counted here).
    pub const RQ_UNTRACKED: u32 = 16;
    /// Renames and unlinks seen (each moves the names generation).
    pub const NAMES_CHANGED: u32 = 17;
    /// Bio completions the second program on block_bio_complete finished for the first,
    /// which the kernel skipped (recursion misses of the first that lost nothing).
    pub const BIO_RESCUED: u32 = 18;
    /// Request completions the second program on block_rq_complete finished for the
    /// first, which the kernel skipped (recursion misses of the first that lost nothing).
    pub const RQ_RESCUED: u32 = 19;
    /// Bio starts the second program on block_bio_queue did for the first, which the
    /// kernel skipped (recursion misses of the first that lost nothing).
    pub const QUEUE_RESCUED: u32 = 20;
    /// Chained bios on bio-based devices of a kernel that does not trace a chained bio's
    /// completion: not tracked (lost, [`iodump_format::LossReason::CompletionNotTraced`]).
    pub const CHAIN_UNTRACED: u32 = 21;
    /// Completions of passthrough commands (SCSI, NVMe admin: no block I/O) without a
    /// start: before 6.5 no start hook sees them; 6.5+, those filtered or sampled out.
    pub const PASSTHROUGH_NO_START: u32 = 22;
    /// Writes the flush machinery sequences, kept in flight at their data's completion to
    /// end at the end of their sequence (after the cache flush that follows a FUA write's
    /// data on a device without FUA).
    pub const FLUSH_FOLLOWED: u32 = 23;
    /// Number of counters.
    pub const MAX: u32 = 24;
    /// Names of the counters, by index.
    pub const NAMES: [&str; MAX as usize] = [
        "lost_ringbuf",
        "lost_inflight",
        "lost_stale",
        "lost_path",
        "tracked",
        "emitted",
        "no_start",
        "rq_merged",
        "paths",
        "path_truncated",
        "filtered",
        "sampled_out",
        "size_filtered",
        "partial_completions",
        "batches",
        "flush_no_start",
        "rq_untracked",
        "names_changed",
        "bio_rescued",
        "rq_rescued",
        "queue_rescued",
        "chain_untraced",
        "passthrough_no_start",
        "flush_followed",
    ];
}

/// Size of `struct iodump_io_event`.
pub const IO_EVENT_BYTES: usize = 120;
/// Size of the fixed part of `struct iodump_path_event`.
pub const PATH_EVENT_BYTES: usize = 40;
/// Size of `struct iodump_inflight` (the value of the maps `inflight_rq`, `inflight_bio`).
pub const INFLIGHT_BYTES: usize = 128;
/// The bit of an in-flight slot's key (`IODUMP_SLOT_COMPLETING`) set while its I/O's
/// event is being copied out.
pub const SLOT_COMPLETING: u64 = 1;
/// Size of `struct iodump_slot` (the value of the map `inflight_slots`; its key first).
pub const SLOT_BYTES: usize = 136;

/// `struct iodump_io_event`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoEvent {
    /// Normalised op.
    pub op: u8,
    /// Normalised flags.
    pub flags: u8,
    /// A [`path_kind`] code.
    pub path_kind: u8,
    /// [`io_flag`] bits.
    pub ioflags: u8,
    /// Positive errno.
    pub error: u16,
    /// Entered the block layer, monotonic ns.
    pub start_ns: u64,
    /// Issued to the driver, 0 if not.
    pub issue_ns: u64,
    /// Completed.
    pub complete_ns: u64,
    /// First sector.
    pub sector: u64,
    /// cgroup id.
    pub cgroup_id: u64,
    /// Inode number.
    pub ino: u64,
    /// Inode's st_dev.
    pub ino_dev: u32,
    /// Inode generation.
    pub ino_gen: u32,
    /// Device.
    pub dev: u32,
    /// Size.
    pub bytes: u32,
    /// tgid.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Dirtier tgid.
    pub dirtier_pid: u32,
    /// CPU.
    pub cpu: u16,
    /// Syscall number or `SC_*`.
    pub syscall: u16,
    /// comm, NUL-padded.
    pub comm: [u8; 16],
    /// `file_id` of the inode's path record; 0 when the kernel did not have it at hand (the
    /// record is found by `(ino_dev, ino, ino_gen)`) or there is none (`io_flag::PATH_LOST`).
    pub file_id: u32,
    /// For an I/O a stacked device sent down: the stacked device of the I/O it serves; 0
    /// for every other I/O.
    pub upper_dev: u32,
    /// And that I/O's `start_ns`.
    pub upper_start_ns: u64,
}

#[inline]
fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
#[inline]
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
#[inline]
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// The I/O records of a batch record, each `IO_EVENT_BYTES` long (`None` if the record is
/// not a well-formed batch).
pub fn batch_events(b: &[u8]) -> Option<std::slice::ChunksExact<'_, u8>> {
    if b.len() < BATCH_HDR_BYTES || u16_at(b, 0) != EV_BATCH {
        return None;
    }
    let n = u16_at(b, 2) as usize;
    if n > BATCH_MAX {
        return None;
    }
    let body = b.get(BATCH_HDR_BYTES..BATCH_HDR_BYTES + n * IO_EVENT_BYTES)?;
    Some(body.chunks_exact(IO_EVENT_BYTES))
}

/// The event of an I/O still in flight, as if it completed at `now_ns`: `entry` is a value of
/// the in-flight tables (`struct iodump_inflight`: the event being built, then its
/// partition's first sector), made into the record the kernel would have emitted (its sector
/// made relative to the partition). `None` if it started at or after `started_before_ns` (or
/// never: an empty entry).
pub fn in_flight_event(
    entry: &[u8],
    started_before_ns: u64,
    now_ns: u64,
) -> Option<[u8; IO_EVENT_BYTES]> {
    if entry.len() < INFLIGHT_BYTES {
        return None;
    }
    let mut r: [u8; IO_EVENT_BYTES] = entry[..IO_EVENT_BYTES].try_into().ok()?;
    let start_ns = u64_at(&r, 8);
    if start_ns == 0 || start_ns >= started_before_ns {
        return None;
    }
    let part_start = u64_at(entry, IO_EVENT_BYTES);
    r[..2].copy_from_slice(&EV_IO.to_le_bytes());
    r[24..32].copy_from_slice(&now_ns.max(start_ns).to_le_bytes());
    let sector = u64_at(&r, 32).wrapping_sub(part_start);
    r[32..40].copy_from_slice(&sector.to_le_bytes());
    Some(r)
}

impl IoEvent {
    /// Parses a record (`None` if too short or of another kind).
    pub fn parse(b: &[u8]) -> Option<IoEvent> {
        if b.len() < IO_EVENT_BYTES || u16_at(b, 0) != EV_IO {
            return None;
        }
        let mut comm = [0u8; 16];
        comm.copy_from_slice(&b[88..104]);
        Some(IoEvent {
            op: b[2],
            flags: b[3],
            path_kind: b[4],
            ioflags: b[5],
            error: u16_at(b, 6),
            start_ns: u64_at(b, 8),
            issue_ns: u64_at(b, 16),
            complete_ns: u64_at(b, 24),
            sector: u64_at(b, 32),
            cgroup_id: u64_at(b, 40),
            ino: u64_at(b, 48),
            ino_dev: u32_at(b, 56),
            ino_gen: u32_at(b, 60),
            dev: u32_at(b, 64),
            bytes: u32_at(b, 68),
            pid: u32_at(b, 72),
            tid: u32_at(b, 76),
            dirtier_pid: u32_at(b, 80),
            cpu: u16_at(b, 84),
            syscall: u16_at(b, 86),
            comm,
            file_id: u32_at(b, 104),
            upper_dev: u32_at(b, 108),
            upper_start_ns: u64_at(b, 112),
        })
    }

    /// The comm without its NUL padding.
    pub fn comm(&self) -> &[u8] {
        let n = self.comm.iter().position(|&c| c == 0).unwrap_or(16);
        &self.comm[..n]
    }
}

/// `struct iodump_path_event` with its names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEvent<'a> {
    /// How the inode was found.
    pub path_kind: u8,
    /// [`path_flag`] bits.
    pub pflags: u8,
    /// Number of components.
    pub depth: u16,
    /// Inode.
    pub ino: u64,
    /// The inode's st_dev.
    pub dev: u32,
    /// Generation.
    pub gen: u32,
    /// Mount id, 0 if unknown.
    pub mnt_id: u32,
    /// Superblock dev as in mountinfo.
    pub sb_dev: u32,
    /// The number I/O events of this inode carry in `IoEvent::file_id` (> 0).
    pub file_id: u32,
    /// Components, leaf first, each NUL-terminated.
    pub names: &'a [u8],
}

impl<'a> PathEvent<'a> {
    /// Parses a record (`None` if malformed).
    pub fn parse(b: &'a [u8]) -> Option<PathEvent<'a>> {
        if b.len() < PATH_EVENT_BYTES || u16_at(b, 0) != EV_PATH {
            return None;
        }
        let names_len = u16_at(b, 6) as usize;
        let names = b.get(PATH_EVENT_BYTES..PATH_EVENT_BYTES + names_len)?;
        Some(PathEvent {
            path_kind: b[2],
            pflags: b[3],
            depth: u16_at(b, 4),
            ino: u64_at(b, 8),
            dev: u32_at(b, 16),
            gen: u32_at(b, 20),
            mnt_id: u32_at(b, 24),
            sb_dev: u32_at(b, 28),
            file_id: u32_at(b, 32),
            names,
        })
    }

    /// The filesystem-relative path, `/a/b/c`, from the leaf-first components.
    pub fn relative_path(&self) -> Vec<u8> {
        let mut comps: Vec<&[u8]> = self
            .names
            .split(|&c| c == 0)
            .filter(|c| !c.is_empty())
            .collect();
        comps.truncate(self.depth as usize);
        let mut out = Vec::with_capacity(self.names.len() + 1);
        for c in comps.iter().rev() {
            out.push(b'/');
            out.extend_from_slice(c);
        }
        if out.is_empty() {
            out.push(b'/');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define NAME VALUE` in `h`: a number (decimal or 0x hex) or `(1u << N)`.
    fn define(h: &str, name: &str) -> u32 {
        let line = h
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} not in iodump.h"));
        let v = line[format!("#define {name} ").len()..]
            .split("/*")
            .next()
            .unwrap()
            .trim();
        if let Some(bit) = v.strip_prefix("(1u << ").and_then(|b| b.strip_suffix(')')) {
            1 << bit.parse::<u32>().unwrap()
        } else if let Some(hex) = v.strip_prefix("0x") {
            u32::from_str_radix(hex, 16).unwrap()
        } else {
            v.trim_end_matches("ULL")
                .parse()
                .unwrap_or_else(|_| panic!("{name}: {v}"))
        }
    }

    #[test]
    fn raid5_layout_matches_the_header() {
        let h = include_str!("../../ebpf/iodump.h");
        let body = h
            .split("struct iodump_raid5_layout {")
            .nth(1)
            .and_then(|b| b.split("};").next())
            .expect("struct iodump_raid5_layout in iodump.h");
        let fields: Vec<&str> = body
            .lines()
            .filter_map(|l| l.trim().strip_prefix("__u32 "))
            .map(|l| l.split(';').next().unwrap_or("").trim())
            .collect();
        assert_eq!(fields, crate::kernel::Raid5Layout::FIELDS);
        assert!(h.contains(
            "_Static_assert(sizeof(struct iodump_raid5_layout) == 40, \"iodump_raid5_layout size\");"
        ));
        assert_eq!(crate::kernel::Raid5Layout::default().to_bytes().len(), 40);
    }

    #[test]
    fn offsets_match_the_header() {
        let h = include_str!("../../ebpf/iodump.h");
        for (field, off) in [
            ("op", 2),
            ("flags", 3),
            ("path_kind", 4),
            ("ioflags", 5),
            ("error", 6),
            ("start_ns", 8),
            ("issue_ns", 16),
            ("complete_ns", 24),
            ("sector", 32),
            ("cgroup_id", 40),
            ("ino", 48),
            ("ino_dev", 56),
            ("ino_gen", 60),
            ("dev", 64),
            ("bytes", 68),
            ("pid", 72),
            ("tid", 76),
            ("dirtier_pid", 80),
            ("cpu", 84),
            ("syscall", 86),
            ("comm", 88),
            ("file_id", 104),
            ("upper_dev", 108),
            ("upper_start_ns", 112),
        ] {
            let needle = format!("offsetof(struct iodump_io_event, {field}) == {off},");
            assert!(h.contains(&needle), "iodump.h does not pin {needle}");
        }
        // the offsets PathEvent::parse and batch_events read at
        for (st, field, off) in [
            ("iodump_path_event", "path_kind", 2),
            ("iodump_path_event", "pflags", 3),
            ("iodump_path_event", "depth", 4),
            ("iodump_path_event", "names_len", 6),
            ("iodump_path_event", "ino", 8),
            ("iodump_path_event", "dev", 16),
            ("iodump_path_event", "gen", 20),
            ("iodump_path_event", "mnt_id", 24),
            ("iodump_path_event", "sb_dev", 28),
            ("iodump_path_event", "file_id", 32),
            ("iodump_path_event", "names", PATH_EVENT_BYTES),
            ("iodump_batch", "count", 2),
            ("iodump_batch", "ev", BATCH_HDR_BYTES),
        ] {
            let needle = format!("offsetof(struct {st}, {field}) == {off},");
            assert!(h.contains(&needle), "iodump.h does not pin {needle}");
        }
        assert!(h.contains(&format!(
            "sizeof(struct iodump_io_event) == {IO_EVENT_BYTES},"
        )));
        assert!(h.contains(&format!(
            "sizeof(struct iodump_path_event) == {PATH_EVENT_BYTES},"
        )));
        assert!(h.contains(&format!(
            "sizeof(struct iodump_inflight) == {INFLIGHT_BYTES},"
        )));
        assert!(h.contains(&format!("sizeof(struct iodump_slot) == {SLOT_BYTES},")));
        for (name, v) in [
            ("IODUMP_EV_IO", EV_IO as u32),
            ("IODUMP_EV_PATH", EV_PATH as u32),
            ("IODUMP_EV_BATCH", EV_BATCH as u32),
            ("IODUMP_BATCH_MAX", BATCH_MAX as u32),
            ("IODUMP_BATCH_HDR", BATCH_HDR_BYTES as u32),
            ("IODUMP_FLUSH_BUSY", FLUSH_BUSY),
            ("IODUMP_SLOT_COMPLETING", SLOT_COMPLETING as u32),
            ("IODUMP_CNT_LOST_RINGBUF", counter::LOST_RINGBUF),
            ("IODUMP_CNT_LOST_INFLIGHT", counter::LOST_INFLIGHT),
            ("IODUMP_CNT_LOST_STALE", counter::LOST_STALE),
            ("IODUMP_CNT_EMITTED", counter::EMITTED),
            ("IODUMP_CNT_BATCHES", counter::BATCHES),
            ("IODUMP_CNT_BIO_RESCUED", counter::BIO_RESCUED),
            ("IODUMP_CNT_RQ_RESCUED", counter::RQ_RESCUED),
            ("IODUMP_CNT_QUEUE_RESCUED", counter::QUEUE_RESCUED),
            ("IODUMP_CNT_CHAIN_UNTRACED", counter::CHAIN_UNTRACED),
            (
                "IODUMP_CNT_PASSTHROUGH_NO_START",
                counter::PASSTHROUGH_NO_START,
            ),
            ("IODUMP_CNT_FLUSH_FOLLOWED", counter::FLUSH_FOLLOWED),
            ("IODUMP_CNT_MAX", counter::MAX),
            ("IODUMP_PK_BDEV", path_kind::BDEV as u32),
            ("IODUMP_PK_DIO", path_kind::DIO as u32),
        ] {
            assert_eq!(define(h, name), v, "{name}");
        }
        // every other constant abi.rs repeats
        for (name, v) in [
            ("IODUMP_IOF_BIO_BASED", io_flag::BIO_BASED as u32),
            ("IODUMP_IOF_ISSUED", io_flag::ISSUED as u32),
            ("IODUMP_IOF_DIRTIER", io_flag::DIRTIER as u32),
            ("IODUMP_IOF_PATH_LOST", io_flag::PATH_LOST as u32),
            ("IODUMP_IOF_KTHREAD", io_flag::KTHREAD as u32),
            ("IODUMP_PK_UNKNOWN", path_kind::UNKNOWN as u32),
            ("IODUMP_PK_FILE", path_kind::FILE as u32),
            ("IODUMP_PK_META", path_kind::META as u32),
            ("IODUMP_PK_JOURNAL", path_kind::JOURNAL as u32),
            ("IODUMP_PK_SWAP", path_kind::SWAP as u32),
            ("IODUMP_PK_RAWDEV", path_kind::RAWDEV as u32),
            ("IODUMP_PK_USERMEM", path_kind::USERMEM as u32),
            ("IODUMP_PF_TRUNCATED", path_flag::TRUNCATED as u32),
            ("IODUMP_PF_DELETED", path_flag::DELETED as u32),
            ("IODUMP_PF_DISCONNECTED", path_flag::DISCONNECTED as u32),
            ("IODUMP_PF_NO_DENTRY", path_flag::NO_DENTRY as u32),
            ("IODUMP_SC_NONE", SC_NONE as u32),
            ("IODUMP_SC_FAULT", SC_FAULT as u32),
            ("IODUMP_CNT_LOST_PATH", counter::LOST_PATH),
            ("IODUMP_CNT_TRACKED", counter::TRACKED),
            ("IODUMP_CNT_NO_START", counter::NO_START),
            ("IODUMP_CNT_RQ_MERGED", counter::RQ_MERGED),
            ("IODUMP_CNT_PATHS", counter::PATHS),
            ("IODUMP_CNT_FILTERED", counter::FILTERED),
            ("IODUMP_CNT_SAMPLED_OUT", counter::SAMPLED_OUT),
            ("IODUMP_CNT_SIZE_FILTERED", counter::SIZE_FILTERED),
            ("IODUMP_CNT_FLUSH_NO_START", counter::FLUSH_NO_START),
            ("IODUMP_CNT_RQ_UNTRACKED", counter::RQ_UNTRACKED),
        ] {
            assert_eq!(define(h, name), v, "{name}");
        }
    }

    #[test]
    fn an_entry_in_flight_reads_as_an_event_completing_now() {
        let mut entry = vec![0u8; INFLIGHT_BYTES];
        entry[2] = 2; // a write
        entry[8..16].copy_from_slice(&1_000u64.to_le_bytes());
        entry[32..40].copy_from_slice(&(2048u64 + 16).to_le_bytes());
        entry[68..72].copy_from_slice(&4096u32.to_le_bytes());
        entry[IO_EVENT_BYTES..].copy_from_slice(&2048u64.to_le_bytes());
        let r = in_flight_event(&entry, 5_000, 9_000).unwrap();
        let e = IoEvent::parse(&r).unwrap();
        assert_eq!((e.op, e.start_ns, e.complete_ns), (2, 1_000, 9_000));
        assert_eq!((e.sector, e.bytes), (16, 4096));
        // started too late, never started, or not a whole entry
        assert!(in_flight_event(&entry, 1_000, 9_000).is_none());
        entry[8..16].fill(0);
        assert!(in_flight_event(&entry, 5_000, 9_000).is_none());
        assert!(in_flight_event(&entry[..IO_EVENT_BYTES], 5_000, 9_000).is_none());
    }

    #[test]
    fn parses_records() {
        let mut b = vec![0u8; IO_EVENT_BYTES];
        b[0] = 1;
        b[2] = 1;
        b[8..16].copy_from_slice(&77u64.to_le_bytes());
        b[68..72].copy_from_slice(&4096u32.to_le_bytes());
        b[88..92].copy_from_slice(b"dd\0\0");
        b[108..112].copy_from_slice(&(253u32 << 20).to_le_bytes());
        b[112..120].copy_from_slice(&70u64.to_le_bytes());
        let e = IoEvent::parse(&b).unwrap();
        assert_eq!((e.op, e.start_ns, e.bytes), (1, 77, 4096));
        assert_eq!((e.upper_dev, e.upper_start_ns), (253 << 20, 70));
        assert_eq!(e.comm(), b"dd");
        assert!(IoEvent::parse(&b[..50]).is_none());

        let mut p = vec![0u8; PATH_EVENT_BYTES];
        p[0] = 2;
        p[4] = 3;
        let names = b"f.txt\0dir\0home\0";
        p[6] = names.len() as u8;
        p.extend_from_slice(names);
        let pe = PathEvent::parse(&p).unwrap();
        assert_eq!(pe.relative_path(), b"/home/dir/f.txt");
        p[6] = 200;
        assert!(PathEvent::parse(&p).is_none());

        let mut batch = vec![0u8; BATCH_HDR_BYTES];
        batch[0] = 3;
        batch[2] = 2;
        batch.extend_from_slice(&b);
        b[8..16].copy_from_slice(&78u64.to_le_bytes());
        batch.extend_from_slice(&b);
        let starts: Vec<u64> = batch_events(&batch)
            .unwrap()
            .map(|r| IoEvent::parse(r).unwrap().start_ns)
            .collect();
        assert_eq!(starts, [77, 78]);
        // a count beyond the bytes present, or beyond the maximum, is refused
        assert!(batch_events(&batch[..batch.len() - 1]).is_none());
        batch[2] = 33;
        assert!(batch_events(&batch).is_none());
        batch[0] = 1;
        assert!(batch_events(&batch).is_none());
    }
}
