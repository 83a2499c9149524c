//! An I/O being put together, before it is timed, and the flag sets drafts use.

use iodump_format::{Flags, Op, Syscall};

use crate::host::threads::ThreadIndex;

pub(crate) const SYNC: Flags = Flags::SYNC;
pub(crate) const SYNC_FUA: Flags = Flags(Flags::SYNC.0 | Flags::FUA.0);
pub(crate) const META_SYNC: Flags = Flags(Flags::META.0 | Flags::SYNC.0);
/// A journal commit block.
pub(crate) const COMMIT: Flags =
    Flags(Flags::META.0 | Flags::SYNC.0 | Flags::PREFLUSH.0 | Flags::FUA.0);
pub(crate) const PREFLUSH_SYNC: Flags = Flags(Flags::PREFLUSH.0 | Flags::SYNC.0);
pub(crate) const META_BG: Flags = Flags(Flags::META.0 | Flags::BACKGROUND.0);
pub(crate) const NONE: Flags = Flags(0);
/// openat(2) (code 19; `iodump-format` names no constant for it).
pub(crate) const OPENAT: Syscall = Syscall(19);

/// An I/O being put together, before timing.
#[derive(Clone, Copy)]
pub(crate) struct Draft {
    pub(crate) thread: ThreadIndex,
    /// File index in the catalogue.
    pub(crate) file: u32,
    pub(crate) sector: u64,
    pub(crate) bytes: u32,
    pub(crate) op: Op,
    pub(crate) flags: Flags,
    pub(crate) syscall: Option<Syscall>,
    /// The thread that dirtied the pages a flusher writes back.
    pub(crate) dirtier: Option<ThreadIndex>,
    /// Sequential: the device's sequential service time applies.
    pub(crate) seq: bool,
}

impl Draft {
    /// A draft of `op` by `thread` at `at` = (sector, bytes) of `file`.
    pub(crate) fn new(
        thread: ThreadIndex,
        file: u32,
        at: (u64, u32),
        op: Op,
        flags: Flags,
        syscall: Option<Syscall>,
    ) -> Draft {
        Draft {
            thread,
            file,
            sector: at.0,
            bytes: at.1,
            op,
            flags,
            syscall,
            dirtier: None,
            seq: false,
        }
    }

    /// This draft, sequential.
    pub(crate) fn sequential(mut self) -> Draft {
        self.seq = true;
        self
    }

    /// This draft, written back by `flusher` on behalf of `dirtier`.
    pub(crate) fn written_back(mut self, flusher: ThreadIndex, dirtier: ThreadIndex) -> Draft {
        self.thread = flusher;
        self.flags = Flags::BACKGROUND;
        self.syscall = Some(Syscall::WRITEBACK);
        self.dirtier = Some(dirtier);
        self
    }
}
