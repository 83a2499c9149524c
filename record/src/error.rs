//! Typed errors of the recorder.

use std::fmt;

/// Why recording could not start or go on.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordError {
    /// Not allowed to load BPF programs.
    NoPrivilege {
        /// What failed.
        what: String,
    },
    /// The kernel has no BTF at /sys/kernel/btf/vmlinux.
    NoBtf {
        /// The loader's message.
        message: String,
    },
    /// A `-d` argument names no block device.
    UnknownDevice {
        /// The argument.
        name: String,
        /// Known device names.
        known: Vec<String>,
    },
    /// sysfs could not be read.
    Sysfs {
        /// The path.
        path: String,
        /// The error.
        message: String,
    },
    /// The BPF object failed to load or attach.
    Bpf {
        /// What was being done.
        what: String,
        /// The loader's message.
        message: String,
    },
    /// Writing the trace failed (what was written before is intact).
    Write(iodump_format::WriteError),
    /// The output file could not be created or was refused (a link, another user's file,
    /// not a regular file), or could not take its path once recording started.
    Output(iodump_output::OutputError),
    /// The command to trace could not be started.
    Command {
        /// The program.
        program: String,
        /// The error.
        message: String,
    },
    /// A bad option value.
    BadOption {
        /// What is wrong.
        what: String,
    },
    /// Another system call failed.
    Os {
        /// What was being done.
        what: &'static str,
        /// The error.
        message: String,
    },
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::NoPrivilege { what } => write!(
                f,
                "{what}: permission denied (recording needs root, or CAP_BPF and CAP_PERFMON)"
            ),
            RecordError::NoBtf { message } => write!(f, "no usable kernel BTF: {message}"),
            RecordError::UnknownDevice { name, known } => write!(
                f,
                "unknown block device '{name}' (this machine has: {})",
                known.join(", ")
            ),
            RecordError::Sysfs { path, message } => write!(f, "reading {path}: {message}"),
            RecordError::Bpf { what, message } => write!(f, "{what}: {message}"),
            RecordError::Write(e) => write!(f, "{e}"),
            RecordError::Output(e) => write!(f, "{e}"),
            RecordError::Command { program, message } => {
                write!(f, "cannot run {program}: {message}")
            }
            RecordError::BadOption { what } => write!(f, "{what}"),
            RecordError::Os { what, message } => write!(f, "{what}: {message}"),
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Shown through Display, so its cause is the next in the chain (a WriteError
            // shows its cause itself).
            RecordError::Output(e) => e.source(),
            _ => None,
        }
    }
}

impl From<iodump_output::OutputError> for RecordError {
    fn from(e: iodump_output::OutputError) -> Self {
        RecordError::Output(e)
    }
}

impl From<iodump_format::WriteError> for RecordError {
    fn from(e: iodump_format::WriteError) -> Self {
        RecordError::Write(e)
    }
}
