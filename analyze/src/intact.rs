//! What the exports ([`crate::export`], [`crate::perfetto`]) share: the intact events of a
//! trace, segment by segment, and what an export wrote. A leaf, so that `export` (which
//! dispatches to `perfetto`) and `perfetto` both use it without importing each other.

use std::collections::HashMap;

use iodump_format::expr::Expr;
use iodump_format::segment::{col, Columns};
use iodump_format::{Damage, Event, EventBatch, Reader, SegmentDecoder};
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
        self.rows.clear();
        if filter.is_some_and(|f| f.leaves_out_segment(r, i)) {
            return None;
        }
        if let Err(d) = r.decode_segment_into(i, &mut self.batch, &mut self.dec) {
            return Some(Err(d));
        }
        let b = &self.batch;
        self.rows.extend(
            (0..b.len() as u32)
                .filter(|&k| filter.is_none_or(|f| f.eval_in(r, i, &b.get(k as usize), devs))),
        );
        Some(Ok(()))
    }
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

/// The devices of `r` with I/O that `filter` keeps (`devs`: its device names), sorted: an I/O
/// that one of them, a stacked device, sent down is that device's I/O once more (the report
/// and the Perfetto export count it on its own device only). Empty when the trace has no
/// stacked device; otherwise a pass over the device column (every column with a filter), in
/// parallel.
pub(crate) fn devices_with_rows(
    r: &Reader,
    filter: Option<&Expr>,
    devs: &HashMap<u32, String>,
) -> Vec<u32> {
    if r.tables().devices().all(|d| d.stacked_on.is_empty()) {
        return Vec::new();
    }
    let mut found: Vec<u32> = (0..r.segments().len())
        .into_par_iter()
        .map_init(SegmentRows::new, |x, i| {
            let mut seen = Vec::new();
            let read = match filter {
                Some(f) => x.read(r, i, Some(f), devs),
                None => {
                    let want = Columns::of(&[col::DEV]);
                    x.rows.clear();
                    let got = r.decode_segment_projected(i, want, &mut x.batch, &mut x.dec);
                    x.rows.extend(0..x.batch.len() as u32);
                    Some(got)
                }
            };
            if let Some(Ok(())) = read {
                for &k in &x.rows {
                    let d = x.batch.dev[k as usize];
                    if !seen.contains(&d) {
                        seen.push(d);
                    }
                }
            }
            seen
        })
        .reduce(Vec::new, |mut a, b| {
            a.extend(b);
            a
        });
    found.sort_unstable();
    found.dedup();
    found
}
