#!/usr/bin/env bash
# Does the kernel fire a completion tracepoint for every request? (run as root)
#
# Independently of iodump: a minimal BPF object (bench/tp-completions/count.bpf.c) counts,
# for a loop device backed by a file, how often block_rq_issue, block_rq_complete (tp_btf
# and raw_tp, two separate programs) and block_io_done fire, while fio runs 4k random
# O_DIRECT reads at QD32. Each round prints those counts next to the reads the device
# itself says it completed (/sys/block/loopN/stat, field 1). A completion the device counts
# but no tracepoint reports is an I/O no tracepoint-based tool can time; iodump counts such
# an I/O as lost (reason "evicted") when its request starts the next I/O.
#
#   bash bench/tp-completions.sh              # 6 rounds of 4 s
#   ROUNDS=3 SECS=2 bash bench/tp-completions.sh
# Needs clang-19, libbpf-dev, gcc, fio.
set -euo pipefail
cd "$(dirname "$0")/tp-completions"

ROUNDS=${ROUNDS:-6}
SECS=${SECS:-4}
if [ "$(id -u)" != 0 ]; then echo "bench/tp-completions.sh: run as root" >&2; exit 1; fi
for t in clang-19 gcc fio; do
  command -v $t >/dev/null || { echo "bench/tp-completions.sh: $t not found" >&2; exit 1; }
done
WORK=$(mktemp -d /tmp/iodump-tpc.XXXXXX)
LOOP=""
cleanup() {
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

clang-19 -target bpf -g -O2 -c count.bpf.c -o "$WORK/count.bpf.o"
gcc -O2 -Wall count.c -o "$WORK/count" -lbpf

truncate -s 1G "$WORK/loop.img"
dd if=/dev/urandom of="$WORK/loop.img" bs=1M count=1024 conv=notrunc status=none
LOOP=$(losetup -f --show --direct-io=on "$WORK/loop.img")
dev=$(basename "$LOOP")
major=$(( 0x$(stat -c %t "$LOOP") ))

printf '%-5s %12s %12s %14s %14s %12s %8s\n' round device_stat rq_issue rq_complete_btf \
  rq_complete_raw io_done missing
for r in $(seq "$ROUNDS"); do
  "$WORK/count" "$WORK/count.bpf.o" "$major" > "$WORK/out" 2> "$WORK/err" &
  pid=$!
  until grep -q attached "$WORK/err" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { cat "$WORK/err" >&2; exit 1; }
    sleep 0.1
  done
  s0=$(awk '{print $1}' "/sys/block/$dev/stat")
  fio --name=tpc --filename="$LOOP" --rw=randread --bs=4k --iodepth=32 --ioengine=libaio \
      --direct=1 --runtime="$SECS" --time_based --size=1G --norandommap >/dev/null 2>&1
  sleep 0.3
  s1=$(awk '{print $1}' "/sys/block/$dev/stat")
  kill -INT $pid
  wait $pid
  read -r issue cbtf craw done < "$WORK/out"
  printf '%-5s %12d %12d %14d %14d %12d %8d\n' "$r" $((s1 - s0)) "$issue" "$cbtf" "$craw" \
    "$done" $((s1 - s0 - cbtf))
done
