//! `iodump diff`: synthetic pairs with a known change (one file's latency doubled, a process
//! added, a device slower) are found and reported significant, identical inputs report no
//! significant change, a trace compares with its own Parquet dataset, and bad inputs are
//! one-line errors.

mod common;

use std::path::{Path, PathBuf};

use iodump_format::cgroup::{Cgroup, Identity, Runtime};
use iodump_format::{
    Device, EndInfo, Event, Loss, LossReason, Op, PathEntry, Process, WriteError, Writer,
};
use iodump_synth::{self as synth, SynthParams, SynthSink, Workload};
use serde_json::Value;

use common::{bin, ok, one_line_error, run, usage_error, TempDir};

/// A synthetic trace's calls, with its events changed by `edit` (which may add events: it
/// returns the events to write in place of the one it is given) and processes added by
/// `extra_procs` before the first event.
struct Edit<'a, F> {
    w: &'a mut Writer<std::fs::File>,
    edit: F,
    extra_procs: Vec<Process>,
    cgroups: Vec<Cgroup>,
}

impl<F: FnMut(&Event) -> Vec<Event>> SynthSink for Edit<'_, F> {
    type Error = WriteError;
    fn device(&mut self, d: &Device) -> Result<(), WriteError> {
        self.w.add_device(d.clone())
    }
    fn process(&mut self, p: &Process) -> Result<(), WriteError> {
        self.w.add_process(p.clone())
    }
    fn path(&mut self, p: &PathEntry) -> Result<(), WriteError> {
        self.w.add_path(p.clone())
    }
    fn event(&mut self, e: &Event) -> Result<(), WriteError> {
        for p in self.extra_procs.drain(..) {
            self.w.add_process(p)?;
        }
        for c in self.cgroups.drain(..) {
            self.w.add_cgroup(c)?;
        }
        for e in (self.edit)(e) {
            self.w.push(&e)?;
        }
        Ok(())
    }
    fn loss(&mut self, l: &Loss) -> Result<(), WriteError> {
        self.w.add_loss(*l)
    }
}

const EVENTS: u64 = 120_000;

fn params(seed: u64) -> SynthParams {
    SynthParams {
        events: EVENTS,
        workload: Workload::Oltp,
        seed,
    }
}

/// Writes the synthetic trace of `seed` into `path`, edited.
fn write_edited(
    path: &Path,
    seed: u64,
    extra_procs: Vec<Process>,
    edit: impl FnMut(&Event) -> Vec<Event>,
) -> PathBuf {
    write_edited_lossy(path, seed, extra_procs, edit, None)
}

/// [`write_edited`], with the loss record `loss` after every event.
fn write_edited_lossy(
    path: &Path,
    seed: u64,
    extra_procs: Vec<Process>,
    edit: impl FnMut(&Event) -> Vec<Event>,
    loss: Option<Loss>,
) -> PathBuf {
    write_trace(path, seed, extra_procs, Vec::new(), edit, loss)
}

/// [`write_edited_lossy`], with the cgroups table `cgroups`.
fn write_trace(
    path: &Path,
    seed: u64,
    extra_procs: Vec<Process>,
    cgroups: Vec<Cgroup>,
    edit: impl FnMut(&Event) -> Vec<Event>,
    loss: Option<Loss>,
) -> PathBuf {
    let p = params(seed);
    let f = std::fs::File::create(path).unwrap();
    let mut w = Writer::new(f, &synth::header(&p), Default::default()).unwrap();
    let span = synth::generate(
        &p,
        &mut Edit {
            w: &mut w,
            edit,
            extra_procs,
            cgroups,
        },
    )
    .unwrap();
    if let Some(l) = loss {
        w.add_loss(l).unwrap();
    }
    w.finish(EndInfo {
        end_monotonic_ns: span.last_timestamp_ns + 1_000_000,
        ..EndInfo::default()
    })
    .unwrap();
    path.to_path_buf()
}

/// I/Os of the synthetic trace of `seed` per path id (0 included) and per device.
fn ios_per_path_and_device(
    seed: u64,
) -> (
    std::collections::HashMap<u32, u64>,
    std::collections::HashMap<u32, u64>,
) {
    use std::collections::HashMap;
    struct Count(HashMap<u32, u64>, HashMap<u32, u64>);
    impl SynthSink for Count {
        type Error = ();
        fn device(&mut self, _: &Device) -> Result<(), ()> {
            Ok(())
        }
        fn process(&mut self, _: &Process) -> Result<(), ()> {
            Ok(())
        }
        fn path(&mut self, _: &PathEntry) -> Result<(), ()> {
            Ok(())
        }
        fn event(&mut self, e: &Event) -> Result<(), ()> {
            *self.0.entry(e.path_id).or_default() += 1;
            *self.1.entry(e.dev.0).or_default() += 1;
            Ok(())
        }
        fn loss(&mut self, _: &Loss) -> Result<(), ()> {
            Ok(())
        }
    }
    let mut c = Count(HashMap::new(), HashMap::new());
    synth::generate(&params(seed), &mut c).unwrap();
    (c.0, c.1)
}

/// The busiest path id and device of the synthetic trace of `seed` (by events).
fn busiest(seed: u64) -> (u32, u32) {
    let (mut paths, devs) = ios_per_path_and_device(seed);
    // Files of their own (not labels, which synth gives low ids): any path id > 0.
    paths.remove(&0);
    let top = |m: &std::collections::HashMap<u32, u64>| {
        m.iter().max_by_key(|(k, n)| (**n, **k)).map(|x| *x.0)
    };
    (top(&paths).unwrap(), top(&devs).unwrap())
}

/// `iodump diff A B ARGS --format json --limit 0`: every row (failing unless it succeeded).
fn diff_rows(a: &Path, b: &Path, args: &[&str]) -> Vec<Value> {
    let out = run(bin()
        .arg("diff")
        .arg(a)
        .arg(b)
        .args(args)
        .args(["--format", "json", "--limit", "0"]));
    ok(&out);
    match serde_json::from_slice(&out.stdout) {
        Ok(Value::Array(rows)) => rows,
        other => panic!("not a JSON array: {other:?}"),
    }
}

fn significant(rows: &[Value]) -> Vec<&Value> {
    rows.iter().filter(|r| r["significant"] == "yes").collect()
}

fn find<'a>(rows: &'a [Value], scope: &str, name: &str, metric: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["scope"] == scope && r["name"] == name && r["metric"] == metric)
        .unwrap_or_else(|| panic!("no row {scope} {name} {metric}"))
}

/// The name `iodump diff` gives a path id of the synthetic trace (its path, from the
/// trace's table).
fn path_of(trace: &Path, path_id: u32) -> String {
    let r = iodump_format::Reader::open(trace).unwrap();
    let e = r.tables().path(path_id).unwrap();
    String::from_utf8_lossy(&e.path).into_owned()
}

fn device_of(trace: &Path, dev: u32) -> String {
    let r = iodump_format::Reader::open(trace).unwrap();
    r.tables()
        .device(iodump_format::DevT(dev))
        .unwrap()
        .name
        .clone()
}

#[test]
fn identical_inputs_report_no_significant_change() {
    let d = TempDir::new("diff-same");
    let a = write_edited(&d.join("a.iod"), 7, Vec::new(), |e| vec![*e]);
    // The same trace written again: another file, the same I/O.
    let b = write_edited(&d.join("b.iod"), 7, Vec::new(), |e| vec![*e]);
    // The same I/O again, as a recording in parts.
    let parts = d.join("parts");
    ok(&run(bin()
        .args([
            "synth",
            "--workload",
            "oltp",
            "--seed",
            "7",
            "--rotate",
            "512K",
        ])
        .args(["--events", &EVENTS.to_string(), "-o"])
        .arg(format!("{}/", parts.display()))));
    assert!(common::names_in(&parts).len() > 1);
    for (x, y) in [(&a, &a), (&a, &b), (&parts, &a)] {
        let rows = diff_rows(x, y, &[]);
        assert!(rows.len() > 100, "{} rows", rows.len());
        assert!(
            significant(&rows).is_empty(),
            "{:?}",
            &significant(&rows)[..1]
        );
        let total = find(&rows, "total", "all", "ios");
        assert_eq!((&total["a"], &total["b"]), (&total["a"], &total["a"]));
        assert_eq!(total["a"], EVENTS);
        // The same segments: every test finds nothing at all (README: p = 1 everywhere).
        if !std::ptr::eq(x, &parts) {
            for r in &rows {
                if let Some(p) = r["p_value"].as_f64() {
                    assert_eq!(p, 1.0, "{r}");
                }
            }
        }
    }
}

#[test]
fn a_file_with_doubled_latency_is_found() {
    let d = TempDir::new("diff-file");
    let (path_id, _) = busiest(11);
    let a = write_edited(&d.join("a.iod"), 11, Vec::new(), |e| vec![*e]);
    let b = write_edited(&d.join("b.iod"), 11, Vec::new(), |e| {
        let mut e = *e;
        if e.path_id == path_id {
            e.latency_ns *= 2;
        }
        vec![e]
    });
    let name = path_of(&a, path_id);
    let rows = diff_rows(&a, &b, &[]);
    for m in ["p50_latency_us", "mean_latency_us"] {
        let r = find(&rows, "file", &name, m);
        assert_eq!(r["significant"], "yes", "{r}");
        let pct = r["change_pct"].as_f64().unwrap();
        assert!((80.0..=120.0).contains(&pct), "{r}");
    }
    // No other file changed, and the I/O counts did not.
    for r in significant(&rows) {
        assert!(
            r["scope"] != "file" || r["name"] == name.as_str(),
            "another file: {r}"
        );
        assert!(r["metric"].as_str().unwrap().contains("latency"), "{r}");
    }
    // --by latency ranks only latency figures; the file's p50 is among the first rows.
    let lat = diff_rows(&a, &b, &["--by", "latency", "--group-by", "file"]);
    assert!(lat
        .iter()
        .all(|r| r["metric"].as_str().unwrap().contains("_us")));
    assert!(lat[..5].iter().any(|r| r["name"] == name.as_str()));
}

#[test]
fn percentiles_of_a_few_ios_are_not_tested() {
    // Every file of one I/O ten times slower (latency and queue time): with one value there
    // is no 95% interval of a percentile (p50 needs 8 I/Os each side, README), so no
    // percentile row of such a file is tested, let alone significant. (A one-bin interval
    // each gave p = 0 before: hundreds of such rows were significant.)
    let d = TempDir::new("diff-few");
    let single: std::collections::HashSet<u32> = ios_per_path_and_device(13)
        .0
        .into_iter()
        .filter(|&(p, n)| n == 1 && p > 0)
        .map(|(p, _)| p)
        .collect();
    assert!(single.len() >= 10, "{} files of one I/O", single.len());
    let a = write_edited(&d.join("a.iod"), 13, Vec::new(), |e| vec![*e]);
    let b = write_edited(&d.join("b.iod"), 13, Vec::new(), |e| {
        let mut e = *e;
        if single.contains(&e.path_id) {
            e.latency_ns *= 10;
            e.queue_ns = e.queue_ns.map(|q| q * 10);
        }
        vec![e]
    });
    let rows = diff_rows(&a, &b, &["--group-by", "file"]);
    // The files of one I/O on both sides (by name, as the diff matches them).
    let ones: Vec<&str> = rows
        .iter()
        .filter(|r| r["metric"] == "ios" && r["a"] == 1 && r["b"] == 1)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let mut slower = 0;
    for name in &ones {
        if find(&rows, "file", name, "mean_latency_us")["change_pct"].as_f64() > Some(800.0) {
            slower += 1;
        }
        for r in rows.iter().filter(|r| r["name"] == *name) {
            let m = r["metric"].as_str().unwrap();
            if m.starts_with('p') && m.ends_with("_us") {
                assert_eq!(r["test"], "quantile-ci", "{r}");
                assert_eq!(
                    (&r["significant"], &r["p_value"]),
                    (&Value::Null, &Value::Null),
                    "{r}"
                );
            }
        }
    }
    assert!(
        slower >= 10,
        "{slower} of {} files of one I/O slower",
        ones.len()
    );
    // The busiest files (thousands of I/Os) still have their percentiles tested.
    let big = rows
        .iter()
        .filter(|r| r["metric"] == "ios")
        .max_by_key(|r| r["a"].as_u64())
        .unwrap();
    assert!(big["a"].as_u64() >= Some(563), "{big}");
    let big = big["name"].as_str().unwrap();
    for m in ["p50_latency_us", "p99_latency_us"] {
        assert_eq!(find(&rows, "file", big, m)["p_value"], 1.0);
    }
}

#[test]
fn an_added_process_and_a_slower_device_are_found() {
    let d = TempDir::new("diff-proc");
    let (_, dev) = busiest(12);
    let a = write_edited(&d.join("a.iod"), 12, Vec::new(), |e| vec![*e]);
    let newcomer = Process {
        tid: 999_999,
        pid: 999_999,
        comm: b"backup".to_vec(),
        cgroup_id: 0,
        args: Some(b"backup --to /mnt/nas --pidfile /run/backup.999999.pid".to_vec()),
    };
    let mut n = 0u64;
    let b = write_edited(&d.join("b.iod"), 12, vec![newcomer], |e| {
        let mut slower = *e;
        if slower.dev.0 == dev {
            slower.latency_ns = slower.latency_ns * 3 / 2;
        }
        n += 1;
        if n.is_multiple_of(20) {
            // One I/O in 20 of the new process, beside the recorded one.
            let mut extra = *e;
            extra.pid = 999_999;
            extra.tid = 999_999;
            extra.path_id = 0;
            vec![slower, extra]
        } else {
            vec![slower]
        }
    });
    let rows = diff_rows(&a, &b, &[]);
    let proc = find(
        &rows,
        "proc",
        "backup --to /mnt/nas --pidfile /run/backup.<pid>.pid",
        "ios",
    );
    assert_eq!(proc["significant"], "yes", "{proc}");
    assert_eq!(proc["a"], 0);
    assert!(proc["b"].as_u64().unwrap() >= EVENTS / 20 - 1, "{proc}");
    let name = device_of(&a, dev);
    let slow = find(&rows, "dev", &name, "p50_latency_us");
    assert_eq!(slow["significant"], "yes", "{slow}");
    assert!(slow["change_pct"].as_f64().unwrap() > 30.0, "{slow}");
    // Rows are ordered: significant ones first, then by the size of the change; a group of
    // one side only first among them.
    let first_no = rows.iter().position(|r| r["significant"] != "yes").unwrap();
    assert!(rows[first_no..].iter().all(|r| r["significant"] != "yes"));
    assert_eq!(rows[0]["a"], 0, "{}", rows[0]);
    // The table and CSV say the same.
    let out = run(bin()
        .args([
            "diff",
            "--group-by",
            "proc",
            "--limit",
            "3",
            "--format",
            "csv",
        ])
        .arg(&a)
        .arg(&b));
    ok(&out);
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(
        csv.starts_with("scope,name,metric,a,b,change,change_pct,significant,test,p_value\n"),
        "{csv}"
    );
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.contains("backup --to /mnt/nas"), "{csv}");
}

#[test]
fn a_trace_and_its_parquet_dataset_do_not_differ() {
    let d = TempDir::new("diff-parquet");
    let a = write_edited(&d.join("a.iod"), 13, Vec::new(), |e| vec![*e]);
    against_its_dataset(&d, &a, &["--group-by", "total,dev,proc,file"]);
}

/// Converts trace `a` into a Parquet dataset in `d` and compares them with `args`: no figure
/// changed significantly, and every group is matched (none is on one side only). The
/// dataset and the rows.
fn against_its_dataset(d: &TempDir, a: &Path, args: &[&str]) -> (PathBuf, Vec<Value>) {
    let pq = d.join("a-parquet");
    ok(&run(bin().arg("convert").arg(a).arg("-o").arg(&pq)));
    let rows = diff_rows(a, &pq, args);
    assert!(significant(&rows).is_empty(), "{:?}", significant(&rows));
    let one_sided: Vec<&Value> = rows
        .iter()
        .filter(|r| r["metric"] == "ios" && (r["a"] == 0 || r["b"] == 0))
        .collect();
    assert!(one_sided.is_empty(), "{one_sided:?}");
    (pq, rows)
}

#[test]
fn a_trace_with_cgroups_and_its_parquet_dataset_do_not_differ() {
    let d = TempDir::new("diff-parquet-cgroups");
    // Three cgroups of the table (a container, a service, a pod's container) and one id the
    // table does not name; each I/O in one of them by its pid.
    let cg = |id: u64, path: &str, identity: Identity| Cgroup {
        id,
        path: path.into(),
        identity,
    };
    let container = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let cgroups = vec![
        cg(
            100,
            &format!("/system.slice/docker-{container}.scope"),
            Identity {
                runtime: Some(Runtime::Docker),
                container_id: Some(container.into()),
                ..Identity::default()
            },
        ),
        cg(
            101,
            "/system.slice/postgresql.service",
            Identity {
                unit: Some("postgresql.service".into()),
                ..Identity::default()
            },
        ),
        cg(
            102,
            "/kubepods.slice/kubepods-pod1a2b3c4d_0000_1111_2222_333344445555.slice/cri-containerd-feed.scope",
            Identity {
                runtime: Some(Runtime::Containerd),
                container_id: Some("feed".into()),
                pod_uid: Some("1a2b3c4d-0000-1111-2222-333344445555".into()),
                qos: Some("besteffort".into()),
                ..Identity::default()
            },
        ),
    ];
    let a = write_trace(
        &d.join("a.iod"),
        13,
        Vec::new(),
        cgroups,
        |e| {
            vec![Event {
                cgroup_id: 100 + u64::from(e.pid % 4),
                ..*e
            }]
        },
        None,
    );
    let (pq, rows) = against_its_dataset(&d, &a, &[]);
    // The cgroups are groups on both sides, by the same names, with the trace's figures.
    let mut names: Vec<&str> = rows
        .iter()
        .filter(|r| r["scope"] == "cgroup" && r["metric"] == "ios")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "/kubepods.slice/kubepods-pod*.slice/cri-containerd-*.scope",
            "/system.slice/docker-*.scope",
            "/system.slice/postgresql.service",
            "cgroup:103",
        ],
        "{rows:?}"
    );
    // Every figure of the trace against itself, the same against its dataset; but the
    // sequential share, found within a trace's segment or a dataset's row group (whose
    // bounds differ), which the rows above found not significantly changed.
    let comparable = |rows: Vec<Value>| -> Vec<String> {
        let mut v: Vec<String> = rows
            .iter()
            .filter(|r| r["metric"] != "sequential_pct")
            .map(Value::to_string)
            .collect();
        v.sort_unstable();
        v
    };
    let (rows, same) = (comparable(rows), comparable(diff_rows(&a, &a, &[])));
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter()
            .filter(|r| !y.contains(r))
            .take(5)
            .cloned()
            .collect()
    };
    assert!(
        rows == same,
        "against the dataset only: {:?}\nagainst the trace only: {:?}",
        only(&rows, &same),
        only(&same, &rows)
    );
    // Filters on the cgroups keep the same I/O of the trace and of its dataset.
    for filter in [
        "cgroup_path == \"/system.slice/postgresql.service\"",
        &format!("container == \"{container}\""),
        "pod == \"1a2b3c4d-0000-1111-2222-333344445555\" || runtime == \"docker\"",
    ] {
        let rows = diff_rows(&a, &pq, &["--filter", filter, "--group-by", "total"]);
        let ios = find(&rows, "total", "all", "ios");
        assert!(ios["a"].as_u64().unwrap() > 0, "{filter}: {ios}");
        assert_eq!(ios["a"], ios["b"], "{filter}: {ios}");
        assert!(
            significant(&rows).is_empty(),
            "{filter}: {:?}",
            significant(&rows)
        );
        // The dataset alone answers as the trace does.
        let summary = |input: &Path| {
            let out = run(bin()
                .args([
                    "analyze",
                    "--summary",
                    "--format",
                    "json",
                    "--filter",
                    filter,
                ])
                .arg(input));
            ok(&out);
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert_eq!(summary(&a), summary(&pq), "{filter}");
    }
    // Against a trace without a cgroups table (the same I/O): no cgroup is compared (it
    // would be one-sided), and a note says why.
    let plain = write_edited(&d.join("plain.iod"), 13, Vec::new(), |e| vec![*e]);
    let out = run(bin()
        .arg("diff")
        .arg(&a)
        .arg(&plain)
        .args(["--format", "json", "--limit", "0"]));
    ok(&out);
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["scope"] != "cgroup"), "{rows:?}");
    assert!(significant(&rows).is_empty(), "{:?}", significant(&rows));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("note: cgroups not compared: ")
            && err.contains("plain.iod has no cgroups table"),
        "{err}"
    );
    // A cgroup filter on it would keep nothing of that side: refused.
    let out = run(bin()
        .arg("diff")
        .arg(&a)
        .arg(&plain)
        .args(["--filter", "runtime == \"docker\""]));
    one_line_error(&out, "plain.iod: no cgroups table");
    // Cgroups alone: with a side that has no table, nothing could be compared (an empty
    // table would look like "no change"): refused, whichever side it is.
    for (x, y) in [(&a, &plain), (&plain, &a)] {
        let out = run(bin()
            .arg("diff")
            .arg(x)
            .arg(y)
            .args(["--group-by", "cgroup"]));
        one_line_error(&out, "--group-by cgroup: ");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("plain.iod has no cgroups table"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Neither side with a table, every scope: the other scopes compared, a note naming both.
    let plain2 = write_edited(&d.join("plain2.iod"), 14, Vec::new(), |e| vec![*e]);
    let out = run(bin().arg("diff").arg(&plain).arg(&plain2));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("plain.iod and ") && err.contains("plain2.iod have no cgroups table"),
        "{err}"
    );
}

#[test]
fn bad_inputs_are_one_line_errors() {
    let d = TempDir::new("diff-bad");
    let a = write_edited(&d.join("a.iod"), 14, Vec::new(), |e| vec![*e]);
    let missing = d.join("missing.iod");
    one_line_error(&run(bin().arg("diff").arg(&a).arg(&missing)), "missing.iod");
    let text = d.join("notes.txt");
    std::fs::write(&text, "not a trace\n").unwrap();
    one_line_error(&run(bin().arg("diff").arg(&text).arg(&a)), "notes.txt");
    // A trace with a damaged segment: refused (a comparison would be biased), unless
    // --allow-damaged.
    let damaged = d.join("damaged.iod");
    let mut bytes = std::fs::read(&a).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0x5a;
    }
    std::fs::write(&damaged, &bytes).unwrap();
    one_line_error(
        &run(bin().arg("diff").arg(&a).arg(&damaged)),
        "--allow-damaged",
    );
    let out = run(bin()
        .arg("diff")
        .arg(&a)
        .arg(&damaged)
        .arg("--allow-damaged"));
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("damaged chunk"));
    // Usage errors: exit 2.
    let out = run(bin().arg("diff").arg(&a));
    assert_eq!(out.status.code(), Some(2));
    let out = run(bin().arg("diff").arg(&a).arg(&a).args(["--by", "nothing"]));
    assert_eq!(out.status.code(), Some(2));
    usage_error(
        &run(bin()
            .arg("diff")
            .arg(&a)
            .arg(&a)
            .args(["--filter", "iosize >"])),
        "--filter",
    );
    // --speed is --replay's (its default hid it from clap's check); --replay prints no CSV.
    let out = run(bin().arg("diff").arg(&a).arg(&a).args(["--speed", "7"]));
    assert_eq!(out.status.code(), Some(2));
    usage_error(
        &run(bin()
            .args(["diff", "--replay", "--format", "csv"])
            .arg(&a)
            .arg(&a)),
        "--replay prints one line and the JSON",
    );
    // A directory of two recordings as one side: refused (they were compared as one), by the
    // comparison, its page and the score of a replay.
    let two = d.join("two");
    std::fs::create_dir(&two).unwrap();
    std::fs::copy(&a, two.join("x.iod")).unwrap();
    write_edited(&two.join("y.iod"), 15, Vec::new(), |e| vec![*e]);
    let page = d.join("two.html");
    for args in [
        vec!["diff"],
        vec!["diff", "--replay"],
        vec!["report", "-o", page.to_str().unwrap()],
    ] {
        one_line_error(
            &run(bin().args(&args).arg(&two).arg(&a)),
            "two: it holds 2 recordings (x.iod, y.iod…), which would be compared as one",
        );
    }
    assert!(!page.exists());
}

/// The block device holding `dir` as `MAJ:MIN`, `None` for a filesystem on no block device
/// (tmpfs, overlay).
fn block_device_of(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir).ok()?.dev();
    // SAFETY: major and minor only decode the number.
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    (major != 0).then(|| format!("{major}:{minor}"))
}

/// Records fio reading `file` with O_DIRECT in blocks of `bs` (on the device `dev`), 1500
/// reads at random, into `out`; the recorder's stderr (with the kernel side's counters).
fn record_fio(dev: &str, file: &Path, bs: &str, out: &Path) -> String {
    let o = run(bin()
        .args(["record", "--stats", "-d", dev, "-o"])
        .arg(out)
        .args(["--", "fio", "--name=read", "--direct=1", "--ioengine=psync"])
        .arg(format!("--filename={}", file.display()))
        .args([
            "--rw=randread",
            &format!("--bs={bs}"),
            "--size=32M",
            "--number_ios=1500",
            "--randseed=3",
            "--readonly",
            "--output=/dev/null",
        ]));
    ok(&o);
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Tests that record fio on the same disk: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// For a test that records fio on the disk of the temporary directory: that device
/// (`MAJ:MIN`) and the files `names` in `d`, 32 MiB each, written and synced before any
/// recording (so that recordings only read them). `None` (the test is skipped) without BPF
/// or when the directory is on no block device.
fn fio_files(test: &str, d: &TempDir, names: &[&str]) -> Option<(String, Vec<PathBuf>)> {
    if !common::bpf_available(test) {
        return None;
    }
    // The temporary directory, or (a tmpfs /tmp) the build's, on the checkout's disk (its
    // files are left there, and written again by the next run).
    let target_tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let Some((dir, dev)) = [d.0.clone(), target_tmp]
        .into_iter()
        .find_map(|dir| block_device_of(&dir).map(|dev| (dir, dev)))
    else {
        common::skip(test, "a temporary directory on a block device");
        return None;
    };
    let data: Vec<u8> = (0..32u32 << 20).map(|i| (i % 251) as u8).collect();
    let files: Vec<PathBuf> = names
        .iter()
        .map(|n| dir.join(format!("{test}-{n}")))
        .collect();
    for f in &files {
        std::fs::write(f, &data).unwrap();
    }
    ok(&run(&mut std::process::Command::new("sync")));
    Some((dev, files))
}

#[test]
fn two_fio_runs_with_other_block_sizes_differ_in_their_size_mix() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = TempDir::new("diff-fio");
    let Some((dev, files)) = fio_files(
        "two_fio_runs_with_other_block_sizes_differ_in_their_size_mix",
        &d,
        &["data"],
    ) else {
        return;
    };
    let file = files[0].clone();
    let (a, b) = (d.join("4k.iod"), d.join("64k.iod"));
    record_fio(&dev, &file, "4k", &a);
    record_fio(&dev, &file, "64k", &b);
    // The file's I/O only: the disk may be busy with other work, and fio's first start
    // reads its binary and libraries.
    let path = std::fs::canonicalize(&file).unwrap();
    let only = format!("path == \"{}\"", path.display());
    let rows = diff_rows(&a, &b, &["--filter", &only]);
    let mix = find(&rows, "total", "all", "size_mix");
    assert_eq!(mix["significant"], "yes", "{mix}");
    assert!(mix["a"].as_str().unwrap().starts_with("4K 100%"), "{mix}");
    assert!(mix["b"].as_str().unwrap().starts_with("64K 100%"), "{mix}");
    assert!(mix["change"].as_f64().unwrap() > 99.0, "{mix}");
    // The file is one group on both sides, by its path.
    let f = find(&rows, "file", path.to_str().unwrap(), "bytes");
    assert_eq!(f["significant"], "yes", "{f}");
}

#[test]
fn diff_replay_scores_a_synthetic_replay() {
    let d = TempDir::new("diff-replay");
    let orig = write_edited(&d.join("orig.iod"), 15, Vec::new(), |e| vec![*e]);
    // The "replay": every I/O but one in 10 reads, 2 ms later, by one thread of another
    // process, 20 µs slower; its recorder says it lost 7 events.
    let mut n = 0u64;
    let rep = write_edited_lossy(
        &d.join("rep.iod"),
        15,
        Vec::new(),
        |e| {
            n += 1;
            let mut r = *e;
            r.timestamp_ns += 2_000_000;
            r.pid = 4242;
            r.tid = 4242;
            r.latency_ns += 20_000;
            if n.is_multiple_of(10) && e.op == iodump_format::Op::Read {
                Vec::new()
            } else {
                vec![r]
            }
        },
        Some(Loss {
            cpu: 0,
            reason: LossReason::RingBufferFull,
            count: 7,
            start_ns: 0,
            end_ns: 1,
        }),
    );
    let out = run(bin().arg("diff").arg("--replay").arg(&orig).arg(&rep));
    ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let summary = lines.next().unwrap();
    assert!(summary.starts_with("replay: "), "{summary}");
    assert!(
        summary.contains("events lost by the recorders: 0 of the original's, 7 of the replay's"),
        "{summary}"
    );
    let v: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(v["recorded_ios"], EVENTS);
    assert_eq!(
        (&v["recorded_lost_events"], &v["replayed_lost_events"]),
        (&0.into(), &7.into())
    );
    assert_eq!(v["matched_by"], "sector");
    let (matched, replayed) = (
        v["matched_ios"].as_u64().unwrap(),
        v["replayed_ios"].as_u64().unwrap(),
    );
    assert_eq!(matched, replayed, "{v}");
    assert!(matched < EVENTS && matched > EVENTS * 85 / 100, "{v}");
    assert_eq!(v["streams"], v["streams_in_order"], "{v}");
    assert_eq!(v["pairs_in_order_pct"], 100.0);
    // (An I/O of a sector read twice within a few hundred ns may pair with its twin.)
    assert!(v["issue_error_p99_ns"].as_f64().unwrap() < 1000.0, "{v}");
    assert!(v["iops_correlation"].as_f64().unwrap() > 0.9, "{v}");
    assert!(
        v["latency"]["mann_whitney_p"].as_f64().unwrap() < 0.01,
        "{v}"
    );
    // JSON only with --format json.
    let out = run(bin()
        .args(["diff", "--replay", "--format", "json"])
        .arg(&orig)
        .arg(&orig));
    ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["matched_ios"], EVENTS);
    assert_eq!(v["issued_pct"], 100.0);
    // A recording against itself is issued exactly on time (its UTC times, ~1.8e18 ns, were
    // subtracted as doubles: 64 and 182 ns).
    assert_eq!(
        (&v["issue_error_p50_ns"], &v["issue_error_p99_ns"]),
        (&Value::from(0.0), &Value::from(0.0)),
        "{v}"
    );
    one_line_error(
        &run(bin()
            .arg("diff")
            .arg("--replay")
            .arg(&orig)
            .arg(d.join("none.iod"))),
        "none.iod",
    );
    // A replay without --allow-writes issues reads and flushes only: scored as all I/O, the
    // writes count as not issued; --reads-only scores what it could issue.
    let reads_only = |e: &Event| matches!(e.op, Op::Read | Op::Flush);
    let mut reads = 0u64;
    let rep = write_edited(&d.join("reads.iod"), 15, Vec::new(), |e| {
        reads += u64::from(reads_only(e));
        if reads_only(e) {
            vec![*e]
        } else {
            Vec::new()
        }
    });
    assert!(reads > 0 && reads < EVENTS, "{reads}");
    let score = |flags: &[&str]| -> Value {
        let out = run(bin()
            .args(["diff", "--replay", "--format", "json"])
            .args(flags)
            .arg(&orig)
            .arg(&rep));
        ok(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let all = score(&[]);
    assert_eq!(
        (&all["recorded_ios"], &all["scored_ops"]),
        (&EVENTS.into(), &"all".into()),
        "{all}"
    );
    assert_eq!(all["matched_ios"], reads, "{all}");
    let v = score(&["--reads-only"]);
    assert_eq!(
        (
            &v["recorded_ios"],
            &v["matched_ios"],
            &v["issued_pct"],
            &v["scored_ops"]
        ),
        (
            &reads.into(),
            &reads.into(),
            &100.0.into(),
            &"read-flush".into()
        ),
        "{v}"
    );
    let out = run(bin()
        .args(["diff", "--replay", "--reads-only"])
        .arg(&orig)
        .arg(&rep));
    ok(&out);
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with(&format!(
            "replay: {reads} of {reads} recorded reads and flushes (writes not replayed) \
             issued (100.0%)"
        )),
        "{line}"
    );
}

#[test]
fn replay_verify_scores_a_real_replay_of_fio() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = TempDir::new("diff-verify");
    // The target's blocks are written too (O_DIRECT reads of holes reach no disk).
    let Some((dev, files)) = fio_files(
        "replay_verify_scores_a_real_replay_of_fio",
        &d,
        &["data", "target"],
    ) else {
        return;
    };
    let (file, target) = (files[0].clone(), files[1].clone());
    let rec = d.join("rec.iod");
    let rec_err = record_fio(&dev, &file, "4k", &rec);
    let replayed = d.join("replayed.iod");
    // The reads of the file only (not fio's start, nor other work on the disk).
    let only = format!(
        "path == \"{}\"",
        std::fs::canonicalize(&file).unwrap().display()
    );
    let out = run(bin()
        .arg("replay")
        .arg(&rec)
        .args(["-f", &only, "--target"])
        .arg(&target)
        .arg("-o")
        .arg(&replayed)
        .args(["--verify", "--json"]));
    ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let verify = &v["verify"];
    // What to show when an assertion fails: the score, the replay's own counts and the
    // stderr of both recordings (their recorders' lines say what they lost).
    let ctx = format!(
        "{verify}\nreplay: {}\nrecording: {rec_err}\nreplay stderr: {}",
        v["ops"],
        String::from_utf8_lossy(&out.stderr)
    );
    // The reads were issued (one may be merged or split differently at the block layer),
    // in order.
    let recorded = verify["recorded_ios"].as_u64().unwrap();
    assert!((1490..=1510).contains(&recorded), "{ctx}");
    // Without --allow-writes, the score is of what the replay could issue.
    assert_eq!(verify["scored_ops"], "read-flush", "{ctx}");
    assert_eq!(
        v["ops"]["read"]["replayed"].as_u64(),
        Some(recorded),
        "{ctx}"
    );
    assert_eq!(v["ops"]["read"]["errors"].as_u64(), Some(0), "{ctx}");
    // Each issued read is in the replay's recording, or among the events its recorder
    // counted as lost (which the score names): with none lost, `issued_pct` >= 99.
    let matched = verify["matched_ios"].as_u64().unwrap();
    let lost = verify["replayed_lost_events"].as_u64().unwrap();
    assert!((matched + lost) * 100 >= recorded * 99, "{ctx}");
    assert_eq!(
        (&verify["streams"], &verify["streams_in_order"]),
        (&1.into(), &1.into()),
        "{ctx}"
    );
    // fio's reads were at 4 KiB offsets in the file; the replay wraps them into the smaller
    // target keeping that alignment, so each reaches the disk as one aligned 4 KiB read (off
    // its block it would span two, and split where the target's blocks are not contiguous).
    // (The replayer's own reads, of its binary or the trace, are in its recording too.)
    let r = iodump_format::Reader::open(&replayed).unwrap();
    let target_path = std::fs::canonicalize(&target).unwrap();
    let target_ids: Vec<u32> = r
        .tables()
        .paths()
        .filter(|p| p.path == target_path.as_os_str().as_encoded_bytes())
        .map(|p| p.path_id)
        .collect();
    let target_reads: Vec<(u64, u32)> = r
        .events()
        .filter(|e| e.op == Op::Read && target_ids.contains(&e.path_id))
        .map(|e| (e.sector, e.bytes))
        .collect();
    assert!(
        target_reads.len() as u64 >= matched,
        "{}\n{ctx}",
        target_reads.len()
    );
    let misaligned: Vec<(u64, u32)> = target_reads
        .into_iter()
        .filter(|&(sector, bytes)| sector % 8 != 0 || bytes != 4096)
        .collect();
    assert!(
        misaligned.is_empty(),
        "{} reads off 4 KiB or not 4 KiB long (sector, bytes), the first: {:?}\n{ctx}",
        misaligned.len(),
        &misaligned[..misaligned.len().min(5)]
    );
    assert!(
        verify["latency"]["replayed"]["p50_us"].as_f64().is_some(),
        "{ctx}"
    );
    // The same score from the two traces.
    let out = run(bin()
        .args([
            "diff",
            "--replay",
            "--reads-only",
            "--format",
            "json",
            "--filter",
            &only,
        ])
        .arg(&rec)
        .arg(&replayed));
    ok(&out);
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(&again, verify);
    // --verify needs -o.
    let out = run(bin()
        .arg("replay")
        .arg(&rec)
        .arg("--target")
        .arg(&target)
        .arg("--verify"));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn report_diff_is_one_page_that_renders() {
    let d = TempDir::new("diff-report");
    let (path_id, _) = busiest(16);
    let a = write_edited(&d.join("a.iod"), 16, Vec::new(), |e| vec![*e]);
    let b = write_edited(&d.join("b.iod"), 16, Vec::new(), |e| {
        let mut e = *e;
        if e.path_id == path_id {
            e.latency_ns *= 2;
        }
        vec![e]
    });
    let page = d.join("diff.html");
    let out = run(bin().arg("report").arg(&a).arg(&b).arg("-o").arg(&page));
    ok(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<title>iodump report: a.iod vs b.iod</title>"));
    // Two sides of one file name are named by their paths, as given.
    for side in ["x", "y"] {
        std::fs::create_dir_all(d.join(side)).unwrap();
        std::fs::copy(&a, d.join(side).join("run.iod")).unwrap();
    }
    let same = d.join("same.html");
    ok(&run(bin()
        .arg("report")
        .arg(d.join("x/run.iod"))
        .arg(d.join("y/run.iod"))
        .arg("-o")
        .arg(&same)));
    let title = format!(
        "{} vs {}",
        d.join("x/run.iod").display(),
        d.join("y/run.iod").display()
    );
    assert!(
        std::fs::read_to_string(&same).unwrap().contains(&title),
        "{title}"
    );
    // Self-contained: no external resource.
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    let data = common::embedded_report_data(&html);
    assert_eq!(data["a"]["events"], EVENTS);
    assert_eq!(data["b"]["events"], EVENTS);
    let cdf = data["b"]["latency_cdf"].as_array().unwrap();
    assert_eq!(cdf.last().unwrap()[1], 1.0);
    let ios: u64 = data["a"]["ios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(ios, EVENTS);
    // The table's first rows are the file's latency, significant.
    let name = path_of(&a, path_id);
    let first = &data["rows"][0];
    assert_eq!(
        (&first[1], &first[7]),
        (&Value::from(name), &Value::from("yes")),
        "{first}"
    );
    // Two files only.
    let out = run(bin()
        .arg("report")
        .arg(&a)
        .arg("--diff")
        .arg("-o")
        .arg(&page));
    usage_error(&out, "give A and B");

    let Some(browser) = common::chromium() else {
        return;
    };
    let dom = common::headless(&browser, &["--dump-dom"], &page);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        !dom.contains("data-js-error=\""),
        "JavaScript error: {dom:.2000}"
    );
    assert!(dom.contains(r#"data-rendered="ok""#), "{dom:.2000}");
    assert!(dom.contains(r#"data-plots="3""#));
    for p in ["latency-cdf", "iops", "throughput"] {
        assert!(
            dom.contains(&format!(r#"data-plot="{p}" data-drawn="1""#)),
            "{p}"
        );
    }
    assert!(dom.contains(r#"class="changes" data-rows="40""#));
    assert!(!dom.contains(r#"<p class="empty">"#), "{dom:.2000}");

    // A side of one I/O has no IOPS or throughput over time (a bin of 1 ns drew it at a
    // billion per second); with both such, the timelines are not drawn at all.
    let mut first = true;
    let one = write_edited(&d.join("one.iod"), 16, Vec::new(), |e| {
        let keep = std::mem::replace(&mut first, false);
        if keep {
            vec![*e]
        } else {
            Vec::new()
        }
    });
    for (b, plots, instant) in [(&a, 3, 1), (&one, 1, 2)] {
        let page = d.join("one.html");
        ok(&run(bin()
            .arg("report")
            .arg(&one)
            .arg(b)
            .arg("-o")
            .arg(&page)));
        let data = common::embedded_report_data(&std::fs::read_to_string(&page).unwrap());
        assert_eq!(data["a"]["duration_ns"], 0);
        let dom = common::headless(&browser, &["--dump-dom"], &page);
        let dom = String::from_utf8_lossy(&dom.stdout);
        assert!(dom.contains(r#"data-rendered="ok""#), "{dom:.2000}");
        assert!(
            dom.contains(&format!(r#"data-plots="{plots}""#)),
            "{dom:.2000}"
        );
        let said = "): all of its I/O at one instant: no IOPS or throughput over time</p>";
        assert_eq!(dom.matches(said).count(), instant, "{dom:.3000}");
        assert!(dom.contains(r#"<p class="empty">A ("#), "{dom:.3000}");
    }
}

#[test]
fn report_diff_takes_what_diff_takes() {
    let d = TempDir::new("diff-report-inputs");
    let a = write_edited(&d.join("a.iod"), 17, Vec::new(), |e| vec![*e]);
    let pq = d.join("a-parquet");
    ok(&run(bin().arg("convert").arg(&a).arg("-o").arg(&pq)));
    // A trace against its own Parquet dataset: the same picture on both sides, no change.
    let page = d.join("diff.html");
    ok(&run(bin()
        .arg("report")
        .arg(&a)
        .arg(&pq)
        .arg("-o")
        .arg(&page)));
    let data = common::embedded_report_data(&std::fs::read_to_string(&page).unwrap());
    for k in [
        "events",
        "duration_ns",
        "bin_ns",
        "ios",
        "bytes",
        "latency_cdf",
    ] {
        assert_eq!(data["a"][k], data["b"][k], "{k}");
    }
    assert_eq!(data["a"]["events"], EVENTS);
    assert_eq!(data["significant"], 0);
    // With a filter: the page is of the I/Os it keeps, on both sides.
    ok(&run(bin()
        .arg("report")
        .arg(&a)
        .arg(&pq)
        .args(["--filter", "bytes > 8192", "-o"])
        .arg(&page)));
    let data = common::embedded_report_data(&std::fs::read_to_string(&page).unwrap());
    let kept = data["a"]["events"].as_u64().unwrap();
    assert!(kept > 0 && kept < EVENTS, "{kept}");
    for k in ["events", "ios", "bytes", "latency_cdf"] {
        assert_eq!(data["a"][k], data["b"][k], "{k}");
    }
    let out = run(bin()
        .arg("report")
        .arg(&a)
        .args(["--filter-a", "bytes > 8192", "-o"])
        .arg(&page));
    usage_error(&out, "--filter-a applies to the comparison of two traces");
    // The report of one trace reads traces only: a dataset is named as such.
    let out = run(bin().arg("report").arg(&pq).arg("-o").arg(&page));
    one_line_error(&out, "holds a Parquet dataset");
    // A damaged trace: refused with the flag to pass, which report takes; then a warning.
    let bytes = std::fs::read(&a).unwrap();
    let cut = d.join("cut.iod");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let report = |extra: &[&str]| {
        run(bin()
            .arg("report")
            .arg(&cut)
            .arg(&a)
            .arg("-o")
            .arg(&page)
            .args(extra))
    };
    one_line_error(&report(&[]), "pass --allow-damaged");
    let out = report(&["--allow-damaged"]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: 1 damaged chunk skipped"), "{err}");
    let data = common::embedded_report_data(&std::fs::read_to_string(&page).unwrap());
    let intact = data["a"]["events"].as_u64().unwrap();
    assert!(intact > 0 && intact < EVENTS, "{intact}");
}

/// `--filter-a` and `--filter-b` compare two windows of time of one recording: the busiest
/// file's latency, four times longer in the second half, is found there; each side holds the
/// I/Os of its own window.
#[test]
fn two_windows_of_one_recording_are_compared() {
    let d = TempDir::new("diff-windows");
    let (path_id, _) = busiest(13);
    // The middle of the recording, on its monotonic clock, then in UTC.
    let r0 = write_edited(&d.join("plain.iod"), 13, Vec::new(), |e| vec![*e]);
    let r = iodump_format::Reader::open(&r0).unwrap();
    let mut ts: Vec<u64> = r.events().map(|e| e.timestamp_ns).collect();
    ts.sort_unstable();
    let mid = ts[ts.len() / 2];
    let before = ts.iter().filter(|&&t| t < mid).count() as u64;
    let h = r.header().clone();
    let t = write_edited(&d.join("t.iod"), 13, Vec::new(), |e| {
        let mut e = *e;
        if e.path_id == path_id && e.timestamp_ns >= mid {
            e.latency_ns *= 4;
        }
        vec![e]
    });
    let at = iodump_format::summary::rfc3339_utc(h.to_utc_ns(mid));
    let rows = diff_rows(
        &t,
        &t,
        &[
            "--filter-a",
            &format!("time < {at}"),
            "--filter-b",
            &format!("time >= {at}"),
        ],
    );
    let name = path_of(&t, path_id);
    let r = find(&rows, "file", &name, "p50_latency_us");
    assert_eq!(r["significant"], "yes", "{r}");
    assert!(r["change_pct"].as_f64().unwrap() > 200.0, "{r}");
    let ios = find(&rows, "total", "all", "ios");
    assert_eq!(ios["a"].as_f64().unwrap() as u64, before, "{ios}");
    assert_eq!(
        ios["b"].as_f64().unwrap() as u64,
        ts.len() as u64 - before,
        "{ios}"
    );
    // The same as one page.
    let page = d.join("windows.html");
    let out = run(bin()
        .arg("report")
        .arg(&t)
        .arg(&t)
        .args(["--filter-a", &format!("time < {at}")])
        .args(["--filter-b", &format!("time >= {at}"), "-o"])
        .arg(&page));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let counts = format!("A {before} I/Os, B {} I/Os", ts.len() as u64 - before);
    assert!(err.contains(&counts), "{counts}: {err}");
    // Without the side filters the recording does not differ from itself.
    assert!(significant(&diff_rows(&t, &t, &[])).is_empty());
    // They do not apply to --replay.
    let out = run(bin()
        .args(["diff", "--replay", "--filter-a", "rw == R"])
        .arg(&t)
        .arg(&t));
    assert_eq!(out.status.code(), Some(2));
}

/// Sequential I/O is found by following each stream in row order within a row group: a
/// dataset whose rows another engine shuffled (Spark's `repartition`) or cut into row groups
/// of a few rows has no sequential share to compare. `diff` says so in a warning and leaves
/// `sequential_pct` out, rather than reporting a change of it as significant between
/// identical data (31 such rows before).
#[test]
fn rows_out_of_time_order_leave_the_sequential_share_out() {
    if !common::have_pandas() {
        common::skip("", "pyarrow");
        return;
    }
    let d = TempDir::new("diff-row-order");
    let a = write_edited(&d.join("a.iod"), 21, Vec::new(), |e| vec![*e]);
    let pq = d.join("pq");
    ok(&run(bin().arg("convert").arg(&a).arg("-o").arg(&pq)));
    let rewrite = |name: &str, how: &str| -> PathBuf {
        let out = d.join(name);
        ok(&run(std::process::Command::new("cp")
            .arg("-r")
            .arg(&pq)
            .arg(&out)));
        let script = format!(
            "import sys, random, pyarrow.parquet as pq\n\
             t = pq.read_table(sys.argv[1])\n\
             {how}\n\
             pq.write_table(t, sys.argv[1], compression='zstd', row_group_size=rg)"
        );
        ok(&run(std::process::Command::new("python3")
            .args(["-c", &script])
            .arg(out.join("io.parquet"))));
        out
    };
    let shuffled = rewrite(
        "shuffled",
        "i = list(range(t.num_rows)); random.Random(7).shuffle(i); t = t.take(i); rg = 1 << 20",
    );
    let small = rewrite("small", "rg = 8");
    // The dataset against itself rewritten: sequential_pct is compared.
    let same = diff_rows(&pq, &pq, &[]);
    assert!(same.iter().any(|r| r["metric"] == "sequential_pct"));
    for (b, why) in [
        (&shuffled, "are earlier than the row before them"),
        (&small, "rows each"),
    ] {
        let out = run(bin()
            .arg("diff")
            .arg(&pq)
            .arg(b)
            .args(["--format", "json", "--limit", "0"]));
        ok(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("sequential_pct not compared") && stderr.contains(why),
            "{stderr}"
        );
        let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        assert!(!rows.iter().any(|r| r["metric"] == "sequential_pct"));
        assert!(significant(&rows).is_empty(), "{:?}", significant(&rows));
    }
}
