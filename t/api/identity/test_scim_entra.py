"""SCIM 2.0 as Microsoft Entra ID's provisioning service sends it: string
booleans, capitalised ops, path filters, no-path replaces with dotted and
enterprise-URN keys, manager in several shapes, the members removal form.

The numbered steps match docs/scim.md, "Microsoft Entra ID".
"""

import itertools
import os
import sys
import urllib.parse
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from scim_idp_case import ScimIdpCase  # noqa: E402
from harness import (SCIM_ENTERPRISE_URN, SCIM_GROUP_URN, SCIM_USER_URN,  # noqa: E402
                     assert_error, assert_scim_error, assert_scim_list, assert_scim_ok,
                     assert_success, saml_grant, scim_patch_body, scim_request)

PUBLIC_URL = "http://sp.test"
ENTITY = "https://sts.windows.net/0b2d7c51-revops-test/"
ENTRA_HEADERS = {"Accept": "application/scim+json"}
EMP = SCIM_ENTERPRISE_URN
_seq = itertools.count(1)


def entra_user_body(user_name, active=True, **extra):
    """The body of Entra's POST /Users (attribute mapping defaults).  Entra
    may send "active" as the string "True"; test_2 does, the other tests use
    a JSON boolean so that one quirk failing does not fail them all."""
    body = {
        "schemas": [SCIM_USER_URN, SCIM_ENTERPRISE_URN],
        "externalId": str(uuid.uuid4()),
        "userName": user_name,
        "active": active,
        "displayName": "Entra Person",
        "meta": {"resourceType": "User"},
        "name": {"formatted": "Entra Person", "familyName": "Person", "givenName": "Entra"},
        "title": "Revenue Analyst",
        EMP: {"department": "Revenue"},
    }
    body.update(extra)
    return body


class EntraTest(ScimIdpCase):
    PUBLIC_URL = PUBLIC_URL
    ENTITY = ENTITY
    PROPERTIES = 1

    # helpers -------------------------------------------------------------------------

    def entra(self, method, path, body=None, query=None):
        return scim_request(self.srv, method, path, self.scim_token, body, headers=ENTRA_HEADERS,
                            query=query)

    def new_name(self, prefix="entra"):
        return "%s%d_%s@contoso.example" % (prefix, next(_seq), uuid.uuid4().hex[:8])

    def create(self, user_name=None, **extra):
        r = self.entra("POST", "/Users", entra_user_body(user_name or self.new_name(), **extra))
        return assert_scim_ok(self, r, 201)

    def get(self, uid):
        return assert_scim_ok(self, self.entra("GET", "/Users/" + uid))

    def patch(self, path, *ops, status=204):
        r = self.entra("PATCH", path, scim_patch_body(*ops))
        self.assertEqual(r.status, status, r)
        return r

    # ------------------------------------------------------------------------------

    def test_1_test_connection(self):
        # 1. Entra's "Test Connection": a filter on a random GUID userName
        r = self.entra("GET", "/Users", query={"filter": 'userName eq "%s"' % uuid.uuid4()})
        self.assertEqual(assert_scim_list(self, r), [])
        self.assertEqual(r.body["totalResults"], 0)
        # and the same for groups, without members
        r = self.entra("GET", "/Groups", query=[("excludedAttributes", "members"),
                                                ("filter", 'displayName eq "%s"'
                                                 % uuid.uuid4())])
        self.assertEqual(assert_scim_list(self, r), [])
        self.assertEqual(r.body["totalResults"], 0)

    def test_2_create_with_string_boolean_and_match_by_external_id(self):
        name = self.new_name()
        # 2. Entra looks the user up first
        r = self.entra("GET", "/Users", query={"filter": 'userName eq "%s"' % name})
        self.assertEqual(assert_scim_list(self, r), [])
        # 3. create: "active" as the string "True"
        sent = entra_user_body(name, active="True",
                               emails=[{"primary": "True", "type": "work", "value": name}])
        user = assert_scim_ok(self, self.entra("POST", "/Users", sent), 201)
        self.assertIs(user["active"], True, user)
        got = self.get(user["id"])
        self.assertIs(got["active"], True, "string 'True' must be stored as a boolean")
        self.assertIs(got["emails"][0]["primary"], True, got)
        self.assertEqual(got["externalId"], sent["externalId"])
        self.assertEqual(got["title"], "Revenue Analyst")
        self.assertEqual(got[EMP]["department"], "Revenue")
        self.assertIn(EMP, got["schemas"])
        # Entra also matches by externalId
        r = self.entra("GET", "/Users", query={"filter": 'externalId eq "%s"'
                                               % sent["externalId"]})
        self.assertEqual([u["id"] for u in assert_scim_list(self, r)], [user["id"]])
        # "False" on create means inactive
        other = self.create(active="False")
        self.assertIs(self.get(other["id"])["active"], False)

    def test_3_patch_active_with_capitalised_op_and_string_value(self):
        user = self.create()
        path = "/Users/" + user["id"]
        # 4. soft delete (Entra's default deprovisioning)
        self.patch(path, {"op": "Replace", "path": "active", "value": "False"})
        self.assertIs(self.get(user["id"])["active"], False)
        res = assert_scim_list(self, self.entra("GET", "/Users", query={
            "filter": "active eq false", "count": 200}))
        self.assertIn(user["id"], [u["id"] for u in res])
        # and back
        self.patch(path, {"op": "Replace", "path": "active", "value": "True"})
        self.assertIs(self.get(user["id"])["active"], True)
        self.patch(path, {"op": "REPLACE", "path": "active", "value": "false"})
        self.assertIs(self.get(user["id"])["active"], False)
        self.patch(path, {"op": "replace", "path": "active", "value": True})
        self.assertIs(self.get(user["id"])["active"], True)

    def test_4_add_work_email_by_value_filter(self):
        user = self.create()
        self.assertFalse(user.get("emails"), user)
        path = "/Users/" + user["id"]
        # 5. Add on emails[type eq "work"].value when there is no work email: created
        self.patch(path, {"op": "Add", "path": 'emails[type eq "work"].value',
                          "value": "work@contoso.example"})
        got = self.get(user["id"])
        work = [e for e in got.get("emails", []) if e.get("type") == "work"]
        self.assertEqual([e["value"] for e in work], ["work@contoso.example"], got)
        # Replace on the same path changes it in place, no second work email
        self.patch(path, {"op": "Replace", "path": 'emails[type eq "work"].value',
                          "value": "new-work@contoso.example"})
        got = self.get(user["id"])
        work = [e for e in got.get("emails", []) if e.get("type") == "work"]
        self.assertEqual([e["value"] for e in work], ["new-work@contoso.example"], got)
        # a primary flag as a string boolean
        self.patch(path, {"op": "Replace", "path": 'emails[type eq "work"].primary',
                          "value": "True"})
        work = [e for e in self.get(user["id"])["emails"] if e.get("type") == "work"]
        self.assertIs(work[0]["primary"], True, work)

    def test_5_replace_sub_attribute_and_add_on_single_value(self):
        user = self.create()
        path = "/Users/" + user["id"]
        # 6. Replace name.givenName
        self.patch(path, {"op": "Replace", "path": "name.givenName", "value": "Renamed"})
        got = self.get(user["id"])
        self.assertEqual(got["name"]["givenName"], "Renamed")
        self.assertEqual(got["name"]["familyName"], "Person", "siblings are kept")
        # Entra uses Add on single-valued attributes that already have a value
        self.patch(path, {"op": "Add", "path": "displayName", "value": "Added Name"},
                   {"op": "Add", "path": "title", "value": "Director"})
        got = self.get(user["id"])
        self.assertEqual((got["displayName"], got["title"]), ("Added Name", "Director"))

    def test_6_no_path_replace_with_dotted_and_urn_keys(self):
        user = self.create()
        path = "/Users/" + user["id"]
        # 7. dotted keys
        self.patch(path, {"op": "Replace", "value": {"name.familyName": "Xavier",
                                                     "displayName": "Y Xavier"}})
        got = self.get(user["id"])
        self.assertEqual(got["name"]["familyName"], "Xavier")
        self.assertEqual(got["name"]["givenName"], "Entra")
        self.assertEqual(got["displayName"], "Y Xavier")
        # 8. enterprise extension keys as full URNs; manager as a bare string
        self.patch(path, {"op": "Replace", "value": {
            EMP + ":employeeNumber": "123", EMP + ":manager": "mgr-id"}})
        got = self.get(user["id"])
        self.assertEqual(got[EMP]["employeeNumber"], "123")
        self.assertEqual(got[EMP]["manager"], {"value": "mgr-id"})
        self.assertEqual(got[EMP]["department"], "Revenue")
        self.assertIn(EMP, got["schemas"])
        # 9. a replace value carrying "id" changes everything else, never the id
        self.patch(path, {"op": "Replace", "value": {"id": "usr_someone_else",
                                                     "title": "With Id"}})
        got = self.get(user["id"])
        self.assertEqual(got["id"], user["id"])
        self.assertEqual(got["title"], "With Id")
        assert_scim_error(self, self.entra("GET", "/Users/usr_someone_else"), 404)

    def test_7_manager_shapes(self):
        user = self.create()
        path = "/Users/" + user["id"]
        for value, expect in (("mgr-1", "mgr-1"), ({"value": "mgr-2"}, "mgr-2"),
                              ([{"value": "mgr-3"}], "mgr-3")):
            self.patch(path, {"op": "Add", "path": EMP + ":manager", "value": value})
            self.assertEqual(self.get(user["id"])[EMP]["manager"], {"value": expect},
                             "manager sent as %r" % (value,))
        self.patch(path, {"op": "Replace", "value": {EMP: {"manager": "mgr-4"}}})
        self.assertEqual(self.get(user["id"])[EMP]["manager"], {"value": "mgr-4"})
        # POST with manager as a string is normalised too
        other = self.create(**{EMP: {"manager": "mgr-5", "employeeNumber": "9"}})
        self.assertEqual(self.get(other["id"])[EMP]["manager"], {"value": "mgr-5"})

    def test_8_groups(self):
        u1 = self.create()
        u2 = self.create()
        # 10. create the group (Entra sends externalId and empty members)
        r = self.entra("POST", "/Groups", {"schemas": [SCIM_GROUP_URN],
                                           "externalId": str(uuid.uuid4()),
                                           "displayName": "revenue-approver", "members": []})
        group = assert_scim_ok(self, r, 201)
        gpath = "/Groups/" + group["id"]
        # 11. add members
        self.patch(gpath, {"op": "Add", "path": "members",
                           "value": [{"value": u1["id"]}, {"value": u2["id"]}]})
        got = assert_scim_ok(self, self.entra("GET", gpath))
        self.assertEqual(sorted(m["value"] for m in got["members"]),
                         sorted([u1["id"], u2["id"]]))
        # adding an existing member again does not duplicate it
        self.patch(gpath, {"op": "Add", "path": "members", "value": [{"value": u1["id"]}]})
        got = assert_scim_ok(self, self.entra("GET", gpath))
        self.assertEqual(len(got["members"]), 2, got)
        # role mapping input: the user's groups attribute
        for u in (u1, u2):
            groups = self.get(u["id"]).get("groups", [])
            self.assertEqual([(g["value"], g["display"]) for g in groups],
                             [(group["id"], "revenue-approver")])
        # 12. Entra's removal form: path "members" with a value list
        self.patch(gpath, {"op": "Remove", "path": "members", "value": [{"value": u1["id"]}]})
        got = assert_scim_ok(self, self.entra("GET", gpath))
        self.assertEqual([m["value"] for m in got["members"]], [u2["id"]])
        self.assertFalse(self.get(u1["id"]).get("groups"))
        # 13. rename by path
        self.patch(gpath, {"op": "Replace", "path": "displayName", "value": "finance-operator"})
        self.assertEqual(assert_scim_ok(self, self.entra("GET", gpath))["displayName"],
                         "finance-operator")
        self.assertEqual([g["display"] for g in self.get(u2["id"])["groups"]],
                         ["finance-operator"])
        # a bare string member value in an add is accepted
        self.patch(gpath, {"op": "add", "path": "members", "value": u1["id"]})
        got = assert_scim_ok(self, self.entra("GET", gpath))
        self.assertEqual(sorted(m["value"] for m in got["members"]),
                         sorted([u1["id"], u2["id"]]))

    def test_9_roles_round_trip(self):
        # 14. app roles as SCIM roles
        name = self.new_name("roles")
        user = self.create(name, roles=[{"value": "finance-operator"}])
        got = self.get(user["id"])
        self.assertEqual([r["value"] for r in got["roles"]], ["finance-operator"])
        listed = [u for u in self.srv.ctl("user", "list", "--portfolio", self.pf.id)
                  if u["id"] == user["id"]]
        self.assertEqual(len(listed), 1)
        self.assertEqual(listed[0]["roles"], ["finance-operator"])
        # Entra adds roles with a string "primary"
        self.patch("/Users/" + user["id"], {"op": "Add", "path": "roles", "value": [
            {"value": "ops-manager", "display": "Ops", "primary": "False"}]})
        got = self.get(user["id"])
        self.assertEqual(sorted(r["value"] for r in got["roles"]),
                         ["finance-operator", "ops-manager"])
        ops = [r for r in got["roles"] if r["value"] == "ops-manager"][0]
        self.assertIs(ops["primary"], False)
        listed = [u for u in self.srv.ctl("user", "list", "--portfolio", self.pf.id)
                  if u["id"] == user["id"]]
        self.assertEqual(sorted(listed[0]["roles"]), ["finance-operator", "ops-manager"])
        self.patch("/Users/" + user["id"], {"op": "Remove",
                                             "path": 'roles[value eq "finance-operator"]'})
        self.assertEqual([r["value"] for r in self.get(user["id"])["roles"]], ["ops-manager"])

    def test_10_filters_with_plus_and_percent20(self):
        name = self.new_name("flt")
        user = self.create(name)
        enc = urllib.parse.quote(name, safe="")
        for q in ("filter=userName%%20eq%%20%%22%s%%22" % enc,
                  "filter=userName+eq+%%22%s%%22" % enc,
                  "filter=userName%%20eq+%%22%s%%22" % enc):
            res = assert_scim_list(self, self.entra("GET", "/Users?" + q))
            self.assertEqual([u["id"] for u in res], [user["id"]], q)
        # no match: 200 and an empty list
        r = self.entra("GET", "/Users?filter=userName+eq+%22nobody-here%40contoso.example%22")
        self.assertEqual(assert_scim_list(self, r), [])
        self.assertEqual(r.body["totalResults"], 0)

    def test_11_hard_delete_revokes(self):
        name = self.new_name("del")
        user = self.create(name)
        r = saml_grant(self.srv, self.idp.assertion(name))
        self.assertEqual(r.status, 200, r)
        tok = r.body["access_token"]
        assert_success(self, self.srv.request("GET", "/v2/portfolios", token=tok,
                                              portfolio=self.pf.id))
        # 15. hard delete
        r = self.entra("DELETE", "/Users/" + user["id"])
        self.assertEqual(r.status, 204, r)
        assert_scim_error(self, self.entra("GET", "/Users/" + user["id"]), 404)
        r = self.srv.request("GET", "/v2/portfolios", token=tok, portfolio=self.pf.id)
        assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")

    def test_12_soft_delete_revokes(self):
        name = self.new_name("soft")
        user = self.create(name)
        r = saml_grant(self.srv, self.idp.assertion(name))
        self.assertEqual(r.status, 200, r)
        tok = r.body["access_token"]
        self.patch("/Users/" + user["id"], {"op": "Replace", "path": "active",
                                             "value": "False"})
        r = self.srv.request("GET", "/v2/portfolios", token=tok, portfolio=self.pf.id)
        assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")


if __name__ == "__main__":
    harness.run_main()
