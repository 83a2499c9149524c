//! `iodump report` and `iodump plot`: the data embedded in the HTML is checked against plain
//! counts over the reader, every plot kind is drawn as SVG and PNG, bad input gives one error
//! line, and the page is opened in headless Chromium (skipped without it unless
//! `IODUMP_REQUIRE_CHROMIUM=1`, as CI sets) which must draw every plot without a JavaScript
//! error. One test records a real workload (needs BPF, see tests/record.rs).
#![cfg(feature = "analyze")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use iodump_format::{Event, Op, Reader};
use serde_json::Value;

mod common;

use common::{bin, bpf_available, chromium, headless, ok, run, TempDir};

const PLOTS: [&str; 8] = [
    "summary",
    "iops",
    "throughput",
    "latency-heatmap",
    "offset",
    "latency-histogram",
    "top-procs",
    "top-files",
];

fn synth(dir: &TempDir, name: &str, events: u64, workload: &str, seed: u64) -> PathBuf {
    let p = dir.join(name);
    let out = run(bin()
        .args(["synth", "-o"])
        .arg(&p)
        .args(["--events", &events.to_string(), "--workload", workload])
        .args(["--seed", &seed.to_string(), "--segment-events", "4096"]));
    ok(&out);
    p
}

fn report(files: &[&Path], out: &Path) -> std::process::Output {
    run(bin().arg("report").args(files).arg("-o").arg(out))
}

/// Two traces or more, one section each (two are otherwise compared).
fn report_sections(files: &[&Path], out: &Path) -> std::process::Output {
    run(bin()
        .arg("report")
        .args(files)
        .arg("--sections")
        .arg("-o")
        .arg(out))
}

/// The JSON object embedded in the page.
fn embedded(html: &str) -> Value {
    common::embedded_report_data(html)
}

fn sum(v: &Value) -> u64 {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .sum()
}

/// Plain per-trace counts over the reader's events.
struct Truth {
    events: u64,
    per_dev: HashMap<String, (u64, u64)>,
    /// Events with data (bytes > 0), per device name.
    data_per_dev: HashMap<String, u64>,
    per_pid: HashMap<u32, u64>,
    per_path: HashMap<u32, u64>,
    max_latency_ns: u64,
}

fn truth(path: &Path) -> Truth {
    truth_of(path, &|_| true)
}

/// [`Truth`] of the events `keep` keeps.
fn truth_of(path: &Path, keep: &dyn Fn(&Event) -> bool) -> Truth {
    let r = Reader::open(path).unwrap();
    let names: HashMap<u32, String> = r
        .tables()
        .devices()
        .map(|d| (d.dev.0, d.name.clone()))
        .collect();
    let mut t = Truth {
        events: 0,
        per_dev: HashMap::new(),
        data_per_dev: HashMap::new(),
        per_pid: HashMap::new(),
        per_path: HashMap::new(),
        max_latency_ns: 0,
    };
    for e in r.events().filter(|e| keep(e)) {
        t.events += 1;
        let name = names
            .get(&e.dev.0)
            .cloned()
            .unwrap_or_else(|| e.dev.to_string());
        let d = t.per_dev.entry(name.clone()).or_default();
        d.0 += 1;
        d.1 += e.bytes as u64;
        if e.bytes > 0 {
            *t.data_per_dev.entry(name).or_default() += 1;
        }
        *t.per_pid.entry(e.pid).or_default() += 1;
        if e.path_id != 0 {
            *t.per_path.entry(e.path_id).or_default() += 1;
        }
        t.max_latency_ns = t.max_latency_ns.max(e.latency_ns);
    }
    t
}

/// Checks one trace's JSON against the reader.
fn check_trace(tr: &Value, path: &Path) {
    check_trace_of(tr, path, None);
}

/// Checks one trace's JSON against the reader's events that `keep` keeps (all without it):
/// the time axis spans those, and the loss records are those of that time.
fn check_trace_of(tr: &Value, path: &Path, keep: Option<&dyn Fn(&Event) -> bool>) {
    let t = truth_of(path, keep.unwrap_or(&|_| true));
    let r = Reader::open(path).unwrap();
    assert_eq!(tr["events"].as_u64(), Some(t.events), "events");
    assert!(t.events > 0);
    let losses: Vec<_> = match keep {
        None => r.losses().to_vec(),
        Some(keep) => {
            let kept: Vec<u64> = r
                .events()
                .filter(|e| keep(e))
                .map(|e| e.timestamp_ns)
                .collect();
            let (t0, t1) = (*kept.iter().min().unwrap(), *kept.iter().max().unwrap());
            assert_eq!(tr["first_timestamp_ns"].as_u64(), Some(t0));
            assert_eq!(tr["span_ns"].as_u64(), Some(t1 - t0));
            r.losses()
                .iter()
                .filter(|l| l.end_ns >= t0 && l.start_ns <= t1)
                .cloned()
                .collect()
        }
    };
    let lost: u64 = losses.iter().map(|l| l.count).sum();
    assert_eq!(tr["lost_events"].as_u64(), Some(lost));
    assert_eq!(tr["losses"].as_array().unwrap().len(), losses.len());

    // Devices.
    for d in tr["devices"].as_array().unwrap() {
        let name = d["name"].as_str().unwrap();
        let want = t.per_dev.get(name).copied().unwrap_or_default();
        assert_eq!(
            (d["events"].as_u64().unwrap(), d["bytes"].as_u64().unwrap()),
            want,
            "device {name}"
        );
    }
    assert_eq!(tr["devices"].as_array().unwrap().len(), t.per_dev.len());

    // IOPS and throughput series: per device, the counts add up to the device's I/Os.
    let bins = tr["time"]["bins"].as_u64().unwrap() as usize;
    let mut series_ios: HashMap<String, (u64, u64)> = HashMap::new();
    for s in tr["series"].as_array().unwrap() {
        assert_eq!(s["ios"].as_array().unwrap().len(), bins);
        assert_eq!(s["bytes"].as_array().unwrap().len(), bins);
        let e = series_ios
            .entry(s["device"].as_str().unwrap().to_string())
            .or_default();
        e.0 += sum(&s["ios"]);
        e.1 += sum(&s["bytes"]);
    }
    assert_eq!(series_ios, t.per_dev, "series per device");
    // The time bins cover the trace.
    let bin_ns = tr["time"]["bin_ns"].as_u64().unwrap();
    assert!(bin_ns * bins as u64 > tr["span_ns"].as_u64().unwrap());

    // Latency heatmap and histogram count every I/O once.
    let hm = &tr["heatmap"];
    let lat_bins = hm["latency_edges_ns"].as_array().unwrap().len() - 1;
    let mut heat_total = 0;
    for c in hm["counts"].as_array().unwrap() {
        assert_eq!(
            c.as_array().unwrap().len(),
            hm["time_bins"].as_u64().unwrap() as usize * lat_bins
        );
        heat_total += sum(c);
    }
    assert_eq!(heat_total, t.events, "heatmap total");
    let edges = hm["latency_edges_ns"].as_array().unwrap();
    assert!(edges.windows(2).all(|w| w[0].as_u64() < w[1].as_u64()));
    assert!(edges.last().unwrap().as_u64().unwrap() > t.max_latency_ns);
    let hist = &tr["latency_histogram"];
    let hist_total: u64 = ["read", "write", "other"]
        .iter()
        .map(|c| sum(&hist["counts"][*c]))
        .sum();
    assert_eq!(hist_total, t.events, "histogram total");
    assert_eq!(tr["latency"]["max_ns"].as_u64(), Some(t.max_latency_ns));
    let p50 = tr["latency"]["p50_ns"].as_u64().unwrap();
    let p99 = tr["latency"]["p99_ns"].as_u64().unwrap();
    assert!(p50 <= p99 && p99 <= t.max_latency_ns);

    // Offsets: every I/O with data on the devices shown, inside the grid.
    let offsets = tr["offsets"].as_array().unwrap();
    assert!(!offsets.is_empty());
    for o in offsets {
        let name = o["device"].as_str().unwrap();
        let (tb, ob) = (
            o["time_bins"].as_u64().unwrap(),
            o["offset_bins"].as_u64().unwrap(),
        );
        let mut n = 0;
        for c in ["read", "write", "other"] {
            let cells = o["cells"][c].as_array().unwrap();
            assert_eq!(cells.len() % 3, 0);
            for cell in cells.chunks(3) {
                assert!(cell[0].as_u64().unwrap() < tb && cell[1].as_u64().unwrap() < ob);
                n += cell[2].as_u64().unwrap();
            }
        }
        assert_eq!(n, t.data_per_dev[name], "offset cells of {name}");
        let per_bin = o["sectors_per_bin"].as_u64().unwrap();
        assert!(per_bin * ob >= o["max_end_sector"].as_u64().unwrap() / 2);
    }

    // Top processes and files: the counts and the order of a plain count.
    let procs = tr["top_processes"].as_array().unwrap();
    assert!(!procs.is_empty());
    let mut want: Vec<(u32, u64)> = t.per_pid.iter().map(|(&k, &v)| (k, v)).collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (p, w) in procs.iter().zip(&want) {
        assert_eq!(p["pid"].as_u64(), Some(w.0 as u64));
        assert_eq!(p["ios"].as_u64(), Some(w.1));
    }
    assert_eq!(tr["process_count"].as_u64(), Some(t.per_pid.len() as u64));
    let files = tr["top_files"].as_array().unwrap();
    let mut want: Vec<(u32, u64)> = t.per_path.iter().map(|(&k, &v)| (k, v)).collect();
    want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (f, w) in files.iter().zip(&want) {
        assert_eq!(f["ios"].as_u64(), Some(w.1));
        let path = r.tables().path(w.0).unwrap();
        assert_eq!(
            f["path"].as_str().unwrap(),
            iodump_format::text::text_string(&path.path)
        );
    }
    assert_eq!(files.len(), want.len().min(20));
}

fn assert_self_contained(html: &str) {
    let lower = html.to_ascii_lowercase();
    for bad in [
        "<link",
        "<script src",
        "src=\"http",
        "href=\"http",
        "@import",
        "url(http",
    ] {
        assert!(
            !lower.contains(bad),
            "page loads something from outside: {bad}"
        );
    }
}

#[test]
fn report_data_matches_the_trace() {
    let d = TempDir::new("report-data");
    let a = synth(&d, "mixed.iod", 60_000, "mixed", 3);
    let b = synth(&d, "oltp.iod", 30_000, "oltp", 4);
    let out = d.join("r.html");
    let o = report_sections(&[&a, &b], &out);
    ok(&o);
    let html = std::fs::read_to_string(&out).unwrap();
    assert_self_contained(&html);
    let data = embedded(&html);
    assert_eq!(data["schema"], "iodump-report/1");
    let traces = data["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 2);
    assert_eq!(traces[0]["name"], "mixed.iod");
    assert_eq!(traces[1]["name"], "oltp.iod");
    check_trace(&traces[0], &a);
    check_trace(&traces[1], &b);
    // Each plot's drawing code is in the page.
    for p in PLOTS {
        assert!(html.contains(&format!("\"{p}\"")), "plot {p}");
    }
}

/// `report --filter`: the page is of the I/Os the filter keeps — a window of time of a
/// recording (the segments outside it not decoded) and writes only — every figure checked
/// against a plain count of those I/Os; the filter and what it left out are on the page. A
/// filter that keeps nothing warns; `--filter-a` stays for the comparison of two traces.
#[test]
fn a_filter_reports_the_ios_it_keeps() {
    let d = TempDir::new("report-filter");
    let synthetic = synth(&d, "synth.iod", 100_000, "mixed", 8);
    // The same I/Os with loss records at 10%, 40% and 90% of the time: only the second is
    // of the window's time.
    let src = d.join("mixed.iod");
    {
        let r = Reader::open(&synthetic).unwrap();
        let mut w = common::writer_like(&r, &src, 4096);
        let events: Vec<Event> = r.events().collect();
        let mut ts: Vec<u64> = events.iter().map(|e| e.timestamp_ns).collect();
        ts.sort_unstable();
        let mut losses: Vec<u64> = [10, 40, 90]
            .iter()
            .map(|p| ts[ts.len() * p / 100])
            .collect();
        for e in &events {
            if losses.first().is_some_and(|&t| e.timestamp_ns >= t) {
                let t = losses.remove(0);
                w.add_loss(iodump_format::Loss {
                    cpu: 0,
                    reason: iodump_format::LossReason::RingBufferFull,
                    count: 7,
                    start_ns: t,
                    end_ns: t + 1000,
                })
                .unwrap();
            }
            w.push(e).unwrap();
        }
        w.finish(iodump_format::EndInfo::default()).unwrap();
    }
    let r = Reader::open(&src).unwrap();
    assert_eq!(r.losses().len(), 3);
    let h = r.header().clone();
    let mut utc: Vec<i64> = r.events().map(|e| h.to_utc_ns(e.timestamp_ns)).collect();
    utc.sort_unstable();
    let (from, to) = (utc[utc.len() / 4], utc[utc.len() * 3 / 5]);
    let keep = |e: &Event| {
        let t = h.to_utc_ns(e.timestamp_ns);
        t >= from && t < to && e.op == Op::Write
    };
    let filter = format!(
        "time >= {} && time < {} && rw == W",
        iodump_format::summary::rfc3339_utc(from),
        iodump_format::summary::rfc3339_utc(to)
    );
    let out = d.join("window.html");
    let o = run(bin()
        .arg("report")
        .arg(&src)
        .args(["--filter", &filter, "-o"])
        .arg(&out));
    ok(&o);
    let html = std::fs::read_to_string(&out).unwrap();
    let data = embedded(&html);
    let tr = &data["traces"][0];
    check_trace_of(tr, &src, Some(&keep));
    assert_eq!(tr["lost_events"], 7, "the loss record of the window's time");
    let kept = r.events().filter(|e| keep(e)).count() as u64;
    assert!(kept > 1000 && kept < 100_000 / 2, "{kept}");
    assert_eq!(tr["filter"]["expression"], filter.as_str());
    assert_eq!(tr["filter"]["left_out"].as_u64(), Some(100_000 - kept));
    // The same window drawn by plot.
    let svg = d.join("window.svg");
    ok(&run(bin()
        .args(["plot", "--kind", "iops", "--filter", &filter])
        .arg(&src)
        .arg("-o")
        .arg(&svg)));
    let o = run(bin()
        .args(["plot", "--kind", "iops", "--filter", "pid == 0 && pid == 1"])
        .arg(&src)
        .arg("-o")
        .arg(d.join("none.svg")));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("keeps no I/O, nothing to plot") && err.lines().count() == 1,
        "{err}"
    );
    // Nothing kept: the page says so, and a warning.
    let o = run(bin()
        .arg("report")
        .arg(&src)
        .args(["--filter", "time < 2000-01-01T00:00:00Z", "-o"])
        .arg(d.join("none.html")));
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the filter kept no I/O"), "{err}");
    let none = embedded(&std::fs::read_to_string(d.join("none.html")).unwrap());
    assert_eq!(none["traces"][0]["events"], 0);
    assert_eq!(none["traces"][0]["filter"]["left_out"], 100_000);
    // A bad filter and --filter-a of one trace are usage errors.
    for args in [["--filter", "time < yesterday"], ["--filter-a", "rw == W"]] {
        let o = run(bin()
            .arg("report")
            .arg(&src)
            .args(args)
            .arg("-o")
            .arg(d.join("bad.html")));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        assert!(!d.join("bad.html").exists());
    }
}

#[test]
fn report_of_a_large_trace_stays_small() {
    let d = TempDir::new("report-size");
    let a = synth(&d, "big.iod", 400_000, "randread", 5);
    let out = d.join("r.html");
    let o = report(&[&a], &out);
    ok(&o);
    let size = std::fs::metadata(&out).unwrap().len();
    // Binned: the page does not grow with the I/Os (400k I/Os would be tens of MB as points).
    assert!(size < 3_000_000, "report is {size} bytes");
    let data = embedded(&std::fs::read_to_string(&out).unwrap());
    assert_eq!(data["traces"][0]["events"].as_u64(), Some(400_000));
}

#[test]
fn bad_input_gives_one_error_line() {
    let d = TempDir::new("report-bad");
    let missing = d.join("missing.iod");
    let not_trace = d.join("text.iod");
    std::fs::write(&not_trace, "hello, not a trace\n").unwrap();
    let out = d.join("r.html");
    for f in [&missing, &not_trace] {
        for cmd in [
            vec!["report".to_string()],
            vec!["plot".into(), "--kind".into(), "iops".into()],
        ] {
            let mut c = bin();
            c.args(&cmd).arg(f).arg("-o");
            c.arg(if cmd[0] == "plot" {
                d.join("p.svg")
            } else {
                out.clone()
            });
            let o = run(&mut c);
            assert_eq!(o.status.code(), Some(1), "{cmd:?} {}", f.display());
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
            assert!(err.starts_with("iodump: error:"), "{err}");
        }
    }
    // Unwritable output.
    let a = synth(&d, "ok.iod", 2000, "oltp", 1);
    let o = report(&[&a], &d.join("no/such/dir/r.html"));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr)
            .trim_end()
            .lines()
            .count(),
        1
    );
    // Wrong plot extension, unknown device, unknown kind.
    let o = run(bin()
        .args(["plot", "--kind", "iops"])
        .arg(&a)
        .arg("-o")
        .arg(d.join("p.jpg")));
    assert_eq!(o.status.code(), Some(2), "a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).contains(".svg or .png"));
    let o = run(bin()
        .args(["plot", "--kind", "offset", "--device", "nope0"])
        .arg(&a)
        .arg("-o")
        .arg(d.join("p.svg")));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nope0"));
    let o = run(bin()
        .args(["plot", "--kind", "pie"])
        .arg(&a)
        .arg("-o")
        .arg(d.join("p.svg")));
    assert_eq!(o.status.code(), Some(2));
}

/// A trace with a damaged segment in the middle and a cut tail.
fn damaged_copy(src: &Path, dst: &Path) -> u64 {
    let mut bytes = std::fs::read(src).unwrap();
    let r = Reader::open(src).unwrap();
    let segs = r.segments();
    assert!(segs.len() >= 4);
    // Flip bytes in the payload of the second segment.
    let at = (segs[1].offset + 40) as usize;
    for b in &mut bytes[at..at + 16] {
        *b ^= 0x5a;
    }
    // Cut in the middle of the last segment.
    let last = segs[segs.len() - 1];
    bytes.truncate((last.offset + last.chunk_bytes / 2) as usize);
    std::fs::write(dst, &bytes).unwrap();
    (segs[1].events + last.events) as u64
}

#[test]
fn damaged_traces_report_what_can_be_decoded() {
    let d = TempDir::new("report-damaged");
    let a = synth(&d, "ok.iod", 40_000, "mixed", 2);
    let bad = d.join("bad.iod");
    let missing = damaged_copy(&a, &bad);
    let out = d.join("r.html");
    let o = report(&[&bad], &out);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning") && err.contains("damaged"), "{err}");
    let data = embedded(&std::fs::read_to_string(&out).unwrap());
    let tr = &data["traces"][0];
    assert_eq!(tr["events"].as_u64(), Some(40_000 - missing));
    assert!(
        tr["damage"].as_array().unwrap().len() >= 2,
        "{}",
        tr["damage"]
    );
    assert_eq!(
        tr["damaged_events"].as_u64(),
        Some(Reader::open(&bad).unwrap().segments()[1].events as u64)
    );
    check_trace(tr, &bad);
    let o = run(bin()
        .args(["plot", "--kind", "latency-heatmap"])
        .arg(&bad)
        .arg("-o")
        .arg(d.join("bad.svg")));
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("damaged"));

    // Nothing decodable: an error, not an empty report.
    let cut = d.join("cut.iod");
    let bytes = std::fs::read(&a).unwrap();
    std::fs::write(&cut, &bytes[..20]).unwrap();
    let o = report(&[&cut], &d.join("cut.html"));
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stderr)
            .trim_end()
            .lines()
            .count(),
        1
    );
}

/// Decoded RGBA pixels of a PNG: (width, height, distinct colours, share of the most common
/// colour).
fn png_stats(path: &Path) -> (u32, u32, usize, f64) {
    let dec = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let mut counts: HashMap<&[u8], u64> = HashMap::new();
    for p in buf[..info.buffer_size()].chunks(px) {
        *counts.entry(p).or_default() += 1;
    }
    let total = (info.width * info.height) as f64;
    let top = counts.values().copied().max().unwrap_or(0) as f64;
    (info.width, info.height, counts.len(), top / total)
}

#[test]
fn plot_every_kind_as_svg_and_png() {
    let d = TempDir::new("plot-kinds");
    let a = synth(&d, "mixed.iod", 50_000, "mixed", 7);
    let kinds = [
        "iops",
        "throughput",
        "latency-heatmap",
        "offset",
        "latency-histogram",
        "top-procs",
        "top-files",
    ];
    let t = truth(&a);
    let busiest = t.per_dev.iter().max_by_key(|x| x.1 .0).unwrap().0.clone();
    let mut sizes = Vec::new();
    for k in kinds {
        let svg = d.join(&format!("{k}.svg"));
        let o = run(bin()
            .args(["plot", "--kind", k])
            .arg(&a)
            .arg("-o")
            .arg(&svg));
        assert!(
            o.status.success(),
            "{k}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let s = std::fs::read_to_string(&svg).unwrap();
        assert!(s.contains("<svg") && s.contains("</svg>"), "{k}");
        assert!(s.contains("mixed.iod"), "{k}: title");
        // Shapes but not one per I/O.
        let shapes = s.matches("<rect").count()
            + s.matches("<polyline").count()
            + s.matches("<path").count();
        assert!(shapes > 3, "{k}: {shapes} shapes");
        assert!(s.len() < 5_000_000, "{k}: {} bytes", s.len());
        match k {
            "offset" => assert!(s.contains(&busiest), "offset plot of {busiest}"),
            "top-procs" => assert!(s.contains("[") && s.contains("I/Os")),
            _ => {}
        }
        let png = d.join(&format!("{k}.png"));
        let o = run(bin()
            .args(["plot", "--kind", k, "--width", "900", "--height", "500"])
            .arg(&a)
            .arg("-o")
            .arg(&png));
        assert!(
            o.status.success(),
            "{k}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (w, h, colours, top) = png_stats(&png);
        assert_eq!((w, h), (900, 500));
        assert!(
            colours > 10 && top < 0.97,
            "{k}: {colours} colours, {top} background"
        );
        sizes.push(std::fs::metadata(&png).unwrap().len());
    }
    // The kinds draw different pictures.
    sizes.sort_unstable();
    sizes.dedup();
    assert_eq!(sizes.len(), kinds.len());
    // One I/O: no rate over time to plot, rather than one at a billion per second.
    let one = synth(&d, "one.iod", 1, "oltp", 3);
    for kind in ["iops", "throughput"] {
        common::one_line_error(
            &run(bin()
                .arg("plot")
                .arg(&one)
                .args(["--kind", kind, "-o"])
                .arg(d.join("one.svg"))),
            "all of its I/O at one instant",
        );
    }
    assert!(!d.join("one.svg").exists());
    // A trace's file name with control characters: escaped in the title (raw, an ESC made
    // the SVG invalid XML).
    let odd = d.join("run\u{1b}[31m\nx.iod");
    std::fs::copy(&one, &odd).unwrap();
    let svg = d.join("odd.svg");
    ok(&run(bin()
        .args(["plot", "--kind", "latency-histogram"])
        .arg(&odd)
        .arg("-o")
        .arg(&svg)));
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains("run\\x1b[31m\\nx.iod"), "the title escaped");
    // --device is the offset plot's (it was ignored by the others); -o - is no file name.
    common::usage_error(
        &run(bin()
            .args(["plot", "--kind", "iops", "--device", "sda"])
            .arg(&one)
            .arg("-o")
            .arg(&svg)),
        "--device applies to --kind offset only",
    );
    common::usage_error(
        &run(bin().arg("report").arg(&one).args(["-o", "-"])),
        "-o -: the report is a file",
    );
    assert!(
        !s.contains('\u{1b}') && !s.contains("m\nx"),
        "no raw control character"
    );
}

#[test]
fn chromium_draws_every_plot_without_errors() {
    let Some(browser) = chromium() else { return };
    let d = TempDir::new("report-chromium");
    let a = synth(&d, "mixed.iod", 200_000, "mixed", 1);
    let b = synth(&d, "seq.iod", 20_000, "seqwrite", 12);
    let bad = d.join("damaged.iod");
    damaged_copy(&b, &bad);
    let page = d.join("report.html");
    let o = report_sections(&[&a, &bad], &page);
    ok(&o);
    // This trace has losses: the page marks them.
    let data = embedded(&std::fs::read_to_string(&page).unwrap());
    assert!(!data["traces"][0]["losses"].as_array().unwrap().is_empty());

    let dom = headless(&browser, &["--dump-dom"], &page);
    let dom = String::from_utf8_lossy(&dom.stdout);
    // The page's error handler sets this attribute on <html> on any JavaScript error.
    assert!(
        !dom.contains("data-js-error=\""),
        "JavaScript error: {}",
        dom.lines()
            .find(|l| l.contains("data-js-error=\""))
            .unwrap_or("")
    );
    assert!(
        dom.contains(r#"data-rendered="ok""#),
        "page not rendered: {}",
        &dom[..dom.len().min(2000)]
    );
    assert!(dom.contains(r#"data-plots="16""#), "plots drawn");
    for p in PLOTS {
        let n = dom
            .matches(&format!(r#"data-plot="{p}" data-drawn="1""#))
            .count();
        assert_eq!(n, 2, "plot {p} drawn in both sections");
    }
    // Bars of the top tables and the damage warning are in the DOM.
    assert!(dom.contains("Damaged trace"), "damage shown");
    assert!(dom.contains(r#"class="bars" data-rows="20""#));

    let shot = d.join("shot.png");
    let o = headless(
        &browser,
        &[
            "--window-size=1400,3200",
            &format!("--screenshot={}", shot.display()),
        ],
        &page,
    );
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let (w, h, colours, top) = png_stats(&shot);
    assert_eq!((w, h), (1400, 3200));
    assert!(colours > 50, "screenshot has {colours} colours");
    assert!(top < 0.9, "screenshot is {top} one colour");

    // A report of the I/Os a filter keeps shows the filter; one that keeps nothing says so.
    let filtered = d.join("filtered.html");
    ok(&run(bin()
        .arg("report")
        .args([&a, &b])
        .args(["--sections", "--filter", "rw == W && iosize > 4k", "-o"])
        .arg(&filtered)));
    let none = d.join("none.html");
    ok(&run(bin()
        .arg("report")
        .arg(&a)
        .args(["--filter", "pid == 0 && pid == 1", "-o"])
        .arg(&none)));
    // One I/O: no rate over time, rather than one at a billion per second.
    let one = synth(&d, "one.iod", 1, "oltp", 3);
    let one_page = d.join("one.html");
    ok(&report(&[&one], &one_page));
    for (page, plots, text) in [
        (&filtered, 16, "I/Os left out)"),
        (&none, 1, "the filter keeps no I/O of this trace"),
        (
            &one_page,
            6,
            "all of its I/O at one instant: no IOPS or throughput over time",
        ),
    ] {
        let dom = headless(&browser, &["--dump-dom"], page);
        let dom = String::from_utf8_lossy(&dom.stdout);
        assert!(!dom.contains("data-js-error=\""), "JavaScript error");
        assert!(dom.contains(r#"data-rendered="ok""#), "page not rendered");
        assert!(
            dom.contains(&format!(r#"data-plots="{plots}""#)),
            "plots drawn"
        );
        assert!(dom.contains(text), "{text}");
    }
}

#[test]
fn report_of_a_real_recording() {
    if !bpf_available("report_of_a_real_recording") {
        return;
    }
    let id: u32 = std::fs::read_to_string("/sys/class/zram-control/hot_add")
        .expect("zram hot_add")
        .trim()
        .parse()
        .unwrap();
    struct Zram(u32);
    impl Drop for Zram {
        fn drop(&mut self) {
            let _ = std::fs::write(format!("/sys/block/zram{}/reset", self.0), "1");
            let _ = std::fs::write("/sys/class/zram-control/hot_remove", self.0.to_string());
        }
    }
    let z = Zram(id);
    std::fs::write(format!("/sys/block/zram{}/disksize", z.0), "64M").unwrap();
    let d = TempDir::new("report-real");
    let trace = d.join("dd.iod");
    let node = format!("/dev/zram{}", z.0);
    let o = run(bin()
        .args(["record", "-d", &format!("zram{}", z.0), "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "dd if=/dev/zero of={node} bs=64k count=300 oflag=direct 2>/dev/null && \
             dd if={node} of=/dev/null bs=4k count=3000 iflag=direct 2>/dev/null"
        )));
    ok(&o);
    let page = d.join("r.html");
    let o = report(&[&trace], &page);
    ok(&o);
    let data = embedded(&std::fs::read_to_string(&page).unwrap());
    let tr = &data["traces"][0];
    check_trace(tr, &trace);
    assert!(tr["events"].as_u64().unwrap() >= 3300);
    let ops: Vec<&str> = tr["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    assert!(ops.contains(&"read") && ops.contains(&"write"), "{ops:?}");
    assert!(tr["top_processes"][0]["comm"] == "dd");
    for k in ["offset", "latency-heatmap"] {
        let o = run(bin()
            .args(["plot", "--kind", k])
            .arg(&trace)
            .arg("-o")
            .arg(d.join(&format!("{k}.png"))));
        ok(&o);
    }
}
