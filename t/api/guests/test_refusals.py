"""Every route issue 16 adds, refused as the contract says (API-CONTRACT §2):
without a token (401), with a token lacking the route's scope (403), with
another portfolio's token on this portfolio's task or thread (403), with a
token narrowed to another property of the same portfolio (403 on one
resource, left out of a list), and on an id that does not exist (404);
and nothing changed by any refusal. Meta's public webhook has its own
suite (test_whatsapp.py). Black-box: HTTP and revopsctl only.
"""

import datetime
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import assert_error, assert_success  # noqa: E402

E = None
NO_SUCH = {"task": "ot_00000000000000000000000000", "thread": "gt_00000000000000000000000000"}


class Env:
    pass


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def setUpModule():
    global E
    e = Env()
    e.srv = harness.Server([])
    try:
        srv = e.srv
        e.a = srv.seed_portfolio("enterprise", 2)
        e.props = [p["id"] for p in e.a.properties]
        e.b = srv.seed_portfolio("group", 1)
        # a task and a thread of the second property of A
        r = srv.request("POST", "/v2/operations-tasks", token=e.a.token, portfolio=e.a.id,
                        body={"property_id": e.props[1], "title": "Leak", "category": "maintenance",
                              "priority": "low", "sla_tier": "standard"})
        e.task = r.body["data"]["id"]
        r = srv.request("POST", "/v2/feeds/guest-messages", token=e.a.token, portfolio=e.a.id,
                        body={"items": [{"property_id": e.props[1], "channel": "email",
                                         "direction": "inbound", "guest": {"email": "r@x.example"},
                                         "text": "Hi", "at": now_rfc3339(),
                                         "external_id": "refusals-1"}]})
        e.thread = r.body["data"]["results"][0]["thread_id"]
        one = srv.create_client(e.a.id, name="first-only", properties=e.a.codes[0])
        e.first_only = srv.access_token(one["client_id"], one["client_secret"])
        _, e.no_scope = srv.client_token(e.a.id, "portfolios:read", name="no-scope")
    except BaseException:
        e.srv.cleanup()
        raise
    E = e


def tearDownModule():
    if E is not None:
        E.srv.close()


def routes():
    """(method, path, body, kind) of every new route; kind: list, one, write."""
    t, g, p1 = E.task, E.thread, E.props[1]
    return [
        ("POST", "/v2/operations-tasks", {"property_id": p1, "title": "x", "category": "c",
                                          "priority": "low"}, "create"),
        ("GET", "/v2/operations-tasks", None, "list"),
        ("GET", "/v2/operations-tasks/" + t, None, "one"),
        ("POST", "/v2/operations-tasks/%s/acknowledge" % t, None, "one"),
        ("POST", "/v2/operations-tasks/%s/resolve" % t, None, "one"),
        ("GET", "/v2/guest-threads", None, "list"),
        ("GET", "/v2/guest-threads/" + g, None, "one"),
        ("GET", "/v2/guest-threads/%s/messages" % g, None, "one"),
        ("POST", "/v2/guest-threads/%s/messages" % g,
         {"property_id": p1, "template": {"name": "x", "language": "en"}}, "one"),
        ("POST", "/v2/feeds/guest-messages",
         {"items": [{"property_id": p1, "channel": "email", "direction": "inbound",
                     "guest": {"email": "r@x.example"}, "text": "x", "at": now_rfc3339(),
                     "external_id": "refusals-x"}]}, "feed"),
    ]


class RefusalTest(unittest.TestCase):
    maxDiff = None

    def call(self, method, path, body, token, portfolio=None):
        return E.srv.request(method, path, body=body, token=token,
                             portfolio=portfolio or E.a.id)

    def state(self):
        t = self.call("GET", "/v2/operations-tasks/" + E.task, None, E.a.token).body["data"]
        g = self.call("GET", "/v2/guest-threads/" + E.thread, None, E.a.token).body["data"]
        return t["status"], t["updated_at"], len(g["messages"]), g["updated_at"]

    def test_every_route(self):
        before = self.state()
        for method, path, body, kind in routes():
            with self.subTest(route="%s %s" % (method, path)):
                r = E.srv.request(method, path, body=body, portfolio=E.a.id)
                assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")
                r = self.call(method, path, body, E.no_scope)
                assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
                if kind in ("one",):
                    r = self.call(method, path, body, E.b.token, E.b.id)
                    assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
                    r = self.call(method, path, body, E.first_only)
                    assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
                    missing = path.replace(E.task, NO_SUCH["task"]).replace(
                        E.thread, NO_SUCH["thread"])
                    r = self.call(method, missing, body, E.a.token)
                    assert_error(self, r, 404, "SVC-NOT-FOUND")
                elif kind == "list":
                    data, _ = assert_success(self, self.call(method, path, None, E.first_only))
                    self.assertNotIn(E.props[1], str(data))
                elif kind == "create":
                    r = self.call(method, path, body, E.first_only)
                    assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
                elif kind == "feed":
                    data, _ = assert_success(self, self.call(method, path, body, E.first_only))
                    self.assertEqual(data["results"][0]["error"]["code"],
                                     "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(self.state(), before)


if __name__ == "__main__":
    unittest.main()
