//! Text renderings of events shared by live printing (`iodump record`) and export: aligned
//! text like the original iodump, CSV with the original's columns first (RFC 4180 quoting,
//! bytes kept as they are), and JSON lines.

use std::io::Write;

use crate::event::{Event, Header};
use crate::summary::{rfc3339_utc, write_rfc3339_utc};

/// A line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFormat {
    /// Aligned text.
    Text,
    /// CSV: `timestamp,pid,comm,iosize,rw,lba,path` then the other fields, `args` last.
    Csv,
    /// One JSON object per line.
    Json,
}

/// The header line of a format (empty for JSON).
pub fn header_line(fmt: LineFormat) -> &'static [u8] {
    match fmt {
        LineFormat::Text => b"TIME(UTC)       COMM             PID     TID     DEV      SECTOR        BYTES RW FLAGS   LAT(us) QUE(us) PATH\n",
        LineFormat::Csv => b"timestamp,pid,comm,iosize,rw,lba,path,tid,dev,flags,latency_ns,queue_ns,syscall,error,cpu,cgroup_id,dirtier_pid,upper_dev,upper_timestamp_ns,args\n",
        LineFormat::Json => b"",
    }
}

/// Appends `b` to `out`, escaping for a terminal: `\n`, `\t`, `\\`, other control characters
/// as `\xNN` (C1 as `\u{NN}`), the bidirectional formatting characters as `\u{NNNN}`
/// ([`is_bidi_control`]), invalid UTF-8 as `\xNN`.
pub fn escape_text(out: &mut Vec<u8>, b: &[u8]) {
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.extend_from_slice(b"\\\\"),
                c if c.is_control() || is_bidi_control(c) => push_control(out, c),
                c => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        for &x in chunk.invalid() {
            out.extend_from_slice(format!("\\x{x:02x}").as_bytes());
        }
    }
}

/// Path and comm bytes as UTF-8 text for CSV and JSON, losslessly: valid UTF-8 is kept, a
/// backslash is doubled, and each byte that is not valid UTF-8 becomes `\xNN` (two hex
/// digits). Reading it back: `\\` is one backslash, `\xNN` one byte.
pub fn text_bytes(out: &mut Vec<u8>, b: &[u8]) {
    for chunk in b.utf8_chunks() {
        for &c in chunk.valid().as_bytes() {
            if c == b'\\' {
                out.extend_from_slice(b"\\\\");
            } else {
                out.push(c);
            }
        }
        for &x in chunk.invalid() {
            out.extend_from_slice(format!("\\x{x:02x}").as_bytes());
        }
    }
}

/// The inverse of [`text_bytes`]: `\\` becomes one backslash, `\xNN` one byte; anything
/// else (including a lone backslash) is kept as it is.
pub fn text_unbytes(t: &str) -> Vec<u8> {
    let b = t.as_bytes();
    if !b.contains(&b'\\') {
        return b.to_vec();
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
                continue;
            }
            if b.get(i + 1) == Some(&b'x') {
                let hex = b
                    .get(i + 2..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok());
                if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// [`text_bytes`] as a `String`.
pub fn text_string(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if !s.contains('\\') => s.to_string(),
        _ => {
            let mut v = Vec::with_capacity(b.len() + 8);
            text_bytes(&mut v, b);
            String::from_utf8(v).unwrap_or_default()
        }
    }
}

/// Text (a [`text_string`], or any label) made safe to show on a terminal or in an SVG:
/// `\n` and `\t` as those two characters, every other control character as `\xNN` (C0 and
/// DEL) or `\u{NN}` (C1), and the bidirectional formatting characters as `\u{NNNN}`
/// ([`is_bidi_control`]), so that a file, process or cgroup name cannot move the cursor,
/// clear the screen, break a table's row, reverse what follows it or make an XML document
/// invalid. Backslashes are
/// left as they are ([`text_string`] has doubled them already). Borrows when there is
/// nothing to escape.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| c.is_control() || is_bidi_control(c);
    if !s.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(s.len() + 8);
    let mut buf = [0u8; 4];
    for c in s.chars() {
        if escaped(c) {
            push_control(&mut out, c);
        } else {
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    std::borrow::Cow::Owned(String::from_utf8(out).unwrap_or_default())
}

/// The characters that reorder the text around them on a terminal (Unicode's bidirectional
/// embeddings, overrides and isolates, and the marks): a name holding U+202E shows its end
/// reversed, so a file or process name could pass for another. Shown escaped, as controls.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Appends control character `c` escaped: `\n`, `\t`, `\xNN` (C0 and DEL), `\u{NN}` (C1:
/// not `\xNN`, which stands for a byte that is not UTF-8).
fn push_control(out: &mut Vec<u8>, c: char) {
    match c {
        '\n' => out.extend_from_slice(b"\\n"),
        '\t' => out.extend_from_slice(b"\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// Appends `b` as one RFC 4180 CSV field: the text of [`text_bytes`], quoted (with doubled
/// quotes) when it holds a comma, quote, CR or LF. The output is always valid UTF-8.
pub fn escape_csv(out: &mut Vec<u8>, b: &[u8]) {
    let plain = !b
        .iter()
        .any(|&c| matches!(c, b',' | b'"' | b'\n' | b'\r' | b'\\') || c >= 0x80);
    if plain {
        out.extend_from_slice(b);
        return;
    }
    let quote = b.iter().any(|&c| matches!(c, b',' | b'"' | b'\n' | b'\r'));
    if quote {
        out.push(b'"');
    }
    let start = out.len();
    text_bytes(out, b);
    if quote {
        let mut i = start;
        while i < out.len() {
            if out[i] == b'"' {
                out.insert(i, b'"');
                i += 1;
            }
            i += 1;
        }
        out.push(b'"');
    }
}

/// Appends `b` as a JSON string holding the text of [`text_bytes`] (lossless, valid UTF-8),
/// without a temporary buffer (it runs per event in `iodump record --print json`).
pub fn escape_json(out: &mut Vec<u8>, b: &[u8]) {
    out.push(b'"');
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.extend_from_slice(b"\\\""),
                // text_bytes doubles a backslash, JSON doubles each again.
                '\\' => out.extend_from_slice(b"\\\\\\\\"),
                '\n' => out.extend_from_slice(b"\\n"),
                '\r' => out.extend_from_slice(b"\\r"),
                '\t' => out.extend_from_slice(b"\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
        // text_bytes writes `\xNN`; JSON escapes its backslash.
        for &x in chunk.invalid() {
            let _ = write!(out, "\\\\x{x:02x}");
        }
    }
    out.push(b'"');
}

/// Appends a number, or `null` (JSON).
pub fn json_opt(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.extend_from_slice(b"null"),
    }
}

/// The CSV line of an event whose timestamp is `utc_ns` (see [`format_event`]); allocates
/// nothing beyond `l`.
pub fn csv_line(l: &mut Vec<u8>, utc_ns: i64, e: &Event, comm: &[u8], path: &[u8], args: &[u8]) {
    let _ = write!(
        l,
        "{}.{:06},{},",
        utc_ns.div_euclid(1_000_000_000),
        utc_ns.rem_euclid(1_000_000_000) / 1000,
        e.pid
    );
    escape_csv(l, comm);
    let _ = write!(l, ",{},{},{},", e.bytes, e.op.letter(), e.sector);
    escape_csv(l, path);
    let _ = write!(l, ",{},{},", e.tid, e.dev);
    e.flags.write_letters(l);
    let _ = write!(l, ",{},", e.latency_ns);
    if let Some(q) = e.queue_ns {
        let _ = write!(l, "{q}");
    }
    l.push(b',');
    if let Some(s) = e.syscall {
        let _ = write!(l, "{s}");
    }
    let _ = write!(l, ",{},{},{},", e.error, e.cpu, e.cgroup_id);
    if let Some(d) = e.dirtier_pid {
        let _ = write!(l, "{d}");
    }
    l.push(b',');
    if let Some(u) = e.upper {
        let _ = write!(l, "{},{}", u.dev, u.timestamp_ns);
    } else {
        l.push(b',');
    }
    l.push(b',');
    escape_csv(l, args);
    l.push(b'\n');
}

/// The JSON line of an event whose timestamp is `utc_ns` (see [`format_event`]); allocates
/// nothing beyond `l`.
pub fn json_line(l: &mut Vec<u8>, utc_ns: i64, e: &Event, comm: &[u8], path: &[u8], args: &[u8]) {
    l.extend_from_slice(b"{\"timestamp\":\"");
    write_rfc3339_utc(l, utc_ns);
    let _ = write!(
        l,
        "\",\"timestamp_ns\":{},\"pid\":{},\"tid\":{},\"comm\":",
        e.timestamp_ns, e.pid, e.tid
    );
    escape_json(l, comm);
    let _ = write!(
        l,
        ",\"dev\":\"{}\",\"sector\":{},\"bytes\":{},\"op\":\"{}\",\"flags\":\"",
        e.dev,
        e.sector,
        e.bytes,
        e.op.name()
    );
    e.flags.write_letters(l);
    let _ = write!(l, "\",\"latency_ns\":{},\"queue_ns\":", e.latency_ns);
    json_opt(l, e.queue_ns);
    let _ = write!(l, ",\"error\":{},\"cpu\":{},\"syscall\":", e.error, e.cpu);
    match e.syscall {
        Some(s) => {
            let _ = write!(l, "\"{s}\"");
        }
        None => l.extend_from_slice(b"null"),
    }
    l.extend_from_slice(b",\"dirtier_pid\":");
    json_opt(l, e.dirtier_pid.map(u64::from));
    let _ = write!(l, ",\"cgroup_id\":{}", e.cgroup_id);
    json_upper(l, e);
    l.extend_from_slice(b",\"path\":");
    escape_json(l, path);
    l.extend_from_slice(b",\"args\":");
    escape_json(l, args);
    l.extend_from_slice(b"}\n");
}

/// Appends `,"upper_dev":"MAJ:MIN","upper_timestamp_ns":N` (both `null` when the event has
/// no [`Event::upper`]).
pub fn json_upper(l: &mut Vec<u8>, e: &Event) {
    match e.upper {
        Some(u) => {
            let _ = write!(
                l,
                ",\"upper_dev\":\"{}\",\"upper_timestamp_ns\":{}",
                u.dev, u.timestamp_ns
            );
        }
        None => l.extend_from_slice(b",\"upper_dev\":null,\"upper_timestamp_ns\":null"),
    }
}

/// Appends one event as a line (with its newline) to `l`. `comm`, `path` and `args` are the
/// resolved command name, path bytes and command line (the comm when it is not known; CSV
/// and JSON only); `header` maps timestamps to UTC.
pub fn format_event(
    fmt: LineFormat,
    l: &mut Vec<u8>,
    header: &Header,
    e: &Event,
    comm: &[u8],
    path: &[u8],
    args: &[u8],
) {
    let utc = header.to_utc_ns(e.timestamp_ns);
    match fmt {
        LineFormat::Text => {
            let t = rfc3339_utc(utc);
            l.extend_from_slice(&t.as_bytes()[11..26]);
            l.push(b' ');
            let start = l.len();
            escape_text(l, comm);
            while l.len() < start + 16 {
                l.push(b' ');
            }
            let _ = write!(
                l,
                " {:<7} {:<7} {:<8} {:<13} {:>6} {}  {:<6} {:>8.1} ",
                e.pid,
                e.tid,
                e.dev.to_string(),
                e.sector,
                e.bytes,
                e.op.letter(),
                e.flags.letters(),
                e.latency_ns as f64 / 1e3,
            );
            match e.queue_ns {
                Some(q) => {
                    let _ = write!(l, "{:>7.1} ", q as f64 / 1e3);
                }
                None => l.extend_from_slice(b"      - "),
            }
            escape_text(l, path);
            l.push(b'\n');
        }
        LineFormat::Csv => csv_line(l, utc, e, comm, path, args),
        LineFormat::Json => json_line(l, utc, e, comm, path, args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name is shown with no control character left in it, and names without any are
    /// shown as they are (borrowed).
    #[test]
    fn names_shown_on_a_terminal_hold_no_control_character() {
        let evil = "/mnt/evil\u{1b}[31mRED\u{1b}[0m\nline2\t\u{7f}\u{9b}2J \\\\x1b";
        let shown = escape_controls(evil);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert_eq!(
            shown,
            "/mnt/evil\\x1b[31mRED\\x1b[0m\\nline2\\t\\x7f\\u{9b}2J \\\\x1b"
        );
        assert!(matches!(
            escape_controls("/var/lib/é \\ db"),
            std::borrow::Cow::Borrowed(_)
        ));
        // A right-to-left override would show `txt.exe` as `exe.txt`.
        let bidi = "/tmp/invoice\u{202e}txt.exe \u{2066}x\u{2069}";
        assert_eq!(
            escape_controls(bidi),
            "/tmp/invoice\\u{202e}txt.exe \\u{2066}x\\u{2069}"
        );
        let mut out = Vec::new();
        escape_text(&mut out, bidi.as_bytes());
        assert_eq!(out, escape_controls(bidi).as_bytes());
    }

    /// escape_json writes what JSON-escaping the text of text_bytes gives (its definition),
    /// in one pass.
    #[test]
    fn json_strings_are_the_json_of_text_bytes() {
        let reference = |b: &[u8]| {
            let mut t = Vec::new();
            text_bytes(&mut t, b);
            serde_json_like(std::str::from_utf8(&t).unwrap())
        };
        for raw in [
            &b"/var/lib/db"[..],
            b"a\\b \"q\" \n\r\t \x01\x1f",
            b"\xff is text \xc3\x28",
            b"bad \xff\xfe utf8 \\x41",
            "caf\u{e9} \u{1f600}".as_bytes(),
            b"",
        ] {
            let mut got = Vec::new();
            escape_json(&mut got, raw);
            assert_eq!(String::from_utf8(got).unwrap(), reference(raw), "{raw:?}");
        }
    }

    /// JSON string escaping as RFC 8259 asks: quote, backslash, control characters.
    fn serde_json_like(t: &str) -> String {
        let mut s = String::from("\"");
        for c in t.chars() {
            match c {
                '"' => s.push_str("\\\""),
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\r' => s.push_str("\\r"),
                '\t' => s.push_str("\\t"),
                c if (c as u32) < 0x20 => s.push_str(&format!("\\u{:04x}", c as u32)),
                c => s.push(c),
            }
        }
        s.push('"');
        s
    }

    #[test]
    fn text_bytes_round_trip() {
        for raw in [
            &b"/var/lib/db"[..],
            b"a\\b",
            b"\xff is text",
            b"bad \xff\xfe utf8 \\x41",
            b"",
            b"\\",
        ] {
            let mut t = Vec::new();
            text_bytes(&mut t, raw);
            let t = String::from_utf8(t).unwrap();
            assert_eq!(text_unbytes(&t), raw, "{t}");
        }
    }

    #[test]
    fn csv_quoting_follows_rfc4180() {
        let mut v = Vec::new();
        escape_csv(&mut v, b"plain");
        v.push(b'|');
        escape_csv(&mut v, b"a,b \"c\"\nd");
        assert_eq!(v, b"plain|\"a,b \"\"c\"\"\nd\"");
    }

    #[test]
    fn text_and_json_escape_control_and_invalid_bytes() {
        let mut v = Vec::new();
        escape_text(&mut v, b"a\nb\xff\x01");
        assert_eq!(v, b"a\\nb\\xff\\x01");
        let mut j = Vec::new();
        escape_json(&mut j, b"q\"\\\n\xff");
        let parsed: String = {
            // A JSON string parser would give back the text of text_bytes.
            let s = String::from_utf8(j).unwrap();
            assert_eq!(s, r#""q\"\\\\\n\\xff""#);
            s
        };
        assert!(parsed.is_ascii());
    }

    #[test]
    fn csv_is_utf8_and_lossless() {
        let mut v = Vec::new();
        escape_csv(&mut v, b"/data/caf\xe9,\\x.db");
        assert_eq!(v, b"\"/data/caf\\xe9,\\\\x.db\"");
        assert!(std::str::from_utf8(&v).is_ok());
        let mut v = Vec::new();
        escape_csv(&mut v, "/données/é".as_bytes());
        assert_eq!(v, "/données/é".as_bytes());
    }
}
