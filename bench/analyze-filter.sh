#!/usr/bin/env bash
# What `--filter` costs `iodump analyze`: on one synthetic trace (EVENTS, default 10M, synth
# mixed, seed 42) and its Parquet (`iodump convert`), each question with and without a
# filter, REPS times (default 3), wall and CPU (user + system) seconds and peak memory
# (/usr/bin/time), the median of each. With BASE=PATH (another build of iodump), each question
# is also asked of that build, alternating with this one, and the ratio this / BASE of the
# median CPU is printed: the same questions, the same input, the same run. Every answer of the
# two builds is compared (`cmp`): a difference stops the script.
#
#   bash bench/analyze-filter.sh
#   NO_BUILD=1 IODUMP=target/release/iodump BASE=/tmp/iodump-before bash bench/analyze-filter.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
REPS=${REPS:-3}
WORK=$(mktemp -d /tmp/iodump-bench-filter.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet
IODUMP=${IODUMP:-$PWD/target/release/iodump}
BASE=${BASE:-}

echo "filters: $EVENTS events (synth mixed, seed 42), $REPS rounds, $(nproc) cores${BASE:+, against $BASE}"
"$IODUMP" synth -o "$WORK/t.iod" --events "$EVENTS" --workload mixed --seed 42 2>/dev/null
"$IODUMP" convert "$WORK/t.iod" -o "$WORK/pq" 2>/dev/null

# measure BIN OUT INPUT ARGS... : prints "wall cpu peak_MiB"
measure() {
  local bin=$1 out=$2 input=$3; shift 3
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$bin" analyze "$input" "$@" > "$out" 2> "$WORK/err" ||
    { echo "analyze $input $* failed: $(tail -1 "$WORK/err")" >&2; exit 1; }
  read -r wall user sys kib < "$WORK/time"
  echo "$wall $(echo "$user + $sys" | bc -l) $((kib / 1024))"
}

# Each line: input (trace or pq), then the arguments.
QUESTIONS=(
  "trace --summary"
  "trace --summary --filter op!=flush"
  "trace --top-files"
  "trace --top-files --filter latency>1ms"
  "trace --top-files --filter comm==fio"
  "trace --latency"
  "trace --latency --filter bytes>=64k"
  "trace --seek"
  "trace --seek --filter op==read"
  "pq --top-files"
  "pq --top-files --filter latency>1ms"
  "pq --summary"
  "pq --summary --filter comm==mysqld"
  "pq --summary --filter path=~/var/lib/*"
  "pq --summary --filter dev==sda1&&op==write"
)
printf '%-42s %22s %22s %8s\n' "question (median of $REPS)" "this: wall / CPU, MiB" "${BASE:+base: wall / CPU, MiB}" "${BASE:+CPU ratio}"
for q in "${QUESTIONS[@]}"; do
  read -r kind args <<< "$q"
  input=$WORK/t.iod
  [ "$kind" = pq ] && input=$WORK/pq
  : > "$WORK/this"; : > "$WORK/base"
  for _ in $(seq "$REPS"); do
    # shellcheck disable=SC2086
    measure "$IODUMP" "$WORK/out.this" "$input" $args >> "$WORK/this"
    if [ -n "$BASE" ]; then
      # shellcheck disable=SC2086
      measure "$BASE" "$WORK/out.base" "$input" $args >> "$WORK/base"
      cmp -s "$WORK/out.this" "$WORK/out.base" ||
        { echo "$kind $args: the two builds answer differently" >&2; exit 1; }
    fi
  done
  python3 - "$WORK/this" "$WORK/base" "$kind $args" <<'PY'
import statistics, sys
def med(path):
    rows = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
    if not rows:
        return None
    return tuple(statistics.median(r[i] for r in rows) for i in range(3))
this, base = med(sys.argv[1]), med(sys.argv[2])
cell = lambda m: "%6.2f / %5.2f s %5d" % m if m else ""
ratio = "%8.3f" % (this[1] / base[1]) if base else ""
print("%-42s %22s %22s %8s" % (sys.argv[3], cell(this), cell(base), ratio))
PY
done
