"""SCIM 2.0 as Okta's SCIM 2.0 client (Okta Integration Network, "SCIM 2.0
Test App (Header Auth)") uses it: the request sequences Okta sends, replayed.

The numbered steps match docs/scim.md, "Okta".
"""

import itertools
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from scim_idp_case import ScimIdpCase  # noqa: E402
from harness import (SCIM_GROUP_URN, SCIM_USER_URN, assert_error,  # noqa: E402
                     assert_scim_error, assert_scim_list, assert_scim_ok, assert_success,
                     saml_grant, scim_patch_body, scim_request, scim_token_for)

PUBLIC_URL = "http://sp.test"
ENTITY = "http://www.okta.com/exk1revopstest"
# what Okta puts on every SCIM request
OKTA_HEADERS = {"Accept": "application/scim+json",
                "User-Agent": "Okta SCIM Client 1.0.0"}
OKTA_CT = "application/scim+json; charset=utf-8"
_seq = itertools.count(1)


def okta_user_body(user_name, given, family, active=True):
    """The body of Okta's POST /Users."""
    return {
        "schemas": [SCIM_USER_URN],
        "userName": user_name,
        "name": {"givenName": given, "familyName": family},
        "emails": [{"primary": True, "value": user_name, "type": "work"}],
        "displayName": "%s %s" % (given, family),
        "locale": "en-US",
        "externalId": "00u%s" % uuid.uuid4().hex[:17],
        "groups": [],
        "active": active,
    }


class OktaTest(ScimIdpCase):
    PUBLIC_URL = PUBLIC_URL
    ENTITY = ENTITY
    PROPERTIES = 2

    def okta(self, method, path, body=None, token=None, query=None):
        """A request with Okta's headers; query is sent with %20 for spaces."""
        return scim_request(self.srv, method, path, token or self.scim_token, body,
                            headers=OKTA_HEADERS, ctype=OKTA_CT, query=query)

    def lookup(self, user_name, token=None):
        """Okta's existence check before a create (and after a 409)."""
        r = self.okta("GET", "/Users", token=token, query=[
            ("filter", 'userName eq "%s"' % user_name), ("startIndex", 1), ("count", 100)])
        return assert_scim_list(self, r), r.body

    def new_name(self, prefix="okta"):
        return "%s.user%d.%s@okta-example.com" % (prefix, next(_seq), uuid.uuid4().hex[:6])

    def create(self, user_name=None, token=None, given="Test", family="User"):
        r = self.okta("POST", "/Users", okta_user_body(user_name or self.new_name(), given,
                                                       family), token=token)
        return assert_scim_ok(self, r, 201)

    # ------------------------------------------------------------------------------

    def test_1_test_connection(self):
        # 1. "Test Connector Configuration": a filter on a userName that does not exist
        res, body = self.lookup("okta-connection-test-%s@okta-example.com" % uuid.uuid4().hex)
        self.assertEqual(res, [])
        self.assertEqual(body["totalResults"], 0)
        self.assertEqual(body["startIndex"], 1)
        self.assertEqual(body["itemsPerPage"], 0)

    def test_2_user_lifecycle(self):
        name = self.new_name()
        # 2. existence check
        res, body = self.lookup(name)
        self.assertEqual((res, body["totalResults"]), ([], 0))
        # 3. create
        sent = okta_user_body(name, "Test", "User")
        r = self.okta("POST", "/Users", sent)
        user = assert_scim_ok(self, r, 201)
        uid = user["id"]
        self.assertTrue(r.headers.get("Location", "").endswith("/scim/v2/Users/" + uid), r)
        self.assertEqual(r.headers.get("Location"), PUBLIC_URL + "/scim/v2/Users/" + uid)
        self.assertEqual(r.headers.get("ETag"), 'W/"1"')
        self.assertEqual(user["userName"], name)
        self.assertEqual(user["name"]["givenName"], "Test")
        self.assertEqual(user["name"]["familyName"], "User")
        self.assertEqual(user["emails"], sent["emails"])
        self.assertEqual(user["externalId"], sent["externalId"])
        self.assertIs(user["active"], True)
        self.assertFalse(user.get("groups"), user)
        # 4. read back
        r = self.okta("GET", "/Users/" + uid)
        got = assert_scim_ok(self, r)
        self.assertEqual(got["id"], uid)
        self.assertEqual(got["displayName"], "Test User")
        self.assertEqual(r.headers.get("ETag"), got["meta"]["version"])
        res, _ = self.lookup(name)
        self.assertEqual([u["id"] for u in res], [uid])
        # 5. profile update: Okta PUTs the whole user it read, changed
        put = dict(got)
        put["name"] = {"givenName": "Tess", "familyName": "Userton"}
        put["displayName"] = "Tess Userton"
        put["emails"] = [{"primary": True, "value": name, "type": "work"},
                         {"primary": False, "value": "home-" + name, "type": "home"}]
        r = self.okta("PUT", "/Users/" + uid, put)
        got = assert_scim_ok(self, r)
        self.assertEqual(got["id"], uid)
        self.assertEqual(got["name"]["givenName"], "Tess")
        self.assertEqual(got["displayName"], "Tess Userton")
        self.assertEqual(sorted(e["value"] for e in got["emails"]), sorted([name, "home-" + name]))
        self.assertNotEqual(got["meta"]["version"], 'W/"1"')
        # 6. deactivate
        r = self.okta("PATCH", "/Users/" + uid, scim_patch_body(
            {"op": "replace", "value": {"active": False}}))
        self.assertEqual(r.status, 204, r)
        self.assertTrue(r.headers.get("ETag"), r)
        # 7. the user stays readable and filterable
        got = assert_scim_ok(self, self.okta("GET", "/Users/" + uid))
        self.assertIs(got["active"], False)
        self.assertEqual(got["name"]["givenName"], "Tess")
        res = assert_scim_list(self, self.okta("GET", "/Users", query={
            "filter": "active eq false", "count": 200}))
        self.assertIn(uid, [u["id"] for u in res])
        self.assertTrue(all(u["active"] is False for u in res), res)
        res, _ = self.lookup(name)
        self.assertEqual([u["id"] for u in res], [uid])
        self.assertIs(res[0]["active"], False)
        # 8. reactivate
        r = self.okta("PATCH", "/Users/" + uid, scim_patch_body(
            {"op": "replace", "value": {"active": True}}))
        self.assertEqual(r.status, 204, r)
        got = assert_scim_ok(self, self.okta("GET", "/Users/" + uid))
        self.assertIs(got["active"], True)
        res = assert_scim_list(self, self.okta("GET", "/Users", query={
            "filter": "active eq false", "count": 200}))
        self.assertNotIn(uid, [u["id"] for u in res])

    def test_3_group_push(self):
        user = self.create(given="Group", family="Member")
        uid = user["id"]
        gname = "revenue-approver"
        # 9. does the group exist?
        res = assert_scim_list(self, self.okta("GET", "/Groups", query=[
            ("filter", 'displayName eq "%s"' % gname), ("startIndex", 1), ("count", 100)]))
        self.assertEqual(res, [])
        # 10. create it, empty
        r = self.okta("POST", "/Groups", {"schemas": [SCIM_GROUP_URN], "displayName": gname,
                                          "members": []})
        group = assert_scim_ok(self, r, 201)
        gid = group["id"]
        self.assertEqual(group["displayName"], gname)
        self.assertFalse(group.get("members"), group)
        self.assertEqual(r.headers.get("Location"), PUBLIC_URL + "/scim/v2/Groups/" + gid)
        # 11. push membership
        r = self.okta("PATCH", "/Groups/" + gid, scim_patch_body(
            {"op": "add", "path": "members",
             "value": [{"value": uid, "display": user["userName"]}]}))
        self.assertEqual(r.status, 204, r)
        got = assert_scim_ok(self, self.okta("GET", "/Groups/" + gid))
        self.assertEqual([m["value"] for m in got["members"]], [uid])
        # the member's computed groups attribute: the role mapping's input
        u = assert_scim_ok(self, self.okta("GET", "/Users/" + uid))
        self.assertEqual(len(u.get("groups", [])), 1, u)
        ref = u["groups"][0]
        self.assertEqual(ref["value"], gid)
        self.assertEqual(ref["display"], gname)
        self.assertEqual(ref["type"], "direct")
        self.assertEqual(ref["$ref"], PUBLIC_URL + "/scim/v2/Groups/" + gid)
        # 12. Okta reads the group without members
        got = assert_scim_ok(self, self.okta("GET", "/Groups/%s?excludedAttributes=members"
                                             % gid))
        self.assertNotIn("members", got)
        self.assertEqual(got["displayName"], gname)
        # 13. rename: Okta sends the id along with the new displayName
        r = self.okta("PATCH", "/Groups/" + gid, scim_patch_body(
            {"op": "replace", "value": {"id": gid, "displayName": "revenue-approvers-emea"}}))
        self.assertEqual(r.status, 204, r)
        got = assert_scim_ok(self, self.okta("GET", "/Groups/" + gid))
        self.assertEqual((got["id"], got["displayName"]), (gid, "revenue-approvers-emea"))
        self.assertEqual([m["value"] for m in got["members"]], [uid])
        u = assert_scim_ok(self, self.okta("GET", "/Users/" + uid))
        self.assertEqual([g["display"] for g in u["groups"]], ["revenue-approvers-emea"])
        # 14. remove the membership by value filter
        r = self.okta("PATCH", "/Groups/" + gid, scim_patch_body(
            {"op": "remove", "path": 'members[value eq "%s"]' % uid}))
        self.assertEqual(r.status, 204, r)
        got = assert_scim_ok(self, self.okta("GET", "/Groups/" + gid))
        self.assertFalse(got.get("members"), got)
        u = assert_scim_ok(self, self.okta("GET", "/Users/" + uid))
        self.assertFalse(u.get("groups"), u)
        # 15. delete the group
        r = self.okta("DELETE", "/Groups/" + gid)
        self.assertEqual(r.status, 204, r)
        assert_scim_error(self, self.okta("GET", "/Groups/" + gid), 404)
        # the user is untouched
        self.assertIs(assert_scim_ok(self, self.okta("GET", "/Users/" + uid))["active"], True)

    def test_4_import_paging(self):
        # 16. Okta imports users page by page; a fresh portfolio holds exactly 5
        pf = self.srv.ctl("portfolio", "create", "--name", "okta-paging", "--plan", "group")
        tok = scim_token_for(self.srv, pf["id"])
        made = [self.create(token=tok)["id"] for _ in range(5)]
        pages = []
        for start, expect in ((1, 2), (3, 2), (5, 1)):
            r = self.okta("GET", "/Users", token=tok, query=[("startIndex", start),
                                                             ("count", 2)])
            res = assert_scim_list(self, r)
            self.assertIs(type(r.body["totalResults"]), int)
            self.assertEqual(r.body["totalResults"], 5)
            self.assertEqual(r.body["startIndex"], start)
            self.assertEqual(r.body["itemsPerPage"], expect)
            self.assertEqual(len(res), expect)
            pages.append([u["id"] for u in res])
        flat = [i for p in pages for i in p]
        self.assertEqual(len(flat), len(set(flat)), "a user on two pages: %r" % pages)
        self.assertEqual(set(flat), set(made))
        # stable: the same pages again, and the same order as one big page
        for (start, _), page in zip(((1, 2), (3, 2), (5, 1)), pages):
            res = assert_scim_list(self, self.okta("GET", "/Users", token=tok, query=[
                ("startIndex", start), ("count", 2)]))
            self.assertEqual([u["id"] for u in res], page)
        res = assert_scim_list(self, self.okta("GET", "/Users", token=tok, query=[
            ("startIndex", 1), ("count", 100)]))
        self.assertEqual([u["id"] for u in res], flat)
        # past the end
        r = self.okta("GET", "/Users", token=tok, query=[("startIndex", 7), ("count", 2)])
        self.assertEqual(assert_scim_list(self, r), [])
        self.assertEqual(r.body["totalResults"], 5)

    def test_5_user_name_conflict(self):
        # 17. a second create with the same userName in another case is 409;
        # Okta then finds the existing user by filter
        name = "Okta.Dup%d@Okta-Example.com" % next(_seq)
        first = self.create(name)
        r = self.okta("POST", "/Users", okta_user_body(name.lower(), "Dup", "Licate"))
        assert_scim_error(self, r, 409, "uniqueness")
        res, _ = self.lookup(name.lower())
        self.assertEqual([u["id"] for u in res], [first["id"]])
        self.assertEqual(res[0]["userName"], name)

    def test_6_deactivate_revokes_saml_token(self):
        # 18. an Okta-provisioned user signs in (SAML grant), then Okta deactivates it
        name = self.new_name("sso")
        user = self.create(name, given="Sso", family="User")
        r = saml_grant(self.srv, self.idp.assertion(name, roles=["revenue-approver"]))
        self.assertEqual(r.status, 200, r)
        tok = r.body["access_token"]
        self.assertEqual(r.body["portfolio_id"], self.pf.id)
        assert_success(self, self.srv.request("GET", "/v2/portfolios", token=tok,
                                              portfolio=self.pf.id))
        listed = [u for u in self.srv.ctl("user", "list", "--portfolio", self.pf.id)
                  if u["id"] == user["id"]]
        self.assertEqual(len(listed), 1, listed)
        self.assertIs(listed[0]["active"], True)
        self.assertEqual(listed[0]["user_name"], name)
        r = self.okta("PATCH", "/Users/" + user["id"], scim_patch_body(
            {"op": "replace", "value": {"active": False}}))
        self.assertEqual(r.status, 204, r)
        r = self.srv.request("GET", "/v2/portfolios", token=tok, portfolio=self.pf.id)
        assert_error(self, r, 401, "SVC-AUTH-UNAUTHENTICATED")
        listed = [u for u in self.srv.ctl("user", "list", "--portfolio", self.pf.id)
                  if u["id"] == user["id"]]
        self.assertIs(listed[0]["active"], False)
        self.assertEqual(listed[0]["display_name"], "Sso User")
        # and no new token while inactive
        r = saml_grant(self.srv, self.idp.assertion(name))
        harness.assert_oauth_error(self, r, 400, "invalid_grant")


if __name__ == "__main__":
    harness.run_main()
