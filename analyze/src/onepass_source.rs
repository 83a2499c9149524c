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

use arrow_array::RecordBatch;
use iodump_format::expr::Expr;

use crate::input::InputPath;
use iodump_format::inthash::IntMap;
use iodump_format::segment::{col, Columns};
use iodump_format::text::text_string;
use iodump_format::{Damage, DamageKind, DevT, EventBatch, Header, Op, Reader, SegmentDecoder};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;

use crate::files::{FileIdentities, FileNames};
use crate::grouping::DenseSlots;
use crate::layout::{self, IntColumn};
use crate::parquet_input::{
    cgroups_table, check_no_nulls, check_no_nulls_in_footer, devices_table, files_table,
    io_reader_metadata, parquet_files, parquet_filter_columns, parquet_filter_key_columns,
    parquet_filter_mask, parquet_lost_events, processes_table, TextCol, TraceTables,
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
            Src::Parquet(s) => match s.load(i, b, keep, filter, want) {
                // Without a filter every row is kept: the row group's statistics give their
                // time range, and the timestamps were read only if the query reads them.
                Ok(Some(range)) => return Ok((!keep.is_empty()).then_some(range)),
                Ok(None) => {}
                Err(e) => return Err(Self::parquet_damage(s, i, e)),
            },
        }
        let h = self.header();
        Ok(keep.iter().fold(None, |acc: Option<(i64, i64)>, &k| {
            let ts = h.to_utc_ns(b.timestamp_ns[k as usize]);
            Some(acc.map_or((ts, ts), |(a, z)| (a.min(ts), z.max(ts))))
        }))
    }

    /// The damage of Parquet unit `i` that `e` made unreadable.
    fn parquet_damage(s: &ParquetSet, i: usize, e: AnalyzeError) -> Damage {
        Damage {
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
        }
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

    /// The path of a path id as iodump shows it: a deleted file's followed by ` (deleted)`
    /// ([`iodump_format::PathEntry::shown`]).
    pub fn shown_path(&self, id: u32) -> Option<String> {
        match &self.src {
            Src::Trace { reader, .. } => reader.tables().path(id).map(|p| text_string(&p.shown())),
            Src::Parquet(s) => s
                .paths
                .get(id as usize)
                .map(|p| match s.deleted[id as usize] {
                    true => format!("{p}{}", iodump_format::DELETED_SUFFIX_TEXT),
                    false => p.clone(),
                }),
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

    /// The name of the device of the file system a path entry is on (its `major:minor` when
    /// the device table does not name it); `None` for an id the path table does not know.
    pub fn path_device(&self, id: u32) -> Option<String> {
        let (dev, name) = match &self.src {
            Src::Trace { reader, .. } => {
                let dev = reader.tables().path(id)?.dev;
                (dev, reader.tables().device(dev).map(|d| d.name.clone()))
            }
            Src::Parquet(s) => {
                let at = s.file_ids.get(id as usize)?.0;
                let (trace, dev) = ((at >> 32) as u32, DevT(at as u32));
                let i = (s.devs.iter().zip(&s.dev_numbers))
                    .position(|((t, _), n)| *t == trace && *n == dev);
                (dev, i.map(|i| s.dev_names[i].clone()))
            }
        };
        Some(name.unwrap_or_else(|| format!("{}:{}", dev.major(), dev.minor())))
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
    /// (io file, row group, index of the file's metadata in `metas`).
    units: Vec<(PathBuf, usize, usize)>,
    /// Each io file's metadata, read once ([`io_reader_metadata`]).
    metas: Vec<ArrowReaderMetadata>,
    rows: u64,
    /// Timestamps in batches are UTC already: a clock with both origins at zero.
    header: Header,
    traces: HashMap<String, u32>,
    /// The traces' names, by index (sorted).
    trace_names: Vec<String>,
    /// Re-keyed path id → index of its trace; re-keyed tid → index of its trace.
    path_trace: Vec<u32>,
    tid_trace: Vec<u32>,
    /// (trace, path id) → id; id → path, and (trace << 32 | device, inode) (the file's
    /// identity within the dataset).
    path_ids: Rekey,
    paths: Vec<String>,
    /// id → the file was unlinked when its path was taken.
    deleted: Vec<bool>,
    file_ids: Vec<(u64, u64, Option<u32>)>,
    /// (trace, tid) → id; id → (comm, command line or comm).
    tids: Rekey,
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

/// Rows per record batch read from a dataset's `io` row groups (the reader's default, 1,024,
/// pays its per-batch costs a thousand times per row group of `iodump convert`).
const PARQUET_BATCH_ROWS: usize = 8_192;

/// A trace's own ids (path ids, thread ids) as a dataset numbers them: by trace, through
/// [`DenseSlots`] (no hashing for the ids a trace numbers densely), hashed above them.
#[derive(Default)]
struct Rekey {
    /// By trace index: the dataset's id of each of the trace's ids.
    dense: Vec<DenseSlots>,
    /// (trace << 32 | id) → id, for ids [`DenseSlots`] does not hold.
    sparse: IntMap<u64, u32>,
}

impl Rekey {
    /// The dataset's ids of `(trace index, the trace's id)`, numbered in their order (an id
    /// given twice: the later one).
    fn new(keys: impl IntoIterator<Item = (u32, u32)>) -> Rekey {
        let mut r = Rekey::default();
        for (i, (t, id)) in keys.into_iter().enumerate() {
            let t = t as usize;
            if r.dense.len() <= t {
                r.dense.resize_with(t + 1, DenseSlots::default);
            }
            match r.dense[t].slot(id) {
                Some(slot) => *slot = i as u32,
                None => {
                    r.sparse.insert((t as u64) << 32 | u64::from(id), i as u32);
                }
            }
        }
        r
    }

    /// The dataset's id of id `id` of trace `t` (`UNKNOWN` when it has none).
    #[inline]
    fn get(&self, t: u32, id: u32) -> u32 {
        match self.dense.get(t as usize).and_then(|d| d.get(id)) {
            Some(i) => i,
            None => self
                .sparse
                .get(&(u64::from(t) << 32 | u64::from(id)))
                .copied()
                .unwrap_or(UNKNOWN),
        }
    }
}

impl ParquetSet {
    /// The row groups of the `io` table under `dir`, as (file, row group, file index), their
    /// rows, and each file's metadata.
    #[allow(clippy::type_complexity)]
    fn io_units(
        dir: &Path,
    ) -> Result<(Vec<(PathBuf, usize, usize)>, u64, Vec<ArrowReaderMetadata>), AnalyzeError> {
        let io_files = parquet_files(dir, "io");
        if !crate::parquet_input::has_table(dir, "io") {
            return Err(AnalyzeError::Query {
                message: format!("{}: no io table (io.parquet or io/)", dir.display()),
            });
        }
        let (mut units, mut metas) = (Vec::new(), Vec::new());
        let mut rows = 0u64;
        for f in io_files {
            let file = File::open(&f).map_err(parquet_read_error(&f))?;
            let m = io_reader_metadata(&file).map_err(parquet_read_error(&f))?;
            layout::check(&f, m.metadata().file_metadata())?;
            for (i, rg) in m.metadata().row_groups().iter().enumerate() {
                rows += rg.num_rows() as u64;
                units.push((f.clone(), i, metas.len()));
            }
            metas.push(m);
        }
        Ok((units, rows, metas))
    }

    fn open(dir: &Path) -> Result<ParquetSet, AnalyzeError> {
        let (units, rows, metas) = ParquetSet::io_units(dir)?;
        // I/O of a trace a small table lacks would count as of no file or process.
        let known = TraceTables::load(dir)?;
        for (path, rg, meta) in &units {
            if *rg == 0 {
                known.check_io_file(path, metas[*meta].metadata())?;
                check_no_nulls_in_footer(path, metas[*meta].metadata())?;
            }
        }
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
        // Path ids in (trace name, path id) order, so that ties ranked by id keep that order.
        files.sort_by(|a, b| (&a.trace, a.path_id).cmp(&(&b.trace, b.path_id)));
        let path_ids = Rekey::new(files.iter().map(|f| (traces[&f.trace], f.path_id)));
        let mut paths = Vec::with_capacity(files.len());
        let mut file_ids = Vec::with_capacity(files.len());
        let mut path_trace = Vec::with_capacity(files.len());
        let mut deleted = Vec::with_capacity(files.len());
        for f in files {
            paths.push(f.path);
            deleted.push(f.deleted);
            file_ids.push((
                u64::from(traces[&f.trace]) << 32 | u64::from(f.dev),
                f.inode,
                f.generation,
            ));
            path_trace.push(traces[&f.trace]);
        }
        let tids = Rekey::new(procs.iter().map(|p| (traces[&p.trace], p.tid)));
        let mut comms = Vec::with_capacity(procs.len());
        let mut tid_trace = Vec::with_capacity(procs.len());
        for p in procs {
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
            metas,
            rows,
            header: Header::default(),
            traces,
            trace_names,
            path_ids,
            paths,
            deleted,
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
    /// a filter only the columns `want` needs are read (and filled in `b`), as from a trace,
    /// and the row group's time range is returned from its statistics when it has them (the
    /// timestamps are then read only if `want` has them); otherwise `None`, and the
    /// timestamps are in `b`.
    fn load(
        &self,
        i: usize,
        b: &mut EventBatch,
        keep: &mut Vec<u32>,
        filter: Option<&Expr>,
        want: Columns,
    ) -> Result<Option<(i64, i64)>, AnalyzeError> {
        let (path, rg, meta) = &self.units[i];
        b.clear();
        let file = File::open(path).map_err(parquet_read_error(path))?;
        let builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.metas[*meta].clone());
        // The columns the query reads, and those the filter reads.
        let want = want.needed();
        let ts = layout::utc_ns_column(builder.schema());
        let range = filter
            .is_none()
            .then(|| layout::utc_ns_range(builder.metadata(), *rg, ts))
            .flatten();
        let read_ts = range.is_none() || want.contains(col::TIMESTAMP_NS);
        let cols = IO_COLUMNS
            .iter()
            .filter(|(_, id)| want.contains(*id))
            .map(|(name, _)| *name)
            .chain(["trace"])
            .chain(read_ts.then_some(ts))
            .chain(filter.map(parquet_filter_columns).unwrap_or_default())
            .chain(filter.map(parquet_filter_key_columns).unwrap_or_default());
        let mask = ProjectionMask::columns(builder.parquet_schema(), cols);
        let builder = builder.with_projection(mask);
        let reader = builder
            .with_row_groups(vec![*rg])
            .with_batch_size(PARQUET_BATCH_ROWS)
            .build()
            .map_err(parquet_read_error(path))?;
        let ops: Vec<(&str, u8)> = Op::ALL.iter().map(|o| (o.name(), o.code())).collect();
        for batch in reader {
            let batch = batch.map_err(parquet_read_error(path))?;
            check_no_nulls(&batch, path)?;
            let cgroup_of = |trace: &str, id: u64| {
                let t = *self.traces.get(trace)?;
                let k = *self.cgroup_ids.get(&(t, id))?;
                self.cgroups.get(usize::try_from(k - 1).ok()?)
            };
            let mask = filter
                .map(|f| parquet_filter_mask(&batch, f, &cgroup_of, path))
                .transpose()?;
            self.append(&batch, b, &ops, want, read_ts)?;
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
        Ok(range)
    }

    /// Appends the `upper_dev` of a batch's rows (added to `b` after its first `before`) as
    /// re-keyed device ids: a name of the row's trace's `devices` table, null when the row
    /// has none (`upper` is `None` when the batch has no such column); `ti`: each row's trace
    /// index.
    fn append_upper(
        &self,
        ti: &[u32],
        upper: Option<TextCol<'_>>,
        b: &mut EventBatch,
        before: usize,
    ) {
        let n = ti.len();
        let u = &mut b.upper_dev;
        let Some(upper) = upper.filter(|a| !a.all_null()) else {
            (u.valid.get_or_insert_with(|| vec![true; before])).resize(before + n, false);
            u.values.resize(before + n, 0);
            return;
        };
        let valid = u.valid.get_or_insert_with(|| vec![true; before]);
        // The id of the previous row with an upper I/O, and that row.
        let mut last: Option<(usize, u32)> = None;
        for i in 0..n {
            if upper.is_null(i) {
                valid.push(false);
                u.values.push(0);
                continue;
            }
            let id = match last {
                Some((j, id)) if ti[j] == ti[i] && upper.same(i, j) => id,
                _ => {
                    let name = upper.value(i);
                    (self.devs.iter().zip(&self.dev_names))
                        .position(|((dt, _), dn)| *dt == ti[i] && dn == name)
                        .map_or(UNKNOWN, |p| p as u32)
                }
            };
            last = Some((i, id));
            valid.push(true);
            u.values.push(id);
        }
    }

    /// Appends the rows of one `io` batch to `b`: the time when `with_ts`, and the columns
    /// of `want` (the others stay empty). The text columns repeat (and are dictionaries, as
    /// [`io_reader_metadata`] reads them): a row's is looked up only when it differs from
    /// the previous row's.
    fn append(
        &self,
        batch: &RecordBatch,
        b: &mut EventBatch,
        ops: &[(&str, u8)],
        want: Columns,
        with_ts: bool,
    ) -> Result<(), AnalyzeError> {
        let s = |id, n| want.contains(id).then(|| TextCol::of(batch, n)).transpose();
        let trace = TextCol::of(batch, "trace")?;
        let (dev_t, op) = (s(col::DEV, "dev_t")?, s(col::OP, "op")?);
        let ts = with_ts.then(|| layout::utc_ns(batch)).transpose()?;
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
                    .map(|_| TextCol::of(batch, "upper_dev"))
            })
            .flatten()
            .transpose()?;
        let n = batch.num_rows();
        let before = b.len();
        b.rows += n;
        if let Some(ts) = ts {
            b.timestamp_ns.extend(ts.iter().map(|&t| t as u64));
        }
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
        if dev_t.is_none()
            && op.is_none()
            && path_id.is_none()
            && tid.is_none()
            && cgroup.is_none()
            && !want.contains(col::UPPER_DEV)
        {
            return Ok(());
        }
        // Each row's trace index, looked up when it differs from the previous row's.
        let mut ti = Vec::with_capacity(n);
        for i in 0..n {
            let t = match ti.last() {
                Some(&t) if trace.same(i, i - 1) => t,
                _ => self.traces.get(trace.value(i)).copied().unwrap_or(UNKNOWN),
            };
            ti.push(t);
        }
        if want.contains(col::UPPER_DEV) {
            self.append_upper(&ti, upper, b, before);
        }
        if let Some(dev_t) = dev_t {
            let mut id = UNKNOWN;
            for i in 0..n {
                if i == 0 || ti[i] != ti[i - 1] || !dev_t.same(i, i - 1) {
                    let d = dev_t.value(i);
                    id = (self.devs.iter())
                        .position(|(t, x)| *t == ti[i] && x == d)
                        .map_or(UNKNOWN, |p| p as u32);
                }
                b.dev.push(id);
            }
        }
        if let Some(op) = op {
            let mut code = Op::Other.code();
            for i in 0..n {
                if i == 0 || !op.same(i, i - 1) {
                    let o = op.value(i);
                    code = ops
                        .iter()
                        .find(|x| x.0 == o)
                        .map_or(Op::Other.code(), |x| x.1);
                }
                b.op.push(code);
            }
        }
        if let Some(path_id) = &path_id {
            b.path_id
                .extend((0..n).map(|i| self.path_ids.get(ti[i], path_id.u32(i))));
        }
        if let Some(tid) = &tid {
            b.tid
                .extend((0..n).map(|i| self.tids.get(ti[i], tid.u32(i))));
        }
        if let Some(cgroup) = &cgroup {
            // (trace, recorded cgroup id, re-keyed id) of the previous row.
            let mut last: (u32, u64, u64) = (UNKNOWN, 0, 0);
            for (i, &t) in ti.iter().enumerate() {
                let id = cgroup.u64(i);
                if (t, id) != (last.0, last.1) {
                    let k = match self.cgroup_ids.get(&(t, id)) {
                        Some(&k) => k,
                        None if id == 0 => 0,
                        None => id | UNKNOWN_CGROUP,
                    };
                    last = (t, id, k);
                }
                b.cgroup_id.push(last.2);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rekeying_is_the_same_dense_or_hashed() {
        // Trace 0 numbers its ids densely; trace 1 has one id above what is kept densely (hashed);
        // trace 0's id 3 is given twice: the later one counts, as in a map.
        let keys = [(0, 1), (0, 2), (1, 7), (0, 3), (1, 1 << 30), (0, 3)];
        let r = Rekey::new(keys);
        assert_eq!(r.sparse.len(), 1);
        assert_eq!(r.get(0, 1), 0);
        assert_eq!(r.get(0, 2), 1);
        assert_eq!(r.get(1, 7), 2);
        assert_eq!(r.get(0, 3), 5);
        assert_eq!(r.get(1, 1 << 30), 4);
        // Ids no table gives, and traces it does not know.
        for (t, id) in [(0, 0), (0, 4), (0, u32::MAX), (1, 1), (2, 1), (u32::MAX, 1)] {
            assert_eq!(r.get(t, id), UNKNOWN, "{t} {id}");
        }
    }
}
