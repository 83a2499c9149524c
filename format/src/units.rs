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
    if v < 0.0 || v > u64::MAX as f64 {
        return Err(UnitError {
            input: input.to_string(),
            expected,
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
}
