//! The original iodump's command line (`iodump -p DEV …`, no subcommand) and the seed
//! article's commands, end to end on zram and loop devices made by the test: every flag, the
//! original's columns as it printed them, the article's three commands verbatim but for the
//! device (and the log's directory), and its pandas recipe on the saved file. The tests that
//! record need root and BPF: they skip without, unless `IODUMP_REQUIRE_BPF=1` (CI).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use iodump_format::Reader;

mod common;

use common::devices::{Loop, Zram};
use common::{
    bin, bpf_available, events_on, ok, one_line_error, run, usage_error, Recorder, TempDir,
};

/// Tests create and remove devices: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn sh(script: &str) {
    let st = Command::new("sh").arg("-c").arg(script).status().unwrap();
    assert!(st.success(), "failed: {script}");
}

/// `dd` of `count` blocks of `bs` from /dev/zero to `node`, direct.
fn dd(node: &str, bs: &str, count: u32) {
    sh(&format!(
        "dd if=/dev/zero of={node} bs={bs} count={count} oflag=direct status=none"
    ));
}

/// `iodump ARGS` to completion (with `-- CMD` it ends with the command).
fn iodump(args: &[&str]) -> Output {
    let out = run(bin().args(args));
    ok(&out);
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

/// The rows of the original's columns (after the header line if `header`), split on spaces.
fn rows(stdout: &str, header: bool) -> Vec<Vec<String>> {
    stdout
        .lines()
        .skip(header as usize)
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The original's default header, rebuilt from its printf formats.
fn default_header() -> String {
    format!(
        "{:<26} {:<15} {:>7} {:>6} {:>11} {:>2} {:>5} {:<13}  {}",
        "datetime", "comm", "pid", "iosize", "sector", "rw", "rwsec", "launcher", "fullpath"
    )
}

/// `2022-03-23T16:42:05.315695`.
fn is_datetime(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 26
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            _ => c.is_ascii_digit(),
        })
}

/// A block device name of this machine (for the tests that fail before recording).
fn some_device() -> String {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/block")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.into_iter().next().expect("a block device")
}

#[test]
fn help_and_bad_flags_are_one_line_errors() {
    // No BPF needed: all of these stop before loading.
    let out = run(bin().args(["-p", "x", "--help"]));
    ok(&out);
    let help = text(&out.stdout);
    for s in [
        "-p <DEV>",
        "-t <SECS>",
        "-s <FILE>",
        "-S <N>",
        "--sample",
        "Fields of -o",
    ] {
        assert!(help.contains(s), "{s} in {help}");
    }
    let out = run(bin().arg("--help"));
    assert!(text(&out.stdout).contains("The original iodump's command line works too"));
    // -p is required (clap: exit 2, usage on stderr).
    let out = run(bin().args(["-t", "5"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("-p <DEV>"),
        "{}",
        text(&out.stderr)
    );
    let dev = some_device();
    let out = run(bin().args(["-p", &dev, "-S", "0"]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    for (args, what) in [
        (&["-a", "Z"][..], "-a Z: not one of the original's actions"),
        (&["-o", "comm,bogus"], "\"bogus\""),
        (&["-O", "nope"], "-O nope"),
        (&["-o", "csv", "-O", "tid"], "-O adds fields"),
        (&["-S", "2", "--sample", "10"], "give one"),
        (&["--sample", "0"], "--sample 0"),
        (&["--sample", "half"], "--sample takes a percentage"),
        (&["-t", "0"], "-t 0"),
        (&["-f", "iosize >"], "bad -f expression"),
    ] {
        let mut a = vec!["-p", dev.as_str()];
        a.extend_from_slice(args);
        usage_error(&run(bin().args(&a)), what);
    }
    one_line_error(
        &run(bin().args(["-p", "nosuchdisk9"])),
        "unknown block device 'nosuchdisk9'",
    );
    // -s follows the output rule: a link is refused, never followed.
    let d = TempDir::new("orig-errors");
    std::os::unix::fs::symlink(d.join("elsewhere"), d.join("link")).unwrap();
    let link = d.join("link");
    one_line_error(
        &run(bin().args(["-p", &dev, "-s"]).arg(&link)),
        "symbolic link",
    );
    assert!(!d.join("elsewhere").exists());
}

#[test]
fn default_columns_look_as_the_original() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("default_columns_look_as_the_original") {
        return;
    }
    let z = Zram::new("64M");
    let node = z.node();
    let dd_cmd = [
        "--",
        "dd",
        "if=/dev/zero",
        &format!("of={node}"),
        "bs=4k",
        "count=100",
        "oflag=direct",
    ];
    let name = z.name();
    let mut args = vec!["-p", name.as_str()];
    args.extend_from_slice(&dd_cmd);
    let out = iodump(&args);
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(lines.next().unwrap(), default_header());
    let dd_rows: Vec<&str> = lines.filter(|l| l.contains(" dd ")).collect();
    assert_eq!(dd_rows.len(), 100, "{stdout}");
    let mut sectors = Vec::new();
    for row in &dd_rows {
        let f: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(f.len(), 9, "{row}");
        assert!(is_datetime(f[0]), "{row}");
        // The same widths as the original's printf formats.
        let again = format!(
            "{} {:<15} {:>7} {:>6} {:>11} {:>2} {:>5} {:<13}  {}",
            f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]
        );
        assert_eq!(*row, again);
        assert_eq!(
            (f[1], f[3], f[5], f[7], f[8]),
            ("dd", "4096", "W", "write", node.as_str())
        );
        assert!(
            !f[6].is_empty() && f[6].chars().all(|c| "FASMV".contains(c)),
            "{row}"
        );
        sectors.push(f[4].parse::<u64>().unwrap());
    }
    sectors.sort_unstable();
    assert_eq!(sectors, (0..100).map(|i| i * 8).collect::<Vec<u64>>());
    // datetime is local time: the original's UTC+8 (POSIX TZ, no tzdata needed) against the
    // timestamp field (microseconds since the epoch).
    let mut args = vec!["-p", name.as_str(), "-o", "datetime,timestamp,comm"];
    args.extend_from_slice(&dd_cmd);
    let out = run(bin().env("TZ", "CST-8").args(&args));
    ok(&out);
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout.lines().next().unwrap(),
        format!("{:<26} {:>16}  {:<15}", "datetime", "timestamp", "comm")
    );
    let rows = rows(&stdout, true);
    assert!(rows.len() >= 100);
    for r in rows.iter().take(3) {
        let us: i64 = r[1].parse().unwrap();
        let date = Command::new("date")
            .env("TZ", "CST-8")
            .arg("-d")
            .arg(format!("@{}", us / 1_000_000))
            .arg("+%Y-%m-%dT%H:%M:%S")
            .output()
            .unwrap();
        let want = format!("{}.{:06}", text(&date.stdout).trim(), us % 1_000_000);
        assert_eq!(r[0], want);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64;
        assert!((now - us).abs() < 120_000_000, "{us} vs now {now}");
    }
}

/// A filesystem on a zram device, mounted; undone on drop.
struct Fs {
    z: Zram,
    mnt: std::path::PathBuf,
}

impl Fs {
    fn ext4(d: &TempDir) -> Fs {
        let z = Zram::new("128M");
        let mnt = d.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        sh(&format!("mkfs.ext4 -q -F {} >/dev/null", z.node()));
        sh(&format!("mount {} {}", z.node(), mnt.display()));
        Fs { z, mnt }
    }
}

impl Drop for Fs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

#[test]
fn o_replaces_and_big_o_adds_fields() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("o_replaces_and_big_o_adds_fields") {
        return;
    }
    let d = TempDir::new("orig-fields");
    let fs = Fs::ext4(&d);
    let dev = fs.z.name();
    let file = fs.mnt.join("data.bin");
    let write = format!("of={}", file.display());
    let cmd = [
        "--",
        "dd",
        "if=/dev/zero",
        write.as_str(),
        "bs=4k",
        "count=16",
        "oflag=direct",
    ];
    // -o: only these fields, in the original's order whatever the order given.
    let mut a = vec!["-p", dev.as_str(), "-o", "pid,comm"];
    a.extend_from_slice(&cmd);
    let stdout = text(&iodump(&a).stdout);
    assert_eq!(
        stdout.lines().next().unwrap(),
        format!(" {:<15} {:>7}", "comm", "pid")
    );
    let r = rows(&stdout, true);
    assert!(r.iter().all(|f| f.len() == 2), "{stdout}");
    assert!(r.iter().filter(|f| f[0] == "dd").count() >= 16, "{stdout}");
    // -O: the default and these (the issue's `-O tid,ino`, and iodump's own fields).
    let mut a = vec![
        "-p",
        dev.as_str(),
        "-O",
        "tid,ino,partition,lba,dev,latency,queue,cgroup,cpu,error",
    ];
    a.extend_from_slice(&cmd);
    let stdout = text(&iodump(&a).stdout);
    let header: Vec<&str> = stdout.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "datetime",
            "comm",
            "pid",
            "tid",
            "iosize",
            "sector",
            "partition",
            "rw",
            "rwsec",
            "launcher",
            "ino",
            "lba",
            "dev",
            "latency(us)",
            "queue(us)",
            "cgroup",
            "cpu",
            "error",
            "fullpath"
        ]
    );
    let ino = std::fs::metadata(&file).unwrap().ino().to_string();
    let majmin = std::fs::read_to_string(format!("/sys/block/{dev}/dev")).unwrap();
    let file_s = file.display().to_string();
    let data: Vec<Vec<String>> = rows(&stdout, true)
        .into_iter()
        .filter(|f| f.last() == Some(&file_s))
        .collect();
    assert_eq!(data.len(), 16, "{stdout}");
    for f in &data {
        assert_eq!(f.len(), 19, "{f:?}");
        assert_eq!((f[1].as_str(), f[2].as_str()), ("dd", f[3].as_str()));
        assert_eq!(
            (f[4].as_str(), f[6].as_str(), f[7].as_str()),
            ("4096", dev.as_str(), "W")
        );
        assert_eq!(f[10], ino, "ino of {file_s}");
        assert_eq!(f[5], f[11], "sector and lba agree on a whole disk");
        assert_eq!(f[12], majmin.trim());
        assert!(f[13].parse::<f64>().unwrap() > 0.0, "{f:?}");
        assert_eq!(f[14], "-", "zram is bio-based: no queue time");
        f[15].parse::<u64>().unwrap();
        f[16].parse::<u16>().unwrap();
        assert_eq!(f[17], "0");
    }
    // Metadata and journal I/O show `-` where there is no path.
    let r = rows(&stdout, true);
    let mut journal = r.iter().filter(|f| f[1].starts_with("jbd2"));
    assert!(journal.all(|f| f[18] == "-"), "{stdout}");
}

#[test]
fn partitions_prefixes_and_disk_sectors() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("partitions_prefixes_and_disk_sectors") {
        return;
    }
    let d = TempDir::new("orig-parts");
    let lo = Loop::partitioned(&d.0, 64);
    let part = format!("{}p1", lo.name());
    let of = format!("of=/dev/{part}");
    let cmd = [
        "--",
        "dd",
        "if=/dev/zero",
        of.as_str(),
        "bs=4k",
        "count=10",
        "seek=100",
        "oflag=direct",
    ];
    // The disk includes its partition; sector is on the disk (the original's), lba on the
    // partition.
    for p in [
        lo.name(),
        part.as_str(),
        &format!("/dev/{part}"),
        &format!("{}p", lo.name()),
    ] {
        let mut a = vec!["-p", p, "-o", "comm,partition,sector,lba"];
        a.extend_from_slice(&cmd);
        let stdout = text(&iodump(&a).stdout);
        let r: Vec<Vec<String>> = rows(&stdout, true)
            .into_iter()
            .filter(|f| f[0] == "dd")
            .collect();
        assert_eq!(r.len(), 10, "-p {p}: {stdout}");
        let mut lbas = Vec::new();
        for f in &r {
            // comm, sector, partition, lba: the original's order.
            assert_eq!(f[2], part, "-p {p}");
            let (sector, lba): (u64, u64) = (f[1].parse().unwrap(), f[3].parse().unwrap());
            assert_eq!(sector, lba + 2048, "-p {p}");
            lbas.push(lba);
        }
        lbas.sort_unstable();
        assert_eq!(lbas, (100..110).map(|i| i * 8).collect::<Vec<u64>>());
    }
    // A name prefix matches every such device: `-p zram` records two new zram devices.
    let (z1, z2) = (Zram::new("16M"), Zram::new("16M"));
    let script = format!(
        "dd if=/dev/zero of={} bs=4k count=3 oflag=direct status=none; \
         dd if=/dev/zero of={} bs=4k count=4 oflag=direct status=none",
        z1.node(),
        z2.node()
    );
    let stdout = text(
        &iodump(&[
            "-p",
            "zram",
            "-o",
            "comm,partition",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout,
    );
    let r = rows(&stdout, true);
    let on = |n: &str| r.iter().filter(|f| f[0] == "dd" && f[1] == n).count();
    assert_eq!((on(&z1.name()), on(&z2.name())), (3, 4), "{stdout}");
}

#[test]
fn time_limits_and_no_header() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("time_limits_and_no_header") {
        return;
    }
    let z = Zram::new("64M");
    // -t 1: stops by itself.
    let t0 = Instant::now();
    let out = iodump(&["-p", &z.name(), "-t", "1", "-H"]);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert!(text(&out.stderr).contains("iodump: recorded "));
    // -t -1 (the issue's `iodump -p sda5 -t -1 -H`): no limit, until Ctrl-C; -H: no header.
    let rec = Recorder::start(&["-p", &z.name(), "-t", "-1", "-H"]);
    dd(&z.node(), "4k", 25);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(rec.child.id() > 0);
    let (st, stdout, err) = rec.stop();
    assert!(st.success(), "{err}");
    let r = rows(&stdout, false);
    assert!(is_datetime(&r[0][0]), "no header: {stdout}");
    assert_eq!(r.iter().filter(|f| f[1] == "dd").count(), 25, "{stdout}");
}

#[test]
fn save_appends_csv_text_or_writes_a_trace() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("save_appends_csv_text_or_writes_a_trace") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("orig-save");
    let of = format!("of={}", z.node());
    let dd_n = |n: u32| {
        vec![
            "--".to_string(),
            "dd".into(),
            "if=/dev/zero".into(),
            of.clone(),
            "bs=4k".into(),
            format!("count={n}"),
            "oflag=direct".into(),
        ]
    };
    let run_with = |flags: &[&str], n: u32| {
        let mut a: Vec<String> = vec!["-p".into(), z.name()];
        a.extend(flags.iter().map(|s| s.to_string()));
        a.extend(dd_n(n));
        let out = run(bin().args(&a));
        ok(&out);
        out
    };
    // -s FILE: CSV with the article's columns, appended; the header once, at the top.
    let log = d.join("io.log");
    let log_s = log.display().to_string();
    let out = run_with(&["-s", &log_s], 20);
    assert!(out.stdout.is_empty(), "lines go to the file");
    run_with(&["-s", &log_s], 30);
    assert_eq!(
        std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let csv = std::fs::read_to_string(&log).unwrap();
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("timestamp,pid,comm,iosize,rw,lba,path,"));
    let dd_rows: Vec<&str> = lines
        .filter(|l| l.split(',').nth(2) == Some("dd"))
        .collect();
    assert_eq!(dd_rows.len(), 50, "{csv}");
    assert_eq!(csv.matches("timestamp,").count(), 1);
    // -s FILE with -o text (or fields): the original's columns, appended (as it did).
    let txt = d.join("log");
    let txt_s = txt.display().to_string();
    run_with(&["-H", "-o", "text", "-s", &txt_s], 20);
    let t = std::fs::read_to_string(&txt).unwrap();
    let r = rows(&t, false);
    assert_eq!(
        r.iter().filter(|f| f[1] == "dd" && f.len() == 9).count(),
        20,
        "{t}"
    );
    // -s FILE.iod: a binary trace, nothing on stdout.
    let iod = d.join("t.iod");
    let out = run_with(&["-s", &iod.display().to_string()], 20);
    assert!(out.stdout.is_empty());
    let r = Reader::open(&iod).unwrap();
    assert_eq!(events_on(&r, &z.name()).len(), 20);
}

#[test]
fn sampling_one_in_n_and_the_articles_percent() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("sampling_one_in_n_and_the_articles_percent") {
        return;
    }
    let z = Zram::new("64M");
    let count = |stdout: &str| rows(stdout, true).iter().filter(|f| f[0] == "dd").count();
    // -S 10: one in 10 (per CPU: up to one more or less per CPU).
    let of = format!("of={}", z.node());
    let out = iodump(&[
        "-p",
        &z.name(),
        "-S",
        "10",
        "-o",
        "comm",
        "--",
        "dd",
        "if=/dev/zero",
        &of,
        "bs=4k",
        "count=2000",
        "oflag=direct",
    ]);
    let n = count(&text(&out.stdout));
    assert!((190..=210).contains(&n), "-S 10 kept {n} of 2000");
    // The article's `iodump -p sdb --sample 10 -t 3600`: 10%, for an hour (stopped here).
    let rec = Recorder::start(&["-p", &z.name(), "--sample", "10", "-t", "3600"]);
    dd(&z.node(), "4k", 2000);
    let (st, stdout, err) = rec.stop();
    assert!(st.success(), "{err}");
    let n = rows(&stdout, true).iter().filter(|f| f[1] == "dd").count();
    assert!((190..=210).contains(&n), "--sample 10 kept {n} of 2000");
}

#[test]
fn comm_substring_pid_and_action_filters() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("comm_substring_pid_and_action_filters") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("orig-comm");
    // A second dd under another name: its comm is `ddother`.
    let other = d.join("ddother");
    std::fs::copy("/usr/bin/dd", &other).unwrap();
    let script = format!(
        "dd if=/dev/zero of={n} bs=4k count=30 oflag=direct status=none; \
         {o} if=/dev/zero of={n} bs=4k count=20 seek=100 oflag=direct status=none",
        n = z.node(),
        o = other.display()
    );
    let name = z.name();
    let comms = |flags: &[&str]| -> Vec<String> {
        let mut a = vec!["-p", name.as_str(), "-o", "comm"];
        a.extend_from_slice(flags);
        a.extend_from_slice(&["--", "sh", "-c", &script]);
        let out = iodump(&a);
        rows(&text(&out.stdout), true)
            .into_iter()
            .map(|mut f| f.remove(0))
            .collect()
    };
    let count = |v: &[String], c: &str| v.iter().filter(|x| *x == c).count();
    // -c: exact name.
    let v = comms(&["-c", "dd"]);
    assert_eq!((v.len(), count(&v, "dd")), (30, 30), "{v:?}");
    // -C: a substring.
    let v = comms(&["-C", "other"]);
    assert_eq!((v.len(), count(&v, "ddother")), (20, 20), "{v:?}");
    let v = comms(&["-C", "dd"]);
    assert_eq!(
        (count(&v, "dd"), count(&v, "ddother"), v.len()),
        (30, 20, 50),
        "{v:?}"
    );
    // The issue's forms: `-c kworker/1:0`, `-C kworker` (kernel threads: any count).
    let v = comms(&["-c", "kworker/1:0"]);
    assert!(v.iter().all(|c| c == "kworker/1:0"), "{v:?}");
    let v = comms(&["-C", "kworker"]);
    assert!(v.iter().all(|c| c.contains("kworker")), "{v:?}");
    // -P: one process (two writers start together; only the target's I/O is kept).
    let go = d.join("go");
    let writer = |count: u32, seek: u32| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while [ ! -e {} ]; do sleep 0.02; done; exec dd if=/dev/zero of={} bs=4k \
                 count={count} seek={seek} oflag=direct status=none",
                go.display(),
                z.node()
            ))
            .spawn()
            .unwrap()
    };
    let (target, noise) = (writer(17, 0), writer(13, 1000));
    let pid = target.id().to_string();
    let rec = Recorder::start(&["-p", &z.name(), "-P", &pid, "-o", "pid,comm"]);
    std::fs::write(&go, b"").unwrap();
    for mut c in [target, noise] {
        assert!(c.wait().unwrap().success());
    }
    let (st, stdout, err) = rec.stop();
    assert!(st.success(), "{err}");
    let r = rows(&stdout, true);
    assert_eq!(r.len(), 17, "{stdout}");
    assert!(r.iter().all(|f| f[1] == pid && f[0] == "dd"), "{stdout}");
    // -a: accepted, one line on what iodump records instead.
    let out = iodump(&[
        "-p",
        &z.name(),
        "-a",
        "G",
        "-o",
        "comm",
        "--",
        "dd",
        "if=/dev/zero",
        &format!("of={}", z.node()),
        "bs=4k",
        "count=10",
        "oflag=direct",
    ]);
    let err = text(&out.stderr);
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("-a G")).collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("whole life"), "{err}");
    assert_eq!(rows(&text(&out.stdout), true).len(), 10);
}

#[test]
fn the_articles_filter_as_csv_and_json() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("the_articles_filter_as_csv_and_json") {
        return;
    }
    let d = TempDir::new("orig-csv");
    // A loop device takes requests of up to 1280 KiB, but a buffer of separate pages makes
    // at most 128 segments of 4 KiB (512 KiB): requests of more than 1 MiB need a buffer of
    // huge pages (transparent, madvise), written and read with O_DIRECT.
    let lo = Loop::new(&d.0, 64);
    let helper = d.join("huge.py");
    std::fs::write(&helper, HUGE_IO).unwrap();
    // The KiB of huge pages the helper's buffer got (0 when memory is too fragmented).
    let huge = |op: &str| -> u64 {
        let out = Command::new("python3")
            .arg(&helper)
            .args([lo.node.as_str(), op, "8"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout).trim().parse().unwrap()
    };
    // The article's `iodump -p nvme0n1 -f 'iosize > 1048576 && rw == W' -o csv`.
    let rec = Recorder::start(&[
        "-p",
        lo.name(),
        "-f",
        "iosize > 1048576 && rw == W",
        "-o",
        "csv",
    ]);
    let huge_kib = huge("w");
    huge("r");
    dd(&lo.node, "64k", 20);
    let (st, stdout, err) = rec.stop();
    assert!(st.success(), "{err}");
    let mut lines = stdout.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("timestamp,pid,comm,iosize,rw,lba,path,"));
    let r: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    if huge_kib >= 8192 {
        assert!(
            r.len() >= 6,
            "8 MiB written in requests of 1280 KiB: {stdout}"
        );
    } else {
        eprintln!("no huge pages ({huge_kib} KiB): the writes were not over 1 MiB");
    }
    for f in &r {
        assert!(f[3].parse::<u64>().unwrap() > 1_048_576, "{f:?}");
        assert_eq!((f[2], f[4]), ("python3", "W"), "{f:?}");
    }
    let bytes: u64 = r.iter().map(|f| f[3].parse::<u64>().unwrap()).sum();
    assert!(bytes <= 8 << 20);
    // -o json: one object per line, the article's columns first.
    let z = Zram::new("64M");
    let out = iodump(&[
        "-p",
        &z.name(),
        "-o",
        "json",
        "--",
        "dd",
        "if=/dev/zero",
        &format!("of={}", z.node()),
        "bs=4k",
        "count=10",
        "oflag=direct",
    ]);
    let stdout = text(&out.stdout);
    let objs: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v: &serde_json::Value| v["comm"] == "dd")
        .collect();
    assert_eq!(objs.len(), 10, "{stdout}");
    for (o, line) in objs.iter().zip(stdout.lines()) {
        assert_eq!(
            (o["iosize"].as_u64(), o["rw"].as_str()),
            (Some(4096), Some("W"))
        );
        assert!(o["timestamp"].as_f64().unwrap() > 1e9);
        let at = |k: &str| line.find(&format!("\"{k}\":")).unwrap();
        let order = ["timestamp", "pid", "comm", "iosize", "rw", "lba", "path"].map(at);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{line}");
    }
}

/// `python3 huge.py DEV r|w MIB`: one O_DIRECT read or write of MIB MiB from a buffer of
/// transparent huge pages (2 MiB aligned), so that requests are as large as the device takes.
const HUGE_IO: &str = "\
import ctypes, mmap, os, sys
dev, op, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = mib << 20
m = mmap.mmap(-1, n + (4 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_HUGEPAGE)
base = ctypes.addressof(ctypes.c_char.from_buffer(m))
off = -base % (2 << 20)
m[off:off + n] = b'Z' * n
buf = memoryview(m)[off:off + n]
fd = os.open(dev, (os.O_WRONLY if op == 'w' else os.O_RDONLY) | os.O_DIRECT)
done = os.pwrite(fd, buf, 0) if op == 'w' else os.preadv(fd, [buf], 0)
assert done == n, done
huge, ours = 0, False
for line in open('/proc/self/smaps'):
    if '-' in line.split()[0]:
        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
        ours = lo <= base < hi
    elif ours and line.startswith('AnonHugePages:'):
        huge = int(line.split()[1])
print(huge)
";

#[test]
fn the_articles_saved_log_reads_in_pandas() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("the_articles_saved_log_reads_in_pandas") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("orig-pandas");
    // The article's `iodump -p sda -s /tmp/io.log` while fio --ioengine=libaio
    // --rw=randread --bs=4k runs (the log in the test's directory).
    let log = d.join("io.log");
    let rec = Recorder::start(&["-p", &z.name(), "-s", log.to_str().unwrap()]);
    let fio = Command::new("fio")
        .args([
            "--name=article",
            "--ioengine=libaio",
            "--rw=randread",
            "--bs=4k",
        ])
        .args([
            "--direct=1",
            "--size=16M",
            "--io_size=2M",
            "--output=/dev/null",
        ])
        .arg(format!("--filename={}", z.node()))
        .status()
        .expect("fio");
    assert!(fio.success());
    dd(&z.node(), "128k", 10);
    let (st, stdout, err) = rec.stop();
    assert!(st.success(), "{err}");
    assert!(stdout.is_empty(), "lines go to the file: {stdout}");
    // Every row complete (Python's csv module), the article's columns first.
    let py = Command::new("python3")
        .current_dir(&d.0)
        .arg("-c")
        .arg(
            "import csv\n\
             rows=list(csv.reader(open('io.log',newline='')))\n\
             assert rows[0][:7]==['timestamp','pid','comm','iosize','rw','lba','path'], rows[0]\n\
             assert all(len(r)==len(rows[0]) for r in rows)\n\
             print(sum(1 for r in rows[1:] if r[2]=='fio' and r[4]=='R' and r[3]=='4096'))",
        )
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", text(&py.stderr));
    assert_eq!(text(&py.stdout).trim(), "512", "2 MiB of 4k reads");
    if !common::have_pandas() {
        common::skip("", "pandas (the pandas part)");
        return;
    }
    // The article's recipe, unchanged, on the saved file.
    let py = Command::new("python3")
        .current_dir(&d.0)
        .arg("-c")
        .arg(
            "import pandas as pd\n\
             df = pd.read_csv('io.log')\n\
             g = df.groupby(['pid','comm']).size()\n\
             big = df[(df['iosize']>65536) & (df['rw']=='W')]\n\
             print(len(big), int(g.xs('fio', level='comm').sum()), set(big['comm']))",
        )
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", text(&py.stderr));
    assert_eq!(text(&py.stdout).trim(), "10 512 {'dd'}");
}

#[test]
fn live_output_names_devices() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("live_output_names_devices") {
        return;
    }
    let z = Zram::new("64M");
    let majmin = std::fs::read_to_string(format!("/sys/block/{}/dev", z.name())).unwrap();
    let out = iodump(&[
        "record",
        "-d",
        &z.name(),
        "--",
        "dd",
        "if=/dev/zero",
        &format!("of={}", z.node()),
        "bs=4k",
        "count=5",
        "oflag=direct",
    ]);
    let stdout = text(&out.stdout);
    let rows: Vec<&str> = stdout
        .lines()
        .skip(1)
        .filter(|l| l.contains(" dd "))
        .collect();
    assert_eq!(rows.len(), 5, "{stdout}");
    for r in rows {
        let f: Vec<&str> = r.split_whitespace().collect();
        assert_eq!(f[4], z.name(), "{r}");
        assert!(!r.contains(majmin.trim()), "{r}");
    }
}

#[test]
fn record_o_with_a_format_name_warns() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("record_o_with_a_format_name_warns") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("orig-warn");
    for (name, fmt) in [("csv", "csv"), ("json", "json"), ("text", "text")] {
        let out = run(bin()
            .current_dir(&d.0)
            .args(["record", "-d", &z.name(), "-o", name])
            .args(["--", "dd", "if=/dev/zero", &format!("of={}", z.node())])
            .args(["bs=4k", "count=5", "oflag=direct", "status=none"]));
        ok(&out);
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "warning: -o {name} writes a binary trace to a file named \"{name}\""
            )) && err.contains(&format!("--print {fmt}")),
            "{err}"
        );
        let r = Reader::open(d.join(name)).unwrap();
        assert_eq!(events_on(&r, &z.name()).len(), 5);
    }
    // A name with an extension is a trace file as asked: no warning.
    let out =
        run(bin()
            .current_dir(&d.0)
            .args(["record", "-d", &z.name(), "-o", "t.iod", "--", "true"]));
    ok(&out);
    assert!(!text(&out.stderr).contains("warning"));
}
