"""Graceful shutdown on SIGTERM and restart on the same data directory."""

import json
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import assert_success  # noqa: E402

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


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
        c = self.srv.raw(harness.STOP_DEADLINE)
        try:
            self.assertTrue(c.send(b"GET /healthz HTTP/1.1\r\nHo"))
            t0 = time.monotonic()
            self.srv.signal(signal.SIGTERM)
            rc = self.srv.wait_exit(5.0)
            self.assertIsNotNone(rc, "revopsd still running 5 s after SIGTERM with a "
                                     "half-sent request")
            self.assertEqual(rc, 0, self.srv.log_text())
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            c.close()

    def test_sigterm_idle_server_exits_zero(self):
        t0 = time.monotonic()
        self.srv.stop(timeout=5.0)
        self.assertLess(time.monotonic() - t0, 5.0)
        self.assertIn("shutdown", [e.get("event") for e in self.srv.log_events()])


if __name__ == "__main__":
    harness.run_main()
