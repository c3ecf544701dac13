#!/usr/bin/env python3
"""Meta's webhook calls are checked on the event loops and recorded by one
thread in shared transactions, with no thread waiting for them
(docs/guest-messaging.md, "How a call is recorded"):
- writes that hang (rate decisions whose PMS is SIGSTOPped, run with the
  other writes by --pms-workers 0) hold every --workers thread, and a
  signed WhatsApp call still answers at once and is recorded;
- SIGTERM while calls are in flight: each call answered 200 is recorded,
  none twice, and the server exits 0;
- --channel-workers (their lane of workers until now) is still accepted,
  with a warning that it has no effect.
Black-box, both backends.
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


def set_channel(srv, pf):
    srv.ctl("whatsapp", "set", "--portfolio", pf.id, "--property", pf.properties[0]["id"],
            "--phone-number-id", PNID, "--access-token", "lane-token", "--app-secret",
            SECRET, "--verify-token", "lane-verify-token")


def post(conn, wamid, phone, text="Is breakfast included?"):
    body, sig = signed_call(wamid, phone, text)
    return conn.request("POST", "/channels/whatsapp/webhook", body=body,
                        headers={"Content-Type": "application/json",
                                 "X-Hub-Signature-256": sig})


def thread_messages(srv, pf, token, phone):
    """The external ids of the messages of phone's thread (every page)."""
    r = srv.request("GET", "/v2/guest-threads?guest=%2B" + phone, token=token, portfolio=pf.id)
    if r.status != 200:
        raise AssertionError(r)
    if not r.body["data"]:
        return []
    tid, ids, cursor = r.body["data"][0]["id"], [], None
    while True:
        r = srv.request("GET", "/v2/guest-threads/%s/messages?limit=100%s"
                        % (tid, "&cursor=" + cursor if cursor else ""), token=token,
                        portfolio=pf.id)
        if r.status != 200:
            raise AssertionError(r)
        ids += [m["external_id"] for m in r.body["data"]]
        cursor = r.body["meta"]["next_cursor"]
        if not cursor:
            return ids


class WebhookLoopTest(unittest.TestCase):
    def start(self, more_args=()):
        sim, srv, pf = pmssim.start_for_decisions(
            self, APPROVER, server_args=["--workers", str(WORKERS), "--pms-workers", "0"] +
            list(more_args))
        set_channel(srv, pf)
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
        with srv.client(timeout=timeout) as conn:
            return post(conn, wamid, phone)

    def test_webhook_calls_pass_writes_that_hang(self):
        sim, srv, pf = self.start()
        threads, answers = self.hang_every_worker(sim, srv, pf)
        for i in range(3):
            t0 = time.monotonic()
            r = self.webhook(srv, "wamid.lane-%d" % i, "4860077700%d" % i, 10.0)
            self.assertEqual(r.status, 200, r)
            self.assertLess(time.monotonic() - t0, 5.0, "the call waited behind the hung PMS")
        r = srv.request("GET", "/v2/guest-threads?guest=%2B48600777001", token=pf.token,
                        portfolio=pf.id)
        self.assertEqual(len(r.body["data"]), 1, r)
        self.assertEqual(answers, [], "a decision answered while its PMS was stopped")
        sim.proc.send_signal(signal.SIGCONT)
        for t in threads:
            t.join(120)
        self.assertEqual(len(answers), WORKERS + 1)

    def test_sigterm_with_calls_in_flight(self):
        # Clients post on keep-alive connections until the server refuses
        # or closes; SIGTERM comes while calls wait for their transaction.
        # Every 200 is a message recorded, nothing else is, and nothing
        # is recorded twice.
        srv = harness.Server()
        self.addCleanup(srv.cleanup)
        pf = srv.seed_portfolio("enterprise", 1)
        set_channel(srv, pf)
        _, tok = srv.client_token(pf.id, "guest-threads:read", name="reader")
        clients = 12
        answered = {i: [] for i in range(clients)}
        unanswered = {i: [] for i in range(clients)}
        started = threading.Barrier(clients + 1)

        def client(i):
            phone = "486007780%02d" % i
            with srv.client(timeout=30.0) as conn:
                started.wait()
                for n in range(100000):
                    wamid = "wamid.term-%d-%d" % (i, n)
                    try:
                        r = post(conn, wamid, phone)
                    except (OSError, harness.http.client.HTTPException):
                        unanswered[i].append(wamid)
                        return
                    if r.status != 200:
                        self.assertEqual(r.status, 503, r)  # refused: not recorded
                        return
                    answered[i].append(wamid)
        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        started.wait()
        harness.wait_until(lambda: sum(len(a) for a in answered.values()) >= 200, 30.0,
                           what="200 calls answered")
        srv.signal(signal.SIGTERM)
        self.assertEqual(srv.wait_exit(20.0), 0, srv.log_text())
        for t in threads:
            t.join(30)
        srv.start()
        for i in range(clients):
            recorded = thread_messages(srv, pf, tok, "486007780%02d" % i)
            self.assertEqual(len(recorded), len(set(recorded)), "a call recorded twice")
            # a call the server read before the signal is answered (the
            # drain waits for its transaction); one sent later is refused
            # or finds the connection closed, and is not recorded
            self.assertEqual(sorted(recorded), sorted(answered[i]),
                             "client %d: recorded and answered differ (unanswered: %s)"
                             % (i, unanswered[i]))
        srv.stop()

    def test_channel_workers_is_accepted_and_has_no_effect(self):
        srv = harness.Server(["--channel-workers", "4"])
        self.addCleanup(srv.cleanup)
        self.assertIn("--channel-workers has no effect", srv.log_text())
        pf = srv.seed_portfolio("enterprise", 1)
        set_channel(srv, pf)
        with srv.client() as conn:
            self.assertEqual(post(conn, "wamid.accepted", "48600777020").status, 200)
        srv.stop()
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
