"""Governed rate decisions (POST/GET /v2/rate-decisions, audit trail):
request validation, scope, brand-ceiling and approver governance with their
stored rejected decisions, reading and listing, the hash-chained audit trail
(checked independently here) and its tamper resistance, idempotent replay.

The server writes to a real pms-sim process (pmssim.py); every refusal
asserts that the simulator received nothing (GET /written unchanged).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import idp as idplib  # noqa: E402
import pmssim  # noqa: E402
from harness import (RD_ID_RE, DATETIME_RE, assert_audit_chain, assert_error,  # noqa: E402
                     assert_success, ctl_events, ctl_user, idp_set, rate_decision_body,
                     saml_grant, scim_patch_body, scim_request, scim_token_for)

PUBLIC_URL = "http://sp.test"
ENTITY = "https://idp.rate-decisions.example/saml"
APPROVER = "approver@x.example"
PLAIN = "plain@x.example"          # an active user without revenue-approver
GONE = "gone@x.example"            # had revenue-approver, deactivated over SCIM
GROUPED = "grouped@x.example"      # revenue-approver only through a SCIM group
SELF = "self@x.example"            # revenue-approver who also proposes (SAML)
APPROVER_B = "approver-b@x.example"  # revenue-approver of portfolio B only
UNKNOWN_PROP = "prop_01AAAAAAAAAAAAAAAAAAAAAAAA"
UNKNOWN_CEILING = "bc_01AAAAAAAAAAAAAAAAAAAAAAAA"
UNKNOWN_RD = "rd_01AAAAAAAAAAAAAAAAAAAAAAAA"
DECISION_KEYS = {"id", "status", "properties", "room_type_code", "date_range", "proposed_rate",
                 "governance", "proposed_by", "properties_written", "pms_write_receipts",
                 "audit_trail_url", "failure", "revert", "created_at", "updated_at"}
CREATE_KEYS = {"id", "status", "properties_written", "audit_trail_url", "pms_write_receipts"}
BODY_MAX = 1024 * 1024

ENV = None


class Env:
    pass


def _ceiling(srv, pf, brand, currency, max_units, valid_from, valid_to=None, rooms=None):
    args = ["ceiling", "add", "--portfolio", pf, "--brand", brand, "--currency", currency,
            "--max", str(max_units), "--valid-from", valid_from]
    if valid_to:
        args += ["--valid-to", valid_to]
    if rooms:
        args += ["--room-types", rooms]
    return srv.ctl(*args)


def _ok(r, status, what):
    if r.status != status:
        raise AssertionError("%s: %r" % (what, r))
    return r.body


def setUpModule():
    global ENV
    e = Env()
    e.idp = None
    e.sim, e.srv = pmssim.start_with_server((), ["--public-url", PUBLIC_URL])
    srv = e.srv
    try:
        # Portfolio A: four Aurora/PLN hotels, a Borealis one and an Aurora/EUR one.
        e.a = srv.seed_portfolio("enterprise", 4, brand="Aurora")
        e.a_ids = [p["id"] for p in e.a.properties]
        e.a_bor = srv.add_property(e.a.id, brand="Borealis")
        code = srv.next_code()
        e.a_eur = srv.ctl("property", "add", "--portfolio", e.a.id, "--name", "Hotel " + code,
                          "--brand", "Aurora", "--code", code, "--billing-id", "BILL-" + code,
                          "--timezone", "Europe/Berlin", "--currency", "EUR")
        e.c_open = e.a.ceiling  # Aurora, PLN 1200.00, all room types, 2026-01-01..open
        e.c_narrow = _ceiling(srv, e.a.id, "Aurora", "PLN", 50000, "2026-01-01", "2026-12-31",
                              "DBL,TWN")
        e.c_eur = _ceiling(srv, e.a.id, "Aurora", "EUR", 30000, "2026-01-01")
        e.c_bor = _ceiling(srv, e.a.id, "Borealis", "PLN", 80000, "2026-01-01")
        e.writer, e.tok = srv.client_token(e.a.id, "rates:read rates:write portfolios:read",
                                           name="writer")
        e.reader, e.read_tok = srv.client_token(e.a.id, "rates:read portfolios:read",
                                                name="reader")
        ctl_user(srv, e.a.id, APPROVER, ["revenue-approver"])
        ctl_user(srv, e.a.id, PLAIN, ["finance-operator", "ops-manager"])
        gone = ctl_user(srv, e.a.id, GONE, ["revenue-approver"], display_name="Gone User")
        ctl_user(srv, e.a.id, SELF, ["revenue-approver"])
        e.scim_a = scim_token_for(srv, e.a.id)
        r = scim_request(srv, "PATCH", "/Users/" + gone["id"], e.scim_a,
                         scim_patch_body({"op": "replace", "value": {"active": False}}))
        if r.status not in (200, 204):
            raise AssertionError("SCIM deactivation failed: %r" % (r,))
        user = _ok(scim_request(srv, "POST", "/Users", e.scim_a, {
            "schemas": [harness.SCIM_USER_URN], "userName": GROUPED}), 201, "SCIM user")
        _ok(scim_request(srv, "POST", "/Groups", e.scim_a, {
            "schemas": [harness.SCIM_GROUP_URN], "displayName": "revenue-approver",
            "members": [{"value": user["id"]}]}), 201, "SCIM group")
        if idplib.tools_available():
            e.idp = idplib.IdP(ENTITY, audience=PUBLIC_URL + "/saml/sp",
                               recipient=PUBLIC_URL + "/oauth/token")
            idp_set(srv, e.a.id, ENTITY, e.idp.cert_path)
        # Portfolio B: someone else's.
        e.b = srv.seed_portfolio("group", 2, brand="Aurora")
        ctl_user(srv, e.b.id, APPROVER_B, ["revenue-approver"])
    except BaseException:
        _teardown(e, check=False)
        raise
    ENV = e


def _teardown(e, check=True):
    try:
        if e.srv is not None:
            if check:
                e.srv.close()
            else:
                e.srv.cleanup()
    finally:
        if e.idp is not None:
            e.idp.cleanup()
        if check:
            e.sim.close()
        else:
            e.sim.cleanup()


def tearDownModule():
    if ENV is not None:
        _teardown(ENV)


class Base(unittest.TestCase):
    """Helpers on portfolio A (writer token unless told otherwise)."""

    maxDiff = None

    @property
    def srv(self):
        return ENV.srv

    def body(self, props=None, ceiling=None, approver=APPROVER, **kw):
        return rate_decision_body(ENV.a_ids[:1] if props is None else props,
                                  ENV.c_open["id"] if ceiling is None else ceiling, approver,
                                  **kw)

    def post(self, body, token=None, portfolio=None, headers=None, property=None):
        return self.srv.request("POST", "/v2/rate-decisions", headers=headers, body=body,
                                token=ENV.tok if token is None else token,
                                portfolio=ENV.a.id if portfolio is None else portfolio,
                                property=property)

    def get(self, path, token=None, portfolio=None, property=None):
        return self.srv.request("GET", path, token=ENV.tok if token is None else token,
                                portfolio=ENV.a.id if portfolio is None else portfolio,
                                property=property)

    def written_count(self):
        return len(ENV.sim.written())

    def assert_nothing_written(self, before):
        after = ENV.sim.written()
        self.assertEqual(after[before:], [], "the PMS received writes it should not have")

    def assert_decision_error(self, r, status, code):
        """An error envelope that also names the decision it recorded."""
        self.assertEqual(r.status, status, r)
        rid = harness.assert_common_headers(self, r)
        self.assertIsInstance(r.body, dict, r)
        self.assertEqual(list(r.body), ["error"], r)
        err = r.body["error"]
        self.assertEqual(err.get("code"), code, r)
        self.assertEqual(err.get("request_id"), rid, r)
        self.assertIsInstance(err.get("message"), str, r)
        self.assertTrue(err["message"], r)
        self.assertTrue(set(err) <= {"code", "message", "request_id", "details", "decision_id"},
                        r)
        self.assertIsInstance(err.get("decision_id"), str, r)
        self.assertRegex(err["decision_id"], RD_ID_RE)
        self.assertIsInstance(err.get("details"), list, r)
        return err

    def decision(self, did, **kw):
        data, meta = assert_success(self, self.get("/v2/rate-decisions/" + did, **kw))
        return data, meta

    def trail(self, did, **kw):
        data, _ = assert_success(self, self.get("/v2/rate-decisions/%s/audit-trail" % did, **kw))
        self.assertEqual(data.get("decision_id"), did, data)
        return data

    def kinds(self, entries):
        return [e["kind"] for e in entries]

    def publish(self, body, **kw):
        """A publish expected to succeed; returns the created data."""
        r = self.post(body, **kw)
        data, meta = assert_success(self, r, 201)
        self.assertEqual(data.get("status"), "published", r)
        self.assertEqual(data.get("properties_written"), body["properties"], r)
        return data

    def assert_validation(self, body, field, issue=None, only=True, status=400):
        before = self.written_count()
        r = self.post(body)
        err = assert_error(self, r, status, "SVC-VALIDATION-FAILED")
        details = err.get("details")
        self.assertIsInstance(details, list, r)
        for d in details:
            self.assertEqual(set(d), {"field", "issue"}, r)
            self.assertIsInstance(d["issue"], str, r)
            self.assertTrue(d["issue"], r)
        fields = [d["field"] for d in details]
        self.assertIn(field, fields, r)
        if only:
            self.assertEqual(fields, [field], "one details entry for one problem: %r" % (r,))
        if issue is not None:
            self.assertIn({"field": field, "issue": issue}, details, r)
        self.assert_nothing_written(before)
        return details


def setpath(body, path, value=None, delete=False):
    """Sets (or deletes) a dotted path in a nested dict; returns body."""
    parts = path.split(".")
    obj = body
    for p in parts[:-1]:
        obj = obj[p]
    if delete:
        del obj[parts[-1]]
    else:
        obj[parts[-1]] = value
    return body


# ----------------------------------------------------------------------------------------
class ValidationTest(Base):
    REQUIRED = ["properties", "room_type_code", "date_range", "date_range.from", "date_range.to",
                "proposed_rate", "proposed_rate.currency", "proposed_rate.minor_units",
                "governance", "governance.brand_ceiling_id",
                "governance.approver_saml_subject", "governance.justification"]

    def test_every_field_is_required(self):
        for path in self.REQUIRED:
            with self.subTest(missing=path):
                self.assert_validation(setpath(self.body(), path, delete=True), path,
                                       "is required")

    def test_empty_body_lists_each_missing_field(self):
        details = self.assert_validation({}, "properties", only=False)
        self.assertEqual(sorted(d["field"] for d in details),
                         sorted(["properties", "room_type_code", "date_range", "proposed_rate",
                                 "governance"]))
        self.assertTrue(all(d["issue"] == "is required" for d in details), details)

    def test_unknown_fields_one_entry_each(self):
        body = self.body()
        body["foo"] = 1
        body["governance"]["extra"] = "x"
        body["date_range"]["days"] = 3
        details = self.assert_validation(body, "foo", "is not a known field", only=False)
        self.assertEqual(sorted(map(json.dumps, details)), sorted(map(json.dumps, [
            {"field": "foo", "issue": "is not a known field"},
            {"field": "governance.extra", "issue": "is not a known field"},
            {"field": "date_range.days", "issue": "is not a known field"}])))

    def test_wrong_types(self):
        cases = [("room_type_code", 5, "room_type_code", "must be a string"),
                 ("governance.justification", 7, "governance.justification", "must be a string"),
                 ("governance.approver_saml_subject", ["x"],
                  "governance.approver_saml_subject", "must be a string"),
                 ("date_range.from", 20261201, "date_range.from", "must be a string"),
                 ("proposed_rate.currency", 985, "proposed_rate.currency", "must be a string"),
                 ("proposed_rate.minor_units", "45900", "proposed_rate.minor_units",
                  "must be an integer"),
                 ("proposed_rate.minor_units", 1.5, "proposed_rate.minor_units",
                  "must be an integer"),
                 ("proposed_rate.minor_units", True, "proposed_rate.minor_units",
                  "must be an integer"),
                 ("room_type_code", None, "room_type_code", None),
                 ("properties", "prop_x", "properties", None),
                 ("properties", [1], "properties[0]", "must be a string"),
                 ("governance", "x", "governance", None),
                 ("date_range", ["2026-12-01", "2026-12-03"], "date_range", None)]
        for path, value, field, issue in cases:
            with self.subTest(path=path, value=value):
                self.assert_validation(setpath(self.body(), path, value), field, issue)

    def test_semantic_rules(self):
        a = ENV.a_ids
        cases = [
            ("properties", [], "properties", None),
            ("properties", [a[0], a[1], a[0]], "properties[2]", None),
            ("properties", [a[0], a[0]], "properties[1]", None),
            ("room_type_code", "D BL", "room_type_code", None),
            ("room_type_code", "DBL/1", "room_type_code", None),
            ("room_type_code", "", "room_type_code", None),
            ("room_type_code", "DBLż", "room_type_code", None),
            ("date_range.from", "2026-13-01", "date_range.from", "must be a date YYYY-MM-DD"),
            ("date_range.from", "2026-02-30", "date_range.from", "must be a date YYYY-MM-DD"),
            ("date_range.from", "2026-12-1", "date_range.from", "must be a date YYYY-MM-DD"),
            ("date_range.from", "", "date_range.from", "must be a date YYYY-MM-DD"),
            ("date_range.to", "20261203", "date_range.to", "must be a date YYYY-MM-DD"),
            ("date_range.to", "2026-11-31", "date_range.to", "must be a date YYYY-MM-DD"),
            ("date_range.to", "2026-11-30", "date_range.to", None),  # before from
            ("proposed_rate.currency", "PLX", "proposed_rate.currency", None),
            ("proposed_rate.currency", "", "proposed_rate.currency", None),
            ("proposed_rate.minor_units", 0, "proposed_rate.minor_units",
             "must be a positive integer"),
            ("proposed_rate.minor_units", -45900, "proposed_rate.minor_units",
             "must be a positive integer"),
            ("governance.justification", "", "governance.justification", None),
            ("governance.justification", " \t\n ", "governance.justification", None),
            ("governance.justification", "x" * 2001, "governance.justification", None),
        ]
        for path, value, field, issue in cases:
            with self.subTest(path=path, value=value if len(str(value)) < 40 else "long"):
                self.assert_validation(setpath(self.body(), path, value), field, issue)

    def test_date_range_longer_than_366_days(self):
        body = self.body(date_from="2026-01-01", date_to="2027-06-01")
        self.assert_validation(body, "date_range")

    def test_several_problems_one_entry_each(self):
        body = self.body(date_from="2026-12-05", date_to="2026-12-01", currency="PLX",
                         minor_units=0, justification="  ")
        details = self.assert_validation(body, "date_range.to", only=False)
        self.assertEqual(sorted(d["field"] for d in details),
                         sorted(["date_range.to", "proposed_rate.currency",
                                 "proposed_rate.minor_units", "governance.justification"]),
                         details)

    def test_limits_are_inclusive(self):
        # Each body is valid but fails the 500.00 ceiling: 422 shows the
        # validation passed, and nothing reaches the PMS.
        cases = [("2000-character justification", {"justification": "x" * 2000}),
                 ("2000 two-byte characters", {"justification": "\u017c" * 2000}),
                 ("code characters", {"room": "Tw-1.a_B"}),
                 ("leap day", {"date_from": "2028-02-29", "date_to": "2028-02-29"})]
        for what, kw in cases:
            with self.subTest(what):
                kw.setdefault("room", "DBL")
                body = self.body(ceiling=ENV.c_open["id"], minor_units=120001, **kw)
                before = self.written_count()
                r = self.post(body)
                self.assert_decision_error(r, 422, "SVC-RATE-CEILING-EXCEEDED")
                self.assert_nothing_written(before)

    def test_wrong_content_type(self):
        before = self.written_count()
        r = self.post(json.dumps(self.body()), headers={"Content-Type": "text/plain"})
        assert_error(self, r, 415, "SVC-UNSUPPORTED-MEDIA-TYPE")
        r = self.post(json.dumps(self.body()),
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert_error(self, r, 415, "SVC-UNSUPPORTED-MEDIA-TYPE")
        self.assert_nothing_written(before)

    def test_malformed_json(self):
        before = self.written_count()
        for raw in ('{"properties": [', '{"properties": ["a",]}', "not json", ""):
            with self.subTest(raw=raw):
                r = self.post(raw, headers={"Content-Type": "application/json"})
                assert_error(self, r, 400, "SVC-REQUEST-MALFORMED")
        self.assert_nothing_written(before)

    def test_body_over_one_mib(self):
        before = self.written_count()
        head = ("POST /v2/rate-decisions HTTP/1.1\r\nHost: x\r\n"
                "Authorization: Bearer %s\r\nX-Service-Portfolio: %s\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % (ENV.tok, ENV.a.id, BODY_MAX + 1)).encode()
        body = b'{"governance": {"justification": "' + b"a" * (BODY_MAX - 40)
        body += b" " * (BODY_MAX + 1 - len(body))
        c = self.srv.raw(10.0)
        try:
            if c.send(head):
                c.send_watching(body)
            status, hdrs, raw = c.read_response()
        finally:
            c.close()
        resp = harness.Response(status, hdrs, harness._decode_body(hdrs, raw), raw)
        assert_error(self, resp, 413, "SVC-PAYLOAD-TOO-LARGE")
        self.assert_nothing_written(before)


# ----------------------------------------------------------------------------------------
class ScopeTest(Base):
    def assert_refused(self, r, before, status=403, code="SVC-AUTH-INSUFFICIENT-ROLE"):
        err = assert_error(self, r, status, code)
        self.assert_nothing_written(before)
        return err

    def test_property_of_another_portfolio(self):
        before = self.written_count()
        r = self.post(self.body([ENV.a_ids[0], ENV.b.properties[0]["id"]]))
        err = self.assert_refused(r, before)
        self.assertIn("properties[1]", err["message"], r)

    def test_unknown_property_id(self):
        before = self.written_count()
        r = self.post(self.body([UNKNOWN_PROP]))
        err = self.assert_refused(r, before)
        self.assertIn("properties[0]", err["message"], r)

    def test_property_outside_a_per_property_token(self):
        tok = self.srv.access_token(ENV.writer["client_id"], ENV.writer["client_secret"],
                                    "rates:read rates:write property:" + ENV.a.codes[0])
        before = self.written_count()
        r = self.post(self.body([ENV.a_ids[0], ENV.a_ids[1]]), token=tok)
        self.assert_refused(r, before)
        r = self.post(self.body([ENV.a_ids[1]]), token=tok)
        self.assert_refused(r, before)
        # inside its one property it may publish
        data = self.publish(self.body([ENV.a_ids[0]], room="PPT"), token=tok)
        self.assertEqual(data["properties_written"], [ENV.a_ids[0]])

    def test_property_header_naming_another_property(self):
        before = self.written_count()
        r = self.post(self.body([ENV.a_ids[0]]), property=ENV.a_ids[1])
        self.assert_refused(r, before)
        r = self.post(self.body([ENV.a_ids[0], ENV.a_ids[1]]), property=ENV.a_ids[0])
        self.assert_refused(r, before)
        data = self.publish(self.body([ENV.a_ids[1]], room="PHD"), property=ENV.a_ids[1])
        self.assertEqual(data["properties_written"], [ENV.a_ids[1]])

    def test_missing_rates_write_scope(self):
        before = self.written_count()
        self.assert_refused(self.post(self.body(), token=ENV.read_tok), before)
        tok = self.srv.access_token(ENV.a.client_id, ENV.a.client_secret,
                                    "rates:read portfolios:read")
        self.assert_refused(self.post(self.body(), token=tok), before)

    def test_portfolio_header_of_another_portfolio(self):
        before = self.written_count()
        self.assert_refused(self.post(self.body(), portfolio=ENV.b.id), before)
        # B's own token with A's header, and with B's header naming A's property
        self.assert_refused(self.post(self.body(), token=ENV.b.token), before)
        self.assert_refused(self.post(self.body(ceiling=ENV.b.ceiling["id"]), token=ENV.b.token,
                                      portfolio=ENV.b.id), before)

    def test_scope_is_checked_before_governance(self):
        # a foreign property in a body that would also fail the ceiling
        before = self.written_count()
        body = self.body([ENV.a_ids[0], ENV.b.properties[0]["id"]], minor_units=130000)
        self.assert_refused(self.post(body), before)

    def test_no_token_and_no_portfolio_header(self):
        before = self.written_count()
        r = self.srv.request("POST", "/v2/rate-decisions", body=self.body(),
                             portfolio=ENV.a.id)
        self.assert_refused(r, before, 401, "SVC-AUTH-UNAUTHENTICATED")
        r = self.srv.request("POST", "/v2/rate-decisions", body=self.body(), token=ENV.tok)
        self.assert_refused(r, before, 400, "SVC-PORTFOLIO-REQUIRED")


# ----------------------------------------------------------------------------------------
class CeilingTest(Base):
    """Every ceiling failure: 422 with per-property details, a stored
    rejected decision whose trail shows each check, and no PMS write."""

    def assert_ceiling_rejected(self, body, failing, reason_re, limit, single=True):
        props = body["properties"]
        cid = body["governance"]["brand_ceiling_id"]
        proposed = body["proposed_rate"]
        before = self.written_count()
        r = self.post(body)
        err = self.assert_decision_error(r, 422, "SVC-RATE-CEILING-EXCEEDED")
        did = err["decision_id"]
        details = err["details"]
        self.assertEqual([d.get("field") for d in details],
                         ["properties[%d]" % i for i in failing], r)
        self.assert_nothing_written(before)

        entries = assert_audit_chain(self, self.trail(did))
        self.assertEqual(self.kinds(entries),
                         ["proposed"] + ["ceiling_check"] * len(props) + ["rejected"], entries)
        checks = [e["details"] for e in entries[1:1 + len(props)]]
        for i, (pid, chk) in enumerate(zip(props, checks)):
            self.assertEqual(chk.get("property"), pid, chk)
            self.assertEqual(chk.get("ceiling"), cid, chk)
            self.assertEqual(chk.get("limit"), limit, chk)
            self.assertEqual(chk.get("proposed"), proposed, chk)
            self.assertIs(chk.get("passed"), i not in failing, chk)
            reasons = chk.get("reasons")
            self.assertIsInstance(reasons, list, chk)
            if i in failing:
                self.assertTrue(reasons, chk)
                self.assertTrue(all(isinstance(x, str) and x for x in reasons), chk)
                self.assertTrue(any(re.search(reason_re, x, re.I) for x in reasons),
                                "no reason matching %r in %r" % (reason_re, reasons))
                if single:
                    self.assertEqual(len(reasons), 1, "one fault, one reason: %r" % reasons)
            else:
                self.assertEqual(reasons, [], chk)
        for d in details:
            i = int(re.match(r"properties\[(\d+)\]$", d["field"]).group(1))
            self.assertTrue({"field", "issue", "property", "ceiling", "limit",
                             "proposed"} <= set(d), d)
            self.assertEqual(d["property"], props[i], d)
            self.assertEqual(d["ceiling"], cid, d)
            self.assertEqual(d["limit"], limit, d)
            self.assertEqual(d["proposed"], proposed, d)
            self.assertEqual(d["issue"], "; ".join(checks[i]["reasons"]), d)

        data, _ = self.decision(did)
        self.assertEqual(data["status"], "rejected", data)
        self.assertEqual(data["properties"], props, data)
        self.assertEqual(data["pms_write_receipts"], [], data)
        self.assertEqual(data["properties_written"], [], data)
        self.assertFalse([ev for ev in ctl_events(self.srv, ENV.a.id)
                          if ev["data"].get("decision_id") == did
                          and ev["type"] == "rate.decision.published"])
        return err, entries

    def test_over_the_maximum(self):
        body = self.body(ENV.a_ids[:2], ENV.c_narrow["id"], minor_units=50001,
                         date_from="2026-06-01", date_to="2026-06-03")
        self.assert_ceiling_rejected(body, [0, 1], r"above|exceed|max|limit",
                                     {"currency": "PLN", "minor_units": 50000})

    def test_exactly_the_maximum_is_published(self):
        before = self.written_count()
        body = self.body(ENV.a_ids[:1], ENV.c_narrow["id"], minor_units=50000,
                         date_from="2026-12-31", date_to="2026-12-31", room="TWN")
        data = self.publish(body)
        new = ENV.sim.written()[before:]
        self.assertEqual([(w["property_code"], w["rate"]) for w in new],
                         [(ENV.a.codes[0], {"currency": "PLN", "minor_units": 50000})])
        self.assertEqual(new[0]["idempotency_key"], "%s:%s:publish" % (data["id"], ENV.a_ids[0]))

    def test_wrong_brand(self):
        body = self.body([ENV.a_ids[0], ENV.a_bor["id"]], ENV.c_open["id"])
        self.assert_ceiling_rejected(body, [1], r"brand",
                                     {"currency": "PLN", "minor_units": 120000})
        body = self.body([ENV.a_bor["id"], ENV.a_ids[1]], ENV.c_bor["id"])
        self.assert_ceiling_rejected(body, [1], r"brand",
                                     {"currency": "PLN", "minor_units": 80000})

    def test_room_type_not_covered(self):
        body = self.body(ENV.a_ids[:3], ENV.c_narrow["id"], room="SGL", minor_units=40000,
                         date_from="2026-12-01", date_to="2026-12-02")
        self.assert_ceiling_rejected(body, [0, 1, 2], r"room",
                                     {"currency": "PLN", "minor_units": 50000})
        # room codes match exactly: "dbl" is not "DBL"
        body = self.body(ENV.a_ids[:1], ENV.c_narrow["id"], room="dbl", minor_units=40000,
                         date_from="2026-12-01", date_to="2026-12-02")
        self.assert_ceiling_rejected(body, [0], r"room",
                                     {"currency": "PLN", "minor_units": 50000})

    def test_currency_mismatch(self):
        # proposed EUR against a PLN ceiling on PLN hotels
        body = self.body(ENV.a_ids[:2], ENV.c_open["id"], currency="EUR", minor_units=20000)
        self.assert_ceiling_rejected(body, [0, 1], r"currenc",
                                     {"currency": "PLN", "minor_units": 120000}, single=False)
        # EUR ceiling, EUR proposal, but a PLN hotel
        body = self.body(ENV.a_ids[:1], ENV.c_eur["id"], currency="EUR", minor_units=20000)
        self.assert_ceiling_rejected(body, [0], r"currenc",
                                     {"currency": "EUR", "minor_units": 30000})
        # PLN ceiling, PLN proposal, but an EUR hotel
        body = self.body([ENV.a_ids[0], ENV.a_eur["id"]], ENV.c_open["id"], minor_units=20000)
        self.assert_ceiling_rejected(body, [1], r"currenc",
                                     {"currency": "PLN", "minor_units": 120000})

    def test_matching_foreign_currency_is_published(self):
        body = self.body([ENV.a_eur["id"]], ENV.c_eur["id"], currency="EUR", minor_units=29900,
                         room="EUR")
        before = self.written_count()
        self.publish(body)
        new = ENV.sim.written()[before:]
        self.assertEqual([w["rate"] for w in new], [{"currency": "EUR", "minor_units": 29900}])

    def test_dates_outside_validity(self):
        limit = {"currency": "PLN", "minor_units": 50000}
        body = self.body(ENV.a_ids[:2], ENV.c_narrow["id"], minor_units=40000,
                         date_from="2026-12-30", date_to="2027-01-02")
        self.assert_ceiling_rejected(body, [0, 1], r"date|valid", limit)
        body = self.body(ENV.a_ids[:1], ENV.c_narrow["id"], minor_units=40000,
                         date_from="2027-01-01", date_to="2027-01-01")
        self.assert_ceiling_rejected(body, [0], r"date|valid", limit)
        body = self.body(ENV.a_ids[:1], ENV.c_open["id"], minor_units=40000,
                         date_from="2025-12-31", date_to="2026-01-02")
        self.assert_ceiling_rejected(body, [0], r"date|valid",
                                     {"currency": "PLN", "minor_units": 120000})

    def test_unknown_ceiling(self):
        for cid in (UNKNOWN_CEILING, ENV.b.ceiling["id"], "not-a-ceiling"):
            with self.subTest(ceiling=cid):
                body = self.body(ENV.a_ids[:2], cid)
                self.assert_ceiling_rejected(
                    body, [0, 1], r"no such|unknown|not found|not exist|does not|missing", None)

    def test_several_faults_are_all_reported(self):
        body = self.body([ENV.a_bor["id"]], ENV.c_narrow["id"], room="SGL", minor_units=60000,
                         date_from="2027-01-05", date_to="2027-01-06")
        _, entries = self.assert_ceiling_rejected(body, [0], r"brand",
                                                  {"currency": "PLN", "minor_units": 50000},
                                                  single=False)
        reasons = entries[1]["details"]["reasons"]
        for pattern in (r"brand", r"room", r"date|valid", r"above|exceed|max|limit"):
            self.assertTrue(any(re.search(pattern, x, re.I) for x in reasons),
                            "%r not among %r" % (pattern, reasons))

    def test_added_ceiling_governs_at_once(self):
        # The server keeps each portfolio's ceilings between decisions;
        # revopsctl, another process, adds one with a lower maximum. The
        # very next decision naming it is governed by it: above it is
        # refused, at it is published.
        self.publish(self.body(ENV.a_ids[:1], ENV.c_open["id"], minor_units=30000))
        low = _ceiling(self.srv, ENV.a.id, "Aurora", "PLN", 20000, "2026-01-01")
        body = self.body(ENV.a_ids[:2], low["id"], minor_units=20001)
        self.assert_ceiling_rejected(body, [0, 1], r"above|exceed|max|limit",
                                     {"currency": "PLN", "minor_units": 20000})
        self.publish(self.body(ENV.a_ids[:2], low["id"], minor_units=20000))

    def test_ceiling_is_checked_before_the_approver(self):
        body = self.body(ENV.a_ids[:1], ENV.c_narrow["id"], approver="nobody@x.example",
                         minor_units=90000, date_from="2026-06-01", date_to="2026-06-01")
        self.assert_ceiling_rejected(body, [0], r"above|exceed|max|limit",
                                     {"currency": "PLN", "minor_units": 50000})


# ----------------------------------------------------------------------------------------
class ApproverTest(Base):
    def assert_governance_rejected(self, body, phrase, token=None):
        props = body["properties"]
        before = self.written_count()
        r = self.post(body, token=token)
        err = self.assert_decision_error(r, 422, "SVC-GOVERNANCE-REJECTED")
        self.assertEqual(len(err["details"]), 1, r)
        d = err["details"][0]
        self.assertEqual(d.get("field"), "governance.approver_saml_subject", r)
        self.assertIn(phrase, d.get("issue", ""), r)
        self.assert_nothing_written(before)
        did = err["decision_id"]
        data, _ = self.decision(did)
        self.assertEqual(data["status"], "rejected", data)
        self.assertEqual(data["properties_written"], [], data)
        entries = assert_audit_chain(self, self.trail(did))
        self.assertEqual(self.kinds(entries),
                         ["proposed"] + ["ceiling_check"] * len(props) + ["rejected"], entries)
        self.assertTrue(all(e["details"].get("passed") is True for e in entries[1:-1]), entries)
        return err

    def test_unknown_approver(self):
        self.assert_governance_rejected(self.body(approver="nobody@x.example"),
                                        "is not a user of this portfolio")

    def test_approver_of_another_portfolio(self):
        self.assert_governance_rejected(self.body(ENV.a_ids[:2], approver=APPROVER_B),
                                        "is not a user of this portfolio")

    def test_deactivated_approver(self):
        self.assert_governance_rejected(self.body(approver=GONE), "is deactivated")

    def test_approver_without_the_role(self):
        self.assert_governance_rejected(self.body(ENV.a_ids[:3], approver=PLAIN),
                                        "lacks the revenue-approver role")

    def test_approver_matched_case_insensitively(self):
        before = self.written_count()
        data = self.publish(self.body(approver="APPROVER@X.Example", room="CIS"))
        self.assertEqual(len(ENV.sim.written()) - before, 1)
        got, _ = self.decision(data["id"])
        self.assertEqual(got["status"], "published")

    def test_role_through_a_scim_group(self):
        before = self.written_count()
        self.publish(self.body(ENV.a_ids[:2], approver=GROUPED, room="GRP"))
        self.assertEqual(len(ENV.sim.written()) - before, 2)

    def saml_token(self, name):
        xml = ENV.idp.assertion(name)
        r = saml_grant(self.srv, xml, scope="rates:read rates:write")
        self.assertEqual(r.status, 200, r)
        return r.body["access_token"]

    @unittest.skipUnless(idplib.tools_available(), "needs openssl and xmlsec1")
    def test_approver_is_the_proposer(self):
        tok = self.saml_token(SELF)
        err = self.assert_governance_rejected(self.body(approver=SELF), "is the proposer",
                                              token=tok)
        data, _ = self.decision(err["decision_id"])
        self.assertEqual(data["proposed_by"], "user:" + SELF, data)
        # same user, differently cased subject: still the proposer
        self.assert_governance_rejected(self.body(approver=SELF.upper()), "is the proposer",
                                        token=tok)
        # the user proposing with someone else approving is fine
        data = self.publish(self.body(approver=APPROVER, room="USR"), token=tok)
        got, _ = self.decision(data["id"])
        self.assertEqual(got["proposed_by"], "user:" + SELF, got)


# ----------------------------------------------------------------------------------------
class ReadTest(Base):
    """GET one, list, filter and page, on a portfolio of its own (L)."""

    @classmethod
    def setUpClass(cls):
        srv = ENV.srv
        cls.l = srv.seed_portfolio("chain_starter", 3, brand="Aurora")
        cls.l_ids = [p["id"] for p in cls.l.properties]
        ctl_user(srv, cls.l.id, "approver-l@x.example", ["revenue-approver"])
        cls.cid = cls.l.ceiling["id"]

        def post(props, minor=45900, approver="approver-l@x.example", room="DBL"):
            return srv.request("POST", "/v2/rate-decisions", token=cls.l.token,
                               portfolio=cls.l.id, body=rate_decision_body(
                                   props, cls.cid, approver, room=room, minor_units=minor))

        def rid(r, status):
            if r.status != status:
                raise AssertionError("setup publish: %r" % (r,))
            return r.body["data"]["id"] if status == 201 else r.body["error"]["decision_id"]

        L = cls.l_ids
        cls.post = staticmethod(post)
        cls.d1 = rid(post([L[0]]), 201)
        cls.d2 = rid(post([L[0], L[1]], minor=130000), 422)
        cls.d3 = rid(post([L[0], L[1], L[2]]), 201)
        cls.d4 = rid(post([L[1]]), 201)
        cls.d5 = rid(post([L[2]], approver="nobody@x.example"), 422)
        cls.all = [cls.d1, cls.d2, cls.d3, cls.d4, cls.d5]

    def lget(self, path, token=None, portfolio=None, property=None):
        return self.get(path, token=self.l.token if token is None else token,
                        portfolio=self.l.id if portfolio is None else portfolio,
                        property=property)

    def list_ids(self, query="", **kw):
        r = self.lget("/v2/rate-decisions" + query, **kw)
        data, meta = assert_success(self, r)
        self.assertIsInstance(data, list, r)
        self.assertIn("next_cursor", meta, r)
        self.assertEqual(meta.get("sla_tier"), "standard", r)
        return [d["id"] for d in data], meta.get("next_cursor"), data

    def test_get_one(self):
        r = self.lget("/v2/rate-decisions/" + self.d3)
        data, meta = assert_success(self, r)
        self.assertEqual(set(data), DECISION_KEYS, data)
        self.assertEqual(meta.get("sla_tier"), "standard", r)
        self.assertEqual(meta.get("portfolio_id"), self.l.id, r)
        self.assertEqual(data["id"], self.d3)
        self.assertEqual(data["status"], "published")
        self.assertEqual(data["properties"], self.l_ids)
        self.assertEqual(data["room_type_code"], "DBL")
        self.assertEqual(data["date_range"], {"from": "2026-12-01", "to": "2026-12-03"})
        self.assertEqual(data["proposed_rate"], {"currency": "PLN", "minor_units": 45900})
        self.assertEqual(data["governance"], {
            "brand_ceiling_id": self.cid, "approver_saml_subject": "approver-l@x.example",
            "justification": "Winter demand, approved in the weekly revenue call"})
        self.assertEqual(data["proposed_by"], "client:" + self.l.client_id)
        self.assertEqual(data["properties_written"], self.l_ids)
        self.assertEqual(data["audit_trail_url"], "/rate-decisions/%s/audit-trail" % self.d3)
        self.assertIsNone(data["failure"])
        self.assertIsNone(data["revert"])
        self.assertRegex(data["created_at"], DATETIME_RE)
        self.assertRegex(data["updated_at"], DATETIME_RE)
        self.assertGreaterEqual(data["updated_at"], data["created_at"])
        self.assertEqual([x["property"] for x in data["pms_write_receipts"]], self.l_ids)
        written = {w["idempotency_key"]: w for w in ENV.sim.written()}
        for rec in data["pms_write_receipts"]:
            self.assertEqual(set(rec), {"property", "pms_ref", "at"}, rec)
            self.assertRegex(rec["at"], DATETIME_RE)
            w = written.get("%s:%s:publish" % (self.d3, rec["property"]))
            self.assertIsNotNone(w, "no PMS write for %r" % (rec,))
            self.assertEqual(rec["pms_ref"], w["pms_ref"])
        # the audit trail URL is relative to /v2
        trail = self.lget("/v2" + data["audit_trail_url"])
        self.assertEqual(assert_success(self, trail)[0]["decision_id"], self.d3)

    def test_get_rejected(self):
        for did, kind in ((self.d2, "ceiling"), (self.d5, "approver")):
            with self.subTest(kind):
                data, meta = assert_success(self, self.lget("/v2/rate-decisions/" + did))
                self.assertEqual(set(data), DECISION_KEYS, data)
                self.assertEqual(data["status"], "rejected")
                self.assertEqual(data["properties_written"], [])
                self.assertEqual(data["pms_write_receipts"], [])
                self.assertIsNone(data["revert"])
                self.assertEqual(meta.get("sla_tier"), "standard")

    def test_other_portfolio_and_unknown(self):
        for path in ("/v2/rate-decisions/" + self.d1,
                     "/v2/rate-decisions/%s/audit-trail" % self.d1):
            with self.subTest(path):
                # B's token and header
                assert_error(self, self.get(path, token=ENV.b.token, portfolio=ENV.b.id), 403,
                             "SVC-AUTH-INSUFFICIENT-ROLE")
                # L's token under B's header
                assert_error(self, self.lget(path, portfolio=ENV.b.id), 403,
                             "SVC-AUTH-INSUFFICIENT-ROLE")
        for path in ("/v2/rate-decisions/" + UNKNOWN_RD,
                     "/v2/rate-decisions/%s/audit-trail" % UNKNOWN_RD):
            with self.subTest(path):
                assert_error(self, self.lget(path), 404, "SVC-NOT-FOUND")

    def test_reading_needs_rates_read(self):
        tok = self.srv.access_token(self.l.client_id, self.l.client_secret, "portfolios:read")
        for path in ("/v2/rate-decisions", "/v2/rate-decisions/" + self.d1,
                     "/v2/rate-decisions/%s/audit-trail" % self.d1):
            with self.subTest(path):
                assert_error(self, self.lget(path, token=tok), 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_list_newest_last(self):
        ids, cursor, data = self.list_ids()
        self.assertEqual(ids, self.all)
        self.assertIsNone(cursor)
        self.assertEqual([d["status"] for d in data],
                         ["published", "rejected", "published", "published", "rejected"])
        one, _ = assert_success(self, self.lget("/v2/rate-decisions/" + self.d3))
        self.assertEqual(data[2], one, "a list item is the decision as GET shows it")

    def test_list_by_status(self):
        self.assertEqual(self.list_ids("?status=published")[0], [self.d1, self.d3, self.d4])
        self.assertEqual(self.list_ids("?status=rejected")[0], [self.d2, self.d5])
        self.assertEqual(self.list_ids("?status=failed")[0], [])
        self.assertEqual(self.list_ids("?status=reverted")[0], [])
        for bad in ("bogus", "PUBLISHED", ""):
            with self.subTest(status=bad):
                r = self.lget("/v2/rate-decisions?status=" + bad)
                self.assertEqual(r.status, 400, r)
                assert_error(self, r, 400)

    def test_pagination(self):
        pages, cursor, query = [], None, "?limit=2"
        while True:
            ids, cursor, _ = self.list_ids(query + ("&cursor=" + cursor if cursor else ""))
            pages.append(ids)
            if cursor is None:
                break
            self.assertIsInstance(cursor, str)
            self.assertLess(len(pages), 10, "pagination does not end")
        self.assertEqual(pages, [self.all[0:2], self.all[2:4], self.all[4:]])
        ids, cursor, _ = self.list_ids("?status=published&limit=2")
        self.assertEqual(ids, [self.d1, self.d3])
        ids, cursor, _ = self.list_ids("?status=published&limit=2&cursor=" + cursor)
        self.assertEqual((ids, cursor), ([self.d4], None))
        self.assertEqual(self.list_ids("?limit=100")[0], self.all)

    def test_bad_limit_and_cursor(self):
        for q in ("?limit=0", "?limit=101", "?limit=-1", "?limit=abc", "?cursor=garbage",
                  "?cursor="):
            with self.subTest(q):
                assert_error(self, self.lget("/v2/rate-decisions" + q), 400)
        _, cursor, _ = self.list_ids("?limit=1")
        self.assertIsInstance(cursor, str)
        flipped = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
        assert_error(self, self.lget("/v2/rate-decisions?limit=1&cursor=" + flipped), 400)

    def test_narrowed_lists(self):
        L = self.l_ids
        tok0 = self.srv.access_token(self.l.client_id, self.l.client_secret,
                                     "rates:read property:" + self.l.codes[0])
        self.assertEqual(self.list_ids(token=tok0)[0], [self.d1])
        tok01 = self.srv.access_token(self.l.client_id, self.l.client_secret,
                                      "rates:read property:%s property:%s"
                                      % (self.l.codes[0], self.l.codes[1]))
        self.assertEqual(self.list_ids(token=tok01)[0], [self.d1, self.d2, self.d4])
        self.assertEqual(self.list_ids("?status=published", token=tok01)[0], [self.d1, self.d4])
        self.assertEqual(self.list_ids("?limit=1", token=tok01)[0], [self.d1])
        # X-Service-Property narrows a full token to one property
        self.assertEqual(self.list_ids(property=L[1])[0], [self.d4])
        # a narrowed token cannot read a decision reaching beyond it
        assert_error(self, self.lget("/v2/rate-decisions/" + self.d3, token=tok0), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        data, _ = assert_success(self, self.lget("/v2/rate-decisions/" + self.d1, token=tok0))
        self.assertEqual(data["id"], self.d1)

    def test_zz_list_grows_while_paging(self):
        ids, cursor, _ = self.list_ids("?limit=2")
        self.assertEqual(ids, self.all[:2])
        r = self.post([self.l_ids[2]], room="NEW")
        self.assertEqual(r.status, 201, r)
        d6 = r.body["data"]["id"]
        seen = list(ids)
        while cursor:
            ids, cursor, _ = self.list_ids("?limit=2&cursor=" + cursor)
            seen += ids
        self.assertEqual(seen, self.all + [d6])


# ----------------------------------------------------------------------------------------
class AuditTrailTest(Base):
    @classmethod
    def setUpClass(cls):
        cls.props = ENV.a_ids[:3]
        body = rate_decision_body(cls.props, ENV.c_open["id"], APPROVER, room="APT",
                                  date_from="2027-03-01", date_to="2027-03-05",
                                  minor_units=61500)
        cls.before = len(ENV.sim.written())
        r = ENV.srv.request("POST", "/v2/rate-decisions", token=ENV.tok, portfolio=ENV.a.id,
                            body=body)
        if r.status != 201:
            raise AssertionError("setup publish: %r" % (r,))
        cls.created = r.body["data"]
        cls.id = cls.created["id"]

    def test_publish_trail(self):
        trail = self.trail(self.id)
        self.assertEqual(set(trail), {"decision_id", "entries", "head_hash", "chain_valid"})
        entries = assert_audit_chain(self, trail)
        n = len(self.props)
        self.assertEqual(self.kinds(entries), ["proposed"] + ["ceiling_check"] * n +
                         ["approved"] + ["pms_write"] * n + ["published"])
        proposed = entries[0]["details"]
        self.assertEqual(proposed.get("properties"), self.props, proposed)
        self.assertEqual(proposed.get("proposed_rate"), {"currency": "PLN", "minor_units": 61500})
        for pid, e in zip(self.props, entries[1:1 + n]):
            d = e["details"]
            self.assertEqual((d.get("property"), d.get("passed"), d.get("ceiling"),
                              d.get("limit"), d.get("proposed"), d.get("reasons")),
                             (pid, True, ENV.c_open["id"], {"currency": "PLN",
                                                            "minor_units": 120000},
                              {"currency": "PLN", "minor_units": 61500}, []), e)
        self.assertIn(APPROVER, json.dumps(entries[1 + n]), "the trail names the approver")
        receipts = {x["property"]: x["pms_ref"] for x in self.created["pms_write_receipts"]}
        writes = [e["details"] for e in entries[2 + n:2 + 2 * n]]
        self.assertEqual(sorted(w.get("property") for w in writes), sorted(self.props))
        for w in writes:
            self.assertEqual(w.get("purpose"), "publish", w)
            self.assertEqual(w.get("pms_ref"), receipts[w["property"]], w)
            self.assertIsNone(w.get("previous_rate", "missing"), w)
            self.assertEqual(w.get("rate"), {"currency": "PLN", "minor_units": 61500}, w)
            self.assertEqual(w.get("idempotency_key"), "%s:%s:publish" % (self.id, w["property"]))
        # the same trail at the URL the publish answered
        again = assert_success(self, self.get("/v2" + self.created["audit_trail_url"]))[0]
        self.assertEqual(again, trail)

    def test_database_refuses_to_change_the_trail(self):
        trail = self.trail(self.id)
        for sql in ("UPDATE audit_entries SET actor = 'x' WHERE decision_id = '%s'" % self.id,
                    "UPDATE audit_entries SET actor = 'x'",
                    "DELETE FROM audit_entries WHERE decision_id = '%s'" % self.id,
                    "DELETE FROM audit_entries"):
            with self.subTest(sql):
                p = self.srv.db.run(sql)
                self.assertNotEqual(p.returncode, 0, "the database accepted: %s" % sql)
                self.assertIn("audit entries are immutable", p.stderr + p.stdout, p)
        self.assertEqual(self.trail(self.id), trail, "the trail changed")
        p = self.srv.ctl_raw("audit", "verify", self.id)
        self.assertEqual(p.returncode, 0, p)
        out = json.loads(p.stdout.decode())
        self.assertIs(out.get("chain_valid"), True, out)
        self.assertEqual(out.get("decision_id"), self.id, out)

    def test_offline_verify_detects_an_edit(self):
        tmp = tempfile.mkdtemp(prefix="revops-tamper-")
        copy = None
        try:
            copy = self.srv.db.copy(tmp)
            # untouched copy verifies
            p = self.srv.ctl_raw("--database", copy.url, "audit", "verify", self.id)
            self.assertEqual(p.returncode, 0, p)
            self.assertIs(json.loads(p.stdout.decode()).get("chain_valid"), True)
            # drop the triggers in the copy, then edit one entry
            self.assertTrue(copy.drop_triggers("audit_entries"),
                            "no triggers guard audit_entries")
            p = copy.run("UPDATE audit_entries SET actor = 'mallory' WHERE decision_id = '%s'"
                         " AND seq = 1" % self.id)
            self.assertEqual(p.returncode, 0, p)
            p = self.srv.ctl_raw("--database", copy.url, "audit", "verify", self.id)
            self.assertEqual(p.returncode, 3, p)
            self.assertIs(json.loads(p.stdout.decode()).get("chain_valid"), False, p)
        finally:
            if copy:
                copy.drop()
            shutil.rmtree(tmp, ignore_errors=True)
        # the live trail is still valid
        assert_audit_chain(self, self.trail(self.id))

    def test_independent_check_detects_edits(self):
        trail = self.trail(self.id)
        assert_audit_chain(self, trail)
        edits = [("actor", lambda t: t["entries"][0].__setitem__("actor", "mallory")),
                 ("details", lambda t: t["entries"][-2]["details"].__setitem__(
                     "rate", {"currency": "PLN", "minor_units": 1})),
                 ("dropped entry", lambda t: t["entries"].pop(1)),
                 ("head", lambda t: t.__setitem__("head_hash", "f" * 64))]
        for what, edit in edits:
            with self.subTest(what):
                bad = json.loads(json.dumps(trail))
                edit(bad)
                with self.assertRaises(AssertionError):
                    assert_audit_chain(self, bad)

    def test_verify_unknown_decision_fails(self):
        p = self.srv.ctl_raw("audit", "verify", UNKNOWN_RD)
        self.assertNotEqual(p.returncode, 0, p)
        self.assertNotEqual(p.returncode, 3, "an unknown decision is not a broken chain")


# ----------------------------------------------------------------------------------------
class IdempotencyTest(Base):
    def test_replay_writes_once(self):
        key = "publish-%s" % os.urandom(6).hex()
        body = self.body(ENV.a_ids[:2], room="IDM")
        before = self.written_count()
        r1 = self.post(body, headers={"Idempotency-Key": key})
        data, _ = assert_success(self, r1, 201)
        self.assertNotEqual(r1.headers.get("Idempotent-Replayed"), "true", r1)
        r2 = self.post(body, headers={"Idempotency-Key": key})
        self.assertEqual(r2.status, 201, r2)
        self.assertEqual(r2.headers.get("Idempotent-Replayed"), "true", r2)
        self.assertEqual(r2.body, r1.body)
        new = ENV.sim.written()[before:]
        self.assertEqual(sorted(w["idempotency_key"] for w in new),
                         sorted("%s:%s:publish" % (data["id"], p) for p in ENV.a_ids[:2]),
                         "one PMS write per property, not two")
        r = self.get("/v2/rate-decisions?status=published&limit=500")
        listed = [d for d in assert_success(self, r)[0] if d["room_type_code"] == "IDM"]
        self.assertEqual([d["id"] for d in listed], [data["id"]], "the replay made no decision")

    def test_same_key_different_body(self):
        key = "reuse-%s" % os.urandom(6).hex()
        body = self.body(room="IDR")
        before = self.written_count()
        assert_success(self, self.post(body, headers={"Idempotency-Key": key}), 201)
        mid = self.written_count()
        self.assertEqual(mid - before, 1)
        other = self.body(room="IDR", minor_units=46000)
        r = self.post(other, headers={"Idempotency-Key": key})
        assert_error(self, r, 422, "SVC-IDEMPOTENCY-KEY-REUSED")
        self.assert_nothing_written(mid)

    def test_key_length(self):
        before = self.written_count()
        r = self.post(self.body(room="IDL"), headers={"Idempotency-Key": "k" * 256})
        assert_error(self, r, 400)
        self.assert_nothing_written(before)
        r = self.post(self.body(room="IDL"), headers={"Idempotency-Key": "k" * 255})
        assert_success(self, r, 201)
        self.assertEqual(self.written_count() - before, 1)


    def test_replay_of_a_rejection_is_the_same_decision(self):
        key = "reject-%s" % os.urandom(6).hex()
        body = self.body(ENV.a_ids[:2], minor_units=130000, room="IRJ")
        before = self.written_count()
        r1 = self.post(body, headers={"Idempotency-Key": key})
        err = self.assert_decision_error(r1, 422, "SVC-RATE-CEILING-EXCEEDED")
        r2 = self.post(body, headers={"Idempotency-Key": key})
        self.assertEqual(r2.status, 422, r2)
        self.assertEqual(r2.headers.get("Idempotent-Replayed"), "true", r2)
        self.assertEqual(r2.body, r1.body)
        r = self.get("/v2/rate-decisions?status=rejected&limit=500")
        listed = [d["id"] for d in assert_success(self, r)[0] if d["room_type_code"] == "IRJ"]
        self.assertEqual(listed, [err["decision_id"]], "the replay stored a second decision")
        self.assert_nothing_written(before)

    def test_keys_are_per_client(self):
        key = "shared-%s" % os.urandom(6).hex()
        body = self.body(room="IPC")
        before = self.written_count()
        d1, _ = assert_success(self, self.post(body, headers={"Idempotency-Key": key}), 201)
        r = self.post(body, token=ENV.a.token, headers={"Idempotency-Key": key})
        d2, _ = assert_success(self, r, 201)
        self.assertNotEqual(r.headers.get("Idempotent-Replayed"), "true", r)
        self.assertNotEqual(d1["id"], d2["id"])
        self.assertEqual(self.written_count() - before, 2)

    def test_key_reused_on_another_path(self):
        key = "path-%s" % os.urandom(6).hex()
        data, _ = assert_success(self, self.post(self.body(room="IOP"),
                                                 headers={"Idempotency-Key": key}), 201)
        before = self.written_count()
        r = self.srv.request("POST", "/v2/rate-decisions/%s/revert" % data["id"],
                             headers={"Idempotency-Key": key}, token=ENV.tok, portfolio=ENV.a.id,
                             body={"reason": "x", "approver_saml_subject": APPROVER})
        assert_error(self, r, 422, "SVC-IDEMPOTENCY-KEY-REUSED")
        self.assert_nothing_written(before)
        self.assertEqual(self.decision(data["id"])[0]["status"], "published")

    def test_key_must_be_printable_ascii(self):
        before = self.written_count()
        for key in ("cl\u00e9", "a b\tc", "k" * 300):
            with self.subTest(key=key):
                r = self.post(self.body(room="IPA"), headers={"Idempotency-Key": key})
                assert_error(self, r, 400)
        self.assert_nothing_written(before)


class InProgressTest(unittest.TestCase):
    """A second publish under the key of one still running (the PMS answers
    after 2 s) is 409 SVC-IDEMPOTENCY-IN-PROGRESS; the PMS is written once."""

    def test_concurrent_same_key(self):
        with pmssim.server_with_pms(["--latency-ms", "2000"]) as (sim, srv):
            pf = srv.seed_portfolio("group", 1)
            ctl_user(srv, pf.id, APPROVER, ["revenue-approver"])
            body = rate_decision_body([pf.properties[0]["id"]], pf.ceiling["id"], APPROVER)
            key = {"Idempotency-Key": "slow-1"}
            tok = pf.token
            first = []

            def run():
                first.append(srv.request("POST", "/v2/rate-decisions", body=body, token=tok,
                                         portfolio=pf.id, headers=key, timeout=30))

            t = threading.Thread(target=run)
            t.start()
            try:
                # Poll with the same key on fresh connections.  A short client
                # timeout skips a connection that queued behind the first
                # request on its worker thread; the next one reaches a free one.
                def again():
                    try:
                        return srv.request("POST", "/v2/rate-decisions", body=body, token=tok,
                                           portfolio=pf.id, headers=key, timeout=0.5)
                    except OSError:
                        return None
                busy = harness.wait_until(again, 10, 0.05, "an answer while the first runs")
            finally:
                t.join(30)
            assert_error(self, busy, 409, "SVC-IDEMPOTENCY-IN-PROGRESS")
            self.assertEqual(len(first), 1)
            if first[0].status != 201:  # the poll won the key: then the first was refused
                assert_error(self, first[0], 409, "SVC-IDEMPOTENCY-IN-PROGRESS")
            # whichever request owns the key writes once, 2 s after it started
            harness.wait_until(lambda: sim.written(), 15, 0.05, "the owner's PMS write")
            # once finished, the key replays the stored answer
            def replay():
                r = srv.request("POST", "/v2/rate-decisions", body=body, token=tok,
                                portfolio=pf.id, headers=key, timeout=30)
                return r if r.status != 409 else None
            r = harness.wait_until(replay, 15, 0.05, "the key to be released")
            self.assertEqual(r.status, 201, r)
            self.assertEqual(r.headers.get("Idempotent-Replayed"), "true", r)
            if first[0].status == 201:
                self.assertEqual(r.body, first[0].body)
            self.assertEqual(len(sim.written()), 1, "one PMS write for one key")


if __name__ == "__main__":
    harness.run_main()
