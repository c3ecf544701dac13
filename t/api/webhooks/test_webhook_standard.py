"""Deliveries verify with the real Standard Webhooks library (API-CONTRACT
§5: every delivery carries webhook-id, webhook-timestamp and
webhook-signature, keyed with the base64-decoded part of the secret after
"whsec_").  A real revopsd sends pings and `revopsctl event emit` events to
a real HTTPS receiver (t/api/receiver.py) for two v1 subscriptions (each
with its own secret) and two v2 subscriptions (the portfolio's secret, one
of them with a mirror); every captured delivery is then checked by
t/js/verify-standardwebhooks.mjs, which calls `new Webhook(secret).verify`
of the pinned `standardwebhooks` npm package (tools/npm, installed by
scripts/npm-tools.sh).  The same library must REJECT a tampered body, a
timestamp moved 10 minutes into the past (not re-signed), and the right
delivery checked with another subscription's secret."""

import base64
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import receiver  # noqa: E402
from harness import assert_success  # noqa: E402

ROOT = harness.ROOT
VERIFIER = os.path.join(ROOT, "t", "js", "verify-standardwebhooks.mjs")
PACKAGE = os.path.join(ROOT, "tools", "npm", "node_modules", "standardwebhooks", "package.json")
NODE = shutil.which("node")

V2_TYPE = "sso.user.provisioned"
V1_TYPE = "rate.suggested"
EMITTED = 3            # events of each surface
DELIVERY_TIMEOUT = 30.0


def captured(delivery, secret, name):
    """A delivery as the verifier reads it: {headers, body_b64, secret, name}."""
    return {"name": name, "headers": dict(delivery.headers),
            "body_b64": base64.b64encode(delivery.body).decode("ascii"), "secret": secret}


class StandardWebhooksTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if NODE is None:
            raise AssertionError("node is required (scripts/install-deps.sh)")
        if not os.path.exists(PACKAGE):
            raise AssertionError("standardwebhooks is not installed: run scripts/npm-tools.sh "
                                 "(make test does)")
        cls.tmp = tempfile.mkdtemp(prefix="revops-stdwh-")
        cls.ca = receiver.TestCA(cls.tmp)
        cls.rcv = receiver.Receiver(cls.ca, default_status=204)
        cls.srv = None
        try:
            cls.srv = harness.Server(["--allow-private-targets", "--trust-ca",
                                      cls.ca.ca_pem])
            cls._subscribe_and_deliver()
        except BaseException:
            cls._teardown()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._teardown()

    @classmethod
    def _teardown(cls):
        try:
            if cls.srv is not None:
                cls.srv.close()
        finally:
            cls.rcv.close()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def _post(cls, path, body=None, v2=True):
        return cls.srv.request("POST", path, body=body, token=cls.seed.token,
                               portfolio=cls.seed.id if v2 else None)

    @classmethod
    def _subscribe_and_deliver(cls):
        srv = cls.srv
        cls.seed = seed = srv.seed_portfolio("enterprise", 1)
        # path -> (subscription, secret, surface)
        cls.subs = {}

        def subscribe(surface, path, events, mirror=None):
            body = {"url": cls.rcv.url(path), "events": events}
            if mirror:
                body["mirror_url"] = cls.rcv.url(mirror)
            r = cls._post("/%s/webhooks" % surface, body, v2=surface == "v2")
            if r.status != 201:
                raise AssertionError("POST /%s/webhooks: %r" % (surface, r))
            return r.body["data"]

        v2a = subscribe("v2", "/v2a", [V2_TYPE], mirror="/v2a-mirror")
        v2b = subscribe("v2", "/v2b", [V2_TYPE, "sso.user.deprovisioned"])
        v1a = subscribe("v1", "/v1a", [V1_TYPE])
        v1b = subscribe("v1", "/v1b", [V1_TYPE])
        # v2: the portfolio's secret, returned by the first v2 creation only;
        # v1: each subscription's own, returned at its creation.
        cls.v2_secret = v2a["signing_secret"]
        if not isinstance(cls.v2_secret, str) or v2b["signing_secret"] is not None:
            raise AssertionError("v2 secrets: %r %r" % (v2a, v2b))
        cls.subs = {"/v2a": (v2a, cls.v2_secret, "v2"),
                    "/v2a-mirror": (v2a, cls.v2_secret, "v2"),
                    "/v2b": (v2b, cls.v2_secret, "v2"),
                    "/v1a": (v1a, v1a["signing_secret"], "v1"),
                    "/v1b": (v1b, v1b["signing_secret"], "v1")}

        # pings: one each (the mirrored subscription's goes to both URLs)
        cls.pings = {}
        for sub in (v2a, v2b, v1a, v1b):
            v2 = sub["surface"] == "v2"
            r = cls._post("/%s/webhooks/%s/ping" % (sub["surface"], sub["id"]), v2=v2)
            if r.status != 202:
                raise AssertionError("ping %s: %r" % (sub["id"], r))
            cls.pings[sub["id"]] = r.body["data"]
        # synthetic events of both surfaces
        srv.ctl("event", "emit", "--portfolio", seed.id, "--type", V2_TYPE,
                "--count", str(EMITTED))
        srv.ctl("event", "emit", "--portfolio", seed.id, "--surface", "v1", "--type", V1_TYPE,
                "--count", str(EMITTED), "--property", seed.properties[0]["id"])
        for path in cls.subs:
            cls.rcv.wait_for(1 + EMITTED, path=path, timeout=DELIVERY_TIMEOUT)
        time.sleep(0.3)  # anything beyond the expected count would show now

    # helpers ---------------------------------------------------------------

    def run_verifier(self, entries, secret=None):
        """Runs the Node verifier; returns (exit code, per-delivery results)."""
        fd, path = tempfile.mkstemp(suffix=".json", dir=self.tmp)
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f)
        argv = [NODE, VERIFIER, path] + ([secret] if secret else [])
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        self.assertTrue(lines, "verifier printed nothing: %s" % p.stderr)
        summary, results = lines[-1], lines[:-1]
        self.assertEqual(summary.get("total"), len(entries), p.stdout + p.stderr)
        self.assertEqual(len(results), len(entries), p.stdout + p.stderr)
        return p.returncode, results, p.stdout + p.stderr

    def all_captured(self):
        entries = []
        for path, (sub, secret, surface) in sorted(self.subs.items()):
            for i, d in enumerate(self.rcv.received(path)):
                entries.append(captured(d, secret, "%s#%d" % (path, i)))
        return entries

    def first(self, path, event_type):
        for d in self.rcv.received(path):
            if d.headers.get("x-service-event-type") == event_type:
                return d
        self.fail("no %s delivery at %s" % (event_type, path))

    # tests -----------------------------------------------------------------

    def test_received_what_was_sent(self):
        for path, (sub, secret, surface) in sorted(self.subs.items()):
            got = self.rcv.received(path)
            types = sorted(d.headers.get("x-service-event-type") for d in got)
            evtype = V2_TYPE if surface == "v2" else V1_TYPE
            self.assertEqual(types, sorted(["webhook.ping"] + [evtype] * EMITTED), path)
            for d in got:
                h = d.headers
                self.assertEqual(h.get("content-type", "").split(";")[0].strip(),
                                 "application/json", path)
                self.assertEqual(h.get("webhook-id"), h.get("x-service-delivery-id"), path)
                self.assertRegex(h.get("webhook-timestamp", ""), r"^[0-9]+$")
                self.assertLess(abs(int(h["webhook-timestamp"]) - time.time()), 120)
                self.assertRegex(h.get("webhook-signature", ""), r"^v1,[A-Za-z0-9+/]{43}=$")
                self.assertEqual(h.get("x-service-signature"),
                                 hmac.new(secret.encode(), d.body, hashlib.sha256).hexdigest(),
                                 path)
                body = json.loads(d.body)
                self.assertEqual(body["id"], h.get("x-service-event-id"))
                self.assertEqual(body["type"], h.get("x-service-event-type"))
                if path.endswith("-mirror"):
                    # the primary's body byte for byte: delivery_id is the primary's
                    self.assertNotEqual(body["delivery_id"], h.get("webhook-id"))
                else:
                    self.assertEqual(body["delivery_id"], h.get("webhook-id"))
                if surface == "v2":
                    self.assertEqual(h.get("x-service-portfolio"), self.seed.id)
                else:
                    self.assertNotIn("x-service-portfolio", h)
        # ping answers name the deliveries that arrived
        for sub_id, ping in self.pings.items():
            paths = [p for p, (s, _, _) in self.subs.items() if s["id"] == sub_id]
            ids = {d.headers.get("webhook-id") for p in paths for d in self.rcv.received(p)
                   if d.headers.get("x-service-event-type") == "webhook.ping"}
            self.assertEqual(ids, {x["id"] for x in ping["deliveries"]}, ping)

    def test_every_delivery_verifies_with_the_library(self):
        entries = self.all_captured()
        self.assertEqual(len(entries), 5 * (1 + EMITTED))
        rc, results, out = self.run_verifier(entries)
        bad = [r for r in results if not r["ok"]]
        self.assertEqual(bad, [], "rejected by standardwebhooks:\n" + out)
        self.assertEqual(rc, 0, out)
        for e, r in zip(entries, results):
            self.assertEqual(r["webhook_id"], e["headers"]["webhook-id"], r)
            self.assertEqual(r["payload_id"], e["headers"]["x-service-event-id"], r)

    def test_secret_on_the_command_line(self):
        # the verifier's plain form: one secret for a file of deliveries
        entries = [{k: v for k, v in e.items() if k != "secret"}
                   for e in self.all_captured() if e["name"].startswith("/v2")]
        self.assertEqual(len(entries), 3 * (1 + EMITTED))
        rc, results, out = self.run_verifier(entries, self.v2_secret)
        self.assertEqual(rc, 0, out)
        self.assertTrue(all(r["ok"] for r in results), out)

    def test_tampered_stale_and_wrong_key_are_rejected(self):
        v1_secret = self.subs["/v1a"][1]
        v1b_secret = self.subs["/v1b"][1]
        self.assertNotEqual(v1_secret, v1b_secret)
        self.assertNotEqual(v1_secret, self.v2_secret)
        cases = []   # (entry, expected error fragment or None for "verifies")
        for path, evtype in (("/v2a", V2_TYPE), ("/v1a", V1_TYPE), ("/v2a-mirror", V2_TYPE)):
            secret = self.subs[path][1]
            d = self.first(path, evtype)
            good = captured(d, secret, path + " untouched")
            cases.append((good, None))
            # the body changed in transit: one character added to the type
            body = json.loads(d.body)
            body["type"] = "x" + body["type"]
            tampered = json.dumps(body, separators=(",", ":")).encode()
            self.assertNotEqual(tampered, d.body)
            cases.append((dict(good, name=path + " tampered body",
                               body_b64=base64.b64encode(tampered).decode()),
                          "No matching signature"))
            whitespace = d.body + b" "
            cases.append((dict(good, name=path + " body + space",
                               body_b64=base64.b64encode(whitespace).decode()),
                          "No matching signature"))
            # a replay: timestamp moved 10 minutes back, signature left as is
            stale = dict(good["headers"])
            stale["webhook-timestamp"] = str(int(stale["webhook-timestamp"]) - 600)
            cases.append((dict(good, name=path + " timestamp -10 min", headers=stale),
                          "too old"))
            # and moved 10 minutes forward
            future = dict(good["headers"])
            future["webhook-timestamp"] = str(int(future["webhook-timestamp"]) + 600)
            cases.append((dict(good, name=path + " timestamp +10 min", headers=future),
                          "too new"))
            # a timestamp moved by one second breaks the signature (it is signed)
            shifted = dict(good["headers"])
            shifted["webhook-timestamp"] = str(int(shifted["webhook-timestamp"]) - 1)
            cases.append((dict(good, name=path + " timestamp -1 s", headers=shifted),
                          "No matching signature"))
            # another webhook-id (the message id is signed too)
            other_id = dict(good["headers"])
            other_id["webhook-id"] = other_id["webhook-id"] + "x"
            cases.append((dict(good, name=path + " webhook-id changed", headers=other_id),
                          "No matching signature"))
        # keys: a v1 delivery checked with another subscription's or the v2 secret
        d = self.first("/v1a", V1_TYPE)
        cases.append((captured(d, v1b_secret, "/v1a with /v1b's secret"), "No matching signature"))
        cases.append((captured(d, self.v2_secret, "/v1a with the v2 secret"),
                      "No matching signature"))
        d = self.first("/v2b", V2_TYPE)
        cases.append((captured(d, v1_secret, "/v2b with a v1 secret"), "No matching signature"))
        entries = [c[0] for c in cases]
        rc, results, out = self.run_verifier(entries)
        self.assertEqual(rc, 1, "the verifier must fail when any delivery is rejected\n" + out)
        for (entry, expect), r in zip(cases, results):
            with self.subTest(case=entry["name"]):
                if expect is None:
                    self.assertTrue(r["ok"], r)
                else:
                    self.assertFalse(r["ok"], "accepted by standardwebhooks: %r" % (r,))
                    self.assertIn("WebhookVerificationError", r["error"] or "", r)
                    self.assertIn(expect, r["error"] or "", r)


class VerifierVectorTest(unittest.TestCase):
    """The verifier and the library against a vector made here from the
    Standard Webhooks definition (no server): key = base64-decoded part
    after "whsec_", signed content "id.timestamp.body", header
    "v1,<base64>".  Guards the harness itself: a verifier that accepted
    everything, or read the body differently, would show here."""

    def setUp(self):
        if NODE is None or not os.path.exists(PACKAGE):
            raise AssertionError("node and tools/npm (scripts/npm-tools.sh) are required")
        self.tmp = tempfile.mkdtemp(prefix="revops-stdwh-vec-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    run_verifier = StandardWebhooksTest.run_verifier

    def test_hand_made_vector(self):
        key = os.urandom(32)
        secret = "whsec_" + base64.b64encode(key).decode()
        body = '{"id":"evt_1","type":"webhook.ping","data":{"city":"\u0141\u00f3d\u017a"}}'
        body = body.encode("utf-8")
        ts = str(int(time.time()))

        def sign(msg_id, t, b):
            mac = hmac.new(key, msg_id.encode() + b"." + t.encode() + b"." + b, hashlib.sha256)
            return "v1," + base64.b64encode(mac.digest()).decode()

        headers = {"webhook-id": "dlv_1", "webhook-timestamp": ts,
                   "webhook-signature": sign("dlv_1", ts, body)}
        good = {"name": "good", "headers": headers,
                "body_b64": base64.b64encode(body).decode()}
        several = dict(good, name="two signatures", headers=dict(
            headers, **{"webhook-signature": "v1,bm90IGl0 " + headers["webhook-signature"]}))
        old_ts = str(int(ts) - 600)
        cases = [(good, None), (several, None),
                 (dict(good, name="tampered", body_b64=base64.b64encode(body[:-1] + b" }")
                       .decode()), "No matching signature"),
                 (dict(good, name="old", headers=dict(headers, **{"webhook-timestamp": old_ts})),
                  "too old"),
                 (dict(good, name="old, re-signed", headers=dict(
                     headers, **{"webhook-timestamp": old_ts,
                                 "webhook-signature": sign("dlv_1", old_ts, body)})), "too old"),
                 (dict(good, name="other key", headers=dict(
                     headers, **{"webhook-signature": "v1," + base64.b64encode(
                         hmac.new(secret.encode(), b"dlv_1." + ts.encode() + b"." + body,
                                  hashlib.sha256).digest()).decode()})), "No matching signature")]
        rc, results, out = self.run_verifier([c[0] for c in cases], secret)
        self.assertEqual(rc, 1, out)
        for (entry, expect), r in zip(cases, results):
            with self.subTest(case=entry["name"]):
                if expect is None:
                    self.assertTrue(r["ok"], r)
                    self.assertEqual(r["payload_id"], "evt_1", r)
                else:
                    self.assertFalse(r["ok"], r)
                    self.assertIn(expect, r["error"], r)
        rc, results, out = self.run_verifier([good, several], secret)
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
