"""Operations tasks (issue 16): tasks created by a feed client, acknowledged
and resolved by an ops-manager, escalated by the durable scheduler when not
acknowledged within their SLA tier (at --time-scale), routed to the person
on call for the property at that moment (weekly rotations handed over at a
wall time in each property's time zone, overrides), one more level after a
further period, each level once; a restart in the middle of a pending
escalation fires it once, after the restart. v2 operations.task.escalated
reaches a real HTTPS receiver. Black-box: HTTP, revopsctl and the receiver.
"""

import datetime
import json
import os
import shutil
import sys
import tempfile
import time
import unittest
from zoneinfo import ZoneInfo

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import backend  # noqa: E402
import harness  # noqa: E402
import idp as idplib  # noqa: E402
import receiver  # noqa: E402
from harness import (assert_error, assert_success, ctl_user, idp_set,  # noqa: E402
                     parse_rfc3339, saml_grant, wait_until)

PUBLIC_URL = "http://sp.test"
ENTITY = "https://idp.operations.example/saml"
MANAGER = "ops-lead@x.example"
PLAIN = "front-desk@x.example"
OT_ID = r"^ot_[0-7][0-9A-HJKMNP-TV-Z]{25}$"
TASK_KEYS = {"id", "property_id", "title", "category", "priority", "sla_tier", "due_at",
             "status", "acknowledge_by", "escalation_level", "escalations", "created_by",
             "acknowledged_by", "acknowledged_at", "resolved_by", "resolved_at", "resolution",
             "created_at", "updated_at"}
SCALE = 600  # one business minute is 100 ms

ANNA = {"name": "Anna Nowak", "email": "anna@hotel.example", "phone": "+48600100200"}
BOB = {"name": "Bob Smith", "email": "bob@hotel.example"}
CARLA = {"name": "Carla Duty", "phone": "+351912345678"}
OSCAR = {"name": "Oscar Override"}

E = None


class Env:
    pass


def _ok(r, status, what):
    if r.status != status:
        raise AssertionError("%s: %r" % (what, r))
    return r.body


def wall(tz, offset_s=0.0):
    """The wall time in zone tz, offset_s from now, as YYYY-MM-DDTHH:MM:SS."""
    t = datetime.datetime.now(ZoneInfo(tz)) + datetime.timedelta(seconds=offset_s)
    return t.strftime("%Y-%m-%dT%H:%M:%S")


def rfc3339(offset_s=0.0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_s)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def in_zone(ts, tz):
    """An RFC 3339 instant as the wall time in zone tz, to the second."""
    return parse_rfc3339(ts).astimezone(ZoneInfo(tz)).strftime("%Y-%m-%dT%H:%M:%S")


def setUpModule():
    global E
    e = Env()
    e.ca_dir = tempfile.mkdtemp(prefix="revops-ops-ca-")
    e.rota_dir = tempfile.mkdtemp(prefix="revops-ops-rota-")
    e.rx = e.srv = None
    try:
        e.ca = receiver.TestCA(e.ca_dir)
        e.rx = receiver.Receiver(e.ca)
        e.srv = harness.Server(["--time-scale", str(SCALE), "--public-url", PUBLIC_URL,
                                "--trust-ca", e.ca.ca_pem, "--allow-private-targets"])
        srv = e.srv
        e.a = srv.seed_portfolio("enterprise", 2)  # platinum; Europe/Warsaw
        e.props = [p["id"] for p in e.a.properties]
        e.ny = srv.ctl("property", "add", "--portfolio", e.a.id, "--name", "Hotel NYC",
                       "--brand", "Aurora", "--code", "NYC01", "--billing-id", "B-NYC",
                       "--timezone", "America/New_York", "--currency", "USD")["id"]
        # platinum: acknowledge within 5 minutes (0.5 s), next level after 10 (1 s)
        srv.ctl("sla-tier", "set", "--portfolio", e.a.id, "--tier", "platinum",
                "--task-ack-minutes", "5", "--task-escalate-minutes", "10")
        # gold: 40 minutes (4 s), for the restart
        srv.ctl("sla-tier", "set", "--portfolio", e.a.id, "--tier", "gold",
                "--task-ack-minutes", "40")
        e.idp = idplib.IdP(ENTITY, audience=PUBLIC_URL + "/saml/sp",
                           recipient=PUBLIC_URL + "/oauth/token")
        idp_set(srv, e.a.id, ENTITY, e.idp.cert_path)
        ctl_user(srv, e.a.id, MANAGER, ["ops-manager"])
        ctl_user(srv, e.a.id, PLAIN, ["revenue-approver"])
        e.manager = _ok(saml_grant(srv, e.idp.assertion(MANAGER)), 200,
                        "manager token")["access_token"]
        e.plain = _ok(saml_grant(srv, e.idp.assertion(PLAIN)), 200, "plain token")["access_token"]
        e.writer, e.write_tok = srv.client_token(e.a.id, "tasks:write tasks:read", name="pms")
        e.reader, e.read_tok = srv.client_token(e.a.id, "tasks:read", name="reader")
        one = srv.create_client(e.a.id, name="one-property", properties=e.a.codes[0])
        e.one_tok = srv.access_token(one["client_id"], one["client_secret"])
        e.b = srv.seed_portfolio("group", 1)
        r = srv.request("POST", "/v2/webhooks", token=e.a.token, portfolio=e.a.id,
                        body={"url": e.rx.url("/v2"), "events": ["operations.task.escalated"]})
        _ok(r, 201, "subscription")
        # Level 1: a weekly rotation whose first hand-over was at the
        # current UTC wall time: in Warsaw (ahead of UTC) Bob has been on
        # call for an hour or two, in New York (behind) it is still Anna's
        # week before it; level 2: Carla.
        e.set_rota = lambda doc: set_rota(e, doc)
        e.set_rota(base_rota(e))
    except BaseException:
        _teardown(e, check=False)
        raise
    E = e


def base_rota(e, first=None):
    return {"rotations": [
        {"name": "duty managers", "level": 1, "first_handover": first or wall("UTC", -5),
         "people": [BOB, ANNA]},
        {"name": "general managers", "level": 2, "first_handover": "2026-01-05T09:00",
         "people": [CARLA]}]}


def set_rota(e, doc):
    path = os.path.join(e.rota_dir, "rota.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return e.srv.ctl("oncall", "set", "--portfolio", e.a.id, "--file", path)


def _teardown(e, check=True):
    try:
        if e.srv is not None:
            e.srv.close() if check else e.srv.cleanup()
    finally:
        if e.rx is not None:
            e.rx.close()
        shutil.rmtree(e.ca_dir, ignore_errors=True)
        shutil.rmtree(e.rota_dir, ignore_errors=True)


def tearDownModule():
    if E is not None:
        _teardown(E)


class Base(unittest.TestCase):
    maxDiff = None

    def create(self, prop=None, token=None, portfolio=None, **kw):
        body = {"property_id": prop or E.props[0], "title": "Air conditioning broken in 412",
                "category": "maintenance", "priority": "high"}
        body.update(kw)
        return E.srv.request("POST", "/v2/operations-tasks", body=body,
                             token=token or E.write_tok, portfolio=portfolio or E.a.id)

    def task(self, **kw):
        data, _ = assert_success(self, self.create(**kw), 201)
        return data

    def get(self, path, token=None, portfolio=None):
        return E.srv.request("GET", path, token=token or E.read_tok, portfolio=portfolio or E.a.id)

    def act(self, tid, what, token=None, body=None, portfolio=None):
        return E.srv.request("POST", "/v2/operations-tasks/%s/%s" % (tid, what), body=body,
                             token=token or E.manager, portfolio=portfolio or E.a.id)

    def escalations(self, tid):
        return [ev for ev in (d.json() for d in E.rx.received("/v2"))
                if ev["type"] == "operations.task.escalated" and ev["data"]["task_id"] == tid]

    def wait_escalations(self, tid, n, timeout=15.0):
        wait_until(lambda: len(self.escalations(tid)) >= n, timeout,
                   what="%d escalations of %s" % (n, tid))
        return sorted(self.escalations(tid), key=lambda ev: ev["data"]["level"])


class CreateAndReadTest(Base):
    def test_create_then_read_and_list(self):
        t = self.task(due_at=rfc3339(3600), priority="urgent")
        self.assertEqual(set(t), TASK_KEYS)
        self.assertRegex(t["id"], OT_ID)
        self.assertEqual((t["status"], t["sla_tier"], t["priority"], t["escalation_level"],
                          t["escalations"]), ("open", "platinum", "urgent", 0, []))
        self.assertEqual(t["created_by"], "client:" + E.writer["client_id"])
        # acknowledge by: 5 business minutes at the time scale
        gap = (parse_rfc3339(t["acknowledge_by"]) - parse_rfc3339(t["created_at"])).total_seconds()
        self.assertAlmostEqual(gap, 5 * 60 / SCALE, delta=0.01)
        got, _ = assert_success(self, self.get("/v2/operations-tasks/" + t["id"]))
        self.assertEqual(got["id"], t["id"])
        # the tier given wins over the portfolio's
        g = self.task(sla_tier="standard", prop=E.props[1])
        self.assertEqual(g["sla_tier"], "standard")
        gap = (parse_rfc3339(g["acknowledge_by"]) - parse_rfc3339(g["created_at"])).total_seconds()
        self.assertAlmostEqual(gap, 60 * 60 / SCALE, delta=0.01)
        listed, _ = assert_success(self, self.get("/v2/operations-tasks?sla_tier=standard"))
        self.assertIn(g["id"], [x["id"] for x in listed])
        self.assertNotIn(t["id"], [x["id"] for x in listed])
        listed, _ = assert_success(self, self.get("/v2/operations-tasks?property_id=" +
                                                  E.props[1]))
        self.assertEqual({x["property_id"] for x in listed}, {E.props[1]})

    def test_bad_bodies_are_refused(self):
        for body, field in (({"priority": "asap"}, "priority"),
                            ({"sla_tier": "diamond"}, "sla_tier"),
                            ({"category": "has space"}, "category"),
                            ({"title": "   "}, "title"),
                            ({"due_at": "tomorrow"}, "due_at")):
            r = self.create(**body)
            assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
            self.assertIn(field, [d["field"] for d in r.body["error"]["details"]], body)
        r = E.srv.request("POST", "/v2/operations-tasks", body={"title": "x"},
                          token=E.write_tok, portfolio=E.a.id)
        assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
        r = self.create(prop=E.b.properties[0]["id"])
        self.assertIn(r.status, (400, 403), r)
        r = self.create(prop=E.props[1], token=E.one_tok)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.create(token=E.read_tok)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.get("/v2/operations-tasks?status=closed")
        self.assertEqual(r.status, 400, r)

    def test_scope_and_portfolio(self):
        t = self.task(prop=E.props[1], sla_tier="standard")
        # a token of one property neither sees nor lists the other's task
        r = self.get("/v2/operations-tasks/" + t["id"], token=E.one_tok)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        listed, _ = assert_success(self, self.get("/v2/operations-tasks", token=E.one_tok))
        self.assertNotIn(E.props[1], {x["property_id"] for x in listed})
        # another portfolio's token
        r = self.get("/v2/operations-tasks/" + t["id"], token=E.b.token, portfolio=E.b.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.act(t["id"], "acknowledge", token=E.b.token, portfolio=E.b.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        r = self.get("/v2/operations-tasks/ot_00000000000000000000000000")
        assert_error(self, r, 404, "SVC-NOT-FOUND")


class ActTest(Base):
    def test_only_an_ops_manager_acts(self):
        t = self.task(sla_tier="standard")
        for tok in (E.write_tok, E.plain):
            r = self.act(t["id"], "acknowledge", token=tok)
            assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        self.assertEqual(self.get("/v2/operations-tasks/" + t["id"]).body["data"]["status"],
                         "open")

    def acknowledged_in_time(self):
        """A task acknowledged before its deadline (0.5 s), by the server's
        own times; one a loaded machine acknowledged late is resolved and
        another made."""
        for _ in range(3):
            t = self.task()
            a, _ = assert_success(self, self.act(t["id"], "acknowledge"))
            if parse_rfc3339(a["acknowledged_at"]) < parse_rfc3339(t["acknowledge_by"]):
                return t, a
            self.act(t["id"], "resolve")
        self.fail("no task was acknowledged within 0.5 s of its creation")

    def test_acknowledged_task_never_escalates(self):
        t, a = self.acknowledged_in_time()
        self.assertEqual((a["status"], a["acknowledged_by"]), ("acknowledged", "user:" + MANAGER))
        assert_error(self, self.act(t["id"], "acknowledge"), 409, "SVC-CONFLICT")
        # past its deadline and the next level's, nothing fires: another
        # task created after it escalates first
        other = self.task()
        self.wait_escalations(other["id"], 1)
        time.sleep(0.5 + 1.0)
        self.assertEqual(self.escalations(t["id"]), [])
        r, _ = assert_success(self, self.act(t["id"], "resolve",
                                             body={"resolution": "compressor replaced"}))
        self.assertEqual((r["status"], r["resolution"], r["escalation_level"]),
                         ("resolved", "compressor replaced", 0))
        assert_error(self, self.act(t["id"], "resolve"), 409, "SVC-CONFLICT")
        assert_error(self, self.act(t["id"], "acknowledge"), 409, "SVC-CONFLICT")
        self.act(other["id"], "resolve")


class EscalationTest(Base):
    def test_escalates_to_on_call_then_the_next_level_once_each(self):
        t = self.task()
        evs = self.wait_escalations(t["id"], 2)
        first, second = evs[0], evs[1]
        self.assertEqual(first["portfolio_id"], E.a.id)
        self.assertEqual(first["properties"], [E.props[0]])
        d = first["data"]
        self.assertEqual({k: d[k] for k in ("task_id", "property_id", "level", "sla_tier",
                                            "priority", "category")},
                         {"task_id": t["id"], "property_id": E.props[0], "level": 1,
                          "sla_tier": "platinum", "priority": "high",
                          "category": "maintenance"})
        self.assertEqual(d["on_call"], dict(BOB, source="rotation", **{"from": "duty managers"}))
        self.assertGreaterEqual(parse_rfc3339(d["escalated_at"]), parse_rfc3339(t["acknowledge_by"]))
        self.assertEqual(second["data"]["level"], 2)
        self.assertEqual(second["data"]["on_call"]["name"], CARLA["name"])
        # the next level is due 10 minutes (1 s) after the first was
        gap = (parse_rfc3339(second["data"]["escalated_at"]) -
               parse_rfc3339(t["acknowledge_by"])).total_seconds()
        self.assertGreaterEqual(gap, 0.999)
        # the rota has two levels: no third, and each level once
        time.sleep(1.5)
        self.assertEqual(sorted(ev["data"]["level"] for ev in self.escalations(t["id"])), [1, 2])
        got, _ = assert_success(self, self.get("/v2/operations-tasks/" + t["id"]))
        self.assertEqual(got["escalation_level"], 2)
        self.assertEqual([x["level"] for x in got["escalations"]], [1, 2])
        listed, _ = assert_success(self, self.get("/v2/operations-tasks?escalated=true"))
        self.assertIn(t["id"], [x["id"] for x in listed])
        # acknowledging still works after an escalation
        a, _ = assert_success(self, self.act(t["id"], "acknowledge"))
        self.assertEqual(a["status"], "acknowledged")
        # the scheduler's lag is exported
        m = E.srv.request("GET", "/metrics")
        self.assertIn("revops_scheduler_lag_seconds_bucket", m.raw.decode())
        self.assertRegex(m.raw.decode(), r"revops_scheduler_timers_fired_total [1-9]")

    def escalate_before_hand_over(self):
        """Sets a rota whose level-1 hand-over is a few seconds ahead at the
        wall time of Warsaw and escalates a task at the Warsaw hotel before
        it: Anna is on call until the hand-over, Bob from it. Each escalation
        is checked against its own escalated_at; one that a loaded machine
        fires only after the hand-over must name Bob, and the next try gives
        a longer lead. Returns the rota and the tasks made."""
        made = []
        for lead in (3.0, 8.0, 20.0):
            doc = base_rota(E, first=wall("Europe/Warsaw", lead))
            E.set_rota(doc)
            t = self.task(prop=E.props[1])
            made.append(t)
            d = self.wait_escalations(t["id"], 1)[0]["data"]
            if in_zone(d["escalated_at"], "Europe/Warsaw") < doc["rotations"][0]["first_handover"]:
                self.assertEqual(d["on_call"]["name"], ANNA["name"])
                return doc, made
            self.assertEqual(d["on_call"]["name"], BOB["name"])
        self.fail("no escalation came before a hand-over 20 s ahead")

    def test_hand_over_in_the_property_time_zone_and_overrides(self):
        # New York's same wall time lies hours away, so there the hand-over
        # is not near.
        try:
            doc, made = self.escalate_before_hand_over()
            ny = self.task(prop=E.ny)
            made.append(ny)
            ny_who = self.wait_escalations(ny["id"], 1)[0]["data"]["on_call"]["name"]
            wait_until(lambda: wall("Europe/Warsaw") >= doc["rotations"][0]["first_handover"],
                       25.0, what="the hand-over")
            after = self.task(prop=E.props[1])
            made.append(after)
            d = self.wait_escalations(after["id"], 1)[0]["data"]
            self.assertEqual(d["on_call"]["name"], BOB["name"])
            # New York: the rotation's k-th week counts from a few seconds ahead in New
            # York's wall time, which is 5 to 6 hours behind: still Anna
            self.assertEqual(ny_who, ANNA["name"])
            # an override for the New York hotel, in absolute time
            doc["overrides"] = [{"level": 1, "properties": [E.ny], "from": rfc3339(-3600),
                                 "to": rfc3339(3600), "person": OSCAR}]
            E.set_rota(doc)
            o = self.task(prop=E.ny)
            made.append(o)
            d = self.wait_escalations(o["id"], 1)[0]["data"]
            self.assertEqual(d["on_call"], dict(OSCAR, source="override", **{"from": 0}))
            w = self.task(prop=E.props[1])
            made.append(w)
            d = self.wait_escalations(w["id"], 1)[0]["data"]
            self.assertEqual(d["on_call"]["name"], BOB["name"])
            for x in made:
                self.act(x["id"], "resolve")
        finally:
            E.set_rota(base_rota(E))

    def test_a_restart_fires_a_pending_escalation_once_after_it(self):
        t = self.task(sla_tier="gold")  # 4 s
        E.srv.stop()
        try:
            time.sleep(4.5)
            self.assertEqual(self.escalations(t["id"]), [])
        finally:
            E.srv.start()
        evs = self.wait_escalations(t["id"], 1)
        self.assertEqual(evs[0]["data"]["level"], 1)
        # gold's next level comes 30 minutes (3 s) after: wait for it, then
        # no more (and level 1 never twice)
        evs = self.wait_escalations(t["id"], 2)
        time.sleep(1.0)
        self.assertEqual(sorted(ev["data"]["level"] for ev in self.escalations(t["id"])), [1, 2])
        self.act(t["id"], "resolve")


class ManyTasksTest(Base):
    def test_every_level_fires_once_with_two_schedulers(self):
        # On PostgreSQL a second node (--role worker) runs a scheduler of
        # its own on the same database; on SQLite the one node fires them
        # all. Either way: 40 tasks, two levels each, 80 events, each once.
        second = None
        if backend.POSTGRES:
            second = harness.Server(["--role", "worker", "--time-scale", str(SCALE),
                                     "--allow-private-targets", "--trust-ca", E.ca.ca_pem],
                                    start=False, db=E.srv.db)
            shutil.copy(os.path.join(E.srv.data_dir, "revops.key"), second.data_dir)
            second.start()
        try:
            ids = [self.task(prop=E.props[i % 2])["id"] for i in range(40)]
            wait_until(lambda: all(len(self.escalations(t)) >= 2 for t in ids), 30.0,
                       what="two escalations of each of 40 tasks")
            time.sleep(1.5)
            for t in ids:
                self.assertEqual(sorted(ev["data"]["level"] for ev in self.escalations(t)),
                                 [1, 2], t)
            fired = [fired_total(E.srv)] + ([fired_total(second)] if second else [])
            self.assertGreaterEqual(sum(fired), 80)
            for t in ids:
                self.act(t, "resolve")
        finally:
            if second is not None:
                second.close()


def fired_total(srv):
    m = srv.request("GET", "/metrics").raw.decode()
    for line in m.splitlines():
        if line.startswith("revops_scheduler_timers_fired_total "):
            return int(line.split()[1])
    raise AssertionError("no revops_scheduler_timers_fired_total in /metrics")


class RotaTest(Base):
    def test_bad_rotas_are_refused_and_change_nothing(self):
        path = os.path.join(E.rota_dir, "bad.json")
        cases = [
            ("{not json", "not JSON"),
            (json.dumps({"rotations": [{"name": "x", "level": 9, "first_handover":
                                        "2026-01-05T09:00", "people": [BOB]}]}), "level"),
            (json.dumps({"rotations": [{"name": "x", "level": 1, "first_handover":
                                        "2026-01-05 09:00", "people": [BOB]}]}),
             "first_handover"),
            (json.dumps({"rotations": [{"name": "x", "level": 1, "properties":
                                        [E.b.properties[0]["id"]],
                                        "first_handover": "2026-01-05T09:00",
                                        "people": [BOB]}]}), "not a property"),
            (json.dumps({"rotations": [{"name": "x", "level": 1,
                                        "first_handover": "2026-01-05T09:00",
                                        "people": [{"name": "Z", "phone": "600"}]}]}),
             "E.164"),
            (json.dumps({"rotations": [], "overrides": [
                {"level": 1, "from": "2026-01-05T09:00", "to": "2026-01-05T08:00",
                 "person": BOB}]}), "after"),
        ]
        for text, want in cases:
            with open(path, "w") as f:
                f.write(text)
            p = E.srv.ctl_raw("oncall", "set", "--portfolio", E.a.id, "--file", path)
            self.assertNotEqual(p.returncode, 0, text)
            self.assertIn(want, p.stderr.decode(), text)
        # the rota in force is still the base one: Bob escalates
        t = self.task(prop=E.props[1])
        self.assertEqual(self.wait_escalations(t["id"], 1)[0]["data"]["on_call"]["name"],
                         BOB["name"])
        self.act(t["id"], "resolve")


if __name__ == "__main__":
    unittest.main()
