"""Envelope, request ids, routing errors, health, metrics and OpenAPI."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import (DATETIME_RE, REQUEST_ID_RE, assert_common_headers,  # noqa: E402
                     assert_error, assert_success)

PROPS_ROUTE = "/v2/portfolios/{id}/properties"
SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def parse_metrics(text):
    """Prometheus text format → list of (name, {label: value}, float)."""
    out = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line.strip())
        if not m:
            raise AssertionError("not a Prometheus sample line: %r" % line)
        labels = {}
        if m.group(2):
            pos = 0
            body = m.group(2).rstrip(",")
            for lm in LABEL_RE.finditer(body):
                if lm.start() != pos:
                    raise AssertionError("bad label set in %r" % line)
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
            if pos != len(body):
                raise AssertionError("bad label set in %r" % line)
        out.append((m.group(1), labels, float(m.group(3))))
    return out


class EnvelopeTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.pf = cls.srv.seed_portfolio("enterprise", 5)
        cls.pf.token

    def get(self, path, **kw):
        return self.pf.get(path, **kw)

    # 1. envelope and ids ------------------------------------------------------

    def test_invalid_utf8_in_path_is_a_clean_404(self):
        # A path that is not valid UTF-8 once decoded is echoed in the
        # message as '?' (never a 500, always valid JSON).
        for path in ("/v2/%ff%fe", "/nothing%22%5C%01%c3%28", "/scim/v2/x%ff"):
            with self.subTest(path=path):
                r = self.srv.request("GET", path)
                self.assertEqual(r.status, 404, r)
                self.assertIsInstance(r.body, dict, r)

    def test_v2_success_envelope(self):
        r = self.get("/v2/portfolios/%s" % self.pf.id)
        data, meta = assert_success(self, r)
        self.assertEqual(meta["portfolio_id"], self.pf.id)
        self.assertEqual(data["id"], self.pf.id)
        self.assertRegex(data["created_at"], DATETIME_RE)
        self.assertIn("application/json", r.headers.get("Content-Type", ""))

    def test_list_envelope_has_next_cursor(self):
        data, meta = assert_success(self, self.get("/v2/portfolios/%s/properties" % self.pf.id))
        self.assertIsInstance(data, list)
        self.assertIn("next_cursor", meta)
        for p in data:
            self.assertRegex(p["created_at"], DATETIME_RE)

    def test_request_ids_unique_per_response(self):
        seen = set()
        for path in ["/healthz", "/healthz", "/nope", "/v2/portfolios"]:
            rid = assert_common_headers(self, self.srv.request("GET", path))
            self.assertNotIn(rid, seen)
            seen.add(rid)
        with self.srv.client() as c:
            for _ in range(3):
                rid = assert_common_headers(self, c.request("GET", "/healthz"))
                self.assertNotIn(rid, seen)
                seen.add(rid)

    def test_malformed_client_request_id_is_replaced(self):
        # A well-formed client id is honoured (t/api/http/test_http_conventions.py);
        # one that is not (spaces, a quote, over 128 characters) gets a req_ id.
        for bad in ("not a valid id", 'quote"d', "x" * 129):
            r = self.srv.request("GET", "/healthz", headers={"X-Request-Id": bad})
            self.assertEqual(r.status, 200, r)
            self.assertRegex(r.headers["X-Request-Id"], REQUEST_ID_RE)

    def test_401_error_envelope(self):
        r = self.srv.request("GET", "/v2/portfolios")
        assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")
        self.assertIn("application/json", r.headers.get("Content-Type", ""))

    # 2. routes ------------------------------------------------------------------

    def test_unknown_path_404(self):
        assert_error(self, self.srv.request("GET", "/nope"), 404, "SVC-NOT-FOUND")
        assert_error(self, self.srv.request("GET", "/"), 404, "SVC-NOT-FOUND")
        assert_error(self, self.get("/v2/no-such-collection"), 404, "SVC-NOT-FOUND")
        assert_error(self, self.get("/v2/portfolios/%s/no-such-thing" % self.pf.id), 404,
                     "SVC-NOT-FOUND")

    def allow_set(self, r):
        allow = r.headers.get("Allow")
        self.assertIsNotNone(allow, "405 without Allow: %r" % (r,))
        return {m.strip().upper() for m in allow.split(",") if m.strip()}

    def test_wrong_method_405_with_allow(self):
        r = self.srv.request("DELETE", "/v2/portfolios", token=self.pf.token,
                             portfolio=self.pf.id)
        assert_error(self, r, 405, "SVC-METHOD-NOT-ALLOWED")
        allowed = self.allow_set(r)
        self.assertIn("GET", allowed)
        self.assertNotIn("DELETE", allowed)

        r = self.srv.request("POST", "/v2/portfolios/%s/properties" % self.pf.id, body={},
                             token=self.pf.token, portfolio=self.pf.id)
        assert_error(self, r, 405, "SVC-METHOD-NOT-ALLOWED")
        self.assertIn("GET", self.allow_set(r))
        self.assertNotIn("POST", self.allow_set(r))

    def test_wrong_method_on_public_routes(self):
        for method, path, allowed in [("POST", "/healthz", "GET"), ("PUT", "/readyz", "GET"),
                                      ("GET", "/oauth/token", "POST"),
                                      ("DELETE", "/v2/openapi.json", "GET")]:
            r = self.srv.request(method, path, body=b"" if method != "GET" else None)
            assert_error(self, r, 405, "SVC-METHOD-NOT-ALLOWED")
            got = self.allow_set(r)
            self.assertIn(allowed, got, path)
            self.assertNotIn(method, got, path)

    # 3. health and metrics --------------------------------------------------------

    def test_healthz(self):
        r = self.srv.request("GET", "/healthz")
        self.assertEqual(r.status, 200, r)
        assert_common_headers(self, r)
        self.assertEqual(r.body, {"status": "ok"})

    def test_readyz(self):
        r = self.srv.request("GET", "/readyz")
        self.assertEqual(r.status, 200, r)
        assert_common_headers(self, r)
        self.assertEqual(r.body, {"status": "ready"})

    def metrics(self):
        r = self.srv.request("GET", "/metrics")
        self.assertEqual(r.status, 200, r)
        assert_common_headers(self, r)
        self.assertTrue(r.headers.get("Content-Type", "").startswith("text/plain"), r)
        self.assertIsInstance(r.raw, bytes)
        return parse_metrics(r.raw.decode("utf-8"))

    @staticmethod
    def value(samples, name, labels):
        vals = [v for n, l, v in samples if n == name and l == labels]
        if len(vals) > 1:
            raise AssertionError("duplicate series %s%r" % (name, labels))
        return vals[0] if vals else 0.0

    def test_metrics_count_requests_and_durations(self):
        key = {"route": PROPS_ROUTE, "method": "GET", "status": "200"}
        before = self.metrics()
        n0 = self.value(before, "revops_http_requests_total", key)
        c0 = self.value(before, "revops_http_request_duration_seconds_count", key)
        calls = 4
        for _ in range(calls):
            self.assertEqual(self.get("/v2/portfolios/%s/properties" % self.pf.id).status, 200)
        # an error on the same route is a different series
        r = self.get("/v2/portfolios/%s/properties?limit=0" % self.pf.id)
        self.assertEqual(r.status, 400, r)

        after = self.metrics()
        self.assertEqual(self.value(after, "revops_http_requests_total", key), n0 + calls)
        self.assertEqual(self.value(after, "revops_http_requests_total",
                                    dict(key, status="400")) >= 1, True)
        count = self.value(after, "revops_http_request_duration_seconds_count", key)
        self.assertEqual(count, c0 + calls)
        total = self.value(after, "revops_http_request_duration_seconds_sum", key)
        self.assertGreater(total, 0.0)
        buckets = sorted(
            ((float("inf") if l["le"] == "+Inf" else float(l["le"])), v)
            for n, l, v in after
            if n == "revops_http_request_duration_seconds_bucket" and "le" in l
            and {k: x for k, x in l.items() if k != "le"} == key)
        self.assertGreaterEqual(len(buckets), 2, "no duration buckets for %r" % key)
        self.assertEqual(buckets[-1][0], float("inf"))
        self.assertEqual(buckets[-1][1], count)
        for (_, a), (_, b) in zip(buckets, buckets[1:]):
            self.assertLessEqual(a, b, "buckets not cumulative: %r" % buckets)

    def test_metrics_route_label_is_the_pattern(self):
        self.assertEqual(self.get("/v2/portfolios/%s/properties" % self.pf.id).status, 200)
        samples = self.metrics()
        routes = {l.get("route") for n, l, v in samples if n == "revops_http_requests_total"}
        self.assertIn(PROPS_ROUTE, routes)
        for rt in routes:
            self.assertNotIn(self.pf.id, rt or "", "raw id leaked into a route label")

    # 13. OpenAPI -------------------------------------------------------------------

    def test_openapi_document(self):
        r = self.srv.request("GET", "/v2/openapi.json")
        self.assertEqual(r.status, 200, r)
        assert_common_headers(self, r)
        self.assertIsInstance(r.body, dict, r)
        self.assertTrue(str(r.body.get("openapi", "")).startswith("3.1"), r.body.get("openapi"))
        self.assertIn("/v2/portfolios", r.body.get("paths", {}))
        self.assertIn("/v2/portfolios/{id}/properties", r.body.get("paths", {}))


if __name__ == "__main__":
    harness.run_main()
