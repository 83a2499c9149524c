//! The always-on recorder: recordings in parts (`-o DIR/ --rotate`, retention), read as one
//! trace by every offline command, and the flight recorder's ring (`--ring`, `--trigger`,
//! SIGUSR1).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use common::devices::{Ext4OnZram, Frozen, Loop, Zram};
use common::{
    analyze_rows, bin, bpf_available, monotonic_ns, ok, one_line_error, run, same_rows,
    usage_error, Recorder, TempDir,
};
use iodump_format::recording::{trigger_timestamp_ns, META_SNAPSHOT};
use iodump_format::Reader;

static SERIAL: Mutex<()> = Mutex::new(());

fn parts_of(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("iodump-") && n.ends_with(".iod")
        })
        .collect();
    v.sort();
    v
}

fn info_json(args: &[&Path]) -> Vec<serde_json::Value> {
    let out = run(bin().arg("info").args(args).arg("--json"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The same synthetic I/O written as one file and as a recording in parts: every offline
/// command gives the same answers, given the directory or the files; a second recording in
/// the same directory stays a trace of its own.
#[test]
fn a_recording_in_parts_reads_as_one_trace() {
    let d = TempDir::new("parts-as-one");
    let one = d.join("one.iod");
    let dir = d.join("parts");
    let synth = |out: &Path, extra: &[&str]| {
        ok(&run(bin()
            .args(["synth", "--events", "150000", "--workload", "oltp", "-o"])
            .arg(out)
            .args(extra)));
    };
    synth(&one, &[]);
    synth(&dir, &["--rotate", "128K", "--segment-events", "8192"]);
    let files = parts_of(&dir);
    assert!(files.len() >= 4, "{} parts", files.len());
    // Each part is a complete trace on its own.
    for f in &files {
        ok(&run(bin().arg("info").arg(f)));
    }
    let queries: [&[&str]; 8] = [
        &["--top-files"],
        &["--top-files", "--engine", "polars"],
        &["--top-procs"],
        &["--summary"],
        &["--latency", "--group-by", "file"],
        &["--timeline", "--interval", "1s"],
        &["--seek"],
        &["--seq-writes"],
    ];
    for q in queries {
        let a = serde_json::Value::Array(analyze_rows(&[&one], q));
        same_rows(
            &a,
            &serde_json::Value::Array(analyze_rows(&[&dir], q)),
            &format!("{q:?} on the directory"),
        );
        same_rows(
            &a,
            &serde_json::Value::Array(analyze_rows(&files, q)),
            &format!("{q:?} on the files"),
        );
    }
    // info: the same events and losses, and the parts listed.
    let a = &info_json(&[&one])[0];
    let b = &info_json(&[&dir])[0];
    for k in [
        "events",
        "lost_events",
        "first_timestamp",
        "last_timestamp",
        "paths",
        "processes",
    ] {
        assert_eq!(a[k], b[k], "info {k}");
    }
    assert_eq!(b["parts"].as_array().unwrap().len(), files.len());
    assert!(a["parts"].is_null());
    // export: the same bytes.
    let export = |input: &Path, out: &Path| {
        ok(&run(bin()
            .arg("export")
            .arg(input)
            .args(["--format", "csv", "-o"])
            .arg(out)));
        std::fs::read(out).unwrap()
    };
    assert_eq!(
        export(&one, &d.join("a.csv")),
        export(&dir, &d.join("b.csv"))
    );
    // convert: one trace in the dataset, the same answers.
    ok(&run(bin()
        .arg("convert")
        .arg(&one)
        .arg("-o")
        .arg(d.join("pq-one"))));
    ok(&run(bin()
        .arg("convert")
        .args(&files)
        .arg("-o")
        .arg(d.join("pq-parts"))));
    same_rows(
        &serde_json::Value::Array(analyze_rows(&[d.join("pq-one")], &["--top-files"])),
        &serde_json::Value::Array(analyze_rows(&[d.join("pq-parts")], &["--top-files"])),
        "top files on the Parquet of the parts",
    );
    // report and plot take the directory.
    let out = run(bin()
        .arg("report")
        .arg(&dir)
        .arg("-o")
        .arg(d.join("r.html")));
    ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("150000 events"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ok(&run(bin()
        .arg("plot")
        .arg(&dir)
        .args(["--kind", "iops", "-o"])
        .arg(d.join("p.svg"))));
    // replay takes the directory: the same I/O as the file, op by op (reads only, onto a
    // sparse file).
    let target = d.join("target.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let replay = |input: &Path| {
        let out = run(bin()
            .arg("replay")
            .arg(input)
            .arg("--target")
            .arg(&target)
            .args(["--no-stall", "--json"]));
        ok(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let ops = v["ops"].as_object().unwrap().clone();
        ops.into_iter()
            .map(|(op, c)| (op, c["recorded"].clone(), c["replayed"].clone()))
            .collect::<Vec<_>>()
    };
    let ops = replay(&one);
    assert!(ops.iter().any(|(_, _, n)| n.as_u64() > Some(0)), "{ops:?}");
    assert_eq!(replay(&dir), ops);
    // Another recording in the same directory: two traces, apart.
    ok(&run(bin()
        .args([
            "synth",
            "--events",
            "20000",
            "--workload",
            "randread",
            "--seed",
            "7",
            "--rotate",
            "128K",
            "-o",
        ])
        .arg(&dir)));
    let rows = analyze_rows(&[&dir], &["--top-procs"]);
    let mut traces: Vec<String> = rows
        .iter()
        .map(|r| r["trace"].as_str().unwrap().to_string())
        .collect();
    traces.sort();
    traces.dedup();
    assert_eq!(traces.len(), 2, "{traces:?}");
    assert_eq!(info_json(&[&dir]).len(), 2);
    // A directory of two recordings is not one trace for export.
    let out = run(bin()
        .arg("export")
        .arg(&dir)
        .args(["--format", "csv", "-o"])
        .arg(d.join("c.csv")));
    one_line_error(&out, "holds 2 traces");
    // Nor for replay.
    let out = run(bin()
        .arg("replay")
        .arg(&dir)
        .arg("--target")
        .arg(&target)
        .arg("--no-stall"));
    one_line_error(&out, "holds 2 recordings");
}

/// Bad values are one-line errors before anything is recorded (no root needed: nothing is
/// loaded), and leave no file.
#[test]
fn bad_always_on_flags_are_one_line_errors() {
    let d = TempDir::new("flight-bad");
    let dir = d.join("out/");
    let dir_s = dir.to_str().unwrap();
    let counted = |count: &'static str, window: &'static str| -> Vec<&'static str> {
        let mut v = vec!["--ring", "60s", "--trigger", "latency > 1ms"];
        v.extend(["--trigger-count", count, "--trigger-window", window]);
        v
    };
    let (zero, many, never, long) = (
        counted("0", "1s"),
        counted("2000000", "1s"),
        counted("10", "0s"),
        counted("10", "2m"),
    );
    let cases: [(&[&str], &str); 16] = [
        (&zero, "--trigger-count 0"),
        (&many, "--trigger-count 2000000: give at most 1000000"),
        (&never, "--trigger-window 0s: give a positive duration"),
        (
            &long,
            "--trigger-window 2m is longer than --ring 60s: a snapshot could not hold",
        ),
        (&["--rotate", "0"], "--rotate 0"),
        (&["--rotate", "10x"], "--rotate 10x"),
        (&["--rotate", "1h", "--keep", "-1"], "--keep -1"),
        (&["--rotate", "1h", "--keep", "0"], "--keep 0"),
        (
            &["--rotate", "1h", "--max-total", "lots"],
            "--max-total lots",
        ),
        (
            &["--rotate", "512M", "--max-total", "600M"],
            "at most half of --max-total",
        ),
        (&["--ring", "0"], "--ring 0"),
        (
            &["--ring", "60s", "--trigger", "latency >"],
            "bad --trigger expression",
        ),
        (
            &[
                "--ring",
                "60s",
                "--trigger",
                "latency > 1ms",
                "--after",
                "soon",
            ],
            "--after soon",
        ),
        (&["--ring", "60s", "--keep-dumps", "0"], "--keep-dumps 0"),
        // Added to a clock, it overflowed: no cooldown at all.
        (
            &[
                "--ring",
                "60s",
                "--trigger",
                "latency > 1ms",
                "--cooldown",
                "18446700000s",
            ],
            "at most 292 years",
        ),
        (
            &["--ring", "60s", "--max-dumps-total", "10K"],
            "--max-dumps-total 10K: give at least 1M",
        ),
    ];
    for (args, what) in cases {
        let out = run(bin().args(["record", "-o", dir_s]).args(args));
        usage_error(&out, what);
        assert!(!dir.exists(), "{args:?} made {}", dir.display());
    }
    // Checked once the directory is made (a device that is not there): not left behind.
    let out = run(bin().args(["record", "-o", dir_s, "--rotate", "1h", "-d", "nosuchdisk9"]));
    assert_ne!(out.status.code(), Some(0));
    assert!(!dir.exists(), "a failed recording left {}", dir.display());
    // Snapshot retention without a ring: clap's usage error.
    let out =
        run(bin()
            .args(["record", "-o", dir_s])
            .args(["--rotate", "1h", "--keep-dumps", "3"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ring"));
    // A count without a trigger, likewise.
    let out =
        run(bin()
            .args(["record", "-o", dir_s])
            .args(["--ring", "60s", "--trigger-count", "10"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--trigger"));
    // Not a directory, and a directory that cannot be made.
    let out = run(bin()
        .args(["record", "-o"])
        .arg(d.join("x.iod"))
        .args(["--rotate", "1h"]));
    usage_error(&out, "give -o DIR/");
    let out = run(bin().args(["record", "-o", "/proc/version/sub/", "--rotate", "1h"]));
    one_line_error(&out, "/proc/version/sub/");
}

/// Completed (reads, writes) of a block device, from /sys/block/X/stat.
fn stat_ios(name: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    f[0] + f[4]
}

fn fio(node: &str, secs: u32) -> Command {
    let mut c = Command::new("fio");
    c.args([
        "--name=rr",
        &format!("--filename={node}"),
        "--rw=randrw",
        "--bs=4k",
        "--direct=1",
    ])
    .args([
        "--ioengine=libaio",
        "--iodepth=16",
        "--size=64M",
        "--time_based",
    ])
    .arg(format!("--runtime={secs}"))
    .args(["--output=/dev/null"])
    .stdout(Stdio::null());
    c
}

/// `iodump record -d DEV -o DIR ARGS…` in the background, once it is recording.
fn record_into(dev: &str, dir: &Path, args: &[&str]) -> Recorder {
    let mut all = vec!["record", "-d", dev, "-o", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    Recorder::start(&all)
}

fn zram_filled() -> Zram {
    let z = Zram::new("64M");
    let st = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", z.node()),
            "bs=1M",
            "count=64",
            "oflag=direct",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    z
}

/// Under full-speed fio, rotation by size (many parts) and by time: the events of all parts,
/// losses included, add up to the device's own count: nothing lost or counted twice at a
/// boundary. Retention by count keeps at most N files.
#[test]
fn rotation_loses_nothing_at_boundaries() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("rotation_loses_nothing_at_boundaries") {
        return;
    }
    let z = zram_filled();
    let d = TempDir::new("rotate");
    for (rotate, keep) in [("256K", None), ("1s", None), ("128K", Some("3"))] {
        let dir = d.join(&format!("r-{rotate}/"));
        let before = stat_ios(&z.name());
        let name = z.name();
        let mut args = vec!["--rotate", rotate];
        if let Some(k) = keep {
            args.extend(["--keep", k]);
        }
        let rec = record_into(&name, &dir, &args);
        assert!(fio(&z.node(), 4).status().unwrap().success());
        std::thread::sleep(Duration::from_millis(300));
        let (st, _, err) = rec.stop();
        assert!(st.success(), "{err}");
        let after = stat_ios(&z.name());
        let files = parts_of(&dir);
        let infos = info_json(&[&dir]);
        assert_eq!(infos.len(), 1, "one recording");
        let events =
            infos[0]["events"].as_u64().unwrap() + infos[0]["lost_events"].as_u64().unwrap();
        match keep {
            None => {
                assert!(
                    files.len() >= 3,
                    "--rotate {rotate}: {} parts: {err}",
                    files.len()
                );
                assert_eq!(
                    events,
                    after - before,
                    "--rotate {rotate}: {} parts; {err}",
                    files.len()
                );
                // Each part is whole on its own and numbered in order.
                let parts: Vec<u64> = infos[0]["parts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["part"].as_u64().unwrap())
                    .collect();
                assert_eq!(parts, (1..=files.len() as u64).collect::<Vec<_>>());
            }
            Some(k) => {
                assert!(
                    files.len() <= k.parse().unwrap(),
                    "{} files kept",
                    files.len()
                );
                assert!(err.contains("deleted by retention"), "{err}");
                let first = infos[0]["parts"][0]["part"].as_u64().unwrap();
                assert!(first > 1, "the oldest parts were deleted");
            }
        }
    }
    // Retention by size: the directory stays within --max-total.
    let dir = d.join("total/");
    let name = z.name();
    let rec = record_into(&name, &dir, &["--rotate", "256K", "--max-total", "1M"]);
    let mut child = fio(&z.node(), 4).spawn().unwrap();
    let mut most = 0;
    while child.try_wait().unwrap().is_none() {
        let total: u64 = parts_of(&dir)
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        most = most.max(total);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    // Checked at each flush: at most one second of writing above the bound.
    assert!(
        most <= (1 << 20) + (1 << 20) / 2,
        "{most} bytes in the directory"
    );
    assert!(err.contains("deleted by retention"), "{err}");
}

/// A small tmpfs mounted on a directory of its own, unmounted when dropped.
struct SmallFs(PathBuf);

impl SmallFs {
    fn new(dir: &Path, size: &str) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs on {}", dir.display());
        SmallFs(dir.to_path_buf())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The file system of a recording in parts fills up: with a retention bound the recorder
/// deletes its oldest parts and goes on, the segment that found no room written into the
/// next part (the one it was cut from ends at its last complete chunk), with a warning on
/// stderr; without one it stops with one line naming the directory, and what it wrote reads;
/// so does a single file.
#[test]
fn a_full_file_system_costs_old_parts_not_the_recording() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("a_full_file_system_costs_old_parts_not_the_recording") {
        return;
    }
    let z = zram_filled();
    let d = TempDir::new("diskfull");
    let fs = SmallFs::new(&d.join("small"), "512k");
    let mut fio = fio(&z.node(), 3);
    fio.args(["--rw=randread", "--ioengine=psync", "--iodepth=1"]);
    let record = |dir: &Path, retention: &[&str]| {
        let mut c = bin();
        c.args(["record", "-d", &z.name(), "-o", dir.to_str().unwrap()])
            .args(["--rotate", "64K"])
            .args(retention)
            .arg("--")
            .arg(fio.get_program())
            .args(fio.get_args());
        run(&mut c)
    };

    let bounded = fs.0.join("bounded/");
    let out = record(&bounded, &["--max-total", "10M"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: no space left in") && err.contains("nothing was lost"),
        "{err}"
    );
    assert!(err.contains("deleted by retention"), "{err}");
    // Every part left reads whole (a part cut at its last complete chunk has no end, nothing
    // damaged); no writer loss; and the events of consecutive parts follow each other with
    // no hole where a segment found no room.
    // Two parts at least: a part holds one segment, which holds more on a loaded machine
    // (the recorder drains less often), so that only two may fit in the file system then.
    let files = parts_of(&bounded);
    assert!(files.len() >= 2, "{files:?}");
    let mut cut = 0;
    let mut spans = Vec::new();
    for f in &files {
        let r = Reader::open(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(r.validate().is_empty(), "{} damaged", f.display());
        assert_eq!(r.events().count() as u64, r.announced_events());
        assert!(r
            .losses()
            .iter()
            .all(|l| l.reason != iodump_format::LossReason::Writer));
        cut += usize::from(r.end().is_none() && f != files.last().unwrap());
        let ts: Vec<u64> = r.events().map(|e| e.timestamp_ns).collect();
        if let (Some(a), Some(b)) = (ts.iter().min(), ts.iter().max()) {
            spans.push((*a, *b));
        }
    }
    assert!(cut >= 1, "a part was cut: {files:?}");
    // A lost segment would leave a hole as long as a part's span (a part holds one segment
    // here); ring-buffer losses on a busy machine leave far shorter ones.
    let part_ns = spans.iter().map(|(a, b)| b - a).max().unwrap();
    for w in spans.windows(2) {
        let gap_ns = w[1].0.saturating_sub(w[0].1);
        assert!(
            gap_ns < part_ns / 2,
            "a hole of {gap_ns} ns between parts of {part_ns} ns"
        );
    }
    ok(&run(bin().arg("analyze").arg(&bounded).arg("--summary")));
    std::fs::remove_dir_all(&bounded).unwrap();

    let unbounded = fs.0.join("unbounded/");
    let out = record(&unbounded, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.trim_end().lines().last().unwrap_or("");
    assert!(
        last.starts_with("iodump: error: ")
            && last.contains("unbounded/: recording stopped")
            && last.contains("--max-total")
            && last.contains("No space left on device"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let events = info_json(&[&unbounded])[0]["events"].as_u64().unwrap();
    assert!(events > 0, "what was written before reads");
    std::fs::remove_dir_all(&unbounded).unwrap();

    // One file: stopped, named, and cut at its last complete chunk (read whole, no end).
    let file = fs.0.join("one.iod");
    let mut c = bin();
    c.args([
        "record",
        "-d",
        &z.name(),
        "-o",
        file.to_str().unwrap(),
        "--",
    ])
    .arg(fio.get_program())
    .args(fio.get_args());
    let out = run(&mut c);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let last = err.trim_end().lines().last().unwrap_or("");
    assert!(
        last.starts_with("iodump: error: ") && last.contains("one.iod: recording stopped"),
        "{err}"
    );
    let r = Reader::open(&file).unwrap();
    assert!(r.validate().is_empty() && r.end().is_none());
    assert!(r.events().count() > 0);
    std::fs::remove_file(&file).unwrap();

    // A ring larger than the room left: its snapshot cannot be saved whole; the ring goes on,
    // and the exit status says a snapshot failed; what is left in the directory reads.
    let ring = fs.0.join("ring/");
    let rec = record_into(&z.name(), &ring, &["--ring", "60s"]);
    assert!(fio.status().unwrap().success());
    rec.signal(libc::SIGUSR1);
    std::thread::sleep(Duration::from_millis(1500));
    let (st, _, err) = rec.stop();
    assert_eq!(st.code(), Some(1), "{err}");
    assert!(err.contains("the ring goes on"), "{err}");
    let last = err.trim_end().lines().last().unwrap_or("");
    assert!(
        last.starts_with("iodump: error: 1 snapshot(s) could not be saved whole"),
        "{err}"
    );
    for e in std::fs::read_dir(&ring).unwrap() {
        let p = e.unwrap().path();
        let r = Reader::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(r.validate().is_empty(), "{} damaged", p.display());
    }
}

/// Under more I/O than the recorder keeps up with (full-speed reads on zram against a debug
/// build), SIGUSR1 is still answered at once: the snapshot holds the window before the
/// signal and the `--after` that follows it (the session drained the ring buffer until
/// empty, which it never was, and answered the signal only once the load stopped).
#[test]
fn sigusr1_is_answered_under_overload() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("sigusr1_is_answered_under_overload") {
        return;
    }
    let z = zram_filled();
    let d = TempDir::new("overload");
    let dir = d.join("ring/");
    let rec = record_into(&z.name(), &dir, &["--ring", "1s", "--after", "2s"]);
    // Two readers, one per CPU: the recorder's consumer gets a share of a CPU at most.
    let mut load = fio(&z.node(), 5);
    load.args([
        "--rw=randread",
        "--ioengine=psync",
        "--iodepth=1",
        "--numjobs=2",
    ]);
    let mut load = load.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(2000));
    let signal_ns = monotonic_ns();
    rec.signal(libc::SIGUSR1);
    assert!(load.wait().unwrap().success());
    let (_, _, err) = rec.stop();
    let files = parts_of_any(&dir);
    assert_eq!(files.len(), 1, "{files:?} {err}");
    let v = &info_json(&[&files[0]])[0];
    let (first, last) = (
        v["first_timestamp_ns"].as_u64().unwrap(),
        v["last_timestamp_ns"].as_u64().unwrap(),
    );
    assert!(
        first + 500_000_000 < signal_ns && last > signal_ns + 1_000_000_000,
        "the snapshot spans {:.2} s before the signal to {:.2} s after it: {err}",
        (signal_ns as f64 - first as f64) / 1e9,
        (last as f64 - signal_ns as f64) / 1e9
    );
}

/// The trace files in `dir`, whatever their names.
fn parts_of_any(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "iod"))
        .collect();
    v.sort();
    v
}

/// kill -9 while parts rotate: every file left is readable, every part but the last closed.
#[test]
fn kill_9_during_rotation_leaves_every_file_readable() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("kill_9_during_rotation_leaves_every_file_readable") {
        return;
    }
    let z = zram_filled();
    let d = TempDir::new("kill9");
    let dir = d.join("k/");
    let name = z.name();
    let rec = record_into(&name, &dir, &["--rotate", "300ms"]);
    let mut child = fio(&z.node(), 4).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    rec.signal(libc::SIGKILL);
    let _ = child.wait();
    let (_, _, _) = rec.stop();
    let files = parts_of(&dir);
    assert!(files.len() >= 3, "{} parts", files.len());
    for (i, f) in files.iter().enumerate() {
        let r = Reader::open(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if i + 1 < files.len() {
            assert!(r.end().is_some(), "{} not closed", f.display());
            assert!(r.validate().is_empty(), "{} damaged", f.display());
        }
        assert_eq!(r.events().count() as u64, r.announced_events());
    }
    // The whole recording still reads as one.
    assert!(info_json(&[&dir])[0]["events"].as_u64().unwrap() > 0);
}

/// `count` serial 4 KiB O_DIRECT writes of zeroes to `node` from block `seek` on (dd).
fn small_writes(node: &str, count: u32, seek: u32) {
    let st = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={node}"),
            "bs=4k",
            "oflag=direct",
        ])
        .arg(format!("count={count}"))
        .arg(format!("seek={seek}"))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
}

/// A trigger on slow I/O (1 MiB writes of random data to zram, compressed in the write
/// path: hundreds of µs against a few µs for 4 KiB writes) saves the window around it: the
/// I/O that fired it, I/O before and after, and its header says which; the report marks it.
/// SIGUSR1 saves a snapshot too; a ring whose trigger never fires writes nothing.
#[test]
fn trigger_and_sigusr1_save_the_window() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("trigger_and_sigusr1_save_the_window") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("trigger");
    let dir = d.join("t/");
    let name = z.name();
    let small = |seek: u32| small_writes(&z.node(), 500, seek);
    let random = d.join("random");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(std::fs::File::open("/dev/urandom").unwrap(), 8 << 20),
        &mut bytes,
    )
    .unwrap();
    std::fs::write(&random, bytes).unwrap();
    let rec = record_into(
        &name,
        &dir,
        &[
            "--ring",
            "30s",
            "--trigger",
            "latency > 200us && iosize >= 1M",
            "--after",
            "1s",
        ],
    );
    small(0);
    let st = Command::new("dd")
        .arg(format!("if={}", random.display()))
        .args([
            &format!("of={}", z.node()),
            "bs=1M",
            "count=8",
            "seek=8",
            "oflag=direct",
        ])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(200));
    small(4000);
    std::thread::sleep(Duration::from_millis(2500));
    // On demand.
    rec.signal(libc::SIGUSR1);
    small(8000);
    std::thread::sleep(Duration::from_millis(1500));
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    snaps.sort();
    assert_eq!(snaps.len(), 2, "{snaps:?}: {err}");
    let name_of = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
    let trig = snaps
        .iter()
        .find(|p| name_of(p).contains("latency"))
        .expect("trigger snapshot");
    let usr1 = snaps
        .iter()
        .find(|p| name_of(p).contains("sigusr1"))
        .expect("SIGUSR1 snapshot");
    let r = Reader::open(trig).unwrap();
    let at = trigger_timestamp_ns(r.header()).expect("the trigger I/O in the header");
    let ev: Vec<_> = r.events().collect();
    let fired = ev
        .iter()
        .find(|e| e.timestamp_ns == at)
        .expect("the trigger I/O in the snapshot");
    assert!(fired.latency_ns > 200_000 && fired.bytes >= 1 << 20);
    let before = ev
        .iter()
        .filter(|e| e.timestamp_ns < at && e.bytes == 4096)
        .count();
    let after = ev
        .iter()
        .filter(|e| e.timestamp_ns > at && e.bytes == 4096)
        .count();
    assert!(
        before >= 500 && after >= 500,
        "{before} before, {after} after"
    );
    // The report marks it.
    let html = d.join("t.html");
    ok(&run(bin().arg("report").arg(trig).arg("-o").arg(&html)));
    let data = common::embedded_report_data(&std::fs::read_to_string(&html).unwrap());
    assert_eq!(
        data["traces"][0]["trigger"]["at_ns"].as_i64().unwrap(),
        at as i64 - ev.iter().map(|e| e.timestamp_ns).min().unwrap() as i64
    );
    let r = Reader::open(usr1).unwrap();
    let why = r
        .header()
        .metadata
        .iter()
        .find(|(k, _)| k == META_SNAPSHOT)
        .map(|(_, v)| v.clone());
    assert_eq!(why.as_deref(), Some("SIGUSR1"));
    assert!(r.events().filter(|e| e.bytes == 4096).count() >= 1500);
    // A ring whose trigger does not fire writes nothing.
    let quiet = d.join("q/");
    let rec = record_into(
        &name,
        &quiet,
        &["--ring", "10s", "--trigger", "latency > 10s"],
    );
    small(0);
    std::thread::sleep(Duration::from_millis(1200));
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    assert_eq!(std::fs::read_dir(&quiet).unwrap().count(), 0, "{err}");
    // Snapshot retention: three snapshots of an earlier run, then two of this one with
    // --keep-dumps 2: the earlier ones are deleted as the new ones start; no other file is
    // touched.
    let earlier: Vec<String> = (1..=3)
        .map(|i| format!("trigger-20250101T00000{i}.000Z-00{i}-sigusr1.iod"))
        .collect();
    for f in &earlier {
        // (Cut as it began: retention deletes trace files only.)
        let mut bytes = iodump_format::chunk::signature().to_vec();
        bytes.extend_from_slice(b"an earlier snapshot");
        std::fs::write(quiet.join(f), bytes).unwrap();
    }
    let others = ["iodump-20250101T000000.000Z-000001.iod", "notes.iod"];
    for f in others {
        std::fs::write(quiet.join(f), b"not a snapshot").unwrap();
    }
    let rec = record_into(
        &name,
        &quiet,
        &["--ring", "10s", "--after", "200ms", "--keep-dumps", "2"],
    );
    for _ in 0..2 {
        small(0);
        rec.signal(libc::SIGUSR1);
        std::thread::sleep(Duration::from_millis(800));
    }
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    assert!(
        err.contains("2 snapshot(s) saved; 3 older snapshot(s) deleted by retention"),
        "{err}"
    );
    let mut left: Vec<String> = std::fs::read_dir(&quiet)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 4, "{left:?}");
    assert_eq!(&left[..2], others.map(String::from), "{left:?}");
    for new in &left[2..] {
        assert!(
            new.starts_with("trigger-") && new.ends_with("-sigusr1.iod"),
            "{new}"
        );
        assert!(!earlier.contains(new), "{new}");
        assert!(Reader::open(quiet.join(new)).is_ok(), "{new}");
    }
    // A snapshot of SIGUSR1 neither uses up --max-dumps nor starts the trigger's cooldown:
    // the trigger still fires after it.
    let both = d.join("b/");
    let rec = record_into(
        &name,
        &both,
        &[
            "--ring",
            "10s",
            "--trigger",
            "latency > 200us && iosize >= 1M",
            "--after",
            "200ms",
            "--max-dumps",
            "1",
            "--cooldown",
            "1h",
        ],
    );
    small(0);
    rec.signal(libc::SIGUSR1);
    std::thread::sleep(Duration::from_millis(800));
    let st = Command::new("dd")
        .arg(format!("if={}", random.display()))
        .args([&format!("of={}", z.node()), "bs=1M", "count=8", "seek=8"])
        .arg("oflag=direct")
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(1500));
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    let mut made: Vec<String> = std::fs::read_dir(&both)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    assert_eq!(made.len(), 2, "{made:?}: {err}");
    assert!(
        made[0].ends_with("-sigusr1.iod") && made[1].contains("-latency-"),
        "{made:?}"
    );
    // Without a ring SIGUSR1 is answered with a line, not the signal's default (death).
    let parts = d.join("p/");
    let rec = record_into(&name, &parts, &["--rotate", "1h"]);
    small(0);
    rec.signal(libc::SIGUSR1);
    std::thread::sleep(Duration::from_millis(500));
    small(0);
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    assert!(
        err.contains("SIGUSR1: no --ring, so there is no window to save"),
        "{err}"
    );
    assert!(err.contains("recorded "), "{err}");
    let events = info_json(&[&parts])[0]["events"].as_u64().unwrap();
    assert!(events >= 1000, "{events}: {err}");
}

/// A counted trigger (`--trigger-count N --trigger-window D`) fires on the N-th matching I/O
/// completed within D: not on fewer matches, not on as many spread wider than D, and the
/// snapshot's header says so; the I/O named in it is the N-th.
#[test]
fn a_counted_trigger_fires_on_a_sustained_pattern_only() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("a_counted_trigger_fires_on_a_sustained_pattern_only") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("trigger-count");
    let name = z.name();
    // 300 serial 4 KiB O_DIRECT writes (a fraction of a second).
    let writes = |seek: u32| small_writes(&z.node(), 300, seek);
    let trigger = "op == write && iosize == 4k";
    // window: --trigger-window; bursts: how many runs of 300 writes, 1.5 s apart.
    let snapshots = |sub: &str, window: &str, bursts: u32| -> (Vec<PathBuf>, String) {
        let dir = d.join(sub);
        let rec = record_into(
            &name,
            &dir,
            &[
                "--ring",
                "30s",
                "--trigger",
                trigger,
                "--trigger-count",
                "400",
                "--trigger-window",
                window,
                "--after",
                "300ms",
            ],
        );
        for b in 0..bursts {
            if b > 0 {
                std::thread::sleep(Duration::from_millis(1500));
            }
            writes(b * 300);
        }
        std::thread::sleep(Duration::from_millis(800));
        let (st, _, err) = rec.stop();
        assert!(st.success(), "{err}");
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        (v, err)
    };
    // 300 matches: fewer than 400.
    let (v, err) = snapshots("few/", "10s", 1);
    assert!(v.is_empty(), "{v:?}: {err}");
    // 600 matches, but never 400 within 1 s (two bursts 1.5 s apart).
    let (v, err) = snapshots("spread/", "1s", 2);
    assert!(v.is_empty(), "{v:?}: {err}");
    // The same within 10 s: fires once, on the 400th.
    let (v, err) = snapshots("sustained/", "10s", 2);
    assert_eq!(v.len(), 1, "{v:?}: {err}");
    let r = Reader::open(&v[0]).unwrap();
    let why = r
        .header()
        .metadata
        .iter()
        .find(|(k, _)| k == META_SNAPSHOT)
        .map(|(_, v)| v.clone());
    assert_eq!(
        why.as_deref(),
        Some("trigger: op == write && iosize == 4k; 400 I/Os within 10s")
    );
    let at = trigger_timestamp_ns(r.header()).expect("the trigger I/O in the header");
    let matching_before = r
        .events()
        .filter(|e| e.op == iodump_format::Op::Write && e.bytes == 4096 && e.timestamp_ns <= at)
        .count();
    assert_eq!(matching_before, 400, "the 400th match fired it");
}

/// An I/O that hangs fires the trigger while it is in flight, not only when (if ever) it
/// completes: a write to a loop device whose backing file is on a frozen file system waits
/// until the file system is thawed. The snapshot's header says the I/O was in flight and
/// how long it had taken.
#[test]
fn an_io_that_hangs_fires_the_trigger_while_in_flight() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("an_io_that_hangs_fires_the_trigger_while_in_flight") {
        return;
    }
    let fs = Ext4OnZram::new("hung");
    let lo = Loop::new(&fs.mnt, 16);
    let d = TempDir::new("hung");
    let dir = d.join("snaps/");
    let rec = record_into(
        lo.name(),
        &dir,
        &[
            "--ring",
            "30s",
            "--trigger",
            "latency > 1s",
            "--after",
            "200ms",
        ],
    );
    // thawed however the test ends, before the loop device goes
    let frozen = Frozen::new(&fs.mnt);
    let mut dd = lo.write_one_block();
    let snapshots = || -> Vec<PathBuf> {
        std::fs::read_dir(&dir)
            .map(|rd| rd.filter_map(|e| Some(e.ok()?.path())).collect())
            .unwrap_or_default()
    };
    let t0 = std::time::Instant::now();
    while snapshots().is_empty() && t0.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let fired_while_hung = !snapshots().is_empty() && dd.try_wait().unwrap().is_none();
    drop(frozen);
    assert!(dd.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    assert!(fired_while_hung, "no snapshot while the write hung: {err}");
    assert!(
        err.contains("snapshot (trigger, an I/O in flight)"),
        "{err}"
    );
    let v = snapshots();
    assert_eq!(v.len(), 1, "one snapshot (the cooldown): {v:?}");
    let r = Reader::open(&v[0]).unwrap();
    let meta = |key: &str| {
        r.header()
            .metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    assert_eq!(meta(META_SNAPSHOT), "trigger: latency > 1s; in flight");
    // TIMESTAMP_NS MAJ:MIN SECTOR BYTES OP LATENCY_NS in_flight
    let io = meta("iodump.trigger.io");
    let f: Vec<&str> = io.split_whitespace().collect();
    assert_eq!(f.len(), 7, "{io}");
    assert_eq!(
        (f[2], f[3], f[4], f[6]),
        ("0", "4096", "write", "in_flight"),
        "{io}"
    );
    let age_ns: u64 = f[5].parse().unwrap();
    assert!((1_000_000_000..8_000_000_000).contains(&age_ns), "{io}");
}

/// The systemd unit's command line (dist/iodump.service) runs as it is, into a directory of
/// the test's: a part is written and the ring is on. As a `Type=notify` service it tells the
/// service manager (a socket of the test's as `$NOTIFY_SOCKET`, a watchdog of 0.4 s) that it
/// is ready, pings the watchdog and says it is stopping; the command it traces does not
/// inherit the socket. `systemd-analyze verify` finds nothing to say of the unit.
#[test]
fn the_service_command_line_records() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("the_service_command_line_records") {
        return;
    }
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/dist/iodump.service"))
        .unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    // systemd's quoting: words, "double-quoted" words.
    let mut words = Vec::new();
    let mut rest = exec.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('"') {
            let end = r.find('"').expect("closing quote");
            words.push(r[..end].to_string());
            rest = r[end + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            words.push(rest[..end].to_string());
            rest = rest[end..].trim_start();
        }
    }
    assert_eq!(words[0], "/usr/local/bin/iodump");
    assert!(words.iter().any(|w| w == "--trigger"));
    for line in ["Type=notify", "NotifyAccess=main", "WatchdogSec=60s"] {
        assert!(unit.lines().any(|l| l == line), "{line}");
    }
    let d = TempDir::new("service");
    // The service manager's side: a thread receiving as systemd does, all along.
    let sock_path = d.0.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let got = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
    let listening = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let listener = {
        let (got, listening) = (got.clone(), listening.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while listening.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(n) = sock.recv(&mut buf) {
                    let m = String::from_utf8_lossy(&buf[..n]).into_owned();
                    got.lock().unwrap().push(m);
                }
            }
        })
    };
    let received = || {
        std::thread::sleep(Duration::from_millis(200));
        std::mem::take(&mut *got.lock().unwrap())
    };
    let notify = |c: &mut Command| {
        c.env("NOTIFY_SOCKET", &sock_path)
            .env("WATCHDOG_USEC", "400000")
            .env_remove("WATCHDOG_PID");
    };
    let dir = format!("{}/", d.0.display());
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| {
            if w == "/var/lib/iodump/" {
                dir.clone()
            } else {
                w.clone()
            }
        })
        .chain(["-t".to_string(), "2".to_string()])
        .collect();
    let mut cmd = bin();
    notify(&mut cmd);
    let out = run(cmd.args(&args));
    ok(&out);
    assert_eq!(
        parts_of(&d.0).len(),
        1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(info_json(&[&d.0])[0]["parts"].as_array().unwrap().len(), 1);
    let got = received();
    assert!(
        got.first()
            .is_some_and(|m| m.starts_with("READY=1\nSTATUS=recording every device")),
        "{got:?}"
    );
    let pings = got.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!(
        (3..=12).contains(&pings),
        "2 s with pings every 0.2 s: {got:?}"
    );
    assert!(
        got.last().is_some_and(|m| m.starts_with("STOPPING=1")),
        "{got:?}"
    );
    // The traced command is not the service: it does not see the socket.
    let envs = d.0.join("env.txt");
    let mut cmd = bin();
    notify(&mut cmd);
    let out = run(cmd
        .args(["record", "-o"])
        .arg(d.0.join("cmd.iod"))
        .args(["--", "sh", "-c"])
        .arg(format!("env > {}", envs.display())));
    ok(&out);
    let env = std::fs::read_to_string(&envs).unwrap();
    assert!(env.contains("PATH="), "{env}");
    for v in ["NOTIFY_SOCKET", "WATCHDOG_USEC"] {
        assert!(!env.contains(v), "{v} inherited: {env}");
    }
    assert!(
        received().first().is_some_and(|m| m.starts_with("READY=1")),
        "the recorder of a command is ready too"
    );
    listening.store(false, std::sync::atomic::Ordering::Relaxed);
    listener.join().unwrap();
    // The unit as systemd reads it (its binary the one under test).
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        common::skip("the_service_command_line_records", "systemd-analyze");
        return;
    }
    let copy = d.0.join("iodump.service");
    std::fs::write(
        &copy,
        unit.replace("/usr/local/bin/iodump", env!("CARGO_BIN_EXE_iodump")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The always-on service writes its parts and its snapshots into one directory, and a
/// snapshot is a copy of I/O the parts hold: the directory is read as its parts (a note says
/// which snapshots were not read; read beside them, the snapshot's I/O counted twice), a
/// snapshot named is read, a directory of snapshots alone is read whole, and `info` lists
/// everything.
#[test]
fn a_directory_of_parts_and_snapshots_reads_its_parts() {
    let d = TempDir::new("parts-and-snapshots");
    let dir = d.join("dir");
    let synth = |out: &Path, events: &str, extra: &[&str]| {
        ok(&run(bin()
            .args(["synth", "--events", events, "--workload", "oltp", "-o"])
            .arg(out)
            .args(extra)));
    };
    synth(
        &dir,
        "20000",
        &["--rotate", "64K", "--segment-events", "4096"],
    );
    let parts = parts_of(&dir);
    assert!(parts.len() >= 2, "{} parts", parts.len());
    let snapshot = dir.join("trigger-20260115T100001.000Z-001-sigusr1.iod");
    synth(&snapshot, "3000", &["--seed", "5"]);
    let events = |args: &[&Path]| -> (u64, String) {
        let out = run(bin()
            .arg("analyze")
            .args(args)
            .args(["--summary", "--format", "json"]));
        ok(&out);
        let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
        let n = rows.iter().find(|r| r["metric"] == "events").unwrap()["value"]
            .as_u64()
            .unwrap();
        (n, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (n, stderr) = events(&[&dir]);
    assert_eq!(n, 20000, "{stderr}");
    assert!(
        stderr.contains("1 snapshot file (trigger-*.iod) not read"),
        "{stderr}"
    );
    // Named, it is read (with the parts named too: both).
    assert_eq!(events(&[&snapshot]).0, 3000);
    let mut named: Vec<&Path> = parts.iter().map(PathBuf::as_path).collect();
    named.push(&snapshot);
    assert_eq!(events(&named).0, 23000);
    // `info` shows what the directory holds: the recording and the snapshot.
    assert_eq!(info_json(&[&dir]).len(), 2);
    // Snapshots alone: read whole, no note.
    let only = d.join("only");
    std::fs::create_dir(&only).unwrap();
    std::fs::rename(&snapshot, only.join(snapshot.file_name().unwrap())).unwrap();
    let (n, stderr) = events(&[&only]);
    assert_eq!(n, 3000);
    assert!(!stderr.contains("not read"), "{stderr}");
}
