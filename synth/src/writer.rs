//! Writes a synthetic trace straight into an `.iod` file with `iodump-format`'s [`Writer`].

use std::io::Write;

use iodump_format::{Device, EndInfo, Event, Loss, PathEntry, Process};
use iodump_format::{WriteError, Writer, WriterOptions};

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
