#!/usr/bin/env bash
# bcache-make.sh BACKING CACHE [later] (guest.sh, stack suite): makes a bcache device of two
# block devices (kernel names, e.g. zram5 zram6) with make-bcache (bcache-tools), registers
# both by hand (no udev in the guest), waits for the cache set to attach, and sets it so that nothing
# bypasses the cache: no sequential cutoff, no congestion bypass (the emulator's slow devices
# would look congested). Writethrough, bcache's default. Prints the bcache device's kernel
# name (bcache0); on failure says why on stderr and exits 1. Loads the bcache module when
# needed. With `later`, the cache is added to a running bcache device, as on a server that
# gets its SSD after the fact: the backing device alone is made and registered (its bcache
# device runs without a cache and is read), two seconds pass, then the cache device is made,
# registered and attached to it by its cache set's UUID.
set -uo pipefail
b=${1:?usage: bcache-make.sh BACKING CACHE [later]} c=${2:?usage: bcache-make.sh BACKING CACHE [later]}
later=${3:-}
die() { echo "bcache-make.sh: $*" >&2; exit 1; }
command -v make-bcache > /dev/null || die "make-bcache not found (Debian package bcache-tools)"
[ -e /sys/fs/bcache/register ] || modprobe bcache || die "modprobe bcache failed"
holder() { # waits up to 10 s for the bcache device on $b (with `cache`: attached) and sets d
  for _ in $(seq 100); do
    d=$(ls "/sys/block/$b/holders" 2>/dev/null | head -1)
    [ -n "$d" ] && { [ "${1:-}" != cache ] || [ -e "/sys/block/$d/bcache/cache" ]; } && return 0
    sleep 0.1
  done
  return 1
}
d=
if [ "$later" = later ]; then
  out=$(make-bcache -B "/dev/$b" 2>&1) || die "make-bcache -B /dev/$b: $(echo "$out" | tail -1)"
  echo "/dev/$b" > /sys/fs/bcache/register || die "registering /dev/$b failed"
  holder || die "no bcache device on $b after registering it"
  [ -b "/dev/$d" ] || mknod "/dev/$d" b $(tr ':' ' ' < "/sys/block/$d/dev")
  dd if="/dev/$d" of=/dev/null bs=4k count=1 iflag=direct status=none || die "reading /dev/$d failed"
  sleep 2
  out=$(make-bcache -C "/dev/$c" 2>&1) || die "make-bcache -C /dev/$c: $(echo "$out" | tail -1)"
  echo "/dev/$c" > /sys/fs/bcache/register || die "registering /dev/$c failed"
  set=$(bcache-super-show "/dev/$c" | awk '$1 == "cset.uuid" {print $2}')
  [ -n "$set" ] || die "no cache set UUID in bcache-super-show /dev/$c"
  echo "$set" > "/sys/block/$d/bcache/attach" || die "attaching $d to cache set $set failed"
else
  out=$(make-bcache -B "/dev/$b" -C "/dev/$c" 2>&1) || die "make-bcache -B /dev/$b -C /dev/$c: $(echo "$out" | tail -1)"
  echo "/dev/$c" > /sys/fs/bcache/register || die "registering /dev/$c failed"
  echo "/dev/$b" > /sys/fs/bcache/register || die "registering /dev/$b failed"
fi
holder cache
[ -n "$d" ] && [ -e "/sys/block/$d/bcache/cache" ] || die "no bcache device attached to a cache set on $b after registering $b and $c"
[ -b "/dev/$d" ] || mknod "/dev/$d" b $(tr ':' ' ' < "/sys/block/$d/dev")
echo 0 > "/sys/block/$d/bcache/sequential_cutoff" &&
  echo 0 > "/sys/block/$d/bcache/cache/congested_read_threshold_us" &&
  echo 0 > "/sys/block/$d/bcache/cache/congested_write_threshold_us" || die "cannot set $d's cache not to be bypassed"
echo "$d"
