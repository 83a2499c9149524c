//! Catalogue sections of system files: software in `/usr` and `/etc`, logs in `/var`,
//! `/boot`, and the java service on `/srv/app` (vda); all of them into the builder's
//! [`system`](super::builder::Builder::system) list, the mapped ones into
//! [`mapped`](super::FileLists::mapped) too.

use super::builder::{log_normal, Builder, Size, GIB, KIB, MIB};
use super::names::{
    BINS, DOMAINS, JARS, LIBS, LOCALES, LUCENE_EXT, PY_MODULES, PY_PACKAGES, WORDS,
};
use super::FileClass;
use crate::host::devices::{D_BOOT, D_ROOT, D_VDA};
use crate::host::threads::{Actors, ThreadIndex};

const SYS: FileClass = FileClass::SysLib;

const LIBRARY: Size = log_normal(900.0 * KIB as f64, 1.2, 16 * KIB, 120 * MIB);
const EXECUTABLE: Size = log_normal(300.0 * KIB as f64, 1.0, 16 * KIB, 90 * MIB);
/// Large executables, libraries and data files, mapped.
const MAPPED_FILES: [(&str, u64); 12] = [
    ("/usr/sbin/mysqld", 68 * MIB),
    ("/usr/lib/postgresql/15/bin/postgres", 9 * MIB),
    ("/usr/libexec/gcc/x86_64-linux-gnu/13/cc1", 34 * MIB),
    ("/usr/lib/jvm/java-21-openjdk-amd64/lib/modules", 138 * MIB),
    (
        "/usr/lib/jvm/java-21-openjdk-amd64/lib/server/libjvm.so",
        22 * MIB,
    ),
    (
        "/usr/lib/jvm/java-21-openjdk-amd64/lib/libjava.so",
        200 * KIB,
    ),
    (
        "/usr/lib/jvm/java-21-openjdk-amd64/lib/libnio.so",
        100 * KIB,
    ),
    (
        "/usr/lib/jvm/java-21-openjdk-amd64/lib/libzip.so",
        100 * KIB,
    ),
    (
        "/usr/lib/jvm/java-21-openjdk-amd64/lib/libnet.so",
        120 * KIB,
    ),
    ("/usr/lib/jvm/java-21-openjdk-amd64/bin/java", 16 * KIB),
    ("/usr/lib/locale/locale-archive", 3 * MIB),
    ("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", 240 * KIB),
];
const PY_MODULE: Size = log_normal(40.0 * KIB as f64, 0.9, 2 * KIB, 400 * KIB);
const PY_PACKAGE_FILE: Size = log_normal(12.0 * KIB as f64, 1.0, KIB, 300 * KIB);
const TRANSLATION: Size = log_normal(60.0 * KIB as f64, 0.7, 4 * KIB, 600 * KIB);
const MAN_PAGE: Size = log_normal(6.0 * KIB as f64, 0.8, KIB, 100 * KIB);
const ETC_FILES: [&str; 16] = [
    "passwd",
    "group",
    "hosts",
    "resolv.conf",
    "nsswitch.conf",
    "ld.so.cache",
    "ssl/certs/ca-certificates.crt",
    "mysql/mysql.conf.d/mysqld.cnf",
    "postgresql/15/main/postgresql.conf",
    "nginx/nginx.conf",
    "nginx/sites-enabled/default",
    "systemd/journald.conf",
    "fstab",
    "sudoers",
    "services",
    "protocols",
];

const LOG: Size = log_normal(64.0 * MIB as f64, 0.8, 4 * MIB, 512 * MIB);

const BOOT_FILES: [(&str, u64); 8] = [
    ("vmlinuz-6.18.0-synth", 15 * MIB),
    ("initrd.img-6.18.0-synth", 74 * MIB),
    ("System.map-6.18.0-synth", 9 * MIB),
    ("config-6.18.0-synth", 290 * KIB),
    ("grub/grub.cfg", 12 * KIB),
    ("grub/grubenv", 4 * KIB),
    ("grub/x86_64-efi/normal.mod", 60 * KIB),
    ("grub/fonts/unicode.pf2", 2 * MIB),
];

const JAR: Size = log_normal(1.5 * MIB as f64, 0.9, 40 * KIB, 30 * MIB);
const LUCENE_FILE: Size = log_normal(20.0 * MIB as f64, 1.6, 4 * KIB, 5 * GIB);
const JAVA_LOGS: [&str; 4] = ["app.log", "gc.log", "access.log", "app-2026-01-14.log.gz"];

/// Libraries, executables, Python (modules with their bytecode, packages), translations,
/// man pages and `/etc`.
pub(super) fn software(b: &mut Builder) {
    b.dir(D_ROOT);
    let libs = b.add_each(
        D_ROOT,
        "/usr/lib/x86_64-linux-gnu/",
        &LIBS,
        "",
        LIBRARY,
        SYS,
    );
    mapped(b, libs);
    b.dir(D_ROOT);
    let bins = b.add_each(D_ROOT, "/usr/bin/", &BINS, "", EXECUTABLE, SYS);
    mapped(b, bins);
    let big = b.add_sized(D_ROOT, "", &MAPPED_FILES, SYS);
    mapped(b, big);
    b.dir(D_ROOT);
    for m in PY_MODULES {
        let bytes = b.draw(PY_MODULE);
        let f = b.file(D_ROOT, format!("/usr/lib/python3.12/{m}.py"), bytes, SYS);
        b.system.push(f);
        let (dir, leaf) = match m.rsplit_once('/') {
            Some((d, l)) => (format!("/usr/lib/python3.12/{d}"), l),
            None => ("/usr/lib/python3.12".to_string(), m),
        };
        let pyc = format!("{dir}/__pycache__/{leaf}.cpython-312.pyc");
        let f = b.file(D_ROOT, pyc, bytes / 2 + 1024, SYS);
        b.system.push(f);
    }
    for p in PY_PACKAGES {
        b.dir(D_ROOT);
        let mut words = WORDS;
        b.rng.shuffle(&mut words);
        let names: Vec<&str> = std::iter::once("__init__")
            .chain(words[..9].iter().copied())
            .collect();
        let dir = format!("/usr/lib/python3/dist-packages/{p}/");
        let files = b.add_each(D_ROOT, &dir, &names, ".py", PY_PACKAGE_FILE, SYS);
        b.system.extend(files);
    }
    for l in LOCALES {
        b.dir(D_ROOT);
        let dir = format!("/usr/share/locale/{l}/LC_MESSAGES/");
        let files = b.add_each(D_ROOT, &dir, &DOMAINS, ".mo", TRANSLATION, SYS);
        b.system.extend(files);
    }
    b.dir(D_ROOT);
    let man = b.add_each(
        D_ROOT,
        "/usr/share/man/man1/",
        &BINS,
        ".1.gz",
        MAN_PAGE,
        SYS,
    );
    b.system.extend(man);
    b.dir(D_ROOT);
    let etc = b.add_each(D_ROOT, "/etc/", &ETC_FILES, "", Size::Bytes(8 * KIB), SYS);
    b.system.extend(etc);
}

/// Files that are mapped into memory (and are system files).
fn mapped(b: &mut Builder, files: Vec<u32>) {
    b.lists.mapped.extend_from_slice(&files);
    b.system.extend(files);
}

/// Logs, each dirtied by its writer, and a deleted upload of nginx's.
pub(super) fn logs(b: &mut Builder, actors: &Actors) {
    b.dir(D_ROOT);
    let machine_id = b.rng.hex(32);
    let journal = |name: &str| format!("/var/log/journal/{machine_id}/{name}");
    let mut logs: Vec<(String, ThreadIndex)> = vec![
        ("/var/log/syslog".into(), actors.rsyslog),
        ("/var/log/syslog.1".into(), actors.rsyslog),
        ("/var/log/auth.log".into(), actors.rsyslog),
        ("/var/log/kern.log".into(), actors.rsyslog),
        ("/var/log/dpkg.log".into(), actors.bash),
        ("/var/log/nginx/access.log".into(), actors.nginx.first + 1),
        ("/var/log/nginx/error.log".into(), actors.nginx.first + 2),
        ("/var/log/mysql/error.log".into(), actors.mysqld),
        (
            "/var/log/mysql/mysql-slow.log".into(),
            actors.mysql_connections.first + 5,
        ),
        (
            "/var/log/postgresql/postgresql-15-main.log".into(),
            actors.pg_postmaster,
        ),
        (journal("system.journal"), actors.journald),
        (journal("user-1000.journal"), actors.journald),
    ];
    for _ in 0..4 {
        let name = format!(
            "system@{}-{:016x}-{:016x}.journal",
            b.rng.hex(32),
            0x61a2_0000_0000u64 + b.rng.below(1 << 40),
            0x0006_2f00_0000_0000u64 + b.rng.below(1 << 40)
        );
        logs.push((journal(&name), actors.journald));
    }
    for (name, owner) in logs {
        let f = b.add(D_ROOT, name, LOG, FileClass::Log);
        b.files[f as usize].owner = owner;
        b.system.push(f);
    }
    let private = b.rng.hex(32);
    let f = b.file(
        D_ROOT,
        format!("/var/tmp/systemd-private-{private}-nginx.service-Xq3k9a/tmp/upload_0000000123"),
        2 * MIB,
        FileClass::Log,
    );
    b.files[f as usize].owner = actors.nginx.first + 3;
    b.delete(f);
    b.lists.deleted_root.push(f);
    b.system.push(f);
}

/// The kernel, initrd and boot loader files in `/boot`.
pub(super) fn boot(b: &mut Builder) {
    b.dir(D_BOOT);
    let files = b.add_sized(D_BOOT, "/boot/", &BOOT_FILES, FileClass::Boot);
    b.system.extend(files);
}

/// The java service on vda: its jars (mapped), eight Lucene indices of two shards (segment
/// files and translogs) and its logs, dirtied by the java process.
pub(super) fn java_service(b: &mut Builder, actors: &Actors) {
    b.dir(D_VDA);
    let jars = b.add_each(D_VDA, "/srv/app/lib/", &JARS, "", JAR, FileClass::JavaApp);
    mapped(b, jars);
    for i in 0..8 {
        let uuid = format!("{}-{}", b.rng.hex(10), b.rng.hex(11));
        for shard in 0..2 {
            lucene_shard(b, &format!("/srv/app/data/indices/{uuid}/{shard}/"));
        }
        if i == 0 {
            b.dir(D_VDA);
            let size = Size::Bytes(50 * MIB);
            for f in b.add_each(
                D_VDA,
                "/srv/app/logs/",
                &JAVA_LOGS,
                "",
                size,
                FileClass::JavaApp,
            ) {
                b.files[f as usize].owner = actors.java;
                b.system.push(f);
            }
        }
    }
}

/// One shard of a Lucene index in `dir`: 24 segment files, two translogs.
fn lucene_shard(b: &mut Builder, dir: &str) {
    b.dir(D_VDA);
    let mut seg = b.rng.range(40, 3000);
    for k in 0..24 {
        if k % LUCENE_EXT.len() == 0 {
            seg += b.rng.range(1, 60);
        }
        let ext = LUCENE_EXT[k % LUCENE_EXT.len()];
        let path = format!("{dir}index/_{}.{ext}", base36(seg));
        let f = b.add(D_VDA, path, LUCENE_FILE, FileClass::JavaApp);
        b.system.push(f);
    }
    let tlog = b.rng.range(100, 900);
    for t in 0..2 {
        let path = format!("{dir}translog/translog-{}.tlog", tlog + t);
        let f = b.file(D_VDA, path, 64 * MIB, FileClass::JavaApp);
        b.system.push(f);
    }
}

/// `n` in base 36, lowercase (Lucene's segment names).
fn base36(mut n: u64) -> String {
    const D: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    loop {
        s.push(D[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8(s).unwrap_or_default()
}
