"""Bounded lock waits (issue 19, defect 6): while another process holds the
database's write lock, every write waits at most the documented 10 s in
all (not 10 s more for each writer queued before it) and answers 503
SVC-UNAVAILABLE with Retry-After; once the lock is free, writes are taken
at once. SQLite: the sqlite3 shell holds BEGIN IMMEDIATE; PostgreSQL: psql
holds an exclusive lock on the table token issuance writes. Black-box:
HTTP and the database's own shell.
"""

import base64
import concurrent.futures
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
import ledger  # noqa: E402
from harness import assert_error  # noqa: E402

BOUND_S = 10.0
SLACK_S = 2.5  # scheduling on a busy machine, under sanitizers


class LockWaitTest(unittest.TestCase):
    def setUp(self):
        self.srv = harness.Server()
        self.addCleanup(self.srv.cleanup)  # also when setUp fails below
        self.holder = None
        self.addCleanup(self.release)
        self.seed = self.srv.seed_portfolio("enterprise", 1)

    def hold(self):
        if backend.POSTGRES:
            argv = [backend._pg_bin("psql"), "-X", "-q", "-At", "-d", self.srv.db.url]
            sql = "BEGIN; LOCK TABLE access_tokens IN EXCLUSIVE MODE; SELECT 'held';\n"
        else:
            argv = ["sqlite3", self.srv.db.url[len("sqlite:"):]]
            sql = "BEGIN IMMEDIATE; SELECT 'held';\n"
        self.holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
        self.holder.stdin.write(sql)
        self.holder.stdin.flush()
        line = self.holder.stdout.readline()
        self.assertIn("held", line)

    def release(self):
        if self.holder is not None and self.holder.poll() is None:
            self.holder.stdin.write("ROLLBACK;\n")
            self.holder.stdin.close()
            self.holder.wait(10)
        if self.holder is not None:
            self.holder.stdout.close()
        self.holder = None

    def timed_token(self):
        basic = base64.b64encode(("%s:%s" % (self.seed.client_id, self.seed.client_secret))
                                 .encode()).decode()
        t0 = time.monotonic()
        r = self.srv.request("POST", "/oauth/token", body="grant_type=client_credentials",
                             headers={"Content-Type": "application/x-www-form-urlencoded",
                                      "Authorization": "Basic " + basic}, timeout=60.0)
        return r, time.monotonic() - t0

    def test_writers_wait_the_bound_once(self):
        writes = ledger.Ledger(self.srv, self.seed, "approver@example.com")
        self.seed.token  # a token before the lock
        self.hold()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            keyed = pool.submit(writes.post, "webhook", None, 60.0)
            answers = list(pool.map(lambda _: self.timed_token(), range(4)))
        keyed.result()  # 503 on SQLite; on PostgreSQL the lock is on tokens only
        for r, took in answers:
            assert_error(self, r, 503, "SVC-UNAVAILABLE")
            self.assertTrue(r.headers.get("Retry-After"), r)
            self.assertLess(took, BOUND_S + SLACK_S, "a write waited %.1f s" % took)
        self.release()
        r, took = self.timed_token()
        self.assertEqual(r.status, 200, r)
        self.assertLess(took, 2.0)
        writes.verify(self)  # the refused write's key was released: it runs now, once


if __name__ == "__main__":
    unittest.main()
