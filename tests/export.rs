//! `iodump export`: CSV read by pandas with the original iodump's recipe, JSON lines, and a fio
//! iolog that real fio replays with the recorded number of I/Os.
#![cfg(feature = "analyze")]

use std::process::Command;

use iodump_format::{Op, Reader};

mod common;

use common::{bin, bpf_available, fixture, have_pandas, ok, run, TempDir};

#[test]
fn csv_runs_the_original_pandas_recipe() {
    let d = TempDir::new("export-csv");
    let csv = d.join("t.csv");
    // mixed-20k has a path that is not valid UTF-8: the CSV must still be UTF-8.
    let out = run(bin()
        .args(["export"])
        .arg(fixture("mixed-20k.iod"))
        .args(["--format", "csv", "-o"])
        .arg(&csv));
    ok(&out);
    // Independent expectations from the reader.
    let r = Reader::open(fixture("mixed-20k.iod")).unwrap();
    let big_writes = r
        .events()
        .filter(|e| e.bytes > 65536 && e.op == Op::Write)
        .count();
    let mysqld = r
        .events()
        .filter(|e| r.comm(e.pid, e.tid, 0) == Some(&b"mysqld"[..]))
        .count();
    // Python's csv module: RFC 4180 parsing, every row complete.
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            "import csv,sys\n\
             rows=list(csv.reader(open(sys.argv[1],newline='',encoding='utf-8')))\n\
             assert rows[0][:7]==['timestamp','pid','comm','iosize','rw','lba','path'], rows[0]\n\
             assert all(len(r)==len(rows[0]) for r in rows)\n\
             print(len(rows)-1)",
        )
        .arg(&csv)
        .output()
        .unwrap();
    ok(&py);
    assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), "20000");
    if !have_pandas() {
        common::skip("", "pandas (the pandas part)");
        return;
    }
    // The original's recipe, unchanged.
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            "import pandas as pd, sys\n\
             df = pd.read_csv(sys.argv[1])\n\
             g = df.groupby(['pid','comm']).size()\n\
             big = df[(df['iosize']>65536) & (df['rw']=='W')]\n\
             print(len(big), int(g.xs('mysqld', level='comm').sum()))",
        )
        .arg(&csv)
        .output()
        .unwrap();
    ok(&py);
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        format!("{big_writes} {mysqld}")
    );
}

#[test]
fn jsonl_has_one_object_per_event() {
    let d = TempDir::new("export-jsonl");
    let j = d.join("t.jsonl");
    let out = run(bin()
        .args(["export"])
        .arg(fixture("mixed-20k.iod"))
        .args(["--format", "jsonl", "-o"])
        .arg(&j));
    assert!(out.status.success());
    let text = std::fs::read_to_string(&j).unwrap();
    let mut n = 0;
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["timestamp"].as_str().unwrap().ends_with('Z'));
        assert!(v["path"].is_string());
        n += 1;
    }
    assert_eq!(n, 20_000);
}

#[test]
fn damaged_and_bad_input() {
    let d = TempDir::new("export-bad");
    // A damaged trace: intact segments are exported, a warning says what was skipped.
    let out = run(bin()
        .args(["export"])
        .arg(fixture("oltp-5k-bitflip.iod"))
        .args(["--format", "csv", "-o"])
        .arg(d.join("x.csv")));
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("exported 4000 events") && err.contains("damaged"),
        "{err}"
    );
    // Not a trace: one line, non-zero.
    std::fs::write(d.join("bad.iod"), b"nope").unwrap();
    let out = run(bin()
        .args(["export"])
        .arg(d.join("bad.iod"))
        .args(["--format", "csv", "-o"])
        .arg(d.join("y.csv")));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

#[test]
fn fio_replays_the_exported_iolog() {
    if !bpf_available("fio_replays_the_exported_iolog") {
        return;
    }
    // Record a known workload on one zram device, replay its iolog onto another.
    let mk = || {
        let id: u32 = std::fs::read_to_string("/sys/class/zram-control/hot_add")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::fs::write(format!("/sys/block/zram{id}/disksize"), "64M").unwrap();
        id
    };
    let (a, b) = (mk(), mk());
    let d = TempDir::new("export-fio");
    // And flushes, which zram does not see (no write cache): a loop device over a file,
    // written with fsync at the end.
    let lo_dev = common::devices::Loop::new(&d.0, 8);
    let lo = lo_dev.node.clone();
    let t = d.join("rec.iod");
    let out = run(bin()
        .args(["record", "-d", &format!("zram{a}"), "-d", &lo, "-o"])
        .arg(&t)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "dd if=/dev/zero of=/dev/zram{a} bs=8k count=300 oflag=direct 2>/dev/null && \
             dd if=/dev/zram{a} of=/dev/null bs=4k count=200 iflag=direct 2>/dev/null && \
             dd if=/dev/zero of={lo} bs=4k count=1 oflag=direct conv=fsync 2>/dev/null"
        )));
    drop(lo_dev);
    ok(&out);
    let log = d.join("replay.iolog");
    let out = run(bin()
        .args(["export"])
        .arg(&t)
        .args(["--format", "fio-iolog", "-o"])
        .arg(&log));
    assert!(out.status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("fio version 3 iolog\n"));
    // Every I/O line has five fields: fio reads fewer as a file action ("bad iolog file
    // action: sync", the flush dropped).
    let syncs = text.lines().filter(|l| l.contains(" sync")).count();
    assert!(syncs >= 1, "a flush: {text:.2000}");
    for l in text.lines().skip(1) {
        let f: Vec<&str> = l.split(' ').collect();
        assert!(
            f.len() == 5 || (f.len() == 3 && matches!(f[2], "add" | "open" | "close")),
            "{l}"
        );
    }
    // The loop device's I/O goes to the replay device too.
    let text = text.replace(&lo, &format!("/dev/zram{a}"));
    std::fs::write(&log, &text).unwrap();
    let before = std::fs::read_to_string(format!("/sys/block/zram{b}/stat")).unwrap();
    let fio = Command::new("fio")
        .args(["--name=replay", "--ioengine=psync", "--direct=1"])
        .arg(format!("--read_iolog={}", log.display()))
        .arg(format!("--replay_redirect=/dev/zram{b}"))
        .args(["--output-format=json"])
        .output()
        .expect("fio");
    let after = std::fs::read_to_string(format!("/sys/block/zram{b}/stat")).unwrap();
    for id in [a, b] {
        let _ = std::fs::write(format!("/sys/block/zram{id}/reset"), "1");
        let _ = std::fs::write("/sys/class/zram-control/hot_remove", id.to_string());
    }
    ok(&fio);
    let err = String::from_utf8_lossy(&fio.stderr);
    assert!(!err.contains("bad iolog"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&fio.stdout).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["write"]["total_ios"], 301, "{}", job["write"]);
    assert_eq!(job["read"]["total_ios"], 200, "{}", job["read"]);
    let f = |s: &str| -> Vec<u64> { s.split_whitespace().map(|x| x.parse().unwrap()).collect() };
    let (x, y) = (f(&before), f(&after));
    assert_eq!(y[4] - x[4], 301, "writes that reached the replay device");
    assert_eq!(y[0] - x[0], 200, "reads that reached the replay device");
}

#[test]
fn parquet_opens_in_pandas() {
    if !have_pandas() {
        common::skip("", "pandas");
        return;
    }
    let d = TempDir::new("convert-pandas");
    let out = run(bin()
        .args(["convert"])
        .arg(fixture("oltp-5k.iod"))
        .arg(fixture("mixed-20k.iod"))
        .arg("-o")
        .arg(&d.0));
    ok(&out);
    let r = Reader::open(fixture("oltp-5k.iod")).unwrap();
    let mysqld = r
        .events()
        .filter(|e| r.comm(e.pid, e.tid, 0) == Some(&b"mysqld"[..]))
        .count();
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            "import pandas as pd, sys\n\
             df = pd.read_parquet(sys.argv[1] + '/io.parquet')\n\
             o = df[df['trace'] == 'oltp-5k.iod']\n\
             assert str(df['timestamp'].dtype) == 'datetime64[us, UTC]', df['timestamp'].dtype\n\
             assert str(df['timestamp_ns'].dtype) == 'int64', df['timestamp_ns'].dtype\n\
             us = df['timestamp'].astype('int64')\n\
             assert (us == df['timestamp_ns'] // 1000).all()\n\
             assert not [c for c in df.columns if str(df[c].dtype).startswith('uint')], df.dtypes\n\
             print(len(df), int((o['comm'] == 'mysqld').sum()))",
        )
        .arg(&d.0)
        .output()
        .unwrap();
    ok(&py);
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        format!("25000 {mysqld}")
    );
    // The hive-style dataset opens as one table with host and date from the paths.
    let h = d.join("hive");
    let out = run(bin()
        .args(["convert"])
        .arg(fixture("oltp-5k.iod"))
        .arg(fixture("mixed-20k.iod"))
        .args(["--partition-by", "host,date", "-o"])
        .arg(&h));
    ok(&out);
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            "import pandas as pd, sys\n\
             df = pd.read_parquet(sys.argv[1] + '/io')\n\
             print(len(df), sorted(set(df['host'].astype(str))))",
        )
        .arg(&h)
        .output()
        .unwrap();
    ok(&py);
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        "25000 ['synth-mixed', 'synth-oltp']"
    );
    let out = run(bin()
        .args(["convert"])
        .arg(fixture("oltp-5k.iod"))
        .args(["--partition-by", "week", "-o"])
        .arg(d.join("bad")));
    assert_eq!(out.status.code(), Some(2), "a usage error");
}

/// `export --filter` writes the I/Os the filter keeps, a window of time among them (the
/// segments outside it not decoded), in every line format and the fio iolog; a filter that
/// keeps nothing says so.
#[test]
fn a_filter_exports_the_ios_it_keeps() {
    let d = TempDir::new("export-filter");
    let src = d.join("src.iod");
    ok(&run(bin()
        .args(["synth", "--events", "100000", "--workload", "mixed"])
        .args(["--segment-events", "4096", "-o"])
        .arg(&src)));
    let r = Reader::open(&src).unwrap();
    let h = r.header().clone();
    let mut utc: Vec<i64> = r.events().map(|e| h.to_utc_ns(e.timestamp_ns)).collect();
    utc.sort_unstable();
    let (from, to) = (utc[utc.len() / 5], utc[utc.len() / 2]);
    let kept = |e: &iodump_format::Event| {
        let t = h.to_utc_ns(e.timestamp_ns);
        t >= from && t < to && e.op == Op::Write
    };
    let want = r.events().filter(kept).count();
    assert!(want > 1000, "{want}");
    let filter = format!(
        "time >= {} && time < {} && rw == W",
        iodump_format::summary::rfc3339_utc(from),
        iodump_format::summary::rfc3339_utc(to)
    );
    let export = |format: &str, filter: &str| {
        let out = d.join(&format!("out.{format}"));
        let o = run(bin()
            .arg("export")
            .arg(&src)
            .args(["--format", format, "--filter", filter, "-o"])
            .arg(&out));
        ok(&o);
        (
            std::fs::read_to_string(&out).unwrap(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (csv, _) = export("csv", &filter);
    assert_eq!(csv.lines().count() - 1, want, "CSV rows after its header");
    let (jsonl, _) = export("jsonl", &filter);
    assert_eq!(jsonl.lines().count(), want);
    let (iolog, _) = export("fio-iolog", &filter);
    let ios = iolog
        .lines()
        .filter(|l| l.split(' ').nth(2) == Some("write"))
        .count();
    assert_eq!(ios, want, "iolog writes");
    let (none, err) = export("csv", "time < 2000-01-01T00:00:00Z");
    assert_eq!(none.lines().count(), 1, "the header only");
    assert!(err.contains("--filter keeps no I/O"), "{err}");
}

/// The fio iolog holds every I/O fio can replay, in start order, though a trace's segments
/// overlap in time (a recording's do: an I/O is written when it completes), each device added
/// and opened before its first I/O and closed after the last: the lines are what the events
/// say, sorted by time. The same of the trace cut short, which has no footer to say where
/// each segment starts.
#[test]
fn the_fio_iolog_is_in_start_order() {
    let d = TempDir::new("export-order");
    let src = fixture("mixed-20k.iod");
    let r = Reader::open(&src).unwrap();
    let events: Vec<iodump_format::Event> = r.events().collect();
    // Blocks of 1,000 I/Os in reverse, segments of 2,500: a segment that begins inside a
    // block starts before the one before ends.
    let overlapping = d.join("overlapping.iod");
    let mut w = common::writer_like(&r, &overlapping, 2500);
    for block in events.chunks(1000) {
        for e in block.iter().rev() {
            w.push(e).unwrap();
        }
    }
    w.finish(iodump_format::EndInfo::default()).unwrap();
    let cut = d.join("cut.iod");
    let bytes = std::fs::read(&overlapping).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() * 7 / 10]).unwrap();
    for src in [overlapping, cut] {
        let name = src.file_name().unwrap().to_string_lossy().into_owned();
        let r = Reader::open(&src).unwrap();
        assert_eq!(r.has_footer(), name == "overlapping.iod");
        // (first, last) start of each intact segment's events.
        let spans: Vec<(u64, u64)> = r
            .batches()
            .filter_map(|(_, b)| b.ok())
            .map(|b| {
                let ts = b.timestamp_ns.iter();
                (*ts.clone().min().unwrap(), *ts.max().unwrap())
            })
            .collect();
        assert!(spans.len() >= 3, "{name}: {spans:?}");
        assert!(
            spans.windows(2).filter(|w| w[1].0 < w[0].1).count() >= 2,
            "{name}: too few segments start before the one before ends: {spans:?}"
        );
        let name_of =
            |dev: iodump_format::DevT| format!("/dev/{}", r.tables().device(dev).unwrap().name);
        let mut want: Vec<(u64, String, String)> = r
            .events()
            .filter_map(|e| {
                let action = match e.op {
                    Op::Read => "read",
                    Op::Write => "write",
                    Op::Discard | Op::SecureErase | Op::WriteZeroes => "trim",
                    Op::Flush => "sync",
                    Op::Other => return None,
                };
                let rest = if action == "sync" {
                    "sync 0 0".to_string()
                } else {
                    format!("{action} {} {}", e.sector * 512, e.bytes)
                };
                Some((e.timestamp_ns, name_of(e.dev), rest))
            })
            .collect();
        assert!(want.len() > 1000, "{name}: {}", want.len());
        want.sort_by_key(|w| w.0);
        let t0 = want[0].0;
        let out = d.join(&format!("{name}.iolog"));
        let o = run(bin()
            .arg("export")
            .arg(&src)
            .args(["--format", "fio-iolog", "-o"])
            .arg(&out));
        ok(&o);
        let text = std::fs::read_to_string(&out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("fio version 3 iolog"));
        let lines: Vec<Vec<&str>> = lines.map(|l| l.splitn(3, ' ').collect()).collect();
        let mut devs: Vec<String> = want.iter().map(|w| w.1.clone()).collect();
        assert!(devs.len() > 1);
        devs.sort();
        devs.dedup();
        let n = devs.len();
        let file_actions = |from: usize, action: &str| -> Vec<String> {
            let mut files: Vec<String> = lines[from..from + n]
                .iter()
                .inspect(|l| assert_eq!(l[2], action, "{name}: {l:?}"))
                .map(|l| l[1].to_string())
                .collect();
            files.sort();
            files
        };
        assert_eq!(file_actions(0, "add"), devs, "{name}");
        assert_eq!(file_actions(n, "open"), devs, "{name}");
        let ios = &lines[2 * n..lines.len() - n];
        assert_eq!(ios.len(), want.len(), "{name}: I/O lines");
        // The same I/Os; among equal microseconds any order is start order.
        let mut got: Vec<(u64, String, String)> = ios
            .iter()
            .map(|l| (l[0].parse().unwrap(), l[1].to_string(), l[2].to_string()))
            .collect();
        assert!(
            got.windows(2).all(|w| w[0].0 <= w[1].0),
            "{name}: times go back"
        );
        let mut want_us: Vec<(u64, String, String)> = want
            .into_iter()
            .map(|(t, dev, rest)| ((t - t0) / 1000, dev, rest))
            .collect();
        let last_us = want_us.last().unwrap().0;
        got.sort();
        want_us.sort();
        assert!(
            got == want_us,
            "{name}: the I/O lines differ from the events"
        );
        let close = &lines[lines.len() - n..];
        assert!(
            close
                .iter()
                .all(|l| l[2] == "close" && l[0] == last_us.to_string()),
            "{name}: {close:?}"
        );
    }
}
