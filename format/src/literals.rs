//! zstd frames of literals only: a piece compressed with Huffman coding of its bytes and no
//! LZ matches (a standard zstd frame whose blocks hold no sequences, or raw blocks), which any
//! zstd decoder reads. The writer keeps such a frame for a byte plane when it is no larger
//! than the one zstd's match finder makes (spec §4.5): most planes of I/O events are skewed
//! bytes with short, rare repeats, which zstd codes as many short matches that cost more to
//! decode than they save.

use std::ptr::NonNull;

use zstd_sys::{
    ZSTD_CCtx, ZSTD_CCtx_setParameter, ZSTD_Sequence, ZSTD_cParameter, ZSTD_compressBound,
    ZSTD_compressSequences, ZSTD_createCCtx, ZSTD_freeCCtx, ZSTD_isError,
};

/// A zstd compression context that writes frames of literals only.
pub struct LiteralsCompressor {
    cctx: NonNull<ZSTD_CCtx>,
}

// SAFETY: a ZSTD_CCtx may move between threads; it is used through `&mut self` only, never
// shared.
unsafe impl Send for LiteralsCompressor {}

impl LiteralsCompressor {
    /// A context whose Huffman tables are built as zstd level `level` builds them; `None`
    /// when zstd cannot allocate one or refuses the level.
    pub fn new(level: i32) -> Option<LiteralsCompressor> {
        // SAFETY: plain FFI call; a null result is handled.
        let cctx = NonNull::new(unsafe { ZSTD_createCCtx() })?;
        let c = LiteralsCompressor { cctx };
        // SAFETY: `cctx` is a live context owned by `c`.
        let r = unsafe {
            ZSTD_CCtx_setParameter(
                c.cctx.as_ptr(),
                ZSTD_cParameter::ZSTD_c_compressionLevel,
                level,
            )
        };
        // SAFETY: plain FFI call on a return code.
        if unsafe { ZSTD_isError(r) } != 0 {
            return None;
        }
        Some(c)
    }

    /// Appends `src` as one zstd frame of literals only to `out` and returns its length.
    pub fn compress(&mut self, src: &[u8], out: &mut Vec<u8>) -> std::io::Result<usize> {
        // SAFETY: plain FFI call.
        let bound = unsafe { ZSTD_compressBound(src.len()) };
        out.reserve(bound);
        let at = out.len();
        let no_sequences: [ZSTD_Sequence; 0] = [];
        // SAFETY: `cctx` is a live context owned by `self`; `src` is valid for `src.len()`
        // bytes; the destination is the `bound` bytes reserved after `out`'s length, written
        // by zstd and counted into the length only up to what it returns; with no sequences
        // (a valid pointer to none) every byte of `src` is a literal.
        let n = unsafe {
            ZSTD_compressSequences(
                self.cctx.as_ptr(),
                out.as_mut_ptr().add(at).cast(),
                bound,
                no_sequences.as_ptr(),
                0,
                src.as_ptr().cast(),
                src.len(),
            )
        };
        // SAFETY: plain FFI call on a return code.
        if unsafe { ZSTD_isError(n) } != 0 {
            return Err(std::io::Error::other(
                "zstd could not write a literals-only frame",
            ));
        }
        // SAFETY: zstd wrote `n` ≤ `bound` bytes from `at`, within the reserved capacity.
        unsafe { out.set_len(at + n) };
        Ok(n)
    }
}

impl LiteralsCompressor {
    /// Given `src` just compressed by zstd's match finder into the last `lz_len` bytes of
    /// `out`, replaces that frame with one of literals only when it is no larger; returns
    /// the length of the frame kept.
    pub fn keep_smaller(
        &mut self,
        src: &[u8],
        out: &mut Vec<u8>,
        lz_len: usize,
    ) -> std::io::Result<usize> {
        let at = out.len();
        let m = self.compress(src, out)?;
        if m <= lz_len {
            out.copy_within(at.., at - lz_len);
            out.truncate(at - lz_len + m);
            Ok(m)
        } else {
            out.truncate(at);
            Ok(lz_len)
        }
    }
}

impl Drop for LiteralsCompressor {
    fn drop(&mut self) {
        // SAFETY: the context is owned by `self` and freed once, here.
        unsafe { ZSTD_freeCCtx(self.cctx.as_ptr()) };
    }
}

/// Whether the zstd frame at the start of `frame` codes any sequence (an LZ match): false for
/// frames of literals only ([`LiteralsCompressor`]) and for frames of raw or RLE blocks. Reads
/// the frame and block headers and each compressed block's literals section header (RFC 8878,
/// §3.1.1); `None` when `frame` does not start with a whole zstd frame.
pub fn frame_has_sequences(frame: &[u8]) -> Option<bool> {
    let b = frame;
    if b.get(0..4)? != [0x28, 0xB5, 0x2F, 0xFD] {
        return None;
    }
    let fhd = *b.get(4)?;
    let single_segment = fhd & 0x20 != 0;
    let fcs_bytes = match fhd >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let did_bytes = [0, 1, 2, 4][usize::from(fhd & 3)];
    let mut at = 5 + usize::from(!single_segment) + did_bytes + fcs_bytes;
    let mut sequences = false;
    loop {
        let h = b.get(at..at + 3)?;
        let h = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
        let (last, kind, size) = (h & 1 != 0, (h >> 1) & 3, (h >> 3) as usize);
        at += 3;
        let block = match kind {
            0 => b.get(at..at + size)?, // raw
            1 => b.get(at..at + 1)?,    // RLE: one byte, repeated `size` times
            2 => b.get(at..at + size)?, // compressed
            _ => return None,
        };
        if kind == 2 {
            // the literals section's length, then the sequences section's first byte: the
            // number of sequences (0: none)
            let l0 = *block.first()?;
            let lit_len = match (l0 & 3, (l0 >> 2) & 3) {
                // raw or RLE literals: the regenerated size in 5, 12 or 20 bits
                (t @ 0..=1, sf) => {
                    let (hdr, n) = match sf {
                        0 | 2 => (1, usize::from(l0 >> 3)),
                        1 => (2, usize::from(l0 >> 4) | usize::from(*block.get(1)?) << 4),
                        _ => (
                            3,
                            usize::from(l0 >> 4)
                                | usize::from(*block.get(1)?) << 4
                                | usize::from(*block.get(2)?) << 12,
                        ),
                    };
                    hdr + if t == 0 { n } else { 1 }
                }
                // compressed or treeless literals: the compressed size follows the regenerated
                (_, sf) => {
                    let (hdr, bits) = match sf {
                        0 | 1 => (3, 10),
                        2 => (4, 14),
                        _ => (5, 18),
                    };
                    let mut v = 0u64;
                    for (i, &x) in block.get(..hdr)?.iter().enumerate() {
                        v |= u64::from(x) << (8 * i);
                    }
                    hdr + ((v >> (4 + bits)) & ((1 << bits) - 1)) as usize
                }
            };
            if *block.get(lit_len)? != 0 {
                sequences = true;
            }
        }
        at += if kind == 1 { 1 } else { size };
        if last {
            return Some(sequences);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_only_frames_decode_and_use_no_matches() {
        let mut c = LiteralsCompressor::new(3).unwrap();
        // skewed random bytes: literals only codes them in about their entropy
        let mut x = 12345u64;
        let skewed: Vec<u8> = (0..50_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                [0u8, 0, 0, 0, 1, 1, 2, 3][(x % 8) as usize]
            })
            .collect();
        let mut out = vec![7u8]; // appended after what is there
        let n = c.compress(&skewed, &mut out).unwrap();
        assert_eq!(out.len(), 1 + n);
        assert_eq!(
            zstd::bulk::decompress(&out[1..], skewed.len()).unwrap(),
            skewed
        );
        assert!(
            n < skewed.len() / 3,
            "{n} bytes for 50,000 of 1.75 bits each"
        );
        // a repeating sequence: zstd's matches make it tiny, literals only cannot
        let periodic: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let mut lit = Vec::new();
        c.compress(&periodic, &mut lit).unwrap();
        let lz = zstd::bulk::compress(&periodic, 3).unwrap();
        assert_eq!(
            zstd::bulk::decompress(&lit, periodic.len()).unwrap(),
            periodic
        );
        assert!(
            lz.len() < 1000 && lit.len() > 40_000,
            "{} vs {}",
            lz.len(),
            lit.len()
        );
        assert_eq!(frame_has_sequences(&lit), Some(false));
        assert_eq!(frame_has_sequences(&lz), Some(true));
        assert_eq!(frame_has_sequences(&out[1..]), Some(false));
        let lz_skewed = zstd::bulk::compress(&skewed, 3).unwrap();
        assert!(frame_has_sequences(&lz_skewed).is_some());
        assert_eq!(frame_has_sequences(&lz[..lz.len() - 1]), None);
        assert_eq!(frame_has_sequences(b"not a zstd frame"), None);
        // more than one block of 128 KiB, and a negative (fast) level
        let big: Vec<u8> = skewed.iter().cycle().take(300_000).copied().collect();
        for level in [3, -5] {
            let mut c = LiteralsCompressor::new(level).unwrap();
            let mut z = Vec::new();
            c.compress(&big, &mut z).unwrap();
            assert_eq!(zstd::bulk::decompress(&z, big.len()).unwrap(), big);
            assert_eq!(frame_has_sequences(&z), Some(false));
        }
        // the smaller frame replaces the one before it, after what `out` held
        let mut out = vec![1u8, 2];
        out.extend_from_slice(&lz);
        assert_eq!(
            c.keep_smaller(&periodic, &mut out, lz.len()).unwrap(),
            lz.len()
        );
        assert_eq!(out[2..], lz[..]);
        let mut out = vec![1u8, 2];
        out.extend_from_slice(&lz_skewed);
        let kept = c.keep_smaller(&skewed, &mut out, lz_skewed.len()).unwrap();
        assert!(kept <= lz_skewed.len() && out.len() == 2 + kept && out[..2] == [1, 2]);
        assert_eq!(
            zstd::bulk::decompress(&out[2..], skewed.len()).unwrap(),
            skewed
        );
        // empty input is a valid frame too
        let mut e = Vec::new();
        c.compress(&[], &mut e).unwrap();
        assert_eq!(zstd::bulk::decompress(&e, 0).unwrap(), Vec::<u8>::new());
    }
}
