//! The scheduler: walks the plan's streams, submits each I/O when its time has come and its
//! stream's depth allows, reaps completions, and measures everything the report shows.
//!
//! One thread does all of it. Between submissions it blocks in the engine with a timeout that
//! ends 200 µs before the next scheduled I/O, then spins, so that submit times are not at the
//! mercy of timer slack.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::engine::{Completion, Engine, Request};
use crate::error::ReplayError;
use crate::helper::{Helper, HelperDone, HelperPoll, MAILBOXES, TAKE_BACK_AFTER};
use crate::hist::Hist;
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
    /// Submit to completion of the completed I/Os, in ns.
    pub latency_ns: Hist,
    /// The recorded latencies of the same I/Os, in ns.
    pub recorded_latency_ns: Hist,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// By [`IoKind`](crate::plan::IoKind) index.
    pub kinds: [KindResult; 5],
    /// First submit to last completion, in ns.
    pub elapsed_ns: u64,
    /// Actual minus scheduled submit time of the submitted I/Os, in ns (scheduled = recorded
    /// offset / speed; 0 with `--no-stall`). Includes waiting for the stream's earlier I/Os.
    pub timing_error_ns: Hist,
    /// Actual submit time minus the moment the I/O was both due and allowed by its stream's
    /// depth: the scheduler's own lateness, in ns.
    pub scheduler_lag_ns: Hist,
    /// I/Os that had to wait past their scheduled time for earlier I/Os of their stream.
    pub depth_waits: u64,
    /// Times an I/O was due but every buffer slot was busy.
    pub slot_waits: u64,
    /// Most I/Os in flight at once.
    pub max_in_flight: u32,
    /// I/Os done synchronously by the scheduler thread (fast device, nothing in flight).
    pub inline: u64,
    /// I/Os done by the helper thread because another was due at once (fast device).
    pub handed_off: u64,
    /// Offers to the helper it had not taken within [`TAKE_BACK_AFTER`], done by the
    /// scheduler (counted in `inline` too).
    pub taken_back: u64,
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
    let mut errors: HashMap<i32, u64> = HashMap::new();
    for p in parts {
        out.engine = p.engine;
        for (a, b) in out.kinds.iter_mut().zip(p.kinds) {
            a.issued += b.issued;
            a.ok += b.ok;
            a.errors += b.errors;
            a.bytes += b.bytes;
            a.latency_ns.merge(&b.latency_ns);
            a.recorded_latency_ns.merge(&b.recorded_latency_ns);
        }
        out.timing_error_ns.merge(&p.timing_error_ns);
        out.scheduler_lag_ns.merge(&p.scheduler_lag_ns);
        out.depth_waits += p.depth_waits;
        out.slot_waits += p.slot_waits;
        out.max_in_flight += p.max_in_flight;
        out.inline += p.inline;
        out.handed_off += p.handed_off;
        out.taken_back += p.taken_back;
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

/// What a buffer slot holds while its I/O is in flight.
#[derive(Clone, Copy)]
struct SlotInfo {
    /// Index into [`Plan::ios`].
    io: u32,
    /// Index of the stream in this shard.
    stream: u32,
    /// When the I/O was submitted.
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

/// A parked helper is woken when the scheduler is this late.
const WAKE_BEHIND_NS: u64 = 5_000;

/// Poll this long for a completion before sleeping in the engine.
const SPIN_FOR_COMPLETION: Duration = Duration::from_micros(100);

/// The longest wait for the next due I/O: the stop flag (Ctrl-C) is looked at this often
/// however long the recorded pause.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// How long to wait when nothing is due (or no slot is free) and nothing completes.
const IDLE_WAIT: Duration = Duration::from_millis(50);

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
    helper: Option<&Helper>,
) -> Result<RunResult, ReplayError> {
    let mut s = Scheduler::new(plan, shard, engine, slots, o, shared, helper);
    loop {
        s.check_stop();
        s.poll_helper();
        s.submit_due()?;
        if s.is_done() {
            break;
        }
        s.wait()?;
        s.reap();
    }
    Ok(s.finish())
}

/// The schedule's clock: time zero and the time scale.
#[derive(Clone, Copy, Debug)]
struct Clock {
    start: Instant,
    /// Positive and finite.
    speed: f64,
    no_stall: bool,
}

impl Clock {
    /// A clock from `start`; a speed that is not positive and finite counts as 1.
    fn new(start: Instant, o: RunOptions) -> Clock {
        let speed = if o.speed > 0.0 && o.speed.is_finite() {
            o.speed
        } else {
            1.0
        };
        Clock {
            start,
            speed,
            no_stall: o.no_stall,
        }
    }

    /// When an I/O recorded at `sched_ns` is due, in ns since the start (0 with no stall).
    fn due_ns(&self, sched_ns: u64) -> u64 {
        if self.no_stall {
            0
        } else {
            (sched_ns as f64 / self.speed) as u64
        }
    }

    /// `t` in ns since the start (0 before it).
    fn ns_since_start(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.start).as_nanos() as u64
    }

    fn now_ns(&self) -> u64 {
        self.ns_since_start(Instant::now())
    }
}

/// Where one stream is.
#[derive(Clone, Copy, Debug, Default)]
struct StreamState {
    /// Index into the stream's I/Os (of one loop) of its next one to submit.
    next: usize,
    /// The loop that I/O belongs to (0-based; the plan's loop count when the stream is done).
    lap: u32,
    /// Its I/Os in flight.
    in_flight: u32,
    /// Its next I/O waits for one of its I/Os in flight to complete (depth).
    blocked: bool,
    /// When its next I/O became allowed by depth, in ns since the start.
    ready_at_ns: u64,
}

/// The I/O in the helper's mailbox.
#[derive(Clone, Copy, Debug)]
struct HelperJob {
    /// Index into [`Plan::ios`].
    io: u32,
    /// Index of the stream in this shard.
    stream: u32,
    p: Pushed,
    offered: Instant,
}

/// An I/O pushed to the engine but not yet submitted.
#[derive(Clone, Copy, Debug)]
struct Pushed {
    slot: u32,
    due_ns: u64,
    allowed_ns: u64,
}

/// Completions counted here and added to the shared counter [`PUBLISH_EVERY`] at a time
/// (other threads read it: one atomic add per completion would be shared-cache traffic).
struct Progress<'a> {
    done_ios: &'a AtomicU64,
    unpublished: u64,
}

impl Progress<'_> {
    /// Publishes what is counted when it is at least [`PUBLISH_EVERY`].
    fn publish_if_due(&mut self) {
        if self.unpublished >= PUBLISH_EVERY {
            self.publish();
        }
    }

    fn publish(&mut self) {
        self.done_ios.fetch_add(self.unpublished, Ordering::Relaxed);
        self.unpublished = 0;
    }
}

/// When to give up waiting for a completion: `None` to spin (the next I/O is due within
/// [`SPIN`]), zero to only poll (it is due already), else the time left before that spin.
/// `next_due_ns` is `None` when nothing can be submitted (nothing queued or no free slot).
fn wait_time(next_due_ns: Option<u64>, now_ns: u64) -> Option<Duration> {
    match next_due_ns {
        Some(d) if d <= now_ns => Some(Duration::ZERO),
        Some(d) => {
            let left = Duration::from_nanos(d - now_ns);
            if left <= SPIN {
                None
            } else {
                Some((left - SPIN).min(STOP_CHECK))
            }
        }
        None => Some(IDLE_WAIT),
    }
}

/// The request for `io` in `slot`.
fn request(slot: u32, io: &PlannedIo) -> Request {
    Request {
        slot,
        kind: io.kind,
        target: io.target,
        offset_bytes: io.offset_bytes,
        len_bytes: io.len_bytes,
        fua: io.fua,
    }
}

/// One scheduler thread's state: which I/O of each stream is next, what is in flight in
/// which slot, and the measurements. Each turn of [`run`] is [`Scheduler::check_stop`],
/// [`Scheduler::submit_due`], then (unless [`Scheduler::is_done`]) [`Scheduler::wait`] and
/// [`Scheduler::reap`]; [`Scheduler::finish`] hands the result over. Nothing in a turn
/// allocates: every vector is sized up front.
struct Scheduler<'a> {
    plan: &'a Plan,
    streams: Vec<&'a Stream>,
    engine: &'a mut dyn Engine,
    clock: Clock,
    stop: &'a AtomicBool,
    progress: Progress<'a>,
    state: Vec<StreamState>,
    /// (due ns, stream) of each stream whose next I/O its depth allows, earliest first.
    queue: BinaryHeap<Reverse<(u64, u32)>>,
    /// Free buffer slots (the last one is used next).
    free: Vec<u32>,
    slot_info: Vec<SlotInfo>,
    /// Pushed to the engine, waiting for the next submit.
    pushed: Vec<Pushed>,
    /// Completions of the last wait, accounted by the next reap.
    done: Vec<Completion>,
    /// I/Os in flight, all streams.
    in_flight: u32,
    /// Of those, offered to the helper.
    handed_off: u32,
    helper: Option<&'a Helper>,
    /// The I/O offered to the helper in each of its mailboxes.
    helper_jobs: [Option<HelperJob>; MAILBOXES],
    stopping: bool,
    /// Mean completion time seen so far (exponentially weighted); unknown at first, so the
    /// first I/Os go through the engine.
    ewma_latency_ns: f64,
    first_submit: Option<Instant>,
    last_completion: Instant,
    /// Failed I/Os by errno.
    errors: HashMap<i32, u64>,
    res: RunResult,
}

impl<'a> Scheduler<'a> {
    /// A scheduler of the streams `shard` of `plan`, each stream's first I/O queued.
    fn new(
        plan: &'a Plan,
        shard: &[u32],
        engine: &'a mut dyn Engine,
        slots: u32,
        o: RunOptions,
        shared: Shared<'a>,
        helper: Option<&'a Helper>,
    ) -> Scheduler<'a> {
        let streams: Vec<&Stream> = shard.iter().map(|&i| &plan.streams[i as usize]).collect();
        // Every histogram's bins now: nothing allocates while I/O is measured.
        let mut res = RunResult {
            engine: engine.name(),
            timing_error_ns: Hist::with_bins(),
            scheduler_lag_ns: Hist::with_bins(),
            ..RunResult::default()
        };
        for k in &mut res.kinds {
            k.latency_ns = Hist::with_bins();
            k.recorded_latency_ns = Hist::with_bins();
        }
        let clock = Clock::new(shared.start, o);
        let mut queue = BinaryHeap::with_capacity(streams.len());
        for (s, st) in streams.iter().enumerate() {
            if let Some((_, sched_ns)) = plan.stream_io(st, 0, 0) {
                queue.push(Reverse((clock.due_ns(sched_ns), s as u32)));
            }
        }
        let slot = SlotInfo {
            io: 0,
            stream: 0,
            submit: Instant::now(),
        };
        Scheduler {
            plan,
            state: vec![StreamState::default(); streams.len()],
            streams,
            engine,
            clock,
            stop: shared.stop,
            progress: Progress {
                done_ios: shared.done_ios,
                unpublished: 0,
            },
            queue,
            free: (0..slots.max(1)).rev().collect(),
            slot_info: vec![slot; slots.max(1) as usize],
            pushed: Vec::with_capacity(slots as usize),
            done: Vec::with_capacity(slots as usize),
            in_flight: 0,
            handed_off: 0,
            helper,
            helper_jobs: [None; MAILBOXES],
            stopping: false,
            ewma_latency_ns: f64::INFINITY,
            first_submit: None,
            last_completion: shared.start,
            errors: HashMap::new(),
            res,
        }
    }

    /// Once the stop flag is set: nothing more is submitted (what is in flight is reaped).
    fn check_stop(&mut self) {
        if !self.stopping && self.stop.load(Ordering::Relaxed) {
            self.stopping = true;
            self.res.interrupted = true;
            self.queue.clear();
        }
    }

    /// True when nothing is queued and nothing is in flight.
    fn is_done(&self) -> bool {
        self.queue.is_empty() && self.in_flight == 0
    }

    /// Submits every I/O that is due and has a free slot: inline when the device is fast
    /// and nothing is in flight, else pushed to the engine and sent in one submit.
    fn submit_due(&mut self) -> Result<(), ReplayError> {
        let mut now_ns = self.clock.now_ns();
        loop {
            // Without stalls on a fast device every I/O is due and done inline here, one
            // after the other: the stop flag is looked at between them (one load of a line
            // that is only read), or Ctrl-C would wait for the end of the plan.
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            // Before a slot is picked: what the helper finished frees slots.
            self.poll_helper();
            let Some((s, due_ns, slot)) = self.pop_due(now_ns) else {
                break;
            };
            let Some((idx, _)) = self.next_io(s) else {
                continue;
            };
            self.advance(s);
            let allowed_ns = due_ns.max(self.state[s].ready_at_ns);
            let p = Pushed {
                slot,
                due_ns,
                allowed_ns,
            };
            if self.in_flight == self.handed_off
                && self.pushed.is_empty()
                && self.ewma_latency_ns < INLINE_BELOW_NS
            {
                let offered = self
                    .helper_mailbox(due_ns, now_ns)
                    .is_some_and(|i| self.offer(i, s, idx, p, now_ns));
                if !offered {
                    now_ns = self.run_inline(s, idx, p);
                }
            } else {
                self.push(s, idx, p, now_ns)?;
            }
        }
        self.submit_pushed()
    }

    /// The helper's empty mailbox when there is a helper, it is awake and the due I/O
    /// popped at `due_ns` is not its only work; a parked helper is woken when the scheduler
    /// is [`WAKE_BEHIND_NS`] late.
    fn helper_mailbox(&self, due_ns: u64, now_ns: u64) -> Option<usize> {
        let h = self.helper?;
        let i = self.helper_jobs.iter().position(Option::is_none)?;
        if !self.another_due(now_ns) {
            return None;
        }
        if h.awake() {
            return Some(i);
        }
        if now_ns.saturating_sub(due_ns) >= WAKE_BEHIND_NS {
            h.wake();
        }
        None
    }

    /// Offers I/O `idx` of stream `s` to the helper in mailbox `i`, in slot `p.slot` (kept
    /// for it while offered, so that a take-back has one); queues the stream's next I/O if
    /// its depth allows it now, else marks the stream blocked. False when the offer failed.
    fn offer(&mut self, i: usize, s: usize, idx: u32, p: Pushed, now_ns: u64) -> bool {
        let Some(h) = self.helper else { return false };
        if !h.offer(i, &request(p.slot, &self.plan.ios[idx as usize])) {
            return false;
        }
        self.free.pop();
        self.helper_jobs[i] = Some(HelperJob {
            io: idx,
            stream: s as u32,
            p,
            offered: Instant::now(),
        });
        self.state[s].in_flight += 1;
        self.in_flight += 1;
        self.handed_off += 1;
        if !self.queue_next_if_allowed(s, now_ns) {
            self.state[s].blocked = true;
        }
        true
    }

    /// Accounts the helper's I/Os that are done; takes back and does here an offer the
    /// helper has not taken within [`TAKE_BACK_AFTER`].
    fn poll_helper(&mut self) {
        let Some(h) = self.helper else { return };
        for i in 0..MAILBOXES {
            let Some(job) = self.helper_jobs[i] else {
                continue;
            };
            match h.poll(i) {
                HelperPoll::Done(d) => {
                    self.res.handed_off += 1;
                    self.finish_helper_job(i, job, d);
                }
                HelperPoll::Offered
                    if job.offered.elapsed() >= TAKE_BACK_AFTER && h.take_back(i) =>
                {
                    let io = &self.plan.ios[job.io as usize];
                    let t0 = Instant::now();
                    let result = self.engine.run_inline(&request(job.p.slot, io));
                    let t1 = Instant::now();
                    self.res.inline += 1;
                    self.res.taken_back += 1;
                    self.finish_helper_job(
                        i,
                        job,
                        HelperDone {
                            result,
                            call: t0,
                            returned: t1,
                        },
                    );
                }
                _ => {}
            }
        }
    }

    /// Accounts the helper's I/O `job` of mailbox `i`, done as `d` (by the helper, or here
    /// after a take-back): its submit time is when it was called.
    fn finish_helper_job(&mut self, i: usize, job: HelperJob, d: HelperDone) {
        self.helper_jobs[i] = None;
        let io = &self.plan.ios[job.io as usize];
        let (call_ns, return_ns) = (
            self.clock.ns_since_start(d.call),
            self.clock.ns_since_start(d.returned),
        );
        self.first_submit = Some(self.first_submit.map_or(d.call, |f| f.min(d.call)));
        self.last_completion = self.last_completion.max(d.returned);
        count_submit(&mut self.res, call_ns, job.p, io);
        self.res.max_in_flight = self.res.max_in_flight.max(self.in_flight);
        let lat = d.returned.saturating_duration_since(d.call).as_nanos() as u64;
        // Not in the mean that decides inline work: a helper descheduled during its call
        // would make the device look slow to the scheduler.
        complete(&mut self.res, &mut self.errors, io, d.result, lat);
        self.progress.unpublished += 1;
        self.progress.publish_if_due();
        self.free.push(job.p.slot);
        self.in_flight -= 1;
        self.handed_off -= 1;
        let s = job.stream as usize;
        self.state[s].in_flight -= 1;
        if self.state[s].blocked && !self.stopping && self.queue_next_if_allowed(s, return_ns) {
            self.state[s].blocked = false;
        }
    }

    /// True when another stream's I/O is due by `now_ns` and a second slot is free.
    fn another_due(&self, now_ns: u64) -> bool {
        self.free.len() >= 2
            && self
                .queue
                .peek()
                .is_some_and(|Reverse((d, _))| *d <= now_ns)
    }

    /// The stream whose next I/O is due by `now_ns`, with that time and the slot it gets
    /// (still free: [`Scheduler::push`] takes it), taken off the queue; `None` when nothing
    /// is due, or no slot is free (counted as a slot wait).
    fn pop_due(&mut self, now_ns: u64) -> Option<(usize, u64, u32)> {
        let &Reverse((due_ns, s)) = self.queue.peek()?;
        if due_ns > now_ns {
            return None;
        }
        let Some(&slot) = self.free.last() else {
            self.res.slot_waits += 1;
            return None;
        };
        self.queue.pop();
        Some((s as usize, due_ns, slot))
    }

    /// Does I/O `idx` of stream `s` in this thread; returns the time after it (ns since the
    /// start). Its stream's next I/O is queued (nothing else of it is in flight).
    fn run_inline(&mut self, s: usize, idx: u32, p: Pushed) -> u64 {
        let io = &self.plan.ios[idx as usize];
        let req = request(p.slot, io);
        let t0 = Instant::now();
        self.first_submit.get_or_insert(t0);
        let result = self.engine.run_inline(&req);
        let t1 = Instant::now();
        self.last_completion = t1;
        count_submit(&mut self.res, self.clock.ns_since_start(t0), p, io);
        self.res.inline += 1;
        self.res.max_in_flight = self.res.max_in_flight.max(1);
        let lat = t1.saturating_duration_since(t0).as_nanos() as u64;
        update_ewma(&mut self.ewma_latency_ns, lat);
        complete(&mut self.res, &mut self.errors, io, result, lat);
        self.progress.unpublished += 1;
        self.progress.publish_if_due();
        let now_ns = self.clock.ns_since_start(t1);
        if self.state[s].in_flight > 0 {
            // One of its I/Os is with the helper: its depth decides.
            if !self.queue_next_if_allowed(s, now_ns) {
                self.state[s].blocked = true;
            }
        } else if let Some((_, sched_ns)) = self.next_io(s) {
            self.state[s].ready_at_ns = now_ns;
            let due = self.clock.due_ns(sched_ns);
            self.queue.push(Reverse((due, s as u32)));
        }
        now_ns
    }

    /// Stream `s`'s next I/O to submit: its index in the plan and its scheduled time in its
    /// loop; `None` once the stream is done.
    #[inline]
    fn next_io(&self, s: usize) -> Option<(u32, u64)> {
        let st = &self.state[s];
        self.plan.stream_io(self.streams[s], st.next, st.lap)
    }

    /// Moves stream `s` on to its next I/O (to the first of the next loop after its last).
    #[inline]
    fn advance(&mut self, s: usize) {
        let st = &mut self.state[s];
        st.next += 1;
        if st.next == self.streams[s].ios.len() {
            st.next = 0;
            st.lap += 1;
        }
    }

    /// Pushes I/O `idx` of stream `s` to the engine in slot `p.slot`; queues the stream's
    /// next I/O if its depth allows it now, else marks the stream blocked.
    fn push(&mut self, s: usize, idx: u32, p: Pushed, now_ns: u64) -> Result<(), ReplayError> {
        self.free.pop();
        self.engine
            .push(request(p.slot, &self.plan.ios[idx as usize]))?;
        let info = &mut self.slot_info[p.slot as usize];
        info.io = idx;
        info.stream = s as u32;
        self.pushed.push(p);
        self.state[s].in_flight += 1;
        self.in_flight += 1;
        if !self.queue_next_if_allowed(s, now_ns) {
            self.state[s].blocked = true;
        }
        Ok(())
    }

    /// Queues stream `s`'s next I/O if it has one and fewer of its I/Os are in flight than
    /// that I/O's depth; `now_ns` is when it became allowed. False when its depth forbids it.
    fn queue_next_if_allowed(&mut self, s: usize, now_ns: u64) -> bool {
        let Some((ni, sched_ns)) = self.next_io(s) else {
            return true;
        };
        let st = &mut self.state[s];
        if st.in_flight >= self.plan.ios[ni as usize].depth {
            return false;
        }
        st.ready_at_ns = now_ns;
        self.queue
            .push(Reverse((self.clock.due_ns(sched_ns), s as u32)));
        true
    }

    /// Sends what was pushed in one system call and takes its submit time.
    fn submit_pushed(&mut self) -> Result<(), ReplayError> {
        if self.pushed.is_empty() {
            return Ok(());
        }
        // The submit time is taken before the system call: an inline-capable device may
        // complete the I/O inside it.
        let t = Instant::now();
        self.engine.submit()?;
        self.first_submit.get_or_insert(t);
        let t_ns = self.clock.ns_since_start(t);
        for &p in &self.pushed {
            let info = &mut self.slot_info[p.slot as usize];
            info.submit = t;
            count_submit(&mut self.res, t_ns, p, &self.plan.ios[info.io as usize]);
        }
        self.pushed.clear();
        self.res.max_in_flight = self.res.max_in_flight.max(self.in_flight);
        Ok(())
    }

    /// Waits for a completion or the next due time, whichever is first (sleeps when nothing
    /// is in flight); completions go to `done`.
    fn wait(&mut self) -> Result<(), ReplayError> {
        let now_ns = self.clock.now_ns();
        let next_due_ns = if self.free.is_empty() {
            None
        } else {
            self.queue.peek().map(|Reverse((d, _))| *d)
        };
        let mut wait = wait_time(next_due_ns, now_ns);
        if self.handed_off > 0 {
            // The helper's I/O takes microseconds: poll, never block.
            if self.in_flight == self.handed_off {
                // Yield: should the helper share this CPU, it finishes at once.
                std::thread::yield_now();
                return Ok(());
            }
            wait = Some(Duration::ZERO);
        }
        if self.in_flight == 0 {
            if let Some(w) = wait.filter(|w| !w.is_zero()) {
                std::thread::sleep(w);
            }
            return Ok(());
        }
        match wait {
            Some(w) if !w.is_zero() => {
                // Poll for a while first: a completion usually comes within microseconds
                // (blocking costs a sleep and a wake-up, tens of µs on a VM).
                let spin_end = Instant::now() + w.min(SPIN_FOR_COMPLETION);
                loop {
                    self.engine.reap(&mut self.done, None)?;
                    if !self.done.is_empty() || Instant::now() >= spin_end {
                        break;
                    }
                    std::hint::spin_loop();
                }
                if self.done.is_empty() && w > SPIN_FOR_COMPLETION {
                    self.engine
                        .reap(&mut self.done, Some(w - SPIN_FOR_COMPLETION))?;
                }
            }
            _ => self.engine.reap(&mut self.done, None)?,
        }
        Ok(())
    }

    /// Accounts the completions of the last wait: latencies, results, freed slots, and the
    /// streams their completion unblocks.
    fn reap(&mut self) {
        if self.done.is_empty() {
            return;
        }
        self.progress.publish_if_due();
        let t = Instant::now();
        self.last_completion = t;
        let t_ns = self.clock.ns_since_start(t);
        for i in 0..self.done.len() {
            let c = self.done[i];
            let info = self.slot_info[c.slot as usize];
            let io = &self.plan.ios[info.io as usize];
            let lat = t.saturating_duration_since(info.submit).as_nanos() as u64;
            update_ewma(&mut self.ewma_latency_ns, lat);
            complete(&mut self.res, &mut self.errors, io, c.result, lat);
            self.progress.unpublished += 1;
            self.free.push(c.slot);
            self.in_flight -= 1;
            let s = info.stream as usize;
            self.state[s].in_flight -= 1;
            if self.state[s].blocked && !self.stopping && self.queue_next_if_allowed(s, t_ns) {
                self.state[s].blocked = false;
            }
        }
        self.done.clear();
    }

    /// Publishes the last completions and hands over the result.
    fn finish(mut self) -> RunResult {
        if cfg!(debug_assertions) && self.in_flight == 0 {
            // Every slot back exactly once.
            let mut free = self.free.clone();
            free.sort_unstable();
            let all: Vec<u32> = (0..self.slot_info.len() as u32).collect();
            assert_eq!(free, all, "buffer slots lost or given twice");
        }
        self.progress.publish();
        let mut res = self.res;
        if let Some(f) = self.first_submit {
            res.elapsed_ns = self.last_completion.saturating_duration_since(f).as_nanos() as u64;
            res.first_submit = Some(f);
            res.last_completion = Some(self.last_completion);
        }
        res.first_error = self
            .errors
            .into_iter()
            .max_by_key(|&(e, c)| (c, Reverse(e)));
        res
    }
}

/// Counts one submitted I/O `io` (submitted at `submit_ns`): its timing error, scheduler
/// lag, depth wait and kind.
fn count_submit(res: &mut RunResult, submit_ns: u64, p: Pushed, io: &PlannedIo) {
    res.timing_error_ns.add(submit_ns.saturating_sub(p.due_ns));
    res.scheduler_lag_ns
        .add(submit_ns.saturating_sub(p.allowed_ns));
    if p.allowed_ns > p.due_ns {
        res.depth_waits += 1;
    }
    res.kinds[io.kind as usize].issued += 1;
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
    errors: &mut HashMap<i32, u64>,
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
    k.latency_ns.add(latency_ns);
    k.recorded_latency_ns.add(io.recorded_latency_ns);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::IoKind;

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
        for v in [1, 2, 3] {
            a.timing_error_ns.add(v);
        }
        a.first_submit = Some(t0 + Duration::from_millis(1));
        a.last_completion = Some(t0 + Duration::from_millis(5));
        a.first_error = Some((5, 2));
        let mut b = RunResult::default();
        b.kinds[0].issued = 4;
        b.timing_error_ns.add(4);
        b.first_submit = Some(t0);
        b.last_completion = Some(t0 + Duration::from_millis(3));
        b.first_error = Some((5, 1));
        let m = merge(vec![a, b]);
        assert_eq!(m.kinds[0].issued, 7);
        assert_eq!(m.timing_error_ns.len(), 4);
        assert_eq!(m.timing_error_ns.max(), Some(4));
        assert_eq!(m.elapsed_ns, 5_000_000);
        assert_eq!(m.first_error, Some((5, 3)));
        assert_eq!(m.threads, 2);
    }

    /// Streams of 4 KiB reads with the given depths; I/O `i` of the plan is scheduled at
    /// `i` µs.
    fn plan_with_depths(streams: &[&[u32]]) -> Plan {
        let mut p = Plan::default();
        for (s, depths) in streams.iter().enumerate() {
            let mut st = Stream {
                pid: s as u32,
                tid: s as u32,
                ios: Vec::new(),
            };
            for &depth in *depths {
                st.ios.push(p.ios.len() as u32);
                p.ios.push(PlannedIo {
                    sched_ns: p.ios.len() as u64 * 1000,
                    offset_bytes: p.ios.len() as u64 * 4096,
                    len_bytes: 4096,
                    stream: s as u32,
                    depth,
                    target: 0,
                    kind: IoKind::Read,
                    fua: false,
                    recorded_latency_ns: 7,
                    recorded_offset_bytes: 0,
                });
            }
            p.streams.push(st);
        }
        p
    }

    /// An engine that completes everything submitted at the next reap, with `result` (the
    /// length when `None`), and counts what it was asked.
    #[derive(Default)]
    struct FakeEngine {
        queued: Vec<Request>,
        in_flight: Vec<Request>,
        pushes: usize,
        submits: usize,
        inline: usize,
        most_in_flight: usize,
        result: Option<i32>,
        /// How long an inline I/O takes.
        inline_time: Duration,
        /// The offset of every request, pushed or inline, in order.
        offsets: Vec<u64>,
    }

    impl Engine for FakeEngine {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn push(&mut self, r: Request) -> Result<(), ReplayError> {
            assert!(
                !self
                    .queued
                    .iter()
                    .chain(&self.in_flight)
                    .any(|q| q.slot == r.slot),
                "slot {} given twice",
                r.slot
            );
            self.pushes += 1;
            self.offsets.push(r.offset_bytes);
            self.queued.push(r);
            Ok(())
        }
        fn submit(&mut self) -> Result<(), ReplayError> {
            self.submits += 1;
            self.in_flight.append(&mut self.queued);
            self.most_in_flight = self.most_in_flight.max(self.in_flight.len());
            Ok(())
        }
        fn run_inline(&mut self, r: &Request) -> i32 {
            self.inline += 1;
            self.offsets.push(r.offset_bytes);
            let t = Instant::now();
            while t.elapsed() < self.inline_time {
                std::hint::spin_loop();
            }
            self.result.unwrap_or(r.len_bytes as i32)
        }
        fn reap(
            &mut self,
            out: &mut Vec<Completion>,
            _wait: Option<Duration>,
        ) -> Result<(), ReplayError> {
            let result = self.result;
            out.extend(self.in_flight.drain(..).map(|r| Completion {
                slot: r.slot,
                result: result.unwrap_or(r.len_bytes as i32),
            }));
            Ok(())
        }
    }

    const NO_STALL: RunOptions = RunOptions {
        speed: 1.0,
        no_stall: true,
    };

    /// A scheduler of `shard` with no stall and no helper.
    fn untimed<'a>(
        plan: &'a Plan,
        shard: &[u32],
        eng: &'a mut FakeEngine,
        slots: u32,
        sh: Shared<'a>,
    ) -> Scheduler<'a> {
        Scheduler::new(plan, shard, eng, slots, NO_STALL, sh, None)
    }

    fn shared<'a>(stop: &'a AtomicBool, done: &'a AtomicU64) -> Shared<'a> {
        Shared {
            start: Instant::now(),
            stop,
            done_ios: done,
        }
    }

    #[test]
    fn clock_scales_recorded_time() {
        let start = Instant::now();
        let c = Clock::new(
            start,
            RunOptions {
                speed: 2.0,
                no_stall: false,
            },
        );
        assert_eq!(c.due_ns(1_000_000), 500_000);
        let c = Clock::new(
            start,
            RunOptions {
                speed: 0.5,
                no_stall: false,
            },
        );
        assert_eq!(c.due_ns(1_000_000), 2_000_000);
        assert_eq!(Clock::new(start, NO_STALL).due_ns(1_000_000), 0);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let c = Clock::new(
                start,
                RunOptions {
                    speed: bad,
                    no_stall: false,
                },
            );
            assert_eq!(c.due_ns(1_000), 1_000, "speed {bad} counts as 1");
        }
        assert_eq!(c.ns_since_start(start + Duration::from_micros(3)), 3_000);
        assert_eq!(c.ns_since_start(start - Duration::from_micros(3)), 0);
    }

    #[test]
    fn wait_time_polls_spins_or_blocks() {
        // Due already: only poll.
        assert_eq!(wait_time(Some(5_000), 5_000), Some(Duration::ZERO));
        assert_eq!(wait_time(Some(5_000), 9_000), Some(Duration::ZERO));
        // Due within the spin window: spin, no blocking.
        assert_eq!(wait_time(Some(150_000), 0), None);
        assert_eq!(wait_time(Some(200_000), 0), None);
        // Due later: block until the spin window starts.
        assert_eq!(
            wait_time(Some(1_000_000), 0),
            Some(Duration::from_micros(800))
        );
        // Due in a minute: block at most until the stop flag is looked at again.
        assert_eq!(wait_time(Some(60_000_000_000), 0), Some(STOP_CHECK));
        // Nothing can be submitted: block for the idle wait.
        assert_eq!(wait_time(None, 0), Some(IDLE_WAIT));
    }

    #[test]
    fn submit_due_keeps_each_streams_depth_and_batches_one_submit() {
        // Stream 0 was asynchronous (depths 1, 2, 3), stream 1 synchronous.
        let plan = plan_with_depths(&[&[1, 2, 3], &[1, 1]]);
        let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
        let mut eng = FakeEngine::default();
        let mut s = untimed(&plan, &[0, 1], &mut eng, 16, shared(&stop, &done));
        s.submit_due().unwrap();
        assert_eq!(s.in_flight, 4, "all of stream 0, the first of stream 1");
        assert!(s.state[1].blocked && !s.state[0].blocked);
        assert_eq!(s.queue.len(), 0);
        assert_eq!(s.res.max_in_flight, 4);
        assert_eq!(s.res.kinds[IoKind::Read as usize].issued, 4);
        assert_eq!(s.res.timing_error_ns.len(), 4);
        assert_eq!(s.free.len(), 12);
        s.wait().unwrap();
        assert_eq!(s.done.len(), 4);
        s.reap();
        assert!(s.done.is_empty());
        assert_eq!(s.in_flight, 0);
        assert_eq!(s.free.len(), 16);
        assert!(!s.state[1].blocked, "its completion unblocks stream 1");
        assert_eq!(s.queue.len(), 1);
        assert_eq!(s.res.kinds[IoKind::Read as usize].ok, 4);
        assert_eq!(s.res.kinds[IoKind::Read as usize].bytes, 4 * 4096);
        let rec = &s.res.kinds[IoKind::Read as usize].recorded_latency_ns;
        assert_eq!(
            (rec.len(), rec.quantile(0.0), rec.max()),
            (4, Some(7), Some(7))
        );
        // Fast completions and nothing in flight: the next I/O is done inline.
        s.ewma_latency_ns = 0.0;
        s.submit_due().unwrap();
        assert_eq!(s.res.inline, 1);
        assert!(s.is_done());
        let res = s.finish();
        assert_eq!(res.kinds[IoKind::Read as usize].issued, 5);
        assert_eq!(res.kinds[IoKind::Read as usize].ok, 5);
        assert!(res.first_submit.is_some() && res.last_completion >= res.first_submit);
        assert_eq!(
            done.load(Ordering::Relaxed),
            5,
            "every completion published"
        );
        assert_eq!((eng.pushes, eng.submits, eng.inline), (4, 1, 1));
    }

    #[test]
    fn busy_slots_hold_back_due_io() {
        let plan = plan_with_depths(&[&[1, 2, 3, 4]]);
        let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
        let mut eng = FakeEngine::default();
        let mut s = untimed(&plan, &[0], &mut eng, 2, shared(&stop, &done));
        s.submit_due().unwrap();
        assert_eq!(s.in_flight, 2);
        assert_eq!(s.res.slot_waits, 1);
        assert!(s.free.is_empty());
        assert_eq!(
            s.queue.len(),
            1,
            "the third I/O waits for a slot, not for depth"
        );
        s.wait().unwrap();
        s.reap();
        // A slow device: through the engine again, not inline.
        s.ewma_latency_ns = f64::INFINITY;
        s.submit_due().unwrap();
        assert_eq!(s.in_flight, 2);
        assert_eq!(s.res.kinds[0].issued, 4);
    }

    #[test]
    fn stop_ends_submission_and_reaps_what_is_in_flight() {
        let plan = plan_with_depths(&[&[1, 1, 1], &[1, 2]]);
        let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
        let mut eng = FakeEngine::default();
        let mut s = untimed(&plan, &[0, 1], &mut eng, 16, shared(&stop, &done));
        s.submit_due().unwrap();
        assert_eq!(s.in_flight, 3);
        stop.store(true, Ordering::Relaxed);
        s.check_stop();
        assert!(s.res.interrupted && s.queue.is_empty());
        s.wait().unwrap();
        s.reap();
        assert!(s.is_done(), "the blocked stream is not queued again");
        let res = s.finish();
        assert_eq!(res.kinds[0].issued, 3);
        assert_eq!(res.kinds[0].ok, 3);
    }

    #[test]
    fn a_helper_takes_due_io_and_every_io_is_done_once() {
        // Depth-1 streams all due at once (no stall), each inline I/O 5 µs: the scheduler is
        // behind from the start, wakes the helper and offers it I/Os while it does others.
        let d = vec![1u32; 5000];
        let plan = plan_with_depths(&[&d, &d, &d, &d, &[1, 2, 2, 1]]);
        let n = plan.ios.len();
        let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
        let sh = shared(&stop, &done);
        let zero = std::fs::File::open("/dev/zero").unwrap();
        let helper = Helper::spawn(vec![zero], vec![false], 4096).unwrap();
        let mut eng = FakeEngine {
            inline_time: Duration::from_micros(5),
            ..FakeEngine::default()
        };
        let res = run(
            &plan,
            &[0, 1, 2, 3, 4],
            &mut eng,
            8,
            NO_STALL,
            sh,
            Some(&helper),
        )
        .unwrap();
        let k = &res.kinds[IoKind::Read as usize];
        assert_eq!((k.issued, k.ok, k.errors), (n as u64, n as u64, 0));
        assert_eq!(k.bytes, n as u64 * 4096);
        assert_eq!(res.timing_error_ns.len(), n as u64);
        assert_eq!(done.load(Ordering::Relaxed), n as u64);
        assert!(res.handed_off > 0, "the helper did none of {n}");
        assert_eq!(eng.pushes + eng.inline + res.handed_off as usize, n);
        assert!(res.taken_back <= eng.inline as u64);
    }

    #[test]
    fn loops_replay_the_plan_again_each_one_period_later() {
        // One synchronous stream of three reads 1 µs apart, then one depth-2 stream of two;
        // four loops 1 ms apart.
        let mut plan = plan_with_depths(&[&[1, 1, 1], &[1, 2]]);
        plan.loops = 4;
        plan.period_ns = 1_000_000;
        let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
        let mut eng = FakeEngine::default();
        let sh = shared(&stop, &done);
        let res = run(&plan, &[0], &mut eng, 4, RunOptions::default(), sh, None).unwrap();
        assert_eq!(
            eng.offsets,
            [0, 4096, 8192].repeat(4),
            "stream 0, loop after loop"
        );
        assert_eq!(res.kinds[IoKind::Read as usize].ok, 12);
        assert_eq!(res.timing_error_ns.len(), 12);
        // The last I/O is due at 3 ms + 2 µs: the loops were not run at once.
        let last = res.last_completion.unwrap().duration_since(sh.start);
        assert!(last >= Duration::from_micros(3_002), "{last:?}");
        let mut eng = FakeEngine::default();
        let res = run(
            &plan,
            &[0, 1],
            &mut eng,
            4,
            NO_STALL,
            shared(&stop, &done),
            None,
        )
        .unwrap();
        assert_eq!(res.kinds[IoKind::Read as usize].ok, 20);
        let second: Vec<u64> = eng
            .offsets
            .iter()
            .copied()
            .filter(|&o| o >= 12_288)
            .collect();
        assert_eq!(
            second,
            [12_288, 16_384].repeat(4),
            "stream 1 kept its order"
        );
    }

    #[test]
    fn run_replays_every_io_once_and_counts_errors() {
        let plan = plan_with_depths(&[&[1, 1, 1, 1], &[1, 2, 3, 1], &[1]]);
        let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
        let mut eng = FakeEngine {
            result: Some(-libc::EIO),
            ..FakeEngine::default()
        };
        let res = run(
            &plan,
            &[0, 1, 2],
            &mut eng,
            4,
            NO_STALL,
            shared(&stop, &done),
            None,
        )
        .unwrap();
        let k = &res.kinds[IoKind::Read as usize];
        assert_eq!((k.issued, k.ok, k.errors, k.bytes), (9, 0, 9, 0));
        assert_eq!(k.latency_ns.len(), 9);
        assert_eq!(res.first_error, Some((libc::EIO, 9)));
        assert_eq!(res.engine, "fake");
        assert!(!res.interrupted);
        assert!(res.max_in_flight <= 4);
        assert_eq!(eng.pushes + eng.inline, 9);
        assert!(eng.most_in_flight <= 4);
        assert_eq!(done.load(Ordering::Relaxed), 9);
    }
}
