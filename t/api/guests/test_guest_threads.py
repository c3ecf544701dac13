"""Guest threads (issue 16) fed by other channels (POST
/v2/feeds/guest-messages): one portfolio-level guest per phone number
(E.164) and e-mail address, merged when a message names both; one thread
per guest across properties; escalation when an inbound message waits
unanswered past the SLA tier's guest_reply_minutes (at --time-scale) or
holds a keyword (case- and accent-insensitive), once per episode, an
answer ending the episode; a restart in the middle of a wait fires its
escalation once, after the restart. v2 guest.thread.escalated reaches a
real HTTPS receiver. Black-box: HTTP, revopsctl and the receiver.
"""

import datetime
import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import receiver  # noqa: E402
from harness import assert_error, assert_success, wait_until  # noqa: E402

GT_ID = r"^gt_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
MSG_ID = r"^msg_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
SCALE = 600
E = None
_seq = [0]


class Env:
    pass


def now_rfc3339(offset_s=0.0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_s)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def msg(prop, text="Is breakfast included?", direction="inbound", channel="email", phone=None,
        email=None, name=None, external_id=None, at=None):
    _seq[0] += 1
    guest = {}
    if phone:
        guest["phone"] = phone
    if email:
        guest["email"] = email
    if name:
        guest["name"] = name
    return {"property_id": prop, "channel": channel, "direction": direction, "guest": guest,
            "text": text, "at": at or now_rfc3339(-1), "external_id": external_id or
            "ext-%d" % _seq[0]}


def setUpModule():
    global E
    e = Env()
    e.ca_dir = tempfile.mkdtemp(prefix="revops-threads-ca-")
    e.rx = e.srv = None
    try:
        e.ca = receiver.TestCA(e.ca_dir)
        e.rx = receiver.Receiver(e.ca)
        e.srv = harness.Server(["--time-scale", str(SCALE), "--trust-ca", e.ca.ca_pem,
                                "--allow-private-targets"])
        srv = e.srv
        e.a = srv.seed_portfolio("enterprise", 3)  # platinum
        e.props = [p["id"] for p in e.a.properties]
        # an inbound message waits 5 minutes (0.5 s) before it escalates
        srv.ctl("sla-tier", "set", "--portfolio", e.a.id, "--tier", "platinum",
                "--guest-reply-minutes", "5")
        srv.ctl("guest-keywords", "set", "--portfolio", e.a.id, "--language", "pl",
                "--words", "policja, skarga, zażalenie")
        srv.ctl("guest-keywords", "set", "--portfolio", e.a.id, "--language", "*",
                "--words", "lawyer")
        e.feeder, e.feed_tok = srv.client_token(e.a.id, "feeds:write", name="crm")
        e.reader, e.read_tok = srv.client_token(e.a.id, "guest-threads:read", name="reader")
        one = srv.create_client(e.a.id, name="one", properties=e.a.codes[2])
        e.one_tok = srv.access_token(one["client_id"], one["client_secret"])
        # a group portfolio (gold) whose guests wait 40 minutes (4 s)
        e.g = srv.seed_portfolio("group", 1)
        srv.ctl("sla-tier", "set", "--portfolio", e.g.id, "--tier", "gold",
                "--guest-reply-minutes", "40")
        for s in (e.a, e.g):
            r = srv.request("POST", "/v2/webhooks", token=s.token, portfolio=s.id,
                            body={"url": e.rx.url("/v2/" + s.id),
                                  "events": ["guest.thread.escalated"]})
            if r.status != 201:
                raise AssertionError("subscription: %r" % (r,))
    except BaseException:
        _teardown(e, check=False)
        raise
    E = e


def _teardown(e, check=True):
    try:
        if e.srv is not None:
            e.srv.close() if check else e.srv.cleanup()
    finally:
        if e.rx is not None:
            e.rx.close()
        shutil.rmtree(e.ca_dir, ignore_errors=True)


def tearDownModule():
    if E is not None:
        _teardown(E)


class Base(unittest.TestCase):
    maxDiff = None

    def feed(self, items, seed=None, token=None):
        seed = seed or E.a
        r = E.srv.request("POST", "/v2/feeds/guest-messages", body={"items": items},
                          token=token or (E.feed_tok if seed is E.a else seed.token),
                          portfolio=seed.id)
        data, _ = assert_success(self, r, 200)
        return data["results"]

    def one(self, item, seed=None):
        res = self.feed([item], seed)[0]
        self.assertIn(res["status"], ("created", "duplicate"), res)
        return res

    def get(self, path, token=None, seed=None):
        seed = seed or E.a
        return E.srv.request("GET", path, token=token or (E.read_tok if seed is E.a else
                                                           seed.token), portfolio=seed.id)

    def thread(self, tid, **kw):
        data, _ = assert_success(self, self.get("/v2/guest-threads/" + tid, **kw))
        return data

    def escalations(self, tid, seed=None):
        seed = seed or E.a
        return [ev for ev in (d.json() for d in E.rx.received("/v2/" + seed.id))
                if ev["data"]["thread_id"] == tid]

    def wait_escalations(self, tid, n, seed=None, timeout=15.0):
        wait_until(lambda: len(self.escalations(tid, seed)) >= n, timeout,
                   what="%d escalations of %s" % (n, tid))
        return self.escalations(tid, seed)


class ThreadingTest(Base):
    def test_one_guest_one_thread_across_properties(self):
        a = self.one(msg(E.props[0], email="Anna.Nowak@Example.com", name="Anna"))
        self.assertRegex(a["thread_id"], GT_ID)
        self.assertRegex(a["id"], MSG_ID)
        # her phone and e-mail together at another hotel: the same guest
        b = self.one(msg(E.props[1], phone="+48 600-100-200", email="anna.nowak@example.com"))
        # her phone alone, written another way, at a third
        c = self.one(msg(E.props[2], phone="0048600100200"))
        self.assertEqual({a["thread_id"], b["thread_id"], c["thread_id"]}, {a["thread_id"]})
        t = self.thread(a["thread_id"])
        self.assertEqual(sorted(t["properties"]), sorted(E.props))
        self.assertEqual(t["guest"]["phones"], ["+48600100200"])
        self.assertEqual(t["guest"]["emails"], ["anna.nowak@example.com"])
        self.assertEqual(t["guest"]["name"], "Anna")
        self.assertEqual([m["id"] for m in t["messages"]], [a["id"], b["id"], c["id"]])
        self.assertEqual(t["last_message"]["id"], c["id"])
        self.assertTrue(t["waiting_since"])
        # listed by her address
        for g in ("+48600100200", "ANNA.NOWAK@example.com"):
            listed, _ = assert_success(self, self.get("/v2/guest-threads?guest=" +
                                                      g.replace("+", "%2B")))
            self.assertEqual([x["id"] for x in listed], [a["thread_id"]], g)
        self.answer(a["thread_id"])

    def answer(self, tid, prop=None):
        t = self.thread(tid)
        g = t["guest"]
        self.one(msg(prop or t["properties"][0], "Yes, it is.", direction="outbound",
                     phone=(g["phones"] or [None])[0], email=(g["emails"] or [None])[0]))

    def test_two_guests_become_one_when_a_message_names_both(self):
        p = self.one(msg(E.props[0], phone="+351912000111"))
        m = self.one(msg(E.props[1], email="joao@example.pt"))
        self.assertNotEqual(p["thread_id"], m["thread_id"])
        both = self.one(msg(E.props[2], phone="+351 912 000 111", email="joao@example.pt"))
        # the older guest (and thread) stays; every message is in it
        self.assertEqual(both["thread_id"], p["thread_id"])
        t = self.thread(p["thread_id"])
        self.assertEqual(sorted(m2["id"] for m2 in t["messages"]),
                         sorted([p["id"], m["id"], both["id"]]))
        self.assertEqual(sorted(t["properties"]), sorted(E.props))
        r = self.get("/v2/guest-threads/" + m["thread_id"])
        assert_error(self, r, 404, "SVC-NOT-FOUND")
        self.answer(p["thread_id"])

    def test_a_message_seen_twice_is_one(self):
        item = msg(E.props[0], email="dup@example.com", external_id="crm-42")
        first, again = self.feed([item, item])
        self.assertEqual((first["status"], again["status"]), ("created", "duplicate"))
        self.assertEqual(first["id"], again["id"])
        self.assertEqual(self.one(item)["status"], "duplicate")
        self.assertEqual(len(self.thread(first["thread_id"])["messages"]), 1)
        # a copy naming a new address changes nothing either
        again = self.one(dict(item, guest={"email": "dup@example.com", "phone": "+48111222333"}))
        self.assertEqual((again["status"], again["thread_id"]), ("duplicate", first["thread_id"]))
        self.assertEqual(self.thread(first["thread_id"])["guest"]["phones"], [])
        self.assertEqual(self.threads_of("+48111222333"), [])
        self.answer(first["thread_id"])

    def test_bad_items(self):
        res = self.feed([msg(E.props[0], phone="12"),
                         msg(E.props[0]),
                         msg(E.props[0], email="no-at-sign"),
                         msg(E.props[0], email="x@example.com", channel="whatsapp"),
                         dict(msg(E.props[0], email="x@example.com"), direction="sideways"),
                         dict(msg(E.props[0], email="x@example.com"), at="yesterday"),
                         msg(E.g.properties[0]["id"], email="x@example.com")])
        fields = [[d["field"] for d in r["error"]["details"]] for r in res]
        self.assertEqual([r["status"] for r in res], ["rejected"] * 7)
        self.assertEqual(fields[:6], [["items[0].guest.phone"], ["items[1].guest"],
                                      ["items[2].guest.email"], ["items[3].channel"],
                                      ["items[4].direction"], ["items[5].at"]])
        self.assertEqual(res[6]["error"]["code"], "SVC-AUTH-INSUFFICIENT-ROLE")

    def threads_of(self, guest):
        data, _ = assert_success(self, self.get("/v2/guest-threads?guest=" +
                                                guest.replace("+", "%2B")))
        return data

    def test_scope_and_portfolio(self):
        # a guest of the first and the third hotel, who wrote last to the
        # first: the third's token sees the thread, not that last message
        b = self.one(msg(E.props[2], email="both@example.com", text="For the third"))
        self.one(msg(E.props[0], email="both@example.com", text="For the first"))
        t = self.thread(b["thread_id"], token=E.one_tok)
        self.assertIsNone(t["last_message"])
        self.assertEqual([m["text"] for m in t["messages"]], ["For the third"])
        self.assertEqual(sorted(t["properties"]), sorted([E.props[0], E.props[2]]))
        self.assertEqual(self.thread(b["thread_id"])["last_message"]["text"], "For the first")
        self.answer(b["thread_id"])
        a = self.one(msg(E.props[0], email="scoped@example.com"))
        # a token of the third hotel does not see a thread of the first
        r = self.get("/v2/guest-threads/" + a["thread_id"], token=E.one_tok)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        listed, _ = assert_success(self, self.get("/v2/guest-threads", token=E.one_tok))
        self.assertNotIn(a["thread_id"], [x["id"] for x in listed])
        r = self.get("/v2/guest-threads/" + a["thread_id"], seed=E.g)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = E.srv.request("GET", "/v2/guest-threads", token=E.feed_tok, portfolio=E.a.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        self.answer(a["thread_id"])


class EscalationTest(Base):
    def test_unanswered_escalates_once_per_episode(self):
        a = self.one(msg(E.props[1], email="waiting@example.com"))
        tid = a["thread_id"]
        ev = self.wait_escalations(tid, 1)[0]
        self.assertEqual(ev["type"], "guest.thread.escalated")
        self.assertEqual(ev["portfolio_id"], E.a.id)
        self.assertEqual(ev["properties"], [E.props[1]])
        d = ev["data"]
        self.assertEqual((d["reason"], d["keyword"], d["guest_id"]),
                         ("unanswered", None, self.thread(tid)["guest"]["id"]))
        # another inbound message in the same wait: no second escalation
        self.one(msg(E.props[1], email="waiting@example.com", text="Hello??"))
        time.sleep(1.0)
        self.assertEqual(len(self.escalations(tid)), 1)
        t = self.thread(tid)
        self.assertEqual((t["status"], t["escalated"]), ("escalated", True))
        self.assertGreater(t["waiting_seconds"], 0)
        listed, _ = assert_success(self, self.get("/v2/guest-threads?escalated=true"))
        self.assertIn(tid, [x["id"] for x in listed])
        # an answer ends the episode ...
        self.one(msg(E.props[1], "Sorry, on it!", direction="outbound",
                     email="waiting@example.com"))
        t = self.thread(tid)
        self.assertEqual((t["status"], t["escalated"], t["waiting_since"]), ("open", False, None))
        # ... and the next unanswered message is a new one
        self.one(msg(E.props[1], email="waiting@example.com", text="One more thing"))
        self.wait_escalations(tid, 2)
        self.one(msg(E.props[1], "Done.", direction="outbound", email="waiting@example.com"))

    def test_answered_in_time_never_escalates(self):
        # gold: 40 minutes, 4 s here, so the answer is in time even on a
        # busy machine; written now (a message written earlier is overdue
        # sooner)
        g = E.g.properties[0]["id"]
        a = self.one(msg(g, email="quick@example.com", at=now_rfc3339()), seed=E.g)
        self.one(msg(g, "Right away", direction="outbound", email="quick@example.com",
                     at=now_rfc3339()), seed=E.g)
        other = self.one(msg(g, email="slow@example.com", at=now_rfc3339()), seed=E.g)
        self.wait_escalations(other["thread_id"], 1, seed=E.g)
        time.sleep(0.5)
        self.assertEqual(self.escalations(a["thread_id"], seed=E.g), [])

    def test_merge_keeps_the_younger_guests_wait(self):
        # gold: 40 minutes, 4 s here. The older guest was answered; the
        # younger one waits; a message naming both merges them into the
        # older thread, which waits since the younger's message and
        # escalates on time (the merging message starts no wait of its own:
        # one is open)
        g = E.g.properties[0]["id"]
        old = self.one(msg(g, phone="+48700800900", at=now_rfc3339()), seed=E.g)
        self.one(msg(g, "Noted", direction="outbound", phone="+48700800900",
                     at=now_rfc3339()), seed=E.g)
        at = now_rfc3339()
        young = self.one(msg(g, email="young@example.com", at=at), seed=E.g)
        self.assertNotEqual(old["thread_id"], young["thread_id"])
        both = self.one(msg(g, phone="+48700800900", email="young@example.com",
                            at=now_rfc3339()), seed=E.g)
        self.assertEqual(both["thread_id"], old["thread_id"])
        t = self.thread(old["thread_id"], seed=E.g)
        self.assertEqual(t["waiting_since"], at)
        ev = self.wait_escalations(old["thread_id"], 1, seed=E.g)
        self.assertEqual(ev[0]["data"]["reason"], "unanswered")
        self.one(msg(g, "Sorry!", direction="outbound", email="young@example.com",
                     at=now_rfc3339()), seed=E.g)

    def test_keyword_escalates_at_once(self):
        # upper case and no accents still match "zażalenie"
        r = self.one(msg(E.props[0], phone="+48500600700", text="To jest ZAZALENIE, prosze!"))
        self.assertTrue(r["escalated"])
        ev = self.wait_escalations(r["thread_id"], 1, timeout=3.0)[0]
        self.assertEqual((ev["data"]["reason"], ev["data"]["keyword"]), ("keyword", "zazalenie"))
        # the wait's timer finds it escalated already: once per episode
        time.sleep(1.0)
        self.assertEqual(len(self.escalations(r["thread_id"])), 1)
        self.one(msg(E.props[0], "Przepraszamy", direction="outbound", phone="+48500600700"))
        # a word inside another word is no keyword; the "*" list counts too
        r = self.one(msg(E.props[0], phone="+48500600701", text="Pan policjant był miły"))
        self.assertFalse(r["escalated"])
        r2 = self.one(msg(E.props[0], phone="+48500600702", text="My LAWYER will call"))
        self.assertTrue(r2["escalated"])
        for p in ("+48500600701", "+48500600702"):
            self.one(msg(E.props[0], "Ok", direction="outbound", phone=p))

    def test_a_restart_fires_a_pending_wait_once_after_it(self):
        g = E.g.properties[0]["id"]
        r = self.one(msg(g, email="restart@example.com", at=now_rfc3339()), seed=E.g)
        E.srv.stop()
        try:
            time.sleep(4.5)
            self.assertEqual(self.escalations(r["thread_id"], E.g), [])
        finally:
            E.srv.start()
        self.wait_escalations(r["thread_id"], 1, E.g)
        time.sleep(1.0)
        self.assertEqual(len(self.escalations(r["thread_id"], E.g)), 1)


if __name__ == "__main__":
    unittest.main()
