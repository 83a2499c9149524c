//! `iodump export --format perfetto`: the file decoded with Perfetto's own protos (the
//! `perfetto` Python package) holds every I/O of the trace with its fields, nested queue and
//! device slices, a track per process and the counters (tests/data/perfetto_check.py).
#![cfg(feature = "analyze")]

mod common;

use common::have_perfetto;
use common::{bin, fixture, ok, one_line_error, perfetto_check as check, run, TempDir};

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
