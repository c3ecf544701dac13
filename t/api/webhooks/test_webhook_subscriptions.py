"""Webhook subscriptions (API-CONTRACT §5): v1 secrets per subscription,
v2 secret per portfolio (returned when made or rotated), https-only public
targets (SSRF guard at subscription time), mirrors on Enterprise only,
scope and portfolio isolation, and secrets sealed at rest (a copy of the
database alone does not contain them).  Public numeric addresses are used
so that nothing depends on DNS; nothing connects at subscription time."""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import assert_error, assert_success  # noqa: E402

SECRET_RE = re.compile(r"^whsec_[A-Za-z0-9+/]{43}=$")
PUBLIC = "https://93.184.216.34/hooks/revops"
PUBLIC2 = "https://8.8.4.4:8443/mirror"


class WebhookSubscriptionsTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.ent = cls.srv.seed_portfolio("enterprise", 1)
        cls.grp = cls.srv.seed_portfolio("group", 1)

    def post(self, seed, path, body, **kw):
        kw.setdefault("token", seed.token)
        kw.setdefault("portfolio", seed.id)
        return self.srv.request("POST", path, body=body, **kw)

    def test_v1_secret_per_subscription(self):
        seen = set()
        for _ in range(2):
            r = self.post(self.grp, "/v1/webhooks", {"url": PUBLIC, "events": ["rate.suggested"],
                                                      "description": "PMS bridge"})
            assert_success(self, r, 201, v2=False)
            d = r.body["data"]
            self.assertTrue(d["id"].startswith("wh_"))
            self.assertEqual(d["surface"], "v1")
            self.assertEqual(d["status"], "enabled")
            self.assertIsNone(d["mirror_url"])
            self.assertRegex(d["signing_secret"], SECRET_RE)
            seen.add(d["signing_secret"])
            got = self.grp.get("/v2/webhooks/" + d["id"])
            assert_success(self, got)
            self.assertNotIn("signing_secret", got.body["data"])
            self.assertEqual(got.body["data"]["events"], ["rate.suggested"])
        self.assertEqual(len(seen), 2)

    def test_v2_secret_per_portfolio_and_rotation(self):
        seed = self.srv.seed_portfolio("chain_starter", 1)
        first = self.post(seed, "/v2/webhooks", {"url": PUBLIC, "events": ["rate.decision.published"]})
        assert_success(self, first, 201)
        secret = first.body["data"]["signing_secret"]
        self.assertRegex(secret, SECRET_RE)
        second = self.post(seed, "/v2/webhooks", {"url": PUBLIC, "events": ["sso.user.provisioned"]})
        assert_success(self, second, 201)
        self.assertIsNone(second.body["data"]["signing_secret"])
        rot = self.post(seed, "/v2/webhooks/signing-secret/rotate", None)
        assert_success(self, rot, 200)
        self.assertRegex(rot.body["data"]["signing_secret"], SECRET_RE)
        self.assertNotEqual(rot.body["data"]["signing_secret"], secret)
        # sealed at rest: neither secret is in the database file
        db = self.srv.db.contents()
        for s in (secret, rot.body["data"]["signing_secret"]):
            self.assertNotIn(s.encode(), db)
            self.assertNotIn(s[6:].encode(), db)
        self.assertEqual(os.stat(os.path.join(self.srv.data_dir, "revops.key")).st_mode & 0o777,
                         0o600)

    def test_idempotent_create_stores_no_plaintext_secret(self):
        # A replay returns the stored answer (secret included: the same
        # response, by the Idempotency-Key contract), but what is stored for
        # the replay is sealed: the secret is nowhere in the database files.
        seed = self.srv.seed_portfolio("group", 1)
        hdr = {"Idempotency-Key": "create-hook-1"}
        body = {"url": PUBLIC, "events": ["rate.suggested"]}
        first = self.post(seed, "/v1/webhooks", body, headers=hdr)
        assert_success(self, first, 201, v2=False)
        again = self.post(seed, "/v1/webhooks", body, headers=hdr)
        self.assertEqual(again.status, 201, again)
        self.assertEqual(again.headers.get("Idempotent-Replayed"), "true")
        self.assertEqual(again.body["data"]["id"], first.body["data"]["id"])
        secret = first.body["data"]["signing_secret"]
        blob = self.srv.db.contents()
        self.assertNotIn(secret[6:].encode(), blob)

    def test_list_get_delete(self):
        seed = self.srv.seed_portfolio("group", 1)
        ids = []
        for ev in ("rate.decision.published", "rate.decision.reverted", "sso.user.deprovisioned"):
            r = self.post(seed, "/v2/webhooks", {"url": PUBLIC, "events": [ev]})
            assert_success(self, r, 201)
            ids.append(r.body["data"]["id"])
        page = seed.get("/v2/webhooks?limit=2")
        assert_success(self, page)
        self.assertEqual([s["id"] for s in page.body["data"]], ids[:2])
        nxt = seed.get("/v2/webhooks?limit=2&cursor=" + page.body["meta"]["next_cursor"])
        self.assertEqual([s["id"] for s in nxt.body["data"]], ids[2:])
        self.assertIsNone(nxt.body["meta"]["next_cursor"])
        r = self.srv.request("DELETE", "/v2/webhooks/" + ids[0], token=seed.token,
                             portfolio=seed.id)
        self.assertEqual(r.status, 204, r)
        assert_error(self, seed.get("/v2/webhooks/" + ids[0]), 404, "SVC-NOT-FOUND")
        r = self.srv.request("DELETE", "/v2/webhooks/" + ids[0], token=seed.token,
                             portfolio=seed.id)
        assert_error(self, r, 404, "SVC-NOT-FOUND")
        self.assertNotIn(ids[0], [s["id"] for s in seed.get("/v2/webhooks").body["data"]])
        # another portfolio's subscription
        assert_error(self, self.ent.get("/v2/webhooks/" + ids[1]), 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_validation(self):
        cases = [
            ({"url": "http://93.184.216.34/x", "events": ["rate.decision.published"]}, "url"),
            ({"url": "https://127.0.0.1/x", "events": ["rate.decision.published"]}, "url"),
            ({"url": "https://169.254.169.254/latest", "events": ["rate.decision.published"]}, "url"),
            ({"url": "https://10.1.2.3/x", "events": ["rate.decision.published"]}, "url"),
            ({"url": "https://[::1]/x", "events": ["rate.decision.published"]}, "url"),
            ({"url": "https://localhost/x", "events": ["rate.decision.published"]}, "url"),
            ({"url": PUBLIC, "events": ["rate.suggested"]}, "events[0]"),      # a v1 type on v2
            ({"url": PUBLIC, "events": []}, "events"),
            ({"url": PUBLIC, "events": ["sso.user.provisioned", "sso.user.provisioned"]}, "events[1]"),
            ({"url": PUBLIC, "events": ["rate.decision.published"], "secret": "x"}, "secret"),
        ]
        for body, field in cases:
            with self.subTest(body=body):
                r = self.post(self.grp, "/v2/webhooks", body)
                assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
                self.assertIn(field, [d["field"] for d in r.body["error"]["details"]], r)
        r = self.post(self.grp, "/v1/webhooks", {"url": PUBLIC, "events": ["rate.decision.published"]})
        assert_error(self, r, 400, "SVC-VALIDATION-FAILED")

    def test_mirror_enterprise_only(self):
        body = {"url": PUBLIC, "mirror_url": PUBLIC2, "events": ["rate.decision.published"]}
        assert_error(self, self.post(self.grp, "/v2/webhooks", body), 403,
                     "SVC-PLAN-FEATURE-UNAVAILABLE")
        r = self.post(self.ent, "/v2/webhooks", body)
        assert_success(self, r, 201)
        self.assertEqual(r.body["data"]["mirror_url"], PUBLIC2)
        bad = dict(body, mirror_url="https://192.168.1.1/siem")
        assert_error(self, self.post(self.ent, "/v2/webhooks", bad), 400, "SVC-VALIDATION-FAILED")

    def test_scope_required(self):
        _, tok = self.srv.client_token(self.grp.id, "rates:read")
        r = self.post(self.grp, "/v2/webhooks", {"url": PUBLIC, "events": ["rate.decision.published"]},
                      token=tok)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")


class VerifySignatureCliTest(unittest.TestCase):
    def test_revopsctl_verifies_like_a_receiver(self):
        import hashlib
        import hmac
        import subprocess
        import tempfile
        srv = harness.Server()
        try:
            seed = srv.seed_portfolio("group", 1)
            r = srv.request("POST", "/v1/webhooks", body={"url": PUBLIC, "events": ["rate.suggested"]},
                            token=seed.token, portfolio=seed.id)
            secret = r.body["data"]["signing_secret"]
            body = b'{"id":"evt_1","type":"rate.suggested","data":{"x":"\xc5\xbc"}}'
            good = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            with tempfile.NamedTemporaryFile() as f:
                f.write(body)
                f.flush()
                bad = ("1" if good[0] == "0" else "0") + good[1:]  # one digit changed
                for sig, code in ((good, 0), (good.upper(), 0), (bad, 4)):
                    p = subprocess.run([harness.REVOPSCTL, "verify", "signature", "--secret", secret,
                                        "--body-file", f.name, "--signature", sig],
                                       capture_output=True, text=True, timeout=30)
                    self.assertEqual(p.returncode, code, p.stderr)
                    self.assertEqual(json.loads(p.stdout)["valid"], code == 0)
        finally:
            srv.close()


class PrivateTargetsAllowedTest(unittest.TestCase):
    def test_allow_private_targets(self):
        srv = harness.Server(["--allow-private-targets"])
        try:
            seed = srv.seed_portfolio("group", 1)
            r = srv.request("POST", "/v2/webhooks", body={"url": "https://127.0.0.1:8443/x",
                                                          "events": ["rate.decision.published"]},
                            token=seed.token, portfolio=seed.id)
            assert_success(self, r, 201)
            r = srv.request("POST", "/v2/webhooks", body={"url": "http://127.0.0.1:8443/x",
                                                          "events": ["rate.decision.published"]},
                            token=seed.token, portfolio=seed.id)
            assert_error(self, r, 400, "SVC-VALIDATION-FAILED")  # still https only
        finally:
            srv.close()


if __name__ == "__main__":
    unittest.main()
