//! Times the two halves of decoding a trace's segments, one thread: zstd decompression and
//! column decoding (`cargo run --release -p iodump-format --example decode_split -- FILE`).
use std::time::Instant;

use iodump_format::chunk::{self, ChunkType, CHUNK_HEADER_BYTES};
use iodump_format::segment::{decode_segment_into, DecodeScratch};
use iodump_format::EventBatch;

fn main() {
    let path = std::env::args().nth(1).expect("usage: decode_split FILE");
    let bytes = std::fs::read(&path).expect("read the trace");
    let r = iodump_format::Reader::from_bytes(bytes.clone()).expect("open the trace");
    let chunks: Vec<_> = r
        .chunks()
        .iter()
        .filter(|c| c.header.kind == ChunkType::Events)
        .copied()
        .collect();
    let mut dctx = zstd::bulk::Decompressor::new().unwrap();
    let mut raws: Vec<Vec<u8>> = vec![Vec::new(); chunks.len()];
    let mut t_z = 0.0;
    for round in 0..2 {
        let t0 = Instant::now();
        for (c, raw) in chunks.iter().zip(raws.iter_mut()) {
            let s =
                &bytes[c.offset as usize + CHUNK_HEADER_BYTES..][..c.header.stored_len as usize];
            chunk::decompress_into(&c.header, s, raw, &mut dctx).unwrap();
        }
        if round == 1 {
            t_z = t0.elapsed().as_secs_f64();
        }
    }
    let mut batch = EventBatch::default();
    let mut scratch = DecodeScratch::default();
    let mut n = 0;
    let mut t_d = 0.0;
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    for round in 0..rounds {
        n = 0;
        let t0 = Instant::now();
        for r in &raws {
            decode_segment_into(r, &mut batch, &mut scratch).unwrap();
            n += batch.len();
        }
        if round == rounds - 1 {
            t_d = t0.elapsed().as_secs_f64();
        }
    }
    let raw_bytes: usize = raws.iter().map(|r| r.len()).sum();
    println!(
        "{n} events, raw {:.1} B/event: zstd {:.1} Mev/s ({:.0} MB/s out), columns {:.1} Mev/s, both {:.1} Mev/s",
        raw_bytes as f64 / n as f64,
        n as f64 / t_z / 1e6,
        raw_bytes as f64 / t_z / 1e6,
        n as f64 / t_d / 1e6,
        n as f64 / (t_z + t_d) / 1e6
    );
}
