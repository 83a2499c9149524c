//! Writes a trace's events again with each given setting and prints, for each, bytes per
//! event, the encoding rate and the rate of decoding every column, one thread, best of five
//! (`cargo run --release -p iodump-format --example reencode -- FILE [SETTING...]`, default
//! `7 7:columns`). A setting is a zstd minimum match (0: the level's own), optionally
//! followed by `:columns` for one zstd frame per column (format 1.5's layout) instead of one
//! per plane, or by `:lz` for plane frames always from zstd's match finder (no
//! literals-only frames, `WriterOptions::literal_planes` off). Real recordings measure what
//! synthetic ones cannot: their values are narrower.
//! With `KEEP=DIR` each rewritten trace is also saved as `DIR/SETTING.iod` (for
//! `decode_time`); `SEGMENT_EVENTS=N` writes segments of N events (default 65,536).
use std::time::Instant;

use iodump_format::{EndInfo, Event, EventBatch, Reader, SegmentDecoder, Writer, WriterOptions};

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: reencode FILE [SETTING...]");
    let mut settings: Vec<String> = args.collect();
    if settings.is_empty() {
        settings = vec!["7".into(), "7:columns".into()];
    }
    let r = Reader::open(&path).expect("open the trace");
    let events: Vec<Event> = r.events().collect();
    let n = events.len() as f64;
    for setting in settings {
        let (m, layout) = setting.split_once(':').unwrap_or((&setting, "planes"));
        let m: u32 = m.parse().expect("a minimum match");
        let t0 = Instant::now();
        let opts = WriterOptions {
            zstd_min_match: m,
            plane_frames: match layout {
                "planes" | "lz" => true,
                "columns" => false,
                other => panic!("layout {other}: planes, lz or columns"),
            },
            literal_planes: layout == "planes",
            segment_events: std::env::var("SEGMENT_EVENTS")
                .ok()
                .map_or(65_536, |v| v.parse().expect("SEGMENT_EVENTS: a number")),
            ..WriterOptions::default()
        };
        let mut w = Writer::new(Vec::new(), r.header(), opts).expect("writer");
        for e in &events {
            w.push(e).expect("push");
        }
        let bytes = w.finish(EndInfo::default()).expect("finish");
        let enc_s = t0.elapsed().as_secs_f64();
        let size = bytes.len() as f64;
        if let Some(dir) = std::env::var_os("KEEP") {
            let to = std::path::Path::new(&dir).join(format!("{setting}.iod"));
            std::fs::write(&to, &bytes).expect("write the rewritten trace");
        }
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
            "{path}: minimum match {m}, frames per {layout}: {n} events, {:.3} B/event, encode {:.2} M events/s, decode {:.1} M events/s",
            size / n,
            n / enc_s / 1e6,
            n / best / 1e6
        );
    }
}
