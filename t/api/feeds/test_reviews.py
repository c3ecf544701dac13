"""Reputation signals (issue 15): the reviews feed, replies drafted from the
portfolio's templates by rating band and language, edited and published
to the source platform (pms-sim speaking Google Business Profile's reply
call) with a retried transient failure, rolling reputation scores with
per-brand floors, and reputation alerts opened once per crossing, resolved
on recovery and opened again on a new crossing. v1 review.* and v2
reputation.score.dropped reach a real HTTPS receiver. Black-box: HTTP,
revopsctl, pms-sim and the receiver only.
"""

import datetime
import os
import shutil
import socket
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import pmssim  # noqa: E402
import receiver  # noqa: E402
from harness import assert_error, assert_success, wait_until  # noqa: E402

RV_ID = r"^rv_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
RA_ID = r"^ra_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
REVIEW_KEYS = {"id", "property_id", "source", "external_id", "rating", "max_rating", "score",
               "language", "text", "author", "published_at", "reply", "created_at",
               "updated_at"}
REPLY_KEYS = {"status", "text", "template", "edited", "published_at", "attempts",
              "next_attempt_at", "last_error"}
ALERT_KEYS = {"id", "scope", "brand", "property_id", "status", "threshold", "score",
              "previous_score", "current_score", "opened_at", "resolved_at", "updated_at"}

E = None
_seq = [0]


def now_rfc3339(offset_s=0.0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_s)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def review(prop, rating=5, max_rating=5, language="en", author="Anna Nowak", external_id=None,
           source="google", text="Lovely stay", published_at=None):
    _seq[0] += 1
    return {"property_id": prop, "source": source,
            "external_id": external_id or "ext-%d" % _seq[0], "rating": rating,
            "max_rating": max_rating, "language": language, "text": text, "author": author,
            "published_at": published_at or now_rfc3339(-60)}


class Env:
    pass


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def setUpModule():
    global E
    e = Env()
    e.ca_dir = tempfile.mkdtemp(prefix="revops-reviews-ca-")
    e.rx = e.sim = e.srv = None
    try:
        e.ca = receiver.TestCA(e.ca_dir)
        e.rx = receiver.Receiver(e.ca)
        # The platform fails the first reply call: a transient failure.
        e.sim = pmssim.PmsSim("--reviews-fail-first", "1")
        e.srv = harness.Server(["--reviews-url", e.sim.url, "--time-scale", "600",
                                "--trust-ca", e.ca.ca_pem, "--allow-private-targets"])
        srv = e.srv
        # Portfolio A: Aurora hotels (templates, reviews, replies) ...
        e.a = srv.seed_portfolio("enterprise", 2, brand="Aurora")
        e.props = [p["id"] for p in e.a.properties]
        e.names = [p["name"] for p in e.a.properties]
        # ... and Borealis hotels (reputation), floor 8.0.
        bor = [srv.add_property(e.a.id, brand="Borealis") for _ in range(2)]
        e.bor = [b["id"] for b in bor]
        for band, lang, text in (
                ("high", "en", "Thank you {guest_name} for staying at {property_name}!"),
                ("mid", "en", "Thank you, {guest_name}. We will do better."),
                ("low", "pl", "Przykro nam, {guest_name} ({property_name})."),
                ("high", "pl-pl", "Dziękujemy, {guest_name}!")):
            srv.ctl("review-template", "set", "--portfolio", e.a.id, "--band", band,
                    "--language", lang, "--text", text)
        e.floor = srv.ctl("reputation-ceiling", "set", "--portfolio", e.a.id, "--brand",
                          "Borealis", "--min-score", "8")
        e.feeder, e.feed_tok = srv.client_token(e.a.id, "feeds:write", name="feeder")
        e.reader, e.read_tok = srv.client_token(e.a.id, "reviews:read alerts:read",
                                                name="reader")
        e.writer, e.write_tok = srv.client_token(e.a.id, "reviews:read reviews:write",
                                                 name="writer")
        one = srv.create_client(e.a.id, name="one", properties=e.a.codes[0])
        e.one_tok = srv.access_token(one["client_id"], one["client_secret"])
        c = srv.create_client(e.a.id, name="bor-one", properties=bor[0]["pms_property_code"])
        e.bor_one_tok = srv.access_token(c["client_id"], c["client_secret"])
        e.b = srv.seed_portfolio("group", 1, brand="Aurora")
        for surface, events in (("v1", ["review.drafted", "review.published"]),
                                ("v2", ["reputation.score.dropped"])):
            r = srv.request("POST", "/%s/webhooks" % surface, token=e.a.token,
                            portfolio=e.a.id,
                            body={"url": e.rx.url("/" + surface), "events": events})
            if r.status != 201:
                raise AssertionError("subscription: %r" % (r,))
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
        shutil.rmtree(e.ca_dir, ignore_errors=True)


def tearDownModule():
    if E is not None:
        _teardown(E)


class Base(unittest.TestCase):
    maxDiff = None

    def feed(self, items, token=None, portfolio=None):
        return E.srv.request("POST", "/v2/feeds/reviews", body={"items": items},
                             token=token or E.feed_tok, portfolio=portfolio or E.a.id)

    def feed_ok(self, items):
        data, _ = assert_success(self, self.feed(items), 200)
        self.assertEqual(len(data["results"]), len(items), data)
        return data

    def get(self, path, token=None, portfolio=None, **kw):
        return E.srv.request("GET", path, token=token or E.read_tok,
                             portfolio=portfolio or E.a.id, **kw)

    def review(self, rid, **kw):
        data, _ = assert_success(self, self.get("/v2/reviews/" + rid, **kw))
        return data

    def received(self, path, type_, pred=lambda ev: True):
        return [d.json() for d in E.rx.received(path)
                if d.json()["type"] == type_ and pred(d.json())]

    def wait_event(self, path, type_, pred, count=1):
        wait_until(lambda: len(self.received(path, type_, pred)) >= count, 10,
                   what="%d %s to %s" % (count, type_, path))
        return self.received(path, type_, pred)


class ReviewFeedTest(Base):
    def test_drafts_by_band_and_language(self):
        items = [review(E.props[0], 5, language="en-GB", author="Anna"),
                 review(E.props[1], 2, language="pl", author="Jan"),
                 review(E.props[0], 3, language="de", author="Uwe"),
                 review(E.props[0], 7, max_rating=10, language="EN", author="Ola"),
                 review(E.props[1], 4.5, language="pl-PL", author=""),
                 review(E.props[1], 1, language="en")]
        data = self.feed_ok(items)
        self.assertEqual((data["created"], data["duplicate"], data["rejected"]), (6, 0, 0))
        res = data["results"]
        self.assertEqual([r["reply_drafted"] for r in res], [True, True, False, True, True,
                                                              False])
        for r in res:
            self.assertRegex(r["id"], RV_ID)
        want = ["Thank you Anna for staying at %s!" % E.names[0],
                "Przykro nam, Jan (%s)." % E.names[1], None,
                "Thank you, Ola. We will do better.", "Dziękujemy, guest!", None]
        bands = [("high", "en"), ("low", "pl"), None, ("mid", "en"), ("high", "pl-pl"), None]
        for r, text, band, it in zip(res, want, bands, items):
            rv = self.review(r["id"])
            self.assertEqual(set(rv), REVIEW_KEYS)
            self.assertEqual(set(rv["reply"]), REPLY_KEYS)
            self.assertEqual(rv["reply"]["text"], text)
            self.assertEqual(rv["reply"]["status"], "drafted" if text else "none")
            self.assertEqual(rv["reply"]["template"],
                             {"band": band[0], "language": band[1]} if band else None)
            self.assertEqual((rv["external_id"], rv["rating"], rv["max_rating"]),
                             (it["external_id"], it["rating"], it["max_rating"]))
            self.assertAlmostEqual(rv["score"], it["rating"] * 10.0 / it["max_rating"], 2)
        # review.drafted (v1) for each draft, with the drafted text
        ev = self.wait_event("/v1", "review.drafted",
                             lambda ev: ev["data"]["review_id"] == res[1]["id"])[0]
        self.assertEqual(ev["property_id"], E.props[1])
        self.assertEqual(ev["data"], {"review_id": res[1]["id"], "source": "google",
                                      "source_review_id": items[1]["external_id"],
                                      "rating": 2, "rating_scale": 5, "language": "pl",
                                      "reply_text": want[1]})
        ev = self.wait_event("/v1", "review.drafted",
                             lambda ev: ev["data"]["review_id"] == res[4]["id"])[0]
        self.assertEqual(ev["data"]["rating"], 4.5)
        self.assertEqual(self.received("/v1", "review.drafted",
                                       lambda ev: ev["data"]["review_id"] == res[2]["id"]), [])

    def test_seen_twice_is_one_review(self):
        it = review(E.props[0], 5, external_id="twice-1")
        first = self.feed_ok([it])["results"][0]
        again = self.feed_ok([dict(it, text="edited later"), dict(it)])["results"]
        self.assertEqual([r["status"] for r in again], ["duplicate", "duplicate"])
        self.assertEqual({r["id"] for r in again}, {first["id"]})
        self.assertEqual(self.review(first["id"])["text"], "Lovely stay")
        # the same id on another platform is another review
        other = self.feed_ok([dict(it, source="tripadvisor")])["results"][0]
        self.assertEqual(other["status"], "created")
        self.assertNotEqual(other["id"], first["id"])
        # one draft event only
        self.wait_event("/v1", "review.drafted",
                        lambda ev: ev["data"]["review_id"] == first["id"])
        self.assertEqual(len(self.received("/v1", "review.drafted",
                                           lambda ev: ev["data"]["review_id"] == first["id"])),
                         1)

    def test_bad_items(self):
        items = [review(E.props[0], 6),                              # above max
                 review(E.props[0], 3, max_rating=0),                # no scale
                 review(E.props[0], 3, language="e n"),
                 review(E.props[0], 3, published_at=now_rfc3339(3600)),
                 review(E.props[0], 3, published_at="2026-11-22"),
                 review("prop_01AAAAAAAAAAAAAAAAAAAAAAAA", 3),
                 review(E.props[0], 3, source="Google Maps"),
                 dict(review(E.props[0], 3), rating="five"),
                 review(E.props[0], 3, text="x" * 20001),
                 review(E.props[0], 4)]
        data = self.feed_ok(items)
        st = [r["status"] for r in data["results"]]
        self.assertEqual(st, ["rejected"] * 9 + ["created"], data)
        fields = [[d["field"] for d in r["error"]["details"]] for r in data["results"][:9]]
        self.assertEqual(fields, [["items[0].rating"], ["items[1].max_rating"],
                                  ["items[2].language"], ["items[3].published_at"],
                                  ["items[4].published_at"], ["items[5].property_id"],
                                  ["items[6].source"], ["items[7].rating"], ["items[8].text"]])
        self.assertEqual(data["results"][5]["error"]["code"], "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_scope(self):
        assert_error(self, self.feed([review(E.props[0])], token=E.read_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.feed([review(E.props[0])], portfolio=E.b.id), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        r0 = self.feed_ok([review(E.props[0], language="xx")])["results"][0]["id"]
        r1 = self.feed_ok([review(E.props[1], language="xx")])["results"][0]["id"]
        data, _ = assert_success(self, self.get("/v2/reviews?language=xx", token=E.one_tok))
        self.assertEqual([r["id"] for r in data], [r0])
        data, _ = assert_success(self, self.get("/v2/reviews?language=xx&property_id="
                                                + E.props[1]))
        self.assertEqual([r["id"] for r in data], [r1])
        assert_error(self, self.get("/v2/reviews/" + r1, token=E.one_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/reviews", token=E.feed_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/reviews", portfolio=E.b.id), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/reviews/" + r0, token=E.b.token, portfolio=E.b.id),
                     403, "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/reviews/rv_01AAAAAAAAAAAAAAAAAAAAAAAA"), 404,
                     "SVC-NOT-FOUND")
        assert_error(self, self.get("/v2/reviews?reply_status=sent"), 400,
                     "SVC-REQUEST-MALFORMED")
        r = E.srv.request("PUT", "/v2/reviews/%s/reply" % r0, body={"text": "Hi"},
                          token=E.read_tok, portfolio=E.a.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = E.srv.request("POST", "/v2/reviews/%s/reply/publish" % r1, token=E.one_tok,
                          portfolio=E.a.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        # pages
        seen, cursor = [], None
        while True:
            q = "/v2/reviews?language=xx&limit=1" + ("&cursor=" + cursor if cursor else "")
            data, meta = assert_success(self, self.get(q))
            seen += [x["id"] for x in data]
            cursor = meta["next_cursor"]
            if not cursor:
                break
        self.assertEqual(seen, [r0, r1])


class ReplyTest(Base):
    def put(self, rid, body, token=None):
        return E.srv.request("PUT", "/v2/reviews/%s/reply" % rid, body=body,
                             token=token or E.write_tok, portfolio=E.a.id)

    def publish(self, rid, token=None):
        return E.srv.request("POST", "/v2/reviews/%s/reply/publish" % rid,
                             token=token or E.write_tok, portfolio=E.a.id)

    def test_edit_then_publish_through_a_transient_failure(self):
        it = review(E.props[0], 5, author="Ewa", external_id="gbp-review-42")
        rid = self.feed_ok([it])["results"][0]["id"]
        rv, _ = assert_success(self, self.put(rid, {"text": "Thank you, Ewa - see you soon!"}))
        self.assertEqual((rv["reply"]["status"], rv["reply"]["edited"]), ("drafted", True))
        self.assertEqual(rv["reply"]["text"], "Thank you, Ewa - see you soon!")
        assert_error(self, self.put(rid, {"text": "  "}), 400, "SVC-VALIDATION-FAILED")
        assert_error(self, self.put(rid, {"text": "x" * 4097}), 400, "SVC-VALIDATION-FAILED")
        assert_error(self, self.put(rid, {"comment": "x"}), 400, "SVC-VALIDATION-FAILED")
        rv, _ = assert_success(self, self.publish(rid), 202)
        self.assertEqual(rv["reply"]["status"], "publishing")
        # the platform refuses the first call; the retry gets through
        wait_until(lambda: self.review(rid)["reply"]["status"] == "published", 15,
                   what="the reply to be published")
        rv = self.review(rid)
        self.assertEqual(rv["reply"]["attempts"], 2, rv)
        self.assertIsNone(rv["reply"]["last_error"])
        status, replies = E.sim.get("/reviews/replies")
        mine = [x for x in replies if x["review"] == "gbp-review-42"]
        self.assertEqual(len(mine), 1, replies)
        self.assertEqual((mine[0]["account"], mine[0]["location"], mine[0]["comment"]),
                         (E.a.id, E.a.codes[0], "Thank you, Ewa - see you soon!"))
        self.assertEqual(rv["reply"]["published_at"][:19], mine[0]["updateTime"][:19])
        ev = self.wait_event("/v1", "review.published",
                             lambda ev: ev["data"]["review_id"] == rid)[0]
        self.assertEqual(ev["property_id"], E.props[0])
        self.assertEqual(ev["data"], {"review_id": rid, "source": "google",
                                      "source_review_id": "gbp-review-42",
                                      "reply_text": "Thank you, Ewa - see you soon!",
                                      "published_at": rv["reply"]["published_at"],
                                      "reply_url": None})
        # published: no more changes
        assert_error(self, self.put(rid, {"text": "again"}), 409, "SVC-CONFLICT")
        assert_error(self, self.publish(rid), 409, "SVC-CONFLICT")

    def test_nothing_to_publish(self):
        rid = self.feed_ok([review(E.props[1], 3, language="de")])["results"][0]["id"]
        self.assertEqual(self.review(rid)["reply"]["status"], "none")
        assert_error(self, self.publish(rid), 409, "SVC-CONFLICT")
        # a reply written by hand can be published
        rv, _ = assert_success(self, self.put(rid, {"text": "Danke!"}))
        self.assertEqual((rv["reply"]["status"], rv["reply"]["template"]), ("drafted", None))
        assert_error(self, self.publish("rv_01AAAAAAAAAAAAAAAAAAAAAAAA"), 404, "SVC-NOT-FOUND")


class ReputationTest(Base):
    """Borealis' floor is 8.0. Scores need 5 reviews in the window."""

    def alerts(self, q="", token=None):
        data, _ = assert_success(self, self.get("/v2/reputation-alerts?brand=Borealis" + q,
                                                token=token))
        return data

    def drops(self):
        return self.received("/v2", "reputation.score.dropped",
                             lambda ev: ev["data"]["brand"] == "Borealis")

    def scores(self):
        data, _ = assert_success(self, self.get("/v2/reputation"))
        return data

    def test_crossing_once_recovery_and_a_new_crossing(self):
        p = E.bor[0]
        self.feed_ok([review(p, 5) for _ in range(4)])
        s = self.scores()
        bor = [b for b in s["brands"] if b["brand"] == "Borealis"][0]
        self.assertEqual((bor["score"], bor["reviews"], bor["min_score"]), (None, 4, 8.0))
        self.feed_ok([review(p, 5)])                      # 5 reviews: score 10.0
        bor = [b for b in self.scores()["brands"] if b["brand"] == "Borealis"][0]
        self.assertEqual(bor["score"], 10.0)
        self.assertEqual(self.alerts(), [])
        # (50 + 2 + 2) / 7 = 7.71: below 8.0, for the brand and the property
        self.feed_ok([review(p, 1), review(p, 1)])
        opened = self.alerts("&status=open")
        self.assertEqual(sorted(a["scope"] for a in opened), ["brand", "property"])
        for a in opened:
            self.assertEqual(set(a), ALERT_KEYS)
            self.assertRegex(a["id"], RA_ID)
            self.assertEqual((a["threshold"], a["score"], a["previous_score"]),
                             (8.0, 7.71, 10.0))
        brand_alert = [a for a in opened if a["scope"] == "brand"][0]
        prop_alert = [a for a in opened if a["scope"] == "property"][0]
        self.assertIsNone(brand_alert["property_id"])
        self.assertEqual(prop_alert["property_id"], p)
        wait_until(lambda: len(self.drops()) >= 2, 10, what="two reputation.score.dropped")
        by_scope = {ev["data"]["scope"]: ev for ev in self.drops()}
        ev = by_scope["brand"]
        self.assertEqual(ev["portfolio_id"], E.a.id)
        self.assertEqual(sorted(ev["properties"]), sorted(E.bor))
        self.assertEqual(ev["data"], {"alert_id": brand_alert["id"], "brand": "Borealis",
                                      "score": 7.71, "previous_score": 10.0, "threshold": 8.0,
                                      "scope": "brand", "property_id": None})
        self.assertEqual(by_scope["property"]["properties"], [p])
        # still below: no second event, the alert follows the score
        self.feed_ok([review(p, 1)])                      # 56 / 8 = 7.0
        self.assertEqual(len(self.alerts("&status=open")), 2)
        a = self.get("/v2/reputation-alerts/" + brand_alert["id"]).body["data"]
        self.assertEqual(a["current_score"], 7.0)
        # recovery: (56 + 40) / 12 = 8.0
        self.feed_ok([review(p, 5) for _ in range(4)])
        self.assertEqual(self.alerts("&status=open"), [])
        a = self.get("/v2/reputation-alerts/" + brand_alert["id"]).body["data"]
        self.assertEqual((a["status"], a["current_score"]), ("resolved", 8.0))
        self.assertEqual(len(self.drops()), 2)
        # a new crossing opens new alerts and sends new events
        self.feed_ok([review(p, 1)])                      # 98 / 13 = 7.54
        again = self.alerts("&status=open")
        self.assertEqual(len(again), 2)
        self.assertFalse({a["id"] for a in again} & {brand_alert["id"], prop_alert["id"]})
        wait_until(lambda: len(self.drops()) >= 4, 10, what="two more drops")
        # the lists: filters, a narrowed token sees its property's alerts only
        data, _ = assert_success(self, self.get("/v2/reputation-alerts?property_id=" + p))
        self.assertEqual({a["scope"] for a in data}, {"property"})
        data, _ = assert_success(self, self.get("/v2/reputation-alerts", token=E.bor_one_tok))
        self.assertTrue(data)
        self.assertEqual({a["property_id"] for a in data}, {p})
        assert_error(self, self.get("/v2/reputation-alerts/" + brand_alert["id"],
                                    token=E.bor_one_tok), 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/reputation-alerts", portfolio=E.b.id), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/reputation-alerts/" + brand_alert["id"],
                                    token=E.b.token, portfolio=E.b.id), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")
        assert_error(self, self.get("/v2/reputation-alerts?status=gone"), 400,
                     "SVC-REQUEST-MALFORMED")
        assert_error(self, self.get("/v2/reputation-alerts", token=E.feed_tok), 403,
                     "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_old_reviews_do_not_count(self):
        p = E.bor[1]
        old = now_rfc3339(-40 * 86400)
        self.feed_ok([review(p, 1, published_at=old) for _ in range(6)])
        prop = [x for x in self.scores()["properties"] if x["property_id"] == p][0]
        self.assertEqual((prop["score"], prop["reviews"]), (None, 0))


class OperatorTest(Base):
    def test_revopsctl_refuses_bad_values(self):
        for args in (["--band", "top", "--language", "en", "--text", "x"],
                     ["--band", "low", "--language", "e n", "--text", "x"],
                     ["--band", "low", "--language", "en"]):
            p = E.srv.ctl_raw("review-template", "set", "--portfolio", E.a.id, *args)
            self.assertEqual(p.returncode, 2, p)
        for v in ("11", "-1", "eight", ""):
            p = E.srv.ctl_raw("reputation-ceiling", "set", "--portfolio", E.a.id, "--brand",
                              "Borealis", "--min-score", v)
            self.assertEqual(p.returncode, 2, p)
        self.assertEqual(E.floor["min_score"], 8.0)


class PublishGivesUpTest(unittest.TestCase):
    """A platform that never answers: the schedule runs out (scaled down)
    and the reply is reported failed with the last error."""

    def test_failed_after_the_schedule(self):
        with harness.Server(["--reviews-url", "http://127.0.0.1:%d" % free_port(),
                             "--time-scale", "40000"]) as srv:
            a = srv.seed_portfolio("group", 1, brand="Aurora")
            srv.ctl("review-template", "set", "--portfolio", a.id, "--band", "high",
                    "--language", "en", "--text", "Thanks {guest_name}")
            r = srv.request("POST", "/v2/feeds/reviews", token=a.token, portfolio=a.id,
                            body={"items": [review(a.properties[0]["id"], 5)]})
            rid = r.body["data"]["results"][0]["id"]
            r = srv.request("POST", "/v2/reviews/%s/reply/publish" % rid, token=a.token,
                            portfolio=a.id)
            self.assertEqual(r.status, 202, r)

            def reply():
                return srv.request("GET", "/v2/reviews/" + rid, token=a.token,
                                   portfolio=a.id).body["data"]["reply"]
            wait_until(lambda: reply()["status"] == "failed", 40,
                       what="the reply to be reported failed")
            rep = reply()
            self.assertEqual(rep["attempts"], 9)
            self.assertIn("no answer from the review platform", rep["last_error"])
            self.assertIsNone(rep["next_attempt_at"])
            # publishing again starts a new schedule
            r = srv.request("POST", "/v2/reviews/%s/reply/publish" % rid, token=a.token,
                            portfolio=a.id)
            self.assertEqual(r.status, 202, r)
            self.assertEqual(r.body["data"]["reply"]["attempts"], 0)


if __name__ == "__main__":
    harness.run_main()
