//! The mount table, from `/proc/self/mountinfo` (see proc_pid_mountinfo(5)): one [`Mount`]
//! per line, and the [`MountTable`] that turns a path inside a filesystem into an absolute
//! one.
//!
//! A line reads `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=…`:
//! mount id, parent id, `major:minor` of the filesystem, its root inside the filesystem,
//! the mount point, options, zero or more optional fields, `-`, the filesystem type, the
//! source and the superblock options. Spaces, tabs, newlines and backslashes in paths are
//! written as octal escapes (`\040`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;

use iodump_format::DevT;

use crate::sysfs::parse_dev;

/// Where the running process's mount table is.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// One line of mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Mount id (first field).
    pub id: u32,
    /// Id of the parent mount (itself for the root of the namespace).
    pub parent_id: u32,
    /// Superblock device (`st_dev` of its files; an anonymous `0:N` for btrfs, tmpfs…).
    pub dev: DevT,
    /// Path of the mount's root inside its filesystem (`/` unless a bind or subvolume mount).
    pub root: Vec<u8>,
    /// Where it is mounted.
    pub mount_point: Vec<u8>,
    /// The optional fields (`shared:1`, `master:2`, `unbindable`…), in order.
    pub optional_fields: Vec<String>,
    /// Filesystem type.
    pub fstype: String,
    /// Mount source (`/dev/sda1`, `tmpfs`, `none`…).
    pub source: Vec<u8>,
}

impl Mount {
    /// The mount point as text (bytes that are not UTF-8 replaced).
    pub fn mount_point_lossy(&self) -> String {
        String::from_utf8_lossy(&self.mount_point).into_owned()
    }

    /// The mount point as a path.
    pub fn mount_point_path(&self) -> PathBuf {
        PathBuf::from(OsStr::from_bytes(&self.mount_point))
    }

    /// The device number of the source when it is the path of a block device node (how
    /// filesystems with an anonymous [`Mount::dev`], such as btrfs, name their device).
    /// Looks at the file system: `None` when the source is no such node.
    pub fn source_device(&self) -> Option<DevT> {
        if !self.source.starts_with(b"/") {
            return None;
        }
        let m = std::fs::metadata(OsStr::from_bytes(&self.source)).ok()?;
        m.file_type()
            .is_block_device()
            .then(|| DevT::new(libc::major(m.rdev()), libc::minor(m.rdev())))
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\012` for a newline, `\134` for a
/// backslash); a backslash not followed by three octal digits stays.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = u32::from(b[i + 1] - b'0') * 64
                + u32::from(b[i + 2] - b'0') * 8
                + u32::from(b[i + 3] - b'0');
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// One line of mountinfo; `None` when it is malformed (fewer than ten fields, no `-`
/// separator, ids or device number that are not numbers).
pub fn parse_line(line: &str) -> Option<Mount> {
    let f: Vec<&str> = line.split(' ').collect();
    if f.len() < 10 {
        return None;
    }
    let sep = f.iter().skip(6).position(|x| *x == "-")? + 6;
    Some(Mount {
        id: f[0].parse().ok()?,
        parent_id: f[1].parse().ok()?,
        dev: parse_dev(f[2])?,
        root: unescape(f[3]),
        mount_point: unescape(f[4]),
        optional_fields: f[6..sep].iter().map(|s| s.to_string()).collect(),
        fstype: f.get(sep + 1)?.to_string(),
        source: unescape(f.get(sep + 2)?),
    })
}

/// Parses mountinfo text; malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    text.lines().filter_map(parse_line).collect()
}

/// The mounts of [`MOUNTINFO`] (none when it cannot be read).
pub fn read() -> Vec<Mount> {
    std::fs::read_to_string(MOUNTINFO)
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// Tells when the mount table changed: the kernel marks [`MOUNTINFO`] readable with
/// `POLLPRI` at each mount or unmount of the namespace (mount ids are reused at once, so a
/// file system unmounted and mounted elsewhere may keep its id: only this tells).
#[derive(Debug)]
pub struct MountWatch {
    file: std::fs::File,
}

impl MountWatch {
    /// Watches [`MOUNTINFO`] from now on; `None` when it cannot be opened.
    pub fn open() -> Option<MountWatch> {
        std::fs::File::open(MOUNTINFO)
            .ok()
            .map(|file| MountWatch { file })
    }

    /// True when a mount or unmount happened since the watch was opened or last asked (the
    /// question itself resets it; a `poll` with no wait).
    pub fn changed(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut p = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration; a timeout of 0 does not block.
        let n = unsafe { libc::poll(&mut p, 1, 0) };
        n > 0 && p.revents & (libc::POLLPRI | libc::POLLERR) != 0
    }
}

/// The mount table, re-read on demand.
#[derive(Clone, Debug, Default)]
pub struct MountTable {
    mounts: Vec<Mount>,
}

impl MountTable {
    /// Reads [`MOUNTINFO`] (an empty table if it cannot be read).
    pub fn read() -> MountTable {
        MountTable { mounts: read() }
    }

    /// A table from parsed mounts (tests).
    pub fn from_mounts(mounts: Vec<Mount>) -> MountTable {
        MountTable { mounts }
    }

    /// The mounts, in mountinfo's order.
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// True when some filesystem of `dev` is mounted.
    pub fn is_mounted(&self, dev: DevT) -> bool {
        self.mounts.iter().any(|m| m.dev == dev)
    }

    /// Mount points of `dev`.
    pub fn mount_points(&self, dev: DevT) -> impl Iterator<Item = &Mount> {
        self.mounts.iter().filter(move |m| m.dev == dev)
    }

    /// Turns `rel` (a path from the root of the filesystem on `dev`, starting with `/`) into
    /// an absolute path: the mount `mnt_id` when given and matching, else the first mount of
    /// `dev` whose root contains the path (the longest such root). `None` when no mount
    /// shows the file.
    pub fn absolute(&self, dev: DevT, mnt_id: u32, rel: &[u8]) -> Option<Vec<u8>> {
        let fits = |m: &Mount| {
            m.dev == dev
                && (m.root == b"/"
                    || (rel.starts_with(&m.root)
                        && (rel.len() == m.root.len() || rel[m.root.len()] == b'/')))
        };
        let m = self
            .mounts
            .iter()
            .find(|m| mnt_id != 0 && m.id == mnt_id && fits(m))
            .or_else(|| {
                self.mounts
                    .iter()
                    .filter(|m| fits(m))
                    .max_by_key(|m| (m.root.len(), std::cmp::Reverse(m.id)))
            })?;
        let rest = if m.root == b"/" {
            rel
        } else {
            &rel[m.root.len()..]
        };
        let rest = if rest == b"/" { &rest[..0] } else { rest };
        let mut out = m.mount_point.clone();
        if out == b"/" {
            out.clear();
        }
        if rest.is_empty() {
            if out.is_empty() {
                out.push(b'/');
            }
        } else {
            out.extend_from_slice(rest);
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 252:1 / /mnt/z\\040data rw - ext4 /dev/zram1 rw
41 27 252:1 /sub/dir /srv/bind rw - ext4 /dev/zram1 rw
42 40 252:2 / /mnt/z\\040data/nested rw - xfs /dev/zram2 rw
";

    #[test]
    fn parses_and_unescapes() {
        let m = parse(INFO);
        assert_eq!(m.len(), 5);
        assert_eq!(m[2].mount_point, b"/mnt/z data");
        assert_eq!(m[2].dev, DevT::new(252, 1));
        assert_eq!(m[3].root, b"/sub/dir");
        assert_eq!(m[4].fstype, "xfs");
    }

    #[test]
    fn mount_unescape() {
        assert_eq!(unescape("/mnt/a\\040b"), b"/mnt/a b");
        assert_eq!(unescape("/x\\"), b"/x\\");
        assert_eq!(unescape("/t\\011ab\\012nl\\134bs"), b"/t\tab\nnl\\bs");
        // Not three octal digits: kept as written.
        assert_eq!(unescape("/a\\08b\\04"), b"/a\\08b\\04");
    }

    #[test]
    fn optional_fields_sources_and_bind_mounts() {
        let text = "\
1 1 0:2 / / rw - rootfs rootfs rw
25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:9 master:3 unbindable - cgroup2 cgroup2 rw
31 25 8:1 /home/u/My\\040Docs /srv/docs\\040here rw - ext4 /dev/sda1 rw
32 25 0:45 /@home /home rw shared:40 - btrfs /dev/mapper/vg\\040x rw,subvol=/@home
";
        let m = parse(text);
        assert_eq!(m.len(), 5);
        assert!(m[0].optional_fields.is_empty());
        assert_eq!((m[1].id, m[1].parent_id), (25, 1));
        assert_eq!(m[1].optional_fields, ["shared:1"]);
        assert_eq!(m[1].source, b"/dev/sda1");
        assert_eq!(m[2].optional_fields, ["shared:9", "master:3", "unbindable"]);
        assert_eq!(m[2].fstype, "cgroup2");
        assert_eq!(m[2].mount_point_path(), PathBuf::from("/sys/fs/cgroup"));
        // A bind mount of a directory with a space, onto one with a space.
        assert_eq!(m[3].root, b"/home/u/My Docs");
        assert_eq!(m[3].mount_point_lossy(), "/srv/docs here");
        assert_eq!(m[3].dev, m[1].dev);
        // btrfs: an anonymous device number, the real device in the source.
        assert_eq!(m[4].dev, DevT::new(0, 45));
        assert_eq!(m[4].source, b"/dev/mapper/vg x");
        assert_eq!(m[4].root, b"/@home");
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let text = "\
garbage
25 1 8:1 / / rw shared:1 ext4 /dev/sda1 rw no-separator
x 1 8:1 / / rw - ext4 /dev/sda1 rw
25 y 8:1 / / rw - ext4 /dev/sda1 rw
25 1 8-1 / / rw - ext4 /dev/sda1 rw
25 1 8:1 / /
26 1 8:2 / /ok rw - ext4 /dev/sda2 rw
";
        let m = parse(text);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].mount_point, b"/ok");
    }

    #[test]
    fn sources_that_are_no_block_device_have_no_device() {
        let mut m = parse(INFO).remove(0);
        assert_eq!(m.source, b"proc");
        assert_eq!(m.source_device(), None);
        m.source = b"/dev/null".to_vec();
        assert_eq!(m.source_device(), None, "a character device");
        m.source = b"/no/such/node".to_vec();
        assert_eq!(m.source_device(), None);
    }

    #[test]
    fn absolute_paths_through_mounts() {
        let t = MountTable::from_mounts(parse(INFO));
        let z1 = DevT::new(252, 1);
        assert_eq!(
            t.absolute(DevT::new(254, 0), 0, b"/etc/passwd").unwrap(),
            b"/etc/passwd"
        );
        assert_eq!(t.absolute(z1, 0, b"/a/b").unwrap(), b"/mnt/z data/a/b");
        // The bind mount's root contains the file: the longest root wins.
        assert_eq!(t.absolute(z1, 0, b"/sub/dir/f").unwrap(), b"/srv/bind/f");
        assert_eq!(
            t.absolute(z1, 0, b"/sub/dirx").unwrap(),
            b"/mnt/z data/sub/dirx"
        );
        // A mount id from the kernel (direct I/O) chooses that mount.
        assert_eq!(
            t.absolute(z1, 40, b"/sub/dir/f").unwrap(),
            b"/mnt/z data/sub/dir/f"
        );
        assert_eq!(
            t.absolute(DevT::new(252, 2), 0, b"/x").unwrap(),
            b"/mnt/z data/nested/x"
        );
        assert_eq!(t.absolute(z1, 0, b"/").unwrap(), b"/mnt/z data");
        assert!(t.absolute(DevT::new(1, 1), 0, b"/x").is_none());
        assert!(t.is_mounted(z1) && !t.is_mounted(DevT::new(1, 1)));
        assert_eq!(t.mount_points(z1).count(), 2);
    }

    #[test]
    fn this_process_has_a_root_mount() {
        // Every Linux process sees a mount table with a mount on `/`.
        let m = read();
        assert!(m.iter().any(|m| m.mount_point == b"/"), "{m:?}");
    }
}
