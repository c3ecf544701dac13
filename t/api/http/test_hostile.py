"""The hostile-input suite (issue 11, standing guard 1).

One revopsd, one table of cases (hostile_cases.py), each sent over a raw
socket (or, for multi-step cases, through the harness) and judged against
its acceptable outcomes: a 4xx in our envelope; for framing errors a 400
and a close, or a close with no answer; never a 5xx, never a 2xx for an
attack, never an answer to a request pipelined after a refused one, never a
hang past a bound.  Every case runs; the suite prints one line per category
and fails with the list of failing cases.

Then the server must still answer at once, and its memory must stay
bounded: the leak-prone inputs (defect 1's unparsable query first) are sent
in a warm-up pass and a second pass, and VmRSS may not grow by more than
LEAK_MB between the two.

HOSTILE_VERBOSE=1 prints every case with what the server did.
"""

import json
import os
import socket
import sys
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import hostile_cases as hc  # noqa: E402
from harness import ctl_user, idp_set, scim_request, scim_token_for  # noqa: E402

IDLE_TIMEOUT = 4          # --idle-timeout: longer than hc.IO_TIMEOUT, so a hang shows as one
SLOW_BOUND = 10.0         # a trickling client is cut off within this
PARALLEL = 6              # cases in flight at once (independent connections)
ANSWER_AT_ONCE = 3.0      # seconds for /healthz after everything
LEAK_PASS = 1200          # defect 1 requests per pass (about 20 KB of query each)
LEAK_MB = 8               # VmRSS growth allowed between the warm-up and the second pass
RSS_CAP_MB = 400          # VmRSS cap (normal build)
RSS_CAP_ASAN_MB = 1500    # VmRSS cap under AddressSanitizer (shadow memory)
OPENAPI = os.path.join(harness.ROOT, "docs", "openapi.json")


ASAN = harness.asan_build()
harness.limit_asan_quarantine()


class Env:
    """What the cases need: the server, two portfolios, tokens, ids."""

    def __init__(self):
        self._seq = 0
        self._lock = threading.Lock()

    def fresh_name(self, prefix="user"):
        with self._lock:
            self._seq += 1
            return "%s-%d-%s@hostile.example" % (prefix, self._seq, os.urandom(3).hex())


def _must(r, statuses, what):
    if r.status not in statuses:
        raise AssertionError("setup: %s answered %r" % (what, r))
    return r.body


class HostileInputTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import idp as idplib
        e = cls.env = Env()
        e.idle_timeout = IDLE_TIMEOUT
        e.slow_bound = SLOW_BOUND
        e.idps = []
        e.srv = srv = harness.Server(["--anon-rate-limit", "1000000", "--idle-timeout",
                                      str(IDLE_TIMEOUT), "--public-url", hc.PUBLIC_URL])
        try:
            e.port = srv.port
            with open(OPENAPI) as f:
                e.openapi = json.load(f)
            e.a = srv.seed_portfolio("enterprise", 3)
            e.b = srv.seed_portfolio("group", 2)
            for pf in (e.a, e.b):
                srv.ctl("portfolio", "set-rate-limit", "--portfolio", pf.id, "--per-minute",
                        "100000000")
            e.approver = "approver@hostile.example"
            ctl_user(srv, e.a.id, e.approver, ["revenue-approver"])
            e.rd_body = lambda: harness.rate_decision_body(
                [e.a.properties[0]["id"]], e.a.ceiling["id"], e.approver)
            e.scim_a = scim_token_for(srv, e.a.id)
            e.scim_b = scim_token_for(srv, e.b.id)
            auth = dict(token=e.a.token, portfolio=e.a.id)
            # controls: the base bodies of the wrong-type cases are accepted
            _must(srv.request("POST", "/v2/rate-decisions", body=e.rd_body(), **auth), (201,),
                  "rate decision")
            ctrl = _must(srv.request("POST", "/v2/rate-decisions", body=e.rd_body(), **auth),
                         (201,), "rate decision")
            _must(srv.request("POST", "/v2/rate-decisions/%s/revert" % ctrl["data"]["id"],
                              body={"reason": "control", "approver_saml_subject": e.approver},
                              **auth), (200,), "revert")
            e.rd_target = _must(srv.request("POST", "/v2/rate-decisions", body=e.rd_body(),
                                            **auth), (201,), "rate decision")["data"]["id"]
            for _ in range(2):
                _must(srv.request("POST", "/v2/webhooks", body={
                    "url": hc.PUBLIC_HOOK, "events": ["rate.decision.published"]}, **auth),
                    (201,), "v2 webhook")
            _must(srv.request("POST", "/v1/webhooks", token=e.a.token, body={
                "url": hc.PUBLIC_HOOK, "events": ["rate.suggested"]}), (201,), "v1 webhook")
            name = e.fresh_name()
            e.scim_user = _must(scim_request(srv, "POST", "/Users", e.scim_a, {
                "schemas": [harness.SCIM_USER_URN], "userName": name}), (201,), "SCIM user")
            _must(scim_request(srv, "PUT", "/Users/" + e.scim_user["id"], e.scim_a, {
                "schemas": [harness.SCIM_USER_URN], "userName": name}), (200,), "SCIM PUT")
            _must(scim_request(srv, "PATCH", "/Users/" + e.scim_user["id"], e.scim_a,
                               harness.scim_patch_body({"op": "replace", "path": "displayName",
                                                        "value": "Control"})), (200, 204),
                  "SCIM PATCH")
            e.scim_group = _must(scim_request(srv, "POST", "/Groups", e.scim_a, {
                "schemas": [harness.SCIM_GROUP_URN], "displayName": "hostile-group"}), (201,),
                "SCIM group")
            _must(scim_request(srv, "PUT", "/Groups/" + e.scim_group["id"], e.scim_a, {
                "schemas": [harness.SCIM_GROUP_URN], "displayName": "hostile-group"}), (200,),
                "SCIM group PUT")
            # cursors: this portfolio's, another portfolio's, another list's
            e.cursor_a = _must(e.a.get("/v2/portfolios/%s/properties?limit=1" % e.a.id), (200,),
                               "list")["meta"]["next_cursor"]
            e.cursor_b = _must(e.b.get("/v2/portfolios/%s/properties?limit=1" % e.b.id), (200,),
                               "list")["meta"]["next_cursor"]
            e.cursor_wh = _must(e.a.get("/v2/webhooks?limit=1"), (200,),
                                "list")["meta"]["next_cursor"]
            for c in (e.cursor_a, e.cursor_b, e.cursor_wh):
                if not isinstance(c, str):
                    raise AssertionError("setup: no next_cursor")
            # SAML: a trusted IdP for portfolio A, and an attacker's key for the same entity
            e.idp = idplib.IdP(hc.IDP_ENTITY, audience=hc.PUBLIC_URL + "/saml/sp",
                               recipient=hc.PUBLIC_URL + "/oauth/token")
            e.idps.append(e.idp)
            e.idp_forged = idplib.IdP(hc.IDP_ENTITY, audience=hc.PUBLIC_URL + "/saml/sp",
                                      recipient=hc.PUBLIC_URL + "/oauth/token")
            e.idps.append(e.idp_forged)
            idp_set(srv, e.a.id, hc.IDP_ENTITY, e.idp.cert_path)
            e.saml_admin = "admin@hostile.example"
            _must(scim_request(srv, "POST", "/Users", e.scim_a, {
                "schemas": [harness.SCIM_USER_URN], "userName": e.saml_admin,
                "roles": [{"value": "revenue-approver"}]}), (201,), "SCIM admin")
            _must(harness.saml_grant(srv, e.idp.assertion(e.fresh_name("samlctl"))), (200,),
                  "SAML control login")
            cls.cases = hc.build_cases(e)
        except BaseException:
            cls._cleanup_idps()
            srv.cleanup()
            raise

    @classmethod
    def _cleanup_idps(cls):
        for i in cls.env.idps:
            i.cleanup()

    @classmethod
    def tearDownClass(cls):
        cls._cleanup_idps()
        cls.env.srv.close()  # asserts a clean exit (and LeakSanitizer's verdict under ASan)

    # ------------------------------------------------------------------

    def test_1_cases(self):
        env = self.env
        cases = self.cases
        t0 = time.monotonic()
        results = {}

        def one(c):
            t = time.monotonic()
            problem, observed = hc.execute(c, env)
            results[id(c)] = (problem, observed, time.monotonic() - t)

        background = [c for c in cases if c.background]
        foreground = [c for c in cases if not c.background]
        with ThreadPoolExecutor(max_workers=max(1, len(background))) as bg, \
                ThreadPoolExecutor(max_workers=PARALLEL) as fg:
            bg_futs = [bg.submit(one, c) for c in background]
            for f in [fg.submit(one, c) for c in foreground]:
                f.result()
            for f in bg_futs:
                f.result()
        took = time.monotonic() - t0

        cats = []
        for c in cases:
            if c.cat not in cats:
                cats.append(c.cat)
        failing = []
        out = sys.stderr
        out.write("\nhostile-input suite: %d cases in %.1fs\n" % (len(cases), took))
        for cat in cats:
            cs = [c for c in cases if c.cat == cat]
            bad = [c for c in cs if results[id(c)][0]]
            out.write("  %-14s %4d cases, %4d passed, %4d failed\n"
                      % (cat, len(cs), len(cs) - len(bad), len(bad)))
            failing += bad
        if os.environ.get("HOSTILE_VERBOSE"):
            for c in cases:
                problem, observed, dur = results[id(c)]
                out.write("%s %s/%s%s: %s [%.2fs]\n" % (
                    "FAIL" if problem else "ok  ", c.cat,
                    c.name.encode("unicode_escape").decode("ascii"),
                    " (defect %s)" % c.defect if c.defect else "", problem or observed, dur))
        for c in failing:
            problem, observed, dur = results[id(c)]
            out.write("FAIL %s/%s%s: %s [observed: %s]\n" % (
                c.cat, c.name.encode("unicode_escape").decode("ascii"),
                " (defect %s)" % c.defect if c.defect else "", problem, observed))
        out.flush()
        self.assertGreaterEqual(len(cases), 300)
        if failing:
            self.fail("%d of %d hostile cases failed:\n%s" % (
                len(failing), len(cases), "\n".join(
                    "  %s/%s" % (c.cat, c.name.encode("unicode_escape").decode("ascii"))
                    for c in failing)))

    # ------------------------------------------------------------------

    def assert_answers_at_once(self):
        env = self.env
        t = time.monotonic()
        r = env.srv.request("GET", "/healthz", timeout=5)
        took = time.monotonic() - t
        self.assertEqual(r.status, 200, r)
        self.assertLess(took, ANSWER_AT_ONCE, "/healthz took %.2fs" % took)
        r = env.srv.request("GET", "/v2/portfolios", token=env.a.token, portfolio=env.a.id,
                            timeout=5)
        self.assertEqual(r.status, 200, r)

    def leak_pass(self, n):
        """The leak-prone inputs: defect 1's query n times, and a few
        hundred framing refusals, oversized headers and deep JSON."""
        env = self.env
        port = env.port
        leak = hc.req("GET", "/v2/portfolios?" + "&".join(["a"] * 10000))
        small = hc.req("GET", "/v2/portfolios?" + "&".join(["a"] * 600))
        auth = [("Authorization", "Bearer " + env.a.token), ("X-Service-Portfolio", env.a.id),
                hc.JSON_CT]
        others = [
            hc.req("POST", "/oauth/token", [hc.FORM_CT, ("Content-Length", "2"),
                                            ("Content-Length", "3")], body="{}", cl=False),
            hc.req("POST", "/oauth/token", [hc.FORM_CT, ("Transfer-Encoding", "identity")],
                   body="5\r\nhello\r\n0\r\n\r\n", cl=False),
            hc.req("GET", "/healthz", [("Host", "x")]),
            hc.req("GET", "/healthz", [("X-Big", "a" * 40000)]),
            hc.req("POST", "/oauth/token", [hc.FORM_CT, ("Transfer-Encoding", "chunked")],
                   body="zz\r\n", cl=False),
            hc.req("GET", "/v2/portfolios?" + "&".join("p%d=1" % i for i in range(40))),
            hc.req("POST", "/v2/webhooks", auth, body=b"[" * 5000 + b"]" * 5000),
            hc.req("POST", "/oauth/token", [hc.FORM_CT, ("Transfer-Encoding", "chunked")],
                   body="5;" + "a" * 33000 + "\r\n", cl=False),
        ]
        work = [leak] * n + [small] * (n // 10) + others * max(1, n // 120)

        def send(data):
            # the answer does not matter here, only what the server keeps:
            # a short timeout keeps inputs it reads until close from
            # stalling the pass
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=0.5)
            except OSError:
                return
            try:
                s.sendall(data)
                buf = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                    if harness.parse_response(buf) is not None:
                        break
            except (OSError, ValueError):
                pass
            finally:
                s.close()
        with ThreadPoolExecutor(max_workers=4) as ex:
            list(ex.map(send, work))

    def test_2_alive_and_bounded(self):
        env = self.env
        pid = env.srv.proc.pid
        self.assert_answers_at_once()
        t0 = time.monotonic()
        self.leak_pass(LEAK_PASS)
        self.assert_answers_at_once()
        time.sleep(0.5)
        warm = harness.rss_kb(pid)
        self.leak_pass(LEAK_PASS)
        time.sleep(0.5)
        second = harness.rss_kb(pid)
        took = time.monotonic() - t0
        self.assert_answers_at_once()
        cap = RSS_CAP_ASAN_MB if ASAN else RSS_CAP_MB
        growth = (second - warm) / 1024.0
        sys.stderr.write("\nRSS after warm-up %.1f MB, after the second pass %.1f MB "
                         "(growth %.1f MB, allowed %d; cap %d MB; %.1fs)\n"
                         % (warm / 1024.0, second / 1024.0, growth, LEAK_MB, cap, took))
        self.assertLess(second / 1024.0, cap, "VmRSS %.1f MB over the %d MB cap"
                        % (second / 1024.0, cap))
        self.assertLess(growth, LEAK_MB, "VmRSS grew %.1f MB between two passes of the "
                        "leak-prone inputs (defect 1)" % growth)


if __name__ == "__main__":
    harness.run_main()
