//! The queries of `iodump analyze` behind one typed call, [`run`]: it checks the inputs,
//! picks the engine (the one pass of [`crate::onepass`], or the polars table of
//! [`crate::query`]), falls back from the one pass to the table when the I/Os are too far
//! out of time order to follow in one pass, turns a panic of the query engine into an error,
//! and hands back the rows as text cells.

use std::path::PathBuf;

use crate::input::InputPath;

use iodump_format::expr::Expr;
use iodump_format::Damage;

use crate::onepass;
use crate::query::{self, DataFrame, Dataset, LatencyBy, RankBy};
use crate::AnalyzeError;

/// What is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Question {
    /// Key figures on one screen.
    Summary,
    /// Per file, ranked `by`, the first `limit`.
    TopFiles {
        /// The ranking.
        by: RankBy,
        /// Rows shown.
        limit: usize,
    },
    /// Per process, the first `limit`.
    TopProcs {
        /// Rows shown.
        limit: usize,
    },
    /// IOPS, MB/s and p99 latency per interval, device and op.
    Timeline {
        /// The interval.
        interval_ns: i64,
    },
    /// Seek distances per device.
    Seek,
    /// Runs of contiguous writes of at least `min_bytes`, the first `limit`.
    SeqWrites {
        /// Smallest run shown.
        min_bytes: u64,
        /// Rows shown.
        limit: usize,
    },
    /// Latency percentiles and the queue/device split.
    Latency {
        /// The grouping.
        by: LatencyBy,
    },
    /// A polars SQL query over the tables io, processes and files (always on the polars
    /// table).
    Sql(String),
}

/// Which engine answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// One parallel pass over trace segments or Parquet row groups ([`crate::onepass`]); the
    /// polars table when the question is SQL, or when the I/Os are too far out of order.
    OnePass,
    /// The whole polars table ([`crate::query`]).
    Polars,
}

/// A question, its engine and the I/Os it is about.
#[derive(Clone, Debug)]
pub struct Query {
    /// What is asked.
    pub question: Question,
    /// Which engine answers.
    pub engine: Engine,
    /// Only the I/O matching this (`--filter`, `--container`, `--cgroup` together).
    pub filter: Option<Expr>,
}

/// Something worth telling the user while a query runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// The one pass gave up: the I/Os are too far out of time order; the polars table is
    /// built instead.
    OutOfOrder,
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::OutOfOrder => f.write_str(
                "I/Os are too far out of time order in the trace to follow them in one pass; \
                 sorting the whole table instead (slower, more memory)",
            ),
        }
    }
}

/// Progress of a query: each decoding step over the inputs, and notes. Called from several
/// threads (once per segment or row group, never per I/O).
pub trait Progress: Sync {
    /// A step over about `total_events` I/Os begins (`what`: "decoding").
    fn begin(&self, what: &'static str, total_events: u64);
    /// `events` more I/Os of the step are done.
    fn advance(&self, events: u64);
    /// The step is over.
    fn end(&self);
    /// Something the user should know.
    fn note(&self, note: Note);
}

/// No progress shown.
pub struct NoProgress;

impl Progress for NoProgress {
    fn begin(&self, _: &'static str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn end(&self) {}
    fn note(&self, _: Note) {}
}

/// What a column of an answer holds, for the printers: JSON writes a number as a number
/// and text as a string, whatever it reads like (a command named `007`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnKind {
    /// Numbers (a cell that is not one, `inf` or `NaN`, is written as text).
    Number,
    /// Text.
    Text,
    /// Booleans (`true`, `false`).
    Bool,
    /// Either, cell by cell (a comparison's values: an amount, or a mix such as `4K 100%`).
    Mixed,
}

/// The answer: the columns and rows of the result, as text cells (`None`: null).
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// Column names.
    pub columns: Vec<String>,
    /// What each column holds.
    pub kinds: Vec<ColumnKind>,
    /// Rows, one cell per column.
    pub rows: Vec<Vec<Option<String>>>,
    /// Damaged chunks skipped, by trace (some I/O may be missing from the answer).
    pub damaged: Vec<(String, Damage)>,
    /// I/Os the answer is of (those the filter kept).
    pub ios: u64,
}

/// Answers `query` over `inputs`: `.iod` traces, or directories written by `iodump convert`
/// (several form one dataset).
pub fn run(
    query: &Query,
    inputs: &[PathBuf],
    progress: &dyn Progress,
) -> Result<Answer, AnalyzeError> {
    let inputs = Inputs::check(query, inputs)?;
    let sql = matches!(query.question, Question::Sql(_));
    if query.engine == Engine::OnePass && !sql {
        if let Some(read) = inputs.one_pass(query, progress)? {
            let nothing_read = read.nothing_read;
            return finish(query, &read.frame, read.events, read.damaged, nothing_read);
        }
        progress.note(Note::OutOfOrder);
    }
    let d = inputs.load(query, progress)?;
    let df = catch_engine_panic(|| polars_query(&query.question, &d))?;
    let rows = d.io.height() as u64;
    let nothing_read = d.nothing_read();
    finish(query, &df, rows, d.damaged, nothing_read)
}

/// The inputs of a query, checked: all traces or all Parquet directories.
#[derive(Debug)]
struct Inputs {
    files: Vec<PathBuf>,
    paths: Vec<InputPath>,
    parquet: bool,
}

impl Inputs {
    /// Refuses inputs the query cannot be answered on: traces mixed with Parquet, or a
    /// container or cgroup filter over input without a cgroups table.
    fn check(query: &Query, files: &[PathBuf]) -> Result<Inputs, AnalyzeError> {
        let paths = InputPath::expand(files)?;
        if query.filter.as_ref().is_some_and(|f| f.uses_cgroup_table()) {
            check_cgroup_tables(&paths)?;
        }
        let dirs = paths.iter().filter(|p| p.is_parquet()).count();
        if dirs > 0 && dirs < paths.len() {
            return Err(AnalyzeError::MixedInputs);
        }
        Ok(Inputs {
            files: paths
                .iter()
                .filter(|p| p.is_parquet())
                .map(|p| p.path().to_path_buf())
                .collect(),
            paths,
            parquet: dirs > 0,
        })
    }

    /// The answer of the one pass, `None` when the I/Os are too far out of time order for it.
    fn one_pass(
        &self,
        query: &Query,
        progress: &dyn Progress,
    ) -> Result<Option<onepass::OnePassRead>, AnalyzeError> {
        let (paths, f) = (&self.paths[..], query.filter.as_ref());
        progress.begin("decoding", onepass::announced_rows(paths));
        let tick = |n| progress.advance(n);
        let read = match &query.question {
            Question::Sql(_) => unreachable!("SQL is answered on the polars table"),
            Question::TopFiles { by, limit } => {
                onepass::top_files(paths, f, *by, *limit, &tick).map(Some)
            }
            Question::TopProcs { limit } => onepass::top_procs(paths, f, *limit, &tick).map(Some),
            Question::Timeline { interval_ns } => {
                onepass::timeline(paths, f, *interval_ns, &tick).map(Some)
            }
            Question::Seek => onepass::seek(paths, f, &tick),
            Question::SeqWrites { min_bytes, limit } => {
                onepass::seq_writes(paths, f, *min_bytes, *limit, &tick)
            }
            Question::Latency { by } => onepass::latency(paths, f, *by, &tick).map(Some),
            Question::Summary => onepass::summary(paths, f, &tick).map(Some),
        };
        progress.end();
        read
    }

    /// The polars table of the inputs (refused when it cannot fit in memory).
    fn load(&self, query: &Query, progress: &dyn Progress) -> Result<Dataset, AnalyzeError> {
        let filter = query.filter.as_ref();
        if self.parquet {
            let mut d = Dataset::load_parquet(&self.files[0], filter)?;
            for p in &self.files[1..] {
                d.append(Dataset::load_parquet(p, filter)?)?;
            }
            return Ok(d);
        }
        let total = onepass::announced_rows(&self.paths);
        let decoded = match filter {
            Some(f) => rows_in_window(&self.paths, f)?,
            None => total,
        };
        // Without a filter the table holds every row; a window of time alone keeps every
        // row of the segments it does not leave out; another filter keeps an unknown share.
        if filter.is_none_or(Expr::is_time_window_only) {
            check_table_fits(decoded, mem_available_bytes())?;
        }
        progress.begin("decoding", decoded);
        let d = Dataset::load_with_progress(&self.paths, filter, &|n| progress.advance(n));
        progress.end();
        d
    }
}

/// The answer from the result's frame; nothing readable at all (no row, damage, and no
/// filter that could explain the emptiness; or every unit read damaged) is an error.
fn finish(
    query: &Query,
    df: &DataFrame,
    rows_read: u64,
    damaged: Vec<(String, Damage)>,
    nothing_read: bool,
) -> Result<Answer, AnalyzeError> {
    if let Some((trace, dmg)) = damaged.first() {
        if nothing_read || (rows_read == 0 && query.filter.is_none()) {
            return Err(AnalyzeError::NothingReadable {
                trace: trace.clone(),
                damage: dmg.to_string(),
            });
        }
    }
    // SQL's figures are the user's own: printed in full, not to the thousandth.
    let full = matches!(query.question, Question::Sql(_));
    let (columns, rows) = query::rows(df, full);
    // The summary's `value` column holds figures as text, and the top process's and file's
    // names: Mixed (a figure is a number in JSON; so is a name of digits alone).
    let summary = matches!(query.question, Question::Summary);
    let kinds = df
        .dtypes()
        .iter()
        .map(|t| match t {
            t if t.is_primitive_numeric() => ColumnKind::Number,
            polars::prelude::DataType::Boolean => ColumnKind::Bool,
            polars::prelude::DataType::String if summary => ColumnKind::Mixed,
            _ => ColumnKind::Text,
        })
        .collect();
    Ok(Answer {
        columns,
        kinds,
        rows,
        damaged,
        ios: rows_read,
    })
}

/// `question` on the polars table.
fn polars_query(question: &Question, d: &Dataset) -> Result<DataFrame, AnalyzeError> {
    match question {
        Question::TopFiles { by, limit } => query::top_files(d, *by, *limit),
        Question::TopProcs { limit } => query::top_procs(d, *limit),
        Question::Timeline { interval_ns } => query::timeline(d, *interval_ns),
        Question::Seek => query::seek(d),
        Question::SeqWrites { min_bytes, limit } => query::seq_writes(d, *min_bytes, *limit),
        Question::Sql(q) => query::sql(d, q),
        Question::Latency { by } => query::latency(d, *by),
        Question::Summary => query::summary(d),
    }
}

/// Runs `f`, turning a panic into [`AnalyzeError::EnginePanicked`]: polars reports some
/// problems of a query by panicking. The panic message is not printed (the panic hook is
/// silenced while `f` runs).
fn catch_engine_panic<T>(f: impl FnOnce() -> Result<T, AnalyzeError>) -> Result<T, AnalyzeError> {
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(previous_hook);
    result.unwrap_or_else(|p| {
        let message = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(AnalyzeError::EnginePanicked { message })
    })
}

/// Container and cgroup names come from a trace's cgroups table (a dataset's `cgroups`
/// table): input without one would match nothing, which is refused rather than shown as an
/// empty result.
pub(crate) fn check_cgroup_tables(inputs: &[InputPath]) -> Result<(), AnalyzeError> {
    for p in inputs {
        if let InputPath::Parquet(dir) = p {
            if crate::parquet_input::cgroups_table(dir)?.is_empty() {
                return Err(AnalyzeError::NoCgroupTable { trace: dir.clone() });
            }
            continue;
        }
        let r = p.open_trace()?;
        if !r.tables().has_cgroup_table() {
            return Err(AnalyzeError::NoCgroupTable {
                trace: p.path().to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Rows of the traces' segments that `filter`'s window of time does not leave out (those
/// the polars table decodes).
fn rows_in_window(paths: &[InputPath], filter: &Expr) -> Result<u64, AnalyzeError> {
    let mut rows = 0;
    for p in paths {
        let r = p.open_trace()?;
        rows += r
            .segments()
            .iter()
            .filter(|s| !filter.leaves_out_segment(&r, s.index))
            .map(|s| u64::from(s.events))
            .sum::<u64>();
    }
    Ok(rows)
}

/// Bytes of memory the polars `io` table takes per event (measured: 4.5 GB for 10M events).
const TABLE_BYTES_PER_EVENT: u64 = 460;

/// Refuses a polars table of `events` I/Os that cannot fit in `available_bytes` (the process
/// would be killed part-way instead); unknown memory is not checked.
fn check_table_fits(events: u64, available_bytes: Option<u64>) -> Result<(), AnalyzeError> {
    let need_bytes = events.saturating_mul(TABLE_BYTES_PER_EVENT);
    match available_bytes {
        Some(available_bytes) if need_bytes > available_bytes => Err(AnalyzeError::TableTooLarge {
            events,
            need_bytes,
            available_bytes,
        }),
        _ => Ok(()),
    }
}

/// `MemAvailable` of /proc/meminfo, when it can be read.
pub(crate) fn mem_available_bytes() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = m
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_too_large_for_memory_is_refused() {
        assert!(check_table_fits(1000, Some(460_000)).is_ok());
        assert!(check_table_fits(1000, None).is_ok());
        assert!(check_table_fits(u64::MAX, None).is_ok());
        let e = check_table_fits(10_000_000, Some(1_000_000_000)).unwrap_err();
        assert!(matches!(
            e,
            AnalyzeError::TableTooLarge {
                events: 10_000_000,
                need_bytes: 4_600_000_000,
                available_bytes: 1_000_000_000
            }
        ));
        assert!(e
            .to_string()
            .starts_with("the in-memory table of 10000000 events needs about 4.6 GB and 1.0 GB"));
    }

    /// The polars table's rows under a window of time are those of the segments the window
    /// does not leave out (what is checked against memory), and a window alone is told
    /// from a filter that keeps an unknown share.
    #[test]
    fn a_window_bounds_the_table() {
        use iodump_format::{EndInfo, Event, Header, Writer, WriterOptions};
        // 40 segments of 100 events, 1 ns apart from 1,000 ns (UTC = timestamp here).
        let path = std::env::temp_dir().join(format!("iodump-window-{}.iod", std::process::id()));
        let opts = WriterOptions {
            segment_events: 100,
            ..WriterOptions::default()
        };
        let mut w = Writer::new(
            std::fs::File::create(&path).unwrap(),
            &Header::default(),
            opts,
        )
        .unwrap();
        for i in 0..4_000u64 {
            w.push(&Event {
                timestamp_ns: 1_000 + i,
                ..Event::default()
            })
            .unwrap();
        }
        w.finish(EndInfo::default()).unwrap();
        let inputs = InputPath::expand(std::slice::from_ref(&path)).unwrap();
        let rows = |f: &str| rows_in_window(&inputs, &Expr::parse(f).unwrap()).unwrap();
        // [2,000, 3,000) ns: segments 10 to 19.
        let window = "time >= 1970-01-01T00:00:00.000002Z && time < 1970-01-01T00:00:00.000003Z";
        assert_eq!(rows(window), 1_000);
        assert_eq!(rows("time > 1970-01-01T00:00:00.000004998Z"), 100);
        assert_eq!(rows("pid == 7"), 4_000);
        std::fs::remove_file(&path).unwrap();
        let only = |f: &str| Expr::parse(f).unwrap().is_time_window_only();
        assert!(only(window));
        assert!(only("time == 2026-12-04T03:00:00Z"));
        assert!(!only(&format!("{window} && rw == W")));
        assert!(!only("time < 2026-12-04T03:00:00Z || pid == 1"));
        assert!(!only("pid == 7"));
    }

    #[test]
    fn a_panic_of_the_engine_is_an_error() {
        let e = catch_engine_panic::<()>(|| panic!("boom {}", 1)).unwrap_err();
        assert!(matches!(&e, AnalyzeError::EnginePanicked { message } if message == "boom 1"));
        assert_eq!(e.to_string(), "the query engine failed: boom 1");
        assert_eq!(catch_engine_panic(|| Ok(3)).unwrap(), 3);
    }

    /// Makes `dir` look like a dataset to the input's check: a part file of no rows for each
    /// table but `cgroups`, of the columns the check reads (`trace`, `dev_t`, `tid`).
    fn stand_in_dataset(dir: &std::path::Path) {
        use arrow_schema::{DataType, Field, Schema};
        let schema = std::sync::Arc::new(Schema::new(vec![
            Field::new("trace", DataType::Utf8, false),
            Field::new("dev_t", DataType::Utf8, false),
            Field::new("tid", DataType::Int64, false),
        ]));
        for t in crate::input::DATASET_TABLES {
            std::fs::create_dir_all(dir.join(t)).unwrap();
            let f = std::fs::File::create(dir.join(t).join("part-0.parquet")).unwrap();
            let w = parquet::arrow::ArrowWriter::try_new(f, schema.clone(), None).unwrap();
            w.close().unwrap();
        }
    }

    #[test]
    fn traces_and_parquet_are_not_mixed() {
        // A directory with an io table is a dataset (one holding .iod files would be a
        // recording's); an empty one is neither.
        let dir = std::env::temp_dir().join(format!("iodump-mixed-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let q = Query {
            question: Question::Summary,
            engine: Engine::OnePass,
            filter: None,
        };
        assert!(matches!(
            Inputs::check(&q, std::slice::from_ref(&dir)),
            Err(AnalyzeError::NotAnInput { path }) if path == dir
        ));
        stand_in_dataset(&dir);
        let files = vec![dir.clone(), dir.join("no-such-trace.iod")];
        assert!(matches!(
            Inputs::check(&q, &files),
            Err(AnalyzeError::MixedInputs)
        ));
        let only_dirs = vec![dir.clone(), dir.clone()];
        assert!(Inputs::check(&q, &only_dirs).unwrap().parquet);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cgroup_filters_need_a_cgroups_table() {
        let q = Query {
            question: Question::Summary,
            engine: Engine::OnePass,
            filter: Some(Expr::for_cgroup("/system.slice")),
        };
        // A stand-in dataset without a cgroups table.
        let dir = std::env::temp_dir().join(format!("iodump-cg-{}", std::process::id()));
        stand_in_dataset(&dir);
        let files = vec![dir.clone()];
        assert!(matches!(
            Inputs::check(&q, &files),
            Err(AnalyzeError::NoCgroupTable { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
        let missing = vec![std::env::temp_dir().join("iodump-no-such-trace.iod")];
        let e = Inputs::check(&q, &missing).unwrap_err();
        assert!(matches!(e, AnalyzeError::Open { .. }));
        assert!(
            std::error::Error::source(&e).is_some(),
            "the read error is kept"
        );
    }
}
