"""Shared helpers for the revops black-box API suites (Python 3 stdlib only).

A `Server` owns one temporary data directory and one `revopsd` process on a
free loopback port.  Suites talk to it only over HTTP (`request`, `client`,
`RawConn`) and set data up with `revopsctl` (`ctl`, `seed_portfolio`).

Binaries come from $REVOPS_BIN_DIR (default: build/ of this repository).  Set
REVOPS_KEEP_DATA=1 to keep data directories (and their logs) after a run.
The database is SQLite in the data directory, or a PostgreSQL database of
the server's own with REVOPS_TEST_BACKEND=postgres (backend.py).
"""

import base64
import calendar
import datetime
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

import backend

# The repository this file belongs to (t/api/lib/harness.py), wherever it
# is checked out: the suites find docs/, scripts/, tools/ and t/js/ from it.
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "..", "..", ".."))
# The built binaries: REVOPS_BIN_DIR (ctest sets it), else build/ of ROOT.
BIN_DIR = os.environ.get("REVOPS_BIN_DIR") or os.path.join(ROOT, "build")
REVOPSD = os.path.join(BIN_DIR, "revopsd")
REVOPSCTL = os.path.join(BIN_DIR, "revopsctl")

REQUEST_ID_RE = re.compile(r"^req_[0-9A-HJKMNP-TV-Z]{26}$")
DATETIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
DATE_RE = re.compile(r"^\d{4}-\d\d-\d\d$")
NONNEG_INT_RE = re.compile(r"^[0-9]+$")

ALL_SCOPES = frozenset([
    "portfolios:read", "rates:read", "rates:write", "webhooks:manage",
    "guest-threads:read", "alerts:read", "tasks:read", "tasks:write",
    "fiscal:write", "audit:read", "feeds:write", "reviews:read", "reviews:write",
    "guest-threads:write", "fiscal:read",
])

SLA_TIER = {"enterprise": "platinum", "group": "gold", "chain_starter": "standard"}
MAX_PAGE = {"enterprise": 500, "group": 200, "chain_starter": 100}

START_DEADLINE = 10.0
STOP_DEADLINE = 10.0
CTL_TIMEOUT = 30.0


# --------------------------------------------------------------------------
# small utilities

def wait_until(predicate, timeout, interval=0.02, what="condition"):
    """Polls predicate() until it returns a truthy value; returns that value.

    Raises AssertionError naming `what` when `timeout` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s (last value %r)"
                                 % (timeout, what, last))
        time.sleep(interval)


class CIDict(dict):
    """Response headers, looked up case-insensitively.

    Keys are stored lower-case; repeated headers are joined with ", " (and
    every value is kept in `all`)."""

    def __init__(self, pairs=()):
        super().__init__()
        self.all = {}
        for k, v in pairs:
            lk = k.lower()
            self.all.setdefault(lk, []).append(v)
            dict.__setitem__(self, lk, ", ".join(self.all[lk]))

    def __getitem__(self, k):
        return dict.__getitem__(self, k.lower())

    def __contains__(self, k):
        return dict.__contains__(self, k.lower())

    def get(self, k, default=None):
        return dict.get(self, k.lower(), default)

    def get_all(self, k):
        return list(self.all.get(k.lower(), []))


class Response(tuple):
    """(status, headers, body) with names: body is parsed JSON when the
    response says it is JSON (and parses), else raw bytes."""

    def __new__(cls, status, headers, body, raw):
        self = tuple.__new__(cls, (status, headers, body))
        self.raw = raw
        return self

    status = property(lambda self: self[0])
    headers = property(lambda self: self[1])
    body = property(lambda self: self[2])

    def __repr__(self):
        raw = self.raw if len(self.raw) < 2000 else self.raw[:2000] + b"..."
        return "<Response %d %r %r>" % (self.status, dict(self.headers), raw)


def _decode_body(headers, raw):
    ctype = headers.get("content-type", "") or ""
    if "json" in ctype.lower():
        try:
            return json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return raw
    return raw


def _encode_body(body, headers):
    if body is None:
        return None
    if isinstance(body, (dict, list)):
        if not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/json"
        return json.dumps(body).encode("utf-8")
    if isinstance(body, str):
        return body.encode("utf-8")
    return body


def _build_headers(headers, token, portfolio, property):
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = "Bearer " + token
    if portfolio is not None:
        h["X-Service-Portfolio"] = portfolio
    if property is not None:
        h["X-Service-Property"] = property
    return h


def basic_auth(client_id, secret):
    """RFC 6749 §2.3.1: form-encode each part, then HTTP Basic."""
    pair = "%s:%s" % (urllib.parse.quote(client_id, safe=""),
                      urllib.parse.quote(secret, safe=""))
    return "Basic " + base64.b64encode(pair.encode()).decode()


def add_months(dt, months):
    """dt + months calendar months (day clamped to the month's length)."""
    m = dt.month - 1 + months
    year, month = dt.year + m // 12, m % 12 + 1
    day = min(dt.day, calendar.monthrange(year, month)[1])
    return dt.replace(year=year, month=month, day=day)


def imf_fixdate(dt):
    """RFC 9110 IMF-fixdate of a UTC datetime, e.g. 'Tue, 01 Dec 2027 00:00:00 GMT'."""
    days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
              "Nov", "Dec"]
    return "%s, %02d %s %04d %02d:%02d:%02d GMT" % (
        days[dt.weekday()], dt.day, months[dt.month - 1], dt.year, dt.hour, dt.minute,
        dt.second)


def parse_rfc3339(s):
    """An RFC 3339 instant as the server writes them (…Z or an offset, with
    or without a fraction of a second) -> an aware datetime."""
    t = s.replace("Z", "+0000")
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return datetime.datetime.strptime(t, fmt)
        except ValueError:
            pass
    raise AssertionError("not an RFC 3339 datetime: %r" % (s,))


def epoch(s):
    """An RFC 3339 instant (parse_rfc3339) -> unix seconds (float)."""
    return parse_rfc3339(s).timestamp()


# --------------------------------------------------------------------------
# assertions shared by the suites

def assert_common_headers(tc, resp):
    """X-Request-Id and the two rate-limit headers on every response."""
    h = resp.headers
    rid = h.get("X-Request-Id")
    tc.assertIsNotNone(rid, "X-Request-Id missing: %r" % (resp,))
    tc.assertRegex(rid, REQUEST_ID_RE)
    for name in ("X-Service-Ratelimit-Remaining", "X-Service-Ratelimit-Reset"):
        v = h.get(name)
        tc.assertIsNotNone(v, "%s missing: %r" % (name, resp))
        tc.assertRegex(v.strip(), NONNEG_INT_RE, "%s not a non-negative integer" % name)
    return rid


def assert_success(tc, resp, status=200, v2=True):
    """Success envelope: {"data", "meta": {"request_id" == header, ...}};
    v2 responses also carry meta.portfolio_id.  Returns (data, meta)."""
    tc.assertEqual(resp.status, status, resp)
    rid = assert_common_headers(tc, resp)
    body = resp.body
    tc.assertIsInstance(body, dict, resp)
    tc.assertEqual(set(body), {"data", "meta"}, resp)
    meta = body["meta"]
    tc.assertIsInstance(meta, dict, resp)
    tc.assertEqual(meta.get("request_id"), rid, resp)
    if v2:
        tc.assertIn("portfolio_id", meta, resp)
    return body["data"], meta


def assert_error(tc, resp, status, code=None):
    """Error envelope: exactly {"error": {code, message, request_id[, details]}}
    with request_id equal to the header.  Returns the inner error object."""
    tc.assertEqual(resp.status, status, resp)
    rid = assert_common_headers(tc, resp)
    body = resp.body
    tc.assertIsInstance(body, dict, resp)
    tc.assertEqual(list(body), ["error"], resp)
    err = body["error"]
    tc.assertIsInstance(err, dict, resp)
    tc.assertTrue({"code", "message", "request_id"} <= set(err), resp)
    tc.assertTrue(set(err) <= {"code", "message", "request_id", "details"}, resp)
    tc.assertIsInstance(err["message"], str, resp)
    tc.assertTrue(err["message"], resp)
    tc.assertEqual(err["request_id"], rid, resp)
    if "details" in err:
        tc.assertIsInstance(err["details"], list, resp)
    if code is not None:
        tc.assertEqual(err["code"], code, resp)
    return err


def assert_oauth_error(tc, resp, status, error):
    """RFC 6749 §5.2 error body {"error": "<code>", ...} plus our headers."""
    tc.assertEqual(resp.status, status, resp)
    assert_common_headers(tc, resp)
    tc.assertIsInstance(resp.body, dict, resp)
    tc.assertEqual(resp.body.get("error"), error, resp)


# --------------------------------------------------------------------------
# HTTP over http.client

class Client:
    """One persistent (keep-alive) HTTP/1.1 connection to the server."""

    def __init__(self, port, timeout=10.0):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method, path, headers=None, body=None, token=None, portfolio=None,
                property=None):
        h = _build_headers(headers, token, portfolio, property)
        data = _encode_body(body, h)
        self.conn.request(method, path, body=data, headers=h)
        r = self.conn.getresponse()
        raw = r.read()
        hdrs = CIDict(r.getheaders())
        return Response(r.status, hdrs, _decode_body(hdrs, raw), raw)

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def http_request(port, method, path, headers=None, body=None, token=None, portfolio=None,
                 property=None, timeout=10.0):
    c = Client(port, timeout)
    try:
        return c.request(method, path, headers, body, token, portfolio, property)
    finally:
        c.close()


# --------------------------------------------------------------------------
# raw sockets, for malformed HTTP

class ConnectionClosed(Exception):
    pass


def parse_response(buf):
    """Parses one HTTP/1.1 response at the start of buf.

    Returns (status, CIDict headers, body, rest of buf), or None while buf
    holds less than a complete response.  Bodies are delimited by
    Content-Length or chunked encoding (no read-until-close bodies)."""
    if b"\r\n\r\n" not in buf:
        return None
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ValueError("not an HTTP status line: %r" % lines[0])
    status = int(parts[1])
    hdrs = CIDict(tuple(p.strip() for p in l.split(":", 1)) for l in lines[1:] if ":" in l)
    if "chunked" in hdrs.get("transfer-encoding", "").lower():
        body = b""
        while True:
            if b"\r\n" not in rest:
                return None
            size_line, after = rest.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if len(after) < size + 2:
                return None
            body += after[:size]
            rest = after[size + 2:]
            if size == 0:
                return status, hdrs, body, rest
    n = int(hdrs.get("content-length", "0"))
    if len(rest) < n:
        return None
    return status, hdrs, rest[:n], rest[n:]


class RawConn:
    """A plain TCP connection with a minimal HTTP/1.1 response reader."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, data):
        """Sends all of data; returns False if the server closed/reset first."""
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def send_watching(self, data, chunk=65536):
        """Sends data in pieces, stopping early when the server answers (or
        closes, or stops reading for the socket timeout).  Returns True if
        everything was sent.  Lets a test send a big body without losing an
        early 413 to a connection reset."""
        view = memoryview(data)
        while view:
            r, _, _ = select.select([self.sock], [], [], 0)
            if r:
                return False
            try:
                n = self.sock.send(view[:chunk])
            except (BrokenPipeError, ConnectionResetError, socket.timeout):
                return False
            view = view[n:]
        return True

    def _fill(self):
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            raise ConnectionClosed()
        self.buf += chunk

    def read_response(self):
        """Reads one response: (status, CIDict headers, body bytes).

        Raises ConnectionClosed if the server closes before a complete
        response arrives, socket.timeout if nothing comes in time."""
        while True:
            parsed = parse_response(self.buf)
            if parsed is not None:
                status, hdrs, body, self.buf = parsed
                return status, hdrs, body
            self._fill()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


# --------------------------------------------------------------------------
# the server under test

class Server:
    """A revopsd on 127.0.0.1:<free port> with its own data directory.

    Use as a context manager or call start()/stop().  start=False lets a
    suite prepare the database with ctl() before the first start.
    """

    _seq = 0

    def __init__(self, extra_args=(), start=True, data_dir=None, db=None, log_dir=None):
        """db: another Server's database, to run a second node on (the
        caller keeps the first Server until this one is done). log_dir:
        where its logs go (the data directory by default)."""
        self.extra_args = list(extra_args)
        self.log_dir = log_dir
        self.own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="revops-api-")
        self.own_db = db is None
        self.db = db or backend.Database(self.data_dir)
        self.proc = None
        self.port = None
        self.log_path = None
        self.log_file = None
        self.starts = 0
        self._code_seq = 0
        if start:
            try:
                self.start()
            except BaseException:
                self.cleanup()  # the exception already carries the log
                raise

    # lifecycle -------------------------------------------------------------

    def start(self, extra_args=None, wrap=()):
        """Starts revopsd and waits for its 'listening' event (10 s).
        wrap: a command revopsd runs under (a debugger: its arguments end
        with "--args"); self.proc is then that command's process."""
        if self.proc is not None:
            raise RuntimeError("already running")
        if extra_args is not None:
            self.extra_args = list(extra_args)
        if not os.access(REVOPSD, os.X_OK):
            raise RuntimeError("no revopsd at %s (set REVOPS_BIN_DIR)" % REVOPSD)
        self.starts += 1
        # A server sharing another's directory (a second PostgreSQL node)
        # logs to files of its own.
        self.log_path = os.path.join(self.log_dir or self.data_dir, "revopsd-%s%d.log" % (
            "" if self.own_dir else "%x-" % id(self), self.starts))
        self.log_file = open(self.log_path, "wb")
        argv = list(wrap) + [REVOPSD, "--listen", "127.0.0.1:0", "--data-dir", self.data_dir,
                             "--log-format", "json"] + self.db.args() + self.extra_args
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,  # a wrapper's words too
                                     stdout=self.log_file if wrap else subprocess.DEVNULL,
                                     stderr=self.log_file,
                                     env=_child_env())
        self.port = None
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            ev = self._find_event("listening")
            if ev is not None:
                m = re.search(r"port=(\d+)", ev.get("msg", ""))
                if not m:
                    self._abort("'listening' event without port=: %r" % (ev,))
                self.port = int(m.group(1))
                return self
            if self.proc.poll() is not None:
                self._abort("revopsd exited with %s before listening" % self.proc.returncode)
            time.sleep(0.01)
        self._abort("revopsd did not log 'listening' within %.0fs" % START_DEADLINE)

    def _abort(self, why):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self._close_log()
        raise RuntimeError("%s\n--- revopsd log (%s) ---\n%s" % (why, self.log_path,
                                                                 self.log_text()))

    def _close_log(self):
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait_exit(self, timeout):
        """Waits for the process; returns its exit code or None on timeout
        (the process is then still running and still owned by this Server)."""
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.proc = None
        self._close_log()
        return rc

    def stop(self, timeout=STOP_DEADLINE):
        """SIGTERM, wait, and require exit code 0 (killing it otherwise)."""
        if self.proc is None:
            return
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            self.proc = None
            self._close_log()
            log = self.log_text()
            sys.stderr.write("--- revopsd log (killed) ---\n%s\n" % log)
            raise AssertionError("revopsd did not exit within %.0fs of SIGTERM" % timeout)
        self.proc = None
        self._close_log()
        if rc != 0:
            log = self.log_text()
            sys.stderr.write("--- revopsd log (exit %s) ---\n%s\n" % (rc, log))
            raise AssertionError("revopsd exited with %s after SIGTERM" % rc)

    def restart(self, extra_args=None):
        self.stop()
        return self.start(extra_args)

    def cleanup(self):
        """Stops (without asserting) and removes the data directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self._close_log()
        if os.environ.get("REVOPS_KEEP_DATA"):
            return
        if self.own_db:
            self.db.drop()  # the Server's own, whoever owns the directory
        if self.own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def close(self):
        """stop() (asserting a clean exit), then cleanup()."""
        try:
            self.stop()
        finally:
            self.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # logs ------------------------------------------------------------------

    def log_text(self, path=None):
        try:
            with open(path or self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def log_events(self, path=None):
        out = []
        for line in self.log_text(path).splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def _find_event(self, name):
        for ev in self.log_events():
            if isinstance(ev, dict) and ev.get("event") == name:
                return ev
        return None

    # HTTP ------------------------------------------------------------------

    @property
    def base_url(self):
        return "http://127.0.0.1:%d" % self.port

    def request(self, method, path, headers=None, body=None, token=None, portfolio=None,
                property=None, timeout=10.0):
        """One request on a fresh connection → Response(status, headers, body)."""
        return http_request(self.port, method, path, headers, body, token, portfolio,
                            property, timeout)

    def client(self, timeout=10.0):
        """A keep-alive Client (same request() signature)."""
        return Client(self.port, timeout)

    def raw(self, timeout=5.0):
        return RawConn(self.port, timeout)

    def token(self, client_id, secret, scope=None, basic=True, extra=None, grant_type=
              "client_credentials"):
        """POST /oauth/token (form-encoded) → Response."""
        form = []
        if grant_type is not None:
            form.append(("grant_type", grant_type))
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if basic:
            headers["Authorization"] = basic_auth(client_id, secret)
        else:
            form += [("client_id", client_id), ("client_secret", secret)]
        if scope is not None:
            form.append(("scope", scope))
        form += list(extra or [])
        return self.request("POST", "/oauth/token", headers=headers,
                            body=urllib.parse.urlencode(form))

    def access_token(self, client_id, secret, scope=None):
        """A bearer token string (raises if the token call is not 200)."""
        r = self.token(client_id, secret, scope)
        if r.status != 200 or not isinstance(r.body, dict) or "access_token" not in r.body:
            raise AssertionError("token request failed: %r" % (r,))
        return r.body["access_token"]

    # revopsctl -------------------------------------------------------------

    def ctl_raw(self, *args):
        return subprocess.run([REVOPSCTL, "--data-dir", self.data_dir] + self.db.args()
                              + [str(a) for a in args],
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=CTL_TIMEOUT, env=_child_env())

    def ctl(self, *args):
        """Runs revopsctl; returns its stdout JSON (raises on failure)."""
        p = self.ctl_raw(*args)
        if p.returncode != 0:
            raise AssertionError("revopsctl %s failed (%d): %s %s" % (
                " ".join(map(str, args)), p.returncode, p.stderr.decode(errors="replace"),
                p.stdout.decode(errors="replace")))
        try:
            return json.loads(p.stdout.decode())
        except ValueError:
            raise AssertionError("revopsctl %s printed no JSON: %r" % (
                " ".join(map(str, args)), p.stdout))

    def next_code(self):
        """A PMS property code unique within this server: WAW01, KRK02, ..."""
        cities = ["WAW", "KRK", "GDN", "WRO", "POZ", "LDZ", "KAT", "LUB", "SZZ", "BYD",
                  "RZE", "OLS", "TOR", "KIE", "OPO"]
        self._code_seq += 1
        n = self._code_seq
        return "%s%02d" % (cities[(n - 1) % len(cities)], n) if n < 100 else "X%04d" % n

    def add_property(self, portfolio_id, brand="Aurora", code=None, nip=None):
        code = code or self.next_code()
        args = ["property", "add", "--portfolio", portfolio_id, "--name", "Hotel " + code,
                "--brand", brand, "--code", code, "--billing-id", "BILL-" + code,
                "--timezone", "Europe/Warsaw", "--currency", "PLN"]
        if nip:
            args += ["--nip", nip]
        return self.ctl(*args)

    def create_client(self, portfolio_id, name=None, scopes=None, properties=None):
        """revopsctl client create; returns its JSON (client_id, client_secret,
        ...).  Omitted options are not passed (the client then has every
        scope, every property, a default name)."""
        args = ["client", "create", "--portfolio", portfolio_id]
        if name is not None:
            args += ["--name", name]
        if scopes is not None:
            args += ["--scopes", scopes]
        if properties is not None:
            args += ["--properties", properties]
        return self.ctl(*args)

    def client_token(self, portfolio_id, scopes, name=None):
        """A new client of the portfolio with these scopes, and a token for
        it: (client JSON, bearer token string)."""
        cli = self.create_client(portfolio_id, name=name, scopes=scopes)
        return cli, self.access_token(cli["client_id"], cli["client_secret"])

    def seed_portfolio(self, plan="enterprise", nprops=5, name=None, brand="Aurora"):
        """A portfolio with nprops properties, one brand ceiling (PLN 1200.00,
        all room types, open-ended) and a client with all scopes.

        Returns a Seed with id, plan, portfolio (ctl JSON), properties (ctl
        JSON, in creation order), codes, ceiling, client_id, client_secret."""
        Server._seq += 1
        pf = self.ctl("portfolio", "create", "--name", name or "Portfolio %d" % Server._seq,
                      "--plan", plan)
        props = []
        for i in range(nprops):
            props.append(self.add_property(pf["id"], brand=brand,
                                           nip="5260250995" if i == 0 else None))
        ceiling = self.ctl("ceiling", "add", "--portfolio", pf["id"], "--brand", brand,
                           "--currency", "PLN", "--max", "120000",
                           "--valid-from", "2026-01-01")
        cli = self.create_client(pf["id"], name="all-scopes")
        return Seed(self, pf, props, ceiling, cli)


class Seed:
    def __init__(self, server, pf, props, ceiling, cli):
        self.server = server
        self.id = pf["id"]
        self.plan = pf["plan"]
        self.portfolio = pf
        self.properties = props
        self.codes = [p["pms_property_code"] for p in props]
        self.ceiling = ceiling
        self.client_id = cli["client_id"]
        self.client_secret = cli["client_secret"]
        self._token = None

    @property
    def token(self):
        """A cached all-scope, all-property token for this portfolio."""
        if self._token is None:
            self._token = self.server.access_token(self.client_id, self.client_secret)
        return self._token

    def get(self, path, **kw):
        """GET with this portfolio's token and X-Service-Portfolio."""
        kw.setdefault("token", self.token)
        kw.setdefault("portfolio", self.id)
        return self.server.request("GET", path, **kw)


class ServerCase(unittest.TestCase):
    """A test class sharing one revopsd: setUpClass starts cls.srv with
    server_args() (SERVER_ARGS unless overridden) and calls set_up_server()
    to seed it (the server's data is removed if that fails); tearDownClass
    stops it, asserting a clean exit."""

    SERVER_ARGS = ()

    @classmethod
    def server_args(cls):
        return list(cls.SERVER_ARGS)

    @classmethod
    def setUpClass(cls):
        cls.srv = Server(cls.server_args())
        try:
            cls.set_up_server()
        except BaseException:
            cls.srv.cleanup()
            raise

    @classmethod
    def set_up_server(cls):
        """Seeds cls.srv (portfolios, clients, tokens); nothing by default."""

    @classmethod
    def tearDownClass(cls):
        cls.srv.close()


def _child_env():
    # REVOPS_* variables of the calling shell would silently reconfigure the
    # server under test; the suites pass everything on the command line.
    return {k: v for k, v in os.environ.items() if not k.startswith("REVOPS_")}


def asan_build():
    """True when the revopsd under test is built with AddressSanitizer."""
    try:
        with open(REVOPSD, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


def limit_asan_quarantine(mb=8):
    """For suites that bound the server's RSS: AddressSanitizer keeps freed
    memory in a quarantine (256 MB by default) that grows RSS whether or not
    anything leaks. A small one keeps use-after-free detection for recent
    frees and lets an RSS comparison mean something (LeakSanitizer still
    reports leaks at exit). Affects servers started after the call."""
    if asan_build():
        os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "") +
                                      ":quarantine_size_mb=%d" % mb).lstrip(":")


def rss_kb(pid):
    """VmRSS of a process, in kB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def run_main():
    unittest.main(verbosity=2)


# --------------------------------------------------------------------------
# SCIM 2.0 and SAML helpers (identity suites; appended, used by test_scim_*.py
# and test_saml.py)

SCIM_CT = "application/scim+json"
SCIM_USER_URN = "urn:ietf:params:scim:schemas:core:2.0:User"
SCIM_GROUP_URN = "urn:ietf:params:scim:schemas:core:2.0:Group"
SCIM_ENTERPRISE_URN = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
SCIM_PATCH_URN = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
SCIM_LIST_URN = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
SCIM_ERROR_URN = "urn:ietf:params:scim:api:messages:2.0:Error"
SAML_GRANT = "urn:ietf:params:oauth:grant-type:saml2-bearer"


def scim_token_for(srv, portfolio_id):
    """A SCIM bearer token for a portfolio (revopsctl scim-token create)."""
    out = srv.ctl("scim-token", "create", "--portfolio", portfolio_id)
    if not isinstance(out, dict) or not isinstance(out.get("scim_token"), str):
        raise AssertionError("scim-token create printed %r" % (out,))
    return out["scim_token"]


def scim_query(params, plus=False):
    """'?k=v&...' with spaces as %20 (or '+' when plus); params is a dict or
    (key, value) pairs."""
    items = params.items() if isinstance(params, dict) else params
    quote = urllib.parse.quote_plus if plus else urllib.parse.quote
    return "?" + "&".join("%s=%s" % (k, quote(str(v), safe="")) for k, v in items)


def scim_request(srv, method, path, token, body=None, headers=None, ctype=SCIM_CT,
                 query=None):
    """A SCIM call: path is relative to /scim/v2 unless it starts with /scim;
    dict/list bodies are sent as JSON with Content-Type ctype."""
    if not path.startswith("/scim"):
        path = "/scim/v2" + path
    if query is not None:
        path += scim_query(query)
    h = dict(headers or {})
    if token is not None:
        h.setdefault("Authorization", "Bearer " + token)
    if body is not None and ctype is not None:
        h.setdefault("Content-Type", ctype)
    return srv.request(method, path, headers=h, body=body)


class ScimCase(ServerCase):
    """A ServerCase with one portfolio (PLAN, PROPERTIES properties) and a
    SCIM token for it: cls.pf (a Seed), cls.scim_token, and self.scim() to
    call /scim/v2 with that token."""

    PLAN = "enterprise"
    PROPERTIES = 1

    @classmethod
    def set_up_server(cls):
        cls.pf = cls.srv.seed_portfolio(cls.PLAN, cls.PROPERTIES)
        cls.scim_token = scim_token_for(cls.srv, cls.pf.id)

    def scim(self, method, path, body=None, **kw):
        return scim_request(self.srv, method, path, self.scim_token, body, **kw)


def assert_scim_ctype(tc, resp):
    ct = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    tc.assertEqual(ct, SCIM_CT, "SCIM response Content-Type: %r" % (resp,))


def assert_scim_ok(tc, resp, status=200):
    """Status, application/scim+json, a JSON object body; returns the body."""
    tc.assertEqual(resp.status, status, resp)
    assert_scim_ctype(tc, resp)
    tc.assertIsInstance(resp.body, dict, resp)
    return resp.body


def assert_scim_error(tc, resp, status, scim_type=None):
    """RFC 7644 §3.12 error: schemas [Error], status as a string, detail."""
    tc.assertEqual(resp.status, status, resp)
    assert_scim_ctype(tc, resp)
    body = resp.body
    tc.assertIsInstance(body, dict, resp)
    tc.assertEqual(body.get("schemas"), [SCIM_ERROR_URN], resp)
    tc.assertEqual(body.get("status"), str(status), resp)
    tc.assertIsInstance(body.get("detail"), str, resp)
    if scim_type is not None:
        tc.assertEqual(body.get("scimType"), scim_type, resp)
    return body


def assert_scim_list(tc, resp):
    """A ListResponse; returns its Resources (a list)."""
    body = assert_scim_ok(tc, resp, 200)
    tc.assertEqual(body.get("schemas"), [SCIM_LIST_URN], resp)
    for k in ("totalResults", "itemsPerPage", "startIndex"):
        tc.assertIs(type(body.get(k)), int, "%s not an integer: %r" % (k, resp))
    res = body.get("Resources", [])
    tc.assertIsInstance(res, list, resp)
    tc.assertEqual(body["itemsPerPage"], len(res), resp)
    return res


def scim_patch_body(*operations):
    return {"schemas": [SCIM_PATCH_URN], "Operations": list(operations)}


def scim_create_user(tc, srv, token, user_name, **attrs):
    """POST /Users (201 asserted); returns the created resource."""
    body = {"schemas": [SCIM_USER_URN], "userName": user_name}
    body.update(attrs)
    r = scim_request(srv, "POST", "/Users", token, body)
    return assert_scim_ok(tc, r, 201)


def scim_create_group(tc, srv, token, display_name, members=()):
    body = {"schemas": [SCIM_GROUP_URN], "displayName": display_name,
            "members": list(members)}
    r = scim_request(srv, "POST", "/Groups", token, body)
    return assert_scim_ok(tc, r, 201)


def idp_set(srv, portfolio_id, entity_id, cert_path, roles_attribute=None):
    """revopsctl idp set (trust an IdP for a portfolio); returns its JSON."""
    args = ["idp", "set", "--portfolio", portfolio_id, "--entity-id", entity_id,
            "--cert", cert_path]
    if roles_attribute is not None:
        args += ["--roles-attribute", roles_attribute]
    return srv.ctl(*args)


def saml_grant(srv, assertion, scope=None, client=None, basic=True, pad=False,
               raw_assertion=None):
    """POST /oauth/token with the SAML 2.0 bearer grant.  assertion is the
    XML (bytes/str), base64url-encoded here (pad: keep '=' padding);
    raw_assertion sends that string as is.  client = (id, secret) adds
    client authentication (Basic unless basic=False)."""
    if raw_assertion is None:
        data = assertion.encode("utf-8") if isinstance(assertion, str) else assertion
        enc = base64.urlsafe_b64encode(data).decode("ascii")
        raw_assertion = enc if pad else enc.rstrip("=")
    form = [("grant_type", SAML_GRANT), ("assertion", raw_assertion)]
    if scope is not None:
        form.append(("scope", scope))
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if client is not None:
        if basic:
            headers["Authorization"] = basic_auth(client[0], client[1])
        else:
            form += [("client_id", client[0]), ("client_secret", client[1])]
    return srv.request("POST", "/oauth/token", headers=headers,
                       body=urllib.parse.urlencode(form))


# --------------------------------------------------------------------------
# rate decision helpers (appended; used by test_rate_decisions*.py)

import hashlib  # noqa: E402

AUDIT_GENESIS = "0" * 64
RD_ID_RE = re.compile(r"^rd_[0-9A-Za-z]+$")


def audit_entry_hash(prev_hash, entry):
    """sha256_hex(prev_hash + ":" + canonical JSON of {actor, at, details,
    kind, seq}) — the chain rule of a decision's audit trail."""
    canon = json.dumps({k: entry[k] for k in ("actor", "at", "details", "kind", "seq")},
                       sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256((prev_hash + ":" + canon).encode("utf-8")).hexdigest()


def assert_audit_chain(tc, trail):
    """Checks an audit-trail object independently of the server: seq 1..n,
    each prev_hash the previous hash (the first 64 zeros), each hash
    recomputed, head_hash the last hash, chain_valid true.  Returns the
    entries."""
    tc.assertIsInstance(trail, dict, trail)
    entries = trail.get("entries")
    tc.assertIsInstance(entries, list, trail)
    tc.assertTrue(entries, "an audit trail is never empty: %r" % (trail,))
    prev = AUDIT_GENESIS
    for i, e in enumerate(entries):
        tc.assertEqual(set(e), {"seq", "at", "kind", "actor", "details", "prev_hash", "hash"},
                       e)
        tc.assertEqual(e["seq"], i + 1, e)
        tc.assertRegex(e["at"], DATETIME_RE)
        tc.assertIsInstance(e["actor"], str, e)
        tc.assertTrue(e["actor"], e)
        if i:
            tc.assertGreaterEqual(e["at"], entries[i - 1]["at"], "entries out of time order")
        tc.assertEqual(e["prev_hash"], prev, "entry %d does not link to its predecessor" % (i + 1))
        tc.assertEqual(e["hash"], audit_entry_hash(prev, e),
                       "entry %d: hash does not match its content" % (i + 1))
        prev = e["hash"]
    tc.assertEqual(trail.get("head_hash"), prev, trail)
    tc.assertIs(trail.get("chain_valid"), True, trail)
    return entries


def rate_decision_body(properties, ceiling_id, approver, room="DBL", date_from="2026-12-01",
                       date_to="2026-12-03", currency="PLN", minor_units=45900,
                       justification="Winter demand, approved in the weekly revenue call"):
    """A complete POST /v2/rate-decisions body."""
    return {"properties": list(properties), "room_type_code": room,
            "date_range": {"from": date_from, "to": date_to},
            "proposed_rate": {"currency": currency, "minor_units": minor_units},
            "governance": {"brand_ceiling_id": ceiling_id,
                           "approver_saml_subject": approver,
                           "justification": justification}}


def ctl_events(srv, portfolio_id):
    """revopsctl event list: the portfolio's outbox events, oldest first."""
    out = srv.ctl("event", "list", "--portfolio", portfolio_id, "--limit", "10000")
    if not isinstance(out, list):
        raise AssertionError("event list printed %r" % (out,))
    return out


def ctl_user(srv, portfolio_id, user_name, roles=None, display_name=None):
    """revopsctl user create; returns its JSON (id, user_name, roles, ...)."""
    args = ["user", "create", "--portfolio", portfolio_id, "--user-name", user_name]
    if display_name:
        args += ["--display-name", display_name]
    if roles:
        args += ["--roles", ",".join(roles)]
    return srv.ctl(*args)
