#!/usr/bin/env bash
# What the exports cost as traces grow: `iodump export` of two synthetic traces (`synth
# --workload mixed`, SMALL and LARGE events, default 1M and 10M) to each format, written into
# a temporary directory and removed. Prints wall time, CPU time (user + system) and peak
# resident memory of each (/usr/bin/time), and, per format, the ratios of LARGE to SMALL:
# time should grow with the events, memory should not (every export streams; the fio iolog
# and the Perfetto trace put the I/Os in start order with a reorder window of the segments'
# overlap, not the whole trace).
#
#   bash bench/export.sh                       # SMALL=1000000 LARGE=10000000
#   NO_BUILD=1 IODUMP=path bash bench/export.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SMALL=${SMALL:-1000000}
LARGE=${LARGE:-10000000}
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet
IODUMP=${IODUMP:-$PWD/target/release/iodump}
WORK=$(mktemp -d /tmp/iodump-bench-export.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

for n in "$SMALL" "$LARGE"; do
  "$IODUMP" synth -o "$WORK/t$n.iod" --events "$n" --workload mixed --seed 42 2>/dev/null
done

printf '%-10s %10s %9s %9s %10s\n' format events wall_s cpu_s peak_mib
declare -A wall cpu mem
for fmt in csv jsonl fio-iolog perfetto; do
  for n in "$SMALL" "$LARGE"; do
    /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" \
      "$IODUMP" export "$WORK/t$n.iod" --format "$fmt" -o "$WORK/out" 2>/dev/null
    read -r w u s m < "$WORK/time"
    rm -f "$WORK/out"
    wall[$fmt$n]=$w
    cpu[$fmt$n]=$(echo "$u + $s" | bc)
    mem[$fmt$n]=$(echo "scale=1; $m / 1024" | bc)
    printf '%-10s %10s %9s %9s %10s\n' "$fmt" "$n" "$w" "${cpu[$fmt$n]}" "${mem[$fmt$n]}"
  done
done
echo
printf '%-10s %14s %14s %14s  (LARGE / SMALL, %s / %s events)\n' format wall_ratio cpu_ratio memory_ratio "$LARGE" "$SMALL"
for fmt in csv jsonl fio-iolog perfetto; do
  printf '%-10s %14s %14s %14s\n' "$fmt" \
    "$(echo "scale=2; ${wall[$fmt$LARGE]} / ${wall[$fmt$SMALL]}" | bc)" \
    "$(echo "scale=2; ${cpu[$fmt$LARGE]} / ${cpu[$fmt$SMALL]}" | bc)" \
    "$(echo "scale=2; ${mem[$fmt$LARGE]} / ${mem[$fmt$SMALL]}" | bc)"
done
