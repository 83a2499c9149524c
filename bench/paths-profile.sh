#!/usr/bin/env bash
# Where the cost of path resolution goes (run as root; needs perf): the same fio job as
# bench/paths.sh (4k random O_DIRECT reads over a few thousand files on ext4 on zram),
# recorded with and without --no-paths in alternation, each run sampled machine-wide by
# `perf record -e cpu-clock`. Prints, per I/O of the run, the CPU time fio's thread spent
# in the start handler (the JIT image of tp_bio_queue), in everything BPF-related (the
# programs, their helpers, map and ring buffer code), and in total. CPU-time samples are
# steadier here than IOPS, which move by several % between runs on these machines.
#
#   bash bench/paths-profile.sh                      # 3 rounds of 10 s, 2000 files
#   NO_BUILD=1 IODUMP=path ROUNDS=5 bash bench/paths-profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
FILES=${FILES:-2000}
FREQ=${FREQ:-4999}
if [ "$(id -u)" != 0 ]; then echo "bench/paths-profile.sh: run as root" >&2; exit 1; fi
command -v perf >/dev/null || { echo "bench/paths-profile.sh: perf not found" >&2; exit 1; }
[ "${NO_BUILD:-0}" = 1 ] || cargo build --profile profiling --quiet --no-default-features
IODUMP=${IODUMP:-$PWD/target/profiling/iodump}
WORK=$(mktemp -d /tmp/iodump-bench-prof.XXXXXX)

# shellcheck source=bench/zram-ext4-files.sh
. bench/zram-ext4-files.sh

# One run: record (with the given flags) while perf samples fio; prints one line
# "mode iops ios start_ns bpf_ns fio_ns" (ns of fio's CPU per I/O).
run() {
  local mode=$1; shift
  "$IODUMP" record -d "zram$ZRAM" "$@" -o "$WORK/t.iod" 2> "$WORK/err" &
  local pid=$!
  for _ in $(seq 1 100); do grep -q "recording" "$WORK/err" 2>/dev/null && break; sleep 0.05; done
  perf record -q -e cpu-clock -F "$FREQ" -a -o "$WORK/perf.data" -- fio "${JOB[@]}" > "$WORK/fio.json" 2>/dev/null
  kill -INT $pid; wait $pid || true
  perf report -i "$WORK/perf.data" --no-children --sort comm,sym -q --stdio -F sample,comm,sym \
    2>/dev/null > "$WORK/rep.txt"
  python3 - "$mode" "$FREQ" "$WORK/fio.json" "$WORK/rep.txt" <<'PY'
import json, sys
mode, freq, fio, rep = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
r = json.load(open(fio))["jobs"][0]["read"]
ios = r["total_ios"]
start = bpf = total = 0
for line in open(rep):
    p = line.split(None, 2)
    if len(p) < 3 or p[1] != "fio":
        continue
    n, sym = int(p[0]), p[2]
    total += n
    if "bpf" in sym or "htab" in sym or "lookup_nulls" in sym or "ringbuf" in sym or "nofault" in sym:
        bpf += n
    if "_tp_bio_queue" in sym:
        start += n
ns = lambda s: s / freq * 1e9 / ios
print("%s %d %d %.0f %.0f %.0f" % (mode, r["iops"], ios, ns(start), ns(bpf), ns(total)))
PY
}

printf '%5s %10s %10s %12s %12s %10s %10s %10s %10s\n' round iops_np iops_p start_ns_np start_ns_p bpf_ns_np bpf_ns_p fio_ns_np fio_ns_p
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    a=$(run np --no-paths); b=$(run p)
  else
    b=$(run p); a=$(run np --no-paths)
  fi
  read -r _ ia _ sa ba fa <<< "$a"
  read -r _ ib _ sb bb fb <<< "$b"
  printf '%5s %10s %10s %12s %12s %10s %10s %10s %10s\n' "$r" "$ia" "$ib" "$sa" "$sb" "$ba" "$bb" "$fa" "$fb"
done
echo
echo "Per I/O, ns of CPU that fio's thread spent (perf cpu-clock samples at ${FREQ} Hz):"
echo "start_ns: in the start handler (tp_bio_queue); bpf_ns: in BPF programs, helpers, maps and"
echo "the ring buffer; fio_ns: in total. _np: --no-paths, _p: with paths."
