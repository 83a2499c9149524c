//! Event segments: the columnar payload of an `events` chunk, and [`EventBatch`], the columnar
//! form a decoded segment takes in memory.

use crate::bytes::{put_varint, Cursor};
use crate::column::{
    decode_column, encode_column, undo_seq, ColumnIn, DecodedColumn, EncodeScratch, SeqContext,
    Transform,
};
use crate::error::DecodeError;
use crate::event::{DevT, Event, Flags, Op, Syscall};

/// Most events one segment may hold (readers reject more).
pub const MAX_SEGMENT_EVENTS: usize = 1 << 22;

/// Column ids, in the order the writer emits them.
pub mod col {
    /// `timestamp_ns`, u64, Delta.
    pub const TIMESTAMP_NS: u64 = 1;
    /// `dev`, u32.
    pub const DEV: u64 = 2;
    /// `sector`, u64, None or Seq.
    pub const SECTOR: u64 = 3;
    /// `bytes`, u32.
    pub const BYTES: u64 = 4;
    /// `op`, u8.
    pub const OP: u64 = 5;
    /// `flags`, u8.
    pub const FLAGS: u64 = 6;
    /// `pid`, u32.
    pub const PID: u64 = 7;
    /// `tid`, u32.
    pub const TID: u64 = 8;
    /// `path_id`, u32.
    pub const PATH_ID: u64 = 9;
    /// `queue_ns`, u64, nullable.
    pub const QUEUE_NS: u64 = 10;
    /// `latency_ns`, u64.
    pub const LATENCY_NS: u64 = 11;
    /// `error`, u16.
    pub const ERROR: u64 = 12;
    /// `cpu`, u16.
    pub const CPU: u64 = 13;
    /// `syscall`, u16, nullable.
    pub const SYSCALL: u64 = 14;
    /// `dirtier_pid`, u32, nullable.
    pub const DIRTIER_PID: u64 = 15;
    /// `cgroup_id`, u64.
    pub const CGROUP_ID: u64 = 16;
    /// Number of column ids defined by this version.
    pub const COUNT: usize = 16;
}

/// A column that may hold nulls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nullable<T> {
    /// One value per row; rows that are null hold `T::default()`.
    pub values: Vec<T>,
    /// `None` when every row is present, else one flag per row.
    pub valid: Option<Vec<bool>>,
}

impl<T: Copy> Nullable<T> {
    /// The value of row `i`, or `None` when null.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        match &self.valid {
            Some(v) if !v[i] => None,
            _ => Some(self.values[i]),
        }
    }
    /// True when row `i` holds a value.
    #[inline]
    pub fn is_valid(&self, i: usize) -> bool {
        self.valid.as_ref().is_none_or(|v| v[i])
    }
}

/// The events of one segment, column by column.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventBatch {
    /// See [`Event::timestamp_ns`].
    pub timestamp_ns: Vec<u64>,
    /// Device numbers ([`DevT`]'s inner value).
    pub dev: Vec<u32>,
    /// See [`Event::sector`].
    pub sector: Vec<u64>,
    /// See [`Event::bytes`].
    pub bytes: Vec<u32>,
    /// [`Op`] codes.
    pub op: Vec<u8>,
    /// [`Flags`] bits.
    pub flags: Vec<u8>,
    /// See [`Event::pid`].
    pub pid: Vec<u32>,
    /// See [`Event::tid`].
    pub tid: Vec<u32>,
    /// See [`Event::path_id`].
    pub path_id: Vec<u32>,
    /// See [`Event::queue_ns`].
    pub queue_ns: Nullable<u64>,
    /// See [`Event::latency_ns`].
    pub latency_ns: Vec<u64>,
    /// See [`Event::error`].
    pub error: Vec<u16>,
    /// See [`Event::cpu`].
    pub cpu: Vec<u16>,
    /// [`Syscall`] codes.
    pub syscall: Nullable<u16>,
    /// See [`Event::dirtier_pid`].
    pub dirtier_pid: Nullable<u32>,
    /// See [`Event::cgroup_id`].
    pub cgroup_id: Vec<u64>,
}

impl EventBatch {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.timestamp_ns.len()
    }
    /// True when there are no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Row `i` as an [`Event`].
    pub fn get(&self, i: usize) -> Event {
        Event {
            timestamp_ns: self.timestamp_ns[i],
            dev: DevT(self.dev[i]),
            sector: self.sector[i],
            bytes: self.bytes[i],
            op: Op::from_code(self.op[i]),
            flags: Flags(self.flags[i]),
            pid: self.pid[i],
            tid: self.tid[i],
            path_id: self.path_id[i],
            queue_ns: self.queue_ns.get(i),
            latency_ns: self.latency_ns[i],
            error: self.error[i],
            cpu: self.cpu[i],
            syscall: self.syscall.get(i).map(Syscall),
            dirtier_pid: self.dirtier_pid.get(i),
            cgroup_id: self.cgroup_id[i],
        }
    }
    /// `latency_ns - queue_ns` of row `i` (see [`Event::device_ns`]).
    pub fn device_ns(&self, i: usize) -> u64 {
        self.latency_ns[i].saturating_sub(self.queue_ns.get(i).unwrap_or(0))
    }
    /// The rows as events.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Event> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
    /// Builds a batch from events (tests, conversions).
    pub fn from_events(events: &[Event]) -> EventBatch {
        let mut b = EventBatch::default();
        for e in events {
            b.push(e);
        }
        b
    }
    /// Appends one event.
    pub fn push(&mut self, e: &Event) {
        fn push_opt<T: Copy + Default>(n: &mut Nullable<T>, v: Option<T>, len: usize) {
            match v {
                Some(x) => {
                    n.values.push(x);
                    if let Some(valid) = &mut n.valid {
                        valid.push(true);
                    }
                }
                None => {
                    n.values.push(T::default());
                    n.valid.get_or_insert_with(|| vec![true; len]).push(false);
                }
            }
        }
        let len = self.len();
        self.timestamp_ns.push(e.timestamp_ns);
        self.dev.push(e.dev.0);
        self.sector.push(e.sector);
        self.bytes.push(e.bytes);
        self.op.push(e.op.code());
        self.flags.push(e.flags.0);
        self.pid.push(e.pid);
        self.tid.push(e.tid);
        self.path_id.push(e.path_id);
        push_opt(&mut self.queue_ns, e.queue_ns, len);
        self.latency_ns.push(e.latency_ns);
        self.error.push(e.error);
        self.cpu.push(e.cpu);
        push_opt(&mut self.syscall, e.syscall.map(|s| s.0), len);
        push_opt(&mut self.dirtier_pid, e.dirtier_pid, len);
        self.cgroup_id.push(e.cgroup_id);
    }
}

/// Reusable buffers for [`encode_segment`].
#[derive(Default)]
pub struct SegmentScratch {
    col: EncodeScratch,
    values: Vec<u64>,
    dev: Vec<u64>,
    bytes: Vec<u64>,
    path: Vec<u64>,
    valid: Vec<bool>,
    block: Vec<u8>,
}

/// Encodes `events` (already in the order they are to be stored) as a raw segment payload
/// (before zstd), appended to `out`. Returns `(first, last)` timestamps.
pub fn encode_segment(events: &[Event], s: &mut SegmentScratch, out: &mut Vec<u8>) {
    let n = events.len();
    put_varint(out, n as u64);
    put_varint(out, col::COUNT as u64);
    s.dev.clear();
    s.dev.extend(events.iter().map(|e| e.dev.0 as u64));
    s.bytes.clear();
    s.bytes.extend(events.iter().map(|e| e.bytes as u64));
    s.path.clear();
    s.path.extend(events.iter().map(|e| e.path_id as u64));

    let mut emit = |s: &mut SegmentScratch,
                    id: u64,
                    transforms: &[Transform],
                    nullable: bool,
                    get: &dyn Fn(&Event) -> Option<u64>| {
        s.values.clear();
        s.valid.clear();
        let mut all_valid = true;
        for e in events {
            match get(e) {
                Some(v) => {
                    s.values.push(v);
                    s.valid.push(true);
                }
                None => {
                    all_valid = false;
                    s.valid.push(false);
                }
            }
        }
        debug_assert!(nullable || all_valid);
        s.block.clear();
        let values = std::mem::take(&mut s.values);
        let valid = std::mem::take(&mut s.valid);
        let dev = std::mem::take(&mut s.dev);
        let bytes = std::mem::take(&mut s.bytes);
        let path = std::mem::take(&mut s.path);
        {
            let seq = SeqContext {
                dev: &dev,
                bytes: &bytes,
                path: &path,
            };
            let colin = ColumnIn {
                values: &values,
                rows: n,
                validity: if all_valid { None } else { Some(&valid) },
            };
            encode_column(&colin, transforms, Some(&seq), &mut s.col, &mut s.block);
        }
        s.values = values;
        s.valid = valid;
        s.dev = dev;
        s.bytes = bytes;
        s.path = path;
        put_varint(out, id);
        put_varint(out, s.block.len() as u64);
        out.extend_from_slice(&s.block);
    };
    use Transform::{Delta, None as Plain, Seq, SeqFile};
    emit(s, col::TIMESTAMP_NS, &[Delta], false, &|e| {
        Some(e.timestamp_ns)
    });
    emit(s, col::DEV, &[Plain], false, &|e| Some(e.dev.0 as u64));
    emit(s, col::SECTOR, &[Plain, Seq, SeqFile], false, &|e| {
        Some(e.sector)
    });
    emit(s, col::BYTES, &[Plain], false, &|e| Some(e.bytes as u64));
    emit(s, col::OP, &[Plain], false, &|e| Some(e.op.code() as u64));
    emit(s, col::FLAGS, &[Plain], false, &|e| Some(e.flags.0 as u64));
    emit(s, col::PID, &[Plain], false, &|e| Some(e.pid as u64));
    emit(s, col::TID, &[Plain], false, &|e| Some(e.tid as u64));
    emit(s, col::PATH_ID, &[Plain], false, &|e| {
        Some(e.path_id as u64)
    });
    emit(s, col::QUEUE_NS, &[Plain], true, &|e| e.queue_ns);
    emit(s, col::LATENCY_NS, &[Plain], false, &|e| Some(e.latency_ns));
    emit(s, col::ERROR, &[Plain], false, &|e| Some(e.error as u64));
    emit(s, col::CPU, &[Plain], false, &|e| Some(e.cpu as u64));
    emit(s, col::SYSCALL, &[Plain], true, &|e| {
        e.syscall.map(|s| s.0 as u64)
    });
    emit(s, col::DIRTIER_PID, &[Plain], true, &|e| {
        e.dirtier_pid.map(|p| p as u64)
    });
    emit(s, col::CGROUP_ID, &[Plain], false, &|e| Some(e.cgroup_id));
}

fn narrow<T: TryFrom<u64> + Default + Copy>(
    v: Vec<u64>,
    max: u64,
    what: &'static str,
) -> Result<Vec<T>, DecodeError> {
    let m = v.iter().copied().max().unwrap_or(0);
    if m > max {
        return Err(DecodeError::OutOfRange {
            what,
            at: 0,
            value: m,
            max,
        });
    }
    Ok(v.into_iter()
        .map(|x| T::try_from(x).unwrap_or_default())
        .collect())
}

fn nullable<T: TryFrom<u64> + Default + Copy>(
    d: DecodedColumn,
    max: u64,
    what: &'static str,
) -> Result<Nullable<T>, DecodeError> {
    Ok(Nullable {
        values: narrow(d.values, max, what)?,
        valid: d.validity,
    })
}

fn not_null(d: DecodedColumn, what: &'static str) -> Result<Vec<u64>, DecodeError> {
    if let Some(v) = &d.validity {
        if let Some(i) = v.iter().position(|&p| !p) {
            return Err(DecodeError::Inconsistent {
                what,
                expected: 0,
                actual: i as u64 + 1,
            });
        }
    }
    Ok(d.values)
}

/// Decodes a raw (decompressed) segment payload.
pub fn decode_segment(raw: &[u8]) -> Result<EventBatch, DecodeError> {
    let mut c = Cursor::new(raw);
    let rows = c.varint_max(MAX_SEGMENT_EVENTS as u64, "segment event count")? as usize;
    let ncols = c.varint_max(4096, "segment column count")?;
    let mut cols: [Option<DecodedColumn>; col::COUNT] = Default::default();
    for _ in 0..ncols {
        let id = c.varint()?;
        let len = c.varint_max(c.remaining() as u64, "column length")? as usize;
        let block = c.take(len)?;
        if id == 0 || id > col::COUNT as u64 {
            continue; // a column of a later minor version: skip it
        }
        let slot = &mut cols[id as usize - 1];
        if slot.is_some() {
            return Err(DecodeError::Inconsistent {
                what: "column present twice",
                expected: 1,
                actual: 2,
            });
        }
        let d = decode_column(block, rows)?;
        if d.pending_seq.is_some() && id != col::SECTOR {
            return Err(DecodeError::UnknownEncoding {
                what: "seq transform outside the sector column",
                code: 2,
            });
        }
        *slot = Some(d);
    }
    if !c.is_empty() {
        return Err(DecodeError::TrailingBytes {
            what: "segment",
            extra: c.remaining(),
        });
    }
    let mut take = |id: u64| -> DecodedColumn {
        cols[id as usize - 1]
            .take()
            .unwrap_or_else(|| DecodedColumn {
                values: vec![0; rows],
                validity: None,
                pending_seq: None,
            })
    };
    let absent = |rows: usize| DecodedColumn {
        values: vec![0; rows],
        validity: Some(vec![false; rows]),
        pending_seq: None,
    };
    let timestamp_ns = not_null(take(col::TIMESTAMP_NS), "null timestamp")?;
    let dev: Vec<u32> = narrow(
        not_null(take(col::DEV), "null dev")?,
        u32::MAX as u64,
        "dev",
    )?;
    let bytes: Vec<u32> = narrow(
        not_null(take(col::BYTES), "null bytes")?,
        u32::MAX as u64,
        "bytes",
    )?;
    let path_id: Vec<u32> = narrow(
        not_null(take(col::PATH_ID), "null path_id")?,
        u32::MAX as u64,
        "path_id",
    )?;
    let sector_col = take(col::SECTOR);
    let seq = sector_col.pending_seq;
    let mut sector = not_null(sector_col, "null sector")?;
    if let Some(tr) = seq {
        undo_seq(tr, &mut sector, &dev, &bytes, &path_id);
    }
    let mut nullable_col = |id: u64| match cols[id as usize - 1].take() {
        Some(d) => d,
        None => absent(rows),
    };
    let queue_ns = nullable(nullable_col(col::QUEUE_NS), u64::MAX, "queue_ns")?;
    let syscall = nullable(nullable_col(col::SYSCALL), u16::MAX as u64, "syscall")?;
    let dirtier_pid = nullable(
        nullable_col(col::DIRTIER_PID),
        u32::MAX as u64,
        "dirtier_pid",
    )?;
    let mut take = |id: u64| -> DecodedColumn {
        cols[id as usize - 1]
            .take()
            .unwrap_or_else(|| DecodedColumn {
                values: vec![0; rows],
                validity: None,
                pending_seq: None,
            })
    };
    Ok(EventBatch {
        timestamp_ns,
        dev,
        sector,
        bytes,
        op: narrow(not_null(take(col::OP), "null op")?, 255, "op")?,
        flags: narrow(not_null(take(col::FLAGS), "null flags")?, 255, "flags")?,
        pid: narrow(
            not_null(take(col::PID), "null pid")?,
            u32::MAX as u64,
            "pid",
        )?,
        tid: narrow(
            not_null(take(col::TID), "null tid")?,
            u32::MAX as u64,
            "tid",
        )?,
        path_id,
        queue_ns,
        latency_ns: not_null(take(col::LATENCY_NS), "null latency_ns")?,
        error: narrow(
            not_null(take(col::ERROR), "null error")?,
            u16::MAX as u64,
            "error",
        )?,
        cpu: narrow(
            not_null(take(col::CPU), "null cpu")?,
            u16::MAX as u64,
            "cpu",
        )?,
        syscall,
        dirtier_pid,
        cgroup_id: not_null(take(col::CGROUP_ID), "null cgroup_id")?,
    })
}
