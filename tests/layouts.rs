//! `iodump analyze` on Parquet datasets written before layout 2 (iodump 0.1.0's first tables:
//! nanosecond timestamps, unsigned integers; `tests/data/layout1-*`, converted from
//! `tests/data/layout1.iod`): every query gives the rows it gives on the trace, in both
//! engines, with and without a filter.
#![cfg(feature = "analyze")]

use std::path::{Path, PathBuf};

mod common;

use common::{bin, run};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn analyze(input: &Path, q: &[&str], extra: &[&str]) -> serde_json::Value {
    let out = run(bin()
        .arg("analyze")
        .arg(input)
        .args(q)
        .args(["--format", "json"])
        .args(extra));
    assert!(
        out.status.success(),
        "{} {q:?} {extra:?}: {}",
        input.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn layout_1_datasets_give_the_traces_answers() {
    let trace = data("layout1.iod");
    let queries: [&[&str]; 9] = [
        &["--summary"],
        &["--top-files", "--limit", "8"],
        &["--top-files", "--by", "latency", "--limit", "8"],
        &["--top-procs"],
        &["--latency", "--group-by", "op"],
        &["--timeline", "--interval", "10ms"],
        &["--seek"],
        &["--seq-writes", "--min-bytes", "16k"],
        &[
            "--top-files",
            "--filter",
            "rw == W && latency > 50us && cgroup != 0",
        ],
    ];
    for dir in ["layout1-flat", "layout1-hive"] {
        for q in queries {
            let want = analyze(&trace, q, &[]);
            for engine in ["one-pass", "polars"] {
                let got = analyze(&data(dir), q, &["--engine", engine]);
                same_rows(&want, &got, &format!("{dir} {q:?} {engine}"));
            }
        }
        // --sql reads the same io table.
        let q = ["--sql", "SELECT op, count(*) AS n, sum(bytes) AS b, max(ts_ns) AS t FROM io GROUP BY op ORDER BY op"];
        same_rows(
            &analyze(&trace, &q, &[]),
            &analyze(&data(dir), &q, &[]),
            &format!("{dir} --sql"),
        );
    }
}

/// Same rows in the same order; numbers equal to the printed precision (0.001).
fn same_rows(a: &serde_json::Value, b: &serde_json::Value, what: &str) {
    let (a, b) = (a.as_array().unwrap(), b.as_array().unwrap());
    assert_eq!(a.len(), b.len(), "{what}: row counts");
    assert!(!a.is_empty(), "{what}: no rows");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let (x, y) = (x.as_object().unwrap(), y.as_object().unwrap());
        assert_eq!(
            x.keys().collect::<Vec<_>>(),
            y.keys().collect::<Vec<_>>(),
            "{what}: columns"
        );
        for (k, u) in x {
            let v = &y[k];
            match (u.as_f64(), v.as_f64()) {
                (Some(p), Some(q)) if u.is_f64() || v.is_f64() => {
                    assert!((p - q).abs() <= 0.0011, "{what}: row {i} {k}: {p} vs {q}")
                }
                _ => assert_eq!(u, v, "{what}: row {i} {k}"),
            }
        }
    }
}
