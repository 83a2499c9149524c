//! I/O engines: io_uring (default) and a thread pool of synchronous calls (fallback).
//!
//! Both take [`Request`]s tagged with a slot (one aligned buffer per slot) and hand back
//! [`Completion`]s with the same slot; the scheduler in [`crate::run`] never blocks in them
//! longer than the timeout it passes.

use std::alloc::Layout;
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use io_uring::{opcode, types, IoUring};

use crate::error::ReplayError;
use crate::plan::IoKind;

/// Which engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EngineKind {
    /// One io_uring, submissions and completions from the scheduler thread.
    #[default]
    IoUring,
    /// A pool of threads doing pread/pwrite/fsync/fallocate/ioctl.
    Psync,
}

/// One operation for an engine.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// Buffer slot; echoed in the completion.
    pub slot: u32,
    /// What to do.
    pub kind: IoKind,
    /// Target index.
    pub target: u16,
    /// Byte offset.
    pub offset_bytes: u64,
    /// Length in bytes.
    pub len_bytes: u32,
    /// Write with `RWF_DSYNC` (the recorded write had FUA).
    pub fua: bool,
}

/// A finished operation.
#[derive(Clone, Copy, Debug)]
pub struct Completion {
    /// The request's slot.
    pub slot: u32,
    /// Bytes transferred (≥ 0) or a negative errno.
    pub result: i32,
}

/// What the scheduler needs from an engine.
pub trait Engine: Send {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Queues a request (sent to the kernel at the next [`Engine::submit`]).
    fn push(&mut self, r: Request) -> Result<(), ReplayError>;
    /// Sends queued requests.
    fn submit(&mut self) -> Result<(), ReplayError>;
    /// Does one request synchronously in the calling thread (the scheduler uses this when
    /// nothing is in flight on a fast device); returns bytes or a negative errno.
    fn run_inline(&mut self, r: &Request) -> i32;
    /// Appends finished operations to `out`; with `Some(t)` waits up to `t` for at least one
    /// when none is ready.
    fn reap(
        &mut self,
        out: &mut Vec<Completion>,
        wait: Option<Duration>,
    ) -> Result<(), ReplayError>;
}

fn engine_err(what: &'static str) -> impl FnOnce(std::io::Error) -> ReplayError {
    move |source| ReplayError::Engine { what, source }
}

/// Aligned I/O buffers, one per slot, filled with a fixed non-zero pattern (what writes write).
pub struct Buffers {
    ptr: *mut u8,
    layout: Layout,
    slot_bytes: usize,
    slots: usize,
}

// SAFETY: the allocation is owned by `Buffers`; slots are handed to at most one in-flight
// request at a time by the scheduler, so no two threads touch the same bytes concurrently.
unsafe impl Send for Buffers {}
// SAFETY: see `Send`; shared references only hand out raw pointers to disjoint slots.
unsafe impl Sync for Buffers {}

impl Buffers {
    /// Allocates `slots` buffers of `slot_bytes` (rounded up to 4 KiB), 4 KiB aligned.
    pub fn new(slots: usize, slot_bytes: usize) -> Buffers {
        let slot_bytes = slot_bytes.max(4096).div_ceil(4096) * 4096;
        let total = slot_bytes * slots.max(1);
        let layout = Layout::from_size_align(total, 4096).unwrap_or(Layout::new::<u8>());
        // SAFETY: `layout` has a non-zero size (≥ 4096).
        let ptr = unsafe { std::alloc::alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: `ptr` points to `total` writable bytes just allocated.
        let all = unsafe { std::slice::from_raw_parts_mut(ptr, total) };
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for chunk in all.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        Buffers {
            ptr,
            layout,
            slot_bytes,
            slots: slots.max(1),
        }
    }

    /// The buffer of `slot`.
    pub fn slot_ptr(&self, slot: u32) -> *mut u8 {
        let s = (slot as usize).min(self.slots - 1);
        // SAFETY: `s < slots`, so the offset stays inside the allocation.
        unsafe { self.ptr.add(s * self.slot_bytes) }
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    fn iovec(&self) -> libc::iovec {
        libc::iovec {
            iov_base: self.ptr.cast(),
            iov_len: self.slot_bytes * self.slots,
        }
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// `BLOCK_URING_CMD_DISCARD` (`_IO(0x12, 0)`, Linux 6.12): discard `addr`..`addr + addr3`.
const BLOCK_URING_CMD_DISCARD: u32 = 0x1200;

/// The io_uring engine.
pub struct UringEngine {
    ring: IoUring,
    bufs: Buffers,
    files: Vec<File>,
    is_block: Vec<bool>,
    fixed: bool,
    in_flight: usize,
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // Buffers must outlive every request the kernel still holds: wait for them.
        let mut spare = Vec::new();
        while self.in_flight > 0 {
            let before = spare.len();
            if self
                .reap(&mut spare, Some(Duration::from_millis(100)))
                .is_err()
            {
                break;
            }
            if spare.len() == before && self.ring.submit_and_wait(1).is_err() {
                break;
            }
            spare.clear();
        }
    }
}

impl UringEngine {
    /// A ring for `slots` in-flight operations over `files`.
    pub fn new(
        files: Vec<File>,
        is_block: Vec<bool>,
        slots: usize,
        slot_bytes: usize,
    ) -> Result<UringEngine, ReplayError> {
        let entries = (slots.max(8) as u32).next_power_of_two().min(4096);
        let ring = IoUring::builder()
            .setup_cqsize(entries * 2)
            .setup_coop_taskrun()
            .build(entries)
            .or_else(|_| IoUring::new(entries))
            .map_err(engine_err("io_uring_setup"))?;
        let bufs = Buffers::new(slots, slot_bytes);
        // SAFETY: the registered region is owned by `bufs`, which lives in the engine next
        // to the ring and is dropped after it (field order), so the kernel never sees a freed
        // buffer.
        let fixed = unsafe { ring.submitter().register_buffers(&[bufs.iovec()]) }.is_ok();
        Ok(UringEngine {
            ring,
            bufs,
            files,
            is_block,
            fixed,
            in_flight: 0,
        })
    }

    /// Moves what the completion queue holds into `out`.
    fn drain_completions(&mut self, out: &mut Vec<Completion>) {
        out.extend(self.ring.completion().map(|c| Completion {
            slot: c.user_data() as u32,
            result: c.result(),
        }));
    }
}

impl Engine for UringEngine {
    fn name(&self) -> &'static str {
        "io_uring"
    }

    fn run_inline(&mut self, r: &Request) -> i32 {
        // The slot is free (the scheduler passes a slot no request holds), so the kernel is
        // not using its buffer.
        run_sync(&self.files, &self.is_block, r, self.bufs.slot_ptr(r.slot))
    }

    fn push(&mut self, r: Request) -> Result<(), ReplayError> {
        let t = r.target as usize;
        let fd = types::Fd(self.files[t].as_raw_fd());
        let buf = self.bufs.slot_ptr(r.slot);
        let entry = match r.kind {
            IoKind::Read if self.fixed => opcode::ReadFixed::new(fd, buf, r.len_bytes, 0)
                .offset(r.offset_bytes)
                .build(),
            IoKind::Read => opcode::Read::new(fd, buf, r.len_bytes)
                .offset(r.offset_bytes)
                .build(),
            IoKind::Write => {
                let flags = if r.fua { libc::RWF_DSYNC } else { 0 };
                if self.fixed {
                    opcode::WriteFixed::new(fd, buf, r.len_bytes, 0)
                        .offset(r.offset_bytes)
                        .rw_flags(flags)
                        .build()
                } else {
                    opcode::Write::new(fd, buf, r.len_bytes)
                        .offset(r.offset_bytes)
                        .rw_flags(flags)
                        .build()
                }
            }
            IoKind::Flush => opcode::Fsync::new(fd).build(),
            IoKind::Discard if self.is_block[t] => {
                let mut cmd = [0u8; 16];
                cmd[..8].copy_from_slice(&u64::from(r.len_bytes).to_ne_bytes());
                opcode::UringCmd16::new(fd, BLOCK_URING_CMD_DISCARD)
                    .addr(Some(r.offset_bytes))
                    .cmd(cmd)
                    .build()
            }
            IoKind::Discard => opcode::Fallocate::new(fd, u64::from(r.len_bytes))
                .offset(r.offset_bytes)
                .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
                .build(),
            IoKind::WriteZeroes => opcode::Fallocate::new(fd, u64::from(r.len_bytes))
                .offset(r.offset_bytes)
                .mode(libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE)
                .build(),
        }
        .user_data(u64::from(r.slot));
        loop {
            // SAFETY: the buffer behind `buf` belongs to slot `r.slot`, which the scheduler
            // gives to no other request until this one's completion is reaped; it lives as
            // long as the engine.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                self.in_flight += 1;
                return Ok(());
            }
            self.ring.submit().map_err(engine_err("io_uring_enter"))?;
        }
    }

    fn submit(&mut self) -> Result<(), ReplayError> {
        loop {
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
                Err(e) => return Err(engine_err("io_uring_enter")(e)),
            }
        }
    }

    fn reap(
        &mut self,
        out: &mut Vec<Completion>,
        wait: Option<Duration>,
    ) -> Result<(), ReplayError> {
        let before = out.len();
        self.drain_completions(out);
        if out.len() == before {
            match wait {
                Some(t) if !t.is_zero() => {
                    let ts = types::Timespec::from(t);
                    let args = types::SubmitArgs::new().timespec(&ts);
                    match self.ring.submitter().submit_with_args(1, &args) {
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                            ) => {}
                        Err(e) => return Err(engine_err("io_uring_enter (wait)")(e)),
                    }
                }
                _ => {
                    // Give the kernel a chance to run completion task work.
                    self.submit()?;
                }
            }
            self.drain_completions(out);
        }
        self.in_flight = self.in_flight.saturating_sub(out.len() - before);
        Ok(())
    }
}

struct Queue {
    jobs: Mutex<VecDeque<Request>>,
    cv: Condvar,
    stop: AtomicBool,
}

/// The thread-pool engine.
pub struct PsyncEngine {
    files: Arc<Vec<File>>,
    is_block: Arc<Vec<bool>>,
    inline_buf: Buffers,
    queue: Arc<Queue>,
    pending: Vec<Request>,
    rx: mpsc::Receiver<Completion>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl PsyncEngine {
    /// `threads` workers over `files`, each with its own buffer of `slot_bytes`.
    pub fn new(
        files: Vec<File>,
        is_block: Vec<bool>,
        threads: usize,
        slot_bytes: usize,
    ) -> Result<PsyncEngine, ReplayError> {
        let queue = Arc::new(Queue {
            jobs: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let files = Arc::new(files);
        let is_block = Arc::new(is_block);
        let (tx, rx) = mpsc::channel();
        let mut workers = Vec::new();
        for i in 0..threads.max(1) {
            let q = queue.clone();
            let tx = tx.clone();
            let files = Arc::clone(&files);
            let is_block = Arc::clone(&is_block);
            let h = std::thread::Builder::new()
                .name(format!("iodump-psync-{i}"))
                .spawn(move || worker(&q, &tx, &files, &is_block, slot_bytes))
                .map_err(engine_err("spawning a worker thread"))?;
            workers.push(h);
        }
        Ok(PsyncEngine {
            files,
            is_block,
            inline_buf: Buffers::new(1, slot_bytes),
            queue,
            pending: Vec::new(),
            rx,
            workers,
        })
    }
}

fn worker(
    q: &Queue,
    tx: &mpsc::Sender<Completion>,
    files: &[File],
    is_block: &[bool],
    slot_bytes: usize,
) {
    let buf = Buffers::new(1, slot_bytes);
    loop {
        let job = {
            let Ok(mut jobs) = q.jobs.lock() else { return };
            loop {
                if let Some(j) = jobs.pop_front() {
                    break j;
                }
                if q.stop.load(Ordering::Relaxed) {
                    return;
                }
                jobs = match q.cv.wait(jobs) {
                    Ok(j) => j,
                    Err(_) => return,
                };
            }
        };
        let result = run_sync(files, is_block, &job, buf.slot_ptr(0));
        if tx
            .send(Completion {
                slot: job.slot,
                result,
            })
            .is_err()
        {
            return;
        }
    }
}

/// Does one request with a synchronous call; returns bytes or a negative errno.
pub(crate) fn run_sync(files: &[File], is_block: &[bool], r: &Request, buf: *mut u8) -> i32 {
    let t = r.target as usize;
    let (fd, is_block): (RawFd, bool) = (files[t].as_raw_fd(), is_block[t]);
    let off = r.offset_bytes as libc::off_t;
    let len = r.len_bytes as usize;
    // SAFETY: `buf` points to this worker's own buffer of at least `slot_bytes` ≥ `len`
    // bytes (the scheduler never issues a request longer than a slot); `fd` is open for the
    // engine's lifetime; the ioctl argument is a 2 × u64 array on our stack.
    let r = unsafe {
        match r.kind {
            IoKind::Read => libc::pread(fd, buf.cast(), len, off) as i64,
            IoKind::Write => {
                let iov = libc::iovec {
                    iov_base: buf.cast(),
                    iov_len: len,
                };
                let flags = if r.fua { libc::RWF_DSYNC } else { 0 };
                libc::pwritev2(fd, &iov, 1, off, flags) as i64
            }
            IoKind::Flush => i64::from(libc::fsync(fd)),
            IoKind::Discard if is_block => {
                let range: [u64; 2] = [r.offset_bytes, len as u64];
                i64::from(libc::ioctl(
                    fd,
                    crate::target::BLKDISCARD as _,
                    range.as_ptr(),
                ))
            }
            IoKind::Discard => i64::from(libc::fallocate(
                fd,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len as libc::off_t,
            )),
            IoKind::WriteZeroes => i64::from(libc::fallocate(
                fd,
                libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len as libc::off_t,
            )),
        }
    };
    if r < 0 {
        -std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        r.min(i64::from(i32::MAX)) as i32
    }
}

impl Engine for PsyncEngine {
    fn name(&self) -> &'static str {
        "psync"
    }

    fn run_inline(&mut self, r: &Request) -> i32 {
        run_sync(&self.files, &self.is_block, r, self.inline_buf.slot_ptr(0))
    }

    fn push(&mut self, r: Request) -> Result<(), ReplayError> {
        self.pending.push(r);
        Ok(())
    }

    fn submit(&mut self) -> Result<(), ReplayError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let n = self.pending.len();
        if let Ok(mut jobs) = self.queue.jobs.lock() {
            jobs.extend(self.pending.drain(..));
        }
        for _ in 0..n {
            self.queue.cv.notify_one();
        }
        Ok(())
    }

    fn reap(
        &mut self,
        out: &mut Vec<Completion>,
        wait: Option<Duration>,
    ) -> Result<(), ReplayError> {
        let before = out.len();
        out.extend(self.rx.try_iter());
        if out.len() == before {
            if let Some(t) = wait {
                if let Ok(c) = self.rx.recv_timeout(t) {
                    out.push(c);
                    out.extend(self.rx.try_iter());
                }
            }
        }
        Ok(())
    }
}

impl Drop for PsyncEngine {
    fn drop(&mut self) {
        self.queue.stop.store(true, Ordering::Relaxed);
        self.queue.cv.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
