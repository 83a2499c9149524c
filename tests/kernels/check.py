#!/usr/bin/env python3
"""Checks one `iodump record` run of the kernel matrix against the device's own counters.

  check.py --bin IODUMP [--read-bin IODUMP] RUNDIR

Prints one line per check, `PASS NAME DETAIL` or `FAIL NAME DETAIL` (NAME is the run's label
and the check), on stdout; guest.sh appends them to results.txt. It runs where the trace can be
read: in the guest it would be slow (every file over 9p under TCG), so run.sh runs the checks on
the host after the guest powered off, from what guest.sh left in RUNDIR:

  run.json        label, dev, fs (ext4|xfs|btrfs), kind (randread|write), rc of iodump record,
                  min_ios, roles
  stat1, stat2    /sys/block/DEV/stat once iodump attached (read by the traced command) and after it exited
                  (Documentation/block/stat.rst: fields 1, 5, 12, 15 are reads, writes,
                  discards, flushes completed; 9 is I/Os in flight)
  record.stderr   iodump's stderr (its summary line, --stats counters)
  trace.iod       the trace
  ROLE.path, ROLE.size, ROLE.frag (filefrag -v -b512), ROLE.pid (optional): a test file, its
                  extents (the sectors that are I/O "on the file") and the process that wrote
                  (dd) it
  chunks.txt      btrfs: `btrfs inspect-internal dump-tree -t chunk` after umount (filefrag
                  shows btrfs's logical addresses; the chunks map them to the device's sectors)
  btrfs-probe.txt btrfs: what the recorder's paths of btrfs direct I/O need from the kernel
                  (guest.sh btrfs_probe); decides whether the direct reads must carry the path
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


def extents(frag):
    """Sector ranges [start, end) in `filefrag -v -b512` output (512-byte sectors)."""
    text = open(frag, errors="replace").read() if os.path.exists(frag) else ""
    ranges = []
    # "   0:        0..   16383:      34816..     51199:  16384:             last,eof"
    for m in re.finditer(r"^\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.\s*(\d+):", text, re.M):
        ranges.append((int(m.group(1)), int(m.group(2)) + 1))
    if not ranges:
        raise RuntimeError(f"no extents in {frag}: {text.strip()[-200:]!r}")
    return ranges


def btrfs_chunks(path):
    """[(logical start, end, type, [physical starts])] in bytes from dump-tree -t chunk."""
    text = open(path, errors="replace").read()
    chunks = []
    for m in re.finditer(r"key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\).*?\n(.*?)(?=\n\s*item |\Z)",
                         text, re.S):
        body = m.group(2)
        ln = re.search(r"length (\d+) .*?type (\S+)", body)
        stripes = [int(x) for x in re.findall(r"stripe \d+ devid \d+ offset (\d+)", body)]
        if not ln or not stripes:
            continue
        start = int(m.group(1))
        chunks.append((start, start + int(ln.group(1)), ln.group(2), stripes))
    if not chunks:
        raise RuntimeError(f"no chunks in {path}: {text.strip()[-200:]!r}")
    return chunks


def to_device(ranges, chunks):
    """btrfs logical sector ranges -> device sector ranges (every copy: DUP, RAID1)."""
    out = []
    for a, b in ranges:
        lo, hi = a * 512, b * 512
        covered = 0
        for cs, ce, typ, stripes in chunks:
            s, e = max(lo, cs), min(hi, ce)
            if s >= e:
                continue
            if re.search(r"RAID(0|10|5|6)", typ):
                raise RuntimeError(f"chunk {cs} is {typ}: striped, not mapped here")
            for p in stripes:
                out.append(((p + s - cs) // 512, (p + e - cs) // 512))
            covered += e - s
        if covered != hi - lo:
            raise RuntimeError(f"logical sectors {a}..{b} not all in the chunk tree")
    return out


def btrfs_dio_paths(probe_path, off):
    """(expected, why): must btrfs direct reads carry the file's path on this kernel? The
    recorder names them from the struct btrfs_bio around the bio, which needs (1) the bio's
    completion to be btrfs_simple_end_io / btrfs_orig_write_end_io (6.3+; 5.10 completes
    btrfs direct I/O on its own path), (2) btrfs_bio.inode (6.3+, "names no inode before
    6.3"), (3) btrfs's types (module BTF, none before 5.11: the recorder then turns them off,
    iodump.off)."""
    kv = {}
    for line in open(probe_path, errors="replace"):  # "KEY VALUE..." / "ksym NAME 0|1"
        g = line.split()
        if len(g) >= 3 and g[0] == "ksym":
            kv[f"ksym.{g[1]}"] = g[2]
        elif len(g) >= 2:
            kv.setdefault(g[0], line.split(None, 1)[1].strip())
    why = []
    if "btrfs" in off:
        why.append(f"iodump.off: {off}")
    if kv.get("ksym.btrfs_simple_end_io") != "1" and kv.get("ksym.btrfs_orig_write_end_io") != "1":
        why.append("no btrfs_simple_end_io/btrfs_orig_write_end_io in /proc/kallsyms")
    inode = kv.get("btrfs_bio.inode", "unknown")
    if inode.startswith("unknown"):
        # no BTF to look in (no bpftool): the kernel series decides (btrfs_bio.inode: 6.3)
        rel = tuple(int(x) for x in re.findall(r"\d+", kv.get("kernel", "0.0"))[:2])
        if rel < (6, 3):
            why.append(f"kernel {kv.get('kernel')} < 6.3 (btrfs_bio.inode {inode})")
    elif inode == "none":
        why.append("no struct btrfs_bio in the kernel's BTF (no module BTF before 5.11)")
    elif inode != "1":
        why.append(f"struct btrfs_bio has no inode member (BTF: {inode})")
    return not why, "; ".join(why)


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
    ap.add_argument("--read-bin", help="iodump used for `export` (default --bin)")
    ap.add_argument("rundir")
    a = ap.parse_args()
    R = a.rundir
    run = json.load(open(os.path.join(R, "run.json")))
    global LABEL
    P = LABEL = run["label"]
    a.dev, a.kind, a.rc, a.min_ios = run["dev"], run["kind"], int(run["rc"]), int(run["min_ios"])
    fs = run.get("fs") or "ext4"
    a.trace = os.path.join(R, "trace.iod")
    a.stat1, a.stat2 = os.path.join(R, "stat1"), os.path.join(R, "stat2")
    stderr = open(os.path.join(R, "record.stderr"), errors="replace").read()

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
    rb = a.read_bin or a.bin
    ex = subprocess.run([rb, "export", a.trace, "--format", "jsonl", "-o", "-"],
                        capture_output=True, text=True)
    if ex.returncode != 0:
        hint = ""
        if "unrecognized subcommand" in ex.stderr:
            hint = (f" ({rb} was built without the analyze feature; set IODUMP_READ_BIN to a "
                    "default-features build to read the traces)")
        out(False, f"{P}.export", f"iodump export exited {ex.returncode}: {last_error(ex.stderr)}{hint}")
        return
    evs = [json.loads(l) for l in ex.stdout.splitlines() if l.strip()]
    with open(os.path.join(R, "trace.jsonl"), "w") as f:
        f.write(ex.stdout)

    devinfo = [d for d in info.get("devices", []) if d.get("name") == a.dev]
    bio_based = bool(devinfo and devinfo[0].get("bio_based"))
    majmin = devinfo[0]["dev"] if devinfo else None

    # --- every completed I/O of the device is in the trace
    s1, s2 = read_stat(a.stat1), read_stat(a.stat2)
    d = {k: s2[k] - s1[k] for k in ("r", "w", "d", "f")}
    mine = [e for e in evs if e["dev"] == majmin]
    others = len(evs) - len(mine)
    # The stat before was read by the traced command, after iodump attached: an I/O of the
    # trace that completed before that read is not in the delta (a filesystem's background
    # write during iodump's start), one that completed while it was read may or may not be.
    # stat1.mono: CLOCK_MONOTONIC just before and just after the read (guest.sh, record).
    try:
        mono0, mono1 = [int(x) for x in open(a.stat1 + ".mono").read().split()[:2]]
    except (OSError, ValueError):
        mono0 = mono1 = 0

    def counted(sel):
        by = {}
        for e in sel:
            by[e["op"]] = by.get(e["op"], 0) + 1
        c = {k: by.get(k, 0) for k in ("read", "write", "discard", "flush")}
        c["write"] += by.get("write_zeroes", 0) + by.get("secure_erase", 0)
        return by, c

    def done_ns(e):
        return e["timestamp_ns"] + (e.get("latency_ns") or 0)

    before = [e for e in mine if done_ns(e) < mono0]
    during = [e for e in mine if mono0 <= done_ns(e) <= mono1]
    by_op, t = counted(mine)
    _, tb = counted(before)
    _, tw = counted(during)
    t_rwd = t["read"] + t["write"] + t["discard"]
    stat_rwd = d["r"] + d["w"] + d["d"]
    ops = " ".join(f"{k}={v}" for k, v in sorted(by_op.items()))

    def agrees(k):  # the trace's count of op k after the read, give or take those during it
        return t[k] - tb[k] - tw[k] <= d[k[0]] <= t[k] - tb[k]
    # Flushes apart: the kernel counts a flush in field 15 when the device runs one, but an
    # empty PREFLUSH that a queue without a flush to do completes at once (loop) as a write.
    wf = t["write"] + t["flush"] - tb["write"] - tb["flush"]
    ok = (agrees("read") and agrees("discard") and t["write"] - tb["write"] - tw["write"] <= d["w"]
          and wf - tw["write"] - tw["flush"] <= d["w"] + d["f"] <= wf
          and others == 0 and majmin is not None)
    early = ""
    if before or during:
        early = (f"; left out: {len(before)} I/Os done before the stat was read "
                 f"({' '.join(f'{k}={v}' for k, v in tb.items() if v)}), "
                 f"{len(during)} done while it was read")
    out(ok, f"{P}.count",
        f"trace {t_rwd} + {t['flush']} flushes (dev {a.dev}={majmin}; {ops}; other devices "
        f"{others}) vs /sys/block/{a.dev}/stat delta {stat_rwd} + {d['f']} flushes (reads "
        f"{d['r']} writes {d['w']} discards {d['d']}; in flight at start {s1['inflight']}, "
        f"at end {s2['inflight']}){early}")
    if not bio_based:
        out(t["flush"] >= d["f"], f"{P}.flushes",
            f"trace flush events {t['flush']} >= stat flushes {d['f']}")

    # --- losses. None, or (kernels whose tracing programs can be preempted, 7.x) only
    # programs the kernel skipped as nested while the count above found every I/O of the
    # device: the recorder cannot tell whose I/O a skipped program was for and counts each
    # skip as a loss (the safe side); it was some other device's here.
    count_ok = ok
    lost = info.get("lost_events")
    losses = info.get("losses") or []
    nested = bool(losses) and all(x.get("reason") == "nested" for x in losses)
    skipped_elsewhere = nested and count_ok and lost == sum(x.get("count", 0) for x in losses)
    out((lost == 0 and not losses) or skipped_elsewhere, f"{P}.lost",
        f"lost_events={lost} losses={losses}"
        + ("; only nested skips, none of them of this device's I/O (count: every I/O there)"
           if skipped_elsewhere else ""))

    # --- the recorder's own summary line agrees with the trace and with the device
    m = re.search(r"^iodump: recorded (\d+) events in [\d.]+ s, lost (\d+)", stderr, re.M)
    k = re.search(r"^iodump: kernel counters: (.*)$", stderr, re.M)
    counters = dict(x.split("=", 1) for x in k.group(1).split()) if k else {}
    if not m:
        out(False, f"{P}.summary", "no 'iodump: recorded N events in S s, lost L' line on stderr")
    else:
        n, l = int(m.group(1)), int(m.group(2))
        line = stderr[m.start():].splitlines()[0]
        u = re.search(r"(\d+) completions without a start", line)
        said = int(u.group(1)) if u else 0
        unseen = stat_rwd + d["f"] - (len(mine) - len(before))
        # I/O the device completed but the trace lacks must show in the summary: as lost, or
        # as completions without a start (iodump counts them; --stats: no_start, rq_untracked)
        silent = unseen > 0 and l == 0 and said == 0
        ok = n == info.get("events") and l == lost and not silent
        why = "" if ok else (
            f" -- the device completed {unseen} I/O more than recorded but the summary says lost 0"
            if silent else " -- disagrees with iodump info")
        kc = " ".join(f"{c}={counters[c]}" for c in ("no_start", "rq_untracked", "filtered",
                                                     "flush_no_start") if c in counters)
        out(ok, f"{P}.summary",
            f"'recorded {n} events, lost {l}'"
            + (f", {said} completions without a start" if u else "")
            + f" vs info events={info.get('events')} lost={lost}, device - trace = {unseen}; "
            f"kernel {kc or 'counters: none printed'}{why}")

    # --- latency (emulator latencies under TCG: presence and plausibility only)
    lat = [e.get("latency_ns") for e in mine]
    bad = [x for x in lat if not isinstance(x, int) or x <= 0 or x > 60_000_000_000]
    srt = sorted(x for x in lat if isinstance(x, int))
    med = srt[len(srt) // 2] if srt else None
    out(bool(mine) and not bad, f"{P}.latency",
        f"{len(mine) - len(bad)}/{len(mine)} events with 0 < latency <= 60 s "
        f"(median {med} ns, max {srt[-1] if srt else None} ns)")
    if not bio_based and mine:
        data = [e for e in mine if e["op"] != "flush"]
        q = [e for e in data if isinstance(e.get("queue_ns"), int)
             and 0 <= e["queue_ns"] <= e.get("latency_ns", 0)]
        out(len(q) >= SHARE * len(data), f"{P}.queue-time",
            f"{pct(len(q), len(data))} reads/writes on request-based {a.dev} with 0 <= queue_ns "
            f"<= latency ({len(mine) - len(data)} flushes apart)")

    # --- the test files: paths, submitters, dirtiers
    meta = {m.get("key"): m.get("value") for m in info.get("metadata") or []}
    want_path, no_path_why = True, ""
    if fs == "btrfs" and a.kind == "randread":
        want_path, no_path_why = btrfs_dio_paths(os.path.join(R, "btrfs-probe.txt"),
                                                 meta.get("iodump.off") or "")
    for role in run["roles"]:
        base = os.path.join(R, role)
        path = open(base + ".path").read().strip()
        size = int(open(base + ".size").read().split()[0])
        pid = int(open(base + ".pid").read().split()[0]) if os.path.exists(base + ".pid") else None
        try:
            ranges = extents(base + ".frag")
            if fs == "btrfs":
                ranges = to_device(ranges, btrfs_chunks(os.path.join(R, "chunks.txt")))
        except (RuntimeError, OSError) as err:
            out(False, f"{P}.{role}.path", str(err))
            continue
        on = [e for e in mine if overlaps(e, ranges) and e["op"] in ("read", "write")]
        want_op = "read" if a.kind == "randread" else "write"
        on_op = [e for e in on if e["op"] == want_op]
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
        if want_path:
            out(on and len(with_path) >= SHARE * len(on), f"{P}.{role}.path",
                f"{pct(len(with_path), len(on))} I/Os on the file carry {path}"
                + (f"; others: {wrong}" if wrong else ""))
        else:
            # a documented limitation of this kernel (README): the I/O must be there (ios,
            # count, lost), its path need not
            out(bool(on), f"{P}.{role}.path",
                f"{pct(len(with_path), len(on))} I/Os on the file carry {path}"
                + (f"; others: {wrong}" if wrong else "")
                + f" -- no path expected on this kernel: {no_path_why}")
        named = [e for e in mine if e.get("path") == path]
        right = [e for e in named if inside(e, ranges)]
        out((named or not want_path) and len(right) >= SHARE * len(named),
            f"{P}.{role}.path-right",
            f"{pct(len(right), len(named))} I/Os labelled {path} lie in its extents"
            + ("" if want_path else " (none need be)"))
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


LABEL = None

if __name__ == "__main__":
    try:
        main()
    except Exception as err:  # a broken check is a failure, never a silent pass
        out(False, f"{LABEL or os.path.basename(sys.argv[-1].rstrip('/'))}.check",
            f"check.py crashed: {type(err).__name__}: {err}")
