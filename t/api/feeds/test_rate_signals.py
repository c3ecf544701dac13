"""Revenue signals (issue 15): the rate-suggestion and OTA-rate feeds, the
v1 rate-suggestion state machine (approval governed by the brand ceilings
and pushed to a real booking-engine simulator, rejection, expiry), approved
rate floors and the parity alerts they judge, with the v1 and v2 events
delivered to a real HTTPS receiver. Black-box: HTTP, revopsctl, pms-sim and
the receiver; the database is touched only to move a suggestion's date into
the past (no other way to age it), through the backend's own client.
"""

import datetime
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import idp as idplib  # noqa: E402
import pmssim  # noqa: E402
import receiver  # noqa: E402
from harness import (assert_audit_chain, assert_error, assert_success, ctl_user,  # noqa: E402
                     idp_set, rate_decision_body, saml_grant, wait_until)

PUBLIC_URL = "http://sp.test"
ENTITY = "https://idp.rate-signals.example/saml"
APPROVER = "rev-approver@x.example"
PLAIN = "plain@x.example"
APPROVER_B = "approver-b@x.example"
UNKNOWN_PROP = "prop_01AAAAAAAAAAAAAAAAAAAAAAAA"
UNKNOWN_RS = "rs_01AAAAAAAAAAAAAAAAAAAAAAAA"
RS_ID = r"^rs_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
PA_ID = r"^pa_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
SUGGESTION_KEYS = {"id", "status", "property_id", "room_type_code", "date", "current_rate",
                   "proposed_rate", "trigger", "decision", "booking_engine", "audit_trail_url",
                   "created_at", "updated_at"}
ALERT_KEYS = {"id", "status", "property_id", "ota", "room_type_code", "date", "observed_rate",
              "approved_rate", "gap", "floor_source", "opened_at", "last_observed_at",
              "resolved_at", "resolved_by_rate", "updated_at"}

E = None


def day(offset):
    """The UTC date offset days from today, YYYY-MM-DD."""
    d = datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=offset)
    return d.isoformat()


def now_rfc3339(offset_s=0.0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_s)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def money(minor, currency="PLN"):
    return {"currency": currency, "minor_units": minor}


def suggestion(prop, date=None, current=45900, proposed=52900, room="DBL",
               trigger="pickup_pace", currency="PLN"):
    return {"property_id": prop, "room_type_code": room, "date": date or day(30),
            "current_rate": money(current, currency), "proposed_rate": money(proposed, currency),
            "trigger": trigger}


def ota_rate(prop, rate, date=None, ota="booking.com", room="DBL", observed_at=None,
             currency="PLN"):
    return {"property_id": prop, "ota": ota, "room_type_code": room, "date": date or day(40),
            "rate": money(rate, currency), "observed_at": observed_at or now_rfc3339()}


class Env:
    pass


def _ok(r, status, what):
    if r.status != status:
        raise AssertionError("%s: %r" % (what, r))
    return r.body


def setUpModule():
    global E
    e = Env()
    e.ca_dir = tempfile.mkdtemp(prefix="revops-signals-ca-")
    e.idp = e.rx = e.sim = e.srv = None
    try:
        if not idplib.tools_available():
            raise AssertionError("openssl and xmlsec1 are required (scripts/install-deps.sh)")
        e.ca = receiver.TestCA(e.ca_dir)
        e.rx = receiver.Receiver(e.ca)
        e.sim = pmssim.PmsSim("--booking-engine-fail-codes", "FAILBE")
        e.srv = harness.Server(["--pms-url", e.sim.url,
                                "--booking-engine-url", e.sim.url + "/booking-engine",
                                "--public-url", PUBLIC_URL, "--trust-ca", e.ca.ca_pem,
                                "--allow-private-targets"])
        srv = e.srv
        # Portfolio A: three Aurora hotels (ceiling PLN 1200.00), one Borealis
        # hotel without any ceiling, one Aurora hotel whose booking engine fails.
        e.a = srv.seed_portfolio("enterprise", 3, brand="Aurora")
        e.props = [p["id"] for p in e.a.properties]
        e.bor = srv.add_property(e.a.id, brand="Borealis")["id"]
        e.failing = srv.add_property(e.a.id, brand="Aurora", code="FAILBE")["id"]
        e.idp = idplib.IdP(ENTITY, audience=PUBLIC_URL + "/saml/sp",
                           recipient=PUBLIC_URL + "/oauth/token")
        idp_set(srv, e.a.id, ENTITY, e.idp.cert_path)
        ctl_user(srv, e.a.id, APPROVER, ["revenue-approver"])
        ctl_user(srv, e.a.id, PLAIN, ["finance-operator"])
        e.approver = _ok(saml_grant(srv, e.idp.assertion(APPROVER)), 200,
                         "approver token")["access_token"]
        e.approver_one = _ok(saml_grant(srv, e.idp.assertion(APPROVER),
                                        scope="rates:read rates:write property:" + e.a.codes[0]),
                             200, "narrowed approver token")["access_token"]
        e.plain = _ok(saml_grant(srv, e.idp.assertion(PLAIN)), 200, "plain token")["access_token"]
        e.feeder, e.feed_tok = srv.client_token(e.a.id, "feeds:write", name="feeder")
        e.reader, e.read_tok = srv.client_token(e.a.id, "rates:read alerts:read", name="reader")
        one = srv.create_client(e.a.id, name="one-property", properties=e.a.codes[0])
        e.one_tok = srv.access_token(one["client_id"], one["client_secret"])
        # Portfolio C: big batches, away from A's webhook lanes.
        e.c = srv.seed_portfolio("enterprise", 3, brand="Aurora")
        # Portfolio B: someone else's, with its own suggestion.
        e.b = srv.seed_portfolio("group", 1, brand="Aurora")
        ctl_user(srv, e.b.id, APPROVER_B, ["revenue-approver"])
        r = srv.request("POST", "/v2/feeds/rate-suggestions", token=e.b.token, portfolio=e.b.id,
                        body={"items": [suggestion(e.b.properties[0]["id"])]})
        e.b_rs = _ok(r, 200, "B's suggestion")["data"]["results"][0]["id"]
        # The receiver: v1 rate.* and v2 parity events of portfolio A.
        for events in (["rate.suggested"], ["rate.approved", "rate.rejected"]):
            r = srv.request("POST", "/v1/webhooks", token=e.a.token, portfolio=e.a.id,
                            body={"url": e.rx.url("/v1"), "events": events})
            _ok(r, 201, "v1 subscription")
        r = srv.request("POST", "/v2/webhooks", token=e.a.token, portfolio=e.a.id,
                        body={"url": e.rx.url("/v2"), "events": ["parity.breach.detected"]})
        _ok(r, 201, "v2 subscription")
    except BaseException:
        _teardown(e, check=False)
        raise
    E = e


def _teardown(e, check=True):
    try:
        for thing in (e.srv, e.sim):
            if thing is not None:
                thing.close() if check else thing.cleanup()
    finally:
        if e.rx is not None:
            e.rx.close()
        if e.idp is not None:
            e.idp.cleanup()
        shutil.rmtree(e.ca_dir, ignore_errors=True)


def tearDownModule():
    if E is not None:
        _teardown(E)


class Base(unittest.TestCase):
    maxDiff = None

    def feed(self, path, items, token=None, portfolio=None, **kw):
        return E.srv.request("POST", "/v2/feeds/" + path, body={"items": items},
                             token=token or E.feed_tok, portfolio=portfolio or E.a.id, **kw)

    def feed_ok(self, path, items, **kw):
        data, _ = assert_success(self, self.feed(path, items, **kw), 200)
        self.assertEqual(len(data["results"]), len(items), data)
        return data

    def suggest(self, **kw):
        data = self.feed_ok("rate-suggestions", [suggestion(kw.pop("prop", E.props[0]), **kw)])
        res = data["results"][0]
        self.assertEqual(res["status"], "created", res)
        return res["id"]

    def get(self, path, token=None, portfolio=None, **kw):
        return E.srv.request("GET", path, token=token or E.read_tok,
                             portfolio=portfolio or E.a.id, **kw)

    def suggestion(self, sid, **kw):
        data, _ = assert_success(self, self.get("/v2/rate-suggestions/" + sid, **kw))
        return data

    def act(self, sid, verb, token=None, body=None, portfolio=None, **kw):
        return E.srv.request("POST", "/v2/rate-suggestions/%s/%s" % (sid, verb), body=body,
                             token=token or E.approver, portfolio=portfolio or E.a.id, **kw)

    def trail_kinds(self, sid):
        data, _ = assert_success(self, self.get("/v2/rate-suggestions/%s/audit-trail" % sid))
        self.assertEqual(data["suggestion_id"], sid)
        return [x["kind"] for x in assert_audit_chain(self, data)], data

    def pushes(self):
        status, body = E.sim.get("/booking-engine/written")
        self.assertEqual(status, 200)
        return body

    def events(self, path, type_, pred=lambda ev: True, count=1, timeout=10.0):
        """The deliveries to path of event type_ matching pred, once there
        are count of them."""
        def found():
            got = []
            for d in E.rx.received(path):
                ev = d.json()
                if ev["type"] == type_ and pred(ev):
                    got.append(ev)
            return got
        wait_until(lambda: len(found()) >= count, timeout,
                   what="%d %s deliveries to %s" % (count, type_, path))
        return found()


# --------------------------------------------------------------------- feeds

class SuggestionFeedTest(Base):
    def test_good_and_bad_items_in_one_batch(self):
        date = day(31)
        items = [
            suggestion(E.props[0], date=date, trigger="competitor_rate_change"),
            suggestion(E.props[1], date="2026-02-30"),                      # no such day
            dict(suggestion(E.props[1]), extra=1),                          # unknown field
            suggestion(E.props[1], currency="EUR"),                         # not the property's
            suggestion(E.props[1], date=day(-1)),                           # in the past
            suggestion(UNKNOWN_PROP),                                       # not in portfolio
            suggestion(E.b.properties[0]["id"]),                            # another portfolio
            dict(suggestion(E.props[2]), current_rate={"currency": "PLN"}),  # missing amount
            suggestion(E.props[2], proposed=0, trigger="  ", room="D B"),   # several problems
            suggestion(E.props[1], date=date),
        ]
        data = self.feed_ok("rate-suggestions", items)
        st = [r["status"] for r in data["results"]]
        self.assertEqual(st, ["created"] + ["rejected"] * 8 + ["created"], data)
        self.assertEqual((data["created"], data["duplicate"], data["rejected"]), (2, 0, 8))
        self.assertEqual([r["index"] for r in data["results"]], list(range(10)))
        errs = {r["index"]: r["error"] for r in data["results"] if r["status"] == "rejected"}
        fields = {i: [(d["field"], d["issue"]) for d in e["details"]] for i, e in errs.items()}
        self.assertEqual(fields[1], [("items[1].date", "must be a date YYYY-MM-DD")])
        self.assertEqual(fields[2], [("items[2].extra", "is not a known field")])
        self.assertEqual(fields[3], [("items[3].current_rate.currency",
                                      "must be the property's currency, PLN"),
                                     ("items[3].proposed_rate.currency",
                                      "must be the property's currency, PLN")])
        self.assertEqual(fields[4], [("items[4].date", "must not be in the past (UTC)")])
        for i in (5, 6):
            self.assertEqual(errs[i]["code"], "SVC-AUTH-INSUFFICIENT-ROLE", errs[i])
            self.assertEqual(fields[i], [("items[%d].property_id" % i,
                                          "is not a property of this portfolio")])
        self.assertEqual(fields[7], [("items[7].current_rate.minor_units", "is required")])
        self.assertEqual([f for f, _ in fields[8]],
                         ["items[8].room_type_code", "items[8].proposed_rate.minor_units",
                          "items[8].trigger"])
        for i in (1, 2, 3, 4, 7, 8):
            self.assertEqual(errs[i]["code"], "SVC-VALIDATION-FAILED", errs[i])
        # The good ones exist, the bad ones left nothing.
        ids = [data["results"][0]["id"], data["results"][9]["id"]]
        for sid, prop in zip(ids, (E.props[0], E.props[1])):
            self.assertRegex(sid, RS_ID)
            s = self.suggestion(sid)
            self.assertEqual(set(s), SUGGESTION_KEYS)
            self.assertEqual((s["status"], s["property_id"], s["date"]),
                             ("pending_approval", prop, date))
            self.assertIsNone(s["decision"])
            self.assertIsNone(s["booking_engine"])
        data, _ = assert_success(self, self.get("/v2/rate-suggestions?date_from=%s&date_to=%s"
                                                % (date, date)))
        self.assertEqual([s["id"] for s in data], ids)
        # rate.suggested (v1): the spec's data exactly, the suggestion's property.
        ev = self.events("/v1", "rate.suggested", lambda ev: ev["data"]["suggestion_id"] == ids[0])
        self.assertEqual(ev[0]["data"], {
            "suggestion_id": ids[0], "room_type_code": "DBL", "date": date,
            "current_rate": money(45900), "proposed_rate": money(52900),
            "trigger": "competitor_rate_change"})
        self.assertEqual(ev[0]["property_id"], E.props[0])
        self.assertNotIn("portfolio_id", ev[0])

    def test_batch_limits(self):
        c = E.c
        props = [p["id"] for p in c.properties]

        def feed(items):
            return E.srv.request("POST", "/v2/feeds/rate-suggestions", body={"items": items},
                                 token=c.token, portfolio=c.id)

        r = feed([suggestion(props[0])] * 501)
        d = assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
        self.assertEqual(d["details"][0]["field"], "items", d)
        assert_error(self, feed([]), 400, "SVC-VALIDATION-FAILED")
        assert_error(self, feed([suggestion(props[0]), "not an object"]), 400,
                     "SVC-VALIDATION-FAILED")
        r = E.srv.request("POST", "/v2/feeds/rate-suggestions", body={"item": []},
                          token=c.token, portfolio=c.id)
        assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
        self.assertEqual(c.get("/v2/rate-suggestions").body["data"], [])
        # 500 is allowed, and each gets its result
        r = feed([suggestion(props[i % 3], date=day(200 + i % 50)) for i in range(500)])
        data, _ = assert_success(self, r, 200)
        self.assertEqual(data["created"], 500)
        self.assertEqual(len({r["id"] for r in data["results"]}), 500)
        self.assertEqual(len(c.get("/v2/rate-suggestions?limit=500").body["data"]), 500)

    def test_scope_and_portfolio(self):
        r = self.feed("rate-suggestions", [suggestion(E.props[0])], token=E.read_tok)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.feed("rate-suggestions", [suggestion(E.props[0])], portfolio=E.b.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        # a per-property token feeds its property, not another
        data = self.feed_ok("rate-suggestions", [suggestion(E.props[0]), suggestion(E.props[1])],
                            token=E.one_tok)
        self.assertEqual(data["results"][0]["status"], "created")
        err = data["results"][1]["error"]
        self.assertEqual(err["code"], "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(err["details"], [{"field": "items[1].property_id",
                                           "issue": "is outside this token"}])
        # X-Service-Property narrows the same way
        data = self.feed_ok("rate-suggestions", [suggestion(E.props[0]), suggestion(E.props[2])],
                            token=E.a.token, property=E.props[2])
        self.assertEqual([r["status"] for r in data["results"]], ["rejected", "created"])

    def test_idempotent_replay(self):
        hdr = {"Idempotency-Key": "feed-replay-1"}
        first = self.feed("rate-suggestions", [suggestion(E.props[0], date=day(60))],
                          headers=hdr)
        again = self.feed("rate-suggestions", [suggestion(E.props[0], date=day(60))],
                          headers=hdr)
        self.assertEqual(first.status, 200, first)
        self.assertEqual(again.status, 200, again)
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")
        self.assertEqual(again.body["data"], first.body["data"])
        data, _ = assert_success(self, self.get("/v2/rate-suggestions?date_from=%s&date_to=%s"
                                                % (day(60), day(60))))
        self.assertEqual(len(data), 1, data)


class OtaFeedTest(Base):
    def test_bad_items_rejected_good_ones_kept(self):
        items = [
            ota_rate(E.props[0], 30000, date=day(90)),
            ota_rate(E.props[0], 30000, currency="EUR"),
            ota_rate(E.props[0], 30000, observed_at="yesterday"),
            ota_rate(E.props[0], 30000, observed_at=now_rfc3339(3600)),
            ota_rate(E.props[0], -5),
            ota_rate(E.props[0], 30000, ota="booking com"),
            ota_rate(UNKNOWN_PROP, 30000),
            ota_rate(E.props[0], 30000, date=day(90), observed_at="2026-11-22T09:00:00+01:00"),
        ]
        data = self.feed_ok("ota-rates", items)
        st = [r["status"] for r in data["results"]]
        self.assertEqual(st, ["created"] + ["rejected"] * 6 + ["created"], data)
        fields = [[d["field"] for d in r["error"]["details"]]
                  for r in data["results"] if r["status"] == "rejected"]
        self.assertEqual(fields, [["items[1].rate.currency"], ["items[2].observed_at"],
                                  ["items[3].observed_at"], ["items[4].rate.minor_units"],
                                  ["items[5].ota"], ["items[6].property_id"]])
        self.assertEqual(data["results"][0]["parity"], "no_floor")
        self.assertIsNone(data["results"][0]["parity_alert_id"])
        # the older observation of the same key changes nothing
        self.assertEqual(data["results"][7]["parity"], "stale")


# ------------------------------------------------------------ suggestions

class SuggestionFlowTest(Base):
    def test_approve_pushes_then_records(self):
        date = day(33)
        sid = self.suggest(prop=E.props[1], date=date, proposed=61900, room="TWN")
        before = len(self.pushes())
        r = self.act(sid, "approve")
        s, _ = assert_success(self, r, 200)
        self.assertEqual(s["status"], "approved", s)
        self.assertEqual(s["decision"]["by"], APPROVER)
        self.assertIsNone(s["decision"]["reason"])
        # the booking engine simulator holds the rate
        pushes = self.pushes()
        self.assertEqual(len(pushes), before + 1)
        p = pushes[-1]
        self.assertEqual((p["property_code"], p["room_type_code"], p["from"], p["to"], p["rate"],
                          p["idempotency_key"]),
                         (E.a.codes[1], "TWN", date, date, money(61900), sid + ":approve"))
        self.assertEqual(s["booking_engine"]["ref"], p["pms_ref"])
        kinds, trail = self.trail_kinds(sid)
        self.assertEqual(kinds, ["suggested", "ceiling_check", "approved", "booking_push"])
        chk = trail["entries"][1]["details"]
        self.assertEqual((chk["ceiling"], chk["passed"]), (E.a.ceiling["id"], True))
        self.assertEqual(trail["entries"][2]["actor"], "user:" + APPROVER)
        self.assertEqual(trail["entries"][2]["details"]["roles"], ["revenue-approver"])
        ev = self.events("/v1", "rate.approved", lambda ev: ev["data"]["suggestion_id"] == sid)
        self.assertEqual(ev[0]["property_id"], E.props[1])
        data = dict(ev[0]["data"])
        self.assertRegex(data.pop("approved_at"), harness.DATETIME_RE)
        self.assertEqual(data, {"suggestion_id": sid, "room_type_code": "TWN", "date": date,
                                "rate": money(61900), "approved_by": APPROVER,
                                "pushed_to_booking_engine": True})
        # no second transition of any kind
        for verb in ("approve", "reject"):
            d = assert_error(self, self.act(sid, verb), 409, "SVC-CONFLICT")
            self.assertIn("approved", d["message"])
        self.assertEqual(len(self.pushes()), before + 1)

    def test_keyed_approval_replays_without_a_second_push(self):
        # the answer is stored inside the record of the approval (it
        # pushes before it records, outside the pipeline's held write)
        sid = self.suggest(prop=E.props[1], date=day(34), proposed=61800, room="TWN")
        before = len(self.pushes())
        hdr = {"Idempotency-Key": "approve-" + sid}
        first = self.act(sid, "approve", headers=hdr)
        s, _ = assert_success(self, first, 200)
        self.assertEqual(s["status"], "approved", s)
        again = self.act(sid, "approve", headers=hdr)
        self.assertEqual(again.status, 200, again)
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")
        self.assertEqual(again.body, first.body)
        self.assertEqual(len(self.pushes()), before + 1)
        # a refusal recorded with its trail replays too
        sid = self.suggest(prop=E.props[0], date=day(35), proposed=130000)
        hdr = {"Idempotency-Key": "approve-" + sid}
        first = self.act(sid, "approve", headers=hdr)
        assert_error(self, first, 422, "SVC-RATE-CEILING-EXCEEDED")
        again = self.act(sid, "approve", headers=hdr)
        self.assertEqual((again.status, again.body), (422, first.body))
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")

    def test_ceiling_refusal_keeps_it_pending(self):
        sid = self.suggest(prop=E.props[0], proposed=130000)
        before = len(self.pushes())
        d = assert_error(self, self.act(sid, "approve"), 422, "SVC-RATE-CEILING-EXCEEDED")
        self.assertEqual(len(d["details"]), 1, d)
        self.assertEqual({k: d["details"][0][k] for k in ("field", "issue", "ceiling", "limit",
                                                          "proposed", "property")},
                         {"field": "proposed_rate", "ceiling": E.a.ceiling["id"],
                          "issue": "the proposed rate is above the ceiling",
                          "limit": money(120000), "proposed": money(130000),
                          "property": E.props[0]})
        self.assertEqual(len(self.pushes()), before)
        self.assertEqual(self.suggestion(sid)["status"], "pending_approval")
        kinds, _ = self.trail_kinds(sid)
        self.assertEqual(kinds, ["suggested", "ceiling_check", "approval_refused"])
        # then rejected, with a reason
        s, _ = assert_success(self, self.act(sid, "reject", body={"reason": "Too high"}))
        self.assertEqual((s["status"], s["decision"]["reason"]), ("rejected", "Too high"))
        kinds, _ = self.trail_kinds(sid)
        self.assertEqual(kinds[-1], "rejected")
        ev = self.events("/v1", "rate.rejected", lambda ev: ev["data"]["suggestion_id"] == sid)
        data = dict(ev[0]["data"])
        self.assertRegex(data.pop("rejected_at"), harness.DATETIME_RE)
        self.assertEqual(data, {"suggestion_id": sid, "room_type_code": "DBL",
                                "date": self.suggestion(sid)["date"],
                                "proposed_rate": money(130000), "rejected_by": APPROVER,
                                "reason": "Too high"})
        self.assertEqual(ev[0]["property_id"], E.props[0])
        assert_error(self, self.act(sid, "approve"), 409, "SVC-CONFLICT")
        self.assertEqual(len(self.pushes()), before)

    def test_no_ceiling_covers_the_brand(self):
        sid = self.suggest(prop=E.bor, proposed=10000)
        d = assert_error(self, self.act(sid, "approve"), 422, "SVC-RATE-CEILING-EXCEEDED")
        self.assertIn("no brand ceiling of brand Borealis", d["details"][0]["issue"], d)
        self.assertEqual(self.suggestion(sid)["status"], "pending_approval")

    def test_reject_without_body_has_no_reason(self):
        sid = self.suggest()
        s, _ = assert_success(self, self.act(sid, "reject"))
        self.assertIsNone(s["decision"]["reason"])
        ev = self.events("/v1", "rate.rejected", lambda ev: ev["data"]["suggestion_id"] == sid)
        self.assertIsNone(ev[0]["data"]["reason"])
        d = assert_error(self, self.act(sid, "reject", body={"reason": 5}), 400,
                         "SVC-VALIDATION-FAILED")
        self.assertEqual(d["details"][0]["field"], "reason")
        # a blank reason is no reason; an empty JSON body is no body
        other = self.suggest()
        s, _ = assert_success(self, self.act(other, "reject", body={"reason": "  "}))
        self.assertIsNone(s["decision"]["reason"])
        third = self.suggest()
        r = E.srv.request("POST", "/v2/rate-suggestions/%s/reject" % third, token=E.approver,
                          portfolio=E.a.id, headers={"Content-Type": "application/json"})
        assert_success(self, r)

    def test_failed_push_stays_pending(self):
        sid = self.suggest(prop=E.failing)
        d = assert_error(self, self.act(sid, "approve"), 502, "SVC-PMS-WRITE-FAILED")
        self.assertIn("booking engine", d["details"][0]["issue"] + d["message"])
        self.assertEqual(self.suggestion(sid)["status"], "pending_approval")
        kinds, _ = self.trail_kinds(sid)
        self.assertEqual(kinds, ["suggested", "ceiling_check", "booking_push_failed"])
        self.assertEqual([d for d in E.rx.received("/v1")
                          if d.json()["type"] == "rate.approved"
                          and d.json()["data"]["suggestion_id"] == sid], [])
        # it can still be rejected
        s, _ = assert_success(self, self.act(sid, "reject"))
        self.assertEqual(s["status"], "rejected")

    def test_who_may_decide(self):
        sid = self.suggest()
        before = len(self.pushes())
        for tok in (E.a.token, E.plain):
            d = assert_error(self, self.act(sid, "approve", token=tok), 403,
                             "SVC-AUTH-INSUFFICIENT-ROLE")
            self.assertIn("revenue-approver", d["message"])
        assert_error(self, self.act(sid, "approve", token=E.read_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.act(E.b_rs, "approve"), 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.act(UNKNOWN_RS, "approve"), 404, "SVC-NOT-FOUND")
        assert_error(self, self.act(sid, "approve", portfolio=E.b.id), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(len(self.pushes()), before)
        self.assertEqual(self.suggestion(sid)["status"], "pending_approval")

    def test_reading_is_scoped(self):
        sid0 = self.suggest(prop=E.props[0], date=day(70))
        sid1 = self.suggest(prop=E.props[1], date=day(70))
        assert_error(self, self.get("/v2/rate-suggestions/" + E.b_rs), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/rate-suggestions/" + UNKNOWN_RS), 404, "SVC-NOT-FOUND")
        assert_error(self, self.get("/v2/rate-suggestions/" + sid1, token=E.one_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/rate-suggestions/%s/audit-trail" % sid1,
                                    token=E.one_tok), 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        q = "/v2/rate-suggestions?date_from=%s&date_to=%s" % (day(70), day(70))
        data, _ = assert_success(self, self.get(q, token=E.one_tok))
        self.assertEqual([s["id"] for s in data], [sid0])
        data, _ = assert_success(self, self.get(q, property=E.props[1], token=E.a.token))
        self.assertEqual([s["id"] for s in data], [sid1])
        assert_error(self, self.get(q + "&property_id=" + E.props[1], token=E.one_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/rate-suggestions", portfolio=E.b.id), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        # a filter naming another portfolio's property touches it: refused
        assert_error(self, self.get("/v2/rate-suggestions?property_id="
                                    + E.b.properties[0]["id"], token=E.a.token), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        for bad in ("status=pending", "date_from=2026-13-01", "limit=0"):
            assert_error(self, self.get("/v2/rate-suggestions?" + bad), 400,
                         "SVC-REQUEST-MALFORMED")
        # B's list does not show A's suggestions
        data, _ = assert_success(self, self.get("/v2/rate-suggestions", token=E.b.token,
                                                portfolio=E.b.id))
        self.assertEqual([s["id"] for s in data], [E.b_rs])

    def test_list_pages_and_filters(self):
        date = day(80)
        ids = [self.suggest(prop=E.props[2], date=date) for _ in range(5)]
        assert_success(self, self.act(ids[1], "reject"))
        q = "/v2/rate-suggestions?property_id=%s&date_from=%s&date_to=%s" % (E.props[2], date,
                                                                           date)
        seen, cursor = [], None
        while True:
            data, meta = assert_success(self, self.get(q + "&limit=2" + (
                "&cursor=" + cursor if cursor else "")))
            seen += [s["id"] for s in data]
            cursor = meta["next_cursor"]
            if cursor is None:
                break
        self.assertEqual(seen, ids)
        data, _ = assert_success(self, self.get(q + "&status=rejected"))
        self.assertEqual([s["id"] for s in data], [ids[1]])
        data, _ = assert_success(self, self.get(q + "&status=pending_approval"))
        self.assertEqual([s["id"] for s in data], ids[:1] + ids[2:])

    def test_expiry(self):
        sid = self.suggest(date=day(1))
        later = self.suggest(date=day(1))
        # Age both by moving their stay date into the past.
        p = E.srv.db.run("UPDATE rate_suggestions SET stay_date = '%s' WHERE id IN ('%s', '%s')"
                         % (day(-2), sid, later))
        self.assertEqual(p.returncode, 0, p.stderr)
        d = assert_error(self, self.act(sid, "approve"), 409, "SVC-CONFLICT")
        self.assertIn("expired", d["message"])
        self.assertEqual(self.suggestion(sid)["status"], "expired")
        kinds, _ = self.trail_kinds(sid)
        self.assertEqual(kinds, ["suggested", "expired"])
        # the worker's sweep (at start, then every minute) expires the other
        E.srv.restart()
        wait_until(lambda: self.suggestion(later)["status"] == "expired", 10,
                   what="the sweep to expire %s" % later)


# ------------------------------------------------------------ every route

class EveryRouteTest(Base):
    """Each new route refuses a call across portfolios, and a property
    outside the token: a list leaves it out, an item of a feed is
    rejected, a resource is 403 and nothing changes."""

    def test_across_portfolios_and_outside_the_token(self):
        other = E.props[1]  # outside E.one_tok and E.approver_one
        sid = self.suggest(prop=other)
        rid = self.feed_ok("reviews", [{
            "property_id": other, "source": "google", "external_id": "every-route-1",
            "rating": 4, "max_rating": 5, "language": "en", "text": "ok", "author": "A",
            "published_at": now_rfc3339(-60)}])["results"][0]["id"]
        self.publish_floor(other)
        aid = self.feed_ok("ota-rates", [ota_rate(other, 100, date=day(61))])["results"][0][
            "parity_alert_id"]
        self.assertIsNotNone(aid)
        item = {"rate-suggestions": suggestion(other),
                "ota-rates": ota_rate(other, 30000),
                "reviews": {"property_id": other, "source": "google",
                            "external_id": "every-route-2", "rating": 4, "max_rating": 5,
                            "language": "en", "text": "ok", "author": "A",
                            "published_at": now_rfc3339(-60)}}
        routes = [("POST", "/v2/feeds/" + f, {"items": [it]}) for f, it in item.items()] + [
            ("GET", "/v2/rate-suggestions", None),
            ("GET", "/v2/rate-suggestions/" + sid, None),
            ("GET", "/v2/rate-suggestions/%s/audit-trail" % sid, None),
            ("POST", "/v2/rate-suggestions/%s/approve" % sid, None),
            ("POST", "/v2/rate-suggestions/%s/reject" % sid, {"reason": "x"}),
            ("GET", "/v2/parity-alerts", None),
            ("GET", "/v2/parity-alerts/" + aid, None),
            ("GET", "/v2/reviews", None),
            ("GET", "/v2/reviews/" + rid, None),
            ("PUT", "/v2/reviews/%s/reply" % rid, {"text": "Thanks"}),
            ("POST", "/v2/reviews/%s/reply/publish" % rid, None),
            ("GET", "/v2/reputation-alerts", None),
            ("GET", "/v2/reputation", None),
        ]
        for method, path, body in routes:
            with self.subTest(route=method + " " + path):
                # A's token naming portfolio B: refused before anything runs
                r = E.srv.request(method, path, body=body, token=E.approver,
                                  portfolio=E.b.id)
                assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
                # B's token on A's resources
                if "/" + sid in path or "/" + aid in path or "/" + rid in path:
                    r = E.srv.request(method, path, body=body, token=E.b.token,
                                      portfolio=E.b.id)
                    assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
                # a token narrowed to another property of A
                tok = E.approver_one if "rate-suggestions/" in path else E.one_tok
                r = E.srv.request(method, path, body=body, token=tok, portfolio=E.a.id)
                if path.startswith("/v2/feeds/"):
                    data, _ = assert_success(self, r, 200)
                    self.assertEqual(data["results"][0]["error"]["code"],
                                     "SVC-AUTH-INSUFFICIENT-ROLE")
                elif method == "GET" and "/" + sid not in path and "/" + aid not in path \
                        and "/" + rid not in path:
                    data, _ = assert_success(self, r, 200)
                    listed = data["properties"] if path == "/v2/reputation" else data
                    self.assertNotIn(other, [x.get("property_id") for x in listed])
                else:
                    assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        # nothing changed
        self.assertEqual(self.suggestion(sid)["status"], "pending_approval")
        rv, _ = assert_success(self, self.get("/v2/reviews/" + rid, token=E.a.token))
        self.assertEqual(rv["reply"]["status"], "none")
        self.assertEqual([x["kind"] for x in self.trail_kinds(sid)[1]["entries"]], ["suggested"])

    def publish_floor(self, prop):
        body = rate_decision_body([prop], E.a.ceiling["id"], APPROVER, date_from=day(61),
                                  date_to=day(61), minor_units=45000)
        r = E.srv.request("POST", "/v2/rate-decisions", body=body, token=E.a.token,
                          portfolio=E.a.id)
        assert_success(self, r, 201)


# ------------------------------------------------------------------ parity

class ParityTest(Base):
    def publish(self, prop, minor, date_from, date_to, room="DBL"):
        body = rate_decision_body([prop], E.a.ceiling["id"], APPROVER, room=room,
                                  date_from=date_from, date_to=date_to, minor_units=minor)
        r = E.srv.request("POST", "/v2/rate-decisions", body=body, token=E.a.token,
                          portfolio=E.a.id)
        data, _ = assert_success(self, r, 201)
        return data["id"]

    def observe(self, prop, rate, date, **kw):
        data = self.feed_ok("ota-rates", [ota_rate(prop, rate, date=date, **kw)])
        res = data["results"][0]
        self.assertEqual(res["status"], "created", res)
        return res["parity"], res["parity_alert_id"]

    def breaches(self, alert_id):
        return [ev for ev in E.rx.received("/v2")
                if ev.json()["type"] == "parity.breach.detected"
                and ev.json()["data"]["alert_id"] == alert_id]

    def test_breach_once_then_resolution_and_a_new_breach(self):
        prop, date = E.props[0], day(45)
        did = self.publish(prop, 45000, day(44), day(46))
        self.assertEqual(self.observe(prop, 46000, date)[0], "at_or_above_floor")
        parity, aid = self.observe(prop, 40000, date)
        self.assertEqual(parity, "breach_opened")
        self.assertRegex(aid, PA_ID)
        ev = self.events("/v2", "parity.breach.detected",
                         lambda ev: ev["data"]["alert_id"] == aid)[0]
        self.assertEqual(ev["portfolio_id"], E.a.id)
        self.assertEqual(ev["properties"], [prop])
        self.assertEqual(ev["data"], {"alert_id": aid, "property_id": prop,
                                      "room_type_code": "DBL", "date": date,
                                      "ota": "booking.com", "ota_rate": money(40000),
                                      "approved_floor": money(45000)})
        # still below: the same alert, no second event
        self.assertEqual(self.observe(prop, 41000, date), ("breach_continues", aid))
        # another OTA is another breach
        parity, other = self.observe(prop, 44000, date, ota="expedia")
        self.assertEqual(parity, "breach_opened")
        self.assertNotEqual(other, aid)
        a, _ = assert_success(self, self.get("/v2/parity-alerts/" + aid))
        self.assertEqual(set(a), ALERT_KEYS)
        self.assertEqual((a["status"], a["observed_rate"], a["approved_rate"]),
                         ("open", money(41000), money(45000)))
        self.assertEqual(a["gap"], {"minor_units": 4000, "percent": 8.89})
        self.assertEqual(a["floor_source"], {"kind": "rate_decision", "id": did})
        # an older observation changes nothing
        self.assertEqual(self.observe(prop, 50000, date, observed_at=now_rfc3339(-3600))[0],
                         "stale")
        self.assertEqual(self.get("/v2/parity-alerts/" + aid).body["data"]["status"], "open")
        # at the floor: resolved
        self.assertEqual(self.observe(prop, 45000, date), ("breach_resolved", aid))
        a, _ = assert_success(self, self.get("/v2/parity-alerts/" + aid))
        self.assertEqual((a["status"], a["resolved_by_rate"]), ("resolved", money(45000)))
        self.assertRegex(a["resolved_at"], harness.DATETIME_RE)
        # a new breach opens a new alert and a new event
        parity, again = self.observe(prop, 43000, date)
        self.assertEqual(parity, "breach_opened")
        self.assertNotEqual(again, aid)
        self.events("/v2", "parity.breach.detected", lambda ev: ev["data"]["alert_id"] == again)
        self.assertEqual(len(self.breaches(aid)), 1)

    def test_one_batch_carries_each_key_from_item_to_item(self):
        # The feed reads what the database holds of a batch's keys once (a
        # statement per 32 keys), then each observation must see the ones
        # before it in the batch, as if they had come one batch each.
        prop, date = E.props[2], day(70)
        self.publish(prop, 45000, day(69), day(71))
        t = [now_rfc3339(-60 + i) for i in range(6)]
        items = [ota_rate(prop, 40000, date, observed_at=t[1]),   # below: opens
                 ota_rate(prop, 41000, date, observed_at=t[2]),   # below: continues
                 ota_rate(prop, 50000, date, observed_at=t[0]),   # older: stale
                 ota_rate(prop, 45000, date, observed_at=t[3]),   # at the floor: resolves
                 ota_rate(prop, 44000, date, observed_at=t[4])]   # below again: a new alert
        # 80 keys more (another room each), none with a floor
        items += [ota_rate(prop, 30000, date, room="R%d" % k) for k in range(80)]
        res = self.feed_ok("ota-rates", items)["results"]
        self.assertEqual([r["parity"] for r in res[:5]],
                         ["breach_opened", "breach_continues", "stale", "breach_resolved",
                          "breach_opened"])
        first, again = res[0]["parity_alert_id"], res[4]["parity_alert_id"]
        self.assertEqual([r["parity_alert_id"] for r in res[1:4]], [first, None, first])
        self.assertNotEqual(again, first)
        self.assertEqual({r["parity"] for r in res[5:]}, {"no_floor"})
        a, _ = assert_success(self, self.get("/v2/parity-alerts/" + first))
        self.assertEqual((a["status"], a["resolved_by_rate"]), ("resolved", money(45000)))
        a, _ = assert_success(self, self.get("/v2/parity-alerts/" + again))
        self.assertEqual((a["status"], a["observed_rate"]), ("open", money(44000)))
        self.events("/v2", "parity.breach.detected", lambda ev: ev["data"]["alert_id"] == again)
        self.assertEqual(len(self.breaches(first)), 1)
        # the next batch starts from what this one left: the open alert
        self.assertEqual(self.observe(prop, 42000, date), ("breach_continues", again))

    def test_reverted_decision_stops_counting(self):
        prop, date = E.props[1], day(50)
        first = self.publish(prop, 40000, day(49), day(51))
        second = self.publish(prop, 48000, day(50), day(50))
        parity, aid = self.observe(prop, 45000, date)
        self.assertEqual(parity, "breach_opened")
        a = self.get("/v2/parity-alerts/" + aid).body["data"]
        self.assertEqual(a["floor_source"]["id"], second)
        r = E.srv.request("POST", "/v2/rate-decisions/%s/revert" % second, token=E.a.token,
                          portfolio=E.a.id,
                          body={"reason": "wrong date", "approver_saml_subject": APPROVER})
        assert_success(self, r)
        # the floor falls back to the first decision (40000): 45000 is above it
        self.assertEqual(self.observe(prop, 45000, date), ("breach_resolved", aid))
        self.assertEqual(self.observe(prop, 39000, date)[0], "breach_opened")
        r = E.srv.request("POST", "/v2/rate-decisions/%s/revert" % first, token=E.a.token,
                          portfolio=E.a.id,
                          body={"reason": "season over", "approver_saml_subject": APPROVER})
        assert_success(self, r)
        # no floor at all: the open alert resolves, and nothing opens again
        self.assertEqual(self.observe(prop, 30000, date)[0], "breach_resolved")
        self.assertEqual(self.observe(prop, 20000, date), ("no_floor", None))

    def test_approved_suggestion_sets_the_floor(self):
        prop, date = E.props[2], day(55)
        self.publish(prop, 40000, date, date, room="SUI")
        sid = self.suggest(prop=prop, date=date, room="SUI", current=40000, proposed=52000)
        assert_success(self, self.act(sid, "approve"))
        parity, aid = self.observe(prop, 50000, date, room="SUI")
        self.assertEqual(parity, "breach_opened")
        a = self.get("/v2/parity-alerts/" + aid).body["data"]
        self.assertEqual(a["floor_source"], {"kind": "rate_suggestion", "id": sid})
        self.assertEqual(a["approved_rate"], money(52000))

    def test_lists_are_scoped_and_filtered(self):
        date = day(57)
        self.publish(E.props[0], 45000, date, date, room="QUA")
        self.publish(E.props[1], 45000, date, date, room="QUA")
        _, a0 = self.observe(E.props[0], 40000, date, room="QUA", ota="hrs")
        _, a1 = self.observe(E.props[1], 40000, date, room="QUA", ota="hrs")
        data, _ = assert_success(self, self.get("/v2/parity-alerts?ota=hrs&status=open"))
        self.assertEqual([a["id"] for a in data], [a0, a1])
        data, meta = assert_success(self, self.get("/v2/parity-alerts?ota=hrs&limit=1"))
        self.assertEqual([a["id"] for a in data], [a0])
        data, _ = assert_success(self, self.get("/v2/parity-alerts?ota=hrs&limit=1&cursor="
                                                + meta["next_cursor"]))
        self.assertEqual([a["id"] for a in data], [a1])
        data, _ = assert_success(self, self.get("/v2/parity-alerts?ota=hrs", token=E.one_tok))
        self.assertEqual([a["id"] for a in data], [a0])
        data, _ = assert_success(self, self.get("/v2/parity-alerts?ota=hrs&property_id="
                                                + E.props[1]))
        self.assertEqual([a["id"] for a in data], [a1])
        assert_error(self, self.get("/v2/parity-alerts/" + a1, token=E.one_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/parity-alerts", token=E.feed_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/parity-alerts", portfolio=E.b.id), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        data, _ = assert_success(self, self.get("/v2/parity-alerts", token=E.b.token,
                                                portfolio=E.b.id))
        self.assertEqual(data, [])
        assert_error(self, self.get("/v2/parity-alerts/" + a0, token=E.b.token,
                                    portfolio=E.b.id), 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/parity-alerts?status=closed"), 400,
                     "SVC-REQUEST-MALFORMED")
        assert_error(self, self.get("/v2/parity-alerts/pa_01AAAAAAAAAAAAAAAAAAAAAAAA"), 404,
                     "SVC-NOT-FOUND")


if __name__ == "__main__":
    harness.run_main()
