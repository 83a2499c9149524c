//! The generator: picks an activity per event (or a follow-up an earlier one left), times it,
//! and delivers the event with the table entries it is the first to reference.
//!
//! Every random number comes from one generator in a fixed order (the catalogue has its own),
//! so the event sequence depends on the workload and seed only.

mod activity;
mod draft;
mod journal;
mod mix;
mod pool;
mod streams;
mod system_io;
mod timing;

#[cfg(test)]
mod tests;

use iodump_format::{Device, PathEntry, Process};

use crate::catalogue::{self, CatalogueFile, NotableFiles};
use crate::host::devices::{devices, DEV_SECTORS, D_BACKUP, D_ROOT, D_VDA};
use crate::host::threads::{threads, Actors, ThreadGroup, ThreadIndex};
use crate::rng::Rng;
use crate::{SynthParams, SynthSink, SynthSummary, MONO_BASE_NS};
use activity::Activity;
use journal::{FollowUps, Journal};
use mix::Roles;
use pool::ZipfPool;
use streams::Stream;
use timing::Phase;

/// The popularity pools files are drawn from.
struct Pools {
    mysql: ZipfPool,
    pg: ZipfPool,
    system: ZipfPool,
    mapped: ZipfPool,
}

/// The host, its catalogue, and the state of the generation: streams, journals, pending
/// follow-ups, clock, what was delivered.
pub(crate) struct Generator {
    rng: Rng,
    devices: Vec<Device>,
    threads: Vec<Process>,
    thread_sent: Vec<bool>,
    files: Vec<CatalogueFile>,
    paths: Vec<PathEntry>,
    path_sent: Vec<bool>,
    actors: Actors,
    notable: NotableFiles,
    deleted_root: Vec<u32>,
    mysql_sys: Vec<u32>,
    pools: Pools,
    streams: Vec<Stream>,
    /// In [`JournalId`](journal::JournalId) order.
    journals: [Journal; 3],
    follow_ups: FollowUps,
    /// Activities, each repeated as many times as its weight (per mille).
    activities: Vec<Activity>,
    roles: Roles,
    /// Where fstrim discards next on `/`.
    trim_sector: u64,
    // Time.
    clock_ns: u64,
    mean_gap_ns: f64,
    phase: Phase,
    phase_events_left: u64,
    /// Index of the event the next loss record comes before.
    next_loss_event: u64,
    error_probability: f64,
}

impl Generator {
    /// Sets up the host, the catalogue and the workload's activities and roles for `params`
    /// (the event count is not used).
    pub(crate) fn new(params: &SynthParams) -> Generator {
        let devices = devices();
        let (threads, actors) = threads();
        let catalogue = catalogue::build(params.seed, &actors, &devices);
        let w = params.workload;
        let mut rng = Rng::new(
            params.seed.wrapping_mul(0x2545_F491_4F6C_DD1D)
                ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9),
        );
        let lists = &catalogue.lists;
        let pools = Pools {
            mysql: ZipfPool::new(lists.mysql_tables.clone(), &mut rng),
            pg: ZipfPool::new(lists.pg_rels.clone(), &mut rng),
            system: ZipfPool::new(lists.system.clone(), &mut rng),
            mapped: ZipfPool::new(lists.mapped.clone(), &mut rng),
        };
        let streams = streams::streams(&catalogue, &actors, &mut rng);
        let journals = journals(&catalogue, &actors, &mut rng);
        let next_loss_event = if w.has_losses() {
            rng.range(50_000, 150_000)
        } else {
            u64::MAX
        };
        let trim_sector = rng.below(DEV_SECTORS[D_ROOT] / 8) * 8;
        let clock_ns = MONO_BASE_NS + 1_500_000 + rng.below(1_000_000);
        Generator {
            rng,
            thread_sent: vec![false; threads.len()],
            threads,
            path_sent: vec![false; catalogue.files.len()],
            files: catalogue.files,
            paths: catalogue.paths,
            roles: Roles::new(w, &actors),
            actors,
            notable: catalogue.notable,
            deleted_root: catalogue.lists.deleted_root,
            mysql_sys: catalogue.lists.mysql_sys,
            pools,
            streams,
            journals,
            follow_ups: FollowUps::new(),
            activities: mix::activities(w),
            trim_sector,
            devices,
            clock_ns,
            mean_gap_ns: 1e9 / w.iops(),
            phase: Phase::Normal,
            phase_events_left: 0,
            next_loss_event,
            error_probability: w.io_error_probability(),
        }
    }

    /// Delivers the devices, then `n` events with the table entries and loss records before
    /// them.
    pub(crate) fn run<S: SynthSink>(
        &mut self,
        n: u64,
        sink: &mut S,
    ) -> Result<SynthSummary, S::Error> {
        let mut sum = SynthSummary::default();
        for d in &self.devices {
            sink.device(d)?;
            sum.devices += 1;
        }
        for i in 0..n {
            if i == self.next_loss_event {
                let l = self.loss();
                sink.loss(&l)?;
                sum.lost_events += l.count;
            }
            let d = match self.follow_ups.pop() {
                Some(f) => self.follow_up(f),
                None => self.activity(),
            };
            let ts = self.next_ts();
            let ev = self.timed_event(&d, ts);
            self.send_thread(d.thread, sink, &mut sum)?;
            if let Some(t) = d.dirtier {
                self.send_thread(t, sink, &mut sum)?;
            }
            let f = d.file as usize;
            if !self.path_sent[f] {
                self.path_sent[f] = true;
                sink.path(&self.paths[f])?;
                sum.paths += 1;
            }
            sink.event(&ev)?;
            if i == 0 {
                sum.first_timestamp_ns = ts;
            }
            sum.last_timestamp_ns = ts;
        }
        sum.events = n;
        Ok(sum)
    }

    /// Delivers thread `t` unless it already was.
    #[inline]
    fn send_thread<S: SynthSink>(
        &mut self,
        t: ThreadIndex,
        sink: &mut S,
        sum: &mut SynthSummary,
    ) -> Result<(), S::Error> {
        let t = t as usize;
        if !self.thread_sent[t] {
            self.thread_sent[t] = true;
            sink.process(&self.threads[t])?;
            sum.processes += 1;
        }
        Ok(())
    }

    /// A random thread of group `g`.
    #[inline]
    fn pick(&mut self, g: ThreadGroup) -> ThreadIndex {
        g.first + self.rng.below(g.n as u64) as ThreadIndex
    }

    /// A random place `(sector, bytes)` for `pages` pages in `file`, aligned to `align` pages
    /// (shrunk to fit).
    #[inline]
    fn place(&mut self, file: u32, pages: u32, align: u32) -> (u64, u32) {
        let fi = &self.files[file as usize];
        let fpages = fi.len_sectors / 8;
        let p = (pages as u64).min(fpages);
        let slots = (fpages - p) / align as u64 + 1;
        let off = self.rng.below(slots) * align as u64;
        (fi.start_sector + off * 8, (p * 4096) as u32)
    }
}

/// The journals of `/` (jbd2), `/srv/backup` (xfs) and `/srv/app` (jbd2), each starting at a
/// random place of its extent.
fn journals(c: &catalogue::Catalogue, a: &Actors, rng: &mut Rng) -> [Journal; 3] {
    let journal = |file: u32, thread: ThreadIndex, xfs: bool, rng: &mut Rng| Journal {
        file,
        pos_sectors: rng.below(c.files[file as usize].len_sectors / 8) * 8,
        until_commit: 2,
        thread,
        xfs,
    };
    let j = &c.notable.journal;
    [
        journal(j[D_ROOT], a.jbd2_root, false, rng),
        journal(j[D_BACKUP], a.xfs_log_worker, true, rng),
        journal(j[D_VDA], a.jbd2_vda, false, rng),
    ]
}
