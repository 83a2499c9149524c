//! Typed errors of the replayer.

use std::fmt;
use std::io;
use std::path::PathBuf;

use iodump_format::{Damage, ReadError};

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
    /// A segment of the trace is damaged (only with strict reading).
    Damaged(Damage),
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
    /// The I/O engine failed (not an I/O error of one request: those are counted).
    Engine {
        /// Which step.
        what: &'static str,
        /// What the kernel said.
        source: io::Error,
    },
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Trace { path, .. } => write!(f, "cannot read trace {}", path.display()),
            ReplayError::Damaged(d) => write!(f, "damaged trace: {d}"),
            ReplayError::Open { path, .. } => write!(f, "cannot open target {}", path.display()),
            ReplayError::NotBlockOrFile { path } => write!(
                f,
                "target {} is neither a block device nor a regular file",
                path.display()
            ),
            ReplayError::EmptyTarget { path } => write!(
                f,
                "target {} has size 0: give it a size first (e.g. truncate -s 1G {})",
                path.display(),
                path.display()
            ),
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
            ReplayError::UnknownDevice { spec, available } => write!(
                f,
                "--map {spec}: the trace has no such device (it has: {available})"
            ),
            ReplayError::NothingToReplay { why } => write!(f, "nothing to replay: {why}"),
            ReplayError::TooMuchMemory {
                needed_bytes,
                limit_bytes,
            } => write!(
                f,
                "I/O buffers would need {needed_bytes} bytes, more than the limit of {limit_bytes}"
            ),
            ReplayError::Engine { what, .. } => write!(f, "I/O engine: {what}"),
        }
    }
}

impl std::error::Error for ReplayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReplayError::Trace { source, .. } => Some(source),
            ReplayError::Open { source, .. } | ReplayError::Engine { source, .. } => Some(source),
            _ => None,
        }
    }
}
