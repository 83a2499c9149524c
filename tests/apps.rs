//! End-to-end tests with real applications, recorded by `iodump record` on devices the tests
//! make: PostgreSQL (initdb, pgbench) on ext4 on zram, SQLite in WAL mode on ext4 on a loop
//! device. They need root, BPF and the applications (Debian's `postgresql` and python3's
//! `sqlite3` module): without them they skip, unless `IODUMP_REQUIRE_APPS=1` (set by CI), in
//! which case they fail.
#![cfg(feature = "analyze")]

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use iodump_format::{Event, Flags, Op, PathEntry, PathKind, Reader};

mod common;

use common::devices::{Loop, Zram};
use common::{bin, monotonic_ns, ok, run, Recorder, TempDir};

/// The tests make devices and mounts: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// True when the test can run: root, BPF, and the application (`missing` says what is not
/// installed). When it cannot, panics under `IODUMP_REQUIRE_APPS=1`, else says the test is
/// skipped.
fn apps_available(test: &str, missing: Option<String>) -> bool {
    let required = std::env::var("IODUMP_REQUIRE_APPS").as_deref() == Ok("1");
    if !common::bpf_available(test) {
        assert!(!required, "IODUMP_REQUIRE_APPS=1 but {test} cannot record");
        return false;
    }
    if let Some(what) = missing {
        assert!(!required, "IODUMP_REQUIRE_APPS=1 but {test}: needs {what}");
        common::skip(test, &what);
        return false;
    }
    true
}

fn sh(script: &str) {
    let st = Command::new("sh").arg("-c").arg(script).status().unwrap();
    assert!(st.success(), "failed: {script}");
}

/// An ext4 filesystem on `node`, mounted at `mnt`; unmounted on drop.
struct Ext4 {
    mnt: PathBuf,
}

impl Ext4 {
    fn new(node: &str, mnt: PathBuf) -> Ext4 {
        std::fs::create_dir_all(&mnt).unwrap();
        sh(&format!(
            "mkfs.ext4 -q -F {node} && mount {node} {}",
            mnt.display()
        ));
        Ext4 { mnt }
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// `iodump record -d DEV -o TRACE` in the background, stopped with SIGINT.
struct Recording(Recorder);

impl Recording {
    /// Starts recording and returns once the recorder says it records.
    fn start(dev: &str, trace: &Path) -> Recording {
        let trace = trace.to_str().unwrap();
        Recording(Recorder::start(&["record", "-d", dev, "-o", trace]))
    }

    /// Stops the recorder and opens its trace.
    fn finish(self, trace: &Path) -> Reader {
        let (st, _, err) = self.0.stop();
        assert!(st.success(), "{err}");
        eprintln!("{err}");
        Reader::open(trace).unwrap()
    }
}

/// The path entry of an event.
fn entry<'a>(r: &'a Reader, e: &Event) -> Option<&'a PathEntry> {
    r.tables().path(e.path_id)
}

/// The events of a trace in time order.
fn events_in_time_order(r: &Reader) -> Vec<Event> {
    let mut ev: Vec<Event> = r.events().collect();
    ev.sort_by_key(|e| e.timestamp_ns);
    ev
}

/// The newest PostgreSQL server installed by Debian's packages: its `bin` directory.
fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|d| {
            let v = d.file_name().to_str()?.parse::<u32>().ok()?;
            let b = d.path().join("bin");
            b.join("initdb").exists().then_some((v, b))
        })
        .collect();
    found.sort();
    found.pop().map(|f| f.1)
}

/// A PostgreSQL server run by the `postgres` user from a data directory of its own, with its
/// socket in `sock`; stopped on drop.
struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    sock: PathBuf,
    port: u16,
}

impl Postgres {
    fn as_postgres(&self, program: &str) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(self.bin.join(program));
        c
    }

    fn run(&self, program: &str, args: &[&str]) -> String {
        let out = self
            .as_postgres(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The connection options of psql and pgbench.
    fn conn(&self) -> Vec<String> {
        vec![
            "-h".into(),
            self.sock.display().to_string(),
            "-p".into(),
            self.port.to_string(),
            "-U".into(),
            "postgres".into(),
        ]
    }

    fn psql(&self, sql: &str) -> String {
        self.psql_each(&[sql])
    }

    /// Runs each command in one session, each in a transaction of its own.
    fn psql_each(&self, sql: &[&str]) -> String {
        let mut a = self.conn();
        a.push("-XAtq".into());
        for c in sql {
            a.extend(["-c".into(), c.to_string()]);
        }
        a.push("postgres".into());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        self.run("psql", &a)
    }

    fn pgbench(&self, args: &[&str]) {
        let mut a = self.conn();
        a.extend(args.iter().map(|s| s.to_string()));
        a.push("postgres".into());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        self.run("pgbench", &a);
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .as_postgres("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .status();
    }
}

/// PostgreSQL on ext4 on zram: pgbench -i -s 1 and a few seconds of pgbench, recorded.
/// Relation files have the paths PostgreSQL gives them; WAL segments, which PostgreSQL
/// creates under a temporary name and renames, and recycles by renaming them again, carry the
/// names they have at the end when written after their last rename; and the processes show
/// their roles from their command lines.
#[test]
fn postgres_paths_wal_renames_and_roles() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pg_bin = postgres_bin();
    let missing = match &pg_bin {
        Some(b) => ["pg_ctl", "pgbench", "psql"]
            .iter()
            .map(|p| b.join(p))
            .find(|p| !p.exists())
            .map(|p| p.display().to_string()),
        None => Some("PostgreSQL (/usr/lib/postgresql/*/bin/initdb)".into()),
    };
    if !apps_available("postgres_paths_wal_renames_and_roles", missing) {
        return;
    }
    let zram = Zram::new("512M");
    let d = TempDir::new("apps-pg");
    let fs = Ext4::new(&zram.node(), d.join("mnt"));
    let mnt = fs.mnt.canonicalize().unwrap();
    let (data, sock) = (mnt.join("data"), mnt.join("sock"));
    std::fs::create_dir_all(&sock).unwrap();
    sh(&format!("chown -R postgres: {}", mnt.display()));
    let pg = Postgres {
        bin: pg_bin.unwrap(),
        data: data.clone(),
        sock: sock.clone(),
        port: 50_000 + (std::process::id() % 10_000) as u16,
    };
    // 1 MiB WAL segments and a small max_wal_size: segments are made, recycled and removed
    // within seconds. Few shared buffers: the background writer writes. Asynchronous commits:
    // the WAL writer writes.
    let d_s = data.display().to_string();
    pg.run(
        "initdb",
        &[
            "-D",
            &d_s,
            "--wal-segsize=1",
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
    );
    let conf = format!(
        "listen_addresses = ''\nunix_socket_directories = '{}'\nport = {}\n\
         max_connections = 20\nshared_buffers = 1MB\nmin_wal_size = 2MB\nmax_wal_size = 4MB\n\
         checkpoint_timeout = 30s\nsynchronous_commit = off\nwal_writer_delay = 10ms\n\
         bgwriter_delay = 10ms\nbgwriter_lru_maxpages = 1000\nbgwriter_flush_after = 64kB\n\
         log_checkpoints = on\n",
        sock.display(),
        pg.port
    );
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(data.join("postgresql.conf"))
        .unwrap();
    std::io::Write::write_all(&mut f, conf.as_bytes()).unwrap();
    drop(f);
    let log = mnt.join("server.log").display().to_string();
    pg.run("pg_ctl", &["-D", &d_s, "-l", &log, "-w", "start"]);

    let trace = d.join("pg.iod");
    let rec = Recording::start(&zram.name(), &trace);
    pg.pgbench(&["-q", "-i", "-s", "1"]);
    // The backends read what pgbench -i wrote from the device.
    sh("sync; echo 3 > /proc/sys/vm/drop_caches");
    pg.pgbench(&["-T", "4", "-c", "2", "-j", "1"]);
    // No checkpoint from here on but the test's own: with 1 MiB segments and a max_wal_size
    // of 4 MB, PostgreSQL requests one as soon as a segment is finished after the last one
    // (about max_wal_size / 1.9 segments), which the quiet phase's pg_switch_wal does, and
    // that checkpoint recycles segments while the quiet phase runs. Every process has read
    // the setting again before the quiet phase (the sleep below).
    pg.psql("ALTER SYSTEM SET max_wal_size = '1GB'");
    pg.psql("SELECT pg_reload_conf()");
    // A checkpoint (the checkpointer writes every relation; old segments are recycled: renamed
    // to future names), then, after the kernel side's name check interval (about a second),
    // WAL written with nothing renamed meanwhile: into the current segment, then into the
    // next one (a recycled or new segment, renamed before).
    pg.psql("CHECKPOINT");
    let wal_dir = data.join("pg_wal");
    let listing = |dir: &Path| -> HashMap<u64, String> {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                let ino = e.metadata().unwrap().ino();
                (ino, e.file_name().to_string_lossy().into_owned())
            })
            .collect()
    };
    let before = listing(&wal_dir);
    std::thread::sleep(Duration::from_millis(1500));
    let quiet_from_ns = monotonic_ns();
    let insert = "INSERT INTO pgbench_history VALUES (1, 1, 1, 1, now(), 'q')";
    let mut sql = vec!["SET synchronous_commit = on"];
    sql.extend([insert; 5]);
    sql.push("SELECT pg_switch_wal()");
    sql.extend([insert; 5]);
    pg.psql_each(&sql);
    let rels: Vec<(String, String)> = [
        "pgbench_accounts",
        "pgbench_branches",
        "pgbench_tellers",
        "pgbench_history",
        "pgbench_accounts_pkey",
    ]
    .iter()
    .map(|t| {
        let p = pg.psql(&format!("SELECT pg_relation_filepath('{t}')"));
        (t.to_string(), p.trim().to_string())
    })
    .collect();
    std::thread::sleep(Duration::from_millis(500));
    let r = rec.finish(&trace);
    let after = listing(&wal_dir);
    assert!(
        before
            .iter()
            .all(|(i, n)| after.get(i).is_none_or(|m| m == n)),
        "a WAL segment was renamed after the checkpoint: {before:?} → {after:?}; server log \
         ends with:\n{}",
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    let ev = events_in_time_order(&r);
    assert!(ev.len() > 1000, "{} events", ev.len());

    // Relation files: the paths pg_relation_filepath gives, of the inodes they are.
    let mut ios: HashMap<u32, u64> = HashMap::new();
    for e in &ev {
        *ios.entry(e.path_id).or_default() += 1;
    }
    for (table, rel) in &rels {
        let path = data.join(rel);
        let ino = std::fs::metadata(&path).unwrap().ino();
        let want = path.display().to_string();
        let n: u64 = r
            .tables()
            .paths()
            .filter(|p| p.path == want.as_bytes())
            .inspect(|p| assert_eq!(p.inode, ino, "{table}: {want}"))
            .map(|p| ios.get(&p.path_id).copied().unwrap_or(0))
            .sum();
        assert!(n > 0, "{table}: no I/O under {want}");
    }
    let files = common::analyze_rows(&[&trace], &["--top-files", "--limit", "1000"]);
    let accounts = data.join(&rels[0].1).display().to_string();
    let row = files
        .iter()
        .find(|f| f["path"] == accounts)
        .unwrap_or_else(|| panic!("{accounts} not in --top-files"));
    assert!(row["ios"].as_u64().unwrap() > 100, "{row}");

    // WAL written after its segment's last rename: every I/O of the quiet phase on a segment
    // carries the name the segment has at the end (compared by inode), and at least one of
    // those segments was renamed while recording (it has more than one name in the trace).
    let wal_prefix = format!("{}/", wal_dir.display());
    let names_of = |p: &PathEntry| -> HashSet<Vec<u8>> {
        r.tables()
            .paths()
            .filter(|q| (q.dev, q.inode, q.generation) == (p.dev, p.inode, p.generation))
            .map(|q| q.path.clone())
            .collect()
    };
    let mut checked = 0;
    let mut renamed = Vec::new();
    for e in ev.iter().filter(|e| e.timestamp_ns > quiet_from_ns) {
        let Some(p) = entry(&r, e) else { continue };
        let path = String::from_utf8_lossy(&p.path);
        let Some(name) = path.strip_prefix(&wal_prefix) else {
            continue;
        };
        if p.kind != PathKind::File || name.contains('/') {
            continue;
        }
        assert_eq!(
            after.get(&p.inode).map(String::as_str),
            Some(name),
            "WAL I/O after the last renames names {path} (inode {}); pg_wal holds {after:?}",
            p.inode
        );
        checked += 1;
        if names_of(p).len() > 1 {
            renamed.push(path.into_owned());
        }
    }
    eprintln!("{checked} WAL I/Os after the last renames, on renamed segments: {renamed:?}");
    assert!(checked > 0, "no WAL I/O after the checkpoint");
    assert!(
        !renamed.is_empty(),
        "no WAL segment written after a rename (every segment written had one name)"
    );
    // --top-files counts such a segment once, under its final name, renamed from another.
    let seg = files
        .iter()
        .find(|f| f["path"] == renamed[0].as_str())
        .unwrap_or_else(|| panic!("{} not in --top-files", renamed[0]));
    assert!(seg["names"].as_u64().unwrap() >= 2, "{seg}");
    assert!(seg["renamed_from"].is_string(), "{seg}");

    // Roles from the command lines PostgreSQL gives its processes.
    let args: Vec<String> = r
        .tables()
        .processes()
        .filter(|p| p.comm == b"postgres")
        .filter_map(|p| p.args.as_ref())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    for role in [": checkpointer", ": walwriter", ": background writer"] {
        assert!(
            args.iter()
                .any(|a| a.starts_with("postgres: ") && a.contains(role)),
            "no process with {role:?} did I/O: {args:?}"
        );
    }
    assert!(
        args.iter()
            .any(|a| a.starts_with("postgres: ") && a.contains("postgres postgres [local]")),
        "no backend (postgres: USER DB [local] ...): {args:?}"
    );
    let procs = common::analyze_rows(&[&trace], &["--top-procs", "--limit", "1000"]);
    assert!(
        procs
            .iter()
            .any(|p| p["args"].as_str().unwrap_or("").contains(": checkpointer")),
        "{procs:?}"
    );
}

/// SQLite in WAL mode with synchronous=FULL on ext4 on a loop device (request-based, with a
/// write cache and no FUA): the database and its `-wal` file are named, and each commit is
/// followed by one cache flush. What the kernel does there: ext4's fdatasync of the growing
/// WAL commits its journal, whose commit block is a write with PREFLUSH and FUA (the block
/// layer turns these into flush requests of its own for loop, which are not new I/O); an
/// fdatasync with nothing to journal sends an empty flush, which iodump labels `[flush]`.
#[test]
fn sqlite_wal_files_and_one_flush_per_commit() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let has_sqlite = Command::new("python3")
        .args(["-c", "import sqlite3"])
        .status()
        .is_ok_and(|s| s.success());
    let missing = (!has_sqlite).then(|| "python3 with its sqlite3 module".to_string());
    if !apps_available("sqlite_wal_files_and_one_flush_per_commit", missing) {
        return;
    }
    let d = TempDir::new("apps-sqlite");
    let lo = Loop::new(&d.0, 128);
    let fs = Ext4::new(&lo.node, d.join("mnt"));
    let mnt = fs.mnt.canonicalize().unwrap();
    let db = mnt.join("app.db");
    // A file written and synced before recording: overwriting it in place and syncing its
    // data journals nothing, so ext4 sends an empty flush.
    let other = mnt.join("overwrite.dat");
    sh(&format!(
        "dd if=/dev/zero of={} bs=64k count=1 conv=fsync status=none",
        other.display()
    ));
    const COMMITS: usize = 30;
    let script = format!(
        "import os, sqlite3, sys\n\
         con = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
         assert con.execute('PRAGMA journal_mode=WAL').fetchone()[0] == 'wal'\n\
         con.execute('PRAGMA synchronous=FULL')\n\
         con.execute('CREATE TABLE t (i INTEGER, v TEXT)')\n\
         for i in range({COMMITS}):\n\
         \x20   con.execute('BEGIN')\n\
         \x20   con.execute('INSERT INTO t VALUES (?, ?)', (i, 'x' * 200))\n\
         \x20   con.execute('COMMIT')\n\
         con.close()\n\
         fd = os.open(sys.argv[2], os.O_WRONLY)\n\
         os.pwrite(fd, b'y' * 4096, 0)\n\
         os.fdatasync(fd)\n"
    );
    let trace = d.join("sqlite.iod");
    let out = run(bin()
        .args(["record", "-d", lo.name(), "-o"])
        .arg(&trace)
        .args(["--", "python3", "-c", &script])
        .arg(&db)
        .arg(&other));
    ok(&out);
    let r = Reader::open(&trace).unwrap();
    let ev = events_in_time_order(&r);
    let path_is = |e: &Event, want: &Path| {
        entry(&r, e).is_some_and(|p| p.path == want.as_os_str().as_encoded_bytes())
    };
    let wal = mnt.join("app.db-wal");
    for f in [&db, &wal] {
        assert!(
            ev.iter().any(|e| e.op == Op::Write && path_is(e, f)),
            "no write to {}",
            f.display()
        );
    }
    // Flushes: empty flush requests and writes that ask for one first (PREFLUSH).
    let is_flush = |e: &Event| e.op == Op::Flush || e.flags.contains(Flags::PREFLUSH);
    // Each commit's WAL writes, then one flush before the next commit's.
    let mut commits = 0;
    let mut flushes_after_wal = 0;
    let mut in_commit = false;
    for e in &ev {
        if e.op == Op::Write && path_is(e, &wal) {
            if !in_commit {
                commits += 1;
            }
            in_commit = true;
        } else if in_commit && is_flush(e) {
            flushes_after_wal += 1;
            in_commit = false;
        }
    }
    assert_eq!(
        commits, flushes_after_wal,
        "every run of WAL writes is followed by a flush"
    );
    let empty = ev.iter().filter(|e| e.op == Op::Flush).count();
    eprintln!("{commits} runs of WAL writes, each followed by a flush; {empty} empty flushes");
    // The commits (the CREATE TABLE is one too), and the WAL header synced before the first.
    assert!(
        (COMMITS..=COMMITS + 2).contains(&commits),
        "{commits} WAL syncs for {COMMITS} commits"
    );
    // The flush with the journal commit is issued to the device: it has a queue time.
    assert!(ev
        .iter()
        .filter(|e| e.op == Op::Write && e.flags.contains(Flags::PREFLUSH))
        .all(|e| e.queue_ns.is_some()));
    // Empty flushes are labelled [flush], not [unknown]; the last one is the overwrite's.
    let empty: Vec<&Event> = ev.iter().filter(|e| e.op == Op::Flush).collect();
    assert!(!empty.is_empty(), "no empty flush");
    for e in &empty {
        let p = entry(&r, e).unwrap();
        assert_eq!(
            (p.kind, p.path.as_slice()),
            (PathKind::Flush, &b"[flush]"[..])
        );
        assert_eq!(e.bytes, 0);
    }
    let overwrite = ev.iter().rposition(|e| path_is(e, &other)).unwrap();
    assert!(
        ev[overwrite..].iter().any(|e| e.op == Op::Flush),
        "no empty flush after the overwrite"
    );
    assert!(!r.tables().paths().any(|p| p.path == b"[unknown]"));
}
