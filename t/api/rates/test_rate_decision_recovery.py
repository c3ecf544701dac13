"""Slow PMS writes: a decision cut short by kill -9 is marked failed at
the next start (not left "pending"), and writes waiting on the PMS never
stall other requests (they run on the worker pool while their connection
is suspended)."""

import json
import os
import signal
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import pmssim  # noqa: E402
from harness import ctl_user, rate_decision_body  # noqa: E402


def decision_body(seed, minor, justification="slow PMS"):
    """A one-night decision for all of seed's properties, approved by
    approver@x.example (harness.rate_decision_body)."""
    return rate_decision_body([p["id"] for p in seed.properties], seed.ceiling["id"],
                              "approver@x.example", date_to="2026-12-02", minor_units=minor,
                              justification=justification)


class RecoveryTest(unittest.TestCase):
    def test_slow_pms_does_not_stall_reads(self):
        import time
        with pmssim.server_with_pms(["--latency-ms", "3000"],
                                    ["--anon-rate-limit", "100000"]) as (sim, srv):
            seed = srv.seed_portfolio("group", 2)
            ctl_user(srv, seed.id, "approver@x.example", ["revenue-approver"])
            token = seed.token
            results = []

            def publish(i):
                r = srv.request("POST", "/v2/rate-decisions", body=decision_body(seed, 30000 + i),
                                token=token, portfolio=seed.id, timeout=30)
                results.append(r.status)

            threads = [threading.Thread(target=publish, args=(i,)) for i in range(6)]
            for t in threads:
                t.start()
            # All six wait on the PMS at once: writes run concurrently on the
            # worker pool, not one per HTTP thread.
            harness.wait_until(
                lambda: len(seed.get("/v2/rate-decisions?status=pending").body["data"]) == 6,
                5.0, what="six publishes waiting on the PMS together")
            # Meanwhile reads on fresh connections are answered at once.
            t0 = time.monotonic()
            n = 0
            while time.monotonic() - t0 < 2.0:
                t1 = time.monotonic()
                r = srv.request("GET", "/healthz", timeout=5)
                self.assertEqual(r.status, 200, r)
                self.assertLess(time.monotonic() - t1, 1.5)
                n += 1
            self.assertGreater(n, 20)
            for t in threads:
                t.join(30)
            self.assertEqual(sorted(results), [201] * 6)

    def test_interrupted_publish_is_marked_failed(self):
        with pmssim.server_with_pms(["--latency-ms", "6000"]) as (sim, srv):
            seed = srv.seed_portfolio("group", 2)
            ctl_user(srv, seed.id, "approver@x.example", ["revenue-approver"])
            body = decision_body(seed, 40000, "cut short on purpose")
            token = seed.token

            def publish():
                try:
                    srv.request("POST", "/v2/rate-decisions", body=body, token=token,
                                portfolio=seed.id, timeout=30)
                except Exception:
                    pass  # the server is killed under this request

            t = threading.Thread(target=publish, daemon=True)
            t.start()

            def pending():
                r = seed.get("/v2/rate-decisions?status=pending")
                return r.body["data"] if r.status == 200 and r.body["data"] else None

            found = harness.wait_until(pending, 5.0, what="a pending decision")
            decision_id = found[0]["id"]
            srv.signal(signal.SIGKILL)
            srv.wait_exit(10.0)
            t.join(10)
            srv.start()
            r = seed.get("/v2/rate-decisions/" + decision_id)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["data"]["status"], "failed")
            self.assertIn("interrupted", json.dumps(r.body["data"]["failure"]))
            trail = seed.get("/v2/rate-decisions/%s/audit-trail" % decision_id).body["data"]
            self.assertTrue(trail["chain_valid"])
            self.assertEqual([e["kind"] for e in trail["entries"]][-1], "failed")
            self.assertEqual(seed.get("/v2/rate-decisions?status=pending").body["data"], [])


if __name__ == "__main__":
    unittest.main()
