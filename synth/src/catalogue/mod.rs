//! The file catalogue of the synthetic host: every path table entry (labels such as
//! `[metadata]` and `[journal]`, and thousands of files with real-looking names), where each
//! lives (partition and extent), what class of file it is and who usually dirties it, and the
//! lists the generator's pools and streams are made of.
//!
//! [`build`] lays the catalogue out section by section (databases, home directories, system
//! files, copies); the sections draw file sizes, names and extents from one random number
//! generator in a fixed order, so the catalogue depends on the seed only.

mod builder;
mod copies;
mod databases;
mod home;
mod names;
mod system;

use iodump_format::{Device, PathEntry, PathKind};

use crate::host::devices::{DEV_SECTORS, D_BACKUP, D_BOOT, D_ROOT, D_SDA, D_VDA, D_ZRAM, N_DEV};
use crate::host::threads::{Actors, ThreadIndex};
use builder::Builder;
pub(crate) use builder::MIB;

/// What a file is, which decides who touches it and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileClass {
    Fio,
    MysqlTable,
    MysqlSys,
    Redo,
    Dblwr,
    Binlog,
    PgRel,
    PgWal,
    Home,
    SysLib,
    Log,
    JavaApp,
    Boot,
    Backup,
    Label,
}

/// Where a path table entry lives: its partition and extent, in 512-byte sectors relative to
/// the partition (a multiple of 8 long, starting on a multiple of 8).
#[derive(Clone, Copy)]
pub(crate) struct CatalogueFile {
    /// Device index (`D_*`).
    pub(crate) dev: u8,
    pub(crate) class: FileClass,
    pub(crate) start_sector: u64,
    pub(crate) len_sectors: u64,
    /// The thread that usually dirties the file (logs), or [`NO_OWNER`].
    pub(crate) owner: ThreadIndex,
}

/// No thread usually dirties the file.
pub(crate) const NO_OWNER: ThreadIndex = ThreadIndex::MAX;

/// Labels (per filesystem) and notable files, as file indices.
#[derive(Default)]
pub(crate) struct NotableFiles {
    pub(crate) meta: [u32; N_DEV],
    pub(crate) journal: [u32; N_DEV],
    pub(crate) unknown: [u32; N_DEV],
    pub(crate) swap: u32,
    pub(crate) raw_sda: u32,
    pub(crate) fio_random: [u32; 8],
    pub(crate) fio_sequential: [u32; 2],
    pub(crate) vm_image: u32,
    pub(crate) tarball: u32,
}

/// File lists the streams and pools are made of, as file indices.
#[derive(Default)]
pub(crate) struct FileLists {
    pub(crate) mysql_tables: Vec<u32>,
    pub(crate) mysql_sys: Vec<u32>,
    pub(crate) redo: Vec<u32>,
    pub(crate) dblwr: Vec<u32>,
    pub(crate) binlog: Vec<u32>,
    pub(crate) pg_rels: Vec<u32>,
    pub(crate) pg_wal: Vec<u32>,
    /// System files on every filesystem (libraries, logs, `/boot`, the java service…),
    /// followed by [`home`](FileLists::home).
    pub(crate) system: Vec<u32>,
    /// Files mapped into memory (libraries, executables, jars).
    pub(crate) mapped: Vec<u32>,
    /// Personal files, then [`projects`](FileLists::projects), then
    /// [`pictures`](FileLists::pictures).
    pub(crate) home: Vec<u32>,
    pub(crate) projects: Vec<u32>,
    pub(crate) pictures: Vec<u32>,
    /// What readers stream through: home, then the system files on `/`.
    pub(crate) readable: Vec<u32>,
    /// Deleted files on `/` (discarded by the journal thread).
    pub(crate) deleted_root: Vec<u32>,
    pub(crate) backup_pg: Vec<u32>,
    pub(crate) backup_rsync: Vec<u32>,
    pub(crate) import: Vec<u32>,
}

/// The catalogue: file `i` has path id `i + 1`.
pub(crate) struct Catalogue {
    pub(crate) files: Vec<CatalogueFile>,
    pub(crate) paths: Vec<PathEntry>,
    pub(crate) notable: NotableFiles,
    pub(crate) lists: FileLists,
}

/// Lays out the catalogue for `seed`; `actors` own the logs, `devs` give the paths' devices.
pub(crate) fn build(seed: u64, actors: &Actors, devs: &[Device]) -> Catalogue {
    let mut b = Builder::new(seed);
    labels(&mut b);
    databases::mysql(&mut b);
    databases::postgres(&mut b);
    databases::fio(&mut b);
    home::projects(&mut b);
    home::personal(&mut b, actors);
    system::software(&mut b);
    system::logs(&mut b, actors);
    system::boot(&mut b);
    system::java_service(&mut b, actors);
    b.lists.system = b.system.clone();
    b.lists.system.extend_from_slice(&b.lists.home);
    copies::copies(&mut b);
    copies::readable(&mut b);
    b.finish(devs)
}

/// Labels. Metadata and unknown span their whole filesystem; journals are 1 GiB regions.
fn labels(b: &mut Builder) {
    for d in [D_BOOT, D_ROOT, D_BACKUP, D_VDA] {
        let size = DEV_SECTORS[d];
        b.notable.meta[d] = b.label(d, "[metadata]", PathKind::Metadata, 0, size / 8 * 8);
    }
    for d in [D_ROOT, D_BACKUP, D_VDA] {
        let (start, len) = b.filesystems[d].alloc(&mut b.rng, builder::GIB);
        b.notable.journal[d] = b.label(d, "[journal]", PathKind::Journal, start, len);
        let size = DEV_SECTORS[d];
        b.notable.unknown[d] = b.label(d, "[unknown]", PathKind::Unknown, 0, size / 8 * 8);
    }
    b.notable.swap = b.label(D_ZRAM, "[swap]", PathKind::Swap, 0, DEV_SECTORS[D_ZRAM]);
    b.notable.raw_sda = b.label(
        D_SDA,
        "/dev/sda",
        PathKind::RawDevice,
        0,
        DEV_SECTORS[D_SDA] / 8 * 8,
    );
}
