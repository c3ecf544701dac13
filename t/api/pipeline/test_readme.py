"""The README walk-through, run as written, so it cannot rot.

Every ```sh block between the README's `walkthrough:begin` and
`walkthrough:end` markers runs, command by command and in order, in one
bash (so variables and functions carry over, as in the reader's terminal),
against a fresh `make run`-style server: `revopsd --demo` on an empty data
directory named `var`, from a directory that has `build/`, `scripts/` and
`t/` of this checkout beside it, as the repository root has. The README's
`http://127.0.0.1:8080` becomes the server's address (a free port, so
nothing depends on 8080 being free).

Each command must exit 0 under `set -u -o pipefail` (an undefined variable
such as the old `$CID` fails it) and its output must look right:
expectations() has a check for every command that prints, variables()
one for every variable the walk-through sets, and a command without one fails the suite,
so a new README command comes with its check. No output may carry
`invalid_client` or `SVC-INTERNAL`.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402

README = os.path.join(harness.ROOT, "README.md")
BEGIN, END = "<!-- walkthrough:begin", "<!-- walkthrough:end -->"
README_BASE = "http://127.0.0.1:8080"
COMMAND_TIMEOUT = 60.0
SAML_USER = "ana@enterprise.demo.example"


def walkthrough_blocks(text):
    """The ```sh blocks between the markers, as lists of lines."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise AssertionError("README.md must have one %r and one %r" % (BEGIN, END))
    section = text[text.index(BEGIN):text.index(END)]
    return [b.split("\n") for b in re.findall(r"^```sh\n(.*?)^```$", section, re.S | re.M)]


def complete(text):
    """True when text parses as whole shell commands (bash -n)."""
    return subprocess.run(["bash", "-n", "-c", text], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def split_commands(lines):
    """A block's commands: lines joined until they end without a
    backslash and parse whole (a function body or a quoted string may
    span lines). Comment-only and blank lines between commands are
    dropped."""
    cmds, cur = [], []
    for line in lines:
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        cur.append(line)
        text = "\n".join(cur)
        if not line.endswith("\\") and complete(text):
            cmds.append(text)
            cur = []
    if cur:
        raise AssertionError("README walk-through: unfinished command:\n%s" % "\n".join(cur))
    return cmds


def assigned_names(cmd):
    """NAME for each top-level `NAME=` statement of an assignment-only
    command, else []."""
    if not re.match(r"^[A-Z][A-Z0-9_]*=", cmd):
        return []
    return re.findall(r"(?:^|;\s*)([A-Z][A-Z0-9_]*)=", cmd)


def jdoc(tc, out):
    try:
        return json.loads(out)
    except ValueError:
        tc.fail("not JSON: %r" % out[:500])


class Shell:
    """One bash, fed commands through a pipe; each command's stdout,
    stderr and exit status go to files in a scratch directory."""

    def __init__(self, cwd, env):
        self.scratch = tempfile.mkdtemp(prefix="readme-sh-")
        self.n = 0
        self.log = open(os.path.join(self.scratch, "bash.stderr"), "wb")
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=self.log)
        self.send("set -u -o pipefail\n")

    def send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def run(self, cmd, timeout=COMMAND_TIMEOUT):
        """(rc, stdout, stderr) of cmd; rc None when bash itself exited
        (set -u on an undefined variable) or the command timed out."""
        self.n += 1
        base = os.path.join(self.scratch, "c%03d" % self.n)
        # stdin from /dev/null: a command must not read the script itself
        self.send("{\n%s\n} >%s.out 2>%s.err </dev/null; echo $? >%s.rc.tmp; mv %s.rc.tmp %s.rc\n"
                  % (cmd, base, base, base, base, base))
        deadline = time.monotonic() + timeout
        rc = None
        while time.monotonic() < deadline:
            if os.path.exists(base + ".rc"):
                with open(base + ".rc") as f:
                    rc = int(f.read().strip())
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)

        def read(suffix):
            try:
                with open(base + suffix, encoding="utf-8", errors="replace") as f:
                    return f.read()
            except OSError:
                return ""
        err = read(".err")
        if rc is None:
            self.log.flush()
            with open(os.path.join(self.scratch, "bash.stderr"), errors="replace") as f:
                err += f.read()
        return rc, read(".out"), err

    def value(self, name):
        rc, out, _ = self.run('printf %%s "${%s-}"' % name)
        return out if rc == 0 else ""

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class ReadmeWalkthroughTest(unittest.TestCase):
    def setUp(self):
        with open(README, encoding="utf-8") as f:
            self.blocks = walkthrough_blocks(f.read())
        self.root = tempfile.mkdtemp(prefix="revops-readme-")
        for name, target in (("build", harness.BIN_DIR),
                             ("scripts", os.path.join(harness.ROOT, "scripts")),
                             ("t", os.path.join(harness.ROOT, "t"))):
            os.symlink(target, os.path.join(self.root, name))
        os.mkdir(os.path.join(self.root, "var"))
        # make run: revopsd --demo --data-dir ./var on an empty database
        self.srv = harness.Server(["--demo"], data_dir=os.path.join(self.root, "var"))
        self.creds = harness.wait_until(self.read_creds, 5.0, interval=0.05,
                                        what="var/demo-credentials.json")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("REVOPS_") and not k.lower().endswith("_proxy")}
        # On PostgreSQL, the README's commands reach the server's database
        # the way an operator's would: REVOPS_DATABASE, read by both programs.
        env.update(dict(zip(["REVOPS_DATABASE"], self.srv.db.args()[1:])))
        self.sh = Shell(self.root, env)

    def tearDown(self):
        self.sh.close()
        try:
            self.srv.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def read_creds(self):
        try:
            with open(os.path.join(self.root, "var", "demo-credentials.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    # the checks ------------------------------------------------------------

    def pf(self, i=0):
        return self.creds["portfolios"][i]

    def vistula(self):
        return [p["id"] for p in self.pf()["properties"] if p["brand"] == "Vistula Grand"]

    def expectations(self):
        """(pattern on the command, check(out, err)) in README order; the
        first match checks the command."""
        base = self.srv.base_url
        pf = self.pf()
        codes = [p["pms_property_code"] for p in pf["properties"]]

        def json_eq(want):
            return lambda out, err: self.assertEqual(jdoc(self, out), want)

        def metadata(out, err):
            md = jdoc(self, out)
            self.assertEqual(md["issuer"], base)
            self.assertEqual(md["token_endpoint"], base + "/oauth/token")
            self.assertIn("client_secret_basic", md["token_endpoint_auth_methods_supported"])

        def properties(out, err):
            body = jdoc(self, out)
            self.assertEqual(sorted(p["pms_property_code"] for p in body["data"]), sorted(codes))
            self.assertEqual(body["meta"]["portfolio_id"], pf["portfolio_id"])

        def page_meta(out, err):
            meta = jdoc(self, out)
            self.assertIsInstance(meta.get("next_cursor"), str, meta)
            self.assertEqual(meta["portfolio_id"], pf["portfolio_id"])

        def metrics(out, err):
            self.assertEqual(len(out.splitlines()), 4, out)
            self.assertIn("revops_http_requests_total", out)

        def decision(out, err):
            d = jdoc(self, err)["data"]  # tee /dev/stderr shows the 201 body
            self.assertEqual(d["status"], "published", d)
            self.assertEqual(sorted(d["properties_written"]), sorted(self.vistula()))
            self.assertEqual(len(d["pms_write_receipts"]), len(self.vistula()), d)

        def audit_trail(out, err):
            t = jdoc(self, out)
            self.assertIs(t["chain_valid"], True, t)
            self.assertTrue(t["kinds"], t)

        def audit_verify(out, err):
            v = jdoc(self, out)
            self.assertIs(v["chain_valid"], True, v)
            self.assertTrue(v["decision_id"].startswith("rd_"), v)

        def scim_user(out, err):
            u = jdoc(self, out)
            self.assertTrue(u["id"], u)
            self.assertEqual((u["userName"], u["active"]), (SAML_USER, True))

        def user_meta(out, err):
            self.assertEqual(jdoc(self, out)["portfolio_id"], pf["portfolio_id"])

        def last_event(out, err):
            ev = jdoc(self, out)
            self.assertEqual(ev["type"], "sso.user.deprovisioned", ev)
            self.assertEqual(ev["data"]["user_name"], SAML_USER, ev)

        def status(code):
            return lambda out, err: self.assertEqual(out.strip(), code)

        return [
            (r"\.well-known/oauth-authorization-server \| jq$", metadata),
            (r"Bearer \$WAW.*\[\.data\[\]\.pms_property_code\]", json_eq(["WAW01"])),
            (r"Bearer \$TOKEN.*/properties \| jq$", properties),
            (r"X-Service-Portfolio: \$OTHER.*jq \.error\.code$", json_eq("SVC-AUTH-INSUFFICIENT-ROLE")),
            (r"limit=2\" \| jq \.meta$", page_meta),
            (r"cursor=\$NEXT\" \| jq -c '\[\.data\[\]\.pms_property_code\]'$",
             json_eq(codes[2:4])),
            (r"/metrics \| sed -n '1,4p'$", metrics),
            (r"/v2/openapi\.json \| jq \.info\.title$", json_eq("revops API")),
            (r"^RD=\$\(decide 45900 ", decision),
            (r"^decide 999900 \| jq \.error\.code", json_eq("SVC-RATE-CEILING-EXCEEDED")),
            (r"/audit-trail \| jq", audit_trail),
            (r"/revert \| jq \.data\.status", json_eq("reverted")),
            (r"^build/revopsctl --data-dir var audit verify \$RD", audit_verify),
            (r"/scim/v2/Users \| jq '\{id, userName, active\}'$", scim_user),
            (r"Bearer \$UT\" -H \"X-Service-Portfolio: \$ID\" \S+/v2/portfolios \| jq \.meta$",
             user_meta),
            (r"-X PATCH .*-w '%\{http_code\}\\n'$", status("204")),
            (r"-w '%\{http_code\}\\n' -H \"Authorization: Bearer \$UT\"", status("401")),
            (r"event list --portfolio \$ID \| jq '\.\[-1\]'", last_event),
            (r"^decide\(\) \{", lambda out, err: self.assertEqual(out + err, "")),
        ]

    def variables(self):
        """What each variable the walk-through sets must hold."""
        pf = self.pf()
        date = r"^\d{4}-\d\d-\d\d$"
        token = r"^rvo_at_[A-Za-z0-9_-]{20,}$"
        return {
            "P": lambda v: self.assertEqual(json.loads(v)["portfolio_id"], pf["portfolio_id"]),
            "ID": lambda v: self.assertEqual(v, pf["portfolio_id"]),
            "CID": lambda v: self.assertEqual(v, pf["client_id"]),
            "SECRET": lambda v: self.assertEqual(v, pf["client_secret"]),
            "TOKEN": lambda v: self.assertRegex(v, token),
            "WAW": lambda v: self.assertRegex(v, token),
            "UT": lambda v: self.assertRegex(v, token),
            "OTHER": lambda v: self.assertEqual(v, self.pf(1)["portfolio_id"]),
            "NEXT": lambda v: self.assertTrue(v and v != "null", v),
            "PROPS": lambda v: self.assertEqual(sorted(json.loads(v)), sorted(self.vistula())),
            "FROM": lambda v: self.assertRegex(v, date),
            "TO": lambda v: self.assertRegex(v, date),
            "BC": lambda v: self.assertRegex(v, r"^bc_"),
            "APPROVER": lambda v: self.assertEqual(v, pf["approver_saml_subject"]),
            "RD": lambda v: self.assertRegex(v, r"^rd_"),
            "SCIM": lambda v: self.assertEqual(v, pf["scim_token"]),
            "A": lambda v: self.assertRegex(v, r"^[A-Za-z0-9_-]{200,}$"),
            "U": lambda v: self.assertRegex(v, r"^usr_"),
        }

    # the run ---------------------------------------------------------------

    def test_walkthrough(self):
        commands = [c for b in self.blocks for c in split_commands(b)]
        self.assertGreaterEqual(len(commands), 20, "walk-through blocks not found")
        rules = [(re.compile(p, re.S), check) for p, check in self.expectations()]
        variables = self.variables()
        for i, readme_cmd in enumerate(commands, 1):
            cmd = readme_cmd.replace(README_BASE, self.srv.base_url)
            self.assertNotIn("8080", cmd, "a README address other than %s" % README_BASE)
            rc, out, err = self.sh.run(cmd)
            what = "README walk-through command %d:\n%s\n--- stdout ---\n%s\n--- stderr ---\n%s" % (
                i, readme_cmd, out[-3000:], err[-3000:])
            if rc is None:
                self.fail("bash stopped (an undefined variable?) or the command took over "
                          "%.0f s. %s" % (COMMAND_TIMEOUT, what))
            if rc != 0:
                self.fail("exit status %d, expected 0. %s" % (rc, what))
            for bad in ("invalid_client", "SVC-INTERNAL"):
                self.assertNotIn(bad, out + err, what)
            check = next((c for r, c in rules if r.search(readme_cmd)), None)
            names = assigned_names(readme_cmd)
            try:
                if check is not None:
                    check(out, err)
                elif names:
                    self.assertEqual(out, "", "an assignment printed something")
                else:
                    self.fail("no check for this command: add one to expectations() in %s"
                              % os.path.basename(__file__))
                for name in names:
                    self.assertIn(name, variables, "unknown variable %s: add it to variables()"
                                  % name)
                    variables[name](self.sh.value(name))
            except (AssertionError, KeyError, TypeError, ValueError) as e:
                raise AssertionError("%r\n%s" % (e, what)) from None


if __name__ == "__main__":
    unittest.main()
