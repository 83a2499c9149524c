//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

pub mod devices;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// CLOCK_MONOTONIC now, in ns: the clock of a trace's timestamps.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass, which lives on our stack.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The `iodump` binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iodump"))
}

/// A writer of a new trace at `out` with `r`'s header and tables (devices, processes,
/// paths) and segments of `segment_events`: for tests that write `r`'s events again, in
/// another order or with records added.
pub fn writer_like(
    r: &iodump_format::Reader,
    out: &Path,
    segment_events: usize,
) -> iodump_format::Writer<std::fs::File> {
    let opts = iodump_format::WriterOptions {
        segment_events,
        ..Default::default()
    };
    let mut w =
        iodump_format::Writer::new(std::fs::File::create(out).unwrap(), r.header(), opts).unwrap();
    for dev in r.tables().devices() {
        w.add_device(dev.clone()).unwrap();
    }
    for pr in r.tables().processes() {
        w.add_process(pr.clone()).unwrap();
    }
    for pe in r.tables().paths() {
        w.add_path(pe.clone()).unwrap();
    }
    w
}

/// A trace of `fixtures/` (fixtures/README.md says how each was made).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// A temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("iodump-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The events of the device named `dev_name` (panics when the trace has no such device).
pub fn events_on(r: &iodump_format::Reader, dev_name: &str) -> Vec<iodump_format::Event> {
    let dev = r
        .tables()
        .devices()
        .find(|d| d.name == dev_name)
        .unwrap_or_else(|| panic!("{dev_name} not in the device table"))
        .dev;
    r.events().filter(|e| e.dev == dev).collect()
}

/// Checks that every request a device completed is in the trace or counted as lost, never
/// silently missing: `events + lost == device`, with at most 0.5% (and at least 1) lost.
///
/// Losses are allowed because the kernel does not always run a tracepoint's BPF program:
/// on this development host (a PVM guest) completions handled in a softirq on top of one
/// particular task's threads never reach the program (an ftrace count of the same
/// tracepoint sees them all; a one-line bpftrace counter misses them too), about 0.01-0.1%
/// of completions on a busy virtio disk. The recorder sees the request start again with
/// its entry still in flight and counts the earlier one as lost (lost_stale). A lost event
/// is reported on stderr so that a run with losses is visible in the test output.
pub fn assert_accounted(events: u64, lost: u64, device: u64, what: &str) {
    assert_eq!(
        events + lost,
        device,
        "{what}: {events} events + {lost} lost vs {device} requests the device completed"
    );
    assert!(
        lost <= (device / 200).max(1),
        "{what}: {lost} lost of {device} requests"
    );
    if lost > 0 {
        eprintln!("note: {what}: {lost} of {device} requests lost (counted)");
    }
}

/// The I/Os the recorder's summary line says were still in flight when it stopped (not
/// recorded, not lost; the device counts them once they complete), 0 when it says none.
pub fn in_flight_at_end(stderr: &str) -> u64 {
    stderr
        .split(';')
        .find(|p| p.contains("still in flight at the end"))
        .and_then(|p| p.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Fails the test unless the command succeeded, showing its stderr.
pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a command, failing the test if it panicked.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run iodump");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "panic: {stderr}");
    out
}

/// The file the skipped tests are listed in, one `SKIP …` line each, appended by every test
/// binary: `iodump-skips.txt` in the target directory (`$CARGO_TARGET_DIR`, else `target`),
/// found from the test binary's own path (`TARGET/debug/deps/NAME-HASH`). `.ci/run` empties
/// it before the tests and counts it after.
pub fn skips_file() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.ancestors().nth(3)?.join("iodump-skips.txt"))
}

/// Says that a test (or a part of it) does not run for want of `needs`: one line on stderr,
/// `SKIP tests/FILE.rs::TEST: needs …`, appended to [`skips_file`] too. `test` names it; when
/// empty, the harness's name of the current thread (the test's name) does.
pub fn skip(test: &str, needs: &str) {
    let file = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| match stem.rsplit_once('-') {
            Some((name, hash)) if hash.bytes().all(|b| b.is_ascii_hexdigit()) => name.to_string(),
            _ => stem,
        })
        .unwrap_or_default();
    let thread = std::thread::current();
    let name = match (test, thread.name()) {
        ("", Some(n)) => n,
        (t, _) => t,
    };
    let line = format!("SKIP tests/{file}.rs::{name}: needs {needs}");
    eprintln!("{line}");
    if let Some(p) = skips_file() {
        use std::io::Write as _;
        // One short write in append mode: lines of tests running at once do not mix.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
        {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// True when BPF tests can run (root, BTF, zram); panics when they cannot but must
/// (`IODUMP_REQUIRE_BPF=1`), else says the test is skipped.
pub fn bpf_available(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    let zram = Path::new("/sys/class/zram-control/hot_add").exists();
    if root && btf && zram {
        return true;
    }
    let why = format!("root, BTF and zram (root={root}, btf={btf}, zram={zram})");
    if std::env::var("IODUMP_REQUIRE_BPF").as_deref() == Ok("1") {
        panic!("IODUMP_REQUIRE_BPF=1 but {test}: needs {why}");
    }
    skip(test, &why);
    false
}

/// True when the test runs as root (it makes files of another user, devices or mounts);
/// panics when it does not but must (`IODUMP_REQUIRE_BPF=1`: CI runs as root), else says the
/// test is skipped.
pub fn root_available(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    if std::env::var("IODUMP_REQUIRE_BPF").as_deref() == Ok("1") {
        panic!("IODUMP_REQUIRE_BPF=1 but {test} needs root");
    }
    skip(test, "root");
    false
}

/// The uid and gid tests use for "another user" (nobody).
pub const OTHER_UID: u32 = 65534;

/// A command run as [`OTHER_UID`] without capabilities (root only).
pub fn as_other_user(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={OTHER_UID}"),
        &format!("--regid={OTHER_UID}"),
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .arg(program);
    c
}

/// Changes the owner of `p` (not following a link) to [`OTHER_UID`].
pub fn give_to_other_user(p: &Path) {
    std::os::unix::fs::lchown(p, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
}

/// The one line a command wrote on stderr, which starts with `iodump: error: ` (failing the
/// test otherwise; empty lines are not counted).
pub fn error_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one error line, got: {stderr}");
    assert!(lines[0].starts_with("iodump: error: "), "{stderr}");
    lines[0].to_string()
}

/// A failure with exactly one line on stderr, `iodump: error: …` containing `what`, and exit
/// status 1.
pub fn one_line_error(out: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "expected exit 1: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("iodump: error: "), "{err}");
    assert!(err.contains(what), "expected {what:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A usage error found after clap's parsing (a bad flag value or combination, a filter that
/// does not parse): one line on stderr, `iodump: error: …` containing `what`, and exit status
/// 2, as for what clap refuses itself.
pub fn usage_error(out: &Output, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "expected exit 2 (usage): {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("iodump: error: "), "{err}");
    assert!(err.contains(what), "expected {what:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The names in a directory, sorted (to show that no temporary file was left behind).
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Spawns `cmd` (an `iodump` command that records) with piped stdout and stderr and reads its
/// stderr until the line that says it is recording: the child, the rest of its stderr, and
/// every line up to and including that one (warnings come before it).
// The child is handed to the caller, who waits for it (or it is killed and waited for here).
#[allow(clippy::zombie_processes)]
pub fn spawn_recording(
    cmd: &mut Command,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
    String,
) {
    use std::io::BufRead;
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn iodump");
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut before = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let status = child.wait();
            panic!("ended before recording ({status:?}): {before}");
        }
        let recording = line.starts_with("iodump: recording");
        before.push_str(&line);
        if recording {
            return (child, err, before);
        }
    }
}

/// A recorder (`iodump ARGS`) running in the background, returned by [`Recorder::start`] once
/// it says it is recording; its stdout and stderr are collected by threads.
pub struct Recorder {
    pub child: std::process::Child,
    before: String,
    stderr: std::thread::JoinHandle<String>,
    stdout: std::thread::JoinHandle<String>,
}

impl Recorder {
    /// Starts `iodump ARGS` (the whole command line, `record …` or the original's).
    pub fn start(args: &[&str]) -> Recorder {
        use std::io::Read;
        let (mut child, mut err, before) = spawn_recording(bin().args(args));
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        let mut out = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        Recorder {
            child,
            before,
            stderr,
            stdout,
        }
    }

    /// Sends `signal` to the recorder.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child, which has not been waited for yet.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Sends SIGINT and waits: the exit status, stdout, and all of stderr (failing the test if
    /// the recorder panicked).
    pub fn stop(mut self) -> (std::process::ExitStatus, String, String) {
        self.signal(libc::SIGINT);
        let st = self.child.wait().unwrap();
        let err = self.before + &self.stderr.join().unwrap();
        assert!(!err.contains("panicked"), "{err}");
        (st, self.stdout.join().unwrap(), err)
    }
}

/// `iodump analyze INPUTS ARGS --format json`: its rows (failing the test unless it succeeded).
pub fn analyze_rows<P: AsRef<std::ffi::OsStr>>(
    inputs: &[P],
    args: &[&str],
) -> Vec<serde_json::Value> {
    let out = run(bin()
        .arg("analyze")
        .args(inputs)
        .args(args)
        .args(["--format", "json"]));
    assert!(
        out.status.success(),
        "analyze {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout) {
        Ok(serde_json::Value::Array(rows)) => rows,
        other => panic!("analyze {args:?}: not a JSON array: {other:?}"),
    }
}

/// Same rows in the same order; numbers equal to the printed precision (0.001).
pub fn same_rows(a: &serde_json::Value, b: &serde_json::Value, what: &str) {
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

/// The JSON object embedded in an HTML report page (its `iodump-data` script).
pub fn embedded_report_data(html: &str) -> serde_json::Value {
    let open = r#"<script id="iodump-data" type="application/json">"#;
    let start = html.find(open).expect("data script") + open.len();
    let len = html[start..].find("</script>").expect("end of data script");
    serde_json::from_str(&html[start..start + len]).expect("embedded JSON parses")
}

/// The chromium binary, or None (then the test is skipped, unless it must run:
/// `IODUMP_REQUIRE_CHROMIUM=1`, as CI sets).
pub fn chromium() -> Option<String> {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(c.to_string());
        }
    }
    if std::env::var("IODUMP_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
        panic!("IODUMP_REQUIRE_CHROMIUM=1 but no chromium found");
    }
    skip("", "chromium");
    None
}

/// Runs headless `browser` on `page` with `args` (`--dump-dom`, `--screenshot=…`), within 120 s.
pub fn headless(browser: &str, args: &[&str], page: &Path) -> std::process::Output {
    Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--virtual-time-budget=10000",
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium")
}

/// `GET path` over HTTP/1.1 (`iodump top --serve`): status code and body.
pub fn http_get(addr: std::net::SocketAddr, path: &str, accept: Option<&str>) -> (u16, String) {
    try_http_get(addr, path, accept).unwrap_or_else(|e| panic!("GET http://{addr}{path}: {e}"))
}

/// [`http_get`], an error when the server cannot be reached.
pub fn try_http_get(
    addr: std::net::SocketAddr,
    path: &str,
    accept: Option<&str>,
) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(a) = accept {
        req.push_str(&format!("Accept: {a}\r\n"));
    }
    req.push_str("\r\n");
    c.write_all(req.as_bytes())?;
    let mut reply = String::new();
    c.read_to_string(&mut reply)?;
    let (head, body) = reply.split_once("\r\n\r\n").expect("HTTP reply");
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    Ok((status, body.to_string()))
}

/// True when python3 can import pandas and pyarrow; panics when it cannot but must
/// (`IODUMP_REQUIRE_PANDAS=1`: CI installs both).
pub fn have_pandas() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import pandas, pyarrow"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok && std::env::var("IODUMP_REQUIRE_PANDAS").as_deref() == Ok("1") {
        panic!("IODUMP_REQUIRE_PANDAS=1 but python3 cannot import pandas and pyarrow");
    }
    ok
}

/// True when python3 can import Perfetto's protos; panics when it cannot but must
/// (`IODUMP_REQUIRE_PERFETTO=1`), else prints a `SKIP:` line.
pub fn have_perfetto(test: &str) -> bool {
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
        skip(test, "python3's perfetto package");
    }
    ok
}

/// Exports `trace` as Perfetto and JSON lines and checks one against the other.
pub fn perfetto_check(trace: &Path, d: &TempDir, what: &str) {
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
