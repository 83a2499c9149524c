//! Typed errors of the format crate: what failed, where, expected versus actual.

use std::fmt;
use std::io;

/// A malformed byte sequence inside a chunk payload or header.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// Needed more bytes than there are.
    Truncated {
        /// Offset (within the decoded buffer) of the read.
        at: usize,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// A varint longer than 10 bytes or overflowing 64 bits.
    BadVarint {
        /// Offset of the offending byte.
        at: usize,
    },
    /// A value larger than the format allows.
    OutOfRange {
        /// Which field.
        what: &'static str,
        /// Offset of the value.
        at: usize,
        /// The value read.
        value: u64,
        /// The largest allowed.
        max: u64,
    },
    /// A column or table encoding code this version does not know.
    UnknownEncoding {
        /// Which field.
        what: &'static str,
        /// The code read.
        code: u8,
    },
    /// Bytes left over after a structure that must fill its buffer exactly.
    TrailingBytes {
        /// Which structure.
        what: &'static str,
        /// How many bytes were left.
        extra: usize,
    },
    /// A structural inconsistency (e.g. a column shorter than the segment).
    Inconsistent {
        /// What is inconsistent, in words.
        what: &'static str,
        /// Expected value.
        expected: u64,
        /// Actual value.
        actual: u64,
    },
    /// zstd could not decompress the payload.
    Zstd {
        /// zstd's message.
        message: String,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated {
                at,
                needed,
                available,
            } => write!(
                f,
                "truncated at byte {at}: needed {needed} bytes, {available} available"
            ),
            DecodeError::BadVarint { at } => write!(f, "malformed varint at byte {at}"),
            DecodeError::OutOfRange {
                what,
                at,
                value,
                max,
            } => write!(f, "{what} at byte {at} is {value}, at most {max} allowed"),
            DecodeError::UnknownEncoding { what, code } => {
                write!(f, "unknown encoding {code} for {what}")
            }
            DecodeError::TrailingBytes { what, extra } => {
                write!(f, "{extra} unexpected bytes after {what}")
            }
            DecodeError::Inconsistent {
                what,
                expected,
                actual,
            } => write!(f, "{what}: expected {expected}, found {actual}"),
            DecodeError::Zstd { message } => write!(f, "zstd: {message}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Why a chunk of a trace is damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DamageKind {
    /// The 16-byte file signature is wrong but chunks follow.
    BadSignature,
    /// A chunk header's own checksum did not match (or its sync marker is wrong); the bytes
    /// up to the next valid chunk header were skipped.
    BadChunkHeader {
        /// Bytes skipped to reach the next valid chunk header (or the end).
        skipped_bytes: u64,
    },
    /// The payload checksum did not match.
    ChecksumMismatch {
        /// Checksum stored in the chunk header.
        expected: u32,
        /// Checksum of the bytes found.
        actual: u32,
    },
    /// The file ends inside this chunk.
    Truncated {
        /// Bytes the chunk header announces (header + payload).
        expected_bytes: u64,
        /// Bytes present before the end of file.
        available_bytes: u64,
    },
    /// The payload has a valid checksum but does not decode.
    Undecodable(DecodeError),
    /// The bytes could not be read (an I/O error, or the file shrank).
    Unreadable {
        /// The I/O error.
        message: String,
    },
    /// The footer index does not agree with the chunks (it was ignored).
    BadFooter,
    /// Parts of a recording in parts are missing between two that are here (numbers
    /// `first..=last`): their events are not in the trace. (Parts before the first one here,
    /// deleted by retention, are not damage.)
    MissingParts {
        /// The first part number missing.
        first: u32,
        /// The last.
        last: u32,
    },
    /// Another trace starts here (a second signature or `header` chunk: files concatenated);
    /// the rest of the file is not read, so that the two recordings' tables never mix.
    AnotherTrace {
        /// Bytes from here to the end of the file.
        skipped_bytes: u64,
    },
}

impl fmt::Display for DamageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DamageKind::BadSignature => write!(f, "bad file signature"),
            DamageKind::BadChunkHeader { skipped_bytes } => {
                write!(f, "bad chunk header, skipped {skipped_bytes} bytes")
            }
            DamageKind::ChecksumMismatch { expected, actual } => write!(
                f,
                "checksum mismatch (expected {expected:#010x}, found {actual:#010x})"
            ),
            DamageKind::Truncated {
                expected_bytes,
                available_bytes,
            } => write!(
                f,
                "truncated: chunk is {expected_bytes} bytes, only {available_bytes} present"
            ),
            DamageKind::Undecodable(e) => write!(f, "does not decode: {e}"),
            DamageKind::Unreadable { message } => write!(f, "unreadable: {message}"),
            DamageKind::BadFooter => write!(f, "footer index inconsistent, ignored"),
            DamageKind::MissingParts { first, last } if first == last => write!(
                f,
                "part {first} of the recording is missing (its events are not in the trace)"
            ),
            DamageKind::MissingParts { first, last } => write!(
                f,
                "parts {first}–{last} of the recording are missing (their events are not in \
                 the trace)"
            ),
            DamageKind::AnotherTrace { skipped_bytes } => write!(
                f,
                "another trace starts here (files concatenated?), its {skipped_bytes} bytes were not read"
            ),
        }
    }
}

/// One damaged region of a trace, as reported by the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset of the damaged chunk (or region) in the file.
    pub offset: u64,
    /// Chunk type name when the chunk header was readable (`events`, `paths`…).
    pub chunk: Option<&'static str>,
    /// What is wrong.
    pub kind: DamageKind,
}

impl Damage {
    /// How much `damages` are, in words: `1 damaged chunk`, `3 damaged chunks`, `2 missing
    /// parts`, `1 damaged chunk and 1 missing part` (a [`DamageKind::MissingParts`] counts
    /// its parts, any other damage one chunk or region).
    pub fn count_in_words<'a>(damages: impl IntoIterator<Item = &'a Damage>) -> String {
        let (mut chunks, mut parts) = (0u64, 0u64);
        for d in damages {
            match d.kind {
                DamageKind::MissingParts { first, last } => {
                    parts += u64::from(last.saturating_sub(first)) + 1
                }
                _ => chunks += 1,
            }
        }
        let plural = |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
        match (chunks, parts) {
            (c, 0) => plural(c, "damaged chunk"),
            (0, p) => plural(p, "missing part"),
            (c, p) => format!(
                "{} and {}",
                plural(c, "damaged chunk"),
                plural(p, "missing part")
            ),
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.chunk {
            // Not in any file: the offset is where the next part's bytes begin.
            _ if matches!(self.kind, DamageKind::MissingParts { .. }) => write!(f, "{}", self.kind),
            Some(c) => write!(f, "{c} chunk at byte {}: {}", self.offset, self.kind),
            None => write!(f, "byte {}: {}", self.offset, self.kind),
        }
    }
}

/// Errors of [`crate::Reader`] that prevent reading a file at all.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be opened or read.
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        source: io::Error,
    },
    /// The file does not start with the iodump signature and holds no valid chunk.
    NotATrace {
        /// The first bytes found (at most 8).
        found: Vec<u8>,
    },
    /// The file's major version is newer than this reader supports.
    UnsupportedVersion {
        /// Major version in the file.
        major: u16,
        /// Highest major version supported.
        supported: u16,
    },
    /// A segment could not be decoded (it is damaged); the reader skips it when iterating.
    Damaged(Damage),
}

impl ReadError {
    /// True when the file was not there to open (deleted since it was listed).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Io { context, source } => write!(f, "{context}: {source}"),
            ReadError::NotATrace { found } if found.is_empty() => {
                write!(f, "empty file, not an iodump trace")
            }
            ReadError::NotATrace { found } => write!(
                f,
                "not an iodump trace (starts with {})",
                found
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            ReadError::UnsupportedVersion { major, supported } => write!(
                f,
                "trace format version {major} is newer than this iodump supports ({supported})"
            ),
            ReadError::Damaged(d) => write!(f, "damaged {d}"),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Errors of [`crate::Writer`].
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// Writing to the output failed; chunks written before are intact.
    Io {
        /// What was being written.
        context: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// An argument the format cannot store.
    Invalid {
        /// What is wrong, in words.
        what: String,
    },
    /// The writer's options are inconsistent.
    BadOptions {
        /// What is wrong, in words.
        what: String,
    },
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Io { context, source } => write!(f, "writing {context}: {source}"),
            WriteError::Invalid { what } => write!(f, "cannot store {what}"),
            WriteError::BadOptions { what } => write!(f, "bad writer options: {what}"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn damage(kind: DamageKind) -> Damage {
        Damage {
            offset: 16,
            chunk: None,
            kind,
        }
    }

    #[test]
    fn damage_is_counted_in_chunks_and_parts() {
        let chunk = damage(DamageKind::BadFooter);
        let parts = damage(DamageKind::MissingParts { first: 3, last: 5 });
        let part = damage(DamageKind::MissingParts { first: 9, last: 9 });
        let words = |d: &[&Damage]| Damage::count_in_words(d.iter().copied());
        assert_eq!(words(&[]), "0 damaged chunks");
        assert_eq!(words(&[&chunk]), "1 damaged chunk");
        assert_eq!(words(&[&chunk, &chunk]), "2 damaged chunks");
        assert_eq!(words(&[&part]), "1 missing part");
        assert_eq!(words(&[&parts, &part]), "4 missing parts");
        assert_eq!(
            words(&[&chunk, &part]),
            "1 damaged chunk and 1 missing part"
        );
    }
}
