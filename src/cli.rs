//! Command-line definitions (clap) and the small commands that only glue flags to a library.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use iodump_format::WriterOptions;
use iodump_synth::{write_synth, SynthParams, Workload};

use crate::args::usage_bail;
#[cfg(feature = "analyze")]
use crate::offline::{AnalyzeArgs, ConvertArgs, ExportArgs, PlotArgs, ReportArgs};
use crate::{info::InfoArgs, record::RecordArgs};

/// Record every block I/O with eBPF, store it compactly, analyse and replay it offline.
#[derive(Debug, Parser)]
#[command(
    name = "iodump",
    version,
    about,
    propagate_version = true,
    after_help = "The original iodump's command line works too, without a subcommand: \
                  iodump -p DEV [-t SECS] [-s FILE] [-H] [-o FIELDS|csv|json] [-O FIELDS] \
                  [-S N] [-c COMM] [-C TEXT] [-P PID] [-a ACTION] [--sample PCT] [-f EXPR]; \
                  its help: iodump -p DEV --help."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show what traces hold: header, events, time span, devices, losses, integrity.
    Info(InfoArgs),
    /// Write a realistic synthetic trace (deterministic per seed), for tests and benchmarks.
    Synth(SynthArgs),
    /// Record every block I/O with eBPF, to a trace file or as lines on stdout.
    Record(Box<RecordArgs>),
    /// Live block I/O per file, process, device or cgroup (container, pod), with latency:
    /// a full-screen view, or snapshots as text or JSON (-b).
    Top(Box<crate::top::TopArgs>),
    /// Re-issue a recorded workload against a device or file with its timing, order and
    /// concurrency; reads only unless --allow-writes.
    Replay(Box<crate::replay::ReplayArgs>),
    #[cfg(feature = "analyze")]
    /// Write a trace's events as CSV (the original iodump's columns first), JSON lines, a
    /// fio iolog (version 3) that `fio --read_iolog` replays, or a Perfetto trace.
    Export(ExportArgs),
    /// Query traces or Parquet datasets: summary, top files and processes, latency, timeline,
    /// seeks, sequential writes, SQL.
    #[cfg(feature = "analyze")]
    Analyze(AnalyzeArgs),
    /// Convert traces to Parquet tables (io, processes, files, devices, losses) in a
    /// directory, for DuckDB, polars, pandas, Spark (schemas/parquet-tables.md).
    #[cfg(feature = "analyze")]
    Convert(ConvertArgs),
    /// Write one self-contained HTML report of traces (opens offline): summary, IOPS and
    /// throughput over time, latency heatmap, offsets, latency histogram, top processes and
    /// files, losses.
    #[cfg(feature = "analyze")]
    Report(ReportArgs),
    /// Draw one plot of a trace as SVG or PNG, for papers and tickets.
    #[cfg(feature = "analyze")]
    Plot(PlotArgs),
    /// Compare two recordings (traces, recordings in parts or Parquet datasets): per
    /// device, process, file and cgroup, what changed and whether it is significant.
    #[cfg(feature = "analyze")]
    Diff(Box<crate::diff::DiffArgs>),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WorkloadArg {
    /// fio-like 4k random reads plus background activity.
    Randread,
    /// Large sequential writes, writeback and journal.
    Seqwrite,
    /// A database: random 16k reads, redo log writes with fsync, journal, metadata.
    Oltp,
    /// A bit of everything, readahead, page faults, discards, errors.
    Mixed,
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Output trace file.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Number of events.
    #[arg(long, value_name = "N")]
    pub events: u64,
    /// Workload shape.
    #[arg(long, value_enum)]
    pub workload: WorkloadArg,
    /// Seed: the same seed gives the same trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Events per segment (smaller segments: finer damage granularity, slightly larger file).
    #[arg(long, value_name = "N", default_value_t = 65_536,
          value_parser = clap::value_parser!(u32).range(1..=4_194_304))]
    pub segment_events: u32,
    /// Write a recording in parts into the directory -o DIR/, as `iodump record --rotate`
    /// does: a part closed after this size or this long of the events' time (`1M`, `10s`).
    #[arg(long, value_name = "DURATION|SIZE", allow_hyphen_values = true)]
    pub rotate: Option<String>,
}

pub fn run_synth(a: &SynthArgs) -> anyhow::Result<ExitCode> {
    let workload = match a.workload {
        WorkloadArg::Randread => Workload::RandRead,
        WorkloadArg::Seqwrite => Workload::SeqWrite,
        WorkloadArg::Oltp => Workload::Oltp,
        WorkloadArg::Mixed => Workload::Mixed,
    };
    let params = SynthParams {
        events: a.events,
        workload,
        seed: a.seed,
    };
    let opts = WriterOptions {
        segment_events: a.segment_events as usize,
        ..WriterOptions::default()
    };
    if let Some(r) = &a.rotate {
        use iodump_format::units::{parse_span, Span};
        let mut cfg = iodump_output::parts::PartsConfig {
            dir: a.output.clone(),
            ..Default::default()
        };
        match parse_span(r) {
            Ok(Span::Duration(0)) | Ok(Span::Bytes(0)) => {
                usage_bail!("--rotate {r}: give a positive duration (10s) or size (1M)")
            }
            Ok(Span::Duration(ns)) => cfg.rotate_ns = Some(ns),
            Ok(Span::Bytes(b)) => cfg.rotate_bytes = Some(b),
            Err(e) => usage_bail!("--rotate {r}: {e}"),
        }
        let (summary, st) = iodump_synth::write_synth_parts(&params, cfg, opts)
            .with_context(|| format!("writing {}", a.output.display()))?;
        eprintln!(
            "iodump: wrote {} files in {} ({} events, {} lost, {} bytes)",
            st.parts,
            a.output.display(),
            summary.events,
            summary.lost_events,
            st.bytes_written
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Replaces what was there only once complete (and synced).
    let mut out = iodump_output::OutputFile::create(&a.output)?;
    let (summary, f) = write_synth(&params, out.try_clone_file()?, opts)
        .with_context(|| format!("writing {}", a.output.display()))?;
    out.commit()?;
    let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "iodump: wrote {} ({} events, {} lost, {} bytes, {:.2} bytes/event)",
        a.output.display(),
        summary.events,
        summary.lost_events,
        bytes,
        if summary.events > 0 {
            bytes as f64 / summary.events as f64
        } else {
            0.0
        }
    );
    Ok(ExitCode::SUCCESS)
}
