//! `iodump analyze` on Parquet datasets written before layout 2 (iodump 0.1.0's first tables:
//! nanosecond timestamps, unsigned integers; `tests/data/layout1-*`, converted from
//! `tests/data/layout1.iod`): every query gives the rows it gives on the trace, in both
//! engines, with and without a filter.
#![cfg(feature = "analyze")]

use std::path::{Path, PathBuf};

mod common;

use common::{bin, run, same_rows};

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
