//! Live aggregation for `iodump top`: every recorded event is added, as it arrives, to
//! per-file, per-process, per-device and per-cgroup counters kept in maps keyed by ids
//! (path id, pid, device number, cgroup id); each interval they become an [`Interval`] of
//! rows (rates, latency percentiles, queue time), drawn as text ([`render`]) or JSON
//! ([`to_json`]), and start again from zero.
//!
//! Percentiles come from a fixed log-bucket histogram per row ([`Hist`]): 8 buckets per
//! power of two from 128 ns to 2^37 ns (137 s), a value reported as its bucket's midpoint
//! (capped at the interval's exact maximum), so within 6.25% of the exact percentile.
//!
//! Per event there is no allocation once a key is known: a key's entry is created the first
//! time it is seen (a file's path, a process's argv from `/proc/PID/cmdline` are copied
//! then), zeroed at each interval's end, and dropped after [`EVICT_AFTER`] intervals without
//! I/O.

use std::fmt::Write as _;
use std::io::Write;
use std::time::{Duration, Instant};

use iodump_format::inthash::IntMap;
use iodump_format::units::{format_duration_ns, DurationStyle};
use iodump_format::{DevT, Event, Op};

use crate::abi::IoEvent;
use crate::cgroups::{Identity, Resolver};
use crate::convert::Converter;
use crate::session::LiveSink;

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
    fn rows_text(self, n: usize) -> String {
        let (one, many) = match self {
            View::File => ("file", "files"),
            View::Proc => ("process", "processes"),
            View::Dev => ("device", "devices"),
            View::Cgroup => ("cgroup", "cgroups"),
        };
        format!("{n} {}", if n == 1 { one } else { many })
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
    /// dirtier of written-back pages), made text by `text`.
    pub(crate) fn new(
        owner: u32,
        e: &Event,
        r: &IoEvent,
        conv: &Converter,
        text: fn(&[u8]) -> String,
    ) -> ProcNames {
        let submitter = owner == e.pid;
        ProcNames {
            comm_raw: if submitter { r.comm } else { [0; 16] },
            comm: if submitter {
                text(r.comm())
            } else {
                read_comm(owner)
            },
            argv: argv_as(conv, owner, text),
        }
    }

    /// With each of its I/Os: when `owner` submitted it with a new comm (an exec, or first
    /// seen submitting), its names are read again.
    #[inline]
    pub(crate) fn update(
        &mut self,
        owner: u32,
        e: &Event,
        r: &IoEvent,
        conv: &Converter,
        text: fn(&[u8]) -> String,
    ) {
        if owner == e.pid && self.comm_raw != r.comm {
            self.comm_raw = r.comm;
            self.comm = text(r.comm());
            self.argv = argv_as(conv, owner, text);
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
fn argv_as(conv: &Converter, pid: u32, text: fn(&[u8]) -> String) -> String {
    match conv.args(pid) {
        Some(a) => text(a),
        None => crate::convert::read_cmdline(pid).map_or_else(String::new, |a| text(&a)),
    }
}

/// `/proc/PID/comm`, or `?` for a process gone already (a writeback's dirtier that exited).
fn read_comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "?".to_string())
}

fn printable(b: &[u8]) -> String {
    String::from_utf8_lossy(b)
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
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

/// The per-key counters of the current interval.
pub struct Aggregator {
    files: IntMap<u32, FileEntry>,
    procs: IntMap<u32, ProcEntry>,
    devs: IntMap<u32, DevEntry>,
    cgroups: IntMap<u64, CgEntry>,
    total: Stats,
    scope: Scope,
    lost_seen: u64,
    /// Events added since the start.
    pub events: u64,
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
            events: 0,
        }
    }

    /// Adds one event.
    pub fn add(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        if !self.scope.wanted(e.cgroup_id) {
            return;
        }
        self.events += 1;
        self.total.add(e);
        // Writeback is the dirtier's I/O.
        let owner = e.dirtier_pid.filter(|&p| p != 0).unwrap_or(e.pid);
        let f = self.files.entry(e.path_id).or_insert_with(|| FileEntry {
            s: Stats::default(),
            path: printable(conv.path(e.path_id)),
            dev: e.dev.0,
            owners: [(0, 0); OWNERS],
            idle: 0,
        });
        f.s.add(e);
        f.dev = e.dev.0;
        count_owner(&mut f.owners, owner);
        let p = self.procs.entry(owner).or_insert_with(|| ProcEntry {
            s: Stats::default(),
            names: ProcNames::new(owner, e, r, conv, printable),
            cgroup: e.cgroup_id,
            idle: 0,
        });
        p.s.add(e);
        p.cgroup = e.cgroup_id;
        p.names.update(owner, e, r, conv, printable);
        self.devs
            .entry(e.dev.0)
            .or_insert_with(|| DevEntry {
                s: Stats::default(),
                name: conv.dev_label(e.dev).to_string(),
                idle: 0,
            })
            .s
            .add(e);
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

/// Parses an interval in the one grammar of every duration flag (`iodump_format::units`):
/// `1s`, `500ms`, `2.5s`, `1m`, `250us`, or bare seconds (`2`); `None` for a malformed or zero
/// one.
pub fn parse_interval(s: &str) -> Option<Duration> {
    iodump_format::units::parse_duration_ns(s)
        .ok()
        .filter(|&ns| ns > 0)
        .map(Duration::from_nanos)
}

/// A rate for a narrow column: `0`, `3.5`, `1234`.
fn rate(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// MB/s for a narrow column.
fn mbps(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A latency for a narrow column: `850ns`, `12us`, `1.25ms`, `2.1s`; `-` for none.
pub fn latency(ns: u64) -> String {
    if ns == 0 {
        "-".into()
    } else {
        format_duration_ns(ns as f64, DurationStyle::Narrow)
    }
}

/// Local time of day, `HH:MM:SS`.
fn local_hms(wall_ns: i64) -> String {
    let t: libc::time_t = (wall_ns / 1_000_000_000) as libc::time_t;
    // SAFETY: localtime_r writes only the tm we pass, on our stack.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// Cuts `s` to `w` characters: from the left for paths (`…/dir/file`), else from the right.
fn fit(s: &str, w: usize, keep_end: bool) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    if w == 0 {
        return String::new();
    }
    if keep_end {
        let tail: String = s.chars().skip(n - (w - 1)).collect();
        format!("…{tail}")
    } else {
        let head: String = s.chars().take(w - 1).collect();
        format!("{head}…")
    }
}

const NUM_HEADER: &str = "  READ/s WRITE/s  RMB/s  WMB/s    P50    P99  QUEUE";

fn num_cols(l: &mut String, m: &Metrics) {
    let _ = write!(
        l,
        "{:>7} {:>7} {:>6} {:>6} {:>6} {:>6} {:>6}",
        rate(m.read_iops()),
        rate(m.write_iops()),
        mbps(m.read_mbps()),
        mbps(m.write_mbps()),
        latency(m.p50_ns),
        latency(m.p99_ns),
        m.queue_ns.map_or_else(|| "-".to_string(), latency),
    );
}

/// What [`render`] draws besides the rows.
#[derive(Clone, Debug, Default)]
pub struct Screen<'a> {
    /// Interval length shown in the title.
    pub interval: Duration,
    /// Appended to the title (`[paused]`).
    pub status: &'a str,
    /// Most rows (None: all).
    pub limit: Option<usize>,
    /// Width to fit (None: lines as long as they come).
    pub width: Option<usize>,
}

/// An interval as text: a title, the totals line, a column header and the rows of `view`
/// (as sorted), each line at most `width` characters.
pub fn render(iv: &Interval, view: View, sort: Sort, scr: &Screen<'_>) -> Vec<String> {
    let rows = iv.rows(view);
    let mut out = vec![title_line(iv, view, sort, scr, rows.len()), totals_line(iv)];
    let shown = &rows[..scr.limit.map_or(rows.len(), |n| n.min(rows.len()))];
    let widths = ColumnWidths::of(shown);
    out.push(widths.header(view));
    for r in shown {
        out.push(widths.row(r, scr.width));
    }
    if let Some(w) = scr.width {
        for l in out.iter_mut().take(3) {
            if l.chars().count() > w {
                *l = fit(l, w, false);
            }
        }
    }
    out
}

fn title_line(iv: &Interval, view: View, sort: Sort, scr: &Screen<'_>, rows: usize) -> String {
    format!(
        "iodump top - {}  every {}  by {} (v)  sort {} (s)  {}{}",
        local_hms(iv.wall_ns),
        show_duration(scr.interval),
        view.name(),
        sort.name(),
        view.rows_text(rows),
        scr.status,
    )
}

fn totals_line(iv: &Interval) -> String {
    let t = &iv.total;
    format!(
        "Total: {} IOPS (r {} w {})  {} MB/s (r {} w {})  p50 {}  p99 {}  queue {}  errors {}  lost {} ({} total)",
        rate(t.iops()),
        rate(t.read_iops()),
        rate(t.write_iops()),
        mbps(t.read_mbps() + t.write_mbps()),
        mbps(t.read_mbps()),
        mbps(t.write_mbps()),
        latency(t.p50_ns),
        latency(t.p99_ns),
        t.queue_ns.map_or_else(|| "-".to_string(), latency),
        t.errors,
        iv.lost,
        iv.lost_total,
    )
}

/// The widths of the columns whose width follows the rows shown.
struct ColumnWidths {
    /// The container column: as wide as its widest label (within limits).
    container: usize,
    /// The file view's process column, `comm[pid]`, as wide as its widest entry.
    process: usize,
}

impl ColumnWidths {
    fn of(shown: &[Row]) -> ColumnWidths {
        let container = shown
            .iter()
            .map(|r| match &r.key {
                Key::Proc { container, .. } => container.chars().count(),
                Key::Cgroup { identity, .. } => identity.label().chars().count(),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .clamp(9, 40);
        let process = shown
            .iter()
            .map(|r| match &r.key {
                Key::File { pid, comm, .. } => comm.chars().count() + pid.to_string().len() + 2,
                _ => 0,
            })
            .max()
            .unwrap_or(0)
            .clamp(7, 24);
        ColumnWidths { container, process }
    }

    fn header(&self, view: View) -> String {
        let (cw, pw) = (self.container, self.process);
        let mut header = NUM_HEADER.to_string();
        match view {
            View::File => {
                let _ = write!(header, " {:<pw$} FILE", "PROCESS");
            }
            View::Proc => {
                let _ = write!(header, "     PID COMM            {:<cw$} ARGV", "CONTAINER");
            }
            View::Dev => header.push_str(" DEVICE       MAJ:MIN"),
            View::Cgroup => {
                let _ = write!(header, " {:<cw$} CGROUP", "CONTAINER");
            }
        }
        header
    }

    /// One row: the numbers, the view's key columns, and the last column (a path, the argv)
    /// cut to what is left of `width`.
    fn row(&self, r: &Row, width: Option<usize>) -> String {
        let (cw, pw) = (self.container, self.process);
        let mut l = String::new();
        num_cols(&mut l, &r.m);
        let (last, keep_end) = match &r.key {
            Key::File {
                path, pid, comm, ..
            } => {
                let who = format!("{comm}[{pid}]");
                let _ = write!(l, " {:<pw$} ", fit(&who, pw, false));
                (path.as_str(), true)
            }
            Key::Proc {
                pid,
                comm,
                argv,
                container,
            } => {
                let _ = write!(
                    l,
                    " {pid:>7} {:<15} {:<cw$} ",
                    fit(comm, 15, false),
                    fit(container, cw, false)
                );
                let shown = if argv.is_empty() { comm } else { argv };
                (shown.as_str(), false)
            }
            Key::Dev { dev, name } => {
                let _ = write!(l, " {:<12} ", fit(name, 12, false));
                l.push_str(&dev.to_string());
                ("", false)
            }
            Key::Cgroup { path, identity, .. } => {
                let _ = write!(l, " {:<cw$} ", fit(&identity.label(), cw, false));
                (path.as_str(), true)
            }
        };
        match width {
            Some(w) => {
                let used = l.chars().count();
                if used >= w {
                    l = fit(&l, w, false);
                } else {
                    l.push_str(&fit(last, w - used, keep_end));
                }
            }
            None => l.push_str(last),
        }
        l
    }
}

/// `1s`, `500ms`, `2.5s`.
pub fn show_duration(d: Duration) -> String {
    format_duration_ns(d.as_nanos() as f64, DurationStyle::Exact)
}

fn metrics_json(m: &Metrics) -> serde_json::Map<String, serde_json::Value> {
    let us = |ns: u64| ns as f64 / 1e3;
    let round = |v: f64| (v * 1000.0).round() / 1000.0;
    let mut o = serde_json::Map::new();
    let mut put = |k: &str, v: serde_json::Value| {
        o.insert(k.to_string(), v);
    };
    put("reads", m.ios[0].into());
    put("writes", m.ios[1].into());
    put("other", m.ios[2].into());
    put("read_bytes", m.bytes[0].into());
    put("write_bytes", m.bytes[1].into());
    put("read_iops", round(m.read_iops()).into());
    put("write_iops", round(m.write_iops()).into());
    put("read_mbps", round(m.read_mbps()).into());
    put("write_mbps", round(m.write_mbps()).into());
    put("p50_us", round(us(m.p50_ns)).into());
    put("p99_us", round(us(m.p99_ns)).into());
    put("max_us", round(us(m.max_ns)).into());
    put(
        "queue_us",
        m.queue_ns
            .map_or(serde_json::Value::Null, |q| round(us(q)).into()),
    );
    put("errors", m.errors.into());
    o
}

/// An interval as one JSON object (one line): time, interval, view, sort, totals with
/// losses, and the first `limit` rows of `view`.
pub fn to_json(iv: &Interval, view: View, sort: Sort, limit: Option<usize>) -> String {
    use serde_json::Value;
    let rows = iv.rows(view);
    let shown = &rows[..limit.map_or(rows.len(), |n| n.min(rows.len()))];
    let mut total = metrics_json(&iv.total);
    total.insert("lost_events".into(), iv.lost.into());
    total.insert("lost_events_total".into(), iv.lost_total.into());
    let rows: Vec<Value> = shown
        .iter()
        .map(|r| {
            let mut o = serde_json::Map::new();
            match &r.key {
                Key::File {
                    path,
                    dev,
                    pid,
                    comm,
                    ..
                } => {
                    o.insert("path".into(), path.as_str().into());
                    o.insert("device".into(), dev.as_str().into());
                    o.insert("pid".into(), (*pid).into());
                    o.insert("comm".into(), comm.as_str().into());
                }
                Key::Proc {
                    pid,
                    comm,
                    argv,
                    container,
                } => {
                    o.insert("pid".into(), (*pid).into());
                    o.insert("comm".into(), comm.as_str().into());
                    o.insert("argv".into(), argv.as_str().into());
                    o.insert("container".into(), container.as_str().into());
                }
                Key::Dev { dev, name } => {
                    o.insert("device".into(), name.as_str().into());
                    o.insert("dev".into(), dev.to_string().into());
                }
                Key::Cgroup { id, path, identity } => {
                    o.insert("cgroup_id".into(), (*id).into());
                    o.insert("cgroup".into(), path.as_str().into());
                    let opt = |v: &Option<String>| v.as_deref().map_or(Value::Null, Value::from);
                    o.insert(
                        "runtime".into(),
                        identity.runtime.map_or(Value::Null, |r| r.name().into()),
                    );
                    o.insert("container_id".into(), opt(&identity.container_id));
                    o.insert("pod_uid".into(), opt(&identity.pod_uid));
                    o.insert("qos".into(), opt(&identity.qos));
                    o.insert("unit".into(), opt(&identity.unit));
                    o.insert("label".into(), identity.label().into());
                }
            }
            o.extend(metrics_json(&r.m));
            Value::Object(o)
        })
        .collect();
    let mut o = serde_json::Map::new();
    o.insert("timestamp_ns".into(), iv.wall_ns.into());
    o.insert("interval_s".into(), iv.total.secs.into());
    o.insert("by".into(), view.name().into());
    o.insert("sort".into(), sort.name().into());
    o.insert("total".into(), Value::Object(total));
    o.insert("rows".into(), Value::Array(rows));
    Value::Object(o).to_string()
}

/// `iodump top -b`: an interval's text or JSON each `interval`, `iterations` times (None:
/// until stopped).
pub struct BatchSink<W: Write> {
    /// The aggregator fed by the recorder.
    pub agg: Aggregator,
    out: W,
    interval: Duration,
    ticking: bool,
    next: Instant,
    last: Instant,
    iterations: Option<u64>,
    done: u64,
    view: View,
    sort: Sort,
    limit: Option<usize>,
    json: bool,
    /// The first error writing to `out` (the sink stops then).
    pub error: Option<std::io::Error>,
}

impl<W: Write> BatchSink<W> {
    /// A batch printer.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        agg: Aggregator,
        out: W,
        interval: Duration,
        iterations: Option<u64>,
        view: View,
        sort: Sort,
        limit: Option<usize>,
        json: bool,
    ) -> BatchSink<W> {
        let now = Instant::now();
        BatchSink {
            agg,
            out,
            interval,
            ticking: false,
            next: now + interval,
            last: now,
            iterations,
            done: 0,
            view,
            sort,
            limit,
            json,
            error: None,
        }
    }

    /// Snapshots printed.
    pub fn done(&self) -> u64 {
        self.done
    }

    fn print(&mut self, iv: &Interval) -> std::io::Result<()> {
        if self.json {
            writeln!(
                self.out,
                "{}",
                to_json(iv, self.view, self.sort, self.limit)
            )?;
        } else {
            if self.done > 0 {
                writeln!(self.out)?;
            }
            let scr = Screen {
                interval: self.interval,
                limit: self.limit,
                ..Screen::default()
            };
            for l in render(iv, self.view, self.sort, &scr) {
                writeln!(self.out, "{l}")?;
            }
        }
        self.out.flush()
    }
}

impl<W: Write> LiveSink for BatchSink<W> {
    fn event(&mut self, e: &Event, r: &IoEvent, conv: &Converter) {
        self.agg.add(e, r, conv);
    }

    fn tick(&mut self, lost_events: u64) -> bool {
        let now = Instant::now();
        if !self.ticking {
            // The first tick: recording has started, the first interval starts now.
            self.ticking = true;
            self.agg.end_interval(0.0, lost_events);
            self.last = now;
            self.next = now + self.interval;
            return false;
        }
        if now < self.next {
            return false;
        }
        // Skipped intervals (a stall) are not made up for.
        while self.next <= now {
            self.next += self.interval;
        }
        let secs = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        let mut iv = self.agg.end_interval(secs, lost_events);
        iv.sort(self.sort);
        if let Err(e) = self.print(&iv) {
            self.error = Some(e);
            return true;
        }
        self.done += 1;
        self.iterations.is_some_and(|n| self.done >= n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(show_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(show_duration(Duration::from_secs(2)), "2s");
    }

    fn sample_interval() -> Interval {
        let m = |reads: u64, p99: u64| Metrics {
            secs: 2.0,
            ios: [reads, 10, 0],
            bytes: [reads * 4096, 10 * 65536],
            p50_ns: 50_000,
            p99_ns: p99,
            max_ns: p99,
            queue_ns: None,
            errors: 0,
        };
        Interval {
            wall_ns: 0,
            total: m(300, 3_000_000),
            lost: 1,
            lost_total: 5,
            files: vec![
                Row {
                    key: Key::File {
                        path_id: 1,
                        path: "/mnt/data/a-very-long-directory-name/file.bin".into(),
                        dev: "zram0".into(),
                        pid: 42,
                        comm: "fio".into(),
                    },
                    m: m(100, 3_000_000),
                },
                Row {
                    key: Key::File {
                        path_id: 2,
                        path: "/mnt/data/b".into(),
                        dev: "zram0".into(),
                        pid: 43,
                        comm: "dd".into(),
                    },
                    m: m(200, 1_000_000),
                },
            ],
            ..Interval::default()
        }
    }

    #[test]
    fn text_fits_and_sorts() {
        let mut iv = sample_interval();
        iv.sort(Sort::Iops);
        let scr = Screen {
            interval: Duration::from_secs(1),
            ..Screen::default()
        };
        let lines = render(&iv, View::File, Sort::Iops, &scr);
        assert!(
            lines[1].starts_with("Total: 155 IOPS (r 150 w 5.0)"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("lost 1 (5 total)"), "{}", lines[1]);
        assert!(lines[2].contains("FILE"));
        assert!(lines[3].ends_with("/mnt/data/b") && lines[3].contains(" dd[43] "));
        assert!(lines[4].ends_with("/file.bin"));
        iv.sort(Sort::Latency);
        let lines = render(&iv, View::File, Sort::Latency, &scr);
        assert!(lines[3].contains("fio[42]"), "{}", lines[3]);
        let narrow = Screen {
            width: Some(80),
            ..scr.clone()
        };
        for l in render(&iv, View::File, Sort::Latency, &narrow) {
            assert!(l.chars().count() <= 80, "{l}");
        }
        let l = &render(&iv, View::File, Sort::Latency, &narrow)[3];
        assert!(l.ends_with("/file.bin") && l.contains('…'), "{l}");
        let json: serde_json::Value =
            serde_json::from_str(&to_json(&iv, View::File, Sort::Latency, Some(1))).unwrap();
        assert_eq!(json["rows"].as_array().unwrap().len(), 1);
        assert_eq!(json["rows"][0]["comm"], "fio");
        assert_eq!(json["rows"][0]["read_iops"], 50.0);
        assert_eq!(json["total"]["lost_events"], 1);
        assert_eq!(json["rows"][0]["queue_us"], serde_json::Value::Null);
    }

    #[test]
    fn latency_text() {
        assert_eq!(latency(0), "-");
        assert_eq!(latency(850), "850ns");
        assert_eq!(latency(12_340), "12us");
        assert_eq!(latency(1_250_000), "1.25ms");
        assert_eq!(latency(2_100_000_000), "2.10s");
    }
}
