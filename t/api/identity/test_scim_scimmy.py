"""Live SCIM resources validated by SCIMMY (pinned in tools/npm), a
third-party implementation of RFC 7643's schemas: t/js/validate-scim.mjs.
Issue 13.

Users and Groups are created, replaced, patched and listed through the real
/scim/v2 endpoints with the bodies Okta and Entra ID send (see
docs/scim.md), and every answer is checked with SCIMMY's schema classes
(`new SCIMMY.Schemas.User(resource, "out")`, with the enterprise extension
declared; Group; ResourceType; ServiceProviderConfig; the ListResponse
message).  The discovery documents are checked too: /ResourceTypes and
/ServiceProviderConfig as resources, and each definition /Schemas
publishes against SCIMMY's own definition of that RFC 7643 schema, every
attribute and characteristic (the exceptions are listed, with their
reasons, in the validator and docs/scim.md)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import (SCIM_ENTERPRISE_URN, SCIM_GROUP_URN, SCIM_USER_URN,  # noqa: E402
                     assert_scim_ok, scim_patch_body)

ROOT = harness.ROOT
VALIDATOR = os.path.join(ROOT, "t", "js", "validate-scim.mjs")
PACKAGE = os.path.join(ROOT, "tools", "npm", "node_modules", "scimmy", "package.json")
NODE = shutil.which("node")
PUBLIC_URL = "https://scim.example-hotels.test"


class ScimmyTest(harness.ScimCase):
    PLAN = "group"

    @classmethod
    def server_args(cls):
        return ["--public-url", PUBLIC_URL]

    @classmethod
    def set_up_server(cls):
        if NODE is None or not os.path.exists(PACKAGE):
            raise AssertionError("node and tools/npm (scripts/npm-tools.sh) are required")
        super().set_up_server()
        cls.tmp = tempfile.mkdtemp(prefix="revops-scimmy-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "tmp", ""), ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        self.captured = []

    # helpers ---------------------------------------------------------------

    def call(self, kind, method, path, body=None, status=200, **kw):
        """A SCIM call whose answer SCIMMY checks (kind) or None."""
        r = self.scim(method, path, body, **kw)
        data = assert_scim_ok(self, r, status)
        if kind:
            self.captured.append({"name": "%s %s" % (method, path), "kind": kind, "body": data})
        return data

    def patch(self, kind, path, *ops):
        r = self.scim("PATCH", path, scim_patch_body(*ops))
        self.assertEqual(r.status, 204, r)
        return self.call(kind, "GET", path)

    def run_validator(self, items):
        path = os.path.join(self.tmp, "captured-%d.json" % time.monotonic_ns())
        with open(path, "w") as f:
            json.dump(items, f)
        p = subprocess.run([NODE, VALIDATOR, path], capture_output=True, text=True, timeout=60)
        lines = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
        self.assertTrue(lines, "the validator printed nothing: %s" % p.stderr)
        self.assertEqual(len(lines) - 1, len(items), p.stdout + p.stderr)
        return p.returncode, lines[:-1], lines[-1], p.stdout + p.stderr

    def assert_all_valid(self):
        rc, results, summary, out = self.run_validator(self.captured)
        bad = ["%s (%s): %s" % (r["name"], r["kind"], "; ".join(r["errors"]))
               for r in results if not r["ok"]]
        self.assertEqual(bad, [], "SCIMMY refused:\n" + "\n".join(bad))
        self.assertEqual(rc, 0, out)
        return summary

    # tests -----------------------------------------------------------------

    def test_okta_user_and_group(self):
        name = "okta.scimmy@example-hotels.test"
        u = self.call("User", "POST", "/Users", {
            "schemas": [SCIM_USER_URN], "userName": name,
            "name": {"givenName": "Anna", "familyName": "Kowalska"},
            "emails": [{"primary": True, "value": name, "type": "work"}],
            "displayName": "Anna Kowalska", "locale": "pl-PL", "externalId": "00u1scimmy",
            "groups": [], "active": True}, status=201)
        path = "/Users/" + u["id"]
        got = self.call("User", "GET", path)
        got["name"]["familyName"] = "Nowak"
        got["title"] = "Revenue manager"
        self.call("User", "PUT", path, got)
        self.patch("User", path, {"op": "replace", "value": {"active": False}})
        self.patch("User", path, {"op": "replace", "value": {"active": True}})
        g = self.call("Group", "POST", "/Groups", {
            "schemas": [SCIM_GROUP_URN], "displayName": "revenue-approver", "members": []},
            status=201)
        gpath = "/Groups/" + g["id"]
        self.patch("Group", gpath, {"op": "add", "path": "members",
                                    "value": [{"value": u["id"], "display": name}]})
        self.call("User", "GET", path)               # now with groups
        self.call("Group", "GET", gpath, query={"excludedAttributes": "members"})
        self.patch("Group", gpath, {"op": "replace",
                                    "value": {"id": g["id"], "displayName": "Approvers"}})
        self.call("UserList", "GET", "/Users", query={"filter": 'userName eq "%s"' % name,
                                                       "startIndex": 1, "count": 100})
        self.call("GroupList", "GET", "/Groups", query={"startIndex": 1, "count": 100})
        summary = self.assert_all_valid()
        self.assertEqual(summary["counts"], {"User": 6, "Group": 4, "UserList": 1,
                                             "GroupList": 1})

    def test_entra_user_and_group(self):
        name = "entra.scimmy@example-hotels.test"
        u = self.call("User", "POST", "/Users", {
            "schemas": [SCIM_USER_URN, SCIM_ENTERPRISE_URN],
            "externalId": "8c1e2f4a-5b6d-4e7f-9a0b-1c2d3e4f5a6b", "userName": name,
            "active": "True", "displayName": "Jan Entra", "title": "Night manager",
            "emails": [{"primary": "True", "type": "work", "value": name}],
            "name": {"formatted": "Jan Entra", "familyName": "Entra", "givenName": "Jan"},
            "phoneNumbers": [{"type": "mobile", "value": "+48 600 000 000"}],
            "addresses": [{"type": "work", "locality": "Krakow", "country": "PL",
                           "primary": False}],
            "roles": [{"value": "finance-operator", "primary": "False"}],
            SCIM_ENTERPRISE_URN: {"employeeNumber": "701", "department": "Revenue",
                                  "costCenter": "CC-7", "organization": "Example Hotels",
                                  "division": "South", "manager": "mgr-7"},
            "meta": {"resourceType": "User"}}, status=201)
        path = "/Users/" + u["id"]
        self.patch("User", path, {"op": "Replace", "path": "active", "value": "False"})
        self.patch("User", path,
                   {"op": "Add", "path": 'emails[type eq "home"].value', "value": "jan@home.test"},
                   {"op": "Replace", "path": "name.givenName", "value": "Janek"},
                   {"op": "Replace", "value": {
                       SCIM_ENTERPRISE_URN + ":employeeNumber": "702",
                       SCIM_ENTERPRISE_URN + ":manager": {"value": "mgr-8"}}})
        g = self.call("Group", "POST", "/Groups", {
            "schemas": [SCIM_GROUP_URN], "externalId": "6f5e4d3c-2b1a-4098-8776-554433221100",
            "displayName": "finance-operator", "members": []}, status=201)
        gpath = "/Groups/" + g["id"]
        self.patch("Group", gpath, {"op": "Add", "path": "members", "value": [{"value": u["id"]}]})
        self.call("UserList", "GET", "/Users", query={"filter": 'externalId eq "%s"'
                                                       % "8c1e2f4a-5b6d-4e7f-9a0b-1c2d3e4f5a6b"})
        self.call("GroupList", "GET", "/Groups", query={
            "excludedAttributes": "members", "filter": 'displayName eq "finance-operator"'})
        self.patch("Group", gpath, {"op": "Remove", "path": "members",
                                    "value": [{"value": u["id"]}]})
        self.assert_all_valid()
        # the enterprise extension came back, and SCIMMY kept it as sent
        got = self.call(None, "GET", path)
        self.assertEqual(got[SCIM_ENTERPRISE_URN]["manager"], {"value": "mgr-8"})
        self.assertIs(got["active"], False)

    def test_discovery_documents(self):
        self.call("ServiceProviderConfig", "GET", "/ServiceProviderConfig")
        self.call("ResourceTypeList", "GET", "/ResourceTypes")
        for rt in ("User", "Group"):
            self.call("ResourceType", "GET", "/ResourceTypes/" + rt)
        self.call("SchemaList", "GET", "/Schemas")
        for urn in (SCIM_USER_URN, SCIM_GROUP_URN, SCIM_ENTERPRISE_URN):
            self.call("Schema", "GET", "/Schemas/" + urn)
        self.assert_all_valid()

    def test_validator_reports_violations(self):
        # The checks can fail: altered copies of live answers are refused.
        u = self.call("User", "POST", "/Users", {"schemas": [SCIM_USER_URN],
                                                 "userName": "bad.scimmy@example-hotels.test",
                                                 "emails": [{"value": "b@x.test",
                                                             "type": "work"}]}, status=201)
        schema = self.call("Schema", "GET", "/Schemas/" + SCIM_USER_URN)
        lst = self.call("UserList", "GET", "/Users")
        spc = self.call("ServiceProviderConfig", "GET", "/ServiceProviderConfig")
        self.captured = []

        def with_(d, **kw):
            return dict(json.loads(json.dumps(d)), **kw)

        attrs = json.loads(json.dumps(schema["attributes"]))
        for a in attrs:
            if a["name"] == "userName":
                a["caseExact"] = not a.get("caseExact", False)
        cases = [
            ("User", u, None),
            ("User", with_(u, userName=None), "Required attribute 'userName' is missing"),
            ("User", with_(u, active="True"), "active"),
            ("User", with_(u, emails={"value": "x"}), "expected to be a collection"),
            ("User", with_(u, schemas=[SCIM_GROUP_URN]), "incompatible"),
            ("User", with_(u, name={"givenName": 7}), "givenName"),
            ("Group", {"schemas": [SCIM_GROUP_URN], "id": "grp_x"},
             "Required attribute 'displayName' is missing"),
            ("UserList", with_(lst, schemas=[SCIM_USER_URN]), "ListResponse refused"),
            ("ServiceProviderConfig", with_(spc, patch={"supported": "yes"}), "supported"),
            ("Schema", with_(schema, attributes=attrs), "userName.caseExact"),
            ("Schema", with_(schema, attributes=[a for a in attrs if a["name"] != "emails"]),
             "attribute emails is not published"),
        ]
        items = [{"name": "case %d" % i, "kind": k, "body": b} for i, (k, b, _) in enumerate(cases)]
        rc, results, summary, out = self.run_validator(items)
        self.assertEqual(rc, 1, out)
        for (kind, body, expect), r in zip(cases, results):
            with self.subTest(kind=kind, expect=expect):
                if expect is None:
                    self.assertTrue(r["ok"], r)
                else:
                    self.assertFalse(r["ok"], r)
                    self.assertIn(expect, "; ".join(r["errors"]), r)


if __name__ == "__main__":
    unittest.main(verbosity=2)
