//! Turns kernel records into trace events and table entries: assigns path ids (files by
//! (dev, inode, generation), labels per device), keeps the process table (with each
//! process's command line, read from `/proc/PID/cmdline` when it is first seen or execs),
//! maps syscall numbers to the format's codes. This is the ingest layer shared by live
//! printing and by the file writer: it produces [`Event`]s and the table entries they need
//! ([`NewEntries`], [`PathEntry`]) and knows nothing of where they go.

use std::collections::HashMap;

use iodump_format::idtable::IdTable;
use iodump_format::inthash::IntMap;
use iodump_format::{
    DevT, Device, Event, Flags, Op, PathEntry, PathKind, Process, Syscall, UpperIo, ARGS_MAX_BYTES,
    DELETED_SUFFIX,
};
use iodump_host::mounts::{MountTable, MountWatch};
use iodump_host::sysfs::BlockDevice;

use crate::abi::{self, io_flag, path_flag, path_kind, IoEvent, PathEvent};

/// New table entries produced while converting one record, to be written before its event.
#[derive(Debug, Default)]
pub struct NewEntries {
    /// A new path entry.
    pub path: Option<PathEntry>,
    /// A new or changed process entry.
    pub process: Option<Process>,
    /// Devices that appeared since the recording began (hot-added zram, losetup, a
    /// hot-plugged disk; an NVMe path disk met in its first I/O, then its head's entry again,
    /// now on it).
    pub devices: Vec<Device>,
}

/// Conversion state: the tables built so far.
pub struct Converter {
    devices: HashMap<u32, Device>,
    mounts: MountTable,
    /// Says when `mounts` is out of date; asked at most every [`MOUNT_CHECK`], when it
    /// was last.
    mount_watch: Option<(MountWatch, std::time::Instant)>,
    /// (ino_dev, ino, gen) → path id: one path entry per file, however many path records
    /// the kernel sends for it.
    files: IntMap<(u32, u64, u32), u32>,
    /// The kernel's file_id → path id (0: none). The ids are dense from 1, so the lookup is
    /// an index into a few bytes per file; those of forgotten files are cleared
    /// ([`IdTable`]). Events whose file_id is 0 (the kernel's tag cache knew the path was
    /// sent but not its id) are looked up in `files`.
    by_file_id: IdTable<u32>,
    /// (dev, label kind) → path id.
    labels: IntMap<(u32, u8), u32>,
    /// path id → path bytes as shown ([`PathEntry::shown`]: a deleted file's with
    /// ` (deleted)`), for printing.
    path_bytes: HashMap<u32, Vec<u8>>,
    /// The path ids of entries marked deleted (an unlinked file's next path record under
    /// the same name is a new entry, deleted).
    deleted_ids: IntMap<u32, ()>,
    /// tid → (pid, comm, cgroup, the sweep round of its last I/O or writeback).
    threads: IntMap<u32, (u32, [u8; 16], u64, u32)>,
    /// pid (tgid) → its command line (`None`: could not be read), read once per process and
    /// again when it execs.
    args: IntMap<u32, Option<Vec<u8>>>,
    /// The device of the previous event (known to `devices`), to skip the look-up.
    last_dev: Option<u32>,
    /// Devices looked for in sysfs and not found there (gone already): not looked for again.
    missing_devs: Vec<u32>,
    /// (device, device whose I/O it served) of the previous event sent down, to skip the
    /// look-up in `below_seen`.
    last_below: (u32, u32),
    /// Every (device, upper device) pair met (`upper << 32 | device`): a stacked device's
    /// entry is read again at the first I/O it sends to a device not in its `stacked_on`
    /// (a device-mapper table reloaded onto another device: `lvextend`, `pvmove`).
    below_seen: IntMap<u64, ()>,
    /// Stacked devices (device-mapper, md) met since the last [`Converter::take_new_stacked`].
    new_stacked: Vec<Device>,
    /// bcache devices not yet on a cache device ([`crate::devices::awaits_cache`]): read
    /// again by [`Converter::resettle`].
    awaiting_cache: Vec<u32>,
    next_path_id: u32,
    /// Path id → the sweep round of the last I/O that referred to it (files only; 0: not a
    /// file's, or forgotten).
    path_round: IdTable<u32>,
    /// Sweeps so far ([`Converter::sweep`]).
    round: u32,
    /// Files whose kernel record was deleted, with the round it was in: forgotten at a
    /// sweep at least a round later unless an I/O referred to them since.
    unsent: Vec<((u32, u64, u32), u32)>,
    /// Path ids a file had before its latest (a rename, an unlink): forgotten once idle.
    superseded: Vec<u32>,
    /// Events with a file path, a label, neither.
    pub attributed: [u64; 3],
    /// Files and threads forgotten by [`Converter::sweep`].
    pub forgotten: Forgotten,
}

/// `Converter::path_round` values above every round: a file whose kernel key is to be
/// deleted (queued), or was deleted (unsent).
const QUEUED: u32 = u32::MAX - 1;
const UNSENT: u32 = u32::MAX;
const ROUND_MAX: u32 = QUEUED;

/// What [`Converter::sweep`] forgot, in all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Path entries (a file's names).
    pub paths: u64,
    /// Threads.
    pub threads: u64,
}

/// What one [`Converter::sweep`] asks of the kernel and of the sinks.
#[derive(Debug, Default)]
pub struct Sweep {
    /// Files whose entry in the kernel's `seen_inodes` map is to be deleted, as its keys
    /// `(dev, ino, gen)`: their next I/O sends their path again.
    pub unsend: Vec<(u32, u64, u32)>,
    /// Path ids forgotten: no event will refer to them again (a file that comes back gets
    /// a new one).
    pub paths: Vec<u32>,
    /// Thread ids forgotten: one that comes back gets its process entry again.
    pub threads: Vec<u32>,
}

/// Label kinds (beside file paths).
const L_META: u8 = 1;
const L_JOURNAL: u8 = 2;
const L_SWAP: u8 = 3;
const L_RAW: u8 = 4;
const L_UNKNOWN: u8 = 5;
const L_FLUSH: u8 = 6;
const L_DISCARD: u8 = 7;

/// How often at most the converter asks whether the mount table changed (a `poll` each
/// time; path records of a workload making files come by the hundred thousand a second).
const MOUNT_CHECK: std::time::Duration = std::time::Duration::from_millis(10);

impl Converter {
    /// A converter for these devices and mounts.
    pub fn new(devices: &[Device], mounts: MountTable) -> Converter {
        Converter {
            devices: devices.iter().map(|d| (d.dev.0, d.clone())).collect(),
            mounts,
            mount_watch: MountWatch::open().map(|w| (w, std::time::Instant::now())),
            files: IntMap::default(),
            by_file_id: IdTable::default(),
            labels: IntMap::default(),
            path_bytes: HashMap::new(),
            deleted_ids: IntMap::default(),
            threads: IntMap::default(),
            args: IntMap::default(),
            last_dev: None,
            missing_devs: Vec::new(),
            last_below: (0, 0),
            below_seen: IntMap::default(),
            new_stacked: Vec::new(),
            awaiting_cache: devices
                .iter()
                .filter(|d| crate::devices::awaits_cache(d))
                .map(|d| d.dev.0)
                .collect(),
            next_path_id: 1,
            path_round: IdTable::default(),
            round: 1,
            unsent: Vec::new(),
            superseded: Vec::new(),
            attributed: [0; 3],
            forgotten: Forgotten::default(),
        }
    }

    /// Forgets what has had no I/O for `idle_rounds` sweeps, so that a recording that runs
    /// for months keeps only the files and threads of its last while in memory (and writes
    /// only those into each new part): threads at once (one that comes back is a new
    /// process entry); files in steps, because the kernel knows which paths it sent. This
    /// sweep returns the kernel keys of the idle files ([`Sweep::unsend`]); once the caller
    /// has deleted them from the kernel's map it says so ([`Converter::unsent`]); a later
    /// sweep, at least one full sweep after that, forgets those that had no I/O since (their
    /// next I/O, the kernel having forgotten them too, sends their path again, and they get
    /// a new path id). Events the kernel sent before the deletion arrive within about two
    /// seconds (its per-CPU caches last one, partial batches are fetched every 100 ms):
    /// sweeps must be further apart than that.
    pub fn sweep(&mut self, idle_rounds: u32) -> Sweep {
        let mut out = Sweep::default();
        let (round, idle) = (self.round, idle_rounds.max(1));
        self.round += 1;
        let idle_since = |last: u32| last < ROUND_MAX && last.saturating_add(idle) <= round;
        // Files the kernel forgot at least a sweep ago that had no I/O since.
        let mut pending = Vec::new();
        for (key, at) in std::mem::take(&mut self.unsent) {
            let Some(&id) = self.files.get(&key) else {
                continue;
            };
            match self.path_round.get(id) {
                UNSENT if round > at => {
                    self.files.remove(&key);
                    out.paths.push(id);
                }
                UNSENT => pending.push((key, at)),
                _ => {}
            }
        }
        self.unsent = pending;
        // Names a file had before a rename or unlink: no event refers to them once idle.
        let path_round = &self.path_round;
        let (old, keep): (Vec<u32>, Vec<u32>) = std::mem::take(&mut self.superseded)
            .into_iter()
            .partition(|&id| idle_since(path_round.get(id)));
        self.superseded = keep;
        out.paths.extend(old);
        for &id in &out.paths {
            self.path_bytes.remove(&id);
            self.deleted_ids.remove(&id);
            self.path_round.set(id, 0);
        }
        if !out.paths.is_empty() {
            // The kernel's ids of the forgotten names (a file's, and those it had before).
            let path_round = &self.path_round;
            self.by_file_id.retain(|_, id| path_round.get(id) != 0);
        }
        // The idle files' kernel keys, to be deleted.
        for (&key, &id) in &self.files {
            let r = self.path_round.get(id);
            if r != 0 && idle_since(r) {
                self.path_round.set(id, QUEUED);
                out.unsend.push(key);
            }
        }
        // Threads, and the command lines of processes with no thread left.
        self.threads.retain(|&tid, t| {
            let keep = !idle_since(t.3);
            if !keep {
                out.threads.push(tid);
            }
            keep
        });
        if !out.threads.is_empty() {
            let pids: std::collections::HashSet<u32> = self.threads.values().map(|t| t.0).collect();
            self.args.retain(|pid, _| pids.contains(pid));
        }
        self.forgotten.paths += out.paths.len() as u64;
        self.forgotten.threads += out.threads.len() as u64;
        out
    }

    /// The kernel forgot these files' paths (keys [`Converter::sweep`] returned): those with
    /// no I/O since that sweep are forgotten at a later sweep unless they have I/O first.
    pub fn unsent(&mut self, keys: &[(u32, u64, u32)]) {
        for key in keys {
            let Some(&id) = self.files.get(key) else {
                continue;
            };
            if self.path_round.get(id) == QUEUED {
                self.path_round.set(id, UNSENT);
                self.unsent.push((*key, self.round));
            }
        }
    }

    /// Files and threads known (paths include labels and a renamed file's earlier names).
    pub fn known(&self) -> (usize, usize) {
        (self.path_bytes.len(), self.threads.len())
    }

    /// Notes that an I/O referred to path `id` in this sweep round.
    #[inline]
    fn used_path(&mut self, id: u32) {
        self.path_round.set(id, self.round);
    }

    /// True unless file path `id` was forgotten.
    #[inline]
    fn live_path(&self, id: u32) -> bool {
        self.path_round.get(id) != 0
    }

    /// Path bytes of a path id as shown (a deleted file's with ` (deleted)`), for printing.
    pub fn path(&self, id: u32) -> &[u8] {
        self.path_bytes
            .get(&id)
            .map_or(b"[unknown]", |p| p.as_slice())
    }

    /// Path bytes of a path id as recorded (without the ` (deleted)` of [`Converter::path`]):
    /// what a filter's `path` reads, as it does offline.
    pub fn recorded_path(&self, id: u32) -> &[u8] {
        let p = self.path(id);
        match self.deleted_ids.contains_key(&id) {
            true => p.strip_suffix(DELETED_SUFFIX).unwrap_or(p),
            false => p,
        }
    }

    fn new_path(&mut self, dev: DevT, inode: u64, kind: PathKind, path: Vec<u8>) -> PathEntry {
        let id = self.next_path_id;
        self.next_path_id += 1;
        self.path_bytes.insert(id, path.clone());
        PathEntry {
            path_id: id,
            dev,
            inode,
            kind,
            truncated: false,
            deleted: false,
            path,
            generation: None,
        }
    }

    /// A path record: remember the file's path; returns the new entry. The kernel sends a
    /// file's path again when its names changed (a rename, see `iodump_path_fp` in
    /// ebpf/paths.bpf.h), or when it forgot it had sent it: a path that differs from the
    /// file's latest is a new entry for the same file (same device and inode), and the events
    /// after it carry that name.
    pub fn path_record(&mut self, p: &PathEvent<'_>) -> Option<PathEntry> {
        if p.pflags & (path_flag::NO_DENTRY | path_flag::DISCONNECTED) != 0 {
            // No name to walk (no dentry at hand, or a kernel whose dentry layout the
            // program does not know), or a walk that ended at an anonymous root (a file
            // opened by handle, `open_by_handle_at`, as nfsd does): the file's I/O stays
            // `[unknown]`, not named after the root of its filesystem.
            return None;
        }
        let key = (p.dev, p.ino, p.gen);
        let latest = self.files.get(&key).copied();
        let rel = p.relative_path();
        let sb = DevT(p.sb_dev);
        // A mount or unmount since the table was read (a file system unmounted and mounted
        // elsewhere, its mount id reused: the old mount point would still fit): read it
        // again. (A `poll` at most every [`MOUNT_CHECK`], at a path record; not per I/O.)
        if let Some((w, asked)) = &mut self.mount_watch {
            if asked.elapsed() >= MOUNT_CHECK {
                *asked = std::time::Instant::now();
                if w.changed() {
                    self.mounts = MountTable::read();
                }
            }
        }
        let mut path = match self.mounts.absolute(sb, p.mnt_id, &rel) {
            Some(a) => a,
            None => {
                // A filesystem mounted after we read the table: read it again once.
                self.mounts = MountTable::read();
                self.mounts.absolute(sb, p.mnt_id, &rel).unwrap_or_else(|| {
                    // Not mounted in our namespace: keep the filesystem-relative path,
                    // prefixed with the device so that it is not mistaken for an absolute one.
                    let mut v = format!("[{}]", self.dev_name(sb)).into_bytes();
                    v.extend_from_slice(&rel);
                    v
                })
            }
        };
        let truncated = p.pflags & path_flag::TRUNCATED != 0;
        if truncated {
            // The spec's marker for a path cut from the root side: "…/" then the rest.
            let mut v = "…".as_bytes().to_vec();
            v.extend_from_slice(&rel);
            path = v;
        }
        let deleted = p.pflags & path_flag::DELETED != 0;
        if let Some(id) = latest {
            let same_deleted = self.deleted_ids.contains_key(&id) == deleted;
            // The name without the suffix its entry is shown with.
            let name = self.path_bytes.get(&id).map(|b| match deleted {
                true => b.strip_suffix(DELETED_SUFFIX).unwrap_or(b),
                false => &b[..],
            });
            if same_deleted && name.is_some_and(|b| b == &path[..]) {
                self.note_file_id(p.file_id, id);
                self.used_path(id);
                return None;
            }
        }
        if let Some(old) = latest {
            self.superseded.push(old);
        }
        let mut e = self.new_path(DevT(p.dev), p.ino, PathKind::File, path);
        e.truncated = truncated;
        e.deleted = deleted;
        if deleted {
            self.deleted_ids.insert(e.path_id, ());
            if let Some(b) = self.path_bytes.get_mut(&e.path_id) {
                b.extend_from_slice(DELETED_SUFFIX);
            }
        }
        e.generation = Some(p.gen);
        self.files.insert(key, e.path_id);
        self.note_file_id(p.file_id, e.path_id);
        self.used_path(e.path_id);
        Some(e)
    }

    /// Remembers that I/O events with this kernel file_id are of path `path_id`.
    fn note_file_id(&mut self, file_id: u32, path_id: u32) {
        // The kernel hands ids out one by one: a jump this far past the last one is not
        // from it (its events get the `[unknown]` label).
        if file_id == 0 || u64::from(file_id) > self.by_file_id.end() + (1 << 20) {
            return;
        }
        self.by_file_id.set(file_id, path_id);
    }

    /// The command line of process `pid` as recorded (read when the process was first seen),
    /// `None` when it could not be read (for printing: show the comm then).
    pub fn args(&self, pid: u32) -> Option<&[u8]> {
        self.args.get(&pid).and_then(|a| a.as_deref())
    }

    /// The command line of process `pid`: read from `/proc` the first time the process is
    /// seen, or again when `reread` (it exec'd); remembered for its other threads.
    fn args_of(&mut self, pid: u32, reread: bool) -> Option<Vec<u8>> {
        if !reread {
            if let Some(a) = self.args.get(&pid) {
                return a.clone();
            }
        }
        let a = read_cmdline(pid);
        self.args.insert(pid, a.clone());
        a
    }

    /// The kernel name of a device (`sda1`), or `?`.
    pub fn dev_label(&self, dev: DevT) -> &str {
        self.devices.get(&dev.0).map_or("?", |d| d.name.as_str())
    }

    fn dev_name(&self, dev: DevT) -> String {
        self.devices
            .get(&dev.0)
            .map_or_else(|| dev.to_string(), |d| d.name.clone())
    }

    fn label(&mut self, dev: u32, kind: u8, out: &mut NewEntries) -> u32 {
        if let Some(&id) = self.labels.get(&(dev, kind)) {
            return id;
        }
        let (pk, text) = match kind {
            L_META => (PathKind::Metadata, b"[metadata]".to_vec()),
            L_JOURNAL => (PathKind::Journal, b"[journal]".to_vec()),
            L_SWAP => (PathKind::Swap, b"[swap]".to_vec()),
            L_RAW => (
                PathKind::RawDevice,
                format!("/dev/{}", self.dev_name(DevT(dev))).into_bytes(),
            ),
            L_FLUSH => (PathKind::Flush, b"[flush]".to_vec()),
            L_DISCARD => (PathKind::Discard, b"[discard]".to_vec()),
            _ => (PathKind::Unknown, b"[unknown]".to_vec()),
        };
        let e = self.new_path(DevT(dev), 0, pk, text);
        let id = e.path_id;
        self.labels.insert((dev, kind), id);
        out.path = Some(e);
        id
    }

    /// The stacked devices (device-mapper, md) that appeared while recording, met since the
    /// last call: the kernel side is to follow their I/O below them too.
    pub fn take_new_stacked(&mut self) -> Vec<Device> {
        std::mem::take(&mut self.new_stacked)
    }

    /// The bcache devices that were not on a cache device when met (a bcache device appears
    /// when its backing device is registered, before its cache set attaches it) read again:
    /// one now on more devices gets its entry again in `out` (a later entry replaces an
    /// earlier one). Called once a second; a device gone, or on its cache now, is not read
    /// again.
    pub fn resettle(&mut self, out: &mut NewEntries) {
        self.resettle_with(crate::devices::read_one, out);
    }

    /// [`Converter::resettle`] with the devices read by `read`.
    fn resettle_with(&mut self, read: impl Fn(DevT) -> Option<Device>, out: &mut NewEntries) {
        let devices = &mut self.devices;
        self.awaiting_cache.retain(|&dev| {
            let Some(now) = read(DevT(dev)) else {
                return false;
            };
            let waits = crate::devices::awaits_cache(&now);
            if devices
                .get(&dev)
                .is_none_or(|d| d.stacked_on != now.stacked_on)
            {
                devices.insert(dev, now.clone());
                out.devices.push(now);
            }
            waits
        });
    }

    /// The first I/O `upper_dev` sent to `dev`: when `dev` is not among the devices its
    /// entry is stacked on, the entry is read again (with `read`), and one that changed (on
    /// more or other devices; another device of that number) is a new entry in `out` (a
    /// later entry replaces an earlier one).
    fn restack_with(
        &mut self,
        dev: u32,
        upper_dev: u32,
        read: impl Fn(DevT) -> Option<Device>,
        out: &mut NewEntries,
    ) {
        self.last_below = (dev, upper_dev);
        if self
            .below_seen
            .insert(u64::from(upper_dev) << 32 | u64::from(dev), ())
            .is_some()
        {
            return;
        }
        let Some(up) = self.devices.get(&upper_dev) else {
            return;
        };
        if up.stacked_on.is_empty() || up.stacked_on.contains(&DevT(dev)) {
            return;
        }
        if let Some(now) = read(DevT(upper_dev)) {
            // Another device of the same number (a volume removed, another made) too.
            if now != *up && !now.stacked_on.is_empty() {
                self.devices.insert(upper_dev, now.clone());
                out.devices.push(now);
            }
        }
    }

    /// A device this converter has not seen: read sysfs again (once per device number). One
    /// sysfs does not list, whose I/O serves an I/O on an NVMe multipath head, is a path of
    /// that head ([`Converter::nvme_path`]).
    fn learn_device(&mut self, dev: u32, upper_dev: u32, out: &mut NewEntries) {
        if self.missing_devs.contains(&dev) {
            return;
        }
        let all = crate::devices::host_list().unwrap_or_default();
        let found = all
            .iter()
            .find(|d| d.dev.0 == dev)
            .map(crate::devices::device);
        match found {
            Some(d) => {
                if crate::devices::is_stacked(&d) {
                    self.new_stacked.push(d.clone());
                }
                if crate::devices::awaits_cache(&d) {
                    self.awaiting_cache.push(dev);
                }
                self.devices.insert(dev, d.clone());
                out.devices.push(d);
            }
            None => match self.nvme_path(dev, upper_dev, &all) {
                Some((path, head)) => {
                    self.devices.insert(dev, path.clone());
                    self.devices.insert(head.dev.0, head.clone());
                    out.devices.extend([path, head]);
                }
                None => self.missing_devs.push(dev),
            },
        }
    }

    /// The entry of `dev`, hidden from sysfs, when its I/O serves one on an NVMe multipath
    /// head (`upper_dev`), and the head's entry now on it too. Its name: the head's one
    /// hidden path disk not yet named (`nvme0c0n1`); when the head has several, which number
    /// is which does not show, so `HEAD-path-MAJ:MIN`. Kernels before 5.14 or so give path
    /// disks no number at all (0:0, seen on 5.10): every path of every head is then that one
    /// device, named for a path only when the host has one, else `nvme-paths`.
    fn nvme_path(&self, dev: u32, upper_dev: u32, all: &[BlockDevice]) -> Option<(Device, Device)> {
        let mut head = self.devices.get(&upper_dev)?.clone();
        if head.label != iodump_host::sysfs::NVME_MULTIPATH {
            return None;
        }
        let paths = all
            .iter()
            .find(|d| d.dev == head.dev)
            .map(|d| d.hidden_paths.clone())
            .unwrap_or_default();
        let unnamed: Vec<&String> = paths
            .iter()
            .filter(|p| !self.devices.values().any(|d| &d.name == *p))
            .collect();
        let d = DevT(dev);
        let all_paths = all.iter().map(|b| b.hidden_paths.len()).sum::<usize>();
        let name = match (paths.len(), unnamed.as_slice()) {
            _ if dev == 0 && all_paths != 1 => "nvme-paths".to_string(),
            (1, [one]) => (*one).clone(),
            _ => format!("{}-path-{}:{}", head.name, d.major(), d.minor()),
        };
        head.stacked_on.push(d);
        head.stacked_on.sort();
        let path = Device {
            dev: d,
            name,
            partition_of: None,
            sector_size: head.sector_size,
            start_sector: 0,
            bio_based: false,
            label: String::new(),
            stacked_on: Vec::new(),
        };
        Some((path, head))
    }

    /// An I/O record: the event, plus any table entries it needs first.
    pub fn io_record(&mut self, r: &IoEvent, out: &mut NewEntries) -> Event {
        out.path = None;
        out.process = None;
        out.devices.clear();
        self.note_device(r, out);
        self.note_process(r, out);
        let path_id = self.path_of(r, out);
        let bio_based = r.ioflags & io_flag::BIO_BASED != 0;
        let queue_ns = (!bio_based && r.ioflags & io_flag::ISSUED != 0 && r.issue_ns >= r.start_ns)
            .then(|| r.issue_ns - r.start_ns);
        Event {
            timestamp_ns: r.start_ns,
            dev: DevT(r.dev),
            sector: r.sector,
            bytes: r.bytes,
            op: Op::from_code(r.op),
            flags: Flags(r.flags),
            pid: r.pid,
            tid: r.tid,
            path_id,
            queue_ns,
            latency_ns: r.complete_ns.saturating_sub(r.start_ns),
            error: r.error,
            cpu: r.cpu,
            syscall: syscall(r),
            dirtier_pid: (r.ioflags & io_flag::DIRTIER != 0).then_some(r.dirtier_pid),
            cgroup_id: r.cgroup_id,
            upper: (r.upper_dev != 0).then_some(UpperIo {
                dev: DevT(r.upper_dev),
                timestamp_ns: r.upper_start_ns,
            }),
        }
    }

    /// A device not seen before (hot-added) gets its table entry; a stacked device that sends
    /// I/O to a device it was not on gets its entry again ([`Converter::restack_with`]).
    #[inline]
    fn note_device(&mut self, r: &IoEvent, out: &mut NewEntries) {
        if self.last_dev != Some(r.dev) {
            if !self.devices.contains_key(&r.dev) {
                self.learn_device(r.dev, r.upper_dev, out);
            }
            if self.devices.contains_key(&r.dev) {
                self.last_dev = Some(r.dev);
            }
        }
        if r.upper_dev != 0 && self.last_below != (r.dev, r.upper_dev) {
            self.restack_with(r.dev, r.upper_dev, crate::devices::read_one, out);
        }
    }

    /// The process table: a thread seen for the first time, or with a new comm (exec).
    #[inline]
    fn note_process(&mut self, r: &IoEvent, out: &mut NewEntries) {
        let comm = r.comm;
        let round = self.round;
        let exec = match self.threads.get_mut(&r.tid) {
            Some((pid, c, _, at)) if *pid == r.pid && *c == comm => {
                *at = round;
                None
            }
            // The thread-group leader with a new name: it exec'd (or renamed itself), so its
            // command line is read again.
            Some((pid, _, _, _)) => Some(*pid == r.pid && r.tid == r.pid),
            None => Some(false),
        };
        if r.ioflags & io_flag::DIRTIER != 0 && r.dirtier_pid != r.tid {
            // The dirtier of written-back pages: its entry is still wanted.
            if let Some(t) = self.threads.get_mut(&r.dirtier_pid) {
                t.3 = round;
            }
        }
        if let Some(exec) = exec {
            self.threads
                .insert(r.tid, (r.pid, comm, r.cgroup_id, round));
            out.process = Some(Process {
                tid: r.tid,
                pid: r.pid,
                comm: r.comm().to_vec(),
                cgroup_id: r.cgroup_id,
                args: self.args_of(r.pid, exec),
            });
        }
    }

    /// The path id of the I/O's file or label, counting how it was attributed.
    #[inline]
    fn path_of(&mut self, r: &IoEvent, out: &mut NewEntries) -> u32 {
        if let Some(label) = dataless_label(r) {
            self.attributed[1] += 1;
            return self.label(r.dev, label, out);
        }
        let meta = r.flags & (Flags::META.0) != 0;
        let file_id = match r.path_kind {
            // The kernel's file_id when it had it at hand (an index), else the inode.
            path_kind::FILE | path_kind::DIO => match self.by_file_id.get(r.file_id) {
                id if id != 0 && self.live_path(id) => Some(id),
                _ => self.files.get(&(r.ino_dev, r.ino, r.ino_gen)).copied(),
            },
            _ => None,
        };
        let path_id = match r.path_kind {
            path_kind::FILE | path_kind::DIO => match file_id {
                Some(id) => {
                    self.used_path(id);
                    id
                }
                None => self.label(r.dev, L_UNKNOWN, out),
            },
            path_kind::META => self.label(r.dev, L_META, out),
            path_kind::JOURNAL => self.label(r.dev, L_JOURNAL, out),
            path_kind::SWAP => self.label(r.dev, L_SWAP, out),
            path_kind::RAWDEV => self.label(r.dev, L_RAW, out),
            path_kind::BDEV => {
                let kind = if r.comm().starts_with(b"jbd2/") {
                    L_JOURNAL
                } else if meta || self.mounts.is_mounted(DevT(r.dev)) {
                    L_META
                } else {
                    L_RAW
                };
                self.label(r.dev, kind, out)
            }
            _ => self.label(r.dev, L_UNKNOWN, out),
        };
        let slot = match r.path_kind {
            path_kind::FILE | path_kind::DIO if file_id.is_some() => 0,
            path_kind::UNKNOWN | path_kind::USERMEM | path_kind::FILE | path_kind::DIO => 2,
            _ => 1,
        };
        self.attributed[slot] += 1;
        path_id
    }
}

/// The label of an I/O that carries no file's data, whatever the kernel side found: a cache
/// flush (`[flush]`), a discard the kernel side found no file for — blocks no file holds any
/// more, a filesystem's online discard of freed extents or fstrim (`[discard]`) — and ext4's
/// lazy init thread zeroing a new filesystem's inode tables (`[metadata]`).
#[inline]
fn dataless_label(r: &IoEvent) -> Option<u8> {
    let no_file = r.path_kind == path_kind::UNKNOWN;
    match Op::from_code(r.op) {
        Op::Flush if r.bytes == 0 => Some(L_FLUSH),
        Op::Discard if no_file => Some(L_DISCARD),
        Op::WriteZeroes if no_file && r.comm().starts_with(b"ext4lazyinit") => Some(L_META),
        _ => None,
    }
}

/// The command line of process `pid` from `/proc/PID/cmdline`: at most [`ARGS_MAX_BYTES`]
/// bytes, the NULs between arguments as spaces, trailing NULs and spaces dropped. `None` when
/// the process is gone (its I/O is converted a little after it happened), for kernel threads
/// (whose command line is empty) and when `/proc` cannot be read.
pub fn read_cmdline(pid: u32) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(format!("/proc/{pid}/cmdline")).ok()?;
    let mut v = Vec::with_capacity(ARGS_MAX_BYTES);
    f.take(ARGS_MAX_BYTES as u64).read_to_end(&mut v).ok()?;
    cmdline_text(v)
}

/// [`read_cmdline`]'s rendering of the bytes of `/proc/PID/cmdline`.
fn cmdline_text(mut v: Vec<u8>) -> Option<Vec<u8>> {
    for b in &mut v {
        if *b == 0 {
            *b = b' ';
        }
    }
    let keep = v.trim_ascii_end().len();
    v.truncate(keep);
    (!v.is_empty()).then_some(v)
}

/// Maps the kernel side's syscall field (an x86_64 syscall number, or a marker) and the
/// context to the format's syscall codes. Numbers without a code of their own are stored as
/// `0x8000 + number`.
pub fn syscall(r: &IoEvent) -> Option<Syscall> {
    let code = match r.syscall {
        abi::SC_FAULT => Syscall::PAGE_FAULT.0,
        abi::SC_NONE => {
            let c = r.comm();
            if c.starts_with(b"jbd2/") || c.starts_with(b"xfs-log") || c == b"xfsaild" {
                Syscall::JOURNAL.0
            } else if c.starts_with(b"iou-wrk") || c.starts_with(b"iou-sqp") {
                Syscall::IO_URING_ENTER.0
            } else if r.ioflags & io_flag::KTHREAD != 0 && r.op == Op::Write.code() {
                Syscall::WRITEBACK.0
            } else if r.flags & Flags::READAHEAD.0 != 0 {
                Syscall::READAHEAD.0
            } else {
                return None;
            }
        }
        0 => 1,              // read
        1 => 2,              // write
        17 => 3,             // pread64
        18 => 4,             // pwrite64
        19 => 5,             // readv
        20 => 6,             // writev
        295 | 327 => 7,      // preadv, preadv2
        296 | 328 => 8,      // pwritev, pwritev2
        209 => 9,            // io_submit
        426 => 10,           // io_uring_enter
        74 => 11,            // fsync
        75 => 12,            // fdatasync
        277 => 13,           // sync_file_range
        162 | 306 => 14,     // sync, syncfs
        257 | 2 | 437 => 19, // openat, open, openat2
        326 | 40 => 20,      // copy_file_range, sendfile
        285 => 21,           // fallocate
        26 => 22,            // msync
        217 | 78 => 23,      // getdents64, getdents
        59 | 322 => 24,      // execve, execveat
        n if n < 0x8000 => 0x8000 + n,
        _ => return None,
    };
    Some(Syscall(code))
}

/// An I/O record of `fio` (pid 10, tid 11) on 252:0, for tests of what converts records.
#[cfg(test)]
pub(crate) fn sample_io(path_kind: u8, syscall_nr: u16) -> IoEvent {
    let mut comm = [0u8; 16];
    comm[..3].copy_from_slice(b"fio");
    IoEvent {
        op: 0,
        flags: 0,
        path_kind,
        ioflags: io_flag::ISSUED,
        error: 0,
        start_ns: 100,
        issue_ns: 150,
        complete_ns: 1100,
        sector: 8,
        cgroup_id: 1,
        ino: 12,
        ino_dev: DevT::new(252, 0).0,
        ino_gen: 3,
        dev: DevT::new(252, 0).0,
        bytes: 4096,
        pid: 10,
        tid: 11,
        dirtier_pid: 0,
        cpu: 1,
        syscall: syscall_nr,
        comm,
        file_id: 7,
        upper_dev: 0,
        upper_start_ns: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(path_kind: u8, syscall_nr: u16) -> IoEvent {
        sample_io(path_kind, syscall_nr)
    }

    /// A path record of inode `ino` (generation 3) on `dev` with kernel file id `file_id`:
    /// one component, `name`.
    fn path_rec(dev: u32, ino: u64, file_id: u32, name: &[u8]) -> Vec<u8> {
        let mut rec = vec![0u8; abi::PATH_EVENT_BYTES];
        rec[0] = 2;
        rec[4] = 1;
        rec[6] = (name.len() + 1) as u8;
        rec[8..16].copy_from_slice(&ino.to_le_bytes());
        rec[16..20].copy_from_slice(&dev.to_le_bytes());
        rec[20..24].copy_from_slice(&3u32.to_le_bytes());
        rec[28..32].copy_from_slice(&dev.to_le_bytes());
        rec[32..36].copy_from_slice(&file_id.to_le_bytes());
        rec.extend_from_slice(name);
        rec.push(0);
        rec
    }

    /// A file unlinked while open: its next path record (marked deleted) is a new entry,
    /// printed `PATH (deleted)`, and its I/O after it is of that entry; a filter's `path`
    /// reads the path as recorded. Sent again, deleted still, it is the same entry.
    #[test]
    fn a_deleted_file_is_printed_deleted() {
        let mut c = Converter::new(&[], MountTable::default());
        let dev = DevT::new(252, 0).0;
        let first = c
            .path_record(&PathEvent::parse(&path_rec(dev, 100, 1, b"t")).unwrap())
            .unwrap();
        assert_eq!(c.path(first.path_id), b"[252:0]/t");
        let mut rec = path_rec(dev, 100, 2, b"t");
        rec[3] = path_flag::DELETED;
        let gone = c.path_record(&PathEvent::parse(&rec).unwrap()).unwrap();
        assert!(gone.deleted);
        assert_eq!(gone.path, b"[252:0]/t");
        assert_ne!(gone.path_id, first.path_id);
        assert_eq!(c.path(gone.path_id), b"[252:0]/t (deleted)");
        assert_eq!(c.recorded_path(gone.path_id), b"[252:0]/t");
        assert_eq!(c.recorded_path(first.path_id), b"[252:0]/t");
        rec[32..36].copy_from_slice(&3u32.to_le_bytes());
        assert!(c.path_record(&PathEvent::parse(&rec).unwrap()).is_none());
    }

    #[test]
    fn an_nvme_path_disk_is_named_from_its_heads_hidden_paths() {
        let head = Device {
            dev: DevT::new(259, 1),
            name: "nvme0n1".into(),
            partition_of: None,
            sector_size: 4096,
            start_sector: 0,
            bio_based: true,
            label: iodump_host::sysfs::NVME_MULTIPATH.into(),
            stacked_on: Vec::new(),
        };
        let host = |paths: &[&str]| BlockDevice {
            name: "nvme0n1".into(),
            dev: DevT::new(259, 1),
            partition_of: None,
            logical_block_size_bytes: 4096,
            start_sector: 0,
            bio_based: true,
            stack_label: iodump_host::sysfs::NVME_MULTIPATH.into(),
            stacked_on: Vec::new(),
            hidden_paths: paths.iter().map(|p| p.to_string()).collect(),
        };
        let c = Converter::new(std::slice::from_ref(&head), MountTable::default());
        let (path, new_head) = c
            .nvme_path(DevT::new(259, 0).0, head.dev.0, &[host(&["nvme0c0n1"])])
            .unwrap();
        assert_eq!(path.name, "nvme0c0n1");
        assert_eq!((path.bio_based, path.sector_size), (false, 4096));
        assert_eq!(new_head.stacked_on, [DevT::new(259, 0)]);
        assert_eq!(new_head.name, "nvme0n1");
        // Two paths: which number is which does not show.
        let (path, _) = c
            .nvme_path(
                DevT::new(259, 2).0,
                head.dev.0,
                &[host(&["nvme0c0n1", "nvme0c1n1"])],
            )
            .unwrap();
        assert_eq!(path.name, "nvme0n1-path-259:2");
        // No number (5.10): one device for every path of every head.
        let (path, _) = c.nvme_path(0, head.dev.0, &[host(&["nvme0c0n1"])]).unwrap();
        assert_eq!(path.name, "nvme0c0n1");
        let mut second = host(&["nvme1c1n1"]);
        second.name = "nvme1n1".into();
        second.dev = DevT::new(259, 3);
        let (path, _) = c
            .nvme_path(0, head.dev.0, &[host(&["nvme0c0n1"]), second])
            .unwrap();
        assert_eq!(path.name, "nvme-paths");
        // Not below a multipath head: nothing.
        assert!(c
            .nvme_path(DevT::new(259, 0).0, 0, &[host(&["nvme0c0n1"])])
            .is_none());
        let mut plain = c;
        plain.devices.get_mut(&head.dev.0).unwrap().label.clear();
        assert!(plain
            .nvme_path(DevT::new(259, 0).0, head.dev.0, &[host(&["nvme0c0n1"])])
            .is_none());
        // Through an event: its device and the head's entry, now on it, are new entries.
        let mut c = Converter::new(std::slice::from_ref(&head), MountTable::default());
        let mut ne = NewEntries::default();
        let mut r = io(path_kind::RAWDEV, 17);
        r.dev = DevT::new(259, 7).0;
        r.upper_dev = head.dev.0;
        r.upper_start_ns = 90;
        let e = c.io_record(&r, &mut ne);
        assert_eq!(e.dev, DevT::new(259, 7));
        let names: Vec<&str> = ne.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names[1], "nvme0n1");
        assert_eq!(ne.devices[1].stacked_on, [DevT::new(259, 7)]);
        assert_eq!(c.dev_label(DevT::new(259, 7)), names[0]);
    }

    /// A bio-based stacked device's entry.
    fn stacked(dev: DevT, name: &str, label: &str, on: &[DevT]) -> Device {
        Device {
            dev,
            name: name.into(),
            partition_of: None,
            sector_size: 512,
            start_sector: 0,
            bio_based: true,
            label: label.into(),
            stacked_on: on.to_vec(),
        }
    }

    #[test]
    fn a_bcache_device_met_before_its_cache_set_attached_it_gets_its_entry_again() {
        let bcache =
            |on: &[DevT]| stacked(DevT::new(250, 0), "bcache0", iodump_host::sysfs::BCACHE, on);
        let (backing, cache) = (DevT::new(252, 1), DevT::new(252, 2));
        let mut c = Converter::new(&[bcache(&[backing])], MountTable::default());
        let mut ne = NewEntries::default();
        // Still not attached: no new entry, read again next time.
        c.resettle_with(|_| Some(bcache(&[backing])), &mut ne);
        assert!(ne.devices.is_empty());
        // Attached: its entry again, on both; not read again.
        c.resettle_with(|_| Some(bcache(&[backing, cache])), &mut ne);
        assert_eq!(ne.devices.len(), 1);
        assert_eq!(ne.devices[0].stacked_on, [backing, cache]);
        assert_eq!(c.devices[&DevT::new(250, 0).0].stacked_on, [backing, cache]);
        c.resettle_with(|_| panic!("read again"), &mut ne);
        // One met while recording (its first I/O) waits too; one gone is not read again.
        let mut c = Converter::new(&[], MountTable::default());
        c.awaiting_cache.push(DevT::new(250, 0).0);
        c.resettle_with(|_| None, &mut ne);
        assert!(c.awaiting_cache.is_empty());
        // A device-mapper device never waits.
        let mut dm = bcache(&[backing]);
        dm.label = "vg-lv".into();
        let c = Converter::new(&[dm], MountTable::default());
        assert!(c.awaiting_cache.is_empty());
    }

    #[test]
    fn a_stacked_device_reloaded_onto_another_device_gets_its_entry_again() {
        let lv = |on: &[DevT]| stacked(DevT::new(253, 0), "dm-0", "vg-lv", on);
        let (pv1, pv2) = (DevT::new(252, 1), DevT::new(252, 2));
        let mut c = Converter::new(&[lv(&[pv1])], MountTable::default());
        let mut ne = NewEntries::default();
        // I/O to a device it is on: not read again.
        c.restack_with(pv1.0, lv(&[]).dev.0, |_| panic!("read"), &mut ne);
        assert!(ne.devices.is_empty());
        // The table reloaded onto both (lvextend): its entry again, once.
        c.restack_with(pv2.0, lv(&[]).dev.0, |_| Some(lv(&[pv1, pv2])), &mut ne);
        assert_eq!(ne.devices.len(), 1);
        assert_eq!(ne.devices[0].stacked_on, [pv1, pv2]);
        assert_eq!(c.devices[&lv(&[]).dev.0].stacked_on, [pv1, pv2]);
        c.restack_with(pv2.0, lv(&[]).dev.0, |_| panic!("read again"), &mut ne);
        // A pair sysfs does not list (a device further down): read once, nothing new.
        let pv3 = DevT::new(252, 3);
        c.restack_with(pv3.0, lv(&[]).dev.0, |_| Some(lv(&[pv1, pv2])), &mut ne);
        c.restack_with(pv3.0, lv(&[]).dev.0, |_| panic!("read again"), &mut ne);
        assert_eq!(ne.devices.len(), 1);
        // Gone from sysfs, or an upper device not known: nothing.
        c.restack_with(DevT::new(252, 4).0, lv(&[]).dev.0, |_| None, &mut ne);
        c.restack_with(pv1.0, DevT::new(253, 9).0, |_| panic!("read"), &mut ne);
        assert_eq!(ne.devices.len(), 1);
        // Through an event: the upper device's entry is a new entry beside the event.
        let mut c = Converter::new(&[lv(&[pv1])], MountTable::default());
        c.devices.insert(pv2.0, lv(&[]));
        let mut r = io(path_kind::RAWDEV, 17);
        r.dev = pv2.0;
        r.upper_dev = lv(&[]).dev.0;
        r.upper_start_ns = 90;
        c.io_record(&r, &mut ne);
        assert_eq!(c.last_below, (pv2.0, lv(&[]).dev.0));
    }

    #[test]
    fn forgetting_idle_files_and_threads() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        let dev = DevT::new(252, 0).0;
        // Path records of inodes 100.. with file ids 1.., one component each.
        let record = |ino: u64, file_id: u32, name: &[u8]| path_rec(dev, ino, file_id, name);
        let io_of = |ino: u64, file_id: u32, tid: u32| {
            let mut r = io(path_kind::FILE, 17);
            r.ino = ino;
            r.file_id = file_id;
            r.tid = tid;
            r.pid = tid;
            r
        };
        let mut ids = Vec::new();
        for i in 0..3u32 {
            let rec = record(100 + i as u64, 1 + i, format!("f{i}").as_bytes());
            ids.push(
                c.path_record(&PathEvent::parse(&rec).unwrap())
                    .unwrap()
                    .path_id,
            );
            c.io_record(&io_of(100 + i as u64, 1 + i, 50 + i), &mut ne);
        }
        assert_eq!(c.known(), (3, 3));
        // Everything had I/O in this round: nothing idle.
        let s = c.sweep(1);
        assert!(s.unsend.is_empty() && s.paths.is_empty() && s.threads.is_empty());
        // File 0 and thread 50 keep working; the others go idle.
        c.io_record(&io_of(100, 1, 50), &mut ne);
        let s = c.sweep(1);
        let mut unsend = s.unsend.clone();
        unsend.sort();
        assert_eq!(unsend, [(dev, 101, 3), (dev, 102, 3)]);
        assert!(s.paths.is_empty());
        let mut t = s.threads.clone();
        t.sort();
        assert_eq!(t, [51, 52]);
        // The kernel forgot them. File 1 has I/O again (the kernel sent its path again under
        // a new id): kept. File 2 has none: forgotten a sweep after the next, and its old
        // file id names nothing.
        c.unsent(&s.unsend);
        assert!(c
            .path_record(&PathEvent::parse(&record(101, 4, b"f1")).unwrap())
            .is_none());
        assert_eq!(c.io_record(&io_of(101, 4, 50), &mut ne).path_id, ids[1]);
        let s = c.sweep(1);
        assert!(s.paths.is_empty(), "{s:?}");
        // File 0 (idle now) is to be unsent; this test never says it was: it stays.
        assert_eq!(s.unsend, [(dev, 100, 3)]);
        let s = c.sweep(1);
        assert_eq!(s.paths, [ids[2]]);
        assert_eq!(c.forgotten.paths, 1);
        assert_eq!(c.known().0, 2);
        assert_eq!((c.by_file_id.get(3), c.path_round.get(ids[2])), (0, 0));
        let unknown = c.io_record(&io_of(102, 3, 50), &mut ne);
        assert_eq!(c.path(unknown.path_id), b"[unknown]");
        // Its path sent again (the kernel forgot it too): a new entry, a new id.
        let again = c
            .path_record(&PathEvent::parse(&record(102, 5, b"f2")).unwrap())
            .unwrap();
        assert_ne!(again.path_id, ids[2]);
        assert_eq!(again.path, b"[252:0]/f2");
        assert_eq!(
            c.io_record(&io_of(102, 5, 50), &mut ne).path_id,
            again.path_id
        );
        // A forgotten thread that comes back is a new process entry.
        c.io_record(&io_of(100, 1, 51), &mut ne);
        assert_eq!(ne.process.as_ref().map(|p| p.tid), Some(51));
    }

    /// Files that come and go, 40,000 of them a thousand at a time, each idle after its
    /// round: what the converter keeps per kernel file id and per path id follows the files
    /// it knows, not every id handed out (each would cost 8 bytes otherwise: 320 KB).
    #[test]
    fn forgotten_files_cost_no_memory_per_id() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        let dev = DevT::new(252, 0).0;
        let mut file_id = 0u32;
        for round in 0..40u64 {
            for i in 0..1000u64 {
                file_id += 1;
                let ino = round * 1000 + i + 100;
                let rec = path_rec(dev, ino, file_id, format!("f{ino}").as_bytes());
                let id = c
                    .path_record(&PathEvent::parse(&rec).unwrap())
                    .unwrap()
                    .path_id;
                let mut r = io(path_kind::FILE, 17);
                r.ino = ino;
                r.file_id = file_id;
                assert_eq!(c.io_record(&r, &mut ne).path_id, id);
            }
            let s = c.sweep(1);
            c.unsent(&s.unsend);
        }
        assert!(c.forgotten.paths >= 37_000, "{:?}", c.forgotten);
        let kept = c.by_file_id.heap_bytes() + c.path_round.heap_bytes();
        assert!(kept < 48 << 10, "{kept} bytes for {file_id} file ids");
        assert!(c.by_file_id.len() <= 3000 && c.path_round.len() <= 3000);
    }

    #[test]
    fn events_tables_and_labels() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        // Unknown inode: labelled, process entry emitted once.
        let e = c.io_record(&io(path_kind::FILE, 17), &mut ne);
        assert_eq!(e.queue_ns, Some(50));
        assert_eq!(e.latency_ns, 1000);
        assert_eq!(e.syscall, Some(Syscall(3)));
        assert_eq!(ne.process.as_ref().unwrap().comm, b"fio");
        assert_eq!(ne.path.as_ref().unwrap().path, b"[unknown]");
        let unknown_id = e.path_id;
        let e2 = c.io_record(&io(path_kind::FILE, 17), &mut ne);
        assert!(ne.process.is_none() && ne.path.is_none());
        assert_eq!(e2.path_id, unknown_id);
        // Path record arrives: the next I/O of that inode gets its own id.
        let mut rec = vec![0u8; abi::PATH_EVENT_BYTES];
        rec[0] = 2;
        rec[4] = 2;
        let names = b"f\0dir\0";
        rec[6] = names.len() as u8;
        rec[8..16].copy_from_slice(&12u64.to_le_bytes());
        rec[16..20].copy_from_slice(&DevT::new(252, 0).0.to_le_bytes());
        rec[20..24].copy_from_slice(&3u32.to_le_bytes());
        rec[28..32].copy_from_slice(&DevT::new(252, 0).0.to_le_bytes());
        rec[32..36].copy_from_slice(&7u32.to_le_bytes());
        rec.extend_from_slice(names);
        let pe = PathEvent::parse(&rec).unwrap();
        let entry = c.path_record(&pe).unwrap();
        assert_eq!(entry.path, b"[252:0]/dir/f");
        let e3 = c.io_record(&io(path_kind::FILE, 17), &mut ne);
        assert_eq!(e3.path_id, entry.path_id);
        // The same inode sent again under a new file_id (its seen_inodes entry was evicted):
        // no new path entry, and events with either id name the same path.
        rec[32..36].copy_from_slice(&9u32.to_le_bytes());
        assert!(c.path_record(&PathEvent::parse(&rec).unwrap()).is_none());
        let mut r9 = io(path_kind::FILE, 17);
        r9.file_id = 9;
        assert_eq!(c.io_record(&r9, &mut ne).path_id, entry.path_id);
        // file_id 0: the kernel knew the path was sent but not its id; found by the inode.
        r9.file_id = 0;
        assert_eq!(c.io_record(&r9, &mut ne).path_id, entry.path_id);
        // An id the kernel never sent, of an inode it never sent: labelled, not a wrong path.
        r9.file_id = 8;
        r9.ino = 13;
        assert_eq!(c.io_record(&r9, &mut ne).path_id, unknown_id);
        r9.file_id = 0;
        assert_eq!(c.io_record(&r9, &mut ne).path_id, unknown_id);
        assert_eq!(c.attributed, [3, 0, 4]);
        // Labels.
        let m = c.io_record(&io(path_kind::META, abi::SC_NONE), &mut ne);
        assert_eq!(c.path(m.path_id), b"[metadata]");
        let mut j = io(path_kind::BDEV, abi::SC_NONE);
        j.comm[..8].copy_from_slice(b"jbd2/zra");
        let je = c.io_record(&j, &mut ne);
        assert_eq!(c.path(je.path_id), b"[journal]");
        assert_eq!(je.syscall, Some(Syscall::JOURNAL));
    }

    #[test]
    fn a_lower_io_names_its_upper_io() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        assert_eq!(c.io_record(&io(path_kind::FILE, 17), &mut ne).upper, None);
        let mut r = io(path_kind::FILE, 17);
        r.upper_dev = DevT::new(253, 0).0;
        r.upper_start_ns = 90;
        let up = c.io_record(&r, &mut ne).upper.unwrap();
        assert_eq!((up.dev, up.timestamp_ns), (DevT::new(253, 0), 90));
    }

    #[test]
    fn command_lines_are_read_once_per_process_and_again_after_exec() {
        assert_eq!(
            cmdline_text(b"postgres: checkpointer \0\0\0".to_vec()).as_deref(),
            Some(&b"postgres: checkpointer"[..])
        );
        assert_eq!(
            cmdline_text(b"dd\0if=/dev/zero\0of=x\0".to_vec()).as_deref(),
            Some(&b"dd if=/dev/zero of=x"[..])
        );
        assert_eq!(cmdline_text(Vec::new()), None);
        // This test's own process: its command line starts with the test binary.
        let me = std::process::id();
        let own = read_cmdline(me).expect("own cmdline");
        let exe = std::env::args().next().unwrap();
        assert!(
            own.starts_with(exe.as_bytes()),
            "{}",
            String::from_utf8_lossy(&own)
        );
        assert!(own.len() <= ARGS_MAX_BYTES);
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        let mut r = io(path_kind::FILE, 17);
        r.pid = me;
        r.tid = me;
        c.io_record(&r, &mut ne);
        assert_eq!(ne.process.as_ref().unwrap().args.as_deref(), Some(&own[..]));
        assert_eq!(c.args(me), Some(&own[..]));
        // Another thread of it: the command line remembered, not read again.
        c.args.insert(me, Some(b"cached".to_vec()));
        r.tid = me + 1_000_000;
        c.io_record(&r, &mut ne);
        assert_eq!(
            ne.process.as_ref().unwrap().args.as_deref(),
            Some(&b"cached"[..])
        );
        // The leader with a new comm (exec): read again.
        r.tid = me;
        r.comm[..3].copy_from_slice(b"sh\0");
        c.io_record(&r, &mut ne);
        assert_eq!(ne.process.as_ref().unwrap().args.as_deref(), Some(&own[..]));
        // A process that is gone: unknown.
        r.pid = u32::MAX - 1;
        r.tid = u32::MAX - 1;
        c.io_record(&r, &mut ne);
        assert_eq!(ne.process.as_ref().unwrap().args, None);
    }

    #[test]
    fn flushes_have_their_own_label_and_keep_their_queue_time() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        let mut f = io(path_kind::UNKNOWN, 74);
        f.op = Op::Flush.code();
        f.bytes = 0;
        let e = c.io_record(&f, &mut ne);
        let entry = ne.path.take().unwrap();
        assert_eq!(
            (entry.kind, entry.path.as_slice()),
            (PathKind::Flush, &b"[flush]"[..])
        );
        assert_eq!(e.path_id, entry.path_id);
        assert_eq!(e.queue_ns, Some(50));
        assert_eq!(e.syscall, Some(Syscall::FSYNC));
        // One label per device, counted as a label; a write is not a flush.
        f.path_kind = path_kind::FILE;
        assert_eq!(c.io_record(&f, &mut ne).path_id, entry.path_id);
        assert!(ne.path.is_none());
        assert_eq!(c.attributed, [0, 2, 0]);
        let w = c.io_record(&io(path_kind::UNKNOWN, 1), &mut ne);
        assert_ne!(w.path_id, entry.path_id);
        assert_eq!(c.attributed, [0, 2, 1]);
    }

    #[test]
    fn discards_of_no_file_are_labelled_as_discards() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        let mut d = io(path_kind::UNKNOWN, 0);
        d.op = Op::Discard.code();
        d.bytes = 4096;
        let e = c.io_record(&d, &mut ne);
        let entry = ne.path.take().unwrap();
        assert_eq!(
            (entry.kind, entry.path.as_slice()),
            (PathKind::Discard, &b"[discard]"[..])
        );
        assert_eq!(e.path_id, entry.path_id);
        // One label per device, counted as a label.
        assert_eq!(c.io_record(&d, &mut ne).path_id, entry.path_id);
        assert_eq!(c.attributed, [0, 2, 0]);
        // A discard of the raw device keeps the device's label; a write of no file is unknown.
        d.path_kind = path_kind::RAWDEV;
        assert_ne!(c.io_record(&d, &mut ne).path_id, entry.path_id);
        assert_eq!(ne.path.take().unwrap().kind, PathKind::RawDevice);
        let w = c.io_record(&io(path_kind::UNKNOWN, 1), &mut ne);
        assert_eq!(ne.path.take().unwrap().kind, PathKind::Unknown);
        assert_ne!(w.path_id, entry.path_id);
    }

    #[test]
    fn inode_table_zeroing_of_ext4_is_metadata() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut ne = NewEntries::default();
        let mut z = io(path_kind::UNKNOWN, 0);
        z.op = Op::WriteZeroes.code();
        z.comm = [0; 16];
        z.comm[..12].copy_from_slice(b"ext4lazyinit");
        c.io_record(&z, &mut ne);
        assert_eq!(ne.path.take().unwrap().kind, PathKind::Metadata);
        assert_eq!(c.attributed, [0, 1, 0]);
        // Another thread's write-zeroes of no file stays unknown.
        z.comm[..12].copy_from_slice(b"fio\0\0\0\0\0\0\0\0\0");
        c.io_record(&z, &mut ne);
        assert_eq!(ne.path.take().unwrap().kind, PathKind::Unknown);
    }

    #[test]
    fn bio_based_devices_have_no_queue_time() {
        let mut c = Converter::new(&[], MountTable::default());
        let mut r = io(path_kind::UNKNOWN, 0);
        r.ioflags = io_flag::BIO_BASED;
        r.issue_ns = 0;
        let e = c.io_record(&r, &mut NewEntries::default());
        assert_eq!(e.queue_ns, None);
        assert_eq!(e.device_ns(), 1000);
    }

    #[test]
    fn syscall_codes() {
        let mut r = io(path_kind::FILE, 426);
        assert_eq!(syscall(&r), Some(Syscall::IO_URING_ENTER));
        r.syscall = 999;
        assert_eq!(syscall(&r), Some(Syscall(0x8000 + 999)));
        r.syscall = abi::SC_FAULT;
        assert_eq!(syscall(&r), Some(Syscall::PAGE_FAULT));
        r.syscall = abi::SC_NONE;
        assert_eq!(syscall(&r), None);
        r.ioflags |= io_flag::KTHREAD;
        r.op = 1;
        assert_eq!(syscall(&r), Some(Syscall::WRITEBACK));
    }
}
