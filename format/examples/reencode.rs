//! Rewrites a trace with another segment size and zstd level, to compare encodings:
//! `cargo run --release -p iodump-format --example reencode -- IN OUT SEGMENT_EVENTS [LEVEL]`.
use iodump_format::{Reader, Writer, WriterOptions};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (input, output) = (&a[1], &a[2]);
    let segment_events: usize = a[3].parse().expect("SEGMENT_EVENTS");
    let zstd_level: i32 = a.get(4).map_or(3, |l| l.parse().expect("LEVEL"));
    let r = Reader::open(input).expect("open input");
    let f = std::fs::File::create(output).expect("create output");
    let opts = WriterOptions {
        segment_events,
        zstd_level,
        ..WriterOptions::default()
    };
    let mut w = Writer::new(f, r.header(), opts).unwrap();
    for d in r.tables().devices() {
        w.add_device(d.clone()).unwrap();
    }
    for p in r.tables().processes() {
        w.add_process(p.clone()).unwrap();
    }
    for p in r.tables().paths() {
        w.add_path(p.clone()).unwrap();
    }
    for l in r.losses() {
        w.add_loss(*l).unwrap();
    }
    for e in r.events() {
        w.push(&e).unwrap();
    }
    w.finish(r.end().cloned().unwrap_or_default()).unwrap();
}
