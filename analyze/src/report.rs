//! `iodump report`: the aggregation behind the HTML report and `iodump plot`, and the HTML
//! page itself.
//!
//! This module owns [`TraceReport`] — everything the plots show, binned in Rust in one
//! parallel pass over a trace's segments (rayon fold over decoded [`EventBatch`]es, one dense
//! accumulator per worker thread, merged at the end) — its JSON form (documented in
//! `schemas/report-data.md`), and [`render_html`], which embeds that JSON in one
//! self-contained page (`assets/report.html`, `assets/report.js`, `assets/report.css`)
//! whose JavaScript draws the plots on canvases. Nothing in the output grows with the
//! number of I/Os: time, latency and offset are binned, tables are cut to the top entries.

use std::collections::HashMap;
use std::path::Path;

use iodump_format::expr::Expr;
use iodump_format::inthash::IntMap;
use iodump_format::segment::{col, Columns};
use iodump_format::{Damage, EventBatch, Op, PathKind, Reader};
use rayon::prelude::*;
use serde_json::{json, Value};

use crate::intact::SegmentRows;
use crate::AnalyzeError;

/// Time bins of the IOPS and throughput series.
pub const TIME_BINS: usize = 1200;
/// Time bins of the latency heatmap (each covers 4 series bins).
pub const HEAT_TIME_BINS: usize = TIME_BINS / 4;
/// Time bins of the offset density grid (each covers 6 series bins).
pub const OFFSET_TIME_BINS: usize = TIME_BINS / 6;
/// Offset bins of the offset density grid (a power-of-two number of sectors each).
pub const OFFSET_BINS: usize = 128;
/// Sub-bins per power of two of the latency histogram (bins are at most 12.5 % wide).
pub const LATENCY_SUB_BINS: usize = 8;
/// Latency histogram bins: exact below 16 ns, then 8 per power of two up to 2^64 ns.
pub const LATENCY_BINS: usize = 496;
/// Histogram bins merged into one heatmap latency bin (2 per power of two).
pub const HEAT_LATENCY_MERGE: usize = 4;
/// Heatmap latency bins.
pub const HEAT_LATENCY_BINS: usize = LATENCY_BINS / HEAT_LATENCY_MERGE;
/// Op classes of the heatmap, histogram and offset grid.
pub const CLASSES: [&str; 3] = ["read", "write", "other"];
/// Devices shown in the offset plot (the busiest ones).
pub const OFFSET_DEVICES: usize = 8;
/// Rows of the top processes and top files.
pub const TOP_ROWS: usize = 20;

const OPS: usize = Op::ALL.len();
const HEAT_CELLS: usize = HEAT_TIME_BINS * HEAT_LATENCY_BINS;
const OFFSET_CELLS: usize = OFFSET_TIME_BINS * OFFSET_BINS;

/// The latency histogram bin of `ns`: exact below 16 ns, then [`LATENCY_SUB_BINS`] bins per
/// power of two (log-linear, as HDR histograms).
#[inline]
pub fn latency_bin(ns: u64) -> usize {
    if ns < 16 {
        return ns as usize;
    }
    let k = 63 - ns.leading_zeros() as usize; // ≥ 4
    let sub = ((ns >> (k - 3)) & 7) as usize;
    (k - 2) * LATENCY_SUB_BINS + sub
}

/// Lower edge (inclusive, ns) of latency histogram bin `i`; `latency_bin_lower_ns(i + 1)` is
/// its upper edge (exclusive). `i` may be [`LATENCY_BINS`] (the upper edge of the last bin,
/// saturated to `u64::MAX`).
pub fn latency_bin_lower_ns(i: usize) -> u64 {
    if i < 16 {
        return i as u64;
    }
    if i >= LATENCY_BINS {
        return u64::MAX;
    }
    let k = i / LATENCY_SUB_BINS + 2;
    let sub = (i % LATENCY_SUB_BINS) as u64;
    (8 + sub) << (k - 3)
}

/// Class of an op: 0 read, 1 write, 2 everything else.
#[inline]
fn class_of(op: u8) -> usize {
    match op {
        0 => 0,
        1 => 1,
        _ => 2,
    }
}

/// Per-key counters of the top tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyCounters {
    /// I/Os.
    pub ios: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Sum of latencies.
    pub latency_sum_ns: u64,
}

impl KeyCounters {
    #[inline]
    fn add(&mut self, o: &KeyCounters) {
        self.ios += o.ios;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.latency_sum_ns = self.latency_sum_ns.saturating_add(o.latency_sum_ns);
    }
    /// Mean latency, 0 without I/O.
    pub fn latency_mean_ns(&self) -> u64 {
        self.latency_sum_ns.checked_div(self.ios).unwrap_or(0)
    }
}

/// The time series and offset grid of one device (or of the devices beyond the
/// [`SERIES_DEVICES`] busiest, together).
#[derive(Clone, Debug)]
pub struct DeviceSeries {
    /// I/Os per op and time bin: `ios[op * TIME_BINS + bin]`.
    pub ios: Vec<u32>,
    /// Bytes per op and time bin.
    pub bytes: Vec<u64>,
    /// Offset density: `offset_cells[class * OFFSET_CELLS + time_bin * OFFSET_BINS + offset_bin]`.
    pub offset_cells: Vec<u32>,
    /// Sectors per offset bin are `1 << offset_shift`.
    pub offset_shift: u32,
}

impl DeviceSeries {
    fn new() -> Box<DeviceSeries> {
        Box::new(DeviceSeries {
            ios: vec![0; OPS * TIME_BINS],
            bytes: vec![0; OPS * TIME_BINS],
            offset_cells: vec![0; CLASSES.len() * OFFSET_CELLS],
            offset_shift: 0,
        })
    }

    /// Halves the offset resolution until `bin` fits.
    fn grow_offsets(&mut self, shift: u32) {
        while self.offset_shift < shift {
            for row in self.offset_cells.chunks_exact_mut(OFFSET_BINS) {
                for o in 0..OFFSET_BINS / 2 {
                    row[o] = row[2 * o].saturating_add(row[2 * o + 1]);
                }
                for v in &mut row[OFFSET_BINS / 2..] {
                    *v = 0;
                }
            }
            self.offset_shift += 1;
        }
    }

    /// Shift needed for `sector` to fall in the grid.
    fn shift_for(sector: u64) -> u32 {
        let bits = 64 - sector.leading_zeros();
        let grid_bits = OFFSET_BINS.trailing_zeros();
        bits.saturating_sub(grid_bits)
    }

    /// One I/O of op `op` (class `class`) in time bin `t`: its counts, and its offset when it
    /// carries data.
    #[inline]
    fn add(&mut self, op: usize, class: usize, t: usize, bytes: u64, sector: u64) {
        let k = op * TIME_BINS + t;
        self.ios[k] = self.ios[k].saturating_add(1);
        self.bytes[k] += bytes;
        if bytes > 0 {
            let need = DeviceSeries::shift_for(sector);
            if need > self.offset_shift {
                self.grow_offsets(need);
            }
            let o = ((sector >> self.offset_shift) as usize).min(OFFSET_BINS - 1);
            let c = class * OFFSET_CELLS + (t / 6) * OFFSET_BINS + o;
            self.offset_cells[c] = self.offset_cells[c].saturating_add(1);
        }
    }

    /// Adds the series `b` (if any) into `a` (taken as it is when `a` has none).
    fn merge_into(a: &mut Option<Box<DeviceSeries>>, b: Option<Box<DeviceSeries>>) {
        match (a, b) {
            (Some(a), Some(b)) => a.merge(*b),
            (a @ None, b) => *a = b,
            (Some(_), None) => {}
        }
    }

    fn merge(&mut self, mut o: DeviceSeries) {
        let shift = self.offset_shift.max(o.offset_shift);
        self.grow_offsets(shift);
        o.grow_offsets(shift);
        for (a, b) in self.ios.iter_mut().zip(&o.ios) {
            *a = a.saturating_add(*b);
        }
        for (a, b) in self.bytes.iter_mut().zip(&o.bytes) {
            *a += *b;
        }
        for (a, b) in self.offset_cells.iter_mut().zip(&o.offset_cells) {
            *a = a.saturating_add(*b);
        }
    }
}

/// Devices whose time series and offsets are kept one by one (the busiest, when a trace has
/// more: the others' are kept together, [`Aggregate::other`]; a device's own are about
/// 400 KB, per worker thread).
pub const SERIES_DEVICES: usize = 16;

/// Aggregates of one device.
#[derive(Clone, Debug)]
pub struct DeviceAgg {
    /// Device number (`DevT` value).
    pub dev: u32,
    /// Its time series and offsets; `None` for a device beyond the [`SERIES_DEVICES`]
    /// busiest, whose I/O is in [`Aggregate::other`]'s.
    pub series: Option<Box<DeviceSeries>>,
    /// Largest end sector (sector + size) seen.
    pub max_end_sector: u64,
    /// I/Os on the device.
    pub events: u64,
    /// Bytes on the device.
    pub total_bytes: u64,
    /// Sum of the latencies of its I/Os.
    pub latency_sum_ns: u64,
}

impl DeviceAgg {
    fn new(dev: u32, series: bool) -> DeviceAgg {
        DeviceAgg {
            dev,
            series: series.then(DeviceSeries::new),
            max_end_sector: 0,
            events: 0,
            total_bytes: 0,
            latency_sum_ns: 0,
        }
    }

    /// One I/O: its totals here, its series here or in `other`'s (allocated when first
    /// needed).
    #[inline]
    fn add(
        &mut self,
        other: &mut Option<Box<DeviceSeries>>,
        op: usize,
        class: usize,
        t: usize,
        bytes: u64,
        sector: u64,
    ) {
        self.events += 1;
        self.total_bytes += bytes;
        if bytes > 0 {
            let end = sector.saturating_add(bytes.div_ceil(512));
            self.max_end_sector = self.max_end_sector.max(end);
        }
        let s = match &mut self.series {
            Some(s) => s,
            None => other.get_or_insert_with(DeviceSeries::new),
        };
        s.add(op, class, t, bytes, sector);
    }

    fn merge(&mut self, o: DeviceAgg) {
        DeviceSeries::merge_into(&mut self.series, o.series);
        self.max_end_sector = self.max_end_sector.max(o.max_end_sector);
        self.events += o.events;
        self.total_bytes += o.total_bytes;
        self.latency_sum_ns = self.latency_sum_ns.saturating_add(o.latency_sum_ns);
    }
}

/// Everything one pass over the events gathers (one per worker thread, then merged).
#[derive(Clone, Debug)]
pub struct Aggregate {
    /// Devices, in order of first appearance (once aggregated: in device-table order).
    pub devices: Vec<DeviceAgg>,
    /// Index of each device in `devices`.
    index: IntMap<u32, usize>,
    /// The devices whose series are kept one by one, sorted; `None`: every device's.
    tracked: Option<std::sync::Arc<Vec<u32>>>,
    /// The time series of the devices beyond the [`SERIES_DEVICES`] busiest, together.
    pub other: Option<Box<DeviceSeries>>,
    /// Latency heatmap: `heat[class * HEAT_CELLS + time_bin * HEAT_LATENCY_BINS + lat_bin]`.
    pub heat: Vec<u32>,
    /// Latency histogram: `histogram[class * LATENCY_BINS + bin]`.
    pub histogram: Vec<u64>,
    /// Per op: I/Os, bytes, latency sum, latency max.
    pub per_op: [[u64; 4]; OPS],
    /// Per process id.
    pub(crate) procs: IntMap<u32, (KeyCounters, u32, usize)>,
    /// Per path id.
    pub(crate) files: IntMap<u32, KeyCounters>,
    /// I/Os a stacked device sent down, per (upper device << 32 | lower device).
    pub(crate) stack: IntMap<u64, KeyCounters>,
    /// I/Os with an error.
    pub errors: u64,
    /// I/Os counted: each I/O through stacked devices once, at the highest layer kept (an
    /// I/O a stacked device sent down while its own I/O is kept is counted on its device and
    /// in the stacked devices' table only, as the one-pass queries about the workload do).
    pub events: u64,
    /// Damaged segments.
    pub damaged: Vec<Damage>,
    /// Events announced by damaged segments.
    pub damaged_events: u64,
    /// Intact events a filter left out (`iodump report --filter`).
    pub filtered_out: u64,
}

impl Aggregate {
    fn new(tracked: Option<std::sync::Arc<Vec<u32>>>) -> Aggregate {
        Aggregate {
            devices: Vec::new(),
            index: IntMap::default(),
            tracked,
            other: None,
            heat: vec![0; CLASSES.len() * HEAT_CELLS],
            histogram: vec![0; CLASSES.len() * LATENCY_BINS],
            per_op: [[0; 4]; OPS],
            procs: IntMap::default(),
            files: IntMap::default(),
            stack: IntMap::default(),
            errors: 0,
            events: 0,
            damaged: Vec::new(),
            damaged_events: 0,
            filtered_out: 0,
        }
    }

    fn merge(mut self, o: Aggregate) -> Aggregate {
        for d in o.devices {
            match self.index.get(&d.dev) {
                Some(&i) => self.devices[i].merge(d),
                None => {
                    self.index.insert(d.dev, self.devices.len());
                    self.devices.push(d);
                }
            }
        }
        DeviceSeries::merge_into(&mut self.other, o.other);
        for (a, b) in self.heat.iter_mut().zip(&o.heat) {
            *a = a.saturating_add(*b);
        }
        for (a, b) in self.histogram.iter_mut().zip(&o.histogram) {
            *a += *b;
        }
        for (a, b) in self.per_op.iter_mut().zip(&o.per_op) {
            a[0] += b[0];
            a[1] += b[1];
            a[2] = a[2].saturating_add(b[2]);
            a[3] = a[3].max(b[3]);
        }
        for (k, (c, tid, seg)) in o.procs {
            self.procs
                .entry(k)
                .and_modify(|x| x.0.add(&c))
                .or_insert((c, tid, seg));
        }
        for (k, c) in o.files {
            self.files.entry(k).or_default().add(&c);
        }
        for (k, c) in o.stack {
            self.stack.entry(k).or_default().add(&c);
        }
        self.errors += o.errors;
        self.events += o.events;
        self.damaged.extend(o.damaged);
        self.damaged_events += o.damaged_events;
        self.filtered_out += o.filtered_out;
        self
    }

    /// Adds one decoded segment (`seg` is its index: where a process's name is looked up;
    /// `uppers`: the stacked devices whose own I/O is counted, sorted).
    fn add_batch(&mut self, seg: usize, b: &EventBatch, uppers: &[u32], t0_ns: u64, bin_ns: u64) {
        self.add_rows(seg, b, 0..b.len(), uppers, t0_ns, bin_ns);
    }

    /// As [`Aggregate::add_batch`], the rows `rows` of `b` only.
    fn add_rows(
        &mut self,
        seg: usize,
        b: &EventBatch,
        rows: impl ExactSizeIterator<Item = usize>,
        uppers: &[u32],
        t0_ns: u64,
        bin_ns: u64,
    ) {
        let mut dev_idx = usize::MAX;
        let mut last_dev = u32::MAX;
        for i in rows {
            let op = (b.op[i] as usize).min(OPS - 1);
            let bytes = b.bytes[i] as u64;
            let lat = b.latency_ns[i];
            let t =
                ((b.timestamp_ns[i].saturating_sub(t0_ns) / bin_ns) as usize).min(TIME_BINS - 1);
            let class = class_of(op as u8);

            let dev = b.dev[i];
            if dev != last_dev || dev_idx >= self.devices.len() {
                dev_idx = self.device_index(dev);
                last_dev = dev;
            }
            let d = &mut self.devices[dev_idx];
            d.add(&mut self.other, op, class, t, bytes, b.sector[i]);
            d.latency_sum_ns = d.latency_sum_ns.saturating_add(lat);
            let upper = if uppers.is_empty() {
                None
            } else {
                b.upper_dev.get(i)
            };
            let counted_above = upper.is_some_and(|u| uppers.binary_search(&u).is_ok());
            if !counted_above {
                self.events += 1;
                self.add_latency(op, class, t, bytes, lat, b.error[i] != 0);
            }
            let (read_bytes, write_bytes) = match op {
                0 => (bytes, 0),
                1 => (0, bytes),
                _ => (0, 0),
            };
            let io = KeyCounters {
                ios: 1,
                read_bytes,
                write_bytes,
                latency_sum_ns: lat,
            };
            if !counted_above {
                self.add_keys(seg, b.pid[i], b.tid[i], b.path_id[i], &io);
            }
            if let Some(up) = b.upper_dev.get(i) {
                self.stack
                    .entry((up as u64) << 32 | dev as u64)
                    .or_default()
                    .add(&io);
            }
        }
    }

    /// The index of device `dev` in [`Aggregate::devices`], added when first seen.
    fn device_index(&mut self, dev: u32) -> usize {
        if let Some(&i) = self.index.get(&dev) {
            return i;
        }
        let series = self
            .tracked
            .as_ref()
            .is_none_or(|t| t.binary_search(&dev).is_ok());
        self.index.insert(dev, self.devices.len());
        self.devices.push(DeviceAgg::new(dev, series));
        self.devices.len() - 1
    }

    /// One I/O into the latency histogram, the heatmap (time bin `t`) and the per-op totals.
    #[inline]
    fn add_latency(
        &mut self,
        op: usize,
        class: usize,
        t: usize,
        bytes: u64,
        lat_ns: u64,
        error: bool,
    ) {
        let lb = latency_bin(lat_ns);
        self.histogram[class * LATENCY_BINS + lb] += 1;
        let h = class * HEAT_CELLS + (t / 4) * HEAT_LATENCY_BINS + lb / HEAT_LATENCY_MERGE;
        self.heat[h] = self.heat[h].saturating_add(1);
        let po = &mut self.per_op[op];
        po[0] += 1;
        po[1] += bytes;
        po[2] = po[2].saturating_add(lat_ns);
        po[3] = po[3].max(lat_ns);
        if error {
            self.errors += 1;
        }
    }

    /// One I/O (`io`, counters of that single I/O) into the per-process and per-file tables;
    /// path id 0 (no file) is left out of the files.
    #[inline]
    fn add_keys(&mut self, seg: usize, pid: u32, tid: u32, path_id: u32, io: &KeyCounters) {
        self.procs
            .entry(pid)
            .or_insert_with(|| (KeyCounters::default(), tid, seg))
            .0
            .add(io);
        if path_id != 0 {
            self.files.entry(path_id).or_default().add(io);
        }
    }
}

/// The binned picture of one trace: what the report and the plots draw.
#[derive(Clone, Debug)]
pub struct TraceReport {
    /// Name shown (the file name).
    pub name: String,
    /// Size of the trace file.
    pub file_bytes: u64,
    /// Host, kernel, tool, command of the recording.
    pub header: iodump_format::Header,
    /// Smallest event timestamp (monotonic ns; time 0 of every plot).
    pub t0_ns: u64,
    /// Largest event timestamp minus the smallest.
    pub span_ns: u64,
    /// Width of one of the [`TIME_BINS`] time bins.
    pub bin_ns: u64,
    /// Device names by number.
    pub device_names: HashMap<u32, String>,
    /// The aggregates.
    pub agg: Aggregate,
    /// Loss records: start and end relative to `t0_ns` (ns, may be negative), count, reason,
    /// cpu.
    pub losses: Vec<(i64, i64, u64, &'static str, u16)>,
    /// Lost events (sum of the loss records).
    pub lost_events: u64,
    /// Top processes, sorted by I/Os.
    pub top_procs: Vec<TopProc>,
    /// Distinct processes that did I/O.
    pub process_count: usize,
    /// Top files (a file renamed while recording is one, under its latest name), sorted by
    /// I/Os.
    pub top_files: Vec<TopFile>,
    /// Distinct files (and labels) with I/O.
    pub file_count: usize,
    /// Damage found while opening plus damaged segments, by offset.
    pub damage: Vec<Damage>,
    /// The filter the report is of (`iodump report --filter`), as written.
    pub filter: Option<String>,
}

/// One row of the report's top processes.
#[derive(Clone, Debug)]
pub struct TopProc {
    /// Process id.
    pub pid: u32,
    /// Command name (of the thread the process was last seen on).
    pub comm: String,
    /// Its command line, or the comm when the trace does not know it.
    pub args: String,
    /// Its counters.
    pub counters: KeyCounters,
}

/// One row of the report's top files.
#[derive(Clone, Debug)]
pub struct TopFile {
    /// The file's latest name, or a label (`[journal]`).
    pub path: String,
    /// What the path entry names (`file`, `metadata`…).
    pub kind: &'static str,
    /// The device of the file system holding it (`major:minor` when the trace does not name
    /// it); empty for a path id the trace does not know.
    pub device: String,
    /// Distinct names the file had in the trace (1 for most).
    pub names: u32,
    /// Its earliest name other than the latest, when it had several.
    pub renamed_from: Option<String>,
    /// Its counters over all its names.
    pub counters: KeyCounters,
}

impl TopProc {
    /// The command line (or comm) and pid: `postgres: checkpointer [1510]`.
    pub fn label(&self) -> String {
        format!("{} [{}]", self.args, self.pid)
    }
}

impl TopFile {
    /// The path, with `(renamed from X)` when the file had other names; a label (one per
    /// device) with its device: `[journal] sda1`.
    pub fn label(&self) -> String {
        match &self.renamed_from {
            Some(from) => format!("{} (renamed from {from})", self.path),
            None => crate::files::named_with_device(
                self.path.clone(),
                Some(&self.device)
                    .filter(|d| !d.is_empty())
                    .map(String::as_str),
            ),
        }
    }
}

/// A report of the I/Os an expression keeps (`iodump report --filter`).
#[derive(Clone, Debug)]
pub struct ReportFilter {
    /// The expression.
    pub expr: Expr,
    /// As the user wrote it, for the page.
    pub text: String,
}

/// Smallest and largest event timestamps: from the footer index when every segment has
/// one, else from a first (parallel) decoding pass.
fn time_range(r: &Reader) -> Option<(u64, u64)> {
    let segs = r.segments();
    if !segs.is_empty() && segs.iter().all(|s| s.time_range_ns.is_some()) {
        let lo = segs
            .iter()
            .filter_map(|s| s.time_range_ns.map(|t| t.0))
            .min();
        let hi = segs
            .iter()
            .filter_map(|s| s.time_range_ns.map(|t| t.1))
            .max();
        return lo.zip(hi);
    }
    let parts = r.par_map_segments(|_, b| {
        let lo = b.timestamp_ns.iter().copied().min();
        let hi = b.timestamp_ns.iter().copied().max();
        lo.zip(hi)
    });
    parts
        .into_iter()
        .filter_map(|(_, p)| p.ok().flatten())
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// The devices whose series are kept one by one ([`Aggregate::tracked`]): `None` (every
/// device's) when the I/Os `filter` keeps are on at most [`SERIES_DEVICES`] devices, else
/// the busiest of them by I/Os (ties by number), sorted. A pass over the device column (and
/// the columns the filter reads): the trace's device table may not name every device.
fn busiest_devices(
    r: &Reader,
    filter: Option<&Expr>,
    devs: &HashMap<u32, String>,
) -> Option<std::sync::Arc<Vec<u32>>> {
    let add = |mut a: IntMap<u32, u64>, b: IntMap<u32, u64>| {
        for (d, n) in b {
            *a.entry(d).or_insert(0) += n;
        }
        a
    };
    let ios: IntMap<u32, u64> = (0..r.segments().len())
        .into_par_iter()
        .fold(
            || (SegmentRows::new(), IntMap::default()),
            |(mut x, mut ios), i| {
                let dev = Columns::of(&[col::DEV]);
                if let Some(Ok(())) = x.read_columns(r, i, filter, devs, dev) {
                    for &k in &x.rows {
                        *ios.entry(x.batch.dev[k as usize]).or_insert(0u64) += 1;
                    }
                }
                (x, ios)
            },
        )
        .map(|(_, ios)| ios)
        .reduce(IntMap::default, add);
    if ios.len() <= SERIES_DEVICES {
        return None;
    }
    let mut by_ios: Vec<(u64, u32)> = ios.into_iter().map(|(d, n)| (n, d)).collect();
    by_ios.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut busiest: Vec<u32> = by_ios[..SERIES_DEVICES].iter().map(|x| x.1).collect();
    busiest.sort_unstable();
    Some(std::sync::Arc::new(busiest))
}

/// Smallest and largest timestamps of the I/Os `f` keeps (a parallel pass; segments its
/// window leaves out are not decoded).
fn kept_time_range(r: &Reader, f: &Expr, devs: &HashMap<u32, String>) -> Option<(u64, u64)> {
    (0..r.segments().len())
        .into_par_iter()
        .fold(
            || (SegmentRows::new(), None::<(u64, u64)>),
            |(mut x, mut range), i| {
                let ts = Columns::of(&[col::TIMESTAMP_NS]);
                if let Some(Ok(())) = x.read_columns(r, i, Some(f), devs, ts) {
                    for &k in &x.rows {
                        let t = x.batch.timestamp_ns[k as usize];
                        range = Some(range.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))));
                    }
                }
                (x, range)
            },
        )
        .map(|(_, range)| range)
        .reduce(
            || None,
            |a, b| match (a, b) {
                (Some(a), Some(b)) => Some((a.0.min(b.0), a.1.max(b.1))),
                (a, b) => a.or(b),
            },
        )
}

/// Aggregates every intact event of `r` (one parallel pass over its segments).
pub fn aggregate(name: &str, r: &Reader) -> TraceReport {
    aggregate_with_progress(name, r, None, &|_| {})
}

/// As [`aggregate`], of the I/Os `filter` keeps (all without one), calling
/// `progress(events)` after each segment (from several threads). With a filter, a first
/// pass finds the time the kept I/Os span (the plots' axis), and the loss records are those
/// of that time.
pub fn aggregate_with_progress(
    name: &str,
    r: &Reader,
    filter: Option<&ReportFilter>,
    progress: &(dyn Fn(u64) + Sync),
) -> TraceReport {
    let devs = filter
        .map(|_| r.tables().device_names())
        .unwrap_or_default();
    let range = match filter {
        Some(f) => kept_time_range(r, &f.expr, &devs),
        None => time_range(r),
    };
    let (t0_ns, t1_ns) = range.unwrap_or((0, 0));
    let span_ns = t1_ns.saturating_sub(t0_ns);
    // Bins cover [t0, t0 + TIME_BINS * bin_ns), which holds t1.
    let bin_ns = (span_ns / TIME_BINS as u64 + 1).max(1);
    let uppers = crate::intact::stacked_devices_with_rows(r, filter.map(|f| &f.expr), &devs);
    let tracked = busiest_devices(r, filter.map(|f| &f.expr), &devs);
    let segs = r.segments();
    let agg = (0..segs.len())
        .into_par_iter()
        .fold(
            || (Aggregate::new(tracked.clone()), SegmentRows::new()),
            |(mut agg, mut x), i| {
                let read = match filter {
                    Some(f) => x.read(r, i, Some(&f.expr), &devs),
                    None => Some(x.decode(r, i)),
                };
                match read {
                    Some(Ok(())) => {
                        match filter {
                            Some(_) => {
                                let rows = x.rows.iter().map(|&k| k as usize);
                                agg.add_rows(i, &x.batch, rows, &uppers, t0_ns, bin_ns);
                                agg.filtered_out += (x.batch.len() - x.rows.len()) as u64;
                            }
                            None => agg.add_batch(i, &x.batch, &uppers, t0_ns, bin_ns),
                        }
                        progress(x.batch.len() as u64);
                    }
                    Some(Err(d)) => {
                        agg.damaged_events += segs[i].events as u64;
                        agg.damaged.push(d);
                    }
                    None => {
                        agg.filtered_out += segs[i].events as u64;
                        progress(segs[i].events as u64);
                    }
                }
                (agg, x)
            },
        )
        .map(|(a, _)| a)
        .reduce(|| Aggregate::new(tracked.clone()), Aggregate::merge);
    let mut rep = finish(name, r, agg, t0_ns, span_ns, bin_ns);
    if let Some(f) = filter {
        rep.filter = Some(f.text.clone());
        // The losses of the kept I/Os' time (a loss record says when, not which I/O).
        let t1_rel = span_ns as i64;
        rep.losses.retain(|l| l.1 >= 0 && l.0 <= t1_rel);
        rep.lost_events = rep.losses.iter().map(|l| l.2).sum();
    }
    rep
}

/// The steps after the pass: names, order and top tables from the trace's tables.
fn finish(
    name: &str,
    r: &Reader,
    mut agg: Aggregate,
    t0_ns: u64,
    span_ns: u64,
    bin_ns: u64,
) -> TraceReport {
    let device_names = device_names(r, &mut agg);
    let (top_procs, process_count) = top_procs(r, &agg);
    let (top_files, file_count) = top_files(r, &agg);
    let mut damage: Vec<Damage> = r.damage().to_vec();
    damage.extend(agg.damaged.iter().cloned());
    damage.sort_by_key(|d| d.offset);
    TraceReport {
        name: name.to_string(),
        file_bytes: r.file_bytes(),
        header: r.header().clone(),
        t0_ns,
        span_ns,
        bin_ns,
        device_names,
        lost_events: r.lost_events(),
        losses: losses(r, t0_ns),
        top_procs,
        process_count,
        top_files,
        file_count,
        damage,
        filter: None,
        agg,
    }
}

/// Device names by number (the trace's, else the number), and the devices of `agg` put in
/// table order, then the others by number.
fn device_names(r: &Reader, agg: &mut Aggregate) -> HashMap<u32, String> {
    let tables = r.tables();
    let mut names: HashMap<u32, String> = tables.device_names();
    for d in &agg.devices {
        names
            .entry(d.dev)
            .or_insert_with(|| iodump_format::DevT(d.dev).to_string());
    }
    let order: HashMap<u32, usize> = tables
        .devices()
        .enumerate()
        .map(|(i, d)| (d.dev.0, i))
        .collect();
    agg.devices
        .sort_by_key(|d| (order.get(&d.dev).copied().unwrap_or(usize::MAX), d.dev));
    agg.index = agg
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| (d.dev, i))
        .collect();
    names
}

/// The [`TOP_ROWS`] busiest processes (by I/Os, then pid), and how many did I/O.
fn top_procs(r: &Reader, agg: &Aggregate) -> (Vec<TopProc>, usize) {
    let mut procs: Vec<TopProc> = agg
        .procs
        .iter()
        .map(|(&pid, (c, tid, seg))| {
            let p = r.process_of(pid, *tid, *seg);
            let text = |b: Option<&[u8]>| {
                b.map(iodump_format::text::text_string)
                    .unwrap_or_else(|| "?".to_string())
            };
            TopProc {
                pid,
                comm: text(p.map(|p| p.comm.as_slice())),
                args: text(p.map(|p| p.args_or_comm())),
                counters: *c,
            }
        })
        .collect();
    procs.sort_by(|a, b| b.counters.ios.cmp(&a.counters.ios).then(a.pid.cmp(&b.pid)));
    let count = procs.len();
    procs.truncate(TOP_ROWS);
    (procs, count)
}

/// The [`TOP_ROWS`] busiest files (by I/Os, then path id), and how many had I/O. Path ids
/// name files by device and inode: the names of a renamed file are added together.
fn top_files(r: &Reader, agg: &Aggregate) -> (Vec<TopFile>, usize) {
    let tables = r.tables();
    let ids = crate::files::FileIdentities::new(
        tables
            .paths()
            .map(|p| (p.path_id, u64::from(p.dev.0), p.inode, p.generation)),
        |id| {
            tables
                .path(id)
                .map_or_else(String::new, |p| iodump_format::text::text_string(&p.path))
        },
    );
    let mut by_file: IntMap<u32, KeyCounters> = IntMap::default();
    for (&id, c) in &agg.files {
        by_file.entry(ids.key(id)).or_default().add(c);
    }
    let mut files: Vec<(u32, KeyCounters)> = by_file.into_iter().collect();
    files.sort_by(|a, b| b.1.ios.cmp(&a.1.ios).then(a.0.cmp(&b.0)));
    let count = files.len();
    files.truncate(TOP_ROWS);
    let top = files
        .into_iter()
        .map(|(id, counters)| {
            let (path, kind, device) = match tables.path(id) {
                Some(p) => (
                    iodump_format::text::text_string(&p.shown()),
                    p.kind.name(),
                    tables.device(p.dev).map_or_else(
                        || format!("{}:{}", p.dev.major(), p.dev.minor()),
                        |d| d.name.clone(),
                    ),
                ),
                None => (
                    format!("[path id {id}]"),
                    PathKind::Unknown.name(),
                    String::new(),
                ),
            };
            let renamed = ids.renamed(id);
            TopFile {
                path,
                kind,
                device,
                names: renamed.map_or(1, |r| r.names),
                renamed_from: renamed.map(|r| r.renamed_from.clone()),
                counters,
            }
        })
        .collect();
    (top, count)
}

/// The loss records, their times made relative to `t0_ns`.
fn losses(r: &Reader, t0_ns: u64) -> Vec<(i64, i64, u64, &'static str, u16)> {
    r.losses()
        .iter()
        .map(|l| {
            (
                (l.start_ns as i128 - t0_ns as i128) as i64,
                (l.end_ns as i128 - t0_ns as i128) as i64,
                l.count,
                l.reason.name(),
                l.cpu,
            )
        })
        .collect()
}

/// Latency quantile `q` (0..=1) estimated from a histogram: the upper edge of the bin
/// holding the nearest-rank sample, clamped to the exact maximum (at most one bin, 12.5 %,
/// above the exact quantile). `None` without events. Not the exact quantile of the samples
/// (`iodump analyze`'s, [`iodump_format::stats::quantile_linear`]): the report keeps no
/// samples.
pub fn histogram_quantile_ns(hist: &[u64], q: f64, max_ns: u64) -> Option<u64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut acc = 0;
    for (i, &c) in hist.iter().enumerate() {
        acc += c;
        if acc >= rank {
            let hi = latency_bin_lower_ns(i + 1).saturating_sub(1);
            return Some(hi.min(max_ns));
        }
    }
    Some(max_ns)
}

impl TraceReport {
    /// All-ops latency histogram.
    pub fn latency_histogram(&self) -> Vec<u64> {
        let mut h = vec![0u64; LATENCY_BINS];
        for c in 0..CLASSES.len() {
            for (i, v) in h.iter_mut().enumerate() {
                *v += self.agg.histogram[c * LATENCY_BINS + i];
            }
        }
        h
    }

    /// Largest latency of any op.
    pub fn latency_max_ns(&self) -> u64 {
        self.agg.per_op.iter().map(|p| p[3]).max().unwrap_or(0)
    }

    /// Wall-clock time of the first event (UTC ns since the epoch).
    pub fn start_utc_ns(&self) -> i64 {
        self.header.to_utc_ns(self.t0_ns)
    }

    /// The device name of `dev`.
    pub fn device_name(&self, dev: u32) -> String {
        self.device_names
            .get(&dev)
            .cloned()
            .unwrap_or_else(|| iodump_format::DevT(dev).to_string())
    }

    /// Devices of the offset plot: the busiest with data I/O, at most [`OFFSET_DEVICES`].
    /// (Of the devices whose series are kept one by one, [`SERIES_DEVICES`].)
    pub fn offset_devices(&self) -> Vec<(&DeviceAgg, &DeviceSeries)> {
        let mut v: Vec<(&DeviceAgg, &DeviceSeries)> = self
            .agg
            .devices
            .iter()
            .filter(|d| d.max_end_sector > 0)
            .filter_map(|d| Some((d, d.series.as_deref()?)))
            .collect();
        v.sort_by(|a, b| b.0.events.cmp(&a.0.events).then(a.0.dev.cmp(&b.0.dev)));
        v.truncate(OFFSET_DEVICES);
        v
    }

    /// The time series, named: each device's whose are kept one by one (in device-table
    /// order), then those of the others together (`N other devices`).
    pub fn series(&self) -> Vec<(String, &DeviceSeries)> {
        let mut v: Vec<(String, &DeviceSeries)> = self
            .agg
            .devices
            .iter()
            .filter_map(|d| Some((self.device_name(d.dev), d.series.as_deref()?)))
            .collect();
        if let Some(o) = self.agg.other.as_deref() {
            let n = self
                .agg
                .devices
                .iter()
                .filter(|d| d.series.is_none())
                .count();
            v.push((format!("{n} other devices"), o));
        }
        v
    }

    /// The JSON object of this trace (schemas/report-data.md), one section per step.
    pub fn to_json(&self) -> Value {
        let a = &self.agg;
        let total_bytes: u64 = a.per_op.iter().map(|p| p[1]).sum();
        json!({
            "name": self.name,
            "file_bytes": self.file_bytes,
            "header": self.header_json(),
            "start_utc_ns": self.start_utc_ns(),
            "first_timestamp_ns": self.t0_ns,
            "span_ns": self.span_ns,
            "events": a.events,
            "bytes": total_bytes,
            "errors": a.errors,
            "lost_events": self.lost_events,
            "damaged_events": a.damaged_events,
            "damage": self.damage.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            "latency": self.latency_json(),
            "devices": self.devices_json(),
            "stack": self.stack_json(),
            "ops": self.ops_json(),
            "time": {"bins": TIME_BINS, "bin_ns": self.bin_ns},
            "series": self.series_json(),
            "heatmap": self.heatmap_json(),
            "latency_histogram": self.histogram_json(),
            "offsets": self.offsets_json(),
            "top_processes": self.top_procs_json(),
            "process_count": self.process_count,
            "top_files": self.top_files_json(),
            "file_count": self.file_count,
            "losses": self.losses_json(),
            "trigger": self.trigger_json(),
            "filter": self.filter.as_ref().map(|f| json!({
                "expression": f,
                "left_out": a.filtered_out,
            })),
        })
    }

    /// `trigger`: the I/O that fired a flight recorder's snapshot (`iodump record --ring
    /// --trigger`), its time relative to the first I/O, and the trigger; `null` otherwise.
    fn trigger_json(&self) -> Value {
        use iodump_format::recording::{trigger_timestamp_ns, META_SNAPSHOT, META_TRIGGER_IO};
        let Some(ts) = trigger_timestamp_ns(&self.header) else {
            return Value::Null;
        };
        let meta = |k: &str| {
            self.header
                .metadata
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        json!({
            "at_ns": ts as i64 - self.t0_ns as i64,
            "io": meta(META_TRIGGER_IO),
            "why": meta(META_SNAPSHOT),
        })
    }

    /// `header`: host, kernel, tool, command and metadata of the recording.
    fn header_json(&self) -> Value {
        let h = &self.header;
        json!({
            "hostname": h.hostname,
            "kernel_release": h.kernel_release,
            "tool_version": h.tool_version,
            "command": h.command_argv,
            "metadata": h.metadata.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        })
    }

    /// `latency`: the exact mean and maximum, and quantiles estimated from the histogram
    /// ([`histogram_quantile_ns`]).
    fn latency_json(&self) -> Value {
        let a = &self.agg;
        let max_ns = self.latency_max_ns();
        let hist_all = self.latency_histogram();
        let q = |p: f64| histogram_quantile_ns(&hist_all, p, max_ns);
        let lat_sum: u64 = a
            .per_op
            .iter()
            .map(|p| p[2])
            .fold(0u64, |x, y| x.saturating_add(y));
        json!({
            "mean_ns": lat_sum.checked_div(a.events).unwrap_or(0),
            "p50_ns": q(0.5), "p90_ns": q(0.9), "p99_ns": q(0.99), "p999_ns": q(0.999),
            "max_ns": max_ns,
        })
    }

    /// `devices`: number, name, I/Os and bytes of each device.
    fn devices_json(&self) -> Vec<Value> {
        self.agg
            .devices
            .iter()
            .map(|d| {
                json!({
                    "dev": iodump_format::DevT(d.dev).to_string(),
                    "name": self.device_name(d.dev),
                    "events": d.events,
                    "bytes": d.total_bytes,
                })
            })
            .collect()
    }

    /// `stack`: per stacked device and device below it, the I/Os it sent down (lower I/Os
    /// naming an upper I/O on it) against its own I/Os; the largest flow first.
    fn stack_json(&self) -> Vec<Value> {
        let dev = |d: u32| self.agg.index.get(&d).map(|&i| &self.agg.devices[i]);
        let mut pairs: Vec<(&u64, &KeyCounters)> = self.agg.stack.iter().collect();
        pairs.sort_by_key(|(k, c)| (std::cmp::Reverse(c.ios), **k));
        pairs
            .into_iter()
            .map(|(&k, lower)| {
                let (up, lo) = ((k >> 32) as u32, k as u32);
                let (up_ios, up_bytes, up_lat) = dev(up).map_or((0, 0, 0), |d| {
                    (d.events, d.total_bytes, d.latency_sum_ns / d.events.max(1))
                });
                json!({
                    "upper": self.device_name(up),
                    "upper_dev": iodump_format::DevT(up).to_string(),
                    "lower": self.device_name(lo),
                    "lower_dev": iodump_format::DevT(lo).to_string(),
                    "upper_ios": up_ios,
                    "upper_bytes": up_bytes,
                    "upper_latency_mean_ns": up_lat,
                    "lower_ios": lower.ios,
                    "lower_bytes": lower.read_bytes + lower.write_bytes,
                    "lower_latency_mean_ns": lower.latency_mean_ns(),
                    "lower_ios_per_upper_io": (up_ios > 0).then(|| lower.ios as f64 / up_ios as f64),
                })
            })
            .collect()
    }

    /// `ops`: the totals of each op that occurred.
    fn ops_json(&self) -> Vec<Value> {
        let a = &self.agg;
        Op::ALL
            .iter()
            .filter(|o| a.per_op[o.code() as usize][0] > 0)
            .map(|o| {
                let p = a.per_op[o.code() as usize];
                json!({
                    "op": o.name(),
                    "events": p[0],
                    "bytes": p[1],
                    "latency_mean_ns": p[2].checked_div(p[0]).unwrap_or(0),
                    "latency_max_ns": p[3],
                })
            })
            .collect()
    }

    /// `series`: I/Os and bytes per time bin of each device and op that has any.
    fn series_json(&self) -> Vec<Value> {
        let mut series = Vec::new();
        for (name, d) in self.series() {
            for o in Op::ALL {
                let k = o.code() as usize * TIME_BINS;
                let ios = &d.ios[k..k + TIME_BINS];
                if ios.iter().all(|&x| x == 0) {
                    continue;
                }
                series.push(json!({
                    "device": name,
                    "op": o.name(),
                    "ios": ios,
                    "bytes": &d.bytes[k..k + TIME_BINS],
                }));
            }
        }
        series
    }

    /// `heatmap`: per class, time bin by latency bin, the latency rows kept between the first
    /// and last non-empty ones.
    fn heatmap_json(&self) -> Value {
        let heat = &self.agg.heat;
        let rows = heat.chunks_exact(HEAT_LATENCY_BINS);
        let (lo, hi) = occupied_bins(rows);
        let edges: Vec<u64> = (lo..=hi)
            .map(|j| latency_bin_lower_ns(j * HEAT_LATENCY_MERGE))
            .collect();
        let counts: Vec<Value> = (0..CLASSES.len())
            .map(|c| {
                let mut v = Vec::with_capacity(HEAT_TIME_BINS * (hi - lo));
                for t in 0..HEAT_TIME_BINS {
                    let base = c * HEAT_CELLS + t * HEAT_LATENCY_BINS;
                    v.extend_from_slice(&heat[base + lo..base + hi]);
                }
                json!(v)
            })
            .collect();
        json!({
            "time_bins": HEAT_TIME_BINS,
            "bin_ns": self.bin_ns * 4,
            "latency_edges_ns": edges,
            "classes": CLASSES,
            "counts": counts,
        })
    }

    /// `latency_histogram`: per class, trimmed to the bins the all-ops histogram occupies.
    fn histogram_json(&self) -> Value {
        let hist_all = self.latency_histogram();
        let (lo, hi) = occupied_bins(std::iter::once(hist_all.as_slice()));
        let edges: Vec<u64> = (lo..=hi).map(latency_bin_lower_ns).collect();
        let mut counts = serde_json::Map::new();
        for (c, name) in CLASSES.iter().enumerate() {
            let base = c * LATENCY_BINS;
            counts.insert(
                name.to_string(),
                json!(&self.agg.histogram[base + lo..base + hi]),
            );
        }
        json!({"edges_ns": edges, "counts": counts})
    }

    /// `offsets`: the offset density of the [`offset_devices`](Self::offset_devices), as
    /// `[time bin, offset bin, count]` triples of the non-empty cells per class.
    fn offsets_json(&self) -> Vec<Value> {
        self.offset_devices()
            .into_iter()
            .map(|(d, series)| {
                let mut cells = serde_json::Map::new();
                for (c, name) in CLASSES.iter().enumerate() {
                    let mut v: Vec<u64> = Vec::new();
                    let g = &series.offset_cells[c * OFFSET_CELLS..(c + 1) * OFFSET_CELLS];
                    for (i, &n) in g.iter().enumerate() {
                        if n > 0 {
                            v.push((i / OFFSET_BINS) as u64);
                            v.push((i % OFFSET_BINS) as u64);
                            v.push(n as u64);
                        }
                    }
                    cells.insert(name.to_string(), json!(v));
                }
                json!({
                    "device": self.device_name(d.dev),
                    "events": d.events,
                    "time_bins": OFFSET_TIME_BINS,
                    "bin_ns": self.bin_ns * 6,
                    "offset_bins": OFFSET_BINS,
                    "sectors_per_bin": 1u64 << series.offset_shift,
                    "max_end_sector": d.max_end_sector,
                    "cells": cells,
                })
            })
            .collect()
    }

    /// `top_processes`.
    fn top_procs_json(&self) -> Vec<Value> {
        self.top_procs
            .iter()
            .map(|p| {
                let c = &p.counters;
                json!({
                    "pid": p.pid, "comm": p.comm, "ios": c.ios, "read_bytes": c.read_bytes,
                    "write_bytes": c.write_bytes, "latency_mean_ns": c.latency_mean_ns(),
                    "args": p.args,
                })
            })
            .collect()
    }

    /// `top_files`.
    fn top_files_json(&self) -> Vec<Value> {
        self.top_files
            .iter()
            .map(|f| {
                let c = &f.counters;
                json!({
                    "path": f.path, "kind": f.kind, "device": f.device, "ios": c.ios, "read_bytes": c.read_bytes,
                    "write_bytes": c.write_bytes, "latency_mean_ns": c.latency_mean_ns(),
                    "names": f.names, "renamed_from": f.renamed_from,
                })
            })
            .collect()
    }

    /// `losses`.
    fn losses_json(&self) -> Vec<Value> {
        self.losses
            .iter()
            .map(|(s, e, n, reason, cpu)| {
                json!({"start_ns": s, "end_ns": e, "count": n, "reason": reason, "cpu": cpu})
            })
            .collect()
    }
}

/// The bins `lo..hi` that hold every non-zero count of `rows` (all of one width): from the
/// first non-empty column of any row to the last; `(0, 0)` when every count is zero.
fn occupied_bins<'a, T: Copy + Default + PartialEq + 'a>(
    rows: impl Iterator<Item = &'a [T]>,
) -> (usize, usize) {
    let zero = T::default();
    let (mut lo, mut hi) = (usize::MAX, 0);
    for row in rows {
        if let Some(f) = row.iter().position(|&x| x != zero) {
            lo = lo.min(f);
        }
        if let Some(l) = row.iter().rposition(|&x| x != zero) {
            hi = hi.max(l + 1);
        }
    }
    if lo >= hi {
        (0, 0)
    } else {
        (lo, hi)
    }
}

const TEMPLATE: &str = include_str!("../assets/report.html");
const SCRIPT: &str = include_str!("../assets/report.js");
const STYLE: &str = include_str!("../assets/report.css");

/// The whole report data object: `{"schema": "iodump-report/1", "generator", "traces": [...]}`.
pub fn report_json(reports: &[TraceReport]) -> Value {
    json!({
        "schema": "iodump-report/1",
        "generator": concat!("iodump ", env!("CARGO_PKG_VERSION")),
        "traces": reports.iter().map(|r| r.to_json()).collect::<Vec<_>>(),
    })
}

/// The self-contained HTML page: template, style, script, and the data as JSON (with `<`
/// escaped so no string in it can close the script element).
pub fn render_html(reports: &[TraceReport]) -> String {
    let data = report_json(reports).to_string().replace('<', "\\u003c");
    let title = reports
        .iter()
        .map(|r| r.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let title = title
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let script = SCRIPT.replace("</script", "<\\/script");
    fill(
        TEMPLATE,
        &[
            ("/*IODUMP_STYLE*/", STYLE),
            ("IODUMP_TITLE", &title),
            ("IODUMP_DATA", &data),
            ("/*IODUMP_SCRIPT*/", &script),
        ],
    )
}

/// Replaces each placeholder of `template` with its value; the values are not scanned again
/// (a file name or path in the data cannot inject a placeholder).
pub(crate) fn fill(template: &str, subs: &[(&str, &str)]) -> String {
    let mut out =
        String::with_capacity(template.len() + subs.iter().map(|s| s.1.len()).sum::<usize>());
    let mut rest = template;
    loop {
        let next = subs
            .iter()
            .filter_map(|(k, v)| rest.find(k).map(|at| (at, *k, *v)))
            .min_by_key(|x| x.0);
        match next {
            Some((at, k, v)) => {
                out.push_str(&rest[..at]);
                out.push_str(v);
                rest = &rest[at + k.len()..];
            }
            None => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// What [`write_report`] did.
#[derive(Clone, Debug, Default)]
pub struct ReportSummary {
    /// Events aggregated over all traces.
    pub events: u64,
    /// Bytes of HTML written.
    pub html_bytes: u64,
    /// Damage per trace (trace name, damage).
    pub damage: Vec<(String, Damage)>,
}

/// Opens each trace, aggregates it and writes the HTML report to `out` (an
/// [`OutputFile`](iodump_output::OutputFile): a file already there is replaced only once the
/// report is complete).
pub fn write_report(
    inputs: &[(String, &Reader)],
    out: &Path,
    filter: Option<&ReportFilter>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<ReportSummary, AnalyzeError> {
    // Before the work: a refused or impossible output fails at once.
    let file = iodump_output::OutputFile::create(out)?;
    let reports: Vec<TraceReport> = inputs
        .iter()
        .map(|(name, r)| aggregate_with_progress(name, r, filter, progress))
        .collect();
    let events: u64 = reports.iter().map(|r| r.agg.events).sum();
    if events == 0 {
        if let Some(r) = reports.iter().find(|r| !r.damage.is_empty()) {
            return Err(AnalyzeError::NothingReadable {
                trace: r.name.clone(),
                damage: r.damage[0].to_string(),
            });
        }
    }
    let html = render_html(&reports);
    write_page(file, out, &html)?;
    Ok(ReportSummary {
        events,
        html_bytes: html.len() as u64,
        damage: reports
            .iter()
            .flat_map(|r| r.damage.iter().map(|d| (r.name.clone(), d.clone())))
            .collect(),
    })
}

/// Writes a rendered page into `file` (created for `out`) and gives it its name.
pub(crate) fn write_page(
    mut file: iodump_output::OutputFile,
    out: &std::path::Path,
    html: &str,
) -> Result<(), AnalyzeError> {
    std::io::Write::write_all(&mut file, html.as_bytes()).map_err(|source| {
        AnalyzeError::Write {
            what: out.display().to_string(),
            source,
        }
    })?;
    file.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_bins_are_monotonic_and_cover_their_values() {
        let mut last = 0;
        for ns in [
            0u64,
            1,
            7,
            15,
            16,
            17,
            31,
            32,
            1000,
            1023,
            1024,
            123_456_789,
            u64::MAX / 3,
            u64::MAX,
        ] {
            let b = latency_bin(ns);
            assert!(b < LATENCY_BINS, "{ns} -> {b}");
            assert!(b >= last);
            last = b;
            assert!(latency_bin_lower_ns(b) <= ns, "{ns}: bin {b}");
            assert!(b + 1 == LATENCY_BINS || latency_bin_lower_ns(b + 1) > ns);
        }
        for i in 0..LATENCY_BINS {
            assert_eq!(latency_bin(latency_bin_lower_ns(i)), i);
        }
    }

    #[test]
    fn offset_grid_rebins_without_losing_counts() {
        let mut d = DeviceSeries::new();
        d.offset_cells[5] = 3;
        d.offset_cells[OFFSET_BINS - 1] = 2;
        d.grow_offsets(2);
        assert_eq!(d.offset_cells.iter().map(|&x| x as u64).sum::<u64>(), 5);
        assert_eq!(d.offset_cells[1], 3);
        assert_eq!(d.offset_cells[(OFFSET_BINS - 1) / 4], 2);
        assert_eq!(DeviceSeries::shift_for(OFFSET_BINS as u64 - 1), 0);
        assert_eq!(DeviceSeries::shift_for(OFFSET_BINS as u64), 1);
    }

    #[test]
    fn occupied_bins_span_every_row() {
        let rows: [&[u32]; 3] = [&[0, 0, 3, 0, 0], &[0, 1, 0, 0, 0], &[0, 0, 0, 2, 0]];
        assert_eq!(occupied_bins(rows.into_iter()), (1, 4));
        assert_eq!(occupied_bins(std::iter::once(&[5u64, 0, 0][..])), (0, 1));
        assert_eq!(occupied_bins(std::iter::once(&[0u64, 0, 9][..])), (2, 3));
        assert_eq!(occupied_bins(std::iter::once(&[0u64; 4][..])), (0, 0));
        assert_eq!(occupied_bins(std::iter::empty::<&[u64]>()), (0, 0));
    }

    #[test]
    fn one_io_lands_in_every_table() {
        let mut a = Aggregate::new(None);
        let io = |lat_ns| KeyCounters {
            ios: 1,
            read_bytes: 4096,
            write_bytes: 0,
            latency_sum_ns: lat_ns,
        };
        a.add_keys(3, 10, 11, 7, &io(100));
        a.add_keys(5, 10, 12, 0, &io(300));
        assert_eq!(
            a.procs[&10].0,
            KeyCounters {
                ios: 2,
                read_bytes: 8192,
                write_bytes: 0,
                latency_sum_ns: 400
            }
        );
        // The first segment and thread the process was seen on are kept.
        assert_eq!((a.procs[&10].1, a.procs[&10].2), (11, 3));
        assert_eq!(a.files.len(), 1, "path id 0 is no file");
        assert_eq!(a.files[&7].ios, 1);

        a.add_latency(1, 1, TIME_BINS - 1, 512, 2_000, true);
        assert_eq!(a.per_op[1], [1, 512, 2_000, 2_000]);
        assert_eq!(a.errors, 1);
        assert_eq!(a.histogram[LATENCY_BINS + latency_bin(2_000)], 1);
        let h = HEAT_CELLS
            + (HEAT_TIME_BINS - 1) * HEAT_LATENCY_BINS
            + latency_bin(2_000) / HEAT_LATENCY_MERGE;
        assert_eq!(a.heat[h], 1);

        let mut other = None;
        let mut d = DeviceAgg::new(1, true);
        d.add(&mut other, 0, 0, 6, 1024, 100);
        d.add(&mut other, 2, 2, 6, 0, 5);
        assert_eq!((d.events, d.total_bytes, d.max_end_sector), (2, 1024, 102));
        assert!(other.is_none());
        // A device beyond the busiest: its totals on its own, its series in the others'.
        let mut beyond = DeviceAgg::new(2, false);
        beyond.add(&mut other, 1, 1, 7, 512, 8);
        assert_eq!((beyond.events, beyond.total_bytes), (1, 512));
        assert!(beyond.series.is_none());
        assert_eq!(other.as_ref().unwrap().ios[TIME_BINS + 7], 1);
        let d = d.series.unwrap();
        assert_eq!(
            (d.ios[6], d.bytes[6], d.ios[2 * TIME_BINS + 6]),
            (1, 1024, 1)
        );
        assert_eq!(
            d.offset_cells[OFFSET_BINS + 100],
            1,
            "time bin 6 is offset time bin 1"
        );
        assert_eq!(
            d.offset_cells.iter().sum::<u32>(),
            1,
            "no offset without data"
        );
    }

    #[test]
    fn devices_beyond_the_busiest_share_one_series() {
        use iodump_format::{DevT, EndInfo, Event, Header, Writer, WriterOptions};
        // 40 devices (not in the device table): device k has k + 1 I/Os.
        let path =
            std::env::temp_dir().join(format!("iodump-report-devices-{}.iod", std::process::id()));
        let mut w = Writer::new(
            std::fs::File::create(&path).unwrap(),
            &Header::default(),
            WriterOptions::default(),
        )
        .unwrap();
        let mut ts = 1_000u64;
        for k in 0..40u32 {
            for i in 0..=k as u64 {
                ts += 1_000;
                w.push(&Event {
                    timestamp_ns: ts,
                    dev: DevT::new(8, k),
                    sector: i * 8,
                    bytes: 4096,
                    latency_ns: 100,
                    ..Event::default()
                })
                .unwrap();
            }
        }
        w.finish(EndInfo::default()).unwrap();
        let r = Reader::open(&path).unwrap();
        let rep = aggregate("t.iod", &r);
        let _ = std::fs::remove_file(&path);
        // Every device's totals; series of the 16 busiest (devices 24 to 39) one by one,
        // and of the 24 others (300 I/Os) together.
        assert_eq!(rep.agg.devices.len(), 40);
        assert!(rep
            .agg
            .devices
            .iter()
            .all(|d| d.events == d.dev as u64 % (1 << 20) + 1));
        let kept: Vec<u32> = rep
            .agg
            .devices
            .iter()
            .filter(|d| d.series.is_some())
            .map(|d| d.dev % (1 << 20))
            .collect();
        assert_eq!(kept, (24..40).collect::<Vec<u32>>());
        let series = rep.series();
        assert_eq!(series.len(), 17);
        let (name, other) = series.last().unwrap();
        assert_eq!(name, "24 other devices");
        assert_eq!(other.ios.iter().map(|&x| u64::from(x)).sum::<u64>(), 300);
        let all: u64 = series
            .iter()
            .map(|(_, s)| s.ios.iter().map(|&x| u64::from(x)).sum::<u64>())
            .sum();
        assert_eq!(all, rep.agg.events);
        let busiest: Vec<u32> = rep
            .offset_devices()
            .iter()
            .map(|d| d.0.dev % (1 << 20))
            .collect();
        assert_eq!(busiest, (32..40).rev().collect::<Vec<u32>>());
    }

    #[test]
    fn quantiles_from_a_histogram() {
        let mut h = vec![0u64; LATENCY_BINS];
        for ns in 1..=1000u64 {
            h[latency_bin(ns * 1000)] += 1;
        }
        let p50 = histogram_quantile_ns(&h, 0.5, 1_000_000).unwrap();
        assert!((500_000..=570_000).contains(&p50), "{p50}");
        assert_eq!(histogram_quantile_ns(&h, 1.0, 1_000_000), Some(1_000_000));
        assert_eq!(histogram_quantile_ns(&[0; 4], 0.5, 0), None);
    }
}
