#!/usr/bin/env bash
# Report benchmark: on synthetic traces of EVENTS (default "10000000 100000000") I/Os, wall
# time, peak memory and output size of `iodump report` and `iodump plot`, against baselines
# measured in the same run on the same file: `iodump info` (one parallel decoding pass over
# every segment, nothing else) and `iodump analyze --summary` (polars; only up to SUMMARY_MAX
# events, default 20M, as it holds every event in memory). Prints the ratios.
#
#   bash bench/report.sh
#   EVENTS=1000000 bash bench/report.sh
#   IODUMP=target/release/iodump EVENTS=10000000 bash bench/report.sh   # skip the build
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-"10000000 100000000"}
WORK=$(mktemp -d /tmp/iodump-bench-report.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
if [ -z "${IODUMP:-}" ]; then
  cargo build --release --quiet
  IODUMP=${CARGO_TARGET_DIR:-$PWD/target}/release/iodump
fi

# run LABEL CMD... : prints "LABEL seconds peak_MiB" and keeps the seconds in $WORK/last
run() {
  local label=$1; shift
  rm -f "$WORK/last"
  /usr/bin/time -f '%e %M' -o "$WORK/time" "$@" > "$WORK/out" 2> "$WORK/err" || {
    echo "$label failed: $(grep -v '^Command exited' "$WORK/err" | tail -1)"; return 0; }
  read -r secs kib < "$WORK/time"
  printf '%-36s %8.2f s %8.0f MiB\n' "$label" "$secs" "$(echo "$kib / 1024" | bc -l)"
  echo "$secs" > "$WORK/last"
}
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'{a / b:.2f}' if b > 0 else 'n/a')" "$1" "$2"; }

echo "iodump report benchmark, $(nproc) cores, $("$IODUMP" --version)"
for n in $EVENTS; do
  t="$WORK/t.iod"
  rm -f "$t" "$WORK"/*.html "$WORK"/*.svg "$WORK"/*.png
  echo
  echo "== $n events (synth mixed, seed 42)"
  "$IODUMP" synth -o "$t" --events "$n" --workload mixed --seed 42 2>/dev/null
  printf '%-36s %s\n' "trace size" "$(stat -c %s "$t") bytes"
  printf '%-36s %10s %12s\n' "step" "wall" "peak memory"
  run "baseline: info (decode pass)" "$IODUMP" info "$t"
  info=$(cat "$WORK/last" 2>/dev/null || echo 0)
  if [ "$n" -le "${SUMMARY_MAX:-20000000}" ]; then
    run "baseline: analyze --summary" "$IODUMP" analyze "$t" --summary
    summary=$(cat "$WORK/last" 2>/dev/null || echo 0)
  else
    # The polars analyzer holds every event in memory (about 450 B/event, BENCHMARKS.md).
    echo "baseline: analyze --summary            skipped above SUMMARY_MAX=${SUMMARY_MAX:-20000000} events (memory)"
    summary=0
  fi
  run "report" "$IODUMP" report "$t" -o "$WORK/r.html"
  rep=$(cat "$WORK/last" 2>/dev/null || echo 0)
  printf '%-36s %s bytes\n' "  report size" "$(stat -c %s "$WORK/r.html" 2>/dev/null || echo '?')"
  printf '%-36s %s\n' "  report / info time" "$(ratio "$rep" "$info")"
  printf '%-36s %s\n' "  report / analyze --summary time" "$(ratio "$rep" "$summary")"
  python3 -c "import sys; print(f'{\"  report throughput\":36} {int(sys.argv[1]) / float(sys.argv[2]) / 1e6:8.1f} M events/s')" "$n" "$rep"
  run "plot latency-heatmap (svg)" "$IODUMP" plot "$t" --kind latency-heatmap -o "$WORK/h.svg"
  printf '%-36s %s bytes\n' "  svg size" "$(stat -c %s "$WORK/h.svg" 2>/dev/null || echo '?')"
  run "plot offset (png)" "$IODUMP" plot "$t" --kind offset -o "$WORK/o.png"
  printf '%-36s %s bytes\n' "  png size" "$(stat -c %s "$WORK/o.png" 2>/dev/null || echo '?')"
done
