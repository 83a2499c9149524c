//! Block devices as sysfs shows them: every disk and partition (`/sys/class/block`), the
//! partitions of a disk and the disk of a partition (`/sys/dev/block/MAJ:MIN`), what is
//! stacked on a device (`holders/`), an NVMe multipath head's hidden path disks, and which
//! loop devices are bound to which file (`/sys/block/loopN/loop/backing_file`).
//!
//! [`Sysfs::at`] reads another tree than `/sys`, so that tests can give a fixed one.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use iodump_format::DevT;

/// A `MAJ:MIN` device number, as sysfs's `dev` files and mountinfo write it (surrounding
/// white space ignored).
pub fn parse_dev(s: &str) -> Option<DevT> {
    DevT::parse(s.trim())
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn read_dev(p: &Path) -> Option<DevT> {
    read_trim(p).and_then(|s| parse_dev(&s))
}

/// A sysfs directory could not be listed.
#[derive(Debug)]
pub struct SysfsError {
    /// The directory.
    pub path: PathBuf,
    /// What the kernel said.
    pub source: io::Error,
}

impl fmt::Display for SysfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "reading {}", self.path.display())
    }
}

impl std::error::Error for SysfsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// A disk or partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    /// Kernel name (`sda1`, `nvme0n1`, `zram0`, `dm-0`).
    pub name: String,
    /// Its number.
    pub dev: DevT,
    /// The whole disk of a partition; `None` for a disk.
    pub partition_of: Option<DevT>,
    /// Logical block size of the disk, in bytes (512 when sysfs does not say).
    pub logical_block_size_bytes: u32,
    /// First sector of a partition on its disk, in 512-byte units; 0 for a disk.
    pub start_sector: u64,
    /// The disk has no request queue (`mq/` absent): zram, device-mapper, md, brd.
    pub bio_based: bool,
    /// A stacked disk's device-mapper name (`dm/name`: `vg-lv`), md RAID level
    /// (`md/level`: `raid1`), [`BCACHE`] or [`NVME_MULTIPATH`]; empty otherwise.
    pub stack_label: String,
    /// The devices a stacked disk sends its I/O to (`slaves/`; for bcache also the cache
    /// devices), sorted; empty otherwise.
    pub stacked_on: Vec<DevT>,
    /// An NVMe multipath head's path disks (`nvme0c0n1`: namespace 1 of subsystem 0 through
    /// controller 0), sorted. The kernel hides them: no `dev` file, no device node, not in
    /// `/proc/partitions`; their numbers show only in the I/O sent to them.
    pub hidden_paths: Vec<String>,
}

/// The [`BlockDevice::stack_label`] of an NVMe multipath head (`nvme0n1` over its hidden
/// paths `nvme0c0n1`, `nvme0c1n1`…: what the kernel makes of a namespace that more than one
/// controller may reach, native NVMe multipathing).
pub const NVME_MULTIPATH: &str = "nvme-multipath";

/// The [`BlockDevice::stack_label`] of a bcache device (`bcache0`: a backing device cached on
/// the cache devices of its cache set).
pub const BCACHE: &str = "bcache";

/// The head of an NVMe path disk's name: `nvme0c1n2` (subsystem 0, controller 1, namespace
/// head 2) → `nvme0n2`; `None` for any other name.
pub fn nvme_path_head(name: &str) -> Option<String> {
    let rest = name.strip_prefix("nvme")?;
    let (subsys, rest) = rest.split_once('c')?;
    let (ctrl, head) = rest.split_once('n')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(subsys) && digits(ctrl) && digits(head)).then(|| format!("nvme{subsys}n{head}"))
}

/// A bound loop device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopDevice {
    /// Kernel name (`loop0`).
    pub name: String,
    /// Its number.
    pub dev: DevT,
    /// The backing file's path as the kernel last knew it (` (deleted)` appended once its
    /// name is gone).
    pub backing_file: String,
}

/// A sysfs tree.
#[derive(Clone, Debug)]
pub struct Sysfs {
    root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs::at("/sys")
    }
}

impl Sysfs {
    /// The running host's `/sys`.
    pub fn new() -> Sysfs {
        Sysfs::default()
    }

    /// The tree at `root` (laid out as `/sys`).
    pub fn at(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// `dev/block/MAJ:MIN`: the device's directory (a link into `devices/`).
    fn dev_dir(&self, dev: DevT) -> PathBuf {
        self.root
            .join(format!("dev/block/{}:{}", dev.major(), dev.minor()))
    }

    /// Every block device (disks and partitions) in `class/block`, sorted by name.
    pub fn block_devices(&self) -> Result<Vec<BlockDevice>, SysfsError> {
        let dir = self.root.join("class/block");
        let entries = fs::read_dir(&dir).map_err(|source| SysfsError { path: dir, source })?;
        let mut hidden = Vec::new();
        let mut out: Vec<BlockDevice> = entries
            .flatten()
            .filter_map(|ent| {
                let name = ent.file_name().to_string_lossy().into_owned();
                // class/block/X is a symlink into devices/.../X (partitions sit inside their
                // disk's directory).
                let path = fs::canonicalize(ent.path()).unwrap_or_else(|_| ent.path());
                if read_trim(&path.join("hidden")).as_deref() == Some("1") {
                    hidden.extend(nvme_path_head(&name).map(|head| (head, name.clone())));
                }
                block_device(name, &path)
            })
            .collect();
        hidden.sort();
        for (head, path) in hidden {
            if let Some(d) = out.iter_mut().find(|d| d.name == head && d.bio_based) {
                if d.stack_label.is_empty() {
                    d.stack_label = NVME_MULTIPATH.to_string();
                }
                d.hidden_paths.push(path);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// One block device by number, read as [`Sysfs::block_devices`] reads each (an NVMe
    /// multipath head's hidden path disks left out); none when it is gone.
    pub fn block_device(&self, dev: DevT) -> Option<BlockDevice> {
        let path = fs::canonicalize(self.dev_dir(dev)).ok()?;
        let name = path.file_name()?.to_string_lossy().into_owned();
        block_device(name, &path)
    }

    /// The partitions of a whole disk, sorted (none for a partition or an unknown device).
    pub fn partitions_of(&self, disk: DevT) -> Vec<DevT> {
        let mut out: Vec<DevT> = fs::read_dir(self.dev_dir(disk))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("partition").exists())
            .filter_map(|p| read_dev(&p.join("dev")))
            .collect();
        out.sort();
        out
    }

    /// The whole disk a partition is part of (none for a whole disk or an unknown device).
    pub fn whole_disk_of(&self, partition: DevT) -> Option<DevT> {
        let dir = fs::canonicalize(self.dev_dir(partition)).ok()?;
        if !dir.join("partition").exists() {
            return None;
        }
        read_dev(&dir.parent()?.join("dev"))
    }

    /// The kernel's own count of the device's reads and writes in flight (`stat`'s ninth
    /// field: started by the block layer and not ended), when it keeps one for the device:
    /// its disk's `queue/iostats` is 1 and `stat` shows reads or writes done. A driver that
    /// does not account its I/O (some bio-based ones) shows none done and 0 in flight
    /// whatever it does, and accounting turned off (`iostats` 0) freezes both: None then,
    /// and for a device that is gone. A partition has its own count; its disk's counts its
    /// partitions' too.
    pub fn in_flight(&self, dev: DevT) -> Option<u64> {
        let dir = fs::canonicalize(self.dev_dir(dev)).ok()?;
        let disk = if dir.join("partition").exists() {
            dir.parent()?
        } else {
            &dir
        };
        if read_trim(&disk.join("queue/iostats")).as_deref() != Some("1") {
            return None;
        }
        let stat = read_trim(&dir.join("stat"))?;
        let f: Vec<u64> = stat
            .split_ascii_whitespace()
            .map(|x| x.parse().ok())
            .collect::<Option<_>>()?;
        // reads done, merged, sectors, ticks; writes done, merged, sectors, ticks; in flight
        let (reads, writes, in_flight) = (*f.first()?, *f.get(4)?, *f.get(8)?);
        (reads > 0 || writes > 0).then_some(in_flight)
    }

    /// Names of the devices this one is stacked on (`slaves/`: a device-mapper or md
    /// device's disks or partitions), sorted; none for a plain disk.
    pub fn slaves(&self, dev: DevT) -> Vec<String> {
        self.names_in(dev, "slaves")
    }

    /// Names of the devices stacked on this one (device-mapper, md, bcache…), sorted.
    pub fn holders(&self, dev: DevT) -> Vec<String> {
        self.names_in(dev, "holders")
    }

    /// The entries of a device's sysfs subdirectory (`holders`, `slaves`), sorted.
    fn names_in(&self, dev: DevT, sub: &str) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.dev_dir(dev).join(sub))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Every loop device bound to a file (`block/loopN` with a `loop/backing_file`), in
    /// directory order.
    pub fn loop_devices(&self) -> Vec<LoopDevice> {
        let Ok(rd) = fs::read_dir(self.root.join("block")) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if !name.starts_with("loop") {
                    return None;
                }
                let backing_file = read_trim(&e.path().join("loop/backing_file"))?;
                let dev = read_dev(&e.path().join("dev"))?;
                Some(LoopDevice {
                    name,
                    dev,
                    backing_file,
                })
            })
            .collect()
    }
}

/// The device whose (canonical) sysfs directory is `path`; `None` without a `dev` file.
fn block_device(name: String, path: &Path) -> Option<BlockDevice> {
    let dev = read_dev(&path.join("dev"))?;
    let is_partition = path.join("partition").exists();
    let disk_dir = match path.parent() {
        Some(p) if is_partition => p,
        _ => path,
    };
    let partition_of = if is_partition {
        read_dev(&disk_dir.join("dev"))
    } else {
        None
    };
    let logical_block_size_bytes = read_trim(&disk_dir.join("queue/logical_block_size"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    let start_sector = if is_partition {
        read_trim(&path.join("start"))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    } else {
        0
    };
    let (stack_label, stacked_on) = if is_partition {
        (String::new(), Vec::new())
    } else {
        stacking(path)
    };
    Some(BlockDevice {
        name,
        dev,
        partition_of,
        logical_block_size_bytes,
        start_sector,
        // blk-mq devices have an `mq` directory; bio-based ones (zram, dm, md, brd) do not.
        bio_based: !disk_dir.join("mq").exists(),
        stack_label,
        stacked_on,
        hidden_paths: Vec::new(),
    })
}

/// What a whole disk at `path` is stacked on (`slaves/`; for a bcache device also its cache
/// set's cache devices, which `slaves/` leaves out), sorted, and its label ([`BlockDevice::stack_label`]).
fn stacking(path: &Path) -> (String, Vec<DevT>) {
    let mut on: Vec<DevT> = fs::read_dir(path.join("slaves"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| read_dev(&e.path().join("dev")))
        .collect();
    let mut label = read_trim(&path.join("dm/name"))
        .or_else(|| read_trim(&path.join("md/level")))
        .unwrap_or_default();
    // A bcache device's `bcache` links to its backing device's bcache directory, whose
    // `cache` links to the cache set's, whose `cache0`, `cache1`… link to the bcache
    // directory of each cache device (the backing and cache devices have a `bcache`
    // directory of their own too, but no slaves).
    if label.is_empty() && !on.is_empty() && path.join("bcache").is_dir() {
        label = BCACHE.to_string();
        let set = path.join("bcache/cache");
        on.extend(
            fs::read_dir(&set)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("cache"))
                        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
                })
                .filter_map(|e| fs::canonicalize(e.path()).ok())
                .filter_map(|dir| read_dev(&dir.parent()?.join("dev"))),
        );
    }
    on.sort();
    on.dedup();
    (label, on)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A sysfs-like tree in a temporary directory, removed on drop.
    struct Tree(PathBuf);

    impl Tree {
        fn new(name: &str) -> Tree {
            let p = std::env::temp_dir().join(format!("iodump-host-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Tree(p)
        }

        fn file(&self, rel: &str, text: &str) {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }

        fn dir(&self, rel: &str) {
            fs::create_dir_all(self.0.join(rel)).unwrap();
        }

        /// `link` (relative to the root) pointing at `to` (relative to the root).
        fn link(&self, link: &str, to: &str) {
            let l = self.0.join(link);
            fs::create_dir_all(l.parent().unwrap()).unwrap();
            symlink(self.0.join(to), l).unwrap();
        }

        /// A device directory at `devices/<at>` with its `dev` file and its links from
        /// `class/block`, `dev/block` and (disks) `block`.
        fn device(&self, at: &str, dev: &str, disk: bool) {
            let name = at.rsplit('/').next().unwrap();
            let dir = format!("devices/{at}");
            self.file(&format!("{dir}/dev"), &format!("{dev}\n"));
            self.link(&format!("class/block/{name}"), &dir);
            self.link(&format!("dev/block/{dev}"), &dir);
            if disk {
                self.link(&format!("block/{name}"), &dir);
            }
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A SCSI disk with two partitions (the first held by dm-0), zram, two loop devices
    /// (one bound, to a path with a space) and a device-mapper device.
    fn tree(name: &str) -> Tree {
        let t = Tree::new(name);
        t.device("pci0/block/sda", "8:0", true);
        t.file("devices/pci0/block/sda/queue/logical_block_size", "4096\n");
        t.dir("devices/pci0/block/sda/mq/0");
        t.dir("devices/pci0/block/sda/holders");
        t.device("pci0/block/sda/sda1", "8:1", false);
        t.file("devices/pci0/block/sda/sda1/partition", "1\n");
        t.file("devices/pci0/block/sda/sda1/start", "2048\n");
        t.dir("devices/pci0/block/sda/sda1/holders/dm-0");
        t.device("pci0/block/sda/sda2", "8:2", false);
        t.file("devices/pci0/block/sda/sda2/partition", "2\n");
        t.file("devices/pci0/block/sda/sda2/start", "1050624\n");
        t.device("virtual/block/zram0", "252:0", true);
        t.file(
            "devices/virtual/block/zram0/queue/logical_block_size",
            "4096\n",
        );
        t.device("virtual/block/loop0", "7:0", true);
        t.file(
            "devices/virtual/block/loop0/loop/backing_file",
            "/srv/a b.img\n",
        );
        t.device("virtual/block/loop1", "7:1", true);
        t.device("virtual/block/dm-0", "254:0", true);
        t.file("devices/virtual/block/dm-0/dm/name", "vg-lv\n");
        t.dir("devices/virtual/block/dm-0/slaves");
        symlink(
            t.0.join("devices/pci0/block/sda/sda1"),
            t.0.join("devices/virtual/block/dm-0/slaves/sda1"),
        )
        .unwrap();
        // NVMe multipath: the head (bio-based, in the subsystem) and its hidden path disk
        // (request-based, under its controller, no `dev` file).
        t.device("virtual/nvme-subsystem/nvme-subsys0/nvme0n1", "259:1", true);
        t.dir("devices/pci0/nvme/nvme0/nvme0c0n1/mq/0");
        t.file("devices/pci0/nvme/nvme0/nvme0c0n1/hidden", "1\n");
        t.link("class/block/nvme0c0n1", "devices/pci0/nvme/nvme0/nvme0c0n1");
        // Not a device: no `dev` file.
        t.dir("class/block/stray");
        t
    }

    #[test]
    fn block_devices_with_partitions_sizes_and_queues() {
        let t = tree("list");
        let all = Sysfs::at(&t.0).block_devices().unwrap();
        let names: Vec<&str> = all.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            ["dm-0", "loop0", "loop1", "nvme0n1", "sda", "sda1", "sda2", "zram0"]
        );
        let head = all.iter().find(|d| d.name == "nvme0n1").unwrap();
        assert_eq!(
            (
                head.stack_label.as_str(),
                head.hidden_paths.as_slice(),
                head.bio_based
            ),
            (NVME_MULTIPATH, ["nvme0c0n1".to_string()].as_slice(), true)
        );
        let by = |n: &str| all.iter().find(|d| d.name == n).unwrap();
        let sda = by("sda");
        assert_eq!(sda.dev, DevT::new(8, 0));
        assert_eq!((sda.partition_of, sda.start_sector), (None, 0));
        assert_eq!(sda.logical_block_size_bytes, 4096);
        assert!(!sda.bio_based);
        let sda2 = by("sda2");
        assert_eq!(sda2.partition_of, Some(DevT::new(8, 0)));
        assert_eq!(sda2.start_sector, 1050624);
        assert_eq!(sda2.logical_block_size_bytes, 4096, "its disk's block size");
        assert!(!sda2.bio_based, "its disk's queue");
        let zram = by("zram0");
        assert!(zram.bio_based);
        assert_eq!(zram.logical_block_size_bytes, 4096);
        assert_eq!(
            by("dm-0").logical_block_size_bytes,
            512,
            "sysfs says nothing"
        );
        assert_eq!(by("dm-0").stack_label, "vg-lv");
        assert_eq!(by("dm-0").stacked_on, [DevT::new(8, 1)]);
        assert_eq!(
            (by("sda").stack_label.as_str(), by("sda").stacked_on.len()),
            ("", 0)
        );
        assert_eq!(Sysfs::at(&t.0).slaves(DevT::new(254, 0)), ["sda1"]);
    }

    #[test]
    fn a_bcache_device_is_stacked_on_its_backing_and_cache_devices() {
        let t = tree("bcache");
        // zram1 backs bcache0, cached on zram2; each has a bcache directory of its own.
        t.device("virtual/block/zram1", "252:1", true);
        t.device("virtual/block/zram2", "252:2", true);
        t.dir("devices/virtual/block/zram1/bcache");
        t.dir("devices/virtual/block/zram1/holders/bcache0");
        t.dir("devices/virtual/block/zram2/bcache");
        t.device("virtual/block/bcache0", "250:0", true);
        t.link(
            "devices/virtual/block/bcache0/slaves/zram1",
            "devices/virtual/block/zram1",
        );
        t.link(
            "devices/virtual/block/bcache0/bcache",
            "devices/virtual/block/zram1/bcache",
        );
        t.link(
            "fs/bcache/set-uuid/cache0",
            "devices/virtual/block/zram2/bcache",
        );
        t.link(
            "fs/bcache/set-uuid/bdev0",
            "devices/virtual/block/zram1/bcache",
        );
        t.file("fs/bcache/set-uuid/cache_available_percent", "100\n");
        // Registered, not yet attached to its cache set: on its backing device alone.
        let bcache0 = DevT::new(250, 0);
        let read = Sysfs::at(&t.0).block_device(bcache0).unwrap();
        assert_eq!(
            (read.stack_label.as_str(), read.name.as_str()),
            (BCACHE, "bcache0")
        );
        assert_eq!(read.stacked_on, [DevT::new(252, 1)]);
        t.link(
            "devices/virtual/block/zram1/bcache/cache",
            "fs/bcache/set-uuid",
        );
        let read = Sysfs::at(&t.0).block_device(bcache0).unwrap();
        assert_eq!(read.stacked_on, [DevT::new(252, 1), DevT::new(252, 2)]);
        assert!(Sysfs::at(&t.0).block_device(DevT::new(250, 9)).is_none());
        let all = Sysfs::at(&t.0).block_devices().unwrap();
        let by = |n: &str| all.iter().find(|d| d.name == n).unwrap();
        assert_eq!(by("bcache0").stack_label, BCACHE);
        assert_eq!(
            by("bcache0").stacked_on,
            [DevT::new(252, 1), DevT::new(252, 2)]
        );
        for n in ["zram1", "zram2"] {
            assert_eq!(
                (by(n).stack_label.as_str(), by(n).stacked_on.len()),
                ("", 0),
                "{n}"
            );
        }
    }

    #[test]
    fn nvme_path_names_give_their_head() {
        assert_eq!(nvme_path_head("nvme0c0n1").as_deref(), Some("nvme0n1"));
        assert_eq!(nvme_path_head("nvme12c3n45").as_deref(), Some("nvme12n45"));
        for not in [
            "nvme0n1",
            "nvme0n1p1",
            "nvmec0n1",
            "nvme0c0n",
            "nvme0c0n1p2",
            "sda",
        ] {
            assert_eq!(nvme_path_head(not), None, "{not}");
        }
    }

    #[test]
    fn partitions_disks_and_holders() {
        let t = tree("parts");
        let s = Sysfs::at(&t.0);
        let (sda, sda1, sda2) = (DevT::new(8, 0), DevT::new(8, 1), DevT::new(8, 2));
        assert_eq!(s.partitions_of(sda), [sda1, sda2]);
        assert!(s.partitions_of(sda1).is_empty());
        assert!(s.partitions_of(DevT::new(252, 0)).is_empty());
        assert!(s.partitions_of(DevT::new(9, 9)).is_empty(), "unknown");
        assert_eq!(s.whole_disk_of(sda1), Some(sda));
        assert_eq!(s.whole_disk_of(sda2), Some(sda));
        assert_eq!(s.whole_disk_of(sda), None);
        assert_eq!(s.whole_disk_of(DevT::new(9, 9)), None);
        assert_eq!(s.holders(sda1), ["dm-0"]);
        assert!(s.holders(sda).is_empty());
        assert!(s.holders(DevT::new(9, 9)).is_empty());
    }

    #[test]
    fn in_flight_counts_only_where_the_kernel_keeps_them() {
        let t = tree("inflight");
        let s = Sysfs::at(&t.0);
        let stat = |reads: u64, writes: u64, in_flight: u64| {
            format!(
                "{reads} 0 {} 5 {writes} 0 {} 7 {in_flight} 9 12 0 0 0 0 0 0\n",
                reads * 8,
                writes * 8
            )
        };
        let (sda, sda1, zram0, dm0) = (
            DevT::new(8, 0),
            DevT::new(8, 1),
            DevT::new(252, 0),
            DevT::new(254, 0),
        );
        assert_eq!(s.in_flight(sda), None, "no iostats, no stat");
        t.file("devices/pci0/block/sda/queue/iostats", "1\n");
        t.file("devices/pci0/block/sda/stat", &stat(10, 3, 2));
        t.file("devices/pci0/block/sda/sda1/stat", &stat(4, 0, 0));
        assert_eq!(s.in_flight(sda), Some(2));
        assert_eq!(
            s.in_flight(sda1),
            Some(0),
            "a partition: its own count, its disk's iostats"
        );
        t.file("devices/pci0/block/sda/queue/iostats", "0\n");
        assert_eq!(
            s.in_flight(sda),
            None,
            "accounting off: the counts are frozen"
        );
        assert_eq!(s.in_flight(sda1), None);
        // a driver that accounts nothing: nothing done, 0 in flight whatever it does
        t.file("devices/virtual/block/zram0/queue/iostats", "1\n");
        t.file("devices/virtual/block/zram0/stat", &stat(0, 0, 0));
        assert_eq!(s.in_flight(zram0), None);
        t.file("devices/virtual/block/zram0/stat", &stat(0, 1, 0));
        assert_eq!(s.in_flight(zram0), Some(0));
        t.file("devices/virtual/block/dm-0/queue/iostats", "1\n");
        t.file("devices/virtual/block/dm-0/stat", "garbage\n");
        assert_eq!(s.in_flight(dm0), None, "unreadable");
        assert_eq!(s.in_flight(DevT::new(9, 9)), None, "gone");
    }

    #[test]
    fn bound_loop_devices_and_their_files() {
        let t = tree("loops");
        let loops = Sysfs::at(&t.0).loop_devices();
        assert_eq!(
            loops,
            [LoopDevice {
                name: "loop0".into(),
                dev: DevT::new(7, 0),
                backing_file: "/srv/a b.img".into(),
            }],
            "loop1 is not bound"
        );
    }

    #[test]
    fn a_missing_tree_is_an_error_with_its_path() {
        let s = Sysfs::at("/nonexistent/sysfs");
        let e = s.block_devices().unwrap_err();
        assert_eq!(e.to_string(), "reading /nonexistent/sysfs/class/block");
        assert_eq!(e.source.kind(), io::ErrorKind::NotFound);
        assert!(s.loop_devices().is_empty());
    }

    #[test]
    fn device_numbers_parse() {
        assert_eq!(parse_dev("8:1"), Some(DevT::new(8, 1)));
        assert_eq!(parse_dev(" 259:3\n"), Some(DevT::new(259, 3)));
        assert_eq!(parse_dev("8"), None);
        assert_eq!(parse_dev("a:1"), None);
    }
}
