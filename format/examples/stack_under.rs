//! Writes a trace again as if every I/O had gone through a stacked device: each event becomes
//! an I/O on `dm-0` (253:0, bio-based) and, 1 ns later, the same I/O on its own device naming
//! it (`upper`), with the trace's tables (devices, processes, paths, cgroups) copied. For
//! measuring what counting each I/O once costs (`bench/analyze-stacked.sh`):
//! `cargo run --release -p iodump-format --example stack_under -- IN OUT [--no-table]`.
//! With `--no-table`, dm-0's device-table entry has no label and nothing it is stacked on, so
//! readers do not look for stacked I/O (every layer counted): the same events, the rule off.
use iodump_format::{DevT, Device, EndInfo, Reader, UpperIo, Writer, WriterOptions};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (input, output) = match &args[..] {
        [i, o] | [i, o, _] => (i, o),
        _ => panic!("usage: stack_under IN OUT [--no-table]"),
    };
    let table = args.get(2).map(String::as_str) != Some("--no-table");
    let r = Reader::open(input).expect("open the trace");
    let out = std::fs::File::create(output).expect("create the output");
    let mut w = Writer::new(out, r.header(), WriterOptions::default()).expect("writer");
    let dm = DevT::new(253, 0);
    let below: Vec<DevT> = r.tables().devices().map(|d| d.dev).collect();
    for d in r.tables().devices() {
        w.add_device(d.clone()).expect("device");
    }
    w.add_device(Device {
        dev: dm,
        name: "dm-0".into(),
        partition_of: None,
        sector_size: 512,
        start_sector: 0,
        bio_based: true,
        label: if table { "bench".into() } else { String::new() },
        stacked_on: if table { below } else { Vec::new() },
    })
    .expect("dm-0");
    for p in r.tables().processes() {
        w.add_process(p.clone()).expect("process");
    }
    for p in r.tables().paths() {
        w.add_path(p.clone()).expect("path");
    }
    for c in r.tables().cgroups() {
        w.add_cgroup(c.clone()).expect("cgroup");
    }
    let mut n = 0u64;
    for e in r.events() {
        let mut up = e;
        up.dev = dm;
        up.queue_ns = None;
        w.push(&up).expect("push");
        let mut low = e;
        low.timestamp_ns += 1;
        low.upper = Some(UpperIo {
            dev: dm,
            timestamp_ns: e.timestamp_ns,
        });
        w.push(&low).expect("push");
        n += 1;
    }
    w.finish(EndInfo::default()).expect("finish");
    println!("{output}: {} events ({n} I/Os on dm-0 and below)", 2 * n);
}
