"""One revopsd per port, and per data directory on SQLite
(docs/operations.md, "One server per port and data directory").

A second server on a port another holds exits non-zero with "listen
127.0.0.1:P: address already in use" before it touches its database, while
the first answers every request; on SQLite a second server on the same
data directory exits non-zero naming the directory and the running
server's pid (on PostgreSQL it runs, with a node id of its own); after SIGKILL a new server starts on the same port and directory;
revopsctl writes beside a running server; two servers on two directories
with --listen 127.0.0.1:0 both run.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
from harness import assert_success  # noqa: E402


def second_server(data_dir, port, db):
    """Runs another revopsd to its exit (at most 20 s); returns it."""
    return subprocess.run([harness.REVOPSD, "--listen", "127.0.0.1:%d" % port, "--data-dir",
                           data_dir, "--log-format", "text"] + db.args(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)


def node_id(srv):
    """The node id a server reports in /metrics."""
    text = srv.request("GET", "/metrics").raw.decode()
    return re.search(r'revops_node_info\{node="([^"]+)"', text).group(1)


class OneServerTest(unittest.TestCase):
    def setUp(self):
        # The first server is asked without pause while the second tries
        # its port: no anonymous limit in the way.
        self.srv = harness.Server(["--anon-rate-limit", "100000000"])
        self.tmp = tempfile.mkdtemp(prefix="revops-second-")

    def tearDown(self):
        try:
            if self.srv.proc is not None:
                self.srv.close()
            else:
                self.srv.cleanup()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def test_taken_port_refused_before_the_database(self):
        answers, stop = [], threading.Event()

        def keep_asking():
            with self.srv.client() as c:
                while not stop.is_set():
                    answers.append(c.request("GET", "/healthz").status)

        t = threading.Thread(target=keep_asking)
        t.start()
        db = backend.Database(os.path.join(self.tmp, "second"))
        try:
            p = second_server(os.path.join(self.tmp, "second"), self.srv.port, db)
            self.assertNotEqual(p.returncode, 0, p)
            self.assertIn("listen 127.0.0.1:%d: address already in use" % self.srv.port,
                          p.stderr)
            self.assertNotIn("listening", p.stderr)
            # nothing written: no SQLite file, no table on PostgreSQL
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "second", "revops.db")))
            if backend.POSTGRES:
                self.assertEqual(db.value("SELECT COUNT(*) FROM information_schema.tables"
                                          " WHERE table_schema = 'public'"), "0")
        finally:
            stop.set()
            t.join(10)
            db.drop()
        self.assertTrue(answers, "the first server was not asked meanwhile")
        self.assertEqual(set(answers), {200}, "the first server failed requests meanwhile")
        self.assertEqual(self.srv.request("GET", "/healthz").status, 200)

    def test_same_data_dir(self):
        if backend.POSTGRES:
            # Nodes share a PostgreSQL database, and may share a directory:
            # each holds a node-id slot of its own (docs/operations.md).
            with harness.Server(data_dir=self.srv.data_dir, db=self.srv.db) as other:
                ids = {node_id(s) for s in (self.srv, other)}
                self.assertEqual(len(ids), 2, ids)
                for name in ("node-id", "node-id.2"):
                    with open(os.path.join(self.srv.data_dir, name)) as f:
                        self.assertIn(f.read().strip(), ids, name)
            return
        # One server per embedded database: refused, naming the running one.
        p = second_server(self.srv.data_dir, 0, self.srv.db)
        self.assertNotEqual(p.returncode, 0, p)
        self.assertIn("data directory %s is in use by another revopsd (pid %d)"
                      % (self.srv.data_dir, self.srv.proc.pid), p.stderr)
        self.assertEqual(self.srv.request("GET", "/healthz").status, 200)

    def test_a_killed_server_blocks_nothing(self):
        port = self.srv.port
        seed = self.srv.seed_portfolio("group", 1)
        self.srv.signal(signal.SIGKILL)
        self.assertEqual(self.srv.wait_exit(10), -signal.SIGKILL)
        self.srv.start(["--listen", "127.0.0.1:%d" % port])
        self.assertEqual(self.srv.port, port)
        assert_success(self, seed.get("/v2/portfolios/" + seed.id))

    def test_revopsctl_writes_beside_a_running_server(self):
        seed = self.srv.seed_portfolio("group", 1)
        out = self.srv.ctl("portfolio", "set-rate-limit", "--portfolio", seed.id,
                           "--per-minute", "1234")
        self.assertEqual(out.get("rate_limit_per_minute"), 1234)
        harness.wait_until(lambda: seed.get("/v2/portfolios/" + seed.id).headers.get(
            "RateLimit-Policy") == '"portfolio";q=1234;w=60' or None, 5.0,
            what="the server seeing revopsctl's write")

    def test_two_directories_two_servers(self):
        with harness.Server() as other:
            self.assertNotEqual(other.port, self.srv.port)
            for s in (self.srv, other):
                self.assertEqual(s.request("GET", "/readyz").status, 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
