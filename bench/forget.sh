#!/usr/bin/env bash
# What a long recording keeps of files it no longer sees (run as root): `iodump record -o
# DIR/ --rotate 5s` on an ext4 filesystem on zram while two waves of FILES new files of 4 KiB
# are written (buffered, synced every 5,000), WAIT s apart, once with `--forget-idle 10s` and
# once with the default (10 minutes: nothing is forgotten within the run). Prints, for each,
# the recorder's resident memory (VmRSS) before, after each wave and at the end, the growth
# that the second wave's files cost, the names it knew at the end and forgot (--stats), and
# the size of the last part (no I/O in it).
#
#   bash bench/forget.sh                       # FILES=60000 WAIT=25
#   NO_BUILD=1 IODUMP=path FILES=100000 bash bench/forget.sh
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=${FILES:-60000}
WAIT=${WAIT:-25}
if [ "$(id -u)" != 0 ]; then echo "bench/forget.sh: run as root" >&2; exit 1; fi
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --no-default-features
IODUMP=${IODUMP:-$PWD/target/release/iodump}
WORK=$(mktemp -d /tmp/iodump-bench-forget.XXXXXX)
ZRAM=$(cat /sys/class/zram-control/hot_add)
cleanup() {
  umount "$WORK/mnt" 2>/dev/null || true
  echo 1 > "/sys/block/zram$ZRAM/reset" 2>/dev/null || true
  echo "$ZRAM" > /sys/class/zram-control/hot_remove 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
echo 4G > "/sys/block/zram$ZRAM/disksize"

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

wave() {
  python3 - "$FILES" "$1" <<'PY'
import os, sys
n, d = int(sys.argv[1]), sys.argv[2]
os.makedirs(d, exist_ok=True)
data = b'x' * 4096
for i in range(n):
    with open(f'{d}/f{i}', 'wb') as f:
        f.write(data)
    if i % 5000 == 4999:
        os.sync()
os.sync()
PY
}

printf '%-22s %10s %10s %10s %10s %12s %12s %14s %12s\n' mode start_kib wave1_kib wave2_kib end_kib wave2_growth known_paths forgotten_paths last_part_b
for mode in forget default; do
  mkfs.ext4 -q -F -N 400000 "/dev/zram$ZRAM"
  mkdir -p "$WORK/mnt" && mount "/dev/zram$ZRAM" "$WORK/mnt"
  rm -rf "$WORK/parts" && mkdir "$WORK/parts"
  flags=()
  [ "$mode" = forget ] && flags=(--forget-idle 10s)
  "$IODUMP" record -d "zram$ZRAM" -o "$WORK/parts/" --rotate 5s --stats "${flags[@]}" 2>"$WORK/err" &
  rec=$!
  sleep 2
  r0=$(rss_kib $rec)
  wave "$WORK/mnt/a"; sleep 3; r1=$(rss_kib $rec)
  sleep "$WAIT"
  wave "$WORK/mnt/b"; sleep 3; r2=$(rss_kib $rec)
  sleep "$WAIT"; r3=$(rss_kib $rec)
  kill -INT $rec; wait $rec || true
  line=$(grep 'names in memory' "$WORK/err")
  known=$(sed -E 's/.*at the end: ([0-9]+) paths.*/\1/' <<<"$line")
  forgot=$(sed -E 's/.*--forget-idle: ([0-9]+) paths.*/\1/' <<<"$line")
  last=$(ls "$WORK/parts" | sort | tail -1)
  printf '%-22s %10s %10s %10s %10s %12s %12s %14s %12s\n' "$mode" "$r0" "$r1" "$r2" "$r3" \
    "$((r2 - r1))" "$known" "$forgot" "$(stat -c %s "$WORK/parts/$last")"
  umount "$WORK/mnt"
done
