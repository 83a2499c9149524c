#!/usr/bin/env bash
# bcache-make.sh BACKING CACHE (guest.sh, stack suite): makes a bcache device of two block
# devices (kernel names, e.g. zram5 zram6) with make-bcache (bcache-tools), registers both by
# hand (no udev in the guest), waits for the cache set to attach, and sets it so that nothing
# bypasses the cache: no sequential cutoff, no congestion bypass (the emulator's slow devices
# would look congested). Writethrough, bcache's default. Prints the bcache device's kernel
# name (bcache0); on failure says why on stderr and exits 1. Loads the bcache module when
# needed.
set -uo pipefail
b=${1:?usage: bcache-make.sh BACKING CACHE} c=${2:?usage: bcache-make.sh BACKING CACHE}
die() { echo "bcache-make.sh: $*" >&2; exit 1; }
command -v make-bcache > /dev/null || die "make-bcache not found (Debian package bcache-tools)"
[ -e /sys/fs/bcache/register ] || modprobe bcache || die "modprobe bcache failed"
out=$(make-bcache -B "/dev/$b" -C "/dev/$c" 2>&1) || die "make-bcache -B /dev/$b -C /dev/$c: $(echo "$out" | tail -1)"
echo "/dev/$c" > /sys/fs/bcache/register || die "registering /dev/$c failed"
echo "/dev/$b" > /sys/fs/bcache/register || die "registering /dev/$b failed"
d=
for _ in $(seq 100); do
  d=$(ls "/sys/block/$b/holders" 2>/dev/null | head -1)
  [ -n "$d" ] && [ -e "/sys/block/$d/bcache/cache" ] && break
  sleep 0.1
done
[ -n "$d" ] && [ -e "/sys/block/$d/bcache/cache" ] || die "no bcache device attached to a cache set on $b after registering $b and $c"
[ -b "/dev/$d" ] || mknod "/dev/$d" b $(tr ':' ' ' < "/sys/block/$d/dev")
echo 0 > "/sys/block/$d/bcache/sequential_cutoff" &&
  echo 0 > "/sys/block/$d/bcache/cache/congested_read_threshold_us" &&
  echo 0 > "/sys/block/$d/bcache/cache/congested_write_threshold_us" || die "cannot set $d's cache not to be bypassed"
echo "$d"
