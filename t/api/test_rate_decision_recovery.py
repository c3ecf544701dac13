"""A decision whose PMS writes are cut short by kill -9 is not left
"pending" forever: the next start marks it failed, with an audit entry
that says the outcome of its writes is unknown."""

import json
import signal
import threading
import unittest

import harness
import pmssim


class RecoveryTest(unittest.TestCase):
    def test_interrupted_publish_is_marked_failed(self):
        with pmssim.PmsSim("--latency-ms", "6000") as sim:
            srv = harness.Server(["--pms-url", sim.url])
            try:
                seed = srv.seed_portfolio("group", 2)
                srv.ctl("user", "create", "--portfolio", seed.id, "--user-name",
                        "approver@x.example", "--roles", "revenue-approver")
                body = {"properties": [p["id"] for p in seed.properties],
                        "room_type_code": "DBL",
                        "date_range": {"from": "2026-12-01", "to": "2026-12-02"},
                        "proposed_rate": {"currency": "PLN", "minor_units": 40000},
                        "governance": {"brand_ceiling_id": seed.ceiling["id"],
                                       "approver_saml_subject": "approver@x.example",
                                       "justification": "cut short on purpose"}}
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
            finally:
                srv.close()


if __name__ == "__main__":
    unittest.main()
