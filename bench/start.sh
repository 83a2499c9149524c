#!/usr/bin/env bash
# How long `iodump record` takes to start and stop (run as root): `iodump record -d DEV -o
# FILE -- true`, REPS times, alternating with a baseline build (BASE, another iodump binary)
# when given. Most of it is the kernel's verifier checking the BPF programs (system time);
# prints each run's wall and system time (/usr/bin/time), the medians, and, with BASE, the
# ratio of this build's medians to the baseline's.
#
#   bash bench/start.sh                                  # REPS=5 DEV=vda
#   NO_BUILD=1 IODUMP=path BASE=old-iodump bash bench/start.sh
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-5}
DEV=${DEV:-vda}
if [ "$(id -u)" != 0 ]; then echo "bench/start.sh: run as root" >&2; exit 1; fi
[ -x /usr/bin/time ] || { echo "bench/start.sh: /usr/bin/time not found (Debian package time)" >&2; exit 1; }
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --no-default-features
IODUMP=${IODUMP:-$PWD/target/release/iodump}
BASE=${BASE:-}
WORK=$(mktemp -d /tmp/iodump-bench-start.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# run BIN NAME: one start and stop; appends "wall sys" to WORK/NAME
run() {
  /usr/bin/time -o "$WORK/t" -f "%e %S" "$1" record -d "$DEV" -o "$WORK/x.iod" -- true 2> "$WORK/err" ||
    { echo "bench/start.sh: $1 record failed: $(tail -1 "$WORK/err")" >&2; exit 1; }
  cat "$WORK/t" >> "$WORK/$2"
  echo "$2 $(cat "$WORK/t")" | awk '{printf "  %-8s wall %.2f s, system %.2f s\n", $1, $2, $3}'
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "iodump: $IODUMP${BASE:+; baseline: $BASE}; record -d $DEV -- true, $REPS times each"
for _ in $(seq "$REPS"); do
  [ -z "$BASE" ] || run "$BASE" baseline
  run "$IODUMP" this
done
for n in baseline this; do
  [ -s "$WORK/$n" ] || continue
  w=$(awk '{print $1}' "$WORK/$n" | median) s=$(awk '{print $2}' "$WORK/$n" | median)
  echo "$n: median wall $w s, system $s s"
  echo "$w $s" > "$WORK/$n.med"
done
if [ -n "$BASE" ]; then
  read -r bw bs < "$WORK/baseline.med"
  read -r tw ts < "$WORK/this.med"
  awk -v bw="$bw" -v bs="$bs" -v tw="$tw" -v ts="$ts" \
    'BEGIN {printf "ratio this/baseline: wall %.3f, system %.3f\n", tw / bw, ts / bs}'
fi
