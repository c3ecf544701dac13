"""Webhook delivery survives kill -9 (delivery design, "Crash safety"):
10,000 v2 events are queued for one subscription, the server is killed with
SIGKILL while they are being sent, and restarted on the same data
directory.  Every event must then reach the receiver at least once (the
duplicates that at-least-once delivery allows are counted and printed, and
each is byte-identical to the first copy: same delivery id, same body, same
signature), and the server's own records must converge: all 10,000
deliveries delivered, nothing pending, retrying or dead-lettered, the
restart logged as "webhook_recovered".

The server runs with --webhook-uncapped so that the burst is not held to the
Enterprise cap of 80 events/s (10,000 would take 125 s); concurrency per URL
is still 8.  The receiver is a real HTTPS endpoint (t/api/receiver.py) with
its own test CA, trusted through --trust-ca."""

import collections
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import receiver  # noqa: E402
from harness import assert_success  # noqa: E402

EVENTS = 10000
EVENT_TYPE = "sso.user.provisioned"
PATH = "/crash"
# Kill once this many distinct events have arrived: well into the burst, far
# from its end.
KILL_AFTER = 300
# Generous bounds for a loaded 2-core machine (and sanitizer builds); the
# test prints what it actually took.
FIRST_DELIVERIES_TIMEOUT = 30.0
RECOVERY_TIMEOUT = 150.0
CONVERGE_TIMEOUT = 30.0


def log(msg):
    sys.stderr.write("    [crash] %s\n" % msg)
    sys.stderr.flush()


class WebhookCrashTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="revops-crash-")
        self.ca = receiver.TestCA(self.tmp)
        self.rcv = receiver.Receiver(self.ca, default_status=204)
        self.srv = None

    def tearDown(self):
        try:
            if self.srv is not None:
                if self.srv.proc is not None:
                    self.srv.close()
                else:
                    self.srv.cleanup()
        finally:
            self.rcv.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # helpers ---------------------------------------------------------------

    def distinct_events(self):
        return {d.headers.get("x-service-event-id") for d in self.rcv.received(PATH)}

    def all_pages(self, seed, path, limit=500):
        """Every item of a cursor-paginated v2 list (newest first)."""
        out, cursor = [], None
        sep = "&" if "?" in path else "?"
        while True:
            url = "%s%slimit=%d" % (path, sep, limit)
            if cursor:
                url += "&cursor=" + cursor
            r = seed.get(url, timeout=30)
            data, meta = assert_success(self, r)
            out.extend(data)
            cursor = meta.get("next_cursor")
            if not cursor:
                return out

    def outbox_events(self, seed):
        events, after = [], 0
        while True:
            page = self.srv.ctl("event", "list", "--portfolio", seed.id, "--after", str(after),
                                "--limit", "10000")
            if not page:
                return events
            events.extend(page)
            after = page[-1]["seq"]

    # the test --------------------------------------------------------------

    def test_kill9_mid_burst_every_event_delivered(self):
        t_start = time.monotonic()
        args = ["--allow-private-targets", "--trust-ca",
                self.ca.ca_pem, "--webhook-uncapped"]
        self.srv = srv = harness.Server(args)
        seed = srv.seed_portfolio("enterprise", 1)
        r = srv.request("POST", "/v2/webhooks", token=seed.token, portfolio=seed.id,
                        body={"url": self.rcv.url(PATH), "events": [EVENT_TYPE],
                              "description": "kill -9 test"})
        sub, _ = assert_success(self, r, 201)
        secret = sub["signing_secret"]
        self.assertIsInstance(secret, str, r)

        out = srv.ctl("event", "emit", "--portfolio", seed.id, "--type", EVENT_TYPE,
                      "--count", str(EVENTS))
        self.assertEqual(out, {"emitted": EVENTS})
        events = [e for e in self.outbox_events(seed)
                  if e["type"] == EVENT_TYPE and e["surface"] == "v2"
                  and isinstance(e["data"], dict) and e["data"].get("synthetic") is True]
        expected = {e["id"] for e in events}
        self.assertEqual(len(events), EVENTS)
        self.assertEqual(len(expected), EVENTS)
        self.assertEqual(len({e["data"].get("n") for e in events}), EVENTS,
                         "synthetic events are numbered n = i")
        t_emitted = time.monotonic()

        # Let the burst get going, then kill -9 in the middle of it.
        got = harness.wait_until(lambda: len(self.distinct_events()) >= KILL_AFTER or None,
                                 FIRST_DELIVERIES_TIMEOUT, interval=0.005,
                                 what="the first %d deliveries" % KILL_AFTER)
        srv.signal(signal.SIGKILL)
        rc = srv.wait_exit(10.0)
        self.assertEqual(rc, -signal.SIGKILL, "revopsd did not die of SIGKILL")
        at_kill = self.distinct_events()
        log("%d distinct events (%d requests) had arrived %.2fs after the emit; killed"
            % (len(at_kill), len(self.rcv.received(PATH)), time.monotonic() - t_emitted))
        self.assertLess(len(at_kill), EVENTS,
                        "the burst finished before the kill: nothing was tested")
        # A request the dead server had in flight may still be completing.
        time.sleep(0.5)
        before_restart = len(self.rcv.received(PATH))

        t_restart = time.monotonic()
        srv.start()
        recovered = harness.wait_until(lambda: srv._find_event("webhook_recovered"), 10.0,
                                       what="a webhook_recovered log event at restart")
        log("restart logged: %s" % json.dumps(recovered))
        m = re.search(r"\b(\d+)\b", recovered.get("msg", ""))
        in_flight = int(m.group(1)) if m else None

        def all_arrived():
            return len(self.distinct_events() & expected) == EVENTS

        try:
            harness.wait_until(all_arrived, RECOVERY_TIMEOUT, interval=0.25,
                               what="all %d events at the receiver after restart" % EVENTS)
        except AssertionError:
            missing = expected - self.distinct_events()
            log("missing %d events, e.g. %s" % (len(missing), sorted(missing)[:5]))
            raise
        t_all = time.monotonic()
        log("all %d events arrived %.2fs after the restart (%d requests since it)"
            % (EVENTS, t_all - t_restart, len(self.rcv.received(PATH)) - before_restart))

        # What the receiver saw -------------------------------------------
        deliveries = self.rcv.received(PATH)
        by_event = collections.defaultdict(list)
        for d in deliveries:
            by_event[d.headers.get("x-service-event-id")].append(d)
        self.assertEqual(set(by_event), expected,
                         "deliveries of events that were never emitted: %r"
                         % sorted(set(by_event) - expected)[:5])
        key = secret.encode("utf-8")
        delivery_ids = set()
        for event_id, copies in by_event.items():
            first = copies[0]
            body = json.loads(first.body)
            self.assertEqual(body["id"], event_id, first.headers)
            self.assertEqual(body["type"], EVENT_TYPE)
            self.assertEqual(body["portfolio_id"], seed.id)
            self.assertEqual(first.headers.get("x-service-delivery-id"), body["delivery_id"])
            self.assertEqual(first.headers.get("x-service-event-type"), EVENT_TYPE)
            self.assertEqual(first.headers.get("x-service-portfolio"), seed.id)
            self.assertEqual(first.headers.get("x-service-signature"),
                             hmac.new(key, first.body, hashlib.sha256).hexdigest(),
                             "X-Service-Signature of %s" % event_id)
            delivery_ids.add(body["delivery_id"])
            for dup in copies[1:]:
                # a resend after the crash is the same delivery, byte for byte
                self.assertEqual(dup.body, first.body, "resent body of %s differs" % event_id)
                for h in ("x-service-delivery-id", "x-service-signature", "webhook-id"):
                    self.assertEqual(dup.headers.get(h), first.headers.get(h),
                                     "%s of the resend of %s" % (h, event_id))
        self.assertEqual(len(delivery_ids), EVENTS, "one delivery per event")
        dup_counts = collections.Counter(len(c) - 1 for c in by_event.values() if len(c) > 1)
        duplicates = len(deliveries) - EVENTS
        log("%d requests for %d events: %d duplicates (allowed; events by extra copies: %s)"
            % (len(deliveries), EVENTS, duplicates, dict(sorted(dup_counts.items()))))
        log("%d TLS connections used" % len({d.conn for d in deliveries}))
        if in_flight is not None:
            # only a delivery claimed when the process died can be sent twice
            self.assertLessEqual(len([c for c in by_event.values() if len(c) > 1]), in_flight,
                                 "more events duplicated than were in flight at the kill")

        # What the server recorded ------------------------------------------
        def settled():
            for state in ("pending", "retry_scheduled"):
                r = seed.get("/v2/webhooks/%s/deliveries?state=%s&limit=10" % (sub["id"], state))
                data, _ = assert_success(self, r)
                if data:
                    return None
            return True

        harness.wait_until(settled, CONVERGE_TIMEOUT, interval=0.25,
                           what="no pending or retry_scheduled delivery left")
        recorded = self.all_pages(seed, "/v2/webhooks/%s/deliveries" % sub["id"])
        self.assertEqual(len(recorded), EVENTS, "deliveries listed for the subscription")
        self.assertEqual({d["event_id"] for d in recorded}, expected)
        self.assertEqual({d["id"] for d in recorded}, delivery_ids)
        states = collections.Counter(d["state"] for d in recorded)
        self.assertEqual(states, {"delivered": EVENTS}, states)
        for d in recorded:
            self.assertEqual((d["subscription_id"], d["surface"], d["target"]),
                             (sub["id"], "v2", "primary"), d)
            self.assertGreaterEqual(d["attempt_count"], 1, d)
            self.assertIsNotNone(d["delivered_at"], d)
            self.assertIsNone(d["dead_lettered_at"], d)
            self.assertIsNone(d["next_attempt_at"], d)
        attempts = collections.Counter(d["attempt_count"] for d in recorded)
        log("attempt counts recorded: %s" % dict(sorted(attempts.items())))
        dead = self.all_pages(seed, "/v2/webhooks/dead-letters?subscription_id=" + sub["id"])
        self.assertEqual(dead, [])
        self.assertEqual(self.all_pages(seed, "/v2/webhooks/dead-letters"), [])
        month = events[0]["created_at"][:7]
        r = seed.get("/v2/webhooks/sla?month=" + month)
        sla, _ = assert_success(self, r)
        self.assertEqual((sla["events"], sla["delivered"], sla["delivered_ratio"],
                          sla["credit_due"]), (EVENTS, EVENTS, 1.0, False), sla)

        # Nothing more arrives once everything is delivered.
        n = len(self.rcv.received(PATH))
        time.sleep(1.0)
        self.assertEqual(len(self.rcv.received(PATH)), n, "deliveries after convergence")
        log("total %.1fs" % (time.monotonic() - t_start))


    def test_upgrade_turns_leases_into_claims(self):
        """A database left by the lease-based engine (migration 005) with a
        delivery leased mid-attempt: migration 006 turns the lease into a
        claim, the start counts it as possibly duplicated and sends it again,
        after giving the row its lane hash (0 for rows made before 006)."""
        path = "/upgrade"
        args = ["--allow-private-targets", "--trust-ca", self.ca.ca_pem]
        self.srv = srv = harness.Server(args)
        seed = srv.seed_portfolio("enterprise", 1)
        r = srv.request("POST", "/v2/webhooks", token=seed.token, portfolio=seed.id,
                        body={"url": self.rcv.url(path), "events": [EVENT_TYPE]})
        sub, _ = assert_success(self, r, 201)
        srv.ctl("event", "emit", "--portfolio", seed.id, "--type", EVENT_TYPE, "--count", "2")
        harness.wait_until(lambda: len(self.rcv.received(path)) >= 2 or None, 15.0,
                           what="the first two deliveries")
        harness.wait_until(lambda: len(assert_success(self, seed.get(
            "/v2/webhooks/%s/deliveries?state=delivered" % sub["id"]))[0]) == 2 or None, 15.0,
            what="both deliveries recorded as delivered")
        srv.stop()

        # Back to the 005 schema, with one delivery leased as a process killed
        # mid-attempt left it.
        # The same statements on both backends.
        leased = srv.db.value("SELECT id FROM webhook_deliveries ORDER BY seq LIMIT 1")
        lease_end = int(time.time() * 1000) + 60000
        p = srv.db.run("""
            DROP INDEX webhook_deliveries_due;
            ALTER TABLE webhook_deliveries DROP COLUMN lane_hash;
            ALTER TABLE webhook_deliveries ADD COLUMN leased_until BIGINT;
            CREATE INDEX webhook_deliveries_due ON webhook_deliveries (lane, next_attempt_at)
              WHERE next_attempt_at IS NOT NULL;
            DROP TABLE webhook_claims;
            ALTER TABLE webhook_deliveries DROP COLUMN traceparent;
            ALTER TABLE events DROP COLUMN traceparent;
            DROP TABLE nodes;
            DROP TABLE work_leases;
            DROP TABLE ratelimit_grants;
            DROP INDEX rate_decisions_pending;
            ALTER TABLE rate_decisions DROP COLUMN node;
            DELETE FROM schema_migrations WHERE version >= 6;
            UPDATE webhook_deliveries SET state = 'pending', attempt_count = 0,
              delivered_at = NULL, leased_until = %d, next_attempt_at = %d WHERE id = '%s';
            DELETE FROM webhook_attempts WHERE delivery_id = '%s';
        """ % (lease_end, lease_end, leased, leased))
        self.assertEqual(p.returncode, 0, p)

        srv.start()
        recovered = harness.wait_until(lambda: srv._find_event("webhook_recovered"), 10.0,
                                       what="a webhook_recovered log event at start")
        self.assertRegex(recovered.get("msg", ""), r"^1 deliveries were in flight")
        copies = harness.wait_until(
            lambda: [d for d in self.rcv.received(path)
                     if d.headers.get("x-service-delivery-id") == leased][1:] or None,
            15.0, what="the leased delivery sent again")
        self.assertEqual(len(copies), 1)
        d = harness.wait_until(lambda: (lambda r: r.body["data"] if r.status == 200 and
                                        r.body["data"]["state"] == "delivered" else None)(
            seed.get("/v2/webhooks/deliveries/" + leased)), 15.0,
            what="the leased delivery recorded as delivered")
        self.assertEqual(d["attempt_count"], 1)
        self.assertEqual(len(self.rcv.received(path)), 3, "only the leased one went again")


if __name__ == "__main__":
    unittest.main(verbosity=2)
