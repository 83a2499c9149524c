//! Filesystem journals, cache flushes, and the follow-ups an fsync leaves behind (journal
//! blocks, a commit, a flush) that must come right after the I/O that caused them.

use iodump_format::{Op, Syscall};

use super::draft::{Draft, COMMIT, META_SYNC, PREFLUSH_SYNC};
use super::Generator;
use crate::host::devices::{D_BACKUP, D_ROOT, D_VDA};
use crate::host::threads::ThreadIndex;

/// The journaled filesystems, in the order of [`Generator`]'s journals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JournalId {
    /// `/` (ext4, jbd2).
    Root = 0,
    /// `/srv/backup` (xfs).
    Backup = 1,
    /// `/srv/app` (ext4, jbd2).
    Vda = 2,
}

impl JournalId {
    /// The journal of the filesystem on device index `dev`, if it has one.
    pub(crate) fn of_device(dev: u8) -> Option<JournalId> {
        match dev as usize {
            D_ROOT => Some(JournalId::Root),
            D_BACKUP => Some(JournalId::Backup),
            D_VDA => Some(JournalId::Vda),
            _ => None,
        }
    }
}

/// A filesystem journal: a circular log inside its `[journal]` extent.
pub(crate) struct Journal {
    pub(crate) file: u32,
    /// Where the next write goes, relative to the extent.
    pub(crate) pos_sectors: u64,
    /// Writes left before the next commit.
    pub(crate) until_commit: u32,
    pub(crate) thread: ThreadIndex,
    /// An xfs log (buffer writes, no commit blocks) rather than jbd2.
    pub(crate) xfs: bool,
}

/// An I/O that must follow the current one (fsync consequences).
#[derive(Clone, Copy)]
pub(crate) enum FollowUp {
    JournalBlocks(JournalId),
    JournalCommit(JournalId),
    Flush {
        thread: ThreadIndex,
        syscall: Syscall,
        dev: u8,
    },
}

/// A small FIFO of follow-ups (no allocation); pushes beyond 8 are dropped.
pub(crate) struct FollowUps {
    q: [FollowUp; 8],
    head: usize,
    len: usize,
}

impl FollowUps {
    pub(crate) fn new() -> FollowUps {
        FollowUps {
            q: [FollowUp::JournalBlocks(JournalId::Root); 8],
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn push(&mut self, f: FollowUp) {
        if self.len < self.q.len() {
            self.q[(self.head + self.len) % self.q.len()] = f;
            self.len += 1;
        }
    }

    pub(crate) fn pop(&mut self) -> Option<FollowUp> {
        if self.len == 0 {
            return None;
        }
        let f = self.q[self.head];
        self.head = (self.head + 1) % self.q.len();
        self.len -= 1;
        Some(f)
    }
}

impl Generator {
    /// The I/O a follow-up stands for.
    pub(super) fn follow_up(&mut self, f: FollowUp) -> Draft {
        match f {
            FollowUp::JournalBlocks(j) => self.journal(j, false),
            FollowUp::JournalCommit(j) => self.journal(j, true),
            FollowUp::Flush {
                thread,
                syscall,
                dev,
            } => self.flush(thread, syscall, dev),
        }
    }

    /// A cache flush of device `dev` by `thread` in `syscall`.
    pub(super) fn flush(&mut self, thread: ThreadIndex, syscall: Syscall, dev: u8) -> Draft {
        let file = self.notable.unknown[dev as usize];
        Draft::new(
            thread,
            file,
            (0, 0),
            Op::Flush,
            PREFLUSH_SYNC,
            Some(syscall),
        )
    }

    /// A journal write: descriptor and metadata blocks, then a commit block (ext4), or log
    /// buffer writes (xfs).
    pub(super) fn journal(&mut self, j: JournalId, commit: bool) -> Draft {
        let jr = &mut self.journals[j as usize];
        let fi = self.files[jr.file as usize];
        let commit = commit || jr.until_commit == 0;
        let pages = if jr.xfs {
            8 * (1 + self.rng.below(8)) as u32
        } else if commit {
            1
        } else {
            self.rng.pow2(1, 16)
        };
        let len_pages = fi.len_sectors / 8;
        if jr.pos_sectors / 8 + pages as u64 > len_pages {
            jr.pos_sectors = 0;
        }
        let sector = fi.start_sector + jr.pos_sectors;
        jr.pos_sectors += pages as u64 * 8;
        let flags = if commit || (jr.xfs && self.rng.chance(0.5)) {
            COMMIT
        } else {
            META_SYNC
        };
        if commit {
            jr.until_commit = self.rng.range(1, 6) as u32;
        } else {
            jr.until_commit -= 1;
        }
        let (thread, file) = (jr.thread, jr.file);
        let at = (sector, pages * 4096);
        Draft::new(thread, file, at, Op::Write, flags, Some(Syscall::JOURNAL)).sequential()
    }
}
