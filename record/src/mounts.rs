//! The mount table (`/proc/self/mountinfo`), to turn a filesystem-relative path from the
//! kernel into an absolute one.

use std::fs;

use iodump_format::DevT;

/// One line of mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// Mount id (first field).
    pub id: u32,
    /// Superblock device.
    pub dev: DevT,
    /// Path of the mount's root inside its filesystem (`/` unless a bind or subvolume mount).
    pub root: Vec<u8>,
    /// Where it is mounted.
    pub mount_point: Vec<u8>,
    /// Filesystem type.
    pub fstype: String,
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\012` for a newline…).
fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Parses mountinfo text; malformed lines are skipped.
pub fn parse(text: &str) -> Vec<Mount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() < 10 {
            continue;
        }
        let Some(sep) = f.iter().position(|x| *x == "-") else {
            continue;
        };
        let (Ok(id), Some((ma, mi))) = (f[0].parse::<u32>(), f[2].split_once(':')) else {
            continue;
        };
        let (Ok(ma), Ok(mi)) = (ma.parse(), mi.parse()) else {
            continue;
        };
        out.push(Mount {
            id,
            dev: DevT::new(ma, mi),
            root: unescape(f[3]),
            mount_point: unescape(f[4]),
            fstype: f.get(sep + 1).unwrap_or(&"").to_string(),
        });
    }
    out
}

/// The mount table, re-read on demand.
#[derive(Clone, Debug, Default)]
pub struct MountTable {
    mounts: Vec<Mount>,
}

impl MountTable {
    /// Reads `/proc/self/mountinfo` (an empty table if it cannot be read).
    pub fn read() -> MountTable {
        MountTable {
            mounts: fs::read_to_string("/proc/self/mountinfo")
                .map(|t| parse(&t))
                .unwrap_or_default(),
        }
    }

    /// A table from parsed mounts (tests).
    pub fn from_mounts(mounts: Vec<Mount>) -> MountTable {
        MountTable { mounts }
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
    }
}
