"""A webhook receiver for the black-box suites (Python 3 stdlib only).

`TestCA(directory)` makes, with the `openssl` CLI, a throw-away CA (ca.pem)
and a server certificate signed by it for IP:127.0.0.1 and DNS:localhost
(plus any `dns_names=` and `ip_addresses=` given); start revopsd with
`--trust-ca ca.ca_pem` so that it trusts the receiver.

`Receiver(ca)` is a threaded HTTPS/1.1 (keep-alive) server on 127.0.0.1 on a
free port (or on `host=`, `port=` when given).  It records every POST
(`received`, `wait_for`), counts TCP connections (`connections`), and answers
each path as told by `set_behaviour` (status, delay before answering, body,
whether to close the connection after answering).

    ca = TestCA(tmpdir)
    rx = Receiver(ca)
    rx.set_behaviour("/down", status=500, body=b"boom")
    url = rx.url("/down")            # https://127.0.0.1:PORT/down
    ...
    deliveries = rx.wait_for(3, "/down", timeout=10)
    deliveries[0].headers["x-service-signature"], deliveries[0].body
    rx.close()

Every request is recorded when its request line has arrived (`at`, from
time.time()), before the body is read and before any configured delay, so
arrival times are those of the sender's attempts.  Bodies are read by
Content-Length (or chunked transfer coding); malformed requests get a 400
and are never fatal to the server.

Run `python3 receiver.py` for a self-test (needs openssl and curl).
"""

import collections
import json
import os
import socket
import socketserver
import ssl
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

MAX_BODY = 64 * 1024 * 1024
SOCKET_TIMEOUT = 60.0


# --------------------------------------------------------------------------
# certificates

def _openssl(*args, cwd=None):
    p = subprocess.run(["openssl"] + list(args), cwd=cwd, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError("openssl %s failed (%d): %s" % (
            " ".join(args), p.returncode, p.stderr.decode(errors="replace")))
    return p.stdout


class TestCA:
    """A CA and one server certificate (127.0.0.1, localhost, and the extra
    dns_names and ip_addresses) in `directory`.

    Attributes (absolute paths): ca_pem, ca_key, cert_pem, key_pem.
    The server certificate file holds the leaf only; the CA is ca_pem."""

    __test__ = False  # not a unittest/pytest test class despite the name

    def __init__(self, directory, days=30, dns_names=(), ip_addresses=()):
        os.makedirs(directory, exist_ok=True)
        d = os.path.abspath(directory)
        self.directory = d
        self.ca_pem = os.path.join(d, "ca.pem")
        self.ca_key = os.path.join(d, "ca.key")
        self.cert_pem = os.path.join(d, "server.pem")
        self.key_pem = os.path.join(d, "server.key")
        csr = os.path.join(d, "server.csr")
        ext = os.path.join(d, "server.ext")
        _openssl("req", "-x509", "-new", "-nodes", "-newkey", "ec",
                 "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-keyout", self.ca_key, "-out", self.ca_pem, "-days", str(days),
                 "-subj", "/O=revops tests/CN=revops test CA",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                 "-addext", "subjectKeyIdentifier=hash")
        _openssl("req", "-new", "-nodes", "-newkey", "ec",
                 "-pkeyopt", "ec_paramgen_curve:prime256v1",
                 "-keyout", self.key_pem, "-out", csr,
                 "-subj", "/O=revops tests/CN=localhost")
        sans = ["IP:127.0.0.1", "DNS:localhost"]
        sans += ["IP:" + a for a in ip_addresses if a != "127.0.0.1"]
        sans += ["DNS:" + n for n in dns_names if n != "localhost"]
        with open(ext, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature,keyEncipherment\n"
                    "extendedKeyUsage=serverAuth\n"
                    "subjectKeyIdentifier=hash\n"
                    "authorityKeyIdentifier=keyid,issuer\n"
                    "subjectAltName=%s\n" % ",".join(sans))
        serial = "0x%016x" % (int.from_bytes(os.urandom(8), "big") >> 1)
        _openssl("x509", "-req", "-in", csr, "-CA", self.ca_pem, "-CAkey", self.ca_key,
                 "-set_serial", serial, "-out", self.cert_pem, "-days", str(days),
                 "-sha256", "-extfile", ext)
        for p in (self.ca_key, self.key_pem):
            os.chmod(p, 0o600)

    def server_context(self):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_pem, self.key_pem)
        return ctx

    def client_context(self):
        ctx = ssl.create_default_context(cafile=self.ca_pem)
        return ctx


# --------------------------------------------------------------------------
# the receiver

class Delivery:
    """One received POST.

    path: request path without the query string; target: the raw request
    target; headers: dict with lower-case names (repeated headers joined with
    ", "); header_list: the (name, value) pairs as sent; body: raw bytes;
    at: time.time() when the request line arrived; conn: a number per TCP
    connection (to see keep-alive reuse)."""

    __slots__ = ("path", "target", "headers", "header_list", "body", "at", "conn")

    def __init__(self, path, target, header_list, body, at, conn):
        self.path = path
        self.target = target
        self.header_list = header_list
        self.headers = {}
        for k, v in header_list:
            lk = k.lower()
            self.headers[lk] = v if lk not in self.headers else self.headers[lk] + ", " + v
        self.body = body
        self.at = at
        self.conn = conn

    def json(self, ordered=True):
        """The body parsed (object_pairs_hook keeps the key order)."""
        import collections
        hook = collections.OrderedDict if ordered else None
        return json.loads(self.body.decode("utf-8"), object_pairs_hook=hook)

    def __repr__(self):
        b = self.body if len(self.body) < 300 else self.body[:300] + b"..."
        return "<Delivery %s at %.3f %r %r>" % (self.path, self.at, self.headers, b)


class _Behaviour:
    __slots__ = ("status", "delay", "body", "close")

    def __init__(self, status=None, delay=0.0, body=b"", close=False):
        self.status = status
        self.delay = float(delay)
        self.body = body.encode() if isinstance(body, str) else bytes(body)
        self.close = bool(close)


class _BadRequest(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "revops-test-receiver"
    sys_version = ""

    # BaseHTTPRequestHandler reads the request line in handle_one_request and
    # then calls parse_request: stamp the arrival there.
    def parse_request(self):
        self._arrived = time.time()
        return super().parse_request()

    def log_message(self, fmt, *args):  # quiet
        pass

    def _read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        if te:
            if te != "chunked":
                raise _BadRequest("unsupported transfer-encoding")
            out = bytearray()
            while True:
                line = self.rfile.readline(1026)
                if not line.endswith(b"\n"):
                    raise _BadRequest("bad chunk size line")
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise _BadRequest("bad chunk size")
                if size < 0 or len(out) + size > MAX_BODY:
                    raise _BadRequest("chunk too large")
                if size == 0:
                    while True:  # trailers
                        t = self.rfile.readline(8194)
                        if t in (b"\r\n", b"\n", b""):
                            break
                    return bytes(out)
                data = self.rfile.read(size)
                if len(data) != size:
                    raise _BadRequest("short chunk")
                out += data
                if self.rfile.readline(3) not in (b"\r\n", b"\n"):
                    raise _BadRequest("missing chunk CRLF")
        cl = self.headers.get_all("Content-Length") or []
        if not cl:
            return b""
        values = set(v.strip() for v in ",".join(cl).split(","))
        if len(values) != 1:
            raise _BadRequest("conflicting Content-Length")
        v = values.pop()
        if not v.isdigit():
            raise _BadRequest("bad Content-Length")
        n = int(v)
        if n > MAX_BODY:
            raise _BadRequest("body too large")
        data = b""
        while len(data) < n:
            chunk = self.rfile.read(n - len(data))
            if not chunk:
                raise _BadRequest("connection closed inside the body")
            data += chunk
        return data

    def _answer(self, status, body=b"", close=False):
        self.send_response(status)
        if status not in (204, 304) and not (100 <= status < 200):
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if body and status not in (204, 304):
            self.wfile.write(body)
        self.wfile.flush()

    def do_POST(self):
        rx = self.server.receiver
        arrived = getattr(self, "_arrived", time.time())
        try:
            body = self._read_body()
        except (_BadRequest, ValueError) as e:
            self._answer(400, str(e).encode(), close=True)
            return
        target = self.path
        path = urllib.parse.urlsplit(target).path if target.startswith("/") else target
        d = Delivery(path, target, list(self.headers.items()), body, arrived, self._conn_no)
        beh = rx._record(d)
        try:
            if beh.delay > 0:
                time.sleep(beh.delay)
            status = beh.status if beh.status is not None else rx.default_status
            self._answer(status, beh.body, close=beh.close)
        finally:
            rx._answered(path)

    def _not_allowed(self):
        try:
            self._read_body()
        except (_BadRequest, ValueError):
            self._answer(400, b"bad request", close=True)
            return
        self.send_response(405)
        self.send_header("Allow", "POST")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def do_HEAD(self):
        self.send_response(405)
        self.send_header("Allow", "POST")
        self.send_header("Content-Length", "0")
        self.end_headers()


class _TLSServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, receiver, ctx, address=("127.0.0.1", 0)):
        self.receiver = receiver
        self.ctx = ctx
        self._conns = set()
        self._conns_lock = threading.Lock()
        self._conn_seq = 0
        socketserver.TCPServer.__init__(self, address, _Handler)

    # The TLS handshake runs in the connection's own thread, so that a slow
    # or broken client never holds up accept().
    def process_request_thread(self, request, client_address):
        tls = None
        try:
            request.settimeout(SOCKET_TIMEOUT)
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._conns_lock:
                self._conns.add(request)
                self._conn_seq += 1
                conn_no = self._conn_seq
            try:
                tls = self.ctx.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError, ValueError):
                return
            with self._conns_lock:
                self._conns.add(tls)
            try:
                h = _Handler.__new__(_Handler)
                h._conn_no = conn_no
                h.__init__(tls, client_address, self)
            except Exception:  # never let one bad connection matter
                pass
        finally:
            with self._conns_lock:
                self._conns.discard(request)
                if tls is not None:
                    self._conns.discard(tls)
            for s in (tls, request):
                if s is None:
                    continue
                try:
                    s.close()
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        pass

    def close_connections(self):
        with self._conns_lock:
            conns = list(self._conns)
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Receiver:
    """A threaded HTTPS receiver on 127.0.0.1:<free port>, or on host:port
    when given (an IPv4 address; port 0 picks a free one).

    Answers every POST with `default_status` (empty body) unless
    set_behaviour() says otherwise for its path."""

    def __init__(self, ca, default_status=204, host="127.0.0.1", port=0):
        self.ca = ca
        self.default_status = default_status
        self.host = host
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._deliveries = []
        self._behaviour = {}
        self._busy = collections.Counter()      # per path: requests not yet answered
        self._busy_max = collections.Counter()  # per path: the most at once
        self._server = _TLSServer(self, ca.server_context(), (host, port))
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="receiver-%d" % self.port, daemon=True)
        self._thread.start()
        self._closed = False

    def url(self, path="/hook"):
        if not path.startswith("/"):
            path = "/" + path
        return "https://%s:%d%s" % (self.host, self.port, path)

    def set_behaviour(self, path, status=None, delay=0.0, body=b"", close=False):
        """How to answer POSTs to `path` from now on: status (None = the
        default status), seconds to wait before answering, response body,
        and close=True to end the connection after the answer (so that the
        next request needs a new one)."""
        with self._lock:
            self._behaviour[path] = _Behaviour(status, delay, body, close)

    @property
    def connections(self):
        """TCP connections accepted so far (whatever became of them: a
        failed TLS handshake or an empty connection counts too)."""
        with self._server._conns_lock:
            return self._server._conn_seq

    def _record(self, d):
        with self._cond:
            self._deliveries.append(d)
            self._busy[d.path] += 1
            self._busy_max[d.path] = max(self._busy_max[d.path], self._busy[d.path])
            self._cond.notify_all()
            return self._behaviour.get(d.path) or _Behaviour()

    def _answered(self, path):
        with self._lock:
            self._busy[path] -= 1

    def max_concurrent(self, path):
        """The most requests to `path` that were in progress at once (arrived,
        not yet answered)."""
        with self._lock:
            return self._busy_max[path]

    def received(self, path=None):
        """Deliveries so far (in arrival order), all or those of one path."""
        with self._lock:
            return [d for d in self._deliveries if path is None or d.path == path]

    def count(self, path=None):
        return len(self.received(path))

    def wait_for(self, count, path=None, timeout=10.0):
        """Waits until at least `count` deliveries (of `path`) have arrived;
        returns received(path).  AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [d for d in self._deliveries if path is None or d.path == path]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        "receiver: %d deliveries%s after %.1fs, wanted %d" % (
                            len(got), "" if path is None else " to " + path, timeout, count))
                self._cond.wait(min(left, 0.05))

    def clear(self, path=None):
        with self._lock:
            self._deliveries = [d for d in self._deliveries
                                if path is not None and d.path != path]

    def close(self):
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        self._thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------
# self-test: python3 receiver.py

def _selftest():
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="receiver-selftest-")
    try:
        ca = TestCA(tmp)
        with Receiver(ca) as rx:
            rx.set_behaviour("/fail", status=500, body=b"boom")
            rx.set_behaviour("/slow", delay=0.5)
            body = b'{"a":1,"b":"\xc5\xbc"}'
            # curl verifies the chain and the IP SAN; two requests on one connection
            p = subprocess.run(["curl", "-sS", "--cacert", ca.ca_pem,
                                "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n",
                                "-H", "Content-Type: application/json", "--data-binary", body,
                                rx.url("/hook"),
                                "--next", "--cacert", ca.ca_pem, "-o", "/dev/null",
                                "-w", "%{http_code} %{num_connects}\\n",
                                "--data-binary", "x" * 100000, rx.url("/fail?q=1")],
                               capture_output=True, timeout=30)
            out = p.stdout.decode().split()
            assert p.returncode == 0, p.stderr
            assert out == ["204", "1", "500", "0"], out  # second request reused the connection
            got = rx.wait_for(2, timeout=5)
            assert got[0].path == "/hook" and got[0].body == body, got[0]
            assert got[0].headers["content-type"] == "application/json"
            assert got[1].path == "/fail" and got[1].target == "/fail?q=1"
            assert len(got[1].body) == 100000
            assert got[0].conn == got[1].conn
            # DNS name and chunked bodies
            p = subprocess.run(["curl", "-sS", "--cacert", ca.ca_pem, "-o", "/dev/null",
                                "-w", "%{http_code}", "-H", "Transfer-Encoding: chunked",
                                "--data-binary", "chunky",
                                "https://localhost:%d/chunk" % rx.port],
                               capture_output=True, timeout=30)
            assert p.stdout == b"204", (p.stdout, p.stderr)
            assert rx.received("/chunk")[0].body == b"chunky"
            # python client: verification, status, body, delay; concurrency
            import http.client
            t0 = time.time()
            threads = []
            results = []
            for _ in range(4):
                def go():
                    c = http.client.HTTPSConnection("127.0.0.1", rx.port,
                                                    context=ca.client_context(), timeout=5)
                    c.request("POST", "/slow", body=b"s")
                    results.append(c.getresponse().status)
                    c.close()
                th = threading.Thread(target=go)
                th.start()
                threads.append(th)
            for th in threads:
                th.join()
            assert results == [204] * 4, results
            assert time.time() - t0 < 1.5, "slow requests were not served concurrently"
            c = http.client.HTTPSConnection("127.0.0.1", rx.port, context=ca.client_context())
            c.request("POST", "/fail", body=b"")
            r = c.getresponse()
            assert (r.status, r.read()) == (500, b"boom")
            c.request("GET", "/fail")
            r = c.getresponse()
            assert r.status == 405
            r.read()
            c.close()
            # bad input: garbage, plain HTTP, a broken Content-Length, a
            # half-sent body; the receiver keeps serving
            for junk in (b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.1\r\n\r\n", b""):
                s = socket.create_connection(("127.0.0.1", rx.port))
                s.sendall(junk)
                s.close()
            ctx = ca.client_context()
            for raw in (b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: zz\r\n\r\n",
                        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
                        b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                        b"Content-Length: 2\r\n\r\nab",
                        b"\x00\xff garbage\r\n\r\n"):
                s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", rx.port)),
                                    server_hostname="127.0.0.1")
                s.settimeout(2)
                s.sendall(raw)
                try:
                    s.shutdown(socket.SHUT_WR) if raw.endswith(b"abc") else None
                    s.recv(4096)
                except (OSError, ssl.SSLError):
                    pass
                s.close()
            p = subprocess.run(["curl", "-sS", "--cacert", ca.ca_pem, "-o", "/dev/null",
                                "-w", "%{http_code}", "--data-binary", "ok", rx.url("/after")],
                               capture_output=True, timeout=30)
            assert p.stdout == b"204", (p.stdout, p.stderr)
            assert [d.path for d in rx.received()].count("/x") == 0
            # an untrusted client refuses it (the certificate is really checked)
            p = subprocess.run(["curl", "-sS", "-o", "/dev/null", "--data-binary", "x",
                                rx.url("/hook")], capture_output=True, timeout=30)
            assert p.returncode != 0
            try:
                rx.wait_for(100, timeout=0.2)
                raise RuntimeError("wait_for did not time out")
            except AssertionError:
                pass
        _selftest_options(os.path.join(tmp, "options"))
        print("receiver self-test: ok")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _selftest_options(tmp):
    """The optional arguments: extra SANs, a chosen address and port (two
    receivers on one port), close after answering, the connection count."""
    ca = TestCA(tmp, dns_names=("selftest.invalid",), ip_addresses=("127.0.0.2",))
    with Receiver(ca, host="127.0.0.2") as rx:
        assert rx.url("/a") == "https://127.0.0.2:%d/a" % rx.port
        with Receiver(ca, port=rx.port) as same:  # 127.0.0.1, the same port
            assert same.port == rx.port and same.connections == 0
            rx.set_behaviour("/close", close=True)
            name_url = "https://selftest.invalid:%d/close" % rx.port
            resolve = "selftest.invalid:%d:127.0.0.2" % rx.port
            p = subprocess.run(["curl", "-sS", "--cacert", ca.ca_pem, "--resolve", resolve,
                                "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n",
                                "--data-binary", "1", name_url,
                                "--next", "--cacert", ca.ca_pem, "--resolve", resolve,
                                "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\\n",
                                "--data-binary", "2", name_url],
                               capture_output=True, timeout=30)
            assert p.returncode == 0, p.stderr
            assert p.stdout.decode().split() == ["204", "1", "204", "1"], p.stdout
            got = rx.wait_for(2, "/close", timeout=5)
            assert got[0].conn != got[1].conn and rx.connections == 2, got
            assert got[0].headers["host"] == "selftest.invalid:%d" % rx.port
            assert same.connections == 0 and same.received() == []


if __name__ == "__main__":
    _selftest()
