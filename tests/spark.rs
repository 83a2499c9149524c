//! A fleet's dataset in other engines: traces of two hosts over two UTC days, converted with
//! `--partition-by host,date`, read with default settings by Spark (pyspark in local mode,
//! Java 17), DuckDB and DataFusion running the README's queries (its "Many machines" section,
//! taken from README.md so that the two cannot drift apart), and by pandas and polars: row
//! counts per host and day, the top files by I/Os joining `io` with `files`, exact p50/p99
//! latency, the first and last timestamps — all equal to `iodump analyze` on the traces.
//!
//! Needs python3 with pyspark, duckdb, datafusion, polars, pandas and pyarrow, and java: skips
//! with a message without them, fails instead when `IODUMP_REQUIRE_SPARK=1` (set by CI).
#![cfg(feature = "analyze")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use iodump_format::{Device, EndInfo, Event, Loss, PathEntry, Process, WriteError, Writer};
use iodump_synth::{self as synth, SynthParams, SynthSink, Workload};
use serde_json::Value;

mod common;

use common::{bin, ok, run, TempDir};

/// 2026-01-16T00:00:00Z in ns: the midnight between the two days.
const MIDNIGHT_NS: i64 = 1_768_521_600 * 1_000_000_000;
const HOUR_NS: i64 = 3_600 * 1_000_000_000;

fn engines_available() -> bool {
    let python = Command::new("python3")
        .args([
            "-c",
            "import pyspark, duckdb, datafusion, polars, pandas, pyarrow",
        ])
        .output();
    let java = Command::new("java").arg("-version").output();
    let missing = match (&python, &java) {
        (Ok(p), _) if !p.status.success() => String::from_utf8_lossy(&p.stderr)
            .lines()
            .last()
            .unwrap_or("python3 failed")
            .to_string(),
        (Err(e), _) => format!("python3: {e}"),
        (_, Err(e)) => format!("java: {e}"),
        (_, Ok(j)) if !j.status.success() => "java -version failed".to_string(),
        _ => return true,
    };
    if std::env::var("IODUMP_REQUIRE_SPARK").as_deref() == Ok("1") {
        panic!("IODUMP_REQUIRE_SPARK=1 but the engines cannot run: {missing}");
    }
    common::skip(
        "",
        &format!("Spark, DuckDB, DataFusion, polars and java ({missing})"),
    );
    false
}

/// One trace of the fleet: the generator of `iodump synth` with the host and clock of a
/// recording (`iodump synth` itself has neither option).
struct Spec {
    file: &'static str,
    host: &'static str,
    workload: Workload,
    events: u64,
    seed: u64,
    /// UTC time of the trace's middle instant.
    middle_ns: i64,
}

const FLEET: [Spec; 3] = [
    // Crosses midnight: its I/Os land in both days' partitions.
    Spec {
        file: "io-web-01-2026-01-15.iod",
        host: "web-01",
        workload: Workload::Oltp,
        events: 2_000,
        seed: 11,
        middle_ns: MIDNIGHT_NS,
    },
    Spec {
        file: "io-db-01-2026-01-15.iod",
        host: "db-01",
        workload: Workload::Mixed,
        events: 1_500,
        seed: 12,
        middle_ns: MIDNIGHT_NS - 9 * HOUR_NS,
    },
    Spec {
        file: "io-db-01-2026-01-16.iod",
        host: "db-01",
        workload: Workload::Mixed,
        events: 1_500,
        seed: 13,
        middle_ns: MIDNIGHT_NS + 9 * HOUR_NS,
    },
];

struct Discard;

impl SynthSink for Discard {
    type Error = std::convert::Infallible;
    fn device(&mut self, _: &Device) -> Result<(), Self::Error> {
        Ok(())
    }
    fn process(&mut self, _: &Process) -> Result<(), Self::Error> {
        Ok(())
    }
    fn path(&mut self, _: &PathEntry) -> Result<(), Self::Error> {
        Ok(())
    }
    fn event(&mut self, _: &Event) -> Result<(), Self::Error> {
        Ok(())
    }
    fn loss(&mut self, _: &Loss) -> Result<(), Self::Error> {
        Ok(())
    }
}

struct ToWriter<'a>(&'a mut Writer<std::fs::File>);

impl SynthSink for ToWriter<'_> {
    type Error = WriteError;
    fn device(&mut self, d: &Device) -> Result<(), WriteError> {
        self.0.add_device(d.clone())
    }
    fn process(&mut self, p: &Process) -> Result<(), WriteError> {
        self.0.add_process(p.clone())
    }
    fn path(&mut self, p: &PathEntry) -> Result<(), WriteError> {
        self.0.add_path(p.clone())
    }
    fn event(&mut self, e: &Event) -> Result<(), WriteError> {
        self.0.push(e)
    }
    fn loss(&mut self, l: &Loss) -> Result<(), WriteError> {
        self.0.add_loss(*l)
    }
}

fn write_trace(dir: &Path, s: &Spec) -> PathBuf {
    let params = SynthParams {
        events: s.events,
        workload: s.workload,
        seed: s.seed,
    };
    // The first pass only finds the time span, to put its middle at `middle_ns`.
    let span = synth::generate(&params, &mut Discard).unwrap();
    let mut h = synth::header(&params);
    let middle = (span.first_timestamp_ns + span.last_timestamp_ns) / 2;
    h.hostname = s.host.to_string();
    h.wall_clock_ns = s.middle_ns - (middle - h.monotonic_ns) as i64;
    let path = dir.join(s.file);
    let f = std::fs::File::create(&path).unwrap();
    let mut w = Writer::new(f, &h, Default::default()).unwrap();
    synth::generate(&params, &mut ToWriter(&mut w)).unwrap();
    w.finish(EndInfo {
        end_monotonic_ns: span.last_timestamp_ns + 1_000_000,
        ..EndInfo::default()
    })
    .unwrap();
    path
}

/// The SQL block of the README's "Many machines" section.
fn readme_queries() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("\n## Many machines\n")
        .nth(1)
        .expect("README has a \"Many machines\" section");
    let section = section.split("\n## ").next().unwrap();
    let sql = section
        .split("```sql\n")
        .nth(1)
        .expect("the section has a sql block");
    sql.split("\n```").next().unwrap().to_string()
}

fn num(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{v} is not a number (a decimal read as text?)"))
}

/// Equal to analyze's printed precision (0.001) plus what the engines' float arithmetic adds.
fn close(a: &Value, b: &Value, what: &str) {
    let (x, y) = (num(a), num(b));
    assert!((x - y).abs() <= 0.0011, "{what}: {x} vs {y}");
}

fn int(v: &Value) -> i64 {
    v.as_i64()
        .unwrap_or_else(|| panic!("{v} is not an integer"))
}

/// YYYY-MM-DD of UTC day number `day`.
fn date_of(day: i64) -> String {
    iodump_format::summary::rfc3339_utc(day * 86_400 * 1_000_000_000)[..10].to_string()
}

#[test]
fn spark_and_duckdb_answer_like_analyze_on_a_two_host_two_day_dataset() {
    if !engines_available() {
        return;
    }
    let d = TempDir::new("spark");
    let keep = std::env::var_os("IODUMP_SPARK_KEEP").map(PathBuf::from);
    let traces: Vec<PathBuf> = FLEET.iter().map(|s| write_trace(&d.0, s)).collect();
    let ds = d.join("ds");
    let out = run(bin()
        .arg("convert")
        .args(&traces)
        .args(["--partition-by", "host,date", "-o"])
        .arg(&ds));
    ok(&out);
    for part in [
        "io/host=web-01/date=2026-01-15",
        "io/host=web-01/date=2026-01-16",
        "io/host=db-01/date=2026-01-15",
        "io/host=db-01/date=2026-01-16",
        "files/host=db-01",
    ] {
        assert!(ds.join(part).join("part-0.parquet").is_file(), "{part}");
    }

    // What iodump analyze says on the traces.
    let host_of = |trace: &str| FLEET.iter().find(|s| s.file == trace).unwrap().host;
    let mut per_partition: std::collections::BTreeMap<(String, String), i64> = Default::default();
    for r in common::analyze_rows(
        &traces,
        &[
            "--sql",
            "SELECT trace, DIV(ts_ns, 86400000000000) AS day, count(*) AS ios FROM io \
             GROUP BY trace, day",
        ],
    ) {
        let key = (
            host_of(r["trace"].as_str().unwrap()).to_string(),
            date_of(int(&r["day"])),
        );
        *per_partition.entry(key).or_default() += int(&r["ios"]);
    }
    assert_eq!(per_partition.len(), 4, "{per_partition:?}");
    let top = common::analyze_rows(&traces, &["--top-files", "--limit", "10"]);
    let lat = common::analyze_rows(&traces, &["--latency"]);
    let span = common::analyze_rows(
        &traces,
        &[
            "--sql",
            "SELECT min(ts_ns) AS first_ns, max(ts_ns) AS last_ns, count(*) AS n FROM io",
        ],
    );
    let (first_ns, last_ns) = (int(&span[0]["first_ns"]), int(&span[0]["last_ns"]));
    assert_eq!(int(&span[0]["n"]), 5_000);
    // analyze reads the new dataset as it reads the traces.
    for q in [&["--latency"][..], &["--top-files", "--limit", "10"]] {
        let on_ds = common::analyze_rows(std::slice::from_ref(&ds), q);
        let on_traces = common::analyze_rows(&traces, q);
        assert_eq!(on_ds.len(), on_traces.len(), "{q:?}");
        for (a, b) in on_ds.iter().zip(&on_traces) {
            for (k, v) in a.as_object().unwrap() {
                match v {
                    Value::Number(_) => close(v, &b[k], &format!("analyze ds {q:?} {k}")),
                    _ => assert_eq!(v, &b[k], "analyze ds {q:?} {k}"),
                }
            }
        }
    }

    // What the engines say on the dataset.
    let sql = readme_queries();
    let qfile = d.join("queries.sql");
    std::fs::write(&qfile, &sql).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/spark/engines.py");
    let t = Instant::now();
    let py = Command::new("python3")
        .arg(script)
        .arg(&ds)
        .arg(&qfile)
        .current_dir(&d.0)
        .output()
        .unwrap();
    let took = t.elapsed();
    ok(&py);
    let got: Value = serde_json::from_slice(&py.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&py.stdout),
            String::from_utf8_lossy(&py.stderr)
        )
    });
    eprintln!("engines took {took:.1?}: {}", got["seconds"]);
    if let Some(k) = &keep {
        // For a look by hand: the traces, the dataset and both sides' answers.
        let _ = std::fs::remove_dir_all(k);
        std::fs::create_dir_all(k).unwrap();
        for f in traces.iter().chain([&qfile]) {
            std::fs::copy(f, k.join(f.file_name().unwrap())).unwrap();
        }
        std::fs::write(k.join("engines.json"), &py.stdout).unwrap();
        let analyze_side = serde_json::json!({"per_partition": format!("{per_partition:?}"),
            "top_files": top, "latency": lat, "span": span});
        std::fs::write(k.join("analyze.json"), analyze_side.to_string()).unwrap();
    }

    // Types every engine takes as they are: no decimal, no unsigned, a timestamp, a date.
    let all = got["engines"]
        .as_object()
        .unwrap()
        .iter()
        .chain(got["frames"].as_object().unwrap());
    for (engine, e) in all {
        for (table, cols) in e["schema"].as_object().unwrap() {
            for (c, ty) in cols.as_object().unwrap() {
                let ty = ty.as_str().unwrap().to_lowercase();
                // DataFusion's partition columns: dictionaries of strings (with uint16 keys).
                let ty = match ty.strip_prefix("dictionary<values=") {
                    Some(t) => t.split(',').next().unwrap().to_string(),
                    None => ty,
                };
                assert!(
                    !ty.contains("decimal") && !ty.starts_with('u') && !ty.contains("uint"),
                    "{engine}: {table}.{c} is {ty}"
                );
            }
        }
        let io = &e["schema"]["io"];
        let ts = io["timestamp"].as_str().unwrap().to_lowercase();
        assert!(
            ts.contains("timestamp") || ts.contains("datetime"),
            "{engine}: timestamp is {ts}"
        );
        assert!(
            io["timestamp_ns"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("int"),
            "{engine}: timestamp_ns is {}",
            io["timestamp_ns"]
        );
        if ["spark", "duckdb", "polars"].contains(&engine.as_str()) {
            assert_eq!(
                io["date"].as_str().unwrap().to_lowercase(),
                "date",
                "{engine}"
            );
        }
    }

    let want_partitions: Vec<Value> = per_partition
        .iter()
        .map(|((h, day), n)| serde_json::json!({"host": h, "date": day, "ios": n}))
        .collect();
    for (engine, e) in got["engines"].as_object().unwrap() {
        let r = e["results"].as_array().unwrap();
        assert_eq!(r.len(), 4, "{engine}: the README's four queries");
        // Rows per host and day.
        assert_eq!(r[0].as_array().unwrap(), &want_partitions, "{engine}");
        // Top files, io joined with files.
        let files = r[1].as_array().unwrap();
        assert_eq!(files.len(), top.len(), "{engine}");
        for (i, (a, b)) in files.iter().zip(&top).enumerate() {
            let what = format!("{engine} top file {i}");
            // iodump names a label with its device (`[journal] sda1`); the query, by path.
            let path = b["path"].as_str().unwrap();
            let path = match path.split_once("] ") {
                Some((label, _)) if path.starts_with('[') => format!("{label}]"),
                _ => path.to_string(),
            };
            assert_eq!(a["path"], path, "{what}");
            for k in ["ios", "read_bytes", "write_bytes"] {
                assert_eq!(int(&a[k]), int(&b[k]), "{what} {k}");
            }
            close(&a["p99_latency_us"], &b["p99_latency_us"], &what);
        }
        // Latency percentiles.
        let l = &r[2][0];
        assert_eq!(int(&l["ios"]), int(&lat[0]["ios"]), "{engine}");
        for k in ["p50_us", "p99_us", "max_us"] {
            close(&l[k], &lat[0][k], &format!("{engine} {k}"));
        }
        // First and last I/O: the timestamps to the microsecond, the nanoseconds exact.
        let s = &r[3][0];
        assert_eq!(int(&s["first_ns"]), first_ns, "{engine}");
        assert_eq!(int(&s["last_ns"]), last_ns, "{engine}");
        assert_eq!(int(&s["first"]), first_ns.div_euclid(1000), "{engine}");
        assert_eq!(int(&s["last"]), last_ns.div_euclid(1000), "{engine}");
    }
    for (engine, f) in got["frames"].as_object().unwrap() {
        assert_eq!(
            f["per_partition"].as_array().unwrap(),
            &want_partitions,
            "{engine}"
        );
        close(&f["p99_us"], &lat[0]["p99_us"], &format!("{engine} p99"));
        assert_eq!(int(&f["first"]), first_ns.div_euclid(1000), "{engine}");
        assert_eq!(int(&f["last_ns"]), last_ns, "{engine}");
    }
}
