//! End-to-end tests of file paths and syscalls on ext4, xfs and btrfs made on zram devices in
//! the test. Root and BPF needed: they skip without, unless `IODUMP_REQUIRE_BPF=1` (CI).

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use iodump_format::{DevT, Event, Op, PathKind, Reader, Syscall};

mod common;

use common::ok;

use common::bpf_available;

static SERIAL: Mutex<()> = Mutex::new(());

fn sh(script: &str) {
    let st = Command::new("sh").arg("-c").arg(script).status().unwrap();
    assert!(st.success(), "failed: {script}");
}

/// A filesystem on a zram device, mounted in a temporary directory; undone on drop.
struct Fs {
    zram: u32,
    mnt: PathBuf,
    dir: PathBuf,
}

impl Fs {
    fn new(kind: &str) -> Fs {
        let zram: u32 = std::fs::read_to_string("/sys/class/zram-control/hot_add")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        std::fs::write(format!("/sys/block/zram{zram}/disksize"), "512M").unwrap();
        let dir =
            std::env::temp_dir().join(format!("iodump-paths-{kind}-{}-{zram}", std::process::id()));
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let node = format!("/dev/zram{zram}");
        let mkfs = match kind {
            "ext4" => vec!["mkfs.ext4", "-q", "-F", &node],
            "xfs" => vec!["mkfs.xfs", "-q", "-f", &node],
            _ => vec!["mkfs.btrfs", "-q", "-f", &node],
        };
        let st = Command::new(mkfs[0])
            .args(&mkfs[1..])
            .stdout(Stdio::null())
            .status();
        assert!(st.expect(mkfs[0]).success(), "{kind}: mkfs failed");
        let st = Command::new("mount").arg(&node).arg(&mnt).status().unwrap();
        assert!(st.success(), "{kind}: mount failed");
        Fs { zram, mnt, dir }
    }
    fn dev(&self) -> String {
        format!("zram{}", self.zram)
    }
    fn path(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }
}

impl Drop for Fs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-R")
            .arg(&self.mnt)
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::write(format!("/sys/block/zram{}/reset", self.zram), "1");
        let _ = std::fs::write("/sys/class/zram-control/hot_remove", self.zram.to_string());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A file of `mib` MiB of random bytes at `rel` in the filesystem (directories created),
/// written back to the device.
fn random_file(fs: &Fs, rel: &str, mib: u32) -> PathBuf {
    let f = fs.path(rel);
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    sh(&format!(
        "dd if=/dev/urandom of={} bs=1M count={mib} status=none; sync",
        f.display()
    ));
    f
}

fn drop_caches() {
    sh("sync; echo 3 > /proc/sys/vm/drop_caches");
}

/// Records `script` (run by sh) on the filesystem's device; returns the reader.
fn record(fs: &Fs, name: &str, script: &str) -> Reader {
    let t = fs.dir.join(format!("{name}.iod"));
    let out = Command::new(env!("CARGO_BIN_EXE_iodump"))
        .args(["record", "-d", &fs.dev(), "-o"])
        .arg(&t)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{err}");
    Reader::open(&t).unwrap()
}

fn path_of<'a>(r: &'a Reader, e: &Event) -> &'a [u8] {
    r.tables()
        .path(e.path_id)
        .map_or(b"", |p| p.path.as_slice())
}

fn by_comm<'a>(r: &'a Reader, comm: &'a [u8]) -> impl Iterator<Item = Event> + 'a {
    r.events()
        .filter(move |e| r.comm(e.pid, e.tid, 0) == Some(comm))
}

const FILESYSTEMS: [&str; 3] = ["ext4", "xfs", "btrfs"];

#[test]
fn buffered_reads_have_the_exact_path() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("buffered_reads_have_the_exact_path") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let f = random_file(&fs, "data/table.ibd", 8);
        drop_caches();
        let r = record(&fs, "read", &format!("cat {} > /dev/null", f.display()));
        // cat also reads metadata (inodes, extent trees): those are labelled, not files.
        let reads: Vec<Event> = by_comm(&r, b"cat")
            .filter(|e| {
                e.op == Op::Read
                    && r.tables()
                        .path(e.path_id)
                        .is_some_and(|p| p.kind == PathKind::File)
            })
            .collect();
        let bytes: u64 = reads.iter().map(|e| e.bytes as u64).sum();
        assert!(bytes >= 8 << 20, "{kind}: {bytes} bytes read by cat");
        for e in &reads {
            assert_eq!(path_of(&r, e), f.as_os_str().as_bytes(), "{kind}");
            assert_eq!(e.syscall, Some(Syscall::READ), "{kind}");
        }
        let s = iodump_format::summary::summarize(&r);
        assert!(s.events_with_file > 0);
    }
}

#[test]
fn writeback_and_fsync_writes_have_path_and_dirtier() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("writeback_and_fsync_writes_have_path_and_dirtier") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let wb = fs.path("wb.log");
        let fsynced = fs.path("fsynced.dat");
        let pidfile = fs.dir.join("dd.pid");
        let r = record(
            &fs,
            "write",
            &format!(
                "dd if=/dev/urandom of={} bs=1M count=8 status=none & echo $! > {}; wait; \
                 dd if=/dev/urandom of={} bs=1M count=4 conv=fsync status=none; sync",
                wb.display(),
                pidfile.display(),
                fsynced.display()
            ),
        );
        let dd_pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let wb_bytes: u64 = r
            .events()
            .filter(|e| e.op == Op::Write && path_of(&r, e) == wb.as_os_str().as_bytes())
            .map(|e| {
                assert_eq!(
                    e.dirtier_pid,
                    Some(dd_pid),
                    "{kind}: dirtier of {}",
                    wb.display()
                );
                e.bytes as u64
            })
            .sum();
        assert!(
            wb_bytes >= 8 << 20,
            "{kind}: {wb_bytes} bytes written back to wb.log"
        );
        let fs_writes: Vec<Event> = r
            .events()
            .filter(|e| e.op == Op::Write && path_of(&r, e) == fsynced.as_os_str().as_bytes())
            .collect();
        let fs_bytes: u64 = fs_writes.iter().map(|e| e.bytes as u64).sum();
        assert!(
            fs_bytes >= 4 << 20,
            "{kind}: {fs_bytes} bytes of the fsync'd file"
        );
        assert!(
            fs_writes.iter().any(|e| e.syscall == Some(Syscall::FSYNC)),
            "{kind}: no write attributed to fsync: {:?}",
            fs_writes.iter().map(|e| e.syscall).collect::<Vec<_>>()
        );
    }
}

#[test]
fn direct_io_with_fio_engines() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("direct_io_with_fio_engines") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let f = random_file(&fs, "fio/job.0", 32);
        // io_uring's SQPOLL thread (iou-sqp-*) submits on its own: io_uring's I/O all the
        // same (its registers are not a user's: it was `page_fault`).
        for (engine, extra, sc) in [
            ("psync", "", Syscall::PREAD64),
            ("libaio", "", Syscall::IO_SUBMIT),
            ("io_uring", "", Syscall::IO_URING_ENTER),
            ("io_uring", "--sqthread_poll=1", Syscall::IO_URING_ENTER),
        ] {
            let r = record(
                &fs,
                engine,
                &format!(
                    "fio --name=d --filename={} --rw=randread --bs=4k --direct=1 --ioengine={engine} \
                     {extra} --iodepth=8 --number_ios=2000 --size=32M --output=/dev/null",
                    f.display()
                ),
            );
            let reads: Vec<Event> = r
                .events()
                .filter(|e| e.op == Op::Read && e.bytes == 4096)
                .collect();
            let engine = format!("{engine}{extra}");
            assert!(
                reads.len() >= 2000,
                "{kind}/{engine}: {} reads",
                reads.len()
            );
            let with_path = reads
                .iter()
                .filter(|e| path_of(&r, e) == f.as_os_str().as_bytes())
                .count();
            assert_eq!(
                with_path,
                reads.len(),
                "{kind}/{engine}: reads with the file's path"
            );
            let with_sc = reads.iter().filter(|e| e.syscall == Some(sc)).count();
            assert!(
                with_sc * 100 >= reads.len() * 95,
                "{kind}/{engine}: {with_sc} of {} reads attributed to {sc}",
                reads.len()
            );
        }
    }
}

#[test]
fn mmap_reads_are_page_faults_with_a_path() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("mmap_reads_are_page_faults_with_a_path") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let f = random_file(&fs, "mapped.bin", 4);
        drop_caches();
        let r = record(
        &fs,
        "mmap",
        &format!(
            "python3 -c 'import mmap,sys\nf=open(sys.argv[1],\"rb\")\nm=mmap.mmap(f.fileno(),0,prot=mmap.PROT_READ)\ns=0\nfor i in range(0,len(m),4096): s+=m[i]\n' {}",
            f.display()
        ),
    );
        let reads: Vec<Event> = r
            .events()
            .filter(|e| e.op == Op::Read && path_of(&r, e) == f.as_os_str().as_bytes())
            .collect();
        assert!(!reads.is_empty());
        assert!(
            reads.iter().any(|e| e.syscall == Some(Syscall::PAGE_FAULT)),
            "{kind}: {:?}",
            reads.iter().map(|e| e.syscall).collect::<Vec<_>>()
        );
    }
}

#[test]
fn nested_mounts_and_awkward_names() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("nested_mounts_and_awkward_names") {
        return;
    }
    let outer = Fs::new("ext4");
    let inner = Fs::new("xfs");
    // Move the inner filesystem inside the outer one (mounted once, so its path is unique).
    let st = Command::new("umount").arg(&inner.mnt).status().unwrap();
    assert!(st.success());
    let nested = outer.path("srv/nested mnt");
    std::fs::create_dir_all(&nested).unwrap();
    let st = Command::new("mount")
        .arg(format!("/dev/zram{}", inner.zram))
        .arg(&nested)
        .status()
        .unwrap();
    assert!(st.success());
    let names: Vec<Vec<u8>> = vec![
        b"with space.dat".to_vec(),
        b"comma,quote\"name.csv".to_vec(),
        b"new\nline".to_vec(),
        b"latin1-\xe9t\xe9".to_vec(),
    ];
    let mut files = Vec::new();
    for n in &names {
        let mut p = nested.as_os_str().as_bytes().to_vec();
        p.push(b'/');
        p.extend_from_slice(n);
        let p = PathBuf::from(std::ffi::OsStr::from_bytes(&p));
        std::fs::write(&p, vec![7u8; 1 << 20]).unwrap();
        files.push(p);
    }
    drop_caches();
    // Read them all from a script that gets the names through the environment-free glob.
    let t = outer.dir.join("names.iod");
    let out = Command::new(env!("CARGO_BIN_EXE_iodump"))
        .args(["record", "-d", &inner.dev(), "-o"])
        .arg(&t)
        .args(["--", "sh", "-c"])
        .arg(format!("cat '{}'/* > /dev/null", nested.display()))
        .output()
        .unwrap();
    ok(&out);
    let r = Reader::open(&t).unwrap();
    for f in &files {
        let want = f.as_os_str().as_bytes();
        let n = r.events().filter(|e| path_of(&r, e) == want).count();
        assert!(
            n > 0,
            "no I/O with path {:?}",
            String::from_utf8_lossy(want)
        );
    }
    // CSV export of the live output quotes them correctly.
    let out = Command::new(env!("CARGO_BIN_EXE_iodump"))
        .args([
            "record",
            "-d",
            &inner.dev(),
            "--print",
            "csv",
            "--",
            "sh",
            "-c",
        ])
        .arg(format!(
            "echo 3 > /proc/sys/vm/drop_caches; cat '{}'/comma* > /dev/null",
            nested.display()
        ))
        .output()
        .unwrap();
    let text = out.stdout;
    let needle = format!("\"{}/comma,quote\"\"name.csv\"", nested.display());
    assert!(
        text.windows(needle.len()).any(|w| w == needle.as_bytes()),
        "{}",
        String::from_utf8_lossy(&text)
    );
    let _ = Command::new("umount").arg(&nested).status();
}

#[test]
fn deep_paths_are_cut_from_the_root_and_marked() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("deep_paths_are_cut_from_the_root_and_marked") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let mut p = fs.mnt.clone();
        for _ in 0..300 {
            p.push("d");
        }
        std::fs::create_dir_all(&p).unwrap();
        let f = p.join("deep.bin");
        std::fs::write(&f, vec![1u8; 256 << 10]).unwrap();
        drop_caches();
        let r = record(&fs, "deep", &format!("cat {} > /dev/null", f.display()));
        let e = by_comm(&r, b"cat")
            .find(|e| {
                e.op == Op::Read
                    && r.tables()
                        .path(e.path_id)
                        .is_some_and(|p| p.kind == PathKind::File)
            })
            .expect("a read with a path");
        let entry = r.tables().path(e.path_id).unwrap();
        assert!(entry.truncated, "depth 300 must be marked truncated");
        assert!(
            entry.path.starts_with("…/".as_bytes()),
            "{:?}",
            String::from_utf8_lossy(&entry.path)
        );
        assert!(entry.path.ends_with(b"/d/d/d/deep.bin"), "{kind}");
    }
}

#[test]
fn renamed_and_unlinked_files() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("renamed_and_unlinked_files") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let a = fs.path("xlogtemp.123");
        let b = fs.path("000000010000000000000001");
        let c = fs.path("archive/moved.seg");
        let gone = fs.path("gone.dat");
        std::fs::write(&gone, vec![3u8; 2 << 20]).unwrap();
        drop_caches();
        // As a database does with a WAL segment: write it under a temporary name from one
        // open file, rename it, write on, later move it to another directory and write on;
        // each batch 1.2 s after the rename (I/O carries the new name within about a
        // second). Then open `gone`, unlink it, and read it.
        let script = format!(
            "python3 -c '
import os,sys,mmap,time
a,b,c,g=sys.argv[1:5]
fd=os.open(a,os.O_CREAT|os.O_RDWR|os.O_DIRECT,0o644)
buf=mmap.mmap(-1,4096)
def batch(base):
    for i in range(20): os.pwrite(fd,buf,(base+i)*4096)
batch(0); os.rename(a,b); time.sleep(1.2)
batch(20); os.mkdir(os.path.dirname(c)); os.rename(b,c); time.sleep(1.2)
batch(40); os.close(fd)
h=open(g,\"rb\"); os.unlink(g); h.read()
' {} {} {} {}",
            a.display(),
            b.display(),
            c.display(),
            gone.display()
        );
        let r = record(&fs, "rename", &script);
        let mut writes: Vec<Event> = by_comm(&r, b"python3")
            .filter(|e| e.op == Op::Write && e.bytes == 4096)
            .collect();
        writes.sort_by_key(|e| e.timestamp_ns);
        assert_eq!(writes.len(), 60, "{kind}: the three batches");
        for (i, name) in [&a, &b, &c].iter().enumerate() {
            for e in &writes[i * 20..i * 20 + 20] {
                assert_eq!(
                    path_of(&r, e),
                    name.as_os_str().as_bytes(),
                    "{kind}: batch {i} carries the name the file had then"
                );
            }
        }
        // one file, three names: the same device and inode in each path entry
        let ids: Vec<(DevT, u64)> = [&a, &b, &c]
            .iter()
            .map(|n| {
                let p = r
                    .tables()
                    .paths()
                    .find(|p| p.path == n.as_os_str().as_bytes())
                    .expect("a path entry for each name");
                (p.dev, p.inode)
            })
            .collect();
        assert!(ids.windows(2).all(|w| w[0] == w[1]), "{kind}: {ids:?}");
        let deleted = r
            .tables()
            .paths()
            .find(|p| p.path.ends_with(b"gone.dat"))
            .expect("the unlinked file");
        assert!(
            deleted.deleted,
            "{kind}: unlinked while open must be marked deleted"
        );
    }
}

/// A file written with O_DIRECT about every millisecond and renamed (rename, renameat2 with
/// RENAME_EXCHANGE, a rename of its directory), then unlinked (tests/data/renamer.py): every
/// write that entered the block layer after the call returned carries the new name, and
/// after the unlink its path entry is marked deleted. With the rename hooks forced off
/// (IODUMP_FORCE_NO_NAMES=1: names checked once a second) the same run has stale names.
#[test]
fn renames_are_named_at_once() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("renames_are_named_at_once") {
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/renamer.py");
    let stale_writes = |kind: &str, hooks: bool| -> (usize, usize) {
        let fs = Fs::new(kind);
        let t = fs.dir.join("renames.iod");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_iodump"));
        if !hooks {
            cmd.env("IODUMP_FORCE_NO_NAMES", "1");
        }
        let out = cmd
            .args(["record", "-d", &fs.dev(), "-o"])
            .arg(&t)
            .args(["--", "python3", script])
            .arg(&fs.mnt)
            .arg("9")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !err.contains("panicked"),
            "{kind}: {err}"
        );
        assert_eq!(hooks, err.contains("sys_exit_rename"), "{kind}: {err}");
        // `NS PATH` after each change, `NS (deleted) PATH` after the unlink
        let changes: Vec<(u64, bool, Vec<u8>)> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let (ns, p) = l.split_once(' ').unwrap();
                let (deleted, p) = match p.strip_prefix("(deleted) ") {
                    Some(p) => (true, p),
                    None => (false, p),
                };
                (ns.parse().unwrap(), deleted, p.as_bytes().to_vec())
            })
            .collect();
        assert_eq!(changes.len(), 10, "{kind}");
        let r = Reader::open(&t).unwrap();
        let mnt = fs.mnt.as_os_str().as_bytes().to_vec();
        let (mut checked, mut stale) = (0, 0);
        let mut first_stale = String::new();
        for e in r.events().filter(|e| e.op == Op::Write && e.bytes == 4096) {
            let Some(p) = r.tables().path(e.path_id) else {
                continue;
            };
            if !p.path.starts_with(&mnt) {
                continue;
            }
            let Some((_, deleted, want)) = changes.iter().rev().find(|c| e.timestamp_ns > c.0)
            else {
                continue;
            };
            checked += 1;
            if p.path != *want || p.deleted != *deleted {
                stale += 1;
                if first_stale.is_empty() {
                    first_stale = format!(
                        "first: {} (deleted {}) at {} by tid {} sector {}, wanted {} (deleted {})",
                        String::from_utf8_lossy(&p.path),
                        p.deleted,
                        e.timestamp_ns,
                        e.tid,
                        e.sector,
                        String::from_utf8_lossy(want),
                        deleted
                    );
                }
            }
        }
        assert!(checked >= 300, "{kind}: {checked} writes after a change");
        if stale > 0 {
            let named: Vec<(u64, bool, String)> = changes
                .iter()
                .map(|c| (c.0, c.1, String::from_utf8_lossy(&c.2).into_owned()))
                .collect();
            eprintln!("{kind}: {stale} stale; {first_stale}; changes {named:?}");
        }
        (checked, stale)
    };
    for kind in FILESYSTEMS {
        let (checked, stale) = stale_writes(kind, true);
        assert_eq!(
            stale, 0,
            "{kind}: {stale} of {checked} writes after a change carried the old name"
        );
    }
    // The check can fail: names checked once a second leave stale ones behind.
    let (checked, stale) = stale_writes("ext4", false);
    assert!(stale > 0, "without the hooks: {stale} of {checked} stale");
}

/// A kernel whose struct fields moved where the program does not know them loads it all the
/// same, without the features that read them: this kernel's BTF with `struct dentry`'s
/// `d_u`, `struct page`'s `compound_head` and `mapping`, `struct inode`'s `i_dentry`,
/// `struct iomap_dio`'s `iocb` and `struct bio`'s `bi_blkg` renamed (given with --btf, so
/// no CO-RE flavour matches), each said in one `warning: off on this kernel:` line and in
/// the trace's `iodump.off`; the I/O is all recorded, the reads of a file whose names cannot
/// be walked are `[unknown]` (not its filesystem's root).
#[test]
fn a_kernel_without_a_field_turns_off_one_feature() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("a_kernel_without_a_field_turns_off_one_feature") {
        return;
    }
    let fs = Fs::new("ext4");
    let mut btf = std::fs::read("/sys/kernel/btf/vmlinux").unwrap();
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    let strings = u32_at(&btf, 4) + u32_at(&btf, 16);
    let len = u32_at(&btf, 20);
    for (from, to) in [
        (&b"\0d_u\0"[..], &b"\0d_w\0"[..]),
        (b"\0compound_head\0", b"\0compound_hexd\0"),
        (b"\0mapping\0", b"\0mappinx\0"),
        (b"\0i_dentry\0", b"\0i_dentrx\0"),
        (b"\0iocb\0", b"\0iocx\0"),
        (b"\0bi_blkg\0", b"\0bi_blkx\0"),
    ] {
        let table = &btf[strings..strings + len];
        let at = table
            .windows(from.len())
            .position(|w| w == from)
            .expect("the field's name")
            + strings;
        btf[at..at + to.len()].copy_from_slice(to);
    }
    let patched = fs.dir.join("moved-fields.btf");
    std::fs::write(&patched, &btf).unwrap();
    let f = random_file(&fs, "data/read.bin", 4);
    drop_caches();
    // `iodump record --btf PATCHED -d DEV -o TRACE -- CMD...`
    let record = |trace: &PathBuf, cmd: &[std::ffi::OsString]| {
        Command::new(env!("CARGO_BIN_EXE_iodump"))
            .args(["record", "--btf"])
            .arg(&patched)
            .args(["-d", &fs.dev(), "-o"])
            .arg(trace)
            .arg("--")
            .args(cmd)
            .stdout(Stdio::null())
            .output()
            .unwrap()
    };
    let t = fs.dir.join("moved.iod");
    let out = record(&t, &["cat".into(), f.clone().into()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{err}");
    let off: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("iodump: warning: off on this kernel:"))
        .collect();
    assert!(off.iter().any(|l| l.contains("d_u.d_alias")), "{err}");
    for field in [
        "compound_head",
        "page has no mapping",
        "i_dentry",
        "iomap_dio has no iocb",
        "bi_blkg",
    ] {
        assert!(off.iter().any(|l| l.contains(field)), "{field}: {err}");
    }
    // Direct reads (iomap) of a file whose iocb cannot be read are not attributed either.
    let direct = fs.dir.join("moved-direct.iod");
    let input = format!("if={}", f.display());
    let dd = ["dd", "bs=64k", "iflag=direct", "of=/dev/null", &input];
    let out = record(&direct, &dd.map(std::ffi::OsString::from));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rd = Reader::open(&direct).unwrap();
    let dd: Vec<Event> = by_comm(&rd, b"dd").filter(|e| e.op == Op::Read).collect();
    assert!(
        dd.iter().map(|e| u64::from(e.bytes)).sum::<u64>() >= 4 << 20,
        "dd's direct reads recorded"
    );
    assert!(
        dd.iter().all(|e| path_of(&rd, e).starts_with(b"[")),
        "no path for direct I/O without iomap_dio.iocb"
    );
    let r = Reader::open(&t).unwrap();
    let meta = r
        .header()
        .metadata
        .iter()
        .find(|(k, _)| k == "iodump.off")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert!(
        meta.contains("d_alias") && meta.contains("compound_info"),
        "{meta}"
    );
    // Every read is recorded; without a name to walk, the file's reads are [unknown], never
    // named after the filesystem's root.
    let paths: std::collections::BTreeSet<String> = by_comm(&r, b"cat")
        .map(|e| String::from_utf8_lossy(path_of(&r, &e)).into_owned())
        .collect();
    let unknown: u64 = by_comm(&r, b"cat")
        .filter(|e| e.op == Op::Read && path_of(&r, e) == b"[unknown]")
        .map(|e| u64::from(e.bytes))
        .sum();
    assert!(
        unknown >= 4 << 20,
        "{unknown} bytes of cat's reads in [unknown]: {paths:?}"
    );
    assert!(
        paths.iter().all(|p| p.starts_with('[')),
        "no path from a walk without names: {paths:?}"
    );
}

#[test]
fn metadata_and_journal_are_labelled() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("metadata_and_journal_are_labelled") {
        return;
    }
    for kind in ["ext4", "xfs"] {
        let fs = Fs::new(kind);
        let r = record(
            &fs,
            "meta",
            &format!(
                "mkdir -p {0}/a/b && for i in $(seq 1 200); do echo $i > {0}/a/b/f$i; done; sync; \
                 echo 3 > /proc/sys/vm/drop_caches; ls -lR {0} > /dev/null",
                fs.mnt.display()
            ),
        );
        let kinds: Vec<PathKind> = r
            .events()
            .filter_map(|e| r.tables().path(e.path_id).map(|p| p.kind))
            .collect();
        assert!(
            kinds.contains(&PathKind::Journal),
            "{kind}: no [journal] I/O"
        );
        assert!(
            kinds.contains(&PathKind::Metadata),
            "{kind}: no [metadata] I/O"
        );
        let s = iodump_format::summary::summarize(&r);
        assert!(s.events_with_label > 0);
    }
}

/// Online discard of a deleted file's blocks (ext4 and xfs mounted with `-o discard`): the
/// discards carry the `[discard]` label, not `[unknown]`.
#[test]
fn discards_of_freed_blocks_are_labelled() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("discards_of_freed_blocks_are_labelled") {
        return;
    }
    for kind in ["ext4", "xfs"] {
        let fs = Fs::new(kind);
        // Mounted again (xfs takes no discard on remount).
        sh(&format!(
            "umount {0} && mount -o discard /dev/{1} {0}",
            fs.mnt.display(),
            fs.dev()
        ));
        let r = record(
            &fs,
            "discard",
            &format!(
                "dd if=/dev/urandom of={0}/f bs=1M count=8 conv=fsync status=none; rm {0}/f;                  sync; sleep 1; sync",
                fs.mnt.display()
            ),
        );
        let discards: Vec<Event> = r.events().filter(|e| e.op == Op::Discard).collect();
        assert!(!discards.is_empty(), "{kind}: no discard recorded");
        for e in &discards {
            let p = r.tables().path(e.path_id).expect("a path entry");
            assert_eq!(
                (p.kind, p.path.as_slice()),
                (PathKind::Discard, &b"[discard]"[..]),
                "{kind}: {e:?}"
            );
        }
    }
}

#[test]
fn raw_device_io_is_labelled_with_the_device_node() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("raw_device_io_is_labelled_with_the_device_node") {
        return;
    }
    let fs = Fs::new("ext4");
    let node = format!("/dev/zram{}", fs.zram);
    // O_DIRECT reads of the device node, 8 x 4 KiB each: synchronous into a private buffer
    // (dd), synchronous into a shared mapping (python3: a MAP_SHARED anonymous buffer is a
    // shmem page with a mapping of its own, which must not name the I/O), asynchronous
    // (fio, libaio).
    let r = record(
        &fs,
        "raw",
        &format!(
            "dd if={node} of=/dev/null bs=4k count=8 skip=100 iflag=direct status=none; \
             python3 -c 'import os, mmap; fd = os.open(\"{node}\", os.O_RDONLY | os.O_DIRECT); \
             b = mmap.mmap(-1, 4096); [os.preadv(fd, [b], 4096 * (200 + i)) for i in range(8)]'; \
             fio --name=raw --filename={node} --rw=randread --bs=4k --direct=1 --ioengine=libaio \
             --iodepth=4 --number_ios=8 --size=64M --output=/dev/null"
        ),
    );
    for (comm, sc) in [
        (&b"dd"[..], Syscall::READ),
        (b"python3", Syscall(7)), // preadv
        (b"fio", Syscall::IO_SUBMIT),
    ] {
        let reads: Vec<Event> = by_comm(&r, comm)
            .filter(|e| e.op == Op::Read && e.bytes == 4096)
            .collect();
        let name = String::from_utf8_lossy(comm);
        assert!(reads.len() >= 8, "{name}: {} reads", reads.len());
        for e in &reads {
            let p = r.tables().path(e.path_id);
            assert_eq!(
                p.map(|p| (p.kind, p.path.as_slice())),
                Some((PathKind::RawDevice, node.as_bytes())),
                "{name}: a read of the device node at sector {}",
                e.sector
            );
        }
        assert!(
            reads.iter().filter(|e| e.syscall == Some(sc)).count() >= 8,
            "{name}: reads attributed to {sc}"
        );
    }
}

#[test]
fn direct_io_into_a_shared_buffer_names_the_file() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("direct_io_into_a_shared_buffer_names_the_file") {
        return;
    }
    // The buffer of an O_DIRECT read can be a shared mapping (a database's shared buffers):
    // its page has a host inode of its own (shmem here), which must not name the I/O.
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let f = random_file(&fs, "shared/data", 4);
        // btrfs answered a first direct read from the pages dd left cached.
        drop_caches();
        let r = record(
            &fs,
            "shared",
            &format!(
                "python3 -c 'import os, mmap; fd = os.open(\"{}\", os.O_RDONLY | os.O_DIRECT); \
                 b = mmap.mmap(-1, 4096); [os.preadv(fd, [b], 4096 * (16 * i + 3)) for i in range(8)]'",
                f.display()
            ),
        );
        let reads: Vec<Event> = by_comm(&r, b"python3")
            .filter(|e| e.op == Op::Read && e.bytes == 4096)
            .collect();
        assert!(reads.len() >= 8, "{kind}: {} reads", reads.len());
        for e in &reads {
            assert_eq!(
                path_of(&r, e),
                f.as_os_str().as_bytes(),
                "{kind}: a direct read at sector {}",
                e.sector
            );
        }
    }
}

/// A long recording forgets the files and threads that had no I/O for `--forget-idle` (its
/// memory holds those of the last while), and a forgotten file that has I/O again is named
/// as before: the kernel, told to forget it too, sends its path again. Also with what the
/// oldest kernels get, forced on this one (raw tracepoints, requests from block_getrq, the
/// object without compare-and-exchange, whose file ids are taken per CPU).
#[test]
fn forgotten_files_are_named_again_when_they_come_back() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("forgotten_files_are_named_again_when_they_come_back") {
        return;
    }
    let fs = Fs::new("ext4");
    let variants: [&[(&str, &str)]; 2] = [
        &[],
        &[
            ("IODUMP_FORCE_GETRQ", "1"),
            ("IODUMP_FORCE_RAW_TP", "1"),
            ("IODUMP_FORCE_NO_ATOMICS", "1"),
        ],
    ];
    for (i, env) in variants.into_iter().enumerate() {
        forgets_and_names_again(&fs, &format!("many{i}"), env);
    }
}

fn forgets_and_names_again(fs: &Fs, name: &str, env: &[(&str, &str)]) {
    let dir = fs.mnt.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.display();
    // 200 files written by 200 processes; idle for more than --forget-idle and two sweeps;
    // then file 1 written and file 2 read again.
    let script = format!(
        "for i in $(seq 200); do dd if=/dev/zero of={d}/f$i bs=4k count=1 oflag=direct status=none; done; \
         sleep 22; \
         dd if=/dev/zero of={d}/f1 bs=4k count=1 oflag=direct conv=notrunc status=none; \
         dd if={d}/f2 of=/dev/null bs=4k count=1 iflag=direct status=none"
    );
    let t = fs.dir.join(format!("forget-{name}.iod"));
    let out = Command::new(env!("CARGO_BIN_EXE_iodump"))
        .envs(env.iter().copied())
        .args([
            "record",
            "-d",
            &fs.dev(),
            "--forget-idle",
            "10s",
            "--stats",
            "-o",
        ])
        .arg(&t)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("panicked"),
        "{env:?}: {err}"
    );
    let counts: Vec<u64> = err
        .lines()
        .find_map(|l| l.split_once("forgotten after --forget-idle: "))
        .map(|(_, rest)| {
            rest.split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .map(|w| w.parse().unwrap())
                .collect()
        })
        .unwrap_or_else(|| panic!("no forgotten line: {err}"));
    assert!(counts[0] >= 200 && counts[1] >= 200, "{env:?}: {err}");
    let r = Reader::open(&t).unwrap();
    let variant = r
        .header()
        .metadata
        .iter()
        .find(|(k, _)| k == "iodump.variant")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    assert_eq!(
        variant.contains("per-CPU file ids"),
        !env.is_empty(),
        "the object without compare-and-exchange when forced: {variant}"
    );
    let named = |name: &str, op: Op| {
        let want = format!("{d}/{name}");
        by_comm(&r, b"dd")
            .filter(|e| e.op == op && path_of(&r, e) == want.as_bytes())
            .count()
    };
    assert_eq!(
        named("f1", Op::Write),
        2,
        "{env:?}: f1 written twice, both named"
    );
    assert_eq!(named("f2", Op::Read), 1, "{env:?}: f2 read once, named");
    let unknown = by_comm(&r, b"dd")
        .filter(|e| path_of(&r, e) == b"[unknown]")
        .count();
    assert_eq!(unknown, 0, "{env:?}");
}

/// A file system unmounted and mounted elsewhere while recording is named under its new
/// mount point (the old one fitted its device still); a file opened by handle whose name
/// the kernel does not hold is `[unknown]`, not the mount point; a thread that execs
/// mid-segment has its I/O before under its old comm, after under its new one.
#[test]
fn remounts_handles_and_execs_name_each_io() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("remounts_handles_and_execs_name_each_io") {
        return;
    }
    let fs = Fs::new("ext4");
    let node = format!("/dev/{}", fs.dev());
    let (a, b) = (fs.path("a"), fs.dir.join("elsewhere"));
    std::fs::create_dir_all(fs.path("dir/sub")).unwrap();
    std::fs::write(fs.path("dir/sub/handled"), b"").unwrap();
    std::fs::write(fs.path("rd.txt"), b"hello\n").unwrap();
    std::fs::create_dir_all(&b).unwrap();
    sh("sync");
    drop_caches();
    let py = format!(
        r#"
import ctypes, os, mmap, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
M, B = "{m}", "{b}"
buf = mmap.mmap(-1, 4096); buf.write(b"h" * 4096)
# by handle, its dentry dropped: a disconnected name
class FH(ctypes.Structure): _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
fh = FH(); fh.bytes = 128; mid = ctypes.c_int()
assert libc.name_to_handle_at(-100, (M + "/dir/sub/handled").encode(), ctypes.byref(fh), ctypes.byref(mid), 0) == 0
open("/proc/sys/vm/drop_caches", "w").write("2")
mfd = os.open(M, os.O_RDONLY)
fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDWR | os.O_DIRECT)
assert fd >= 0
os.pwrite(fd, buf, 0); os.close(fd); os.close(mfd)
# remounted elsewhere
fd = os.open(M + "/a", os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644); os.pwrite(fd, buf, 0); os.close(fd)
time.sleep(1)  # (the recorder names a file a moment after its I/O: not across the remount)
subprocess.run(["umount", M], check=True); subprocess.run(["mount", "{node}", B], check=True)
fd = os.open(B + "/after", os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644); os.pwrite(fd, buf, 0); os.close(fd)
# a read as sh, then exec dd: one segment, two names
subprocess.run(["sh", "-c", "read x < " + B + "/rd.txt; exec dd if=/dev/zero of=" + B + "/ex.bin bs=4k count=2 oflag=direct status=none"], check=True)
time.sleep(1)
subprocess.run(["umount", B], check=True); subprocess.run(["mount", "{node}", M], check=True)
"#,
        m = fs.mnt.display(),
        b = b.display(),
    );
    let script = fs.dir.join("s.py");
    std::fs::write(&script, py).unwrap();
    let r = record(&fs, "remount", &format!("python3 {}", script.display()));
    let writes_to = |p: &Path| {
        r.events()
            .filter(|e| e.op == Op::Write && path_of(&r, e) == p.as_os_str().as_bytes())
            .count()
    };
    let all: Vec<String> = r
        .events()
        .filter(|e| e.op == Op::Write)
        .map(|e| String::from_utf8_lossy(path_of(&r, &e)).into_owned())
        .collect();
    assert_eq!(writes_to(&a), 1, "the write before the remount: {all:?}");
    assert_eq!(
        writes_to(&b.join("after")),
        1,
        "the write after it, at its new place: {all:?}"
    );
    assert_eq!(writes_to(&fs.mnt.join("after")), 0);
    let (python, mnt) = (b"python3" as &[u8], fs.mnt.as_os_str().as_bytes());
    let by_handle: Vec<&[u8]> = by_comm(&r, python)
        .filter(|e| e.op == Op::Write && e.bytes == 4096)
        .map(|e| path_of(&r, &e))
        .filter(|p| !p.ends_with(b"/a") && !p.ends_with(b"/after"))
        .collect();
    assert!(!by_handle.is_empty(), "the write by handle");
    assert!(
        by_handle
            .iter()
            .all(|p| *p != mnt && *p != b.as_os_str().as_bytes()),
        "named after the mount point: {:?}",
        by_handle
            .iter()
            .map(|p| String::from_utf8_lossy(p))
            .collect::<Vec<_>>()
    );
    // Each I/O's comm as a reader names it: the entry in force for its segment.
    let comm_of = |p: &Path| -> Vec<String> {
        let mut v = Vec::new();
        for s in 0..r.segments().len() {
            let batch = r.decode_segment(s).unwrap();
            for i in 0..batch.len() {
                let e = batch.get(i);
                if path_of(&r, &e) == p.as_os_str().as_bytes() {
                    let comm = r.comm(e.pid, e.tid, s).unwrap_or(b"?");
                    v.push(String::from_utf8_lossy(comm).into_owned());
                }
            }
        }
        v
    };
    assert_eq!(
        comm_of(&b.join("rd.txt")),
        ["sh"],
        "the read before the exec"
    );
    let dd = comm_of(&b.join("ex.bin"));
    assert!(!dd.is_empty() && dd.iter().all(|c| c == "dd"), "{dd:?}");
}

/// A file made with `O_TMPFILE` has no name until `linkat` gives it one: its I/O before is
/// named `#INODE` in its directory and marked deleted, its I/O from the link on carries the
/// new name at once (the link syscalls move the names generation as renames do; it was kept
/// for about a second).
#[test]
fn a_tmpfile_is_named_from_its_link_on() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("a_tmpfile_is_named_from_its_link_on") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let (dir, new) = (fs.path("spool"), fs.path("spool/done"));
        std::fs::create_dir_all(&dir).unwrap();
        let py = format!(
            r#"
import ctypes, os, mmap
libc = ctypes.CDLL(None, use_errno=True)
buf = mmap.mmap(-1, 4096); buf.write(b"t" * 4096)
fd = os.open("{dir}", os.O_TMPFILE | os.O_RDWR | os.O_DIRECT, 0o644)
os.pwrite(fd, buf, 0)
# linkat(AT_FDCWD, "/proc/self/fd/N", AT_FDCWD, new, AT_SYMLINK_FOLLOW), as open(2) shows
if libc.linkat(-100, b"/proc/self/fd/%d" % fd, -100, b"{new}", 0x400) != 0:
    raise OSError(ctypes.get_errno(), "linkat")
for i in range(1, 21): os.pwrite(fd, buf, 4096 * i)
os.close(fd)
"#,
            dir = dir.display(),
            new = new.display(),
        );
        let script = fs.dir.join("tmpfile.py");
        std::fs::write(&script, py).unwrap();
        let r = record(&fs, "tmpfile", &format!("python3 {}", script.display()));
        let writes: Vec<(String, bool)> = by_comm(&r, b"python3")
            .filter(|e| e.op == Op::Write && e.bytes == 4096)
            .map(|e| {
                let p = r.tables().path(e.path_id).unwrap();
                (String::from_utf8_lossy(&p.path).into_owned(), p.deleted)
            })
            .collect();
        assert_eq!(writes.len(), 21, "{kind}: {writes:?}");
        let ino = std::fs::metadata(&new).unwrap().ino();
        assert_eq!(
            writes[0],
            (format!("{}/#{ino}", dir.display()), true),
            "{kind}: the write before the link"
        );
        let n = new.display().to_string();
        assert!(
            writes[1..].iter().all(|(p, deleted)| *p == n && !deleted),
            "{kind}: the writes after the link: {writes:?}"
        );
    }
}

/// `link(old, new); unlink(old)` while the file is open by its first name (Maildir's move):
/// the I/O after it carries the name the file has, `new` (ext4 and xfs kept the open
/// file's unhashed `old`).
#[test]
fn a_link_then_unlink_names_the_link() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !bpf_available("a_link_then_unlink_names_the_link") {
        return;
    }
    for kind in FILESYSTEMS {
        let fs = Fs::new(kind);
        let (old, new) = (fs.path("tmp/msg"), fs.path("new/msg"));
        std::fs::create_dir_all(old.parent().unwrap()).unwrap();
        std::fs::create_dir_all(new.parent().unwrap()).unwrap();
        let py = format!(
            r#"
import os, mmap, time
buf = mmap.mmap(-1, 4096); buf.write(b"m" * 4096)
fd = os.open("{old}", os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o644)
os.pwrite(fd, buf, 0)
os.link("{old}", "{new}"); os.unlink("{old}")
for i in range(1, 21): os.pwrite(fd, buf, 4096 * i)
os.close(fd)
"#,
            old = old.display(),
            new = new.display(),
        );
        let script = fs.dir.join("link.py");
        std::fs::write(&script, py).unwrap();
        let r = record(&fs, "link", &format!("python3 {}", script.display()));
        let names: Vec<String> = by_comm(&r, b"python3")
            .filter(|e| e.op == Op::Write && e.bytes == 4096)
            .map(|e| String::from_utf8_lossy(path_of(&r, &e)).into_owned())
            .collect();
        assert_eq!(names.len(), 21, "{kind}: {names:?}");
        let (o, n) = (old.display().to_string(), new.display().to_string());
        assert_eq!(names[0], o, "{kind}: the write before the link");
        assert!(
            names[1..].iter().all(|p| *p == n),
            "{kind}: the writes after the unlink: {names:?}"
        );
    }
}
