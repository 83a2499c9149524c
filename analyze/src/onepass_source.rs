//! The inputs of [`crate::onepass`]: `.iod` traces and `iodump convert` Parquet datasets behind
//! one interface. Both are read a unit at a time into an [`EventBatch`] (a trace segment, a
//! Parquet row group), so the same one-pass queries serve both, in parallel over units.
//!
//! A Parquet dataset can hold several traces; its rows are re-keyed to ids unique in the
//! dataset (paths sorted by trace name then path id, threads, devices, cgroups), so that it
//! reads as one trace whose tables know every name.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::{Array, RecordBatch, StringArray};
use iodump_format::expr::Expr;

use crate::input::InputPath;
use iodump_format::inthash::IntMap;
use iodump_format::segment::{col, Columns};
use iodump_format::text::text_string;
use iodump_format::{Damage, DamageKind, DevT, EventBatch, Header, Op, Reader, SegmentDecoder};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use crate::files::{FileIdentities, FileNames};
use crate::layout::{self, IntColumn};
use crate::parquet_input::{
    arrow_col, cgroups_table, devices_table, files_table, parquet_files, parquet_filter_columns,
    parquet_filter_mask, parquet_lost_events, processes_table,
};
use crate::{parquet_read_error, AnalyzeError};

/// Id of a path, thread or device that the dataset's tables do not know.
const UNKNOWN: u32 = u32::MAX;

/// Set in a re-keyed cgroup id that the dataset's `cgroups` table does not know, above the
/// id the recording gave it (re-keyed known ids are small: their index + 1).
const UNKNOWN_CGROUP: u64 = 1 << 63;

/// One input of a query: a trace, or a Parquet dataset read as one trace.
pub(crate) struct Source {
    /// The trace's file name (the dataset's directory name).
    pub name: String,
    src: Src,
    /// Its files by identity (device and inode), over its path ids.
    files: FileIdentities,
}

enum Src {
    Trace {
        reader: Reader,
        devs: HashMap<u32, String>,
        /// tid → (comm, command line or comm).
        comm: HashMap<u32, (String, String)>,
    },
    Parquet(ParquetSet),
}

impl Source {
    /// Opens a trace (a file, or a recording's parts as one), or the dataset `iodump convert`
    /// wrote into a directory.
    pub fn open(p: &InputPath) -> Result<Source, AnalyzeError> {
        let src = if let InputPath::Parquet(dir) = p {
            Src::Parquet(ParquetSet::open(dir)?)
        } else {
            let reader = p.open_trace()?;
            let devs = reader.tables().device_names();
            let comm = reader
                .tables()
                .processes()
                .map(|pr| {
                    let args = text_string(pr.args_or_comm());
                    (pr.tid, (text_string(&pr.comm), args))
                })
                .collect();
            Src::Trace { reader, devs, comm }
        };
        let files = match &src {
            Src::Trace { reader, .. } => {
                let t = reader.tables();
                FileIdentities::new(
                    t.paths()
                        .map(|e| (e.path_id, u64::from(e.dev.0), e.inode, e.generation)),
                    |id| {
                        t.path(id)
                            .map_or_else(String::new, |e| text_string(&e.path))
                    },
                )
            }
            Src::Parquet(s) => FileIdentities::new(
                s.file_ids
                    .iter()
                    .enumerate()
                    .map(|(i, &(dev, ino, generation))| (i as u32, dev, ino, generation)),
                |id| s.paths[id as usize].clone(),
            ),
        };
        Ok(Source {
            name: p.name(),
            src,
            files,
        })
    }

    /// Units (segments, row groups) to read.
    pub fn units(&self) -> usize {
        match &self.src {
            Src::Trace { reader, .. } => reader.segments().len(),
            Src::Parquet(s) => s.units.len(),
        }
    }

    /// True when reading the input again for a few columns is cheap (a trace, whose columns
    /// are compressed apart); a dataset's row groups are decompressed again page by page.
    pub fn projects(&self) -> bool {
        matches!(self.src, Src::Trace { .. })
    }

    /// Rows of all units, as announced by the input's index (for progress).
    pub fn announced_rows(&self) -> u64 {
        match &self.src {
            Src::Trace { reader, .. } => reader.announced_events(),
            Src::Parquet(s) => s.rows,
        }
    }

    /// Reads unit `i` into `b` and puts the indices of the rows `filter` keeps in `keep`;
    /// returns their UTC time range. Only the columns `want` are read (and the timestamps,
    /// when a trace's footer does not give their range), and those the filter reads
    /// ([`Expr::columns`], [`parquet_filter_columns`]): `b`'s other columns are empty.
    pub fn load(
        &self,
        i: usize,
        b: &mut EventBatch,
        dec: &mut SegmentDecoder,
        keep: &mut Vec<u32>,
        filter: Option<&Expr>,
        want: Columns,
    ) -> Result<Option<(i64, i64)>, Damage> {
        keep.clear();
        match &self.src {
            Src::Trace { reader, devs, .. } => {
                // Without a filter every row is kept, and the footer's smallest and largest
                // timestamp of the segment (when the trace has a footer) are its rows' time
                // range: the timestamps are decoded only when the query reads them.
                // A segment the filter's time window leaves out is not decoded.
                let footer_range = filter
                    .is_none()
                    .then(|| reader.segments().get(i).and_then(|s| s.time_range_ns))
                    .flatten();
                let want = match footer_range {
                    Some(_) => want,
                    None => want.union(Columns::of(&[col::TIMESTAMP_NS])),
                };
                match crate::intact::read_kept(reader, i, filter, devs, want, b, dec, keep) {
                    None => return Ok(None),
                    Some(read) => read?,
                }
                if let Some((first, last)) = footer_range {
                    let h = reader.header();
                    let (a, z) = (h.to_utc_ns(first), h.to_utc_ns(last));
                    return Ok((!keep.is_empty()).then_some((a.min(z), a.max(z))));
                }
            }
            Src::Parquet(s) => s.load(i, b, keep, filter, want).map_err(|e| Damage {
                offset: 0,
                chunk: Some("parquet row group"),
                kind: DamageKind::Unreadable {
                    // The message names the file already.
                    message: match e {
                        AnalyzeError::Query { message } => {
                            format!("row group {} of {message}", s.units[i].1)
                        }
                        e @ AnalyzeError::ReadParquet { .. } => {
                            format!("row group {} of {e}", s.units[i].1)
                        }
                        other => format!("row group {}: {other}", s.units[i].1),
                    },
                },
            })?,
        }
        let h = self.header();
        Ok(keep.iter().fold(None, |acc: Option<(i64, i64)>, &k| {
            let ts = h.to_utc_ns(b.timestamp_ns[k as usize]);
            Some(acc.map_or((ts, ts), |(a, z)| (a.min(ts), z.max(ts))))
        }))
    }

    /// The stacked devices of the input's device table (LVM, dm-crypt, md, an NVMe multipath
    /// head: entries stacked on others), as the batches number them, that have an I/O
    /// `filter` keeps; sorted, empty when the table has none (for a trace:
    /// [`crate::intact::stacked_devices_with_rows`]). Units are read until each is found.
    pub fn stacked_with_rows(&self, filter: Option<&Expr>) -> Vec<u32> {
        let s = match &self.src {
            Src::Trace { reader, devs, .. } => {
                return crate::intact::stacked_devices_with_rows(reader, filter, devs)
            }
            Src::Parquet(s) => s,
        };
        // Those the filter's device comparisons rule out (`-d` of a disk below) have none.
        let stacked: Vec<u32> = (s.stacked.iter().copied())
            .filter(|&id| {
                let id = id as usize;
                filter.is_none_or(|f| f.may_keep_device(s.dev_numbers[id], &s.dev_names[id]))
            })
            .collect();
        let want = Columns::of(&[col::DEV]);
        let init = || (EventBatch::default(), SegmentDecoder::new(), Vec::new());
        crate::intact::stacked_with_rows(
            self.units(),
            &stacked,
            init,
            |(b, dec, keep), i, missing, found| {
                if self.load(i, b, dec, keep, filter, want).is_ok() {
                    for &k in keep.iter() {
                        let d = b.dev[k as usize];
                        if missing.binary_search(&d).is_ok() && !found.contains(&d) {
                            found.push(d);
                        }
                    }
                }
            },
        )
    }

    /// The clock that turns the batch's timestamps into UTC.
    pub fn header(&self) -> &Header {
        match &self.src {
            Src::Trace { reader, .. } => reader.header(),
            Src::Parquet(s) => &s.header,
        }
    }

    /// The path (or label) of a path id.
    pub fn path(&self, id: u32) -> Option<String> {
        match &self.src {
            Src::Trace { reader, .. } => reader.tables().path(id).map(|p| text_string(&p.path)),
            Src::Parquet(s) => s.paths.get(id as usize).cloned(),
        }
    }

    /// The names of the traces this input holds: its own file name, or the traces of a
    /// Parquet dataset.
    pub fn trace_names(&self) -> Vec<&str> {
        match &self.src {
            Src::Trace { .. } => vec![self.name.as_str()],
            Src::Parquet(s) => s.trace_names.iter().map(String::as_str).collect(),
        }
    }

    /// The trace a path id is from (a dataset's name for an id its tables do not know).
    pub fn trace_of_path(&self, id: u32) -> &str {
        match &self.src {
            Src::Parquet(s) => s.trace_name(s.path_trace.get(id as usize), &self.name),
            Src::Trace { .. } => &self.name,
        }
    }

    /// The trace a thread is from (a dataset's name for a thread its tables do not know).
    pub fn trace_of_tid(&self, tid: u32) -> &str {
        match &self.src {
            Src::Parquet(s) => s.trace_name(s.tid_trace.get(tid as usize), &self.name),
            Src::Trace { .. } => &self.name,
        }
    }

    /// The file key of a path id: the same for every name of one file (see
    /// [`FileIdentities::key`]); its [`Source::path`] is the file's latest name.
    pub fn file_key(&self, path_id: u32) -> u32 {
        self.files.key(path_id)
    }

    /// The other names of the file with this key, when it had any.
    pub fn renamed(&self, key: u32) -> Option<&FileNames> {
        self.files.renamed(key)
    }

    /// The name of a device.
    pub fn device(&self, dev: u32) -> Option<String> {
        match &self.src {
            Src::Trace { reader, .. } => reader.tables().device(DevT(dev)).map(|d| d.name.clone()),
            Src::Parquet(s) => s.dev_names.get(dev as usize).cloned(),
        }
    }

    /// The latest command name of a thread.
    pub fn comm(&self, tid: u32) -> Option<&String> {
        self.names(tid).map(|n| &n.0)
    }

    /// The command line of a thread's process as of its latest entry (its comm when the
    /// trace does not know it).
    pub fn args(&self, tid: u32) -> Option<&String> {
        self.names(tid).map(|n| &n.1)
    }

    fn names(&self, tid: u32) -> Option<&(String, String)> {
        match &self.src {
            Src::Trace { comm, .. } => comm.get(&tid),
            Src::Parquet(s) => s.comms.get(tid as usize),
        }
    }

    /// The cgroups table's entry of a cgroup id as the batches carry it (traces of format 1.2
    /// and later; a Parquet dataset's `cgroups` table, its ids re-keyed).
    pub fn cgroup(&self, id: u64) -> Option<&iodump_format::cgroup::Cgroup> {
        match &self.src {
            Src::Trace { reader, .. } => reader.tables().cgroup(id),
            Src::Parquet(s) => id
                .checked_sub(1)
                .and_then(|i| s.cgroups.get(usize::try_from(i).ok()?)),
        }
    }

    /// The id the recording gave a cgroup id of the batches that [`Source::cgroup`] does not
    /// know (to name it).
    pub fn recorded_cgroup_id(&self, id: u64) -> u64 {
        match &self.src {
            Src::Trace { .. } => id,
            Src::Parquet(_) => id & !UNKNOWN_CGROUP,
        }
    }

    /// True for a trace with a cgroups table, or a dataset whose `cgroups` table has rows.
    pub fn has_cgroup_table(&self) -> bool {
        match &self.src {
            Src::Trace { reader, .. } => reader.tables().has_cgroup_table(),
            Src::Parquet(s) => !s.cgroups.is_empty(),
        }
    }

    /// Events the recorder lost (loss records, or the `losses` table).
    pub fn lost_events(&self) -> u64 {
        match &self.src {
            Src::Trace { reader, .. } => reader.lost_events(),
            Src::Parquet(s) => s.lost,
        }
    }

    /// Damage found while opening (a trace's unreadable chunks).
    pub fn damage(&self) -> Vec<Damage> {
        match &self.src {
            Src::Trace { reader, .. } => reader.damage().to_vec(),
            Src::Parquet(_) => Vec::new(),
        }
    }
}

/// A Parquet dataset of `iodump convert`: its `io` row groups and its small tables, re-keyed.
struct ParquetSet {
    /// (io file, row group).
    units: Vec<(PathBuf, usize)>,
    rows: u64,
    /// Timestamps in batches are UTC already: a clock with both origins at zero.
    header: Header,
    traces: HashMap<String, u32>,
    /// The traces' names, by index (sorted).
    trace_names: Vec<String>,
    /// Re-keyed path id → index of its trace; re-keyed tid → index of its trace.
    path_trace: Vec<u32>,
    tid_trace: Vec<u32>,
    /// (trace << 32 | path id) → id; id → path, and (trace << 32 | device, inode) (the
    /// file's identity within the dataset).
    path_ids: IntMap<u64, u32>,
    paths: Vec<String>,
    file_ids: Vec<(u64, u64, Option<u32>)>,
    /// (trace << 32 | tid) → id; id → (comm, command line or comm).
    tids: IntMap<u64, u32>,
    comms: Vec<(String, String)>,
    /// (trace, dev_t text); the index is the id. Devices are few: searched, not hashed, so a
    /// lookup borrows the row's text.
    devs: Vec<(u32, String)>,
    dev_names: Vec<String>,
    /// id → device number.
    dev_numbers: Vec<DevT>,
    /// The ids of the stacked devices of the `devices` table (LVM, dm-crypt, md, an NVMe
    /// multipath head: entries stacked on others), sorted.
    stacked: Vec<u32>,
    /// (trace, cgroup id) → re-keyed id (index in `cgroups` + 1; 0 stays 0: no cgroup).
    cgroup_ids: HashMap<(u32, u64), u64>,
    cgroups: Vec<iodump_format::cgroup::Cgroup>,
    lost: u64,
}

/// The `io` columns the one-pass queries read, with the trace column ids they fill (a
/// query reads those of the ids it wants, all of them when a filter needs the rest); the
/// `trace` column and the time ([`layout::utc_ns_column`]) are always read.
const IO_COLUMNS: [(&str, u64); 11] = [
    ("dev_t", col::DEV),
    ("sector", col::SECTOR),
    ("bytes", col::BYTES),
    ("op", col::OP),
    ("pid", col::PID),
    ("tid", col::TID),
    ("path_id", col::PATH_ID),
    ("queue_ns", col::QUEUE_NS),
    ("latency_ns", col::LATENCY_NS),
    ("cgroup_id", col::CGROUP_ID),
    ("upper_dev", col::UPPER_DEV),
];

impl ParquetSet {
    /// The row groups of the `io` table under `dir`, as (file, row group), and their rows.
    fn io_units(dir: &Path) -> Result<(Vec<(PathBuf, usize)>, u64), AnalyzeError> {
        let io_files = parquet_files(dir, "io");
        if io_files.is_empty() {
            return Err(AnalyzeError::Query {
                message: format!("{}: no io table (io.parquet or io/)", dir.display()),
            });
        }
        let mut units = Vec::new();
        let mut rows = 0u64;
        for f in io_files {
            let file = File::open(&f).map_err(parquet_read_error(&f))?;
            let b =
                ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_read_error(&f))?;
            layout::check(&f, b.metadata().file_metadata())?;
            for (i, rg) in b.metadata().row_groups().iter().enumerate() {
                rows += rg.num_rows() as u64;
                units.push((f.clone(), i));
            }
        }
        Ok((units, rows))
    }

    fn open(dir: &Path) -> Result<ParquetSet, AnalyzeError> {
        let (units, rows) = ParquetSet::io_units(dir)?;
        let mut files = files_table(dir)?;
        let procs = processes_table(dir)?;
        let devices = devices_table(dir)?;
        let lost = parquet_lost_events(dir)?;
        let cgroup_rows = cgroups_table(dir)?;
        let mut names: Vec<&String> = files
            .iter()
            .map(|f| &f.trace)
            .chain(procs.iter().map(|p| &p.trace))
            .chain(devices.iter().map(|d| &d.trace))
            .chain(cgroup_rows.iter().map(|c| &c.trace))
            .collect();
        names.sort();
        names.dedup();
        let trace_names: Vec<String> = names.into_iter().cloned().collect();
        let traces: HashMap<String, u32> = trace_names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i as u32))
            .collect();
        let key = |t: &str, k: u32| u64::from(traces[t]) << 32 | u64::from(k);
        // Path ids in (trace name, path id) order, so that ties ranked by id keep that order.
        files.sort_by(|a, b| (&a.trace, a.path_id).cmp(&(&b.trace, b.path_id)));
        let mut path_ids = IntMap::default();
        let mut paths = Vec::with_capacity(files.len());
        let mut file_ids = Vec::with_capacity(files.len());
        let mut path_trace = Vec::with_capacity(files.len());
        for f in files {
            path_ids.insert(key(&f.trace, f.path_id), paths.len() as u32);
            paths.push(f.path);
            file_ids.push((
                u64::from(traces[&f.trace]) << 32 | u64::from(f.dev),
                f.inode,
                f.generation,
            ));
            path_trace.push(traces[&f.trace]);
        }
        let mut tids = IntMap::default();
        let mut comms = Vec::with_capacity(procs.len());
        let mut tid_trace = Vec::with_capacity(procs.len());
        for p in procs {
            tids.insert(key(&p.trace, p.tid), comms.len() as u32);
            comms.push((p.comm, p.args));
            tid_trace.push(traces[&p.trace]);
        }
        let stacked: Vec<u32> = (devices.iter().enumerate())
            .filter(|(_, d)| d.stacked)
            .map(|(i, _)| i as u32)
            .collect();
        let dev_numbers = devices.iter().map(|d| d.number).collect();
        let (devs, dev_names) = devices
            .into_iter()
            .map(|d| ((traces[&d.trace], d.dev_t), d.name))
            .unzip();
        let mut cgroup_ids = HashMap::new();
        let mut cgroups = Vec::with_capacity(cgroup_rows.len());
        for c in cgroup_rows {
            let at = (traces[&c.trace], c.cgroup.id);
            if c.cgroup.id != 0 && !cgroup_ids.contains_key(&at) {
                cgroups.push(c.cgroup);
                cgroup_ids.insert(at, cgroups.len() as u64);
            }
        }
        Ok(ParquetSet {
            units,
            rows,
            header: Header::default(),
            traces,
            trace_names,
            path_ids,
            paths,
            file_ids,
            path_trace,
            tids,
            comms,
            tid_trace,
            devs,
            dev_names,
            dev_numbers,
            stacked,
            cgroup_ids,
            cgroups,
            lost,
        })
    }

    /// The name of trace `i`, or `or` when there is none.
    fn trace_name<'a>(&'a self, i: Option<&u32>, or: &'a str) -> &'a str {
        i.and_then(|&i| self.trace_names.get(i as usize))
            .map_or(or, String::as_str)
    }

    /// Reads row group `i` into `b`, re-keyed; `keep` gets the rows `filter` accepts. Without
    /// a filter only the columns `want` needs are read (and filled in `b`), as from a trace.
    fn load(
        &self,
        i: usize,
        b: &mut EventBatch,
        keep: &mut Vec<u32>,
        filter: Option<&Expr>,
        want: Columns,
    ) -> Result<(), AnalyzeError> {
        let (path, rg) = &self.units[i];
        b.clear();
        let file = File::open(path).map_err(parquet_read_error(path))?;
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_read_error(path))?;
        // The columns the query reads, and those the filter reads.
        let want = want.needed();
        let ts = layout::utc_ns_column(builder.schema());
        let cols = IO_COLUMNS
            .iter()
            .filter(|(_, id)| want.contains(*id))
            .map(|(name, _)| *name)
            .chain(["trace", ts])
            .chain(filter.map(parquet_filter_columns).unwrap_or_default());
        let mask = ProjectionMask::columns(builder.parquet_schema(), cols);
        let builder = builder.with_projection(mask);
        let reader = builder
            .with_row_groups(vec![*rg])
            .build()
            .map_err(parquet_read_error(path))?;
        let ops: Vec<(&str, u8)> = Op::ALL.iter().map(|o| (o.name(), o.code())).collect();
        for batch in reader {
            let batch = batch.map_err(parquet_read_error(path))?;
            let cgroup_of = |trace: &str, id: u64| {
                let t = *self.traces.get(trace)?;
                let k = *self.cgroup_ids.get(&(t, id))?;
                self.cgroups.get(usize::try_from(k - 1).ok()?)
            };
            let mask = filter
                .map(|f| parquet_filter_mask(&batch, f, &cgroup_of, path))
                .transpose()?;
            self.append(&batch, b, &ops, want)?;
            let base = b.len() - batch.num_rows();
            match mask {
                None => keep.extend(base as u32..b.len() as u32),
                Some(m) => keep.extend(
                    m.iter()
                        .enumerate()
                        .filter(|(_, &k)| k)
                        .map(|(r, _)| (base + r) as u32),
                ),
            }
        }
        Ok(())
    }

    /// Appends the `upper_dev` of a batch's rows (added to `b` after its first `before`) as
    /// re-keyed device ids: a name of the row's trace's `devices` table, null when the row
    /// has none (`upper` is `None` when the batch has no such column).
    fn append_upper(
        &self,
        trace: &StringArray,
        upper: Option<&StringArray>,
        b: &mut EventBatch,
        before: usize,
    ) {
        let n = trace.len();
        let u = &mut b.upper_dev;
        let Some(upper) = upper.filter(|a| a.null_count() < a.len()) else {
            (u.valid.get_or_insert_with(|| vec![true; before])).resize(before + n, false);
            u.values.resize(before + n, 0);
            return;
        };
        let valid = u.valid.get_or_insert_with(|| vec![true; before]);
        // (trace, name, id) of the previous row with an upper I/O.
        let mut last: (&str, &str, u32) = ("\0", "\0", UNKNOWN);
        for i in 0..n {
            if upper.is_null(i) {
                valid.push(false);
                u.values.push(0);
                continue;
            }
            let (t, name) = (trace.value(i), upper.value(i));
            if (t, name) != (last.0, last.1) {
                let ti = self.traces.get(t).copied().unwrap_or(UNKNOWN);
                let id = (self.devs.iter().zip(&self.dev_names))
                    .position(|((dt, _), dn)| *dt == ti && dn == name)
                    .map_or(UNKNOWN, |p| p as u32);
                last = (t, name, id);
            }
            valid.push(true);
            u.values.push(last.2);
        }
    }

    /// Appends the rows of one `io` batch to `b`: the time, and the columns of `want` (the
    /// others stay empty).
    fn append(
        &self,
        batch: &RecordBatch,
        b: &mut EventBatch,
        ops: &[(&str, u8)],
        want: Columns,
    ) -> Result<(), AnalyzeError> {
        let s = |id, n| {
            want.contains(id)
                .then(|| arrow_col::<StringArray>(batch, n))
                .transpose()
        };
        let trace = arrow_col::<StringArray>(batch, "trace")?;
        let (dev_t, op) = (s(col::DEV, "dev_t")?, s(col::OP, "op")?);
        let ts = layout::utc_ns(batch)?;
        let int = |id, n| {
            want.contains(id)
                .then(|| IntColumn::of(batch, n))
                .transpose()
        };
        let (sector, bytes) = (int(col::SECTOR, "sector")?, int(col::BYTES, "bytes")?);
        let (pid, tid) = (int(col::PID, "pid")?, int(col::TID, "tid")?);
        let path_id = int(col::PATH_ID, "path_id")?;
        let (queue, latency) = (
            int(col::QUEUE_NS, "queue_ns")?,
            int(col::LATENCY_NS, "latency_ns")?,
        );
        // Absent from datasets written before iodump recorded cgroups: no cgroup (0).
        let cgroup = want
            .contains(col::CGROUP_ID)
            .then(|| {
                batch
                    .column_by_name("cgroup_id")
                    .map(|_| IntColumn::of(batch, "cgroup_id"))
            })
            .map(Option::transpose)
            .transpose()?;
        // Absent from datasets written before format 1.4: no upper I/O (null).
        let upper = want
            .contains(col::UPPER_DEV)
            .then(|| {
                batch
                    .column_by_name("upper_dev")
                    .map(|_| arrow_col::<StringArray>(batch, "upper_dev"))
            })
            .flatten()
            .transpose()?;
        let n = batch.num_rows();
        let before = b.len();
        b.rows += n;
        b.timestamp_ns.extend(ts.iter().map(|&t| t as u64));
        if let Some(c) = sector {
            c.extend_u64(&mut b.sector);
        }
        if let Some(c) = bytes {
            c.extend_u32(&mut b.bytes);
        }
        if let Some(c) = pid {
            c.extend_u32(&mut b.pid);
        }
        if let Some(c) = latency {
            c.extend_u64(&mut b.latency_ns);
        }
        // Queue times: nullable (bio-based devices have none).
        if let Some(queue) = queue {
            if queue.null_count() > 0 || b.queue_ns.valid.is_some() {
                let valid = b.queue_ns.valid.get_or_insert_with(|| vec![true; before]);
                valid.extend((0..n).map(|i| !queue.is_null(i)));
            }
            queue.extend_u64(&mut b.queue_ns.values);
        }
        if let Some(None) = cgroup {
            b.cgroup_id.resize(b.cgroup_id.len() + n, 0);
        }
        let cgroup = cgroup.flatten();
        if want.contains(col::UPPER_DEV) {
            self.append_upper(trace, upper, b, before);
        }
        if dev_t.is_none() && op.is_none() && path_id.is_none() && tid.is_none() && cgroup.is_none()
        {
            return Ok(());
        }
        // Re-keyed ids; the text columns repeat, so each row compares with the previous one.
        let mut last_trace: (&str, u32) = ("\0", UNKNOWN);
        let mut last_dev: (&str, u32, u32) = ("\0", UNKNOWN, UNKNOWN);
        let mut last_op: (&str, u8) = ("\0", Op::Other.code());
        // (trace, recorded cgroup id, re-keyed id) of the previous row.
        let mut last_cgroup: (u32, u64, u64) = (UNKNOWN, 0, 0);
        for i in 0..n {
            let t = trace.value(i);
            if t != last_trace.0 {
                last_trace = (t, self.traces.get(t).copied().unwrap_or(UNKNOWN));
            }
            let ti = last_trace.1;
            if let Some(dev_t) = dev_t {
                let d = dev_t.value(i);
                if d != last_dev.0 || ti != last_dev.1 {
                    let id = self
                        .devs
                        .iter()
                        .position(|(t, x)| *t == ti && x == d)
                        .map_or(UNKNOWN, |p| p as u32);
                    last_dev = (d, ti, id);
                }
                b.dev.push(last_dev.2);
            }
            if let Some(op) = op {
                let o = op.value(i);
                if o != last_op.0 {
                    let code = ops
                        .iter()
                        .find(|x| x.0 == o)
                        .map_or(Op::Other.code(), |x| x.1);
                    last_op = (o, code);
                }
                b.op.push(last_op.1);
            }
            // A trace's own id, as this dataset numbers it.
            let rekey = |ids: &IntMap<u64, u32>, id: u32| {
                let key = u64::from(ti) << 32 | u64::from(id);
                ids.get(&key).copied().unwrap_or(UNKNOWN)
            };
            if let Some(path_id) = &path_id {
                b.path_id.push(rekey(&self.path_ids, path_id.u32(i)));
            }
            if let Some(tid) = &tid {
                b.tid.push(rekey(&self.tids, tid.u32(i)));
            }
            if let Some(cgroup) = &cgroup {
                let id = cgroup.u64(i);
                if (ti, id) != (last_cgroup.0, last_cgroup.1) {
                    let k = match self.cgroup_ids.get(&(ti, id)) {
                        Some(&k) => k,
                        None if id == 0 => 0,
                        None => id | UNKNOWN_CGROUP,
                    };
                    last_cgroup = (ti, id, k);
                }
                b.cgroup_id.push(last_cgroup.2);
            }
        }
        Ok(())
    }
}
