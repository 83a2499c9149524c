//! The layouts of the Parquet tables of `iodump convert`, and reading their columns whatever
//! the layout, so that `iodump analyze` reads the datasets of every iodump so far.
//!
//! * Layout 2 (current): only types that every engine reads with its default settings
//!   (Spark, DuckDB, polars, pandas/pyarrow, DataFusion): timestamps as
//!   `TIMESTAMP(MICROS, UTC)` with the exact nanoseconds beside them (`timestamp_ns`, Int64),
//!   and signed integers only (uint16 became int32, uint32 and uint64 int64). Each file says
//!   its layout in its key-value metadata ([`LAYOUT_KEY`]).
//! * Layout 1 (iodump 0.1.0's first tables, no layout key): `TIMESTAMP(NANOS, UTC)` and
//!   unsigned integers (which Spark refuses, or widens to decimal(20,0)).
//!
//! A file of a later layout is refused with [`AnalyzeError::Layout`] (convert the traces
//! again with this iodump).

use std::path::Path;

use arrow_array::{
    Array, Int16Array, Int32Array, Int64Array, RecordBatch, TimestampNanosecondArray, UInt16Array,
    UInt32Array, UInt64Array,
};
use parquet::file::metadata::{FileMetaData, ParquetMetaData};
use parquet::file::statistics::Statistics;

use crate::AnalyzeError;

/// The key-value metadata key of each Parquet file that holds its layout number.
pub const LAYOUT_KEY: &str = "iodump.layout";

/// The layout `iodump convert` writes.
pub const LAYOUT: u32 = 2;

/// The layout of a Parquet file of `iodump convert` (1 when it has no [`LAYOUT_KEY`]); a
/// layout this iodump does not know is [`AnalyzeError::Layout`].
pub(crate) fn check(path: &Path, meta: &FileMetaData) -> Result<u32, AnalyzeError> {
    let found = meta
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == LAYOUT_KEY))
        .map(|k| k.value.clone().unwrap_or_default());
    let Some(text) = found else {
        return Ok(1);
    };
    match text.trim().parse::<u32>() {
        Ok(n @ 1..=LAYOUT) => Ok(n),
        _ => Err(AnalyzeError::Layout {
            file: path.to_path_buf(),
            layout: text,
        }),
    }
}

/// The error for a column that is missing or of a type no layout gives it.
pub(crate) fn bad_column(name: &str) -> AnalyzeError {
    AnalyzeError::Query {
        message: format!(
            "Parquet column {name} is missing or has another type (not a table of `iodump \
             convert`? convert the traces again)"
        ),
    }
}

/// An integer column of a table of `iodump convert`, whatever its width and sign: signed in
/// layout 2, unsigned in layout 1. Values are read back as the unsigned values of the trace
/// (a 64-bit id of 2^63 or more, stored with the same bits in an int64, comes back whole).
pub(crate) enum IntColumn<'a> {
    I16(&'a Int16Array),
    I32(&'a Int32Array),
    I64(&'a Int64Array),
    U16(&'a UInt16Array),
    U32(&'a UInt32Array),
    U64(&'a UInt64Array),
}

/// Evaluates `$body` with `$a` bound to the typed array of the column.
macro_rules! each {
    ($c:expr, $a:ident => $body:expr) => {
        match $c {
            IntColumn::I16($a) => $body,
            IntColumn::I32($a) => $body,
            IntColumn::I64($a) => $body,
            IntColumn::U16($a) => $body,
            IntColumn::U32($a) => $body,
            IntColumn::U64($a) => $body,
        }
    };
}

// One expression serves every width, so that some arms cast a type to itself.
#[allow(clippy::unnecessary_cast)]
impl<'a> IntColumn<'a> {
    /// Column `name` of `b`.
    pub fn of(b: &'a RecordBatch, name: &str) -> Result<IntColumn<'a>, AnalyzeError> {
        b.column_by_name(name)
            .and_then(|c| IntColumn::from_array(c.as_ref()))
            .ok_or_else(|| bad_column(name))
    }

    /// The array as an integer column (None: not an integer array).
    pub fn from_array(a: &'a dyn Array) -> Option<IntColumn<'a>> {
        let any = a.as_any();
        None.or_else(|| any.downcast_ref().map(IntColumn::I64))
            .or_else(|| any.downcast_ref().map(IntColumn::I32))
            .or_else(|| any.downcast_ref().map(IntColumn::I16))
            .or_else(|| any.downcast_ref().map(IntColumn::U64))
            .or_else(|| any.downcast_ref().map(IntColumn::U32))
            .or_else(|| any.downcast_ref().map(IntColumn::U16))
    }

    /// Whether row `i` is null.
    pub fn is_null(&self, i: usize) -> bool {
        each!(self, a => a.is_null(i))
    }

    /// Nulls in the column.
    pub fn null_count(&self) -> usize {
        each!(self, a => a.null_count())
    }

    /// Row `i` as a 64-bit value.
    pub fn u64(&self, i: usize) -> u64 {
        each!(self, a => a.value(i) as u64)
    }

    /// Row `i` of a column of 32-bit values of the trace.
    pub fn u32(&self, i: usize) -> u32 {
        each!(self, a => a.value(i) as u32)
    }

    /// Row `i` of a column of 16-bit values of the trace.
    pub fn u16(&self, i: usize) -> u16 {
        each!(self, a => a.value(i) as u16)
    }

    /// Appends every row (nulls as their placeholder value) as 64-bit values.
    pub fn extend_u64(&self, out: &mut Vec<u64>) {
        each!(self, a => out.extend(a.values().iter().map(|&v| v as u64)))
    }

    /// Appends every row of a column of 32-bit values of the trace.
    pub fn extend_u32(&self, out: &mut Vec<u32>) {
        each!(self, a => out.extend(a.values().iter().map(|&v| v as u32)))
    }

    /// Every row as 64-bit values.
    pub fn to_u64(&self) -> Vec<u64> {
        let mut v = Vec::with_capacity(self.rows());
        self.extend_u64(&mut v);
        v
    }

    /// Every row of a column of 32-bit values of the trace.
    pub fn to_u32(&self) -> Vec<u32> {
        let mut v = Vec::with_capacity(self.rows());
        self.extend_u32(&mut v);
        v
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        each!(self, a => a.len())
    }
}

/// The UTC nanoseconds of each I/O of an `io` batch: `timestamp_ns` (layout 2), or
/// `timestamp` in nanoseconds (layout 1).
pub(crate) fn utc_ns(b: &RecordBatch) -> Result<&[i64], AnalyzeError> {
    if let Some(c) = b.column_by_name("timestamp_ns") {
        return c
            .as_any()
            .downcast_ref::<Int64Array>()
            .map(|a| &a.values()[..])
            .ok_or_else(|| bad_column("timestamp_ns"));
    }
    b.column_by_name("timestamp")
        .and_then(|c| c.as_any().downcast_ref::<TimestampNanosecondArray>())
        .map(|a| &a.values()[..])
        .ok_or_else(|| bad_column("timestamp_ns"))
}

/// The smallest and largest UTC nanoseconds of row group `rg`, from the statistics of its
/// column `column` (of [`utc_ns_column`]) when they are exact and the column has no nulls
/// (what reading every row would give); `None` otherwise, and for layout 1's `timestamp`
/// (its statistics are in the file's own unit).
pub(crate) fn utc_ns_range(meta: &ParquetMetaData, rg: usize, column: &str) -> Option<(i64, i64)> {
    if column != "timestamp_ns" {
        return None;
    }
    let rg = meta.row_groups().get(rg)?;
    let c = rg
        .columns()
        .iter()
        .find(|c| c.column_path().parts() == [column])?;
    match c.statistics()? {
        Statistics::Int64(s)
            if s.null_count_opt() == Some(0) && s.min_is_exact() && s.max_is_exact() =>
        {
            let (&lo, &hi) = (s.min_opt()?, s.max_opt()?);
            (lo <= hi && rg.num_rows() > 0).then_some((lo, hi))
        }
        _ => None,
    }
}

/// The column `io` batches take their UTC nanoseconds from in a file of this schema.
pub(crate) fn utc_ns_column(schema: &arrow_schema::Schema) -> &'static str {
    if schema.field_with_name("timestamp_ns").is_ok() {
        "timestamp_ns"
    } else {
        "timestamp"
    }
}
