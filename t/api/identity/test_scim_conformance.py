"""Microsoft's SCIM reference test collection (../shared/conformance/scim),
run with the pinned newman against a fresh revopsd, as a peer's suite that
our SCIM service must pass.  Assertions we decided are wrong for us would
be listed in OVERRULED with the reason in docs/scim.md; there are none."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402

ROOT = harness.ROOT
COLLECTION = os.path.join(ROOT, "..", "shared", "conformance", "scim", "PostmanCollection.json")
NEWMAN = os.path.join(ROOT, "tools", "npm", "node_modules", ".bin", "newman")
FOLDERS = ["Endpoint tests", "User tests", "Group tests", "ComplexAttribute tests",
           "User tests with garbage", "Group tests with garbage", "Teardown garbage"]

# (request name, assertion name) pairs we overrule, each explained in docs/scim.md.
OVERRULED = set()


class ScimConformance(unittest.TestCase):
    def test_reference_collection(self):
        self.assertTrue(os.path.exists(COLLECTION), COLLECTION)
        self.assertTrue(os.access(NEWMAN, os.X_OK), "run scripts/npm-tools.sh (make test does)")
        srv = harness.Server()
        try:
            pf = srv.ctl("portfolio", "create", "--name", "SCIM conformance",
                         "--plan", "enterprise")["id"]
            token = srv.ctl("scim-token", "create", "--portfolio", pf)["scim_token"]
            with tempfile.TemporaryDirectory() as tmp:
                report = os.path.join(tmp, "report.json")
                argv = [NEWMAN, "run", COLLECTION,
                        "--env-var", "Protocol=http", "--env-var", "Server=127.0.0.1",
                        "--env-var", "Port=:%d" % srv.port, "--env-var", "Api=scim/v2",
                        "--env-var", "token=" + token,
                        "--reporters", "cli,json", "--reporter-json-export", report,
                        "--color", "off", "--timeout-request", "10000"]
                for f in FOLDERS:
                    argv += ["--folder", f]
                run = subprocess.run(argv, capture_output=True, text=True, timeout=240,
                                     env=dict(os.environ, NO_UPDATE_NOTIFIER="1"))
                with open(report) as fh:
                    data = json.load(fh)
            stats = data["run"]["stats"]
            failures = [(f["source"]["name"], f["error"]["test"], f["error"]["message"])
                        for f in data["run"]["failures"]]
            unexpected = [f for f in failures if (f[0], f[1]) not in OVERRULED]
            self.assertEqual(unexpected, [], run.stdout[-4000:])
            # The collection really ran: every request answered, ~100 assertions made.
            self.assertGreaterEqual(stats["requests"]["total"], 70)
            self.assertEqual(stats["requests"]["failed"], 0)
            self.assertGreaterEqual(stats["assertions"]["total"], 100)
        finally:
            srv.close()


if __name__ == "__main__":
    unittest.main()
