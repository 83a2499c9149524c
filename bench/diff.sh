#!/usr/bin/env bash
# `iodump diff` benchmark: two synthetic traces (EVENTS each, default 10M; mixed workload,
# seeds 42 and 43), and in the same run, REPS times (default 3) in turn: `iodump analyze
# --top-files` on each, then `iodump diff A B`. Prints wall time and peak memory of each, and
# the ratio of the diff's time to the two --top-files runs' (the median over the repetitions),
# in wall time and in CPU time (user + system: what a busy machine's other work does not
# change).
#
#   bash bench/diff.sh
#   EVENTS=1000000 REPS=5 bash bench/diff.sh
#   NO_BUILD=1 IODUMP=target/release/iodump bash bench/diff.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
REPS=${REPS:-3}
WORK=$(mktemp -d /tmp/iodump-bench-diff.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet
IODUMP=${IODUMP:-${CARGO_TARGET_DIR:-$PWD/target}/release/iodump}

# run LABEL CMD... : prints "LABEL wall cpu peak_MiB", leaves "wall cpu" in $WORK/last
run() {
  local label=$1; shift
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$@" > /dev/null 2> "$WORK/err" || {
    echo "$label failed: $(grep -v '^Command exited' "$WORK/err" | tail -1)"; exit 1; }
  read -r secs user sys kib < "$WORK/time"
  cpu=$(echo "$user + $sys" | bc -l)
  printf '%-30s %8.2f s %8.2f s %8.0f MiB\n' "$label" "$secs" "$cpu" "$(echo "$kib / 1024" | bc -l)"
  echo "$secs $cpu" > "$WORK/last"
}

echo "iodump diff benchmark: 2 x $EVENTS events (synth mixed, seeds 42 and 43), $(nproc) cores, $REPS repetitions"
"$IODUMP" synth -o "$WORK/a.iod" --events "$EVENTS" --workload mixed --seed 42 2>/dev/null
"$IODUMP" synth -o "$WORK/b.iod" --events "$EVENTS" --workload mixed --seed 43 2>/dev/null
printf '%-30s %10s %10s %12s\n' "step" "wall" "cpu" "peak memory"
walls=(); cpus=()
for r in $(seq "$REPS"); do
  run "analyze --top-files A" "$IODUMP" analyze "$WORK/a.iod" --top-files
  read -r wa ca < "$WORK/last"
  run "analyze --top-files B" "$IODUMP" analyze "$WORK/b.iod" --top-files
  read -r wb cb < "$WORK/last"
  run "diff A B" "$IODUMP" diff "$WORK/a.iod" "$WORK/b.iod"
  read -r wd cd < "$WORK/last"
  wall=$(echo "$wd / ($wa + $wb)" | bc -l)
  cpu=$(echo "$cd / ($ca + $cb)" | bc -l)
  printf '  repetition %d: diff / (top-files A + top-files B) = %.3f wall, %.3f cpu\n' "$r" "$wall" "$cpu"
  walls+=("$wall"); cpus+=("$cpu")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'median ratio diff / (two --top-files runs): %.3f wall, %.3f cpu\n' "$(median "${walls[@]}")" "$(median "${cpus[@]}")"
