//! What the exports ([`crate::export`], [`crate::perfetto`]) share: the intact events of a
//! trace, segment by segment, and what an export wrote. A leaf, so that `export` (which
//! dispatches to `perfetto`) and `perfetto` both use it without importing each other.

use std::collections::HashMap;

use iodump_format::expr::Expr;
use iodump_format::segment::{col, Columns};
use iodump_format::{Damage, DevT, Event, EventBatch, Reader, SegmentDecoder};
use rayon::prelude::*;

/// What an export wrote.
#[derive(Clone, Debug, Default)]
pub struct ExportSummary {
    /// Events written.
    pub events: u64,
    /// Events left out (fio iolog: operations fio cannot replay, e.g. zone management).
    pub skipped: u64,
    /// Events left out as the I/O of a stacked device that is in the export (fio iolog:
    /// each I/O is replayed once, on the highest layer).
    pub lower: u64,
    /// Damaged segments that were skipped.
    pub damaged: Vec<Damage>,
}

/// A segment read for a filter: its events and the rows the filter keeps; one per thread,
/// its buffers reused.
pub(crate) struct SegmentRows {
    pub batch: EventBatch,
    pub dec: SegmentDecoder,
    /// The rows of `batch` the filter keeps (all of them without one).
    pub rows: Vec<u32>,
}

impl SegmentRows {
    pub fn new() -> SegmentRows {
        SegmentRows {
            batch: EventBatch::default(),
            dec: SegmentDecoder::new(),
            rows: Vec::new(),
        }
    }

    /// Decodes segment `i` of `r`, listing no rows (for a reader that takes them all).
    pub fn decode(&mut self, r: &Reader, i: usize) -> Result<(), Damage> {
        self.rows.clear();
        r.decode_segment_into(i, &mut self.batch, &mut self.dec)
    }

    /// Decodes segment `i` of `r` and lists the rows `filter` keeps (`devs`: the trace's
    /// device names, for a filter naming devices). `None`: the filter's window of time
    /// leaves the segment out ([`Expr::leaves_out_segment`]), which is not decoded;
    /// `Some(Err)`: it is damaged.
    pub fn read(
        &mut self,
        r: &Reader,
        i: usize,
        filter: Option<&Expr>,
        devs: &HashMap<u32, String>,
    ) -> Option<Result<(), Damage>> {
        self.read_columns(r, i, filter, devs, Columns::ALL)
    }

    /// [`SegmentRows::read`] decoding only the columns `want` and those the filter reads
    /// ([`Expr::columns`]): `batch`'s other columns are empty.
    pub fn read_columns(
        &mut self,
        r: &Reader,
        i: usize,
        filter: Option<&Expr>,
        devs: &HashMap<u32, String>,
        want: Columns,
    ) -> Option<Result<(), Damage>> {
        let (b, dec, rows) = (&mut self.batch, &mut self.dec, &mut self.rows);
        read_kept(r, i, filter, devs, want, b, dec, rows)
    }
}

/// Decodes the columns `want` of segment `i` of `r`, and those `filter` reads
/// ([`Expr::columns`]), into `b`, and puts the rows the filter keeps (all without one) in
/// `keep` (`devs`: the trace's device names). `None`: the filter's window of time leaves the
/// segment out ([`Expr::leaves_out_segment`]), which is not decoded (`b` and `keep` are then
/// empty); `Some(Err)`: it is damaged.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_kept(
    r: &Reader,
    i: usize,
    filter: Option<&Expr>,
    devs: &HashMap<u32, String>,
    want: Columns,
    b: &mut EventBatch,
    dec: &mut SegmentDecoder,
    keep: &mut Vec<u32>,
) -> Option<Result<(), Damage>> {
    keep.clear();
    if filter.is_some_and(|f| f.leaves_out_segment(r, i)) {
        b.clear();
        return None;
    }
    let want = filter.map_or(want, |f| want.union(f.columns()));
    if let Err(d) = r.decode_segment_projected(i, want, b, dec) {
        return Some(Err(d));
    }
    match filter {
        None => keep.extend(0..b.len() as u32),
        Some(f) => f.select_in(r, i, b, devs, keep),
    }
    Some(Ok(()))
}

/// Calls `f` with each intact segment's events in file order and the rows of it `filter`
/// keeps (all of them without one; damaged segments are added to `damaged`), until `f`
/// fails. A segment the filter's time window leaves out ([`Expr::leaves_out_segment`]) is
/// not decoded.
pub(crate) fn each_intact_batch(
    r: &Reader,
    damaged: &mut Vec<Damage>,
    filter: Option<&Expr>,
    mut f: impl FnMut(usize, &EventBatch, &[u32]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let devs = filter
        .map(|_| r.tables().device_names())
        .unwrap_or_default();
    let mut x = SegmentRows::new();
    for i in 0..r.segments().len() {
        match x.read(r, i, filter, &devs) {
            Some(Ok(())) => f(i, &x.batch, &x.rows)?,
            Some(Err(d)) => damaged.push(d),
            None => {}
        }
    }
    Ok(())
}

/// One I/O of [`each_intact_in_start_order`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Io {
    pub ts: u64,
    /// The segment it was read from (for the process tables).
    pub segment: u32,
    pub e: Event,
}

/// As [`each_intact_batch`], one event at a time in start order. Segments are sorted inside
/// but may overlap, so the events of a segment wait until no later segment can
/// start before them (the footer's time ranges say where each starts; without a footer, each
/// segment's timestamps are read first). Memory is bounded by that overlap, not by the
/// trace's length.
pub(crate) fn each_intact_in_start_order(
    r: &Reader,
    damaged: &mut Vec<Damage>,
    filter: Option<&Expr>,
    mut f: impl FnMut(&Io) -> std::io::Result<()>,
) -> std::io::Result<()> {
    // The earliest start of any later segment: where the footer does not say, its timestamps
    // are read (one column; a damaged segment starts nothing).
    let segs = r.segments();
    let mut later_start = vec![u64::MAX; segs.len() + 1];
    let mut min = u64::MAX;
    let (mut batch, mut dec) = (EventBatch::default(), SegmentDecoder::new());
    for i in (0..segs.len()).rev() {
        later_start[i] = min;
        let start = match segs[i].time_range_ns {
            Some((lo, _)) => lo,
            None => match r.decode_segment_projected(
                i,
                Columns::of(&[col::TIMESTAMP_NS]),
                &mut batch,
                &mut dec,
            ) {
                Ok(()) => batch.timestamp_ns.iter().copied().min().unwrap_or(u64::MAX),
                Err(_) => u64::MAX,
            },
        };
        min = min.min(start);
    }
    // The events read and not yet given, in start order (then arrival).
    let mut pending: Vec<Io> = Vec::new();
    each_intact_batch(r, damaged, filter, |i, b, rows| {
        let sorted = pending.len();
        pending.extend(rows.iter().map(|&row| {
            let e = b.get(row as usize);
            Io {
                ts: e.timestamp_ns,
                segment: i as u32,
                e,
            }
        }));
        if sorted > 0 || !pending.is_sorted_by_key(|io| io.ts) {
            // Stable, and linear on the two sorted runs this usually is.
            pending.sort_by_key(|io| io.ts);
        }
        // What no later segment can start before.
        let ready = pending.partition_point(|io| io.ts < later_start[i]);
        for io in pending.drain(..ready) {
            f(&io)?;
        }
        Ok(())
    })?;
    pending.iter().try_for_each(f)
}

/// The stacked devices of `stacked` (sorted) that have I/O a selection keeps, sorted: each of
/// `units` units is handed to `look(state, unit, missing, found)`, which pushes to `found`
/// the devices of `missing` (those not found yet, sorted) with a kept I/O in that unit. In
/// parallel; once every device is found the remaining units are not looked at.
pub(crate) fn stacked_with_rows<S>(
    units: usize,
    stacked: &[u32],
    init: impl Fn() -> S + Sync + Send,
    look: impl Fn(&mut S, usize, &[u32], &mut Vec<u32>) + Sync + Send,
) -> Vec<u32> {
    if stacked.is_empty() {
        return Vec::new();
    }
    let found = std::sync::Mutex::new(Vec::<u32>::new());
    let all = std::sync::atomic::AtomicBool::new(false);
    (0..units).into_par_iter().for_each_init(
        || (init(), Vec::new(), Vec::new()),
        |(state, missing, seen), i| {
            if all.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            missing.clear();
            {
                let f = found.lock().unwrap_or_else(|e| e.into_inner());
                missing.extend(stacked.iter().filter(|d| !f.contains(d)));
            }
            seen.clear();
            look(state, i, missing, seen);
            if seen.is_empty() {
                return;
            }
            let mut f = found.lock().unwrap_or_else(|e| e.into_inner());
            for d in seen.iter() {
                if !f.contains(d) {
                    f.push(*d);
                }
            }
            if f.len() == stacked.len() {
                all.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        },
    );
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    found.sort_unstable();
    found
}

/// [`stacked_with_rows`] of a trace: its stacked devices (device-table entries stacked on
/// others) with I/O that `filter` keeps (`devs`: its device names), sorted. An I/O one of
/// them sent down is that device's I/O once more (the report and the Perfetto export count
/// it on its own device only). A device the filter's device comparisons rule out is not
/// sought ([`Expr::may_keep_device`]). Each segment's device column is read, and the columns
/// the filter reads ([`Expr::columns`]), which is evaluated on them a column at a time
/// ([`Expr::select_in`]). Empty when the trace has no stacked device.
pub(crate) fn stacked_devices_with_rows(
    r: &Reader,
    filter: Option<&Expr>,
    devs: &HashMap<u32, String>,
) -> Vec<u32> {
    let mut stacked: Vec<u32> = r
        .tables()
        .devices()
        .filter(|d| !d.stacked_on.is_empty())
        .map(|d| d.dev.0)
        .collect();
    stacked.sort_unstable();
    stacked.dedup();
    // Those the filter's device comparisons rule out (`-d` of a disk below) have none.
    if let Some(f) = filter {
        stacked.retain(|&d| f.may_keep_device(DevT(d), devs.get(&d).map_or("?", String::as_str)));
    }
    let init = || {
        (
            EventBatch::default(),
            SegmentDecoder::new(),
            Vec::<u32>::new(),
        )
    };
    stacked_with_rows(
        r.segments().len(),
        &stacked,
        init,
        |(b, dec, rows), i, missing, found| {
            // The device column, and the columns the filter reads: the rows it keeps are
            // found a column at a time (as the pass that follows finds them).
            let dev = Columns::of(&[col::DEV]);
            if !matches!(
                read_kept(r, i, filter, devs, dev, b, dec, rows),
                Some(Ok(()))
            ) {
                return;
            }
            for &k in rows.iter() {
                let d = b.dev[k as usize];
                if missing.binary_search(&d).is_ok() && !found.contains(&d) {
                    found.push(d);
                }
            }
        },
    )
}
