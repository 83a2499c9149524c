//! Writes a synthetic trace ([`crate::synth`]) straight into a [`Writer`].

use std::io::Write;

use crate::error::WriteError;
use crate::event::{Device, EndInfo, Event, Loss, PathEntry, Process};
use crate::synth::{self, SynthParams, SynthSink, SynthSummary};
use crate::writer::{Writer, WriterOptions};

struct WriterSink<'a, W: Write>(&'a mut Writer<W>, u64);

impl<W: Write> SynthSink for WriterSink<'_, W> {
    type Error = WriteError;
    fn device(&mut self, d: &Device) -> Result<(), WriteError> {
        self.0.add_device(d.clone())
    }
    fn process(&mut self, p: &Process) -> Result<(), WriteError> {
        self.0.add_process(p.clone())
    }
    fn path(&mut self, p: &PathEntry) -> Result<(), WriteError> {
        self.0.add_path(p.clone())
    }
    fn event(&mut self, e: &Event) -> Result<(), WriteError> {
        self.1 = self.1.max(e.timestamp_ns);
        self.0.push(e)
    }
    fn loss(&mut self, l: &Loss) -> Result<(), WriteError> {
        self.0.add_loss(*l)
    }
}

/// Generates the synthetic trace `params` describes into `out`; returns what was generated
/// and the output.
pub fn write_synth<W: Write>(
    params: &SynthParams,
    out: W,
    opts: WriterOptions,
) -> Result<(SynthSummary, W), WriteError> {
    let header = synth::header(params);
    let mut w = Writer::new(out, &header, opts)?;
    let mut sink = WriterSink(&mut w, header.monotonic_ns);
    let summary = synth::generate(params, &mut sink)?;
    let end_ns = sink.1 + 1_000_000;
    let out = w.finish(EndInfo {
        end_monotonic_ns: end_ns,
        ..EndInfo::default()
    })?;
    Ok((summary, out))
}
