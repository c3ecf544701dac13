"""Rate decisions under a local fault (issue 19, defect 3): when the server
cannot open a connection to the PMS (its open-files limit lowered under
it with prlimit), a decision answers 503 SVC-UNAVAILABLE with Retry-After
and its id (never 500), is recorded failed with the reason, and nothing
stays pending; with descriptors free again decisions publish. Black-box:
HTTP, pms-sim, prlimit and /proc.
"""

import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import pmssim  # noqa: E402
from harness import ctl_user, rate_decision_body  # noqa: E402

APPROVER = "approver@example.com"


class LocalFaultTest(unittest.TestCase):
    def test_no_descriptor_for_the_pms(self):
        if not shutil.which("prlimit"):
            self.fail("prlimit (util-linux) is required")
        with pmssim.server_with_pms() as (sim, srv):
            pf = srv.seed_portfolio("enterprise", 2)
            ctl_user(srv, pf.id, APPROVER, ["revenue-approver"])
            _, tok = srv.client_token(pf.id, "rates:read rates:write", name="writer")
            body = rate_decision_body([p["id"] for p in pf.properties], pf.ceiling["id"],
                                      APPROVER)
            pid = srv.proc.pid
            with srv.client(timeout=30.0) as c:
                r = c.request("POST", "/v2/rate-decisions", body=body, token=tok,
                              portfolio=pf.id)
                self.assertEqual(r.status, 201, r)
                fds = len(os.listdir("/proc/%d/fd" % pid))
                subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%d:" % fds],
                               check=True)
                try:
                    refused = [c.request("POST", "/v2/rate-decisions", body=body, token=tok,
                                         portfolio=pf.id) for _ in range(3)]
                finally:
                    subprocess.run(["prlimit", "--pid", str(pid), "--nofile=4096:"],
                                   check=True)
                for r in refused:
                    self.assertEqual(r.status, 503, r)
                    self.assertEqual(r.body["error"]["code"], "SVC-UNAVAILABLE")
                    self.assertTrue(r.headers.get("Retry-After"))
                    did = r.body["error"]["decision_id"]
                    d = c.request("GET", "/v2/rate-decisions/" + did, token=tok,
                                  portfolio=pf.id).body["data"]
                    self.assertEqual(d["status"], "failed", d)
                    self.assertIn("could not open a connection", str(d))
                r = c.request("POST", "/v2/rate-decisions", body=body, token=tok,
                              portfolio=pf.id)
                self.assertEqual(r.status, 201, r)
                r = c.request("GET", "/v2/rate-decisions?status=pending", token=tok,
                              portfolio=pf.id)
                self.assertEqual(r.body["data"], [], r)


if __name__ == "__main__":
    unittest.main()
