#!/usr/bin/env bash
# What tracing costs fio, measured inside one run (run as root; needs bpftool, clang-19 and
# libbpf.so.1). bench/record.sh compares separate fio runs, and on a noisy host their IOPS
# differ by more than the effect. Here one long fio run (bench/record.sh's job: 4k random
# O_DIRECT reads, QD32, libaio, on a raw zram device) is traced every other $PHASE_MS ms by
# $TRACER:
#   floor-empty  two BPF programs doing nothing, on block_bio_queue and block_bio_complete
#                (bench/floor/, attached and detached by bench/floor/load.py): what the
#                kernel's tracepoint dispatch costs any recorder of bio start and completion;
#   floor-clock  the same, each reading the clock once: the least a recorder of latencies
#                does;
#   iodump       `iodump record -o`, attached all along, its programs made to return at once
#                in the untraced phases (bit 1 of the BPF map bench_ctl, flipped with
#                bpftool): what iodump costs above an attached program doing nothing, so
#                iodump's whole cost is this ratio times floor-empty's.
# The analysis (bench/ab.py, shared with bench/paths-ab.sh) compares each traced phase with
# the untraced phases around it, in IOPS and in fio's CPU per read. AA=1 never traces (A/A).
#
#   bash bench/record-ab.sh                      # TRACER=iodump, 120 s, phases of 1 s
#   TRACER=floor-empty SECS=600 bash bench/record-ab.sh
#   NO_BUILD=1 IODUMP=path TRACER=iodump bash bench/record-ab.sh
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${SECS:-120}
PHASE_MS=${PHASE_MS:-1000}
LOG_MS=${LOG_MS:-250}
TRACER=${TRACER:-iodump}
AA=${AA:-0}
if [ "$(id -u)" != 0 ]; then echo "bench/record-ab.sh: run as root" >&2; exit 1; fi
case $TRACER in floor-empty | floor-clock | iodump) ;;
  *) echo "bench/record-ab.sh: TRACER is iodump, floor-empty or floor-clock, not '$TRACER'" >&2; exit 1 ;;
esac
if [ "$TRACER" = iodump ]; then
  command -v bpftool >/dev/null || { echo "bench/record-ab.sh: bpftool not found" >&2; exit 1; }
  [ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --no-default-features
  IODUMP=${IODUMP:-$PWD/target/release/iodump}
fi
WORK=$(mktemp -d /tmp/iodump-bench-rab.XXXXXX)
ZRAM=$(cat /sys/class/zram-control/hot_add)
cleanup() {
  [ -n "${lpid:-}" ] && kill "$lpid" 2>/dev/null || true
  [ -n "${rec:-}" ] && kill -INT "$rec" 2>/dev/null && wait "$rec" 2>/dev/null || true
  echo 1 > "/sys/block/zram$ZRAM/reset" 2>/dev/null || true
  echo "$ZRAM" > /sys/class/zram-control/hot_remove 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
echo 1G > "/sys/block/zram$ZRAM/disksize"
dd if=/dev/urandom of="/dev/zram$ZRAM" bs=1M count=1024 oflag=direct status=none
if [ "$TRACER" = iodump ]; then
  "$IODUMP" record --bench-ctl -d "zram$ZRAM" -o "$WORK/t.iod" 2> "$WORK/err" &
  rec=$!
  for _ in $(seq 1 100); do grep -q "recording" "$WORK/err" 2>/dev/null && break; sleep 0.05; done
  grep -q "recording" "$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
  ab_switch() { # bench_ctl[0] = 2 (bit 1): every program returns at once
    bpftool map update name bench_ctl key 0 0 0 0 value $(( AA == 1 || $1 == 1 ? 0 : 2 )) 0 0 0
  }
else
  bash bench/floor/build.sh "${TRACER#floor-}" "$WORK/floor.o"
  coproc LOADER { python3 bench/floor/load.py "$WORK/floor.o" --toggle; }
  lpid=$LOADER_PID
  ab_switch() {
    echo $(( AA == 1 ? 0 : $1 )) >&"${LOADER[1]}"
    read -r -u "${LOADER[0]}" _ || { echo "bench/record-ab.sh: the loader died" >&2; exit 1; }
  }
fi

fio --name=bench --filename="/dev/zram$ZRAM" --rw=randread --bs=4k --iodepth=32 \
    --ioengine=libaio --direct=1 --runtime="$SECS" --time_based --size=1G --norandommap \
    --write_iops_log="$WORK/f" --log_avg_msec="$LOG_MS" --log_unix_epoch=1 \
    --output-format=json > "$WORK/fio.json" 2>/dev/null &
fpid=$!
sleep 1 # fio's start-up
# shellcheck source=bench/ab-phases.sh
. bench/ab-phases.sh
ab_phases $fpid "zram$ZRAM" "$PHASE_MS" "$WORK/phases"
wait $fpid || true
echo "TRACER=$TRACER$([ "$AA" = 1 ] && echo " (A/A: never traced)"), ${SECS} s, phases of $PHASE_MS ms"
if [ -n "${rec:-}" ]; then
  kill -INT "$rec"; wait "$rec" || true; rec=""
  grep -E "recorded|lost" "$WORK/err" | head -3
  # an I/O started just before a pause and completed during it is never seen to complete
  echo "losses by reason: $("$IODUMP" info "$WORK/t.iod" | sed -n 's/^losses *//p')"
fi
python3 bench/ab.py "$WORK/phases" "$WORK"/f_iops.*.log "$LOG_MS" traced untraced ">= 0.97 for iodump"
