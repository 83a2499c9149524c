//! End-to-end tests of `iodump record` on real block devices made by the test (zram, loop).
//! They need root and BPF: without them they skip, unless `IODUMP_REQUIRE_BPF=1` (set by CI),
//! in which case they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;

use iodump_format::{Flags, LossReason, Op, Reader};

mod common;

use common::devices::{Ext4OnZram, Frozen, Loop, Zram};
use common::{
    assert_accounted, bin, bpf_available, events_on, in_flight_at_end, ok, run, spawn_recording,
    usage_error, Recorder, TempDir,
};

/// Tests create and remove devices and compare device counters: run them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Completed (reads, writes) of a block device, from /sys/block/X/stat.
fn stat_ios(name: &str) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (f[0], f[4])
}

fn within(a: u64, b: u64, frac: f64) -> bool {
    (a as f64 - b as f64).abs() <= (b as f64 * frac).max(0.0)
}

#[test]
fn dd_direct_writes_on_zram_are_all_recorded() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("dd_direct_writes_on_zram_are_all_recorded") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("dd");
    let trace = d.join("dd.iod");
    let before = stat_ios(&z.name());
    let out = run(bin()
        .args(["record", "-d", &z.name(), "-o"])
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", &format!("of={}", z.node())])
        .args(["bs=4k", "count=2000", "oflag=direct"]));
    ok(&out);
    let after = stat_ios(&z.name());
    let r = Reader::open(&trace).unwrap();
    assert!(r.validate().is_empty());
    let ev = events_on(&r, &z.name());
    assert_eq!(ev.len(), 2000, "events recorded");
    assert_eq!(after.1 - before.1, 2000, "device's own write count");
    let mut sectors: Vec<u64> = ev.iter().map(|e| e.sector).collect();
    sectors.sort_unstable();
    let expected: Vec<u64> = (0..2000).map(|i| i * 8).collect();
    assert_eq!(sectors, expected);
    for e in &ev {
        assert_eq!(e.op, Op::Write);
        assert_eq!(e.bytes, 4096);
        assert_eq!(e.queue_ns, None, "zram is bio-based");
        assert!(
            e.latency_ns > 0 && e.latency_ns < 1_000_000_000,
            "{}",
            e.latency_ns
        );
        assert_eq!(r.comm(e.pid, e.tid, 0), Some(&b"dd"[..]));
    }
    // The command's exit status is stored and the trace is private.
    assert_eq!(r.end().unwrap().command_exit_status, Some(0));
    assert_eq!(r.lost_events(), 0);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&trace).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let cmd = r.header().command_argv.clone().unwrap();
    assert_eq!(cmd[0], "dd");
}

/// A discard larger than a bio may be goes down as a chain of bios (blk_next_bio), each but
/// the last chained to the next. A kernel whose bio_endio passes a chained bio to its parent
/// before the completion trace (5.10) never shows their ends: the recorder must count them
/// as lost (completion_not_traced), not track them for ever. This kernel traces them, so it
/// is told it does not (IODUMP_FORCE_CHAIN_UNTRACED=1): the run's last bio alone is
/// recorded and the others are counted; told nothing, every bio of the run is recorded.
#[test]
fn chained_bios_whose_completion_is_not_traced_are_counted_not_tracked() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("chained_bios_whose_completion_is_not_traced_are_counted_not_tracked") {
        return;
    }
    // zram takes discards of up to 4 GiB a bio: 9 GiB (nothing written: no memory used)
    // is a run of three bios.
    let size_bytes: u64 = 9 << 30;
    let z = Zram::new("9G");
    let d = TempDir::new("chain");
    let mut bios = 0;
    for force in [false, true] {
        let trace = d.join(&format!("chain-{force}.iod"));
        let mut cmd = bin();
        if force {
            cmd.env("IODUMP_FORCE_CHAIN_UNTRACED", "1");
        }
        let out = run(cmd
            .args(["record", "-d", &z.name(), "-o"])
            .arg(&trace)
            .args(["--", "blkdiscard", &z.node()]));
        ok(&out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(in_flight_at_end(&err), 0, "{err}");
        let r = Reader::open(&trace).unwrap();
        let discards: Vec<_> = events_on(&r, &z.name())
            .into_iter()
            .filter(|e| e.op == Op::Discard)
            .collect();
        let untraced: u64 = r
            .losses()
            .iter()
            .filter(|l| l.reason == LossReason::CompletionNotTraced)
            .map(|l| l.count)
            .sum();
        let end = |e: &iodump_format::Event| e.sector * 512 + u64::from(e.bytes);
        if !force {
            bios = discards.len() as u64;
            assert!(bios >= 2, "a run of bios, not {bios}");
            let bytes: u64 = discards.iter().map(|e| u64::from(e.bytes)).sum();
            assert_eq!(bytes, size_bytes, "every bio of the run recorded");
            assert_eq!(untraced, 0);
            assert_eq!(r.lost_events(), 0);
        } else {
            assert_eq!(discards.len(), 1, "the run's last bio alone");
            assert_eq!(
                end(&discards[0]),
                size_bytes,
                "the last bio ends the device"
            );
            assert_eq!(untraced, bios - 1, "the chained bios counted: {err}");
            assert_eq!(r.lost_events(), bios - 1);
            assert!(
                err.contains(&format!(
                    "{} of them chained bios whose completion this kernel does not trace",
                    bios - 1
                )),
                "{err}"
            );
        }
    }
}

#[test]
fn raw_tracepoint_fallback_records_the_same() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("raw_tracepoint_fallback_records_the_same") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("rawtp");
    let trace = d.join("raw.iod");
    let out = run(bin()
        .env("IODUMP_FORCE_RAW_TP", "1")
        .args(["record", "-d", &z.name(), "-o"])
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", &format!("of={}", z.node())])
        .args(["bs=4k", "count=1500", "oflag=direct"]));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("block_bio_queue:raw_tp") && !err.contains("tp_btf"),
        "{err}"
    );
    let r = Reader::open(&trace).unwrap();
    let ev = events_on(&r, &z.name());
    assert_eq!(ev.len(), 1500);
    assert!(ev.iter().all(|e| e.op == Op::Write && e.bytes == 4096));
    assert!(ev
        .iter()
        .all(|e| r.comm(e.pid, e.tid, 0) == Some(&b"dd"[..])));
}

#[test]
fn fio_random_reads_count_sizes_and_process() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("fio_random_reads_count_sizes_and_process") {
        return;
    }
    let z = Zram::new("128M");
    // Fill the device so reads are real.
    let fill = Command::new("dd")
        .args(["if=/dev/urandom", &format!("of={}", z.node())])
        .args(["bs=1M", "count=128", "oflag=direct"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(fill.success());
    let d = TempDir::new("fio");
    let trace = d.join("fio.iod");
    let before = stat_ios(&z.name());
    let out = run(bin()
        .args(["record", "-d", &z.name(), "-o"])
        .arg(&trace)
        .args([
            "--",
            "fio",
            "--name=rr",
            &format!("--filename={}", z.node()),
        ])
        .args([
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=psync",
            "--number_ios=20000",
            "--size=128M",
            "--output=/dev/null",
        ]));
    ok(&out);
    let after = stat_ios(&z.name());
    let r = Reader::open(&trace).unwrap();
    let ev = events_on(&r, &z.name());
    let reads: Vec<_> = ev.iter().filter(|e| e.op == Op::Read).collect();
    let dev_reads = after.0 - before.0;
    assert!(
        within(reads.len() as u64, 20_000, 0.005),
        "{} reads",
        reads.len()
    );
    assert!(
        within(reads.len() as u64, dev_reads, 0.005),
        "{} vs device {dev_reads}",
        reads.len()
    );
    let fio_reads = reads
        .iter()
        .filter(|e| r.comm(e.pid, e.tid, 0) == Some(&b"fio"[..]))
        .count();
    assert!(
        within(fio_reads as u64, 20_000, 0.005),
        "{fio_reads} reads by fio"
    );
    for e in &reads {
        assert_eq!(e.bytes, 4096);
        assert_eq!(e.sector % 8, 0);
        assert!(e.sector < (128 << 20) / 512);
    }
    // pread64 is how psync reads.
    let pread = reads
        .iter()
        .filter(|e| e.syscall == Some(iodump_format::Syscall::PREAD64))
        .count();
    assert!(pread as f64 >= 0.99 * reads.len() as f64, "{pread} pread64");
}

/// The variants older kernels get, forced on this one: requests started at block_getrq
/// (before 6.5 there is no block_io_start; with the `none` scheduler no request passes
/// block_rq_insert), raw tracepoints (no bpf_rdonly_cast before 6.2) and the object without
/// compare-and-exchange (before 5.12). Each must record every request the device
/// completes, with its submitter and path, under both schedulers.
#[test]
fn older_kernel_variants_record_every_request() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("older_kernel_variants_record_every_request") {
        return;
    }
    let d = TempDir::new("variants");
    let lo = Loop::new(&d.0, 64);
    let sched = format!("/sys/block/{}/queue/scheduler", lo.name());
    let variants: [&[(&str, &str)]; 3] = [
        &[("IODUMP_FORCE_GETRQ", "1")],
        &[("IODUMP_FORCE_GETRQ", "1"), ("IODUMP_FORCE_RAW_TP", "1")],
        &[
            ("IODUMP_FORCE_GETRQ", "1"),
            ("IODUMP_FORCE_RAW_TP", "1"),
            ("IODUMP_FORCE_NO_ATOMICS", "1"),
        ],
    ];
    // --btf FILE (a kernel without /sys/kernel/btf/vmlinux): types from the file, raw
    // tracepoints only
    let trace = d.join("btf.iod");
    let out = run(bin()
        .args([
            "record",
            "-d",
            lo.name(),
            "--btf",
            "/sys/kernel/btf/vmlinux",
            "-o",
        ])
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", &format!("of={}", lo.node)])
        .args(["bs=4k", "count=100", "oflag=direct"]));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("block_rq_issue:raw_tp") && !err.contains("tp_btf"),
        "{err}"
    );
    let r = Reader::open(&trace).unwrap();
    let lost = r.lost_events();
    assert_eq!(
        events_on(&r, lo.name()).len() as u64 + lost,
        100,
        "every write recorded or counted lost: {err}"
    );
    assert!(lost <= 1, "{lost} of 100 writes lost: {err}");
    for scheduler in ["none", "mq-deadline"] {
        std::fs::write(&sched, scheduler).unwrap();
        for env in variants {
            let trace = d.join("v.iod");
            let before = stat_ios(lo.name());
            let mut cmd = bin();
            for (k, v) in env {
                cmd.env(k, v);
            }
            let out = run(cmd
                .args(["record", "-d", lo.name(), "--stats", "-o"])
                .arg(&trace)
                .args(["--", "dd", "if=/dev/zero", &format!("of={}", lo.node)])
                .args(["bs=4k", "count=800", "oflag=direct"]));
            ok(&out);
            let after = stat_ios(lo.name());
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("block_getrq:"), "{scheduler} {env:?}: {err}");
            assert!(!err.contains("warning"), "{scheduler} {env:?}: {err}");
            let r = Reader::open(&trace).unwrap();
            let ev = events_on(&r, lo.name());
            let device = (after.0 - before.0) + (after.1 - before.1);
            let lost = r.lost_events();
            // I/O in flight at the end (a probe of the device after dd) completes after
            // the recorder stopped: the device counts it, the trace neither records nor loses it.
            assert_accounted(
                ev.len() as u64 + in_flight_at_end(&err),
                lost,
                device,
                &format!("{scheduler} {env:?}: {err}"),
            );
            let writes: Vec<_> = ev.iter().filter(|e| e.op == Op::Write).collect();
            let bytes: u64 = writes.iter().map(|e| e.bytes as u64).sum();
            // each lost event is one of dd's 4 KiB writes
            assert_eq!(bytes + lost * 4096, 800 * 4096, "{scheduler} {env:?}");
            for e in &writes {
                assert_eq!(r.comm(e.pid, e.tid, 0), Some(&b"dd"[..]));
                assert!(e.queue_ns.is_some_and(|q| q <= e.latency_ns));
            }
            let variant = r
                .header()
                .metadata
                .iter()
                .find(|(k, _)| k == "iodump.variant")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            assert!(variant.contains("block_getrq"), "{variant}");
            if env.len() == 3 {
                assert!(variant.contains("no BPF compare-and-exchange"), "{variant}");
            }
        }
    }
}

/// A device added while the recorder runs (zram hot_add) is named in the trace's device
/// table, not left as a bare number.
#[test]
fn devices_added_while_recording_are_named() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("devices_added_while_recording_are_named") {
        return;
    }
    let d = TempDir::new("hotadd");
    let trace = d.join("hot.iod");
    let t = trace.to_str().unwrap().to_string();
    let (mut child, _err, _) = spawn_recording(bin().args(["record", "-o", &t, "-t", "30"]));
    let z = Zram::new("16M");
    let out = run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", z.node()))
        .args(["bs=4k", "count=100", "oflag=direct"]));
    ok(&out);
    // SAFETY: kill only signals the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success());
    let r = Reader::open(&trace).unwrap();
    let ev = events_on(&r, &z.name());
    assert_eq!(
        ev.len(),
        100,
        "every write to the new device, under its name"
    );
    drop(z);
}

#[test]
fn loop_device_is_request_based_with_queue_time() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("loop_device_is_request_based_with_queue_time") {
        return;
    }
    let d = TempDir::new("loop");
    let lo = Loop::new(&d.0, 64);
    let trace = d.join("loop.iod");
    let out = run(bin()
        .args(["record", "-d", lo.name(), "-o"])
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", &format!("of={}", lo.node)])
        .args(["bs=64k", "count=300", "oflag=direct"]));
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let r = Reader::open(&trace).unwrap();
    let ev = events_on(&r, lo.name());
    let writes: Vec<_> = ev.iter().filter(|e| e.op == Op::Write).collect();
    let bytes: u64 = writes.iter().map(|e| e.bytes as u64).sum();
    // Each of dd's writes is recorded once or counted as lost (the kernel skips a program
    // that a completion interrupts on its CPU; see assert_accounted), never missing.
    let lost = r.lost_events();
    assert_eq!(
        bytes + lost * 65536,
        300 * 65536,
        "all written bytes recorded once or counted lost: {err}"
    );
    assert!(lost <= 1, "{lost} of 300 writes lost: {err}");
    for e in &writes {
        let q = e.queue_ns.expect("request-based devices have a queue time");
        assert!(q <= e.latency_ns);
    }
}

/// A `REQ_FUA` write (O_DIRECT with O_DSYNC) on a device without FUA (loop) is completed
/// twice by the kernel: for its data, then again, with no bytes left, once the cache flush
/// the block layer sends after it is done. Its writer waits for both, so its event ends at
/// the second (its latency includes the flush), and neither is "a completion without a
/// start" (a database's every commit made the summary say that, as if I/O had been missed).
/// The kernel's own account agrees: `/sys/block/X/stat`'s write ticks, which it adds for such
/// a write at the end of its sequence, and for the empty `REQ_PREFLUSH` write each O_DSYNC
/// write on a device node is followed by (`blkdev_fsync`), match the sum of the latencies of
/// those writes and flushes (on this loop device over a file on the development VM's ext4,
/// each cache flush an fsync of the backing file: 0.95–0.97 of the ticks; 0.50–0.52 with the
/// previous recorder, which timed a FUA write to its data).
#[test]
fn fua_writes_on_a_device_without_fua_end_after_their_flush() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("fua_writes_on_a_device_without_fua_end_after_their_flush") {
        return;
    }
    let d = TempDir::new("fua");
    let lo = Loop::new(&d.0, 64);
    let sys = |f: &str| {
        std::fs::read_to_string(format!("/sys/block/{}/{f}", lo.name()))
            .unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    assert_eq!(
        sys("queue/fua").trim(),
        "0",
        "a loop device without FUA is what this test needs"
    );
    // The 8th field: milliseconds spent on writes, the sum of each write's time from its
    // request's start to its end.
    let write_ticks_ms = || -> u64 {
        sys("stat")
            .split_whitespace()
            .nth(7)
            .unwrap()
            .parse()
            .unwrap()
    };
    let trace = d.join("fua.iod");
    let before_ms = write_ticks_ms();
    let out = run(bin()
        .args(["record", "-d", lo.name(), "--stats", "-o"])
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", &format!("of={}", lo.node)])
        .args(["bs=4k", "count=200", "oflag=direct,dsync"]));
    ok(&out);
    let ticks_ms = write_ticks_ms() - before_ms;
    let err = String::from_utf8_lossy(&out.stderr);
    let r = Reader::open(&trace).unwrap();
    let ev = events_on(&r, lo.name());
    let fua_writes: Vec<_> = ev
        .iter()
        .filter(|e| e.op == Op::Write && e.bytes == 4096 && e.flags.contains(Flags::FUA))
        .collect();
    assert_eq!(fua_writes.len() as u64 + r.lost_events(), 200, "{err}");
    assert!(
        !err.contains("without a start"),
        "the ends of the writes' flush sequences were taken for I/O without a start: {err}"
    );
    // Each of them was followed to the end of its sequence (`--stats`).
    let followed: u64 = err
        .split_whitespace()
        .find_map(|w| w.strip_prefix("flush_followed="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no flush_followed counter: {err}"));
    assert_eq!(followed, fua_writes.len() as u64, "{err}");
    let latency_ms = ev
        .iter()
        .filter(|e| matches!(e.op, Op::Write | Op::Flush))
        .map(|e| e.latency_ns)
        .sum::<u64>() as f64
        / 1e6;
    // A write lost would take its time from the sum: only when none is.
    if r.lost_events() == 0 {
        let share = latency_ms / ticks_ms.max(1) as f64;
        assert!(
            (0.8..=1.1).contains(&share),
            "the writes' and flushes' latencies sum to {latency_ms:.1} ms, the kernel's write \
             ticks to {ticks_ms} ms ({share:.2}): the FUA writes timed to their data, not to \
             the end of their flush? {err}"
        );
    }
}

/// An I/O started and not completed when recording stops is reported as in flight (not
/// recorded), not counted as lost: the recorder reads the kernel's in-flight tables at the
/// end. The I/O: a write to a loop device whose backing file is on a frozen file system,
/// which waits until the file system is thawed.
#[test]
fn io_in_flight_when_recording_stops_is_reported_not_lost() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("io_in_flight_when_recording_stops_is_reported_not_lost") {
        return;
    }
    let fs = Ext4OnZram::new("inflight");
    let lo = Loop::new(&fs.mnt, 16);
    let d = TempDir::new("inflight");
    let trace = d.join("q.iod");
    let t = trace.to_str().unwrap().to_string();
    let (mut child, mut stderr, mut err) =
        spawn_recording(bin().args(["record", "-d", lo.name(), "-t", "3", "-o", &t]));
    // thawed however the test ends, before the loop device goes
    let frozen = Frozen::new(&fs.mnt);
    let mut dd = lo.write_one_block();
    let st = child.wait().unwrap();
    let hung_to_the_end = dd.try_wait().unwrap().is_none();
    drop(frozen);
    assert!(dd.wait().unwrap().success());
    std::io::Read::read_to_string(&mut stderr, &mut err).unwrap();
    assert!(st.success(), "{err}");
    assert!(hung_to_the_end, "the write did not hang: {err}");
    assert!(
        err.contains("; 1 I/O still in flight at the end (not recorded)"),
        "{err}"
    );
    let r = Reader::open(&trace).unwrap();
    assert_eq!(r.lost_events(), 0, "the I/O in flight is not a loss: {err}");
}

#[test]
fn partitions_are_named_and_sectors_are_relative() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("partitions_are_named_and_sectors_are_relative") {
        return;
    }
    let d = TempDir::new("part");
    let lo = Loop::partitioned(&d.0, 64);
    let part = format!("{}p1", lo.node);
    assert!(Path::new(&part).exists(), "{part} did not appear");
    let trace = d.join("p.iod");
    // Record the whole disk: its partition is included, and events name the partition.
    let out = run(bin()
        .args(["record", "--stats", "-d", lo.name(), "-o"])
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", &format!("of={part}")])
        .args(["bs=4k", "count=100", "seek=10", "oflag=direct"]));
    ok(&out);
    let r = Reader::open(&trace).unwrap();
    let pname = format!("{}p1", lo.name());
    let ev = events_on(&r, &pname);
    // Every write is an event on the partition or a counted loss (seen once in CI: 99
    // events; the message shows the recorder's counters and where each event went).
    let lost = r.lost_events();
    let why = || {
        let all: Vec<_> = r.events().map(|e| (e.dev, e.sector, e.bytes)).collect();
        format!(
            "{} events on {pname}, {lost} lost\n{}\nall events (dev, sector, bytes): {all:?}",
            ev.len(),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert_eq!(ev.len() as u64 + lost, 100, "{}", why());
    assert!(ev.len() >= 98, "{}", why());
    let p = r.tables().devices().find(|d| d.name == pname).unwrap();
    assert_eq!(p.start_sector, 2048);
    assert!(p.partition_of.is_some());
    let mut sectors: Vec<u64> = ev.iter().map(|e| e.sector).collect();
    sectors.sort_unstable();
    assert_eq!(
        sectors[0], 80,
        "sector relative to the partition (seek=10 blocks of 4k)"
    );
    assert!(
        events_on(&r, lo.name()).is_empty(),
        "no event on the whole disk"
    );
}

#[test]
fn merged_buffered_writes_match_the_device_count() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("merged_buffered_writes_match_the_device_count") {
        return;
    }
    // Buffered writes to a request-based device are merged by the block layer: every
    // completed request must be one event, and no merged bio may appear as its own event.
    let d = TempDir::new("merge");
    let lo = Loop::new(&d.0, 128);
    let trace = d.join("m.iod");
    let before = stat_ios(lo.name());
    let out = run(bin()
        .args(["record", "-d", lo.name(), "--stats", "-o"])
        .arg(&trace)
        .args(["--", "dd", "if=/dev/zero", &format!("of={}", lo.node)])
        .args(["bs=4k", "count=20000", "conv=fsync"]));
    ok(&out);
    let after = stat_ios(lo.name());
    let r = Reader::open(&trace).unwrap();
    let all = events_on(&r, lo.name());
    let writes: Vec<_> = all.iter().filter(|e| e.op == Op::Write).collect();
    // fsync ends with an empty write carrying REQ_PREFLUSH, which the device counts as a
    // write and iodump records as a flush.
    let flushes = all.iter().filter(|e| e.op == Op::Flush).count();
    let dev_writes = after.1 - before.1;
    // Every completed request is an event, or counted as lost (never silently missing).
    let lost = r.lost_events();
    assert!(
        within((writes.len() + flushes) as u64 + lost, dev_writes, 0.005),
        "{} write and {flushes} flush events, {lost} lost, vs {dev_writes} completed writes",
        writes.len()
    );
    let bytes: u64 = writes.iter().map(|e| e.bytes as u64).sum();
    let total = 20000 * 4096;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if lost == 0 {
        assert_eq!(bytes, total, "every byte written once\n{stderr}");
    } else {
        // A counted loss (an in-flight entry evicted, a nested program skipped) takes its
        // request's bytes with it: at most one largest request each.
        let max_req: u64 =
            std::fs::read_to_string(format!("/sys/block/{}/queue/max_sectors_kb", lo.name()))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(1280)
                * 1024;
        assert!(
            bytes < total && total - bytes <= lost * max_req,
            "{bytes} bytes recorded of {total}, {lost} lost events of at most {max_req} bytes\n{stderr}"
        );
    }
    assert!(
        writes.len() < 20000,
        "writes were merged ({})",
        writes.len()
    );
}

#[test]
fn sampling_and_filters_run_in_the_kernel() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("sampling_and_filters_run_in_the_kernel") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("filters");
    let dd = |count: u32, bs: &str| -> Vec<String> {
        vec![
            "dd".into(),
            "if=/dev/zero".into(),
            format!("of={}", z.node()),
            format!("bs={bs}"),
            format!("count={count}"),
            "oflag=direct".into(),
        ]
    };
    // 1 in 10.
    let t = d.join("sample.iod");
    ok(&run(bin()
        .args(["record", "-d", &z.name(), "--sample", "1/10", "-o"])
        .arg(&t)
        .arg("--")
        .args(dd(10_000, "4k"))));
    let n = events_on(&Reader::open(&t).unwrap(), &z.name()).len();
    assert!((900..=1100).contains(&n), "sampled {n} of 10000");
    // An op filter that excludes writes, and a comm filter that excludes dd.
    for (flag, val) in [("--ops", "read"), ("--comm", "nosuchcomm")] {
        let t = d.join("none.iod");
        ok(&run(bin()
            .args(["record", "-d", &z.name(), flag, val, "-o"])
            .arg(&t)
            .arg("--")
            .args(dd(500, "4k"))));
        let n = events_on(&Reader::open(&t).unwrap(), &z.name()).len();
        assert_eq!(n, 0, "{flag} {val}");
    }
    // A comm filter that keeps dd, a size filter that keeps only large writes.
    let t = d.join("dd.iod");
    ok(&run(bin()
        .args(["record", "-d", &z.name(), "--comm", "dd", "--min-bytes", "65536", "-o"])
        .arg(&t)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "dd if=/dev/zero of={0} bs=4k count=100 oflag=direct 2>/dev/null && dd if=/dev/zero of={0} bs=128k count=50 oflag=direct 2>/dev/null",
            z.node()
        ))));
    let ev = events_on(&Reader::open(&t).unwrap(), &z.name());
    assert_eq!(ev.len(), 50);
    assert!(ev.iter().all(|e| e.bytes == 131072));
    // The same with an expression (the original's example plus a comm glob).
    let t = d.join("expr.iod");
    ok(&run(bin()
        .args(["record", "-d", &z.name(), "-f", "iosize > 65536 && rw == W && comm =~ 'd*'", "-o"])
        .arg(&t)
        .args(["--", "sh", "-c"])
        .arg(format!(
            "dd if=/dev/zero of={0} bs=4k count=100 oflag=direct 2>/dev/null && dd if=/dev/zero of={0} bs=128k count=50 oflag=direct 2>/dev/null && dd if={0} of=/dev/null bs=128k count=10 iflag=direct 2>/dev/null",
            z.node()
        ))));
    let ev = events_on(&Reader::open(&t).unwrap(), &z.name());
    assert_eq!(ev.len(), 50);
    assert!(ev.iter().all(|e| e.bytes == 131072 && e.op == Op::Write));
}

#[test]
fn cgroup_filter_keeps_only_that_cgroup() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("cgroup_filter_keeps_only_that_cgroup") {
        return;
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let Some(root) = info
        .lines()
        .find(|l| l.contains(" - cgroup2 "))
        .map(|l| l.split(' ').nth(4).unwrap().to_string())
    else {
        panic!("no cgroup2 mount");
    };
    let cg = PathBuf::from(&root).join(format!("iodump-test-{}", std::process::id()));
    std::fs::create_dir_all(&cg).unwrap();
    let z = Zram::new("64M");
    let d = TempDir::new("cgroup");
    let t = d.join("cg.iod");
    let rel = format!("/{}", cg.file_name().unwrap().to_string_lossy());
    // 40 writes inside the cgroup, 60 outside.
    let script = format!(
        "sh -c 'echo $$ > {0}/cgroup.procs && exec dd if=/dev/zero of={1} bs=4k count=40 oflag=direct 2>/dev/null' && dd if=/dev/zero of={1} bs=4k count=60 seek=100 oflag=direct 2>/dev/null",
        cg.display(),
        z.node()
    );
    let out = run(bin()
        .args(["record", "-d", &z.name(), "--cgroup", &rel, "-o"])
        .arg(&t)
        .args(["--", "sh", "-c", &script]));
    let _ = std::fs::remove_dir(&cg);
    ok(&out);
    let ev = events_on(&Reader::open(&t).unwrap(), &z.name());
    assert_eq!(ev.len(), 40);
    assert!(ev.iter().all(|e| e.sector < 100 * 8));
}

#[test]
fn pid_filter_and_json_output() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("pid_filter_and_json_output") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("pid");
    let go = d.join("go");
    // A writer started before the recorder, whose pid we pass with --pid, and another one
    // that must not be recorded; both wait for the `go` file.
    let writer = |count: u32, seek: u32| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while [ ! -e {} ]; do sleep 0.02; done; exec dd if=/dev/zero of={} bs=4k count={count} seek={seek} oflag=direct 2>/dev/null",
                go.display(),
                z.node()
            ))
            .spawn()
            .unwrap()
    };
    let target = writer(77, 0);
    let other = writer(55, 1000);
    let pid = target.id();
    let rec = Recorder::start(&[
        "record",
        "-d",
        &z.name(),
        "--pid",
        &pid.to_string(),
        "--print",
        "json",
    ]);
    std::fs::write(&go, b"").unwrap();
    for mut c in [target, other] {
        assert!(c.wait().unwrap().success());
    }
    let (st, text, err) = rec.stop();
    assert!(st.success(), "{err}");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(rows.len(), 77, "{text}");
    for r in &rows {
        assert_eq!(r["pid"], pid);
        assert_eq!(r["comm"], "dd");
        assert_eq!(r["op"], "write");
        assert_eq!(r["bytes"], 4096);
        assert!(r["queue_ns"].is_null());
        assert!(r["timestamp"].as_str().unwrap().ends_with('Z'));
    }
}

#[test]
fn writeback_names_the_process_that_dirtied_the_pages() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("writeback_names_the_process_that_dirtied_the_pages") {
        return;
    }
    let z = Zram::new("256M");
    let d = TempDir::new("wb");
    let mnt = d.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let mk = Command::new("mkfs.ext4")
        .args(["-q", "-F", &z.node()])
        .status()
        .expect("mkfs.ext4");
    assert!(mk.success());
    let m = Command::new("mount")
        .arg(z.node())
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(m.success());
    struct Umount(PathBuf);
    impl Drop for Umount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _u = Umount(mnt.clone());
    let t = d.join("wb.iod");
    // dd dirties pages and exits; `sync` makes the flusher write them back.
    let script = format!(
        "dd if=/dev/urandom of={}/data bs=1M count=16 2>/dev/null & wait $!; echo $! > {}/dd.pid; sync",
        mnt.display(),
        d.0.display()
    );
    let out = run(bin()
        .args(["record", "-d", &z.name(), "-o"])
        .arg(&t)
        .args(["--", "sh", "-c", &script]));
    ok(&out);
    let dd_pid: u32 = std::fs::read_to_string(d.join("dd.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let r = Reader::open(&t).unwrap();
    let writes: Vec<_> = events_on(&r, &z.name())
        .into_iter()
        .filter(|e| e.op == Op::Write && e.dirtier_pid == Some(dd_pid))
        .collect();
    let bytes: u64 = writes.iter().map(|e| e.bytes as u64).sum();
    assert!(bytes >= 16 << 20, "{bytes} bytes written back for dd");
    // Written back by someone other than dd (a flusher kworker or sync itself).
    assert!(writes.iter().any(|e| e.pid != dd_pid));
    let kworker_or_sync = writes
        .iter()
        .filter(|e| {
            let c = r.comm(e.pid, e.tid, 0).unwrap_or(b"");
            c.starts_with(b"kworker") || c == b"sync"
        })
        .count();
    assert!(kworker_or_sync > 0);
}

/// `iodump record | head`: once the reader of its lines has gone, a recorder that makes
/// nothing else stops by itself (exit 0, its summary on stderr), as biosnoop would.
#[test]
fn a_printing_recorder_stops_when_its_reader_goes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("a_printing_recorder_stops_when_its_reader_goes") {
        return;
    }
    let z = Zram::new("64M");
    let script = format!(
        "{} record -d {} | head -3 >/dev/null",
        env!("CARGO_BIN_EXE_iodump"),
        z.name()
    );
    let mut pipeline = Command::new("sh")
        .args(["-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let started = std::time::Instant::now();
    let mut exited = false;
    while started.elapsed() < std::time::Duration::from_secs(15) {
        let _ = Command::new("dd")
            .arg("if=/dev/zero")
            .arg(format!("of={}", z.node()))
            .args(["bs=4k", "count=100", "oflag=direct", "status=none"])
            .status();
        if pipeline.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    if !exited {
        // Stopped here, its stderr read below.
        let _ = Command::new("pkill").args(["-INT", "-f", &script]).status();
    }
    let st = pipeline.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(pipeline.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(exited, "still recording 15 s after head left: {err}");
    assert!(st.success(), "{err}");
    assert!(err.contains("iodump: recorded"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// I/O that runs on while the recorder starts is either before the recording (not seen) or
/// in it, never lost: every program is loaded (verified) before any is attached, and the
/// completions are attached before the starts. Attached one by one as they were verified,
/// starts first, one dd's 100 writes of five were tracked at their start and lost.
#[test]
fn io_while_the_recorder_starts_is_not_lost() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("io_while_the_recorder_starts_is_not_lost") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("startup");
    let t = d.join("startup.iod");
    // 4 KiB direct writes without a pause from before the recorder starts to after it stops
    // (however long it takes to start: a busy host, a debug build).
    let stop = d.join("stop");
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "end=$(($(date +%s) + 300)); while [ ! -e {} ] && [ $(date +%s) -lt $end ]; do \
             dd if=/dev/zero of={} bs=4k count=100 oflag=direct status=none; done",
            stop.display(),
            z.node()
        ))
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = run(bin()
        .args(["record", "-d", &z.name(), "-t", "2", "-o"])
        .arg(&t));
    std::fs::write(&stop, b"").unwrap();
    let _ = writer.wait();
    ok(&out);
    let r = Reader::open(&t).unwrap();
    let recorded = events_on(&r, &z.name()).len();
    assert!(recorded > 100, "{recorded} recorded");
    assert_eq!(
        r.lost_events(),
        0,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn losses_are_counted_never_silent() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("losses_are_counted_never_silent") {
        return;
    }
    let z = Zram::new("128M");
    let d = TempDir::new("loss");
    let t = d.join("loss.iod");
    let before = stat_ios(&z.name());
    // A one-page ring buffer and a consumer that is stopped (SIGSTOP) while dd writes 2,000
    // blocks: the ring overflows whatever the wake-up policy.
    let rec = Recorder::start(&[
        "record",
        "-d",
        &z.name(),
        "--buffer-size",
        "4096",
        "-o",
        t.to_str().unwrap(),
    ]);
    rec.signal(libc::SIGSTOP);
    let dd = run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", z.node()))
        .args(["bs=4k", "count=2000", "oflag=direct"]));
    rec.signal(libc::SIGCONT);
    ok(&dd);
    let (st, _, stderr) = rec.stop();
    assert!(st.success(), "{stderr}");
    let after = stat_ios(&z.name());
    let r = Reader::open(&t).unwrap();
    let recorded = events_on(&r, &z.name()).len() as u64;
    let lost = r.lost_events();
    assert!(
        lost > 0,
        "expected losses with a 4 KiB buffer and a stopped consumer"
    );
    assert_eq!(
        recorded + lost,
        after.1 - before.1,
        "recorded {recorded} + lost {lost}"
    );
    assert!(stderr.contains(&format!("lost {lost}")), "{stderr}");
}

#[test]
fn command_status_signals_and_printing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("command_status_signals_and_printing") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("cmd");
    // The command's exit status becomes ours and is stored.
    let t = d.join("exit.iod");
    let out = run(bin()
        .args(["record", "-d", &z.name(), "-o"])
        .arg(&t)
        .args(["--", "sh", "-c", "exit 3"]));
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        Reader::open(&t).unwrap().end().unwrap().command_exit_status,
        Some(3)
    );
    // SIGINT stops cleanly: the file is finished and holds what was recorded.
    let t = d.join("sigint.iod");
    let rec = Recorder::start(&["record", "-d", &z.name(), "-o", t.to_str().unwrap()]);
    let dd = Command::new("dd")
        .args(["if=/dev/zero", &format!("of={}", z.node())])
        .args(["bs=4k", "count=700", "oflag=direct"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(dd.success());
    let (st, _, err) = rec.stop();
    assert!(st.success(), "{err}");
    assert!(err.contains("recorded 700 events"), "{err}");
    let r = Reader::open(&t).unwrap();
    assert!(r.end().is_some() && r.has_footer());
    assert_eq!(events_on(&r, &z.name()).len(), 700);
    // CSV on stdout, the original's columns first.
    let out = run(bin()
        .args(["record", "-d", &z.name(), "--print", "csv"])
        .args(["--", "dd", "if=/dev/zero", &format!("of={}", z.node())])
        .args(["bs=8k", "count=123", "oflag=direct"]));
    ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("timestamp,pid,comm,iosize,rw,lba,path,"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 123);
    for row in rows {
        let f: Vec<&str> = row.split(',').collect();
        assert_eq!((f[2], f[3], f[4]), ("dd", "8192", "W"), "{row}");
    }
}

#[test]
fn events_are_printed_while_recording_not_only_at_the_end() {
    use std::io::BufRead;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("events_are_printed_while_recording_not_only_at_the_end") {
        return;
    }
    let z = Zram::new("64M");
    let (mut child, mut err, _) =
        spawn_recording(bin().args(["record", "-d", &z.name(), "--stats"]));
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let reader = std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Three reads, far fewer than a batch: they must come out while the recorder runs
    // (the periodic flush of partial batches), not only when it stops.
    ok(&run(Command::new("dd")
        .arg(format!("if={}", z.node()))
        .args([
            "of=/dev/null",
            "bs=4k",
            "count=3",
            "skip=10",
            "iflag=direct",
        ])));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(" dd ") => seen.push(l),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let st = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    reader.join().unwrap();
    assert!(st.success(), "{rest}");
    assert_eq!(seen.len(), 3, "printed before the stop: {seen:?}\n{rest}");
    for (l, sector) in seen.iter().zip(["80", "88", "96"]) {
        assert!(l.split_whitespace().any(|f| f == sector), "{l}");
    }
    // ... and they went through a batch (a batch record was sent), so this exercised the
    // flush of a partial batch rather than single-event records.
    let batches: u64 = rest
        .split_whitespace()
        .find_map(|w| w.strip_prefix("batches="))
        .unwrap_or_else(|| panic!("no batches counter: {rest}"))
        .parse()
        .unwrap();
    assert!(batches >= 1, "{rest}");
}

#[test]
fn bad_arguments_give_one_line_errors() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("bad_arguments_give_one_line_errors") {
        return;
    }
    let one_line = |out: &Output| {
        let s = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(s.lines().count(), 1, "{s}");
        assert_eq!(out.status.code(), Some(1), "{s}");
        s
    };
    let out = run(bin().args(["record", "-d", "nosuchdisk0", "-t", "1"]));
    assert!(one_line(&out).contains("unknown block device 'nosuchdisk0'"));
    let out = run(bin().args(["record", "-o", "/nonexistent-dir/x.iod", "-t", "1"]));
    assert!(one_line(&out).contains("/nonexistent-dir/x.iod"));
    let out = run(bin().args(["record", "--sample", "0%", "-t", "1"]));
    usage_error(&out, "--sample 0%");
    let out = run(bin().args(["record", "-t", "1", "--", "/nonexistent/program"]));
    assert!(one_line(&out).contains("/nonexistent/program"));
    // --btf: a missing file, a file that is not BTF
    let out = run(bin().args(["record", "-t", "1", "--btf", "/nonexistent/vmlinux"]));
    assert!(one_line(&out).contains("/nonexistent/vmlinux"));
    let out = run(bin().args(["record", "-t", "1", "--btf", "/proc/self/status"]));
    let s = one_line(&out);
    assert!(s.contains("/proc/self/status") && s.contains("BTF"), "{s}");
    // Without privilege: a clear line, no trace file left half-made by a panic.
    if Path::new("/usr/bin/setpriv").exists() {
        let d = TempDir::new("priv");
        std::fs::set_permissions(&d.0, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        let out = Command::new("/usr/bin/setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(env!("CARGO_BIN_EXE_iodump"))
            .args(["record", "-t", "1", "-o"])
            .arg(d.join("x.iod"))
            .output()
            .unwrap();
        let s = one_line(&out);
        assert!(s.contains("permission denied") || s.contains("BTF"), "{s}");
    }
}

/// Each process's command line is stored with its process entry (read from /proc when the
/// recorder first sees it), again after an exec that changes its comm, and printed as the
/// last CSV column; `analyze --top-procs` and `export` show it.
#[test]
fn command_lines_are_recorded_and_read_again_after_exec() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("command_lines_are_recorded_and_read_again_after_exec") {
        return;
    }
    let z = Zram::new("64M");
    let d = TempDir::new("argv");
    // python3 writes, then execs itself under another name (a link: the comm is the name
    // exec'd) with other arguments and writes again; each waits a moment so that the
    // recorder reads its command line while it runs.
    // Both names link to the interpreter itself (not a wrapper such as pyenv's shim, which
    // would exec once more).
    let python = String::from_utf8(
        Command::new("python3")
            .args([
                "-c",
                "import os, sys; print(os.path.realpath(sys.executable))",
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let (start, again) = (d.join("iodump-argv"), d.join("iodump-exec"));
    for l in [&start, &again] {
        std::os::unix::fs::symlink(python.trim(), l).unwrap();
    }
    // The first waits past the recorder's flush (once a second), so that its I/O is in a
    // segment before the second program's process entry (a process entry applies from the
    // next segment on).
    let io = |first: u32, sleep_s: f64| {
        format!(
            "import mmap, os, sys, time\n\
             fd = os.open('{}', os.O_WRONLY | os.O_DIRECT)\n\
             b = mmap.mmap(-1, 4096)\n\
             for i in range(10): os.pwrite(fd, b, 4096 * ({first} + i))\n\
             time.sleep({sleep_s})\n",
            z.node()
        )
    };
    let second = io(100, 0.7);
    let first = format!(
        "{}os.execv('{}', ['{}', '-c', sys.argv[1], 'second', 'run'])\n",
        io(0, 1.6),
        again.display(),
        again.display()
    );
    let trace = d.join("argv.iod");
    let csv = d.join("live.csv");
    let rec = Recorder::start(&["record", "-d", &z.name(), "--print", "csv"]);
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} record -d {} -o {} -- {} -c \"$1\" \"$2\" first",
            env!("CARGO_BIN_EXE_iodump"),
            z.name(),
            trace.display(),
            start.display()
        ))
        .args(["sh", &first, &second])
        .status()
        .unwrap();
    assert!(st.success());
    let (st, text, err) = rec.stop();
    assert!(st.success(), "{err}");
    std::fs::write(&csv, &text).unwrap();
    let want_first = format!("{} -c {first} {second} first", start.display());
    let want_second = format!("{} -c {second} second run", again.display());
    // Command lines are kept to 256 bytes.
    let cut = |s: &str| -> String {
        let b = &s.as_bytes()[..s.len().min(256)];
        String::from_utf8_lossy(b).trim_end().to_string()
    };
    let r = Reader::open(&trace).unwrap();
    let ev = events_on(&r, &z.name());
    assert_eq!(ev.len(), 20, "events recorded");
    // The latest entry of the thread: after the exec.
    let entries: Vec<_> = r
        .tables()
        .processes()
        .filter(|p| p.comm == b"iodump-exec")
        .collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        String::from_utf8_lossy(entries[0].args.as_deref().unwrap()),
        cut(&want_second)
    );
    // Both command lines, each on the I/O of its program.
    let out = run(bin()
        .arg("export")
        .arg(&trace)
        .args(["--format", "jsonl", "-o"])
        .arg(d.join("io.jsonl")));
    ok(&out);
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(d.join("io.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|r: &serde_json::Value| r["dev"] == z_dev(&z))
        .collect();
    let args: Vec<&str> = rows.iter().map(|r| r["args"].as_str().unwrap()).collect();
    let (a, b) = (cut(&want_first), cut(&want_second));
    assert_eq!(args.iter().filter(|x| **x == a).count(), 10, "{args:?}");
    assert_eq!(args.iter().filter(|x| **x == b).count(), 10, "{args:?}");
    // The live CSV: args is the last column, quoted as CSV (the script has newlines).
    let header = text.lines().next().unwrap();
    assert!(
        header.ends_with(",dirtier_pid,upper_dev,upper_timestamp_ns,args"),
        "{header}"
    );
    let quoted = |s: &str| format!(",\"{}\"\n", s.replace('"', "\"\""));
    assert_eq!(text.matches(&quoted(&a)).count(), 10, "{text}");
    assert_eq!(text.matches(&quoted(&b)).count(), 10, "{text}");
    // --top-procs: its command line last. A thread is named by its latest entry there (as
    // its comm always was), so the I/O before the exec counts under the program it became.
    let out = run(bin()
        .arg("analyze")
        .arg(&trace)
        .args(["--top-procs", "--format", "json"]));
    ok(&out);
    let procs: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = procs
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["comm"] == "iodump-exec")
        .unwrap_or_else(|| panic!("{procs}"));
    assert_eq!(row["args"], b);
    assert_eq!(row["ios"], 20);
}

/// The `MAJ:MIN` of a zram device, as exports write `dev`.
fn z_dev(z: &Zram) -> String {
    std::fs::read_to_string(format!("/sys/block/{}/dev", z.name()))
        .unwrap()
        .trim()
        .to_string()
}
