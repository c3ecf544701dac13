"""GET /.well-known/oauth-authorization-server: RFC 8414 authorization
server metadata, and that what it advertises is what the token endpoint
really does."""

import json
import os
import sys
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import ALL_SCOPES, assert_common_headers, assert_error  # noqa: E402

WELL_KNOWN = "/.well-known/oauth-authorization-server"
SAML_GRANT = "urn:ietf:params:oauth:grant-type:saml2-bearer"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
# Every member the document has (RFC 8414 §2), and no other.
MEMBERS = {"issuer", "token_endpoint", "token_endpoint_auth_methods_supported",
           "grant_types_supported", "scopes_supported"}


class MetadataTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.a = cls.srv.seed_portfolio("enterprise", 2)

    def metadata(self, srv=None):
        r = (srv or self.srv).request("GET", WELL_KNOWN)
        self.assertEqual(r.status, 200, r)
        assert_common_headers(self, r)
        self.assertEqual(r.headers.get("Content-Type", "").split(";")[0].strip(),
                         "application/json", r)
        self.assertIsInstance(r.body, dict, r)
        return r.body

    def test_document(self):
        md = self.metadata()
        # a bare JSON object (RFC 8414 §3.2), not our envelope
        self.assertEqual(set(md), MEMBERS, md)
        self.assertEqual(md["issuer"], self.srv.base_url)
        self.assertEqual(md["token_endpoint"], self.srv.base_url + "/oauth/token")
        self.assertEqual(md["token_endpoint_auth_methods_supported"],
                         ["client_secret_basic", "client_secret_post"])
        self.assertEqual(md["grant_types_supported"], ["client_credentials", SAML_GRANT])
        self.assertEqual(len(md["scopes_supported"]), len(ALL_SCOPES))
        self.assertEqual(set(md["scopes_supported"]), ALL_SCOPES)

    def test_matches_openapi_document(self):
        # the served OpenAPI document describes this path with a schema the
        # live answer fits: the same members, every enum value allowed
        r = self.srv.request("GET", "/v2/openapi.json")
        self.assertEqual(r.status, 200)
        doc = r.body if isinstance(r.body, dict) else json.loads(r.raw)
        op = doc["paths"][WELL_KNOWN]["get"]
        self.assertEqual(op["security"], [])
        ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
        md = self.metadata()
        self.assertEqual(set(schema["properties"]), set(md))
        self.assertTrue(set(schema["required"]) <= set(md))
        for name, prop in schema["properties"].items():
            enum = prop.get("items", {}).get("enum")
            if enum:
                self.assertTrue(set(md[name]) <= set(enum), name)

    def test_no_authorization_endpoint_claims(self):
        # No grant uses an authorization endpoint, so authorization_endpoint
        # is absent (§2), and response_types_supported would be empty, which
        # §3.2 says to omit (zero-element claims MUST be omitted).
        md = self.metadata()
        for name in ("authorization_endpoint", "response_types_supported",
                     "response_modes_supported", "code_challenge_methods_supported",
                     "jwks_uri"):
            self.assertNotIn(name, md)
        for name, value in md.items():
            if isinstance(value, list):
                self.assertTrue(value, "%s is an empty array (RFC 8414 §3.2)" % name)

    def token_at(self, url, form, headers):
        """POST form to the absolute token_endpoint url of this server."""
        u = urllib.parse.urlsplit(url)
        self.assertEqual((u.scheme, u.hostname, u.port), ("http", "127.0.0.1", self.srv.port))
        h = dict(FORM)
        h.update(headers)
        return self.srv.request("POST", u.path, headers=h, body=urllib.parse.urlencode(form))

    def test_each_advertised_auth_method_works(self):
        md = self.metadata()
        cid, secret = self.a.client_id, self.a.client_secret
        for method in md["token_endpoint_auth_methods_supported"]:
            with self.subTest(method=method):
                form = [("grant_type", "client_credentials"), ("scope", "portfolios:read")]
                headers = {}
                if method == "client_secret_basic":
                    headers["Authorization"] = harness.basic_auth(cid, secret)
                else:
                    form += [("client_id", cid), ("client_secret", secret)]
                r = self.token_at(md["token_endpoint"], form, headers)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.body["token_type"], "Bearer")
                self.assertEqual(r.body["scope"], "portfolios:read")

    def test_advertised_scopes_are_grantable(self):
        md = self.metadata()
        r = self.srv.token(self.a.client_id, self.a.client_secret,
                           scope=" ".join(md["scopes_supported"]))
        self.assertEqual(r.status, 200, r)
        self.assertEqual(set(r.body["scope"].split()), set(md["scopes_supported"]))

    def test_advertised_grants_are_accepted(self):
        # each advertised grant gets past the grant_type check (a SAML grant
        # without an assertion is invalid_request, not unsupported)
        md = self.metadata()
        auth = {"Authorization": harness.basic_auth(self.a.client_id, self.a.client_secret)}
        for grant in md["grant_types_supported"]:
            with self.subTest(grant=grant):
                r = self.token_at(md["token_endpoint"], [("grant_type", grant)], auth)
                self.assertNotEqual(r.body.get("error"), "unsupported_grant_type", r)
        r = self.token_at(md["token_endpoint"], [("grant_type", "authorization_code")], auth)
        self.assertEqual(r.body.get("error"), "unsupported_grant_type", r)

    def test_public(self):
        # no token needed; a bearer token that means nothing is not looked at
        r = self.srv.request("GET", WELL_KNOWN, token="rvo_at_nothing")
        self.assertEqual(r.status, 200, r)

    def test_not_an_openid_provider(self):
        # We issue no ID tokens and have no authorization endpoint or JWKS,
        # so we publish no OpenID Connect discovery document
        # (docs/api-guide.md): its required members would be false.
        r = self.srv.request("GET", "/.well-known/openid-configuration")
        assert_error(self, r, 404, "SVC-NOT-FOUND")

    def test_other_methods(self):
        r = self.srv.request("POST", WELL_KNOWN, headers=FORM, body="x=1")
        assert_error(self, r, 405, "SVC-METHOD-NOT-ALLOWED")
        self.assertIn("GET", r.headers.get("Allow", ""), r)

    def test_head_like_get(self):
        r = self.srv.request("HEAD", WELL_KNOWN)
        if r.status == 405:
            self.skipTest("this build answers HEAD with 405 (HEAD support is separate work)")
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.raw, b"")
        get = self.srv.request("GET", WELL_KNOWN)
        self.assertEqual(r.headers.get("Content-Type"), get.headers.get("Content-Type"))


class PublicUrlTest(unittest.TestCase):
    """issuer and token_endpoint follow --public-url (a trailing slash is
    not part of the issuer, so token_endpoint has no '//')."""

    def check(self, public_url, issuer):
        with harness.Server(["--public-url", public_url]) as srv:
            r = srv.request("GET", WELL_KNOWN)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["issuer"], issuer)
            self.assertEqual(r.body["token_endpoint"], issuer + "/oauth/token")

    def test_public_url(self):
        self.check("https://api.revops.example", "https://api.revops.example")

    def test_trailing_slash(self):
        self.check("https://api.revops.example/", "https://api.revops.example")


if __name__ == "__main__":
    unittest.main()
