"""Keyed writes made during a fault, and what the fault suites check after
it (issue 19): every acknowledged write is present exactly once and its
Idempotency-Key replays its answer; a write never acknowledged exists at
most once (its key replays, or is still claimed and nothing it wrote
stands, or was released and runs now, once); no decision stays pending;
every decision's audit chain verifies; the PMS got one set of writes per
published decision. Only the public HTTP surface (and pms-sim's log).
"""

import threading

import harness

KINDS = ("decision", "task", "webhook")
WEBHOOKS_MAX = 40  # a portfolio has at most 50 subscriptions


class Ledger:
    def __init__(self, srv, seed, approver, prefix="w"):
        """seed: harness.Seed (all scopes); approver: a revenue-approver
        user of it, for decisions."""
        self.srv, self.seed, self.approver, self.prefix = srv, seed, approver, prefix
        self.props = [p["id"] for p in seed.properties]
        self.entries = []  # [kind, n, key, answer or None]
        self.lock = threading.Lock()
        self.hooks = 0

    def write(self, kind, n):
        """(path, body, marker) of write n of kind; the marker names what it
        makes, to count them afterwards."""
        marker = "%s-%s-%d" % (self.prefix, kind, n)
        if kind == "decision":
            return "/v2/rate-decisions", harness.rate_decision_body(
                self.props, self.seed.ceiling["id"], self.approver, justification=marker), marker
        if kind == "task":
            return "/v2/operations-tasks", {"property_id": self.props[n % len(self.props)],
                                            "title": marker, "category": "maintenance",
                                            "priority": "normal"}, marker
        return "/v2/webhooks", {"url": "https://93.184.216.34/hooks/" + marker,
                                "events": ["rate.decision.published"]}, marker

    def send(self, kind, n, client=None, timeout=30.0):
        path, body, _ = self.write(kind, n)
        send = client.request if client else self.srv.request
        kw = {} if client else {"timeout": timeout}
        return send("POST", path, body=body, token=self.seed.token, portfolio=self.seed.id,
                    headers={"Idempotency-Key": "%s-%d" % (self.prefix, n)}, **kw)

    def post(self, kind, client=None, timeout=30.0):
        """Posts the next write of kind (a webhook only while fewer than
        WEBHOOKS_MAX were tried; a task then) and records it, also when the
        call raises (the server died under it). Returns the answer."""
        with self.lock:
            if kind == "webhook":
                if self.hooks >= WEBHOOKS_MAX:
                    kind = "task"
                else:
                    self.hooks += 1
            entry = [kind, len(self.entries), None, None]
            entry[2] = "%s-%d" % (self.prefix, entry[1])
            self.entries.append(entry)
        entry[3] = self.send(kind, entry[1], client, timeout)
        return entry[3]

    def acknowledged(self):
        return [e for e in self.entries if e[3] is not None and 200 <= e[3].status < 300]

    def listed(self, path):
        items, cursor = [], None
        while True:
            r = self.srv.request("GET", path + "?limit=500" + ("&cursor=" + cursor
                                                             if cursor else ""),
                                 token=self.seed.token, portfolio=self.seed.id)
            if r.status != 200:
                raise AssertionError("GET %s: %r" % (path, r))
            items += r.body["data"]
            cursor = r.body["meta"]["next_cursor"]
            if not cursor:
                return items

    def made(self):
        """marker -> ids of what carries it; and the decisions."""
        out = {}
        decisions = self.listed("/v2/rate-decisions")
        for d in decisions:
            out.setdefault(d["governance"]["justification"], []).append(d["id"])
        for t in self.listed("/v2/operations-tasks"):
            out.setdefault(t["title"], []).append(t["id"])
        for w in self.listed("/v2/webhooks"):
            out.setdefault(w["url"].rsplit("/", 1)[1], []).append(w["id"])
        return out, decisions

    def decision_status(self, did):
        return self.srv.request("GET", "/v2/rate-decisions/" + did, token=self.seed.token,
                                portfolio=self.seed.id).body["data"]["status"]

    def verify(self, tc, sim=None):
        """The checks of the module docstring, on the running server; sim:
        the pms-sim decisions wrote to, if any."""
        made, decisions = self.made()
        for kind, n, key, r in self.entries:
            marker = self.write(kind, n)[2]
            ids = made.get(marker, [])
            again = self.send(kind, n)
            if r is not None and 200 <= r.status < 300:
                tc.assertEqual(ids, [r.body["data"]["id"]], (kind, n, r))
                tc.assertEqual(again.status, r.status, again)
                tc.assertEqual(again.headers.get("Idempotent-Replayed"), "true", again)
                tc.assertEqual(again.body["data"]["id"], r.body["data"]["id"])
                continue
            tc.assertLessEqual(len(ids), 1, (kind, n, ids))
            if again.status == 409:  # still claimed: nothing it wrote stands
                harness.assert_error(tc, again, 409, "SVC-IDEMPOTENCY-IN-PROGRESS")
                if kind == "decision":  # recorded before its PMS writes, then failed
                    for i in ids:
                        tc.assertEqual(self.decision_status(i), "failed", i)
                else:
                    tc.assertEqual(ids, [], (kind, n))
            elif again.headers.get("Idempotent-Replayed") == "true":
                if 200 <= again.status < 300:
                    tc.assertEqual(ids, [again.body["data"]["id"]], (kind, n))
            else:  # the key was free (a 5xx released it): it ran now, once
                tc.assertIn(again.status, (200, 201, 502), again)
                if kind != "decision":
                    tc.assertEqual(ids, [], (kind, n))
        pending = self.srv.request("GET", "/v2/rate-decisions?status=pending",
                                   token=self.seed.token, portfolio=self.seed.id)
        tc.assertEqual(pending.body["data"], [], pending)
        for d in decisions:
            r = self.srv.request("GET", "/v2/rate-decisions/%s/audit-trail" % d["id"],
                                 token=self.seed.token, portfolio=self.seed.id)
            tc.assertEqual(r.status, 200, r)
            harness.assert_audit_chain(tc, r.body["data"])
        if sim is not None:  # one set of PMS writes per published decision
            keys = {w["idempotency_key"] for w in sim.written()}
            for d in decisions:
                if d["status"] == "published":
                    tc.assertEqual(len([k for k in keys if k.startswith(d["id"] + ":")
                                        and k.endswith(":publish")]),
                                   len(d["properties"]), d["id"])
