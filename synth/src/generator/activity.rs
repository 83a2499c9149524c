//! The activities an event can come from (one is picked per event, by the workload's
//! weights), and the I/O each makes.

use iodump_format::{Flags, Op, Syscall};

use super::draft::{Draft, NONE, SYNC};
use super::journal::{FollowUp, JournalId};
use super::streams::StreamId;
use super::Generator;
use crate::catalogue::FileClass;
use crate::catalogue::MIB;
use crate::host::devices::{DEV_SECTORS, D_ROOT, D_SDA};

/// What the next event is about.
#[derive(Clone, Copy)]
pub(crate) enum Activity {
    /// fio's random 4–16 KiB reads (libaio, io_uring, psync).
    FioRandomRead,
    /// A 16 KiB InnoDB page read by a connection or a read thread.
    MysqlRead,
    /// A 16 KiB InnoDB page flush.
    MysqlFlush,
    /// A read or write of InnoDB's system, undo and temporary tablespaces.
    MysqlUndo,
    /// A PostgreSQL backend's page read or readahead.
    PgRead,
    /// A write by PostgreSQL's checkpointer (in fsync), or the write back of pages dirtied by
    /// the background writer or a backend.
    PgWrite,
    /// A file of the system pool, touched the way its class is.
    SystemIo,
    /// A fault on a mapped library, executable or jar.
    PageFault,
    /// Swap out by kswapd, or a fault on a swapped-out page.
    Swap,
    /// Inode table, directory and bitmap reads, and their write back.
    MetadataIo,
    /// A cache flush by one of the workload's fsync callers.
    CacheFlush,
    /// fstrim, or the journal thread discarding a deleted file.
    Discard,
    /// udisksd or blkid probing the raw SATA disk.
    RawDevice,
    Journal(JournalId),
    Stream(StreamId),
}

impl Generator {
    /// The I/O of an activity picked by the workload's weights.
    pub(super) fn activity(&mut self) -> Draft {
        let act = self.activities[self.rng.below(self.activities.len() as u64) as usize];
        match act {
            Activity::FioRandomRead => self.fio_random_read(),
            Activity::MysqlRead => self.mysql_read(),
            Activity::MysqlFlush => self.mysql_flush(),
            Activity::MysqlUndo => self.mysql_undo(),
            Activity::PgRead => self.pg_read(),
            Activity::PgWrite => self.pg_write(),
            Activity::SystemIo => self.system_io(),
            Activity::PageFault => self.page_fault(),
            Activity::Swap => self.swap(),
            Activity::MetadataIo => self.metadata_io(),
            Activity::CacheFlush => {
                let i = self.rng.below(self.roles.flushers.len() as u64) as usize;
                let f = self.roles.flushers[i];
                self.flush(f.thread, f.syscall, f.dev)
            }
            Activity::Discard => self.discard(),
            Activity::RawDevice => self.raw_device(),
            Activity::Journal(j) => self.journal(j, false),
            Activity::Stream(s) => self.stream(s),
        }
    }

    fn fio_random_read(&mut self) -> Draft {
        let j = self.rng.below(8) as usize;
        let (thread, file) = (self.actors.fio_random[j], self.notable.fio_random[j]);
        let (sc, flags) = match j {
            0 | 1 => (Syscall::IO_SUBMIT, NONE),
            2 | 3 => (Syscall::IO_URING_ENTER, Flags::NOWAIT),
            _ => (Syscall::PREAD64, NONE),
        };
        let r = self.rng.below(100);
        let pages = if r < 85 {
            1
        } else if r < 95 {
            2
        } else {
            4
        };
        let at = self.place(file, pages, 1);
        Draft::new(thread, file, at, Op::Read, flags, Some(sc))
    }

    fn mysql_read(&mut self) -> Draft {
        let file = self.pools.mysql.zipf(&mut self.rng);
        let at = self.place(file, 4, 4);
        if self.rng.chance(0.9) {
            let t = self.pick(self.actors.mysql_connections);
            Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
        } else {
            let t = self.pick(self.actors.mysql_readers);
            Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::IO_SUBMIT))
        }
    }

    fn mysql_flush(&mut self) -> Draft {
        let file = self.pools.mysql.zipf(&mut self.rng);
        let at = self.place(file, 4, 4);
        let t = if self.rng.chance(0.3) {
            self.actors.mysql_page_flusher
        } else {
            self.pick(self.actors.mysql_writers)
        };
        Draft::new(t, file, at, Op::Write, SYNC, Some(Syscall::IO_SUBMIT))
    }

    fn mysql_undo(&mut self) -> Draft {
        let i = self.rng.below(self.mysql_sys.len() as u64) as usize;
        let file = self.mysql_sys[i];
        let at = self.place(file, 4, 4);
        if self.rng.chance(0.6) {
            let t = self.pick(self.actors.mysql_connections);
            Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
        } else {
            let t = self.pick(self.actors.mysql_writers);
            Draft::new(t, file, at, Op::Write, SYNC, Some(Syscall::IO_SUBMIT))
        }
    }

    fn pg_read(&mut self) -> Draft {
        let file = self.pools.pg.zipf(&mut self.rng);
        let t = self.pick(self.actors.pg_backends);
        if self.rng.chance(0.85) {
            let at = self.place(file, 2, 2);
            Draft::new(t, file, at, Op::Read, NONE, Some(Syscall::PREAD64))
        } else {
            let at = self.place(file, 32, 32);
            let (flags, sc) = (Flags::READAHEAD, Some(Syscall::READAHEAD));
            Draft::new(t, file, at, Op::Read, flags, sc).sequential()
        }
    }

    fn pg_write(&mut self) -> Draft {
        let file = self.pools.pg.zipf(&mut self.rng);
        if self.rng.chance(0.5) {
            let pages = self.rng.pow2(2, 64);
            let at = self.place(file, pages, 2);
            let checkpointer = self.actors.pg_checkpointer;
            if self.rng.chance(0.03) {
                self.follow_ups
                    .push(FollowUp::JournalCommit(JournalId::Root));
                self.follow_ups.push(FollowUp::Flush {
                    thread: checkpointer,
                    syscall: Syscall::FSYNC,
                    dev: D_ROOT as u8,
                });
            }
            Draft::new(
                checkpointer,
                file,
                at,
                Op::Write,
                SYNC,
                Some(Syscall::FSYNC),
            )
        } else {
            let pages = self.rng.pow2(2, 32);
            let at = self.place(file, pages, 2);
            let dirtier = if self.rng.chance(0.4) {
                self.actors.pg_bgwriter
            } else {
                self.pick(self.actors.pg_backends)
            };
            Draft::new(dirtier, file, at, Op::Write, NONE, None)
                .written_back(self.actors.writeback_root, dirtier)
        }
    }

    fn page_fault(&mut self) -> Draft {
        let file = self.pools.mapped.zipf(&mut self.rng);
        let t = if self.files[file as usize].class == FileClass::JavaApp || self.rng.chance(0.5) {
            self.pick(self.actors.java_workers)
        } else {
            let i = self.rng.below(self.roles.lib_users.len() as u64) as usize;
            self.roles.lib_users[i]
        };
        let pages = self.rng.pow2(4, 32);
        let at = self.place(file, pages, 4);
        let flags = if self.rng.chance(0.4) {
            Flags::READAHEAD
        } else {
            NONE
        };
        Draft::new(t, file, at, Op::Read, flags, Some(Syscall::PAGE_FAULT))
    }

    fn swap(&mut self) -> Draft {
        let file = self.notable.swap;
        if self.rng.chance(0.6) {
            let pages = self.rng.pow2(1, 8);
            let at = self.place(file, pages, 1);
            Draft::new(self.actors.kswapd, file, at, Op::Write, NONE, None)
        } else {
            let i = self.rng.below(self.roles.swap_users.len() as u64) as usize;
            let t = self.roles.swap_users[i];
            let at = self.place(file, 1, 1);
            let flags = if self.rng.chance(0.3) {
                Flags::READAHEAD
            } else {
                NONE
            };
            Draft::new(t, file, at, Op::Read, flags, Some(Syscall::PAGE_FAULT))
        }
    }

    fn discard(&mut self) -> Draft {
        if self.rng.chance(0.7) {
            let bytes = self.rng.log_uniform(MIB as f64, 256.0 * MIB as f64) as u64 & !4095;
            let size = DEV_SECTORS[D_ROOT];
            let len = bytes / 512;
            if self.trim_sector + len >= size {
                self.trim_sector = self.rng.below(1 << 20) * 8;
            }
            let sector = self.trim_sector;
            self.trim_sector += len + self.rng.below(1 << 18) * 8;
            let file = self.notable.unknown[D_ROOT];
            let at = (sector, bytes as u32);
            Draft::new(self.actors.fstrim, file, at, Op::Discard, NONE, None)
        } else {
            let i = self.rng.below(self.deleted_root.len() as u64) as usize;
            let file = self.deleted_root[i];
            let pages = self.rng.pow2(8, 1024);
            let at = self.place(file, pages, 1);
            Draft::new(self.actors.jbd2_root, file, at, Op::Discard, NONE, None)
        }
    }

    fn raw_device(&mut self) -> Draft {
        let file = self.notable.raw_sda;
        let last = DEV_SECTORS[D_SDA] / 8 * 8 - 8;
        let sector = match self.rng.below(4) {
            0 => 0,
            1 => 8,
            2 => last,
            _ => self.rng.below(DEV_SECTORS[D_SDA] / 8) * 8,
        };
        let t = if self.rng.chance(0.5) {
            self.actors.udisksd
        } else {
            self.actors.blkid
        };
        Draft::new(t, file, (sector, 4096), Op::Read, NONE, Some(Syscall::READ))
    }
}
