#!/usr/bin/env python3
"""Parse wrk --latency output and print the bench/run.sh summary.

  wrk_report.py check FILE     exit 1 (and say why) if FILE shows any
                               non-2xx/3xx answer or socket error
  wrk_report.py summary DIR    table of every run in DIR (files named
                               rN-TARGET.txt), median ratios vs nginx and
                               the issue's targets (ratio >= 0.5, p99 <= 5 ms)

Standard library only.
"""
import json
import os
import re
import statistics
import sys

RATIO_TARGET = 0.5
P99_TARGET_MS = 5.0

UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0, "h": 3600000.0}

# Targets in the order they are run and printed; the label says what differs.
TARGETS = [
    ("revopsd_log", "revopsd (access log -> file)"),
    ("revopsd_nolog", "revopsd (stderr -> /dev/null)"),
    ("nginx", "nginx static file"),
]


def to_ms(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m|h)", text.strip())
    if not m:
        raise ValueError("bad wrk duration %r" % text)
    return float(m.group(1)) * UNITS_MS[m.group(2)]


def parse(path):
    """Return a dict of the figures in one wrk output file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    out = {"file": os.path.basename(path), "non2xx": 0,
           "socket_errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0}}
    m = re.search(r"^Requests/sec:\s+([0-9.]+)", text, re.M)
    if not m:
        raise ValueError("%s: no Requests/sec line (wrk failed?)" % path)
    out["rps"] = float(m.group(1))
    m = re.search(r"^\s*(\d+) requests in ([0-9.]+\w+), ([0-9.]+\w+) read", text, re.M)
    if m:
        out["requests"] = int(m.group(1))
        out["bytes_read"] = m.group(3)
    for pct in ("50", "75", "90", "99"):
        m = re.search(r"^\s+%s(?:\.000)?%%\s+([0-9.]+\w+)" % pct, text, re.M)
        if not m:
            raise ValueError("%s: no %s%% latency line (run wrk with --latency)" % (path, pct))
        out["p" + pct] = to_ms(m.group(1))
    m = re.search(r"^\s+Latency\s+(\S+)\s+(\S+)\s+(\S+)", text, re.M)
    if m:
        out["avg"] = to_ms(m.group(1))
        out["max"] = to_ms(m.group(3))
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    if m:
        out["non2xx"] = int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if m:
        out["socket_errors"] = dict(zip(("connect", "read", "write", "timeout"),
                                        map(int, m.groups())))
    m = re.search(r"^bench-cpu: wall=([0-9.]+) cores=(\d+) server=([0-9.]+) wrk=([0-9.]+) "
                  r"other=([0-9.]+)", text, re.M)
    if m:
        out["cpu"] = {"wall": float(m.group(1)), "cores": int(m.group(2)),
                      "server": float(m.group(3)), "wrk": float(m.group(4)),
                      "other": float(m.group(5))}
    return out


def check(path):
    r = parse(path)
    bad = []
    if r["non2xx"]:
        bad.append("%d non-2xx/3xx responses" % r["non2xx"])
    errs = {k: v for k, v in r["socket_errors"].items() if v}
    if errs:
        bad.append("socket errors %s" % errs)
    if bad:
        print("FAIL %s: %s -- every answer must be a 200" % (r["file"], "; ".join(bad)),
              file=sys.stderr)
        return 1
    return 0


def summary(d):
    runs = {}
    for name in sorted(os.listdir(d)):
        m = re.fullmatch(r"r(\d+)-(\w+)\.txt", name)
        if m:
            runs.setdefault(int(m.group(1)), {})[m.group(2)] = parse(os.path.join(d, name))
    if not runs:
        print("no results in %s" % d)
        return 1
    hdr = "%-4s %-31s %10s %8s %8s %8s %7s  %-17s %9s" % (
        "run", "target", "req/s", "p50 ms", "p99 ms", "max ms", "non-2xx",
        "cores srv/wrk/oth", "srv us/rq")
    print(hdr)
    print("-" * len(hdr))
    ratios = {t: [] for t, _ in TARGETS if t != "nginx"}
    noisy = []
    per_target = {t: {"rps": [], "p50": [], "p99": [], "usrq": []} for t, _ in TARGETS}
    for n in sorted(runs):
        for t, label in TARGETS:
            r = runs[n].get(t)
            if r is None:
                continue
            cpu = r.get("cpu")
            cpus = "%.2f/%.2f/%.2f" % (cpu["server"], cpu["wrk"], cpu["other"]) if cpu else "-"
            usrq = cpu["server"] / r["rps"] * 1e6 if cpu and r["rps"] else float("nan")
            print("%-4d %-31s %10.0f %8.2f %8.2f %8.2f %7d  %-17s %9.1f" % (
                n, label, r["rps"], r["p50"], r["p99"], r.get("max", float("nan")), r["non2xx"],
                cpus, usrq))
            per_target[t]["usrq"].append(usrq)
            if cpu and cpu["other"] > 0.1:
                noisy.append("run %d %s: other processes used %.2f cores" % (n, t, cpu["other"]))
            for k in ("rps", "p50", "p99"):
                per_target[t][k].append(r[k])
        ng = runs[n].get("nginx")
        for t in ratios:
            if ng and t in runs[n] and ng["rps"] > 0:
                ratios[t].append(runs[n][t]["rps"] / ng["rps"])
    print("(cores: CPU used during the run by the server, by wrk and by other processes;"
          " the machine has %d.\n srv us/rq: server CPU microseconds per request, kernel"
          " network stack included; steadier than req/s when other jobs share the box)"
          % os.cpu_count())
    for line in noisy:
        print("WARNING: %s -- figures skewed" % line)
    print()
    print("medians over %d run(s):" % len(runs))
    for t, label in TARGETS:
        v = per_target[t]
        if v["rps"]:
            print("  %-31s %12.0f req/s  p50 %.2f ms  p99 %.2f ms  server %.1f us/request" % (
                label, statistics.median(v["rps"]), statistics.median(v["p50"]),
                statistics.median(v["p99"]), statistics.median(v["usrq"])))
    print()
    verdict = {}
    for t, label in TARGETS:
        if t == "nginx" or not ratios[t]:
            continue
        ratio = statistics.median(ratios[t])
        p99 = statistics.median(per_target[t]["p99"])
        ok_ratio = ratio >= RATIO_TARGET
        ok_p99 = p99 <= P99_TARGET_MS
        per_run = ", ".join("%.3f" % x for x in ratios[t])
        print("%s:" % label)
        print("  ratio revopsd/nginx = %.3f (target >= %.1f)  %s   [per run: %s]" % (
            ratio, RATIO_TARGET, "met" if ok_ratio else "MISSED", per_run))
        print("  p99 revopsd = %.2f ms (target <= %.0f ms)  %s" % (
            p99, P99_TARGET_MS, "met" if ok_p99 else "MISSED"))
        ng_us = statistics.median(per_target["nginx"]["usrq"]) if per_target["nginx"]["usrq"] else 0
        my_us = statistics.median(per_target[t]["usrq"])
        if ng_us and my_us == my_us:
            print("  server CPU per request: %.1f us vs nginx %.1f us (nginx/revopsd = %.3f)" % (
                my_us, ng_us, ng_us / my_us))
        verdict[t] = {"ratio": round(ratio, 4), "ratios": [round(x, 4) for x in ratios[t]],
                      "p99_ms": round(p99, 3), "ratio_met": ok_ratio, "p99_met": ok_p99}
    with open(os.path.join(d, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"runs": runs, "verdict": verdict}, f, indent=1)
    primary = verdict.get("revopsd_log")
    if primary:
        print()
        if primary["ratio_met"] and primary["p99_met"]:
            print("TARGETS MET (access log on, as deployed)")
        else:
            print("TARGETS MISSED (access log on, as deployed)")
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "check":
        return check(argv[2])
    if len(argv) == 3 and argv[1] == "summary":
        return summary(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
