//! The replay plan: the trace's I/Os turned into per-thread streams of target operations,
//! each with its scheduled time and the in-flight depth its stream had when it was issued.
//!
//! Model (see `iodump replay --help`): one stream per recorded thread (pid, tid). Within a
//! stream, I/Os are submitted in recorded order; I/O *i* is submitted no earlier than its
//! recorded time offset (divided by `--speed`) and only while fewer than `depth_i - 1` of its
//! stream's earlier I/Os are in flight, where `depth_i` counts the stream's I/Os in flight at
//! its recorded issue (itself included). A synchronous thread (depth 1) thus waits for each
//! completion, an asynchronous one keeps its recorded queue depth.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use iodump_format::expr::Expr;
use iodump_format::{DevT, Event, EventBatch, Flags, Op, Reader, SegmentDecoder};

use crate::error::ReplayError;

/// What a replayed I/O does on the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoKind {
    /// `read` of `len_bytes` at `offset_bytes`.
    Read = 0,
    /// `write` of `len_bytes` at `offset_bytes` (a fixed pattern: traces hold no data).
    Write = 1,
    /// `fsync` of the target.
    Flush = 2,
    /// Discard (`BLOCK_URING_CMD_DISCARD` / `BLKDISCARD` on devices, punch hole on files).
    Discard = 3,
    /// Write zeroes (`fallocate(ZERO_RANGE)`).
    WriteZeroes = 4,
}

impl IoKind {
    /// All kinds, in report order.
    pub const ALL: [IoKind; 5] = [
        IoKind::Read,
        IoKind::Write,
        IoKind::Flush,
        IoKind::Discard,
        IoKind::WriteZeroes,
    ];

    /// Name as in traces.
    pub fn name(self) -> &'static str {
        match self {
            IoKind::Read => "read",
            IoKind::Write => "write",
            IoKind::Flush => "flush",
            IoKind::Discard => "discard",
            IoKind::WriteZeroes => "write_zeroes",
        }
    }

    /// True for the kinds that change the target's data.
    pub fn modifies(self) -> bool {
        !matches!(self, IoKind::Read | IoKind::Flush)
    }

    pub(crate) fn from_op(op: Op) -> Option<IoKind> {
        match op {
            Op::Read => Some(IoKind::Read),
            Op::Write => Some(IoKind::Write),
            Op::Flush => Some(IoKind::Flush),
            Op::Discard => Some(IoKind::Discard),
            Op::WriteZeroes => Some(IoKind::WriteZeroes),
            _ => None,
        }
    }
}

/// One I/O to replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedIo {
    /// Recorded time since the first replayed I/O, in ns (before `--speed`).
    pub sched_ns: u64,
    /// Byte offset on the target (aligned, wrapped).
    pub offset_bytes: u64,
    /// Length in bytes (aligned); 0 for flushes.
    pub len_bytes: u32,
    /// Index into [`Plan::streams`].
    pub stream: u32,
    /// In-flight I/Os of the stream at the recorded issue, this one included (≥ 1).
    pub depth: u32,
    /// Index into the targets.
    pub target: u16,
    /// What to do.
    pub kind: IoKind,
    /// The recorded write had FUA: replayed with `RWF_DSYNC`.
    pub fua: bool,
    /// The recorded latency (block layer entry to completion), in ns.
    pub recorded_latency_ns: u64,
    /// The recorded I/O's offset and length before alignment and wrapping, for reports.
    pub recorded_offset_bytes: u64,
}

/// A recorded thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stream {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Indices into [`Plan::ios`] (one loop), in order.
    pub ios: Vec<u32>,
}

/// Where I/O that does not fit in a target goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Beyond {
    /// Offsets past the end wrap around, keeping their alignment up to 1 MiB (the offset
    /// modulo the largest multiple of 1 MiB that fits).
    #[default]
    Wrap,
    /// I/O past the end is skipped and counted.
    Skip,
}

/// A target's geometry, as the plan needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Size in bytes.
    pub size_bytes: u64,
    /// Offsets and lengths are rounded to this many bytes.
    pub align_bytes: u32,
}

/// How to build a plan.
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    /// Replay writes, discards and write-zeroes (otherwise they are skipped and counted).
    pub allow_writes: bool,
    /// What to do with I/O past a target's end.
    pub beyond: Beyond,
    /// Only I/Os matching this expression.
    pub filter: Option<Expr>,
    /// Replay the trace this many times back to back (≥ 1).
    pub loops: u32,
    /// Target index for each recorded device; devices absent here go to `default_target`.
    pub device_map: HashMap<DevT, u16>,
    /// Target for devices not in `device_map` (`--target`); `None`: they are skipped.
    pub default_target: Option<u16>,
    /// Geometry of each target, by index.
    pub targets: Vec<Geometry>,
    /// Memory the plan and the run's results may take (`MemAvailable`); `None`: not checked.
    pub available_bytes: Option<u64>,
}

/// Memory a replay holds per I/O of the trace it replays, at its peak while the plan is
/// built (the I/O as read, then in the plan, whose vector reuses the read one's, and in its
/// stream's list); `--loops` and the replay's length add nothing: loops are the same plan
/// again, and the measurements are histograms of fixed size. Measured: 72 bytes (max RSS of
/// `--no-stall` replays of 2,724,418 and of 1,798 I/Os, synthetic randread traces), before
/// the I/O as read kept its device and its upper I/O's (8 bytes more, not measured again).
pub const BYTES_PER_PLANNED_IO: u64 = 88;

/// Refuses a plan of `kept` I/Os (one loop) when it cannot be indexed (streams list their
/// I/Os by 32-bit index) or would not fit in `available_bytes`: a trace too large would
/// otherwise abort the process on a failed allocation.
fn check_size(kept: u64, available_bytes: Option<u64>) -> Result<(), ReplayError> {
    let need_bytes = kept.saturating_mul(BYTES_PER_PLANNED_IO);
    let fits = kept <= u64::from(u32::MAX) && available_bytes.is_none_or(|a| need_bytes <= a);
    if fits {
        return Ok(());
    }
    Err(ReplayError::PlanTooLarge {
        ios: kept,
        need_bytes,
        available_bytes: available_bytes.unwrap_or(u64::MAX),
    })
}

/// Counts of recorded I/Os that are not replayed, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Writes, discards and write-zeroes without `--allow-writes`, by [`IoKind`] index.
    pub not_allowed: [u64; 5],
    /// I/O past the end of the target (with `--beyond skip`, or longer than the target).
    pub beyond_end: u64,
    /// I/O on a device with no target.
    pub unmapped: u64,
    /// Operations with no replay equivalent (secure erase, zone management, other).
    pub unsupported_op: u64,
    /// I/O not matching `--filter`.
    pub filtered: u64,
    /// I/O a stacked device (LVM, dm-crypt, md, an NVMe multipath head) sent to a device
    /// below, whose upper device's own I/O is replayed: replaying both would do it twice.
    pub lower: u64,
}

impl Skipped {
    /// Sum over reasons except the filter.
    pub fn total(&self) -> u64 {
        self.not_allowed.iter().sum::<u64>()
            + self.beyond_end
            + self.unmapped
            + self.unsupported_op
            + self.lower
    }
}

/// Everything to replay. One loop is laid out; loop `l` (0-based) is the same I/Os again,
/// scheduled `l` × [`Plan::period_ns`] later ([`Plan::stream_io`]).
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// I/Os of one loop in scheduled order (ties keep recorded order).
    pub ios: Vec<PlannedIo>,
    /// The recorded threads.
    pub streams: Vec<Stream>,
    /// What is not replayed, and why.
    pub skipped: Skipped,
    /// Recorded I/Os (after the filter), by [`IoKind`] index (unsupported ops not counted).
    pub recorded_count: [u64; 5],
    /// Recorded bytes by kind.
    pub recorded_bytes: [u64; 5],
    /// Recorded span, first to last issue of what is replayed, one loop, in ns.
    pub span_ns: u64,
    /// Times the trace is replayed; counts above (recorded, skipped) cover all loops.
    pub loops: u32,
    /// Time from a loop's start to the next one's, in ns (before `--speed`): the span and
    /// one mean gap between I/Os.
    pub period_ns: u64,
    /// I/Os whose offset or length was rounded to the target's alignment.
    pub realigned: u64,
    /// I/Os whose offset wrapped.
    pub wrapped: u64,
    /// Largest in-flight count across all streams the recording showed (one loop).
    pub max_in_flight: u32,
    /// Largest I/O, in bytes.
    pub max_len_bytes: u32,
    /// Segments of the trace that could not be decoded (their I/Os are missing).
    pub damaged_segments: usize,
    /// What the reader found damaged or missing (bad checksums, a cut tail), in words.
    pub damage: Vec<String>,
    /// The recorded devices whose I/O goes to each target, by target index (sorted).
    pub devices_on_target: Vec<Vec<DevT>>,
    /// While the plan is built: of the kept I/Os a stacked device sent down, how many were
    /// realigned and how many wrapped, by upper device (taken back if they are left out).
    pub(crate) lower_adjusted: HashMap<u32, (u64, u64)>,
}

/// One recorded I/O kept for the plan, before streams are formed.
struct Kept {
    ts_ns: u64,
    end_ns: u64,
    pid: u32,
    tid: u32,
    /// Its device, and the upper I/O's for an I/O a stacked device sent down (0: none).
    dev: u32,
    upper_dev: u32,
    io: PlannedIo,
}

fn align_down(v: u64, a: u64) -> u64 {
    v / a * a
}

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// The alignment a wrapped offset keeps: an I/O recorded at an offset aligned to 4 KiB
/// blocks, a 64 KiB stripe or a 1 MiB unit is replayed at an offset aligned alike (a 4 KiB
/// read shifted off its block would span two of the target's blocks: two physical sectors,
/// or two I/Os where a file's blocks are not contiguous).
const WRAP_KEEPS_ALIGN_BYTES: u64 = 1 << 20;

/// `offset` (of an I/O that does not fit) wrapped into `0..=limit` (the last offset where it
/// fits), aligned down to `align`: modulo the largest multiple of 1 MiB (of the largest power
/// of two, when less than 1 MiB fits) that is at most `limit + 1`, so that the offset keeps
/// its alignment up to [`WRAP_KEEPS_ALIGN_BYTES`].
fn wrap(offset: u64, limit: u64, align: u64) -> u64 {
    let room = limit.saturating_add(1);
    let unit = WRAP_KEEPS_ALIGN_BYTES.min(1 << (63 - room.leading_zeros()));
    align_down(offset % align_down(room, unit), align)
}

impl Plan {
    /// Builds the plan for `reader`'s trace.
    pub fn build(reader: &Reader, o: &PlanOptions) -> Result<Plan, ReplayError> {
        let mut plan = Plan::default();
        let mut kept = plan.collect(reader, o);
        plan.drop_lower(&mut kept);
        // Recorded order: by issue time, stable (segments are decoded in file order).
        kept.sort_by_key(|k| k.ts_ns);
        if kept.is_empty() {
            return Err(plan.nothing_to_replay());
        }
        check_size(kept.len() as u64, o.available_bytes)?;
        plan.assign_streams(&mut kept);
        plan.scale_for_loops(o.loops.max(1));
        plan.lay_out(kept);
        Ok(plan)
    }

    /// I/Os to replay, every loop.
    pub fn planned_ios(&self) -> u64 {
        self.ios.len() as u64 * u64::from(self.loops.max(1))
    }

    /// The scheduled time (before `--speed`) of the last I/O of the last loop, in ns;
    /// `None` past `u64::MAX`, 0 for an empty plan.
    pub fn last_sched_ns(&self) -> Option<u64> {
        let last = self.ios.iter().map(|io| io.sched_ns).max().unwrap_or(0);
        u64::from(self.loops.max(1) - 1)
            .checked_mul(self.period_ns)?
            .checked_add(last)
    }

    /// I/O `i` of `stream`'s I/Os in loop `lap`: its index in [`Plan::ios`] and its scheduled
    /// time in that loop; `None` past the stream's end or the last loop.
    #[inline]
    pub fn stream_io(&self, stream: &Stream, i: usize, lap: u32) -> Option<(u32, u64)> {
        if lap >= self.loops.max(1) {
            return None;
        }
        let &idx = stream.ios.get(i)?;
        let offset_ns = u64::from(lap).saturating_mul(self.period_ns);
        Some((
            idx,
            self.ios[idx as usize].sched_ns.saturating_add(offset_ns),
        ))
    }

    /// The trace's events that are replayed, in file order; counts the others and notes
    /// damaged segments.
    fn collect(&mut self, reader: &Reader, o: &PlanOptions) -> Vec<Kept> {
        let devs: HashMap<u32, String> = reader.tables().device_names();
        self.damage = reader.damage().iter().map(|d| d.to_string()).collect();
        let mut kept: Vec<Kept> = Vec::new();
        let mut b = EventBatch::default();
        let mut dec = SegmentDecoder::new();
        let mut rows: Vec<u32> = Vec::new();
        for (seg, info) in reader.segments().iter().enumerate() {
            // A segment the filter's window of time leaves out is not decoded; its I/Os
            // count as filtered.
            if o.filter
                .as_ref()
                .is_some_and(|f| f.leaves_out_segment(reader, seg))
            {
                self.skipped.filtered += u64::from(info.events);
                continue;
            }
            if let Err(d) = reader.decode_segment_into(seg, &mut b, &mut dec) {
                self.damaged_segments += 1;
                self.damage.push(d.to_string());
                continue;
            }
            rows.clear();
            match &o.filter {
                Some(f) => f.select_in(reader, seg, &b, &devs, &mut rows),
                None => rows.extend(0..b.len() as u32),
            }
            self.skipped.filtered += (b.len() - rows.len()) as u64;
            for &i in &rows {
                if let Some(k) = self.keep(&b.get(i as usize), o) {
                    kept.push(k);
                }
            }
        }
        kept
    }

    /// Why nothing is left to replay, from what was skipped.
    fn nothing_to_replay(&self) -> ReplayError {
        let why = if self.skipped.filtered > 0 && self.skipped.total() == 0 {
            "no I/O matches the filter".to_string()
        } else if self.skipped.total() > 0 {
            format!(
                "all {} I/Os are skipped ({})",
                self.skipped.total(),
                self.skipped_words()
            )
        } else {
            "the trace has no I/O".to_string()
        };
        ReplayError::NothingToReplay { why }
    }

    /// Forms the streams (one per recorded thread) of `kept` (in recorded order, not
    /// empty) and gives each I/O its stream, its depth in it and its time since the first.
    fn assign_streams(&mut self, kept: &mut [Kept]) {
        let t0 = kept.first().map_or(0, |k| k.ts_ns);
        self.span_ns = kept.last().map_or(0, |k| k.ts_ns - t0);
        let mut stream_of: HashMap<(u32, u32), u32> = HashMap::new();
        // End times of the I/Os in flight, per stream and across all.
        let mut outstanding: Vec<BinaryHeap<Reverse<u64>>> = Vec::new();
        let mut global: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
        for k in kept {
            let s = *stream_of.entry((k.pid, k.tid)).or_insert_with(|| {
                self.streams.push(Stream {
                    pid: k.pid,
                    tid: k.tid,
                    ios: Vec::new(),
                });
                outstanding.push(BinaryHeap::new());
                (self.streams.len() - 1) as u32
            });
            let q = &mut outstanding[s as usize];
            while q.peek().is_some_and(|Reverse(end)| *end <= k.ts_ns) {
                q.pop();
            }
            q.push(Reverse(k.end_ns));
            while global.peek().is_some_and(|Reverse(end)| *end <= k.ts_ns) {
                global.pop();
            }
            global.push(Reverse(k.end_ns));
            self.max_in_flight = self.max_in_flight.max(global.len() as u32);
            k.io.stream = s;
            k.io.depth = q.len() as u32;
            k.io.sched_ns = k.ts_ns - t0;
        }
    }

    /// Each I/O is replayed once, at the highest layer it was recorded at that has a target:
    /// an I/O a stacked device sent down is left out when I/O of that stacked device is
    /// replayed (the stacked device's I/O reproduces it; its device below may be another
    /// target, or the same one, where both would overlap). One whose upper device has
    /// nothing replayed (not recorded, filtered out, no target) is replayed. Then the
    /// targets' devices and the largest I/O are those of what is left.
    fn drop_lower(&mut self, kept: &mut Vec<Kept>) {
        if kept.iter().all(|k| k.upper_dev == 0) {
            return;
        }
        let replayed: std::collections::HashSet<u32> = kept.iter().map(|k| k.dev).collect();
        let before = kept.len();
        kept.retain(|k| k.upper_dev == 0 || !replayed.contains(&k.upper_dev));
        self.skipped.lower += (before - kept.len()) as u64;
        for (upper, (realigned, wrapped)) in std::mem::take(&mut self.lower_adjusted) {
            if replayed.contains(&upper) {
                self.realigned -= realigned;
                self.wrapped -= wrapped;
            }
        }
        self.max_len_bytes = kept.iter().map(|k| k.io.len_bytes).max().unwrap_or(0);
        for devs in &mut self.devices_on_target {
            devs.clear();
        }
        for k in kept.iter() {
            let devs = &mut self.devices_on_target[k.io.target as usize];
            if let Err(pos) = devs.binary_search(&DevT(k.dev)) {
                devs.insert(pos, DevT(k.dev));
            }
        }
    }

    /// Counts cover every loop: multiplies the per-loop counts by `loops`.
    fn scale_for_loops(&mut self, loops: u32) {
        self.loops = loops;
        let l = u64::from(loops);
        for c in self
            .recorded_count
            .iter_mut()
            .chain(self.recorded_bytes.iter_mut())
            .chain(self.skipped.not_allowed.iter_mut())
        {
            *c *= l;
        }
        for c in [
            &mut self.skipped.beyond_end,
            &mut self.skipped.unmapped,
            &mut self.skipped.unsupported_op,
            &mut self.skipped.filtered,
            &mut self.skipped.lower,
            &mut self.realigned,
            &mut self.wrapped,
        ] {
            *c *= l;
        }
    }

    /// Lays `kept` (with streams assigned) out as the plan's one loop; the next loop starts
    /// one mean inter-arrival gap after its last I/O.
    fn lay_out(&mut self, kept: Vec<Kept>) {
        self.period_ns = self.span_ns + self.span_ns / kept.len().max(1) as u64 + 1;
        self.ios = kept.into_iter().map(|k| k.io).collect();
        self.ios.shrink_to_fit();
        for (i, io) in self.ios.iter().enumerate() {
            self.streams[io.stream as usize].ios.push(i as u32);
        }
        for st in &mut self.streams {
            st.ios.shrink_to_fit();
        }
    }

    /// Applies op, device, size and alignment rules to one event; counts it.
    fn keep(&mut self, e: &Event, o: &PlanOptions) -> Option<Kept> {
        let Some(kind) = IoKind::from_op(e.op) else {
            self.skipped.unsupported_op += 1;
            return None;
        };
        let ki = kind as usize;
        self.recorded_count[ki] += 1;
        self.recorded_bytes[ki] += u64::from(e.bytes);
        if kind.modifies() && !o.allow_writes {
            self.skipped.not_allowed[ki] += 1;
            return None;
        }
        let Some(t) = o.device_map.get(&e.dev).copied().or(o.default_target) else {
            self.skipped.unmapped += 1;
            return None;
        };
        let g = o.targets.get(t as usize)?;
        let a = u64::from(g.align_bytes.max(1));
        let off = e.sector.saturating_mul(512);
        let (mut offset, len) = if kind == IoKind::Flush {
            (0, 0)
        } else {
            let start = align_down(off, a);
            let end = align_up(off.saturating_add(u64::from(e.bytes)), a);
            if start != off || end - start != u64::from(e.bytes) {
                self.realigned += 1;
                if let Some(u) = e.upper {
                    self.lower_adjusted.entry(u.dev.0).or_default().0 += 1;
                }
            }
            (start, end - start)
        };
        if len > g.size_bytes || len > u64::from(u32::MAX) {
            self.skipped.beyond_end += 1;
            return None;
        }
        if offset + len > g.size_bytes {
            match o.beyond {
                Beyond::Skip => {
                    self.skipped.beyond_end += 1;
                    return None;
                }
                Beyond::Wrap => {
                    offset = wrap(offset, g.size_bytes - len, a);
                    self.wrapped += 1;
                    if let Some(u) = e.upper {
                        self.lower_adjusted.entry(u.dev.0).or_default().1 += 1;
                    }
                }
            }
        }
        self.max_len_bytes = self.max_len_bytes.max(len as u32);
        let ti = t as usize;
        if self.devices_on_target.len() <= ti {
            self.devices_on_target.resize(ti + 1, Vec::new());
        }
        if let Err(pos) = self.devices_on_target[ti].binary_search(&e.dev) {
            self.devices_on_target[ti].insert(pos, e.dev);
        }
        Some(Kept {
            ts_ns: e.timestamp_ns,
            end_ns: e.timestamp_ns.saturating_add(e.latency_ns),
            pid: e.pid,
            tid: e.tid,
            dev: e.dev.0,
            upper_dev: e.upper.map_or(0, |u| u.dev.0),
            io: PlannedIo {
                sched_ns: 0,
                offset_bytes: offset,
                len_bytes: len as u32,
                stream: 0,
                depth: 1,
                target: t,
                kind,
                fua: kind == IoKind::Write && e.flags.contains(Flags::FUA),
                recorded_latency_ns: e.latency_ns,
                recorded_offset_bytes: off,
            },
        })
    }

    /// The skip reasons in words (`"812 writes not allowed, 3 beyond end"`).
    pub fn skipped_words(&self) -> String {
        let s = &self.skipped;
        let mut parts = Vec::new();
        for k in IoKind::ALL {
            let n = s.not_allowed[k as usize];
            if n > 0 {
                parts.push(format!("{n} {} without --allow-writes", k.name()));
            }
        }
        if s.beyond_end > 0 {
            parts.push(format!("{} beyond the target's end", s.beyond_end));
        }
        if s.unmapped > 0 {
            parts.push(format!("{} on devices with no target", s.unmapped));
        }
        if s.unsupported_op > 0 {
            parts.push(format!("{} of unsupported operations", s.unsupported_op));
        }
        if s.lower > 0 {
            parts.push(format!(
                "{} sent down by a stacked device whose own I/O is replayed",
                s.lower
            ));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodump_format::{EndInfo, Header, UpperIo, Writer, WriterOptions};

    fn ev(ts: u64, tid: u32, op: Op, sector: u64, bytes: u32, lat: u64) -> Event {
        Event {
            timestamp_ns: ts,
            dev: DevT::new(8, 0),
            sector,
            bytes,
            op,
            flags: Flags(0),
            pid: tid,
            tid,
            path_id: 0,
            queue_ns: None,
            latency_ns: lat,
            error: 0,
            cpu: 0,
            syscall: None,
            dirtier_pid: None,
            cgroup_id: 0,
            upper: None,
        }
    }

    fn reader(events: &[Event]) -> Reader {
        let mut w = Writer::new(Vec::new(), &Header::default(), WriterOptions::default()).unwrap();
        for e in events {
            w.push(e).unwrap();
        }
        Reader::from_bytes(w.finish(EndInfo::default()).unwrap()).unwrap()
    }

    fn opts(size: u64, align: u32) -> PlanOptions {
        PlanOptions {
            loops: 1,
            default_target: Some(0),
            targets: vec![Geometry {
                size_bytes: size,
                align_bytes: align,
            }],
            ..PlanOptions::default()
        }
    }

    /// An I/O a stacked device sent down is replayed once: as its upper I/O when that is
    /// replayed, itself when its upper device has no target.
    #[test]
    fn lower_ios_are_replayed_once() {
        let (dm, sda) = (DevT::new(253, 0), DevT::new(8, 0));
        let mut events = Vec::new();
        for i in 0..10u64 {
            let mut up = ev(1000 * (i + 1), 5, Op::Read, i * 8, 4096, 100);
            up.dev = dm;
            // below: one sector off the 4 KiB alignment, so realigned
            let mut down = ev(1000 * (i + 1) + 10, 5, Op::Read, 1 + i * 8, 4096, 80);
            down.dev = sda;
            down.upper = Some(UpperIo {
                dev: dm,
                timestamp_ns: up.timestamp_ns,
            });
            events.extend([up, down]);
        }
        for i in 0..2u64 {
            let mut own = ev(20_000 + 1000 * i, 6, Op::Read, 4096 + i * 8, 4096, 50);
            own.dev = sda;
            events.push(own);
        }
        let r = reader(&events);
        let p = Plan::build(&r, &opts(1 << 30, 4096)).unwrap();
        assert_eq!(p.ios.len(), 12, "dm-0's 10 and sda's own 2");
        assert_eq!(p.skipped.lower, 10);
        assert_eq!(p.realigned, 0, "the realigned ones were left out");
        assert_eq!(p.devices_on_target, [vec![sda, dm]]);
        assert!(p
            .skipped_words()
            .contains("10 sent down by a stacked device"));
        // dm-0 given no target: its I/O is done as sda's.
        let mut o = opts(1 << 30, 4096);
        o.default_target = None;
        o.device_map.insert(sda, 0);
        let p = Plan::build(&r, &o).unwrap();
        assert_eq!(p.ios.len(), 12, "sda's 10 lower and 2 own");
        assert_eq!(
            (p.skipped.lower, p.skipped.unmapped, p.realigned),
            (0, 10, 10)
        );
        assert_eq!(p.devices_on_target, [vec![sda]]);
    }

    /// A window of time in the filter: the segments outside it are not decoded and their
    /// I/Os count as filtered, as when every event is evaluated.
    #[test]
    fn a_window_of_time_counts_what_it_leaves_out() {
        let events: Vec<Event> = (0..1000u64)
            .map(|i| {
                ev(
                    1_000_000 * (i + 1),
                    1 + (i % 3) as u32,
                    Op::Read,
                    i * 8,
                    4096,
                    100,
                )
            })
            .collect();
        let mut w = Writer::new(
            Vec::new(),
            &Header::default(),
            WriterOptions {
                segment_events: 64,
                ..WriterOptions::default()
            },
        )
        .unwrap();
        for e in &events {
            w.push(e).unwrap();
        }
        let r = Reader::from_bytes(w.finish(EndInfo::default()).unwrap()).unwrap();
        assert!(r.segments().len() > 10);
        // Header::default()'s clock pair is (0, 0): UTC ns are the timestamps.
        let at = |ns: u64| iodump_format::summary::rfc3339_utc(ns as i64);
        let window = format!("time >= {} && time < {}", at(300_000_000), at(400_000_000));
        let plan = |f: &str| {
            let mut o = opts(1 << 30, 512);
            o.filter = Some(Expr::parse(f).unwrap());
            Plan::build(&r, &o).unwrap()
        };
        let pruned = plan(&window);
        assert!(r.segments().iter().any(|s| Expr::parse(&window)
            .unwrap()
            .leaves_out_segment(&r, s.index)));
        // The same filter with its window under `||`: every event evaluated.
        let whole = plan(&format!("({window}) || false"));
        assert_eq!(pruned.ios.len(), 100);
        assert_eq!(pruned.ios.len(), whole.ios.len());
        assert_eq!(pruned.skipped.filtered, 900);
        assert_eq!(pruned.skipped.filtered, whole.skipped.filtered);
    }

    #[test]
    fn streams_depth_and_order() {
        // Thread 1: synchronous (each I/O after the previous completed).
        // Thread 2: three I/Os issued together (depth 1, 2, 3), then one after all completed.
        let r = reader(&[
            ev(1_000, 1, Op::Read, 0, 4096, 100),
            ev(1_050, 2, Op::Read, 80, 4096, 500),
            ev(1_060, 2, Op::Read, 88, 4096, 500),
            ev(1_070, 2, Op::Read, 96, 4096, 500),
            ev(1_200, 1, Op::Read, 8, 4096, 100),
            ev(2_000, 2, Op::Read, 104, 4096, 500),
        ]);
        let p = Plan::build(&r, &opts(1 << 20, 512)).unwrap();
        assert_eq!(p.streams.len(), 2);
        let depths: Vec<(u32, u32, u64)> = p
            .ios
            .iter()
            .map(|i| (i.stream, i.depth, i.sched_ns))
            .collect();
        assert_eq!(
            depths,
            vec![
                (0, 1, 0),
                (1, 1, 50),
                (1, 2, 60),
                (1, 3, 70),
                (0, 1, 200),
                (1, 1, 1000)
            ]
        );
        assert_eq!(p.streams[1].ios, vec![1, 2, 3, 5]);
        assert_eq!(p.max_in_flight, 4);
        assert_eq!(p.span_ns, 1000);
    }

    #[test]
    fn writes_skipped_unless_allowed() {
        let evs = [
            ev(1, 1, Op::Read, 0, 4096, 10),
            ev(2, 1, Op::Write, 8, 4096, 10),
            ev(3, 1, Op::Discard, 16, 4096, 10),
            ev(4, 1, Op::Flush, 0, 0, 10),
            ev(5, 1, Op::SecureErase, 0, 4096, 10),
        ];
        let r = reader(&evs);
        let p = Plan::build(&r, &opts(1 << 20, 512)).unwrap();
        assert_eq!(p.ios.len(), 2);
        assert_eq!(p.skipped.not_allowed, [0, 1, 0, 1, 0]);
        assert_eq!(p.skipped.unsupported_op, 1);
        let mut o = opts(1 << 20, 512);
        o.allow_writes = true;
        let p = Plan::build(&r, &o).unwrap();
        let kinds: Vec<IoKind> = p.ios.iter().map(|i| i.kind).collect();
        assert_eq!(
            kinds,
            [IoKind::Read, IoKind::Write, IoKind::Discard, IoKind::Flush]
        );
    }

    #[test]
    fn beyond_end_wraps_or_skips_and_aligns() {
        // Target of 64 KiB with 4 KiB blocks; I/O at 1 MiB + 512 of 1 KiB.
        let r = reader(&[
            ev(1, 1, Op::Read, 2048 + 1, 1024, 10),
            ev(2, 1, Op::Read, 0, 8192, 10),
            ev(3, 1, Op::Read, 0, 128 * 1024, 10),
        ]);
        let p = Plan::build(&r, &opts(64 * 1024, 4096)).unwrap();
        assert_eq!(p.skipped.beyond_end, 1, "longer than the target");
        assert_eq!(p.ios.len(), 2);
        let io = p.ios[0];
        assert_eq!(io.len_bytes, 4096);
        assert_eq!(io.offset_bytes % 4096, 0);
        assert!(io.offset_bytes + 4096 <= 64 * 1024);
        assert_eq!(p.wrapped, 1);
        assert_eq!(p.realigned, 1);
        for io in &p.ios {
            assert!(io.offset_bytes + u64::from(io.len_bytes) <= 64 * 1024);
        }
        let mut o = opts(64 * 1024, 4096);
        o.beyond = Beyond::Skip;
        let p = Plan::build(&r, &o).unwrap();
        assert_eq!(p.skipped.beyond_end, 2);
        assert_eq!(p.ios.len(), 1);
    }

    #[test]
    fn wrapped_offsets_keep_their_alignment() {
        // A 32 MiB file with 512-byte direct I/O alignment; 4 KiB and 64 KiB reads recorded
        // far past its end, at offsets aligned to 4 KiB, 64 KiB and 1 MiB.
        let (size, len) = (32u64 << 20, 4096u64);
        for (recorded, keeps) in [
            ((5u64 << 30) + 7 * 4096, 4096u64),
            ((7u64 << 30) + 3 * 65536, 65536),
            (9u64 << 30, 1 << 20),
        ] {
            let w = wrap(recorded, size - len, 512);
            assert!(w + len <= size, "{recorded}: {w}");
            assert_eq!(w % keeps, 0, "{recorded} wrapped to {w}");
        }
        // Through the plan: every wrapped 4 KiB read stays on a 4 KiB boundary.
        let events: Vec<Event> = (0..64u64)
            .map(|i| ev(i * 10, 1, Op::Read, (1 << 30) / 512 + i * 8 * 997, 4096, 10))
            .collect();
        let p = Plan::build(&reader(&events), &opts(size, 512)).unwrap();
        assert_eq!(p.wrapped, 64);
        for io in &p.ios {
            assert_eq!(io.offset_bytes % 4096, 0, "{io:?}");
            assert!(io.offset_bytes + 4096 <= size);
        }
        // A target smaller than 1 MiB: the largest power of two that fits; an I/O as long
        // as the target goes to 0.
        assert_eq!(wrap(3 * 65536 + 4096, 3 * 65536 - 4096, 512) % 65536, 4096);
        assert_eq!(wrap(12345 * 512, 0, 512), 0);
        assert_eq!(wrap(u64::MAX / 4096 * 4096, u64::MAX - 1, 512) % 4096, 0);
    }

    #[test]
    fn nothing_to_replay_says_why() {
        let why = |p: &Plan| p.nothing_to_replay().to_string();
        let mut p = Plan::default();
        assert_eq!(why(&p), "nothing to replay: the trace has no I/O");
        p.skipped.filtered = 3;
        assert_eq!(why(&p), "nothing to replay: no I/O matches the filter");
        p.skipped.not_allowed[IoKind::Write as usize] = 2;
        p.skipped.unmapped = 1;
        assert_eq!(
            why(&p),
            "nothing to replay: all 3 I/Os are skipped (2 write without --allow-writes, 1 on devices with no target)"
        );
    }

    #[test]
    fn a_plan_too_large_for_memory_is_refused_whatever_the_loops() {
        let r = reader(&[
            ev(1_000, 1, Op::Read, 0, 4096, 100),
            ev(2_000, 1, Op::Read, 8, 4096, 100),
        ]);
        let mut o = opts(1 << 20, 512);
        // Loops take no memory: only the trace's I/Os count.
        o.loops = u32::MAX;
        o.available_bytes = Some(2 * BYTES_PER_PLANNED_IO);
        let p = Plan::build(&r, &o).unwrap();
        assert_eq!(p.ios.len(), 2);
        assert_eq!(p.planned_ios(), 2 * u64::from(u32::MAX));
        o.available_bytes = Some(2 * BYTES_PER_PLANNED_IO - 1);
        let e = Plan::build(&r, &o).unwrap_err();
        assert!(matches!(e, ReplayError::PlanTooLarge { ios: 2, .. }), "{e}");
        assert!(e.to_string().contains("with --filter"), "{e}");
        // More I/Os than 32-bit indices reach, whatever the memory.
        let e = check_size(u64::from(u32::MAX) + 1, None).unwrap_err();
        assert!(
            e.to_string().contains("more than one replay can hold"),
            "{e}"
        );
    }

    #[test]
    fn loop_counts_scale_and_loops_follow_each_other() {
        let mut p = Plan {
            recorded_count: [1; 5],
            recorded_bytes: [2; 5],
            skipped: Skipped {
                not_allowed: [1; 5],
                beyond_end: 1,
                unmapped: 1,
                unsupported_op: 1,
                filtered: 1,
                lower: 1,
            },
            realigned: 1,
            wrapped: 1,
            ..Plan::default()
        };
        p.scale_for_loops(3);
        assert_eq!(p.loops, 3);
        assert_eq!((p.recorded_count, p.recorded_bytes), ([3; 5], [6; 5]));
        let s = &p.skipped;
        assert_eq!(s.not_allowed, [3; 5]);
        assert_eq!(
            (
                s.beyond_end,
                s.unmapped,
                s.unsupported_op,
                s.filtered,
                s.lower
            ),
            (3, 3, 3, 3, 3)
        );
        assert_eq!((p.realigned, p.wrapped), (3, 3));

        let mut p = Plan::default();
        let kept = |ts_ns: u64, tid: u32| Kept {
            ts_ns,
            end_ns: ts_ns + 5,
            pid: tid,
            tid,
            dev: 0,
            upper_dev: 0,
            io: PlannedIo {
                sched_ns: 0,
                offset_bytes: 0,
                len_bytes: 512,
                stream: 0,
                depth: 0,
                target: 0,
                kind: IoKind::Read,
                fua: false,
                recorded_latency_ns: 5,
                recorded_offset_bytes: 0,
            },
        };
        let mut k = vec![kept(10, 1), kept(12, 2), kept(110, 1)];
        p.assign_streams(&mut k);
        assert_eq!(p.span_ns, 100);
        assert_eq!(p.streams.len(), 2);
        assert_eq!(p.max_in_flight, 2, "the first two overlap");
        p.lay_out(k);
        // Period: the span, one mean gap (100 / 3) and 1 ns.
        assert_eq!(p.period_ns, 134);
        let sched: Vec<u64> = p.ios.iter().map(|i| i.sched_ns).collect();
        assert_eq!(sched, [0, 2, 100]);
        assert_eq!(p.streams[0].ios, [0, 2]);
        assert_eq!(p.streams[1].ios, [1]);
        // Each stream, loop after loop (three loops).
        p.loops = 3;
        let walk = |s: usize| {
            let mut v = Vec::new();
            for lap in 0..4 {
                for i in 0..3 {
                    v.extend(p.stream_io(&p.streams[s], i, lap));
                }
            }
            v
        };
        assert_eq!(
            walk(0),
            [(0, 0), (2, 100), (0, 134), (2, 234), (0, 268), (2, 368)]
        );
        assert_eq!(walk(1), [(1, 2), (1, 136), (1, 270)]);
        assert_eq!(p.planned_ios(), 9);
        assert_eq!(p.last_sched_ns(), Some(368));
        p.period_ns = u64::MAX / 2;
        assert_eq!(
            p.last_sched_ns(),
            None,
            "past u64: the clock check refuses it"
        );
    }

    #[test]
    fn loops_and_nothing() {
        let r = reader(&[
            ev(10, 1, Op::Read, 0, 4096, 10),
            ev(110, 1, Op::Read, 8, 4096, 10),
        ]);
        let mut o = opts(1 << 20, 512);
        o.loops = 3;
        let p = Plan::build(&r, &o).unwrap();
        assert_eq!((p.ios.len(), p.planned_ios()), (2, 6));
        assert_eq!(
            p.recorded_count[IoKind::Read as usize],
            6,
            "counts cover the loops"
        );
        assert!(p.ios.windows(2).all(|w| w[0].sched_ns < w[1].sched_ns));
        assert_eq!(p.streams[0].ios.len(), 2);
        let r = reader(&[ev(10, 1, Op::Write, 0, 4096, 10)]);
        let e = Plan::build(&r, &opts(1 << 20, 512)).unwrap_err();
        assert!(e.to_string().contains("without --allow-writes"), "{e}");
        o.filter = Some(Expr::parse("bytes > 1M").unwrap());
        let e = Plan::build(&r, &o).unwrap_err();
        assert!(e.to_string().contains("nothing to replay"), "{e}");
    }
}
