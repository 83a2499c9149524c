//! Sequential streams: a writer or reader going through a list of files chunk by chunk
//! (InnoDB's redo, doublewrite and binlog, PostgreSQL's WAL, fio, dd, tar, pg_basebackup,
//! rsync, cp, cat), each issued directly, through writeback or as readahead, some followed by
//! flushes or journal commits.

use iodump_format::{Flags, Op, Syscall};

use super::draft::{Draft, SYNC, SYNC_FUA};
use super::journal::{FollowUp, JournalId};
use super::Generator;
use crate::catalogue::Catalogue;
use crate::host::threads::{Actors, ThreadGroup, ThreadIndex};
use crate::rng::Rng;

/// The streams, in the order of [`Generator`]'s streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StreamId {
    /// InnoDB's redo log.
    Redo,
    /// InnoDB's doublewrite buffer.
    Doublewrite,
    Binlog,
    /// PostgreSQL's WAL.
    Wal,
    FioSeq0,
    FioSeq1,
    Dd,
    /// tar | zstd into a tarball on the backup disk.
    Tar,
    BaseBackup,
    Rsync,
    Cp,
    /// What tar reads.
    TarRead,
    /// What rsync reads.
    RsyncRead,
    /// What cp reads.
    CpRead,
    Cat,
}

impl StreamId {
    const ALL: [StreamId; 15] = [
        StreamId::Redo,
        StreamId::Doublewrite,
        StreamId::Binlog,
        StreamId::Wal,
        StreamId::FioSeq0,
        StreamId::FioSeq1,
        StreamId::Dd,
        StreamId::Tar,
        StreamId::BaseBackup,
        StreamId::Rsync,
        StreamId::Cp,
        StreamId::TarRead,
        StreamId::RsyncRead,
        StreamId::CpRead,
        StreamId::Cat,
    ];
}

/// Who issues a stream's I/O.
#[derive(Clone, Copy)]
pub(crate) enum Issuer {
    /// The writer itself, with this syscall and these flags.
    Direct {
        thread: ThreadGroup,
        syscall: Syscall,
        flags: Flags,
    },
    /// A flusher thread on behalf of the dirtier.
    Writeback {
        flusher: ThreadIndex,
        dirtier: ThreadIndex,
    },
    /// Readahead in the reader's context.
    Readahead { thread: ThreadIndex },
}

/// What to do after some chunks of a stream.
#[derive(Clone, Copy)]
pub(crate) enum SyncPolicy {
    Never,
    /// A cache flush by this thread every n chunks.
    FlushEvery {
        n: u32,
        thread: ThreadIndex,
        syscall: Syscall,
    },
    /// A journal commit every n chunks.
    CommitEvery {
        n: u32,
    },
    /// A journal commit at the end of every file.
    CommitAtFileEnd,
}

/// A sequential stream through a list of files.
pub(crate) struct Stream {
    files: Vec<u32>,
    /// Index in `files` of the file being gone through.
    current_file: usize,
    pos_sectors: u64,
    /// Chunk size range, in 4 KiB pages.
    min_pages: u32,
    max_pages: u32,
    issuer: Issuer,
    sync: SyncPolicy,
    chunks: u32,
}

/// The files a stream goes through: in catalogue order, or shuffled.
enum StreamFiles<'a> {
    InOrder(&'a [u32]),
    Shuffled(&'a [u32]),
}

/// Chunk size range of each stream, in 4 KiB pages, in [`StreamId`] order.
const CHUNK_PAGES: [(u32, u32); 15] = [
    (1, 16),    // Redo
    (4, 128),   // Doublewrite
    (1, 16),    // Binlog
    (2, 32),    // Wal
    (64, 64),   // FioSeq0
    (256, 256), // FioSeq1
    (256, 256), // Dd
    (32, 256),  // Tar
    (32, 256),  // BaseBackup
    (32, 256),  // Rsync
    (32, 256),  // Cp
    (32, 64),   // TarRead
    (32, 64),   // RsyncRead
    (32, 64),   // CpRead
    (4, 64),    // Cat
];

/// The streams, in [`StreamId`] order, each starting at the start of a random file of its
/// list.
pub(crate) fn streams(c: &Catalogue, a: &Actors, rng: &mut Rng) -> Vec<Stream> {
    let mut streams: Vec<Stream> = StreamId::ALL
        .iter()
        .map(|&id| {
            let files = match files(id, c) {
                StreamFiles::InOrder(files) => files.to_vec(),
                StreamFiles::Shuffled(files) => {
                    let mut files = files.to_vec();
                    rng.shuffle(&mut files);
                    files
                }
            };
            let (min_pages, max_pages) = CHUNK_PAGES[id as usize];
            let (issuer, sync) = issuer_and_sync(id, a);
            Stream {
                files,
                current_file: 0,
                pos_sectors: 0,
                min_pages,
                max_pages,
                issuer,
                sync,
                chunks: 0,
            }
        })
        .collect();
    for s in &mut streams {
        s.current_file = rng.below(s.files.len() as u64) as usize;
    }
    streams
}

/// The files stream `id` goes through.
fn files(id: StreamId, c: &Catalogue) -> StreamFiles<'_> {
    use StreamFiles::{InOrder, Shuffled};
    let (l, n) = (&c.lists, &c.notable);
    match id {
        StreamId::Redo => InOrder(&l.redo),
        StreamId::Doublewrite => InOrder(&l.dblwr),
        StreamId::Binlog => InOrder(&l.binlog),
        StreamId::Wal => InOrder(&l.pg_wal),
        StreamId::FioSeq0 => InOrder(&n.fio_sequential[..1]),
        StreamId::FioSeq1 => InOrder(&n.fio_sequential[1..]),
        StreamId::Dd => InOrder(std::slice::from_ref(&n.vm_image)),
        StreamId::Tar => InOrder(std::slice::from_ref(&n.tarball)),
        StreamId::BaseBackup => InOrder(&l.backup_pg),
        StreamId::Rsync => InOrder(&l.backup_rsync),
        StreamId::Cp => InOrder(&l.import),
        StreamId::TarRead => Shuffled(&l.home),
        StreamId::RsyncRead => InOrder(&l.projects),
        StreamId::CpRead => InOrder(&l.pictures),
        StreamId::Cat => Shuffled(&l.readable),
    }
}

/// Who issues stream `id`'s I/O, and what follows its chunks.
fn issuer_and_sync(id: StreamId, a: &Actors) -> (Issuer, SyncPolicy) {
    use SyncPolicy::{CommitAtFileEnd, CommitEvery, Never};
    match id {
        StreamId::Redo => (
            direct(a.mysql_log_writer, Syscall::PWRITE64, SYNC_FUA),
            flush_every(4, a.mysql_log_flusher, Syscall::FSYNC),
        ),
        StreamId::Doublewrite => (direct(a.mysql_page_flusher, Syscall::PWRITE64, SYNC), Never),
        StreamId::Binlog => {
            let (thread, syscall) = (a.mysql_connections, Syscall::FDATASYNC);
            let issuer = Issuer::Direct {
                thread,
                syscall,
                flags: SYNC,
            };
            (issuer, CommitEvery { n: 6 })
        }
        StreamId::Wal => (
            direct(a.pg_walwriter, Syscall::FDATASYNC, SYNC),
            CommitEvery { n: 16 },
        ),
        StreamId::FioSeq0 => (
            direct(a.fio_sequential[0], Syscall::IO_SUBMIT, SYNC),
            flush_every(64, a.fio_sequential[0], Syscall::FSYNC),
        ),
        StreamId::FioSeq1 => (
            direct(a.fio_sequential[1], Syscall::IO_URING_ENTER, SYNC),
            Never,
        ),
        StreamId::Dd => (direct(a.dd, Syscall::WRITE, SYNC), Never),
        StreamId::Tar => (writeback(a.writeback_backup, a.zstd), Never),
        StreamId::BaseBackup => (
            writeback(a.writeback_backup, a.pg_basebackup),
            CommitAtFileEnd,
        ),
        StreamId::Rsync => (writeback(a.writeback_backup, a.rsync_receiver), Never),
        StreamId::Cp => (writeback(a.writeback_vda, a.cp), Never),
        StreamId::TarRead => (readahead(a.tar), Never),
        StreamId::RsyncRead => (readahead(a.rsync_sender), Never),
        StreamId::CpRead => (readahead(a.cp), Never),
        StreamId::Cat => (readahead(a.cat), Never),
    }
}

/// Writes by `thread` itself.
fn direct(thread: ThreadIndex, syscall: Syscall, flags: Flags) -> Issuer {
    let thread = ThreadGroup {
        first: thread,
        n: 1,
    };
    Issuer::Direct {
        thread,
        syscall,
        flags,
    }
}

/// Writes by `flusher` of what `dirtier` wrote.
fn writeback(flusher: ThreadIndex, dirtier: ThreadIndex) -> Issuer {
    Issuer::Writeback { flusher, dirtier }
}

/// Reads by readahead in `thread`'s context.
fn readahead(thread: ThreadIndex) -> Issuer {
    Issuer::Readahead { thread }
}

fn flush_every(n: u32, thread: ThreadIndex, syscall: Syscall) -> SyncPolicy {
    SyncPolicy::FlushEvery { n, thread, syscall }
}

impl Generator {
    /// The next chunk of stream `id`, and its flush or commit when one is due.
    pub(super) fn stream(&mut self, id: StreamId) -> Draft {
        let pages = self.chunk_pages(id);
        let st = &mut self.streams[id as usize];
        let file = st.files[st.current_file];
        let fi = self.files[file as usize];
        let left = fi.len_sectors - st.pos_sectors;
        let n = (pages as u64 * 8).min(left);
        let sector = fi.start_sector + st.pos_sectors;
        st.pos_sectors += n;
        let mut file_end = false;
        if st.pos_sectors >= fi.len_sectors {
            st.current_file = (st.current_file + 1) % st.files.len();
            st.pos_sectors = 0;
            file_end = true;
        }
        st.chunks += 1;
        let (sync, chunks, issuer) = (st.sync, st.chunks, st.issuer);
        self.sync_after_chunk(sync, chunks, fi.dev, file_end);
        self.issue(issuer, file, (sector, (n * 512) as u32))
            .sequential()
    }

    /// The size of the next chunk of stream `id`, in pages: mostly large chunks for big
    /// streams, a spread for small ones.
    fn chunk_pages(&mut self, id: StreamId) -> u32 {
        let st = &self.streams[id as usize];
        if st.min_pages == st.max_pages {
            return st.min_pages;
        }
        let lo = st.min_pages as u64;
        let hi = st.max_pages as u64;
        let x = self.rng.range(lo, hi);
        let y = self.rng.range(lo, hi);
        x.min(y) as u32
    }

    /// Queues the flush or journal commit `sync` asks for after `chunks` chunks on device
    /// index `dev`, the last one ending a file when `file_end`.
    fn sync_after_chunk(&mut self, sync: SyncPolicy, chunks: u32, dev: u8, file_end: bool) {
        match sync {
            SyncPolicy::Never => {}
            SyncPolicy::FlushEvery { n, thread, syscall } => {
                if chunks.is_multiple_of(n) {
                    let flush = FollowUp::Flush {
                        thread,
                        syscall,
                        dev,
                    };
                    self.follow_ups.push(flush);
                }
            }
            SyncPolicy::CommitEvery { n } => {
                if chunks.is_multiple_of(n) {
                    if let Some(j) = JournalId::of_device(dev) {
                        self.follow_ups.push(FollowUp::JournalBlocks(j));
                        self.follow_ups.push(FollowUp::JournalCommit(j));
                    }
                }
            }
            SyncPolicy::CommitAtFileEnd => {
                if file_end {
                    if let Some(j) = JournalId::of_device(dev) {
                        self.follow_ups.push(FollowUp::JournalCommit(j));
                    }
                }
            }
        }
    }

    /// A stream's chunk at `at` of `file`, as its issuer issues it.
    fn issue(&mut self, issuer: Issuer, file: u32, at: (u64, u32)) -> Draft {
        match issuer {
            Issuer::Direct {
                thread,
                syscall,
                flags,
            } => {
                let t = self.pick(thread);
                Draft::new(t, file, at, Op::Write, flags, Some(syscall))
            }
            Issuer::Writeback { flusher, dirtier } => {
                Draft::new(dirtier, file, at, Op::Write, Flags::BACKGROUND, None)
                    .written_back(flusher, dirtier)
            }
            Issuer::Readahead { thread } => Draft::new(
                thread,
                file,
                at,
                Op::Read,
                Flags::READAHEAD,
                Some(Syscall::READAHEAD),
            ),
        }
    }
}
