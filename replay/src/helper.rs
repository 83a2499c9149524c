//! A second pair of hands for a scheduler thread on a device that completes I/O inside the
//! system call (RAM-backed, the fastest flash): there one thread issues only as fast as the
//! device answers it, while the recording, made by several threads on several CPUs, issued
//! faster than that in its bursts.
//!
//! The scheduler offers I/Os in [`MAILBOXES`] one-entry mailboxes (so that the helper finds
//! the next one ready when it finishes one), only when another is due at once and the helper
//! is awake; the helper spins while it has had work within [`HOT_FOR`] and parks otherwise
//! (the scheduler wakes it when it falls behind), takes the offers oldest first, does each
//! synchronously and posts its result with the moments it called and returned (the replay's
//! submit time is the helper's call, not the offer). An offer not taken within
//! [`TAKE_BACK_AFTER`] is taken back by the scheduler (the helper was descheduled), so a
//! preempted helper delays nothing it has not started.

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::{run_sync, Buffers, Request};
use crate::error::ReplayError;
use crate::plan::IoKind;

/// The helper stays awake this long after its last I/O before it parks.
pub const HOT_FOR: Duration = Duration::from_millis(1);

/// The helper spins (without yielding its CPU) this long after its last I/O: the offers of
/// a burst come microseconds apart.
pub const SPIN_FOR: Duration = Duration::from_micros(50);

/// An offer the helper has not taken within this is taken back.
pub const TAKE_BACK_AFTER: Duration = Duration::from_micros(10);

/// Mailboxes per helper.
pub const MAILBOXES: usize = 2;

/// The longest park: the stop flag is looked at this often.
const PARK_FOR: Duration = Duration::from_millis(100);

const EMPTY: u32 = 0;
const OFFERED: u32 = 1;
const TAKEN: u32 = 2;
const DONE: u32 = 3;

/// A one-entry mailbox. `state` moves EMPTY → OFFERED (scheduler) → TAKEN → DONE (helper)
/// → EMPTY (scheduler), or OFFERED → EMPTY when the scheduler takes an offer back; the
/// request and result fields are written before the state that publishes them (Release) and
/// read after it (Acquire).
struct Mailbox {
    state: AtomicU32,
    /// Offer number: the helper takes the oldest offer first.
    seq: AtomicU64,
    offset_bytes: AtomicU64,
    /// `len_bytes | target << 32 | kind << 48 | fua << 56`.
    rest: AtomicU64,
    result: AtomicI32,
    call_ns: AtomicU64,
    return_ns: AtomicU64,
}

/// What the scheduler and its helper share.
struct Shared {
    boxes: [Mailbox; MAILBOXES],
    /// The helper is parked or about to park (the scheduler unparks it).
    sleeping: AtomicBool,
    stop: AtomicBool,
}

/// A finished I/O: its result and when the helper called and returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelperDone {
    /// Bytes transferred (≥ 0) or a negative errno.
    pub result: i32,
    /// When the helper called.
    pub call: Instant,
    /// When the call returned.
    pub returned: Instant,
}

/// What the mailbox holds for the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelperPoll {
    /// Nothing offered.
    Empty,
    /// Offered, not yet taken.
    Offered,
    /// The helper is doing it.
    Taken,
    /// Done (the mailbox is empty again).
    Done(HelperDone),
}

/// The helper thread and its mailboxes; dropping it stops and joins the thread.
pub struct Helper {
    sh: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Offers made so far (only the scheduler offers).
    offers: AtomicU64,
    epoch: Instant,
}

impl Helper {
    /// Starts a helper over `files` (its own handles) with its own buffer of `slot_bytes`.
    pub fn spawn(
        files: Vec<File>,
        is_block: Vec<bool>,
        slot_bytes: usize,
    ) -> Result<Helper, ReplayError> {
        // The mailboxes carry times as ns since this.
        let epoch = Instant::now();
        let mailbox = || Mailbox {
            state: AtomicU32::new(EMPTY),
            seq: AtomicU64::new(0),
            offset_bytes: AtomicU64::new(0),
            rest: AtomicU64::new(0),
            result: AtomicI32::new(0),
            call_ns: AtomicU64::new(0),
            return_ns: AtomicU64::new(0),
        };
        let sh = Arc::new(Shared {
            boxes: std::array::from_fn(|_| mailbox()),
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let m = Arc::clone(&sh);
        let thread = std::thread::Builder::new()
            .name("iodump-helper".into())
            .spawn(move || helper_loop(&m, &files, &is_block, slot_bytes, epoch))
            .map_err(|source| ReplayError::Engine {
                what: "spawning the helper thread",
                source,
            })?;
        Ok(Helper {
            sh,
            epoch,
            thread: Some(thread),
            offers: AtomicU64::new(0),
        })
    }

    /// True when the helper is spinning (an offer will be taken at once).
    pub fn awake(&self) -> bool {
        !self.sh.sleeping.load(Ordering::SeqCst)
    }

    /// Wakes a parked helper.
    pub fn wake(&self) {
        if self.sh.sleeping.load(Ordering::SeqCst) {
            self.unpark();
        }
    }

    /// Offers `r` in mailbox `i` (its slot is ignored: the helper has its own buffer); false
    /// when that mailbox is not empty.
    pub fn offer(&self, i: usize, r: &Request) -> bool {
        let mb = &self.sh.boxes[i];
        if mb.state.load(Ordering::Acquire) != EMPTY {
            return false;
        }
        let seq = self.offers.fetch_add(1, Ordering::Relaxed) + 1;
        mb.seq.store(seq, Ordering::Relaxed);
        let rest = u64::from(r.len_bytes)
            | u64::from(r.target) << 32
            | (r.kind as u64) << 48
            | u64::from(r.fua) << 56;
        mb.offset_bytes.store(r.offset_bytes, Ordering::Relaxed);
        mb.rest.store(rest, Ordering::Relaxed);
        // SeqCst: ordered before the load of `sleeping` below (the helper stores `sleeping`
        // then loads every `state`), so either it sees the offer or we see it sleeping.
        mb.state.store(OFFERED, Ordering::SeqCst);
        if self.sh.sleeping.load(Ordering::SeqCst) {
            self.unpark();
        }
        true
    }

    /// Where mailbox `i`'s offer is; a finished one is taken out of the mailbox.
    pub fn poll(&self, i: usize) -> HelperPoll {
        let mb = &self.sh.boxes[i];
        match mb.state.load(Ordering::Acquire) {
            DONE => {
                let d = HelperDone {
                    result: mb.result.load(Ordering::Relaxed),
                    call: self.epoch + Duration::from_nanos(mb.call_ns.load(Ordering::Relaxed)),
                    returned: self.epoch
                        + Duration::from_nanos(mb.return_ns.load(Ordering::Relaxed)),
                };
                mb.state.store(EMPTY, Ordering::Release);
                HelperPoll::Done(d)
            }
            EMPTY => HelperPoll::Empty,
            OFFERED => HelperPoll::Offered,
            _ => HelperPoll::Taken,
        }
    }

    /// Takes mailbox `i`'s offer back if the helper has not taken it; true when it was taken
    /// back.
    pub fn take_back(&self, i: usize) -> bool {
        self.sh.boxes[i]
            .state
            .compare_exchange(OFFERED, EMPTY, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    fn unpark(&self) {
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.sh.stop.store(true, Ordering::SeqCst);
        self.unpark();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The request a mailbox holds.
fn decode(mb: &Mailbox) -> Request {
    let rest = mb.rest.load(Ordering::Relaxed);
    Request {
        slot: 0,
        kind: IoKind::ALL[((rest >> 48) & 0xff) as usize % IoKind::ALL.len()],
        target: (rest >> 32) as u16,
        offset_bytes: mb.offset_bytes.load(Ordering::Relaxed),
        len_bytes: rest as u32,
        fua: (rest >> 56) & 1 == 1,
    }
}

/// The oldest offer's mailbox, if any.
fn oldest_offer(sh: &Shared) -> Option<&Mailbox> {
    let look = || {
        sh.boxes
            .iter()
            .filter(|mb| mb.state.load(Ordering::Acquire) == OFFERED)
            .min_by_key(|mb| mb.seq.load(Ordering::Relaxed))
    };
    // One look reads the mailboxes one after the other, so it can miss an older offer made
    // while it read (the first mailbox read before its offer, the second after hers). The
    // scheduler makes its offers in order, so once one offer is seen every older one is
    // visible (each state is published with a release store, read with an acquire load): a
    // second look finds the oldest.
    look()?;
    look()
}

fn helper_loop(sh: &Shared, files: &[File], is_block: &[bool], slot_bytes: usize, epoch: Instant) {
    let buf = Buffers::new(1, slot_bytes);
    let ns = |t: Instant| t.saturating_duration_since(epoch).as_nanos() as u64;
    // Parked until the scheduler first falls behind: a spinning helper would slow the
    // engine's first I/Os, by which the scheduler judges the device.
    let mut last_work = Instant::now()
        .checked_sub(HOT_FOR)
        .unwrap_or_else(Instant::now);
    while !sh.stop.load(Ordering::Relaxed) {
        if let Some(mb) = oldest_offer(sh) {
            if mb
                .state
                .compare_exchange(OFFERED, TAKEN, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let r = decode(mb);
                let t0 = Instant::now();
                let result = run_sync(files, is_block, &r, buf.slot_ptr(0));
                let t1 = Instant::now();
                mb.result.store(result, Ordering::Relaxed);
                mb.call_ns.store(ns(t0), Ordering::Relaxed);
                mb.return_ns.store(ns(t1), Ordering::Relaxed);
                mb.state.store(DONE, Ordering::Release);
                last_work = t1;
            }
            continue;
        }
        let idle = last_work.elapsed();
        if idle < SPIN_FOR {
            std::hint::spin_loop();
            continue;
        }
        if idle < HOT_FOR {
            // Yield rather than spin: should the kernel have put us on the scheduler's CPU,
            // the scheduler runs at once instead of after our time slice.
            std::thread::yield_now();
            continue;
        }
        sh.sleeping.store(true, Ordering::SeqCst);
        let offered = sh
            .boxes
            .iter()
            .any(|mb| mb.state.load(Ordering::SeqCst) == OFFERED);
        if !offered && !sh.stop.load(Ordering::SeqCst) {
            std::thread::park_timeout(PARK_FOR);
        }
        sh.sleeping.store(false, Ordering::SeqCst);
        last_work = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_does_offered_io_and_offers_can_be_taken_back() {
        let f = File::open("/dev/zero").unwrap();
        let h = Helper::spawn(vec![f], vec![false], 4096).unwrap();
        let r = Request {
            slot: 7,
            kind: IoKind::Read,
            target: 0,
            offset_bytes: 0,
            len_bytes: 512,
            fua: false,
        };
        let done = |i| loop {
            match h.poll(i) {
                HelperPoll::Done(d) => break d,
                _ => std::hint::spin_loop(),
            }
        };
        for _ in 0..100 {
            assert!(h.offer(0, &r));
            assert!(!h.offer(0, &r), "one offer per mailbox");
            assert!(h.offer(1, &r));
            let (a, b) = (done(0), done(1));
            assert_eq!((a.result, b.result), (512, 512));
            assert!(a.call <= a.returned);
            assert!(a.returned <= b.call, "the older offer first");
        }
        // An offer is either taken back or done, never both.
        let mut back = 0;
        for _ in 0..100 {
            assert!(h.offer(0, &r));
            if h.take_back(0) {
                back += 1;
                assert_eq!(h.poll(0), HelperPoll::Empty, "empty after a take-back");
                continue;
            }
            done(0);
        }
        assert_eq!(h.poll(0), HelperPoll::Empty);
        assert!(
            h.offer(0, &r),
            "the mailbox is empty again: {back} taken back"
        );
    }
}
