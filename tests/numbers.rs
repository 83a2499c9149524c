//! Figures that cannot be computed are shown as missing, never as impossible numbers: a rate
//! over a recording of one I/O (no time between its first and last I/O) is `-` in a table,
//! empty in CSV and null in JSON — in `analyze`'s summary and top tables (both engines) and in
//! `diff`, which does not test it — and no output holds NaN or an infinity.

#![cfg(feature = "analyze")]

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

use common::{bin, ok, run, TempDir};

/// `iodump synth -o DIR/NAME --events N --workload oltp`.
fn synth(d: &TempDir, name: &str, events: u64) -> PathBuf {
    let path = d.join(name);
    ok(&run(bin()
        .args(["synth", "--workload", "oltp", "--seed", "3", "--events"])
        .arg(events.to_string())
        .arg("-o")
        .arg(&path)));
    path
}

/// The stdout of `iodump ARGS`, failing unless it succeeded; never NaN nor an infinity.
fn out_of(args: &[&str], trace: &Path) -> String {
    let out = run(bin().args(args).arg(trace));
    ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    no_nan_or_infinity(&text);
    text
}

/// Fails when a cell of a table, CSV or JSON answer reads NaN or an infinity.
fn no_nan_or_infinity(text: &str) {
    for cell in text.split([',', ' ', '\n', ':', '{', '}', '[', ']']) {
        let c = cell.trim_matches('"').to_lowercase();
        let c = c.trim_start_matches(['-', '+']);
        assert!(
            !matches!(c, "nan" | "inf" | "infinity"),
            "{cell:?} in {}",
            &text[..text.len().min(2000)]
        );
    }
}

/// The `(header, cells)` of a CSV answer without quoted commas.
fn csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines();
    let split = |l: &str| l.split(',').map(str::to_string).collect::<Vec<_>>();
    let header = split(lines.next().unwrap());
    (header, lines.map(split).collect())
}

#[test]
fn one_io_has_no_rate_in_analyze() {
    let d = TempDir::new("numbers-analyze");
    let one = synth(&d, "one.iod", 1);
    for engine in ["one-pass", "polars"] {
        let e = ["--engine", engine];
        // The summary: a duration of 0, the rates missing, the rest as ever.
        let json: Value = serde_json::from_str(&out_of(
            &[&["analyze", "--format", "json"][..], &e].concat(),
            &one,
        ))
        .unwrap();
        let value = |m: &str| {
            json.as_array()
                .unwrap()
                .iter()
                .find(|r| r["metric"] == m)
                .unwrap_or_else(|| panic!("{engine}: no {m}: {json}"))["value"]
                .clone()
        };
        assert_eq!(value("events"), 1, "{engine}");
        assert_eq!(value("duration_s"), 0.0, "{engine}");
        assert_eq!(value("iops"), Value::Null, "{engine}: {json}");
        assert_eq!(value("mb_per_s"), Value::Null, "{engine}: {json}");
        assert!(value("p50_latency_us").as_f64().unwrap() > 0.0, "{engine}");
        let table = out_of(&[&["analyze"][..], &e].concat(), &one);
        for m in ["iops", "mb_per_s"] {
            let line = table.lines().find(|l| l.starts_with(m)).unwrap();
            assert_eq!(
                line.split_whitespace().nth(1),
                Some("-"),
                "{engine}: {table}"
            );
        }
        let (header, rows) = csv(&out_of(
            &[&["analyze", "--format", "csv"][..], &e].concat(),
            &one,
        ));
        assert_eq!(header, ["metric", "value"]);
        for r in &rows {
            let missing = r[0] == "iops" || r[0] == "mb_per_s";
            assert_eq!(r[1].is_empty(), missing, "{engine}: {r:?}");
        }
        // The top tables: one row each, its rates missing.
        for (question, rates) in [
            ("--top-procs", &["iops", "mb_per_s"][..]),
            ("--top-files", &["iops"][..]),
        ] {
            let args = [&["analyze", question][..], &e].concat();
            let (header, rows) = csv(&out_of(&[&args[..], &["--format", "csv"]].concat(), &one));
            assert_eq!(rows.len(), 1, "{engine} {question}");
            for rate in rates {
                let at = header.iter().position(|h| h == rate).unwrap();
                assert_eq!(rows[0][at], "", "{engine} {question} {rate}: {rows:?}");
            }
            let json: Value =
                serde_json::from_str(&out_of(&[&args[..], &["--format", "json"]].concat(), &one))
                    .unwrap();
            for rate in rates {
                assert_eq!(json[0][rate], Value::Null, "{engine} {question}: {json}");
            }
            assert_eq!(json[0]["ios"], 1, "{engine} {question}: {json}");
            let table = out_of(&args, &one);
            let (names, row) = (
                table
                    .lines()
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .collect::<Vec<_>>(),
                table
                    .lines()
                    .nth(1)
                    .unwrap()
                    .split_whitespace()
                    .collect::<Vec<_>>(),
            );
            for rate in rates {
                let at = names.iter().position(|h| h == rate).unwrap();
                assert_eq!(row[at], "-", "{engine} {question}: {table}");
            }
        }
    }
    // Two I/Os a while apart still have their rates.
    let two = synth(&d, "two.iod", 2);
    let json: Value =
        serde_json::from_str(&out_of(&["analyze", "--format", "json"], &two)).unwrap();
    let iops = json
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "iops")
        .unwrap();
    assert!(iops["value"].as_f64().unwrap() > 0.0, "{json}");
}

#[test]
fn one_io_has_no_rate_in_diff() {
    let d = TempDir::new("numbers-diff");
    let one = synth(&d, "one.iod", 1);
    let many = synth(&d, "many.iod", 5_000);
    for (a, b, undefined_a) in [(&one, &many, true), (&many, &one, false)] {
        let out = run(bin()
            .arg("diff")
            .arg(a)
            .arg(b)
            .args(["--format", "json", "--limit", "0"]));
        ok(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        no_nan_or_infinity(&text);
        let rows: Vec<Value> = serde_json::from_str(&text).unwrap();
        let rates: Vec<&Value> = rows
            .iter()
            .filter(|r| r["metric"] == "iops" || r["metric"] == "mb_per_s")
            .collect();
        assert!(!rates.is_empty());
        for r in rates {
            let (undefined, other) = if undefined_a {
                (&r["a"], &r["b"])
            } else {
                (&r["b"], &r["a"])
            };
            assert_eq!(undefined, &Value::Null, "{r}");
            // The other side's rate, 0 for a group it does not have.
            assert!(other.as_f64().is_some(), "{r}");
            for k in ["change", "change_pct", "significant", "p_value"] {
                assert_eq!(r[k], Value::Null, "{k}: {r}");
            }
        }
        // The table says `-`, the CSV nothing.
        let out = run(bin().arg("diff").arg(a).arg(b).args([
            "--group-by",
            "total",
            "--by",
            "ios",
            "--format",
            "csv",
        ]));
        ok(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        no_nan_or_infinity(&text);
        let (header, rows) = csv(&text);
        let iops = rows
            .iter()
            .find(|r| r[2] == "iops")
            .unwrap_or_else(|| panic!("{text}"));
        let side = if undefined_a { "a" } else { "b" };
        let at = header.iter().position(|h| h == side).unwrap();
        assert_eq!(iops[at], "", "{text}");
        let out = run(bin()
            .arg("diff")
            .arg(a)
            .arg(b)
            .args(["--group-by", "total", "--by", "ios"]));
        ok(&out);
        let text = String::from_utf8(out.stdout).unwrap();
        no_nan_or_infinity(&text);
        assert!(!text.contains("1000000000"), "{text}");
        let line = text
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some("iops"))
            .unwrap_or_else(|| panic!("{text}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(cells[if undefined_a { 3 } else { 4 }], "-", "{text}");
    }
}
