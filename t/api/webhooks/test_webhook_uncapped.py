"""Lanes without a rate cap (revopsd --webhook-uncapped, the benchmark's
mode): the engine claims up to 16 deliveries per lane, 8 sending and up to
8 waiting in the HTTP thread for a slot, so that a slot is refilled as soon
as its transfer ends.  This suite proves the other half of that promise:

- a receiver never sees more than 8 requests to one URL at once, and sees
  8 when enough are due (the waiting ones are really released as slots
  free);
- a slow receiver holds only its own lane: another URL's deliveries of the
  same events all arrive before the slow one is half done;
- nothing is lost or sent twice.

The receiver (t/api/receiver.py) counts, per path, the requests that have
arrived and are not yet answered."""

import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import receiver  # noqa: E402
from harness import assert_success  # noqa: E402

EVENTS = 48
SLOW_S = 1.0         # the slow receiver's answer time
CONCURRENCY = 8      # per URL (API-CONTRACT: per-URL concurrency limit)
EVENT_TYPE = "rate.decision.published"


class UncappedLaneTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="revops-uncapped-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.ca = receiver.TestCA(cls.tmp)
        cls.rx = receiver.Receiver(cls.ca)
        try:
            cls.srv = harness.Server(["--allow-private-targets", "--trust-ca", cls.ca.ca_pem,
                                      "--webhook-uncapped"])
        except BaseException:
            cls.rx.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.close()
        finally:
            cls.rx.close()

    def subscribe(self, seed, path):
        r = self.srv.request("POST", "/v2/webhooks", token=seed.token, portfolio=seed.id,
                             body={"url": self.rx.url(path), "events": [EVENT_TYPE]})
        assert_success(self, r, 201)

    def test_slow_lane_keeps_eight_in_flight_and_holds_no_other(self):
        seed = self.srv.seed_portfolio("enterprise", 1)
        self.rx.set_behaviour("/slow", delay=SLOW_S)
        self.subscribe(seed, "/slow")
        self.subscribe(seed, "/fast")
        t0 = time.monotonic()
        out = self.srv.ctl("event", "emit", "--portfolio", seed.id, "--type", EVENT_TYPE,
                           "--count", str(EVENTS))
        self.assertEqual(out, {"emitted": EVENTS})

        fast = self.rx.wait_for(EVENTS, "/fast", timeout=20)
        t_fast = time.monotonic() - t0
        slow = self.rx.wait_for(EVENTS, "/slow", timeout=30)
        # the slow URL's arrivals by the time the fast lane's last arrived,
        # by the receiver's own clock
        fast_done = max(d.at for d in fast)
        slow_then = len([d for d in slow if d.at <= fast_done])

        # 8 at once, never more, for the slow URL
        self.assertEqual(self.rx.max_concurrent("/slow"), CONCURRENCY)
        self.assertLessEqual(self.rx.max_concurrent("/fast"), CONCURRENCY)
        # the slow lane needs EVENTS / 8 rounds of SLOW_S; the fast one was
        # done before half of them
        self.assertLess(slow_then, EVENTS // 2,
                        "fast lane done after %.2fs, when the slow one had %d of %d"
                        % (t_fast, slow_then, EVENTS))
        # each event once per URL, every delivery once
        for got in (fast, slow):
            ids = [d.headers.get("x-service-delivery-id") for d in got]
            self.assertEqual(len(set(ids)), EVENTS, ids)
            events = {d.headers.get("x-service-event-id") for d in got}
            self.assertEqual(len(events), EVENTS)
        self.assertEqual({d.headers.get("x-service-event-id") for d in fast},
                         {d.headers.get("x-service-event-id") for d in slow})
        # and the engine recorded them all as delivered
        def settled():
            r = self.srv.request("GET", "/v2/webhooks", token=seed.token, portfolio=seed.id)
            subs = [s["id"] for s in r.body["data"]]
            states = []
            for sub in subs:
                d = self.srv.request("GET", "/v2/webhooks/%s/deliveries?limit=100" % sub,
                                     token=seed.token, portfolio=seed.id)
                states += [x["state"] for x in d.body["data"]]
            return states if len(states) == 2 * EVENTS and set(states) == {"delivered"} \
                else None
        harness.wait_until(settled, 10, what="all deliveries recorded as delivered")


if __name__ == "__main__":
    harness.run_main()
