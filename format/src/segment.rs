//! Event segments: the columnar payload of an `events` chunk, and [`EventBatch`], the columnar
//! form a decoded segment takes in memory.

use crate::bytes::{put_varint, Cursor};
use crate::column::{
    decode_column_into, encode_column, undo_seq, ColumnIn, ColumnMeta, EncodeScratch, Lane,
    SeqContext, SeqState, Transform,
};
use crate::error::DecodeError;
use crate::event::{DevT, Event, Flags, Op, Syscall, UpperIo};

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
    /// `upper_dev`, u32, nullable (since 1.4).
    pub const UPPER_DEV: u64 = 17;
    /// `upper_timestamp_ns`, u64, nullable, Delta (since 1.4).
    pub const UPPER_TIMESTAMP_NS: u64 = 18;
    /// Number of column ids defined by this version.
    pub const COUNT: usize = 18;
    /// The nullable columns.
    pub const NULLABLE: [u64; 5] = [
        QUEUE_NS,
        SYSCALL,
        DIRTIER_PID,
        UPPER_DEV,
        UPPER_TIMESTAMP_NS,
    ];
}

/// A set of event columns, by column id ([`col`]): what a reader decodes of a segment
/// ([`decode_segment_projected`]). A column left out is not decoded, and a segment whose
/// columns are compressed apart (§4.5 of the spec) does not even decompress it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Columns(u32);

impl Columns {
    /// Every column this version knows.
    pub const ALL: Columns = Columns(((1u64 << (col::COUNT + 1)) - 2) as u32);
    /// No column (the rows are still counted).
    pub const NONE: Columns = Columns(0);

    /// The columns with these ids (ids this version does not know are ignored).
    pub const fn of(ids: &[u64]) -> Columns {
        let mut bits = 0u32;
        let mut i = 0;
        while i < ids.len() {
            if ids[i] >= 1 && ids[i] <= col::COUNT as u64 {
                bits |= 1 << ids[i];
            }
            i += 1;
        }
        Columns(bits)
    }
    /// True when column `id` is in the set.
    #[inline]
    pub const fn contains(self, id: u64) -> bool {
        id <= 31 && self.0 & (1 << id) != 0
    }
    /// Both sets.
    pub const fn union(self, o: Columns) -> Columns {
        Columns(self.0 | o.0)
    }
    /// The set and what decoding it needs: the sector column's sequential transforms are
    /// undone with the device, byte count and path id of each row.
    pub const fn needed(self) -> Columns {
        if self.contains(col::SECTOR) {
            self.union(Columns::of(&[col::DEV, col::BYTES, col::PATH_ID]))
        } else {
            self
        }
    }
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

    /// Rows `lo..hi` (empty when the column is).
    fn slice(&self, lo: usize, hi: usize) -> Nullable<T> {
        Nullable {
            values: slice_of(&self.values, lo, hi),
            valid: self.valid.as_ref().map(|v| slice_of(v, lo, hi)),
        }
    }
}

/// Rows `lo..hi` of a column (empty when the column is: one a projection left out).
fn slice_of<T: Copy>(v: &[T], lo: usize, hi: usize) -> Vec<T> {
    v.get(lo..hi).map(<[T]>::to_vec).unwrap_or_default()
}

impl<T: Copy + Default> FromIterator<Option<T>> for Nullable<T> {
    /// A column of these values (`None`: null); `valid` only when one is null.
    fn from_iter<I: IntoIterator<Item = Option<T>>>(it: I) -> Nullable<T> {
        let (mut values, mut valid) = (Vec::new(), Vec::new());
        for v in it {
            valid.push(v.is_some());
            values.push(v.unwrap_or_default());
        }
        let any_null = valid.contains(&false);
        Nullable {
            values,
            valid: any_null.then_some(valid),
        }
    }
}

/// The events of one segment, column by column. A batch decoded with a projection
/// ([`Columns`]) has only those columns: the others are empty, and [`EventBatch::get`] needs
/// them all ([`EventBatch::get_projected`] does not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventBatch {
    /// Number of events (every column present has this many values).
    pub rows: usize,
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
    /// [`UpperIo::dev`] of [`Event::upper`] (null when there is none).
    pub upper_dev: Nullable<u32>,
    /// [`UpperIo::timestamp_ns`] of [`Event::upper`] (null when there is none).
    pub upper_timestamp_ns: Nullable<u64>,
}

impl EventBatch {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.rows
    }
    /// True when there are no events.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Rows `lo..hi` (`lo <= hi <= len`), the columns a projection left out still empty.
    pub fn slice(&self, lo: usize, hi: usize) -> EventBatch {
        EventBatch {
            rows: hi - lo,
            timestamp_ns: slice_of(&self.timestamp_ns, lo, hi),
            dev: slice_of(&self.dev, lo, hi),
            sector: slice_of(&self.sector, lo, hi),
            bytes: slice_of(&self.bytes, lo, hi),
            op: slice_of(&self.op, lo, hi),
            flags: slice_of(&self.flags, lo, hi),
            pid: slice_of(&self.pid, lo, hi),
            tid: slice_of(&self.tid, lo, hi),
            path_id: slice_of(&self.path_id, lo, hi),
            queue_ns: self.queue_ns.slice(lo, hi),
            latency_ns: slice_of(&self.latency_ns, lo, hi),
            error: slice_of(&self.error, lo, hi),
            cpu: slice_of(&self.cpu, lo, hi),
            syscall: self.syscall.slice(lo, hi),
            dirtier_pid: self.dirtier_pid.slice(lo, hi),
            cgroup_id: slice_of(&self.cgroup_id, lo, hi),
            upper_dev: self.upper_dev.slice(lo, hi),
            upper_timestamp_ns: self.upper_timestamp_ns.slice(lo, hi),
        }
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
            upper: self.upper(i),
        }
    }
    /// Row `i` as an [`Event`] from a batch decoded with a projection ([`Columns`]): the
    /// fields of the columns left out are 0 (null for the nullable ones), placeholders for
    /// a reader that knows it does not read them (a filter decoded with
    /// [`crate::expr::Expr::columns`]).
    pub fn get_projected(&self, i: usize) -> Event {
        fn at<T: Copy + Default>(v: &[T], i: usize) -> T {
            v.get(i).copied().unwrap_or_default()
        }
        fn null_at<T: Copy>(v: &Nullable<T>, i: usize) -> Option<T> {
            if i < v.values.len() {
                v.get(i)
            } else {
                None
            }
        }
        Event {
            timestamp_ns: at(&self.timestamp_ns, i),
            dev: DevT(at(&self.dev, i)),
            sector: at(&self.sector, i),
            bytes: at(&self.bytes, i),
            op: Op::from_code(at(&self.op, i)),
            flags: Flags(at(&self.flags, i)),
            pid: at(&self.pid, i),
            tid: at(&self.tid, i),
            path_id: at(&self.path_id, i),
            queue_ns: null_at(&self.queue_ns, i),
            latency_ns: at(&self.latency_ns, i),
            error: at(&self.error, i),
            cpu: at(&self.cpu, i),
            syscall: null_at(&self.syscall, i).map(Syscall),
            dirtier_pid: null_at(&self.dirtier_pid, i),
            cgroup_id: at(&self.cgroup_id, i),
            upper: null_at(&self.upper_dev, i).map(|dev| UpperIo {
                dev: DevT(dev),
                timestamp_ns: null_at(&self.upper_timestamp_ns, i).unwrap_or(0),
            }),
        }
    }
    /// [`Event::upper`] of row `i`.
    #[inline]
    pub fn upper(&self, i: usize) -> Option<UpperIo> {
        Some(UpperIo {
            dev: DevT(self.upper_dev.get(i)?),
            timestamp_ns: self.upper_timestamp_ns.get(i).unwrap_or(0),
        })
    }
    /// `latency_ns - queue_ns` of row `i` (see [`Event::device_ns`]).
    #[inline]
    pub fn device_ns(&self, i: usize) -> u64 {
        self.latency_ns[i].saturating_sub(self.queue_ns.get(i).unwrap_or(0))
    }
    /// The rows as events.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Event> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
    /// Empties every column, keeping the allocations.
    pub fn clear(&mut self) {
        self.rows = 0;
        self.timestamp_ns.clear();
        self.dev.clear();
        self.sector.clear();
        self.bytes.clear();
        self.op.clear();
        self.flags.clear();
        self.pid.clear();
        self.tid.clear();
        self.path_id.clear();
        self.queue_ns.values.clear();
        self.queue_ns.valid = None;
        self.latency_ns.clear();
        self.error.clear();
        self.cpu.clear();
        self.syscall.values.clear();
        self.syscall.valid = None;
        self.dirtier_pid.values.clear();
        self.dirtier_pid.valid = None;
        self.cgroup_id.clear();
        self.upper_dev.values.clear();
        self.upper_dev.valid = None;
        self.upper_timestamp_ns.values.clear();
        self.upper_timestamp_ns.valid = None;
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
        self.rows += 1;
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
        push_opt(&mut self.upper_dev, e.upper.map(|u| u.dev.0), len);
        push_opt(
            &mut self.upper_timestamp_ns,
            e.upper.map(|u| u.timestamp_ns),
            len,
        );
    }
}

/// Reusable buffers for [`encode_segment`].
#[derive(Default)]
pub struct SegmentScratch {
    col: EncodeScratch,
    /// Column `id` is `cols[id - 1]`; nullable columns hold their present values only.
    cols: [Vec<u64>; col::COUNT],
    /// Row validity of the nullable columns: queue_ns, syscall, dirtier_pid, upper (both
    /// upper columns are null together).
    valid: [Vec<bool>; 4],
    block: Vec<u8>,
    /// Where each column's `varint column_id` starts, relative to the segment's first byte,
    /// as (column id, offset): the bounds of the frames of a framed segment.
    pub(crate) starts: Vec<(u64, usize)>,
    /// Where each plane after the first of a column's planes of at least
    /// [`crate::frames::PLANE_FRAME_MIN_BYTES`] starts, relative to the segment's first byte,
    /// in ascending order: where a framed segment's column frame is cut into zstd frames.
    pub(crate) plane_cuts: Vec<usize>,
}

/// Encodes `events` (already in the order they are to be stored) as a raw segment payload
/// (before zstd), appended to `out`.
pub fn encode_segment(events: &[Event], s: &mut SegmentScratch, out: &mut Vec<u8>) {
    use Transform::{Delta, None as Plain, Seq, SeqFile};
    let n = events.len();
    let base = out.len();
    s.starts.clear();
    s.plane_cuts.clear();
    put_varint(out, n as u64);
    put_varint(out, col::COUNT as u64);
    // Rows to columns in one pass: a segment (65,536 events of ~100 bytes) is larger than
    // a core's L2, so a pass per column would read it from memory sixteen times.
    for c in s.cols.iter_mut() {
        c.clear();
        c.reserve(n);
    }
    for v in s.valid.iter_mut() {
        v.clear();
        v.reserve(n);
    }
    let mut all_valid = [true; 4];
    {
        let [ts, dev, sector, bytes, op, flags, pid, tid, path, queue, lat, err, cpu, sys, dirt, cg, up_dev, up_ts] =
            &mut s.cols;
        let [queue_ok, sys_ok, dirt_ok, up_ok] = &mut s.valid;
        let opt = |col: &mut Vec<u64>, ok: &mut Vec<bool>, all: &mut bool, v: Option<u64>| {
            ok.push(v.is_some());
            match v {
                Some(v) => col.push(v),
                None => *all = false,
            }
        };
        let [q_all, s_all, d_all, u_all] = &mut all_valid;
        for e in events {
            ts.push(e.timestamp_ns);
            dev.push(e.dev.0 as u64);
            sector.push(e.sector);
            bytes.push(e.bytes as u64);
            op.push(e.op.code() as u64);
            flags.push(e.flags.0 as u64);
            pid.push(e.pid as u64);
            tid.push(e.tid as u64);
            path.push(e.path_id as u64);
            opt(queue, queue_ok, q_all, e.queue_ns);
            lat.push(e.latency_ns);
            err.push(e.error as u64);
            cpu.push(e.cpu as u64);
            opt(sys, sys_ok, s_all, e.syscall.map(|s| s.0 as u64));
            opt(dirt, dirt_ok, d_all, e.dirtier_pid.map(|p| p as u64));
            cg.push(e.cgroup_id);
            up_ok.push(e.upper.is_some());
            match e.upper {
                Some(u) => {
                    up_dev.push(u.dev.0 as u64);
                    up_ts.push(u.timestamp_ns);
                }
                None => *u_all = false,
            }
        }
    }
    let transforms = |id: u64| -> &'static [Transform] {
        match id {
            col::TIMESTAMP_NS | col::UPPER_TIMESTAMP_NS => &[Delta],
            col::SECTOR => &[Plain, Seq, SeqFile],
            _ => &[Plain],
        }
    };
    for id in 1..=col::COUNT as u64 {
        let validity = match id {
            col::QUEUE_NS => Some(0),
            col::SYSCALL => Some(1),
            col::DIRTIER_PID => Some(2),
            col::UPPER_DEV | col::UPPER_TIMESTAMP_NS => Some(3),
            _ => None,
        }
        .filter(|&v| !all_valid[v])
        .map(|v| &s.valid[v][..]);
        s.block.clear();
        let seq = SeqContext {
            dev: &s.cols[col::DEV as usize - 1],
            bytes: &s.cols[col::BYTES as usize - 1],
            path: &s.cols[col::PATH_ID as usize - 1],
        };
        let colin = ColumnIn {
            values: &s.cols[id as usize - 1],
            rows: n,
            validity,
        };
        let planes = encode_column(&colin, transforms(id), Some(&seq), &mut s.col, &mut s.block);
        s.starts.push((id, out.len() - base));
        put_varint(out, id);
        put_varint(out, s.block.len() as u64);
        let block_at = out.len() - base;
        out.extend_from_slice(&s.block);
        if let Some(p) = planes.filter(|p| p.plane_bytes >= crate::frames::PLANE_FRAME_MIN_BYTES) {
            s.plane_cuts
                .extend((1..p.count).map(|j| block_at + p.at + j * p.plane_bytes));
        }
    }
}

/// Reusable buffers for [`decode_segment_into`]: a warm decoder allocates nothing.
#[derive(Default)]
pub struct DecodeScratch {
    /// Validity flags of the columns whose rows are all present (their batch holds `None`).
    valid: [Vec<bool>; col::COUNT],
    seq: SeqState,
}

/// Decodes the wanted columns of one segment straight into their batch columns.
struct Columnar<'a> {
    rows: usize,
    blocks: &'a [&'a [u8]; col::COUNT],
    seen: Columns,
    want: Columns,
    /// The sector column's Seq transform, still to be undone.
    seq: Option<Transform>,
}

impl Columnar<'_> {
    /// Decodes column `id` into `values` and `valid` (cleared first): rows the segment lacks
    /// the column for are 0 and, `nullable`, null. Values too large for `T` are an error
    /// naming `name`.
    fn decode<T: Lane>(
        &mut self,
        id: u64,
        name: &'static str,
        nullable: bool,
        values: &mut Vec<T>,
        valid: &mut Vec<bool>,
    ) -> Result<ColumnMeta, DecodeError> {
        if !self.want.contains(id) || !self.seen.contains(id) {
            values.clear();
            valid.clear();
            if !self.want.contains(id) {
                return Ok(ColumnMeta::default());
            }
            values.resize(self.rows, T::default());
            if nullable {
                valid.resize(self.rows, false);
            }
            return Ok(ColumnMeta {
                has_nulls: nullable,
                ..ColumnMeta::default()
            });
        }
        let block = self.blocks[id as usize - 1];
        let m = decode_column_into(block, self.rows, values, valid)?;
        if let Some(tr) = m.pending_seq {
            if id != col::SECTOR {
                return Err(DecodeError::UnknownEncoding {
                    what: "seq transform outside the sector column",
                    code: 2,
                });
            }
            self.seq = Some(tr);
        }
        if m.or_bits > T::MAX {
            // Cold: decoded again at full width to name the largest value, not the OR.
            let mut wide = Vec::<u64>::new();
            decode_column_into(block, self.rows, &mut wide, valid)?;
            return Err(DecodeError::OutOfRange {
                what: name,
                at: 0,
                value: wide.iter().copied().max().unwrap_or(m.or_bits),
                max: T::MAX,
            });
        }
        Ok(m)
    }

    /// Decodes a column that may not hold nulls (`null`: the error's name for one).
    fn plain<T: Lane>(
        &mut self,
        id: u64,
        (name, null): (&'static str, &'static str),
        values: &mut Vec<T>,
        spare: &mut Vec<bool>,
    ) -> Result<(), DecodeError> {
        if self.decode(id, name, false, values, spare)?.has_nulls {
            let first = spare.iter().position(|&p| !p).unwrap_or(0);
            return Err(DecodeError::Inconsistent {
                what: null,
                expected: 0,
                actual: first as u64 + 1,
            });
        }
        Ok(())
    }

    /// Decodes a nullable column; its validity flags are `Some` only when a row is null
    /// (their buffer otherwise kept in `spare`).
    fn nullable<T: Lane>(
        &mut self,
        id: u64,
        name: &'static str,
        c: &mut Nullable<T>,
        spare: &mut Vec<bool>,
    ) -> Result<(), DecodeError> {
        let mut valid = c.valid.take().unwrap_or_else(|| std::mem::take(spare));
        let m = self.decode(id, name, true, &mut c.values, &mut valid)?;
        if m.has_nulls {
            c.valid = Some(valid);
        } else {
            *spare = valid;
        }
        Ok(())
    }
}

/// Decodes a raw (decompressed) segment payload.
pub fn decode_segment(raw: &[u8]) -> Result<EventBatch, DecodeError> {
    let mut b = EventBatch::default();
    decode_segment_into(raw, &mut b, &mut DecodeScratch::default())?;
    Ok(b)
}

/// Decodes a raw segment payload into `out`, reusing its buffers and `s`'s.
pub fn decode_segment_into(
    raw: &[u8],
    out: &mut EventBatch,
    s: &mut DecodeScratch,
) -> Result<(), DecodeError> {
    decode_segment_projected(raw, Columns::ALL, out, s)
}

/// Decodes the columns `want` (and what they need, [`Columns::needed`]) of a raw segment
/// payload into `out`; the other columns of `out` are left empty and their blocks are not
/// decoded.
pub fn decode_segment_projected(
    raw: &[u8],
    want: Columns,
    out: &mut EventBatch,
    s: &mut DecodeScratch,
) -> Result<(), DecodeError> {
    let mut c = Cursor::new(raw);
    let rows = c.varint_max(MAX_SEGMENT_EVENTS as u64, "segment event count")? as usize;
    let ncols = c.varint_max(4096, "segment column count")?;
    let mut blocks: [&[u8]; col::COUNT] = [&[]; col::COUNT];
    let mut seen = Columns::NONE;
    for _ in 0..ncols {
        let id = c.varint()?;
        let len = c.varint_max(c.remaining() as u64, "column length")? as usize;
        let block = c.take(len)?;
        if id == 0 || id > col::COUNT as u64 {
            continue; // a column of a later minor version: skip it
        }
        if seen.contains(id) {
            return Err(DecodeError::Inconsistent {
                what: "column present twice",
                expected: 1,
                actual: 2,
            });
        }
        seen = seen.union(Columns::of(&[id]));
        blocks[id as usize - 1] = block;
    }
    if !c.is_empty() {
        return Err(DecodeError::TrailingBytes {
            what: "segment",
            extra: c.remaining(),
        });
    }
    decode_columns(rows, &blocks, seen, want.needed(), out, s)
}

/// Decodes the column blocks `blocks[id - 1]` (present where `seen` says so) that `want`
/// names, for `rows` rows, each straight into its column of `out` (the others left empty).
pub(crate) fn decode_columns(
    rows: usize,
    blocks: &[&[u8]; col::COUNT],
    seen: Columns,
    want: Columns,
    out: &mut EventBatch,
    s: &mut DecodeScratch,
) -> Result<(), DecodeError> {
    let mut c = Columnar {
        rows,
        blocks,
        seen,
        want,
        seq: None,
    };
    let [ts, dev, sector, bytes, op, flags, pid, tid, path, queue, lat, error, cpu, sys, dirtier, cgroup, udev, uts] =
        &mut s.valid;
    c.plain(
        col::TIMESTAMP_NS,
        ("timestamp_ns", "null timestamp_ns"),
        &mut out.timestamp_ns,
        ts,
    )?;
    c.plain(col::DEV, ("dev", "null dev"), &mut out.dev, dev)?;
    c.plain(
        col::SECTOR,
        ("sector", "null sector"),
        &mut out.sector,
        sector,
    )?;
    c.plain(col::BYTES, ("bytes", "null bytes"), &mut out.bytes, bytes)?;
    c.plain(col::OP, ("op", "null op"), &mut out.op, op)?;
    c.plain(col::FLAGS, ("flags", "null flags"), &mut out.flags, flags)?;
    c.plain(col::PID, ("pid", "null pid"), &mut out.pid, pid)?;
    c.plain(col::TID, ("tid", "null tid"), &mut out.tid, tid)?;
    c.plain(
        col::PATH_ID,
        ("path_id", "null path_id"),
        &mut out.path_id,
        path,
    )?;
    c.nullable(col::QUEUE_NS, "queue_ns", &mut out.queue_ns, queue)?;
    c.plain(
        col::LATENCY_NS,
        ("latency_ns", "null latency_ns"),
        &mut out.latency_ns,
        lat,
    )?;
    c.plain(col::ERROR, ("error", "null error"), &mut out.error, error)?;
    c.plain(col::CPU, ("cpu", "null cpu"), &mut out.cpu, cpu)?;
    c.nullable(col::SYSCALL, "syscall", &mut out.syscall, sys)?;
    c.nullable(
        col::DIRTIER_PID,
        "dirtier_pid",
        &mut out.dirtier_pid,
        dirtier,
    )?;
    c.plain(
        col::CGROUP_ID,
        ("cgroup_id", "null cgroup_id"),
        &mut out.cgroup_id,
        cgroup,
    )?;
    c.nullable(col::UPPER_DEV, "upper_dev", &mut out.upper_dev, udev)?;
    c.nullable(
        col::UPPER_TIMESTAMP_NS,
        "upper_timestamp_ns",
        &mut out.upper_timestamp_ns,
        uts,
    )?;
    out.rows = rows;
    if let Some(tr) = c.seq {
        undo_seq(
            tr,
            &mut out.sector,
            &out.dev,
            &out.bytes,
            &out.path_id,
            &mut s.seq,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::put_varint;

    #[test]
    fn a_slice_keeps_its_rows_and_leaves_absent_columns_absent() {
        let mut b = EventBatch {
            rows: 4,
            bytes: vec![1, 2, 3, 4],
            queue_ns: [Some(10), None, Some(30), None].into_iter().collect(),
            syscall: [Some(1u16), Some(2), Some(3), Some(4)]
                .into_iter()
                .collect(),
            ..EventBatch::default()
        };
        assert!(b.syscall.valid.is_none() && b.queue_ns.valid.is_some());
        b.latency_ns = vec![5, 6, 7, 8];
        let s = b.slice(1, 3);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s.bytes.as_slice(), s.latency_ns.as_slice()),
            (&[2, 3][..], &[6, 7][..])
        );
        assert_eq!((s.queue_ns.get(0), s.queue_ns.get(1)), (None, Some(30)));
        assert_eq!((s.syscall.get(0), s.syscall.get(1)), (Some(2), Some(3)));
        assert!(s.sector.is_empty() && s.upper_dev.values.is_empty());
        for i in 0..2 {
            assert_eq!(s.get_projected(i), b.get_projected(i + 1));
        }
        assert!(b.slice(4, 4).is_empty());
    }

    /// A column of a test segment: id, present values, validity.
    type TestColumn = (u64, Vec<u64>, Option<Vec<bool>>);

    /// A segment payload of `rows` rows holding `cols`.
    fn payload(rows: usize, cols: &[TestColumn]) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, rows as u64);
        put_varint(&mut out, cols.len() as u64);
        let mut s = EncodeScratch::default();
        for (id, values, validity) in cols {
            let mut block = Vec::new();
            let c = ColumnIn {
                values,
                rows,
                validity: validity.as_deref(),
            };
            encode_column(&c, &[Transform::None], None, &mut s, &mut block);
            put_varint(&mut out, *id);
            put_varint(&mut out, block.len() as u64);
            out.extend_from_slice(&block);
        }
        out
    }

    #[test]
    fn values_wider_than_their_column_are_errors_naming_it() {
        for (id, name, big, fits) in [
            (col::DEV, "dev", 1u64 << 32, u32::MAX as u64),
            (col::OP, "op", 256, 255),
            (col::ERROR, "error", 1 << 16, u16::MAX as u64),
            (col::SYSCALL, "syscall", 1 << 16, u16::MAX as u64),
            (col::DIRTIER_PID, "dirtier_pid", u64::MAX, u32::MAX as u64),
        ] {
            let p = payload(3, &[(id, vec![1, big, 2], None)]);
            match decode_segment(&p) {
                Err(DecodeError::OutOfRange {
                    what, max, value, ..
                }) => {
                    assert_eq!(what, name);
                    assert!(max < big);
                    assert_eq!(value, big, "{name}: the largest value, not the OR of all");
                }
                other => panic!("{name}: {other:?}"),
            }
            // The largest value of the type fits.
            let p = payload(3, &[(id, vec![1, fits, 2], None)]);
            assert!(decode_segment(&p).is_ok(), "{name}");
        }
    }

    #[test]
    fn nulls_where_none_may_be_are_errors_and_nullable_columns_keep_them() {
        let validity = Some(vec![true, false, true]);
        let p = payload(3, &[(col::PID, vec![4, 5], validity.clone())]);
        match decode_segment(&p) {
            Err(DecodeError::Inconsistent { what, actual, .. }) => {
                assert_eq!((what, actual), ("null pid", 2));
            }
            other => panic!("{other:?}"),
        }
        let p = payload(3, &[(col::QUEUE_NS, vec![4, 5], validity.clone())]);
        let b = decode_segment(&p).unwrap();
        assert_eq!(b.queue_ns.values, vec![4, 0, 5]);
        assert_eq!(b.queue_ns.valid, validity);
        // Columns the segment lacks: zeros, and nulls where nullable.
        assert_eq!(b.pid, vec![0, 0, 0]);
        assert_eq!(b.syscall.valid, Some(vec![false; 3]));
        // Decoded again into the same batch: a column with every row present holds no flags.
        let mut b2 = b.clone();
        let p = payload(3, &[(col::QUEUE_NS, vec![4, 5, 6], None)]);
        decode_segment_into(&p, &mut b2, &mut DecodeScratch::default()).unwrap();
        assert_eq!(b2.queue_ns.values, vec![4, 5, 6]);
        assert_eq!(b2.queue_ns.valid, None);
    }
}
