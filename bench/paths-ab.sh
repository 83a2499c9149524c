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
# CPU-bound here, so its IOPS are the inverse of that, without the host's steal time.
#
#   bash bench/paths-ab.sh                       # 120 s, phases of 1 s, fio log every 250 ms
#   AA=1 bash bench/paths-ab.sh                  # A/A check: the same schedule, never paused
#   NO_BUILD=1 IODUMP=path SECS=60 bash bench/paths-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${SECS:-120}
PHASE_MS=${PHASE_MS:-1000}
LOG_MS=${LOG_MS:-250}
FILES=${FILES:-2000}
AA=${AA:-0}
WORK=$(mktemp -d /tmp/iodump-bench-pab.XXXXXX)
if [ "$(id -u)" != 0 ]; then echo "bench/paths-ab.sh: run as root" >&2; exit 1; fi
command -v bpftool >/dev/null || { echo "bench/paths-ab.sh: bpftool not found" >&2; exit 1; }
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --no-default-features
IODUMP=${IODUMP:-$PWD/target/release/iodump}

# shellcheck source=bench/zram-ext4-files.sh
. bench/zram-ext4-files.sh

"$IODUMP" record -d "zram$ZRAM" -o "$WORK/t.iod" 2> "$WORK/err" &
rec=$!
for _ in $(seq 1 100); do grep -q "recording" "$WORK/err" 2>/dev/null && break; sleep 0.05; done
grep -q "recording" "$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
set_paused() { bpftool map update name bench_ctl key 0 0 0 0 value "$1" 0 0 0; }
set_paused 0

fio "${JOB[@]}" --write_iops_log="$WORK/f" --log_avg_msec="$LOG_MS" --log_unix_epoch=1 \
  > "$WORK/fio.json" 2>/dev/null &
fpid=$!
sleep 1 # fio's start-up
PHASE_S=$(python3 -c "print($PHASE_MS / 1000)")
paused=0
: > "$WORK/phases"
while kill -0 $fpid 2>/dev/null; do
  t0=$(date +%s%3N)
  if [ "$AA" = 1 ]; then set_paused 0; else set_paused $paused; fi
  t1=$(date +%s%3N)
  cpu=0
  for p in $(pgrep -x fio); do
    for st in /proc/$p/task/*/schedstat; do cpu=$((cpu + $(cut -d' ' -f1 "$st" 2>/dev/null || echo 0))); done
  done
  echo "$t0 $t1 $paused $cpu $(awk '{print $1}' "/sys/block/zram$ZRAM/stat")" >> "$WORK/phases"
  sleep "$PHASE_S"
  paused=$((1 - paused))
done
wait $fpid || true
kill -INT $rec; wait $rec || true
with_path=$("$IODUMP" info --json "$WORK/t.iod" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events_with_file_path"], "of", d["events"])')

python3 - "$WORK/phases" "$WORK"/f_iops.*.log "$LOG_MS" "$AA" "$with_path" <<'PY'
import statistics as st, sys
phases_file, log_file, log_ms, aa, with_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
# phase k: state from its update's end (t1) until the next update's start (t0)
ph = [tuple(int(x) for x in l.split()) for l in open(phases_file)]
bounds = [(ph[k][1], ph[k + 1][0], ph[k][2]) for k in range(len(ph) - 1)]
sums = [[0.0, 0] for _ in bounds]
for line in open(log_file):
    f = [x.strip() for x in line.split(",")]
    t_end, iops = int(f[0]), float(f[1])
    t_start = t_end - log_ms
    for k, (a, b, _) in enumerate(bounds):
        if a <= t_start and t_end <= b:
            sums[k][0] += iops
            sums[k][1] += 1
            break
mean = [s / n if n else None for s, n in sums]
ratios = []
for k in range(1, len(bounds) - 1):
    if bounds[k][2] != 0:
        continue  # phases with paths, against the paused ones around them
    lo, mid, hi = mean[k - 1], mean[k], mean[k + 1]
    if None in (lo, mid, hi):
        continue
    ratios.append(mid / ((lo + hi) / 2))
used = sum(n for _, n in sums)
on = [m for m, (_, _, p) in zip(mean, bounds) if m is not None and p == 0]
off = [m for m, (_, _, p) in zip(mean, bounds) if m is not None and p == 1]
print("phases %d (%d with paths, %d paused), fio log intervals used %d" % (len(bounds), len(on), len(off), used))
print("IOPS, mean of phases: with paths %.0f, paused %.0f" % (st.mean(on), st.mean(off)))
if len(ratios) > 1:
    m, sd = st.mean(ratios), st.stdev(ratios)
    se = sd / len(ratios) ** 0.5
    print("ratio with paths / paused around it: mean %.4f, per-phase sd %.4f, standard error %.4f, n %d"
          % (m, sd, se, len(ratios)))
    print("  95%% interval %.4f .. %.4f (target: >= 0.99)" % (m - 1.96 * se, m + 1.96 * se))
# CPU per read, phase by phase: counters read at each switch
cpu = []
for k in range(len(ph) - 1):
    reads = ph[k + 1][4] - ph[k][4]
    cpu.append((ph[k + 1][3] - ph[k][3]) / reads if reads > 0 else None)
cratios = []
for k in range(1, len(cpu) - 1):
    if ph[k][2] != 0 or None in (cpu[k - 1], cpu[k], cpu[k + 1]):
        continue
    cratios.append(((cpu[k - 1] + cpu[k + 1]) / 2) / cpu[k])
if len(cratios) > 1:
    m, sd = st.mean(cratios), st.stdev(cratios)
    se = sd / len(cratios) ** 0.5
    on_ns = st.mean(c for c, p in zip(cpu, ph) if c is not None and p[2] == 0)
    off_ns = st.mean(c for c, p in zip(cpu, ph) if c is not None and p[2] == 1)
    print("fio CPU ns per read: with paths %.0f, paused %.0f" % (on_ns, off_ns))
    print("ratio paused / with paths of CPU per read (= IOPS ratio for CPU-bound fio): mean %.4f, "
          "per-phase sd %.4f, standard error %.4f, n %d" % (m, sd, se, len(cratios)))
    print("  95%% interval %.4f .. %.4f (target: >= 0.99)" % (m - 1.96 * se, m + 1.96 * se))
print("events with a file path: %s%s" % (with_path, " (A/A: paths never paused)" if aa == "1" else ""))
PY
