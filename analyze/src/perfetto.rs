//! `iodump export --format perfetto`: a trace's I/O as a Perfetto trace (a `Trace` protobuf of
//! `TracePacket`s with `TrackEvent`s, the format Perfetto's UI and trace processor read), and
//! the tiny protobuf encoder it is written with.
//!
//! What the file holds (one packet sequence, `trusted_packet_sequence_id` 1):
//! - a first packet that clears the sequence's incremental state and interns every event name
//!   (the operations, `queue`, `device`) and argument name, with a clock snapshot that maps the
//!   trace's `CLOCK_MONOTONIC` timestamps (written as Perfetto's boot clock) to UTC;
//! - a track per device (its kernel name) and one per process (a `ProcessDescriptor`: pid,
//!   comm, command line). I/Os overlap, and slices on one track must nest, so each I/O goes on
//!   a child track of its device ("lanes": the first lane free when the I/O starts), and again
//!   on a lane of its submitting process (an I/O a stacked device sent down is not, when that
//!   device has I/O in the export: the process's lanes show its I/O once, at the top);
//! - per I/O on its device lane: a slice named by its operation from entry into the block layer
//!   to completion, with the nested slices `queue` (to issue, request-based devices only) and
//!   `device` (issue to completion), and as arguments `path`, `sector`, `bytes`, `syscall`,
//!   `cgroup`, `container`, `pid`, `tid`, `latency_ns`, `queue_ns`, `error`, `flags`,
//!   `dirtier_pid`; on its process lane one slice with `path`, `device` and `bytes`;
//! - per device two counter tracks: I/Os in flight (after each start and completion) and
//!   IOPS (I/Os started per second over 100 ms bins, [`IOPS_BIN_NS`]).
//!
//! Paths, syscall names, cgroup paths and device names are interned
//! (`debug_annotation_string_values`, sent once in the packet that first uses them), as
//! Perfetto's own SDK does. Strings are written as the CSV export writes them: valid UTF-8
//! kept, a backslash doubled, any other byte `\xNN`.
//!
//! Events are processed in start order (`intact::each_intact_in_start_order`): memory is bounded
//! by the overlap of segments and the trace's tables, not its length.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;

use iodump_format::inthash::IntMap;
use iodump_format::text::text_bytes;
use iodump_format::{DevT, Op, Reader, Syscall};

use crate::intact::{each_intact_in_start_order, ExportSummary, Io};
use crate::AnalyzeError;

/// Width of the bins of the IOPS counters (100 ms); the value is the bin's I/Os per second.
pub const IOPS_BIN_NS: u64 = 100_000_000;

/// The sequence every packet is on.
const SEQUENCE_ID: u64 = 1;

/// Lanes per device or process at most; an I/O finding none free shares the last one.
const MAX_LANES: usize = 4096;

/// A protobuf writer into one growing buffer. A nested message's length is reserved as 4
/// bytes and written when the message ends, in as few bytes as it needs (the message moved
/// back over the rest).
#[derive(Default)]
pub struct Pb {
    /// The bytes written so far.
    pub buf: Vec<u8>,
}

impl Pb {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }
    fn tag(&mut self, field: u32, wire: u8) {
        self.varint(((field as u64) << 3) | wire as u64);
    }
    /// A varint field (uint32, uint64, int64 as two's complement, bool, enum).
    pub fn uint(&mut self, field: u32, v: u64) {
        self.tag(field, 0);
        self.varint(v);
    }
    /// A `double` field.
    pub fn double(&mut self, field: u32, v: f64) {
        self.tag(field, 1);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A `bytes` or `string` field.
    pub fn bytes(&mut self, field: u32, b: &[u8]) {
        self.tag(field, 2);
        self.varint(b.len() as u64);
        self.buf.extend_from_slice(b);
    }
    /// Opens a nested message; [`Pb::end`] closes it with what [`Pb::begin`] returned.
    pub fn begin(&mut self, field: u32) -> usize {
        self.tag(field, 2);
        self.buf.extend_from_slice(&[0x80, 0x80, 0x80, 0]);
        self.buf.len()
    }
    /// Closes the nested message opened at `start`.
    pub fn end(&mut self, start: usize) {
        let len = self.buf.len() - start;
        assert!(len < 1 << 28, "protobuf message of {len} bytes");
        let need = match len {
            0..=0x7f => 1,
            0x80..=0x3fff => 2,
            0x4000..=0x1f_ffff => 3,
            _ => 4,
        };
        let at = start - 4;
        for i in 0..need {
            let more = if i + 1 < need { 0x80 } else { 0 };
            self.buf[at + i] = ((len >> (7 * i)) as u8 & 0x7f) | more;
        }
        if need < 4 {
            self.buf.copy_within(start.., at + need);
            self.buf.truncate(at + need + len);
        }
    }
}

// Field numbers, from perfetto/protos/perfetto/trace/*.proto.
mod f {
    pub const TRACE_PACKET: u32 = 1;
    // TracePacket
    pub const TIMESTAMP: u32 = 8;
    pub const CLOCK_SNAPSHOT: u32 = 6;
    pub const TRACK_EVENT: u32 = 11;
    pub const SEQUENCE_ID: u32 = 10;
    pub const INTERNED_DATA: u32 = 12;
    pub const SEQUENCE_FLAGS: u32 = 13;
    pub const TRACK_DESCRIPTOR: u32 = 60;
    pub const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
    // ClockSnapshot, ClockSnapshot.Clock
    pub const CLOCKS: u32 = 1;
    pub const PRIMARY_TRACE_CLOCK: u32 = 2;
    pub const CLOCK_ID: u32 = 1;
    pub const CLOCK_TIMESTAMP: u32 = 2;
    // TrackEvent
    pub const TYPE: u32 = 9;
    pub const TRACK_UUID: u32 = 11;
    pub const NAME_IID: u32 = 10;
    pub const DEBUG_ANNOTATIONS: u32 = 4;
    pub const COUNTER_VALUE: u32 = 30;
    pub const DOUBLE_COUNTER_VALUE: u32 = 44;
    // DebugAnnotation
    pub const DA_NAME_IID: u32 = 1;
    pub const DA_UINT: u32 = 3;
    pub const DA_STRING: u32 = 6;
    pub const DA_STRING_IID: u32 = 17;
    // TrackDescriptor
    pub const UUID: u32 = 1;
    pub const TD_NAME: u32 = 2;
    pub const PROCESS: u32 = 3;
    pub const PARENT_UUID: u32 = 5;
    pub const COUNTER: u32 = 8;
    // ProcessDescriptor
    pub const PID: u32 = 1;
    pub const CMDLINE: u32 = 2;
    pub const PROCESS_NAME: u32 = 6;
    // CounterDescriptor
    pub const UNIT: u32 = 3;
    pub const UNIT_NAME: u32 = 6;
    // InternedData
    pub const EVENT_NAMES: u32 = 2;
    pub const DEBUG_ANNOTATION_NAMES: u32 = 3;
    pub const DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;
    // EventName, DebugAnnotationName, InternedString
    pub const IID: u32 = 1;
    pub const INTERNED_NAME: u32 = 2;
}

const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_COUNTER: u64 = 4;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
const CLOCK_REALTIME: u64 = 1;
const CLOCK_BOOTTIME: u64 = 6;
const UNIT_COUNT: u64 = 2;

/// Event name iids: the operations by code + 1, then these.
const NAME_QUEUE: u64 = 8;
const NAME_DEVICE: u64 = 9;

/// Argument names and their iids (index + 1).
const ARG_NAMES: [&str; 14] = [
    "path",
    "sector",
    "bytes",
    "syscall",
    "cgroup",
    "container",
    "pid",
    "tid",
    "latency_ns",
    "queue_ns",
    "error",
    "flags",
    "dirtier_pid",
    "device",
];
const A_PATH: u64 = 1;
const A_SECTOR: u64 = 2;
const A_BYTES: u64 = 3;
const A_SYSCALL: u64 = 4;
const A_CGROUP: u64 = 5;
const A_CONTAINER: u64 = 6;
const A_PID: u64 = 7;
const A_TID: u64 = 8;
const A_LATENCY: u64 = 9;
const A_QUEUE: u64 = 10;
const A_ERROR: u64 = 11;
const A_FLAGS: u64 = 12;
const A_DIRTIER: u64 = 13;
const A_DEVICE: u64 = 14;

/// Track uuids: the kind in the top byte.
fn uuid(kind: u64, id: u64) -> u64 {
    (kind << 56) | (id & ((1 << 56) - 1))
}
const K_DEV: u64 = 1;
const K_DEV_LANE: u64 = 2;
const K_PROC: u64 = 3;
const K_PROC_LANE: u64 = 4;
const K_IN_FLIGHT: u64 = 5;
const K_IOPS: u64 = 6;

/// Lanes of a track: the latest end of the slices on each.
#[derive(Default)]
struct Lanes(Vec<u64>);

impl Lanes {
    /// The lane for a slice [start, end], and whether it is new.
    fn take(&mut self, start: u64, end: u64) -> (usize, bool) {
        if let Some(i) = self.0.iter().position(|&e| e <= start) {
            self.0[i] = end;
            return (i, false);
        }
        if self.0.len() < MAX_LANES {
            self.0.push(end);
            return (self.0.len() - 1, true);
        }
        let i = MAX_LANES - 1;
        self.0[i] = self.0[i].max(end);
        (i, false)
    }
}

struct DevState {
    lanes: Lanes,
    /// Completion times of the I/Os in flight.
    ends: BinaryHeap<Reverse<u64>>,
    bin: u64,
    bin_ios: u64,
    /// Interned name.
    name_iid: u64,
}

/// Strings interned so far: their iids by what they name.
#[derive(Default)]
struct Interned {
    next: u64,
    paths: IntMap<u32, u64>,
    syscalls: IntMap<u16, u64>,
    cgroups: IntMap<u64, (u64, Option<u64>)>,
    devices: IntMap<u32, u64>,
    /// New strings for the packet being written: (iid, text) ranges in `text`.
    pending: Vec<(u64, std::ops::Range<usize>)>,
    text: Vec<u8>,
}

impl Interned {
    fn add(&mut self, s: &[u8], lossless: bool) -> u64 {
        self.next += 1;
        let start = self.text.len();
        if lossless {
            text_bytes(&mut self.text, s);
        } else {
            self.text.extend_from_slice(s);
        }
        self.pending.push((self.next, start..self.text.len()));
        self.next
    }
    fn write_pending(&mut self, pb: &mut Pb) {
        if self.pending.is_empty() {
            return;
        }
        let d = pb.begin(f::INTERNED_DATA);
        for (iid, range) in &self.pending {
            let s = pb.begin(f::DEBUG_ANNOTATION_STRING_VALUES);
            pb.uint(f::IID, *iid);
            pb.bytes(f::INTERNED_NAME, &self.text[range.clone()]);
            pb.end(s);
        }
        pb.end(d);
        self.pending.clear();
        self.text.clear();
    }
}

struct Exporter<'a> {
    r: &'a Reader,
    pb: Pb,
    out: &'a mut dyn Write,
    devs: IntMap<u32, DevState>,
    procs: IntMap<u32, Lanes>,
    strings: Interned,
    scratch: Vec<u8>,
    events: u64,
    /// The devices with I/O in the export, sorted (an I/O one of them sent down is not put
    /// on its process's lanes).
    uppers: Vec<u32>,
}

impl<'a> Exporter<'a> {
    fn packet(&mut self, ts: Option<u64>) -> usize {
        let p = self.pb.begin(f::TRACE_PACKET);
        if let Some(ts) = ts {
            self.pb.uint(f::TIMESTAMP, ts);
        }
        self.pb.uint(f::SEQUENCE_ID, SEQUENCE_ID);
        p
    }

    fn flush_if_full(&mut self) -> std::io::Result<()> {
        if self.pb.buf.len() >= 1 << 20 {
            self.out.write_all(&self.pb.buf)?;
            self.pb.buf.clear();
        }
        Ok(())
    }

    /// The first packet: incremental state cleared, every name interned, the clocks.
    fn start(&mut self) {
        let h = self.r.header();
        let p = self.packet(None);
        self.pb.uint(f::FIRST_PACKET_ON_SEQUENCE, 1);
        self.pb
            .uint(f::SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
        let c = self.pb.begin(f::CLOCK_SNAPSHOT);
        let clock = |pb: &mut Pb, id: u64, ts: u64| {
            let k = pb.begin(f::CLOCKS);
            pb.uint(f::CLOCK_ID, id);
            pb.uint(f::CLOCK_TIMESTAMP, ts);
            pb.end(k);
        };
        clock(&mut self.pb, CLOCK_BOOTTIME, h.monotonic_ns);
        if h.wall_clock_ns > 0 {
            clock(&mut self.pb, CLOCK_REALTIME, h.wall_clock_ns as u64);
        }
        self.pb.uint(f::PRIMARY_TRACE_CLOCK, CLOCK_BOOTTIME);
        self.pb.end(c);
        let d = self.pb.begin(f::INTERNED_DATA);
        let names = Op::ALL
            .iter()
            .map(|o| o.name())
            .chain(["queue", "device"])
            .enumerate();
        for (i, name) in names {
            let e = self.pb.begin(f::EVENT_NAMES);
            self.pb.uint(f::IID, i as u64 + 1);
            self.pb.bytes(f::INTERNED_NAME, name.as_bytes());
            self.pb.end(e);
        }
        for (i, name) in ARG_NAMES.iter().enumerate() {
            let e = self.pb.begin(f::DEBUG_ANNOTATION_NAMES);
            self.pb.uint(f::IID, i as u64 + 1);
            self.pb.bytes(f::INTERNED_NAME, name.as_bytes());
            self.pb.end(e);
        }
        self.pb.end(d);
        self.pb.end(p);
    }

    fn track(&mut self, uuid: u64, parent: Option<u64>, name: &[u8], counter_unit: Option<&str>) {
        let p = self.packet(None);
        let t = self.pb.begin(f::TRACK_DESCRIPTOR);
        self.pb.uint(f::UUID, uuid);
        if let Some(parent) = parent {
            self.pb.uint(f::PARENT_UUID, parent);
        }
        self.pb.bytes(f::TD_NAME, name);
        if let Some(unit) = counter_unit {
            let c = self.pb.begin(f::COUNTER);
            self.pb.uint(f::UNIT, UNIT_COUNT);
            self.pb.bytes(f::UNIT_NAME, unit.as_bytes());
            self.pb.end(c);
        }
        self.pb.end(t);
        self.pb.end(p);
    }

    fn counter(&mut self, ts: u64, track: u64, value: Option<u64>, double: f64) {
        let p = self.packet(Some(ts));
        self.pb.uint(f::SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        let e = self.pb.begin(f::TRACK_EVENT);
        self.pb.uint(f::TYPE, TYPE_COUNTER);
        self.pb.uint(f::TRACK_UUID, track);
        match value {
            Some(v) => self.pb.uint(f::COUNTER_VALUE, v),
            None => self.pb.double(f::DOUBLE_COUNTER_VALUE, double),
        }
        self.pb.end(e);
        self.pb.end(p);
    }

    /// A slice's begin or end packet; `args` writes its debug annotations.
    fn slice(&mut self, ts: u64, track: u64, ty: u64, name_iid: u64, args: impl FnOnce(&mut Pb)) {
        let p = self.packet(Some(ts));
        self.pb.uint(f::SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        let e = self.pb.begin(f::TRACK_EVENT);
        self.pb.uint(f::TYPE, ty);
        self.pb.uint(f::TRACK_UUID, track);
        if ty == TYPE_SLICE_BEGIN {
            self.pb.uint(f::NAME_IID, name_iid);
        }
        args(&mut self.pb);
        self.pb.end(e);
        self.strings.write_pending(&mut self.pb);
        self.pb.end(p);
    }

    fn iops_bin(&mut self, dev: u32, bin: u64, ios: u64) {
        let rate = ios as f64 * (1e9 / IOPS_BIN_NS as f64);
        self.counter(bin * IOPS_BIN_NS, uuid(K_IOPS, dev as u64), None, rate);
    }

    fn device(&mut self, dev: u32) {
        if self.devs.contains_key(&dev) {
            return;
        }
        let name = self
            .r
            .tables()
            .device(DevT(dev))
            .map_or_else(|| DevT(dev).to_string(), |d| d.name.clone());
        let id = dev as u64;
        self.track(uuid(K_DEV, id), None, name.as_bytes(), None);
        let in_flight = format!("{name} in flight");
        self.track(
            uuid(K_IN_FLIGHT, id),
            Some(uuid(K_DEV, id)),
            in_flight.as_bytes(),
            Some("I/Os"),
        );
        let iops = format!("{name} IOPS");
        self.track(
            uuid(K_IOPS, id),
            Some(uuid(K_DEV, id)),
            iops.as_bytes(),
            Some("I/Os per second"),
        );
        let name_iid = self.strings.add(name.as_bytes(), false);
        // Sent with the next packet that writes pending strings (this I/O's begin).
        self.strings.devices.insert(dev, name_iid);
        self.devs.insert(
            dev,
            DevState {
                lanes: Lanes::default(),
                ends: BinaryHeap::new(),
                bin: u64::MAX,
                bin_ios: 0,
                name_iid,
            },
        );
    }

    fn process(&mut self, io: &Io) {
        if self.procs.contains_key(&io.e.pid) {
            return;
        }
        self.procs.insert(io.e.pid, Lanes::default());
        let p = self.r.process_of(io.e.pid, io.e.tid, io.segment as usize);
        let p_ = self.packet(None);
        let t = self.pb.begin(f::TRACK_DESCRIPTOR);
        self.pb.uint(f::UUID, uuid(K_PROC, io.e.pid as u64));
        let d = self.pb.begin(f::PROCESS);
        self.pb.uint(f::PID, io.e.pid as u64);
        if let Some(p) = p {
            self.scratch.clear();
            text_bytes(&mut self.scratch, &p.comm);
            self.pb.bytes(f::PROCESS_NAME, &self.scratch);
            if let Some(args) = p.args.as_deref().filter(|a| !a.is_empty()) {
                for a in args.split(|&c| c == b' ').filter(|a| !a.is_empty()) {
                    self.scratch.clear();
                    text_bytes(&mut self.scratch, a);
                    self.pb.bytes(f::CMDLINE, &self.scratch);
                }
            }
        }
        self.pb.end(d);
        self.pb.end(t);
        self.pb.end(p_);
    }

    fn path_iid(&mut self, path_id: u32) -> Option<u64> {
        if path_id == 0 {
            return None;
        }
        if let Some(&iid) = self.strings.paths.get(&path_id) {
            return Some(iid);
        }
        let path = (self.r.tables().path(path_id)).map_or(Default::default(), |p| p.shown());
        let iid = self.strings.add(&path, true);
        self.strings.paths.insert(path_id, iid);
        Some(iid)
    }

    fn syscall_iid(&mut self, code: u16) -> u64 {
        if let Some(&iid) = self.strings.syscalls.get(&code) {
            return iid;
        }
        let iid = self
            .strings
            .add(Syscall(code).to_string().as_bytes(), false);
        self.strings.syscalls.insert(code, iid);
        iid
    }

    /// The cgroup's path and container label (when it has one) iids.
    fn cgroup_iids(&mut self, id: u64) -> (u64, Option<u64>) {
        if let Some(&v) = self.strings.cgroups.get(&id) {
            return v;
        }
        let (path, label) = match self.r.tables().cgroup(id) {
            Some(c) => {
                let l = c.identity.label();
                (c.path.clone(), (l != "-").then_some(l))
            }
            None => (format!("cgroup:{id}"), None),
        };
        let p = self.strings.add(path.as_bytes(), false);
        let l = label.map(|l| self.strings.add(l.as_bytes(), false));
        self.strings.cgroups.insert(id, (p, l));
        (p, l)
    }

    /// Writes one I/O (events come in start order).
    fn io(&mut self, io: &Io) -> std::io::Result<()> {
        let end = io.ts.saturating_add(io.e.latency_ns);
        self.device(io.e.dev.0);
        self.process(io);
        let dev = io.e.dev.0 as u64;
        // In flight: the completions up to this start, then this start.
        let in_flight = uuid(K_IN_FLIGHT, dev);
        loop {
            let d = self.devs.get_mut(&io.e.dev.0).expect("device state");
            match d.ends.peek() {
                Some(&Reverse(t)) if t <= io.ts => {
                    d.ends.pop();
                    let n = d.ends.len() as u64;
                    self.counter(t, in_flight, Some(n), 0.0);
                }
                _ => break,
            }
        }
        let d = self.devs.get_mut(&io.e.dev.0).expect("device state");
        d.ends.push(Reverse(end));
        let n = d.ends.len() as u64;
        let bin = io.ts / IOPS_BIN_NS;
        let closed = (d.bin != bin && d.bin != u64::MAX).then_some((d.bin, d.bin_ios));
        if d.bin != bin {
            d.bin = bin;
            d.bin_ios = 0;
        }
        d.bin_ios += 1;
        let (lane, new_lane) = d.lanes.take(io.ts, end);
        let dev_name_iid = d.name_iid;
        self.counter(io.ts, in_flight, Some(n), 0.0);
        if let Some((b, ios)) = closed {
            self.iops_bin(io.e.dev.0, b, ios);
            if bin > b + 1 {
                self.iops_bin(io.e.dev.0, b + 1, 0);
            }
        }
        let track = uuid(K_DEV_LANE, (dev << 16) | lane as u64);
        if new_lane {
            let name = format!("lane {lane}");
            self.track(track, Some(uuid(K_DEV, dev)), name.as_bytes(), None);
        }
        let path = self.path_iid(io.e.path_id);
        let syscall = io.e.syscall.map(|s| self.syscall_iid(s.0));
        let (cgroup, container) = self.cgroup_iids(io.e.cgroup_id);
        let op_iid = io.e.op.code() as u64 + 1;
        let flags = io.e.flags;
        self.scratch.clear();
        flags.write_letters(&mut self.scratch);
        let scratch = std::mem::take(&mut self.scratch);
        self.slice(io.ts, track, TYPE_SLICE_BEGIN, op_iid, |pb| {
            let s_arg = |pb: &mut Pb, name: u64, iid: u64| {
                let a = pb.begin(f::DEBUG_ANNOTATIONS);
                pb.uint(f::DA_NAME_IID, name);
                pb.uint(f::DA_STRING_IID, iid);
                pb.end(a);
            };
            let u_arg = |pb: &mut Pb, name: u64, v: u64| {
                let a = pb.begin(f::DEBUG_ANNOTATIONS);
                pb.uint(f::DA_NAME_IID, name);
                pb.uint(f::DA_UINT, v);
                pb.end(a);
            };
            if let Some(p) = path {
                s_arg(pb, A_PATH, p);
            }
            u_arg(pb, A_SECTOR, io.e.sector);
            u_arg(pb, A_BYTES, io.e.bytes as u64);
            if let Some(s) = syscall {
                s_arg(pb, A_SYSCALL, s);
            }
            s_arg(pb, A_CGROUP, cgroup);
            if let Some(c) = container {
                s_arg(pb, A_CONTAINER, c);
            }
            u_arg(pb, A_PID, io.e.pid as u64);
            u_arg(pb, A_TID, io.e.tid as u64);
            u_arg(pb, A_LATENCY, io.e.latency_ns);
            if let Some(q) = io.e.queue_ns {
                u_arg(pb, A_QUEUE, q);
            }
            u_arg(pb, A_ERROR, io.e.error as u64);
            let a = pb.begin(f::DEBUG_ANNOTATIONS);
            pb.uint(f::DA_NAME_IID, A_FLAGS);
            pb.bytes(f::DA_STRING, &scratch);
            pb.end(a);
            if let Some(p) = io.e.dirtier_pid {
                u_arg(pb, A_DIRTIER, p as u64);
            }
        });
        self.scratch = scratch;
        let issued = match io.e.queue_ns {
            Some(q) => {
                let issued = io.ts + q.min(io.e.latency_ns);
                self.slice(io.ts, track, TYPE_SLICE_BEGIN, NAME_QUEUE, |_| {});
                self.slice(issued, track, TYPE_SLICE_END, 0, |_| {});
                issued
            }
            None => io.ts,
        };
        self.slice(issued, track, TYPE_SLICE_BEGIN, NAME_DEVICE, |_| {});
        self.slice(end, track, TYPE_SLICE_END, 0, |_| {});
        self.slice(end, track, TYPE_SLICE_END, 0, |_| {});
        self.events += 1;
        // An I/O through stacked devices is on its process's lanes once, at the top.
        let below =
            io.e.upper
                .is_some_and(|u| self.uppers.binary_search(&u.dev.0).is_ok());
        if below {
            return self.flush_if_full();
        }
        // The process's lane.
        let lanes = self.procs.get_mut(&io.e.pid).expect("process lanes");
        let (lane, new_lane) = lanes.take(io.ts, end);
        let track = uuid(K_PROC_LANE, ((io.e.pid as u64) << 16) | lane as u64);
        if new_lane {
            let name = format!("I/O {lane}");
            self.track(
                track,
                Some(uuid(K_PROC, io.e.pid as u64)),
                name.as_bytes(),
                None,
            );
        }
        self.slice(io.ts, track, TYPE_SLICE_BEGIN, op_iid, |pb| {
            for (name, iid) in [(A_PATH, path), (A_DEVICE, Some(dev_name_iid))] {
                if let Some(iid) = iid {
                    let a = pb.begin(f::DEBUG_ANNOTATIONS);
                    pb.uint(f::DA_NAME_IID, name);
                    pb.uint(f::DA_STRING_IID, iid);
                    pb.end(a);
                }
            }
            let a = pb.begin(f::DEBUG_ANNOTATIONS);
            pb.uint(f::DA_NAME_IID, A_BYTES);
            pb.uint(f::DA_UINT, io.e.bytes as u64);
            pb.end(a);
        });
        self.slice(end, track, TYPE_SLICE_END, 0, |_| {});
        self.flush_if_full()
    }

    /// After the last I/O: the completions still pending, the last IOPS bins.
    fn finish(&mut self) -> std::io::Result<()> {
        let mut devs: Vec<u32> = self.devs.keys().copied().collect();
        devs.sort_unstable();
        for dev in devs {
            let in_flight = uuid(K_IN_FLIGHT, dev as u64);
            while let Some(Reverse(t)) = self.devs.get_mut(&dev).and_then(|d| d.ends.pop()) {
                let n = self.devs[&dev].ends.len() as u64;
                self.counter(t, in_flight, Some(n), 0.0);
            }
            let (bin, ios) = (self.devs[&dev].bin, self.devs[&dev].bin_ios);
            if bin != u64::MAX {
                self.iops_bin(dev, bin, ios);
                self.iops_bin(dev, bin + 1, 0);
            }
            self.flush_if_full()?;
        }
        self.out.write_all(&self.pb.buf)?;
        self.pb.buf.clear();
        self.out.flush()
    }
}

/// Writes every intact event of `r` that `filter` keeps (every one without a filter) to `out`
/// as a Perfetto trace (see the module's doc).
pub fn export_perfetto(
    r: &Reader,
    filter: Option<&iodump_format::expr::Expr>,
    out: &mut dyn Write,
) -> Result<ExportSummary, AnalyzeError> {
    let werr = |source| AnalyzeError::Write {
        what: "the Perfetto trace".to_string(),
        source,
    };
    let mut summary = ExportSummary::default();
    let mut x = Exporter {
        r,
        pb: Pb {
            buf: Vec::with_capacity(1 << 20 | 4096),
        },
        out,
        devs: IntMap::default(),
        procs: IntMap::default(),
        strings: Interned::default(),
        scratch: Vec::with_capacity(256),
        events: 0,
        uppers: crate::intact::stacked_devices_with_rows(
            r,
            filter,
            &filter
                .map(|_| r.tables().device_names())
                .unwrap_or_default(),
        ),
    };
    x.start();
    each_intact_in_start_order(r, &mut summary.damaged, filter, |io| x.io(io)).map_err(werr)?;
    x.finish().map_err(werr)?;
    summary.events = x.events;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_lengths_and_varints() {
        let mut pb = Pb::default();
        pb.uint(1, 300);
        assert_eq!(pb.buf, [0x08, 0xac, 0x02]);
        pb.buf.clear();
        let s = pb.begin(2);
        pb.bytes(1, b"abc");
        pb.end(s);
        assert_eq!(pb.buf, [0x12, 5, 0x0a, 3, b'a', b'b', b'c']);
        pb.buf.clear();
        let outer = pb.begin(1);
        let inner = pb.begin(2);
        pb.bytes(3, &[7; 200]);
        pb.end(inner);
        pb.uint(4, 1);
        pb.end(outer);
        // inner: tag, 2-byte length 203; outer: 1 + 2 + 203 + 2 = 208 bytes.
        assert_eq!(&pb.buf[..6], [0x0a, 0xd0, 0x01, 0x12, 0xcb, 0x01]);
        assert_eq!(pb.buf.len(), 3 + 208);
    }

    #[test]
    fn lanes_never_overlap() {
        let mut l = Lanes::default();
        assert_eq!(l.take(0, 10), (0, true));
        assert_eq!(l.take(5, 8), (1, true));
        assert_eq!(l.take(8, 20), (1, false));
        assert_eq!(l.take(10, 12), (0, false));
        // Out of order: an earlier start still finds a lane free for it.
        assert_eq!(l.take(3, 4), (2, true));
    }
}
