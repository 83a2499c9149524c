#!/usr/bin/env bash
# The kernel matrix's end-to-end suite: records fio and dd under `iodump record` on scratch
# block devices and checks each trace against the device's /sys/block/DEV/stat (check.py).
#
#   bash tests/kernels/guest.sh OUTDIR           # record and check
#   bash tests/kernels/guest.sh --check OUTDIR   # check what a guest recorded (run.sh)
#
# Writes OUTDIR/results.txt (one line per check: `PASS name detail`, `FAIL name detail`),
# OUTDIR/guest.log, one directory per recording (trace, its jsonl export, iodump's stderr, the
# device's stat before and after, the test files' extents, checks.txt), OUTDIR/started and
# OUTDIR/done (timings). Exit status 0 when every check passed. In a guest the checks are left
# for `--check` on the host (python and a large iodump start slowly over 9p under TCG).
#
# Two modes:
#  - in a virtme-ng guest (run.sh sets IODUMP_GUEST=1): the devices are the scratch image as
#    virtio-blk vda (checked for run.sh's signature; scheduler none, then mq-deadline) and a
#    new zram device;
#  - on the host (default; root): a new loop device on a sparse file in OUTDIR (request-based;
#    none, then mq-deadline) and a new zram device (hot_add). It never touches a disk it did not
#    create: vd*, sd*, nvme*, … are refused.
# ext4 on each of them (req-none, req-mq-deadline, zram: fio randread and the two-file write
# workload); then xfs and btrfs on the request-based device with mq-deadline (xfs, btrfs: a
# shorter fio randread and the fsync'ed file only).
# Env: IODUMP_BIN (default: the repo's target/debug/iodump), IODUMP_KT_DEVICES (a subset of
# "req-none req-mq-deadline zram xfs btrfs"), IODUMP_KT_FIO_IOS (direct 4k reads per fio run on
# ext4, 3000), IODUMP_KT_FS_FIO_IOS (on xfs and btrfs, 1000), IODUMP_KT_FS_SCHED (the scheduler
# for xfs and btrfs, mq-deadline), IODUMP_READ_BIN (the iodump that exports the traces for the
# checks, default IODUMP_BIN), IODUMP_KMOD_DIR (guest: the kernel's lib/modules, bound on
# /lib/modules when needed).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MAGIC=IODUMP-KERNEL-MATRIX-SCRATCH

# `guest.sh --write-workload DIR RUNDIR [fsync]`: the buffered-write workload run under iodump
# record (with `fsync`: the fsync'ed file only).
if [ "${1:-}" = --write-workload ]; then
  d=$2 r=$3
  # dd's own fsync writes fsync.dat out (submitter dd)...
  sh -c 'echo $$ > "$1"; exec dd if=/dev/zero of="$2" bs=1M count=16 conv=fsync status=none' \
    sh "$r/fsync.pid" "$d/fsync.dat" || exit 1
  [ "${4:-}" = fsync ] && exit 0
  # ...the flusher writes writeback.dat out for dd (the dirtier), woken by syncfs
  sh -c 'echo $$ > "$1"; exec dd if=/dev/zero of="$2" bs=1M count=16 status=none' \
    sh "$r/writeback.pid" "$d/writeback.dat" || exit 1
  exec sync -f "$d/writeback.dat"
fi

# check_run RUNDIR: check.py on one recording, its lines into results.txt
check_run() {
  local run=$1 label
  label=$(basename "$run")
  python3 "$HERE/check.py" --bin "$BIN" --read-bin "$READ_BIN" "$run" > "$run/checks.txt" 2> "$run/check.log" ||
    echo "FAIL $label.check check.py exited $?: $(tail -1 "$run/check.log")" >> "$run/checks.txt"
  cat "$run/checks.txt" >> "$RES"
  cat "$run/checks.txt"
}

CHECK_ONLY=0
[ "${1:-}" = --check ] && { CHECK_ONLY=1; shift; }
OUT=${1:?usage: guest.sh [--check] OUTDIR}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) || exit 2
BIN=${IODUMP_BIN:-$REPO/target/debug/iodump}
READ_BIN=${IODUMP_READ_BIN:-$BIN}
RES=$OUT/results.txt

# flight_check RUNDIR: the snapshot the trigger saved (flight_suite): one file; its header
# names the slow I/O that fired it, which is in it, with the zram writes before and after it.
# hang_check RUNDIR (flight_suite): top's snapshots name the loop device with one write in
# flight for a second or more while it hangs, and no longer once it completed (counted then).
hang_check() {
  local run=$1
  [ -f "$run/hang.rc" ] || return 0
  python3 - "$run" >> "$RES" 2>> "$run/check.log" <<'PY' ||
import json, os, sys
run = sys.argv[1]
dev = open(os.path.join(run, "hang.dev")).read().strip()
rc = open(os.path.join(run, "hang.rc")).read().strip()
snaps = [json.loads(l) for l in open(os.path.join(run, "hang.jsonl")) if l.strip()]
seen = [[d for d in s.get("in_flight_slow", []) if d["device"] == dev] for s in snaps]
shown = [i for i, d in enumerate(seen) if d]
ok = rc == "0" and shown and all(d[0]["ios"] == 1 and d[0]["oldest_s"] >= 1 for d in seen if d)
writes = sum(s["total"]["writes"] for s in snaps)
after = snaps[shown[-1] + 1:] if shown else []
ok = ok and after and not any(s.get("in_flight_slow") for s in after) and writes >= 1
print(("PASS" if ok else "FAIL") + " flight.hung-io top exited %s; %d snapshots, %d name %s's write in flight (oldest %s s), %d after it with none; writes counted %d" % (
    rc, len(snaps), len(shown), dev, max((d[0]["oldest_s"] for d in seen if d), default="-"), len(after), writes))
PY
    echo "FAIL flight.hung-io python exited $?: $(tail -1 "$run/check.log")" >> "$RES"
}

# fua_check RUNDIR (flight_suite): dd's 50 O_DSYNC writes to a loop device without FUA are
# recorded (or counted lost), each with FUA, and `--stats` says each was followed to the end
# of its flush sequence (flush_followed; rq_complete), so that its latency includes the cache
# flush after its data.
fua_check() {
  local run=$1
  [ -f "$run/fua.rc" ] || return 0
  "$READ_BIN" export "$run/fua.iod" --format jsonl -o "$run/fua.jsonl" 2>> "$run/check.log"
  python3 - "$run" >> "$RES" 2>> "$run/check.log" <<'PY' ||
import json, os, re, sys
run = sys.argv[1]
rc = open(os.path.join(run, "fua.rc")).read().strip()
err = open(os.path.join(run, "fua.stderr"), errors="replace").read()
queue = open(os.path.join(run, "fua.queue")).read().strip()
m = re.search(r"flush_followed=(\d+)", err)
followed = int(m.group(1)) if m else -1
m = re.search(r"recorded \d+ events in [^,]*, lost (\d+)", err)
lost = int(m.group(1)) if m else -1
evs = [json.loads(l) for l in open(os.path.join(run, "fua.jsonl")) if l.strip()]
fua = [e for e in evs if e["op"] == "write" and e["bytes"] == 4096 and "F" in e["flags"]]
ok = rc == "0" and fua and followed == len(fua) and len(fua) + lost == 50
last = err.strip().splitlines()[-1] if err.strip() else "no stderr"
print(("PASS" if ok else "FAIL") + " flight.fua-followed iodump exited %s; %d FUA writes recorded, lost %d, of 50 on a loop device (queue/fua, write_cache: %s); flush_followed=%d%s" % (
    rc, len(fua), lost, queue, followed, "" if ok else " -- " + last))
PY
    echo "FAIL flight.fua-followed python exited $?: $(tail -1 "$run/check.log")" >> "$RES"
}

flight_check() {
  local run=$1 snaps
  hang_check "$run"
  fua_check "$run"
  [ -f "$run/rc" ] || return 0
  snaps=$(ls "$run"/snaps/trigger-*.iod 2>/dev/null)
  if [ "$(cat "$run/rc")" != 0 ] || [ "$(echo "$snaps" | grep -c .)" != 1 ]; then
    echo "FAIL flight.snapshot iodump exited $(cat "$run/rc"), snapshots: $(ls "$run/snaps" | tr '\n' ' '): $(grep -v '^\s*$' "$run/record.stderr" | tail -1)" >> "$RES"
    return
  fi
  echo "PASS flight.snapshot $(basename "$snaps")" >> "$RES"
  # The trigger's look at the I/Os in flight reads the kernel's in-flight tables.
  if grep -q "in-flight tables cannot be read" "$run/record.stderr"; then
    echo "FAIL flight.in-flight-look $(grep -m1 "in-flight tables" "$run/record.stderr")" >> "$RES"
  else
    echo "PASS flight.in-flight-look no warning" >> "$RES"
  fi
  "$READ_BIN" info --json "$snaps" > "$run/info.json" 2>> "$run/check.log"
  "$READ_BIN" export "$snaps" --format jsonl -o "$run/snap.jsonl" 2>> "$run/check.log"
  python3 - "$run" "$(cat "$run/nullb")" "$(cat "$run/zram")" >> "$RES" 2>> "$run/check.log" <<'PY' ||
import json, os, sys
run, nb, zr = sys.argv[1:4]
info = json.load(open(os.path.join(run, "info.json")))
meta = {m["key"]: m["value"] for m in info["metadata"]}
devs = {d["name"]: d["dev"] for d in info["devices"]}
evs = [json.loads(l) for l in open(os.path.join(run, "snap.jsonl"))]
trig = meta.get("iodump.trigger.io", "").split()
# (a seventh word, in_flight: it fired while still in flight, at the once-a-second look)
ok = len(trig) in (6, 7) and trig[6:] in ([], ["in_flight"]) and trig[1] == devs.get(nb) and int(trig[5]) > 20_000_000
print(("PASS" if ok else "FAIL") + " flight.trigger-io " + " ".join(trig) + " (" + meta.get("iodump.snapshot", "no iodump.snapshot") + ")")
ts = int(trig[0]) if trig else -1
fired = [e for e in evs if e["timestamp_ns"] == ts and e["dev"] == devs.get(nb)]
print(("PASS" if fired and fired[0]["latency_ns"] > 20_000_000 else "FAIL") + " flight.fired-in-snapshot %d event(s) at %d" % (len(fired), ts))
zw = [e for e in evs if e["dev"] == devs.get(zr) and e["op"] == "write"]
before = sum(1 for e in zw if e["timestamp_ns"] < ts)
after = sum(1 for e in zw if e["timestamp_ns"] > ts)
print(("PASS" if before >= 300 and after >= 300 else "FAIL") + " flight.window %d zram writes before the trigger, %d after (300 each written)" % (before, after))
slow = [e for e in evs if e["dev"] == devs.get(nb)]
print(("PASS" if len(slow) >= 10 and all(e["latency_ns"] > 20_000_000 for e in slow) else "FAIL") + " flight.slow-io %d null_blk I/Os, latencies %s ms" % (len(slow), sorted(round(e["latency_ns"] / 1e6) for e in slow)[:3]))
PY
    echo "FAIL flight.check python exited $?: $(tail -1 "$run/check.log")" >> "$RES"
}

# nvme_check RUNDIR (nvme_suite): the device table names the hidden path disk and the head
# as an NVMe multipath device on it; each of dd's I/Os on the head is done by one on the path
# that names it (its upper I/O), carries dd and has a queue time (the path is request-based).
nvme_check() {
  local run=$1
  [ -f "$run/rc" ] || return 0
  if [ "$(cat "$run/rc")" != 0 ]; then
    echo "FAIL nvme.record iodump exited $(cat "$run/rc"): $(grep -v '^\s*$' "$run/record.stderr" | tail -1)" >> "$RES"
    return
  fi
  local rec tag
  for rec in nvme nvme-d; do
  tag=${rec#nvme}
  if [ "$rec" = nvme-d ] && [ "$(cat "$run/rc-d" 2>/dev/null)" != 0 ]; then
    echo "FAIL nvme.record-d iodump record -d nvme0n1 exited $(cat "$run/rc-d" 2>/dev/null): $(grep -v '^\s*$' "$run/record-d.stderr" | tail -1)" >> "$RES"
    continue
  fi
  "$READ_BIN" info --json "$run/$rec.iod" > "$run/$rec.info.json" 2>> "$run/check.log"
  "$READ_BIN" export "$run/$rec.iod" --format jsonl -o "$run/$rec.jsonl" 2>> "$run/check.log"
  python3 - "$run" "$rec" "$tag" >> "$RES" 2>> "$run/check.log" <<'PY' ||
import json, os, sys
run, rec, tag = sys.argv[1:4]
info = json.load(open(os.path.join(run, rec + ".info.json")))
paths = open(os.path.join(run, "paths")).read().split()
by_name = {d["name"]: d for d in info["devices"]}
head, path = by_name.get("nvme0n1", {}), by_name.get(paths[0] if len(paths) == 1 else "", {})
ok = head.get("label") == "nvme-multipath" and head.get("stacked_on") == [path.get("name")] and path
print(("PASS" if ok else "FAIL") + " nvme.table%s nvme0n1 = %s on %s; %s in the device table (nvme-multipath on %s wanted)" % (
    tag, head.get("label"), ",".join(head.get("stacked_on") or []) or "-", path.get("name", "no path device"), ",".join(paths)))
evs = [json.loads(l) for l in open(os.path.join(run, rec + ".jsonl"))]
hd, pd = head.get("dev"), path.get("dev")
ups = [e for e in evs if e["dev"] == hd and e["comm"] == "dd" and e["sector"] >= 2048]
key = {(e["dev"], e["timestamp_ns"], e["tid"]) for e in ups}
downs = [e for e in evs if pd is not None and e["dev"] == pd]
named = [e for e in downs if (e.get("upper_dev"), e.get("upper_timestamp_ns"), e["tid"]) in key]
good = [e for e in named if e["comm"] == "dd" and e.get("queue_ns") is not None]
for op in ("write", "read"):
    u = sum(1 for e in ups if e["op"] == op)
    g = sum(1 for e in good if e["op"] == op)
    print(("PASS" if u == 200 and g == u else "FAIL") + " nvme.path-%s%s %d of dd's %d %ss of nvme0n1 are done by an I/O on %s that names it, carries dd and has a queue time (%d I/Os on the path in all)" % (
        op, tag, g, u, op, path.get("name", "?"), len(downs)))
PY
    echo "FAIL nvme.check$tag python exited $?: $(tail -1 "$run/check.log")" >> "$RES"
  done
}

# stack_check RUNDIR (stack_suite): per upper device and file, the bytes the devices below
# moved for the file in that device's region, against the bytes the upper device moved for it;
# that each of those lower I/Os names an upper I/O in the trace whose chain of upper I/Os
# reaches the upper device (format 1.4); for writeback, the dirtier; RAID1's fan-out (each
# write to the md device named by one write on each mirror); `analyze --top-files -d` on the
# device; the device table; `analyze --summary` counting each I/O once. NAME: the recording, stack (RUNDIR/stack.iod, its upper devices in
# RUNDIR/devs) or first (RUNDIR/first.iod, RUNDIR/first.devs).
stack_check() {
  local run=$1 name=${2:-stack} devs rc err
  if [ "$name" = stack ]; then
    devs=$run/devs rc=$run/rc err=$run/record.stderr
  else
    devs=$run/$name.devs rc=$run/$name.rc err=$run/$name.stderr
  fi
  [ -f "$rc" ] || return 0
  if [ "$(cat "$rc")" != 0 ]; then
    echo "FAIL stack.$name-record iodump exited $(cat "$rc"): $(grep -v '^\s*$' "$err" | tail -1)" >> "$RES"
    return
  fi
  # The in-flight table never refused an I/O (--stats). Before track() compared the map
  # update's result as an int (inflight.bpf.h), 5.10 refused 6-20 per recording: an old
  # entry with a bio's address was taken for a failed insert, not replaced, and every later
  # I/O with that address was lost.
  if grep -q "kernel counters:" "$err"; then
    if grep -q "lost_inflight=0 " "$err"; then
      echo "PASS stack.$name-inflight-table $(grep -o 'lost_inflight=[0-9]* lost_stale=[0-9]*' "$err")" >> "$RES"
    else
      echo "FAIL stack.$name-inflight-table $(grep -o 'lost_inflight=[0-9]* lost_stale=[0-9]*' "$err")" >> "$RES"
    fi
  fi
  "$READ_BIN" info --json "$run/$name.iod" > "$run/$name.info.json" 2>> "$run/check.log"
  "$READ_BIN" export "$run/$name.iod" --format jsonl -o "$run/$name.jsonl" 2>> "$run/check.log"
  python3 - "$run" "$READ_BIN" "$name" "$devs" >> "$RES" 2>> "$run/check.log" <<'PY' ||
import json, os, subprocess, sys
run, read_bin, rec, devs_file = sys.argv[1:5]
info = json.load(open(os.path.join(run, rec + ".info.json")))
devs = {d["name"]: d["dev"] for d in info["devices"]}
evs = [json.loads(l) for l in open(os.path.join(run, rec + ".jsonl"))]
dd_pids = {e["pid"] for e in evs if e["comm"] == "dd"}
def lost_between(up):  # events the trace's loss records count over the time of the I/Os `up`
    if not up:
        return 0
    a = min(e["timestamp_ns"] for e in up)
    b = max(e["timestamp_ns"] + (e.get("latency_ns") or 0) for e in up)
    return sum(l["count"] for l in info.get("losses") or [] if l["start_ns"] <= b and l["end_ns"] >= a)
by_key = {(e["dev"], e["timestamp_ns"], e["tid"]): e for e in evs}
def upper_of(e):
    return by_key.get((e["upper_dev"], e["upper_timestamp_ns"], e["tid"])) if e.get("upper_dev") else None
def reaches(e, top):  # e's chain of upper I/Os reaches an I/O on top
    for _ in range(4):
        e = upper_of(e)
        if e is None:
            return False
        if e["dev"] == top:
            return True
    return False
for line in open(devs_file):
    name, dm, mnt, lowers, first, size, table = line.split()
    lo, hi = int(first), int(first) + int(size)
    lower = lowers.split(",")
    ldevs = {devs.get(l) for l in lower}
    below = [e for e in evs if e["dev"] in ldevs and lo <= e["sector"] < hi]
    d = next((d for d in info["devices"] if d["name"] == dm), {})
    want = name if dm.startswith("dm-") else "bcache" if dm.startswith("bcache") else "raid" + name[-1]
    if table == "1":
        ok = d.get("label") == want and sorted(d.get("stacked_on") or []) == sorted(lower)
        print(("PASS" if ok else "FAIL") + " stack.%s-table %s = %s on %s in the device table (%s on %s wanted)" % (
            name, dm, d.get("label"), ",".join(d.get("stacked_on") or []) or "-", want, ",".join(lower)))
    tag = name + ("" if table == "1" else "-bottom")
    unfollowed = want in ("raid5", "raid6") and os.path.exists(os.path.join(run, "raid456.nobtf"))
    if unfollowed:  # a kernel without module BTF: the recorder says the writes keep md's thread
        said = [l.strip() for l in open(os.path.join(run, "record.stderr" if rec == "stack" else rec + ".stderr"))
                if "md %s stripes of %s:" % (want, dm) in l]
        print(("PASS" if said else "FAIL") + " stack.%s-unfollowed no raid456 module BTF on this kernel; the recorder said: %s" % (
            tag, said[0] if said else "nothing"))
    for f in () if unfollowed else ("direct.dat", "fsync.dat", "wb.dat"):
        path = os.path.join(mnt, f)
        up = [e for e in evs if e["dev"] == devs.get(dm) and e["path"] == path]
        down = [e for e in below if e["path"] == path]
        ub, db = sum(e["bytes"] for e in up), sum(e["bytes"] for e in down)
        comms = sorted({e["comm"] for e in down})
        # Bytes below short of 90% of those above pass only where the recorder said it lost
        # I/O meanwhile (the kernel skipping a program nested in itself, under the emulator's
        # slow programs): as many lost I/Os as the gap needs at the largest size seen below.
        lost, gap = lost_between(up), 0.9 * ub - db
        biggest = max((e["bytes"] for e in down), default=0)
        bytes_ok = ub > 0 and (gap <= 0 or (lost > 0 and lost * biggest >= gap))
        said_lost = "" if gap <= 0 else "; the recorder reported %d I/Os lost meanwhile" % lost
        if f == "wb.dat":  # the flusher writes it out for dd: the dirtier goes down
            udirt = {e["dirtier_pid"] for e in up}
            ddirt = {e["dirtier_pid"] for e in down}
            ok = bytes_ok and None not in udirt and ddirt == udirt
            what = "dirtiers %s above, %s below" % (sorted(udirt, key=str), sorted(ddirt, key=str))
        elif f == "fsync.dat":  # dd's fsync, or the flusher for dd before it
            # dd's pids are those of its own I/O; when the flusher wrote all of a file before
            # dd's fsync (6.12, CI run of 39dcbb4), that dd has none: then the dirtier of the
            # flusher's writes above is the one below must carry
            for_dd = dd_pids | {e["dirtier_pid"] for e in up if e["comm"] != "dd" and e["dirtier_pid"] is not None}
            ok = bytes_ok and all(e["comm"] == "dd" or e["dirtier_pid"] in for_dd for e in down)
            what = "submitters %s, %d written back for dd" % (
                ",".join(comms) or "-", sum(1 for e in down if e["comm"] != "dd" and e["dirtier_pid"] in for_dd))
        else:
            ok = bytes_ok and comms == ["dd"]
            what = "submitters " + (",".join(comms) or "-")
        print(("PASS" if ok else "FAIL") + " stack.%s-%s %s: %d bytes of %s, %s below: %d bytes (%d I/Os, %s; %d of its %d I/Os in the region carry a path%s)" % (
            tag, f, dm, ub, f, "+".join(lower), db, len(down), what,
            sum(1 for e in below if e["path"] and not e["path"].startswith("[")), len(below), said_lost))
    files = [e for e in below if e["path"] and e["path"].startswith(mnt + "/")]
    unlinked = [e for e in files if not reaches(e, devs.get(dm))]
    # An upper I/O missing from the trace passes only where the recorder's loss records
    # count as many lost I/Os over the time from that upper I/O's start to the lower's end.
    lost = lost_between(unlinked + [dict(timestamp_ns=e["upper_timestamp_ns"]) for e in unlinked if e.get("upper_timestamp_ns")])
    ok = files and (not unlinked or lost >= len(unlinked))
    print(("PASS" if ok else "FAIL") + " stack.%s-parent %d of the %d I/Os below carrying a file of %s name an upper I/O in the trace that is, or is served by, one on %s%s" % (
        tag, len(files) - len(unlinked), len(files), mnt, dm,
        "; the recorder reported %d I/Os lost meanwhile" % lost if unlinked else ""))
    if name == "iodr1" and table == "1":
        writes = [e for e in evs if e["dev"] == devs.get(dm) and e["op"] == "write" and e["path"] == os.path.join(mnt, "direct.dat")]
        named = {}
        for e in below:
            p = upper_of(e)
            if p is not None:
                named.setdefault((p["dev"], p["timestamp_ns"], p["tid"]), set()).add(e["dev"])
        mirrored = sum(1 for w in writes if named.get((w["dev"], w["timestamp_ns"], w["tid"])) == ldevs)
        print(("PASS" if writes and mirrored == len(writes) else "FAIL") + " stack.%s-fanout %d of the %d O_DIRECT writes to %s are named by a write on each of %s" % (
            name, mirrored, len(writes), dm, "+".join(lower)))
    if want == "bcache" and table == "1":
        # bcache: writethrough writes go into the cache device too (those it has a free bucket
        # for at once: a writethrough write does not wait for one, the rest goes around the
        # cache), reads of direct.dat come from the cache (hits) or, for what went around it,
        # from the backing device, reads of miss.dat (written around the cache) from the
        # backing device in bcache's own bios (misses), writeback writes of back.dat (which
        # wait for a bucket) go into the cache device; each I/O below names the bcache I/O
        # it serves.
        nobtf = os.path.exists(os.path.join(run, "bcache.nobtf"))
        def named(f, op, lows):
            path = os.path.join(mnt, f)
            up = [e for e in evs if e["dev"] == devs.get(dm) and e["path"] == path and e["op"] == op]
            down = [e for e in evs if e["dev"] in {devs.get(l) for l in lows} and e["path"] == path and e["op"] == op and reaches(e, devs.get(dm))]
            return up, down
        for what, f, op, lows, part in (("writethrough", "direct.dat", "write", [lower[1]], 0.0),
                                        ("hit", "direct.dat", "read", lower, 0.9),
                                        ("miss", "miss.dat", "read", [lower[0]], 0.9),
                                        ("writeback", "back.dat", "write", [lower[1]], 0.9)):
            if what == "miss" and nobtf:  # the recorder must say the misses are not followed
                said = [l.strip() for l in open(os.path.join(run, "record.stderr" if rec == "stack" else rec + ".stderr"))
                        if "bcache %s:" % dm in l]
                print(("PASS" if said else "FAIL") + " stack.%s-unfollowed no bcache module BTF on this kernel; the recorder said: %s" % (
                    name, said[0] if said else "nothing"))
                continue
            up, down = named(f, op, lows)
            ub, db = sum(e["bytes"] for e in up), sum(e["bytes"] for e in down)
            cache = sum(e["bytes"] for e in down if e["dev"] == devs.get(lower[1]))
            lost, gap = lost_between(up), part * ub - db
            biggest = max((e["bytes"] for e in down), default=0)
            ok = ub > 0 and (gap <= 0 or (lost > 0 and lost * biggest >= gap))
            if what in ("writethrough", "hit"):
                ok = ok and cache > 0  # some of it went into, or came from, the cache
            if what == "hit" and nobtf:  # what went around the cache is read as misses
                ok = ub > 0 and cache > 0
            print(("PASS" if ok else "FAIL") + " stack.%s-%s %s: %d bytes of %ss of %s, %s below: %d bytes naming them (%d on the cache device, %s)%s" % (
                name, what, dm, ub, op, f, "+".join(lows), db, cache, lower[1],
                "" if gap <= 0 else "; the recorder reported %d I/Os lost meanwhile" % lost))
    if name == "iodmp":
        # dm-multipath: each request is cloned onto one path, the paths taken in turn
        ios = [e for e in evs if e["dev"] == devs.get(dm) and e["op"] in ("read", "write") and e["path"] == os.path.join(mnt, "direct.dat")]
        named = {}
        for e in below:
            p = upper_of(e)
            if p is not None:
                named.setdefault((p["dev"], p["timestamp_ns"], p["tid"]), []).append(e["dev"])
        once = sum(1 for u in ios if len(named.get((u["dev"], u["timestamp_ns"], u["tid"]), [])) == 1)
        paths = {d for v in named.values() for d in v}
        print(("PASS" if ios and once == len(ios) and paths == ldevs else "FAIL") + " stack.iodmp-paths %d of the %d O_DIRECT I/Os to %s are named by one I/O below, on %d of its %d paths" % (
            once, len(ios), dm, len(paths & ldevs), len(ldevs)))
    if want in ("raid5", "raid6") and table == "1" and not unfollowed:
        # RAID5 writes go down from the stripe cache: each O_DIRECT write's data and the parity
        # computed for it are written below naming it. On three disks that is at least 1.5
        # times its bytes (a parity block per two data blocks of a stripe; as much parity as
        # data where the write fills one data block of a stripe only, as dd's 64 KiB do).
        # RAID6 on four disks: two parity blocks per two data blocks, at least twice.
        factor = 1.5 if want == "raid5" else 2.0
        writes = [e for e in evs if e["dev"] == devs.get(dm) and e["op"] == "write" and e["path"] == os.path.join(mnt, "direct.dat")]
        named = {}
        for e in below:
            p = upper_of(e)
            if p is not None and e["op"] == "write":
                k = (p["dev"], p["timestamp_ns"], p["tid"])
                named[k] = named.get(k, 0) + e["bytes"]
        full = sum(1 for w in writes if named.get((w["dev"], w["timestamp_ns"], w["tid"]), 0) >= factor * w["bytes"])
        print(("PASS" if writes and full == len(writes) else "FAIL") + " stack.%s-parity %d of the %d O_DIRECT writes to %s are named by writes below of their data and its parity (at least %.1f times their bytes)" % (
            name, full, len(writes), dm, factor))
    top = subprocess.run([read_bin, "analyze", os.path.join(run, rec + ".iod"), "--top-files", "-d", lower[0],
                          "--limit", "100", "--format", "json"], capture_output=True, text=True)
    paths = {r.get("path") for r in json.loads(top.stdout or "[]")} if top.returncode == 0 else set()
    want_path = os.path.join(mnt, "direct.dat")
    print(("PASS" if want_path in paths else "FAIL") + " stack.%s-topfiles analyze --top-files -d %s lists %s (exit %d%s)" % (
        tag, lower[0], want_path, top.returncode, (": " + top.stderr.strip().splitlines()[-1]) if top.returncode else ""))
# Questions about the workload count each I/O once: an I/O a stacked device sent down is left
# out when that device has I/O in the trace (README, Stacked devices).
with_io = {e["dev"] for e in evs}
once = sum(1 for e in evs if e.get("upper_dev") not in with_io)
summ = subprocess.run([read_bin, "analyze", os.path.join(run, rec + ".iod"), "--summary", "--format", "json"],
                      capture_output=True, text=True)
got = next((r["value"] for r in json.loads(summ.stdout or "[]") if r.get("metric") == "events"),
           None) if summ.returncode == 0 else None
print(("PASS" if got == once and once < len(evs) else "FAIL") + " stack.%s-once analyze --summary counts %s I/Os: each once (%d events recorded, %d of them sent down by a device with I/O in the trace)" % (
    rec, got, len(evs), len(evs) - once))
chain = os.path.join(run, "chain.dev")
if rec == "first" and os.path.exists(chain):
    # A discard of a whole device in a run of chained bios: kernels before 5.12 (struct bio
    # with bi_disk; the fix came in 5.13 and 5.12.17) pass a chained bio's end to the next
    # bio untraced: the run's last bio alone is recorded and the others are counted as lost
    # (completion_not_traced); later kernels record every bio of the run. The run's bios are not
    # left in flight at the end (5.10 left them in the in-flight table); other I/O may be.
    import re
    zd, size = open(chain).read().split()
    size = int(size)
    rel = re.match(r"(\d+)\.(\d+)", info.get("kernel_release") or "")
    untraced = rel is not None and (int(rel.group(1)), int(rel.group(2))) < (5, 12)
    disc = [e for e in evs if e["dev"] == devs.get(zd) and e["op"] == "discard"]
    not_traced = sum(l["count"] for l in info.get("losses") or [] if l["reason"] == "completion_not_traced")
    left = re.findall(r"\d+ I/Os? still in flight at the end", open(os.path.join(run, rec + ".stderr")).read())
    nleft = int(left[0].split()[0]) if left else 0
    if untraced:
        # The run's other bios counted as lost, not also kept in the in-flight table (which
        # left as many in flight as were counted, or more, before the fix).
        ok = (len(disc) == 1 and disc[0]["sector"] * 512 + disc[0]["bytes"] == size and not_traced >= 1
              and nleft < not_traced)
    else:
        # Every bio of the run recorded: none of them is among the I/Os in flight at the end,
        # which are other devices' (a file system's background writes: 6.12, 2026-12-07).
        ok = len(disc) >= 2 and sum(e["bytes"] for e in disc) == size and not_traced == 0
    print(("PASS" if ok else "FAIL") + " stack.first-chained %s: %d discards of %d bytes recorded on %s, %d counted as completion_not_traced (%s); %s" % (
        info.get("kernel_release"), len(disc), sum(e["bytes"] for e in disc), zd, not_traced,
        "the run's last bio alone and the others counted wanted" if untraced else "every bio of the run wanted",
        left[0] if left else "nothing left in flight at the end"))
grow = os.path.join(run, "grow.devs")
if rec == "first" and os.path.exists(grow):
    # A table reloaded onto one more device while recording: the device's entry names both,
    # and the I/O it sent to the new one is below it.
    g1, g2 = open(grow).read().split()
    d = next((d for d in info["devices"] if d.get("label") == "iodgrow"), {})
    sent = [e for e in evs if e["dev"] == devs.get(g2) and d and e.get("upper_dev") == d.get("dev")]
    ok = sorted(d.get("stacked_on") or []) == sorted([g1, g2]) and len(sent) > 0
    print(("PASS" if ok else "FAIL") + " stack.iodgrow-reload %s on %s in the device table (%s wanted after the reload); %d I/Os it sent to %s" % (
        d.get("name"), ",".join(d.get("stacked_on") or []) or "-", ",".join([g1, g2]), len(sent), g2))
thin = os.path.join(run, "thin.devs")
if rec == "stack" and os.path.exists(thin):  # the thin device's line checks its data device
    t, pool = open(thin).read().split()
    d = next((d for d in info["devices"] if d["name"] == t), {})
    p = next((d for d in info["devices"] if d["name"] == pool), {})
    ok = d.get("label") == "iodthin" and d.get("stacked_on") == [pool] and p.get("label") == "iodpool"
    print(("PASS" if ok else "FAIL") + " stack.iodthin-table %s = %s on %s, %s = %s in the device table (iodthin on %s = iodpool wanted)" % (
        t, d.get("label"), ",".join(d.get("stacked_on") or []) or "-", pool, p.get("label"), pool))
PY
    echo "FAIL stack.$name-check python exited $?: $(tail -1 "$run/check.log")" >> "$RES"
}

# `guest.sh --check OUTDIR` (run.sh, on the host after the guest powered off): the checks of
# the recordings the guest made, appended to results.txt.
if [ $CHECK_ONLY = 1 ]; then
  if [ -f "$OUT/runs.txt" ]; then
    while read -r label; do
      check_run "$OUT/$label" > /dev/null
    done < "$OUT/runs.txt"
  fi
  flight_check "$OUT/flight"
  nvme_check "$OUT/nvme"
  stack_check "$OUT/stack"
  stack_check "$OUT/stack" first
  grep -q '^FAIL' "$RES" && exit 1
  exit 0
fi
FIO_IOS=${IODUMP_KT_FIO_IOS:-3000}
FS_FIO_IOS=${IODUMP_KT_FS_FIO_IOS:-1000}
FS_SCHED=${IODUMP_KT_FS_SCHED:-mq-deadline}
DEVICES=${IODUMP_KT_DEVICES:-req-none req-mq-deadline zram xfs btrfs}
# The flight recorder's trigger on real slow I/O needs null_blk (a module of the guests'
# kernels; this host has none): in a guest by default.
[ -z "${IODUMP_KT_DEVICES:-}" ] && [ "${IODUMP_GUEST:-0}" = 1 ] && DEVICES+=" flight stack nvme"
: > "$RES"
rm -f "$OUT/done" "$OUT/runs.txt"
exec > >(tee -a "$OUT/guest.log") 2>&1
T0=$(date +%s.%N)
echo "uptime $(cut -d' ' -f1 /proc/uptime) start $T0" > "$OUT/started"

pass() { echo "PASS $*" >> "$RES"; echo "PASS $*"; }
fail() { echo "FAIL $*" >> "$RES"; echo "FAIL $*"; }
say() { echo "--- $* ($(cut -d' ' -f1 /proc/uptime) s up)"; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
finish() {
  local n f
  n=$(grep -c '^PASS' "$RES"); f=$(grep -c '^FAIL' "$RES")
  echo "suite_seconds $(since "$T0") passed $n failed $f" > "$OUT/done"
  say "done: $n passed, $f failed in $(since "$T0") s"
  [ "$f" = 0 ]
  exit $?
}

if [ "${IODUMP_GUEST:-0}" = 1 ]; then
  MODE=guest
  grep -q virtme /proc/cmdline || { fail setup.mode "IODUMP_GUEST=1 but /proc/cmdline has no virtme"; finish; }
else
  MODE=host
fi
[ "$(id -u)" = 0 ] || { fail setup.root "must run as root"; finish; }
say "mode $MODE, kernel $(uname -r), iodump $BIN"
uname -a; cat /proc/cmdline; echo "memlock $(ulimit -l)"
ls /sys/kernel/btf 2>&1 | head -5
"$BIN" --version || { fail setup.binary "cannot run $BIN"; finish; }
[ "$READ_BIN" = "$BIN" ] || echo "traces read with $READ_BIN"

# --- modules
need_mod() {
  local m=$1
  if modprobe "$m" 2>"$OUT/modprobe.err"; then return 0; fi
  fail "setup.modprobe-$m" "$(tr '\n' ' ' < "$OUT/modprobe.err")"
  return 1
}
if [ "$MODE" = guest ]; then
  v=$(uname -r)
  if [ ! -e "/lib/modules/$v/modules.dep" ] && [ -n "${IODUMP_KMOD_DIR:-}" ]; then
    mount --bind "$IODUMP_KMOD_DIR" /lib/modules || fail setup.modules "cannot bind $IODUMP_KMOD_DIR on /lib/modules"
  fi
  ok=1 mods="virtio_blk zram ext4"
  for m in xfs btrfs; do case " $DEVICES " in *" $m "*) mods+=" $m" ;; esac; done
  for m in $mods; do need_mod $m || ok=0; done
  [ $ok = 1 ] && pass setup.modules "$mods loaded from /lib/modules/$v"
else
  [ -e /sys/class/zram-control/hot_add ] || need_mod zram
  for m in xfs btrfs; do
    case " $DEVICES " in *" $m "*) grep -qw "$m" /proc/filesystems || need_mod $m ;; esac
  done
fi

# --- devices: never one we did not make (host) or that lacks run.sh's signature (guest)
CREATED_ZRAM=() CREATED_LOOP=() MOUNTED=() BCACHE=() MDS=()
cleanup() {
  local m z l
  for m in "${MOUNTED[@]}"; do umount "$m" 2>/dev/null; done
  bcache_stop
  for z in "${CREATED_ZRAM[@]}"; do
    echo 1 > "/sys/block/zram$z/reset" 2>/dev/null
    echo "$z" > /sys/class/zram-control/hot_remove 2>/dev/null
  done
  for l in "${CREATED_LOOP[@]}"; do losetup -d "$l" 2>/dev/null; done
  rm -f "$OUT/scratch-loop.img"
}
trap cleanup EXIT

VDA_SIGNED=0
safe_dev() { # DEV: refuse anything but our scratch devices (the reason in $REFUSED)
  local dev=$1 ours=0 z l root
  REFUSED=
  if grep -q "^/dev/$dev[ p0-9]" /proc/mounts /proc/swaps 2>/dev/null; then
    REFUSED="refusing $dev: mounted or swap"; return 1
  fi
  if [ -n "$(ls /sys/block/"$dev"/holders 2>/dev/null)" ]; then
    REFUSED="refusing $dev: it has holders"; return 1
  fi
  case "$MODE:$dev" in
    guest:vda)
      root=$(awk '$2 == "/" {print $1}' /proc/mounts | tail -1)
      case $root in /dev/vda*) REFUSED="refusing vda: / is on it"; return 1 ;; esac
      # run.sh writes the signature at the start of the image; mkfs overwrites it later
      if [ $VDA_SIGNED = 0 ]; then
        [ "$(head -c ${#MAGIC} /dev/vda 2>/dev/null)" = "$MAGIC" ] ||
          { REFUSED="refusing vda: no $MAGIC signature at its start"; return 1; }
        VDA_SIGNED=1
      fi ;;
    guest:nvme0n1)
      # run.sh signs the NVMe namespace's image too; the suite writes past its first MiB
      [ "$(head -c ${#MAGIC} /dev/nvme0n1 2>/dev/null)" = "$MAGIC" ] ||
        { REFUSED="refusing nvme0n1: no $MAGIC signature at its start"; return 1; } ;;
    guest:zram*|host:zram*|host:loop*)
      for z in "${CREATED_ZRAM[@]}"; do [ "$dev" = "zram$z" ] && ours=1; done
      for l in "${CREATED_LOOP[@]}"; do [ "/dev/$dev" = "$l" ] && ours=1; done
      [ $ours = 1 ] || { REFUSED="refusing $dev: not made by this script"; return 1; } ;;
    *) REFUSED="refusing $dev in $MODE mode"; return 1 ;;
  esac
}

req_dev() { # the request-based device: vda (guest) or a new loop device (host)
  if [ "$MODE" = guest ]; then
    for _ in $(seq 50); do [ -e /sys/block/vda ] && break; sleep 0.1; done
    if [ ! -e /sys/block/vda ]; then fail setup.vda "no /sys/block/vda after modprobe virtio_blk ($(ls /sys/block | tr '\n' ' '))"; return 1; fi
    [ -b /dev/vda ] || mknod /dev/vda b $(tr ':' ' ' < /sys/block/vda/dev)
    REQ=vda
  else
    [ -n "${REQ:-}" ] && return 0
    truncate -s 512M "$OUT/scratch-loop.img" || return 1
    local l
    l=$(losetup -f --show --direct-io=on "$OUT/scratch-loop.img") || { fail setup.loop "losetup failed"; return 1; }
    CREATED_LOOP+=("$l")
    REQ=${l#/dev/}
  fi
  safe_dev "$REQ" || { fail setup.device "$REFUSED"; return 1; }
  [ "${REQ_OK:-}" = "$REQ" ] || { pass setup.device "$REQ: $(readlink -f /sys/block/$REQ/device/driver 2>/dev/null | xargs -r basename) $(( $(cat /sys/block/$REQ/size) / 2048 )) MiB, request-based"; REQ_OK=$REQ; }
}

zram_dev() { # [SIZE]: a new zram device of SIZE (512M), its name in ZR
  local z
  z=$(cat /sys/class/zram-control/hot_add 2>/dev/null) || { fail setup.zram "zram hot_add failed"; return 1; }
  CREATED_ZRAM+=("$z")
  echo "${1:-512M}" > "/sys/block/zram$z/disksize" || { fail setup.zram "zram$z disksize ${1:-512M}"; return 1; }
  for _ in $(seq 50); do [ -b "/dev/zram$z" ] && break; sleep 0.1; done
  [ -b "/dev/zram$z" ] || mknod "/dev/zram$z" b $(tr ':' ' ' < "/sys/block/zram$z/dev")
  ZR=zram$z
}

quiesce() { # DEV MNT: nothing dirty, nothing in flight
  sync -f "$2"
  # xfs and btrfs leave work for later after a sync (xfs covers its log from a worker, btrfs
  # commits from its transaction thread): a freeze does it now, so that no background I/O
  # starts between the stat and iodump's start
  case $FS in xfs|btrfs) fsfreeze -f "$2" && fsfreeze -u "$2" ;; esac
  for _ in $(seq 100); do
    [ "$(awk '{print $9}' "/sys/block/$1/stat")" = 0 ] && return 0
    sleep 0.1
  done
  echo "warning: $1 still has I/O in flight"
}

# record LABEL DEV KIND MIN_IOS ROLE=FILE... -- CMD...: one recording, and what its checks need:
# the device's stat before and after, the test files' paths, sizes and extents (ROLE.pid, the
# writer's pid, is left by the workload). The checks run at the end of device_suite on the
# host, and after power-off (run.sh: guest.sh --check) in the guest, where python and iodump's
# export are slow over 9p.
PENDING=()
record() {
  local label=$1 dev=$2 kind=$3 min_ios=$4; shift 4
  local files=() roles="" f role rc t
  while [ "$1" != -- ]; do files+=("$1"); roles+="${roles:+,}\"${1%%=*}\""; shift; done
  shift
  local run=$OUT/$label
  mkdir -p "$run"
  quiesce "$dev" "$MNT"
  t=$(date +%s.%N)
  # The device's counters before: read by the traced command itself, so once iodump has
  # attached (its start takes seconds under TCG, in which a filesystem's background work,
  # xfs's log worker, may write: not in the trace, but in a delta taken before the start).
  # An I/O that completes after the attach but before that read is in the trace and not in
  # the delta: the kernel's CLOCK_MONOTONIC (the trace's clock) just before and just after
  # the read (stat1.mono) lets check.py leave those out.
  "$BIN" record -d "$dev" -o "$run/trace.iod" --stats -- \
    sh -c 'mono() { grep -m1 "now at" /proc/timer_list | tr -dc 0-9; echo; }
           { mono && cat "$1" > "$2" && mono; } > "$2.mono" && shift 2 && exec "$@"' \
    sh "/sys/block/$dev/stat" "$run/stat1" "$@" \
    > "$run/workload.out" 2> "$run/record.stderr"
  rc=$?
  cat "/sys/block/$dev/stat" > "$run/stat2"
  say "$label: iodump record exited $rc after $(since "$t") s"
  sed 's/^/    /' "$run/record.stderr" | tail -8
  for f in "${files[@]}"; do
    role=${f%%=*} f=${f#*=}
    readlink -f "$f" > "$run/$role.path"
    stat -c %s "$f" > "$run/$role.size" 2>&1
    filefrag -v -b512 "$f" > "$run/$role.frag" 2>&1
  done
  printf '{"label":"%s","dev":"%s","fs":"%s","kind":"%s","rc":%d,"min_ios":%d,"roles":[%s]}\n' \
    "$label" "$dev" "$FS" "$kind" "$rc" "$min_ios" "$roles" > "$run/run.json"
  echo "$label" >> "$OUT/runs.txt"
  if [ "$MODE" = guest ] && [ "${IODUMP_KT_CHECK_IN_GUEST:-0}" != 1 ]; then
    # Without a trace there is nothing to read later: say so now.
    [ "$rc" = 0 ] || echo "FAIL $label.record iodump exited $rc: $(grep -v '^\s*$' "$run/record.stderr" | tail -1)"
  else
    PENDING+=("$run")
  fi
}

# btrfs_probe FILE: what iodump's paths of btrfs direct I/O need from this kernel, for
# check.py's expectation (README: before 6.3 struct btrfs_bio names no inode; 5.10 has no
# module BTF and completes btrfs direct I/O on its own path): the completion functions the
# recorder keys on (/proc/kallsyms) and whether struct btrfs_bio has an `inode` member (BTF).
btrfs_probe() {
  local s f=/sys/kernel/btf/btrfs base=(-B /sys/kernel/btf/vmlinux)
  {
    echo "kernel $(uname -r)"
    for s in btrfs_simple_end_io btrfs_orig_write_end_io; do
      if grep -qw "$s" /proc/kallsyms; then echo "ksym $s 1"; else echo "ksym $s 0"; fi
    done
    # btrfs as a module: its types are in module BTF (none before 5.11); built in: vmlinux's
    [ -e "$f" ] || { echo "btf_module_file 0"; f=/sys/kernel/btf/vmlinux base=(); }
    if [ ! -e "$f" ]; then
      echo "btrfs_bio.inode unknown (no $f)"
    elif ! command -v bpftool > /dev/null; then
      echo "btrfs_bio.inode unknown (no bpftool)"
    else
      bpftool btf dump "${base[@]}" file "$f" format raw 2>&1 | awk -v q="'" '
        /^\[/ { s = ($2 == "STRUCT" && $3 == q "btrfs_bio" q); if (s) found = 1 }
        s && $1 == q "inode" q { inode = 1 }
        END { print "btrfs_bio.inode " (found ? (inode ? 1 : 0) : "none") }'
    fi
  } > "$1" 2>&1
}

# device_suite LABEL DEV [FS]: mkfs, mount, the two recordings, umount, the checks (host).
# ext4 (default): 3000 reads, then the fsync'ed and the written-back file; xfs, btrfs: fewer
# reads and the fsync'ed file only (the matrix's time).
device_suite() {
  local label=$1 dev=$2 ios=$FIO_IOS mopt=noatime wl= r mkfs xc files mnote=
  FS=${3:-ext4}
  case $FS in
    ext4) mkfs=(mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0)
          mopt=noatime,noinit_itable ;;
    xfs) # this host's xfsprogs may default to features an older kernel lacks: its config for
         # that LTS kernel, when it has one (and can read it: see below)
         xc=/usr/share/xfsprogs/mkfs/lts_$(uname -r | cut -d. -f1,2).conf
         mkfs=(mkfs.xfs -q -f -K); [ -f "$xc" ] && mkfs+=(-c "options=$xc") ;;
    btrfs) # nodiscard: btrfs 6.2+ mounts with discard=async where the device takes discards,
           # which discards freed metadata blocks minutes later, in whichever recording runs
           mkfs=(mkfs.btrfs -q -f -K) mopt=noatime,nodiscard ;;
  esac
  [ "$FS" = ext4 ] || { ios=$FS_FIO_IOS wl=fsync; }
  safe_dev "$dev" || { fail "$label.device" "$REFUSED"; return; }
  command -v "${mkfs[0]}" > /dev/null || { fail "$label.mkfs" "no ${mkfs[0]} on this system"; return; }
  MNT=$(mktemp -d /tmp/iodump-kt.XXXXXX)
  if ! "${mkfs[@]}" "/dev/$dev" > "$OUT/mkfs.log" 2>&1; then
    # bookworm's xfsprogs 6.1 rejects its own lts_5.10.conf and lts_6.1.conf ("Unrecognised
    # input on line 5": nrext64): its defaults then (5.10 and later mount them)
    if [ "$FS" = xfs ] && [ "${#mkfs[@]}" -gt 4 ]; then
      mnote=" ($(basename "$xc") refused: $(tail -1 "$OUT/mkfs.log" | sed 's/^[^:]*: //'))"
      mkfs=(mkfs.xfs -q -f -K)
      "${mkfs[@]}" "/dev/$dev" > "$OUT/mkfs.log" 2>&1
    else false; fi || { fail "$label.mkfs" "${mkfs[*]} /dev/$dev: $(tail -1 "$OUT/mkfs.log")"; return; }
  fi
  if ! mount -t "$FS" -o "$mopt" "/dev/$dev" "$MNT" 2> "$OUT/mount.err"; then
    fail "$label.mount" "$FS: $(cat "$OUT/mount.err") ($(dmesg | tail -2 | tr '\n' ' '))"; return
  fi
  MOUNTED+=("$MNT")
  [ "$FS" = ext4 ] || pass "$label.mount" "${mkfs[*]} /dev/$dev$mnote; mount -t $FS -o $mopt: $(awk -v m="$MNT" '$2 == m {print $4}' /proc/mounts)"
  dd if=/dev/zero of="$MNT/fio.dat" bs=1M count=64 conv=fsync status=none
  files=("fsync=$MNT/fsync.dat")
  [ -z "$wl" ] && files+=("writeback=$MNT/writeback.dat")

  mkdir -p "$OUT/$label.randread" "$OUT/$label.write"
  record "$label.randread" "$dev" randread "$ios" "direct=$MNT/fio.dat" -- \
    fio --name=randread --filename="$MNT/fio.dat" --size=64M --rw=randread --bs=4k --direct=1 \
    --ioengine=psync --number_ios="$ios" --randrepeat=1 --output="$OUT/$label.randread/fio.txt"
  r=$OUT/$label.write
  record "$label.write" "$dev" write 1 "${files[@]}" -- \
    bash "$HERE/guest.sh" --write-workload "$MNT" "$r" $wl
  umount "$MNT" && MOUNTED=("${MOUNTED[@]/$MNT}")
  rmdir "$MNT"
  if [ "$FS" = btrfs ]; then
    # filefrag shows btrfs's logical addresses: check.py maps them to the device's sectors
    # with the chunk tree, read after umount (everything committed; --flushbufs: no stale
    # page cache of the device)
    blockdev --flushbufs "/dev/$dev"
    btrfs inspect-internal dump-tree -t chunk "/dev/$dev" > "$OUT/$label.chunks" 2>&1
    btrfs_probe "$OUT/$label.btrfs-probe"
    for r in randread write; do
      cp "$OUT/$label.chunks" "$OUT/$label.$r/chunks.txt"
      cp "$OUT/$label.btrfs-probe" "$OUT/$label.$r/btrfs-probe.txt"
    done
  fi
  for r in "${PENDING[@]}"; do check_run "$r"; done
  PENDING=()
}

set_sched() { # LABEL DEV SCHED
  local s=/sys/block/$2/queue/scheduler
  grep -qw "$3" "$s" || modprobe "$3" 2>/dev/null || modprobe "${3/-/_}" 2>/dev/null
  echo "$3" > "$s" 2>/dev/null
  if grep -q "\[$3\]" "$s"; then pass "$1.scheduler" "$2: $(cat "$s")"; return 0; fi
  fail "$1.scheduler" "cannot set $3 on $2: $(cat "$s")"
  return 1
}

# flight_suite: the flight recorder's trigger on real slow I/O. null_blk with a timer
# completion of 30 ms (irqmode=2) is the slow device; zram beside it the fast one. Under
# `record --ring 30s --trigger 'latency > 20ms && dev == nullb0' --after 3s`: 300 zram writes,
# 10 null_blk writes (the first fires the trigger), 300 zram writes, then a pause longer than
# --after: flight_check reads the one snapshot.
flight_suite() {
  local run=$OUT/flight nb=nullb0
  mkdir -p "$run/snaps"
  if ! modprobe null_blk nr_devices=1 irqmode=2 completion_nsec=30000000 gb=1 2> "$run/modprobe.err"; then
    fail setup.null_blk "$(tr '\n' ' ' < "$run/modprobe.err")"; return
  fi
  for _ in $(seq 50); do [ -e /sys/block/$nb ] && break; sleep 0.1; done
  [ -b /dev/$nb ] || mknod /dev/$nb b $(tr ':' ' ' < /sys/block/$nb/dev)
  zram_dev || return
  echo "$nb" > "$run/nullb"; echo "$ZR" > "$run/zram"
  pass setup.null_blk "$nb: $(cat /sys/module/null_blk/parameters/completion_nsec) ns completions (irqmode $(cat /sys/module/null_blk/parameters/irqmode)); $ZR beside it"
  local t
  t=$(date +%s.%N)
  "$BIN" record -d "$nb" -d "$ZR" -o "$run/snaps/" --ring 30s \
    --trigger "latency > 20ms && dev == $nb" --after 3s -- \
    sh -c "dd if=/dev/zero of=/dev/$ZR bs=4k count=300 oflag=direct status=none &&
           dd if=/dev/zero of=/dev/$nb bs=4k count=10 oflag=direct status=none &&
           dd if=/dev/zero of=/dev/$ZR bs=4k count=300 seek=1000 oflag=direct status=none &&
           sleep 5" > "$run/workload.out" 2> "$run/record.stderr"
  echo $? > "$run/rc"
  say "flight: iodump record exited $(cat "$run/rc") after $(since "$t") s"
  sed 's/^/    /' "$run/record.stderr" | tail -4
  # An I/O that hangs, seen while it hangs (top's in_flight_slow; hang_check): a write to a
  # loop device whose backing file is on a frozen ext4 (on a new zram device), thawed 5 s on.
  local hz hm=$run/hang-mnt lo tp ddp
  if need_mod loop && zram_dev 256M && hz=$ZR && mkfs.ext4 -q -F "/dev/$hz" && mkdir -p "$hm" &&
    mount "/dev/$hz" "$hm" && truncate -s 16M "$hm/img" && lo=$(losetup -f --show "$hm/img") &&
    CREATED_LOOP+=("$lo"); then
    echo "${lo#/dev/}" > "$run/hang.dev"
    "$BIN" top -b --json -i 1s -n 12 -d "${lo#/dev/}" > "$run/hang.jsonl" 2> "$run/hang.stderr" &
    tp=$!
    for _ in $(seq 900); do
      grep -q "^iodump: recording" "$run/hang.stderr" && break
      kill -0 $tp 2> /dev/null || break
      sleep 0.1
    done
    fsfreeze -f "$hm"
    dd if=/dev/zero of="$lo" bs=4k count=1 oflag=direct status=none &
    ddp=$!
    sleep 5
    fsfreeze -u "$hm"
    wait $ddp
    wait $tp; echo $? > "$run/hang.rc"
    say "flight: top with a write hung 5 s exited $(cat "$run/hang.rc")"
    # FUA writes on this loop device (no FUA, a write cache): each ends at the end of its
    # flush sequence (fua_check)
    "$BIN" record -d "${lo#/dev/}" --stats -o "$run/fua.iod" -- \
      dd if=/dev/zero of="$lo" bs=4k count=50 oflag=direct,dsync status=none 2> "$run/fua.stderr"
    echo $? > "$run/fua.rc"
    echo "$(cat "/sys/block/${lo#/dev/}/queue/fua") $(cat "/sys/block/${lo#/dev/}/queue/write_cache")" > "$run/fua.queue"
    losetup -d "$lo"; umount "$hm"
    CREATED_LOOP=("${CREATED_LOOP[@]/$lo}")
  else
    fail setup.hang "a loop device on ext4 on a new zram device could not be made"
  fi
  [ "$MODE" = guest ] || flight_check "$run"
}

# stack_suite: files through stacked devices. On the request-based scratch disk (vda in a
# guest): dm-linear over its first 200 MiB after 1 MiB and dm-crypt (aes-xts-plain64, a fixed
# key, no header) over the next 200 MiB; md RAID1 over two new zram devices and md RAID0 over
# two more; ext4 on each. Every device is recorded while dd, on each, writes a file with
# O_DIRECT, writes another and fsyncs it, reads the first back with O_DIRECT and writes a
# third that the flusher writes out (sync). Also LVM on md (dm-linear over md RAID1 of two
# zram devices), LVM striped (dm-striped over two zram devices), LVM thin and cache volumes
# (dm-thin, dm-cache) and dm-multipath (request-based, over a loop device).
# stack_check: the I/O of the devices below (in the upper device's region) carries the files'
# paths and dd, for at least as many bytes as the upper device's own I/O of those files
# (dm-crypt's writes go down from its dmcrypt_write thread over bounce pages; md's from md
# threads), and names its upper I/O. $run/devs: one line per upper device: label, kernel
# name, mount point, the devices below (comma-separated), first sector and sectors of its
# region on them, and 1 when those are the devices it is stacked on (0: the disks below
# another stacked device, for LVM on md).
STACK_SECTORS=$((200 * 2048))
FIRST_SECTORS=$((64 * 2048))
stack_suite() {
  local run=$OUT/stack n d dm key=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  mkdir -p "$run"
  : > "$run/devs"
  need_mod dm_mod && need_mod dm_crypt || return
  req_dev || return
  # The first stacked device, made while recording (a server's first LVM volume, a dm-crypt
  # volume opened after boot, with none before): dm-linear over a zram device, made,
  # formatted and mounted by the recorded command, then written and read as the others;
  # followed from its first I/O on, it is checked as they are (stack_check ... first). Then
  # the first md RAID5 (iodf5, three zram devices), its module loaded by the recorded
  # command: raid456's layout is read once the array appears. Then the first bcache device
  # (iodfbc, two zram devices), its module loaded by the recorded command too: bcache's
  # layout is read once the device appears; its misses are checked as the other one's. Its
  # cache is attached two seconds after it runs and is read (bcache-make.sh later): its
  # device table entry, first on the backing device alone, must name the cache too.
  # Before them, a discard of a whole 9 GiB zram device (nothing written, no memory used),
  # which goes down as a run of chained bios (zram takes up to 4 GiB a bio): kernels before
  # 5.12 never trace a chained bio's completion (stack_check ... first: chained).
  # Then a device-mapper table reloaded onto one more device while recording (lvextend):
  # iodgrow, dm-linear on one zram device, written once (a second for the recorder to follow
  # it), then on two, written past the first: its device table entry names both.
  local zf fm=$run/mnt-iodfirst f5=$run/mnt-iodf5 a b c fb fc fbm=$run/mnt-iodfbc zd g1 g2
  if zram_dev && zf=$ZR && zram_dev && a=$ZR && zram_dev && b=$ZR && zram_dev && c=$ZR &&
    zram_dev && fb=$ZR && zram_dev && fc=$ZR && zram_dev 9G && zd=$ZR &&
    zram_dev 16M && g1=$ZR && zram_dev 16M && g2=$ZR &&
    echo "$zd $((9 << 30))" > "$run/chain.dev" && echo "$g1 $g2" > "$run/grow.devs"; then
    # The first bcache device only where modules have BTF (not 5.10): what it checks beyond
    # the other bcache device is that bcache's layout is read when the device appears.
    local fbc=
    [ -e /sys/kernel/btf/zram ] && fbc="bd=\$(bash $HERE/bcache-make.sh $fb $fc later 2> $run/fbc.err) || { cat $run/fbc.err >&2; exit 1; }
      mkfs.ext4 -q -F /dev/\$bd && mkdir -p $fbm && mount /dev/\$bd $fbm && sync -f $fbm &&
        echo \"iodfbc \$bd $fbm $fb,$fc 0 $(cat /sys/block/$fb/size) 1\" >> $run/first.devs || exit 1
      $(stack_io "$fbm") || exit 1
      $(bcache_miss_io "\$bd" "$fbm")"
    "$BIN" record -o "$run/first.iod" -- sh -c "blkdiscard /dev/$zd || exit 1
      dmsetup create iodgrow --table '0 2048 linear /dev/$g1 0' && dmsetup mknodes 2>/dev/null
      dd if=/dev/zero of=/dev/mapper/iodgrow bs=64k count=2 oflag=direct 2>/dev/null && sleep 1 &&
        printf '0 2048 linear /dev/$g1 0\n2048 2048 linear /dev/$g2 0\n' | dmsetup reload iodgrow &&
        dmsetup resume iodgrow &&
        dd if=/dev/zero of=/dev/mapper/iodgrow bs=64k count=2 seek=16 oflag=direct 2>/dev/null || exit 1
      dmsetup create iodfirst --table '0 $FIRST_SECTORS linear /dev/$zf 0' || exit 1
      dmsetup mknodes 2>/dev/null; dm=
      for x in /sys/block/dm-*; do [ \"\$(cat \$x/dm/name)\" = iodfirst ] && dm=\${x##*/}; done
      [ -n \"\$dm\" ] && mkfs.ext4 -q -F /dev/mapper/iodfirst && mkdir -p $fm && mount /dev/mapper/iodfirst $fm &&
        sync -f $fm && echo \"iodfirst \$dm $fm $zf 0 $FIRST_SECTORS 1\" > $run/first.devs || exit 1
      $(stack_io "$fm") || exit 1
      modprobe raid456 || exit 1
      [ -e /sys/kernel/btf/raid456 ] || : > $run/raid456.nobtf
      mdadm --create /dev/md/iodf5 --run --quiet --assume-clean --metadata=1.2 --level=5 \
        --raid-devices=3 /dev/$a /dev/$b /dev/$c > $run/mdf5.out 2>&1 || exit 1
      md=\$(ls /sys/block/$a/holders | grep -m1 '^md') || exit 1
      mkfs.ext4 -q -F /dev/\$md && mkdir -p $f5 && mount /dev/\$md $f5 && sync -f $f5 &&
        echo \"iodf5 \$md $f5 $a,$b,$c 0 $(cat /sys/block/$a/size) 1\" >> $run/first.devs || exit 1
      $(stack_io "$f5") || exit 1
      $fbc" > /dev/null 2> "$run/first.stderr"
    echo $? > "$run/first.rc"
    say "stack: the first stacked devices, made while recording: iodump record exited $(cat "$run/first.rc")"
    umount "$fm" "$f5" "$fbm" 2>/dev/null
    BCACHE+=($(ls /sys/block/$fb/holders 2>/dev/null))
    bcache_stop
    dmsetup remove iodfirst 2>/dev/null
    dmsetup remove iodgrow 2>/dev/null
    MDS+=($(md_of $a))
    md_stop
    [ "$MODE" = guest ] || stack_check "$run" first
  else
    fail setup.stack-first "the zram devices of the first stacked devices could not be made"
  fi
  dmsetup create iodlin --table "0 $STACK_SECTORS linear /dev/$REQ 2048" 2> "$run/dm.err" &&
    dmsetup create iodcry --table "0 $STACK_SECTORS crypt aes-xts-plain64 $key 0 /dev/$REQ $((2048 + STACK_SECTORS))" 2>> "$run/dm.err" ||
    { fail setup.dm "$(tr '\n' ' ' < "$run/dm.err")"; stack_cleanup; return; }
  dmsetup mknodes 2>/dev/null
  for n in iodlin iodcry; do
    for d in /sys/block/dm-*; do [ "$(cat "$d/dm/name")" = $n ] && dm=${d##*/}; done
    stack_fs $n "$dm" /dev/mapper/$n || { stack_cleanup; return; }
  done
  awk -v r="$REQ" -v s=$STACK_SECTORS 'NR == 1 {print $0, r, 2048, s, 1} NR == 2 {print $0, r, 2048 + s, s, 1}' "$run/devs" > "$run/devs.new"
  mv "$run/devs.new" "$run/devs"
  if need_mod raid1 && need_mod raid0; then
    # RAID5: three disks; its writes go down from the stripe cache (md*_raid5 writes the
    # stripes' own pages, data and parity), so do reads that are not within one chunk.
    # RAID6: four disks, the same stripe cache with two parity blocks (P and Q).
    for n in 1 0 5 6; do
      local z1 z2 zs
      # Before 5.14 md RAID0 sends the bio it was given down, remapped in place: the kernel
      # traces no block_bio_queue for it again, so its member disks' I/O is not seen (README,
      # Limits). md_account_bio (5.14) clones it.
      if [ $n = 0 ] && ! printf '5.14\n%s\n' "$(uname -r | cut -d- -f1)" | sort -V -C; then
        say "stack: no md RAID0 on $(uname -r) (before 5.14 its member I/O is invisible)"; continue
      fi
      if [ $n -ge 5 ]; then
        need_mod raid456 || continue
        # Without module BTF (5.10) the recorder cannot know where raid456 keeps a stripe's
        # bios: it must say so (stack_check).
        [ -e /sys/kernel/btf/raid456 ] || : > "$run/raid456.nobtf"
      fi
      zram_dev || break; z1=$ZR
      zram_dev || break; z2=$ZR
      zs="/dev/$z1 /dev/$z2"
      if [ $n -ge 5 ]; then zram_dev || break; zs+=" /dev/$ZR"; fi
      if [ $n = 6 ]; then zram_dev || break; zs+=" /dev/$ZR"; fi
      mdadm --create /dev/md/iodr$n --run --quiet --assume-clean --metadata=1.2 --level=$n \
        --raid-devices=$(echo $zs | wc -w) $zs > "$run/md$n.out" 2>&1 ||
        { fail setup.md-raid$n "$(tr '\n' ' ' < "$run/md$n.out")"; continue; }
      dm=$(md_of $z1) || { fail setup.md-raid$n "no md device holds $z1"; continue; }
      MDS+=($dm)
      stack_fs iodr$n "$dm" /dev/$dm || continue
      zs=${zs//\/dev\//}
      sed -i "\$s/\$/ ${zs// /,} 0 $(cat /sys/block/$z1/size) 1/" "$run/devs"
    done
    # LVM on md: a linear device-mapper volume over an md RAID1 of two zram devices. The
    # disks at the bottom are checked too (their I/O names the md I/O, which names the dm one).
    local z1 z2 md
    if zram_dev && z1=$ZR && zram_dev && z2=$ZR &&
      mdadm --create /dev/md/iodlm --run --quiet --assume-clean --metadata=1.2 --level=1 \
        --raid-devices=2 /dev/$z1 /dev/$z2 > "$run/mdlm.out" 2>&1; then
      md=$(md_of $z1) && MDS+=($md) || echo "no md device holds $z1" >> "$run/dm.err"
      if [ -n "$md" ] && dmsetup create iodlom --table "0 $STACK_SECTORS linear /dev/$md 0" 2>> "$run/dm.err"; then
        dmsetup mknodes 2>/dev/null
        for d in /sys/block/dm-*; do [ "$(cat "$d/dm/name")" = iodlom ] && dm=${d##*/}; done
        if stack_fs iodlom "$dm" /dev/mapper/iodlom; then
          sed -i "\$s/\$/ $md 0 $STACK_SECTORS 1/" "$run/devs"
          echo "iodlom $dm $OUT/stack/mnt-iodlom $z1,$z2 0 $(cat /sys/block/$z1/size) 0" >> "$run/devs"
        fi
      else
        fail setup.dm-on-md "$(tail -1 "$run/dm.err")"
      fi
    else
      fail setup.md-iodlm "$(tr '\n' ' ' < "$run/mdlm.out" 2>/dev/null)"
    fi
  fi
  # LVM's striped volumes: dm-striped over two zram devices, 64 KiB chunks
  local s1 s2
  if zram_dev && s1=$ZR && zram_dev && s2=$ZR &&
    dmsetup create iodstr --table "0 $((2 * STACK_SECTORS)) striped 2 128 /dev/$s1 0 /dev/$s2 0" 2>> "$run/dm.err"; then
    dmsetup mknodes 2>/dev/null
    for d in /sys/block/dm-*; do [ "$(cat "$d/dm/name")" = iodstr ] && dm=${d##*/}; done
    stack_fs iodstr "$dm" /dev/mapper/iodstr &&
      sed -i "\$s/\$/ $s1,$s2 0 $STACK_SECTORS 1/" "$run/devs"
  else
    fail setup.dm-striped "$(tail -1 "$run/dm.err")"
  fi
  # LVM's thin volumes: a thin device of a dm thin-pool (64 KiB blocks, new blocks zeroed as
  # LVM does by default) on two zram devices, metadata and data. The thin target sends its
  # bios to the pool's data device itself (the pool device passes none): the data device is
  # checked as the disk below (its region: all of it, blocks go where the pool allocates
  # them), the device table for the thin device on the pool.
  local tm td pool=
  if need_mod dm_thin_pool && zram_dev && tm=$ZR && zram_dev && td=$ZR &&
    dd if=/dev/zero of=/dev/$tm bs=4k count=1 oflag=direct status=none &&
    dmsetup create iodpool --table "0 $(cat /sys/block/$td/size) thin-pool /dev/$tm /dev/$td 128 0" 2>> "$run/dm.err" &&
    dmsetup message iodpool 0 "create_thin 0" 2>> "$run/dm.err" &&
    dmsetup create iodthin --table "0 $STACK_SECTORS thin /dev/mapper/iodpool 0" 2>> "$run/dm.err"; then
    dmsetup mknodes 2>/dev/null
    for d in /sys/block/dm-*; do
      case "$(cat "$d/dm/name")" in iodthin) dm=${d##*/} ;; iodpool) pool=${d##*/} ;; esac
    done
    stack_fs iodthin "$dm" /dev/mapper/iodthin &&
      sed -i "\$s/\$/ $td 0 $(cat /sys/block/$td/size) 0/" "$run/devs" &&
      echo "$dm $pool" > "$run/thin.devs"
  else
    fail setup.dm-thin "$(tail -1 "$run/dm.err")"
  fi
  # lvmcache: a dm-cache volume (writethrough, LVM's default mode; the smq policy; 64 KiB
  # blocks) on three zram devices: origin, cache and metadata. An origin block is at the same
  # sector as the volume's, a cached one anywhere on the cache device: the region is the
  # first STACK_SECTORS of each, the origin first (top files are asked of it). The blocks the
  # cache copies itself (promotions, through kcopyd) serve no upper I/O.
  local co cc cm
  if need_mod dm_cache && need_mod dm_cache_smq && zram_dev && co=$ZR && zram_dev && cc=$ZR &&
    zram_dev && cm=$ZR && dd if=/dev/zero of=/dev/$cm bs=4k count=1 oflag=direct status=none &&
    dmsetup create iodcache --table "0 $STACK_SECTORS cache /dev/$cm /dev/$cc /dev/$co 128 1 writethrough default 0" 2>> "$run/dm.err"; then
    dmsetup mknodes 2>/dev/null
    for d in /sys/block/dm-*; do [ "$(cat "$d/dm/name")" = iodcache ] && dm=${d##*/}; done
    stack_fs iodcache "$dm" /dev/mapper/iodcache &&
      sed -i "\$s/\$/ $co,$cc,$cm 0 $STACK_SECTORS 1/" "$run/devs"
  else
    fail setup.dm-cache "$(tail -1 "$run/dm.err")"
  fi
  # bcache (an SSD caching a disk, as Ceph and Proxmox hosts use it): a backing and a cache
  # device (zram) made together by make-bcache and registered by hand (no udev here), in
  # writethrough mode (bcache's default) with nothing bypassing the cache: a write goes to
  # the backing device and into the cache, an O_DIRECT read of what was just written comes
  # from the cache. Then, recorded after the other devices' I/O, in writearound mode a file
  # is written to the backing device alone and read back: each read misses the cache and
  # goes to the backing device in a bio of bcache's own (miss.dat). bcache0's sector S is the
  # backing device's S + 16 (its data offset); cached data is anywhere on the cache device:
  # the region is all of each, the backing device first.
  local bb bc bdev
  if zram_dev && bb=$ZR && zram_dev && bc=$ZR; then
    if bdev=$(bash "$HERE/bcache-make.sh" $bb $bc 2> "$run/bcache.err"); then
      BCACHE+=("$bdev")
      # Without module BTF (5.10) the recorder cannot know where bcache keeps the bio a
      # cache-miss read serves: it must say so (stack_check).
      [ -e /sys/kernel/btf/bcache ] || : > "$run/bcache.nobtf"
      stack_fs iodbc "$bdev" /dev/$bdev &&
        sed -i "\$s/\$/ $bb,$bc 0 $(cat /sys/block/$bb/size) 1/" "$run/devs"
    else
      fail setup.bcache "$(tail -1 "$run/bcache.err")"
    fi
  fi
  # dm-multipath (SAN disks): request-based device-mapper, which clones each request onto a
  # path device (itself request-based): two paths taken in turn (round-robin, one I/O each),
  # two loop devices on one file in a tmpfs of the guest's memory (the same disk through two
  # paths, as a SAN LUN through two ports).
  local lp1 lp2
  if need_mod dm_multipath && need_mod dm_round_robin && need_mod loop &&
    mkdir -p /run/iodmp && { mountpoint -q /run/iodmp || mount -t tmpfs -o size=600M tmpfs /run/iodmp; } &&
    truncate -s 256M /run/iodmp/lun.img && lp1=$(losetup -f --show /run/iodmp/lun.img) &&
    CREATED_LOOP+=("$lp1") && lp2=$(losetup -f --show /run/iodmp/lun.img) && CREATED_LOOP+=("$lp2") &&
    dmsetup create iodmp --table "0 $STACK_SECTORS multipath 0 0 1 1 round-robin 0 2 1 $lp1 1 $lp2 1" 2>> "$run/dm.err"; then
    dmsetup mknodes 2>/dev/null
    for d in /sys/block/dm-*; do [ "$(cat "$d/dm/name")" = iodmp ] && dm=${d##*/}; done
    stack_fs iodmp "$dm" /dev/mapper/iodmp &&
      sed -i "\$s/\$/ ${lp1#/dev/},${lp2#/dev/} 0 $STACK_SECTORS 1/" "$run/devs"
    # LVM on multipath (a SAN server's volumes): dm-linear over a second multipath device of
    # two more paths; the paths at the bottom are checked too (their I/O names the multipath
    # request, which names the LVM one).
    local lp3 lp4 mp
    if truncate -s 256M /run/iodmp/lun2.img && lp3=$(losetup -f --show /run/iodmp/lun2.img) &&
      CREATED_LOOP+=("$lp3") && lp4=$(losetup -f --show /run/iodmp/lun2.img) && CREATED_LOOP+=("$lp4") &&
      dmsetup create iodmp2 --table "0 $STACK_SECTORS multipath 0 0 1 1 round-robin 0 2 1 $lp3 1 $lp4 1" 2>> "$run/dm.err" &&
      dmsetup create iodlmp --table "0 $STACK_SECTORS linear /dev/mapper/iodmp2 0" 2>> "$run/dm.err"; then
      dmsetup mknodes 2>/dev/null
      for d in /sys/block/dm-*; do
        case "$(cat "$d/dm/name")" in iodlmp) dm=${d##*/} ;; iodmp2) mp=${d##*/} ;; esac
      done
      if stack_fs iodlmp "$dm" /dev/mapper/iodlmp; then
        sed -i "\$s/\$/ $mp 0 $STACK_SECTORS 1/" "$run/devs"
        echo "iodlmp $dm $OUT/stack/mnt-iodlmp ${lp3#/dev/},${lp4#/dev/} 0 $STACK_SECTORS 0" >> "$run/devs"
      fi
    else
      fail setup.dm-on-multipath "$(tail -1 "$run/dm.err")"
    fi
  else
    fail setup.dm-multipath "$(tail -1 "$run/dm.err")"
  fi
  pass setup.stack "$(awk '$7 == 1 {printf "%s=%s on %s; ", $2, $1, $4}' "$run/devs")"
  # A stacked device made while recording (LVM making a volume or a snapshot, a dm-crypt
  # volume opened after boot): dm-linear over another zram device, made, formatted and
  # mounted by the recorded command; followed from its first I/O on, it is checked as the
  # others (its line in devs written once its kernel name is known).
  local zl late="" latem=$run/mnt-iodlate
  if zram_dev; then
    zl=$ZR
    late="dmsetup create iodlate --table '0 $STACK_SECTORS linear /dev/$zl 0' || exit 1;
      dmsetup mknodes 2>/dev/null; dm=;
      for x in /sys/block/dm-*; do [ \"\$(cat \$x/dm/name)\" = iodlate ] && dm=\${x##*/}; done;
      [ -n \"\$dm\" ] && mkfs.ext4 -q -F /dev/mapper/iodlate && mkdir -p $latem &&
      mount /dev/mapper/iodlate $latem && sync -f $latem &&
      echo \"iodlate \$dm $latem $zl 0 $STACK_SECTORS 1\" >> $run/devs || exit 1;"
  fi
  local t bctail=""
  if grep -q '^iodbc ' "$run/devs"; then
    bctail="$(bcache_miss_io "$(awk '$1 == "iodbc" {print $2}' "$run/devs")" "$run/mnt-iodbc") &&"
  fi
  t=$(date +%s.%N)
  # Each file system (each mount point once: LVM on md has two lines) gets the I/O.
  # Each file system's writeback is flushed (syncfs: the flusher writes wb.dat out for dd)
  # before the next device's I/O starts, not all six at the final sync: on sid's 7.2
  # (likely its tracing programs being preempted), six stacks' flushers and dm/md workers
  # at once on two slow emulated CPUs made the kernel skip both start programs for whole
  # bursts of bios (counted as lost, `nested`; README, Limits).
  "$BIN" record -o "$run/stack.iod" --stats -- sh -c "$late for d in $(awk '!seen[$3]++ {printf "%s ", $3}' "$run/devs") ${late:+$latem}; do
      $(stack_io '$d') || exit 1
    done && $bctail sync" > "$run/workload.out" 2> "$run/record.stderr"
  echo $? > "$run/rc"
  say "stack: iodump record exited $(cat "$run/rc") after $(since "$t") s"
  sed 's/^/    /' "$run/record.stderr" | tail -3
  stack_filtered "$run"
  stack_cleanup
  [ "$MODE" = guest ] || stack_check "$run"
}
# nvme_suite: native NVMe multipathing. run.sh gives the guest an NVMe namespace in an NVMe
# subsystem, which the kernel shows as a multipath head (nvme0n1, bio-based) over a hidden
# path disk (nvme0c0n1: no device number in sysfs) that does the requests. dd writes 200 4k
# blocks with O_DIRECT past the namespace's first MiB and reads them back, recorded;
# nvme_check reads the recording.
nvme_suite() {
  local run=$OUT/nvme d
  mkdir -p "$run"
  need_mod nvme || return
  for _ in $(seq 50); do [ -e /sys/block/nvme0n1 ] && break; sleep 0.1; done
  [ -b /dev/nvme0n1 ] || mknod /dev/nvme0n1 b $(tr ':' ' ' < /sys/block/nvme0n1/dev 2>/dev/null) 2>/dev/null
  for d in /sys/class/block/nvme*c*n*; do
    [ "$(cat "$d/hidden" 2>/dev/null)" = 1 ] && basename "$d"
  done > "$run/paths"
  if [ ! -s "$run/paths" ]; then
    fail setup.nvme-multipath "no hidden NVMe path disk: $(ls /sys/class/block | tr '\n' ' '); multipath=$(cat /sys/module/nvme_core/parameters/multipath 2>/dev/null)"; return
  fi
  safe_dev nvme0n1 || { fail setup.nvme "$REFUSED"; return; }
  pass setup.nvme "nvme0n1 over $(tr '\n' ' ' < "$run/paths")"
  "$BIN" record -o "$run/nvme.iod" -- sh -c "dd if=/dev/zero of=/dev/nvme0n1 bs=4k count=200 seek=256 oflag=direct status=none &&
    dd if=/dev/nvme0n1 of=/dev/null bs=4k count=200 skip=256 iflag=direct status=none" > /dev/null 2> "$run/record.stderr"
  echo $? > "$run/rc"
  say "nvme: iodump record exited $(cat "$run/rc")"
  # The same with -d nvme0n1: the path disk's I/O is recorded too, though -d cannot name it.
  "$BIN" record -d nvme0n1 -o "$run/nvme-d.iod" -- sh -c "dd if=/dev/zero of=/dev/nvme0n1 bs=4k count=200 seek=256 oflag=direct status=none &&
    dd if=/dev/nvme0n1 of=/dev/null bs=4k count=200 skip=256 iflag=direct status=none" > /dev/null 2> "$run/record-d.stderr"
  echo $? > "$run/rc-d"
  [ "$MODE" = guest ] || nvme_check "$run"
}

# stack_filtered RUNDIR: dm-multipath's I/O (and LVM's on it) while a recording leaves it out,
# by device (-d of a zram device in no stack) and by process (--comm of no process): its
# requests, and their clones on the paths, which no start hook sees before 6.5, are not
# tracked on purpose and must not be reported as completions without a start.
stack_filtered() {
  local run=$1 dirs="" m how
  for m in iodmp iodlmp; do grep -q "^$m " "$run/devs" && dirs+=" $run/mnt-$m"; done
  [ -n "$dirs" ] || return 0
  zram_dev || return 0
  local io="for d in $dirs; do dd if=/dev/zero of=\$d/other.dat bs=4k count=200 oflag=direct status=none &&
      dd if=\$d/other.dat of=/dev/null bs=4k iflag=direct status=none || exit 1; done"
  for how in dev comm; do
    local sel=(-d "$ZR")
    [ $how = comm ] && sel=(--comm iodump-none)
    "$BIN" record "${sel[@]}" -o "$run/filtered-$how.iod" --stats -- sh -c "$io" > /dev/null 2> "$run/filtered-$how.stderr"
    local rc=$? line counters
    line=$(grep -m1 '^iodump: recorded' "$run/filtered-$how.stderr")
    counters=$(grep -m1 '^iodump: kernel counters' "$run/filtered-$how.stderr" | grep -oE ' (no_start|filtered|rq_untracked)=[0-9]+' | tr -d '\n')
    if [ $rc = 0 ] && [ -n "$line" ] && [[ $line != *"without a start"* ]]; then
      pass "stack.filtered-$how multipath I/O left out by ${sel[*]}: $line ($counters)"
    else
      fail "stack.filtered-$how multipath I/O left out by ${sel[*]}: exit $rc: ${line:-$(tail -1 "$run/filtered-$how.stderr")} ($counters)"
    fi
  done
}
stack_io() { # DIR: the I/O each stacked device's file system gets, as one shell command
  echo "dd if=/dev/zero of=$1/direct.dat bs=64k count=64 oflag=direct status=none &&
      dd if=/dev/zero of=$1/fsync.dat bs=64k count=64 conv=fsync status=none &&
      dd if=$1/direct.dat of=/dev/null bs=64k iflag=direct status=none &&
      dd if=/dev/zero of=$1/wb.dat bs=64k count=64 status=none && sync -f $1"
}
bcache_miss_io() { # BCACHE DIR: writearound, miss.dat written and read back; then writeback,
  # back.dat written (into the cache alone); as one shell command
  echo "echo writearound > /sys/block/$1/bcache/cache_mode &&
      dd if=/dev/zero of=$2/miss.dat bs=64k count=64 oflag=direct status=none &&
      dd if=$2/miss.dat of=/dev/null bs=64k iflag=direct status=none &&
      echo writeback > /sys/block/$1/bcache/cache_mode &&
      dd if=/dev/zero of=$2/back.dat bs=64k count=64 oflag=direct status=none"
}
stack_fs() { # LABEL KNAME NODE: ext4 on NODE, mounted, a line in devs
  local m=$OUT/stack/mnt-$1
  mkfs.ext4 -q -F "$3" && mkdir -p "$m" && mount "$3" "$m" ||
    { fail setup.stack-$1 "mkfs or mount of $3 failed"; return 1; }
  MOUNTED+=("$m")
  sync -f "$m"
  echo "$1 $2 $m" >> "$OUT/stack/devs"
}
# bcache_stop: the bcache devices made (BCACHE) stopped and their cache sets unregistered,
# so that their zram devices can be reset.
# The md device that holds member disk $1. Not /dev/md/NAME: mdadm makes that link through
# udev, and without udev in time it gives up ("mdadm: timeout waiting for /dev/md/iodr6", 5.10
# once) though the array runs.
md_of() {
  local h
  for h in /sys/block/$1/holders/md*; do [ -e "$h" ] && { echo "${h##*/}"; return 0; }; done
  return 1
}
# Stops the md devices made (MDS), upper ones first.
md_stop() {
  local i
  for ((i = ${#MDS[@]} - 1; i >= 0; i--)); do
    [ -e "/sys/block/${MDS[i]}" ] && mdadm --stop "/dev/${MDS[i]}" > /dev/null 2>&1
  done
  MDS=()
}
bcache_stop() {
  local b c
  for b in "${BCACHE[@]}"; do
    [ -e /sys/block/$b ] || continue
    c=$(readlink -f /sys/block/$b/bcache/cache 2>/dev/null)
    echo 1 > /sys/block/$b/bcache/stop 2>/dev/null
    [ -n "$c" ] && [ -e "$c/unregister" ] && echo 1 > "$c/unregister" 2>/dev/null
    for _ in $(seq 50); do [ -e /sys/block/$b ] || break; sleep 0.1; done
  done
  BCACHE=()
}
stack_cleanup() {
  local n
  for n in iodlin iodcry iodr1 iodr0 iodr5 iodr6 iodlom iodstr iodthin iodcache iodbc iodmp iodlmp iodlate iodfirst iodf5; do umount "$OUT/stack/mnt-$n" 2>/dev/null; done
  bcache_stop
  for n in iodlin iodcry iodlom iodstr iodthin iodpool iodcache iodmp iodlmp iodmp2 iodlate iodfirst iodgrow; do dmsetup remove $n 2>/dev/null; done
  md_stop
}

for d in $DEVICES; do
  case $d in
    flight) flight_suite ;;
    stack) stack_suite ;;
    nvme) nvme_suite ;;
    req-none|req-mq-deadline)
      req_dev || continue
      sched=${d#req-}
      label=$REQ-$sched
      say "$label"
      set_sched "$label" "$REQ" "$sched" && device_suite "$label" "$REQ" ;;
    xfs|btrfs)
      req_dev || continue
      label=$REQ-$d
      say "$label ($FS_SCHED)"
      set_sched "$label" "$REQ" "$FS_SCHED" && device_suite "$label" "$REQ" "$d" ;;
    zram)
      zram_dev || continue
      say "$ZR (bio-based)"
      device_suite "$ZR" "$ZR" ;;
    *) fail "setup.devices" "unknown device kind $d" ;;
  esac
done
finish
