//! Prints, per column, the encoded and the separately zstd-compressed bytes per event of a
//! trace's segments, to see where the bytes go:
//! `cargo run --release -p iodump-format --example colsize -- FILE`.
use iodump_format::bytes::Cursor;
use iodump_format::chunk::{self, ChunkType, CHUNK_HEADER_BYTES};
use iodump_format::Reader;

const NAMES: [&str; 17] = [
    "",
    "timestamp",
    "dev",
    "sector",
    "bytes",
    "op",
    "flags",
    "pid",
    "tid",
    "path_id",
    "queue_ns",
    "latency_ns",
    "error",
    "cpu",
    "syscall",
    "dirtier",
    "cgroup",
];

fn main() {
    let path = std::env::args().nth(1).expect("usage: colsize FILE");
    let bytes = std::fs::read(&path).expect("read the trace");
    let r = Reader::open(&path).expect("open the trace");
    let mut raw_by = [0usize; 17];
    let mut z_by = [0usize; 17];
    let mut transform = [0u8; 17];
    let mut n = 0usize;
    for c in r
        .chunks()
        .iter()
        .filter(|c| c.header.kind == ChunkType::Events)
    {
        let s = &bytes[c.offset as usize + CHUNK_HEADER_BYTES..][..c.header.stored_len as usize];
        let raw = chunk::decompress(&c.header, s).expect("intact segment");
        let mut cur = Cursor::new(&raw);
        n += cur.varint().unwrap() as usize;
        let ncols = cur.varint().unwrap();
        for _ in 0..ncols {
            let id = cur.varint().unwrap() as usize;
            let len = cur.varint().unwrap() as usize;
            let block = cur.take(len).unwrap();
            if id < NAMES.len() {
                raw_by[id] += len;
                z_by[id] += zstd::bulk::compress(block, 3).unwrap().len();
                transform[id] = block.get(1).copied().unwrap_or(0);
            }
        }
    }
    println!(
        "{:<11} {:>8} {:>8}  last transform",
        "column", "raw B/ev", "zstd B/ev"
    );
    for id in 1..NAMES.len() {
        println!(
            "{:<11} {:>8.2} {:>8.2}  {}",
            NAMES[id],
            raw_by[id] as f64 / n as f64,
            z_by[id] as f64 / n as f64,
            transform[id]
        );
    }
    println!("file bytes/event {:.2}", bytes.len() as f64 / n as f64);
}
