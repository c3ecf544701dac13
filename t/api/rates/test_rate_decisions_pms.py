"""Governed rate decisions against a real PMS (a pms-sim process): publish
across one, three and all properties of a portfolio; a PMS failure on the
third of three properties with compensation of the writes already made and
the v1 connection.d_edge.failed event; reverts; the v2
rate.decision.published / rate.decision.reverted events.

pms-sim answers 500 for the property code FAILX3 (portfolio F); the other
portfolio (P, five hotels of one brand) never fails.  Each test uses its
own room type so the previous rates it sees are its own.
"""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import pmssim  # noqa: E402
from harness import (RD_ID_RE, DATETIME_RE, assert_audit_chain, assert_error,  # noqa: E402
                     assert_success, ctl_events, ctl_user, rate_decision_body)

APPROVER = "approver@x.example"
PLAIN = "plain@x.example"
FAIL_CODES = ["FAILX1", "FAILX2", "FAILX3"]   # pms-sim fails FAILX3
UNKNOWN_RD = "rd_01AAAAAAAAAAAAAAAAAAAAAAAA"
PUBLISHED_DATA_KEYS = {"decision_id", "room_type_code", "date_range", "approver_saml_subject",
                       "brand_ceiling_id"}

ENV = None


class Env:
    pass


class Pf:
    """A portfolio made by hand: id, property ids/codes, ceiling, token."""


def setUpModule():
    global ENV
    e = Env()
    e.sim, e.srv = pmssim.start_with_server(["--fail-codes", FAIL_CODES[2]])
    srv = e.srv
    try:
        # P: five Aurora hotels, one ceiling, an all-scope client (seed).
        p = e.p = srv.seed_portfolio("enterprise", 5, brand="Aurora")
        p.ids = [x["id"] for x in p.properties]
        ctl_user(srv, p.id, APPROVER, ["revenue-approver"])
        ctl_user(srv, p.id, PLAIN, ["finance-operator"])
        e.p_read = srv.access_token(p.client_id, p.client_secret, "rates:read")
        # F: three hotels, the third of which the PMS refuses.
        f = e.f = Pf()
        pf = srv.ctl("portfolio", "create", "--name", "Failing PMS", "--plan", "group")
        f.id = pf["id"]
        f.props = [srv.add_property(f.id, brand="Aurora", code=c) for c in FAIL_CODES]
        f.ids = [x["id"] for x in f.props]
        f.codes = FAIL_CODES
        f.ceiling = srv.ctl("ceiling", "add", "--portfolio", f.id, "--brand", "Aurora",
                            "--currency", "PLN", "--max", "120000", "--valid-from", "2026-01-01")
        _, f.token = srv.client_token(f.id, "rates:read rates:write portfolios:read",
                                      name="writer")
        ctl_user(srv, f.id, APPROVER, ["revenue-approver"])
    except BaseException:
        e.srv.cleanup()
        e.sim.cleanup()
        raise
    ENV = e


def tearDownModule():
    if ENV is not None:
        try:
            ENV.srv.close()
        finally:
            ENV.sim.close()


def money(minor, currency="PLN"):
    return {"currency": currency, "minor_units": minor}


class Base(unittest.TestCase):
    maxDiff = None

    @property
    def srv(self):
        return ENV.srv

    def req(self, method, path, pf, body=None, token=None, headers=None):
        return self.srv.request(method, path, body=body, headers=headers,
                                token=pf.token if token is None else token, portfolio=pf.id)

    def post(self, pf, props, room, minor, date_from="2027-01-10", date_to="2027-01-12",
             approver=APPROVER, ceiling=None):
        body = rate_decision_body(props, (ceiling or pf.ceiling)["id"], approver, room=room,
                                  date_from=date_from, date_to=date_to, minor_units=minor)
        return self.req("POST", "/v2/rate-decisions", pf, body), body

    def written(self):
        return ENV.sim.written()

    def decision(self, pf, did):
        return assert_success(self, self.req("GET", "/v2/rate-decisions/" + did, pf))[0]

    def trail(self, pf, did):
        data = assert_success(self, self.req("GET", "/v2/rate-decisions/%s/audit-trail" % did,
                                             pf))[0]
        self.assertEqual(data.get("decision_id"), did, data)
        return assert_audit_chain(self, data)

    def events(self, pf, did, type_=None):
        return [ev for ev in ctl_events(self.srv, pf.id)
                if ev.get("data", {}).get("decision_id") == did
                and (type_ is None or ev.get("type") == type_)]

    def publish(self, pf, props, room, minor, **kw):
        """Publishes and checks the whole success contract; returns
        (created data, new pms-sim writes in write order)."""
        before = len(self.written())
        r, body = self.post(pf, props, room, minor, **kw)
        data, meta = assert_success(self, r, 201)
        self.assertEqual(set(data), {"id", "status", "properties_written", "audit_trail_url",
                                     "pms_write_receipts"}, r)
        self.assertEqual(set(meta), {"request_id", "portfolio_id", "sla_tier"}, r)
        self.assertEqual(meta["portfolio_id"], pf.id, r)
        self.assertIn(meta["sla_tier"], ("platinum", "gold", "standard"), r)
        did = data["id"]
        self.assertRegex(did, RD_ID_RE)
        self.assertEqual(data["status"], "published", r)
        self.assertEqual(data["properties_written"], props, r)
        self.assertEqual(data["audit_trail_url"], "/rate-decisions/%s/audit-trail" % did, r)
        receipts = data["pms_write_receipts"]
        self.assertEqual([x.get("property") for x in receipts], props, r)
        for rec in receipts:
            self.assertEqual(set(rec), {"property", "pms_ref", "at"}, rec)
            self.assertIsInstance(rec["pms_ref"], str)
            self.assertTrue(rec["pms_ref"])
            self.assertRegex(rec["at"], DATETIME_RE)

        # pms-sim: exactly one write per property, as asked
        new = self.written()[before:]
        code_of = {pid: code for pid, code in zip(pf.ids, pf.codes)}
        self.assertEqual(sorted(w["property_code"] for w in new),
                         sorted(code_of[p] for p in props), new)
        by_code = {w["property_code"]: w for w in new}
        for rec in receipts:
            w = by_code[code_of[rec["property"]]]
            self.assertEqual((w["room_type_code"], w["from"], w["to"], w["rate"]),
                             (room, body["date_range"]["from"], body["date_range"]["to"],
                              money(minor)), w)
            self.assertEqual(w["idempotency_key"], "%s:%s:publish" % (did, rec["property"]))
            self.assertEqual(w["pms_ref"], rec["pms_ref"], w)

        # the stored decision
        got = self.decision(pf, did)
        self.assertEqual(got["status"], "published")
        self.assertEqual(got["properties"], props)
        self.assertEqual(got["properties_written"], props)
        self.assertEqual(got["pms_write_receipts"], receipts)
        self.assertIsNone(got["failure"])
        self.assertIsNone(got["revert"])

        # the trail
        entries = self.trail(pf, did)
        n = len(props)
        self.assertEqual([e["kind"] for e in entries],
                         ["proposed"] + ["ceiling_check"] * n + ["approved"] +
                         ["pms_write"] * n + ["published"], entries)
        pms_writes = [e["details"] for e in entries[2 + n:2 + 2 * n]]
        self.assertEqual(sorted(d.get("property") for d in pms_writes), sorted(props))
        for d in pms_writes:
            w = by_code[code_of[d["property"]]]
            self.assertEqual(d.get("purpose"), "publish", d)
            self.assertEqual(d.get("pms_ref"), w["pms_ref"], d)
            self.assertEqual(d.get("rate"), money(minor), d)
            self.assertEqual(d.get("previous_rate"), w["previous_rate"], d)
            self.assertEqual(d.get("idempotency_key"), w["idempotency_key"], d)

        # the v2 event, in the same transaction as the status
        evs = self.events(pf, did)
        self.assertEqual([ev["type"] for ev in evs], ["rate.decision.published"], evs)
        ev = evs[0]
        self.assertEqual(ev.get("surface"), "v2", ev)
        self.assertEqual(sorted(ev.get("properties", [])), sorted(props), ev)
        self.assertEqual(ev["data"], {
            "decision_id": did, "room_type_code": room,
            "date_range": {"from": body["date_range"]["from"], "to": body["date_range"]["to"]},
            "approver_saml_subject": APPROVER,
            "brand_ceiling_id": (kw.get("ceiling") or pf.ceiling)["id"]}, ev)
        return data, new


# ----------------------------------------------------------------------------------------
class PublishTest(Base):
    def test_publish_one_property(self):
        p = ENV.p
        data, new = self.publish(p, [p.ids[0]], "ONE", 45900)
        self.assertIsNone(new[0]["previous_rate"])

    def test_publish_three_properties(self):
        p = ENV.p
        props = [p.ids[3], p.ids[0], p.ids[1]]  # request order, not creation order
        self.publish(p, props, "THR", 45900)
        # a second decision on the same dates sees the first's rate as previous
        data, new = self.publish(p, props, "THR", 47900)
        self.assertEqual([w["previous_rate"] for w in new], [money(45900)] * 3)
        entries = self.trail(p, data["id"])
        for e in entries:
            if e["kind"] == "pms_write":
                self.assertEqual(e["details"]["previous_rate"], money(45900), e)

    def test_publish_all_properties(self):
        p = ENV.p
        listed, _ = assert_success(self, self.req("GET", "/v2/portfolios/%s/properties" % p.id,
                                                  p))
        ids = [x["id"] for x in listed]
        self.assertEqual(sorted(ids), sorted(p.ids))
        self.assertEqual(len(ids), 5)
        self.publish(p, ids, "ALL", 99900)

    def test_sla_tier_of_the_plan(self):
        p, f = ENV.p, ENV.f
        r, _ = self.post(p, [p.ids[4]], "SLA", 30000)
        self.assertEqual(assert_success(self, r, 201)[1]["sla_tier"], "platinum")
        r, _ = self.post(f, [f.ids[0]], "SLA", 30000)
        self.assertEqual(assert_success(self, r, 201)[1]["sla_tier"], "gold")


# ----------------------------------------------------------------------------------------
class FailureTest(Base):
    def fail_publish(self, props, room, minor):
        f = ENV.f
        before = len(self.written())
        r, body = self.post(f, props, room, minor)
        self.assertEqual(r.status, 502, r)
        harness.assert_common_headers(self, r)
        self.assertEqual(list(r.body), ["error"], r)
        err = r.body["error"]
        self.assertEqual(err.get("code"), "SVC-PMS-WRITE-FAILED", r)
        self.assertRegex(err.get("decision_id", ""), RD_ID_RE)
        self.assertTrue(set(err) <= {"code", "message", "request_id", "details", "decision_id"},
                        r)
        did = err["decision_id"]
        self.assertEqual(len(err.get("details", [])), 1, r)
        d = err["details"][0]
        self.assertEqual(d.get("field"), "properties", d)
        self.assertIsInstance(d.get("issue"), str, d)
        self.assertTrue(d["issue"], d)
        self.assertEqual(d.get("property"), f.ids[2], d)
        self.assertEqual(d.get("pms_property_code"), FAIL_CODES[2], d)
        self.assertEqual(d.get("http_status"), 500, d)
        self.assertIsInstance(d.get("error"), str, d)
        self.assertTrue(d["error"], d)
        got = self.decision(f, did)
        self.assertEqual(got["status"], "failed", got)
        self.assertIsInstance(got["failure"], dict, got)
        self.assertIsNone(got["revert"], got)
        # the v1 event for the failing property, and no published event
        evs = self.events(f, did)
        self.assertEqual([ev["type"] for ev in evs], ["connection.d_edge.failed"], evs)
        ev = evs[0]
        self.assertEqual(ev.get("surface"), "v1", ev)
        self.assertEqual(ev.get("properties"), [f.ids[2]], ev)
        self.assertEqual(set(ev["data"]), {"decision_id", "property_id", "pms_property_code",
                                           "http_status", "error"}, ev)
        self.assertEqual((ev["data"]["decision_id"], ev["data"]["property_id"],
                          ev["data"]["pms_property_code"], ev["data"]["http_status"]),
                         (did, f.ids[2], FAIL_CODES[2], 500), ev)
        self.assertIsInstance(ev["data"]["error"], str, ev)
        new = self.written()[before:]
        self.assertNotIn(FAIL_CODES[2], [w["property_code"] for w in new])
        return did, new, self.trail(f, did)

    def test_third_of_three_fails_and_writes_are_compensated(self):
        f = ENV.f
        # earlier rates on the same dates, so there is something to restore
        self.publish(f, f.ids[:2], "CMP", 40000)
        did, new, entries = self.fail_publish(f.ids, "CMP", 45900)
        publish = {w["property_code"]: (i, w) for i, w in enumerate(new)
                   if w["idempotency_key"].endswith(":publish")}
        comp = {w["property_code"]: (i, w) for i, w in enumerate(new)
                if w["idempotency_key"].endswith(":publish:compensate")}
        self.assertEqual(len(new), 4, new)
        self.assertEqual(sorted(publish), FAIL_CODES[:2], new)
        self.assertEqual(sorted(comp), FAIL_CODES[:2], new)
        for pid, code in zip(f.ids[:2], FAIL_CODES[:2]):
            i, w = publish[code]
            j, c = comp[code]
            self.assertEqual(w["idempotency_key"], "%s:%s:publish" % (did, pid))
            self.assertEqual(w["rate"], money(45900))
            self.assertEqual(w["previous_rate"], money(40000))
            self.assertEqual(c["idempotency_key"], "%s:%s:publish:compensate" % (did, pid))
            self.assertEqual(c["rate"], money(40000), "compensation restores the previous rate")
            self.assertEqual(c["previous_rate"], money(45900))
            self.assertEqual((c["room_type_code"], c["from"], c["to"]),
                             (w["room_type_code"], w["from"], w["to"]))
            self.assertLess(i, j, "compensated before it was written")
        kinds = [e["kind"] for e in entries]
        self.assertEqual(kinds, ["proposed"] + ["ceiling_check"] * 3 + ["approved"] +
                         ["pms_write"] * 2 + ["pms_compensation"] * 2 + ["failed"], kinds)
        self.assertEqual(sorted(e["details"].get("property") for e in entries[5:7]),
                         sorted(f.ids[:2]))
        for e in entries[5:7]:
            self.assertEqual(e["details"].get("purpose"), "publish", e)
        self.assertEqual(sorted(e["details"].get("property") for e in entries[7:9]),
                         sorted(f.ids[:2]))
        failed = entries[-1]["details"].get("failed_writes")
        self.assertIsInstance(failed, list, entries[-1])
        self.assertEqual([x.get("property") for x in failed], [f.ids[2]], failed)

    def test_nothing_to_restore(self):
        f = ENV.f
        self.publish(f, [f.ids[0]], "NTR", 40000)  # only the first has a previous rate
        did, new, entries = self.fail_publish(f.ids, "NTR", 45900)
        keys = sorted(w["idempotency_key"] for w in new)
        self.assertEqual(keys, sorted(["%s:%s:publish" % (did, f.ids[0]),
                                       "%s:%s:publish" % (did, f.ids[1]),
                                       "%s:%s:publish:compensate" % (did, f.ids[0])]), new)
        comp = [w for w in new if w["idempotency_key"].endswith(":compensate")]
        self.assertEqual(comp[0]["rate"], money(40000))
        comps = {e["details"].get("property"): e for e in entries
                 if e["kind"] == "pms_compensation"}
        self.assertIn(f.ids[0], comps, entries)
        self.assertIn(f.ids[1], comps, "the trail records the write it could not undo")
        self.assertIn("nothing to restore", json.dumps(comps[f.ids[1]]["details"]))
        self.assertNotIn("nothing to restore", json.dumps(comps[f.ids[0]]["details"]))
        self.assertEqual(entries[-1]["kind"], "failed")

    def test_failed_decision_cannot_be_reverted(self):
        f = ENV.f
        did, new, entries = self.fail_publish([f.ids[2]], "FRV", 45900)
        self.assertEqual(new, [])
        self.assertEqual([e["kind"] for e in entries],
                         ["proposed", "ceiling_check", "approved", "failed"])
        before = len(self.written())
        r = self.req("POST", "/v2/rate-decisions/%s/revert" % did, f,
                     {"reason": "undo", "approver_saml_subject": APPROVER})
        assert_error(self, r, 409, "SVC-CONFLICT")
        self.assertEqual(self.written()[before:], [])
        self.assertEqual(self.decision(f, did)["status"], "failed")


# ----------------------------------------------------------------------------------------
class RevertTest(Base):
    def revert(self, did, reason="Competitor matched; back to the previous rate",
               approver=APPROVER, pf=None, token=None):
        return self.req("POST", "/v2/rate-decisions/%s/revert" % did, pf or ENV.p,
                        {"reason": reason, "approver_saml_subject": approver}, token=token)

    def test_revert_restores_previous_rates(self):
        p = ENV.p
        self.publish(p, p.ids[:2], "REV", 40000)
        props = [p.ids[0], p.ids[1], p.ids[2]]
        d2, new = self.publish(p, props, "REV", 45000)
        did = d2["id"]
        reason = "Competitor matched; back to the previous rate"
        before = len(self.written())
        r = self.revert(did, reason)
        data, meta = assert_success(self, r, 200)
        self.assertEqual(meta.get("sla_tier"), "platinum", r)
        self.assertEqual(data["id"], did)
        self.assertEqual(data["status"], "reverted")
        self.assertEqual(set(data["revert"]), {"reason", "approver_saml_subject", "reverted_at"})
        self.assertEqual(data["revert"]["reason"], reason)
        self.assertEqual(data["revert"]["approver_saml_subject"], APPROVER)
        self.assertRegex(data["revert"]["reverted_at"], DATETIME_RE)
        # pms-sim: the two hotels with a previous rate get it back; the third not
        new = self.written()[before:]
        self.assertEqual(sorted(w["idempotency_key"] for w in new),
                         sorted("%s:%s:revert" % (did, x) for x in p.ids[:2]), new)
        for w in new:
            self.assertEqual((w["room_type_code"], w["from"], w["to"], w["rate"]),
                             ("REV", "2027-01-10", "2027-01-12", money(40000)), w)
            self.assertEqual(w["previous_rate"], money(45000), w)
        # the stored decision
        got = self.decision(p, did)
        self.assertEqual(got["status"], "reverted")
        self.assertEqual(got["revert"], data["revert"])
        # the trail ends with the revert writes and the reverted entry
        entries = self.trail(p, did)
        kinds = [e["kind"] for e in entries]
        self.assertEqual(kinds[-4:], ["published", "pms_write", "pms_write", "reverted"], kinds)
        for e in entries[-3:-1]:
            d = e["details"]
            self.assertEqual(d.get("purpose"), "revert", d)
            self.assertEqual(d.get("rate"), money(40000), d)
            self.assertEqual(d.get("idempotency_key"), "%s:%s:revert" % (did, d.get("property")))
        last = entries[-1]["details"]
        self.assertEqual(last.get("reason"), reason, last)
        self.assertEqual(last.get("approver_saml_subject"), APPROVER, last)
        self.assertEqual(sorted(last.get("restored", [])), sorted(p.ids[:2]), last)
        self.assertEqual(last.get("not_restored_no_previous_rate"), [p.ids[2]], last)
        # the v2 event
        evs = self.events(p, did, "rate.decision.reverted")
        self.assertEqual(len(evs), 1, evs)
        ev = evs[0]
        self.assertEqual(ev.get("surface"), "v2", ev)
        self.assertEqual(sorted(ev.get("properties", [])), sorted(props), ev)
        self.assertEqual(ev["data"], {"decision_id": did, "reason": reason,
                                      "approver_saml_subject": APPROVER,
                                      "reverted_at": data["revert"]["reverted_at"]}, ev)
        self.assertEqual(len(self.events(p, did, "rate.decision.published")), 1)
        # listed as reverted, not as published
        listed = assert_success(self, self.req(
            "GET", "/v2/rate-decisions?status=reverted&limit=500", p))[0]
        self.assertIn(did, [x["id"] for x in listed])
        listed = assert_success(self, self.req(
            "GET", "/v2/rate-decisions?status=published&limit=500", p))[0]
        self.assertNotIn(did, [x["id"] for x in listed])
        # a second revert is a conflict and writes nothing
        before = len(self.written())
        assert_error(self, self.revert(did), 409, "SVC-CONFLICT")
        self.assertEqual(self.written()[before:], [])
        self.assertEqual(len(self.events(p, did, "rate.decision.reverted")), 1)

    def test_revert_without_previous_rates_writes_nothing(self):
        p = ENV.p
        d, _ = self.publish(p, [p.ids[3]], "RNP", 41000)
        before = len(self.written())
        data, _ = assert_success(self, self.revert(d["id"], "wrong room"), 200)
        self.assertEqual(data["status"], "reverted")
        self.assertEqual(self.written()[before:], [])
        entries = self.trail(p, d["id"])
        self.assertEqual(entries[-1]["kind"], "reverted")
        self.assertEqual(entries[-2]["kind"], "published")
        self.assertEqual(entries[-1]["details"].get("restored"), [])
        self.assertEqual(entries[-1]["details"].get("not_restored_no_previous_rate"),
                         [p.ids[3]])

    def test_revert_of_a_rejected_decision(self):
        p = ENV.p
        r, _ = self.post(p, [p.ids[0]], "RRJ", 130000)
        self.assertEqual(r.status, 422, r)
        did = r.body["error"]["decision_id"]
        before = len(self.written())
        assert_error(self, self.revert(did), 409, "SVC-CONFLICT")
        self.assertEqual(self.written()[before:], [])
        self.assertEqual(self.decision(p, did)["status"], "rejected")

    def test_revert_approver_rules(self):
        p = ENV.p
        self.publish(p, [p.ids[4]], "RAP", 40000)
        d, _ = self.publish(p, [p.ids[4]], "RAP", 42000)
        did = d["id"]
        before = len(self.written())
        for approver, phrase in ((PLAIN, "lacks the revenue-approver role"),
                                 ("nobody@x.example", "is not a user of this portfolio")):
            with self.subTest(approver=approver):
                r = self.revert(did, approver=approver)
                err = assert_error(self, r, 422, "SVC-GOVERNANCE-REJECTED")
                self.assertEqual(len(err.get("details", [])), 1, r)
                self.assertTrue(err["details"][0].get("field", "").endswith(
                    "approver_saml_subject"), r)
                self.assertIn(phrase, err["details"][0].get("issue", ""), r)
        self.assertEqual(self.written()[before:], [])
        self.assertEqual(self.decision(p, did)["status"], "published")
        self.assertEqual(self.events(p, did, "rate.decision.reverted"), [])
        # a proper approver (matched case-insensitively) may still revert it
        data, _ = assert_success(self, self.revert(did, approver=APPROVER.upper()), 200)
        self.assertEqual(data["status"], "reverted")
        new = self.written()[before:]
        self.assertEqual([(w["idempotency_key"], w["rate"]) for w in new],
                         [("%s:%s:revert" % (did, p.ids[4]), money(40000))])

    def test_revert_request_validation(self):
        p = ENV.p
        d, _ = self.publish(p, [p.ids[1]], "RVV", 40000)
        did = d["id"]
        path = "/v2/rate-decisions/%s/revert" % did
        before = len(self.written())
        cases = [({"approver_saml_subject": APPROVER}, "reason"),
                 ({"reason": "", "approver_saml_subject": APPROVER}, "reason"),
                 ({"reason": "  \t", "approver_saml_subject": APPROVER}, "reason"),
                 ({"reason": 5, "approver_saml_subject": APPROVER}, "reason"),
                 ({"reason": "x"}, "approver_saml_subject"),
                 ({"reason": "x", "approver_saml_subject": APPROVER, "force": True}, "force")]
        for body, field in cases:
            with self.subTest(body=body):
                err = assert_error(self, self.req("POST", path, p, body), 400,
                                   "SVC-VALIDATION-FAILED")
                self.assertIn(field, [x.get("field") for x in err.get("details", [])], err)
        r = self.req("POST", path, p, "{", headers={"Content-Type": "application/json"})
        assert_error(self, r, 400, "SVC-REQUEST-MALFORMED")
        r = self.req("POST", path, p, json.dumps({"reason": "x", "approver_saml_subject":
                                                  APPROVER}),
                     headers={"Content-Type": "text/plain"})
        assert_error(self, r, 415, "SVC-UNSUPPORTED-MEDIA-TYPE")
        self.assertEqual(self.written()[before:], [])
        self.assertEqual(self.decision(p, did)["status"], "published")

    def test_revert_replay_writes_once(self):
        p = ENV.p
        self.publish(p, [p.ids[0]], "RIK", 40000)
        d, _ = self.publish(p, [p.ids[0]], "RIK", 43000)
        did = d["id"]
        before = len(self.written())
        key = {"Idempotency-Key": "revert-" + did}
        body = {"reason": "double click", "approver_saml_subject": APPROVER}
        path = "/v2/rate-decisions/%s/revert" % did
        r1 = self.req("POST", path, p, body, headers=key)
        data, _ = assert_success(self, r1, 200)
        self.assertEqual(data["status"], "reverted")
        r2 = self.req("POST", path, p, body, headers=key)
        self.assertEqual(r2.status, 200, r2)
        self.assertEqual(r2.headers.get("Idempotent-Replayed"), "true", r2)
        self.assertEqual(r2.body, r1.body)
        self.assertEqual([w["idempotency_key"] for w in self.written()[before:]],
                         ["%s:%s:revert" % (did, p.ids[0])])
        self.assertEqual(len(self.events(p, did, "rate.decision.reverted")), 1)

    def test_revert_scope_and_reach(self):
        p, f = ENV.p, ENV.f
        d, _ = self.publish(p, [p.ids[2]], "RSC", 40000)
        did = d["id"]
        before = len(self.written())
        assert_error(self, self.revert(did, token=ENV.p_read), 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        # another portfolio's token and header
        assert_error(self, self.revert(did, pf=f), 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.revert(UNKNOWN_RD), 404, "SVC-NOT-FOUND")
        # a token narrowed to another hotel cannot revert this one
        narrow = self.srv.access_token(p.client_id, p.client_secret,
                                       "rates:read rates:write property:" + p.codes[0])
        assert_error(self, self.revert(did, token=narrow), 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(self.written()[before:], [])
        self.assertEqual(self.decision(p, did)["status"], "published")


if __name__ == "__main__":
    harness.run_main()
