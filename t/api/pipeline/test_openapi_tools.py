"""The OpenAPI document a running revopsd serves (started with a public URL
that is not its own address), checked with the tools our users point at it,
all pinned in tools/npm: @apidevtools/swagger-parser validate,
@seriousme/openapi-schema-validator, Spectral with spectral:oas
(tools/npm/spectral.yaml), Redocly recommended (tools/npm/redocly.yaml), and
Stoplight Prism loading it as a mock server.  Each must report nothing:
no error and no warning (the rules turned off in the two config files say
why there).  Issue 13."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import openapi_served as oa  # noqa: E402


class ServedOpenApiTools(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.text, cls.doc, cls.tmp = oa.fetch()
        cls.path = os.path.join(cls.tmp, "openapi.json")

    @classmethod
    def tearDownClass(cls):
        oa.cleanup(cls.tmp)

    def test_names_the_public_url(self):
        """servers[0].url, the OAuth tokenUrl and the absolute example URLs
        follow --public-url; the demo address the file is written for is gone."""
        self.assertEqual(self.doc["servers"][0]["url"], oa.PUBLIC_URL)
        flow = self.doc["components"]["securitySchemes"]["oauth2"]["flows"]["clientCredentials"]
        self.assertEqual(flow["tokenUrl"], oa.PUBLIC_URL + "/oauth/token")
        self.assertNotIn("127.0.0.1:8080", self.text)
        self.assertIn('"location": "%s/scim/v2/Users/usr_' % oa.PUBLIC_URL, self.text)
        token = self.doc["paths"]["/oauth/token"]["post"]
        self.assertIn({"basicAuth": []}, token["security"])
        self.assertEqual(self.doc["components"]["securitySchemes"]["basicAuth"]["scheme"], "basic")

    def test_swagger_parser_validates(self):
        oa.require_tools(self)
        r = oa.run(["node", "-e",
                    "require('@apidevtools/swagger-parser').validate(process.argv[1])"
                    ".then(() => console.log('valid'),"
                    " e => { console.error(e.message); process.exit(1); })", self.path])
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("valid", r.stdout)

    def test_openapi_schema_validator(self):
        r = oa.run(["node", "--input-type=module", "-e",
                    "import {Validator} from '@seriousme/openapi-schema-validator';"
                    "const v = new Validator();"
                    "const r = await v.validate(process.argv[1]);"
                    "console.log(JSON.stringify({valid: r.valid, version: v.version,"
                    " errors: r.errors || []}));", self.path])
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        out = json.loads(r.stdout)
        self.assertEqual(out["errors"], [])
        self.assertTrue(out["valid"], out)
        self.assertEqual(out["version"], "3.1")

    def test_spectral_oas(self):
        oa.require_tools(self, "spectral")
        r = oa.run([os.path.join(oa.BIN, "spectral"), "lint", "--ruleset", "spectral.yaml",
                    "--format", "json", "--fail-severity", "hint", "--quiet", self.path])
        try:
            results = json.loads(r.stdout or "[]")
        except ValueError:
            self.fail("spectral printed no JSON: %s %s" % (r.stdout[-2000:], r.stderr[-2000:]))
        found = ["%s %s %s" % (x.get("code"), ".".join(map(str, x.get("path", []))),
                               x.get("message")) for x in results]
        self.assertEqual(found, [], "\n".join(found[:40]))
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])

    def test_redocly_recommended(self):
        oa.require_tools(self, "redocly")
        r = oa.run([os.path.join(oa.BIN, "redocly"), "lint", "--config", "redocly.yaml",
                    "--format", "json", self.path])
        start = r.stdout.find("{")
        self.assertGreaterEqual(start, 0, r.stdout[-2000:] + r.stderr[-2000:])
        report = json.loads(r.stdout[start:])
        problems = ["%s %s: %s" % (p["severity"], p["ruleId"], p["message"])
                    for p in report.get("problems", [])]
        self.assertEqual(problems, [], "\n".join(problems[:40]))
        self.assertEqual(report["totals"]["errors"], 0)
        self.assertEqual(report["totals"]["warnings"], 0)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])

    def test_prism_mock_loads(self):
        """prism mock starts on the document and answers from it."""
        oa.require_tools(self, "prism")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = open(os.path.join(self.tmp, "prism.log"), "w+")
        proc = subprocess.Popen([os.path.join(oa.BIN, "prism"), "mock", "-h", "127.0.0.1",
                                 "-p", str(port), self.path], cwd=oa.NPM, stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=oa.TOOL_ENV, start_new_session=True)
        try:
            body, deadline = None, time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port,
                                                timeout=5) as resp:
                        self.assertEqual(resp.status, 200)
                        body = json.loads(resp.read())
                        break
                except OSError:
                    time.sleep(0.2)
            log.seek(0)
            self.assertEqual(body, {"status": "ok"}, "prism did not answer:\n" + log.read()[-4000:])
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            log.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
