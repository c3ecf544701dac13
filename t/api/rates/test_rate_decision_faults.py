"""Rate decisions under faults (issue 19). Defect 3: when the server cannot
open a connection to the PMS (its open-files limit lowered under it with
prlimit), a decision answers 503 SVC-UNAVAILABLE with Retry-After and its
id (never 500), is recorded failed with the reason, and nothing stays
pending; with descriptors free again decisions publish. Defect 2: when
another process holds the database while a decision's PMS writes are on
their way (a slow PMS), its record is tried again until the lock is free:
the decision is published once, with its trail, and never left pending
behind live rates. Defect 8: decisions waiting on a hung PMS hold only
the PMS workers; other writes stay fast, and decisions past those
workers queue. Black-box: HTTP, pms-sim, prlimit, signals, /proc and the
database's own shell.
"""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
import ledger  # noqa: E402
import pmssim  # noqa: E402
from harness import assert_audit_chain, ctl_user, rate_decision_body  # noqa: E402

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


class HeldDatabaseTest(unittest.TestCase):
    def hold(self, srv, seconds):
        """Holds the lock the decision's record needs for seconds, from
        the database's own shell (in a thread)."""
        if backend.POSTGRES:
            argv = [backend._pg_bin("psql"), "-X", "-q", "-At", "-d", srv.db.url]
            sql = ("BEGIN; LOCK TABLE rate_decisions IN EXCLUSIVE MODE; SELECT pg_sleep(%d);"
                   " ROLLBACK;\n" % seconds)
        else:
            argv = ["sqlite3", srv.db.url[len("sqlite:"):]]
            sql = ".timeout 5000\nBEGIN IMMEDIATE;\nSELECT 1;\n.shell sleep %d\nROLLBACK;\n" % seconds
        return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, text=True), sql

    def test_record_retried_until_the_database_is_free(self):
        with pmssim.server_with_pms(["--latency-ms", "2000"]) as (sim, srv):
            pf = srv.seed_portfolio("enterprise", 3)
            ctl_user(srv, pf.id, APPROVER, ["revenue-approver"])
            _, tok = srv.client_token(pf.id, "rates:read rates:write", name="writer")
            body = rate_decision_body([p["id"] for p in pf.properties], pf.ceiling["id"],
                                      APPROVER)
            answer = {}

            def decide():
                answer["r"] = srv.request("POST", "/v2/rate-decisions", body=body, token=tok,
                                          portfolio=pf.id, timeout=90.0)
            t = threading.Thread(target=decide)
            t.start()
            time.sleep(0.5)
            holder, sql = self.hold(srv, 15)
            holder.stdin.write(sql)
            holder.stdin.close()
            t.join(90)
            holder.wait(30)
            r = answer["r"]
            self.assertEqual(r.status, 201, r)
            did = r.body["data"]["id"]
            d = srv.request("GET", "/v2/rate-decisions/" + did, token=tok,
                            portfolio=pf.id).body["data"]
            self.assertEqual(d["status"], "published")
            trail = srv.request("GET", "/v2/rate-decisions/%s/audit-trail" % did, token=tok,
                                portfolio=pf.id).body["data"]
            kinds = [e["kind"] for e in assert_audit_chain(self, trail)]
            self.assertEqual(kinds.count("pms_write"), 3, kinds)
            self.assertIn("published", kinds)
            r = srv.request("GET", "/v2/rate-decisions?status=pending", token=tok,
                            portfolio=pf.id)
            self.assertEqual(r.body["data"], [], r)
            # the PMS holds the rate once per property, as written
            r = srv.request("GET", "/v2/rate-decisions", token=tok, portfolio=pf.id)
            self.assertEqual(len(r.body["data"]), 1, r)


class HungPmsTest(unittest.TestCase):
    """Defect 8: decisions waiting on a PMS that hangs (SIGSTOPped) run on
    workers of their own (--pms-workers), queued past them rather than
    refused, so token issuance and other writes stay fast meanwhile."""

    WORKERS = 3
    DECISIONS = 6

    @staticmethod
    def resume(sim):
        if sim.proc is not None and sim.proc.poll() is None:
            sim.proc.send_signal(signal.SIGCONT)

    def test_hung_pms_holds_only_its_workers(self):
        sim, srv, pf = pmssim.start_for_decisions(
            self, APPROVER, server_args=["--pms-workers", str(self.WORKERS), "--workers", "2"])
        tok = pf.token
        writes = ledger.Ledger(srv, pf, APPROVER)
        answers = []
        sim.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(self.resume, sim)

        def decide():
            answers.append(writes.post("decision", timeout=120.0))
        threads = [threading.Thread(target=decide) for _ in range(self.DECISIONS)]
        for t in threads:
            t.start()
        # every PMS worker is inside a decision (recorded pending, its
        # writes sent to the stopped PMS); the others wait in the queue
        deadline = time.monotonic() + 20
        pending = []
        while time.monotonic() < deadline and len(pending) < self.WORKERS:
            r = srv.request("GET", "/v2/rate-decisions?status=pending", token=tok,
                            portfolio=pf.id)
            pending = r.body["data"]
            time.sleep(0.05)
        self.assertEqual(len(pending), self.WORKERS, pending)
        # more writes than --workers, none of which calls the PMS: each
        # answers at once
        for i in range(4):
            t0 = time.monotonic()
            r = srv.token(pf.client_id, pf.client_secret)
            self.assertEqual(r.status, 200, r)
            r = writes.post("webhook")
            self.assertEqual(r.status, 201, r)
            self.assertLess(time.monotonic() - t0, 5.0, "writes waited behind the hung PMS")
        self.assertEqual(answers, [], "a decision answered while its PMS was stopped")
        sim.proc.send_signal(signal.SIGCONT)
        for t in threads:
            t.join(120)
        self.assertEqual(len(answers), self.DECISIONS)
        for r in answers:  # queued, never refused
            self.assertIn(r.status, (201, 502), r)
        r = srv.request("GET", "/v2/rate-decisions?limit=100", token=tok, portfolio=pf.id)
        self.assertEqual(len(r.body["data"]), self.DECISIONS, r)
        writes.verify(self, sim)  # each once, keys replay, chains verify, none pending
        srv.stop()
        sim.stop()


if __name__ == "__main__":
    unittest.main()
