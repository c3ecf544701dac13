"""Webhook delivery (API-CONTRACT §5, service spec "Events"), observed from
the receiving end: an HTTPS receiver (receiver.py, a throw-away CA the
server trusts with --trust-ca) on 127.0.0.1, allowed by
--allow-private-targets, records every attempt with its arrival time.

- headers, signatures (over the raw bytes) and the v1/v2 envelopes, checked
  against the outbox (`revopsctl event list`), and the delivery objects;
- the retry schedules of both surfaces at --time-scale 36000 (arrival times
  of every attempt against the offsets), dead letters, the manual v1 retry
  and the v2 replay, and their 30/90-day windows at --time-scale 1000000;
- pings, mirrors (byte-identical copies with their own fate) and the SLA
  report, which counts primaries only;
- throughput caps (real seconds, whatever the time scale), nothing dropped,
  and a slow receiver that does not hold up another URL;
- the SSRF guard at subscription time without --allow-private-targets, and
  again at send time (subscribed with the flag, restarted without it), and
  a real event source (SCIM user create).

Events are made with `revopsctl event emit` unless the test is about a
real source.
"""

import base64
import collections
import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import receiver  # noqa: E402
from harness import (DATETIME_RE, SCIM_USER_URN, assert_error, assert_scim_ok,  # noqa: E402
                     assert_success, ctl_events, scim_request, scim_token_for)

DAY = 86400
V2_OFFSETS = [60, 300, 900, 3600, 4 * 3600, 12 * 3600, DAY]
V1_OFFSETS = V2_OFFSETS + [2 * DAY, 3 * DAY]
RETRY_WINDOW_V1 = 30 * DAY
REPLAY_WINDOW_V2 = 90 * DAY

SCALE_SCHEDULE = 36000       # v2 schedule 2.4 s, v1 7.2 s
SCALE_WINDOW = 1000000       # 30 d = 2.592 s, 90 d = 7.776 s

DLV_RE = re.compile(r"^dlv_[0-9A-Za-z]+$")
EVT_RE = re.compile(r"^evt_[0-9A-Za-z]+$")
HEX64_RE = re.compile(r"^[0-9a-f]{64}$")

V1_KEYS = ["id", "type", "created_at", "delivery_id", "property_id", "data"]
V2_KEYS = ["id", "type", "created_at", "delivery_id", "portfolio_id", "properties", "data"]
SIGNED_HEADERS = {"x-service-signature", "x-service-event-id", "x-service-event-type",
                  "x-service-delivery-id", "webhook-id", "webhook-timestamp",
                  "webhook-signature"}
# what libcurl itself sends with a POST
TRANSPORT_HEADERS = {"host", "user-agent", "accept", "content-type", "content-length",
                     "connection", "expect"}
DELIVERY_KEYS = {"id", "subscription_id", "event_id", "event_type", "surface", "target", "url",
                 "state", "attempt_count", "next_attempt_at", "event_created_at", "created_at",
                 "delivered_at", "dead_lettered_at", "attempts"}
ATTEMPT_KEYS = {"n", "at", "duration_ms", "http_status", "error", "response_snippet"}
UNKNOWN_DLV = "dlv_01AAAAAAAAAAAAAAAAAAAAAAAA"

CA = None
_CA_DIR = None


def setUpModule():
    global CA, _CA_DIR
    _CA_DIR = tempfile.mkdtemp(prefix="revops-whd-ca-")
    CA = receiver.TestCA(_CA_DIR)


def tearDownModule():
    if _CA_DIR:
        shutil.rmtree(_CA_DIR, ignore_errors=True)


def server_args(scale, private=True):
    args = ["--trust-ca", CA.ca_pem, "--time-scale", str(scale)]
    if private:
        args = ["--allow-private-targets"] + args
    return args


# How late an attempt may start: 250 ms (500 ms on a sanitizer build, two
# to three times slower, on two cores shared with the parallel suite) plus 5 %.
LATE_S = 0.50 if harness.asan_build() else 0.25
# And on its way to the receiver (a TLS handshake, the receiver's thread).
TRANSIT_S = 0.25


def tolerance(expected):
    return LATE_S + 0.05 * expected


class DeliveryCase(unittest.TestCase):
    """Shared set-up and checks: one server (scale SCALE) and one receiver
    per class."""

    SCALE = SCALE_WINDOW

    @classmethod
    def setUpClass(cls):
        cls.srv = harness.Server(server_args(cls.SCALE))
        try:
            cls.rx = receiver.Receiver(CA)
        except BaseException:
            cls.srv.cleanup()
            raise
        cls.v2_secrets = {}

    @classmethod
    def tearDownClass(cls):
        try:
            cls.srv.close()
        finally:
            cls.rx.close()

    # set-up helpers ---------------------------------------------------------

    def seed(self, plan="group", nprops=2):
        return self.srv.seed_portfolio(plan, nprops)

    def subscribe(self, seed, surface, path, events, mirror_path=None):
        """Creates a subscription to rx.url(path); returns (id, secret)."""
        body = {"url": self.rx.url(path), "events": list(events)}
        if mirror_path is not None:
            body["mirror_url"] = self.rx.url(mirror_path)
        r = self.srv.request("POST", "/%s/webhooks" % surface, body=body, token=seed.token,
                             portfolio=seed.id)
        data, _ = assert_success(self, r, 201, v2=(surface == "v2"))
        self.assertEqual(data["surface"], surface)
        if surface == "v1":
            return data["id"], data["signing_secret"]
        if data.get("signing_secret"):
            self.v2_secrets[seed.id] = data["signing_secret"]
        self.assertIn(seed.id, self.v2_secrets, "no v2 secret known for " + seed.id)
        return data["id"], self.v2_secrets[seed.id]

    def emit(self, seed, type_, count=1, surface="v2", prop=None):
        args = ["event", "emit", "--portfolio", seed.id, "--type", type_,
                "--surface", surface, "--count", str(count)]
        if prop is not None:
            args += ["--property", prop]
        p = self.srv.ctl_raw(*args)
        self.assertEqual(p.returncode, 0, "revopsctl %s: %s %s" % (
            " ".join(args), p.stderr.decode(errors="replace"), p.stdout.decode(errors="replace")))
        out = p.stdout.decode().strip()
        try:
            val = json.loads(out)
        except ValueError:
            self.fail("event emit printed %r" % out)
        if isinstance(val, dict):
            self.assertIn(count, list(val.values()), "event emit printed %r" % out)
        else:
            self.assertEqual(val, count, "event emit printed %r" % out)

    def outbox(self, seed):
        return {e["id"]: e for e in ctl_events(self.srv, seed.id)}

    # API helpers ------------------------------------------------------------

    def delivery(self, seed, dlv_id):
        r = seed.get("/v2/webhooks/deliveries/" + dlv_id)
        data, _ = assert_success(self, r)
        self.check_delivery_object(data)
        self.assertEqual(data["id"], dlv_id)
        return data

    def wait_state(self, seed, dlv_id, state, attempts=None, timeout=10.0):
        """Polls the delivery until it is in `state` (and has `attempts`
        attempts when given); returns it (checked)."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            r = seed.get("/v2/webhooks/deliveries/" + dlv_id)
            last = r
            if r.status == 200 and isinstance(r.body, dict):
                d = r.body.get("data") or {}
                if d.get("state") == state and (attempts is None
                                                or d.get("attempt_count") == attempts):
                    self.check_delivery_object(d)
                    return d
            if time.monotonic() >= deadline:
                self.fail("delivery %s did not reach %s (attempts %r) in %.1fs; last %r" % (
                    dlv_id, state, attempts, timeout, last))
            time.sleep(0.05)

    def replay(self, seed, dlv_id):
        return self.srv.request("POST", "/v2/webhooks/deliveries/%s/replay" % dlv_id,
                                token=seed.token, portfolio=seed.id)

    def retry_v1(self, seed, dlv_id):
        # v1 calls do not need X-Service-Portfolio (design: like POST /v1/webhooks)
        return self.srv.request("POST", "/v1/webhooks/deliveries/%s/retry" % dlv_id,
                                token=seed.token)

    def dead_letters(self, seed, sub_id=None):
        path = "/v2/webhooks/dead-letters?limit=200"
        if sub_id:
            path += "&subscription_id=" + sub_id
        r = seed.get(path)
        data, _ = assert_success(self, r)
        self.assertIsInstance(data, list, r)
        for d in data:
            self.check_delivery_object(d)
            self.assertEqual(d["state"], "dead_lettered", d)
        return data

    def sla(self, seed, month):
        r = seed.get("/v2/webhooks/sla?month=" + month)
        data, _ = assert_success(self, r)
        return data

    # checks -----------------------------------------------------------------

    def check_delivery_object(self, d):
        self.assertIsInstance(d, dict)
        self.assertEqual(set(d), DELIVERY_KEYS, d)
        self.assertRegex(d["id"], DLV_RE)
        self.assertRegex(d["event_id"], EVT_RE)
        self.assertIn(d["surface"], ("v1", "v2"), d)
        self.assertIn(d["target"], ("primary", "mirror"), d)
        self.assertIn(d["state"], ("pending", "retry_scheduled", "delivered", "dead_lettered"), d)
        self.assertIs(type(d["attempt_count"]), int, d)
        self.assertIsInstance(d["attempts"], list, d)
        if d["state"] in ("delivered", "dead_lettered"):
            self.assertEqual(len(d["attempts"]), d["attempt_count"], d)
        for k in ("event_created_at", "created_at"):
            self.assertRegex(d[k], DATETIME_RE)
        for k in ("next_attempt_at", "delivered_at", "dead_lettered_at"):
            if d[k] is not None:
                self.assertRegex(d[k], DATETIME_RE)
        if d["state"] == "delivered":
            self.assertIsNotNone(d["delivered_at"], d)
            self.assertIsNone(d["next_attempt_at"], d)
        if d["state"] == "dead_lettered":
            self.assertIsNotNone(d["dead_lettered_at"], d)
            self.assertIsNone(d["next_attempt_at"], d)
        if d["state"] == "retry_scheduled":
            self.assertIsNotNone(d["next_attempt_at"], d)
        for i, a in enumerate(d["attempts"]):
            self.assertEqual(set(a), ATTEMPT_KEYS, a)
            self.assertEqual(a["n"], i + 1, d)
            self.assertRegex(a["at"], DATETIME_RE)
            self.assertIs(type(a["duration_ms"]), int, a)
            self.assertGreaterEqual(a["duration_ms"], 0, a)
            self.assertIsInstance(a["response_snippet"], str, a)
            self.assertIn(a["error"], (None, "http_status", "timeout", "connect", "tls",
                                       "resolve", "refused_target", "other"), a)
            if a["http_status"] is not None and 200 <= a["http_status"] < 300:
                self.assertIsNone(a["error"], a)
            elif a["http_status"] is not None:
                self.assertEqual(a["error"], "http_status", a)

    def check_headers(self, d, surface, portfolio_id=None):
        """Exactly the design's headers (plus what HTTP itself needs)."""
        names = [k.lower() for k, _ in d.header_list]
        self.assertEqual(len(names), len(set(names)), "a header repeated: %r" % d.header_list)
        want = set(SIGNED_HEADERS)
        if surface == "v2":
            want.add("x-service-portfolio")
        self.assertEqual(set(names) - TRANSPORT_HEADERS, want, d.header_list)
        h = d.headers
        self.assertEqual(h.get("content-type"), "application/json", d)
        self.assertEqual(h.get("content-length"), str(len(d.body)), d)
        self.assertEqual(h.get("host"), "127.0.0.1:%d" % self.rx.port, d)
        self.assertRegex(h["x-service-delivery-id"], DLV_RE)
        self.assertRegex(h["x-service-event-id"], EVT_RE)
        self.assertEqual(h["webhook-id"], h["x-service-delivery-id"], d)
        if surface == "v2":
            self.assertEqual(h["x-service-portfolio"], portfolio_id, d)

    def check_signatures(self, d, secret):
        """X-Service-Signature over the raw bytes (key: the secret string),
        and the Standard Webhooks signature of this attempt (fresh
        timestamp)."""
        body = d.body
        sig = d.headers.get("x-service-signature", "")
        self.assertRegex(sig, HEX64_RE)
        want = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
        self.assertTrue(hmac.compare_digest(sig, want),
                        "X-Service-Signature %s, computed %s over %r" % (sig, want, body))
        ts = d.headers.get("webhook-timestamp", "")
        self.assertRegex(ts, r"^[0-9]+$")
        self.assertLessEqual(abs(int(ts) - d.at), 2.5,
                             "webhook-timestamp %s not fresh (arrived %.3f)" % (ts, d.at))
        key = base64.b64decode(secret[len("whsec_"):])
        signed = ("%s.%s." % (d.headers["webhook-id"], ts)).encode("utf-8") + body
        want_sw = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        self.assertEqual(d.headers.get("webhook-signature"), want_sw, d)

    def check_envelope(self, d, surface):
        """Compact JSON, keys in the design's order, consistent with the
        headers; returns the parsed body (ordered)."""
        obj = d.json()
        self.assertEqual(list(obj), V1_KEYS if surface == "v1" else V2_KEYS, d.body)
        compact = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self.assertEqual(d.body, compact, "body is not compact JSON")
        self.assertRegex(obj["id"], EVT_RE)
        self.assertRegex(obj["delivery_id"], DLV_RE)
        self.assertRegex(obj["created_at"], DATETIME_RE)
        self.assertEqual(d.headers["x-service-event-id"], obj["id"])
        self.assertEqual(d.headers["x-service-event-type"], obj["type"])
        return obj

    def check_against_outbox(self, obj, ev, surface):
        self.assertEqual(obj["type"], ev["type"])
        self.assertEqual(obj["created_at"], ev["created_at"])
        self.assertEqual(obj["data"], ev["data"])
        self.assertEqual(ev["surface"], surface)
        if surface == "v1":
            self.assertEqual(obj["property_id"], ev["properties"][0] if ev["properties"] else None)
        else:
            self.assertEqual(obj["properties"], ev["properties"])

    def check_schedule(self, arrivals, dlv, offsets, scale, what):
        """Attempt k+1 reaches the receiver no earlier than offset[k-1]/scale
        after the schedule's origin (the first attempt's start, as the
        attempt log records it), and within the tolerance after it. The
        origin is the server's: measured from the first arrival instead, a
        first attempt slowed on its way (a TLS handshake on a loaded
        machine) made every later one look early."""
        t0 = harness.epoch(dlv["attempts"][0]["at"])
        for k, off in enumerate(offsets, start=1):
            want = off / scale
            got = arrivals[k].at - t0
            self.assertTrue(want - 0.01 <= got <= want + tolerance(want) + TRANSIT_S,
                            "%s: attempt %d at +%.3fs, expected +%.3fs (schedule %s)" % (
                                what, k + 1, got, want,
                                ["%.3f" % (a.at - t0) for a in arrivals]))

    def check_attempt_times(self, dlv, offsets, scale):
        """The same schedule from the delivery object's attempt log."""
        ats = [harness.epoch(a["at"]) for a in dlv["attempts"]]
        for k, off in enumerate(offsets, start=1):
            want = off / scale
            self.assertLessEqual(abs(ats[k] - ats[0] - want), tolerance(want),
                                 "attempt log %d at +%.3fs, expected +%.3fs" % (
                                     k + 1, ats[k] - ats[0], want))

    def assert_no_more(self, path, count, settle=0.4):
        time.sleep(settle)
        got = self.rx.received(path)
        self.assertEqual(len(got), count, "%s: %d deliveries, expected %d: %r" % (
            path, len(got), count, got[count:]))


# --------------------------------------------------------------------------

class DeliveryFormatTest(DeliveryCase):
    """Headers, signatures and envelopes of v1 and v2 deliveries; the
    delivery objects; which subscriptions get which events."""

    def test_v1_delivery(self):
        seed = self.seed("group", 2)
        prop = seed.properties[0]["id"]
        sub, secret = self.subscribe(seed, "v1", "/fmt-v1", ["rate.suggested", "review.drafted"])
        self.emit(seed, "rate.suggested", surface="v1", prop=prop)
        self.emit(seed, "review.drafted", surface="v1")
        got = self.rx.wait_for(2, "/fmt-v1")
        outbox = self.outbox(seed)
        by_type = {}
        for d in got:
            self.check_headers(d, "v1")
            self.check_signatures(d, secret)
            obj = self.check_envelope(d, "v1")
            self.assertEqual(obj["delivery_id"], d.headers["x-service-delivery-id"])
            self.assertIn(obj["id"], outbox)
            self.check_against_outbox(obj, outbox[obj["id"]], "v1")
            self.assertEqual(obj["data"], {"synthetic": True, "n": obj["data"]["n"]})
            by_type[obj["type"]] = (d, obj)
        self.assertEqual(set(by_type), {"rate.suggested", "review.drafted"})
        self.assertEqual(by_type["rate.suggested"][1]["property_id"], prop)
        self.assertIsNone(by_type["review.drafted"][1]["property_id"])
        for d, obj in by_type.values():
            dlv = self.wait_state(seed, obj["delivery_id"], "delivered", attempts=1)
            self.assertEqual(dlv["surface"], "v1")
            self.assertEqual(dlv["target"], "primary")
            self.assertEqual(dlv["subscription_id"], sub)
            self.assertEqual(dlv["url"], self.rx.url("/fmt-v1"))
            self.assertEqual(dlv["event_id"], obj["id"])
            self.assertEqual(dlv["event_type"], obj["type"])
            self.assertEqual(dlv["event_created_at"], obj["created_at"])
            self.assertEqual(dlv["attempts"][0]["http_status"], 204)
            self.assertIsNone(dlv["attempts"][0]["error"])
        self.assert_no_more("/fmt-v1", 2)

    def test_v2_delivery_and_delivery_list(self):
        seed = self.seed("group", 2)
        prop = seed.properties[1]["id"]
        sub, secret = self.subscribe(seed, "v2", "/fmt-v2",
                                     ["rate.decision.published", "parity.breach.detected"])
        self.emit(seed, "rate.decision.published", prop=prop)
        first = self.rx.wait_for(1, "/fmt-v2")[0]
        self.emit(seed, "parity.breach.detected")
        got = self.rx.wait_for(2, "/fmt-v2")
        self.assertIs(got[0], first)
        outbox = self.outbox(seed)
        objs = []
        for d in got:
            self.check_headers(d, "v2", seed.id)
            self.check_signatures(d, secret)
            obj = self.check_envelope(d, "v2")
            self.assertEqual(obj["delivery_id"], d.headers["x-service-delivery-id"])
            self.assertEqual(obj["portfolio_id"], seed.id)
            self.assertIn(obj["id"], outbox)
            self.check_against_outbox(obj, outbox[obj["id"]], "v2")
            objs.append(obj)
        self.assertEqual([o["type"] for o in objs],
                         ["rate.decision.published", "parity.breach.detected"])
        self.assertEqual(objs[0]["properties"], [prop])
        self.assertEqual(objs[1]["properties"], [])
        # the signature is the portfolio's v2 secret, also for later subscriptions
        sub2, secret2 = self.subscribe(seed, "v2", "/fmt-v2-b", ["parity.breach.detected"])
        self.assertEqual(secret2, secret)
        for o in objs:
            self.wait_state(seed, o["delivery_id"], "delivered", attempts=1)
        r = seed.get("/v2/webhooks/%s/deliveries" % sub)
        data, _ = assert_success(self, r)
        self.assertEqual([x["id"] for x in data], [o["delivery_id"] for o in reversed(objs)],
                         "deliveries not listed newest first")
        for x, o, d in zip(reversed(data), objs, got):
            self.check_delivery_object(x)
            self.assertEqual(x["state"], "delivered", x)
            self.assertEqual((x["surface"], x["target"], x["subscription_id"], x["url"]),
                             ("v2", "primary", sub, self.rx.url("/fmt-v2")), x)
            self.assertEqual((x["event_id"], x["event_type"], x["event_created_at"]),
                             (o["id"], o["type"], o["created_at"]), x)
            self.assertEqual(x["attempt_count"], 1, x)
            a = x["attempts"][0]
            self.assertEqual((a["n"], a["http_status"], a["error"]), (1, 204, None), x)
            self.assertLessEqual(abs(harness.epoch(a["at"]) - d.at), 1.0, (a, d.at))
            self.assertIsNone(x["dead_lettered_at"], x)
        # state filter
        data, _ = assert_success(self, seed.get("/v2/webhooks/%s/deliveries?state=delivered" % sub))
        self.assertEqual(len(data), 2, data)
        data, _ = assert_success(self, seed.get(
            "/v2/webhooks/%s/deliveries?state=dead_lettered" % sub))
        self.assertEqual(data, [])
        data, _ = assert_success(self, seed.get("/v2/webhooks/%s/deliveries?limit=1" % sub))
        self.assertEqual([x["id"] for x in data], [objs[1]["delivery_id"]])
        assert_error(self, seed.get("/v2/webhooks/wh_01AAAAAAAAAAAAAAAAAAAAAAAA/deliveries"),
                     404, "SVC-NOT-FOUND")
        assert_error(self, seed.get("/v2/webhooks/deliveries/" + UNKNOWN_DLV), 404,
                     "SVC-NOT-FOUND")
        # another portfolio cannot read them
        other = self.seed("group", 1)
        assert_error(self, other.get("/v2/webhooks/deliveries/" + objs[0]["delivery_id"]),
                     403, "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assert_no_more("/fmt-v2", 2)
        self.assert_no_more("/fmt-v2-b", 0, settle=0)

    def test_v1_deliveries_listed_on_v2_route(self):
        seed = self.seed("group", 1)
        sub, _ = self.subscribe(seed, "v1", "/fmt-v1-list", ["invoice.issued"])
        self.emit(seed, "invoice.issued", surface="v1", count=3)
        got = self.rx.wait_for(3, "/fmt-v1-list")
        ids = [d.headers["x-service-delivery-id"] for d in got]
        for i in ids:
            self.wait_state(seed, i, "delivered")
        data, _ = assert_success(self, seed.get("/v2/webhooks/%s/deliveries" % sub))
        self.assertEqual(sorted(x["id"] for x in data), sorted(ids))
        self.assertTrue(all(x["surface"] == "v1" for x in data), data)

    def test_fan_out(self):
        seed = self.seed("group", 1)
        other = self.seed("group", 1)
        # created before the subscription: never delivered to it
        self.emit(seed, "guest.thread.escalated")
        before = set(self.outbox(seed))
        sub, _ = self.subscribe(seed, "v2", "/fan", ["guest.thread.escalated"])
        self.subscribe(other, "v2", "/fan-other", ["reputation.score.dropped"])
        # not listed, other surface, other portfolio
        self.emit(seed, "reputation.score.dropped")
        self.emit(seed, "rate.suggested", surface="v1")
        self.emit(other, "guest.thread.escalated")
        self.emit(seed, "guest.thread.escalated")
        got = self.rx.wait_for(1, "/fan")
        after = [e for e in ctl_events(self.srv, seed.id)
                 if e["type"] == "guest.thread.escalated" and e["id"] not in before]
        self.assertEqual(len(after), 1, after)
        self.assertEqual(got[0].json()["id"], after[0]["id"])
        self.assert_no_more("/fan", 1, settle=0.5)
        self.assert_no_more("/fan-other", 0, settle=0)

    def test_emit_counts_from_stdin(self):
        # The load generator's mode: one batch per input line, each answered
        # at once; a bad line stops with an error and keeps earlier batches.
        seed = self.seed("group", 1)
        before = len(ctl_events(self.srv, seed.id))
        cmd = [harness.REVOPSCTL, "--data-dir", self.srv.data_dir] + self.srv.db.args() + ["event", "emit",
               "--portfolio", seed.id, "--type", "guest.thread.escalated", "--count", "-"]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=harness._child_env())
        try:
            p.stdin.write("3\n")
            p.stdin.flush()
            self.assertEqual(json.loads(p.stdout.readline()), {"emitted": 3})
            self.assertEqual(len(ctl_events(self.srv, seed.id)), before + 3)
            p.stdin.write("2\n")
            p.stdin.close()
            self.assertEqual(json.loads(p.stdout.readline()), {"emitted": 2})
            self.assertEqual(json.loads(p.stdout.read()), {"emitted": 5, "batches": 2})
            self.assertEqual(p.wait(10), 0)
        finally:
            p.kill()
            p.wait()
        self.assertEqual(len(ctl_events(self.srv, seed.id)), before + 5)
        bad = subprocess.run(cmd, input="1\nlots\n", capture_output=True, text=True,
                             timeout=harness.CTL_TIMEOUT, env=harness._child_env())
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("line 2 of standard input is not a count", bad.stderr)
        self.assertEqual(len(ctl_events(self.srv, seed.id)), before + 6)


class PingTest(DeliveryCase):
    def check_ping(self, d, sub_id, mirror, surface, secret, seed=None):
        self.check_headers(d, surface, seed.id if surface == "v2" else None)
        self.check_signatures(d, secret)
        obj = self.check_envelope(d, surface)
        self.assertEqual(obj["type"], "webhook.ping")
        self.assertEqual(d.headers["x-service-event-type"], "webhook.ping")
        self.assertEqual(obj["data"], {"subscription_id": sub_id, "mirror": mirror})
        if surface == "v1":
            self.assertIsNone(obj["property_id"])
        else:
            self.assertEqual(obj["portfolio_id"], seed.id)
            self.assertEqual(obj["properties"], [])
        return obj

    def test_v1_ping(self):
        seed = self.seed("group", 1)
        sub, secret = self.subscribe(seed, "v1", "/ping-v1", ["rate.suggested"])
        self.subscribe(seed, "v1", "/ping-v1-other", ["rate.suggested"])
        r = self.srv.request("POST", "/v1/webhooks/%s/ping" % sub, token=seed.token)
        data, _ = assert_success(self, r, 202, v2=False)
        self.assertEqual(set(data), {"event_id", "subscription_id", "deliveries"}, data)
        self.assertRegex(data["event_id"], EVT_RE)
        self.assertEqual(data["subscription_id"], sub)
        self.assertEqual(len(data["deliveries"]), 1, data)
        self.assertEqual(data["deliveries"][0]["target"], "primary")
        dlv_id = data["deliveries"][0]["id"]
        d = self.rx.wait_for(1, "/ping-v1")[0]
        obj = self.check_ping(d, sub, False, "v1", secret)
        self.assertEqual(obj["id"], data["event_id"])
        self.assertEqual(obj["delivery_id"], dlv_id)
        self.assertEqual(d.headers["x-service-delivery-id"], dlv_id)
        dlv = self.wait_state(seed, dlv_id, "delivered", attempts=1)
        self.assertEqual((dlv["event_type"], dlv["surface"]), ("webhook.ping", "v1"))
        # only the pinged subscription gets it
        self.assert_no_more("/ping-v1-other", 0)
        r = self.srv.request("POST", "/v1/webhooks/wh_01AAAAAAAAAAAAAAAAAAAAAAAA/ping",
                             token=seed.token)
        assert_error(self, r, 404, "SVC-NOT-FOUND")

    def test_v2_ping_with_mirror(self):
        seed = self.seed("enterprise", 1)
        sub, secret = self.subscribe(seed, "v2", "/ping-p", ["rate.decision.published"],
                                     mirror_path="/ping-m")
        r = self.srv.request("POST", "/v2/webhooks/%s/ping" % sub, token=seed.token,
                             portfolio=seed.id)
        data, _ = assert_success(self, r, 202)
        self.assertEqual(data["subscription_id"], sub)
        targets = {x["target"]: x["id"] for x in data["deliveries"]}
        self.assertEqual(len(data["deliveries"]), 2, data)
        self.assertEqual(set(targets), {"primary", "mirror"}, data)
        self.assertNotEqual(targets["primary"], targets["mirror"])
        p = self.rx.wait_for(1, "/ping-p")[0]
        m = self.rx.wait_for(1, "/ping-m")[0]
        obj = self.check_ping(p, sub, True, "v2", secret, seed)
        self.check_ping(m, sub, True, "v2", secret, seed)
        self.assertEqual(obj["id"], data["event_id"])
        self.assertEqual(m.body, p.body, "mirror copy differs from the primary")
        self.assertEqual(m.headers["x-service-signature"], p.headers["x-service-signature"])
        self.assertEqual(obj["delivery_id"], targets["primary"])
        self.assertEqual(p.headers["x-service-delivery-id"], targets["primary"])
        self.assertEqual(m.headers["x-service-delivery-id"], targets["mirror"])
        self.wait_state(seed, targets["primary"], "delivered", attempts=1)
        md = self.wait_state(seed, targets["mirror"], "delivered", attempts=1)
        self.assertEqual((md["target"], md["url"]), ("mirror", self.rx.url("/ping-m")))

    def test_v2_ping_without_mirror(self):
        seed = self.seed("group", 1)
        sub, secret = self.subscribe(seed, "v2", "/ping-g", ["rate.decision.published"])
        self.subscribe(seed, "v2", "/ping-g-other", ["rate.decision.published"])
        r = self.srv.request("POST", "/v2/webhooks/%s/ping" % sub, token=seed.token,
                             portfolio=seed.id)
        data, _ = assert_success(self, r, 202)
        self.assertEqual([x["target"] for x in data["deliveries"]], ["primary"])
        d = self.rx.wait_for(1, "/ping-g")[0]
        self.check_ping(d, sub, False, "v2", secret, seed)
        self.assert_no_more("/ping-g-other", 0)
        self.assert_no_more("/ping-g", 1, settle=0)

    def test_v2_rotation_signs_the_next_attempt(self):
        """The engine keeps a lane's key prepared between claims; a rotation
        must still sign the very next attempt with the new secret only."""
        seed = self.seed("group", 1)
        sub, old = self.subscribe(seed, "v2", "/rot", ["rate.decision.published"])
        ping = lambda: assert_success(self, self.srv.request(
            "POST", "/v2/webhooks/%s/ping" % sub, token=seed.token, portfolio=seed.id), 202)
        ping()
        self.check_signatures(self.rx.wait_for(1, "/rot")[0], old)
        r = self.srv.request("POST", "/v2/webhooks/signing-secret/rotate", token=seed.token,
                             portfolio=seed.id)
        new = assert_success(self, r, 200)[0]["signing_secret"]
        self.assertNotEqual(new, old)
        self.v2_secrets[seed.id] = new
        ping()
        d = self.rx.wait_for(2, "/rot")[1]
        self.check_signatures(d, new)
        stale = hmac.new(old.encode("utf-8"), d.body, hashlib.sha256).hexdigest()
        self.assertNotEqual(d.headers.get("x-service-signature"), stale)


class MirrorSlaTest(DeliveryCase):
    """Mirrors at --time-scale 1000000 (a v2 schedule is 86 ms), and the SLA."""

    def pairs(self, primary_path, mirror_path):
        """{event id: (primary copies, mirror copies)}"""
        out = collections.defaultdict(lambda: ([], []))
        for d in self.rx.received(primary_path):
            out[d.json()["id"]][0].append(d)
        for d in self.rx.received(mirror_path):
            out[d.json()["id"]][1].append(d)
        return out

    def check_mirror_copy(self, p, m, secret, seed):
        self.assertEqual(m.body, p.body, "mirror body differs from the primary's")
        self.assertEqual(m.headers["x-service-signature"], p.headers["x-service-signature"])
        self.check_headers(m, "v2", seed.id)
        self.check_signatures(m, secret)
        self.assertNotEqual(m.headers["x-service-delivery-id"], p.headers["x-service-delivery-id"])
        self.assertEqual(m.json()["delivery_id"], p.headers["x-service-delivery-id"])
        for h in ("x-service-event-id", "x-service-event-type", "x-service-portfolio"):
            self.assertEqual(m.headers[h], p.headers[h], h)

    def month_of(self, seed, dlv_id):
        return self.delivery(seed, dlv_id)["event_created_at"][:7]

    def test_mirror_down_primary_up(self):
        seed = self.seed("enterprise", 1)
        self.rx.set_behaviour("/m1m", status=500, body=b"siem down")
        sub, secret = self.subscribe(seed, "v2", "/m1p", ["rate.decision.published"],
                                     mirror_path="/m1m")
        self.subscribe(seed, "v1", "/m1-v1", ["rate.suggested"])
        self.rx.set_behaviour("/m1-v1", status=500)
        self.emit(seed, "rate.decision.published", count=3)
        self.emit(seed, "rate.suggested", surface="v1")      # a v1 failure: not in the SLA
        self.rx.wait_for(3, "/m1p")
        self.rx.wait_for(24, "/m1m")
        self.rx.wait_for(10, "/m1-v1")
        pairs = self.pairs("/m1p", "/m1m")
        self.assertEqual(len(pairs), 3)
        for ev, (ps, ms) in pairs.items():
            self.assertEqual(len(ps), 1, "primary of %s: %d copies" % (ev, len(ps)))
            self.assertEqual(len(ms), 8, "mirror of %s: %d copies" % (ev, len(ms)))
            p = ps[0]
            self.check_signatures(p, secret)
            for m in ms:
                self.check_mirror_copy(p, m, secret, seed)
            self.assertEqual(len({m.headers["x-service-delivery-id"] for m in ms}), 1)
            mid = ms[0].headers["x-service-delivery-id"]
            pid = p.headers["x-service-delivery-id"]
            md = self.wait_state(seed, mid, "dead_lettered", attempts=8)
            self.assertEqual((md["target"], md["url"], md["subscription_id"], md["event_id"]),
                             ("mirror", self.rx.url("/m1m"), sub, ev), md)
            self.assertEqual([a["http_status"] for a in md["attempts"]], [500] * 8)
            self.assertEqual(md["attempts"][0]["response_snippet"], "siem down")
            pd = self.delivery(seed, pid)
            self.assertEqual((pd["state"], pd["attempt_count"], pd["target"]),
                             ("delivered", 1, "primary"), pd)
        dl = {x["id"] for x in self.dead_letters(seed, sub)}
        self.assertEqual(dl, {ms[0].headers["x-service-delivery-id"] for ps, ms in pairs.values()})
        self.assert_no_more("/m1p", 3, settle=0.3)
        self.assert_no_more("/m1m", 24, settle=0)
        # SLA: three primaries, all delivered; the failed mirror copies, the
        # failed v1 delivery and a ping do not count
        v1dl = self.rx.received("/m1-v1")[0].headers["x-service-delivery-id"]
        self.wait_state(seed, v1dl, "dead_lettered", attempts=10)
        r = self.srv.request("POST", "/v2/webhooks/%s/ping" % sub, token=seed.token,
                             portfolio=seed.id)
        assert_success(self, r, 202)
        self.rx.wait_for(4, "/m1p")
        ping_primary = [x["id"] for x in r.body["data"]["deliveries"] if x["target"] == "primary"]
        self.wait_state(seed, ping_primary[0], "delivered")
        month = self.month_of(seed, pid)
        s = self.sla(seed, month)
        self.assertEqual(s, {"period": month, "events": 3, "delivered": 3, "delivered_ratio": 1.0,
                             "target": 0.9995, "credit_due": False}, s)

    def test_primary_down_mirror_up(self):
        seed = self.seed("enterprise", 1)
        self.rx.set_behaviour("/m2p", status=503, body=b"primary down")
        sub, secret = self.subscribe(seed, "v2", "/m2p", ["rate.decision.published"],
                                     mirror_path="/m2m")
        sub_b, _ = self.subscribe(seed, "v2", "/m2b", ["parity.breach.detected"])
        self.emit(seed, "rate.decision.published", count=3)
        self.emit(seed, "parity.breach.detected", count=3)
        self.rx.wait_for(24, "/m2p")
        self.rx.wait_for(3, "/m2m")
        self.rx.wait_for(3, "/m2b")
        pairs = self.pairs("/m2p", "/m2m")
        self.assertEqual(len(pairs), 3)
        for ev, (ps, ms) in pairs.items():
            self.assertEqual((len(ps), len(ms)), (8, 1), ev)
            for p in ps:
                self.check_mirror_copy(p, ms[0], secret, seed)
            pid = ps[0].headers["x-service-delivery-id"]
            pd = self.wait_state(seed, pid, "dead_lettered", attempts=8)
            self.assertEqual([a["http_status"] for a in pd["attempts"]], [503] * 8)
            md = self.wait_state(seed, ms[0].headers["x-service-delivery-id"], "delivered",
                                 attempts=1)
            self.assertEqual(md["target"], "mirror")
        for d in self.rx.received("/m2b"):
            self.wait_state(seed, d.headers["x-service-delivery-id"], "delivered", attempts=1)
        dl = {x["id"] for x in self.dead_letters(seed)}
        self.assertEqual(dl, {ps[0].headers["x-service-delivery-id"] for ps, ms in pairs.values()})
        self.assert_no_more("/m2m", 3, settle=0.3)
        self.assert_no_more("/m2p", 24, settle=0)
        # SLA: 6 primaries (3 dead, 3 delivered); the 3 delivered mirrors do not count
        month = self.month_of(seed, pid)
        s = self.sla(seed, month)
        self.assertEqual(s, {"period": month, "events": 6, "delivered": 3, "delivered_ratio": 0.5,
                             "target": 0.9995, "credit_due": True}, s)

    def test_sla_empty_month_and_bad_month(self):
        seed = self.seed("group", 1)
        s = self.sla(seed, "2001-02")
        self.assertEqual(s, {"period": "2001-02", "events": 0, "delivered": 0,
                             "delivered_ratio": 1.0, "target": 0.9995, "credit_due": False}, s)
        for bad in ("2026-13", "2026-00", "2026-1", "26-01", "2026-01-01", "abcd-ef", "",
                    "2026-1x", "%202026-01"):
            with self.subTest(month=bad):
                assert_error(self, seed.get("/v2/webhooks/sla?month=" + bad), 400,
                             "SVC-REQUEST-MALFORMED")


class RetryScheduleTest(DeliveryCase):
    """Full v1 (10 attempts over 72 h) and v2 (8 attempts over 24 h)
    schedules at --time-scale 36000: 24 h = 2.4 s, 72 h = 7.2 s; then the
    manual v1 retry and the v2 replay (windows of 72 s and 216 s here)."""

    SCALE = SCALE_SCHEDULE

    def test_schedules_dead_letters_retry_and_replay(self):
        scale = self.SCALE
        seed = self.seed("group", 1)
        self.rx.set_behaviour("/r-v2", status=500, body=b"v2 says no")
        self.rx.set_behaviour("/r-v1", status=500, body=b"v1 says no")
        sub2, secret2 = self.subscribe(seed, "v2", "/r-v2", ["operations.task.escalated"])
        sub1, secret1 = self.subscribe(seed, "v1", "/r-v1", ["whatsapp.received"])
        self.emit(seed, "operations.task.escalated")
        self.emit(seed, "whatsapp.received", surface="v1")

        # v2: after attempt 7 (+12 h) the delivery waits for +24 h: retry_scheduled,
        # and a replay is a conflict then
        got = self.rx.wait_for(7, "/r-v2", timeout=10)
        dlv2 = got[0].headers["x-service-delivery-id"]
        d = self.wait_state(seed, dlv2, "retry_scheduled", attempts=7, timeout=1.0)
        # due +24 h after the first attempt began, by the server's own times
        self.assertLessEqual(abs(harness.epoch(d["next_attempt_at"]) - harness.epoch(d["attempts"][0]["at"]) -
                                 DAY / scale), 0.002, d)
        assert_error(self, self.replay(seed, dlv2), 409, "SVC-CONFLICT")
        self.assertEqual(self.rx.count("/r-v2"), 7, "the refused replay made an attempt")

        got = self.rx.wait_for(8, "/r-v2", timeout=10)
        d = self.wait_state(seed, dlv2, "dead_lettered", attempts=8, timeout=5)
        self.check_schedule(got, d, V2_OFFSETS, scale, "v2")
        self.check_attempt_times(d, V2_OFFSETS, scale)
        self.check_same_delivery(got, dlv2, "v2", secret2, seed)
        self.assertEqual([a["http_status"] for a in d["attempts"]], [500] * 8)
        self.assertEqual({a["error"] for a in d["attempts"]}, {"http_status"})
        self.assertEqual({a["response_snippet"] for a in d["attempts"]}, {"v2 says no"})
        self.assertIn(dlv2, [x["id"] for x in self.dead_letters(seed)])
        self.assertEqual([x["id"] for x in self.dead_letters(seed, sub2)], [dlv2])
        self.assert_no_more("/r-v2", 8, settle=0.5)   # attempt 9 would be at once if any

        # v2 replay: one attempt each, never a new schedule
        r = self.replay(seed, dlv2)
        data, _ = assert_success(self, r, 202)
        self.assertEqual((data["id"], data["state"]), (dlv2, "pending"), data)
        self.rx.wait_for(9, "/r-v2")
        self.wait_state(seed, dlv2, "dead_lettered", attempts=9)
        self.assert_no_more("/r-v2", 9, settle=0.3)
        self.rx.set_behaviour("/r-v2", status=204)
        assert_success(self, self.replay(seed, dlv2), 202)
        self.rx.wait_for(10, "/r-v2")
        d = self.wait_state(seed, dlv2, "delivered", attempts=10)
        self.assertEqual(d["attempts"][-1]["http_status"], 204)
        self.assertNotIn(dlv2, [x["id"] for x in self.dead_letters(seed)])
        # replaying a delivered delivery sends it once more
        r = self.replay(seed, dlv2)
        data, _ = assert_success(self, r, 202)
        self.assertEqual(data["state"], "pending", data)
        got = self.rx.wait_for(11, "/r-v2")
        self.wait_state(seed, dlv2, "delivered", attempts=11)
        self.check_same_delivery(got, dlv2, "v2", secret2, seed)
        self.assert_no_more("/r-v2", 11, settle=0.2)
        assert_error(self, self.replay(seed, UNKNOWN_DLV), 404, "SVC-NOT-FOUND")
        other = self.seed("group", 1)
        assert_error(self, self.replay(other, dlv2), 403, "SVC-AUTH-INSUFFICIENT-ROLE")

        # v1: attempt 10 is due at +72 h; between attempts 9 and 10 a retry
        # is a conflict (not dead-lettered)
        got = self.rx.wait_for(9, "/r-v1", timeout=15)
        dlv1 = got[0].headers["x-service-delivery-id"]
        self.wait_state(seed, dlv1, "retry_scheduled", attempts=9, timeout=1.5)
        assert_error(self, self.retry_v1(seed, dlv1), 409, "SVC-CONFLICT")
        got = self.rx.wait_for(10, "/r-v1", timeout=10)
        d = self.wait_state(seed, dlv1, "dead_lettered", attempts=10, timeout=5)
        self.check_schedule(got, d, V1_OFFSETS, scale, "v1")
        self.check_attempt_times(d, V1_OFFSETS, scale)
        self.check_same_delivery(got, dlv1, "v1", secret1, seed)
        self.assertEqual([a["http_status"] for a in d["attempts"]], [500] * 10)
        self.assertEqual(d["surface"], "v1")
        self.assertIn(dlv1, [x["id"] for x in self.dead_letters(seed, sub1)])
        self.assert_no_more("/r-v1", 10, settle=0.5)
        # v1 deliveries are not replayed on the v2 route
        assert_error(self, self.replay(seed, dlv1), 404, "SVC-NOT-FOUND")

        # manual v1 retry: one attempt; failing -> dead-lettered again
        r = self.retry_v1(seed, dlv1)
        data, _ = assert_success(self, r, 202, v2=False)
        self.assertEqual((data["id"], data["state"]), (dlv1, "pending"), data)
        self.rx.wait_for(11, "/r-v1")
        self.wait_state(seed, dlv1, "dead_lettered", attempts=11)
        self.assert_no_more("/r-v1", 11, settle=0.3)
        # the receiver is back: delivered
        self.rx.set_behaviour("/r-v1", status=204)
        assert_success(self, self.retry_v1(seed, dlv1), 202, v2=False)
        got = self.rx.wait_for(12, "/r-v1")
        d = self.wait_state(seed, dlv1, "delivered", attempts=12)
        self.assertEqual(d["attempts"][-1]["http_status"], 204)
        self.check_same_delivery(got, dlv1, "v1", secret1, seed)
        # not dead-lettered any more: 409
        assert_error(self, self.retry_v1(seed, dlv1), 409, "SVC-CONFLICT")
        assert_error(self, self.retry_v1(seed, UNKNOWN_DLV), 404, "SVC-NOT-FOUND")
        self.assert_no_more("/r-v1", 12, settle=0.2)

    def check_same_delivery(self, got, dlv_id, surface, secret, seed):
        """Every attempt: same delivery id, same body bytes, signatures valid
        (the Standard Webhooks timestamp is fresh per attempt)."""
        for d in got:
            self.check_headers(d, surface, seed.id if surface == "v2" else None)
            self.assertEqual(d.headers["x-service-delivery-id"], dlv_id)
            self.assertEqual(d.body, got[0].body, "attempt bodies differ")
            self.assertEqual(d.headers["x-service-signature"],
                             got[0].headers["x-service-signature"])
            self.check_signatures(d, secret)
        self.assertEqual(self.check_envelope(got[0], surface)["delivery_id"], dlv_id)


class WindowTest(DeliveryCase):
    """The 30-day v1 retry and 90-day v2 replay windows at --time-scale
    1000000 (2.592 s and 7.776 s after the event)."""

    SCALE = SCALE_WINDOW

    def sleep_until(self, t):
        left = t - time.time()
        if left > 0:
            time.sleep(left)

    def test_retry_and_replay_windows(self):
        scale = self.SCALE
        seed = self.seed("group", 1)
        self.rx.set_behaviour("/w-v1", status=500)
        self.rx.set_behaviour("/w-v2dead", status=500)
        sub1, _ = self.subscribe(seed, "v1", "/w-v1", ["invoice.corrected"])
        self.subscribe(seed, "v2", "/w-v2dead", ["fiscal.batch.approved"])
        self.subscribe(seed, "v2", "/w-v2ok", ["sso.user.deprovisioned"])
        # the v2 events first: the v1 one's 2.6 s then hold only its own
        # ten attempts and the retry, not two more revopsctl runs
        self.emit(seed, "fiscal.batch.approved")
        self.emit(seed, "sso.user.deprovisioned")
        self.emit(seed, "invoice.corrected", surface="v1")
        v1 = self.rx.wait_for(10, "/w-v1")[0].headers["x-service-delivery-id"]
        d1 = self.wait_state(seed, v1, "dead_lettered", attempts=10)
        end_v1 = harness.epoch(d1["event_created_at"]) + RETRY_WINDOW_V1 / scale

        # inside the windows
        self.assertLess(time.time(), end_v1 - 0.5,
                        "too slow to test inside the 30-day window (scaled: 2.6 s)")
        assert_success(self, self.retry_v1(seed, v1), 202, v2=False)
        v2dead = self.rx.wait_for(8, "/w-v2dead")[0].headers["x-service-delivery-id"]
        v2ok = self.rx.wait_for(1, "/w-v2ok")[0].headers["x-service-delivery-id"]
        dd = self.wait_state(seed, v2dead, "dead_lettered", attempts=8)
        do = self.wait_state(seed, v2ok, "delivered", attempts=1)
        end_v2dead = harness.epoch(dd["event_created_at"]) + REPLAY_WINDOW_V2 / scale
        end_v2ok = harness.epoch(do["event_created_at"]) + REPLAY_WINDOW_V2 / scale
        self.rx.wait_for(11, "/w-v1")
        self.wait_state(seed, v1, "dead_lettered", attempts=11)
        assert_success(self, self.replay(seed, v2dead), 202)
        self.rx.wait_for(9, "/w-v2dead")
        self.wait_state(seed, v2dead, "dead_lettered", attempts=9)
        assert_success(self, self.replay(seed, v2ok), 202)
        self.rx.wait_for(2, "/w-v2ok")
        self.wait_state(seed, v2ok, "delivered", attempts=2)

        # past 30 days (counted from the event, not from the last attempt)
        self.sleep_until(end_v1 + 0.3)
        assert_error(self, self.retry_v1(seed, v1), 410, "SVC-WINDOW-EXPIRED")
        # v2 is still inside its 90 days
        self.assertLess(time.time(), end_v2ok - 1.0)
        assert_success(self, self.replay(seed, v2ok), 202)
        self.rx.wait_for(3, "/w-v2ok")
        self.wait_state(seed, v2ok, "delivered", attempts=3)

        # past 90 days: both a dead-lettered and a delivered one
        self.sleep_until(max(end_v2dead, end_v2ok) + 0.3)
        assert_error(self, self.replay(seed, v2dead), 410, "SVC-WINDOW-EXPIRED")
        assert_error(self, self.replay(seed, v2ok), 410, "SVC-WINDOW-EXPIRED")
        assert_error(self, self.retry_v1(seed, v1), 410, "SVC-WINDOW-EXPIRED")
        self.assert_no_more("/w-v1", 11, settle=0.3)
        self.assert_no_more("/w-v2dead", 9, settle=0)
        self.assert_no_more("/w-v2ok", 3, settle=0)
        self.assertEqual(self.delivery(seed, v1)["state"], "dead_lettered")
        self.assertEqual(self.delivery(seed, v2dead)["state"], "dead_lettered")
        self.assertEqual(self.delivery(seed, v2ok)["state"], "delivered")


class ThroughputTest(DeliveryCase):
    """Caps are real seconds even at --time-scale 1000000."""

    SCALE = SCALE_WINDOW

    def check_lane(self, seed, path, cap, n, type_, surface):
        got = self.rx.wait_for(n, path, timeout=n / cap + 10)
        time.sleep(0.3)
        got = self.rx.received(path)
        ids = [d.headers["x-service-delivery-id"] for d in got]
        self.assertEqual(len(ids), n, "%s: %d deliveries for %d events" % (path, len(ids), n))
        self.assertEqual(len(set(ids)), n, "%s: duplicate deliveries" % path)
        evs = {d.headers["x-service-event-id"] for d in got}
        emitted = {e["id"] for e in ctl_events(self.srv, seed.id)
                   if e["type"] == type_ and e["surface"] == surface}
        self.assertEqual(evs, emitted, "%s: delivered events differ from the emitted ones" % path)
        ns = sorted(d.json()["data"]["n"] for d in got)
        self.assertEqual(len(set(ns)), n)
        # the pace by the attempts' starts as the server logged them: the
        # receiver's arrival times add its own jitter on a loaded machine
        ts = sorted(harness.epoch(self.wait_state(seed, i, "delivered")["attempts"][0]["at"])
                    for i in ids)
        rate = (n - 1) / (ts[-1] - ts[0])
        # The cap is a ceiling: never more than 10% over it. The floor only
        # catches a pacing bug (a lane far below its cap); it is loose
        # because a loaded, shared machine slows the sender, not the cap.
        self.assertTrue(0.7 * cap <= rate <= 1.1 * cap,
                        "%s: %.2f deliveries/s, cap %d/s (at most 10%% over, at least 70%%)" % (
                            path, rate, cap))
        # evenly spaced: no cap+1 consecutive arrivals inside (much) less than 1 s
        worst = min(ts[i + cap] - ts[i] for i in range(len(ts) - cap))
        # (0.8, not 1.0: a start is logged a little after the slot was taken)
        self.assertGreaterEqual(worst, 0.8, "%s: %d deliveries within %.3fs (cap %d/s)" % (
            path, cap + 1, worst, cap))
        return rate

    def test_caps_per_plan_and_surface(self):
        cs = self.seed("chain_starter", 1)
        grp = self.seed("group", 1)
        v1pf = self.seed("group", 1)
        self.subscribe(cs, "v2", "/tp-cs", ["rate.decision.published"])
        self.subscribe(grp, "v2", "/tp-grp", ["rate.decision.published"])
        self.subscribe(v1pf, "v1", "/tp-v1", ["rate.approved"])
        self.emit(cs, "rate.decision.published", count=30)
        self.emit(grp, "rate.decision.published", count=120)
        self.emit(v1pf, "rate.approved", surface="v1", count=120)
        for seed, path, cap, n, type_, surface in (
                (cs, "/tp-cs", 5, 30, "rate.decision.published", "v2"),
                (grp, "/tp-grp", 20, 120, "rate.decision.published", "v2"),
                (v1pf, "/tp-v1", 20, 120, "rate.approved", "v1")):
            with self.subTest(lane=path, cap=cap):
                self.check_lane(seed, path, cap, n, type_, surface)

    def test_slow_url_does_not_hold_up_another(self):
        seed = self.seed("group", 1)
        self.rx.set_behaviour("/slow", delay=2.0)
        self.subscribe(seed, "v2", "/slow", ["guest.thread.escalated"])
        self.subscribe(seed, "v2", "/fast", ["guest.thread.escalated"])
        self.emit(seed, "guest.thread.escalated", count=16)
        fast = self.rx.wait_for(16, "/fast", timeout=10)
        slow_first = self.rx.wait_for(1, "/slow", timeout=5)[0].at
        last_fast = max(d.at for d in fast)
        # 16 events at 20/s take 0.75 s; a slow answer takes 2 s (timed by
        # the receiver's clock: the emit's own time does not count)
        spread = last_fast - min(d.at for d in fast)
        self.assertLess(spread, 1.9, "the fast URL's deliveries spread over %.2fs" % spread)
        self.assertLess(last_fast, slow_first + 1.9,
                        "fast URL waited for the slow one's answers")
        slow = self.rx.wait_for(16, "/slow", timeout=15)
        ts = sorted(d.at for d in slow)
        # at most 8 in flight on the slow URL: the 9th starts after an answer
        self.assertGreaterEqual(ts[8] - ts[0], 1.9, "more than 8 in flight on one URL: %s" % (
            ["%.2f" % (t - ts[0]) for t in ts]))
        for d in slow[:3] + fast[:3]:
            self.wait_state(seed, d.headers["x-service-delivery-id"], "delivered", attempts=1)
        self.assert_no_more("/slow", 16, settle=0.3)
        self.assertEqual(len({d.headers["x-service-delivery-id"] for d in slow}), 16)
        self.assert_no_more("/fast", 16, settle=0)


class ScimEventTest(DeliveryCase):
    def test_scim_user_create_is_delivered(self):
        seed = self.seed("group", 1)
        tok = scim_token_for(self.srv, seed.id)
        sub, secret = self.subscribe(seed, "v2", "/scim", ["sso.user.provisioned"])
        u = assert_scim_ok(self, scim_request(self.srv, "POST", "/Users", tok, {
            "schemas": [SCIM_USER_URN], "userName": "hook-me@x.example"}), 201)
        d = self.rx.wait_for(1, "/scim")[0]
        self.check_headers(d, "v2", seed.id)
        self.check_signatures(d, secret)
        obj = self.check_envelope(d, "v2")
        self.assertEqual(obj["type"], "sso.user.provisioned")
        self.assertEqual(obj["portfolio_id"], seed.id)
        self.assertEqual(obj["properties"], [])
        self.assertEqual(obj["data"], {"user_id": u["id"], "user_name": "hook-me@x.example",
                                       "via": "scim"})
        ev = self.outbox(seed)[obj["id"]]
        self.check_against_outbox(obj, ev, "v2")
        self.wait_state(seed, obj["delivery_id"], "delivered", attempts=1)
        # the deprovisioning is not subscribed to
        self.assertEqual(scim_request(self.srv, "DELETE", "/Users/" + u["id"], tok).status, 204)
        self.assert_no_more("/scim", 1)


class FirstSubscriptionTest(DeliveryCase):
    """A server where no subscription exists yet: the fan-out passes over
    the outbox reading only the events' numbers (at most every 100 ms, a
    full batch at once); the first subscription then gets the event made
    after it and none of the backlog before it."""

    def test_first_subscription_after_a_backlog(self):
        seed = self.seed("group", 1)
        # more than two of the fan-out's batches (500 events each)
        self.emit(seed, "guest.thread.escalated", count=1200)
        before = set(self.outbox(seed))
        self.assertEqual(len(before), 1200)
        self.subscribe(seed, "v2", "/first", ["guest.thread.escalated"])
        self.emit(seed, "guest.thread.escalated")
        got = self.rx.wait_for(1, "/first")
        after = [e for e in ctl_events(self.srv, seed.id) if e["id"] not in before]
        self.assertEqual(len(after), 1, after)
        self.assertEqual(got[0].json()["id"], after[0]["id"])
        self.assert_no_more("/first", 1, settle=0.5)


class SsrfAtSubscriptionTest(unittest.TestCase):
    """Without --allow-private-targets the receiver cannot even be
    subscribed to; and a target that became forbidden after subscribing is
    refused again at send time (the check runs before every attempt)."""

    def test_refused_at_send_time(self):
        # Subscribe while private targets are allowed, then restart the same
        # data without the flag: the next attempt must not connect.
        srv = harness.Server(server_args(SCALE_WINDOW, private=True))
        rx = receiver.Receiver(CA)
        try:
            seed = srv.seed_portfolio("enterprise", 1)
            r = srv.request("POST", "/v2/webhooks", body={
                "url": rx.url("/late"), "events": ["rate.decision.published"]},
                token=seed.token, portfolio=seed.id)
            assert_success(self, r, 201)
            sub = r.body["data"]["id"]
            srv.restart(server_args(SCALE_WINDOW, private=False))
            srv.ctl("event", "emit", "--portfolio", seed.id, "--type",
                    "rate.decision.published")

            def attempted():
                page = seed.get("/v2/webhooks/%s/deliveries" % sub)
                if page.status != 200 or not page.body["data"]:
                    return None
                d = page.body["data"][0]
                return d if d["attempts"] else None

            d = harness.wait_until(attempted, 10, what="a recorded attempt")
            a = d["attempts"][0]
            self.assertEqual(a["error"], "refused_target", d)
            self.assertIsNone(a["http_status"], d)
            self.assertEqual(d["state"], "retry_scheduled", d)
            self.assertEqual(rx.received(), [], "the forbidden target was reached")
        finally:
            try:
                srv.close()
            finally:
                rx.close()

    def test_loopback_refused(self):
        srv = harness.Server(server_args(SCALE_WINDOW, private=False))
        rx = receiver.Receiver(CA)
        try:
            seed = srv.seed_portfolio("enterprise", 1)
            cases = [
                ("v2", {"url": rx.url("/x"), "events": ["rate.decision.published"]}, "url"),
                ("v2", {"url": "https://localhost:%d/x" % rx.port,
                        "events": ["rate.decision.published"]}, "url"),
                ("v2", {"url": "https://93.184.216.34/x", "mirror_url": rx.url("/m"),
                        "events": ["rate.decision.published"]}, "mirror_url"),
                ("v1", {"url": rx.url("/x"), "events": ["rate.suggested"]}, "url"),
            ]
            for surface, body, field in cases:
                with self.subTest(surface=surface, body=body):
                    r = srv.request("POST", "/%s/webhooks" % surface, body=body,
                                    token=seed.token, portfolio=seed.id)
                    assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
                    self.assertIn(field, [x.get("field") for x in r.body["error"]["details"]], r)
            r = seed.get("/v2/webhooks")
            self.assertEqual(r.body["data"], [], r)
            self.assertEqual(rx.received(), [])
        finally:
            try:
                srv.close()
            finally:
                rx.close()


if __name__ == "__main__":
    unittest.main()
