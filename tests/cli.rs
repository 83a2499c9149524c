//! End-to-end tests of the `iodump` binary: `synth` and `info`, good and bad input.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{bin, error_line, ok, one_line_error, run, TempDir};

fn synth(path: &Path, events: u64, workload: &str, seed: u64) {
    let out = run(bin().args([
        "synth",
        "-o",
        path.to_str().unwrap(),
        "--events",
        &events.to_string(),
        "--workload",
        workload,
        "--seed",
        &seed.to_string(),
    ]));
    ok(&out);
}

fn info_json(path: &Path) -> (Output, serde_json::Value) {
    let out = run(bin().args(["info", "--json", path.to_str().unwrap()]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out, v)
}

/// `iodump info … | true` (a reader that leaves at once), `… | head -1`: iodump ends
/// quietly (as Unix tools do: SIGPIPE), without a panic's message.
#[test]
fn a_closed_pipe_ends_quietly() {
    let d = TempDir::new("pipe");
    let p = d.join("t.iod");
    synth(&p, 200_000, "oltp", 3);
    for cmd in ["info", "analyze --top-files --limit 0"] {
        for reader in ["true", "head -1"] {
            let out = run(Command::new("sh").arg("-c").arg(format!(
                "{} {cmd} {} | {reader}",
                env!("CARGO_BIN_EXE_iodump"),
                p.display()
            )));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{cmd} | {reader}: {err}");
            assert!(
                !err.contains("panicked") && !err.contains("Broken pipe"),
                "{cmd} | {reader}: {err}"
            );
        }
    }
}

#[test]
fn synth_then_info_json_for_every_workload() {
    let d = TempDir::new("json");
    for (w, lossless) in [
        ("randread", false),
        ("seqwrite", true),
        ("oltp", true),
        ("mixed", false),
    ] {
        let p = d.join(&format!("{w}.iod"));
        synth(&p, 200_000, w, 7);
        let (out, v) = info_json(&p);
        assert!(out.status.success());
        assert_eq!(v["events"], 200_000, "{w}");
        assert_eq!(v["file_bytes"], std::fs::metadata(&p).unwrap().len());
        assert!(v["segments"].as_u64().unwrap() >= 3, "{w}");
        assert!(v["damaged"].as_array().unwrap().is_empty());
        if lossless {
            assert_eq!(v["lost_events"], 0, "{w}");
        }
        assert!(v["devices"].as_array().unwrap().len() >= 2, "{w}");
        let dev_events: u64 = v["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["events"].as_u64().unwrap())
            .sum();
        assert_eq!(dev_events, 200_000);
        assert!(v["processes"].as_u64().unwrap() >= 3, "{w}");
        assert!(v["paths"].as_u64().unwrap() >= 100, "{w}");
        let attributed = v["events_with_file_path"].as_u64().unwrap()
            + v["events_with_label"].as_u64().unwrap()
            + v["events_without_path"].as_u64().unwrap();
        assert_eq!(attributed, 200_000);
        for k in ["first_timestamp", "last_timestamp"] {
            let s = v[k].as_str().unwrap();
            assert!(
                s.len() == 30 && s.ends_with('Z') && &s[10..11] == "T",
                "{k}: {s}"
            );
        }
        assert!(v["first_timestamp"].as_str() < v["last_timestamp"].as_str());
        assert_eq!(v["finished"], true);
    }
}

#[test]
fn synth_is_deterministic_per_seed() {
    let d = TempDir::new("det");
    let (a, b, c) = (d.join("a.iod"), d.join("b.iod"), d.join("c.iod"));
    synth(&a, 50_000, "mixed", 3);
    synth(&b, 50_000, "mixed", 3);
    synth(&c, 50_000, "mixed", 4);
    let (a, b, c) = (
        std::fs::read(a).unwrap(),
        std::fs::read(b).unwrap(),
        std::fs::read(c).unwrap(),
    );
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn info_text_shows_the_essentials() {
    let d = TempDir::new("text");
    let p = d.join("t.iod");
    synth(&p, 100_000, "oltp", 1);
    let out = run(bin().args(["info", p.to_str().unwrap()]));
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "events        100,000 (lost 0",
        "integrity     ok",
        "bytes/event",
        "attribution   file path",
        "host          synth-oltp",
    ] {
        assert!(s.contains(needle), "missing {needle:?} in:\n{s}");
    }
}

#[test]
fn damaged_trace_reports_chunk_and_offset_and_keeps_the_rest() {
    let d = TempDir::new("damage");
    let p = d.join("t.iod");
    synth(&p, 300_000, "randread", 5);
    let (_, good) = info_json(&p);
    let mut bytes = std::fs::read(&p).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    std::fs::write(&p, &bytes).unwrap();
    let (out, v) = info_json(&p);
    assert_eq!(out.status.code(), Some(1));
    let line = error_line(&out);
    assert!(line.contains("damaged"), "{line}");
    let damaged = v["damaged"].as_array().unwrap();
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    let off = damaged[0]["offset"].as_u64().unwrap();
    assert!(off <= mid as u64 && off + (1 << 20) > mid as u64);
    assert_eq!(damaged[0]["chunk"], "events");
    let lost = v["damaged_events"].as_u64().unwrap();
    assert!(lost > 0);
    assert_eq!(
        v["events"].as_u64().unwrap() + lost,
        good["events"].as_u64().unwrap()
    );
}

#[test]
fn truncated_trace_reads_complete_chunks() {
    let d = TempDir::new("trunc");
    let p = d.join("t.iod");
    synth(&p, 300_000, "seqwrite", 5);
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let (out, v) = info_json(&p);
    assert_eq!(out.status.code(), Some(1));
    let line = error_line(&out);
    assert!(line.contains("truncated"), "{line}");
    let n = v["events"].as_u64().unwrap();
    assert!(n > 100_000 && n < 300_000, "{n}");
    assert_eq!(v["finished"], false);
}

#[test]
fn bad_input_gives_one_line_and_nonzero_exit() {
    let d = TempDir::new("bad");
    let garbage = d.join("garbage.iod");
    std::fs::write(&garbage, b"timestamp,pid,comm,iosize,rw,lba,path\n").unwrap();
    let out = run(bin().args(["info", garbage.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(1));
    assert!(error_line(&out).contains("not an iodump trace"));

    let empty = d.join("empty.iod");
    std::fs::write(&empty, b"").unwrap();
    let out = run(bin().args(["info", empty.to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(1));
    error_line(&out);

    let out = run(bin().args(["info", d.join("missing.iod").to_str().unwrap()]));
    assert_eq!(out.status.code(), Some(1));
    assert!(error_line(&out).contains("missing.iod"));

    let out = run(bin().args(["info", "--frobnicate", "x"]));
    assert_eq!(out.status.code(), Some(2));

    let out = run(bin().args([
        "synth",
        "-o",
        "/nonexistent-dir/x.iod",
        "--events",
        "10",
        "--workload",
        "oltp",
    ]));
    assert_eq!(out.status.code(), Some(1));
    assert!(error_line(&out).contains("/nonexistent-dir/x.iod"));

    let out = run(bin().args([
        "synth",
        "-o",
        "x.iod",
        "--events",
        "10",
        "--workload",
        "nope",
    ]));
    assert_eq!(out.status.code(), Some(2));

    // Every offline command names the input it could not read.
    let garbage = garbage.to_str().unwrap();
    for args in [
        vec!["analyze", garbage, "--summary"],
        vec!["analyze", garbage, "--top-files"],
        vec!["analyze", garbage, "--engine", "polars", "--summary"],
    ] {
        let out = run(bin().args(&args));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let line = error_line(&out);
        assert!(
            line.contains("garbage.iod") && line.contains("not an iodump trace"),
            "{args:?}: {line}"
        );
    }
    // A directory that is neither a recording in parts nor a Parquet dataset is named as such
    // (not as a dataset without its io table).
    let dir = d.join("nothing-here");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.to_str().unwrap();
    let good = d.join("good.iod");
    synth(&good, 1000, "oltp", 1);
    let good = good.to_str().unwrap();
    // info of a trace and a non-trace: the trace shown, one line for the other, its cause
    // once.
    let out = run(bin().args(["info", good, garbage]));
    one_line_error(&out, "garbage.iod: not an iodump trace");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("not an iodump trace").count(), 1, "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("good.iod"));
    for args in [
        vec!["analyze", dir, "--summary"],
        vec!["diff", good, dir],
        vec!["diff", dir, good],
    ] {
        let out = run(bin().args(&args));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let line = error_line(&out);
        assert!(
            line.contains("nothing-here") && line.contains("neither a recording"),
            "{args:?}: {line}"
        );
    }
}

#[test]
fn several_files_one_json_line_each() {
    let d = TempDir::new("multi");
    let (a, b) = (d.join("a.iod"), d.join("b.iod"));
    synth(&a, 10_000, "oltp", 1);
    synth(&b, 20_000, "seqwrite", 1);
    let out = run(bin().args(["info", "--json", a.to_str().unwrap(), b.to_str().unwrap()]));
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["events"], 10_000);
    assert_eq!(lines[1]["events"], 20_000);
}

/// Asserts a usage mistake gave exit 2 (usage) and one `iodump: error:` line containing
/// `needle`.
fn fails_with(out: &Output, needle: &str, what: &str) {
    assert_eq!(out.status.code(), Some(2), "{what}: {out:?}");
    let line = error_line(out);
    assert!(line.contains(needle), "{what}: {line}");
    assert!(line.len() < 400, "{what}: {} bytes", line.len());
}

/// The exit statuses of src/main.rs: 0 success, 1 failure or damaged input, 2 usage, both
/// for what clap refuses and for what is found wrong with the flags after it (a bad flag
/// combination, filter, duration or device name), with one error line either way.
#[test]
fn exit_statuses_are_0_1_and_2() {
    let d = TempDir::new("exit");
    let t = d.join("t.iod");
    synth(&t, 2000, "oltp", 1);
    let t = t.to_str().unwrap();
    let code = |args: &[&str]| run(bin().args(args)).status.code();
    // 0: success.
    assert_eq!(code(&["info", t]), Some(0));
    assert_eq!(code(&["analyze", t, "--summary"]), Some(0));
    // 1: failure or damaged input.
    let missing = d.join("missing.iod");
    assert_eq!(code(&["info", missing.to_str().unwrap()]), Some(1));
    let garbage = d.join("garbage.iod");
    std::fs::write(&garbage, b"not a trace").unwrap();
    assert_eq!(code(&["analyze", garbage.to_str().unwrap()]), Some(1));
    // 2: usage, from clap…
    assert_eq!(code(&["analyze", t, "--frobnicate"]), Some(2));
    assert_eq!(
        code(&["top", "--cgroup", "/", "--container", "x", "-b"]),
        Some(2)
    );
    // …and after it.
    for (args, needle) in [
        (
            &["analyze", t, "--filter", "iosize >"][..],
            "bad --filter expression",
        ),
        (&["analyze", t, "--filter", "latency > 1m"], "ambiguous"),
        (
            &["analyze", t, "--timeline", "--interval", "1x"],
            "--interval 1x",
        ),
        (&["analyze", t, "-d", "nosuchdisk"], "nosuchdisk"),
        (&["top", "-b", "-i", "0"], "-i \"0\""),
        (&["top", "--json"], "--json is for batch mode"),
        (
            &["record", "--ring", "10s"],
            "--ring write into a directory",
        ),
        (&["record", "--sample", "1/0"], "--sample 1/0"),
        (
            &["record", "--after", "5s", "--ring", "1x", "-o", "/tmp/"],
            "--ring 1x",
        ),
        (
            &["report", t, "--diff", "-o", "x.html"],
            "report --diff compares two traces",
        ),
    ] {
        let out = run(bin().args(args));
        fails_with(&out, needle, &args.join(" "));
    }
}

/// `-t` takes -1 (no limit) or a positive number of seconds a Duration holds; nothing else
/// panics or reaches the recorder (no BPF needed: every case fails before it starts).
#[test]
fn record_time_limits_are_checked() {
    let d = TempDir::new("record-t");
    let o = d.join("x.iod");
    let o = o.to_str().unwrap();
    for (t, needle) in [
        (
            "1e20",
            "-t 1e20: at most 18446744073709551615 seconds, or -1 for no limit",
        ),
        ("inf", "-t inf: at most"),
        (
            "nan",
            "-t NaN: give a positive number of seconds, or -1 for no limit",
        ),
        ("-inf", "-t -inf: give a positive"),
        ("0", "-t 0: give a positive"),
        ("-5", "-t -5: give a positive"),
        ("-0.5", "-t -0.5: give a positive"),
    ] {
        fails_with(&run(bin().args(["record", "-t", t, "-o", o])), needle, t);
    }
    // -1 and a long limit are accepted: the next flag checked is the one that fails.
    for t in ["-1", "1e19", "0.25"] {
        let out = run(bin().args(["record", "-t", t, "--meta", "nokey", "-o", o]));
        fails_with(&out, "--meta \"nokey\": expected KEY=VALUE", t);
    }
    assert!(!std::path::Path::new(o).exists());
}

/// Filters nested too deeply, too long, or breaking the types of
/// schemas/filter-expressions.md are one short error line from every command that takes one.
#[test]
fn bad_filters_are_one_line_errors_everywhere() {
    let d = TempDir::new("filters");
    let t = d.join("t.iod");
    synth(&t, 2000, "oltp", 1);
    let (t, o, img) = (t.to_str().unwrap(), d.join("o.iod"), d.join("img"));
    let (o, img) = (o.to_str().unwrap(), img.to_str().unwrap());
    let cases = [
        (
            format!("{}true{}", "(".repeat(20_000), ")".repeat(20_000)),
            "at column 65: nested too deeply",
        ),
        (format!("{}true", "!".repeat(40_000)), "nested too deeply"),
        (vec!["lba>=0"; 10_000].join("&&"), "too many terms"),
        (vec!["cpu==99"; 10_000].join("||"), "too many terms"),
        ("comm != 5".into(), "comm is text, 5 is a number"),
        ("path == 123".into(), "path is text, 123 is a number"),
        ("dev > 5".into(), "dev is text, 5 is a number"),
        ("rw != 1".into(), "rw is an op"),
        ("rw < W".into(), "rw is an op: it takes ==, != or =~, not <"),
        ("!latency".into(), "latency is a number, not a condition"),
        ("iosize".into(), "iosize is a number, not a condition"),
        ("comm".into(), "comm is text, not a condition"),
    ];
    for (f, needle) in &cases {
        let what = &f[..f.len().min(20)];
        let out = run(bin().args(["analyze", t, "--filter", f]));
        fails_with(&out, "bad --filter expression", what);
        fails_with(&out, needle, what);
        let out = run(bin().args(["replay", t, "--target", img, "-f", f]));
        fails_with(&out, needle, what);
        let out = run(bin().args(["record", "-t", "0.001", "-o", o, "-f", f]));
        fails_with(&out, needle, what);
    }
}

/// `replay --speed` takes a positive factor whose stretched schedule fits the replay's clock.
#[test]
fn replay_speed_is_checked() {
    let d = TempDir::new("speed");
    let t = d.join("t.iod");
    synth(&t, 500, "oltp", 1);
    let img = d.join("img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let (t, img) = (t.to_str().unwrap(), img.to_str().unwrap());
    for (s, needle) in [
        ("-1", "--speed -1: give a positive, finite factor"),
        ("0", "--speed 0: give a positive"),
        ("inf", "--speed inf: give a positive"),
        ("nan", "--speed NaN: give a positive"),
        (
            "1e-300",
            "--speed 1e-300: the replay would last more than 584 years",
        ),
    ] {
        let out = run(bin().args(["replay", t, "--target", img, "--speed", s]));
        fails_with(&out, needle, s);
    }
}

/// Offsets, lengths and types of the chunks of a trace (walked from its chunk headers).
fn chunk_list(b: &[u8]) -> Vec<(usize, usize, u16)> {
    let mut out = Vec::new();
    let mut pos = 16;
    while pos + 32 <= b.len() {
        let typ = u16::from_le_bytes([b[pos + 4], b[pos + 5]]);
        let len = 32 + u32::from_le_bytes(b[pos + 8..pos + 12].try_into().unwrap()) as usize;
        out.push((pos, len, typ));
        pos += len;
    }
    out
}

/// The trace with chunks `i` and `j` exchanged.
fn swap_chunks(b: &[u8], i: usize, j: usize) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = chunk_list(b)
        .iter()
        .map(|&(o, l, _)| &b[o..o + l])
        .collect();
    parts.swap(i, j);
    [&b[..16]]
        .into_iter()
        .chain(parts)
        .collect::<Vec<_>>()
        .concat()
}

/// Events a command says it read: from its JSON on stdout or its summary line on stderr.
fn events_read(cmd: &str, out: &Output, d: &TempDir, name: &str) -> u64 {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The number after `prefix` in a stderr line (`wrote x (1200 events`).
    let after = |prefix: &str| -> u64 {
        stderr
            .split(prefix)
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{cmd} {name}: no {prefix:?} in {stderr}"))
    };
    let json = || -> serde_json::Value {
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{cmd} {name}: {e}: {stdout}"))
    };
    match cmd {
        "info" => json()["events"].as_u64().unwrap(),
        "export" => {
            let csv = std::fs::read_to_string(d.join(&format!("{name}.csv"))).unwrap();
            csv.lines().count().saturating_sub(1) as u64
        }
        "convert" => after("converted "),
        "analyze" => json()[0]["value"].as_u64().unwrap(),
        "report" => after(".html ("),
        "plot" => after("(iops of "),
        "replay" => json()["ops"]
            .as_object()
            .unwrap()
            .values()
            .map(|o| o["recorded"].as_u64().unwrap())
            .sum(),
        _ => unreachable!(),
    }
}

/// A synthetic recording of 20,000 I/Os in parts of 100 ms (at least four) in `d/rec`: the
/// directory and its files' names.
fn recording_in_parts(d: &TempDir) -> (std::path::PathBuf, Vec<String>) {
    let rec = d.join("rec");
    ok(&run(bin()
        .args(["synth", "--workload", "oltp", "--events", "20000"])
        .args(["--seed", "3", "--rotate", "100ms", "-o"])
        .arg(format!("{}/", rec.display()))));
    let parts = common::names_in(&rec);
    assert!(parts.len() >= 4, "{parts:?}");
    (rec, parts)
}

/// A damaged part of a recording is named, with the offset in its own file: `info` of the
/// recording named its first part and an offset in all the parts end to end.
#[test]
fn a_damaged_part_is_named_by_its_own_file() {
    let d = TempDir::new("damaged-part");
    let (rec, parts) = recording_in_parts(&d);
    let third = rec.join(&parts[2]);
    let mut bytes = std::fs::read(&third).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&third, &bytes).unwrap();
    let out = run(bin().arg("info").arg(&rec));
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&parts[2]) && !err.contains(&parts[0]), "{err}");
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said.lines().find(|l| l.contains(&parts[2])).unwrap();
    assert!(line.contains("DAMAGED: 1 damaged chunk (first: "), "{said}");
    // Its offset is within the part.
    let offset: usize = err
        .split(" at byte ")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("an offset: {err}"));
    assert!(offset < bytes.len(), "{offset} of {}: {err}", bytes.len());
    assert_eq!(
        said.lines()
            .filter(|l| l.starts_with("  part") && l.contains("DAMAGED"))
            .count(),
        1,
        "{said}"
    );
}

/// A part missing from the middle of a recording is damage where the next part starts: `info`
/// says so and fails, `analyze` warns, `diff` refuses it without `--allow-damaged`.
#[test]
fn a_part_missing_from_a_recording_is_damage() {
    let d = TempDir::new("missing-part");
    let (rec, parts) = recording_in_parts(&d);
    // The first part gone is a recording whose retention deleted it: no damage.
    std::fs::remove_file(rec.join(&parts[0])).unwrap();
    ok(&run(bin().arg("info").arg(&rec)));
    std::fs::remove_file(rec.join(&parts[2])).unwrap();
    let out = run(bin().arg("info").arg(&rec));
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("part 3 of the recording is missing"),
        "{said}"
    );
    let out = run(bin().arg("analyze").arg(&rec));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: ")
            && err.contains("1 missing part skipped")
            && err.contains("part 3 of the recording is missing"),
        "{err}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("chunk"), "a part is not a chunk: {err}");
    one_line_error(
        &run(bin().arg("diff").arg(&rec).arg(&rec)),
        "1 missing part (first: part 3 of the recording is missing",
    );
    let out = run(bin().arg("info").arg(&rec));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(": 1 missing part (first: "), "{err}");
}

/// A FIFO (or a device) given as a trace is refused at once with one line: opening a FIFO
/// waited for a writer for ever, and `diff` hung even with one.
#[test]
fn a_fifo_is_refused_not_waited_on() {
    let d = TempDir::new("fifo");
    let good = d.join("good.iod");
    synth(&good, 300, "oltp", 3);
    let fifo = d.join("f.iod");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let commands: [Vec<&std::ffi::OsStr>; 5] = [
        vec!["info".as_ref(), fifo.as_ref()],
        vec!["analyze".as_ref(), fifo.as_ref()],
        vec!["diff".as_ref(), good.as_ref(), fifo.as_ref()],
        vec![
            "diff".as_ref(),
            "--replay".as_ref(),
            fifo.as_ref(),
            good.as_ref(),
        ],
        vec!["info".as_ref(), "/dev/null".as_ref()],
    ];
    for args in commands {
        let mut child = bin()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let start = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if start.elapsed() > std::time::Duration::from_secs(30) {
                child.kill().unwrap();
                panic!("{args:?}: still waiting after 30 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let out = child.wait_with_output().unwrap();
        let what = if args.contains(&"/dev/null".as_ref()) {
            "is a device"
        } else {
            "is a FIFO"
        };
        one_line_error(&out, what);
    }
}

/// Bad input to every command that reads traces (missing file, directory, empty file, random
/// bytes, truncations, bit flips, swapped chunks, two traces concatenated): never a panic, a
/// failure is exit 1 with one error line, and no command reads more events than the trace has.
#[test]
fn bad_traces_never_panic_nor_gain_events() {
    let d = TempDir::new("probe");
    let (good, other) = (d.join("good.iod"), d.join("other.iod"));
    let out = run(bin()
        .args([
            "synth",
            "--events",
            "1200",
            "--workload",
            "mixed",
            "--seed",
            "3",
        ])
        .args(["--segment-events", "200", "-o"])
        .arg(&good));
    ok(&out);
    synth(&other, 500, "oltp", 4);
    let (g, o) = (
        std::fs::read(&good).unwrap(),
        std::fs::read(&other).unwrap(),
    );
    let img = d.join("target.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    std::fs::create_dir(d.join("adir")).unwrap();

    let chunks = chunk_list(&g);
    let events: Vec<usize> = (0..chunks.len()).filter(|&i| chunks[i].2 == 5).collect();
    let mut x = 7u64;
    let mut random = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect()
    };
    // (name, bytes; None: the path is not a file written here)
    let mut inputs: Vec<(String, Option<Vec<u8>>)> = vec![
        ("missing".into(), None),
        ("adir".into(), None),
        ("empty".into(), Some(Vec::new())),
        ("random".into(), Some(random(20_000))),
        (
            "magic-random".into(),
            Some([&g[..16], &random(20_000)].concat()),
        ),
        (
            "swap-events".into(),
            Some(swap_chunks(&g, events[0], events[events.len() - 1])),
        ),
        (
            "swap-table-events".into(),
            Some(swap_chunks(&g, 1, events[0])),
        ),
        (
            "swap-header-footer".into(),
            Some(swap_chunks(&g, 0, chunks.len() - 1)),
        ),
        ("concatenated".into(), Some([&g[..], &o[..]].concat())),
        (
            "zeros-after".into(),
            Some([&g[..], &[0u8; 70_000][..]].concat()),
        ),
    ];
    for cut in [
        1,
        15,
        16,
        17,
        47,
        48,
        100,
        g.len() / 3,
        g.len() / 2,
        g.len() - 1,
    ] {
        inputs.push((format!("cut-{cut}"), Some(g[..cut].to_vec())));
    }
    for k in 1..=5 {
        let mut b = g.clone();
        let at = b.len() * k / 6;
        b[at] ^= 1 << k;
        inputs.push((format!("flip-{at}"), Some(b)));
    }
    for (name, bytes) in &inputs {
        let path = d.join(&if name == "adir" {
            name.clone()
        } else {
            format!("{name}.iod")
        });
        if let Some(b) = bytes {
            std::fs::write(&path, b).unwrap();
        }
        let p = path.to_str().unwrap();
        let o = |ext: &str| {
            d.join(&format!("{name}.{ext}"))
                .to_str()
                .unwrap()
                .to_string()
        };
        let commands: [(&str, Vec<String>); 7] = [
            ("info", vec!["info".into(), "--json".into(), p.into()]),
            (
                "export",
                vec![
                    "export".into(),
                    p.into(),
                    "--format".into(),
                    "csv".into(),
                    "-o".into(),
                    o("csv"),
                ],
            ),
            (
                "convert",
                vec!["convert".into(), p.into(), "-o".into(), o("pq")],
            ),
            (
                "analyze",
                vec!["analyze".into(), p.into(), "--format".into(), "json".into()],
            ),
            (
                "report",
                vec!["report".into(), p.into(), "-o".into(), o("html")],
            ),
            (
                "plot",
                vec![
                    "plot".into(),
                    p.into(),
                    "--kind".into(),
                    "iops".into(),
                    "-o".into(),
                    o("svg"),
                ],
            ),
            (
                "replay",
                vec![
                    "replay".into(),
                    p.into(),
                    "--target".into(),
                    img.to_str().unwrap().into(),
                    "--no-stall".into(),
                    "--json".into(),
                    "--engine".into(),
                    "psync".into(),
                ],
            ),
        ];
        // The seven commands at once (they only read the input).
        let children: Vec<_> = commands
            .iter()
            .map(|(cmd, args)| {
                let child = bin()
                    .args(args)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                (*cmd, child)
            })
            .collect();
        for (cmd, child) in children {
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("{cmd} {name}: {:?}: {stderr}", out.status);
            assert!(!stderr.contains("panicked"), "{what}");
            let code = out.status.code();
            assert!(code == Some(0) || code == Some(1), "{what}");
            if code == Some(1) {
                error_line(&out);
            } else {
                assert!(
                    bytes.is_some() && !["empty", "random"].contains(&name.as_str()),
                    "{what}"
                );
                let n = events_read(cmd, &out, &d, name);
                // A concatenated file is read as its first trace.
                assert!(n <= 1200, "{what}: {n} events");
            }
        }
    }
}
