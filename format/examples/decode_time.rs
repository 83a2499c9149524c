//! Times decoding a trace's segments on one thread, every column and some projections, and
//! the columns of ids `IDS` (comma-separated, as `schemas/iod-format.md` §4.2 numbers them)
//! when given; then zstd alone: decompressing every segment's frames (§4.5) from memory,
//! with no column decoded, in all and per column (with how many of its zstd frames code no
//! sequence: literals only, raw or RLE) (`cargo run --release -p iodump-format
//! --example decode_time -- FILE [ROUNDS [IDS]]`). With `DT_EVERY=1` only every column is
//! timed (for `perf`); with `BASELINE_LOOPS=1` the decoder runs the loops of a CPU without
//! AVX2 (`simd::use_x86_64_v3(false)`).
use std::os::unix::fs::FileExt;
use std::time::Instant;

use iodump_format::chunk::CHUNK_HEADER_BYTES;
use iodump_format::frames::{parse_index, zstd_frames};
use iodump_format::literals::frame_has_sequences;
use iodump_format::segment::{col, Columns};
use iodump_format::{EventBatch, Reader, SegmentDecoder};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: decode_time FILE [ROUNDS [IDS]]");
    if std::env::var_os("BASELINE_LOOPS").is_some() {
        iodump_format::simd::use_x86_64_v3(false);
    }
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let r = Reader::open(&path).expect("open the trace");
    let mut b = EventBatch::default();
    let mut dec = SegmentDecoder::new();
    let ids: Option<Vec<u64>> = std::env::args().nth(3).map(|a| {
        a.split(',')
            .map(|x| x.trim().parse().expect("IDS: comma-separated column ids"))
            .collect()
    });
    let mut runs = vec![
        ("every column".to_string(), Columns::ALL),
        (
            "path id, bytes, latency".to_string(),
            Columns::of(&[col::PATH_ID, col::BYTES, col::LATENCY_NS]),
        ),
        (
            "path id, bytes, op (top files' first pass)".to_string(),
            Columns::of(&[col::PATH_ID, col::BYTES, col::OP]),
        ),
    ];
    if let Some(ids) = ids {
        runs.push((format!("columns {ids:?}"), Columns::of(&ids)));
    }
    if std::env::var_os("DT_EVERY").is_some() {
        runs.truncate(1);
    }
    for (name, want) in runs {
        let mut best = f64::MAX;
        let mut n = 0;
        for _ in 0..rounds {
            n = 0;
            let t0 = Instant::now();
            for i in 0..r.segments().len() {
                r.decode_segment_projected(i, want, &mut b, &mut dec)
                    .expect("decode");
                n += b.len();
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        println!(
            "{name}: {n} events, best of {rounds}: {:.1} M events/s",
            n as f64 / best / 1e6
        );
    }
    if std::env::var_os("DT_EVERY").is_none() {
        zstd_alone(&path, &r, rounds);
    }
}

/// Times zstd's decompression of every frame of every segment, the stored payloads read
/// into memory first; a segment stored as one frame counts as column 0.
fn zstd_alone(path: &str, r: &Reader, rounds: usize) {
    let f = std::fs::File::open(path).expect("open the trace");
    // (stored payload, [(column id, offset, stored length, raw length)])
    let mut segs = Vec::new();
    let mut rows = 0usize;
    for s in r.segments() {
        let mut stored = vec![0u8; s.header.stored_len as usize];
        f.read_exact_at(&mut stored, s.offset + CHUNK_HEADER_BYTES as u64)
            .expect("read a segment");
        let frames: Vec<(u64, usize, usize, usize)> =
            match parse_index(&stored, s.header.raw_len as usize).expect("segment index") {
                Some(idx) => idx
                    .frames
                    .iter()
                    .map(|fr| (fr.column_id, fr.offset, fr.stored_len, fr.raw_len))
                    .collect(),
                None => vec![(0, 0, stored.len(), s.header.raw_len as usize)],
            };
        rows += s.events as usize;
        segs.push((stored, frames));
    }
    let mut dctx = zstd::bulk::Decompressor::new().expect("zstd context");
    let mut piece: Vec<u8> = Vec::new();
    let ids = col::COUNT + 1;
    let (mut best, mut best_col) = (f64::MAX, vec![f64::MAX; ids]);
    let (mut stored_col, mut raw_col) = (vec![0usize; ids], vec![0usize; ids]);
    // zstd frames, and those without sequences (literals only, raw or RLE blocks)
    let (mut frames_col, mut literal_col) = (vec![0usize; ids], vec![0usize; ids]);
    for round in 0..rounds {
        let mut t_col = vec![0f64; ids];
        let t0 = Instant::now();
        for (stored, frames) in &segs {
            for &(id, at, len, raw) in frames {
                let k = (id as usize).min(ids - 1);
                piece.clear();
                piece.reserve(raw);
                let t = Instant::now();
                dctx.decompress_to_buffer(&stored[at..at + len], &mut piece)
                    .expect("decompress a frame");
                t_col[k] += t.elapsed().as_secs_f64();
                if round == 0 {
                    stored_col[k] += len;
                    raw_col[k] += raw;
                    for z in zstd_frames(&stored[at..at + len]).expect("zstd frames") {
                        frames_col[k] += 1;
                        literal_col[k] += usize::from(frame_has_sequences(z) == Some(false));
                    }
                }
            }
        }
        best = best.min(t0.elapsed().as_secs_f64());
        for (b, t) in best_col.iter_mut().zip(&t_col) {
            *b = b.min(*t);
        }
    }
    let ns = |t: f64| t * 1e9 / rows.max(1) as f64;
    println!(
        "zstd alone, every frame: {rows} events, best of {rounds}: {:.1} M events/s ({:.2} ns/event)",
        rows as f64 / best / 1e6,
        ns(best)
    );
    for k in 0..ids {
        if raw_col[k] > 0 {
            println!(
                "  column {k}: {:.2} ns/event, {:.2} B/event raw, {:.2} stored, {} of {} zstd frames without sequences",
                ns(best_col[k]),
                raw_col[k] as f64 / rows.max(1) as f64,
                stored_col[k] as f64 / rows.max(1) as f64,
                literal_col[k],
                frames_col[k]
            );
        }
    }
}
