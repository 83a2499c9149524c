//! Live aggregation for `iodump top`: every recorded event is added, as it arrives, to
//! per-file, per-process, per-device and per-cgroup counters kept in maps keyed by ids
//! (path id, pid, device number, cgroup id); each interval they become an [`Interval`] of
//! rows (rates, latency percentiles, queue time), and start again from zero. Drawing them
//! (the text table, the JSON lines of `top -b --json`) is the binary's (`src/top_view.rs`);
//! the Prometheus metrics of `top --serve` are [`crate::metrics`].
//!
//! Percentiles come from a fixed log-bucket histogram per row ([`Hist`]): 8 buckets per
//! power of two from 128 ns to 2^37 ns (137 s), a value reported as its bucket's midpoint
//! (capped at the interval's exact maximum), so within 6.25% of the exact percentile.
//!
//! Per event there is no allocation once a key is known: a key's entry is created the first
//! time it is seen (a file's path, a process's argv from `/proc/PID/cmdline` are copied
//! then), zeroed at each interval's end, and dropped after [`EVICT_AFTER`] intervals without
//! I/O.

use std::time::Duration;

use iodump_format::inthash::IntMap;
use iodump_format::text::text_string;
use iodump_format::{DevT, Event, Op};

use crate::abi::IoEvent;
use crate::cgroups::{Identity, Resolver};
use crate::convert::Converter;
use crate::in_flight::{DeviceInFlight, InFlightLook};

/// Lowest power of two with buckets of its own (128 ns); below is one bucket.
const MIN_SHIFT: u32 = 7;
/// Powers of two with buckets: up to 2^37 ns (137 s); above is one bucket.
const OCTAVES: u32 = 30;
/// log2 of buckets per power of two.
const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
/// Buckets of a [`Hist`].
pub const BUCKETS: usize = 2 + OCTAVES as usize * SUB;

/// A latency histogram with log buckets (8 per power of two), the count and the maximum.
#[derive(Clone, Debug)]
pub struct Hist {
    counts: [u32; BUCKETS],
    n: u64,
    max: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            counts: [0; BUCKETS],
            n: 0,
            max: 0,
        }
    }
}

fn bucket(v: u64) -> usize {
    if v < 1 << MIN_SHIFT {
        return 0;
    }
    let e = 63 - v.leading_zeros();
    if e >= MIN_SHIFT + OCTAVES {
        return BUCKETS - 1;
    }
    let sub = ((v >> (e - SUB_BITS)) as usize) & (SUB - 1);
    1 + (e - MIN_SHIFT) as usize * SUB + sub
}

/// The [low, high) bounds of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    if i == 0 {
        return (0, 1 << MIN_SHIFT);
    }
    if i == BUCKETS - 1 {
        return (1 << (MIN_SHIFT + OCTAVES), u64::MAX);
    }
    let o = ((i - 1) / SUB) as u32;
    let s = ((i - 1) % SUB) as u64;
    let e = o + MIN_SHIFT;
    let w = 1u64 << (e - SUB_BITS);
    let lo = (1u64 << e) + s * w;
    (lo, lo + w)
}

impl Hist {
    /// Adds one value (ns).
    #[inline]
    pub fn add(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.max = self.max.max(v);
    }

    /// Values added.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The largest value added.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q` quantile (0 < q ≤ 1): the midpoint of the bucket holding the value of rank
    /// ⌈q·n⌉, at most the maximum; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                let (lo, hi) = bounds(i);
                let mid = if hi == u64::MAX {
                    lo
                } else {
                    lo + (hi - lo) / 2
                };
                return mid.min(self.max);
            }
        }
        self.max
    }

    fn clear(&mut self) {
        if self.n > 0 {
            self.counts.fill(0);
            self.n = 0;
            self.max = 0;
        }
    }
}

/// Counters of one key over one interval.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// I/Os: reads, writes, other (flush, discard…).
    pub ios: [u64; 3],
    /// Bytes read, written.
    pub bytes: [u64; 2],
    /// Latency (entry into the block layer to completion).
    pub lat: Hist,
    /// Sum and count of queue times (request-based devices only).
    pub queue_sum_ns: u64,
    /// I/Os with a queue time.
    pub queue_n: u64,
    /// I/Os completed with an error.
    pub errors: u64,
}

impl Stats {
    #[inline]
    fn add(&mut self, e: &Event) {
        let k = match e.op {
            Op::Read => 0,
            Op::Write => 1,
            _ => 2,
        };
        self.ios[k] += 1;
        if k < 2 {
            self.bytes[k] += e.bytes as u64;
        }
        self.lat.add(e.latency_ns);
        if let Some(q) = e.queue_ns {
            self.queue_sum_ns += q;
            self.queue_n += 1;
        }
        if e.error != 0 {
            self.errors += 1;
        }
    }

    fn total_ios(&self) -> u64 {
        self.ios.iter().sum()
    }

    fn clear(&mut self) {
        self.ios = [0; 3];
        self.bytes = [0; 2];
        self.lat.clear();
        self.queue_sum_ns = 0;
        self.queue_n = 0;
        self.errors = 0;
    }

    fn metrics(&self, secs: f64) -> Metrics {
        Metrics {
            secs,
            ios: self.ios,
            bytes: self.bytes,
            p50_ns: self.lat.quantile(0.5),
            p99_ns: self.lat.quantile(0.99),
            max_ns: self.lat.max(),
            queue_ns: (self.queue_n > 0).then(|| self.queue_sum_ns / self.queue_n),
            errors: self.errors,
        }
    }
}

/// What a row shows of one key over one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Length of the interval in seconds.
    pub secs: f64,
    /// I/Os: reads, writes, other.
    pub ios: [u64; 3],
    /// Bytes read, written.
    pub bytes: [u64; 2],
    /// Median latency (ns).
    pub p50_ns: u64,
    /// 99th percentile latency (ns).
    pub p99_ns: u64,
    /// Largest latency (ns).
    pub max_ns: u64,
    /// Mean queue time (ns), for I/O to request-based devices.
    pub queue_ns: Option<u64>,
    /// I/Os completed with an error.
    pub errors: u64,
}

impl Metrics {
    fn rate(&self, v: u64) -> f64 {
        if self.secs > 0.0 {
            v as f64 / self.secs
        } else {
            0.0
        }
    }
    /// Reads per second.
    pub fn read_iops(&self) -> f64 {
        self.rate(self.ios[0])
    }
    /// Writes per second.
    pub fn write_iops(&self) -> f64 {
        self.rate(self.ios[1])
    }
    /// All I/Os per second.
    pub fn iops(&self) -> f64 {
        self.rate(self.ios.iter().sum())
    }
    /// MB (10^6 bytes) read per second.
    pub fn read_mbps(&self) -> f64 {
        self.rate(self.bytes[0]) / 1e6
    }
    /// MB written per second.
    pub fn write_mbps(&self) -> f64 {
        self.rate(self.bytes[1]) / 1e6
    }
}

/// A row's key and identity.
#[derive(Clone, Debug, PartialEq)]
pub enum Key {
    /// A file (or a label: `[metadata]`, `[journal]`, `/dev/X`…).
    File {
        /// Path id in the recording.
        path_id: u32,
        /// Its path.
        path: String,
        /// The device of its I/O.
        dev: String,
        /// The process with most of its I/O (the dirtier for writeback).
        pid: u32,
        /// That process's command name.
        comm: String,
    },
    /// A process (the dirtier of written-back pages, else the submitter).
    Proc {
        /// Process id.
        pid: u32,
        /// Command name.
        comm: String,
        /// Its command line when known (`/proc/PID/cmdline` when first seen).
        argv: String,
        /// Its cgroup's container, pod or unit label.
        container: String,
    },
    /// A device (a partition where the I/O targets one).
    Dev {
        /// Device number.
        dev: DevT,
        /// Kernel name.
        name: String,
    },
    /// A cgroup.
    Cgroup {
        /// cgroup v2 id.
        id: u64,
        /// Its path under the cgroup2 mount, or `cgroup:ID` when not found there.
        path: String,
        /// Container, pod and unit.
        identity: Identity,
    },
}

/// One row of an interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What it is.
    pub key: Key,
    /// Its figures.
    pub m: Metrics,
}

/// The groupings of `iodump top`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Per file.
    File,
    /// Per process.
    Proc,
    /// Per device.
    Dev,
    /// Per cgroup (container, pod, unit).
    Cgroup,
}

impl View {
    /// Every view, in the order `v` cycles through.
    pub const ALL: [View; 4] = [View::File, View::Proc, View::Dev, View::Cgroup];
    /// Its name (as `--by` takes it).
    pub fn name(self) -> &'static str {
        match self {
            View::File => "file",
            View::Proc => "proc",
            View::Dev => "dev",
            View::Cgroup => "cgroup",
        }
    }
    /// The next view in [`View::ALL`].
    pub fn next(self) -> View {
        let i = View::ALL.iter().position(|v| *v == self).unwrap_or(0);
        View::ALL[(i + 1) % View::ALL.len()]
    }
    /// The previous view.
    pub fn prev(self) -> View {
        let i = View::ALL.iter().position(|v| *v == self).unwrap_or(0);
        View::ALL[(i + View::ALL.len() - 1) % View::ALL.len()]
    }
}

/// Row orders (descending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// I/Os per second.
    Iops,
    /// Bytes per second.
    Throughput,
    /// p99 latency.
    Latency,
    /// Mean queue time.
    Queue,
}

impl Sort {
    /// Every order, in the order `s` cycles through.
    pub const ALL: [Sort; 4] = [Sort::Iops, Sort::Throughput, Sort::Latency, Sort::Queue];
    /// Its name (as `--sort` takes it).
    pub fn name(self) -> &'static str {
        match self {
            Sort::Iops => "iops",
            Sort::Throughput => "throughput",
            Sort::Latency => "latency",
            Sort::Queue => "queue",
        }
    }
    /// The next order.
    pub fn next(self) -> Sort {
        let i = Sort::ALL.iter().position(|v| *v == self).unwrap_or(0);
        Sort::ALL[(i + 1) % Sort::ALL.len()]
    }
    fn value(self, m: &Metrics) -> f64 {
        match self {
            Sort::Iops => m.ios.iter().sum::<u64>() as f64,
            Sort::Throughput => (m.bytes[0] + m.bytes[1]) as f64,
            Sort::Latency => m.p99_ns as f64,
            Sort::Queue => m.queue_ns.unwrap_or(0) as f64,
        }
    }
}

/// One interval's rows, every view.
#[derive(Clone, Debug, Default)]
pub struct Interval {
    /// Wall clock at its end (ns since the epoch).
    pub wall_ns: i64,
    /// Every I/O together.
    pub total: Metrics,
    /// Events lost in this interval (ring buffer full, in-flight table full…).
    pub lost: u64,
    /// Events lost since recording began.
    pub lost_total: u64,
    /// Per file.
    pub files: Vec<Row>,
    /// Per process.
    pub procs: Vec<Row>,
    /// Per device.
    pub devs: Vec<Row>,
    /// Per cgroup.
    pub cgroups: Vec<Row>,
    /// The devices with I/O in flight for a second or more at the last look at the I/Os in
    /// flight (once a second; `in_flight::SLOW_NS`), by name: what no other figure shows
    /// while an I/O hangs.
    pub in_flight_slow: Vec<(String, DeviceInFlight)>,
}

impl Interval {
    /// The rows of a view.
    pub fn rows(&self, v: View) -> &[Row] {
        match v {
            View::File => &self.files,
            View::Proc => &self.procs,
            View::Dev => &self.devs,
            View::Cgroup => &self.cgroups,
        }
    }

    /// Orders every view's rows by `s` (descending; ties by key).
    pub fn sort(&mut self, s: Sort) {
        for rows in [
            &mut self.files,
            &mut self.procs,
            &mut self.devs,
            &mut self.cgroups,
        ] {
            rows.sort_by(|a, b| {
                s.value(&b.m)
                    .total_cmp(&s.value(&a.m))
                    .then_with(|| key_text(&a.key).cmp(key_text(&b.key)))
            });
        }
    }
}

fn key_text(k: &Key) -> &str {
    match k {
        Key::File { path, .. } => path,
        Key::Proc { comm, .. } => comm,
        Key::Dev { name, .. } => name,
        Key::Cgroup { path, .. } => path,
    }
}

/// Entries without I/O for this many intervals are dropped.
pub const EVICT_AFTER: u16 = 10;

/// Slots of a file's per-process counts (space-saving: the busiest processes survive).
const OWNERS: usize = 4;

struct FileEntry {
    s: Stats,
    path: String,
    dev: u32,
    owners: [(u32, u32); OWNERS],
    idle: u16,
}

struct ProcEntry {
    s: Stats,
    names: ProcNames,
    cgroup: u64,
    idle: u16,
}

/// What a view names a process by: its command name and command line, read when it is first
/// seen and again when it execs.
pub(crate) struct ProcNames {
    /// The submitter's comm as the kernel gave it (zeros for a dirtier never seen submit).
    comm_raw: [u8; 16],
    pub(crate) comm: String,
    pub(crate) argv: String,
}

impl ProcNames {
    /// The names of `owner`, the process an I/O is counted for (`e`'s submitter, or the
    /// dirtier of written-back pages), as text (`text_string`: every byte kept; whoever
    /// draws them escapes what a terminal must not see).
    pub(crate) fn new(owner: u32, e: &Event, r: &IoEvent, conv: &Converter) -> ProcNames {
        let submitter = owner == e.pid;
        ProcNames {
            comm_raw: if submitter { r.comm } else { [0; 16] },
            comm: if submitter {
                text_string(r.comm())
            } else {
                read_comm(owner)
            },
            argv: argv_as(conv, owner),
        }
    }

    /// With each of its I/Os: when `owner` submitted it with a new comm (an exec, or first
    /// seen submitting), its names are read again.
    #[inline]
    pub(crate) fn update(&mut self, owner: u32, e: &Event, r: &IoEvent, conv: &Converter) {
        if owner == e.pid && self.comm_raw != r.comm {
            self.comm_raw = r.comm;
            self.comm = text_string(r.comm());
            self.argv = argv_as(conv, owner);
        }
    }
}

struct DevEntry {
    s: Stats,
    name: String,
    idle: u16,
}

struct CgEntry {
    s: Stats,
    idle: u16,
}

/// The command line of process `pid`, as the trace stores it: the converter's (read once per
/// process and again after exec) for a submitter, else read now (a writeback's dirtier).
fn argv_as(conv: &Converter, pid: u32) -> String {
    match conv.args(pid) {
        Some(a) => text_string(a),
        None => crate::convert::read_cmdline(pid).map_or_else(String::new, |a| text_string(&a)),
    }
}

/// `/proc/PID/comm`, or `?` for a process gone already (a writeback's dirtier that exited).
fn read_comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "?".to_string())
}

/// Which I/O a view counts (`--container`) and the resolver naming cgroups: shared by the
/// interval aggregator and the metrics of `--serve`.
pub(crate) struct Scope {
    pub(crate) resolver: Resolver,
    /// `--container`: only I/O of cgroups whose identity matches this prefix.
    container: Option<String>,
    /// cgroup id → does it match `container` (ids resolved so far).
    cg_match: IntMap<u64, bool>,
}

impl Scope {
    pub(crate) fn new(resolver: Resolver, container: Option<String>) -> Scope {
        Scope {
            resolver,
            container,
            cg_match: IntMap::default(),
        }
    }

    /// True when I/O of this cgroup is counted.
    #[inline]
    pub(crate) fn wanted(&mut self, cgroup_id: u64) -> bool {
        let Some(prefix) = &self.container else {
            return true;
        };
        if let Some(&m) = self.cg_match.get(&cgroup_id) {
            return m;
        }
        match self.resolver.get(cgroup_id) {
            Some(c) => {
                let m = c.identity.matches_container(prefix);
                self.cg_match.insert(cgroup_id, m);
                m
            }
            // Not found (yet): looked up again with the next walk of the tree.
            None => false,
        }
    }

    /// The container, pod or unit label of a cgroup (`-` when it has none or is unknown).
    pub(crate) fn label(&mut self, cgroup_id: u64) -> String {
        self.resolver
            .get(cgroup_id)
            .map_or_else(|| "-".to_string(), |c| c.identity.label())
    }
}

/// The devices that have had I/O since the start (never forgotten; few), for counting an I/O
/// through stacked devices once: an I/O a stacked device sent down is counted on its own
/// device only once that stacked device has had I/O.
#[derive(Default)]
pub(crate) struct DevicesSeen(Vec<u32>);

impl DevicesSeen {
    /// Notes a device's first I/O (called when its entry is made).
    pub(crate) fn note(&mut self, dev: u32) {
        if !self.0.contains(&dev) {
            self.0.push(dev);
        }
    }

    /// True when `e` was sent down by a stacked device that has had I/O.
    #[inline]
    pub(crate) fn below_seen(&self, e: &Event) -> bool {
        e.upper.is_some_and(|u| self.0.contains(&u.dev.0))
    }
}

/// The per-key counters of the current interval.
pub struct Aggregator {
    files: IntMap<u32, FileEntry>,
    procs: IntMap<u32, ProcEntry>,
    devs: IntMap<u32, DevEntry>,
    cgroups: IntMap<u64, CgEntry>,
    total: Stats,
    scope: Scope,
    lost_seen: u64,
    /// The devices that have had I/O since the start.
    devs_seen: DevicesSeen,
    /// Events added since the start.
    pub events: u64,
    /// The devices with I/O in flight for a second or more at the last look.
    in_flight_slow: Vec<(String, DeviceInFlight)>,
}

impl Aggregator {
    /// An empty aggregator; `container`: keep only I/O of that container (id prefix, see
    /// [`Identity::matches_container`]).
    pub fn new(resolver: Resolver, container: Option<String>) -> Aggregator {
        Aggregator {
            files: IntMap::default(),
            procs: IntMap::default(),
            devs: IntMap::default(),
            cgroups: IntMap::default(),
            total: Stats::default(),
            scope: Scope::new(resolver, container),
            lost_seen: 0,
            devs_seen: DevicesSeen::default(),
            events: 0,
            in_flight_slow: Vec::new(),
        }
    }

    /// The once-a-second look at the I/Os in flight: the devices with I/O of the scope
    /// (`--container`) in flight for a second or more, for the next interval.
    pub fn set_in_flight(&mut self, look: &InFlightLook, conv: &Converter) {
        let scope = &mut self.scope;
        self.in_flight_slow = look.slow_devices(conv, |io| scope.wanted(io.cgroup_id));
    }

    /// Adds one event. An I/O that a stacked device (LVM, dm-crypt, md, an NVMe multipath
    /// head) sent down is counted on its own device only once that stacked device has had
    /// I/O counted: the whole, the files, processes and cgroups count each I/O once, at the
    /// highest layer recorded.
    pub fn add(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        if !self.scope.wanted(e.cgroup_id) {
            return;
        }
        self.events += 1;
        let devs_seen = &mut self.devs_seen;
        self.devs
            .entry(e.dev.0)
            .or_insert_with(|| {
                devs_seen.note(e.dev.0);
                DevEntry {
                    s: Stats::default(),
                    name: conv.dev_label(e.dev).to_string(),
                    idle: 0,
                }
            })
            .s
            .add(e);
        if self.devs_seen.below_seen(e) {
            return;
        }
        self.total.add(e);
        // Writeback is the dirtier's I/O.
        let owner = e.dirtier_pid.filter(|&p| p != 0).unwrap_or(e.pid);
        let f = self.files.entry(e.path_id).or_insert_with(|| FileEntry {
            s: Stats::default(),
            path: text_string(conv.path(e.path_id)),
            dev: e.dev.0,
            owners: [(0, 0); OWNERS],
            idle: 0,
        });
        f.s.add(e);
        f.dev = e.dev.0;
        count_owner(&mut f.owners, owner);
        let p = self.procs.entry(owner).or_insert_with(|| ProcEntry {
            s: Stats::default(),
            names: ProcNames::new(owner, e, r, conv),
            cgroup: e.cgroup_id,
            idle: 0,
        });
        p.s.add(e);
        p.cgroup = e.cgroup_id;
        p.names.update(owner, e, r, conv);
        self.cgroups
            .entry(e.cgroup_id)
            .or_insert_with(|| CgEntry {
                s: Stats::default(),
                idle: 0,
            })
            .s
            .add(e);
    }

    /// Ends the interval (`secs` long, `lost_total` events lost since the start): its rows
    /// (unsorted), then every counter starts again from zero.
    pub fn end_interval(&mut self, secs: f64, lost_total: u64) -> Interval {
        let iv = Interval {
            wall_ns: wall_ns(),
            total: self.total.metrics(secs),
            lost: lost_total.saturating_sub(self.lost_seen),
            lost_total,
            procs: self.proc_rows(secs),
            files: self.file_rows(secs),
            devs: self.dev_rows(secs),
            cgroups: self.cgroup_rows(secs),
            in_flight_slow: self.in_flight_slow.clone(),
        };
        self.lost_seen = lost_total;
        self.total.clear();
        self.start_again();
        iv
    }

    fn proc_rows(&mut self, secs: f64) -> Vec<Row> {
        let mut rows = Vec::new();
        for (&pid, p) in &self.procs {
            if p.s.total_ios() == 0 {
                continue;
            }
            let container = self.scope.label(p.cgroup);
            rows.push(Row {
                key: Key::Proc {
                    pid,
                    comm: p.names.comm.clone(),
                    argv: p.names.argv.clone(),
                    container,
                },
                m: p.s.metrics(secs),
            });
        }
        rows
    }

    fn file_rows(&self, secs: f64) -> Vec<Row> {
        let mut rows = Vec::new();
        for (&path_id, f) in &self.files {
            if f.s.total_ios() == 0 {
                continue;
            }
            let pid = f
                .owners
                .iter()
                .max_by_key(|(_, n)| *n)
                .map_or(0, |(p, _)| *p);
            let comm = self.procs.get(&pid).map_or("?", |p| p.names.comm.as_str());
            let dev = self.devs.get(&f.dev).map_or("?", |d| d.name.as_str());
            rows.push(Row {
                key: Key::File {
                    path_id,
                    path: f.path.clone(),
                    dev: dev.to_string(),
                    pid,
                    comm: comm.to_string(),
                },
                m: f.s.metrics(secs),
            });
        }
        rows
    }

    fn dev_rows(&self, secs: f64) -> Vec<Row> {
        let mut rows = Vec::new();
        for (&dev, d) in &self.devs {
            if d.s.total_ios() > 0 {
                rows.push(Row {
                    key: Key::Dev {
                        dev: DevT(dev),
                        name: d.name.clone(),
                    },
                    m: d.s.metrics(secs),
                });
            }
        }
        rows
    }

    fn cgroup_rows(&mut self, secs: f64) -> Vec<Row> {
        let mut rows = Vec::new();
        let ids: Vec<u64> = self
            .cgroups
            .iter()
            .filter(|(_, c)| c.s.total_ios() > 0)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            let (path, identity) = match self.scope.resolver.get(id) {
                Some(c) => (c.path.clone(), c.identity.clone()),
                None => (format!("cgroup:{id}"), Identity::default()),
            };
            let m = self.cgroups[&id].s.metrics(secs);
            rows.push(Row {
                key: Key::Cgroup { id, path, identity },
                m,
            });
        }
        rows
    }

    /// Clears the counts for the next interval; forgets keys idle for [`EVICT_AFTER`].
    fn start_again(&mut self) {
        fn age<K, V>(m: &mut IntMap<K, V>, f: impl Fn(&mut V) -> (&mut Stats, &mut u16))
        where
            K: std::hash::Hash + Eq,
        {
            m.retain(|_, v| {
                let (s, idle) = f(v);
                if s.total_ios() == 0 {
                    *idle += 1;
                } else {
                    *idle = 0;
                    s.clear();
                }
                *idle < EVICT_AFTER
            });
        }
        age(&mut self.files, |v| (&mut v.s, &mut v.idle));
        age(&mut self.procs, |v| (&mut v.s, &mut v.idle));
        age(&mut self.devs, |v| (&mut v.s, &mut v.idle));
        age(&mut self.cgroups, |v| (&mut v.s, &mut v.idle));
    }
}

/// Space-saving count of a file's processes: a new process takes the least-counted slot.
#[inline]
fn count_owner(slots: &mut [(u32, u32); OWNERS], pid: u32) {
    let mut min = 0;
    for i in 0..OWNERS {
        if slots[i].0 == pid && slots[i].1 > 0 {
            slots[i].1 += 1;
            return;
        }
        if slots[i].1 < slots[min].1 {
            min = i;
        }
    }
    slots[min] = (pid, slots[min].1 + 1);
}

fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The shortest interval `top` takes: the recorder's loop reads the kernel's events every
/// 100 ms, so intervals end on those reads (a 250 ms interval lasts 200 or 300 ms; rates are
/// over the interval's real length).
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Parses an interval in the one grammar of every duration flag (`iodump_format::units`):
/// `1s`, `500ms`, `2.5s`, `1m`, `250us`, or bare seconds (`2`); `None` for a malformed or zero
/// one.
pub fn parse_interval(s: &str) -> Option<Duration> {
    iodump_format::units::parse_duration_ns(s)
        .ok()
        .filter(|&ns| ns > 0)
        .map(Duration::from_nanos)
}

/// A 4 KiB read of path 1 by pid 10 (tid 11) on `dev`, sent down by `upper` when given: for
/// tests of counting I/O through stacked devices.
#[cfg(test)]
pub(crate) fn stacked_read(dev: DevT, upper: Option<DevT>) -> Event {
    Event {
        timestamp_ns: 1,
        dev,
        sector: 0,
        bytes: 4096,
        op: Op::Read,
        flags: iodump_format::Flags(0),
        pid: 10,
        tid: 11,
        path_id: 1,
        queue_ns: None,
        latency_ns: 1000,
        error: 0,
        cpu: 0,
        syscall: None,
        dirtier_pid: None,
        cgroup_id: 0,
        upper: upper.map(|dev| iodump_format::UpperIo {
            dev,
            timestamp_ns: 1,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_through_a_stack_counts_once_and_on_each_device() {
        use crate::convert::{sample_io, Converter};
        let (dm, sdb) = (DevT::new(253, 0), DevT::new(8, 16));
        let conv = Converter::new(&[], iodump_host::mounts::MountTable::default());
        let mut agg = Aggregator::new(Resolver::with_root(None), None);
        let r = sample_io(0, 0);
        let io = stacked_read;
        // Before dm-0 has I/O, what names it is counted (its device may not be recorded).
        agg.add(&io(sdb, Some(dm)), &r, &conv);
        for _ in 0..3 {
            agg.add(&io(dm, None), &r, &conv);
            agg.add(&io(sdb, Some(dm)), &r, &conv);
        }
        agg.add(&io(sdb, None), &r, &conv);
        let iv = agg.end_interval(1.0, 0);
        assert_eq!(iv.total.ios[0], 5);
        assert_eq!(iv.procs[0].m.ios[0], 5);
        assert_eq!(iv.files[0].m.ios[0], 5);
        let dev_ios = |d: DevT| {
            iv.devs
                .iter()
                .find(|r| matches!(&r.key, Key::Dev { dev, .. } if *dev == d))
                .map(|r| r.m.ios[0])
        };
        assert_eq!(dev_ios(dm), Some(3), "{:?}", iv.devs);
        assert_eq!(dev_ios(sdb), Some(5), "{:?}", iv.devs);
    }

    #[test]
    fn histogram_buckets_and_quantiles() {
        for v in [
            0u64,
            1,
            127,
            128,
            129,
            1000,
            4096,
            5000,
            123_456,
            1 << 36,
            u64::MAX,
        ] {
            let (lo, hi) = bounds(bucket(v));
            assert!(lo <= v && (v < hi || hi == u64::MAX), "{v}: [{lo}, {hi})");
        }
        // Buckets tile the range.
        for i in 1..BUCKETS - 1 {
            assert_eq!(bounds(i).1, bounds(i + 1).0, "{i}");
        }
        let mut h = Hist::default();
        for v in 1..=1000u64 {
            h.add(v * 1000); // 1 µs … 1 ms
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.0625, "{p50}");
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.0625, "{p99}");
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(h.max(), 1_000_000);
        let mut one = Hist::default();
        one.add(42_000);
        assert!(one.quantile(0.5) <= 42_000 && one.quantile(0.5) > 39_000);
        assert_eq!(Hist::default().quantile(0.99), 0);
    }

    #[test]
    fn space_saving_owner() {
        let mut s = [(0, 0); OWNERS];
        for _ in 0..10 {
            count_owner(&mut s, 7);
        }
        for p in 100..110 {
            count_owner(&mut s, p);
        }
        let top = s.iter().max_by_key(|(_, n)| *n).unwrap();
        assert_eq!(top.0, 7);
    }

    #[test]
    fn intervals_parse() {
        assert_eq!(parse_interval("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_interval("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_interval("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_interval("1m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_interval("0"), None);
        assert_eq!(parse_interval("-1s"), None);
        assert_eq!(parse_interval("1 fortnight"), None);
    }
}
