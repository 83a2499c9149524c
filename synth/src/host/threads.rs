//! The synthetic host's threads: one table of who runs (pid, tid, comm, cgroup), their
//! command lines, and [`Actors`], the thread indices the generator gives its roles to.

use iodump_format::Process;

const CG_ROOT: u64 = 1;
const CG_JOURNALD: u64 = 5_127;
const CG_RSYSLOG: u64 = 5_391;
const CG_UDISKS: u64 = 5_846;
const CG_NGINX: u64 = 6_012;
const CG_MYSQL: u64 = 6_298;
const CG_POSTGRES: u64 = 6_517;
const CG_APP: u64 = 7_043;
const CG_SESSION: u64 = 91_247;
const CG_BACKUP: u64 = 104_833;
const CG_FSTRIM: u64 = 104_861;

/// A thread's index in the thread table.
pub(crate) type ThreadIndex = u16;

/// A group of consecutive thread indices.
#[derive(Clone, Copy, Default)]
pub(crate) struct ThreadGroup {
    pub(crate) first: ThreadIndex,
    pub(crate) n: u16,
}

/// A run of `count` threads of the thread table: the i-th has pid `pid + i * pid_step` and
/// tid `tid + i * tid_step`.
struct ThreadRun {
    pid: u32,
    pid_step: u32,
    tid: u32,
    tid_step: u32,
    count: u32,
    comm: &'static str,
    cgroup_id: u64,
}

/// One thread.
const fn thread(pid: u32, tid: u32, comm: &'static str, cgroup_id: u64) -> ThreadRun {
    threads_of(pid, tid, 0, 1, comm, cgroup_id)
}

/// `count` threads of process `pid`, their tids `tid_step` apart.
const fn threads_of(
    pid: u32,
    first_tid: u32,
    tid_step: u32,
    count: u32,
    comm: &'static str,
    cgroup_id: u64,
) -> ThreadRun {
    ThreadRun {
        pid,
        pid_step: 0,
        tid: first_tid,
        tid_step,
        count,
        comm,
        cgroup_id,
    }
}

/// `count` single-threaded processes (tid = pid), their pids `pid_step` apart.
const fn processes(
    first_pid: u32,
    pid_step: u32,
    count: u32,
    comm: &'static str,
    cgroup_id: u64,
) -> ThreadRun {
    ThreadRun {
        pid: first_pid,
        pid_step,
        tid: first_pid,
        tid_step: pid_step,
        count,
        comm,
        cgroup_id,
    }
}

/// Every thread of the host, in table order (a [`ThreadGroup`] is a run of this table).
const THREADS: &[ThreadRun] = &[
    // Kernel threads.
    thread(98, 98, "kswapd0", CG_ROOT),
    thread(201, 201, "kworker/1:1H", CG_ROOT),
    // The kernel keeps 15 bytes of a comm: "jbd2/nvme0n1p2-8" is seen as "jbd2/nvme0n1p2-".
    thread(412, 412, "jbd2/nvme0n1p2-", CG_ROOT),
    thread(731, 731, "jbd2/vda-8", CG_ROOT),
    thread(755, 755, "xfsaild/sda1", CG_ROOT),
    thread(17_920, 17_920, "kworker/u8:0", CG_ROOT),
    thread(18_233, 18_233, "kworker/u8:2", CG_ROOT),
    thread(18_410, 18_410, "kworker/u8:5", CG_ROOT),
    // System services.
    thread(389, 389, "systemd-journal", CG_JOURNALD),
    thread(812, 812, "rsyslogd", CG_RSYSLOG),
    thread(812, 843, "in:imuxsock", CG_RSYSLOG),
    thread(812, 845, "rs:main Q:Reg", CG_RSYSLOG),
    thread(901, 901, "udisksd", CG_UDISKS),
    threads_of(1204, 1204, 1, 5, "nginx", CG_NGINX),
    // mysqld: one process, many named threads.
    thread(1423, 1423, "mysqld", CG_MYSQL),
    thread(1423, 1426, "ib_log_writer", CG_MYSQL),
    thread(1423, 1427, "ib_log_flush", CG_MYSQL),
    thread(1423, 1428, "ib_log_checkpt", CG_MYSQL),
    thread(1423, 1429, "ib_srv_purge", CG_MYSQL),
    thread(1423, 1430, "ib_io_rd-1", CG_MYSQL),
    thread(1423, 1431, "ib_io_rd-2", CG_MYSQL),
    thread(1423, 1432, "ib_io_rd-3", CG_MYSQL),
    thread(1423, 1433, "ib_io_rd-4", CG_MYSQL),
    thread(1423, 1434, "ib_io_wr-1", CG_MYSQL),
    thread(1423, 1435, "ib_io_wr-2", CG_MYSQL),
    thread(1423, 1436, "ib_io_wr-3", CG_MYSQL),
    thread(1423, 1437, "ib_io_wr-4", CG_MYSQL),
    thread(1423, 1438, "ib_pg_flush_co", CG_MYSQL),
    threads_of(1423, 1440, 3, 24, "mysqld", CG_MYSQL),
    // postgres: one process per backend.
    thread(1502, 1502, "postgres", CG_POSTGRES),
    processes(1510, 1, 4, "postgres", CG_POSTGRES),
    processes(2101, 17, 8, "postgres", CG_POSTGRES),
    // A java service with named threads.
    thread(2287, 2287, "java", CG_APP),
    thread(2287, 2295, "GC Thread#0", CG_APP),
    thread(2287, 2299, "VM Thread", CG_APP),
    thread(2287, 2301, "C2 CompilerThre", CG_APP),
    threads_of(2287, 2340, 1, 8, "http-nio-8080-e", CG_APP),
    thread(2287, 2360, "Lucene Merge Th", CG_APP),
    // An interactive session.
    thread(25_100, 25_131, "Cache2 I/O", CG_SESSION),
    thread(26_001, 26_001, "code", CG_SESSION),
    thread(27_001, 27_001, "bash", CG_SESSION),
    thread(28_110, 28_110, "vim", CG_SESSION),
    // fio: four forked jobs (libaio, io_uring) and four threads of the main process (psync),
    // and two sequential writers.
    processes(30_215, 1, 4, "fio", CG_SESSION),
    threads_of(30_211, 30_220, 1, 4, "fio", CG_SESSION),
    processes(30_231, 1, 2, "fio", CG_SESSION),
    // Commands.
    thread(30_301, 30_301, "dd", CG_SESSION),
    thread(30_330, 30_330, "tar", CG_BACKUP),
    thread(30_331, 30_331, "zstd", CG_BACKUP),
    thread(30_402, 30_402, "pg_basebackup", CG_BACKUP),
    thread(30_510, 30_510, "rsync", CG_BACKUP),
    thread(30_511, 30_511, "rsync", CG_BACKUP),
    thread(30_620, 30_620, "cp", CG_SESSION),
    thread(30_701, 30_701, "cat", CG_SESSION),
    thread(30_780, 30_780, "git", CG_SESSION),
    thread(30_820, 30_820, "python3", CG_SESSION),
    thread(30_850, 30_850, "grep", CG_SESSION),
    thread(30_870, 30_870, "find", CG_SESSION),
    thread(30_901, 30_901, "fstrim", CG_FSTRIM),
    thread(30_950, 30_950, "blkid", CG_UDISKS),
];

/// The command line of a synthetic process, as `/proc/PID/cmdline` would show it (arguments
/// joined by spaces); `None` for kernel threads.
fn command_line(pid: u32) -> Option<String> {
    let pg = |role: &str| Some(format!("postgres: 16/main: {role}"));
    match pid {
        389 => Some("/usr/lib/systemd/systemd-journald".into()),
        812 => Some("/usr/sbin/rsyslogd -n -iNONE".into()),
        901 => Some("/usr/libexec/udisks2/udisksd".into()),
        1204 => Some("nginx: worker process".into()),
        1423 => Some("/usr/sbin/mysqld".into()),
        1502 => Some(
            "/usr/lib/postgresql/16/bin/postgres -D /var/lib/postgresql/16/main -c \
             config_file=/etc/postgresql/16/main/postgresql.conf"
                .into(),
        ),
        1510 => pg("checkpointer"),
        1511 => pg("background writer"),
        1512 => pg("walwriter"),
        1513 => pg("autovacuum launcher"),
        2101..=2300 if (pid - 2101).is_multiple_of(17) => pg("app shop [local] idle"),
        2287 => Some("java -Xmx4g -jar /opt/app/app.jar --server.port=8080".into()),
        25_100 => Some("/usr/lib/firefox/firefox -contentproc -isForBrowser".into()),
        26_001 => Some("/usr/share/code/code --unity-launch".into()),
        27_001 => Some("-bash".into()),
        28_110 => Some("vim notes.md".into()),
        30_211..=30_232 => Some(format!("fio --name=job{} jobs.fio", pid - 30_211)),
        30_301 => Some("dd if=/dev/zero of=/data/zero bs=1M count=4096 oflag=direct".into()),
        30_330 => Some("tar -cf - /var/lib/postgresql".into()),
        30_331 => Some("zstd -T0 -o /backup/pg.tar.zst".into()),
        30_402 => Some("pg_basebackup -D /backup/base -X stream".into()),
        30_510 => Some("rsync -a /srv/ backup:/srv/".into()),
        30_511 => Some("rsync --server -logDtpre.iLsfxCIvu . /srv/".into()),
        30_620 => Some("cp -r /srv/media /data/media".into()),
        30_701 => Some("cat /var/log/syslog".into()),
        30_780 => Some("git status".into()),
        30_820 => Some("python3 etl.py --day 2026-01-01".into()),
        30_850 => Some("grep -r TODO /home/dev/src".into()),
        30_870 => Some("find / -xdev -name *.conf".into()),
        30_901 => Some("/sbin/fstrim --listed-in /etc/fstab --verbose".into()),
        30_950 => Some("blkid -o udev -p /dev/sdb1".into()),
        _ => None,
    }
}

/// The thread table ([`THREADS`], with command lines) and the actors' indices in it.
pub(crate) fn threads() -> (Vec<Process>, Actors) {
    let mut table = Vec::new();
    for run in THREADS {
        for i in 0..run.count {
            let pid = run.pid + i * run.pid_step;
            table.push(Process {
                tid: run.tid + i * run.tid_step,
                pid,
                comm: run.comm.as_bytes().to_vec(),
                cgroup_id: run.cgroup_id,
                args: command_line(pid).map(|a| a.into_bytes()),
            });
        }
    }
    let actors = Actors::find(&table);
    (table, actors)
}

/// Thread indices of the actors: the threads the generator gives its roles to.
pub(crate) struct Actors {
    pub(crate) kswapd: ThreadIndex,
    pub(crate) jbd2_root: ThreadIndex,
    pub(crate) jbd2_vda: ThreadIndex,
    pub(crate) xfsaild: ThreadIndex,
    /// The kworker that writes xfs's log on the backup disk.
    pub(crate) xfs_log_worker: ThreadIndex,
    /// The flusher kworkers of `/`, `/srv/backup` and `/srv/app`.
    pub(crate) writeback_root: ThreadIndex,
    pub(crate) writeback_backup: ThreadIndex,
    pub(crate) writeback_vda: ThreadIndex,
    pub(crate) journald: ThreadIndex,
    /// rsyslogd's main queue thread (which writes the logs).
    pub(crate) rsyslog: ThreadIndex,
    pub(crate) udisksd: ThreadIndex,
    pub(crate) nginx: ThreadGroup,
    pub(crate) mysqld: ThreadIndex,
    pub(crate) mysql_connections: ThreadGroup,
    pub(crate) mysql_readers: ThreadGroup,
    pub(crate) mysql_writers: ThreadGroup,
    /// ib_pg_flush_co, InnoDB's page flush coordinator.
    pub(crate) mysql_page_flusher: ThreadIndex,
    pub(crate) mysql_log_writer: ThreadIndex,
    pub(crate) mysql_log_flusher: ThreadIndex,
    pub(crate) pg_postmaster: ThreadIndex,
    pub(crate) pg_checkpointer: ThreadIndex,
    pub(crate) pg_bgwriter: ThreadIndex,
    pub(crate) pg_walwriter: ThreadIndex,
    pub(crate) pg_backends: ThreadGroup,
    pub(crate) java: ThreadIndex,
    /// The http workers and the Lucene merge thread.
    pub(crate) java_workers: ThreadGroup,
    /// Firefox's cache I/O thread.
    pub(crate) firefox: ThreadIndex,
    /// The random-read jobs: 0–1 libaio, 2–3 io_uring, 4–7 psync.
    pub(crate) fio_random: [ThreadIndex; 8],
    pub(crate) fio_sequential: [ThreadIndex; 2],
    pub(crate) dd: ThreadIndex,
    pub(crate) tar: ThreadIndex,
    pub(crate) zstd: ThreadIndex,
    pub(crate) pg_basebackup: ThreadIndex,
    pub(crate) rsync_sender: ThreadIndex,
    pub(crate) rsync_receiver: ThreadIndex,
    pub(crate) cp: ThreadIndex,
    pub(crate) cat: ThreadIndex,
    pub(crate) vim: ThreadIndex,
    pub(crate) git: ThreadIndex,
    pub(crate) code: ThreadIndex,
    pub(crate) python3: ThreadIndex,
    pub(crate) bash: ThreadIndex,
    pub(crate) grep: ThreadIndex,
    pub(crate) find: ThreadIndex,
    pub(crate) fstrim: ThreadIndex,
    pub(crate) blkid: ThreadIndex,
}

impl Actors {
    /// Looks the actors up in `table` by tid.
    fn find(table: &[Process]) -> Actors {
        let at = |tid: u32| -> ThreadIndex {
            let i = table.iter().position(|t| t.tid == tid);
            i.expect("every actor is in the thread table") as ThreadIndex
        };
        let group = |first_tid: u32, n: u16| ThreadGroup {
            first: at(first_tid),
            n,
        };
        Actors {
            kswapd: at(98),
            jbd2_root: at(412),
            jbd2_vda: at(731),
            xfsaild: at(755),
            xfs_log_worker: at(201),
            writeback_root: at(17_920),
            writeback_backup: at(18_233),
            writeback_vda: at(18_410),
            journald: at(389),
            rsyslog: at(845),
            udisksd: at(901),
            nginx: group(1204, 5),
            mysqld: at(1423),
            mysql_connections: group(1440, 24),
            mysql_readers: group(1430, 4),
            mysql_writers: group(1434, 4),
            mysql_page_flusher: at(1438),
            mysql_log_writer: at(1426),
            mysql_log_flusher: at(1427),
            pg_postmaster: at(1502),
            pg_checkpointer: at(1510),
            pg_bgwriter: at(1511),
            pg_walwriter: at(1512),
            pg_backends: group(2101, 8),
            java: at(2287),
            java_workers: group(2340, 9),
            firefox: at(25_131),
            fio_random: [
                30_215, 30_216, 30_217, 30_218, 30_220, 30_221, 30_222, 30_223,
            ]
            .map(at),
            fio_sequential: [at(30_231), at(30_232)],
            dd: at(30_301),
            tar: at(30_330),
            zstd: at(30_331),
            pg_basebackup: at(30_402),
            rsync_sender: at(30_510),
            rsync_receiver: at(30_511),
            cp: at(30_620),
            cat: at(30_701),
            vim: at(28_110),
            git: at(30_780),
            code: at(26_001),
            python3: at(30_820),
            bash: at(27_001),
            grep: at(30_850),
            find: at(30_870),
            fstrim: at(30_901),
            blkid: at(30_950),
        }
    }
}
