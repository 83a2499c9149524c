//! `schemas/iod-format.md` is a spec a reader can be written from: `tests/specreader/iod.py`
//! was written from it alone, by someone who read no line of iodump's own reader, and
//! `tests/specreader/compare.py` checks that it reads what iodump reads — every event field
//! by field (`iodump export --format jsonl`), the header, the tables and the damage found
//! (`iodump info --json`, `iodump convert`) — on the fixtures (format 1.0, a truncated and a
//! bit-flipped one, one whose first processes chunk is damaged), traces of every `synth` workload in segments small (one zstd frame) and
//! large (columns compressed apart, §4.5), and a recording in parts. A change of the format
//! that the spec does not say fails here. Needs python3 with pyarrow (its zstd); without it
//! the test is skipped, unless `IODUMP_REQUIRE_PANDAS=1` (CI), when it fails.
#![cfg(feature = "analyze")]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{bin, fixture, have_pandas, ok, run, TempDir};

#[test]
fn a_reader_written_from_the_spec_alone_reads_what_iodump_reads() {
    if !have_pandas() {
        eprintln!("SKIP: python3 with pyarrow is needed to run the spec's Python reader");
        return;
    }
    let d = TempDir::new("specreader");
    let mut inputs: Vec<PathBuf> = [
        "oltp-5k.iod",
        "mixed-20k.iod",
        "mixed-20k-truncated.iod",
        "oltp-5k-bitflip.iod",
    ]
    .iter()
    .map(|f| fixture(f))
    .collect();
    // The first processes chunk damaged: its threads' events take their leaders' entries
    // (§3.3). Chunks from offset 16: type u16 at +4, stored_len u32 at +8, 32-byte headers.
    let mut b = std::fs::read(fixture("oltp-5k.iod")).unwrap();
    let mut at = 16;
    while u16::from_le_bytes([b[at + 4], b[at + 5]]) != 3 {
        at += 32 + u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
    }
    let stored = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
    b[at + 32 + stored / 2] ^= 4;
    let flipped = d.join("processes-flipped.iod");
    std::fs::write(&flipped, b).unwrap();
    inputs.push(flipped);
    for (i, workload) in ["randread", "seqwrite", "oltp", "mixed"].iter().enumerate() {
        for (events, segment) in [("3000", "500"), ("12000", "6000")] {
            let p = d.join(&format!("{workload}-{events}.iod"));
            ok(&run(bin()
                .args(["synth", "--workload", workload, "--events", events])
                .args(["--seed", &(i + 1).to_string(), "--segment-events", segment])
                .arg("-o")
                .arg(&p)));
            inputs.push(p);
        }
    }
    let parts = d.join("parts");
    ok(&run(bin()
        .args(["synth", "--workload", "oltp", "--events", "20000"])
        .args(["--seed", "9", "--rotate", "100ms", "-o"])
        .arg(format!("{}/", parts.display()))));
    inputs.push(parts);
    let compare = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/specreader/compare.py");
    for input in &inputs {
        let out = Command::new("python3")
            .arg(compare)
            .arg("--iodump")
            .arg(env!("CARGO_BIN_EXE_iodump"))
            .arg(input)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.starts_with("OK "),
            "{}: {said}{}",
            input.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
