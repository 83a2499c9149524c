//! The Parquet input of both engines ([`crate::onepass`] and [`crate::query`]): the files of a
//! dataset `iodump convert` wrote (flat or hive-style), and one reader for each of its small
//! tables (`devices`, `processes`, `files`, `losses`, `cgroups`), each handling the older
//! layouts once. A leaf: it imports only [`crate::layout`] and the crate's error type.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{Array, BooleanArray, DictionaryArray, Int32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field as ArrowField, Schema};
use iodump_format::cgroup::{Cgroup, Identity, Runtime};
use iodump_format::expr::{Expr, Field, ResolvedView};
use iodump_format::inthash::IntMap;
use iodump_format::text::text_unbytes;
use iodump_format::{DevT, EventBatch, Flags, Op, Syscall};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;

use crate::layout::{self, IntColumn};
use crate::{parquet_read_error, AnalyzeError};

/// The files of one table of a dataset directory ([`table_files`]).
#[derive(Debug, Default)]
pub(crate) struct TableFiles {
    /// `DIR/TABLE.parquet`, when it is a file.
    pub flat: Option<PathBuf>,
    /// Every file below `DIR/TABLE/` (hive-style partitions), sorted: whatever its name
    /// (Hive and Trino write `000000_0`), as Spark and pyarrow read them.
    pub partitioned: Vec<PathBuf>,
}

/// The files of `table` in the dataset directory `dir`, in both layouts. Below `DIR/TABLE/`,
/// as Spark and pyarrow do, every file is read as Parquet, whatever its name (one that is not
/// Parquet is then an error naming it), but a file or directory whose name starts with `.`
/// or `_` is not part of the table (the hidden temporary file of a `convert` still running or killed, a
/// `_SUCCESS` marker, a `_temporary/` directory); links are followed, each directory read
/// once (a link to a directory above would otherwise read its files again and again).
pub(crate) fn table_files(dir: &Path, table: &str) -> TableFiles {
    let flat = dir.join(format!("{table}.parquet"));
    let mut out = TableFiles {
        flat: flat.is_file().then_some(flat),
        partitioned: Vec::new(),
    };
    let mut seen_dirs = std::collections::HashSet::new();
    let mut stack = vec![dir.join(table)];
    while let Some(d) = stack.pop() {
        let new_dir =
            std::fs::metadata(&d).is_ok_and(|m| m.is_dir() && seen_dirs.insert((m.dev(), m.ino())));
        let Some(rd) = new_dir.then(|| std::fs::read_dir(&d).ok()).flatten() else {
            continue;
        };
        for e in rd.flatten() {
            if matches!(e.file_name().as_encoded_bytes().first(), Some(b'.' | b'_')) {
                continue;
            }
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.partitioned.push(p);
            }
        }
    }
    out.partitioned.sort();
    out
}

/// True when the dataset directory `dir` has `table`: `DIR/TABLE.parquet`, or a directory
/// `DIR/TABLE/`, which may hold no Parquet file at all (a table of no rows as Spark or DuckDB
/// write it: only a `_SUCCESS` marker, or nothing), read as a table of no rows.
pub(crate) fn has_table(dir: &Path, table: &str) -> bool {
    dir.join(format!("{table}.parquet")).is_file() || dir.join(table).is_dir()
}

/// The Parquet files of `table` in a `convert` output directory: `DIR/TABLE.parquet`, or
/// else the partitioned ones of [`table_files`] (a dataset with both is refused before it is
/// read: [`crate::AnalyzeError::MixedLayouts`]).
pub(crate) fn parquet_files(dir: &Path, table: &str) -> Vec<PathBuf> {
    let t = table_files(dir, table);
    t.flat.map_or(t.partitioned, |f| vec![f])
}

/// The host a partitioned table's file `file` is of: the name of its `host=NAME` directory
/// below `DIR/TABLE/` (as written there), `None` when it has none.
fn host_of_partition(file: &Path) -> Option<String> {
    file.ancestors()
        .skip(1)
        .filter_map(|d| d.file_name()?.to_str()?.strip_prefix("host="))
        .next()
        .map(str::to_string)
}

/// Refuses a dataset that holds one trace twice ([`AnalyzeError::TraceTwiceInDataset`]):
/// under two hosts (traces of one file name from two machines, their trees merged: one's
/// files and processes would be joined to the other's I/O), or twice over (a copy beside
/// it: every count doubled). Checked on the small `devices` and `processes` tables, whose
/// rows are one per device and thread of a trace: a trace's `host` (its column, or its
/// `host=` partition) is one, and a device number or thread appears once per trace, in
/// whichever files a tool split the table into.
pub(crate) fn check_each_trace_once(dir: &Path) -> Result<(), AnalyzeError> {
    use std::collections::hash_map::Entry;
    use std::collections::HashMap;
    for (table, key) in [("devices", "dev_t"), ("processes", "tid")] {
        let mut host_of: HashMap<String, String> = HashMap::new();
        let mut seen: HashMap<(String, String), PathBuf> = HashMap::new();
        for p in parquet_files(dir, table) {
            let dir_host = host_of_partition(&p);
            for b in read_batches(&p)? {
                let trace = arrow_col::<StringArray>(&b, "trace")?;
                let host = match b.column_by_name("host") {
                    Some(_) => Some(arrow_col::<StringArray>(&b, "host")?),
                    None => None,
                };
                let keys: Vec<String> = match key {
                    "tid" => IntColumn::of(&b, key)?
                        .to_u64()
                        .iter()
                        .map(u64::to_string)
                        .collect(),
                    _ => {
                        let a = arrow_col::<StringArray>(&b, key)?;
                        (0..b.num_rows()).map(|i| a.value(i).to_string()).collect()
                    }
                };
                for (i, k) in keys.into_iter().enumerate() {
                    let t = trace.value(i);
                    let twice = |how: String| AnalyzeError::TraceTwiceInDataset {
                        dir: dir.to_path_buf(),
                        trace: t.to_string(),
                        table,
                        how,
                    };
                    let h = host.map_or(dir_host.as_deref().unwrap_or(""), |h| h.value(i));
                    match host_of.get(t) {
                        Some(h0) if h0 != h => {
                            return Err(twice(format!("under two hosts, {h0:?} and {h:?}")))
                        }
                        Some(_) => {}
                        None => {
                            host_of.insert(t.to_string(), h.to_string());
                        }
                    }
                    match seen.entry((t.to_string(), k)) {
                        Entry::Occupied(e) => {
                            return Err(twice(format!(
                                "twice (its {key} {} in {} and in {})",
                                e.key().1,
                                e.get().display(),
                                p.display()
                            )))
                        }
                        Entry::Vacant(e) => {
                            e.insert(p.clone());
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The traces each small table of a dataset has rows of (`files`, `processes`, `devices`),
/// to refuse I/O of a trace one of them lacks ([`TraceTables::check_io_file`]).
pub(crate) struct TraceTables(Vec<(&'static str, std::collections::HashSet<String>)>);

impl TraceTables {
    /// The tables a trace's I/O needs: without its `files` rows every I/O would count as of
    /// no file, without `processes` of no process, without `devices` of no device.
    const TABLES: [&'static str; 3] = ["files", "processes", "devices"];

    /// The trace names of the dataset's small tables (their `trace` column only).
    pub(crate) fn load(dir: &Path) -> Result<TraceTables, AnalyzeError> {
        let mut out = Vec::new();
        for table in Self::TABLES {
            let mut names = std::collections::HashSet::new();
            for p in parquet_files(dir, table) {
                let f = std::fs::File::open(&p).map_err(parquet_read_error(&p))?;
                let m = reader_metadata(&f, &[]).map_err(parquet_read_error(&p))?;
                let b = ParquetRecordBatchReaderBuilder::new_with_metadata(f, m);
                let mask = ProjectionMask::columns(b.parquet_schema(), ["trace"]);
                for batch in b
                    .with_projection(mask)
                    .build()
                    .map_err(parquet_read_error(&p))?
                {
                    let batch = batch.map_err(parquet_read_error(&p))?;
                    let t = TextCol::of(&batch, "trace")?;
                    for i in 0..batch.num_rows() {
                        if i == 0 || !t.same(i, i - 1) {
                            names.insert(t.value(i).to_string());
                        }
                    }
                }
            }
            out.push((table, names));
        }
        Ok(TraceTables(out))
    }

    /// Refuses `io` file `file` when the statistics of a row group's `trace` column (its
    /// smallest and largest name, when exact) name a trace that a small table has no row of
    /// ([`AnalyzeError::IoOfMissingTrace`]): read from the file's footer, no row is read (a
    /// row group without statistics, or a trace between its smallest and largest name, is
    /// not checked).
    pub(crate) fn check_io_file(
        &self,
        file: &Path,
        meta: &parquet::file::metadata::ParquetMetaData,
    ) -> Result<(), AnalyzeError> {
        use parquet::file::statistics::Statistics;
        for rg in meta.row_groups() {
            let Some(c) = rg
                .columns()
                .iter()
                .find(|c| c.column_path().parts() == ["trace"])
            else {
                continue;
            };
            let Some(Statistics::ByteArray(s)) = c.statistics() else {
                continue;
            };
            let ends = [
                s.min_is_exact().then(|| s.min_opt()).flatten(),
                s.max_is_exact().then(|| s.max_opt()).flatten(),
            ];
            for name in ends.into_iter().flatten().filter_map(|v| v.as_utf8().ok()) {
                if let Some((table, _)) = self.0.iter().find(|(_, n)| !n.contains(name)) {
                    return Err(AnalyzeError::IoOfMissingTrace {
                        file: file.to_path_buf(),
                        trace: name.to_string(),
                        table,
                    });
                }
            }
        }
        Ok(())
    }
}

/// The columns of the tables of `iodump convert` that hold a value in every row, and that
/// iodump reads as such (a null would be read as an arbitrary value): the others are
/// nullable (`queue_ns`, `syscall`, `generation`, `label`…) or read with their nulls.
pub(crate) const REQUIRED_COLUMNS: [&str; 26] = [
    "trace",
    "host",
    "timestamp",
    "timestamp_ns",
    "dev",
    "dev_t",
    "sector",
    "bytes",
    "op",
    "flags",
    "pid",
    "tid",
    "comm",
    "path_id",
    "path",
    "device_ns",
    "latency_ns",
    "error",
    "cpu",
    "cgroup_id",
    "name",
    "inode",
    "count",
    "start_ns",
    "end_ns",
    "start_sector",
];

/// Refuses a batch read from `file` with a null in a column of [`REQUIRED_COLUMNS`]
/// ([`AnalyzeError::NullsInColumn`]; `null_count` of each, no row is read).
pub(crate) fn check_no_nulls(b: &RecordBatch, file: &Path) -> Result<(), AnalyzeError> {
    let schema = b.schema();
    for (f, c) in schema.fields().iter().zip(b.columns()) {
        if c.null_count() > 0 && REQUIRED_COLUMNS.contains(&f.name().as_str()) {
            return Err(AnalyzeError::NullsInColumn {
                file: file.to_path_buf(),
                column: f.name().clone(),
            });
        }
    }
    Ok(())
}

/// Refuses `file` when the statistics of a row group (in its footer) count nulls in a column
/// of [`REQUIRED_COLUMNS`]: before any row is read, so that every engine refuses it alike
/// (a file without such statistics is checked batch by batch: [`check_no_nulls`]).
pub(crate) fn check_no_nulls_in_footer(
    file: &Path,
    meta: &parquet::file::metadata::ParquetMetaData,
) -> Result<(), AnalyzeError> {
    for rg in meta.row_groups() {
        for c in rg.columns() {
            let nulls = c.statistics().and_then(|s| s.null_count_opt());
            let name = c.column_path().string();
            if nulls.is_some_and(|n| n > 0) && REQUIRED_COLUMNS.contains(&name.as_str()) {
                return Err(AnalyzeError::NullsInColumn {
                    file: file.to_path_buf(),
                    column: name,
                });
            }
        }
    }
    Ok(())
}

/// Every record batch of one Parquet file, after checking its layout (its text columns as
/// `Utf8`: [`reader_metadata`]).
pub(crate) fn read_batches(p: &Path) -> Result<Vec<RecordBatch>, AnalyzeError> {
    let f = std::fs::File::open(p).map_err(parquet_read_error(p))?;
    let meta = reader_metadata(&f, &[]).map_err(parquet_read_error(p))?;
    layout::check(p, meta.metadata().file_metadata())?;
    check_no_nulls_in_footer(p, meta.metadata())?;
    let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(f, meta);
    let reader = builder.build().map_err(parquet_read_error(p))?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(parquet_read_error(p))?;
        check_no_nulls(&b, p)?;
        out.push(b);
    }
    Ok(out)
}

/// The type a text column of type `t` is read as, when it is not that already: `Utf8`, or
/// for `dict` a dictionary of `Utf8` (Int32 keys). Another tool's rewrite may store text as
/// `large_string` (polars, pandas), `string_view` (DataFusion) or a dictionary (a pandas
/// category): the same Parquet column, read as the type iodump's readers take.
fn text_type(t: &DataType, dict: bool) -> Option<DataType> {
    use DataType::*;
    let is_text = |t: &DataType| matches!(t, Utf8 | LargeUtf8 | Utf8View);
    let text = match t {
        Dictionary(_, v) => is_text(v),
        t => is_text(t),
    };
    let want = if dict {
        Dictionary(Box::new(Int32), Box::new(Utf8))
    } else {
        Utf8
    };
    (text && *t != want).then_some(want)
}

/// The schema to read a file of `schema` with: its text columns as `Utf8`, those named in
/// `dict` as dictionaries of `Utf8` ([`text_type`]); `None` when that is `schema` itself (the
/// files `iodump convert` wrote, but for the dictionaries asked).
fn reading_schema(schema: &Schema, dict: &[&str]) -> Option<Schema> {
    let mut changed = false;
    let fields: Vec<ArrowField> = (schema.fields().iter())
        .map(
            |f| match text_type(f.data_type(), dict.contains(&f.name().as_str())) {
                Some(t) => {
                    changed = true;
                    f.as_ref().clone().with_data_type(t)
                }
                None => f.as_ref().clone(),
            },
        )
        .collect();
    changed.then(|| Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The metadata to read Parquet file `file` with: its text columns as `Utf8`, those of
/// `dict` as dictionaries of it ([`reading_schema`]), whatever type the Arrow schema stored
/// in the file gives them; the file's own schema when that is it already. When the stored
/// schema cannot be read so, the file is read without it (types from the Parquet schema).
pub(crate) fn reader_metadata(
    file: &std::fs::File,
    dict: &[&str],
) -> Result<ArrowReaderMetadata, parquet::errors::ParquetError> {
    let meta = ArrowReaderMetadata::load(file, ArrowReaderOptions::new())?;
    let with = |options: ArrowReaderOptions| {
        let m = ArrowReaderMetadata::try_new(meta.metadata().clone(), options)?;
        match reading_schema(m.schema(), dict) {
            None => Ok(m),
            Some(s) => ArrowReaderMetadata::try_new(
                meta.metadata().clone(),
                ArrowReaderOptions::new().with_schema(Arc::new(s)),
            ),
        }
    };
    match reading_schema(meta.schema(), dict) {
        None => Ok(meta),
        Some(_) => with(ArrowReaderOptions::new())
            .or_else(|_| with(ArrowReaderOptions::new().with_skip_arrow_metadata(true))),
    }
}

/// Column `name` of `b` as an array of type `T` (absent or of another type: a layout error).
pub(crate) fn arrow_col<'a, T: 'static>(
    b: &'a RecordBatch,
    name: &str,
) -> Result<&'a T, AnalyzeError> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| layout::bad_column(name))
}

/// The `io` columns of few distinct values that the one-pass reader asks for as dictionaries
/// ([`io_reader_metadata`]): their rows are then compared and looked up by key, not by text
/// (`path`, of as many values as files, stays plain).
pub(crate) const IO_DICTIONARY_COLUMNS: [&str; 8] = [
    "trace",
    "dev_t",
    "op",
    "upper_dev",
    "dev",
    "comm",
    "flags",
    "syscall",
];

/// The metadata to read `file`'s `io` row groups with: its text columns of
/// [`IO_DICTIONARY_COLUMNS`] read as dictionaries of their text (what `iodump convert` wrote:
/// a dictionary per column chunk, kept rather than expanded row by row), the others as
/// `Utf8` ([`reader_metadata`]).
pub(crate) fn io_reader_metadata(
    file: &std::fs::File,
) -> Result<ArrowReaderMetadata, parquet::errors::ParquetError> {
    reader_metadata(file, &IO_DICTIONARY_COLUMNS)
}

/// A text column of a batch: plain, or a dictionary of text ([`IO_DICTIONARY_COLUMNS`]).
#[derive(Clone, Copy)]
pub(crate) enum TextCol<'a> {
    Plain(&'a StringArray),
    Dict {
        keys: &'a Int32Array,
        values: &'a StringArray,
        /// True when a row may be null (the keys or the values have nulls).
        nulls: bool,
    },
}

impl<'a> TextCol<'a> {
    /// Column `name` of `b` (absent or not text: a layout error).
    pub(crate) fn of(b: &'a RecordBatch, name: &str) -> Result<TextCol<'a>, AnalyzeError> {
        let c = b
            .column_by_name(name)
            .ok_or_else(|| layout::bad_column(name))?;
        if let Some(a) = c.as_any().downcast_ref::<StringArray>() {
            return Ok(TextCol::Plain(a));
        }
        c.as_any()
            .downcast_ref::<DictionaryArray<Int32Type>>()
            .and_then(|d| {
                let values = d.values().as_any().downcast_ref::<StringArray>()?;
                // Every key of a row that is not null indexes the values (checked once here,
                // so that a row's text is found without a check).
                let keys = d.keys();
                let in_range = (0..keys.len()).all(|i| {
                    keys.is_null(i)
                        || usize::try_from(keys.value(i)).is_ok_and(|k| k < values.len())
                });
                let nulls = keys.null_count() > 0 || values.null_count() > 0;
                in_range.then_some(TextCol::Dict {
                    keys,
                    values,
                    nulls,
                })
            })
            .ok_or_else(|| layout::bad_column(name))
    }

    /// The text of row `i` (empty when null, as a plain column's null rows hold).
    #[inline]
    pub(crate) fn value(&self, i: usize) -> &'a str {
        match self {
            TextCol::Plain(a) => a.value(i),
            TextCol::Dict {
                keys, nulls: true, ..
            } if keys.is_null(i) => "",
            TextCol::Dict { keys, values, .. } => values.value(keys.value(i) as usize),
        }
    }

    /// True when row `i` is null.
    #[inline]
    pub(crate) fn is_null(&self, i: usize) -> bool {
        match self {
            TextCol::Plain(a) => a.is_null(i),
            TextCol::Dict {
                keys,
                values,
                nulls,
            } => *nulls && (keys.is_null(i) || values.is_null(keys.value(i) as usize)),
        }
    }

    /// True when every row is null.
    pub(crate) fn all_null(&self) -> bool {
        match self {
            TextCol::Plain(a) => a.null_count() == a.len(),
            TextCol::Dict { keys, .. } => (0..keys.len()).all(|i| self.is_null(i)),
        }
    }

    /// True when rows `i` and `j` surely hold the same text, or are both null: a plain
    /// column's texts are compared, a dictionary's keys only (two keys of the same text are
    /// "not surely the same": the caller looks the row up again, and finds the same).
    #[inline]
    pub(crate) fn same(&self, i: usize, j: usize) -> bool {
        match self {
            TextCol::Dict {
                keys, nulls: false, ..
            } => keys.value(i) == keys.value(j),
            _ => match (self.is_null(i), self.is_null(j)) {
                (true, true) => true,
                (false, false) => match self {
                    TextCol::Dict { keys, .. } => keys.value(i) == keys.value(j),
                    TextCol::Plain(_) => self.value(i) == self.value(j),
                },
                _ => false,
            },
        }
    }
}

/// `MAJ:MIN` (a `dev_t` column of `iodump convert`'s tables) as the trace's device number;
/// anything else is an error naming the file it was read from.
pub(crate) fn parse_dev_t(s: &str, file: &Path) -> Result<u32, AnalyzeError> {
    DevT::parse(s)
        .map(|d| d.0)
        .ok_or_else(|| AnalyzeError::Query {
            message: format!(
                "{}: dev_t {s:?} is not a device number (MAJ:MIN)",
                file.display()
            ),
        })
}

/// A row of a dataset's `devices` table.
pub(crate) struct DeviceRow {
    pub trace: String,
    /// `MAJ:MIN`, as written.
    pub dev_t: String,
    /// `dev_t` as a number ([`parse_dev_t`]: a table with another text is an error).
    pub number: DevT,
    /// Kernel name (`sda1`, `dm-0`).
    pub name: String,
    /// `MAJ:MIN` of the disk it is a partition of.
    pub partition_of: Option<String>,
    /// True for a stacked device (LVM, dm-crypt, md, an NVMe multipath head): its
    /// `stacked_on` has an entry (absent from datasets written before format 1.3).
    pub stacked: bool,
}

/// The rows of a dataset's `devices` tables.
pub(crate) fn devices_table(dir: &Path) -> Result<Vec<DeviceRow>, AnalyzeError> {
    let mut out = Vec::new();
    for p in parquet_files(dir, "devices") {
        for b in read_batches(&p)? {
            let trace = arrow_col::<StringArray>(&b, "trace")?;
            let dev_t = arrow_col::<StringArray>(&b, "dev_t")?;
            let name = arrow_col::<StringArray>(&b, "name")?;
            // Read only by `analyze -d`: a table without it names no partitions.
            let part = match b.column_by_name("partition_of") {
                None => None,
                Some(_) => Some(arrow_col::<StringArray>(&b, "partition_of")?),
            };
            // `MAJ:MIN,…`, null for other devices.
            let on = b
                .column_by_name("stacked_on")
                .and_then(|a| a.as_any().downcast_ref::<StringArray>());
            for i in 0..b.num_rows() {
                out.push(DeviceRow {
                    stacked: on.is_some_and(|a| !a.is_null(i) && !a.value(i).is_empty()),
                    trace: trace.value(i).into(),
                    dev_t: dev_t.value(i).into(),
                    number: DevT(parse_dev_t(dev_t.value(i), &p)?),
                    name: name.value(i).into(),
                    partition_of: part
                        .filter(|a| !a.is_null(i))
                        .map(|a| a.value(i).to_string()),
                });
            }
        }
    }
    Ok(out)
}

/// A row of a dataset's `processes` table.
pub(crate) struct ProcessRow {
    pub trace: String,
    pub tid: u32,
    pub pid: u32,
    pub comm: String,
    /// The command line; the comm in tables written before iodump recorded command lines.
    pub args: String,
}

/// The rows of a dataset's `processes` tables; a table without `args` (written before iodump
/// recorded command lines) gives the comm.
pub(crate) fn processes_table(dir: &Path) -> Result<Vec<ProcessRow>, AnalyzeError> {
    let mut out = Vec::new();
    for p in parquet_files(dir, "processes") {
        for b in read_batches(&p)? {
            let trace = arrow_col::<StringArray>(&b, "trace")?;
            let comm = arrow_col::<StringArray>(&b, "comm")?;
            let args = b
                .column_by_name("args")
                .and_then(|c| c.as_any().downcast_ref::<StringArray>());
            let (tid, pid) = (IntColumn::of(&b, "tid")?, IntColumn::of(&b, "pid")?);
            for i in 0..b.num_rows() {
                let c = comm.value(i).to_string();
                let a = match args {
                    Some(a) if !a.is_null(i) => a.value(i).to_string(),
                    _ => c.clone(),
                };
                out.push(ProcessRow {
                    trace: trace.value(i).into(),
                    tid: tid.u32(i),
                    pid: pid.u32(i),
                    comm: c,
                    args: a,
                });
            }
        }
    }
    Ok(out)
}

/// A row of a dataset's `cgroups` table.
pub(crate) struct CgroupRow {
    pub trace: String,
    pub cgroup: Cgroup,
}

/// The rows of a dataset's `cgroups` tables (none in datasets written before iodump recorded
/// cgroups, or of traces without a cgroups table).
pub(crate) fn cgroups_table(dir: &Path) -> Result<Vec<CgroupRow>, AnalyzeError> {
    let mut out = Vec::new();
    for p in parquet_files(dir, "cgroups") {
        for b in read_batches(&p)? {
            let s = |name| arrow_col::<StringArray>(&b, name);
            let (trace, path) = (s("trace")?, s("path")?);
            let (runtime, container_id) = (s("runtime")?, s("container_id")?);
            let (pod_uid, qos, unit) = (s("pod_uid")?, s("qos")?, s("unit")?);
            let monitor = arrow_col::<BooleanArray>(&b, "monitor")?;
            let id = IntColumn::of(&b, "cgroup_id")?;
            for i in 0..b.num_rows() {
                let text = |a: &StringArray| (!a.is_null(i)).then(|| a.value(i).to_string());
                let runtime =
                    text(runtime).and_then(|r| Runtime::ALL.into_iter().find(|x| x.name() == r));
                out.push(CgroupRow {
                    trace: trace.value(i).into(),
                    cgroup: Cgroup {
                        id: id.u64(i),
                        path: path.value(i).into(),
                        identity: Identity {
                            runtime,
                            container_id: text(container_id),
                            monitor: monitor.value(i),
                            pod_uid: text(pod_uid),
                            qos: text(qos),
                            unit: text(unit),
                        },
                    },
                });
            }
        }
    }
    Ok(out)
}

/// A dataset's cgroups by trace and cgroup id, for filters on container and cgroup fields.
#[derive(Default)]
pub(crate) struct DatasetCgroups(
    std::collections::HashMap<String, std::collections::HashMap<u64, Cgroup>>,
);

impl DatasetCgroups {
    /// The cgroups of the `cgroups` tables under `dir`.
    pub(crate) fn load(dir: &Path) -> Result<DatasetCgroups, AnalyzeError> {
        let mut by = DatasetCgroups::default();
        for r in cgroups_table(dir)? {
            by.0.entry(r.trace)
                .or_default()
                .insert(r.cgroup.id, r.cgroup);
        }
        Ok(by)
    }

    /// The cgroup `id` of trace `trace`.
    pub(crate) fn get(&self, trace: &str, id: u64) -> Option<&Cgroup> {
        self.0.get(trace)?.get(&id)
    }
}

/// A row of a dataset's `files` table.
pub(crate) struct FileRow {
    pub trace: String,
    pub path_id: u32,
    /// The device number ([`parse_dev_t`]).
    pub dev: u32,
    pub inode: u64,
    /// None in tables written before iodump recorded generations.
    pub generation: Option<u32>,
    pub path: String,
    /// The file was unlinked when its path was taken.
    pub deleted: bool,
}

/// The rows of a dataset's `files` tables.
pub(crate) fn files_table(dir: &Path) -> Result<Vec<FileRow>, AnalyzeError> {
    let mut out = Vec::new();
    for p in parquet_files(dir, "files") {
        for b in read_batches(&p)? {
            let trace = arrow_col::<StringArray>(&b, "trace")?;
            let path = arrow_col::<StringArray>(&b, "path")?;
            let dev_t = arrow_col::<StringArray>(&b, "dev_t")?;
            let id = IntColumn::of(&b, "path_id")?;
            let inode = IntColumn::of(&b, "inode")?;
            let deleted = arrow_col::<BooleanArray>(&b, "deleted")?;
            // Absent from tables written before iodump recorded generations.
            let generation = IntColumn::of(&b, "generation").ok();
            for i in 0..b.num_rows() {
                out.push(FileRow {
                    trace: trace.value(i).into(),
                    path_id: id.u32(i),
                    dev: parse_dev_t(dev_t.value(i), &p)?,
                    inode: inode.u64(i),
                    generation: generation
                        .as_ref()
                        .filter(|g| !g.is_null(i))
                        .map(|g| g.u32(i)),
                    path: path.value(i).into(),
                    deleted: deleted.is_valid(i) && deleted.value(i),
                });
            }
        }
    }
    Ok(out)
}

/// Events lost while recording: the sum of the `losses` table's counts.
pub(crate) fn parquet_lost_events(dir: &Path) -> Result<u64, AnalyzeError> {
    let mut lost = 0u64;
    for p in parquet_files(dir, "losses") {
        for b in read_batches(&p)? {
            lost += IntColumn::of(&b, "count")?.to_u64().iter().sum::<u64>();
        }
    }
    Ok(lost)
}

/// The columns of an `io` table a filter reads, besides `trace` and the timestamp
/// ([`crate::layout::utc_ns_column`]), which a reader always takes: a row group read with only
/// these (and what the query itself reads) is enough for [`parquet_filter_mask`].
pub(crate) fn parquet_filter_columns(f: &Expr) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for field in f.fields() {
        let cols: &[&'static str] = match field {
            Field::Bytes => &["bytes"],
            Field::Op => &["op"],
            Field::Sector => &["sector"],
            Field::Pid => &["pid"],
            Field::Tid => &["tid"],
            Field::Comm => &["comm"],
            Field::Path => &["path"],
            // The name, or the number for `dev == 8:1`.
            Field::Dev => &["dev", "dev_t"],
            Field::Latency => &["latency_ns"],
            Field::Queue => &["queue_ns"],
            Field::DeviceTime => &["latency_ns", "queue_ns"],
            Field::Cpu => &["cpu"],
            Field::Error => &["error"],
            Field::Syscall => &["syscall"],
            Field::Cgroup | Field::CgroupPath | Field::Container | Field::Pod | Field::Runtime => {
                &["cgroup_id"]
            }
            Field::Dirtier => &["dirtier_pid"],
            Field::Time => &[],
            Field::Flag(_) => &["flags"],
        };
        for c in cols {
            if !out.contains(c) {
                out.push(c);
            }
        }
    }
    out
}

/// The `io` columns that let [`parquet_filter_mask`] ask a comparison of `f` once per key
/// rather than once per row, when the dataset has them: a path's path id (the other text
/// fields' keys are columns `f` reads already; a comm's is its text).
pub(crate) fn parquet_filter_key_columns(f: &Expr) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for field in f.fields() {
        let cols: &[&'static str] = match field {
            Field::Path => &["path_id"],
            _ => &[],
        };
        for c in cols {
            if !out.contains(c) {
                out.push(c);
            }
        }
    }
    out
}

/// The rows of an `io` batch that `f` keeps, as a mask: the filter is evaluated a column at a
/// time ([`Expr::select`]) on the batch's columns read back as the trace's values, one run of
/// rows of the same trace at a time; a comparison of text (comm, path, device name, cgroup,
/// syscall) is evaluated once per thread, path id, device, cgroup or syscall of the run, on
/// its row rebuilt as an [`iodump_format::Event`] with its names (text columns read back with
/// `text_unbytes`) and its cgroup (`cgroup_of(trace, cgroup id)`, from the dataset's `cgroups`
/// table). `file`: where the batch was read, for the messages. The batch needs only `trace`,
/// the timestamp and the columns [`parquet_filter_columns`] names: the fields of the columns
/// it lacks are placeholders the filter does not read.
pub(crate) fn parquet_filter_mask<'c>(
    b: &RecordBatch,
    f: &Expr,
    cgroup_of: &dyn Fn(&str, u64) -> Option<&'c Cgroup>,
    file: &Path,
) -> Result<Vec<bool>, AnalyzeError> {
    let trace = TextCol::of(b, "trace")?;
    let has = |name: &str| b.column_by_name(name).is_some();
    // A column the filter reads is never taken as absent: a dataset without it is an error.
    if let Some(missing) = parquet_filter_columns(f).into_iter().find(|c| !has(c)) {
        return Err(layout::bad_column(missing));
    }
    let s = |name| -> Result<Option<&StringArray>, AnalyzeError> {
        has(name)
            .then(|| arrow_col::<StringArray>(b, name))
            .transpose()
    };
    let text = |name| -> Result<Option<TextCol<'_>>, AnalyzeError> {
        has(name).then(|| TextCol::of(b, name)).transpose()
    };
    // Integers of any width and sign (layouts 1 and 2), read back as the trace's values.
    let int = |name| -> Result<Option<IntColumn<'_>>, AnalyzeError> {
        has(name).then(|| IntColumn::of(b, name)).transpose()
    };
    let (dev, dev_t, op, flags, comm, path, syscall) = (
        text("dev")?,
        text("dev_t")?,
        text("op")?,
        text("flags")?,
        text("comm")?,
        s("path")?,
        text("syscall")?,
    );
    let n = b.num_rows();
    let utc = crate::layout::utc_ns(b)?;
    // The batch's columns as a trace's (a column the batch lacks stays empty: its field reads
    // as 0 or null, as `EventBatch::get_projected` gives it).
    let mut fb = EventBatch {
        rows: n,
        timestamp_ns: utc.iter().map(|&t| t as u64).collect(),
        ..EventBatch::default()
    };
    if let Some(c) = int("sector")? {
        c.extend_u64(&mut fb.sector);
    }
    if let Some(c) = int("bytes")? {
        c.extend_u32(&mut fb.bytes);
    }
    // A dataset's comm is its row's (a thread's comm changes at exec), not its thread's, as
    // the text comparisons `select` asks once per thread would take it: with a filter on
    // comm, the threads' columns stay out of the batch (comparisons of pid or tid then go
    // row by row) and a comm's comparison is asked once per comm instead (`row` below).
    let by_comm = f.fields().contains(&Field::Comm);
    let (pid, tid) = (int("pid")?, int("tid")?);
    if !by_comm {
        if let Some(c) = &pid {
            c.extend_u32(&mut fb.pid);
        }
        if let Some(c) = &tid {
            c.extend_u32(&mut fb.tid);
        }
    }
    if let Some(c) = int("path_id")? {
        c.extend_u32(&mut fb.path_id);
    }
    if let Some(c) = int("latency_ns")? {
        c.extend_u64(&mut fb.latency_ns);
    }
    if let Some(c) = int("cgroup_id")? {
        c.extend_u64(&mut fb.cgroup_id);
    }
    if let Some(c) = int("error")? {
        fb.error.extend((0..n).map(|i| c.u16(i)));
    }
    if let Some(c) = int("cpu")? {
        fb.cpu.extend((0..n).map(|i| c.u16(i)));
    }
    // Null when absent, as an absent field of a trace.
    let nullable = |c: &IntColumn<'_>, i| (!c.is_null(i)).then(|| c.u64(i));
    if let Some(c) = int("queue_ns")? {
        fb.queue_ns = (0..n).map(|i| nullable(&c, i)).collect();
    }
    if let Some(c) = int("dirtier_pid")? {
        fb.dirtier_pid = (0..n).map(|i| nullable(&c, i).map(|_| c.u32(i))).collect();
    }
    if let Some(a) = dev_t {
        let mut number = 0;
        for i in 0..n {
            if i == 0 || !a.same(i, i - 1) {
                number = parse_dev_t(a.value(i), file)?;
            }
            fb.dev.push(number);
        }
    }
    if let Some(a) = op {
        let mut code = Op::Other.code();
        for i in 0..n {
            if i == 0 || !a.same(i, i - 1) {
                let name = a.value(i);
                code = Op::ALL
                    .iter()
                    .find(|o| o.name() == name)
                    .unwrap_or(&Op::Other)
                    .code();
            }
            fb.op.push(code);
        }
    }
    if let Some(a) = flags {
        let mut bits = 0;
        for i in 0..n {
            if i == 0 || !a.same(i, i - 1) {
                bits = Flags::from_letters(a.value(i)).0;
            }
            fb.flags.push(bits);
        }
    }
    if let Some(a) = syscall {
        fb.syscall = (0..n)
            .map(|i| {
                (!a.is_null(i))
                    .then(|| Syscall::from_name(a.value(i)))
                    .flatten()
            })
            .map(|c| c.map(|c| c.0))
            .collect();
    }
    // A row's cgroup is looked up only for a filter that reads it.
    let cgroups = f.uses_cgroup_table();
    // What each comparison of comm said of each comm (its key in the batch's dictionary).
    let said: std::cell::RefCell<IntMap<(usize, u32), bool>> = Default::default();
    let comm_key = |x: &Expr, i: usize| match (x, comm) {
        (
            Expr::Cmp(Field::Comm, _, _),
            Some(TextCol::Dict {
                keys, nulls: false, ..
            }),
        ) => Some((x as *const Expr as usize, keys.value(i) as u32)),
        _ => None,
    };
    // Row `i` with its names, as `eval` reads it.
    let row = |x: &Expr, i: usize| {
        let key = comm_key(x, i);
        if let Some(keeps) = key.and_then(|k| said.borrow().get(&k).copied()) {
            return keeps;
        }
        let mut e = fb.get_projected(i);
        if by_comm {
            e.pid = pid.as_ref().map_or(0, |c| c.u32(i));
            e.tid = tid.as_ref().map_or(0, |c| c.u32(i));
        }
        // The trace's clock: no filter reads it (`time` compares the UTC column).
        e.timestamp_ns = 0;
        let c = comm.map(|a| text_unbytes(a.value(i))).unwrap_or_default();
        let p = path.map(|a| text_unbytes(a.value(i))).unwrap_or_default();
        let v = ResolvedView {
            comm: &c,
            path: &p,
            dev: dev.map_or("?", |a| a.value(i)),
            cgroup: cgroups
                .then(|| cgroup_of(trace.value(i), e.cgroup_id))
                .flatten(),
            utc_ns: utc.get(i).copied(),
        };
        let keeps = x.eval(&e, &v);
        if let Some(k) = key {
            said.borrow_mut().insert(k, keeps);
        }
        keeps
    };
    // Runs of one trace: the ids the text comparisons are asked once for are the trace's.
    let mut mask = vec![false; n];
    let mut keep = Vec::new();
    let mut lo = 0;
    while lo < n {
        let hi = (lo + 1..n).find(|&i| !trace.same(i, lo)).unwrap_or(n);
        let run = if (lo, hi) == (0, n) {
            std::borrow::Cow::Borrowed(&fb)
        } else {
            std::borrow::Cow::Owned(fb.slice(lo, hi))
        };
        keep.clear();
        f.select(&run, &|t| t as i64, &|x, i| row(x, lo + i), &mut keep);
        for &k in &keep {
            mask[lo + k as usize] = true;
        }
        lo = hi;
    }
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dictionary's text, nulls and "surely the same" rows, as the plain column's.
    #[test]
    fn a_text_column_reads_the_same_plain_or_as_a_dictionary() {
        use arrow_array::builder::StringDictionaryBuilder;
        let rows = [
            Some("read"),
            Some("read"),
            None,
            Some("write"),
            None,
            Some("read"),
        ];
        let plain: StringArray = rows.iter().copied().collect();
        let mut d = StringDictionaryBuilder::<Int32Type>::new();
        for r in rows {
            d.append_option(r);
        }
        let dict = d.finish();
        let schema = Arc::new(Schema::new(vec![
            ArrowField::new("p", DataType::Utf8, true),
            ArrowField::new("d", dict.data_type().clone(), true),
        ]));
        let b = RecordBatch::try_new(schema, vec![Arc::new(plain), Arc::new(dict)]).unwrap();
        let (p, d) = (TextCol::of(&b, "p").unwrap(), TextCol::of(&b, "d").unwrap());
        assert!(matches!(d, TextCol::Dict { nulls: true, .. }));
        for i in 0..rows.len() {
            assert_eq!(p.is_null(i), rows[i].is_none());
            assert_eq!(d.is_null(i), rows[i].is_none());
            let t = rows[i].unwrap_or("");
            assert_eq!((p.value(i), d.value(i)), (t, t));
            for j in 0..rows.len() {
                assert_eq!(p.same(i, j), rows[i] == rows[j], "{i} {j}");
                // A dictionary may say "not surely" of the same text, never "same" of two.
                assert!(!d.same(i, j) || rows[i] == rows[j], "{i} {j}");
            }
        }
        assert!(!p.all_null() && !d.all_null());
        assert!(TextCol::of(&b, "x").is_err());
    }

    #[test]
    fn a_malformed_device_number_is_an_error_not_0_0() {
        let f = Path::new("ds/files/part-0.parquet");
        assert_eq!(parse_dev_t("8:1", f).unwrap(), DevT::new(8, 1).0);
        assert_eq!(parse_dev_t("0:0", f).unwrap(), 0);
        // What reads as a device number: `DevT::parse`'s test.
        for bad in ["", "8:1x", "4096:0"] {
            let e = parse_dev_t(bad, f).unwrap_err().to_string();
            assert!(
                e.contains("not a device number") && e.contains("part-0"),
                "{bad}: {e}"
            );
        }
    }
}
