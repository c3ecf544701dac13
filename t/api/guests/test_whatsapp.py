"""The WhatsApp Cloud API channel (issue 16), with wa-sim playing Meta: the
webhook's verify handshake; signed inbound messages accepted and unsigned
or badly signed ones refused with nothing stored; Meta's retry of one
message stored once; a guest writing to two hotels' numbers forming one
thread; one call carrying several messages (two of one new guest, one
repeated) and many calls of one new guest at once (recorded together,
store/group.h) each as if alone; a template reply sent through the Cloud API's messages call, its
delivered status producing v1 whatsapp.sent once; a transient send failure
retried, a permanent one reported on the message. v1 whatsapp.received and
whatsapp.sent reach a real HTTPS receiver. Black-box: HTTP, revopsctl,
wa-sim and the receiver.
"""

import concurrent.futures
import hashlib
import hmac
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
import receiver  # noqa: E402
import wasim  # noqa: E402
from harness import assert_error, assert_success, wait_until  # noqa: E402

SECRET = "app-secret-of-the-meta-app"
VERIFY = "verify-token-of-the-subscription"
TOKEN = "EAAG-access-token"
PNIDS = ["106540352242922", "106540352242923"]
# On PostgreSQL a setting reaches the server by notification, a moment
# after revopsctl returns: the longest that may take here.
ANNOUNCED_S = 0.5
E = None


class Env:
    pass


def setUpModule():
    global E
    e = Env()
    e.ca_dir = tempfile.mkdtemp(prefix="revops-wa-ca-")
    e.rx = e.srv = e.wa = None
    try:
        e.ca = receiver.TestCA(e.ca_dir)
        e.rx = receiver.Receiver(e.ca)
        # wa-sim: the first send fails (transient), sends to REJECTED are
        # refused for good
        e.wa = wasim.WaSim("--access-token", TOKEN, "--fail-first", "1",
                           "--reject-to", "48700000009")
        e.srv = harness.Server(["--whatsapp-api-url", e.wa.url, "--time-scale", "600",
                                "--trust-ca", e.ca.ca_pem, "--allow-private-targets"])
        srv = e.srv
        e.a = srv.seed_portfolio("enterprise", 2)
        e.props = [p["id"] for p in e.a.properties]
        # no test here waits for an unanswered message to escalate: a week
        # (about 1,000 s at this scale) keeps time out of the keyword test
        srv.ctl("sla-tier", "set", "--portfolio", e.a.id, "--tier", "platinum",
                "--guest-reply-minutes", "10080")
        for prop, pnid in zip(e.props, PNIDS):
            out = srv.ctl("whatsapp", "set", "--portfolio", e.a.id, "--property", prop,
                          "--phone-number-id", pnid, "--access-token", TOKEN,
                          "--app-secret", SECRET, "--verify-token", VERIFY)
            if SECRET in str(out) or TOKEN in str(out) or VERIFY in str(out):
                raise AssertionError("revopsctl echoed a secret: %r" % out)
        e.wa.config(srv.base_url + "/channels/whatsapp/webhook", SECRET)
        e.reader, e.read_tok = srv.client_token(e.a.id, "guest-threads:read", name="reader")
        e.writer, e.write_tok = srv.client_token(e.a.id, "guest-threads:read guest-threads:write",
                                                 name="concierge")
        e.b = srv.seed_portfolio("group", 1)
        r = srv.request("POST", "/v1/webhooks", token=e.a.token, portfolio=e.a.id,
                        body={"url": e.rx.url("/v1"),
                              "events": ["whatsapp.received", "whatsapp.sent"]})
        if r.status != 201:
            raise AssertionError("subscription: %r" % (r,))
    except BaseException:
        _teardown(e, check=False)
        raise
    E = e


def _teardown(e, check=True):
    try:
        for thing in (e.srv, e.wa):
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

    def events(self, type_, pred=lambda d: True):
        return [ev for ev in (d.json() for d in E.rx.received("/v1"))
                if ev["type"] == type_ and pred(ev["data"])]

    def threads(self, guest):
        r = E.srv.request("GET", "/v2/guest-threads?guest=" + urllib.parse.quote(guest),
                          token=E.read_tok, portfolio=E.a.id)
        data, _ = assert_success(self, r)
        return data

    def thread(self, tid):
        r = E.srv.request("GET", "/v2/guest-threads/" + tid, token=E.read_tok, portfolio=E.a.id)
        data, _ = assert_success(self, r)
        return data


class HandshakeTest(Base):
    def verify(self, **q):
        return E.srv.request("GET", "/channels/whatsapp/webhook?" + urllib.parse.urlencode(q))

    def test_verify_token(self):
        r = self.verify(**{"hub.mode": "subscribe", "hub.verify_token": VERIFY,
                           "hub.challenge": "1158201444"})
        self.assertEqual((r.status, r.raw), (200, b"1158201444"), r)
        r = self.verify(**{"hub.mode": "subscribe", "hub.verify_token": "wrong-token-x",
                           "hub.challenge": "1158201444"})
        self.assertEqual(r.status, 403, r)
        r = self.verify(**{"hub.mode": "unsubscribe", "hub.verify_token": VERIFY,
                           "hub.challenge": "1"})
        self.assertEqual(r.status, 400, r)


class InboundTest(Base):
    def test_signed_messages_only(self):
        for sig in ("bad", "none", "other-secret"):
            ans = E.wa.inbound(PNIDS[0], "48600111222", "forged %s" % sig, signature=sig)
            self.assertEqual(ans["statuses"], [401], sig)
        self.assertEqual(self.threads("+48600111222"), [])
        self.assertEqual(self.events("whatsapp.received",
                                     lambda d: d["from"] == "+48600111222"), [])
        # a body that is not Meta's is refused too
        r = E.srv.request("POST", "/channels/whatsapp/webhook", body={"entry": "x"})
        self.assertEqual(r.status, 400, r)

    def test_meta_retry_is_stored_once(self):
        ans = E.wa.inbound(PNIDS[0], "48600333444", "Late check-out please?", name="Marek",
                           repeat=3)
        self.assertEqual(ans["statuses"], [200, 200, 200])
        wait_until(lambda: self.events("whatsapp.received", lambda d: d["wamid"] == ans["wamid"]),
                   10.0, what="whatsapp.received")
        [t] = self.threads("+48600333444")
        full = self.thread(t["id"])
        self.assertEqual(len(full["messages"]), 1)
        m = full["messages"][0]
        self.assertEqual((m["channel"], m["direction"], m["text"], m["external_id"]),
                         ("whatsapp", "inbound", "Late check-out please?", ans["wamid"]))
        self.assertEqual(full["guest"]["name"], "Marek")
        evs = self.events("whatsapp.received", lambda d: d["wamid"] == ans["wamid"])
        self.assertEqual(len(evs), 1)
        ev = evs[0]
        self.assertEqual(ev["property_id"], E.props[0])
        self.assertEqual((ev["data"]["from"], ev["data"]["thread_id"], ev["data"]["message_id"]),
                         ("+48600333444", t["id"], m["id"]))

    def test_received_event_data_whole(self):
        # the event's data as a receiver gets it, every field: a text
        # with quotes, a backslash, a newline, a tab and non-ASCII, and a
        # guest Meta sends no profile name for (null)
        text = 'Pok\u00f3j "12"\\ prosz\u0119\n\tczy jest \u2713?'
        ans = E.wa.inbound(PNIDS[0], "48600919293", text)
        self.assertEqual(ans["statuses"], [200])
        wait_until(lambda: self.events("whatsapp.received", lambda d: d["wamid"] == ans["wamid"]),
                   10.0, what="whatsapp.received")
        [ev] = self.events("whatsapp.received", lambda d: d["wamid"] == ans["wamid"])
        [t] = self.threads("+48600919293")
        full = self.thread(t["id"])
        [m] = full["messages"]
        self.assertEqual(m["text"], text)
        self.assertEqual(ev["data"], {
            "message_id": m["id"], "thread_id": t["id"], "guest_id": full["guest"]["id"],
            "from": "+48600919293", "name": None, "text": text, "wamid": ans["wamid"],
            "received_at": m["at"]})

    def until_announced(self, since, applied, again, what):
        """A revopsctl setting made at since: on SQLite applied() must
        hold at once; on PostgreSQL, where the announcement arrives a
        moment later, again() runs until it holds, within ANNOUNCED_S."""
        while backend.POSTGRES and not applied():
            self.assertLess(time.monotonic() - since, ANNOUNCED_S, what)
            again()

    def test_new_app_secret_applies_to_the_next_call(self):
        # channels (and their app secrets) are kept between calls for up to
        # a second; setting a channel announces the change. On SQLite the
        # first call after revopsctl returns is checked against the new
        # secret; on PostgreSQL the announcement is a notification that
        # reaches the server a moment later, so there the old secret may
        # pass until it arrives, and never once the kept copy is a second
        # old. Calls signed with the old secret keep the kept copy fresh
        # while revopsctl runs. (ANNOUNCED_S is half the kept copy's second:
        # without the announcement, a copy read more than half a second
        # before the rotation fails it.)
        def set_secret(secret):
            E.srv.ctl("whatsapp", "set", "--portfolio", E.a.id, "--property", E.props[1],
                      "--phone-number-id", PNIDS[1], "--access-token", TOKEN,
                      "--app-secret", secret, "--verify-token", VERIFY)

        done = threading.Event()

        def rotate():
            try:
                set_secret("rotated-app-secret")
            finally:
                done.set()

        self.addCleanup(E.wa.config, E.srv.base_url + "/channels/whatsapp/webhook", SECRET)
        self.addCleanup(set_secret, SECRET)
        rotator = threading.Thread(target=rotate)
        rotator.start()
        before = 0
        while not done.is_set():
            ans = E.wa.inbound(PNIDS[1], "48600121212", "Old secret %d" % before)
            before += ans["statuses"] == [200]
        rotator.join()
        rotated = time.monotonic()
        ans = [E.wa.inbound(PNIDS[1], "48600121212", "Old secret after the rotation")]
        self.until_announced(
            rotated, lambda: ans[0]["statuses"] != [200],
            lambda: ans.__setitem__(0, E.wa.inbound(PNIDS[1], "48600121212", "Old secret, later")),
            "the old app secret still passes: the announcement did not arrive")
        self.assertEqual(ans[0]["statuses"], [401])
        ans = E.wa.inbound(PNIDS[1], "48600121213", "Old secret, refused")
        self.assertEqual(ans["statuses"], [401])
        E.wa.config(E.srv.base_url + "/channels/whatsapp/webhook", "rotated-app-secret")
        ans = E.wa.inbound(PNIDS[1], "48600121213", "Signed with the new secret")
        self.assertEqual(ans["statuses"], [200])
        self.assertGreater(before, 0, "no call was accepted before the rotation")
        [t] = self.threads("+48600121213")
        texts = [m["text"] for m in self.thread(t["id"])["messages"]]
        self.assertEqual(texts, ["Signed with the new secret"])

    def test_keywords_set_apply_to_the_next_call(self):
        # the rules of a portfolio are kept between calls; setting keywords
        # announces the change, so the very next call sees them
        E.wa.inbound(PNIDS[0], "48600555777", "Just a question")
        [t] = self.threads("+48600555777")
        self.assertFalse(self.thread(t["id"])["escalated"])
        E.srv.request("POST", "/v2/guest-threads/%s/messages" % t["id"], token=E.write_tok,
                      portfolio=E.a.id, body={"property_id": E.props[0], "template": {
                          "name": "reply", "language": "en_US", "parameters": []}})
        E.srv.ctl("guest-keywords", "set", "--portfolio", E.a.id, "--language", "*",
                  "--words", "flooded")
        self.addCleanup(E.srv.ctl, "guest-keywords", "set", "--portfolio", E.a.id,
                        "--language", "*", "--words", "")
        set_at = time.monotonic()
        E.wa.inbound(PNIDS[0], "48600555777", "The bathroom is FLOODED")
        tid = t["id"]
        t = [self.thread(tid)]

        def again():
            E.wa.inbound(PNIDS[0], "48600555777", "Still FLOODED")
            t[0] = self.thread(tid)
        self.until_announced(set_at, lambda: t[0]["escalated"], again,
                             "the keywords did not apply: the announcement did not arrive")
        self.assertTrue(t[0]["escalated"], t[0])

    def test_one_guest_two_hotels_one_thread(self):
        E.wa.inbound(PNIDS[0], "48600555666", "Hello Warsaw")
        E.wa.inbound(PNIDS[1], "48600555666", "Hello Cracow")
        [t] = self.threads("+48600555666")
        self.assertEqual(sorted(t["properties"]), sorted(E.props))
        self.assertEqual(len(self.thread(t["id"])["messages"]), 2)


def meta_body(pnid, messages):
    """A webhook body as Meta sends it: messages [(from, wamid, text)] to
    phone number id pnid, in one change."""
    return json.dumps({"object": "whatsapp_business_account", "entry": [{
        "id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "48221234567", "phone_number_id": pnid},
            "contacts": [{"profile": {"name": "Guest %s" % f[-3:]}, "wa_id": f}
                         for f, _, _ in messages],
            "messages": [{"from": f, "id": w, "timestamp": str(int(time.time())),
                          "type": "text", "text": {"body": t}} for f, w, t in messages]}}]}]})


def post_signed(raw):
    sig = hmac.new(SECRET.encode(), raw.encode(), hashlib.sha256).hexdigest()
    return E.srv.request("POST", "/channels/whatsapp/webhook", body=raw,
                         headers={"Content-Type": "application/json",
                                  "X-Hub-Signature-256": "sha256=" + sig})


class BatchTest(Base):
    def received(self, phone):
        return self.events("whatsapp.received", lambda d: d["from"] == phone)

    def test_one_call_many_messages(self):
        # a new guest's two messages, the first repeated in the same call,
        # and another new guest's: each as if it came alone
        a, b = "48601000001", "48601000002"
        msgs = [(a, "wamid.batch-a1", "First"), (a, "wamid.batch-a2", "Second"),
                (a, "wamid.batch-a1", "First"), (b, "wamid.batch-b1", "Other guest")]
        r = post_signed(meta_body(PNIDS[0], msgs))
        self.assertEqual(r.status, 200, r)
        [ta] = self.threads("+" + a)
        [tb] = self.threads("+" + b)
        self.assertNotEqual(ta["guest"]["id"], tb["guest"]["id"])
        full = self.thread(ta["id"])
        self.assertEqual([m["external_id"] for m in full["messages"]],
                         ["wamid.batch-a1", "wamid.batch-a2"])
        self.assertEqual(full["last_message"]["external_id"], "wamid.batch-a2")
        self.assertIsNotNone(full["waiting_since"])
        self.assertEqual(len(self.thread(tb["id"])["messages"]), 1)
        wait_until(lambda: len(self.received("+" + a)) == 2 and self.received("+" + b), 10.0,
                   what="whatsapp.received")
        self.assertEqual(sorted(e["data"]["wamid"] for e in self.received("+" + a)),
                         ["wamid.batch-a1", "wamid.batch-a2"])
        # the whole call again (Meta's retry): nothing new
        r = post_signed(meta_body(PNIDS[0], msgs))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(self.thread(ta["id"])["messages"]), 2)

    def test_many_calls_of_one_new_guest_at_once(self):
        # calls arriving together share transactions: still one guest, one
        # thread, every message once, one event each
        phone, n = "48601000003", 24
        bodies = [meta_body(PNIDS[i % 2], [(phone, "wamid.burst-%d" % i, "msg %d" % i)])
                  for i in range(n)]
        with concurrent.futures.ThreadPoolExecutor(n) as pool:
            statuses = list(pool.map(lambda raw: post_signed(raw).status, bodies))
        self.assertEqual(statuses, [200] * n)
        [t] = self.threads("+" + phone)
        self.assertEqual(sorted(t["properties"]), sorted(E.props))
        r = E.srv.request("GET", "/v2/guest-threads/%s/messages?limit=100" % t["id"],
                          token=E.read_tok, portfolio=E.a.id)
        data, _ = assert_success(self, r)
        self.assertEqual(sorted(m["external_id"] for m in data),
                         sorted("wamid.burst-%d" % i for i in range(n)))
        wait_until(lambda: len(self.received("+" + phone)) >= n, 10.0, what="whatsapp.received")
        evs = self.received("+" + phone)
        self.assertEqual(len(evs), n)
        self.assertEqual({e["data"]["thread_id"] for e in evs}, {t["id"]})
        self.assertEqual(len({e["data"]["message_id"] for e in evs}), n)


class OutboundTest(Base):
    def send(self, tid, prop=None, token=None, template=None):
        return E.srv.request("POST", "/v2/guest-threads/%s/messages" % tid, token=token or
                             E.write_tok, portfolio=E.a.id,
                             body={"property_id": prop or E.props[0],
                                   "template": template or {"name": "late_checkout",
                                                            "language": "en_US",
                                                            "parameters": ["14:00"]}})

    def test_template_reply_delivered_and_reported(self):
        E.wa.inbound(PNIDS[0], "48600777888", "Can I stay until 2pm?")
        [t] = self.threads("+48600777888")
        m, _ = assert_success(self, self.send(t["id"]), 202)
        self.assertEqual((m["status"], m["direction"], m["channel"]),
                         ("queued", "outbound", "whatsapp"))
        # sent through the Cloud API (after wa-sim's one transient failure,
        # retried), delivered, reported once
        wait_until(lambda: [s for s in E.wa.sent() if s["to"] == "48600777888"], 15.0,
                   what="the send at wa-sim")
        sent = [s for s in E.wa.sent() if s["to"] == "48600777888"][0]
        self.assertEqual(sent["phone_number_id"], PNIDS[0])
        self.assertEqual(sent["body"]["template"]["name"], "late_checkout")
        self.assertEqual(sent["body"]["template"]["language"]["code"], "en_US")
        self.assertEqual(sent["body"]["template"]["components"][0]["parameters"],
                         [{"type": "text", "text": "14:00"}])
        wait_until(lambda: self.events("whatsapp.sent", lambda d: d["message_id"] == m["id"]),
                   15.0, what="whatsapp.sent")
        ev = self.events("whatsapp.sent", lambda d: d["message_id"] == m["id"])
        self.assertEqual(len(ev), 1)
        self.assertEqual((ev[0]["data"]["wamid"], ev[0]["property_id"]),
                         (sent["wamid"], E.props[0]))
        self.assertEqual(ev[0]["data"]["template"]["name"], "late_checkout")
        # a late "sent" status does not move it back, nor report it again
        E.wa.status(PNIDS[0], sent["wamid"], "48600777888", "sent")
        E.wa.status(PNIDS[0], sent["wamid"], "48600777888", "delivered")
        msgs = self.thread(t["id"])["messages"]
        self.assertEqual([x["status"] for x in msgs if x["id"] == m["id"]], ["delivered"])
        self.assertEqual(len(self.events("whatsapp.sent", lambda d: d["message_id"] == m["id"])),
                         1)
        # the answer ended the wait
        self.assertIsNone(self.thread(t["id"])["waiting_since"])

    def test_read_without_delivered_reports_once(self):
        E.wa.inbound(PNIDS[1], "48600121212", "Hi")
        [t] = self.threads("+48600121212")
        m, _ = assert_success(self, self.send(t["id"], prop=E.props[1]), 202)

        def sent():
            msgs = self.thread(t["id"])["messages"]
            return [x for x in msgs if x["id"] == m["id"] and x["external_id"]]
        wait_until(sent, 15.0, what="the message sent")
        wamid = sent()[0]["external_id"]
        # wa-sim's own statuses may be on their way too: whichever comes
        # first, one whatsapp.sent
        E.wa.status(PNIDS[1], wamid, "48600121212", "read")
        wait_until(lambda: self.events("whatsapp.sent", lambda d: d["message_id"] == m["id"]),
                   10.0, what="whatsapp.sent")
        E.wa.status(PNIDS[1], wamid, "48600121212", "delivered")
        self.assertEqual([x["status"] for x in self.thread(t["id"])["messages"]
                          if x["id"] == m["id"]], ["read"])
        self.assertEqual(len(self.events("whatsapp.sent", lambda d: d["message_id"] == m["id"])),
                         1)

    def test_permanent_failure_is_reported(self):
        E.wa.inbound(PNIDS[1], "48700000009", "Hi")
        [t] = self.threads("+48700000009")
        m, _ = assert_success(self, self.send(t["id"], prop=E.props[1]), 202)

        def failed():
            msgs = self.thread(t["id"])["messages"]
            return [x for x in msgs if x["id"] == m["id"] and x["status"] == "failed"]
        wait_until(failed, 15.0, what="the message failed")
        self.assertIn("131026", failed()[0]["error"])

    def test_refusals(self):
        E.wa.inbound(PNIDS[0], "48600999000", "Hi")
        [t] = self.threads("+48600999000")
        r = self.send(t["id"], token=E.read_tok)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.send(t["id"], template={"name": "x", "language": "??"})
        assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
        r = self.send("gt_00000000000000000000000000")
        assert_error(self, r, 404, "SVC-NOT-FOUND")
        r = E.srv.request("POST", "/v2/guest-threads/%s/messages" % t["id"], token=E.b.token,
                          portfolio=E.b.id,
                          body={"property_id": E.b.properties[0]["id"],
                                "template": {"name": "x", "language": "en"}})
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")


if __name__ == "__main__":
    unittest.main()
