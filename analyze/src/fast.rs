//! Queries answered straight from `.iod` traces in one parallel pass over the segments,
//! without building the polars `io` table: the same results as [`crate::query`] (same
//! columns, types and order) at a fraction of the time and memory. Used by `iodump analyze`
//! when every input is a trace.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;

use iodump_format::expr::Expr;
use iodump_format::text::text_string;
use iodump_format::{Damage, EventBatch, Op, Reader};
use polars::prelude::*;

use crate::query::{LatencyBy, RankBy};
use crate::AnalyzeError;

/// A multiply-rotate hasher for the small integer keys of the per-event maps (path ids,
/// thread ids): SipHash's DoS resistance buys nothing here and costs most of the pass.
#[derive(Default)]
struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// One file's counters within a trace.
#[derive(Default)]
struct FileAcc {
    ios: u64,
    bytes: u64,
    read_bytes: u64,
    write_bytes: u64,
    latency_sum_ns: u128,
    latencies_ns: Vec<u64>,
    /// I/Os per submitting thread.
    by_tid: IntMap<u32, u64>,
}

impl FileAcc {
    fn merge(&mut self, o: FileAcc) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.latency_sum_ns += o.latency_sum_ns;
        if self.latencies_ns.is_empty() {
            self.latencies_ns = o.latencies_ns;
        } else {
            self.latencies_ns.extend_from_slice(&o.latencies_ns);
        }
        for (t, n) in o.by_tid {
            *self.by_tid.entry(t).or_default() += n;
        }
    }
}

/// The files of one segment: path id → counters.
fn segment_files(b: &EventBatch, keep: &[u32]) -> IntMap<u32, FileAcc> {
    let mut files: IntMap<u32, FileAcc> = IntMap::default();
    let (read, write) = (Op::Read.code(), Op::Write.code());
    for &k in keep {
        let i = k as usize;
        let f = files.entry(b.path_id[i]).or_default();
        let bytes = u64::from(b.bytes[i]);
        f.ios += 1;
        f.bytes += bytes;
        if b.op[i] == read {
            f.read_bytes += bytes;
        } else if b.op[i] == write {
            f.write_bytes += bytes;
        }
        f.latency_sum_ns += u128::from(b.latency_ns[i]);
        f.latencies_ns.push(b.latency_ns[i]);
        *f.by_tid.entry(b.tid[i]).or_default() += 1;
    }
    files
}

/// The `q`-quantile of `v` with linear interpolation between the closest ranks (polars'
/// `QuantileMethod::Linear`); reorders `v` (selection, not a full sort).
fn quantile_linear(v: &mut [u64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let float_idx = (v.len() - 1) as f64 * q;
    let lo = float_idx.floor() as usize;
    let hi = (float_idx.ceil() as usize).min(v.len() - 1);
    let (_, &mut a, rest) = v.select_nth_unstable(lo);
    let a = a as f64;
    if lo == hi {
        return Some(a);
    }
    // The next order statistic is the smallest of what lies above `lo`.
    let b = rest.iter().copied().min().map_or(a, |b| b as f64);
    let frac = float_idx - lo as f64;
    Some(a + (b - a) * frac)
}

/// One output row before sorting.
struct Row {
    trace: usize,
    path_id: u32,
    path: Option<String>,
    ios: u64,
    bytes: u64,
    read_bytes: u64,
    write_bytes: u64,
    mean_latency_us: Option<f64>,
    p99_latency_us: Option<f64>,
    main_process: Option<String>,
}

/// What a fast query read.
pub struct FastRead {
    /// The answer, as [`crate::query`] would give it.
    pub frame: DataFrame,
    /// I/Os that passed the filter.
    pub events: u64,
    /// Damaged chunks skipped, by trace.
    pub damaged: Vec<(String, Damage)>,
}

/// What the driver hands over for each trace, once its segments are aggregated.
struct TraceDone<'a, A> {
    /// Index of the trace among the inputs.
    index: usize,
    /// The trace.
    reader: &'a Reader,
    /// The per-segment aggregates of its intact segments.
    parts: Vec<A>,
    /// Latest command name of each thread (the `processes` table's comm).
    comm_of: HashMap<u32, String>,
}

/// What every pass collects besides its own aggregates.
#[derive(Default)]
struct PassInfo {
    names: Vec<String>,
    damaged: Vec<(String, Damage)>,
    ts_range: Option<(i64, i64)>,
}

impl PassInfo {
    fn duration_s(&self) -> f64 {
        match self.ts_range {
            Some((a, b)) => ((b - a) as f64 / 1e9).max(1e-9),
            None => 0.0,
        }
    }
}

/// One parallel pass over the segments of every trace: `seg` aggregates one segment (the
/// filter already applied: it gets the indices of the kept rows and their UTC time range),
/// `done` receives each trace's aggregates.
fn pass<A: Send>(
    paths: &[&Path],
    filter: Option<&Expr>,
    progress: &(dyn Fn(u64) + Sync),
    seg: impl Fn(&EventBatch, &[u32]) -> A + Sync,
    mut done: impl FnMut(TraceDone<'_, A>),
) -> Result<PassInfo, AnalyzeError> {
    let mut info = PassInfo::default();
    for (ti, p) in paths.iter().enumerate() {
        let r = Reader::open(p).map_err(AnalyzeError::Read)?;
        let trace = p.file_name().map_or_else(
            || p.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        info.names.push(trace.clone());
        let devs: HashMap<u32, String> = r.tables().device_names();
        let h = r.header();
        let results = r.par_map_segments(|i, b| {
            let keep: Vec<u32> = (0..b.len() as u32)
                .filter(|&k| filter.is_none_or(|f| f.eval_in(&r, i, &b.get(k as usize), &devs)))
                .collect();
            let range = keep.iter().fold(None, |acc: Option<(i64, i64)>, &k| {
                let ts = h.to_utc_ns(b.timestamp_ns[k as usize]);
                Some(acc.map_or((ts, ts), |(a, z)| (a.min(ts), z.max(ts))))
            });
            progress(b.len() as u64);
            (seg(b, &keep), range)
        });
        let mut parts = Vec::with_capacity(results.len());
        for (_, res) in results {
            match res {
                Ok((a, range)) => {
                    if let Some((x, y)) = range {
                        info.ts_range = Some(match info.ts_range {
                            Some((p, q)) => (p.min(x), q.max(y)),
                            None => (x, y),
                        });
                    }
                    parts.push(a);
                }
                Err(d) => info.damaged.push((trace.clone(), d)),
            }
        }
        info.damaged
            .extend(r.damage().iter().cloned().map(|d| (trace.clone(), d)));
        let comm_of = r
            .tables()
            .processes()
            .map(|pr| (pr.tid, text_string(&pr.comm)))
            .collect();
        done(TraceDone {
            index: ti,
            reader: &r,
            parts,
            comm_of,
        });
    }
    Ok(info)
}

/// `--top-files` over `.iod` traces: the columns and order of [`crate::query::top_files`].
pub fn top_files(
    paths: &[&Path],
    filter: Option<&Expr>,
    by: RankBy,
    limit: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<FastRead, AnalyzeError> {
    let mut rows: Vec<Row> = Vec::new();
    let mut events = 0u64;
    let info = pass(paths, filter, progress, segment_files, |t| {
        let mut files: IntMap<u32, FileAcc> = IntMap::default();
        for part in t.parts {
            for (pid, f) in part {
                files.entry(pid).or_default().merge(f);
            }
        }
        for (path_id, mut f) in files {
            events += f.ios;
            let mut by_comm: HashMap<Option<&str>, u64> = HashMap::new();
            for (tid, n) in &f.by_tid {
                *by_comm
                    .entry(t.comm_of.get(tid).map(String::as_str))
                    .or_default() += n;
            }
            // Most I/Os; ties: the name that sorts first (no name before any name).
            let main_process = by_comm
                .into_iter()
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                .and_then(|(c, _)| c.map(str::to_string));
            rows.push(Row {
                trace: t.index,
                path_id,
                path: t
                    .reader
                    .tables()
                    .path(path_id)
                    .map(|pe| text_string(&pe.path)),
                ios: f.ios,
                bytes: f.bytes,
                read_bytes: f.read_bytes,
                write_bytes: f.write_bytes,
                mean_latency_us: (f.ios > 0)
                    .then(|| f.latency_sum_ns as f64 / f.ios as f64 / 1000.0),
                p99_latency_us: quantile_linear(&mut f.latencies_ns, 0.99).map(|v| v / 1000.0),
                main_process,
            });
        }
    })?;
    let dur_s = info.duration_s();
    let names = &info.names;
    let key = |r: &Row| -> f64 {
        match by {
            RankBy::Ios => r.ios as f64,
            RankBy::Bytes => r.bytes as f64,
            RankBy::Latency => r.p99_latency_us.unwrap_or(f64::NEG_INFINITY),
        }
    };
    // Descending by the rank, then path ascending (no path first), then trace name and path
    // id (as `query::top_files` does).
    rows.sort_by(|a, b| {
        key(b)
            .total_cmp(&key(a))
            .then_with(|| a.path.cmp(&b.path))
            .then_with(|| names[a.trace].cmp(&names[b.trace]))
            .then_with(|| a.path_id.cmp(&b.path_id))
    });
    rows.truncate(limit);
    let n = rows.len();
    let perr = |e: PolarsError| AnalyzeError::Query {
        message: e.to_string(),
    };
    let frame = DataFrame::new(
        n,
        vec![
            Column::new(
                "path".into(),
                rows.iter().map(|r| r.path.clone()).collect::<Vec<_>>(),
            ),
            Column::new(
                "ios".into(),
                rows.iter().map(|r| r.ios as IdxSize).collect::<Vec<_>>(),
            ),
            Column::new(
                "iops".into(),
                rows.iter()
                    .map(|r| r.ios as f64 / dur_s)
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "read_bytes".into(),
                rows.iter().map(|r| r.read_bytes).collect::<Vec<_>>(),
            ),
            Column::new(
                "write_bytes".into(),
                rows.iter().map(|r| r.write_bytes).collect::<Vec<_>>(),
            ),
            Column::new(
                "mean_latency_us".into(),
                rows.iter().map(|r| r.mean_latency_us).collect::<Vec<_>>(),
            ),
            Column::new(
                "p99_latency_us".into(),
                rows.iter().map(|r| r.p99_latency_us).collect::<Vec<_>>(),
            ),
            Column::new(
                "main_process".into(),
                rows.iter()
                    .map(|r| r.main_process.clone())
                    .collect::<Vec<_>>(),
            ),
        ],
    )
    .map_err(perr)?;
    Ok(FastRead {
        frame,
        events,
        damaged: info.damaged,
    })
}

/// One thread's counters: I/Os, bytes read, bytes written, all bytes.
#[derive(Default, Clone, Copy)]
struct ProcAcc {
    ios: u64,
    read_bytes: u64,
    write_bytes: u64,
    bytes: u64,
}

/// The threads of one segment: (pid, tid) → counters.
fn segment_threads(b: &EventBatch, keep: &[u32]) -> IntMap<(u32, u32), ProcAcc> {
    let mut m: IntMap<(u32, u32), ProcAcc> = IntMap::default();
    let (read, write) = (Op::Read.code(), Op::Write.code());
    for &k in keep {
        let i = k as usize;
        let a = m.entry((b.pid[i], b.tid[i])).or_default();
        let bytes = u64::from(b.bytes[i]);
        a.ios += 1;
        a.bytes += bytes;
        if b.op[i] == read {
            a.read_bytes += bytes;
        } else if b.op[i] == write {
            a.write_bytes += bytes;
        }
    }
    m
}

/// `--top-procs` over `.iod` traces: the columns and order of [`crate::query::top_procs`].
pub fn top_procs(
    paths: &[&Path],
    filter: Option<&Expr>,
    limit: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<FastRead, AnalyzeError> {
    // (pid, comm) over every trace, the comm being the thread's latest name.
    let mut procs: HashMap<(u32, Option<String>), ProcAcc> = HashMap::new();
    let info = pass(paths, filter, progress, segment_threads, |t| {
        for part in t.parts {
            for ((pid, tid), a) in part {
                let e = procs
                    .entry((pid, t.comm_of.get(&tid).cloned()))
                    .or_default();
                e.ios += a.ios;
                e.read_bytes += a.read_bytes;
                e.write_bytes += a.write_bytes;
                e.bytes += a.bytes;
            }
        }
    })?;
    let dur_s = info.duration_s();
    let events = procs.values().map(|a| a.ios).sum();
    let mut rows: Vec<((u32, Option<String>), ProcAcc)> = procs.into_iter().collect();
    // Most I/Os first, then pid, then name (no name first), as `query::top_procs`.
    rows.sort_by(|(ka, a), (kb, b)| b.ios.cmp(&a.ios).then_with(|| ka.cmp(kb)));
    rows.truncate(limit);
    let n = rows.len();
    let col_u64 = |f: fn(&ProcAcc) -> u64| rows.iter().map(|(_, a)| f(a)).collect::<Vec<u64>>();
    let frame = DataFrame::new(
        n,
        vec![
            Column::new(
                "pid".into(),
                rows.iter().map(|(k, _)| k.0).collect::<Vec<_>>(),
            ),
            Column::new(
                "comm".into(),
                rows.iter().map(|(k, _)| k.1.clone()).collect::<Vec<_>>(),
            ),
            Column::new(
                "ios".into(),
                rows.iter()
                    .map(|(_, a)| a.ios as IdxSize)
                    .collect::<Vec<_>>(),
            ),
            Column::new(
                "iops".into(),
                rows.iter()
                    .map(|(_, a)| a.ios as f64 / dur_s)
                    .collect::<Vec<_>>(),
            ),
            Column::new("read_bytes".into(), col_u64(|a| a.read_bytes)),
            Column::new("write_bytes".into(), col_u64(|a| a.write_bytes)),
            Column::new(
                "mb_per_s".into(),
                rows.iter()
                    .map(|(_, a)| a.bytes as f64 / (dur_s * 1e6))
                    .collect::<Vec<_>>(),
            ),
        ],
    )
    .map_err(|e| AnalyzeError::Query {
        message: e.to_string(),
    })?;
    Ok(FastRead {
        frame,
        events,
        damaged: info.damaged,
    })
}

/// One latency group's samples.
#[derive(Default)]
struct LatAcc {
    latency_ns: Vec<u64>,
    device_ns: Vec<u64>,
    queue_sum_ns: u128,
    queue_n: u64,
    device_sum_ns: u128,
}

impl LatAcc {
    fn merge(&mut self, o: LatAcc) {
        self.latency_ns.extend_from_slice(&o.latency_ns);
        self.device_ns.extend_from_slice(&o.device_ns);
        self.queue_sum_ns += o.queue_sum_ns;
        self.queue_n += o.queue_n;
        self.device_sum_ns += o.device_sum_ns;
    }
}

/// The latency groups of one segment, keyed by what `by` groups on (device number, op code,
/// thread id or path id; 0 for everything).
fn segment_latency(b: &EventBatch, keep: &[u32], by: LatencyBy) -> IntMap<u32, LatAcc> {
    let mut m: IntMap<u32, LatAcc> = IntMap::default();
    for &k in keep {
        let i = k as usize;
        let key = match by {
            LatencyBy::All => 0,
            LatencyBy::Dev => b.dev[i],
            LatencyBy::Op => u32::from(b.op[i]),
            LatencyBy::Proc => b.tid[i],
            LatencyBy::File => b.path_id[i],
        };
        let a = m.entry(key).or_default();
        let dev = b.device_ns(i);
        a.latency_ns.push(b.latency_ns[i]);
        a.device_ns.push(dev);
        a.device_sum_ns += u128::from(dev);
        if let Some(q) = b.queue_ns.get(i) {
            a.queue_sum_ns += u128::from(q);
            a.queue_n += 1;
        }
    }
    m
}

/// `--latency` over `.iod` traces: the columns and order of [`crate::query::latency`].
pub fn latency(
    paths: &[&Path],
    filter: Option<&Expr>,
    by: LatencyBy,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<FastRead, AnalyzeError> {
    let mut groups: HashMap<Option<String>, LatAcc> = HashMap::new();
    let info = pass(
        paths,
        filter,
        progress,
        |b, keep| segment_latency(b, keep, by),
        |t| {
            let tables = t.reader.tables();
            for part in t.parts {
                for (key, a) in part {
                    let name = match by {
                        LatencyBy::All => Some("all".to_string()),
                        LatencyBy::Dev => tables
                            .device(iodump_format::DevT(key))
                            .map(|d| d.name.clone()),
                        LatencyBy::Op => Some(Op::from_code(key as u8).name().to_string()),
                        LatencyBy::Proc => t.comm_of.get(&key).cloned(),
                        LatencyBy::File => tables.path(key).map(|p| text_string(&p.path)),
                    };
                    groups.entry(name).or_default().merge(a);
                }
            }
        },
    )?;
    let mut rows: Vec<(Option<String>, LatAcc)> = groups.into_iter().collect();
    // Most I/Os first, then the group's name (no name first), as `query::latency`.
    rows.sort_by(|a, b| {
        b.1.latency_ns
            .len()
            .cmp(&a.1.latency_ns.len())
            .then_with(|| a.0.cmp(&b.0))
    });
    let events = rows.iter().map(|r| r.1.latency_ns.len() as u64).sum();
    let key_name = by.column_name();
    let mut cols: Vec<Vec<Option<f64>>> = (0..8).map(|_| Vec::with_capacity(rows.len())).collect();
    let mut ios = Vec::with_capacity(rows.len());
    for (_, a) in rows.iter_mut() {
        let n = a.latency_ns.len();
        ios.push(n as IdxSize);
        let us = |v: Option<f64>| v.map(|x| x / 1000.0);
        for (c, q) in [0.5, 0.9, 0.99, 0.999].into_iter().enumerate() {
            cols[c].push(us(quantile_linear(&mut a.latency_ns, q)));
        }
        cols[4].push(us(a.latency_ns.iter().max().map(|&m| m as f64)));
        cols[5].push(us(
            (a.queue_n > 0).then(|| a.queue_sum_ns as f64 / a.queue_n as f64)
        ));
        cols[6].push(us((n > 0).then(|| a.device_sum_ns as f64 / n as f64)));
        cols[7].push(us(quantile_linear(&mut a.device_ns, 0.99)));
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
        Column::new(
            key_name.into(),
            rows.iter().map(|r| r.0.clone()).collect::<Vec<_>>(),
        ),
        Column::new("ios".into(), ios),
    ];
    for (name, c) in names.iter().zip(cols) {
        columns.push(Column::new((*name).into(), c));
    }
    let frame = DataFrame::new(rows.len(), columns).map_err(|e| AnalyzeError::Query {
        message: e.to_string(),
    })?;
    Ok(FastRead {
        frame,
        events,
        damaged: info.damaged,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_quantile_equals_the_sorted_one() {
        let mut x: u64 = 12345;
        for n in [1usize, 2, 3, 10, 99, 100, 101, 1000, 4097] {
            let v: Vec<u64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % 5000
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort_unstable();
            for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let pos = (n - 1) as f64 * q;
                let (lo, hi) = (pos.floor() as usize, (pos.ceil() as usize).min(n - 1));
                let (a, b) = (sorted[lo] as f64, sorted[hi] as f64);
                let want = if lo == hi {
                    a
                } else {
                    a + (b - a) * (pos - lo as f64)
                };
                let mut w = v.clone();
                assert_eq!(quantile_linear(&mut w, q), Some(want), "n {n} q {q}");
            }
        }
        assert_eq!(quantile_linear(&mut [], 0.5), None);
    }
}
