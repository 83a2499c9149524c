//! Durations and byte sizes as people type them on command lines: `500ms`, `2.5s`, `1h`,
//! `256M`, `1GiB`. One grammar for every flag that takes one:
//!
//! - a duration is a number (fractions allowed) and a unit: `ns`, `us` (or `µs`), `ms`, `s`,
//!   `m` or `min`, `h`, `d`; a bare number is seconds;
//! - a size is a number and a unit of powers of 1024: `B`, `K`/`KB`/`KiB`, `M`/`MB`/`MiB`,
//!   `G`/`GB`/`GiB`, `T`/`TB`/`TiB` (case-insensitive except that a lone `m` is minutes);
//!   a bare number is bytes.
//!
//! [`parse_span`] takes either, for flags such as `--rotate 1h` / `--rotate 256M`.
//!
//! The other way round, [`format_duration_ns`] and [`format_bytes`] are the one duration and
//! the one byte-size formatter of every command's output.

use std::fmt;

/// A malformed duration or size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError {
    /// What was given.
    pub input: String,
    /// What was expected.
    pub expected: &'static str,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not {}", self.input, self.expected)
    }
}

impl std::error::Error for UnitError {}

/// A duration or a size, as [`parse_span`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// Nanoseconds.
    Duration(u64),
    /// Bytes.
    Bytes(u64),
}

const DURATION: &str =
    "a duration (a number and ns, us, ms, s, m, h or d, e.g. 500ms, 10s, 1h; seconds if bare)";
const SIZE: &str =
    "a size (a number and B, K, M, G or T, powers of 1024, e.g. 256M; bytes if bare)";
const SPAN: &str = "a duration (e.g. 30s, 10m, 1h) or a size (e.g. 256M, 1G)";

fn split(s: &str) -> (&str, &str) {
    let s = s.trim();
    let at = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    (&s[..at], s[at..].trim())
}

fn duration_unit(u: &str) -> Option<f64> {
    Some(match u {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        _ => return None,
    })
}

fn size_unit(u: &str) -> Option<f64> {
    if u == "m" {
        return None; // minutes
    }
    let k = 1024f64;
    Some(match u.to_ascii_lowercase().as_str() {
        "b" => 1.0,
        "k" | "kb" | "kib" => k,
        "m" | "mb" | "mib" => k * k,
        "g" | "gb" | "gib" => k * k * k,
        "t" | "tb" | "tib" => k * k * k * k,
        _ => return None,
    })
}

fn number(num: &str, input: &str, expected: &'static str) -> Result<f64, UnitError> {
    let err = || UnitError {
        input: input.to_string(),
        expected,
    };
    if num.is_empty() {
        return Err(err());
    }
    let v: f64 = num.parse().map_err(|_| err())?;
    if !v.is_finite() {
        return Err(err());
    }
    Ok(v)
}

fn whole(v: f64, input: &str, expected: &'static str) -> Result<u64, UnitError> {
    // Past 2^63 (292 years, 8 EiB): too large to add to a clock or a count without
    // overflowing, and no setting needs it.
    const TOO_LARGE: &str = "a value iodump can take: at most 292 years or 8 EiB";
    if v < 0.0 || v.is_nan() {
        return Err(UnitError {
            input: input.to_string(),
            expected,
        });
    }
    if v >= (1u64 << 63) as f64 {
        return Err(UnitError {
            input: input.to_string(),
            expected: TOO_LARGE,
        });
    }
    Ok(v.round() as u64)
}

/// A duration in nanoseconds (`0` is allowed: callers that need more say so).
pub fn parse_duration_ns(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split(s);
    let mult = if unit.is_empty() {
        1e9
    } else {
        duration_unit(unit).ok_or(UnitError {
            input: s.to_string(),
            expected: DURATION,
        })?
    };
    whole(number(num, s, DURATION)? * mult, s, DURATION)
}

/// A size in bytes.
pub fn parse_size_bytes(s: &str) -> Result<u64, UnitError> {
    let (num, unit) = split(s);
    let mult = if unit.is_empty() {
        1.0
    } else {
        size_unit(unit).ok_or(UnitError {
            input: s.to_string(),
            expected: SIZE,
        })?
    };
    whole(number(num, s, SIZE)? * mult, s, SIZE)
}

/// A duration or a size, told apart by the unit (a bare number is refused: say which).
pub fn parse_span(s: &str) -> Result<Span, UnitError> {
    let (num, unit) = split(s);
    let err = || UnitError {
        input: s.to_string(),
        expected: SPAN,
    };
    if let Some(m) = duration_unit(unit) {
        return Ok(Span::Duration(whole(number(num, s, SPAN)? * m, s, SPAN)?));
    }
    if let Some(m) = size_unit(unit) {
        return Ok(Span::Bytes(whole(number(num, s, SPAN)? * m, s, SPAN)?));
    }
    Err(err())
}

/// How [`format_duration_ns`] writes a duration. Every style picks the largest unit of `s`,
/// `ms`, `us`, `ns` the duration has at least one of, and writes nanoseconds whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationStyle {
    /// Tables and reports: one decimal in us, two in ms and s (`812ns`, `15.2us`, `3.41ms`,
    /// `1.20s`).
    Short,
    /// Narrow columns, at most four characters before the unit (`850ns`, `1.2us`, `12us`,
    /// `1.25ms`, `12.3ms`, `120ms`, `2.10s`).
    Narrow,
    /// Axis labels: up to three decimals without trailing zeros, a space before the unit
    /// (`1.5 ms`, `2 s`, `250 us`).
    Label,
    /// As typed on a command line: up to three decimals without trailing zeros (`500ms`,
    /// `2s`, `2.5s`); what [`parse_duration_ns`] reads back.
    Exact,
}

/// The units of [`format_duration_ns`], largest first, with their nanoseconds.
const DURATION_UNITS: [(f64, &str); 3] = [(1e9, "s"), (1e6, "ms"), (1e3, "us")];

/// A duration in nanoseconds (fractions and negative values allowed: plot axes) in `style`.
pub fn format_duration_ns(ns: f64, style: DurationStyle) -> String {
    let sep = if style == DurationStyle::Label {
        " "
    } else {
        ""
    };
    let Some((scale, unit)) = DURATION_UNITS.into_iter().find(|&(s, _)| ns.abs() >= s) else {
        return format!("{ns:.0}{sep}ns");
    };
    let v = ns / scale;
    let decimals = match (style, unit) {
        (DurationStyle::Short, "us") => 1,
        (DurationStyle::Short, _) => 2,
        (DurationStyle::Narrow, "s") => 2,
        (DurationStyle::Narrow, "us") if v.abs() < 10.0 => 1,
        (DurationStyle::Narrow, "us") => 0,
        (DurationStyle::Narrow, _) if v.abs() < 10.0 => 2,
        (DurationStyle::Narrow, _) if v.abs() < 100.0 => 1,
        (DurationStyle::Narrow, _) => 0,
        (DurationStyle::Label | DurationStyle::Exact, _) => {
            let n = format!("{v:.3}");
            let n = n.trim_end_matches('0').trim_end_matches('.');
            return format!("{n}{sep}{unit}");
        }
    };
    format!("{v:.decimals$}{unit}")
}

/// The units of [`format_bytes`]: powers of 1024.
const BYTE_UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// A size in bytes (or bytes per second) in powers of 1024: `812 B`, `1.5 KiB`, `3.0 GiB`.
pub fn format_bytes(bytes: f64) -> String {
    let mut v = bytes;
    let mut i = 0;
    while v.abs() >= 1024.0 && i < BYTE_UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.1} {}", BYTE_UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_sizes_and_spans() {
        assert_eq!(parse_duration_ns("500ms"), Ok(500_000_000));
        assert_eq!(parse_duration_ns("2.5s"), Ok(2_500_000_000));
        assert_eq!(parse_duration_ns("2"), Ok(2_000_000_000));
        assert_eq!(parse_duration_ns("1h"), Ok(3_600_000_000_000));
        assert_eq!(parse_duration_ns("10m"), Ok(600_000_000_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert!(parse_duration_ns("10x").is_err());
        assert!(parse_duration_ns("-1s").is_err());
        assert!(parse_duration_ns("").is_err());
        assert!(parse_duration_ns("s").is_err());
        assert_eq!(parse_size_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_size_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size_bytes("4096"), Ok(4096));
        assert_eq!(parse_size_bytes("1.5k"), Ok(1536));
        assert!(parse_size_bytes("1m").is_err(), "m is minutes");
        assert_eq!(parse_span("1h"), Ok(Span::Duration(3_600_000_000_000)));
        assert_eq!(parse_span("60s"), Ok(Span::Duration(60_000_000_000)));
        assert_eq!(parse_span("1m"), Ok(Span::Duration(60_000_000_000)));
        assert_eq!(parse_span("256M"), Ok(Span::Bytes(256 << 20)));
        assert_eq!(
            parse_span("0"),
            Err(UnitError {
                input: "0".into(),
                expected: SPAN
            })
        );
        assert!(parse_span("1.2.3s").is_err());
    }

    #[test]
    fn durations_and_sizes_are_written_back() {
        use DurationStyle::*;
        let f = |ns: u64, st| format_duration_ns(ns as f64, st);
        assert_eq!(f(812, Short), "812ns");
        assert_eq!(f(15_240, Short), "15.2us");
        assert_eq!(f(3_412_000, Short), "3.41ms");
        assert_eq!(f(1_204_000_000, Short), "1.20s");
        assert_eq!(f(850, Narrow), "850ns");
        assert_eq!(f(1_234, Narrow), "1.2us");
        assert_eq!(f(12_340, Narrow), "12us");
        assert_eq!(f(1_250_000, Narrow), "1.25ms");
        assert_eq!(f(12_340_000, Narrow), "12.3ms");
        assert_eq!(f(123_400_000, Narrow), "123ms");
        assert_eq!(f(2_100_000_000, Narrow), "2.10s");
        assert_eq!(f(1_500_000, Label), "1.5 ms");
        assert_eq!(f(2_000_000_000, Label), "2 s");
        assert_eq!(format_duration_ns(0.5, Label), "0 ns");
        assert_eq!(f(500_000_000, Exact), "500ms");
        assert_eq!(f(2_000_000_000, Exact), "2s");
        assert_eq!(f(2_500_000_000, Exact), "2.5s");
        for ns in [1, 999, 250_000, 500_000_000, 2_500_000_000, 60_000_000_000] {
            assert_eq!(parse_duration_ns(&f(ns, Exact)), Ok(ns));
        }
        assert_eq!(format_bytes(0.0), "0 B");
        assert_eq!(format_bytes(1023.0), "1023 B");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
        assert_eq!(format_bytes(3.0 * (1u64 << 30) as f64), "3.0 GiB");
        assert_eq!(format_bytes(2.0 * (1u64 << 50) as f64), "2.0 PiB");
    }
}
