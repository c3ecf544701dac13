#!/usr/bin/env python3
"""revops benchmark for issue 14: PostgreSQL against SQLite on one node, and
one against two nodes of a role on PostgreSQL. Every figure is a ratio of two
measurements taken in the same run, on the same machine, with the same build.

    bench/nodes.py                    (after `make build`; needs wrk, nginx,
                                       haproxy, postgresql-15: `make bench`
                                       installs them)
    DURATION=10 EVENTS=20000 ROUNDS=3 bench/nodes.py
    PHASES=backends MEASURES=reads bench/nodes.py     (one figure only)

Each pair is measured in ROUNDS (5) paired rounds: both sides run side by
side for the whole phase and are measured one after the other, the first of
each pair in turn, so the load of the machine's neighbours falls on both
alike; a ratio is the median of the rounds' ratios, a rate the median of the
rounds' rates, CPU per operation the mean over the rounds.

1. backends: one node (`--role all`) on SQLite and one on a fresh
   PostgreSQL database (a throw-away cluster, fsync on, synchronous_commit
   off: the durability of SQLite's WAL with synchronous=NORMAL), each with
   a pms-sim of its own:
   - reads: wrk GET /v2/portfolios/{id}/properties (bench/auth.lua), req/s;
   - decisions: wrk POST /v2/rate-decisions, 3 properties each, against
     pms-sim (bench/decision.lua), 201s/s;
   - deliveries: EVENTS (10000) events (revopsctl event emit) fanned out to
     16 v2 subscriptions, sent to nginx over HTTPS with --webhook-uncapped;
     delivered attempts/s between the emission and the last (the node's
     revops_webhook_attempts_total). A failed attempt waits for the
     schedule's 1 min retry: the run says so when one did.
2. nodes (PostgreSQL):
   - deliveries by 1 worker node and by 2 (`--role worker`; the second is
     stopped for the one-node rounds), each node's share from its metrics;
   - reads through a haproxy in front of 1 api node and another in front
     of 2 (`--role api`), each node's share from its request counter.
   For each: the CPU time per operation of every process group (the revopsd
   nodes, postgres, haproxy, nginx, wrk), from /proc, so that what one more
   core would buy can be read off.

Prints a table and writes the figures as JSON to RESULTS (default
bench-nodes.json in the working directory).
"""

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
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "t", "api", "lib"))
os.environ.setdefault("REVOPS_BIN_DIR", os.path.join(ROOT, os.environ.get("BUILD", "build")))

DURATION = int(os.environ.get("DURATION", "10"))
WARMUP = int(os.environ.get("WARMUP", "2"))
EVENTS = int(os.environ.get("EVENTS", "10000"))
# Rounds of each pair of measurements (paired): figures are medians.
ROUNDS = int(os.environ.get("ROUNDS", "5"))
# The pair of API or worker nodes splits the lone node's loops or sender
# threads between them (api_phase, workers_phase).
API_SPLIT = os.environ.get("API_SPLIT", "1") != "0"
LANES = 16
RESULTS = os.environ.get("RESULTS", "bench-nodes.json")
PHASES = os.environ.get("PHASES", "backends,workers,api").split(",")
# Which figures the backends phase measures (all three unless narrowed).
MEASURES = os.environ.get("MEASURES", "reads,decisions,deliveries").split(",")
TICK = os.sysconf("SC_CLK_TCK")
# Every node: the drains poll GET /metrics 20 times a second, past the
# default limit of anonymous calls (600 a minute per address), whose 429s
# once read as a stalled drain.
POLLED = ["--anon-rate-limit", "100000000"]


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


# ------------------------------------------------------------------- CPU

def cpu_ticks(pid):
    """utime + stime of pid, in clock ticks (0 when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


class Cpu:
    """CPU seconds of named process groups between start() and stop()."""

    def __init__(self, groups):
        self.groups = groups  # name -> callable returning pids

    def snap(self):
        return {name: {p: cpu_ticks(p) for p in pids()} for name, pids in self.groups.items()}

    def start(self):
        self.before = self.snap()

    def stop(self):
        after = self.snap()
        return {name: sum(max(0, t - self.before[name].get(p, 0)) for p, t in after[name].items())
                / TICK for name in after}


# ------------------------------------------------------------------ tools

def run_wrk(url, script, env, connections, duration, threads=2):
    """(requests/s, non-2xx) of one wrk run; the CPU of wrk itself is
    measured by the caller through its pid."""
    p = subprocess.Popen(["wrk", "-t%d" % threads, "-c%d" % connections, "-d%ds" % duration,
                          "--latency", "-s", os.path.join(HERE, script), url],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, **env))
    return p


def wrk_result(p):
    out, _ = p.communicate(timeout=600)
    m = re.search(r"Requests/sec:\s+([0-9.]+)", out)
    if not m:
        raise RuntimeError("wrk printed no rate:\n" + out)
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    bad_status = re.search(r"bench-bad-status: (\d+)", out)
    n_bad = int(bad.group(1)) if bad else 0
    n_bad += int(bad_status.group(1)) if bad_status else 0
    return float(m.group(1)), n_bad, out


def measure_wrk(url, script, env, connections, cpu):
    """A WARMUP-second run (discarded), then DURATION seconds measured with
    CPU accounting (wrk's own included)."""
    wrk_result(run_wrk(url, script, env, connections, WARMUP))
    p = run_wrk(url, script, env, connections, DURATION)
    cpu.groups["wrk"] = lambda: [p.pid]
    cpu.start()
    time.sleep(DURATION - 0.2)
    secs = cpu.stop()  # wrk is still running: its CPU is readable
    rate, bad, out = wrk_result(p)
    if bad:
        raise RuntimeError("%d answers were not the expected status:\n%s" % (bad, out))
    return rate, secs


class Nginx:
    """nginx over HTTPS on loopback answering every POST /hook/N with 204."""

    def __init__(self, tmp, ca):
        import haproxy
        self.port = haproxy.free_port()
        conf = os.path.join(tmp, "nginx.conf")
        os.makedirs(os.path.join(tmp, "nginx-tmp"), exist_ok=True)
        user = "user root;\n" if os.geteuid() == 0 else ""
        with open(conf, "w") as f:
            f.write("""%sdaemon off;
worker_processes %d;
error_log %s/nginx-error.log warn;
pid %s/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 10000000;
    client_body_temp_path %s/nginx-tmp/body;
    proxy_temp_path %s/nginx-tmp/proxy;
    fastcgi_temp_path %s/nginx-tmp/fastcgi;
    uwsgi_temp_path %s/nginx-tmp/uwsgi;
    scgi_temp_path %s/nginx-tmp/scgi;
    server {
        listen 127.0.0.1:%d ssl;
        ssl_certificate %s;
        ssl_certificate_key %s;
        ssl_session_cache shared:bench:10m;
        location /hook/ { return 204; }
    }
}
""" % ((user, os.cpu_count()) + (tmp,) * 7 + (self.port, ca.cert_pem, ca.key_pem)))
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", tmp],
                                     stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        if self.proc.poll() is not None:
            raise RuntimeError("nginx did not start; see %s/nginx-error.log" % tmp)

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def url(self, i):
        return "https://127.0.0.1:%d/hook/%d" % (self.port, i)

    def close(self):
        self.proc.terminate()
        self.proc.wait(10)


# ------------------------------------------------------------- the setups

def metrics_lines(srv):
    """The node's /metrics, line by line; a refusal fails the run."""
    r = srv.request("GET", "/metrics")
    if r.status != 200:
        raise RuntimeError("GET /metrics: %r" % (r,))
    return r.raw.decode().splitlines()


def metric(srv, name, outcome="delivered"):
    for line in metrics_lines(srv):
        if line.startswith(name + " ") or line.startswith(name + "{"):
            if line.startswith(name + " ") or '"%s"' % outcome in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def delivered(srv):
    return metric(srv, "revops_webhook_attempts_total")


def failed(srv):
    return metric(srv, "revops_webhook_attempts_total", "failed")


def requests_served(srv, route):
    total = 0.0
    for line in metrics_lines(srv):
        if line.startswith("revops_http_requests_total{") and 'route="%s"' % route in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def seed(srv, nprops=5):
    """A portfolio with its rate limit lifted, an approver and a token."""
    import harness
    s = srv.seed_portfolio("enterprise", nprops)
    srv.ctl("portfolio", "set-rate-limit", "--portfolio", s.id, "--per-minute", "100000000")
    harness.ctl_user(srv, s.id, "approver@bench.example", ["revenue-approver"])
    return s


def read_env(s):
    return {"BENCH_TOKEN": s.token, "BENCH_PORTFOLIO": s.id}


def decision_env(s):
    env = read_env(s)
    env.update({"BENCH_PROPERTIES": ",".join(p["id"] for p in s.properties[:3]),
                "BENCH_CEILING": s.ceiling["id"], "BENCH_APPROVER": "approver@bench.example",
                "BENCH_FROM": "2027-01-10", "BENCH_TO": "2027-01-12",
                "BENCH_MIN": "30000", "BENCH_SPAN": "50000"})
    return env


def subscribe(api, s, sink):
    for i in range(LANES):
        r = api.request("POST", "/v2/webhooks", token=s.token, portfolio=s.id,
                        body={"url": sink.url(i), "events": ["sso.user.provisioned"]})
        if r.status != 201:
            raise RuntimeError("subscription: %r" % (r,))


def drain(workers, ctl_srv, s, cpu, events=EVENTS):
    """Emits events to the LANES subscriptions and waits until every
    delivery is delivered. Returns (deliveries/s, cpu, shares)."""
    total = events * LANES
    before = [delivered(w) for w in workers]
    failed_before = sum(failed(w) for w in workers)
    cpu.start()
    t0 = time.monotonic()
    ctl_srv.ctl("event", "emit", "--portfolio", s.id, "--type", "sso.user.provisioned",
                "--count", str(events))
    while True:
        now = [delivered(w) - b for w, b in zip(workers, before)]
        if sum(now) >= total:
            break
        if time.monotonic() - t0 > 600:
            raise RuntimeError("deliveries stuck at %d of %d" % (sum(now), total))
        time.sleep(0.05)
    secs = time.monotonic() - t0
    usage = cpu.stop()
    # A failed attempt is retried on the schedule (1 min first), which the
    # figure then includes: say so rather than report a slow run.
    retried = sum(failed(w) for w in workers) - failed_before
    if retried:
        log("%d attempts failed and were retried on the schedule (%.1f s in all)"
            % (retried, secs))
    return total / secs, usage, [n / total for n in now]


# ---------------------------------------------------------------- phases

def paired(measure_a, measure_b):
    """ROUNDS rounds of measure_a and measure_b back to back, the first of
    each pair in turn (AB, BA, AB, ...), so that the machine's drift and
    its neighbours' load fall on both alike. Returns both lists of
    results."""
    a, b = [], []
    for r in range(ROUNDS):
        pair = [(measure_a, a), (measure_b, b)]
        for measure, out in (reversed(pair) if r % 2 else pair):
            out.append(measure())
    return a, b


def combined(runs):
    """One figure of a side's rounds: the median rate, every round's rate,
    and CPU and operations summed over the rounds (CPU per operation is
    then the rounds' mean)."""
    cpu = {}
    for m in runs:
        for k, v in m["cpu_s"].items():
            cpu[k] = cpu.get(k, 0.0) + v
    out = {"rate": statistics.median(m["rate"] for m in runs),
           "rates": [m["rate"] for m in runs], "cpu_s": cpu,
           "ops": sum(m["ops"] for m in runs)}
    if "shares" in runs[0]:
        out["shares"] = [statistics.mean(x) for x in zip(*(m["shares"] for m in runs))]
    return out


def pair_figures(runs_a, runs_b):
    """(a, b): each side combined; b also has the rounds' ratios b / a
    and their median ("ratio")."""
    ratios = [y["rate"] / x["rate"] for x, y in zip(runs_a, runs_b)]
    a, b = combined(runs_a), combined(runs_b)
    b["round_ratios"] = ratios
    b["ratio"] = statistics.median(ratios)
    return a, b


class OneNode:
    """One node (`--role all`) on db_name (sqlite|postgres) with a pms-sim
    of its own, seeded, its 16 subscriptions made; measure() runs one
    figure on it."""

    def __init__(self, db_name, ca, sink, pg_pids):
        import backend
        import harness
        import pmssim
        backend.POSTGRES = db_name == "postgres"
        self.name, self.sink = db_name, sink
        # Decisions of every round write to it: room for all of them.
        self.pms = pmssim.PmsSim("--capacity", "5000000")
        self.srv = None
        try:
            self.srv = harness.Server(POLLED + ["--allow-private-targets", "--trust-ca",
                                                ca.ca_pem, "--webhook-uncapped",
                                                "--pms-url", self.pms.url])
            self.s = seed(self.srv)
            subscribe(self.srv, self.s, sink)
        except BaseException:
            self.close()
            raise
        self.groups = {"revopsd": lambda: [self.srv.proc.pid], "nginx": sink.pids,
                       "pms-sim": lambda: [self.pms.proc.pid]}
        if db_name == "postgres":
            self.groups["postgres"] = pg_pids

    def measure(self, what):
        cpu = Cpu(dict(self.groups))
        base = self.srv.base_url
        if what == "reads":
            rate, secs = measure_wrk(base + "/v2/portfolios/%s/properties" % self.s.id,
                                     "auth.lua", read_env(self.s), 64, cpu)
            ops = rate * DURATION
        elif what == "decisions":
            rate, secs = measure_wrk(base, "decision.lua", decision_env(self.s), 32, cpu)
            ops = rate * DURATION
        else:
            rate, secs, _ = drain([self.srv], self.srv, self.s, cpu)
            ops = EVENTS * LANES
        log("%s %s: %.0f/s" % (self.name, what, rate))
        return {"rate": rate, "cpu_s": secs, "ops": ops}

    def close(self):
        if self.srv:
            self.srv.close()
        self.pms.cleanup()


def backends_phase(ca, sink, pg_pids):
    """Both nodes run side by side for the whole phase, each measured in
    turn (paired): the idle one costs next to nothing."""
    nodes = []
    try:
        nodes.append(OneNode("sqlite", ca, sink, pg_pids))
        nodes.append(OneNode("postgres", ca, sink, pg_pids))
        out = {"sqlite": {}, "postgres": {}}
        for what in MEASURES:
            runs = paired(lambda: nodes[0].measure(what), lambda: nodes[1].measure(what))
            out["sqlite"][what], out["postgres"][what] = pair_figures(*runs)
        return out
    finally:
        for n in reversed(nodes):
            n.close()


def start_node(api, args):
    import harness
    n = harness.Server(POLLED + args, start=False, db=api.db)
    shutil.copy(os.path.join(api.data_dir, "revops.key"), n.data_dir)
    n.start()
    return n


def buckets_divided(nodes):
    """Waits until the live worker nodes hold the 64 lane buckets between
    them, each some."""
    import harness
    harness.wait_until(lambda: sum(metric(w, "revops_webhook_lane_buckets")
                                   for w in nodes) == 64 and
                       all(metric(w, "revops_webhook_lane_buckets") > 0 for w in nodes)
                       or None, 60, what="lane buckets divided")


def workers_phase(ca, sink, pg_pids):
    """Deliveries by one worker node and by two others, in turn: the side
    not measured is stopped (its buckets go to the side that runs). As in
    api_phase, the pair splits the lone node's sender threads
    (--webhook-senders 2) between them (API_SPLIT=0: both at the default)."""
    import backend
    import harness
    backend.POSTGRES = True
    api = harness.Server(POLLED + ["--allow-private-targets"])
    worker_args = ["--role", "worker", "--allow-private-targets", "--trust-ca", ca.ca_pem,
                   "--webhook-uncapped"]
    half = ["--webhook-senders", "1"] if API_SPLIT else []
    nodes = []
    try:
        s = seed(api, 1)
        subscribe(api, s, sink)
        nodes = [start_node(api, worker_args)] + [start_node(api, worker_args + half)
                                                  for _ in range(2)]
        sets = {1: nodes[:1], 2: nodes[1:]}
        api.stop()  # its own engine would take lanes too: workers only
        api.start(POLLED + ["--role", "api", "--allow-private-targets"])

        def measure(n):
            live = sets[n]
            for w in sets[3 - n]:
                if w.proc is not None:
                    w.stop()
            for w in live:
                if w.proc is None:
                    w.start()
            buckets_divided(live)
            cpu = Cpu({"revopsd": lambda: [w.proc.pid for w in live], "postgres": pg_pids,
                       "nginx": sink.pids})
            rate, secs, shares = drain(live, api, s, cpu)
            log("%d worker(s): %.0f deliveries/s, shares %s" % (n, rate, shares))
            return {"rate": rate, "cpu_s": secs, "ops": EVENTS * LANES, "shares": shares}
        one, two = pair_figures(*paired(lambda: measure(1), lambda: measure(2)))
        return {"1": one, "2": two, "split_senders": bool(API_SPLIT)}
    finally:
        for w in nodes:
            w.close()
        api.close()


def api_phase(tmp, pg_pids):
    """Reads through one haproxy in front of one API node and another in
    front of two others, all running throughout, measured in turn. Nodes
    sharing the machine share its cores: the lone node runs the default
    loops (--threads = cores), each of the pair half as many, so the two
    sides run as many loops on the same cores and the ratio is the cost of
    a second node, not of twice the threads (API_SPLIT=0: the pair at the
    default too)."""
    import backend
    import harness
    import haproxy
    backend.POSTGRES = True
    cores = os.cpu_count() or 2
    half = ["--threads", str(max(1, cores // 2))] if API_SPLIT else []
    first = harness.Server(POLLED + ["--role", "api"])
    nodes, lbs = [first], []
    try:
        s = seed(first)
        nodes += [start_node(first, ["--role", "api"] + half) for _ in range(2)]
        sets = {1: nodes[:1], 2: nodes[1:]}
        for n in (1, 2):
            d = os.path.join(tmp, "haproxy-%d" % n)
            os.makedirs(d, exist_ok=True)
            lbs.append(haproxy.Haproxy([("api%d" % i, "127.0.0.1", a.port)
                                        for i, a in enumerate(sets[n])], d))
        route = "/v2/portfolios/{id}/properties"

        def measure(n):
            live, lb = sets[n], lbs[n - 1]
            before = [requests_served(a, route) for a in live]
            cpu = Cpu({"revopsd": lambda: [a.proc.pid for a in live], "postgres": pg_pids,
                       "haproxy": lambda: [lb.proc.pid]})
            rate, secs = measure_wrk("http://127.0.0.1:%d/v2/portfolios/%s/properties"
                                     % (lb.port, s.id), "auth.lua", read_env(s), 64, cpu)
            served = [requests_served(a, route) - b for a, b in zip(live, before)]
            shares = [x / sum(served) for x in served]
            log("%d api node(s) behind haproxy: %.0f reads/s, shares %s" % (n, rate, shares))
            return {"rate": rate, "cpu_s": secs, "ops": rate * DURATION, "shares": shares}
        one, two = pair_figures(*paired(lambda: measure(1), lambda: measure(2)))
        return {"1": one, "2": two, "split_threads": bool(API_SPLIT)}
    finally:
        for lb in lbs:
            lb.close()
        for a in reversed(nodes):
            a.close()


def us_per_op(m):
    return {k: round(v * 1e6 / m["ops"], 1) for k, v in m["cpu_s"].items()}


def main():
    import receiver
    for tool in ("wrk", "nginx", "haproxy"):
        if not shutil.which(tool):
            sys.exit("bench: %s is not installed (scripts/install-deps.sh --bench)" % tool)
    tmp = tempfile.mkdtemp(prefix="revops-bench-nodes-")
    cluster = os.path.join(tmp, "pg-cluster")
    env = dict(os.environ, PG_DURABLE="1")
    subprocess.run([os.path.join(ROOT, "scripts", "pg-test-cluster.sh"), "up", cluster],
                   check=True, env=env)
    os.environ["REVOPS_TEST_PG_FILE"] = cluster
    with open(cluster) as f:
        pgdir = f.read().split()[1]
    with open(os.path.join(pgdir, "data", "postmaster.pid")) as f:
        postmaster = int(f.readline())

    def pg_pids():
        return [postmaster] + children(postmaster)

    ca = receiver.TestCA(tmp)
    sink = Nginx(tmp, ca)
    results = {"duration_s": DURATION, "events": EVENTS, "lanes": LANES,
               "rounds": ROUNDS, "cores": os.cpu_count()}
    try:
        if "backends" in PHASES:
            results.update(backends_phase(ca, sink, pg_pids))
        if "workers" in PHASES:
            results["workers"] = workers_phase(ca, sink, pg_pids)
        if "api" in PHASES:
            results["api"] = api_phase(tmp, pg_pids)
    finally:
        sink.close()
        subprocess.run([os.path.join(ROOT, "scripts", "pg-test-cluster.sh"), "down", cluster])
        shutil.rmtree(tmp, ignore_errors=True)
    report(results)


def report(r):
    r.setdefault("ratios", {})
    if "sqlite" in r:
        report_backends(r)
    for k, what in (("workers", "deliveries"), ("api", "reads behind haproxy")):
        if k in r:
            report_nodes(r, k, what)
    with open(RESULTS, "w") as f:
        json.dump(r, f, indent=2)
    print("figures: %s" % RESULTS)


def rounds(m):
    return " ".join("%.0f" % x for x in m["rates"])


def report_backends(r):
    print("== PostgreSQL against SQLite, one node (targets: reads >= 0.80, decisions >= 0.60,"
          " deliveries >= 0.50); medians of %d paired rounds" % r["rounds"])
    for k in ("reads", "decisions", "deliveries"):
        if k not in r["sqlite"]:
            continue
        a, b = r["sqlite"][k], r["postgres"][k]
        r["ratios"][k] = b["ratio"]
        print("  %-10s sqlite %8.0f/s  postgres %8.0f/s  ratio %.2f  (rounds %s)" % (
            k, a["rate"], b["rate"], b["ratio"],
            " ".join("%.2f" % x for x in b["round_ratios"])))
        print("             rates: sqlite %s; postgres %s" % (rounds(a), rounds(b)))
        print("             CPU us per op: sqlite %s" % us_per_op(a))
        print("                            postgres %s" % us_per_op(b))


def report_nodes(r, k, what):
    print("== one node against two (PostgreSQL; target: two >= 0.95 x one, each 35-65 %%);"
          " medians of %d paired rounds" % r["rounds"])
    one, two = r[k]["1"], r[k]["2"]
    r["ratios"][k] = two["ratio"]
    print("  %-8s %s: one %8.0f/s  two %8.0f/s  ratio %.2f  (rounds %s)  shares %s" % (
        k, what, one["rate"], two["rate"], r["ratios"][k],
        " ".join("%.2f" % x for x in two["round_ratios"]),
        ["%.0f %%" % (100 * x) for x in two["shares"]]))
    print("             rates: one %s; two %s" % (rounds(one), rounds(two)))
    print("             CPU us per op: one %s" % us_per_op(one))
    print("                            two %s" % us_per_op(two))


if __name__ == "__main__":
    main()
