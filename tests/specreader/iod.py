#!/usr/bin/env python3
"""A reader of iodump `.iod` trace files, written from schemas/iod-format.md alone.

    for kind, item in read_records(path): ...

yields, in file order:
    ("signature", {major, minor, ok})
    ("header", {...})                      the TLV fields of §3.1
    ("device" | "process" | "path" | "cgroup" | "loss", entry dict)
    ("segment", {offset, rows, columns, events: [event dict, ...]})
    ("end", {...}), ("footer", {...}), ("unknown_chunk", {...})
    ("damage", {...})                      anything §6 says to report; reading goes on
    ("truncated", {...}), ("another_trace", {...})   reading stops

Trace(path) / Recording(paths) add what a user wants on top: the tables (the latest entry
per key) and events with their process (comm, args) and path resolved as §3.3 and §8 say.

CLI: python3 iod.py FILE...|DIR   prints one JSON object per event (several FILEs or a DIR: the
parts of one recording, ordered by iodump.part); damage goes to stderr, exit status 1 if any.
"""
import json
import os
import re
import struct
import sys
import zlib

import numpy as np
import pyarrow as pa

MAGIC = b"\x89IOD\r\n\x1a\n"
SYNC = b"IODC"
MAX_LEN = 1 << 30
MAX_ROWS = 4194304
MAJOR = 1

CT_HEADER, CT_DEVICES, CT_PROCESSES, CT_PATHS, CT_EVENTS, CT_LOSSES, CT_END, CT_FOOTER, CT_CGROUPS = range(1, 10)
CHUNK_NAMES = {1: "header", 2: "devices", 3: "processes", 4: "paths", 5: "events", 6: "losses",
               7: "end", 8: "footer", 9: "cgroups"}

# §4.2: column id -> (field, stored type bits, nullable)
COLUMNS = {
    1: ("timestamp_ns", 64, False), 2: ("dev", 32, False), 3: ("sector", 64, False),
    4: ("bytes", 32, False), 5: ("op", 8, False), 6: ("flags", 8, False), 7: ("pid", 32, False),
    8: ("tid", 32, False), 9: ("path_id", 32, False), 10: ("queue_ns", 64, True),
    11: ("latency_ns", 64, False), 12: ("error", 16, False), 13: ("cpu", 16, False),
    14: ("syscall", 16, True), 15: ("dirtier_pid", 32, True), 16: ("cgroup_id", 64, False),
    17: ("upper_dev", 32, True), 18: ("upper_timestamp_ns", 64, True),
}
FIELDS = [COLUMNS[c][0] for c in sorted(COLUMNS)]

OPS = {0: "read", 1: "write", 2: "flush", 3: "discard", 4: "secure_erase", 5: "write_zeroes", 6: "other"}
PATH_KINDS = {0: "unknown", 1: "file", 2: "metadata", 3: "journal", 4: "swap", 5: "raw_device", 6: "flush", 7: "discard"}
LOSS_REASONS = {0: "unspecified", 1: "ring_full", 2: "inflight_full", 3: "evicted", 4: "writer_behind",
                5: "nested", 6: "completion_not_traced"}
RUNTIMES = {0: "none", 1: "docker", 2: "containerd", 3: "crio", 4: "podman", 5: "lxc", 6: "kubernetes"}
SYSCALLS = {1: "read", 2: "write", 3: "pread64", 4: "pwrite64", 5: "readv", 6: "writev", 7: "preadv",
            8: "pwritev", 9: "io_submit", 10: "io_uring_enter", 11: "fsync", 12: "fdatasync",
            13: "sync_file_range", 14: "sync", 15: "page_fault", 16: "readahead", 17: "writeback",
            18: "journal", 19: "openat", 20: "copy_file_range", 21: "fallocate", 22: "msync",
            23: "getdents64", 24: "execve"}

# §4.4: codes 0x8000 + N name x86_64 system call N. The spec does not list the names (it points at
# format/src/syscalls.rs); this is the kernel's arch/x86/entry/syscalls/syscall_64.tbl up to 469
# ("-": a number without a system call).
X86_64_SYSCALLS = (
    "read write open close stat fstat lstat poll lseek mmap mprotect munmap brk rt_sigaction "
    "rt_sigprocmask rt_sigreturn ioctl pread64 pwrite64 readv writev access pipe select "
    "sched_yield mremap msync mincore madvise shmget shmat shmctl dup dup2 pause nanosleep "
    "getitimer alarm setitimer getpid sendfile socket connect accept sendto recvfrom sendmsg "
    "recvmsg shutdown bind listen getsockname getpeername socketpair setsockopt getsockopt "
    "clone fork vfork execve exit wait4 kill uname semget semop semctl shmdt msgget msgsnd "
    "msgrcv msgctl fcntl flock fsync fdatasync truncate ftruncate getdents getcwd chdir fchdir "
    "rename mkdir rmdir creat link unlink symlink readlink chmod fchmod chown fchown lchown "
    "umask gettimeofday getrlimit getrusage sysinfo times ptrace getuid syslog getgid setuid "
    "setgid geteuid getegid setpgid getppid getpgrp setsid setreuid setregid getgroups "
    "setgroups setresuid getresuid setresgid getresgid getpgid setfsuid setfsgid getsid capget "
    "capset rt_sigpending rt_sigtimedwait rt_sigqueueinfo rt_sigsuspend sigaltstack utime mknod "
    "uselib personality ustat statfs fstatfs sysfs getpriority setpriority sched_setparam "
    "sched_getparam sched_setscheduler sched_getscheduler sched_get_priority_max "
    "sched_get_priority_min sched_rr_get_interval mlock munlock mlockall munlockall vhangup "
    "modify_ldt pivot_root _sysctl prctl arch_prctl adjtimex setrlimit chroot sync acct "
    "settimeofday mount umount2 swapon swapoff reboot sethostname setdomainname iopl ioperm "
    "create_module init_module delete_module get_kernel_syms query_module quotactl nfsservctl "
    "getpmsg putpmsg afs_syscall tuxcall security gettid readahead setxattr lsetxattr fsetxattr "
    "getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr removexattr lremovexattr "
    "fremovexattr tkill time futex sched_setaffinity sched_getaffinity set_thread_area io_setup "
    "io_destroy io_getevents io_submit io_cancel get_thread_area lookup_dcookie epoll_create "
    "epoll_ctl_old epoll_wait_old remap_file_pages getdents64 set_tid_address restart_syscall "
    "semtimedop fadvise64 timer_create timer_settime timer_gettime timer_getoverrun "
    "timer_delete clock_settime clock_gettime clock_getres clock_nanosleep exit_group "
    "epoll_wait epoll_ctl tgkill utimes vserver mbind set_mempolicy get_mempolicy mq_open "
    "mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr kexec_load waitid add_key "
    "request_key keyctl ioprio_set ioprio_get inotify_init inotify_add_watch inotify_rm_watch "
    "migrate_pages openat mkdirat mknodat fchownat futimesat newfstatat unlinkat renameat "
    "linkat symlinkat readlinkat fchmodat faccessat pselect6 ppoll unshare set_robust_list "
    "get_robust_list splice tee sync_file_range vmsplice move_pages utimensat epoll_pwait "
    "signalfd timerfd_create eventfd fallocate timerfd_settime timerfd_gettime accept4 "
    "signalfd4 eventfd2 epoll_create1 dup3 pipe2 inotify_init1 preadv pwritev rt_tgsigqueueinfo "
    "perf_event_open recvmmsg fanotify_init fanotify_mark prlimit64 name_to_handle_at "
    "open_by_handle_at clock_adjtime syncfs sendmmsg setns getcpu process_vm_readv "
    "process_vm_writev kcmp finit_module sched_setattr sched_getattr renameat2 seccomp "
    "getrandom memfd_create kexec_file_load bpf execveat userfaultfd membarrier mlock2 "
    "copy_file_range preadv2 pwritev2 pkey_mprotect pkey_alloc pkey_free statx io_pgetevents "
    "rseq - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - "
    "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - "
    "- pidfd_send_signal io_uring_setup io_uring_enter io_uring_register open_tree move_mount "
    "fsopen fsconfig fsmount fspick pidfd_open clone3 close_range openat2 pidfd_getfd "
    "faccessat2 process_madvise epoll_pwait2 mount_setattr quotactl_fd landlock_create_ruleset "
    "landlock_add_rule landlock_restrict_self memfd_secret process_mrelease futex_waitv "
    "set_mempolicy_home_node cachestat fchmodat2 map_shadow_stack futex_wake futex_wait "
    "futex_requeue statmount listmount lsm_get_self_attr lsm_set_self_attr lsm_list_modules "
    "mseal setxattrat getxattrat listxattrat removexattrat open_tree_attr file_getattr "
    "file_setattr "
).split()


def syscall_name(code):
    """§4.4: a syscall code as shown; None for null."""
    if code is None:
        return None
    if code in SYSCALLS:
        return SYSCALLS[code]
    n = code - 0x8000
    if 0 <= n < len(X86_64_SYSCALLS) and X86_64_SYSCALLS[n] != "-":
        return X86_64_SYSCALLS[n]
    return "syscall#%d" % code


_zstd = pa.Codec("zstd")
M64 = (1 << 64) - 1


class Damage(Exception):
    """A payload that does not decode (§6.3)."""


# ---------------------------------------------------------------- primitives (§1)

class Buf:
    """A cursor over bytes; every read checks its bounds."""
    __slots__ = ("b", "p", "end")

    def __init__(self, b, p=0, end=None):
        self.b, self.p = b, p
        self.end = len(b) if end is None else end

    def left(self):
        return self.end - self.p

    def varint(self):
        v = shift = 0
        for i in range(10):
            if self.p >= self.end:
                raise Damage("varint runs past the end")
            c = self.b[self.p]
            self.p += 1
            if i == 9 and c > 1:
                raise Damage("varint overflows 64 bits")
            v |= (c & 0x7F) << shift
            if c < 0x80:
                return v
            shift += 7
        raise Damage("varint longer than 10 bytes")

    def take(self, n):
        if n > self.end - self.p:
            raise Damage("length %d runs past the end" % n)
        s = self.b[self.p:self.p + n]
        self.p += n
        return bytes(s)

    def u8(self):
        return self.take(1)[0]

    def bytes_(self):
        return self.take(self.varint())

    def string(self):
        return self.bytes_().decode("utf-8", "replace")

    def sub(self):
        """bytes(entry) as a cursor of its own."""
        n = self.varint()
        if n > self.end - self.p:
            raise Damage("entry length %d runs past the end" % n)
        s = Buf(self.b, self.p, self.p + n)
        self.p += n
        return s


def unzigzag(u):
    return (u >> 1) ^ -(u & 1)


def crc32(b):
    return zlib.crc32(b) & 0xFFFFFFFF


# ---------------------------------------------------------------- chunk payloads (§3)

def parse_tlv(payload):
    out = []
    b = Buf(payload)
    while b.left():
        tag = b.varint()
        out.append((tag, b.bytes_()))
    return out


def parse_header(payload):
    h = {"wall_clock_ns": None, "monotonic_ns": None, "hostname": None, "kernel_release": None,
         "tool_version": None, "recorder_argv": None, "command_argv": None, "metadata": []}
    for tag, v in parse_tlv(payload):
        if tag == 1:
            h["wall_clock_ns"] = struct.unpack("<q", v)[0] if len(v) == 8 else None
        elif tag == 2:
            h["monotonic_ns"] = struct.unpack("<Q", v)[0] if len(v) == 8 else None
        elif tag in (3, 4, 5):
            h[{3: "hostname", 4: "kernel_release", 5: "tool_version"}[tag]] = v.decode("utf-8", "replace")
        elif tag in (6, 7):
            b = Buf(v)
            h["recorder_argv" if tag == 6 else "command_argv"] = [b.string() for _ in range(b.varint())]
        elif tag == 8:
            b = Buf(v)
            h["metadata"].append((b.string(), b.string()))
    return h


def parse_end(payload):
    e = {}
    names = {1: "end_monotonic_ns", 2: "events", 3: "lost_events", 4: "command_exit_status"}
    for tag, v in parse_tlv(payload):
        if tag in names:
            x = Buf(v).varint()
            e[names[tag]] = unzigzag(x) if tag == 4 else x
    return e


def parse_device(b):
    d = {"dev": b.varint(), "name": b.string()}
    flags = b.varint()
    d["partition"] = bool(flags & 1)
    d["bio_based"] = bool(flags & 2)
    d["partition_of"] = b.varint() if flags & 1 else None
    d["sector_size"] = b.varint()
    d["start_sector"] = b.varint()
    d["label"] = b.string() if b.left() else ""
    d["stacked_on"] = [b.varint() for _ in range(b.varint())] if b.left() else []
    return d


def parse_process(b):
    p = {"tid": b.varint(), "pid": b.varint(), "comm": b.bytes_(), "cgroup_id": b.varint()}
    p["args"] = b.bytes_() if b.left() else b""
    return p


def parse_path(b):
    p = {"path_id": b.varint(), "dev": b.varint(), "inode": b.varint()}
    k = b.u8()
    p["kind"] = PATH_KINDS.get(k, "unknown")
    f = b.u8()
    p["truncated"] = bool(f & 1)
    p["deleted"] = bool(f & 2)
    p["path"] = b.bytes_()
    p["generation"] = b.varint() if b.left() else None
    return p


def parse_loss(b):
    cpu = b.varint()
    r = b.u8()
    return {"cpu": cpu, "reason": LOSS_REASONS.get(r, "unspecified"), "count": b.varint(),
            "start_ns": b.varint(), "end_ns": b.varint()}


def parse_cgroup(b):
    c = {"cgroup_id": b.varint(), "path": b.string()}
    r = b.u8()
    c["runtime"] = RUNTIMES.get(r, "none")
    c["monitor"] = bool(b.u8() & 1)
    for k in ("container_id", "pod_uid", "qos", "unit"):
        c[k] = b.string()
    return c


TABLES = {CT_DEVICES: ("device", parse_device), CT_PROCESSES: ("process", parse_process),
          CT_PATHS: ("path", parse_path), CT_LOSSES: ("loss", parse_loss), CT_CGROUPS: ("cgroup", parse_cgroup)}


def parse_table(ctype, payload, records):
    kind, fn = TABLES[ctype]
    b = Buf(payload)
    out = []
    while b.left():
        out.append(fn(b.sub()))
    if len(out) != records:
        raise Damage("%d entries, header says %d" % (len(out), records))
    return kind, out


def parse_footer(payload):
    if len(payload) < 16 or payload[-8:] != b"IODFOOT1":
        raise Damage("footer without trailer")
    b = Buf(payload, 0, len(payload) - 16)
    n = b.varint()
    entries, off = [], 0
    for _ in range(n):
        off += b.varint()
        entries.append({"offset": off, "type": b.varint(), "records": b.varint(),
                        "first_timestamp_ns": b.varint(), "span_ns": b.varint()})
    return {"entries": entries, "footer_offset": struct.unpack("<Q", payload[-16:-8])[0]}


# ---------------------------------------------------------------- event segments (§4)

def decode_block(b, rows, bits):
    """A column block (§4.3) -> (transform, shift, start, present mask or None/'null', stored values)."""
    validity = b.u8()
    if validity == 1:
        return None
    if validity == 0:
        mask, m = None, rows
    elif validity == 2:
        bm = np.frombuffer(b.take((rows + 7) // 8), dtype=np.uint8)
        mask = np.unpackbits(bm, bitorder="little")[:rows].astype(bool)
        m = int(mask.sum())
    else:
        raise Damage("validity %d" % validity)
    transform = b.u8()
    if transform > 3:
        raise Damage("transform %d" % transform)
    shift = b.u8()
    if shift > 63:
        raise Damage("shift %d" % shift)
    start = b.varint() if transform == 1 else 0
    enc = b.u8()
    if enc == 0:
        s = np.full(m, b.varint(), dtype=np.uint64)
    elif enc == 1:
        k = b.varint()
        if not 1 <= k <= 256:
            raise Damage("dict of %d" % k)
        d = np.array([b.varint() for _ in range(k)], dtype=np.uint64)
        idx = np.frombuffer(b.take(m), dtype=np.uint8)
        if m and int(idx.max()) >= k:
            raise Damage("dict index out of range")
        s = d[idx]
    elif enc == 2:
        base = b.varint()
        w = b.u8()
        if not 1 <= w <= 8:
            raise Damage("plane width %d" % w)
        s = np.zeros(m, dtype=np.uint64)
        for j in range(w):
            s |= np.frombuffer(b.take(m), dtype=np.uint8).astype(np.uint64) << np.uint64(8 * j)
        s = s + np.uint64(base)          # wraps modulo 2^64
    else:
        raise Damage("encoding %d" % enc)
    if b.left():
        raise Damage("%d bytes left in column block" % b.left())
    return transform, shift, start, mask, s


def shl(a, shift):
    return a << np.uint64(shift) if shift else a


def apply_plain(blk, rows, cid):
    """Undo transform none/delta; returns a list of python ints/None, length rows."""
    transform, shift, start, mask, s = blk
    if transform == 0:
        v = shl(s, shift)
    elif transform == 1:
        # unzigzag in uint64: (s >> 1) ^ -(s & 1)
        z = (s >> np.uint64(1)) ^ (np.uint64(0) - (s & np.uint64(1)))
        v = np.cumsum(shl(z, shift), dtype=np.uint64) + np.uint64(start)
    else:
        raise Damage("transform %d not allowed for column %d" % (transform, cid))
    return scatter(v.tolist(), mask, rows)


def scatter(vals, mask, rows):
    if mask is None:
        return vals
    out = [None] * rows
    it = iter(vals)
    for i in np.flatnonzero(mask).tolist():
        out[i] = next(it)
    return out


def apply_seq(blk, rows, dev, nbytes, path_id):
    transform, shift, start, mask, s = blk
    if mask is not None:
        raise Damage("sector column with nulls")
    if transform in (0, 1):
        return apply_plain(blk, rows, 3)
    z = [unzigzag(x) << shift for x in s.tolist()]
    out = [0] * rows
    prev_end = {}
    for i in range(rows):
        key = dev[i] if transform == 2 else (dev[i], path_id[i])
        v = (prev_end.get(key, 0) + z[i]) & M64
        out[i] = v
        prev_end[key] = (v + (nbytes[i] + 511) // 512) & M64
    return out


def decode_segment(raw, records):
    b = Buf(raw)
    rows = b.varint()
    if rows != records or rows > MAX_ROWS:
        raise Damage("segment rows %d, header records %d" % (rows, records))
    ncols = b.varint()
    blocks = {}
    for _ in range(ncols):
        cid = b.varint()
        blk = b.sub()
        if cid in blocks:
            raise Damage("column %d twice" % cid)
        if cid in COLUMNS:
            blocks[cid] = decode_block(blk, rows, COLUMNS[cid][1])
    if b.left():
        raise Damage("bytes after the last column")
    cols = {}
    for cid, (name, bits, nullable) in COLUMNS.items():
        if cid == 3:
            continue
        if cid not in blocks:
            cols[name] = [None if nullable else 0] * rows
        elif blocks[cid] is None:
            if not nullable:
                raise Damage("column %d all null but not nullable" % cid)
            cols[name] = [None] * rows
        else:
            cols[name] = apply_plain(blocks[cid], rows, cid)
    if 3 not in blocks:
        cols["sector"] = [0] * rows
    elif blocks[3] is None:
        raise Damage("sector column all null")
    else:
        cols["sector"] = apply_seq(blocks[3], rows, cols["dev"], cols["bytes"], cols["path_id"])
    for cid, (name, bits, nullable) in COLUMNS.items():
        if bits < 64 and cid in blocks and blocks[cid] is not None:
            lim = 1 << bits
            for x in cols[name]:
                if x is not None and x >= lim:
                    raise Damage("column %d value %d larger than u%d" % (cid, x, bits))
    names = FIELDS
    return [dict(zip(names, t)) for t in zip(*(cols[n] for n in names))], sorted(blocks)


def decompress_events(stored, raw_len):
    """§4.5: a framed payload decompresses whole to the segment; check the index against it."""
    raw = _zstd.decompress(stored, decompressed_size=raw_len, asbytes=True)
    if len(stored) >= 8 and struct.unpack_from("<I", stored)[0] == 0x184D2A5E:
        n = struct.unpack_from("<I", stored, 4)[0]
        content = stored[8:8 + n]
        if content[:4] == b"IODX":
            b = Buf(content, 4)
            b.varint()  # rows (checked against the segment by decode_segment)
            frames = [(b.varint(), b.varint(), b.varint()) for _ in range(b.varint())]
            if sum(f[1] for f in frames) != len(stored) - 8 - n or sum(f[2] for f in frames) != raw_len:
                raise Damage("column index does not add up")
            # each frame decompresses on its own to its column (the per-column path of §4.5)
            pos, rpos = 8 + n, 0
            for i, (cid, sl, rl) in enumerate(frames):
                part = _zstd.decompress(stored[pos:pos + sl], decompressed_size=rl, asbytes=True)
                if part != raw[rpos:rpos + rl]:
                    raise Damage("column frame %d differs from the whole" % i)
                p = Buf(part)
                if i == 0:
                    p.varint(), p.varint()
                if p.varint() != cid:
                    raise Damage("column frame %d names another column" % i)
                pos += sl
                rpos += rl
    return raw


# ---------------------------------------------------------------- the walk (§2, §6)

def read_header_at(data, off):
    """A valid chunk header at off (§6.2) -> tuple, else None."""
    if off + 32 > len(data) or data[off:off + 4] != SYNC:
        return None
    if crc32(data[off:off + 28]) != struct.unpack_from("<I", data, off + 28)[0]:
        return None
    ctype, flags, stored, raw, records, _res, pcrc = struct.unpack_from("<HHIIIII", data, off + 4)
    if stored > MAX_LEN or raw > MAX_LEN or (not flags & 1 and stored != raw):
        return None
    return ctype, flags, stored, raw, records, pcrc


def read_records(path):
    with open(path, "rb") as f:
        data = f.read()
    yield from read_bytes(data)


def read_bytes(data):
    n = len(data)
    if n < 16:
        if MAGIC.startswith(data[:8]) and n <= 8 or (n > 8 and data[:8] == MAGIC):
            yield "signature", {"major": None, "minor": None, "ok": False}
            yield "truncated", {"offset": 0, "expected": 16, "present": n}
            return
        raise ValueError("not an iodump trace (%d bytes)" % n)
    major, minor = struct.unpack_from("<HH", data, 8)
    sig_ok = data[:8] == MAGIC and crc32(data[:12]) == struct.unpack_from("<I", data, 12)[0]
    if not sig_ok:
        h = read_header_at(data, 16)
        if h is None or h[0] != CT_HEADER:
            raise ValueError("not an iodump trace")
        major, minor = 1, 0
        yield "damage", {"what": "signature", "offset": 0}
    if major > MAJOR:
        raise ValueError("format version %d.%d, this reader reads %d.x" % (major, minor, MAJOR))
    yield "signature", {"major": major, "minor": minor, "ok": sig_ok}

    off = 16
    seen_header = False
    walked = []    # (offset, type, records, first_ts, span) of every valid chunk header, for the footer check
    while off < n:
        h = read_header_at(data, off)
        if h is None:
            if data[off:off + 8] == MAGIC and off + 16 <= n and \
                    crc32(data[off:off + 12]) == struct.unpack_from("<I", data, off + 12)[0]:
                yield "another_trace", {"offset": off, "bytes_not_read": n - off}
                return
            if n - off < 32 and data[off:off + 4] == SYNC[:n - off][:4] or (n - off < 32 and data[off:off + 4] == SYNC):
                # a chunk header cut by the end of the file
                yield "truncated", {"offset": off, "expected": 32, "present": n - off}
                return
            # scan for the next valid header (or signature)
            nxt = off + 1
            while True:
                i = data.find(SYNC, nxt)
                j = data.find(MAGIC, nxt, i if i >= 0 else n)
                if 0 <= j and (i < 0 or j < i) and j + 16 <= n and \
                        crc32(data[j:j + 12]) == struct.unpack_from("<I", data, j + 12)[0]:
                    yield "damage", {"what": "skipped", "offset": off, "length": j - off}
                    yield "another_trace", {"offset": j, "bytes_not_read": n - j}
                    return
                if i < 0:
                    yield "damage", {"what": "skipped", "offset": off, "length": n - off}
                    return
                if read_header_at(data, i) is not None:
                    break
                nxt = i + 1
            yield "damage", {"what": "skipped", "offset": off, "length": i - off}
            off = i
            continue
        ctype, flags, stored, raw_len, records, pcrc = h
        body = off + 32
        if body + stored > n:
            yield "truncated", {"offset": off, "expected": 32 + stored, "present": n - off}
            return
        payload = data[body:body + stored]
        name = CHUNK_NAMES.get(ctype, "unknown")
        if ctype != CT_FOOTER:
            # an events chunk's time range is known only once decoded (None: not checked)
            walked.append([off, ctype, records, None, None] if ctype == CT_EVENTS else [off, ctype, records, 0, 0])
        if ctype == CT_HEADER:
            if seen_header:
                yield "another_trace", {"offset": off, "bytes_not_read": n - off}
                return
            seen_header = True
        if crc32(payload) != pcrc:
            yield "damage", {"what": "payload_crc", "type": ctype, "chunk": name, "offset": off,
                             "expected_crc": pcrc, "actual_crc": crc32(payload), "records": records}
            off = body + stored
            continue
        try:
            if flags & 1 and ctype not in (CT_HEADER, CT_END, CT_FOOTER):
                if ctype == CT_EVENTS:
                    payload = decompress_events(payload, raw_len)
                elif ctype in TABLES:
                    payload = _zstd.decompress(payload, decompressed_size=raw_len, asbytes=True)
            if ctype == CT_HEADER:
                yield "header", parse_header(payload)
            elif ctype in TABLES:
                kind, entries = parse_table(ctype, payload, records)
                for e in entries:
                    yield kind, e
            elif ctype == CT_EVENTS:
                events, cols = decode_segment(payload, records)
                if events:
                    ts = [e["timestamp_ns"] for e in events]
                    walked[-1][3:] = [min(ts), max(ts) - min(ts)]
                yield "segment", {"offset": off, "rows": records, "columns": cols, "events": events}
            elif ctype == CT_END:
                yield "end", parse_end(payload)
            elif ctype == CT_FOOTER:
                ft = parse_footer(payload)
                ft["offset"] = off
                # §3.7: a reader that uses the index must check it against the chunk headers
                idx = [[x["offset"], x["type"], x["records"], x["first_timestamp_ns"], x["span_ns"]]
                       for x in ft["entries"]]
                ft["consistent"] = ft["footer_offset"] == off and len(idx) == len(walked) and all(
                    a[:3] == b[:3] and (b[3] is None or a[3:] == b[3:]) for a, b in zip(idx, walked))
                yield "footer", ft
                if not ft["consistent"]:
                    yield "damage", {"what": "footer_inconsistent", "type": ctype, "chunk": name, "offset": off}
            else:
                yield "unknown_chunk", {"type": ctype, "offset": off, "stored_len": stored}
        except (Damage, ValueError, OSError, pa.ArrowException, struct.error) as e:
            yield "damage", {"what": "decode", "type": ctype, "chunk": name, "offset": off,
                             "error": str(e), "records": records}
        off = body + stored


# ---------------------------------------------------------------- tables and resolution (§3.3, §8)

class Recording:
    """One trace, or the parts of one recording read end to end (§8)."""

    def __init__(self, paths):
        if isinstance(paths, str):
            paths = [paths]
        self.paths = paths
        self.header = None
        self.signature = None
        self.devices, self.paths_table, self.cgroups = {}, {}, {}
        self.processes = {}      # tid -> latest entry
        self.first_process = {}  # tid -> first entry (for events before any entry, §3.3)
        self.losses = []
        self.ends = []
        self.problems = []
        self.segments = 0
        self.has_cgroups = False
        self._events = []        # (segment events, snapshot of nothing: resolved in events())
        self._read()

    def _read(self):
        pending = []  # segments whose events have a tid with no entry yet
        for path in self.paths:
            ended = False
            for kind, item in read_records(path):
                if kind == "signature":
                    if self.signature is None:
                        self.signature = item
                elif kind == "header":
                    if self.header is None:
                        self.header = item
                elif kind == "device":
                    self.devices[item["dev"]] = item
                elif kind == "process":
                    self.processes[item["tid"]] = item
                    self.first_process.setdefault(item["tid"], item)
                elif kind == "path":
                    self.paths_table[item["path_id"]] = item
                elif kind == "cgroup":
                    self.has_cgroups = True
                    self.cgroups[item["cgroup_id"]] = item
                elif kind == "loss":
                    self.losses.append(item)
                elif kind == "end":
                    self.ends.append(item)
                    ended = True
                elif kind == "segment":
                    self.segments += 1
                    procs = {}
                    for e in item["events"]:
                        t = e["tid"]
                        if t not in procs:
                            procs[t] = self.processes.get(t)
                        e["_proc"] = procs[t]
                        # the leader's entry, used only if the tid has no entry anywhere (below)
                        e["_leader"] = self.processes.get(e["pid"])
                        e["_path"] = self.paths_table.get(e["path_id"]) if e["path_id"] else None
                    self._events.append(item["events"])
                elif kind in ("damage", "truncated", "another_trace"):
                    item = dict(item, kind=kind, file=path)
                    self.problems.append(item)
        self.finished = bool(self.ends) and len(self.ends) == len(self.paths)
        # events before any entry of their tid: the first entry applies (§3.3)
        for seg in self._events:
            for e in seg:
                if e["_proc"] is None:
                    e["_proc"] = self.first_process.get(e["tid"])
                if e["_proc"] is None:
                    # a thread without any entry shows its process: the entry of its leader
                    # (tid == pid), §3.3 (not in the spec when this was written: learnt from
                    # iodump with a damaged processes chunk, then added to the spec)
                    e["_proc"] = e["_leader"] or self.first_process.get(e["pid"])
                del e["_leader"]
                if e["_path"] is None and e["path_id"]:
                    e["_path"] = self.paths_table.get(e["path_id"])

    def events(self):
        """Events, segment by segment in file order, each with comm/args/path resolved."""
        for seg in self._events:
            yield from seg


def order_parts(paths):
    """§8: files with the same iodump.recording, ordered by iodump.part."""
    keyed = []
    for p in paths:
        meta = {}
        for kind, item in read_records(p):
            if kind == "header":
                meta = dict(item["metadata"])
                break
        keyed.append((meta.get("iodump.recording"), int(meta.get("iodump.part", "0")), p))
    recs = {k[0] for k in keyed}
    if len(keyed) > 1 and (None in recs or len(recs) > 1):
        raise ValueError("files are not the parts of one recording")
    return [p for _, _, p in sorted(keyed)]


# ---------------------------------------------------------------- CLI

def esc_bytes(b):
    """Lossless text for bytes that need not be UTF-8: backslash doubled, bad bytes \\xNN."""
    out = []
    i = 0
    s = b.decode("utf-8", "surrogateescape")
    for ch in s:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append("\\x%02x" % (o - 0xDC00))
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def event_json(e):
    d = {k: e[k] for k in FIELDS}
    p = e.get("_proc")
    d["comm"] = esc_bytes(p["comm"]) if p else None
    d["args"] = esc_bytes(p["args"]) if p and p["args"] else None
    pa_ = e.get("_path")
    d["path"] = esc_bytes(pa_["path"]) if pa_ else None
    return d


def main(argv):
    if not argv:
        print("usage: iod.py FILE [PART...]", file=sys.stderr)
        return 2
    try:
        if len(argv) == 1 and os.path.isdir(argv[0]):
            argv = [os.path.join(argv[0], f) for f in sorted(os.listdir(argv[0]))
                    if re.match(r"^iodump-\d{8}T\d{6}\.\d{3}Z-\d{6}\.iod$", f)]
        paths = order_parts(argv) if len(argv) > 1 else argv
        rec = Recording(paths)
    except (ValueError, OSError) as e:
        print("iod.py: %s" % e, file=sys.stderr)
        return 1
    out = sys.stdout
    for e in rec.events():
        out.write(json.dumps(event_json(e)) + "\n")
    for p in rec.problems:
        print("iod.py: %s" % json.dumps(p), file=sys.stderr)
    return 1 if rec.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
