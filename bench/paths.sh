#!/usr/bin/env bash
# Cost of path resolution (run as root): fio 4k random O_DIRECT reads over a few thousand files
# on ext4 on zram, recorded by `iodump record` with and without `--no-paths`, and fio alone, in
# alternation. Prints IOPS, the ratio paths / no-paths of the same round (target >= 0.99), and
# how many events carried a file path.
#
#   bash bench/paths.sh             # 3 rounds of 10 s, 2000 files
#   ROUNDS=1 SECS=5 FILES=500 bash bench/paths.sh
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
FILES=${FILES:-2000}
WORK=$(mktemp -d /tmp/iodump-bench-paths.XXXXXX)
if [ "$(id -u)" != 0 ]; then echo "bench/paths.sh: run as root" >&2; exit 1; fi
# NO_BUILD=1 IODUMP=path: use an existing release binary (the recorder alone builds in
# seconds: cargo build --release --no-default-features).
[ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet
IODUMP=${IODUMP:-$PWD/target/release/iodump}

# shellcheck source=bench/zram-ext4-files.sh
. bench/zram-ext4-files.sh

fio_iops() {
  fio "${JOB[@]}" 2>/dev/null |
    python3 -c 'import json,sys; print(int(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'
}

HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime of a process
traced() { # extra iodump flags -> "iops events with_path bpf_ns recorder_ticks"
  "$IODUMP" record -d "zram$ZRAM" "$@" -o "$WORK/t.iod" 2> "$WORK/err" &
  local pid=$!
  # Wait until it is attached.
  for _ in $(seq 1 100); do grep -q "recording" "$WORK/err" 2>/dev/null && break; sleep 0.05; done
  # The recorder's own CPU while fio runs (not its start-up, where the verifier runs).
  local t0; t0=$(cpu_ticks $pid)
  local iops; iops=$(fio_iops)
  local ticks=$(( $(cpu_ticks $pid) - t0 ))
  # CPU time of the recorder's BPF programs so far (kernel.bpf_stats_enabled), all hooks.
  local bpf_ns; bpf_ns=$(bpftool prog show --json 2>/dev/null | python3 -c '
import json, sys
try:
    progs = json.load(sys.stdin)
except ValueError:
    progs = []
print(sum(p.get("run_time_ns", 0) for p in progs
          if p.get("name", "").startswith(("tp_", "raw_"))))' || echo 0)
  kill -INT $pid; wait $pid || true
  local info; info=$("$IODUMP" info --json "$WORK/t.iod")
  echo "$iops $(echo "$info" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events"], d["events_with_file_path"])') $bpf_ns $ticks"
}
# Per-program run time, to see the kernel side's cost per I/O without the IOPS noise.
old_stats=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo 0)
sysctl -qw kernel.bpf_stats_enabled=1 2>/dev/null || true
trap 'sysctl -qw kernel.bpf_stats_enabled="$old_stats" 2>/dev/null || true; cleanup' EXIT

printf '%5s %10s %10s %10s %8s %8s %12s %10s %10s %10s %10s\n' round fio_alone no_paths paths ratio vs_alone file_paths bpf_ns_np bpf_ns_p rec_ns_np rec_ns_p
for r in $(seq 1 "$ROUNDS"); do
  base=$(fio_iops)
  # Which traced run goes first alternates between rounds (the second run of a round was
  # seen to be slower whatever it was).
  if [ $((r % 2)) = 1 ]; then
    read -r np_iops np_events _ np_bpf np_ticks <<< "$(traced --no-paths)"
    read -r p_iops p_events p_files p_bpf p_ticks <<< "$(traced)"
  else
    read -r p_iops p_events p_files p_bpf p_ticks <<< "$(traced)"
    read -r np_iops np_events _ np_bpf np_ticks <<< "$(traced --no-paths)"
  fi
  ratio=$(python3 -c "print(f'{$p_iops/$np_iops:.3f}')")
  vs=$(python3 -c "print(f'{$p_iops/$base:.3f}')")
  np_ns=$(python3 -c "print(f'{$np_bpf/max($np_events,1):.0f}')")
  p_ns=$(python3 -c "print(f'{$p_bpf/max($p_events,1):.0f}')")
  np_rec=$(python3 -c "print(f'{$np_ticks*1e9/$HZ/max($np_events,1):.0f}')")
  p_rec=$(python3 -c "print(f'{$p_ticks*1e9/$HZ/max($p_events,1):.0f}')")
  printf '%5s %10s %10s %10s %8s %8s %12s %10s %10s %10s %10s\n' "$r" "$base" "$np_iops" "$p_iops" "$ratio" "$vs" "$p_files/$p_events" "$np_ns" "$p_ns" "$np_rec" "$p_rec"
done
echo
echo "ratio: IOPS with paths / IOPS with --no-paths in the same round (target >= 0.99)."
echo "vs_alone: IOPS with paths / fio alone. file_paths: events with a file path / all events."
echo "bpf_ns_np, bpf_ns_p: CPU ns of the recorder's BPF programs (every hook) per recorded I/O,"
echo "without and with paths (kernel.bpf_stats_enabled; the statistics add their own ~20 ns)."
echo "rec_ns_np, rec_ns_p: CPU ns of the recorder process (user + system, while fio runs) per"
echo "recorded I/O, without and with paths (counted in clock ticks of 1/$HZ s)."
