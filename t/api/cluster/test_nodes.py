"""Several revopsd nodes on one database (docs/operations.md, "Several
nodes").

On PostgreSQL: two `--role api` nodes behind haproxy and two `--role worker`
nodes share one database. Workers serve health and metrics only and divide
the webhook lane buckets between them; a burst of 5,120 deliveries over 16
receiver URLs reaches the receiver once each, sent by both workers; a
worker killed with SIGKILL mid-burst loses nothing (the other takes its
buckets over once its leases run out, and resends at most what it had in
flight, which it logs); the same Idempotency-Key sent to both API nodes at
once publishes one decision; a user deprovisioned through one API node is
refused by the other within a second; a portfolio's rate limit holds
across both API nodes, and a raised override reaches the other node within
a second; a deprecation reaches both API nodes; a SAML assertion used
through one node is refused by the other.

On SQLite (one server per database file) the same suite checks what
applies there: the api and worker roles are refused at start, and the one
node serves every bucket.
"""

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
import haproxy  # noqa: E402
import idp as idplib  # noqa: E402
import receiver  # noqa: E402
from harness import (SCIM_USER_URN, assert_error, assert_success, ctl_user,  # noqa: E402
                     idp_set, rate_decision_body, saml_grant, scim_request, scim_token_for)

PUBLIC_URL = "http://sp.test"
ENTITY = "https://idp-nodes.example/saml/metadata"
APPROVER = "approver@nodes.example"
EVENT_TYPE = "sso.user.provisioned"
LANES = 16
EVENTS = 320  # x LANES subscriptions = 5,120 deliveries
BUCKETS = 64
TTL = 10.0    # cluster.h CLUSTER_TTL_MS


def metrics(srv):
    """GET /metrics of one node as {series: value}."""
    r = srv.request("GET", "/metrics")
    if r.status != 200:
        raise AssertionError("metrics: %r" % (r,))
    text = r.raw.decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def delivered(srv):
    return metrics(srv).get('revops_webhook_attempts_total{outcome="delivered"}', 0)


def buckets(srv):
    return metrics(srv).get("revops_webhook_lane_buckets")


class SoleNodeTest(unittest.TestCase):
    """One node with the default role serves everything, on either backend."""

    def test_one_node_serves_every_bucket(self):
        with harness.Server() as srv:
            m = metrics(srv)
            info = [k for k in m if k.startswith("revops_node_info{")]
            self.assertEqual(len(info), 1, m)
            self.assertRegex(info[0], r'node="node_[0-9A-Za-z]+",role="all"')
            self.assertEqual(m.get("revops_webhook_lane_buckets"), BUCKETS, m)
            self.assertEqual(srv.request("GET", "/v2/openapi.json").status, 200)

    def test_event_loops(self):
        """--threads defaults to the cores on both backends; given, it is
        taken as it is. Counted as the process's http-loop threads."""
        def loops(srv):
            n = 0
            for task in os.listdir("/proc/%d/task" % srv.proc.pid):
                with open("/proc/%d/task/%s/comm" % (srv.proc.pid, task)) as f:
                    n += f.read().strip() == "http-loop"
            return n
        cores = os.cpu_count()
        with harness.Server() as srv:
            self.assertEqual(loops(srv), cores)
        with harness.Server(["--threads", "3"]) as srv:
            self.assertEqual(loops(srv), 3)


class SqliteRolesTest(unittest.TestCase):
    """SQLite has one server per file: roles that leave work to other
    nodes are refused, with the reason, before anything is written."""

    def test_api_and_worker_roles_need_a_shared_database(self):
        tmp = tempfile.mkdtemp(prefix="revops-roles-")
        try:
            for role in ("api", "worker"):
                p = subprocess.run(
                    [harness.REVOPSD, "--role", role, "--data-dir", tmp, "--listen",
                     "127.0.0.1:0"], capture_output=True, text=True, timeout=30)
                self.assertEqual(p.returncode, 2, p)
                self.assertIn("--role %s needs a database that several nodes share" % role,
                              p.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "revops.db")),
                             "a refused start wrote the database")
            p = subprocess.run([harness.REVOPSD, "--role", "boss", "--data-dir", tmp],
                                       capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 2, p)
            self.assertIn("--role must be all, api or worker", p.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class MultiNodeTest(unittest.TestCase):
    """Two api nodes behind haproxy and two worker nodes on one database."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="revops-nodes-")
        cls.nodes, cls.idps = [], []
        cls.lb = None
        cls.ca = receiver.TestCA(cls.tmp)
        cls.rcv = receiver.Receiver(cls.ca, default_status=204)
        try:
            cls.start_nodes()
            cls.seed = cls.api1.seed_portfolio("enterprise", 3)
            ctl_user(cls.api1, cls.seed.id, APPROVER, ["revenue-approver"])
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_nodes(cls):
        api = ["--role", "api", "--public-url", PUBLIC_URL, "--allow-private-targets"]
        worker = ["--role", "worker", "--allow-private-targets", "--trust-ca", cls.ca.ca_pem,
                  "--webhook-uncapped"]
        cls.api1 = harness.Server(api)
        cls.nodes.append(cls.api1)
        cls.api2 = cls.node(api)
        cls.w1 = cls.node(worker)
        cls.w2 = cls.node(worker)
        cls.lb = haproxy.Haproxy([("api1", "127.0.0.1", cls.api1.port),
                                  ("api2", "127.0.0.1", cls.api2.port)], cls.tmp)

    @classmethod
    def node(cls, args):
        """Another node on api1's database, with its secret-sealing key
        (every node must have the same key file)."""
        srv = harness.Server(args, start=False, db=cls.api1.db)
        shutil.copy(os.path.join(cls.api1.data_dir, "revops.key"), srv.data_dir)
        cls.nodes.append(srv)
        srv.start()
        return srv

    @classmethod
    def tearDownClass(cls):
        if cls.lb:
            cls.lb.close()
        for i in cls.idps:
            i.cleanup()
        for srv in reversed(cls.nodes):  # api1, which owns the database, last
            try:
                srv.close() if srv.proc is not None else srv.cleanup()
            except AssertionError as e:
                sys.stderr.write("%s\n" % e)
        cls.rcv.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # helpers ---------------------------------------------------------------

    def via_lb(self, method, path, **kw):
        return harness.http_request(self.lb.port, method, path, **kw)

    def subscribe(self, prefix):
        """LANES subscriptions (one lane each), made through haproxy."""
        for i in range(LANES):
            r = self.via_lb("POST", "/v2/webhooks", token=self.seed.token,
                            portfolio=self.seed.id,
                            body={"url": self.rcv.url("/%s/%d" % (prefix, i)),
                                  "events": [EVENT_TYPE]})
            assert_success(self, r, 201)

    def deliveries(self, prefix):
        """Delivery id -> number of requests the receiver got for it."""
        got = collections.Counter()
        for i in range(LANES):
            for d in self.rcv.received("/%s/%d" % (prefix, i)):
                got[d.headers.get("x-service-delivery-id")] += 1
        return got

    def wait_divided(self):
        harness.wait_until(lambda: buckets(self.w1) == buckets(self.w2) == BUCKETS / 2 or None,
                           3 * TTL, interval=0.2, what="the buckets divided 32/32")

    # tests -----------------------------------------------------------------

    def test_1_worker_serves_health_and_metrics_only(self):
        for path in ("/healthz", "/readyz", "/metrics"):
            self.assertEqual(self.w1.request("GET", path).status, 200, path)
        for path in ("/v2/portfolios", "/v2/openapi.json", "/oauth/token"):
            assert_error(self, self.w1.request("GET", path), 404, "SVC-NOT-FOUND")
        m = metrics(self.api1)
        self.assertIn('revops_node_info{node="%s",role="api"}' % self.node_id(m), m)
        self.assertEqual(m["revops_webhook_lane_buckets"], 0)
        m = metrics(self.w1)
        self.assertIn('revops_node_info{node="%s",role="worker"}' % self.node_id(m), m)

    def node_id(self, m):
        (key,) = [k for k in m if k.startswith("revops_node_info{")]
        return re.search(r'node="([^"]+)"', key).group(1)

    def test_2_burst_delivered_once_by_both_workers(self):
        self.wait_divided()
        before = delivered(self.w1), delivered(self.w2)
        self.subscribe("burst")
        out = self.api1.ctl("event", "emit", "--portfolio", self.seed.id, "--type", EVENT_TYPE,
                            "--count", str(EVENTS))
        self.assertEqual(out, {"emitted": EVENTS})
        total = EVENTS * LANES
        harness.wait_until(lambda: len(self.deliveries("burst")) >= total or None, 120.0,
                           interval=0.2, what="%d deliveries at the receiver" % total)
        got = self.deliveries("burst")
        self.assertEqual(len(got), total)
        twice = {k: n for k, n in got.items() if n > 1}
        self.assertEqual(twice, {}, "deliveries sent more than once by healthy workers")
        done = harness.wait_until(
            lambda: (lambda a, b: (a, b) if a + b >= total else None)(
                delivered(self.w1) - before[0], delivered(self.w2) - before[1]),
            15.0, what="both workers' attempts recorded")
        sys.stderr.write("    [nodes] worker shares of %d deliveries: %d and %d\n"
                         % (total, done[0], done[1]))
        self.assertEqual(sum(done), total)
        self.assertGreater(done[0], 0, "worker 1 sent nothing")
        self.assertGreater(done[1], 0, "worker 2 sent nothing")

    def test_3_idempotent_post_to_both_api_nodes_publishes_once(self):
        seed = self.api1.seed_portfolio("group", 2)
        ctl_user(self.api1, seed.id, APPROVER, ["revenue-approver"])
        body = rate_decision_body([seed.properties[0]["id"]], seed.ceiling["id"], APPROVER)
        key = "both-nodes-" + uuid.uuid4().hex
        answers = [None, None]

        def post(i, srv):
            answers[i] = srv.request("POST", "/v2/rate-decisions", token=seed.token,
                                     portfolio=seed.id, body=body,
                                     headers={"Idempotency-Key": key})

        threads = [threading.Thread(target=post, args=(i, s))
                   for i, s in enumerate((self.api1, self.api2))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        ran = [a for a in answers
               if a.status == 201 and a.headers.get("Idempotent-Replayed") != "true"]
        self.assertEqual(len(ran), 1, answers)
        other = answers[1] if answers[0] is ran[0] else answers[0]
        if other.status == 201:
            self.assertEqual(other.headers.get("Idempotent-Replayed"), "true", answers)
        else:
            assert_error(self, other, 409)
        data, _ = assert_success(self, seed.get("/v2/rate-decisions"))
        self.assertEqual(len(data), 1, "one key, two nodes: %d decisions" % len(data))

    def test_4_deprovisioned_user_refused_on_the_other_node_within_1s(self):
        i = idplib.IdP(ENTITY, audience=PUBLIC_URL + "/saml/sp",
                       recipient=PUBLIC_URL + "/oauth/token")
        self.idps.append(i)
        idp_set(self.api1, self.seed.id, ENTITY, i.cert_path)
        scim = scim_token_for(self.api1, self.seed.id)
        name = "gone-%s@nodes.example" % uuid.uuid4().hex[:8]
        r = scim_request(self.api1, "POST", "/Users", scim,
                         {"schemas": [SCIM_USER_URN], "userName": name, "active": True})
        self.assertEqual(r.status, 201, r)
        user_id = r.body["id"]
        r = saml_grant(self.api1, i.assertion(name))
        self.assertEqual(r.status, 200, r)
        token = r.body["access_token"]
        # node 2 has validated (and cached) the token before the deprovisioning
        assert_success(self, self.api2.request("GET", "/v2/portfolios", token=token,
                                               portfolio=self.seed.id))
        r = scim_request(self.api1, "DELETE", "/Users/" + user_id, scim)
        self.assertEqual(r.status, 204, r)
        t0 = time.monotonic()
        harness.wait_until(lambda: self.api2.request(
            "GET", "/v2/portfolios", token=token, portfolio=self.seed.id).status == 401 or None,
            1.0, interval=0.02, what="node 2 refusing the deprovisioned user's token")
        sys.stderr.write("    [nodes] refused by the other node %.0f ms after the DELETE\n"
                         % ((time.monotonic() - t0) * 1000))

    def test_5_rate_limit_holds_across_api_nodes(self):
        # 60 a minute for this portfolio, asked of both API nodes in turn as
        # fast as they answer: together they admit at most 60, and refuse
        # early by at most one grant (limit / 20, at least 1) per node.
        seed = self.api1.seed_portfolio("group", 1)
        self.api1.ctl("portfolio", "set-rate-limit", "--portfolio", seed.id,
                      "--per-minute", "60")
        token = seed.token
        path = "/v2/portfolios/" + seed.id
        codes = collections.Counter()
        with self.api1.client() as c1, self.api2.client() as c2:
            for i in range(150):
                r = (c1, c2)[i % 2].request("GET", path, token=token, portfolio=seed.id)
                codes[r.status] += 1
                if r.status == 429:
                    self.assertRegex(r.headers.get("Retry-After", ""), r"^[0-9]+$", r)
                    self.assertEqual(r.headers.get("X-Service-Ratelimit-Remaining"), "0", r)
        sys.stderr.write("    [nodes] 150 calls over two API nodes at 60/min: %r\n"
                         % dict(codes))
        self.assertEqual(set(codes), {200, 429}, codes)
        self.assertLessEqual(codes[200], 60, "two nodes together admitted more than 60")
        self.assertGreaterEqual(codes[200], 60 - 2 * 3, "more refused early than two grants")
        # and through the load balancer, still nothing more in this minute
        r = self.via_lb("GET", path, token=token, portfolio=seed.id)
        assert_error(self, r, 429, "SVC-RATE-LIMITED")

    def test_6_override_reaches_the_other_node_within_a_second(self):
        seed = self.api1.seed_portfolio("group", 1)
        path = "/v2/portfolios/" + seed.id

        def quota(srv):
            r = srv.request("GET", path, token=seed.token, portfolio=seed.id)
            assert_success(self, r)
            return r.headers.get("RateLimit-Policy")
        self.assertEqual(quota(self.api2), '"portfolio";q=2000;w=60')  # the group plan's
        self.api1.ctl("portfolio", "set-rate-limit", "--portfolio", seed.id, "--per-minute", "777")
        t0 = time.monotonic()
        harness.wait_until(lambda: quota(self.api2) == '"portfolio";q=777;w=60' or None, 1.0,
                           interval=0.02, what="the other node applying the override")
        sys.stderr.write("    [nodes] override applied by the other node after %.0f ms\n"
                         % ((time.monotonic() - t0) * 1000))

    def test_7_deprecation_reaches_both_api_nodes(self):
        route = "/v2/portfolios/{id}/properties"
        path = "/v2/portfolios/%s/properties" % self.seed.id
        out = self.api1.ctl("deprecation", "add", "--method", "GET", "--route", route,
                            "--announced", "2026-06-01T00:00:00Z")
        self.assertEqual(out.get("route"), route)
        for srv in (self.api1, self.api2):
            r = harness.wait_until(lambda: (lambda r: r if "X-Service-Deprecated" in r.headers
                                            else None)(
                srv.request("GET", path, token=self.seed.token, portfolio=self.seed.id)),
                5.0, interval=0.05, what="X-Service-Deprecated on node %d" % srv.port)
            self.assertEqual(r.headers.get("Deprecation"), "@1780272000", r)

    def test_8_saml_assertion_used_once_across_nodes(self):
        seed = self.api1.seed_portfolio("group", 1)
        entity = "https://idp-once.example/saml/metadata"
        i = idplib.IdP(entity, audience=PUBLIC_URL + "/saml/sp",
                       recipient=PUBLIC_URL + "/oauth/token")
        self.idps.append(i)
        idp_set(self.api1, seed.id, entity, i.cert_path)
        xml = i.assertion("once-%s@nodes.example" % uuid.uuid4().hex[:8])
        r = saml_grant(self.api1, xml)
        self.assertEqual(r.status, 200, r)
        r = saml_grant(self.api2, xml)
        self.assertEqual(r.status, 400, r)
        self.assertEqual(r.body.get("error"), "invalid_grant", r)
        self.assertIn("already used", r.body.get("error_description", ""), r)

    def test_8a_new_property_reaches_both_api_nodes_at_once(self):
        # Each API node keeps the portfolio's properties between requests
        # (portfolio/snapshot.h); an addition through revopsctl is announced
        # on commit, so the next list on either node has it, long before
        # the snapshot's 1 s age limit.
        seed = self.api1.seed_portfolio("group", 2)
        path = "/v2/portfolios/%s/properties" % seed.id

        def ids(srv, prop=None):
            data, _ = assert_success(self, srv.request("GET", path, token=seed.token,
                                                       portfolio=seed.id, property=prop))
            return [p["id"] for p in data]
        before = sorted(p["id"] for p in seed.properties)
        for srv in (self.api1, self.api2):
            self.assertEqual(ids(srv), before)
        t0 = time.monotonic()
        new = self.api1.add_property(seed.id)["id"]
        # X-Service-Property naming it is accepted at once (a miss asks the database)
        self.assertEqual(ids(self.api2, new), [new])
        for srv in (self.api2, self.api1):
            harness.wait_until(lambda: new in ids(srv) or None, 0.25, interval=0.01,
                               what="node %d listing the new property" % srv.port)
        self.assertEqual(ids(self.api2), sorted(before + [new]))
        sys.stderr.write("    [nodes] new property listed by both nodes %.0f ms after revopsctl"
                         " began\n" % ((time.monotonic() - t0) * 1000))

    def test_9_worker_killed_mid_burst_loses_nothing(self):
        self.wait_divided()
        self.subscribe("kill")
        self.api1.ctl("event", "emit", "--portfolio", self.seed.id, "--type", EVENT_TYPE,
                      "--count", str(EVENTS))
        total = EVENTS * LANES
        harness.wait_until(lambda: len(self.deliveries("kill")) >= total // 10 or None, 60.0,
                           interval=0.01, what="the burst under way")
        self.w2.signal(signal.SIGKILL)
        self.assertEqual(self.w2.wait_exit(10.0), -signal.SIGKILL)
        at_kill = len(self.deliveries("kill"))
        self.assertLess(at_kill, total, "the burst ended before the kill: nothing was tested")
        harness.wait_until(lambda: len(self.deliveries("kill")) >= total or None,
                           120.0 + 2 * TTL, interval=0.2,
                           what="every delivery after the kill")
        got = self.deliveries("kill")
        duplicates = sum(got.values()) - total
        recovered = harness.wait_until(lambda: self.w1._find_event("webhook_recovered"), 3 * TTL,
                                       what="worker 1 taking over worker 2's claims")
        in_flight = int(re.match(r"(\d+) deliveries", recovered["msg"]).group(1))
        sys.stderr.write("    [nodes] killed at %d of %d; %d sent twice, %d were in flight\n"
                         % (at_kill, total, duplicates, in_flight))
        self.assertLessEqual(duplicates, in_flight,
                             "more duplicates than deliveries the dead worker had in flight")
        self.assertEqual(buckets(self.w1), BUCKETS, "the survivor serves every bucket")
        self.w2.start()
        self.wait_divided()


def load_tests(loader, tests, pattern):
    suite = unittest.TestSuite()
    for cls in (SoleNodeTest, MultiNodeTest if backend.POSTGRES else SqliteRolesTest):
        suite.addTests(loader.loadTestsFromTestCase(cls))
    return suite


if __name__ == "__main__":
    unittest.main(verbosity=2)
