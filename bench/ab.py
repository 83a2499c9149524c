"""Within-run A/B analysis shared by bench/paths-ab.sh and bench/record-ab.sh.

usage: ab.py PHASES FIO_IOPS_LOG LOG_MS ON_LABEL OFF_LABEL TARGET

PHASES: one line per switch, "t0_ms t1_ms on cpu_ns reads": the switch ran from t0 to t1
(unix ms), `on` is 1 if what is measured is active from t1 until the next switch, cpu_ns
the run time of fio's threads so far (schedstat) and reads the device's completed reads.
FIO_IOPS_LOG: fio's --write_iops_log with --log_unix_epoch=1 and --log_avg_msec=LOG_MS.

Each fio log interval wholly inside one phase counts for that phase. Each "on" phase is
compared with the mean of the two "off" phases around it, so slow drifts of the host cancel;
the same is done with fio's CPU per completed read (which leaves out time the hypervisor
took the vCPU away): fio is CPU-bound, so its IOPS are the inverse of that.
"""
import statistics as st
import sys

phases_file, log_file, log_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
on_label, off_label, target = sys.argv[4], sys.argv[5], sys.argv[6]
# phase k: state from its switch's end (t1) until the next switch's start (t0)
ph = [tuple(int(x) for x in l.split()) for l in open(phases_file)]
bounds = [(ph[k][1], ph[k + 1][0], ph[k][2]) for k in range(len(ph) - 1)]
sums = [[0.0, 0] for _ in bounds]
for line in open(log_file):
    f = [x.strip() for x in line.split(",")]
    t_end, iops = int(f[0]), float(f[1])
    t_start = t_end - log_ms
    for k, (a, b, _) in enumerate(bounds):
        if a <= t_start and t_end <= b:
            sums[k][0] += iops
            sums[k][1] += 1
            break
mean = [s / n if n else None for s, n in sums]


def report(what, ratios):
    m, sd = st.mean(ratios), st.stdev(ratios)
    se = sd / len(ratios) ** 0.5
    print("%s: mean %.4f, per-phase sd %.4f, standard error %.4f, n %d" % (what, m, sd, se, len(ratios)))
    print("  95%% interval %.4f .. %.4f (target: %s)" % (m - 1.96 * se, m + 1.96 * se, target))


ratios = []
for k in range(1, len(bounds) - 1):
    if bounds[k][2] != 1 or None in mean[k - 1:k + 2]:
        continue
    ratios.append(mean[k] / ((mean[k - 1] + mean[k + 1]) / 2))
on = [m for m, b in zip(mean, bounds) if m is not None and b[2] == 1]
off = [m for m, b in zip(mean, bounds) if m is not None and b[2] == 0]
print("phases %d (%d %s, %d %s), fio log intervals used %d"
      % (len(bounds), len(on), on_label, len(off), off_label, sum(n for _, n in sums)))
if on and off:
    print("IOPS, mean of phases: %s %.0f, %s %.0f" % (on_label, st.mean(on), off_label, st.mean(off)))
if len(ratios) > 1:
    report("IOPS ratio %s / %s around it" % (on_label, off_label), ratios)
# CPU per read, phase by phase: counters read at each switch. A phase whose CPU time went
# down (fio's threads exiting at the end of the run) has none.
cpu = []
for k in range(len(ph) - 1):
    reads = ph[k + 1][4] - ph[k][4]
    ns = ph[k + 1][3] - ph[k][3]
    cpu.append(ns / reads if reads > 0 and ns > 0 else None)
cratios = []
for k in range(1, len(cpu) - 1):
    if ph[k][2] != 1 or None in cpu[k - 1:k + 2]:
        continue
    cratios.append(((cpu[k - 1] + cpu[k + 1]) / 2) / cpu[k])
if len(cratios) > 1:
    on_ns = st.mean(c for c, p in zip(cpu, ph) if c is not None and p[2] == 1)
    off_ns = st.mean(c for c, p in zip(cpu, ph) if c is not None and p[2] == 0)
    print("fio CPU ns per read: %s %.0f, %s %.0f" % (on_label, on_ns, off_label, off_ns))
    report("CPU-per-read ratio %s / %s (= IOPS ratio for CPU-bound fio)" % (off_label, on_label), cratios)
