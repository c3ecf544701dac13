#!/usr/bin/env python3
"""CPU accounting for bench/run.sh (Linux /proc, standard library only).

  cpu.py snapshot PID...   print "<machine busy s> <PIDs+descendants s>"
  cpu.py idle SECONDS      print the share of the machine (0..1) busy over
                           a SECONDS sample

On a 2-core box wrk, the server and anything else running compete for the
same cores, so run.sh records how the CPU was shared during each measurement
and says when other processes took a part of it.
"""
import os
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def machine_busy():
    """Seconds of CPU spent non-idle (steal included) over all cores since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = v[:7]
    steal = v[7] if len(v) > 7 else 0
    return (user + nice + system + irq + softirq + steal) / HZ


def proc_table():
    """pid -> (ppid, utime+stime seconds) for every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        out[int(d)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / HZ)
    return out


def tree_cpu(roots):
    table = proc_table()
    want = set(r for r in roots if r in table)
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in table.items():
            if ppid in want and pid not in want:
                want.add(pid)
                grew = True
    return sum(table[p][1] for p in want)


def main(argv):
    if len(argv) >= 2 and argv[1] == "snapshot":
        pids = [int(p) for p in argv[2:] if p]
        print("%.3f %.3f" % (machine_busy(), tree_cpu(pids)))
        return 0
    if len(argv) == 3 and argv[1] == "idle":
        secs = float(argv[2])
        b0, t0 = machine_busy(), time.monotonic()
        time.sleep(secs)
        b1, t1 = machine_busy(), time.monotonic()
        print("%.3f" % ((b1 - b0) / ((t1 - t0) * os.cpu_count())))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
