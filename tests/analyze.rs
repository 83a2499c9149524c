//! `iodump analyze` queries checked against straightforward computations over the reader.
#![cfg(feature = "analyze")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use iodump_format::{Op, Reader};

mod common;

use common::{bin, fixture, ok, run};

/// `iodump analyze fixtures/mixed-20k.iod ARGS --format json`: its rows.
fn analyze_json(args: &[&str]) -> Vec<serde_json::Value> {
    common::analyze_rows(&[fixture("mixed-20k.iod")], args)
}

/// p-quantile with linear interpolation between closest ranks (polars' Linear method).
fn quantile(sorted: &[u64], p: f64) -> f64 {
    let pos = p * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] as f64 + (sorted[hi] as f64 - sorted[lo] as f64) * (pos - lo as f64)
}

#[test]
fn top_procs_matches_a_plain_count() {
    let r = Reader::open(fixture("mixed-20k.iod")).unwrap();
    let mut by: HashMap<(u32, Vec<u8>), (u64, u64, u64)> = HashMap::new();
    for e in r.events() {
        let comm = r.comm(e.pid, e.tid, 0).unwrap().to_vec();
        let x = by.entry((e.pid, comm)).or_default();
        x.0 += 1;
        if e.op == Op::Read {
            x.1 += e.bytes as u64;
        }
        if e.op == Op::Write {
            x.2 += e.bytes as u64;
        }
    }
    let mut want: Vec<_> = by.into_iter().collect();
    want.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0 .0.cmp(&b.0 .0)));
    let got = analyze_json(&["--top-procs", "--limit", "5"]);
    assert_eq!(got.len(), 5);
    for (g, ((pid, comm), (ios, rb, wb))) in got.iter().zip(&want) {
        assert_eq!(g["pid"], *pid);
        assert_eq!(g["comm"].as_str().unwrap().as_bytes(), comm.as_slice());
        assert_eq!(g["ios"], *ios);
        assert_eq!(g["read_bytes"], *rb);
        assert_eq!(g["write_bytes"], *wb);
    }
}

#[test]
fn top_files_matches_a_plain_count() {
    let r = Reader::open(fixture("mixed-20k.iod")).unwrap();
    // Per path id (labels such as [journal] exist once per device, named with it).
    type Key = (u32, Vec<u8>);
    type Acc = (u64, u64, Vec<u64>);
    let mut by: HashMap<Key, Acc> = HashMap::new();
    for e in r.events() {
        let entry = r.tables().path(e.path_id).unwrap();
        let mut p = entry.path.clone();
        if p.starts_with(b"[") {
            p.push(b' ');
            p.extend(r.tables().device(entry.dev).unwrap().name.bytes());
        }
        let x = by.entry((e.path_id, p)).or_default();
        x.0 += 1;
        x.1 += e.bytes as u64;
        x.2.push(e.latency_ns);
    }
    let mut want: Vec<_> = by.into_iter().collect();
    want.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0 .1.cmp(&b.0 .1)));
    let got = analyze_json(&["--top-files", "--limit", "5"]);
    assert_eq!(got.len(), 5);
    for (g, ((_, path), (ios, bytes, lats))) in got.iter().zip(&mut want) {
        assert_eq!(g["path"].as_str().unwrap().as_bytes(), path.as_slice());
        assert_eq!(g["ios"], *ios);
        let rb = g["read_bytes"].as_u64().unwrap_or(0);
        let wb = g["write_bytes"].as_u64().unwrap_or(0);
        assert!(rb + wb <= *bytes);
        lats.sort_unstable();
        let p99 = quantile(lats, 0.99) / 1000.0;
        let got_p99 = g["p99_latency_us"].as_f64().unwrap();
        assert!((got_p99 - p99).abs() < 0.01, "{got_p99} vs {p99}");
    }
}

#[test]
fn latency_percentiles_and_filter() {
    let r = Reader::open(fixture("mixed-20k.iod")).unwrap();
    let mut lats: Vec<u64> = r.events().map(|e| e.latency_ns).collect();
    lats.sort_unstable();
    let got = analyze_json(&["--latency"]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["ios"], 20_000);
    for (k, p) in [("p50_us", 0.5), ("p99_us", 0.99), ("p999_us", 0.999)] {
        let want = quantile(&lats, p) / 1000.0;
        let g = got[0][k].as_f64().unwrap();
        assert!((g - want).abs() < 0.01, "{k}: {g} vs {want}");
    }
    let max = *lats.last().unwrap() as f64 / 1000.0;
    assert!((got[0]["max_us"].as_f64().unwrap() - max).abs() < 0.01);
    // Per op, with a filter: only writes remain.
    let writes: Vec<u64> = r
        .events()
        .filter(|e| e.op == Op::Write)
        .map(|e| e.latency_ns)
        .collect();
    let got = analyze_json(&["--latency", "--group-by", "op", "--filter", "rw == W"]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["op"], "write");
    assert_eq!(got[0]["ios"], writes.len() as u64);
}

#[test]
fn summary_and_bad_input() {
    let got = analyze_json(&[]);
    let m: HashMap<String, String> = got
        .iter()
        .map(|row| {
            (
                row["metric"].as_str().unwrap().to_string(),
                row["value"].to_string().trim_matches('"').to_string(),
            )
        })
        .collect();
    assert_eq!(m["events"], "20000");
    let out = run(bin()
        .args(["analyze", "--filter", "iosize >"])
        .arg(fixture("oltp-5k.iod")));
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    let out = run(bin().args(["analyze", "/nonexistent.iod"]));
    assert_eq!(out.status.code(), Some(1));
    // --limit where it would be ignored: said, not ignored.
    for q in ["--summary", "--latency", "--timeline", "--seek"] {
        common::usage_error(
            &run(bin()
                .args(["analyze", q, "--limit", "2"])
                .arg(fixture("oltp-5k.iod"))),
            "--limit applies to --top-files, --top-procs and --seq-writes",
        );
    }
    // So is another question's own flag.
    for (q, flag, value, applies) in [
        ("--top-procs", "--by", "bytes", "--top-files"),
        ("--summary", "--interval", "10s", "--timeline"),
        ("--timeline", "--min-bytes", "4k", "--seq-writes"),
        ("--top-files", "--group-by", "dev", "--latency"),
    ] {
        common::usage_error(
            &run(bin()
                .args(["analyze", q, flag, value])
                .arg(fixture("oltp-5k.iod"))),
            &format!("{flag} applies to {applies} only"),
        );
    }
}

#[test]
fn timeline_and_seek_match_plain_computations() {
    let r = Reader::open(fixture("mixed-20k.iod")).unwrap();
    let h = r.header().clone();
    let interval = 500_000_000i64;
    // Timeline: I/Os per (interval, device, op).
    let names: HashMap<u32, String> = r
        .tables()
        .devices()
        .map(|d| (d.dev.0, d.name.clone()))
        .collect();
    let mut want: HashMap<(i64, String, &'static str), u64> = HashMap::new();
    for e in r.events() {
        let b = h.to_utc_ns(e.timestamp_ns).div_euclid(interval);
        *want
            .entry((b, names[&e.dev.0].clone(), e.op.name()))
            .or_default() += 1;
    }
    let got = analyze_json(&["--timeline", "--interval", "500ms"]);
    assert_eq!(got.len(), want.len());
    let total: u64 = got.iter().map(|g| g["ios"].as_u64().unwrap()).sum();
    assert_eq!(total, 20_000);
    for g in &got {
        let t = g["time"].as_str().unwrap();
        let k = want
            .iter()
            .find(|((b, dev, op), _)| {
                iodump_format::summary::rfc3339_utc(b * interval) == t
                    && g["dev"] == dev.as_str()
                    && g["op"] == *op
            })
            .unwrap_or_else(|| panic!("no bucket for {g}"));
        assert_eq!(g["ios"], *k.1);
    }
    // Seek: I/Os starting exactly where the previous one on the device ended.
    let mut evs: Vec<_> = r.events().collect();
    evs.sort_by_key(|e| (e.dev, e.timestamp_ns));
    let mut seq: HashMap<String, (u64, u64)> = HashMap::new();
    for w in evs.windows(2) {
        if w[0].dev != w[1].dev {
            continue;
        }
        let end = w[0].sector + (w[0].bytes as u64).div_ceil(512);
        let x = seq.entry(names[&w[1].dev.0].clone()).or_default();
        x.0 += 1;
        x.1 += (w[1].sector == end) as u64;
    }
    let got = analyze_json(&["--seek"]);
    for g in &got {
        let (ios, sequential) = seq[g["dev"].as_str().unwrap()];
        assert_eq!(g["ios"], ios, "{g}");
        assert_eq!(g["sequential"], sequential, "{g}");
    }
}

#[test]
fn seq_writes_and_sql() {
    let r = Reader::open(fixture("mixed-20k.iod")).unwrap();
    // Runs of contiguous writes per (device, file), in time order.
    let mut writes: Vec<_> = r.events().filter(|e| e.op == Op::Write).collect();
    writes.sort_by_key(|e| (e.dev, e.path_id, e.timestamp_ns));
    let mut runs: Vec<u64> = Vec::new();
    let mut cur: Option<(iodump_format::DevT, u32, u64, u64)> = None; // dev, path, end, bytes
    for e in &writes {
        let end = e.sector + (e.bytes as u64).div_ceil(512);
        match cur {
            Some((d, p, prev_end, b)) if d == e.dev && p == e.path_id && prev_end == e.sector => {
                cur = Some((d, p, end, b + e.bytes as u64));
            }
            _ => {
                if let Some((_, _, _, b)) = cur {
                    runs.push(b);
                }
                cur = Some((e.dev, e.path_id, end, e.bytes as u64));
            }
        }
    }
    if let Some((_, _, _, b)) = cur {
        runs.push(b);
    }
    let mut big: Vec<u64> = runs.into_iter().filter(|&b| b >= 1 << 20).collect();
    big.sort_unstable_by(|a, b| b.cmp(a));
    let got = analyze_json(&["--seq-writes", "--min-bytes", "1M", "--limit", "1000"]);
    let lens: Vec<u64> = got
        .iter()
        .map(|g| g["length_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(lens, big);
    assert!(!big.is_empty());
    // SQL over the io table.
    let reads = r.events().filter(|e| e.op == Op::Read).count();
    let got = analyze_json(&[
        "--sql",
        "SELECT op, count(*) AS n FROM io WHERE op = 'read' GROUP BY op",
    ]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["n"], reads as u64);
    // Its sums are 64-bit (the bytes of 20,000 I/Os pass 4 GiB), its figures in full (not to
    // the thousandth: 0.000), its text text (not the number 7).
    let (bytes, latency_ns) = r.events().fold((0u64, 0u64), |(b, l), e| {
        (b + u64::from(e.bytes), l + e.latency_ns)
    });
    assert!(bytes > u64::from(u32::MAX), "{bytes}");
    let got = analyze_json(&[
        "--sql",
        "SELECT sum(bytes) AS b, avg(latency_ns) / 1000000000.0 AS s, '007' AS t FROM io",
    ]);
    assert_eq!(got[0]["b"], bytes, "{got:?}");
    let mean_s = latency_ns as f64 / 20_000.0 / 1e9;
    let s = got[0]["s"].as_f64().unwrap();
    assert!((s - mean_s).abs() < mean_s * 1e-9, "{s} against {mean_s}");
    assert_eq!(got[0]["t"], "007");
    // A bad query: one line, non-zero.
    let out = run(bin()
        .arg("analyze")
        .arg(fixture("oltp-5k.iod"))
        .args(["--sql", "SELEKT nonsense"]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().count(),
        1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn recorded_fio_job_is_the_top_process_and_file() {
    if !common::bpf_available("recorded_fio_job_is_the_top_process_and_file") {
        return;
    }
    // ext4 on a zram device, a fio job doing exactly 5000 O_DIRECT reads of one file.
    let id: u32 = std::fs::read_to_string("/sys/class/zram-control/hot_add")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    std::fs::write(format!("/sys/block/zram{id}/disksize"), "256M").unwrap();
    let d = common::TempDir::new("analyze-fio");
    let mnt = d.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let node = format!("/dev/zram{id}");
    let sh = |c: &str| {
        assert!(
            std::process::Command::new("sh")
                .arg("-c")
                .arg(c)
                .status()
                .unwrap()
                .success(),
            "{c}"
        )
    };
    sh(&format!(
        "mkfs.ext4 -q -F {node} && mount {node} {}",
        mnt.display()
    ));
    let file = mnt.join("fio.dat");
    sh(&format!(
        "dd if=/dev/urandom of={} bs=1M count=32 status=none && sync",
        file.display()
    ));
    let trace = d.join("fio.iod");
    let out = run(bin()
        .args(["record", "-d", &format!("zram{id}"), "-o"])
        .arg(&trace)
        .args([
            "--",
            "fio",
            "--name=job",
            &format!("--filename={}", file.display()),
        ])
        .args([
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=16",
            "--number_ios=5000",
            "--size=32M",
            "--output=/dev/null",
        ]));
    sh(&format!("umount {}", mnt.display()));
    let _ = std::fs::write(format!("/sys/block/zram{id}/reset"), "1");
    let _ = std::fs::write("/sys/class/zram-control/hot_remove", id.to_string());
    ok(&out);
    let json = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = run(bin()
            .arg("analyze")
            .arg(&trace)
            .args(args)
            .args(["--format", "json"]));
        ok(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let procs = json(&["--top-procs"]);
    assert_eq!(procs[0]["comm"], "fio");
    let n = procs[0]["ios"].as_u64().unwrap();
    assert!((5000..=5025).contains(&n), "fio did {n} I/Os");
    let files = json(&["--top-files"]);
    assert_eq!(files[0]["path"], file.display().to_string());
    assert_eq!(files[0]["main_process"], "fio");
    assert!((5000..=5025).contains(&files[0]["ios"].as_u64().unwrap()));
}

#[test]
fn parquet_inputs_give_the_same_answers() {
    let d = common::TempDir::new("analyze-parquet");
    for (dir, part) in [("flat", None), ("hive", Some("host,date"))] {
        let mut cmd = bin();
        cmd.arg("convert")
            .arg(fixture("mixed-20k.iod"))
            .arg("-o")
            .arg(d.join(dir));
        if let Some(p) = part {
            cmd.args(["--partition-by", p]);
        }
        assert!(run(&mut cmd).status.success());
    }
    let from_iod = analyze_json(&["--top-files", "--limit", "5"]);
    for dir in ["flat", "hive"] {
        for q in [
            &["--top-files", "--limit", "5"][..],
            &["--latency", "--group-by", "op"][..],
            &["--seek"][..],
        ] {
            let q = [q, &["--format", "json"]].concat();
            same_on_trace_and_parquet(&d.join(dir), &q, &format!("{dir} {q:?}"));
        }
    }
    assert_eq!(from_iod.len(), 5);

    // --filter on Parquet keeps exactly the rows it keeps on the trace, whatever field it uses.
    let count = |input: &std::path::Path, f: &str| -> u64 {
        let out = run(bin()
            .arg("analyze")
            .arg(input)
            .args(["--sql", "SELECT count(*) AS n FROM io", "--format", "json"])
            .args(["--filter", f]));
        ok(&out);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["n"].as_u64().unwrap()
    };
    for f in [
        "rw == W && iosize >= 16384",
        "sync || meta",
        r#"syscall == "fsync" || path =~ "*.log""#,
        r#"dev == "sda1" || cpu == 1"#,
        r#"comm =~ "kworker*""#,
        "latency > 1ms && !readahead",
    ] {
        let want = count(&fixture("mixed-20k.iod"), f);
        assert!(want > 0 && want < 20_000, "{f} selects {want}");
        for dir in ["flat", "hive"] {
            assert_eq!(count(&d.join(dir), f), want, "{dir}: {f}");
        }
    }
    // --top-files is answered in one pass without polars, on traces and on Parquet; with
    // `--engine polars` by polars: the same rows, every rank and filter.
    for by in ["ios", "bytes", "latency"] {
        for f in ["rw == R", "iosize >= 16384 || sync", "rw != R"] {
            let q = [
                "--top-files",
                "--by",
                by,
                "--limit",
                "300",
                "--format",
                "json",
                "--filter",
                f,
            ];
            same_on_trace_and_parquet(&d.join("hive"), &q, &format!("--by {by} --filter {f}"));
        }
    }
    // So is --latency, for every grouping.
    for g in ["all", "dev", "op", "proc", "file"] {
        for f in ["bytes >= 0", "rw == W || sync"] {
            let q = [
                "--latency",
                "--group-by",
                g,
                "--format",
                "json",
                "--filter",
                f,
            ];
            same_on_trace_and_parquet(
                &d.join("hive"),
                &q,
                &format!("--latency --group-by {g} --filter {f}"),
            );
        }
    }
    // So is --top-procs.
    for f in ["rw == R", "iosize >= 16384 || sync", "bytes >= 0"] {
        let q = [
            "--top-procs",
            "--limit",
            "300",
            "--format",
            "json",
            "--filter",
            f,
        ];
        same_on_trace_and_parquet(&d.join("flat"), &q, &format!("--top-procs --filter {f}"));
    }
}

/// Every query that `analyze` answers without the polars table (one pass, on traces and on
/// Parquet) gives the rows polars gives on the same events, with and without filters.
#[test]
fn one_pass_queries_match_polars_on_parquet() {
    let d = common::TempDir::new("analyze-onepass");
    let pq = d.join("pq");
    assert!(run(bin()
        .arg("convert")
        .arg(fixture("mixed-20k.iod"))
        .arg("-o")
        .arg(&pq))
    .status
    .success());
    for f in [
        None,
        Some("rw == W || sync"),
        Some(r#"dev == "sda1" || iosize > 8192"#),
    ] {
        for q in [
            &["--summary"][..],
            &["--timeline", "--interval", "1s"][..],
            &["--timeline", "--interval", "250ms"][..],
            &["--seek"][..],
            &["--seq-writes", "--min-bytes", "0", "--limit", "100000"][..],
            &["--seq-writes", "--min-bytes", "64k", "--limit", "50"][..],
            &["--seq-writes", "--min-bytes", "1M", "--limit", "3"][..],
        ] {
            let mut q = [q, &["--format", "json"]].concat();
            if let Some(f) = f {
                q.extend(["--filter", f]);
            }
            same_on_trace_and_parquet(&pq, &q, &format!("{q:?}"));
        }
    }
}

/// Several traces form one dataset: two traces, their two-trace Parquet dataset in one pass
/// and the same dataset in polars give the same rows.
#[test]
fn several_traces_one_dataset() {
    let d = common::TempDir::new("analyze-multi");
    let pq = d.join("pq");
    let (a, b) = (fixture("mixed-20k.iod"), fixture("oltp-5k.iod"));
    assert!(run(bin().arg("convert").arg(&a).arg(&b).arg("-o").arg(&pq))
        .status
        .success());
    for q in [
        &["--summary"][..],
        &["--top-files", "--limit", "1000"][..],
        &["--top-procs", "--limit", "1000"][..],
        &["--latency", "--group-by", "file"][..],
        &["--latency", "--group-by", "proc"][..],
        &["--latency", "--group-by", "dev"][..],
        &["--timeline"][..],
        &["--seek"][..],
        &["--seq-writes", "--min-bytes", "128k", "--limit", "100000"][..],
    ] {
        let json = ["--format", "json"];
        let traces = run(bin().arg("analyze").arg(&a).arg(&b).args(q).args(json));
        let one_pass = run(bin().arg("analyze").arg(&pq).args(q).args(json));
        let polars = run(bin()
            .arg("analyze")
            .arg(&pq)
            .args(q)
            .args(json)
            .args(["--engine", "polars"]));
        ok(&traces);
        same_rows(&traces.stdout, &polars.stdout, &format!("{q:?} traces"));
        let traces_polars = run(bin()
            .arg("analyze")
            .arg(&a)
            .arg(&b)
            .args(q)
            .args(json)
            .args(["--engine", "polars"]));
        same_rows(
            &traces_polars.stdout,
            &polars.stdout,
            &format!("{q:?} traces in polars"),
        );
        same_rows(&one_pass.stdout, &polars.stdout, &format!("{q:?} Parquet"));
    }
}

/// A damaged Parquet file with nothing left to read: one error line names the damaged row
/// group and the exit status says so; never a panic.
#[test]
fn damaged_parquet_is_reported_not_fatal() {
    let d = common::TempDir::new("analyze-badpq");
    let pq = d.join("pq");
    assert!(run(bin()
        .arg("convert")
        .arg(fixture("mixed-20k.iod"))
        .arg("-o")
        .arg(&pq))
    .status
    .success());
    let io = pq.join("io.parquet");
    let mut b = std::fs::read(&io).unwrap();
    let n = b.len();
    for off in (n / 4..n / 2).step_by(997) {
        b[off] ^= 0x55;
    }
    std::fs::write(&io, b).unwrap();
    for q in [
        &["--top-files"][..],
        &["--seek"][..],
        &["--summary"][..],
        &["--summary", "--filter", "op == read"][..],
    ] {
        let out = run(bin().arg("analyze").arg(&pq).args(q));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{q:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.trim_end().lines().count() == 1
                && err.starts_with("iodump: error: pq: nothing could be read (first damage: ")
                && err.contains("row group 0 of"),
            "{err}"
        );
    }
}

/// The dataset `convert` writes of the mixed-20k fixture, in a temporary directory named
/// after `name`, for a test that rewrites its tables with pyarrow; `None` (the test skipped)
/// without pyarrow.
fn pyarrow_dataset(name: &str) -> Option<(common::TempDir, PathBuf)> {
    if !common::have_pandas() {
        common::skip("", "pyarrow");
        return None;
    }
    let d = common::TempDir::new(name);
    let pq = d.join("pq");
    ok(&run(bin()
        .arg("convert")
        .arg(fixture("mixed-20k.iod"))
        .arg("-o")
        .arg(&pq)));
    Some((d, pq))
}

/// A device number in a dataset that is not `MAJ:MIN` (a table rewritten by another tool) is
/// an error naming it wherever it is read: the `devices` table when the dataset is opened,
/// the `io` table's `dev_t` by a filter on the device (one-pass and polars engines alike;
/// the one-pass engine skips such a row group as damaged, and when nothing else could be
/// read says so even with a filter), never taken as device 0:0.
#[test]
fn malformed_device_numbers_in_a_dataset_are_errors() {
    let Some((_d, pq)) = pyarrow_dataset("analyze-badtdev") else {
        return;
    };
    // Sets the first row's dev_t of TABLE.parquet to "8:x".
    let spoil = |table: &str| {
        let script = "import sys, pyarrow as pa, pyarrow.parquet as pq\n\
                      t = pq.read_table(sys.argv[1])\n\
                      i = t.schema.get_field_index('dev_t')\n\
                      v = t.column(i).to_pylist()\n\
                      v[0] = '8:x'\n\
                      t = t.set_column(i, t.schema.field(i), pa.array(v, t.schema.field(i).type))\n\
                      pq.write_table(t, sys.argv[1], compression='zstd')";
        let file = pq.join(format!("{table}.parquet"));
        ok(&run(Command::new("python3")
            .args(["-c", script])
            .arg(&file)));
    };
    let filter = ["--summary", "--filter", "dev == 8:1"];
    ok(&run(bin().arg("analyze").arg(&pq).args(filter)));
    spoil("io");
    // One row group, unreadable: nothing could be read, whatever the filter keeps.
    for engine in ["one-pass", "polars"] {
        common::one_line_error(
            &run(bin()
                .arg("analyze")
                .arg(&pq)
                .args(filter)
                .args(["--engine", engine])),
            "dev_t \"8:x\" is not a device number",
        );
    }
    spoil("devices");
    common::one_line_error(
        &run(bin().arg("analyze").arg(&pq).arg("--summary")),
        "dev_t \"8:x\" is not a device number",
    );
}

/// `iodump analyze INPUT QUESTION --format csv --engine ENGINE`: each question's answer on
/// each engine, in that order (failing unless each succeeded).
fn csv_answers(input: &Path, questions: &[&[&str]], engines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for q in questions {
        for engine in engines {
            let o = run(bin()
                .arg("analyze")
                .arg(input)
                .args(*q)
                .args(["--format", "csv", "--engine", engine]));
            ok(&o);
            out.push(String::from_utf8(o.stdout).unwrap());
        }
    }
    out
}

/// The one-pass reader takes a row group's time range from its statistics and reads the text
/// columns as dictionaries; a dataset written another way (by another tool: no statistics,
/// no dictionaries, smaller row groups) gives the same answers, read row by row.
#[test]
fn a_dataset_rewritten_without_statistics_or_dictionaries_answers_the_same() {
    let Some((_d, pq)) = pyarrow_dataset("analyze-plainpq") else {
        return;
    };
    let questions: [&[&str]; 6] = [
        &["--summary"],
        &["--top-files", "--limit", "0"],
        &["--top-procs", "--limit", "0"],
        &["--timeline"],
        &["--latency", "--group-by", "dev"],
        &["--top-files", "--filter", "op == write && dev == 8:1"],
    ];
    let answers = |pq: &Path| csv_answers(pq, &questions, &["one-pass"]);
    let before = answers(&pq);
    let script = "import sys, pyarrow.parquet as pq\n\
                  t = pq.read_table(sys.argv[1])\n\
                  pq.write_table(t, sys.argv[1], compression='zstd', write_statistics=False,\n\
                                 use_dictionary=False, row_group_size=3000)\n\
                  m = pq.ParquetFile(sys.argv[1]).metadata\n\
                  assert m.num_row_groups > 3 and not m.row_group(0).column(0).is_stats_set";
    ok(&run(Command::new("python3")
        .args(["-c", script])
        .arg(pq.join("io.parquet"))));
    let after = answers(&pq);
    for ((q, a), b) in questions.iter().zip(&before).zip(&after) {
        assert!(a.lines().count() > 1, "{q:?}: {a}");
        assert_eq!(a, b, "{q:?}");
    }
}

/// A dataset rewritten by polars or pandas (text as `large_string`), DataFusion
/// (`string_view`) or with categories (dictionaries of text, as pandas writes them), every
/// table so, gives the same answers as iodump's own, on both engines.
#[test]
fn text_columns_of_other_string_types_answer_the_same() {
    let Some((d, pq)) = pyarrow_dataset("analyze-strtypes") else {
        return;
    };
    let questions: [&[&str]; 4] = [
        &["--summary"],
        &["--top-files", "--limit", "0"],
        &["--top-procs", "--limit", "0"],
        &[
            "--latency",
            "--group-by",
            "dev",
            "--filter",
            "op == write && comm =~ \"k*\"",
        ],
    ];
    let answers = |pq: &Path| csv_answers(pq, &questions, &["one-pass", "polars"]);
    let want = answers(&pq);
    let script = "import sys, os, pyarrow as pa, pyarrow.parquet as pq\n\
                  src, dst, kind = sys.argv[1:]\n\
                  os.makedirs(dst)\n\
                  to = {'large': pa.large_string(), 'view': pa.string_view(),\n\
                  \x20     'dict': pa.dictionary(pa.int32(), pa.string()),\n\
                  \x20     'dict16': pa.dictionary(pa.int16(), pa.string())}[kind]\n\
                  for f in os.listdir(src):\n\
                  \x20   t = pq.read_table(os.path.join(src, f))\n\
                  \x20   fs = [pa.field(x.name, to, x.nullable) if x.type == pa.string() else x for x in t.schema]\n\
                  \x20   t = t.cast(pa.schema(fs, metadata=t.schema.metadata))\n\
                  \x20   pq.write_table(t, os.path.join(dst, f))\n\
                  \x20   got = pq.read_schema(os.path.join(dst, f)).field('trace').type\n\
                  \x20   assert got == to, (f, got)";
    for kind in ["large", "view", "dict", "dict16"] {
        let dst = d.join(kind);
        ok(&run(Command::new("python3")
            .args(["-c", script])
            .arg(&pq)
            .arg(&dst)
            .arg(kind)));
        for (a, b) in want.iter().zip(answers(&dst)) {
            assert!(a.lines().count() > 1, "{kind}: {a}");
            assert_eq!(a, &b, "{kind}");
        }
    }
}

/// A null in a column iodump needs a value of in every row (a rewrite that lost them) is an
/// error naming the file and column on both engines, never read as an arbitrary value; in a
/// file without statistics too.
#[test]
fn nulls_in_a_required_column_are_refused() {
    let Some((d, pq)) = pyarrow_dataset("analyze-nulls") else {
        return;
    };
    let script = "import sys, pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc\n\
                  f, col, stats = sys.argv[1], sys.argv[2], sys.argv[3] == 'stats'\n\
                  t = pq.read_table(f)\n\
                  i = t.schema.get_field_index(col)\n\
                  v = t.column(i).to_pylist()\n\
                  v[len(v) // 2] = None\n\
                  fl = t.schema.field(i).with_nullable(True)\n\
                  t = t.set_column(i, fl, pa.array(v, fl.type))\n\
                  pq.write_table(t, f, write_statistics=stats)";
    for (table, column, stats) in [
        ("io", "bytes", "stats"),
        ("io", "trace", "stats"),
        ("io", "timestamp_ns", "none"),
        ("files", "path", "stats"),
        ("processes", "tid", "none"),
    ] {
        let ds = d.join(&format!("{table}-{column}"));
        ok(&run(Command::new("cp").arg("-r").arg(&pq).arg(&ds)));
        ok(&run(Command::new("python3")
            .args(["-c", script])
            .arg(ds.join(format!("{table}.parquet")))
            .args([column, stats])));
        for engine in ["one-pass", "polars"] {
            common::one_line_error(
                &run(bin()
                    .arg("analyze")
                    .arg(&ds)
                    .args(["--top-files", "--engine", engine])),
                &format!("{table}.parquet: column {column} holds nulls"),
            );
        }
    }
}

/// A dataset whose tables another writer compressed otherwise (pyarrow: brotli, snappy,
/// lz4, gzip, none) gives the answers of iodump's own (zstd), on both engines.
#[test]
fn datasets_of_every_compression_answer_the_same() {
    let Some((d, pq)) = pyarrow_dataset("analyze-codecs") else {
        return;
    };
    let answers = |pq: &Path| -> Vec<String> {
        ["one-pass", "polars"]
            .iter()
            .flat_map(|e| {
                ["--summary", "--top-files", "--top-procs"]
                    .map(|q| analyze_csv(&[&pq.to_path_buf()], q, e))
            })
            .collect()
    };
    let want = answers(&pq);
    let script = "import sys, os, pyarrow.parquet as pq\n\
                  src, dst, codec = sys.argv[1:]\n\
                  os.makedirs(dst)\n\
                  for f in os.listdir(src):\n\
                  \x20   pq.write_table(pq.read_table(os.path.join(src, f)), os.path.join(dst, f), compression=codec)\n\
                  \x20   m = pq.ParquetFile(os.path.join(dst, f)).metadata\n\
                  \x20   assert m.row_group(0).column(0).compression == {'none': 'UNCOMPRESSED'}.get(codec, codec.upper()), f";
    for codec in ["brotli", "snappy", "lz4", "gzip", "none"] {
        let dst = d.join(codec);
        ok(&run(Command::new("python3")
            .args(["-c", script])
            .arg(&pq)
            .arg(&dst)
            .arg(codec)));
        assert_eq!(answers(&dst), want, "{codec}");
    }
}

/// A dataset's comm is its row's: a thread that execs changes its comm mid-recording, and a
/// filter on comm keeps the rows of each name, whichever rows of the thread come before.
#[test]
fn a_filter_on_comm_in_a_dataset_follows_each_row() {
    let Some((_d, pq)) = pyarrow_dataset("analyze-execpq") else {
        return;
    };
    // The busiest thread's rows: the first half named "before-exec", the rest "after-exec".
    let script = "import sys, collections, pyarrow as pa, pyarrow.parquet as pq\n\
                  t = pq.read_table(sys.argv[1])\n\
                  tids = t.column('tid').to_pylist()\n\
                  tid = collections.Counter(tids).most_common(1)[0][0]\n\
                  rows = [i for i, x in enumerate(tids) if x == tid]\n\
                  comm = t.column('comm').to_pylist()\n\
                  for k, i in enumerate(rows):\n\
                  \x20   comm[i] = 'before-exec' if k < len(rows) // 2 else 'after-exec'\n\
                  i = t.schema.get_field_index('comm')\n\
                  t = t.set_column(i, t.schema.field(i), pa.array(comm, pa.string()))\n\
                  pq.write_table(t, sys.argv[1], compression='zstd')\n\
                  print(tid, len(rows) // 2, len(rows) - len(rows) // 2)";
    let out = run(Command::new("python3")
        .args(["-c", script])
        .arg(pq.join("io.parquet")));
    ok(&out);
    let printed = String::from_utf8(out.stdout).unwrap();
    let v: Vec<u64> = printed
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let (tid, before, after) = (v[0], v[1], v[2]);
    assert!(before > 0 && after > 0, "{printed}");
    let events = |filter: &str| -> u64 {
        let out = run(bin().arg("analyze").arg(&pq).args([
            "--summary",
            "--format",
            "csv",
            "--filter",
            filter,
        ]));
        ok(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("events,"))
            .unwrap_or_else(|| panic!("{filter}: {text}"))
            .parse()
            .unwrap()
    };
    assert_eq!(events("comm == \"before-exec\""), before);
    assert_eq!(events("comm == \"after-exec\""), after);
    assert_eq!(
        events(
            "comm =~ \"*-exec\" && tid == TID"
                .replace("TID", &tid.to_string())
                .as_str()
        ),
        before + after
    );
    assert_eq!(
        events(&format!("tid == {tid} && !(comm == \"after-exec\")")),
        before
    );
}

/// A dataset without one of the tables `convert` writes (copied in part, say) is refused with
/// one line naming the table: without `files` every I/O would count as of no file (and a
/// diff against its trace would find every file gone), without `processes` every process
/// nameless.
#[test]
fn incomplete_dataset_is_refused() {
    let d = common::TempDir::new("analyze-partpq");
    let pq = d.join("pq");
    let trace = fixture("mixed-20k.iod");
    ok(&run(bin().arg("convert").arg(&trace).arg("-o").arg(&pq)));
    ok(&run(bin().arg("analyze").arg(&pq).arg("--top-files")));
    for table in ["processes", "files", "devices", "losses"] {
        let file = pq.join(format!("{table}.parquet"));
        let away = d.join(&format!("{table}.parquet"));
        std::fs::rename(&file, &away).unwrap();
        let html = d.join("diff.html");
        for args in [
            vec!["analyze".into(), pq.clone(), "--top-files".into()],
            vec!["analyze".into(), pq.clone(), "--summary".into()],
            vec!["diff".into(), trace.clone(), pq.clone()],
            vec![
                "report".into(),
                trace.clone(),
                pq.clone(),
                "-o".into(),
                html.clone(),
            ],
        ] {
            let out = run(bin().args(&args));
            common::one_line_error(&out, &format!("without its {table} table"));
        }
        assert!(!html.exists());
        std::fs::rename(&away, &file).unwrap();
    }
    // A directory of trace files and a dataset both: refused as an input (it was read as its
    // traces alone), and convert does not make one.
    let parts = d.join("parts");
    std::fs::create_dir(&parts).unwrap();
    std::fs::copy(&trace, parts.join("run.iod")).unwrap();
    common::one_line_error(
        &run(bin().arg("convert").arg(&parts).arg("-o").arg(&parts)),
        "it holds trace files (*.iod); write the dataset to a directory of its own",
    );
    assert!(!parts.join("io.parquet").exists());
    std::fs::copy(pq.join("io.parquet"), parts.join("io.parquet")).unwrap();
    common::one_line_error(
        &run(bin().arg("analyze").arg(&parts)),
        "it holds both trace files (*.iod) and a Parquet dataset",
    );
}

/// Traces are written in completion order, so a device's I/Os are not quite in time order:
/// `--seek` and `--seq-writes` put them back in order on the fly, and when a trace is too far
/// out of order for that they say so and sort the whole table; both give polars' rows.
#[test]
fn seek_and_runs_on_traces_out_of_time_order() {
    let d = common::TempDir::new("analyze-order");
    // Large enough that a device holds more I/Os than the on-the-fly reordering keeps.
    let src = d.join("src.iod");
    assert!(run(bin()
        .args([
            "synth",
            "--events",
            "100000",
            "--workload",
            "mixed",
            "--seed",
            "5",
            "-o"
        ])
        .arg(&src))
    .status
    .success());
    let r = Reader::open(&src).unwrap();
    let events: Vec<iodump_format::Event> = r.events().collect();
    let write = |name: &str, order: &[usize]| -> PathBuf {
        let p = d.join(name);
        let mut w = common::writer_like(&r, &p, 7000);
        for &i in order {
            w.push(&events[i]).unwrap();
        }
        w.finish(iodump_format::EndInfo::default()).unwrap();
        p
    };
    let n = events.len();
    // Blocks of 24 events reversed: each I/O at most 23 places from its time-order place.
    let local: Vec<usize> = (0..n)
        .collect::<Vec<_>>()
        .chunks(24)
        .flat_map(|c| c.iter().rev().copied().collect::<Vec<_>>())
        .collect();
    let reversed: Vec<usize> = (0..n).rev().collect();
    for (name, order, sorted_on_the_fly) in [
        ("local.iod", local, true),
        ("reversed.iod", reversed, false),
    ] {
        let t = write(name, &order);
        let pq = d.join(&format!("{name}.pq"));
        assert!(run(bin().arg("convert").arg(&t).arg("-o").arg(&pq))
            .status
            .success());
        for q in [
            &["--seek"][..],
            &["--seq-writes", "--min-bytes", "0", "--limit", "100000"][..],
        ] {
            let a = run(bin()
                .arg("analyze")
                .arg(&t)
                .args(q)
                .args(["--format", "json"]));
            let b = run(bin()
                .arg("analyze")
                .arg(&pq)
                .args(q)
                .args(["--format", "json", "--engine", "polars"]));
            ok(&a);
            let note = String::from_utf8_lossy(&a.stderr).contains("out of time order");
            assert_eq!(note, !sorted_on_the_fly, "{name} {q:?}: note on stderr");
            same_rows(&a.stdout, &b.stdout, &format!("{name} {q:?}"));
        }
    }
}

/// Two JSON tables are the same: same rows in the same order, equal values, numbers equal to
/// the printed precision (0.001; the two engines may round the last digit differently).
/// Runs `analyze` with `q` on the fixture trace (one pass), on the Parquet `dataset` made from
/// it with `--engine polars`, and on the dataset in one pass: all three give the same rows.
fn same_on_trace_and_parquet(dataset: &std::path::Path, q: &[&str], what: &str) {
    let go = |input: &std::path::Path, extra: &[&str]| {
        let out = run(bin().arg("analyze").arg(input).args(q).args(extra));
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let trace = go(&fixture("mixed-20k.iod"), &[]);
    let polars = go(dataset, &["--engine", "polars"]);
    same_rows(&trace, &polars, &format!("{what} polars on Parquet"));
    same_rows(&trace, &go(dataset, &[]), &format!("{what} on Parquet"));
}

fn same_rows(a: &[u8], b: &[u8], what: &str) {
    let a: serde_json::Value = serde_json::from_slice(a).unwrap();
    let b: serde_json::Value = serde_json::from_slice(b).unwrap();
    common::same_rows(&a, &b, what);
}

/// `analyze INPUT ARGS --engine ENGINE` on the trace and on its Parquet dataset, with both
/// engines: each answer's rows go to `check` (with a label, the input and the engine), and the
/// four answers must be the same rows.
fn on_every_engine(
    trace: &Path,
    pq: &Path,
    args: &[&str],
    mut check: impl FnMut(&[serde_json::Value], &str, &Path, &str),
) {
    let mut answers = Vec::new();
    for (input, engine) in [
        (trace, "one-pass"),
        (trace, "polars"),
        (pq, "one-pass"),
        (pq, "polars"),
    ] {
        let mut with_engine = args.to_vec();
        with_engine.extend(["--engine", engine]);
        let rows = common::analyze_rows(&[input], &with_engine);
        check(
            &rows,
            &format!("{args:?}: {} {engine}", input.display()),
            input,
            engine,
        );
        answers.push(serde_json::Value::Array(rows));
    }
    for a in &answers[1..] {
        common::same_rows(&answers[0], a, &format!("{args:?}"));
    }
}

/// A trace being written at `path`, recorded on `host` (2026-01-01, monotonic clock at 1 s),
/// its device table holding `sda1` (8:1): the writer and the device.
fn sda1_trace(
    path: &Path,
    host: &str,
) -> (iodump_format::Writer<std::fs::File>, iodump_format::DevT) {
    use iodump_format::*;
    let header = Header {
        wall_clock_ns: 1_767_225_600_000_000_000,
        monotonic_ns: 1_000_000_000,
        hostname: host.into(),
        ..Header::default()
    };
    let f = std::fs::File::create(path).unwrap();
    let mut w = Writer::new(f, &header, WriterOptions::default()).unwrap();
    let dev = DevT::new(8, 1);
    w.add_device(Device {
        dev,
        name: "sda1".into(),
        partition_of: None,
        sector_size: 512,
        start_sector: 0,
        bio_based: false,
        label: String::new(),
        stacked_on: Vec::new(),
    })
    .unwrap();
    (w, dev)
}

/// A small trace with one file under two names (one device and inode, two path entries, as
/// the recorder writes them after a rename), a file with one name and a label:
/// `/db/wal.tmp` (5 writes) renamed to `/db/wal` (3 writes), `/db/other` (4 reads),
/// `[metadata]` (2 reads), and `/db/new` (1 read), a new file with the first one's inode
/// number (another generation). `host` names the recording host; `pid` the writer.
fn renamed_trace(path: &std::path::Path, host: &str, pid: u32) {
    use iodump_format::*;
    let (mut w, dev) = sda1_trace(path, host);
    // The writer's command line is known, the reader's is not (shown as its comm).
    for (tid, comm, args) in [
        (pid, &b"postgres"[..], Some(&b"postgres: checkpointer"[..])),
        (pid + 1, b"reader", None),
    ] {
        w.add_process(Process {
            tid,
            pid: tid,
            comm: comm.to_vec(),
            cgroup_id: 1,
            args: args.map(<[u8]>::to_vec),
        })
        .unwrap();
    }
    let entry = |path_id, inode, kind, path: &str| PathEntry {
        path_id,
        dev,
        inode,
        kind,
        truncated: false,
        deleted: false,
        path: path.as_bytes().to_vec(),
        generation: (inode != 0).then_some(7),
    };
    w.add_path(entry(1, 100, PathKind::File, "/db/wal.tmp"))
        .unwrap();
    w.add_path(entry(2, 0, PathKind::Metadata, "[metadata]"))
        .unwrap();
    w.add_path(entry(3, 101, PathKind::File, "/db/other"))
        .unwrap();
    let mut t = 1_000_000_000;
    // The writes of inode 100 (both its names) follow each other on the disk: one run.
    let mut wal_sector = 0;
    let mut io = |w: &mut Writer<std::fs::File>, path_id, op, tid| {
        t += 1_000_000;
        let sector = if matches!(path_id, 1 | 4) {
            wal_sector += 16;
            wal_sector - 16
        } else {
            t / 1000
        };
        w.push(&Event {
            timestamp_ns: t,
            dev,
            sector,
            bytes: 8192,
            op,
            flags: Flags(0),
            pid: tid,
            tid,
            path_id,
            queue_ns: Some(1000),
            latency_ns: 50_000 + t % 7_000,
            error: 0,
            cpu: 0,
            syscall: None,
            dirtier_pid: None,
            cgroup_id: 1,
            upper: None,
        })
        .unwrap();
    };
    for _ in 0..5 {
        io(&mut w, 1, Op::Write, pid);
    }
    for _ in 0..4 {
        io(&mut w, 3, Op::Read, pid + 1);
    }
    for _ in 0..2 {
        io(&mut w, 2, Op::Read, pid + 1);
    }
    w.add_path(entry(4, 100, PathKind::File, "/db/wal"))
        .unwrap();
    for _ in 0..3 {
        io(&mut w, 4, Op::Write, pid);
    }
    // The old name's inode number given to a new file (another generation): another file.
    let mut reused = entry(5, 100, PathKind::File, "/db/new");
    reused.generation = Some(8);
    w.add_path(reused).unwrap();
    io(&mut w, 5, Op::Read, pid + 1);
    w.finish(EndInfo::default()).unwrap();
}

/// `--top-files` counts a renamed file once, under its latest name, and says it had another:
/// both engines, on the trace and on its Parquet dataset; the report too. The per-I/O outputs
/// keep the name each I/O had.
#[test]
fn renamed_file_is_one_row_under_its_latest_name() {
    let d = common::TempDir::new("analyze-renamed");
    let trace = d.join("renamed.iod");
    renamed_trace(&trace, "db1", 500);
    let pq = d.join("pq");
    common::ok(&run(bin().arg("convert").arg(&trace).arg("-o").arg(&pq)));
    on_every_engine(&trace, &pq, &["--top-files"], |rows, what, _, _| {
        assert_eq!(rows.len(), 4, "{what}: {rows:?}");
        assert_eq!(rows[0]["path"], "/db/wal", "{what}");
        assert_eq!(rows[0]["ios"], 8, "{what}");
        assert_eq!(rows[0]["write_bytes"], 8 * 8192, "{what}");
        assert_eq!(rows[0]["names"], 2, "{what}");
        assert_eq!(rows[0]["renamed_from"], "/db/wal.tmp", "{what}");
        assert_eq!(rows[0]["main_process"], "postgres", "{what}");
        assert_eq!(rows[1]["path"], "/db/other", "{what}");
        assert_eq!(rows[1]["names"], 1, "{what}");
        assert!(rows[1]["renamed_from"].is_null(), "{what}");
        assert_eq!(rows[2]["path"], "[metadata] sda1", "{what}");
        assert_eq!(rows[3]["path"], "/db/new", "{what}");
        assert_eq!(rows[3]["names"], 1, "{what}");
    });
    // Latency by file: the renamed file's I/Os in one group, under its latest name.
    on_every_engine(
        &trace,
        &pq,
        &["--latency", "--group-by", "file"],
        |rows, what, _, _| {
            let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
            assert_eq!(
                paths,
                ["/db/wal", "/db/other", "[metadata] sda1", "/db/new"],
                "{what}"
            );
            assert_eq!(rows[0]["ios"], 8, "{what}");
        },
    );
    // Sequential writes: the writes before and after the rename are one run of the file.
    on_every_engine(
        &trace,
        &pq,
        &["--seq-writes", "--min-bytes", "64k"],
        |rows, what, _, _| {
            assert_eq!(rows.len(), 1, "{what}: {rows:?}");
            assert_eq!(rows[0]["path"], "/db/wal", "{what}");
            assert_eq!(rows[0]["length_bytes"], 8 * 8192, "{what}");
            assert_eq!(rows[0]["ios"], 8, "{what}");
        },
    );
    // The summary's top file is the file, not one of its names.
    let out = run(bin()
        .arg("analyze")
        .arg(&trace)
        .args(["--summary", "--format", "json"]));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let top = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "top_file")
        .unwrap()
        .clone();
    assert_eq!(top["value"], "/db/wal");
    // Exports keep the name at the time of each I/O.
    let csv = d.join("io.csv");
    common::ok(&run(bin()
        .arg("export")
        .arg(&trace)
        .args(["--format", "csv", "-o"])
        .arg(&csv)));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.matches(",/db/wal.tmp,").count(), 5, "{text}");
    assert_eq!(text.matches(",/db/wal,").count(), 3, "{text}");
    for input in [&trace, &pq] {
        let out = run(bin().arg("analyze").arg(input).args([
            "--sql",
            "SELECT f.path, f.latest_path, count(*) AS n FROM io JOIN files f USING (trace, path_id) \
             WHERE f.file_id = 4 GROUP BY f.path, f.latest_path ORDER BY f.path",
            "--format",
            "csv",
        ]));
        common::ok(&out);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "path,latest_path,n\n/db/wal,/db/wal,3\n/db/wal.tmp,/db/wal,5\n"
        );
    }
    // The report: one top file entry for both names.
    let html = d.join("r.html");
    common::ok(&run(bin().arg("report").arg(&trace).arg("-o").arg(&html)));
    let data = common::embedded_report_data(&std::fs::read_to_string(&html).unwrap());
    let files = data["traces"][0]["top_files"].as_array().unwrap();
    assert_eq!(files[0]["path"], "/db/wal");
    assert_eq!(files[0]["ios"], 8);
    assert_eq!(files[0]["names"], 2);
    assert_eq!(files[0]["renamed_from"], "/db/wal.tmp");
    assert_eq!(data["traces"][0]["file_count"], 4);
}

/// A file renamed while recording, on ext4 on zram: O_DIRECT writes from one held file
/// descriptor before and after the rename. The I/O after it carries the new name (the kernel
/// side re-checks names about once a second, hence the pause), `--top-files` shows one file
/// under its new name that was renamed from the old one, and the export keeps both names.
#[test]
fn recorded_rename_is_one_file_under_its_new_name() {
    if !common::bpf_available("recorded_rename_is_one_file_under_its_new_name") {
        return;
    }
    let zram = common::devices::Zram::new("128M");
    let d = common::TempDir::new("analyze-rename");
    let mnt = d.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let sh = |c: &str| {
        let st = std::process::Command::new("sh")
            .arg("-c")
            .arg(c)
            .status()
            .unwrap();
        assert!(st.success(), "{c}");
    };
    sh(&format!(
        "mkfs.ext4 -q -F {} && mount {} {}",
        zram.node(),
        zram.node(),
        mnt.display()
    ));
    struct Umount(std::path::PathBuf);
    impl Drop for Umount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _umount = Umount(mnt.clone());
    let (a, b) = (mnt.join("segment.tmp"), mnt.join("segment"));
    sh(&format!(
        "dd if=/dev/zero of={} bs=1M count=1 status=none conv=fsync",
        a.display()
    ));
    let trace = d.join("rename.iod");
    let script = "import mmap, os, sys, time\n\
        a, b = sys.argv[1:3]\n\
        fd = os.open(a, os.O_WRONLY | os.O_DIRECT)\n\
        buf = mmap.mmap(-1, 4096)\n\
        buf.write(b'x' * 4096)\n\
        for i in range(20): os.pwrite(fd, buf, 4096 * i)\n\
        os.rename(a, b)\n\
        time.sleep(2.5)\n\
        for i in range(30): os.pwrite(fd, buf, 4096 * (100 + i))\n\
        os.close(fd)\n";
    let out = run(bin()
        .args(["record", "-d", &zram.name(), "-o"])
        .arg(&trace)
        .args(["--", "python3", "-c", script])
        .arg(&a)
        .arg(&b));
    common::ok(&out);
    let (a_s, b_s) = (a.display().to_string(), b.display().to_string());
    for engine in ["one-pass", "polars"] {
        let out = run(bin().arg("analyze").arg(&trace).args([
            "--top-files",
            "--format",
            "json",
            "--engine",
            engine,
        ]));
        common::ok(&out);
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["main_process"] == "python3")
            .unwrap_or_else(|| panic!("{engine}: no file of python3: {rows}"))
            .clone();
        assert_eq!(row["path"], b_s, "{engine}: {row}");
        assert_eq!(row["names"], 2, "{engine}: {row}");
        assert_eq!(row["renamed_from"], a_s, "{engine}: {row}");
        assert_eq!(row["ios"], 50, "{engine}: {row}");
        assert!(
            !rows.as_array().unwrap().iter().any(|r| r["path"] == a_s),
            "{engine}: the old name is not a row of its own: {rows}"
        );
    }
    let csv = d.join("io.csv");
    common::ok(&run(bin()
        .arg("export")
        .arg(&trace)
        .args(["--format", "csv", "-o"])
        .arg(&csv)));
    let text = std::fs::read_to_string(&csv).unwrap();
    let writes = |name: &str| {
        text.lines()
            .filter(|l| l.contains(",python3,") && l.contains(",W,"))
            .filter(|l| l.split(',').nth(6) == Some(name))
            .count()
    };
    assert_eq!((writes(&a_s), writes(&b_s)), (20, 30), "{text}");
}

/// `--top-procs` shows each process's command line last (its comm when the trace does not
/// know it): both engines, on the trace and on its Parquet dataset; the report and the
/// exports too.
#[test]
fn command_lines_in_top_procs_report_and_exports() {
    let d = common::TempDir::new("analyze-args");
    let trace = d.join("args.iod");
    renamed_trace(&trace, "db1", 500);
    let pq = d.join("pq");
    common::ok(&run(bin().arg("convert").arg(&trace).arg("-o").arg(&pq)));
    on_every_engine(
        &trace,
        &pq,
        &["--top-procs"],
        |rows, what, input, engine| {
            let csv = run(bin().arg("analyze").arg(input).args([
                "--top-procs",
                "--format",
                "csv",
                "--engine",
                engine,
            ]));
            let header = String::from_utf8_lossy(&csv.stdout);
            let header = header.lines().next().unwrap_or_default();
            assert_eq!(
                header, "pid,comm,ios,iops,read_bytes,write_bytes,mb_per_s,args",
                "{what}"
            );
            assert_eq!(rows[0]["comm"], "postgres", "{what}");
            assert_eq!(rows[0]["args"], "postgres: checkpointer", "{what}");
            assert_eq!(rows[1]["args"], "reader", "{what}");
        },
    );
    let out = run(bin().arg("analyze").arg(&pq).args([
        "--sql",
        "SELECT tid, comm, args FROM processes ORDER BY tid",
        "--format",
        "csv",
    ]));
    common::ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "tid,comm,args\n500,postgres,postgres: checkpointer\n501,reader,reader\n"
    );
    // Exports: `args` last.
    let csv = d.join("io.csv");
    common::ok(&run(bin()
        .arg("export")
        .arg(&trace)
        .args(["--format", "csv", "-o"])
        .arg(&csv)));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("timestamp,pid,comm,iosize,rw,lba,path,"));
    assert!(text
        .lines()
        .next()
        .unwrap()
        .ends_with(",dirtier_pid,upper_dev,upper_timestamp_ns,args"));
    assert_eq!(text.matches(",postgres: checkpointer\n").count(), 8);
    assert_eq!(text.matches(",reader\n").count(), 7);
    // The report's top processes.
    let html = d.join("r.html");
    common::ok(&run(bin().arg("report").arg(&trace).arg("-o").arg(&html)));
    let data = common::embedded_report_data(&std::fs::read_to_string(&html).unwrap());
    let procs = data["traces"][0]["top_processes"].as_array().unwrap();
    assert_eq!(procs[0]["args"], "postgres: checkpointer");
    assert_eq!(procs[1]["args"], "reader");
}

/// Listings of several traces say which trace each row is from: a `trace` column first (and
/// the same pid in two traces is two rows); one trace has no such column. Both engines, on
/// the traces and on one Parquet dataset of both.
#[test]
fn listings_of_several_traces_name_the_trace() {
    let d = common::TempDir::new("analyze-traces");
    let (a, b, pq) = (d.join("db1.iod"), d.join("db2.iod"), d.join("pq"));
    two_renamed_traces(&a, &b, &pq);
    for engine in ["one-pass", "polars"] {
        for inputs in [&[&a, &b][..], &[&pq][..]] {
            let what = format!("{inputs:?} {engine}");
            let files = analyze_csv(inputs, "--top-files", engine);
            let lines: Vec<&str> = files.lines().collect();
            assert!(lines[0].starts_with("trace,path,ios,"), "{what}: {files}");
            assert!(
                lines[1].starts_with("db1.iod,/db/wal,8,"),
                "{what}: {files}"
            );
            assert!(
                lines[2].starts_with("db2.iod,/db/wal,8,"),
                "{what}: {files}"
            );
            assert_eq!(lines.len(), 9, "{what}: {files}");
            let procs = analyze_csv(inputs, "--top-procs", engine);
            let lines: Vec<&str> = procs.lines().collect();
            assert!(lines[0].starts_with("trace,pid,comm,"), "{what}: {procs}");
            assert!(
                lines[1].starts_with("db1.iod,500,postgres,8,"),
                "{what}: {procs}"
            );
            assert!(
                lines[2].starts_with("db2.iod,500,postgres,8,"),
                "{what}: {procs}"
            );
            assert_eq!(lines.len(), 5, "{what}: {procs}");
        }
        let one = analyze_csv(&[&a], "--top-files", engine);
        assert!(one.starts_with("path,ios,"), "{engine}: {one}");
        let one = analyze_csv(&[&a], "--top-procs", engine);
        assert!(one.starts_with("pid,comm,"), "{engine}: {one}");
    }
}

/// The two engines print the same bytes, not only the same figures to the printed precision:
/// a percentile that falls on a tie at the thousandth (144.8155 µs) used to print .815 on one
/// and .816 on the other.
#[test]
fn both_engines_print_the_same_bytes() {
    for trace in ["mixed-20k.iod", "oltp-5k.iod"] {
        for q in [
            &["--summary"][..],
            &["--top-files", "--limit", "0"],
            &["--top-procs", "--limit", "0"],
            &["--latency", "--group-by", "file"],
            &["--latency", "--group-by", "proc"],
            &["--latency", "--group-by", "dev"],
            &["--timeline"],
            &["--seek"],
        ] {
            let csv = |engine: &str| {
                let out = run(bin()
                    .arg("analyze")
                    .arg(fixture(trace))
                    .args(q)
                    .args(["--format", "csv", "--engine", engine]));
                ok(&out);
                String::from_utf8(out.stdout).unwrap()
            };
            assert_eq!(csv("one-pass"), csv("polars"), "{trace} {q:?}");
        }
    }
}

/// Two traces of [`renamed_trace`] (hosts db1 and db2, the writer pid 500 in each) at `a`
/// and `b`, and a Parquet dataset of both at `pq`.
fn two_renamed_traces(a: &Path, b: &Path, pq: &Path) {
    renamed_trace(a, "db1", 500);
    renamed_trace(b, "db2", 500);
    common::ok(&run(bin().arg("convert").arg(a).arg(b).arg("-o").arg(pq)));
}

/// `iodump analyze INPUTS Q --format csv --engine ENGINE` (failing unless it succeeded).
fn analyze_csv(inputs: &[&PathBuf], q: &str, engine: &str) -> String {
    let out = run(bin()
        .arg("analyze")
        .args(inputs)
        .args([q, "--format", "csv", "--engine", engine]));
    common::ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

/// The `events` figure of `analyze --summary --format json`.
fn events(summary: &[serde_json::Value]) -> u64 {
    summary
        .iter()
        .find(|r| r["metric"] == "events")
        .and_then(|r| r["value"].as_u64())
        .expect("an events figure")
}

/// Traces of one file name in different directories are two traces (named by their paths),
/// on every engine and once converted into one dataset; a file named twice is read once; two
/// datasets that both hold a trace of one name are refused rather than added together.
#[test]
fn traces_of_one_name_stay_apart_and_a_file_counts_once() {
    let d = common::TempDir::new("analyze-same-name");
    for h in ["h1", "h2"] {
        std::fs::create_dir(d.join(h)).unwrap();
    }
    let (a, b) = (d.join("h1").join("run.iod"), d.join("h2").join("run.iod"));
    let pq = d.join("pq");
    two_renamed_traces(&a, &b, &pq);
    let (na, nb) = (a.display().to_string(), b.display().to_string());
    for engine in ["one-pass", "polars"] {
        for inputs in [&[&a, &b][..], &[&pq][..]] {
            let what = format!("{inputs:?} {engine}");
            let procs = analyze_csv(inputs, "--top-procs", engine);
            let lines: Vec<&str> = procs.lines().collect();
            assert!(lines[0].starts_with("trace,pid,comm,"), "{what}: {procs}");
            assert!(
                lines[1].starts_with(&format!("{na},500,postgres,8,")),
                "{what}: {procs}"
            );
            assert!(
                lines[2].starts_with(&format!("{nb},500,postgres,8,")),
                "{what}: {procs}"
            );
            let summary = common::analyze_rows(inputs, &["--summary", "--engine", engine]);
            let one = common::analyze_rows(&[&a], &["--summary", "--engine", engine]);
            assert_eq!(events(&summary), events(&one) * 2, "{what}");
        }
        // One file, named twice.
        let same = d.join("h1").join(".").join("run.iod");
        let once = common::analyze_rows(&[&a], &["--summary", "--engine", engine]);
        let twice = common::analyze_rows(&[&a, &same], &["--summary", "--engine", engine]);
        assert_eq!(events(&once), events(&twice), "{engine}");
        let pq_twice =
            common::analyze_rows(&[&pq, &pq.join(".")], &["--summary", "--engine", engine]);
        assert_eq!(events(&pq_twice), events(&once) * 2, "{engine}");
    }
    // Each converted alone: both datasets hold a trace named run.iod.
    let (pa, pb) = (d.join("pa"), d.join("pb"));
    common::ok(&run(bin().arg("convert").arg(&a).arg("-o").arg(&pa)));
    common::ok(&run(bin().arg("convert").arg(&b).arg("-o").arg(&pb)));
    common::one_line_error(
        &run(bin().arg("analyze").arg(&pa).arg(&pb)),
        "both hold a trace named \"run.iod\"",
    );
}

/// `convert` into a directory holding a dataset it would not replace entirely (the other
/// layout, partitions of another host) is refused and leaves the old dataset whole; the same
/// conversion again replaces it; a dataset holding a table in both layouts is refused.
#[test]
fn convert_never_leaves_an_old_dataset_beside_the_new() {
    let d = common::TempDir::new("convert-again");
    let (a, b) = (d.join("db1.iod"), d.join("db2.iod"));
    renamed_trace(&a, "db1", 500);
    renamed_trace(&b, "db2", 500);
    let convert = |t: &Path, ds: &Path, by: &[&str]| {
        run(bin().arg("convert").arg(t).arg("-o").arg(ds).args(by))
    };
    let by_host = ["--partition-by", "host"];
    let (flat, parted) = (d.join("flat"), d.join("parted"));
    common::ok(&convert(&a, &flat, &[]));
    common::ok(&convert(&a, &flat, &[]));
    common::ok(&convert(&a, &parted, &by_host));
    common::ok(&convert(&a, &parted, &by_host));
    let want = events(&common::analyze_rows(&[&a], &["--summary"]));
    for (ds, by) in [(&flat, &by_host[..]), (&parted, &[][..])] {
        common::one_line_error(&convert(&b, ds, by), "would not replace entirely");
        assert_eq!(events(&common::analyze_rows(&[ds], &["--summary"])), want);
    }
    // Another host's partitions only: db1's would stay. Nothing of the refused conversion
    // is left behind, not even a directory.
    common::one_line_error(&convert(&b, &parted, &by_host), "host=db1");
    for t in ["io", "files", "processes", "devices", "losses", "cgroups"] {
        assert_eq!(common::names_in(&parted.join(t)), ["host=db1"], "{t}");
    }

    let rows = common::analyze_rows(&[&parted], &["--top-procs"]);
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Made by hand: both layouts in one directory.
    std::fs::create_dir(flat.join("io")).unwrap();
    std::fs::copy(
        flat.join("io.parquet"),
        flat.join("io").join("part-0.parquet"),
    )
    .unwrap();
    common::one_line_error(
        &run(bin().arg("analyze").arg(&flat)),
        "holds the io table both flat",
    );
}

/// Hosts whose names could share one partition directory (`a/b` and `a_b`, both `host=a_b`
/// while a `/` was written `_`) keep every table's rows: the dataset's answers are those of
/// the traces themselves, on both engines. The engines read each host's exact name from its
/// directory, which escapes what Hive escapes (`%2F`).
#[test]
fn hosts_of_one_partition_directory_keep_all_their_rows() {
    let d = common::TempDir::new("convert-host-clash");
    let (a, b, ds) = (d.join("ab1.iod"), d.join("ab2.iod"), d.join("ds"));
    renamed_trace(&a, "a/b", 500);
    renamed_trace(&b, "a_b", 600);
    common::ok(&run(bin()
        .arg("convert")
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&ds)
        .args(["--partition-by", "host"])));
    for q in ["--top-files", "--top-procs"] {
        for e in ["one-pass", "polars"] {
            let want = analyze_csv(&[&a, &b], q, e);
            assert!(
                want.contains("ab1.iod") && want.contains("ab2.iod"),
                "{want}"
            );
            assert!(want.contains("postgres"), "{q}: {want}");
            assert_eq!(analyze_csv(&[&ds], q, e), want, "{q} {e}");
        }
    }
    if !common::have_pandas() {
        common::skip(
            "hosts_of_one_partition_directory_keep_all_their_rows",
            "pyarrow",
        );
        return;
    }
    let c = d.join("c.iod");
    renamed_trace(&c, "db%41:x=#?'\"*[]^{\\", 700);
    let ds = d.join("ds2");
    ok(&run(bin()
        .arg("convert")
        .arg(&a)
        .arg(&b)
        .arg(&c)
        .arg("-o")
        .arg(&ds)
        .args(["--partition-by", "host,date"])));
    let script = "import sys, json, pyarrow.dataset as ds\n\
                  for t in ['io', 'processes', 'files']:\n\
                  \x20   h = ds.dataset(sys.argv[1] + '/' + t, partitioning='hive').to_table().column('host')\n\
                  \x20   print(json.dumps(sorted(set(h.to_pylist()))))";
    let out = run(Command::new("python3").args(["-c", script]).arg(&ds));
    ok(&out);
    let want = r#"["a/b", "a_b", "db%41:x=#?'\"*[]^{\\"]"#;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        assert_eq!(line, want);
    }
}

/// Copies every file below `from` into `to` (directories created), renaming each file
/// `part-0.parquet` to `rename` (the files of a second dataset merged into a first).
fn merge_tree(from: &Path, to: &Path, rename: &str) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, mut dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
            merge_tree(&src, &dst, rename);
        } else {
            if e.file_name() == "part-0.parquet" {
                dst = to.join(rename);
            }
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// One dataset tree holding a trace twice is refused, naming the trace: traces of one file
/// name from two hosts (two machines' datasets merged into one tree: one's files would be
/// joined to the other's I/O), or one trace twice (a `--partition-by host` copy beside a
/// `host,date` one: every count doubled). A trace split by another tool over several files
/// is still one.
#[test]
fn a_trace_twice_in_one_dataset_is_refused() {
    let d = common::TempDir::new("analyze-trace-twice");
    for h in ["m1", "m2"] {
        std::fs::create_dir(d.join(h)).unwrap();
        renamed_trace(&d.join(h).join("run.iod"), &format!("db-{h}"), 500);
    }
    let convert = |t: &Path, ds: &Path, by: &str| {
        ok(&run(bin()
            .arg("convert")
            .arg(t)
            .arg("-o")
            .arg(ds)
            .args(["--partition-by", by])))
    };
    let (m1, m2) = (d.join("m1").join("run.iod"), d.join("m2").join("run.iod"));
    let (two_hosts, twice) = (d.join("two-hosts"), d.join("twice"));
    convert(&m1, &two_hosts, "host,date");
    convert(&m2, &d.join("other"), "host,date");
    merge_tree(&d.join("other"), &two_hosts, "part-0.parquet");
    convert(&m1, &twice, "host,date");
    convert(&m1, &d.join("copy"), "host");
    merge_tree(&d.join("copy"), &twice, "part-1.parquet");
    for engine in ["one-pass", "polars"] {
        common::one_line_error(
            &run(bin()
                .arg("analyze")
                .arg(&two_hosts)
                .args(["--engine", engine])),
            "holds the trace \"run.iod\" under two hosts, \"db-m1\" and \"db-m2\"",
        );
        common::one_line_error(
            &run(bin().arg("analyze").arg(&twice).args(["--engine", engine])),
            "holds the trace \"run.iod\" twice",
        );
    }
    // Split in two by hand, each half in a file of its own: one trace.
    if !common::have_pandas() {
        common::skip("a_trace_twice_in_one_dataset_is_refused", "pyarrow");
        return;
    }
    let split = d.join("split");
    convert(&m1, &split, "host");
    let want = analyze_csv(&[&split], "--top-procs", "one-pass");
    let script = "import sys, pyarrow.parquet as pq\n\
                  for t in ['devices', 'processes']:\n\
                  \x20   f = sys.argv[1] + '/' + t + '/host=db-m1/part-0.parquet'\n\
                  \x20   a = pq.read_table(f)\n\
                  \x20   n = a.num_rows // 2\n\
                  \x20   pq.write_table(a.slice(0, n), f)\n\
                  \x20   pq.write_table(a.slice(n), f.replace('part-0', 'part-1'))";
    ok(&run(Command::new("python3")
        .args(["-c", script])
        .arg(&split)));
    assert_eq!(analyze_csv(&[&split], "--top-procs", "one-pass"), want);
}

/// I/O of a trace that the dataset's `files`, `processes` or `devices` table has no row of
/// (a merge that lost them) is refused on both engines, naming the trace and the table,
/// rather than counted as of no file or process.
#[test]
fn io_of_a_trace_missing_from_a_small_table_is_refused() {
    let d = common::TempDir::new("analyze-io-orphan");
    let (a, b) = (d.join("db1.iod"), d.join("db2.iod"));
    renamed_trace(&a, "db1", 500);
    renamed_trace(&b, "db2", 600);
    for table in ["files", "processes", "devices"] {
        let ds = d.join(table);
        ok(&run(bin()
            .arg("convert")
            .arg(&a)
            .arg(&b)
            .arg("-o")
            .arg(&ds)
            .args(["--partition-by", "host"])));
        std::fs::remove_dir_all(ds.join(table).join("host=db2")).unwrap();
        for engine in ["one-pass", "polars"] {
            common::one_line_error(
                &run(bin().arg("analyze").arg(&ds).args(["--engine", engine])),
                &format!(
                    "I/O of the trace \"db2.iod\", of which the dataset's {table} table has no row"
                ),
            );
        }
    }
}

/// A table's directory holding no Parquet file (a table of no rows as Spark or DuckDB leave
/// it: a `_SUCCESS` marker, or nothing) is a table of no rows, on both engines; a directory
/// whose only table-like entry is an empty `io/` is no dataset.
#[test]
fn a_table_directory_of_no_parquet_file_is_an_empty_table() {
    let d = common::TempDir::new("analyze-empty-table-dir");
    let (a, ds) = (d.join("db1.iod"), d.join("ds"));
    renamed_trace(&a, "db1", 500);
    ok(&run(bin()
        .arg("convert")
        .arg(&a)
        .arg("-o")
        .arg(&ds)
        .args(["--partition-by", "host,date"])));
    let want: Vec<String> = ["one-pass", "polars"]
        .iter()
        .map(|e| analyze_csv(&[&ds], "--summary", e))
        .collect();
    let empty = |table: &str, marker: bool| {
        std::fs::remove_dir_all(ds.join(table)).unwrap();
        std::fs::create_dir(ds.join(table)).unwrap();
        if marker {
            std::fs::write(ds.join(table).join("_SUCCESS"), b"").unwrap();
        }
    };
    // The losses and cgroups of a trace without any (as Spark writes an empty table).
    empty("losses", true);
    empty("cgroups", false);
    for (e, want) in ["one-pass", "polars"].iter().zip(&want) {
        assert_eq!(&analyze_csv(&[&ds], "--summary", e), want, "{e}");
    }
    // Every table empty: a dataset of no I/O.
    for t in ["io", "files", "processes", "devices"] {
        empty(t, t == "io");
    }
    for e in ["one-pass", "polars"] {
        let s = common::analyze_rows(&[&ds], &["--summary", "--engine", e]);
        assert_eq!(events(&s), 0, "{e}");
    }
    let lone = d.join("lone");
    std::fs::create_dir_all(lone.join("io")).unwrap();
    common::one_line_error(&run(bin().arg("analyze").arg(&lone)), "neither a recording");
}

/// Every visible file of a table's directory is Parquet, whatever its name, as Spark and
/// pyarrow read it (Hive and Trino write `000000_0`): none is left out; one that is not
/// Parquet is an error naming it.
#[test]
fn partition_files_of_any_name_are_read() {
    let d = common::TempDir::new("analyze-noext");
    let (a, b, ds) = (d.join("db1.iod"), d.join("db2.iod"), d.join("ds"));
    renamed_trace(&a, "db1", 500);
    renamed_trace(&b, "db2", 600);
    ok(&run(bin()
        .arg("convert")
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&ds)
        .args(["--partition-by", "host,date"])));
    let want: Vec<String> = ["one-pass", "polars"]
        .iter()
        .map(|e| analyze_csv(&[&ds], "--top-files", e))
        .collect();
    assert!(want[0].contains("db2.iod"), "{}", want[0]);
    // Every file renamed as Hive names them.
    fn rename_all(dir: &Path) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                rename_all(&p);
            } else {
                std::fs::rename(&p, p.with_file_name("000000_0")).unwrap();
            }
        }
    }
    rename_all(&ds);
    for (e, want) in ["one-pass", "polars"].iter().zip(&want) {
        assert_eq!(&analyze_csv(&[&ds], "--top-files", e), want, "{e}");
    }
    let junk = ds.join("io").join("host=db2").join("notes.txt");
    std::fs::write(&junk, b"not parquet").unwrap();
    common::one_line_error(&run(bin().arg("analyze").arg(&ds)), "notes.txt");
}

/// In a hive-style dataset, what Spark and pyarrow leave out is not read: the hidden
/// temporary file of a `convert` still running (or killed), `_` files and directories; a
/// partition linked from elsewhere is read, and a link to a directory above reads nothing
/// twice. Every engine, and `convert` into it sees the same files.
#[test]
fn a_dataset_is_its_visible_partitions_each_read_once() {
    let d = common::TempDir::new("analyze-hidden-parts");
    let (a, ds) = (d.join("db1.iod"), d.join("ds"));
    renamed_trace(&a, "db1", 500);
    let convert = || {
        common::ok(&run(bin()
            .arg("convert")
            .arg(&a)
            .arg("-o")
            .arg(&ds)
            .args(["--partition-by", "host"])))
    };
    convert();
    let want: Vec<String> = ["one-pass", "polars"]
        .iter()
        .map(|e| analyze_csv(&[&ds], "--top-files", e))
        .collect();
    let part = ds.join("io").join("host=db1");
    let file = part.join("part-0.parquet");
    assert!(file.is_file(), "{file:?}");
    std::fs::copy(&file, part.join(".iodump-0123456789abcdef-part-0.parquet")).unwrap();
    std::fs::copy(&file, part.join("_part-1.parquet")).unwrap();
    std::fs::create_dir(part.join("_temporary")).unwrap();
    std::fs::copy(&file, part.join("_temporary").join("part-2.parquet")).unwrap();
    // The partition moved out and linked back in, and a link in it to the table's directory.
    let elsewhere = d.join("elsewhere");
    std::fs::rename(&part, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &part).unwrap();
    std::os::unix::fs::symlink(ds.join("io"), elsewhere.join("up")).unwrap();
    for (e, want) in ["one-pass", "polars"].iter().zip(&want) {
        assert_eq!(&analyze_csv(&[&ds], "--top-files", e), want, "engine {e}");
    }
    // Converted again in place: the same files replaced, nothing else found stale.
    convert();
    assert_eq!(&analyze_csv(&[&ds], "--top-files", "one-pass"), &want[0]);
}

#[test]
fn a_trace_without_its_footer_gives_the_same_answers() {
    // Cut where the footer starts: every chunk before it is intact, as in a trace still being
    // recorded. With a footer, the queries take each segment's time range from it; without
    // one, from the decoded timestamps: the answers (durations, rates) must be the same.
    let src = fixture("mixed-20k.iod");
    let r = Reader::open(&src).unwrap();
    assert!(r.has_footer() && r.segments().len() > 1);
    let footer = r
        .chunks()
        .iter()
        .find(|c| c.header.kind == iodump_format::chunk::ChunkType::Footer)
        .expect("a footer chunk")
        .offset;
    let dir = common::TempDir::new("analyze-no-footer");
    let cut = dir.join("cut.iod");
    std::fs::write(&cut, &std::fs::read(&src).unwrap()[..footer as usize]).unwrap();
    assert!(!Reader::open(&cut).unwrap().has_footer());
    for q in [
        &["--summary"][..],
        &["--top-files"],
        &["--top-files", "--by", "latency"],
        &["--top-procs"],
        &["--latency", "--group-by", "dev"],
        &["--timeline"],
    ] {
        let with = common::analyze_rows(&[&src], q);
        let without = common::analyze_rows(&[&cut], q);
        common::same_rows(
            &serde_json::Value::Array(with),
            &serde_json::Value::Array(without),
            &format!("{q:?} with and without the footer"),
        );
    }
}

/// A conversion of no I/O (a trace of none, a filter that keeps nothing), partitioned or
/// flat, writes an empty `io` table that iodump (both engines, `--sql` too) and pyarrow read
/// as 0 rows, with the other tables whole.
#[test]
fn a_conversion_of_no_io_is_an_empty_dataset() {
    let d = common::TempDir::new("convert-no-io");
    let empty = d.join("empty.iod");
    ok(&run(bin()
        .args(["synth", "--events", "0", "--workload", "mixed", "-o"])
        .arg(&empty)));
    let mixed = fixture("mixed-20k.iod");
    let nothing = ["--filter", "bytes > 1T"];
    let mut datasets = Vec::new();
    for (i, (trace, filter)) in [(&empty, &[][..]), (&mixed, &nothing[..])]
        .into_iter()
        .enumerate()
    {
        for by in [None, Some("host"), Some("date"), Some("host,date")] {
            let ds = d.join(&format!("ds{i}-{}", by.unwrap_or("flat").replace(',', "-")));
            let mut cmd = bin();
            cmd.arg("convert")
                .arg(trace)
                .arg("-o")
                .arg(&ds)
                .args(filter);
            if let Some(by) = by {
                cmd.args(["--partition-by", by]);
            }
            let out = run(&mut cmd);
            ok(&out);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("no I/O"), "{ds:?}: {err}");
            datasets.push(ds);
        }
    }
    for ds in &datasets {
        for engine in ["one-pass", "polars"] {
            let s = common::analyze_rows(&[ds], &["--summary", "--engine", engine]);
            assert_eq!(events(&s), 0, "{ds:?} {engine}");
        }
        let n = common::analyze_rows(&[ds], &["--sql", "SELECT count(*) AS n FROM io"]);
        assert_eq!(n[0]["n"], 0, "{ds:?}");
        // The filter left the small tables whole.
        if ds.to_string_lossy().contains("ds1") {
            let rows = common::analyze_rows(&[ds], &["--sql", "SELECT count(*) AS n FROM files"]);
            assert!(rows[0]["n"].as_u64().unwrap() > 10, "{ds:?}: {rows:?}");
        }
    }
    if !common::have_pandas() {
        common::skip("a_conversion_of_no_io_is_an_empty_dataset", "pyarrow");
        return;
    }
    let script = "import sys, pyarrow.dataset as ds\n\
                  for d in sys.argv[1:]:\n\
                  \x20   io = d + ('/io.parquet' if d.endswith('flat') else '/io')\n\
                  \x20   t = ds.dataset(io, partitioning='hive').to_table()\n\
                  \x20   assert t.num_rows == 0 and 'bytes' in t.column_names, (d, t.schema)";
    ok(&run(Command::new("python3")
        .args(["-c", script])
        .args(&datasets)));
}

#[test]
fn an_answer_of_no_io_says_why() {
    let trace = fixture("mixed-20k.iod");
    let analyze = |filter: &str| {
        let out = run(bin()
            .args(["analyze", "--top-files", "--filter", filter])
            .arg(&trace));
        ok(&out);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // A filter that keeps nothing: an empty table, and a warning saying so.
    let err = analyze("path == \"/no/such/file\"");
    assert!(
        err.contains("warning: the filter kept no I/O of the input"),
        "{err}"
    );
    // One that keeps some: no warning.
    assert!(!analyze("bytes > 0").contains("warning"));
    // Every question, on either engine: an answer of nothing, not a failure (`--summary` on
    // the polars engine once failed on its empty table).
    for q in [
        "--summary",
        "--top-files",
        "--top-procs",
        "--latency",
        "--timeline",
        "--seek",
        "--seq-writes",
    ] {
        for engine in ["one-pass", "polars"] {
            let out = run(bin()
                .args(["analyze", q, "--engine", engine, "--filter", "bytes > 1T"])
                .arg(&trace));
            ok(&out);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("the filter kept no I/O"),
                "{q} {engine}: {err}"
            );
            // The same answer from both engines; only the summary has a row, whose figures
            // of no I/O (latencies, top process and file) are missing, not 0.
            let out = run(bin()
                .args(["analyze", q, "--engine", engine, "--format", "csv"])
                .args(["--filter", "bytes > 1T"])
                .arg(&trace));
            let csv = String::from_utf8_lossy(&out.stdout).into_owned();
            if q == "--summary" {
                for m in [
                    "p50_latency_us",
                    "max_latency_us",
                    "top_process",
                    "top_file",
                ] {
                    assert!(csv.contains(&format!("\n{m},\n")), "{engine}: {csv}");
                }
            } else {
                assert_eq!(
                    csv.lines().count(),
                    1,
                    "{q} {engine}: only the header: {csv}"
                );
            }
        }
    }
    // A filter does not explain an input of which nothing could be read: every chunk past
    // the header damaged is an error, with a filter as without.
    let d = common::TempDir::new("analyze-noio");
    let damaged = d.join("damaged.iod");
    let mut b = std::fs::read(&trace).unwrap();
    let n = b.len();
    for off in (n / 10..n * 9 / 10).step_by(997) {
        b[off] ^= 0x55;
    }
    std::fs::write(&damaged, b).unwrap();
    for filter in [&[][..], &["--filter", "op == read"][..]] {
        for engine in ["one-pass", "polars"] {
            common::one_line_error(
                &run(bin()
                    .args(["analyze", "--summary", "--engine", engine])
                    .args(filter)
                    .arg(&damaged)),
                "damaged.iod: nothing could be read (first damage: ",
            );
        }
    }
    // diff: each side the filter emptied, named.
    let out = run(bin()
        .arg("diff")
        .arg(&trace)
        .arg(&trace)
        .args(["--filter", "pid == 0 && pid == 1"]));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.matches("warning: the filter kept no I/O of").count(),
        2,
        "{err}"
    );
    assert!(err.contains("of A (") && err.contains("of B ("), "{err}");
    // export of a trace without I/O: the warning analyze and convert give.
    let empty = d.join("empty.iod");
    ok(&run(bin()
        .args(["synth", "--events", "0", "--workload", "oltp", "-o"])
        .arg(&empty)));
    let out = run(bin()
        .arg("export")
        .arg(&empty)
        .args(["--format", "csv", "-o"])
        .arg(d.join("empty.csv")));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("empty.iod holds no I/O"), "{err}");
}

/// Names as a hostile user can make them: a file name, a command name and a command line
/// with terminal escape sequences, a newline, HTML and a byte that is not UTF-8; a host and
/// a device name with an escape sequence (a trace from elsewhere). Four reads and four
/// writes of the file by one process.
fn hostile_trace(path: &Path) {
    use iodump_format::*;
    let header = Header {
        wall_clock_ns: 1_767_225_600_000_000_000,
        monotonic_ns: 1_000_000_000,
        hostname: "h\x1b[2Jost".into(),
        recorder_argv: vec!["iodump".into(), "record\x1b]0;title\x07".into()],
        ..Header::default()
    };
    let f = std::fs::File::create(path).unwrap();
    let mut w = Writer::new(f, &header, WriterOptions::default()).unwrap();
    let dev = DevT::new(8, 1);
    w.add_device(Device {
        dev,
        name: "sd\x1b[5ma".into(),
        partition_of: None,
        sector_size: 512,
        start_sector: 0,
        bio_based: false,
        label: String::new(),
        stacked_on: Vec::new(),
    })
    .unwrap();
    w.add_process(Process {
        tid: 7,
        pid: 7,
        comm: b"d\x1b[2Jd".to_vec(),
        cgroup_id: 1,
        args: Some(b"d\x1b[2Jd arg\x1b]0;x\x07\nrow2".to_vec()),
    })
    .unwrap();
    w.add_path(PathEntry {
        path_id: 1,
        dev,
        inode: 12,
        kind: PathKind::File,
        truncated: false,
        deleted: false,
        path: b"/mnt/x\x1b[31mRED\x1b[0m\nline2,\"q\" <img src=x onerror=alert(1)> \xff".to_vec(),
        generation: Some(1),
    })
    .unwrap();
    for i in 0..8u64 {
        w.push(&Event {
            timestamp_ns: 1_000_000_000 + i * 1_000_000,
            dev,
            sector: i * 8,
            bytes: 4096,
            op: if i % 2 == 0 { Op::Read } else { Op::Write },
            flags: Flags(0),
            pid: 7,
            tid: 7,
            path_id: 1,
            queue_ns: Some(1000),
            latency_ns: 50_000 + i * 1000,
            error: 0,
            cpu: 0,
            syscall: None,
            dirtier_pid: None,
            cgroup_id: 1,
            upper: None,
        })
        .unwrap();
    }
    w.finish(EndInfo::default()).unwrap();
}

/// The control bytes of `b` other than newline (an escape sequence, a carriage return…).
fn control_bytes(b: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(b)
        .chars()
        .filter(|&c| c != '\n' && c.is_control())
        .map(|c| c as u32 as u8)
        .collect()
}

/// A name cannot act on the terminal of whoever reads a trace, break a table's row or make an
/// SVG invalid: `info`, the tables of `analyze` and `diff`, and the SVG plots show control
/// characters escaped; the HTML report carries the names as escaped JSON; CSV and JSON keep
/// the name whole.
#[test]
fn hostile_names_are_shown_escaped() {
    let d = common::TempDir::new("analyze-hostile");
    let trace = d.join("hostile.iod");
    hostile_trace(&trace);
    let t = trace.to_str().unwrap();
    for args in [
        vec!["info", t],
        vec!["analyze", t, "--top-files"],
        vec!["analyze", t, "--top-procs"],
        vec!["analyze", t, "--top-files", "--by", "latency"],
        vec!["analyze", t, "--latency", "--group-by", "dev"],
        vec!["analyze", t, "--latency", "--group-by", "proc"],
        vec!["diff", t, t, "--limit", "0"],
    ] {
        let out = run(bin().args(&args));
        ok(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(control_bytes(&out.stdout), b"", "{args:?}:\n{text}");
        if args[0] == "analyze" && args[2].starts_with("--top") {
            // The header and one row: the newline in the names did not split it.
            assert_eq!(text.lines().count(), 2, "{args:?}:\n{text}");
        }
    }
    let info = run(bin().args(["info", t]));
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(info.contains("host          h\\x1b[2Jost"), "{info}");
    let files = run(bin().args(["analyze", t, "--top-files"]));
    let files = String::from_utf8_lossy(&files.stdout);
    assert!(
        files.contains(
            "/mnt/x\\x1b[31mRED\\x1b[0m\\nline2,\"q\" <img src=x onerror=alert(1)> \\xff"
        ),
        "{files}"
    );
    // CSV and JSON are data: the name whole (RFC 4180 quoting; JSON's escapes).
    let csv = run(bin().args(["analyze", t, "--top-files", "--format", "csv"]));
    assert!(
        csv.stdout
            .windows(16)
            .any(|w| w == b"\"/mnt/x\x1b[31mRED\x1b"),
        "{}",
        String::from_utf8_lossy(&csv.stdout)
    );
    let rows = common::analyze_rows(&[&trace], &["--top-files"]);
    assert_eq!(
        rows[0]["path"],
        "/mnt/x\x1b[31mRED\x1b[0m\nline2,\"q\" <img src=x onerror=alert(1)> \\xff"
    );
    for kind in ["top-files", "top-procs", "iops", "offset"] {
        let svg = d.join(&format!("{kind}.svg"));
        ok(&run(bin().args([
            "plot",
            "--kind",
            kind,
            "-o",
            svg.to_str().unwrap(),
            t,
        ])));
        let body = std::fs::read(&svg).unwrap();
        assert_eq!(control_bytes(&body), b"", "{kind}");
        assert!(!String::from_utf8_lossy(&body).contains("<img"), "{kind}");
    }
    let html = d.join("r.html");
    ok(&run(bin().args([
        "report",
        t,
        "-o",
        html.to_str().unwrap(),
    ])));
    let page = std::fs::read(&html).unwrap();
    assert_eq!(control_bytes(&page), b"");
    assert!(!String::from_utf8_lossy(&page).contains("<img src=x"));
}

/// `time` in a filter keeps the I/Os of a window of UTC time: the same count as a plain
/// count over the reader, on the trace (whose segments outside the window are skipped) with
/// either engine, on its Parquet dataset, and as the whole of a dataset `convert --filter`
/// wrote; a time without its zone is a one-line usage error.
#[test]
fn a_time_window_keeps_the_ios_within_it() {
    let d = common::TempDir::new("analyze-time");
    let src = d.join("src.iod");
    ok(&run(bin()
        .args(["synth", "--events", "200000", "--workload", "mixed"])
        .args(["--segment-events", "4096", "-o"])
        .arg(&src)));
    let r = Reader::open(&src).unwrap();
    assert!(r.segments().len() > 40, "{} segments", r.segments().len());
    let h = r.header().clone();
    let mut utc: Vec<i64> = r.events().map(|e| h.to_utc_ns(e.timestamp_ns)).collect();
    utc.sort_unstable();
    let (from, to) = (utc[utc.len() * 3 / 10], utc[utc.len() * 6 / 10]);
    let want = utc.iter().filter(|&&t| t >= from && t < to).count() as u64;
    assert!(want > 50_000, "{want}");
    let filter = format!(
        "time >= {} && time < '{}'",
        iodump_format::summary::rfc3339_utc(from),
        iodump_format::summary::rfc3339_utc(to)
    );
    let events = |input: &Path, args: &[&str]| -> u64 {
        let rows = common::analyze_rows(&[input], &[&["--filter", &filter], args].concat());
        rows.iter()
            .find(|row| row["metric"] == "events")
            .and_then(|row| row["value"].to_string().trim_matches('"').parse().ok())
            .unwrap_or_else(|| panic!("no events row: {rows:?}"))
    };
    assert_eq!(events(&src, &[]), want);
    // The polars table of the window (its segments outside not decoded either).
    assert_eq!(events(&src, &["--engine", "polars"]), want);
    for engine in ["one-pass", "polars"] {
        let rows = common::analyze_rows(
            &[&src],
            &[
                "--top-files",
                "--limit",
                "0",
                "--filter",
                &filter,
                "--engine",
                engine,
            ],
        );
        let ios: u64 = rows.iter().map(|r| r["ios"].as_u64().unwrap()).sum();
        assert_eq!(ios, want, "{engine}");
    }
    let pq = d.join("pq");
    ok(&run(bin().arg("convert").arg(&src).arg("-o").arg(&pq)));
    assert_eq!(events(&pq, &[]), want);
    // convert --filter: the io table holds the window's I/Os only.
    let pq_window = d.join("pq-window");
    ok(&run(bin()
        .arg("convert")
        .arg(&src)
        .args(["--filter", &filter, "-o"])
        .arg(&pq_window)));
    let rows = common::analyze_rows(&[&pq_window], &["--summary"]);
    let all = rows
        .iter()
        .find(|row| row["metric"] == "events")
        .and_then(|row| {
            row["value"]
                .to_string()
                .trim_matches('"')
                .parse::<u64>()
                .ok()
        });
    assert_eq!(all, Some(want), "{rows:?}");
    assert_eq!(events(&pq_window, &[]), want);
    let out = run(bin()
        .args(["analyze", "--filter", "time > 2025-12-04T03:12:00"])
        .arg(&src));
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().count() == 1 && err.contains("is a time"),
        "{err}"
    );
}

/// A recording of more parts than the process may open files at once (`ulimit -n 64`, 300
/// parts): `info`, `analyze` and `export` read it, with the figures of the same I/Os in one
/// file, holding a bounded number of parts open. A part replaced by another file after it
/// was opened is read as damage, never as the other file's I/Os.
#[test]
fn a_recording_of_more_parts_than_open_files() {
    let d = common::TempDir::new("analyze-many-parts");
    let (one, dir) = (d.join("one.iod"), d.join("parts"));
    let synth = |out: &Path, rotate: Option<&str>| {
        let mut c = bin();
        c.args([
            "synth",
            "--workload",
            "oltp",
            "--seed",
            "3",
            "--events",
            "60000",
        ])
        .args(["--segment-events", "64", "-o"])
        .arg(out);
        if let Some(r) = rotate {
            c.args(["--rotate", r]);
        }
        ok(&run(&mut c));
    };
    synth(&one, None);
    std::fs::create_dir(&dir).unwrap();
    synth(&dir.join(""), Some("3k"));
    let parts = std::fs::read_dir(&dir).unwrap().count();
    assert!(parts > 300, "{parts} parts");
    // iodump under a limit of 64 open files.
    let limited = |args: &[&str], input: &Path| {
        run(Command::new("sh")
            .arg("-c")
            .arg("ulimit -n 64 && exec \"$@\"")
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_iodump"))
            .args(&args[..1])
            .arg(input)
            .args(&args[1..]))
    };
    let o = limited(&["info"], &dir);
    ok(&o);
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(info.contains("60,000"), "{info}");
    for q in [
        &["--top-files", "--limit", "0"][..],
        &["--summary"],
        &["--latency"],
    ] {
        let mut args = vec!["analyze"];
        args.extend_from_slice(q);
        args.extend(["--format", "json"]);
        let (a, b) = (limited(&args, &one), limited(&args, &dir));
        ok(&a);
        ok(&b);
        let (a, b): (serde_json::Value, serde_json::Value) = (
            serde_json::from_slice(&a.stdout).unwrap(),
            serde_json::from_slice(&b.stdout).unwrap(),
        );
        common::same_rows(&a, &b, &format!("{q:?}"));
    }
    let csv = d.join("all.csv");
    ok(&limited(
        &["export", "--format", "csv", "-o", csv.to_str().unwrap()],
        &dir,
    ));
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap().lines().count(),
        60_001
    );

    // A part replaced after the recording was opened.
    let traces = iodump_format::recording::open_traces(std::slice::from_ref(&dir)).unwrap();
    let r = &traces[0].reader;
    let victim = &traces[0].files[150];
    let segs_before: usize = traces[0].files[..150]
        .iter()
        .map(|f| Reader::open(f).unwrap().segments().len())
        .sum();
    let other = d.join("other.iod");
    std::fs::copy(&traces[0].files[151], &other).unwrap();
    std::fs::rename(&other, victim).unwrap();
    let bad: Vec<usize> = r
        .batches()
        .filter_map(|(i, b)| b.err().map(|d| (i, d)))
        .inspect(|(_, d)| assert!(d.to_string().contains("another file"), "{d}"))
        .map(|(i, _)| i)
        .collect();
    let in_victim = Reader::open(victim).unwrap().segments().len();
    assert_eq!(
        bad,
        (segs_before..segs_before + in_victim).collect::<Vec<_>>(),
        "the replaced part's segments, and only those"
    );
    // A part deleted (a live recording's retention): its segments are damage that says so.
    std::fs::remove_file(victim).unwrap();
    for (i, b) in r.batches() {
        match b {
            Err(d) => assert!(
                d.to_string().contains("was deleted since it was opened"),
                "{d}"
            ),
            Ok(_) => assert!(!bad.contains(&i), "segment {i}"),
        }
    }
}

/// A label (`[journal]`, `[metadata]`) is one file per device: `--top-files`, `--latency
/// --group-by file` and the summary's top file name it with its file system's device, as
/// `diff` does, on traces and datasets, with both engines (they printed `[journal]` three
/// times, or added the devices' journals together).
#[test]
fn labels_are_named_with_their_device() {
    let trace = fixture("mixed-20k.iod");
    let r = Reader::open(&trace).unwrap();
    let mut want: HashMap<String, u64> = HashMap::new();
    for e in r.events() {
        let p = r.tables().path(e.path_id).unwrap();
        if p.path.starts_with(b"[") {
            let dev = &r.tables().device(p.dev).unwrap().name;
            let name = format!("{} {dev}", String::from_utf8_lossy(&p.path));
            *want.entry(name).or_default() += 1;
        }
    }
    // The fixture has one label on several devices.
    assert!(want.keys().filter(|k| k.starts_with("[journal] ")).count() >= 2);
    let d = common::TempDir::new("analyze-labels");
    let pq = d.join("pq");
    assert!(run(bin().arg("convert").arg(&trace).arg("-o").arg(&pq))
        .status
        .success());
    for args in [
        &["--top-files", "--limit", "100000"][..],
        &["--latency", "--group-by", "file"][..],
    ] {
        on_every_engine(&trace, &pq, args, |rows, what, _, _| {
            let got: HashMap<String, u64> = rows
                .iter()
                .filter_map(|r| {
                    let path = r["path"].as_str()?;
                    path.starts_with('[')
                        .then(|| (path.to_string(), r["ios"].as_u64().unwrap()))
                })
                .collect();
            assert_eq!(got, want, "{what}");
        });
    }
    // On vda the busiest "file" is its journal.
    on_every_engine(
        &trace,
        &pq,
        &["--summary", "-d", "vda"],
        |rows, what, _, _| {
            let top_file = rows.iter().find(|r| r["metric"] == "top_file").unwrap();
            assert_eq!(top_file["value"], "[journal] vda", "{what}");
        },
    );
}

/// A trace of one file unlinked while recording, as the recorder writes it: `/db/sort.tmp`
/// (3 writes), then the same file again marked deleted (2 reads).
fn deleted_trace(path: &Path) {
    use iodump_format::*;
    let (mut w, dev) = sda1_trace(path, "db1");
    w.add_process(Process {
        tid: 77,
        pid: 77,
        comm: b"sort".to_vec(),
        cgroup_id: 1,
        args: None,
    })
    .unwrap();
    let mut entry = PathEntry::file(1, dev, 200, b"/db/sort.tmp".to_vec());
    entry.generation = Some(3);
    w.add_path(entry.clone()).unwrap();
    let mut t = 1_000_000_000;
    let mut io = |w: &mut Writer<std::fs::File>, path_id, op| {
        t += 1_000_000;
        w.push(&Event {
            timestamp_ns: t,
            dev,
            sector: t / 1000,
            bytes: 4096,
            op,
            flags: Flags(0),
            pid: 77,
            tid: 77,
            path_id,
            queue_ns: Some(1000),
            latency_ns: 50_000,
            error: 0,
            cpu: 0,
            syscall: None,
            dirtier_pid: None,
            cgroup_id: 1,
            upper: None,
        })
        .unwrap();
    };
    for _ in 0..3 {
        io(&mut w, 1, Op::Write);
    }
    entry.path_id = 2;
    entry.deleted = true;
    w.add_path(entry).unwrap();
    for _ in 0..2 {
        io(&mut w, 2, Op::Read);
    }
    w.finish(EndInfo::default()).unwrap();
}

/// A file unlinked while recording is shown as `/proc/PID/fd` and `lsof` show it, `PATH
/// (deleted)`, wherever a name is printed: `--top-files`, `--latency --group-by file`, the
/// summary (both engines, trace and dataset) and the exports; the Parquet `files` table keeps
/// the path and its `deleted` flag apart. (The flag was in the Parquet table only.)
#[test]
fn a_deleted_file_is_shown_deleted() {
    let d = common::TempDir::new("analyze-deleted");
    let trace = d.join("deleted.iod");
    deleted_trace(&trace);
    let pq = d.join("pq");
    ok(&run(bin().arg("convert").arg(&trace).arg("-o").arg(&pq)));
    let shown = "/db/sort.tmp (deleted)";
    on_every_engine(&trace, &pq, &["--top-files"], |rows, what, _, _| {
        assert_eq!(rows.len(), 1, "{what}: {rows:?}");
        assert_eq!(rows[0]["path"], shown, "{what}");
        assert_eq!(rows[0]["ios"], 5, "{what}");
        assert_eq!(rows[0]["names"], 1, "{what}");
    });
    on_every_engine(
        &trace,
        &pq,
        &["--latency", "--group-by", "file"],
        |rows, what, _, _| assert_eq!(rows[0]["path"], shown, "{what}"),
    );
    on_every_engine(&trace, &pq, &["--summary"], |rows, what, _, _| {
        let top = rows.iter().find(|r| r["metric"] == "top_file").unwrap();
        assert_eq!(top["value"], shown, "{what}");
    });
    let out = run(bin()
        .arg("export")
        .arg(&trace)
        .args(["--format", "csv", "-o", "-"]));
    ok(&out);
    let csv = String::from_utf8(out.stdout).unwrap();
    let paths: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(6).unwrap())
        .collect();
    assert_eq!(
        paths,
        ["/db/sort.tmp", "/db/sort.tmp", "/db/sort.tmp", shown, shown]
    );
    let sql = common::analyze_rows(
        &[&pq],
        &["--sql", "SELECT path, deleted FROM files ORDER BY path_id"],
    );
    assert_eq!(sql[1]["path"], "/db/sort.tmp");
    assert_eq!(sql[1]["deleted"], true);
}
