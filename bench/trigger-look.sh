#!/usr/bin/env bash
# What the trigger's once-a-second look at the I/Os in flight costs (run as root): an idle
# `iodump record -o DIR/ --ring 10s` of every device, REPS times each in turn without and with
# `--trigger 'latency > 1s'` (which adds the look: the in-flight slot table read through a
# mapping of it, the fallback maps through system calls). Prints each run's CPU time (user +
# system, from /proc/PID/stat) over SECS seconds after a 5 s start, and the median
# difference per look (one a second).
#
#   bash bench/trigger-look.sh                       # SECS=20 REPS=3
#   NO_BUILD=1 IODUMP=path SECS=60 bash bench/trigger-look.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${SECS:-20}
REPS=${REPS:-3}
if [ "$(id -u)" != 0 ]; then echo "bench/trigger-look.sh: run as root" >&2; exit 1; fi
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --no-default-features
IODUMP=${IODUMP:-$PWD/target/release/iodump}
WORK=$(mktemp -d /tmp/iodump-bench-look.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
TCK=$(getconf CLK_TCK)

# cpu_ticks MODE: the recorder's CPU ticks over SECS s, 5 s after it started
cpu_ticks() {
  local args=(record -o "$WORK/$1-$r/" --ring 10s -t $((SECS + 8)))
  [ "$1" = trigger ] && args+=(--trigger 'latency > 1s')
  "$IODUMP" "${args[@]}" 2> "$WORK/$1.err" &
  local pid=$! a b
  sleep 5
  a=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  sleep "$SECS"
  b=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  wait "$pid"
  echo $((b - a))
}

echo "iodump: $IODUMP; $SECS s per run, CPU ticks of 1/$TCK s"
diffs=()
for r in $(seq "$REPS"); do
  n=$(cpu_ticks none)
  t=$(cpu_ticks trigger)
  d=$(python3 -c "print(f'{($t - $n) * 1000 / $TCK / $SECS:.2f}')")
  diffs+=("$d")
  printf 'run %d: --ring %s ms, --ring --trigger %s ms; the look: %s ms each\n' "$r" \
    $((n * 1000 / TCK)) $((t * 1000 / TCK)) "$d"
done
printf 'median per look: %s ms\n' "$(printf '%s\n' "${diffs[@]}" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')"
