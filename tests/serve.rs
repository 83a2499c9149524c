//! `iodump top --serve`: the /metrics endpoint parsed by strict parsers (prometheus_client's
//! Prometheus and OpenMetrics parsers, `promtool check metrics`) with label values that need
//! escaping, its cardinality under 10,000 files churning, a port in use, and a real Prometheus
//! server (Debian's `prometheus`, on loopback, scraping every second) whose PromQL answers agree
//! with `iodump analyze` on the trace recorded at the same time.
//!
//! Recording needs root and BPF (skipped without, unless `IODUMP_REQUIRE_BPF=1`); the parsers
//! and the server skip without their packages unless `IODUMP_REQUIRE_PROMETHEUS=1` (CI).

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod common;

use common::devices::{Ext4OnZram as Fs, Frozen, Loop, Zram};
use common::{
    bin, bpf_available, http_get as get, one_line_error, run, try_http_get as try_get, usage_error,
    TempDir,
};

/// One recording test at a time (they make devices and watch them).
static SERIAL: Mutex<()> = Mutex::new(());

/// True when `what` is there; panics when it is not but must (`IODUMP_REQUIRE_PROMETHEUS=1`),
/// else prints a `SKIP:` line.
fn have(test: &str, what: &str, ok: bool) -> bool {
    if !ok {
        if std::env::var("IODUMP_REQUIRE_PROMETHEUS").as_deref() == Ok("1") {
            panic!("IODUMP_REQUIRE_PROMETHEUS=1 but {what} is missing");
        }
        common::skip(test, what);
    }
    ok
}

fn have_prometheus_client(test: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import prometheus_client.openmetrics.parser"])
        .status()
        .is_ok_and(|s| s.success());
    have(test, "python3's prometheus_client", ok)
}

fn have_program(test: &str, program: &str) -> bool {
    let ok = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    have(test, program, ok)
}

fn sh(script: &str) {
    let st = Command::new("sh").arg("-c").arg(script).status().unwrap();
    assert!(st.success(), "failed: {script}");
}

/// Stops a child on drop (also when the test fails): SIGINT (SIGTERM), then SIGKILL after 10 s.
struct Stop {
    child: Child,
    signal: i32,
}

impl Stop {
    fn signal_and_wait(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child, not waited for yet.
        unsafe { libc::kill(self.child.id() as i32, self.signal) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.signal_and_wait();
        }
    }
}

/// `iodump top --serve 127.0.0.1:0 ARGS` with no screen (stdin and stdout not terminals),
/// once it records: the process and the address it serves on.
fn serve(args: &[&str]) -> (Stop, SocketAddr) {
    serving("top", args)
}

/// `iodump COMMAND --serve 127.0.0.1:0 ARGS`, once it records: the process and the address
/// it serves on.
fn serving(command: &str, args: &[&str]) -> (Stop, SocketAddr) {
    let mut child = bin()
        .args([command, "--serve", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let stop = Stop {
        child,
        signal: libc::SIGINT,
    };
    let mut addr = None;
    let mut before = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("iodump {command} ended before recording: {before}");
        }
        before.push_str(&line);
        if let Some(a) = line.strip_prefix("iodump: serving metrics on http://") {
            addr = Some(a.trim().trim_end_matches("/metrics").parse().unwrap());
        }
        if line.starts_with("iodump: recording") {
            break;
        }
    }
    // The rest of stderr is drained so that the recorder never blocks on it.
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        assert!(!s.contains("panicked"), "{s}");
    });
    (stop, addr.expect("the serving line"))
}

/// The writes `/metrics` counts on `dev`, scraped every 100 ms until there are `want` (or
/// 10 s have passed).
fn scrape_writes(addr: SocketAddr, dev: &str, want: f64) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    let sample = format!("iodump_device_io_total{{device=\"{dev}\",op=\"write\"}} ");
    loop {
        let (st, text) = get(addr, "/metrics", None);
        assert_eq!(st, 200);
        let v = value(&text, &sample).unwrap_or(0.0);
        if v >= want || Instant::now() > deadline {
            return v;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A sample's value in Prometheus text (`name{labels} value`), the first line starting so.
fn value(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn port_in_use_is_one_line() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    for args in [vec!["-b", "-n", "1"], vec![]] {
        let out = run(bin()
            .args(["top", "--serve", &format!("127.0.0.1:{port}")])
            .args(&args)
            .stdin(Stdio::null()));
        one_line_error(&out, &format!("--serve 127.0.0.1:{port}: cannot listen"));
    }
    // A value that is no address is a usage error (exit 2), as clap's own.
    for bad in ["no-such-host-x:y", "localhost:99999"] {
        let out = run(bin().args(["top", "--serve", bad, "-b"]));
        usage_error(&out, "--serve");
    }
    drop(taken);
}

/// A file name with every byte the exposition must escape or that is not UTF-8.
const ODD_NAME: &[u8] = b"odd \"quoted\" back\\slash\nline \xff end";
/// Its path's label value after parsing: the lossless text (a backslash doubled, `\xff`).
const ODD_LABEL_TAIL: &str = "odd \"quoted\" back\\\\slash\nline \\xff end";

#[test]
fn exposition_parses_strictly_with_escaped_labels() {
    let test = "exposition_parses_strictly_with_escaped_labels";
    if !bpf_available(test) || !have_prometheus_client(test) || !have_program(test, "promtool") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fs = Fs::new("strict");
    let (mut top, addr) = serve(&["-d", &fs.zram.name()]);
    use std::os::unix::ffi::OsStrExt;
    let odd = fs.mnt.join(std::ffi::OsStr::from_bytes(ODD_NAME));
    let mut f = std::fs::File::create(&odd).unwrap();
    f.write_all(&vec![7u8; 256 << 10]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    let d = TempDir::new("serve-strict");
    let (prom, om) = (d.join("prom.txt"), d.join("om.txt"));
    // Until the recorder has seen the file's I/O (within about a second).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (st, text) = get(addr, "/metrics", None);
        assert_eq!(st, 200, "{text}");
        if text.contains("line \\\\xff end") || Instant::now() > deadline {
            std::fs::write(&prom, &text).unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let (st, text) = get(
        addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert_eq!(st, 200);
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with # EOF");
    std::fs::write(&om, &text).unwrap();
    assert_eq!(get(addr, "/nothing", None).0, 404);
    top.signal_and_wait();

    // Both strict parsers; the file's path label read back.
    let v = parse_strictly(&prom, &om);
    for fmt in ["prom", "om"] {
        let paths: Vec<&str> = v[fmt]["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert!(
            paths.iter().any(|p| p.ends_with(ODD_LABEL_TAIL)),
            "{fmt}: no path label ending in {ODD_LABEL_TAIL:?}: {paths:?}"
        );
        let cmdlines = v[fmt]["cmdlines"].as_array().unwrap();
        assert!(
            cmdlines
                .iter()
                .any(|c| c.as_str().unwrap().contains("serve")),
            "{fmt}: the test's own command line in iodump_process_info: {cmdlines:?}"
        );
        let kinds = &v[fmt]["kinds"];
        assert_eq!(
            kinds["iodump_device_io_latency_seconds"], "histogram",
            "{fmt}"
        );
        assert_eq!(
            kinds["iodump_process_io_latency_seconds"], "histogram",
            "{fmt}"
        );
        assert!(
            v[fmt]["samples"].as_u64().unwrap() > 50,
            "{fmt}: {}",
            v[fmt]
        );
    }
    for (k, want) in [
        ("iodump_device_io", "counter"),
        ("iodump_cgroup_io_bytes", "counter"),
        ("iodump_process_io", "counter"),
        ("iodump_file_io", "counter"),
        ("iodump_lost_events", "counter"),
        ("iodump_process", "info"),
    ] {
        assert_eq!(v["om"]["kinds"][k], want, "{k}");
    }
    lint(&prom);
}

/// The expositions in `prom` (Prometheus text) and `om` (OpenMetrics) through
/// prometheus_client's strict parsers: per format, the path and cmdline labels, each
/// family's type, the number of samples and every unlabelled sample's value (a parse error
/// fails the test).
fn parse_strictly(prom: &Path, om: &Path) -> serde_json::Value {
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, json\n\
             from prometheus_client.parser import text_string_to_metric_families as prom\n\
             from prometheus_client.openmetrics.parser import text_string_to_metric_families as om\n\
             out = {}\n\
             for name, parse, path in (('prom', prom, sys.argv[1]), ('om', om, sys.argv[2])):\n\
             \x20   fams = list(parse(open(path, encoding='utf-8').read()))\n\
             \x20   paths = sorted({s.labels['path'] for f in fams for s in f.samples if 'path' in s.labels})\n\
             \x20   kinds = {f.name: f.type for f in fams}\n\
             \x20   cmdlines = sorted({s.labels['cmdline'] for f in fams for s in f.samples if 'cmdline' in s.labels})\n\
             \x20   plain = {s.name: s.value for f in fams for s in f.samples if not s.labels}\n\
             \x20   out[name] = {'paths': paths, 'kinds': kinds, 'cmdlines': cmdlines, 'samples': sum(len(f.samples) for f in fams), 'plain': plain}\n\
             print(json.dumps(out))",
        )
        .arg(prom)
        .arg(om)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "a strict parser refused the exposition: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    serde_json::from_slice(&py.stdout).unwrap()
}

/// promtool's linter on the Prometheus text in `prom`: names, suffixes, help text.
fn lint(prom: &Path) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(prom).unwrap())
        .unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn batch_mode_and_metrics_count_the_same_io() {
    if !bpf_available("batch_mode_and_metrics_count_the_same_io") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let zram = Zram::new("64M");
    let dev = zram.name();
    let (mut top, addr) = serve(&["-b", "-n", "3", "--json", "-d", &dev]);
    let mut stdout = top.child.stdout.take().unwrap();
    // -b's first snapshot counts the I/O from the recording line on (tests/top.rs); the wait
    // is for the metrics endpoint.
    std::thread::sleep(Duration::from_millis(500));
    // Clients that connect and send nothing, or a byte at a time, hold no one else's scrape
    // (they were answered one at a time, each given 5 s per read: 20 of them held every
    // scrape for 100 s). A scrape sent after them is answered before the first of them has
    // timed out (5 s): it waited for none.
    let idle: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let mut drip = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(&mut drip, b"GET /met").unwrap();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(4))).unwrap();
    std::io::Write::write_all(
        &mut c,
        b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut reply = String::new();
    c.read_to_string(&mut reply)
        .expect("a scrape answered while idle clients hold connections");
    assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply:.200}");
    drop((idle, drip));
    sh(&format!(
        "dd if=/dev/zero of={} bs=4k count=1000 oflag=direct status=none",
        zram.node()
    ));
    let scraped = scrape_writes(addr, &dev, 1000.0);
    // -n 3: top stops by itself; its snapshots count the same writes.
    let mut out = String::new();
    stdout.read_to_string(&mut out).unwrap();
    assert!(top.signal_and_wait().success());
    let writes: f64 = out
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["total"]["writes"].as_f64().unwrap()
        })
        .sum();
    assert_eq!(out.lines().count(), 3, "{out}");
    assert_eq!(scraped, 1000.0, "the writes scraped");
    assert_eq!(writes, 1000.0, "the writes of -b's snapshots: {out}");
}

/// An I/O that hangs is seen while it hangs: completion-based figures cannot show it, the
/// gauges of the I/Os in flight do (`iodump_device_io_in_flight_oldest_seconds`,
/// `iodump_device_io_in_flight_slow`), and go back to 0 once it completes. The I/O: a write
/// to a loop device whose backing file is on a frozen file system, which waits until the file
/// system is thawed.
#[test]
fn an_io_that_hangs_shows_in_the_in_flight_gauges_until_it_completes() {
    let test = "an_io_that_hangs_shows_in_the_in_flight_gauges_until_it_completes";
    if !bpf_available(test) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fs = Fs::new("serve-hang");
    let lo = Loop::new(&fs.mnt, 16);
    let dev = lo.name().to_string();
    let (mut top, addr) = serve(&["-d", &dev]);
    let oldest = format!("iodump_device_io_in_flight_oldest_seconds{{device=\"{dev}\"}} ");
    let slow = format!("iodump_device_io_in_flight_slow{{device=\"{dev}\"}} ");
    // Until `until` holds for (oldest, slow) (or 20 s have passed): the exposition.
    let wait = |what: &str, until: &dyn Fn(f64, f64) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (st, text) = get(addr, "/metrics", None);
            assert_eq!(st, 200, "{text}");
            let (o, s) = (
                value(&text, &oldest).unwrap_or(-1.0),
                value(&text, &slow).unwrap_or(-1.0),
            );
            if until(o, s) {
                return (o, s, text);
            }
            assert!(
                Instant::now() < deadline,
                "{what}: oldest {o}, slow {s}\n{text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    // thawed however the test ends, before the loop device goes
    let frozen = Frozen::new(&fs.mnt);
    let mut dd = lo.write_one_block();
    let t0 = Instant::now();
    let (o, s, text) = wait("the hung write in the gauges", &|o, s| o >= 2.0 && s == 1.0);
    let waited = t0.elapsed().as_secs_f64();
    assert!(dd.try_wait().unwrap().is_none(), "the write did not hang");
    assert!(
        o <= waited + 1.0,
        "oldest {o} s, the write started {waited} s ago"
    );
    assert_eq!(s, 1.0, "{text}");
    drop(frozen);
    assert!(dd.wait().unwrap().success());
    wait("the gauges back to 0 once it completed", &|o, s| {
        o == 0.0 && s == 0.0
    });
    // and its write counted as completed, with the time it took
    let (_, text) = get(addr, "/metrics", None);
    let total = format!("iodump_device_io_total{{device=\"{dev}\",op=\"write\"}} ");
    assert_eq!(value(&text, &total), Some(1.0), "{text}");
    assert!(top.signal_and_wait().success());
}

/// `iodump record --serve`: the always-on recorder serves the metrics of what it writes into
/// its parts (no second recorder attached for Prometheus); both count the same writes.
#[test]
fn record_serves_the_metrics_of_what_it_writes() {
    if !bpf_available("record_serves_the_metrics_of_what_it_writes") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let zram = Zram::new("64M");
    let dev = zram.name();
    let d = TempDir::new("serve-record");
    let dir = d.join("parts/");
    let (mut rec, addr) = serving(
        "record",
        &["-d", &dev, "-o", dir.to_str().unwrap(), "--rotate", "1h"],
    );
    sh(&format!(
        "dd if=/dev/zero of={} bs=4k count=1000 oflag=direct status=none",
        zram.node()
    ));
    let scraped = scrape_writes(addr, &dev, 1000.0);
    assert!(rec.signal_and_wait().success());
    assert_eq!(scraped, 1000.0, "the writes scraped");
    let mut written = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let r = iodump_format::Reader::open(e.unwrap().path()).unwrap();
        written += common::events_on(&r, &dev)
            .iter()
            .filter(|e| e.op == iodump_format::Op::Write)
            .count();
    }
    assert_eq!(written, 1000, "the writes in the parts");
}

/// `iodump record --serve` as the always-on flight recorder: besides the I/O, the metrics say
/// what the recorder did — the I/Os that matched the trigger, the snapshots saved by the
/// trigger and by SIGUSR1 (each with its file in the directory), the one being written, what
/// the ring holds, the parts written and deleted by retention — and parse strictly in both
/// formats.
#[test]
fn the_flight_recorder_serves_its_own_state() {
    let test = "the_flight_recorder_serves_its_own_state";
    if !bpf_available(test) || !have_prometheus_client(test) || !have_program(test, "promtool") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let zram = Zram::new("64M");
    let dev = zram.name();
    let d = TempDir::new("serve-flight");
    let dir = d.join("rec/");
    let t0 = unix_now();
    let (mut rec, addr) = serving(
        "record",
        &[
            "-d",
            &dev,
            "-o",
            dir.to_str().unwrap(),
            "--rotate",
            "1s",
            "--keep",
            "2",
            "--ring",
            "30s",
            "--trigger",
            "lba == 8192 && rw == W",
            "--trigger-count",
            "2",
            "--trigger-window",
            "30s",
            "--after",
            "1s",
            "--cooldown",
            "1h",
        ],
    );
    let scrape = || {
        let (st, text) = get(addr, "/metrics", None);
        assert_eq!(st, 200, "{text}");
        text
    };
    // Until `until` holds for the exposition (or 20 s have passed): the exposition.
    let wait = |what: &str, until: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = scrape();
            if until(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "{what}: {text}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let v = |text: &str, sample: &str| value(text, &format!("{sample} ")).unwrap_or(-1.0);
    // Three writes at sector 8192 match the trigger; the second (two within 30 s) saves a
    // snapshot (the cooldown keeps the third from saving one); a write elsewhere matches
    // nothing.
    let node = zram.node();
    sh(&format!(
        "for i in 1 2 3; do dd if=/dev/zero of={node} bs=4k count=1 seek=1024 oflag=direct status=none; done; \
         dd if=/dev/zero of={node} bs=4k count=1 seek=2048 oflag=direct status=none"
    ));
    let text = wait("the trigger's three matches", &|t| {
        v(t, "iodump_trigger_matches_total") == 3.0
    });
    assert_eq!(
        v(&text, "iodump_snapshots_total{reason=\"trigger\"}"),
        1.0,
        "{text}"
    );
    // Counted up to the count: the last two of the three.
    assert_eq!(v(&text, "iodump_trigger_window_matches"), 2.0, "{text}");
    assert_eq!(v(&text, "iodump_trigger_threshold_matches"), 2.0, "{text}");
    // Its --after passes; then SIGUSR1 saves another.
    wait("the trigger's snapshot ended", &|t| {
        v(t, "iodump_snapshot_writing") == 0.0
    });
    let t_signal = unix_now();
    // SAFETY: kill(2) on our own child, still running (it serves).
    unsafe { libc::kill(rec.child.id() as i32, libc::SIGUSR1) };
    let text = wait("the signal's snapshot", &|t| {
        v(t, "iodump_snapshots_total{reason=\"signal\"}") == 1.0
    });
    let last = v(&text, "iodump_snapshot_last_timestamp_seconds");
    assert!(
        last >= t_signal - 0.5 && last <= unix_now() + 0.5,
        "the newest snapshot's time {last}, the signal at {t_signal}: {text}"
    );
    assert!(v(&text, "iodump_ring_bytes") > 0.0, "{text}");
    assert!(v(&text, "iodump_ring_seconds") >= 0.0, "{text}");
    assert_eq!(v(&text, "iodump_snapshot_failures_total"), 0.0, "{text}");
    // Parts of a second, two kept: by now some were deleted by retention.
    let text = wait("parts rotated and deleted", &|t| {
        v(t, "iodump_parts_total") >= 4.0 && v(t, "iodump_parts_deleted_total") >= 2.0
    });
    assert!(
        v(&text, "iodump_parts_deleted_total") <= v(&text, "iodump_parts_total") - 1.0,
        "{text}"
    );
    assert!(v(&text, "iodump_written_bytes_total") > 0.0, "{text}");
    assert_eq!(v(&text, "iodump_disk_full_total"), 0.0, "{text}");
    let (prom, om) = (d.join("prom.txt"), d.join("om.txt"));
    std::fs::write(&prom, &text).unwrap();
    let (st, text) = get(
        addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"),
    );
    assert_eq!(st, 200);
    std::fs::write(&om, &text).unwrap();
    assert!(rec.signal_and_wait().success());
    let parsed = parse_strictly(&prom, &om);
    for (k, want) in [
        ("iodump_trigger_matches", "counter"),
        ("iodump_snapshots", "counter"),
        ("iodump_snapshot_failures", "counter"),
        ("iodump_snapshots_deleted", "counter"),
        ("iodump_snapshot_last_timestamp_seconds", "gauge"),
        ("iodump_snapshot_writing", "gauge"),
        ("iodump_ring_bytes", "gauge"),
        ("iodump_ring_seconds", "gauge"),
        ("iodump_trigger_window_matches", "gauge"),
        ("iodump_trigger_threshold_matches", "gauge"),
        ("iodump_parts", "counter"),
        ("iodump_parts_deleted", "counter"),
        ("iodump_disk_full", "counter"),
        ("iodump_written_bytes", "counter"),
    ] {
        assert_eq!(parsed["om"]["kinds"][k], want, "{k}: {}", parsed["om"]);
    }
    lint(&prom);
    // The two snapshots, in the directory beside the parts.
    let snapshots: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("trigger-"))
        .collect();
    assert_eq!(snapshots.len(), 2, "{snapshots:?}");
    assert!(
        snapshots.iter().any(|n| n.contains("sigusr1")),
        "{snapshots:?}"
    );
    assert!(t0 <= last);
}

/// dist/iodump-alerts.yml: valid rules (`promtool check rules`) that fire on the series they
/// are written for and not on the others (`promtool test rules` of
/// dist/iodump-alerts.test.yml), and that name only metrics iodump serves.
#[test]
fn the_alert_rules_fire_as_written() {
    let test = "the_alert_rules_fire_as_written";
    if !have_program(test, "promtool") {
        return;
    }
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("dist");
    for args in [
        ["check", "rules", "iodump-alerts.yml"],
        ["test", "rules", "iodump-alerts.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(&dist)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Every iodump_* name in the rules is one the exposition has (its HELP line).
    let rules = std::fs::read_to_string(dist.join("iodump-alerts.yml")).unwrap();
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("record/src/metrics.rs"),
    )
    .unwrap();
    let names: std::collections::BTreeSet<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("iodump_"))
        .collect();
    assert!(names.len() >= 4, "{names:?}");
    for n in names {
        let family = n.strip_suffix("_total").unwrap_or(n);
        assert!(
            source.contains(&format!("\"{family}\"")),
            "{n} is not a metric iodump serves"
        );
    }
}

/// Writes `n` new files of 4 KiB in `dir` and syncs them (their I/O is writeback).
fn write_files(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        std::fs::write(dir.join(format!("f{i:05}")), [1u8; 4096]).unwrap();
    }
    sh("sync");
}

#[test]
fn cardinality_is_capped_with_10000_files_churning() {
    let test = "cardinality_is_capped_with_10000_files_churning";
    if !bpf_available(test) {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fs = Fs::new("churn");
    let (mut top, addr) = serve(&["-d", &fs.zram.name(), "--serve-files", "20"]);
    let mut tracked_max = 0.0f64;
    for round in 0..2 {
        let dir = fs.mnt.join(format!("round{round}"));
        write_files(&dir, 10_000);
        std::thread::sleep(Duration::from_millis(1500));
        let (st, text) = get(addr, "/metrics", None);
        assert_eq!(st, 200);
        let mut paths: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("iodump_file_io_total{"))
            .filter_map(|l| l.split("path=\"").nth(1)?.split("\",device=").next())
            .collect();
        paths.sort_unstable();
        paths.dedup();
        assert!(
            !paths.is_empty() && paths.len() <= 20,
            "round {round}: {} file series",
            paths.len()
        );
        let tracked = value(&text, "iodump_files_tracked ").unwrap();
        tracked_max = tracked_max.max(tracked);
        // Every series of the exposition: bounded whatever the files.
        let samples = text.lines().filter(|l| !l.starts_with('#')).count();
        assert!(samples < 3000, "round {round}: {samples} samples");
        std::fs::remove_dir_all(&dir).unwrap();
        sh("sync");
    }
    // The files were counted (and forgotten only after 5 minutes idle).
    assert!(tracked_max >= 10_000.0, "files tracked {tracked_max}");
    top.signal_and_wait();
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant PromQL query at `time` (Unix seconds): its results (`metric`, `value`).
fn promql_results(prom: SocketAddr, q: &str, time: f64) -> Vec<serde_json::Value> {
    let (st, body) = get(
        prom,
        &format!("/api/v1/query?query={}&time={time:.3}", encode(q)),
        None,
    );
    assert_eq!(st, 200, "{q}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// [`promql_results`]: the first result's value.
fn promql(prom: SocketAddr, q: &str, time: f64) -> Option<f64> {
    let r = promql_results(prom, q, time).first()?.clone();
    r["value"][1].as_str()?.parse().ok()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn prometheus_scrapes_while_fio_runs() {
    let test = "prometheus_scrapes_while_fio_runs";
    if !bpf_available(test) || !have_program(test, "prometheus") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let d = TempDir::new("serve-prometheus");
    // A request-based device (queue times too).
    let lo = Loop::new(&d.0, 256);
    let dev = lo.name().to_string();
    let trace = d.join("top.iod");
    let (mut top, addr) = serve(&["-d", &dev, "-o", trace.to_str().unwrap()]);
    // Prometheus on loopback, scraping iodump every second.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let prom_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    std::fs::write(
        d.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: iodump\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            d.join("prometheus.yml").display()
        ))
        .arg(format!("--storage.tsdb.path={}", d.join("data").display()))
        .arg(format!("--web.listen-address={prom_addr}"))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let _prom = Stop {
        child,
        signal: libc::SIGTERM,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready = || -> bool {
        try_get(prom_addr, "/-/ready", None).is_ok_and(|(st, _)| st == 200)
            && promql(prom_addr, "up{job=\"iodump\"}", unix_now()) == Some(1.0)
    };
    while !ready() {
        assert!(Instant::now() < deadline, "prometheus never scraped iodump");
        std::thread::sleep(Duration::from_millis(250));
    }
    // A steady load: 4k random reads at 2000 IOPS for 12 s.
    let start = unix_now();
    let fio = Command::new("fio")
        .args([
            "--name=steady",
            &format!("--filename={}", lo.node),
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=psync",
            "--size=128M",
            "--time_based",
            "--runtime=12",
            "--rate_iops=2000",
            "--output=/dev/null",
        ])
        .status()
        .unwrap();
    assert!(fio.success());
    // Two scrapes after the last I/O.
    std::thread::sleep(Duration::from_secs(3));
    let end = unix_now();
    top.signal_and_wait();

    let sel = format!("device=\"{dev}\",op=\"read\"");
    // Every I/O: the counter at the end is the trace's count.
    let total = promql(prom_addr, &format!("iodump_device_io_total{{{sel}}}"), end).unwrap();
    let lat = common::analyze_rows(&[&trace], &["-d", &dev, "--latency", "--filter", "rw == R"]);
    let ios = lat[0]["ios"].as_f64().unwrap();
    assert_eq!(total, ios, "reads counted by Prometheus vs the trace");
    assert!(ios > 15_000.0, "{ios} reads");

    // rate() over 8 s in the middle of the run vs the trace's reads per second then: within
    // 8% (scrapes are a second apart, each sees the I/O of up to ~100 ms before).
    let t = (start + 10.0).floor();
    let rate = promql(
        prom_addr,
        &format!("rate(iodump_device_io_total{{{sel}}}[8s])"),
        t,
    )
    .unwrap();
    let bins = common::analyze_rows(
        &[&trace],
        &[
            "-d",
            &dev,
            "--timeline",
            "--interval",
            "1s",
            "--filter",
            "rw == R",
        ],
    );
    let in_window: f64 = bins
        .iter()
        .filter(|b| {
            let secs = utc_secs(b["time"].as_str().unwrap());
            secs >= t - 8.0 && secs < t
        })
        .map(|b| b["ios"].as_f64().unwrap())
        .sum();
    let trace_rate = in_window / 8.0;
    assert!(
        (rate - trace_rate).abs() <= 0.08 * trace_rate,
        "rate() {rate} vs the trace's {trace_rate} reads/s"
    );

    // histogram_quantile() over the whole run vs analyze's p99: the same bucket, within a
    // factor of 2 (the buckets' documented error).
    let p99 = promql(
        prom_addr,
        &format!(
            "histogram_quantile(0.99, sum by (le) (rate(iodump_device_io_latency_seconds_bucket{{{sel}}}[1m])))"
        ),
        end,
    )
    .unwrap();
    let exact = lat[0]["p99_us"].as_f64().unwrap() / 1e6;
    let ratio = p99 / exact;
    assert!(
        (0.5..=2.0).contains(&ratio),
        "histogram_quantile(0.99) {p99} s vs analyze's p99 {exact} s"
    );
    let q99 = promql(
        prom_addr,
        &format!(
            "histogram_quantile(0.99, sum by (le) (rate(iodump_device_io_queue_seconds_bucket{{{sel}}}[1m])))"
        ),
        end,
    );
    assert!(
        q99.is_some_and(|q| q >= 0.0),
        "queue time quantile: {q99:?}"
    );
    // The README's join: a process's rate with its command line.
    let joined = promql_results(
        prom_addr,
        "sum by (pid) (rate(iodump_process_io_total[1m])) * on (pid) group_left (cmdline) iodump_process_info",
        end,
    );
    assert!(
        joined.iter().any(|r| r["metric"]["cmdline"]
            .as_str()
            .is_some_and(|c| c.contains("--name=steady"))),
        "fio's command line joined to its rate: {joined:?}"
    );
    eprintln!(
        "prometheus: {total} reads, rate {rate:.1}/s (trace {trace_rate:.1}), p99 {:.1} us (analyze {:.1} us)",
        p99 * 1e6,
        exact * 1e6
    );
}

/// `2026-01-15T10:00:12.000000000Z` as Unix seconds (UTC, whole seconds).
fn utc_secs(t: &str) -> f64 {
    let ns = iodump_format::summary::parse_rfc3339(t).unwrap_or_else(|| panic!("{t:?}"));
    ns.div_euclid(1_000_000_000) as f64
}
