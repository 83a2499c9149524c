//! The block devices a recording can name: the host's disks and partitions (as
//! `iodump-host` reads them from sysfs) as trace [`Device`] entries, and the resolution of
//! `-d` and `-p` arguments against them.

use std::fs;

use iodump_format::{DevT, Device};
use iodump_host::sysfs::{parse_dev, BlockDevice, Sysfs, BCACHE, NVME_MULTIPATH};

use crate::error::RecordError;

/// Every block device (disks and partitions) listed in `/sys/class/block`, sorted by name.
pub fn list() -> Result<Vec<Device>, RecordError> {
    Ok(host_list()?.iter().map(device).collect())
}

/// The same, as `iodump-host` reads them (with what the trace's entry does not keep: an
/// NVMe multipath head's hidden path disks).
pub fn host_list() -> Result<Vec<BlockDevice>, RecordError> {
    Sysfs::new().block_devices().map_err(RecordError::Sysfs)
}

/// A stacked device: one with `slaves/` in sysfs (device-mapper, bio-based or, as
/// dm-multipath, request-based; md), or an NVMe multipath head (its path disks are hidden:
/// the head's entry names them as their first I/O shows their numbers). The I/O it sends
/// down is attributed to its own I/O's origin (ebpf/stack.bpf.h).
pub fn is_stacked(d: &Device) -> bool {
    !d.stacked_on.is_empty() || (d.bio_based && d.label == NVME_MULTIPATH)
}

/// Of the devices `-d` asked for (`wanted`), those whose I/O below is recorded too: an
/// NVMe multipath head and its partitions, since its path disks, which do its requests,
/// have no number to ask for.
pub fn recorded_below(all: &[Device], wanted: &[DevT]) -> Vec<DevT> {
    let head = |dev: DevT| {
        all.iter()
            .any(|d| d.dev == dev && d.bio_based && d.label == NVME_MULTIPATH)
    };
    all.iter()
        .filter(|d| wanted.contains(&d.dev))
        .filter(|d| head(d.dev) || d.partition_of.is_some_and(head))
        .map(|d| d.dev)
        .collect()
}

/// The stacked devices ([`is_stacked`]).
pub fn stacked(all: &[Device]) -> Vec<DevT> {
    all.iter()
        .filter(|d| is_stacked(d))
        .map(|d| d.dev)
        .collect()
}

/// An md RAID4/5/6 array (`md/level` in sysfs): its writes go down from the raid456
/// module's stripe cache, followed once that module's BTF is read
/// ([`crate::kernel::Raid5Layout`]).
pub fn is_raid456(d: &Device) -> bool {
    matches!(d.label.as_str(), "raid4" | "raid5" | "raid6") && !d.stacked_on.is_empty()
}

/// A bcache device: its cache-miss reads are followed once bcache's module BTF is read
/// ([`crate::kernel::BcacheLayout`]).
pub fn is_bcache(d: &Device) -> bool {
    d.label == BCACHE && !d.stacked_on.is_empty()
}

/// A bcache device not (yet) on a cache device: registering its backing device makes it,
/// and its cache set attaches it a moment later (or never: bcache runs without a cache).
/// Its `stacked_on` lacks the cache devices until then ([`crate::convert::Converter::resettle`]).
pub fn awaits_cache(d: &Device) -> bool {
    d.label == BCACHE && d.stacked_on.len() < 2
}

/// The device numbered `dev` on this host now; none when it is gone.
pub fn read_one(dev: DevT) -> Option<Device> {
    Sysfs::new().block_device(dev).map(|d| device(&d))
}

/// The trace's entry for a host block device.
pub fn device(d: &BlockDevice) -> Device {
    Device {
        dev: d.dev,
        name: d.name.clone(),
        partition_of: d.partition_of,
        sector_size: d.logical_block_size_bytes,
        start_sector: d.start_sector,
        bio_based: d.bio_based,
        label: d.stack_label.clone(),
        stacked_on: d.stacked_on.clone(),
    }
}

/// Resolves a `-d` argument: a kernel name (`sda`, `sda1`, `nvme0n1`, `dm-0`, `zram0`), a
/// device node (`/dev/sda`, or a symlink such as `/dev/mapper/vg-lv`), or `MAJ:MIN`.
pub fn resolve(arg: &str, all: &[Device]) -> Result<Device, RecordError> {
    let unknown = || RecordError::UnknownDevice {
        name: arg.to_string(),
        known: all.iter().map(|d| d.name.clone()).collect(),
    };
    if let Some(dev) = parse_dev(arg) {
        return all
            .iter()
            .find(|d| d.dev == dev)
            .cloned()
            .ok_or_else(unknown);
    }
    let mut name = arg.strip_prefix("/dev/").unwrap_or(arg).to_string();
    if arg.starts_with('/') {
        if let Ok(target) = fs::canonicalize(arg) {
            if let Some(n) = target.file_name() {
                name = n.to_string_lossy().into_owned();
            }
        }
    }
    all.iter()
        .find(|d| d.name == name)
        .cloned()
        .ok_or_else(unknown)
}

/// Resolves a `-p` argument of the original iodump's command line: what [`resolve`] finds (a
/// disk, which includes its partitions, or a partition), else every device whose name starts
/// with `arg` (`nvme`: every NVMe namespace and partition; `sd`: every SCSI disk). A partition
/// whose disk also matched is left out: the disk includes it.
pub fn resolve_prefix(arg: &str, all: &[Device]) -> Result<Vec<Device>, RecordError> {
    if let Ok(d) = resolve(arg, all) {
        return Ok(vec![d]);
    }
    let prefix = arg.strip_prefix("/dev/").unwrap_or(arg);
    let matched: Vec<&Device> = all
        .iter()
        .filter(|d| !prefix.is_empty() && d.name.starts_with(prefix))
        .collect();
    if matched.is_empty() {
        return Err(RecordError::UnknownDevice {
            name: arg.to_string(),
            known: all.iter().map(|d| d.name.clone()).collect(),
        });
    }
    Ok(matched
        .iter()
        .filter(|d| {
            d.partition_of
                .is_none_or(|p| !matched.iter().any(|m| m.dev == p))
        })
        .map(|d| (*d).clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iodump_format::DevT;

    fn dev(name: &str, major: u32, minor: u32) -> Device {
        Device {
            dev: DevT::new(major, minor),
            name: name.into(),
            partition_of: None,
            sector_size: 512,
            start_sector: 0,
            bio_based: false,
            label: String::new(),
            stacked_on: Vec::new(),
        }
    }

    #[test]
    fn resolve_names_nodes_and_numbers() {
        let all = vec![dev("sda", 8, 0), dev("sda1", 8, 1), dev("sda10", 8, 10)];
        assert_eq!(resolve("sda1", &all).unwrap().dev, DevT::new(8, 1));
        assert_eq!(resolve("/dev/sda10", &all).unwrap().dev, DevT::new(8, 10));
        assert_eq!(resolve("8:0", &all).unwrap().name, "sda");
        let e = resolve("sdz", &all).unwrap_err().to_string();
        assert!(e.contains("sdz") && e.contains("sda1"), "{e}");
        assert!(resolve("9:9", &all).is_err());
    }

    #[test]
    fn prefixes_match_every_such_device() {
        let mut all = vec![
            dev("nvme0n1", 259, 0),
            dev("nvme0n1p1", 259, 1),
            dev("nvme1n1", 259, 5),
            dev("sda", 8, 0),
            dev("sda1", 8, 1),
            dev("sda10", 8, 10),
        ];
        all[1].partition_of = Some(DevT::new(259, 0));
        all[4].partition_of = Some(DevT::new(8, 0));
        all[5].partition_of = Some(DevT::new(8, 0));
        let names = |a: &str| -> Vec<String> {
            resolve_prefix(a, &all)
                .unwrap()
                .into_iter()
                .map(|d| d.name)
                .collect()
        };
        assert_eq!(names("nvme"), ["nvme0n1", "nvme1n1"]);
        assert_eq!(names("nvme0n1p"), ["nvme0n1p1"]);
        // An exact name is that device only (the original's substring match took sda10 too).
        assert_eq!(names("sda1"), ["sda1"]);
        assert_eq!(names("/dev/sda"), ["sda"]);
        assert_eq!(names("sd"), ["sda"]);
        assert!(resolve_prefix("hd", &all).is_err());
        assert!(resolve_prefix("", &all).is_err());
    }

    #[test]
    fn an_nvme_multipath_head_asked_for_is_recorded_below_too() {
        let d = |dev: DevT, name: &str, of: Option<DevT>, bio: bool, label: &str| Device {
            dev,
            name: name.into(),
            partition_of: of,
            sector_size: 512,
            start_sector: 0,
            bio_based: bio,
            label: label.into(),
            stacked_on: Vec::new(),
        };
        let (head, part, sda, dm) = (
            DevT::new(259, 1),
            DevT::new(259, 2),
            DevT::new(8, 0),
            DevT::new(253, 0),
        );
        let all = [
            d(head, "nvme0n1", None, true, NVME_MULTIPATH),
            d(part, "nvme0n1p1", Some(head), true, ""),
            d(sda, "sda", None, false, ""),
            d(dm, "dm-0", None, true, "vg-lv"),
        ];
        assert_eq!(recorded_below(&all, &[head, sda, dm]), [head]);
        assert_eq!(recorded_below(&all, &[part]), [part]);
        assert!(recorded_below(&all, &[sda, dm]).is_empty());
        assert!(recorded_below(&all, &[]).is_empty());
    }

    #[test]
    fn request_based_device_mapper_is_stacked_too() {
        let d = |name: &str, bio: bool, label: &str, on: &[DevT]| Device {
            dev: DevT::new(253, 0),
            name: name.into(),
            partition_of: None,
            sector_size: 512,
            start_sector: 0,
            bio_based: bio,
            label: label.into(),
            stacked_on: on.to_vec(),
        };
        let sdb = DevT::new(8, 16);
        assert!(is_stacked(&d("dm-0", true, "vg-lv", &[sdb])));
        // dm-multipath: request-based, its paths below
        assert!(is_stacked(&d("dm-1", false, "mpatha", &[sdb])));
        assert!(is_stacked(&d("nvme0n1", true, NVME_MULTIPATH, &[])));
        assert!(!is_stacked(&d("sda", false, "", &[])));
        assert!(!is_stacked(&d("zram0", true, "", &[])));
    }

    #[test]
    fn host_devices_become_trace_entries() {
        let d = device(&BlockDevice {
            name: "sda2".into(),
            dev: DevT::new(8, 2),
            partition_of: Some(DevT::new(8, 0)),
            logical_block_size_bytes: 4096,
            start_sector: 2048,
            bio_based: false,
            stack_label: String::new(),
            stacked_on: Vec::new(),
            hidden_paths: Vec::new(),
        });
        assert_eq!(
            d,
            Device {
                dev: DevT::new(8, 2),
                name: "sda2".into(),
                partition_of: Some(DevT::new(8, 0)),
                sector_size: 4096,
                start_sector: 2048,
                bio_based: false,
                label: String::new(),
                stacked_on: Vec::new(),
            }
        );
    }

    #[test]
    fn this_machine_lists_devices() {
        // Every Linux machine with a sysfs has at least one block device (loop devices
        // exist even in containers); numbers must be parsed.
        if let Ok(all) = list() {
            for d in &all {
                assert!(d.dev.major() > 0 || d.dev.minor() > 0, "{d:?}");
            }
        }
    }
}
