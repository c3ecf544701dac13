"""The webhook deliveries a real revopsd sends, bodies and headers as an
HTTPS receiver got them, validated with Ajv (pinned in tools/npm: JSON
Schema 2020-12, ajv-formats, strict mode) against the `webhooks` section of
the OpenAPI document the same server serves (t/js/validate-webhooks.mjs).
Issue 13.

Every event type the server emits today comes from its real source, each
caused by a request that carries a W3C `traceparent`, so the deliveries
carry one too:
- rate.decision.published and .reverted (POST /v2/rate-decisions and its
  revert, written to a pms-sim process);
- connection.d_edge.failed (a decision whose PMS write fails: pms-sim
  --fail-codes);
- sso.user.provisioned via SCIM (Okta- and Entra-style creates) and via
  the SAML 2.0 bearer grant (just in time), sso.user.deprovisioned by a
  SCIM deactivation (PATCH active false) and a SCIM DELETE;
- webhook.ping on v1, on v2 with a mirror (to both URLs) and without.
Every other documented type, whose module has no source yet, is emitted
synthetically with `revopsctl event emit` (its data is the test form
{"synthetic": true, "n": i}; the validator checks the rest of it).
Receivers: a v2 subscription to every v2 type with a mirror_url, a v2
subscription without a mirror, and a v1 subscription to every v1 type.

Any violation fails; so does a documented event type that no delivery
exercised (a new type needs a case here), and one the server knows that
the document does not list."""

import base64
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
import idp as idplib  # noqa: E402
import pmssim  # noqa: E402
import receiver  # noqa: E402
from harness import (SCIM_ENTERPRISE_URN, SCIM_USER_URN, rate_decision_body,  # noqa: E402
                     saml_grant, scim_patch_body,
                     scim_request)

ROOT = harness.ROOT
VALIDATOR = os.path.join(ROOT, "t", "js", "validate-webhooks.mjs")
AJV = os.path.join(ROOT, "tools", "npm", "node_modules", "ajv", "package.json")
NODE = shutil.which("node")

PUBLIC_URL = "http://sp.test"
ENTITY = "https://webhook-contract-idp.example/saml"
APPROVER = "approver@webhook-contract.example"
FAIL_CODE = "WHFAIL1"            # pms-sim refuses writes for this property code
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = "00-%s-00f067aa0ba902b7-01" % TRACE_ID
DELIVERY_TIMEOUT = 30.0

V2_TYPES = ["rate.decision.published", "rate.decision.reverted", "guest.thread.escalated",
            "reputation.score.dropped", "parity.breach.detected", "fiscal.batch.approved",
            "operations.task.escalated", "sso.user.provisioned", "sso.user.deprovisioned"]
V1_TYPES = ["rate.suggested", "rate.approved", "rate.rejected", "review.drafted",
            "review.published", "whatsapp.received", "whatsapp.sent", "invoice.issued",
            "invoice.corrected", "connection.d_edge.failed"]
# types with a real source today; every other one is emitted synthetically
REAL = {"rate.decision.published", "rate.decision.reverted", "connection.d_edge.failed",
        "sso.user.provisioned", "sso.user.deprovisioned", "webhook.ping"}


def captured(d, name, synthetic):
    return {"name": name, "headers": dict(d.headers), "synthetic": synthetic,
            "body_b64": base64.b64encode(d.body).decode("ascii")}


class WebhookContractTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if NODE is None or not os.path.exists(AJV):
            raise AssertionError("node and tools/npm (scripts/npm-tools.sh) are required")
        if not idplib.tools_available():
            raise AssertionError("openssl and xmlsec1 are required (scripts/install-deps.sh)")
        cls.tmp = tempfile.mkdtemp(prefix="revops-whcontract-")
        cls.ca = receiver.TestCA(cls.tmp)
        cls.rcv = receiver.Receiver(cls.ca, default_status=204)
        cls.idp = cls.sim = cls.srv = None
        try:
            cls.sim, cls.srv = pmssim.start_with_server(
                ["--fail-codes", FAIL_CODE],
                ["--allow-private-targets", "--trust-ca", cls.ca.ca_pem,
                 "--public-url", PUBLIC_URL])
            cls.idp = idplib.IdP(ENTITY, audience=PUBLIC_URL + "/saml/sp",
                                 recipient=PUBLIC_URL + "/oauth/token")
            cls._cause_every_event()
        except BaseException:
            cls._teardown()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._teardown()

    @classmethod
    def _teardown(cls):
        try:
            for x in (cls.srv, cls.sim):
                if x is not None:
                    x.close()
        finally:
            if cls.idp is not None:
                cls.idp.cleanup()
            cls.rcv.close()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    # set-up ----------------------------------------------------------------

    @classmethod
    def _call(cls, method, path, body=None, v2=True, traced=True):
        headers = {"traceparent": TRACEPARENT} if traced else {}
        return cls.srv.request(method, path, headers=headers, body=body, token=cls.seed.token,
                               portfolio=cls.seed.id if v2 else None)

    @classmethod
    def _expect(cls, r, status, what):
        if r.status != status:
            raise AssertionError("%s: wanted %d, got %r" % (what, status, r))
        return r.body

    @classmethod
    def _scim(cls, method, path, body=None):
        return scim_request(cls.srv, method, path, cls.scim_token, body,
                            headers={"traceparent": TRACEPARENT})

    @classmethod
    def _cause_every_event(cls):
        srv = cls.srv
        cls.seed = seed = srv.seed_portfolio("enterprise", 2)
        failing = srv.add_property(seed.id, code=FAIL_CODE)
        props = [p["id"] for p in seed.properties]
        srv.ctl("user", "create", "--portfolio", seed.id, "--user-name", APPROVER,
                "--roles", "revenue-approver")
        cls.scim_token = harness.scim_token_for(srv, seed.id)
        harness.idp_set(srv, seed.id, ENTITY, cls.idp.cert_path)

        # subscriptions: path -> surface
        def subscribe(surface, path, events, mirror=None):
            body = {"url": cls.rcv.url(path), "events": events}
            if mirror:
                body["mirror_url"] = cls.rcv.url(mirror)
            return cls._expect(cls._call("POST", "/%s/webhooks" % surface, body,
                                         v2=surface == "v2"), 201, "subscribe " + path)["data"]

        cls.paths = {"/v2": "v2", "/v2-mirror": "v2", "/v2-plain": "v2", "/v1": "v1"}
        v2 = subscribe("v2", "/v2", V2_TYPES, mirror="/v2-mirror")
        plain = subscribe("v2", "/v2-plain", ["sso.user.deprovisioned"])
        v1 = subscribe("v1", "/v1", V1_TYPES)

        # rate decisions: published, reverted; a failed PMS write
        r = cls._call("POST", "/v2/rate-decisions",
                      rate_decision_body(props, seed.ceiling["id"], APPROVER))
        decision = cls._expect(r, 201, "rate decision")["data"]
        r = cls._call("POST", "/v2/rate-decisions/%s/revert" % decision["id"],
                      {"reason": "Festival cancelled", "approver_saml_subject": APPROVER})
        cls._expect(r, 200, "revert")
        r = cls._call("POST", "/v2/rate-decisions",
                      rate_decision_body([props[0], failing["id"]], seed.ceiling["id"],
                                         APPROVER, date_from="2026-12-10",
                                         date_to="2026-12-11"))
        cls._expect(r, 502, "rate decision with a failing PMS")

        # SCIM: an Okta-style and an Entra-style create, a deactivation, a delete
        okta = cls._expect(cls._scim("POST", "/Users", {
            "schemas": [SCIM_USER_URN], "userName": "okta.user@webhook-contract.example",
            "name": {"givenName": "Okta", "familyName": "User"},
            "emails": [{"primary": True, "value": "okta.user@webhook-contract.example",
                        "type": "work"}],
            "displayName": "Okta User", "locale": "en-US", "externalId": "00u1okta",
            "groups": [], "active": True}), 201, "SCIM create (Okta)")
        entra = cls._expect(cls._scim("POST", "/Users", {
            "schemas": [SCIM_USER_URN, SCIM_ENTERPRISE_URN],
            "externalId": "0a6f1b3c-2d4e-4f50-8a9b-0c1d2e3f4a5b",
            "userName": "entra.user@webhook-contract.example", "active": "True",
            "displayName": "Entra User", "title": "Revenue manager",
            "emails": [{"primary": "True", "type": "work",
                        "value": "entra.user@webhook-contract.example"}],
            "name": {"formatted": "Entra User", "familyName": "User", "givenName": "Entra"},
            SCIM_ENTERPRISE_URN: {"employeeNumber": "701", "department": "Revenue"},
            "meta": {"resourceType": "User"}}), 201, "SCIM create (Entra)")
        r = cls._scim("PATCH", "/Users/" + okta["id"], scim_patch_body(
            {"op": "replace", "value": {"active": False}}))
        cls._expect(r, 204, "SCIM deactivation")
        cls._expect(cls._scim("DELETE", "/Users/" + entra["id"]), 204, "SCIM delete")
        # SAML 2.0 bearer grant for an unknown subject: provisioned just in time
        r = saml_grant(srv, cls.idp.assertion("jit.user@webhook-contract.example"))
        cls._expect(r, 200, "SAML grant")

        # pings: v2 with a mirror (both URLs), v2 without, v1
        for sub in (v2, plain, v1):
            cls._expect(cls._call("POST", "/%s/webhooks/%s/ping" % (sub["surface"], sub["id"]),
                                  v2=sub["surface"] == "v2"), 202, "ping " + sub["id"])

        # every other documented type, synthetically, on the surface it belongs to
        cls.synthetic = set()
        for surface, types in (("v2", V2_TYPES), ("v1", V1_TYPES)):
            for t in types:
                if t in REAL:
                    continue
                srv.ctl("event", "emit", "--portfolio", seed.id, "--surface", surface,
                        "--type", t, "--count", "1", "--property", props[0])
                cls.synthetic.add(t)

        # what each receiver URL must get
        v2_real = 1 + 1 + 3 + 2       # published, reverted, provisioned x3, deprovisioned x2
        cls.expected = {"/v2": v2_real + (len(V2_TYPES) - 4) + 1,
                        "/v2-mirror": v2_real + (len(V2_TYPES) - 4) + 1,
                        "/v2-plain": 2 + 1,
                        "/v1": 1 + (len(V1_TYPES) - 1) + 1}
        for path, n in cls.expected.items():
            cls.rcv.wait_for(n, path=path, timeout=DELIVERY_TIMEOUT)
        r = srv.request("GET", "/v2/openapi.json")
        cls._expect(r, 200, "GET /v2/openapi.json")
        cls.doc_path = os.path.join(cls.tmp, "openapi.json")
        with open(cls.doc_path, "wb") as f:
            f.write(r.raw)
        cls.doc = json.loads(r.raw)

    # helpers ---------------------------------------------------------------

    def all_captured(self):
        out = []
        for path in sorted(self.paths):
            for i, d in enumerate(self.rcv.received(path)):
                t = d.headers.get("x-service-event-type")
                out.append(captured(d, "%s#%d %s" % (path, i, t), t in self.synthetic))
        return out

    def run_validator(self, entries):
        path = os.path.join(self.tmp, "deliveries-%d.json" % time.monotonic_ns())
        with open(path, "w") as f:
            json.dump(entries, f)
        p = subprocess.run([NODE, VALIDATOR, self.doc_path, path], capture_output=True,
                           text=True, timeout=60)
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        self.assertTrue(lines, "the validator printed nothing: %s" % p.stderr)
        summary, results = lines[-1], lines[:-1]
        self.assertEqual(len(results), len(entries), p.stdout + p.stderr)
        return p.returncode, results, summary, p.stdout + p.stderr

    # tests -----------------------------------------------------------------

    def test_every_delivery_matches_the_document(self):
        entries = self.all_captured()
        self.assertEqual(len(entries), sum(self.expected.values()))
        rc, results, summary, out = self.run_validator(entries)
        bad = ["%s: %s" % (r["name"], "; ".join(r["errors"])) for r in results if not r["ok"]]
        self.assertEqual(bad, [], "deliveries that do not match the document:\n" + "\n".join(bad))
        self.assertEqual(rc, 0, out)
        self.assertEqual(summary["valid"], len(entries))

    def test_every_documented_type_was_exercised(self):
        rc, results, summary, out = self.run_validator(self.all_captured())
        documented = set(self.doc["webhooks"])
        self.assertEqual(documented, set(summary["documented"]))
        # the server's own list of types (revopsctl refuses unknown ones)
        # and the document's are the same, so neither has a type the other lacks
        self.assertEqual(documented, set(V2_TYPES) | set(V1_TYPES) | {"webhook.ping"},
                         "a new event type needs a case in this suite")
        seen = summary["seen"]
        missing = sorted(documented - set(seen))
        self.assertEqual(missing, [], "documented event types no valid delivery exercised")
        for t in V2_TYPES:
            self.assertGreater(seen[t]["v2"], 0, t)
        for t in V1_TYPES:
            self.assertGreater(seen[t]["v1"], 0, t)
        self.assertGreater(seen["webhook.ping"]["v1"], 0)
        self.assertGreater(seen["webhook.ping"]["v2"], 0)
        # real sources for the real types: no synthetic stand-in
        for r in results:
            if r["type"] in REAL:
                self.assertFalse(r["synthetic"], r)

    def test_real_variants(self):
        # both values of the enums and flags the real sources produce
        bodies = [json.loads(d.body) for d in self.rcv.received("/v2")]
        via = sorted(b["data"]["via"] for b in bodies if b["type"] == "sso.user.provisioned")
        self.assertEqual(via, ["saml_jit", "scim", "scim"])
        mirrors = sorted(json.loads(d.body)["data"]["mirror"] for p in ("/v2", "/v2-plain", "/v1")
                         for d in self.rcv.received(p) if d.headers.get(
                             "x-service-event-type") == "webhook.ping")
        self.assertEqual(mirrors, [False, False, True])
        # X-Service-Portfolio on v2 deliveries only (the v1 ping's entry
        # documents it as optional; the other v1 entries do not list it)
        for path, surface in self.paths.items():
            for d in self.rcv.received(path):
                self.assertEqual(d.headers.get("x-service-portfolio"),
                                 self.seed.id if surface == "v2" else None, d)

    def test_traceparent_propagated(self):
        # every delivery of an event a traced request caused carries the
        # trace (a new span per attempt); synthetic events have none
        for path in sorted(self.paths):
            for d in self.rcv.received(path):
                t = d.headers.get("x-service-event-type")
                tp = d.headers.get("traceparent")
                with self.subTest(path=path, type=t):
                    if t in self.synthetic:
                        self.assertIsNone(tp)
                    elif t == "sso.user.provisioned" and json.loads(d.body)["data"]["via"] == \
                            "saml_jit":
                        self.assertIsNone(tp)   # the SAML grant above sent no traceparent
                    else:
                        self.assertIsNotNone(tp, d)
                        self.assertEqual(tp.split("-")[1], TRACE_ID, tp)
                        self.assertNotEqual(tp, TRACEPARENT, "no new span id: %s" % tp)

    def test_validator_reports_violations(self):
        # The checks can fail: altered copies of real deliveries must be
        # refused, each for the reason made.
        def first(path, t):
            for d in self.rcv.received(path):
                if d.headers.get("x-service-event-type") == t:
                    return d
            self.fail("no %s at %s" % (t, path))

        def variant(d, name, body=None, headers=None, drop=(), synthetic=False):
            h = {k: v for k, v in d.headers.items() if k not in drop}
            h.update(headers or {})
            b = d.body if body is None else json.dumps(body, separators=(",", ":")).encode()
            return {"name": name, "headers": h, "synthetic": synthetic,
                    "body_b64": base64.b64encode(b).decode()}

        pub = first("/v2", "rate.decision.published")
        pb = json.loads(pub.body)
        ping1 = first("/v1", "webhook.ping")
        guest = first("/v2", "guest.thread.escalated")
        gb = json.loads(guest.body)
        cases = [
            (variant(pub, "untouched"), None),
            (variant(pub, "data member missing", dict(pb, data={
                k: v for k, v in pb["data"].items() if k != "brand_ceiling_id"})),
             "must have required property 'brand_ceiling_id'"),
            (variant(pub, "undocumented member", dict(pb, data=dict(pb["data"], extra=1))),
             "undocumented member"),
            (variant(pub, "undocumented envelope member", dict(pb, trace="x")),
             "undocumented member"),
            (variant(pub, "no properties", dict(pb, properties=[])), "fewer than 1 items"),
            (variant(pub, "bad created_at", dict(pb, created_at="yesterday")),
             'must match format "date-time"'),
            (variant(pub, "signature header missing", drop=("x-service-signature",)),
             "required header x-service-signature missing"),
            (variant(pub, "bad webhook-signature", headers={"webhook-signature": "v1,abc"}),
             "header webhook-signature must match pattern"),
            (variant(pub, "portfolio header missing", drop=("x-service-portfolio",)),
             "required header x-service-portfolio missing"),
            (variant(pub, "undocumented header", headers={"x-service-extra": "1"}),
             "header x-service-extra is sent but not documented"),
            (variant(pub, "bad traceparent", headers={"traceparent": "01-zz"}),
             "header traceparent must match pattern"),
            (variant(pub, "wrong content type", headers={"content-type": "text/plain"}),
             "Content-Type"),
            (variant(pub, "type header mismatch", headers={
                "x-service-event-type": "rate.decision.reverted"}), "must be equal to constant"),
            (variant(pub, "unknown type", headers={"x-service-event-type": "rate.decision.x"}),
             "has no entry in the document's webhooks"),
            (variant(ping1, "v1 ping with a portfolio_id", dict(json.loads(ping1.body),
                                                               portfolio_id=self.seed.id)),
             "undocumented member"),
            (variant(guest, "synthetic data changed", dict(gb, data={"synthetic": True}),
                     synthetic=True), "synthetic event data"),
            (variant(guest, "synthetic event, no properties", dict(gb, properties=[]),
                     synthetic=True), "fewer than 1 items"),
            (variant(guest, "synthetic taken for real", synthetic=False),
             "must have required property"),
        ]
        rc, results, summary, out = self.run_validator([c[0] for c in cases])
        self.assertEqual(rc, 1, out)
        self.assertEqual(summary["invalid"], len(cases) - 1, out)
        for (entry, expect), r in zip(cases, results):
            with self.subTest(case=entry["name"]):
                if expect is None:
                    self.assertTrue(r["ok"], r)
                else:
                    self.assertFalse(r["ok"], r)
                    self.assertIn(expect, "; ".join(r["errors"]), r)


if __name__ == "__main__":
    unittest.main(verbosity=2)
