//! `iodump diff A B`: flags → [`DiffConfig`], one call to [`iodump_analyze::diff::diff`], the
//! rows on stdout as `iodump analyze` prints them, and one line of summary on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use iodump_analyze::diff::{DiffBy, DiffConfig, Scope};

use crate::args::{usage_bail, TableFormat};

/// Which figures are ranked and shown.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DiffByArg {
    /// Every figure.
    Change,
    /// I/Os and IOPS.
    Ios,
    /// Bytes and throughput.
    Bytes,
    /// Read/write mix, size mix and sequential share.
    Mix,
    /// Latency and queue time.
    Latency,
}

/// Groups compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScopeArg {
    /// The whole recording.
    Total,
    /// Per device (by name).
    Dev,
    /// Per process (by command line, pids and temporary names left out).
    Proc,
    /// Per file (by path).
    File,
    /// Per cgroup (by path, container ids and pod UIDs left out).
    Cgroup,
}

/// Compare two recordings: for the whole recording and per device, process, file and cgroup,
/// I/Os, IOPS, bytes, MB/s, read/write mix, size mix, sequential share, latency and queue
/// time percentiles, each with A, B, the change and whether it is significant (README, `iodump
/// diff`, says which test each figure has). Rows are ordered by the size of the change,
/// significant changes first.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// The baseline: a trace, a recording's directory, or a directory `iodump convert` wrote.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// What is compared with the baseline (the same kinds of input).
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// The figures ranked and shown.
    #[arg(long, value_enum, default_value = "change")]
    pub by: DiffByArg,
    /// The groups compared (comma-separated; default all).
    #[arg(
        long = "group-by",
        value_enum,
        value_delimiter = ',',
        value_name = "GROUPS"
    )]
    pub group_by: Vec<ScopeArg>,
    /// Only I/O matching EXPR, on both sides (same language as `record -f`).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Only I/O matching EXPR in A (with --filter): e.g. the hour before an incident, when
    /// B is the incident's minutes of the same recording (`time >= … && time < …`).
    #[arg(long = "filter-a", value_name = "EXPR", conflicts_with = "replay")]
    pub filter_a: Option<String>,
    /// Only I/O matching EXPR in B (with --filter).
    #[arg(long = "filter-b", value_name = "EXPR", conflicts_with = "replay")]
    pub filter_b: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: TableFormat,
    /// Most rows shown (0: all).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    /// False discovery rate of the tests over all figures compared (Benjamini–Hochberg): a
    /// change is significant when its test passes at it and the change is big enough.
    #[arg(long, default_value_t = 0.01, value_name = "P")]
    pub alpha: f64,
    /// Smallest change called significant: percent of A for amounts, percentage points for
    /// shares.
    #[arg(long = "min-change", default_value_t = 5.0, value_name = "PCT")]
    pub min_change_pct: f64,
    /// Compare what is intact of a damaged trace (refused by default: the comparison would
    /// be biased).
    #[arg(long)]
    pub allow_damaged: bool,
    /// Score a replay instead: A is the recording replayed, B the recording of the replay
    /// (`iodump replay -o`). Prints one line of summary and the JSON (only the JSON with
    /// --format json); --filter selects the part of A that was replayed.
    #[arg(long, conflicts_with_all = ["by", "group_by", "limit", "alpha", "min_change_pct", "allow_damaged"])]
    pub replay: bool,
    /// With --replay: the replay's --speed (default 1).
    #[arg(long, requires = "replay")]
    pub speed: Option<f64>,
    /// With --replay: the replay was made without --allow-writes, so it issued reads and
    /// flushes only; score those (A's writes would count as not issued).
    #[arg(long = "reads-only", requires = "replay")]
    pub reads_only: bool,
}

/// The flags as a typed comparison.
fn config(a: &DiffArgs) -> anyhow::Result<DiffConfig> {
    if !(a.alpha > 0.0 && a.alpha < 1.0) {
        usage_bail!(
            "--alpha {}: give a level between 0 and 1, such as 0.01",
            a.alpha
        );
    }
    if !(a.min_change_pct >= 0.0 && a.min_change_pct.is_finite()) {
        usage_bail!(
            "--min-change {}: give a percentage, such as 5",
            a.min_change_pct
        );
    }
    let mut cfg = DiffConfig::new(vec![a.a.clone()], vec![a.b.clone()]);
    cfg.filter = a
        .filter
        .as_deref()
        .map(|f| crate::args::parse_filter("--filter", f))
        .transpose()?;
    cfg.filter_a = a
        .filter_a
        .as_deref()
        .map(|f| crate::args::parse_filter("--filter-a", f))
        .transpose()?;
    cfg.filter_b = a
        .filter_b
        .as_deref()
        .map(|f| crate::args::parse_filter("--filter-b", f))
        .transpose()?;
    cfg.scopes = a
        .group_by
        .iter()
        .map(|s| match s {
            ScopeArg::Total => Scope::Total,
            ScopeArg::Dev => Scope::Dev,
            ScopeArg::Proc => Scope::Proc,
            ScopeArg::File => Scope::File,
            ScopeArg::Cgroup => Scope::Cgroup,
        })
        .collect();
    cfg.by = match a.by {
        DiffByArg::Change => DiffBy::Change,
        DiffByArg::Ios => DiffBy::Ios,
        DiffByArg::Bytes => DiffBy::Bytes,
        DiffByArg::Mix => DiffBy::Mix,
        DiffByArg::Latency => DiffBy::Latency,
    };
    cfg.limit = a.limit;
    cfg.alpha = a.alpha;
    cfg.min_change_pct = a.min_change_pct;
    cfg.allow_damaged = a.allow_damaged;
    Ok(cfg)
}

/// `--replay`: the verification of a replay, as one line and the JSON.
fn run_replay(a: &DiffArgs) -> anyhow::Result<ExitCode> {
    if matches!(a.format, TableFormat::Csv) {
        usage_bail!("--replay prints one line and the JSON, or with --format json the JSON alone");
    }
    let speed = a.speed.unwrap_or(1.0);
    if !(speed > 0.0 && speed.is_finite()) {
        usage_bail!("--speed {speed}: give a positive number");
    }
    let cfg = iodump_analyze::verify::VerifyConfig {
        original: a.a.clone(),
        replayed: a.b.clone(),
        filter: a
            .filter
            .as_deref()
            .map(|f| crate::args::parse_filter("--filter", f))
            .transpose()?,
        speed,
        reads_only: a.reads_only,
    };
    let v = iodump_analyze::verify::verify(&cfg)?;
    if v.recorded_ios == 0 {
        let of = format!("the recording replayed ({})", a.a.display());
        crate::offline::warn_no_io(cfg.filter.is_some(), &of);
    }
    if v.replayed_ios == 0 {
        crate::offline::warn_no_io(
            false,
            &format!("the replay's recording ({})", a.b.display()),
        );
    }
    if !matches!(a.format, TableFormat::Json) {
        println!("{}", v.summary());
    }
    println!("{}", v.json());
    Ok(ExitCode::SUCCESS)
}

pub fn run(a: &DiffArgs) -> anyhow::Result<ExitCode> {
    if a.replay {
        return run_replay(a);
    }
    let cfg = config(a)?;
    crate::offline::note_snapshots_left_out(&cfg.a);
    crate::offline::note_snapshots_left_out(&cfg.b);
    // A bar on stderr when it is a terminal, over both sides' I/Os.
    let total: u64 = [&cfg.a, &cfg.b]
        .iter()
        .filter_map(|p| iodump_analyze::InputPath::expand(p).ok())
        .map(|i| iodump_analyze::onepass::announced_rows(&i))
        .sum();
    let d = crate::offline::with_progress(total, "comparing", |tick| {
        iodump_analyze::diff::diff(&cfg, tick)
    })?;
    let (columns, rows) = d.table(cfg.by, cfg.limit);
    let kinds = iodump_analyze::diff::COLUMN_KINDS;
    crate::offline::print_table(a.format, &columns, &kinds, &rows);
    // Names as given may hold any byte: shown escaped, as `info` shows them.
    let esc = |s: &str| iodump_format::text::escape_controls(s).into_owned();
    for side in [&d.a, &d.b] {
        if let Some((trace, dmg)) = side.damaged.first() {
            eprintln!(
                "iodump: warning: {}: {} skipped (first: {dmg})",
                esc(trace),
                iodump_format::Damage::count_in_words(side.damaged.iter().map(|(_, d)| d))
            );
        }
    }
    for (label, side, own) in [("A", &d.a, true), ("B", &d.b, false)] {
        if side.events == 0 {
            let of = format!("{label} ({})", esc(&side.name));
            crate::offline::warn_no_io(cfg.side_filter(own).is_some(), &of);
        }
    }
    for (side, why) in d.no_sequential() {
        eprintln!(
            "iodump: warning: sequential_pct not compared: {}: {why}",
            esc(&side.name)
        );
    }
    let unknown = d.cgroups_unknown();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|s| esc(&s.name)).collect();
        eprintln!(
            "iodump: note: cgroups not compared: {} {} no cgroups table (a trace before format 1.2, a synthetic one, or a dataset of such)",
            names.join(" and "),
            if names.len() == 1 { "has" } else { "have" }
        );
    }
    eprintln!(
        "iodump: A {}: {} I/Os over {:.3} s; B {}: {} I/Os over {:.3} s; {} of {} figures changed significantly",
        esc(&d.a.name),
        d.a.events,
        d.a.duration_s,
        esc(&d.b.name),
        d.b.events,
        d.b.duration_s,
        d.significant(),
        d.rows.len()
    );
    Ok(ExitCode::SUCCESS)
}
