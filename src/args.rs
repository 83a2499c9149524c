//! Argument helpers shared by the commands: the selection flags of `record` and `top`
//! ([`Selection`]), the table format of the offline commands, parsing a filter expression,
//! and the usage errors found after clap's parsing ([`Usage`], exit status 2). A leaf: it imports no other module of the binary, so that `cli` and the
//! commands it names (`top`, `replay`, `diff`…) can all use it.

use std::fmt;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// A usage error found after clap parsed the command line: a bad flag value or combination,
/// a filter or duration that does not parse, a device no input has. `main` exits with 2 for
/// it, as clap does for its own; every other error exits with 1.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A [`Usage`] error saying `msg`.
pub fn usage(msg: impl fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Usage(msg.to_string()))
}

/// `bail!` for a usage error: returns a [`Usage`] error formatted as `format!` would.
macro_rules! usage_bail {
    ($($arg:tt)*) => {
        return Err($crate::args::usage(format!($($arg)*)))
    };
}
pub(crate) use usage_bail;

/// Whether `e` is a usage error: a [`Usage`] anywhere in its chain, or an error of a library
/// crate that is about the flags it was given (a bad replay speed, an unknown `analyze -d`
/// device).
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        if c.is::<Usage>() {
            return true;
        }
        if let Some(r) = c.downcast_ref::<iodump_replay::ReplayError>() {
            return r.is_usage();
        }
        #[cfg(feature = "analyze")]
        if let Some(a) = c.downcast_ref::<iodump_analyze::AnalyzeError>() {
            return a.is_usage();
        }
        false
    })
}

/// Which I/O `record` and `top` see: the same flags, declared once, with the same conflicts.
#[derive(Debug, Args)]
pub struct Selection {
    /// Device (sda, sda1, nvme0n1, dm-0, vda, zram0, /dev/X or MAJ:MIN); repeatable. A disk
    /// includes its partitions. Default: every device.
    #[arg(
        short = 'd',
        long = "device",
        visible_short_alias = 'p',
        value_name = "DEV"
    )]
    pub devices: Vec<String>,
    /// Only I/O matching EXPR, e.g. 'iosize > 1M && rw == W' (see
    /// schemas/filter-expressions.md); what it implies for size, op, pid and comm is applied
    /// in the kernel.
    #[arg(short = 'f', long = "filter", value_name = "EXPR")]
    pub filter: Option<String>,
    /// Only I/O submitted by this process id; repeatable.
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Only I/O submitted by a thread with this command name; repeatable.
    #[arg(long = "comm", value_name = "NAME")]
    pub comms: Vec<String>,
    /// Only I/O submitted by tasks in this cgroup v2 (a directory, or a path under the
    /// cgroup2 mount such as /system.slice/nginx.service) or below it (in the kernel).
    #[arg(long, value_name = "PATH", conflicts_with = "container")]
    pub cgroup: Option<PathBuf>,
    /// Only I/O submitted by tasks of this container or pod: a prefix of its id (docker,
    /// containerd, CRI-O, podman; an LXC container's name), `RUNTIME:ID` (docker:0123ab),
    /// or `pod:UID` (a Kubernetes pod). For `record`, its cgroup must exist when recording
    /// starts; like --cgroup, writeback that kernel threads submit for it is not included.
    #[arg(long, value_name = "ID")]
    pub container: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TableFormat {
    /// Aligned columns for the terminal.
    Table,
    /// CSV with a header line.
    Csv,
    /// A JSON array of objects.
    Json,
}

/// A number as the user would write it: `1.5`, `-1`, `1e20`, `1e-300` (not 21 digits).
pub fn show_f64(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-6..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Parses the filter expression given with `flag` (`-f`, `--filter`). The error is one line:
/// an expression longer than 80 bytes is quoted only around the column at fault.
pub fn parse_filter(flag: &str, text: &str) -> anyhow::Result<iodump_format::expr::Expr> {
    let expr = parse_filter_quietly(flag, text)?;
    for w in expr.warnings() {
        eprintln!("iodump: warning: {flag}: {w}");
    }
    Ok(expr)
}

/// [`parse_filter`] without its warnings.
fn parse_filter_quietly(flag: &str, text: &str) -> anyhow::Result<iodump_format::expr::Expr> {
    iodump_format::expr::Expr::parse(text).map_err(|e| {
        if text.len() <= 80 {
            return usage(format!("bad {flag} expression {text:?}: {e}"));
        }
        let floor = |mut i: usize| {
            while !text.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        let from = floor(e.at.saturating_sub(30));
        let to = floor((e.at + 30).min(text.len()));
        usage(format!(
            "bad {flag} expression ({} bytes) near {}{:?}{}: {e}",
            text.len(),
            if from > 0 { "…" } else { "" },
            &text[from..to],
            if to < text.len() { "…" } else { "" },
        ))
    })
}
