//! Loading and attaching the BPF program (`ebpf/iodump.bpf.o`, embedded at build time) with
//! aya: settings as read-only globals, filter maps, and the choice between `tp_btf` and raw
//! tracepoint programs made by trying them (feature probing), never by kernel version.

use std::collections::HashMap;

use aya::maps::{Array, CgroupArray, HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf};
use aya::programs::raw_trace_point::RawTracePointLinkId;
use aya::programs::tp_btf::BtfTracePointLinkId;
use aya::programs::{BtfTracePoint, RawTracePoint};
use aya::{Btf, Ebpf, EbpfLoader};
use iodump_format::DevT;

use crate::abi::{self, counter};
use crate::error::{shorten, Message, RecordError};
use crate::kernel::{BcacheLayout, KernelBtf, Raid5Layout};

/// The compiled BPF object, built from `ebpf/` by `ebpf/build.sh` and committed.
static OBJECT: &[u8] = aya::include_bytes_aligned!("../../ebpf/iodump.bpf.o");

/// The same source built without atomic compare-and-exchange (`IODUMP_NO_ATOMICS`), for
/// kernels that refuse it (before 5.12): no lock-free slot table, per-CPU file ids.
static OBJECT_NO_ATOMICS: &[u8] = aya::include_bytes_aligned!("../../ebpf/iodump-noatomics.bpf.o");

/// The placeholder helper number the object calls in place of the kfunc `bpf_rdonly_cast`
/// (ebpf/read.bpf.h, `IODUMP_KFUNC_RDONLY_CAST`).
const KFUNC_RDONLY_CAST_PLACEHOLDER: u32 = 0x1d0d_ca57;

/// The call instruction of the placeholder: opcode 0x85 (BPF_JMP | BPF_CALL), registers
/// byte (src << 4 | dst) 0, 16-bit offset 0, 32-bit immediate the helper number. A kfunc call
/// has src = BPF_PSEUDO_KFUNC_CALL (2) and the function's BTF id as immediate.
fn placeholder_call() -> [u8; 8] {
    let mut insn = [0x85u8, 0, 0, 0, 0, 0, 0, 0];
    insn[4..].copy_from_slice(&KFUNC_RDONLY_CAST_PLACEHOLDER.to_le_bytes());
    insn
}

/// The object with its placeholder calls of `bpf_rdonly_cast` turned into kfunc calls of
/// that function in this kernel (aya-obj 0.3 cannot resolve `__ksym` externs). Without the
/// function (kernels before 6.2) the placeholders stay: the tp_btf programs then fail to
/// load and the raw_tp ones are used. Returns the object, 8-byte aligned like `OBJECT`,
/// and how many calls were rewritten.
fn object_for(object: &[u8], rdonly_cast: Option<u32>) -> (Vec<u64>, usize) {
    let mut words = vec![0u64; object.len().div_ceil(8)];
    let mut bytes = object.to_vec();
    let mut patched = 0;
    if let Some(id) = rdonly_cast {
        // Code sections sit at 8-byte offsets of the object.
        let placeholder = placeholder_call();
        for insn in bytes.chunks_exact_mut(8) {
            if insn == placeholder {
                insn[1] = 2 << 4;
                insn[4..].copy_from_slice(&id.to_le_bytes());
                patched += 1;
            }
        }
    }
    for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        *w = u64::from_ne_bytes(b);
    }
    (words, patched)
}

/// The first `len` bytes of `object_for`'s words.
fn as_bytes(words: &[u64], len: usize) -> &[u8] {
    // SAFETY: a u64 slice is valid to read as 8 bytes per element, u8 needs no alignment,
    // and the result borrows `words`.
    let all = unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) };
    &all[..len.min(all.len())]
}

/// Settings passed to the BPF program before it is loaded.
#[derive(Clone, Debug)]
pub struct BpfSettings {
    /// Devices to record (empty: all).
    pub devices: Vec<DevT>,
    /// Process ids to record (empty: all).
    pub pids: Vec<u32>,
    /// Command names to record (empty: all).
    pub comms: Vec<Vec<u8>>,
    /// Bit `1 << op` set: record that op.
    pub op_mask: u32,
    /// Drop I/Os smaller than this.
    pub min_bytes: u32,
    /// Drop I/Os larger than this (0: no limit).
    pub max_bytes: u32,
    /// Record one I/O in N (per CPU).
    pub sample_every: u32,
    /// Send path records.
    pub paths: bool,
    /// A process whose own I/O is ignored (the recorder).
    pub exclude_tgid: u32,
    /// Ring buffer size in bytes (a power of two, at least a page). The consumer is woken
    /// when a quarter of it is waiting (see `wakeup_bytes`).
    pub ring_bytes: u32,
    /// Only I/O submitted by tasks in this cgroup (v2) directory or below it.
    pub cgroup: Option<std::path::PathBuf>,
    /// Honour the BPF map `bench_ctl` (benchmarks pause paths or the whole recorder with
    /// bpftool); off, the programs do not even read it.
    pub bench_ctl: bool,
    /// The kernel's BTF from this file instead of `/sys/kernel/btf/vmlinux` (`--btf`).
    pub btf_file: Option<std::path::PathBuf>,
}

/// The wake-up threshold (`cfg_wakeup_bytes`) for a ring of `ring_bytes`: a quarter of it,
/// so that the consumer wakes about four times per ring's worth of events and still has
/// three quarters of the ring to drain into (it also polls every 100 ms). Each wake-up
/// costs the submitting CPU an irq_work self-IPI, ~12 µs in a nested VM here.
const fn wakeup_bytes(ring_bytes: u32) -> u64 {
    ring_bytes as u64 / 4
}

/// Events per batch (`batch_cfg[0]`) for a ring of `ring_bytes`: a batch record takes at
/// most an eighth of the ring (a 4 KiB ring gets batches of 4 events), and at most
/// `IODUMP_BATCH_MAX` events.
const fn batch_events(ring_bytes: u32) -> u32 {
    let n = (ring_bytes as usize / 8).saturating_sub(abi::BATCH_HDR_BYTES) / abi::IO_EVENT_BYTES;
    if n > abi::BATCH_MAX {
        abi::BATCH_MAX as u32
    } else if n < 1 {
        1
    } else {
        n as u32
    }
}

/// Bytes of `struct iodump_batch`.
const BATCH_BYTES: usize = abi::BATCH_HDR_BYTES + abi::BATCH_MAX * abi::IO_EVENT_BYTES;

/// Runs the program `fd` once on `cpu` with `BPF_PROG_TEST_RUN` and `BPF_F_TEST_RUN_ON_CPU`
/// (the kernel interrupts that CPU to run it, unless it is ours) and returns its return
/// value. `args` are a raw tracepoint program's arguments (none: all zero).
fn run_on_cpu(fd: std::os::fd::BorrowedFd<'_>, cpu: u32, args: &[u64]) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    /// The `test` member of `union bpf_attr`, up to `cpu`.
    #[repr(C)]
    #[derive(Default)]
    struct TestRunAttr {
        prog_fd: u32,
        retval: u32,
        data_size_in: u32,
        data_size_out: u32,
        data_in: u64,
        data_out: u64,
        repeat: u32,
        duration: u32,
        ctx_size_in: u32,
        ctx_size_out: u32,
        ctx_in: u64,
        ctx_out: u64,
        flags: u32,
        cpu: u32,
    }
    const BPF_F_TEST_RUN_ON_CPU: u32 = 1;
    let mut attr = TestRunAttr {
        prog_fd: fd.as_raw_fd() as u32,
        flags: BPF_F_TEST_RUN_ON_CPU,
        cpu,
        ctx_size_in: std::mem::size_of_val(args) as u32,
        ctx_in: if args.is_empty() {
            0
        } else {
            args.as_ptr() as u64
        },
        ..TestRunAttr::default()
    };
    // SAFETY: BPF_PROG_TEST_RUN reads `attr` and the `ctx_size_in` bytes at `ctx_in` (the
    // borrowed `args`, alive for the call; no data buffers: their sizes and pointers are 0)
    // and writes `retval` (and `duration`) into `attr`, which lives on our stack for the
    // duration of the call; the kernel zero-extends the attribute union past the size we
    // pass.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            aya_obj::generated::bpf_cmd::BPF_PROG_TEST_RUN as libc::c_long,
            &mut attr as *mut TestRunAttr,
            std::mem::size_of::<TestRunAttr>() as libc::c_long,
        )
    };
    if r == 0 {
        Ok(attr.retval)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A read-only mapping of the in-flight slot table (`inflight_slots`, BPF_F_MMAPABLE): its
/// keys read in place, without a system call per slot. Unmapped on drop.
struct SlotView {
    at: std::ptr::NonNull<u8>,
    bytes: usize,
}

impl SlotView {
    /// Maps the table of `fd`, `slots` entries of [`abi::SLOT_BYTES`].
    fn map(fd: std::os::fd::BorrowedFd<'_>, slots: usize) -> std::io::Result<SlotView> {
        use std::os::fd::AsRawFd;
        let bytes = slots * abi::SLOT_BYTES;
        // SAFETY: a new shared read-only mapping of `bytes` of the map's fd (an mmapable
        // array of `slots` values of SLOT_BYTES, a multiple of 8: no padding between them);
        // the kernel checks the length against the map. Nothing else is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let at = std::ptr::NonNull::new(p.cast()).ok_or_else(std::io::Error::last_os_error)?;
        Ok(SlotView { at, bytes })
    }

    /// Word `w` of slot `i`, or `None` past the mapping.
    fn word(&self, i: usize, w: usize) -> Option<u64> {
        let at = i * abi::SLOT_BYTES + w * 8;
        if w >= abi::SLOT_BYTES / 8 || at + 8 > self.bytes {
            return None;
        }
        // SAFETY: the word lies within the mapping (checked above); slots start at
        // multiples of SLOT_BYTES (a multiple of 8) from a page-aligned address, so it is
        // aligned. The kernel changes the words concurrently: each is read with a volatile
        // load, never through a reference.
        Some(unsafe { std::ptr::read_volatile(self.at.as_ptr().add(at).cast::<u64>()) })
    }

    /// Slot `i` holds an I/O (its key is not 0; it may be being completed).
    fn taken(&self, i: usize) -> bool {
        self.word(i, 0).is_some_and(|key| key != 0)
    }

    /// Slot `i`'s key (0: free), and, when it is taken and not being completed, a copy of
    /// its value (the event being built and the partition start). The kernel writes the
    /// slots as we read them: a copy may be torn, which a caller must tolerate.
    fn slot(&self, i: usize) -> Option<[u64; (abi::SLOT_BYTES - 8) / 8]> {
        let key = self.word(i, 0)?;
        if key == 0 || key & abi::SLOT_COMPLETING != 0 {
            return None;
        }
        let mut v = [0u64; abi::SLOT_BYTES / 8 - 1];
        for (w, x) in v.iter_mut().enumerate() {
            *x = self.word(i, w + 1)?;
        }
        Some(v)
    }
}

impl Drop for SlotView {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `map` made, used by no one after this.
        unsafe { libc::munmap(self.at.as_ptr().cast(), self.bytes) };
    }
}

impl Default for BpfSettings {
    fn default() -> Self {
        BpfSettings {
            devices: Vec::new(),
            pids: Vec::new(),
            comms: Vec::new(),
            op_mask: 0x7f,
            min_bytes: 0,
            max_bytes: 0,
            sample_every: 1,
            paths: true,
            exclude_tgid: 0,
            ring_bytes: 8 << 20,
            cgroup: None,
            bench_ctl: false,
            btf_file: None,
        }
    }
}

/// Which flavour each hook was attached with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attached {
    /// `(tracepoint, "tp_btf" | "raw_tp")` for every hook attached.
    pub hooks: Vec<(&'static str, &'static str)>,
    /// Hooks that could not be attached at all (optional ones only).
    pub missing: Vec<&'static str>,
    /// What this kernel lacks and what it costs, one line each ("feature: reason").
    pub off: Vec<String>,
    /// The variant of the program that runs, in one phrase (trace header, `iodump info`).
    pub variant: String,
}

impl Attached {
    /// The hooks as `tracepoint:flavour` words, space-separated (the trace header's
    /// `iodump.hooks`, the "recording" line).
    pub fn hooks_line(&self) -> String {
        self.hooks
            .iter()
            .map(|(tp, kind)| format!("{tp}:{kind}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A loaded and attached program with its ring buffer and counters.
pub struct Program {
    ebpf: Ebpf,
    /// The attached programs and their links.
    attached_progs: Vec<(&'static str, LinkId)>,
    /// Programs detached by [`Program::detach`] (still loaded).
    detached: Vec<&'static str>,
    /// The ring buffer of records.
    pub ring: RingBuf<MapData>,
    /// How each hook was attached.
    pub attached: Attached,
    /// Completions are batched per CPU (`batch_cfg[0]` > 0): `flush_batch` works here.
    pub batching: bool,
    /// `on_names_changed` on the rename and unlink syscall tracepoints, when attached.
    names: Option<crate::names::NamesHooks>,
    /// `stack_raid5` holds raid456's layout: md RAID4/5/6 stripes are followed.
    raid456: bool,
    /// `stack_bcache` holds bcache's layout: its reads on a cache miss are followed.
    bcache: bool,
    /// The object with compare-and-exchange (its slot table in use) was loaded.
    atomics: bool,
    /// The slot table mapped, once [`Program::in_flight_events`] has looked at it.
    slots: Option<SlotView>,
}

/// The link of an attached program, to detach it.
enum LinkId {
    Btf(BtfTracePointLinkId),
    Raw(RawTracePointLinkId),
}

/// One line naming an error and its causes.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    s.replace('\n', " ")
}

fn is_eperm(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                return true;
            }
        }
        cur = c.source();
    }
    let s = chain(e);
    s.contains("Operation not permitted") || s.contains("Permission denied")
}

fn bpf_error<E: std::error::Error + Send + Sync + 'static>(what: &str, e: E) -> RecordError {
    if is_eperm(&e) {
        RecordError::NoPrivilege {
            what: what.to_string(),
        }
    } else {
        RecordError::Bpf {
            what: what.to_string(),
            source: Box::new(e),
        }
    }
}

/// Kernel symbols the program compares `bi_end_io` (a request's `end_io`, for
/// `end_clone_request` and `mq_flush_data_end_io`) with, from `/proc/kallsyms`.
pub const KSYMS: [&str; 12] = [
    "bio_chain_endio",
    "iomap_dio_bio_end_io",
    "blkdev_bio_end_io",
    "blkdev_bio_end_io_async",
    "btrfs_simple_end_io",
    "btrfs_orig_write_end_io",
    "btrfs_clone_write_end_io",
    "submit_bio_wait_endio",
    "xfs_buf_bio_end_io",
    "xlog_bio_end_io",
    "end_clone_request",
    "mq_flush_data_end_io",
];

/// Addresses of [`KSYMS`] found in `/proc/kallsyms` (absent or zeroed ones are left out).
pub fn read_ksyms() -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let Ok(text) = std::fs::read_to_string("/proc/kallsyms") else {
        return out;
    };
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(addr), Some(_ty), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if KSYMS.contains(&name) && !out.contains_key(name) {
            if let Ok(a) = u64::from_str_radix(addr, 16) {
                if a != 0 {
                    out.insert(name.to_string(), a);
                }
            }
        }
    }
    out
}

/// A tracepoint and the two programs that can serve it: (tracepoint, tp_btf program,
/// raw_tp program).
type Hook = (&'static str, &'static str, &'static str);

const IO_START: Hook = ("block_io_start", "tp_io_start", "raw_io_start");
const GETRQ: Hook = ("block_getrq", "tp_getrq", "raw_getrq");
/// block_getrq and block_bio_queue before 5.11: (request_queue, bio, ...), raw_tp only.
const GETRQ_Q: Hook = ("block_getrq", "", "raw_getrq_q");
const BIO_QUEUE_Q: Hook = ("block_bio_queue", "", "raw_bio_queue_q");
const RQ_INSERT: Hook = ("block_rq_insert", "tp_rq_insert", "raw_rq_insert");
const RQ_ISSUE: Hook = ("block_rq_issue", "tp_rq_issue", "raw_rq_issue");
const RQ_MERGE: Hook = ("block_rq_merge", "tp_rq_merge", "raw_rq_merge");
const RQ_DONE: Hook = ("block_rq_complete", "tp_rq_done", "raw_rq_done");
const BIO_QUEUE: Hook = ("block_bio_queue", "tp_bio_queue", "raw_bio_queue");
const BIO_DONE: Hook = ("block_bio_complete", "tp_bio_done", "raw_bio_done");
/// A second program on block_bio_complete, for the completions the kernel skips the first
/// for (it was running on that CPU already; ebpf/complete.bpf.h, on_bio_complete_again).
const BIO_DONE_AGAIN: Hook = ("block_bio_complete", "tp_bio_done2", "raw_bio_done2");
/// The same on block_rq_complete (on_rq_complete_again).
const RQ_DONE_AGAIN: Hook = ("block_rq_complete", "tp_rq_done2", "raw_rq_done2");
/// The same on block_bio_queue (ebpf/start.bpf.h, on_bio_queue_again), with today's
/// arguments only.
const BIO_QUEUE_AGAIN: Hook = ("block_bio_queue", "tp_bio_queue2", "raw_bio_queue2");
const DIRTY_FOLIO: Hook = ("writeback_dirty_folio", "tp_dirty_folio", "raw_dirty_folio");
const DIRTY_PAGE: Hook = ("writeback_dirty_page", "tp_dirty_page", "raw_dirty_page");

/// The I/Os lost to skipped programs, from each attached program's `recursion_misses`
/// (`misses`: every attached program, by name) and the skips the second programs made up
/// for (`rescued`): the misses of the programs whose skip loses an I/O, less `rescued`.
/// Those are the starts (the I/O is not tracked) and the completions (it stays in flight),
/// and, on a kernel whose requests start at block_getrq, the issue (where a request-based
/// dm device's clone request starts). Not counted: a second program (it is skipped only
/// while it runs, after the first has run, so the nested first ran), an issue on 6.5+ (the
/// I/O is recorded, without its queue time), a merge (the request merged away stays in
/// flight, counted as stale or in flight at the end), an insert (the request is taken at
/// its issue or completion instead) and a dirtied page (no I/O).
fn nested_losses(misses: &[(&'static str, u64)], rescued: u64) -> u64 {
    let is = |name: &str, hooks: &[Hook]| hooks.iter().any(|h| name == h.1 || name == h.2);
    let getrq = misses.iter().any(|(n, _)| is(n, &[GETRQ, GETRQ_Q]));
    let losing = |name: &str| {
        is(
            name,
            &[
                IO_START,
                GETRQ,
                GETRQ_Q,
                BIO_QUEUE,
                BIO_QUEUE_Q,
                RQ_DONE,
                BIO_DONE,
            ],
        ) || (getrq && is(name, &[RQ_ISSUE]))
    };
    misses
        .iter()
        .filter(|(n, _)| losing(n))
        .map(|(_, v)| v)
        .sum::<u64>()
        .saturating_sub(rescued)
}

/// Which hooks to attach on this kernel, decided from the tracepoints its BTF names.
#[derive(Debug, PartialEq, Eq)]
struct HookPlan {
    /// (hook, required): a required hook that fails to attach fails the recording.
    hooks: Vec<(Hook, bool)>,
    /// Requests start at block_getrq (no block_io_start): `cfg_start_at_getrq`.
    start_at_getrq: bool,
    /// Features that stay off, one line each.
    off: Vec<String>,
}

impl HookPlan {
    /// The plan for a kernel that has the tracepoints for which `has` is true and whose
    /// tracepoints pass `args(tp)` arguments (None: unknown, taken as today's).
    fn new(has: impl Fn(&str) -> bool, args: impl Fn(&str) -> Option<usize>) -> HookPlan {
        let with_queue = |tp: &str| args(tp).is_some_and(|n| n >= 2);
        let mut hooks = Vec::new();
        let mut off = Vec::new();
        // block_io_start (6.5+) fires in the submitter's context for every request. Before
        // it, block_getrq does (a bio getting a new request), and the request is found at
        // block_rq_insert (with a scheduler) or block_rq_issue (every request, also those
        // issued directly, as with the `none` scheduler).
        let start_at_getrq = !has(IO_START.0);
        if start_at_getrq {
            hooks.push((if with_queue(GETRQ.0) { GETRQ_Q } else { GETRQ }, true));
            hooks.push((RQ_INSERT, false));
        } else {
            hooks.push((IO_START, true));
        }
        hooks.push((RQ_ISSUE, true));
        hooks.push((RQ_MERGE, false));
        hooks.push((RQ_DONE, true));
        hooks.push((RQ_DONE_AGAIN, true));
        if with_queue(BIO_QUEUE.0) {
            hooks.push((BIO_QUEUE_Q, true));
        } else {
            hooks.push((BIO_QUEUE, true));
            hooks.push((BIO_QUEUE_AGAIN, true));
        }
        hooks.push((BIO_DONE, true));
        hooks.push((BIO_DONE_AGAIN, true));
        if has(DIRTY_FOLIO.0) {
            hooks.push((DIRTY_FOLIO, false));
        } else if has(DIRTY_PAGE.0) {
            hooks.push((DIRTY_PAGE, false));
        } else {
            off.push(
                "writeback dirtier: neither writeback_dirty_folio nor writeback_dirty_page \
                 exists"
                    .to_string(),
            );
        }
        HookPlan {
            hooks,
            start_at_getrq,
            off,
        }
    }
}

/// Loads the program of `hook` — `tp_btf` when `try_btf` and the kernel takes it, else
/// `raw_tp` — without attaching it (the verifier's part: the slow one). Returns which kind.
fn load_one(ebpf: &mut Ebpf, btf: &Btf, hook: Hook, try_btf: bool) -> Result<&'static str, String> {
    let (tp, btf_prog, raw_prog) = hook;
    let mut errors = Vec::new();
    if let Some(p) = ebpf.program_mut(btf_prog).filter(|_| try_btf) {
        match <&mut BtfTracePoint>::try_from(p) {
            Ok(p) => match p.load(tp, btf) {
                Ok(()) => return Ok("tp_btf"),
                Err(e) => errors.push(format!("tp_btf: {}", shorten(chain(&e)))),
            },
            Err(e) => errors.push(format!("tp_btf: {}", shorten(chain(&e)))),
        }
    }
    match load_raw(ebpf, raw_prog) {
        Ok(()) => Ok("raw_tp"),
        Err(e) => {
            errors.push(e);
            Err(errors.join("; "))
        }
    }
}

fn load_raw(ebpf: &mut Ebpf, raw_prog: &str) -> Result<(), String> {
    let p = ebpf
        .program_mut(raw_prog)
        .ok_or_else(|| "raw_tp: no such program".to_string())?;
    let p =
        <&mut RawTracePoint>::try_from(p).map_err(|e| format!("raw_tp: {}", shorten(chain(&e))))?;
    p.load()
        .map_err(|e| format!("raw_tp: {}", shorten(chain(&e))))
}

/// Attaches the program of `hook` that [`load_one`] loaded as `kind`; when a `tp_btf`
/// attach fails, the `raw_tp` program is loaded and attached instead.
fn attach_loaded(
    ebpf: &mut Ebpf,
    hook: Hook,
    kind: &'static str,
) -> Result<(&'static str, (&'static str, LinkId)), String> {
    let (tp, btf_prog, raw_prog) = hook;
    let mut errors = Vec::new();
    if kind == "tp_btf" {
        if let Some(p) = ebpf.program_mut(btf_prog) {
            match <&mut BtfTracePoint>::try_from(p) {
                Ok(p) => match p.attach() {
                    Ok(id) => return Ok(("tp_btf", (btf_prog, LinkId::Btf(id)))),
                    Err(e) => errors.push(format!("tp_btf: {}", shorten(chain(&e)))),
                },
                Err(e) => errors.push(format!("tp_btf: {}", shorten(chain(&e)))),
            }
        }
        if let Err(e) = load_raw(ebpf, raw_prog) {
            errors.push(e);
            return Err(errors.join("; "));
        }
    }
    if let Some(p) = ebpf.program_mut(raw_prog) {
        match <&mut RawTracePoint>::try_from(p) {
            Ok(p) => match p.attach(tp) {
                Ok(id) => return Ok(("raw_tp", (raw_prog, LinkId::Raw(id)))),
                Err(e) => errors.push(format!("raw_tp: {}", shorten(chain(&e)))),
            },
            Err(e) => errors.push(format!("raw_tp: {}", shorten(chain(&e)))),
        }
    }
    Err(errors.join("; "))
}

/// The order hooks are attached in, once all are loaded: completions first, then what
/// follows a request on its way (merge, insert, issue, dirtied pages), the starts last; so
/// that every I/O whose start is tracked has its completion seen (loading one program runs
/// the verifier, tens of milliseconds here: attached one by one as they were loaded, starts
/// before completions, a short recording on zram lost a fifth of its I/Os, tracked at their
/// start while the completion's program was still being verified). Detached the other way
/// round.
fn attach_rank(hook: Hook) -> u8 {
    match hook.0 {
        "block_rq_complete" | "block_bio_complete" => 0,
        "block_io_start" | "block_getrq" | "block_bio_queue" => 2,
        _ => 1,
    }
}

impl Program {
    /// Loads the object with `s`, fills the filter maps and attaches every hook.
    pub fn load(s: &BpfSettings) -> Result<Program, RecordError> {
        let kbtf = KernelBtf::load(s.btf_file.as_deref())?;
        // Kernels before 5.12 refuse BPF atomic compare-and-exchange anywhere in a program.
        let atomics = crate::kernel::has_bpf_cmpxchg()
            && std::env::var("IODUMP_FORCE_NO_ATOMICS").as_deref() != Ok("1");
        // IODUMP_FORCE_GETRQ=1 plans as if block_io_start were missing, to test the start
        // at block_getrq on any kernel.
        let force_getrq = std::env::var("IODUMP_FORCE_GETRQ").as_deref() == Ok("1");
        let plan = HookPlan::new(
            |tp| kbtf.has_tracepoint(tp) && !(force_getrq && tp == IO_START.0),
            |tp| kbtf.tracepoint_args(tp),
        );
        let mut off = plan.off.clone();
        let ksyms = kernel_symbols(&kbtf, &mut off);
        field_checks(&kbtf, &mut off);
        // The stacked devices there are now; one made while recording is added when its
        // first I/O is seen (Program::add_stacked).
        let devices = crate::devices::list().unwrap_or_default();
        let stacked: Vec<DevT> = crate::devices::stacked(&devices);
        let below = crate::devices::recorded_below(&devices, &s.devices);
        let mut ebpf = load_object(s, &kbtf, &plan, &ksyms, atomics, !below.is_empty())?;
        fill_filters(&mut ebpf, s, &stacked)?;
        fill_below(&mut ebpf, &below)?;
        // md RAID4/5/6's stripes: followed when raid456 is loaded (or, later, when an array
        // appears: Program::follow_raid456); said here when an array exists and cannot be.
        let raid456 = match follow_raid456(&mut ebpf) {
            Ok(done) => done,
            Err(why) => {
                for d in devices.iter().filter(|d| crate::devices::is_raid456(d)) {
                    off.push(raid456_off(&d.name, &d.label, &why));
                }
                false
            }
        };
        // bcache's cache-miss reads: followed when bcache is loaded (or, later, when a bcache
        // device appears: Program::follow_bcache); said here when one exists and cannot be.
        let bcache = match follow_bcache(&mut ebpf) {
            Ok(done) => done,
            Err(why) => {
                for d in devices.iter().filter(|d| crate::devices::is_bcache(d)) {
                    off.push(bcache_off(&d.name, &why));
                }
                false
            }
        };
        let batching = enable_batching(&mut ebpf, s.ring_bytes);
        // tp_btf programs need the kernel's own BTF and, for the pointers they hold as
        // numbers, bpf_rdonly_cast (6.2+); without either, every hook is a raw tracepoint.
        // IODUMP_FORCE_RAW_TP=1 picks them anyway, to test that flavour on any kernel.
        let force_raw = std::env::var("IODUMP_FORCE_RAW_TP").as_deref() == Ok("1");
        let try_btf =
            kbtf.kernel_has_btf && kbtf.func_id("bpf_rdonly_cast").is_some() && !force_raw;
        let mut attached = Attached {
            variant: variant_line(&kbtf, &plan, try_btf, force_raw, atomics),
            ..Attached::default()
        };
        let attached_progs = attach_all(&mut ebpf, &kbtf, &plan, try_btf, &mut attached, &mut off)?;
        let names = match crate::names::attach(&mut ebpf) {
            Ok(h) => {
                attached
                    .hooks
                    .push(("syscalls:sys_exit_rename*,unlink*,link*", "perf"));
                Some(h)
            }
            Err(why) => {
                off.push(format!(
                    "names at the instant of a rename (a file's names are checked again once a second instead): {why}"
                ));
                None
            }
        };
        attached.off = off;
        let ring = RingBuf::try_from(ebpf.take_map("events").ok_or_else(|| missing("events"))?)
            .map_err(|e| bpf_error("events ring buffer", e))?;
        Ok(Program {
            ebpf,
            attached_progs,
            detached: Vec::new(),
            ring,
            attached,
            batching,
            names,
            raid456,
            bcache,
            atomics,
            slots: None,
        })
    }

    /// Follows md RAID4/5/6 stripes from now on (an array assembled while recording), if
    /// not yet: `Err` says why they cannot be (raid456 without BTF, or not loaded).
    pub fn follow_raid456(&mut self) -> Result<(), String> {
        follow_late(
            &mut self.raid456,
            &mut self.ebpf,
            follow_raid456,
            crate::kernel::RAID456,
        )
    }

    /// Follows bcache's cache-miss reads from now on (a bcache device registered while
    /// recording), if not yet: `Err` says why they cannot be.
    pub fn follow_bcache(&mut self) -> Result<(), String> {
        follow_late(
            &mut self.bcache,
            &mut self.ebpf,
            follow_bcache,
            crate::kernel::BCACHE_MODULE,
        )
    }

    /// Adds stacked devices made while recording to the kernel side's `stack_devs`, so
    /// that the I/O they send below carries their upper I/O's file and process from now
    /// on. Refused, with the reason, when the map is full (or, which should not happen,
    /// missing from the object).
    pub fn add_stacked(&mut self, devs: &[DevT]) -> Result<(), &'static str> {
        name_stacked(&mut self.ebpf, devs)
    }

    /// Current value of every counter, per CPU: `out[counter][cpu]`.
    pub fn counters(&self) -> Result<Vec<Vec<u64>>, RecordError> {
        let m: PerCpuArray<_, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("counters")
                .ok_or_else(|| missing("counters"))?,
        )
        .map_err(|e| bpf_error("counters map", e))?;
        (0..counter::MAX)
            .map(|i| {
                m.get(&i, 0)
                    .map(|v| v.iter().copied().collect())
                    .map_err(|e| bpf_error("reading counters", e))
            })
            .collect()
    }
}

/// Loads `flush_batch` and, if running it on a CPU works (`BPF_PROG_TEST_RUN` with
/// `BPF_F_TEST_RUN_ON_CPU`, Linux 5.10+), turns batching on: without a way to send a
/// CPU's partial batch, its events could wait indefinitely, so every event then goes to
/// the ring buffer on its own.
fn enable_batching(ebpf: &mut Ebpf, ring_bytes: u32) -> bool {
    let Some(p) = ebpf.program_mut("flush_batch") else {
        return false;
    };
    let Ok(p) = <&mut RawTracePoint>::try_from(p) else {
        return false;
    };
    if p.load().is_err() {
        return false;
    }
    let Ok(fd) = p.fd() else {
        return false;
    };
    let cpu = aya::util::online_cpus()
        .ok()
        .and_then(|c| c.first().copied())
        .unwrap_or(0);
    if run_on_cpu(std::os::fd::AsFd::as_fd(fd), cpu, &[]).is_err() {
        return false;
    }
    let Some(m) = ebpf.map_mut("batch_cfg") else {
        return false;
    };
    let Ok(mut a) = Array::<_, u32>::try_from(m) else {
        return false;
    };
    a.set(0, batch_events(ring_bytes), 0).is_ok()
}

/// The kernel symbols the program keys on (`ksym_*`). Without btrfs's BTF (a module built
/// without it) its structs cannot be relocated, so the btrfs symbols are left out and the
/// program does not reach the code that reads them (said in `off`). Without the flush
/// machinery's `mq_flush_data_end_io` (no address: `kptr_restrict`) a write's flush sequence
/// is not followed to its end (said in `off`).
fn kernel_symbols(kbtf: &KernelBtf, off: &mut Vec<String>) -> HashMap<String, u64> {
    let mut ksyms = read_ksyms();
    if kbtf.without_btf.iter().any(|m| m == "btrfs") && kbtf.vmlinux_struct_id("btrfs_bio") == 0 {
        let before = ksyms.len();
        ksyms.retain(|k, _| !k.starts_with("btrfs_"));
        if ksyms.len() != before {
            off.push(
                "btrfs direct I/O paths and subvolume devices: module btrfs has no BTF \
                 (kernel built without CONFIG_DEBUG_INFO_BTF_MODULES)"
                    .into(),
            );
        }
    }
    if !ksyms.contains_key("mq_flush_data_end_io") {
        off.push(
            "FUA writes timed to the end of their flush: /proc/kallsyms gives no address for \
             mq_flush_data_end_io, so a REQ_FUA write on a device without FUA is timed to its \
             data, without the cache flush after it"
                .into(),
        );
    }
    ksyms
}

/// True when the kernel's `bio_endio` passes a chained bio (`bi_end_io == bio_chain_endio`)
/// to its parent before it traces the completion, so that no completion of such a bio is
/// ever seen (`cfg_chain_untraced`). The trace moved before the hand-over in 5.13 and
/// 5.12.17 ("block: fix trace completion for chained bio"), never in 5.10.y (5.10.262's
/// `block/bio.c` still passes first). Told by the struct the trace names the disk through:
/// `struct bio` has `bi_disk` up to 5.11 and `bi_bdev` from 5.12 (5.12.0–5.12.16 are thus
/// taken as tracing, wrongly). `IODUMP_FORCE_CHAIN_UNTRACED=1` takes any kernel as not
/// tracing, to test it where the kernel does.
fn chain_completion_untraced(kbtf: &KernelBtf) -> bool {
    std::env::var("IODUMP_FORCE_CHAIN_UNTRACED").as_deref() == Ok("1")
        || kbtf.struct_has("bio", "bi_disk")
}

/// The kernel's struct fields the program reads that have moved between kernels, each with
/// the alternatives it knows (ebpf/core_fixes.bpf.h): a kernel that has none of them loads
/// the program all the same, without that one feature, said here.
const MOVED_FIELDS: [(&str, &[&str], &str); 6] = [
    (
        "dentry",
        &["d_u.d_alias", "d_alias"],
        "file paths found from the inode alone (writeback, page-cache I/O whose file is not \
         at hand): struct dentry has neither d_u.d_alias nor d_alias",
    ),
    (
        "page",
        &["compound_head", "compound_info"],
        "file paths of page-cache I/O on the tail pages of large folios: struct page has \
         neither compound_head nor compound_info",
    ),
    (
        "page",
        &["mapping"],
        "file paths of page-cache I/O (buffered reads and writes, writeback, mmap): struct \
         page has no mapping",
    ),
    (
        "inode",
        &["i_dentry"],
        "file paths found from the inode alone (writeback, page-cache I/O whose file is not \
         at hand): struct inode has no i_dentry",
    ),
    (
        "iomap_dio",
        &["iocb"],
        "file paths of direct I/O through iomap (ext4, xfs): struct iomap_dio has no iocb",
    ),
    (
        "bio",
        &["bi_blkg"],
        "the cgroup of writeback submitted by kernel threads (the dirtier's): struct bio has \
         no bi_blkg (a kernel without CONFIG_BLK_CGROUP)",
    ),
];

/// What [`MOVED_FIELDS`] the kernel lacks, into `off`.
fn field_checks(kbtf: &KernelBtf, off: &mut Vec<String>) {
    for (st, fields, feature) in MOVED_FIELDS {
        if !fields.iter().any(|f| kbtf.struct_has(st, f)) {
            off.push(feature.to_string());
        }
    }
}

/// Loads the object (with or without atomics) with its settings written: filters, sizes,
/// kernel symbols and BTF ids, the ring buffer's size.
fn load_object(
    s: &BpfSettings,
    kbtf: &KernelBtf,
    plan: &HookPlan,
    ksyms: &HashMap<String, u64>,
    atomics: bool,
    filter_below: bool,
) -> Result<Ebpf, RecordError> {
    let object = if atomics { OBJECT } else { OBJECT_NO_ATOMICS };
    let ksym_names: Vec<String> = KSYMS.iter().map(|n| format!("ksym_{n}")).collect();
    let ksym_vals: Vec<u64> = KSYMS
        .iter()
        .map(|n| ksyms.get(*n).copied().unwrap_or(0))
        .collect();
    let btf_ids = [
        ("cfg_btf_id_btrfs_bio", kbtf.vmlinux_struct_id("btrfs_bio")),
        (
            "cfg_btf_id_btrfs_inode",
            kbtf.vmlinux_struct_id("btrfs_inode"),
        ),
    ];
    let flags = [
        ("cfg_filter_dev", !s.devices.is_empty() as u32),
        ("cfg_filter_below", filter_below as u32),
        ("cfg_filter_pid", !s.pids.is_empty() as u32),
        ("cfg_filter_comm", !s.comms.is_empty() as u32),
        ("cfg_filter_cgroup", s.cgroup.is_some() as u32),
        ("cfg_op_mask", s.op_mask),
        ("cfg_min_bytes", s.min_bytes),
        ("cfg_max_bytes", s.max_bytes),
        ("cfg_sample_every", s.sample_every.max(1)),
        ("cfg_enable_paths", s.paths as u32),
        ("cfg_exclude_tgid", s.exclude_tgid),
        ("cfg_bench_ctl", s.bench_ctl as u32),
        ("cfg_start_at_getrq", plan.start_at_getrq as u32),
        ("cfg_chain_untraced", chain_completion_untraced(kbtf) as u32),
    ];
    let mut loader = EbpfLoader::new();
    loader.btf(Some(&kbtf.btf));
    for (name, v) in flags.iter().chain(&btf_ids) {
        loader.override_global(name, v, true);
    }
    let wakeup = wakeup_bytes(s.ring_bytes);
    loader.override_global("cfg_wakeup_bytes", &wakeup, true);
    for (name, v) in ksym_names.iter().zip(&ksym_vals) {
        loader.override_global(name, v, true);
    }
    loader.map_max_entries("events", s.ring_bytes);
    let cpus = aya::util::nr_cpus().unwrap_or(1) as u32;
    if !atomics {
        loader.override_global("cfg_nr_cpus", &cpus, true);
    }
    let (words, _) = object_for(object, kbtf.func_id("bpf_rdonly_cast"));
    loader
        .load(as_bytes(&words, object.len()))
        .map_err(|e| bpf_error("loading the BPF object", e))
}

/// Entries of the kernel side's `stack_devs` (ebpf/maps.bpf.h).
const STACK_DEVS_MAX: usize = 256;

/// Names stacked devices to the kernel side: adds them to `stack_devs`, then sets
/// `stack_named`, which tells the hooks to look there (ebpf/stack.bpf.h; the object's only
/// `.bss` variable, so the `.bss` map's one value is that `u32`).
fn name_stacked(ebpf: &mut Ebpf, devs: &[DevT]) -> Result<(), &'static str> {
    const MISSING: &str = "the BPF object has no table of stacked devices";
    const FULL: &str = "the kernel side's table of stacked devices is full (256)";
    if devs.is_empty() {
        return Ok(());
    }
    let m = ebpf.map_mut("stack_devs").ok_or(MISSING)?;
    let mut h = BpfHashMap::<_, u32, u8>::try_from(m).map_err(|_| MISSING)?;
    devs.iter()
        .try_for_each(|d| h.insert(d.0, 1, 0).map_err(|_| FULL))?;
    const NO_FLAG: &str = "the BPF object's .bss is not the one u32 stack_named";
    let m = ebpf.map_mut(".bss").ok_or(NO_FLAG)?;
    let mut named = Array::<_, u32>::try_from(m).map_err(|_| NO_FLAG)?;
    named.set(0, 1, 0).map_err(|_| NO_FLAG)
}

/// Gives the kernel side a module's layout with `follow` unless `done` says it has it, for
/// a device of that module that appeared while recording: `Err` says why it cannot (the
/// layout unreadable, or `module` not loaded).
fn follow_late(
    done: &mut bool,
    ebpf: &mut Ebpf,
    follow: fn(&mut Ebpf) -> Result<bool, String>,
    module: &str,
) -> Result<(), String> {
    if !*done {
        *done = follow(ebpf)?;
        if !*done {
            return Err(format!("the {module} module is not loaded"));
        }
    }
    Ok(())
}

/// Gives the kernel side raid456's layout (`stack_raid5`) when the module is loaded:
/// `Ok(false)` when it is not, `Err` when its layout cannot be read or set.
fn follow_raid456(ebpf: &mut Ebpf) -> Result<bool, String> {
    let Some(layout) = Raid5Layout::of_running_kernel()? else {
        return Ok(false);
    };
    const MISSING: &str = "the BPF object has no stack_raid5 map";
    let m = ebpf.map_mut("stack_raid5").ok_or(MISSING)?;
    let mut a = Array::<_, [u8; 40]>::try_from(m).map_err(|_| MISSING)?;
    a.set(0, layout.to_bytes(), 0)
        .map_err(|e| format!("filling stack_raid5: {e}"))?;
    Ok(true)
}

/// Gives the kernel side bcache's layout (`stack_bcache`) when the module is loaded:
/// `Ok(false)` when it is not, `Err` when its layout cannot be read or set.
fn follow_bcache(ebpf: &mut Ebpf) -> Result<bool, String> {
    let Some(layout) = BcacheLayout::of_running_kernel()? else {
        return Ok(false);
    };
    const MISSING: &str = "the BPF object has no stack_bcache map";
    let m = ebpf.map_mut("stack_bcache").ok_or(MISSING)?;
    let mut a = Array::<_, u32>::try_from(m).map_err(|_| MISSING)?;
    a.set(0, layout.vec_off, 0)
        .map_err(|e| format!("filling stack_bcache: {e}"))?;
    Ok(true)
}

/// The line saying that a bcache device's cache-miss reads are not followed, and why.
pub fn bcache_off(name: &str, why: &str) -> String {
    format!(
        "bcache {name}: {why}; a read that misses its cache goes to the backing device in a \
         bio of bcache's own, which keeps the reading thread but not the file, and names no \
         I/O of {name}"
    )
}

/// The line saying that an md RAID4/5/6 array's stripe I/O is not followed, and why.
pub fn raid456_off(name: &str, level: &str, why: &str) -> String {
    format!(
        "md {level} stripes of {name}: {why}; the I/O they send below keeps md's thread, \
         not the files and processes it serves"
    )
}

/// Fills `filter_below`: the devices of `-d` whose I/O below is recorded too.
fn fill_below(ebpf: &mut Ebpf, below: &[DevT]) -> Result<(), RecordError> {
    if below.is_empty() {
        return Ok(());
    }
    let mut m: BpfHashMap<_, u32, u8> = BpfHashMap::try_from(
        ebpf.map_mut("filter_below")
            .ok_or_else(|| missing("filter_below"))?,
    )
    .map_err(|e| bpf_error("filter_below map", e))?;
    for d in below.iter().take(64) {
        m.insert(d.0, 1, 0)
            .map_err(|e| bpf_error("filling filter_below", e))?;
    }
    Ok(())
}

/// Fills the filter maps: devices, pids, command names, the cgroup; and the stacked devices.
fn fill_filters(ebpf: &mut Ebpf, s: &BpfSettings, stacked: &[DevT]) -> Result<(), RecordError> {
    if !s.devices.is_empty() {
        let mut m: BpfHashMap<_, u32, u8> = BpfHashMap::try_from(
            ebpf.map_mut("dev_filter")
                .ok_or_else(|| missing("dev_filter"))?,
        )
        .map_err(|e| bpf_error("dev_filter map", e))?;
        for d in &s.devices {
            m.insert(d.0, 1, 0)
                .map_err(|e| bpf_error("filling dev_filter", e))?;
        }
    }
    if !stacked.is_empty() {
        name_stacked(ebpf, &stacked[..stacked.len().min(STACK_DEVS_MAX)]).map_err(|why| {
            RecordError::Bpf {
                what: "filling stack_devs".into(),
                source: Box::new(Message(why.into())),
            }
        })?;
    }
    if !s.pids.is_empty() {
        let mut m: BpfHashMap<_, u32, u8> = BpfHashMap::try_from(
            ebpf.map_mut("pid_filter")
                .ok_or_else(|| missing("pid_filter"))?,
        )
        .map_err(|e| bpf_error("pid_filter map", e))?;
        for p in &s.pids {
            m.insert(*p, 1, 0)
                .map_err(|e| bpf_error("filling pid_filter", e))?;
        }
    }
    if !s.comms.is_empty() {
        let mut m: BpfHashMap<_, [u8; 16], u8> = BpfHashMap::try_from(
            ebpf.map_mut("comm_filter")
                .ok_or_else(|| missing("comm_filter"))?,
        )
        .map_err(|e| bpf_error("comm_filter map", e))?;
        for c in &s.comms {
            let mut k = [0u8; 16];
            let n = c.len().min(15);
            k[..n].copy_from_slice(&c[..n]);
            m.insert(k, 1, 0)
                .map_err(|e| bpf_error("filling comm_filter", e))?;
        }
    }

    if let Some(path) = &s.cgroup {
        let dir = resolve_cgroup(path)?;
        let f = std::fs::File::open(&dir).map_err(|e| RecordError::BadOption {
            what: format!("--cgroup {}: {e}", dir.display()),
        })?;
        let mut m = CgroupArray::try_from(
            ebpf.map_mut("cgroup_filter")
                .ok_or_else(|| missing("cgroup_filter"))?,
        )
        .map_err(|e| bpf_error("cgroup_filter map", e))?;
        m.set(0, f, 0).map_err(|e| RecordError::BadOption {
            what: format!(
                "--cgroup {}: not a cgroup v2 directory ({})",
                dir.display(),
                chain(&e)
            ),
        })?;
    }
    Ok(())
}

/// How the program was built and attached, as `iodump info` shows it (`iodump.variant`).
fn variant_line(
    kbtf: &KernelBtf,
    plan: &HookPlan,
    try_btf: bool,
    force_raw: bool,
    atomics: bool,
) -> String {
    let mut variant = if try_btf {
        "tp_btf (typed tracepoints, direct loads)".to_string()
    } else if force_raw {
        "raw_tp (IODUMP_FORCE_RAW_TP=1)".to_string()
    } else if !kbtf.kernel_has_btf {
        format!(
            "raw_tp (no kernel BTF; types from {})",
            kbtf.source.display()
        )
    } else {
        "raw_tp (no bpf_rdonly_cast kfunc: bpf_probe_read_kernel for every read)".to_string()
    };
    if !atomics {
        variant.push_str(
            "; no BPF compare-and-exchange: in-flight I/O in hash maps, per-CPU file ids",
        );
    }
    if plan.start_at_getrq {
        variant.push_str("; requests start at block_getrq (no block_io_start)");
    }
    if !kbtf.merged.is_empty() {
        variant.push_str(&format!("; module BTF: {}", kbtf.merged.join(", ")));
    }
    variant
}

/// Attaches every hook of the plan: a required one that fails is an error, an optional one
/// is said in `off` and counted missing. Returns the attached programs' names.
fn attach_all(
    ebpf: &mut Ebpf,
    kbtf: &KernelBtf,
    plan: &HookPlan,
    try_btf: bool,
    attached: &mut Attached,
    off: &mut Vec<String>,
) -> Result<Vec<(&'static str, LinkId)>, RecordError> {
    let fail = |hook: Hook, msg: String| RecordError::Bpf {
        what: format!("attaching to tracepoint {}", hook.0),
        source: Box::new(Message(msg)),
    };
    // Every program loaded (verified) first ...
    let mut loaded = Vec::new();
    for (i, (hook, required)) in plan.hooks.iter().enumerate() {
        match load_one(ebpf, &kbtf.btf, *hook, try_btf) {
            Ok(kind) => loaded.push((i, *hook, *required, kind)),
            Err(msg) if *required => return Err(fail(*hook, msg)),
            Err(msg) => {
                attached.missing.push(hook.0);
                off.push(format!("tracepoint {}: {msg}", hook.0));
            }
        }
    }
    // ... then attached in a quick succession, completions first.
    loaded.sort_by_key(|(i, hook, _, _)| (attach_rank(*hook), *i));
    let mut attached_progs = Vec::new();
    let mut kinds = Vec::new();
    for (i, hook, required, kind) in loaded {
        match attach_loaded(ebpf, hook, kind) {
            Ok((kind, name)) => {
                kinds.push((i, hook.0, kind));
                attached_progs.push(name);
            }
            Err(msg) if required => return Err(fail(hook, msg)),
            Err(msg) => {
                attached.missing.push(hook.0);
                off.push(format!("tracepoint {}: {msg}", hook.0));
            }
        }
    }
    // Named in the plan's order (the header's `iodump.hooks`).
    kinds.sort_by_key(|k| k.0);
    for (_, tp, kind) in kinds {
        if !attached.hooks.contains(&(tp, kind)) {
            attached.hooks.push((tp, kind));
        }
    }
    Ok(attached_progs)
}

/// A cgroup directory: the path itself when it is one, else the path under the cgroup v2
/// mount (`/system.slice/x.service` → `/sys/fs/cgroup/system.slice/x.service`).
fn resolve_cgroup(path: &std::path::Path) -> Result<std::path::PathBuf, RecordError> {
    if path.is_dir() {
        return Ok(path.to_path_buf());
    }
    for m in iodump_host::mounts::read() {
        if m.fstype == "cgroup2" {
            let root =
                std::path::PathBuf::from(String::from_utf8_lossy(&m.mount_point).into_owned());
            let p = root.join(path.strip_prefix("/").unwrap_or(path));
            if p.is_dir() {
                return Ok(p);
            }
        }
    }
    Err(RecordError::BadOption {
        what: format!("--cgroup {}: no such cgroup directory", path.display()),
    })
}

impl Program {
    /// Detaches every program (the maps stay readable): no event starts or ends after this.
    pub fn detach(&mut self) {
        self.names = None;
        // Starts first, completions last (the reverse of [`attach_rank`]'s order).
        for (name, link) in self.attached_progs.drain(..).rev().collect::<Vec<_>>() {
            let Some(p) = self.ebpf.program_mut(name) else {
                continue;
            };
            match link {
                LinkId::Btf(id) => {
                    if let Ok(p) = <&mut BtfTracePoint>::try_from(p) {
                        let _ = p.detach(id);
                    }
                }
                LinkId::Raw(id) => {
                    if let Ok(p) = <&mut RawTracePoint>::try_from(p) {
                        let _ = p.detach(id);
                    }
                }
            }
            self.detached.push(name);
        }
    }

    /// Sends every CPU's partial batch of events to the ring buffer now (a CPU on which
    /// another of our programs is running is skipped: its batch goes next time).
    pub fn flush_batches(&self) {
        if !self.batching {
            return;
        }
        let Some(fd) = self.flush_fd() else {
            return;
        };
        for cpu in aya::util::online_cpus().unwrap_or_default() {
            // busy or failed: the next tick, or drain_batches at the end, sends it
            let _ = run_on_cpu(fd, cpu, &[]);
        }
    }

    fn flush_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        let p = self.ebpf.program("flush_batch")?;
        p.fd().ok().map(std::os::fd::AsFd::as_fd)
    }

    /// After [`Program::detach`]: empties every CPU's batch. Batches are sent through the
    /// ring buffer where possible (retrying a CPU whose program is still finishing); the
    /// batch of a CPU the kernel cannot run the flush on (gone offline) is read from the
    /// map instead and returned as batch records, with the number of events in them
    /// (events the kernel counted neither as emitted nor as lost).
    pub fn drain_batches(&self) -> (Vec<Vec<u8>>, u64) {
        let mut records = Vec::new();
        let mut events = 0u64;
        if !self.batching {
            return (records, events);
        }
        let ncpus = aya::util::nr_cpus().unwrap_or(0) as u32;
        let mut pending: Vec<u32> = (0..ncpus).collect();
        if let Some(fd) = self.flush_fd() {
            let mut failed = Vec::new();
            for attempt in 0..200 {
                pending.retain(|&cpu| match run_on_cpu(fd, cpu, &[]) {
                    Ok(r) => r == abi::FLUSH_BUSY,
                    Err(_) => {
                        failed.push(cpu);
                        false
                    }
                });
                if pending.is_empty() {
                    break;
                }
                if attempt < 199 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            // CPUs where the flush could not run (or found the CPU busy every time, which
            // cannot last once the programs are detached): read below.
            failed.append(&mut pending);
            pending = failed;
        }
        if pending.is_empty() {
            return (records, events);
        }
        let Some(m) = self.ebpf.map("batch") else {
            return (records, events);
        };
        let Ok(a) = PerCpuArray::<_, [u8; BATCH_BYTES]>::try_from(m) else {
            return (records, events);
        };
        let Ok(values) = a.get(&0, 0) else {
            return (records, events);
        };
        for (cpu, b) in values.iter().enumerate() {
            let n = u16::from_le_bytes([b[2], b[3]]) as usize;
            if !pending.contains(&(cpu as u32)) || n == 0 || n > abi::BATCH_MAX {
                continue;
            }
            let mut rec = b[..abi::BATCH_HDR_BYTES + n * abi::IO_EVENT_BYTES].to_vec();
            rec[..2].copy_from_slice(&abi::EV_BATCH.to_le_bytes());
            records.push(rec);
            events += n as u64;
        }
        (records, events)
    }

    /// Deletes these files' entries `(dev, ino, gen)` from the kernel's `seen_inodes` map
    /// (the paths it sent): their next I/O sends their path again. Returns how many were
    /// there.
    pub fn unsend_paths(&mut self, keys: &[(u32, u64, u32)]) -> usize {
        let Some(m) = self.ebpf.map_mut("seen_inodes") else {
            return 0;
        };
        let Ok(mut h) = BpfHashMap::<_, [u8; 16], [u8; 16]>::try_from(m) else {
            return 0;
        };
        let mut n = 0;
        for &(dev, ino, gen) in keys {
            // struct iodump_inode_key: ino, dev, gen (ebpf/iodump.h).
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&ino.to_ne_bytes());
            k[8..12].copy_from_slice(&dev.to_ne_bytes());
            k[12..].copy_from_slice(&gen.to_ne_bytes());
            n += usize::from(h.remove(&k).is_ok());
        }
        n
    }

    /// I/Os still in flight in the kernel's tables (slots in use plus fallback entries), or
    /// `None` when a table cannot be read (its value size is not the one `abi` states).
    pub fn in_flight(&mut self) -> Option<u64> {
        let mut n = 0u64;
        // Through the mapping: one system call per slot took 0.3 s for the 64k slots.
        if let Some(view) = self.slot_view().ok()? {
            n += (0..view.bytes / abi::SLOT_BYTES)
                .filter(|&i| view.taken(i))
                .count() as u64;
        }
        for name in ["inflight_rq", "inflight_bio"] {
            let m = self.ebpf.map(name)?;
            let h = BpfHashMap::<_, u64, [u8; abi::INFLIGHT_BYTES]>::try_from(m).ok()?;
            n += h.keys().filter(|k| k.is_ok()).count() as u64;
        }
        Some(n)
    }

    /// The I/Os in the kernel's in-flight tables that started before `started_before_ns`,
    /// each as the record of an I/O completing at `now_ns` ([`abi::in_flight_event`]): I/Os
    /// that may never complete. Read while the programs run, so an entry may be torn by an
    /// I/O completing or starting as it is copied: what is read is a hint, not a record.
    /// The slot table is read through a mapping of it (made at the first call), the
    /// fallback maps with system calls (few entries, but every in-flight I/O with the
    /// noatomics object).
    pub fn in_flight_events(
        &mut self,
        started_before_ns: u64,
        now_ns: u64,
    ) -> std::io::Result<Vec<[u8; abi::IO_EVENT_BYTES]>> {
        let mut out = Vec::new();
        let missing = |name: &str| std::io::Error::other(format!("no map {name}"));
        if let Some(view) = self.slot_view()? {
            let mut entry = [0u8; abi::INFLIGHT_BYTES];
            for i in 0..view.bytes / abi::SLOT_BYTES {
                let Some(v) = view.slot(i) else {
                    continue;
                };
                for (b, w) in entry.chunks_exact_mut(8).zip(v) {
                    b.copy_from_slice(&w.to_le_bytes());
                }
                out.extend(abi::in_flight_event(&entry, started_before_ns, now_ns));
            }
        }
        for name in ["inflight_rq", "inflight_bio"] {
            let m = self.ebpf.map(name).ok_or_else(|| missing(name))?;
            let h = BpfHashMap::<_, u64, [u8; abi::INFLIGHT_BYTES]>::try_from(m)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            for (_, v) in h.iter().flatten() {
                out.extend(abi::in_flight_event(&v, started_before_ns, now_ns));
            }
        }
        Ok(out)
    }

    /// The mapping of the slot table, made at the first call; none with the noatomics
    /// object, which leaves its slot table empty.
    fn slot_view(&mut self) -> std::io::Result<Option<&SlotView>> {
        if !self.atomics {
            return Ok(None);
        }
        if self.slots.is_none() {
            let missing = |name: &str| std::io::Error::other(format!("no map {name}"));
            let m = self
                .ebpf
                .map("inflight_slots")
                .ok_or_else(|| missing("inflight_slots"))?;
            // (an array of values of the size abi states)
            let n = Array::<_, [u8; abi::SLOT_BYTES]>::try_from(m)
                .map_err(|e| std::io::Error::other(e.to_string()))?
                .len() as usize;
            let aya::maps::Map::Array(d) = m else {
                return Err(missing("inflight_slots (an array)"));
            };
            self.slots = Some(SlotView::map(std::os::fd::AsFd::as_fd(d.fd()), n)?);
        }
        Ok(self.slots.as_ref())
    }

    /// I/Os lost because the kernel skipped one of our programs that would have run
    /// nested in itself on a CPU and nothing was done in its place (`nested_losses` of
    /// the programs' `recursion_misses` and the second programs' rescues).
    pub fn recursion_misses(&self) -> u64 {
        let rescued: u64 = self
            .counters()
            .map(|c| {
                [
                    counter::BIO_RESCUED,
                    counter::RQ_RESCUED,
                    counter::QUEUE_RESCUED,
                ]
                .iter()
                .filter_map(|&i| c.get(i as usize))
                .map(|v| v.iter().sum::<u64>())
                .sum()
            })
            .unwrap_or(0);
        nested_losses(&self.recursion_misses_by_program(), rescued)
    }

    /// `recursion_misses` of each program attached (or attached and since detached), raw:
    /// a second program's misses included, nothing rescued taken off (`record --stats`).
    pub fn recursion_misses_by_program(&self) -> Vec<(&'static str, u64)> {
        use std::os::fd::{AsFd, AsRawFd};
        let mut out = Vec::new();
        let names = self
            .attached_progs
            .iter()
            .map(|(n, _)| *n)
            .chain(self.detached.iter().copied());
        for name in names {
            let Some(p) = self.ebpf.program(name) else {
                continue;
            };
            let Ok(fd) = p.fd() else {
                continue;
            };
            let raw = fd.as_fd().as_raw_fd();
            // SAFETY: bpf_prog_info is a plain C struct of integers and pointers-as-u64, for
            // which all-zero bytes are a valid value.
            let mut info: aya_obj::generated::bpf_prog_info = unsafe { std::mem::zeroed() };
            #[repr(C)]
            struct InfoAttr {
                bpf_fd: u32,
                info_len: u32,
                info: u64,
            }
            let mut attr = InfoAttr {
                bpf_fd: raw as u32,
                info_len: std::mem::size_of_val(&info) as u32,
                info: &mut info as *mut _ as u64,
            };
            // SAFETY: BPF_OBJ_GET_INFO_BY_FD writes at most `info_len` bytes into `info`,
            // which lives on our stack for the duration of the call; `attr` is the
            // `info` member of `union bpf_attr` (fd, length, pointer), zero-padded by the
            // kernel's size check.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    aya_obj::generated::bpf_cmd::BPF_OBJ_GET_INFO_BY_FD as libc::c_long,
                    &mut attr as *mut InfoAttr,
                    std::mem::size_of::<InfoAttr>() as libc::c_long,
                )
            };
            if r == 0 {
                out.push((name, info.recursion_misses));
            }
        }
        out
    }
}

fn missing(name: &str) -> RecordError {
    RecordError::Bpf {
        what: format!("the BPF object has no map {name}"),
        source: Box::new(Message("rebuild it with ebpf/build.sh".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_skips_that_lose_an_io_count_as_nested_losses() {
        // 6.5+: starts at block_io_start
        let misses = [
            ("tp_io_start", 2),
            ("tp_rq_issue", 5),
            ("tp_rq_merge", 7),
            ("tp_rq_done", 3),
            ("tp_rq_done2", 11),
            ("tp_bio_queue", 13),
            ("tp_bio_queue2", 17),
            ("tp_bio_done", 19),
            ("tp_bio_done2", 23),
            ("tp_dirty_folio", 29),
        ];
        assert_eq!(nested_losses(&misses, 0), 2 + 3 + 13 + 19);
        assert_eq!(nested_losses(&misses, 30), 7, "less the rescues");
        assert_eq!(nested_losses(&misses, 100), 0, "never below 0");
        // 5.10: starts at block_getrq, taken at insert or issue; raw_tp with (q, bio)
        let misses = [
            ("raw_getrq_q", 2),
            ("raw_rq_insert", 3),
            ("raw_rq_issue", 5),
            ("raw_rq_merge", 7),
            ("raw_rq_done", 11),
            ("raw_rq_done2", 13),
            ("raw_bio_queue_q", 17),
            ("raw_bio_done", 19),
            ("raw_dirty_page", 23),
        ];
        assert_eq!(nested_losses(&misses, 0), 2 + 5 + 11 + 17 + 19);
    }

    /// The object loaded as [`Program::load`] loads it, with no program attached (so that
    /// no I/O of the host runs one meanwhile); `None` where this host cannot load it
    /// (skipped, unless `IODUMP_REQUIRE_BPF=1`: CI runs as root).
    fn load_unattached() -> Option<Ebpf> {
        let loaded = KernelBtf::load(None).and_then(|kbtf| {
            let plan = HookPlan::new(|tp| kbtf.has_tracepoint(tp), |tp| kbtf.tracepoint_args(tp));
            let ksyms = kernel_symbols(&kbtf, &mut Vec::new());
            let atomics = crate::kernel::has_bpf_cmpxchg();
            load_object(
                &BpfSettings::default(),
                &kbtf,
                &plan,
                &ksyms,
                atomics,
                false,
            )
        });
        match loaded {
            Ok(ebpf) => Some(ebpf),
            Err(e) if std::env::var("IODUMP_REQUIRE_BPF").as_deref() == Ok("1") => {
                panic!("IODUMP_REQUIRE_BPF=1 but the object does not load: {e}")
            }
            Err(e) => {
                eprintln!("skipped: the BPF object does not load here: {e}");
                None
            }
        }
    }

    /// `struct iodump_cpu_state` (ebpf/maps.bpf.h) as words: 160 bytes. Its byte 4 is
    /// `rq_done_busy`, byte 5 `bio_done_busy`.
    type CpuState = [u64; 20];

    /// Sets the busy flags `rq_done_busy` and `bio_done_busy` to `rq` and `bio` on every CPU.
    fn set_busy(ebpf: &mut Ebpf, rq: bool, bio: bool) {
        let mut m: PerCpuArray<_, CpuState> =
            PerCpuArray::try_from(ebpf.map_mut("cpu_state").expect("cpu_state map"))
                .expect("cpu_state holds a struct iodump_cpu_state of 160 bytes");
        let flags = (u64::from(rq) << 32) | (u64::from(bio) << 40);
        let values: Vec<CpuState> = m
            .get(&0, 0)
            .expect("reading cpu_state")
            .iter()
            .map(|v| {
                let mut v = *v;
                v[0] = (v[0] & !(0xffff << 32)) | flags;
                v
            })
            .collect();
        m.set(0, values.try_into().expect("one value per CPU"), 0)
            .expect("writing cpu_state");
    }

    /// The counter `i` on `cpu`.
    fn counter_on(ebpf: &Ebpf, i: u32, cpu: usize) -> u64 {
        let m: PerCpuArray<_, u64> =
            PerCpuArray::try_from(ebpf.map("counters").expect("counters map")).expect("counters");
        m.get(&i, 0).expect("reading counters")[cpu]
    }

    /// Runs the raw tracepoint program `name` (loaded) on `cpu` with `args`.
    fn run(ebpf: &Ebpf, name: &str, cpu: u32, args: &[u64]) {
        let p = ebpf.program(name).expect("program in the object");
        let fd = p.fd().expect("program loaded");
        run_on_cpu(std::os::fd::AsFd::as_fd(fd), cpu, args).expect("BPF_PROG_TEST_RUN");
    }

    /// The second program on a completion tracepoint (ebpf/complete.bpf.h) counts a rescue
    /// for a completion of an I/O it does not track (another device's, a flush) only while
    /// the first program runs on that CPU, which is when the kernel skips the first: then
    /// the first's skip is not counted as a lost I/O. Otherwise, with nothing in flight to
    /// finish, it does nothing. The completions here are of a request and a bio at an
    /// address nothing is tracked at (8: every read of them fails and gives 0).
    #[test]
    fn a_completion_the_first_program_was_skipped_for_is_rescued_even_when_not_tracked() {
        let Some(mut ebpf) = load_unattached() else {
            return;
        };
        for name in ["raw_rq_done", "raw_rq_done2", "raw_bio_done2"] {
            load_raw(&mut ebpf, name).unwrap_or_else(|e| panic!("loading {name}: {e}"));
        }
        let cpu = 0;
        let rq_done = [8u64, 0, 4096]; // (rq, error, nr_bytes)
        let bio_done = [0u64, 8]; // (q, bio)
        let rescued = |ebpf: &Ebpf| {
            (
                counter_on(ebpf, counter::RQ_RESCUED, cpu as usize),
                counter_on(ebpf, counter::BIO_RESCUED, cpu as usize),
            )
        };
        // the first ran for this completion (not busy): nothing to rescue
        set_busy(&mut ebpf, false, false);
        run(&ebpf, "raw_rq_done2", cpu, &rq_done);
        run(&ebpf, "raw_bio_done2", cpu, &bio_done);
        assert_eq!(rescued(&ebpf), (0, 0));
        // the first is running on this CPU: the kernel skipped it for this completion
        set_busy(&mut ebpf, true, false);
        run(&ebpf, "raw_rq_done2", cpu, &rq_done);
        run(&ebpf, "raw_bio_done2", cpu, &bio_done);
        assert_eq!(rescued(&ebpf), (1, 0), "request completion, first busy");
        set_busy(&mut ebpf, false, true);
        run(&ebpf, "raw_rq_done2", cpu, &rq_done);
        run(&ebpf, "raw_bio_done2", cpu, &bio_done);
        assert_eq!(rescued(&ebpf), (1, 1), "bio completion, first busy");
        // the first program clears its flag when it is done
        set_busy(&mut ebpf, true, false);
        let no_start = counter_on(&ebpf, counter::NO_START, cpu as usize);
        run(&ebpf, "raw_rq_done", cpu, &rq_done);
        assert_eq!(
            counter_on(&ebpf, counter::NO_START, cpu as usize),
            no_start + 1,
            "the first program counts a completion it did not see start"
        );
        run(&ebpf, "raw_rq_done2", cpu, &rq_done);
        assert_eq!(rescued(&ebpf), (1, 1), "after the first ran");
    }

    #[test]
    fn the_object_calls_bpf_rdonly_cast_through_the_placeholder() {
        let placeholder = placeholder_call();
        let calls = OBJECT
            .chunks_exact(8)
            .filter(|insn| *insn == placeholder)
            .count();
        // one per tp_btf program that resolves a bio (iomap direct I/O)
        assert!(calls > 0, "no placeholder call in the object");
    }

    #[test]
    fn the_rewritten_object_keeps_its_bytes_but_the_calls() {
        let btf = match Btf::from_sys_fs() {
            Ok(btf) => btf,
            // Without kernel BTF there is nothing to rewrite with: skip, unless the run
            // requires BPF (.ci/run sets IODUMP_REQUIRE_BPF=1), where skipping would hide it.
            Err(e) if std::env::var("IODUMP_REQUIRE_BPF").as_deref() == Ok("1") => {
                panic!("IODUMP_REQUIRE_BPF=1 but no kernel BTF: {e}")
            }
            Err(_) => return,
        };
        let id = btf
            .id_by_type_name_kind("bpf_rdonly_cast", aya_obj::btf::BtfKind::Func)
            .ok();
        let (words, patched) = object_for(OBJECT, id);
        let bytes = as_bytes(&words, OBJECT.len());
        assert_eq!(bytes.len(), OBJECT.len());
        let differing = bytes
            .chunks_exact(8)
            .zip(OBJECT.chunks_exact(8))
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(differing, patched);
        if btf
            .id_by_type_name_kind("bpf_rdonly_cast", aya_obj::btf::BtfKind::Func)
            .is_ok()
        {
            assert!(
                patched > 0,
                "the kernel has bpf_rdonly_cast but no call was rewritten"
            );
        }
    }
}
