"""A minimal DNS server over UDP for the black-box suites (Python 3 stdlib only).

`DNSServer(host, port)` answers queries for the names it has been given a
policy for, and records every query it could parse (`queries`, `count`):

    dns = DNSServer("127.0.0.1", 53)        # port 0 picks a free port
    dns.set_policy("hooks.example.test", "93.184.216.34")
    dns.set_policy("flip.example.test", Cycle("93.184.216.34", "127.0.0.1"))
    ...
    dns.count("hooks.example.test", QTYPE_A)
    dns.close()

What it answers (RFC 1035 wire format, one question per message):

- an A query for a known name: the addresses its policy gives now, with
  TTL 0 (nothing may be cached), as an authoritative answer whose owner
  name is a compression pointer to the question; a policy answer of None
  means NXDOMAIN;
- any other type (AAAA, ...) of a known name: NOERROR with no records
  (NODATA), so resolvers use the A answer alone;
- any other name: NXDOMAIN;
- a class other than IN: REFUSED; an opcode other than QUERY: NOTIMP.

A policy is an address string, a list of them, None, SILENT (no answer at
all to any query for the name: a dead DNS server, as the resolver sees it;
the queries are still recorded), or a callable taking no argument that
returns one of those; it is asked once per A query, so a
callable can change its answer from one query to the next (`Cycle`,
`ArmedAnswer`).  Names are compared case-insensitively, without the
trailing dot.

Packets that are not a well-formed query (short, a response, not exactly
one question, a label running past the end, a compression pointer inside
the question, a name over 255 bytes) are ignored and counted in
`malformed`; they are never fatal.  An unexpected exception while handling
a packet is kept in `errors` (a suite can assert there were none).

Run `python3 dnsserver.py` for a self-test on a free port.
"""

import collections
import socket
import struct
import threading
import time

QTYPE_A = 1
QTYPE_AAAA = 28
CLASS_IN = 1

RCODE_NOERROR = 0
RCODE_NXDOMAIN = 3
RCODE_NOTIMP = 4
RCODE_REFUSED = 5

# A policy (or a policy's answer): send nothing back.
SILENT = object()

_FLAG_QR = 0x8000
_FLAG_AA = 0x0400
_FLAG_RD = 0x0100
_HEADER = struct.Struct("!HHHHHH")   # id, flags, qdcount, ancount, nscount, arcount
_MAX_NAME = 255

Query = collections.namedtuple("Query", "name qtype at answer peer")
Query.__doc__ = """One parsed query: name (lower case, no trailing dot), qtype
(int), at (time.time() on arrival), answer (tuple of the addresses sent for
an A query of a known name, () for any other answer with records absent,
None for NXDOMAIN/REFUSED/NOTIMP), peer (the client's (host, port))."""


class _Malformed(Exception):
    pass


# --------------------------------------------------------------------------
# policies

class Cycle:
    """Answers each A query with the next of `answers`, round and round."""

    def __init__(self, *answers):
        if not answers:
            raise ValueError("Cycle needs at least one answer")
        self._answers = answers
        self._lock = threading.Lock()
        self._next = 0

    def __call__(self):
        with self._lock:
            a = self._answers[self._next % len(self._answers)]
            self._next += 1
            return a


class ArmedAnswer:
    """Answers `first` to the first A query after each arm(), and `then` to
    every other one (also before the first arm())."""

    def __init__(self, first, then):
        self.first = first
        self.then = then
        self._lock = threading.Lock()
        self._armed = False

    def arm(self):
        with self._lock:
            self._armed = True

    def __call__(self):
        with self._lock:
            armed, self._armed = self._armed, False
        return self.first if armed else self.then


def _addresses(answer):
    """A policy's answer as a tuple of IPv4 address strings, or None."""
    if answer is None:
        return None
    if isinstance(answer, str):
        answer = (answer,)
    out = tuple(answer)
    for a in out:
        socket.inet_pton(socket.AF_INET, a)  # ValueError/OSError if not IPv4
    return out


# --------------------------------------------------------------------------
# wire format

def _read_question(msg):
    """Parses the single question after the header: returns (name, qtype,
    qclass, end offset).  Raises _Malformed."""
    off = _HEADER.size
    labels = []
    size = 1
    while True:
        if off >= len(msg):
            raise _Malformed("name runs past the end")
        n = msg[off]
        off += 1
        if n == 0:
            break
        if n & 0xC0:
            raise _Malformed("compression pointer or extended label in a question")
        if off + n > len(msg):
            raise _Malformed("label runs past the end")
        size += n + 1
        if size > _MAX_NAME:
            raise _Malformed("name longer than 255 bytes")
        labels.append(msg[off:off + n].decode("latin-1"))
        off += n
    if off + 4 > len(msg):
        raise _Malformed("question lacks its type and class")
    qtype, qclass = struct.unpack_from("!HH", msg, off)
    return ".".join(labels).lower(), qtype, qclass, off + 4


def _a_record(address):
    """An A record owned by the question's name (pointer to offset 12)."""
    return struct.pack("!HHHIH", 0xC000 | _HEADER.size, QTYPE_A, CLASS_IN, 0, 4) + \
        socket.inet_pton(socket.AF_INET, address)


def _reply(qid, qflags, question, rcode, addresses=()):
    flags = _FLAG_QR | _FLAG_AA | (qflags & _FLAG_RD) | rcode
    head = _HEADER.pack(qid, flags, 1 if question else 0, len(addresses), 0, 0)
    return head + question + b"".join(_a_record(a) for a in addresses)


def build_query(name, qtype=QTYPE_A, qid=0x1234, qclass=CLASS_IN):
    """A standard recursive query for name (used by the self-test and by
    suites that probe the server directly)."""
    labels = [l.encode("ascii") for l in name.rstrip(".").split(".") if l]
    qname = b"".join(bytes([len(l)]) + l for l in labels) + b"\0"
    return _HEADER.pack(qid, _FLAG_RD, 1, 0, 0, 0) + qname + struct.pack("!HH", qtype, qclass)


def _skip_name(msg, off):
    """Offset after a (possibly compressed) name in a response."""
    while True:
        n = msg[off]
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n
        if n == 0:
            return off


def parse_response(msg):
    """(id, rcode, aa, [(qtype, ttl, rdata), ...]) of a response; a small
    independent reader for the self-test."""
    qid, flags, qd, an, _, _ = _HEADER.unpack_from(msg)
    off = _HEADER.size
    for _ in range(qd):
        off = _skip_name(msg, off) + 4
    answers = []
    for _ in range(an):
        ptr = struct.unpack_from("!H", msg, off)[0]
        if ptr != 0xC000 | _HEADER.size:
            raise ValueError("answer owner is not a pointer to the question: %04x" % ptr)
        off += 2
        rtype, _cls, ttl, rdlen = struct.unpack_from("!HHIH", msg, off)
        off += 10
        answers.append((rtype, ttl, msg[off:off + rdlen]))
        off += rdlen
    return qid, flags & 0xF, bool(flags & _FLAG_AA), answers


# --------------------------------------------------------------------------
# the server

class DNSServer:
    """A threaded UDP DNS server; see the module docstring."""

    def __init__(self, host="127.0.0.1", port=53):
        self._lock = threading.Lock()
        self._policies = {}
        self._log = []
        self.malformed = 0
        self.errors = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((host, port))
        self._sock.settimeout(0.05)
        self.host, self.port = self._sock.getsockname()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="dns-%d" % self.port,
                                        daemon=True)
        self._thread.start()

    @staticmethod
    def _key(name):
        return name.rstrip(".").lower()

    def set_policy(self, name, policy):
        """From now on, A queries for name are answered by policy."""
        with self._lock:
            self._policies[self._key(name)] = policy

    def forget(self, name):
        """name becomes unknown (NXDOMAIN)."""
        with self._lock:
            self._policies.pop(self._key(name), None)

    def queries(self, name=None, qtype=None):
        """Recorded queries, oldest first, all or those of one name / type."""
        key = None if name is None else self._key(name)
        with self._lock:
            return [q for q in self._log
                    if (key is None or q.name == key) and (qtype is None or q.qtype == qtype)]

    def count(self, name=None, qtype=None):
        return len(self.queries(name, qtype))

    # serving ---------------------------------------------------------------

    def _serve(self):
        while not self._stop.is_set():
            try:
                data, peer = self._sock.recvfrom(65535)
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            try:
                reply = self._handle(data, peer)
            except _Malformed:
                with self._lock:
                    self.malformed += 1
                continue
            except Exception as e:  # a bug here must not stop the server
                with self._lock:
                    self.errors.append(repr(e))
                continue
            if reply is None:
                continue  # SILENT
            try:
                self._sock.sendto(reply, peer)
            except OSError:
                pass

    def _handle(self, msg, peer):
        if len(msg) < _HEADER.size:
            raise _Malformed("shorter than a header")
        qid, qflags, qdcount, _, _, _ = _HEADER.unpack_from(msg)
        if qflags & _FLAG_QR:
            raise _Malformed("a response, not a query")
        if (qflags >> 11) & 0xF != 0:
            return _reply(qid, qflags, b"", RCODE_NOTIMP)
        if qdcount != 1:
            raise _Malformed("not exactly one question")
        name, qtype, qclass, end = _read_question(msg)
        question = msg[_HEADER.size:end]
        rcode, addresses, logged = self._decide(name, qtype, qclass)
        with self._lock:
            self._log.append(Query(name, qtype, time.time(), logged, peer))
        if rcode is None:
            return None
        return _reply(qid, qflags, question, rcode, addresses)

    def _decide(self, name, qtype, qclass):
        """(rcode, addresses to send, answer to log) for one question."""
        if qclass != CLASS_IN:
            return RCODE_REFUSED, (), None
        with self._lock:
            known = name in self._policies
            policy = self._policies.get(name)
        if not known:
            return RCODE_NXDOMAIN, (), None
        if policy is SILENT:
            return None, (), None
        if qtype != QTYPE_A:
            return RCODE_NOERROR, (), ()
        answer = policy() if callable(policy) else policy
        if answer is SILENT:
            return None, (), None
        addresses = _addresses(answer)
        if addresses is None:
            return RCODE_NXDOMAIN, (), None
        return RCODE_NOERROR, addresses, addresses

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------
# self-test: python3 dnsserver.py

def _ask(port, packet, timeout=2.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(packet, ("127.0.0.1", port))
        return s.recvfrom(65535)[0]
    finally:
        s.close()


def _selftest():
    with DNSServer("127.0.0.1", 0) as dns:
        dns.set_policy("Hooks.Example.TEST.", "93.184.216.34")
        dns.set_policy("two.example.test", ["93.184.216.34", "127.0.0.1"])
        dns.set_policy("flip.example.test", Cycle("93.184.216.34", "127.0.0.1"))
        armed = ArmedAnswer("93.184.216.34", "127.0.0.1")
        dns.set_policy("armed.example.test", armed)
        dns.set_policy("gone.example.test", None)
        ip = lambda a: socket.inet_pton(socket.AF_INET, a)  # noqa: E731

        reply = _ask(dns.port, build_query("hooks.EXAMPLE.test", qid=7))
        qid, rcode, aa, ans = parse_response(reply)
        assert (qid, rcode, aa) == (7, RCODE_NOERROR, True)
        assert ans == [(QTYPE_A, 0, ip("93.184.216.34"))], ans
        _, rcode, _, ans = parse_response(_ask(dns.port, build_query("two.example.test")))
        assert [a[2] for a in ans] == [ip("93.184.216.34"), ip("127.0.0.1")], ans
        _, rcode, _, ans = parse_response(_ask(dns.port, build_query("hooks.example.test",
                                                                     QTYPE_AAAA)))
        assert (rcode, ans) == (RCODE_NOERROR, []), (rcode, ans)
        for name in ("other.example.test", "gone.example.test"):
            _, rcode, _, ans = parse_response(_ask(dns.port, build_query(name)))
            assert (rcode, ans) == (RCODE_NXDOMAIN, []), (name, rcode, ans)
        got = [parse_response(_ask(dns.port, build_query("flip.example.test")))[3][0][2]
               for _ in range(3)]
        assert got == [ip("93.184.216.34"), ip("127.0.0.1"), ip("93.184.216.34")], got
        armed.arm()
        got = [parse_response(_ask(dns.port, build_query("armed.example.test")))[3][0][2]
               for _ in range(2)]
        assert got == [ip("93.184.216.34"), ip("127.0.0.1")], got
        _, rcode, _, _ = parse_response(_ask(dns.port, build_query("hooks.example.test",
                                                                   qclass=3)))
        assert rcode == RCODE_REFUSED
        dns.set_policy("dead.example.test", SILENT)
        try:
            _ask(dns.port, build_query("dead.example.test"), timeout=0.3)
            raise AssertionError("a SILENT name was answered")
        except socket.timeout:
            pass
        assert dns.count("dead.example.test", QTYPE_A) == 1

        # malformed packets are ignored, and the server keeps answering
        good = build_query("hooks.example.test")
        junk = [b"", b"\x00" * 5, good[:-3], good[:14],
                good[:2] + b"\x81\x00" + good[4:],                 # a response
                good[:4] + b"\x00\x02" + good[6:],                 # two questions
                good[:12] + b"\xc0\x0c" + good[-4:],               # pointer in the question
                good[:12] + (b"\x3f" + b"a" * 63) * 4 + b"\0" + good[-4:],  # 257-byte name
                good[:12] + b"\x40" + b"a" * 64 + b"\0" + good[-4:]]        # extended label
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for j in junk:
            s.sendto(j, ("127.0.0.1", dns.port))
        s.close()
        before = dns.count("hooks.example.test", QTYPE_A)
        _, rcode, _, ans = parse_response(_ask(dns.port, good))
        assert rcode == RCODE_NOERROR and len(ans) == 1
        assert dns.malformed == len(junk), dns.malformed  # datagrams arrive in order
        assert dns.count("hooks.example.test", QTYPE_A) == before + 1
        assert dns.count("flip.example.test") == 3
        q = dns.queries("hooks.example.test", QTYPE_A)[0]
        assert q.answer == ("93.184.216.34",) and q.name == "hooks.example.test"
        assert dns.errors == [], dns.errors
    print("dnsserver self-test: ok")


if __name__ == "__main__":
    _selftest()
