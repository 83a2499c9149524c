#!/usr/bin/env bash
# Analyzer benchmark: on one synthetic trace (EVENTS, default 10M), wall time and peak memory
# of `iodump convert` and `iodump analyze` queries, and in the same run the "top files"
# question answered the original way (pandas on the CSV export), and every one-pass question
# in DuckDB SQL over our Parquet (bench/analyze_duckdb.py), when those can be installed
# (pip). Prints the figures and the ratios (iodump's time / DuckDB's).
#
#   bash bench/analyze.sh
#   EVENTS=1000000 bash bench/analyze.sh
set -euo pipefail
cd "$(dirname "$0")/.."

EVENTS=${EVENTS:-10000000}
# NO_BUILD=1 IODUMP=path: use an existing release binary.
WORK=$(mktemp -d /tmp/iodump-bench-analyze.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet
IODUMP=${IODUMP:-$PWD/target/release/iodump}
python3 -m pip install -q --disable-pip-version-check pandas pyarrow duckdb >/dev/null 2>&1 || true

# run LABEL CMD... : prints "LABEL seconds peak_MiB"
run() {
  local label=$1; shift
  rm -f "$WORK/last"
  /usr/bin/time -f '%e %M' -o "$WORK/time" "$@" > "$WORK/out" 2> "$WORK/err" || {
    echo "$label failed: $(grep -v '^Command exited' "$WORK/err" | tail -1)"; return 0; }
  read -r secs kib < "$WORK/time"
  printf '%-34s %8.2f s %8.0f MiB\n' "$label" "$secs" "$(echo "$kib / 1024" | bc -l)"
  echo "$secs" > "$WORK/last"
}

echo "iodump analyzer benchmark: $EVENTS events (synth mixed, seed 42), $(nproc) cores"
"$IODUMP" synth -o "$WORK/t.iod" --events "$EVENTS" --workload mixed --seed 42 2>/dev/null
printf '%-34s %10s %12s\n' "step" "wall" "peak memory"
run "convert to Parquet" "$IODUMP" convert "$WORK/t.iod" -o "$WORK/pq"
conv=$(cat "$WORK/last")
python3 -c "print(f'{\"  convert throughput\":34} {$EVENTS/$conv/1e6:8.2f} M events/s')"
declare -A OURS
for q in summary latency seq-writes timeline seek; do
  run "analyze --$q" "$IODUMP" analyze "$WORK/t.iod" "--$q"
  OURS[$q]=$(cat "$WORK/last" 2>/dev/null || echo 0)
done
run "analyze --top-files (.iod)" "$IODUMP" analyze "$WORK/t.iod" --top-files
ours=$(cat "$WORK/last")
# A window of 5% of the recording (from 45% of its span), as RFC 3339 for iodump's filter and
# as UTC ns for DuckDB's WHERE.
read -r WIN_FROM WIN_TO WIN_FROM_NS WIN_TO_NS < <("$IODUMP" info "$WORK/t.iod" --json | python3 -c '
import calendar, json, sys, time
d = json.load(sys.stdin)
def ns(t):
    s, frac = t.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(s, "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(frac.ljust(9, "0"))
def text(n):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(n // 10**9)) + ".%09dZ" % (n % 10**9)
a, z = ns(d["first_timestamp"]), ns(d["last_timestamp"])
lo = a + (z - a) * 45 // 100
hi = lo + (z - a) * 5 // 100
print(text(lo), text(hi), lo, hi)')
run "analyze --top-files, a 5% window" "$IODUMP" analyze "$WORK/t.iod" --top-files \
  --filter "time >= $WIN_FROM && time < $WIN_TO"
win=$(cat "$WORK/last" 2>/dev/null || echo 0)
# A filter on another field than time: only the I/Os slower than 1 ms.
run "analyze --top-files, latency > 1ms" "$IODUMP" analyze "$WORK/t.iod" --top-files \
  --filter 'latency > 1ms'
slow=$(cat "$WORK/last" 2>/dev/null || echo 0)
run "analyze --top-files (our Parquet)" "$IODUMP" analyze "$WORK/pq" --top-files
pq=$(cat "$WORK/last" 2>/dev/null || echo 0)
# The same questions asked of our Parquet, as DuckDB is below.
declare -A OURS_PQ
for q in summary latency seq-writes timeline seek; do
  run "analyze --$q (our Parquet)" "$IODUMP" analyze "$WORK/pq" "--$q"
  OURS_PQ[$q]=$(cat "$WORK/last" 2>/dev/null || echo 0)
done
if [ "$EVENTS" -le 20000000 ]; then
  run "  the same, --engine polars" "$IODUMP" analyze "$WORK/t.iod" --top-files --engine polars
else
  echo "  --engine polars skipped at $EVENTS events (about 450 bytes per event in memory)"
fi

# pandas holds the whole CSV in memory (about 420 bytes per event): past 20M events it would
# not fit in this machine's memory, so it runs only when asked (PANDAS=1).
pandas_ok=1
if [ "$EVENTS" -gt 20000000 ] && [ "${PANDAS:-0}" != 1 ]; then
  pandas_ok=0
  echo "pandas baseline skipped at $EVENTS events (about $((EVENTS / 2500000)) GB of memory; PANDAS=1 forces it)"
fi
[ "$pandas_ok" = 1 ] && run "export CSV (for pandas)" "$IODUMP" export "$WORK/t.iod" --format csv -o "$WORK/t.csv"
cat > "$WORK/topfiles_pandas.py" <<'EOF'
import sys, pandas as pd
df = pd.read_csv(sys.argv[1])
g = df.groupby('path').agg(ios=('iosize', 'size'), bytes=('iosize', 'sum'))
print(g.sort_values('ios', ascending=False).head(20))
EOF
if [ "$pandas_ok" = 1 ] && python3 -c "import pandas" 2>/dev/null; then
  run "pandas top files on the CSV" python3 "$WORK/topfiles_pandas.py" "$WORK/t.csv"
  if [ -f "$WORK/last" ]; then
    pandas=$(cat "$WORK/last")
    python3 -c "print(f'  iodump vs pandas on CSV: {$pandas/$ours:.1f}x faster (target >= 50x)')"
  fi
elif [ "$pandas_ok" = 1 ]; then
  echo "pandas not available: no pandas baseline"
fi
if python3 -c "import duckdb" 2>/dev/null; then
  run "DuckDB top files on our Parquet" python3 bench/analyze_duckdb.py "$WORK/pq" top-files
  if [ -f "$WORK/last" ]; then
    duck=$(cat "$WORK/last")
    python3 -c "print(f'  iodump / DuckDB time: {$ours/$duck:.2f} on the trace, {$pq/$duck:.2f} on the same Parquet (target <= 0.5)')"
  fi
  run "DuckDB top files, a 5% window" python3 bench/analyze_duckdb.py "$WORK/pq" \
    window-top-files "$WIN_FROM_NS" "$WIN_TO_NS"
  if [ -f "$WORK/last" ]; then
    duck=$(cat "$WORK/last")
    python3 -c "print(f'  iodump / DuckDB time, a 5% window: {$win/$duck:.2f} on the trace')"
  fi
  run "DuckDB top files, latency > 1ms" python3 bench/analyze_duckdb.py "$WORK/pq" slow-top-files
  if [ -f "$WORK/last" ]; then
    duck=$(cat "$WORK/last")
    python3 -c "print(f'  iodump / DuckDB time, latency > 1ms: {$slow/$duck:.2f} on the trace')"
  fi
  for q in summary latency seq-writes timeline seek; do
    run "DuckDB $q on our Parquet" python3 bench/analyze_duckdb.py "$WORK/pq" "$q"
    if [ -f "$WORK/last" ]; then
      duck=$(cat "$WORK/last")
      python3 -c "print(f'  iodump --$q / DuckDB time: {${OURS[$q]}/$duck:.2f} on the trace (target <= 0.5), {${OURS_PQ[$q]}/$duck:.2f} on the same Parquet')"
    fi
  done
else
  echo "duckdb not available: no DuckDB baseline"
fi
