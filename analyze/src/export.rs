//! Exports of a trace's events: CSV (the original iodump's columns
//! `timestamp,pid,comm,iosize,rw,lba,path` first, then the rest, the process's command line
//! `args` last; RFC 4180), JSON lines, and
//! fio's iolog version 3 for `fio --read_iolog`, and a Perfetto trace ([`crate::perfetto`]).

use std::io::Write;

use iodump_format::expr::Expr;
use iodump_format::text::{format_event, header_line, LineFormat};
use iodump_format::{DevT, Op, Reader};

use crate::intact::each_intact_batch;
pub use crate::intact::ExportSummary;
use crate::AnalyzeError;

/// What to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// CSV, original columns first.
    Csv,
    /// One JSON object per event.
    Jsonl,
    /// fio iolog version 3: one file per device, offsets in bytes on the device.
    FioIolog,
    /// A Perfetto trace (TrackEvent protobuf): a track per device and process, counters.
    Perfetto,
}

fn werr(what: &str) -> impl Fn(std::io::Error) -> AnalyzeError + '_ {
    move |source| AnalyzeError::Write {
        what: what.to_string(),
        source,
    }
}

/// Writes every intact event of `r` that `filter` keeps (every one without a filter) to
/// `out` in `fmt`.
pub fn export(
    r: &Reader,
    fmt: ExportFormat,
    filter: Option<&Expr>,
    out: &mut dyn Write,
) -> Result<ExportSummary, AnalyzeError> {
    match fmt {
        ExportFormat::Csv => lines(r, LineFormat::Csv, filter, out),
        ExportFormat::Jsonl => lines(r, LineFormat::Json, filter, out),
        ExportFormat::FioIolog => fio_iolog(r, filter, out),
        ExportFormat::Perfetto => crate::perfetto::export_perfetto(r, filter, out),
    }
}

fn lines(
    r: &Reader,
    fmt: LineFormat,
    filter: Option<&Expr>,
    out: &mut dyn Write,
) -> Result<ExportSummary, AnalyzeError> {
    let mut s = ExportSummary::default();
    out.write_all(header_line(fmt))
        .map_err(werr("the header"))?;
    let mut line = Vec::with_capacity(512);
    let mut buf = Vec::with_capacity(1 << 20);
    let mut events = 0;
    let result = each_intact_batch(r, &mut s.damaged, filter, |i, b, rows| {
        for &row in rows {
            let e = b.get(row as usize);
            let p = r.process_of(e.pid, e.tid, i);
            let comm = p.map_or(&b"?"[..], |p| &p.comm);
            let args = p.map_or(&b"?"[..], |p| p.args_or_comm());
            let path = r.tables().path(e.path_id).map_or(&b""[..], |p| &p.path);
            line.clear();
            format_event(fmt, &mut line, r.header(), &e, comm, path, args);
            buf.extend_from_slice(&line);
            if buf.len() >= 1 << 20 {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
        events += rows.len() as u64;
        Ok(())
    });
    s.events = events;
    result.map_err(werr("events"))?;
    out.write_all(&buf).map_err(werr("events"))?;
    out.flush().map_err(werr("events"))?;
    Ok(s)
}

/// fio's iolog v3: `fio version 3 iolog`, then `TIMESTAMP FILE ACTION [OFFSET LENGTH]` with the
/// timestamp in microseconds from the first event. Each device is one file (`/dev/NAME`),
/// offsets are bytes on it. Reads and writes replay as such, discards and write-zeroes as
/// `trim`, flushes as `sync`.
fn fio_iolog(
    r: &Reader,
    filter: Option<&Expr>,
    out: &mut dyn Write,
) -> Result<ExportSummary, AnalyzeError> {
    let mut s = ExportSummary::default();
    // (timestamp, dev, action, offset, length), sorted by time: segments are sorted inside
    // but may overlap each other.
    let mut ios: Vec<(u64, u32, u8, u64, u32)> = Vec::new();
    let mut skipped = 0;
    let gathered = each_intact_batch(r, &mut s.damaged, filter, |_, b, rows| {
        for &i in rows {
            let i = i as usize;
            let action = match Op::from_code(b.op[i]) {
                Op::Read => 0,
                Op::Write => 1,
                Op::Discard | Op::SecureErase | Op::WriteZeroes => 2,
                Op::Flush => 3,
                Op::Other => {
                    skipped += 1;
                    continue;
                }
            };
            ios.push((
                b.timestamp_ns[i],
                b.dev[i],
                action,
                b.sector[i] * 512,
                b.bytes[i],
            ));
        }
        Ok(())
    });
    gathered.map_err(werr("events"))?;
    s.skipped = skipped;
    ios.sort_by_key(|x| x.0);
    let name = |d: u32| -> String {
        r.tables().device(DevT(d)).map_or_else(
            || format!("/dev/block/{}", DevT(d)),
            |x| format!("/dev/{}", x.name),
        )
    };
    let mut devs: Vec<u32> = ios.iter().map(|x| x.1).collect();
    devs.sort_unstable();
    devs.dedup();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, out);
    let t0 = ios.first().map_or(0, |x| x.0);
    let t_end = ios.last().map_or(0, |x| (x.0 - t0) / 1000);
    let io = |e| werr("the iolog")(e);
    writeln!(w, "fio version 3 iolog").map_err(io)?;
    for &d in &devs {
        writeln!(w, "0 {} add", name(d)).map_err(io)?;
    }
    for &d in &devs {
        writeln!(w, "0 {} open", name(d)).map_err(io)?;
    }
    let names: std::collections::HashMap<u32, String> =
        devs.iter().map(|&d| (d, name(d))).collect();
    for (ts, d, action, offset, len) in &ios {
        let t = (ts - t0) / 1000;
        let f = &names[d];
        match action {
            0 => writeln!(w, "{t} {f} read {offset} {len}"),
            1 => writeln!(w, "{t} {f} write {offset} {len}"),
            2 => writeln!(w, "{t} {f} trim {offset} {len}"),
            _ => writeln!(w, "{t} {f} sync"),
        }
        .map_err(io)?;
    }
    for &d in &devs {
        writeln!(w, "{t_end} {} close", name(d)).map_err(io)?;
    }
    w.flush().map_err(io)?;
    s.events = ios.len() as u64;
    Ok(s)
}
