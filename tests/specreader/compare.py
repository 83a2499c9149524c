#!/usr/bin/env python3
"""Check iod.py (a reader written from schemas/iod-format.md alone) against iodump itself.

    python3 compare.py [--iodump BIN] TRACE.iod | DIR-OF-PARTS

Runs `iodump export --format jsonl` and `iodump info --json` on the input, decodes it with
iod.py, and compares every event field by field, then the header, devices, processes, paths,
cgroups, losses and damage. Exits 1 with a one-line reason on the first mismatch, prints a
one-line summary on success.

How iodump *shows* values (op and syscall names, flag letters, `maj:min`, UTC text, escapes)
is not part of the format spec; the mapping below was learnt from its output.
"""
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iod  # noqa: E402

PART_NAME = re.compile(r"^iodump-\d{8}T\d{6}\.\d{3}Z-\d{6}\.iod$")
FLAG_LETTERS = "SMFPABN"          # bits 0..6: sync meta fua preflush readahead background nowait
OP_NAMES = {0: "read", 1: "write", 2: "flush", 3: "discard", 4: "secure_erase", 5: "write_zeroes", 6: "other"}
LOSS_REASON_NAMES = {"unspecified": "unspecified", "ring_full": "ring_buffer_full"}


class Mismatch(Exception):
    pass


def devname(d):
    return None if d is None else "%d:%d" % (d >> 20, d & 0xFFFFF)


def utc(ns):
    s, frac = divmod(ns, 10**9)
    t = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=s)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + ".%09dZ" % frac


def flags_text(f):
    s = "".join(ch for i, ch in enumerate(FLAG_LETTERS) if f >> i & 1)
    return s or "V"


def expected_event(e, hdr):
    p, path = e["_proc"], e["_path"]
    comm = iod.esc_bytes(p["comm"]) if p else "?"     # iodump shows an unknown process as "?"
    args = iod.esc_bytes(p["args"]) if p and p["args"] else comm
    return {
        "timestamp": utc(hdr["wall_clock_ns"] + e["timestamp_ns"] - hdr["monotonic_ns"]),
        "timestamp_ns": e["timestamp_ns"],
        "pid": e["pid"], "tid": e["tid"], "comm": comm,
        "dev": devname(e["dev"]), "sector": e["sector"], "bytes": e["bytes"],
        "op": OP_NAMES.get(e["op"], "other"), "flags": flags_text(e["flags"]),
        "latency_ns": e["latency_ns"], "queue_ns": e["queue_ns"], "error": e["error"], "cpu": e["cpu"],
        "syscall": iod.syscall_name(e["syscall"]), "dirtier_pid": e["dirtier_pid"],
        "cgroup_id": e["cgroup_id"], "upper_dev": devname(e["upper_dev"]),
        "upper_timestamp_ns": e["upper_timestamp_ns"],
        # an unresolved path as "", a file unlinked when its path was taken as "PATH (deleted)"
        "path": (iod.esc_bytes(path["path"]) + (" (deleted)" if path["deleted"] else "")) if path else "",
        "args": args,
    }


def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    return r.returncode, r.stdout, r.stderr.decode("utf-8", "replace")


def parts_of(target):
    if not os.path.isdir(target):
        return [target]
    files = [os.path.join(target, f) for f in sorted(os.listdir(target)) if PART_NAME.match(f)]
    return iod.order_parts(files)


def check(cond, what):
    if not cond:
        raise Mismatch(what)


def compare(target, binary):
    files = parts_of(target)
    t0 = time.time()
    rec = iod.Recording(files)
    t_read = time.time() - t0

    rc, out, err = run([binary, "export", "--format", "jsonl", "-o", "-", target])
    exported = [json.loads(l) for l in out.splitlines() if l.strip()]
    rc_i, out_i, err_i = run([binary, "info", "--json", target])
    if not out_i.strip():
        raise Mismatch("iodump info printed nothing (%s)" % err_i.strip().splitlines()[-1])
    info = json.loads(out_i.splitlines()[0])

    # ---- events, field by field, in file order
    mine = list(rec.events())
    check(len(mine) == len(exported), "event count: iod.py %d, iodump export %d" % (len(mine), len(exported)))
    hdr = rec.header or {"wall_clock_ns": 0, "monotonic_ns": 0, "hostname": "", "kernel_release": "",
                         "tool_version": "", "recorder_argv": [], "command_argv": None, "metadata": []}
    for i, (e, x) in enumerate(zip(mine, exported)):
        exp = expected_event(e, hdr)
        check(set(exp) == set(x), "event %d: keys differ: %s" % (i, sorted(set(exp) ^ set(x))))
        for k in x:
            if exp[k] != x[k]:
                raise Mismatch("event %d field %s: iod.py %r, iodump %r (ts %d)" % (i, k, exp[k], x[k], e["timestamp_ns"]))

    # ---- header
    sig = rec.signature
    version = "%d.%d" % (sig["major"], sig["minor"]) if sig["major"] is not None else "0.0"
    check(info["format_version"] == version, "format version: iod.py %s, info %s" % (version, info["format_version"]))
    for k in ("hostname", "kernel_release", "tool_version", "recorder_argv", "command_argv"):
        check(hdr[k] == info[k], "header %s: iod.py %r, info %r" % (k, hdr[k], info[k]))
    meta = [{"key": k, "value": v} for k, v in hdr["metadata"]]
    check(meta == info["metadata"], "metadata: iod.py %r, info %r" % (meta, info["metadata"]))
    rec_id = dict(hdr["metadata"]).get("iodump.recording")
    check(rec_id == info["recording"], "recording id: iod.py %r, info %r" % (rec_id, info["recording"]))
    if info.get("parts"):
        check(len(info["parts"]) == len(files), "parts: iod.py %d, info %d" % (len(files), len(info["parts"])))

    # ---- end chunk(s)
    check(info["finished"] == rec.finished, "finished: iod.py %r, info %r" % (rec.finished, info["finished"]))
    if rec.ends:
        ces = rec.ends[-1].get("command_exit_status")
        check(ces == info["command_exit_status"], "exit status: iod.py %r, info %r" % (ces, info["command_exit_status"]))
        check(sum(e.get("events", 0) for e in rec.ends) == len(mine) or rec.problems,
              "end chunks count %d events, decoded %d" % (sum(e.get("events", 0) for e in rec.ends), len(mine)))

    # ---- devices: every entry info lists (latest per dev), all fields
    # (info also lists, named "?", a device that events use but no intact entry names)
    event_devs = {e["dev"] for e in mine}
    listed = set()
    for d in info["devices"]:
        dev = int(d["dev"].split(":")[0]) << 20 | int(d["dev"].split(":")[1])
        listed.add(dev)
        m = rec.devices.get(dev)
        if m is None and d["name"] == "?" and dev in event_devs:
            continue
        check(m is not None, "device %s not in iod.py's table" % d["dev"])
        got = {"name": m["name"], "bio_based": m["bio_based"], "partition_of": devname(m["partition_of"]),
               "sector_size": m["sector_size"], "label": m["label"] or None,
               "stacked_on": [devname(s) for s in m["stacked_on"]]}
        for k, v in got.items():
            check(d[k] == v, "device %s %s: iod.py %r, info %r" % (d["dev"], k, v, d[k]))
    for dev in set(rec.devices) | event_devs:
        check(dev in listed, "device %s not listed by info" % devname(dev))
    for d in info["devices"]:
        dev = int(d["dev"].split(":")[0]) << 20 | int(d["dev"].split(":")[1])
        n = sum(1 for e in mine if e["dev"] == dev)
        check(d["events"] == n, "device %s events: iod.py %d, info %d" % (d["dev"], n, d["events"]))

    # ---- processes (distinct pids), threads (distinct tids), paths, as info counts them
    pids = {p["pid"] for p in rec.processes.values()}
    check(info["processes"] == len(pids), "processes: iod.py %d, info %d" % (len(pids), info["processes"]))
    check(info["threads"] == len(rec.processes), "threads: iod.py %d, info %d" % (len(rec.processes), info["threads"]))
    check(info["paths"] == len(rec.paths_table), "paths: iod.py %d, info %d" % (len(rec.paths_table), info["paths"]))
    # every event's path and process came from the tables (checked through the export above)

    # ---- cgroups
    if not rec.has_cgroups:
        check(info["cgroups"] is None, "cgroups: iod.py has no table, info lists %r" % (info["cgroups"],))
    else:
        check(info["cgroups"] is not None and len(info["cgroups"]) == len(rec.cgroups),
              "cgroups: iod.py %d, info %r" % (len(rec.cgroups), info["cgroups"] and len(info["cgroups"])))
        for c in info["cgroups"]:
            m = rec.cgroups.get(c["cgroup_id"])
            check(m is not None, "cgroup %d not in iod.py's table" % c["cgroup_id"])
            got = {"path": m["path"], "monitor": m["monitor"],
                   "runtime": None if m["runtime"] == "none" else m["runtime"],
                   "container_id": m["container_id"] or None, "pod_uid": m["pod_uid"] or None,
                   "qos": m["qos"] or None, "unit": m["unit"] or None}
            for k, v in got.items():
                check(c[k] == v, "cgroup %d %s: iod.py %r, info %r" % (c["cgroup_id"], k, v, c[k]))

    # ---- losses
    lost = sum(l["count"] for l in rec.losses)
    check(lost == info["lost_events"], "lost events: iod.py %d, info %d" % (lost, info["lost_events"]))
    check(len(rec.losses) == len(info["losses"]), "loss records: iod.py %d, info %d" % (len(rec.losses), len(info["losses"])))
    for m, l in zip(rec.losses, info["losses"]):
        for k in ("cpu", "count", "start_ns", "end_ns"):
            check(m[k] == l[k], "loss %s: iod.py %r, info %r" % (k, m[k], l[k]))
        check(LOSS_REASON_NAMES.get(m["reason"], m["reason"]) == l["reason"],
              "loss reason: iod.py %r, info %r" % (m["reason"], l["reason"]))

    # ---- damage: same chunks reported, same number of events lost to it
    dmg = [p for p in rec.problems]
    dmg_off = sorted(p["offset"] for p in dmg)
    info_off = sorted(d["offset"] for d in info["damaged"])
    check(dmg_off == info_off, "damage at %r (iod.py), %r (info)" % (dmg_off, info_off))
    damaged_events = sum(p.get("records", 0) for p in dmg if p["kind"] == "damage" and p.get("type") == iod.CT_EVENTS)
    check(damaged_events == info["damaged_events"],
          "damaged events: iod.py %d, info %d" % (damaged_events, info["damaged_events"]))
    nseg = rec.segments + sum(1 for p in dmg if p["kind"] == "damage" and p.get("type") == iod.CT_EVENTS)
    check(nseg == info["segments"], "segments: iod.py %d, info %d" % (nseg, info["segments"]))
    check((rc_i != 0) == bool(dmg), "info exit status %d, iod.py found %d damage report(s)" % (rc_i, len(dmg)))

    # ---- every table entry, field by field, against `iodump convert`'s Parquet tables
    if not dmg:
        compare_parquet(target, binary, rec)
    return len(mine), len(files), len(dmg), t_read


def compare_parquet(target, binary, rec):
    import pyarrow.parquet as pq
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        out = os.path.join(tmp, "pq")
        rc, _, err = run([binary, "convert", "-o", out, target])
        check(rc == 0, "iodump convert failed: %s" % err.strip()[-200:])
        tab = {t: pq.read_table(os.path.join(out, t + ".parquet")).to_pylist()
               for t in ("files", "processes", "devices", "cgroups", "losses")}
    files = {r["path_id"]: r for r in tab["files"]}
    check(len(files) == len(rec.paths_table), "paths: iod.py %d, parquet %d" % (len(rec.paths_table), len(files)))
    for pid, p in rec.paths_table.items():
        r = files.get(pid)
        check(r is not None, "path id %d not in parquet" % pid)
        got = {"dev_t": devname(p["dev"]), "inode": p["inode"], "kind": p["kind"], "truncated": p["truncated"],
               "deleted": p["deleted"], "path": iod.esc_bytes(p["path"])}
        for k, v in got.items():
            check(r[k] == v, "path %d %s: iod.py %r, parquet %r" % (pid, k, v, r[k]))
        check(r["generation"] == p["generation"] or (p["generation"] is None and r["generation"] in (None, 0)),
              "path %d generation: iod.py %r, parquet %r" % (pid, p["generation"], r["generation"]))
    procs = {r["tid"]: r for r in tab["processes"]}
    check(len(procs) == len(tab["processes"]) == len(rec.processes),
          "processes: iod.py %d threads, parquet %d rows" % (len(rec.processes), len(tab["processes"])))
    for tid, p in rec.processes.items():
        r = procs.get(tid)
        check(r is not None, "tid %d not in parquet" % tid)
        comm = iod.esc_bytes(p["comm"])
        got = {"pid": p["pid"], "comm": comm, "cgroup_id": p["cgroup_id"],
               "args": iod.esc_bytes(p["args"]) if p["args"] else comm}
        for k, v in got.items():
            check(r[k] == v, "tid %d %s: iod.py %r, parquet %r" % (tid, k, v, r[k]))
    devs = {r["dev_t"]: r for r in tab["devices"]}
    check(len(devs) == len(rec.devices), "devices: iod.py %d, parquet %d" % (len(rec.devices), len(devs)))
    for dev, d in rec.devices.items():
        r = devs.get(devname(dev))
        check(r is not None, "device %s not in parquet" % devname(dev))
        got = {"name": d["name"], "partition_of": devname(d["partition_of"]), "sector_size": d["sector_size"],
               "start_sector": d["start_sector"], "bio_based": d["bio_based"], "label": d["label"] or None,
               "stacked_on": [devname(s) for s in d["stacked_on"]] or None}
        for k, v in got.items():
            check(r[k] == v, "device %s %s: iod.py %r, parquet %r" % (devname(dev), k, v, r[k]))
    check(len(tab["cgroups"]) == len(rec.cgroups), "cgroups: iod.py %d, parquet %d" % (len(rec.cgroups), len(tab["cgroups"])))
    hdr = rec.header
    for r, l in zip(tab["losses"], rec.losses):
        got = {"cpu": l["cpu"], "count": l["count"],
               "start_ns": hdr["wall_clock_ns"] + l["start_ns"] - hdr["monotonic_ns"],
               "end_ns": hdr["wall_clock_ns"] + l["end_ns"] - hdr["monotonic_ns"]}
        for k, v in got.items():
            check(r[k] == v, "loss %s: iod.py %r, parquet %r" % (k, v, r[k]))


def main(argv):
    binary = os.environ.get("IODUMP", "iodump")
    if len(argv) >= 2 and argv[0] == "--iodump":
        binary, argv = argv[1], argv[2:]
    if len(argv) != 1:
        print("usage: compare.py [--iodump BIN] TRACE.iod|DIR", file=sys.stderr)
        return 2
    try:
        n, nfiles, ndmg, t = compare(argv[0], binary)
    except Mismatch as e:
        print("MISMATCH %s: %s" % (argv[0], e))
        return 1
    print("OK %s: %d events, %d file(s), %d damage report(s), identical to iodump (iod.py read in %.2f s)"
          % (argv[0], n, nfiles, ndmg, t))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
