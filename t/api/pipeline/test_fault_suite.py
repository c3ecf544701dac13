"""The fault suite of issue 19, the faults no other suite injects: kill -9
in the middle of a storm of keyed writes, and broken start-up files.
A dead PMS beside writes that do not call it. Faults with suites of their own: a full disk (test_disk_full.py), fd
exhaustion (test_fd_exhaustion.py), an outside lock holder
(test_lock_waits.py), SIGTERM under keep-alive load (test_shutdown.py),
a wrong or missing sealing key (cluster/test_sealing_key.py), hung and
dead PMSs (rates/test_rate_decision_faults.py, test_rate_decisions_pms.py),
slow and dead webhook receivers (webhooks/test_webhook_delivery.py), a
crash at an exact point of a keyed write (test_idempotency_crash.py).

After kill -9 every acknowledged write is present exactly once, its key
replays the answer, a write that was never acknowledged exists at most
once (its key replays, or is still claimed and nothing was written),
every decision's audit chain verifies and none stays pending. Black-box:
HTTP, pms-sim, signals and files.
"""

import os
import random
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
import pmssim  # noqa: E402
import ledger  # noqa: E402

APPROVER = "approver@example.com"
WRITERS = 4
STORM_S = 2.0


class KillDuringWriteStormTest(unittest.TestCase):
    def setUp(self):
        self.sim, self.srv, self.pf = pmssim.start_for_decisions(self, APPROVER)
        self.ledger = ledger.Ledger(self.srv, self.pf, APPROVER, prefix="storm")

    def storm(self):
        """WRITERS keep-alive clients post keyed writes until the server
        dies under them (kill -9 after STORM_S)."""
        def writer(seed):
            rnd = random.Random(seed)
            try:
                with self.srv.client(timeout=30.0) as c:
                    while True:
                        self.ledger.post(rnd.choice(ledger.KINDS), c)
            except (OSError, harness.ConnectionClosed, ValueError,
                    harness.http.client.HTTPException):
                return  # the server died under this client
        threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for t in threads:
            t.start()
        time.sleep(STORM_S)
        self.srv.proc.kill()  # SIGKILL: nothing of the server runs after
        self.srv.wait_exit(30)
        for t in threads:
            t.join(60)

    def test_kill_9_in_a_write_storm(self):
        self.storm()
        self.assertGreater(len(self.ledger.acknowledged()), 10,
                           "the storm made too few writes to judge")
        self.srv.start()
        self.ledger.verify(self, self.sim)


class DeadPmsTest(unittest.TestCase):
    def test_decisions_to_a_dead_pms(self):
        sim, srv, pf = pmssim.start_for_decisions(self, APPROVER)
        writes = ledger.Ledger(srv, pf, APPROVER)
        self.assertEqual(writes.post("decision").status, 201)
        sim.proc.kill()  # connections to it are refused from now on
        sim.proc.wait()
        for kind in ("decision", "task", "decision", "webhook"):
            r = writes.post(kind)
            if kind == "decision":
                self.assertEqual(r.status, 502, r)
                self.assertEqual(r.body["error"]["code"], "SVC-PMS-WRITE-FAILED")
                self.assertTrue(r.body["error"]["decision_id"], r)
            else:  # writes that do not call the PMS go on
                self.assertEqual(r.status, 201, r)
        writes.verify(self)  # each once, the 502s replay, chains verify, none pending


class BrokenStartupFilesTest(unittest.TestCase):
    """A start-up file revopsd cannot use stops it with the path and the
    cause, and changes nothing."""

    def setUp(self):
        self.srv = harness.Server()
        self.addCleanup(self.srv.cleanup)
        self.pf = self.srv.seed_portfolio("group", 1)
        self.srv.stop()
        self.key = os.path.join(self.srv.data_dir, "revops.key")
        with open(self.key, "rb") as f:
            self.key_bytes = f.read()

    def refused(self, *needles):
        try:
            self.srv.start()
        except RuntimeError as e:
            text = str(e)
        else:
            self.fail("revopsd started with a broken start-up file")
        for n in needles:
            self.assertIn(n, text)
        return text

    def assert_unchanged_and_restorable(self):
        with open(self.key, "rb") as f:
            self.assertEqual(f.read(), self.key_bytes)
        self.srv.start()
        r = self.srv.request("GET", "/v2/portfolios/" + self.pf.id, token=self.pf.token,
                             portfolio=self.pf.id)
        self.assertEqual(r.status, 200, r)

    def test_truncated_key(self):
        with open(self.key, "wb") as f:
            f.write(self.key_bytes[:10])
        self.refused("revops.key")
        with open(self.key, "rb") as f:  # left as it was found
            self.assertEqual(f.read(), self.key_bytes[:10])
        with open(self.key, "wb") as f:
            f.write(self.key_bytes)
        self.assert_unchanged_and_restorable()

    def test_key_is_a_directory(self):
        os.rename(self.key, self.key + ".bak")
        os.mkdir(self.key)
        self.refused("revops.key")
        os.rmdir(self.key)
        os.rename(self.key + ".bak", self.key)
        self.assert_unchanged_and_restorable()

    def test_key_readable_by_others(self):
        os.chmod(self.key, 0o644)
        self.refused("revops.key has mode 0644", "chmod 600")
        self.assertEqual(os.stat(self.key).st_mode & 0o777, 0o644)  # not changed for you
        os.chmod(self.key, 0o600)
        self.assert_unchanged_and_restorable()

    def test_data_dir_is_a_file(self):
        other = os.path.join(self.srv.data_dir, "not-a-dir")
        with open(other, "w") as f:
            f.write("x")
        saved = self.srv.data_dir
        self.srv.data_dir, self.srv.log_dir = other, saved
        try:
            self.refused("not-a-dir")
        finally:
            self.srv.data_dir, self.srv.log_dir = saved, None
        self.assert_unchanged_and_restorable()

    def test_read_only_data_dir(self):
        """SQLite: the database is in the directory, so revopsd cannot run
        there. PostgreSQL: the directory only holds the key, which it
        reads, so it runs."""
        d = self.srv.data_dir
        if os.geteuid() == 0:
            # permission bits bind no root: a read-only bind mount of the
            # directory, in a mount namespace of revopsd's own
            wrap = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"', d]
            cause = "Read-only file system"
        else:
            os.chmod(d, 0o555)
            self.addCleanup(os.chmod, d, 0o755)
            wrap, cause = [], "Permission denied"
        self.srv.log_dir = tempfile.mkdtemp(prefix="revops-log-")
        self.addCleanup(shutil.rmtree, self.srv.log_dir, True)
        if backend.POSTGRES:
            self.srv.start(wrap=wrap)
            r = self.srv.request("POST", "/v2/webhooks", token=self.pf.token, portfolio=self.pf.id,
                                 body={"url": "https://93.184.216.34/hooks/ro",
                                       "events": ["rate.decision.published"]})
            self.assertEqual(r.status, 201, r)
            self.srv.stop()
            if not wrap:
                os.chmod(d, 0o755)
            return
        try:
            self.srv.start(wrap=wrap)
        except RuntimeError as e:
            text = str(e)
        else:
            self.fail("revopsd started on a read-only data directory")
        self.assertIn(d, text)
        self.assertIn(cause, text)
        if not wrap:
            os.chmod(d, 0o755)
        self.srv.log_dir = None
        self.assert_unchanged_and_restorable()


if __name__ == "__main__":
    unittest.main()
