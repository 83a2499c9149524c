//! Writes a trace's events again with each given zstd minimum match (0: the level's own) and
//! prints, for each, bytes per event, the encoding rate and the rate of decoding every
//! column, one thread, best of five (`cargo run --release -p iodump-format --example
//! reencode -- FILE [MIN_MATCH...]`, default `0 7`). Real recordings measure what
//! synthetic ones cannot: their values are narrower.
use std::time::Instant;

use iodump_format::{EndInfo, Event, EventBatch, Reader, SegmentDecoder, Writer, WriterOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: reencode FILE [MIN_MATCH...]");
    let mut matches: Vec<u32> = args.map(|a| a.parse().expect("a minimum match")).collect();
    if matches.is_empty() {
        matches = vec![0, 7];
    }
    let r = Reader::open(&path).expect("open the trace");
    let events: Vec<Event> = r.events().collect();
    let n = events.len() as f64;
    for m in matches {
        let t0 = Instant::now();
        let opts = WriterOptions {
            zstd_min_match: m,
            ..WriterOptions::default()
        };
        let mut w = Writer::new(Vec::new(), r.header(), opts).expect("writer");
        for e in &events {
            w.push(e).expect("push");
        }
        let bytes = w.finish(EndInfo::default()).expect("finish");
        let enc_s = t0.elapsed().as_secs_f64();
        let size = bytes.len() as f64;
        let again = Reader::from_bytes(bytes).expect("read back");
        let (mut b, mut dec) = (EventBatch::default(), SegmentDecoder::new());
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = Instant::now();
            for i in 0..again.segments().len() {
                again
                    .decode_segment_into(i, &mut b, &mut dec)
                    .expect("decode");
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        println!(
            "{path}: minimum match {m}: {n} events, {:.3} B/event, encode {:.2} M events/s, decode {:.1} M events/s",
            size / n,
            n / enc_s / 1e6,
            n / best / 1e6
        );
    }
}
