"""POST /oauth/token (client credentials) and bearer authentication on /v2."""

import os
import sys
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import (ALL_SCOPES, assert_common_headers, assert_error,  # noqa: E402
                     assert_oauth_error, assert_success, basic_auth)

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def other_id(pid):
    """A well-formed id of the same kind that names nothing (last digit changed)."""
    last = pid[-1]
    return pid[:-1] + ("1" if last != "1" else "2")


class OAuthTokenTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.a = cls.srv.seed_portfolio("enterprise", 5)
        cls.b = cls.srv.seed_portfolio("group", 2)
        cls.rates_only = cls.srv.create_client(cls.a.id, name="rates-only", scopes="rates:read")
        cls.two_props = cls.srv.create_client(cls.a.id, name="two-props",
                                              properties=",".join(cls.a.codes[:2]))

    def post_form(self, body, headers=None):
        h = dict(FORM)
        h.update(headers or {})
        return self.srv.request("POST", "/oauth/token", headers=h, body=body)

    def check_token_response(self, r, scopes, codes, portfolio_id):
        self.assertEqual(r.status, 200, r)
        assert_common_headers(self, r)
        self.assertIn("no-store", r.headers.get("Cache-Control", ""), r)
        body = r.body
        self.assertIsInstance(body, dict, r)
        self.assertEqual(set(body), {"access_token", "token_type", "expires_in", "scope",
                                     "portfolio_id", "property_codes"}, r)
        self.assertIsInstance(body["access_token"], str)
        self.assertGreaterEqual(len(body["access_token"]), 20)
        self.assertEqual(body["token_type"], "Bearer")
        self.assertEqual(body["expires_in"], 3600)
        self.assertEqual(body["portfolio_id"], portfolio_id)
        self.assertIsInstance(body["scope"], str)
        granted = body["scope"].split(" ")
        self.assertEqual(len(granted), len(set(granted)), "repeated scope items")
        perm = {s for s in granted if not s.startswith("property:")}
        self.assertEqual(perm, set(scopes), body["scope"])
        self.assertEqual(sorted(body["property_codes"]), sorted(codes))
        return body

    # successful grants -------------------------------------------------------------

    def test_basic_auth_all_scopes_and_properties(self):
        r = self.srv.token(self.a.client_id, self.a.client_secret, basic=True)
        body = self.check_token_response(r, ALL_SCOPES, self.a.codes, self.a.id)
        # no narrowing asked for: no property items in the granted scope
        self.assertFalse([s for s in body["scope"].split() if s.startswith("property:")])

    def test_body_auth(self):
        r = self.srv.token(self.a.client_id, self.a.client_secret, basic=False)
        self.check_token_response(r, ALL_SCOPES, self.a.codes, self.a.id)

    def test_tokens_are_distinct(self):
        t1 = self.srv.access_token(self.a.client_id, self.a.client_secret)
        t2 = self.srv.access_token(self.a.client_id, self.a.client_secret)
        self.assertNotEqual(t1, t2)

    def test_scope_narrowed_to_one_property(self):
        code = self.a.codes[0]
        r = self.srv.token(self.a.client_id, self.a.client_secret,
                           scope="portfolios:read property:%s" % code)
        body = self.check_token_response(r, {"portfolios:read"}, [code], self.a.id)
        self.assertEqual(body["property_codes"], [code])
        self.assertEqual(set(body["scope"].split()), {"portfolios:read", "property:" + code})

    def test_property_only_scope_keeps_all_permission_scopes(self):
        code = self.a.codes[1]
        r = self.srv.token(self.a.client_id, self.a.client_secret, scope="property:" + code)
        body = self.check_token_response(r, ALL_SCOPES, [code], self.a.id)
        self.assertIn("property:" + code, body["scope"].split())

    def test_permission_scopes_subset(self):
        r = self.srv.token(self.a.client_id, self.a.client_secret,
                           scope="rates:read portfolios:read")
        self.check_token_response(r, {"rates:read", "portfolios:read"}, self.a.codes, self.a.id)

    def test_client_limited_to_properties(self):
        c = self.two_props
        self.assertEqual(sorted(c["property_codes"]), sorted(self.a.codes[:2]))
        r = self.srv.token(c["client_id"], c["client_secret"])
        self.check_token_response(r, ALL_SCOPES, self.a.codes[:2], self.a.id)
        r = self.srv.token(c["client_id"], c["client_secret"],
                           scope="property:" + self.a.codes[3])
        assert_oauth_error(self, r, 400, "invalid_scope")

    def test_client_limited_to_scopes(self):
        c = self.rates_only
        self.assertIn("scopes", c, "revopsctl client create must print a scopes list: %r" % c)
        self.assertEqual(c["scopes"], ["rates:read"])
        r = self.srv.token(c["client_id"], c["client_secret"])
        self.check_token_response(r, {"rates:read"}, self.a.codes, self.a.id)
        r = self.srv.token(c["client_id"], c["client_secret"], scope="portfolios:read")
        assert_oauth_error(self, r, 400, "invalid_scope")

    # failures ---------------------------------------------------------------------------

    def assert_invalid_client(self, r, basic):
        """RFC 6749 §5.2: a client that tried the Authorization header gets
        401 with a Basic challenge; one that authenticated in the body (or
        not at all) gets 400 invalid_client with no challenge, so a
        client_secret_post library reports invalid_client, not a challenge."""
        if basic:
            assert_oauth_error(self, r, 401, "invalid_client")
            www = r.headers.get("WWW-Authenticate", "")
            self.assertTrue(www.startswith("Basic "), "401 without a Basic challenge: %r" % (r,))
            self.assertIn('realm="revops"', www)
        else:
            assert_oauth_error(self, r, 400, "invalid_client")
            self.assertIsNone(r.headers.get("WWW-Authenticate"),
                              "challenge for a client that authenticated in the body: %r" % (r,))
        self.assertNotIn("access_token", r.body)

    def test_wrong_secret(self):
        for basic in (True, False):
            with self.subTest(basic=basic):
                r = self.srv.token(self.a.client_id, self.a.client_secret + "x", basic=basic)
                self.assert_invalid_client(r, basic)
                r = self.srv.token(self.a.client_id, self.b.client_secret, basic=basic)
                self.assert_invalid_client(r, basic)

    def test_unknown_client(self):
        for basic in (True, False):
            with self.subTest(basic=basic):
                r = self.srv.token(other_id(self.a.client_id), self.a.client_secret, basic=basic)
                self.assert_invalid_client(r, basic)
                r = self.srv.token("nobody", "nothing", basic=basic)
                self.assert_invalid_client(r, basic)

    def test_body_auth_missing_or_oversized_secret(self):
        # a client_id without client_secret, and a secret over the cap: both
        # body authentication, so 400 without a challenge
        body = urllib.parse.urlencode({"grant_type": "client_credentials",
                                       "client_id": self.a.client_id})
        self.assert_invalid_client(self.post_form(body), basic=False)
        r = self.srv.token(self.a.client_id, "s" * 300, basic=False)
        self.assert_invalid_client(r, basic=False)

    def test_authorization_header_not_basic(self):
        # tried the Authorization header with another scheme: 401, and the
        # challenge names the scheme the token endpoint takes
        for value in ("Bearer abc", "Basic !!!!", "Basic " + "QUFB"):
            with self.subTest(value=value):
                r = self.post_form("grant_type=client_credentials", {"Authorization": value})
                self.assert_invalid_client(r, basic=True)

    def test_no_client_authentication(self):
        r = self.post_form("grant_type=client_credentials")
        self.assert_invalid_client(r, basic=False)

    def test_basic_and_body_auth_together(self):
        body = urllib.parse.urlencode({"grant_type": "client_credentials",
                                       "client_id": self.a.client_id,
                                       "client_secret": self.a.client_secret})
        r = self.post_form(body, {"Authorization": basic_auth(self.a.client_id,
                                                               self.a.client_secret)})
        assert_oauth_error(self, r, 400, "invalid_request")

    def test_missing_grant_type(self):
        r = self.srv.token(self.a.client_id, self.a.client_secret, grant_type=None)
        assert_oauth_error(self, r, 400, "invalid_request")

    def test_unknown_grant_type(self):
        for gt in ("password", "authorization_code", "bogus"):
            r = self.srv.token(self.a.client_id, self.a.client_secret, grant_type=gt)
            assert_oauth_error(self, r, 400, "unsupported_grant_type")

    def test_unknown_scope(self):
        for scope in ("bogus:scope", "portfolios:read portfolios:write", "PORTFOLIOS:READ"):
            r = self.srv.token(self.a.client_id, self.a.client_secret, scope=scope)
            assert_oauth_error(self, r, 400, "invalid_scope")

    def test_property_the_client_lacks(self):
        for code in (self.b.codes[0], "ZZZ99"):
            r = self.srv.token(self.a.client_id, self.a.client_secret,
                               scope="portfolios:read property:%s" % code)
            assert_oauth_error(self, r, 400, "invalid_scope")

    def test_repeated_form_parameter(self):
        for body in ("grant_type=client_credentials&grant_type=client_credentials",
                     "grant_type=client_credentials&scope=rates:read&scope=portfolios:read"):
            r = self.post_form(body, {"Authorization": basic_auth(self.a.client_id,
                                                                   self.a.client_secret)})
            assert_oauth_error(self, r, 400, "invalid_request")

    def test_non_form_content_type(self):
        auth = {"Authorization": basic_auth(self.a.client_id, self.a.client_secret)}
        r = self.srv.request("POST", "/oauth/token", headers=dict(auth),
                             body={"grant_type": "client_credentials"})
        assert_oauth_error(self, r, 400, "invalid_request")
        r = self.srv.request("POST", "/oauth/token",
                             headers=dict(auth, **{"Content-Type": "text/plain"}),
                             body="grant_type=client_credentials")
        assert_oauth_error(self, r, 400, "invalid_request")


class BearerAuthTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.a = cls.srv.seed_portfolio("enterprise", 3)
        cls.b = cls.srv.seed_portfolio("group", 2)
        cls.a.token
        cls.b.token
        _, cls.rates_token = cls.srv.client_token(cls.a.id, "rates:read", name="rates")

    def routes(self, pf):
        return ["/v2/portfolios", "/v2/portfolios/%s" % pf,
                "/v2/portfolios/%s/properties" % pf]

    def assert_401(self, r):
        assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")
        www = r.headers.get("WWW-Authenticate", "")
        self.assertTrue(www.startswith("Bearer"), r)
        self.assertIn('realm="revops"', www)

    def test_no_authorization(self):
        for path in self.routes(self.a.id):
            self.assert_401(self.srv.request("GET", path))
            self.assert_401(self.srv.request("GET", path, portfolio=self.a.id))

    def test_garbage_token(self):
        for tok in ("garbage", "x" * 64, self.a.token + "x", self.a.token[:-1]):
            self.assert_401(self.srv.request("GET", "/v2/portfolios", token=tok,
                                             portfolio=self.a.id))

    def test_wrong_scheme(self):
        for auth in (basic_auth(self.a.client_id, self.a.client_secret),
                     "Token " + self.a.token, "Bearer", "Bearer  "):
            r = self.srv.request("GET", "/v2/portfolios", portfolio=self.a.id,
                                 headers={"Authorization": auth})
            self.assert_401(r)

    def test_bearer_scheme_case_insensitive(self):
        r = self.srv.request("GET", "/v2/portfolios", portfolio=self.a.id,
                             headers={"Authorization": "bearer " + self.a.token})
        assert_success(self, r)

    def test_valid_token(self):
        for path in self.routes(self.a.id):
            data, meta = assert_success(self, self.a.get(path))
            self.assertEqual(meta["portfolio_id"], self.a.id)

    def test_missing_portfolio_header(self):
        for path in self.routes(self.a.id):
            r = self.srv.request("GET", path, token=self.a.token)
            assert_error(self, r, 400, "SVC-PORTFOLIO-REQUIRED")

    def test_other_portfolio_in_header(self):
        for path in self.routes(self.a.id) + self.routes(self.b.id):
            r = self.srv.request("GET", path, token=self.a.token, portfolio=self.b.id)
            assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_unknown_portfolio_in_header(self):
        r = self.srv.request("GET", "/v2/portfolios", token=self.a.token,
                             portfolio=other_id(self.a.id))
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_other_portfolio_in_path(self):
        for path in ["/v2/portfolios/%s" % self.b.id, "/v2/portfolios/%s/properties" % self.b.id]:
            r = self.srv.request("GET", path, token=self.a.token, portfolio=self.a.id)
            assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_unknown_portfolio_in_path_is_indistinguishable(self):
        ghost = other_id(self.b.id)
        for path in ["/v2/portfolios/%s" % ghost, "/v2/portfolios/%s/properties" % ghost]:
            r = self.srv.request("GET", path, token=self.a.token, portfolio=self.a.id)
            assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_missing_scope(self):
        for path in self.routes(self.a.id):
            r = self.srv.request("GET", path, token=self.rates_token, portfolio=self.a.id)
            assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")

    def test_token_is_not_reusable_across_portfolios(self):
        # B's own token works for B; A's token never does
        assert_success(self, self.b.get("/v2/portfolios/%s" % self.b.id))
        r = self.srv.request("GET", "/v2/portfolios/%s" % self.b.id, token=self.a.token,
                             portfolio=self.b.id)
        assert_error(self, r, 403, "SVC-AUTH-INSUFFICIENT-ROLE")


class TokenExpiryTest(unittest.TestCase):
    def test_token_expires_after_ttl(self):
        with harness.Server(["--token-ttl", "2"]) as srv:
            pf = srv.seed_portfolio("group", 1)
            r = srv.token(pf.client_id, pf.client_secret)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body["expires_in"], 2)
            tok = r.body["access_token"]
            issued = time.monotonic()
            assert_success(self, srv.request("GET", "/v2/portfolios", token=tok,
                                             portfolio=pf.id))

            def expired():
                resp = srv.request("GET", "/v2/portfolios", token=tok, portfolio=pf.id)
                if resp.status == 200:
                    return None
                return resp
            r = harness.wait_until(expired, 10.0, interval=0.1, what="token expiry")
            waited = time.monotonic() - issued
            assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")
            self.assertTrue(r.headers.get("WWW-Authenticate", "").startswith("Bearer"))
            self.assertGreater(waited, 1.0, "token died long before its 2 s lifetime")
            # a fresh token works again
            assert_success(self, srv.request("GET", "/v2/portfolios", portfolio=pf.id,
                                             token=srv.access_token(pf.client_id,
                                                                    pf.client_secret)))


if __name__ == "__main__":
    harness.run_main()
