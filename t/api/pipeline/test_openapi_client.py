"""A typed client generated from the OpenAPI document a running revopsd
serves compiles: openapi-typescript writes the types, and
t/js/openapi-client.ts, which calls every operation with openapi-fetch (and
holds `@ts-expect-error` lines for requests the server refuses), must pass
`tsc --strict --noEmit`.  Issue 13."""

import json
import os
import shutil
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
import openapi_served as oa  # noqa: E402

USAGE = os.path.join(harness.ROOT, "t", "js", "openapi-client.ts")
TSCONFIG = {"compilerOptions": {"strict": True, "noEmit": True, "target": "ES2022",
                                "module": "ESNext", "moduleResolution": "Bundler",
                                "lib": ["ES2022", "DOM"], "types": [],
                                "noFallthroughCasesInSwitch": True},
            "files": ["openapi-client.ts"]}


class TypedClient(unittest.TestCase):
    def test_generated_client_compiles(self):
        oa.require_tools(self, "openapi-typescript", "tsc")
        text, doc, tmp = oa.fetch()
        try:
            # The usage file sits beside the generated types and resolves
            # openapi-fetch from the pinned tools, as in a user's project.
            os.symlink(oa.NODE_MODULES, os.path.join(tmp, "node_modules"))
            shutil.copy(USAGE, tmp)
            with open(os.path.join(tmp, "tsconfig.json"), "w") as f:
                json.dump(TSCONFIG, f)
            gen = oa.run([os.path.join(oa.BIN, "openapi-typescript"),
                          os.path.join(tmp, "openapi.json"),
                          "-o", os.path.join(tmp, "revops-api.d.ts")])
            self.assertEqual(gen.returncode, 0, gen.stdout[-2000:] + gen.stderr[-3000:])
            tsc = oa.run([os.path.join(oa.BIN, "tsc"), "-p", tmp, "--strict", "--noEmit"],
                         timeout=180)
            self.assertEqual(tsc.returncode, 0, tsc.stdout[-6000:] + tsc.stderr[-2000:])
            # Every operation of the document is in the usage file (tsc checks
            # the same through its Operations type; this says which is missing).
            with open(USAGE) as f:
                usage = f.read()
            for path, item in doc["paths"].items():
                for method in ("get", "put", "post", "patch", "delete"):
                    if method in item:
                        self.assertIn('"%s": {' % path, usage, path)
                        self.assertIn('client.%s("%s"' % (method.upper(), path), usage,
                                      "%s %s" % (method.upper(), path))
        finally:
            oa.cleanup(tmp)


if __name__ == "__main__":
    unittest.main(verbosity=2)
