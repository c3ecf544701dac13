"""DNS rebinding against the webhook SSRF guard, end to end, with a real DNS
server whose answers the suite changes between one query and the next.

What it proves.  Without --allow-private-targets, revopsd must never
connect to a loopback/private/... address on behalf of a webhook, even when
the target's DNS answer flips from public to private (rebinding).  The
guarantee is that the address a send connects to is an address that was
checked.  How revopsd keeps it (egress.h): at send time libcurl resolves
the name itself, asynchronously, and httpc.c's CURLOPT_OPENSOCKETFUNCTION
classifies every address libcurl is about to connect to, refusing a
forbidden one before a socket exists; so the answer checked is the answer
connected to, and a send asks DNS at most once (libcurl keeps answers for
a minute whatever their TTL, so the sends below use names no cache holds:
exactly one A query each).  The subscription-time check (webhook.c,
egress_check) resolves once per request and refuses a name with any
forbidden answer.

Scenarios, each on its own host name and portfolio:

1. subscription time: a name resolving to loopback, alone or next to a
   public address, is refused (400 SVC-VALIDATION-FAILED on `url`, one A
   query per request); the same name resolving to the public address is
   accepted, v1 and v2;
2. check, then rebind: the first A query after each send starts gets the
   public address, every later one the loopback trap.  Each send makes
   exactly one A query, so never gets the trap answer, and is delivered to
   the public receiver, correctly signed, on a new connection (the receiver
   closes each one, so no send can skip the connect step on a kept-alive
   connection);
3. answers alternating public/trap across concurrent sends: one A query per
   send, and its answer decides the outcome: public -> delivered to the
   public receiver, trap -> refused (refused_target, no HTTP status,
   retry_scheduled); half and half;
4. rebound to loopback after subscribing: the next attempt is refused
   (refused_target), the delivery is retry_scheduled, one A query;
5. public and loopback in one answer at send time, in either order: the
   loopback one is refused at the socket and the send is delivered to the
   public address, one A query;
6. a name that stopped resolving: error `resolve`, retry_scheduled;
7. a receiver whose DNS server never answers holds only its own attempt:
   another receiver's delivery, sent while the first is still resolving, is
   delivered (the server runs one sender, so both share one HTTP thread:
   a lookup that blocked it would hold the second delivery for the
   resolver's whole timeout, ~10 s, and record the first attempt first).

In every scenario the trap receiver (loopback, same port, certificate
valid for the name, so a connection to it would succeed) gets no TCP
connection at all.  What a broken guard does here: had the check used
one answer and the connection another (a check before the send plus a
second resolution by libcurl), every send of scenarios 2 and 3 would make a
second A query, answered by the trap, and connect to it (trap connections
> 0) or fail as refused_target where a delivery is expected; without the
socket guard, scenarios 3 to 5 connect to the trap.

How.  The suite needs its own network: the file re-executes itself under
`unshare --net --mount` (util-linux; not as root, also `--user
--map-root-user`: a user namespace where it is root) unless the marker
variable says it already did.  Inside the new namespaces it brings `lo` up
and adds the public-looking address 93.184.216.34 to it (it exists only in
this network namespace, which has no other interface: nothing leaves the
machine); the trap is 127.0.0.1.  It bind-mounts (mount namespace: the
host's files are untouched) a resolv.conf with `nameserver 127.0.0.1` over
/etc/resolv.conf and an nsswitch.conf whose `hosts:` line is `files dns`,
hides an nscd socket if there is one, and runs dnsserver.DNSServer on
127.0.0.1:53 in this process.  A getaddrinfo() of a probe name checks that
path before revopsd starts (revopsd inherits the namespaces).  Two
receivers (receiver.py) listen on the same port, one on each address.
Retries are 60 s away (no --time-scale), after the suite has ended, so each
scenario sees first attempts only.
"""

import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import dnsserver  # noqa: E402
import harness  # noqa: E402
import receiver  # noqa: E402
from harness import assert_error, assert_success, wait_until  # noqa: E402

# The "public" receiver's address.  It must be an address egress.c does not
# refuse: not in its v4_forbidden table (so none of the documentation
# ranges 192.0.2/24, 198.51.100/24, 203.0.113/24, nor 198.18/15, 10/8,
# 100.64/10, 127/8, 169.254/16, 172.16/12, 192.168/16, 192.0.0/24, ...).
# 93.184.216.34 is the public address test_webhook_subscriptions.py uses.
# It only ever exists on the `lo` of this suite's own network namespace,
# which has no other interface: connections to it never leave the machine.
PUBLIC_ADDR = "93.184.216.34"
# The SSRF target a rebinding attacker wants: loopback.
TRAP_ADDR = "127.0.0.1"
NAMESERVER = "127.0.0.1"         # the suite's DNS server (UDP port 53)

ZONE = "rebind.test"             # .test is reserved (RFC 6761)
PROBE = "probe." + ZONE          # checks the resolver set-up, never used by revopsd
NAMES = {k: "%s.%s" % (k, ZONE) for k in ("sub", "late", "mixed", "mixed-trap-first", "gone",
                                                  "dead", "alive")}

EVENT = "rate.decision.published"
NS_MARK = "REVOPS_REBIND_PARENT_NETNS"  # the parent's network namespace id
SEND_TIMEOUT = 20.0              # generous for the sanitizer build
SENDS = 4                        # sequential sends in the check-then-rebind test
ALT_SENDS = 6                    # concurrent sends with alternating answers (even)
# One name per send in those two: a resolver cache (libcurl keeps answers
# for a minute, whatever their TTL) must not stand in for a send's lookup.
FLIP_NAMES = ["flip%d.%s" % (i, ZONE) for i in range(SENDS)]
ALT_NAMES = ["alt%d.%s" % (i, ZONE) for i in range(ALT_SENDS)]
ALL_NAMES = sorted(NAMES.values()) + FLIP_NAMES + ALT_NAMES


# --------------------------------------------------------------------------
# namespaces

def netns_id():
    return os.readlink("/proc/self/ns/net")


def reexec_in_namespaces():
    """Runs this file again in new network and mount namespaces (does not
    return).  Exits with a clear message when namespaces are unavailable."""
    # Not root: a user namespace of our own, where we are root (Debian 12
    # allows unprivileged user namespaces).
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    probe = subprocess.run(["unshare"] + user + ["--net", "--mount", "true"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        sys.exit("test_webhook_rebinding needs network + mount namespaces (unshare %s"
                 "--net --mount): %s" % (" ".join(user + [""]),
                                         probe.stderr.decode(errors="replace")))
    env = dict(os.environ)
    env[NS_MARK] = netns_id()
    argv = ["unshare"] + user + ["--net", "--mount", "--propagation", "private",
                                 sys.executable, os.path.abspath(__file__)] + sys.argv[1:]
    os.execvpe("unshare", argv, env)


def run(*argv):
    p = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), p.returncode,
                                                  p.stderr.decode(errors="replace")))


def bind_over(path, text, tmpdir):
    """Mounts a file holding text over path (in this mount namespace only)."""
    src = os.path.join(tmpdir, os.path.basename(path))
    with open(src, "w") as f:
        f.write(text)
    run("mount", "--bind", src, path)


def private_nsswitch():
    """The system's nsswitch.conf with hosts resolved by files, then DNS."""
    try:
        with open("/etc/nsswitch.conf") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    lines = [l for l in lines if not l.lstrip().startswith("hosts:")]
    return "\n".join(lines + ["hosts: files dns"]) + "\n"


def set_up_network(tmpdir):
    """lo up with the public address; the resolver pointed at 127.0.0.1.
    Refuses to touch anything unless this is a new network namespace."""
    parent = os.environ.get(NS_MARK)
    if not parent or netns_id() == parent:
        raise RuntimeError("not inside a new network namespace (%s)" % netns_id())
    run("ip", "link", "set", "lo", "up")
    run("ip", "addr", "add", PUBLIC_ADDR + "/32", "dev", "lo")
    bind_over("/etc/resolv.conf", "nameserver %s\noptions timeout:2 attempts:2\n" % NAMESERVER,
              tmpdir)
    # our own hosts: line, so that no NSS module (resolve, mdns, ...) of the
    # host's configuration answers instead of DNS
    bind_over("/etc/nsswitch.conf", private_nsswitch(), tmpdir)
    if os.path.isdir("/run/nscd"):  # a host nscd would answer from its cache
        run("mount", "-t", "tmpfs", "tmpfs", "/run/nscd")
    with open("/etc/hosts") as f:
        if ZONE in f.read():
            raise RuntimeError("/etc/hosts names %s: the suite needs DNS for it" % ZONE)


# --------------------------------------------------------------------------
# module fixture: DNS, receivers, revopsd

class Env:
    tmpdir = dns = ca = public = trap = srv = None


def _started(obj):
    """obj, closed when the module is done (even if set-up fails later)."""
    unittest.addModuleCleanup(obj.close)
    return obj


def setUpModule():
    Env.tmpdir = tempfile.mkdtemp(prefix="revops-rebind-")
    unittest.addModuleCleanup(shutil.rmtree, Env.tmpdir, ignore_errors=True)
    set_up_network(Env.tmpdir)
    Env.dns = _started(dnsserver.DNSServer(NAMESERVER, 53))
    check_resolver()
    Env.ca = receiver.TestCA(os.path.join(Env.tmpdir, "ca"), dns_names=ALL_NAMES)
    Env.public = _started(receiver.Receiver(Env.ca, host=PUBLIC_ADDR))
    # the trap on the same port: the URL's port reaches it whatever address
    # a re-resolving client would pick
    Env.trap = _started(receiver.Receiver(Env.ca, host=TRAP_ADDR, port=Env.public.port))
    # one sender: every lane shares one HTTP thread (scenario 7)
    Env.srv = _started(harness.Server(["--trust-ca", Env.ca.ca_pem, "--webhook-senders", "1"]))


def tearDownModule():
    """The trap was never connected to, between tests either."""
    if Env.trap is not None and Env.trap.connections:
        raise AssertionError("%d connection(s) to the trap receiver" % Env.trap.connections)


def check_resolver():
    """getaddrinfo in this process (and so in revopsd) asks our server."""
    Env.dns.set_policy(PROBE, PUBLIC_ADDR)
    got = {ai[4][0] for ai in socket.getaddrinfo(PROBE, 443, type=socket.SOCK_STREAM)}
    if got != {PUBLIC_ADDR} or Env.dns.count(PROBE, dnsserver.QTYPE_A) != 1:
        raise RuntimeError("the resolver does not use the test DNS server: %r, %r" % (
            got, Env.dns.queries(PROBE)))


# --------------------------------------------------------------------------

def url_for(name, path):
    return "https://%s:%d%s" % (name, Env.public.port, path)


def field_issues(resp):
    return {d.get("field"): d.get("issue", "") for d in resp.body["error"].get("details", [])}


class RebindingTest(unittest.TestCase):
    def setUp(self):
        self.srv = Env.srv
        self.dns = Env.dns
        self.seed = self.srv.seed_portfolio("group", 1)
        self.secret = None  # the portfolio's v2 signing secret
        self.trap_before = Env.trap.connections

    # helpers ---------------------------------------------------------------

    def create(self, name, path, surface="v2"):
        events = [EVENT] if surface == "v2" else ["rate.suggested"]
        return self.srv.request("POST", "/%s/webhooks" % surface,
                                body={"url": url_for(name, path), "events": events},
                                token=self.seed.token, portfolio=self.seed.id)

    def subscribe(self, name, path):
        """A v2 subscription made while name resolves to the public address;
        returns its id (the portfolio's secret is self.secret).  Answers for
        path close the connection."""
        self.dns.set_policy(name, PUBLIC_ADDR)
        r = self.create(name, path)
        data, _ = assert_success(self, r, 201)
        self.secret = self.secret or data["signing_secret"]
        self.assertTrue(self.secret, r)
        Env.public.set_behaviour(path, close=True)
        return data["id"]

    def ping(self, sub):
        r = self.srv.request("POST", "/v2/webhooks/%s/ping" % sub, token=self.seed.token,
                             portfolio=self.seed.id)
        data, _ = assert_success(self, r, 202)
        self.assertEqual([d["target"] for d in data["deliveries"]], ["primary"], data)
        return data["deliveries"][0]["id"]

    def attempted(self, dlv_id):
        """The delivery once its first attempt is recorded."""
        def get():
            r = self.seed.get("/v2/webhooks/deliveries/" + dlv_id)
            if r.status != 200:
                return None
            d = r.body["data"]
            return d if d["attempts"] and d["state"] != "pending" else None
        return wait_until(get, SEND_TIMEOUT, 0.05, what="an attempt of " + dlv_id)

    def mark(self, name):
        return self.dns.count(name, dnsserver.QTYPE_A)

    def a_answers(self, name, since=0):
        """What the DNS server answered to the A queries for name, from the
        since-th on (a tuple of addresses each, None for NXDOMAIN)."""
        return [q.answer for q in self.dns.queries(name, dnsserver.QTYPE_A)[since:]]

    # checks ----------------------------------------------------------------

    def assert_delivered(self, d, name):
        """Delivered on one attempt to the public receiver, signed; returns
        what the receiver got."""
        self.assertEqual(d["state"], "delivered", d)
        self.assertEqual([(a["http_status"], a["error"]) for a in d["attempts"]],
                         [(204, None)], d)
        got = [x for x in Env.public.received()
               if x.headers.get("x-service-delivery-id") == d["id"]]
        self.assertEqual(len(got), 1, got)
        x = got[0]
        self.assertEqual(x.headers.get("host"), "%s:%d" % (name, Env.public.port), x)
        want = hmac.new(self.secret.encode("utf-8"), x.body, hashlib.sha256).hexdigest()
        self.assertTrue(hmac.compare_digest(x.headers.get("x-service-signature", ""), want), x)
        return x

    def assert_refused(self, d, error="refused_target"):
        """One attempt, stopped before any HTTP, and a retry scheduled; a
        refusal names no resolved address (no DNS oracle)."""
        self.assertEqual([(a["http_status"], a["error"]) for a in d["attempts"]],
                         [(None, error)], d)
        self.assertEqual(d["state"], "retry_scheduled", d)
        self.assertIsNotNone(d["next_attempt_at"], d)
        self.assertIsNone(d["delivered_at"], d)
        self.assertNotIn(TRAP_ADDR, d["attempts"][0]["response_snippet"], d)

    def assert_trap_untouched(self):
        """No TCP connection to the trap during this test (nor, so, any
        request); the DNS server had nothing to complain about."""
        n = Env.trap.connections - self.trap_before
        self.assertEqual(n, 0, "%d connection(s) to the trap receiver during this test; "
                         "requests so far (Host): %r" % (
                             n, [x.headers.get("host") for x in Env.trap.received()]))
        self.assertEqual(self.dns.errors, [])
        self.assertEqual(self.dns.malformed, 0)

    # scenarios -------------------------------------------------------------

    def test_1_subscription_time(self):
        name = NAMES["sub"]
        for answer in ([TRAP_ADDR], [PUBLIC_ADDR, TRAP_ADDR]):
            for surface in ("v2", "v1"):
                with self.subTest(answer=answer, surface=surface):
                    self.dns.set_policy(name, answer)
                    before = self.mark(name)
                    r = self.create(name, "/sub", surface)
                    assert_error(self, r, 400, "SVC-VALIDATION-FAILED")
                    self.assertIn("forbidden address", field_issues(r).get("url", ""), r)
                    self.assertEqual(self.a_answers(name, before), [tuple(answer)])
        self.dns.set_policy(name, PUBLIC_ADDR)
        for surface in ("v2", "v1"):
            before = self.mark(name)
            assert_success(self, self.create(name, "/sub", surface), 201, v2=surface == "v2")
            self.assertEqual(self.a_answers(name, before), [(PUBLIC_ADDR,)])
        r = self.seed.get("/v2/webhooks")
        self.assertEqual(len(r.body["data"]), 2, r)
        self.assertEqual(Env.public.received("/sub"), [], "subscribing connected")
        self.assert_trap_untouched()

    def test_2_rebind_after_each_check(self):
        policy = dnsserver.ArmedAnswer(PUBLIC_ADDR, TRAP_ADDR)
        conns = set()
        for name in FLIP_NAMES:
            with self.subTest(name=name):
                sub = self.subscribe(name, "/flip")
                self.dns.set_policy(name, policy)
                before = self.mark(name)
                policy.arm()
                d = self.attempted(self.ping(sub))
                self.assert_trap_untouched()
                # one lookup for the send, answered public; any further
                # one would have been answered the trap
                self.assertEqual(self.a_answers(name, before), [(PUBLIC_ADDR,)])
                conns.add(self.assert_delivered(d, name).conn)
        self.assertEqual(len(conns), SENDS, "a send reused a connection")
        self.assertEqual(Env.public.count("/flip"), SENDS)

    def test_3_alternating_answers(self):
        subs = {name: self.subscribe(name, "/alt") for name in ALT_NAMES}
        policy = dnsserver.Cycle(PUBLIC_ADDR, TRAP_ADDR)  # shared: alternates across names
        before = {}
        for name in ALT_NAMES:
            self.dns.set_policy(name, policy)
            before[name] = self.mark(name)
        dlv = {name: self.ping(sub) for name, sub in subs.items()}
        ds = {name: self.attempted(i) for name, i in dlv.items()}
        self.assert_trap_untouched()
        outcomes = []
        for name in ALT_NAMES:
            with self.subTest(name=name):
                # one lookup per send, and its answer decides the outcome
                answers = self.a_answers(name, before[name])
                self.assertIn(answers, ([(PUBLIC_ADDR,)], [(TRAP_ADDR,)]))
                if answers == [(PUBLIC_ADDR,)]:
                    self.assert_delivered(ds[name], name)
                else:
                    self.assert_refused(ds[name])
                outcomes.append(ds[name]["state"])
        half = ALT_SENDS // 2  # the policy's turns
        self.assertEqual(outcomes.count("delivered"), half, ds)
        self.assertEqual(Env.public.count("/alt"), half)

    def test_4_rebound_to_private_after_subscribing(self):
        name = NAMES["late"]
        sub = self.subscribe(name, "/late")
        self.dns.set_policy(name, TRAP_ADDR)
        before = self.mark(name)
        self.srv.ctl("event", "emit", "--portfolio", self.seed.id, "--type", EVENT)

        def attempted():
            r = self.seed.get("/v2/webhooks/%s/deliveries" % sub)
            data = r.body["data"] if r.status == 200 else []
            return data if data and data[0]["attempts"] else None

        ds = wait_until(attempted, SEND_TIMEOUT, 0.05, what="an attempt of the event")
        self.assert_trap_untouched()
        self.assertEqual(len(ds), 1, ds)
        self.assert_refused(ds[0])
        self.assertEqual(self.a_answers(name, before), [(TRAP_ADDR,)])
        self.assertEqual(Env.public.received("/late"), [])

    def test_5_public_and_private_in_one_answer(self):
        for key, answer in (("mixed", [PUBLIC_ADDR, TRAP_ADDR]),
                            ("mixed-trap-first", [TRAP_ADDR, PUBLIC_ADDR])):
            with self.subTest(answer=answer):
                name = NAMES[key]
                sub = self.subscribe(name, "/" + key)
                self.dns.set_policy(name, answer)
                before = self.mark(name)
                d = self.attempted(self.ping(sub))
                self.assert_trap_untouched()
                self.assertEqual(self.a_answers(name, before), [tuple(answer)])
                # the loopback address gets no socket; the public one is used
                self.assert_delivered(d, name)

    def test_6_no_longer_resolves(self):
        name = NAMES["gone"]
        sub = self.subscribe(name, "/gone")
        self.dns.set_policy(name, None)  # NXDOMAIN
        before = self.mark(name)
        d = self.attempted(self.ping(sub))
        self.assert_trap_untouched()
        self.assert_refused(d, error="resolve")
        self.assertEqual(self.a_answers(name, before), [None])
        self.assertEqual(Env.public.received("/gone"), [])

    def test_7_dead_dns_holds_only_its_own_receiver(self):
        dead, alive = NAMES["dead"], NAMES["alive"]
        sub_dead = self.subscribe(dead, "/dead")
        sub_alive = self.subscribe(alive, "/alive")
        self.dns.set_policy(dead, dnsserver.SILENT)
        before = self.mark(dead)
        d1 = self.ping(sub_dead)
        wait_until(lambda: self.mark(dead) > before, SEND_TIMEOUT, 0.02,
                   what="the lookup of the dead name")
        d2 = self.attempted(self.ping(sub_alive))
        self.assert_delivered(d2, alive)
        r = self.seed.get("/v2/webhooks/deliveries/" + d1)
        self.assertEqual((r.body["data"]["state"], r.body["data"]["attempts"]),
                         ("pending", []), r.body)
        self.assertEqual(Env.public.received("/dead"), [])
        self.assert_trap_untouched()


if __name__ == "__main__":
    if NS_MARK not in os.environ:
        reexec_in_namespaces()
    harness.run_main()
