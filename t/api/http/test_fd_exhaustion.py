"""Out of file descriptors (issue 19): with its open-files limit lowered
under it (prlimit) and more clients than fit, revopsd does not spin a core
on the listening socket it cannot accept from, says so once, answers the
connections it holds, and accepts again once descriptors are free.
Black-box: the process's /proc entries, prlimit, sockets and the log.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class FdExhaustionTest(unittest.TestCase):
    def setUp(self):
        if not shutil.which("prlimit"):
            self.fail("prlimit (util-linux) is required")
        self.srv = harness.Server()
        self.addCleanup(self.srv.cleanup)
        self.socks = []
        self.addCleanup(lambda: [s.close() for s in self.socks])

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=5)
        self.socks.append(s)
        return s

    def healthz(self, s):
        s.sendall(HEALTHZ)
        data = s.recv(4096)
        return data.split(b" ", 2)[1] if data else b""

    def answered(self, socks):
        n = 0
        for s in socks:
            s.setblocking(False)
            try:
                n += bool(s.recv(64, socket.MSG_PEEK))
            except BlockingIOError:
                pass
            finally:
                s.setblocking(True)
        return n

    def test_no_spin_when_descriptors_run_out(self):
        pid = self.srv.proc.pid
        held, spare = self.connect(), self.connect()
        self.assertEqual(self.healthz(held), b"200")
        self.assertEqual(self.healthz(spare), b"200")
        limit = open_fds(pid) + 4
        subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%d:" % limit],
                       check=True)
        waiting = []
        for _ in range(20):  # more than fit: the rest wait in the backlog
            waiting.append(self.connect())
            waiting[-1].sendall(HEALTHZ)
        time.sleep(0.5)
        # a descriptor freed for a moment lets one more in: still the
        # same episode, not a second error line
        before = self.answered(waiting)
        spare.close()
        harness.wait_until(lambda: self.answered(waiting) > before, 5.0,
                           what="one waiting connection accepted in the freed descriptor")
        t0, c0 = time.monotonic(), cpu_seconds(pid)
        time.sleep(2.0)
        busy = (cpu_seconds(pid) - c0) / (time.monotonic() - t0)
        self.assertLess(busy, 0.25, "revopsd used %.0f %% of a core accepting nothing"
                        % (busy * 100))
        # the connection it holds is still served
        self.assertEqual(self.healthz(held), b"200")
        errors = [e for e in self.srv.log_events()
                  if e.get("event") == "accept" and e.get("level") == "error"]
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("file descriptors", errors[0]["msg"])
        # room again: the waiting ones are accepted and answered
        subprocess.run(["prlimit", "--pid", str(pid), "--nofile=4096:"], check=True)
        late = self.connect()
        self.assertEqual(self.healthz(late), b"200")
        harness.wait_until(lambda: any(e.get("event") == "accept" and e.get("level") == "info"
                                       for e in self.srv.log_events()), 5.0,
                           what="the accepting-again log line")


class FdLimitWarningTest(unittest.TestCase):
    """At start, a --max-connections the open-files limit cannot hold
    (the hard limit included) is named in a warning with what to do."""

    def start(self, max_conns):
        srv = harness.Server(["--max-connections", str(max_conns)], start=False)
        self.addCleanup(srv.cleanup)
        srv.start(wrap=["prlimit", "--nofile=256:256", "--"])
        return [e for e in srv.log_events() if e.get("event") == "max_connections"]

    def test_warned_when_the_limit_is_too_low(self):
        if not shutil.which("prlimit"):
            self.fail("prlimit (util-linux) is required")
        warned = self.start(4096)
        self.assertEqual(len(warned), 1, warned)
        self.assertEqual(warned[0]["level"], "warn")
        for words in ("--max-connections 4096", "RLIMIT_NOFILE 256", "ulimit -n"):
            self.assertIn(words, warned[0]["msg"])
        self.assertEqual(self.start(100), [])


if __name__ == "__main__":
    unittest.main()
