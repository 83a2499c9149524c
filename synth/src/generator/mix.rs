//! What each workload is made of: its activities with their weights, and which threads play
//! its recurring roles (metadata readers, fsync callers, readers and writers of home files,
//! users of libraries and of swapped-out memory).

use iodump_format::Syscall;

use super::activity::Activity;
use super::journal::JournalId;
use super::streams::StreamId;
use crate::host::devices::{D_ROOT, D_VDA};
use crate::host::threads::{Actors, ThreadIndex};
use crate::workload::Workload;

/// Activities with their weights, per mille.
type Mix = &'static [(u32, Activity)];

const RANDREAD: Mix = &[
    (760, Activity::FioRandomRead),
    (190, Activity::SystemIo),
    (15, Activity::Journal(JournalId::Root)),
    (15, Activity::MetadataIo),
    (10, Activity::Swap),
    (5, Activity::CacheFlush),
    (5, Activity::PageFault),
];

const SEQWRITE: Mix = &[
    (150, Activity::Stream(StreamId::FioSeq0)),
    (120, Activity::Stream(StreamId::FioSeq1)),
    (120, Activity::Stream(StreamId::Dd)),
    (120, Activity::Stream(StreamId::Tar)),
    (150, Activity::Stream(StreamId::BaseBackup)),
    (120, Activity::Stream(StreamId::Rsync)),
    (60, Activity::Stream(StreamId::Cp)),
    (60, Activity::Stream(StreamId::TarRead)),
    (40, Activity::Stream(StreamId::RsyncRead)),
    (20, Activity::Stream(StreamId::CpRead)),
    (10, Activity::Journal(JournalId::Root)),
    (10, Activity::Journal(JournalId::Backup)),
    (5, Activity::Journal(JournalId::Vda)),
    (10, Activity::MetadataIo),
    (5, Activity::Swap),
];

const OLTP: Mix = &[
    (520, Activity::MysqlRead),
    (150, Activity::MysqlFlush),
    (40, Activity::Stream(StreamId::Doublewrite)),
    (120, Activity::Stream(StreamId::Redo)),
    (40, Activity::Stream(StreamId::Binlog)),
    (30, Activity::MysqlUndo),
    (30, Activity::Journal(JournalId::Root)),
    (20, Activity::MetadataIo),
    (10, Activity::CacheFlush),
    (30, Activity::SystemIo),
    (10, Activity::Swap),
];

const MIXED: Mix = &[
    (60, Activity::FioRandomRead),
    (140, Activity::MysqlRead),
    (40, Activity::MysqlFlush),
    (40, Activity::Stream(StreamId::Redo)),
    (10, Activity::Stream(StreamId::Doublewrite)),
    (10, Activity::Stream(StreamId::Binlog)),
    (10, Activity::MysqlUndo),
    (80, Activity::PgRead),
    (30, Activity::PgWrite),
    (30, Activity::Stream(StreamId::Wal)),
    (260, Activity::SystemIo),
    (40, Activity::Stream(StreamId::Cat)),
    (20, Activity::Stream(StreamId::CpRead)),
    (40, Activity::PageFault),
    (20, Activity::Swap),
    (10, Activity::Discard),
    (30, Activity::Journal(JournalId::Root)),
    (5, Activity::Journal(JournalId::Backup)),
    (10, Activity::Journal(JournalId::Vda)),
    (30, Activity::MetadataIo),
    (10, Activity::CacheFlush),
    (25, Activity::Stream(StreamId::Tar)),
    (25, Activity::Stream(StreamId::Rsync)),
    (20, Activity::Stream(StreamId::RsyncRead)),
    (5, Activity::RawDevice),
];

/// The activities of workload `w`, each repeated as many times as its weight, so that a
/// uniform pick is a weighted one.
pub(crate) fn activities(w: Workload) -> Vec<Activity> {
    let mix = match w {
        Workload::RandRead => RANDREAD,
        Workload::SeqWrite => SEQWRITE,
        Workload::Oltp => OLTP,
        Workload::Mixed => MIXED,
    };
    mix.iter()
        .flat_map(|&(weight, a)| std::iter::repeat_n(a, weight as usize))
        .collect()
}

/// A thread that calls fsync and so flushes a device's cache.
#[derive(Clone, Copy)]
pub(crate) struct Flusher {
    pub(crate) thread: ThreadIndex,
    pub(crate) syscall: Syscall,
    /// Device index.
    pub(crate) dev: u8,
}

/// The threads of a workload's recurring roles.
pub(crate) struct Roles {
    /// Read directories and inodes.
    pub(crate) meta_users: Vec<ThreadIndex>,
    pub(crate) flushers: Vec<Flusher>,
    pub(crate) home_readers: [ThreadIndex; 8],
    /// Dirty home files that have no owner.
    pub(crate) home_writers: [ThreadIndex; 5],
    /// Fault in and read libraries.
    pub(crate) lib_users: Vec<ThreadIndex>,
    /// Fault in swapped-out pages.
    pub(crate) swap_users: Vec<ThreadIndex>,
}

impl Roles {
    pub(crate) fn new(w: Workload, a: &Actors) -> Roles {
        let conn = |i: u16| a.mysql_connections.first + i;
        Roles {
            meta_users: meta_users(w, a),
            flushers: flushers(w, a),
            home_readers: [
                a.cat,
                a.cp,
                a.rsync_sender,
                a.git,
                a.vim,
                a.code,
                a.grep,
                a.python3,
            ],
            home_writers: [a.vim, a.code, a.git, a.python3, a.bash],
            lib_users: vec![
                a.bash,
                a.python3,
                a.git,
                a.code,
                a.java,
                a.mysqld,
                a.pg_backends.first + 3,
                a.java_workers.first + 1,
            ],
            swap_users: vec![
                a.java_workers.first,
                a.java_workers.first + 4,
                a.mysqld,
                conn(6),
                a.code,
                a.firefox,
            ],
        }
    }
}

fn meta_users(w: Workload, a: &Actors) -> Vec<ThreadIndex> {
    let conn = |i: u16| a.mysql_connections.first + i;
    match w {
        Workload::RandRead => vec![a.find, a.git, a.bash, a.python3, a.grep],
        Workload::SeqWrite => vec![
            a.tar,
            a.rsync_sender,
            a.rsync_receiver,
            a.pg_basebackup,
            a.cp,
        ],
        Workload::Oltp => vec![conn(0), conn(3), conn(7), conn(11), a.mysqld, a.rsyslog],
        Workload::Mixed => vec![
            a.find,
            a.git,
            a.bash,
            a.python3,
            conn(2),
            conn(9),
            a.pg_backends.first,
            a.java_workers.first + 2,
            a.rsync_sender,
            a.cat,
        ],
    }
}

fn flushers(w: Workload, a: &Actors) -> Vec<Flusher> {
    let fsync = |thread, dev: usize| Flusher {
        thread,
        syscall: Syscall::FSYNC,
        dev: dev as u8,
    };
    let fdatasync = |thread| Flusher {
        thread,
        syscall: Syscall::FDATASYNC,
        dev: D_ROOT as u8,
    };
    match w {
        Workload::RandRead => vec![fsync(a.journald, D_ROOT), fdatasync(a.fio_random[5])],
        Workload::SeqWrite => vec![fsync(a.fio_sequential[0], D_ROOT)],
        Workload::Oltp => vec![
            fsync(a.mysql_log_flusher, D_ROOT),
            fsync(a.mysql_log_flusher, D_ROOT),
            fdatasync(a.mysql_connections.first + 4),
        ],
        Workload::Mixed => vec![
            fsync(a.mysql_log_flusher, D_ROOT),
            fsync(a.pg_checkpointer, D_ROOT),
            fsync(a.journald, D_ROOT),
            fsync(a.java_workers.first + 8, D_VDA),
        ],
    }
}
