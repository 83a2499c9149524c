//! The output-file rule, end to end, for every command that creates a file: an existing output
//! is never lost when the command fails (it is replaced only once recording has really
//! started, or once the export, report or plot is complete), a symbolic link is never
//! followed, a file of another user is never written into, and the new file is mode 0600 and
//! owned by whoever ran iodump. Tests that record need root and BPF, those that make files of
//! another user need root: without them they skip, unless `IODUMP_REQUIRE_BPF=1` (set by CI),
//! in which case they fail.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use iodump_format::Reader;

mod common;

use common::{
    as_other_user, bin, bpf_available, give_to_other_user, names_in, ok, one_line_error,
    root_available, run, spawn_recording, TempDir, OTHER_UID,
};

/// Recording tests load BPF programs: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn synth(p: &Path, events: u32) {
    ok(&run(bin()
        .args(["synth", "--workload", "oltp", "--seed", "3", "--events"])
        .arg(events.to_string())
        .arg("-o")
        .arg(p)));
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_symlink()
}

/// A world-writable sticky directory like /tmp, inside `d`.
fn sticky_dir(d: &TempDir) -> PathBuf {
    let t = d.join("tmp");
    std::fs::create_dir(&t).unwrap();
    std::fs::set_permissions(&t, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // The other user must reach it.
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    t
}

/// Another user plants a symbolic link `dir/name` → `to` (as in a shared /tmp).
fn plant_link(dir: &Path, name: &str, to: &Path) -> PathBuf {
    let link = dir.join(name);
    let st = as_other_user("ln")
        .arg("-s")
        .arg(to)
        .arg(&link)
        .status()
        .expect("setpriv ln");
    assert!(st.success());
    assert_eq!(
        std::fs::symlink_metadata(&link).unwrap().uid(),
        OTHER_UID,
        "planted by the other user"
    );
    link
}

/// Another user pre-creates `dir/name`, mode 0666, holding `text`.
fn plant_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    give_to_other_user(&p);
    p
}

/// F6: the command cannot start; the recording never started, so the trace that was there
/// is kept byte for byte, and no temporary file is left.
#[test]
fn record_keeps_an_existing_trace_when_the_command_cannot_start() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("record_keeps_an_existing_trace_when_the_command_cannot_start") {
        return;
    }
    let d = TempDir::new("out-nocmd");
    let old = d.join("old.iod");
    synth(&old, 2000);
    let before = std::fs::read(&old).unwrap();
    let out = run(bin()
        .args(["record", "-o"])
        .arg(&old)
        .args(["--", "/nonexistent/cmd"]));
    one_line_error(&out, "cannot run /nonexistent/cmd");
    assert!(
        std::fs::read(&old).unwrap() == before,
        "old.iod was changed"
    );
    assert_eq!(names_in(&d.0), ["old.iod"]);
}

/// Ctrl-C (or SIGTERM) while the program loads, before recording began: the user meant to
/// abort; the trace that was there is kept byte for byte (it was replaced by a moment of
/// recording, exit 0), the command is not started, and no temporary file is left.
#[test]
fn an_interrupt_while_loading_keeps_an_existing_trace() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("an_interrupt_while_loading_keeps_an_existing_trace") {
        return;
    }
    let d = TempDir::new("out-interrupted");
    let old = d.join("old.iod");
    synth(&old, 2000);
    let before = std::fs::read(&old).unwrap();
    let marker = d.join("ran");
    let child = bin()
        .args(["record", "-o"])
        .arg(&old)
        .args(["--", "touch"])
        .arg(&marker)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The private temporary file beside the output is made before loading, after the
    // signal handlers: interrupt as soon as it is there.
    let t0 = std::time::Instant::now();
    while names_in(&d.0).len() < 2 {
        assert!(t0.elapsed().as_secs() < 30, "no temporary file appeared");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    one_line_error(&out, "interrupted before recording began");
    assert!(
        std::fs::read(&old).unwrap() == before,
        "old.iod was changed"
    );
    assert!(!marker.exists(), "the command was started");
    assert_eq!(names_in(&d.0), ["old.iod"]);
}

/// F6: without the privilege to record, the user's existing trace is kept byte for byte.
#[test]
fn unprivileged_record_keeps_an_existing_trace() {
    if !root_available("unprivileged_record_keeps_an_existing_trace") {
        return;
    }
    let d = TempDir::new("out-unpriv");
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = d.join("home");
    std::fs::create_dir(&home).unwrap();
    give_to_other_user(&home);
    let old = home.join("old.iod");
    ok(&run(as_other_user(env!("CARGO_BIN_EXE_iodump"))
        .args(["synth", "--workload", "oltp", "--events", "2000", "-o"])
        .arg(&old)));
    let before = std::fs::read(&old).unwrap();
    let out = run(as_other_user(env!("CARGO_BIN_EXE_iodump"))
        .args(["record", "-t", "1", "-o"])
        .arg(&old));
    one_line_error(&out, "iodump: error: ");
    assert!(
        std::fs::read(&old).unwrap() == before,
        "old.iod was changed"
    );
    assert_eq!(names_in(&home), ["old.iod"]);
}

/// F7: whatever mode the file it replaces had, the new trace is 0600 and the recorder's.
#[test]
fn record_output_is_private_whatever_was_there() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("record_output_is_private_whatever_was_there") {
        return;
    }
    let d = TempDir::new("out-mode");
    let p = d.join("t.iod");
    std::fs::write(&p, "an old export").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    ok(&run(bin()
        .args(["record", "-o"])
        .arg(&p)
        .args(["--", "true"])));
    assert_eq!(mode(&p), 0o600);
    // SAFETY: geteuid has no preconditions.
    assert_eq!(std::fs::metadata(&p).unwrap().uid(), unsafe {
        libc::geteuid()
    });
    let r = Reader::open(&p).unwrap();
    assert_eq!(r.end().unwrap().command_exit_status, Some(0));
    assert_eq!(names_in(&d.0), ["t.iod"]);
}

/// F8: a link planted in a shared sticky directory is refused, never followed: the file it
/// points to is untouched, and a dangling link does not create its target.
#[test]
fn record_never_follows_a_planted_link() {
    if !root_available("record_never_follows_a_planted_link") {
        return;
    }
    let d = TempDir::new("out-link");
    let tmp = sticky_dir(&d);
    let victim = d.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = plant_link(&tmp, "t.iod", &victim);
    let dangling = plant_link(&tmp, "u.iod", &d.join("created-by-root"));
    for l in [&link, &dangling] {
        let out = run(bin().args(["record", "-o"]).arg(l).args(["--", "true"]));
        one_line_error(&out, "is a symbolic link");
        assert!(is_link(l));
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!d.join("created-by-root").exists());
    assert_eq!(names_in(&tmp), ["t.iod", "u.iod"]);
}

/// F9: a file another user pre-created (mode 0666) is never written into: refused, left
/// as it was and still theirs.
#[test]
fn record_never_writes_into_another_users_file() {
    if !root_available("record_never_writes_into_another_users_file") {
        return;
    }
    let d = TempDir::new("out-owner");
    let tmp = sticky_dir(&d);
    let p = plant_file(&tmp, "t.iod", "theirs");
    let out = run(bin().args(["record", "-o"]).arg(&p).args(["--", "true"]));
    one_line_error(&out, "belongs to another user");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "theirs");
    let m = std::fs::metadata(&p).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (OTHER_UID, 0o666));
    assert_eq!(names_in(&tmp), ["t.iod"]);
}

/// Crash safety: the new trace takes the old one's place as soon as recording has started,
/// so a recorder killed with SIGKILL leaves a readable trace at the path (and no temporary
/// file).
#[test]
fn a_killed_recorder_leaves_a_readable_trace() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("a_killed_recorder_leaves_a_readable_trace") {
        return;
    }
    let d = TempDir::new("out-kill");
    let p = d.join("t.iod");
    synth(&p, 2000);
    let old_ino = std::fs::metadata(&p).unwrap().ino();
    let (mut child, _err, _) = spawn_recording(bin().args(["record", "-o"]).arg(&p));
    // Recording has started: the path is the new trace already, with its header.
    let m = std::fs::metadata(&p).unwrap();
    assert_ne!(m.ino(), old_ino, "replaced once recording started");
    assert_eq!(m.mode() & 0o777, 0o600);
    let dd = Command::new("dd")
        .arg(format!("of={}", d.join("data").display()))
        .args(["if=/dev/zero", "bs=4k", "count=64", "oflag=direct"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(dd.success());
    std::thread::sleep(std::time::Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    let r = Reader::open(&p).unwrap();
    assert!(r.header().recorder_argv.iter().any(|a| a == "record"));
    assert!(r.end().is_none(), "killed: no end chunk");
    assert_eq!(names_in(&d.0), ["data", "t.iod"]);
}

/// `replay -o` follows the same rule (its recorder writes the file), and never records over
/// the trace being replayed or a target.
#[test]
fn replay_output_follows_the_same_rule() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("replay_output_follows_the_same_rule") {
        return;
    }
    let d = TempDir::new("out-replay");
    let tmp = sticky_dir(&d);
    let t = d.join("w.iod");
    synth(&t, 500);
    let trace_bytes = std::fs::read(&t).unwrap();
    let target = d.join("target.img");
    std::fs::File::create(&target)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let replay = |o: &Path| {
        run(bin()
            .arg("replay")
            .arg(&t)
            .arg("--target")
            .arg(&target)
            .args(["--no-stall", "-o"])
            .arg(o))
    };
    let victim = d.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = plant_link(&tmp, "r.iod", &victim);
    one_line_error(&replay(&link), "is a symbolic link");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let theirs = plant_file(&tmp, "s.iod", "theirs");
    one_line_error(&replay(&theirs), "belongs to another user");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
    one_line_error(&replay(&t), "is the trace being replayed");
    assert!(
        std::fs::read(&t).unwrap() == trace_bytes,
        "the trace was changed"
    );
    one_line_error(&replay(&target), "is a replay target");
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 64 << 20);
    // A replay that fails before recording keeps an existing file.
    let old = d.join("old.iod");
    std::fs::write(&old, "old").unwrap();
    let out = run(bin()
        .arg("replay")
        .arg(&t)
        .arg("--target")
        .arg(d.join("no-such-target"))
        .arg("-o")
        .arg(&old));
    one_line_error(&out, "no-such-target");
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "old");
    // F7 for replay: an existing 0644 file is replaced by a private trace.
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    ok(&replay(&old));
    assert_eq!(mode(&old), 0o600);
    Reader::open(&old).unwrap();
    assert_eq!(names_in(&tmp), ["r.iod", "s.iod"]);
}

/// A one-segment trace whose only segment is damaged: nothing in it can be read.
fn unreadable_trace(d: &TempDir) -> PathBuf {
    let p = d.join("broken.iod");
    synth(&p, 300);
    let r = Reader::open(&p).unwrap();
    assert_eq!(r.segments().len(), 1);
    let s = &r.segments()[0];
    let mid = (s.offset + s.chunk_bytes / 2) as usize;
    drop(r);
    let mut b = std::fs::read(&p).unwrap();
    b[mid] ^= 0x10;
    std::fs::write(&p, b).unwrap();
    p
}

/// The offline outputs (synth, export, convert, report, plot): a link is refused, never
/// followed; a command that fails leaves an existing output as it was; new files are 0600.
#[test]
fn offline_outputs_never_follow_links_nor_replace_before_success() {
    let d = TempDir::new("out-offline");
    let t = d.join("t.iod");
    synth(&t, 2000);
    let victim = d.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let link = d.join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let linked_dir = d.join("linked-dir");
    std::fs::create_dir(d.join("victim-dir")).unwrap();
    std::os::unix::fs::symlink(d.join("victim-dir"), &linked_dir).unwrap();
    for (args, out) in [
        (
            &["synth", "--workload", "oltp", "--events", "100", "-o"][..],
            &link,
        ),
        (
            &["export", t.to_str().unwrap(), "--format", "csv", "-o"],
            &link,
        ),
        (&["report", t.to_str().unwrap(), "-o"], &link),
        (&["convert", t.to_str().unwrap(), "-o"], &linked_dir),
    ] {
        let o = run(bin().args(args).arg(out));
        one_line_error(&o, "is a symbolic link");
    }
    for ext in ["svg", "png"] {
        let l = d.join(&format!("link.{ext}"));
        std::os::unix::fs::symlink(&victim, &l).unwrap();
        let o = run(bin()
            .args(["plot", t.to_str().unwrap(), "--kind", "iops", "-o"])
            .arg(&l));
        one_line_error(&o, "is a symbolic link");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(names_in(&d.join("victim-dir")).is_empty());

    // Nothing could be read: the existing export and Parquet table are kept.
    let broken = unreadable_trace(&d);
    let csv = d.join("old.csv");
    std::fs::write(&csv, "old export").unwrap();
    let o = run(bin()
        .arg("export")
        .arg(&broken)
        .args(["--format", "csv", "-o"])
        .arg(&csv));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "old export");
    let pq = d.join("pq");
    ok(&run(bin().arg("convert").arg(&t).arg("-o").arg(&pq)));
    let io_before = std::fs::read(pq.join("io.parquet")).unwrap();
    let o = run(bin().arg("convert").arg(&broken).arg("-o").arg(&pq));
    assert_eq!(o.status.code(), Some(1));
    assert!(std::fs::read(pq.join("io.parquet")).unwrap() == io_before);
    for (p, what) in [
        (&d.0, "the trace directory"),
        (&pq, "the Parquet directory"),
    ] {
        assert!(
            names_in(p).iter().all(|n| !n.starts_with(".iodump-")),
            "a temporary file was left in {what}: {:?}",
            names_in(p)
        );
    }

    // Success: every output is private.
    let out_csv = d.join("new.csv");
    let html = d.join("r.html");
    let svg = d.join("p.svg");
    let png = d.join("p.png");
    let s = d.join("s.iod");
    ok(&run(bin()
        .arg("export")
        .arg(&t)
        .args(["--format", "csv", "-o"])
        .arg(&out_csv)));
    ok(&run(bin().arg("report").arg(&t).arg("-o").arg(&html)));
    for p in [&svg, &png] {
        ok(&run(bin()
            .arg("plot")
            .arg(&t)
            .args(["--kind", "iops", "-o"])
            .arg(p)));
    }
    ok(&run(bin()
        .args(["synth", "--workload", "oltp", "--events", "100", "-o"])
        .arg(&s)));
    for p in [&out_csv, &html, &svg, &png, &s, &pq.join("io.parquet")] {
        assert_eq!(mode(p), 0o600, "{}", p.display());
    }
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
}

/// No command writes over what it reads: `export`, `report` and `plot` refuse an output that
/// is their input trace (by any name), or a part of the recording they read; `replay` refuses
/// a target that is the trace it replays, even with `--allow-writes`. The input is untouched.
#[test]
fn an_input_is_never_overwritten() {
    let d = TempDir::new("out-input");
    let t = d.join("t.iod");
    synth(&t, 500);
    let trace_bytes = std::fs::read(&t).unwrap();
    let same = d.0.join(".").join("t.iod");
    let refused = |out: &std::process::Output, path: &Path| {
        one_line_error(
            out,
            &format!("refusing to write {}: it is an input", path.display()),
        );
        assert!(
            std::fs::read(&t).unwrap() == trace_bytes,
            "the trace was changed"
        );
    };
    for o in [&t, &same] {
        refused(
            &run(bin()
                .arg("export")
                .arg(&t)
                .args(["--format", "csv", "-o"])
                .arg(o)),
            o,
        );
        refused(&run(bin().arg("report").arg(&t).arg("-o").arg(o)), o);
        // The comparison's page too, whichever side the output is.
        refused(
            &run(bin().arg("report").arg(&t).arg(&t).arg("-o").arg(o)),
            o,
        );
    }
    // A trace named .svg is still a trace.
    let svg = d.join("t.svg");
    std::fs::copy(&t, &svg).unwrap();
    one_line_error(
        &run(bin()
            .arg("plot")
            .arg(&svg)
            .args(["--kind", "iops", "-o"])
            .arg(&svg)),
        "it is an input of this command",
    );
    assert!(std::fs::read(&svg).unwrap() == trace_bytes);
    // A part of a recording named by its directory.
    let rec = d.join("rec");
    ok(&run(bin()
        .args([
            "synth",
            "--workload",
            "oltp",
            "--seed",
            "3",
            "--events",
            "3000",
        ])
        .args(["--rotate", "100ms", "-o"])
        .arg(format!("{}/", rec.display()))));
    let parts = names_in(&rec);
    assert!(parts.len() > 1, "{parts:?}");
    let part = rec.join(&parts[0]);
    let part_bytes = std::fs::read(&part).unwrap();
    one_line_error(
        &run(bin().arg("report").arg(&rec).arg("-o").arg(&part)),
        &format!("(in {})", rec.display()),
    );
    assert!(
        std::fs::read(&part).unwrap() == part_bytes,
        "the part was changed"
    );
    // Beside the parts is fine.
    ok(&run(bin()
        .arg("report")
        .arg(&rec)
        .arg("-o")
        .arg(rec.join("r.html"))));
    // replay onto the trace itself.
    for extra in [&[][..], &["--allow-writes", "--force"][..]] {
        one_line_error(
            &run(bin()
                .arg("replay")
                .arg(&t)
                .arg("--target")
                .arg(&same)
                .arg("--no-stall")
                .args(extra)),
            "is the trace being replayed",
        );
        assert!(
            std::fs::read(&t).unwrap() == trace_bytes,
            "the trace was changed"
        );
    }
}
