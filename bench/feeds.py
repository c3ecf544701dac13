#!/usr/bin/env python3
"""revops benchmark for issue 15: the module feeds and the lists behind
them. Every figure is a ratio of two measurements of the same server in the
same run.

    bench/feeds.py                       (after `make build`; needs wrk and,
                                          for postgres, postgresql-15:
                                          `make bench` installs them)
    BACKENDS=sqlite ROUNDS=3 DURATION=10 bench/feeds.py
    PHASES=ingest FEEDS=reviews bench/feeds.py

1. ingest: on one node per backend, in ROUNDS paired rounds (the order of
   the pair alternating):
   - reads: wrk GET /v2/portfolios/{id}/properties (bench/auth.lua, 64
     connections), requests/s: the authenticated read rate;
   - each feed of FEEDS (reviews, ota-rates, rate-suggestions): wrk POST
     /v2/feeds/<feed> with batches of ITEMS (500) new items
     (bench/feed.lua, 4 connections), items/s = batches/s x ITEMS.
   The figure is items/s / reads/s, the median of the rounds' ratios
   (target: at least 0.25).
2. lists: ROWS (1,000,000) reviews and ROWS OTA observations are put in the
   database (SQL, in a few seconds: loading them through the feed would
   take minutes and measure the feed again), plus ALERTS (60,000) parity
   alerts; then wrk (bench/list.lua, 8 connections, DURATION s) reads
   GET /v2/reviews and GET /v2/parity-alerts at page 1 and at page 1,000
   (50 items a page; the cursor is found by paging there). The figure is
   p99(page 1000) / p99(page 1), rounds paired (target: at most 1.5).

Prints a table and writes the figures as JSON to RESULTS (default
bench-feeds.json in the working directory).
"""

import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import nodes  # noqa: E402  (puts t/api/lib on sys.path, sets REVOPS_BIN_DIR)
from nodes import Cpu, log, measure_wrk, paired, read_env, run_wrk, seed  # noqa: E402

DURATION = nodes.DURATION
ROUNDS = nodes.ROUNDS
ITEMS = int(os.environ.get("ITEMS", "500"))
ROWS = int(os.environ.get("ROWS", "1000000"))
ALERTS = int(os.environ.get("ALERTS", "60000"))
PAGE = 50
DEEP_PAGE = 1000
BACKENDS = os.environ.get("BACKENDS", "sqlite,postgres").split(",")
PHASES = os.environ.get("PHASES", "ingest,lists").split(",")
FEEDS = os.environ.get("FEEDS", "reviews,ota-rates,rate-suggestions").split(",")
RESULTS = os.environ.get("RESULTS", "bench-feeds.json")


def feed_env(s, feed):
    at = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1))
    env = read_env(s)
    env.update({"BENCH_FEED": feed, "BENCH_ITEMS": str(ITEMS),
                "BENCH_PROPERTIES": ",".join(p["id"] for p in s.properties),
                "BENCH_AT": at.strftime("%Y-%m-%dT%H:%M:%SZ")})
    return env


class Node:
    """One node on a backend, seeded with a portfolio of 5 properties."""

    def __init__(self, backend_name):
        import backend
        import harness
        backend.POSTGRES = backend_name == "postgres"
        self.name = backend_name
        self.srv = harness.Server(nodes.POLLED)
        try:
            self.s = seed(self.srv)
        except BaseException:
            self.srv.cleanup()
            raise

    def groups(self):
        return {"revopsd": lambda: [self.srv.proc.pid]}

    def reads(self):
        rate, _ = measure_wrk(self.srv.base_url + "/v2/portfolios/%s/properties" % self.s.id,
                              "auth.lua", read_env(self.s), 64, Cpu(self.groups()))
        log("%s reads: %.0f/s" % (self.name, rate))
        return rate

    def ingest(self, feed):
        rate, _ = measure_wrk(self.srv.base_url, "feed.lua", feed_env(self.s, feed), 4,
                              Cpu(self.groups()))
        log("%s %s: %.0f batches/s = %.0f items/s" % (self.name, feed, rate, rate * ITEMS))
        return rate * ITEMS

    def close(self):
        self.srv.close()


def ingest_phase(node):
    out = {}
    for feed in FEEDS:
        reads, items = paired(node.reads, lambda: node.ingest(feed))
        ratios = [i / r for r, i in zip(reads, items)]
        out[feed] = {"reads_per_s": statistics.median(reads),
                     "items_per_s": statistics.median(items),
                     "round_ratios": ratios, "ratio": statistics.median(ratios)}
    return out


# ------------------------------------------------------------------ lists

def load_rows(node):
    """ROWS reviews, ROWS OTA observations and ALERTS parity alerts of the
    node's portfolio, spread over its properties, by SQL."""
    pf = node.s.id
    props = [p["id"] for p in node.s.properties]
    now = int(time.time() * 1000)
    prop = "CASE i %% %d %s END" % (len(props), " ".join(
        "WHEN %d THEN '%s'" % (k, p) for k, p in enumerate(props)))
    if node.name == "postgres":
        series = "FROM generate_series(1, %d) AS g(i)"
        rid = "'%s' || lpad(i::text, 26, '0')"
        text = "i::text"
    else:
        series = "FROM (WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c" \
                 " WHERE i < %d) SELECT i FROM c)"
        rid = "'%s' || printf('%%026d', i)"
        text = "CAST(i AS TEXT)"
    sql = [
        "INSERT INTO reviews (id, portfolio_id, property_id, source, external_id, rating_x100,"
        " max_rating, score_x100, language, text, author, published_at, reply_status,"
        " created_at, updated_at) SELECT %s, '%s', %s, 'google', 'seed-' || %s, 400, 5, 800,"
        " 'en', 'A seeded review of a pleasant stay', 'Guest', %d, 'none', %d, %d %s"
        % (rid % "rv_", pf, prop, text, now - 86400000, now, now, series % ROWS),
        "INSERT INTO ota_observations (portfolio_id, property_id, ota, room_type_code,"
        " stay_date, currency, minor_units, observed_at, received_at) SELECT '%s', %s,"
        " 'booking.com', 'R' || %s, '2027-06-01', 'PLN', 40000, %d, %d %s"
        % (pf, prop, text, now - 3600000, now, series % ROWS),
        "INSERT INTO parity_alerts (id, portfolio_id, property_id, ota, room_type_code,"
        " stay_date, status, currency, ota_minor, floor_minor, floor_source, opened_at,"
        " observed_at, updated_at) SELECT %s, '%s', %s, 'booking.com', 'R' || %s,"
        " '2027-06-01', 'open', 'PLN', 40000, 45000, 'rd_seed', %d, %d, %d %s"
        % (rid % "pa_", pf, prop, text, now, now, now, series % ALERTS),
        "ANALYZE",
    ]
    t0 = time.monotonic()
    for q in sql:
        p = node.srv.db.run(q, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError("loading failed: %s\n%s" % (p.stderr, q[:300]))
    log("%s: loaded %d reviews, %d observations, %d alerts in %.0f s"
        % (node.name, ROWS, ROWS, ALERTS, time.monotonic() - t0))


def deep_cursor(node, path):
    """The cursor of page DEEP_PAGE of path (limit PAGE)."""
    cursor = None
    for _ in range(DEEP_PAGE - 1):
        q = path + "?limit=%d" % PAGE + ("&cursor=" + cursor if cursor else "")
        r = node.srv.request("GET", q, token=node.s.token, portfolio=node.s.id)
        if r.status != 200:
            raise RuntimeError("%s: %r" % (q, r))
        cursor = r.body["meta"]["next_cursor"]
        if not cursor:
            raise RuntimeError("%s has fewer than %d pages" % (path, DEEP_PAGE))
    return cursor


def wrk_ms(v):
    """A wrk latency ("456.00us", "1.23ms", "1.02s") in ms."""
    for suffix, factor in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if v.endswith(suffix):
            return float(v[:-len(suffix)]) * factor
    raise RuntimeError("not a wrk latency: %r" % v)


def p99(node, path):
    """The p99 latency (ms) of wrk reading path for DURATION s."""
    env = read_env(node.s)
    env["BENCH_PATH"] = path
    p = run_wrk(node.srv.base_url, "list.lua", env, 8, DURATION)
    out, _ = p.communicate(timeout=600)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "99%":
            return wrk_ms(parts[1])
    raise RuntimeError("wrk printed no p99:\n" + out)


def lists_phase(node):
    load_rows(node)
    out = {}
    for path in ("/v2/reviews", "/v2/parity-alerts"):
        deep = path + "?limit=%d&cursor=%s" % (PAGE, deep_cursor(node, path))
        first = path + "?limit=%d" % PAGE
        a, b = paired(lambda: p99(node, first), lambda: p99(node, deep))
        ratios = [y / x for x, y in zip(a, b)]
        out[path] = {"p99_page1_ms": statistics.median(a), "p99_page1000_ms": statistics.median(b),
                     "round_ratios": ratios, "ratio": statistics.median(ratios)}
        log("%s %s p99: page 1 %.2f ms, page %d %.2f ms (ratio %.2f)"
            % (node.name, path, out[path]["p99_page1_ms"], DEEP_PAGE,
               out[path]["p99_page1000_ms"], out[path]["ratio"]))
    return out


def main():
    if not shutil.which("wrk"):
        sys.exit("bench: wrk is not installed (scripts/install-deps.sh --bench)")
    tmp = tempfile.mkdtemp(prefix="revops-bench-feeds-")
    cluster = os.path.join(tmp, "pg-cluster")
    results = {"duration_s": DURATION, "rounds": ROUNDS, "items": ITEMS, "rows": ROWS,
               "alerts": ALERTS, "cores": os.cpu_count()}
    pg = "postgres" in BACKENDS
    if pg:
        subprocess.run([os.path.join(nodes.ROOT, "scripts", "pg-test-cluster.sh"), "up",
                        cluster], check=True, env=dict(os.environ, PG_DURABLE="1"))
        os.environ["REVOPS_TEST_PG_FILE"] = cluster
    try:
        for name in BACKENDS:
            node = Node(name)
            try:
                r = results.setdefault(name, {})
                if "ingest" in PHASES:
                    r["ingest"] = ingest_phase(node)
                if "lists" in PHASES:
                    r["lists"] = lists_phase(node)
            finally:
                node.close()
    finally:
        if pg:
            subprocess.run([os.path.join(nodes.ROOT, "scripts", "pg-test-cluster.sh"), "down",
                            cluster])
        shutil.rmtree(tmp, ignore_errors=True)
    report(results)


def report(r):
    print("%-9s %-18s %12s %12s %8s  rounds" % ("backend", "feed", "reads/s", "items/s",
                                                 "ratio"))
    for name in BACKENDS:
        for feed, f in r.get(name, {}).get("ingest", {}).items():
            print("%-9s %-18s %12.0f %12.0f %8.2f  %s" % (
                name, feed, f["reads_per_s"], f["items_per_s"], f["ratio"],
                " ".join("%.2f" % x for x in f["round_ratios"])))
    print("%-9s %-18s %12s %12s %8s  rounds" % ("backend", "list", "p99 p1 ms",
                                                 "p99 p1000", "ratio"))
    for name in BACKENDS:
        for path, f in r.get(name, {}).get("lists", {}).items():
            print("%-9s %-18s %12.2f %12.2f %8.2f  %s" % (
                name, path, f["p99_page1_ms"], f["p99_page1000_ms"], f["ratio"],
                " ".join("%.2f" % x for x in f["round_ratios"])))
    with open(RESULTS, "w") as f:
        json.dump(r, f, indent=1)


if __name__ == "__main__":
    main()
