//! Little building blocks of the byte layout: LEB128 varints, zigzag, length-prefixed strings,
//! and a bounds-checked cursor whose every failure is a [`DecodeError`] rather than a panic.

use crate::error::DecodeError;

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Number of bytes `put_varint` writes for `v`.
#[inline]
pub fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Maps a signed value to an unsigned one so that small magnitudes stay small.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends a length-prefixed byte string.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A read position over a byte slice; every read is bounds-checked.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Starts at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    /// Current position.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// True when everything has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
    /// Reads `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                at: self.pos,
                needed: n,
                available: self.remaining(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    /// Reads a little-endian u16.
    pub fn u16_le(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    /// Reads a little-endian u32.
    pub fn u32_le(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Reads a little-endian u64.
    pub fn u64_le(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Reads an unsigned LEB128 varint of at most 10 bytes.
    #[inline]
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(DecodeError::Truncated {
                    at: self.pos,
                    needed: 1,
                    available: 0,
                });
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(DecodeError::BadVarint { at: self.pos - 1 });
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                return Err(DecodeError::BadVarint { at: self.pos - 1 });
            }
        }
    }
    /// Reads a varint that must fit `max`; `what` names the field in the error.
    pub fn varint_max(&mut self, max: u64, what: &'static str) -> Result<u64, DecodeError> {
        let at = self.pos;
        let v = self.varint()?;
        if v > max {
            return Err(DecodeError::OutOfRange {
                what,
                at,
                value: v,
                max,
            });
        }
        Ok(v)
    }
    /// Reads a varint that must fit in a u32.
    pub fn varint_u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(self.varint_max(u32::MAX as u64, what)? as u32)
    }
    /// Reads a length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.varint_max(self.remaining() as u64, "string length")?;
        self.take(n as usize)
    }
    /// Reads a length-prefixed string; invalid UTF-8 is replaced, not rejected.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_edges() {
        for v in [
            0u64,
            1,
            127,
            128,
            255,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
            let mut c = Cursor::new(&b);
            assert_eq!(c.varint().unwrap(), v);
            assert!(c.is_empty());
        }
    }

    #[test]
    fn varint_rejects_overlong_and_truncated() {
        let eleven = [0xffu8; 11];
        assert!(Cursor::new(&eleven).varint().is_err());
        // 10th byte may only carry one bit.
        let mut too_big = vec![0xffu8; 9];
        too_big.push(0x02);
        assert!(Cursor::new(&too_big).varint().is_err());
        assert!(Cursor::new(&[0x80, 0x80]).varint().is_err());
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, 1, -1, 2, -2, i64::MAX, i64::MIN, 4096, -4096] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }
}
