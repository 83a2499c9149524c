//! `iodump convert`: traces → Parquet tables (`io`, `processes`, `files`, `devices`,
//! `losses`), documented column by column in `schemas/parquet-tables.md`. Several traces form
//! one dataset: every table has `trace` and `host` columns.
//!
//! The tables are of [`crate::layout::LAYOUT`]: only types that Spark, DuckDB, polars,
//! pandas/pyarrow and DataFusion read with their default settings. Timestamps are
//! `TIMESTAMP(MICROS, UTC)` (Spark refuses nanoseconds) with the exact nanoseconds beside them
//! in an Int64 column (`timestamp_ns`, `start_ns`, `end_ns`); integers are signed (Spark reads
//! uint64 as decimal(20,0)): the trace's u16 become Int32, its u32 and u64 Int64.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Int32Builder, Int64Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use iodump_format::{Damage, DevT, EventBatch, Flags, Op, Reader, Syscall};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use iodump_output::OutputFile;

use crate::AnalyzeError;

/// What a conversion wrote.
#[derive(Clone, Debug, Default)]
pub struct ConvertSummary {
    /// Rows of the `io` table.
    pub events: u64,
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
        source: std::io::Error::other(e.to_string()),
    }
}

fn aerr(what: &str) -> impl Fn(arrow_schema::ArrowError) -> AnalyzeError + '_ {
    move |e| AnalyzeError::Write {
        what: what.to_string(),
        source: std::io::Error::other(e.to_string()),
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
        p.push(format!("host={}", host.replace(['/', '='], "_")));
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

fn create_dir(d: &Path) -> Result<(), AnalyzeError> {
    std::fs::create_dir_all(d).map_err(|source| AnalyzeError::Write {
        what: d.display().to_string(),
        source,
    })
}

/// Converts `inputs` into Parquet files in `dir` (created if needed): `dir/TABLE.parquet`,
/// or with partitioning `dir/TABLE/host=H[/date=D]/part-0.parquet`.
///
/// An existing `dir` must be a directory of this user (a link is refused). Each file is an
/// [`OutputFile`]: the files already there are replaced only once every table is complete, so
/// a conversion that fails, or that could read nothing at all (every segment damaged:
/// [`AnalyzeError::NothingReadable`]), leaves them as they were.
pub fn convert(
    inputs: &[Input<'_>],
    dir: &Path,
    part: Partitioning,
) -> Result<ConvertSummary, AnalyzeError> {
    convert_with_progress(inputs, dir, part, &|_| {})
}

/// As [`convert`], calling `progress(events)` after each segment.
pub fn convert_with_progress(
    inputs: &[Input<'_>],
    dir: &Path,
    part: Partitioning,
    progress: &dyn Fn(u64),
) -> Result<ConvertSummary, AnalyzeError> {
    // The directory: never through a link, never another user's.
    iodump_output::check_dir(dir)?;
    create_dir(dir)?;
    let mut s = ConvertSummary::default();
    // The new files, renamed over the old ones only once every table is complete.
    let mut pending: Vec<OutputFile> = Vec::new();
    // The name of the first input with damage (for the error when nothing could be read).
    let mut first_damaged: Option<String> = None;
    // One writer per partition of the io table, created on first use.
    let mut writers: std::collections::BTreeMap<PathBuf, ArrowWriter<File>> = Default::default();
    for input in inputs {
        let r = input.reader;
        let h = r.header();
        let dev_names: std::collections::HashMap<u32, String> = r.tables().device_names();
        let mut result = Ok(());
        r.for_each_segment(|i, b| {
            if result.is_err() {
                return;
            }
            let b = match b {
                Ok(b) => b,
                Err(d) => {
                    s.damaged.push(d);
                    return;
                }
            };
            // Rows of a segment are sorted by time: dates form contiguous runs.
            let mut start = 0;
            while start < b.len() && result.is_ok() {
                let (end, date) = if part.date {
                    let d = utc_date(h.to_utc_ns(b.timestamp_ns[start]));
                    let mut e = start + 1;
                    while e < b.len() && utc_date(h.to_utc_ns(b.timestamp_ns[e])) == d {
                        e += 1;
                    }
                    (e, Some(d))
                } else {
                    (b.len(), None)
                };
                let path = if part.any() {
                    partition_dir(dir, "io", part, &h.hostname, date.as_deref())
                        .join("part-0.parquet")
                } else {
                    dir.join("io.parquet")
                };
                result = io_batch(input, i, b, &dev_names, start..end)
                    .and_then(|batch| project(batch, part))
                    .and_then(|batch| {
                        if !writers.contains_key(&path) {
                            if let Some(parent) = path.parent() {
                                create_dir(parent)?;
                            }
                            let w = writer(&path, batch.schema(), &mut pending)?;
                            writers.insert(path.clone(), w);
                        }
                        let w = writers.get_mut(&path).expect("writer just inserted");
                        w.write(&batch).map_err(perr("io"))
                    });
                start = end;
            }
            s.events += b.len() as u64;
            progress(b.len() as u64);
        });
        result?;
        s.damaged.extend(r.damage().iter().cloned());
        if !s.damaged.is_empty() && first_damaged.is_none() {
            first_damaged = Some(input.name.clone());
        }
    }
    if s.events == 0 {
        if let (Some(d), Some(trace)) = (s.damaged.first(), first_damaged) {
            // Nothing could be read: an error, and what was there is kept.
            return Err(AnalyzeError::NothingReadable {
                trace,
                damage: d.to_string(),
            });
        }
    }
    if writers.is_empty() && !part.any() {
        // No event at all: still write an empty io table with its schema.
        let p = dir.join("io.parquet");
        let w = writer(&p, io_schema(), &mut pending)?;
        writers.insert(p, w);
    }
    for (p, w) in writers {
        w.close().map_err(perr("io"))?;
        s.files.push(p);
    }
    // The small tables, per host when partitioned by host.
    let mut groups: Vec<(String, Vec<&Input<'_>>)> = Vec::new();
    for input in inputs {
        let host = if part.host {
            input.reader.header().hostname.clone()
        } else {
            String::new()
        };
        match groups.iter_mut().find(|(h, _)| *h == host) {
            Some((_, v)) => v.push(input),
            None => groups.push((host, vec![input])),
        }
    }
    for (host, group) in &groups {
        let out = |table: &str| -> Result<PathBuf, AnalyzeError> {
            if part.any() {
                let d = partition_dir(
                    dir,
                    table,
                    Partitioning {
                        host: part.host,
                        date: false,
                    },
                    host,
                    None,
                );
                create_dir(&d)?;
                Ok(d.join("part-0.parquet"))
            } else {
                Ok(dir.join(format!("{table}.parquet")))
            }
        };
        s.files.push(write_processes(
            group,
            &out("processes")?,
            part,
            &mut pending,
        )?);
        s.files
            .push(write_files(group, &out("files")?, part, &mut pending)?);
        s.files
            .push(write_devices(group, &out("devices")?, part, &mut pending)?);
        s.files
            .push(write_losses(group, &out("losses")?, part, &mut pending)?);
    }
    // Every table is complete: now they replace what was there.
    for o in &mut pending {
        o.commit()?;
    }
    Ok(s)
}

/// Writes one small table into a new output file, added to `pending` (renamed over `path` once
/// the whole conversion succeeded).
fn small_table(
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
    fields: Vec<Field>,
    cols: Vec<ArrayRef>,
) -> Result<PathBuf, AnalyzeError> {
    let name = path.display().to_string();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema, cols).map_err(aerr(&name))?;
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
    let (mut trace, mut host, mut comm, mut args) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut tid, mut pid, mut cg) = (
        Int64Builder::new(),
        Int64Builder::new(),
        Int64Builder::new(),
    );
    for input in inputs {
        let mut ps: Vec<_> = input.reader.tables().processes().collect();
        ps.sort_by_key(|p| p.tid);
        for p in ps {
            trace.append_value(&input.name);
            host.append_value(&input.reader.header().hostname);
            tid.append_value(p.tid.into());
            pid.append_value(p.pid.into());
            comm.append_value(iodump_format::text::text_string(&p.comm));
            cg.append_value(i64_of(p.cgroup_id));
            args.append_value(iodump_format::text::text_string(p.args_or_comm()));
        }
    }
    use DataType::*;
    small_table(
        path,
        part,
        pending,
        vec![
            Field::new("trace", Utf8, false),
            Field::new("host", Utf8, false),
            Field::new("tid", Int64, false),
            Field::new("pid", Int64, false),
            Field::new("comm", Utf8, false),
            Field::new("cgroup_id", Int64, false),
            Field::new("args", Utf8, false),
        ],
        vec![
            Arc::new(trace.finish()),
            Arc::new(host.finish()),
            Arc::new(tid.finish()),
            Arc::new(pid.finish()),
            Arc::new(comm.finish()),
            Arc::new(cg.finish()),
            Arc::new(args.finish()),
        ],
    )
}

fn write_files(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let (mut trace, mut host, mut kind, mut path_col, mut dev) = (
        StringBuilder::new(),
        StringBuilder::new(),
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
            trace.append_value(&input.name);
            host.append_value(&input.reader.header().hostname);
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
    use DataType::*;
    small_table(
        path,
        part,
        pending,
        vec![
            Field::new("trace", Utf8, false),
            Field::new("host", Utf8, false),
            Field::new("path_id", Int64, false),
            Field::new("dev_t", Utf8, false),
            Field::new("inode", Int64, false),
            Field::new("kind", Utf8, false),
            Field::new("truncated", Boolean, false),
            Field::new("deleted", Boolean, false),
            Field::new("path", Utf8, false),
            Field::new("generation", Int64, true),
        ],
        vec![
            Arc::new(trace.finish()),
            Arc::new(host.finish()),
            Arc::new(id.finish()),
            Arc::new(dev.finish()),
            Arc::new(ino.finish()),
            Arc::new(kind.finish()),
            Arc::new(trunc.finish()),
            Arc::new(del.finish()),
            Arc::new(path_col.finish()),
            Arc::new(generation.finish()),
        ],
    )
}

fn write_devices(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let (mut trace, mut host, mut name, mut dev, mut parent) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut ss, mut start, mut bio) = (
        Int64Builder::new(),
        Int64Builder::new(),
        BooleanBuilder::new(),
    );
    for input in inputs {
        for d in input.reader.tables().devices() {
            trace.append_value(&input.name);
            host.append_value(&input.reader.header().hostname);
            name.append_value(&d.name);
            dev.append_value(d.dev.to_string());
            match d.partition_of {
                Some(p) => parent.append_value(p.to_string()),
                None => parent.append_null(),
            }
            ss.append_value(d.sector_size.into());
            start.append_value(i64_of(d.start_sector));
            bio.append_value(d.bio_based);
        }
    }
    use DataType::*;
    small_table(
        path,
        part,
        pending,
        vec![
            Field::new("trace", Utf8, false),
            Field::new("host", Utf8, false),
            Field::new("name", Utf8, false),
            Field::new("dev_t", Utf8, false),
            Field::new("partition_of", Utf8, true),
            Field::new("sector_size", Int64, false),
            Field::new("start_sector", Int64, false),
            Field::new("bio_based", Boolean, false),
        ],
        vec![
            Arc::new(trace.finish()),
            Arc::new(host.finish()),
            Arc::new(name.finish()),
            Arc::new(dev.finish()),
            Arc::new(parent.finish()),
            Arc::new(ss.finish()),
            Arc::new(start.finish()),
            Arc::new(bio.finish()),
        ],
    )
}

fn write_losses(
    inputs: &[&Input<'_>],
    path: &Path,
    part: Partitioning,
    pending: &mut Vec<OutputFile>,
) -> Result<PathBuf, AnalyzeError> {
    let (mut trace, mut host, mut reason) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    let (mut cpu, mut count) = (Int32Builder::new(), Int64Builder::new());
    let mut start = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut end = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let (mut start_ns, mut end_ns) = (Int64Builder::new(), Int64Builder::new());
    for input in inputs {
        let h = input.reader.header();
        for l in input.reader.losses() {
            trace.append_value(&input.name);
            host.append_value(&h.hostname);
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
    use DataType::*;
    small_table(
        path,
        part,
        pending,
        vec![
            Field::new("trace", Utf8, false),
            Field::new("host", Utf8, false),
            Field::new("cpu", Int32, false),
            Field::new("reason", Utf8, false),
            Field::new("count", Int64, false),
            Field::new("start", utc(), false),
            Field::new("end", utc(), false),
            Field::new("start_ns", Int64, false),
            Field::new("end_ns", Int64, false),
        ],
        vec![
            Arc::new(trace.finish()),
            Arc::new(host.finish()),
            Arc::new(cpu.finish()),
            Arc::new(reason.finish()),
            Arc::new(count.finish()),
            Arc::new(start.finish()),
            Arc::new(end.finish()),
            Arc::new(start_ns.finish()),
            Arc::new(end_ns.finish()),
        ],
    )
}
