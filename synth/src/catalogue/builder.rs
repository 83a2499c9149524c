//! Laying the catalogue out: per-filesystem extent and inode allocation, file sizes, and the
//! helpers the sections add their files with.

use iodump_format::{DevT, Device, PathEntry, PathKind};

use super::{Catalogue, CatalogueFile, FileClass, FileLists, NotableFiles, NO_OWNER};
use crate::host::devices::{DEV_SECTORS, D_BACKUP, D_BOOT, N_DEV};
use crate::math::exp;
use crate::rng::Rng;

pub(crate) const KIB: u64 = 1024;
pub(crate) const MIB: u64 = 1024 * 1024;
pub(crate) const GIB: u64 = 1024 * 1024 * 1024;

/// How big a file is.
#[derive(Clone, Copy)]
pub(crate) enum Size {
    /// Exactly this many bytes.
    Bytes(u64),
    /// Log-normal: `median_bytes * e^(sigma * z)` for a standard normal `z`, clamped.
    LogNormal {
        median_bytes: f64,
        sigma: f64,
        min_bytes: u64,
        max_bytes: u64,
    },
}

/// A log-normal [`Size`].
pub(crate) const fn log_normal(
    median_bytes: f64,
    sigma: f64,
    min_bytes: u64,
    max_bytes: u64,
) -> Size {
    Size::LogNormal {
        median_bytes,
        sigma,
        min_bytes,
        max_bytes,
    }
}

/// Per-filesystem extent and inode allocator.
pub(crate) struct ExtentAllocator {
    cursor_sector: u64,
    size_sectors: u64,
    last_inode: u64,
}

impl ExtentAllocator {
    /// The extent `(start_sector, len_sectors)` of a new file of `bytes`: after the previous
    /// one with a small (rarely a large) gap, wrapping to near the start when the
    /// filesystem is full; never more than 1/32 of the filesystem.
    pub(crate) fn alloc(&mut self, rng: &mut Rng, bytes: u64) -> (u64, u64) {
        let len = (bytes.div_ceil(4096).max(1) * 8).min(self.size_sectors / 32 * 8);
        if self.cursor_sector + len > self.size_sectors {
            self.cursor_sector = rng.below(self.size_sectors / 64) & !7;
        }
        let start = self.cursor_sector;
        let gap = if rng.chance(0.1) {
            rng.below(1 << 16)
        } else {
            rng.below(256)
        };
        self.cursor_sector += len + gap * 8;
        (start, len)
    }
}

/// The catalogue being laid out.
pub(crate) struct Builder {
    pub(crate) rng: Rng,
    /// One allocator per device index.
    pub(crate) filesystems: Vec<ExtentAllocator>,
    pub(crate) files: Vec<CatalogueFile>,
    pub(crate) paths: Vec<PathEntry>,
    pub(crate) notable: NotableFiles,
    pub(crate) lists: FileLists,
    /// The system files (libraries, logs, `/boot`, the java service), in creation order.
    pub(crate) system: Vec<u32>,
}

impl Builder {
    pub(crate) fn new(seed: u64) -> Builder {
        let mut rng = Rng::new(seed ^ 0x5EED_7AB1_E5F1_1E5A);
        let filesystems = (0..N_DEV)
            .map(|d| ExtentAllocator {
                cursor_sector: 2048 + rng.below(4096) * 8,
                size_sectors: DEV_SECTORS[d],
                last_inode: match d {
                    D_BACKUP => 1_073_741_952,
                    D_BOOT => 11,
                    _ => 131_073 + rng.below(100_000),
                },
            })
            .collect();
        Builder {
            rng,
            filesystems,
            files: Vec::new(),
            paths: Vec::new(),
            notable: NotableFiles::default(),
            lists: FileLists::default(),
            system: Vec::new(),
        }
    }

    fn push(&mut self, fi: CatalogueFile, path: Vec<u8>, inode: u64, kind: PathKind) -> u32 {
        let id = self.files.len() as u32;
        self.files.push(fi);
        self.paths.push(PathEntry {
            path_id: id + 1,
            dev: DevT::new(0, 0),
            inode,
            kind,
            truncated: false,
            deleted: false,
            path,
            // Files have a generation (any fixed value: synth reuses no inode).
            generation: (inode != 0).then(|| (inode as u32).wrapping_mul(0x9E37_79B9)),
        });
        id
    }

    /// Starts a new directory: inode numbers jump (ext4's Orlov allocator spreads
    /// directories over block groups; xfs over allocation groups).
    pub(crate) fn dir(&mut self, dev: usize) {
        let jump = if dev == D_BACKUP {
            (1 << 20) + self.rng.below(1 << 26)
        } else {
            200 + self.rng.below(30_000)
        };
        self.filesystems[dev].last_inode += jump;
    }

    /// A file of exactly `bytes` at `path` on device `dev`; returns its index.
    pub(crate) fn file(
        &mut self,
        dev: usize,
        path: impl Into<Vec<u8>>,
        bytes: u64,
        class: FileClass,
    ) -> u32 {
        let (start, len) = self.filesystems[dev].alloc(&mut self.rng, bytes);
        self.filesystems[dev].last_inode += 1 + self.rng.below(3);
        let ino = self.filesystems[dev].last_inode;
        let fi = CatalogueFile {
            dev: dev as u8,
            class,
            start_sector: start,
            len_sectors: len,
            owner: NO_OWNER,
        };
        self.push(fi, path.into(), ino, PathKind::File)
    }

    /// A label (no inode) of `kind` over the given extent of device `dev`.
    pub(crate) fn label(
        &mut self,
        dev: usize,
        name: &str,
        kind: PathKind,
        start_sector: u64,
        len_sectors: u64,
    ) -> u32 {
        let fi = CatalogueFile {
            dev: dev as u8,
            class: FileClass::Label,
            start_sector,
            len_sectors,
            owner: NO_OWNER,
        };
        self.push(fi, name.as_bytes().to_vec(), 0, kind)
    }

    /// A file size in bytes: drawn when log-normal.
    pub(crate) fn draw(&mut self, size: Size) -> u64 {
        match size {
            Size::Bytes(bytes) => bytes,
            Size::LogNormal {
                median_bytes,
                sigma,
                min_bytes,
                max_bytes,
            } => {
                ((median_bytes * exp(sigma * self.rng.normal())) as u64).clamp(min_bytes, max_bytes)
            }
        }
    }

    /// A file of `size` (drawn first) at `path`; returns its index.
    pub(crate) fn add(
        &mut self,
        dev: usize,
        path: impl Into<Vec<u8>>,
        size: Size,
        class: FileClass,
    ) -> u32 {
        let bytes = self.draw(size);
        self.file(dev, path, bytes, class)
    }

    /// `{dir}{name}{suffix}` for each of `names`, each of `size`; returns their indices.
    pub(crate) fn add_each(
        &mut self,
        dev: usize,
        dir: &str,
        names: &[&str],
        suffix: &str,
        size: Size,
        class: FileClass,
    ) -> Vec<u32> {
        let path = |name: &str| format!("{dir}{name}{suffix}");
        names
            .iter()
            .map(|name| self.add(dev, path(name), size, class))
            .collect()
    }

    /// `{dir}{name}` of exactly `bytes` for each `(name, bytes)`; returns their indices.
    pub(crate) fn add_sized(
        &mut self,
        dev: usize,
        dir: &str,
        files: &[(&str, u64)],
        class: FileClass,
    ) -> Vec<u32> {
        files
            .iter()
            .map(|&(name, bytes)| self.file(dev, format!("{dir}{name}"), bytes, class))
            .collect()
    }

    /// `count` files named `path(i)` for i in 0..count, each of `size`; returns their indices.
    pub(crate) fn add_series(
        &mut self,
        dev: usize,
        count: u64,
        path: impl Fn(u64) -> String,
        size: Size,
        class: FileClass,
    ) -> Vec<u32> {
        (0..count)
            .map(|i| self.add(dev, path(i), size, class))
            .collect()
    }

    /// The path of file `f`.
    pub(crate) fn path_of(&self, f: u32) -> &[u8] {
        &self.paths[f as usize].path
    }

    /// Marks file `f` deleted.
    pub(crate) fn delete(&mut self, f: u32) {
        self.paths[f as usize].deleted = true;
    }

    /// Sets the devices of the path entries and hands the catalogue over.
    pub(crate) fn finish(mut self, devs: &[Device]) -> Catalogue {
        for (fi, p) in self.files.iter().zip(self.paths.iter_mut()) {
            p.dev = devs[fi.dev as usize].dev;
        }
        Catalogue {
            files: self.files,
            paths: self.paths,
            notable: self.notable,
            lists: self.lists,
        }
    }
}
