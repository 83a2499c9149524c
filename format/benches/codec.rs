//! Format benchmark: bytes per event, encode and decode throughput (one thread and all
//! threads) per synthetic workload, against the original iodump's CSV and 48-byte
//! blktrace-style records measured on the same events.
//!
//! `cargo bench -p iodump-format --bench codec` (10M events per workload; set
//! `IODUMP_BENCH_EVENTS` to change it). Prints figures; asserts nothing. Each decoding figure
//! is the fastest of five passes over the trace.

use std::io::Write;
use std::time::Instant;

use iodump_format::segment::{col, Columns};
use iodump_format::*;
use iodump_synth::{self as synth, SynthParams, SynthSink, Workload};

#[derive(Default)]
struct Collect {
    devices: Vec<Device>,
    processes: Vec<Process>,
    paths: Vec<PathEntry>,
    losses: Vec<Loss>,
    events: Vec<Event>,
}

impl SynthSink for Collect {
    type Error = std::convert::Infallible;
    fn device(&mut self, d: &Device) -> Result<(), Self::Error> {
        self.devices.push(d.clone());
        Ok(())
    }
    fn process(&mut self, p: &Process) -> Result<(), Self::Error> {
        self.processes.push(p.clone());
        Ok(())
    }
    fn path(&mut self, p: &PathEntry) -> Result<(), Self::Error> {
        self.paths.push(p.clone());
        Ok(())
    }
    fn event(&mut self, e: &Event) -> Result<(), Self::Error> {
        self.events.push(*e);
        Ok(())
    }
    fn loss(&mut self, l: &Loss) -> Result<(), Self::Error> {
        self.losses.push(*l);
        Ok(())
    }
}

/// Passes over the whole trace per decode figure: the fastest one counts.
const DECODE_PASSES: usize = 5;

/// The smallest of `DECODE_PASSES` timings of `pass`.
fn best_of(mut pass: impl FnMut() -> f64) -> f64 {
    (0..DECODE_PASSES).map(|_| pass()).fold(f64::MAX, f64::min)
}

struct Counter(u64);
impl Write for Counter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The original tool's CSV (`timestamp,pid,comm,iosize,rw,lba,path`), written to `out`.
fn write_csv(c: &Collect, h: &Header, out: &mut impl Write) -> std::io::Result<()> {
    use std::collections::HashMap;
    let comm: HashMap<u32, &[u8]> = c.processes.iter().map(|p| (p.tid, &p.comm[..])).collect();
    let path: HashMap<u32, &[u8]> = c.paths.iter().map(|p| (p.path_id, &p.path[..])).collect();
    writeln!(out, "timestamp,pid,comm,iosize,rw,lba,path")?;
    for e in &c.events {
        let t = h.to_utc_ns(e.timestamp_ns);
        write!(
            out,
            "{}.{:06},{},",
            t / 1_000_000_000,
            (t % 1_000_000_000) / 1000,
            e.pid
        )?;
        out.write_all(comm.get(&e.tid).copied().unwrap_or(b"?"))?;
        write!(out, ",{},{},{:#x},", e.bytes, e.op.letter(), e.sector)?;
        out.write_all(path.get(&e.path_id).copied().unwrap_or(b"-"))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn main() {
    let n: u64 = std::env::var("IODUMP_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let threads = rayon::current_num_threads();
    println!("iodump format benchmark: {n} events per workload, {threads} rayon threads");
    println!(
        "{:<9} {:>9} {:>9} {:>10} {:>9} {:>11} {:>11} {:>11} {:>11} {:>9} {:>9}",
        "workload",
        "B/event",
        "csv B/ev",
        "csv.zst",
        "blktrace",
        "enc Mev/s",
        "dec1 Mev/s",
        "decN Mev/s",
        "dec3 Mev/s",
        "vs csv",
        "vs blk"
    );
    for w in Workload::ALL {
        let params = SynthParams {
            events: n,
            workload: w,
            seed: 42,
        };
        let mut c = Collect::default();
        synth::generate(&params, &mut c).expect("infallible");
        let header = synth::header(&params);

        // Encode: one thread, into memory; the same events once more with one frame per
        // segment (the layout before 1.5), for the size and the projection's gain.
        let encode = |opts: WriterOptions| -> (Vec<u8>, f64) {
            let t0 = Instant::now();
            let mut wr = Writer::new(Vec::with_capacity((n * 8) as usize), &header, opts).unwrap();
            for d in &c.devices {
                wr.add_device(d.clone()).unwrap();
            }
            for p in &c.processes {
                wr.add_process(p.clone()).unwrap();
            }
            for p in &c.paths {
                wr.add_path(p.clone()).unwrap();
            }
            for l in &c.losses {
                wr.add_loss(*l).unwrap();
            }
            for e in &c.events {
                wr.push(e).unwrap();
            }
            let bytes = wr.finish(EndInfo::default()).unwrap();
            (bytes, t0.elapsed().as_secs_f64())
        };
        let (bytes, enc_s) = encode(WriterOptions::default());
        let (whole, _) = encode(WriterOptions {
            column_frames: false,
            ..WriterOptions::default()
        });
        // And with one zstd frame per column, its planes not apart (format 1.5's layout).
        let (v15, enc15_s) = encode(WriterOptions {
            plane_frames: false,
            ..WriterOptions::default()
        });
        // And with plane frames always from zstd's match finder (1.6's first writer, before
        // literals-only planes).
        let (lz, enclz_s) = encode(WriterOptions {
            literal_planes: false,
            ..WriterOptions::default()
        });
        let file_bytes = bytes.len() as u64;
        let whole_bytes = whole.len() as u64;
        let v15_bytes = v15.len() as u64;
        let lz_bytes = lz.len() as u64;

        let r = Reader::from_bytes(bytes).unwrap();
        let rw = Reader::from_bytes(whole).unwrap();
        let rm = Reader::from_bytes(v15).unwrap();
        let rl = Reader::from_bytes(lz).unwrap();
        // Decode, one thread: every column, and three columns (what top files reads: path
        // id, bytes, latency). Each figure is the fastest of `DECODE_PASSES` passes over the
        // whole trace (the host's other work only ever slows a pass down).
        let dec1_pass = |r: &Reader| {
            let t0 = Instant::now();
            let mut decoded = 0u64;
            r.for_each_segment(|_, b| decoded += b.unwrap().len() as u64);
            assert_eq!(decoded, n);
            t0.elapsed().as_secs_f64()
        };
        let want = Columns::of(&[col::PATH_ID, col::BYTES, col::LATENCY_NS]);
        let dec3_pass = |r: &Reader| {
            let t0 = Instant::now();
            let mut b = EventBatch::default();
            let mut dec = SegmentDecoder::new();
            let mut projected = 0u64;
            for i in 0..r.segments().len() {
                r.decode_segment_projected(i, want, &mut b, &mut dec)
                    .unwrap();
                projected += b.len() as u64;
            }
            assert_eq!(projected, n);
            t0.elapsed().as_secs_f64()
        };
        let dec1 = |r: &Reader| best_of(|| dec1_pass(r));
        let dec3 = |r: &Reader| best_of(|| dec3_pass(r));
        // This trace with the loops the CPU allows and with the baseline loops (what a CPU
        // without AVX2 runs, `simd::use_x86_64_v3`), their passes alternated so that both
        // meet the same moments of the host's noise.
        let (mut dec1_s, mut dec3_s, mut dec1b_s, mut dec3b_s) =
            (f64::MAX, f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..DECODE_PASSES {
            for wide in [true, false] {
                iodump_format::simd::use_x86_64_v3(wide);
                let (d1, d3) = (dec1_pass(&r), dec3_pass(&r));
                let (b1, b3) = if wide {
                    (&mut dec1_s, &mut dec3_s)
                } else {
                    (&mut dec1b_s, &mut dec3b_s)
                };
                *b1 = b1.min(d1);
                *b3 = b3.min(d3);
            }
        }
        iodump_format::simd::use_x86_64_v3(true);
        // Decode, all threads.
        let decn_s = best_of(|| {
            let t0 = Instant::now();
            let total: u64 = r
                .par_map_segments(|_, b| b.len() as u64)
                .into_iter()
                .map(|(_, x)| x.unwrap())
                .sum();
            assert_eq!(total, n);
            t0.elapsed().as_secs_f64()
        });
        let dec3w_s = dec3(&rw);
        // Every column from another layout, one thread.
        let dec1w_s = dec1(&rw);
        // Every column and three, 1.5's layout and plane frames without literals only.
        let (dec1m_s, dec3m_s) = (dec1(&rm), dec3(&rm));
        let (dec1l_s, dec3l_s) = (dec1(&rl), dec3(&rl));
        // The two other layouts against the default: bytes per event, their ratio, rates.
        let variant = |what: &str, bytes: u64, dec1_s: f64, dec3_s: f64| {
            println!(
                "{:<9} {what}: {:.2} B/event (default / this {:.4}); dec1 {:.1} Mev/s, dec3 {:.1} Mev/s",
                w.name(),
                bytes as f64 / n as f64,
                file_bytes as f64 / bytes as f64,
                n as f64 / dec1_s / 1e6,
                n as f64 / dec3_s / 1e6,
            )
        };
        variant("one frame per column (1.5)", v15_bytes, dec1m_s, dec3m_s);
        println!(
            "{:<9} one frame per column (1.5): encode {:.2} Mev/s",
            w.name(),
            n as f64 / enc15_s / 1e6
        );
        variant("one frame per segment", whole_bytes, dec1w_s, dec3w_s);
        variant(
            "this trace, baseline loops (no AVX2)",
            file_bytes,
            dec1b_s,
            dec3b_s,
        );
        variant(
            "planes without literals-only frames",
            lz_bytes,
            dec1l_s,
            dec3l_s,
        );
        println!(
            "{:<9} planes without literals-only frames: encode {:.2} Mev/s",
            w.name(),
            n as f64 / enclz_s / 1e6
        );

        let mut csv = Counter(0);
        write_csv(&c, &header, &mut csv).unwrap();
        let mut zcsv = zstd::Encoder::new(Counter(0), 3).unwrap();
        write_csv(&c, &header, &mut zcsv).unwrap();
        let zcsv = zcsv.finish().unwrap().0;

        let bpe = file_bytes as f64 / n as f64;
        let nf = n as f64;
        println!(
            "{:<9} {:>9.2} {:>9.1} {:>10.2} {:>9} {:>11.1} {:>11.1} {:>11.1} {:>11.1} {:>8.1}x {:>8.1}x",
            w.name(),
            bpe,
            csv.0 as f64 / nf,
            zcsv as f64 / nf,
            48,
            nf / enc_s / 1e6,
            nf / dec1_s / 1e6,
            nf / decn_s / 1e6,
            nf / dec3_s / 1e6,
            csv.0 as f64 / file_bytes as f64,
            48.0 * nf / file_bytes as f64,
        );
    }
    println!();
    println!(
        "B/event: .iod file bytes per event. csv: the original iodump's CSV; csv.zst: that CSV"
    );
    println!(
        "through zstd -3. blktrace: one 48-byte blk_io_trace record per event (blktrace writes one"
    );
    println!("per action, so >= 2 per I/O). enc: Writer, 1 thread. dec1: decode every segment to columns,");
    println!(
        "1 thread; decN: the same with rayon over all threads. vs: how many times smaller .iod is."
    );
    println!(
        "dec3: decode three columns (path id, bytes, latency: what top files reads), 1 thread."
    );
    println!("Every decode figure is the fastest of {DECODE_PASSES} passes; the decoding loops are those the");
    println!("CPU allows (x86-64-v3, AVX-512), \"baseline loops\" those of a CPU without AVX2.");
    println!("Targets: dec1 >= 40 Mev/s, dec3 >= 100 Mev/s (issue 28).");
}
