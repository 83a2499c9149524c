//! The long tail of I/O: files of the system pool touched the way their class is (home files,
//! libraries, logs, the java service's files), and filesystem metadata.

use iodump_format::{Flags, Op, Syscall};

use super::draft::{Draft, META_BG, NONE, OPENAT, SYNC};
use super::journal::{FollowUp, JournalId};
use super::Generator;
use crate::catalogue::{CatalogueFile, FileClass, NO_OWNER};
use crate::host::devices::{D_BACKUP, D_BOOT, D_ROOT, D_VDA};
use crate::host::threads::ThreadIndex;

impl Generator {
    /// A file from the system pool, touched the way its class is.
    pub(super) fn system_io(&mut self) -> Draft {
        let file = self.pools.system.zipf(&mut self.rng);
        let fi = self.files[file as usize];
        let flusher = match fi.dev as usize {
            D_VDA => self.actors.writeback_vda,
            D_BACKUP => self.actors.writeback_backup,
            _ => self.actors.writeback_root,
        };
        match fi.class {
            FileClass::Home => self.home_io(file, fi, flusher),
            FileClass::SysLib | FileClass::Boot => self.library_io(file),
            FileClass::Log => self.log_io(file, fi, flusher),
            FileClass::JavaApp => self.java_io(file, flusher),
            _ => {
                let t = self.roles.home_readers[self.rng.below(8) as usize];
                let at = self.place(file, 1, 1);
                Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::READ))
            }
        }
    }

    /// A home file: read (by readahead for cat and cp), or written back for its owner or a
    /// home writer.
    fn home_io(&mut self, file: u32, fi: CatalogueFile, flusher: ThreadIndex) -> Draft {
        if self.rng.chance(0.65) {
            let t = self.roles.home_readers[self.rng.below(8) as usize];
            if t == self.actors.cat || t == self.actors.cp {
                let pages = self.rng.pow2(4, 32);
                let at = self.place(file, pages, 4);
                let (flags, sc) = (Flags::READAHEAD, Some(Syscall::READAHEAD));
                Draft::new(t, file, at, Op::Read, flags, sc)
            } else {
                let pages = self.rng.pow2(1, 16);
                let at = self.place(file, pages, 1);
                Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::READ))
            }
        } else {
            let pages = self.rng.pow2(1, 128);
            let at = self.place(file, pages, 1);
            let dirtier = if fi.owner != NO_OWNER {
                fi.owner
            } else {
                self.roles.home_writers[self.rng.below(5) as usize]
            };
            Draft::new(dirtier, file, at, Op::Write, NONE, None).written_back(flusher, dirtier)
        }
    }

    /// A library, executable or `/boot` file: faulted in, or read.
    fn library_io(&mut self, file: u32) -> Draft {
        let i = self.rng.below(self.roles.lib_users.len() as u64) as usize;
        let t = self.roles.lib_users[i];
        if self.rng.chance(0.55) {
            let pages = self.rng.pow2(4, 32);
            let at = self.place(file, pages, 4);
            let flags = if self.rng.chance(0.4) {
                Flags::READAHEAD
            } else {
                NONE
            };
            Draft::new(t, file, at, Op::Read, flags, Some(Syscall::PAGE_FAULT))
        } else {
            let pages = self.rng.pow2(1, 32);
            let at = self.place(file, pages, 1);
            let (flags, sc) = if pages >= 4 {
                (Flags::READAHEAD, Syscall::READAHEAD)
            } else {
                (NONE, Syscall::READ)
            };
            Draft::new(t, file, at, Op::Read, flags, Some(sc))
        }
    }

    /// A log: written back for its writer, or written in fsync (sometimes with a journal
    /// commit after it).
    fn log_io(&mut self, file: u32, fi: CatalogueFile, flusher: ThreadIndex) -> Draft {
        let owner = if fi.owner != NO_OWNER {
            fi.owner
        } else {
            self.actors.rsyslog
        };
        let pages = self.rng.pow2(1, 16);
        let at = self.place(file, pages, 1);
        if self.rng.chance(0.75) {
            Draft::new(owner, file, at, Op::Write, NONE, None).written_back(flusher, owner)
        } else {
            if self.rng.chance(0.3) {
                self.follow_ups
                    .push(FollowUp::JournalCommit(JournalId::Root));
            }
            Draft::new(owner, file, at, Op::Write, SYNC, Some(Syscall::FSYNC))
        }
    }

    /// A file of the java service, by a worker: read, faulted in, written back for java, or
    /// written in fsync (followed by a journal commit).
    fn java_io(&mut self, file: u32, flusher: ThreadIndex) -> Draft {
        let t = self.pick(self.actors.java_workers);
        let r = self.rng.below(100);
        if r < 45 {
            let pages = self.rng.pow2(4, 16);
            let at = self.place(file, pages, 4);
            Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
        } else if r < 65 {
            let pages = self.rng.pow2(4, 32);
            let at = self.place(file, pages, 4);
            let sc = Some(Syscall::PAGE_FAULT);
            Draft::new(t, file, at, Op::Read, Flags::READAHEAD, sc)
        } else if r < 92 {
            let pages = self.rng.pow2(1, 256);
            let at = self.place(file, pages, 1);
            let java = self.actors.java;
            Draft::new(t, file, at, Op::Write, NONE, None).written_back(flusher, java)
        } else {
            let pages = self.rng.pow2(1, 64);
            let at = self.place(file, pages, 1);
            self.follow_ups
                .push(FollowUp::JournalCommit(JournalId::Vda));
            Draft::new(t, file, at, Op::Write, SYNC, Some(Syscall::FSYNC))
        }
    }

    /// Metadata: inode table / directory / bitmap reads, and their writeback.
    pub(super) fn metadata_io(&mut self) -> Draft {
        let r = self.rng.below(100);
        let dev = if r < 75 {
            D_ROOT
        } else if r < 88 {
            D_BACKUP
        } else if r < 97 {
            D_VDA
        } else {
            D_BOOT
        };
        let file = self.notable.meta[dev];
        if self.rng.chance(0.25) {
            let pages = self.rng.pow2(1, 8);
            let at = self.place(file, pages, 1);
            let t = match dev {
                D_BACKUP => self.actors.xfsaild,
                D_VDA => self.actors.writeback_vda,
                _ => self.actors.writeback_root,
            };
            let sc = if dev == D_BACKUP {
                None
            } else {
                Some(Syscall::WRITEBACK)
            };
            Draft::new(t, file, at, Op::Write, META_BG, sc)
        } else {
            let i = self.rng.below(self.roles.meta_users.len() as u64) as usize;
            let t = self.roles.meta_users[i];
            let at = self.place(file, 1, 1);
            let sc = match self.rng.below(3) {
                0 => Some(OPENAT),
                1 => Some(Syscall::GETDENTS64),
                _ => None,
            };
            Draft::new(t, file, at, Op::Read, Flags::META, sc)
        }
    }
}
