//! `iodump-analyze` owns offline analysis of traces: the Parquet tables of `iodump convert`
//! and the exports (CSV with the original iodump's columns first, JSON lines, fio's version 3
//! iolog for replay); the polars queries of `iodump analyze`; the HTML report and single plots
//! of `iodump report` and `iodump plot` (binned in one parallel pass, no polars).

pub mod convert;
pub mod export;
pub mod fast;
pub mod files;
mod ingest;
pub mod layout;
pub mod plot;
pub mod query;
pub mod report;

pub use convert::{convert, ConvertSummary, Input};
pub use export::{export, ExportFormat, ExportSummary};

use std::fmt;

/// Errors of the analysis crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// The trace could not be read at all.
    Read(iodump_format::ReadError),
    /// A query failed in the engine.
    Query {
        /// The engine's message.
        message: String,
    },
    /// No event of the input could be decoded (every segment damaged).
    NothingReadable {
        /// The trace.
        trace: String,
        /// The first damage found.
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
    /// Writing the output failed.
    Write {
        /// What was being written.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl fmt::Display for AnalyzeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnalyzeError::Read(e) => write!(f, "{e}"),
            AnalyzeError::Query { message } => write!(f, "query failed: {message}"),
            AnalyzeError::NothingReadable { trace, damage } => {
                write!(f, "{trace}: nothing could be read (first damage: {damage})")
            }
            AnalyzeError::Plot { message } => write!(f, "{message}"),
            AnalyzeError::Output(e) => write!(f, "{e}"),
            AnalyzeError::Layout { file, layout } => write!(
                f,
                "{}: Parquet layout {layout:?} is not one this iodump reads (1 to {}): convert \
                 the traces again with this iodump",
                file.display(),
                layout::LAYOUT
            ),
            AnalyzeError::Write { what, source } => write!(f, "writing {what}: {source}"),
        }
    }
}

impl std::error::Error for AnalyzeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Shown through Display, so its cause is the next in the chain (the others show
            // their causes themselves).
            AnalyzeError::Output(e) => e.source(),
            _ => None,
        }
    }
}

impl From<iodump_output::OutputError> for AnalyzeError {
    fn from(e: iodump_output::OutputError) -> Self {
        AnalyzeError::Output(e)
    }
}
