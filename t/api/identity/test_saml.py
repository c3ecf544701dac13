"""SAML 2.0 bearer grant (RFC 7522) on POST /oauth/token.

A test IdP (idp.py: openssl + xmlsec1) signs assertions; revopsctl idp set
makes a portfolio trust it.  The server runs with --public-url http://sp.test,
so the expected Audience is http://sp.test/saml/sp and the Recipient
http://sp.test/oauth/token.  Covers: logins of SCIM-provisioned and unknown
(just-in-time) subjects, property narrowing, every refusal (400 invalid_grant),
replay, inactive users, revocation on deprovisioning, client authentication
and issuer lookup.
"""

import datetime
import itertools
import os
import sys
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import idp as idplib  # noqa: E402
from harness import (SCIM_USER_URN, assert_error, assert_oauth_error,  # noqa: E402
                     assert_scim_list, assert_scim_ok, assert_success, idp_set,
                     saml_grant, scim_patch_body, scim_request, scim_token_for)

PUBLIC_URL = "http://sp.test"
AUDIENCE = PUBLIC_URL + "/saml/sp"
RECIPIENT = PUBLIC_URL + "/oauth/token"
ENTITY_A = "https://idp-a.example/saml/metadata"
ENTITY_B = "https://idp-b.example/saml/metadata"
ENTITY_SHARED = "https://shared-idp.example/saml"
ENTITY_CUSTOM = "https://custom-roles-idp.example/saml"
TOKEN_KEYS = {"access_token", "token_type", "expires_in", "scope", "portfolio_id",
              "property_codes"}
_seq = itertools.count(1)


def subject(prefix="user"):
    return "%s-%d-%s@corp.example" % (prefix, next(_seq), uuid.uuid4().hex[:6])


def secs(n):
    return idplib.now_utc() + datetime.timedelta(seconds=n)


class SamlGrantTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = harness.Server(["--public-url", PUBLIC_URL])
        cls.idps = []
        try:
            cls.a = cls.srv.seed_portfolio("enterprise", 3)
            cls.b = cls.srv.seed_portfolio("group", 2)
            cls.scim_a = scim_token_for(cls.srv, cls.a.id)
            cls.scim_b = scim_token_for(cls.srv, cls.b.id)
            cls.idp_a = cls.new_idp(ENTITY_A)
            cls.idp_b = cls.new_idp(ENTITY_B)
            # same entity id as A, another key: what an attacker would hold
            cls.idp_forged = cls.new_idp(ENTITY_A)
            cls.idp_set_a = idp_set(cls.srv, cls.a.id, ENTITY_A, cls.idp_a.cert_path)
            idp_set(cls.srv, cls.b.id, ENTITY_B, cls.idp_b.cert_path)
            # a privileged SCIM user that the attacks try to impersonate
            cls.admin_name = "admin@x.example"
            r = scim_request(cls.srv, "POST", "/Users", cls.scim_a, {
                "schemas": [SCIM_USER_URN], "userName": cls.admin_name,
                "roles": [{"value": "revenue-approver"}]})
            if r.status != 201:
                raise AssertionError("SCIM create failed: %r" % (r,))
        except BaseException:
            cls.cleanup_idps()
            cls.srv.cleanup()
            raise

    @classmethod
    def new_idp(cls, entity):
        i = idplib.IdP(entity, audience=AUDIENCE, recipient=RECIPIENT)
        cls.idps.append(i)
        return i

    @classmethod
    def cleanup_idps(cls):
        for i in cls.idps:
            i.cleanup()

    @classmethod
    def tearDownClass(cls):
        cls.cleanup_idps()
        cls.srv.close()

    # helpers -------------------------------------------------------------------------

    def scim(self, method, path, body=None, token=None, **kw):
        return scim_request(self.srv, method, path, token or self.scim_a, body, **kw)

    def scim_user(self, name=None, token=None, **attrs):
        body = {"schemas": [SCIM_USER_URN], "userName": name or subject("scim")}
        body.update(attrs)
        return assert_scim_ok(self, self.scim("POST", "/Users", body, token=token), 201)

    def find_user(self, name, token=None):
        res = assert_scim_list(self, self.scim("GET", "/Users", token=token, query={
            "filter": 'userName eq "%s"' % name}))
        self.assertLessEqual(len(res), 1, res)
        return res[0] if res else None

    def login(self, name, idp=None, scope=None, client=None, basic=True, **kw):
        """A successful grant for name; returns the token response body."""
        xml = (idp or self.idp_a).assertion(name, **kw)
        r = saml_grant(self.srv, xml, scope=scope, client=client, basic=basic)
        return self.check_token(r, self.a.id if idp in (None, self.idp_a) else None)

    def check_token(self, r, portfolio_id=None):
        self.assertEqual(r.status, 200, r)
        harness.assert_common_headers(self, r)
        self.assertIn("no-store", r.headers.get("Cache-Control", ""), r)
        body = r.body
        self.assertIsInstance(body, dict, r)
        self.assertEqual(set(body), TOKEN_KEYS, r)
        self.assertIsInstance(body["access_token"], str)
        self.assertGreaterEqual(len(body["access_token"]), 20)
        self.assertEqual(body["token_type"], "Bearer")
        self.assertEqual(body["expires_in"], 3600)
        self.assertIsInstance(body["scope"], str)
        self.assertIsInstance(body["property_codes"], list)
        if portfolio_id is not None:
            self.assertEqual(body["portfolio_id"], portfolio_id, r)
        return body

    def api(self, token, portfolio=None):
        return self.srv.request("GET", "/v2/portfolios", token=token,
                                portfolio=portfolio or self.a.id)

    def assert_works(self, token, portfolio=None):
        data, meta = assert_success(self, self.api(token, portfolio))
        self.assertEqual(meta["portfolio_id"], portfolio or self.a.id)

    def assert_revoked(self, token, portfolio=None):
        r = self.api(token, portfolio)
        assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")
        self.assertTrue(r.headers.get("WWW-Authenticate", "").startswith("Bearer"), r)

    def refused(self, xml=None, raw=None, client=None, what=""):
        r = saml_grant(self.srv, xml, raw_assertion=raw, client=client)
        assert_oauth_error(self, r, 400, "invalid_grant")
        self.assertNotIn("access_token", r.body, r)
        self.assertIsInstance(r.body.get("error_description"), str, r)
        self.assertTrue(r.body["error_description"], "%s: empty error_description" % what)
        return r

    def roles_of(self, scim_user):
        return sorted(x["value"] for x in scim_user.get("roles", []))

    # trust configuration -----------------------------------------------------------------

    def test_idp_set_prints_the_trust(self):
        self.assertEqual(self.idp_set_a, {"portfolio_id": self.a.id, "entity_id": ENTITY_A,
                                          "roles_attribute": "roles"})

    # successful logins ---------------------------------------------------------------

    def test_scim_user_logs_in_and_token_works(self):
        name = subject("scim")
        user = self.scim_user(name, roles=[{"value": "finance-operator"}])
        body = self.login(name, roles=["revenue-approver"], display_name="Ignored Name")
        self.assertEqual(sorted(body["property_codes"]), sorted(self.a.codes))
        self.assertFalse([s for s in body["scope"].split() if s.startswith("property:")])
        self.assert_works(body["access_token"])
        # the token is bound to its portfolio
        r = self.api(body["access_token"], self.b.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        # SCIM-provisioned users keep their SCIM roles
        got = assert_scim_ok(self, self.scim("GET", "/Users/" + user["id"]))
        self.assertEqual(self.roles_of(got), ["finance-operator"])
        # and no second user appeared
        self.assertEqual(self.find_user(name)["id"], user["id"])

    def test_nameid_matches_user_name_case_insensitively(self):
        name = subject("Mixed")
        user = self.scim_user(name)
        self.login(name.upper())
        self.assertEqual(self.find_user(name)["id"], user["id"])
        res = assert_scim_list(self, self.scim("GET", "/Users", query={
            "filter": 'userName co "%s"' % name.split("@")[0][6:]}))
        self.assertEqual([u["id"] for u in res], [user["id"]], "no duplicate JIT user")

    def test_base64url_with_and_without_padding(self):
        name = subject("pad")
        self.scim_user(name)
        for pad in (False, True):
            xml = self.idp_a.assertion(name)
            # make sure the padding question arises at all
            while len(xml) % 3 == 0:
                xml = self.idp_a.assertion(name, display_name="x" * (next(_seq) % 7))
            r = saml_grant(self.srv, xml, pad=pad)
            self.check_token(r, self.a.id)

    def test_unknown_subject_is_provisioned_just_in_time(self):
        name = subject("jit")
        self.assertIsNone(self.find_user(name))
        body = self.login(name, roles=["revenue-approver", "ops-manager"],
                          display_name="Jit Person")
        self.assert_works(body["access_token"])
        user = self.find_user(name)
        self.assertIsNotNone(user, "JIT user not visible over SCIM")
        self.assertTrue(user["id"].startswith("usr_"), user)
        self.assertEqual(user["userName"], name)
        self.assertIs(user["active"], True)
        self.assertEqual(user.get("displayName"), "Jit Person")
        self.assertEqual(self.roles_of(user), ["ops-manager", "revenue-approver"])
        listed = [u for u in self.srv.ctl("user", "list", "--portfolio", self.a.id)
                  if u["user_name"] == name]
        self.assertEqual(len(listed), 1, listed)
        self.assertEqual(listed[0]["id"], user["id"])
        self.assertIs(listed[0]["active"], True)
        self.assertEqual(sorted(listed[0]["roles"]), ["ops-manager", "revenue-approver"])
        # the JIT user is not in the other portfolio
        self.assertIsNone(self.find_user(name, token=self.scim_b))
        # roles follow the assertion on each login
        self.login(name, roles=["finance-operator"], display_name="Jit Person")
        user2 = self.find_user(name)
        self.assertEqual(user2["id"], user["id"])
        self.assertEqual(self.roles_of(user2), ["finance-operator"])

    def test_scope_narrows_to_a_property(self):
        name = subject("narrow")
        self.scim_user(name)
        code = self.a.codes[1]
        body = self.login(name, scope="property:" + code)
        self.assertEqual(body["property_codes"], [code])
        self.assertIn("property:" + code, body["scope"].split())
        tok = body["access_token"]
        self.assert_works(tok)
        path = "/v2/portfolios/%s/properties" % self.a.id
        data, _ = assert_success(self, self.srv.request("GET", path, token=tok,
                                                        portfolio=self.a.id))
        self.assertEqual([p["pms_property_code"] for p in data], [code])
        r = self.srv.request("GET", path, token=tok, portfolio=self.a.id,
                             property=self.a.properties[0]["id"])
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")
        body = self.login(name, scope="portfolios:read property:" + code)
        self.assertEqual(set(body["scope"].split()), {"portfolios:read", "property:" + code})
        self.assert_works(body["access_token"])

    def test_scope_outside_the_portfolio_is_invalid_scope(self):
        name = subject("scope")
        self.scim_user(name)
        for scope in ("property:" + self.b.codes[0], "property:ZZZ99", "bogus:scope"):
            r = saml_grant(self.srv, self.idp_a.assertion(name), scope=scope)
            assert_oauth_error(self, r, 400, "invalid_scope")

    def test_clock_skew_of_less_than_120s_is_tolerated(self):
        name = subject("skew")
        self.scim_user(name)
        self.login(name, not_before=secs(60), not_on_or_after=secs(600))
        self.login(name, not_before=secs(-600), not_on_or_after=secs(-60))

    # refusals ------------------------------------------------------------------------

    def test_missing_assertion_is_invalid_request(self):
        r = self.srv.request("POST", "/oauth/token", headers={
            "Content-Type": "application/x-www-form-urlencoded"},
            body="grant_type=" + harness.SAML_GRANT)
        assert_oauth_error(self, r, 400, "invalid_request")

    def test_expired(self):
        name = subject("exp")
        self.scim_user(name)
        self.refused(self.idp_a.assertion(name, not_before=secs(-900),
                                          not_on_or_after=secs(-300)), what="expired")
        # only the bearer confirmation expired
        self.refused(self.idp_a.assertion(name, not_on_or_after=secs(600),
                                          confirmation_not_on_or_after=secs(-300)),
                     what="confirmation expired")

    def test_not_yet_valid(self):
        name = subject("early")
        self.scim_user(name)
        self.refused(self.idp_a.assertion(name, not_before=secs(600),
                                          not_on_or_after=secs(1200)), what="not yet valid")

    def test_wrong_or_missing_audience(self):
        name = subject("aud")
        self.scim_user(name)
        for aud in ("http://sp.test/saml/other", "http://127.0.0.1/saml/sp",
                    "https://sp.test/saml/sp", RECIPIENT):
            self.refused(self.idp_a.assertion(name, audience=aud), what="audience " + aud)
        self.refused(self.idp_a.assertion(name, audience=None), what="no audience")

    def test_wrong_or_missing_recipient(self):
        name = subject("rcpt")
        self.scim_user(name)
        for rcpt in ("http://sp.test/oauth/other", AUDIENCE, "https://evil.example/oauth/token"):
            self.refused(self.idp_a.assertion(name, recipient=rcpt), what="recipient " + rcpt)
        self.refused(self.idp_a.assertion(name, recipient=None), what="no recipient")

    def test_wrong_issuer(self):
        name = subject("iss")
        self.scim_user(name)
        # an issuer nobody trusts
        self.refused(self.idp_a.assertion(name, issuer="https://unknown-idp.example"),
                     what="unknown issuer")
        # B's issuer, signed with A's key
        self.refused(self.idp_a.assertion(name, issuer=ENTITY_B), what="issuer/key mismatch")

    def test_replayed_assertion_is_refused(self):
        name = subject("replay")
        self.scim_user(name)
        xml = self.idp_a.assertion(name)
        first = saml_grant(self.srv, xml)
        self.check_token(first, self.a.id)
        self.refused(xml, what="replay")
        self.refused(xml, what="replay again")
        # the same ID in a freshly signed document is a replay as well
        aid = xml.split(b' ID="', 1)[1].split(b'"', 1)[0].decode()
        self.refused(self.idp_a.assertion(name, id=aid, display_name="different"),
                     what="same ID re-signed")
        # the first token still works
        self.assert_works(first.body["access_token"])

    def test_tampered_name_id(self):
        name = subject("tamper")
        self.scim_user(name)
        xml = self.idp_a.assertion(name)
        self.refused(idplib.replace_name_id(xml, name, self.admin_name), what="tampered NameID")
        # an untouched copy of the same document would have worked
        self.check_token(saml_grant(self.srv, xml), self.a.id)

    def evil(self, idp=None):
        return (idp or self.idp_a).build(self.admin_name, signature_template=False)

    def test_wrapping_unsigned_root_around_signed_assertion(self):
        name = subject("xsw")
        self.scim_user(name)
        signed = self.idp_a.assertion(name)
        self.refused(idplib.wrap_in_root(signed, self.evil()), what="XSW root")

    def test_wrapping_unsigned_assertion_in_advice(self):
        name = subject("xsw")
        self.scim_user(name)
        signed = self.idp_a.assertion(name)
        self.refused(idplib.nest_in_advice(signed, self.evil()), what="XSW advice")

    def test_wrapping_unsigned_assertion_in_signature_object(self):
        name = subject("xsw")
        self.scim_user(name)
        signed = self.idp_a.assertion(name)
        # the signature itself still verifies (the enveloped transform drops
        # the whole ds:Signature), so only structure can give it away
        doc = idplib.nest_in_signature_object(signed, self.evil())
        self.assertTrue(idplib.verify(doc, self.idp_a.cert_path), "fixture broken")
        self.refused(doc, what="XSW signature object")

    def test_missing_signature(self):
        name = subject("unsigned")
        self.scim_user(name)
        self.refused(self.idp_a.assertion(name, sign=False), what="unsigned")
        self.refused(self.idp_a.assertion(self.admin_name, sign=False), what="unsigned admin")
        # an unfilled signature template
        self.refused(self.idp_a.build(name).encode(), what="empty template")

    def test_signed_by_another_key(self):
        name = subject("forged")
        self.scim_user(name)
        self.refused(self.idp_forged.assertion(name), what="wrong key, embedded cert")
        self.refused(self.idp_forged.assertion(name, key_info=False), what="wrong key")

    def test_dtd_and_external_entities(self):
        name = subject("dtd")
        self.scim_user(name)
        for subset in ('<!ENTITY xxe SYSTEM "file:///etc/passwd">',
                       '<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">',
                       '<!ELEMENT saml:Assertion ANY>'):
            doc = idplib.with_doctype(self.idp_a.assertion(name), subset)
            self.assertTrue(idplib.verify(doc, self.idp_a.cert_path), "fixture broken")
            self.refused(doc, what="DTD " + subset)
        # an entity used inside the document
        xml = self.idp_a.assertion(name, display_name="__X__")
        doc = idplib.with_doctype(xml, '<!ENTITY xxe SYSTEM "file:///etc/hostname">')
        doc = doc.replace(b"__X__", b"&xxe;")
        self.refused(doc, what="external entity reference")

    def test_sha1_signature_is_refused(self):
        name = subject("sha1")
        self.scim_user(name)
        xml = self.idp_a.assertion(name, algorithm="sha1")
        self.assertIn(b"rsa-sha1", xml)
        self.assertTrue(idplib.verify(xml, self.idp_a.cert_path), "fixture broken")
        self.refused(xml, what="SHA-1")

    def test_comment_injected_name_id(self):
        raw = "admin@x.example<!---->.evil.example"
        xml = self.idp_a.assertion(raw, name_id_raw=True)
        self.assertTrue(idplib.verify(xml, self.idp_a.cert_path), "fixture broken")
        self.refused(xml, what="comment in NameID")
        self.assertIsNone(self.find_user("admin@x.example.evil.example"))

    def test_bearer_confirmation_required(self):
        name = subject("conf")
        self.scim_user(name)
        self.refused(self.idp_a.assertion(name, bearer=False), what="no SubjectConfirmation")
        self.refused(self.idp_a.assertion(name, confirmation_method=idplib.HOLDER_OF_KEY),
                     what="holder-of-key only")

    def test_malformed_assertion_parameter(self):
        for raw in ("!!!not base64***", "a", "====", "YWJj%", "a b c"):
            self.refused(raw=raw, what="bad base64 %r" % raw)
        for doc in (b"hello, not xml", b"<saml:Assertion", b"<a></b>", b"\x00\x01\x02",
                    b"<?xml version=\"1.0\"?><root/>"):
            self.refused(doc, what="not an assertion %r" % doc)

    def test_refusals_do_not_provision(self):
        name = subject("noprov")
        self.refused(self.idp_a.assertion(name, audience="http://wrong/saml/sp"))
        self.refused(self.idp_forged.assertion(name))
        self.assertIsNone(self.find_user(name))

    # inactive users and deprovisioning ---------------------------------------------

    def test_inactive_user_cannot_log_in(self):
        name = subject("inactive")
        self.scim_user(name, active=False)
        self.refused(self.idp_a.assertion(name), what="created inactive")
        name2 = subject("inactive")
        u2 = self.scim_user(name2)
        self.login(name2)
        r = self.scim("PATCH", "/Users/" + u2["id"], scim_patch_body(
            {"op": "replace", "path": "active", "value": False}))
        self.assertEqual(r.status, 204, r)
        self.refused(self.idp_a.assertion(name2), what="deactivated")

    def test_scim_delete_revokes_every_token_of_the_user(self):
        name = subject("del")
        user = self.scim_user(name)
        other = subject("bystander")
        self.scim_user(other)
        t1 = self.login(name)["access_token"]
        t2 = self.login(name, scope="property:" + self.a.codes[0])["access_token"]
        t_other = self.login(other)["access_token"]
        for t in (t1, t2, t_other):
            self.assert_works(t)
        r = self.scim("DELETE", "/Users/" + user["id"])
        self.assertEqual(r.status, 204, r)
        self.assert_revoked(t1)
        self.assert_revoked(t2)
        # nobody else lost access
        self.assert_works(t_other)
        self.assert_works(self.a.token)
        # the next login provisions a new (JIT) user, with a new token
        t3 = self.login(name)["access_token"]
        self.assert_works(t3)
        self.assert_revoked(t1)
        self.assertNotEqual(self.find_user(name)["id"], user["id"])

    def test_deactivation_by_patch_revokes_and_reactivation_does_not_revive(self):
        name = subject("deact")
        user = self.scim_user(name)
        tok = self.login(name)["access_token"]
        self.assert_works(tok)
        r = self.scim("PATCH", "/Users/" + user["id"], scim_patch_body(
            {"op": "replace", "value": {"active": False}}))
        self.assertEqual(r.status, 204, r)
        self.assert_revoked(tok)
        self.refused(self.idp_a.assertion(name), what="inactive")
        r = self.scim("PATCH", "/Users/" + user["id"], scim_patch_body(
            {"op": "replace", "value": {"active": True}}))
        self.assertEqual(r.status, 204, r)
        self.assert_revoked(tok)
        new = self.login(name)["access_token"]
        self.assertNotEqual(new, tok)
        self.assert_works(new)
        self.assert_revoked(tok)

    def test_deactivation_by_put_revokes(self):
        name = subject("put")
        user = self.scim_user(name, displayName="Put Me")
        tok = self.login(name)["access_token"]
        self.assert_works(tok)
        r = self.scim("PUT", "/Users/" + user["id"], {
            "schemas": [SCIM_USER_URN], "userName": name, "displayName": "Put Me",
            "active": False})
        self.assertEqual(assert_scim_ok(self, r)["active"], False)
        self.assert_revoked(tok)
        self.refused(self.idp_a.assertion(name), what="inactive after PUT")

    def test_jit_user_can_be_deprovisioned(self):
        name = subject("jitdel")
        tok = self.login(name, roles=["ops-manager"])["access_token"]
        user = self.find_user(name)
        self.assertEqual(self.scim("DELETE", "/Users/" + user["id"]).status, 204)
        self.assert_revoked(tok)

    # client authentication and issuer lookup ---------------------------------------

    def test_client_authentication_selects_the_portfolio(self):
        name = subject("cli")
        self.scim_user(name)
        body = self.login(name, client=(self.a.client_id, self.a.client_secret))
        self.assertEqual(body["portfolio_id"], self.a.id)
        self.assert_works(body["access_token"])
        body = self.login(name, client=(self.a.client_id, self.a.client_secret), basic=False)
        self.assertEqual(body["portfolio_id"], self.a.id)

    def test_client_of_another_portfolio_is_refused(self):
        name = subject("cli")
        self.scim_user(name)
        # B's client, A's IdP: the issuer is not B's trusted IdP
        self.refused(self.idp_a.assertion(name), client=(self.b.client_id, self.b.client_secret),
                     what="client of B")
        self.assertIsNone(self.find_user(name, token=self.scim_b))
        # B's IdP with B's client works (JIT in B)
        body = self.check_token(saml_grant(self.srv, self.idp_b.assertion(name),
                                           client=(self.b.client_id, self.b.client_secret)),
                                self.b.id)
        self.assert_works(body["access_token"], self.b.id)
        self.assertIsNotNone(self.find_user(name, token=self.scim_b))

    def test_bad_client_credentials_are_invalid_client(self):
        name = subject("cli")
        self.scim_user(name)
        r = saml_grant(self.srv, self.idp_a.assertion(name),
                       client=(self.a.client_id, self.a.client_secret + "x"))
        assert_oauth_error(self, r, 401, "invalid_client")
        self.assertTrue(r.headers.get("WWW-Authenticate", "").startswith("Basic "), r)
        # the same bad secret in the body: 400, no challenge (RFC 6749 §5.2)
        r = saml_grant(self.srv, self.idp_a.assertion(name),
                       client=(self.a.client_id, self.a.client_secret + "x"), basic=False)
        assert_oauth_error(self, r, 400, "invalid_client")
        self.assertIsNone(r.headers.get("WWW-Authenticate"), r)

    def test_issuer_lookup_without_client(self):
        # B's IdP alone, no client: the portfolio is B's
        name = subject("lookup")
        body = self.check_token(saml_grant(self.srv, self.idp_b.assertion(name)), self.b.id)
        self.assertEqual(sorted(body["property_codes"]), sorted(self.b.codes))
        self.assert_works(body["access_token"], self.b.id)
        self.assertIsNone(self.find_user(name))
        self.assertIsNotNone(self.find_user(name, token=self.scim_b))


class SamlIssuerSharingTest(unittest.TestCase):
    """Two portfolios trusting the same IdP entity id; a custom roles attribute;
    the default public URL."""

    @classmethod
    def setUpClass(cls):
        cls.srv = harness.Server()
        cls.idp = None
        cls.idp2 = None
        try:
            base = cls.srv.base_url
            cls.audience, cls.recipient = base + "/saml/sp", base + "/oauth/token"
            cls.c = cls.srv.seed_portfolio("group", 1)
            cls.d = cls.srv.seed_portfolio("group", 1)
            cls.e = cls.srv.seed_portfolio("group", 1)
            cls.idp = idplib.IdP(ENTITY_SHARED, audience=cls.audience, recipient=cls.recipient)
            cls.idp2 = idplib.IdP(ENTITY_CUSTOM, audience=cls.audience,
                                  recipient=cls.recipient)
            idp_set(cls.srv, cls.c.id, ENTITY_SHARED, cls.idp.cert_path)
            idp_set(cls.srv, cls.d.id, ENTITY_SHARED, cls.idp.cert_path)
            out = idp_set(cls.srv, cls.e.id, ENTITY_CUSTOM, cls.idp2.cert_path,
                          roles_attribute="memberOf")
            if out.get("roles_attribute") != "memberOf":
                raise AssertionError("idp set --roles-attribute not echoed: %r" % (out,))
        except BaseException:
            for i in (cls.idp, cls.idp2):
                if i:
                    i.cleanup()
            cls.srv.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.idp.cleanup()
        cls.idp2.cleanup()
        cls.srv.close()

    def test_ambiguous_issuer_needs_client_authentication(self):
        name = subject("shared")
        r = saml_grant(self.srv, self.idp.assertion(name))
        assert_oauth_error(self, r, 400, "invalid_grant")
        self.assertIn("ambiguous issuer", r.body.get("error_description", ""), r)
        for pf in (self.c, self.d):
            r = saml_grant(self.srv, self.idp.assertion(name),
                           client=(pf.client_id, pf.client_secret))
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["portfolio_id"], pf.id)
            data, meta = assert_success(self, self.srv.request(
                "GET", "/v2/portfolios", token=r.body["access_token"], portfolio=pf.id))
            self.assertEqual(meta["portfolio_id"], pf.id)
        # E's client with the shared IdP: E does not trust it
        r = saml_grant(self.srv, self.idp.assertion(name),
                       client=(self.e.client_id, self.e.client_secret))
        assert_oauth_error(self, r, 400, "invalid_grant")

    def test_default_public_url_names_the_service(self):
        name = subject("default")
        r = saml_grant(self.srv, self.idp2.assertion(name))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body["portfolio_id"], self.e.id)
        r = saml_grant(self.srv, self.idp2.assertion(name, audience=AUDIENCE,
                                                     recipient=RECIPIENT))
        assert_oauth_error(self, r, 400, "invalid_grant")

    def test_custom_roles_attribute(self):
        name = subject("custom")
        xml = self.idp2.assertion(name, roles=["revenue-approver"],
                                  extra_attributes=[("memberOf", ["ops-manager"])])
        r = saml_grant(self.srv, xml)
        self.assertEqual(r.status, 200, r)
        users = [u for u in self.srv.ctl("user", "list", "--portfolio", self.e.id)
                 if u["user_name"] == name]
        self.assertEqual(len(users), 1, users)
        self.assertEqual(users[0]["roles"], ["ops-manager"])


if __name__ == "__main__":
    harness.run_main()
