//! Queries answered straight from `.iod` traces and `iodump convert` Parquet datasets (read
//! through `crate::onepass_source`) without building the polars `io` table: the same results as
//! [`crate::query`] (same columns, types and order) at a fraction of the time and memory. Used
//! by `iodump analyze` for every query but `--sql`, unless `--engine polars`.
//!
//! Two drivers: `pass` folds the units of each input in parallel into one accumulator per
//! worker (for group-by queries: summary, top files and processes, latency, timeline), and
//! `ordered_pass` decodes segments in parallel a window at a time and hands their rows to a
//! sequential consumer in file order (for queries that follow each device or file in time:
//! seek distances and sequential write runs; see `Reorder`). Percentiles are exact: the
//! samples are kept in `Samples`, 4 bytes each while they fit in 32 bits.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use iodump_format::expr::Expr;
use iodump_format::inthash::IntMap;
use iodump_format::segment::{col, Columns};
use iodump_format::stats::{quantile_linear, QuantileRank};
use iodump_format::summary::rfc3339_utc;
use iodump_format::{Damage, EventBatch, Header, Op, SegmentDecoder};
use polars::prelude::*;
use rayon::prelude::*;

use crate::grouping::{DenseMap, DenseSlots, Groups};
use crate::input::InputPath;
use crate::onepass_source::Source;
use crate::query::{rate_per_s, LatencyBy, RankBy};
use crate::AnalyzeError;

fn perr(e: PolarsError) -> AnalyzeError {
    AnalyzeError::Polars { source: e }
}

/// Samples per block of [`Samples`]: blocks fill up to this and are never copied to grow.
const BLOCK: usize = 8192;

/// Nanosecond samples (latencies, seek distances) kept for exact percentiles: 4 bytes each
/// while a value fits in 32 bits (8 bytes otherwise), in blocks, so that growing never
/// copies and never leaves a doubled capacity behind.
#[derive(Default)]
struct Samples {
    narrow: Vec<Vec<u32>>,
    wide: Vec<u64>,
    len: usize,
    max: Option<u64>,
}

impl Samples {
    #[inline]
    fn push(&mut self, v: u64) {
        self.len += 1;
        self.max = Some(self.max.map_or(v, |m| m.max(v)));
        match u32::try_from(v) {
            Ok(x) => match self.narrow.last_mut() {
                Some(b) if b.len() < BLOCK => b.push(x),
                _ => {
                    // The first block grows as usual; later ones are allocated whole.
                    let mut b = Vec::with_capacity(if self.narrow.is_empty() { 4 } else { BLOCK });
                    b.push(x);
                    self.narrow.push(b);
                }
            },
            Err(_) => self.wide.push(v),
        }
    }

    /// Adds `vs` (as [`Samples::push`] each would).
    fn extend(&mut self, vs: &[u64]) {
        self.extend_by(vs.len(), |j| vs[j]);
    }

    /// Adds `value(j)` for `j` in `0..n` (as [`Samples::push`] each would): the largest is
    /// found first, and when it fits in 32 bits the values are copied into the blocks in runs.
    #[inline]
    fn extend_by(&mut self, n: usize, value: impl Fn(usize) -> u64) {
        let Some(top) = (0..n).map(&value).max() else {
            return;
        };
        if top > u64::from(u32::MAX) {
            for j in 0..n {
                self.push(value(j));
            }
            return;
        }
        self.len += n;
        self.max = Some(self.max.map_or(top, |m| m.max(top)));
        let mut j = 0;
        while j < n {
            match self.narrow.last_mut() {
                Some(b) if b.len() < BLOCK => {
                    let now = (BLOCK - b.len()).min(n - j);
                    // Every value fits in 32 bits (top does).
                    b.extend((j..j + now).map(|k| value(k) as u32));
                    j += now;
                }
                _ => {
                    // The first block grows as usual; later ones are allocated whole.
                    let cap = if self.narrow.is_empty() {
                        (n - j).clamp(4, BLOCK)
                    } else {
                        BLOCK
                    };
                    self.narrow.push(Vec::with_capacity(cap));
                }
            }
        }
    }

    /// Adds `values[r]` of each row `r` of `rows`.
    #[inline]
    fn extend_rows(&mut self, values: &[u64], rows: &[u32]) {
        self.extend_by(rows.len(), |j| values[rows[j] as usize]);
    }

    /// The sum of the samples.
    fn sum(&self) -> u128 {
        let narrow: u128 = self
            .narrow
            .iter()
            .map(|b| u128::from(b.iter().map(|&v| u64::from(v)).sum::<u64>()))
            .sum();
        narrow + self.wide.iter().map(|&v| u128::from(v)).sum::<u128>()
    }

    fn append(&mut self, o: Samples) {
        self.len += o.len;
        self.max = match (self.max, o.max) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.narrow.extend(o.narrow);
        self.wide.extend(o.wide);
    }

    /// The `qs` quantiles ([`quantile_linear`], as polars' `QuantileMethod::Linear`). Of few
    /// samples, from one contiguous copy of them; of many, from the order statistics
    /// [`Samples::order_stats`] finds without copying them all.
    fn quantiles(&self, qs: &[f64]) -> Vec<Option<f64>> {
        if self.len >= MANY_SAMPLES {
            let ranks: Vec<Option<QuantileRank>> =
                qs.iter().map(|&q| QuantileRank::of(self.len, q)).collect();
            let mut wanted: Vec<usize> = ranks
                .iter()
                .flatten()
                .flat_map(|r| [r.lo, r.lo + usize::from(r.between)])
                .collect();
            wanted.sort_unstable();
            wanted.dedup();
            let got = self.order_stats(&wanted);
            let at = |k: usize| got[wanted.binary_search(&k).expect("a wanted rank")];
            return ranks
                .iter()
                .map(|r| r.map(|r| r.value(at(r.lo), || at(r.lo + 1))))
                .collect();
        }
        if self.wide.is_empty() {
            let mut v: Vec<u32> = Vec::with_capacity(self.len);
            for b in &self.narrow {
                v.extend_from_slice(b);
            }
            qs.iter().map(|&q| quantile_linear(&mut v, q)).collect()
        } else {
            let mut v: Vec<u64> = Vec::with_capacity(self.len);
            for b in &self.narrow {
                v.extend(b.iter().map(|&x| u64::from(x)));
            }
            v.extend_from_slice(&self.wide);
            qs.iter().map(|&q| quantile_linear(&mut v, q)).collect()
        }
    }

    /// The order statistics `ranks` (0-based, ascending, each below `len`) of the samples.
    /// Values above 32 bits (`wide`) are above every narrow one. The narrow ones are counted
    /// by [`fine_bucket`] (one read of them all, in parallel), which gives the bucket of each
    /// rank; then only the values of those buckets are copied (in parallel), and each rank
    /// selected within its bucket.
    fn order_stats(&self, ranks: &[usize]) -> Vec<u64> {
        // A bucket's slot is a byte.
        assert!(ranks.len() < usize::from(u8::MAX));
        let narrow_len = self.len - self.wide.len();
        let counts = self
            .narrow
            .par_iter()
            .fold(
                || vec![0u64; FINE_BUCKETS],
                |mut c, b| {
                    for &v in b {
                        c[fine_bucket(v)] += 1;
                    }
                    c
                },
            )
            .reduce(
                || vec![0u64; FINE_BUCKETS],
                |mut a, b| {
                    a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                    a
                },
            );
        // The bucket of each narrow rank, and where that bucket starts among the ranks.
        let mut starts = Vec::with_capacity(FINE_BUCKETS + 1);
        let mut sum = 0u64;
        for &c in &counts {
            starts.push(sum);
            sum += c;
        }
        starts.push(sum);
        let bucket_of = |r: usize| starts.partition_point(|&s| s <= r as u64) - 1;
        let mut slot_of_bucket = vec![u8::MAX; FINE_BUCKETS];
        let mut wanted = 0usize;
        for &r in ranks.iter().filter(|&&r| r < narrow_len) {
            let b = bucket_of(r);
            if slot_of_bucket[b] == u8::MAX {
                slot_of_bucket[b] = wanted as u8;
                wanted += 1;
            }
        }
        let mut buckets: Vec<Vec<u32>> = if wanted == 0 {
            Vec::new()
        } else {
            self.narrow
                .par_iter()
                .fold(
                    || vec![Vec::new(); wanted],
                    |mut got: Vec<Vec<u32>>, b| {
                        for &v in b {
                            let s = slot_of_bucket[fine_bucket(v)];
                            if s != u8::MAX {
                                got[s as usize].push(v);
                            }
                        }
                        got
                    },
                )
                .reduce(
                    || vec![Vec::new(); wanted],
                    |mut a, b| {
                        a.iter_mut().zip(b).for_each(|(x, y)| x.extend(y));
                        a
                    },
                )
        };
        let mut wide = self.wide.clone();
        ranks
            .iter()
            .map(|&r| {
                if r < narrow_len {
                    let b = bucket_of(r);
                    let values = &mut buckets[slot_of_bucket[b] as usize];
                    u64::from(*values.select_nth_unstable(r - starts[b] as usize).1)
                } else {
                    *wide.select_nth_unstable(r - narrow_len).1
                }
            })
            .collect()
    }
}

/// Mantissa bits of a [`fine_bucket`]: 2^11 buckets per power of two.
const FINE_BITS: u32 = 11;
/// Buckets [`fine_bucket`] gives a `u32`.
const FINE_BUCKETS: usize = ((32 - FINE_BITS as usize) << FINE_BITS) + (1 << FINE_BITS);

/// A log-linear bucket of `v`, in `v`'s order: each value below 2^11 its own, then 2^11 per
/// power of two (each at most 1/2048 of its values wide), so that a rank's bucket holds few
/// samples whatever the scale of the values.
#[inline]
fn fine_bucket(v: u32) -> usize {
    if v < 1 << FINE_BITS {
        v as usize
    } else {
        let shift = 31 - v.leading_zeros() - FINE_BITS;
        (((shift + 1) << FINE_BITS) | ((v >> shift) & ((1 << FINE_BITS) - 1))) as usize
    }
}

/// Samples from which [`Samples::quantiles`] counts by buckets rather than copying them all.
const MANY_SAMPLES: usize = 1 << 20;

/// What a one-pass query read.
pub struct OnePassRead {
    /// The answer, as [`crate::query`] would give it.
    pub frame: DataFrame,
    /// I/Os that passed the filter.
    pub events: u64,
    /// Damaged chunks skipped, by trace.
    pub damaged: Vec<(String, Damage)>,
    /// True when the pass read units of the inputs and every one was damaged.
    pub nothing_read: bool,
}

/// What the driver hands over for each trace, once its segments are aggregated.
pub(crate) struct TraceDone<'a, A> {
    /// The trace.
    pub(crate) input: &'a Source,
    /// The aggregate of its intact segments.
    pub(crate) acc: A,
}

/// What every pass collects besides its own aggregates.
#[derive(Default)]
pub(crate) struct PassInfo {
    names: Vec<String>,
    /// The traces the inputs hold (a Parquet dataset can hold several).
    traces: std::collections::BTreeSet<String>,
    pub(crate) damaged: Vec<(String, Damage)>,
    pub(crate) ts_range: Option<(i64, i64)>,
    pub(crate) lost_events: u64,
    /// Rows the filter kept.
    pub(crate) kept: u64,
    /// Rows of the units read intact, before the filter (those of units a window of time
    /// left out are not read).
    pub(crate) decoded: u64,
    /// True when a unit the pass read was damaged.
    pub(crate) unreadable: bool,
}

impl PassInfo {
    /// From the first to the last I/O kept, s: 0 with one I/O (or several at one instant) or
    /// none, when a rate over it is undefined ([`crate::query::rate_per_s`]).
    pub(crate) fn duration_s(&self) -> f64 {
        match self.ts_range {
            Some((a, b)) => b.saturating_sub(a).max(0) as f64 / 1e9,
            None => 0.0,
        }
    }

    /// True when the pass read units and every one was damaged: nothing could be read, with
    /// a filter or without (a filter cannot explain that nothing was kept).
    pub(crate) fn nothing_read(&self) -> bool {
        self.unreadable && self.decoded == 0
    }

    fn add_range(&mut self, r: Option<(i64, i64)>) {
        self.ts_range = union(self.ts_range, r);
    }

    /// Listings of several traces say which trace each row is from.
    fn several_traces(&self) -> bool {
        self.traces.len() > 1
    }

    /// The query's answer: its frame, with what the pass counted.
    fn answer(self, frame: PolarsResult<DataFrame>) -> Result<OnePassRead, AnalyzeError> {
        Ok(OnePassRead {
            frame: frame.map_err(perr)?,
            events: self.kept,
            nothing_read: self.nothing_read(),
            damaged: self.damaged,
        })
    }
}

fn union(a: Option<(i64, i64)>, b: Option<(i64, i64)>) -> Option<(i64, i64)> {
    match (a, b) {
        (Some((p, q)), Some((x, y))) => Some((p.min(x), q.max(y))),
        (a, b) => a.or(b),
    }
}

/// Rows the inputs announce (trace indexes, Parquet metadata), for a progress bar; inputs
/// that cannot be opened count 0.
pub fn announced_rows(paths: &[InputPath]) -> u64 {
    paths
        .iter()
        .filter_map(|p| Source::open(p).ok())
        .map(|i| i.announced_rows())
        .sum()
}

fn open_all(paths: &[InputPath]) -> Result<Vec<Source>, AnalyzeError> {
    paths.iter().map(Source::open).collect()
}

/// How [`pass`] counts an I/O that went through a stack of devices (LVM, dm-crypt, md RAID,
/// an NVMe multipath head): the recorder sees it on each device, and each I/O a stacked
/// device sent down names the upper I/O it serves (`upper_dev`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layers {
    /// On each device it went through (questions asked per device).
    Each,
    /// Once, at the highest layer the selection has: an I/O a stacked device sent down is
    /// left out (handed to the fold as [`Rows::below`]) when that stacked device has I/O
    /// the filter keeps in the same input (questions about the workload: the whole
    /// recording, processes, files, cgroups).
    Once,
}

/// The rows of a batch a fold adds.
pub(crate) struct Rows<'a> {
    /// The rows the filter keeps (with [`Layers::Once`], less those of [`Rows::below`]), in
    /// row order.
    pub keep: &'a [u32],
    /// With [`Layers::Once`]: the kept rows that a stacked device sent down while its own
    /// I/O is in the selection (counted on it), in row order; empty otherwise.
    pub below: &'a [u32],
}

/// The stacked devices of `inp` whose I/O the fold counts instead of the I/O they sent down
/// (see [`Layers::Once`]); empty when the input has no stacked device.
fn counted_uppers(inp: &Source, filter: Option<&Expr>, layers: Layers) -> Vec<u32> {
    match layers {
        Layers::Once => inp.stacked_with_rows(filter),
        _ => Vec::new(),
    }
}

/// Moves the rows of `keep` whose upper I/O is on a device of `uppers` (sorted) to `below`.
fn split_below(b: &EventBatch, uppers: &[u32], keep: &mut Vec<u32>, below: &mut Vec<u32>) {
    below.clear();
    if uppers.is_empty()
        || b.upper_dev
            .valid
            .as_ref()
            .is_some_and(|v| !v.contains(&true))
    {
        return;
    }
    keep.retain(|&k| match b.upper_dev.get(k as usize) {
        Some(u) if uppers.binary_search(&u).is_ok() => {
            below.push(k);
            false
        }
        _ => true,
    });
}

/// A fold state of [`pass`]: the accumulator plus what it saw.
struct Part<A> {
    acc: A,
    range: Option<(i64, i64)>,
    kept: u64,
    /// Rows of the units read intact.
    decoded: u64,
    damaged: Vec<(usize, Damage)>,
}

/// One parallel pass over the segments of every trace, decoding only the columns `want` of
/// each trace segment (the batch `seg` sees has the others empty; with a filter, the columns
/// it reads too, [`Expr::columns`]): each worker folds the segments it decodes into its own
/// accumulator (`init`, then `seg` with the header, the batch and the rows the filter kept,
/// stacked I/O counted as `layers` says), accumulators are combined with `merge`, and `done`
/// receives each trace's total. Memory is one accumulator per worker, not per segment.
#[allow(clippy::too_many_arguments)]
pub(crate) fn pass<A: Send>(
    want: Columns,
    paths: &[InputPath],
    filter: Option<&Expr>,
    layers: Layers,
    progress: &(dyn Fn(u64) + Sync),
    init: impl Fn() -> A + Sync + Send,
    seg: impl Fn(&mut A, &Header, &EventBatch, Rows<'_>) + Sync + Send,
    merge: impl Fn(&mut A, A) + Sync + Send,
    done: impl FnMut(TraceDone<'_, A>),
) -> Result<PassInfo, AnalyzeError> {
    pass_over(
        &open_all(paths)?,
        want,
        filter,
        layers,
        progress,
        init,
        seg,
        merge,
        done,
    )
}

/// [`pass`] over inputs already open.
#[allow(clippy::too_many_arguments)]
fn pass_over<A: Send>(
    inputs: &[Source],
    want: Columns,
    filter: Option<&Expr>,
    layers: Layers,
    progress: &(dyn Fn(u64) + Sync),
    init: impl Fn() -> A + Sync + Send,
    seg: impl Fn(&mut A, &Header, &EventBatch, Rows<'_>) + Sync + Send,
    merge: impl Fn(&mut A, A) + Sync + Send,
    mut done: impl FnMut(TraceDone<'_, A>),
) -> Result<PassInfo, AnalyzeError> {
    let mut info = PassInfo::default();
    for inp in inputs {
        let h = inp.header();
        let uppers = counted_uppers(inp, filter, layers);
        let want = if uppers.is_empty() {
            want
        } else {
            want.union(Columns::of(&[col::UPPER_DEV]))
        };
        let fresh = || Part {
            acc: init(),
            range: None,
            kept: 0,
            decoded: 0,
            damaged: Vec::new(),
        };
        // One accumulator per worker thread, kept for the whole trace (segments are handed
        // out one at a time, so the work stays balanced); merged at the end. An
        // accumulator per piece of work would be merged as often as rayon splits the range,
        // and each would grow its groups again from nothing.
        type Worker<A> = (Part<A>, EventBatch, SegmentDecoder, [Vec<u32>; 2]);
        let workers: Vec<Mutex<Option<Worker<A>>>> = (0..rayon::current_num_threads().max(1))
            .map(|_| Mutex::new(None))
            .collect();
        let join = |a: &mut Part<A>, b: Part<A>| {
            merge(&mut a.acc, b.acc);
            a.range = union(a.range, b.range);
            a.kept += b.kept;
            a.decoded += b.decoded;
            a.damaged.extend(b.damaged);
        };
        (0..inp.units()).into_par_iter().for_each(|i| {
            let slot = &workers[rayon::current_thread_index().unwrap_or(0) % workers.len()];
            // Taken out of its slot while the segment is folded, so that no lock is held
            // over the caller's code; a fold that itself runs rayon work could come back to
            // this thread, which then starts another accumulator, merged below.
            let taken = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (mut p, mut b, mut dec, [mut keep, mut below]) = taken.unwrap_or_else(|| {
                (
                    fresh(),
                    EventBatch::default(),
                    SegmentDecoder::new(),
                    Default::default(),
                )
            });
            match inp.load(i, &mut b, &mut dec, &mut keep, filter, want) {
                Ok(range) => {
                    split_below(&b, &uppers, &mut keep, &mut below);
                    p.range = union(p.range, range);
                    p.kept += keep.len() as u64;
                    p.decoded += b.len() as u64;
                    let rows = Rows {
                        keep: &keep,
                        below: &below,
                    };
                    seg(&mut p.acc, h, &b, rows);
                    progress(b.len() as u64);
                }
                Err(d) => p.damaged.push((i, d)),
            }
            let mut back = slot.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((other, ..)) = back.take() {
                join(&mut p, other);
            }
            *back = Some((p, b, dec, [keep, below]));
        });
        let part = workers
            .into_iter()
            .filter_map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
            .map(|(p, ..)| p)
            .reduce(|mut a, b| {
                join(&mut a, b);
                a
            })
            .unwrap_or_else(fresh);
        let mut damaged = part.damaged;
        damaged.sort_by_key(|d| d.0);
        info.unreadable |= !damaged.is_empty();
        info.decoded += part.decoded;
        info.damaged
            .extend(damaged.into_iter().map(|(_, d)| (inp.name.clone(), d)));
        info.damaged
            .extend(inp.damage().into_iter().map(|d| (inp.name.clone(), d)));
        info.add_range(part.range);
        info.kept += part.kept;
        info.lost_events += inp.lost_events();
        info.names.push(inp.name.clone());
        info.traces
            .extend(inp.trace_names().into_iter().map(str::to_string));
        done(TraceDone {
            input: inp,
            acc: part.acc,
        });
    }
    Ok(info)
}

/// What [`ordered_pass`] hands its consumer.
enum Feed<'a, R> {
    /// Rows of the next segment of trace `.0`, in file order.
    Rows(usize, &'a [R]),
    /// Trace `.0` has no more rows.
    End(usize),
}

/// A window of decoded segments of trace `.0`: each segment's rows, time range, number of
/// kept events and of events read, or its damage.
type Window<R> = (
    usize,
    Vec<Result<(Vec<R>, Option<(i64, i64)>, u64, u64), Damage>>,
);

/// Each segment's (time range, kept events, events read) and each damaged segment with its
/// trace index.
type Consumed = (Vec<(Option<(i64, i64)>, u64, u64)>, Vec<(usize, Damage)>);

/// A pass that sees rows in file order: segments are decoded (and their rows turned into
/// `R` by `extract`, in parallel) a window at a time, while one consumer thread takes the
/// windows in order. `visit` returns false to stop early; then the pass returns `None`.
/// Only the columns `want` are decoded (and those the filter reads), as in [`pass`].
fn ordered_pass<R: Send>(
    inputs: &[Source],
    want: Columns,
    filter: Option<&Expr>,
    progress: &(dyn Fn(u64) + Sync),
    extract: impl Fn(&Header, &EventBatch, &[u32], &mut Vec<R>) + Sync + Send,
    visit: impl FnMut(Feed<'_, R>) -> bool + Send,
) -> Option<PassInfo> {
    let stop = AtomicBool::new(false);
    let window = rayon::current_num_threads().max(1) * 8;
    let (consumed, finished) = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Option<Window<R>>>(2);
        let stop = &stop;
        let consumer = s.spawn(move || consume(rx, visit, stop));
        'traces: for (ti, inp) in inputs.iter().enumerate() {
            let n = inp.units();
            let mut lo = 0;
            while lo < n && !stop.load(Ordering::Relaxed) {
                let hi = (lo + window).min(n);
                let segs: Vec<_> = (lo..hi)
                    .into_par_iter()
                    .map_init(
                        || (EventBatch::default(), SegmentDecoder::new(), Vec::new()),
                        |(b, dec, keep), i| {
                            let range = inp.load(i, b, dec, keep, filter, want)?;
                            let mut rows = Vec::with_capacity(keep.len());
                            extract(inp.header(), b, keep, &mut rows);
                            progress(b.len() as u64);
                            Ok((rows, range, keep.len() as u64, b.len() as u64))
                        },
                    )
                    .collect();
                if tx.send(Some((ti, segs))).is_err() {
                    break 'traces;
                }
                lo = hi;
            }
            // End of this trace (also sent for a trace without segments).
            let _ = tx.send(None);
        }
        drop(tx);
        // A panic of the consumer goes on in this thread.
        let consumed = consumer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (consumed, !stop.load(Ordering::Relaxed))
    });
    finished.then(|| pass_info(inputs, consumed))
}

/// The consumer of [`ordered_pass`]: hands each window's rows, in order, to `visit` (until it
/// returns false, which sets `stop`), and each trace's end.
fn consume<R>(
    rx: std::sync::mpsc::Receiver<Option<Window<R>>>,
    mut visit: impl FnMut(Feed<'_, R>) -> bool,
    stop: &AtomicBool,
) -> Consumed {
    let mut ranges = Vec::new();
    let mut damaged: Vec<(usize, Damage)> = Vec::new();
    let mut last_trace = None;
    for msg in rx {
        let Some((ti, segs)) = msg else {
            if let Some(t) = last_trace.take() {
                if !visit(Feed::End(t)) {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            continue;
        };
        last_trace = Some(ti);
        for s in segs {
            match s {
                Ok((rows, range, kept, decoded)) => {
                    ranges.push((range, kept, decoded));
                    if !stop.load(Ordering::Relaxed) && !visit(Feed::Rows(ti, &rows)) {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                Err(d) => damaged.push((ti, d)),
            }
        }
    }
    (ranges, damaged)
}

/// What a finished pass saw: time ranges and kept events, damage and losses, trace by trace.
fn pass_info(inputs: &[Source], (ranges, damaged): Consumed) -> PassInfo {
    let mut info = PassInfo {
        unreadable: !damaged.is_empty(),
        ..PassInfo::default()
    };
    for (r, kept, decoded) in ranges {
        info.add_range(r);
        info.kept += kept;
        info.decoded += decoded;
    }
    for (ti, inp) in inputs.iter().enumerate() {
        let name = &inp.name;
        info.damaged.extend(
            damaged
                .iter()
                .filter(|d| d.0 == ti)
                .map(|(_, d)| (name.clone(), d.clone())),
        );
        info.damaged
            .extend(inp.damage().into_iter().map(|d| (name.clone(), d)));
        info.lost_events += inp.lost_events();
        info.names.push(name.clone());
    }
    info
}

/// A row with a time, for [`Reorder`].
trait Timed {
    fn ts(&self) -> i64;
}

/// Puts one key's rows (one device's, one file's) back in time order, ties in file order,
/// as a stable sort by time would: rows wait in a sorted buffer and leave it, oldest first,
/// once more than `window` are waiting. Traces are written in completion order, so a row
/// is at most a queue depth or so out of place. A row older than one already released means
/// the trace is more out of order than the window allows: [`Reorder::push`] says so and the
/// caller falls back to a full sort.
struct Reorder<R> {
    pending: VecDeque<R>,
    released_ts: Option<i64>,
}

impl<R> Default for Reorder<R> {
    fn default() -> Self {
        Reorder {
            pending: VecDeque::new(),
            released_ts: None,
        }
    }
}

impl<R: Timed> Reorder<R> {
    /// Adds `r`; false if it comes too late to be put in order.
    #[inline]
    fn push(&mut self, r: R, window: usize, out: &mut impl FnMut(R)) -> bool {
        let ts = r.ts();
        if self.released_ts.is_some_and(|t| ts < t) {
            return false;
        }
        if self.pending.back().is_none_or(|b| b.ts() <= ts) {
            self.pending.push_back(r);
        } else {
            let at = self.pending.partition_point(|p| p.ts() <= ts);
            self.pending.insert(at, r);
        }
        if self.pending.len() > window {
            if let Some(o) = self.pending.pop_front() {
                self.released_ts = Some(o.ts());
                out(o);
            }
        }
        true
    }

    /// Releases everything still waiting.
    fn finish(&mut self, out: &mut impl FnMut(R)) {
        for o in self.pending.drain(..) {
            out(o);
        }
    }
}

fn idx(v: u64) -> IdxSize {
    v as IdxSize
}

/// An output column: `f` of each row.
fn col<R, T, P: ?Sized>(name: &str, rows: &[R], f: impl Fn(&R) -> T) -> Column
where
    Series: NamedFrom<Vec<T>, P>,
{
    Column::new(name.into(), rows.iter().map(f).collect::<Vec<T>>())
}

/// One file's sums within a trace.
#[derive(Default, Clone, Copy)]
struct FileSums {
    io: ProcAcc,
    latency_sum_ns: u128,
}

impl FileSums {
    #[inline]
    fn add(&mut self, op: u8, bytes: u32, latency_ns: u64) {
        self.io.add(op, bytes);
        self.latency_sum_ns += u128::from(latency_ns);
    }

    fn merge(&mut self, o: &FileSums) {
        self.io.merge(o.io);
        self.latency_sum_ns += o.latency_sum_ns;
    }
}

/// One file's latencies and threads within a trace: what its p99 and main process are
/// computed from.
#[derive(Default)]
struct FileDetail {
    latencies_ns: Samples,
    /// I/Os per submitting thread.
    by_tid: TidCounts,
}

impl FileDetail {
    fn merge(&mut self, o: FileDetail) {
        self.latencies_ns.append(o.latencies_ns);
        self.by_tid.merge(o.by_tid);
    }

    /// The p99 of the file's latencies, in µs.
    fn p99_us(&self) -> Option<f64> {
        self.latencies_ns.quantiles(&[0.99])[0].map(|v| v / 1000.0)
    }

    /// The name of the process that did most of the file's I/O; ties: the name that sorts
    /// first (no name before any name).
    fn main_process(&self, input: &Source) -> Option<String> {
        let mut by_comm: HashMap<Option<&str>, u64> = HashMap::new();
        for (tid, n) in self.by_tid.iter() {
            *by_comm
                .entry(input.comm(tid).map(String::as_str))
                .or_default() += n;
        }
        by_comm
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .and_then(|(c, _)| c.map(str::to_string))
    }
}

/// Threads a file has beyond which their counts are hashed rather than searched in a list.
const FEW_TIDS: usize = 32;

/// I/Os per thread of one file: a list searched in order while the file has few threads (in
/// the synthetic mixed workload a file has 5 in the median, 33 at most), a hash map beyond.
#[derive(Default)]
struct TidCounts {
    few: Vec<(u32, u64)>,
    many: IntMap<u32, u64>,
}

impl TidCounts {
    #[inline]
    fn add(&mut self, tid: u32, n: u64) {
        if self.many.is_empty() {
            if let Some(e) = self.few.iter_mut().find(|e| e.0 == tid) {
                e.1 += n;
                return;
            }
            if self.few.len() < FEW_TIDS {
                self.few.push((tid, n));
                return;
            }
            self.many.extend(self.few.drain(..));
        }
        *self.many.entry(tid).or_default() += n;
    }

    /// (thread, I/Os), each thread once.
    fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.few
            .iter()
            .copied()
            .chain(self.many.iter().map(|(&t, &n)| (t, n)))
    }

    fn merge(&mut self, o: TidCounts) {
        for (t, n) in o.iter() {
            self.add(t, n);
        }
    }
}

/// Calls `f(key, rows)` for each run of consecutive `keep` rows with the same `key_of(row)`:
/// a group's samples of a run are added at once (a segment's rows mostly come in runs of one
/// device, op or thread).
#[inline]
fn for_runs<K: PartialEq>(keep: &[u32], key_of: impl Fn(usize) -> K, mut f: impl FnMut(K, &[u32])) {
    let mut j = 0;
    while j < keep.len() {
        let key = key_of(keep[j] as usize);
        let mut end = j + 1;
        while end < keep.len() && key_of(keep[end] as usize) == key {
            end += 1;
        }
        f(key, &keep[j..end]);
        j = end;
    }
}

/// Merges map `b` into map `a` with `f`, iterating the smaller one.
fn merge_maps<K: std::hash::Hash + Eq, V>(
    a: &mut IntMap<K, V>,
    mut b: IntMap<K, V>,
    f: impl Fn(&mut V, V),
) {
    if b.len() > a.len() {
        std::mem::swap(a, &mut b);
    }
    for (k, v) in b {
        match a.get_mut(&k) {
            Some(x) => f(x, v),
            None => {
                a.insert(k, v);
            }
        }
    }
}

/// The [`FileDetail`] of files numbered 0, 1, 2 … (by the caller). Files are many and their
/// I/O interleaves: a segment's latencies and threads are grouped by file first (a counting
/// sort of the values), so that each file's samples and thread counts are fetched once per
/// segment rather than once per I/O, and a run of one thread's I/Os costs one look-up of the
/// thread.
#[derive(Default)]
struct FileDetails {
    files: Vec<FileDetail>,
    /// A segment's rows grouped by file, and their latencies and threads so grouped; kept to
    /// reuse their memory.
    groups: Groups,
    latencies_ns: Vec<u64>,
    tids: Vec<u32>,
}

impl FileDetails {
    /// Adds rows `keep` of `b`, the `j`th of them to file `file_of(j)`.
    fn add(&mut self, b: &EventBatch, keep: &[u32], file_of: impl FnMut(usize) -> u32) {
        self.groups.key(keep.len(), file_of);
        let groups = &mut self.groups;
        if self.files.len() < groups.count() {
            self.files.resize_with(groups.count(), FileDetail::default);
        }
        let (lat, tids) = (&mut self.latencies_ns, &mut self.tids);
        groups.scatter(keep.iter().map(|&k| b.latency_ns[k as usize]), lat);
        groups.scatter(keep.iter().map(|&k| b.tid[k as usize]), tids);
        for (g, r) in groups.ranges() {
            let f = &mut self.files[g];
            f.latencies_ns.extend(&lat[r.clone()]);
            let mut run = &tids[r];
            while let Some(&tid) = run.first() {
                let n = run.iter().take_while(|&&t| t == tid).count();
                f.by_tid.add(tid, n as u64);
                run = &run[n..];
            }
        }
    }

    /// Adds `o`'s files to the files of the same numbers.
    fn merge(&mut self, o: FileDetails) {
        if self.files.len() < o.files.len() {
            self.files.resize_with(o.files.len(), FileDetail::default);
        }
        for (into, f) in self.files.iter_mut().zip(o.files) {
            into.merge(f);
        }
    }
}

/// The sums of files by path id: a small dense array that the rows' pass updates in place.
type FileSumsById = DenseMap<FileSums>;

/// Adds row `i` of `b`, whose latency is `latency_ns`, to its file's sums; returns the index
/// of its file.
#[inline]
fn add_file_sums(sums: &mut FileSumsById, b: &EventBatch, i: usize, latency_ns: u64) -> usize {
    let g = sums.index(b.path_id[i]);
    sums.at_mut(g).add(b.op[i], b.bytes[i], latency_ns);
    g
}

/// One worker's files of one trace: figures per path id.
#[derive(Default)]
struct FilesAcc {
    sums: FileSumsById,
    /// Each file's latencies and threads, by the index of its sums; none kept by
    /// [`FilesAcc::add_sums`].
    details: FileDetails,
}

impl FilesAcc {
    /// Adds the kept rows of one segment: sums, latencies and threads. The sums are added in
    /// the rows' order, into the files' small array.
    fn add(&mut self, b: &EventBatch, keep: &[u32]) {
        let sums = &mut self.sums;
        self.details.add(b, keep, |j| {
            let i = keep[j] as usize;
            add_file_sums(sums, b, i, b.latency_ns[i]) as u32
        });
    }

    /// Adds the I/Os and bytes of the kept rows of one segment, and nothing else (not their
    /// latencies: the segment's latency column is not decoded).
    fn add_sums(&mut self, b: &EventBatch, keep: &[u32]) {
        for &k in keep {
            add_file_sums(&mut self.sums, b, k as usize, 0);
        }
    }

    /// Each file's path id, sums and details (empty ones after [`FilesAcc::add_sums`]).
    fn into_files(self) -> impl Iterator<Item = (u32, FileSums, FileDetail)> {
        let mut details = self.details.files.into_iter();
        self.sums
            .into_entries()
            .map(move |(p, s)| (p, s, details.next().unwrap_or_default()))
    }

    fn merge(&mut self, o: FilesAcc) {
        let (mut a, b) = if o.sums.len() > self.sums.len() {
            (o, std::mem::take(self))
        } else {
            (std::mem::take(self), o)
        };
        for (path_id, s, d) in b.into_files() {
            let i = a.sums.index(path_id);
            a.sums.at_mut(i).merge(&s);
            if a.details.files.len() <= i {
                a.details.files.resize_with(i + 1, FileDetail::default);
            }
            a.details.files[i].merge(d);
        }
        *self = a;
    }
}

/// The slot of each chosen path id: the second pass of `--top-files` keeps the latencies and
/// threads of the rows of these only.
#[derive(Default)]
struct Chosen {
    /// The slot of each path id up to the dense bound.
    dense: DenseSlots,
    /// The slot of each chosen larger path id.
    sparse: IntMap<u32, u32>,
}

impl Chosen {
    fn new(ids: impl IntoIterator<Item = (u32, u32)>) -> Chosen {
        let mut c = Chosen::default();
        for (id, slot) in ids {
            match c.dense.slot(id) {
                Some(s) => *s = slot,
                None => {
                    c.sparse.insert(id, slot);
                }
            }
        }
        c
    }

    #[inline]
    fn slot(&self, id: u32) -> Option<u32> {
        match self.dense.get(id) {
            Some(s) => Some(s),
            None if self.sparse.is_empty() => None,
            None => self.sparse.get(&id).copied(),
        }
    }
}

/// One worker's part of the second pass of `--top-files`: the chosen files' details, by slot.
#[derive(Default)]
struct ChosenAcc {
    details: FileDetails,
    /// A segment's rows of chosen files, and the slot of each; kept to reuse their memory.
    keep: Vec<u32>,
    slots: Vec<u32>,
}

impl ChosenAcc {
    fn add(&mut self, chosen: &Chosen, b: &EventBatch, keep: &[u32]) {
        self.keep.clear();
        self.slots.clear();
        for &k in keep {
            if let Some(s) = chosen.slot(b.path_id[k as usize]) {
                self.keep.push(k);
                self.slots.push(s);
            }
        }
        let slots = &self.slots;
        self.details.add(b, &self.keep, |j| slots[j]);
    }

    fn merge(&mut self, o: ChosenAcc) {
        self.details.merge(o.details);
    }
}

/// One output row of `--top-files` before sorting: one file (all its names) of one trace.
struct FileRow {
    trace: String,
    /// The file's key (the path id of its latest name).
    key: u32,
    path: Option<String>,
    /// The device of the file system holding it: a label's rows are named with it.
    fs_dev: Option<String>,
    ios: u64,
    bytes: u64,
    read_bytes: u64,
    write_bytes: u64,
    mean_latency_us: Option<f64>,
    p99_latency_us: Option<f64>,
    main_process: Option<String>,
    names: u32,
    renamed_from: Option<String>,
    /// Which input the file is of, and its path ids (when the figures above are completed
    /// by a second pass).
    input: usize,
    path_ids: Vec<u32>,
}

impl FileRow {
    /// The row of file `key` of `input` (number `at`), with `sums`; its p99 and main process
    /// are to be filled in.
    fn new(input: &Source, at: usize, key: u32, s: &FileSums) -> FileRow {
        let renamed = input.renamed(key);
        FileRow {
            trace: input.trace_of_path(key).to_string(),
            key,
            path: input.shown_path(key),
            fs_dev: input.path_device(key),
            ios: s.io.ios,
            bytes: s.io.bytes,
            read_bytes: s.io.read_bytes,
            write_bytes: s.io.write_bytes,
            mean_latency_us: (s.io.ios > 0)
                .then(|| s.latency_sum_ns as f64 / s.io.ios as f64 / 1000.0),
            p99_latency_us: None,
            main_process: None,
            names: renamed.map_or(1, |r| r.names),
            renamed_from: renamed.map(|r| r.renamed_from.clone()),
            input: at,
            path_ids: Vec::new(),
        }
    }
}

/// `--top-files` over traces and datasets: the columns and order of [`crate::query::top_files`].
/// A file renamed while recording is one row, under its latest name (see [`crate::files`]).
///
/// Ranked by I/Os or bytes, without a filter, the inputs are read twice: a first pass sums
/// every file's I/Os and bytes (reading three columns); a second keeps the latencies and
/// threads of the files shown only (their mean and p99 latency and main process; three
/// columns). On a Parquet dataset too: reading its path ids again costs less than keeping
/// every file's latencies (measured: 0.46 s and 103 MiB against 0.58 s and 169 MiB at 10M
/// events). Ranked by p99, or with a filter (which would be evaluated twice, while the I/Os
/// it keeps are often few), one pass keeps every file's.
pub fn top_files(
    paths: &[InputPath],
    filter: Option<&Expr>,
    by: RankBy,
    limit: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OnePassRead, AnalyzeError> {
    let inputs = open_all(paths)?;
    let two_passes = by != RankBy::Latency && filter.is_none();
    let mut rows: Vec<FileRow> = Vec::new();
    let mut at = 0;
    let want = if two_passes {
        Columns::of(&[col::PATH_ID, col::BYTES, col::OP])
    } else {
        Columns::of(&[col::PATH_ID, col::BYTES, col::OP, col::LATENCY_NS, col::TID])
    };
    let info = pass_over(
        &inputs,
        want,
        filter,
        Layers::Once,
        progress,
        FilesAcc::default,
        |files, _, b, rows| {
            if two_passes {
                files.add_sums(b, rows.keep)
            } else {
                files.add(b, rows.keep)
            }
        },
        FilesAcc::merge,
        |t| {
            // Path ids → files: the names of a renamed file are added together.
            let mut by_file: IntMap<u32, (FileSums, FileDetail, Vec<u32>)> = IntMap::default();
            for (path_id, s, d) in t.acc.into_files() {
                let f = by_file.entry(t.input.file_key(path_id)).or_default();
                f.0.merge(&s);
                f.1.merge(d);
                f.2.push(path_id);
            }
            for (key, (s, d, path_ids)) in by_file {
                let mut row = FileRow::new(t.input, at, key, &s);
                if two_passes {
                    row.path_ids = path_ids;
                } else {
                    row.p99_latency_us = d.p99_us();
                    row.main_process = d.main_process(t.input);
                }
                rows.push(row);
            }
            at += 1;
        },
    )?;
    rank_files(&mut rows, by, limit);
    if two_passes {
        complete_files(&inputs, &mut rows)?;
    }
    let frame = files_frame(rows, info.duration_s(), info.several_traces());
    info.answer(frame)
}

/// The second pass of `--top-files`: the mean and p99 latency and the main process of each
/// file of `rows`, from the rows of their path ids, input by input.
fn complete_files(inputs: &[Source], rows: &mut [FileRow]) -> Result<(), AnalyzeError> {
    for (at, input) in inputs.iter().enumerate() {
        let of_input: Vec<usize> = (0..rows.len()).filter(|&r| rows[r].input == at).collect();
        if of_input.is_empty() {
            continue;
        }
        let chosen = Chosen::new(
            of_input
                .iter()
                .enumerate()
                .flat_map(|(slot, &r)| rows[r].path_ids.iter().map(move |&p| (p, slot as u32))),
        );
        let mut details = Vec::new();
        pass_over(
            std::slice::from_ref(input),
            Columns::of(&[col::PATH_ID, col::LATENCY_NS, col::TID]),
            None,
            Layers::Once,
            &|_| {},
            ChosenAcc::default,
            |a, _, b, rows| a.add(&chosen, b, rows.keep),
            ChosenAcc::merge,
            |t| details = t.acc.details.files,
        )?;
        details.resize_with(of_input.len(), FileDetail::default);
        let figures: Vec<(u128, Option<f64>, Option<String>)> = details
            .par_iter()
            .map(|d| (d.latencies_ns.sum(), d.p99_us(), d.main_process(input)))
            .collect();
        for (r, (latency_sum_ns, p99, main)) in of_input.into_iter().zip(figures) {
            let row = &mut rows[r];
            // As `FileRow::new` from one pass's sums.
            row.mean_latency_us =
                (row.ios > 0).then(|| latency_sum_ns as f64 / row.ios as f64 / 1000.0);
            row.p99_latency_us = p99;
            row.main_process = main;
        }
    }
    Ok(())
}

/// Sorts `rows` by `by` and keeps the first `limit`.
fn rank_files(rows: &mut Vec<FileRow>, by: RankBy, limit: usize) {
    let key = |r: &FileRow| -> f64 {
        match by {
            RankBy::Ios => r.ios as f64,
            RankBy::Bytes => r.bytes as f64,
            RankBy::Latency => r.p99_latency_us.unwrap_or(f64::NEG_INFINITY),
        }
    };
    // Descending by the rank, then path ascending (no path first), then trace name and file
    // key (as `query::top_files` does).
    rows.sort_by(|a, b| {
        key(b)
            .total_cmp(&key(a))
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.trace.cmp(&b.trace))
            .then_with(|| a.key.cmp(&b.key))
    });
    rows.truncate(limit);
}

/// The `--top-files` table of ranked `rows` (with a `trace` column when the files are of
/// `several_traces`).
fn files_frame(rows: Vec<FileRow>, dur_s: f64, several_traces: bool) -> PolarsResult<DataFrame> {
    let mut cols = Vec::new();
    if several_traces {
        cols.push(col("trace", &rows, |r| r.trace.clone()));
    }
    cols.extend([
        col("path", &rows, |r| {
            (r.path.clone()).map(|p| crate::files::named_with_device(p, r.fs_dev.as_deref()))
        }),
        col("ios", &rows, |r| idx(r.ios)),
        col("iops", &rows, |r| rate_per_s(r.ios as f64, dur_s)),
        col("read_bytes", &rows, |r| r.read_bytes),
        col("write_bytes", &rows, |r| r.write_bytes),
        col("mean_latency_us", &rows, |r| r.mean_latency_us),
        col("p99_latency_us", &rows, |r| r.p99_latency_us),
        col("main_process", &rows, |r| r.main_process.clone()),
        col("names", &rows, |r| r.names),
        col("renamed_from", &rows, |r| r.renamed_from.clone()),
    ]);
    DataFrame::new(rows.len(), cols)
}

/// One thread's (or, in [`FileSums`], one file's) counters: I/Os, bytes read, bytes written, all
/// bytes.
#[derive(Default, Clone, Copy)]
struct ProcAcc {
    ios: u64,
    read_bytes: u64,
    write_bytes: u64,
    bytes: u64,
}

impl ProcAcc {
    /// Adds one I/O of `op` (its code) that moved `bytes`.
    #[inline]
    fn add(&mut self, op: u8, bytes: u32) {
        let bytes = u64::from(bytes);
        self.ios += 1;
        self.bytes += bytes;
        // Without branches: reads and writes interleave unpredictably.
        self.read_bytes += bytes * u64::from(op == Op::Read.code());
        self.write_bytes += bytes * u64::from(op == Op::Write.code());
    }

    fn merge(&mut self, o: ProcAcc) {
        self.ios += o.ios;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.bytes += o.bytes;
    }
}

/// Each thread's I/O by (pid, tid), found by its tid without hashing (a tid is one pid's at a
/// time: the threads whose tid was first seen with another pid are kept apart).
#[derive(Default)]
struct Threads {
    /// By tid: the pid first seen with it, and that thread's counts.
    by_tid: DenseMap<(Option<u32>, ProcAcc)>,
    /// Threads of a tid first seen with another pid.
    others: IntMap<(u32, u32), ProcAcc>,
}

impl Threads {
    /// Thread (pid, tid)'s counts, made when new.
    #[inline]
    fn get(&mut self, pid: u32, tid: u32) -> &mut ProcAcc {
        let (first, a) = self.by_tid.get_mut(tid);
        if *first.get_or_insert(pid) == pid {
            a
        } else {
            self.others.entry((pid, tid)).or_default()
        }
    }

    /// Adds the kept rows of one segment.
    fn add(&mut self, b: &EventBatch, keep: &[u32]) {
        for &k in keep {
            let i = k as usize;
            self.get(b.pid[i], b.tid[i]).add(b.op[i], b.bytes[i]);
        }
    }

    fn merge(&mut self, o: Threads) {
        for (key, a) in o.into_entries() {
            self.get(key.0, key.1).merge(a);
        }
    }

    /// Every ((pid, tid), counts).
    fn into_entries(self) -> impl Iterator<Item = ((u32, u32), ProcAcc)> {
        self.by_tid
            .into_entries()
            .filter_map(|(tid, (pid, a))| pid.map(|pid| ((pid, tid), a)))
            .chain(self.others)
    }
}

/// (pid, comm, command line, trace) of a trace's threads, the comm being the thread's latest
/// name and the command line its process's (the comm when the trace does not know it).
type ProcKey = (u32, Option<String>, Option<String>, String);

/// The [`ProcKey`] of thread `tid` of process `pid`.
fn proc_key(input: &Source, pid: u32, tid: u32) -> ProcKey {
    (
        pid,
        input.comm(tid).cloned(),
        input.args(tid).cloned(),
        input.trace_of_tid(tid).to_string(),
    )
}

/// Processes sorted as `query::top_procs` sorts them: most I/Os first, then pid, then name,
/// then command line (none first), then trace.
fn ranked_procs(procs: HashMap<ProcKey, ProcAcc>) -> Vec<(ProcKey, ProcAcc)> {
    let mut rows: Vec<(ProcKey, ProcAcc)> = procs.into_iter().collect();
    rows.sort_by(|(ka, a), (kb, b)| b.ios.cmp(&a.ios).then_with(|| ka.cmp(kb)));
    rows
}

/// `--top-procs` over traces and datasets: the columns and order of [`crate::query::top_procs`].
pub fn top_procs(
    paths: &[InputPath],
    filter: Option<&Expr>,
    limit: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OnePassRead, AnalyzeError> {
    let mut procs: HashMap<ProcKey, ProcAcc> = HashMap::new();
    let info = pass(
        Columns::of(&[col::PID, col::TID, col::BYTES, col::OP]),
        paths,
        filter,
        Layers::Once,
        progress,
        Threads::default,
        |m, _, b, rows| m.add(b, rows.keep),
        Threads::merge,
        |t| {
            for ((pid, tid), a) in t.acc.into_entries() {
                procs
                    .entry(proc_key(t.input, pid, tid))
                    .or_default()
                    .merge(a);
            }
        },
    )?;
    let dur_s = info.duration_s();
    let mut rows = ranked_procs(procs);
    rows.truncate(limit);
    let mut cols = Vec::new();
    if info.several_traces() {
        cols.push(col("trace", &rows, |(k, _)| k.3.clone()));
    }
    cols.extend([
        col("pid", &rows, |(k, _)| k.0),
        col("comm", &rows, |(k, _)| k.1.clone()),
        col("ios", &rows, |(_, a)| idx(a.ios)),
        col("iops", &rows, |(_, a)| rate_per_s(a.ios as f64, dur_s)),
        col("read_bytes", &rows, |(_, a)| a.read_bytes),
        col("write_bytes", &rows, |(_, a)| a.write_bytes),
        col("mb_per_s", &rows, |(_, a)| {
            rate_per_s(a.bytes as f64 / 1e6, dur_s)
        }),
        col("args", &rows, |(k, _)| k.2.clone()),
    ]);
    let frame = DataFrame::new(rows.len(), cols);
    info.answer(frame)
}

/// One latency group's samples.
#[derive(Default)]
struct LatAcc {
    latency_ns: Samples,
    device_ns: Samples,
    queue_sum_ns: u128,
    queue_n: u64,
    device_sum_ns: u128,
}

impl LatAcc {
    fn merge(&mut self, o: LatAcc) {
        self.latency_ns.append(o.latency_ns);
        self.device_ns.append(o.device_ns);
        self.queue_sum_ns += o.queue_sum_ns;
        self.queue_n += o.queue_n;
        self.device_sum_ns += o.device_sum_ns;
    }
}

/// One worker's latency groups, keyed by what `by` groups on (device number, op code, thread
/// id or path id; 0 for everything).
#[derive(Default)]
struct LatGroups {
    groups: IntMap<u32, LatAcc>,
    /// A run's device times (memory reused).
    device_ns: Vec<u64>,
}

impl LatGroups {
    /// Adds the kept rows of one segment, a run of rows of one group at a time.
    fn add(&mut self, b: &EventBatch, keep: &[u32], by: LatencyBy) {
        let key_of = |i: usize| match by {
            LatencyBy::All => 0,
            LatencyBy::Dev => b.dev[i],
            LatencyBy::Op => u32::from(b.op[i]),
            LatencyBy::Proc => b.tid[i],
            LatencyBy::File => b.path_id[i],
        };
        let (groups, device_ns) = (&mut self.groups, &mut self.device_ns);
        for_runs(keep, key_of, |key, rows| {
            let a = groups.entry(key).or_default();
            a.latency_ns.extend_rows(&b.latency_ns, rows);
            device_ns.clear();
            for &r in rows {
                let i = r as usize;
                let dev_ns = b.device_ns(i);
                device_ns.push(dev_ns);
                a.device_sum_ns += u128::from(dev_ns);
                if let Some(q) = b.queue_ns.get(i) {
                    a.queue_sum_ns += u128::from(q);
                    a.queue_n += 1;
                }
            }
            a.device_ns.extend(device_ns);
        });
    }

    fn merge(&mut self, o: LatGroups) {
        merge_maps(&mut self.groups, o.groups, LatAcc::merge);
    }
}

/// `--latency` over traces and datasets: the columns and order of [`crate::query::latency`].
pub fn latency(
    paths: &[InputPath],
    filter: Option<&Expr>,
    by: LatencyBy,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OnePassRead, AnalyzeError> {
    let mut groups: HashMap<Option<String>, LatAcc> = HashMap::new();
    // The latencies, and the column of the group's key.
    let key_column = match by {
        LatencyBy::All => None,
        LatencyBy::Dev => Some(col::DEV),
        LatencyBy::Op => Some(col::OP),
        LatencyBy::Proc => Some(col::TID),
        LatencyBy::File => Some(col::PATH_ID),
    };
    let mut want = Columns::of(&[col::LATENCY_NS, col::QUEUE_NS]);
    if let Some(c) = key_column {
        want = want.union(Columns::of(&[c]));
    }
    let info = pass(
        want,
        paths,
        filter,
        by.layers(),
        progress,
        LatGroups::default,
        |m, _, b, rows| m.add(b, rows.keep, by),
        LatGroups::merge,
        |t| {
            for (key, a) in t.acc.groups {
                let name = match by {
                    LatencyBy::All => Some("all".to_string()),
                    LatencyBy::Dev => t.input.device(key),
                    LatencyBy::Op => Some(Op::from_code(key as u8).name().to_string()),
                    LatencyBy::Proc => t.input.comm(key).cloned(),
                    // A renamed file's names together, under its latest name; a label (one
                    // per device) named with its file system's device.
                    LatencyBy::File => {
                        let file = t.input.file_key(key);
                        t.input.shown_path(file).map(|p| {
                            let dev = t.input.path_device(file);
                            crate::files::named_with_device(p, dev.as_deref())
                        })
                    }
                };
                groups.entry(name).or_default().merge(a);
            }
        },
    )?;
    let mut rows: Vec<(Option<String>, LatAcc)> = groups.into_iter().collect();
    // Most I/Os first, then the group's name (no name first), as `query::latency`.
    rows.sort_by(|a, b| {
        b.1.latency_ns
            .len
            .cmp(&a.1.latency_ns.len)
            .then_with(|| a.0.cmp(&b.0))
    });
    let key_name = by.column_name();
    let mut cols: Vec<Vec<Option<f64>>> = (0..8).map(|_| Vec::with_capacity(rows.len())).collect();
    let mut ios = Vec::with_capacity(rows.len());
    let us = |v: Option<f64>| v.map(|x| x / 1000.0);
    for (_, a) in &rows {
        let n = a.latency_ns.len;
        ios.push(n as IdxSize);
        for (c, v) in a
            .latency_ns
            .quantiles(&[0.5, 0.9, 0.99, 0.999])
            .into_iter()
            .enumerate()
        {
            cols[c].push(us(v));
        }
        cols[4].push(us(a.latency_ns.max.map(|m| m as f64)));
        cols[5].push(us(
            (a.queue_n > 0).then(|| a.queue_sum_ns as f64 / a.queue_n as f64)
        ));
        cols[6].push(us((n > 0).then(|| a.device_sum_ns as f64 / n as f64)));
        cols[7].push(us(a.device_ns.quantiles(&[0.99])[0]));
    }
    let names = [
        "p50_us",
        "p90_us",
        "p99_us",
        "p999_us",
        "max_us",
        "mean_queue_us",
        "mean_device_us",
        "p99_device_us",
    ];
    let mut columns = vec![
        col(key_name, &rows, |r| r.0.clone()),
        Column::new("ios".into(), ios),
    ];
    for (name, c) in names.iter().zip(cols) {
        columns.push(Column::new((*name).into(), c));
    }
    info.answer(DataFrame::new(rows.len(), columns))
}

/// Everything `--summary` needs from a trace.
#[derive(Default)]
struct SummaryAcc {
    bytes: u64,
    reads: u64,
    writes: u64,
    latency_ns: Samples,
    /// I/Os per path id (for the top file).
    files: DenseMap<u64>,
    /// I/Os per (pid, tid) (for the top process).
    threads: Threads,
}

impl SummaryAcc {
    fn add(&mut self, b: &EventBatch, keep: &[u32]) {
        let (read, write) = (Op::Read.code(), Op::Write.code());
        for &k in keep {
            let i = k as usize;
            self.bytes += u64::from(b.bytes[i]);
            self.reads += u64::from(b.op[i] == read);
            self.writes += u64::from(b.op[i] == write);
            *self.files.get_mut(b.path_id[i]) += 1;
        }
        self.latency_ns.extend_rows(&b.latency_ns, keep);
        self.threads.add(b, keep);
    }

    fn merge(&mut self, o: SummaryAcc) {
        self.bytes += o.bytes;
        self.reads += o.reads;
        self.writes += o.writes;
        self.latency_ns.append(o.latency_ns);
        self.files.merge(o.files, |a, b| *a += b);
        self.threads.merge(o.threads);
    }
}

/// `--summary` over traces and datasets: the rows of [`crate::query::summary`].
pub fn summary(
    paths: &[InputPath],
    filter: Option<&Expr>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OnePassRead, AnalyzeError> {
    let mut total = SummaryAcc::default();
    // The top file as `query::top_files` ranks by I/Os: (ios, path, trace, file key, and
    // for a label its file system's device: [`crate::files::named_with_device`]).
    type TopFile = (u64, Option<String>, String, u32, Option<String>);
    let mut files: Vec<TopFile> = Vec::new();
    let mut procs: HashMap<ProcKey, ProcAcc> = HashMap::new();
    let info = pass(
        Columns::of(&[
            col::BYTES,
            col::OP,
            col::LATENCY_NS,
            col::PATH_ID,
            col::PID,
            col::TID,
        ]),
        paths,
        filter,
        Layers::Once,
        progress,
        SummaryAcc::default,
        |a, _, b, rows| a.add(b, rows.keep),
        SummaryAcc::merge,
        |t| {
            let mut acc = t.acc;
            let mut by_file: IntMap<u32, u64> = IntMap::default();
            for (path_id, n) in std::mem::take(&mut acc.files).into_entries() {
                *by_file.entry(t.input.file_key(path_id)).or_default() += n;
            }
            for (key, n) in by_file {
                let trace = t.input.trace_of_path(key).to_string();
                let path = t.input.shown_path(key);
                let fs_dev = (path.as_deref())
                    .filter(|p| crate::files::is_label(p))
                    .and_then(|_| t.input.path_device(key));
                files.push((n, path, trace, key, fs_dev));
            }
            for ((pid, tid), a) in std::mem::take(&mut acc.threads).into_entries() {
                procs
                    .entry(proc_key(t.input, pid, tid))
                    .or_default()
                    .merge(a);
            }
            total.merge(acc);
        },
    )?;
    let top_file = files
        .iter()
        .min_by(|a, b| {
            b.0.cmp(&a.0)
                .then_with(|| a.1.cmp(&b.1))
                .then_with(|| a.2.cmp(&b.2))
                .then_with(|| a.3.cmp(&b.3))
        })
        .and_then(|f| (f.1.clone()).map(|p| crate::files::named_with_device(p, f.4.as_deref())))
        .unwrap_or_else(|| "-".into());
    let top_process = ranked_procs(procs)
        .into_iter()
        .next()
        .and_then(|(k, _)| k.1)
        .unwrap_or_else(|| "-".into());
    let q = total.latency_ns.quantiles(&[0.5, 0.99]);
    let frame = crate::query::summary_frame(crate::query::SummaryFigures {
        events: info.kept,
        lost_events: info.lost_events,
        duration_s: info.duration_s(),
        bytes: total.bytes as f64,
        reads: total.reads,
        writes: total.writes,
        p50_latency_ns: q[0].unwrap_or(0.0),
        p99_latency_ns: q[1].unwrap_or(0.0),
        max_latency_ns: total.latency_ns.max.map_or(0.0, |m| m as f64),
        top_process,
        top_file,
    });
    info.answer(frame)
}

/// One (interval, device, op) cell of `--timeline`.
#[derive(Default)]
struct TimeAcc {
    ios: u64,
    bytes: u64,
    latency_ns: Samples,
}

impl TimeAcc {
    fn merge(&mut self, o: TimeAcc) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.latency_ns.append(o.latency_ns);
    }
}

/// `--timeline` over traces and datasets: the columns and order of [`crate::query::timeline`].
pub fn timeline(
    paths: &[InputPath],
    filter: Option<&Expr>,
    interval_ns: i64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<OnePassRead, AnalyzeError> {
    // (interval number, device name, op name) in the output's order.
    let mut cells: BTreeMap<(i64, Option<String>, &'static str), TimeAcc> = BTreeMap::new();
    let info = pass(
        Columns::of(&[
            col::TIMESTAMP_NS,
            col::DEV,
            col::OP,
            col::BYTES,
            col::LATENCY_NS,
        ]),
        paths,
        filter,
        Layers::Each,
        progress,
        IntMap::<(i64, u32, u8), TimeAcc>::default,
        |m, h, b, rows| {
            for &k in rows.keep {
                let i = k as usize;
                let bucket = h.to_utc_ns(b.timestamp_ns[i]).div_euclid(interval_ns);
                let c = m.entry((bucket, b.dev[i], b.op[i])).or_default();
                c.ios += 1;
                c.bytes += u64::from(b.bytes[i]);
                c.latency_ns.push(b.latency_ns[i]);
            }
        },
        |a, b| merge_maps(a, b, TimeAcc::merge),
        |t| {
            for ((bucket, dev, op), c) in t.acc {
                let name = t.input.device(dev);
                cells
                    .entry((bucket, name, Op::from_code(op).name()))
                    .or_default()
                    .merge(c);
            }
        },
    )?;
    let secs = interval_ns as f64 / 1e9;
    let n = cells.len();
    let (mut time, mut dev, mut op) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut ios, mut iops, mut mbs, mut p99) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for ((bucket, d, o), c) in cells {
        time.push(rfc3339_utc(bucket * interval_ns));
        dev.push(d);
        op.push(o);
        ios.push(idx(c.ios));
        iops.push(c.ios as f64 / secs);
        mbs.push(c.bytes as f64 / (secs * 1e6));
        p99.push(c.latency_ns.quantiles(&[0.99])[0].map(|v| v / 1000.0));
    }
    let frame = DataFrame::new(
        n,
        vec![
            Column::new("time".into(), time),
            Column::new("dev".into(), dev),
            Column::new("op".into(), op),
            Column::new("ios".into(), ios),
            Column::new("iops".into(), iops),
            Column::new("mb_per_s".into(), mbs),
            Column::new("p99_latency_us".into(), p99),
        ],
    );
    info.answer(frame)
}

/// Rows of one device waiting in a [`Reorder`] of `--seek`: at most this many.
const SEEK_WINDOW: usize = 16_384;
/// Rows of one file on one device waiting in a [`Reorder`] of `--seq-writes`.
const RUN_WINDOW: usize = 1024;

/// One I/O as `--seek` sees it.
struct SeekRow {
    ts: i64,
    dev: u32,
    sector: u64,
    end_sector: u64,
}

impl Timed for SeekRow {
    fn ts(&self) -> i64 {
        self.ts
    }
}

/// The end of an I/O in sectors, as the `io` table's `end_sector`.
fn end_sector(b: &EventBatch, i: usize) -> u64 {
    b.sector[i].wrapping_add(u64::from(b.bytes[i]).div_ceil(512))
}

/// One device's seek statistics.
#[derive(Default)]
struct SeekAcc {
    ios: u64,
    sequential: u64,
    short: u64,
    long: u64,
    sum: u128,
    dist: Samples,
}

/// One device's place in a trace: rows in time order and the end of the previous I/O.
#[derive(Default)]
struct SeekDev {
    order: Reorder<SeekRow>,
    prev_end: Option<u64>,
    acc: SeekAcc,
}

impl SeekDev {
    fn take(prev_end: &mut Option<u64>, acc: &mut SeekAcc, r: SeekRow) {
        if let Some(pe) = prev_end.replace(r.end_sector) {
            let d = (r.sector as i64).wrapping_sub(pe as i64).unsigned_abs();
            acc.ios += 1;
            acc.sequential += u64::from(d == 0);
            acc.short += u64::from(d > 0 && d <= 2048);
            acc.long += u64::from(d > 2048);
            acc.sum += u128::from(d);
            acc.dist.push(d);
        }
    }
}

/// `--seek` over traces and datasets: the columns and order of [`crate::query::seek`]. `None` when
/// a device's I/Os are too far out of time order in the file to follow them in one pass (the
/// caller then sorts the whole table).
pub fn seek(
    paths: &[InputPath],
    filter: Option<&Expr>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Option<OnePassRead>, AnalyzeError> {
    let inputs = open_all(paths)?;
    let mut devs: IntMap<u32, SeekDev> = IntMap::default();
    let mut out: HashMap<Option<String>, SeekAcc> = HashMap::new();
    let info = ordered_pass(
        &inputs,
        Columns::of(&[col::TIMESTAMP_NS, col::DEV, col::SECTOR, col::BYTES]),
        filter,
        progress,
        |h, b, keep, rows| {
            rows.extend(keep.iter().map(|&k| {
                let i = k as usize;
                SeekRow {
                    ts: h.to_utc_ns(b.timestamp_ns[i]),
                    dev: b.dev[i],
                    sector: b.sector[i],
                    end_sector: end_sector(b, i),
                }
            }))
        },
        |feed| match feed {
            Feed::Rows(_, rows) => rows.iter().all(|r| {
                let d = devs.entry(r.dev).or_default();
                let (prev_end, acc) = (&mut d.prev_end, &mut d.acc);
                let row = SeekRow { ..*r };
                d.order
                    .push(row, SEEK_WINDOW, &mut |x| SeekDev::take(prev_end, acc, x))
            }),
            Feed::End(ti) => {
                for (dev, mut d) in devs.drain() {
                    let (prev_end, acc) = (&mut d.prev_end, &mut d.acc);
                    d.order.finish(&mut |x| SeekDev::take(prev_end, acc, x));
                    let name = inputs[ti].device(dev);
                    let o = out.entry(name).or_default();
                    o.ios += d.acc.ios;
                    o.sequential += d.acc.sequential;
                    o.short += d.acc.short;
                    o.long += d.acc.long;
                    o.sum += d.acc.sum;
                    o.dist.append(d.acc.dist);
                }
                true
            }
        },
    );
    let Some(info) = info else {
        return Ok(None);
    };
    let mut rows: Vec<(Option<String>, SeekAcc)> =
        out.into_iter().filter(|(_, a)| a.ios > 0).collect();
    // Most I/Os first, then the device's name (no name first), as `query::seek`.
    rows.sort_by(|a, b| b.1.ios.cmp(&a.1.ios).then_with(|| a.0.cmp(&b.0)));
    let n = rows.len();
    let frame = DataFrame::new(
        n,
        vec![
            col("dev", &rows, |r| r.0.clone()),
            col("ios", &rows, |r| idx(r.1.ios)),
            col("sequential_pct", &rows, |r| {
                r.1.sequential as f64 * 100.0 / r.1.ios as f64
            }),
            col("sequential", &rows, |r| r.1.sequential),
            col("short_seeks", &rows, |r| r.1.short),
            col("long_seeks", &rows, |r| r.1.long),
            col("median_seek_sectors", &rows, |r| {
                r.1.dist.quantiles(&[0.5])[0]
            }),
            col("mean_seek_sectors", &rows, |r| {
                r.1.sum as f64 / r.1.ios as f64
            }),
        ],
    );
    info.answer(frame).map(Some)
}

/// One write as `--seq-writes` sees it.
#[derive(Clone, Copy)]
struct WriteRow {
    ts: i64,
    done_ns: i64,
    dev: u32,
    path_id: u32,
    sector: u64,
    end_sector: u64,
    bytes: u32,
    tid: u32,
}

impl Timed for WriteRow {
    fn ts(&self) -> i64 {
        self.ts
    }
}

/// A run of contiguous writes.
#[derive(Clone, Copy)]
struct Run {
    trace: usize,
    dev: u32,
    path_id: u32,
    tid: u32,
    start_ns: i64,
    end_ns: i64,
    length_bytes: u64,
    ios: u64,
    first_sector: u64,
    /// Where the next write must start to continue the run.
    next_sector: u64,
}

/// One file on one device in a trace: writes in time order and the run they extend.
#[derive(Default)]
struct RunKey {
    order: Reorder<WriteRow>,
    run: Option<Run>,
}

/// The runs long enough to show, keeping only what can still make the first `limit`.
struct RunSink {
    min_bytes: u64,
    limit: usize,
    runs: Vec<Run>,
}

impl RunSink {
    /// Order on the numbers alone: longest first, then earliest.
    fn rank(a: &Run, b: &Run) -> std::cmp::Ordering {
        b.length_bytes
            .cmp(&a.length_bytes)
            .then(a.start_ns.cmp(&b.start_ns))
    }

    fn close(&mut self, r: Run) {
        if r.length_bytes < self.min_bytes {
            return;
        }
        self.runs.push(r);
        if self.runs.len() >= 2 * self.limit.max(512) {
            self.prune();
        }
    }

    /// Drops the runs that rank below the `limit`-th (keeping its ties).
    fn prune(&mut self) {
        if self.runs.len() <= self.limit {
            return;
        }
        if self.limit == 0 {
            self.runs.clear();
            return;
        }
        self.runs.select_nth_unstable_by(self.limit - 1, Self::rank);
        let cut = self.runs[self.limit - 1];
        self.runs
            .retain(|r| Self::rank(r, &cut) != std::cmp::Ordering::Greater);
    }

    fn take(&mut self, slot: &mut Option<Run>, trace: usize, w: WriteRow) {
        match slot {
            Some(r) if r.next_sector == w.sector => {
                r.start_ns = r.start_ns.min(w.ts);
                r.end_ns = r.end_ns.max(w.done_ns);
                r.length_bytes += u64::from(w.bytes);
                r.ios += 1;
                r.first_sector = r.first_sector.min(w.sector);
                r.next_sector = w.end_sector;
            }
            _ => {
                let new = Run {
                    trace,
                    dev: w.dev,
                    path_id: w.path_id,
                    tid: w.tid,
                    start_ns: w.ts,
                    end_ns: w.done_ns,
                    length_bytes: u64::from(w.bytes),
                    ios: 1,
                    first_sector: w.sector,
                    next_sector: w.end_sector,
                };
                if let Some(old) = slot.replace(new) {
                    self.close(old);
                }
            }
        }
    }
}

/// `--seq-writes` over traces and datasets: the columns and order of
/// [`crate::query::seq_writes`]. `None` when a file's writes are too far out of time order
/// in the file to follow them in one pass (the caller then sorts the whole table).
pub fn seq_writes(
    paths: &[InputPath],
    filter: Option<&Expr>,
    min_bytes: u64,
    limit: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Option<OnePassRead>, AnalyzeError> {
    let inputs = open_all(paths)?;
    let write = Op::Write.code();
    let mut keys: IntMap<u64, RunKey> = IntMap::default();
    let mut sink = RunSink {
        min_bytes,
        limit,
        runs: Vec::new(),
    };
    let info = ordered_pass(
        &inputs,
        Columns::of(&[
            col::TIMESTAMP_NS,
            col::LATENCY_NS,
            col::DEV,
            col::PATH_ID,
            col::SECTOR,
            col::BYTES,
            col::OP,
            col::TID,
        ]),
        filter,
        progress,
        |h, b, keep, rows| {
            rows.extend(
                keep.iter()
                    .filter(|&&k| b.op[k as usize] == write)
                    .map(|&k| {
                        let i = k as usize;
                        let ts = h.to_utc_ns(b.timestamp_ns[i]);
                        WriteRow {
                            ts,
                            done_ns: ts.wrapping_add(b.latency_ns[i] as i64),
                            dev: b.dev[i],
                            path_id: b.path_id[i],
                            sector: b.sector[i],
                            end_sector: end_sector(b, i),
                            bytes: b.bytes[i],
                            tid: b.tid[i],
                        }
                    }),
            )
        },
        |feed| match feed {
            Feed::Rows(ti, rows) => rows.iter().all(|w| {
                // By file: the writes of a file renamed while recording form one run.
                let file = inputs[ti].file_key(w.path_id);
                let k = keys
                    .entry(u64::from(w.dev) << 32 | u64::from(file))
                    .or_default();
                let slot = &mut k.run;
                let sink = &mut sink;
                k.order
                    .push(*w, RUN_WINDOW, &mut |x| sink.take(slot, ti, x))
            }),
            Feed::End(ti) => {
                for (_, mut k) in keys.drain() {
                    let slot = &mut k.run;
                    k.order.finish(&mut |x| sink.take(slot, ti, x));
                    if let Some(r) = k.run.take() {
                        sink.close(r);
                    }
                }
                true
            }
        },
    );
    let Some(info) = info else {
        return Ok(None);
    };
    sink.prune();
    let frame = seq_writes_frame(&inputs, &info.names, sink.runs, limit);
    info.answer(frame).map(Some)
}

/// The rows of `--seq-writes`: the runs kept, with their names, in the full order of
/// `query::seq_writes`, the first `limit`.
fn seq_writes_frame(
    inputs: &[Source],
    names: &[String],
    runs: Vec<Run>,
    limit: usize,
) -> PolarsResult<DataFrame> {
    // Resolve names, then the full order of `query::seq_writes`: longest, earliest, then
    // path, device and trace names, first sector.
    struct Shown {
        run: Run,
        path: Option<String>,
        dev: Option<String>,
        comm: Option<String>,
    }
    let mut shown: Vec<Shown> = runs
        .into_iter()
        .map(|run| {
            let t = &inputs[run.trace];
            Shown {
                path: t.shown_path(t.file_key(run.path_id)),
                dev: t.device(run.dev),
                comm: t.comm(run.tid).cloned(),
                run,
            }
        })
        .collect();
    shown.sort_by(|a, b| {
        RunSink::rank(&a.run, &b.run)
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| a.dev.cmp(&b.dev))
            .then_with(|| names[a.run.trace].cmp(&names[b.run.trace]))
            .then_with(|| a.run.first_sector.cmp(&b.run.first_sector))
    });
    shown.truncate(limit);
    let n = shown.len();
    DataFrame::new(
        n,
        vec![
            col("path", &shown, |s| s.path.clone()),
            col("dev", &shown, |s| s.dev.clone()),
            col("comm", &shown, |s| s.comm.clone()),
            col("start", &shown, |s| rfc3339_utc(s.run.start_ns)),
            col("first_sector", &shown, |s| s.run.first_sector),
            col("length_bytes", &shown, |s| s.run.length_bytes),
            col("ios", &shown, |s| idx(s.run.ios)),
            col("mb_per_s", &shown, |s| {
                let span_s = s.run.end_ns.saturating_sub(s.run.start_ns).max(0) as f64 / 1e9;
                rate_per_s(s.run.length_bytes as f64 / 1e6, span_s)
            }),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    struct T(i64, usize);
    impl Timed for T {
        fn ts(&self) -> i64 {
            self.0
        }
    }

    #[test]
    fn a_fold_that_lets_rayon_run_other_work_loses_no_rows() {
        use iodump_format::{EndInfo, Event, Writer, WriterOptions};
        use std::sync::atomic::AtomicU32;
        // 40 segments of 100 events.
        let path = std::env::temp_dir().join(format!("iodump-nested-{}.iod", std::process::id()));
        let opts = WriterOptions {
            segment_events: 100,
            ..WriterOptions::default()
        };
        let file = std::fs::File::create(&path).unwrap();
        let mut w = Writer::new(file, &Header::default(), opts).unwrap();
        for i in 0..4_000u64 {
            w.push(&Event {
                timestamp_ns: 1_000 + i,
                bytes: 4096,
                latency_ns: 1_000 + i % 7,
                ..Event::default()
            })
            .unwrap();
        }
        w.finish(EndInfo {
            events: 4_000,
            ..EndInfo::default()
        })
        .unwrap();
        let inputs = InputPath::expand(std::slice::from_ref(&path)).unwrap();
        // On one thread, the first segment's fold lets rayon run pending work until it has
        // run other segments' folds on this same thread (what a fold that waits on rayon
        // work of its own may do): those start an accumulator of their own while the first
        // is out of its slot, and every accumulator is merged.
        let (depth, reentered) = (AtomicU32::new(0), AtomicU32::new(0));
        let mut total = (0u64, 0u64);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        pool.install(|| {
            pass(
                Columns::of(&[col::LATENCY_NS]),
                &inputs,
                None,
                Layers::Each,
                &|_| {},
                || (0u64, 0u64),
                |acc, _, b, rows| {
                    let keep = rows.keep;
                    if depth.fetch_add(1, Ordering::SeqCst) > 0 {
                        reentered.fetch_add(1, Ordering::SeqCst);
                    } else {
                        while reentered.load(Ordering::SeqCst) < 5
                            && rayon::yield_now() == Some(rayon::Yield::Executed)
                        {
                        }
                    }
                    acc.0 += keep.len() as u64;
                    acc.1 += keep.iter().map(|&i| b.latency_ns[i as usize]).sum::<u64>();
                    depth.fetch_sub(1, Ordering::SeqCst);
                },
                |a, b| {
                    a.0 += b.0;
                    a.1 += b.1;
                },
                |t| total = t.acc,
            )
            .unwrap()
        });
        std::fs::remove_file(&path).unwrap();
        assert!(
            reentered.load(Ordering::SeqCst) >= 5,
            "other folds ran inside one"
        );
        let want: u64 = (0..4_000u64).map(|i| 1_000 + i % 7).sum();
        assert_eq!(total, (4_000, want));
    }

    #[test]
    fn reorder_gives_a_stable_sort_within_its_window() {
        // Times with ties, shuffled by at most 5 places: the output is the stable sort.
        let mut rows: Vec<T> = (0..5000).map(|i| T((i / 3) as i64 * 10, i)).collect();
        for c in rows.chunks_mut(6) {
            c.reverse();
        }
        let mut want = rows.clone();
        want.sort_by_key(|t| t.0);
        let mut got = Vec::new();
        let mut r = Reorder::default();
        for &t in &rows {
            assert!(r.push(t, 8, &mut |o| got.push(o)));
        }
        r.finish(&mut |o| got.push(o));
        assert_eq!(got, want);
        // Too far out of place for the window: refused, not misplaced.
        let mut r = Reorder::default();
        let mut out = Vec::new();
        for i in (0..100).rev() {
            if !r.push(T(i, 0), 8, &mut |o| out.push(o)) {
                assert!(out.len() == 1 && i < out[0].0);
                return;
            }
        }
        panic!("a reversed sequence longer than the window was accepted");
    }

    #[test]
    fn samples_extended_in_slices_are_the_samples_pushed() {
        let vals: Vec<u64> = (0..30_000u64).map(|i| i * 7919 % 100_003).collect();
        let (mut pushed, mut extended) = (Samples::default(), Samples::default());
        for &v in &vals {
            pushed.push(v);
        }
        // Slices across block boundaries, an empty one, and one with a wide value.
        let mut at = 0;
        for n in [0, 3, 8190, 5, 10_000, 11_802] {
            extended.extend(&vals[at..at + n]);
            at += n;
        }
        assert_eq!(at, vals.len());
        extended.extend(&[1 << 40, 5]);
        pushed.push(1 << 40);
        pushed.push(5);
        assert_eq!((extended.len, extended.max), (pushed.len, pushed.max));
        assert!(extended.narrow.iter().all(|b| b.len() <= BLOCK));
        assert_eq!(extended.wide, vec![1 << 40]);
        let qs = [0.0, 0.5, 0.99, 1.0];
        assert_eq!(extended.quantiles(&qs), pushed.quantiles(&qs));
    }

    #[test]
    fn thread_counts_stay_exact_past_the_short_list() {
        let mut c = TidCounts::default();
        for round in 0..3u64 {
            for tid in 0..(FEW_TIDS as u32 + 10) {
                c.add(tid, round + 1);
            }
        }
        let mut other = TidCounts::default();
        other.add(5, 100);
        other.add(1000, 1);
        c.merge(other);
        let mut got: Vec<(u32, u64)> = c.iter().collect();
        got.sort_unstable();
        let mut want: Vec<(u32, u64)> = (0..(FEW_TIDS as u32 + 10)).map(|t| (t, 6)).collect();
        want[5].1 += 100;
        want.push((1000, 1));
        assert_eq!(got, want);
    }

    #[test]
    fn samples_keep_exact_values_narrow_and_wide() {
        let mut s = Samples::default();
        let mut all = Vec::new();
        for i in 0..20_000u64 {
            let v = if i % 997 == 0 {
                (1 << 40) + i
            } else {
                i * 7 % 10_007
            };
            s.push(v);
            all.push(v);
        }
        let mut t = Samples::default();
        t.push(3);
        s.append(t);
        all.push(3);
        all.sort_unstable();
        assert_eq!(s.len, all.len());
        assert_eq!(s.max, all.last().copied());
        for (q, got) in [0.5, 0.99, 1.0]
            .into_iter()
            .zip(s.quantiles(&[0.5, 0.99, 1.0]))
        {
            let mut v = all.clone();
            assert_eq!(got, quantile_linear(&mut v, q));
        }
        assert!(s.narrow.iter().all(|b| b.len() <= BLOCK) && s.wide.len() == 21);
    }

    #[test]
    fn threads_of_a_reused_tid_stay_apart() {
        let mut a = Threads::default();
        a.get(10, 7).add(Op::Read.code(), 4096);
        // Tid 7 again, in another process.
        a.get(20, 7).add(Op::Write.code(), 512);
        a.get(10, 7).add(Op::Read.code(), 4096);
        let mut b = Threads::default();
        // Seen first with the second pid in another worker.
        b.get(20, 7).add(Op::Write.code(), 512);
        b.get(30, 8).add(Op::Read.code(), 1);
        a.merge(b);
        let mut got: Vec<((u32, u32), u64, u64, u64)> = a
            .into_entries()
            .map(|(k, p)| (k, p.ios, p.read_bytes, p.write_bytes))
            .collect();
        got.sort_unstable();
        assert_eq!(
            got,
            vec![
                ((10, 7), 2, 8192, 0),
                ((20, 7), 2, 0, 1024),
                ((30, 8), 1, 1, 0)
            ]
        );
    }

    #[test]
    fn fine_buckets_follow_the_values_order() {
        let mut last = 0;
        for v in (0..1u32 << 16).chain((16..32).flat_map(|e| {
            let p = 1u32 << e;
            [p - 1, p, p + 1, p | (p >> 1), p | (p - 1)]
        })) {
            let b = fine_bucket(v);
            assert!(b >= last && b < FINE_BUCKETS, "{v}: {b} after {last}");
            last = b;
        }
        assert_eq!(fine_bucket(u32::MAX), FINE_BUCKETS - 1);
        // Exact below 2^12: bucket == value.
        assert_eq!(fine_bucket(4095), 4095);
        assert_eq!(fine_bucket(4096), fine_bucket(4097));
    }

    #[test]
    fn many_samples_give_the_quantiles_of_a_copy() {
        // Spread values, values bunched in one fine bucket, a few above 32 bits, and equal
        // ones; quantiles near the ends and between two buckets.
        let mut x: u64 = 99;
        let mut s = Samples::default();
        let mut all = Vec::new();
        for i in 0..MANY_SAMPLES as u64 + 54_321 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = match i % 10 {
                0 => x % (1 << 32),
                1..=3 => 200_000 + x % 64,
                4..=6 => 200_000 + x % 5_000,
                7 if i % 1_000 == 7 => (1 << 33) + x % 1_000,
                _ => 1_000,
            };
            s.push(v);
            all.push(v);
        }
        let qs = [0.0, 0.1, 0.3, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0];
        let got = s.quantiles(&qs);
        for (q, got) in qs.into_iter().zip(got) {
            let mut v = all.clone();
            assert_eq!(got, quantile_linear(&mut v, q), "q {q}");
        }
        assert!(!s.wide.is_empty());
        // Only narrow values.
        let mut t = Samples::default();
        t.extend(&all.iter().map(|&v| v % (1 << 32)).collect::<Vec<_>>());
        let mut v: Vec<u64> = all.iter().map(|&v| v % (1 << 32)).collect();
        assert_eq!(t.quantiles(&[0.99])[0], quantile_linear(&mut v, 0.99));
    }
}
