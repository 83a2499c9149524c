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
use iodump_format::text::{escape_csv, escape_text};
use iodump_format::{Device, Event, Flags, Header, Op};

use crate::abi::{pk, IoEvent};

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
        }
    }

    /// Prints the column header (text and CSV; none for JSON, or when turned off).
    pub fn header(&mut self) {
        self.line.clear();
        header_into(self.fmt, &mut self.line);
        let _ = self.out.write_all(&self.line);
    }

    /// Prints one event; `r` is the kernel's record of it (its comm and inode); `args` the
    /// process's command line when it is known (else the comm is shown).
    pub fn event(&mut self, e: &Event, r: &IoEvent, path: &[u8], args: Option<&[u8]>) {
        let ino = if matches!(r.path_kind, pk::FILE | pk::DIO) {
            r.ino
        } else {
            0
        };
        self.line.clear();
        let mut line = std::mem::take(&mut self.line);
        self.format(&mut line, e, r.comm(), path, args.unwrap_or(r.comm()), ino);
        let _ = self.out.write_all(&line);
        self.line = line;
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
            }) => csv(l, utc, e, comm, path, args),
            PrintFormat::Json => json(l, utc, e, comm, path, args),
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
        pad(l, |l| flag_letters(l, e.flags), 6);
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
        l.push(b'\n');
    }

    /// Flushes the output.
    pub fn flush(&mut self) {
        let _ = self.out.flush();
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

/// The letters of [`Flags::letters`], without a `String`.
fn flag_letters(l: &mut Vec<u8>, flags: Flags) {
    let start = l.len();
    for (f, _, c) in Flags::NAMES {
        if flags.contains(f) {
            l.push(c as u8);
        }
    }
    if l.len() == start {
        l.push(b'V');
    }
}

/// The header line of a format.
fn header_into(fmt: PrintFormat, l: &mut Vec<u8>) {
    match fmt {
        PrintFormat::Text => l.extend_from_slice(
            b"TIME(UTC)       COMM             PID     TID     DEV        SECTOR        BYTES RW FLAGS   LAT(us) QUE(us) PATH\n",
        ),
        PrintFormat::Csv => l.extend_from_slice(CSV_HEADER),
        PrintFormat::Json => {}
        PrintFormat::Original(o) if !o.header => {}
        PrintFormat::Original(o) => match o.style {
            OriginalStyle::Csv => l.extend_from_slice(CSV_HEADER),
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

const CSV_HEADER: &[u8] = b"timestamp,pid,comm,iosize,rw,lba,path,tid,dev,flags,latency_ns,queue_ns,syscall,error,cpu,cgroup_id,dirtier_pid,args\n";

/// The CSV line of `iodump_format::text::format_event` (the same bytes).
fn csv(l: &mut Vec<u8>, utc: i64, e: &Event, comm: &[u8], path: &[u8], args: &[u8]) {
    let _ = write!(
        l,
        "{}.{:06},{},",
        utc.div_euclid(1_000_000_000),
        utc.rem_euclid(1_000_000_000) / 1000,
        e.pid
    );
    escape_csv(l, comm);
    let _ = write!(l, ",{},{},{},", e.bytes, e.op.letter(), e.sector);
    escape_csv(l, path);
    let _ = write!(l, ",{},{},", e.tid, e.dev);
    flag_letters(l, e.flags);
    let _ = write!(l, ",{},", e.latency_ns);
    if let Some(q) = e.queue_ns {
        let _ = write!(l, "{q}");
    }
    l.push(b',');
    if let Some(s) = e.syscall {
        let _ = write!(l, "{s}");
    }
    let _ = write!(l, ",{},{},{},", e.error, e.cpu, e.cgroup_id);
    if let Some(d) = e.dirtier_pid {
        let _ = write!(l, "{d}");
    }
    l.push(b',');
    escape_csv(l, args);
    l.push(b'\n');
}

/// Appends `b` as a JSON string holding the text of `iodump_format::text::text_bytes` (as
/// `escape_json` does, without its temporary buffer).
fn json_str(l: &mut Vec<u8>, b: &[u8]) {
    l.push(b'"');
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => l.extend_from_slice(b"\\\""),
                // text_bytes doubles a backslash, JSON doubles each again.
                '\\' => l.extend_from_slice(b"\\\\\\\\"),
                '\n' => l.extend_from_slice(b"\\n"),
                '\r' => l.extend_from_slice(b"\\r"),
                '\t' => l.extend_from_slice(b"\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(l, "\\u{:04x}", c as u32);
                }
                c => {
                    let mut buf = [0u8; 4];
                    l.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        for &x in chunk.invalid() {
            let _ = write!(l, "\\\\x{x:02x}");
        }
    }
    l.push(b'"');
}

/// `2022-03-23T16:42:05.123456789Z`, as `iodump_format::summary::rfc3339_utc`.
fn rfc3339(l: &mut Vec<u8>, ns: i64) {
    let secs = ns.div_euclid(1_000_000_000);
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let _ = write!(
        l,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        ns.rem_euclid(1_000_000_000)
    );
}

/// Year, month, day of a day count since 1970-01-01 (Howard Hinnant's civil_from_days).
fn civil(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
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
        let (y, mo, d) = civil(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400);
        (y, mo, d, sod / 3600, sod / 60 % 60, sod % 60)
    };
    let mut out = [b' '; 19];
    let mut w = &mut out[..];
    let _ = write!(w, "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    out
}

/// The JSON line of `iodump_format::text::format_event` (the same bytes).
fn json(l: &mut Vec<u8>, utc: i64, e: &Event, comm: &[u8], path: &[u8], args: &[u8]) {
    l.extend_from_slice(b"{\"timestamp\":\"");
    rfc3339(l, utc);
    let _ = write!(
        l,
        "\",\"timestamp_ns\":{},\"pid\":{},\"tid\":{},\"comm\":",
        e.timestamp_ns, e.pid, e.tid
    );
    json_str(l, comm);
    let _ = write!(
        l,
        ",\"dev\":\"{}\",\"sector\":{},\"bytes\":{},\"op\":\"{}\",\"flags\":\"",
        e.dev,
        e.sector,
        e.bytes,
        e.op.name()
    );
    flag_letters(l, e.flags);
    let _ = write!(l, "\",\"latency_ns\":{},\"queue_ns\":", e.latency_ns);
    opt_num(l, e.queue_ns);
    let _ = write!(l, ",\"error\":{},\"cpu\":{},\"syscall\":", e.error, e.cpu);
    match e.syscall {
        Some(s) => {
            let _ = write!(l, "\"{s}\"");
        }
        None => l.extend_from_slice(b"null"),
    }
    l.extend_from_slice(b",\"dirtier_pid\":");
    opt_num(l, e.dirtier_pid.map(u64::from));
    let _ = write!(l, ",\"cgroup_id\":{},\"path\":", e.cgroup_id);
    json_str(l, path);
    l.extend_from_slice(b",\"args\":");
    json_str(l, args);
    l.extend_from_slice(b"}\n");
}

fn opt_num(l: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => {
            let _ = write!(l, "{v}");
        }
        None => l.extend_from_slice(b"null"),
    }
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
    json_str(l, comm);
    let _ = write!(
        l,
        ",\"iosize\":{},\"rw\":\"{}\",\"lba\":{},\"path\":",
        e.bytes,
        e.op.letter(),
        e.sector
    );
    json_str(l, path);
    let _ = write!(l, ",\"tid\":{},\"dev\":\"{}\",\"flags\":\"", e.tid, e.dev);
    flag_letters(l, e.flags);
    let _ = write!(l, "\",\"latency_ns\":{},\"queue_ns\":", e.latency_ns);
    opt_num(l, e.queue_ns);
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
    opt_num(l, e.dirtier_pid.map(u64::from));
    l.extend_from_slice(b",\"args\":");
    json_str(l, args);
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
        let mut l = Vec::new();
        rfc3339(&mut l, 1_630_456_789_312_345_678);
        assert_eq!(
            String::from_utf8(l).unwrap(),
            iodump_format::summary::rfc3339_utc(1_630_456_789_312_345_678)
        );
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
