//! The metrics of `iodump top --serve`: cumulative counters and latency histograms per
//! device, process, cgroup and (the busiest) file, fed with every recorded event, and their
//! exposition as Prometheus text (format 0.0.4) or OpenMetrics 1.0 ([`Metrics::render`]).
//!
//! Unlike [`crate::live::Aggregator`], nothing is reset: counters only grow. A series whose
//! key (process, cgroup, file, device) has had no I/O for [`IDLE_NS`] (5 minutes) is dropped,
//! so a process that exited keeps its series that long. Per event there is no allocation,
//! formatting or lock: a key's labels are made once, when it is first seen.
//!
//! Cardinality: per device, cgroup and process (at most [`MAX_PROCESSES`], the busiest) 3 ops
//! × (2 counters + 2 histograms of [`BUCKETS_NS`]`.len() + 1` buckets); files only the `top_files`
//! busiest (`--serve-files`), counters only; at most [`MAX_FILES_TRACKED`] files are counted
//! at once (the I/O of others is counted in `iodump_file_io_untracked_total`).
//!
//! Besides the I/O, the recorder's own state ([`crate::RecorderStatus`], set on each tick):
//! events lost and, for `record --serve`, the flight recorder's trigger matches, snapshots and
//! ring (`--ring`) and the parts written and deleted (`-o DIR/`).

use std::fmt::Write as _;

use iodump_format::inthash::IntMap;
use iodump_format::text::text_string;
use iodump_format::{DevT, Event, Op};

use crate::abi::IoEvent;
use crate::cgroups::Resolver;
use crate::convert::Converter;
use crate::flight::FlightStats;
use crate::in_flight::{DeviceInFlight, InFlightLook};
use crate::live::{DevicesSeen, ProcNames, Scope};
use crate::session::RecorderStatus;
use iodump_output::parts::PartsStats;

/// A series without I/O for this long (ns) is dropped.
pub const IDLE_NS: u64 = 300_000_000_000;

/// Upper bounds (`le`) of the histograms' buckets, in ns: 125 ns × 2^k up to 2^27 × 125 ns
/// (16.8 s), then `+Inf`. A quantile from them (`histogram_quantile`) is within a factor of 2
/// of the exact value: both lie in the same bucket.
pub const BUCKETS_NS: [u64; 28] = {
    let mut b = [0u64; 28];
    let mut i = 0;
    while i < 28 {
        b[i] = 125 << i;
        i += 1;
    }
    b
};

/// Buckets of a [`Hist`]: [`BUCKETS_NS`] and `+Inf`.
const NB: usize = BUCKETS_NS.len() + 1;

/// Processes exported at most (the busiest since they were first seen).
pub const MAX_PROCESSES: usize = 1000;

/// Files counted at once at most.
pub const MAX_FILES_TRACKED: usize = 100_000;

/// The bucket of a value (ns): the first whose bound is ≥ it.
#[inline]
fn bucket(v: u64) -> usize {
    if v <= BUCKETS_NS[0] {
        return 0;
    }
    // v ≤ 125·2^k ⟺ ⌈v/125⌉ ≤ 2^k.
    let q = v.div_ceil(125);
    let k = (64 - (q - 1).leading_zeros()) as usize;
    k.min(NB - 1)
}

/// A cumulative histogram of ns values.
#[derive(Clone, Debug)]
struct Hist {
    counts: [u64; NB],
    sum_ns: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            counts: [0; NB],
            sum_ns: 0,
        }
    }
}

impl Hist {
    #[inline]
    fn add(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.sum_ns = self.sum_ns.wrapping_add(v);
    }
}

/// The op label of an event: read, write, or other (flush, discard…).
#[inline]
fn op_index(op: Op) -> usize {
    match op {
        Op::Read => 0,
        Op::Write => 1,
        _ => 2,
    }
}

const OPS: [&str; 3] = ["read", "write", "other"];

/// Counters and histograms of one key.
#[derive(Clone, Debug, Default)]
struct Series {
    ios: [u64; 3],
    bytes: [u64; 3],
    errors: u64,
    lat: [Hist; 3],
    queue: [Hist; 3],
    /// Timestamp of its last I/O (ns, CLOCK_MONOTONIC).
    last_ns: u64,
}

impl Series {
    #[inline]
    fn add(&mut self, e: &Event) {
        let k = op_index(e.op);
        self.ios[k] += 1;
        self.bytes[k] += e.bytes as u64;
        if e.error != 0 {
            self.errors += 1;
        }
        self.lat[k].add(e.latency_ns);
        if let Some(q) = e.queue_ns {
            self.queue[k].add(q);
        }
        self.last_ns = self.last_ns.max(e.timestamp_ns);
    }
    fn total(&self) -> u64 {
        self.ios.iter().sum()
    }
}

struct Proc {
    s: Series,
    names: ProcNames,
    cgroup: u64,
}

struct File {
    ios: [u64; 3],
    bytes: [u64; 3],
    last_ns: u64,
    path: String,
    dev: u32,
}

/// The cumulative metrics of `iodump top --serve`.
pub struct Metrics {
    devs: IntMap<u32, (Series, String)>,
    procs: IntMap<u32, Proc>,
    cgroups: IntMap<u64, Series>,
    files: IntMap<u32, File>,
    scope: Scope,
    top_files: usize,
    events: u64,
    untracked: u64,
    /// The devices that have had I/O since the start (never expired).
    devs_seen: DevicesSeen,
    /// The recorder's own state as of the last tick.
    recorder: RecorderStatus,
    evicted: u64,
    /// The last look at the I/Os in flight, per device in scope (name, figures), with the
    /// devices that had I/O in flight in earlier looks at 0 (so that a series returns to 0
    /// when its I/O completes); None before the first look.
    in_flight: Option<Vec<(String, DeviceInFlight)>>,
}

impl Metrics {
    /// Empty metrics; `container`: only I/O of that container (as `top --container`);
    /// `top_files`: files exported (the busiest).
    pub fn new(resolver: Resolver, container: Option<String>, top_files: usize) -> Metrics {
        Metrics {
            devs: IntMap::default(),
            procs: IntMap::default(),
            cgroups: IntMap::default(),
            files: IntMap::default(),
            scope: Scope::new(resolver, container),
            top_files,
            events: 0,
            untracked: 0,
            devs_seen: DevicesSeen::default(),
            recorder: RecorderStatus::default(),
            evicted: 0,
            in_flight: None,
        }
    }

    /// Adds one event. As in [`crate::live::Aggregator::add`], an I/O a stacked device sent
    /// down is counted on its own device only once that stacked device has had I/O: the
    /// processes, cgroups and files count each I/O once.
    pub fn add(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        if !self.scope.wanted(e.cgroup_id) {
            return;
        }
        self.events += 1;
        let owner = e.dirtier_pid.filter(|&p| p != 0).unwrap_or(e.pid);
        let devs_seen = &mut self.devs_seen;
        self.devs
            .entry(e.dev.0)
            .or_insert_with(|| {
                devs_seen.note(e.dev.0);
                (Series::default(), conv.dev_label(e.dev).to_string())
            })
            .0
            .add(e);
        if self.devs_seen.below_seen(e) {
            return;
        }
        let p = self.procs.entry(owner).or_insert_with(|| Proc {
            s: Series::default(),
            names: ProcNames::new(owner, e, r, conv),
            cgroup: e.cgroup_id,
        });
        p.s.add(e);
        p.cgroup = e.cgroup_id;
        p.names.update(owner, e, r, conv);
        self.cgroups.entry(e.cgroup_id).or_default().add(e);
        if self.top_files == 0 {
            return;
        }
        let full = self.files.len() >= MAX_FILES_TRACKED;
        let f = match self.files.get_mut(&e.path_id) {
            Some(f) => f,
            None if full => {
                self.untracked += 1;
                return;
            }
            None => self.files.entry(e.path_id).or_insert_with(|| File {
                ios: [0; 3],
                bytes: [0; 3],
                last_ns: 0,
                path: text_string(conv.path(e.path_id)),
                dev: e.dev.0,
            }),
        };
        let k = op_index(e.op);
        f.ios[k] += 1;
        f.bytes[k] += e.bytes as u64;
        f.dev = e.dev.0;
        f.last_ns = f.last_ns.max(e.timestamp_ns);
    }

    /// The recorder's own state: events lost since recording began, the flight recorder's
    /// snapshots and ring, the parts written and deleted.
    pub fn set_recorder(&mut self, status: &RecorderStatus) {
        self.recorder = *status;
    }

    /// The once-a-second look at the I/Os in flight: per device, those of the scope
    /// (`--container`). Devices shown are those with I/O in flight now or in an earlier
    /// look, and those with counted I/O.
    pub fn set_in_flight(&mut self, look: &InFlightLook, conv: &Converter) {
        let scope = &mut self.scope;
        let now = look.by_device(|io| scope.wanted(io.cgroup_id));
        let mut rows: Vec<(String, DeviceInFlight)> = self
            .in_flight
            .take()
            .unwrap_or_default()
            .into_iter()
            .map(|(name, d)| {
                (
                    name,
                    DeviceInFlight {
                        dev: d.dev,
                        ..DeviceInFlight::default()
                    },
                )
            })
            .collect();
        for d in now {
            match rows.iter_mut().find(|(_, r)| r.dev == d.dev) {
                Some(r) => r.1 = d,
                None => rows.push((crate::in_flight::device_name(conv, d.dev), d)),
            }
        }
        for (&dev, (_, name)) in &self.devs {
            if !rows.iter().any(|(_, r)| r.dev.0 == dev) {
                let d = DeviceInFlight {
                    dev: DevT(dev),
                    ..DeviceInFlight::default()
                };
                rows.push((name.clone(), d));
            }
        }
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        self.in_flight = Some(rows);
    }

    /// Drops the series idle for [`IDLE_NS`] at `now_ns` (CLOCK_MONOTONIC).
    pub fn expire(&mut self, now_ns: u64) {
        let keep = |last: u64| now_ns.saturating_sub(last) < IDLE_NS;
        let before = self.devs.len() + self.procs.len() + self.cgroups.len() + self.files.len();
        self.devs.retain(|_, d| keep(d.0.last_ns));
        self.procs.retain(|_, p| keep(p.s.last_ns));
        self.cgroups.retain(|_, c| keep(c.last_ns));
        self.files.retain(|_, f| keep(f.last_ns));
        let after = self.devs.len() + self.procs.len() + self.cgroups.len() + self.files.len();
        self.evicted += (before - after) as u64;
    }

    /// Files counted now.
    pub fn files_tracked(&self) -> usize {
        self.files.len()
    }

    /// The exposition: Prometheus text format 0.0.4, or OpenMetrics 1.0 (`openmetrics`).
    pub fn render(&mut self, openmetrics: bool) -> String {
        let mut w = Expo {
            out: String::with_capacity(64 << 10),
            om: openmetrics,
        };
        w.counter(
            "iodump_events",
            "I/Os counted (after the filters), since iodump started",
        );
        w.sample("iodump_events_total", "", self.events);
        w.counter(
            "iodump_lost_events",
            "Events lost by the recorder (ring buffer or in-flight table full, completions without a start)",
        );
        w.sample("iodump_lost_events_total", "", self.recorder.lost_events);
        w.counter(
            "iodump_series_evicted",
            "Series dropped after 5 minutes without I/O",
        );
        w.sample("iodump_series_evicted_total", "", self.evicted);
        w.gauge("iodump_files_tracked", "Files counted now (at most 100000)");
        w.sample("iodump_files_tracked", "", self.files.len() as u64);
        w.counter(
            "iodump_file_io_untracked",
            "I/Os to files not counted per file (too many files at once)",
        );
        w.sample("iodump_file_io_untracked_total", "", self.untracked);
        if let Some(f) = &self.recorder.flight {
            w.flight(f);
        }
        if let Some(p) = &self.recorder.parts {
            w.parts(p);
        }
        if let Some(rows) = &self.in_flight {
            w.in_flight(rows);
        }

        // Devices.
        let mut devs: Vec<(String, &Series)> = self
            .devs
            .values()
            .map(|(s, name)| (label("device", name), s))
            .collect();
        devs.sort_by(|a, b| a.0.cmp(&b.0));
        w.families("device", "device", &devs);

        // cgroups.
        let ids: Vec<u64> = self.cgroups.keys().copied().collect();
        let mut cgs: Vec<(String, &Series)> = Vec::with_capacity(ids.len());
        let mut labels = Vec::with_capacity(ids.len());
        for id in ids {
            let (path, container) = match self.scope.resolver.get(id) {
                Some(c) => (c.path.clone(), c.identity.label()),
                None => (format!("cgroup:{id}"), "-".to_string()),
            };
            labels.push((
                id,
                label("cgroup", &path) + "," + &label("container", &container),
            ));
        }
        for (id, l) in labels {
            cgs.push((l, &self.cgroups[&id]));
        }
        cgs.sort_by(|a, b| a.0.cmp(&b.0));
        w.families("cgroup", "cgroup (container, pod, systemd unit)", &cgs);

        // Processes: the busiest MAX_PROCESSES.
        let mut pids: Vec<(u64, u32)> = self.procs.iter().map(|(&k, p)| (p.s.total(), k)).collect();
        top(&mut pids, MAX_PROCESSES);
        let mut procs: Vec<(String, &Series)> = Vec::with_capacity(pids.len());
        let mut infos: Vec<String> = Vec::with_capacity(pids.len());
        let mut containers = Vec::with_capacity(pids.len());
        for &(_, pid) in &pids {
            let cg = self.procs[&pid].cgroup;
            containers.push((pid, self.scope.label(cg)));
        }
        for (pid, container) in containers {
            let p = &self.procs[&pid];
            // The series carry pid and comm; the command line and container are on the info
            // series only (joined on pid), as they are long.
            let key = label("pid", &pid.to_string()) + "," + &label("comm", &p.names.comm);
            infos.push(format!(
                "{key},{},{}",
                label("cmdline", &p.names.argv),
                label("container", &container)
            ));
            procs.push((key, &p.s));
        }
        procs.sort_by(|a, b| a.0.cmp(&b.0));
        infos.sort();
        w.info(
            "iodump_process",
            "A process's command line and container (1 per process exported)",
        );
        for l in &infos {
            w.sample("iodump_process_info", l, 1);
        }
        w.families(
            "process",
            "process (the dirtier for writeback, else the submitter)",
            &procs,
        );

        // Files: the busiest `top_files`, counters only.
        let mut ids: Vec<(u64, u32)> = self
            .files
            .iter()
            .map(|(&k, f)| (f.ios.iter().sum(), k))
            .collect();
        top(&mut ids, self.top_files);
        let mut files: Vec<(String, &File)> = ids
            .iter()
            .map(|(_, id)| {
                let f = &self.files[id];
                let dev = self.devs.get(&f.dev).map_or("?", |d| d.1.as_str());
                (label("path", &f.path) + "," + &label("device", dev), f)
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        let files: Vec<(String, [u64; 3], [u64; 3])> = files
            .into_iter()
            .map(|(l, f)| (l, f.ios, f.bytes))
            .collect();
        w.counter(
            "iodump_file_io",
            "I/Os per file and op (the busiest files only: --serve-files)",
        );
        for (l, ios, _) in &files {
            w.by_op("iodump_file_io_total", l, ios);
        }
        w.counter(
            "iodump_file_io_bytes",
            "Bytes per file and op (the busiest files only: --serve-files)",
        );
        for (l, _, bytes) in &files {
            w.by_op("iodump_file_io_bytes_total", l, bytes);
        }
        if w.om {
            w.out.push_str("# EOF\n");
        }
        w.out
    }
}

/// Keeps the `n` entries with the largest first field (ties: any).
fn top(v: &mut Vec<(u64, u32)>, n: usize) {
    if v.len() > n {
        if n == 0 {
            v.clear();
            return;
        }
        v.select_nth_unstable_by(n - 1, |a, b| b.0.cmp(&a.0));
        v.truncate(n);
    }
}

/// `name="value"` with the value escaped as the exposition formats require: `\` `"` and a
/// line feed as `\\`, `\"` and `\n`.
fn label(name: &str, value: &str) -> String {
    let mut s = String::with_capacity(name.len() + value.len() + 3);
    s.push_str(name);
    s.push_str("=\"");
    for c in value.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// An exposition being written.
struct Expo {
    out: String,
    om: bool,
}

impl Expo {
    fn meta(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }
    /// A counter family `name` (its samples are `name_total`).
    fn counter(&mut self, name: &str, help: &str) {
        if self.om {
            self.meta(name, "counter", help);
        } else {
            self.meta(&format!("{name}_total"), "counter", help);
        }
    }
    /// An info family `name` (its one sample per key is `name_info`, value 1): `info` in
    /// OpenMetrics, a gauge in the Prometheus format, which has no info type.
    fn info(&mut self, name: &str, help: &str) {
        if self.om {
            self.meta(name, "info", help);
        } else {
            self.meta(&format!("{name}_info"), "gauge", help);
        }
    }
    fn gauge(&mut self, name: &str, help: &str) {
        self.meta(name, "gauge", help);
    }
    /// One sample (a count, or seconds as f64).
    fn sample(&mut self, name: &str, labels: &str, v: impl std::fmt::Display) {
        if labels.is_empty() {
            let _ = writeln!(self.out, "{name} {v}");
        } else {
            let _ = writeln!(self.out, "{name}{{{labels}}} {v}");
        }
    }
    /// The flight recorder's families (`--ring`): what the trigger matched, the snapshots
    /// saved, failed and deleted, the snapshot being written, what the ring holds.
    fn flight(&mut self, f: &FlightStats) {
        self.counter(
            "iodump_trigger_matches",
            "I/Os that matched --trigger, whether or not they saved a snapshot (one during a snapshot, the cooldown or after --max-dumps saves none)",
        );
        self.sample("iodump_trigger_matches_total", "", f.trigger_matches);
        self.counter(
            "iodump_snapshots",
            "Snapshots of the ring started, by what asked for them: the trigger, or SIGUSR1 (signal)",
        );
        self.sample(
            "iodump_snapshots_total",
            "reason=\"trigger\"",
            f.snapshots_triggered,
        );
        self.sample(
            "iodump_snapshots_total",
            "reason=\"signal\"",
            f.snapshots_signalled,
        );
        self.counter(
            "iodump_snapshot_failures",
            "Snapshots not written whole, or not at all (a full file system, the directory gone); the ring goes on",
        );
        self.sample("iodump_snapshot_failures_total", "", f.snapshots_failed);
        self.counter(
            "iodump_snapshots_deleted",
            "Older snapshot files deleted to keep within --keep-dumps and --max-dumps-total",
        );
        self.sample("iodump_snapshots_deleted_total", "", f.snapshots_deleted);
        self.gauge(
            "iodump_snapshot_last_timestamp_seconds",
            "Wall clock (Unix time) at the start of the newest snapshot; 0 before the first",
        );
        self.sample(
            "iodump_snapshot_last_timestamp_seconds",
            "",
            f.last_snapshot_wall_ns as f64 / 1e9,
        );
        self.gauge(
            "iodump_snapshot_writing",
            "1 while a snapshot is being written (its --after has not passed), else 0",
        );
        self.sample("iodump_snapshot_writing", "", u64::from(f.writing));
        self.gauge(
            "iodump_ring_bytes",
            "Bytes of compressed segments the ring holds now",
        );
        self.sample("iodump_ring_bytes", "", f.ring_bytes);
        self.gauge(
            "iodump_ring_seconds",
            "Time from the oldest event the ring holds to the newest, in seconds: the history a snapshot would save now",
        );
        self.sample("iodump_ring_seconds", "", f.ring_span_ns as f64 / 1e9);
        if let Some((within, count)) = f.trigger_window {
            self.gauge(
                "iodump_trigger_window_matches",
                "I/Os that matched --trigger within the last --trigger-window, counted up to iodump_trigger_threshold_matches: the trigger fires when they reach it",
            );
            self.sample("iodump_trigger_window_matches", "", within);
            self.gauge(
                "iodump_trigger_threshold_matches",
                "--trigger-count: matches within --trigger-window that fire the trigger",
            );
            self.sample("iodump_trigger_threshold_matches", "", u64::from(count));
        }
    }
    /// A recording in parts' families (`-o DIR/`): parts started and deleted, the file
    /// system found full, bytes written.
    fn parts(&mut self, p: &PartsStats) {
        self.counter("iodump_parts", "Part files started by this recording");
        self.sample("iodump_parts_total", "", u64::from(p.parts));
        self.counter(
            "iodump_parts_deleted",
            "Part files deleted by retention (--keep, --max-total) or to go on when the file system was full",
        );
        self.sample("iodump_parts_deleted_total", "", u64::from(p.deleted));
        self.counter(
            "iodump_disk_full",
            "Times the file system was full and the oldest parts were deleted to go on (nothing lost)",
        );
        self.sample("iodump_disk_full_total", "", u64::from(p.disk_full));
        self.counter(
            "iodump_written_bytes",
            "Bytes of trace written by this recording, every part (deleted ones included)",
        );
        self.sample("iodump_written_bytes_total", "", p.bytes_written);
    }
    /// The gauges of the last look at the I/Os in flight, per device.
    fn in_flight(&mut self, rows: &[(String, DeviceInFlight)]) {
        self.gauge(
            "iodump_device_io_in_flight_oldest_seconds",
            "How long the oldest I/O in flight on the device has been in flight, among those in flight 0.1 s or more when last looked at (once a second); 0 when none",
        );
        for (name, d) in rows {
            self.sample(
                "iodump_device_io_in_flight_oldest_seconds",
                &label("device", name),
                d.oldest_ns as f64 / 1e9,
            );
        }
        self.gauge(
            "iodump_device_io_in_flight_slow",
            "I/Os in flight on the device for 1 s or more when last looked at (once a second)",
        );
        for (name, d) in rows {
            self.sample(
                "iodump_device_io_in_flight_slow",
                &label("device", name),
                d.slow,
            );
        }
    }

    /// One sample per op that has I/O.
    fn by_op(&mut self, name: &str, labels: &str, v: &[u64; 3]) {
        for (k, op) in OPS.iter().enumerate() {
            if v[k] > 0 {
                let _ = writeln!(self.out, "{name}{{{labels},op=\"{op}\"}} {}", v[k]);
            }
        }
    }
    fn hist(&mut self, name: &str, labels: &str, hs: &[Hist; 3], ios: &[u64; 3]) {
        for (k, op) in OPS.iter().enumerate() {
            let h = &hs[k];
            let n: u64 = h.counts.iter().sum();
            if ios[k] == 0 || n == 0 {
                continue;
            }
            let mut cum = 0;
            for (i, c) in h.counts.iter().enumerate() {
                cum += c;
                let le = BUCKETS_NS
                    .get(i)
                    .map_or_else(|| "+Inf".to_string(), |&b| (b as f64 / 1e9).to_string());
                let _ = writeln!(
                    self.out,
                    "{name}_bucket{{{labels},op=\"{op}\",le=\"{le}\"}} {cum}"
                );
            }
            let sum = h.sum_ns as f64 / 1e9;
            let _ = writeln!(self.out, "{name}_sum{{{labels},op=\"{op}\"}} {sum}");
            let _ = writeln!(self.out, "{name}_count{{{labels},op=\"{op}\"}} {n}");
        }
    }
    /// The five families of one kind of key (`iodump_KIND_io_total`…), `rows` sorted.
    fn families(&mut self, kind: &str, what: &str, rows: &[(String, &Series)]) {
        let name = format!("iodump_{kind}_io");
        self.counter(&name, &format!("I/Os per {what} and op"));
        for (l, s) in rows {
            self.by_op(&format!("{name}_total"), l, &s.ios);
        }
        self.counter(
            &format!("{name}_bytes"),
            &format!("Bytes per {what} and op"),
        );
        for (l, s) in rows {
            self.by_op(&format!("{name}_bytes_total"), l, &s.bytes);
        }
        self.counter(
            &format!("{name}_errors"),
            &format!("I/Os completed with an error per {what}"),
        );
        for (l, s) in rows {
            self.sample(&format!("{name}_errors_total"), l, s.errors);
        }
        type Pick = fn(&Series) -> &[Hist; 3];
        let hists: [(&str, &str, Pick); 2] = [
            (
                "latency_seconds",
                "Latency (entry into the block layer to completion)",
                |s| &s.lat,
            ),
            (
                "queue_seconds",
                "Queue time (entry to issue; request-based devices only)",
                |s| &s.queue,
            ),
        ];
        for (metric, help, pick) in hists {
            let h = format!("iodump_{kind}_io_{metric}");
            self.meta(&h, "histogram", &format!("{help} per {what} and op"));
            for (l, s) in rows {
                self.hist(&h, l, pick(s), &s.ios);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets() {
        for v in [
            0u64,
            1,
            999,
            1000,
            1001,
            1999,
            2000,
            2001,
            4000,
            4001,
            16_777_216_000,
        ] {
            let b = bucket(v);
            assert!(v <= BUCKETS_NS[b], "{v} in {b}");
            assert!(b == 0 || v > BUCKETS_NS[b - 1], "{v} in {b}");
        }
        assert_eq!(bucket(16_777_216_001), NB - 1);
        assert_eq!(bucket(u64::MAX), NB - 1);
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(label("path", "/a\"b\\c\nd"), r#"path="/a\"b\\c\nd""#);
        assert_eq!(text_string(b"/x\xff\\y"), "/x\\xff\\\\y");
    }

    #[test]
    fn top_keeps_the_busiest() {
        let mut v: Vec<(u64, u32)> = (0..100).map(|i| (i as u64, i)).collect();
        top(&mut v, 3);
        v.sort();
        assert_eq!(v, [(97, 97), (98, 98), (99, 99)]);
    }

    #[test]
    fn io_through_a_stack_is_one_process_io_and_each_devices_own() {
        use crate::convert::sample_io;
        use iodump_format::DevT;
        let (dm, sdb) = (DevT::new(253, 0), DevT::new(8, 16));
        let conv = Converter::new(&[], iodump_host::mounts::MountTable::default());
        let mut m = Metrics::new(Resolver::with_root(None), None, 10);
        let r = sample_io(0, 0);
        let io = crate::live::stacked_read;
        for _ in 0..4 {
            m.add(&io(dm, None), &r, &conv);
            // Two I/Os below for each, as on a mirror.
            m.add(&io(sdb, Some(dm)), &r, &conv);
            m.add(&io(sdb, Some(dm)), &r, &conv);
        }
        assert_eq!(m.procs[&10].s.total(), 4);
        assert_eq!(m.cgroups[&0].total(), 4);
        assert_eq!(m.files[&1].ios.iter().sum::<u64>(), 4);
        assert_eq!(m.devs[&dm.0].0.total(), 4);
        assert_eq!(m.devs[&sdb.0].0.total(), 8);
        assert_eq!(m.events, 12);
    }

    #[test]
    fn the_in_flight_gauges_show_the_last_look_and_return_to_zero() {
        use crate::convert::sample_io;
        use crate::in_flight::{InFlightIo, SLOW_NS};
        let (sda, sdb) = (DevT::new(8, 0), DevT::new(8, 16));
        let conv = Converter::new(&[], iodump_host::mounts::MountTable::default());
        let mut m = Metrics::new(Resolver::with_root(None), None, 10);
        assert!(
            !m.render(false).contains("in_flight"),
            "none before the first look"
        );
        let r = sample_io(0, 0);
        m.add(&crate::live::stacked_read(sdb, None), &r, &conv); // a device with counted I/O
        let io = |dev, age_ns| InFlightIo {
            dev,
            age_ns,
            cgroup_id: 0,
        };
        let look = |ios: Vec<InFlightIo>| InFlightLook {
            at_ns: 0,
            ios,
            stale: 0,
        };
        m.set_in_flight(
            &look(vec![io(sda, 3 * SLOW_NS / 2), io(sda, SLOW_NS / 5)]),
            &conv,
        );
        let text = m.render(false);
        // the converter knows no device here: by number; a device with counted I/O is at 0
        for want in [
            "# TYPE iodump_device_io_in_flight_oldest_seconds gauge\n",
            "iodump_device_io_in_flight_oldest_seconds{device=\"8:0\"} 1.5\n",
            "iodump_device_io_in_flight_slow{device=\"8:0\"} 1\n",
            "iodump_device_io_in_flight_slow{device=\"?\"} 0\n",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert_eq!(
            text.matches("iodump_device_io_in_flight_slow{").count(),
            2,
            "{text}"
        );
        m.set_in_flight(&look(Vec::new()), &conv);
        let text = m.render(true);
        assert!(
            text.contains("iodump_device_io_in_flight_oldest_seconds{device=\"8:0\"} 0\n")
                && text.contains("iodump_device_io_in_flight_slow{device=\"8:0\"} 0\n"),
            "back to 0: {text}"
        );
    }

    #[test]
    fn idle_series_are_dropped() {
        let mut m = Metrics::new(Resolver::with_root(None), None, 10);
        let s = |last_ns| Series {
            last_ns,
            ..Series::default()
        };
        m.cgroups.insert(1, s(1_000));
        m.cgroups.insert(2, s(IDLE_NS));
        m.expire(IDLE_NS + 1_000);
        assert!(m.cgroups.contains_key(&2) && !m.cgroups.contains_key(&1));
        let text = m.render(false);
        assert!(text.contains("iodump_series_evicted_total 1\n"), "{text}");
        assert!(m.render(true).ends_with("# EOF\n"));
    }
}
