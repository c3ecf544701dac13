"""An Idempotency-Key's stored answer commits with the write it answers
(issue 19, defect 4): a crash between the two must never leave a write
whose key a retry runs again. revopsd runs under gdb, which stops it at
an exact point of one keyed write and kills it there (SIGKILL: nothing
of the server runs after); the client never gets an answer and retries
with the same key on a new start. Before the commit, nothing was written
(the retry is 409 while the key's lease lasts, then runs afresh); after
it, the retry replays the answer: there is exactly one subscription or
decision, and the PMS got one set of writes.
The route that commits before it calls the PMS (a rate decision) stores
its answer inside its final record, so a crash as its handler returns
replays too. Black-box: HTTP, pms-sim, gdb.
"""

import os
import shutil
import sys
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import pmssim  # noqa: E402
from harness import rate_decision_body  # noqa: E402

APPROVER = "approver@example.com"
HOOK = "https://93.184.216.34/hooks/revops"
# Where gdb stops revopsd after the handler's breakpoint: as the handler
# returns (a function called through a pointer, so never inlined), or
# once the request's answer is made (the pipeline clears the thread's
# trace context last, after the answer's commit).
HANDLER_RETURNED = "finish"
ANSWERED = ['eval "break trace_set thread %d", $_thread', "continue"]
GDB = ["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set confirm off",
       "-ex", "handle SIGPIPE SIGUSR1 SIGUSR2 SIGALRM SIGTERM SIGINT nostop noprint pass"]


class CrashTest(unittest.TestCase):
    def setUp(self):
        if not shutil.which("gdb"):
            self.fail("gdb is required (scripts/install-deps.sh installs it)")
        self.sim, self.srv, self.pf = pmssim.start_for_decisions(self, APPROVER)
        self.tok = self.pf.token

    def post(self, path, body, key, timeout=10.0):
        return self.srv.request("POST", path, body=body, token=self.tok, portfolio=self.pf.id,
                                headers={"Idempotency-Key": key}, timeout=timeout)

    def crash_during(self, function, then, path, body, key):
        """Restarts the server under gdb, posts body to path under key, and
        lets gdb kill revopsd where the gdb commands then stop it after
        function (the handler) was called; then starts it again."""
        self.srv.stop()
        script = ["-ex", "break " + function, "-ex", "run"]
        for cmd in then:
            script += ["-ex", cmd]
        script += ["-ex", "kill", "-ex", "quit"]
        self.srv.start(wrap=GDB + script + ["--args"])
        answer = {}

        def post():
            try:
                answer["r"] = self.post(path, body, key, timeout=60.0)
            except OSError as e:  # the connection dies with the server
                answer["error"] = e
        t = threading.Thread(target=post)
        t.start()
        rc = self.srv.wait_exit(120)
        t.join(60)
        self.assertIsNotNone(rc, "gdb did not stop revopsd at %s" % function)
        self.assertNotIn("r", answer, "the client got an answer before the crash: %r" % answer)
        self.srv.start()

    def hooks(self):
        r = self.srv.request("GET", "/v2/webhooks?limit=100", token=self.tok,
                             portfolio=self.pf.id)
        self.assertEqual(r.status, 200, r)
        return [s for s in r.body["data"] if s["url"] == HOOK]

    def test_crash_before_the_commit_writes_nothing(self):
        body = {"url": HOOK, "events": ["rate.decision.published"]}
        self.crash_during("webhook_h_create_v2", [HANDLER_RETURNED], "/v2/webhooks", body,
                          "hook-before")
        self.assertEqual(self.hooks(), [], "a write without its key's answer was committed")
        # the claim stays until its lease ends (API-CONTRACT §3: 409 while
        # the first request may still run); nothing was written meanwhile
        r = self.post("/v2/webhooks", body, "hook-before")
        harness.assert_error(self, r, 409, "SVC-IDEMPOTENCY-IN-PROGRESS")
        self.assertEqual(self.hooks(), [])

    def test_crash_after_the_commit_replays(self):
        body = {"url": HOOK, "events": ["rate.decision.reverted"]}
        self.crash_during("webhook_h_create_v2", ANSWERED, "/v2/webhooks", body, "hook-after")
        made = self.hooks()
        self.assertEqual(len(made), 1, made)
        r = self.post("/v2/webhooks", body, "hook-after")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.headers.get("Idempotent-Replayed"), "true", r)
        self.assertEqual(r.body["data"]["id"], made[0]["id"])
        self.assertEqual(len(self.hooks()), 1)

    def test_decision_crash_after_its_record_replays(self):
        props = [p["id"] for p in self.pf.properties]
        body = rate_decision_body(props, self.pf.ceiling["id"], APPROVER)
        self.crash_during("rate_decision_h_create", [HANDLER_RETURNED], "/v2/rate-decisions",
                          body, "rd-1")
        r = self.srv.request("GET", "/v2/rate-decisions", token=self.tok, portfolio=self.pf.id)
        self.assertEqual(r.status, 200, r)
        made = r.body["data"]
        self.assertEqual([d["status"] for d in made], ["published"], made)
        r = self.post("/v2/rate-decisions", body, "rd-1")
        self.assertEqual(r.status, 201, r)
        self.assertEqual(r.headers.get("Idempotent-Replayed"), "true", r)
        self.assertEqual(r.body["data"]["id"], made[0]["id"])
        r = self.srv.request("GET", "/v2/rate-decisions", token=self.tok, portfolio=self.pf.id)
        self.assertEqual(len(r.body["data"]), 1, r)
        # the PMS got one write per property: the retry wrote nothing
        self.assertEqual(len(self.sim.written()), len(props), self.sim.written())


if __name__ == "__main__":
    unittest.main()
