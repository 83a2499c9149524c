#!/usr/bin/env bash
# Replay benchmark (run as root). Two zram devices: a workload is recorded on A, then replayed
# onto B, in alternation, by
#   - fio replaying our fio-iolog export (`--read_iolog`, psync, O_DIRECT, replay_no_stall=1,
#     replay_redirect=B): the baseline, measured in the same round;
#   - `iodump replay --no-stall` (io_uring and psync engines).
# Workloads: one thread of 4k random reads (fio and iodump both serial), and four threads
# (fio replays one iolog serially; iodump keeps the four streams concurrent).
# Then timing error at the recorded speed: 4 threads at 2.5k, 10k and 25k IOPS each (10k,
# 40k, 100k IOPS in all), replayed with `iodump replay` (timing error = actual - scheduled
# submit time, p50/p99).
#
#   bash bench/replay.sh              # 3 rounds
#   ROUNDS=1 IOS=50000 bash bench/replay.sh
#   BASE=/path/to/old/iodump bash bench/replay.sh   # timing: old and new alternating per round
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
IOS=${IOS:-200000}
WORK=$(mktemp -d /tmp/iodump-bench.XXXXXX)

if [ "$(id -u)" != 0 ]; then echo "bench/replay.sh: run as root" >&2; exit 1; fi
command -v fio >/dev/null || { echo "bench/replay.sh: needs fio" >&2; exit 1; }
# IODUMP and EXPORTER (the binary used for `export --format fio-iolog`, which needs the default
# features) may point at prebuilt binaries; with NO_BUILD=1 nothing is built.
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet
IODUMP=${IODUMP:-$PWD/target/release/iodump}
EXPORTER=${EXPORTER:-$IODUMP}
BASE=${BASE:-}

A=""; B=""
cleanup() {
  for z in $A $B; do
    echo 1 > "/sys/block/zram$z/reset" 2>/dev/null || true
    echo "$z" > /sys/class/zram-control/hot_remove 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
A=$(cat /sys/class/zram-control/hot_add); echo 2G > "/sys/block/zram$A/disksize"
B=$(cat /sys/class/zram-control/hot_add); echo 2G > "/sys/block/zram$B/disksize"
# Fill both so reads decompress real pages.
for z in $A $B; do
  dd if=/dev/urandom of="/dev/zram$z" bs=1M count=2048 oflag=direct status=none
done

record() { # name jobs ios_per_job [rate_iops] -> $WORK/name.iod
  local name=$1 jobs=$2 ios=$3 rate=${4:-}
  "$IODUMP" record -d "zram$A" -o "$WORK/$name.iod" -- \
    fio --name=w --filename="/dev/zram$A" --rw=randread --bs=4k --direct=1 --ioengine=psync \
        --size=400M --offset_increment=400M --numjobs="$jobs" --number_ios="$ios" \
        --norandommap ${rate:+--rate_iops=$rate} --output=/dev/null 2> "$WORK/rec.err"
  "$EXPORTER" export "$WORK/$name.iod" --format fio-iolog -o "$WORK/$name.iolog" 2>/dev/null
}

fio_replay() { # name -> IOPS
  fio --name=replay --ioengine=psync --direct=1 --read_iolog="$WORK/$1.iolog" \
      --replay_no_stall=1 --replay_redirect="/dev/zram$B" --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(int(j["read"]["iops"]))'
}

iodump_replay() { # name engine [extra] -> json
  "${BIN:-$IODUMP}" replay "$WORK/$1.iod" --target "/dev/zram$B" --engine "$2" --json "${@:3}"
}

iops_of() { python3 -c 'import json,sys; v=json.load(sys.stdin); print(int(v["ops"]["read"]["replayed"]*1e9/max(v["elapsed_ns"],1)))'; }

echo "== maximum replay rate, --no-stall, zram (IOPS; ratio = iodump / fio of the same round)"
printf '%-10s %-6s %10s %12s %7s %12s %7s\n' workload round fio iodump-uring ratio iodump-psync ratio
record serial 1 "$IOS"
record four 4 $((IOS / 4))
for w in serial four; do
  for r in $(seq 1 "$ROUNDS"); do
    f=$(fio_replay $w)
    u=$(iodump_replay $w io_uring --no-stall | iops_of)
    p=$(iodump_replay $w psync --no-stall | iops_of)
    printf '%-10s %-6s %10d %12d %7.2f %12d %7.2f\n' "$w" "$r" "$f" "$u" \
      "$(echo "$u / $f" | bc -l)" "$p" "$(echo "$p / $f" | bc -l)"
  done
done

echo
echo "== timing error at the recorded speed (4 fio threads, psync), io_uring engine"
printf '%-10s %-6s %-7s %12s %12s %12s %12s %12s %10s\n' total_iops round binary p50_us p99_us max_us lag_p99_us elapsed/span handed_off
for rate in 2500 10000 25000; do
  record "rate$rate" 4 $((rate * 4)) "$rate"   # 4 s per thread
  for r in $(seq 1 "$ROUNDS"); do
    for which in ${BASE:+base} new; do
      if [ "$which" = base ]; then BIN=$BASE; else BIN=$IODUMP; fi
      BIN=$BIN iodump_replay "rate$rate" io_uring | python3 -c '
import json,sys
v=json.load(sys.stdin); t=v["timing_error_ns"]; l=v["scheduler_lag_ns"]
print("%-10d %-6s %-7s %12.1f %12.1f %12.1f %12.1f %12.3f %10s" % ('"$rate"'*4, "'"$r"'", "'"$which"'",
      t["p50"]/1e3, t["p99"]/1e3, t["max"]/1e3, l["p99"]/1e3,
      v["elapsed_ns"]/max(v["recorded_span_ns"],1), v.get("handed_off", "-")))'
    done
  done
done
