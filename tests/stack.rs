//! I/O through stacked devices, offline: lower events that name their upper I/O (format 1.4)
//! read back through every output (JSON lines, CSV, Parquet joined in DuckDB as the README
//! shows), `analyze -d` on the disks below, the report's table of what each stacked device
//! sent down, and each I/O counted once by the questions about the workload (analyze on
//! both engines and on Parquet, diff, both reports) while each device keeps its own. The recording side runs in the kernel matrix (tests/kernels, the stack
//! suite): this host has no device-mapper or md.

mod common;

use std::path::Path;
use std::process::Command;

use common::{bin, embedded_report_data, ok, run, usage_error, TempDir};
use iodump_format::*;

const DM: DevT = DevT::new(253, 0);
const SDA2: DevT = DevT::new(8, 2);
const SDB: DevT = DevT::new(8, 16);

/// dm-0 (`vg-data`, RAID1-like: each write goes to sda2 and sdb, each read to sdb) with 100
/// writes and 50 reads of /data/f by tid 500; every lower I/O names its upper one. sda2 and
/// sdb also have 10 I/Os of their own (no upper).
fn stacked_trace(path: &Path) {
    let header = Header {
        wall_clock_ns: 1_767_225_600_000_000_000,
        monotonic_ns: 1_000_000_000,
        hostname: "stacked".into(),
        ..Header::default()
    };
    let mut w = Writer::new(
        std::fs::File::create(path).unwrap(),
        &header,
        WriterOptions::default(),
    )
    .unwrap();
    let dev = |dev, name: &str, partition_of, bio_based, label: &str, on: Vec<DevT>| Device {
        dev,
        name: name.into(),
        partition_of,
        sector_size: 512,
        start_sector: 0,
        bio_based,
        label: label.into(),
        stacked_on: on,
    };
    for d in [
        dev(DevT::new(8, 0), "sda", None, false, "", vec![]),
        dev(SDA2, "sda2", Some(DevT::new(8, 0)), false, "", vec![]),
        dev(SDB, "sdb", None, false, "", vec![]),
        dev(DM, "dm-0", None, true, "vg-data", vec![SDA2, SDB]),
    ] {
        w.add_device(d).unwrap();
    }
    w.add_process(Process {
        tid: 500,
        pid: 500,
        comm: b"postgres".to_vec(),
        cgroup_id: 1,
        args: None,
    })
    .unwrap();
    w.add_path(PathEntry {
        path_id: 1,
        dev: DM,
        inode: 12,
        kind: PathKind::File,
        truncated: false,
        deleted: false,
        path: b"/data/f".to_vec(),
        generation: Some(1),
    })
    .unwrap();
    let io = |t, dev, op, upper: Option<u64>, latency_ns, path_id| Event {
        timestamp_ns: t,
        dev,
        sector: t / 1000,
        bytes: 8192,
        op,
        flags: Flags(0),
        pid: 500,
        tid: 500,
        path_id,
        queue_ns: (dev != DM).then_some(1000),
        latency_ns,
        error: 0,
        cpu: 0,
        syscall: None,
        dirtier_pid: None,
        cgroup_id: 1,
        upper: upper.map(|ts| UpperIo {
            dev: DM,
            timestamp_ns: ts,
        }),
    };
    for i in 0..150u64 {
        let t = 2_000_000_000 + i * 1_000_000;
        let op = if i < 100 { Op::Write } else { Op::Read };
        w.push(&io(t, DM, op, None, 400_000, 1)).unwrap();
        w.push(&io(t + 2_000, SDB, op, Some(t), 300_000, 1))
            .unwrap();
        if op == Op::Write {
            w.push(&io(t + 3_000, SDA2, op, Some(t), 350_000, 1))
                .unwrap();
        }
    }
    for i in 0..10u64 {
        let t = 3_000_000_000 + i * 1_000_000;
        w.push(&io(t, SDA2, Op::Read, None, 100_000, 0)).unwrap();
        w.push(&io(t, SDB, Op::Read, None, 100_000, 0)).unwrap();
    }
    w.finish(EndInfo::default()).unwrap();
}

fn top_files(trace: &Path, dev: &str) -> Vec<serde_json::Value> {
    let out =
        run(bin()
            .arg("analyze")
            .arg(trace)
            .args(["--top-files", "-d", dev, "--format", "json"]));
    ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn analyze_answers_for_the_disks_below() {
    let d = TempDir::new("stack-analyze");
    let t = d.join("s.iod");
    stacked_trace(&t);
    // sda is the disk of sda2: its partitions' I/O with it.
    let sda = top_files(&t, "sda");
    let f = sda
        .iter()
        .find(|r| r["path"] == "/data/f")
        .expect("/data/f on sda");
    assert_eq!(f["ios"], 100, "{sda:?}");
    let sdb = top_files(&t, "/dev/sdb");
    let f = sdb
        .iter()
        .find(|r| r["path"] == "/data/f")
        .expect("/data/f on sdb");
    assert_eq!(f["ios"], 150, "{sdb:?}");
    let dm = top_files(&t, "253:0");
    assert_eq!(dm.len(), 1, "{dm:?}");
    assert_eq!(dm[0]["ios"], 150);
    // Both disks at once: their I/O, not dm-0's.
    let out = run(bin().arg("analyze").arg(&t).args([
        "--summary",
        "-d",
        "sda",
        "-d",
        "sdb",
        "--format",
        "json",
    ]));
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("270"));
    // A device the trace does not have: one line naming the ones it has, not an empty table.
    let out = run(bin()
        .arg("analyze")
        .arg(&t)
        .args(["--top-files", "-d", "sdz"]));
    usage_error(&out, "no device");
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("\"sdz\"") && msg.contains("dm-0, sda, sda2, sdb"),
        "{msg}"
    );
}

/// `analyze --format json` of `args` on `input`, with the engine `engine`.
fn analyze_json(input: &Path, engine: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let out = run(bin()
        .arg("analyze")
        .arg(input)
        .args(args)
        .args(["--engine", engine, "--format", "json"]));
    ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of a `--summary` metric.
fn metric(rows: &[serde_json::Value], name: &str) -> serde_json::Value {
    rows.iter()
        .find(|r| r["metric"] == name)
        .unwrap_or_else(|| panic!("{name} in {rows:?}"))["value"]
        .clone()
}

/// The `ios` of the row whose `key` is `value`.
fn ios_of(rows: &[serde_json::Value], key: &str, value: &str) -> serde_json::Value {
    rows.iter()
        .find(|r| r[key] == value)
        .unwrap_or_else(|| panic!("{key} = {value} in {rows:?}"))["ios"]
        .clone()
}

#[test]
fn questions_about_the_workload_count_each_io_once() {
    let d = TempDir::new("stack-once");
    let t = d.join("s.iod");
    stacked_trace(&t);
    let pq = d.join("pq");
    ok(&run(bin().arg("convert").arg(&t).arg("-o").arg(&pq)));
    // dm-0's 150 I/Os once (not again as the 250 it sent down), and the disks' own 20.
    for input in [&t, &pq] {
        for engine in ["one-pass", "polars"] {
            let at = format!("{} {engine}", input.display());
            let summary = analyze_json(input, engine, &["--summary"]);
            assert_eq!(metric(&summary, "events"), 170, "{at}: {summary:?}");
            assert_eq!(metric(&summary, "writes"), 100, "{at}: {summary:?}");
            let files = analyze_json(input, engine, &["--top-files"]);
            assert_eq!(ios_of(&files, "path", "/data/f"), 150, "{at}");
            let procs = analyze_json(input, engine, &["--top-procs"]);
            assert_eq!(ios_of(&procs, "comm", "postgres"), 170, "{at}");
            let all = analyze_json(input, engine, &["--latency"]);
            assert_eq!(all[0]["ios"], 170, "{at}: {all:?}");
            // The upper I/O's latency, not the disks': 150 at 400 us, 20 at 100 us.
            assert_eq!(all[0]["p50_us"], 400.0, "{at}: {all:?}");
            // Per device: each device's own I/O.
            let devs = analyze_json(input, engine, &["--latency", "--group-by", "dev"]);
            assert_eq!(ios_of(&devs, "dev", "dm-0"), 150, "{at}");
            assert_eq!(ios_of(&devs, "dev", "sdb"), 160, "{at}");
            assert_eq!(ios_of(&devs, "dev", "sda2"), 110, "{at}");
            let timeline = analyze_json(input, engine, &["--timeline", "--interval", "10s"]);
            let sdb: u64 = timeline
                .iter()
                .filter(|r| r["dev"] == "sdb")
                .map(|r| r["ios"].as_u64().unwrap())
                .sum();
            assert_eq!(sdb, 160, "{at}: {timeline:?}");
            // The disks alone: dm-0 is not in the selection, so their I/O is counted.
            let disks = analyze_json(input, engine, &["--summary", "-d", "sdb"]);
            assert_eq!(metric(&disks, "events"), 160, "{at}: {disks:?}");
            let f = analyze_json(input, engine, &["--summary", "--filter", "dev != dm-0"]);
            assert_eq!(metric(&f, "events"), 270, "{at}: {f:?}");
        }
    }
    // The SQL table has every row, and names the upper device.
    let out = run(bin().arg("analyze").arg(&t).args([
        "--sql",
        "SELECT count(*) AS n, count(upper_dev) AS lower FROM io",
        "--format",
        "csv",
    ]));
    ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n,lower\n420,250\n");
    // diff: the whole recording, processes and files once; devices each.
    let out = run(bin()
        .arg("diff")
        .arg(&t)
        .arg(&t)
        .args(["--limit", "0", "--format", "json"]));
    ok(&out);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let a = |scope: &str, name: &str| {
        rows.iter()
            .find(|r| r["scope"] == scope && r["name"] == name && r["metric"] == "ios")
            .unwrap_or_else(|| panic!("{scope} {name} in {rows:?}"))["a"]
            .clone()
    };
    assert_eq!(a("total", "all"), 170);
    assert_eq!(a("proc", "postgres"), 170);
    assert_eq!(a("file", "/data/f"), 150);
    assert_eq!(a("dev", "sdb"), 160);
    assert_eq!(a("dev", "dm-0"), 150);
    // The report of the comparison: each side's timeline and latency of its I/Os once.
    let page = d.join("diff.html");
    ok(&run(bin()
        .arg("report")
        .arg(&t)
        .arg(&t)
        .arg("-o")
        .arg(&page)));
    let data = embedded_report_data(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(data["a"]["events"], 170);
    let ios: u64 = data["a"]["ios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(ios, 170);
}

#[test]
fn the_fio_iolog_has_each_io_once() {
    let d = TempDir::new("stack-iolog");
    let t = d.join("s.iod");
    stacked_trace(&t);
    let iolog = |extra: &[&str]| {
        let log = d.join("s.iolog");
        let out = run(bin()
            .arg("export")
            .arg(&t)
            .args(["--format", "fio-iolog", "-o"])
            .arg(&log)
            .args(extra));
        ok(&out);
        let text = std::fs::read_to_string(&log).unwrap();
        let count = |dev: &str| {
            text.lines()
                .filter(|l| l.split(' ').nth(1) == Some(dev) && l.split(' ').count() == 5)
                .count()
        };
        let opens: Vec<String> = text
            .lines()
            .filter(|l| l.ends_with(" open"))
            .map(str::to_string)
            .collect();
        let counts = [count("/dev/dm-0"), count("/dev/sdb"), count("/dev/sda2")];
        (
            counts,
            opens,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // dm-0's 150 I/Os, and the disks' own 10 each; not again the 250 dm-0 sent down.
    let (counts, opens, stderr) = iolog(&[]);
    assert_eq!(counts, [150, 10, 10], "{stderr}");
    assert_eq!(opens.len(), 3, "{opens:?}");
    assert!(
        stderr.contains("250 sent down by a stacked device"),
        "{stderr}"
    );
    // Without dm-0, the disks' I/O is all there is.
    let (counts, opens, stderr) = iolog(&["--filter", "dev != dm-0"]);
    assert_eq!(counts, [0, 160, 110], "{stderr}");
    assert_eq!(opens.len(), 2, "{opens:?}");
    assert!(!stderr.contains("sent down"), "{stderr}");
}

#[test]
fn perfetto_shows_each_io_on_its_process_once() {
    if !common::have_perfetto("perfetto_shows_each_io_on_its_process_once") {
        return;
    }
    let d = TempDir::new("stack-perfetto");
    let t = d.join("s.iod");
    stacked_trace(&t);
    // Every I/O on its device's lanes; on the process's lanes, dm-0's and the disks' own
    // only (tests/data/perfetto_check.py).
    common::perfetto_check(&t, &d, "stacked");
}

#[test]
fn lower_events_name_their_upper_io_in_every_export() {
    let d = TempDir::new("stack-export");
    let t = d.join("s.iod");
    stacked_trace(&t);
    let r = Reader::open(&t).unwrap();
    let events: Vec<Event> = r.events().collect();
    let uppers: std::collections::HashSet<(DevT, u64, u32)> = events
        .iter()
        .filter(|e| e.dev == DM)
        .map(|e| (e.dev, e.timestamp_ns, e.tid))
        .collect();
    let lowers: Vec<&Event> = events.iter().filter(|e| e.upper.is_some()).collect();
    assert_eq!(lowers.len(), 250);
    for e in &lowers {
        let u = e.upper.unwrap();
        assert!(uppers.contains(&(u.dev, u.timestamp_ns, e.tid)), "{e:?}");
    }
    // JSON lines.
    let jl = d.join("s.jsonl");
    ok(&run(bin()
        .arg("export")
        .arg(&t)
        .args(["--format", "jsonl", "-o"])
        .arg(&jl)));
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&jl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let named: Vec<&serde_json::Value> =
        rows.iter().filter(|r| !r["upper_dev"].is_null()).collect();
    assert_eq!(named.len(), 250);
    for r in &named {
        assert_eq!(r["upper_dev"], "253:0");
        let ts = r["upper_timestamp_ns"].as_u64().unwrap();
        assert!(
            rows.iter()
                .any(|u| u["dev"] == "253:0" && u["timestamp_ns"] == ts && u["tid"] == r["tid"]),
            "{r}"
        );
    }
    assert!(rows
        .iter()
        .filter(|r| r["dev"] == "253:0")
        .all(|r| r["upper_dev"].is_null() && r["upper_timestamp_ns"].is_null()));
    // CSV: the two columns before args.
    let csv = d.join("s.csv");
    ok(&run(bin()
        .arg("export")
        .arg(&t)
        .args(["--format", "csv", "-o"])
        .arg(&csv)));
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with(",upper_dev,upper_timestamp_ns,args"));
    assert_eq!(lines.iter().filter(|l| l.contains(",253:0,2")).count(), 250);
}

#[test]
fn parquet_joins_each_lower_io_to_its_upper_io_as_the_readme_shows() {
    if !python_has("duckdb") {
        return;
    }
    let d = TempDir::new("stack-parquet");
    let t = d.join("s.iod");
    stacked_trace(&t);
    let pq = d.join("pq");
    ok(&run(bin().arg("convert").arg(&t).arg("-o").arg(&pq)));
    // The README's query: per I/O on dm-0, its slowest I/O below.
    let sql = "SELECT u.timestamp, u.latency_ns AS dm_ns, max(l.latency_ns) AS disk_ns, count(*) AS lower_ios \
               FROM 'pq/io.parquet' l JOIN 'pq/io.parquet' u \
               ON u.trace = l.trace AND u.dev = l.upper_dev AND u.monotonic_ns = l.upper_monotonic_ns AND u.tid = l.tid \
               GROUP BY u.timestamp, u.latency_ns ORDER BY u.latency_ns - max(l.latency_ns) DESC LIMIT 10";
    let script = format!(
        "import duckdb\nrows = duckdb.sql(\"{sql}\").fetchall()\n\
         print(len(rows), rows[0][1], rows[0][2], rows[0][3])\n\
         print(duckdb.sql(\"SELECT count(*) FROM 'pq/io.parquet' WHERE upper_dev = 'dm-0'\").fetchall()[0][0])"
    );
    let out = run(Command::new("python3")
        .args(["-c", &script])
        .current_dir(&d.0));
    ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    // Reads: one I/O below (sdb, 300 us); writes: two (sda2 350 us is the slowest).
    assert_eq!(lines[0], "10 400000 300000 1", "{text}");
    assert_eq!(lines[1], "250", "{text}");
}

#[test]
fn report_shows_what_each_stacked_device_sent_down() {
    let d = TempDir::new("stack-report");
    let t = d.join("s.iod");
    stacked_trace(&t);
    let html = d.join("r.html");
    ok(&run(bin().arg("report").arg(&t).arg("-o").arg(&html)));
    let data = embedded_report_data(&std::fs::read_to_string(&html).unwrap());
    let stack = data["traces"][0]["stack"].as_array().unwrap();
    assert_eq!(stack.len(), 2, "{stack:?}");
    let (sdb, sda2) = (&stack[0], &stack[1]);
    assert_eq!(
        (&sdb["upper"], &sdb["lower"]),
        (&"dm-0".into(), &"sdb".into())
    );
    assert_eq!(
        (&sda2["upper"], &sda2["lower"]),
        (&"dm-0".into(), &"sda2".into())
    );
    assert_eq!(sdb["upper_ios"], 150);
    assert_eq!(sdb["lower_ios"], 150);
    assert_eq!(sda2["lower_ios"], 100);
    assert_eq!(sdb["lower_ios_per_upper_io"], 1.0);
    assert!((sda2["lower_ios_per_upper_io"].as_f64().unwrap() - 100.0 / 150.0).abs() < 1e-9);
    assert_eq!(sdb["upper_latency_mean_ns"], 400_000);
    assert_eq!(sdb["lower_latency_mean_ns"], 300_000);
    assert_eq!(sda2["lower_bytes"], 100 * 8192);
    // The whole recording, processes and files count each I/O once; devices their own.
    let tr = &data["traces"][0];
    assert_eq!(tr["events"], 170);
    assert_eq!(tr["top_processes"][0]["ios"], 170);
    assert_eq!(tr["top_files"][0]["ios"], 150);
    let devices = tr["devices"].as_array().unwrap();
    let events_of =
        |name: &str| devices.iter().find(|d| d["name"] == name).unwrap()["events"].clone();
    assert_eq!(events_of("sdb"), 160, "{devices:?}");
    assert_eq!(events_of("dm-0"), 150, "{devices:?}");
    // A trace without stacked devices has an empty table.
    let plain = d.join("plain.iod");
    ok(&run(bin()
        .args(["synth", "--events", "2000", "--workload", "randread", "-o"])
        .arg(&plain)));
    let html2 = d.join("p.html");
    ok(&run(bin().arg("report").arg(&plain).arg("-o").arg(&html2)));
    let data = embedded_report_data(&std::fs::read_to_string(&html2).unwrap());
    assert_eq!(data["traces"][0]["stack"], serde_json::json!([]));
}

/// True when python3 can import `module`; without it the test is skipped with a line on
/// stderr, or fails when CI requires the engines (`IODUMP_REQUIRE_SPARK=1`).
fn python_has(module: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("IODUMP_REQUIRE_SPARK").as_deref() != Ok("1"),
            "IODUMP_REQUIRE_SPARK=1 but python3 cannot import {module}"
        );
        common::skip("", &format!("python3's {module} module"));
    }
    ok
}
