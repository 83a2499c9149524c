//! What a query reads, as the user named it: trace files, directories of a recording written
//! in parts (`iodump record -o DIR/ --rotate`), or Parquet datasets (`iodump convert`). The
//! parts of one recording are one trace, whether named by their directory or file by file.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use iodump_format::recording::{open_traces, trace_files_in};
use iodump_format::Reader;

use crate::AnalyzeError;

/// One input of a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputPath {
    /// A trace: one file, or the parts of one recording in order.
    Trace {
        /// Its name (the file's, or the first part's).
        name: String,
        /// Its files.
        files: Vec<PathBuf>,
    },
    /// A Parquet dataset (a directory `iodump convert` wrote).
    Parquet(PathBuf),
}

/// A device an input knows, from its device table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownDevice {
    /// Kernel name (`sda1`, `dm-0`).
    pub name: String,
    /// `MAJ:MIN`.
    pub dev_t: String,
    /// `MAJ:MIN` of the disk it is a partition of.
    pub partition_of: Option<String>,
}

/// The devices `wanted` names (`analyze -d`), as `MAJ:MIN`: a device by name or number, a
/// disk with its partitions. A name no input knows is [`AnalyzeError::UnknownDevice`].
pub fn select_devices(
    inputs: &[InputPath],
    wanted: &[String],
) -> Result<Vec<String>, AnalyzeError> {
    let mut known: Vec<KnownDevice> = Vec::new();
    for i in inputs {
        known.extend(i.devices()?);
    }
    let mut out: Vec<String> = Vec::new();
    for w in wanted {
        let w = w.strip_prefix("/dev/").unwrap_or(w);
        let disks: Vec<&str> = known
            .iter()
            .filter(|d| d.name == w || d.dev_t == w)
            .map(|d| d.dev_t.as_str())
            .collect();
        if disks.is_empty() {
            let mut names: Vec<String> = known.iter().map(|d| d.name.clone()).collect();
            names.sort();
            names.dedup();
            return Err(AnalyzeError::UnknownDevice {
                name: w.to_string(),
                known: names,
            });
        }
        for d in &known {
            let hit = disks.contains(&d.dev_t.as_str())
                || d.partition_of
                    .as_deref()
                    .is_some_and(|p| disks.contains(&p));
            if hit && !out.contains(&d.dev_t) {
                out.push(d.dev_t.clone());
            }
        }
    }
    Ok(out)
}

/// True when `dir` holds trace files (`*.iod`) at its top: a recording's directory, not a
/// Parquet dataset.
pub fn is_trace_dir(dir: &Path) -> bool {
    dir.is_dir() && trace_files_in(dir).is_ok()
}

impl InputPath {
    /// [`InputPath::expand`] of what one side of a comparison names (a trace, a recording
    /// in parts, a Parquet dataset): a directory holding several recordings is refused.
    pub fn expand_recording(paths: &[PathBuf]) -> Result<Vec<InputPath>, AnalyzeError> {
        let inputs = InputPath::expand(paths)?;
        let traces: Vec<&InputPath> = inputs
            .iter()
            .filter(|i| matches!(i, InputPath::Trace { .. }))
            .collect();
        if traces.len() > 1 {
            if let Some(dir) = paths.iter().find(|p| p.is_dir()) {
                return Err(AnalyzeError::SeveralRecordings {
                    path: dir.clone(),
                    names: traces.iter().take(3).map(|t| t.name()).collect(),
                    count: traces.len(),
                });
            }
        }
        Ok(inputs)
    }

    /// The inputs `paths` name: a trace file, a directory of trace files (each recording
    /// in it one trace), a Parquet dataset's directory. Trace files of one recording are one
    /// trace wherever they were named.
    pub fn expand(paths: &[PathBuf]) -> Result<Vec<InputPath>, AnalyzeError> {
        let trace_paths: Vec<&PathBuf> = paths
            .iter()
            .filter(|p| !p.is_dir() || is_trace_dir(p))
            .collect();
        // A directory of both (`convert parts/ -o parts/`) was read as its traces alone.
        for p in paths.iter().filter(|p| p.is_dir() && is_trace_dir(p)) {
            if !crate::parquet_input::parquet_files(p, "io").is_empty() {
                return Err(AnalyzeError::TracesAndDataset { path: p.clone() });
            }
        }
        // A single file is a trace of its own: nothing to group (and nothing opened twice).
        let single = trace_paths.len() == 1 && !trace_paths[0].is_dir();
        let mut traces = Vec::new();
        if single {
            traces.push(InputPath::Trace {
                name: name_of(trace_paths[0]),
                files: vec![trace_paths[0].clone()],
            });
        } else if !trace_paths.is_empty() {
            let owned: Vec<PathBuf> = trace_paths.iter().map(|p| (*p).clone()).collect();
            for t in open_traces(&owned).map_err(|e| AnalyzeError::Open {
                path: e.path,
                source: e.source,
            })? {
                traces.push(InputPath::Trace {
                    name: t.name,
                    files: t.files,
                });
            }
        }
        let mut out = Vec::new();
        let mut traces = traces.into_iter();
        // Each dataset once, however it was named: (device, inode), and the traces it holds
        // (read once a second dataset is given).
        let mut datasets: Vec<Dataset<'_>> = Vec::new();
        for p in paths {
            if p.is_dir() && !is_trace_dir(p) {
                check_dataset(p)?;
                let id = std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
                if id.is_some_and(|id| datasets.iter().any(|(d, _, _)| *d == id)) {
                    continue;
                }
                if !datasets.is_empty() {
                    let names = dataset_trace_names(p)?;
                    for (_, first, theirs) in &mut datasets {
                        let theirs = match theirs {
                            Some(t) => t,
                            None => theirs.insert(dataset_trace_names(first)?),
                        };
                        if let Some(trace) = names.iter().find(|n| theirs.contains(n)) {
                            return Err(AnalyzeError::TraceInTwoDatasets {
                                trace: trace.clone(),
                                first: first.to_path_buf(),
                                second: p.clone(),
                            });
                        }
                    }
                    datasets.push((id.unwrap_or_default(), p, Some(names)));
                } else {
                    datasets.push((id.unwrap_or_default(), p, None));
                }
                out.push(InputPath::Parquet(p.clone()));
            } else if let Some(t) = traces.next() {
                out.push(t);
            }
        }
        out.extend(traces);
        Ok(out)
    }

    /// Its name: the trace's, or the dataset directory's.
    pub fn name(&self) -> String {
        match self {
            InputPath::Trace { name, .. } => name.clone(),
            InputPath::Parquet(p) => name_of(p),
        }
    }

    /// The path to name in messages (the first part, for a recording).
    pub fn path(&self) -> &Path {
        match self {
            InputPath::Trace { files, .. } => files.first().map_or(Path::new(""), |p| p),
            InputPath::Parquet(p) => p,
        }
    }

    /// True for a Parquet dataset.
    pub fn is_parquet(&self) -> bool {
        matches!(self, InputPath::Parquet(_))
    }

    /// The devices of its device table.
    pub fn devices(&self) -> Result<Vec<KnownDevice>, AnalyzeError> {
        match self {
            InputPath::Parquet(dir) => Ok(crate::parquet_input::devices_table(dir)?
                .into_iter()
                .map(|d| KnownDevice {
                    name: d.name,
                    dev_t: d.dev_t,
                    partition_of: d.partition_of,
                })
                .collect()),
            InputPath::Trace { .. } => Ok(self
                .open_trace()?
                .tables()
                .devices()
                .map(|d| KnownDevice {
                    name: d.name.clone(),
                    dev_t: d.dev.to_string(),
                    partition_of: d.partition_of.map(|p| p.to_string()),
                })
                .collect()),
        }
    }

    /// Opens the trace (its parts as one). Its first parts may have gone since it was listed
    /// (a live recording's retention deletes the oldest): the rest is the recording.
    pub fn open_trace(&self) -> Result<Reader, AnalyzeError> {
        match self {
            InputPath::Trace { files, .. } if files.len() == 1 => {
                Reader::open(&files[0]).map_err(|source| AnalyzeError::Open {
                    path: files[0].clone(),
                    source,
                })
            }
            InputPath::Trace { files, .. } => {
                let mut parts = Vec::new();
                for (i, f) in files.iter().enumerate() {
                    match Reader::open_one_of(f, files.len()) {
                        Ok(r) => parts.push(r),
                        // The first parts, deleted by a live recording's retention since
                        // the directory was listed: the recording as it is now.
                        Err(e) if parts.is_empty() && i + 1 < files.len() && e.is_not_found() => {}
                        Err(source) => {
                            return Err(AnalyzeError::Open {
                                path: f.clone(),
                                source,
                            })
                        }
                    }
                }
                Ok(iodump_format::recording::concat_parts(parts))
            }
            InputPath::Parquet(p) => Err(AnalyzeError::Query {
                message: format!("{} is a Parquet dataset, not a trace", p.display()),
            }),
        }
    }
}

/// The tables every dataset `iodump convert` writes (`cgroups` came later: older datasets do
/// not have it). Without `files` every I/O would count as of no file, without `processes`
/// every process as of no name: a dataset that lacks one is refused rather than answered
/// wrongly.
pub const DATASET_TABLES: [&str; 5] = ["io", "processes", "files", "devices", "losses"];

/// Every table a dataset may hold: [`DATASET_TABLES`] and `cgroups`.
pub(crate) const ALL_TABLES: [&str; 6] =
    ["io", "processes", "files", "devices", "losses", "cgroups"];

/// A dataset given to [`InputPath::expand`]: its (device, inode), its path, and the names of
/// the traces it holds once read.
type Dataset<'a> = ((u64, u64), &'a Path, Option<Vec<String>>);

/// The names of the traces a dataset holds (those its devices and processes tables name).
fn dataset_trace_names(dir: &Path) -> Result<Vec<String>, AnalyzeError> {
    let mut names: Vec<String> = crate::parquet_input::devices_table(dir)?
        .into_iter()
        .map(|d| d.trace)
        .chain(
            crate::parquet_input::processes_table(dir)?
                .into_iter()
                .map(|p| p.trace),
        )
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Checks that directory `dir` (not a recording's) is a dataset with every table of
/// [`DATASET_TABLES`], holding each trace once
/// ([`crate::parquet_input::check_each_trace_once`]).
fn check_dataset(dir: &Path) -> Result<(), AnalyzeError> {
    let has = |table| crate::parquet_input::has_table(dir, table);
    // An `io/` of no Parquet file is a table of no rows only beside the other tables (a
    // directory that merely has a subdirectory `io` is no dataset).
    let io_rows = !crate::parquet_input::parquet_files(dir, "io").is_empty();
    if !has("io") || !io_rows && !DATASET_TABLES[1..].iter().any(|t| has(t)) {
        return Err(AnalyzeError::NotAnInput {
            path: dir.to_path_buf(),
        });
    }
    // One layout: a table both flat and partitioned would be read flat, the rest ignored.
    for table in ALL_TABLES {
        let files = crate::parquet_input::table_files(dir, table);
        if files.flat.is_some() && !files.partitioned.is_empty() {
            return Err(AnalyzeError::MixedLayouts {
                dir: dir.to_path_buf(),
                table: table.to_string(),
            });
        }
    }
    if let Some(table) = DATASET_TABLES.into_iter().find(|t| !has(t)) {
        return Err(AnalyzeError::IncompleteDataset {
            path: dir.to_path_buf(),
            table,
        });
    }
    crate::parquet_input::check_each_trace_once(dir)
}

fn name_of(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first parts of a recording, deleted since it was listed (a live recording's
    /// retention deletes the oldest), are left out; any other part missing is an error.
    #[test]
    fn first_parts_gone_leave_the_rest_of_the_recording() {
        use iodump_format::{EndInfo, Event, Header, Writer, WriterOptions};
        let dir = std::env::temp_dir().join(format!("iodump-first-gone-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let part = |name: &str| {
            let p = dir.join(name);
            let f = std::fs::File::create(&p).unwrap();
            let mut w = Writer::new(f, &Header::default(), WriterOptions::default()).unwrap();
            for i in 0..10 {
                w.push(&Event {
                    timestamp_ns: i,
                    ..Event::default()
                })
                .unwrap();
            }
            w.finish(EndInfo::default()).unwrap();
            p
        };
        let (a, b, gone) = (part("a.iod"), part("b.iod"), dir.join("gone.iod"));
        let trace = |files: &[&PathBuf]| InputPath::Trace {
            name: "a.iod".into(),
            files: files.iter().map(|f| (*f).clone()).collect(),
        };
        let r = trace(&[&gone, &gone, &a, &b]).open_trace().unwrap();
        assert_eq!(r.events().count(), 20);
        for files in [&[&a, &gone, &b][..], &[&a, &b, &gone], &[&gone, &gone]] {
            match trace(files).open_trace() {
                Err(AnalyzeError::Open { path, source }) => {
                    assert_eq!(path, gone);
                    assert!(source.is_not_found());
                }
                other => panic!("{files:?}: {:?}", other.map(|r| r.events().count())),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
