//! The original iodump's command line (`iodump -p sda -t 600 -H -s /tmp/log`, no subcommand)
//! and the seed article's forms of it (`--sample 10`, `-f EXPR`, `-o csv`). Its flags are
//! translated into the [`RecordConfig`] of `iodump record` and a printer format for its
//! columns: the same recorder, another way to ask for it.
//!
//! The mode is chosen when the first argument starts with `-` and is not one of the global
//! flags `-h`, `--help`, `-V`, `--version` (see [`is_original`]).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Parser;
use iodump_record::bpf::BpfSettings;
use iodump_record::print::{Columns, OriginalFormat, OriginalStyle, PrintFormat};
use iodump_record::{devices, RecordConfig};

use crate::args::{usage, usage_bail};

const AFTER_HELP: &str = "\
Fields of -o and -O (printed in this order, whatever the order given):
  datetime timestamp comm pid tid iosize sector partition rw rwsec launcher ino (the original's)
  lba dev latency queue cgroup cpu error (iodump's), fullpath (last)
Default: datetime,comm,pid,iosize,sector,rw,rwsec,launcher,fullpath.

Examples:
  iodump -p sda                      every I/O of sda and its partitions for 300 s
  iodump -p nvme -t -1 -H            every NVMe device, no time limit, no header
  iodump -p sda -O tid,ino,latency   the default columns and three more
  iodump -p sdb --sample 10 -t 3600  10% of the I/O for an hour (-S 10: one in 10)
  iodump -p nvme0n1 -f 'iosize > 1048576 && rw == W' -o csv
  iodump -p sda -s /tmp/io.log       CSV for pandas: pd.read_csv('/tmp/io.log')
  iodump -p sda -s /tmp/sda.iod      a binary trace for iodump analyze, report, replay

The same recorder as `iodump record` (see iodump record --help for all its options).";

/// The original iodump's options, and the article's.
#[derive(Debug, Parser)]
#[command(
    name = "iodump",
    about = "The original iodump's command line: record every block I/O of a device",
    override_usage = "iodump -p DEV [OPTIONS] [-- CMD...]",
    disable_version_flag = true,
    after_help = AFTER_HELP
)]
pub struct OriginalArgs {
    /// Device (required; repeatable): a disk (with its partitions), a partition, /dev/X,
    /// MAJ:MIN, or a name prefix such as `nvme` (every such device).
    #[arg(short = 'p', value_name = "DEV", required = true)]
    pub devices: Vec<String>,
    /// Stop after SECS seconds; -1: no limit.
    #[arg(
        short = 't',
        value_name = "SECS",
        default_value_t = 300.0,
        allow_hyphen_values = true
    )]
    pub seconds: f64,
    /// Append the lines to FILE instead of stdout: CSV with the article's columns (pandas
    /// reads it; the header only into an empty file), or the original's columns with
    /// -o text, -o FIELDS or -O FIELDS. FILE.iod: write a binary trace instead.
    #[arg(short = 's', value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// No header line.
    #[arg(short = 'H')]
    pub no_header: bool,
    /// Output fields, comma-separated, instead of the default; or `csv` or `json` (that
    /// format, the article's columns first), or `text` (the default columns).
    #[arg(short = 'o', value_name = "FIELDS")]
    pub output: Option<String>,
    /// Output fields added to the default (or to -o's).
    #[arg(short = 'O', value_name = "FIELDS")]
    pub extra: Option<String>,
    /// Record one I/O in N (per CPU, in the kernel).
    #[arg(short = 'S', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub one_in: Option<u32>,
    /// Record a sample: a percentage (`10` or `10%`) or one in N (`1/N`).
    #[arg(long, value_name = "RATE")]
    pub sample: Option<String>,
    /// Only I/O matching EXPR, e.g. 'iosize > 1048576 && rw == W'
    /// (schemas/filter-expressions.md).
    #[arg(short = 'f', long = "filter", value_name = "EXPR")]
    pub filter: Option<String>,
    /// Only I/O of threads with exactly this command name (repeatable).
    #[arg(short = 'c', value_name = "COMM")]
    pub comms: Vec<String>,
    /// Only I/O of threads whose command name contains TEXT (repeatable: any of them).
    #[arg(short = 'C', value_name = "TEXT")]
    pub comm_contains: Vec<String>,
    /// Only I/O of this process id (tgid; repeatable).
    #[arg(short = 'P', value_name = "PID")]
    pub pids: Vec<u32>,
    /// The original's tracepoint (blktrace letter Q G I D C M F X R B S, or a name such as
    /// block_getrq): accepted; iodump records each I/O once over its whole life.
    #[arg(short = 'a', value_name = "ACTION")]
    pub action: Option<String>,
    /// A command to run and record until it exits (after `--`).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// True when the command line is the original iodump's: the first argument is an option
/// (`-p`, `-t`, `--sample`…) other than `-h`, `--help`, `-V`, `--version` (which are
/// iodump's own) and `--`.
pub fn is_original(args: &[OsString]) -> bool {
    let Some(first) = args.get(1).and_then(|a| a.to_str()) else {
        return false;
    };
    first.starts_with('-')
        && first.len() > 1
        && !matches!(first, "-h" | "--help" | "-V" | "--version" | "--")
}

/// The original's `-a` actions: blktrace letters and tracepoint names.
const ACTIONS: [(char, &str); 11] = [
    ('Q', "block_bio_queue"),
    ('G', "block_getrq"),
    ('I', "block_rq_insert"),
    ('D', "block_rq_issue"),
    ('C', "block_rq_complete"),
    ('M', "block_bio_backmerge"),
    ('F', "block_bio_frontmerge"),
    ('X', "block_split"),
    ('R', "block_rq_requeue"),
    ('B', "block_bio_bounce"),
    ('S', "block_sleeprq"),
];

/// A glob that matches any text containing `s` (for `comm =~`), as a quoted string of the
/// filter language: the glob's `*`, `?` and `[` are put in sets, `"` and `\` escaped.
fn contains_glob(s: &str) -> String {
    let mut g = String::from("\"*");
    for c in s.chars() {
        match c {
            '*' | '?' | '[' => {
                g.push('[');
                g.push(c);
                g.push(']');
            }
            '"' | '\\' => {
                g.push('\\');
                g.push(c);
            }
            c => g.push(c),
        }
    }
    g.push_str("*\"");
    g
}

/// What -o and -O ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// Nothing: the original's columns on stdout, CSV in a -s file.
    Default,
    Style(OriginalStyle),
}

fn choice(a: &OriginalArgs) -> anyhow::Result<Choice> {
    let fields = |flag: &str, list: &str| {
        Columns::parse(list).map_err(|e| usage(format!("-{flag} {list}: {e}")))
    };
    let c = match a.output.as_deref() {
        None => Choice::Default,
        Some("csv") => Choice::Style(OriginalStyle::Csv),
        Some("json") => Choice::Style(OriginalStyle::Json),
        Some("text") => Choice::Style(OriginalStyle::Columns(Columns::original_default())),
        Some(list) => Choice::Style(OriginalStyle::Columns(fields("o", list)?)),
    };
    let Some(extra) = &a.extra else {
        return Ok(c);
    };
    let extra = fields("O", extra)?;
    Ok(match c {
        Choice::Default => Choice::Style(OriginalStyle::Columns(
            Columns::original_default().with(extra),
        )),
        Choice::Style(OriginalStyle::Columns(c)) => {
            Choice::Style(OriginalStyle::Columns(c.with(extra)))
        }
        Choice::Style(_) => usage_bail!(
            "-O adds fields to the original's columns; -o {} has fixed columns",
            a.output.as_deref().unwrap_or_default()
        ),
    })
}

/// Opens `p` to append lines: created 0600 when missing; a link, anything but a regular file
/// or another user's file is refused (the output rule of iodump-output, but appending).
fn open_append(p: &Path) -> anyhow::Result<File> {
    iodump_output::check(p)?;
    let f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)
        .with_context(|| format!("opening {}", p.display()))?;
    if !f.metadata()?.is_file() {
        bail!("refusing to write {}: not a regular file", p.display());
    }
    Ok(f)
}

/// The record configuration of an original command line (`argv` for the trace header).
pub fn config(a: &OriginalArgs, argv: Vec<String>) -> anyhow::Result<RecordConfig> {
    let bpf = BpfSettings {
        sample_every: sample_every(a)?,
        pids: a.pids.clone(),
        comms: a.comms.iter().map(|c| c.as_bytes().to_vec()).collect(),
        ..BpfSettings::default()
    };
    let filter = filter(a)?;
    if let Some(act) = &a.action {
        check_action(act)?;
    }
    let duration = crate::record::time_limit(a.seconds)?;
    let (output, print, print_to) = outputs(a)?;
    Ok(RecordConfig {
        devices: device_names(&a.devices)?,
        output,
        duration,
        print,
        bpf,
        command: a.command.clone(),
        recorder_argv: argv,
        memory_limit_bytes: 64 << 20,
        metadata: Vec::new(),
        filter,
        print_to,
        container: None,
        ..RecordConfig::default()
    })
}

/// `-S N` or `--sample`: record one I/O in N.
fn sample_every(a: &OriginalArgs) -> anyhow::Result<u32> {
    Ok(match (a.one_in, &a.sample) {
        (Some(_), Some(_)) => usage_bail!("-S N and --sample say the same: give one"),
        (Some(n), None) => n,
        (None, Some(s)) => crate::record::parse_sample(s)?,
        (None, None) => 1,
    })
}

/// `-f EXPR` and `-c TEXT` (command names containing TEXT) as one expression.
fn filter(a: &OriginalArgs) -> anyhow::Result<Option<iodump_format::expr::Expr>> {
    let mut terms = Vec::new();
    if let Some(f) = &a.filter {
        crate::args::parse_filter("-f", f)?;
        terms.push(format!("({f})"));
    }
    if !a.comm_contains.is_empty() {
        let any: Vec<String> = a
            .comm_contains
            .iter()
            .map(|s| format!("comm =~ {}", contains_glob(s)))
            .collect();
        terms.push(format!("({})", any.join(" || ")));
    }
    if terms.is_empty() {
        return Ok(None);
    }
    Ok(Some(crate::args::parse_filter("-f", &terms.join(" && "))?))
}

/// `-a ACTION`: one of the original's tracepoint actions is accepted (with a note: iodump
/// records each I/O over its whole life); anything else is an error.
fn check_action(act: &str) -> anyhow::Result<()> {
    let known = ACTIONS
        .iter()
        .any(|(l, n)| (act.len() == 1 && act.starts_with(*l)) || act == *n);
    if !known {
        usage_bail!(
            "-a {act}: not one of the original's actions ({})",
            ACTIONS
                .iter()
                .map(|(l, _)| l.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    eprintln!(
        "iodump: -a {act} accepted: iodump records each I/O once over its whole life \
         (entry into the block layer to completion, with its queue and latency fields), \
         not the events of one tracepoint"
    );
    Ok(())
}

/// `-p` prefixes: the device names they match, each once.
fn device_names(prefixes: &[String]) -> anyhow::Result<Vec<String>> {
    let all = devices::list()?;
    let mut names: Vec<String> = Vec::new();
    for p in prefixes {
        for d in devices::resolve_prefix(p, &all)? {
            if !names.contains(&d.name) {
                names.push(d.name);
            }
        }
    }
    Ok(names)
}

type Outputs = (
    Option<std::path::PathBuf>,
    Option<PrintFormat>,
    Option<Arc<File>>,
);

/// Where the events go: `-s FILE.iod` a trace (and the lines -o asks for on stdout), `-s
/// FILE` lines appended to FILE (CSV by default), else lines on stdout.
fn outputs(a: &OriginalArgs) -> anyhow::Result<Outputs> {
    let choice = choice(a)?;
    let header = !a.no_header;
    let fmt = |style, header| PrintFormat::Original(OriginalFormat { style, header });
    Ok(match &a.save {
        Some(p) if p.extension().is_some_and(|e| e == "iod") => {
            let print = match choice {
                Choice::Default => None,
                Choice::Style(s) => Some(fmt(s, header)),
            };
            (Some(p.clone()), print, None)
        }
        Some(p) => {
            let f = open_append(p)?;
            let style = match choice {
                Choice::Default => OriginalStyle::Csv,
                Choice::Style(s) => s,
            };
            // Appended CSV stays one table: its header only at the top of the file.
            let empty = f.metadata()?.len() == 0;
            let header = header && (empty || style != OriginalStyle::Csv);
            (None, Some(fmt(style, header)), Some(Arc::new(f)))
        }
        None => {
            let style = match choice {
                Choice::Default => OriginalStyle::Columns(Columns::original_default()),
                Choice::Style(s) => s,
            };
            (None, Some(fmt(style, header)), None)
        }
    })
}

/// Runs the original iodump's command line.
pub fn run(args: &[OsString]) -> anyhow::Result<ExitCode> {
    let a = OriginalArgs::parse_from(args);
    let argv = args
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let cfg = config(&a, argv)?;
    crate::record::execute(&cfg, false, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_mode_is_chosen_by_the_first_argument() {
        assert!(is_original(&os(&["iodump", "-p", "sda"])));
        assert!(is_original(&os(&["iodump", "--sample", "10", "-p", "sdb"])));
        assert!(is_original(&os(&["iodump", "-H"])));
        for not in [
            &["iodump"][..],
            &["iodump", "record", "-p", "sda"],
            &["iodump", "-h"],
            &["iodump", "--help"],
            &["iodump", "-V"],
            &["iodump", "--version"],
            &["iodump", "--"],
            &["iodump", "-"],
        ] {
            assert!(!is_original(&os(not)), "{not:?}");
        }
    }

    #[test]
    fn contains_globs_match_substrings_literally() {
        use iodump_format::expr::glob;
        for (sub, comm, want) in [
            ("worker", "kworker/1:0", true),
            ("kworker", "kworker/u8:2", true),
            ("1:0", "kworker/1:0", true),
            ("x*y", "ax*yb", true),
            ("x*y", "axzyb", false),
            ("a?", "ba?", true),
            ("a?", "bab", false),
            ("[", "a[b", true),
            ("sql", "mysqld", true),
            ("sql", "postgres", false),
        ] {
            let g = contains_glob(sub);
            // The string literal's body, unescaped as the filter language does.
            let body = g[1..g.len() - 1]
                .replace("\\\"", "\"")
                .replace("\\\\", "\\");
            assert_eq!(
                glob(body.as_bytes(), comm.as_bytes()),
                want,
                "{sub} in {comm}"
            );
            crate::args::parse_filter("-C", &format!("comm =~ {g}")).unwrap();
        }
        crate::args::parse_filter("-C", &format!("comm =~ {}", contains_glob("a\"b\\c"))).unwrap();
    }

    fn args(v: &[&str]) -> OriginalArgs {
        let mut all = vec!["iodump"];
        all.extend_from_slice(v);
        OriginalArgs::try_parse_from(all).unwrap()
    }

    #[test]
    fn choices_of_o_and_big_o() {
        let d = Columns::original_default();
        assert_eq!(choice(&args(&["-p", "x"])).unwrap(), Choice::Default);
        assert_eq!(
            choice(&args(&["-p", "x", "-o", "csv"])).unwrap(),
            Choice::Style(OriginalStyle::Csv)
        );
        assert_eq!(
            choice(&args(&["-p", "x", "-o", "json"])).unwrap(),
            Choice::Style(OriginalStyle::Json)
        );
        assert_eq!(
            choice(&args(&["-p", "x", "-o", "text"])).unwrap(),
            Choice::Style(OriginalStyle::Columns(d))
        );
        assert_eq!(
            choice(&args(&["-p", "x", "-o", "comm,pid"])).unwrap(),
            Choice::Style(OriginalStyle::Columns(Columns::parse("pid,comm").unwrap()))
        );
        assert_eq!(
            choice(&args(&["-p", "x", "-O", "tid,ino"])).unwrap(),
            Choice::Style(OriginalStyle::Columns(
                d.with(Columns::parse("ino,tid").unwrap())
            ))
        );
        assert!(choice(&args(&["-p", "x", "-o", "csv", "-O", "tid"])).is_err());
        let e = choice(&args(&["-p", "x", "-o", "comm,nope"])).unwrap_err();
        assert!(e.to_string().contains("\"nope\""), "{e}");
        // Every field the help names parses.
        for (n, _, _) in iodump_record::print::FIELDS {
            Columns::parse(n).unwrap();
        }
    }

    #[test]
    fn flags_parse_as_the_original_wrote_them() {
        let a = args(&["-p", "sda5", "-t", "-1", "-H"]);
        assert_eq!((a.seconds, a.no_header), (-1.0, true));
        assert_eq!(args(&["-p", "sda"]).seconds, 300.0);
        let a = args(&[
            "-p",
            "nvme0n1p1",
            "-S",
            "10",
            "-c",
            "kworker/1:0",
            "-P",
            "1234",
        ]);
        assert_eq!((a.one_in, a.pids.as_slice()), (Some(10), &[1234][..]));
        assert_eq!(a.comms, ["kworker/1:0"]);
        assert!(OriginalArgs::try_parse_from(["iodump", "-t", "5"]).is_err());
        assert!(OriginalArgs::try_parse_from(["iodump", "-p", "x", "-S", "0"]).is_err());
    }
}
