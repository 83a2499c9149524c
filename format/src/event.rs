//! The logical content of a trace: events, table entries, losses and the header.
//!
//! These are the values a [`crate::Writer`] takes and a [`crate::Reader`] gives back; the bytes
//! on disk are described in `schemas/iod-format.md`.

use std::fmt;

/// A block device number in the kernel's internal encoding: `major << 20 | minor`
/// (`MKDEV` in `include/linux/kdev_t.h`), which is what `bio->bi_bdev->bd_dev` holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevT(pub u32);

impl DevT {
    /// Builds a device number from its major and minor numbers.
    pub const fn new(major: u32, minor: u32) -> Self {
        DevT((major << 20) | (minor & 0xF_FFFF))
    }
    /// The major number.
    pub const fn major(self) -> u32 {
        self.0 >> 20
    }
    /// The minor number.
    pub const fn minor(self) -> u32 {
        self.0 & 0xF_FFFF
    }
    /// A device number written `MAJ:MIN` in decimal (as sysfs, the trace's text exports and
    /// the Parquet tables write it), `None` for anything else: a sign, white space, a part
    /// missing, or a number the kernel's encoding cannot hold (a major of 4,096 or more, a
    /// minor of 2^20 or more), which [`DevT::new`] would silently mask.
    pub fn parse(s: &str) -> Option<DevT> {
        let (ma, mi) = s.split_once(':')?;
        let part = |t: &str| -> Option<u32> {
            if t.is_empty() || t.len() > 10 || !t.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            t.parse().ok()
        };
        let (ma, mi) = (part(ma)?, part(mi)?);
        (ma < 1 << 12 && mi < 1 << 20).then(|| DevT::new(ma, mi))
    }
}

impl fmt::Display for DevT {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major(), self.minor())
    }
}

/// The operation of an I/O (`REQ_OP_*`, normalised). Stored as one byte; values this version
/// does not know read back as [`Op::Other`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Op {
    /// `REQ_OP_READ`.
    #[default]
    Read = 0,
    /// `REQ_OP_WRITE`.
    Write = 1,
    /// `REQ_OP_FLUSH` (a cache flush with no data).
    Flush = 2,
    /// `REQ_OP_DISCARD`.
    Discard = 3,
    /// `REQ_OP_SECURE_ERASE`.
    SecureErase = 4,
    /// `REQ_OP_WRITE_ZEROES`.
    WriteZeroes = 5,
    /// Any other operation (zone management, driver-private…).
    Other = 6,
}

impl Op {
    /// All operations, in code order.
    pub const ALL: [Op; 7] = [
        Op::Read,
        Op::Write,
        Op::Flush,
        Op::Discard,
        Op::SecureErase,
        Op::WriteZeroes,
        Op::Other,
    ];
    /// Decodes a stored code; unknown codes become [`Op::Other`].
    pub fn from_code(code: u8) -> Op {
        Op::ALL.get(code as usize).copied().unwrap_or(Op::Other)
    }
    /// The stored code.
    pub fn code(self) -> u8 {
        self as u8
    }
    /// The original iodump's one-letter `rw` column: R, W, F, D, E, Z, N.
    pub fn letter(self) -> char {
        match self {
            Op::Read => 'R',
            Op::Write => 'W',
            Op::Flush => 'F',
            Op::Discard => 'D',
            Op::SecureErase => 'E',
            Op::WriteZeroes => 'Z',
            Op::Other => 'N',
        }
    }
    /// Lower-case name used in text and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Flush => "flush",
            Op::Discard => "discard",
            Op::SecureErase => "secure_erase",
            Op::WriteZeroes => "write_zeroes",
            Op::Other => "other",
        }
    }
}

/// Request flags of an I/O, a bit set (`REQ_*`, normalised to stable bit numbers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(pub u8);

impl Flags {
    /// `REQ_SYNC`.
    pub const SYNC: Flags = Flags(1 << 0);
    /// `REQ_META`.
    pub const META: Flags = Flags(1 << 1);
    /// `REQ_FUA` (forced unit access).
    pub const FUA: Flags = Flags(1 << 2);
    /// `REQ_PREFLUSH` (flush the cache before this write).
    pub const PREFLUSH: Flags = Flags(1 << 3);
    /// `REQ_RAHEAD` (readahead).
    pub const READAHEAD: Flags = Flags(1 << 4);
    /// `REQ_BACKGROUND` (background writeback).
    pub const BACKGROUND: Flags = Flags(1 << 5);
    /// `REQ_NOWAIT`.
    pub const NOWAIT: Flags = Flags(1 << 6);
    /// Bits defined by this version; others are preserved but not named.
    pub const KNOWN: u8 = 0x7f;
    /// Names of the known bits, in bit order, with their one-letter code (the original's
    /// `rwsec` letters where it had one).
    pub const NAMES: [(Flags, &'static str, char); 7] = [
        (Flags::SYNC, "sync", 'S'),
        (Flags::META, "meta", 'M'),
        (Flags::FUA, "fua", 'F'),
        (Flags::PREFLUSH, "preflush", 'P'),
        (Flags::READAHEAD, "readahead", 'A'),
        (Flags::BACKGROUND, "background", 'B'),
        (Flags::NOWAIT, "nowait", 'N'),
    ];

    /// True when every bit of `other` is set in `self`.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
    /// The union of two flag sets.
    pub fn union(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }
    /// The inverse of [`Flags::letters`] (unknown letters and `V` are ignored).
    pub fn from_letters(s: &str) -> Flags {
        let mut f = Flags(0);
        for ch in s.chars() {
            if let Some((x, _, _)) = Flags::NAMES.iter().find(|(_, _, c)| *c == ch) {
                f = f.union(*x);
            }
        }
        f
    }

    /// Letters of the set bits (`SMF`…), or `V` (the original's "none") when empty.
    pub fn letters(self) -> String {
        let mut v = Vec::with_capacity(8);
        self.write_letters(&mut v);
        String::from_utf8(v).unwrap_or_default()
    }

    /// Appends [`Flags::letters`] to `out`, without a `String` (for per-event output).
    pub fn write_letters(self, out: &mut Vec<u8>) {
        let start = out.len();
        for (f, _, c) in Flags::NAMES {
            if self.contains(f) {
                out.push(c as u8);
            }
        }
        if out.len() == start {
            out.push(b'V');
        }
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        self.union(rhs)
    }
}

/// What caused an I/O: the syscall (or kernel activity) it is attributed to. Stored as a `u16`
/// code; codes from 0x8000 up are x86_64 system calls by number (named from
/// [`crate::syscalls::X86_64`]); codes this version does not know are kept and shown as
/// `syscall#N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Syscall(pub u16);

impl Syscall {
    /// Known codes and their names. Codes are stable across versions; new ones are appended.
    pub const NAMES: [(u16, &'static str); 24] = [
        (1, "read"),
        (2, "write"),
        (3, "pread64"),
        (4, "pwrite64"),
        (5, "readv"),
        (6, "writev"),
        (7, "preadv"),
        (8, "pwritev"),
        (9, "io_submit"),
        (10, "io_uring_enter"),
        (11, "fsync"),
        (12, "fdatasync"),
        (13, "sync_file_range"),
        (14, "sync"),
        (15, "page_fault"),
        (16, "readahead"),
        (17, "writeback"),
        (18, "journal"),
        (19, "openat"),
        (20, "copy_file_range"),
        (21, "fallocate"),
        (22, "msync"),
        (23, "getdents64"),
        (24, "execve"),
    ];
    /// `read(2)`.
    pub const READ: Syscall = Syscall(1);
    /// `write(2)`.
    pub const WRITE: Syscall = Syscall(2);
    /// `pread64(2)`.
    pub const PREAD64: Syscall = Syscall(3);
    /// `pwrite64(2)`.
    pub const PWRITE64: Syscall = Syscall(4);
    /// `io_submit(2)` (libaio).
    pub const IO_SUBMIT: Syscall = Syscall(9);
    /// `io_uring_enter(2)` or an io_uring worker.
    pub const IO_URING_ENTER: Syscall = Syscall(10);
    /// `fsync(2)`.
    pub const FSYNC: Syscall = Syscall(11);
    /// `fdatasync(2)`.
    pub const FDATASYNC: Syscall = Syscall(12);
    /// A page fault on a mapped file.
    pub const PAGE_FAULT: Syscall = Syscall(15);
    /// Readahead started by the kernel.
    pub const READAHEAD: Syscall = Syscall(16);
    /// Writeback by the flusher threads.
    pub const WRITEBACK: Syscall = Syscall(17);
    /// Filesystem journal commit (jbd2, xfs log).
    pub const JOURNAL: Syscall = Syscall(18);
    /// `getdents64(2)`.
    pub const GETDENTS64: Syscall = Syscall(23);

    /// First code of the x86_64 system calls without a code of their own: `X86_64_BASE + N`
    /// is system call N.
    pub const X86_64_BASE: u16 = 0x8000;

    /// The name of a known code (an x86_64 system call's from `X86_64_BASE` up), else
    /// `None`.
    pub fn name(self) -> Option<&'static str> {
        if let Some(n) = self.0.checked_sub(Syscall::X86_64_BASE) {
            return crate::syscalls::X86_64
                .get(n as usize)
                .copied()
                .filter(|s| !s.is_empty());
        }
        Syscall::NAMES
            .iter()
            .find(|(c, _)| *c == self.0)
            .map(|(_, n)| *n)
    }
    /// Looks a name up (a code's own name first, then an x86_64 system call's); also reads
    /// back the `syscall#N` form of codes without a name.
    pub fn from_name(name: &str) -> Option<Syscall> {
        Syscall::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(c, _)| Syscall(*c))
            .or_else(|| {
                let n = crate::syscalls::X86_64.iter().position(|s| *s == name)?;
                Some(Syscall(Syscall::X86_64_BASE + n as u16))
            })
            .or_else(|| name.strip_prefix("syscall#")?.parse().ok().map(Syscall))
    }
}

impl fmt::Display for Syscall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "syscall#{}", self.0),
        }
    }
}

/// One block I/O, from the moment it entered the block layer to its completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Event {
    /// When the I/O entered the block layer, in nanoseconds of the recording host's
    /// `CLOCK_MONOTONIC` (see [`Header::monotonic_ns`] to map it to UTC).
    pub timestamp_ns: u64,
    /// The device (partition where the I/O targets one) the I/O was sent to.
    pub dev: DevT,
    /// First sector, in 512-byte units, relative to `dev`.
    pub sector: u64,
    /// Size in bytes (0 for flushes).
    pub bytes: u32,
    /// Operation.
    pub op: Op,
    /// Request flags.
    pub flags: Flags,
    /// Process id (the kernel's tgid) of the submitter.
    pub pid: u32,
    /// Thread id (the kernel's pid) of the submitter.
    pub tid: u32,
    /// Path table id of the file (or label) the I/O belongs to; 0 = not resolved.
    pub path_id: u32,
    /// Time from entering the block layer to issue to the driver, in ns. `None` for bio-based
    /// devices (zram, device-mapper, md), which have no request queue.
    pub queue_ns: Option<u64>,
    /// Total time from entering the block layer to completion, in ns.
    pub latency_ns: u64,
    /// Completion status as a positive errno; 0 = success.
    pub error: u16,
    /// CPU the I/O was submitted on.
    pub cpu: u16,
    /// The syscall or kernel activity that caused the I/O, when known.
    pub syscall: Option<Syscall>,
    /// For writeback: the pid that dirtied the pages, when known.
    pub dirtier_pid: Option<u32>,
    /// cgroup v2 id of the submitter (the inode number of the cgroup directory); 0 = unknown.
    pub cgroup_id: u64,
    /// For an I/O a stacked device (device-mapper, md) sent to a device below: the I/O on the
    /// stacked device it serves (since 1.4). `None` for every other I/O.
    pub upper: Option<UpperIo>,
}

/// The I/O on a stacked device that an I/O below it serves ([`Event::upper`]): the event
/// whose `dev` is `dev`, whose `timestamp_ns` is `timestamp_ns` and whose `tid` is the lower
/// event's own `tid` (a lower I/O carries its upper I/O's submitter, so the three together
/// name one event: a thread starts one I/O at a time on a device).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UpperIo {
    /// The stacked device (`dm-0`, `md127`).
    pub dev: DevT,
    /// When that I/O entered the block layer ([`Event::timestamp_ns`] of its event).
    pub timestamp_ns: u64,
}

impl Event {
    /// Time from issue to completion (driver and device), in ns: `latency_ns - queue_ns`.
    /// For bio-based devices this is the whole latency.
    pub fn device_ns(&self) -> u64 {
        self.latency_ns.saturating_sub(self.queue_ns.unwrap_or(0))
    }
}

/// A block device of the recording host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// Its number.
    pub dev: DevT,
    /// Kernel name without `/dev/` (`nvme0n1p2`, `sda`, `zram0`, `dm-0`).
    pub name: String,
    /// The whole disk this is a partition of; `None` for a whole disk.
    pub partition_of: Option<DevT>,
    /// Logical sector (block) size in bytes.
    pub sector_size: u32,
    /// First sector of the partition on its whole disk, in 512-byte units; 0 for a disk.
    pub start_sector: u64,
    /// True for bio-based devices (no request queue, so no `queue_ns`).
    pub bio_based: bool,
    /// What a stacked device is (since 1.3): the device-mapper name (`vg-lv`,
    /// `luks-…`), or the md RAID level (`raid1`); empty for other devices.
    pub label: String,
    /// The devices a stacked device sends its I/O to (since 1.3: sysfs `slaves/`, e.g.
    /// `dm-0` on `sda2`); empty for other devices.
    pub stacked_on: Vec<DevT>,
}

/// A thread seen by the recorder.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Process {
    /// Thread id (the kernel's pid).
    pub tid: u32,
    /// Process id (the kernel's tgid).
    pub pid: u32,
    /// Command name (`comm`, at most 15 bytes in the kernel; kept as bytes).
    pub comm: Vec<u8>,
    /// cgroup v2 id; 0 = unknown.
    pub cgroup_id: u64,
    /// The process's command line as the recorder read it from `/proc/PID/cmdline` when it
    /// first saw the process (or saw it exec): arguments separated by single spaces, at most
    /// [`ARGS_MAX_BYTES`] bytes, not necessarily UTF-8. `None` when unknown: kernel threads,
    /// a process gone before it could be read, traces of format 1.0. Show `comm` then.
    pub args: Option<Vec<u8>>,
}

/// The most bytes of a command line kept in [`Process::args`].
pub const ARGS_MAX_BYTES: usize = 256;

impl Process {
    /// The command line, or the command name when it is not known.
    pub fn args_or_comm(&self) -> &[u8] {
        match &self.args {
            Some(a) if !a.is_empty() => a,
            _ => &self.comm,
        }
    }
}

/// What a path table entry names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PathKind {
    /// Nothing could be found (`[unknown]`).
    #[default]
    Unknown = 0,
    /// A regular file (or directory) with a path.
    File = 1,
    /// Filesystem metadata: inode tables, bitmaps, directories (`[metadata]`).
    Metadata = 2,
    /// The filesystem journal (`[journal]`).
    Journal = 3,
    /// Swap (`[swap]`).
    Swap = 4,
    /// I/O on the raw block device (the path is the device node, `/dev/vdb`).
    RawDevice = 5,
    /// A cache flush (an empty flush request, `[flush]`): no data, so no file (since 1.1).
    Flush = 6,
    /// A discard of blocks no file holds (`[discard]`): freed extents, discarded by a
    /// filesystem's online discard or by fstrim (since 1.2).
    Discard = 7,
}

impl PathKind {
    /// Decodes a stored code; unknown codes become [`PathKind::Unknown`].
    pub fn from_code(code: u8) -> PathKind {
        match code {
            1 => PathKind::File,
            2 => PathKind::Metadata,
            3 => PathKind::Journal,
            4 => PathKind::Swap,
            5 => PathKind::RawDevice,
            6 => PathKind::Flush,
            7 => PathKind::Discard,
            _ => PathKind::Unknown,
        }
    }
    /// Lower-case name used in text and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Unknown => "unknown",
            PathKind::File => "file",
            PathKind::Metadata => "metadata",
            PathKind::Journal => "journal",
            PathKind::Swap => "swap",
            PathKind::RawDevice => "raw_device",
            PathKind::Flush => "flush",
            PathKind::Discard => "discard",
        }
    }
}

/// An entry of the path table: what `Event::path_id` points to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PathEntry {
    /// Its id (≥ 1), unique within the trace.
    pub path_id: u32,
    /// The device of the filesystem holding the inode.
    pub dev: DevT,
    /// Inode number; 0 when there is none (labels).
    pub inode: u64,
    /// What the entry names.
    pub kind: PathKind,
    /// The path was cut from the root side (too deep or too long); it starts with `…/`.
    pub truncated: bool,
    /// The file had been unlinked when the path was taken.
    pub deleted: bool,
    /// Absolute path bytes (not necessarily UTF-8), or a label such as `[metadata]`.
    pub path: Vec<u8>,
    /// The inode's generation (`i_generation`): with `dev` and `inode`, which file this is
    /// even when a deleted file's inode number is given to a new one. `None` for labels and
    /// in traces of format 1.0.
    pub generation: Option<u32>,
}

/// What follows the name of a file unlinked when its path was taken, wherever iodump shows a
/// name (as `/proc/PID/fd` and `lsof` show one): `/tmp/sort1 (deleted)`.
pub const DELETED_SUFFIX: &[u8] = DELETED_SUFFIX_TEXT.as_bytes();

/// [`DELETED_SUFFIX`] as text, for names already made text.
pub const DELETED_SUFFIX_TEXT: &str = " (deleted)";

impl PathEntry {
    /// The name as iodump shows it: the path bytes, then [`DELETED_SUFFIX`] when the file was
    /// unlinked when the path was taken.
    pub fn shown(&self) -> std::borrow::Cow<'_, [u8]> {
        if self.deleted {
            let mut v = Vec::with_capacity(self.path.len() + DELETED_SUFFIX.len());
            v.extend_from_slice(&self.path);
            v.extend_from_slice(DELETED_SUFFIX);
            std::borrow::Cow::Owned(v)
        } else {
            std::borrow::Cow::Borrowed(&self.path)
        }
    }

    /// The entry of a file (not cut, not deleted, no generation known) named `path`.
    pub fn file(path_id: u32, dev: DevT, inode: u64, path: Vec<u8>) -> PathEntry {
        PathEntry {
            path_id,
            dev,
            inode,
            kind: PathKind::File,
            truncated: false,
            deleted: false,
            path,
            generation: None,
        }
    }
}

/// Why events were lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LossReason {
    /// Not said.
    #[default]
    Unspecified = 0,
    /// The kernel-to-user ring buffer was full.
    RingBufferFull = 1,
    /// The in-flight table was full at submission, so the I/O was not tracked.
    InFlightFull = 2,
    /// A tracked I/O never completed and was evicted.
    Evicted = 3,
    /// The user-space writer could not keep up or failed.
    Writer = 4,
    /// The kernel skipped a tracing program that would have run nested in itself on one CPU
    /// (BPF `recursion_misses`), so the I/O was not tracked.
    Nested = 5,
    /// The kernel does not trace the completion of this kind of I/O, so it was not tracked:
    /// a chained bio (a discard or zero-out run's bios) on a bio-based device of a kernel
    /// before 5.12.17 and 5.13.
    CompletionNotTraced = 6,
}

impl LossReason {
    /// Decodes a stored code; unknown codes become [`LossReason::Unspecified`].
    pub fn from_code(code: u8) -> LossReason {
        match code {
            1 => LossReason::RingBufferFull,
            2 => LossReason::InFlightFull,
            3 => LossReason::Evicted,
            4 => LossReason::Writer,
            5 => LossReason::Nested,
            6 => LossReason::CompletionNotTraced,
            _ => LossReason::Unspecified,
        }
    }
    /// Lower-case name used in text and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            LossReason::Unspecified => "unspecified",
            LossReason::RingBufferFull => "ring_buffer_full",
            LossReason::InFlightFull => "in_flight_full",
            LossReason::Evicted => "evicted",
            LossReason::Writer => "writer",
            LossReason::Nested => "nested",
            LossReason::CompletionNotTraced => "completion_not_traced",
        }
    }
}

/// A count of events lost on one CPU during a time window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Loss {
    /// CPU whose counter this is; 65535 for a count over all CPUs.
    pub cpu: u16,
    /// Why.
    pub reason: LossReason,
    /// Number of events lost.
    pub count: u64,
    /// Start of the window (monotonic ns, as event timestamps).
    pub start_ns: u64,
    /// End of the window (monotonic ns).
    pub end_ns: u64,
}

/// What the recording was: written once, at the start of the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Wall-clock time (ns since the Unix epoch, UTC) taken at the same instant as
    /// `monotonic_ns`.
    pub wall_clock_ns: i64,
    /// `CLOCK_MONOTONIC` at that instant: an event happened at
    /// `wall_clock_ns + (timestamp_ns - monotonic_ns)`.
    pub monotonic_ns: u64,
    /// Host name of the recording machine.
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Name and version of the tool that wrote the file (`iodump 0.1.0`).
    pub tool_version: String,
    /// The recorder's own command line.
    pub recorder_argv: Vec<String>,
    /// The command traced with `-- CMD`, if any.
    pub command_argv: Option<Vec<String>>,
    /// Free key/value metadata (a fio job file, a ticket number…), in order.
    pub metadata: Vec<(String, String)>,
}

impl Header {
    /// Maps a monotonic event timestamp to UTC nanoseconds since the epoch.
    pub fn to_utc_ns(&self, timestamp_ns: u64) -> i64 {
        self.wall_clock_ns
            .wrapping_add((timestamp_ns as i64).wrapping_sub(self.monotonic_ns as i64))
    }
}

/// What the recording's end said: written once, just before the footer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndInfo {
    /// Monotonic time at which recording stopped.
    pub end_monotonic_ns: u64,
    /// Events written in the whole file.
    pub events: u64,
    /// Events lost in the whole file (sum of loss records).
    pub lost_events: u64,
    /// Exit status of the traced command: its exit code, or `128 + signal` if killed.
    pub command_exit_status: Option<i32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_reasons_read_back_from_their_codes_and_unknown_codes_as_unspecified() {
        let all = [
            LossReason::Unspecified,
            LossReason::RingBufferFull,
            LossReason::InFlightFull,
            LossReason::Evicted,
            LossReason::Writer,
            LossReason::Nested,
            LossReason::CompletionNotTraced,
        ];
        for r in all {
            assert_eq!(LossReason::from_code(r as u8), r, "{}", r.name());
        }
        let names: std::collections::HashSet<_> = all.iter().map(|r| r.name()).collect();
        assert_eq!(names.len(), all.len(), "one name each");
        assert_eq!(
            LossReason::CompletionNotTraced.name(),
            "completion_not_traced"
        );
        assert_eq!(LossReason::from_code(7), LossReason::Unspecified);
        assert_eq!(LossReason::from_code(255), LossReason::Unspecified);
    }

    #[test]
    fn device_numbers_parse_only_as_the_kernel_can_hold_them() {
        for (text, want) in [
            ("8:1", Some(DevT::new(8, 1))),
            ("0:0", Some(DevT(0))),
            ("259:3", Some(DevT::new(259, 3))),
            ("4095:1048575", Some(DevT::new(4095, 1_048_575))),
            ("08:01", Some(DevT::new(8, 1))),
        ] {
            assert_eq!(DevT::parse(text), want, "{text}");
            if let Some(d) = want {
                assert_eq!(DevT::parse(&d.to_string()), Some(d), "{d} reads back");
            }
        }
        for bad in [
            "",
            "8",
            "8:",
            ":1",
            "a:b",
            "8:1x",
            "-1:2",
            "+8:1",
            " 8:1",
            "8:1\n",
            "4096:0",
            "8:1048576",
            "99999999999:1",
            "8:1:2",
        ] {
            assert_eq!(DevT::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn every_x86_64_system_call_has_a_name_and_reads_back() {
        for n in (0u16..=334).chain(424..=469) {
            let s = Syscall(Syscall::X86_64_BASE + n);
            let name = s
                .name()
                .unwrap_or_else(|| panic!("syscall {n} has no name"));
            assert_ne!(name, "");
            // a name with a code of its own reads back as that code
            let back = Syscall::from_name(name).unwrap();
            assert!(
                back == s || Syscall::NAMES.iter().any(|(c, _)| *c == back.0),
                "{name}"
            );
        }
        assert_eq!(Syscall(0x8000 + 21).to_string(), "access");
        assert_eq!(Syscall::from_name("access"), Some(Syscall(0x8000 + 21)));
        assert_eq!(Syscall::from_name("read"), Some(Syscall::READ));
        // numbers no call has, and past the table, stay numbers
        assert_eq!(Syscall(0x8000 + 400).to_string(), "syscall#33168");
        assert_eq!(Syscall(0x8000 + 4000).name(), None);
        assert_eq!(
            Syscall::from_name("syscall#33168"),
            Some(Syscall(0x8000 + 400))
        );
    }
}
