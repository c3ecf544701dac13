"""A full disk (issue 19, defect 7). The database's directory is a 16 MiB
tmpfs in a private mount namespace (this suite runs itself again under
`unshare --mount`; that needs root, and without it the suite says so and
skips). Filled with a file, on SQLite every write answers 503
SVC-UNAVAILABLE with Retry-After (never 500) and writes nothing, /readyz
reports the fault, the log names it once for the whole episode; reads go
on; once there is room again (the file removed) /readyz is ready within
seconds, writes are taken, and every write acknowledged before is there.
On PostgreSQL the database's disk is the PostgreSQL server's: a full
revopsd data directory (its key, node id) stops nothing, which is what is
checked there. Black-box: HTTP, revopsctl, the log and the filesystem.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
import ledger  # noqa: E402
from harness import assert_error, wait_until  # noqa: E402

INSIDE = "REVOPS_DISK_FULL_NS"
SIZE = "16m"


def reexec_in_namespace():
    """Runs this file again in a private mount namespace; returns its exit
    code, or None when that cannot be done here (with the reason)."""
    if os.geteuid() != 0:
        return None, "a private tmpfs needs root (unshare --mount)"
    if not shutil.which("unshare"):
        return None, "unshare (util-linux) is not installed"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        return None, "unshare --mount is not permitted here: %s" % probe.stderr.decode().strip()
    env = dict(os.environ, **{INSIDE: "1"})
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                        os.path.abspath(__file__)] + sys.argv[1:], env=env)
    return p.returncode, None


class DiskFullTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="revops-full-")
        self.disk = os.path.join(self.tmp, "disk")
        os.mkdir(self.disk)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + SIZE, "tmpfs", self.disk],
                       check=True)
        self.addCleanup(subprocess.run, ["umount", self.disk])
        self.fill = os.path.join(self.disk, "fill")
        if backend.POSTGRES:
            # revopsd's own directory on the small disk
            data_dir, db = self.disk, None
        else:
            # the database on the small disk, the rest beside it
            data_dir = os.path.join(self.tmp, "data")
            os.mkdir(data_dir)
            db = backend.Database(data_dir)
            db.url = "sqlite:" + os.path.join(self.disk, "revops.db")
            db.args = lambda: ["--database", db.url]
        self.srv = harness.Server(data_dir=data_dir, db=db, log_dir=self.tmp)
        self.addCleanup(self.srv.cleanup)  # also when setUp fails below
        self.seed = self.srv.seed_portfolio("enterprise", 1)

    def token(self):
        return self.srv.token(self.seed.client_id, self.seed.client_secret)

    def subscribe(self, token, n):
        return self.srv.request("POST", "/v2/webhooks", token=token, portfolio=self.seed.id,
                                body={"url": "https://93.184.216.34/hooks/%d" % n,
                                      "events": ["rate.decision.published"]})

    def fill_disk(self):
        subprocess.run(["dd", "if=/dev/zero", "of=" + self.fill, "bs=1M"],
                       capture_output=True)

    def full_events(self):
        return [e for e in self.srv.log_events() if e.get("event") == "store_full"]

    def test_full_disk(self):
        tok = self.token().body["access_token"]
        self.writes = ledger.Ledger(self.srv, self.seed, "approver@example.com")
        self.seed._token = tok
        for _ in range(2):
            self.assertEqual(self.writes.post("task").status, 201)
        before = [self.subscribe(tok, i) for i in range(3)]
        self.assertEqual([r.status for r in before], [201] * 3, before[0])
        self.fill_disk()
        if backend.POSTGRES:
            self.full_on_postgres(tok)
        else:
            self.full_on_sqlite(tok, [r.body["data"]["id"] for r in before])

    def full_on_postgres(self, tok):
        r = self.subscribe(tok, 99)
        self.assertEqual(r.status, 201, r)
        self.assertEqual(self.token().status, 200)
        self.assertEqual(self.srv.request("GET", "/readyz").status, 200)
        self.assertEqual(self.full_events(), [])
        self.assertEqual(self.writes.post("task").status, 201)
        self.writes.verify(self)

    def full_on_sqlite(self, tok, kept):
        # writes until the WAL can grow no more: each answered 201 or 503,
        # never anything else; the first 503 within a bounded number
        refused = None
        statuses = set()
        for i in range(3000):
            r = self.subscribe(tok, 1000 + i)
            statuses.add(r.status)
            if r.status == 503:
                refused = r
                break
        self.assertEqual(statuses - {201, 503}, set())
        self.assertIsNotNone(refused, "no write was refused on a full disk")
        assert_error(self, refused, 503, "SVC-UNAVAILABLE")
        self.assertEqual(refused.headers.get("Retry-After"), "30")
        self.assertIn("disk is full", refused.body["error"]["message"])
        # a keyed write: refused the same way, its key released
        r = self.writes.post("task")
        assert_error(self, r, 503, "SVC-UNAVAILABLE")
        self.assertEqual(r.headers.get("Retry-After"), "30")
        # more writes of other kinds: refused the same way, never 500
        for _ in range(5):
            r = self.token()
            self.assertEqual(r.status, 503, r)
            self.assertTrue(r.headers.get("Retry-After"))
        r = self.srv.request("GET", "/readyz")
        self.assertEqual(r.status, 503, r)
        self.assertIn("disk is full", r.body["error"]["message"])
        # reads go on
        r = self.srv.request("GET", "/v2/webhooks", token=tok, portfolio=self.seed.id)
        self.assertEqual(r.status, 200, r)
        # one log line for the episode, however many refusals
        self.assertEqual([e.get("level") for e in self.full_events()], ["error"])
        # room again: ready within seconds, writes taken
        os.unlink(self.fill)
        wait_until(lambda: self.srv.request("GET", "/readyz").status == 200, 10.0,
                   what="/readyz ready again")
        self.assertEqual(self.token().status, 200)
        self.assertEqual(self.subscribe(tok, 5000).status, 201)
        self.assertEqual([e.get("level") for e in self.full_events()], ["error", "info"])
        # everything acknowledged is there (the first three among them)
        r = self.srv.request("GET", "/v2/webhooks?limit=200", token=tok, portfolio=self.seed.id)
        have = {s["id"] for s in r.body["data"]} if isinstance(r.body, dict) else set()
        self.assertTrue(set(kept) <= have, (kept, len(have)))
        self.writes.verify(self)  # keyed: each acknowledged once, replays; the refused runs now


def main():
    if os.environ.get(INSIDE):
        unittest.main()
        return
    rc, why = reexec_in_namespace()
    if rc is None:
        print("test_disk_full: skipped: %s" % why)
        sys.exit(0)
    sys.exit(rc)


if __name__ == "__main__":
    main()
