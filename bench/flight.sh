#!/usr/bin/env bash
# The always-on recorder (run as root). Two parts:
#
# 1. Soak: fio 4k random reads (QD32, O_DIRECT, libaio) on raw zram at full speed for SOAK
#    seconds under `iodump record -o DIR/ --rotate 1m --max-total MAXTOTAL`. Every 10 s: the
#    recorder's RSS and the directory's size. At the end: events of all parts + losses against
#    the device's own count of completed I/O (/sys/block/zramN/stat), RSS first/last/max, the
#    directory's largest size against --max-total, parts written and deleted.
# 2. Ring against file: ROUNDS alternating runs of SECS seconds each of fio under
#    `record -o FILE` and under `record -o DIR/ --ring 60s --trigger 'latency > 10s'` (a
#    trigger that does not fire): fio's IOPS, the recorder's CPU seconds per million events
#    (utime+stime from /proc/PID/stat) and the bytes it wrote (/proc/PID/io write_bytes).
#
#   bash bench/flight.sh                         # 30 min soak, 3 rounds of 60 s
#   SOAK=120 ROUNDS=1 SECS=20 bash bench/flight.sh
#   SOAK=0 bash bench/flight.sh                  # the ring against file only
#   NO_BUILD=1 IODUMP=path bash bench/flight.sh  # an existing release binary
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK=${SOAK:-1800}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-60}
MAXTOTAL=${MAXTOTAL:-2G}
WORK=$(mktemp -d /tmp/iodump-flight.XXXXXX)

if [ "$(id -u)" != 0 ]; then echo "bench/flight.sh: run as root" >&2; exit 1; fi
command -v fio >/dev/null || { echo "bench/flight.sh: needs fio" >&2; exit 1; }
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --no-default-features
IODUMP=${IODUMP:-$PWD/target/release/iodump}

ZRAM=""
cleanup() {
  [ -n "${REC:-}" ] && kill -INT "$REC" 2>/dev/null || true
  if [ -n "$ZRAM" ]; then
    echo 1 > "/sys/block/zram$ZRAM/reset" 2>/dev/null || true
    echo "$ZRAM" > /sys/class/zram-control/hot_remove 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

ZRAM=$(cat /sys/class/zram-control/hot_add)
DEV=zram$ZRAM
echo 1G > "/sys/block/$DEV/disksize"
dd if=/dev/urandom of="/dev/$DEV" bs=1M count=1024 oflag=direct status=none

ios() { awk '{print $1 + $5}' "/sys/block/$DEV/stat"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
wrote() { awk '/^write_bytes:/ {print $2}' "/proc/$1/io"; }
dir_bytes() { du -sb "$1" | awk '{print $1}'; }
TICK=$(getconf CLK_TCK)

start_recorder() { # args... ; sets REC, waits for "recording"
  "$IODUMP" record -d "$DEV" "$@" 2> "$WORK/rec.err" &
  REC=$!
  for _ in $(seq 100); do grep -q "iodump: recording" "$WORK/rec.err" && return; sleep 0.1; done
  echo "recorder did not start: $(cat "$WORK/rec.err")" >&2; exit 1
}
stop_recorder() { kill -INT "$REC"; wait "$REC" || true; REC=""; }

fio_run() { # secs -> IOPS
  fio --name=bench --filename="/dev/$DEV" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio \
      --direct=1 --runtime="$1" --time_based --size=1G --norandommap \
      --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print(int(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'
}

if [ "$SOAK" -gt 0 ]; then
echo "== soak: $SOAK s of fio on raw zram, --rotate 1m --max-total $MAXTOTAL"
before=$(ios)
start_recorder -o "$WORK/soak/" --rotate 1m --max-total "$MAXTOTAL"
fio_run "$SOAK" > "$WORK/soak.iops" &
FIO=$!
first_rss=""; max_rss=0; max_dir=0; samples=0
while kill -0 "$FIO" 2>/dev/null; do
  sleep 10
  r=$(rss_kib "$REC"); d=$(dir_bytes "$WORK/soak")
  [ -z "$first_rss" ] && first_rss=$r
  [ "$r" -gt "$max_rss" ] && max_rss=$r
  [ "$d" -gt "$max_dir" ] && max_dir=$d
  samples=$((samples + 1))
  last_rss=$r
done
wait "$FIO"
sleep 1
stop_recorder
after=$(ios)
events=$("$IODUMP" info --json "$WORK/soak/" | python3 -c '
import json,sys
v=[json.loads(l) for l in sys.stdin]
assert len(v)==1, "one recording"
print(v[0]["events"], v[0]["lost_events"], len(v[0]["parts"]), v[0]["parts"][0]["part"])')
read -r ev lost kept firstpart <<< "$events"
echo "fio IOPS                   $(cat "$WORK/soak.iops")"
echo "device I/O completed       $((after - before))"
echo "events in the parts kept   $ev (lost $lost), parts kept $kept, first kept part $firstpart"
echo "  (parts deleted by retention hold the rest: $(sed -n 's/.*; \([0-9]*\) deleted by retention.*/\1/p' "$WORK/rec.err") deleted)"
echo "recorder summary           $(grep 'recorded' "$WORK/rec.err")"
echo "RSS KiB first/last/max     $first_rss / $last_rss / $max_rss ($samples samples, every 10 s)"
echo "directory bytes max        $max_dir (--max-total $MAXTOTAL)"
fi

echo "== ring against file: $ROUNDS rounds of $SECS s each"
printf '%-6s %-5s %10s %10s %14s %14s\n' round mode iops events cpu_s_per_Mev wrote_bytes
for round in $(seq "$ROUNDS"); do
  for mode in file ring; do
    rm -rf "$WORK/out" "$WORK/out.iod"
    if [ "$mode" = file ]; then
      start_recorder -o "$WORK/out.iod"
    else
      start_recorder -o "$WORK/out/" --ring 60s --trigger 'latency > 10s'
    fi
    c0=$(cpu_ticks "$REC"); w0=$(wrote "$REC")
    iops=$(fio_run "$SECS")
    c1=$(cpu_ticks "$REC"); w1=$(wrote "$REC")
    stop_recorder
    ev=$(sed -n 's/.*recorded \([0-9]*\) events.*/\1/p' "$WORK/rec.err" | head -1)
    python3 -c "print('%-6s %-5s %10d %10d %14.3f %14d' % ($round, '$mode', $iops, $ev, ($c1-$c0)/$TICK/($ev/1e6), $w1-$w0))"
  done
done
