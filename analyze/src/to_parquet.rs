//! `iodump convert`: traces → Parquet tables (`io`, `processes`, `files`, `devices`,
//! `losses`, `cgroups`), documented column by column in `schemas/parquet-tables.md`. Several traces form
//! one dataset: every table has `trace` and `host` columns.
//!
//! The tables are of [`crate::layout::LAYOUT`]: only types that Spark, DuckDB, polars,
//! pandas/pyarrow and DataFusion read with their default settings. Timestamps are
//! `TIMESTAMP(MICROS, UTC)` (Spark refuses nanoseconds) with the exact nanoseconds beside them
//! in an Int64 column (`timestamp_ns`, `start_ns`, `end_ns`); integers are signed (Spark reads
//! uint64 as decimal(20,0)): the trace's u16 become Int32, its u32 and u64 Int64.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use iodump_format::expr::Expr;
use iodump_format::{Damage, DevT, EventBatch, Flags, Op, Reader, Syscall};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use iodump_output::OutputFile;

use crate::intact::SegmentRows;
use crate::AnalyzeError;

/// What a conversion wrote.
#[derive(Clone, Debug, Default)]
pub struct ConvertSummary {
    /// Rows of the `io` table.
    pub events: u64,
    /// Intact events a filter left out (`convert --filter`).
    pub filtered_out: u64,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Damaged segments skipped.
    pub damaged: Vec<Damage>,
}

/// Rows per Parquet row group of the `io` table (parallel scans split on row groups).
pub const ROW_GROUP_ROWS: usize = 1 << 20;

fn perr(what: &str) -> impl Fn(parquet::errors::ParquetError) -> AnalyzeError + '_ {
    move |e| AnalyzeError::Write {
        what: what.to_string(),
        source: std::io::Error::other(e),
    }
}

fn aerr(what: &str) -> impl Fn(arrow_schema::ArrowError) -> AnalyzeError + '_ {
    move |e| AnalyzeError::Write {
        what: what.to_string(),
        source: std::io::Error::other(e),
    }
}

/// The type of the timestamp columns: microseconds, UTC (`TIMESTAMP(MICROS, true)` in
/// Parquet), the finest that every engine reads.
fn utc() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// Microseconds of a UTC instant in nanoseconds, rounded down (the instant's microsecond).
fn us_of(ns: i64) -> i64 {
    ns.div_euclid(1000)
}

/// A u64 of the trace as Int64: the same 64 bits (every time, size and sector is far below
/// 2^63; an id of 2^63 or more would read negative).
fn i64_of(v: u64) -> i64 {
    v as i64
}

/// A column of the trace's u64 values as Int64.
fn i64_col(v: &[u64]) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(v.iter().map(|&x| i64_of(x))))
}

/// A column of the trace's u32 values as Int64 (Spark would widen uint32 to bigint anyway).
fn i64_col_u32(v: &[u32]) -> ArrayRef {
    Arc::new(Int64Array::from_iter_values(
        v.iter().map(|&x| i64::from(x)),
    ))
}

/// A column of the trace's u16 values as Int32.
fn i32_col_u16(v: &[u16]) -> ArrayRef {
    Arc::new(Int32Array::from_iter_values(
        v.iter().map(|&x| i32::from(x)),
    ))
}

/// The schema of the `io` table.
pub fn io_schema() -> Arc<Schema> {
    use DataType::*;
    Arc::new(Schema::new(vec![
        Field::new("trace", Utf8, false),
        Field::new("host", Utf8, false),
        Field::new("timestamp", utc(), false),
        Field::new("timestamp_ns", Int64, false),
        Field::new("monotonic_ns", Int64, false),
        Field::new("dev", Utf8, false),
        Field::new("dev_t", Utf8, false),
        Field::new("sector", Int64, false),
        Field::new("bytes", Int64, false),
        Field::new("op", Utf8, false),
        Field::new("rw", Utf8, false),
        Field::new("flags", Utf8, false),
        Field::new("sync", Boolean, false),
        Field::new("meta", Boolean, false),
        Field::new("fua", Boolean, false),
        Field::new("preflush", Boolean, false),
        Field::new("readahead", Boolean, false),
        Field::new("pid", Int64, false),
        Field::new("tid", Int64, false),
        Field::new("comm", Utf8, false),
        Field::new("path_id", Int64, false),
        Field::new("path", Utf8, false),
        Field::new("queue_ns", Int64, true),
        Field::new("device_ns", Int64, false),
        Field::new("latency_ns", Int64, false),
        Field::new("error", Int32, false),
        Field::new("cpu", Int32, false),
        Field::new("syscall", Utf8, true),
        Field::new("dirtier_pid", Int64, true),
        Field::new("cgroup_id", Int64, false),
        Field::new("upper_dev", Utf8, true),
        Field::new("upper_monotonic_ns", Int64, true),
    ]))
}

fn props() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).expect("zstd level 3"),
        ))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_key_value_metadata(Some(vec![KeyValue::new(
            crate::layout::LAYOUT_KEY.to_string(),
            crate::layout::LAYOUT.to_string(),
        )]))
        .build()
}

/// A Parquet writer into a new output file `path`, added to `pending` (renamed over `path` once
/// the whole conversion succeeded).
fn writer(
    path: &Path,
    schema: Arc<Schema>,
    pending: &mut Vec<OutputFile>,
) -> Result<ArrowWriter<File>, AnalyzeError> {
    let out = OutputFile::create(path)?;
    let w =
        ArrowWriter::try_new(out.try_clone_file()?, schema, Some(props())).map_err(perr("io"))?;
    pending.push(out);
    Ok(w)
}

/// One input: a name for the `trace` column and its reader.
pub struct Input<'a> {
    /// Value of the `trace` column (the file name).
    pub name: String,
    /// The opened trace.
    pub reader: &'a Reader,
}

fn io_batch(
    input: &Input<'_>,
    segment: usize,
    b: &EventBatch,
    dev_names: &std::collections::HashMap<u32, String>,
    rows: std::ops::Range<usize>,
) -> Result<RecordBatch, AnalyzeError> {
    let r = input.reader;
    let h = r.header();
    let n = rows.len();
    let mut trace = StringBuilder::with_capacity(n, n * input.name.len());
    let mut host = StringBuilder::with_capacity(n, n * h.hostname.len());
    let mut ts = TimestampMicrosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut ts_ns = Int64Builder::with_capacity(n);
    let mut dev = StringBuilder::new();
    let mut dev_t = StringBuilder::new();
    let mut op = StringBuilder::new();
    let mut rw = StringBuilder::new();
    let mut flags = StringBuilder::new();
    let mut fl: [BooleanBuilder; 5] = std::array::from_fn(|_| BooleanBuilder::with_capacity(n));
    let mut comm = StringBuilder::new();
    let mut path = StringBuilder::new();
    let mut queue = Int64Builder::with_capacity(n);
    let mut device = Int64Builder::with_capacity(n);
    let mut syscall = StringBuilder::new();
    let mut dirtier = Int64Builder::with_capacity(n);
    let mut upper_dev = StringBuilder::new();
    let mut upper_ts = Int64Builder::with_capacity(n);
    let mut last_path = (u32::MAX, String::new());
    let mut last_comm = ((u32::MAX, u32::MAX), String::new());
    for i in rows.clone() {
        trace.append_value(&input.name);
        host.append_value(&h.hostname);
        let utc_ns = h.to_utc_ns(b.timestamp_ns[i]);
        ts.append_value(us_of(utc_ns));
        ts_ns.append_value(utc_ns);
        let d = b.dev[i];
        dev.append_value(dev_names.get(&d).map_or("?", |s| s.as_str()));
        dev_t.append_value(DevT(d).to_string());
        let o = Op::from_code(b.op[i]);
        op.append_value(o.name());
        let mut letter = [0u8; 4];
        rw.append_value(o.letter().encode_utf8(&mut letter));
        let f = Flags(b.flags[i]);
        flags.append_value(f.letters());
        for (k, flag) in [
            Flags::SYNC,
            Flags::META,
            Flags::FUA,
            Flags::PREFLUSH,
            Flags::READAHEAD,
        ]
        .into_iter()
        .enumerate()
        {
            fl[k].append_value(f.contains(flag));
        }
        let key = (b.pid[i], b.tid[i]);
        if last_comm.0 != key {
            let c = r.comm(key.0, key.1, segment).unwrap_or(b"?");
            last_comm = (key, iodump_format::text::text_string(c));
        }
        comm.append_value(&last_comm.1);
        let pid = b.path_id[i];
        if last_path.0 != pid {
            let p = r.tables().path(pid).map_or(&b""[..], |p| &p.path);
            last_path = (pid, iodump_format::text::text_string(p));
        }
        path.append_value(&last_path.1);
        queue.append_option(b.queue_ns.get(i).map(i64_of));
        device.append_value(i64_of(b.device_ns(i)));
        match b.syscall.get(i) {
            Some(s) => syscall.append_value(Syscall(s).to_string()),
            None => syscall.append_null(),
        }
        dirtier.append_option(b.dirtier_pid.get(i).map(i64::from));
        match b.upper(i) {
            Some(u) => {
                upper_dev.append_value(dev_names.get(&u.dev.0).map_or("?", |s| s.as_str()));
                upper_ts.append_value(i64_of(u.timestamp_ns));
            }
            None => {
                upper_dev.append_null();
                upper_ts.append_null();
            }
        }
    }
    let [mut f_sync, mut f_meta, mut f_fua, mut f_pre, mut f_ra] = fl;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(trace.finish()),
        Arc::new(host.finish()),
        Arc::new(ts.finish()),
        Arc::new(ts_ns.finish()),
        i64_col(&b.timestamp_ns[rows.clone()]),
        Arc::new(dev.finish()),
        Arc::new(dev_t.finish()),
        i64_col(&b.sector[rows.clone()]),
        i64_col_u32(&b.bytes[rows.clone()]),
        Arc::new(op.finish()),
        Arc::new(rw.finish()),
        Arc::new(flags.finish()),
        Arc::new(f_sync.finish()),
        Arc::new(f_meta.finish()),
        Arc::new(f_fua.finish()),
        Arc::new(f_pre.finish()),
        Arc::new(f_ra.finish()),
        i64_col_u32(&b.pid[rows.clone()]),
        i64_col_u32(&b.tid[rows.clone()]),
        Arc::new(comm.finish()),
        i64_col_u32(&b.path_id[rows.clone()]),
        Arc::new(path.finish()),
        Arc::new(queue.finish()),
        Arc::new(device.finish()),
        i64_col(&b.latency_ns[rows.clone()]),
        i32_col_u16(&b.error[rows.clone()]),
        i32_col_u16(&b.cpu[rows.clone()]),
        Arc::new(syscall.finish()),
        Arc::new(dirtier.finish()),
        i64_col(&b.cgroup_id[rows.clone()]),
        Arc::new(upper_dev.finish()),
        Arc::new(upper_ts.finish()),
    ];
    RecordBatch::try_new(io_schema(), cols).map_err(aerr("io batch"))
}

/// How to lay the dataset out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Partitioning {
    /// One directory per recording host (`host=NAME`).
    pub host: bool,
    /// One directory per UTC day of the I/O (`date=YYYY-MM-DD`; the `io` table only).
    pub date: bool,
}

impl Partitioning {
    fn any(self) -> bool {
        self.host || self.date
    }
}

fn utc_date(ns: i64) -> String {
    iodump_format::summary::rfc3339_utc(ns)[..10].to_string()
}

/// The name of the directory of `host`'s partition (`host=NAME`): each character Hive and
/// Spark escape in a partition's value (`%`, `/`, `=`, `:`, `#`, `?`, `\`, `'`, `"`, `*`,
/// `[`, `]`, `^`, `{`, control characters, DEL) written `%XX`, so that every engine decodes
/// the exact host name from the path (`db%41` is `host=db%2541`). Distinct hosts have
/// distinct directories; the conversion still groups the small tables by this name.
fn host_dir(host: &str) -> String {
    let mut out = String::from("host=");
    for c in host.chars() {
        let escaped = matches!(
            c,
            '%' | '/' | '=' | ':' | '#' | '?' | '\\' | '\'' | '"' | '*' | '[' | ']' | '^' | '{'
        ) || c.is_ascii_control();
        if escaped {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Hive-style directory of one partition of `table` (a key's column is dropped from the files,
/// engines rebuild it from the path).
fn partition_dir(
    dir: &Path,
    table: &str,
    part: Partitioning,
    host: &str,
    date: Option<&str>,
) -> PathBuf {
    let mut p = dir.join(table);
    if part.host {
        p.push(host_dir(host));
    }
    if let Some(d) = date {
        p.push(format!("date={d}"));
    }
    p
}

/// Drops the `host` column when the layout partitions by host.
fn project(batch: RecordBatch, part: Partitioning) -> Result<RecordBatch, AnalyzeError> {
    if !part.host {
        return Ok(batch);
    }
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| batch.schema().field(i).name() != "host")
        .collect();
    batch.project(&keep).map_err(aerr("projection"))
}

/// Creates directory `d` and those above it that are missing; adds each it created to
/// `created`, outermost first (removed again when the conversion fails: [`undo_dirs`]).
fn create_dir(d: &Path, created: &mut Vec<PathBuf>) -> Result<(), AnalyzeError> {
    let missing: Vec<PathBuf> = d
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_err())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(d).map_err(|source| AnalyzeError::Write {
        what: d.display().to_string(),
        source,
    })?;
    created.extend(missing.into_iter().rev());
    Ok(())
}

/// Removes the directories a failed conversion created (`created`, outermost first), each
/// only when empty: nothing of it is left behind.
fn undo_dirs(created: &[PathBuf]) {
    for d in created.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
}

/// Converts `inputs` into Parquet files in `dir` (created if needed): `dir/TABLE.parquet`,
/// or with partitioning `dir/TABLE/host=H[/date=D]/part-0.parquet`.
///
/// An existing `dir` must be a directory of this user (a link is refused). Each file is an
/// [`OutputFile`]: the files already there are replaced only once every table is complete, so
/// a conversion that fails, or that could read nothing at all (every segment damaged:
/// [`AnalyzeError::NothingReadable`]), leaves them as they were, and removes the directories
/// it created.
pub fn convert(
    inputs: &[Input<'_>],
    dir: &Path,
    part: Partitioning,
) -> Result<ConvertSummary, AnalyzeError> {
    convert_with_progress(inputs, dir, part, None, &|_| {})
}

/// As [`convert`], of the I/Os `filter` keeps (all without one: the segments its window of
/// time leaves out are not decoded; the small tables stay whole), calling
/// `progress(events)` after each segment.
pub fn convert_with_progress(
    inputs: &[Input<'_>],
    dir: &Path,
    part: Partitioning,
    filter: Option<&Expr>,
    progress: &dyn Fn(u64),
) -> Result<ConvertSummary, AnalyzeError> {
    // The directory: never through a link, never another user's.
    iodump_output::check_dir(dir)?;
    // A dataset of the other layout there would be left beside the new one (and read instead
    // of it): refused before any work.
    if let Some(old) = table_files(dir)
        .into_iter()
        .find(|(_, flat)| *flat == part.any())
    {
        return Err(stale_dataset(dir, &old.0));
    }
    let mut created = Vec::new();
    create_dir(dir, &mut created)?;
    let mut c = Conversion {
        dir,
        part,
        filter,
        summary: ConvertSummary::default(),
        pending: Vec::new(),
        writers: BTreeMap::new(),
        created,
    };
    let done = c.run(inputs, progress);
    if done.is_err() {
        // The new files first (their temporary names), then the directories made for them.
        c.writers.clear();
        c.pending.clear();
        undo_dirs(&c.created);
    }
    done
}

/// One run of [`convert`]: the `io` table segment by segment, then the small tables, then
/// every file renamed over the old ones.
struct Conversion<'a> {
    dir: &'a Path,
    part: Partitioning,
    filter: Option<&'a Expr>,
    summary: ConvertSummary,
    /// The new files, renamed over the old ones only once every table is complete.
    pending: Vec<OutputFile>,
    /// One writer per partition of the io table, created on first use.
    writers: BTreeMap<PathBuf, ArrowWriter<File>>,
    /// The directories it created, outermost first ([`create_dir`]).
    created: Vec<PathBuf>,
}

impl Conversion<'_> {
    /// Every table of `inputs`, then committed over what was there.
    fn run(
        &mut self,
        inputs: &[Input<'_>],
        progress: &dyn Fn(u64),
    ) -> Result<ConvertSummary, AnalyzeError> {
        // The name of the first input with damage (for the error when nothing could be read).
        let mut first_damaged: Option<String> = None;
        for input in inputs {
            self.io_table(input, progress)?;
            if !self.summary.damaged.is_empty() && first_damaged.is_none() {
                first_damaged = Some(input.name.clone());
            }
        }
        self.check_readable(first_damaged)?;
        self.close_io_table(inputs.first())?;
        for (dir_name, group) in host_groups(inputs, self.part) {
            self.small_tables(&dir_name, &group)?;
        }
        self.commit()
    }

    /// Every intact segment of `input` into the `io` table; damaged ones are counted.
    fn io_table(&mut self, input: &Input<'_>, progress: &dyn Fn(u64)) -> Result<(), AnalyzeError> {
        let r = input.reader;
        let dev_names: HashMap<u32, String> = r.tables().device_names();
        let mut x = SegmentRows::new();
        let mut kept = EventBatch::default();
        for i in 0..r.segments().len() {
            let read = match self.filter {
                Some(f) => x.read(r, i, Some(f), &dev_names),
                None => Some(x.decode(r, i)),
            };
            let b = &x.batch;
            let rows = match read {
                None => {
                    let n = u64::from(r.segments()[i].events);
                    self.summary.filtered_out += n;
                    progress(n);
                    continue;
                }
                Some(Err(d)) => {
                    self.summary.damaged.push(d);
                    continue;
                }
                Some(Ok(())) if self.filter.is_some() => {
                    kept.clear();
                    x.rows.iter().for_each(|&k| kept.push(&b.get(k as usize)));
                    self.summary.filtered_out += (b.len() - kept.len()) as u64;
                    &kept
                }
                Some(Ok(())) => b,
            };
            if !rows.is_empty() {
                self.io_segment(input, i, rows, &dev_names)?;
            }
            self.summary.events += rows.len() as u64;
            progress(b.len() as u64);
        }
        self.summary.damaged.extend(r.damage().iter().cloned());
        Ok(())
    }

    /// Segment `seg` of `input` into the `io` table, one batch per partition it falls in.
    fn io_segment(
        &mut self,
        input: &Input<'_>,
        seg: usize,
        b: &EventBatch,
        dev_names: &HashMap<u32, String>,
    ) -> Result<(), AnalyzeError> {
        let h = input.reader.header();
        let mut start = 0;
        while start < b.len() {
            let (end, date) = if self.part.date {
                let (end, date) = date_run(&b.timestamp_ns, start, |ts| h.to_utc_ns(ts));
                (end, Some(date))
            } else {
                (b.len(), None)
            };
            let path = if self.part.any() {
                partition_dir(self.dir, "io", self.part, &h.hostname, date.as_deref())
                    .join("part-0.parquet")
            } else {
                self.dir.join("io.parquet")
            };
            let batch = project(io_batch(input, seg, b, dev_names, start..end)?, self.part)?;
            let w = self.io_writer(&path, batch.schema())?;
            w.write(&batch).map_err(perr("io"))?;
            start = end;
        }
        Ok(())
    }

    /// The writer of the `io` file at `path`, created (with its directory) on first use.
    fn io_writer(
        &mut self,
        path: &Path,
        schema: Arc<Schema>,
    ) -> Result<&mut ArrowWriter<File>, AnalyzeError> {
        if !self.writers.contains_key(path) {
            if let Some(parent) = path.parent() {
                create_dir(parent, &mut self.created)?;
            }
            let w = writer(path, schema, &mut self.pending)?;
            self.writers.insert(path.to_path_buf(), w);
        }
        Ok(self.writers.get_mut(path).expect("writer just inserted"))
    }

    /// Nothing could be read at all (no event, and damage): an error, and what was there is
    /// kept.
    fn check_readable(&self, first_damaged: Option<String>) -> Result<(), AnalyzeError> {
        if self.summary.events == 0 {
            if let (Some(d), Some(trace)) = (self.summary.damaged.first(), first_damaged) {
                return Err(AnalyzeError::NothingReadable {
                    trace,
                    damage: d.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Closes the `io` files. Without any event, an empty `io` table with its schema:
    /// `io.parquet`, or partitioned, one file in the partition of the first input's host and
    /// the UTC day its recording started (a dataset without `io/` would be no dataset).
    fn close_io_table(&mut self, first: Option<&Input<'_>>) -> Result<(), AnalyzeError> {
        if self.writers.is_empty() {
            let p = match first {
                Some(input) if self.part.any() => {
                    let h = input.reader.header();
                    let date = self
                        .part
                        .date
                        .then(|| utc_date(h.to_utc_ns(h.monotonic_ns)));
                    partition_dir(self.dir, "io", self.part, &h.hostname, date.as_deref())
                        .join("part-0.parquet")
                }
                _ => self.dir.join("io.parquet"),
            };
            let schema = project(RecordBatch::new_empty(io_schema()), self.part)?.schema();
            self.io_writer(&p, schema)?;
        }
        for (p, w) in std::mem::take(&mut self.writers) {
            w.close().map_err(perr("io"))?;
            self.summary.files.push(p);
        }
        Ok(())
    }

    /// The small tables of the inputs whose host partition is the directory `dir_name`
    /// ([`host_dir`]; all inputs when not partitioned by host).
    fn small_tables(&mut self, dir_name: &str, group: &[&Input<'_>]) -> Result<(), AnalyzeError> {
        let (dir, part) = (self.dir, self.part);
        let created = &mut self.created;
        let mut out = |table: &str| -> Result<PathBuf, AnalyzeError> {
            if !part.any() {
                return Ok(dir.join(format!("{table}.parquet")));
            }
            let mut d = dir.join(table);
            if part.host {
                d.push(dir_name);
            }
            create_dir(&d, created)?;
            Ok(d.join("part-0.parquet"))
        };
        let pending = &mut self.pending;
        let files = &mut self.summary.files;
        files.push(write_processes(group, &out("processes")?, part, pending)?);
        files.push(write_files(group, &out("files")?, part, pending)?);
        files.push(write_devices(group, &out("devices")?, part, pending)?);
        files.push(write_losses(group, &out("losses")?, part, pending)?);
        files.push(write_cgroups(group, &out("cgroups")?, part, pending)?);
        Ok(())
    }

    /// Every table is complete: now they replace what was there.
    fn commit(&mut self) -> Result<ConvertSummary, AnalyzeError> {
        // A table file there that no new file replaces (a partition of another host or
        // date) would stay in the dataset: refused, and the new files are removed.
        let new: Vec<&Path> = self.pending.iter().map(OutputFile::path).collect();
        if let Some((old, _)) = table_files(self.dir)
            .into_iter()
            .find(|(f, _)| !new.contains(&f.as_path()))
        {
            return Err(stale_dataset(self.dir, &old));
        }
        for o in &mut self.pending {
            o.commit()?;
        }
        Ok(std::mem::take(&mut self.summary))
    }
}

/// The table files of a dataset in `dir`, flat (`TABLE.parquet`: `true`) or partitioned
/// (`TABLE/…/*.parquet`: `false`): the files its readers would read
/// ([`crate::parquet_input::table_files`]), of every table.
pub(crate) fn table_files(dir: &Path) -> Vec<(PathBuf, bool)> {
    let mut out = Vec::new();
    for t in crate::input::ALL_TABLES {
        let files = crate::parquet_input::table_files(dir, t);
        out.extend(files.flat.map(|f| (f, true)));
        out.extend(files.partitioned.into_iter().map(|f| (f, false)));
    }
    out.sort();
    out
}

fn stale_dataset(dir: &Path, file: &Path) -> AnalyzeError {
    AnalyzeError::StaleDataset {
        dir: dir.to_path_buf(),
        file: file.to_path_buf(),
    }
}

/// The run of rows from `start` on the same UTC date (`utc_ns` of a timestamp): its end and
/// the date. Rows of a segment are sorted by time, so dates form contiguous runs.
fn date_run(ts_ns: &[u64], start: usize, utc_ns: impl Fn(u64) -> i64) -> (usize, String) {
    let d = utc_date(utc_ns(ts_ns[start]));
    let mut e = start + 1;
    while e < ts_ns.len() && utc_date(utc_ns(ts_ns[e])) == d {
        e += 1;
    }
    (e, d)
}

/// The inputs by the directory of their host's partition ([`host_dir`]: one group, written
/// into one file of each small table, per directory), in order of first appearance;
/// one group of all inputs (`""`) when not partitioned by host.
fn host_groups<'i, 'a>(
    inputs: &'i [Input<'a>],
    part: Partitioning,
) -> Vec<(String, Vec<&'i Input<'a>>)> {
    let mut groups: Vec<(String, Vec<&Input<'_>>)> = Vec::new();
    for input in inputs {
        let host = if part.host {
            host_dir(&input.reader.header().hostname)
        } else {
            String::new()
        };
        match groups.iter_mut().find(|(h, _)| *h == host) {
            Some((_, v)) => v.push(input),
            None => groups.push((host, vec![input])),
        }
    }
    groups
}

/// The columns of a small table, each named where its values are finished; every table
/// opens with `trace` and `host` ([`Origin`]).
struct Columns {
    fields: Vec<Field>,
    arrays: Vec<ArrayRef>,
}

impl Columns {
    fn new(mut origin: Origin) -> Self {
        Columns {
            fields: Vec::new(),
            arrays: Vec::new(),
        }
        .add("trace", false, origin.trace.finish())
        .add("host", false, origin.host.finish())
    }

    /// Adds a column of the type of `values`.
    fn add(mut self, name: &str, nullable: bool, values: impl Array + 'static) -> Self {
        self.fields
            .push(Field::new(name, values.data_type().clone(), nullable));
        self.arrays.push(Arc::new(values));
        self
    }
}

/// The `trace` and `host` columns every small table opens with.
#[derive(Default)]
struct Origin {
    trace: StringBuilder,
    host: StringBuilder,
}

impl Origin {
    /// One row's trace and host: those of `input`.
    fn push(&mut self, input: &Input<'_>) {
        self.trace.append_value(&input.name);
        self.host.append_value(&input.reader.header().hostname);
    }
}

/// Writes one small table into a new output file, added to `pending` (renamed over `path` once
/// the whole conversion succeeded).
fn small_table(
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
    cols: Columns,
) -> Result<PathBuf, AnalyzeError> {
    let name = path.display().to_string();
    let schema = Arc::new(Schema::new(cols.fields));
    let batch = RecordBatch::try_new(schema, cols.arrays).map_err(aerr(&name))?;
    let batch = project(batch, part)?;
    let out = OutputFile::create(path)?;
    let mut w = ArrowWriter::try_new(out.try_clone_file()?, batch.schema(), Some(props()))
        .map_err(perr(&name))?;
    pending.push(out);
    w.write(&batch).map_err(perr(&name))?;
    w.close().map_err(perr(&name))?;
    Ok(path.to_path_buf())
}

fn write_processes(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let mut origin = Origin::default();
    let (mut comm, mut args) = (StringBuilder::new(), StringBuilder::new());
    let (mut tid, mut pid, mut cg) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    for input in inputs {
        let mut ps: Vec<_> = input.reader.tables().processes().collect();
        ps.sort_by_key(|p| p.tid);
        for p in ps {
            origin.push(input);
            tid.append_value(p.tid.into());
            pid.append_value(p.pid.into());
            comm.append_value(iodump_format::text::text_string(&p.comm));
            cg.append_value(i64_of(p.cgroup_id));
            args.append_value(iodump_format::text::text_string(p.args_or_comm()));
        }
    }
    let cols = Columns::new(origin)
        .add("tid", false, tid.finish())
        .add("pid", false, pid.finish())
        .add("comm", false, comm.finish())
        .add("cgroup_id", false, cg.finish())
        .add("args", false, args.finish());
    small_table(path, part, pending, cols)
}

fn write_files(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let mut origin = Origin::default();
    let (mut kind, mut path_col, mut dev) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut id, mut ino, mut generation) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    let (mut trunc, mut del) = (BooleanBuilder::new(), BooleanBuilder::new());
    for input in inputs {
        let mut ps: Vec<_> = input.reader.tables().paths().collect();
        ps.sort_by_key(|p| p.path_id);
        for p in ps {
            origin.push(input);
            id.append_value(p.path_id.into());
            dev.append_value(p.dev.to_string());
            ino.append_value(i64_of(p.inode));
            kind.append_value(p.kind.name());
            trunc.append_value(p.truncated);
            del.append_value(p.deleted);
            path_col.append_value(iodump_format::text::text_string(&p.path));
            generation.append_option(p.generation.map(i64::from));
        }
    }
    let cols = Columns::new(origin)
        .add("path_id", false, id.finish())
        .add("dev_t", false, dev.finish())
        .add("inode", false, ino.finish())
        .add("kind", false, kind.finish())
        .add("truncated", false, trunc.finish())
        .add("deleted", false, del.finish())
        .add("path", false, path_col.finish())
        .add("generation", true, generation.finish());
    small_table(path, part, pending, cols)
}

/// The `cgroups` table: the traces' cgroups tables (none for traces before format 1.2).
fn write_cgroups(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let mut origin = Origin::default();
    // After cgroup_id: the path and the identity's text (nullable).
    let mut text: [StringBuilder; 6] = Default::default();
    let (mut id, mut monitor) = (Int64Builder::new(), BooleanBuilder::new());
    for input in inputs {
        for c in input.reader.tables().cgroups() {
            let i = &c.identity;
            origin.push(input);
            id.append_value(i64_of(c.id));
            let values = [
                Some(c.path.as_str()),
                i.runtime.map(|r| r.name()),
                i.container_id.as_deref(),
                i.pod_uid.as_deref(),
                i.qos.as_deref(),
                i.unit.as_deref(),
            ];
            for (b, v) in text.iter_mut().zip(values) {
                b.append_option(v);
            }
            monitor.append_value(i.monitor);
        }
    }
    let mut cols = Columns::new(origin).add("cgroup_id", false, id.finish());
    let names = ["path", "runtime", "container_id", "pod_uid", "qos", "unit"];
    for (name, b) in names.into_iter().zip(text.iter_mut()) {
        cols = cols.add(name, name != "path", b.finish());
    }
    let cols = cols.add("monitor", false, monitor.finish());
    small_table(path, part, pending, cols)
}

fn write_devices(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let mut origin = Origin::default();
    let (mut name, mut dev, mut parent) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut ss, mut start, mut bio) = (
        Int64Builder::new(),
        Int64Builder::new(),
        BooleanBuilder::new(),
    );
    let (mut label, mut below) = (StringBuilder::new(), StringBuilder::new());
    for input in inputs {
        for d in input.reader.tables().devices() {
            origin.push(input);
            name.append_value(&d.name);
            dev.append_value(d.dev.to_string());
            parent.append_option(d.partition_of.map(|p| p.to_string()));
            ss.append_value(d.sector_size.into());
            start.append_value(i64_of(d.start_sector));
            bio.append_value(d.bio_based);
            label.append_option((!d.label.is_empty()).then_some(&d.label));
            let on: Vec<String> = d.stacked_on.iter().map(|s| s.to_string()).collect();
            below.append_option((!on.is_empty()).then(|| on.join(",")));
        }
    }
    let cols = Columns::new(origin)
        .add("name", false, name.finish())
        .add("dev_t", false, dev.finish())
        .add("partition_of", true, parent.finish())
        .add("sector_size", false, ss.finish())
        .add("start_sector", false, start.finish())
        .add("bio_based", false, bio.finish())
        .add("label", true, label.finish())
        .add("stacked_on", true, below.finish());
    small_table(path, part, pending, cols)
}

fn write_losses(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let mut origin = Origin::default();
    let mut reason = StringBuilder::new();
    let (mut cpu, mut count) = (Int32Builder::new(), Int64Builder::new());
    let mut start = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut end = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let (mut start_ns, mut end_ns) = (Int64Builder::new(), Int64Builder::new());
    for input in inputs {
        let h = input.reader.header();
        for l in input.reader.losses() {
            origin.push(input);
            cpu.append_value(l.cpu.into());
            reason.append_value(l.reason.name());
            count.append_value(i64_of(l.count));
            let (a, z) = (h.to_utc_ns(l.start_ns), h.to_utc_ns(l.end_ns));
            start.append_value(us_of(a));
            end.append_value(us_of(z));
            start_ns.append_value(a);
            end_ns.append_value(z);
        }
    }
    let cols = Columns::new(origin)
        .add("cpu", false, cpu.finish())
        .add("reason", false, reason.finish())
        .add("count", false, count.finish())
        .add("start", false, start.finish())
        .add("end", false, end.finish())
        .add("start_ns", false, start_ns.finish())
        .add("end_ns", false, end_ns.finish());
    small_table(path, part, pending, cols)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Hive escapes in a partition's value is `%XX`; the rest as it is.
    #[test]
    fn host_directories_escape_as_hive_does() {
        assert_eq!(host_dir("db1.example"), "host=db1.example");
        assert_eq!(host_dir("db%41"), "host=db%2541");
        assert_eq!(host_dir("a/b=c:d"), "host=a%2Fb%3Dc%3Ad");
        assert_eq!(host_dir("a_b"), "host=a_b");
        assert_eq!(
            host_dir("#?\\'\"*[]^{"),
            "host=%23%3F%5C%27%22%2A%5B%5D%5E%7B"
        );
        assert_eq!(host_dir("t\tx\u{7f}é"), "host=t%09x%7Fé");
    }

    #[test]
    fn date_runs_end_at_utc_midnight() {
        const DAY_NS: u64 = 86_400_000_000_000;
        // Monotonic ns; UTC = monotonic + 2026-01-01T23:00 (an hour before midnight).
        let base_ns = 1_767_308_400_000_000_000i64;
        let utc = |ts: u64| base_ns + ts as i64;
        let hour = DAY_NS / 24;
        let ts = [0, hour / 2, hour - 1, hour, hour + 5, DAY_NS + hour];
        assert_eq!(date_run(&ts, 0, utc), (3, "2026-01-01".to_string()));
        assert_eq!(date_run(&ts, 3, utc), (5, "2026-01-02".to_string()));
        assert_eq!(date_run(&ts, 5, utc), (6, "2026-01-03".to_string()));
    }
}
