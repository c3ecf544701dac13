"""The case table of the hostile-input suite (test_hostile.py).

Every case is a record: a category, a name, what is sent (raw bytes over a
fresh TCP connection, or for multi-step cases a `run` function) and what is
acceptable (an `Expect`).  Nothing here talks to the server at import time:
`build_cases(env)` makes the table once the suite has seeded its data, and
`execute(case, env)` runs one case and returns (problem or None, observed).

Acceptable outcomes, in the words of issue 11:
  - a 4xx in our envelope (the v2 error envelope, the SCIM error body on
    /scim/, the RFC 6749 error object on /oauth/token);
  - for framing errors, a 400 and then a closed connection, or a closed
    connection with no answer;
  - never a 5xx, never a 2xx for an attack, never an answer to a request
    pipelined after a refused one, never a hang past a bound (a timeout is a
    failure).

Python 3 standard library only.
"""

import base64
import copy
import json
import os
import select
import socket
import time
import urllib.parse

import harness
from harness import (SCIM_ERROR_URN, SCIM_GROUP_URN, SCIM_PATCH_URN, SCIM_USER_URN,
                     parse_response)

IO_TIMEOUT = 3.0        # answer or close within this (idle timeout is longer)
BIG_TIMEOUT = 10.0      # cases that upload a megabyte or more
SMUGGLE = b"GET /v2/smuggled-canary HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
PUBLIC_URL = "http://sp.test"
IDP_ENTITY = "https://idp-hostile.example/saml"
PUBLIC_HOOK = "https://93.184.216.34/hooks/revops"
PUBLIC_HOOK2 = "https://8.8.4.4:8443/mirror"


# ---------------------------------------------------------------------------
# one exchange over a raw socket

class Outcome:
    """What the server did with one case's bytes."""

    def __init__(self):
        self.responses = []     # (status, CIDict headers, body bytes)
        self.closed = False     # EOF or reset seen
        self.timed_out = False  # the deadline passed first
        self.elapsed = 0.0
        self.garbage = None     # bytes that are not an HTTP response
        self.partial = b""      # an incomplete response at close/timeout
        self.close_delimited = False


def _parse_all(buf, out):
    """Moves every complete response at the start of buf into out; returns
    what is left.  A response without Content-Length or chunked framing
    (libmicrohttpd's own error pages) is delimited by the close: all that
    follows is its body."""
    while buf:
        if out.close_delimited:
            st, h, body = out.responses[-1]
            out.responses[-1] = (st, h, body + buf)
            return b""
        try:
            p = parse_response(buf)
        except (ValueError, IndexError):
            out.garbage = buf[:120]
            return b""
        if p is None:
            return buf
        status, hdrs, body, buf = p
        out.responses.append((status, hdrs, body))
        if "content-length" not in hdrs and \
                "chunked" not in hdrs.get("transfer-encoding", "").lower():
            out.close_delimited = True
    return buf


def exchange(port, data, until_close, timeout=IO_TIMEOUT, shut_wr=False):
    """Sends data on a fresh connection while reading what comes back.

    until_close=False stops at the first complete response; True reads
    until the server closes (every response it sent is then in .responses).
    Sending stops early when the server closes or resets; a server that
    stops reading is caught by the deadline."""
    out = Outcome()
    t0 = time.monotonic()
    deadline = t0 + timeout
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setblocking(False)
    view = memoryview(data)
    sent = 0
    buf = b""
    try:
        if not data and shut_wr:
            s.shutdown(socket.SHUT_WR)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                out.timed_out = True
                break
            want_w = sent < len(data)
            r, w, _ = select.select([s], [s] if want_w else [], [], left)
            if r:
                try:
                    chunk = s.recv(262144)
                except BlockingIOError:
                    chunk = None
                except OSError:
                    chunk = b""
                if chunk == b"":
                    out.closed = True
                    break
                if chunk:
                    buf = _parse_all(buf + chunk, out)
                    if out.garbage is not None:
                        break
                    if out.responses and not until_close:
                        break
            if w and sent < len(data):
                try:
                    sent += s.send(view[sent:sent + 262144])
                except BlockingIOError:
                    pass
                except OSError:
                    sent = len(data)  # the server hung up; keep reading
                if sent >= len(data) and shut_wr:
                    try:
                        s.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
    finally:
        out.elapsed = time.monotonic() - t0
        out.partial = buf
        s.close()
    return out


# ---------------------------------------------------------------------------
# describing and judging outcomes

def response_code(resp):
    """A short label of a response body: the envelope's code, 'scim:<type>',
    an OAuth error, or the media type."""
    status, h, body = resp
    ct = (h.get("content-type") or "").lower()
    if "json" in ct:
        try:
            j = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return "bad-json"
        if isinstance(j, dict):
            e = j.get("error")
            if isinstance(e, dict):
                return str(e.get("code"))
            if isinstance(e, str):
                return "oauth:" + e
            if j.get("schemas") == [SCIM_ERROR_URN]:
                return "scim:%s" % j.get("scimType")
        return "json"
    return ct.split(";")[0].strip() or "no-content-type"


def describe(o):
    parts = ["%d %s" % (r[0], response_code(r)) for r in o.responses]
    s = " + ".join(parts) if parts else "no answer"
    if o.garbage is not None:
        s += ", then non-HTTP bytes %r" % o.garbage[:40]
    if o.closed:
        s += ", closed at %.2fs" % o.elapsed
    elif o.timed_out:
        s += ", still open at %.1fs" % o.elapsed
    if o.partial:
        s += ", partial %r" % o.partial[:40]
    return s


def envelope_problem(resp, kind, codes=None, field=None):
    """None when resp is a well-formed error body of the given kind."""
    status, h, body = resp
    ct = (h.get("content-type") or "").split(";")[0].strip().lower()
    try:
        j = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        j = None
    if kind == "svc":
        if ct != "application/json" or not isinstance(j, dict) or list(j) != ["error"]:
            return "not our error envelope (Content-Type %r, body %r)" % (ct, body[:80])
        e = j["error"]
        if not isinstance(e, dict) or not isinstance(e.get("code"), str) or \
                not e["code"].startswith("SVC-") or not isinstance(e.get("message"), str) or \
                not isinstance(e.get("request_id"), str):
            return "malformed error envelope %r" % (body[:120],)
        if e["request_id"] != h.get("x-request-id"):
            return "error.request_id differs from X-Request-Id"
        if codes and e["code"] not in codes:
            return "code %s, expected %s" % (e["code"], "/".join(codes))
        if field is not None and e["code"] == "SVC-VALIDATION-FAILED":
            fields = [d.get("field", "") for d in e.get("details") or [] if isinstance(d, dict)]
            if not any(f == field or f.startswith(field) or field.startswith(f + ".")
                       or field.startswith(f + "[") for f in fields):
                return "details name %r, not %r" % (fields[:5], field)
        return None
    if kind == "scim":
        if ct != "application/scim+json" or not isinstance(j, dict) or \
                j.get("schemas") != [SCIM_ERROR_URN] or j.get("status") != str(status):
            return "not a SCIM error body (Content-Type %r, body %r)" % (ct, body[:80])
        if codes and j.get("scimType") not in codes:
            return "scimType %r, expected %s" % (j.get("scimType"), "/".join(map(str, codes)))
        return None
    if kind == "oauth":
        if ct != "application/json" or not isinstance(j, dict) or \
                not isinstance(j.get("error"), str):
            return "not an RFC 6749 error (Content-Type %r, body %r)" % (ct, body[:80])
        if codes and j["error"] not in codes:
            return "error %s, expected %s" % (j["error"], "/".join(codes))
        return None
    return None


class Expect:
    until_close = False

    def check(self, o):
        raise NotImplementedError


def _first_problems(o):
    if o.garbage is not None:
        return "answered with non-HTTP bytes"
    if o.close_delimited and b"HTTP/1." in o.responses[-1][2]:
        return "a second response follows inside a close-delimited answer"
    if len(o.responses) > 1:
        return "%d responses: a request after the refused one was answered" % len(o.responses)
    return None


class Refuse(Expect):
    """One 4xx response (in `statuses` if given) in the `kind` envelope
    (svc, scim, oauth, or None for any body); close=True also requires the
    connection to be closed after it, with nothing more answered."""

    def __init__(self, statuses=None, kind="svc", codes=None, close=False, field=None):
        self.statuses = statuses
        self.kind = kind
        self.codes = codes
        self.close = close
        self.field = field
        self.until_close = close

    def check(self, o):
        p = _first_problems(o)
        if p:
            return p
        if not o.responses:
            if o.timed_out:
                return "no answer within %.0fs" % o.elapsed
            return "connection closed without an answer"
        st = o.responses[0][0]
        if st >= 500:
            return "server error %d" % st
        if st < 400:
            return "not refused (%d)" % st
        if self.statuses and st not in self.statuses:
            return "status %d, expected %s" % (st, "/".join(map(str, self.statuses)))
        if self.kind:
            p = envelope_problem(o.responses[0], self.kind, self.codes, self.field)
            if p:
                return p
        if self.close and not o.closed:
            return "connection left open after the refusal"
        return None


class Framing(Expect):
    """A framing refusal: one response in `statuses` then a closed
    connection, or (silent=True) a closed connection with no answer.  The
    case appends a pipelined request; answering it is a failure."""
    until_close = True

    def __init__(self, statuses=(400,), silent=True, kind=None, codes=None):
        self.statuses = statuses
        self.silent = silent
        self.kind = kind
        self.codes = codes

    def check(self, o):
        p = _first_problems(o)
        if p:
            return p
        if not o.responses:
            if not o.closed:
                return "no answer and not closed within %.0fs" % o.elapsed
            return None if self.silent else "closed without the required %s" % (
                "/".join(map(str, self.statuses)))
        st = o.responses[0][0]
        if st >= 500:
            return "server error %d" % st
        if st not in self.statuses:
            return "status %d, expected %s then close" % (st, "/".join(map(str, self.statuses)))
        if self.kind:
            p = envelope_problem(o.responses[0], self.kind, self.codes)
            if p:
                return p
        if not o.closed:
            return "connection left open after the %d" % st
        return None


class ChunkedOrRefused(Framing):
    """A Transfer-Encoding the RFC lets a server read as plain chunked: the
    framing refusal, or the body read as chunked (the request's own 4xx,
    then the pipelined canary's 404); never a hang or a third reading."""

    def __init__(self):
        Framing.__init__(self, (400,))

    def check(self, o):
        rs = o.responses
        if o.garbage is None and len(rs) == 2 and 400 <= rs[0][0] < 500 and rs[1][0] == 404 \
                and response_code(rs[1]) == "SVC-NOT-FOUND":
            return None
        return Framing.check(self, o)


class Harmless(Expect):
    """For input the RFCs let a server either refuse or read leniently: one
    4xx (in `statuses` if given; any body) or a closed connection with no
    answer; never a 2xx/3xx/5xx, never a hang.  Used only where a lenient
    reading also lands on a refusal (the target needs a token that is not
    sent, or does not exist)."""

    def __init__(self, statuses=None, until_close=False):
        self.statuses = statuses
        self.until_close = until_close

    def check(self, o):
        p = _first_problems(o)
        if p:
            return p
        if not o.responses:
            if not o.closed:
                return "no answer and not closed within %.0fs" % o.elapsed
            return None
        st = o.responses[0][0]
        if st >= 500:
            return "server error %d" % st
        if st < 400:
            return "not refused (%d)" % st
        if self.statuses and st not in self.statuses:
            return "status %d, expected %s" % (st, "/".join(map(str, self.statuses)))
        return None


class Case:
    def __init__(self, cat, name, data=None, expect=None, run=None, smuggle=None,
                 timeout=IO_TIMEOUT, shut_wr=False, defect=None):
        self.cat = cat
        self.name = name
        self.data = data
        self.expect = expect
        self.run = run
        self.smuggle = isinstance(expect, Framing) if smuggle is None else smuggle
        self.timeout = timeout
        self.shut_wr = shut_wr
        self.defect = defect
        self.background = False

    def __repr__(self):
        return "<Case %s/%s>" % (self.cat, self.name)


def execute(case, env):
    """Runs one case: (problem or None, observed text)."""
    try:
        if case.run is not None:
            return case.run(env)
        data = case.data + (SMUGGLE if case.smuggle else b"")
        o = exchange(env.port, data, case.expect.until_close, case.timeout, case.shut_wr)
        return case.expect.check(o), describe(o)
    except Exception as e:  # a broken case must show up as a failure, not vanish
        return "suite error: %s: %s" % (type(e).__name__, e), "-"


# ---------------------------------------------------------------------------
# building requests

def b(x):
    if isinstance(x, bytes):
        return x
    return str(x).encode("utf-8")


def req(method, path, headers=(), body=None, version=b"HTTP/1.1", host=True, cl=True):
    """Request bytes, exactly as given (no normalisation): Host first unless
    host=False, then headers, then Content-Length of body unless cl=False."""
    lines = [b(method) + b" " + b(path) + (b" " + b(version) if version is not None else b"")]
    if host:
        lines.append(b"Host: 127.0.0.1")
    for k, v in headers:
        lines.append(b(k) + b": " + b(v))
    if body is not None and cl:
        lines.append(b"Content-Length: %d" % len(b(body)))
    return b"\r\n".join(lines) + b"\r\n\r\n" + (b(body) if body is not None else b"")


def jdump(obj):
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


JSON_CT = ("Content-Type", "application/json")
SCIM_CT = ("Content-Type", "application/scim+json")
FORM_CT = ("Content-Type", "application/x-www-form-urlencoded")


# ---------------------------------------------------------------------------
# multi-step helpers (http.client, one request each)

def _resp_of(r):
    return (r.status, r.headers, r.raw)


def check_response(r, expect):
    """Judges an http.client Response with an Expect (as one exchange)."""
    o = Outcome()
    o.responses.append(_resp_of(r))
    return expect.check(o), describe(o)


def _walk_keys(obj):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _walk_keys(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk_keys(v)


# ===========================================================================
# the categories

def framing_cases(env):
    C = []
    # A protected route and no token: a request that is read at all is
    # answered 401, so a 400 here is the framing refusal and nothing else.
    tok_post = lambda te_lines, body: (  # noqa: E731
        b"POST /v2/webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\n" + te_lines + b"\r\n" + body)
    chunked_body = b"5\r\nhello\r\n0\r\n\r\n"
    # defect 2: a Transfer-Encoding other than exactly "chunked": 400 + close
    for name, te in [("chunked, identity", b"chunked, identity"),
                     ("chunked trailing space", b"chunked "),
                     ("identity", b"identity"),
                     ("identity, chunked", b"identity, chunked"),
                     ("gzip, chunked", b"gzip, chunked"),
                     ("xchunked", b"xchunked"),
                     ("quoted chunked", b'"chunked"'),
                     ("empty value", b""),
                     ("VT before chunked", b"\x0bchunked")]:
        C.append(Case("framing", "TE: " + name,
                      tok_post(b"Transfer-Encoding: " + te + b"\r\n", chunked_body),
                      Framing((400,), silent=False), defect="2"))
    C.append(Case("framing", "TE twice: chunked, chunked",
                  tok_post(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                           chunked_body), Framing((400,), silent=False), defect="2"))
    # defect 3: desync
    C.append(Case("framing", "TE twice: chunked then identity",
                  tok_post(b"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                           chunked_body), Framing((400,), silent=False), defect="3"))
    C.append(Case("framing", "TE obs-folded chunk / ed",
                  tok_post(b"Transfer-Encoding: chunk\r\n ed\r\n", chunked_body),
                  Framing((400,), silent=False), defect="3"))
    C.append(Case("framing", "Content-Length: 2 NUL 40",
                  tok_post(b"Content-Length: 2\x00 40\r\n", b"{}"),
                  Framing((400,), silent=False), defect="3"))
    # more TE spellings (not in the defect list): refused or dropped, never desynced
    # (a leading tab is optional whitespace, "\tchunked" is plain chunked: not a case)
    for name, te, exp, defect in [
            ("TE chunked;q=1", b"chunked;q=1", Framing((400,)), "2 (class)"),
            ("TE compress", b"compress", Framing((400,), silent=False), "2 (class)"),
            ("TE chunked NUL", b"chunked\x00", Framing((400,)), "3 (class)"),
            # RFC 9110 section 5.6.1: empty list elements are ignored, so
            # these may also be read as plain chunked; a hang is never right
            ("TE chunked,", b"chunked,", ChunkedOrRefused(), "2 (class)"),
            ("TE , chunked", b", chunked", ChunkedOrRefused(), "2 (class)")]:
        C.append(Case("framing", name, tok_post(b"Transfer-Encoding: " + te + b"\r\n",
                                                chunked_body), exp, smuggle=True, defect=defect))
    C.append(Case("framing", "TE with space before colon",
                  tok_post(b"Transfer-Encoding : chunked\r\n", chunked_body), Framing((400,))))
    # Content-Length / Transfer-Encoding combinations (existing guards)
    C.append(Case("framing", "CL then TE",
                  tok_post(b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", chunked_body),
                  Framing((400,))))
    C.append(Case("framing", "TE then CL",
                  tok_post(b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n", chunked_body),
                  Framing((400,))))
    C.append(Case("framing", "two CL same",
                  tok_post(b"Content-Length: 2\r\nContent-Length: 2\r\n", b"{}"), Framing((400,))))
    C.append(Case("framing", "two CL different",
                  tok_post(b"Content-Length: 2\r\nContent-Length: 40\r\n", b"{}"),
                  Framing((400,))))
    C.append(Case("framing", "two CL differing in case",
                  tok_post(b"Content-Length: 2\r\ncontent-length: 2\r\n", b"{}"), Framing((400,))))
    for name, v, st in [("CL list 2, 2", b"2, 2", (400,)),
                        ("CL negative", b"-1", (400,)),
                        ("CL hex", b"0x2", (400,)),
                        ("CL +5", b"+5", (400,)),
                        ("CL 2^64", b"18446744073709551616", (400, 413)),
                        ("CL 2^64+2 (wraps to 2)", b"18446744073709551618", (400, 413)),
                        ("CL 30 digits", b"9" * 30, (400, 413)),
                        ("CL 1e3", b"1e3", (400,)),
                        ("CL empty", b"", (400,)),
                        ("CL 2 space 2", b"2 2", (400,)),
                        ("CL with letters", b"2abc", (400,)),
                        ("CL decimal", b"2.0", (400,))]:
        C.append(Case("framing", name, tok_post(b"Content-Length: " + v + b"\r\n", b"{}"),
                      Framing(st)))
    # bad chunk framing
    te = b"Transfer-Encoding: chunked\r\n"
    for name, body in [("chunk size zz", b"zz\r\nhello\r\n0\r\n\r\n"),
                       ("chunk size negative", b"-5\r\nhello\r\n0\r\n\r\n"),
                       ("chunk size 0x5", b"0x5\r\nhello\r\n0\r\n\r\n"),
                       ("chunk size with space inside", b"5 5\r\nhello\r\n0\r\n\r\n"),

                       ("chunk data longer than size", b"3\r\nhello\r\n0\r\n\r\n"),
                       ("chunk data without CRLF", b"5\r\nhelloXX0\r\n\r\n"),
                       ("chunk size line empty", b"\r\nhello\r\n0\r\n\r\n"),
                       ("chunk ext with NUL", b"5;a=\x00\r\nhello\r\n0\r\n\r\n"),
                       ("missing final chunk, request pipelined", b"5\r\nhello\r\n")]:
        C.append(Case("framing", name, tok_post(te, body), Framing((400,))))
    # an absurd chunk size may also be refused as too large
    for name, body in [("chunk size overflowing 64 bits",
                        b"1" + b"0" * 16 + b"5\r\nhello\r\n0\r\n\r\n"),
                       ("chunk size fffffffffffffffff", b"f" * 17 + b"\r\nhello\r\n0\r\n\r\n")]:
        C.append(Case("framing", name, tok_post(te, body), Framing((400, 413))))
    # defect 4: oversized chunk-size line / leading zeros: a 4xx in our envelope, then close
    C.append(Case("framing", "chunk-size line over 32 KiB",
                  tok_post(te, b"5;" + b"a" * (33 * 1024) + b"\r\nhello\r\n0\r\n\r\n"),
                  Framing(tuple(range(400, 500)), silent=False, kind="svc"), defect="4"))
    C.append(Case("framing", "chunk size with 40000 leading zeros",
                  tok_post(te, b"0" * 40000 + b"5\r\nhello\r\n0\r\n\r\n"),
                  Framing(tuple(range(400, 500)), silent=False, kind="svc"), defect="4"))
    C.append(Case("framing", "trailer section over 32 KiB",
                  tok_post(te, b"5\r\nhello\r\n0\r\nX-T: " + b"a" * (33 * 1024) + b"\r\n\r\n"),
                  Framing(tuple(range(400, 500)))))
    # bare LF: RFC 9112 lets a server accept or refuse it; either way a 4xx
    # here (no token on a protected route) and no answer to anything smuggled
    C.append(Case("framing", "bare LF everywhere, protected route",
                  b"GET /v2/portfolios HTTP/1.1\nHost: 127.0.0.1\n\n", Harmless()))
    C.append(Case("framing", "bare LF after headers, protected route",
                  b"GET /v2/portfolios HTTP/1.1\r\nHost: 127.0.0.1\r\n\n", Harmless()))
    C.append(Case("framing", "bare LF chunk lines on protected POST",
                  b"POST /v2/webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                  b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\n{}\n0\n\n",
                  Harmless()))
    C.append(Case("framing", "bare CR inside the header section",
                  b"GET /v2/portfolios HTTP/1.1\rHost: 127.0.0.1\r\nX-A: 1\r\n\r\n", Harmless()))
    return C


def request_line_cases(env):
    C = []
    P = "/v2/portfolios"  # needs a token: any reading of these lands on a 4xx
    for name, data in [
            ("unknown method FOO", req("FOO", P)),
            ("unknown method on /healthz", req("BREW", "/healthz")),
            ("lowercase get on /healthz", req("get", "/healthz")),
            ("mixed-case GeT on /healthz", req("GeT", "/healthz")),
            ("method with @", req("G@T", "/healthz")),
            ("TRACE /healthz", req("TRACE", "/healthz")),
            ("CONNECT to port 22", req("CONNECT", "127.0.0.1:22")),
            ("CONNECT with a path", req("CONNECT", "/healthz")),
            ("asterisk-form on GET", req("GET", "*")),
            ("absolute-form to another host", req("GET", "http://evil.example" + P)),
            ("absolute-form https", req("GET", "https://127.0.0.1" + P)),
            ("path without leading slash", req("GET", "v2/portfolios")),
            ("HTTP/1.2 on protected route", req("GET", P, version=b"HTTP/1.2")),
            ("HTTP/1.10", req("GET", P, version=b"HTTP/1.10")),
            ("lowercase http/1.1", req("GET", "/healthz", version=b"http/1.1")),
            ("HTTP/1.1 with trailing space", req("GET", P, version=b"HTTP/1.1 ")),
            ("two spaces after method", req("GET ", P)),
            ("tabs as separators", b"GET\t/v2/portfolios\tHTTP/1.1\r\nHost: x\r\n\r\n"),
            ("method 8 KiB long", req("A" * 8192, "/healthz"))]:
        C.append(Case("request-line", name, data, Harmless()))
    # versions the server cannot speak: refused (4xx) or closed, never served
    for name, data in [
            ("HTTP/0.9 simple request", b"GET /healthz\r\n"),
            ("HTTP/0.9 declared", req("GET", "/healthz", version=b"HTTP/0.9")),
            ("HTTP/2.0 over HTTP/1 framing", req("GET", "/healthz", version=b"HTTP/2.0")),
            ("HTTP/3.0", req("GET", "/healthz", version=b"HTTP/3.0")),
            ("missing version", b"GET /healthz\r\nHost: 127.0.0.1\r\n\r\n"),
            ("missing version, trailing space", b"GET /healthz \r\nHost: 127.0.0.1\r\n\r\n"),
            ("version HTTX/1.1", req("GET", "/healthz", version=b"HTTX/1.1")),
            ("version HTTP/1", req("GET", "/healthz", version=b"HTTP/1")),
            ("version HTTP/01.1", req("GET", "/healthz", version=b"HTTP/01.1")),
            ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
            ("TLS ClientHello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(64)))]:
        C.append(Case("request-line", name, data, Harmless(until_close=True), smuggle=False))
    return C


def header_cases(env):
    C = []
    H = "/healthz"  # served without a token: a 200 here means the input was accepted
    # defect 8 and RFC 9112 section 3.2: Host must be exactly one valid field
    for name, hdrs in [("two Host fields, same value", [("Host", "127.0.0.1")]),
                       ("two Host fields, different values", [("Host", "evil.example")]),
                       ("two Host fields, differing case", [("host", "evil.example")])]:
        C.append(Case("headers", name, req("GET", H, hdrs), Refuse((400,), kind=None),
                      defect="8"))
    C.append(Case("headers", "Host with a comma list",
                  req("GET", H, host=False, headers=[("Host", "127.0.0.1, evil.example")]),
                  Refuse((400,), kind=None), defect="8"))
    C.append(Case("headers", "missing Host on HTTP/1.1", req("GET", H, host=False),
                  Refuse((400,), kind=None)))
    # sizes (libmicrohttpd answers these itself: 400/413/414/431, or a close)
    big = (400, 413, 414, 431)
    C.append(Case("headers", "request line 100 KiB",
                  req("GET", "/healthz?q=" + "q" * (100 * 1024)), Harmless(big), timeout=5))
    C.append(Case("headers", "request line 40 KiB path",
                  req("GET", "/v2/" + "p" * (40 * 1024)), Harmless(big), timeout=5))
    C.append(Case("headers", "header line 100 KiB",
                  req("GET", H, [("X-Big", "a" * (100 * 1024))]), Harmless(big), timeout=5))
    C.append(Case("headers", "header line 33 KiB",
                  req("GET", H, [("X-Big", "a" * (33 * 1024))]), Harmless(big), timeout=5))
    C.append(Case("headers", "3000 headers",
                  req("GET", H, [("X-H%d" % i, "v" * 40) for i in range(3000)]),
                  Harmless(big), timeout=5))
    C.append(Case("headers", "header name 40 KiB",
                  req("GET", H, [("X" * (40 * 1024), "v")]), Harmless(big), timeout=5))
    # field syntax (our framing check refuses non-token names: 400 + close)
    for name, line in [("space before colon", b"Host2 : x"),
                       ("space inside name", b"X Y: x"),
                       ("NUL in name", b"X\x00Y: x"),
                       ("parenthesis in name", b"X(Y): x"),
                       ("non-ASCII name", b"X\xc3\xa9: x"),
                       ("no colon", b"NoColonHere")]:
        C.append(Case("headers", "header " + name,
                      b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + line + b"\r\n\r\n",
                      Framing((400,))))
    # values RFC 9110 lets a server refuse or clean: a protected route, so a 4xx either way
    P = b"GET /v2/portfolios HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    for name, line in [("NUL in value", b"X-A: a\x00b"),
                       ("bare CR in value", b"X-A: a\rb"),
                       ("obs-fold on a header", b"X-A: a\r\n b"),
                       ("DEL in value", b"X-A: a\x7fb"),
                       ("escape byte in value", b"X-A: \x1b[31mred"),
                       ("whitespace line before first header", b" X-A: a")]:
        C.append(Case("headers", "header " + name, P + line + b"\r\n\r\n", Harmless()))
    C.append(Case("headers", "Expect: 100-continue with 2 MiB Content-Length",
                  req("POST", "/oauth/token", [FORM_CT, ("Expect", "100-continue"),
                                               ("Content-Length", str(2 * 1024 * 1024))]),
                  Refuse((413,), kind="svc", codes=["SVC-PAYLOAD-TOO-LARGE"], close=True)))
    C.append(Case("headers", "unknown Expect value",
                  req("GET", "/v2/portfolios", [("Expect", "200-ok")]), Harmless()))
    return C


def body_cases(env):
    C = []
    A = env.a
    auth = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id)]
    hook = jdump({"url": PUBLIC_HOOK, "events": ["rate.decision.published"]})
    C.append(Case("bodies", "truncated JSON body then EOF",
                  req("POST", "/v2/webhooks", auth + [JSON_CT, ("Content-Length", "100")],
                      body=hook[:20], cl=False),
                  Harmless(statuses=(400,), until_close=True), shut_wr=True, smuggle=False))
    C.append(Case("bodies", "truncated chunked body then EOF",
                  req("POST", "/v2/webhooks", auth + [JSON_CT, ("Transfer-Encoding", "chunked")],
                      body=b"40\r\n" + hook[:20], cl=False),
                  Harmless(statuses=(400,), until_close=True), shut_wr=True, smuggle=False))
    over = b'{"url":"' + b"a" * (1024 * 1024) + b'"}'
    C.append(Case("bodies", "JSON body over 1 MiB with Content-Length",
                  req("POST", "/v2/webhooks", auth + [JSON_CT], body=over),
                  Refuse((413,), codes=["SVC-PAYLOAD-TOO-LARGE"], close=True),
                  timeout=BIG_TIMEOUT))
    chunk = b"%x\r\n" % (256 * 1024) + b"a" * (256 * 1024) + b"\r\n"
    C.append(Case("bodies", "JSON body over 1 MiB chunked",
                  req("POST", "/v2/webhooks", auth + [JSON_CT, ("Transfer-Encoding", "chunked")],
                      body=chunk * 5 + b"0\r\n\r\n", cl=False),
                  Refuse((413,), codes=["SVC-PAYLOAD-TOO-LARGE"]), timeout=BIG_TIMEOUT))
    C.append(Case("bodies", "Content-Length 2 GiB, no body",
                  req("POST", "/v2/webhooks", auth + [JSON_CT, ("Content-Length", "2147483648")]),
                  Refuse((413,), codes=["SVC-PAYLOAD-TOO-LARGE"], close=True)))
    C.append(Case("bodies", "SCIM body over 1 MiB",
                  req("POST", "/scim/v2/Users", [("Authorization", "Bearer " + env.scim_a),
                                                 SCIM_CT], body=over),
                  Refuse((413,), kind="scim", close=True), timeout=BIG_TIMEOUT))
    for name, ct, st in [("text/plain", "text/plain", 415),
                         ("no Content-Type", None, 415),
                         ("application/jsonx", "application/jsonx", 415),
                         ("application/json-patch+json", "application/json-patch+json", 415),
                         ("form-urlencoded on a JSON route", "application/x-www-form-urlencoded",
                          415),
                         ("multipart/form-data", "multipart/form-data; boundary=x", 415),
                         ("application/xml", "application/xml", 415)]:
        hdrs = auth + ([("Content-Type", ct)] if ct else [])
        C.append(Case("bodies", "wrong Content-Type: " + name,
                      req("POST", "/v2/webhooks", hdrs, body=hook),
                      Refuse((st,) if st else (400, 415), kind="svc" if st else None,
                             codes=["SVC-UNSUPPORTED-MEDIA-TYPE"] if st else None)))
    C.append(Case("bodies", "SCIM with text/plain",
                  req("POST", "/scim/v2/Users", [("Authorization", "Bearer " + env.scim_a),
                                                 ("Content-Type", "text/plain")],
                      body=jdump({"userName": "ct@hostile.example"})),
                  Refuse((415,), kind="scim")))
    C.append(Case("bodies", "gzip Content-Encoding",
                  req("POST", "/v2/webhooks", auth + [JSON_CT, ("Content-Encoding", "gzip")],
                      body=b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab\xae\x05\x00C\xbf\xa6\xa3"
                           b"\x02\x00\x00\x00"),
                  Refuse((400, 415))))
    return C


def _hook_with_description(raw):
    """A v2 webhook body whose description string holds raw JSON text."""
    return (b'{"url":"' + b(PUBLIC_HOOK) + b'","events":["rate.decision.published"],'
            b'"description":"' + raw + b'"}')


def utf8_cases(env):
    C = []
    A = env.a
    auth = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id), JSON_CT]
    bad = ["SVC-REQUEST-MALFORMED", "SVC-VALIDATION-FAILED"]
    for name, raw in [("invalid byte FF", b"a\xffb"),
                      ("invalid byte FE", b"\xfe"),
                      ("lone continuation byte", b"a\x80b"),
                      ("overlong slash C0 AF", b"\xc0\xaf"),
                      ("overlong 3-byte slash", b"\xe0\x80\xaf"),
                      ("overlong 4-byte slash", b"\xf0\x80\x80\xaf"),
                      ("overlong NUL C0 80", b"a\xc0\x80b"),
                      ("UTF-8-encoded surrogate", b"\xed\xa0\x80"),
                      ("above U+10FFFF", b"\xf4\x90\x80\x80"),
                      ("5-byte sequence", b"\xf8\x88\x80\x80\x80"),
                      ("truncated 3-byte sequence", b"\xe2\x82"),
                      ("lone surrogate escape D800", b"\\ud800"),
                      ("lone low surrogate escape DC00", b"\\udc00"),
                      ("surrogate then letter", b"\\ud800\\u0041"),
                      ("reversed surrogate pair", b"\\udfff\\ud800"),
                      ("escaped NUL", b"\\u0000"),
                      ("escaped NUL inside", b"abc\\u0000def"),
                      ("raw NUL byte in string", b"abc\x00def"),
                      ("raw control 01 in string", b"a\x01b"),
                      ("raw newline in string", b"a\nb"),
                      ("bad escape \\x41", b"\\x41"),
                      ("short unicode escape", b"\\u12")]:
        C.append(Case("utf8-nul", "JSON string: " + name,
                      req("POST", "/v2/webhooks", auth, body=_hook_with_description(raw)),
                      Refuse((400,), codes=bad)))
    hook = jdump({"url": PUBLIC_HOOK, "events": ["rate.decision.published"]})
    C.append(Case("utf8-nul", "raw NUL byte after the JSON",
                  req("POST", "/v2/webhooks", auth, body=hook + b"\x00"), Refuse((400,), codes=bad)))
    C.append(Case("utf8-nul", "raw NUL byte before the JSON",
                  req("POST", "/v2/webhooks", auth, body=b"\x00" + hook), Refuse((400,), codes=bad)))
    C.append(Case("utf8-nul", "invalid UTF-8 in a key",
                  req("POST", "/v2/webhooks", auth,
                      body=hook[:-1] + b',"desc\xffription":"x"}'), Refuse((400,), codes=bad)))
    C.append(Case("utf8-nul", "UTF-16 encoded body",
                  req("POST", "/v2/webhooks", auth, body=hook.decode().encode("utf-16")),
                  Refuse((400,), codes=bad)))
    C.append(Case("utf8-nul", "UTF-32 encoded body",
                  req("POST", "/v2/webhooks", auth, body=hook.decode().encode("utf-32-le")),
                  Refuse((400,), codes=bad)))
    scim = [("Authorization", "Bearer " + env.scim_a), SCIM_CT]
    for name, raw in [("escaped NUL", b"nul\\u0000@hostile.example"),
                      ("invalid UTF-8", b"bad\xff@hostile.example"),
                      ("lone surrogate", b"sur\\ud800@hostile.example"),
                      ("overlong", b"ov\xc0\xaf@hostile.example")]:
        C.append(Case("utf8-nul", "SCIM userName: " + name,
                      req("POST", "/scim/v2/Users", scim,
                          body=b'{"schemas":["' + b(SCIM_USER_URN) + b'"],"userName":"' + raw + b'"}'),
                      Refuse((400,), kind="scim")))
    P = "/v2/portfolios/%s/properties" % A.id
    for name, q in [("encoded NUL in query", "?limit=%00"),
                    ("invalid UTF-8 in query", "?cursor=%ff%fe"),
                    ("overlong in query", "?cursor=%c0%af")]:
        C.append(Case("utf8-nul", name, req("GET", P + q, auth[:2]),
                      Refuse((400,), codes=["SVC-REQUEST-MALFORMED"])))
    C.append(Case("utf8-nul", "invalid UTF-8 in X-Service-Portfolio",
                  req("GET", "/v2/portfolios", [("Authorization", "Bearer " + A.token),
                                                ("X-Service-Portfolio", b"pf_\xff\xfe")]),
                  Refuse((400, 403))))
    return C


def json_cases(env):
    C = []
    A = env.a
    auth = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id), JSON_CT]
    bad = ["SVC-REQUEST-MALFORMED", "SVC-VALIDATION-FAILED"]
    W = "/v2/webhooks"

    def post(body):
        return req("POST", W, auth, body=body)
    hook = jdump({"url": PUBLIC_HOOK, "events": ["rate.decision.published"]})
    deep = 10000
    for name, body in [
            ("10000 nested arrays", b"[" * deep + b"]" * deep),
            ("10000 nested objects", b'{"a":' * deep + b"1" + b"}" * deep),
            ("10000 nested arrays in a field", hook[:-1] + b',"description":' + b"[" * deep +
             b"]" * deep + b"}"),
            ("100000 unclosed brackets", b"[" * 100000),
            ("64 nested arrays in a field", hook[:-1] + b',"description":' + b"[" * 64 + b"]" * 64
             + b"}"),
            ("duplicate key url", b'{"url":"' + b(PUBLIC_HOOK) + b'","url":"https://127.0.0.1/x",'
             b'"events":["rate.decision.published"]}'),
            ("duplicate key events", hook[:-1] + b',"events":["sso.user.provisioned"]}'),
            ("key differing in case", hook[:-1] + b',"URL":"https://127.0.0.1/"}'),
            ("__proto__ key", hook[:-1] + b',"__proto__":{"admin":true}}'),
            ("5000 unknown keys", b"{" + b",".join(b'"k%d":1' % i for i in range(5000)) + b"}"),
            ("events array of 100000 numbers", b'{"url":"' + b(PUBLIC_HOOK) + b'","events":[' +
             b",".join([b"1"] * 100000) + b"]}"),
            ("events array of 200000 empty arrays", b'{"url":"' + b(PUBLIC_HOOK) + b'","events":[' +
             b",".join([b"[]"] * 200000) + b"]}"),
            ("description of 900 KB", hook[:-1] + b',"description":"' + b"d" * 900000 + b'"}'),
            ("trailing garbage", hook + b" x"),
            ("two JSON documents", hook + hook),
            ("trailing comma after object", hook + b","),
            ("trailing comma inside", hook[:-1] + b",}"),
            ("single quotes", b"{'url':'" + b(PUBLIC_HOOK) + b"'}"),
            ("comment", b"/* c */" + hook),
            ("unquoted key", b'{url:"' + b(PUBLIC_HOOK) + b'"}'),
            ("empty body", b""),
            ("whitespace body", b"   \r\n\t "),
            ("top-level array", b"[" + hook + b"]"),
            ("top-level empty array", b"[]"),
            ("top-level string", b'"' + b(PUBLIC_HOOK) + b'"'),
            ("top-level number", b"42"),
            ("top-level null", b"null"),
            ("top-level true", b"true"),
            ("NaN", b'{"url":NaN}'),
            ("Infinity", b'{"url":Infinity}'),
            ("hex number", b'{"url":0x10}'),
            ("leading zero number", b'{"url":012}'),
            ("bare decimal point", b'{"url":.5}'),
            ("plus sign number", b'{"url":+1}')]:
        C.append(Case("json", name, post(body), Refuse((400, 413), codes=bad + [
            "SVC-PAYLOAD-TOO-LARGE"]), timeout=BIG_TIMEOUT if len(body) > 50000 else IO_TIMEOUT))
    # numbers where a positive integer is expected (a real decision otherwise)
    rd_auth = auth
    for name, num, st in [("1e999", b"1e999", (400,)),
                          ("-1e999", b"-1e999", (400,)),
                          ("1e-999", b"1e-999", (400,)),
                          ("-0", b"-0", (400,)),
                          ("0", b"0", (400,)),
                          ("2^64", b"18446744073709551616", (400,)),
                          ("2^63", b"9223372036854775808", (400,)),
                          ("-2^63-1", b"-9223372036854775809", (400,)),
                          ("2^63-1", b"9223372036854775807", (400, 422)),
                          ("1000 digits", b"9" * 1000, (400,)),
                          ("45900.5", b"45900.5", (400,)),
                          ("4.59e4.5", b"4.59e4.5", (400,)),
                          ("NaN", b"NaN", (400,)),
                          ("-Infinity", b"-Infinity", (400,))]:
        body = json.dumps(env.rd_body(), separators=(",", ":")).encode()
        body = body.replace(b'"minor_units":45900', b'"minor_units":' + num)
        assert num in body
        C.append(Case("json", "minor_units " + name, req("POST", "/v2/rate-decisions", rd_auth,
                                                          body=body),
                      Refuse(st, codes=bad + ["SVC-RATE-CEILING-EXCEEDED"])))
    scim = [("Authorization", "Bearer " + env.scim_a), SCIM_CT]
    for name, body in [("SCIM 10000 nested arrays", b"[" * deep + b"]" * deep),
                       ("SCIM 10000 nested objects in a field",
                        b'{"userName":"deep@hostile.example","x":' + b'{"a":' * deep + b"1" +
                        b"}" * deep + b"}"),
                       ("SCIM duplicate userName key",
                        b'{"userName":"a@hostile.example","userName":"b@hostile.example"}'),
                       ("SCIM top-level array", b'[{"userName":"arr@hostile.example"}]'),
                       ("SCIM top-level null", b"null"),
                       ("SCIM trailing garbage", b'{"userName":"tg@hostile.example"}x'),
                       ("SCIM empty body", b""),
                       ("SCIM active 1e999", b'{"userName":"num@hostile.example","active":1e999}')]:
        C.append(Case("json", name, req("POST", "/scim/v2/Users", scim, body=body),
                      Refuse((400,), kind="scim")))
    return C


# ---------------------------------------------------------------------------
# wrong types, generated from docs/openapi.json

WRONG = [("null", None), ("number", 42), ("fraction", 4.5), ("string", "x"), ("bool", True),
         ("array", []), ("object", {})]


def _json_type_ok(schema_types, label):
    t = set(schema_types)
    return {"null": "null" in t,
            "number": bool(t & {"number", "integer"}),
            "fraction": "number" in t,
            "string": "string" in t,
            "bool": "boolean" in t,
            "array": "array" in t,
            "object": "object" in t}[label]


def _deref(spec, s):
    while isinstance(s, dict) and "$ref" in s:
        name = s["$ref"].rsplit("/", 1)[1]
        s = spec["components"]["schemas"][name]
    return s


def wrong_type_variants(spec, schema, path, scim, nested=True):
    """(keys, label, value) for every wrong-typed value of every property
    of an object schema, recursing into nested objects (and into typed array
    items) when nested.  keys is the list of object keys / array indexes."""
    out = []
    schema = _deref(spec, schema)
    for prop, ps in (schema.get("properties") or {}).items():
        ps = _deref(spec, ps)
        if ps.get("readOnly") or ps.get("writeOnly"):
            continue  # ignored (readOnly) or discarded (password) by definition
        types = ps.get("type")
        if types is None:
            continue
        types = [types] if isinstance(types, str) else list(types)
        p = list(path) + [prop]
        is_req = prop in (schema.get("required") or [])
        for label, v in WRONG:
            if _json_type_ok(types, label):
                continue
            if label == "fraction" and "integer" not in types:
                continue  # "number" already covers a non-number type
            if label == "null" and scim and not is_req:
                continue  # RFC 7643 section 2.5: null is "unassigned" for SCIM
            out.append((p, label, v))
        if not nested:
            continue
        if "object" in types and ps.get("properties"):
            out += wrong_type_variants(spec, ps, p, scim, nested)
        if "array" in types and isinstance(ps.get("items"), dict):
            it = _deref(spec, ps["items"])
            itypes = it.get("type")
            if isinstance(itypes, str) and itypes in ("string", "integer", "number"):
                for label, v in WRONG:
                    if not _json_type_ok([itypes], label) and not (
                            label == "fraction" and itypes != "integer"):
                        out.append((p + [0], label, v))
    return out


def field_name(keys):
    """The validator's spelling of a field: a.b, a[0]."""
    out = ""
    for k in keys:
        out += "[%d]" % k if isinstance(k, int) else ("." if out else "") + k
    return out


def _set_path(doc, keys, value):
    cur = doc
    for k in keys[:-1]:
        cur = cur[k]
    cur[keys[-1]] = value
    return doc


def wrong_type_cases(env):
    spec = env.openapi
    S = spec["components"]["schemas"]
    C = []
    A = env.a
    v2 = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id), JSON_CT]
    v1 = [("Authorization", "Bearer " + A.token), JSON_CT]
    scim = [("Authorization", "Bearer " + env.scim_a), SCIM_CT]
    routes = [
        # (label, method, path, headers, schema, base factory, kind, scim?, nested)
        ("POST /v2/rate-decisions", "POST", "/v2/rate-decisions", v2, S["RateDecisionRequest"],
         env.rd_body, "svc", False, True),
        ("POST /v2/rate-decisions/{id}/revert", "POST",
         "/v2/rate-decisions/%s/revert" % env.rd_target, v2, S["RateDecisionRevertRequest"],
         lambda: {"reason": "hostile revert", "approver_saml_subject": env.approver}, "svc",
         False, True),
        ("POST /v1/webhooks", "POST", "/v1/webhooks", v1, S["WebhookSubscriptionCreateV1"],
         lambda: {"url": PUBLIC_HOOK, "events": ["rate.suggested"]}, "svc", False, True),
        ("POST /v2/webhooks", "POST", "/v2/webhooks", v2, S["WebhookSubscriptionCreateV2"],
         lambda: {"url": PUBLIC_HOOK, "events": ["rate.decision.published"]}, "svc", False, True),
        ("POST /scim/v2/Users", "POST", "/scim/v2/Users", scim, S["ScimUserRequest"],
         lambda: {"schemas": [SCIM_USER_URN], "userName": env.fresh_name()}, "scim", True, False),
        ("PUT /scim/v2/Users/{id}", "PUT", "/scim/v2/Users/" + env.scim_user["id"], scim,
         S["ScimUserRequest"], lambda: {"schemas": [SCIM_USER_URN],
                                 "userName": env.scim_user["userName"]}, "scim", True, False),
        ("POST /scim/v2/Groups", "POST", "/scim/v2/Groups", scim, S["ScimGroupRequest"],
         lambda: {"schemas": [SCIM_GROUP_URN], "displayName": env.fresh_name("group")},
         "scim", True, False),
        ("PUT /scim/v2/Groups/{id}", "PUT", "/scim/v2/Groups/" + env.scim_group["id"], scim,
         S["ScimGroupRequest"], lambda: {"schemas": [SCIM_GROUP_URN],
                                  "displayName": env.scim_group["displayName"]}, "scim", True,
         False),
    ]
    for label, method, path, hdrs, schema, base, kind, is_scim, nested in routes:
        for keys, tlabel, value in wrong_type_variants(spec, schema, [], is_scim, nested):
            fpath = field_name(keys)
            doc = _set_path(base(), keys, copy.deepcopy(value))
            C.append(Case("wrong-types", "%s %s=%s" % (label, fpath, tlabel),
                          req(method, path, hdrs, body=jdump(doc)),
                          Refuse((400, 422), kind=kind, field=fpath if kind == "svc" else None)))
    # PATCH (ScimPatchOp): its own shape, the value typed by the path it names
    patch_routes = [("PATCH /scim/v2/Users/{id}", "/scim/v2/Users/" + env.scim_user["id"]),
                    ("PATCH /scim/v2/Groups/{id}", "/scim/v2/Groups/" + env.scim_group["id"])]
    for label, path in patch_routes:
        def base():
            return {"schemas": [SCIM_PATCH_URN],
                    "Operations": [{"op": "replace", "path": "displayName",
                                    "value": "Hostile %s" % env.fresh_name("x")}]}
        variants = []
        for tl, v in WRONG:
            if tl in ("fraction",):
                continue
            if tl not in ("array", "null"):
                variants.append(("schemas", tl, v))
            if tl != "array":
                variants.append(("Operations", tl, v))
            if tl != "object":
                variants.append(("Operations[0]", tl, v))
            if tl != "string":
                variants.append(("Operations[0].op", tl, v))
            if tl not in ("string", "null"):
                variants.append(("Operations[0].path", tl, v))
                variants.append(("Operations[0].value (displayName)", tl, v))
        for fpath, tl, v in variants:
            doc = base()
            if fpath == "Operations[0]":
                doc["Operations"][0] = copy.deepcopy(v)
            elif fpath.startswith("Operations[0]."):
                key = fpath.split(".", 1)[1].split(" ")[0]
                doc["Operations"][0][key] = copy.deepcopy(v)
            else:
                doc[fpath] = copy.deepcopy(v)
            C.append(Case("wrong-types", "%s %s=%s" % (label, fpath, tl),
                          req("PATCH", path, scim, body=jdump(doc)),
                          Refuse((400, 422), kind="scim")))
    return C


# ---------------------------------------------------------------------------

def scim_cases(env):
    C = []
    scim = [("Authorization", "Bearer " + env.scim_a)]
    U = "/scim/v2/Users?filter="
    q = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731
    for name, f in [
            ("missing value", 'userName eq'),
            ("attribute only", 'userName'),
            ("operator only", 'eq "x"'),
            ("unknown operator", 'userName xx "a"'),
            ("unterminated string", 'userName eq "abc'),
            ("unbalanced open paren", '(userName eq "a"'),
            ("unbalanced close paren", 'userName eq "a")'),
            ("not without parens", 'not userName eq "a"'),
            ("dangling and", 'userName eq "a" and'),
            ("leading and", 'and userName eq "a"'),
            ("or or", 'userName eq "a" or or userName eq "b"'),
            ("empty parens", '()'),
            ("2000 nested parens", "(" * 2000 + 'userName eq "a"' + ")" * 2000),
            ("17 nested parens", "(" * 17 + 'userName eq "a"' + ")" * 17),
            ("1000 nested not", "not(" * 1000 + 'userName eq "a"' + ")" * 1000),
            ("200 or-ed comparisons", " or ".join('userName eq "u%d"' % i for i in range(200))),
            ("filter over 4 KiB", 'userName eq "' + "a" * 5000 + '"'),
            ("attribute path 5000 chars", "a." * 2500 + 'b eq "x"'),
            ("unterminated value filter", 'emails[type eq "work"'),
            ("nested value filter", 'emails[type[value eq "x"] eq "work"]'),
            ("empty value filter", 'emails[]'),
            ("value filter 1000 deep", "emails[" * 1000 + 'type eq "x"' + "]" * 1000),
            ("bad escape in string", 'userName eq "\\q"'),
            ("control byte in filter", 'userName eq "a\x01b"'),
            # Bare words are tolerated (Microsoft's SCIM reference collection
            # sends `userName sw O`; docs/scim.md), but not a bare value that
            # could smuggle a quote, a paren or a keyword.
            ("bare value with a quote", 'userName eq a"b'),
            ("bare value with a paren", 'userName eq a(b'),
            ("bare keyword as a value", 'userName eq and'),
            ("pr with a value", 'userName pr "x"'),
            ("sub-attribute on a value filter twice", 'emails[type eq "w"].value.x.y eq "a"')]:
        C.append(Case("scim", "filter: " + name, req("GET", U + q(f), scim),
                      Refuse((400,), kind="scim")))
    for name, qs in [("count not a number", "?count=abc"),
                     ("startIndex not a number", "?startIndex=abc"),
                     ("count exponent", "?count=1e3"),
                     ("count with a NUL", "?count=1%00"),
                     ("startIndex fraction", "?startIndex=1.5")]:
        C.append(Case("scim", "paging: " + name, req("GET", "/scim/v2/Users" + qs, scim),
                      Refuse((400,), kind="scim")))
    P = "/scim/v2/Users/" + env.scim_user["id"]
    hdr = scim + [SCIM_CT]

    def patch(*ops, schemas=True):
        body = {"Operations": list(ops)}
        if schemas:
            body["schemas"] = [SCIM_PATCH_URN]
        return req("PATCH", P, hdr, body=jdump(body))
    for name, data, codes in [
            ("unknown op copy", patch({"op": "copy", "path": "displayName", "value": "x"}), None),
            ("JSON-Patch op test", patch({"op": "test", "path": "displayName", "value": "x"}),
             None),
            ("op missing", patch({"path": "displayName", "value": "x"}), None),
            ("remove without path", patch({"op": "remove"}), ["noTarget"]),
            ("path unterminated filter", patch({"op": "replace", "path": 'emails[type eq "w"',
                                                "value": "x"}), None),
            ("path [[", patch({"op": "replace", "path": "[[", "value": "x"}), None),
            ("path empty", patch({"op": "replace", "path": "", "value": "x"}), None),
            ("path 10000 chars", patch({"op": "replace", "path": "a" * 10000, "value": "x"}),
             None),
            ("path 1000 dotted parts", patch({"op": "replace", "path": "a." * 1000 + "b",
                                              "value": "x"}), None),
            ("path value filter 1000 parens",
             patch({"op": "replace", "path": "emails[" + "(" * 1000 + 'type eq "w"' + ")" * 1000
                    + "].value", "value": "x"}), None),
            ("path with a NUL", patch({"op": "replace", "path": "display\u0000Name",
                                       "value": "x"}), None),
            ("101 operations", patch(*[{"op": "replace", "path": "displayName", "value": "v%d" % i}
                                       for i in range(101)]), ["invalidValue"]),
            ("schemas without PatchOp", req("PATCH", P, hdr, body=jdump({
                "schemas": [SCIM_USER_URN],
                "Operations": [{"op": "replace", "path": "displayName", "value": "x"}]})),
             ["invalidSyntax"]),
            ("Operations missing", req("PATCH", P, hdr, body=jdump({"schemas": [SCIM_PATCH_URN]})),
             None),
            ("Operations empty", patch(), None),
            ("path-less replace with a string value", patch({"op": "replace", "value": "x"}),
             None)]:
        C.append(Case("scim", "PATCH: " + name, data, Refuse((400,), kind="scim", codes=codes)))
    G = "/scim/v2/Groups/" + env.scim_group["id"]
    for name, ops in [("members value not a string", [{"op": "add", "path": "members",
                                                        "value": [{"value": 5}]}]),
                      ("members value empty", [{"op": "add", "path": "members",
                                                "value": [{"value": ""}]}]),
                      ("members value 300 chars", [{"op": "add", "path": "members",
                                                    "value": [{"value": "u" * 300}]}]),
                      ("members filter junk remove", [{"op": "remove",
                                                       "path": 'members[value eq ]'}])]:
        C.append(Case("scim", "group PATCH: " + name,
                      req("PATCH", G, hdr, body=jdump({"schemas": [SCIM_PATCH_URN],
                                                       "Operations": ops})),
                      Refuse((400,), kind="scim")))
    # defect 5: a password is accepted and discarded on every path
    for name, how in [("PATCH add path password", "add-path"),
                      ("PATCH replace path password", "replace-path"),
                      ("PATCH add path PASSWORD (case)", "add-path-upper"),
                      ("PATCH add URN path password", "add-urn"),
                      ("PATCH path-less value {password}", "pathless"),
                      ("PATCH path-less value {PassWord}", "pathless-case"),
                      ("PATCH path-less URN key password", "pathless-urn"),
                      ("POST with password", "post"),
                      ("PUT with password", "put")]:
        C.append(Case("scim", "password: " + name, run=_password_case(how), defect="5"))
    return C


def _password_case(how):
    def run(env):
        srv = env.srv
        secret = "S3cret-%s" % os.urandom(6).hex()
        name = env.fresh_name("pw")
        body = {"schemas": [SCIM_USER_URN], "userName": name}
        if how == "post":
            body["password"] = secret
        r = harness.scim_request(srv, "POST", "/Users", env.scim_a, body)
        if r.status != 201:
            return "could not create the user", "POST %d %r" % (r.status, r.raw[:100])
        uid = r.body["id"]
        urn = SCIM_USER_URN + ":password"
        ops = {"add-path": [{"op": "add", "path": "password", "value": secret}],
               "replace-path": [{"op": "replace", "path": "password", "value": secret}],
               "add-path-upper": [{"op": "add", "path": "PASSWORD", "value": secret}],
               "add-urn": [{"op": "add", "path": urn, "value": secret}],
               "pathless": [{"op": "add", "value": {"password": secret}}],
               "pathless-case": [{"op": "replace", "value": {"PassWord": secret}}],
               "pathless-urn": [{"op": "add", "value": {urn: secret}}]}.get(how)
        observed = []
        if ops is not None:
            w = harness.scim_request(srv, "PATCH", "/Users/" + uid, env.scim_a,
                                     harness.scim_patch_body(*ops))
        elif how == "put":
            w = harness.scim_request(srv, "PUT", "/Users/" + uid, env.scim_a,
                                     {"schemas": [SCIM_USER_URN], "userName": name,
                                      "password": secret})
        else:
            w = r
        observed.append("%s %d" % ("write", w.status))
        if w.status >= 500:
            return "server error %d" % w.status, ", ".join(observed)
        if secret.encode() in w.raw or any(k.lower() == "password" or k.lower().endswith(
                ":password") for k in _walk_keys(w.body if isinstance(w.body, dict) else {})):
            return "the write's answer returns the password", ", ".join(observed)
        g = harness.scim_request(srv, "GET", "/Users/" + uid, env.scim_a)
        observed.append("GET %d" % g.status)
        if secret.encode() in g.raw:
            return "GET returns the password", ", ".join(observed) + " with the secret"
        f = harness.scim_request(srv, "GET", "/Users", env.scim_a,
                                 query={"filter": 'password sw "%s"' % secret[:12]})
        hits = []
        if f.status == 200 and isinstance(f.body, dict):
            hits = [u.get("id") for u in f.body.get("Resources", [])]
        observed.append("filter password sw: %d, %d match" % (f.status, len(hits)))
        if f.status >= 500:
            return "filter on password: server error", ", ".join(observed)
        if uid in hits:
            return "filter on password matches (stored)", ", ".join(observed)
        if secret in srv.log_text():
            return "the password is in the server log", ", ".join(observed)
        return None, ", ".join(observed)
    return run


def cursor_cases(env):
    C = []
    A = env.a
    auth = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id)]
    P = "/v2/portfolios/%s/properties?limit=1&cursor=" % A.id
    c = env.cursor_a
    flip = lambda s, i: s[:i] + ("A" if s[i] != "A" else "B") + s[i + 1:]  # noqa: E731
    std = c.replace("-", "+").replace("_", "/")
    for name, cur in [("last char flipped", flip(c, len(c) - 1)),
                      ("first char flipped", flip(c, 0)),
                      ("middle char flipped", flip(c, len(c) // 2)),
                      ("truncated by 4", c[:-4]),
                      ("truncated to half", c[:len(c) // 2]),
                      ("one char appended", c + "A"),
                      ("padding appended", c + "=="),
                      ("standard base64 alphabet", std if std != c else c + "+/"),
                      ("empty", ""),
                      ("base64 junk !!!!", "!!!!"),
                      ("base64 junk ====", "===="),
                      ("AAAA", "AAAA"),
                      ("10 KB cursor", "A" * 10240),
                      ("cursor with encoded NUL", c + "%00"),
                      ("cursor with invalid escape", c + "%zz"),
                      ("other portfolio's cursor", env.cursor_b),
                      ("other list's cursor (webhooks)", env.cursor_wh),
                      ("JSON-looking cursor", urllib.parse.quote('{"last_id":"prop_0"}', safe="")),
                      ("SQL-looking cursor", urllib.parse.quote("' OR 1=1--", safe=""))]:
        C.append(Case("cursors", "cursor " + name, req("GET", P + cur, auth),
                      Refuse((400,), codes=["SVC-REQUEST-MALFORMED"])))
    L = "/v2/portfolios/%s/properties?limit=" % A.id
    for v in ["0", "-1", "501", "abc", "1e2", "18446744073709551617", "%205", "5%20", "0x10",
              "", "1.5"]:
        C.append(Case("cursors", "limit=" + v, req("GET", L + v, auth),
                      Refuse((400,), codes=["SVC-REQUEST-MALFORMED"])))
    return C


def idempotency_cases(env):
    C = []
    A = env.a
    auth = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id), JSON_CT]
    hook = jdump({"url": PUBLIC_HOOK, "events": ["rate.decision.published"]})
    for name, key, kind in [("256 characters", "k" * 256, "svc"),
                            ("10 KB", "k" * 10240, "svc"),
                            ("empty", "", "svc"),
                            ("only spaces", "   ", "svc"),
                            ("control byte 01", b"ab\x01cd", None),
                            ("DEL", b"ab\x7fcd", None),
                            ("tab inside", b"ab\tcd", None),
                            ("non-ASCII UTF-8", "klucz-\u0105\u0119", None),
                            ("invalid UTF-8", b"key-\xff", None)]:
        C.append(Case("idempotency", "Idempotency-Key " + name,
                      req("POST", "/v2/webhooks", auth + [("Idempotency-Key", key)], body=hook),
                      Refuse((400,), kind=kind, codes=["SVC-REQUEST-MALFORMED"] if kind else None)))

    def reuse(variant):
        def run(env):
            key = "hostile-" + os.urandom(8).hex()
            h = {"Idempotency-Key": key}
            first = env.srv.request("POST", "/v2/webhooks", token=A.token, portfolio=A.id,
                                    headers=h, body={"url": PUBLIC_HOOK,
                                                     "events": ["rate.decision.published"]})
            if first.status != 201:
                return "first request not created", "%d %r" % (first.status, first.raw[:100])
            if variant == "body":
                second = env.srv.request("POST", "/v2/webhooks", token=A.token, portfolio=A.id,
                                         headers=h, body={"url": PUBLIC_HOOK2,
                                                          "events": ["rate.decision.published"]})
            elif variant == "path":
                second = env.srv.request("POST", "/v1/webhooks", token=A.token, headers=h,
                                         body={"url": PUBLIC_HOOK,
                                               "events": ["rate.decision.published"]})
            else:  # same body, one byte of whitespace more
                second = env.srv.request("POST", "/v2/webhooks", token=A.token, portfolio=A.id,
                                         headers=dict(h, **{"Content-Type": "application/json"}),
                                         body=json.dumps({"url": PUBLIC_HOOK, "events": [
                                             "rate.decision.published"]}) + " ")
            return check_response(second, Refuse((422,),
                                                  codes=["SVC-IDEMPOTENCY-KEY-REUSED"]))
        return run
    C.append(Case("idempotency", "key reused with a different body", run=reuse("body")))
    C.append(Case("idempotency", "key reused on another path", run=reuse("path")))
    C.append(Case("idempotency", "key reused with one more byte", run=reuse("ws")))
    return C


def bearer_cases(env):
    C = []
    A, B = env.a, env.b
    P = "/v2/portfolios"
    pf = ("X-Service-Portfolio", A.id)
    unauth = Refuse((401,), codes=["SVC-AUTH-UNAUTHENTICATED"])
    for name, value in [("Bearer without token", "Bearer"),
                        ("Bearer and a space", "Bearer "),
                        ("lowercase scheme, junk token", "bearer rvo_at_" + "x" * 43),
                        ("valid token plus a char", "Bearer " + A.token + "x"),
                        ("valid token minus a char", "Bearer " + A.token[:-1]),
                        ("valid token then junk", "Bearer " + A.token + " junk"),
                        ("valid token then comma", "Bearer " + A.token + ","),
                        ("token prefix only", "Bearer rvo_at_"),
                        ("JWT alg none", "Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0."
                                         "eyJzdWIiOiJhZG1pbiIsInNjb3BlIjoiKiJ9."),
                        ("JWT-looking junk", "Bearer eyJ" + "a" * 100 + ".eyJ" + "b" * 200 + ".sig"),
                        ("token 8 KB", "Bearer " + "t" * 8192),
                        ("Basic scheme", "Basic " + base64.b64encode(b"a:b").decode()),
                        ("scheme only spaces", "   "),
                        ("SCIM token on the API", "Bearer " + env.scim_a),
                        ("token with NUL", b"Bearer " + b(A.token[:10]) + b"\x00" + b(A.token[10:])),
                        ("uppercase token", "Bearer " + A.token.upper()),
                        ("Bearer token quoted", 'Bearer "%s"' % A.token)]:
        C.append(Case("bearer", name, req("GET", P, [("Authorization", value), pf]),
                      unauth if b"\x00" not in b(value) else Refuse((400, 401))))
    C.append(Case("bearer", "token 100 KB", req("GET", P, [("Authorization", "Bearer " + "t" *
                                                            102400), pf]),
                  Harmless((400, 401, 413, 431)), timeout=5))
    C.append(Case("bearer", "token of another portfolio",
                  req("GET", P, [("Authorization", "Bearer " + B.token), pf]),
                  Refuse((403,), codes=["SVC-AUTH-INSUFFICIENT-ROLE"])))
    C.append(Case("bearer", "other portfolio's token on this portfolio's path",
                  req("GET", "/v2/portfolios/%s/properties" % A.id,
                      [("Authorization", "Bearer " + B.token), ("X-Service-Portfolio", B.id)]),
                  Refuse((403,), codes=["SVC-AUTH-INSUFFICIENT-ROLE"])))
    C.append(Case("bearer", "X-Service-Property of another portfolio",
                  req("GET", P, [("Authorization", "Bearer " + A.token), pf,
                                 ("X-Service-Property", B.properties[0]["id"])]),
                  Refuse((403,), codes=["SVC-AUTH-INSUFFICIENT-ROLE"])))
    C.append(Case("bearer", "API token on SCIM",
                  req("GET", "/scim/v2/Users", [("Authorization", "Bearer " + A.token)]),
                  Refuse((401,), kind="scim")))
    C.append(Case("bearer", "other portfolio's SCIM token on a user",
                  req("GET", "/scim/v2/Users/" + env.scim_user["id"],
                      [("Authorization", "Bearer " + env.scim_b)]),
                  Refuse((403, 404), kind="scim")))
    for name, hdrs in [("junk then valid", [("Authorization", "Bearer junk"),
                                            ("Authorization", "Bearer " + A.token)]),
                       ("valid then junk", [("Authorization", "Bearer " + A.token),
                                            ("Authorization", "Bearer junk")]),
                       ("other portfolio's then valid", [("Authorization", "Bearer " + B.token),
                                                         ("Authorization", "Bearer " + A.token)]),
                       ("valid then other portfolio's", [("Authorization", "Bearer " + A.token),
                                                         ("Authorization", "Bearer " + B.token)])]:
        C.append(Case("bearer", "two Authorization headers, " + name,
                      req("GET", P, hdrs + [pf]), Refuse((400, 401, 403))))
    C.append(Case("bearer", "access_token in the query string",
                  req("GET", P + "?access_token=" + A.token, [pf]), Refuse((400, 401))))
    for name, v in [("10 KB", "p" * 10240), ("SQL", "pf_' OR 1=1--"), ("empty", ""),
                    ("two values", "%s, %s" % (A.id, B.id))]:
        C.append(Case("bearer", "X-Service-Portfolio " + name,
                      req("GET", P, [("Authorization", "Bearer " + A.token),
                                     ("X-Service-Portfolio", v)]), Refuse((400, 403))))
    C.append(Case("bearer", "two X-Service-Portfolio headers (other first)",
                  req("GET", P, [("Authorization", "Bearer " + A.token),
                                 ("X-Service-Portfolio", B.id), pf]), Refuse((400, 403))))
    return C


def path_cases(env):
    C = []
    A = env.a
    auth = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id)]
    mal = Refuse((400,), codes=["SVC-REQUEST-MALFORMED"])
    # defect 7, exactly as the issue gives them
    for name, path in [("%00.json after portfolios", b"/v2/portfolios%00.json"),
                       ("raw NUL then ../../admin", b"/v2/portfolios\x00/../../admin"),
                       ("%2f before the id", b"/v2/portfolios%2f" + b(A.id)),
                       ("%2f before properties", b"/v2/portfolios/" + b(A.id) + b"%2fproperties")]:
        C.append(Case("paths", name, req("GET", path, auth), mal, defect="7"))
    # the same class: encoded NUL, encoded slash, raw control bytes
    for name, path in [("%2F uppercase before properties",
                        b"/v2/portfolios/" + b(A.id) + b"%2Fproperties"),
                       ("%00 as the id", b"/v2/portfolios/%00"),
                       ("%00 inside the id", b"/v2/portfolios/" + b(A.id) + b"%00"),
                       ("%2f in the last segment", b"/v2/portfolios/" + b(A.id) + b"%2f"),
                       ("raw 0x01 in the path", b"/v2/portfolios\x01"),
                       ("raw ESC in the path", b"/v2/portfolios/\x1b[2J"),
                       ("raw DEL in the path", b"/v2/portfolios\x7f"),
                       ("raw NUL at the end", b"/v2/portfolios\x00")]:
        C.append(Case("paths", name, req("GET", path, auth), mal, defect="7"))
    any4 = Refuse((400, 403, 404, 405))
    for name, path in [("%2e%2e as the id", "/v2/portfolios/%2e%2e"),
                       ("%2e%2e to /etc/passwd", "/v2/%2e%2e/%2e%2e/etc/passwd"),
                       ("%2e%2e%2f traversal", "/v2/portfolios/%2e%2e%2f%2e%2e%2fhealthz"),
                       ("double slash at the start", "//v2/portfolios"),
                       ("double slash inside", "/v2//portfolios"),
                       ("double slash at the end", "/v2/portfolios//"),
                       ("overlong %c0%af", "/v2/portfolios%c0%af" + A.id),
                       ("overlong %e0%80%af", "/v2/portfolios%e0%80%af" + A.id),
                       ("invalid escape %zz", "/v2/portfolios/%zz"),
                       ("trailing %", "/v2/portfolios%"),
                       ("trailing %2", "/v2/portfolios%2"),
                       ("encoded CRLF", "/v2/portfolios%0d%0aX-Injected:%20yes"),
                       ("encoded backslash", "/v2/portfolios%5c" + A.id),
                       ("raw backslash", "/v2/portfolios\\" + A.id),
                       ("raw UTF-8 in the path", "/v2/portfolios/\u00e9"),
                       ("fragment in the request target", "/v2/portfolios/%s#frag" % A.id),
                       ("matrix parameter", "/v2/portfolios;jsessionid=x"),
                       ("uppercase path", "/V2/PORTFOLIOS"),
                       ("path segment 8 KiB", "/v2/portfolios/" + "p" * 8192),
                       ("id of another portfolio", "/v2/portfolios/" + env.b.id),
                       ("double-encoded slash %252f", "/v2/portfolios%252f" + A.id),
                       ("query with 40 parameters", "/v2/portfolios?" + "&".join(
                           "p%d=1" % i for i in range(40))),
                       ("query with a bare %", "/v2/portfolios?limit=%"),
                       ("query with a trailing escape", "/v2/portfolios?limit=1%2")]:
        C.append(Case("paths", name, req("GET", path, auth), any4))
    C.append(Case("paths", "encoded CRLF does not inject a header",
                  req("GET", "/v2/portfolios%0d%0aX-Injected:%20yes", auth),
                  _NoHeader("X-Injected")))
    # defect 1: the query libmicrohttpd cannot parse within its memory limit
    for n in (600, 10000):
        C.append(Case("paths", "query of %d bare parameters (unauthenticated)" % n,
                      req("GET", "/v2/portfolios?" + "&".join(["a"] * n)),
                      Harmless(until_close=True), defect="1"))
    return C


class _NoHeader(Expect):
    def __init__(self, name):
        self.name = name

    def check(self, o):
        p = _first_problems(o)
        if p:
            return p
        if o.responses and self.name in o.responses[0][1]:
            return "response carries an injected %s header" % self.name
        if o.responses and not 400 <= o.responses[0][0] < 500:
            return "status %d" % o.responses[0][0]
        return None if o.responses else "no answer"


def token_cases(env):
    C = []
    A, B = env.a, env.b
    T = "/oauth/token"
    cc = "grant_type=client_credentials"
    basic = lambda raw: ("Authorization", "Basic " + base64.b64encode(raw).decode())  # noqa
    good = harness.basic_auth(A.client_id, A.client_secret)
    o4 = lambda *codes, st=(400, 401): Refuse(st, kind="oauth", codes=list(codes) or None)  # noqa
    for name, hdrs, body, exp in [
            ("Basic not base64", [("Authorization", "Basic !!!!")], cc, o4()),
            ("Basic empty", [("Authorization", "Basic ")], cc, o4()),
            ("Basic without colon", [basic(b"nocolon")], cc, o4()),
            ("Basic with NUL", [basic(b(A.client_id) + b":\x00" + b(A.client_secret))], cc, o4()),
            ("Basic wrong secret", [basic(b(A.client_id) + b":wrong")], cc,
             o4("invalid_client", st=(401,))),
            ("Basic id of A, secret of B", [basic(b(A.client_id) + b":" + b(B.client_secret))], cc,
             o4("invalid_client", st=(401,))),
            ("Basic 8 KB", [("Authorization", "Basic " + "QUFB" * 2048)], cc, o4()),
            ("Basic with invalid UTF-8", [basic(b"\xff\xfe:\xff")], cc, o4()),
            ("Basic and body credentials", [("Authorization", good)],
             cc + "&client_id=%s&client_secret=%s" % (A.client_id, A.client_secret),
             o4("invalid_request", st=(400,))),
            ("huge scope (200 KB of unknown scopes)", [("Authorization", good)],
             cc + "&scope=" + "+".join("s%05d" % i for i in range(33000)),
             o4("invalid_scope", st=(400,))),
            ("10000 property items", [("Authorization", good)],
             cc + "&scope=" + "+".join("property:X%04d" % i for i in range(10000)), o4(st=(400,))),
            ("scope with control bytes", [("Authorization", good)], cc + "&scope=rates:read%01",
             o4(st=(400,))),
            ("scope with NUL", [("Authorization", good)], cc + "&scope=rates:read%00rates:write",
             o4(st=(400,))),
            ("unknown scope", [("Authorization", good)], cc + "&scope=admin", o4(
                "invalid_scope", st=(400,))),
            ("property traversal scope", [("Authorization", good)],
             cc + "&scope=property:..%2f..%2fx", o4("invalid_scope", st=(400,))),
            ("unknown grant password", [("Authorization", good)], "grant_type=password&username=a"
             "&password=b", o4("unsupported_grant_type", st=(400,))),
            ("grant_type uppercase", [("Authorization", good)], "grant_type=CLIENT_CREDENTIALS",
             o4("unsupported_grant_type", st=(400,))),
            ("grant_type empty", [("Authorization", good)], "grant_type=", o4(st=(400,))),
            ("grant_type missing", [("Authorization", good)], "scope=rates:read",
             o4("invalid_request", st=(400,))),
            ("repeated grant_type", [("Authorization", good)], cc + "&" + cc,
             o4("invalid_request", st=(400,))),
            ("repeated scope", [("Authorization", good)], cc + "&scope=rates:read&scope=rates:write",
             o4("invalid_request", st=(400,))),
            ("invalid escape", [("Authorization", good)], "grant_type=%zz", o4(st=(400,))),
            ("client_secret 10 KB in the body", [],
             cc + "&client_id=%s&client_secret=%s" % (A.client_id, "s" * 10240), o4()),
            ("client_id with NUL in the body", [],
             cc + "&client_id=%s%%00&client_secret=%s" % (A.client_id, A.client_secret), o4()),
            ("5000 form fields", [("Authorization", good)], cc + "&" + "&".join(
                "f%d=1" % i for i in range(5000)), o4(st=(400,)))]:
        C.append(Case("token", name, req("POST", T, [FORM_CT] + hdrs, body=body), exp))
    for name, ct in [("application/json", "application/json"), ("text/plain", "text/plain"),
                     ("multipart", "multipart/form-data; boundary=x"), ("none", None)]:
        hdrs = [("Authorization", good)] + ([("Content-Type", ct)] if ct else [])
        C.append(Case("token", "content type " + name,
                      req("POST", T, hdrs, body=cc if ct != "application/json" else
                          '{"grant_type":"client_credentials"}'),
                      o4("invalid_request", st=(400,))))
    C.append(Case("token", "form body over 1 MiB",
                  req("POST", T, [FORM_CT, ("Authorization", good)],
                      body=cc + "&x=" + "a" * (1024 * 1024)),
                  Refuse((413,), codes=["SVC-PAYLOAD-TOO-LARGE"], close=True),
                  timeout=BIG_TIMEOUT))
    C.append(Case("token", "GET on the token endpoint",
                  req("GET", T + "?" + cc, [("Authorization", good)]),
                  Refuse((405,), codes=["SVC-METHOD-NOT-ALLOWED"])))
    return C


def saml_cases(env):
    import idp as idplib
    C = []
    T = "/oauth/token"
    G = harness.SAML_GRANT

    def grant(raw):
        body = "grant_type=%s&assertion=%s" % (urllib.parse.quote(G, safe=""),
                                               urllib.parse.quote(raw, safe=""))
        return req("POST", T, [FORM_CT], body=body)
    refuse = Refuse((400,), kind="oauth", codes=["invalid_grant", "invalid_request"])
    for name, raw in [("junk base64", "!!!not base64***"), ("one char", "a"),
                      ("padding only", "===="), ("spaces", "a b c"),
                      ("standard alphabet + and /", "PHNhbWw+/+/+/"),
                      ("empty assertion", ""),
                      ("NUL in base64", "PHNh\x00bWw"),
                      ("base64 of 100 KB", idplib.b64url(b"<a>" + b"x" * 102400 + b"</a>"))]:
        C.append(Case("saml", "assertion " + name, grant(raw), refuse))
    idp = env.idp
    admin = env.saml_admin
    docs = [("not XML", b"hello, not xml"),
            ("unclosed XML", b"<saml:Assertion"),
            ("mismatched tags", b"<a></b>"),
            ("binary", b"\x00\x01\x02\xff"),
            ("another root element", b'<?xml version="1.0"?><root/>'),
            ("UTF-16 XML", '<?xml version="1.0" encoding="UTF-16"?><a/>'.encode("utf-16")),
            ("10000 nested elements", b"<a>" * 10000 + b"</a>" * 10000),
            ("unsigned assertion", idp.assertion(admin, sign=False)),
            ("empty signature template", idp.build(admin).encode()),
            ("signed by another key", env.idp_forged.assertion(admin)),
            ("signed by another key, no KeyInfo", env.idp_forged.assertion(admin, key_info=False)),
            ("unknown issuer", idp.assertion(admin, issuer="https://unknown-idp.example")),
            ("SHA-1 signature", idp.assertion(admin, algorithm="sha1")),
            ("tampered NameID", idplib.replace_name_id(idp.assertion("someone@hostile.example"),
                                                       "someone@hostile.example", admin)),
            ("comment injected in NameID",
             idp.assertion(admin + "<!---->.evil.example", name_id_raw=True)),
            ("XSW: unsigned root around a signed assertion",
             idplib.wrap_in_root(idp.assertion("w1@hostile.example"),
                                 idp.build(admin, signature_template=False))),
            ("XSW: unsigned assertion in Advice",
             idplib.nest_in_advice(idp.assertion("w2@hostile.example"),
                                   idp.build(admin, signature_template=False))),
            ("XSW: unsigned assertion in Signature Object",
             idplib.nest_in_signature_object(idp.assertion("w3@hostile.example"),
                                             idp.build(admin, signature_template=False))),
            ("XXE file:///etc/passwd declared",
             idplib.with_doctype(idp.assertion(admin), '<!ENTITY xxe SYSTEM "file:///etc/passwd">')),
            ("XXE entity used in the NameID",
             idplib.with_doctype(idp.assertion("__X__@hostile.example"),
                                 '<!ENTITY xxe SYSTEM "file:///etc/hostname">').replace(
                                     b"__X__", b"&xxe;")),
            ("billion laughs", idplib.with_doctype(
                idp.assertion(admin), '<!ENTITY a "aaaaaaaaaa">' + "".join(
                    '<!ENTITY %s "%s">' % (chr(98 + i), ("&%s;" % chr(97 + i)) * 10)
                    for i in range(9)) + "").replace(b"</saml:Assertion>",
                                                     b"&j;</saml:Assertion>")),
            ("parameter entity to a URL", idplib.with_doctype(
                idp.assertion(admin), '<!ENTITY % p SYSTEM "http://127.0.0.1:1/x.dtd"> %p;')),
            ("XInclude", idp.assertion(admin, sign=False).replace(
                b"<saml:Subject>", b'<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" '
                                   b'href="file:///etc/passwd" parse="text"/><saml:Subject>')),
            ("expired", idp.assertion(admin, not_before=idplib.now_utc() - _td(900),
                                      not_on_or_after=idplib.now_utc() - _td(300))),
            ("holder-of-key confirmation only",
             idp.assertion(admin, confirmation_method=idplib.HOLDER_OF_KEY)),
            ("wrong audience", idp.assertion(admin, audience="https://evil.example/saml/sp"))]
    for name, doc in docs:
        C.append(Case("saml", name, grant(idplib.b64url(doc)), refuse))
    C.append(Case("saml", "replayed assertion", run=_saml_replay))
    C.append(Case("saml", "no ACS endpoint to post a SAMLResponse to",
                  req("POST", "/saml/acs", [FORM_CT],
                      body="SAMLResponse=" + urllib.parse.quote(idplib.b64url(b"<junk/>"))),
                  Refuse((404, 405))))
    return C


def _td(s):
    import datetime
    return datetime.timedelta(seconds=s)


def _saml_replay(env):
    name = env.fresh_name("saml")
    xml = env.idp.assertion(name)
    first = harness.saml_grant(env.srv, xml)
    if first.status != 200:
        return "the fresh assertion was refused", "%d %r" % (first.status, first.raw[:120])
    second = harness.saml_grant(env.srv, xml)
    return check_response(second, Refuse((400,), kind="oauth", codes=["invalid_grant"]))


SSRF_URLS = [
    # loopback in its many spellings
    "https://127.0.0.1/x", "https://127.0.0.1:8443/x", "https://127.1/x", "https://127.0.1/x",
    "https://0177.0.0.1/x", "https://0x7f.0.0.1/x", "https://0x7f000001/x", "https://2130706433/x",
    "https://017700000001/x", "https://127.0.0.1./x", "https://0/x", "https://0.0.0.0/x",
    "https://127.255.255.254/x", "HTTPS://127.0.0.1/x",
    # private, CGNAT, link-local, metadata
    "https://10.0.0.1/x", "https://10.255.255.255/x", "https://172.16.0.1/x",
    "https://172.31.255.255/x", "https://192.168.1.1/x", "https://100.64.0.1/x",
    "https://169.254.169.254/latest/meta-data/", "https://169.254.0.1/x",
    # special-purpose
    "https://224.0.0.1/x", "https://255.255.255.255/x", "https://192.0.2.1/x",
    "https://198.18.0.1/x", "https://240.0.0.1/x", "https://192.0.0.1/x",
    # IPv6
    "https://[::1]/x", "https://[::]/x", "https://[::ffff:127.0.0.1]/x", "https://[::ffff:7f00:1]/x",
    "https://[0:0:0:0:0:ffff:127.0.0.1]/x", "https://[::ffff:169.254.169.254]/x",
    "https://[::ffff:10.0.0.1]/x", "https://[fe80::1]/x", "https://[fe80::1%25eth0]/x",
    "https://[fc00::1]/x", "https://[fd00:ec2::254]/x", "https://[64:ff9b::7f00:1]/x",
    "https://[2002:7f00:1::]/x", "https://[::127.0.0.1]/x", "https://[ff02::1]/x",
    "https://[2001:db8::1]/x", "https://[::1/x", "https://::1/x",
    # userinfo tricks
    "https://good@127.0.0.1/x", "https://user:pass@93.184.216.34/x",
    "https://93.184.216.34@127.0.0.1/x", "https://93.184.216.34:443@127.0.0.1/x",
    "https://127.0.0.1#@93.184.216.34/x", "https://93.184.216.34\\@127.0.0.1/x",
    "https://93.184.216.34%40127.0.0.1/x", "https://127.0.0.1%2f@93.184.216.34/x",
    # not https
    "http://93.184.216.34/x", "ftp://93.184.216.34/x", "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO", "javascript:alert(1)", "//93.184.216.34/x",
    "https:93.184.216.34/x", "https:/93.184.216.34/x", " https://93.184.216.34/x",
    "https://93.184.216.34/x\r\nX-Injected: 1", "data:text/plain,hi", "dict://127.0.0.1:11211/",
    "", "https://",
    # ports
    "https://93.184.216.34:0/x", "https://93.184.216.34:65536/x", "https://93.184.216.34:-1/x",
    "https://93.184.216.34:99999999999999999999/x", "https://93.184.216.34:443abc/x",
    # names
    "https://localhost/x", "https://LOCALHOST./x", "https://foo.localhost/x",
    "https://localhost:443/x", "https://localhost.localdomain/x",
    # IDN and other junk hosts
    "https://ex\u00e4mple.com/x", "https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/x",
    "https://xn--/x", "https://a..b/x", "https://" + "a" * 64 + ".com/x", "https://-a.com/x",
    "https://93.184.216.34 /x", "https://93.184.216.34\u0000.evil/x", "https://%31%32%37.0.0.1/x",
    "https://\u2474\u2477\u2476.0.0.1/x",
    # over-long
    "https://93.184.216.34/" + "a" * 3000,
]


def ssrf_cases(env):
    C = []
    A = env.a
    v2 = [("Authorization", "Bearer " + A.token), ("X-Service-Portfolio", A.id), JSON_CT]
    v1 = [("Authorization", "Bearer " + A.token), JSON_CT]
    exp = lambda f: Refuse((400,), codes=["SVC-VALIDATION-FAILED", "SVC-REQUEST-MALFORMED"],  # noqa
                           field=f)
    for u in SSRF_URLS:
        C.append(Case("ssrf", "v2 url %r" % u[:70],
                      req("POST", "/v2/webhooks", v2,
                          body=jdump({"url": u, "events": ["rate.decision.published"]})),
                      exp("url")))
    for u in SSRF_URLS[::4]:
        C.append(Case("ssrf", "v2 mirror_url %r" % u[:70],
                      req("POST", "/v2/webhooks", v2,
                          body=jdump({"url": PUBLIC_HOOK, "mirror_url": u,
                                      "events": ["rate.decision.published"]})),
                      exp("mirror_url")))
    for u in SSRF_URLS[1::4]:
        C.append(Case("ssrf", "v1 url %r" % u[:70],
                      req("POST", "/v1/webhooks", v1,
                          body=jdump({"url": u, "events": ["rate.suggested"]})),
                      exp("url")))
    return C


def slow_cases(env):
    """Slow clients.  The server's idle timeout is env.idle_timeout; a
    client that keeps sending a byte every 100 ms never goes idle, so these
    need a bound on the whole request, not only on silence."""
    C = []
    bound = env.slow_bound
    quiet = env.idle_timeout + 3.0
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 400 + b"\r\n\r\n"

    def cut_off(data, interval, limit, what):
        def run(env):
            o = trickle(env.port, data, interval, limit + 1.0)
            ok = [r for r in o.responses if 200 <= r[0] < 300]
            if ok:
                return "the slow request was served (%d)" % ok[0][0], describe(o)
            if any(r[0] >= 500 for r in o.responses):
                return "server error", describe(o)
            if not o.closed or o.elapsed > limit:
                return "%s still open after %.1fs (bound %.0fs)" % (what, o.elapsed, limit), \
                    describe(o)
            return None, describe(o)
        return run
    C.append(Case("slow", "headers at 1 byte / 100 ms",
                  run=cut_off(head, 0.1, bound, "connection")))
    C.append(Case("slow", "request line at 1 byte / 100 ms",
                  run=cut_off(b"GET /healthz?" + b"q" * 400 + b" HTTP/1.1\r\n\r\n", 0.1, bound,
                              "connection")))
    body_head = (b"POST /oauth/token HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 400\r\n\r\n")

    C.append(Case("slow", "body at 1 byte / 100 ms",
                  run=cut_off(body_head + b"x" * 400, 0.1, bound, "connection")))

    def silent(data, expect_status=None):
        def run(env):
            o = silent_after(env.port, data, quiet)
            if any(r[0] >= 500 or 200 <= r[0] < 300 for r in o.responses
                   if r[0] != expect_status):
                return "unexpected answer", describe(o)
            if expect_status and not any(r[0] == expect_status for r in o.responses):
                return "no %d first" % expect_status, describe(o)
            if not o.closed:
                return "not closed within the idle timeout + 3 s", describe(o)
            return None, describe(o)
        return run
    C.append(Case("slow", "partial headers then silence",
                  run=silent(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: ")))
    C.append(Case("slow", "partial body then silence",
                  run=silent(body_head + b"grant_type=")))
    C.append(Case("slow", "NUL-first request line",
                  run=silent(b"\x00\x00\x00GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")))
    C.append(Case("slow", "idle keep-alive after an answer",
                  run=silent(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 200)))
    for c in C:
        c.background = True
    return C


def build_cases(env):
    cases = []
    for fn in (slow_cases, framing_cases, request_line_cases, header_cases, body_cases, utf8_cases,
               json_cases, wrong_type_cases, scim_cases, cursor_cases, idempotency_cases,
               bearer_cases, path_cases, token_cases, saml_cases, ssrf_cases):
        cases += fn(env)
    names = set()
    for c in cases:
        key = (c.cat, c.name)
        if key in names:
            raise AssertionError("duplicate case name %s/%s" % key)
        names.add(key)
    return cases


# ---------------------------------------------------------------------------
# slow clients: each runs in its own thread for up to `bound` seconds

def trickle(port, data, interval, bound):
    """Sends data one byte every `interval` seconds; returns (closed_at or
    None, responses seen).  Stops when the server closes or after bound."""
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=bound)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    o = Outcome()
    try:
        i = 0
        while time.monotonic() - t0 < bound:
            if i < len(data):
                try:
                    s.send(data[i:i + 1])
                except OSError:
                    o.closed = True
                    break
                i += 1
            r, _, _ = select.select([s], [], [], interval)
            if r:
                try:
                    chunk = s.recv(65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    o.closed = True
                    break
                buf = _parse_all(buf + chunk, o)
        else:
            o.timed_out = True
    finally:
        o.elapsed = time.monotonic() - t0
        s.close()
    return o


def silent_after(port, data, bound):
    """Sends data, then nothing; waits for the server to close."""
    return exchange(port, data, until_close=True, timeout=bound)
