#!/usr/bin/env bash
# What counting each I/O through a stack once costs `iodump analyze`: one synthetic trace
# (IOS I/Os, default 5M, synth mixed, seed 42) written again as if every I/O had gone through
# dm-0 (format/examples/stack_under.rs: 2 x IOS events, each lower one naming its upper one),
# twice: with dm-0 stacked on the disks in the device table (the questions about the workload
# then read the device column first and leave the lower I/O out: the rule on), and without
# (the same events, every layer counted: the rule off). Each question on both, alternating,
# REPS times (default 3); prints wall and CPU (user + system) seconds of each and the median
# ratio on/off.
#
#   bash bench/analyze-stacked.sh
#   NO_BUILD=1 IODUMP=target/release/iodump STACK_UNDER=target/release/examples/stack_under \
#     IOS=1000000 REPS=5 bash bench/analyze-stacked.sh
set -euo pipefail
cd "$(dirname "$0")/.."

IOS=${IOS:-5000000}
REPS=${REPS:-3}
WORK=$(mktemp -d /tmp/iodump-bench-stacked.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
if [ "${NO_BUILD:-0}" != 1 ]; then
  cargo build --release --quiet
  cargo build --release --quiet -p iodump-format --example stack_under
fi
IODUMP=${IODUMP:-$PWD/target/release/iodump}
STACK_UNDER=${STACK_UNDER:-$PWD/target/release/examples/stack_under}

echo "counting each I/O once: $IOS I/Os through dm-0 ($((2 * IOS)) events), $REPS rounds, $(nproc) cores"
"$IODUMP" synth -o "$WORK/t.iod" --events "$IOS" --workload mixed --seed 42 2>/dev/null
"$STACK_UNDER" "$WORK/t.iod" "$WORK/on.iod" > /dev/null
"$STACK_UNDER" "$WORK/t.iod" "$WORK/off.iod" --no-table > /dev/null

# time TRACE ARGS...: "wall cpu" seconds
measure() {
  local trace=$1; shift
  /usr/bin/time -f '%e %U %S' -o "$WORK/time" "$IODUMP" analyze "$trace" "$@" > "$WORK/out" 2> "$WORK/err" ||
    { echo "analyze $* failed: $(tail -1 "$WORK/err")" >&2; exit 1; }
  read -r wall user sys < "$WORK/time"
  echo "$wall $(echo "$user + $sys" | bc -l)"
}

printf '%-40s %5s %16s %16s %8s %8s\n' "question" "round" "on: wall / CPU" "off: wall / CPU" "wall" "CPU"
# The last two: filters that leave dm-0 out, by its device and by another field (dm-0's I/O
# has no queue time), so every segment is searched to find none of its I/O.
for q in "--summary" "--top-files" "--top-procs" "--latency" "--summary --filter op!=flush" \
  "--summary --filter dev!=dm-0" "--summary --filter queue_ns>1ms"; do
  : > "$WORK/ratios"
  for r in $(seq "$REPS"); do
    # shellcheck disable=SC2086
    read -r ow oc < <(measure "$WORK/on.iod" $q)
    # shellcheck disable=SC2086
    read -r fw fc < <(measure "$WORK/off.iod" $q)
    rw=$(echo "$ow / $fw" | bc -l); rc=$(echo "$oc / $fc" | bc -l)
    echo "$rw $rc" >> "$WORK/ratios"
    printf '%-40s %5d %7.2f / %5.2f s %7.2f / %5.2f s %8.3f %8.3f\n' "$q" "$r" "$ow" "$oc" "$fw" "$fc" "$rw" "$rc"
  done
  python3 - "$WORK/ratios" "$q" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
print("%-40s %5s %16s %16s %8.3f %8.3f" % (sys.argv[2], "median", "", "",
      statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)))
PY
done
