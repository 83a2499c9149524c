//! Segments whose columns are compressed apart (spec §4.5, since 1.5): the stored payload of
//! an `events` chunk is a zstd skippable frame holding an index, then one zstd frame per
//! column. Decompressed whole, the frames give the segment payload of §4.2 byte for byte (a
//! zstd decoder skips the skippable frame and concatenates the others), so a 1.4 reader reads
//! such a segment as any other; a reader that wants a few columns decompresses only their
//! frames ([`crate::Reader::decode_segment_projected`]).

use crate::bytes::{put_varint, Cursor};
use crate::error::DecodeError;
use crate::segment::col;

/// First four bytes of the index frame: a zstd skippable frame (magic `0x184D2A5E`,
/// little-endian), then its content length (u32 LE), then the content.
pub const SKIPPABLE_MAGIC: u32 = 0x184D_2A5E;
/// First bytes of the index frame's content.
pub const INDEX_TAG: &[u8; 4] = b"IODX";
/// Segments with fewer events are compressed as one frame (the index and the frames would
/// cost more than projection saves).
pub const FRAMED_MIN_ROWS: usize = 4096;
/// Planes of at least this many bytes are compressed as zstd frames of their own within their
/// column's frame (since 1.6): each plane gets its own Huffman table and block type, so a
/// plane of random low bytes is stored raw and a skewed one compressed, instead of one
/// table for all.
pub const PLANE_FRAME_MIN_BYTES: usize = 4096;

/// One column's frame, as the index lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The column id of the block the frame holds (the first frame also holds the
    /// segment's `rows` and `ncols` varints, before that block).
    pub column_id: u64,
    /// Where the frame starts in the stored payload.
    pub offset: usize,
    /// Its compressed length.
    pub stored_len: usize,
    /// Its decompressed length.
    pub raw_len: usize,
}

/// The index of a framed segment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Index {
    /// Events in the segment.
    pub rows: usize,
    /// The frames, in payload order.
    pub frames: Vec<Frame>,
}

/// Compresses a raw segment payload (as `encode_segment` wrote it, its column blocks
/// starting at `starts`: (column id, offset of its `varint column_id`)) one frame per
/// column, after an index frame, into `out`; a column's frame is itself cut into zstd frames
/// at the offsets of `cuts` (ascending) that fall inside it. `compress` compresses one piece
/// into the end of `out` and returns its length.
pub fn compress_framed(
    raw: &[u8],
    rows: usize,
    starts: &[(u64, usize)],
    cuts: &[usize],
    out: &mut Vec<u8>,
    mut compress: impl FnMut(&[u8], &mut Vec<u8>) -> std::io::Result<usize>,
) -> std::io::Result<()> {
    // The pieces: the first from 0 (the rows and ncols varints), each to the next start.
    let bounds = |k: usize| -> (usize, usize) {
        let from = if k == 0 { 0 } else { starts[k].1 };
        let to = starts.get(k + 1).map_or(raw.len(), |s| s.1);
        (from, to)
    };
    let index_at = out.len();
    // The index frame is written last, when the frames' lengths are known: reserve nothing,
    // compress the frames after a placeholder, then insert the index before them.
    let mut frames: Vec<(u64, usize, usize)> = Vec::with_capacity(starts.len());
    let mut cuts = cuts.iter().copied().peekable();
    for (k, &(id, _)) in starts.iter().enumerate() {
        let (from, to) = bounds(k);
        let (mut at, mut n) = (from, 0);
        while let Some(cut) = cuts.next_if(|&c| c < to) {
            if cut > at {
                n += compress(&raw[at..cut], out)?;
                at = cut;
            }
        }
        n += compress(&raw[at..to], out)?;
        frames.push((id, n, to - from));
    }
    let mut index = Vec::with_capacity(16 + 8 * frames.len());
    index.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    index.extend_from_slice(&[0; 4]);
    index.extend_from_slice(INDEX_TAG);
    put_varint(&mut index, rows as u64);
    put_varint(&mut index, frames.len() as u64);
    for &(id, stored, raw_len) in &frames {
        put_varint(&mut index, id);
        put_varint(&mut index, stored as u64);
        put_varint(&mut index, raw_len as u64);
    }
    let content = (index.len() - 8) as u32;
    index[4..8].copy_from_slice(&content.to_le_bytes());
    out.splice(index_at..index_at, index);
    Ok(())
}

/// The index at the start of a stored `events` payload, or `None` when the payload is not
/// framed (one zstd frame: segments of fewer than [`FRAMED_MIN_ROWS`] events, traces
/// before 1.5). An index that does not add up to the payload (`stored` bytes, `raw_len`
/// decompressed) is an error.
pub fn parse_index(stored: &[u8], raw_len: usize) -> Result<Option<Index>, DecodeError> {
    if stored.len() < 12 || stored[0..4] != SKIPPABLE_MAGIC.to_le_bytes() {
        return Ok(None);
    }
    let content = u32::from_le_bytes([stored[4], stored[5], stored[6], stored[7]]) as usize;
    let Some(body) = stored.get(8..8 + content) else {
        return Err(bad(
            "index frame longer than the payload",
            content,
            stored.len(),
        ));
    };
    if body.len() < 4 || &body[..4] != INDEX_TAG {
        return Ok(None); // another skippable frame: not ours, read the payload whole
    }
    let mut c = Cursor::new(&body[4..]);
    let rows = c.varint_max(
        crate::segment::MAX_SEGMENT_EVENTS as u64,
        "segment event count",
    )?;
    let n = c.varint_max(4096, "frame count")? as usize;
    let mut frames = Vec::with_capacity(n.min(col::COUNT * 2));
    let mut offset = 8 + content;
    let (mut raw_sum, mut stored_sum) = (0usize, 0usize);
    for _ in 0..n {
        let column_id = c.varint()?;
        let stored_len = c.varint_max(stored.len() as u64, "frame length")? as usize;
        let frame_raw = c.varint_max(raw_len as u64, "frame raw length")? as usize;
        frames.push(Frame {
            column_id,
            offset,
            stored_len,
            raw_len: frame_raw,
        });
        offset += stored_len;
        raw_sum += frame_raw;
        stored_sum += stored_len;
    }
    if !c.is_empty() {
        return Err(DecodeError::TrailingBytes {
            what: "segment index",
            extra: c.remaining(),
        });
    }
    if offset != stored.len() {
        return Err(bad(
            "frames versus stored payload",
            stored.len(),
            8 + content + stored_sum,
        ));
    }
    if raw_sum != raw_len {
        return Err(bad("frames versus raw payload", raw_len, raw_sum));
    }
    Ok(Some(Index {
        rows: rows as usize,
        frames,
    }))
}

/// The zstd frames `b` is made of, in order (a column's frame since 1.6: one per plane);
/// `None` when `b` is not a sequence of whole zstd frames.
pub fn zstd_frames(mut b: &[u8]) -> Option<Vec<&[u8]>> {
    let mut frames = Vec::new();
    while !b.is_empty() {
        let n = zstd::zstd_safe::find_frame_compressed_size(b).ok()?;
        let (frame, rest) = b.split_at_checked(n)?;
        frames.push(frame);
        b = rest;
    }
    Some(frames)
}

fn bad(what: &'static str, expected: usize, actual: usize) -> DecodeError {
    DecodeError::Inconsistent {
        what,
        expected: expected as u64,
        actual: actual as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framed_payloads_decompress_whole_to_the_raw_payload() {
        let raw: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let starts = [(1u64, 0usize), (2, 3000), (5, 7000)];
        let mut out = Vec::new();
        // Column 1's frame cut once, column 2's twice (1.6's plane frames), column 5's not.
        let cuts = [1000usize, 5000, 5500];
        compress_framed(&raw, 77, &starts, &cuts, &mut out, |piece, out| {
            let z = zstd::bulk::compress(piece, 3)?;
            out.extend_from_slice(&z);
            Ok(z.len())
        })
        .unwrap();
        // any zstd decoder: the skippable frame is skipped, the frames concatenated
        assert_eq!(zstd::bulk::decompress(&out, raw.len()).unwrap(), raw);
        let idx = parse_index(&out, raw.len()).unwrap().unwrap();
        assert_eq!(idx.rows, 77);
        let ids: Vec<u64> = idx.frames.iter().map(|f| f.column_id).collect();
        assert_eq!(ids, [1, 2, 5]);
        let second = &idx.frames[1];
        let piece =
            zstd::bulk::decompress(&out[second.offset..second.offset + second.stored_len], 4000)
                .unwrap();
        assert_eq!(piece, raw[3000..7000]);
        // each column's frame is as many zstd frames as its pieces
        let counts: Vec<usize> = idx
            .frames
            .iter()
            .map(|f| {
                zstd_frames(&out[f.offset..f.offset + f.stored_len])
                    .unwrap()
                    .len()
            })
            .collect();
        assert_eq!(counts, [2, 3, 1]);
        assert_eq!(zstd_frames(&out[second.offset..second.offset + 5]), None);
        // an index that does not add up is an error, a payload without one is not framed
        assert!(parse_index(&out, raw.len() + 1).is_err());
        assert!(parse_index(&out[..out.len() - 1], raw.len()).is_err());
        assert_eq!(parse_index(&raw, raw.len()).unwrap(), None);
    }
}
