"""OAuth seen through openid-client (pinned in tools/npm), the library a
Node client developer reaches for: RFC 8414 `discovery()` against the live
server (`algorithm: 'oauth2'`: there is no OpenID configuration, by design),
`clientCredentialsGrant()` with client_secret_basic and with
client_secret_post, the token used on a v2 call, and a wrong secret, which
must surface as `invalid_client` with both methods (the Basic challenge only
when the client used the Authorization header).  Issue 13.

t/js/oauth-openid-client.mjs does the checks; this suite also runs the
example of docs/api-guide.md exactly as written there (only the address,
the client and the portfolio filled in), so the documented example cannot
drift from what works."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402

ROOT = harness.ROOT
SCRIPT = os.path.join(ROOT, "t", "js", "oauth-openid-client.mjs")
GUIDE = os.path.join(ROOT, "docs", "api-guide.md")
PACKAGE_DIR = os.path.join(ROOT, "tools", "npm", "node_modules", "openid-client")
NODE = shutil.which("node")
DOC_ADDRESS = "http://127.0.0.1:8080"
CHECKS = ["discovery client_secret_basic", "grant client_secret_basic",
          "v2 call client_secret_basic", "discovery client_secret_post",
          "grant client_secret_post", "v2 call client_secret_post",
          "wrong secret client_secret_basic", "wrong secret client_secret_post"]


def guide_example():
    """The ```js block of the guide's OAuth metadata section."""
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```js\n(.*?)```", text, re.S)
    blocks = [b for b in blocks if "openid-client" in b]
    if len(blocks) != 1:
        raise AssertionError("docs/api-guide.md: expected one openid-client example, found %d"
                             % len(blocks))
    return "\n".join(line[4:] if line.startswith("    ") else line
                     for line in blocks[0].splitlines())


class OpenIdClientTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        if NODE is None:
            raise AssertionError("node is required (scripts/install-deps.sh)")
        if not os.path.isdir(PACKAGE_DIR):
            raise AssertionError("openid-client is not installed: run scripts/npm-tools.sh "
                                 "(make test does)")
        cls.seed = cls.srv.seed_portfolio("group", 1)
        cls.tmp = tempfile.mkdtemp(prefix="revops-oidc-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)
        super().tearDownClass()

    def run_script(self, client_id, secret, portfolio):
        p = subprocess.run([NODE, SCRIPT, self.srv.base_url, client_id, secret, portfolio],
                           capture_output=True, text=True, timeout=60)
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        self.assertTrue(lines, "the script printed nothing: %s" % p.stderr)
        return p.returncode, {r["check"]: r for r in lines[:-1]}, lines[-1], p.stdout + p.stderr

    def test_discovery_grants_and_errors(self):
        rc, results, summary, out = self.run_script(self.seed.client_id,
                                                    self.seed.client_secret, self.seed.id)
        self.assertEqual(list(results), CHECKS, out)
        self.assertEqual(summary, {"checks": len(CHECKS), "failed": 0}, out)
        self.assertEqual(rc, 0, out)
        for method in ("client_secret_basic", "client_secret_post"):
            d = results["discovery " + method]
            self.assertEqual(d["issuer"], self.srv.base_url)
            self.assertEqual(d["token_endpoint"], self.srv.base_url + "/oauth/token")
            g = results["grant " + method]
            self.assertEqual((g["scope"], g["portfolio_id"]), ("portfolios:read", self.seed.id))
            self.assertEqual(results["v2 call " + method]["portfolio_ids"], [self.seed.id])
        basic = results["wrong secret client_secret_basic"]
        self.assertEqual((basic["error_class"], basic["status"], basic["body_error"]),
                         ("WWWAuthenticateChallengeError", 401, "invalid_client"), basic)
        self.assertEqual(basic["challenges"], [{"scheme": "basic",
                                                "parameters": {"realm": "revops"}}])
        post = results["wrong secret client_secret_post"]
        self.assertEqual((post["error_class"], post["status"], post["oauth_error"],
                          post["www_authenticate"]),
                         ("ResponseBodyError", 400, "invalid_client", None), post)

    def test_script_fails_on_a_violation(self):
        # Another portfolio's id on the v2 call is a 403: the two "v2 call"
        # checks must fail and the script must say so (the checks can fail).
        other = self.srv.seed_portfolio("group", 1)
        rc, results, summary, out = self.run_script(self.seed.client_id,
                                                    self.seed.client_secret, other.id)
        self.assertEqual(rc, 1, out)
        self.assertEqual(summary["failed"], 2, out)
        self.assertEqual([c for c, r in results.items() if not r["ok"]],
                         ["v2 call client_secret_basic", "v2 call client_secret_post"], out)
        self.assertEqual(results["v2 call client_secret_post"]["status"], 403, out)

    def test_guide_example_runs_as_written(self):
        code = guide_example()
        self.assertIn("client.ClientSecretPost(clientSecret)", code)
        self.assertIn("algorithm: 'oauth2'", code)
        self.assertEqual(code.count(DOC_ADDRESS), 2, code)
        entry = subprocess.run([NODE, "-p", "require.resolve('openid-client')"],
                               cwd=os.path.dirname(PACKAGE_DIR), capture_output=True, text=True,
                               timeout=30).stdout.strip()
        self.assertTrue(entry, "cannot resolve openid-client")
        # fill in what the guide leaves to the reader; nothing else changes
        code = code.replace(DOC_ADDRESS, self.srv.base_url)
        code = code.replace("from 'openid-client'", "from %s" % json.dumps("file://" + entry))
        prelude = "const clientId = %s, clientSecret = %s, portfolioId = %s;\n" % (
            json.dumps(self.seed.client_id), json.dumps(self.seed.client_secret),
            json.dumps(self.seed.id))
        path = os.path.join(self.tmp, "guide-example.mjs")
        with open(path, "w", encoding="utf-8") as f:
            f.write(prelude + code + "\n")
        p = subprocess.run([NODE, path], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(p.stdout.startswith("200 "), p.stdout + p.stderr)
        self.assertIn(self.seed.id, p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
