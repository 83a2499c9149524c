//! Replay targets: opening a block device or regular file for O_DIRECT I/O, its size and
//! alignment, and the safety checks that keep a replay from destroying data.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use iodump_format::DevT;
use iodump_host::mounts;
use iodump_host::sysfs::Sysfs;

use crate::error::ReplayError;

/// What a target is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A block device (`st_rdev` as major, minor).
    BlockDevice {
        /// Major number.
        major: u32,
        /// Minor number.
        minor: u32,
    },
    /// A regular file, on the filesystem of device (major, minor).
    File {
        /// Major of the device holding the file.
        major: u32,
        /// Minor of the device holding the file.
        minor: u32,
    },
}

/// An opened target.
#[derive(Debug)]
pub struct Target {
    /// As given.
    pub path: PathBuf,
    /// Open for reading (and writing with `--allow-writes`).
    pub file: File,
    /// Block device or file.
    pub kind: TargetKind,
    /// Its size in bytes: no I/O goes past it.
    pub size_bytes: u64,
    /// Offsets and lengths are rounded to this (the logical block size for O_DIRECT; 1 when
    /// buffered).
    pub align_bytes: u32,
    /// Opened with O_DIRECT (false when the filesystem refused it).
    pub direct: bool,
    /// Opened for writing.
    pub writable: bool,
}

/// How a target is opened.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptionsReplay {
    /// Open read-write (`--allow-writes`); the safety checks apply.
    pub writes: bool,
    /// Skip the safety checks (`--force`).
    pub force: bool,
}

fn open_err(path: &Path, source: std::io::Error) -> ReplayError {
    ReplayError::Open {
        path: path.to_path_buf(),
        source,
    }
}

fn major_minor(rdev: u64) -> (u32, u32) {
    (libc::major(rdev), libc::minor(rdev))
}

fn dev_t((major, minor): (u32, u32)) -> DevT {
    DevT::new(major, minor)
}

/// A file's identity: the device holding it and its inode number. Two paths name the same
/// file (a hard link, a bind mount, a symbolic link) exactly when their identities are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    /// Major and minor of the device holding the file (`st_dev`).
    pub dev: (u32, u32),
    /// Inode number (`st_ino`).
    pub ino: u64,
}

impl FileId {
    /// The identity of the file `m` describes.
    pub fn of(m: &std::fs::Metadata) -> FileId {
        FileId {
            dev: major_minor(m.dev()),
            ino: m.ino(),
        }
    }
}

/// What a check compares: a block device by its device number (whatever node or link names
/// it), any other file by its identity.
fn identity(m: &std::fs::Metadata) -> (Option<DevT>, FileId) {
    let rdev = m
        .file_type()
        .is_block_device()
        .then(|| dev_t(major_minor(m.rdev())));
    (rdev, FileId::of(m))
}

/// Checks that `f`, just opened from `path`, is the file `checked` described: a link swapped
/// between the checks and the open must not send the writes elsewhere.
fn same_as_checked(path: &Path, f: &File, checked: &std::fs::Metadata) -> Result<(), ReplayError> {
    let now = f.metadata().map_err(|e| open_err(path, e))?;
    let (rdev, id) = identity(checked);
    let (now_rdev, now_id) = identity(&now);
    let same = match rdev {
        Some(d) => now_rdev == Some(d),
        None => now_rdev.is_none() && now_id == id,
    };
    if same {
        Ok(())
    } else {
        Err(ReplayError::Changed {
            path: path.to_path_buf(),
        })
    }
}

impl Target {
    /// Opens `path`, checks it is safe for the requested access, reads size and alignment.
    pub fn open(path: &Path, o: OpenOptionsReplay) -> Result<Target, ReplayError> {
        let meta = std::fs::metadata(path).map_err(|e| open_err(path, e))?;
        let ft = meta.file_type();
        let kind = if ft.is_block_device() {
            let (major, minor) = major_minor(meta.rdev());
            TargetKind::BlockDevice { major, minor }
        } else if ft.is_file() {
            let (major, minor) = major_minor(meta.dev());
            TargetKind::File { major, minor }
        } else {
            return Err(ReplayError::NotBlockOrFile {
                path: path.to_path_buf(),
            });
        };
        if o.writes && !o.force {
            check_safe(path, kind, &meta)?;
        }
        let open = |direct: bool| {
            let mut oo = OpenOptions::new();
            oo.read(true).write(o.writes);
            let mut flags = libc::O_CLOEXEC;
            if direct {
                flags |= libc::O_DIRECT;
            }
            if o.writes && !o.force && matches!(kind, TargetKind::BlockDevice { .. }) {
                // Exclusive open of a block device fails with EBUSY while it is mounted or
                // claimed by another driver: the last line of defence against a race.
                flags |= libc::O_EXCL;
            }
            oo.custom_flags(flags).open(path)
        };
        let (file, direct) = match open(true) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                (open(false).map_err(|e| open_err(path, e))?, false)
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                return Err(ReplayError::InUse {
                    path: path.to_path_buf(),
                    by: "another exclusive user (mounted, or claimed by a driver)".into(),
                })
            }
            Err(e) => return Err(open_err(path, e)),
        };
        same_as_checked(path, &file, &meta)?;
        let (size_bytes, align_bytes) = match kind {
            TargetKind::BlockDevice { .. } => {
                let size = ioctl_u64(&file, BLKGETSIZE64).map_err(|e| open_err(path, e))?;
                let lbs = ioctl_int(&file, BLKSSZGET).map_err(|e| open_err(path, e))?;
                (size, lbs.max(512) as u32)
            }
            TargetKind::File { .. } => (meta.len(), dio_align(path).unwrap_or(4096)),
        };
        if size_bytes == 0 {
            return Err(ReplayError::EmptyTarget {
                path: path.to_path_buf(),
            });
        }
        Ok(Target {
            path: path.to_path_buf(),
            file,
            kind,
            size_bytes,
            align_bytes: if direct { align_bytes } else { 1 },
            direct,
            writable: o.writes,
        })
    }

    /// True for block devices.
    pub fn is_block_device(&self) -> bool {
        matches!(self.kind, TargetKind::BlockDevice { .. })
    }
}

// From <linux/fs.h>: _IOR(0x12, 114, size_t) and _IO(0x12, 104).
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;
/// `BLKDISCARD`: _IO(0x12, 119), takes `[start, len]` in bytes.
pub const BLKDISCARD: libc::c_ulong = 0x1277;
/// `BLKZEROOUT`: _IO(0x12, 127), takes `[start, len]` in bytes.
pub const BLKZEROOUT: libc::c_ulong = 0x127f;

fn ioctl_u64(f: &File, req: libc::c_ulong) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let mut v: u64 = 0;
    // SAFETY: the request writes one u64 into `v`, which outlives the call.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), req as _, &mut v as *mut u64) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(v)
}

fn ioctl_int(f: &File, req: libc::c_ulong) -> std::io::Result<i32> {
    use std::os::fd::AsRawFd;
    let mut v: libc::c_int = 0;
    // SAFETY: the request writes one int into `v`, which outlives the call.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), req as _, &mut v as *mut libc::c_int) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(v)
}

/// The O_DIRECT offset alignment statx reports for a file (`STATX_DIOALIGN`), if any.
fn dio_align(path: &Path) -> Option<u32> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx only writes the struct we pass; zeroed is a valid initial value for it.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` lives across the call.
    let r = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_DIOALIGN, &mut st) };
    if r != 0 || st.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    let a = st.stx_dio_offset_align.max(st.stx_dio_mem_align);
    (a > 0).then_some(a.max(512))
}

/// Refuses targets whose data a write would destroy: mounted, in use, or (block devices)
/// holding a filesystem or partition table signature. Files are compared by identity (device
/// and inode) and block devices by device number, never by path: a hard link, a bind mount, a
/// symbolic link or another device node reaches the same checks.
fn check_safe(path: &Path, kind: TargetKind, meta: &std::fs::Metadata) -> Result<(), ReplayError> {
    let sysfs = Sysfs::new();
    let loops = loop_devices(&sysfs);
    let refuse_loop = |l: &LoopDevice, what: &str| -> ReplayError {
        let mut devs = vec![l.dev];
        devs.extend(sysfs.partitions_of(l.dev));
        match mounted_on(&devs) {
            Some(mp) => ReplayError::Mounted {
                path: path.to_path_buf(),
                mount_point: format!("{mp} through {} (it is its {what})", l.node),
            },
            None => ReplayError::InUse {
                path: path.to_path_buf(),
                by: format!("{} (it is its {what})", l.node),
            },
        }
    };
    match kind {
        TargetKind::BlockDevice { major, minor } => {
            let dev = DevT::new(major, minor);
            let mut devs = vec![dev];
            devs.extend(sysfs.partitions_of(dev));
            // A partition is inside its disk: a disk mounted (or held) whole holds it too.
            devs.extend(sysfs.whole_disk_of(dev));
            if let Some(mp) = mounted_on(&devs) {
                return Err(ReplayError::Mounted {
                    path: path.to_path_buf(),
                    mount_point: mp,
                });
            }
            if let Some(h) = devs
                .iter()
                .map(|&d| sysfs.holders(d))
                .find(|h| !h.is_empty())
            {
                return Err(ReplayError::InUse {
                    path: path.to_path_buf(),
                    by: h.join(", "),
                });
            }
            if let Some(sw) = swap_on(&devs) {
                return Err(ReplayError::InUse {
                    path: path.to_path_buf(),
                    by: format!("swap ({sw})"),
                });
            }
            if let Some(l) = loops
                .iter()
                .find(|l| l.backing_rdev.is_some_and(|d| devs.contains(&d)))
            {
                return Err(refuse_loop(l, "backing device"));
            }
            check_no_signature(path, meta)?;
        }
        TargetKind::File { .. } => {
            let id = FileId::of(meta);
            if let Some(l) = loops.iter().find(|l| l.backing == Some(id)) {
                return Err(refuse_loop(l, "backing file"));
            }
            if let Some(sw) = swap_file(id) {
                return Err(ReplayError::InUse {
                    path: path.to_path_buf(),
                    by: format!("swap ({sw})"),
                });
            }
        }
    }
    Ok(())
}

/// Refuses a block device that holds a filesystem, volume or partition table signature.
fn check_no_signature(path: &Path, meta: &std::fs::Metadata) -> Result<(), ReplayError> {
    let mut head = vec![0u8; SIGNATURE_PROBE_BYTES];
    let mut f = File::open(path).map_err(|e| open_err(path, e))?;
    same_as_checked(path, &f, meta)?;
    let n = read_full(&mut f, &mut head).map_err(|e| open_err(path, e))?;
    head.truncate(n);
    match signature(&head) {
        Some(what) => Err(ReplayError::Signature {
            path: path.to_path_buf(),
            what,
        }),
        None => Ok(()),
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Where one of `devs` is mounted, from the mount table: by its device number, or by its
/// source path for filesystems such as btrfs that report an anonymous device number.
fn mounted_on(devs: &[DevT]) -> Option<String> {
    mounts::read()
        .into_iter()
        .find(|m| devs.contains(&m.dev) || m.source_device().is_some_and(|d| devs.contains(&d)))
        .map(|m| m.mount_point_lossy())
}

fn swap_entries() -> Vec<String> {
    std::fs::read_to_string("/proc/swaps")
        .map(|t| {
            t.lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn swap_on(devs: &[DevT]) -> Option<String> {
    swap_entries().into_iter().find(|p| {
        std::fs::metadata(p)
            .map(|m| {
                m.file_type().is_block_device() && devs.contains(&dev_t(major_minor(m.rdev())))
            })
            .unwrap_or(false)
    })
}

/// The swap file that is the file `id`, if any.
fn swap_file(id: FileId) -> Option<String> {
    swap_entries().into_iter().find(|p| {
        std::fs::metadata(std::ffi::OsStr::from_bytes(&mounts::unescape(p)))
            .map(|m| m.file_type().is_file() && FileId::of(&m) == id)
            .unwrap_or(false)
    })
}

/// A bound loop device and what backs it.
#[derive(Debug)]
struct LoopDevice {
    /// Its node (`/dev/loopN`).
    node: String,
    /// Its device number.
    dev: DevT,
    /// The identity of its backing file.
    backing: Option<FileId>,
    /// The device number of its backing file, when that is a block device.
    backing_rdev: Option<DevT>,
}

/// `LOOP_GET_STATUS64` from <linux/loop.h>.
const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;

/// `struct loop_info64` from <linux/loop.h>.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// Major and minor of a device number as the kernel's `huge_encode_dev` (`new_encode_dev`)
/// stores it in `loop_info64`.
fn decode_kernel_dev(d: u64) -> (u32, u32) {
    let d = d as u32;
    ((d & 0xfff00) >> 8, (d & 0xff) | ((d >> 12) & 0xfff00))
}

/// The backing file's device, inode and device number of the loop device at `node` (number
/// `dev`), from `LOOP_GET_STATUS64`: what the kernel itself holds, whatever path the file has
/// now.
fn loop_status(node: &str, dev: DevT) -> Option<(FileId, Option<DevT>)> {
    use std::os::fd::AsRawFd;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(node)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.file_type().is_block_device() || dev_t(major_minor(m.rdev())) != dev {
        return None;
    }
    // SAFETY: loop_info64 is plain data (integers and byte arrays): all zeroes is valid.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 writes one loop_info64 into `info`, which outlives the call;
    // the fd is open.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info) };
    if r != 0 {
        return None;
    }
    let rdev = (info.lo_rdevice != 0).then(|| dev_t(decode_kernel_dev(info.lo_rdevice)));
    Some((
        FileId {
            dev: decode_kernel_dev(info.lo_device),
            ino: info.lo_inode,
        },
        rdev,
    ))
}

/// Every bound loop device with what backs it: from `LOOP_GET_STATUS64`, or where that cannot
/// be asked (no node, no permission), from the backing file's path in sysfs.
fn loop_devices(sysfs: &Sysfs) -> Vec<LoopDevice> {
    sysfs
        .loop_devices()
        .into_iter()
        .map(|l| {
            let node = format!("/dev/{}", l.name);
            let (backing, backing_rdev) = match loop_status(&node, l.dev) {
                Some((id, rdev)) => (Some(id), rdev),
                None => match std::fs::metadata(l.backing_file.trim_end_matches(" (deleted)")) {
                    Ok(m) => {
                        let (rdev, id) = identity(&m);
                        (Some(id), rdev)
                    }
                    Err(_) => (None, None),
                },
            };
            LoopDevice {
                node,
                dev: l.dev,
                backing,
                backing_rdev,
            }
        })
        .collect()
}

/// Bytes read from the start of a block device to look for signatures (btrfs's superblock
/// magic sits at 64 KiB + 64).
pub const SIGNATURE_PROBE_BYTES: usize = 68 * 1024;

/// The filesystem, volume or partition-table signature at the start of a device, if any.
pub fn signature(head: &[u8]) -> Option<&'static str> {
    let at = |off: usize, magic: &[u8]| head.get(off..off + magic.len()) == Some(magic);
    let checks: [(usize, &[u8], &'static str); 14] = [
        (1080, &[0x53, 0xef], "an ext2/ext3/ext4 filesystem"),
        (0, b"XFSB", "an XFS filesystem"),
        (65600, b"_BHRfS_M", "a btrfs filesystem"),
        (4086, b"SWAPSPACE2", "a swap area"),
        (4086, b"SWAP-SPACE", "a swap area"),
        (0, b"LUKS\xba\xbe", "a LUKS volume"),
        (512, b"LABELONE", "an LVM physical volume"),
        (512, b"EFI PART", "a GPT partition table"),
        (32769, b"CD001", "an ISO 9660 filesystem"),
        (1024, &[0x10, 0x20, 0xf5, 0xf2], "an F2FS filesystem"),
        (0, b"hsqs", "a squashfs filesystem"),
        (4096, &[0xfc, 0x4e, 0x2b, 0xa9], "an md RAID member"),
        (3, b"NTFS    ", "an NTFS filesystem"),
        (
            510,
            &[0x55, 0xaa],
            "a DOS partition table or FAT boot sector",
        ),
    ];
    checks
        .iter()
        .find(|(off, magic, _)| at(*off, magic))
        .map(|c| c.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures() {
        let mut h = vec![0u8; SIGNATURE_PROBE_BYTES];
        assert_eq!(signature(&h), None);
        h[1080] = 0x53;
        h[1081] = 0xef;
        assert_eq!(signature(&h), Some("an ext2/ext3/ext4 filesystem"));
        let mut h = vec![0u8; SIGNATURE_PROBE_BYTES];
        h[65600..65608].copy_from_slice(b"_BHRfS_M");
        assert_eq!(signature(&h), Some("a btrfs filesystem"));
        // A short device cannot hold the btrfs magic: no out-of-bounds read.
        assert_eq!(signature(&h[..4096]), None);
    }

    #[test]
    fn kernel_device_numbers_decode() {
        // new_encode_dev: minor's low byte, then 12 bits of major, then the rest of minor.
        assert_eq!(decode_kernel_dev(0x0703), (7, 3));
        assert_eq!(decode_kernel_dev(0x11_032c), (259, 300));
        assert_eq!(decode_kernel_dev(0xfe00), (254, 0));
    }
}
