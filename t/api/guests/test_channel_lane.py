#!/usr/bin/env python3
"""Meta's webhook calls run on workers of their own (--channel-workers):
writes that hang (here rate decisions whose PMS is SIGSTOPped, run with the
other writes by --pms-workers 0) hold every --workers thread, and a signed
WhatsApp call still answers at once and is recorded. With
--channel-workers 0 the same call waits behind them (the lane is what makes
the difference). Black-box, both backends.
"""

import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import pmssim  # noqa: E402
from harness import rate_decision_body  # noqa: E402

APPROVER = "approver@example.com"
SECRET = "lane-app-secret"
PNID = "106540352249001"
WORKERS = 2


def signed_call(wamid, phone, text):
    """A body as Meta posts one inbound message, and its signature."""
    body = json.dumps({"object": "whatsapp_business_account", "entry": [{
        "id": "WABA", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": PNID, "phone_number_id": PNID},
            "contacts": [{"profile": {"name": "Lane guest"}, "wa_id": phone}],
            "messages": [{"from": phone, "id": wamid, "timestamp": str(int(time.time())),
                          "type": "text", "text": {"body": text}}]}}]}]}).encode()
    return body, "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


class ChannelLaneTest(unittest.TestCase):
    def start(self, channel_workers):
        sim, srv, pf = pmssim.start_for_decisions(
            self, APPROVER, server_args=["--workers", str(WORKERS), "--pms-workers", "0",
                                         "--channel-workers", str(channel_workers)])
        srv.ctl("whatsapp", "set", "--portfolio", pf.id, "--property", pf.properties[0]["id"],
                "--phone-number-id", PNID, "--access-token", "lane-token", "--app-secret",
                SECRET, "--verify-token", "lane-verify-token")
        return sim, srv, pf

    def hang_every_worker(self, sim, srv, pf):
        """SIGSTOPs the PMS and starts WORKERS + 1 decisions: every --workers
        thread then waits on it. Returns the threads (joined once resumed)."""
        sim.proc.send_signal(signal.SIGSTOP)
        self.addCleanup(lambda: sim.proc.poll() is None and sim.proc.send_signal(signal.SIGCONT))
        answers = []

        def decide(i):
            body = rate_decision_body([p["id"] for p in pf.properties], pf.ceiling["id"],
                                      APPROVER, justification="Held by a hung PMS %d" % i)
            answers.append(srv.request("POST", "/v2/rate-decisions", token=pf.token,
                                       portfolio=pf.id, body=body, timeout=120.0))
        threads = [threading.Thread(target=decide, args=(i,)) for i in range(WORKERS + 1)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        pending = []
        while time.monotonic() < deadline and len(pending) < WORKERS:
            r = srv.request("GET", "/v2/rate-decisions?status=pending", token=pf.token,
                            portfolio=pf.id)
            pending = r.body["data"]
            time.sleep(0.05)
        self.assertEqual(len(pending), WORKERS, "the decisions did not hold every worker")
        return threads, answers

    def webhook(self, srv, wamid, phone, timeout):
        body, sig = signed_call(wamid, phone, "Is breakfast included?")
        return srv.request("POST", "/channels/whatsapp/webhook", body=body,
                           headers={"Content-Type": "application/json",
                                    "X-Hub-Signature-256": sig}, timeout=timeout)

    def test_webhook_calls_pass_writes_that_hang(self):
        sim, srv, pf = self.start(4)
        threads, answers = self.hang_every_worker(sim, srv, pf)
        for i in range(3):
            t0 = time.monotonic()
            r = self.webhook(srv, "wamid.lane-%d" % i, "4860077700%d" % i, 10.0)
            self.assertEqual(r.status, 200, r)
            self.assertLess(time.monotonic() - t0, 2.0, "the call waited behind the hung PMS")
        r = srv.request("GET", "/v2/guest-threads?guest=%2B48600777001", token=pf.token,
                        portfolio=pf.id)
        self.assertEqual(len(r.body["data"]), 1, r)
        self.assertEqual(answers, [], "a decision answered while its PMS was stopped")
        sim.proc.send_signal(signal.SIGCONT)
        for t in threads:
            t.join(120)
        self.assertEqual(len(answers), WORKERS + 1)

    def test_without_the_lane_the_call_waits(self):
        # the control: with --channel-workers 0 the call runs with the
        # other writes, so it cannot answer while they all hang
        sim, srv, pf = self.start(0)
        threads, answers = self.hang_every_worker(sim, srv, pf)
        with self.assertRaises(TimeoutError):
            self.webhook(srv, "wamid.lane-none", "48600777010", 2.0)
        sim.proc.send_signal(signal.SIGCONT)
        for t in threads:
            t.join(120)
        self.assertEqual(len(answers), WORKERS + 1)

    def test_out_of_range_is_refused(self):
        for bad, why in (("257", "--channel-workers must be 0-256"),
                         ("-1", "invalid value for --channel-workers")):
            with tempfile.TemporaryDirectory() as d:
                p = subprocess.run([harness.REVOPSD, "--data-dir", d, "--listen", "127.0.0.1:0",
                                    "--channel-workers", bad], capture_output=True, text=True,
                                   timeout=30, env=harness._child_env())
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertIn(why, p.stderr, bad)


if __name__ == "__main__":
    unittest.main()
