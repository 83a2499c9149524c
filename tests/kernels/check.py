#!/usr/bin/env python3
"""Checks one `iodump record` run of the kernel matrix against the device's own counters.

Called by guest.sh after each recording; prints one line per check, `PASS NAME DETAIL` or
`FAIL NAME DETAIL`, on stdout (guest.sh appends them to results.txt). NAME is PREFIX.CHECK.

  check.py --bin IODUMP --prefix vda-none.randread --dev vda --stat1 F --stat2 F
           --stderr F --rc N --trace T.iod --kind randread|write
           --file ROLE=PATH[:PIDFILE] ... [--min-ios N]

--stat1/--stat2 hold /sys/block/DEV/stat taken before iodump started and after it exited
(Documentation/block/stat.rst: fields 1, 5, 12, 15 are reads, writes, discards, flushes
completed; 9 is I/Os in flight). Each --file is a test file whose extents (filefrag) give the
sectors that are I/O "on the file"; PIDFILE, when given, holds the pid of the process that wrote
(dd) or read it.
"""

import argparse
import json
import os
import re
import subprocess
import sys

SHARE = 0.99  # share of the I/O on a test file that must carry its path / its process


def out(ok, name, detail):
    print(f"{'PASS' if ok else 'FAIL'} {name} {detail}", flush=True)


def read_stat(path):
    f = [int(x) for x in open(path).read().split()]
    f += [0] * (17 - len(f))  # 5.10 has 15 fields (no flushes before 5.5: 11)
    return {"r": f[0], "w": f[4], "d": f[11], "f": f[14], "inflight": f[8]}


def extents(path):
    """Sector ranges [start, end) of PATH on its device, in 512-byte sectors."""
    p = subprocess.run(["filefrag", "-v", "-b512", path], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"filefrag {path}: {p.stderr.strip()}")
    ranges = []
    # "   0:        0..   16383:      34816..     51199:  16384:             last,eof"
    for m in re.finditer(r"^\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.\s*(\d+):", p.stdout, re.M):
        ranges.append((int(m.group(1)), int(m.group(2)) + 1))
    if not ranges:
        raise RuntimeError(f"filefrag {path}: no extents in {p.stdout!r}")
    return ranges


def overlaps(ev, ranges):
    s = ev["sector"]
    e = s + max(ev["bytes"], 1) // 512
    return any(s < b and a < max(e, s + 1) for a, b in ranges)


def inside(ev, ranges):
    s = ev["sector"]
    e = s + ev["bytes"] // 512
    return any(a <= s and e <= b for a, b in ranges)


def last_error(stderr):
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    for l in reversed(lines):
        if re.search(r"error|fail|denied|invalid|unknown|not ", l, re.I):
            return l
    return lines[-1] if lines else "(no output on stderr)"


def pct(n, d):
    return f"{n}/{d} ({100.0 * n / d:.1f}%)" if d else f"{n}/0"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--stat1", required=True)
    ap.add_argument("--stat2", required=True)
    ap.add_argument("--stderr", required=True)
    ap.add_argument("--rc", type=int, required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--kind", choices=["randread", "write"], required=True)
    ap.add_argument("--file", action="append", default=[])
    ap.add_argument("--min-ios", type=int, default=1)
    a = ap.parse_args()
    P = a.prefix
    stderr = open(a.stderr, errors="replace").read()

    # --- the recording itself
    if a.rc != 0 or not os.path.exists(a.trace):
        out(False, f"{P}.record", f"iodump exited {a.rc}: {last_error(stderr)}")
        return
    info_p = subprocess.run([a.bin, "info", "--json", a.trace], capture_output=True, text=True)
    try:
        info = json.loads(info_p.stdout.splitlines()[0])
    except (IndexError, ValueError):
        out(False, f"{P}.record", f"iodump info failed ({info_p.returncode}): {last_error(info_p.stderr)}")
        return
    intact = info_p.returncode == 0 and info.get("finished") and not info.get("damaged")
    out(intact, f"{P}.record",
        f"exit 0, trace {info.get('file_bytes')} bytes, finished={info.get('finished')} "
        f"damaged={len(info.get('damaged') or [])}")
    ex = subprocess.run([a.bin, "export", a.trace, "--format", "jsonl", "-o", "-"],
                        capture_output=True, text=True)
    if ex.returncode != 0:
        out(False, f"{P}.export", f"iodump export exited {ex.returncode}: {last_error(ex.stderr)}")
        return
    evs = [json.loads(l) for l in ex.stdout.splitlines() if l.strip()]
    with open(a.trace + ".jsonl", "w") as f:
        f.write(ex.stdout)

    devinfo = [d for d in info.get("devices", []) if d.get("name") == a.dev]
    bio_based = bool(devinfo and devinfo[0].get("bio_based"))
    majmin = devinfo[0]["dev"] if devinfo else None

    # --- every completed I/O of the device is in the trace
    s1, s2 = read_stat(a.stat1), read_stat(a.stat2)
    d = {k: s2[k] - s1[k] for k in ("r", "w", "d", "f")}
    mine = [e for e in evs if e["dev"] == majmin]
    others = len(evs) - len(mine)
    by_op = {}
    for e in mine:
        by_op[e["op"]] = by_op.get(e["op"], 0) + 1
    t_rwd = by_op.get("read", 0) + by_op.get("write", 0) + by_op.get("discard", 0) + \
        by_op.get("write_zeroes", 0) + by_op.get("secure_erase", 0)
    stat_rwd = d["r"] + d["w"] + d["d"]
    ops = " ".join(f"{k}={v}" for k, v in sorted(by_op.items()))
    out(t_rwd == stat_rwd and others == 0 and majmin is not None, f"{P}.count",
        f"trace {t_rwd} (dev {a.dev}={majmin}; {ops}; other devices {others}) vs "
        f"/sys/block/{a.dev}/stat delta {stat_rwd} (reads {d['r']} writes {d['w']} "
        f"discards {d['d']}; in flight at start {s1['inflight']}, at end {s2['inflight']})")
    if not bio_based:
        out(by_op.get("flush", 0) == d["f"], f"{P}.flushes",
            f"trace flush events {by_op.get('flush', 0)} vs stat flushes {d['f']}")

    # --- losses
    lost = info.get("lost_events")
    out(lost == 0 and not info.get("losses"), f"{P}.lost",
        f"lost_events={lost} losses={info.get('losses')}")

    # --- the recorder's own summary line agrees with the trace and with the device
    m = re.search(r"^iodump: recorded (\d+) events in [\d.]+ s, lost (\d+)", stderr, re.M)
    k = re.search(r"^iodump: kernel counters: (.*)$", stderr, re.M)
    counters = dict(x.split("=", 1) for x in k.group(1).split()) if k else {}
    if not m:
        out(False, f"{P}.summary", "no 'iodump: recorded N events in S s, lost L' line on stderr")
    else:
        n, l = int(m.group(1)), int(m.group(2))
        unseen = stat_rwd - t_rwd
        ok = n == info.get("events") and l == lost and not (unseen > 0 and l == 0)
        why = "" if ok else (
            f" -- the device completed {unseen} I/O more than recorded but the summary says lost 0"
            if unseen > 0 and l == 0 else " -- disagrees with iodump info")
        out(ok, f"{P}.summary",
            f"'recorded {n} events, lost {l}' vs info events={info.get('events')} "
            f"lost={lost}; kernel no_start={counters.get('no_start', '?')} filtered={counters.get('filtered', '?')}{why}")

    # --- latency (emulator latencies under TCG: presence and plausibility only)
    lat = [e.get("latency_ns") for e in mine]
    bad = [x for x in lat if not isinstance(x, int) or x <= 0 or x > 60_000_000_000]
    srt = sorted(x for x in lat if isinstance(x, int))
    med = srt[len(srt) // 2] if srt else None
    out(bool(mine) and not bad, f"{P}.latency",
        f"{len(mine) - len(bad)}/{len(mine)} events with 0 < latency <= 60 s "
        f"(median {med} ns, max {srt[-1] if srt else None} ns)")
    if not bio_based and mine:
        q = [e for e in mine if isinstance(e.get("queue_ns"), int)
             and 0 <= e["queue_ns"] <= e.get("latency_ns", 0)]
        out(len(q) >= SHARE * len(mine), f"{P}.queue-time",
            f"{pct(len(q), len(mine))} events of request-based {a.dev} with 0 <= queue_ns <= latency")

    # --- the test files: paths, submitters, dirtiers
    for spec in a.file:
        role, rest = spec.split("=", 1)
        path, _, pidfile = rest.partition(":")
        path = os.path.realpath(path)
        pid = int(open(pidfile).read().split()[0]) if pidfile else None
        try:
            ranges = extents(path)
        except RuntimeError as err:
            out(False, f"{P}.{role}.path", str(err))
            continue
        on = [e for e in mine if overlaps(e, ranges) and e["op"] in ("read", "write")]
        want_op = "read" if a.kind == "randread" else "write"
        on_op = [e for e in on if e["op"] == want_op]
        size = os.path.getsize(path)
        nbytes = sum(e["bytes"] for e in on_op)
        enough = len(on_op) >= a.min_ios and (a.kind == "randread" or nbytes >= size)
        out(enough, f"{P}.{role}.ios",
            f"{len(on_op)} {want_op}s ({nbytes} bytes) on the file's sectors "
            f"(want >= {a.min_ios}{'' if a.kind == 'randread' else f', >= {size} bytes'})")
        with_path = [e for e in on if e.get("path") == path]
        seen = {}
        for e in on:
            if e.get("path") != path:
                seen[e.get("path")] = seen.get(e.get("path"), 0) + 1
        wrong = ", ".join(f"{k!r}x{v}" for k, v in sorted(seen.items(), key=lambda kv: -kv[1])[:3])
        out(on and len(with_path) >= SHARE * len(on), f"{P}.{role}.path",
            f"{pct(len(with_path), len(on))} I/Os on the file carry {path}"
            + (f"; others: {wrong}" if wrong else ""))
        named = [e for e in mine if e.get("path") == path]
        right = [e for e in named if inside(e, ranges)]
        out(named and len(right) >= SHARE * len(named), f"{P}.{role}.path-right",
            f"{pct(len(right), len(named))} I/Os labelled {path} lie in its extents")
        comms = {}
        for e in on_op:
            comms[e["comm"]] = comms.get(e["comm"], 0) + 1
        cs = ", ".join(f"{k}x{v}" for k, v in sorted(comms.items(), key=lambda kv: -kv[1])[:4])
        if a.kind == "randread":
            by = [e for e in on_op if e["comm"] == "fio"]
            out(on_op and len(by) >= SHARE * len(on_op), f"{P}.{role}.submitter",
                f"{pct(len(by), len(on_op))} direct reads submitted by comm fio ({cs})")
            sc = [e for e in on_op if e.get("syscall")]
            out(on_op and len(sc) >= SHARE * len(on_op), f"{P}.{role}.syscall",
                f"{pct(len(sc), len(on_op))} direct reads with a syscall "
                f"({', '.join(sorted({str(e.get('syscall')) for e in on_op})[:3])})")
        elif role == "fsync":
            # dd ... conv=fsync: the data goes out from dd's own fsync
            by = [e for e in on_op if e["pid"] == pid or e.get("dirtier_pid") == pid]
            out(on_op and len(by) >= SHARE * len(on_op), f"{P}.{role}.submitter",
                f"{pct(len(by), len(on_op))} writes submitted or dirtied by dd pid {pid} ({cs})")
        else:
            # dd without fsync, then sync -f: the flusher writes it back for dd
            by = [e for e in on_op if e.get("dirtier_pid") == pid]
            dts = {}
            for e in on_op:
                dts[e.get("dirtier_pid")] = dts.get(e.get("dirtier_pid"), 0) + 1
            ds = ", ".join(f"{k}x{v}" for k, v in sorted(dts.items(), key=lambda kv: -kv[1], )[:4])
            out(on_op and len(by) >= SHARE * len(on_op), f"{P}.{role}.dirtier",
                f"{pct(len(by), len(on_op))} writeback writes with dirtier_pid = dd pid {pid} "
                f"(submitters {cs}; dirtier_pid {ds})")


if __name__ == "__main__":
    try:
        main()
    except Exception as err:  # a broken check is a failure, never a silent pass
        out(False, f"{sys.argv[sys.argv.index('--prefix') + 1] if '--prefix' in sys.argv else 'check'}.check",
            f"check.py crashed: {type(err).__name__}: {err}")
