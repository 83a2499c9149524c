//! The end-of-replay report: recorded versus replayed counts, rates and latency percentiles,
//! and the timing error, as text.

use std::fmt::Write as _;

use crate::plan::{IoKind, Plan};
use crate::run::{quantile, RunResult};

/// Percentiles shown side by side.
pub const QUANTILES: [(f64, &str); 5] = [
    (0.5, "p50"),
    (0.9, "p90"),
    (0.99, "p99"),
    (0.999, "p99.9"),
    (1.0, "max"),
];

/// A duration in ns as a short human string (`812ns`, `15.2us`, `3.41ms`, `1.20s`).
pub fn fmt_ns(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        format!("{:.1}us", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2}ms", f / 1e6)
    } else {
        format!("{:.2}s", f / 1e9)
    }
}

fn rate(count: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / ns as f64
    }
}

/// Timing error percentiles (p50, p90, p99, max) in ns, sorting the result's samples.
pub fn timing_error(res: &mut RunResult) -> Option<(u64, u64, u64, u64)> {
    let v = &mut res.timing_error_ns;
    Some((
        quantile(v, 0.5)?,
        quantile(v, 0.9)?,
        quantile(v, 0.99)?,
        quantile(v, 1.0)?,
    ))
}

/// Scheduler lag percentiles (p50, p99, max) in ns.
pub fn scheduler_lag(res: &mut RunResult) -> Option<(u64, u64, u64)> {
    let v = &mut res.scheduler_lag_ns;
    Some((quantile(v, 0.5)?, quantile(v, 0.99)?, quantile(v, 1.0)?))
}

/// The report as text (sorts the result's sample vectors).
pub fn render(plan: &Plan, res: &mut RunResult, speed: f64, no_stall: bool) -> String {
    let mut s = String::new();
    // The recorded counts cover every loop: so does the span the rates are taken over.
    let recorded_span = (plan.span_ns * u64::from(plan.loops.max(1))).max(1);
    let replay_span = res.elapsed_ns.max(1);
    let _ = writeln!(
        s,
        "replayed {} I/Os in {} with {} ({} streams on {} thread{}, {}), recorded span {}{}",
        res.kinds.iter().map(|k| k.issued).sum::<u64>(),
        fmt_ns(res.elapsed_ns),
        res.engine,
        plan.streams.len(),
        res.threads,
        if res.threads == 1 { "" } else { "s" },
        if no_stall {
            "no stall".to_string()
        } else {
            format!("speed {speed}x")
        },
        fmt_ns(plan.span_ns),
        if plan.loops > 1 {
            format!(" x {} loops", plan.loops)
        } else {
            String::new()
        },
    );
    if res.interrupted {
        let _ = writeln!(s, "interrupted: the report covers what was submitted");
    }
    let _ = writeln!(
        s,
        "{:<13} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>11} {:>11}",
        "op",
        "recorded",
        "replayed",
        "skipped",
        "errors",
        "rec IOPS",
        "rep IOPS",
        "rec MiB/s",
        "rep MiB/s"
    );
    for k in IoKind::ALL {
        let i = k as usize;
        let r = &res.kinds[i];
        let rec = plan.recorded_count[i];
        if rec == 0 && r.issued == 0 {
            continue;
        }
        let _ = writeln!(
            s,
            "{:<13} {:>10} {:>10} {:>8} {:>8} {:>10.0} {:>10.0} {:>11.1} {:>11.1}",
            k.name(),
            rec,
            r.issued,
            plan.skipped.not_allowed[i],
            r.errors,
            rate(rec, recorded_span),
            rate(r.issued, replay_span),
            rate(plan.recorded_bytes[i], recorded_span) / 1048576.0,
            rate(r.bytes, replay_span) / 1048576.0,
        );
    }
    let words = plan.skipped_words();
    if !words.is_empty() {
        let _ = writeln!(s, "skipped: {words}");
    }
    if plan.wrapped > 0 || plan.realigned > 0 {
        let _ = writeln!(
            s,
            "adjusted: {} wrapped past the target's end, {} rounded to its block size",
            plan.wrapped, plan.realigned
        );
    }
    let _ = writeln!(s, "latency (recorded -> replayed):");
    let mut head = format!("{:<13}", "op");
    for (_, name) in QUANTILES {
        let _ = write!(head, " {:>21}", name);
    }
    let _ = writeln!(s, "{head}");
    for k in IoKind::ALL {
        let r = &mut res.kinds[k as usize];
        if r.latency_ns.is_empty() {
            continue;
        }
        let mut line = format!("{:<13}", k.name());
        for (q, _) in QUANTILES {
            let a = quantile(&mut r.recorded_latency_ns, q).unwrap_or(0);
            let b = quantile(&mut r.latency_ns, q).unwrap_or(0);
            let _ = write!(line, " {:>21}", format!("{} -> {}", fmt_ns(a), fmt_ns(b)));
        }
        let _ = writeln!(s, "{line}");
    }
    if let Some((p50, p90, p99, max)) = timing_error(res) {
        let _ = writeln!(
            s,
            "timing error (submit - schedule): p50 {} p90 {} p99 {} max {}; {} I/Os waited for earlier I/Os of their stream",
            fmt_ns(p50),
            fmt_ns(p90),
            fmt_ns(p99),
            fmt_ns(max),
            res.depth_waits
        );
    }
    if let Some((p50, p99, max)) = scheduler_lag(res) {
        let _ = writeln!(
            s,
            "scheduler lag (submit - due and allowed): p50 {} p99 {} max {}; most in flight {}; {} done inline (fast device, nothing in flight)",
            fmt_ns(p50),
            fmt_ns(p99),
            fmt_ns(max),
            res.max_in_flight,
            res.inline
        );
    }
    if let Some((errno, n)) = res.first_error {
        let _ = writeln!(
            s,
            "errors: {n} I/Os failed with {}",
            std::io::Error::from_raw_os_error(errno)
        );
    }
    s
}

/// Per kind: (recorded, replayed) value at each of [`QUANTILES`].
pub type LatencyRows = Vec<(IoKind, Vec<(Option<u64>, Option<u64>)>)>;

/// Block-layer latencies (entry to completion, as the recorder measures them) of the
/// recorded I/Os of the plan and of a recording of the replay, side by side, by kind.
/// `replayed_ns` is indexed by [`IoKind`]; vectors are sorted in place.
pub fn block_latency_rows(plan: &Plan, replayed_ns: &mut [Vec<u64>; 5]) -> LatencyRows {
    let mut recorded: [Vec<u64>; 5] = Default::default();
    for io in &plan.ios {
        recorded[io.kind as usize].push(io.recorded_latency_ns);
    }
    let mut rows = Vec::new();
    for k in IoKind::ALL {
        let i = k as usize;
        if recorded[i].is_empty() && replayed_ns[i].is_empty() {
            continue;
        }
        let cells = QUANTILES
            .iter()
            .map(|&(q, _)| {
                (
                    quantile(&mut recorded[i], q),
                    quantile(&mut replayed_ns[i], q),
                )
            })
            .collect();
        rows.push((k, cells));
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
    let mut head = format!("{:<13}", "op");
    for (_, name) in QUANTILES {
        let _ = write!(head, " {:>21}", name);
    }
    let _ = writeln!(s, "{head}");
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
