//! Times decoding a trace's segments on one thread, every column and some projections, and
//! the columns of ids `IDS` (comma-separated, as `schemas/iod-format.md` §4.2 numbers them)
//! when given (`cargo run --release -p iodump-format --example decode_time -- FILE [ROUNDS
//! [IDS]]`).
use std::time::Instant;

use iodump_format::segment::{col, Columns};
use iodump_format::{EventBatch, Reader, SegmentDecoder};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: decode_time FILE [ROUNDS [IDS]]");
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
}
