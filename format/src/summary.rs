//! What `iodump info` reports about a trace, computed in one parallel pass over its segments.

use std::collections::HashMap;

use crate::error::Damage;
use crate::event::{DevT, PathKind};
use crate::reader::Reader;
use crate::segment::EventBatch;

/// Per-device event counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceCount {
    /// Device number.
    pub dev: DevT,
    /// Name from the device table (`?` if the table lacks it).
    pub name: String,
    /// Events on it.
    pub events: u64,
    /// Bytes transferred.
    pub bytes: u64,
}

/// A trace's vital statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Events in intact segments.
    pub events: u64,
    /// Events lost according to the loss records.
    pub lost_events: u64,
    /// Event segments found.
    pub segments: u64,
    /// Event segments that failed to decode.
    pub damaged_segments: u64,
    /// Events announced by damaged segments (missing from `events`).
    pub damaged_events: u64,
    /// File size.
    pub file_bytes: u64,
    /// Smallest event timestamp (monotonic ns), if any event.
    pub first_timestamp_ns: Option<u64>,
    /// Largest event timestamp (monotonic ns).
    pub last_timestamp_ns: Option<u64>,
    /// Per device, in table order, then devices absent from the table.
    pub devices: Vec<DeviceCount>,
    /// Distinct process ids in the process table.
    pub processes: u64,
    /// Distinct thread ids in the process table.
    pub threads: u64,
    /// Path table entries.
    pub paths: u64,
    /// Events whose path id names a file.
    pub events_with_file: u64,
    /// Events whose path id names a label (metadata, journal, swap, raw device).
    pub events_with_label: u64,
    /// Events with no path id (0), one missing from the path table, or `[unknown]`.
    pub events_without_path: u64,
    /// Events with a non-zero error.
    pub events_with_error: u64,
    /// Everything damaged, sorted by offset.
    pub damaged: Vec<Damage>,
}

impl Summary {
    /// File bytes per intact event.
    pub fn bytes_per_event(&self) -> Option<f64> {
        (self.events > 0).then(|| self.file_bytes as f64 / self.events as f64)
    }
}

#[derive(Default)]
struct Partial {
    events: u64,
    first: Option<u64>,
    last: Option<u64>,
    per_dev: HashMap<u32, (u64, u64)>,
    with_file: u64,
    with_label: u64,
    without: u64,
    errors: u64,
}

fn scan(b: &EventBatch, kind_of: &HashMap<u32, PathKind>) -> Partial {
    let mut p = Partial {
        events: b.len() as u64,
        first: b.timestamp_ns.iter().copied().min(),
        last: b.timestamp_ns.iter().copied().max(),
        ..Partial::default()
    };
    let mut last_dev = None;
    let mut acc = (0u64, 0u64);
    for (&d, &bytes) in b.dev.iter().zip(&b.bytes) {
        if last_dev != Some(d) {
            if let Some(ld) = last_dev {
                let e = p.per_dev.entry(ld).or_default();
                e.0 += acc.0;
                e.1 += acc.1;
            }
            last_dev = Some(d);
            acc = (0, 0);
        }
        acc.0 += 1;
        acc.1 += bytes as u64;
    }
    if let Some(ld) = last_dev {
        let e = p.per_dev.entry(ld).or_default();
        e.0 += acc.0;
        e.1 += acc.1;
    }
    let mut cache: (u32, Option<PathKind>) = (0, None);
    for &id in &b.path_id {
        let kind = if id == cache.0 {
            cache.1
        } else {
            let k = if id == 0 {
                None
            } else {
                kind_of.get(&id).copied()
            };
            cache = (id, k);
            k
        };
        match kind {
            Some(PathKind::File) => p.with_file += 1,
            Some(PathKind::Unknown) | None => p.without += 1,
            Some(_) => p.with_label += 1,
        }
    }
    p.errors = b.error.iter().filter(|&&e| e != 0).count() as u64;
    p
}

/// Decodes every segment in parallel and summarises the trace.
pub fn summarize(r: &Reader) -> Summary {
    let kind_of: HashMap<u32, PathKind> = r.tables().paths().map(|p| (p.path_id, p.kind)).collect();
    let parts = r.par_map_segments(|_, b| scan(b, &kind_of));
    let t = r.tables();
    let mut s = Summary {
        lost_events: r.lost_events(),
        segments: r.segments().len() as u64,
        file_bytes: r.file_bytes(),
        processes: t.process_count() as u64,
        threads: t.thread_count() as u64,
        paths: t.path_count() as u64,
        damaged: r.damage().to_vec(),
        ..Summary::default()
    };
    let mut per_dev: HashMap<u32, (u64, u64)> = HashMap::new();
    for (i, part) in parts {
        match part {
            Ok(p) => {
                s.events += p.events;
                s.first_timestamp_ns = match (s.first_timestamp_ns, p.first) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                s.last_timestamp_ns = match (s.last_timestamp_ns, p.last) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                for (d, (n, bytes)) in p.per_dev {
                    let e = per_dev.entry(d).or_default();
                    e.0 += n;
                    e.1 += bytes;
                }
                s.events_with_file += p.with_file;
                s.events_with_label += p.with_label;
                s.events_without_path += p.without;
                s.events_with_error += p.errors;
            }
            Err(d) => {
                s.damaged_segments += 1;
                s.damaged_events += r.segments()[i].events as u64;
                s.damaged.push(d);
            }
        }
    }
    s.damaged.sort_by_key(|d| d.offset);
    for d in t.devices() {
        let (events, bytes) = per_dev.remove(&d.dev.0).unwrap_or_default();
        s.devices.push(DeviceCount {
            dev: d.dev,
            name: d.name.clone(),
            events,
            bytes,
        });
    }
    let mut rest: Vec<_> = per_dev.into_iter().collect();
    rest.sort_unstable();
    for (d, (events, bytes)) in rest {
        s.devices.push(DeviceCount {
            dev: DevT(d),
            name: "?".into(),
            events,
            bytes,
        });
    }
    s
}

/// Formats nanoseconds since the Unix epoch as RFC 3339 UTC with nanoseconds
/// (`2026-01-15T10:00:00.000000123Z`).
pub fn rfc3339_utc(ns: i64) -> String {
    let mut v = Vec::with_capacity(30);
    write_rfc3339_utc(&mut v, ns);
    String::from_utf8(v).unwrap_or_default()
}

/// Appends [`rfc3339_utc`] to `out`, without a `String` (for per-event output).
pub fn write_rfc3339_utc(out: &mut Vec<u8>, ns: i64) {
    use std::io::Write;
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    );
}

/// Year, month (1–12) and day (1–31) of a count of days since 1970-01-01 in the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A time written as RFC 3339 (`2026-12-04T03:12:00Z`, `2026-12-04T03:12:00.250Z`,
/// `2026-12-04T04:12:00+01:00`; seconds may be left out, `T` may be a space) in UTC ns since
/// the epoch. The zone is required: a time without one would mean the reader's local time,
/// which a trace read on another machine does not share.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = b.get(r)?;
        if t.is_empty() || !t.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(t).ok()?.parse().ok()
    };
    if b.len() < 17 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' {
        return None;
    }
    let (h, mi) = (num(11..13)?, num(14..16)?);
    let mut i = 16;
    let mut sec = 0;
    let mut frac_ns = 0;
    if b.get(i) == Some(&b':') {
        sec = num(i + 1..i + 3)?;
        i += 3;
        if b.get(i) == Some(&b'.') {
            let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if digits == 0 || digits > 9 {
                return None;
            }
            frac_ns = num(i + 1..i + 1 + digits)? * 10i64.pow(9 - digits as u32);
            i += 1 + digits;
        }
    }
    let offset_s = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), zone @ ..] => {
            let (oh, om) = match zone {
                [_, _, b':', _, _] => (num(i + 1..i + 3)?, num(i + 4..i + 6)?),
                [_, _, _, _] => (num(i + 1..i + 3)?, num(i + 3..i + 5)?),
                _ => return None,
            };
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *sign == b'+' {
                o
            } else {
                -o
            }
        }
        _ => return None,
    };
    let month_days = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&mo)
        || d < 1
        || d > month_days[(mo - 1) as usize]
        || h > 23
        || mi > 59
        || sec > 60
    {
        return None;
    }
    let secs = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + sec - offset_s;
    secs.checked_mul(1_000_000_000)?.checked_add(frac_ns)
}

/// Days since 1970-01-01 of a year, month (1–12) and day (1–31) in the proleptic Gregorian
/// calendar (Howard Hinnant's `days_from_civil`): the inverse of [`civil_from_days`].
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_parse() {
        let t = 1_764_818_000_000_000_000; // 2025-12-04T03:13:20Z
        assert_eq!(rfc3339_utc(t), "2025-12-04T03:13:20.000000000Z");
        for (s, want) in [
            ("2025-12-04T03:13:20Z", Some(t)),
            ("2025-12-04t03:13:20z", Some(t)),
            ("2025-12-04 03:13:20Z", Some(t)),
            ("2025-12-04T03:13Z", Some(t - 20_000_000_000)),
            ("2025-12-04T03:13:20.25Z", Some(t + 250_000_000)),
            ("2025-12-04T03:13:20.000000001Z", Some(t + 1)),
            ("2025-12-04T04:13:20+01:00", Some(t)),
            ("2025-12-04T02:43:20-0030", Some(t)),
            ("2025-12-04T03:13:20", None),
            ("2025-12-04", None),
            ("2025-12-04T03:13:20.Z", None),
            ("2025-12-04T03:13:20.0000000001Z", None),
            ("2025-13-04T03:13:20Z", None),
            ("2025-02-30T03:13:20Z", None),
            ("2025-12-04T24:13:20Z", None),
            ("2025-12-04T03:13:20+1:00", None),
            ("2025-12-04T03:13:20Zjunk", None),
            ("tomorrow", None),
            ("", None),
        ] {
            assert_eq!(parse_rfc3339(s), want, "{s}");
        }
        assert_eq!(parse_rfc3339(&rfc3339_utc(t + 123)), Some(t + 123));
    }

    #[test]
    fn days_from_civil_inverts_civil_from_days() {
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn rfc3339_of_known_instants() {
        assert_eq!(
            rfc3339_utc(1_630_456_789_312_345_678),
            "2021-09-01T00:39:49.312345678Z"
        );
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339_utc(-1), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn rfc3339_known_values() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339_utc(-1), "1969-12-31T23:59:59.999999999Z");
        // 2000-02-29 (leap day) 12:34:56.789
        assert_eq!(
            rfc3339_utc(951_827_696_789_000_000),
            "2000-02-29T12:34:56.789000000Z"
        );
        assert_eq!(
            rfc3339_utc(1_767_225_600_000_000_001),
            "2026-01-01T00:00:00.000000001Z"
        );
    }
}
