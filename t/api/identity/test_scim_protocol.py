"""SCIM 2.0 (RFC 7643/7644) at /scim/v2: authentication, media types, errors,
ETags, paging, projection, sorting, filters, portfolio isolation, discovery.

The Okta and Entra ID request sequences are in test_scim_okta.py and
test_scim_entra.py; the SAML grant in test_saml.py.  The sso.user.* events
are not observable over HTTP yet and are not tested here.
"""

import itertools
import os
import re
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import harness  # noqa: E402
from harness import (SCIM_CT, SCIM_ENTERPRISE_URN, SCIM_GROUP_URN,  # noqa: E402
                     SCIM_USER_URN, assert_common_headers, assert_scim_error,
                     assert_scim_list, assert_scim_ok, basic_auth, scim_patch_body,
                     scim_request, scim_token_for)

ETAG_RE = re.compile(r'^W/"[^"]+"$')
_seq = itertools.count(1)


def uname(prefix="proto"):
    return "%s-%d-%s@example.com" % (prefix, next(_seq), uuid.uuid4().hex[:8])


class ScimProtocolTest(harness.ServerCase):
    @classmethod
    def set_up_server(cls):
        cls.a = cls.srv.seed_portfolio("enterprise", 1)
        cls.b = cls.srv.seed_portfolio("group", 1)
        cls.ta = scim_token_for(cls.srv, cls.a.id)
        cls.tb = scim_token_for(cls.srv, cls.b.id)

    # helpers -----------------------------------------------------------------

    def scim(self, method, path, body=None, token=None, **kw):
        return scim_request(self.srv, method, path, self.ta if token is None else token,
                            body, **kw)

    def create_user(self, user_name=None, token=None, **attrs):
        body = {"schemas": [SCIM_USER_URN], "userName": user_name or uname()}
        body.update(attrs)
        r = self.scim("POST", "/Users", body, token=token)
        return assert_scim_ok(self, r, 201), r

    def fresh_portfolio(self):
        pf = self.srv.ctl("portfolio", "create", "--name", "scim-" + uuid.uuid4().hex[:6],
                          "--plan", "enterprise")
        return pf["id"], scim_token_for(self.srv, pf["id"])

    def list_users(self, token=None, **params):
        r = self.scim("GET", "/Users", token=token, query=params)
        return assert_scim_list(self, r), r.body

    # authentication --------------------------------------------------------------

    def assert_401(self, r):
        assert_scim_error(self, r, 401)
        self.assertTrue(r.headers.get("WWW-Authenticate", "").lower().startswith("bearer"),
                        "401 without WWW-Authenticate: Bearer: %r" % (r,))

    def test_no_token_is_401_with_scim_error(self):
        user, _ = self.create_user()
        for method, path, body in [("GET", "/Users", None), ("GET", "/Groups", None),
                                   ("GET", "/Users/" + user["id"], None),
                                   ("POST", "/Users", {"schemas": [SCIM_USER_URN],
                                                       "userName": uname()}),
                                   ("DELETE", "/Users/" + user["id"], None)]:
            r = scim_request(self.srv, method, path, None, body)
            self.assert_401(r)
        # nothing was deleted
        assert_scim_ok(self, self.scim("GET", "/Users/" + user["id"]))

    def test_wrong_token_is_401(self):
        oauth_token = self.a.token  # an API access token is not a SCIM token
        for auth in ["Bearer garbage", "Bearer " + self.ta + "x", "Bearer " + self.ta[:-1],
                     "Bearer " + oauth_token, "Basic " + self.ta,
                     basic_auth(self.a.client_id, self.a.client_secret), "Bearer"]:
            r = scim_request(self.srv, "GET", "/Users", None,
                             headers={"Authorization": auth})
            self.assert_401(r)

    def test_bearer_scheme_is_case_insensitive(self):
        r = scim_request(self.srv, "GET", "/Users", None,
                         headers={"Authorization": "bearer " + self.ta})
        assert_scim_list(self, r)

    def test_common_headers_on_scim_responses(self):
        # API-CONTRACT §1: every response, errors included
        assert_common_headers(self, self.scim("GET", "/Users"))
        assert_common_headers(self, self.scim("GET", "/Users/usr_nope"))
        assert_common_headers(self, scim_request(self.srv, "GET", "/Users", None))

    # media types and malformed bodies ----------------------------------------------

    def test_unsupported_media_type_415(self):
        body = '{"schemas":["%s"],"userName":"%s"}' % (SCIM_USER_URN, uname())
        for ct in ("text/plain", "application/xml", "application/x-www-form-urlencoded"):
            r = self.scim("POST", "/Users", body, ctype=ct)
            assert_scim_error(self, r, 415)
        user, _ = self.create_user()
        r = self.scim("PUT", "/Users/" + user["id"],
                      '{"schemas":["%s"],"userName":"%s"}' % (SCIM_USER_URN, user["userName"]),
                      ctype="text/plain")
        assert_scim_error(self, r, 415)
        r = self.scim("PATCH", "/Users/" + user["id"],
                      '{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],'
                      '"Operations":[]}', ctype="text/plain")
        assert_scim_error(self, r, 415)

    def test_json_and_scim_json_are_accepted(self):
        for ct in (SCIM_CT, "application/json", "application/scim+json; charset=utf-8",
                   "application/json; charset=utf-8"):
            r = self.scim("POST", "/Users", {"schemas": [SCIM_USER_URN], "userName": uname()},
                          ctype=ct)
            assert_scim_ok(self, r, 201)

    def test_invalid_json_is_invalid_syntax(self):
        user, _ = self.create_user()
        for body in ('{"userName": ', "not json", '{"userName": "x",}', "[1, 2"):
            assert_scim_error(self, self.scim("POST", "/Users", body), 400, "invalidSyntax")
            assert_scim_error(self, self.scim("PUT", "/Users/" + user["id"], body), 400,
                              "invalidSyntax")
            assert_scim_error(self, self.scim("PATCH", "/Users/" + user["id"], body), 400,
                              "invalidSyntax")
            assert_scim_error(self, self.scim("POST", "/Groups", body), 400, "invalidSyntax")

    def test_missing_user_name_is_invalid_value(self):
        for body in ({"schemas": [SCIM_USER_URN]},
                     {"schemas": [SCIM_USER_URN], "displayName": "No Name"},
                     {"schemas": [SCIM_USER_URN], "userName": ""}):
            assert_scim_error(self, self.scim("POST", "/Users", body), 400, "invalidValue")
        user, _ = self.create_user()
        r = self.scim("PUT", "/Users/" + user["id"], {"schemas": [SCIM_USER_URN],
                                                       "displayName": "x"})
        assert_scim_error(self, r, 400, "invalidValue")

    def test_group_without_display_name_is_invalid_value(self):
        r = self.scim("POST", "/Groups", {"schemas": [SCIM_GROUP_URN], "members": []})
        assert_scim_error(self, r, 400, "invalidValue")

    def test_user_name_unique_case_insensitive_per_portfolio(self):
        name = uname("Unique")
        self.create_user(name)
        for other in (name, name.upper(), name.lower()):
            r = self.scim("POST", "/Users", {"schemas": [SCIM_USER_URN], "userName": other})
            assert_scim_error(self, r, 409, "uniqueness")
        # PUT renaming another user onto the taken name is a conflict too
        second, _ = self.create_user()
        r = self.scim("PUT", "/Users/" + second["id"],
                      {"schemas": [SCIM_USER_URN], "userName": name.swapcase()})
        assert_scim_error(self, r, 409, "uniqueness")
        # another portfolio may use the same userName
        self.create_user(name, token=self.tb)

    # create / read / update / delete ------------------------------------------------

    def test_create_returns_location_etag_and_meta(self):
        name = uname()
        user, r = self.create_user(name, displayName="Proto User",
                                   emails=[{"value": name, "type": "work", "primary": True}])
        self.assertTrue(user["id"].startswith("usr_"), user)
        self.assertEqual(user["userName"], name)
        self.assertIn(SCIM_USER_URN, user["schemas"])
        self.assertIs(user.get("active"), True, "active defaults to true: %r" % user)
        meta = user["meta"]
        self.assertEqual(meta["resourceType"], "User")
        self.assertRegex(meta["created"], harness.DATETIME_RE)
        self.assertRegex(meta["lastModified"], harness.DATETIME_RE)
        self.assertTrue(meta["location"].endswith("/scim/v2/Users/" + user["id"]), meta)
        self.assertEqual(r.headers.get("Location"), meta["location"], r)
        self.assertEqual(r.headers.get("ETag"), 'W/"1"', r)
        self.assertEqual(meta["version"], 'W/"1"')
        g = self.scim("GET", "/Users/" + user["id"])
        got = assert_scim_ok(self, g)
        self.assertEqual(g.headers.get("ETag"), 'W/"1"', g)
        self.assertEqual(got["id"], user["id"])
        self.assertEqual(got["emails"], [{"value": name, "type": "work", "primary": True}])

    def test_read_only_attributes_in_post_are_ignored(self):
        user, _ = self.create_user(id="usr_chosen_by_client", groups=[{"value": "grp_x"}],
                                   meta={"resourceType": "Group", "version": 'W/"99"'},
                                   password="Secret-123!")
        self.assertNotIn("password", user, "password is never returned")
        self.assertNotIn("Secret-123!", self.scim("GET", "/Users/" + user["id"]).raw.decode())
        self.assertNotEqual(user["id"], "usr_chosen_by_client")
        self.assertFalse(user.get("groups"), user)
        self.assertEqual(user["meta"]["resourceType"], "User")
        self.assertEqual(user["meta"]["version"], 'W/"1"')

    def test_put_replaces_and_returns_200(self):
        user, _ = self.create_user(displayName="Before")
        body = {"schemas": [SCIM_USER_URN], "id": "usr_ignored", "userName": user["userName"],
                "displayName": "After", "name": {"givenName": "Put", "familyName": "Test"}}
        r = self.scim("PUT", "/Users/" + user["id"], body)
        got = assert_scim_ok(self, r, 200)
        self.assertEqual(got["id"], user["id"])
        self.assertEqual(got["displayName"], "After")
        self.assertEqual(got["name"]["givenName"], "Put")
        self.assertEqual(r.headers.get("ETag"), got["meta"]["version"], r)
        self.assertEqual(got["meta"]["created"], user["meta"]["created"])

    def test_delete_then_404(self):
        user, _ = self.create_user()
        r = self.scim("DELETE", "/Users/" + user["id"])
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.raw, b"", r)
        assert_scim_error(self, self.scim("GET", "/Users/" + user["id"]), 404)
        assert_scim_error(self, self.scim("DELETE", "/Users/" + user["id"]), 404)
        res, _ = self.list_users(filter='userName eq "%s"' % user["userName"])
        self.assertEqual(res, [])
        # the name is free again
        self.create_user(user["userName"])

    def test_unknown_id_is_404(self):
        ghost_user = "usr_01JZZZZZZZZZZZZZZZZZZZZZZZ"
        ghost_group = "grp_01JZZZZZZZZZZZZZZZZZZZZZZZ"
        for kind, ghost, put in [("Users", ghost_user, {"schemas": [SCIM_USER_URN],
                                                          "userName": uname()}),
                                 ("Groups", ghost_group, {"schemas": [SCIM_GROUP_URN],
                                                           "displayName": "g"})]:
            for g in (ghost, "nonsense", "%2E%2E"):
                path = "/%s/%s" % (kind, g)
                assert_scim_error(self, self.scim("GET", path), 404)
                assert_scim_error(self, self.scim("PUT", path, put), 404)
                assert_scim_error(self, self.scim(
                    "PATCH", path, scim_patch_body({"op": "replace", "path": "displayName",
                                                    "value": "x"})), 404)
                assert_scim_error(self, self.scim("DELETE", path), 404)

    # ETags --------------------------------------------------------------------------

    def test_etag_changes_after_each_update(self):
        user, r = self.create_user()
        path = "/Users/" + user["id"]
        seen = [r.headers["ETag"]]
        r = self.scim("PUT", path, {"schemas": [SCIM_USER_URN], "userName": user["userName"],
                                    "displayName": "v2"})
        assert_scim_ok(self, r)
        self.assertRegex(r.headers.get("ETag", ""), ETAG_RE)
        self.assertNotIn(r.headers["ETag"], seen)
        seen.append(r.headers["ETag"])
        r = self.scim("PATCH", path, scim_patch_body(
            {"op": "replace", "path": "displayName", "value": "v3"}))
        self.assertEqual(r.status, 204, r)
        self.assertEqual(r.raw, b"")
        self.assertRegex(r.headers.get("ETag", ""), ETAG_RE)
        self.assertNotIn(r.headers["ETag"], seen)
        seen.append(r.headers["ETag"])
        g = self.scim("GET", path)
        got = assert_scim_ok(self, g)
        self.assertEqual(g.headers.get("ETag"), seen[-1])
        self.assertEqual(got["meta"]["version"], seen[-1])
        self.assertEqual(got["displayName"], "v3")
        # a read does not change the version
        self.assertEqual(self.scim("GET", path).headers.get("ETag"), seen[-1])

    def test_if_match(self):
        user, r = self.create_user()
        path = "/Users/" + user["id"]
        v1 = r.headers["ETag"]
        put = {"schemas": [SCIM_USER_URN], "userName": user["userName"], "displayName": "one"}
        r = self.scim("PUT", path, put, headers={"If-Match": v1})
        assert_scim_ok(self, r)
        v2 = r.headers["ETag"]
        self.assertNotEqual(v1, v2)
        # stale version: 412 on PUT, PATCH and DELETE, and nothing changes
        put["displayName"] = "stale"
        assert_scim_error(self, self.scim("PUT", path, put, headers={"If-Match": v1}), 412)
        assert_scim_error(self, self.scim("PATCH", path, scim_patch_body(
            {"op": "replace", "path": "displayName", "value": "stale"}),
            headers={"If-Match": v1}), 412)
        assert_scim_error(self, self.scim("DELETE", path, headers={"If-Match": v1}), 412)
        g = self.scim("GET", path)
        self.assertEqual(assert_scim_ok(self, g)["displayName"], "one")
        self.assertEqual(g.headers.get("ETag"), v2)
        # current version: accepted
        put["displayName"] = "two"
        r = self.scim("PUT", path, put, headers={"If-Match": v2})
        self.assertEqual(assert_scim_ok(self, r)["displayName"], "two")
        v3 = r.headers["ETag"]
        r = self.scim("PATCH", path, scim_patch_body(
            {"op": "replace", "path": "displayName", "value": "three"}),
            headers={"If-Match": v3})
        self.assertEqual(r.status, 204, r)
        r = self.scim("DELETE", path, headers={"If-Match": r.headers["ETag"]})
        self.assertEqual(r.status, 204, r)

    # PATCH basics ---------------------------------------------------------------------

    def test_patch_with_attributes_returns_200_and_resource(self):
        name = uname()
        user, _ = self.create_user(name, emails=[{"value": name, "type": "work"}])
        path = "/Users/" + user["id"]
        op = scim_patch_body({"op": "replace", "path": "displayName", "value": "Shown"})
        r = self.scim("PATCH", path + "?attributes=displayName", op)
        got = assert_scim_ok(self, r, 200)
        self.assertEqual(got["id"], user["id"])
        self.assertEqual(got["displayName"], "Shown")
        self.assertNotIn("emails", got)
        self.assertRegex(r.headers.get("ETag", ""), ETAG_RE)
        op = scim_patch_body({"op": "replace", "path": "displayName", "value": "Again"})
        r = self.scim("PATCH", path + "?excludedAttributes=emails", op)
        got = assert_scim_ok(self, r, 200)
        self.assertEqual(got["displayName"], "Again")
        self.assertEqual(got["userName"], name)
        self.assertNotIn("emails", got)

    def test_patch_remove_without_path_is_no_target(self):
        user, _ = self.create_user()
        r = self.scim("PATCH", "/Users/" + user["id"], scim_patch_body({"op": "remove"}))
        assert_scim_error(self, r, 400, "noTarget")

    def test_patch_bad_operation_is_400(self):
        user, _ = self.create_user(displayName="Unchanged")
        path = "/Users/" + user["id"]
        for op in ({"op": "frobnicate", "path": "displayName", "value": "x"},
                   {"path": "displayName", "value": "x"}):
            assert_scim_error(self, self.scim("PATCH", path, scim_patch_body(op)), 400)
        # a PatchOp without Operations, or without the PatchOp schema
        assert_scim_error(self, self.scim("PATCH", path, {"schemas": [
            "urn:ietf:params:scim:api:messages:2.0:PatchOp"]}), 400)
        self.assertEqual(assert_scim_ok(self, self.scim("GET", path))["displayName"],
                         "Unchanged")

    def test_patch_id_is_not_changed(self):
        user, _ = self.create_user()
        path = "/Users/" + user["id"]
        r = self.scim("PATCH", path, scim_patch_body(
            {"op": "replace", "value": {"id": "usr_other", "displayName": "Kept Id"}}))
        self.assertEqual(r.status, 204, r)
        got = assert_scim_ok(self, self.scim("GET", path))
        self.assertEqual(got["id"], user["id"])
        self.assertEqual(got["displayName"], "Kept Id")

    # filters ---------------------------------------------------------------------------

    def test_invalid_filter_is_400_invalid_filter(self):
        for f in ('(userName eq "a"', 'userName eq "a")', 'userName zz "a"',
                  'userName eq', 'userName eq "unterminated', 'and userName eq "a"',
                  'userName eq "a" and'):
            r = self.scim("GET", "/Users", query={"filter": f})
            assert_scim_error(self, r, 400, "invalidFilter")
            r = self.scim("GET", "/Groups", query={"filter": f.replace("userName",
                                                                         "displayName")})
            assert_scim_error(self, r, 400, "invalidFilter")

    def test_filter_operators(self):
        pid, tok = self.fresh_portfolio()
        tag = uuid.uuid4().hex[:6]
        names = ["alpha-%s@one.example" % tag, "beta-%s@two.example" % tag,
                 "gamma-%s@one.example" % tag]
        ids = {}
        for i, n in enumerate(names):
            attrs = {"emails": [{"value": n, "type": "work"}]}
            if i == 1:
                attrs["title"] = "Revenue Manager"
            u, _ = self.create_user(n, token=tok, **attrs)
            ids[n] = u["id"]

        def ids_for(f):
            res, _ = self.list_users(token=tok, filter=f)
            return {u["id"] for u in res}

        a, b, c = (ids[n] for n in names)
        self.assertEqual(ids_for('userName eq "%s"' % names[0]), {a})
        self.assertEqual(ids_for('userName eq "%s"' % names[0].upper()), {a},
                         "userName is caseExact false")
        self.assertEqual(ids_for('USERNAME EQ "%s"' % names[0]), {a},
                         "attribute names and operators are case-insensitive")
        self.assertEqual(ids_for('userName co "@one.example"'), {a, c})
        self.assertEqual(ids_for('userName sw "beta-"'), {b})
        self.assertEqual(ids_for('userName ew "two.example"'), {b})
        self.assertEqual(ids_for('title pr'), {b})
        self.assertEqual(ids_for('userName ne "%s"' % names[0]), {b, c})
        self.assertEqual(ids_for('userName sw "alpha-" or userName sw "gamma-"'), {a, c})
        self.assertEqual(ids_for('userName co "@one.example" and userName sw "gamma"'), {c})
        self.assertEqual(ids_for('not (userName co "@one.example")'), {b})
        self.assertEqual(ids_for('(userName sw "alpha" or userName sw "beta") and '
                                 'userName co "two"'), {b})
        self.assertEqual(ids_for('emails.value eq "%s"' % names[2]), {c})
        self.assertEqual(ids_for('emails[type eq "work" and value co "two.example"]'), {b})
        self.assertEqual(ids_for('id eq "%s"' % b), {b})
        self.assertEqual(ids_for('userName gt "c"'), {c})
        self.assertEqual(ids_for('userName lt "b"'), {a})
        self.assertEqual(ids_for('userName ge "beta" and userName le "c"'), {b})
        self.assertEqual(ids_for('userName eq "nobody@nowhere.example"'), set())
        self.assertEqual(ids_for('active eq true'), {a, b, c})
        self.assertEqual(ids_for('active eq false'), set())

    def test_filter_with_plus_for_spaces_and_escaped_plus(self):
        name = "plus+%s@example.com" % uuid.uuid4().hex[:8]
        user, _ = self.create_user(name)
        # '+' for spaces, a literal '+' in the value sent as %2B
        q = "filter=userName+eq+%%22%s%%22" % name.replace("+", "%2B").replace("@", "%40")
        res = assert_scim_list(self, self.scim("GET", "/Users?" + q))
        self.assertEqual([u["id"] for u in res], [user["id"]])
        q = "filter=userName%%20eq%%20%%22%s%%22" % name.replace("+", "%2B")
        res = assert_scim_list(self, self.scim("GET", "/Users?" + q))
        self.assertEqual([u["id"] for u in res], [user["id"]])

    def test_group_filter_and_list(self):
        dn = "team-" + uuid.uuid4().hex[:8]
        r = self.scim("POST", "/Groups", {"schemas": [SCIM_GROUP_URN], "displayName": dn})
        g = assert_scim_ok(self, r, 201)
        self.assertTrue(g["id"].startswith("grp_"), g)
        self.assertEqual(r.headers.get("ETag"), 'W/"1"', r)
        self.assertTrue(r.headers.get("Location", "").endswith("/scim/v2/Groups/" + g["id"]))
        self.assertEqual(g["meta"]["resourceType"], "Group")
        res = assert_scim_list(self, self.scim("GET", "/Groups", query={
            "filter": 'displayName eq "%s"' % dn}))
        self.assertEqual([x["id"] for x in res], [g["id"]])
        res = assert_scim_list(self, self.scim("GET", "/Groups", query={
            "filter": 'displayName eq "%s"' % dn, "excludedAttributes": "members"}))
        self.assertEqual(len(res), 1)
        self.assertNotIn("members", res[0])
        self.assertEqual(res[0]["displayName"], dn)

    # paging, projection, sorting --------------------------------------------------------

    def test_paging_edges(self):
        pid, tok = self.fresh_portfolio()
        ids = [self.create_user(token=tok)[0]["id"] for _ in range(3)]
        res, body = self.list_users(token=tok, startIndex=1)
        self.assertEqual(body["totalResults"], 3)
        self.assertEqual(body["startIndex"], 1)
        self.assertEqual(sorted(u["id"] for u in res), sorted(ids))
        order = [u["id"] for u in res]
        for bad in (0, -5):
            r2, b2 = self.list_users(token=tok, startIndex=bad)
            self.assertEqual(b2["startIndex"], 1, "startIndex %d is treated as 1" % bad)
            self.assertEqual([u["id"] for u in r2], order)
        r2, b2 = self.list_users(token=tok, startIndex=2, count=1)
        self.assertEqual((b2["totalResults"], b2["startIndex"], b2["itemsPerPage"]), (3, 2, 1))
        self.assertEqual([u["id"] for u in r2], order[1:2])
        for c in (0, -1):
            r2, b2 = self.list_users(token=tok, count=c)
            self.assertEqual(b2["totalResults"], 3, "count=%d" % c)
            self.assertEqual(r2, [], "count=%d returns no resources" % c)
            self.assertEqual(b2["itemsPerPage"], 0)
        r2, b2 = self.list_users(token=tok, startIndex=10)
        self.assertEqual((b2["totalResults"], r2), (3, []))
        r2, b2 = self.list_users(token=tok, filter='userName sw "nobody"')
        self.assertEqual((b2["totalResults"], r2), (0, []))

    def test_non_integer_paging_parameter_is_400(self):
        for q in ({"startIndex": "one"}, {"count": "many"}, {"count": "1.5"}):
            assert_scim_error(self, self.scim("GET", "/Users", query=q), 400)

    def test_count_default_100_and_max_200(self):
        pid, tok = self.fresh_portfolio()
        with self.srv.client() as c:
            for i in range(201):
                r = c.request("POST", "/scim/v2/Users", headers={
                    "Authorization": "Bearer " + tok, "Content-Type": SCIM_CT},
                    body={"schemas": [SCIM_USER_URN], "userName": "bulk-%03d@example.com" % i})
                self.assertEqual(r.status, 201, r)
        res, body = self.list_users(token=tok)
        self.assertEqual((body["totalResults"], len(res)), (201, 100), "default count is 100")
        res, body = self.list_users(token=tok, count=1000)
        self.assertEqual(body["totalResults"], 201)
        self.assertEqual(len(res), 200, "count above 200 is clamped to 200")
        res2, body2 = self.list_users(token=tok, count=1000, startIndex=201)
        self.assertEqual(len(res2), 1)
        self.assertEqual(len({u["id"] for u in res} | {u["id"] for u in res2}), 201)

    def test_attributes_projection(self):
        name = uname()
        user, _ = self.create_user(name, displayName="Projected",
                                   emails=[{"value": name, "type": "work"}],
                                   name={"givenName": "Pro", "familyName": "Jected"})
        res, _ = self.list_users(filter='userName eq "%s"' % name, attributes="userName")
        self.assertEqual(len(res), 1)
        self.assertEqual(set(res[0]), {"id", "userName", "schemas"}, res[0])
        self.assertEqual(res[0]["id"], user["id"])
        self.assertEqual(res[0]["userName"], name)
        res, _ = self.list_users(filter='userName eq "%s"' % name,
                                 attributes="userName,displayName")
        self.assertEqual(set(res[0]), {"id", "userName", "displayName", "schemas"}, res[0])
        res, _ = self.list_users(filter='userName eq "%s"' % name, excludedAttributes="emails")
        self.assertNotIn("emails", res[0])
        self.assertEqual(res[0]["displayName"], "Projected")
        self.assertEqual(res[0]["name"]["givenName"], "Pro")
        self.assertIn("id", res[0])
        # excluding id or schemas is not possible
        res, _ = self.list_users(filter='userName eq "%s"' % name,
                                 excludedAttributes="id,schemas,emails")
        self.assertEqual(res[0]["id"], user["id"])
        self.assertIn(SCIM_USER_URN, res[0]["schemas"])
        # on a single resource too
        got = assert_scim_ok(self, self.scim("GET", "/Users/%s?attributes=userName" % user["id"]))
        self.assertEqual(set(got), {"id", "userName", "schemas"}, got)
        got = assert_scim_ok(self, self.scim("GET", "/Users/%s?excludedAttributes=emails"
                                             % user["id"]))
        self.assertNotIn("emails", got)
        self.assertEqual(got["displayName"], "Projected")

    def test_sort_by_user_name(self):
        pid, tok = self.fresh_portfolio()
        names = ["mike@example.com", "alice@example.com", "zoe@example.com", "bob@example.com"]
        for n in names:
            self.create_user(n, token=tok)
        res, _ = self.list_users(token=tok, sortBy="userName")
        self.assertEqual([u["userName"] for u in res], sorted(names), "default is ascending")
        res, _ = self.list_users(token=tok, sortBy="userName", sortOrder="ascending")
        self.assertEqual([u["userName"] for u in res], sorted(names))
        res, _ = self.list_users(token=tok, sortBy="userName", sortOrder="descending")
        self.assertEqual([u["userName"] for u in res], sorted(names, reverse=True))
        res, body = self.list_users(token=tok, sortBy="userName", sortOrder="descending",
                                    startIndex=2, count=2)
        self.assertEqual([u["userName"] for u in res], sorted(names, reverse=True)[1:3])
        self.assertEqual(body["totalResults"], 4)

    # isolation --------------------------------------------------------------------------

    def test_other_portfolio_cannot_see_or_touch_users(self):
        name = uname("iso")
        user, _ = self.create_user(name)
        path = "/Users/" + user["id"]
        assert_scim_error(self, self.scim("GET", path, token=self.tb), 404)
        assert_scim_error(self, self.scim("PUT", path, {"schemas": [SCIM_USER_URN],
                                                        "userName": name}, token=self.tb), 404)
        assert_scim_error(self, self.scim("PATCH", path, scim_patch_body(
            {"op": "replace", "path": "active", "value": False}), token=self.tb), 404)
        assert_scim_error(self, self.scim("DELETE", path, token=self.tb), 404)
        res, body = self.list_users(token=self.tb, filter='userName eq "%s"' % name)
        self.assertEqual((res, body["totalResults"]), ([], 0))
        res, _ = self.list_users(token=self.tb, count=200)
        self.assertNotIn(user["id"], [u["id"] for u in res])
        got = assert_scim_ok(self, self.scim("GET", path))
        self.assertIs(got["active"], True)

    def test_other_portfolio_cannot_see_groups_or_add_foreign_members(self):
        r = self.scim("POST", "/Groups", {"schemas": [SCIM_GROUP_URN], "displayName": "iso-g"})
        g = assert_scim_ok(self, r, 201)
        assert_scim_error(self, self.scim("GET", "/Groups/" + g["id"], token=self.tb), 404)
        assert_scim_error(self, self.scim("DELETE", "/Groups/" + g["id"], token=self.tb), 404)
        res = assert_scim_list(self, self.scim("GET", "/Groups", token=self.tb, query={
            "filter": 'displayName eq "iso-g"'}))
        self.assertEqual(res, [])
        # a B group cannot hold an A user: refused (400) or the member dropped
        user, _ = self.create_user()
        r = self.scim("POST", "/Groups", {"schemas": [SCIM_GROUP_URN], "displayName": "b-g",
                                          "members": [{"value": user["id"]}]}, token=self.tb)
        if r.status == 400:
            assert_scim_error(self, r, 400)
        else:
            g2 = assert_scim_ok(self, r, 201)
            self.assertNotIn(user["id"], [m.get("value") for m in g2.get("members", [])], r)
        got = assert_scim_ok(self, self.scim("GET", "/Users/" + user["id"]))
        self.assertFalse(got.get("groups"), got)

    # groups and the computed groups attribute -------------------------------------------

    def test_deleting_a_user_removes_it_from_groups(self):
        u1, _ = self.create_user()
        u2, _ = self.create_user()
        r = self.scim("POST", "/Groups", {"schemas": [SCIM_GROUP_URN], "displayName": "cleanup",
                                          "members": [{"value": u1["id"]}, {"value": u2["id"]}]})
        g = assert_scim_ok(self, r, 201)
        self.assertEqual(sorted(m["value"] for m in g["members"]), sorted([u1["id"], u2["id"]]))
        got = assert_scim_ok(self, self.scim("GET", "/Users/" + u1["id"]))
        self.assertEqual([x["value"] for x in got.get("groups", [])], [g["id"]])
        self.assertEqual(self.scim("DELETE", "/Users/" + u1["id"]).status, 204)
        got = assert_scim_ok(self, self.scim("GET", "/Groups/" + g["id"]))
        self.assertEqual([m["value"] for m in got["members"]], [u2["id"]])
        # deleting the group empties the user's groups
        self.assertEqual(self.scim("DELETE", "/Groups/" + g["id"]).status, 204)
        assert_scim_error(self, self.scim("GET", "/Groups/" + g["id"]), 404)
        got = assert_scim_ok(self, self.scim("GET", "/Users/" + u2["id"]))
        self.assertFalse(got.get("groups"), got)

    def test_remove_members_without_value_empties_the_group(self):
        u1, _ = self.create_user()
        u2, _ = self.create_user()
        r = self.scim("POST", "/Groups", {"schemas": [SCIM_GROUP_URN], "displayName": "empty-me",
                                          "members": [{"value": u1["id"]}, {"value": u2["id"]}]})
        g = assert_scim_ok(self, r, 201)
        r = self.scim("PATCH", "/Groups/" + g["id"], scim_patch_body(
            {"op": "remove", "path": "members"}))
        self.assertEqual(r.status, 204, r)
        self.assertFalse(assert_scim_ok(self, self.scim("GET", "/Groups/" + g["id"])).get(
            "members"))
        for u in (u1, u2):
            self.assertFalse(assert_scim_ok(self, self.scim("GET", "/Users/" + u["id"])).get(
                "groups"))

    # discovery --------------------------------------------------------------------------

    def test_service_provider_config(self):
        body = assert_scim_ok(self, self.scim("GET", "/ServiceProviderConfig"))
        self.assertIn("urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig",
                      body["schemas"])
        self.assertIs(body["patch"]["supported"], True)
        self.assertIs(body["filter"]["supported"], True)
        self.assertEqual(body["filter"]["maxResults"], 200)
        self.assertIs(body["etag"]["supported"], True)
        self.assertIs(body["sort"]["supported"], True)
        self.assertIs(body["bulk"]["supported"], False)
        self.assertIsInstance(body["changePassword"]["supported"], bool)
        self.assertIsInstance(body["authenticationSchemes"], list)
        self.assertTrue(body["authenticationSchemes"])
        alias = assert_scim_ok(self, self.scim("GET", "/serviceConfiguration"))
        self.assertEqual(alias, body)

    def test_resource_types(self):
        res = assert_scim_list(self, self.scim("GET", "/ResourceTypes"))
        by_id = {r["id"]: r for r in res}
        self.assertEqual(set(by_id), {"User", "Group"})
        self.assertEqual(by_id["User"]["endpoint"], "/Users")
        self.assertEqual(by_id["User"]["schema"], SCIM_USER_URN)
        self.assertIn(SCIM_ENTERPRISE_URN, [e["schema"] for e in
                                            by_id["User"].get("schemaExtensions", [])])
        self.assertEqual(by_id["Group"]["endpoint"], "/Groups")
        self.assertEqual(by_id["Group"]["schema"], SCIM_GROUP_URN)
        one = assert_scim_ok(self, self.scim("GET", "/ResourceTypes/User"))
        self.assertEqual(one["endpoint"], "/Users")
        self.assertEqual(one["name"], "User")
        assert_scim_error(self, self.scim("GET", "/ResourceTypes/Nope"), 404)

    def test_schemas(self):
        res = assert_scim_list(self, self.scim("GET", "/Schemas"))
        by_id = {s["id"]: s for s in res}
        self.assertTrue({SCIM_USER_URN, SCIM_GROUP_URN, SCIM_ENTERPRISE_URN} <= set(by_id),
                        set(by_id))
        self.assertEqual(by_id[SCIM_USER_URN]["name"], "User")
        self.assertEqual(by_id[SCIM_USER_URN]["description"], "User Account")
        user_attrs = {a["name"] for a in by_id[SCIM_USER_URN]["attributes"]}
        self.assertTrue({"userName", "name", "emails", "active", "groups", "roles"} <= user_attrs,
                        user_attrs)
        groups_attr = [a for a in by_id[SCIM_USER_URN]["attributes"] if a["name"] == "groups"]
        self.assertEqual(groups_attr[0]["mutability"], "readOnly")
        one = assert_scim_ok(self, self.scim("GET", "/Schemas/" + SCIM_USER_URN))
        self.assertEqual(one["id"], SCIM_USER_URN)
        one = assert_scim_ok(self, self.scim("GET", "/Schemas/" + SCIM_GROUP_URN))
        self.assertEqual(one["id"], SCIM_GROUP_URN)
        assert_scim_error(self, self.scim("GET", "/Schemas/urn:nope"), 404)


if __name__ == "__main__":
    harness.run_main()
