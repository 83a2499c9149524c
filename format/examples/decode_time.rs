//! Times decoding a trace's segments on one thread, every column and some projections
//! (`cargo run --release -p iodump-format --example decode_time -- FILE [ROUNDS]`).
use std::time::Instant;

use iodump_format::segment::{col, Columns};
use iodump_format::{EventBatch, Reader, SegmentDecoder};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: decode_time FILE [ROUNDS]");
    let rounds: usize = std::env::args()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let r = Reader::open(&path).expect("open the trace");
    let mut b = EventBatch::default();
    let mut dec = SegmentDecoder::new();
    for (name, want) in [
        ("every column", Columns::ALL),
        (
            "path id, bytes, latency",
            Columns::of(&[col::PATH_ID, col::BYTES, col::LATENCY_NS]),
        ),
        (
            "path id, bytes, op (top files' first pass)",
            Columns::of(&[col::PATH_ID, col::BYTES, col::OP]),
        ),
        (
            "the nine columns `iodump diff` reads",
            Columns::of(&[
                col::DEV,
                col::SECTOR,
                col::BYTES,
                col::OP,
                col::PID,
                col::TID,
                col::PATH_ID,
                col::QUEUE_NS,
                col::LATENCY_NS,
            ]),
        ),
    ] {
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
}
