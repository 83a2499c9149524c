//! `iodump-analyze` owns offline analysis of traces: the Parquet tables of `iodump convert`
//! ([`to_parquet`]) and the exports (`export`: CSV with the original iodump's columns first,
//! JSON lines, fio's version 3 iolog for replay, a Perfetto trace: [`perfetto`]); the queries
//! of `iodump analyze` behind [`run`] ([`engine`]), answered in one pass ([`onepass`], reading traces and Parquet through
//! `onepass_source`) or on the polars table ([`query`]), both reading Parquet datasets
//! through `parquet_input`; the report and plots of `iodump
//! report` and `iodump plot` ([`report`], [`plot`]: binned in one parallel pass, no polars).

pub mod diff;
pub mod engine;
pub mod export;
pub mod files;
mod grouping;
pub mod input;
mod intact;
pub mod layout;
pub mod loghist;
pub mod onepass;
mod onepass_source;
mod parquet_input;
pub mod perfetto;
pub mod plot;
pub mod query;
pub mod report;
pub mod report_diff;
pub mod to_parquet;
pub mod verify;

pub use engine::{run, Answer, ColumnKind, Engine, NoProgress, Note, Progress, Query, Question};
pub use export::{export, ExportFormat, ExportSummary};
pub use input::InputPath;
pub use to_parquet::{convert, ConvertSummary, Input};

use std::fmt;

/// Errors of the analysis crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// A directory that is neither a recording in parts (no `*.iod` files at its top) nor a
    /// Parquet dataset (no `io` table).
    NotAnInput {
        /// The directory.
        path: std::path::PathBuf,
    },
    /// A Parquet dataset without one of the tables `iodump convert` writes
    /// ([`input::DATASET_TABLES`]).
    IncompleteDataset {
        /// The dataset's directory.
        path: std::path::PathBuf,
        /// The table it lacks.
        table: &'static str,
    },
    /// A query cannot be answered on this input (no `io` table, a column missing or of
    /// another type); errors of the engine itself are [`AnalyzeError::Polars`].
    Query {
        /// What is wrong.
        message: String,
    },
    /// No event of the input could be decoded (every segment damaged).
    NothingReadable {
        /// The trace.
        trace: String,
        /// The first damage found.
        damage: String,
    },
    /// A damaged input given to a comparison (`iodump diff`), which would compare what is
    /// intact with a whole recording.
    Damaged {
        /// The trace.
        trace: String,
        /// How much is damaged, in words ([`iodump_format::Damage::count_in_words`]).
        what: String,
        /// The first damage.
        damage: String,
    },
    /// A plot could not be drawn.
    Plot {
        /// What went wrong.
        message: String,
    },
    /// The output could not be created, or was refused (a link, another user's file, not a
    /// regular file or directory).
    Output(iodump_output::OutputError),
    /// A Parquet file of a layout this iodump does not read (written by a later iodump, or
    /// not by `iodump convert`): the traces need converting again.
    Layout {
        /// The file.
        file: std::path::PathBuf,
        /// The layout it says it has.
        layout: String,
    },
    /// Traces and Parquet directories given together.
    MixedInputs,
    /// Two Parquet datasets hold a trace of the same name: a trace is told from another by
    /// its name, so their processes and files would be added together.
    TraceInTwoDatasets {
        /// The trace's name.
        trace: String,
        /// The first dataset that holds it.
        first: std::path::PathBuf,
        /// The other.
        second: std::path::PathBuf,
    },
    /// A device asked for (`analyze -d`) that no input has.
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// The devices the inputs have.
        known: Vec<String>,
    },
    /// A container or cgroup filter over a trace (or a Parquet dataset) without a cgroups
    /// table.
    NoCgroupTable {
        /// The trace or the dataset's directory.
        trace: std::path::PathBuf,
    },
    /// `diff --group-by cgroup` (cgroups alone) with a side that has no cgroups table: no
    /// cgroup could be compared.
    NoCgroupsToCompare {
        /// The side without one (its inputs, as named).
        side: String,
    },
    /// One side of a comparison (or a replay's score) named a directory holding several
    /// recordings: they would be compared as one.
    SeveralRecordings {
        /// The directory.
        path: std::path::PathBuf,
        /// The recordings' names (the first few).
        names: Vec<String>,
        /// How many it holds.
        count: usize,
    },
    /// A directory holding both trace files and a Parquet dataset (which of them to read?).
    TracesAndDataset {
        /// The directory.
        path: std::path::PathBuf,
    },
    /// An input could not be opened.
    Open {
        /// The input.
        path: std::path::PathBuf,
        /// Why.
        source: iodump_format::ReadError,
    },
    /// The polars table would not fit in the memory available.
    TableTooLarge {
        /// I/Os of the table.
        events: u64,
        /// Memory it would take (estimate).
        need_bytes: u64,
        /// Memory available (`MemAvailable`).
        available_bytes: u64,
    },
    /// Scoring a replay would need more memory than is available (it holds every I/O of
    /// both recordings).
    TooLargeToScore {
        /// I/Os of both recordings.
        ios: u64,
        /// Memory it would take (estimate).
        need_bytes: u64,
        /// Memory available (`MemAvailable`).
        available_bytes: u64,
    },
    /// The query engine panicked.
    EnginePanicked {
        /// The panic's message.
        message: String,
    },
    /// The polars engine failed.
    Polars {
        /// Its error.
        source: polars::prelude::PolarsError,
    },
    /// A polars SQL query failed (shown by the first line of the engine's message).
    Sql {
        /// The engine's error.
        source: polars::prelude::PolarsError,
    },
    /// A Parquet file could not be read.
    ReadParquet {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: ParquetReadError,
    },
    /// A plot could not be drawn by the plotting library.
    Draw {
        /// The library's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// `iodump convert` into a directory that holds a dataset it would not replace entirely
    /// (of the other layout, or with partitions of other hosts or dates): the old files would
    /// stay in the new dataset.
    StaleDataset {
        /// The output directory.
        dir: std::path::PathBuf,
        /// A file of the old dataset that would stay.
        file: std::path::PathBuf,
    },
    /// A dataset holding a table both flat (`TABLE.parquet`) and partitioned (`TABLE/`).
    MixedLayouts {
        /// The dataset's directory.
        dir: std::path::PathBuf,
        /// The table.
        table: String,
    },
    /// A dataset holding one trace twice: under two hosts (traces of one name from two
    /// machines merged into one tree), or twice over (a copy of it beside it). Its rows would
    /// be joined across the two, or counted twice.
    TraceTwiceInDataset {
        /// The dataset's directory.
        dir: std::path::PathBuf,
        /// The trace's name.
        trace: String,
        /// The table where it was seen twice.
        table: &'static str,
        /// How: `under hosts "a" and "b"`, `twice (its tid 42 in A and in B)`.
        how: String,
    },
    /// A dataset's `io` table holding I/O of a trace that one of its small tables (`files`,
    /// `processes`, `devices`) has no row of (a merge that lost them): its I/Os would count as
    /// of no file or no process.
    IoOfMissingTrace {
        /// The `io` file.
        file: std::path::PathBuf,
        /// The trace's name.
        trace: String,
        /// The table without it.
        table: &'static str,
    },
    /// A column iodump reads as a value of every row (`bytes`, `timestamp_ns`, `trace`…)
    /// holding nulls in a dataset's file (another tool's rewrite): each would be read as an
    /// arbitrary value.
    NullsInColumn {
        /// The Parquet file.
        file: std::path::PathBuf,
        /// The column.
        column: String,
    },
    /// Writing the output failed.
    Write {
        /// What was being written.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl AnalyzeError {
    /// True when the error is about what was asked rather than about the input: a device no
    /// input has (`analyze -d`), traces and Parquet directories given together. The binary
    /// exits with its usage status for these.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            AnalyzeError::UnknownDevice { .. } | AnalyzeError::MixedInputs
        )
    }
}

impl fmt::Display for AnalyzeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalyzeError::NotAnInput { path } => write!(
                f,
                "{}: neither a recording (no *.iod files in it) nor a Parquet dataset (no io.parquet or io/)",
                path.display()
            ),
            AnalyzeError::IncompleteDataset { path, table } => write!(
                f,
                "{}: a Parquet dataset without its {table} table ({table}.parquet or {table}/): iodump convert writes {}; convert the traces again",
                path.display(),
                crate::input::DATASET_TABLES.join(", ")
            ),
            AnalyzeError::Query { message } => write!(f, "query failed: {message}"),
            AnalyzeError::NothingReadable { trace, damage } => {
                write!(f, "{trace}: nothing could be read (first damage: {damage})")
            }
            AnalyzeError::Damaged {
                trace,
                what,
                damage,
            } => write!(
                f,
                "{trace}: {what} (first: {damage}); a comparison of what is \
                 intact would be biased: pass --allow-damaged to make it anyway"
            ),
            AnalyzeError::Plot { message } => write!(f, "{message}"),
            AnalyzeError::Output(e) => write!(f, "{e}"),
            AnalyzeError::Layout { file, layout } => write!(
                f,
                "{}: Parquet layout {layout:?} is not one this iodump reads (1 to {}): convert \
                 the traces again with this iodump",
                file.display(),
                layout::LAYOUT
            ),
            AnalyzeError::TraceInTwoDatasets {
                trace,
                first,
                second,
            } => write!(
                f,
                "{} and {} both hold a trace named {trace:?} (the same recording converted \
                 twice?): give one of them, or convert the traces into one dataset",
                first.display(),
                second.display()
            ),
            AnalyzeError::StaleDataset { dir, file } => write!(
                f,
                "{} holds a dataset this conversion would not replace entirely ({} would stay): \
                 convert into a new directory, or remove the old dataset first",
                dir.display(),
                file.display()
            ),
            AnalyzeError::MixedLayouts { dir, table } => write!(
                f,
                "{} holds the {table} table both flat ({table}.parquet) and partitioned \
                 ({table}/): a dataset has one layout; convert the traces again into a new \
                 directory",
                dir.display()
            ),
            AnalyzeError::TraceTwiceInDataset {
                dir,
                trace,
                table,
                how,
            } => write!(
                f,
                "{}: the {table} table holds the trace {trace:?} {how}: a dataset holds each \
                 trace once (keep one copy; convert traces of one name from several hosts \
                 together, which names each by its path)",
                dir.display()
            ),
            AnalyzeError::IoOfMissingTrace { file, trace, table } => write!(
                f,
                "{}: I/O of the trace {trace:?}, of which the dataset's {table} table has no \
                 row (copied or merged without it?): convert the trace again",
                file.display()
            ),
            AnalyzeError::NullsInColumn { file, column } => write!(
                f,
                "{}: column {column} holds nulls, and iodump needs a value in every row of it \
                 (a rewrite that lost them?): convert the traces again",
                file.display()
            ),
            AnalyzeError::MixedInputs => f.write_str(
                "give either .iod traces or directories written by `iodump convert`, not both",
            ),
            AnalyzeError::UnknownDevice { name, known } => write!(
                f,
                "no device {name:?} in the input (its devices: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
            AnalyzeError::NoCgroupTable { trace } => write!(
                f,
                "{}: no cgroups table (traces of iodump before format 1.2 and synthetic ones, \
                 and their Parquet datasets, have none), so {CGROUP_FIELDS} cannot be matched",
                trace.display()
            ),
            AnalyzeError::NoCgroupsToCompare { side } => write!(
                f,
                "--group-by cgroup: {side} has no cgroups table (traces of iodump before format \
                 1.2 and synthetic ones, and their Parquet datasets, have none): no cgroup can \
                 be compared"
            ),
            AnalyzeError::SeveralRecordings { path, names, count } => write!(
                f,
                "{}: it holds {count} recordings ({}…), which would be compared as one; name \
                 one of its files",
                path.display(),
                names.join(", ")
            ),
            AnalyzeError::TracesAndDataset { path } => write!(
                f,
                "{}: it holds both trace files (*.iod) and a Parquet dataset; convert to \
                 another directory, or name its trace files",
                path.display()
            ),
            AnalyzeError::Open { path, .. } => write!(f, "cannot read {}", path.display()),
            AnalyzeError::TableTooLarge {
                events,
                need_bytes,
                available_bytes,
            } => write!(
                f,
                "the in-memory table of {events} events needs about {:.1} GB and {:.1} GB are \
                 available: narrow it with --filter, or `iodump convert` the trace and query \
                 the Parquet with DuckDB",
                *need_bytes as f64 / 1e9,
                *available_bytes as f64 / 1e9
            ),
            AnalyzeError::TooLargeToScore {
                ios,
                need_bytes,
                available_bytes,
            } => write!(
                f,
                "scoring the replay holds both recordings' {ios} I/Os in memory, about {:.1} GB, \
                 and {:.1} GB are available: score a part with --filter (the part replayed)",
                *need_bytes as f64 / 1e9,
                *available_bytes as f64 / 1e9
            ),
            AnalyzeError::EnginePanicked { message } => {
                write!(f, "the query engine failed: {message}")
            }
            AnalyzeError::Polars { source } => write!(f, "query failed: {source}"),
            AnalyzeError::Sql { source } => {
                let message = source.to_string();
                let first = message.lines().next().unwrap_or("");
                write!(f, "query failed: {first}")
            }
            AnalyzeError::ReadParquet { path, source } => {
                write!(f, "{}: {source}", path.display())
            }
            AnalyzeError::Draw { source } => write!(f, "drawing failed: {source}"),
            AnalyzeError::Write { what, source } => write!(f, "writing {what}: {source}"),
        }
    }
}

impl std::error::Error for AnalyzeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Shown through Display, so their causes are the next in the chain.
            AnalyzeError::Output(e) => e.source(),
            // The causes (their text is in Display too: a printer of the chain such as the
            // binary's leaves out a cause its error already ends with).
            AnalyzeError::Open { source, .. } => Some(source),
            AnalyzeError::Polars { source } | AnalyzeError::Sql { source } => Some(source),
            AnalyzeError::ReadParquet { source, .. } => Some(source),
            AnalyzeError::Draw { source } => Some(source.as_ref()),
            AnalyzeError::Write { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What the cgroups table of a trace is needed for.
const CGROUP_FIELDS: &str =
    "--container, --cgroup and the fields cgroup_path, container, pod and runtime";

/// Why a Parquet file could not be read: opening it, its metadata, or decoding its rows.
#[derive(Debug)]
#[non_exhaustive]
pub enum ParquetReadError {
    /// Opening the file.
    Io(std::io::Error),
    /// Reading its metadata or row groups.
    Parquet(parquet::errors::ParquetError),
    /// Decoding its rows into Arrow.
    Arrow(arrow_schema::ArrowError),
}

impl fmt::Display for ParquetReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParquetReadError::Io(e) => write!(f, "{e}"),
            ParquetReadError::Parquet(e) => write!(f, "{e}"),
            ParquetReadError::Arrow(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ParquetReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // Shown through Display, so the cause is the next in the chain.
        match self {
            ParquetReadError::Io(e) => e.source(),
            ParquetReadError::Parquet(e) => e.source(),
            ParquetReadError::Arrow(e) => e.source(),
        }
    }
}

impl From<std::io::Error> for ParquetReadError {
    fn from(e: std::io::Error) -> Self {
        ParquetReadError::Io(e)
    }
}

impl From<parquet::errors::ParquetError> for ParquetReadError {
    fn from(e: parquet::errors::ParquetError) -> Self {
        ParquetReadError::Parquet(e)
    }
}

impl From<arrow_schema::ArrowError> for ParquetReadError {
    fn from(e: arrow_schema::ArrowError) -> Self {
        ParquetReadError::Arrow(e)
    }
}

/// The error of reading the Parquet file `path`.
pub(crate) fn parquet_read_error<E: Into<ParquetReadError>>(
    path: &std::path::Path,
) -> impl Fn(E) -> AnalyzeError + '_ {
    move |e| AnalyzeError::ReadParquet {
        path: path.to_path_buf(),
        source: e.into(),
    }
}

impl From<iodump_output::OutputError> for AnalyzeError {
    fn from(e: iodump_output::OutputError) -> Self {
        AnalyzeError::Output(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    #[test]
    fn causes_are_kept_as_sources() {
        let dir = std::env::temp_dir().join(format!("iodump-errors-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("io.parquet");
        std::fs::write(&bad, b"not parquet").unwrap();
        let e = parquet_input::read_batches(&bad).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            e.to_string().starts_with(&format!("{}: ", bad.display())),
            "{e}"
        );
        let cause = e.source().expect("the Parquet error is kept");
        assert!(matches!(
            cause.downcast_ref::<ParquetReadError>(),
            Some(ParquetReadError::Parquet(_))
        ));
        assert!(e.to_string().ends_with(&cause.to_string()));

        let missing = parquet_input::read_batches(&dir.join("none.parquet")).unwrap_err();
        let io = missing.source().unwrap().downcast_ref::<ParquetReadError>();
        assert!(
            matches!(io, Some(ParquetReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound)
        );

        let polars = polars::prelude::PolarsError::ComputeError("line one\nline two".into());
        let e = AnalyzeError::Sql { source: polars };
        assert_eq!(e.to_string(), "query failed: line one");
        assert!(e.source().unwrap().to_string().contains("line two"));
    }
}
