"""Graceful shutdown on SIGTERM and restart on the same data directory;
SIGTERM under keep-alive write load (issue 19, defect 1): what was in
flight finishes, what starts after the signal is refused with 503
SVC-UNAVAILABLE, Connection: close and Retry-After, and the server exits 0
well within the drain's 10 s."""

import json
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import ledger  # noqa: E402
import pmssim  # noqa: E402
from harness import assert_success, ctl_user, rate_decision_body  # noqa: E402

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def served_conn(tc, srv, timeout):
    """A raw connection the server has accepted and served once (so a
    signal cannot find it still in the listen backlog)."""
    c = srv.raw(timeout)
    tc.assertTrue(c.send(HEALTHZ))
    status, _, _ = c.read_response()
    tc.assertEqual(status, 200)
    return c


class ShutdownUnderLoadTest(unittest.TestCase):
    CLIENTS = 12

    def test_sigterm_under_keepalive_write_load(self):
        with pmssim.server_with_pms(["--latency-ms", "1000"]) as (sim, srv):
            pf = srv.seed_portfolio("enterprise", 1)
            ctl_user(srv, pf.id, "approver@example.com", ["revenue-approver"])
            _, tok = srv.client_token(pf.id, "rates:read rates:write", name="writer")
            body = rate_decision_body([pf.properties[0]["id"]], pf.ceiling["id"],
                                      "approver@example.com")
            writes = ledger.Ledger(srv, pf, "approver@example.com")
            answers = []  # (sent at, status, headers, body)
            lock = threading.Lock()
            stop = threading.Event()

            def client():
                with srv.client(timeout=30.0) as c:
                    while not stop.is_set():
                        t = time.time()
                        try:
                            r = writes.post("decision", c)
                        except (OSError, harness.http.client.HTTPException):
                            return  # the server closed the connection
                        with lock:
                            answers.append((t, r.status, r.headers, r.body))
                        if r.status != 201:
                            return

            threads = [threading.Thread(target=client) for _ in range(self.CLIENTS)]
            for t in threads:
                t.start()
            time.sleep(2.5)
            # a request whose head is still arriving when the signal comes
            # (the drain owes it an answer whatever else is in flight), on
            # a connection served once, so not in the listen backlog
            raw = served_conn(self, srv, 15.0)
            payload = json.dumps(body).encode()
            self.assertTrue(raw.send(("POST /v2/rate-decisions HTTP/1.1\r\nHost: x\r\n"
                                      "Authorization: Bearer %s\r\nX-Service-Portfolio: %s\r\n"
                                      "Content-Type: application/json\r\nContent-Length: %d\r\n"
                                      % (tok, pf.id, len(payload))).encode()))
            t_sig = time.monotonic()
            wall_sig = time.time()
            srv.signal(signal.SIGTERM)
            time.sleep(0.3)
            self.assertTrue(raw.send(b"\r\n" + payload))
            status, hdrs, rbody = raw.read_response()
            raw.close()
            answers.append((wall_sig + 0.3, status, hdrs, json.loads(rbody)))
            rc = srv.wait_exit(15.0)
            took = time.monotonic() - t_sig
            stop.set()
            for t in threads:
                t.join(30)
            self.assertIsNotNone(rc, "revopsd still running 15 s after SIGTERM under load")
            self.assertEqual(rc, 0, srv.log_text())
            self.assertLess(took, 12.0)
            accepted = [a for a in answers if a[1] == 201]
            self.assertTrue(accepted, "no decision went through before the signal")
            # nothing sent after the server took the signal (its "shutdown"
            # log line, 50 ms for the drain's flag after it) went through
            [taken] = [harness.epoch(e["ts"]) for e in srv.log_events()
                       if e.get("event") == "shutdown" and "draining" in e.get("msg", "")]
            self.assertGreaterEqual(taken, wall_sig - 0.01)
            late = [a for a in answers if a[1] == 201 and a[0] > taken + 0.05]
            self.assertEqual(late, [])
            refused = [a for a in answers if a[1] != 201]
            self.assertTrue(refused, "no request met the drain")
            for _, status, headers, b in refused:
                self.assertEqual(status, 503, b)
                self.assertEqual(b["error"]["code"], "SVC-UNAVAILABLE")
                self.assertEqual(headers.get("Connection", "").lower(), "close")
                self.assertTrue(headers.get("Retry-After"))
            # every decision answered 201 is published, none left pending,
            # each once, keys replay, chains verify
            srv.start()
            writes.verify(self, sim)
            for _, _, _, b in accepted:
                r = srv.request("GET", "/v2/rate-decisions/" + b["data"]["id"], token=tok,
                                portfolio=pf.id)
                self.assertEqual(r.body["data"]["status"], "published", r)


class ShutdownTest(unittest.TestCase):
    def setUp(self):
        self.srv = harness.Server()

    def tearDown(self):
        self.srv.cleanup()

    def test_sigterm_with_idle_keepalive_connections_then_restart(self):
        srv = self.srv
        pf = srv.seed_portfolio("group", 3)
        before, _ = assert_success(self, pf.get("/v2/portfolios/%s/properties" % pf.id))
        portfolio, _ = assert_success(self, pf.get("/v2/portfolios/%s" % pf.id))

        # a few keep-alive connections, each used once and now idle
        idle = []
        try:
            for _ in range(4):
                c = srv.raw(harness.STOP_DEADLINE)
                self.assertTrue(c.send(HEALTHZ))
                status, hdrs, _ = c.read_response()
                self.assertEqual(status, 200)
                self.assertNotIn("close", hdrs.get("Connection", "").lower())
                idle.append(c)
            with srv.client() as kc:  # and one http.client keep-alive connection
                self.assertEqual(kc.request("GET", "/healthz").status, 200)

                t0 = time.monotonic()
                srv.signal(signal.SIGTERM)
                rc = srv.wait_exit(5.0)
                took = time.monotonic() - t0
                if rc is None:
                    sys.stderr.write(srv.log_text())
                self.assertIsNotNone(rc, "revopsd still running 5 s after SIGTERM "
                                         "with idle keep-alive connections")
                self.assertEqual(rc, 0, srv.log_text())
                self.assertLess(took, 5.0)
        finally:
            for c in idle:
                c.close()
        events = [e.get("event") for e in srv.log_events()]
        self.assertIn("shutdown", events, srv.log_text())
        # the log stays machine-readable to the end
        for line in srv.log_text().splitlines():
            if line.strip():
                self.assertIsInstance(json.loads(line), dict, line)

        # restart on the same data dir: the data and the credentials survive
        srv.start()
        self.assertIsNotNone(srv._find_event("listening"))
        tok = srv.access_token(pf.client_id, pf.client_secret)
        after, _ = assert_success(self, pf.get("/v2/portfolios/%s/properties" % pf.id,
                                               token=tok))
        self.assertEqual(after, before)
        portfolio2, _ = assert_success(self, pf.get("/v2/portfolios/%s" % pf.id, token=tok))
        self.assertEqual(portfolio2, portfolio)
        # a token issued before the restart is still valid (tokens are stored)
        assert_success(self, pf.get("/v2/portfolios/%s" % pf.id))
        srv.stop()

    def test_sigterm_with_half_sent_request(self):
        """A head that never completes holds the drain for its 2 s grace, not
        for the drain's 10 s."""
        c = served_conn(self, self.srv, harness.STOP_DEADLINE)
        try:
            self.assertTrue(c.send(b"GET /healthz HTTP/1.1\r\nHo"))
            t0 = time.monotonic()
            self.srv.signal(signal.SIGTERM)
            rc = self.srv.wait_exit(5.0)
            took = time.monotonic() - t0
            self.assertIsNotNone(rc, "revopsd still running 5 s after SIGTERM with a "
                                     "half-sent request")
            self.assertEqual(rc, 0, self.srv.log_text())
            self.assertLess(took, 5.0)
            self.assertGreaterEqual(took, 1.5, "the drain did not wait for the head")
            with self.assertRaises(harness.ConnectionClosed):  # closed, no answer
                c.read_response()
        finally:
            c.close()

    def test_head_arriving_at_the_signal_is_answered_503(self):
        """A head whose first bytes came before the signal is a request in
        flight: with nothing else in flight the drain still waits for it, and
        it is answered 503, not dropped."""
        c = served_conn(self, self.srv, harness.STOP_DEADLINE)
        try:
            self.assertTrue(c.send(b"GET /healthz HTTP/1.1\r\nHo"))
            self.srv.signal(signal.SIGTERM)
            harness.wait_until(
                lambda: any(e.get("event") == "shutdown" for e in self.srv.log_events()),
                5.0, interval=0.01, what="the shutdown log line")
            time.sleep(0.3)  # the drain has nothing else to wait for
            self.assertTrue(c.send(b"st: x\r\n\r\n"))
            status, hdrs, body = c.read_response()
            self.assertEqual(status, 503, body)
            self.assertEqual(json.loads(body)["error"]["code"], "SVC-UNAVAILABLE")
            self.assertEqual(hdrs.get("Connection", "").lower(), "close")
            self.assertTrue(hdrs.get("Retry-After"))
        finally:
            c.close()
        rc = self.srv.wait_exit(5.0)
        self.assertEqual(rc, 0, self.srv.log_text())

    def test_sigterm_idle_server_exits_zero(self):
        t0 = time.monotonic()
        self.srv.stop(timeout=5.0)
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertIn("shutdown", [e.get("event") for e in self.srv.log_events()])


if __name__ == "__main__":
    harness.run_main()
