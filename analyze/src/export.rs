//! Exports of a trace's events: CSV (the original iodump's columns
//! `timestamp,pid,comm,iosize,rw,lba,path` first, then the rest, the process's command line
//! `args` last; RFC 4180), JSON lines, and
//! fio's iolog version 3 for `fio --read_iolog`, and a Perfetto trace ([`crate::perfetto`]).

use std::io::Write;

use iodump_format::expr::Expr;
use iodump_format::inthash::IntMap;
use iodump_format::segment::{col, Columns};
use iodump_format::text::{format_event, header_line, LineFormat};
use iodump_format::{DevT, EventBatch, Op, Reader, SegmentDecoder};

pub use crate::intact::ExportSummary;
use crate::intact::{each_intact_batch, each_intact_in_start_order};
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
    // The shown name of the last deleted file's path id (its path with " (deleted)").
    let mut deleted: (u32, Vec<u8>) = (0, Vec::new());
    let result = each_intact_batch(r, &mut s.damaged, filter, |i, b, rows| {
        for &row in rows {
            let e = b.get(row as usize);
            let p = r.process_of(e.pid, e.tid, i);
            let comm = p.map_or(&b"?"[..], |p| &p.comm);
            let args = p.map_or(&b"?"[..], |p| p.args_or_comm());
            let path = match r.tables().path(e.path_id) {
                Some(p) if p.deleted => {
                    if deleted.0 != e.path_id || deleted.1.is_empty() {
                        deleted = (e.path_id, p.shown().into_owned());
                    }
                    &deleted.1[..]
                }
                Some(p) => &p.path[..],
                None => b"",
            };
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
/// `trim`, flushes as `sync`. Each I/O is in the log once, as `iodump replay` does it: an I/O
/// a stacked device sent down is left out (counted in [`ExportSummary::lower`]) when that
/// stacked device has I/O in the log.
///
/// Two passes, so that memory does not grow with the trace: the first finds the devices the
/// log names (fio wants each added and opened before its first I/O), the second writes the
/// I/Os in start order ([`each_intact_in_start_order`]).
fn fio_iolog(
    r: &Reader,
    filter: Option<&Expr>,
    out: &mut dyn Write,
) -> Result<ExportSummary, AnalyzeError> {
    // What fio does with an operation; None: it cannot replay it.
    fn action(op: Op) -> Option<&'static str> {
        match op {
            Op::Read => Some("read"),
            Op::Write => Some("write"),
            Op::Discard | Op::SecureErase | Op::WriteZeroes => Some("trim"),
            Op::Flush => Some("sync"),
            Op::Other => None,
        }
    }
    let mut s = ExportSummary::default();
    // (device, the stacked device its I/O was sent down by, or NO_UPPER) of the I/Os fio
    // can replay: few distinct pairs.
    const NO_UPPER: u32 = u32::MAX;
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut add_pair = |dev: u32, upper: Option<u32>, op: u8| {
        let pair = (dev, upper.unwrap_or(NO_UPPER));
        if action(Op::from_code(op)).is_some()
            && pairs.last() != Some(&pair)
            && !pairs.contains(&pair)
        {
            pairs.push(pair);
        }
    };
    // The second pass finds the same damage again.
    match filter {
        // Three columns are enough.
        None => {
            let (mut b, mut dec) = (EventBatch::default(), SegmentDecoder::new());
            let want = Columns::of(&[col::DEV, col::OP, col::UPPER_DEV]);
            for i in 0..r.segments().len() {
                if r.decode_segment_projected(i, want, &mut b, &mut dec)
                    .is_ok()
                {
                    for k in 0..b.len() {
                        add_pair(b.dev[k], b.upper_dev.get(k), b.op[k]);
                    }
                }
            }
        }
        Some(_) => each_intact_batch(r, &mut Vec::new(), filter, |_, b, rows| {
            for &i in rows {
                let i = i as usize;
                add_pair(b.dev[i], b.upper_dev.get(i), b.op[i]);
            }
            Ok(())
        })
        .map_err(werr("events"))?,
    }
    // The devices with I/O in the log: those the I/O is sent down from are replayed there.
    let mut uppers: Vec<u32> = pairs.iter().map(|p| p.0).collect();
    uppers.sort_unstable();
    uppers.dedup();
    let below = |upper: Option<u32>| upper.is_some_and(|u| uppers.binary_search(&u).is_ok());
    let mut devs: Vec<u32> = pairs
        .iter()
        .filter(|&&(_, u)| !below((u != NO_UPPER).then_some(u)))
        .map(|p| p.0)
        .collect();
    devs.sort_unstable();
    devs.dedup();
    let names: IntMap<u32, String> = devs
        .iter()
        .map(|&d| {
            let name = r.tables().device(DevT(d)).map_or_else(
                || format!("/dev/block/{}", DevT(d)),
                |x| format!("/dev/{}", x.name),
            );
            (d, name)
        })
        .collect();
    let mut w = std::io::BufWriter::with_capacity(1 << 20, out);
    let io = |e| werr("the iolog")(e);
    writeln!(w, "fio version 3 iolog").map_err(io)?;
    for d in &devs {
        writeln!(w, "0 {} add", names[d]).map_err(io)?;
    }
    for d in &devs {
        writeln!(w, "0 {} open", names[d]).map_err(io)?;
    }
    let (mut t0, mut last_us, mut events, mut skipped, mut lower) = (None, 0, 0u64, 0u64, 0u64);
    each_intact_in_start_order(r, &mut s.damaged, filter, |x| {
        let e = &x.e;
        let Some(action) = action(e.op) else {
            skipped += 1;
            return Ok(());
        };
        if below(e.upper.map(|u| u.dev.0)) {
            lower += 1;
            return Ok(());
        }
        let t = (x.ts - *t0.get_or_insert(x.ts)) / 1000;
        last_us = t;
        events += 1;
        let f = &names[&e.dev.0];
        if action == "sync" {
            // fio reads a line of fewer than five fields as a file action (add, open, close):
            // a sync takes an offset and length as fio's own logs write them, 0 0.
            writeln!(w, "{t} {f} sync 0 0")
        } else {
            let offset_bytes = e.sector * 512;
            writeln!(w, "{t} {f} {action} {offset_bytes} {}", e.bytes)
        }
    })
    .map_err(io)?;
    for d in &devs {
        writeln!(w, "{last_us} {} close", names[d]).map_err(io)?;
    }
    w.flush().map_err(io)?;
    s.events = events;
    s.skipped = skipped;
    s.lower = lower;
    Ok(s)
}
