//! Typed errors of the replayer.

use std::fmt;
use std::io;
use std::path::PathBuf;

use iodump_format::ReadError;
use iodump_output::OutputError;

/// What stopped a replay before or while it ran.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayError {
    /// The trace could not be opened or read.
    Trace {
        /// The trace file.
        path: PathBuf,
        /// Why.
        source: ReadError,
    },
    /// What was named holds several recordings (a directory of ring snapshots, or of
    /// several recorders' parts): a replay replays one.
    NotOneRecording {
        /// The file or directory named.
        path: PathBuf,
        /// Recordings found in it.
        recordings: usize,
    },
    /// A target could not be opened or inspected.
    Open {
        /// The target.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// A target is neither a block device nor a regular file.
    NotBlockOrFile {
        /// The target.
        path: PathBuf,
    },
    /// A target has size 0, so no offset fits in it.
    EmptyTarget {
        /// The target.
        path: PathBuf,
    },
    /// Writes were allowed but the target (or one of its partitions) is mounted.
    Mounted {
        /// The target.
        path: PathBuf,
        /// Where it is mounted.
        mount_point: String,
    },
    /// Writes were allowed but the target is used by something else (swap, device-mapper,
    /// md, a loop device backed by this file, an exclusive opener).
    InUse {
        /// The target.
        path: PathBuf,
        /// By what.
        by: String,
    },
    /// The path named another file when it was opened than when it was checked (a link or
    /// file replaced in between).
    Changed {
        /// The target.
        path: PathBuf,
    },
    /// Writes were allowed but the block device holds a filesystem or partition table.
    Signature {
        /// The target.
        path: PathBuf,
        /// What was found (`ext4`, `xfs`, `GPT partition table`…).
        what: &'static str,
    },
    /// A `--map` names a device the trace does not have.
    UnknownDevice {
        /// The name given.
        spec: String,
        /// The trace's devices.
        available: String,
    },
    /// Two `--map`s name one device of the trace (by name or by number): which disk it would
    /// write is not for the order of the flags to decide.
    MappedTwice {
        /// The first `--map`.
        first: String,
        /// The second.
        second: String,
    },
    /// A target is the trace being replayed (or one of its parts).
    TargetIsTrace {
        /// The target.
        path: PathBuf,
    },
    /// Nothing is left to replay (everything filtered, skipped or unmapped).
    NothingToReplay {
        /// Why, in words.
        why: String,
    },
    /// The largest I/O needs more buffer memory than allowed.
    TooMuchMemory {
        /// Bytes needed.
        needed_bytes: u64,
        /// The limit.
        limit_bytes: u64,
    },
    /// The plan (the trace's I/Os to replay, one loop) would not fit in memory, or has more
    /// I/Os than it can index.
    PlanTooLarge {
        /// I/Os of one loop.
        ios: u64,
        /// Memory it would take (estimate).
        need_bytes: u64,
        /// Memory available (`MemAvailable`; `u64::MAX` when not known).
        available_bytes: u64,
    },
    /// The I/O engine failed (not an I/O error of one request: those are counted).
    Engine {
        /// Which step.
        what: &'static str,
        /// What the kernel said.
        source: io::Error,
    },
    /// The speed is not a positive, finite factor.
    BadSpeed {
        /// As given.
        speed: f64,
    },
    /// The trace slowed down by the speed would last longer than the scheduler's clock (u64
    /// ns) holds.
    TooSlow {
        /// As given.
        speed: f64,
        /// As given.
        loops: u32,
    },
    /// Zero loops.
    NoLoops,
    /// Neither a target for every device nor one for some device.
    NoTarget,
    /// The `-o` path breaks the output rule (a link, another user's file, not a file).
    Output(OutputError),
    /// The `-o` path is a file the replay reads or writes.
    OutputIs {
        /// The `-o` path.
        path: PathBuf,
        /// What it is (`the trace being replayed`, `a replay target`).
        what: &'static str,
    },
    /// A file target (with `-o`) is on a filesystem of no single block device, so there is
    /// no device to record.
    NoDeviceToRecord {
        /// The target.
        path: PathBuf,
    },
    /// The recorder of the replay (`-o`) could not be started, failed or could not be
    /// stopped.
    Recorder {
        /// What went wrong, in words.
        what: String,
        /// What the system said, when it said something.
        source: Option<io::Error>,
    },
    /// The recording of the replay (`-o`) could not be read.
    Recording {
        /// Its file.
        path: PathBuf,
        /// Why.
        source: ReadError,
    },
}

impl ReplayError {
    /// True when the error is about the flags given (a bad speed, no loops, no target, a
    /// `--map` of a device the trace lacks) rather than about the trace or the targets: the
    /// binary exits with its usage status for these.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            ReplayError::BadSpeed { .. }
                | ReplayError::TooSlow { .. }
                | ReplayError::NoLoops
                | ReplayError::NoTarget
                | ReplayError::UnknownDevice { .. }
                | ReplayError::MappedTwice { .. }
        )
    }
}

/// A factor as the command line shows numbers: plainly, or in exponent form when very small
/// or very large (`1e-300`, not 300 zeros).
fn show_factor(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Trace { path, .. } => write!(f, "cannot read trace {}", path.display()),
            ReplayError::NotOneRecording { path, recordings } => write!(
                f,
                "{} holds {recordings} recordings (each ring snapshot is one, and so is each \
                 recorder's set of parts): give the files of one",
                path.display()
            ),
            ReplayError::Open { path, .. } => write!(f, "cannot open target {}", path.display()),
            ReplayError::NotBlockOrFile { path } => write!(
                f,
                "target {} is neither a block device nor a regular file",
                path.display()
            ),
            ReplayError::EmptyTarget { path } => {
                let p = path.display();
                write!(f, "target {p} has size 0: give it a size first (e.g. truncate -s 1G {p})")
            }
            ReplayError::Mounted { path, mount_point } => write!(
                f,
                "refusing to write to {}: it is mounted on {mount_point} (unmount it, or add --force to destroy its data)",
                path.display()
            ),
            ReplayError::InUse { path, by } => write!(
                f,
                "refusing to write to {}: it is in use by {by} (add --force to write anyway)",
                path.display()
            ),
            ReplayError::Signature { path, what } => write!(
                f,
                "refusing to write to {}: it holds {what} (wipe it, or add --force to destroy it)",
                path.display()
            ),
            ReplayError::Changed { path } => write!(
                f,
                "target {} changed while it was opened (another file is there now): not used",
                path.display()
            ),
            ReplayError::MappedTwice { first, second } => write!(
                f,
                "--map {first} and --map {second} map one device of the trace: give one"
            ),
            ReplayError::UnknownDevice { spec, available } => write!(
                f,
                "--map {spec}: the trace has no such device (it has: {available})"
            ),
            ReplayError::TargetIsTrace { path } => write!(
                f,
                "refusing to replay onto {}: it is the trace being replayed",
                path.display()
            ),
            ReplayError::NothingToReplay { why } => write!(f, "nothing to replay: {why}"),
            ReplayError::TooMuchMemory {
                needed_bytes,
                limit_bytes,
            } => write!(
                f,
                "I/O buffers would need {needed_bytes} bytes, more than the limit of {limit_bytes}"
            ),
            ReplayError::PlanTooLarge { ios, .. } if *ios > u64::from(u32::MAX) => write!(
                f,
                "the trace has {ios} I/Os to replay, more than one replay can hold ({}): replay a part of it with --filter",
                u32::MAX
            ),
            ReplayError::PlanTooLarge {
                ios,
                need_bytes,
                available_bytes,
            } => write!(
                f,
                "the trace's {ios} I/Os to replay take about {:.1} GB in memory, and {:.1} GB are available: replay a part of it with --filter",
                *need_bytes as f64 / 1e9,
                *available_bytes as f64 / 1e9
            ),
            ReplayError::Engine { what, .. } => write!(f, "I/O engine: {what}"),
            ReplayError::BadSpeed { speed } => write!(
                f,
                "--speed {}: give a positive, finite factor (2 = twice as fast)",
                show_factor(*speed)
            ),
            ReplayError::TooSlow { speed, loops } if *loops > 1 => write!(
                f,
                "--speed {} and --loops {loops}: the replay would last more than 584 years (what its clock holds): give a larger factor or fewer loops",
                show_factor(*speed)
            ),
            ReplayError::TooSlow { speed, .. } => write!(
                f,
                "--speed {}: the replay would last more than 584 years (what its clock holds): give a larger factor",
                show_factor(*speed)
            ),
            ReplayError::NoLoops => write!(f, "--loops 0: give at least 1"),
            ReplayError::NoTarget => write!(
                f,
                "give a target: --target PATH (every device) or --map DEV=PATH"
            ),
            ReplayError::Output(e) => write!(f, "{e}"),
            ReplayError::OutputIs { path, what } => write!(
                f,
                "refusing to record the replay into {}: it is {what}",
                path.display()
            ),
            ReplayError::NoDeviceToRecord { path } => write!(
                f,
                "-o: {} is on a filesystem without a single block device (btrfs, tmpfs, overlay): record a block device target instead",
                path.display()
            ),
            ReplayError::Recorder { what, .. } => write!(f, "{what}"),
            ReplayError::Recording { path, .. } => write!(
                f,
                "cannot read the replay's recording {}",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ReplayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReplayError::Trace { source, .. } | ReplayError::Recording { source, .. } => {
                Some(source)
            }
            ReplayError::Open { source, .. } | ReplayError::Engine { source, .. } => Some(source),
            ReplayError::Recorder { source, .. } => source.as_ref().map(|e| e as _),
            // Shown through Display, so its cause is the next in the chain.
            ReplayError::Output(e) => e.source(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn factors_show_as_the_command_line_does() {
        assert_eq!(show_factor(2.0), "2");
        assert_eq!(show_factor(0.5), "0.5");
        assert_eq!(show_factor(0.0), "0");
        assert_eq!(show_factor(1e-300), "1e-300");
        assert_eq!(show_factor(2e15), "2e15");
        assert_eq!(show_factor(f64::NAN), "NaN");
        assert_eq!(
            ReplayError::TooSlow {
                speed: 1e-300,
                loops: 1
            }
            .to_string(),
            "--speed 1e-300: the replay would last more than 584 years (what its clock holds): give a larger factor"
        );
    }

    #[test]
    fn causes_are_kept() {
        let e = ReplayError::Recorder {
            what: "cannot start the recorder".into(),
            source: Some(io::Error::from_raw_os_error(libc::ENOENT)),
        };
        let cause = e.source().map(|c| c.to_string()).unwrap_or_default();
        assert!(cause.contains("No such file"), "{cause}");
        let e = ReplayError::Recorder {
            what: "the recorder did not start within 30 s".into(),
            source: None,
        };
        assert!(e.source().is_none());
        let e = ReplayError::Engine {
            what: "io_uring_setup",
            source: io::Error::from_raw_os_error(libc::EPERM),
        };
        assert!(e.source().is_some());
    }
}
