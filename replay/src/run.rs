//! The scheduler: walks the plan's streams, submits each I/O when its time has come and its
//! stream's depth allows, reaps completions, and measures everything the report shows.
//!
//! One thread does all of it. Between submissions it blocks in the engine with a timeout that
//! ends 200 µs before the next scheduled I/O, then spins, so that submit times are not at the
//! mercy of timer slack.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::engine::{Completion, Engine, Request};
use crate::error::ReplayError;
use crate::plan::{Plan, PlannedIo, Stream};

/// How to run a plan.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Time scale: 2.0 replays twice as fast (gaps halved).
    pub speed: f64,
    /// Ignore recorded times; keep order and depth only.
    pub no_stall: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            speed: 1.0,
            no_stall: false,
        }
    }
}

/// What one kind of operation did.
#[derive(Clone, Debug, Default)]
pub struct KindResult {
    /// Submitted.
    pub issued: u64,
    /// Completed without error.
    pub ok: u64,
    /// Completed with an error.
    pub errors: u64,
    /// Bytes of the successful ones.
    pub bytes: u64,
    /// Submit to completion, per completed I/O, in ns.
    pub latency_ns: Vec<u64>,
    /// The recorded latencies of the same I/Os, in ns.
    pub recorded_latency_ns: Vec<u64>,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// By [`IoKind`] index.
    pub kinds: [KindResult; 5],
    /// First submit to last completion, in ns.
    pub elapsed_ns: u64,
    /// Actual minus scheduled submit time, per I/O, in ns (scheduled = recorded offset /
    /// speed; 0 with `--no-stall`). Includes waiting for the stream's earlier I/Os.
    pub timing_error_ns: Vec<u64>,
    /// Actual submit time minus the moment the I/O was both due and allowed by its stream's
    /// depth: the scheduler's own lateness, in ns.
    pub scheduler_lag_ns: Vec<u64>,
    /// I/Os that had to wait past their scheduled time for earlier I/Os of their stream.
    pub depth_waits: u64,
    /// Times an I/O was due but every buffer slot was busy.
    pub slot_waits: u64,
    /// Most I/Os in flight at once.
    pub max_in_flight: u32,
    /// I/Os done synchronously by the scheduler thread (fast device, nothing in flight).
    pub inline: u64,
    /// The most frequent error, as (errno, count).
    pub first_error: Option<(i32, u64)>,
    /// Stopped by the stop flag before the plan ended.
    pub interrupted: bool,
    /// Engine name.
    pub engine: &'static str,
    /// Scheduler threads that ran.
    pub threads: usize,
    /// When the first I/O was submitted.
    pub first_submit: Option<Instant>,
    /// When the last I/O completed.
    pub last_completion: Option<Instant>,
}

/// Splits the streams into `n` shards of about equal I/O counts (largest streams first, each
/// to the least loaded shard); empty shards are dropped.
pub fn shard_streams(plan: &Plan, n: usize) -> Vec<Vec<u32>> {
    let n = n.clamp(1, plan.streams.len().max(1));
    let mut order: Vec<u32> = (0..plan.streams.len() as u32).collect();
    order.sort_by_key(|&s| Reverse(plan.streams[s as usize].ios.len()));
    let mut shards: Vec<(usize, Vec<u32>)> = vec![(0, Vec::new()); n];
    for s in order {
        if let Some(min) = shards.iter_mut().min_by_key(|x| x.0) {
            min.0 += plan.streams[s as usize].ios.len();
            min.1.push(s);
        }
    }
    shards
        .into_iter()
        .map(|x| x.1)
        .filter(|v| !v.is_empty())
        .collect()
}

/// Combines the results of shards run side by side.
pub fn merge(parts: Vec<RunResult>) -> RunResult {
    let mut out = RunResult {
        threads: parts.len(),
        ..RunResult::default()
    };
    let mut errors: std::collections::HashMap<i32, u64> = std::collections::HashMap::new();
    for p in parts {
        out.engine = p.engine;
        for (a, b) in out.kinds.iter_mut().zip(p.kinds) {
            a.issued += b.issued;
            a.ok += b.ok;
            a.errors += b.errors;
            a.bytes += b.bytes;
            a.latency_ns.extend(b.latency_ns);
            a.recorded_latency_ns.extend(b.recorded_latency_ns);
        }
        out.timing_error_ns.extend(p.timing_error_ns);
        out.scheduler_lag_ns.extend(p.scheduler_lag_ns);
        out.depth_waits += p.depth_waits;
        out.slot_waits += p.slot_waits;
        out.max_in_flight += p.max_in_flight;
        out.inline += p.inline;
        out.interrupted |= p.interrupted;
        if let Some((e, c)) = p.first_error {
            *errors.entry(e).or_default() += c;
        }
        out.first_submit = match (out.first_submit, p.first_submit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        out.last_completion = match (out.last_completion, p.last_completion) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    if let (Some(f), Some(l)) = (out.first_submit, out.last_completion) {
        out.elapsed_ns = l.saturating_duration_since(f).as_nanos() as u64;
    }
    out.first_error = errors.into_iter().max_by_key(|&(e, c)| (c, Reverse(e)));
    out
}

#[derive(Clone, Copy)]
struct SlotInfo {
    io: u32,
    /// Index of the stream in this shard.
    stream: u32,
    submit: Instant,
}

/// Completed I/Os are added to the shared progress counter this many at a time.
const PUBLISH_EVERY: u64 = 256;

/// Spin instead of sleeping when the next I/O is due within this.
const SPIN: Duration = Duration::from_micros(200);

/// I/O is done synchronously by the scheduler thread, when nothing else is in flight, while
/// the mean completion time is below this (RAM-backed and the fastest flash devices): a
/// hand-off to the kernel's or our own worker threads would cost more than the I/O.
const INLINE_BELOW_NS: f64 = 30_000.0;

/// Poll this long for a completion before sleeping in the engine.
const SPIN_FOR_COMPLETION: Duration = Duration::from_micros(100);

/// What the scheduler threads of one replay share.
#[derive(Clone, Copy)]
pub struct Shared<'a> {
    /// Time zero of the schedule.
    pub start: Instant,
    /// Set to stop early (I/O in flight is still reaped).
    pub stop: &'a AtomicBool,
    /// Completed I/Os, added in batches (for progress displays).
    pub done_ios: &'a AtomicU64,
}

/// Runs the streams `shard` (indices into `plan.streams`) of `plan` on `engine`, with `slots`
/// buffers.
pub fn run(
    plan: &Plan,
    shard: &[u32],
    engine: &mut dyn Engine,
    slots: u32,
    o: RunOptions,
    shared: Shared<'_>,
) -> Result<RunResult, ReplayError> {
    let Shared {
        start,
        stop,
        done_ios,
    } = shared;
    let streams: Vec<&Stream> = shard.iter().map(|&i| &plan.streams[i as usize]).collect();
    let n: usize = streams.iter().map(|st| st.ios.len()).sum();
    let mut res = RunResult {
        engine: engine.name(),
        ..RunResult::default()
    };
    res.timing_error_ns.reserve(n);
    res.scheduler_lag_ns.reserve(n);
    let speed = if o.speed > 0.0 && o.speed.is_finite() {
        o.speed
    } else {
        1.0
    };
    let due_of = |sched_ns: u64| -> u64 {
        if o.no_stall {
            0
        } else {
            (sched_ns as f64 / speed) as u64
        }
    };
    let mut next = vec![0usize; streams.len()];
    let mut in_flight = vec![0u32; streams.len()];
    let mut blocked = vec![false; streams.len()];
    // When a stream's next I/O became allowed by depth (ns since start).
    let mut ready_at = vec![0u64; streams.len()];
    let mut heap: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::with_capacity(streams.len());
    for (s, st) in streams.iter().enumerate() {
        if let Some(&first) = st.ios.first() {
            heap.push(Reverse((
                due_of(plan.ios[first as usize].sched_ns),
                s as u32,
            )));
        }
    }
    let mut free: Vec<u32> = (0..slots.max(1)).rev().collect();
    let mut slot_info = vec![
        SlotInfo {
            io: 0,
            stream: 0,
            submit: Instant::now(),
        };
        slots.max(1) as usize
    ];
    let mut errors: std::collections::HashMap<i32, u64> = std::collections::HashMap::new();
    let mut done: Vec<Completion> = Vec::with_capacity(slots as usize);
    // (slot, due_ns, allowed_ns) of requests pushed but not yet submitted.
    let mut batch: Vec<(u32, u64, u64)> = Vec::with_capacity(slots as usize);
    let mut total_in_flight = 0u32;
    let mut last_completion = start;
    let mut first_submit: Option<Instant> = None;
    let mut stopping = false;
    let ns_since = |t: Instant| t.saturating_duration_since(start).as_nanos() as u64;
    // Mean completion time seen so far (exponentially weighted); unknown at first, so the
    // first I/Os go through the engine.
    let mut ewma_latency_ns = f64::INFINITY;
    // Completions not yet added to `done_ios` (shared with other threads: added in batches).
    let mut unpublished = 0u64;

    loop {
        if !stopping && stop.load(Ordering::Relaxed) {
            stopping = true;
            res.interrupted = true;
            heap.clear();
        }
        let mut now_ns = ns_since(Instant::now());
        // Submit everything due.
        while let Some(&Reverse((due, s))) = heap.peek() {
            if due > now_ns {
                break;
            }
            let Some(&slot) = free.last() else {
                res.slot_waits += 1;
                break;
            };
            heap.pop();
            let s = s as usize;
            let idx = streams[s].ios[next[s]];
            let io = &plan.ios[idx as usize];
            let req = Request {
                slot,
                kind: io.kind,
                target: io.target,
                offset_bytes: io.offset_bytes,
                len_bytes: io.len_bytes,
                fua: io.fua,
            };
            next[s] += 1;
            let allowed = due.max(ready_at[s]);
            if total_in_flight == 0 && batch.is_empty() && ewma_latency_ns < INLINE_BELOW_NS {
                // Fast device and nothing in flight: do it here, without a hand-off.
                let t0 = Instant::now();
                first_submit.get_or_insert(t0);
                let result = engine.run_inline(&req);
                let t1 = Instant::now();
                last_completion = t1;
                let t0_ns = ns_since(t0);
                res.timing_error_ns.push(t0_ns.saturating_sub(due));
                res.scheduler_lag_ns.push(t0_ns.saturating_sub(allowed));
                if allowed > due {
                    res.depth_waits += 1;
                }
                res.inline += 1;
                res.kinds[io.kind as usize].issued += 1;
                res.max_in_flight = res.max_in_flight.max(1);
                let lat = t1.saturating_duration_since(t0).as_nanos() as u64;
                update_ewma(&mut ewma_latency_ns, lat);
                complete(&mut res, &mut errors, io, result, lat);
                unpublished += 1;
                if unpublished >= PUBLISH_EVERY {
                    done_ios.fetch_add(unpublished, Ordering::Relaxed);
                    unpublished = 0;
                }
                now_ns = ns_since(t1);
                if let Some(&ni) = streams[s].ios.get(next[s]) {
                    ready_at[s] = now_ns;
                    heap.push(Reverse((due_of(plan.ios[ni as usize].sched_ns), s as u32)));
                }
                continue;
            }
            free.pop();
            engine.push(req)?;
            slot_info[slot as usize].io = idx;
            slot_info[slot as usize].stream = s as u32;
            batch.push((slot, due, allowed));
            in_flight[s] += 1;
            total_in_flight += 1;
            if let Some(&ni) = streams[s].ios.get(next[s]) {
                let nio = &plan.ios[ni as usize];
                if in_flight[s] < nio.depth {
                    ready_at[s] = now_ns;
                    heap.push(Reverse((due_of(nio.sched_ns), s as u32)));
                } else {
                    blocked[s] = true;
                }
            }
        }
        if !batch.is_empty() {
            // The submit time is taken before the system call: an inline-capable device
            // may complete the I/O inside it.
            let t = Instant::now();
            engine.submit()?;
            first_submit.get_or_insert(t);
            let t_ns = ns_since(t);
            for &(slot, due, allowed) in &batch {
                slot_info[slot as usize].submit = t;
                res.timing_error_ns.push(t_ns.saturating_sub(due));
                res.scheduler_lag_ns.push(t_ns.saturating_sub(allowed));
                if allowed > due {
                    res.depth_waits += 1;
                }
                let k = plan.ios[slot_info[slot as usize].io as usize].kind;
                res.kinds[k as usize].issued += 1;
            }
            batch.clear();
            res.max_in_flight = res.max_in_flight.max(total_in_flight);
        }
        if heap.is_empty() && total_in_flight == 0 {
            break;
        }
        // Wait for a completion or the next due time, whichever is first.
        let now_ns = ns_since(Instant::now());
        let next_due = if free.is_empty() {
            None
        } else {
            heap.peek().map(|Reverse((d, _))| *d)
        };
        let wait = match next_due {
            Some(d) if d <= now_ns => Some(Duration::ZERO),
            Some(d) => {
                let left = Duration::from_nanos(d - now_ns);
                if left <= SPIN {
                    None
                } else {
                    Some(left - SPIN)
                }
            }
            None => Some(Duration::from_millis(50)),
        };
        if total_in_flight == 0 {
            if let Some(w) = wait {
                if !w.is_zero() {
                    std::thread::sleep(w);
                }
            }
            continue;
        }
        done.clear();
        match wait {
            Some(w) if !w.is_zero() => {
                // Poll for a while first: a completion usually comes within microseconds
                // (blocking costs a sleep and a wake-up, tens of µs on a VM).
                let spin_end = Instant::now() + w.min(SPIN_FOR_COMPLETION);
                loop {
                    engine.reap(&mut done, None)?;
                    if !done.is_empty() || Instant::now() >= spin_end {
                        break;
                    }
                    std::hint::spin_loop();
                }
                if done.is_empty() && w > SPIN_FOR_COMPLETION {
                    engine.reap(&mut done, Some(w - SPIN_FOR_COMPLETION))?;
                }
            }
            _ => engine.reap(&mut done, None)?,
        }
        if done.is_empty() {
            continue;
        }
        if unpublished >= PUBLISH_EVERY {
            done_ios.fetch_add(unpublished, Ordering::Relaxed);
            unpublished = 0;
        }
        let t = Instant::now();
        last_completion = t;
        let t_ns = ns_since(t);
        for c in &done {
            let info = slot_info[c.slot as usize];
            let io = &plan.ios[info.io as usize];
            let lat = t.saturating_duration_since(info.submit).as_nanos() as u64;
            update_ewma(&mut ewma_latency_ns, lat);
            complete(&mut res, &mut errors, io, c.result, lat);
            unpublished += 1;
            free.push(c.slot);
            total_in_flight -= 1;
            let s = info.stream as usize;
            in_flight[s] -= 1;
            if blocked[s] && !stopping {
                if let Some(&ni) = streams[s].ios.get(next[s]) {
                    let nio = &plan.ios[ni as usize];
                    if in_flight[s] < nio.depth {
                        blocked[s] = false;
                        ready_at[s] = t_ns;
                        heap.push(Reverse((due_of(nio.sched_ns), s as u32)));
                    }
                }
            }
        }
    }
    done_ios.fetch_add(unpublished, Ordering::Relaxed);
    if let Some(f) = first_submit {
        res.elapsed_ns = last_completion.saturating_duration_since(f).as_nanos() as u64;
        res.first_submit = Some(f);
        res.last_completion = Some(last_completion);
    }
    res.first_error = errors.into_iter().max_by_key(|&(e, c)| (c, Reverse(e)));
    Ok(res)
}

fn update_ewma(ewma: &mut f64, sample_ns: u64) {
    if ewma.is_finite() {
        *ewma += (sample_ns as f64 - *ewma) / 16.0;
    } else {
        *ewma = sample_ns as f64;
    }
}

/// Counts one finished I/O.
fn complete(
    res: &mut RunResult,
    errors: &mut std::collections::HashMap<i32, u64>,
    io: &PlannedIo,
    result: i32,
    latency_ns: u64,
) {
    let k = &mut res.kinds[io.kind as usize];
    if result < 0 {
        k.errors += 1;
        *errors.entry(-result).or_default() += 1;
    } else {
        k.ok += 1;
        k.bytes += u64::from(io.len_bytes);
    }
    k.latency_ns.push(latency_ns);
    k.recorded_latency_ns.push(io.recorded_latency_ns);
}

/// The `q`-quantile (0..=1) of `v` (sorted in place), nearest rank.
pub fn quantile(v: &mut [u64], q: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_with_streams(sizes: &[usize]) -> Plan {
        let mut p = Plan::default();
        for (i, &n) in sizes.iter().enumerate() {
            p.streams.push(Stream {
                pid: i as u32,
                tid: i as u32,
                ios: (0..n as u32).collect(),
            });
        }
        p
    }

    #[test]
    fn shards_balance_io_counts_and_cover_every_stream() {
        let p = plan_with_streams(&[100, 10, 60, 50, 5]);
        let sh = shard_streams(&p, 2);
        assert_eq!(sh.len(), 2);
        let load = |v: &Vec<u32>| {
            v.iter()
                .map(|&s| p.streams[s as usize].ios.len())
                .sum::<usize>()
        };
        assert_eq!(load(&sh[0]) + load(&sh[1]), 225);
        assert!(load(&sh[0]).abs_diff(load(&sh[1])) <= 10, "{sh:?}");
        let mut all: Vec<u32> = sh.concat();
        all.sort();
        assert_eq!(all, vec![0, 1, 2, 3, 4]);
        // Never more shards than streams, never zero.
        assert_eq!(shard_streams(&plan_with_streams(&[3]), 8).len(), 1);
        assert_eq!(shard_streams(&p, 0).len(), 1);
    }

    #[test]
    fn merge_sums_counts_and_spans_time() {
        let t0 = Instant::now();
        let mut a = RunResult::default();
        a.kinds[0].issued = 3;
        a.timing_error_ns = vec![1, 2, 3];
        a.first_submit = Some(t0 + Duration::from_millis(1));
        a.last_completion = Some(t0 + Duration::from_millis(5));
        a.first_error = Some((5, 2));
        let mut b = RunResult::default();
        b.kinds[0].issued = 4;
        b.timing_error_ns = vec![4];
        b.first_submit = Some(t0);
        b.last_completion = Some(t0 + Duration::from_millis(3));
        b.first_error = Some((5, 1));
        let m = merge(vec![a, b]);
        assert_eq!(m.kinds[0].issued, 7);
        assert_eq!(m.timing_error_ns.len(), 4);
        assert_eq!(m.elapsed_ns, 5_000_000);
        assert_eq!(m.first_error, Some((5, 3)));
        assert_eq!(m.threads, 2);
    }

    #[test]
    fn quantiles() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(quantile(&mut v, 0.5), Some(3));
        assert_eq!(quantile(&mut v, 0.99), Some(5));
        assert_eq!(quantile(&mut v, 0.0), Some(1));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
