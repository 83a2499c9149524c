"""A writer that renames its file while it writes (tests/paths.rs, renames_are_named_at_once).

    python3 renamer.py DIR ROUNDS

Writes 4 KiB with O_DIRECT about every millisecond into one file and, after every 40 writes,
changes its name, in turn: rename(2) to the next name, renameat2(2) with RENAME_EXCHANGE
against a second file (which has the other name after it), and a rename of the directory
the file is in. After each change it prints the CLOCK_MONOTONIC time at which the call had
returned and the file's new path, one `NS PATH` line each: every I/O of the file that
entered the block layer after that time must carry that path. Last, it unlinks the file and
writes 40 more times: `NS (deleted) PATH`.
"""
import ctypes
import mmap
import os
import sys
import time

RENAME_EXCHANGE = 2
SYS_RENAMEAT2 = 316  # x86_64
AT_FDCWD = -100
libc = ctypes.CDLL(None, use_errno=True)


def renameat2(old, new, flags):
    r = libc.syscall(SYS_RENAMEAT2, AT_FDCWD, old.encode(), AT_FDCWD, new.encode(), flags)
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def main():
    base, rounds = sys.argv[1], int(sys.argv[2])
    buf = mmap.mmap(-1, 4096)
    buf.write(b"x" * 4096)
    d = os.path.join(base, "d0")
    os.mkdir(d)
    path = os.path.join(d, "seg-0")
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
    other = os.path.join(d, "other")
    with open(other, "wb") as f:
        f.write(b"o" * 4096)
    k = 0

    def burst():
        nonlocal k
        for _ in range(40):
            os.pwritev(fd, [buf], (k % 256) * 4096)
            k += 1
            time.sleep(0.001)

    out = []
    burst()
    for r in range(rounds):
        step = r % 3
        if step == 0:
            new = os.path.join(d, "seg-%d" % (r + 1))
            os.rename(path, new)
            path = new
        elif step == 1:
            renameat2(path, other, RENAME_EXCHANGE)
            path, other = other, path
        else:
            nd = os.path.join(base, "d%d" % (r + 1))
            os.rename(d, nd)
            path = os.path.join(nd, os.path.basename(path))
            other = os.path.join(nd, os.path.basename(other))
            d = nd
        out.append("%d %s" % (time.clock_gettime_ns(time.CLOCK_MONOTONIC), path))
        burst()
    os.unlink(path)
    out.append("%d (deleted) %s" % (time.clock_gettime_ns(time.CLOCK_MONOTONIC), path))
    burst()
    os.close(fd)
    print("\n".join(out))


main()
