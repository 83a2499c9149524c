//! Typed errors of the recorder.

use std::fmt;

/// A cause kept as it came (an aya, BTF or I/O error), for [`std::error::Error::source`].
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why recording could not start or go on. Each variant's message says what was being done;
/// the error that made it fail is its [`source`](std::error::Error::source) (a verifier log
/// can be long: callers that print one line cut it).
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordError {
    /// Not allowed to load BPF programs.
    NoPrivilege {
        /// What failed.
        what: String,
    },
    /// No usable kernel BTF.
    NoBtf {
        /// What was read, or what is missing and what to do.
        what: String,
        /// Why it could not be used (none when it does not exist).
        source: Option<Cause>,
    },
    /// A `-d` argument names no block device.
    UnknownDevice {
        /// The argument.
        name: String,
        /// Known device names.
        known: Vec<String>,
    },
    /// sysfs could not be read.
    Sysfs(iodump_host::sysfs::SysfsError),
    /// The BPF object failed to load or attach.
    Bpf {
        /// What was being done.
        what: String,
        /// The loader's error.
        source: Cause,
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
        /// Why.
        source: std::io::Error,
    },
    /// A bad option value.
    BadOption {
        /// What is wrong.
        what: String,
    },
    /// SIGINT, SIGTERM or SIGHUP came while the program was loading: nothing was recorded,
    /// the command was not started, and an existing output file was left as it was.
    Interrupted,
}

/// `m` cut to about 600 bytes, for one-line messages: a verifier log is long, its first
/// words say what was being loaded and its end why the verifier refused, so both are kept.
pub fn shorten(m: String) -> String {
    const KEEP: usize = 600;
    if m.len() <= KEEP + 200 {
        return m;
    }
    let mut head_end = m.find(['\n', ':']).unwrap_or(0).min(200);
    while !m.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail = m.len() - KEEP;
    while !m.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} … {}", &m[..head_end], &m[tail..])
}

/// An error and its causes on one line: a cause its error already shows is left out
/// (`opening x: No such file or directory` once, not twice), and a long cause (a verifier
/// log) is cut to its first words and its last 600 bytes, where the verifier says why
/// ([`shorten`]).
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = String::new();
    let mut cause = Some(e);
    while let Some(c) = cause {
        let t = shorten(c.to_string().replace('\n', " "));
        if msg.is_empty() {
            msg = t;
        } else if !msg.ends_with(&t) {
            msg = format!("{msg}: {t}");
        }
        cause = c.source();
    }
    msg
}

/// An error that is only a message (an attach failure the loader described in words).
#[derive(Debug)]
pub struct Message(pub String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::NoPrivilege { what } => write!(
                f,
                "{what}: permission denied (recording needs root, or CAP_BPF and CAP_PERFMON)"
            ),
            RecordError::NoBtf { what, .. } => write!(f, "no usable kernel BTF: {what}"),
            RecordError::UnknownDevice { name, known } => write!(
                f,
                "unknown block device '{name}' (this machine has: {})",
                known.join(", ")
            ),
            RecordError::Sysfs(e) => write!(f, "{e}"),
            RecordError::Bpf { what, .. } => write!(f, "{what}"),
            RecordError::Write(e) => write!(f, "{e}"),
            RecordError::Output(e) => write!(f, "{e}"),
            RecordError::Command { program, .. } => write!(f, "cannot run {program}"),
            RecordError::BadOption { what } => write!(f, "{what}"),
            RecordError::Interrupted => f.write_str(
                "interrupted before recording began: nothing recorded (an existing output file is left as it was)",
            ),
        }
    }
}

impl std::error::Error for RecordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordError::NoBtf { source, .. } => source.as_deref().map(|e| e as _),
            RecordError::Bpf { source, .. } => Some(source.as_ref()),
            RecordError::Command { source, .. } => Some(source),
            // Shown through Display, so their causes are the next in the chain (a
            // WriteError shows its cause itself).
            RecordError::Sysfs(e) => e.source(),
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

impl From<iodump_output::parts::PartsError> for RecordError {
    fn from(e: iodump_output::parts::PartsError) -> Self {
        match e {
            iodump_output::parts::PartsError::Output(e) => RecordError::Output(e),
            iodump_output::parts::PartsError::Write(e) => RecordError::Write(e),
        }
    }
}
