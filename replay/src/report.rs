//! The end-of-replay report: recorded versus replayed counts, rates and latency percentiles,
//! the timing error, and with `-o` the block-layer latencies of the replay's own recording.
//! [`Report::new`] computes it once from the plan and the run's result; [`Report::text`] and
//! [`Report::json`] show that same report.

use std::fmt::Write as _;

use iodump_format::units::{format_duration_ns, DurationStyle};
use serde_json::{json, Map, Value};

use crate::hist::Hist;
use crate::plan::{IoKind, Plan, Skipped};
use crate::run::RunResult;

/// Percentiles shown side by side.
pub const QUANTILES: [(f64, &str); 5] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (1.0, "max"),
];

/// (recorded, replayed) latency in ns at each of [`QUANTILES`]; `None` where there is no
/// sample.
pub type LatencyCells = [(Option<u64>, Option<u64>); QUANTILES.len()];

/// Per kind: its [`LatencyCells`].
pub type LatencyRows = Vec<(IoKind, LatencyCells)>;

/// A duration in ns as a short human string (`812ns`, `15.2us`, `3.41ms`, `1.20s`): the
/// one formatter of [`iodump_format::units`].
pub fn fmt_ns(ns: u64) -> String {
    format_duration_ns(ns as f64, DurationStyle::Short)
}

fn rate(count: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / ns as f64
    }
}

/// The cells of `recorded_ns` next to `replayed_ns`.
fn latency_cells(recorded_ns: &Hist, replayed_ns: &Hist) -> LatencyCells {
    QUANTILES.map(|(q, _)| (recorded_ns.quantile(q), replayed_ns.quantile(q)))
}

/// What one kind of operation did, recorded and replayed.
#[derive(Clone, Debug, PartialEq)]
pub struct OpReport {
    /// The kind.
    pub kind: IoKind,
    /// Recorded I/Os (every loop).
    pub recorded: u64,
    /// Their bytes.
    pub recorded_bytes: u64,
    /// Submitted.
    pub replayed: u64,
    /// Completed without error.
    pub ok: u64,
    /// Completed with an error.
    pub errors: u64,
    /// Bytes of the successful ones.
    pub replayed_bytes: u64,
    /// Not replayed for want of `--allow-writes`.
    pub skipped_not_allowed: u64,
    /// Recorded against replayed latency (submit to completion).
    pub latency_ns: LatencyCells,
}

impl OpReport {
    /// True when some replayed I/O of this kind completed.
    pub fn has_replayed_latency(&self) -> bool {
        self.latency_ns.iter().any(|(_, b)| b.is_some())
    }
}

/// Percentiles of the timing error (actual minus scheduled submit time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimingError {
    /// Median, in ns.
    pub p50_ns: u64,
    /// 90th percentile, in ns.
    pub p90_ns: u64,
    /// 99th percentile, in ns.
    pub p99_ns: u64,
    /// Largest, in ns.
    pub max_ns: u64,
}

impl TimingError {
    /// The percentiles of `samples_ns`; `None` when empty.
    pub fn of(samples_ns: &Hist) -> Option<TimingError> {
        Some(TimingError {
            p50_ns: samples_ns.quantile(0.5)?,
            p90_ns: samples_ns.quantile(0.9)?,
            p99_ns: samples_ns.quantile(0.99)?,
            max_ns: samples_ns.max()?,
        })
    }
}

/// Percentiles of the scheduler's lag (actual submit minus due and allowed by depth).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerLag {
    /// Median, in ns.
    pub p50_ns: u64,
    /// 99th percentile, in ns.
    pub p99_ns: u64,
    /// Largest, in ns.
    pub max_ns: u64,
}

impl SchedulerLag {
    /// The percentiles of `samples_ns`; `None` when empty.
    pub fn of(samples_ns: &Hist) -> Option<SchedulerLag> {
        Some(SchedulerLag {
            p50_ns: samples_ns.quantile(0.5)?,
            p99_ns: samples_ns.quantile(0.99)?,
            max_ns: samples_ns.max()?,
        })
    }
}

/// The computed report.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Engine name.
    pub engine: &'static str,
    /// Time scale.
    pub speed: f64,
    /// Recorded times were ignored.
    pub no_stall: bool,
    /// Streams replayed.
    pub streams: usize,
    /// Scheduler threads.
    pub threads: usize,
    /// I/Os planned (every loop).
    pub planned: u64,
    /// Recorded span of one loop, in ns.
    pub recorded_span_ns: u64,
    /// Times the trace was replayed.
    pub loops: u32,
    /// First submit to last completion, in ns.
    pub elapsed_ns: u64,
    /// Stopped before the plan ended.
    pub interrupted: bool,
    /// The kinds recorded or replayed, in [`IoKind::ALL`] order.
    pub ops: Vec<OpReport>,
    /// What was not replayed, and why.
    pub skipped: Skipped,
    /// [`Report::skipped`] in words (empty when nothing was skipped).
    pub skipped_words: String,
    /// I/Os whose offset wrapped.
    pub wrapped: u64,
    /// I/Os rounded to the target's block size.
    pub realigned: u64,
    /// `None` when nothing was submitted.
    pub timing_error: Option<TimingError>,
    /// `None` when nothing was submitted.
    pub scheduler_lag: Option<SchedulerLag>,
    /// I/Os that waited past their time for earlier I/Os of their stream.
    pub depth_waits: u64,
    /// Most I/Os in flight at once (summed over threads).
    pub max_in_flight: u32,
    /// I/Os done inline by the scheduler thread.
    pub inline: u64,
    /// I/Os the helper thread did because another was due at once.
    pub handed_off: u64,
    /// Offers the helper had not taken in time, done by the scheduler.
    pub taken_back: u64,
    /// The most frequent error, as (errno, count).
    pub first_error: Option<(i32, u64)>,
    /// With `-o`: block-layer latencies, recorded against the recording of the replay.
    pub block_latency: Option<LatencyRows>,
}

impl Report {
    /// The report of `res`, a run of `plan`.
    pub fn new(plan: &Plan, res: &RunResult, speed: f64, no_stall: bool) -> Report {
        let timing_error = TimingError::of(&res.timing_error_ns);
        let scheduler_lag = SchedulerLag::of(&res.scheduler_lag_ns);
        Report {
            engine: res.engine,
            speed,
            no_stall,
            streams: plan.streams.len(),
            threads: res.threads,
            planned: plan.planned_ios(),
            recorded_span_ns: plan.span_ns,
            loops: plan.loops,
            elapsed_ns: res.elapsed_ns,
            interrupted: res.interrupted,
            ops: op_reports(plan, res),
            skipped: plan.skipped.clone(),
            skipped_words: plan.skipped_words(),
            wrapped: plan.wrapped,
            realigned: plan.realigned,
            timing_error,
            scheduler_lag,
            depth_waits: res.depth_waits,
            max_in_flight: res.max_in_flight,
            inline: res.inline,
            handed_off: res.handed_off,
            taken_back: res.taken_back,
            first_error: res.first_error,
            block_latency: None,
        }
    }

    /// Replayed I/Os that failed.
    pub fn failed_ios(&self) -> u64 {
        self.ops.iter().map(|o| o.errors).sum()
    }

    /// The report as text, one line per fact or table row.
    pub fn text(&self) -> String {
        let mut s = String::new();
        self.write_summary(&mut s);
        self.write_counts(&mut s);
        self.write_adjustments(&mut s);
        self.write_latency(&mut s);
        self.write_timing(&mut s);
        if let Some(rows) = &self.block_latency {
            s.push_str(&render_block_latency(rows));
        }
        s
    }

    fn write_summary(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "replayed {} I/Os in {} with {} ({} streams on {} thread{}, {}), recorded span {}{}",
            self.ops.iter().map(|o| o.replayed).sum::<u64>(),
            fmt_ns(self.elapsed_ns),
            self.engine,
            self.streams,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            if self.no_stall {
                "no stall".to_string()
            } else {
                format!("speed {}x", self.speed)
            },
            fmt_ns(self.recorded_span_ns),
            if self.loops > 1 {
                format!(" x {} loops", self.loops)
            } else {
                String::new()
            },
        );
        if self.interrupted {
            let _ = writeln!(s, "interrupted: the report covers what was submitted");
        }
    }

    /// The table of counts and rates, by kind.
    fn write_counts(&self, s: &mut String) {
        // The recorded counts cover every loop: so does the span the rates are taken over.
        let recorded_span = (self.recorded_span_ns * u64::from(self.loops.max(1))).max(1);
        let replay_span = self.elapsed_ns.max(1);
        let _ = writeln!(
            s,
            "{:<13} {:>10} {:>10} {:>11} {:>8} {:>10} {:>10} {:>11} {:>11}",
            "op",
            "recorded",
            "replayed",
            // Only writes left out for want of --allow-writes: the other reasons (beyond the
            // target's end, no target, a filter) are in the `skipped:` line below.
            "not allowed",
            "errors",
            "rec IOPS",
            "rep IOPS",
            "rec MiB/s",
            "rep MiB/s"
        );
        for o in &self.ops {
            let _ = writeln!(
                s,
                "{:<13} {:>10} {:>10} {:>11} {:>8} {:>10.0} {:>10.0} {:>11.1} {:>11.1}",
                o.kind.name(),
                o.recorded,
                o.replayed,
                o.skipped_not_allowed,
                o.errors,
                rate(o.recorded, recorded_span),
                rate(o.replayed, replay_span),
                rate(o.recorded_bytes, recorded_span) / 1048576.0,
                rate(o.replayed_bytes, replay_span) / 1048576.0,
            );
        }
    }

    fn write_adjustments(&self, s: &mut String) {
        if !self.skipped_words.is_empty() {
            let _ = writeln!(s, "skipped: {}", self.skipped_words);
        }
        if self.wrapped > 0 || self.realigned > 0 {
            let _ = writeln!(
                s,
                "adjusted: {} wrapped past the target's end, {} rounded to its block size",
                self.wrapped, self.realigned
            );
        }
    }

    fn write_latency(&self, s: &mut String) {
        let _ = writeln!(s, "latency (recorded -> replayed):");
        let _ = writeln!(s, "{}", latency_head());
        for o in self.ops.iter().filter(|o| o.has_replayed_latency()) {
            let mut line = format!("{:<13}", o.kind.name());
            for (a, b) in o.latency_ns {
                let cell = format!("{} -> {}", fmt_ns(a.unwrap_or(0)), fmt_ns(b.unwrap_or(0)));
                let _ = write!(line, " {cell:>21}");
            }
            let _ = writeln!(s, "{line}");
        }
    }

    /// Timing error, scheduler lag and errors.
    fn write_timing(&self, s: &mut String) {
        if let Some(t) = self.timing_error {
            let _ = writeln!(
                s,
                "timing error (submit - schedule): p50 {} p90 {} p99 {} max {}; {} I/Os waited for earlier I/Os of their stream",
                fmt_ns(t.p50_ns),
                fmt_ns(t.p90_ns),
                fmt_ns(t.p99_ns),
                fmt_ns(t.max_ns),
                self.depth_waits
            );
        }
        if let Some(l) = self.scheduler_lag {
            let _ = writeln!(
                s,
                "scheduler lag (submit - due and allowed): p50 {} p99 {} max {}; most in flight {}; {} done inline (fast device, nothing in flight), {} by the helper thread (another due at once), {} taken back from it",
                fmt_ns(l.p50_ns),
                fmt_ns(l.p99_ns),
                fmt_ns(l.max_ns),
                self.max_in_flight,
                self.inline,
                self.handed_off,
                self.taken_back
            );
        }
        if let Some((errno, n)) = self.first_error {
            let _ = writeln!(
                s,
                "errors: {n} I/Os failed with {}",
                std::io::Error::from_raw_os_error(errno)
            );
        }
    }

    /// The report as one JSON object (`iodump replay --json`).
    pub fn json(&self) -> Value {
        let mut ops = Map::new();
        for o in &self.ops {
            ops.insert(
                o.kind.name().to_string(),
                json!({
                    "recorded": o.recorded,
                    "recorded_bytes": o.recorded_bytes,
                    "replayed": o.replayed,
                    "ok": o.ok,
                    "errors": o.errors,
                    "replayed_bytes": o.replayed_bytes,
                    "skipped_not_allowed": o.skipped_not_allowed,
                    "latency": latency_json(&o.latency_ns),
                }),
            );
        }
        let mut v = json!({
            "engine": self.engine,
            "speed": self.speed,
            "no_stall": self.no_stall,
            "streams": self.streams,
            "threads": self.threads,
            "planned": self.planned,
            "recorded_span_ns": self.recorded_span_ns,
            "loops": self.loops,
            "elapsed_ns": self.elapsed_ns,
            "interrupted": self.interrupted,
            "ops": ops,
            "skipped": {
                "beyond_end": self.skipped.beyond_end,
                "unmapped": self.skipped.unmapped,
                "lower": self.skipped.lower,
                "unsupported_op": self.skipped.unsupported_op,
                "filtered": self.skipped.filtered,
            },
            "wrapped": self.wrapped,
            "realigned": self.realigned,
            "timing_error_ns": self.timing_error.map(|t| json!({"p50": t.p50_ns, "p90": t.p90_ns, "p99": t.p99_ns, "max": t.max_ns})),
            "scheduler_lag_ns": self.scheduler_lag.map(|l| json!({"p50": l.p50_ns, "p99": l.p99_ns, "max": l.max_ns})),
            "depth_waits": self.depth_waits,
            "max_in_flight": self.max_in_flight,
            "inline": self.inline,
            "handed_off": self.handed_off,
            "taken_back": self.taken_back,
            "summary": fmt_ns(self.elapsed_ns),
        });
        if let Some(rows) = &self.block_latency {
            let by_kind: Map<String, Value> = rows
                .iter()
                .map(|(k, cells)| (k.name().to_string(), latency_json(cells)))
                .collect();
            v["block_latency"] = Value::Object(by_kind);
        }
        v
    }
}

/// One [`OpReport`] per kind recorded or replayed.
fn op_reports(plan: &Plan, res: &RunResult) -> Vec<OpReport> {
    let mut ops = Vec::new();
    for kind in IoKind::ALL {
        let i = kind as usize;
        let r = &res.kinds[i];
        if plan.recorded_count[i] == 0 && r.issued == 0 {
            continue;
        }
        ops.push(OpReport {
            kind,
            recorded: plan.recorded_count[i],
            recorded_bytes: plan.recorded_bytes[i],
            replayed: r.issued,
            ok: r.ok,
            errors: r.errors,
            replayed_bytes: r.bytes,
            skipped_not_allowed: plan.skipped.not_allowed[i],
            latency_ns: latency_cells(&r.recorded_latency_ns, &r.latency_ns),
        });
    }
    ops
}

/// `{"p50": {"recorded_ns": …, "replayed_ns": …}, …}`.
fn latency_json(cells: &LatencyCells) -> Value {
    let mut q = Map::new();
    for ((_, name), (a, b)) in QUANTILES.iter().zip(cells) {
        q.insert(
            name.to_string(),
            json!({"recorded_ns": a, "replayed_ns": b}),
        );
    }
    Value::Object(q)
}

/// The head of a latency table: `op` and the quantiles' names.
fn latency_head() -> String {
    let mut head = format!("{:<13}", "op");
    for (_, name) in QUANTILES {
        let _ = write!(head, " {name:>21}");
    }
    head
}

/// Block-layer latencies (entry to completion, as the recorder measures them) of the
/// recorded I/Os of the plan (one loop: every loop has the same distribution) and of a
/// recording of the replay, side by side, by kind. `replayed_ns` is indexed by [`IoKind`].
pub fn block_latency_rows(plan: &Plan, replayed_ns: &[Hist; 5]) -> LatencyRows {
    let mut recorded: [Hist; 5] = Default::default();
    for io in &plan.ios {
        recorded[io.kind as usize].add(io.recorded_latency_ns);
    }
    let mut rows = Vec::new();
    for k in IoKind::ALL {
        let i = k as usize;
        if recorded[i].is_empty() && replayed_ns[i].is_empty() {
            continue;
        }
        rows.push((k, latency_cells(&recorded[i], &replayed_ns[i])));
    }
    rows
}

/// [`block_latency_rows`] as text.
pub fn render_block_latency(rows: &LatencyRows) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "block-layer latency, from the recording of the replay (recorded -> replayed):"
    );
    let _ = writeln!(s, "{}", latency_head());
    let f = |v: Option<u64>| v.map_or("-".to_string(), fmt_ns);
    for (k, cells) in rows {
        let mut line = format!("{:<13}", k.name());
        for (a, b) in cells {
            let _ = write!(line, " {:>21}", format!("{} -> {}", f(*a), f(*b)));
        }
        let _ = writeln!(s, "{line}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Stream;

    /// Four reads recorded and replayed over 1 s (one failed with EIO), two writes
    /// recorded and skipped; replayed in 2 s at twice the speed.
    fn sample() -> Report {
        let mut plan = Plan {
            span_ns: 1_000_000_000,
            loops: 1,
            ..Plan::default()
        };
        plan.streams.push(Stream {
            pid: 1,
            tid: 1,
            ios: vec![0, 1, 2, 3],
        });
        plan.recorded_count[IoKind::Read as usize] = 4;
        plan.recorded_bytes[IoKind::Read as usize] = 4 << 20;
        plan.recorded_count[IoKind::Write as usize] = 2;
        plan.recorded_bytes[IoKind::Write as usize] = 8192;
        plan.skipped.not_allowed[IoKind::Write as usize] = 2;
        plan.ios.resize(4, plan_io());
        let mut res = RunResult {
            engine: "io_uring",
            threads: 1,
            elapsed_ns: 2_000_000_000,
            timing_error_ns: hist(&[400, 100, 300, 200]),
            scheduler_lag_ns: hist(&[30, 10, 20, 40]),
            depth_waits: 1,
            max_in_flight: 2,
            first_error: Some((libc::EIO, 1)),
            ..RunResult::default()
        };
        let r = &mut res.kinds[IoKind::Read as usize];
        r.issued = 4;
        r.ok = 3;
        r.errors = 1;
        r.bytes = 3 << 20;
        r.latency_ns = hist(&[4_000, 1_000, 3_000, 2_000]);
        r.recorded_latency_ns = hist(&[900, 500, 700, 600]);
        Report::new(&plan, &res, 2.0, false)
    }

    fn hist(v: &[u64]) -> Hist {
        let mut h = Hist::default();
        for &x in v {
            h.add(x);
        }
        h
    }

    fn plan_io() -> crate::plan::PlannedIo {
        crate::plan::PlannedIo {
            sched_ns: 0,
            offset_bytes: 0,
            len_bytes: 1 << 20,
            stream: 0,
            depth: 1,
            target: 0,
            kind: IoKind::Read,
            fua: false,
            recorded_latency_ns: 600,
            recorded_offset_bytes: 0,
        }
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(fmt_ns(812), "812ns");
        assert_eq!(fmt_ns(15_240), "15.2us");
        assert_eq!(fmt_ns(3_412_000), "3.41ms");
        assert_eq!(fmt_ns(1_204_000_000), "1.20s");
    }

    #[test]
    fn the_report_is_computed_once() {
        let r = sample();
        let kinds: Vec<IoKind> = r.ops.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [IoKind::Read, IoKind::Write],
            "only what was recorded or replayed"
        );
        let read = &r.ops[0];
        assert_eq!(
            (read.recorded, read.replayed, read.ok, read.errors),
            (4, 4, 3, 1)
        );
        // p50 of 500, 600, 700, 900 ns and of 1, 2, 3, 4 µs by linear interpolation
        // (format::stats::quantile_linear) between the middles of their bins (600 and 700
        // are in bins 4 ns wide, 2 and 3 µs in bins 8 and 16 wide).
        assert_eq!(read.latency_ns[0], (Some(652), Some(2_502)), "p50");
        assert_eq!(read.latency_ns[4], (Some(900), Some(4_000)), "max");
        assert!(read.has_replayed_latency());
        assert!(!r.ops[1].has_replayed_latency());
        assert_eq!(r.ops[1].skipped_not_allowed, 2);
        assert_eq!(r.failed_ios(), 1);
        assert_eq!(
            r.timing_error,
            // 100, 200, 300, 400 ns by linear interpolation (300 in a bin 2 ns wide, so
            // 301 between the ends, which are exact).
            Some(TimingError {
                p50_ns: 251,
                p90_ns: 370,
                p99_ns: 397,
                max_ns: 400
            })
        );
        assert_eq!(
            r.scheduler_lag,
            Some(SchedulerLag {
                p50_ns: 25,
                p99_ns: 40,
                max_ns: 40
            })
        );
        assert_eq!(r.skipped_words, "2 write without --allow-writes");
        assert_eq!(TimingError::of(&Hist::default()), None);
    }

    #[test]
    fn text_shows_counts_rates_latency_and_timing() {
        let text = sample().text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "replayed 4 I/Os in 2.00s with io_uring (1 streams on 1 thread, speed 2x), recorded span 1.00s"
        );
        assert!(lines[1].starts_with("op  "), "{text}");
        // 4 recorded in 1 s, 4 replayed in 2 s; 4 MiB in 1 s, 3 MiB in 2 s.
        let read: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(read, ["read", "4", "4", "0", "1", "4", "2", "4.0", "1.5"]);
        let write: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(write, ["write", "2", "0", "2", "0", "2", "0", "0.0", "0.0"]);
        assert_eq!(lines[4], "skipped: 2 write without --allow-writes");
        assert_eq!(lines[5], "latency (recorded -> replayed):");
        let lat: Vec<&str> = lines[7].split_whitespace().collect();
        assert_eq!(lat[..4], ["read", "652ns", "->", "2.5us"]);
        assert!(
            !lines[8].starts_with("write"),
            "no latency without completions: {text}"
        );
        assert_eq!(
            lines[8],
            "timing error (submit - schedule): p50 251ns p90 370ns p99 397ns max 400ns; 1 I/Os waited for earlier I/Os of their stream"
        );
        assert!(lines[9].starts_with("scheduler lag (submit - due and allowed): p50 25ns p99 40ns max 40ns; most in flight 2; 0 done inline"));
        assert!(
            lines[10].starts_with("errors: 1 I/Os failed with "),
            "{text}"
        );
        assert_eq!(lines.len(), 11);
        assert!(!text.contains("block-layer"));
    }

    #[test]
    fn json_is_the_same_report() {
        let mut r = sample();
        let v = r.json();
        assert_eq!(v["engine"], "io_uring");
        assert_eq!(v["speed"], 2.0);
        assert_eq!(v["planned"], 4);
        assert_eq!(v["recorded_span_ns"], 1_000_000_000u64);
        assert_eq!(v["summary"], "2.00s");
        assert_eq!(v["ops"]["read"]["errors"], 1);
        assert_eq!(v["ops"]["read"]["latency"]["p50"]["replayed_ns"], 2_502);
        assert_eq!(v["ops"]["write"]["skipped_not_allowed"], 2);
        assert!(v["ops"]["write"]["latency"]["max"]["replayed_ns"].is_null());
        assert!(v["ops"].get("flush").is_none());
        assert_eq!(v["timing_error_ns"]["p90"], 370);
        assert_eq!(v["scheduler_lag_ns"]["p99"], 40);
        assert_eq!(v["skipped"]["beyond_end"], 0);
        assert!(v.get("block_latency").is_none());
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 22, "{keys:?}");

        let mut replayed: [Hist; 5] = Default::default();
        replayed[IoKind::Read as usize] = hist(&[50, 70]);
        let mut plan = Plan::default();
        plan.ios.resize(2, plan_io());
        r.block_latency = Some(block_latency_rows(&plan, &replayed));
        let v = r.json();
        assert_eq!(v["block_latency"]["read"]["p50"]["recorded_ns"], 600);
        assert_eq!(v["block_latency"]["read"]["max"]["replayed_ns"], 70);
        let text = r.text();
        let tail: Vec<&str> = text.lines().rev().take(3).collect();
        assert_eq!(
            tail[2],
            "block-layer latency, from the recording of the replay (recorded -> replayed):"
        );
        let row: Vec<&str> = tail[0].split_whitespace().collect();
        // p50 of 50 and 70 ns, interpolated.
        assert_eq!(row[..4], ["read", "600ns", "->", "60ns"]);
    }
}
