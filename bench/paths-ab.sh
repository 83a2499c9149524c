#!/usr/bin/env bash
# What path resolution costs in IOPS, measured inside one run (run as root; needs bpftool).
# bench/paths.sh compares separate runs with and without --no-paths, and on a noisy host the
# IOPS of separate runs differ by more than 1%. Here one recorder (paths on) traces one long
# fio run (4k random O_DIRECT reads, QD32, over $FILES files on ext4 on zram), and this script
# pauses and resumes path resolution every $PHASE_MS ms by flipping the BPF map `bench_ctl`
# with bpftool (paused = what --no-paths does: no lookup, no path walk; the check is one
# array load). fio logs its IOPS every $LOG_MS ms; each log interval that lies wholly inside
# one phase counts for that phase. Each phase with paths is compared with the mean of the two
# paused phases around it, so slow drifts of the host cancel. The same is done with the CPU
# time fio's threads spent per completed read in each phase (scheduler run time, which
# leaves out time the hypervisor took the vCPU away, and the device's read counter): fio is
# CPU-bound here, so its IOPS are the inverse of that, without the host's steal time. The
# analysis is bench/ab.py (shared with bench/record-ab.sh).
#
#   bash bench/paths-ab.sh                       # 120 s, phases of 1 s, fio log every 250 ms
#   AA=1 bash bench/paths-ab.sh                  # A/A check: the same schedule, never paused
#   RENAMES=10000 bash bench/paths-ab.sh         # with a rename storm: one process renames a
#                                                # file back and forth in one directory of the
#                                                # same filesystem N times a second, all along
#                                                # (each rename moves the names generation, so
#                                                # every file's names are checked again at its
#                                                # next I/O: the phases with paths pay that)
#   NO_BUILD=1 IODUMP=path SECS=60 bash bench/paths-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${SECS:-120}
PHASE_MS=${PHASE_MS:-1000}
LOG_MS=${LOG_MS:-250}
FILES=${FILES:-2000}
AA=${AA:-0}
RENAMES=${RENAMES:-0}
WORK=$(mktemp -d /tmp/iodump-bench-pab.XXXXXX)
if [ "$(id -u)" != 0 ]; then echo "bench/paths-ab.sh: run as root" >&2; exit 1; fi
command -v bpftool >/dev/null || { echo "bench/paths-ab.sh: bpftool not found" >&2; exit 1; }
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --no-default-features
IODUMP=${IODUMP:-$PWD/target/release/iodump}

# shellcheck source=bench/zram-ext4-files.sh
. bench/zram-ext4-files.sh

"$IODUMP" record --bench-ctl -d "zram$ZRAM" -o "$WORK/t.iod" 2> "$WORK/err" &
rec=$!
for _ in $(seq 1 100); do grep -q "recording" "$WORK/err" 2>/dev/null && break; sleep 0.05; done
grep -q "recording" "$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
set_paused() { bpftool map update name bench_ctl key 0 0 0 0 value "$1" 0 0 0; }
set_paused 0
storm=""
if [ "$RENAMES" -gt 0 ]; then
  mkdir -p "$WORK/mnt/storm"; : > "$WORK/mnt/storm/a"
  python3 - "$WORK/mnt/storm" "$RENAMES" "$((SECS + 2))" > "$WORK/storm.out" <<'EOF_PY' &
import os, sys, time
d, rate, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
a, b = os.path.join(d, "a"), os.path.join(d, "b")
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < secs:
    for _ in range(100):
        os.rename(a, b); a, b = b, a
    n += 100
    ahead = n / rate - (time.monotonic() - t0)
    if ahead > 0:
        time.sleep(ahead)
print("%d renames in %.1f s" % (n, time.monotonic() - t0))
EOF_PY
  storm=$!
fi

fio "${JOB[@]}" --write_iops_log="$WORK/f" --log_avg_msec="$LOG_MS" --log_unix_epoch=1 \
  > "$WORK/fio.json" 2>/dev/null &
fpid=$!
sleep 1 # fio's start-up
# shellcheck source=bench/ab-phases.sh
. bench/ab-phases.sh
ab_switch() { if [ "$AA" = 1 ]; then set_paused 0; else set_paused $((1 - $1)); fi; }
ab_phases $fpid "zram$ZRAM" "$PHASE_MS" "$WORK/phases"
wait $fpid || true
[ -n "$storm" ] && { wait $storm 2>/dev/null || true; }
kill -INT $rec; wait $rec || true
with_path=$("$IODUMP" info --json "$WORK/t.iod" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events_with_file_path"], "of", d["events"])')

python3 bench/ab.py "$WORK/phases" "$WORK"/f_iops.*.log "$LOG_MS" "with paths" paused ">= 0.99"
echo "events with a file path: $with_path$([ "$AA" = 1 ] && echo " (A/A: paths never paused)")"
[ -n "$storm" ] && echo "rename storm: $(cat "$WORK/storm.out" 2>/dev/null || echo "stopped before it said") (asked: $RENAMES a second)"
true
