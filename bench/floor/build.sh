#!/usr/bin/env bash
# bench/floor/build.sh empty|clock OUT.o: build floor.bpf.c's variant (clock: -DWITH_CLOCK)
# with clang-19, for bench/record-ab.sh and bench/record-profile.sh.
set -euo pipefail
here=$(dirname "$0")
case $1 in empty) def=() ;; clock) def=(-DWITH_CLOCK) ;;
  *) echo "bench/floor/build.sh: variant is empty or clock, not '$1'" >&2; exit 1 ;; esac
clang-19 -target bpf -g -O2 "${def[@]}" -I"$here/../../ebpf" -c "$here/floor.bpf.c" -o "$2"
