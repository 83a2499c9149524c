"""Checks a Perfetto trace written by `iodump export --format perfetto` against the same
trace's JSON lines export, decoding it with Perfetto's own protos (the `perfetto` package).

Usage: perfetto_check.py TRACE.pftrace EVENTS.jsonl INFO.json
Prints `ok N` (N I/Os checked) or fails with an assertion.
"""
import collections
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

BEGIN, END, COUNTER = 1, 2, 4

trace_path, jsonl_path, info_path = sys.argv[1:4]
trace = pb.Trace()
trace.ParseFromString(open(trace_path, "rb").read())
packets = list(trace.packet)
assert packets, "no packets"
first = packets[0]
assert first.first_packet_on_sequence, "first packet not marked first"
assert first.sequence_flags & 1, "first packet does not clear incremental state"

names, arg_names, strings = {}, {}, {}
plain = set()  # argument names given as plain (not interned) strings
tracks = {}
slices = collections.defaultdict(list)  # track uuid -> [(ts, order, type, name, args)]
counters = collections.defaultdict(list)  # track uuid -> [(ts, value)]
for i, p in enumerate(packets):
    assert p.trusted_packet_sequence_id == 1, f"packet {i}: sequence"
    if p.HasField("interned_data"):
        d = p.interned_data
        for e in d.event_names:
            assert e.iid not in names, f"event name iid {e.iid} twice"
            names[e.iid] = e.name
        for e in d.debug_annotation_names:
            assert e.iid not in arg_names
            arg_names[e.iid] = e.name
        for e in d.debug_annotation_string_values:
            assert e.iid not in strings, f"string iid {e.iid} twice"
            strings[e.iid] = e.str.decode("utf-8")
    if p.HasField("track_descriptor"):
        t = p.track_descriptor
        assert t.uuid not in tracks, f"track {t.uuid} twice"
        tracks[t.uuid] = t
    if p.HasField("track_event"):
        e = p.track_event
        assert p.sequence_flags & 2, f"packet {i}: needs incremental state"
        assert e.track_uuid in tracks, f"packet {i}: track {e.track_uuid} not described before"
        if e.type == COUNTER:
            v = e.counter_value if e.HasField("counter_value") else e.double_counter_value
            counters[e.track_uuid].append((p.timestamp, v))
            continue
        args = {}
        for a in e.debug_annotations:
            # Interned names and strings must have been sent before (or in this packet).
            k = arg_names[a.name_iid]
            if a.HasField("string_value_iid"):
                args[k] = strings[a.string_value_iid]
            elif a.HasField("string_value"):
                args[k] = a.string_value
                plain.add(k)
            else:
                args[k] = a.uint_value
        name = names[e.name_iid] if e.type == BEGIN else None
        slices[e.track_uuid].append((p.timestamp, i, e.type, name, args))

devices = {t.name: u for u, t in tracks.items() if not t.HasField("parent_uuid")
           and not t.HasField("process")}
dev_of_uuid = {u: n for n, u in devices.items()}
procs = {t.process.pid: u for u, t in tracks.items() if t.HasField("process")}
proc_of_uuid = {u: pid for pid, u in procs.items()}


def nest(events):
    """Slices of one track as (depth, ts, dur, name, args, children); fails unless they nest."""
    out, stack = [], []
    for ts, _, ty, name, args in sorted(events, key=lambda x: (x[0], x[1])):
        if ty == BEGIN:
            stack.append([ts, name, args, []])
        else:
            assert stack, "end without begin"
            s = stack.pop()
            sl = (s[0], ts - s[0], s[1], s[2], s[3])
            (stack[-1][3] if stack else out).append(sl)
    assert not stack, "unclosed slices"
    return out


ios = collections.defaultdict(list)
proc_slices = collections.Counter()
for u, evs in slices.items():
    parent = tracks[u].parent_uuid
    if parent in dev_of_uuid:
        dev = dev_of_uuid[parent]
        for ts, dur, name, args, children in nest(evs):
            key = (dev, ts, args["sector"], args["bytes"], name, args["pid"], args["tid"])
            ios[key].append((dur, args, children))
    elif parent in proc_of_uuid:
        for ts, dur, name, args, children in nest(evs):
            assert not children
            proc_slices[(proc_of_uuid[parent], ts, name, args["bytes"], dur)] += 1
    else:
        raise AssertionError(f"slices on track {tracks[u]}")

info = json.load(open(info_path))
dev_names = {d["dev"]: d["name"] for d in info["devices"]}
cgroups = {c["id"]: c for c in (info.get("cgroups") or [])}
n = 0
per_dev = collections.Counter()
events = [json.loads(line) for line in open(jsonl_path, encoding="utf-8")]
# An I/O a stacked device sent down is on its process's lanes only when that device has none.
with_io = {ev["dev"] for ev in events}
for ev in events:
    dev = dev_names.get(ev["dev"], ev["dev"])
    key = (dev, ev["timestamp_ns"], ev["sector"], ev["bytes"], ev["op"], ev["pid"], ev["tid"])
    assert ios.get(key), f"I/O missing: {key}"
    dur, args, children = ios[key].pop()
    lat, q = ev["latency_ns"], ev["queue_ns"]
    assert dur == lat == args["latency_ns"], (key, dur, lat, args)
    assert args.get("queue_ns") == q, (key, args, q)
    assert args.get("path", "") == ev["path"], (key, args.get("path"), ev["path"])
    assert args.get("syscall") == ev["syscall"], (key, args, ev["syscall"])
    assert args["error"] == ev["error"] and args["flags"] == ev["flags"], (key, args, ev)
    assert args.get("dirtier_pid") == ev["dirtier_pid"], (key, args, ev)
    cg = cgroups.get(ev["cgroup_id"])
    assert args["cgroup"] == (cg["path"] if cg else f"cgroup:{ev['cgroup_id']}"), (key, args)
    if cg and cg.get("label") not in (None, "-"):
        assert args["container"] == cg["label"], (key, args, cg)
    kids = [(c[2], c[0], c[1]) for c in children]
    if q is None:
        assert kids == [("device", ev["timestamp_ns"], lat)], (key, kids)
    else:
        q = min(q, lat)
        assert kids == [("queue", ev["timestamp_ns"], q),
                        ("device", ev["timestamp_ns"] + q, lat - q)], (key, kids)
    pk = (ev["pid"], ev["timestamp_ns"], ev["op"], ev["bytes"], lat)
    if ev.get("upper_dev") in with_io:
        assert proc_slices[pk] == 0, f"process slice of an I/O sent down {pk}"
    else:
        assert proc_slices[pk] > 0, f"no process slice {pk}"
        proc_slices[pk] -= 1
    per_dev[dev] += 1
    n += 1
left = sum(len(v) for v in ios.values())
assert left == 0, f"{left} I/O slices not in the export"
assert sum(proc_slices.values()) == 0, "process slices not in the export"
for dev, count in per_dev.items():
    kids = {tracks[u].name: u for u, t in tracks.items() if t.parent_uuid == devices[dev]}
    in_flight = counters[kids[f"{dev} in flight"]]
    assert len(in_flight) == 2 * count, (dev, len(in_flight), count)
    # Exact start order: the counter's values come in time order.
    assert all(a[0] <= b[0] for a, b in zip(in_flight, in_flight[1:])), dev
    assert in_flight[-1][1] == 0 and max(v for _, v in in_flight) >= 1, dev
    iops = counters[kids[f"{dev} IOPS"]]
    assert round(sum(v for _, v in iops) / 10) == count, (dev, iops, count)
# Paths, syscalls, cgroups and device names are interned, as Perfetto's SDK does.
assert not plain & {"path", "syscall", "cgroup", "container", "device"}, plain
print("ok", n)
