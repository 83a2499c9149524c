# Sourced by bench/paths-ab.sh and bench/record-ab.sh: the phase loop of a within-run A/B.
# ab_phases FIO_PID DEVICE PHASE_MS OUT: while fio runs, switch what is measured on and off
# every PHASE_MS ms by calling the caller's `ab_switch 1|0` (starting with 1), and append
# one line per switch to OUT for bench/ab.py: "t0_ms t1_ms on cpu_ns reads" (switch start
# and end, the state from then on, fio's threads' run time so far from schedstat, and
# DEVICE's completed reads from /sys/block/DEVICE/stat).
ab_phases() {
  local fpid=$1 dev=$2 phase_s on=1 t0 t1 cpu p st
  phase_s=$(python3 -c "print($3 / 1000)")
  : > "$4"
  while kill -0 "$fpid" 2>/dev/null; do
    t0=$(date +%s%3N)
    ab_switch $on
    t1=$(date +%s%3N)
    cpu=0
    for p in $(pgrep -x fio); do
      for st in /proc/$p/task/*/schedstat; do cpu=$((cpu + $(cut -d' ' -f1 "$st" 2>/dev/null || echo 0))); done
    done
    echo "$t0 $t1 $on $cpu $(awk '{print $1}' "/sys/block/$dev/stat")" >> "$4"
    sleep "$phase_s"
    on=$((1 - on))
  done
}
