//! Block devices made by tests: zram (bio-based) and loop (request-based), removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A zram device of the given size, removed on drop.
pub struct Zram {
    pub id: u32,
}

impl Zram {
    pub fn new(size: &str) -> Zram {
        let id: u32 = std::fs::read_to_string("/sys/class/zram-control/hot_add")
            .expect("zram hot_add")
            .trim()
            .parse()
            .unwrap();
        std::fs::write(format!("/sys/block/zram{id}/disksize"), size).expect("zram disksize");
        Zram { id }
    }
    pub fn name(&self) -> String {
        format!("zram{}", self.id)
    }
    pub fn node(&self) -> String {
        format!("/dev/zram{}", self.id)
    }
}

impl Drop for Zram {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("/sys/block/zram{}/reset", self.id), "1");
        let _ = std::fs::write("/sys/class/zram-control/hot_remove", self.id.to_string());
    }
}

/// ext4 on a 512 MiB zram device, mounted in a temporary directory; undone on drop.
pub struct Ext4OnZram {
    pub zram: Zram,
    /// The temporary directory (the mount point is in it).
    pub dir: PathBuf,
    pub mnt: PathBuf,
}

impl Ext4OnZram {
    pub fn new(name: &str) -> Ext4OnZram {
        let zram = Zram::new("512M");
        let dir = std::env::temp_dir().join(format!(
            "iodump-fs-{name}-{}-{}",
            std::process::id(),
            zram.id
        ));
        let mnt = dir.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let mkfs = Command::new("mkfs.ext4")
            .args(["-q", "-F", &zram.node()])
            .stdout(Stdio::null())
            .status()
            .expect("mkfs.ext4");
        assert!(mkfs.success(), "mkfs.ext4 {}", zram.node());
        let mount = Command::new("mount")
            .arg(zram.node())
            .arg(&mnt)
            .status()
            .expect("mount");
        assert!(mount.success(), "mount {}", zram.node());
        Ext4OnZram { zram, dir, mnt }
    }
}

impl Drop for Ext4OnZram {
    fn drop(&mut self) {
        // The workloads' last processes may still be closing their files: try for a while.
        for _ in 0..100 {
            let st = Command::new("umount")
                .arg(&self.mnt)
                .stderr(Stdio::null())
                .status();
            if st.is_ok_and(|s| s.success()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A file system frozen (`fsfreeze -f`) until dropped: writes into it wait, so a loop
/// device whose backing file is in it has its writes hang in flight.
pub struct Frozen<'a>(&'a Path);

impl<'a> Frozen<'a> {
    pub fn new(mnt: &'a Path) -> Frozen<'a> {
        let st = Command::new("fsfreeze")
            .arg("-f")
            .arg(mnt)
            .status()
            .expect("fsfreeze (util-linux)");
        assert!(st.success(), "fsfreeze -f {}", mnt.display());
        Frozen(mnt)
    }
}

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        let _ = Command::new("fsfreeze")
            .arg("-u")
            .arg(self.0)
            .stderr(Stdio::null())
            .status();
    }
}

/// A loop device on a sparse file (request-based), detached on drop.
pub struct Loop {
    pub node: String,
    pub file: PathBuf,
}

impl Loop {
    pub fn new(dir: &Path, mib: u64) -> Loop {
        let file = dir.join("loop.img");
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(mib << 20).unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show", "--direct-io=on"])
            .arg(&file)
            .output()
            .expect("losetup");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Loop {
            node: String::from_utf8(out.stdout).unwrap().trim().to_string(),
            file,
        }
    }
    pub fn name(&self) -> &str {
        self.node.trim_start_matches("/dev/")
    }
    /// `dd` writing one 4 KiB block with O_DIRECT, started (it hangs while the file system
    /// holding the backing file is [`Frozen`]).
    pub fn write_one_block(&self) -> std::process::Child {
        Command::new("dd")
            .args(["if=/dev/zero", &format!("of={}", self.node)])
            .args(["bs=4k", "count=1", "oflag=direct", "status=none"])
            .spawn()
            .expect("dd")
    }
}

impl Loop {
    /// A loop device with one partition from sector 2048 to the end, added with BLKPG
    /// (`addpart`), which needs no partition table support in the kernel.
    pub fn partitioned(dir: &Path, mib: u64) -> Loop {
        let lo = Loop::new(dir, mib);
        let sectors = (mib << 20) / 512;
        let st = Command::new("addpart")
            .args([&lo.node, "1", "2048", &(sectors - 2048).to_string()])
            .status()
            .expect("addpart (util-linux)");
        assert!(st.success(), "addpart failed");
        for _ in 0..50 {
            if Path::new(&format!("{}p1", lo.node)).exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        lo
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("delpart")
            .args([&self.node, "1"])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("losetup").args(["-d", &self.node]).status();
        let _ = std::fs::remove_file(&self.file);
    }
}
