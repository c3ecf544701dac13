"""HTTP conventions beyond the contract's envelope (issue 13, items 5, 7, 8;
docs/api-guide.md, "HTTP behaviour"):

- a body over 1 MiB sent without waiting for 100-continue (Content-Length
  and chunked, 1.05 and 4 MiB, and a slow sender) still gets its 413;
- HEAD on every GET route, with GET's status and headers and no body;
  Allow lists HEAD beside GET;
- a client's well-formed X-Request-Id is echoed (header, body, access log);
  a valid traceparent reaches the access log, the PMS writes and the
  webhook deliveries it causes; an invalid one is ignored;
- gzip for bodies of 1 KiB and more when Accept-Encoding allows it;
- ETag and If-None-Match -> 304 on v2 single-resource reads;
- X-Service-Ratelimit-Reset never above 60, RateLimit and RateLimit-Policy;
- Link rel="next" beside meta.next_cursor.
"""

import gzip
import http.client
import http.server
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import receiver  # noqa: E402
from harness import assert_error, assert_success, ctl_user, rate_decision_body  # noqa: E402

MIB = 1024 * 1024
TID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = "00-%s-00f067aa0ba902b7-01" % TID
TRACEPARENT_RE = re.compile(r"^00-%s-([0-9a-f]{16})-01$" % TID)
ETAG_RE = re.compile(r'^"[0-9a-f]{32}"$')


def big_post(port, size, chunked, rate=None, path="/v2/rate-decisions"):
    """Sends a POST with a body of size bytes without Expect: 100-continue,
    all of it before reading (as Python's http.client, Node's fetch or a
    proxy do), at rate bytes/s when given; returns (status, body) of the
    answer. A reset or broken pipe while sending is the defect: it raises."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        head = "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" % path
        head += ("Transfer-Encoding: chunked\r\n" if chunked else
                 "Content-Length: %d\r\n" % size) + "\r\n"
        s.sendall(head.encode())
        piece, sent, t0 = 64 * 1024, 0, time.monotonic()
        while sent < size:
            n = min(piece, size - sent)
            data = b"x" * n
            s.sendall(b"%x\r\n%s\r\n" % (n, data) if chunked else data)
            sent += n
            if rate:
                ahead = sent / rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
        if chunked:
            s.sendall(b"0\r\n\r\n")
        raw = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
        status, hdrs, body, _ = harness.parse_response(raw)
        return status, hdrs, body
    finally:
        s.close()


class ConventionsTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.pf = cls.srv.seed_portfolio("enterprise", 5)

    def get(self, path, **kw):
        return self.pf.get(path, **kw)

    # 413 before the body ------------------------------------------------------

    def test_413_without_expect_content_length_and_chunked(self):
        for size in (int(1.05 * MIB), 4 * MIB):
            for chunked in (False, True):
                status, hdrs, body = big_post(self.srv.port, size, chunked)
                self.assertEqual(status, 413, (size, chunked))
                self.assertEqual(json.loads(body)["error"]["code"], "SVC-PAYLOAD-TOO-LARGE")
                self.assertEqual(hdrs.get("Connection"), "close")

    def test_413_reaches_a_slow_sender(self):
        # 1.05 MiB at 400 KB/s takes ~2.8 s: longer than the old 2 s linger.
        status, _, body = big_post(self.srv.port, int(1.05 * MIB), False, rate=400000)
        self.assertEqual(status, 413)
        self.assertEqual(json.loads(body)["error"]["code"], "SVC-PAYLOAD-TOO-LARGE")

    def test_413_with_http_client(self):
        c = http.client.HTTPConnection("127.0.0.1", self.srv.port, timeout=30)
        try:
            c.request("POST", "/oauth/token", body=b"a" * (4 * MIB),
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
            r = c.getresponse()
            self.assertEqual(r.status, 413)
            self.assertIn(b"SVC-PAYLOAD-TOO-LARGE", r.read())
        finally:
            c.close()

    # HEAD ---------------------------------------------------------------------

    def check_head(self, path, **kw):
        g = self.get(path, **kw) if kw.get("token") else self.srv.request("GET", path, **kw)
        h = (self.srv.request("HEAD", path, **kw))
        self.assertEqual(h.status, g.status, path)
        self.assertEqual(h.raw, b"", path)
        self.assertEqual(int(h.headers["Content-Length"]), len(g.raw), path)
        skip = {"date", "x-request-id", "x-service-ratelimit-remaining", "ratelimit",
                "x-service-ratelimit-reset", "content-length"}
        self.assertEqual({k: v for k, v in h.headers.items() if k not in skip},
                         {k: v for k, v in g.headers.items() if k not in skip}, path)
        return h

    def test_head_on_get_routes(self):
        for path in ("/healthz", "/readyz", "/v2/openapi.json"):
            self.check_head(path)
        h = self.srv.request("HEAD", "/metrics")  # its body grows between requests
        self.assertEqual((h.status, h.raw), (200, b""))
        self.assertGreater(int(h.headers["Content-Length"]), 0)
        auth = {"token": self.pf.token, "portfolio": self.pf.id}
        for path in ("/v2/portfolios", "/v2/portfolios/%s" % self.pf.id,
                     "/v2/portfolios/%s/properties" % self.pf.id, "/v2/rate-decisions",
                     "/v2/webhooks"):
            self.check_head(path, **auth)
        h = self.srv.request("HEAD", "/v2/portfolios")
        self.assertEqual(h.status, 401)
        self.assertEqual(h.raw, b"")

    def test_allow_lists_head(self):
        r = self.srv.request("DELETE", "/healthz")
        assert_error(self, r, 405, "SVC-METHOD-NOT-ALLOWED")
        self.assertEqual(r.headers["Allow"], "GET, HEAD")
        r = self.srv.request("HEAD", "/oauth/token")
        self.assertEqual(r.status, 405)
        self.assertEqual(r.headers["Allow"], "POST")

    # X-Request-Id and traceparent -------------------------------------------------

    def access_line(self, rid):
        return harness.wait_until(
            lambda: next((e for e in self.srv.log_events()
                          if e.get("event") == "access" and e.get("request_id") == rid), None),
            5.0, what="the access log line of %s" % rid)

    def test_client_request_id_echoed(self):
        rid = "client-7f3a:req/9_~x"
        r = self.get("/v2/portfolios/%s" % self.pf.id, headers={"X-Request-Id": rid})
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.headers["X-Request-Id"], rid)
        self.assertEqual(r.body["meta"]["request_id"], rid)
        r = self.srv.request("GET", "/v2/portfolios", headers={"X-Request-Id": rid + "e"})
        self.assertEqual(r.status, 401, r)
        self.assertEqual(r.headers["X-Request-Id"], rid + "e")
        self.assertEqual(r.body["error"]["request_id"], rid + "e")
        self.assertEqual(self.access_line(rid)["status"], 200)
        r = self.srv.request("GET", "/healthz", headers={"X-Request-Id": "x" * 128})
        self.assertEqual(r.headers["X-Request-Id"], "x" * 128)

    def test_traceparent_in_access_log(self):
        r = self.srv.request("GET", "/healthz", headers={"traceparent": TRACEPARENT,
                                                         "X-Request-Id": "trace-log-1"})
        self.assertEqual(r.status, 200)
        line = self.access_line("trace-log-1")
        self.assertEqual(line["trace_id"], TID)
        self.assertEqual(line["parent_span_id"], "00f067aa0ba902b7")
        self.assertRegex(line["span_id"], r"^[0-9a-f]{16}$")
        self.assertNotEqual(line["span_id"], "00f067aa0ba902b7")
        for bad in ("00-%s-00f067aa0ba902b7-1" % TID, "00-%s-0000000000000000-01" % TID,
                    TRACEPARENT.upper(), "ff" + TRACEPARENT[2:]):
            r = self.srv.request("GET", "/healthz", headers={"traceparent": bad,
                                                             "X-Request-Id": "bad-tp"})
            self.assertEqual(r.status, 200)
            self.assertNotIn("trace_id", self.access_line("bad-tp"))

    # gzip ------------------------------------------------------------------------

    def test_gzip_openapi(self):
        plain = self.srv.request("GET", "/v2/openapi.json")
        self.assertNotIn("Content-Encoding", plain.headers)
        self.assertEqual(plain.headers["Vary"], "Accept-Encoding")
        z = self.srv.request("GET", "/v2/openapi.json",
                             headers={"Accept-Encoding": "br;q=1, gzip;q=0.8"})
        self.assertEqual(z.headers["Content-Encoding"], "gzip")
        self.assertEqual(z.headers["Vary"], "Accept-Encoding")
        self.assertLess(len(z.raw), len(plain.raw) // 4)
        self.assertEqual(gzip.decompress(z.raw), plain.raw)
        h = self.srv.request("HEAD", "/v2/openapi.json", headers={"Accept-Encoding": "gzip"})
        self.assertEqual(int(h.headers["Content-Length"]), len(z.raw))
        for refuse in ("gzip;q=0", "identity", "gzip;q=0.5, identity", "*;q=0, identity"):
            r = self.srv.request("GET", "/v2/openapi.json", headers={"Accept-Encoding": refuse})
            self.assertNotIn("Content-Encoding", r.headers, refuse)
            self.assertEqual(r.raw, plain.raw)

    def test_gzip_dynamic_and_small(self):
        path = "/v2/portfolios/%s/properties" % self.pf.id
        plain = self.get(path)
        self.assertGreaterEqual(len(plain.raw), 1024)
        z = self.get(path, headers={"Accept-Encoding": "gzip"})
        self.assertEqual(z.headers["Content-Encoding"], "gzip")
        body = json.loads(gzip.decompress(z.raw))
        self.assertEqual(body["data"], plain.body["data"])
        small = self.srv.request("GET", "/healthz", headers={"Accept-Encoding": "gzip"})
        self.assertNotIn("Content-Encoding", small.headers)
        self.assertNotIn("Vary", small.headers)

    # ETag and 304 ----------------------------------------------------------------

    def test_etag_and_304(self):
        path = "/v2/portfolios/%s" % self.pf.id
        a, b = self.get(path), self.get(path)
        self.assertRegex(a.headers["ETag"], ETAG_RE)
        self.assertEqual(a.headers["ETag"], b.headers["ETag"])  # request id aside
        tag = a.headers["ETag"]
        for inm in (tag, "W/" + tag, '"nope", ' + tag, "*"):
            r = self.get(path, headers={"If-None-Match": inm})
            self.assertEqual(r.status, 304, inm)
            self.assertEqual(r.raw, b"")
            self.assertEqual(r.headers["ETag"], tag)
            self.assertIn("X-Request-Id", r.headers)
            # RFC 9110 §15.4.5: no representation metadata (Prism's proxy
            # parsed the empty body as JSON when Content-Type was sent)
            self.assertNotIn("Content-Type", r.headers)
        for inm in ('"nope"', tag[1:-1], 'W/"x", "y"', ""):
            self.assertEqual(self.get(path, headers={"If-None-Match": inm}).status, 200, inm)
        h = self.srv.request("HEAD", path, token=self.pf.token, portfolio=self.pf.id,
                             headers={"If-None-Match": tag})
        self.assertEqual(h.status, 304)
        # lists carry none; another portfolio's id is refused as before
        self.assertNotIn("ETag", self.get("/v2/portfolios/%s/properties" % self.pf.id).headers)
        other = self.srv.seed_portfolio("group", 1)
        r = self.get("/v2/portfolios/%s" % other.id, headers={"If-None-Match": "*"})
        assert_error(self, r, 403)

    # rate-limit headers -------------------------------------------------------------

    def test_reset_bounded_and_ratelimit_headers(self):
        fresh = self.srv.seed_portfolio("chain_starter", 1)
        for i in range(3):
            r = fresh.get("/v2/portfolios/%s" % fresh.id)
            assert_success(self, r)
            reset = int(r.headers["X-Service-Ratelimit-Reset"])
            remaining = int(r.headers["X-Service-Ratelimit-Remaining"])
            self.assertTrue(1 <= reset <= 60, reset)
            self.assertEqual(r.headers["RateLimit-Policy"], '"portfolio";q=500;w=60')
            self.assertEqual(r.headers["RateLimit"],
                             '"portfolio";r=%d;t=%d' % (remaining, reset))
        r = self.srv.request("GET", "/healthz")
        self.assertTrue(r.headers["RateLimit-Policy"].startswith('"client";q='))

    # Link rel="next" ------------------------------------------------------------------

    def test_link_next(self):
        path = "/v2/portfolios/%s/properties?limit=2" % self.pf.id
        seen = []
        for _ in range(5):
            r = self.get(path)
            page, meta = assert_success(self, r)
            seen += [p["id"] for p in page]
            if meta["next_cursor"] is None:
                self.assertNotIn("Link", r.headers)
                break
            m = re.match(r'^<([^>]+)>; rel="next"$', r.headers["Link"])
            self.assertIsNotNone(m, r.headers["Link"])
            url = m.group(1)
            self.assertTrue(url.startswith(self.srv.base_url + "/v2/portfolios/"), url)
            self.assertIn("limit=2&", url)
            self.assertIn("cursor=", url)
            path = url[len(self.srv.base_url):]
        self.assertEqual(len(seen), 5)
        self.assertEqual(len(set(seen)), 5)


class _Pms(http.server.BaseHTTPRequestHandler):
    """A PMS answering every write with a receipt, recording its headers."""
    seen = []

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Pms.seen.append(dict((k.lower(), v) for k, v in self.headers.items()))
        body = json.dumps({"pms_ref": "ref-%d" % len(_Pms.seen), "previous_rate": None,
                           "at": "2026-11-26T10:00:00.000Z"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class TracePropagationTest(unittest.TestCase):
    """A rate decision made with a traceparent: each PMS write and the
    webhook delivery of its event carry the trace (new span ids)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="revops-trace-ca-")
        self.ca = receiver.TestCA(self.dir)
        self.rx = receiver.Receiver(self.ca)
        self.pms = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pms)
        threading.Thread(target=self.pms.serve_forever, daemon=True).start()
        self.srv = harness.Server(["--allow-private-targets", "--trust-ca", self.ca.ca_pem,
                                   "--pms-url", "http://127.0.0.1:%d" % self.pms.server_port])

    def tearDown(self):
        self.srv.close()
        self.rx.close()
        self.pms.shutdown()
        self.pms.server_close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_trace_reaches_pms_and_webhook(self):
        seed = self.srv.seed_portfolio("enterprise", 2)
        ctl_user(self.srv, seed.id, "approver@x.example", ["revenue-approver"])
        r = self.srv.request("POST", "/v2/webhooks", token=seed.token, portfolio=seed.id,
                             body={"url": self.rx.url("/trace"),
                                   "events": ["rate.decision.published"]})
        assert_success(self, r, 201)
        body = rate_decision_body([p["id"] for p in seed.properties], seed.ceiling["id"],
                                  "approver@x.example")
        r = self.srv.request("POST", "/v2/rate-decisions", body=body, token=seed.token,
                             portfolio=seed.id,
                             headers={"traceparent": TRACEPARENT, "X-Request-Id": "trace-rd"})
        self.assertEqual(r.status, 201, r)
        line = harness.wait_until(
            lambda: next((e for e in self.srv.log_events()
                          if e.get("request_id") == "trace-rd"), None), 5.0, what="access line")
        span = line["span_id"]
        writes = [h for h in _Pms.seen if "traceparent" in h]
        self.assertEqual(len(writes), 2, _Pms.seen)
        for h in writes:
            self.assertEqual(h["traceparent"], "00-%s-%s-01" % (TID, span))
        d = self.rx.wait_for(1, "/trace", timeout=15)[0]
        m = TRACEPARENT_RE.match(d.headers.get("traceparent", ""))
        self.assertIsNotNone(m, d.headers)
        self.assertNotIn(m.group(1), (span, "00f067aa0ba902b7"))
        # a request without one causes deliveries without one
        _Pms.seen.clear()
        body["proposed_rate"]["minor_units"] = 45000
        r = self.srv.request("POST", "/v2/rate-decisions", body=body, token=seed.token,
                             portfolio=seed.id)
        assert_success(self, r, 201)
        self.assertTrue(_Pms.seen and all("traceparent" not in h for h in _Pms.seen))
        d = self.rx.wait_for(2, "/trace", timeout=15)[1]
        self.assertNotIn("traceparent", d.headers)


if __name__ == "__main__":
    harness.run_main()
