"""The OpenAPI document as a running revopsd serves it, and the pinned npm
tools (tools/npm, installed by scripts/npm-tools.sh) that check it: shared by
t/api/pipeline/test_openapi_tools.py and test_openapi_client.py."""

import json
import os
import shutil
import subprocess
import tempfile

import harness

NPM = os.path.join(harness.ROOT, "tools", "npm")
NODE_MODULES = os.path.join(NPM, "node_modules")
BIN = os.path.join(NODE_MODULES, ".bin")
# Not the server's own address: the document must name what --public-url says.
PUBLIC_URL = "https://revops.example-hotels.test/api"
TOOL_ENV = dict(os.environ, NO_UPDATE_NOTIFIER="1", REDOCLY_TELEMETRY="off",
                REDOCLY_SUPPRESS_UPDATE_NOTICE="true", SCARF_ANALYTICS="false",
                NODE_OPTIONS="--no-deprecation")


def require_tools(tc, *names):
    for n in names:
        tc.assertTrue(os.access(os.path.join(BIN, n), os.X_OK),
                      "%s is not installed: run scripts/npm-tools.sh (make test does)" % n)


def fetch(public_url=PUBLIC_URL):
    """Starts revopsd with --public-url, fetches /v2/openapi.json, stops it.
    Returns (text, parsed document, temporary directory holding it as
    openapi.json); the caller removes the directory."""
    with harness.Server(["--public-url", public_url]) as srv:
        r = srv.request("GET", "/v2/openapi.json")
    if r.status != 200:
        raise AssertionError("GET /v2/openapi.json answered %s" % r.status)
    text = r.raw.decode("utf-8")
    tmp = tempfile.mkdtemp(prefix="revops-openapi-")
    with open(os.path.join(tmp, "openapi.json"), "w", encoding="utf-8") as f:
        f.write(text)
    return text, json.loads(text), tmp


def run(argv, timeout=120, cwd=NPM):
    """Runs a tool from tools/npm; returns the CompletedProcess (text)."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=TOOL_ENV, stdin=subprocess.DEVNULL)


def cleanup(tmp):
    shutil.rmtree(tmp, ignore_errors=True)
