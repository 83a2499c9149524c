#!/usr/bin/env bash
# Where the recorder's cost lands on the traced workload (run as root; needs perf): fio 4k
# random O_DIRECT reads, QD32, libaio, on a raw zram device (the bench/record.sh job), under
# `iodump record`, sampled machine-wide by `perf record -e cpu-clock`. Prints per round the
# ns of CPU that fio's thread spent per I/O in total, in everything BPF-related (programs,
# helpers, maps, ring buffer) and in waking the consumer (irq_work self-IPIs: the APIC write
# traps to the hypervisor), and the recorder process's own CPU (user + system, while fio
# runs) per recorded event, then the BPF-related symbols averaged over the rounds.
# Several binaries can be compared in alternation: IODUMPS="old/iodump new/iodump"; the
# word "none" in that list runs fio alone (the baseline); "floor-empty" attaches two empty BPF
# programs to block_bio_queue and block_bio_complete (what the kernel's tracepoint dispatch
# costs any recorder of both ends of a bio), "floor-clock" the same two programs each reading
# the clock once (the least a recorder of latencies does): bench/floor/. The `ratio` column
# is the round's baseline fio_ns over this run's (1 = free; needs "none" first in IODUMPS).
#
#   bash bench/record-profile.sh                     # 3 rounds of 8 s
#   NO_BUILD=1 IODUMPS="a/iodump b/iodump" ROUNDS=3 bash bench/record-profile.sh
#   KEEP=/tmp/reports ...                            # also keep every round's perf report
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-8}
FREQ=${FREQ:-4999}
if [ "$(id -u)" != 0 ]; then echo "bench/record-profile.sh: run as root" >&2; exit 1; fi
command -v perf >/dev/null || { echo "bench/record-profile.sh: perf not found" >&2; exit 1; }
[ "${NO_BUILD:-0}" = 1 ] || cargo build --profile profiling --quiet --no-default-features
IODUMPS=${IODUMPS:-$PWD/target/profiling/iodump}
WORK=$(mktemp -d /tmp/iodump-bench-rprof.XXXXXX)

ZRAM=$(cat /sys/class/zram-control/hot_add)
cleanup() {
  echo 1 > "/sys/block/zram$ZRAM/reset" 2>/dev/null || true
  echo "$ZRAM" > /sys/class/zram-control/hot_remove 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$WORK"/rep.* "$KEEP"/ 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
echo 1G > "/sys/block/zram$ZRAM/disksize"
dd if=/dev/urandom of="/dev/zram$ZRAM" bs=1M count=1024 oflag=direct status=none
for v in empty clock; do
  case " $IODUMPS " in *" floor-$v "*) bash bench/floor/build.sh $v "$WORK/floor-$v.o" ;; esac
done

HZ=$(getconf CLK_TCK)
printf '%-40s %5s %10s %12s %12s %12s %12s %7s\n' binary round iops fio_ns bpf_ns wake_ns rec_ns ratio
n=0
for r in $(seq 1 "$ROUNDS"); do
  for bin in $IODUMPS; do
    n=$((n + 1))
    pid=""
    if [ "${bin#floor-}" != "$bin" ]; then
      python3 bench/floor/load.py "$WORK/$bin.o" 2> "$WORK/err" &
    elif [ "$bin" != none ]; then
      "$bin" record -d "zram$ZRAM" -o "$WORK/t.iod" 2> "$WORK/err" &
    fi
    if [ "$bin" != none ]; then
      pid=$!
      for _ in $(seq 1 100); do grep -q "recording" "$WORK/err" 2>/dev/null && break; sleep 0.05; done
      t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    fi
    perf record -q -e cpu-clock -F "$FREQ" -a -o "$WORK/perf.data" -- \
      fio --name=bench --filename="/dev/zram$ZRAM" --rw=randread --bs=4k --iodepth=32 \
          --ioengine=libaio --direct=1 --runtime="$SECS" --time_based --size=1G \
          --norandommap --output-format=json > "$WORK/fio.json" 2>/dev/null
    ticks=0
    if [ -n "$pid" ]; then
      ticks=$(( $(awk '{print $14 + $15}' "/proc/$pid/stat") - t0 ))
      kill -INT $pid; wait $pid || true
    fi
    events=0
    if [ -f "$WORK/err" ]; then
      events=$(sed -n 's/.*recorded \([0-9]*\) events.*/\1/p' "$WORK/err" | head -1)
      rm -f "$WORK/err"
    fi
    perf report -i "$WORK/perf.data" --no-children --sort comm,sym -q --stdio -F sample,comm,sym \
      2>/dev/null > "$WORK/rep.$n.txt"
    python3 - "$bin" "$r" "$FREQ" "$WORK/fio.json" "$WORK/rep.$n.txt" "$ticks" "$HZ" "${events:-0}" <<'PY'
import json, sys
b, r, freq, fio, rep = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
ticks, hz, events = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
d = json.load(open(fio))["jobs"][0]["read"]
ios = d["total_ios"]
bpf = total = wake = 0
for line in open(rep):
    p = line.split(None, 2)
    if len(p) < 3 or p[1] != "fio":
        continue
    n = int(p[0])
    total += n
    if any(w in p[2] for w in ("bpf", "htab", "lookup_nulls", "ringbuf", "nofault")):
        bpf += n
    if any(w in p[2] for w in ("write_msr", "irq_work", "x2apic", "apic_msr")):
        wake += n
ns = lambda s: s / freq * 1e9 / ios
rec = ticks * 1e9 / hz / events if events else 0
base_file = rep.rsplit("/", 1)[0] + "/base"
if b == "none":
    open(base_file, "w").write(str(ns(total)))
try:
    ratio = "%7.3f" % (float(open(base_file).read()) / ns(total))
except (OSError, ValueError, ZeroDivisionError):
    ratio = "%7s" % "-"
print("%-40s %5s %10d %12.0f %12.0f %12.0f %12.0f %s" % (b[-40:], r, d["iops"], ns(total), ns(bpf), ns(wake), rec, ratio))
with open(rep + ".ios", "w") as f:
    f.write("%s %d\n" % (b, ios))
PY
  done
done
echo
echo "BPF-related symbols, ns of fio's CPU per I/O, mean over the rounds:"
python3 - "$WORK" "$FREQ" <<'PY'
import glob, collections, re, sys
work, freq = sys.argv[1], float(sys.argv[2])
acc = collections.defaultdict(collections.Counter)
runs = collections.Counter()
for ios_file in glob.glob(work + "/rep.*.txt.ios"):
    b, ios = open(ios_file).read().split()
    runs[b] += 1
    for line in open(ios_file[:-4]):
        p = line.split(None, 2)
        if len(p) < 3 or p[1] != "fio":
            continue
        sym = re.sub(r"bpf_prog_[0-9a-f]+_", "bpf_prog_", p[2].strip())
        if any(w in sym for w in ("bpf", "htab", "lookup_nulls", "ringbuf", "nofault")):
            acc[b][sym] += int(p[0]) / freq * 1e9 / int(ios)
for b, c in acc.items():
    print(b)
    for sym, v in sorted(c.items(), key=lambda kv: -kv[1])[:12]:
        print("  %7.0f  %s" % (v / runs[b], sym))
PY
