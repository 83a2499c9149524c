//! How faithful a replay was: `iodump diff --replay ORIGINAL REPLAYED` and `iodump replay
//! --verify`.
//!
//! This module owns the score of a replay against its recording. The replayed trace (the
//! recording `iodump replay -o` makes of the replay's own I/O) is matched I/O by I/O with the
//! original by op, sector and size, in an order-keeping merge by time within each such key
//! (or by op and size in order, when too few match by sector; see `match_ios`); devices are
//! not compared: the replay's targets are other devices. From the pairs: I/Os issued versus
//! recorded, the order each recorded stream (thread) kept, the error of each I/O's issue time
//! (the original's gaps divided by the replay's speed; each pair's offset less the median
//! offset), the correlation of the two IOPS timelines, and both latency distributions.
//! Unlike `iodump diff`, the matching holds both traces' I/Os in memory (about 90 bytes each).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use iodump_format::event::Op;
use iodump_format::expr::{CmpOp, Expr, Field, Value as ExprValue};
use iodump_format::segment::{col, Columns};
use iodump_format::stats::quantile_linear;
use serde_json::{json, Value};

use crate::input::InputPath;
use crate::loghist::{mann_whitney, LogHist};
use crate::onepass::{pass, Layers};
use crate::AnalyzeError;

/// What to verify.
#[derive(Clone, Debug)]
pub struct VerifyConfig {
    /// The recording that was replayed.
    pub original: PathBuf,
    /// The recording of the replay (`iodump replay -o`).
    pub replayed: PathBuf,
    /// The part of the original that was replayed (`replay -f`).
    pub filter: Option<Expr>,
    /// The replay's `--speed`.
    pub speed: f64,
    /// The replay issued reads and flushes only (`replay` without `--allow-writes`): the
    /// original's writes, discards and other I/Os are left out of the score, as the filter
    /// leaves I/O out, instead of counting as I/Os the replay did not issue.
    pub reads_only: bool,
}

/// The filter of the original's I/Os a replay issued: `filter`, and with `reads_only` its
/// reads and flushes only.
fn scored(filter: Option<&Expr>, reads_only: bool) -> Option<Expr> {
    if !reads_only {
        return filter.cloned();
    }
    let op = |o| Expr::Cmp(Field::Op, CmpOp::Eq, ExprValue::Op(o));
    let ops = Expr::Or(vec![op(Op::Read), op(Op::Flush)]);
    Some(match filter {
        Some(f) => f.clone().and(ops),
        None => ops,
    })
}

/// One I/O as the verification sees it.
#[derive(Clone, Copy)]
struct Row {
    ts_ns: u64,
    sector: u64,
    latency_ns: u64,
    bytes: u32,
    tid: u32,
    op: u8,
}

/// One side's rows as read: every I/O but those a stacked device sent down, which wait
/// (with their upper device) for the devices with I/O to be known; and those devices.
#[derive(Default)]
struct Side {
    rows: Vec<Row>,
    lower: Vec<(Row, u32)>,
    devs: std::collections::HashSet<u32>,
}

/// Every I/O of one side, in time order, and the events its recorder counted as lost. As
/// `iodump replay` replays each I/O once, at its highest recorded layer, an I/O a stacked
/// device sent down is left out when that device has I/O here.
fn read_rows(path: &PathBuf, filter: Option<&Expr>) -> Result<(Vec<Row>, u64), AnalyzeError> {
    let inputs = InputPath::expand_recording(std::slice::from_ref(path))?;
    let mut side = Side::default();
    let want = Columns::of(&[
        col::TIMESTAMP_NS,
        col::SECTOR,
        col::BYTES,
        col::OP,
        col::TID,
        col::LATENCY_NS,
        col::DEV,
        col::UPPER_DEV,
    ]);
    let info = pass(
        want,
        &inputs,
        filter,
        Layers::Each,
        &|_| {},
        Side::default,
        |v: &mut Side, h, b, rows| {
            for &k in rows.keep {
                let i = k as usize;
                let r = Row {
                    ts_ns: h.to_utc_ns(b.timestamp_ns[i]) as u64,
                    sector: b.sector[i],
                    latency_ns: b.latency_ns[i],
                    bytes: b.bytes[i],
                    tid: b.tid[i],
                    op: b.op[i],
                };
                v.devs.insert(b.dev[i]);
                match b.upper_dev.get(i) {
                    Some(up) => v.lower.push((r, up)),
                    None => v.rows.push(r),
                }
            }
        },
        |a, b| {
            a.rows.extend(b.rows);
            a.lower.extend(b.lower);
            a.devs.extend(b.devs);
        },
        |t| {
            side.rows.extend(t.acc.rows);
            side.lower.extend(t.acc.lower);
            side.devs.extend(t.acc.devs);
        },
    )?;
    let mut rows = side.rows;
    rows.extend(
        side.lower
            .into_iter()
            .filter(|(_, up)| !side.devs.contains(up))
            .map(|(r, _)| r),
    );
    if let Some((trace, d)) = info.damaged.first() {
        return Err(AnalyzeError::Damaged {
            trace: trace.clone(),
            what: iodump_format::Damage::count_in_words(info.damaged.iter().map(|(_, d)| d)),
            damage: d.to_string(),
        });
    }
    rows.sort_by_key(|r| r.ts_ns);
    Ok((rows, info.lost_events))
}

/// Latency percentiles of one side (histogram estimates, [`LogHist::quantile`]), µs.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencySummary {
    /// I/Os.
    pub ios: u64,
    /// p50, µs.
    pub p50_us: Option<f64>,
    /// p99, µs.
    pub p99_us: Option<f64>,
    /// p99.9, µs.
    pub p999_us: Option<f64>,
    /// Mean, µs (exact).
    pub mean_us: Option<f64>,
}

impl LatencySummary {
    fn of(h: &LogHist) -> LatencySummary {
        let us = |q: f64| h.quantile(q).map(|v| v as f64 / 1000.0);
        LatencySummary {
            ios: h.count(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            mean_us: h.mean().map(|v| v / 1000.0),
        }
    }

    fn json(&self) -> Value {
        json!({"ios": self.ios, "p50_us": self.p50_us, "p99_us": self.p99_us,
               "p999_us": self.p999_us, "mean_us": self.mean_us})
    }
}

/// The score of a replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Verification {
    /// Only the original's reads and flushes were scored ([`VerifyConfig::reads_only`]).
    pub reads_only: bool,
    /// I/Os of the original (after the filter and `reads_only`; an I/O a stacked device sent down counts
    /// once, as the upper I/O it serves, when that is in the original).
    pub recorded_ios: u64,
    /// I/Os of the replayed trace.
    pub replayed_ios: u64,
    /// Events the recorder of the original counted as lost (its loss records; the filter
    /// cannot apply to them).
    pub recorded_lost_events: u64,
    /// Events the recorder of the replay counted as lost: replayed I/Os that may be missing
    /// from the replayed trace, so from the pairs.
    pub replayed_lost_events: u64,
    /// Original I/Os matched by a replayed one (same op, sector and size; see `match_ios`).
    pub matched_ios: u64,
    /// The pairs were matched by sector; false when fewer than half the I/Os matched so and
    /// they were matched by op and size in time order instead (a replay onto a regular file,
    /// whose blocks are elsewhere on its disk, or offsets wrapped around a smaller target).
    pub matched_by_sector: bool,
    /// Recorded streams (threads) with at least one matched I/O.
    pub streams: u64,
    /// Of them, those whose matched I/Os were all issued in their recorded order.
    pub streams_in_order: u64,
    /// Consecutive matched I/Os of a stream issued in order, % of all such pairs.
    pub pairs_in_order_pct: Option<f64>,
    /// |replayed − scheduled| issue time, p50, ns (exact).
    pub issue_error_p50_ns: Option<f64>,
    /// The same, p99.
    pub issue_error_p99_ns: Option<f64>,
    /// Width of the timeline bins, ns.
    pub timeline_bin_ns: u64,
    /// Pearson correlation of the IOPS of the two timelines, aligned at their starts.
    pub iops_correlation: Option<f64>,
    /// Latency of the original.
    pub recorded_latency: LatencySummary,
    /// Latency of the replay.
    pub replayed_latency: LatencySummary,
    /// Mann–Whitney p-value of the two latency distributions.
    pub latency_p_value: Option<f64>,
}

/// Most bins of the IOPS timelines.
const TIMELINE_BINS: u64 = 100;

/// Bytes of memory scoring takes per I/O of either side: its row, and its share of the
/// matching (measured: 1.72 GB peak for two traces of 10M I/Os each, 86 bytes per I/O).
const SCORE_BYTES_PER_IO: u64 = 90;

/// Refuses to score `ios` I/Os when the `need_bytes` that still takes exceed
/// `available_bytes` (all rows of both sides are held in memory, unlike the diff's figures;
/// the process would be killed part-way instead); unknown memory is not checked.
fn check_fits(ios: u64, need_bytes: u64, available_bytes: Option<u64>) -> Result<(), AnalyzeError> {
    match available_bytes {
        Some(available_bytes) if need_bytes > available_bytes => {
            Err(AnalyzeError::TooLargeToScore {
                ios,
                need_bytes,
                available_bytes,
            })
        }
        _ => Ok(()),
    }
}

/// Before a replay of `original` that is to be scored (`replay --verify`): refuses when
/// scoring would not fit in memory, so that a long replay is not run for a score that cannot
/// be made. The replay's recording holds about `planned_ios` I/Os; of the original, scoring
/// holds what `filter` keeps (without one, every I/O; with one, at least the I/Os of one of
/// the `loops`, which is all that is known before it is read).
pub fn check_before_replay(
    original: &Path,
    filter: Option<&Expr>,
    reads_only: bool,
    planned_ios: u64,
    loops: u32,
) -> Result<(), AnalyzeError> {
    let filter = scored(filter, reads_only);
    let ios = ios_to_score(original, filter.as_ref(), planned_ios, loops)?;
    check_fits(
        ios,
        ios.saturating_mul(SCORE_BYTES_PER_IO),
        crate::engine::mem_available_bytes(),
    )
}

/// The I/Os scoring a replay of `planned_ios` I/Os of `original` will hold, as far as known
/// before the replay ([`check_before_replay`]).
fn ios_to_score(
    original: &Path,
    filter: Option<&Expr>,
    planned_ios: u64,
    loops: u32,
) -> Result<u64, AnalyzeError> {
    let original_ios = match filter {
        None => crate::onepass::announced_rows(&InputPath::expand(&[original.to_path_buf()])?),
        Some(_) => planned_ios / u64::from(loops.max(1)),
    };
    Ok(original_ios.saturating_add(planned_ios))
}

/// Scores the replay `cfg.replayed` of `cfg.original`.
pub fn verify(cfg: &VerifyConfig) -> Result<Verification, AnalyzeError> {
    let expand = |p: &PathBuf| InputPath::expand(std::slice::from_ref(p));
    let replayed_ios = crate::onepass::announced_rows(&expand(&cfg.replayed)?);
    let available = crate::engine::mem_available_bytes;
    // The part of the original a filter keeps is known once read.
    let filter = scored(cfg.filter.as_ref(), cfg.reads_only);
    if filter.is_none() {
        let ios = crate::onepass::announced_rows(&expand(&cfg.original)?) + replayed_ios;
        check_fits(ios, ios.saturating_mul(SCORE_BYTES_PER_IO), available())?;
    } else {
        check_fits(
            replayed_ios,
            replayed_ios.saturating_mul(SCORE_BYTES_PER_IO),
            available(),
        )?;
    }
    let (orig, orig_lost) = read_rows(&cfg.original, filter.as_ref())?;
    if filter.is_some() {
        // Its rows are held already (no longer available): what scoring still needs.
        let ios = orig.len() as u64 + replayed_ios;
        let held_bytes = (orig.capacity() * std::mem::size_of::<Row>()) as u64;
        let need_bytes = ios
            .saturating_mul(SCORE_BYTES_PER_IO)
            .saturating_sub(held_bytes);
        check_fits(ios, need_bytes, available())?;
    }
    let (rep, rep_lost) = read_rows(&cfg.replayed, None)?;
    Ok(Verification {
        recorded_lost_events: orig_lost,
        replayed_lost_events: rep_lost,
        reads_only: cfg.reads_only,
        ..score(&orig, &rep, cfg.speed)
    })
}

/// (original index, replayed index) of each matched pair, in the originals' time order.
/// Within each key — op, size and, `by_sector`, sector — the originals and the replayed I/Os
/// are merged in time order (the original's time from its first I/O of a key the replay has,
/// divided by `speed`; the replay's from its first I/O of a key the original has: the
/// replayer's own I/O in its recording, or a first I/O it skipped, does not shift the
/// times), each paired with the nearest of the other side unless the
/// next one of its own side is nearer still (then it stays unmatched): an I/O the replay
/// skipped does not shift the pairs after it. Without the sector (a key then holds most
/// I/Os, and the replay's drift in time exceeds their gaps), the k-th of each side pair up.
fn match_ios(orig: &[Row], rep: &[Row], by_sector: bool, speed: f64) -> Vec<(usize, usize)> {
    type Key = (u8, u64, u32);
    let key = |r: &Row| (r.op, if by_sector { r.sector } else { 0 }, r.bytes);
    let mut by_key: HashMap<Key, (Vec<u32>, Vec<u32>)> = HashMap::new();
    for (i, r) in orig.iter().enumerate() {
        by_key.entry(key(r)).or_default().0.push(i as u32);
    }
    for (j, r) in rep.iter().enumerate() {
        if let Some(e) = by_key.get_mut(&key(r)) {
            e.1.push(j as u32);
        }
    }
    // The first I/O of each side of a key both sides have (the lists are in time order).
    let shared = || by_key.values().filter(|(_, rs)| !rs.is_empty());
    let (Some(i0), Some(j0)) = (
        shared().map(|(os, _)| os[0]).min(),
        shared().map(|(_, rs)| rs[0]).min(),
    ) else {
        return Vec::new();
    };
    let (o0, r0) = (orig[i0 as usize].ts_ns, rep[j0 as usize].ts_ns);
    let ot = |i: usize| orig[i].ts_ns.saturating_sub(o0) as f64 / speed;
    let rt = |j: usize| rep[j].ts_ns.saturating_sub(r0) as f64;
    let mut pairs = Vec::new();
    for (os, rs) in by_key.values() {
        if !by_sector {
            // By op and size only: the times cannot tell which is which, the order can.
            pairs.extend(os.iter().zip(rs).map(|(&i, &j)| (i as usize, j as usize)));
            continue;
        }
        let (mut a, mut b) = (0, 0);
        while a < os.len() && b < rs.len() {
            let (i, j) = (os[a] as usize, rs[b] as usize);
            let d = (ot(i) - rt(j)).abs();
            if a + 1 < os.len() && (ot(os[a + 1] as usize) - rt(j)).abs() < d {
                a += 1;
            } else if b + 1 < rs.len() && (ot(i) - rt(rs[b + 1] as usize)).abs() < d {
                b += 1;
            } else {
                pairs.push((i, j));
                a += 1;
                b += 1;
            }
        }
    }
    pairs.sort_unstable();
    pairs
}

fn score(orig: &[Row], rep: &[Row], speed: f64) -> Verification {
    let speed = if speed > 0.0 { speed } else { 1.0 };
    let mut pairs = match_ios(orig, rep, true, speed);
    let by_sector = pairs.len() * 2 >= orig.len().min(rep.len());
    if !by_sector {
        pairs = match_ios(orig, rep, false, speed);
    }
    // Order per stream.
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut broken: HashMap<u32, bool> = HashMap::new();
    let (mut in_order, mut consecutive) = (0u64, 0u64);
    for &(i, j) in &pairs {
        let tid = orig[i].tid;
        let t = rep[j].ts_ns;
        if let Some(prev) = last.insert(tid, t) {
            consecutive += 1;
            if t >= prev {
                in_order += 1;
            } else {
                broken.insert(tid, true);
            }
        } else {
            broken.entry(tid).or_insert(false);
        }
    }
    // Issue-time error: each pair's offset from its schedule (from the first pair), less the
    // median offset — a delay of the whole replay (its first I/O late, every other on time
    // after it) is no error of its timing, and one late first I/O made every other's.
    let mut errors: Vec<u64> = Vec::with_capacity(pairs.len());
    if let Some(&(i0, j0)) = pairs.first() {
        let (o0, r0) = (orig[i0].ts_ns, rep[j0].ts_ns);
        let mut offsets: Vec<i128> = pairs
            .iter()
            .map(|&(i, j)| {
                // Differences taken in integers: the times are UTC ns (~1.8e18), which a
                // double holds only to 256 ns. (A replayed I/O may come before the first
                // pair's: order not kept.)
                let scheduled = (orig[i].ts_ns.saturating_sub(o0) as f64 / speed).round();
                i128::from(rep[j].ts_ns) - i128::from(r0) - scheduled as i128
            })
            .collect();
        // (The errors are only ranked: the order the median's selection leaves is theirs.)
        let mid = offsets.len() / 2;
        let median = *offsets.select_nth_unstable(mid).1;
        errors.extend(
            offsets
                .into_iter()
                .map(|d| u64::try_from((d - median).unsigned_abs()).unwrap_or(u64::MAX)),
        );
    }
    let issue_error_p50_ns = quantile_linear(&mut errors, 0.5);
    let issue_error_p99_ns = quantile_linear(&mut errors, 0.99);
    // IOPS timelines aligned at the first pair (the original's time divided by the speed):
    // the replayer's own I/O before its first replayed one (reading the trace), or
    // recorded I/O before the part replayed, would shift one timeline against the other.
    let start = |v: &[Row], k: Option<usize>| k.map(|k| v[k].ts_ns).or(v.first().map(|r| r.ts_ns));
    let (o_start, r_start) = (
        start(orig, pairs.first().map(|p| p.0)),
        start(rep, pairs.first().map(|p| p.1)),
    );
    let span = |v: &[Row], from: Option<u64>, scale: f64| match (from, v.last()) {
        (Some(a), Some(b)) => (b.ts_ns.saturating_sub(a) as f64 / scale) as u64,
        _ => 0,
    };
    let total_ns = span(orig, o_start, speed)
        .max(span(rep, r_start, 1.0))
        .max(1);
    // About 200 I/Os a bin (counts of a steady rate are mostly noise below that), 10 to
    // 100 bins.
    let bins = (orig.len() as u64 / 200).clamp(10, TIMELINE_BINS);
    let bin_ns = total_ns.div_ceil(bins).max(1);
    let timeline = |v: &[Row], from: Option<u64>, scale: f64| {
        let mut counts = vec![0f64; bins as usize + 1];
        if let Some(from) = from {
            for r in v.iter().filter(|r| r.ts_ns >= from) {
                let t = ((r.ts_ns - from) as f64 / scale) as u64;
                counts[((t / bin_ns) as usize).min(bins as usize)] += 1.0;
            }
        }
        counts
    };
    let iops_correlation = pearson(
        &timeline(orig, o_start, speed),
        &timeline(rep, r_start, 1.0),
    );
    let hist = |v: &[Row]| {
        let mut h = LogHist::default();
        for r in v {
            h.add(r.latency_ns);
        }
        h
    };
    let (ho, hr) = (hist(orig), hist(rep));
    Verification {
        reads_only: false,
        recorded_ios: orig.len() as u64,
        replayed_ios: rep.len() as u64,
        recorded_lost_events: 0,
        replayed_lost_events: 0,
        matched_ios: pairs.len() as u64,
        matched_by_sector: by_sector,
        streams: broken.len() as u64,
        streams_in_order: broken.values().filter(|b| !**b).count() as u64,
        pairs_in_order_pct: (consecutive > 0).then(|| in_order as f64 * 100.0 / consecutive as f64),
        issue_error_p50_ns,
        issue_error_p99_ns,
        timeline_bin_ns: bin_ns,
        iops_correlation,
        recorded_latency: LatencySummary::of(&ho),
        replayed_latency: LatencySummary::of(&hr),
        latency_p_value: mann_whitney(&ho, &hr),
    }
}

/// The Pearson correlation of two series, `None` when either is constant.
fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len().min(y.len()) as f64;
    if n < 2.0 {
        return None;
    }
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx).powi(2);
        syy += (b - my).powi(2);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

impl Verification {
    /// I/Os issued, % of recorded.
    pub fn issued_pct(&self) -> Option<f64> {
        (self.recorded_ios > 0).then(|| self.matched_ios as f64 * 100.0 / self.recorded_ios as f64)
    }

    /// One line: `replay: 1500 of 1500 recorded I/Os issued (100.0%) …`.
    pub fn summary(&self) -> String {
        let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("-".to_string(), f);
        let us = |v: f64| format!("{:.1}us", v / 1000.0);
        let lat = |l: &LatencySummary| {
            format!(
                "p50 {} p99 {}",
                opt(l.p50_us, &|v| format!("{v:.1}us")),
                opt(l.p99_us, &|v| format!("{v:.1}us"))
            )
        };
        format!(
            "replay: {} of {} recorded {} issued ({}{}), {} replayed{}; order kept in {} of {} \
             streams ({} of pairs); issue-time error p50 {} p99 {}; IOPS correlation {}; \
             latency {} recorded, {} replayed",
            self.matched_ios,
            self.recorded_ios,
            if self.reads_only {
                "reads and flushes (writes not replayed)"
            } else {
                "I/Os"
            },
            opt(self.issued_pct(), &|v| format!("{v:.1}%")),
            if self.matched_by_sector {
                ""
            } else {
                ", matched by op and size"
            },
            self.replayed_ios,
            match (self.recorded_lost_events, self.replayed_lost_events) {
                (0, 0) => String::new(),
                (o, r) => format!(
                    " (events lost by the recorders: {o} of the original's, {r} of the replay's)"
                ),
            },
            self.streams_in_order,
            self.streams,
            opt(self.pairs_in_order_pct, &|v| format!("{v:.2}%")),
            opt(self.issue_error_p50_ns, &us),
            opt(self.issue_error_p99_ns, &us),
            opt(self.iops_correlation, &|v| format!("{v:.3}")),
            lat(&self.recorded_latency),
            lat(&self.replayed_latency),
        )
    }

    /// Everything as one JSON object.
    pub fn json(&self) -> Value {
        json!({
            "recorded_ios": self.recorded_ios,
            "replayed_ios": self.replayed_ios,
            "recorded_lost_events": self.recorded_lost_events,
            "replayed_lost_events": self.replayed_lost_events,
            "matched_ios": self.matched_ios,
            "matched_by": if self.matched_by_sector { "sector" } else { "op-size-order" },
            "scored_ops": if self.reads_only { "read-flush" } else { "all" },
            "issued_pct": self.issued_pct(),
            "streams": self.streams,
            "streams_in_order": self.streams_in_order,
            "pairs_in_order_pct": self.pairs_in_order_pct,
            "issue_error_p50_ns": self.issue_error_p50_ns,
            "issue_error_p99_ns": self.issue_error_p99_ns,
            "timeline_bin_ns": self.timeline_bin_ns,
            "iops_correlation": self.iops_correlation,
            "latency": {
                "recorded": self.recorded_latency.json(),
                "replayed": self.replayed_latency.json(),
                "mann_whitney_p": self.latency_p_value,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodump_format::Op;

    #[test]
    fn scoring_more_than_fits_is_refused() {
        let ios = 200_000_000;
        let need = ios * SCORE_BYTES_PER_IO;
        let e = check_fits(ios, need, Some(8 << 30)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("200000000 I/Os in memory, about 18.0 GB"),
            "{msg}"
        );
        assert!(
            msg.contains("8.6 GB are available") && msg.contains("--filter"),
            "{msg}"
        );
        check_fits(ios, need, Some(need)).unwrap();
        check_fits(ios, need, None).unwrap();
    }

    #[test]
    fn what_scoring_will_hold_is_known_before_the_replay() {
        let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/oltp-5k.iod");
        // The whole original (5,000 I/Os, writes included) and the replay's I/Os.
        assert_eq!(ios_to_score(&trace, None, 6_000, 2).unwrap(), 11_000);
        // With a filter, one loop's I/Os stand for the part of the original it keeps.
        let f = Expr::parse("op == \"read\"").unwrap();
        assert_eq!(ios_to_score(&trace, Some(&f), 6_000, 2).unwrap(), 9_000);
    }

    /// An original with a stacked device: dm-0's 10 reads, each done by one on sda naming it,
    /// and sda's 2 of its own. Scored as replayed: dm-0's and sda's own, 12; and with a filter
    /// that keeps sda alone, all 12 of sda's.
    #[test]
    fn lower_ios_count_once_as_replay_replays_them() {
        use iodump_format::{DevT, EndInfo, Event, Flags, Header, UpperIo, Writer, WriterOptions};
        let (dm, sda) = (DevT::new(253, 0), DevT::new(8, 0));
        let ev = |ts: u64, dev: DevT, sector: u64, upper: Option<UpperIo>| Event {
            timestamp_ns: ts,
            dev,
            sector,
            bytes: 4096,
            op: Op::Read,
            flags: Flags(0),
            pid: 5,
            tid: 5,
            path_id: 0,
            queue_ns: None,
            latency_ns: 100,
            error: 0,
            cpu: 0,
            syscall: None,
            dirtier_pid: None,
            cgroup_id: 0,
            upper,
        };
        let path =
            std::env::temp_dir().join(format!("iodump-verify-lower-{}.iod", std::process::id()));
        let mut w = Writer::new(
            std::fs::File::create(&path).unwrap(),
            &Header::default(),
            WriterOptions::default(),
        )
        .unwrap();
        for i in 0..10u64 {
            let ts = 1000 * (i + 1);
            w.push(&ev(ts, dm, i * 8, None)).unwrap();
            let up = UpperIo {
                dev: dm,
                timestamp_ns: ts,
            };
            w.push(&ev(ts + 10, sda, 2048 + i * 8, Some(up))).unwrap();
        }
        for i in 0..2u64 {
            w.push(&ev(50_000 + i, sda, 9000 + i * 8, None)).unwrap();
        }
        w.finish(EndInfo::default()).unwrap();
        let (rows, _) = read_rows(&path, None).unwrap();
        let on_dm = rows.iter().filter(|r| r.sector < 2048).count();
        assert_eq!((rows.len(), on_dm), (12, 10));
        let f = Expr::parse("dev == \"8:0\"").unwrap();
        let (rows, _) = read_rows(&path, Some(&f)).unwrap();
        let _ = std::fs::remove_file(&path);
        let on_dm = rows.iter().filter(|r| r.sector < 2048).count();
        assert_eq!((rows.len(), on_dm), (12, 0), "dm-0 filtered out: sda's all");
    }

    fn row(ts_ns: u64, sector: u64, tid: u32) -> Row {
        Row {
            ts_ns,
            sector,
            latency_ns: 20_000 + sector % 1000,
            bytes: 4096,
            tid,
            op: Op::Read.code(),
        }
    }

    #[test]
    fn a_faithful_replay_scores_full_marks() {
        let orig: Vec<Row> = (0..2000u64)
            .map(|i| row(1_000_000 * i, i * 8, (i % 2) as u32))
            .collect();
        // Replayed 5 ms later, 1 µs late each, by other threads.
        let rep: Vec<Row> = orig
            .iter()
            .map(|r| Row {
                ts_ns: r.ts_ns + 5_000_000 + 1000 * (r.sector % 2),
                tid: 77,
                ..*r
            })
            .collect();
        let v = score(&orig, &rep, 1.0);
        assert_eq!(
            (v.recorded_ios, v.replayed_ios, v.matched_ios),
            (2000, 2000, 2000)
        );
        assert_eq!((v.streams, v.streams_in_order), (2, 2));
        assert_eq!(v.pairs_in_order_pct, Some(100.0));
        assert!(v.issue_error_p99_ns.unwrap() <= 1000.0);
        assert!(v.iops_correlation.unwrap() > 0.99 || v.iops_correlation.is_none());
        assert!(v.latency_p_value.unwrap() > 0.5);
        assert!(v
            .summary()
            .starts_with("replay: 2000 of 2000 recorded I/Os issued (100.0%)"));
    }

    #[test]
    fn a_recording_scored_against_itself_has_no_issue_time_error() {
        // UTC times of 2026 (~1.77e18 ns), whose differences a double held apart only to
        // 256 ns: taken as doubles first, the error was up to that much.
        let t0 = 1_770_000_000_123_456_789u64;
        let orig: Vec<Row> = (0..5000u64)
            .map(|i| row(t0 + 1_000_037 * i + i * i % 977, i * 8, (i % 3) as u32))
            .collect();
        let v = score(&orig, &orig, 1.0);
        assert_eq!(v.matched_ios, 5000);
        assert_eq!(
            (v.issue_error_p50_ns, v.issue_error_p99_ns),
            (Some(0.0), Some(0.0))
        );
        // Replayed 3 ms and 7 ns later throughout: still none.
        let later: Vec<Row> = orig
            .iter()
            .map(|r| Row {
                ts_ns: r.ts_ns + 3_000_007,
                ..*r
            })
            .collect();
        let v = score(&orig, &later, 1.0);
        assert_eq!(
            (v.issue_error_p50_ns, v.issue_error_p99_ns),
            (Some(0.0), Some(0.0))
        );
        // Its first I/O 0.9 ms late, every other on time: one I/O's error, not every
        // other's (aligned at the first pair, the p50 was 0.9 ms).
        let mut first_late = orig.clone();
        first_late[0].ts_ns += 900_000;
        let v = score(&orig, &first_late, 1.0);
        assert_eq!(v.issue_error_p50_ns, Some(0.0));
        // Every I/O 100 µs late after the first half: half of them are off.
        let mut drifted = orig.clone();
        for r in &mut drifted[2500..] {
            r.ts_ns += 100_000;
        }
        let v = score(&orig, &drifted, 1.0);
        assert!(
            v.issue_error_p99_ns.unwrap() >= 99_000.0,
            "{:?}",
            v.issue_error_p99_ns
        );
    }

    #[test]
    fn the_replayers_own_io_does_not_shift_the_pairs() {
        // Four sectors read in turn every 250 µs, with bursts (for the timeline).
        let orig: Vec<Row> = (0..4000u64)
            .map(|i| row(250_000 * i + (i / 400 % 2) * 100_000, i % 4 * 8, 1))
            .collect();
        // The replay's recording: the replayer reads the trace (other sectors) for 100 ms,
        // then replays all but the first I/O, 1 ms after it.
        let own = (0..50u64).map(|i| row(2_000_000 * i, 1_000_000 + i * 8, 9));
        let replayed = orig[1..].iter().map(|r| Row {
            ts_ns: r.ts_ns + 101_000_000,
            tid: 7,
            ..*r
        });
        let rep: Vec<Row> = own.chain(replayed).collect();
        let v = score(&orig, &rep, 1.0);
        // (Aligned at the first I/O of each side, 400 pairs were a sector's later reads.)
        assert_eq!(v.matched_ios, 3999);
        assert_eq!(v.issue_error_p99_ns, Some(0.0));
        assert!(
            v.iops_correlation.unwrap() > 0.99,
            "{:?}",
            v.iops_correlation
        );
    }

    #[test]
    fn missing_and_reordered_ios_are_counted() {
        let orig: Vec<Row> = (0..1000u64).map(|i| row(1_000_000 * i, i * 8, 1)).collect();
        // Half issued, pairs swapped, twice as fast.
        let mut rep: Vec<Row> = orig
            .iter()
            .step_by(2)
            .map(|r| Row {
                ts_ns: r.ts_ns / 2,
                ..*r
            })
            .collect();
        for c in rep.chunks_mut(2) {
            if c.len() == 2 {
                let t = c[0].ts_ns;
                c[0].ts_ns = c[1].ts_ns;
                c[1].ts_ns = t;
            }
        }
        rep.sort_by_key(|r| r.ts_ns);
        let v = score(&orig, &rep, 1.0);
        assert_eq!(v.matched_ios, 500);
        assert_eq!(v.streams_in_order, 0);
        assert!(v.pairs_in_order_pct.unwrap() < 60.0);
        // At speed 2 the times fit again (apart from the swaps).
        let v2 = score(&orig, &rep, 2.0);
        assert!(v2.issue_error_p50_ns.unwrap() < v.issue_error_p50_ns.unwrap());
    }
}
