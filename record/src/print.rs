//! One line per I/O, on stdout or appended to a file: aligned text (devices by name), CSV (the
//! original iodump's columns first, the bytes `iodump export` writes), JSON lines, and the
//! original iodump's own mode (its columns as it printed them, or CSV / JSON with the seed
//! article's columns first).
//!
//! The hot path formats into one reused line buffer: no allocation per event once warm (but
//! for bytes that are not valid UTF-8 or are control characters, which are escaped).

use std::fs::File;
use std::io::{BufWriter, Stdout, Write};
use std::sync::Arc;

use iodump_format::inthash::IntMap;
use iodump_format::summary::civil_from_days;
use iodump_format::text::{
    csv_line, escape_json, escape_text, header_line, json_line, json_opt, json_upper, LineFormat,
};
use iodump_format::{Device, Event, Flags, Header, Op};

use crate::abi::{path_kind, IoEvent};

/// A line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrintFormat {
    /// Aligned text, devices by name.
    Text,
    /// CSV: `timestamp,pid,comm,iosize,rw,lba,path` then the other fields, `args` last (as
    /// `iodump export`).
    Csv,
    /// One JSON object per line (as `iodump export --format jsonl`).
    Json,
    /// The original iodump's command line.
    Original(OriginalFormat),
}

/// What the original iodump's mode prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OriginalFormat {
    /// Its columns, CSV or JSON.
    pub style: OriginalStyle,
    /// Print the header line (`-H` turns it off).
    pub header: bool,
}

/// The original's aligned columns, or the article's CSV and JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OriginalStyle {
    /// Aligned columns as the original iodump printed them (`-o FIELDS`, `-O FIELDS`).
    Columns(Columns),
    /// `-o csv`: the CSV of [`PrintFormat::Csv`].
    Csv,
    /// `-o json`: one JSON object per line with the CSV's columns as keys, in its order.
    Json,
}

/// A set of the original iodump's output fields (and a few of ours), printed in a fixed order
/// whatever the order given (as the original did).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Columns(pub u32);

/// The fields in print order: name, bit, what it shows.
pub const FIELDS: [(&str, u32, &str); 20] = [
    (
        "datetime",
        1 << 0,
        "local date and time, microseconds (2022-03-23T16:42:05.315695)",
    ),
    (
        "timestamp",
        1 << 1,
        "microseconds since the epoch (1648025082259168)",
    ),
    ("comm", 1 << 2, "command name of the submitting thread"),
    ("pid", 1 << 3, "process id (tgid)"),
    ("tid", 1 << 4, "thread id"),
    ("iosize", 1 << 5, "size in bytes"),
    (
        "sector",
        1 << 6,
        "first sector on the whole disk (512 bytes)",
    ),
    ("partition", 1 << 7, "device name (sda5, nvme0n1p2)"),
    (
        "rw",
        1 << 8,
        "R W D (discard) E (secure erase) F (flush) N (other)",
    ),
    (
        "rwsec",
        1 << 9,
        "F (FUA) A (readahead) S (sync) M (meta), V for none",
    ),
    (
        "launcher",
        1 << 10,
        "the syscall or kernel activity behind the I/O",
    ),
    ("ino", 1 << 11, "inode number of the file, 0 if none"),
    (
        "lba",
        1 << 12,
        "first sector relative to the device (512 bytes)",
    ),
    ("dev", 1 << 13, "device number MAJ:MIN"),
    (
        "latency",
        1 << 14,
        "entry into the block layer to completion, microseconds",
    ),
    (
        "queue",
        1 << 15,
        "entry to issue to the driver, microseconds (- if bio-based)",
    ),
    ("cgroup", 1 << 16, "cgroup v2 id of the submitter"),
    ("cpu", 1 << 17, "CPU it was submitted on"),
    ("error", 1 << 18, "errno of the completion, 0 for success"),
    (
        "fullpath",
        1 << 19,
        "file path, - where there is none (metadata, journal…)",
    ),
];

fn bit(name: &str) -> u32 {
    FIELDS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or(0, |(_, b, _)| *b)
}

impl Columns {
    /// The original's default: datetime,comm,pid,iosize,sector,rw,rwsec,launcher,fullpath.
    pub fn original_default() -> Columns {
        Columns(
            [
                "datetime", "comm", "pid", "iosize", "sector", "rw", "rwsec", "launcher",
                "fullpath",
            ]
            .iter()
            .map(|n| bit(n))
            .fold(0, |a, b| a | b),
        )
    }

    /// Parses a comma-separated field list (`comm,pid`); an unknown field is an error that
    /// lists the known ones.
    pub fn parse(list: &str) -> Result<Columns, String> {
        let mut c = 0;
        for f in list.split(',') {
            let f = f.trim();
            match bit(f) {
                0 => {
                    return Err(format!(
                        "unknown field {f:?} (fields: {})",
                        FIELDS
                            .iter()
                            .map(|(n, _, _)| *n)
                            .collect::<Vec<_>>()
                            .join(",")
                    ))
                }
                b => c |= b,
            }
        }
        Ok(Columns(c))
    }

    /// The union of two sets.
    pub fn with(self, other: Columns) -> Columns {
        Columns(self.0 | other.0)
    }

    fn has(self, name: &str) -> bool {
        self.0 & bit(name) != 0
    }
}

/// Where lines go.
enum Out {
    Stdout(Stdout),
    File(Arc<File>),
}

impl Write for Out {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Out::Stdout(s) => s.write(b),
            Out::File(f) => (&**f).write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Stdout(s) => s.flush(),
            Out::File(f) => (&**f).flush(),
        }
    }
}

/// The local time of one second, formatted once (`2022-03-23T16:42:05`).
struct LocalSecond {
    sec: i64,
    text: [u8; 19],
}

/// Prints events; one reused line buffer, no allocation per event once warm.
pub struct Printer {
    fmt: PrintFormat,
    out: BufWriter<Out>,
    line: Vec<u8>,
    header: Header,
    /// Device number → (name, first sector on its disk).
    devices: IntMap<u32, (String, u64)>,
    local: LocalSecond,
    /// Whoever read the lines has gone (`iodump record | head`): a write found a broken pipe.
    pub broken: bool,
}

impl Printer {
    /// A printer to stdout, or appending to `to`; `devices` names the devices.
    pub fn new(
        fmt: PrintFormat,
        header: &Header,
        devices: &[Device],
        to: Option<Arc<File>>,
    ) -> Printer {
        let out = match to {
            Some(f) => Out::File(f),
            None => Out::Stdout(std::io::stdout()),
        };
        Printer {
            fmt,
            out: BufWriter::with_capacity(1 << 16, out),
            line: Vec::with_capacity(512),
            header: header.clone(),
            devices: devices
                .iter()
                .map(|d| (d.dev.0, (d.name.clone(), d.start_sector)))
                .collect(),
            local: LocalSecond {
                sec: i64::MIN,
                text: [b' '; 19],
            },
            broken: false,
        }
    }

    /// Prints the column header (text and CSV; none for JSON, or when turned off).
    pub fn header(&mut self) {
        self.line.clear();
        header_into(self.fmt, &mut self.line);
        let r = self.out.write_all(&self.line);
        self.note(r);
    }

    /// Prints one event; `r` is the kernel's record of it (its comm and inode); `args` the
    /// process's command line when it is known (else the comm is shown).
    pub fn event(&mut self, e: &Event, r: &IoEvent, path: &[u8], args: Option<&[u8]>) {
        let ino = if matches!(r.path_kind, path_kind::FILE | path_kind::DIO) {
            r.ino
        } else {
            0
        };
        self.line.clear();
        let mut line = std::mem::take(&mut self.line);
        self.format(&mut line, e, r.comm(), path, args.unwrap_or(r.comm()), ino);
        let r = self.out.write_all(&line);
        self.note(r);
        self.line = line;
    }

    /// Notes a broken pipe; other write errors are not the recorder's to stop for.
    #[inline]
    fn note(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.broken |= e.kind() == std::io::ErrorKind::BrokenPipe;
        }
    }

    /// Formats one event as a line (with its newline) into `l`; `args` (the command line)
    /// is shown by CSV and JSON.
    pub fn format(
        &mut self,
        l: &mut Vec<u8>,
        e: &Event,
        comm: &[u8],
        path: &[u8],
        args: &[u8],
        ino: u64,
    ) {
        let utc = self.header.to_utc_ns(e.timestamp_ns);
        match self.fmt {
            PrintFormat::Text => self.text(l, utc, e, comm, path),
            PrintFormat::Csv
            | PrintFormat::Original(OriginalFormat {
                style: OriginalStyle::Csv,
                ..
            }) => csv_line(l, utc, e, comm, path, args),
            PrintFormat::Json => json_line(l, utc, e, comm, path, args),
            PrintFormat::Original(OriginalFormat {
                style: OriginalStyle::Json,
                ..
            }) => rows_json(l, utc, e, comm, path, args),
            PrintFormat::Original(OriginalFormat {
                style: OriginalStyle::Columns(c),
                ..
            }) => self.columns(l, c, utc, e, comm, path, ino),
        }
    }

    fn dev_name(&self, l: &mut Vec<u8>, e: &Event) {
        match self.devices.get(&e.dev.0) {
            Some((name, _)) => l.extend_from_slice(name.as_bytes()),
            None => {
                let _ = write!(l, "{}", e.dev);
            }
        }
    }

    fn text(&self, l: &mut Vec<u8>, utc: i64, e: &Event, comm: &[u8], path: &[u8]) {
        let secs = utc.div_euclid(1_000_000_000);
        let sod = secs.rem_euclid(86_400);
        let _ = write!(
            l,
            "{:02}:{:02}:{:02}.{:06} ",
            sod / 3600,
            sod / 60 % 60,
            sod % 60,
            utc.rem_euclid(1_000_000_000) / 1000
        );
        pad(l, |l| escape_text(l, comm), 16);
        let _ = write!(l, " {:<7} {:<7} ", e.pid, e.tid);
        pad(l, |l| self.dev_name(l, e), 10);
        let _ = write!(l, " {:<13} {:>6} {}  ", e.sector, e.bytes, e.op.letter());
        pad(l, |l| e.flags.write_letters(l), 6);
        let _ = write!(l, " {:>8.1} ", e.latency_ns as f64 / 1e3);
        match e.queue_ns {
            Some(q) => {
                let _ = write!(l, "{:>7.1} ", q as f64 / 1e3);
            }
            None => l.extend_from_slice(b"      - "),
        }
        escape_text(l, path);
        l.push(b'\n');
    }

    #[allow(clippy::too_many_arguments)]
    fn columns(
        &mut self,
        l: &mut Vec<u8>,
        c: Columns,
        utc: i64,
        e: &Event,
        comm: &[u8],
        path: &[u8],
        ino: u64,
    ) {
        self.columns_when_who(l, c, utc, e, comm);
        self.columns_where(l, c, e);
        columns_how(l, c, e, path, ino);
        l.push(b'\n');
    }

    /// The original's columns datetime, timestamp, comm, pid, tid, iosize.
    fn columns_when_who(&mut self, l: &mut Vec<u8>, c: Columns, utc: i64, e: &Event, comm: &[u8]) {
        let secs = utc.div_euclid(1_000_000_000);
        let micros = utc.rem_euclid(1_000_000_000) / 1000;
        if c.has("datetime") {
            if self.local.sec != secs {
                self.local = LocalSecond {
                    sec: secs,
                    text: local_datetime(secs),
                };
            }
            l.extend_from_slice(&self.local.text);
            let _ = write!(l, ".{micros:06}");
        }
        if c.has("timestamp") {
            let _ = write!(l, " {secs:>10}{micros:06} ");
        }
        if c.has("comm") {
            l.push(b' ');
            pad(l, |l| escape_text(l, comm), 15);
        }
        if c.has("pid") {
            let _ = write!(l, " {:>7}", e.pid);
        }
        if c.has("tid") {
            let _ = write!(l, " {:>7}", e.tid);
        }
        if c.has("iosize") {
            let _ = write!(l, " {:>6}", e.bytes);
        }
    }

    /// The columns sector (on the whole disk), partition, rw, rwsec.
    fn columns_where(&self, l: &mut Vec<u8>, c: Columns, e: &Event) {
        let dev = self.devices.get(&e.dev.0);
        if c.has("sector") {
            let start = dev.map_or(0, |(_, s)| *s);
            let _ = write!(l, " {:>11}", e.sector + start);
        }
        if c.has("partition") {
            l.push(b' ');
            pad(l, |l| self.dev_name(l, e), 9);
        }
        if c.has("rw") {
            // The original had no letter for write-zeroes: N (other).
            let letter = match e.op {
                Op::WriteZeroes => 'N',
                op => op.letter(),
            };
            let _ = write!(l, " {letter:>2}");
        }
        if c.has("rwsec") {
            let mut s = [0u8; 4];
            let mut n = 0;
            for (f, ch) in [
                (Flags::FUA, b'F'),
                (Flags::READAHEAD, b'A'),
                (Flags::SYNC, b'S'),
                (Flags::META, b'M'),
            ] {
                if e.flags.contains(f) {
                    s[n] = ch;
                    n += 1;
                }
            }
            if n == 0 {
                s[0] = b'V';
                n = 1;
            }
            l.extend_from_slice(&b"      "[..6 - n]);
            l.extend_from_slice(&s[..n]);
        }
    }

    /// Flushes the output.
    pub fn flush(&mut self) {
        let r = self.out.flush();
        self.note(r);
    }
}

/// The columns launcher (the syscall), ino, lba, dev, latency, queue, cgroup, cpu, error,
/// fullpath.
fn columns_how(l: &mut Vec<u8>, c: Columns, e: &Event, path: &[u8], ino: u64) {
    if c.has("launcher") {
        l.push(b' ');
        pad(
            l,
            |l| match e.syscall {
                // every x86_64 system call by its name (iodump_format::syscalls)
                Some(s) => match s.name() {
                    Some(name) => l.extend_from_slice(name.as_bytes()),
                    None => {
                        let _ = write!(l, "{s}");
                    }
                },
                None => l.push(b'-'),
            },
            13,
        );
        l.push(b' ');
    }
    if c.has("ino") {
        let _ = write!(l, " {ino:>9}");
    }
    if c.has("lba") {
        let _ = write!(l, " {:>11}", e.sector);
    }
    if c.has("dev") {
        l.push(b' ');
        pad(
            l,
            |l| {
                let _ = write!(l, "{}", e.dev);
            },
            8,
        );
    }
    if c.has("latency") {
        let _ = write!(l, " {:>11.1}", e.latency_ns as f64 / 1e3);
    }
    if c.has("queue") {
        match e.queue_ns {
            Some(q) => {
                let _ = write!(l, " {:>9.1}", q as f64 / 1e3);
            }
            None => l.extend_from_slice(b"         -"),
        }
    }
    if c.has("cgroup") {
        let _ = write!(l, " {:>10}", e.cgroup_id);
    }
    if c.has("cpu") {
        let _ = write!(l, " {:>3}", e.cpu);
    }
    if c.has("error") {
        let _ = write!(l, " {:>5}", e.error);
    }
    if c.has("fullpath") {
        l.push(b' ');
        if is_path(path) {
            escape_text(l, path);
        } else {
            l.push(b'-');
        }
    }
}

/// A path, not a label such as `[metadata]` or `[unknown]`.
fn is_path(p: &[u8]) -> bool {
    !(p.is_empty() || (p.starts_with(b"[") && p.ends_with(b"]")))
}

/// Runs `f` to append a field, then pads it with spaces to `width` bytes.
fn pad(l: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>), width: usize) {
    let start = l.len();
    f(l);
    while l.len() < start + width {
        l.push(b' ');
    }
}

/// The header line of a format.
fn header_into(fmt: PrintFormat, l: &mut Vec<u8>) {
    match fmt {
        PrintFormat::Text => l.extend_from_slice(
            b"TIME(UTC)       COMM             PID     TID     DEV        SECTOR        BYTES RW FLAGS   LAT(us) QUE(us) PATH\n",
        ),
        PrintFormat::Csv => l.extend_from_slice(header_line(LineFormat::Csv)),
        PrintFormat::Json => {}
        PrintFormat::Original(o) if !o.header => {}
        PrintFormat::Original(o) => match o.style {
            OriginalStyle::Csv => l.extend_from_slice(header_line(LineFormat::Csv)),
            OriginalStyle::Json => {}
            OriginalStyle::Columns(c) => {
                let fields: [(&str, &str, usize, bool, &str); 20] = [
                    // name, text before, width, left-aligned, text after
                    ("datetime", "", 26, true, ""),
                    ("timestamp", " ", 16, false, " "),
                    ("comm", " ", 15, true, ""),
                    ("pid", " ", 7, false, ""),
                    ("tid", " ", 7, false, ""),
                    ("iosize", " ", 6, false, ""),
                    ("sector", " ", 11, false, ""),
                    ("partition", " ", 9, true, ""),
                    ("rw", " ", 2, false, ""),
                    ("rwsec", " ", 5, false, ""),
                    ("launcher", " ", 13, true, " "),
                    ("ino", " ", 9, false, ""),
                    ("lba", " ", 11, false, ""),
                    ("dev", " ", 8, true, ""),
                    ("latency(us)", " ", 11, false, ""),
                    ("queue(us)", " ", 9, false, ""),
                    ("cgroup", " ", 10, false, ""),
                    ("cpu", " ", 3, false, ""),
                    ("error", " ", 5, false, ""),
                    ("fullpath", " ", 0, true, ""),
                ];
                for ((name, before, w, left, after), (_, b, _)) in fields.iter().zip(FIELDS) {
                    if c.0 & b == 0 {
                        continue;
                    }
                    l.extend_from_slice(before.as_bytes());
                    let _ = if *left {
                        write!(l, "{name:<w$}")
                    } else {
                        write!(l, "{name:>w$}")
                    };
                    l.extend_from_slice(after.as_bytes());
                }
                l.push(b'\n');
            }
        },
    }
}

/// `2022-03-23T16:42:05` in this machine's time zone (`localtime_r`; UTC if it fails).
fn local_datetime(secs: i64) -> [u8; 19] {
    // SAFETY: localtime_r only writes the tm we pass, which lives on our stack.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: valid pointers to a time_t and a tm on our stack.
    let ok = !unsafe { libc::localtime_r(&t, &mut tm) }.is_null();
    let (y, mo, d, h, mi, s) = if ok {
        (
            tm.tm_year as i64 + 1900,
            tm.tm_mon as i64 + 1,
            tm.tm_mday as i64,
            tm.tm_hour as i64,
            tm.tm_min as i64,
            tm.tm_sec as i64,
        )
    } else {
        let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400);
        (y, mo, d, sod / 3600, sod / 60 % 60, sod % 60)
    };
    let mut out = [b' '; 19];
    let mut w = &mut out[..];
    let _ = write!(w, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    out
}

/// The CSV's columns as one JSON object: the article's first, `timestamp` a number of seconds
/// with microseconds as in the CSV.
fn rows_json(l: &mut Vec<u8>, utc: i64, e: &Event, comm: &[u8], path: &[u8], args: &[u8]) {
    let _ = write!(
        l,
        "{{\"timestamp\":{}.{:06},\"pid\":{},\"comm\":",
        utc.div_euclid(1_000_000_000),
        utc.rem_euclid(1_000_000_000) / 1000,
        e.pid
    );
    escape_json(l, comm);
    let _ = write!(
        l,
        ",\"iosize\":{},\"rw\":\"{}\",\"lba\":{},\"path\":",
        e.bytes,
        e.op.letter(),
        e.sector
    );
    escape_json(l, path);
    let _ = write!(l, ",\"tid\":{},\"dev\":\"{}\",\"flags\":\"", e.tid, e.dev);
    e.flags.write_letters(l);
    let _ = write!(l, "\",\"latency_ns\":{},\"queue_ns\":", e.latency_ns);
    json_opt(l, e.queue_ns);
    l.extend_from_slice(b",\"syscall\":");
    match e.syscall {
        Some(s) => {
            let _ = write!(l, "\"{s}\"");
        }
        None => l.extend_from_slice(b"null"),
    }
    let _ = write!(
        l,
        ",\"error\":{},\"cpu\":{},\"cgroup_id\":{},\"dirtier_pid\":",
        e.error, e.cpu, e.cgroup_id
    );
    json_opt(l, e.dirtier_pid.map(u64::from));
    json_upper(l, e);
    l.extend_from_slice(b",\"args\":");
    escape_json(l, args);
    l.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodump_format::text::{format_event, LineFormat};
    use iodump_format::{DevT, Syscall};

    fn header() -> Header {
        Header {
            wall_clock_ns: 1_630_456_789_000_000_000,
            monotonic_ns: 5_000_000_000,
            ..Header::default()
        }
    }

    fn events() -> Vec<(Event, &'static [u8], &'static [u8])> {
        let mut out = Vec::new();
        let base = Event {
            timestamp_ns: 5_312_345_678,
            dev: DevT::new(8, 1),
            sector: 0x38d200,
            bytes: 16384,
            op: Op::Read,
            flags: Flags(0),
            pid: 3141,
            tid: 3142,
            path_id: 1,
            queue_ns: Some(1234),
            latency_ns: 98765,
            error: 0,
            cpu: 1,
            syscall: Some(Syscall::PREAD64),
            dirtier_pid: None,
            cgroup_id: 77,
            upper: None,
        };
        out.push((base, &b"mysql"[..], &b"/var/lib/mysql/ibdata1"[..]));
        let mut e = base;
        e.op = Op::Write;
        e.flags = Flags::SYNC | Flags::FUA | Flags::META;
        e.queue_ns = None;
        e.syscall = Some(Syscall(0x8123));
        e.dirtier_pid = Some(9);
        e.error = 5;
        out.push((e, b"a,\"b\"\n\t\\", b"/x/caf\xe9,\\ \x01\x7f.db"));
        e.syscall = None;
        e.timestamp_ns = 0;
        e.op = Op::WriteZeroes;
        e.flags = Flags(0xff);
        out.push((e, b"", b"[metadata]"));
        out
    }

    fn printer(fmt: PrintFormat) -> Printer {
        let devs = [Device {
            dev: DevT::new(8, 1),
            name: "sda1".into(),
            partition_of: Some(DevT::new(8, 0)),
            sector_size: 512,
            start_sector: 2048,
            bio_based: false,
            label: String::new(),
            stacked_on: Vec::new(),
        }];
        Printer::new(fmt, &header(), &devs, None)
    }

    #[test]
    fn csv_and_json_are_the_bytes_of_export() {
        for (pf, lf) in [
            (PrintFormat::Csv, LineFormat::Csv),
            (PrintFormat::Json, LineFormat::Json),
        ] {
            let mut p = printer(pf);
            for (i, (e, comm, path)) in events().into_iter().enumerate() {
                // A command line that needs quoting, and one not known (the comm shown).
                let args: &[u8] = match i {
                    0 => b"/usr/sbin/mysqld --datadir=/var/lib/mysql",
                    1 => b"sh -c \"a,b\"\n\xff\\",
                    _ => comm,
                };
                let mut want = Vec::new();
                format_event(lf, &mut want, &header(), &e, comm, path, args);
                let mut got = Vec::new();
                p.format(&mut got, &e, comm, path, args, 0);
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want)
                );
            }
        }
        let mut h = Vec::new();
        header_into(PrintFormat::Csv, &mut h);
        assert_eq!(h, iodump_format::text::header_line(LineFormat::Csv));
    }

    #[test]
    fn article_json_has_the_csv_columns_in_order() {
        let mut p = printer(PrintFormat::Original(OriginalFormat {
            style: OriginalStyle::Json,
            header: true,
        }));
        let mut h = Vec::new();
        header_into(PrintFormat::Csv, &mut h);
        let names: Vec<&str> = std::str::from_utf8(&h).unwrap().trim().split(',').collect();
        for (e, comm, path) in events() {
            let mut l = Vec::new();
            p.format(&mut l, &e, comm, path, comm, 0);
            let s = std::str::from_utf8(&l).unwrap();
            let mut at = 0;
            for n in &names {
                let k = format!("\"{n}\":");
                let i = s[at..].find(&k).unwrap_or_else(|| panic!("{n} in {s}")) + at;
                at = i + k.len();
            }
        }
        let mut l = Vec::new();
        let (e, comm, path) = events()[0];
        p.format(&mut l, &e, comm, path, comm, 0);
        assert!(
            l.starts_with(b"{\"timestamp\":1630456789.312345,\"pid\":3141,\"comm\":\"mysql\",\"iosize\":16384,\"rw\":\"R\",\"lba\":3723776,\"path\":\"/var/lib/mysql/ibdata1\","),
            "{}",
            String::from_utf8_lossy(&l)
        );
    }

    #[test]
    fn text_names_devices() {
        let mut p = printer(PrintFormat::Text);
        let (e, comm, path) = events()[0];
        let mut l = Vec::new();
        p.format(&mut l, &e, comm, path, comm, 0);
        let s = String::from_utf8(l).unwrap();
        assert_eq!(
            s,
            "00:39:49.312345 mysql            3141    3142    sda1       3723776        16384 R  V          98.8     1.2 /var/lib/mysql/ibdata1\n"
        );
        let mut e2 = e;
        e2.dev = DevT::new(254, 0);
        let mut l = Vec::new();
        p.format(&mut l, &e2, comm, path, comm, 0);
        assert!(String::from_utf8(l).unwrap().contains(" 254:0 "));
    }

    #[test]
    fn original_columns_look_as_the_original() {
        let all = Columns(FIELDS.iter().fold(0, |a, (_, b, _)| a | b));
        let mut p = printer(PrintFormat::Original(OriginalFormat {
            style: OriginalStyle::Columns(all),
            header: true,
        }));
        let mut h = Vec::new();
        header_into(p.fmt, &mut h);
        assert_eq!(
            String::from_utf8(h).unwrap(),
            "datetime                          timestamp  comm                pid     tid iosize      sector partition rw rwsec launcher             ino         lba dev      latency(us) queue(us)     cgroup cpu error fullpath\n"
        );
        let (e, comm, path) = events()[0];
        let mut l = Vec::new();
        p.format(&mut l, &e, comm, path, comm, 12);
        let s = String::from_utf8(l).unwrap();
        let local = std::str::from_utf8(&local_datetime(1_630_456_789))
            .unwrap()
            .to_string();
        assert_eq!(
            s,
            format!("{local}.312345 1630456789312345  mysql              3141    3142  16384     3725824 sda1       R     V pread64               12     3723776 8:1             98.8       1.2         77   1     0 /var/lib/mysql/ibdata1\n")
        );
        // Defaults: `-` for labels, the original's letters (write-zeroes is N; F A S M order).
        let mut p = printer(PrintFormat::Original(OriginalFormat {
            style: OriginalStyle::Columns(Columns::original_default()),
            header: true,
        }));
        let (e, comm, path) = events()[2];
        let mut l = Vec::new();
        p.format(&mut l, &e, comm, path, comm, 0);
        let s = String::from_utf8(l).unwrap();
        assert!(
            s.ends_with("   3725824  N  FASM -              -\n"),
            "{s:?}"
        );
        assert_eq!(s.len(), 26 + 16 + 8 + 7 + 12 + 3 + 6 + 15 + 2 + 1);
        // A syscall without a code of its own is named by its x86_64 number.
        let (mut e, comm, path) = events()[0];
        e.syscall = Some(Syscall(0x8000 + 263));
        let mut l = Vec::new();
        p.format(&mut l, &e, comm, path, comm, 0);
        assert!(String::from_utf8(l).unwrap().contains(" unlinkat      "));
        e.syscall = Some(Syscall(0x8000 + 999));
        let mut l = Vec::new();
        p.format(&mut l, &e, comm, path, comm, 0);
        assert!(String::from_utf8(l).unwrap().contains(" syscall#33767 "));
    }

    #[test]
    fn local_time_is_localtime() {
        let t = local_datetime(0);
        assert_eq!(t.len(), 19);
        assert!(t[4] == b'-' && t[10] == b'T' && t[13] == b':');
    }

    #[test]
    fn field_lists() {
        assert_eq!(
            Columns::parse("pid,comm").unwrap(),
            Columns(bit("pid") | bit("comm"))
        );
        assert!(Columns::parse("pid,bogus")
            .unwrap_err()
            .contains("\"bogus\""));
    }
}
