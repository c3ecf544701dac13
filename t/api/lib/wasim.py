"""Runs a `wa-sim` process (a simulator of Meta's WhatsApp Cloud API,
docs/wa-sim.md) for the black-box suites.  Python 3 stdlib only.

    with wasim.WaSim("--access-token", "tok", "--fail-first", "1") as wa:
        srv = harness.Server([... wa.url ...])
        wa.config(srv.url + "/channels/whatsapp/webhook", "app-secret")
        answer = wa.inbound("1234567", "48600100200", "Hello", name="Anna")
        assert answer["statuses"] == [200]
        wa.sent()          # GET /sent: every accepted send, oldest first

The simulator listens on 127.0.0.1:<free port>; the port comes from its
'listening' log line on stderr.  stop() sends SIGTERM and requires exit 0.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import harness

WA_SIM = os.path.join(harness.BIN_DIR, "wa-sim")
START_DEADLINE = 10.0
STOP_DEADLINE = 15.0  # wa-sim drains requests in flight for up to 10 s
# /control/inbound and /control/status wait for the webhook's answer (up to
# 10 s per repeat in wa-sim), so their timeout is generous.
CONTROL_TIMEOUT = 60.0


class WaSim:
    """One wa-sim process; extra command-line arguments as *args."""

    def __init__(self, *args):
        self.args = [str(a) for a in args]
        self.dir = tempfile.mkdtemp(prefix="revops-wasim-")
        self.log_path = os.path.join(self.dir, "wa-sim.log")
        self.proc = None
        self.port = None
        try:
            self._start()
        except BaseException:
            self.cleanup()
            raise

    def _start(self):
        if not os.access(WA_SIM, os.X_OK):
            raise RuntimeError("no wa-sim at %s (set REVOPS_BIN_DIR)" % WA_SIM)
        self.log_file = open(self.log_path, "wb")
        self.proc = subprocess.Popen([WA_SIM, "--listen", "127.0.0.1:0"] + self.args,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log_file, env=harness._child_env())
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            port = self._listening_port()
            if port:
                self.port = port
                return
            if self.proc.poll() is not None:
                raise RuntimeError("wa-sim exited with %s before listening:\n%s"
                                   % (self.proc.returncode, self.log_text()))
            time.sleep(0.01)
        raise RuntimeError("wa-sim did not log 'listening' within %.0fs:\n%s"
                           % (START_DEADLINE, self.log_text()))

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

    def request(self, method, path, body=None, headers=None, timeout=10.0):
        """One request → (status, parsed JSON body); error statuses are
        returned, not raised.  body (not None) is sent as JSON."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raw = e.read().decode("utf-8", "replace")
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, raw

    def get(self, path, timeout=10.0):
        """GET path → (status, parsed JSON body)."""
        return self.request("GET", path, timeout=timeout)

    def _control(self, path, body, timeout=CONTROL_TIMEOUT):
        status, answer = self.request("POST", path, body, timeout=timeout)
        if status != 200:
            raise AssertionError("wa-sim POST %s answered %s %r" % (path, status, answer))
        return answer

    def config(self, webhook_url, app_secret):
        """POST /control/config: where callbacks go and the secret they are
        signed with (webhook_url None removes the target)."""
        return self._control("/control/config",
                             {"webhook_url": webhook_url, "app_secret": app_secret})

    def inbound(self, phone_number_id, from_, text, name=None, id=None, signature="good",
                repeat=1, extra_messages=None, timestamp=None):
        """POST /control/inbound: one guest message posted to the webhook
        now → {"wamid", "wamids", "statuses": [HTTP status per repeat, 0 for
        no answer], "body": the raw payload sent}."""
        body = {"phone_number_id": phone_number_id, "from": from_, "text": text,
                "signature": signature, "repeat": repeat}
        if name is not None:
            body["name"] = name
        if id is not None:
            body["id"] = id
        if extra_messages is not None:
            body["extra_messages"] = extra_messages
        if timestamp is not None:
            body["timestamp"] = timestamp
        return self._control("/control/inbound", body)

    def status(self, phone_number_id, wamid, to, status, signature="good", errors=None,
               repeat=1, timestamp=None):
        """POST /control/status: one status callback posted to the webhook
        now → {"statuses": [...], "body": the raw payload sent}."""
        body = {"phone_number_id": phone_number_id, "wamid": wamid, "to": to,
                "status": status, "signature": signature, "repeat": repeat}
        if errors is not None:
            body["errors"] = errors
        if timestamp is not None:
            body["timestamp"] = timestamp
        return self._control("/control/status", body)

    def sent(self):
        """GET /sent: the list of accepted sends, oldest first."""
        status, body = self.get("/sent")
        if status != 200 or not isinstance(body, list):
            raise AssertionError("wa-sim GET /sent answered %s %r" % (status, body))
        return body

    def callbacks(self):
        """GET /callbacks: every callback posted (automatic statuses too),
        oldest first: {"kind", "wamid", "status"?, "signature",
        "http_status", "error"?, "at"}."""
        status, body = self.get("/callbacks")
        if status != 200 or not isinstance(body, list):
            raise AssertionError("wa-sim GET /callbacks answered %s %r" % (status, body))
        return body

    def wait_callbacks(self, pred, count=1, timeout=10.0):
        """Waits until at least count callbacks satisfy pred; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            got = [c for c in self.callbacks() if pred(c)]
            if len(got) >= count:
                return got
            if time.monotonic() >= deadline:
                raise AssertionError("wa-sim: %d of %d callbacks within %.0fs: %r"
                                     % (len(got), count, timeout, got))
            time.sleep(0.05)

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
            raise AssertionError("wa-sim did not exit within %.0fs of SIGTERM:\n%s"
                                 % (timeout, self.log_text()))
        self.log_file.close()
        if rc != 0:
            sys.stderr.write("--- wa-sim log (exit %s) ---\n%s\n" % (rc, self.log_text()))
            raise AssertionError("wa-sim exited with %s after SIGTERM" % rc)

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
