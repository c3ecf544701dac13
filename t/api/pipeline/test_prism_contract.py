"""Contract test: Stoplight Prism (tools/npm, @stoplight/prism-cli) in proxy
mode in front of the live server, driven over every operation of the
OpenAPI document that server serves (issue 13).

    prism proxy <served openapi.json> http://127.0.0.1:<revopsd> --errors=false --cors=false

`--errors=false` forwards every request and returns the server's answer
unchanged (Prism re-serialises JSON bodies, nothing else), reporting what
does not match the document in the `sl-violations` response header;
request validation is on (Prism's default), response validation always is;
`--cors=false` keeps Prism from adding CORS headers or answering OPTIONS.
The test fails on any response-side violation, and on any request-side
violation of a request the server accepts (a deliberately bad request may
carry one; the server's error is asserted instead). Every call records the
operation it reached; the last test asserts that the set of operations
covered equals the document's, so a new operation without a contract case
fails, and prints each operation with the statuses seen.

Set-up: revopsd --demo (two portfolios, approvers, the demo SAML IdP) with
pms-sim behind it as the PMS, as the booking engine (LOD01 of "Demo Hotels
Group" fails every write and every push, for the 502s) and as the review
platform (its first reply call answers 503, so a published reply goes
through a retry), a webhook receiver (HTTPS, trusted with --trust-ca), and
--time-scale 100000 so that v1 delivery schedules (72 h) end in 2.6 s and
the v1 retry window (30 days) in 26 s, and an operations task of the
platinum tier (15 minutes to acknowledge, 15 more to the next level)
escalates within milliseconds: the operations tasks' case sets an on-call
rota of two levels and an ops-manager user (revopsctl), and also checks the
real operations.task.escalated deliveries against the document's webhooks
entry (t/js/validate-webhooks.mjs), which Prism does not look at. wa-sim
(--whatsapp-api-url) plays Meta's WhatsApp Cloud API: the guest-messaging
case gives WAW01 a WhatsApp channel (revopsctl whatsapp set) and a keyword
(revopsctl guest-keywords set); a template answer is sent to wa-sim, whose
`delivered` status comes back through the webhook, and the real
whatsapp.received, whatsapp.sent and guest.thread.escalated deliveries are
checked against the document the same way.

What Prism 5.14.2 cannot carry, and what is done instead:
- HEAD: the proxy parses an upstream JSON answer's body even for HEAD and
  fails on the empty body (500 FetchError). Every GET operation's HEAD is
  sent to revopsd directly and compared with the GET (status, headers).
- Methods the document does not list (the 405s) and unknown routes (404):
  Prism logs "Selected route not found" (a request warning) and validates
  nothing. Every path is probed with a method it does not document: the
  status, the error body and `Allow` (exactly the documented methods, HEAD
  after GET) are checked here.
- Malformed JSON: Prism answers 400 `invalid_json` itself without
  forwarding, so SVC-REQUEST-MALFORMED for a body is not sent through it.
- Raw request bodies: Prism parses a JSON request body and forwards
  JSON.stringify of it, not the bytes it received. Meta signs the exact
  bytes of its notifications (X-Hub-Signature-256) and serialises them with
  `\\u00eb` and `\\/` escapes, which re-serialising undoes, so such a body,
  correctly signed, is 401 through Prism (asserted, as the reason) and is
  sent to revopsd directly (by wa-sim, and once more here). Through Prism go
  the signature refusals, the shape refusals and a success whose bytes are
  already what JSON.stringify writes (compact, ASCII), so they arrive intact.
A canary Prism on a deliberately wrong one-path document proves that
response drift does show up in `sl-violations` with these options.
"""

import base64
import datetime
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import idp as idplib  # noqa: E402
import openapi_served as oa  # noqa: E402
import pmssim  # noqa: E402
import receiver  # noqa: E402
import wasim  # noqa: E402
from harness import (SCIM_CT, SCIM_GROUP_URN, SCIM_USER_URN, SAML_GRANT,  # noqa: E402
                     basic_auth, ctl_user, scim_patch_body)

SCALE = 100000
FAIL_CODE = "LOD01"  # Demo Hotels Group: pms-sim answers 500 for it
METHODS = ("get", "put", "post", "delete", "patch")
PROBE_ORDER = ("PATCH", "PUT", "DELETE", "POST", "GET")
UNKNOWN = {"rd": "rd_01AAAAAAAAAAAAAAAAAAAAAAAA", "wh": "wh_01AAAAAAAAAAAAAAAAAAAAAAAA",
           "dlv": "dlv_01AAAAAAAAAAAAAAAAAAAAAAAA", "usr": "usr_01AAAAAAAAAAAAAAAAAAAAAAAA",
           "grp": "grp_01AAAAAAAAAAAAAAAAAAAAAAAA", "rs": "rs_01AAAAAAAAAAAAAAAAAAAAAAAA",
           "pa": "pa_01AAAAAAAAAAAAAAAAAAAAAAAA", "rv": "rv_01AAAAAAAAAAAAAAAAAAAAAAAA",
           "ra": "ra_01AAAAAAAAAAAAAAAAAAAAAAAA", "ot": "ot_01AAAAAAAAAAAAAAAAAAAAAAAA",
           "gt": "gt_01AAAAAAAAAAAAAAAAAAAAAAAA"}
# Headers Prism or the transport set, not the server's answer to compare.
TRANSPORT = {"date", "connection", "keep-alive", "content-length", "sl-violations",
             "x-request-id", "x-service-ratelimit-remaining", "x-service-ratelimit-reset",
             "ratelimit", "transfer-encoding"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
VALIDATE_WEBHOOKS = os.path.join(harness.ROOT, "t", "js", "validate-webhooks.mjs")
# WAW01's WhatsApp channel (the Meta app as wa-sim plays it)
WA_PNID = "106540352242922"
WA_TOKEN = "EAAG-contract-access-token"
WA_SECRET = "contract-app-secret"
WA_VERIFY = "contract-verify-token"

CANARY_DOC = {
    "openapi": "3.1.0",
    "info": {"title": "canary: /healthz documented wrongly on purpose", "version": "1"},
    "paths": {"/healthz": {"get": {"responses": {"200": {
        "description": "wrong on purpose",
        "content": {"application/json": {"schema": {
            "type": "object", "required": ["status"],
            "properties": {"status": {"const": "not-what-the-server-says"}}}}}}}}}},
}


DIALECT = "https://json-schema.org/draft/2020-12/schema"
CLOSED_SUFFIX = "__closed"


def closed_copy(doc):
    """The document as Prism checks it: every object schema closed with
    `unevaluatedProperties: false`, so that a member the server sends (or
    accepts) which the document does not name is drift too; and
    `jsonSchemaDialect` set to JSON Schema 2020-12, without which Prism
    validates with draft-07 and ignores `unevaluatedProperties`. A schema
    used as an `allOf` branch stays open (closing it would refuse the other
    branches' members); its direct uses get a closed alias instead. The
    document itself is unchanged: it keeps objects open."""
    d = json.loads(json.dumps(doc))
    d["jsonSchemaDialect"] = DIALECT
    schemas = d["components"]["schemas"]
    prefix = "#/components/schemas/"
    branches = set()

    def find_branches(o):
        if isinstance(o, dict):
            for b in o.get("allOf", ()):
                if isinstance(b, dict) and b.get("$ref", "").startswith(prefix):
                    branches.add(b["$ref"][len(prefix):])
            for v in o.values():
                find_branches(v)
        elif isinstance(o, list):
            for v in o:
                find_branches(v)
    find_branches(d)

    def close(sc, branch=False):
        if not isinstance(sc, dict):
            return
        ref = sc.get("$ref", "")
        if ref.startswith(prefix) and ref[len(prefix):] in branches and not branch:
            sc["$ref"] = ref + CLOSED_SUFFIX
            return
        if ("properties" in sc or "allOf" in sc) and not branch and \
                "additionalProperties" not in sc and "unevaluatedProperties" not in sc:
            sc["unevaluatedProperties"] = False
        for k in ("properties", "patternProperties"):
            for v in (sc.get(k) or {}).values():
                close(v)
        for k in ("items", "additionalProperties", "not"):
            close(sc.get(k))
        for k in ("oneOf", "anyOf"):
            for v in sc.get(k, ()):
                close(v)
        for v in sc.get("allOf", ()):
            close(v, branch=True)

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "schema":
                    close(v)
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    for name in list(schemas):
        close(schemas[name], branch=name in branches)
    walk(d["paths"])
    walk({k: v for k, v in d["components"].items() if k != "schemas"})
    for name in branches:
        schemas[name + CLOSED_SUFFIX] = {"allOf": [{"$ref": prefix + name}],
                                         "unevaluatedProperties": False}
    return d


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def violations(resp):
    v = resp.headers.get("sl-violations")
    if not v:
        return []
    return json.loads(v)


def days_ahead(n):
    return (datetime.date.today() + datetime.timedelta(days=n)).isoformat()


def instant_ahead(seconds):
    """An RFC 3339 UTC instant `seconds` from now (negative: ago)."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


class Prism:
    """One `prism proxy` process on a free port; its log in log_path."""

    def __init__(self, doc_path, upstream, log_path):
        self.port = free_port()
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(
            [os.path.join(oa.BIN, "prism"), "proxy", doc_path, upstream, "-h", "127.0.0.1",
             "-p", str(self.port), "--errors=false", "--cors=false", "--validate-request=true"],
            cwd=oa.NPM, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=oa.TOOL_ENV, start_new_session=True)

    def log_text(self):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait_ready(self, timeout=60.0):
        def answers():
            if self.proc.poll() is not None:
                raise AssertionError("prism exited with %s:\n%s" % (self.proc.returncode,
                                                                    self.log_text()[-4000:]))
            try:
                return harness.http_request(self.port, "GET", "/healthz", timeout=5).status
            except OSError:
                return None
        harness.wait_until(answers, timeout, interval=0.1, what="prism proxy on %d" % self.port)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


class PrismContract(unittest.TestCase):
    covered = {}  # operationId -> set of statuses seen through Prism
    heads = set()  # GET operationIds whose HEAD was checked

    @classmethod
    def setUpClass(cls):
        cls.started = time.monotonic()
        cls.tmp = tempfile.mkdtemp(prefix="revops-prism-")
        cls.rx = cls.sim = cls.wa = cls.srv = cls.prism = cls.canary = None
        try:
            cls._set_up()
        except BaseException:
            cls._tear_down()
            raise

    @classmethod
    def _set_up(cls):
        if not os.access(os.path.join(oa.BIN, "prism"), os.X_OK):
            raise AssertionError("prism is not installed: run scripts/npm-tools.sh "
                                 "(make test does)")
        canary_path = os.path.join(cls.tmp, "canary.json")
        with open(canary_path, "w") as f:
            json.dump(CANARY_DOC, f)
        cls.ca = receiver.TestCA(os.path.join(cls.tmp, "ca"))
        cls.rx = receiver.Receiver(cls.ca)
        cls.rx.set_behaviour("/down", status=500, body=b"down on purpose")
        cls.sim = pmssim.PmsSim("--fail-codes", FAIL_CODE,
                                "--booking-engine-fail-codes", FAIL_CODE,
                                "--reviews-fail-first", "1")
        # statuses 250 ms apart: a status that came before revopsd recorded
        # the send's wamid would find no message
        cls.wa = wasim.WaSim("--access-token", WA_TOKEN, "--status-delay-ms", "250")
        cls.srv = harness.Server(["--demo", "--pms-url", cls.sim.url, "--booking-engine-url",
                                  cls.sim.url + "/booking-engine", "--reviews-url", cls.sim.url,
                                  "--whatsapp-api-url", cls.wa.url,
                                  "--trust-ca", cls.ca.ca_pem, "--allow-private-targets",
                                  "--time-scale", str(SCALE)])
        # both Prisms load (about 4 s) while the rest is set up
        cls.canary = Prism(canary_path, cls.srv.base_url, os.path.join(cls.tmp, "canary.log"))
        creds_path = os.path.join(cls.srv.data_dir, "demo-credentials.json")

        def creds():
            try:
                with open(creds_path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                return None
        c = harness.wait_until(creds, 10, what="demo-credentials.json")
        cls.ent = next(p for p in c["portfolios"] if p["plan"] == "enterprise")
        cls.grp = next(p for p in c["portfolios"] if p["plan"] == "group")
        cls.demo_idp = c["demo_idp"]
        r = cls.srv.request("GET", "/v2/openapi.json")
        if r.status != 200:
            raise AssertionError("GET /v2/openapi.json: %r" % (r,))
        cls.doc = json.loads(r.raw)
        doc_path = os.path.join(cls.tmp, "openapi.json")
        with open(doc_path, "w") as f:
            json.dump(closed_copy(cls.doc), f)
        cls.ops = {}  # (METHOD, template) -> operationId
        for tpl, item in cls.doc["paths"].items():
            for m in METHODS:
                if m in item:
                    cls.ops[(m.upper(), tpl)] = item[m]["operationId"]
        cls.prism = Prism(doc_path, cls.srv.base_url, os.path.join(cls.tmp, "prism.log"))
        cls.ent_token = cls.srv.access_token(cls.ent["client_id"], cls.ent["client_secret"])
        cls.grp_token = cls.srv.access_token(cls.grp["client_id"], cls.grp["client_secret"])
        # A v1 delivery that dead-letters at once (72 h / SCALE = 2.6 s) and
        # whose retry window (30 days / SCALE = 26 s) ends while the suite
        # runs: made now, directly, so the clock starts early.
        r = cls.srv.request("POST", "/v1/webhooks", token=cls.ent_token,
                            body={"url": cls.rx.url("/down"), "events": ["rate.suggested"]})
        if r.status != 201:
            raise AssertionError("v1 subscription: %r" % (r,))
        cls.early_sub = r.body["data"]["id"]
        r = cls.srv.request("POST", "/v1/webhooks/%s/ping" % cls.early_sub, token=cls.ent_token)
        if r.status != 202:
            raise AssertionError("v1 ping: %r" % (r,))
        cls.early_dlv = r.body["data"]["deliveries"][0]["id"]
        cls.prism.wait_ready()
        cls.canary.wait_ready()
        cls.ready_after = time.monotonic() - cls.started

    @classmethod
    def tearDownClass(cls):
        cls._tear_down()

    @classmethod
    def _tear_down(cls):
        """Stops everything, each even if another fails; re-raises the first
        failure (revopsd, pms-sim or wa-sim not exiting cleanly)."""
        first = None
        for it in (cls.prism, cls.canary, cls.srv, cls.sim, cls.wa, cls.rx):
            if it is None:
                continue
            try:
                it.stop() if isinstance(it, Prism) else it.close()
            except Exception as e:  # noqa: BLE001 (re-raised below)
                first = first or e
        if not os.environ.get("REVOPS_KEEP_DATA"):
            shutil.rmtree(cls.tmp, ignore_errors=True)
        if first is not None:
            raise first

    # plumbing ----------------------------------------------------------------

    def matches(self, method, path):
        """(number of template parameters, operationId) of each documented
        operation that method + path (query aside) reaches."""
        path = urllib.parse.unquote(path.split("?", 1)[0])
        found = []
        for (m, tpl), op in self.ops.items():
            rx = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(tpl)) + "$"
            if m == method and re.match(rx, path):
                found.append((tpl.count("{"), op))
        return found

    def op_for(self, method, path):
        """The operationId the document gives method + path: the most
        specific template (fewest parameters) that matches."""
        found = self.matches(method, path)
        self.assertTrue(found, "%s %s is not a documented operation" % (method, path))
        return min(found)[1]

    def call(self, method, path, status, headers=None, body=None, token=None, portfolio=None,
             bad=False):
        """One request through Prism. Fails on any response-side violation,
        on request-side ones unless bad (a request meant to be refused, and
        refused: status >= 400), and on a status other than `status`."""
        op = self.op_for(method, path)
        r = harness.http_request(self.prism.port, method, path, headers, body, token, portfolio,
                                 timeout=30)
        vs = violations(r)
        where = "%s %s -> %s (%s)" % (method, path, r.status, op)
        self.assertNotEqual(r.headers.get("content-type", ""), "application/problem+json",
                            "Prism failed: %s %r\n%s" % (where, r, self.prism.log_text()[-3000:]))
        res_side = [v for v in vs if v.get("location", [None])[0] != "request"]
        self.assertEqual(res_side, [], "response drift: %s: %r" % (where, r))
        req_side = [v for v in vs if v.get("location", [None])[0] == "request"]
        if req_side:
            self.assertTrue(bad, "request drift (the server accepted what the document "
                                 "refuses, or the request is wrong): %s: %s" % (where, req_side))
        self.assertEqual(r.status, status, "%s: %r" % (where, r))
        if bad:
            self.assertGreaterEqual(r.status, 400, where)
        mine = {k.lower(): v for k, v in (headers or {}).items()}.get("x-request-id")
        if mine:
            self.assertEqual(r.headers["x-request-id"], mine, where)
        else:
            harness.assert_common_headers(self, r)
        self.covered.setdefault(op, set()).add(status)
        return r

    def get(self, path, status=200, token=None, portfolio=None, headers=None, bad=False):
        """GET through Prism; then HEAD of the same directly on revopsd
        (Prism cannot proxy HEAD), which must answer alike without a body."""
        r = self.call("GET", path, status, headers=headers, token=token, portfolio=portfolio,
                      bad=bad)
        if status == 200:
            h = harness.http_request(self.srv.port, "HEAD", path, headers, None, token,
                                     portfolio)
            self.assertEqual(h.status, r.status, "HEAD %s: %r" % (path, h))
            self.assertEqual(h.raw, b"", "HEAD %s sent a body" % path)
            self.assertIn("content-length", h.headers, "HEAD %s" % path)
            mine = {k for k in h.headers if k not in TRANSPORT}
            theirs = {k for k in r.headers if k not in TRANSPORT}
            self.assertEqual(mine, theirs, "HEAD %s: headers differ from GET" % path)
            self.assertEqual(h.headers["content-type"].split(";")[0],
                             r.headers["content-type"].split(";")[0])
            self.heads.add(self.op_for("GET", path))
        return r

    def feed_batch(self, feed, items, key):
        """POSTs a feed batch of 3 new items, a repeat of the first and 3
        refused ones (headers key: its Idempotency-Key); checks that tally
        and returns the data."""
        d = self.v2("POST", feed, 200, body={"items": items}, headers=key).body["data"]
        self.assertEqual((d["created"], d["duplicate"], d["rejected"]), (3, 1, 3))
        self.assertEqual([x["status"] for x in d["results"]],
                         ["created"] * 3 + ["duplicate"] + ["rejected"] * 3)
        return d

    def v2(self, method, path, status, pf=None, token=None, body=None, headers=None, bad=False):
        pf = pf or self.ent
        tok = token or (self.ent_token if pf is self.ent else self.grp_token)
        if method == "GET":
            return self.get(path, status, token=tok, portfolio=pf["portfolio_id"],
                            headers=headers, bad=bad)
        return self.call(method, path, status, headers=headers, body=body, token=tok,
                         portfolio=pf["portfolio_id"], bad=bad)

    def scim(self, method, path, status, body=None, headers=None, bad=False, token=None):
        h = dict(headers or {})
        h["Authorization"] = "Bearer " + (token or self.ent["scim_token"])
        if body is not None and not isinstance(body, (bytes, str)):
            h.setdefault("Content-Type", SCIM_CT)
        path = "/scim/v2" + path
        if method == "GET":
            return self.get(path, status, headers=h, bad=bad)
        return self.call(method, path, status, headers=h, body=body, bad=bad)

    def error(self, r, code):
        self.assertEqual(r.body["error"]["code"], code, r)
        return r.body["error"]

    def prop(self, pf, code):
        return next(p["id"] for p in pf["properties"] if p["pms_property_code"] == code)

    def ceiling(self, pf, code):
        brand = next(p["brand"] for p in pf["properties"] if p["pms_property_code"] == code)
        return next(c["id"] for c in pf["brand_ceilings"] if c["brand"] == brand)

    def decision_body(self, pf, codes, approver=None, minor_units=45900, room="DBL"):
        return harness.rate_decision_body(
            [self.prop(pf, c) for c in codes], self.ceiling(pf, codes[0]),
            approver or pf["approver_saml_subject"], room=room, date_from=days_ahead(10),
            date_to=days_ahead(12), minor_units=minor_units)

    def wait_delivery(self, dlv, states, token=None, pf=None, timeout=15):
        """Polls GET /v2/webhooks/deliveries/{id} on revopsd until its state
        is in states; returns the delivery."""
        pf = pf or self.ent

        def settled():
            r = self.srv.request("GET", "/v2/webhooks/deliveries/" + dlv,
                                 token=token or self.ent_token, portfolio=pf["portfolio_id"])
            d = r.body.get("data") if r.status == 200 else None
            return d if d and d["state"] in states else None
        return harness.wait_until(settled, timeout, interval=0.05,
                                  what="delivery %s in %s" % (dlv, states))

    # the canary ----------------------------------------------------------------

    def test_a0_canary_prism_reports_response_drift(self):
        """With these options, a response that breaks the document does come
        back with a response-side violation (and unchanged)."""
        r = harness.http_request(self.canary.port, "GET", "/healthz")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, {"status": "ok"})
        vs = violations(r)
        self.assertTrue([v for v in vs if v["location"][0] == "response"],
                        "no response violation reported: %r" % (r,))

    # public ----------------------------------------------------------------------

    def test_a_public_endpoints(self):
        self.assertEqual(self.get("/healthz").body, {"status": "ok"})
        self.assertEqual(self.get("/readyz").body, {"status": "ready"})
        r = self.get("/metrics")
        self.assertIn(b"revops_http_requests_total", r.raw)
        r = self.get("/v2/openapi.json")
        self.assertEqual(r.body["openapi"], self.doc["openapi"])
        r = self.get("/.well-known/oauth-authorization-server")
        self.assertEqual(r.body["issuer"], self.srv.base_url)

    # OAuth ----------------------------------------------------------------------------

    def token(self, status, form, headers=None, bad=False):
        h = dict(FORM)
        h.update(headers or {})
        return self.call("POST", "/oauth/token", status, headers=h,
                         body=urllib.parse.urlencode(form), bad=bad)

    def test_b_oauth_token(self):
        cid, secret = self.ent["client_id"], self.ent["client_secret"]
        basic = {"Authorization": basic_auth(cid, secret)}
        traced = dict(basic, **{"X-Request-Id": "contract-test-1",
                                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-"
                                               "00f067aa0ba902b7-01"})
        r = self.token(200, [("grant_type", "client_credentials")], traced)
        self.assertEqual(r.headers["x-request-id"], "contract-test-1")
        self.assertEqual(r.headers["cache-control"], "no-store")
        r = self.token(200, [("grant_type", "client_credentials"), ("client_id", cid),
                             ("client_secret", secret), ("scope", "rates:read property:WAW01")])
        self.assertEqual(r.body["property_codes"], ["WAW01"])
        # the SAML 2.0 bearer grant (RFC 7522), signed by the demo IdP
        saml = self.ent["saml"]
        xml = idplib.build_assertion(self.ent["approver_saml_subject"], saml["idp_entity_id"],
                                     saml["audience"], saml["recipient"])
        signed = idplib.sign_with(self.demo_idp["private_key_file"],
                                  self.demo_idp["certificate_file"], xml, self.tmp)
        r = self.token(200, [("grant_type", SAML_GRANT), ("assertion", idplib.b64url(signed)),
                             ("scope", "portfolios:read")])
        user_token = r.body["access_token"]
        self.v2("GET", "/v2/portfolios", 200, token=user_token)
        # errors
        r = self.token(401, [("grant_type", "client_credentials")],
                       {"Authorization": basic_auth(cid, "wrong")}, bad=True)
        self.assertEqual(r.body["error"], "invalid_client")
        self.assertTrue(r.headers["www-authenticate"].startswith("Basic"), r)
        r = self.token(400, [("grant_type", "client_credentials"), ("client_id", cid),
                             ("client_secret", "wrong")], bad=True)
        self.assertEqual(r.body["error"], "invalid_client")
        self.assertNotIn("www-authenticate", r.headers)
        r = self.token(400, [("grant_type", "client_credentials"), ("scope", "no:such")], basic,
                       bad=True)
        self.assertEqual(r.body["error"], "invalid_scope")
        r = self.token(400, [("grant_type", "password"), ("username", "u"), ("password", "p")],
                       basic, bad=True)
        self.assertEqual(r.body["error"], "unsupported_grant_type")
        r = self.token(400, [("grant_type", "client_credentials"), ("client_id", cid),
                             ("client_secret", secret)], basic, bad=True)
        self.assertEqual(r.body["error"], "invalid_request")
        r = self.token(400, [("grant_type", SAML_GRANT), ("assertion", "bm90LXNhbWw")],
                       bad=True)
        self.assertEqual(r.body["error"], "invalid_grant")

    # portfolios ------------------------------------------------------------------------

    def test_c_portfolios(self):
        pf = self.ent["portfolio_id"]
        r = self.v2("GET", "/v2/portfolios", 200)
        self.assertEqual([p["id"] for p in r.body["data"]], [pf])
        r = self.v2("GET", "/v2/portfolios/" + pf, 200)
        tag = r.headers["etag"]
        r = self.v2("GET", "/v2/portfolios/" + pf, 304, headers={"If-None-Match": tag})
        self.assertEqual(r.headers["etag"], tag)
        self.assertNotIn("content-type", r.headers)
        r = self.v2("GET", "/v2/portfolios/%s/properties?limit=2" % pf, 200)
        cursor = r.body["meta"]["next_cursor"]
        self.assertIsInstance(cursor, str)
        self.assertIn('rel="next"', r.headers["link"])
        r = self.v2("GET", "/v2/portfolios/%s/properties?limit=2&cursor=%s" % (pf, cursor), 200)
        self.assertEqual(len(r.body["data"]), 2)
        # narrowed to one property
        self.v2("GET", "/v2/portfolios/%s/properties" % pf, 200,
                headers={"X-Service-Property": self.prop(self.ent, "WAW01")})
        # errors
        self.error(self.v2("GET", "/v2/portfolios/%s/properties?cursor=bogus" % pf, 400),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/portfolios?limit=0", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        r = self.get("/v2/portfolios", 401, portfolio=pf, bad=True)
        self.error(r, "SVC-AUTH-UNAUTHENTICATED")
        self.assertTrue(r.headers["www-authenticate"].startswith("Bearer"))
        r = self.get("/v2/portfolios", 401, token="rvo_at_" + "x" * 43, portfolio=pf)
        self.assertIn('error="invalid_token"', r.headers["www-authenticate"])
        self.error(self.get("/v2/portfolios", 400, token=self.ent_token, bad=True),
                   "SVC-PORTFOLIO-REQUIRED")
        self.error(self.v2("GET", "/v2/portfolios/" + self.grp["portfolio_id"], 403),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.get("/v2/portfolios", 403, token=self.ent_token,
                            portfolio=self.grp["portfolio_id"]), "SVC-AUTH-INSUFFICIENT-ROLE")
        _, narrow = self.srv.client_token(pf, "rates:read")
        self.error(self.v2("GET", "/v2/portfolios", 403, token=narrow),
                   "SVC-AUTH-INSUFFICIENT-ROLE")

    # rate decisions ----------------------------------------------------------------------

    def test_d_rate_decisions(self):
        ent, grp = self.ent, self.grp
        body = self.decision_body(ent, ["WAW01", "KRK01"])
        r = self.v2("POST", "/v2/rate-decisions", 201, body=body)
        rd = r.body["data"]
        self.assertEqual(rd["status"], "published")
        # Idempotency-Key: the same again is replayed, another body is 422
        key = {"Idempotency-Key": "prism-%d" % time.time_ns()}
        r = self.v2("POST", "/v2/rate-decisions", 201, body=self.decision_body(ent, ["GDN01"]),
                    headers=key)
        again = self.v2("POST", "/v2/rate-decisions", 201,
                        body=self.decision_body(ent, ["GDN01"]), headers=key)
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.assertEqual(again.body["data"]["id"], r.body["data"]["id"])
        self.error(self.v2("POST", "/v2/rate-decisions", 422,
                           body=self.decision_body(ent, ["KRK01"]), headers=key),
                   "SVC-IDEMPOTENCY-KEY-REUSED")
        self.error(self.v2("POST", "/v2/rate-decisions", 400, bad=True,
                           body=self.decision_body(ent, ["GDN01"]),
                           headers={"Idempotency-Key": "k" * 256}), "SVC-REQUEST-MALFORMED")
        # governance refusals, stored as rejected
        e = self.error(self.v2("POST", "/v2/rate-decisions", 422,
                               body=self.decision_body(ent, ["WAW01"], minor_units=999999)),
                       "SVC-RATE-CEILING-EXCEEDED")
        rejected = e["decision_id"]
        self.error(self.v2("POST", "/v2/rate-decisions", 422,
                           body=self.decision_body(ent, ["WAW01"], approver="nobody@x.test")),
                   "SVC-GOVERNANCE-REJECTED")
        # a PMS write fails: compensated, 502
        e = self.error(self.v2("POST", "/v2/rate-decisions", 502, pf=grp,
                               body=self.decision_body(grp, ["ZAK01", FAIL_CODE])),
                       "SVC-PMS-WRITE-FAILED")
        failed = e["decision_id"]
        r = self.v2("GET", "/v2/rate-decisions/" + failed, 200, pf=grp)
        self.assertEqual(r.body["data"]["status"], "failed")
        r = self.v2("GET", "/v2/rate-decisions/%s/audit-trail" % failed, 200, pf=grp)
        self.assertIn("pms_compensation", [x["kind"] for x in r.body["data"]["entries"]])
        e = self.error(self.v2("POST", "/v2/rate-decisions", 422, body=self.decision_body(
            ent, ["WAW01"], approver=ent["approver_saml_subject"].replace("approver", "ops"))),
            "SVC-GOVERNANCE-REJECTED")
        r = self.v2("GET", "/v2/rate-decisions/" + e["decision_id"], 200)
        self.assertEqual(r.body["data"]["status"], "rejected")
        # a per-property token: a property outside it is 403
        waw = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                    scope="rates:read rates:write property:WAW01")
        self.error(self.v2("POST", "/v2/rate-decisions", 403, token=waw,
                           body=self.decision_body(ent, ["KRK01"])),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.v2("GET", "/v2/rate-decisions", 200, token=waw,
                headers={"X-Service-Property": self.prop(ent, "WAW01")})
        self.error(self.v2("GET", "/v2/rate-decisions", 403, token=waw,
                           headers={"X-Service-Property": self.prop(ent, "KRK01")}),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # bad requests
        r = self.v2("POST", "/v2/rate-decisions", 400, body={"properties": []}, bad=True)
        self.error(r, "SVC-VALIDATION-FAILED")
        self.assertTrue(r.body["error"]["details"])
        bad = self.decision_body(ent, ["WAW01"])
        bad["proposed_rate"]["minor_units"] = -5
        self.error(self.v2("POST", "/v2/rate-decisions", 400, body=bad, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", "/v2/rate-decisions", 415, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        big = json.dumps({"justification": "x" * (1024 * 1024 + 10)})
        self.error(self.v2("POST", "/v2/rate-decisions", 413, body=big, bad=True,
                           headers={"Content-Type": "application/json"}),
                   "SVC-PAYLOAD-TOO-LARGE")
        self.error(self.v2("POST", "/v2/rate-decisions", 403,
                           body=self.decision_body(grp, ["ZAK01"])),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # reads
        r = self.v2("GET", "/v2/rate-decisions", 200)
        self.assertIn(rd["id"], [x["id"] for x in r.body["data"]])
        r = self.v2("GET", "/v2/rate-decisions?status=rejected&limit=10", 200)
        self.assertIn(rejected, [x["id"] for x in r.body["data"]])
        self.v2("GET", "/v2/rate-decisions?status=failed", 200, pf=grp)
        self.v2("GET", "/v2/rate-decisions?status=bogus", 400, bad=True)
        r = self.v2("GET", "/v2/rate-decisions/" + rd["id"], 200)
        self.v2("GET", "/v2/rate-decisions/" + rd["id"], 304,
                headers={"If-None-Match": r.headers["etag"]})
        self.error(self.v2("GET", "/v2/rate-decisions/" + UNKNOWN["rd"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", "/v2/rate-decisions/" + rd["id"], 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("GET", "/v2/rate-decisions/%s/audit-trail" % rd["id"], 200)
        harness.assert_audit_chain(self, r.body["data"])
        r = self.v2("GET", "/v2/rate-decisions/%s/audit-trail" % rd["id"], 304,
                    headers={"If-None-Match": r.headers["etag"]})
        self.assertEqual(r.headers.get("vary"), "Accept-Encoding")  # as its 200 (> 1 KiB)
        self.v2("GET", "/v2/rate-decisions/%s/audit-trail" % rejected, 200)
        self.error(self.v2("GET", "/v2/rate-decisions/%s/audit-trail" % UNKNOWN["rd"], 404),
                   "SVC-NOT-FOUND")
        # revert
        path = "/v2/rate-decisions/%s/revert" % rd["id"]
        self.error(self.v2("POST", path, 422, body={"reason": "Mistyped rate",
                                                    "approver_saml_subject": "nobody@x.test"}),
                   "SVC-GOVERNANCE-REJECTED")
        revert = {"reason": "Mistyped rate", "approver_saml_subject": ent["approver_saml_subject"]}
        r = self.v2("POST", path, 200, body=revert)
        self.assertEqual(r.body["data"]["status"], "reverted")
        r = self.v2("GET", "/v2/rate-decisions/" + rd["id"], 200)
        self.assertEqual(r.body["data"]["status"], "reverted")
        self.v2("GET", "/v2/rate-decisions/%s/audit-trail" % rd["id"], 200)
        self.error(self.v2("POST", path, 409, body=revert), "SVC-CONFLICT")
        self.error(self.v2("POST", "/v2/rate-decisions/%s/revert" % UNKNOWN["rd"], 404,
                           body=revert), "SVC-NOT-FOUND")
        self.error(self.v2("POST", path, 400, body={"reason": ""}, bad=True),
                   "SVC-VALIDATION-FAILED")

    # feeds, rate suggestions, parity alerts -----------------------------------------------

    def user_token(self, pf, subject=None, scope="rates:read rates:write"):
        """A user's token (the SAML 2.0 bearer grant, through Prism) with
        scope; the portfolio's approver unless subject."""
        saml = pf["saml"]
        xml = idplib.build_assertion(subject or pf["approver_saml_subject"],
                                     saml["idp_entity_id"], saml["audience"], saml["recipient"])
        signed = idplib.sign_with(self.demo_idp["private_key_file"],
                                  self.demo_idp["certificate_file"], xml, self.tmp)
        r = self.token(200, [("grant_type", SAML_GRANT), ("assertion", idplib.b64url(signed)),
                             ("scope", scope)])
        return r.body["access_token"]

    def suggestion_item(self, pf, code, days=20, minor_units=52900, currency="PLN"):
        return {"property_id": self.prop(pf, code), "room_type_code": "DBL",
                "date": days_ahead(days),
                "current_rate": {"currency": "PLN", "minor_units": 45900},
                "proposed_rate": {"currency": currency, "minor_units": minor_units},
                "trigger": "competitor_rate_change"}

    def ota_item(self, pf, code, minor_units, seconds_ago, days=30, ota="booking.com"):
        at = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds_ago)
        return {"property_id": self.prop(pf, code), "ota": ota, "room_type_code": "DBL",
                "date": days_ahead(days), "rate": {"currency": "PLN", "minor_units": minor_units},
                "observed_at": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"}

    def feed(self, path, items, status=200, pf=None, token=None, bad=False):
        """One feed call; returns its data (200) or the response."""
        r = self.v2("POST", path, status, pf=pf, token=token, body={"items": items}, bad=bad)
        return r.body["data"] if status == 200 else r

    def test_d1_feeds_and_rate_suggestions(self):
        ent, grp = self.ent, self.grp
        feed = "/v2/feeds/rate-suggestions"
        approver = self.user_token(ent)
        ops = self.user_token(ent, ent["approver_saml_subject"].replace("approver", "ops"))
        # a batch: good items and, beside them, rejected ones (past date,
        # another currency, another portfolio's property)
        items = [self.suggestion_item(ent, "WAW01", days=20),
                 self.suggestion_item(ent, "WAW01", days=21, minor_units=999999),
                 self.suggestion_item(ent, "KRK01", days=22),
                 dict(self.suggestion_item(ent, "KRK01"), date="2020-01-01"),
                 self.suggestion_item(ent, "GDN01", currency="EUR"),
                 self.suggestion_item(grp, "ZAK01")]
        key = {"Idempotency-Key": "prism-feed-%d" % time.time_ns()}
        r = self.v2("POST", feed, 200, body={"items": items}, headers=key)
        d = r.body["data"]
        self.assertEqual((d["created"], d["duplicate"], d["rejected"]), (3, 0, 3))
        self.assertEqual([x["index"] for x in d["results"]], list(range(6)))
        self.assertEqual([x["error"]["code"] for x in d["results"][3:]],
                         ["SVC-VALIDATION-FAILED"] * 2 + ["SVC-AUTH-INSUFFICIENT-ROLE"])
        approve_me, too_high, reject_me = (x["id"] for x in d["results"][:3])
        again = self.v2("POST", feed, 200, body={"items": items}, headers=key)
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.assertEqual(again.body["data"], d)
        self.error(self.v2("POST", feed, 422, body={"items": items[:1]}, headers=key),
                   "SVC-IDEMPOTENCY-KEY-REUSED")
        # refused batches: nothing recorded
        self.error(self.feed(feed, [], 400, bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 400, body={"items": items[:1] * 501}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 400, body={"items": [1]}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 400, body={"items": items[:1], "source": "x"},
                           bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 415, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        big = json.dumps({"items": [{"trigger": "x" * (1024 * 1024 + 10)}]})
        self.error(self.v2("POST", feed, 413, body=big, bad=True,
                           headers={"Content-Type": "application/json"}),
                   "SVC-PAYLOAD-TOO-LARGE")
        _, narrow = self.srv.client_token(ent["portfolio_id"], "rates:read")
        self.error(self.feed(feed, items[:1], 403, token=narrow), "SVC-AUTH-INSUFFICIENT-ROLE")
        # reads
        r = self.v2("GET", "/v2/rate-suggestions", 200)
        self.assertTrue({approve_me, too_high, reject_me} <= {x["id"] for x in r.body["data"]})
        r = self.v2("GET", "/v2/rate-suggestions?status=pending_approval&property_id=%s"
                    "&date_from=%s&date_to=%s&limit=1" % (self.prop(ent, "WAW01"),
                                                          days_ahead(20), days_ahead(21)), 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [approve_me])
        cursor = r.body["meta"]["next_cursor"]
        self.assertIn('rel="next"', r.headers["link"])
        r = self.v2("GET", "/v2/rate-suggestions?status=pending_approval&property_id=%s"
                    "&date_from=%s&date_to=%s&limit=1&cursor=%s"
                    % (self.prop(ent, "WAW01"), days_ahead(20), days_ahead(21), cursor), 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [too_high])
        self.error(self.v2("GET", "/v2/rate-suggestions?cursor=" + cursor, 400),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/rate-suggestions?status=bogus", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/rate-suggestions?date_to=2026-13-01", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        waw = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                    scope="rates:read rates:write property:WAW01")
        r = self.v2("GET", "/v2/rate-suggestions", 200, token=waw)
        self.assertEqual({x["property_id"] for x in r.body["data"]}, {self.prop(ent, "WAW01")})
        self.error(self.v2("GET", "/v2/rate-suggestions?property_id=" + self.prop(ent, "KRK01"),
                           403, token=waw), "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("GET", "/v2/rate-suggestions/" + approve_me, 200)
        self.assertEqual(r.body["data"]["status"], "pending_approval")
        self.v2("GET", "/v2/rate-suggestions/" + approve_me, 304,
                headers={"If-None-Match": r.headers["etag"]})
        self.error(self.v2("GET", "/v2/rate-suggestions/" + UNKNOWN["rs"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", "/v2/rate-suggestions/" + approve_me, 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("GET", "/v2/rate-suggestions/" + reject_me, 403, token=waw),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        trail = "/v2/rate-suggestions/%s/audit-trail"
        r = self.v2("GET", trail % approve_me, 200)
        self.assertEqual(r.body["data"]["suggestion_id"], approve_me)
        harness.assert_audit_chain(self, r.body["data"])
        self.v2("GET", trail % approve_me, 304, headers={"If-None-Match": r.headers["etag"]})
        self.error(self.v2("GET", trail % UNKNOWN["rs"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", trail % approve_me, 403, pf=grp), "SVC-AUTH-INSUFFICIENT-ROLE")
        # deciding: a revenue-approver's user token only
        approve, reject = "/v2/rate-suggestions/%s/approve", "/v2/rate-suggestions/%s/reject"
        e = self.error(self.v2("POST", approve % approve_me, 403), "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertIn("client", e["message"])
        self.error(self.v2("POST", reject % reject_me, 403, token=ops),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        e = self.error(self.v2("POST", approve % too_high, 422, token=approver),
                       "SVC-RATE-CEILING-EXCEEDED")
        self.assertEqual((e["details"][0]["field"], e["details"][0]["issue"]),
                         ("proposed_rate", "the proposed rate is above the ceiling"))
        r = self.v2("GET", trail % too_high, 200)
        self.assertEqual([x["kind"] for x in r.body["data"]["entries"]],
                         ["suggested", "ceiling_check", "approval_refused"])
        self.error(self.v2("POST", approve % approve_me, 400, token=approver, body={"now": True},
                           bad=True), "SVC-VALIDATION-FAILED")
        r = self.v2("POST", approve % approve_me, 200, token=approver)
        self.assertEqual(r.body["data"]["status"], "approved")
        self.assertIsNotNone(r.body["data"]["booking_engine"])
        self.error(self.v2("POST", approve % approve_me, 409, token=approver, body={}),
                   "SVC-CONFLICT")
        r = self.v2("GET", trail % approve_me, 200)
        self.assertEqual([x["kind"] for x in r.body["data"]["entries"]],
                         ["suggested", "ceiling_check", "approved", "booking_push"])
        self.error(self.v2("POST", reject % reject_me, 400, token=approver,
                           body={"reason": "x" * 2001}, bad=True), "SVC-VALIDATION-FAILED")
        key = {"Idempotency-Key": "prism-reject-%d" % time.time_ns()}
        r = self.v2("POST", reject % reject_me, 200, token=approver, headers=key,
                    body={"reason": "Above the weekend corporate agreement rate"})
        self.assertEqual(r.body["data"]["decision"]["reason"],
                         "Above the weekend corporate agreement rate")
        self.error(self.v2("POST", reject % reject_me, 422, token=approver, headers=key,
                           body={"reason": "another"}), "SVC-IDEMPOTENCY-KEY-REUSED")
        self.error(self.v2("POST", reject % reject_me, 409, token=approver), "SVC-CONFLICT")
        self.error(self.v2("POST", reject % UNKNOWN["rs"], 404, token=approver), "SVC-NOT-FOUND")
        self.error(self.v2("POST", approve % too_high, 415, token=approver, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        self.v2("GET", "/v2/rate-suggestions?status=approved", 200)
        self.v2("GET", "/v2/rate-suggestions?status=rejected", 200)
        # another portfolio's approver, and a booking engine that fails the push
        grp_approver = self.user_token(grp)
        self.error(self.v2("POST", approve % too_high, 403, pf=grp, token=grp_approver),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        d = self.feed(feed, [self.suggestion_item(grp, FAIL_CODE)], pf=grp)
        failing = d["results"][0]["id"]
        e = self.error(self.v2("POST", approve % failing, 502, pf=grp, token=grp_approver),
                       "SVC-PMS-WRITE-FAILED")
        self.assertEqual(e["details"][0]["field"], "booking_engine")
        r = self.v2("GET", "/v2/rate-suggestions/" + failing, 200, pf=grp)
        self.assertEqual(r.body["data"]["status"], "pending_approval")
        r = self.v2("GET", trail % failing, 200, pf=grp)
        self.assertEqual(r.body["data"]["entries"][-1]["kind"], "booking_push_failed")

    def test_d2_parity_alerts(self):
        ent, grp = self.ent, self.grp
        feed = "/v2/feeds/ota-rates"
        # the approved rate floor: an approved suggestion (POZ01, DBL, day 30, 529.00)
        d = self.feed("/v2/feeds/rate-suggestions", [self.suggestion_item(ent, "POZ01", days=30)])
        sid = d["results"][0]["id"]
        self.v2("POST", "/v2/rate-suggestions/%s/approve" % sid, 200, token=self.user_token(ent))
        items = [self.ota_item(ent, "POZ01", 49900, 60),
                 self.ota_item(ent, "POZ01", 48900, 50),
                 self.ota_item(ent, "POZ01", 47900, 55),
                 self.ota_item(ent, "POZ01", 52900, 40),
                 self.ota_item(ent, "POZ01", 45000, 30, ota="expedia"),
                 self.ota_item(ent, "POZ01", 53000, 30, ota="hotels.com"),
                 self.ota_item(ent, "WRO01", 40000, 30),
                 self.ota_item(ent, "POZ01", 40000, -3600, ota="expedia"),
                 self.ota_item(grp, "ZAK01", 40000, 30)]
        d = self.feed(feed, items)
        self.assertEqual((d["created"], d["duplicate"], d["rejected"]), (7, 0, 2))
        self.assertEqual([x.get("parity") for x in d["results"]],
                         ["breach_opened", "breach_continues", "stale", "breach_resolved",
                          "breach_opened", "at_or_above_floor", "no_floor", None, None])
        resolved, opened = d["results"][0]["parity_alert_id"], d["results"][4]["parity_alert_id"]
        self.assertEqual(d["results"][3]["parity_alert_id"], resolved)
        self.assertIsNone(d["results"][2]["parity_alert_id"])
        self.assertEqual(d["results"][7]["error"]["details"][0]["field"], "items[7].observed_at")
        # refused batches
        self.error(self.feed(feed, [], 400, bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 400, body={"items": [None]}, bad=True),
                   "SVC-VALIDATION-FAILED")
        _, narrow = self.srv.client_token(ent["portfolio_id"], "alerts:read")
        self.error(self.feed(feed, items[:1], 403, token=narrow), "SVC-AUTH-INSUFFICIENT-ROLE")
        # reads
        r = self.v2("GET", "/v2/parity-alerts", 200)
        alerts = {x["id"]: x for x in r.body["data"]}
        self.assertEqual(alerts[resolved]["status"], "resolved")
        self.assertEqual(alerts[opened]["status"], "open")
        self.assertEqual(alerts[opened]["floor_source"], {"kind": "rate_suggestion", "id": sid})
        self.assertEqual(alerts[opened]["gap"], {"minor_units": 7900, "percent": 14.93})
        r = self.v2("GET", "/v2/parity-alerts?status=open&ota=expedia&property_id="
                    + self.prop(ent, "POZ01"), 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [opened])
        r = self.v2("GET", "/v2/parity-alerts?limit=1", 200)
        self.v2("GET", "/v2/parity-alerts?limit=1&cursor=" + r.body["meta"]["next_cursor"], 200)
        self.error(self.v2("GET", "/v2/parity-alerts?status=closed", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/parity-alerts?ota=" + "x" * 33, 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/parity-alerts", 403, token=self.srv.access_token(
            ent["client_id"], ent["client_secret"], scope="rates:read")),
            "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("GET", "/v2/parity-alerts/" + opened, 200)
        self.assertEqual(r.body["data"]["observed_rate"]["minor_units"], 45000)
        self.v2("GET", "/v2/parity-alerts/" + opened, 304,
                headers={"If-None-Match": r.headers["etag"]})
        r = self.v2("GET", "/v2/parity-alerts/" + resolved, 200)
        self.assertEqual(r.body["data"]["resolved_by_rate"]["minor_units"], 52900)
        self.error(self.v2("GET", "/v2/parity-alerts/" + UNKNOWN["pa"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", "/v2/parity-alerts/" + opened, 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        krk = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                    scope="alerts:read property:KRK01")
        self.error(self.v2("GET", "/v2/parity-alerts/" + opened, 403, token=krk),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(self.v2("GET", "/v2/parity-alerts", 200, token=krk).body["data"], [])

    # reviews and reputation -----------------------------------------------------------------

    review_seq = [0]

    def review_item(self, pf, code, rating=5, max_rating=5, language="en", author="Anna Nowak",
                    external_id=None, source="google", seconds_ago=60):
        self.review_seq[0] += 1
        at = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=seconds_ago)
        return {"property_id": self.prop(pf, code), "source": source,
                "external_id": external_id or "prism-%d-%d" % (time.time_ns(), self.review_seq[0]),
                "rating": rating, "max_rating": max_rating, "language": language,
                "text": "Lovely stay", "author": author,
                "published_at": at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"}

    def brand(self, pf, code):
        return next(p["brand"] for p in pf["properties"] if p["pms_property_code"] == code)

    def test_d3_reviews_and_reputation(self):
        ent, grp = self.ent, self.grp
        pf = ent["portfolio_id"]
        feed = "/v2/feeds/reviews"
        for band, lang, text in (
                ("high", "en", "Thank you {guest_name} for staying at {property_name}!"),
                ("mid", "en", "Thank you, {guest_name}. We will do better."),
                ("low", "pl", "Przykro nam, {guest_name} ({property_name}).")):
            self.srv.ctl("review-template", "set", "--portfolio", pf, "--band", band,
                         "--language", lang, "--text", text)
        amber = self.brand(ent, "POZ01")
        self.assertEqual(self.brand(ent, "WRO01"), amber)
        self.srv.ctl("reputation-ceiling", "set", "--portfolio", pf, "--brand", amber,
                     "--min-score", "8")
        # a batch: drafted (by band and language, pl-PL by its primary subtag), no
        # template, a duplicate of an earlier item, and rejected items beside them
        first = self.review_item(ent, "WAW01", 5, author="Anna")
        items = [first,
                 self.review_item(ent, "KRK01", 2, language="pl-PL", author="Jan"),
                 self.review_item(ent, "GDN01", 3, language="de"),
                 dict(first, text="edited later"),
                 self.review_item(ent, "WAW01", 6),
                 self.review_item(ent, "WAW01", 4, seconds_ago=-3600),
                 self.review_item(grp, "ZAK01", 4)]
        key = {"Idempotency-Key": "prism-reviews-%d" % time.time_ns()}
        d = self.feed_batch(feed, items, key)
        self.assertEqual([x.get("reply_drafted") for x in d["results"][:4]],
                         [True, True, False, False])
        drafted, polish, plain = (x["id"] for x in d["results"][:3])
        self.assertEqual(d["results"][3]["id"], drafted)
        self.assertEqual([x["error"]["code"] for x in d["results"][4:]],
                         ["SVC-VALIDATION-FAILED"] * 2 + ["SVC-AUTH-INSUFFICIENT-ROLE"])
        again = self.v2("POST", feed, 200, body={"items": items}, headers=key)
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.assertEqual(again.body["data"], d)
        self.error(self.v2("POST", feed, 422, body={"items": items[:1]}, headers=key),
                   "SVC-IDEMPOTENCY-KEY-REUSED")
        # refused batches: nothing recorded
        self.error(self.feed(feed, [], 400, bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 400, body={"items": ["review"]}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 415, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        _, narrow = self.srv.client_token(pf, "reviews:read reviews:write")
        self.error(self.feed(feed, items[:1], 403, token=narrow), "SVC-AUTH-INSUFFICIENT-ROLE")
        # reads
        r = self.v2("GET", "/v2/reviews", 200)
        self.assertTrue({drafted, polish, plain} <= {x["id"] for x in r.body["data"]})
        q = "/v2/reviews?property_id=%s&source=google&language=en&reply_status=drafted&limit=1" \
            % self.prop(ent, "WAW01")
        r = self.v2("GET", q, 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [drafted])
        self.assertEqual(r.body["data"][0]["reply"]["template"], {"band": "high", "language": "en"})
        r = self.v2("GET", "/v2/reviews?limit=1", 200)
        cursor = r.body["meta"]["next_cursor"]
        self.assertIn('rel="next"', r.headers["link"])
        self.v2("GET", "/v2/reviews?limit=1&cursor=" + cursor, 200)
        self.error(self.v2("GET", "/v2/reviews?reply_status=none&cursor=" + cursor, 400),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/reviews?reply_status=sent", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/reviews", 403, token=self.srv.access_token(
            ent["client_id"], ent["client_secret"], scope="alerts:read")),
            "SVC-AUTH-INSUFFICIENT-ROLE")
        waw = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                    scope="reviews:read reviews:write property:WAW01")
        r = self.v2("GET", "/v2/reviews", 200, token=waw)
        self.assertEqual({x["property_id"] for x in r.body["data"]}, {self.prop(ent, "WAW01")})
        self.error(self.v2("GET", "/v2/reviews?property_id=" + self.prop(ent, "KRK01"), 403,
                           token=waw), "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("GET", "/v2/reviews/" + polish, 200)
        self.assertEqual(r.body["data"]["reply"]["template"], {"band": "low", "language": "pl"})
        self.v2("GET", "/v2/reviews/" + polish, 304, headers={"If-None-Match": r.headers["etag"]})
        r = self.v2("GET", "/v2/reviews/" + plain, 200)
        self.assertEqual((r.body["data"]["reply"]["status"], r.body["data"]["reply"]["text"]),
                         ("none", None))
        self.error(self.v2("GET", "/v2/reviews/" + UNKNOWN["rv"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", "/v2/reviews/" + drafted, 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("GET", "/v2/reviews/" + polish, 403, token=waw),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # the reply: nothing to publish, then written by hand, edited, published
        reply, publish = "/v2/reviews/%s/reply", "/v2/reviews/%s/reply/publish"
        self.error(self.v2("POST", publish % plain, 409), "SVC-CONFLICT")
        r = self.v2("PUT", reply % plain, 200, body={"text": "Danke, wir arbeiten daran."})
        self.assertEqual((r.body["data"]["reply"]["status"], r.body["data"]["reply"]["edited"],
                          r.body["data"]["reply"]["template"]), ("drafted", True, None))
        self.error(self.v2("PUT", reply % plain, 400, body={"text": "   "}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("PUT", reply % plain, 400, body={"text": "x" * 4097}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("PUT", reply % plain, 400, body={"comment": "x"}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("PUT", reply % plain, 415, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        self.error(self.v2("PUT", reply % UNKNOWN["rv"], 404, body={"text": "Hi"}),
                   "SVC-NOT-FOUND")
        self.error(self.v2("PUT", reply % plain, 403, pf=grp, body={"text": "Hi"}),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("PUT", reply % plain, 403, token=waw, body={"text": "Hi"}),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        key = {"Idempotency-Key": "prism-reply-%d" % time.time_ns()}
        text = "Thank you, Anna - see you soon!"
        r = self.v2("PUT", reply % drafted, 200, body={"text": text}, headers=key)
        self.assertEqual(r.body["data"]["reply"]["template"], {"band": "high", "language": "en"})
        again = self.v2("PUT", reply % drafted, 200, body={"text": text}, headers=key)
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.error(self.v2("PUT", reply % drafted, 422, body={"text": "other"}, headers=key),
                   "SVC-IDEMPOTENCY-KEY-REUSED")
        self.error(self.v2("POST", publish % drafted, 400, body={"text": text}, bad=True),
                   "SVC-VALIDATION-FAILED")
        read_only = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                          scope="reviews:read")
        self.error(self.v2("POST", publish % drafted, 403, token=read_only),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", publish % UNKNOWN["rv"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("POST", publish % drafted, 403, pf=grp), "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("POST", publish % drafted, 202)
        self.assertEqual((r.body["data"]["reply"]["status"], r.body["data"]["reply"]["attempts"]),
                         ("publishing", 0))
        self.assertIsNotNone(r.body["data"]["reply"]["next_attempt_at"])
        r = self.v2("POST", publish % plain, 202, body={})
        self.assertEqual(r.body["data"]["reply"]["status"], "publishing")
        self.error(self.v2("PUT", reply % plain, 409, body={"text": "too late"}), "SVC-CONFLICT")

        def published(rid):
            r = self.srv.request("GET", "/v2/reviews/" + rid, token=self.ent_token, portfolio=pf)
            return r.body["data"]["reply"]["status"] == "published"
        harness.wait_until(lambda: published(drafted) and published(plain), 30,
                           what="the replies to be published")
        r = self.v2("GET", "/v2/reviews/" + drafted, 200)
        rep = r.body["data"]["reply"]
        self.assertEqual((rep["text"], rep["last_error"], rep["next_attempt_at"]),
                         (text, None, None))
        self.assertIsNotNone(rep["published_at"])
        r = self.v2("GET", "/v2/reviews?reply_status=published&limit=5", 200)
        self.assertTrue({drafted, plain} <= {x["id"] for x in r.body["data"]})
        self.error(self.v2("POST", publish % drafted, 409), "SVC-CONFLICT")
        self.error(self.v2("PUT", reply % drafted, 409, body={"text": "again"}), "SVC-CONFLICT")
        # reputation: the brand of POZ01 and WRO01 has a floor of 8.0
        self.feed(feed, [self.review_item(ent, "WRO01", 5) for _ in range(5)])
        r = self.v2("GET", "/v2/reputation", 200)
        brands = {b["brand"]: b for b in r.body["data"]["brands"]}
        self.assertEqual((brands[amber]["score"], brands[amber]["min_score"]), (10.0, 8.0))
        self.assertIsNone(brands[self.brand(ent, "WAW01")]["min_score"])
        self.assertEqual(self.v2("GET", "/v2/reputation-alerts?brand=" +
                                 urllib.parse.quote(amber), 200).body["data"], [])
        # POZ01: 2.0 (its first score), the brand (50 + 10) / 10 = 6.0 (was 10.0)
        self.feed(feed, [self.review_item(ent, "POZ01", 1) for _ in range(5)])
        q = "/v2/reputation-alerts?status=open&brand=" + urllib.parse.quote(amber)
        r = self.v2("GET", q, 200)
        opened = {a["scope"]: a for a in r.body["data"]}
        self.assertEqual(sorted(opened), ["brand", "property"])
        self.assertEqual((opened["brand"]["score"], opened["brand"]["previous_score"],
                          opened["brand"]["property_id"]), (6.0, 10.0, None))
        self.assertEqual((opened["property"]["score"], opened["property"]["previous_score"],
                          opened["property"]["property_id"]), (2.0, None, self.prop(ent, "POZ01")))
        brand_alert, prop_alert = opened["brand"]["id"], opened["property"]["id"]
        r = self.v2("GET", "/v2/reputation-alerts?limit=1", 200)
        self.v2("GET", "/v2/reputation-alerts?limit=1&cursor=" + r.body["meta"]["next_cursor"], 200)
        r = self.v2("GET", "/v2/reputation-alerts?property_id=" + self.prop(ent, "POZ01"), 200)
        self.assertEqual([a["id"] for a in r.body["data"]], [prop_alert])
        self.error(self.v2("GET", "/v2/reputation-alerts?status=closed", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", "/v2/reputation-alerts", 403, token=waw),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("GET", "/v2/reputation-alerts/" + brand_alert, 200)
        self.v2("GET", "/v2/reputation-alerts/" + brand_alert, 304,
                headers={"If-None-Match": r.headers["etag"]})
        self.v2("GET", "/v2/reputation-alerts/" + prop_alert, 200)
        self.error(self.v2("GET", "/v2/reputation-alerts/" + UNKNOWN["ra"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", "/v2/reputation-alerts/" + brand_alert, 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        poz = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                    scope="alerts:read property:POZ01")
        r = self.v2("GET", "/v2/reputation-alerts", 200, token=poz)
        self.assertEqual([a["id"] for a in r.body["data"]], [prop_alert])
        self.error(self.v2("GET", "/v2/reputation-alerts/" + brand_alert, 403, token=poz),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("GET", "/v2/reputation", 200, token=poz)
        self.assertEqual((r.body["data"]["portfolio"], r.body["data"]["brands"]), (None, []))
        self.assertEqual([p["property_id"] for p in r.body["data"]["properties"]],
                         [self.prop(ent, "POZ01")])
        self.v2("GET", "/v2/reputation", 200,
                headers={"X-Service-Property": self.prop(ent, "WRO01")})
        self.v2("GET", "/v2/reputation", 200, pf=grp)
        self.error(self.v2("GET", "/v2/reputation", 403, token=waw),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # recovery: POZ01 (10 + 150) / 20 = 8.0, the brand (60 + 150) / 25 = 8.4
        self.feed(feed, [self.review_item(ent, "POZ01", 5) for _ in range(15)])
        r = self.v2("GET", "/v2/reputation-alerts?status=resolved&brand=" +
                    urllib.parse.quote(amber), 200)
        self.assertEqual({a["id"] for a in r.body["data"]}, {brand_alert, prop_alert})
        r = self.v2("GET", "/v2/reputation-alerts/" + prop_alert, 200)
        self.assertEqual((r.body["data"]["status"], r.body["data"]["current_score"]),
                         ("resolved", 8.0))
        self.assertIsNotNone(r.body["data"]["resolved_at"])

    # operations tasks -------------------------------------------------------------------------

    def task_body(self, pf, code, **kw):
        body = {"property_id": self.prop(pf, code), "title": "Air conditioning broken in 412",
                "category": "maintenance", "priority": "high"}
        body.update(kw)
        return body

    def task_now(self, tid, pf=None):
        """The task as revopsd has it now (read directly, not through Prism)."""
        pf = pf or self.ent
        r = self.srv.request("GET", "/v2/operations-tasks/" + tid, token=self.ent_token,
                             portfolio=pf["portfolio_id"])
        self.assertEqual(r.status, 200, r)
        return r.body["data"]

    def test_d4_operations_tasks(self):
        ent, grp = self.ent, self.grp
        pf = ent["portfolio_id"]
        tasks, one = "/v2/operations-tasks", "/v2/operations-tasks/%s"
        ack, resolve = "/v2/operations-tasks/%s/acknowledge", "/v2/operations-tasks/%s/resolve"
        # an on-call rota of two levels: level 1 a rotation of WAW01 and KRK01
        # (GDN01 has nobody on call at level 1), level 2 an override for all
        rota = {"rotations": [{"name": "duty managers", "level": 1,
                               "properties": [self.prop(ent, "WAW01"), self.prop(ent, "KRK01")],
                               "first_handover": "2026-01-05T09:00",
                               "people": [{"name": "Anna Nowak", "email": "anna@contract.example",
                                           "phone": "+48600100200"},
                                          {"name": "Bob Smith", "email": "bob@contract.example"}]}],
                "overrides": [{"level": 2, "from": instant_ahead(-3600),
                               "to": instant_ahead(3600),
                               "person": {"name": "Oscar Override"}}]}
        rota_path = os.path.join(self.tmp, "rota.json")
        with open(rota_path, "w") as f:
            json.dump(rota, f)
        self.srv.ctl("oncall", "set", "--portfolio", pf, "--file", rota_path)
        # standard: 7 days to acknowledge (6 s at the time scale), so a task
        # of that tier stays unescalated while this case runs
        self.srv.ctl("sla-tier", "set", "--portfolio", pf, "--tier", "standard",
                     "--task-ack-minutes", "10080", "--task-escalate-minutes", "10080")
        r = self.srv.request("POST", "/v2/webhooks", token=self.ent_token, portfolio=pf,
                             body={"url": self.rx.url("/tasks"),
                                   "events": ["operations.task.escalated"]})
        self.assertEqual(r.status, 201, r)
        ctl_user(self.srv, pf, "ops-lead@contract.example", ["ops-manager"])
        manager = self.user_token(ent, "ops-lead@contract.example", "tasks:read tasks:write")
        approver = self.user_token(ent, scope="tasks:read tasks:write")
        # filing: platinum (the portfolio's) escalates at once, standard does not
        key = {"Idempotency-Key": "prism-task-%d" % time.time_ns()}
        r = self.v2("POST", tasks, 201, body=self.task_body(ent, "WAW01"), headers=key)
        esc = r.body["data"]
        self.assertEqual((esc["status"], esc["sla_tier"], esc["escalation_level"]),
                         ("open", "platinum", 0))
        self.assertEqual(esc["created_by"], "client:" + ent["client_id"])
        again = self.v2("POST", tasks, 201, body=self.task_body(ent, "WAW01"), headers=key)
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.assertEqual(again.body["data"]["id"], esc["id"])
        self.error(self.v2("POST", tasks, 422, body=self.task_body(ent, "KRK01"), headers=key),
                   "SVC-IDEMPOTENCY-KEY-REUSED")
        nobody = self.v2("POST", tasks, 201, body=self.task_body(
            ent, "GDN01", title="VIP arrival: suite 701", category="vip-arrival",
            priority="normal", sla_tier=None, due_at=None)).body["data"]
        user_made = self.v2("POST", tasks, 201, token=manager, body=self.task_body(
            ent, "WAW01", priority="urgent", sla_tier="gold")).body["data"]
        self.assertTrue(user_made["created_by"].startswith("user:usr_"), user_made)
        # refused bodies: nothing recorded
        for body in ({"priority": "asap"}, {"sla_tier": "diamond"}, {"title": "   "},
                     {"category": "has space"}, {"category": "c" * 33}, {"due_at": "tomorrow"},
                     {"assignee": "anna"}):
            r = self.v2("POST", tasks, 400, body=self.task_body(ent, "WAW01", **body), bad=True)
            self.assertEqual(r.body["error"]["code"], "SVC-VALIDATION-FAILED", body)
            self.assertEqual([d["field"] for d in r.body["error"]["details"]],
                             [next(iter(body))], r)
        self.error(self.v2("POST", tasks, 400, body={"title": "x"}, bad=True),
                   "SVC-VALIDATION-FAILED")
        e = self.error(self.v2("POST", tasks, 400, body=dict(self.task_body(ent, "WAW01"),
                                                              property_id=self.prop(grp, "ZAK01"))),
                       "SVC-VALIDATION-FAILED")
        self.assertEqual(e["details"], [{"field": "property_id",
                                         "issue": "is not a property of this portfolio"}])
        self.error(self.v2("POST", tasks, 415, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        reader = self.srv.access_token(ent["client_id"], ent["client_secret"], scope="tasks:read")
        self.error(self.v2("POST", tasks, 403, token=reader, body=self.task_body(ent, "WAW01")),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        waw = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                    scope="tasks:read tasks:write property:WAW01")
        self.error(self.v2("POST", tasks, 403, token=waw, body=self.task_body(ent, "KRK01")),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", tasks, 403, body=self.task_body(ent, "KRK01"),
                           headers={"X-Service-Property": self.prop(ent, "WAW01")}),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # escalation: WAW01's tasks to the rotation's person, then the
        # override's; GDN01's to nobody at level 1; the standard task (filed
        # now, acknowledged below well within its 6 s) not at all
        harness.wait_until(lambda: all(self.task_now(t["id"])["escalation_level"] == 2
                                       for t in (esc, nobody, user_made)), 15,
                           interval=0.05, what="two escalation levels of three tasks")
        calm = self.v2("POST", tasks, 201, body=self.task_body(
            ent, "KRK01", priority="low", sla_tier="standard",
            due_at="2026-12-01T19:00:00+01:00")).body["data"]
        self.assertEqual((calm["sla_tier"], calm["due_at"]),
                         ("standard", "2026-12-01T18:00:00.000Z"))
        r = self.v2("GET", one % esc["id"], 200)
        got = r.body["data"]
        self.assertEqual([x["level"] for x in got["escalations"]], [1, 2])
        self.assertEqual((got["escalations"][0]["on_call"]["source"],
                          got["escalations"][0]["on_call"]["from"]), ("rotation", "duty managers"))
        self.assertEqual(got["escalations"][1]["on_call"],
                         {"name": "Oscar Override", "source": "override", "from": 0})
        self.v2("GET", one % esc["id"], 304, headers={"If-None-Match": r.headers["etag"]})
        r = self.v2("GET", one % nobody["id"], 200)
        self.assertIsNone(r.body["data"]["escalations"][0]["on_call"])
        r = self.v2("GET", one % calm["id"], 200)
        self.assertEqual((r.body["data"]["status"], r.body["data"]["escalation_level"]),
                         ("open", 0))
        self.error(self.v2("GET", one % UNKNOWN["ot"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", one % esc["id"], 403, pf=grp), "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("GET", one % calm["id"], 403, token=waw),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # acknowledging: an ops-manager's user token only
        self.error(self.v2("POST", ack % calm["id"], 403), "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", ack % calm["id"], 403, token=approver),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", ack % calm["id"], 400, token=manager, body={"note": "x"},
                           bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", ack % calm["id"], 403, token=manager,
                           headers={"X-Service-Property": self.prop(ent, "WAW01")}),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", ack % calm["id"], 403, pf=grp), "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", ack % UNKNOWN["ot"], 404, token=manager), "SVC-NOT-FOUND")
        r = self.v2("POST", ack % calm["id"], 200, token=manager)
        self.assertEqual((r.body["data"]["status"], r.body["data"]["acknowledged_by"]),
                         ("acknowledged", "user:ops-lead@contract.example"))
        self.error(self.v2("POST", ack % calm["id"], 409, token=manager, body={}), "SVC-CONFLICT")
        key = {"Idempotency-Key": "prism-ack-%d" % time.time_ns()}
        r = self.v2("POST", ack % esc["id"], 200, token=manager, headers=key, body={})
        again = self.v2("POST", ack % esc["id"], 200, token=manager, headers=key, body={})
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.assertEqual(again.body["data"], r.body["data"])
        # lists
        r = self.v2("GET", tasks, 200)
        self.assertTrue({esc["id"], nobody["id"], calm["id"], user_made["id"]}
                        <= {x["id"] for x in r.body["data"]})
        r = self.v2("GET", tasks + "?escalated=true&property_id=" + self.prop(ent, "GDN01"), 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [nobody["id"]])
        r = self.v2("GET", tasks + "?escalated=false&sla_tier=standard", 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [calm["id"]])
        r = self.v2("GET", tasks + "?status=acknowledged&limit=1", 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [esc["id"]])
        cursor = r.body["meta"]["next_cursor"]
        self.assertIn('rel="next"', r.headers["link"])
        r = self.v2("GET", tasks + "?status=acknowledged&limit=1&cursor=" + cursor, 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [calm["id"]])
        self.error(self.v2("GET", tasks + "?cursor=" + cursor, 400), "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", tasks + "?status=closed", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", tasks + "?escalated=yes", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", tasks + "?sla_tier=diamond", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        r = self.v2("GET", tasks, 200, token=waw)
        self.assertEqual({x["property_id"] for x in r.body["data"]}, {self.prop(ent, "WAW01")})
        self.error(self.v2("GET", tasks + "?property_id=" + self.prop(ent, "KRK01"), 403,
                           token=waw), "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("GET", tasks, 403, token=self.srv.access_token(
            ent["client_id"], ent["client_secret"], scope="alerts:read")),
            "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(self.v2("GET", tasks, 200, pf=grp).body["data"], [])
        # resolving: acknowledged or open, once
        self.error(self.v2("POST", resolve % calm["id"], 400, token=manager,
                           body={"resolution": "x" * 2001}, bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", resolve % calm["id"], 403, token=approver),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        key = {"Idempotency-Key": "prism-resolve-%d" % time.time_ns()}
        r = self.v2("POST", resolve % esc["id"], 200, token=manager, headers=key,
                    body={"resolution": "Compressor replaced"})
        self.assertEqual((r.body["data"]["status"], r.body["data"]["resolution"]),
                         ("resolved", "Compressor replaced"))
        self.error(self.v2("POST", resolve % esc["id"], 422, token=manager, headers=key,
                           body={"resolution": "another"}), "SVC-IDEMPOTENCY-KEY-REUSED")
        self.error(self.v2("POST", resolve % esc["id"], 409, token=manager), "SVC-CONFLICT")
        self.error(self.v2("POST", ack % esc["id"], 409, token=manager), "SVC-CONFLICT")
        r = self.v2("POST", resolve % nobody["id"], 200, token=manager,
                    body={"resolution": None})
        self.assertEqual((r.body["data"]["acknowledged_by"], r.body["data"]["resolution"]),
                         (None, None))
        self.v2("POST", resolve % user_made["id"], 200, token=manager)
        self.v2("POST", resolve % calm["id"], 200, token=manager, body={})
        self.error(self.v2("POST", resolve % UNKNOWN["ot"], 404, token=manager), "SVC-NOT-FOUND")
        self.error(self.v2("POST", resolve % calm["id"], 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.v2("GET", one % nobody["id"], 200)
        self.v2("GET", one % nobody["id"], 304, headers={"If-None-Match": r.headers["etag"]})
        self.v2("GET", tasks + "?status=resolved", 200)
        # the real operations.task.escalated deliveries against the document:
        # two levels of each escalated task, user_made's (gold) included
        self.rx.wait_for(6, path="/tasks", timeout=30)
        got = [json.loads(d.body) for d in self.rx.received("/tasks")]
        self.assertEqual(sorted((b["data"]["task_id"], b["data"]["level"]) for b in got),
                         sorted((t["id"], lv) for t in (esc, nobody, user_made) for lv in (1, 2)))
        doc_path = os.path.join(self.tmp, "served-openapi.json")
        with open(doc_path, "w") as f:
            json.dump(self.doc, f)
        entries = [{"name": "/tasks#%d" % i, "headers": dict(d.headers),
                    "body_b64": base64.b64encode(d.body).decode("ascii")}
                   for i, d in enumerate(self.rx.received("/tasks"))]
        path = os.path.join(self.tmp, "task-deliveries.json")
        with open(path, "w") as f:
            json.dump(entries, f)
        v = oa.run(["node", VALIDATE_WEBHOOKS, doc_path, path], timeout=60)
        bad = [x for x in (json.loads(l) for l in v.stdout.splitlines() if l.strip())
               if "ok" in x and not x["ok"]]
        self.assertEqual(bad, [], v.stdout[-3000:] + v.stderr[-2000:])
        self.assertEqual(v.returncode, 0, v.stdout[-3000:] + v.stderr[-2000:])

    # webhooks --------------------------------------------------------------------------------

    def test_e_webhooks(self):
        ent, grp = self.ent, self.grp
        # a delivery of its own for the v1 retry's 202: the early one's
        # window (26 s from the suite's start) may be over on a slow machine
        r = self.srv.request("POST", "/v1/webhooks/%s/ping" % self.early_sub,
                             token=self.ent_token)
        self.assertEqual(r.status, 202, r)
        retry_dlv = r.body["data"]["deliveries"][0]["id"]
        # v1: create (its own secret), ping
        r = self.call("POST", "/v1/webhooks", 201, token=self.ent_token,
                      body={"url": self.rx.url("/v1"), "events": ["rate.suggested"],
                            "description": "contract test"})
        v1 = r.body["data"]
        self.assertTrue(v1["signing_secret"].startswith("whsec_"))
        r = self.call("POST", "/v1/webhooks/%s/ping" % v1["id"], 202, token=self.ent_token,
                      portfolio=ent["portfolio_id"])
        ping_v1 = r.body["data"]
        self.error(self.call("POST", "/v1/webhooks", 400, token=self.ent_token, bad=True,
                             body={"url": "http://example.com/x", "events": ["rate.suggested"]}),
                   "SVC-VALIDATION-FAILED")
        self.error(self.call("POST", "/v1/webhooks/%s/ping" % UNKNOWN["wh"], 404,
                             token=self.ent_token), "SVC-NOT-FOUND")
        # v2: create with a mirror (enterprise), the first one shows the portfolio secret
        r = self.v2("POST", "/v2/webhooks", 201,
                    body={"url": self.rx.url("/v2"), "mirror_url": self.rx.url("/v2-mirror"),
                          "events": ["rate.decision.published", "sso.user.provisioned"]})
        v2 = r.body["data"]
        r = self.v2("POST", "/v2/webhooks", 201,
                    body={"url": self.rx.url("/v2-down"), "events": ["rate.decision.reverted"]})
        v2b = r.body["data"]
        self.error(self.v2("POST", "/v2/webhooks", 403, pf=grp,
                           body={"url": self.rx.url("/g"), "mirror_url": self.rx.url("/gm"),
                                 "events": ["rate.decision.published"]}),
                   "SVC-PLAN-FEATURE-UNAVAILABLE")
        self.error(self.v2("POST", "/v2/webhooks", 400, bad=True,
                           body={"url": self.rx.url("/x"), "events": ["no.such.event"]}),
                   "SVC-VALIDATION-FAILED")
        r = self.v2("POST", "/v2/webhooks/%s/ping" % v2["id"], 202)
        ping_v2 = r.body["data"]
        self.error(self.v2("POST", "/v2/webhooks/%s/ping" % UNKNOWN["wh"], 404), "SVC-NOT-FOUND")
        r = self.v2("GET", "/v2/webhooks?limit=1", 200)
        self.assertIsInstance(r.body["meta"]["next_cursor"], str)
        self.v2("GET", "/v2/webhooks?limit=1&cursor=" + r.body["meta"]["next_cursor"], 200)
        r = self.v2("GET", "/v2/webhooks/" + v2["id"], 200)
        self.v2("GET", "/v2/webhooks/" + v2["id"], 304,
                headers={"If-None-Match": r.headers["etag"]})
        self.error(self.v2("GET", "/v2/webhooks/" + UNKNOWN["wh"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", "/v2/webhooks/" + v2["id"], 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # deliveries: the pings' and the early v1 ping's (dead-lettered)
        for p in (ping_v1, ping_v2):
            dlv = p["deliveries"][0]["id"]
            self.wait_delivery(dlv, ("delivered",))
            r = self.v2("GET", "/v2/webhooks/deliveries/" + dlv, 200)
            self.v2("GET", "/v2/webhooks/deliveries/" + dlv, 304,
                    headers={"If-None-Match": r.headers["etag"]})
        self.error(self.v2("GET", "/v2/webhooks/deliveries/" + UNKNOWN["dlv"], 404),
                   "SVC-NOT-FOUND")
        r = self.v2("GET", "/v2/webhooks/%s/deliveries" % v2["id"], 200)
        self.assertTrue(r.body["data"])
        self.v2("GET", "/v2/webhooks/%s/deliveries?state=delivered&limit=5" % v1["id"], 200)
        self.error(self.v2("GET", "/v2/webhooks/%s/deliveries" % UNKNOWN["wh"], 404),
                   "SVC-NOT-FOUND")
        early_dlv = self.early_dlv
        self.wait_delivery(early_dlv, ("dead_lettered",))
        r = self.v2("GET", "/v2/webhooks/deliveries/" + early_dlv, 200)
        self.assertEqual({a["http_status"] for a in r.body["data"]["attempts"]}, {500})
        self.v2("GET", "/v2/webhooks/%s/deliveries?state=dead_lettered" % self.early_sub, 200)
        mirror = ping_v2["deliveries"][1]["id"]
        self.wait_delivery(mirror, ("delivered",))
        self.v2("GET", "/v2/webhooks/deliveries/" + mirror, 200)
        r = self.v2("GET", "/v2/webhooks/dead-letters", 200)
        self.assertIn(early_dlv, [d["id"] for d in r.body["data"]])
        self.v2("GET", "/v2/webhooks/dead-letters?subscription_id=" + self.early_sub, 200)
        self.error(self.v2("GET", "/v2/webhooks/dead-letters?subscription_id=" + UNKNOWN["wh"],
                           404), "SVC-NOT-FOUND")
        # v1 retry (dead-lettered only) and v2 replay
        self.wait_delivery(retry_dlv, ("dead_lettered",))
        r = self.call("POST", "/v1/webhooks/deliveries/%s/retry" % retry_dlv, 202,
                      token=self.ent_token)
        self.assertEqual(r.body["data"]["state"], "pending")
        self.wait_delivery(retry_dlv, ("dead_lettered",))
        dlv1 = ping_v1["deliveries"][0]["id"]
        self.error(self.call("POST", "/v1/webhooks/deliveries/%s/retry" % dlv1, 409,
                             token=self.ent_token), "SVC-CONFLICT")
        self.error(self.call("POST", "/v1/webhooks/deliveries/%s/retry" % UNKNOWN["dlv"], 404,
                             token=self.ent_token), "SVC-NOT-FOUND")
        dlv2 = ping_v2["deliveries"][0]["id"]
        r = self.v2("POST", "/v2/webhooks/deliveries/%s/replay" % dlv2, 202)
        self.wait_delivery(dlv2, ("delivered",))
        self.error(self.v2("POST", "/v2/webhooks/deliveries/%s/replay" % UNKNOWN["dlv"], 404),
                   "SVC-NOT-FOUND")
        self.error(self.v2("POST", "/v2/webhooks/deliveries/%s/replay" % dlv2, 403, pf=grp),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # SLA and the signing secret
        month = datetime.date.today().strftime("%Y-%m")
        r = self.v2("GET", "/v2/webhooks/sla?month=" + month, 200)
        self.assertEqual(r.body["data"]["period"], month)
        self.error(self.v2("GET", "/v2/webhooks/sla?month=2026-13", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.v2("GET", "/v2/webhooks/sla", 400, bad=True)
        r = self.v2("POST", "/v2/webhooks/signing-secret/rotate", 200)
        self.assertTrue(r.body["data"]["signing_secret"].startswith("whsec_"))
        # delete
        self.v2("DELETE", "/v2/webhooks/" + v2b["id"], 204)
        self.error(self.v2("DELETE", "/v2/webhooks/" + v2b["id"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", "/v2/webhooks/" + v2b["id"], 404), "SVC-NOT-FOUND")

    # SCIM --------------------------------------------------------------------------------

    def test_f_scim_discovery(self):
        r = self.scim("GET", "/ServiceProviderConfig", 200)
        self.assertTrue(r.body["patch"]["supported"])
        self.scim("GET", "/ResourceTypes", 200)
        self.scim("GET", "/ResourceTypes/User", 200)
        self.scim("GET", "/ResourceTypes/Group", 200)
        self.scim("GET", "/ResourceTypes/Nope", 404, bad=True)
        self.scim("GET", "/Schemas", 200)
        for urn in (SCIM_USER_URN, SCIM_GROUP_URN,
                    "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"):
            self.scim("GET", "/Schemas/" + urn, 200)
        self.scim("GET", "/Schemas/urn:nope", 404, bad=True)
        r = self.get("/scim/v2/Users", 401, bad=True)
        self.assertEqual(r.body["status"], "401")
        self.scim("GET", "/Users", 401, token="rvo_scim_nope")

    def test_g_scim_users(self):
        user = {"schemas": [SCIM_USER_URN, "urn:ietf:params:scim:schemas:extension:"
                            "enterprise:2.0:User"],
                "userName": "ada@contract.example", "externalId": "ext-ada",
                "name": {"givenName": "Ada", "familyName": "Lovelace"},
                "displayName": "Ada Lovelace", "active": "True",
                "emails": [{"value": "ada@contract.example", "type": "work", "primary": True}],
                "roles": [{"value": "revenue-approver"}],
                "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {
                    "employeeNumber": "42", "department": "Revenue"}}
        r = self.scim("POST", "/Users", 201, body=user)
        u = r.body
        self.assertIs(u["active"], True)
        self.assertTrue(r.headers["location"].endswith("/scim/v2/Users/" + u["id"]))
        self.scim("POST", "/Users", 409, body=user)
        self.scim("POST", "/Users", 400, body={"schemas": [SCIM_USER_URN]}, bad=True)
        self.scim("POST", "/Users", 415, body="{}", headers={"Content-Type": "text/plain"},
                  bad=True)
        second = self.scim("POST", "/Users", 201, body={"schemas": [SCIM_USER_URN],
                                                        "userName": "bob@contract.example",
                                                        "active": False}).body
        q = urllib.parse.quote
        for f in ('userName eq "ada@contract.example"', 'userName co "contract"',
                  'userName sw "bob"', "externalId pr",
                  'userName sw "ada" and active eq true', 'userName eq "x" or displayName pr'):
            self.scim("GET", "/Users?filter=" + q(f), 200)
        r = self.scim("GET", "/Users?startIndex=1&count=1&attributes=userName", 200)
        self.assertEqual(r.body["itemsPerPage"], 1)
        self.scim("GET", "/Users?excludedAttributes=emails&sortBy=userName&sortOrder=descending",
                  200)
        self.scim("GET", "/Users?filter=" + q("userName zz 1"), 400)
        r = self.scim("GET", "/Users/" + u["id"], 200)
        etag = r.headers["etag"]
        self.scim("GET", "/Users/%s?attributes=userName" % u["id"], 200)
        self.scim("GET", "/Users/" + UNKNOWN["usr"], 404)
        put = {"schemas": [SCIM_USER_URN], "userName": "ada@contract.example",
               "displayName": "Ada King", "active": True,
               "roles": [{"value": "revenue-approver"}]}
        r = self.scim("PUT", "/Users/" + u["id"], 200, body=put, headers={"If-Match": etag})
        self.assertEqual(r.body["displayName"], "Ada King")
        self.scim("PUT", "/Users/" + u["id"], 412, body=put, headers={"If-Match": etag})
        self.scim("PUT", "/Users/" + UNKNOWN["usr"], 404, body=put)
        self.scim("PUT", "/Users/" + second["id"], 409, body=put)
        patch = scim_patch_body({"op": "replace", "path": "displayName", "value": "Ada L."},
                                {"op": "add", "path": "title", "value": "Revenue lead"})
        r = self.scim("PATCH", "/Users/" + u["id"], 204, body=patch)
        self.assertIn("etag", r.headers)
        r = self.scim("PATCH", "/Users/%s?attributes=displayName" % u["id"], 200,
                      body=scim_patch_body({"op": "replace", "value": {"active": "False"}}))
        self.assertEqual(r.body["displayName"], "Ada L.")
        # as Entra ID sends it: op capitalised, a string boolean
        self.scim("PATCH", "/Users/" + u["id"], 204, body=scim_patch_body(
            {"op": "Replace", "path": "active", "value": "True"},
            {"op": "Add", "path": 'emails[type eq "home"].value', "value": "ada@home.example"}))
        self.scim("PATCH", "/Users/" + u["id"], 400, bad=True,
                  body=scim_patch_body({"op": "jump", "path": "title"}))
        self.scim("PATCH", "/Users/" + UNKNOWN["usr"], 404, body=patch)
        self.scim("PATCH", "/Users/" + u["id"], 412, body=patch,
                  headers={"If-Match": 'W/"stale"'})
        self.scim("DELETE", "/Users/" + u["id"], 412, headers={"If-Match": 'W/"stale"'})
        self.scim("DELETE", "/Users/" + u["id"], 204)
        self.scim("DELETE", "/Users/" + u["id"], 404)
        self.scim("GET", "/Users/" + u["id"], 404)

    def test_h_scim_groups(self):
        u = self.scim("POST", "/Users", 201, body={"schemas": [SCIM_USER_URN],
                                                   "userName": "grace@contract.example"}).body
        v = self.scim("POST", "/Users", 201, body={"schemas": [SCIM_USER_URN],
                                                   "userName": "alan@contract.example"}).body
        r = self.scim("POST", "/Groups", 201,
                      body={"schemas": [SCIM_GROUP_URN], "displayName": "revenue-approver",
                            "externalId": "g-1", "members": [{"value": u["id"]}]})
        g = r.body
        self.scim("POST", "/Groups", 400, body={"schemas": [SCIM_GROUP_URN]}, bad=True)
        self.scim("GET", "/Groups", 200)
        self.scim("GET", "/Groups?filter=" +
                  urllib.parse.quote('displayName eq "revenue-approver"'), 200)
        self.scim("GET", "/Groups?excludedAttributes=members&count=5", 200)
        r = self.scim("GET", "/Groups/" + g["id"], 200)
        etag = r.headers["etag"]
        self.scim("GET", "/Groups/" + UNKNOWN["grp"], 404)
        put = {"schemas": [SCIM_GROUP_URN], "displayName": "revenue-approver",
               "members": [{"value": u["id"]}, {"value": v["id"]}]}
        r = self.scim("PUT", "/Groups/" + g["id"], 200, body=put, headers={"If-Match": etag})
        self.assertEqual(len(r.body["members"]), 2)
        self.scim("PUT", "/Groups/" + g["id"], 412, body=put, headers={"If-Match": etag})
        self.scim("PUT", "/Groups/" + UNKNOWN["grp"], 404, body=put)
        self.scim("PUT", "/Groups/" + g["id"], 400, body={"schemas": [SCIM_GROUP_URN]}, bad=True)
        self.scim("PATCH", "/Groups/" + g["id"], 204, body=scim_patch_body(
            {"op": "remove", "path": 'members[value eq "%s"]' % v["id"]}))
        r = self.scim("PATCH", "/Groups/%s?attributes=members" % g["id"], 200,
                      body=scim_patch_body({"op": "add", "path": "members",
                                            "value": [{"value": v["id"]}]}))
        self.assertEqual(len(r.body["members"]), 2)
        # Entra ID: remove members by a value array
        self.scim("PATCH", "/Groups/" + g["id"], 204, body=scim_patch_body(
            {"op": "Remove", "path": "members", "value": [{"value": v["id"]}]}))
        self.scim("PATCH", "/Groups/" + UNKNOWN["grp"], 404,
                  body=scim_patch_body({"op": "replace", "path": "displayName", "value": "x"}))
        self.scim("PATCH", "/Groups/" + g["id"], 412, headers={"If-Match": 'W/"stale"'},
                  body=scim_patch_body({"op": "replace", "path": "displayName", "value": "x"}))
        self.scim("DELETE", "/Groups/" + g["id"], 412, headers={"If-Match": 'W/"stale"'})
        self.scim("DELETE", "/Groups/" + g["id"], 204)
        self.scim("DELETE", "/Groups/" + g["id"], 404)

    # rate limiting --------------------------------------------------------------------------

    def test_i_rate_limited(self):
        """429 on a fresh portfolio whose allowance an operator set to 1."""
        pf = self.srv.ctl("portfolio", "create", "--name", "Contract 429", "--plan", "group")
        cli = self.srv.create_client(pf["id"], scopes="portfolios:read")
        tok = self.srv.access_token(cli["client_id"], cli["client_secret"])
        self.srv.ctl("portfolio", "set-rate-limit", "--portfolio", pf["id"], "--per-minute", "1")
        first = self.call("GET", "/v2/portfolios", 200, token=tok, portfolio=pf["id"])
        self.assertEqual(first.headers["x-service-ratelimit-remaining"], "0")
        r = self.call("GET", "/v2/portfolios", 429, token=tok, portfolio=pf["id"])
        self.error(r, "SVC-RATE-LIMITED")
        self.assertRegex(r.headers["retry-after"], r"^[0-9]+$")
        self.assertLessEqual(int(r.headers["retry-after"]), 60)

    # 405 and unknown routes (Prism: "Selected route not found") -----------------------------

    def test_j_method_not_allowed_on_every_path(self):
        for tpl, item in sorted(self.doc["paths"].items()):
            path = re.sub(r"\{[^}]+\}", "x", tpl)
            # the methods of every template the URL matches: DELETE
            # /v2/webhooks/dead-letters is deleteWebhookSubscription of the
            # id "dead-letters" (a 404), so Allow lists DELETE there
            documented = [m for m in ("GET", "PUT", "POST", "DELETE", "PATCH")
                          if self.matches(m, path)]
            method = next(m for m in PROBE_ORDER if m not in documented)
            r = harness.http_request(self.prism.port, method, path, timeout=30)
            vs = violations(r)
            self.assertEqual([v.get("message") for v in vs], ["Selected route not found"],
                             "%s %s: %r" % (method, path, r))
            self.assertEqual(r.status, 405, "%s %s: %r" % (method, path, r))
            allow = [m.strip() for m in r.headers["allow"].split(",")]
            expect = []
            for m in documented:
                expect += [m, "HEAD"] if m == "GET" else [m]
            self.assertEqual(sorted(allow), sorted(expect), "Allow of %s" % tpl)
            if "GET" in allow:
                self.assertEqual(allow[allow.index("GET") + 1], "HEAD", allow)
            harness.assert_common_headers(self, r)
            # what the document's MethodNotAllowed / ScimMethodNotAllowed say
            if tpl.startswith("/scim/"):
                harness.assert_scim_error(self, r, 405)
            else:
                harness.assert_error(self, r, 405, "SVC-METHOD-NOT-ALLOWED")
            for m in documented:
                if (m, tpl) in self.ops:
                    self.covered.setdefault(self.ops[(m, tpl)], set()).add("405*")
        r = harness.http_request(self.prism.port, "GET", "/v2/no-such-route")
        self.assertEqual([v.get("message") for v in violations(r)], ["Selected route not found"])
        harness.assert_error(self, r, 404, "SVC-NOT-FOUND")

    # guest messaging -------------------------------------------------------------------------

    def guest_item(self, pf, code, text="Is breakfast included?", direction="inbound",
                   external_id=None, seconds_ago=60, **guest):
        return {"property_id": self.prop(pf, code), "channel": "email", "direction": direction,
                "guest": guest, "text": text, "at": instant_ahead(-seconds_ago),
                "external_id": external_id or "crm-%d" % time.time_ns()}

    def thread_now(self, tid):
        """The thread as revopsd has it now (read directly, not through Prism)."""
        r = self.srv.request("GET", "/v2/guest-threads/" + tid, token=self.ent_token,
                             portfolio=self.ent["portfolio_id"])
        self.assertEqual(r.status, 200, r)
        return r.body["data"]

    @staticmethod
    def meta_body(pnid, from_=None, wamid=None, text=None, name=None, entry=None):
        """A notification as Meta posts it (one message), as compact ASCII
        JSON: bytes that JSON.stringify (Prism) writes back unchanged."""
        value = {"messaging_product": "whatsapp",
                 "metadata": {"display_phone_number": "48221234567", "phone_number_id": pnid}}
        if from_:
            value["contacts"] = [{"profile": {"name": name}, "wa_id": from_}]
            value["messages"] = [{"from": from_, "id": wamid, "timestamp": str(int(time.time())),
                                  "type": "text", "text": {"body": text}}]
        doc = {"object": "whatsapp_business_account",
               "entry": entry if entry is not None else
               [{"id": "102290129340398", "changes": [{"field": "messages", "value": value}]}]}
        return json.dumps(doc, separators=(",", ":")).encode("ascii")

    @staticmethod
    def meta_signed(raw, secret=WA_SECRET):
        return {"Content-Type": "application/json",
                "X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), raw,
                                                            hashlib.sha256).hexdigest()}

    def test_x_guest_messaging(self):
        # After test_e (whose v1 retry must come within the 26 s window the
        # set-up's early delivery opened) and before test_y, which waits for
        # that window to close anyway: this case runs in that wait.
        ent, grp = self.ent, self.grp
        pf = ent["portfolio_id"]
        feed, threads = "/v2/feeds/guest-messages", "/v2/guest-threads"
        one, msgs = "/v2/guest-threads/%s", "/v2/guest-threads/%s/messages"
        hook = "/channels/whatsapp/webhook"
        waw, krk = self.prop(ent, "WAW01"), self.prop(ent, "KRK01")
        # WAW01's WhatsApp number (wa-sim plays Meta: sends, statuses), a
        # keyword, and subscriptions to the three events
        self.srv.ctl("whatsapp", "set", "--portfolio", pf, "--property", waw,
                     "--phone-number-id", WA_PNID, "--access-token", WA_TOKEN,
                     "--app-secret", WA_SECRET, "--verify-token", WA_VERIFY)
        self.wa.config(self.srv.base_url + hook, WA_SECRET)
        self.srv.ctl("guest-keywords", "set", "--portfolio", pf, "--language", "*",
                     "--words", "lawyer")
        r = self.srv.request("POST", "/v1/webhooks", token=self.ent_token,
                             body={"url": self.rx.url("/guests-v1"),
                                   "events": ["whatsapp.received", "whatsapp.sent"]})
        self.assertEqual(r.status, 201, r)
        r = self.srv.request("POST", "/v2/webhooks", token=self.ent_token, portfolio=pf,
                             body={"url": self.rx.url("/guests-v2"),
                                   "events": ["guest.thread.escalated"]})
        self.assertEqual(r.status, 201, r)
        reader = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                       scope="guest-threads:read")
        waw_tok = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                        scope="guest-threads:read guest-threads:write "
                                              "property:WAW01")
        concierge = self.user_token(ent, scope="guest-threads:read guest-threads:write")

        # the feed: an e-mail question answered in the same batch (no wait
        # left), a keyword (escalates at once), a duplicate, rejected items
        anna = {"email": "Anna.Nowak@Contract.example", "name": "Anna"}
        first = self.guest_item(ent, "KRK01", seconds_ago=120, **anna)
        items = [first,
                 self.guest_item(ent, "KRK01", "Yes, it is.", "outbound", seconds_ago=60,
                                 email="anna.nowak@contract.example"),
                 self.guest_item(ent, "GDN01", "My lawyer will call you", phone="+48 600-300-400",
                                 email=None, name=None),
                 dict(first, text="asked again"),
                 self.guest_item(ent, "KRK01", seconds_ago=-3600, **anna),
                 self.guest_item(ent, "KRK01", phone="12"),
                 self.guest_item(grp, "ZAK01", **anna)]
        key = {"Idempotency-Key": "prism-guests-%d" % time.time_ns()}
        d = self.feed_batch(feed, items, key)
        self.assertEqual([x.get("escalated") for x in d["results"][:4]],
                         [False, False, True, False])
        anna_tid, lawyer_tid = d["results"][0]["thread_id"], d["results"][2]["thread_id"]
        self.assertEqual((d["results"][1]["thread_id"], d["results"][3]["thread_id"]),
                         (anna_tid, anna_tid))
        self.assertEqual(d["results"][3]["id"], d["results"][0]["id"])
        self.assertEqual([[x["field"] for x in res["error"]["details"]]
                          for res in d["results"][4:6]],
                         [["items[4].at"], ["items[5].guest.phone"]])
        self.assertEqual([x["error"]["code"] for x in d["results"][4:]],
                         ["SVC-VALIDATION-FAILED"] * 2 + ["SVC-AUTH-INSUFFICIENT-ROLE"])
        again = self.v2("POST", feed, 200, body={"items": items}, headers=key)
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.assertEqual(again.body["data"], d)
        self.error(self.v2("POST", feed, 422, body={"items": items[:1]}, headers=key),
                   "SVC-IDEMPOTENCY-KEY-REUSED")
        # 51 messages of one guest in one batch, the last an answer: more
        # than a thread's first page of 50
        many = [self.guest_item(ent, "GDN01", "message %d" % i, seconds_ago=600 - i,
                                email="many@contract.example") for i in range(50)]
        many.append(self.guest_item(ent, "GDN01", "All answered", "outbound", seconds_ago=10,
                                    email="many@contract.example"))
        d = self.feed(feed, many)
        self.assertEqual((d["created"], d["rejected"]), (51, 0))
        many_tid = d["results"][0]["thread_id"]
        # refused batches: nothing recorded
        self.error(self.feed(feed, [], 400, bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 400, body={"items": ["hello"]}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", feed, 415, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        self.error(self.feed(feed, items[:1], 403, token=reader), "SVC-AUTH-INSUFFICIENT-ROLE")

        # Meta's webhook: the verify handshake
        q = {"hub.mode": "subscribe", "hub.verify_token": WA_VERIFY, "hub.challenge": "1158201444"}
        r = self.get(hook + "?" + urllib.parse.urlencode(q))
        self.assertEqual(r.raw, b"1158201444")
        self.assertTrue(r.headers["content-type"].startswith("text/plain"), r)
        self.error(self.get(hook + "?" + urllib.parse.urlencode(
            dict(q, **{"hub.verify_token": "not-a-verify-token"})), 403),
            "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.get(hook + "?" + urllib.parse.urlencode(
            dict(q, **{"hub.mode": "unsubscribe"})), 400, bad=True), "SVC-REQUEST-MALFORMED")
        self.error(self.get(hook + "?hub.mode=subscribe&hub.verify_token=" + WA_VERIFY, 400,
                            bad=True), "SVC-REQUEST-MALFORMED")
        # a guest's message, signed; Meta's retry of it is a duplicate
        zoe = "48600500600"
        wamid = "wamid.contract%d" % time.time_ns()
        raw = self.meta_body(WA_PNID, zoe, wamid, "Is the spa open tonight?", "Zoe")
        for _ in range(2):
            r = self.call("POST", hook, 200, headers=self.meta_signed(raw), body=raw)
            self.assertEqual(r.body, {})
        # refused: nothing recorded
        other = self.meta_body(WA_PNID, "48600500601", "wamid.refused%d" % time.time_ns(),
                               "forged", "Mallory")
        self.error(self.call("POST", hook, 401, headers=self.meta_signed(other, "wrong-secret"),
                             body=other), "SVC-AUTH-UNAUTHENTICATED")
        self.error(self.call("POST", hook, 401, headers={"Content-Type": "application/json"},
                             body=other, bad=True), "SVC-AUTH-UNAUTHENTICATED")
        nobody = self.meta_body("999000111", "48600500601", "wamid.nobody%d" % time.time_ns(),
                                "to no known number", "Mallory")
        self.error(self.call("POST", hook, 401, headers=self.meta_signed(nobody), body=nobody),
                   "SVC-AUTH-UNAUTHENTICATED")
        bad = b'{"object":"whatsapp_business_account","entry":"x"}'
        self.error(self.call("POST", hook, 400, headers=self.meta_signed(bad), body=bad,
                             bad=True), "SVC-VALIDATION-FAILED")
        bad = self.meta_body(WA_PNID, entry=[{"changes": [{"value": {"metadata": {}}}]}])
        self.error(self.call("POST", hook, 400, headers=self.meta_signed(bad), body=bad,
                             bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.call("POST", hook, 400, headers=self.meta_signed(b"[1]"), body=b"[1]",
                             bad=True), "SVC-REQUEST-MALFORMED")
        r = self.srv.request("GET", threads + "?guest=%2B48600500601", token=self.ent_token,
                             portfolio=pf)
        self.assertEqual(r.body["data"], [], r)
        # Meta's own serialisation (\u escapes), signed over its bytes: what
        # Prism re-serialises breaks the signature; revopsd takes it directly
        ans = self.wa.inbound(WA_PNID, zoe, "Und die Sauna?", name="Zoë")
        self.assertEqual(ans["statuses"], [200], ans)
        meta_raw = ans["body"].encode("ascii")
        self.assertIn(b"zo\\u00eb", meta_raw.lower())
        self.error(self.call("POST", hook, 401, headers=self.meta_signed(meta_raw),
                             body=meta_raw), "SVC-AUTH-UNAUTHENTICATED")
        r = harness.http_request(self.srv.port, "POST", hook, self.meta_signed(meta_raw),
                                 meta_raw)
        self.assertEqual((r.status, r.body), (200, {}), r)

        # threads; zoe's once its wait (platinum: 10 minutes to answer, 6 ms
        # at the time scale) escalated, so it does not change between the
        # GET and its HEAD (a body crossing the compression threshold would
        # change Vary)
        r = self.srv.request("GET", threads + "?guest=%2B" + zoe, token=self.ent_token,
                             portfolio=pf)
        zoe_tid = r.body["data"][0]["id"]
        harness.wait_until(lambda: self.thread_now(zoe_tid)["status"] == "escalated", 15,
                           interval=0.05, what="the unanswered WhatsApp thread escalated")
        r = self.v2("GET", threads + "?guest=%2B" + zoe, 200)
        [zt] = r.body["data"]
        self.assertEqual((zt["id"], zt["guest"]["phones"], zt["guest"]["name"], zt["properties"]),
                         (zoe_tid, ["+" + zoe], "Zoe", [waw]))
        r = self.v2("GET", threads, 200)
        self.assertTrue({anna_tid, lawyer_tid, many_tid, zoe_tid}
                        <= {x["id"] for x in r.body["data"]})
        r = self.v2("GET", threads + "?guest=ANNA.NOWAK%40contract.example", 200)
        [t] = r.body["data"]
        self.assertEqual((t["id"], t["status"], t["escalated"], t["waiting_since"]),
                         (anna_tid, "open", False, None))
        self.assertEqual((t["guest"]["emails"], t["guest"]["name"], t["last_message"]["text"]),
                         (["anna.nowak@contract.example"], "Anna", "Yes, it is."))
        r = self.v2("GET", threads + "?status=escalated&property_id=" +
                    self.prop(ent, "GDN01"), 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [lawyer_tid])
        self.assertEqual(r.body["data"][0]["escalation_reason"], "keyword")
        r = self.v2("GET", threads + "?escalated=false&property_id=" + krk, 200)
        self.assertEqual([x["id"] for x in r.body["data"]], [anna_tid])
        r = self.v2("GET", threads + "?escalated=true&limit=1", 200)
        cursor = r.body["meta"]["next_cursor"]
        self.assertIn('rel="next"', r.headers["link"])
        r2 = self.v2("GET", threads + "?escalated=true&limit=1&cursor=" + cursor, 200)
        self.assertEqual({x["id"] for x in r.body["data"] + r2.body["data"]},
                         {lawyer_tid, zoe_tid})
        self.error(self.v2("GET", threads + "?cursor=" + cursor, 400), "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", threads + "?status=closed", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", threads + "?escalated=yes", 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", threads + "?guest=" + "x" * 255, 400, bad=True),
                   "SVC-REQUEST-MALFORMED")
        r = self.v2("GET", threads, 200, token=waw_tok)
        self.assertEqual([x["id"] for x in r.body["data"]], [zoe_tid])
        self.error(self.v2("GET", threads + "?property_id=" + krk, 403, token=waw_tok),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("GET", threads, 403, token=self.srv.access_token(
            ent["client_id"], ent["client_secret"], scope="tasks:read")),
            "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(self.v2("GET", threads, 200, pf=grp).body["data"], [])
        # one thread: its first 50 messages, the rest on the path it names
        r = self.v2("GET", one % many_tid, 200)
        t = r.body["data"]
        self.assertEqual(len(t["messages"]), 50)
        self.assertEqual(t["messages_next"], "/v2/guest-threads/%s/messages?after=%s"
                         % (many_tid, t["messages"][-1]["id"]))
        self.assertNotIn("etag", r.headers)
        r = self.v2("GET", t["messages_next"], 200)
        self.assertEqual([(m["direction"], m["text"]) for m in r.body["data"]],
                         [("outbound", "All answered")])
        r = self.v2("GET", one % lawyer_tid, 200)
        t = r.body["data"]
        self.assertEqual((t["status"], t["escalated"], t["escalation_reason"],
                          t["guest"]["phones"], t["messages_next"]),
                         ("escalated", True, "keyword", ["+48600300400"], None))
        self.v2("GET", one % zoe_tid, 200, token=waw_tok)
        self.error(self.v2("GET", one % UNKNOWN["gt"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", one % anna_tid, 403, pf=grp), "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("GET", one % anna_tid, 403, token=waw_tok),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        # its messages, paginated
        r = self.v2("GET", msgs % zoe_tid, 200)
        self.assertEqual([(m["channel"], m["direction"], m["status"], m["external_id"])
                          for m in r.body["data"]],
                         [("whatsapp", "inbound", "received", wamid),
                          ("whatsapp", "inbound", "received", ans["wamid"])])
        r = self.v2("GET", msgs % anna_tid + "?limit=1", 200)
        self.assertEqual(r.body["data"][0]["text"], "Is breakfast included?")
        cursor = r.body["meta"]["next_cursor"]
        self.assertIn('rel="next"', r.headers["link"])
        r = self.v2("GET", msgs % anna_tid + "?limit=1&cursor=" + cursor, 200)
        self.assertEqual((r.body["data"][0]["text"], r.body["data"][0]["created_by"]),
                         ("Yes, it is.", "client:" + ent["client_id"]))
        self.assertIsNone(r.body["meta"]["next_cursor"])
        self.error(self.v2("GET", msgs % lawyer_tid + "?cursor=" + cursor, 400),
                   "SVC-REQUEST-MALFORMED")
        self.error(self.v2("GET", msgs % UNKNOWN["gt"], 404), "SVC-NOT-FOUND")
        self.error(self.v2("GET", msgs % anna_tid, 403, pf=grp), "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("GET", msgs % anna_tid, 403, token=waw_tok),
                   "SVC-AUTH-INSUFFICIENT-ROLE")

        # answering with a template: sent to wa-sim, delivered, reported
        tpl = {"name": "spa_hours", "language": "en_US", "parameters": ["21:00"]}
        body = {"property_id": waw, "template": tpl}
        key = {"Idempotency-Key": "prism-reply-%d" % time.time_ns()}
        r = self.v2("POST", msgs % zoe_tid, 202, token=concierge, body=body, headers=key)
        sent = r.body["data"]
        self.assertEqual((sent["status"], sent["direction"], sent["template"], sent["text"]),
                         ("queued", "outbound", tpl, None))
        self.assertTrue(sent["created_by"].startswith("user:usr_"), sent)
        again = self.v2("POST", msgs % zoe_tid, 202, token=concierge, body=body, headers=key)
        self.assertEqual(again.headers.get("idempotent-replayed"), "true")
        self.assertEqual(again.body["data"], sent)
        self.error(self.v2("POST", msgs % zoe_tid, 422, token=concierge, headers=key,
                           body=dict(body, template=dict(tpl, parameters=[]))),
                   "SVC-IDEMPOTENCY-KEY-REUSED")
        self.assertEqual(self.thread_now(zoe_tid)["status"], "open")
        # refusals: nothing queued
        self.error(self.v2("POST", msgs % zoe_tid, 400, body=dict(body, property_id=krk)),
                   "SVC-VALIDATION-FAILED")
        e = self.error(self.v2("POST", msgs % zoe_tid, 400,
                               body=dict(body, property_id=self.prop(grp, "ZAK01"))),
                       "SVC-VALIDATION-FAILED")
        self.assertEqual(e["details"], [{"field": "property_id",
                                         "issue": "is not a property of this portfolio"}])
        for t in ({"name": "spa_hours", "language": "??"}, {"name": "  ", "language": "en"},
                  dict(tpl, parameters=["x"] * 21), dict(tpl, header="x")):
            self.error(self.v2("POST", msgs % zoe_tid, 400, body=dict(body, template=t),
                               bad=True), "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", msgs % zoe_tid, 400, body={"template": tpl}, bad=True),
                   "SVC-VALIDATION-FAILED")
        self.error(self.v2("POST", msgs % zoe_tid, 415, body="{}", bad=True,
                           headers={"Content-Type": "text/plain"}), "SVC-UNSUPPORTED-MEDIA-TYPE")
        self.error(self.v2("POST", msgs % zoe_tid, 403, token=reader, body=body),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        krk_tok = self.srv.access_token(ent["client_id"], ent["client_secret"],
                                        scope="guest-threads:write property:KRK01")
        self.error(self.v2("POST", msgs % zoe_tid, 403, token=krk_tok, body=body),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", msgs % anna_tid, 403, pf=grp,
                           body=dict(body, property_id=self.prop(grp, "ZAK01"))),
                   "SVC-AUTH-INSUFFICIENT-ROLE")
        self.error(self.v2("POST", msgs % UNKNOWN["gt"], 404, body=body), "SVC-NOT-FOUND")
        self.error(self.v2("POST", msgs % anna_tid, 409, body=body), "SVC-CONFLICT")

        def delivered():
            m = [x for x in self.v2("GET", msgs % zoe_tid, 200).body["data"]
                 if x["id"] == sent["id"]]
            return m[0] if m and m[0]["status"] == "delivered" else None
        m = harness.wait_until(delivered, 15, interval=0.1, what="the answer delivered")
        [out] = [x for x in self.wa.sent() if x["to"] == zoe]
        self.assertEqual((m["external_id"], m["attempts"], out["phone_number_id"]),
                         (out["wamid"], 1, WA_PNID))
        self.assertEqual(out["body"]["template"]["components"][0]["parameters"],
                         [{"type": "text", "text": "21:00"}])

        # the real deliveries against the document: whatsapp.received (two
        # messages: the retry emitted nothing), whatsapp.sent, and
        # guest.thread.escalated (the keyword, the unanswered WhatsApp guest)
        self.rx.wait_for(3, path="/guests-v1", timeout=30)
        self.rx.wait_for(2, path="/guests-v2", timeout=30)
        time.sleep(0.5)  # anything more would arrive meanwhile
        v1 = [json.loads(x.body) for x in self.rx.received("/guests-v1")]
        self.assertEqual(sorted((e["type"], e["data"]["message_id"]) for e in v1),
                         sorted([("whatsapp.received", x["id"]) for x in
                                 self.thread_now(zoe_tid)["messages"]
                                 if x["direction"] == "inbound"] +
                                [("whatsapp.sent", sent["id"])]))
        self.assertEqual({e["property_id"] for e in v1}, {waw})
        v2 = [json.loads(x.body) for x in self.rx.received("/guests-v2")]
        self.assertEqual(sorted((e["data"]["thread_id"], e["data"]["reason"],
                                 e["data"]["keyword"]) for e in v2),
                         sorted([(lawyer_tid, "keyword", "lawyer"),
                                 (zoe_tid, "unanswered", None)]))
        doc_path = os.path.join(self.tmp, "served-openapi.json")
        with open(doc_path, "w") as f:
            json.dump(self.doc, f)
        entries = [{"name": "%s#%d" % (path, i), "headers": dict(x.headers),
                    "body_b64": base64.b64encode(x.body).decode("ascii")}
                   for path in ("/guests-v1", "/guests-v2")
                   for i, x in enumerate(self.rx.received(path))]
        path = os.path.join(self.tmp, "guest-deliveries.json")
        with open(path, "w") as f:
            json.dump(entries, f)
        v = oa.run(["node", VALIDATE_WEBHOOKS, doc_path, path], timeout=60)
        bad = [x for x in (json.loads(l) for l in v.stdout.splitlines() if l.strip())
               if "ok" in x and not x["ok"]]
        self.assertEqual(bad, [], v.stdout[-3000:] + v.stderr[-2000:])
        self.assertEqual(v.returncode, 0, v.stdout[-3000:] + v.stderr[-2000:])

    # the v1 retry window ---------------------------------------------------------------------

    def test_y_retry_window_expired(self):
        """30 days / SCALE (26 s) after the early ping's event, its manual
        retry is 410. Polled on revopsd directly (each retry before then is
        202 and one more failing attempt, or 409 while that attempt runs);
        then once through Prism."""
        dlv = self.early_dlv
        window = 30 * 86400 / SCALE

        def expired():
            r = harness.http_request(self.srv.port, "POST",
                                     "/v1/webhooks/deliveries/%s/retry" % dlv,
                                     token=self.ent_token)
            self.assertIn(r.status, (202, 409, 410), r)
            return r.status == 410
        harness.wait_until(expired, window + 10, interval=0.25, what="410 for " + dlv)
        self.error(self.call("POST", "/v1/webhooks/deliveries/%s/retry" % dlv, 410,
                             token=self.ent_token), "SVC-WINDOW-EXPIRED")

    # coverage ---------------------------------------------------------------------------------

    def test_z_every_operation_covered(self):
        ops = set(self.ops.values())
        lines = []
        for (m, tpl), op in sorted(self.ops.items(), key=lambda x: (x[0][1], x[0][0])):
            seen = sorted(self.covered.get(op, ()), key=str)
            lines.append("  %-6s %-45s %-34s %s%s" % (m, tpl, op, " ".join(map(str, seen)),
                                                     " +HEAD" if op in self.heads else ""))
        sys.stderr.write("\nPrism contract: %d operations of %d covered (405* = probed "
                         "outside Prism; HEAD = sent to revopsd directly); ready after "
                         "%.1fs, %.1fs so far\n%s\n"
                         % (len(ops & set(self.covered)), len(ops), self.ready_after,
                            time.monotonic() - self.started, "\n".join(lines)))
        covered = {op for op, st in self.covered.items() if st - {"405*"}}
        self.assertEqual(sorted(ops - covered), [], "operations without a contract case")
        self.assertEqual(sorted(covered - ops), [])
        gets = {op for (m, _), op in self.ops.items() if m == "GET"}
        self.assertEqual(sorted(gets - self.heads), [], "GET operations without a HEAD check")
        for op in ops:
            self.assertTrue([s for s in self.covered[op] if isinstance(s, int) and s < 300],
                            "%s: no success case" % op)


if __name__ == "__main__":
    unittest.main(verbosity=2)
