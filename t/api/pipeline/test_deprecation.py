"""Deprecation registry: X-Service-Deprecated, Deprecation (RFC 9745), Sunset (RFC 8594)."""

import calendar
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import add_months, assert_success, imf_fixdate, parse_rfc3339  # noqa: E402

DEPRECATION_HEADERS = ("X-Service-Deprecated", "Deprecation", "Sunset")
SUNSET_MONTHS = {"enterprise": 18, "group": 12, "chain_starter": 12}


def expected(announced, plan):
    at = parse_rfc3339(announced)
    return "@%d" % calendar.timegm(at.utctimetuple()), imf_fixdate(add_months(at, SUNSET_MONTHS[
        plan]))


class DeprecationTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.ent = cls.srv.seed_portfolio("enterprise", 2)
        cls.grp = cls.srv.seed_portfolio("group", 2)
        cls.cs = cls.srv.seed_portfolio("chain_starter", 1)
        for pf in (cls.ent, cls.grp, cls.cs):
            pf.token

    def assert_not_deprecated(self, r):
        for h in DEPRECATION_HEADERS:
            self.assertNotIn(h, r.headers, "%s on a route that is not deprecated: %r" % (h, r))

    def deprecate(self, method, route, announced, note=None):
        args = ["deprecation", "add", "--method", method, "--route", route,
                "--announced", announced]
        if note:
            args += ["--note", note]
        out = self.srv.ctl(*args)
        self.assertEqual(out.get("method"), method)
        self.assertEqual(out.get("route"), route)
        self.assertEqual(parse_rfc3339(out["announced_at"]), parse_rfc3339(announced))
        return out

    def wait_deprecated(self, pf, path):
        def flagged():
            r = pf.get(path)
            self.assertEqual(r.status, 200, r)
            return r if "X-Service-Deprecated" in r.headers else None
        return harness.wait_until(flagged, 5.0, interval=0.05,
                                  what="X-Service-Deprecated on %s" % path)

    def test_deprecation_headers(self):
        ent_path = "/v2/portfolios/%s" % self.ent.id
        # before: nothing on the route
        self.assert_not_deprecated(self.ent.get(ent_path))

        announced = "2026-06-01T00:00:00Z"
        self.deprecate("GET", "/v2/portfolios/{id}", announced, note="use /v3")
        r = self.wait_deprecated(self.ent, ent_path)
        assert_success(self, r)
        dep, sunset = expected(announced, "enterprise")
        self.assertEqual(dep, "@1780272000")
        self.assertEqual(sunset, "Wed, 01 Dec 2027 00:00:00 GMT")
        self.assertEqual(r.headers["X-Service-Deprecated"], "true")
        self.assertEqual(r.headers["Deprecation"], dep)
        self.assertEqual(r.headers["Sunset"], sunset)

        # group and chain_starter: twelve months after the announcement
        for pf in (self.grp, self.cs):
            r = pf.get("/v2/portfolios/%s" % pf.id)
            assert_success(self, r)
            dep, sunset = expected(announced, pf.plan)
            self.assertEqual(r.headers.get("X-Service-Deprecated"), "true", r)
            self.assertEqual(r.headers.get("Deprecation"), dep, r)
            self.assertEqual(r.headers.get("Sunset"), sunset, r)
        self.assertEqual(expected(announced, "group")[1], "Tue, 01 Jun 2027 00:00:00 GMT")

        # other routes (and other methods on the route) are not deprecated
        for path in ("/v2/portfolios", "/v2/portfolios/%s/properties" % self.ent.id):
            r = self.ent.get(path)
            assert_success(self, r)
            self.assert_not_deprecated(r)
        for path in ("/healthz", "/readyz", "/v2/openapi.json"):
            r = self.srv.request("GET", path)
            self.assertEqual(r.status, 200, r)
            self.assert_not_deprecated(r)
        r = self.srv.request("DELETE", ent_path, token=self.ent.token, portfolio=self.ent.id)
        self.assertEqual(r.status, 405, r)
        self.assert_not_deprecated(r)

        # a second deprecation, announced mid-day, keeps the time of day
        announced2 = "2026-08-15T13:45:10Z"
        self.deprecate("GET", "/v2/portfolios/{id}/properties", announced2)
        props_path = "/v2/portfolios/%s/properties" % self.ent.id
        r = self.wait_deprecated(self.ent, props_path)
        dep, sunset = expected(announced2, "enterprise")
        self.assertEqual(sunset, "Tue, 15 Feb 2028 13:45:10 GMT")
        self.assertEqual(r.headers["X-Service-Deprecated"], "true")
        self.assertEqual(r.headers["Deprecation"], dep)
        self.assertEqual(r.headers["Sunset"], sunset)
        r = self.grp.get("/v2/portfolios/%s/properties" % self.grp.id)
        self.assertEqual(r.headers.get("Sunset"), expected(announced2, "group")[1], r)
        self.assertEqual(expected(announced2, "group")[1], "Sun, 15 Aug 2027 13:45:10 GMT")
        # the first one is still there; unrelated routes still clean
        r = self.ent.get(ent_path)
        self.assertEqual(r.headers.get("Deprecation"), "@1780272000", r)
        self.assert_not_deprecated(self.ent.get("/v2/portfolios"))

    def test_bad_deprecation_input_refused(self):
        for args in (["--method", "GET", "--route", "/v2/portfolios/{id}",
                      "--announced", "June 2026"],
                     ["--method", "GET", "--route", "/v2/portfolios/{id}"]):
            p = self.srv.ctl_raw("deprecation", "add", *args)
            self.assertNotEqual(p.returncode, 0, args)
            self.assertIn(b'"error"', p.stderr)


if __name__ == "__main__":
    harness.run_main()
