//! `iodump analyze` on polars: traces (decoded in parallel with rayon) or Parquet datasets
//! become a polars `io` table plus small `processes` and `files` tables; queries are lazy
//! polars plans over them. Used for `--sql` and `--engine polars` (every other query is
//! answered by [`crate::onepass`], on traces and datasets alike, with the same rows). Each query
//! returns a [`DataFrame`] that the binary prints as aligned text, CSV or JSON.

use std::collections::HashMap;
use std::path::Path;

use iodump_format::expr::Expr;
use iodump_format::{Damage, DevT, EventBatch, Op, Reader};
use polars::prelude::*;

use crate::files::FileIdentities;
use crate::input::InputPath;
use crate::layout::IntColumn;
use crate::parquet_input::{
    self, arrow_col, parquet_files, parquet_filter_mask, parquet_lost_events, read_batches,
};
use crate::AnalyzeError;

/// The frame type queries return.
pub use polars::prelude::DataFrame;

fn perr(e: PolarsError) -> AnalyzeError {
    AnalyzeError::Polars { source: e }
}

/// A loaded dataset.
pub struct Dataset {
    /// One row per I/O: trace, ts_ns (UTC ns), dev_t, op, bytes, sector, end_sector, pid,
    /// tid, path_id, queue_ns, device_ns, latency_ns, error, upper_dev (for an I/O a stacked
    /// device sent down: that device's name; null otherwise), dev.
    pub io: DataFrame,
    /// trace, tid, ppid (the process id) → comm, args (the process's command line, the comm
    /// when the trace does not know it).
    pub processes: DataFrame,
    /// trace, path_id → path (the name at the time of the I/O), and the file it names:
    /// file_id (the path id of the file's latest name, the same for all its names),
    /// latest_path, names (distinct names it had), renamed_from (its earliest other name),
    /// fs_dev (the name of the device of the file system holding it).
    pub files: DataFrame,
    /// Lost events (sum of loss records).
    pub lost_events: u64,
    /// Damaged chunks skipped.
    pub damaged: Vec<(String, Damage)>,
    /// Rows of the segments decoded intact, before the filter.
    pub decoded: u64,
    /// True when a segment decoded was damaged.
    pub unreadable: bool,
    /// (trace, device name) of the stacked devices of the device tables (LVM, dm-crypt, md,
    /// an NVMe multipath head: entries stacked on others).
    pub stacked: Vec<(String, String)>,
}

/// Columns of one segment (after the filter), ready to become a DataFrame.
#[derive(Default)]
struct Cols {
    ts: Vec<i64>,
    dev: Vec<u32>,
    op: Vec<u8>,
    bytes: Vec<u32>,
    sector: Vec<u64>,
    end_sector: Vec<u64>,
    pid: Vec<u32>,
    tid: Vec<u32>,
    path_id: Vec<u32>,
    queue: Vec<Option<u64>>,
    device: Vec<u64>,
    latency: Vec<u64>,
    error: Vec<u16>,
    upper_dev: Vec<Option<String>>,
}

fn segment_cols(
    r: &Reader,
    seg: usize,
    b: &EventBatch,
    filter: Option<&Expr>,
    devs: &HashMap<u32, String>,
) -> Cols {
    let mut c = Cols::default();
    let h = r.header();
    for i in 0..b.len() {
        if let Some(f) = filter {
            if !f.eval_in(r, seg, &b.get(i), devs) {
                continue;
            }
        }
        c.ts.push(h.to_utc_ns(b.timestamp_ns[i]));
        c.dev.push(b.dev[i]);
        c.op.push(b.op[i]);
        c.bytes.push(b.bytes[i]);
        c.sector.push(b.sector[i]);
        c.end_sector
            .push(b.sector[i].wrapping_add((b.bytes[i] as u64).div_ceil(512)));
        c.pid.push(b.pid[i]);
        c.tid.push(b.tid[i]);
        c.path_id.push(b.path_id[i]);
        c.queue.push(b.queue_ns.get(i));
        c.device.push(b.device_ns(i));
        c.latency.push(b.latency_ns[i]);
        c.error.push(b.error[i]);
        c.upper_dev.push(
            b.upper_dev
                .get(i)
                .map(|u| devs.get(&u).cloned().unwrap_or_else(|| "?".into())),
        );
    }
    c
}

fn frame(trace: &str, c: Cols) -> PolarsResult<DataFrame> {
    let n = c.ts.len();
    let ops: Vec<&str> = c.op.iter().map(|&o| Op::from_code(o).name()).collect();
    DataFrame::new(
        n,
        vec![
            Column::new("trace".into(), vec![trace; n]),
            Column::new("ts_ns".into(), c.ts),
            Column::new("dev_t".into(), c.dev),
            Column::new("op".into(), ops),
            // 64 bits, as the Parquet table's: a `sum(bytes)` of UInt32 wraps at 4 GiB.
            Column::new("bytes".into(), c.bytes).cast(&DataType::UInt64)?,
            Column::new("sector".into(), c.sector),
            Column::new("end_sector".into(), c.end_sector),
            Column::new("pid".into(), c.pid),
            Column::new("tid".into(), c.tid),
            Column::new("path_id".into(), c.path_id),
            Column::new("queue_ns".into(), c.queue),
            Column::new("device_ns".into(), c.device),
            Column::new("latency_ns".into(), c.latency),
            Column::new(
                "error".into(),
                c.error.into_iter().map(u32::from).collect::<Vec<u32>>(),
            ),
            Column::new("upper_dev".into(), c.upper_dev),
        ],
    )
}

impl Dataset {
    /// Loads `.iod` traces, keeping the events `filter` accepts.
    pub fn load(paths: &[InputPath], filter: Option<&Expr>) -> Result<Dataset, AnalyzeError> {
        Dataset::load_with_progress(paths, filter, &|_| {})
    }

    /// As [`Dataset::load`], calling `progress(events)` after each decoded segment (from
    /// several threads).
    pub fn load_with_progress(
        paths: &[InputPath],
        filter: Option<&Expr>,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<Dataset, AnalyzeError> {
        let mut frames = Vec::new();
        let mut tables = TablesCols::default();
        let (mut lost, mut damaged, mut stacked) = (0, Vec::new(), Vec::new());
        let (mut decoded, mut unreadable) = (0u64, false);
        for p in paths {
            let r = p.open_trace()?;
            let trace = p.name();
            let devs: HashMap<u32, String> = r.tables().device_names();
            // Segments a window of time leaves out are not decoded.
            let keep = |i| filter.is_none_or(|f| !f.leaves_out_segment(&r, i));
            let parts = r.par_map_segments_where(keep, |i, b| {
                let c = segment_cols(&r, i, b, filter, &devs);
                progress(b.len() as u64);
                (c, b.len() as u64)
            });
            for (_, part) in parts {
                match part {
                    Ok((c, rows)) => {
                        decoded += rows;
                        frames.push(frame(&trace, c).map_err(perr)?.lazy())
                    }
                    Err(d) => {
                        unreadable = true;
                        damaged.push((trace.clone(), d))
                    }
                }
            }
            damaged.extend(r.damage().iter().cloned().map(|d| (trace.clone(), d)));
            lost += r.lost_events();
            stacked.extend(
                (r.tables().devices())
                    .filter(|d| !d.stacked_on.is_empty())
                    .map(|d| (trace.clone(), d.name.clone())),
            );
            tables.add(&trace, &r, devs);
        }
        let io = concat_io(frames)?;
        let (processes, files, devices) = tables.frames()?;
        // Device names are few: join them in now.
        let io = io
            .lazy()
            .join(
                devices.lazy(),
                [col("trace"), col("dev_t")],
                [col("trace"), col("dev_t")],
                JoinArgs::new(JoinType::Left),
            )
            .collect()
            .map_err(perr)?;
        Ok(Dataset {
            io,
            processes,
            files,
            lost_events: lost,
            damaged,
            decoded,
            unreadable,
            stacked,
        })
    }

    /// True when segments were decoded and every one was damaged: nothing could be read.
    pub fn nothing_read(&self) -> bool {
        self.unreadable && self.decoded == 0
    }

    /// From the first to the last I/O, s: 0 with one I/O (or several at one instant) or none,
    /// when a rate over it is undefined ([`rate_per_s`]).
    fn duration_s(&self) -> f64 {
        let ts = self
            .io
            .column("ts_ns")
            .ok()
            .and_then(|c| c.i64().ok().cloned());
        match ts {
            Some(t) if !t.is_empty() => {
                let (a, b) = (t.min().unwrap_or(0), t.max().unwrap_or(0));
                b.saturating_sub(a).max(0) as f64 / 1e9
            }
            _ => 0.0,
        }
    }

    /// Listings of several traces say which trace each row is from (a `trace` column first).
    fn several_traces(&self) -> bool {
        let mut names = std::collections::BTreeSet::new();
        for df in [&self.io, &self.processes, &self.files] {
            let unique = df.column("trace").and_then(|c| c.unique());
            if let Ok(u) = unique {
                if let Ok(s) = u.str() {
                    names.extend(s.iter().flatten().map(str::to_string));
                }
            }
        }
        names.len() > 1
    }

    /// The columns of a listing: `trace` first when it holds several traces.
    fn listing(&self, cols: &[&str]) -> Vec<polars::prelude::Expr> {
        let trace = self.several_traces().then_some("trace");
        trace.iter().chain(cols).map(|c| col(*c)).collect()
    }

    /// The `io` rows with each I/O through stacked devices once, at the highest layer the
    /// table has (as [`crate::onepass::Layers::Once`]): a row a stacked device sent down is
    /// left out when that device has rows in the table, of the same trace.
    fn counted(&self) -> LazyFrame {
        let io = self.io.clone().lazy();
        let lower = self
            .io
            .column("upper_dev")
            .is_ok_and(|c| c.null_count() < c.len());
        if !lower || self.stacked.is_empty() {
            return io;
        }
        let (traces, names): (Vec<&str>, Vec<&str>) = (self.stacked.iter())
            .map(|(t, n)| (t.as_str(), n.as_str()))
            .unzip();
        let stacked = DataFrame::new(
            traces.len(),
            vec![
                Column::new("trace".into(), traces),
                Column::new("upper_dev".into(), names),
            ],
        );
        let Ok(stacked) = stacked else {
            return io;
        };
        let uppers = io
            .clone()
            .select([col("trace"), col("dev").alias("upper_dev")])
            .unique(None, UniqueKeepStrategy::Any)
            .join(
                stacked.lazy(),
                [col("trace"), col("upper_dev")],
                [col("trace"), col("upper_dev")],
                JoinArgs::new(JoinType::Inner),
            )
            .with_column(lit(true).alias("upper_counted"));
        let mut args = JoinArgs::new(JoinType::Left);
        args.maintain_order = MaintainOrderJoin::Left;
        io.join(
            uppers,
            [col("trace"), col("upper_dev")],
            [col("trace"), col("upper_dev")],
            args,
        )
        .filter(col("upper_counted").is_null())
        .drop(by_name(["upper_counted"], true, false))
    }

    fn with_comm(&self, lf: LazyFrame) -> LazyFrame {
        lf.join(
            self.processes.clone().lazy(),
            [col("trace"), col("tid")],
            [col("trace"), col("tid")],
            JoinArgs::new(JoinType::Left),
        )
    }

    fn with_path(&self, lf: LazyFrame) -> LazyFrame {
        lf.join(
            self.files.clone().lazy(),
            [col("trace"), col("path_id")],
            [col("trace"), col("path_id")],
            JoinArgs::new(JoinType::Left),
        )
    }
}

/// The small tables of the loaded traces (processes, files, device names), trace by trace.
#[derive(Default)]
struct TablesCols {
    processes: ProcessCols,
    files: FilesCols,
    d_trace: Vec<String>,
    d_dev: Vec<u32>,
    d_name: Vec<String>,
}

impl TablesCols {
    /// Adds the tables of the trace named `trace`, read by `r` (its device names `devs`).
    fn add(&mut self, trace: &str, r: &Reader, devs: HashMap<u32, String>) {
        for pr in r.tables().processes() {
            let p = &mut self.processes;
            p.trace.push(trace.to_string());
            p.tid.push(pr.tid);
            p.pid.push(pr.pid);
            p.comm.push(iodump_format::text::text_string(&pr.comm));
            p.args
                .push(iodump_format::text::text_string(pr.args_or_comm()));
        }
        let entries = r.tables().paths().map(|pe| {
            let path = iodump_format::text::text_string(&pe.path);
            (
                pe.path_id,
                u64::from(pe.dev.0),
                pe.inode,
                pe.generation,
                path,
                pe.deleted,
            )
        });
        self.files.add(trace, entries.collect(), &devs);
        for (d, name) in devs {
            self.d_trace.push(trace.to_string());
            self.d_dev.push(d);
            self.d_name.push(name);
        }
    }

    /// The `processes`, `files` and device-name frames.
    fn frames(self) -> Result<(DataFrame, DataFrame, DataFrame), AnalyzeError> {
        let processes = self.processes.frame()?;
        let devices = DataFrame::new(
            self.d_dev.len(),
            vec![
                Column::new("trace".into(), self.d_trace),
                Column::new("dev_t".into(), self.d_dev),
                Column::new("dev".into(), self.d_name),
            ],
        )
        .map_err(perr)?;
        Ok((processes, self.files.frame()?, devices))
    }
}

/// The columns of the `processes` table: trace, tid, ppid (the process id), comm, args.
#[derive(Default)]
struct ProcessCols {
    trace: Vec<String>,
    tid: Vec<u32>,
    pid: Vec<u32>,
    comm: Vec<String>,
    args: Vec<String>,
}

impl ProcessCols {
    fn frame(self) -> Result<DataFrame, AnalyzeError> {
        DataFrame::new(
            self.tid.len(),
            vec![
                Column::new("trace".into(), self.trace),
                Column::new("tid".into(), self.tid),
                Column::new("ppid".into(), self.pid),
                Column::new("comm".into(), self.comm),
                Column::new("args".into(), self.args),
            ],
        )
        .map_err(perr)
    }
}

/// The `io` frames of segments or row groups as one table (no frame: an empty table).
fn concat_io(frames: Vec<LazyFrame>) -> Result<DataFrame, AnalyzeError> {
    if frames.is_empty() {
        return frame("", Cols::default()).map_err(perr);
    }
    concat(frames, UnionArgs::default())
        .and_then(|lf| lf.collect())
        .map_err(perr)
}

/// A path entry as the `files` table needs it: (path id, device, inode, generation, path,
/// deleted).
type FileEntry = (u32, u64, u64, Option<u32>, String, bool);

/// The columns of the `files` table, trace by trace.
#[derive(Default)]
struct FilesCols {
    trace: Vec<String>,
    path_id: Vec<u32>,
    path: Vec<String>,
    file_id: Vec<u32>,
    latest_path: Vec<String>,
    names: Vec<u32>,
    renamed_from: Vec<Option<String>>,
    fs_dev: Vec<String>,
    deleted: Vec<bool>,
}

impl FilesCols {
    /// Adds the path entries of one trace, whose device numbers `devs` names.
    fn add(&mut self, trace: &str, mut entries: Vec<FileEntry>, devs: &HashMap<u32, String>) {
        entries.sort_by_key(|e| e.0);
        let at = |id: u32| entries.binary_search_by_key(&id, |e| e.0).ok();
        let ids = FileIdentities::new(entries.iter().map(|e| (e.0, e.1, e.2, e.3)), |id| {
            at(id).map_or_else(String::new, |i| entries[i].4.clone())
        });
        for (id, dev, _, _, path, deleted) in &entries {
            let key = ids.key(*id);
            self.deleted.push(*deleted);
            let dev = DevT(*dev as u32);
            self.fs_dev.push(match devs.get(&dev.0) {
                Some(name) => name.clone(),
                None => format!("{}:{}", dev.major(), dev.minor()),
            });
            self.trace.push(trace.to_string());
            self.path_id.push(*id);
            self.path.push(path.clone());
            self.file_id.push(key);
            // As shown: a deleted file's name followed by " (deleted)".
            let (latest, latest_deleted) = match at(key) {
                Some(i) => (&entries[i].4, entries[i].5),
                None => (path, *deleted),
            };
            self.latest_path.push(match latest_deleted {
                true => format!("{latest}{}", iodump_format::DELETED_SUFFIX_TEXT),
                false => latest.clone(),
            });
            let renamed = ids.renamed(key);
            self.names.push(renamed.map_or(1, |r| r.names));
            self.renamed_from
                .push(renamed.map(|r| r.renamed_from.clone()));
        }
    }

    fn frame(self) -> Result<DataFrame, AnalyzeError> {
        DataFrame::new(
            self.path_id.len(),
            vec![
                Column::new("trace".into(), self.trace),
                Column::new("path_id".into(), self.path_id),
                Column::new("path".into(), self.path),
                Column::new("file_id".into(), self.file_id),
                Column::new("latest_path".into(), self.latest_path),
                Column::new("names".into(), self.names),
                Column::new("renamed_from".into(), self.renamed_from),
                Column::new("fs_dev".into(), self.fs_dev),
                Column::new("deleted".into(), self.deleted),
            ],
        )
        .map_err(perr)
    }
}

/// Sum of the bytes of the I/Os of one op.
fn op_bytes(op: &str) -> polars::prelude::Expr {
    col("bytes")
        .cast(DataType::UInt64)
        .filter(col("op").eq(lit(op.to_string())))
        .sum()
}

fn q(c: &str, p: f64) -> polars::prelude::Expr {
    col(c).quantile(lit(p), QuantileMethod::Linear)
}

/// What to rank files by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankBy {
    /// Number of I/Os.
    Ios,
    /// Bytes transferred.
    Bytes,
    /// p99 latency.
    Latency,
}

/// `--top-files`: per file (device and inode: a file renamed while recording is one row,
/// under its latest name, with the number of names it had and its earliest other one): I/Os,
/// IOPS, bytes read and written, mean and p99 latency, main process.
pub fn top_files(d: &Dataset, by: RankBy, limit: usize) -> Result<DataFrame, AnalyzeError> {
    let dur = d.duration_s();
    // Path ids the table does not know are their own file.
    let io = d
        .with_path(d.counted())
        .with_column(col("file_id").fill_null(col("path_id")));
    // The main process of each file: the comm with most I/Os on it.
    let main = d
        .with_comm(io.clone())
        .group_by([col("trace"), col("file_id"), col("comm")])
        .agg([len().alias("n")])
        .sort_by_exprs(
            [col("n"), col("comm")],
            SortMultipleOptions::default().with_order_descending_multi([true, false]),
        )
        .group_by([col("trace"), col("file_id")])
        .agg([col("comm").first().alias("main_process")]);
    let sort_col = match by {
        RankBy::Ios => "ios",
        RankBy::Bytes => "bytes",
        RankBy::Latency => "p99_latency_us",
    };
    io.group_by([col("trace"), col("file_id")])
        .agg([
            col("latest_path").first().alias("path"),
            col("names").first().fill_null(lit(1u32)).alias("names"),
            col("renamed_from").first().alias("renamed_from"),
            col("fs_dev").first().alias("fs_dev"),
            len().alias("ios"),
            col("bytes").cast(DataType::UInt64).sum().alias("bytes"),
            op_bytes("read").alias("read_bytes"),
            op_bytes("write").alias("write_bytes"),
            (col("latency_ns").mean() / lit(1000.0)).alias("mean_latency_us"),
            (q("latency_ns", 0.99) / lit(1000.0)).alias("p99_latency_us"),
        ])
        .join(
            main,
            [col("trace"), col("file_id")],
            [col("trace"), col("file_id")],
            JoinArgs::new(JoinType::Left),
        )
        .with_column(rate_expr(col("ios"), dur).alias("iops"))
        // Full ties (labels such as [metadata] exist once per device) are broken by trace and
        // file id, so that the order is the same on every run and in `onepass::top_files`.
        .sort_by_exprs(
            [col(sort_col), col("path"), col("trace"), col("file_id")],
            SortMultipleOptions::default().with_order_descending_multi([true, false, false, false]),
        )
        .limit(limit as IdxSize)
        .select(d.listing(&[
            "path",
            "ios",
            "iops",
            "read_bytes",
            "write_bytes",
            "mean_latency_us",
            "p99_latency_us",
            "main_process",
            "names",
            "renamed_from",
            "fs_dev",
        ]))
        .collect()
        .and_then(label_devices)
        .map_err(perr)
}

/// `--top-files`' rows named as [`crate::onepass`] names them: a label (`[journal]`, one
/// per device) followed by its file system's device; the `fs_dev` column dropped.
fn label_devices(mut df: DataFrame) -> PolarsResult<DataFrame> {
    let fs_dev = df.drop_in_place("fs_dev")?;
    let fs_dev = fs_dev.str()?;
    let path: Vec<Option<String>> = (df.column("path")?.str()?.iter())
        .zip(fs_dev.iter())
        .map(|(p, dev)| p.map(|p| crate::files::named_with_device(p.to_string(), dev)))
        .collect();
    df.with_column(Column::new("path".into(), path))?;
    Ok(df)
}

/// `--top-procs`: per process (pid, comm, command line): I/Os, IOPS, bytes read and written,
/// MB/s, and the command line (`args`) last.
pub fn top_procs(d: &Dataset, limit: usize) -> Result<DataFrame, AnalyzeError> {
    let dur = d.duration_s();
    d.with_comm(d.counted())
        .group_by([col("trace"), col("pid"), col("comm"), col("args")])
        .agg([
            len().alias("ios"),
            op_bytes("read").alias("read_bytes"),
            op_bytes("write").alias("write_bytes"),
            col("bytes").cast(DataType::UInt64).sum().alias("bytes"),
        ])
        .with_columns([
            rate_expr(col("ios"), dur).alias("iops"),
            rate_expr(col("bytes").cast(DataType::Float64) / lit(1e6), dur).alias("mb_per_s"),
        ])
        // A pid whose threads carry several names has one row per name: ties broken by name
        // so that the order is the same on every run and in `onepass::top_procs`.
        .sort_by_exprs(
            [
                col("ios"),
                col("pid"),
                col("comm"),
                col("args"),
                col("trace"),
            ],
            SortMultipleOptions::default()
                .with_order_descending_multi([true, false, false, false, false]),
        )
        .limit(limit as IdxSize)
        .select(d.listing(&[
            "pid",
            "comm",
            "ios",
            "iops",
            "read_bytes",
            "write_bytes",
            "mb_per_s",
            "args",
        ]))
        .collect()
        .map_err(perr)
}

/// Grouping of `--latency`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyBy {
    /// Everything together.
    All,
    /// Per device.
    Dev,
    /// Per operation.
    Op,
    /// Per process.
    Proc,
    /// Per file.
    File,
}

impl LatencyBy {
    /// How a grouping counts I/O through stacked devices: on each device per device, once
    /// (at the highest layer recorded) otherwise.
    pub(crate) fn layers(self) -> crate::onepass::Layers {
        match self {
            LatencyBy::Dev => crate::onepass::Layers::Each,
            _ => crate::onepass::Layers::Once,
        }
    }

    /// The name of the grouping column in the result.
    pub fn column_name(self) -> &'static str {
        match self {
            LatencyBy::All => "group",
            LatencyBy::Dev => "dev",
            LatencyBy::Op => "op",
            LatencyBy::Proc => "comm",
            LatencyBy::File => "path",
        }
    }
}

/// `--latency`: p50/p90/p99/p99.9/max of the total latency, and the queue (Q2D) versus device
/// (D2C) split, in microseconds.
pub fn latency(d: &Dataset, by: LatencyBy) -> Result<DataFrame, AnalyzeError> {
    let mut lf = match by.layers() {
        crate::onepass::Layers::Each => d.io.clone().lazy(),
        crate::onepass::Layers::Once => d.counted(),
    };
    let keys: Vec<polars::prelude::Expr> = match by {
        LatencyBy::All => vec![lit("all").alias("group")],
        LatencyBy::Dev => vec![col("dev")],
        LatencyBy::Op => vec![col("op")],
        LatencyBy::Proc => {
            lf = d.with_comm(lf);
            vec![col("comm")]
        }
        LatencyBy::File => {
            // A renamed file's names together, under its latest name; a label (one per
            // device) named with its file system's device, as `--top-files` names it.
            let latest = col("latest_path").fill_null(col("path"));
            let labelled = concat_str([latest.clone(), lit(" "), col("fs_dev")], "", false);
            let name = when(latest.clone().str().starts_with(lit("[")))
                .then(labelled)
                .otherwise(latest);
            lf = d.with_path(lf).with_column(name.alias("path"));
            vec![col("path")]
        }
    };
    let key_name = by.column_name();
    let us = |e: polars::prelude::Expr| e / lit(1000.0);
    lf.group_by(keys)
        .agg([
            len().alias("ios"),
            us(q("latency_ns", 0.5)).alias("p50_us"),
            us(q("latency_ns", 0.9)).alias("p90_us"),
            us(q("latency_ns", 0.99)).alias("p99_us"),
            us(q("latency_ns", 0.999)).alias("p999_us"),
            us(col("latency_ns").max().cast(DataType::Float64)).alias("max_us"),
            us(col("queue_ns").mean()).alias("mean_queue_us"),
            us(col("device_ns").mean()).alias("mean_device_us"),
            us(q("device_ns", 0.99)).alias("p99_device_us"),
        ])
        // (A literal key makes a group of no rows: no I/O is no row, as in the one pass.)
        .filter(col("ios").gt(lit(0)))
        // Ties broken by the group's name: the same order on every run and in `onepass::latency`.
        .sort_by_exprs(
            [col("ios"), col(key_name)],
            SortMultipleOptions::default().with_order_descending_multi([true, false]),
        )
        .collect()
        .map_err(perr)
}

/// `--summary`: one screen of key figures, as (name, value) rows.
pub fn summary(d: &Dataset) -> Result<DataFrame, AnalyzeError> {
    let dur = d.duration_s();
    let agg = d
        .counted()
        .select([
            len().cast(DataType::UInt64).alias("events"),
            col("bytes").cast(DataType::UInt64).sum().alias("bytes"),
            col("op")
                .eq(lit("read"))
                .cast(DataType::UInt64)
                .sum()
                .alias("reads"),
            col("op")
                .eq(lit("write"))
                .cast(DataType::UInt64)
                .sum()
                .alias("writes"),
            q("latency_ns", 0.5).alias("p50"),
            q("latency_ns", 0.99).alias("p99"),
            col("latency_ns").max().cast(DataType::Float64).alias("max"),
        ])
        .collect()
        .map_err(perr)?;
    // `ChunkedArray::get` panics past the end: the first value of a column, if any.
    let get = |c: &str| -> f64 {
        agg.column(c)
            .ok()
            .and_then(|s| s.cast(&DataType::Float64).ok())
            .and_then(|s| s.f64().ok().and_then(|x| x.iter().next().flatten()))
            .unwrap_or(0.0)
    };
    let procs = top_procs(d, 1)?;
    let files = top_files(d, RankBy::Ios, 1)?;
    let first_str = |df: &DataFrame, c: &str| -> String {
        df.column(c)
            .ok()
            .and_then(|s| {
                s.str()
                    .ok()
                    .and_then(|x| x.iter().next().flatten().map(str::to_string))
            })
            .unwrap_or_else(|| "-".into())
    };
    summary_frame(SummaryFigures {
        events: get("events") as u64,
        lost_events: d.lost_events,
        duration_s: dur,
        bytes: get("bytes"),
        reads: get("reads") as u64,
        writes: get("writes") as u64,
        p50_latency_ns: get("p50"),
        p99_latency_ns: get("p99"),
        max_latency_ns: get("max"),
        top_process: first_str(&procs, "comm"),
        top_file: first_str(&files, "path"),
    })
    .map_err(perr)
}

/// The figures of `--summary`, however they were computed (here, or in one pass by
/// [`crate::onepass`]); a latency the input has none of is 0.
pub(crate) struct SummaryFigures {
    pub events: u64,
    pub lost_events: u64,
    pub duration_s: f64,
    pub bytes: f64,
    pub reads: u64,
    pub writes: u64,
    pub p50_latency_ns: f64,
    pub p99_latency_ns: f64,
    pub max_latency_ns: f64,
    pub top_process: String,
    pub top_file: String,
}

/// The `--summary` frame: one (metric, value) row per figure, both engines alike.
pub(crate) fn summary_frame(f: SummaryFigures) -> PolarsResult<DataFrame> {
    let dur = f.duration_s;
    let us = |ns: f64| format!("{:.1}", ns / 1e3);
    // A rate over no time (one I/O, or none) is missing: `-`, empty, null.
    let rows: Vec<(&str, Option<String>)> = vec![
        ("events", Some(f.events.to_string())),
        ("lost_events", Some(f.lost_events.to_string())),
        ("duration_s", Some(format!("{dur:.3}"))),
        (
            "iops",
            rate_per_s(f.events as f64, dur).map(|r| format!("{r:.1}")),
        ),
        (
            "mb_per_s",
            rate_per_s(f.bytes / 1e6, dur).map(|r| format!("{r:.2}")),
        ),
        ("reads", Some(f.reads.to_string())),
        ("writes", Some(f.writes.to_string())),
        // No I/O has no latency (not 0).
        (
            "p50_latency_us",
            (f.events > 0).then(|| us(f.p50_latency_ns)),
        ),
        (
            "p99_latency_us",
            (f.events > 0).then(|| us(f.p99_latency_ns)),
        ),
        (
            "max_latency_us",
            (f.events > 0).then(|| us(f.max_latency_ns)),
        ),
        ("top_process", (f.events > 0).then_some(f.top_process)),
        ("top_file", (f.events > 0).then_some(f.top_file)),
    ];
    let (names, values): (Vec<&str>, Vec<Option<String>>) = rows.into_iter().unzip();
    DataFrame::new(
        names.len(),
        vec![
            Column::new("metric".into(), names),
            Column::new("value".into(), values),
        ],
    )
}

/// `amount` per second over `duration_s`; `None` when the duration is not positive (one I/O,
/// or several at one instant, or none: a rate over no time is undefined).
pub(crate) fn rate_per_s(amount: f64, duration_s: f64) -> Option<f64> {
    (duration_s > 0.0).then(|| amount / duration_s)
}

/// [`rate_per_s`] of a column: null when the duration is not positive.
fn rate_expr(amount: polars::prelude::Expr, duration_s: f64) -> polars::prelude::Expr {
    if duration_s > 0.0 {
        amount.cast(DataType::Float64) / lit(duration_s)
    } else {
        lit(NULL).cast(DataType::Float64)
    }
}

/// A cell as text (for the table, CSV and JSON printers): a float to the thousandth, or
/// `full`, as the shortest text that reads back as the same number; a list with all its
/// items (polars' display of a list elides the middle ones).
pub fn cell(v: &AnyValue<'_>, full: bool) -> Option<String> {
    let float = |f: f64| {
        if full {
            f.to_string()
        } else {
            format!("{:.3}", snapped(f))
        }
    };
    match v {
        AnyValue::Null => None,
        AnyValue::String(s) => Some(s.to_string()),
        AnyValue::StringOwned(s) => Some(s.to_string()),
        AnyValue::Float64(f) => Some(float(*f)),
        AnyValue::Float32(f) => Some(float(f64::from(*f))),
        AnyValue::List(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|v| cell(&v, full).unwrap_or_else(|| "null".into()))
                .collect();
            Some(format!("[{}]", items.join(", ")))
        }
        other => Some(other.to_string()),
    }
}

/// `f` on a grid of 2^-20 (about a millionth) before it is printed to the thousandth: the
/// engines compute a figure in different orders of operations, so one may be a hair below
/// a tie (`144.81549999…`) and the other a hair above (`144.8155000…1`); snapped to the same
/// grid point, they print alike. Changes nothing above 2^32, where the grid is finer than a
/// double.
fn snapped(f: f64) -> f64 {
    const GRID: f64 = (1u64 << 20) as f64;
    if f.is_finite() && f.abs() < (1u64 << 32) as f64 {
        (f * GRID).round() / GRID
    } else {
        f
    }
}

/// The rows of a frame as strings (None = null; floats in `full`, [`cell`]), with the
/// column names.
pub fn rows(df: &DataFrame, full: bool) -> (Vec<String>, Vec<Vec<Option<String>>>) {
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut out = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let row = df
            .columns()
            .iter()
            .map(|c| c.get(i).ok().as_ref().and_then(|v| cell(v, full)))
            .collect();
        out.push(row);
    }
    (names, out)
}

/// `--timeline`: per interval, device and op: I/Os, IOPS, MB/s and p99 latency.
pub fn timeline(d: &Dataset, interval_ns: i64) -> Result<DataFrame, AnalyzeError> {
    let secs = interval_ns as f64 / 1e9;
    // Interval numbers computed here (integer division without polars' rounding feature).
    let ts =
        d.io.column("ts_ns")
            .map_err(perr)?
            .i64()
            .map_err(perr)?
            .clone();
    let bucket: Vec<i64> = ts
        .iter()
        .map(|t| t.unwrap_or(0).div_euclid(interval_ns))
        .collect();
    let mut io = d.io.clone();
    io.with_column(Column::new("bucket".into(), bucket))
        .map_err(perr)?;
    let df = io
        .lazy()
        .group_by([col("bucket"), col("dev"), col("op")])
        .agg([
            len().alias("ios"),
            col("bytes").cast(DataType::UInt64).sum().alias("bytes"),
            (q("latency_ns", 0.99) / lit(1000.0)).alias("p99_latency_us"),
        ])
        .with_columns([
            (col("ios").cast(DataType::Float64) / lit(secs)).alias("iops"),
            (col("bytes").cast(DataType::Float64) / lit(secs * 1e6)).alias("mb_per_s"),
        ])
        .sort_by_exprs(
            [col("bucket"), col("dev"), col("op")],
            SortMultipleOptions::default(),
        )
        .collect()
        .map_err(perr)?;
    // The interval's start as RFC 3339 UTC.
    let buckets = df
        .column("bucket")
        .map_err(perr)?
        .i64()
        .map_err(perr)?
        .clone();
    let times: Vec<String> = buckets
        .iter()
        .map(|b| {
            b.map_or_else(String::new, |b| {
                iodump_format::summary::rfc3339_utc(b * interval_ns)
            })
        })
        .collect();
    let mut df = df;
    df.with_column(Column::new("time".into(), times))
        .map_err(perr)?;
    df.select([
        "time",
        "dev",
        "op",
        "ios",
        "iops",
        "mb_per_s",
        "p99_latency_us",
    ])
    .map_err(perr)
}

/// `--seek`: per device, the distance of each I/O from the end of the previous one on the
/// same device (in time order), like btt's seek statistics: sequential share, short seeks
/// (≤ 1 MiB), long seeks, median and mean distance in sectors.
pub fn seek(d: &Dataset) -> Result<DataFrame, AnalyzeError> {
    let i64c = |c: &str| col(c).cast(DataType::Int64);
    let end = i64c("end_sector");
    let dist = i64c("sector") - col("prev_end");
    let prev_end = end
        .shift(lit(1))
        .over([col("trace"), col("dev_t")])
        .map_err(perr)?;
    d.io.clone()
        .lazy()
        .sort_by_exprs(
            [col("trace"), col("dev_t"), col("ts_ns")],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .with_column(prev_end.alias("prev_end"))
        .filter(col("prev_end").is_not_null())
        .with_column(dist.alias("dist"))
        .with_column(
            when(col("dist").lt(lit(0i64)))
                .then(lit(0i64) - col("dist"))
                .otherwise(col("dist"))
                .alias("seek_sectors"),
        )
        .group_by([col("dev")])
        .agg([
            len().alias("ios"),
            col("seek_sectors")
                .eq(lit(0i64))
                .cast(DataType::UInt64)
                .sum()
                .alias("sequential"),
            (col("seek_sectors")
                .gt(lit(0i64))
                .and(col("seek_sectors").lt_eq(lit(2048i64))))
            .cast(DataType::UInt64)
            .sum()
            .alias("short_seeks"),
            col("seek_sectors")
                .gt(lit(2048i64))
                .cast(DataType::UInt64)
                .sum()
                .alias("long_seeks"),
            q("seek_sectors", 0.5).alias("median_seek_sectors"),
            col("seek_sectors").mean().alias("mean_seek_sectors"),
        ])
        .with_column(
            (col("sequential").cast(DataType::Float64) * lit(100.0)
                / col("ios").cast(DataType::Float64))
            .alias("sequential_pct"),
        )
        // Ties broken by the device's name: the same order on every run and in `onepass::seek`.
        .sort_by_exprs(
            [col("ios"), col("dev")],
            SortMultipleOptions::default().with_order_descending_multi([true, false]),
        )
        .select([
            col("dev"),
            col("ios"),
            col("sequential_pct"),
            col("sequential"),
            col("short_seeks"),
            col("long_seeks"),
            col("median_seek_sectors"),
            col("mean_seek_sectors"),
        ])
        .collect()
        .map_err(perr)
}

/// `--seq-writes`: runs of contiguous writes per device and file (each write starting where
/// the previous write of the same file on the same device ended) of at least `min_bytes`:
/// file, process, start time, length, I/Os and throughput (bytes over first start to last
/// completion).
pub fn seq_writes(d: &Dataset, min_bytes: u64, limit: usize) -> Result<DataFrame, AnalyzeError> {
    // By file: the writes of a file renamed while recording form one run.
    let keys = [col("trace"), col("dev_t"), col("file_id")];
    let prev_end = col("end_sector")
        .shift(lit(1))
        .over(keys.clone())
        .map_err(perr)?;
    let new_run = col("prev_end")
        .is_null()
        .or(col("sector").neq(col("prev_end")))
        .cast(DataType::UInt32);
    let run = new_run.cum_sum(false).over(keys.clone()).map_err(perr)?;
    // Rows in file order (`row`) for ties in time, whatever order the join leaves them in.
    let writes = d.io.clone().lazy().with_row_index("row", None);
    let lf = d
        .with_path(writes.filter(col("op").eq(lit("write"))))
        // Path ids the table does not know are their own file.
        .with_column(col("file_id").fill_null(col("path_id")))
        .with_column(col("latest_path").fill_null(col("path")))
        .sort_by_exprs(
            [
                col("trace"),
                col("dev_t"),
                col("file_id"),
                col("ts_ns"),
                col("row"),
            ],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .with_column(prev_end.alias("prev_end"))
        .with_column(run.alias("run"))
        .with_column((col("ts_ns") + col("latency_ns").cast(DataType::Int64)).alias("done_ns"))
        .group_by([
            col("trace"),
            col("dev_t"),
            col("file_id"),
            col("dev"),
            col("run"),
        ])
        .agg([
            col("latest_path").first().alias("path"),
            col("ts_ns").min().alias("start_ns"),
            col("done_ns").max().alias("end_ns"),
            col("bytes")
                .cast(DataType::UInt64)
                .sum()
                .alias("length_bytes"),
            len().alias("ios"),
            col("tid").first().alias("tid"),
            col("sector").min().alias("first_sector"),
        ])
        .filter(col("length_bytes").gt_eq(lit(min_bytes)));
    let lf = d.with_comm(lf);
    let df = lf
        .with_column(
            // Null over no time (I/O that took none), as `rate_per_s`.
            when((col("end_ns") - col("start_ns")).gt(lit(0i64)))
                .then(
                    col("length_bytes").cast(DataType::Float64)
                        / ((col("end_ns") - col("start_ns")).cast(DataType::Float64) / lit(1e9))
                        / lit(1e6),
                )
                .otherwise(lit(NULL).cast(DataType::Float64))
                .alias("mb_per_s"),
        )
        // Ties broken by path, device and trace names, then first sector: the same order on
        // every run and in `onepass::seq_writes`.
        .sort_by_exprs(
            [
                col("length_bytes"),
                col("start_ns"),
                col("path"),
                col("dev"),
                col("trace"),
                col("first_sector"),
            ],
            SortMultipleOptions::default()
                .with_order_descending_multi([true, false, false, false, false, false]),
        )
        .limit(limit as IdxSize)
        .collect()
        .map_err(perr)?;
    let starts = df
        .column("start_ns")
        .map_err(perr)?
        .i64()
        .map_err(perr)?
        .clone();
    let times: Vec<String> = starts
        .iter()
        .map(|t| t.map_or_else(String::new, iodump_format::summary::rfc3339_utc))
        .collect();
    let mut df = df;
    df.with_column(Column::new("start".into(), times))
        .map_err(perr)?;
    df.select([
        "path",
        "dev",
        "comm",
        "start",
        "first_sector",
        "length_bytes",
        "ios",
        "mb_per_s",
    ])
    .map_err(perr)
}

/// `--sql`: a polars SQL query over the tables `io`, `processes` and `files`.
pub fn sql(d: &Dataset, query: &str) -> Result<DataFrame, AnalyzeError> {
    let mut ctx = polars::sql::SQLContext::new();
    ctx.register("io", d.io.clone().lazy());
    ctx.register("processes", d.processes.clone().lazy());
    ctx.register("files", d.files.clone().lazy());
    ctx.execute(query)
        .and_then(|lf| lf.collect())
        .map_err(|source| AnalyzeError::Sql { source })
}

impl Dataset {
    /// Appends another dataset's rows (several Parquet directories form one dataset).
    pub fn append(&mut self, other: Dataset) -> Result<(), AnalyzeError> {
        self.io.vstack_mut(&other.io).map_err(perr)?;
        self.processes.vstack_mut(&other.processes).map_err(perr)?;
        self.files.vstack_mut(&other.files).map_err(perr)?;
        self.lost_events += other.lost_events;
        self.damaged.extend(other.damaged);
        self.decoded += other.decoded;
        self.unreadable |= other.unreadable;
        self.stacked.extend(other.stacked);
        Ok(())
    }
}

impl Dataset {
    /// Loads the tables `iodump convert` wrote into `dir` (flat or partitioned), keeping the
    /// I/Os `filter` accepts (evaluated on each row rebuilt as an event, exactly as on a trace).
    pub fn load_parquet(dir: &Path, filter: Option<&Expr>) -> Result<Dataset, AnalyzeError> {
        let io_files = parquet_files(dir, "io");
        if !crate::parquet_input::has_table(dir, "io") {
            return Err(AnalyzeError::Query {
                message: format!("{}: no io table (io.parquet or io/)", dir.display()),
            });
        }
        let cgroups = match filter {
            Some(f) if f.uses_cgroup_table() => parquet_input::DatasetCgroups::load(dir)?,
            _ => parquet_input::DatasetCgroups::default(),
        };
        let mut frames = Vec::new();
        // I/O of a trace a small table lacks would count as of no file or process.
        let known = parquet_input::TraceTables::load(dir)?;
        for p in &io_files {
            let f = std::fs::File::open(p).map_err(crate::parquet_read_error(p))?;
            let meta = parquet::file::metadata::ParquetMetaDataReader::new()
                .parse_and_finish(&f)
                .map_err(crate::parquet_read_error(p))?;
            known.check_io_file(p, &meta)?;
            for b in read_batches(p)? {
                frames.push(parquet_io_frame(&b, filter, &cgroups, p)?.lazy());
            }
        }
        // An empty table (`convert` of no I/O) has no batch: the empty frame of a trace.
        let io = concat_io(frames)?;
        let processes = parquet_processes(dir)?;
        let files = parquet_files_table(dir)?;
        let lost = parquet_lost_events(dir)?;
        let stacked = parquet_input::devices_table(dir)?
            .into_iter()
            .filter(|d| d.stacked)
            .map(|d| (d.trace, d.name))
            .collect();
        Ok(Dataset {
            io,
            processes,
            files,
            lost_events: lost,
            // A row group that cannot be read is an error here (not skipped).
            damaged: Vec::new(),
            decoded: 0,
            unreadable: false,
            stacked,
        })
    }
}

/// One record batch of a Parquet `io` table as the rows of the polars `io` table, keeping
/// those `filter` accepts.
fn parquet_io_frame(
    b: &arrow_array::RecordBatch,
    filter: Option<&Expr>,
    cgroups: &parquet_input::DatasetCgroups,
    file: &Path,
) -> Result<DataFrame, AnalyzeError> {
    use arrow_array::{Array, StringArray};
    let n = b.num_rows();
    let s = |name| arrow_col::<StringArray>(b, name);
    let trace: Vec<&str> = (0..n)
        .map(|i| s("trace").map(|a| a.value(i)))
        .collect::<Result<_, _>>()?;
    let dev: Vec<&str> = (0..n)
        .map(|i| s("dev").map(|a| a.value(i)))
        .collect::<Result<_, _>>()?;
    let op: Vec<&str> = (0..n)
        .map(|i| s("op").map(|a| a.value(i)))
        .collect::<Result<_, _>>()?;
    let dev_t: Vec<u32> = (0..n)
        .map(|i| parquet_input::parse_dev_t(s("dev_t")?.value(i), file))
        .collect::<Result<_, _>>()?;
    let int = |name| IntColumn::of(b, name);
    let ts = crate::layout::utc_ns(b)?.to_vec();
    // (u32 as the trace's, 64 bits in the table: see `frame`.)
    let bytes: Vec<u64> = int("bytes")?.to_u32().into_iter().map(u64::from).collect();
    let sector = int("sector")?.to_u64();
    let end_sector: Vec<u64> = sector
        .iter()
        .zip(&bytes)
        .map(|(s, b)| s.wrapping_add(b.div_ceil(512)))
        .collect();
    let q = int("queue_ns")?;
    let queue: Vec<Option<u64>> = (0..n).map(|i| (!q.is_null(i)).then(|| q.u64(i))).collect();
    let error: Vec<u32> = int("error")?.to_u32();
    // Absent from datasets written before format 1.4: null.
    let upper_dev: Vec<Option<&str>> = match b.column_by_name("upper_dev") {
        None => vec![None; n],
        Some(_) => {
            let a = s("upper_dev")?;
            (0..n).map(|i| a.is_valid(i).then(|| a.value(i))).collect()
        }
    };
    let df = DataFrame::new(
        n,
        vec![
            Column::new("trace".into(), trace),
            Column::new("ts_ns".into(), ts),
            Column::new("dev_t".into(), dev_t),
            Column::new("op".into(), op),
            Column::new("bytes".into(), bytes),
            Column::new("sector".into(), sector),
            Column::new("end_sector".into(), end_sector),
            Column::new("pid".into(), int("pid")?.to_u32()),
            Column::new("tid".into(), int("tid")?.to_u32()),
            Column::new("path_id".into(), int("path_id")?.to_u32()),
            Column::new("queue_ns".into(), queue),
            Column::new("device_ns".into(), int("device_ns")?.to_u64()),
            Column::new("latency_ns".into(), int("latency_ns")?.to_u64()),
            Column::new("error".into(), error),
            Column::new("upper_dev".into(), upper_dev),
            Column::new("dev".into(), dev),
        ],
    )
    .map_err(perr)?;
    Ok(match filter {
        Some(f) => {
            let mask = parquet_filter_mask(b, f, &|t, id| cgroups.get(t, id), file)?;
            df.filter(&BooleanChunked::from_slice("mask".into(), &mask))
                .map_err(perr)?
        }
        None => df,
    })
}

/// The `processes` tables under `dir` as the polars `processes` table.
fn parquet_processes(dir: &Path) -> Result<DataFrame, AnalyzeError> {
    let mut cols = ProcessCols::default();
    for r in parquet_input::processes_table(dir)? {
        cols.trace.push(r.trace);
        cols.tid.push(r.tid);
        cols.pid.push(r.pid);
        cols.comm.push(r.comm);
        cols.args.push(r.args);
    }
    cols.frame()
}

/// The `files` tables under `dir` as the polars `files` table (path entries grouped by
/// trace, each trace's files identified by device and inode).
fn parquet_files_table(dir: &Path) -> Result<DataFrame, AnalyzeError> {
    // Path entries by trace.
    let mut by_trace: std::collections::BTreeMap<String, Vec<FileEntry>> = Default::default();
    for r in parquet_input::files_table(dir)? {
        by_trace.entry(r.trace).or_default().push((
            r.path_id,
            u64::from(r.dev),
            r.inode,
            r.generation,
            r.path,
            r.deleted,
        ));
    }
    let mut devs: HashMap<String, HashMap<u32, String>> = HashMap::new();
    for d in parquet_input::devices_table(dir)? {
        devs.entry(d.trace).or_default().insert(d.number.0, d.name);
    }
    let mut files = FilesCols::default();
    for (trace, entries) in by_trace {
        files.add(&trace, entries, devs.get(&trace).unwrap_or(&HashMap::new()));
    }
    files.frame()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_a_hair_either_side_of_a_tie_prints_alike() {
        // The two doubles around 144.8155 between which printing to the thousandth turns
        // from .815 to .816 (one engine's p99 may land on either).
        let mut lo = 144.8155f64;
        while format!("{lo:.3}") != "144.815" {
            lo = f64::from_bits(lo.to_bits() - 1);
        }
        while format!("{:.3}", f64::from_bits(lo.to_bits() + 1)) == "144.815" {
            lo = f64::from_bits(lo.to_bits() + 1);
        }
        let hi = f64::from_bits(lo.to_bits() + 1);
        assert_ne!(format!("{lo:.3}"), format!("{hi:.3}"));
        assert_eq!(
            cell(&AnyValue::Float64(lo), false),
            cell(&AnyValue::Float64(hi), false)
        );
        // Far from a tie, a figure prints as it is.
        assert_eq!(
            cell(&AnyValue::Float64(2.0004), false).as_deref(),
            Some("2.000")
        );
        assert_eq!(
            cell(&AnyValue::Float64(1e15 + 0.25), false).as_deref(),
            Some("1000000000000000.250")
        );
    }
}
