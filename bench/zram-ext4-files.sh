# Sourced by bench/paths.sh and bench/paths-profile.sh: an ext4 filesystem on a new zram
# device under $WORK/mnt (removed on exit by `cleanup`), and the fio job both measure: 4k
# random O_DIRECT reads, QD32, over $FILES files of 256 KiB, $SECS s, laid out once here.
# Needs WORK, FILES and SECS; sets ZRAM, JOB and the EXIT trap.
ZRAM=$(cat /sys/class/zram-control/hot_add)
cleanup() {
  umount "$WORK/mnt" 2>/dev/null || true
  echo 1 > "/sys/block/zram$ZRAM/reset" 2>/dev/null || true
  echo "$ZRAM" > /sys/class/zram-control/hot_remove 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
echo 2G > "/sys/block/zram$ZRAM/disksize"
mkfs.ext4 -q -F "/dev/zram$ZRAM"
mkdir -p "$WORK/mnt"
mount "/dev/zram$ZRAM" "$WORK/mnt"

JOB=(--name=paths --directory="$WORK/mnt" --nrfiles="$FILES" --filesize=256k --openfiles="$FILES"
     --file_service_type=random --rw=randread --bs=4k --iodepth=32 --ioengine=libaio --direct=1
     --runtime="$SECS" --time_based --norandommap --output-format=json)
# Lay the files out once.
fio "${JOB[@]}" --runtime=1 >/dev/null 2>&1
