//! `iodump diff A B`: what changed between two recordings.
//!
//! This module owns the comparison: one parallel pass over each side (traces, recordings in
//! parts or Parquet datasets, through the one-pass driver of [`crate::onepass`]) folds every
//! I/O into per-group figures — for the whole recording, each device, process, file and
//! cgroup — kept in bounded memory (counts, sums and [`LogHist`] histograms; nothing per
//! event); groups are matched across the sides by name ([`process_name`],
//! [`cgroup_name`], a file's path), and each figure of each group becomes a row with A, B,
//! the change and the verdict of a stated test ([`Metric::test`]), ordered by the size of
//! the change.

use std::collections::HashMap;
use std::path::PathBuf;

use iodump_format::expr::Expr;
use iodump_format::inthash::IntMap;
use iodump_format::segment::{col, Columns};
use iodump_format::{DevT, EventBatch, Op};

use crate::grouping::{DenseSlots, Groups};
use crate::input::InputPath;
use crate::loghist::{
    chi_square_test, mann_whitney, proportion_test, quantile_test, rate_test, LogHist,
};
use crate::onepass::{pass, Layers, PassInfo, TraceDone};
use crate::onepass_source::Source;
use crate::parquet_input::cgroups_table;
use crate::AnalyzeError;

/// The groups a comparison is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// The whole recording.
    Total,
    /// Per device (by name).
    Dev,
    /// Per process (by normalised command line, [`process_name`]).
    Proc,
    /// Per file (by path; labels such as `[metadata]` per device).
    File,
    /// Per cgroup (by path with container ids and pod UIDs as `*`, [`cgroup_name`]).
    Cgroup,
}

impl Scope {
    /// Every scope, in the order rows of equal change are shown.
    pub const ALL: [Scope; 5] = [
        Scope::Total,
        Scope::Dev,
        Scope::Proc,
        Scope::File,
        Scope::Cgroup,
    ];

    /// Its name in the output: total, dev, proc, file, cgroup.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Total => "total",
            Scope::Dev => "dev",
            Scope::Proc => "proc",
            Scope::File => "file",
            Scope::Cgroup => "cgroup",
        }
    }
}

/// Which figures are ranked and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffBy {
    /// Every figure.
    Change,
    /// I/Os and IOPS.
    Ios,
    /// Bytes and throughput.
    Bytes,
    /// Read/write mix, size mix, sequential share.
    Mix,
    /// Latency and queue time.
    Latency,
}

/// What to compare and how.
#[derive(Clone, Debug)]
pub struct DiffConfig {
    /// The baseline (a trace, a recording's directory or files, a Parquet dataset).
    pub a: Vec<PathBuf>,
    /// What is compared with it.
    pub b: Vec<PathBuf>,
    /// Only the I/O matching this, on both sides.
    pub filter: Option<Expr>,
    /// Only the I/O matching this in A (with `filter`): another window of time of the same
    /// recording, another device…
    pub filter_a: Option<Expr>,
    /// Only the I/O matching this in B (with `filter`).
    pub filter_b: Option<Expr>,
    /// The groups compared (empty: all).
    pub scopes: Vec<Scope>,
    /// The figures ranked and shown.
    pub by: DiffBy,
    /// Most rows shown (0: all).
    pub limit: usize,
    /// Level of the tests with a p-value (default 0.01).
    pub alpha: f64,
    /// Smallest change called significant: percent of A for amounts, percentage points for
    /// shares (default 5).
    pub min_change_pct: f64,
    /// Compare what is intact of a damaged input instead of refusing it.
    pub allow_damaged: bool,
}

impl DiffConfig {
    /// The filter of side A (`a`) or B: `filter` and the side's own, when given.
    pub fn side_filter(&self, a: bool) -> Option<Expr> {
        let own = if a { &self.filter_a } else { &self.filter_b };
        match (self.filter.clone(), own.clone()) {
            (Some(f), Some(o)) => Some(f.and_also(o)),
            (f, o) => f.or(o),
        }
    }

    /// A comparison of `a` with `b` with the defaults: every scope and figure, 20 rows,
    /// α = 0.01, changes of at least 5%.
    pub fn new(a: Vec<PathBuf>, b: Vec<PathBuf>) -> DiffConfig {
        DiffConfig {
            a,
            b,
            filter: None,
            filter_a: None,
            filter_b: None,
            scopes: Vec::new(),
            by: DiffBy::Change,
            limit: 20,
            alpha: 0.01,
            min_change_pct: 5.0,
            allow_damaged: false,
        }
    }
}

/// Size classes of the size mix: ≤2K, then one per power of two from 4K to 1M ((2K, 4K],
/// (4K, 8K]…), then >1M.
pub const SIZE_CLASSES: usize = 11;

/// The names of the size classes.
pub const SIZE_CLASS_NAMES: [&str; SIZE_CLASSES] = [
    "<=2K", "4K", "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M", ">1M",
];

/// The size class of a data I/O of `bytes`.
#[inline]
pub fn size_class(bytes: u32) -> usize {
    if bytes <= 2048 {
        return 0;
    }
    let ceil_log2 = 32 - (bytes - 1).leading_zeros() as usize; // 12 for 4096
    (ceil_log2 - 11).min(SIZE_CLASSES - 1)
}

/// How many of its stream's previous I/Os an I/O may continue to be sequential.
const SEQ_TRACK: usize = 4;

/// One group's figures in one recording.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// I/Os.
    pub ios: u64,
    /// Bytes.
    pub bytes: u64,
    /// Sum of the squares of the I/O sizes (the variance of the bytes' rate test).
    pub bytes_sq: f64,
    /// Reads.
    pub reads: u64,
    /// Writes.
    pub writes: u64,
    /// Data I/Os (reads and writes) per size class.
    pub sizes: [u64; SIZE_CLASSES],
    /// Data I/Os that start where one of the previous I/Os of their stream ended: of the same
    /// thread on the same device (of the same file on the same device, for a file).
    pub sequential: u64,
    /// Latency (entry into the block layer to completion).
    pub latency: LogHist,
    /// Queue time (request-based devices).
    pub queue: LogHist,
}

impl Figures {
    /// Adds another group's figures.
    pub fn merge(&mut self, o: &Figures) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.bytes_sq += o.bytes_sq;
        self.reads += o.reads;
        self.writes += o.writes;
        for (a, b) in self.sizes.iter_mut().zip(&o.sizes) {
            *a += b;
        }
        self.sequential += o.sequential;
        self.latency.merge(&o.latency);
        self.queue.merge(&o.queue);
    }

    /// Reads and writes.
    pub fn data_ios(&self) -> u64 {
        self.reads + self.writes
    }
}

/// The columns of one I/O that a group's figures take.
#[derive(Clone, Copy, Default)]
struct Io {
    sector: u64,
    latency_ns: u64,
    /// Valid when `has_queue`.
    queue_ns: u64,
    bytes: u32,
    op: u8,
    has_queue: bool,
}

const _: () = assert!(std::mem::size_of::<Io>() == 32);

impl Figures {
    /// Adds a run of I/Os of one stream (a thread or a file, on one device) in one segment,
    /// in their order: a data I/O (read or write) is sequential when it starts where one of
    /// the stream's last [`SEQ_TRACK`] data I/Os of the run ended (so the figures do not
    /// depend on which worker reads which segments). The sums are kept in locals over the
    /// run and added once.
    fn add_run(&mut self, run: &[Io]) {
        let (mut bytes, mut bytes_sq) = (self.bytes, self.bytes_sq);
        let (mut reads, mut writes, mut sequential) = (self.reads, self.writes, self.sequential);
        let (mut lat_sum, mut lat_max) = (0u128, 0u64);
        let (mut q_n, mut q_sum, mut q_max) = (0u64, 0u128, 0u64);
        // Where the run's last data I/Os ended (the first `seen` are valid).
        let mut ends = [0u64; SEQ_TRACK];
        let (mut next, mut seen) = (0usize, 0usize);
        for io in run {
            bytes += u64::from(io.bytes);
            bytes_sq += f64::from(io.bytes) * f64::from(io.bytes);
            self.latency.add_bin(io.latency_ns);
            lat_sum += u128::from(io.latency_ns);
            lat_max = lat_max.max(io.latency_ns);
            if io.has_queue {
                self.queue.add_bin(io.queue_ns);
                q_n += 1;
                q_sum += u128::from(io.queue_ns);
                q_max = q_max.max(io.queue_ns);
            }
            if io.op == Op::Read.code() {
                reads += 1;
            } else if io.op == Op::Write.code() {
                writes += 1;
            } else {
                continue;
            }
            self.sizes[size_class(io.bytes)] += 1;
            sequential += u64::from(ends[..seen].contains(&io.sector));
            ends[next] = io.sector.wrapping_add(u64::from(io.bytes).div_ceil(512));
            next = (next + 1) % SEQ_TRACK;
            seen = (seen + 1).min(SEQ_TRACK);
        }
        self.ios += run.len() as u64;
        (self.bytes, self.bytes_sq) = (bytes, bytes_sq);
        (self.reads, self.writes, self.sequential) = (reads, writes, sequential);
        self.latency.add_totals(run.len() as u64, lat_sum, lat_max);
        self.queue.add_totals(q_n, q_sum, q_max);
    }
}

/// One scope's groups in a worker: figures by key, the last key used remembered (I/Os of one
/// thread often come in runs, so most I/Os find their entry without hashing).
struct Keyed<K> {
    index: IntMap<K, u32>,
    entries: Vec<Figures>,
    /// The key of each entry.
    keys: Vec<K>,
    last: Option<(K, u32)>,
}

impl<K> Default for Keyed<K> {
    fn default() -> Self {
        Keyed {
            index: IntMap::default(),
            entries: Vec::new(),
            keys: Vec::new(),
            last: None,
        }
    }
}

impl<K: Copy + Eq + std::hash::Hash> Keyed<K> {
    #[inline]
    fn get(&mut self, k: K) -> &mut Figures {
        let i = self.index_of(k);
        &mut self.entries[i as usize]
    }

    /// The index of `k`'s value, made when new.
    #[inline]
    fn index_of(&mut self, k: K) -> u32 {
        match self.last {
            Some((lk, li)) if lk == k => li,
            _ => {
                let (entries, keys) = (&mut self.entries, &mut self.keys);
                let i = *self.index.entry(k).or_insert_with(|| {
                    entries.push(Figures::default());
                    keys.push(k);
                    entries.len() as u32 - 1
                });
                self.last = Some((k, i));
                i
            }
        }
    }

    fn merge(&mut self, o: Keyed<K>) {
        for (k, i) in o.index {
            self.get(k).merge(&o.entries[i as usize]);
        }
    }

    /// The index of `k`'s value, made when new, trying `hint` first (a slot the caller keeps
    /// per some part of the key, `u32::MAX` when unset), which it then holds.
    #[inline]
    fn index_hinted(&mut self, k: K, hint: &mut u32) -> u32 {
        if let Some(&hk) = self.keys.get(*hint as usize) {
            if hk == k {
                return *hint;
            }
        }
        *hint = self.index_of(k);
        *hint
    }

    /// Every (key, value).
    fn drain(self) -> impl Iterator<Item = (K, Figures)> {
        let mut entries: Vec<Option<Figures>> = self.entries.into_iter().map(Some).collect();
        self.index
            .into_iter()
            .filter_map(move |(k, i)| entries[i as usize].take().map(|e| (k, e)))
    }
}

/// A thread's I/O on one device in one cgroup (0 when the cgroups are not compared): the
/// whole recording, its devices, processes and cgroups are sums of these.
type ThreadKey = (u32, u32, u32, u64);

/// What a worker folds one trace's segments into: figures per thread on a device (few) and,
/// when files are compared, per file on a device (thousands).
#[derive(Default)]
struct Acc {
    threads: Keyed<ThreadKey>,
    /// The index in `threads` of the last key seen with each thread id: a thread's entry
    /// without hashing (I/O of several threads interleaves).
    thread_of_tid: DenseSlots,
    /// (dev << 32 | path id).
    file: Keyed<u64>,
    /// Per device, the I/O stacked devices sent down while their own I/O is counted
    /// ([`crate::onepass::Rows::below`]): only the device scope adds it.
    below: Keyed<u32>,
    /// The index in `file` of each (device, path id), by device then path id (u32::MAX: not
    /// seen yet): a file's index without hashing.
    dense: Vec<(u32, DenseSlots)>,
    /// A segment's rows grouped by thread, then by file ([`Acc::add`]); kept to reuse their
    /// memory.
    groups: Groups,
    /// A segment's kept I/Os in row order, then grouped (memory reused).
    ios: Vec<Io>,
    grouped: Vec<Io>,
    /// Whether the rows come in time order (what `sequential_pct` needs).
    order: RowOrder,
}

/// Whether a dataset's rows let sequential I/O be found, which follows each stream in row
/// order within a row group: how many rows were read, in how many batches, and how many are
/// earlier than the row before them. A trace's segments hold their I/Os in time order; a
/// dataset rewritten by another engine may not (Spark's `repartition` shuffles them), or may
/// hold a few rows per row group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowOrder {
    /// Rows of datasets read (kept by the filter).
    pub rows: u64,
    /// Batches (a row group, or up to 8,192 rows of one) they came in, and the rows of those
    /// batches, kept by the filter or not.
    pub batches: u64,
    pub batch_rows: u64,
    /// Rows earlier than the kept row before them in their batch.
    pub earlier: u64,
}

impl RowOrder {
    /// Why sequential I/O cannot be told from these rows: more than 1% of them out of time
    /// order, or fewer than 64 rows per row group (of 1,000 rows or more).
    pub fn no_sequential(&self) -> Option<String> {
        if self.earlier.saturating_mul(100) > self.rows {
            Some(format!(
                "{} of its {} rows are earlier than the row before them (rewritten out of time order by another engine?)",
                self.earlier, self.rows
            ))
        } else if self.batch_rows >= 1000 && self.batch_rows < self.batches.saturating_mul(64) {
            Some(format!(
                "its {} rows come in {} row groups, {:.1} rows each (sequential I/O is followed within a row group)",
                self.batch_rows,
                self.batches,
                self.batch_rows as f64 / self.batches as f64
            ))
        } else {
            None
        }
    }

    /// Counts `keep`'s rows of `b`. A trace's segments, whose time column the diff does not
    /// decode (the recorder writes each segment in time order), count none earlier; a
    /// dataset's row groups come with their time column.
    fn add(&mut self, b: &EventBatch, keep: &[u32]) {
        let ts = &b.timestamp_ns;
        if ts.len() < b.len() {
            return;
        }
        let earlier = keep
            .windows(2)
            .filter(|w| ts[w[1] as usize] < ts[w[0] as usize])
            .count();
        self.rows += keep.len() as u64;
        self.batches += 1;
        self.batch_rows += b.len() as u64;
        self.earlier += earlier as u64;
    }

    fn merge(&mut self, o: RowOrder) {
        self.rows += o.rows;
        self.batches += o.batches;
        self.batch_rows += o.batch_rows;
        self.earlier += o.earlier;
    }
}

/// What a pass folds besides threads: files, and cgroups (into the thread key).
#[derive(Clone, Copy)]
struct Folded {
    file: bool,
    cgroup: bool,
}

impl Acc {
    /// The index in `file` of path `path_id` on `dev`.
    #[inline]
    fn file_index(&mut self, dev: u32, path_id: u32) -> u32 {
        let key = u64::from(dev) << 32 | u64::from(path_id);
        let d = match self.dense.iter().position(|(d, _)| *d == dev) {
            Some(d) => d,
            None => {
                self.dense.push((dev, DenseSlots::default()));
                self.dense.len() - 1
            }
        };
        match self.dense[d].1.slot(path_id) {
            Some(slot) => {
                if *slot == u32::MAX {
                    *slot = self.file.index_of(key);
                }
                *slot
            }
            None => self.file.index_of(key),
        }
    }

    /// The index in `threads` of the thread of row `i`.
    #[inline]
    fn thread_index(&mut self, on: Folded, b: &EventBatch, i: usize) -> u32 {
        let cgroup = if on.cgroup { b.cgroup_id[i] } else { 0 };
        let key = (b.dev[i], b.pid[i], b.tid[i], cgroup);
        match self.thread_of_tid.slot(b.tid[i]) {
            Some(hint) => self.threads.index_hinted(key, hint),
            None => self.threads.index_of(key),
        }
    }

    /// Folds a segment's kept rows: grouped by thread, then by file (each group's rows kept
    /// in their order, so sequential I/O is found within the group), each group's rows
    /// added in a run ([`Figures::add_run`]): a group's figures are fetched once per segment
    /// rather than once per I/O (thousands of files do not fit in cache), and its sums stay
    /// in registers over the run.
    fn add(&mut self, on: Folded, b: &EventBatch, keep: &[u32]) {
        self.order.add(b, keep);
        let mut ios = std::mem::take(&mut self.ios);
        gather(&mut ios, b, keep);
        let mut groups = std::mem::take(&mut self.groups);
        let mut grouped = std::mem::take(&mut self.grouped);
        groups.key(keep.len(), |j| self.thread_index(on, b, keep[j] as usize));
        groups.scatter(ios.iter().copied(), &mut grouped);
        for (t, r) in groups.ranges() {
            self.threads.entries[t].add_run(&grouped[r]);
        }
        if on.file {
            groups.key(keep.len(), |j| {
                let i = keep[j] as usize;
                self.file_index(b.dev[i], b.path_id[i])
            });
            groups.scatter(ios.iter().copied(), &mut grouped);
            // Thousands of files' histograms do not stay in cache: the bins of the next
            // file's run are fetched while this one's are added.
            let mut runs = groups.ranges().peekable();
            while let Some((f, r)) = runs.next() {
                if let Some((nf, nr)) = runs.peek() {
                    let next = &self.file.entries[*nf];
                    for io in &grouped[nr.clone()] {
                        next.latency.prefetch(io.latency_ns);
                        if io.has_queue {
                            next.queue.prefetch(io.queue_ns);
                        }
                    }
                }
                self.file.entries[f].add_run(&grouped[r]);
            }
        }
        self.groups = groups;
        self.grouped = grouped;
        self.ios = ios;
    }

    /// Folds a segment's rows that a stacked device sent down while its own I/O is counted,
    /// grouped by device.
    fn add_below(&mut self, b: &EventBatch, below: &[u32]) {
        if below.is_empty() {
            return;
        }
        let mut ios = std::mem::take(&mut self.ios);
        gather(&mut ios, b, below);
        let mut groups = std::mem::take(&mut self.groups);
        let mut grouped = std::mem::take(&mut self.grouped);
        groups.key(below.len(), |j| {
            self.below.index_of(b.dev[below[j] as usize])
        });
        groups.scatter(ios.iter().copied(), &mut grouped);
        for (d, r) in groups.ranges() {
            self.below.entries[d].add_run(&grouped[r]);
        }
        self.groups = groups;
        self.grouped = grouped;
        self.ios = ios;
    }

    fn merge(&mut self, o: Acc) {
        self.order.merge(o.order);
        self.threads.merge(o.threads);
        self.below.merge(o.below);
        // Keys already here keep their index, new ones are appended: `dense` stays true, and
        // learns the new ones when they are looked up.
        self.file.merge(o.file);
    }
}

/// The columns the figures take of rows `rows` of `b`, once per I/O in row order, into
/// `ios` (emptied first).
fn gather(ios: &mut Vec<Io>, b: &EventBatch, rows: &[u32]) {
    ios.clear();
    ios.extend(rows.iter().map(|&k| {
        let i = k as usize;
        let queue_ns = b.queue_ns.get(i);
        Io {
            sector: b.sector[i],
            latency_ns: b.latency_ns[i],
            queue_ns: queue_ns.unwrap_or(0),
            bytes: b.bytes[i],
            op: b.op[i],
            has_queue: queue_ns.is_some(),
        }
    }));
}

/// One side of a comparison: its groups by (scope, name), and what its pass saw.
pub struct Side {
    /// The inputs, as named.
    pub name: String,
    /// Groups by scope and name.
    pub groups: HashMap<(Scope, String), Figures>,
    /// I/Os that passed the filter.
    pub events: u64,
    /// From its first to its last I/O (0 with one I/O or none: its rates are then undefined).
    pub duration_s: f64,
    /// Events the recorder lost.
    pub lost_events: u64,
    /// Damaged chunks skipped (only with [`DiffConfig::allow_damaged`]).
    pub damaged: Vec<(String, iodump_format::Damage)>,
    /// True when a cgroups table was read (cgroup groups exist).
    pub has_cgroups: bool,
    /// True when one of its inputs has a cgroups table (a trace of format 1.2 or later, a
    /// dataset with rows in its `cgroups` table), or the cgroups were not asked for.
    pub knows_cgroups: bool,
    /// Whether its rows let sequential I/O be found: else `sequential_pct` is not compared.
    pub order: RowOrder,
}

/// Reads one side in one parallel pass.
pub fn read_side(
    paths: &[PathBuf],
    filter: Option<&Expr>,
    scopes: &[Scope],
    allow_damaged: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<Side, AnalyzeError> {
    let inputs = InputPath::expand_recording(paths)?;
    // A container or cgroup filter on a side without a cgroups table would keep nothing.
    if filter.is_some_and(Expr::uses_cgroup_table) {
        crate::engine::check_cgroup_tables(&inputs)?;
    }
    let name = side_name(paths);
    let mut on = [false; 5];
    for (i, s) in Scope::ALL.iter().enumerate() {
        on[i] = scopes.is_empty() || scopes.contains(s);
    }
    let folded = Folded {
        file: on[3],
        // Only traces with a cgroups table have cgroup groups.
        cgroup: on[4] && any_cgroup_table(&inputs),
    };
    on[4] = folded.cgroup;
    let mut groups: HashMap<(Scope, String), Figures> = HashMap::new();
    let mut has_cgroups = false;
    let mut order = RowOrder::default();
    // The columns the figures read (trace segments decode only those).
    let mut want = Columns::of(&[
        col::DEV,
        col::SECTOR,
        col::BYTES,
        col::OP,
        col::PID,
        col::TID,
        col::PATH_ID,
        col::QUEUE_NS,
        col::LATENCY_NS,
    ]);
    if folded.cgroup {
        want = want.union(Columns::of(&[col::CGROUP_ID]));
    }
    // A dataset's rows may come out of time order (see [`RowOrder`]): their time is read to
    // tell. (A trace's segments are in time order: not decoded.)
    if inputs.iter().any(|i| matches!(i, InputPath::Parquet(_))) {
        want = want.union(Columns::of(&[col::TIMESTAMP_NS]));
    }
    let info: PassInfo = pass(
        want,
        &inputs,
        filter,
        Layers::Once,
        progress,
        Acc::default,
        |acc, _, b, rows| {
            acc.add(folded, b, rows.keep);
            if on[1] {
                acc.add_below(b, rows.below);
            }
        },
        Acc::merge,
        |t: TraceDone<'_, Acc>| {
            let src = t.input;
            order.merge(t.acc.order);
            // The groups of this trace by raw key (total, device, (pid, tid), cgroup), then
            // by name.
            let mut by: [IntMap<u64, Figures>; 4] = Default::default();
            for ((dev, pid, tid, cgroup), f) in t.acc.threads.drain() {
                let keys = [
                    0,
                    u64::from(dev),
                    u64::from(pid) << 32 | u64::from(tid),
                    cgroup,
                ];
                for (s, k) in [0, 1, 2, 4].into_iter().zip(keys) {
                    if on[s] {
                        let slot = if s == 4 { 3 } else { s };
                        by[slot].entry(k).or_default().merge(&f);
                    }
                }
            }
            let mut put = |scope: Scope, name: String, f: Figures| match groups.entry((scope, name))
            {
                std::collections::hash_map::Entry::Occupied(mut o) => o.get_mut().merge(&f),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(f);
                }
            };
            if on[1] {
                for (dev, f) in t.acc.below.drain() {
                    by[1].entry(u64::from(dev)).or_default().merge(&f);
                }
            }
            let [total, devs, procs, cgroups] = by;
            for (_, f) in total {
                put(Scope::Total, "all".into(), f);
            }
            for (dev, f) in devs {
                put(Scope::Dev, device_name(src, dev as u32), f);
            }
            for (key, f) in procs {
                let (pid, tid) = ((key >> 32) as u32, key as u32);
                let args = src.args(tid).cloned();
                put(Scope::Proc, process_name(args.as_deref(), pid), f);
            }
            for (key, e) in t.acc.file.drain() {
                let (dev, path_id) = ((key >> 32) as u32, key as u32);
                put(Scope::File, file_name(src, dev, path_id), e);
            }
            for (id, f) in cgroups {
                match src.cgroup(id) {
                    Some(c) => {
                        has_cgroups = true;
                        put(Scope::Cgroup, cgroup_name(c), f)
                    }
                    // A trace of the side without a cgroups table: no cgroup groups.
                    None if id == 0 || !src.has_cgroup_table() => {}
                    None => put(
                        Scope::Cgroup,
                        format!("cgroup:{}", src.recorded_cgroup_id(id)),
                        f,
                    ),
                }
            }
        },
    )?;
    if let Some((trace, d)) = info.damaged.first() {
        if info.nothing_read() || (info.kept == 0 && filter.is_none()) {
            return Err(AnalyzeError::NothingReadable {
                trace: trace.clone(),
                damage: d.to_string(),
            });
        }
        if !allow_damaged {
            return Err(AnalyzeError::Damaged {
                trace: trace.clone(),
                what: iodump_format::Damage::count_in_words(info.damaged.iter().map(|(_, d)| d)),
                damage: d.to_string(),
            });
        }
    }
    Ok(Side {
        name,
        groups,
        events: info.kept,
        duration_s: info.duration_s(),
        lost_events: info.lost_events,
        damaged: info.damaged,
        has_cgroups,
        knows_cgroups: folded.cgroup || !scopes.is_empty() && !scopes.contains(&Scope::Cgroup),
        order,
    })
}

/// A side's inputs, as named.
fn side_name(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// True when an input is a trace with a cgroups table or a dataset whose `cgroups` table has
/// rows (one that cannot be read is left to the pass to report).
fn any_cgroup_table(inputs: &[InputPath]) -> bool {
    inputs.iter().any(|i| match i {
        InputPath::Parquet(dir) => cgroups_table(dir).is_ok_and(|rows| !rows.is_empty()),
        _ => i.open_trace().is_ok_and(|r| r.tables().has_cgroup_table()),
    })
}

/// A device's name in the trace, or `MAJ:MIN`.
fn device_name(src: &Source, dev: u32) -> String {
    src.device(dev).unwrap_or_else(|| {
        let d = DevT(dev);
        format!("{}:{}", d.major(), d.minor())
    })
}

/// A file's name: its latest path (a renamed file's names together, as `--top-files`); a
/// label (`[metadata]`) or an I/O without a path is one group per device.
fn file_name(src: &Source, dev: u32, path_id: u32) -> String {
    match src.path(src.file_key(path_id)) {
        Some(p) if !p.is_empty() => {
            let device = crate::files::is_label(&p).then(|| device_name(src, dev));
            crate::files::named_with_device(p, device.as_deref())
        }
        _ => format!("[none] {}", device_name(src, dev)),
    }
}

/// What a process is called across recordings: its command line (its comm when the trace
/// does not know it) with
/// - a number equal to its pid written `<pid>`;
/// - a temporary name's random part written `*`: what follows `tmp` at the start of a file
///   name when it is 6 or more characters with a digit, an `_` or a capital
///   (`/tmp/tmp.k3Jd92LmQa`, `tmpq8w_1x3e`; not `tmpreaper`), and a run of 6 or more
///   letters and digits after `.`, `-` or `_` that switches between them 3 times or more
///   (`job-a1b2c3d4`, `sock.X7f3k9`; not a counter such as `epoch10`);
/// - a kernel worker (`kworker/u8:2-events_unbound`) written `kworker/*`.
pub fn process_name(args: Option<&str>, pid: u32) -> String {
    let Some(args) = args.filter(|a| !a.is_empty()) else {
        return "[unknown process]".into();
    };
    if args.starts_with("kworker/") {
        return "kworker/*".into();
    }
    let pid_text = pid.to_string();
    let chars: Vec<char> = args.chars().collect();
    let mut out = String::with_capacity(args.len());
    let mut i = 0;
    let word = |c: char| c.is_ascii_alphanumeric();
    while i < chars.len() {
        let c = chars[i];
        // `tmp` starting a file name: the rest of the name is random.
        let starts_name = i == 0 || matches!(chars[i - 1], '/' | ' ' | '=');
        if starts_name && chars[i..].starts_with(&['t', 'm', 'p']) {
            let mut j = i + 3;
            while j < chars.len() && (word(chars[j]) || matches!(chars[j], '_' | '.')) {
                j += 1;
            }
            let random = chars[i + 3..j]
                .iter()
                .any(|c| c.is_ascii_digit() || c.is_ascii_uppercase() || *c == '_');
            if j - (i + 3) >= 6 && random {
                out.push_str("tmp");
                if chars[i + 3] == '.' {
                    out.push('.');
                }
                out.push('*');
                i = j;
                continue;
            }
        }
        if word(c) && (i == 0 || !word(chars[i - 1])) {
            let mut j = i;
            while j < chars.len() && word(chars[j]) {
                j += 1;
            }
            let run: String = chars[i..j].iter().collect();
            let after_sep = i > 0 && matches!(chars[i - 1], '.' | '-' | '_');
            // Letters and digits interleaved, as a random id; `epoch10` is a counter.
            let switches = run
                .as_bytes()
                .windows(2)
                .filter(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit())
                .count();
            if run == pid_text {
                out.push_str("<pid>");
            } else if after_sep && run.len() >= 6 && switches >= 3 {
                out.push('*');
            } else {
                out.push_str(&run);
            }
            i = j;
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

/// What a cgroup is called across recordings: its path with its container id and pod UID
/// (which a new container or pod gets anew) written `*`: `/system.slice/docker-*.scope`,
/// `/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod*.slice/cri-containerd-*.scope`.
pub fn cgroup_name(c: &iodump_format::cgroup::Cgroup) -> String {
    let mut p = c.path.clone();
    if let Some(id) = c.identity.container_id.as_deref().filter(|s| !s.is_empty()) {
        p = p.replace(id, "*");
    }
    if let Some(uid) = c.identity.pod_uid.as_deref().filter(|s| !s.is_empty()) {
        p = p.replace(uid, "*").replace(&uid.replace('-', "_"), "*");
    }
    p
}

/// A figure compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    /// I/Os.
    Ios,
    /// I/Os per second of the recording.
    Iops,
    /// Bytes.
    Bytes,
    /// MB (10^6 bytes) per second of the recording.
    MbPerS,
    /// Share of I/Os that are reads, %.
    ReadPct,
    /// Share of I/Os that are writes, %.
    WritePct,
    /// Data I/Os per size class.
    SizeMix,
    /// Share of data I/Os that are sequential, %.
    SeqPct,
    /// Mean latency, µs.
    MeanLatency,
    /// Latency percentiles, µs.
    P50Latency,
    /// p99.
    P99Latency,
    /// p99.9.
    P999Latency,
    /// Largest latency, µs.
    MaxLatency,
    /// Queue time percentiles, µs.
    P50Queue,
    /// p99.
    P99Queue,
    /// p99.9.
    P999Queue,
    /// Largest queue time, µs.
    MaxQueue,
}

impl Metric {
    /// Every figure, in the order of a group's rows.
    pub const ALL: [Metric; 17] = [
        Metric::Ios,
        Metric::Iops,
        Metric::Bytes,
        Metric::MbPerS,
        Metric::ReadPct,
        Metric::WritePct,
        Metric::SizeMix,
        Metric::SeqPct,
        Metric::MeanLatency,
        Metric::P50Latency,
        Metric::P99Latency,
        Metric::P999Latency,
        Metric::MaxLatency,
        Metric::P50Queue,
        Metric::P99Queue,
        Metric::P999Queue,
        Metric::MaxQueue,
    ];

    /// Its name in the output (units in the name).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ios => "ios",
            Metric::Iops => "iops",
            Metric::Bytes => "bytes",
            Metric::MbPerS => "mb_per_s",
            Metric::ReadPct => "read_pct",
            Metric::WritePct => "write_pct",
            Metric::SizeMix => "size_mix",
            Metric::SeqPct => "sequential_pct",
            Metric::MeanLatency => "mean_latency_us",
            Metric::P50Latency => "p50_latency_us",
            Metric::P99Latency => "p99_latency_us",
            Metric::P999Latency => "p999_latency_us",
            Metric::MaxLatency => "max_latency_us",
            Metric::P50Queue => "p50_queue_us",
            Metric::P99Queue => "p99_queue_us",
            Metric::P999Queue => "p999_queue_us",
            Metric::MaxQueue => "max_queue_us",
        }
    }

    /// The family `--by` selects it with.
    pub fn family(self) -> DiffBy {
        match self {
            Metric::Ios | Metric::Iops => DiffBy::Ios,
            Metric::Bytes | Metric::MbPerS => DiffBy::Bytes,
            Metric::ReadPct | Metric::WritePct | Metric::SizeMix | Metric::SeqPct => DiffBy::Mix,
            _ => DiffBy::Latency,
        }
    }

    /// True for a rate (per second of the recording: undefined when it spans no time).
    pub fn is_rate(self) -> bool {
        matches!(self, Metric::Iops | Metric::MbPerS)
    }

    /// True for a share (its change is in percentage points, not percent of A).
    pub fn is_share(self) -> bool {
        matches!(self.family(), DiffBy::Mix)
    }

    /// The name of its test (README, `iodump diff`).
    pub fn test(self) -> Option<&'static str> {
        Some(match self {
            Metric::Ios | Metric::Iops | Metric::Bytes | Metric::MbPerS => "poisson-rate",
            Metric::ReadPct | Metric::WritePct | Metric::SeqPct => "two-proportion-z",
            Metric::SizeMix => "chi-square",
            Metric::MeanLatency => "mann-whitney",
            Metric::MaxLatency | Metric::MaxQueue => return None,
            _ => "quantile-ci",
        })
    }

    fn quantile(self) -> Option<f64> {
        match self {
            Metric::P50Latency | Metric::P50Queue => Some(0.5),
            Metric::P99Latency | Metric::P99Queue => Some(0.99),
            Metric::P999Latency | Metric::P999Queue => Some(0.999),
            _ => None,
        }
    }

    fn is_queue(self) -> bool {
        matches!(
            self,
            Metric::P50Queue | Metric::P99Queue | Metric::P999Queue | Metric::MaxQueue
        )
    }
}

/// A figure's value on one side.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number.
    Num(f64),
    /// A size mix: the share (%) of data I/Os in each size class.
    Mix(Box<[f64; SIZE_CLASSES]>),
}

impl Value {
    /// As shown: a number with 3 decimals (counts without), a mix as its largest classes.
    pub fn show(&self, integer: bool) -> String {
        match self {
            Value::Num(v) if integer => format!("{v:.0}"),
            Value::Num(v) => format!("{v:.3}"),
            Value::Mix(m) => show_mix(m),
        }
    }
}

/// A mix as its classes of at least 1% (at most 4), largest first: `4K 80% 16K 20%`.
fn show_mix(m: &[f64; SIZE_CLASSES]) -> String {
    let mut v: Vec<(usize, f64)> = m
        .iter()
        .copied()
        .enumerate()
        .filter(|x| x.1 >= 1.0)
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(4);
    v.iter()
        .map(|(i, p)| format!("{} {p:.0}%", SIZE_CLASS_NAMES[*i]))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One compared figure of one group.
#[derive(Clone, Debug)]
pub struct DiffRow {
    /// The group's scope.
    pub scope: Scope,
    /// The group's name.
    pub name: String,
    /// The figure.
    pub metric: Metric,
    /// Its value in A (`None`: the group has none there).
    pub a: Option<Value>,
    /// Its value in B.
    pub b: Option<Value>,
    /// B − A (for a mix: the share of I/Os that changed class, percentage points).
    pub change: Option<f64>,
    /// The change in percent of A (amounts only; `None` when A is 0).
    pub change_pct: Option<f64>,
    /// The test's two-sided p-value (`None`: no test, a side without data, a rate of a side
    /// whose I/O spans no time, or a percentile of a group with too few I/Os for its 95%
    /// interval, [`crate::loghist::min_ios_for_ci`]).
    pub p_value: Option<f64>,
    /// The change is at least [`DiffConfig::min_change_pct`].
    pub big_enough: bool,
    /// Significant: the test rejects "no change" at the false discovery rate
    /// [`DiffConfig::alpha`] over every figure compared (Benjamini–Hochberg) and the change
    /// is big enough. `None` when untested.
    pub significant: Option<bool>,
}

impl DiffRow {
    /// The size of the change, what rows are ordered by: percent of A for amounts,
    /// percentage points for shares; a group present on one side only is infinite (but a
    /// rate missing on one side, whose I/O spans no time, is 0).
    pub fn size(&self) -> f64 {
        match (&self.a, &self.b) {
            // A rate undefined on one side (its I/O spans no time): no change to rank.
            (None, _) | (_, None) if self.metric.is_rate() => 0.0,
            (None, Some(_)) | (Some(_), None) => f64::INFINITY,
            _ if self.metric.is_share() => self.change.map_or(0.0, f64::abs),
            _ => match (self.change_pct, self.change) {
                (Some(p), _) => p.abs(),
                (None, Some(c)) if c != 0.0 => f64::INFINITY,
                _ => 0.0,
            },
        }
    }
}

/// A comparison.
pub struct Diff {
    /// The baseline.
    pub a: Side,
    /// The other.
    pub b: Side,
    /// Every row, ordered: significant first, then by the size of the change.
    pub rows: Vec<DiffRow>,
}

/// The output columns of [`Diff::table`].
pub const COLUMNS: [&str; 10] = [
    "scope",
    "name",
    "metric",
    "a",
    "b",
    "change",
    "change_pct",
    "significant",
    "test",
    "p_value",
];

/// What each of [`COLUMNS`] holds, for the printers: `a` and `b` are an amount or a mix
/// (`4K 100%`).
pub const COLUMN_KINDS: [crate::ColumnKind; 10] = {
    use crate::ColumnKind::{Mixed, Number, Text};
    [
        Text, Text, Text, Mixed, Mixed, Number, Number, Text, Text, Number,
    ]
};

impl Diff {
    /// The first `limit` rows (0: all) of the figures `by` selects, as text cells.
    pub fn table(&self, by: DiffBy, limit: usize) -> (Vec<String>, Vec<Vec<Option<String>>>) {
        let rows = self
            .rows
            .iter()
            .filter(|r| by == DiffBy::Change || r.metric.family() == by)
            .take(if limit == 0 { usize::MAX } else { limit })
            .map(|r| {
                let integer = matches!(r.metric, Metric::Ios | Metric::Bytes);
                vec![
                    Some(r.scope.name().to_string()),
                    Some(r.name.clone()),
                    Some(r.metric.name().to_string()),
                    r.a.as_ref().map(|v| v.show(integer)),
                    r.b.as_ref().map(|v| v.show(integer)),
                    r.change.map(|c| {
                        if integer {
                            format!("{c:.0}")
                        } else {
                            format!("{c:.3}")
                        }
                    }),
                    r.change_pct.map(|c| format!("{c:.3}")),
                    r.significant
                        .map(|s| if s { "yes" } else { "no" }.to_string()),
                    r.metric.test().map(str::to_string),
                    r.p_value.map(show_p),
                ]
            })
            .collect();
        (COLUMNS.iter().map(|s| s.to_string()).collect(), rows)
    }

    /// The sides whose cgroups are not known (no cgroups table) while cgroups were asked
    /// for: none, one or both. With any, no cgroup is compared.
    pub fn cgroups_unknown(&self) -> Vec<&Side> {
        [&self.a, &self.b]
            .into_iter()
            .filter(|s| !s.knows_cgroups)
            .collect()
    }

    /// The sides whose rows do not let sequential I/O be found, and why (see [`RowOrder`]):
    /// `sequential_pct` is not compared when there is any.
    pub fn no_sequential(&self) -> Vec<(&Side, String)> {
        [&self.a, &self.b]
            .into_iter()
            .filter_map(|s| s.order.no_sequential().map(|why| (s, why)))
            .collect()
    }

    /// Rows with a significant change.
    pub fn significant(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.significant == Some(true))
            .count()
    }
}

/// Compares `cfg.a` with `cfg.b`: one pass over each.
pub fn diff(cfg: &DiffConfig, progress: &(dyn Fn(u64) + Sync)) -> Result<Diff, AnalyzeError> {
    // Cgroups alone, and a side without a cgroups table: nothing could be compared, said
    // before any pass rather than as an empty table after both.
    if cfg.scopes == [Scope::Cgroup] {
        for side in [&cfg.a, &cfg.b] {
            if !any_cgroup_table(&InputPath::expand(side)?) {
                return Err(AnalyzeError::NoCgroupsToCompare {
                    side: side_name(side),
                });
            }
        }
    }
    let (fa, fb) = (cfg.side_filter(true), cfg.side_filter(false));
    let a = read_side(
        &cfg.a,
        fa.as_ref(),
        &cfg.scopes,
        cfg.allow_damaged,
        progress,
    )?;
    let b = read_side(
        &cfg.b,
        fb.as_ref(),
        &cfg.scopes,
        cfg.allow_damaged,
        progress,
    )?;
    let rows = compare(&a, &b, cfg);
    Ok(Diff { a, b, rows })
}

/// The rows of every group of either side, ordered.
fn compare(a: &Side, b: &Side, cfg: &DiffConfig) -> Vec<DiffRow> {
    let empty = Figures::default();
    let mut keys: Vec<&(Scope, String)> = a.groups.keys().chain(b.groups.keys()).collect();
    keys.sort();
    keys.dedup();
    // Cgroups only when both sides know theirs: a side without a cgroups table has none.
    let cgroups = a.knows_cgroups && b.knows_cgroups;
    // Sequential I/O only when both sides' rows came in time order.
    let sequential = a.order.no_sequential().is_none() && b.order.no_sequential().is_none();
    let mut rows = Vec::new();
    for key in keys {
        if key.0 == Scope::Cgroup && !cgroups {
            continue;
        }
        let (fa, fb) = (a.groups.get(key), b.groups.get(key));
        for m in Metric::ALL {
            if m == Metric::SeqPct && !sequential {
                continue;
            }
            if m.is_queue()
                && fa.unwrap_or(&empty).queue.count() + fb.unwrap_or(&empty).queue.count() == 0
            {
                continue;
            }
            let row = compare_metric(m, (fa, a.duration_s), (fb, b.duration_s), cfg);
            if let Some(mut row) = row {
                row.scope = key.0;
                row.name.clone_from(&key.1);
                rows.push(row);
            }
        }
    }
    benjamini_hochberg(&mut rows, cfg.alpha);
    rows.sort_by(|x, y| {
        let sig = |r: &DiffRow| r.significant == Some(true);
        sig(y)
            .cmp(&sig(x))
            .then_with(|| y.size().total_cmp(&x.size()))
            .then_with(|| {
                let p = |r: &DiffRow| r.p_value.unwrap_or(2.0);
                p(x).total_cmp(&p(y))
            })
            .then_with(|| (x.scope, &x.name, x.metric).cmp(&(y.scope, &y.name, y.metric)))
    });
    rows
}

/// Decides which rows are significant: the Benjamini–Hochberg procedure over the p-values of
/// all rows (the false discovery rate kept at `alpha` however many figures are compared),
/// and a change big enough.
fn benjamini_hochberg(rows: &mut [DiffRow], alpha: f64) {
    let mut tested: Vec<(f64, usize)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.p_value.map(|p| (p, i)))
        .collect();
    tested.sort_by(|a, b| a.0.total_cmp(&b.0));
    let m = tested.len() as f64;
    // The largest k with p(k) ≤ k/m · α; the k smallest p-values reject.
    let cut = tested
        .iter()
        .enumerate()
        .rev()
        .find(|(k, (p, _))| *p <= (*k as f64 + 1.0) / m * alpha)
        .map_or(0, |(k, _)| k + 1);
    for (k, &(_, i)) in tested.iter().enumerate() {
        rows[i].significant = Some(k < cut && rows[i].big_enough);
    }
}

/// A p-value as shown: 4 decimals, or 2 significant digits below 0.001 (0 when it is below
/// the smallest double).
fn show_p(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p < 1e-3 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

/// The value of `m` in a group, `None` when the group has none (absent, or no I/O of the
/// kind the figure is about, or a rate of a side whose I/O spans no time).
fn value(m: Metric, f: &Figures, dur_s: f64) -> Option<Value> {
    let pct = |x: u64, n: u64| (n > 0).then(|| Value::Num(x as f64 * 100.0 / n as f64));
    let us = |v: Option<u64>| v.map(|v| Value::Num(v as f64 / 1000.0));
    let hist = if m.is_queue() { &f.queue } else { &f.latency };
    match m {
        Metric::Ios => Some(Value::Num(f.ios as f64)),
        // A rate over no time (one I/O, or none) is undefined.
        Metric::Iops => (dur_s > 0.0).then(|| Value::Num(f.ios as f64 / dur_s)),
        Metric::Bytes => Some(Value::Num(f.bytes as f64)),
        Metric::MbPerS => (dur_s > 0.0).then(|| Value::Num(f.bytes as f64 / dur_s / 1e6)),
        Metric::ReadPct => pct(f.reads, f.ios),
        Metric::WritePct => pct(f.writes, f.ios),
        Metric::SeqPct => pct(f.sequential, f.data_ios()),
        Metric::SizeMix => {
            let n = f.data_ios();
            (n > 0).then(|| {
                let mut m = [0.0; SIZE_CLASSES];
                for (s, &c) in m.iter_mut().zip(&f.sizes) {
                    *s = c as f64 * 100.0 / n as f64;
                }
                Value::Mix(Box::new(m))
            })
        }
        Metric::MeanLatency => f.latency.mean().map(|v| Value::Num(v / 1000.0)),
        Metric::MaxLatency | Metric::MaxQueue => {
            (hist.count() > 0).then(|| Value::Num(hist.max() as f64 / 1000.0))
        }
        _ => us(hist.quantile(m.quantile().unwrap_or(0.5))),
    }
}

/// One figure of one group compared; `None` when neither side has a value.
fn compare_metric(
    m: Metric,
    (fa, dur_a): (Option<&Figures>, f64),
    (fb, dur_b): (Option<&Figures>, f64),
    cfg: &DiffConfig,
) -> Option<DiffRow> {
    // An absent group has no I/O: its counts are 0, its other figures none.
    let zero = Figures::default();
    let counts = matches!(
        m,
        Metric::Ios | Metric::Iops | Metric::Bytes | Metric::MbPerS
    );
    let va = fa
        .or(counts.then_some(&zero))
        .and_then(|f| value(m, f, dur_a));
    let vb = fb
        .or(counts.then_some(&zero))
        .and_then(|f| value(m, f, dur_b));
    if va.is_none() && vb.is_none() {
        return None;
    }
    let (change, change_pct) = match (&va, &vb) {
        (Some(Value::Num(x)), Some(Value::Num(y))) => {
            let pct = (!m.is_share() && *x != 0.0).then(|| (y - x) / x * 100.0);
            (Some(y - x), pct)
        }
        (Some(Value::Mix(x)), Some(Value::Mix(y))) => {
            // Total variation distance: the share of I/Os that would have to change class.
            let tvd = x
                .iter()
                .zip(y.iter())
                .map(|(p, q)| (p - q).abs())
                .sum::<f64>()
                / 2.0;
            (Some(tvd), None)
        }
        _ => (None, None),
    };
    let p_value = match (
        fa.or(counts.then_some(&zero)),
        fb.or(counts.then_some(&zero)),
    ) {
        (Some(x), Some(y)) => test(m, (x, dur_a), (y, dur_b)),
        _ => None,
    };
    let big_enough = match (change_pct, change) {
        _ if m.is_share() => change.is_some_and(|c| c.abs() >= cfg.min_change_pct),
        (Some(p), _) => p.abs() >= cfg.min_change_pct,
        // From nothing to something.
        (None, Some(c)) => c != 0.0,
        _ => false,
    };
    Some(DiffRow {
        scope: Scope::Total,
        name: String::new(),
        metric: m,
        a: va,
        b: vb,
        change,
        change_pct,
        p_value,
        big_enough,
        // Decided over all rows (`benjamini_hochberg`).
        significant: None,
    })
}

/// The test of figure `m` (see [`Metric::test`]).
fn test(m: Metric, (a, da): (&Figures, f64), (b, db): (&Figures, f64)) -> Option<f64> {
    let ios = |f: &Figures| f.ios as f64;
    match m {
        Metric::Ios => rate_test((ios(a), ios(a), 1.0), (ios(b), ios(b), 1.0)),
        Metric::Iops => rate_test((ios(a), ios(a), da), (ios(b), ios(b), db)),
        Metric::Bytes => rate_test(
            (a.bytes as f64, a.bytes_sq, 1.0),
            (b.bytes as f64, b.bytes_sq, 1.0),
        ),
        Metric::MbPerS => rate_test(
            (a.bytes as f64, a.bytes_sq, da),
            (b.bytes as f64, b.bytes_sq, db),
        ),
        Metric::ReadPct => proportion_test((a.reads, a.ios), (b.reads, b.ios)),
        Metric::WritePct => proportion_test((a.writes, a.ios), (b.writes, b.ios)),
        Metric::SeqPct => {
            proportion_test((a.sequential, a.data_ios()), (b.sequential, b.data_ios()))
        }
        Metric::SizeMix => chi_square_test(&a.sizes, &b.sizes),
        Metric::MeanLatency => mann_whitney(&a.latency, &b.latency),
        Metric::MaxLatency | Metric::MaxQueue => None,
        _ => {
            let h = |f: &Figures| {
                if m.is_queue() {
                    f.queue.clone()
                } else {
                    f.latency.clone()
                }
            };
            quantile_test(&h(a), &h(b), m.quantile().unwrap_or(0.5))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_are_matched_without_pids_and_temporary_names() {
        let n = |a: &str, pid| process_name(Some(a), pid);
        assert_eq!(n("fio --name=job --bs=4k", 10), "fio --name=job --bs=4k");
        assert_eq!(n("postgres: checkpointer", 4242), "postgres: checkpointer");
        assert_eq!(
            n("app --pidfile=/run/app.4242.pid --port 4242", 4242),
            "app --pidfile=/run/app.<pid>.pid --port <pid>"
        );
        assert_eq!(n("app --port 4243", 4242), "app --port 4243");
        assert_eq!(
            n("sort -T /tmp/tmp.k3Jd92LmQa big.txt", 1),
            "sort -T /tmp/tmp.* big.txt"
        );
        assert_eq!(
            n("python3 /tmp/tmpq8w_1x3e/run.py", 1),
            "python3 /tmp/tmp*/run.py"
        );
        assert_eq!(
            n("worker --sock=/run/w-a1b2c3d4.sock", 1),
            "worker --sock=/run/w-*.sock"
        );
        // Not random: no digit, or too short, or not after a separator; a word that begins
        // with `tmp`; a name with a counter.
        assert_eq!(
            n("/usr/sbin/tmpreaper 7d /tmp", 1),
            "/usr/sbin/tmpreaper 7d /tmp"
        );
        assert_eq!(
            n("/usr/sbin/tmpwatcher 7d /tmp", 1),
            "/usr/sbin/tmpwatcher 7d /tmp"
        );
        assert_eq!(
            n("train --ckpt model_epoch10.ckpt", 1),
            "train --ckpt model_epoch10.ckpt"
        );
        assert_eq!(n("w --sock=/run/sock.X7f3k9", 1), "w --sock=/run/sock.*");
        assert_eq!(
            n("java -Xmx4g -jar app-server.jar", 1),
            "java -Xmx4g -jar app-server.jar"
        );
        assert_eq!(n("dd of=/dev/nvme0n1p2", 1), "dd of=/dev/nvme0n1p2");
        assert_eq!(n("kworker/u8:2-events_unbound", 77), "kworker/*");
        assert_eq!(process_name(None, 5), "[unknown process]");
    }

    #[test]
    fn cgroups_are_matched_without_container_ids_and_pod_uids() {
        use iodump_format::cgroup::{Cgroup, Identity};
        let c = |path: &str, container: Option<&str>, pod: Option<&str>| Cgroup {
            id: 1,
            path: path.into(),
            identity: Identity {
                container_id: container.map(str::to_string),
                pod_uid: pod.map(str::to_string),
                ..Identity::default()
            },
        };
        let id = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            cgroup_name(&c(
                &format!("/system.slice/docker-{id}.scope"),
                Some(id),
                None
            )),
            "/system.slice/docker-*.scope"
        );
        let uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id}.scope",
            uid.replace('-', "_")
        );
        assert_eq!(
            cgroup_name(&c(&path, Some(id), Some(uid))),
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod*.slice/cri-containerd-*.scope"
        );
        assert_eq!(
            cgroup_name(&c("/system.slice/nginx.service", None, None)),
            "/system.slice/nginx.service"
        );
    }

    #[test]
    fn benjamini_hochberg_keeps_the_false_discovery_rate() {
        let row = |p: f64, big_enough: bool| DiffRow {
            scope: Scope::File,
            name: String::new(),
            metric: Metric::Ios,
            a: None,
            b: None,
            change: None,
            change_pct: None,
            p_value: Some(p),
            big_enough,
            significant: None,
        };
        // m = 5, α = 0.05: the k-th smallest p passes at k · 0.01. The largest, 0.05, passes
        // at rank 5, so all five are discoveries (0.045 would fail its own 0.04 alone); the
        // one too small a change is not significant.
        let mut rows = vec![
            row(0.045, true),
            row(0.001, true),
            row(0.05, true),
            row(0.015, false),
            row(0.025, true),
        ];
        benjamini_hochberg(&mut rows, 0.05);
        let sig: Vec<Option<bool>> = rows.iter().map(|r| r.significant).collect();
        assert_eq!(
            sig,
            [Some(true), Some(true), Some(true), Some(false), Some(true)]
        );
        let mut rows = vec![
            row(0.2, true),
            row(0.009, true),
            row(0.5, true),
            row(0.03, true),
        ];
        benjamini_hochberg(&mut rows, 0.05);
        let sig: Vec<Option<bool>> = rows.iter().map(|r| r.significant).collect();
        assert_eq!(sig, [Some(false), Some(true), Some(false), Some(false)]);
    }

    #[test]
    fn size_classes() {
        let c: Vec<usize> = [512, 2048, 2049, 4096, 4097, 16384, 1 << 20, (1 << 20) + 1]
            .into_iter()
            .map(size_class)
            .collect();
        assert_eq!(c, [0, 0, 1, 1, 2, 3, 9, 10]);
        assert_eq!(SIZE_CLASS_NAMES[size_class(65536)], "64K");
    }

    /// `n` reads of 4 KiB, latencies `lat_ns`, `lat_ns` + 1…
    fn reads(n: u64, lat_ns: u64) -> Figures {
        let mut f = Figures::default();
        for i in 0..n {
            f.ios += 1;
            f.bytes += 4096;
            f.bytes_sq += 4096.0 * 4096.0;
            f.reads += 1;
            f.sizes[1] += 1;
            f.latency.add(lat_ns + i);
        }
        f
    }

    #[test]
    fn a_rate_over_no_time_is_missing_and_untested() {
        // A side of one I/O spans no time: its IOPS and MB/s are undefined, not 10^9.
        let (one, many) = (reads(1, 50_000), reads(1000, 10_000));
        let cfg = DiffConfig::new(Vec::new(), Vec::new());
        for m in [Metric::Iops, Metric::MbPerS] {
            for (a, b) in [((&one, 0.0), (&many, 10.0)), ((&many, 10.0), (&one, 0.0))] {
                let mut rows =
                    vec![compare_metric(m, (Some(a.0), a.1), (Some(b.0), b.1), &cfg).unwrap()];
                let r = &rows[0];
                let undefined = if a.1 == 0.0 { &r.a } else { &r.b };
                assert_eq!(undefined, &None, "{m:?}");
                assert!(r.a.is_some() || r.b.is_some(), "{m:?}");
                assert_eq!((r.change, r.change_pct, r.p_value), (None, None, None));
                assert!(!r.big_enough && r.size().is_finite());
                benjamini_hochberg(&mut rows, 0.01);
                assert_eq!(rows[0].significant, None, "{m:?}");
            }
            // No time on either side: no row at all.
            assert!(compare_metric(m, (Some(&one), 0.0), (Some(&one), 0.0), &cfg).is_none());
        }
        // The counts are still compared.
        let r = compare_metric(Metric::Ios, (Some(&one), 0.0), (Some(&many), 10.0), &cfg).unwrap();
        assert!(r.p_value.is_some());
    }

    #[test]
    fn a_percentile_of_too_few_ios_is_untested() {
        let cfg = DiffConfig::new(Vec::new(), Vec::new());
        // One I/O ten times slower, and 7 against 7: untested; 8 against 8: a change.
        for (n, tested) in [(1, false), (7, false), (8, true)] {
            let (a, b) = (reads(n, 10_000), reads(n, 100_000));
            let mut rows =
                vec![
                    compare_metric(Metric::P50Latency, (Some(&a), 10.0), (Some(&b), 10.0), &cfg)
                        .unwrap(),
                ];
            assert!(rows[0].big_enough);
            benjamini_hochberg(&mut rows, 0.01);
            let want = if tested { Some(true) } else { None };
            assert_eq!(rows[0].significant, want, "n {n}: {:?}", rows[0]);
            assert_eq!(rows[0].p_value.is_some(), tested, "n {n}");
        }
    }

    #[test]
    fn a_group_of_one_side_is_a_change_of_infinite_size() {
        let f = reads(1000, 10_000);
        let cfg = DiffConfig::new(Vec::new(), Vec::new());
        let row = compare_metric(Metric::Ios, (None, 10.0), (Some(&f), 10.0), &cfg).unwrap();
        assert!(row.p_value.unwrap() < 1e-6 && row.big_enough);
        assert_eq!(row.size(), f64::INFINITY);
        let row = compare_metric(Metric::P99Latency, (None, 10.0), (Some(&f), 10.0), &cfg).unwrap();
        assert_eq!(row.significant, None);
        let same =
            compare_metric(Metric::SizeMix, (Some(&f), 10.0), (Some(&f), 10.0), &cfg).unwrap();
        assert_eq!((same.change, same.p_value), (Some(0.0), Some(1.0)));
        assert!(!same.big_enough);
        assert_eq!(same.a.unwrap().show(false), "4K 100%");
    }
}
