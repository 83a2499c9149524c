//! End-to-end tests of `iodump top`: batch snapshots (text and JSON) of known workloads on
//! ext4 on a zram device made by the test, cgroups with container runtimes' names, and the
//! full-screen view driven in tmux. Root and BPF needed: they skip without, unless
//! `IODUMP_REQUIRE_BPF=1` (CI).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::devices::{Ext4OnZram as Fs, Frozen, Loop};
use common::{bin, bpf_available, ok, one_line_error, run, usage_error};

static SERIAL: Mutex<()> = Mutex::new(());

fn sh(script: &str) {
    let st = Command::new("sh").arg("-c").arg(script).status().unwrap();
    assert!(st.success(), "failed: {script}");
}

/// Background workloads, killed (with their process groups) on drop.
struct Workload(Vec<Child>);

impl Workload {
    fn spawn(&mut self, script: &str) {
        use std::os::unix::process::CommandExt;
        let c = Command::new("sh")
            .arg("-c")
            .arg(script)
            .process_group(0)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        self.0.push(c);
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SAFETY: kill(2) on the process group of our own child.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.wait();
        }
        // Then wait until every process of those groups is gone (a pipeline's dd, fio's job).
        for c in &self.0 {
            for _ in 0..100 {
                // SAFETY: signal 0 only checks that the process group exists.
                if unsafe { libc::kill(-(c.id() as i32), 0) } != 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// fio reading `reads` at 1000 IOPS (4 KiB, O_DIRECT) and one dd writing `writes` (64 KiB,
/// O_DIRECT) what a loop feeds it, up to about 50 blocks a second (fewer on a busy machine),
/// for up to a minute. fio runs its job as a thread (`--thread`): a forked job would leave
/// the process group (its own session) and outlive the test, holding the filesystem.
fn fio_and_dd(reads: &Path, writes: &Path) -> Workload {
    sh(&format!(
        "dd if=/dev/urandom of={} bs=1M count=32 status=none; sync",
        reads.display()
    ));
    let mut w = Workload(Vec::new());
    w.spawn(&format!(
        "exec fio --thread --name=topread --filename={} --rw=randread --bs=4k --direct=1 --size=32M \
         --time_based --runtime=60 --rate_iops=1000",
        reads.display()
    ));
    w.spawn(&format!(
        "while :; do head -c 65536 /dev/zero; sleep 0.02; done | \
         dd of={} bs=64k iflag=fullblock oflag=direct status=none",
        writes.display()
    ));
    // Both running before top starts.
    std::thread::sleep(Duration::from_millis(500));
    w
}

/// `iodump top -b ARGS`: stdout, after checking that it succeeded.
fn top(args: &[&str]) -> String {
    let out = run(bin().arg("top").arg("-b").args(args));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "top {args:?}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

/// `iodump top ARGS` started with its output piped, once it records (its first stderr line
/// read): the child and the rest of its stderr.
fn spawn_recording_top(args: &[&str]) -> (Child, std::io::BufReader<std::process::ChildStderr>) {
    use std::io::BufRead;
    let mut top = bin()
        .arg("top")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(top.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("iodump: recording"), "{line}");
    (top, err)
}

fn json_lines(s: &str) -> Vec<Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn row<'a>(snap: &'a Value, key: &str, value: &str) -> Option<&'a Value> {
    snap["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[key].as_str() == Some(value))
}

#[test]
fn batch_snapshots_show_fio_and_dd_files_and_processes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("batch_snapshots_show_fio_and_dd_files_and_processes") {
        return;
    }
    let fs = Fs::new("batch");
    let reads = fs.mnt.join("data/reads.dat");
    let writes = fs.mnt.join("logs/writes.dat");
    std::fs::create_dir_all(reads.parent().unwrap()).unwrap();
    std::fs::create_dir_all(writes.parent().unwrap()).unwrap();
    let _w = fio_and_dd(&reads, &writes);
    let dev = fs.zram.name();
    let (rp, wp) = (reads.to_str().unwrap(), writes.to_str().unwrap());

    // Per file, JSON: three one-second snapshots, both files with their processes.
    let started = Instant::now();
    let snaps = json_lines(&top(&["-n", "3", "-i", "1s", "-d", &dev, "--json"]));
    assert_eq!(snaps.len(), 3);
    assert!(started.elapsed() >= Duration::from_secs(3));
    for s in &snaps {
        assert_eq!(s["by"], "file");
        let secs = s["interval_s"].as_f64().unwrap();
        assert!((0.9..1.5).contains(&secs), "interval {secs}");
    }
    for s in &snaps[1..] {
        let r = row(s, "path", rp).unwrap_or_else(|| panic!("no {rp} in {s}"));
        assert_eq!(r["comm"], "fio", "{r}");
        assert_eq!(r["device"].as_str(), Some(dev.as_str()));
        let iops = r["read_iops"].as_f64().unwrap();
        assert!((800.0..1200.0).contains(&iops), "fio at 1000 IOPS: {iops}");
        assert_eq!(r["writes"], 0);
        assert_eq!(
            r["read_bytes"].as_u64().unwrap(),
            r["reads"].as_u64().unwrap() * 4096
        );
        let (p50, p99) = (r["p50_us"].as_f64().unwrap(), r["p99_us"].as_f64().unwrap());
        assert!(p50 > 0.0 && p50 <= p99 && p99 < 1e6, "p50 {p50} p99 {p99}");
        assert!(r["queue_us"].is_null(), "zram is bio-based");
        let w = row(s, "path", wp).unwrap_or_else(|| panic!("no {wp} in {s}"));
        assert_eq!(w["comm"], "dd", "{w}");
        assert!(w["write_iops"].as_f64().unwrap() > 2.0, "{w}");
        assert_eq!(w["write_bytes"].as_u64().unwrap() % 65536, 0, "{w}");
        let t = &s["total"];
        assert!(t["reads"].as_u64() >= r["reads"].as_u64());
        assert!(t["lost_events"].is_u64());
    }
    // Sorted by IOPS, busiest first.
    let ios: Vec<u64> = snaps[2]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            ["reads", "writes", "other"]
                .iter()
                .map(|k| r[k].as_u64().unwrap())
                .sum()
        })
        .collect();
    assert!(ios.windows(2).all(|w| w[0] >= w[1]), "{ios:?}");

    // Per process, text: fio and dd with their command lines.
    let text = top(&["-n", "2", "-i", "1s", "-d", &dev, "--by", "proc"]);
    let snaps: Vec<&str> = text.split("\n\n").collect();
    assert_eq!(snaps.len(), 2, "{text}");
    let last = snaps[1];
    assert!(last.starts_with("iodump top - "), "{last}");
    assert!(last.contains("by proc"), "{last}");
    let lines: Vec<&str> = last.lines().collect();
    assert!(lines[1].starts_with("Total: "), "{last}");
    assert!(lines[2].contains("ARGV"), "{last}");
    let fio = lines
        .iter()
        .find(|l| l.contains(" fio "))
        .unwrap_or_else(|| panic!("{last}"));
    assert!(fio.contains("--name=topread"), "{fio}");
    let dd = lines
        .iter()
        .find(|l| l.contains(" dd "))
        .unwrap_or_else(|| panic!("{last}"));
    assert!(dd.contains(&format!("of={wp}")), "{dd}");

    // Per device: the zram device carries it all.
    let snaps = json_lines(&top(&[
        "-n", "2", "-i", "1s", "-d", &dev, "--by", "dev", "--json",
    ]));
    let d = row(&snaps[1], "device", &dev).unwrap();
    assert!(d["read_iops"].as_f64().unwrap() >= 800.0, "{d}");
    assert!(d["write_iops"].as_f64().unwrap() > 2.0, "{d}");
    assert_eq!(snaps[1]["rows"].as_array().unwrap().len(), 1);

    // Per cgroup: the test's own cgroup (the workloads inherit it), resolved to its path.
    let mine = std::fs::read_to_string("/proc/self/cgroup")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        .unwrap();
    let snaps = json_lines(&top(&[
        "-n", "2", "-i", "500ms", "-d", &dev, "--by", "cgroup", "--json",
    ]));
    assert!((0.4..0.8).contains(&snaps[1]["interval_s"].as_f64().unwrap()));
    assert!(
        row(&snaps[1], "cgroup", &mine).is_some(),
        "{mine} not in {}",
        snaps[1]
    );

    // A filter and a sort: only writes, sorted by throughput; -l 1 keeps one row.
    let snaps = json_lines(&top(&[
        "-n",
        "2",
        "-d",
        &dev,
        "-f",
        "rw == W",
        "--sort",
        "throughput",
        "--json",
        "-l",
        "1",
    ]));
    let rows = snaps[1]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["path"], wp);
    assert_eq!(snaps[1]["total"]["reads"], 0);
    assert_eq!(snaps[1]["sort"], "throughput");
}

#[test]
fn top_writes_a_trace_with_o() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("top_writes_a_trace_with_o") {
        return;
    }
    let fs = Fs::new("trace");
    let reads = fs.mnt.join("reads.dat");
    let writes = fs.mnt.join("writes.dat");
    let _w = fio_and_dd(&reads, &writes);
    let trace = fs.dir.join("top.iod");
    let out = run(bin()
        .args([
            "top",
            "-b",
            "-n",
            "2",
            "--json",
            "-d",
            &fs.zram.name(),
            "-o",
        ])
        .arg(&trace));
    ok(&out);
    let snaps = json_lines(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(snaps.len(), 2);
    let shown: u64 = snaps
        .iter()
        .map(|s| s["total"]["reads"].as_u64().unwrap() + s["total"]["writes"].as_u64().unwrap())
        .sum();
    let r = iodump_format::Reader::open(&trace).unwrap();
    assert!(r.validate().is_empty());
    let recorded = r.events().count() as u64;
    // The trace holds what the snapshots counted, and what completed after the last one.
    assert!(
        recorded >= shown && shown > 1000,
        "recorded {recorded}, shown {shown}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("wrote"), "{err}");
}

/// An I/O that hangs is in no rate or percentile until it completes: the snapshots taken
/// while it hangs name its device under the totals (`in_flight_slow` in JSON), and those
/// after it completed do not. The I/O: a write to a loop device whose backing file is on a
/// frozen file system, which waits until the file system is thawed.
#[test]
fn snapshots_show_an_io_that_hangs_while_it_hangs() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("snapshots_show_an_io_that_hangs_while_it_hangs") {
        return;
    }
    use std::io::{BufRead, Read};
    let fs = Fs::new("top-hang");
    let lo = Loop::new(&fs.mnt, 16);
    let dev = lo.name().to_string();
    let (mut top, mut err) = spawn_recording_top(&["-b", "-i", "1s", "--json", "-d", &dev]);
    let mut out = std::io::BufReader::new(top.stdout.take().unwrap());
    let mut next = || {
        let mut l = String::new();
        assert!(out.read_line(&mut l).unwrap() > 0, "top ended");
        serde_json::from_str::<Value>(&l).unwrap()
    };
    let slow = |s: &Value| s["in_flight_slow"].as_array().unwrap().clone();
    // thawed however the test ends, before the loop device goes
    let frozen = Frozen::new(&fs.mnt);
    let mut dd = lo.write_one_block();
    let t0 = Instant::now();
    let hung = loop {
        let s = next();
        if !slow(&s).is_empty() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "never shown: {s}");
    };
    assert!(dd.try_wait().unwrap().is_none(), "the write did not hang");
    let shown = slow(&hung);
    assert_eq!(shown.len(), 1, "{hung}");
    assert_eq!(shown[0]["device"], dev.as_str(), "{hung}");
    assert_eq!(shown[0]["ios"], 1, "{hung}");
    let oldest = shown[0]["oldest_s"].as_f64().unwrap();
    assert!(
        (1.0..=t0.elapsed().as_secs_f64() + 1.0).contains(&oldest),
        "{oldest} s: {hung}"
    );
    assert_eq!(
        hung["total"]["writes"], 0,
        "not completed, so not counted: {hung}"
    );
    drop(frozen);
    assert!(dd.wait().unwrap().success());
    let t1 = Instant::now();
    let mut writes = 0;
    loop {
        let s = next();
        writes += s["total"]["writes"].as_u64().unwrap();
        if slow(&s).is_empty() && writes == 1 {
            break;
        }
        assert!(t1.elapsed() < Duration::from_secs(15), "still shown: {s}");
    }
    // SAFETY: kill(2) on our own child, not waited for yet.
    unsafe { libc::kill(top.id() as i32, libc::SIGINT) };
    let st = top.wait().unwrap();
    let mut rest = String::new();
    let _ = err.read_to_string(&mut rest);
    assert!(st.success(), "{rest}");
}

#[test]
fn the_first_snapshot_counts_io_from_the_recording_line_on() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("the_first_snapshot_counts_io_from_the_recording_line_on") {
        return;
    }
    let zram = common::devices::Zram::new("64M");
    let (top, _err) =
        spawn_recording_top(&["-b", "-n", "1", "-i", "3s", "--json", "-d", &zram.name()]);
    // At once (a thousand writes take a few ms on zram: all within the first poll).
    sh(&format!(
        "dd if=/dev/zero of={} bs=4k count=1000 oflag=direct status=none",
        zram.node()
    ));
    let out = top.wait_with_output().unwrap();
    assert!(out.status.success());
    let snaps = json_lines(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(snaps.len(), 1);
    assert_eq!(snaps[0]["total"]["writes"], 1000, "{}", snaps[0]);
}

#[test]
fn top_usage_errors() {
    // No BPF needed: these fail before loading anything.
    let out = run(bin().args(["top", "-b", "-i", "0"]));
    usage_error(&out, "-i \"0\"");
    let out = run(bin().args(["top", "-b", "-i", "10ms"]));
    usage_error(&out, "the shortest interval is 100ms");
    let out = run(bin().args(["top", "--json"]));
    usage_error(&out, "--json is for batch mode");
    let out = run(bin().args(["top", "-b", "-n", "0"]));
    usage_error(&out, "-n 0");
    let out = run(bin()
        .args(["top", "-n", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped()));
    one_line_error(&out, "needs a terminal");
    let out = run(bin().args(["top", "-b", "-f", "rw ==="]));
    usage_error(&out, "bad -f expression");
}

/// A tmux server of its own (a private socket) running one command in a detached session;
/// killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(cols: u16, rows: u16, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("iodump-test-{}", std::process::id()),
        };
        let st = t
            .cmd()
            .args(["new-session", "-d", "-s", "top", "-x", &cols.to_string()])
            .args(["-y", &rows.to_string(), command])
            .status()
            .expect("tmux");
        assert!(st.success(), "tmux new-session failed");
        t
    }
    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }
    /// The visible pane, one string per line.
    fn capture(&self) -> Vec<String> {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
    fn keys(&self, keys: &str) {
        let st = self
            .cmd()
            .args(["send-keys", "-t", "top", keys])
            .status()
            .unwrap();
        assert!(st.success());
    }
    /// Waits (up to `secs`) for the pane to satisfy `ok`; panics with the pane if it does not.
    fn wait_for(&self, secs: u64, what: &str, ok: impl Fn(&[String]) -> bool) -> Vec<String> {
        let until = Instant::now() + Duration::from_secs(secs);
        loop {
            let p = self.capture();
            if ok(&p) {
                return p;
            }
            if Instant::now() > until {
                panic!("waited {secs} s for {what}; the pane:\n{}", p.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}

fn tmux_available(test: &str) -> bool {
    if Command::new("tmux")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        return true;
    }
    if std::env::var("IODUMP_REQUIRE_BPF").as_deref() == Ok("1") {
        panic!("IODUMP_REQUIRE_BPF=1 but {test} needs tmux");
    }
    common::skip(test, "tmux");
    false
}

fn has(p: &[String], s: &str) -> bool {
    p.iter().any(|l| l.contains(s))
}

#[test]
fn full_screen_view_in_tmux() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("full_screen_view_in_tmux") || !tmux_available("full_screen_view_in_tmux") {
        return;
    }
    let fs = Fs::new("tmux");
    let reads = fs.mnt.join("reads.dat");
    let writes = fs.mnt.join("writes.dat");
    let _w = fio_and_dd(&reads, &writes);
    let (rp, wp) = (reads.to_str().unwrap(), writes.to_str().unwrap());
    // The screen and --serve together (a free port on loopback).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = Tmux::start(
        160,
        40,
        &format!(
            "{} top -d {} -i 1s --serve 127.0.0.1:{port}; echo EXIT=$?; sleep 600",
            env!("CARGO_BIN_EXE_iodump"),
            fs.zram.name()
        ),
    );
    // Per file: both files with their processes.
    let p = t.wait_for(20, "both files", |p| {
        has(p, "by file")
            && p.iter().any(|l| l.ends_with(rp) && l.contains("fio["))
            && p.iter().any(|l| l.ends_with(wp) && l.contains("dd["))
    });
    assert!(p[1].starts_with("Total: "), "{}", p.join("\n"));
    let (st, metrics) = common::http_get(
        format!("127.0.0.1:{port}").parse().unwrap(),
        "/metrics",
        None,
    );
    assert_eq!(st, 200, "{metrics}");
    assert!(
        metrics.contains(&format!(
            "iodump_device_io_total{{device=\"{}\",op=\"read\"}}",
            fs.zram.name()
        )),
        "{metrics}"
    );
    assert!(
        p[39].starts_with("v/tab view"),
        "footer on the last line: {:?}",
        p[39]
    );
    // It refreshes: the clock in the title moves on.
    let title = p[0].clone();
    t.wait_for(5, "a refresh", |p| p[0] != title);
    // v and tab switch views, 1-4 pick one.
    t.keys("v");
    let p = t.wait_for(5, "the process view", |p| has(p, "by proc"));
    assert!(has(&p, "ARGV"), "{}", p.join("\n"));
    t.wait_for(5, "fio's command line", |p| has(p, "--name=topread"));
    t.keys("Tab");
    t.wait_for(5, "the device view", |p| {
        has(p, "by dev")
            && p.iter()
                .any(|l| l.contains(&format!(" {} ", fs.zram.name())))
    });
    t.keys("v");
    t.wait_for(5, "the cgroup view", |p| {
        has(p, "by cgroup") && has(p, "CGROUP")
    });
    t.keys("1");
    t.wait_for(5, "the file view again", |p| has(p, "by file"));
    // s changes the order.
    t.keys("s");
    t.wait_for(5, "sort by throughput", |p| has(p, "sort throughput"));
    t.keys("s");
    t.wait_for(5, "sort by latency", |p| has(p, "sort latency"));
    // p pauses: the screen stays as it was over two intervals; space resumes.
    t.keys("p");
    let p = t.wait_for(5, "paused", |p| has(p, "[paused]"));
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(t.capture()[0], p[0], "paused, the title stays");
    t.keys("Space");
    let p = t.wait_for(5, "resumed", |p| !has(p, "[paused]"));
    let title = p[0].clone();
    t.wait_for(5, "a refresh after resuming", |p| p[0] != title);
    // A smaller window: every line fits, the footer moves to the new last line.
    let st = t
        .cmd()
        .args(["resize-window", "-t", "top", "-x", "80", "-y", "20"])
        .status()
        .unwrap();
    assert!(st.success());
    let p = t.wait_for(5, "a redraw at 80x20", |p| {
        p.len() == 20 && p[19].starts_with("v/tab view")
    });
    for l in &p {
        assert!(l.chars().count() <= 80, "wider than 80: {l:?}");
    }
    // The path is cut at its start, so the file name stays in sight.
    t.wait_for(5, "file names at 80 columns", |p| {
        p.iter().any(|l| l.ends_with("/reads.dat")) && p.iter().any(|l| l.ends_with("/writes.dat"))
    });
    // A line written to top's stderr while the screen is up (as the recorder's warnings
    // are) stays above the footer, the screen intact, and is on the terminal after exit.
    let warning = "iodump: warning: written to stderr while the screen is up";
    let shell = t
        .cmd()
        .args(["list-panes", "-t", "top", "-F", "#{pane_pid}"])
        .output()
        .unwrap();
    let shell = String::from_utf8_lossy(&shell.stdout).trim().to_string();
    let top_pid = Command::new("pgrep").args(["-P", &shell]).output().unwrap();
    let top_pid = String::from_utf8_lossy(&top_pid.stdout).trim().to_string();
    assert!(
        !top_pid.is_empty(),
        "top's pid under the pane's shell {shell}"
    );
    let mut err = std::fs::OpenOptions::new()
        .append(true)
        .open(format!("/proc/{top_pid}/fd/2"))
        .unwrap();
    writeln!(err, "{warning}").unwrap();
    let p = t.wait_for(5, "the line above the footer", |p| {
        p.len() == 20 && p[18].starts_with(warning) && p[19].starts_with("v/tab view")
    });
    assert_eq!(
        p.iter().filter(|l| l.contains(warning)).count(),
        1,
        "{}",
        p.join("\n")
    );
    // q quits, with status 0, and leaves the alternate screen.
    t.keys("q");
    let p = t.wait_for(10, "exit", |p| has(p, "EXIT="));
    assert!(has(&p, "EXIT=0"), "{}", p.join("\n"));
    assert!(!has(&p, "v/tab view"), "{}", p.join("\n"));
    assert!(
        has(&p, warning),
        "the line on the terminal after exit:\n{}",
        p.join("\n")
    );
}

/// The cgroup2 mount point (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid
/// hierarchy).
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split(' ').next() == Some("cgroup2"))
            .then(|| PathBuf::from(left.split(' ').nth(4).unwrap()))
    })
}

/// cgroups made by the test under one parent of its own; removed (deepest first) on drop,
/// once the processes in them are gone.
struct CgroupTree {
    parent: PathBuf,
    made: Vec<PathBuf>,
}

impl CgroupTree {
    fn new(root: &Path) -> CgroupTree {
        let parent = root.join(format!("iodump-test-{}", std::process::id()));
        let _ = std::fs::remove_dir(&parent);
        std::fs::create_dir(&parent).expect("mkdir in the cgroup2 mount");
        CgroupTree {
            made: vec![parent.clone()],
            parent,
        }
    }
    /// Makes `rel` (and the cgroups on the way) below the parent; returns its directory.
    fn make(&mut self, rel: &str) -> PathBuf {
        let mut p = self.parent.clone();
        for c in rel.split('/') {
            p = p.join(c);
            if !p.exists() {
                std::fs::create_dir(&p).unwrap();
                self.made.push(p.clone());
            }
        }
        p
    }
    /// The path of `rel` as the kernel names it (from the cgroup2 mount's root).
    fn path(&self, rel: &str) -> String {
        format!(
            "/{}/{rel}",
            self.parent.file_name().unwrap().to_str().unwrap()
        )
    }
}

impl Drop for CgroupTree {
    fn drop(&mut self) {
        // Whatever still runs in them (fio's job processes…) is killed first.
        let _ = std::fs::write(self.parent.join("cgroup.kill"), "1");
        for d in self.made.iter().rev() {
            if let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) {
                for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    // SAFETY: kill(2) of a process the test put in its own cgroup.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            for _ in 0..250 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

#[test]
fn containers_are_named_from_their_cgroups() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("containers_are_named_from_their_cgroups") {
        return;
    }
    let Some(root) = cgroup2_mount() else {
        panic!("no cgroup2 mount");
    };
    let docker_id = "a1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff00";
    let cri_id = "0f1e2d3c4b5a69788796a5b4c3d2e1f00123456789abcdef0123456789abcdef";
    let podman_id = "5e5e5e5e5e5e00000000111111112222222233333333444444445555555566aa";
    let uid = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
    let docker_rel = format!("system.slice/docker-{docker_id}.scope");
    let cri_rel = format!(
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{cri_id}.scope",
        uid.replace('-', "_")
    );
    let podman_rel = format!("machine.slice/libpod-{podman_id}.scope");
    let mut cg = CgroupTree::new(&root);
    let docker_cg = cg.make(&docker_rel);
    let cri_cg = cg.make(&cri_rel);
    let podman_cg = cg.make(&podman_rel);
    let fs = Fs::new("cgroups");
    let (a, b, r) = (
        fs.mnt.join("docker.dat"),
        fs.mnt.join("pod.dat"),
        fs.mnt.join("podman.dat"),
    );
    sh(&format!(
        "dd if=/dev/urandom of={} bs=1M count=16 status=none; sync",
        r.display()
    ));
    // Declared after the cgroups: its processes are killed before they are removed.
    let mut w = Workload(Vec::new());
    for (cgdir, file) in [(&docker_cg, &a), (&cri_cg, &b)] {
        w.spawn(&format!(
            "echo $$ > {}/cgroup.procs && while :; do head -c 65536 /dev/zero; sleep 0.02; done | \
             dd of={} bs=64k iflag=fullblock oflag=direct status=none",
            cgdir.display(),
            file.display()
        ));
    }
    w.spawn(&format!(
        "echo $$ > {}/cgroup.procs && exec fio --thread --name=podread --filename={} --rw=randread \
         --bs=4k --direct=1 --size=16M --time_based --runtime=60 --rate_iops=500",
        podman_cg.display(),
        r.display()
    ));
    std::thread::sleep(Duration::from_millis(500));
    let dev = fs.zram.name();

    // Per cgroup: paths, runtimes, container ids, the pod and its QoS class.
    let snaps = json_lines(&top(&["-n", "2", "-d", &dev, "--by", "cgroup", "--json"]));
    let s = &snaps[1];
    let docker = row(s, "cgroup", &cg.path(&docker_rel)).unwrap_or_else(|| panic!("{s}"));
    assert_eq!(docker["runtime"], "docker");
    assert_eq!(docker["container_id"], docker_id);
    assert_eq!(docker["pod_uid"], Value::Null);
    assert_eq!(docker["label"], "docker:a1b2c3d4e5f6");
    assert!(docker["write_iops"].as_f64().unwrap() > 2.0, "{docker}");
    let pod = row(s, "cgroup", &cg.path(&cri_rel)).unwrap_or_else(|| panic!("{s}"));
    assert_eq!(pod["runtime"], "containerd");
    assert_eq!(pod["container_id"], cri_id);
    assert_eq!(pod["pod_uid"], uid);
    assert_eq!(pod["qos"], "burstable");
    assert_eq!(pod["label"], "containerd:0f1e2d3c4b5a pod:7c9e6679");
    let podman = row(s, "cgroup", &cg.path(&podman_rel)).unwrap_or_else(|| panic!("{s}"));
    assert_eq!(podman["runtime"], "podman");
    let iops = podman["read_iops"].as_f64().unwrap();
    assert!((400.0..600.0).contains(&iops), "fio at 500 IOPS: {iops}");
    // The text view shows the labels.
    let text = top(&["-n", "1", "-d", &dev, "--by", "cgroup"]);
    assert!(text.contains("docker:a1b2c3d4e5f6"), "{text}");
    assert!(
        text.contains("containerd:0f1e2d3c4b5a pod:7c9e6679"),
        "{text}"
    );

    // Per process: each process with its container.
    let text = top(&["-n", "2", "-d", &dev, "--by", "proc"]);
    let last = text.split("\n\n").last().unwrap();
    let fio = last
        .lines()
        .find(|l| l.contains(" fio "))
        .unwrap_or_else(|| panic!("{last}"));
    assert!(fio.contains("podman:5e5e5e5e5e5e"), "{fio}");
    assert!(fio.contains("--name=podread"), "{fio}");
    let dds: Vec<&str> = last.lines().filter(|l| l.contains(" dd ")).collect();
    assert_eq!(dds.len(), 2, "{last}");
    assert!(
        dds.iter().any(|l| l.contains("docker:a1b2c3d4e5f6")),
        "{last}"
    );
    assert!(
        dds.iter().any(|l| l.contains("containerd:0f1e2d3c4b5a")),
        "{last}"
    );

    // --container: by id prefix, runtime:prefix, or the pod's UID.
    let files = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["-n", "2", "-d", &dev, "--json", "-l", "0"];
        a.extend_from_slice(args);
        let snaps = json_lines(&top(&a));
        snaps[1]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["path"].as_str().unwrap().to_string())
            .collect()
    };
    let (a, b, r) = (
        a.to_str().unwrap().to_string(),
        b.to_str().unwrap().to_string(),
        r.to_str().unwrap().to_string(),
    );
    assert_eq!(files(&["--container", "a1b2c3d4"]), vec![a.clone()]);
    assert_eq!(
        files(&["--container", "containerd:0f1e2d"]),
        vec![b.clone()]
    );
    assert_eq!(files(&["--container", "pod:7c9e6679"]), vec![b]);
    assert_eq!(files(&["--container", "5E5E5E5E"]), vec![r]);
    assert!(files(&["--container", "docker:0f1e2d"]).is_empty());
    drop(w);
}

/// Sum of the bytes written by I/O of `analyze ARGS` (`--sql` over the io table).
fn written_bytes(trace: &Path, args: &[&str]) -> u64 {
    let mut cmd = bin();
    cmd.args([
        "analyze",
        "--sql",
        "SELECT coalesce(sum(io.bytes), 0) AS b FROM io JOIN files ON io.path_id = files.path_id \
         AND io.trace = files.trace WHERE io.op = 'write' AND files.path LIKE '%.dat'",
        "--format",
        "csv",
    ]);
    let out = run(cmd.args(args).arg(trace));
    assert!(
        out.status.success(),
        "analyze {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{text}"))
}

#[test]
fn containers_are_stored_in_traces_and_filtered_in_record_and_analyze() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("containers_are_stored_in_traces_and_filtered_in_record_and_analyze") {
        return;
    }
    let root = cgroup2_mount().expect("no cgroup2 mount");
    let docker_id = "d0c4e5f60718293a4b5c6d7e8f90112233445566778899aabbccddeeff001122";
    let cri_id = "c1e2d3c4b5a69788796a5b4c3d2e1f00123456789abcdef0123456789abcdef0";
    let uid = "8d9e6679-7425-40de-944b-e07fc1f90ae8";
    let docker_rel = format!("system.slice/docker-{docker_id}.scope");
    let pod_rel = format!(
        "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice",
        uid.replace('-', "_")
    );
    let cri_rel = format!("{pod_rel}/cri-containerd-{cri_id}.scope");
    let mut cg = CgroupTree::new(&root);
    let dirs = [
        cg.make(&docker_rel),
        cg.make(&cri_rel),
        cg.make("other.service"),
    ];
    let fs = Fs::new("containers");
    let dev = fs.zram.name();
    // Three writers, one after the other, each in its cgroup: 4, 2 and 1 MiB of O_DIRECT
    // writes in 64 KiB blocks.
    let script: Vec<String> = dirs
        .iter()
        .zip([("docker", 64), ("pod", 32), ("other", 16)])
        .map(|(d, (name, blocks))| {
            format!(
                "sh -c 'echo $$ > {}/cgroup.procs && exec dd if=/dev/zero of={}/{name}.dat \
                 bs=64k count={blocks} oflag=direct status=none'",
                d.display(),
                fs.mnt.display()
            )
        })
        .collect();
    let script = script.join(" && ");
    let all = fs.dir.join("all.iod");
    let out = run(bin()
        .args(["record", "-d", &dev, "-o"])
        .arg(&all)
        .args(["--", "sh", "-c", &script]));
    ok(&out);

    // The trace's cgroups table: paths and identities of the writers' cgroups.
    let out = run(bin().args(["info", "--json"]).arg(&all));
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cgroups = info["cgroups"].as_array().expect("a cgroups table");
    let find = |rel: &str| {
        let p = cg.path(rel);
        cgroups
            .iter()
            .find(|c| c["path"] == p.as_str())
            .unwrap_or_else(|| panic!("no cgroup {p} in {cgroups:?}"))
            .clone()
    };
    let d = find(&docker_rel);
    assert_eq!(d["runtime"], "docker");
    assert_eq!(d["container_id"], docker_id);
    let c = find(&cri_rel);
    assert_eq!(c["runtime"], "containerd");
    assert_eq!(c["container_id"], cri_id);
    assert_eq!(c["pod_uid"], uid);
    assert_eq!(c["qos"], "besteffort");
    assert_eq!(find("other.service")["unit"], "other.service");
    assert!(cgroups.iter().any(|c| c["path"] == "/"), "{cgroups:?}");
    let text = String::from_utf8_lossy(&run(bin().arg("info").arg(&all)).stdout).into_owned();
    assert!(
        text.contains("docker:d0c4e5f60718")
            && text.contains("containerd:c1e2d3c4b5a6 pod:8d9e6679"),
        "{text}"
    );

    // analyze: by container id, runtime:id, pod, cgroup path (from the mount or under it).
    const MIB: u64 = 1 << 20;
    assert_eq!(written_bytes(&all, &[]), 7 * MIB);
    assert_eq!(written_bytes(&all, &["--container", "d0c4e5"]), 4 * MIB);
    assert_eq!(written_bytes(&all, &["--container", "D0C4E5F607"]), 4 * MIB);
    assert_eq!(
        written_bytes(&all, &["--container", "docker:d0c4"]),
        4 * MIB
    );
    assert_eq!(written_bytes(&all, &["--container", "crio:c1e2"]), 0);
    assert_eq!(
        written_bytes(&all, &["--container", &format!("pod:{}", &uid[..8])]),
        2 * MIB
    );
    assert_eq!(written_bytes(&all, &["--container", "c1e2d3"]), 2 * MIB);
    assert_eq!(
        written_bytes(&all, &["--cgroup", &cg.path("kubepods.slice")]),
        2 * MIB
    );
    let other = root.join(cg.path("other.service").trim_start_matches('/'));
    assert_eq!(
        written_bytes(&all, &["--cgroup", other.to_str().unwrap()]),
        MIB
    );
    assert_eq!(written_bytes(&all, &["--cgroup", &cg.path("")]), 7 * MIB);
    assert_eq!(written_bytes(&all, &["--cgroup", &cg.path("system")]), 0);
    assert_eq!(
        written_bytes(
            &all,
            &[
                "--filter",
                &format!("pod == '{uid}' || container =~ 'd0c4*'")
            ]
        ),
        6 * MIB
    );

    // record --container: only the docker container's I/O is recorded.
    let only = fs.dir.join("docker.iod");
    let out = run(bin()
        .args(["record", "-d", &dev, "--container", &docker_id[..10], "-o"])
        .arg(&only)
        .args(["--", "sh", "-c", &script]));
    ok(&out);
    assert_eq!(written_bytes(&only, &[]), 4 * MIB);
    let r = iodump_format::Reader::open(&only).unwrap();
    let docker_cgroup = d["cgroup_id"].as_u64().unwrap();
    let events = common::events_on(&r, &dev);
    assert!(!events.is_empty());
    assert!(
        events.iter().all(|e| e.cgroup_id == docker_cgroup),
        "events of other cgroups"
    );

    // Errors: no such container, ambiguous, with --cgroup, a trace without the table.
    let missing = fs.dir.join("missing.iod");
    let out = run(bin()
        .args(["record", "-d", &dev, "--container", "fffff0", "-o"])
        .arg(&missing)
        .args(["--", "true"]));
    one_line_error(&out, "--container fffff0: no container or pod");
    assert!(!missing.exists());
    // Any container: the docker one and the pod's (and any other this host runs).
    let out = run(bin()
        .args(["record", "--container", "", "-o"])
        .arg(&missing)
        .args(["--", "true"]));
    one_line_error(&out, "cgroups (");
    assert!(String::from_utf8_lossy(&out.stderr).contains("docker:d0c4e5f60718"));
    let out = run(bin()
        .args(["record", "--container", "d0c4", "--cgroup", "/", "-o"])
        .arg(&missing)
        .args(["--", "true"]));
    assert!(!out.status.success());
    assert!(!missing.exists());
    let synth = fs.dir.join("synth.iod");
    assert!(run(bin()
        .args(["synth", "--events", "100", "--workload", "oltp", "-o"])
        .arg(&synth))
    .status
    .success());
    let out = run(bin().args(["analyze", "--container", "d0c4"]).arg(&synth));
    one_line_error(&out, "no cgroups table");
}
