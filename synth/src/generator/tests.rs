//! Tests that look inside the generator: every delivered call is consistent with the tables
//! and the catalogue's extents, and the path and thread tables are realistic.

use std::collections::{HashMap, HashSet};

use iodump_format::*;

use super::Generator;
use crate::catalogue::CatalogueFile;
use crate::tests::{events, params, record, Call};
use crate::{Workload, MONO_BASE_NS};

/// What a trace delivered so far, and the checks each new call must pass against it.
#[derive(Default)]
struct Checker {
    devs: HashMap<DevT, Device>,
    tids: HashMap<u32, Process>,
    pids: HashSet<u32>,
    paths: HashMap<u32, PathEntry>,
    last_ts: u64,
    losses: u32,
}

impl Checker {
    fn call(&mut self, c: &Call, files: &[CatalogueFile]) {
        match c {
            Call::Device(d) => {
                if let Some(p) = d.partition_of {
                    assert!(self.devs.contains_key(&p), "disk before partition");
                }
                assert!(self.devs.insert(d.dev, d.clone()).is_none());
            }
            Call::Process(p) => {
                assert!(
                    self.tids.insert(p.tid, p.clone()).is_none(),
                    "tid {} twice",
                    p.tid
                );
                assert!(!p.comm.is_empty() && p.comm.len() <= 15);
                assert!(p.cgroup_id != 0);
                self.pids.insert(p.pid);
            }
            Call::Path(p) => {
                assert!(p.path_id >= 1);
                assert!(self.devs.contains_key(&p.dev));
                assert!(self.paths.insert(p.path_id, p.clone()).is_none());
            }
            Call::Loss(l) => {
                assert!(l.start_ns >= self.last_ts && l.end_ns >= l.start_ns);
                assert!(l.count > 0 && l.cpu < 4);
                assert_eq!(l.reason, LossReason::RingBufferFull);
                self.last_ts = l.end_ns;
                self.losses += 1;
            }
            Call::Event(e) => self.event(e, files),
        }
    }

    fn event(&mut self, e: &Event, files: &[CatalogueFile]) {
        assert!(e.timestamp_ns >= self.last_ts, "out of order");
        self.last_ts = e.timestamp_ns;
        let d = &self.devs[&e.dev];
        let t = &self.tids[&e.tid];
        assert_eq!((t.pid, t.cgroup_id), (e.pid, e.cgroup_id));
        if let Some(dp) = e.dirtier_pid {
            assert!(self.pids.contains(&dp), "dirtier {dp} not delivered");
            assert_eq!(e.syscall, Some(Syscall::WRITEBACK));
        }
        let p = &self.paths[&e.path_id];
        assert_eq!(p.dev, e.dev, "path and event on different devices");
        // Inside the path's extent.
        let fi = files[e.path_id as usize - 1];
        assert!(e.sector >= fi.start_sector);
        let end_sector = e.sector + (e.bytes as u64).div_ceil(512);
        assert!(end_sector <= fi.start_sector + fi.len_sectors);
        // Sector-size aligned.
        let ss = d.sector_size as u64 / 512;
        assert_eq!(e.sector % ss, 0);
        assert_eq!(e.bytes as u64 % d.sector_size as u64, 0);
        assert_eq!(e.bytes == 0, e.op == Op::Flush);
        // Queueing exists exactly on request-based devices.
        assert_eq!(e.queue_ns.is_none(), d.bio_based);
        assert!(e.queue_ns.unwrap_or(0) <= e.latency_ns);
        assert!(e.latency_ns > 0);
        assert!(e.cpu < 4);
        assert!(e.error == 0 || e.error == 5);
        assert!(e.timestamp_ns > MONO_BASE_NS);
    }
}

/// Ordering, references, extents, alignment, queue/latency relations, for every workload.
#[test]
fn traces_are_well_formed() {
    for w in Workload::ALL {
        let (calls, sum) = record(w, 200_000, 11);
        let g = Generator::new(&params(w, 0, 11));
        let mut check = Checker::default();
        for c in &calls {
            check.call(c, &g.files);
        }
        let (paths, losses) = (&check.paths, check.losses);
        assert_eq!(sum.paths as usize, paths.len());
        if w.has_losses() {
            assert!(losses >= 1 && sum.lost_events > 0, "{}: no loss", w.name());
        } else {
            assert_eq!((losses, sum.lost_events), (0, 0), "{}: losses", w.name());
        }
        if w != Workload::SeqWrite {
            assert!(
                paths.len() >= 2000,
                "{}: only {} paths",
                w.name(),
                paths.len()
            );
        } else {
            assert!(paths.len() >= 300, "seqwrite: only {} paths", paths.len());
        }
        let bio = events(&calls).filter(|e| e.queue_ns.is_none()).count();
        assert!(bio > 0, "{}: no zram I/O", w.name());
    }
}

#[test]
fn path_table_is_realistic() {
    let g = Generator::new(&params(Workload::Mixed, 0, 5));
    let ps = &g.paths;
    assert!(ps.len() >= 5000, "{} paths", ps.len());
    for (i, p) in ps.iter().enumerate() {
        assert_eq!(p.path_id as usize, i + 1);
    }
    let has = |f: &dyn Fn(&PathEntry) -> bool| ps.iter().any(f);
    assert!(has(&|p| p.path == b"[metadata]"
        && p.kind == PathKind::Metadata
        && p.inode == 0));
    assert!(has(
        &|p| p.path == b"[journal]" && p.kind == PathKind::Journal
    ));
    assert!(has(&|p| p.path == b"[swap]" && p.kind == PathKind::Swap));
    assert!(has(
        &|p| p.path == b"[unknown]" && p.kind == PathKind::Unknown
    ));
    assert!(has(
        &|p| p.path == b"/dev/sda" && p.kind == PathKind::RawDevice
    ));
    assert!(has(&|p| std::str::from_utf8(&p.path).is_err()));
    assert!(has(&|p| p.path.contains(&b' ')));
    assert!(has(&|p| p.path.contains(&b',')));
    assert!(has(&|p| p.truncated && p.path.starts_with("…/".as_bytes())));
    assert!(ps.iter().filter(|p| p.deleted).count() >= 3);
    for needle in [
        "/var/lib/mysql/shop/orders.ibd",
        "/var/lib/postgresql/15/main/base/16384/2619",
        "/usr/lib/x86_64-linux-gnu/libssl.so.3",
        "/var/log/syslog",
        "/data/fio/randread.0.0",
        "/srv/backup/home-2026-01-15.tar.zst",
    ] {
        assert!(has(&|p| p.path == needle.as_bytes()), "{needle} missing");
    }
    for p in ps.iter().filter(|p| p.kind == PathKind::File) {
        assert!(p.path.starts_with(b"/") || p.truncated);
        assert!(p.inode != 0);
    }
    let inodes: HashSet<(DevT, u64)> = ps
        .iter()
        .filter(|p| p.kind == PathKind::File)
        .map(|p| (p.dev, p.inode))
        .collect();
    assert_eq!(
        inodes.len(),
        ps.iter().filter(|p| p.kind == PathKind::File).count()
    );
    // Thread table: unique tids, shared pids for threaded processes.
    let tids: HashSet<u32> = g.threads.iter().map(|t| t.tid).collect();
    assert_eq!(tids.len(), g.threads.len());
    let mysqld = g.threads.iter().filter(|t| t.pid == 1423).count();
    assert!(mysqld >= 20);
}
