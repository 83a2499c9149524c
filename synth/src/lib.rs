//! `iodump-synth` owns the synthetic trace generator used by tests and benchmarks
//! (`iodump synth`): deterministic, realistic block-I/O traces made without root.
//!
//! It owns the host a synthetic trace pretends to come from (module `host`: an NVMe disk with two
//! partitions, a SATA disk, a virtio disk and a zram swap device with their latency models;
//! mysqld, postgres, fio, dd, tar, rsync, java, kernel threads… in their cgroups), the file
//! catalogue on it (module `catalogue`: thousands of files, each with an inode and a contiguous
//! extent on its partition), the [`Workload`]s, the generator that streams a trace to a
//! [`SynthSink`] ([`generate`]), and [`write_synth`], which writes one into an `.iod` file with
//! `iodump-format`'s [`Writer`](iodump_format::Writer).
//!
//! The same [`SynthParams`] always produce the same sequence of calls, on every platform:
//! randomness comes from a private xoshiro256** generator seeded with SplitMix64 (module `rng`),
//! and `exp`/`ln` are computed from basic IEEE-754 operations (module `math`) rather than taken
//! from libm. Generation uses O(files) memory and no allocation per event.

mod catalogue;
mod generator;
mod host;
mod math;
mod rng;
mod workload;
mod writer;

#[cfg(test)]
mod tests;

use iodump_format::{Device, Event, Header, Loss, PathEntry, Process};

pub use workload::Workload;
pub use writer::{write_synth, write_synth_parts};

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct SynthParams {
    /// Exact number of events to deliver.
    pub events: u64,
    /// The workload.
    pub workload: Workload,
    /// Seed: the same parameters always give the same trace.
    pub seed: u64,
}

/// Receives the generated trace in order. Table entries (device, process, path) are always
/// delivered before the first event that references them.
pub trait SynthSink {
    /// What the sink can fail with; the first error stops generation and is returned.
    type Error;
    /// A device (all devices are delivered first; whole disks before their partitions).
    fn device(&mut self, d: &Device) -> Result<(), Self::Error>;
    /// A thread, delivered just before the first event submitted by it, or the first event
    /// whose `dirtier_pid` it is the dirtying thread for (so every `pid` and `dirtier_pid` of an
    /// event is the `pid` of a delivered thread).
    fn process(&mut self, p: &Process) -> Result<(), Self::Error>;
    /// A path table entry, delivered just before the first event that references it.
    fn path(&mut self, p: &PathEntry) -> Result<(), Self::Error>;
    /// An event; events come in non-decreasing `timestamp_ns` order.
    fn event(&mut self, e: &Event) -> Result<(), Self::Error>;
    /// A loss record; its window lies between the timestamps of the events around it (events
    /// lost in it are not delivered, so the trace has a gap there).
    fn loss(&mut self, l: &Loss) -> Result<(), Self::Error>;
}

/// What [`generate`] delivered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SynthSummary {
    /// Events delivered (always `params.events`).
    pub events: u64,
    /// Sum of the counts of the loss records delivered.
    pub lost_events: u64,
    /// Devices delivered.
    pub devices: u64,
    /// Processes (threads) delivered.
    pub processes: u64,
    /// Path table entries delivered.
    pub paths: u64,
    /// Timestamp of the first event (0 when there is none).
    pub first_timestamp_ns: u64,
    /// Timestamp of the last event (0 when there is none).
    pub last_timestamp_ns: u64,
}

/// `CLOCK_MONOTONIC` at the header's wall-clock instant.
const MONO_BASE_NS: u64 = 1_000_000_000_000;
/// 2026-01-15T10:00:00Z, in ns since the epoch.
const WALL_BASE_NS: i64 = 1_768_471_200 * 1_000_000_000;
/// The synthetic host's kernel release.
const KERNEL_RELEASE: &str = "6.18.0-synth";

/// The header of a synthetic trace: fixed apart from the workload, the parameters and a
/// seed-dependent offset (under an hour) of the wall clock.
pub fn header(params: &SynthParams) -> Header {
    let name = params.workload.name();
    Header {
        wall_clock_ns: WALL_BASE_NS + (params.seed % 3600) as i64 * 1_000_000_000,
        monotonic_ns: MONO_BASE_NS,
        hostname: format!("synth-{name}"),
        kernel_release: KERNEL_RELEASE.to_string(),
        tool_version: format!("iodump {} synth", env!("CARGO_PKG_VERSION")),
        recorder_argv: [
            "iodump",
            "synth",
            "--workload",
            name,
            "--events",
            &params.events.to_string(),
            "--seed",
            &params.seed.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        command_argv: None,
        metadata: vec![
            ("workload".to_string(), name.to_string()),
            ("seed".to_string(), params.seed.to_string()),
            ("events".to_string(), params.events.to_string()),
            ("synthetic".to_string(), "true".to_string()),
        ],
    }
}

/// Generates the trace described by `params` into `sink`: all devices first, then exactly
/// `params.events` events in non-decreasing timestamp order, each preceded by the table
/// entries it is the first to reference, with loss records (randread and mixed only) in
/// between (the first after 50k–150k events, then every 1–5M). Stops at the sink's first
/// error. The calls for `n` events are a prefix of those for more events with the same
/// workload and seed.
pub fn generate<S: SynthSink>(
    params: &SynthParams,
    sink: &mut S,
) -> Result<SynthSummary, S::Error> {
    generator::Generator::new(params).run(params.events, sink)
}
