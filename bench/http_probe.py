#!/usr/bin/env python3
"""Sends the framing and head defects of issue 11 (items 2, 3, 4, 7, 8) and
a few oversize/malformed heads as raw bytes to one revopsd build and prints
what came back, one row per case (docs/http-library.md).

    REVOPS_BIN_DIR=build     bench/http_probe.py
    REVOPS_BIN_DIR=build-h2o bench/http_probe.py [--json out.json]

Every case is followed on the same connection by a pipelined
`GET /healthz`; "pipelined" says whether that was answered (for a refused
request it must not be). Columns:
  status    status of the first answer ("-" none before close, "timeout"
            none within TIMEOUT seconds while the connection stayed open)
  envelope  the first answer is application/json with an "error" object
  closed    the server closed the connection within TIMEOUT seconds
  pipelined the pipelined GET /healthz was answered
  answer    what the first answer says: our envelope's message (or OAuth's
            error), else the start of the body
It is a measurement, not a test: it exits 0 whatever the server answers.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

TIMEOUT = float(os.environ.get("TIMEOUT", "3"))
PIPE = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
BODY = b"5\r\nhello\r\n0\r\n\r\n"


def post_te(te_lines):
    head = b"POST /oauth/token HTTP/1.1\r\nHost: x\r\n"
    for v in te_lines:
        head += b"Transfer-Encoding: " + v + b"\r\n"
    return head + b"\r\n" + BODY


CASES = [
    # item 2: Transfer-Encoding other than exactly "chunked"
    ("TE: chunked, identity", post_te([b"chunked, identity"])),
    ("TE: 'chunked ' (trailing space)", post_te([b"chunked "])),
    ("TE: identity", post_te([b"identity"])),
    ("TE: identity, chunked", post_te([b"identity, chunked"])),
    ("TE: gzip, chunked", post_te([b"gzip, chunked"])),
    ("TE: xchunked", post_te([b"xchunked"])),
    ('TE: "chunked"', post_te([b'"chunked"'])),
    ("TE: (empty)", post_te([b""])),
    ("TE: \\x0bchunked", post_te([b"\x0bchunked"])),
    # item 3: desync
    ("two TE: chunked + identity", post_te([b"chunked", b"identity"])),
    ("two TE: chunked + chunked", post_te([b"chunked", b"chunked"])),
    ("obs-fold TE: chunk / ' ed'",
     b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunk\r\n ed\r\n\r\n" + BODY),
    ("obs-fold in X-A", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"),
    ("CL: 2\\x00 40 (NUL in CL)",
     b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\x00 40\r\n\r\nab"
     + b"x" * 38),
    ("CL + TE", b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n" + BODY),
    ("two CL (2, 40)", b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
     b"Content-Length: 40\r\n\r\nab" + b"x" * 38),
    ("NUL in X-A value", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
    # item 4: chunk-size lines that do not fit a read buffer
    ("chunk ext 5; + 33 KiB",
     b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;"
     + b"a" * (33 * 1024) + b"\r\nhello\r\n0\r\n\r\n"),
    ("chunk size, 40,000 leading zeros",
     b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     + b"0" * 40000 + b"5\r\nhello\r\n0\r\n\r\n"),
    ("chunk size 17 hex digits",
     b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"10000000000000000\r\nhello\r\n0\r\n\r\n"),
    ("chunked body over 1 MiB",
     b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
     + (b"10000\r\n" + b"a" * 0x10000 + b"\r\n") * 17 + b"0\r\n\r\n"),
    ("CL over 1 MiB (no body sent)",
     b"POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"),
    # item 7: path tricks (unauthenticated: 400 before routing, else 401)
    ("path %00", b"GET /v2/portfolios%00.json HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("path raw NUL", b"GET /v2/portfolios\x00/../../admin HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("path %2f", b"GET /v2/portfolios%2fabc HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("path raw \\x01", b"GET /v2/port\x01folios HTTP/1.1\r\nHost: x\r\n\r\n"),
    # item 8
    ("two Host", b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
    # oversize heads, request line and version
    ("header value 40 KiB", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 40960
     + b"\r\n\r\n"),
    ("header value 500 KiB", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 512000
     + b"\r\n\r\n"),
    ("request target 40 KiB", b"GET /healthz?" + b"a" * 40960 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("101 header fields", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     + b"".join(b"X-%d: a\r\n" % i for i in range(100)) + b"\r\n"),
    ("version HTTP/9.9", b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"),
    ("version HTTP/1.10", b"GET /healthz HTTP/1.10\r\nHost: x\r\n\r\n"),
    ("no version (HTTP/0.9 form)", b"GET /healthz\r\n\r\n"),
    ("request line: 4 words", b"GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n"),
    ("space in header name", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n"),
    ("bare LF line ends", b"GET /healthz HTTP/1.1\nHost: x\n\n"),
    # controls: must be answered normally
    ("control: GET /healthz", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("control: chunked POST", post_te([b"chunked"])),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def probe(port, raw):
    """Returns (status, envelope, closed, pipelined, answer)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    data = b""
    closed = False
    try:
        s.sendall(raw + PIPE)
    except OSError:
        pass
    deadline = time.time() + TIMEOUT
    while time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except OSError:  # reset
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
        # stop early once two answers are in (control cases, pipelining)
        if data.count(b"HTTP/1.") >= 2 and b'{"status":"ok"}' in data.split(b"HTTP/1.")[-1]:
            break
    s.close()
    if not data:
        return ("-" if closed else "timeout"), False, closed, False, ""
    first = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = first.split(" ")
    status = parts[1] if len(parts) > 1 and first.startswith("HTTP/") else "?"
    head, _, rest = data.partition(b"\r\n\r\n")
    ct = b""
    length = None
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-type":
            ct = v.strip()
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    body = rest[:length] if length is not None else rest
    envelope = False
    answer = body[:40].decode("latin-1").replace("\n", " ").replace("|", "/")
    if ct.startswith(b"application/json"):
        try:
            doc = json.loads(body)
            envelope = "error" in doc
            err = doc.get("error")
            if isinstance(err, dict):
                answer = err.get("message", "")[:70]
            elif err:
                answer = "oauth: %s" % err
        except ValueError:
            pass
    answers = data.count(b"HTTP/1.1 ") + data.count(b"HTTP/1.0 ")
    pipelined = answers >= 2 or (status == "200" and b'{"status":"ok"}' in rest[len(body):])
    return status, envelope, closed, pipelined, answer


def main():
    out_json = None
    if len(sys.argv) > 2 and sys.argv[1] == "--json":
        out_json = sys.argv[2]
    bindir = os.environ.get("REVOPS_BIN_DIR", "build")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.isabs(bindir):
        bindir = os.path.join(root, bindir)
    port = free_port()
    d = tempfile.mkdtemp()
    srv = subprocess.Popen([os.path.join(bindir, "revopsd"), "--data-dir", d, "--listen",
                            "127.0.0.1:%d" % port, "--idle-timeout", "30",
                            "--anon-rate-limit", "100000"],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "log"), "w"))
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        rows = []
        print("| case | status | envelope | closed | pipelined answered | answer |")
        print("|---|---|---|---|---|---|")
        for name, raw in CASES:
            st, env, closed, pipe, answer = probe(port, raw)
            rows.append({"case": name, "status": st, "envelope": env, "closed": closed,
                         "pipelined": pipe, "answer": answer})
            yn = lambda b: "yes" if b else "no"
            print("| %s | %s | %s | %s | %s | %s |" % (name, st, yn(env), yn(closed), yn(pipe),
                                                      answer), flush=True)
        alive = srv.poll() is None
        print("\nserver still running after the cases: %s" % ("yes" if alive else "NO"))
        if out_json:
            with open(out_json, "w") as f:
                json.dump({"bin_dir": bindir, "rows": rows, "alive": alive}, f, indent=1)
    finally:
        srv.terminate()
        try:
            srv.wait(15)
        except subprocess.TimeoutExpired:
            srv.kill()


if __name__ == "__main__":
    main()
