//! Writes a synthetic trace straight into an `.iod` file with `iodump-format`'s [`Writer`],
//! or into a directory as a recording in parts (`iodump-output`'s [`RotatingTrace`]).

use std::io::Write;

use iodump_format::{Device, EndInfo, Event, Loss, PathEntry, Process};
use iodump_format::{WriteError, Writer, WriterOptions};

use iodump_output::parts::{PartsConfig, PartsError, PartsStats, RotatingTrace};

use crate::{SynthParams, SynthSink, SynthSummary};

/// A sink into a writer; remembers the last event's timestamp.
struct WriterSink<'a, W: Write> {
    writer: &'a mut Writer<W>,
    last_ns: u64,
}

impl<W: Write> SynthSink for WriterSink<'_, W> {
    type Error = WriteError;
    fn device(&mut self, d: &Device) -> Result<(), WriteError> {
        self.writer.add_device(d.clone())
    }
    fn process(&mut self, p: &Process) -> Result<(), WriteError> {
        self.writer.add_process(p.clone())
    }
    fn path(&mut self, p: &PathEntry) -> Result<(), WriteError> {
        self.writer.add_path(p.clone())
    }
    fn event(&mut self, e: &Event) -> Result<(), WriteError> {
        self.last_ns = self.last_ns.max(e.timestamp_ns);
        self.writer.push(e)
    }
    fn loss(&mut self, l: &Loss) -> Result<(), WriteError> {
        self.writer.add_loss(*l)
    }
}

/// Generates the synthetic trace `params` describes into `out` (its header from
/// [`header`](crate::header); it ends 1 ms after the last event, or after the header's
/// monotonic time when there is none); returns what was generated and the output.
pub fn write_synth<W: Write>(
    params: &SynthParams,
    out: W,
    opts: WriterOptions,
) -> Result<(SynthSummary, W), WriteError> {
    let header = crate::header(params);
    let mut w = Writer::new(out, &header, opts)?;
    let mut sink = WriterSink {
        writer: &mut w,
        last_ns: header.monotonic_ns,
    };
    let summary = crate::generate(params, &mut sink)?;
    let end_ns = sink.last_ns + 1_000_000;
    let out = w.finish(EndInfo {
        end_monotonic_ns: end_ns,
        ..EndInfo::default()
    })?;
    Ok((summary, out))
}

/// A sink into a recording in parts: a part is closed when [`RotatingTrace::due`] says so
/// (its size, or its age on the events' clock), between two events.
struct PartsSink<'a> {
    trace: &'a mut RotatingTrace,
    header: &'a iodump_format::Header,
    last_ns: u64,
}

impl SynthSink for PartsSink<'_> {
    type Error = PartsError;
    fn device(&mut self, d: &Device) -> Result<(), PartsError> {
        self.trace.add_device(d.clone())
    }
    fn process(&mut self, p: &Process) -> Result<(), PartsError> {
        self.trace.add_process(p.clone())
    }
    fn path(&mut self, p: &PathEntry) -> Result<(), PartsError> {
        self.trace.add_path(p.clone())
    }
    fn event(&mut self, e: &Event) -> Result<(), PartsError> {
        if self.trace.due(e.timestamp_ns) {
            let end = EndInfo {
                end_monotonic_ns: self.last_ns,
                ..EndInfo::default()
            };
            let now = (self.header.to_utc_ns(e.timestamp_ns), e.timestamp_ns);
            self.trace.rotate(end, now)?;
        }
        self.last_ns = self.last_ns.max(e.timestamp_ns);
        self.trace.push(e)
    }
    fn loss(&mut self, l: &Loss) -> Result<(), PartsError> {
        self.trace.add_loss(*l)
    }
}

/// Generates the synthetic trace `params` describes as a recording in parts (`cfg` says
/// where, and when a part is closed), as `iodump record -o DIR/ --rotate` would write it.
pub fn write_synth_parts(
    params: &SynthParams,
    cfg: PartsConfig,
    opts: WriterOptions,
) -> Result<(SynthSummary, PartsStats), PartsError> {
    let header = crate::header(params);
    // The recording id follows from the seed: the same seed gives the same files.
    let id = format!("{:016x}", params.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut t = RotatingTrace::create(
        cfg,
        header.clone(),
        opts,
        id,
        (header.wall_clock_ns, header.monotonic_ns),
    )?;
    t.commit_first()?;
    let mut sink = PartsSink {
        trace: &mut t,
        header: &header,
        last_ns: header.monotonic_ns,
    };
    let summary = crate::generate(params, &mut sink)?;
    let end_ns = sink.last_ns + 1_000_000;
    let stats = t.finish(EndInfo {
        end_monotonic_ns: end_ns,
        ..EndInfo::default()
    })?;
    Ok((summary, stats))
}
