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
import time
import urllib.error
import urllib.request

import harness
import pmssim

WA_SIM = os.path.join(harness.BIN_DIR, "wa-sim")
# /control/inbound and /control/status wait for the webhook's answer (up to
# 10 s per repeat in wa-sim), so their timeout is generous.
CONTROL_TIMEOUT = 60.0


class WaSim(pmssim.SimProcess):
    """One wa-sim process; extra command-line arguments as *args (the
    lifecycle is pmssim.SimProcess's)."""

    NAME = "wa-sim"
    BINARY = WA_SIM

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
