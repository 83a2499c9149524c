#!/usr/bin/env bash
# Recorder overhead benchmark (run as root): fio 4k random reads, QD32, O_DIRECT, libaio, on a
# zram device (bio-based) and a loop device (request-based). For each device and round, in
# alternation: fio alone (baseline), fio under `iodump record`, fio under a bpftrace script
# printing one line per I/O, and blktrace. Prints IOPS, the ratio to the baseline of the same
# round, events lost, and the recorder's CPU seconds per million events.
#
#   bash bench/record.sh            # 3 rounds of 10 s per configuration
#   ROUNDS=1 SECS=5 bash bench/record.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
WORK=$(mktemp -d /tmp/iodump-bench.XXXXXX)

if [ "$(id -u)" != 0 ]; then echo "bench/record.sh: run as root" >&2; exit 1; fi
if command -v apt-get >/dev/null && ! { command -v bpftrace && command -v blktrace; } >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fio bpftrace blktrace time >/dev/null 2>&1 || true
fi
# NO_BUILD=1 IODUMP=path: use an existing release binary (the recorder alone builds in
# seconds: cargo build --release --no-default-features).
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet
IODUMP=${IODUMP:-$PWD/target/release/iodump}

ZRAM=""
LOOP=""
cleanup() {
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
  if [ -n "$ZRAM" ]; then
    echo 1 > "/sys/block/zram$ZRAM/reset" 2>/dev/null || true
    echo "$ZRAM" > /sys/class/zram-control/hot_remove 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

ZRAM=$(cat /sys/class/zram-control/hot_add)
echo 1G > "/sys/block/zram$ZRAM/disksize"
dd if=/dev/urandom of="/dev/zram$ZRAM" bs=1M count=1024 oflag=direct status=none
truncate -s 1G "$WORK/loop.img"
dd if=/dev/urandom of="$WORK/loop.img" bs=1M count=1024 conv=notrunc status=none
LOOP=$(losetup -f --show --direct-io=on "$WORK/loop.img")

# bpftrace needs tracefs for tracepoint probes.
mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true

fio_iops() { # device -> IOPS
  fio --name=bench --filename="$1" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio \
      --direct=1 --runtime="$SECS" --time_based --size=1G --norandommap \
      --output-format=json 2>/dev/null |
    python3 -c 'import json,sys; print(int(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'
}

run_iodump() { # device -> "iops events lost cpu_s"
  local dev=$1
  /usr/bin/time -f '%U %S' -o "$WORK/time" \
    "$IODUMP" record -d "$(basename "$dev")" -o "$WORK/trace.iod" 2> "$WORK/rec.err" &
  local pid=$!
  sleep 1
  local iops; iops=$(fio_iops "$dev")
  # the recorder is the only child of `time` (whatever its file is called)
  kill -INT "$(pgrep -P $pid | head -1 || echo $pid)" 2>/dev/null || kill -INT $pid
  wait $pid || true
  local events lost cpu
  events=$(sed -n 's/.*recorded \([0-9]*\) events.*/\1/p' "$WORK/rec.err" | head -1)
  lost=$(sed -n 's/.*, lost \([0-9]*\) .*/\1/p' "$WORK/rec.err" | head -1)
  cpu=$(awk '{print $1 + $2}' "$WORK/time")
  if [ "${lost:-0}" != 0 ]; then # why: the trace's loss records, by reason
    echo "$(basename "$dev") (${events:-0} events): $("$IODUMP" info "$WORK/trace.iod" |
      sed -n 's/^losses *//p')" >> "$WORK/losses"
  fi
  echo "$iops ${events:-0} ${lost:-0} $cpu"
}

bpftrace_script() { # bio|rq
  if [ "$1" = bio ]; then
    echo 'tracepoint:block:block_bio_queue { @s[args->dev, args->sector] = nsecs; }
          tracepoint:block:block_bio_complete /@s[args->dev, args->sector]/ {
            printf("%d %s %d %d %d\n", pid, comm, args->sector, args->nr_sector,
                   (nsecs - @s[args->dev, args->sector]) / 1000);
            delete(@s[args->dev, args->sector]); }'
  else
    echo 'tracepoint:block:block_rq_issue { @s[args->dev, args->sector] = nsecs; }
          tracepoint:block:block_rq_complete /@s[args->dev, args->sector]/ {
            printf("%d %s %d %d %d\n", pid, comm, args->sector, args->nr_sector,
                   (nsecs - @s[args->dev, args->sector]) / 1000);
            delete(@s[args->dev, args->sector]); }'
  fi
}

run_bpftrace() { # device kind -> iops, or "-"
  command -v bpftrace >/dev/null || { echo "-"; return; }
  bpftrace -e "$(bpftrace_script "$2")" > /dev/null 2> "$WORK/bt.err" &
  local pid=$!
  sleep 3
  if ! kill -0 $pid 2>/dev/null; then echo "-"; return; fi
  local iops; iops=$(fio_iops "$1")
  kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null || true
  echo "$iops"
}

BLKTRACE_NOTE="blktrace not installed"
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2>/dev/null || true
if command -v blktrace >/dev/null; then
  if out=$(timeout 5 blktrace -d "$LOOP" -w 1 -o - 2>&1 >/dev/null); then
    BLKTRACE_NOTE="blktrace runs here (not measured by this script yet)"
  else
    BLKTRACE_NOTE="blktrace cannot run here: $(echo "$out" | head -1)"
  fi
fi

printf '%-6s %5s %10s %10s %7s %10s %8s %12s %10s %7s\n' \
  device round base_iops iodump ratio events lost cpu_s/Mev bpftrace ratio
for spec in "zram:/dev/zram$ZRAM:bio" "loop:$LOOP:rq"; do
  IFS=: read -r name dev kind <<< "$spec"
  for r in $(seq 1 "$ROUNDS"); do
    base=$(fio_iops "$dev")
    read -r iops events lost cpu <<< "$(run_iodump "$dev")"
    bt=$(run_bpftrace "$dev" "$kind")
    ratio=$(python3 -c "print(f'{$iops/$base:.3f}')")
    cpm=$(python3 -c "print(f'{$cpu/max($events,1)*1e6:.2f}')")
    if [ "$bt" = "-" ]; then btr="-"; else btr=$(python3 -c "print(f'{$bt/$base:.3f}')"); fi
    printf '%-6s %5s %10s %10s %7s %10s %8s %12s %10s %7s\n' \
      "$name" "$r" "$base" "$iops" "$ratio" "$events" "$lost" "$cpm" "$bt" "$btr"
  done
done
echo
echo "ratio: IOPS traced / IOPS of the baseline run just before it (same round)."
echo "events, lost: what iodump recorded and counted as lost during its run (includes the"
echo "1 s before fio starts). cpu_s/Mev: iodump's user+system CPU seconds per million events."
echo "$BLKTRACE_NOTE"
if [ -s "$WORK/losses" ]; then
  echo "losses by reason (iodump info):"
  sed 's/^/  /' "$WORK/losses"
fi
