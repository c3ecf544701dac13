"""sso.user.provisioned / sso.user.deprovisioned are written to the
transactional outbox with the state change that causes them, and only
then.  Observed with `revopsctl event list` (the outbox as operators see
it): delivery to subscribers comes with the webhooks feature."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import SCIM_USER_URN, assert_scim_ok, saml_grant, scim_patch_body  # noqa: E402
from scim_idp_case import ScimIdpCase  # noqa: E402

PUBLIC_URL = "http://sp.test"


class SsoEventsTest(ScimIdpCase):
    PUBLIC_URL = PUBLIC_URL
    ENTITY = "https://events-idp.example/saml"
    PLAN = "group"
    PROPERTIES = 2

    def events(self, after=0):
        return self.srv.ctl("event", "list", "--portfolio", self.pf.id, "--after", str(after))

    def last_seq(self):
        ev = self.events()
        return ev[-1]["seq"] if ev else 0

    def test_scim_create_and_delete(self):
        seq = self.last_seq()
        u = assert_scim_ok(self, self.scim("POST", "/Users", {
            "schemas": [SCIM_USER_URN], "userName": "ev-create@x.example"}), 201)
        ev = self.events(seq)
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual(ev[0]["type"], "sso.user.provisioned")
        self.assertEqual(ev[0]["surface"], "v2")
        self.assertEqual(ev[0]["properties"], [])
        self.assertEqual(ev[0]["data"], {"user_id": u["id"], "user_name": "ev-create@x.example",
                                         "via": "scim"})
        self.assertTrue(ev[0]["id"].startswith("evt_"))
        # a refused create (same userName, other case) changes nothing
        seq = ev[0]["seq"]
        r = self.scim("POST", "/Users", {"schemas": [SCIM_USER_URN],
                                         "userName": "EV-CREATE@x.example"})
        self.assertEqual(r.status, 409, r)
        self.assertEqual(self.events(seq), [])
        self.assertEqual(self.scim("DELETE", "/Users/" + u["id"]).status, 204)
        ev = self.events(seq)
        self.assertEqual([e["type"] for e in ev], ["sso.user.deprovisioned"])
        self.assertEqual(ev[0]["data"], {"user_id": u["id"], "user_name": "ev-create@x.example",
                                         "via": "scim", "revoked_tokens": 0})

    def test_deactivation_counts_revoked_tokens(self):
        name = "ev-tokens@x.example"
        u = assert_scim_ok(self, self.scim("POST", "/Users", {
            "schemas": [SCIM_USER_URN], "userName": name}), 201)
        for _ in range(2):
            r = saml_grant(self.srv, self.idp.assertion(name))
            self.assertEqual(r.status, 200, r)
        seq = self.last_seq()
        r = self.scim("PATCH", "/Users/" + u["id"], scim_patch_body(
            {"op": "replace", "value": {"active": False}}))
        self.assertEqual(r.status, 204, r)
        ev = self.events(seq)
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual(ev[0]["type"], "sso.user.deprovisioned")
        self.assertEqual(ev[0]["data"]["revoked_tokens"], 2)
        self.assertEqual(ev[0]["data"]["via"], "scim")
        # a second deactivation is no transition: no event
        seq = ev[0]["seq"]
        r = self.scim("PATCH", "/Users/" + u["id"], scim_patch_body(
            {"op": "replace", "path": "active", "value": False}))
        self.assertEqual(r.status, 204, r)
        self.assertEqual(self.events(seq), [])

    def test_saml_jit_provisioning(self):
        seq = self.last_seq()
        r = saml_grant(self.srv, self.idp.assertion("ev-jit@x.example", roles=["ops-manager"]))
        self.assertEqual(r.status, 200, r)
        ev = self.events(seq)
        self.assertEqual(len(ev), 1, ev)
        self.assertEqual(ev[0]["type"], "sso.user.provisioned")
        self.assertEqual(ev[0]["data"]["user_name"], "ev-jit@x.example")
        self.assertEqual(ev[0]["data"]["via"], "saml_jit")
        # a second login of the same user provisions nothing
        seq = ev[0]["seq"]
        r = saml_grant(self.srv, self.idp.assertion("ev-jit@x.example", roles=["ops-manager"]))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(self.events(seq), [])


if __name__ == "__main__":
    unittest.main()
