"""Per-portfolio and per-address rate limiting (429, Retry-After, headers)."""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import assert_common_headers, assert_error, assert_success  # noqa: E402


# The allowance is per rolling minute; a server that counts it in sub-second
# buckets may round "back in 60 s" up to 61.
MAX_WAIT_S = 61


def remaining(r):
    return int(r.headers["X-Service-Ratelimit-Remaining"])


def reset(r):
    return int(r.headers["X-Service-Ratelimit-Reset"])


def retry_after(tc, r):
    v = r.headers.get("Retry-After")
    tc.assertIsNotNone(v, "429 without Retry-After: %r" % (r,))
    tc.assertRegex(v.strip(), r"^[0-9]+$")
    n = int(v)
    tc.assertGreaterEqual(n, 1)
    tc.assertLessEqual(n, MAX_WAIT_S)
    return n


class PortfolioRateLimitTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The override is written before the first start, so the server never
        # saw the plan's figure for this portfolio.
        cls.srv = harness.Server(start=False)
        try:
            cls.pf = cls.srv.seed_portfolio("chain_starter", 1)
            cls.other = cls.srv.seed_portfolio("chain_starter", 1)
            out = cls.srv.ctl("portfolio", "set-rate-limit", "--portfolio", cls.pf.id,
                              "--per-minute", "20")
            cls.override = out
            cls.srv.start()
            cls.pf.token
            cls.other.token
        except BaseException:
            cls.srv.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.srv.close()

    def test_override_and_exhaustion(self):
        self.assertEqual(self.override.get("portfolio_id"), self.pf.id)
        self.assertEqual(self.override.get("rate_limit_per_minute"), 20)
        path = "/v2/portfolios/%s" % self.pf.id
        seen = []
        with self.srv.client() as c:
            for i in range(20):
                r = c.request("GET", path, token=self.pf.token, portfolio=self.pf.id)
                assert_success(self, r)
                seen.append(remaining(r))
                self.assertLessEqual(reset(r), MAX_WAIT_S)
            self.assertEqual(seen, list(range(19, -1, -1)))
            self.assertGreaterEqual(reset(r), 1)

            r = c.request("GET", path, token=self.pf.token, portfolio=self.pf.id)
            assert_error(self, r, 429, "SVC-RATE-LIMITED")
            self.assertEqual(remaining(r), 0)
            self.assertGreaterEqual(reset(r), 1)
            self.assertLessEqual(reset(r), MAX_WAIT_S)
            first_retry = retry_after(self, r)

            # refused calls do not count: still 0 (never negative), and the
            # wait does not grow with every refusal
            for _ in range(5):
                r = c.request("GET", path, token=self.pf.token, portfolio=self.pf.id)
                assert_error(self, r, 429, "SVC-RATE-LIMITED")
                self.assertEqual(r.headers["X-Service-Ratelimit-Remaining"].strip(), "0")
                self.assertLessEqual(retry_after(self, r), first_retry)

            # every v2 route shares the portfolio's allowance
            r = c.request("GET", "/v2/portfolios/%s/properties" % self.pf.id,
                          token=self.pf.token, portfolio=self.pf.id)
            assert_error(self, r, 429, "SVC-RATE-LIMITED")

            # another portfolio is unaffected
            r = c.request("GET", "/v2/portfolios/%s" % self.other.id, token=self.other.token,
                          portfolio=self.other.id)
            assert_success(self, r)
            self.assertGreater(remaining(r), 20)

        # raising the override takes effect without a restart, within ~1 s
        out = self.srv.ctl("portfolio", "set-rate-limit", "--portfolio", self.pf.id,
                           "--per-minute", "1000")
        self.assertEqual(out.get("rate_limit_per_minute"), 1000)
        t0 = time.monotonic()

        def passes():
            resp = self.srv.request("GET", path, token=self.pf.token, portfolio=self.pf.id)
            self.assertIn(resp.status, (200, 429), resp)
            return resp if resp.status == 200 else None
        r = harness.wait_until(passes, 1.5, interval=0.05, what="raised override to apply")
        took = time.monotonic() - t0
        assert_success(self, r)
        self.assertGreaterEqual(remaining(r), 0)
        self.assertLessEqual(took, 1.5)

    def test_clear_override(self):
        path = "/v2/portfolios/%s" % self.other.id
        self.srv.ctl("portfolio", "set-rate-limit", "--portfolio", self.other.id,
                     "--per-minute", "10")

        def at_override():
            r = self.other.get(path)
            assert_success(self, r)
            return r if remaining(r) < 10 else None
        harness.wait_until(at_override, 1.5, interval=0.05, what="override of 10")

        out = self.srv.ctl("portfolio", "set-rate-limit", "--portfolio", self.other.id,
                           "--per-minute", "0")
        self.assertEqual(out.get("portfolio_id"), self.other.id)
        self.assertIn("rate_limit_per_minute", out)
        # back to the plan's figure: chain_starter allows 500 a minute

        def at_plan_figure():
            r = self.other.get("/v2/portfolios/%s" % self.other.id)
            assert_success(self, r)
            return r if 400 < remaining(r) < 500 else None
        harness.wait_until(at_plan_figure, 1.5, interval=0.05, what="plan figure")

    def test_bad_override_values(self):
        for bad in ("-1", "abc"):
            p = self.srv.ctl_raw("portfolio", "set-rate-limit", "--portfolio", self.pf.id,
                                 "--per-minute", bad)
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertIn(b'"error"', p.stderr)


class AnonymousRateLimitTest(unittest.TestCase):
    def test_per_address_limit(self):
        with harness.Server(["--anon-rate-limit", "5"]) as srv:
            seen = []
            for _ in range(5):
                r = srv.request("GET", "/healthz")
                self.assertEqual(r.status, 200, r)
                assert_common_headers(self, r)
                seen.append(remaining(r))
            self.assertEqual(seen, [4, 3, 2, 1, 0])
            r = srv.request("GET", "/healthz")
            assert_error(self, r, 429, "SVC-RATE-LIMITED")
            retry_after(self, r)
            self.assertEqual(remaining(r), 0)
            # an invalid token is no way around the per-address limit
            r = srv.request("GET", "/v2/portfolios", token="garbage", portfolio="pf_x")
            assert_error(self, r, 429, "SVC-RATE-LIMITED")
            retry_after(self, r)


if __name__ == "__main__":
    harness.run_main()
