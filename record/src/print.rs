//! One line per I/O on stdout, as text (like the original iodump), CSV (the original's columns
//! first) or JSON lines; the renderings live in `iodump_format::text`.

use std::io::{BufWriter, Stdout, Write};

pub use iodump_format::text::LineFormat as PrintFormat;
use iodump_format::text::{format_event, header_line};
use iodump_format::{Event, Header};

/// Prints events; one reused line buffer, no allocation per event once warm.
pub struct Printer {
    fmt: PrintFormat,
    out: BufWriter<Stdout>,
    line: Vec<u8>,
    header: Header,
}

impl Printer {
    /// A printer to stdout.
    pub fn new(fmt: PrintFormat, header: &Header) -> Printer {
        Printer {
            fmt,
            out: BufWriter::with_capacity(1 << 16, std::io::stdout()),
            line: Vec::with_capacity(512),
            header: header.clone(),
        }
    }

    /// Prints the column header (text and CSV).
    pub fn header(&mut self) {
        let _ = self.out.write_all(header_line(self.fmt));
    }

    /// Prints one event.
    pub fn event(&mut self, e: &Event, comm: &[u8], path: &[u8]) {
        self.line.clear();
        format_event(self.fmt, &mut self.line, &self.header, e, comm, path);
        let _ = self.out.write_all(&self.line);
    }

    /// Flushes stdout.
    pub fn flush(&mut self) {
        let _ = self.out.flush();
    }
}
