#!/usr/bin/env python3
"""Checks and summary for bench/decisions.sh (standard library only).

  decisions_report.py counts DB
      print "<decisions> <published> <pending> <audit entries>" of the
      revops SQLite database DB (opened read-only; revopsd may be running)
  decisions_report.py verify DB WRITTEN_JSON PROPERTIES
      check that the decisions in DB and the writes pms-sim accepted (its
      GET /written answer, saved in WRITTEN_JSON) match one to one: every
      decision published, one write per decision and property (PROPERTIES
      per decision, idempotency key "<decision id>:<property id>:publish"),
      nothing else written, and 9 audit entries per 3-property decision
      (proposed, 3 ceiling_check, approved, 3 pms_write, published);
      prints "bench-verify: ..." and exits 1 on any mismatch
  decisions_report.py written WRITTEN_JSON
      print the number of writes in a GET /written answer
  decisions_report.py check-status FILE
      exit 1 (and say why) if the wrk output FILE has a "bench-bad-status"
      line other than 0 (answers other than the one expected), lacks one, or
      shows socket errors or non-2xx answers (wrk_report.py check)
  decisions_report.py syscalls TRACE_FILE SECONDS
      sum a `perf trace -s` summary over all threads: per system call, calls
      per second, thread-milliseconds per second (1000 = one thread in that
      call all the time), average and max ms per call
  decisions_report.py summary DIR
      table of every run in DIR (rN-cC-ref.txt, rN-cC-decisions.txt), the
      ratio to the reference, medians per connection count, and the issue's
      targets (>= 2000 decisions/s, p99 <= 50 ms); writes DIR/summary.json
"""
import json
import os
import re
import sqlite3
import statistics
import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wrk_report  # noqa: E402  (parse(): the wrk --latency output)
from report_lib import check_status  # noqa: E402  (shared with webhooks_report.py)

RATE_TARGET = 2000.0
P99_TARGET_MS = 50.0
WRITES_PER_DECISION = 3


def open_ro(db):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=30)
    con.execute("PRAGMA busy_timeout = 30000")
    return con


def counts(db):
    con = open_ro(db)
    try:
        total, published, pending = con.execute(
            "SELECT count(*), coalesce(sum(status = 'published'), 0),"
            " coalesce(sum(status = 'pending'), 0) FROM rate_decisions").fetchone()
        audit = con.execute("SELECT count(*) FROM audit_entries").fetchone()[0]
    finally:
        con.close()
    print("%d %d %d %d" % (total, published, pending, audit))
    return 0


def load_written(path):
    with open(path, encoding="utf-8") as f:
        w = json.load(f)
    if not isinstance(w, list):
        raise ValueError("%s: GET /written did not answer a JSON array" % path)
    return w


def verify(db, written_path, nprops):
    nprops = int(nprops)
    con = open_ro(db)
    try:
        rows = con.execute("SELECT id, status, properties FROM rate_decisions").fetchall()
        audit = dict(con.execute(
            "SELECT decision_id, count(*) FROM audit_entries GROUP BY decision_id").fetchall())
    finally:
        con.close()
    written = load_written(written_path)
    problems = []
    by_status = {}
    want = set()
    for did, status, props in rows:
        by_status[status] = by_status.get(status, 0) + 1
        props = json.loads(props)
        if len(props) != nprops:
            problems.append("%s has %d properties, not %d" % (did, len(props), nprops))
        for p in props:
            want.add("%s:%s:publish" % (did, p))
        if audit.get(did, 0) != 3 + 2 * nprops:
            problems.append("%s has %d audit entries, not %d" % (did, audit.get(did, 0),
                                                                 3 + 2 * nprops))
    not_published = {s: n for s, n in by_status.items() if s != "published"}
    if not_published:
        problems.append("decisions not published: %s" % not_published)
    keys = [w.get("idempotency_key") for w in written]
    got = set(keys)
    if len(got) != len(keys):
        problems.append("%d duplicate idempotency keys in /written" % (len(keys) - len(got)))
    missing, extra = want - got, got - want
    if missing:
        problems.append("%d decision writes missing from /written (e.g. %s)"
                        % (len(missing), sorted(missing)[0]))
    if extra:
        problems.append("%d writes in /written belong to no decision (e.g. %s)"
                        % (len(extra), sorted(extra)[0]))
    print("bench-verify: decisions=%d published=%d pms_writes=%d expected_writes=%d "
          "audit_entries=%d %s" % (len(rows), by_status.get("published", 0), len(written),
                                   len(rows) * nprops, sum(audit.values()),
                                   "ok" if not problems else "MISMATCH"))
    for p in problems[:10]:
        print("bench-verify: %s" % p, file=sys.stderr)
    return 1 if problems else 0


def kv_line(text, prefix):
    m = re.search(r"^%s: (.*)$" % re.escape(prefix), text, re.M)
    if not m:
        return {}
    return dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)


def parse_run(path):
    r = wrk_report.parse(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    cpu = kv_line(text, "bench-cpu")
    r["part"] = float(cpu["revopsd"]) if "revopsd" in cpu else None
    r["extra"] = kv_line(text, "bench-run")
    return r


def median(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def summary(d):
    runs = {}
    for name in sorted(os.listdir(d)):
        m = re.fullmatch(r"r(\d+)-c(\d+)-(ref|decisions)\.txt", name)
        if m:
            key = (int(m.group(2)), int(m.group(1)))
            runs.setdefault(key, {})[m.group(3)] = parse_run(os.path.join(d, name))
    if not runs:
        print("no results in %s" % d)
        return 1
    hdr = ("%-4s %5s %10s %7s %7s %7s %6s %10s %9s %9s %6s  %-19s %8s" % (
        "run", "conns", "decisions/s", "p50 ms", "p99 ms", "max ms", "secs",
        "published", "ref wr/s", "ref dec/s", "ratio", "cores rvd/sim/wrk/o", "rvd us/d"))
    print(hdr)
    print("-" * len(hdr))
    per_c = {}
    noisy = []
    for (c, n) in sorted(runs):
        rr = runs[(c, n)]
        dec, ref = rr.get("decisions"), rr.get("ref")
        v = per_c.setdefault(c, {"rps": [], "p50": [], "p99": [], "ratio": [], "ref": [],
                                 "usd": [], "runs": 0})
        ref_dec = ref["rps"] / WRITES_PER_DECISION if ref else float("nan")
        if ref:
            v["ref"].append(ref_dec)
            if ref.get("cpu", {}).get("other", 0) > 0.1:
                noisy.append("run %d c=%d reference: other processes used %.2f cores"
                             % (n, c, ref["cpu"]["other"]))
        if not dec:
            continue
        v["runs"] += 1
        cpu = dec.get("cpu")
        rvd = dec["part"]
        if cpu:
            sim = cpu["server"] - rvd if rvd is not None else float("nan")
            cores = "%.2f/%.2f/%.2f/%.2f" % (rvd if rvd is not None else float("nan"), sim,
                                             cpu["wrk"], cpu["other"])
            if cpu["other"] > 0.1:
                noisy.append("run %d c=%d decisions: other processes used %.2f cores"
                             % (n, c, cpu["other"]))
        else:
            cores = "-"
        usd = rvd / dec["rps"] * 1e6 if rvd is not None and dec["rps"] else float("nan")
        ratio = dec["rps"] / ref_dec if ref and ref_dec else float("nan")
        published = dec["extra"].get("db_published", "-")
        print("%-4d %5d %10.0f %7.2f %7.2f %7.1f %6s %10s %9.0f %9.0f %6.3f  %-19s %8.0f" % (
            n, c, dec["rps"], dec["p50"], dec["p99"], dec.get("max", float("nan")),
            dec["extra"].get("seconds", "-"), published, ref["rps"] if ref else float("nan"),
            ref_dec, ratio, cores, usd))
        v["rps"].append(dec["rps"])
        v["p50"].append(dec["p50"])
        v["p99"].append(dec["p99"])
        v["ratio"].append(ratio)
        v["usd"].append(usd)
    print("(decisions/s, p50/p99/max: wrk at POST /v2/rate-decisions, every answer a 201;"
          " published: decisions\n the database gained during the measured run; ref: wrk"
          " straight at pms-sim's write endpoint,\n ref dec/s = its writes/s / %d, the"
          " decisions/s pms-sim alone could absorb; ratio = decisions/s\n / ref dec/s;"
          " cores: CPU used by revopsd, pms-sim, wrk and other processes (the machine"
          " has %d);\n rvd us/d: revopsd CPU microseconds per decision)"
          % (WRITES_PER_DECISION, os.cpu_count()))
    for line in noisy:
        print("WARNING: %s -- figures skewed" % line)
    print()
    verdict = {}
    for c in sorted(per_c):
        v = per_c[c]
        if not v["runs"]:
            continue
        rps, p99 = median(v["rps"]), median(v["p99"])
        ok_rate, ok_p99 = rps >= RATE_TARGET, p99 <= P99_TARGET_MS
        print("CONNECTIONS=%d, median of %d run(s):" % (c, v["runs"]))
        print("  decisions/s = %.0f (target >= %.0f)  %s   [per run: %s]" % (
            rps, RATE_TARGET, "met" if ok_rate else "MISSED",
            ", ".join("%.0f" % x for x in v["rps"])))
        print("  p99 = %.2f ms (target <= %.0f ms)  %s   [p50 %.2f ms]" % (
            p99, P99_TARGET_MS, "met" if ok_p99 else "MISSED", median(v["p50"])))
        print("  reference: pms-sim %.0f writes/s = %.0f decisions/s; ratio %.3f"
              "   [per run: %s]" % (median(v["ref"]) * WRITES_PER_DECISION, median(v["ref"]),
                                    median(v["ratio"]),
                                    ", ".join("%.3f" % x for x in v["ratio"])))
        print("  revopsd CPU per decision: %.0f us" % median(v["usd"]))
        verdict[c] = {"decisions_per_s": round(rps, 1), "p99_ms": round(p99, 3),
                      "p50_ms": round(median(v["p50"]), 3),
                      "ratio_to_reference": round(median(v["ratio"]), 4),
                      "reference_decisions_per_s": round(median(v["ref"]), 1),
                      "revopsd_us_per_decision": round(median(v["usd"]), 1),
                      "rate_met": ok_rate, "p99_met": ok_p99, "runs": v["runs"]}
    with open(os.path.join(d, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"runs": {"r%d-c%d" % (n, c): v for (c, n), v in runs.items()},
                   "verdict": verdict}, f, indent=1)
    print()
    for c, v in sorted(verdict.items()):
        print("CONNECTIONS=%d: TARGETS %s (decisions/s %s, p99 %s)" % (
            c, "MET" if v["rate_met"] and v["p99_met"] else "MISSED",
            "met" if v["rate_met"] else "MISSED", "met" if v["p99_met"] else "MISSED"))
    return 0


def syscalls(path, seconds):
    seconds = float(seconds)
    tot = {}
    threads = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if re.match(r"^\s*\S.*\(\d+\), \d+ events", line):
                threads += 1
                continue
            m = re.match(r"^\s+([a-z_0-9]+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+"
                         r"([0-9.]+)\s+([0-9.]+)", line)
            if not m:
                continue
            name = m.group(1)
            t = tot.setdefault(name, {"calls": 0, "errors": 0, "ms": 0.0, "max": 0.0})
            t["calls"] += int(m.group(2))
            t["errors"] += int(m.group(3))
            t["ms"] += float(m.group(4))
            t["max"] = max(t["max"], float(m.group(7)))
    print("%d threads; per second of wall time, summed over threads:" % threads)
    print("%-18s %10s %8s %12s %9s %9s" % ("syscall", "calls/s", "errors/s", "thread-ms/s",
                                         "avg ms", "max ms"))
    for name, t in sorted(tot.items(), key=lambda kv: -kv[1]["ms"])[:15]:
        print("%-18s %10.0f %8.0f %12.1f %9.3f %9.1f" % (
            name, t["calls"] / seconds, t["errors"] / seconds, t["ms"] / seconds,
            t["ms"] / t["calls"] if t["calls"] else 0, t["max"]))
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "counts":
        return counts(argv[2])
    if len(argv) == 5 and argv[1] == "verify":
        return verify(argv[2], argv[3], argv[4])
    if len(argv) == 3 and argv[1] == "written":
        print(len(load_written(argv[2])))
        return 0
    if len(argv) == 3 and argv[1] == "check-status":
        return check_status(argv[2])
    if len(argv) == 4 and argv[1] == "syscalls":
        return syscalls(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "summary":
        return summary(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
