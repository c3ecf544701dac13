"""Runs a `pms-sim` process (the PMS simulator of API-CONTRACT §7) for the
black-box suites.  Python 3 stdlib only.

    with pmssim.PmsSim("--fail-codes", "WAW03") as sim:
        srv = harness.Server(["--pms-url", sim.url])
        ...
        sim.written()      # GET /written: every accepted write, oldest first

The simulator listens on 127.0.0.1:<free port>; the port comes from its
'listening' log line on stderr.  stop() sends SIGTERM and requires exit 0.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import harness

PMS_SIM = os.path.join(harness.BIN_DIR, "pms-sim")
START_DEADLINE = 10.0
STOP_DEADLINE = 15.0  # pms-sim drains writes in flight for up to 10 s


class SimProcess:
    """One simulator process (BINARY, logging as NAME), started on a free
    loopback port with extra command-line arguments *args: its lifecycle,
    shared by every simulator of the suites (pms-sim here, wa-sim in
    wasim.py)."""

    NAME = "pms-sim"
    BINARY = PMS_SIM

    def __init__(self, *args):
        self.args = [str(a) for a in args]
        self.dir = tempfile.mkdtemp(prefix="revops-%s-" % self.NAME)
        self.log_path = os.path.join(self.dir, self.NAME + ".log")
        self.proc = None
        self.port = None
        try:
            self._start()
        except BaseException:
            self.cleanup()
            raise

    def _start(self):
        if not os.access(self.BINARY, os.X_OK):
            raise RuntimeError("no %s at %s (set REVOPS_BIN_DIR)" % (self.NAME, self.BINARY))
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen([self.BINARY, "--listen", "127.0.0.1:0"] + self.args,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log_file, env=harness._child_env())
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            port = self._listening_port()
            if port:
                self.port = port
                return
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %s before listening:\n%s"
                                   % (self.NAME, self.proc.returncode, self.log_text()))
            time.sleep(0.01)
        raise RuntimeError("%s did not log 'listening' within %.0fs:\n%s"
                           % (self.NAME, START_DEADLINE, self.log_text()))

    def _listening_port(self):
        for line in self.log_text().splitlines():
            line = line.strip()
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("event") == "listening":
                m = re.search(r"port=(\d+)", str(ev.get("msg", "")))
                if not m:
                    raise RuntimeError("'listening' line without port=: %r" % line)
                return int(m.group(1))
        return None

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self, timeout=STOP_DEADLINE):
        """SIGTERM; requires exit code 0 within timeout (kills it otherwise)."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.log_file.close()
            raise AssertionError("%s did not exit within %.0fs of SIGTERM:\n%s"
                                 % (self.NAME, timeout, self.log_text()))
        self.log_file.close()
        if rc != 0:
            sys.stderr.write("--- %s log (exit %s) ---\n%s\n" % (self.NAME, rc, self.log_text()))
            raise AssertionError("%s exited with %s after SIGTERM" % (self.NAME, rc))

    def cleanup(self):
        """Kills (without asserting) and removes the log directory."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            self.log_file.close()
        if not os.environ.get("REVOPS_KEEP_DATA"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def close(self):
        try:
            self.stop()
        finally:
            self.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PmsSim(SimProcess):
    """One pms-sim process; extra command-line arguments as *args."""

    def get(self, path, timeout=10.0):
        """GET path → (status, parsed JSON body)."""
        with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
            return r.status, json.loads(r.read().decode("utf-8"))

    def written(self):
        """GET /written: the list of accepted writes, oldest first."""
        status, body = self.get("/written")
        if status != 200 or not isinstance(body, list):
            raise AssertionError("pms-sim GET /written answered %s %r" % (status, body))
        return body


def start_with_server(sim_args=(), server_args=()):
    """A pms-sim (sim_args) and a revopsd writing to it (--pms-url, then
    server_args): returns (sim, srv).  If the server does not start, the
    simulator is cleaned up before the error propagates."""
    sim = PmsSim(*sim_args)
    try:
        srv = harness.Server(["--pms-url", sim.url] + list(server_args))
    except BaseException:
        sim.cleanup()
        raise
    return sim, srv


def start_for_decisions(tc, approver, nprops=2, sim_args=(), server_args=()):
    """start_with_server for test case tc (both cleaned up after it), and
    an enterprise portfolio of nprops properties whose user approver is a
    revenue-approver: returns (sim, srv, seed)."""
    sim, srv = start_with_server(sim_args, server_args)
    tc.addCleanup(sim.cleanup)
    tc.addCleanup(srv.cleanup)
    pf = srv.seed_portfolio("enterprise", nprops)
    harness.ctl_user(srv, pf.id, approver, ["revenue-approver"])
    return sim, srv, pf


@contextlib.contextmanager
def server_with_pms(sim_args=(), server_args=()):
    """with server_with_pms(...) as (sim, srv): start_with_server, and at the
    end both stopped (server first), each required to exit cleanly."""
    sim, srv = start_with_server(sim_args, server_args)
    with sim, srv:
        yield sim, srv
