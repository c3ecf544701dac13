#!/usr/bin/env python3
"""revops benchmark for issue 16: Meta's WhatsApp webhook and the durable
scheduler. Every figure comes from the same server in the same run.

    bench/guests.py                      (after `make build`; needs wrk and,
                                          for postgres, postgresql-15:
                                          `make bench` installs them)
    BACKENDS=sqlite ROUNDS=3 DURATION=10 bench/guests.py
    PHASES=lag bench/guests.py

1. inbound: on one node per backend, in ROUNDS paired rounds (the order of
   the pair alternating):
   - reads: wrk GET /v2/portfolios/{id}/properties (bench/auth.lua, 64
     connections): the authenticated read rate;
   - inbound: wrk POST /channels/whatsapp/webhook (bench/wa_inbound.lua,
     CONNECTIONS: 64, as the reads), each call one signed inbound message
     as Meta sends it, every message new (bodies and HMACs made
     beforehand, a fresh set for each run), from GUESTS guests of two
     properties: each call checks the signature, records the message,
     updates its thread and emits whatsapp.received. Its rate is the
     server's count of calls answered 200 (/metrics) over a window that
     starts once every wrk thread sends (wrk loads its bodies thread
     after thread, and its own figure counts what the first sent meanwhile
     against a clock that starts after the last); the CPU per call of
     revopsd, PostgreSQL and wrk is measured over the same window, and
     wrk's latency (p50, p99) logged. Each run checks that every call
     answered 200 is a message in guest_messages.
   The figure is inbound calls/s / reads/s, the median of the rounds'
   ratios (target: at least 0.20).
2. lag: TIMERS (100,000) pending timers are put in the database (SQL), due
   evenly over SPREAD (60) seconds from 5 s ahead; the worker's scheduler
   fires them (kind task.escalate, for tasks that do not exist: the handler
   reads the task and does nothing, so the figure is the scheduler's own).
   The figure is the p99 of fired_at - due_at over every timer (target: at
   most 1 s), with the median and the maximum.

Prints a table and writes the figures as JSON to RESULTS (default
bench-guests.json in the working directory).
"""

import hashlib
import hmac
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nodes  # noqa: E402  (puts t/api/lib on sys.path, sets REVOPS_BIN_DIR)
from nodes import Cpu, log, paired, read_env, run_wrk, seed, wrk_result  # noqa: E402

DURATION = nodes.DURATION
BACKENDS = os.environ.get("BACKENDS", "sqlite,postgres").split(",")
PHASES = os.environ.get("PHASES", "inbound,lag").split(",")
GUESTS = int(os.environ.get("GUESTS", "1000"))
MAX_RATE = int(os.environ.get("MAX_RATE", "30000"))  # inbound calls/s the bodies cover
TIMERS = int(os.environ.get("TIMERS", "100000"))
SPREAD = int(os.environ.get("SPREAD", "60"))
RESULTS = os.environ.get("RESULTS", "bench-guests.json")
SECRET = "bench-app-secret"
PNIDS = ["900000000000001", "900000000000002"]
# As many as the reads' (the ratio compares two capacities under the same
# offered concurrency; Meta delivers a number's calls concurrently and
# asks for a median under 250 ms and fewer than 1 % over 1 s).
CONNECTIONS = int(os.environ.get("CONNECTIONS", "64"))
# PG_STATS=1: PostgreSQL runs pg_stat_statements (planning tracked too);
# after the inbound phase its costliest statements are printed (mean and
# total executor time per call, mean planning time per call), and both
# summed per message.
PG_STATS = os.environ.get("PG_STATS") == "1"
PG_STATS_ORDER = os.environ.get("PG_STATS_ORDER", "total_exec_time")  # or calls
# SRV_OPTS: more revopsd options for a trial ("--workers 16"); the figures
# of docs/BENCHMARKS.md are the defaults'.
SRV_OPTS = os.environ.get("SRV_OPTS", "").split()


class Node:
    """One node on a backend: a portfolio whose two first properties have
    WhatsApp channels."""

    def __init__(self, backend_name, tmp):
        import backend
        import harness
        backend.POSTGRES = backend_name == "postgres"
        self.name = backend_name
        self.tmp = tmp
        self.srv = harness.Server(nodes.POLLED + SRV_OPTS)
        self.runs = 0
        self.calls = 0  # answered 200 over every run
        self.analyzed = False
        try:
            self.s = seed(self.srv)
            for prop, pnid in zip(self.s.properties, PNIDS):
                self.srv.ctl("whatsapp", "set", "--portfolio", self.s.id, "--property",
                             prop["id"], "--phone-number-id", pnid, "--access-token", "bench",
                             "--app-secret", SECRET, "--verify-token", "bench-verify-token")
        except BaseException:
            self.srv.cleanup()
            raise

    def groups(self):
        g = {"revopsd": lambda: [self.srv.proc.pid]}
        if self.name == "postgres":
            with open(os.environ["REVOPS_TEST_PG_FILE"]) as f:
                pgdir = f.read().split()[1]
            with open(os.path.join(pgdir, "data", "postmaster.pid")) as f:
                postmaster = int(f.readline())
            g["postgres"] = lambda: [postmaster] + nodes.children(postmaster)
        return g

    def reads(self):
        rate, _ = nodes.measure_wrk(self.srv.base_url + "/v2/portfolios/%s/properties" % self.s.id,
                                    "auth.lua", read_env(self.s), 64, Cpu(self.groups()))
        log("%s reads: %.0f/s" % (self.name, rate))
        return rate

    def bodies(self, n):
        """A file of n new signed inbound calls."""
        self.runs += 1
        path = os.path.join(self.tmp, "inbound-%s-%d.txt" % (self.name, self.runs))
        ts = str(int(time.time()))
        with open(path, "w") as f:
            for i in range(n):
                g = i % GUESTS
                body = json.dumps({"object": "whatsapp_business_account", "entry": [{
                    "id": "WABA", "changes": [{"field": "messages", "value": {
                        "messaging_product": "whatsapp",
                        "metadata": {"display_phone_number": PNIDS[g % 2],
                                     "phone_number_id": PNIDS[g % 2]},
                        "contacts": [{"profile": {"name": "Guest %d" % g},
                                      "wa_id": "4860%07d" % g}],
                        "messages": [{"from": "4860%07d" % g,
                                      "id": "wamid.bench-%d-%d" % (self.runs, i),
                                      "timestamp": ts, "type": "text",
                                      "text": {"body": "Message %d of the run" % i}}]}}]}]},
                    separators=(",", ":"))
                sig = hmac.new(SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
                f.write(sig + "\t" + body + "\n")
        return path

    def run_inbound(self, seconds):
        """A wrk run of `seconds`, its bodies made first; returns it and the
        file its last thread creates once every thread sends."""
        env = {"BENCH_BODIES": self.bodies(MAX_RATE * seconds), "BENCH_THREADS": "2"}
        env["BENCH_READY"] = os.path.join(self.tmp, "ready-%s-%d" % (self.name, self.runs))
        return run_wrk(self.srv.base_url, "wa_inbound.lua", env, CONNECTIONS, seconds), \
            env["BENCH_READY"]

    def answered(self, out):
        """The 200s of a wrk run of wa_inbound.lua (its every answer must
        be one): each is a message recorded, which check_recorded counts."""
        n = int(re.search(r"(\d+) requests in ", out).group(1))
        self.calls += n
        return n

    def check_recorded(self):
        """Every call answered 200 is a message in guest_messages: at least
        as many rows as answers, and at most CONNECTIONS more per run (a
        call wrk had in flight as it stopped is recorded, not counted)."""
        rows = int(sql_rows(self, "SELECT count(*) FROM guest_messages")[-1].strip())
        if not self.calls <= rows <= self.calls + CONNECTIONS * self.runs:
            raise RuntimeError("%d calls answered 200 but %d messages recorded"
                               % (self.calls, rows))
        log("%s: %d calls answered, %d messages recorded" % (self.name, self.calls, rows))

    def answered_200(self):
        """The server's count of webhook calls answered 200 (/metrics)."""
        body = self.srv.request("GET", "/metrics").raw.decode()
        m = re.search(r'^revops_http_requests_total\{route="/channels/whatsapp/webhook",'
                      r'method="POST",status="200"\} (\d+)$', body, re.M)
        return int(m.group(1)) if m else 0

    def inbound(self):
        p, _ = self.run_inbound(nodes.WARMUP)
        self.answered(wrk_result(p)[2])
        if self.name == "postgres" and not self.analyzed:
            # The tables were empty when the server prepared its
            # statements: statistics, as autovacuum gathers them within its
            # first minute on a database in use, let PostgreSQL plan them
            # again (index probes, not scans of what were empty tables).
            sql_rows(self, "ANALYZE")
            self.analyzed = True
        p, ready = self.run_inbound(DURATION)
        deadline = time.monotonic() + 120
        while not os.path.exists(ready):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("wrk did not start:\n%s" % wrk_result(p)[2])
            time.sleep(0.02)
        # The rate is the server's: the calls it answered 200 over a window
        # that starts once every wrk thread sends and ends before wrk
        # stops. wrk's own figure counts what its first thread sent while
        # the second was still loading its bodies, against a clock that
        # starts after.
        time.sleep(0.5)
        cpu = Cpu(dict(self.groups(), wrk=lambda: [p.pid]))
        c0, t0 = self.answered_200(), time.monotonic()
        cpu.start()
        time.sleep(DURATION - 1.5)
        c1, t1 = self.answered_200(), time.monotonic()
        secs = cpu.stop()
        rate = (c1 - c0) / (t1 - t0)
        wrk_rate, bad, out = wrk_result(p)
        if bad:
            raise RuntimeError("%d answers were not 200 (or the bodies ran out):\n%s"
                               % (bad, out))
        self.answered(out)
        self.check_recorded()
        # CPU per call of each process group (wrk's too): what the two
        # cores can give at most
        per = {k: 1e6 * v / (c1 - c0) for k, v in secs.items()}
        self.latency = {q: latency_ms(out, q) for q in ("50%", "99%")}
        log("%s inbound: %.0f calls/s (wrk's figure %.0f; latency p50 %.1f ms, p99 %.1f ms); "
            "CPU per call: %s" % (
                self.name, rate, wrk_rate, self.latency["50%"], self.latency["99%"],
                ", ".join("%s %.0f us" % kv for kv in sorted(per.items()))))
        self.cpu_per_call = per
        return rate

    def close(self):
        self.srv.close()


def latency_ms(out, q):
    """wrk --latency's percentile q ("50%") in ms."""
    m = re.search(r"^\s*%s\s+([0-9.]+)(us|ms|s)\s*$" % re.escape(q), out, re.M)
    if not m:
        raise RuntimeError("wrk printed no %s latency:\n%s" % (q, out))
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]


def inbound_phase(node):
    reads, calls = paired(node.reads, node.inbound)
    ratios = [c / r for r, c in zip(reads, calls)]
    return {"reads_per_s": statistics.median(reads), "calls_per_s": statistics.median(calls),
            "round_ratios": ratios, "ratio": statistics.median(ratios),
            "cpu_us_per_call_last_round": node.cpu_per_call,
            "latency_ms_last_round": node.latency}


def sql_rows(node, q):
    p = node.srv.db.run(q, timeout=600)
    if p.returncode != 0:
        raise RuntimeError("%s\n%s" % (p.stderr, q[:300]))
    return [line for line in p.stdout.splitlines() if line.strip()]


def print_pg_stats(node):
    """The statements that took the most server time (pg_stat_statements)."""
    for line in sql_rows(node, "SELECT round(total_exec_time::numeric, 0) || ' ms total, '"
                               " || round((1000 * total_exec_time / calls)::numeric, 1)"
                               " || ' us/call (planning '"
                               " || round((1000 * total_plan_time / calls)::numeric, 1)"
                               " || '), ' || calls || ' calls, ' || rows || ' rows: '"
                               " || left(regexp_replace(query, '\\s+', ' ', 'g'), 160)"
                               " FROM pg_stat_statements ORDER BY " + PG_STATS_ORDER +
                               " DESC LIMIT 25"):
        log("pg: " + line)
    # all statements' executor time per message stored (the warm-up's and
    # the rounds' calls alike: every call stores one message)
    [per] = sql_rows(node, "SELECT round(((1000 * (SELECT sum(total_exec_time) FROM"
                           " pg_stat_statements WHERE query NOT LIKE '%pg_advisory_xact_lock%'"
                           " AND query NOT LIKE 'CREATE%' AND query NOT LIKE 'ANALYZE%'))"
                           " / count(*))::numeric, 1) || ' us of executor time per message'"
                           " FROM guest_messages")
    log("pg: " + per)
    [plan] = sql_rows(node, "SELECT round(((1000 * (SELECT sum(total_plan_time) FROM"
                            " pg_stat_statements)) / count(*))::numeric, 1)"
                            " || ' us of planning per message' FROM guest_messages")
    log("pg: " + plan)


def lag_phase(node):
    pf = node.s.id
    start = int(time.time() * 1000) + 5000
    if node.name == "postgres":
        series = "FROM generate_series(0, %d) AS g(i)" % (TIMERS - 1)
        tid = "'tmr_bench' || lpad(i::text, 22, '0')"
        sub = "'ot_bench' || i::text"
    else:
        series = ("FROM (WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c"
                  " WHERE i < %d) SELECT i FROM c)" % (TIMERS - 1))
        tid = "'tmr_bench' || printf('%022d', i)"
        sub = "'ot_bench' || CAST(i AS TEXT)"
    sql_rows(node, "INSERT INTO timers (id, kind, subject_id, episode, step, portfolio_id,"
                   " due_at, state, created_at) SELECT %s, 'task.escalate', %s, 1, 1, '%s',"
                   " %d + (i * CAST(%d AS BIGINT)) / %d, 'pending', %d %s"
             % (tid, sub, pf, start, SPREAD * 1000, TIMERS, start, series))
    log("%s: %d timers pending, due over %d s" % (node.name, TIMERS, SPREAD))
    deadline = time.time() + 5 + SPREAD + 60
    while time.time() < deadline:
        left = int(sql_rows(node, "SELECT COUNT(*) FROM timers WHERE kind = 'task.escalate'"
                                  " AND state = 'pending' AND subject_id LIKE 'ot_bench%'")[0])
        if not left:
            break
        time.sleep(2)
    else:
        raise RuntimeError("%d timers still pending a minute after the last was due" % left)
    lags = sorted(int(x) for x in sql_rows(
        node, "SELECT fired_at - due_at FROM timers WHERE subject_id LIKE 'ot_bench%'"))
    p99 = lags[int(len(lags) * 0.99) - 1] / 1000.0
    out = {"timers": len(lags), "p50_s": lags[len(lags) // 2] / 1000.0, "p99_s": p99,
           "max_s": lags[-1] / 1000.0}
    log("%s lag: p50 %.3f s, p99 %.3f s, max %.3f s over %d timers"
        % (node.name, out["p50_s"], p99, out["max_s"], len(lags)))
    return out


def main():
    if not shutil.which("wrk"):
        sys.exit("bench: wrk is not installed (scripts/install-deps.sh --bench)")
    tmp = tempfile.mkdtemp(prefix="revops-bench-guests-")
    cluster = os.path.join(tmp, "pg-cluster")
    results = {"duration_s": DURATION, "rounds": nodes.ROUNDS, "guests": GUESTS, "timers": TIMERS,
               "spread_s": SPREAD, "cores": os.cpu_count()}
    pg = "postgres" in BACKENDS
    if pg:
        extra = {"PG_OPTS": "-c shared_preload_libraries=pg_stat_statements"
                                " -c pg_stat_statements.track_planning=on " + os.environ.get("PG_OPTS", "")} if PG_STATS else {}
        subprocess.run([os.path.join(nodes.ROOT, "scripts", "pg-test-cluster.sh"), "up",
                        cluster], check=True, env=dict(os.environ, PG_DURABLE="1", **extra))
        os.environ["REVOPS_TEST_PG_FILE"] = cluster
    try:
        for name in BACKENDS:
            node = Node(name, tmp)
            try:
                r = results.setdefault(name, {})
                if "inbound" in PHASES:
                    if PG_STATS and name == "postgres":
                        sql_rows(node, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                    r["inbound"] = inbound_phase(node)
                    if PG_STATS and name == "postgres":
                        print_pg_stats(node)
                if "lag" in PHASES:
                    r["lag"] = lag_phase(node)
            finally:
                node.close()
    finally:
        if pg:
            subprocess.run([os.path.join(nodes.ROOT, "scripts", "pg-test-cluster.sh"), "down",
                            cluster])
        shutil.rmtree(tmp, ignore_errors=True)
    report(results)
    with open(RESULTS, "w") as f:
        json.dump(results, f, indent=2)


def report(r):
    print("backend   inbound calls/s  reads/s   ratio  rounds          lag p50   p99    max")
    for name in BACKENDS:
        b = r.get(name, {})
        i, lag = b.get("inbound"), b.get("lag")
        print("%-9s %15s %8s %7s  %-14s %6s %6s %6s" % (
            name, "%.0f" % i["calls_per_s"] if i else "-", "%.0f" % i["reads_per_s"] if i else "-",
            "%.2f" % i["ratio"] if i else "-",
            " ".join("%.2f" % x for x in i["round_ratios"]) if i else "-",
            "%.3f" % lag["p50_s"] if lag else "-", "%.3f" % lag["p99_s"] if lag else "-",
            "%.3f" % lag["max_s"] if lag else "-"))


if __name__ == "__main__":
    main()
