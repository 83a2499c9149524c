//! `iodump export --format perfetto`: the file decoded with Perfetto's own protos (the
//! `perfetto` Python package) holds every I/O of the trace with its fields, nested queue and
//! device slices, a track per process and the counters (tests/data/perfetto_check.py).
#![cfg(feature = "analyze")]

use std::path::Path;
use std::process::Command;

mod common;

use common::{bin, fixture, ok, one_line_error, run, TempDir};

/// True when python3 can import Perfetto's protos; panics when it cannot but must
/// (`IODUMP_REQUIRE_PERFETTO=1`), else prints a `SKIP:` line.
fn have_perfetto(test: &str) -> bool {
    let ok = Command::new("python3")
        .args([
            "-c",
            "from perfetto.protos.perfetto.trace import perfetto_trace_pb2",
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        if std::env::var("IODUMP_REQUIRE_PERFETTO").as_deref() == Ok("1") {
            panic!("IODUMP_REQUIRE_PERFETTO=1 but python3 cannot import the perfetto package");
        }
        common::skip(test, "python3's perfetto package");
    }
    ok
}

/// Exports `trace` as Perfetto and JSON lines and checks one against the other.
fn check(trace: &Path, d: &TempDir, what: &str) {
    let pf = d.join(&format!("{what}.pftrace"));
    let jsonl = d.join(&format!("{what}.jsonl"));
    let info = d.join(&format!("{what}.json"));
    ok(&run(bin()
        .arg("export")
        .arg(trace)
        .args(["--format", "perfetto", "-o"])
        .arg(&pf)));
    ok(&run(bin()
        .arg("export")
        .arg(trace)
        .args(["--format", "jsonl", "-o"])
        .arg(&jsonl)));
    let out = run(bin().arg("info").arg("--json").arg(trace));
    ok(&out);
    std::fs::write(&info, &out.stdout).unwrap();
    let events = iodump_format::Reader::open(trace).unwrap().events().count();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perfetto_check.py");
    let py = Command::new("python3")
        .arg(script)
        .arg(&pf)
        .arg(&jsonl)
        .arg(&info)
        .output()
        .unwrap();
    ok(&py);
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        format!("ok {events}"),
        "{what}"
    );
}

#[test]
fn every_io_decodes_with_perfettos_protos() {
    if !have_perfetto("every_io_decodes_with_perfettos_protos") {
        return;
    }
    let d = TempDir::new("perfetto");
    // A format 1.0 trace with a path that is not UTF-8, overlapping segments.
    check(&fixture("mixed-20k.iod"), &d, "mixed");
    // A current trace: command lines, cgroups with containers, bio-based devices.
    let synth = d.join("oltp.iod");
    ok(&run(bin().arg("synth").arg("-o").arg(&synth).args([
        "--events",
        "30000",
        "--workload",
        "oltp",
        "--seed",
        "5",
    ])));
    check(&synth, &d, "oltp");
}

#[test]
fn damaged_input_is_one_line() {
    let d = TempDir::new("perfetto-bad");
    let out = run(bin()
        .arg("export")
        .arg(d.join("missing.iod"))
        .args(["--format", "perfetto", "-o"])
        .arg(d.join("x.pftrace")));
    one_line_error(&out, "missing.iod");
    assert!(!d.join("x.pftrace").exists());
}
