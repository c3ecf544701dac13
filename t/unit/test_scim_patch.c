/* Unit tests for scim_patch: the operation sequences Okta and Entra ID
 * send, path-less values with dotted and URN keys, value paths that create
 * their target, member removal in both styles, normalisation of booleans
 * and manager, error codes, and all-or-nothing application. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "scim_filter.h"
#include "scim_patch.h"

#define ENT SCIM_URN_ENTERPRISE

static char err[512];

static json_t *load(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (!j)
		fail_msg("bad JSON in test: %s: %s", e.text, text);
	return j;
}

/* Applies the operations (a JSON array text) to res; returns the code. */
static int patch(json_t *res, const char *ops)
{
	char *body_text;
	json_t *body;
	int rc;

	assert_true(asprintf(&body_text, "{\"schemas\": [\"%s\"], \"Operations\": %s}",
			     SCIM_PATCH_URN, ops) > 0);
	body = load(body_text);
	free(body_text);
	err[0] = '\0';
	rc = scim_patch_apply(res, body, err, sizeof err);
	json_decref(body);
	if (rc)
		assert_true(err[0] != '\0');
	return rc;
}

/* Asserts that res equals the JSON text want. */
static void expect(const json_t *res, const char *want)
{
	json_t *w = load(want);
	char *got;

	if (!json_equal(res, w)) {
		got = json_dumps(res, JSON_SORT_KEYS);
		fail_msg("got %s\nwant %s", got, want);
	}
	json_decref(w);
}

/* Expects ops to fail with code (and a message containing want) and to
 * leave res exactly as it was. */
static void refuse(json_t *res, const char *ops, int code, const char *want)
{
	json_t *before = json_deep_copy(res);

	assert_int_equal(patch(res, ops), code);
	if (!strstr(err, want))
		fail_msg("ops %s: message \"%s\" lacks \"%s\"", ops, err, want);
	assert_true(json_equal(res, before));
	json_decref(before);
}

static json_t *user(void)
{
	return load("{\"schemas\": [\"" SCIM_URN_USER "\"], \"id\": \"u-1\","
		    " \"userName\": \"bob@example.com\", \"active\": true,"
		    " \"name\": {\"givenName\": \"Robert\", \"familyName\": \"Smith\"},"
		    " \"meta\": {\"resourceType\": \"User\", \"created\": \"2020-01-01T00:00:00Z\"}}");
}

static json_t *group(void)
{
	return load("{\"schemas\": [\"" SCIM_URN_GROUP "\"], \"id\": \"g-1\", \"displayName\": \"Ops\","
		    " \"members\": [{\"value\": \"u1\", \"display\": \"One\"}, {\"value\": \"u2\"},"
		    "  {\"value\": \"u4\"}]}");
}

static void test_okta_deactivate(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"value\": {\"active\": false}}]"), 0);
	assert_true(json_is_false(json_object_get(u, "active")));
	/* Okta repeats the id in the value: ignored, as is meta and schemas */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"value\": {\"id\": \"other\","
				  " \"meta\": {\"x\": 1}, \"schemas\": [], \"active\": true,"
				  " \"userName\": \"new@example.com\"}}]"),
			 0);
	assert_string_equal(json_string_value(json_object_get(u, "id")), "u-1");
	assert_true(json_is_true(json_object_get(u, "active")));
	assert_string_equal(json_string_value(json_object_get(u, "userName")), "new@example.com");
	assert_null(json_object_get(json_object_get(u, "meta"), "x"));
	assert_int_equal(json_array_size(json_object_get(u, "schemas")), 1);
	json_decref(u);
}

static void test_entra_active_string(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"False\"}]"), 0);
	assert_true(json_is_false(json_object_get(u, "active")));
	assert_int_equal(patch(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"True\"}]"), 0);
	assert_true(json_is_true(json_object_get(u, "active")));
	assert_int_equal(patch(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"false\"}]"), 0);
	assert_true(json_is_false(json_object_get(u, "active")));
	refuse(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"maybe\"}]",
	       SCIM_PATCH_INVALID_VALUE, "\"active\" must be a boolean");
	refuse(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": 1}]",
	       SCIM_PATCH_INVALID_VALUE, "\"active\" must be a boolean");
	json_decref(u);
}

static void test_entra_add_email_creates(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"Add\", \"path\": \"emails[type eq \\\"work\\\"].value\","
				  " \"value\": \"x@y\"}]"),
			 0);
	expect(json_object_get(u, "emails"), "[{\"type\": \"work\", \"value\": \"x@y\"}]");
	/* the second time it matches and changes in place */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"emails[type eq \\\"work\\\"].value\","
				  " \"value\": \"z@y\"}]"),
			 0);
	expect(json_object_get(u, "emails"), "[{\"type\": \"work\", \"value\": \"z@y\"}]");
	/* another type is appended, with primary from the filter as a boolean */
	assert_int_equal(patch(u, "[{\"op\": \"Replace\","
				  " \"path\": \"emails[type eq \\\"home\\\" and primary eq false].value\","
				  " \"value\": \"h@y\"}]"),
			 0);
	expect(json_object_get(u, "emails"),
	       "[{\"type\": \"work\", \"value\": \"z@y\"},"
	       " {\"type\": \"home\", \"primary\": false, \"value\": \"h@y\"}]");
	/* Entra's phone and address variants */
	assert_int_equal(patch(u, "[{\"op\": \"Add\", \"path\": \"phoneNumbers[type eq \\\"mobile\\\"].value\","
				  " \"value\": \"+1 555\"},"
				  " {\"op\": \"Add\", \"path\": \"addresses[type eq \\\"work\\\"].locality\","
				  " \"value\": \"Paris\"},"
				  " {\"op\": \"Add\", \"path\": \"addresses[type eq \\\"work\\\"].country\","
				  " \"value\": \"FR\"}]"),
			 0);
	expect(json_object_get(u, "phoneNumbers"), "[{\"type\": \"mobile\", \"value\": \"+1 555\"}]");
	expect(json_object_get(u, "addresses"),
	       "[{\"type\": \"work\", \"locality\": \"Paris\", \"country\": \"FR\"}]");
	json_decref(u);
}

static void test_value_path_elements(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"emails\", \"value\": ["
				  " {\"type\": \"work\", \"value\": \"w@x\", \"primary\": \"True\"},"
				  " {\"type\": \"home\", \"value\": \"h@x\"}]}]"),
			 0);
	/* replace of a whole element keeps the filter's eq fields */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"emails[type eq \\\"work\\\"]\","
				  " \"value\": {\"value\": \"new@x\"}}]"),
			 0);
	expect(json_object_get(u, "emails"),
	       "[{\"type\": \"work\", \"value\": \"new@x\"}, {\"type\": \"home\", \"value\": \"h@x\"}]");
	/* add merges into the matching element */
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"emails[type eq \\\"work\\\"]\","
				  " \"value\": {\"display\": \"W\", \"primary\": \"true\"}}]"),
			 0);
	expect(json_object_get(u, "emails"),
	       "[{\"type\": \"work\", \"value\": \"new@x\", \"display\": \"W\", \"primary\": true},"
	       " {\"type\": \"home\", \"value\": \"h@x\"}]");
	/* remove a sub-attribute of matching elements, then an element */
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"emails[type eq \\\"work\\\"].display\"},"
				  " {\"op\": \"remove\", \"path\": \"emails[type eq \\\"home\\\"]\"}]"),
			 0);
	expect(json_object_get(u, "emails"),
	       "[{\"type\": \"work\", \"value\": \"new@x\", \"primary\": true}]");
	/* no match on remove is fine */
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"emails[type eq \\\"other\\\"]\"}]"), 0);
	/* a filter that does not describe an element cannot create one */
	refuse(u, "[{\"op\": \"replace\", \"path\": \"emails[value co \\\"zzz\\\"].type\", \"value\": \"w\"}]",
	       SCIM_PATCH_NO_TARGET, "does not describe one");
	refuse(u, "[{\"op\": \"replace\", \"path\": \"emails[type eq \\\"work\\\"]\", \"value\": \"x\"}]",
	       SCIM_PATCH_INVALID_VALUE, "must be an object");
	refuse(u, "[{\"op\": \"replace\", \"path\": \"userName[type eq \\\"work\\\"]\", \"value\": {}}]",
	       SCIM_PATCH_INVALID_PATH, "not one");
	/* removing the last element drops the attribute */
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"emails[value ew \\\"@X\\\"]\"}]"), 0);
	assert_null(json_object_get(u, "emails"));
	json_decref(u);
}

static void test_entra_name(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"Replace\", \"path\": \"name.givenName\", \"value\": \"Bob\"}]"), 0);
	expect(json_object_get(u, "name"), "{\"givenName\": \"Bob\", \"familyName\": \"Smith\"}");
	/* replace of a complex attribute keeps the sub-attributes not given */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"name\","
				  " \"value\": {\"familyName\": \"Jones\", \"formatted\": \"Bob Jones\"}}]"),
			 0);
	expect(json_object_get(u, "name"),
	       "{\"givenName\": \"Bob\", \"familyName\": \"Jones\", \"formatted\": \"Bob Jones\"}");
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"name.formatted\"}]"), 0);
	expect(json_object_get(u, "name"), "{\"givenName\": \"Bob\", \"familyName\": \"Jones\"}");
	json_object_del(u, "name");
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"NAME.GIVENNAME\", \"value\": \"Al\"}]"), 0);
	expect(json_object_get(u, "name"), "{\"givenName\": \"Al\"}");
	refuse(u, "[{\"op\": \"add\", \"path\": \"userName.x\", \"value\": \"y\"}]",
	       SCIM_PATCH_INVALID_PATH, "not a complex attribute");
	json_decref(u);
}

static void test_members(void **state)
{
	json_t *g = group();

	(void)state;
	/* Entra: remove with a value array */
	assert_int_equal(patch(g, "[{\"op\": \"Remove\", \"path\": \"members\","
				  " \"value\": [{\"value\": \"u1\"}]}]"),
			 0);
	expect(json_object_get(g, "members"), "[{\"value\": \"u2\"}, {\"value\": \"u4\"}]");
	/* Okta: remove with a value filter */
	assert_int_equal(patch(g, "[{\"op\": \"Remove\", \"path\": \"members[value eq \\\"u2\\\"]\"}]"), 0);
	expect(json_object_get(g, "members"), "[{\"value\": \"u4\"}]");
	/* add skips duplicates, also within one value */
	assert_int_equal(patch(g, "[{\"op\": \"add\", \"path\": \"members\","
				  " \"value\": [{\"value\": \"u3\"}, {\"value\": \"u3\"}, {\"value\": \"u4\"}]},"
				  " {\"op\": \"add\", \"path\": \"members\", \"value\": [{\"value\": \"u3\"}]}]"),
			 0);
	expect(json_object_get(g, "members"), "[{\"value\": \"u4\"}, {\"value\": \"u3\"}]");
	/* a display given later merges into the existing member */
	assert_int_equal(patch(g, "[{\"op\": \"add\", \"path\": \"members\","
				  " \"value\": [{\"value\": \"u3\", \"display\": \"Three\"}]}]"),
			 0);
	expect(json_object_get(g, "members"),
	       "[{\"value\": \"u4\"}, {\"value\": \"u3\", \"display\": \"Three\"}]");
	/* removing what is not there changes nothing */
	assert_int_equal(patch(g, "[{\"op\": \"remove\", \"path\": \"members[value eq \\\"nope\\\"]\"},"
				  " {\"op\": \"remove\", \"path\": \"members\", \"value\": [{\"value\": \"nope\"}]}]"),
			 0);
	assert_int_equal(json_array_size(json_object_get(g, "members")), 2);
	/* a single object value is one member; bare ids name members too */
	assert_int_equal(patch(g, "[{\"op\": \"add\", \"path\": \"members\", \"value\": {\"value\": \"u5\"}},"
				  " {\"op\": \"remove\", \"path\": \"members\", \"value\": [\"u4\"]}]"),
			 0);
	expect(json_object_get(g, "members"),
	       "[{\"value\": \"u3\", \"display\": \"Three\"}, {\"value\": \"u5\"}]");
	/* replace sets the whole array */
	assert_int_equal(patch(g, "[{\"op\": \"replace\", \"path\": \"members\", \"value\": [{\"value\": \"u9\"}]}]"), 0);
	expect(json_object_get(g, "members"), "[{\"value\": \"u9\"}]");
	/* removing every member, or the attribute, unassigns it */
	assert_int_equal(patch(g, "[{\"op\": \"remove\", \"path\": \"members\", \"value\": [{\"value\": \"u9\"}]}]"), 0);
	assert_null(json_object_get(g, "members"));
	assert_int_equal(patch(g, "[{\"op\": \"add\", \"path\": \"members\", \"value\": [{\"value\": \"u1\"}]},"
				  " {\"op\": \"remove\", \"path\": \"members\"}]"),
			 0);
	assert_null(json_object_get(g, "members"));
	/* Okta's group rename carries the id */
	assert_int_equal(patch(g, "[{\"op\": \"replace\", \"value\": {\"id\": \"g-1\", \"displayName\": \"New\"}}]"), 0);
	expect(g, "{\"schemas\": [\"" SCIM_URN_GROUP "\"], \"id\": \"g-1\", \"displayName\": \"New\"}");
	json_decref(g);
}

static void test_nopath_keys(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"Add\", \"value\": {"
				  " \"name.givenName\": \"Ann\","
				  " \"" ENT ":employeeNumber\": \"123\","
				  " \"" ENT ":manager\": \"m9\","
				  " \"displayname\": \"Ann S\","
				  " \"" SCIM_URN_USER ":title\": \"CEO\","
				  " \"emails[type eq \\\"work\\\"].value\": \"a@x\"}}]"),
			 0);
	expect(u, "{\"schemas\": [\"" SCIM_URN_USER "\", \"" ENT "\"], \"id\": \"u-1\","
		  " \"userName\": \"bob@example.com\", \"active\": true,"
		  " \"name\": {\"givenName\": \"Ann\", \"familyName\": \"Smith\"},"
		  " \"meta\": {\"resourceType\": \"User\", \"created\": \"2020-01-01T00:00:00Z\"},"
		  " \"" ENT "\": {\"employeeNumber\": \"123\", \"manager\": {\"value\": \"m9\"}},"
		  " \"displayName\": \"Ann S\", \"title\": \"CEO\","
		  " \"emails\": [{\"type\": \"work\", \"value\": \"a@x\"}]}");
	/* the URN itself with an object merges into the extension */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"value\": {\"" ENT "\":"
				  " {\"department\": \"Ops\", \"manager\": {\"value\": \"m2\"}}}}]"),
			 0);
	expect(json_object_get(u, ENT),
	       "{\"employeeNumber\": \"123\", \"department\": \"Ops\", \"manager\": {\"value\": \"m2\"}}");
	/* URN:attr with an object value is an attribute, whatever its case */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"value\": {\"" ENT ":Manager\":"
				  " {\"value\": \"m3\"}}}]"),
			 0);
	expect(json_object_get(u, ENT),
	       "{\"employeeNumber\": \"123\", \"department\": \"Ops\", \"manager\": {\"value\": \"m3\"}}");
	/* nested objects merge; a null removes */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"value\": {\"name\": {\"familyName\": \"S\","
				  " \"givenName\": null}, \"title\": null}}]"),
			 0);
	expect(json_object_get(u, "name"), "{\"familyName\": \"S\"}");
	assert_null(json_object_get(u, "title"));
	/* the core URN with an object is the top level, read-only keys skipped */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"value\": {\"" SCIM_URN_USER "\":"
				  " {\"userName\": \"c@x\", \"id\": \"zzz\"}, \"" SCIM_URN_USER ":id\": \"q\"}}]"),
			 0);
	assert_string_equal(json_string_value(json_object_get(u, "userName")), "c@x");
	assert_string_equal(json_string_value(json_object_get(u, "id")), "u-1");
	refuse(u, "[{\"op\": \"add\", \"value\": \"x\"}]", SCIM_PATCH_INVALID_VALUE, "must be an object");
	refuse(u, "[{\"op\": \"add\", \"value\": {\"name..x\": 1}}]", SCIM_PATCH_INVALID_PATH,
	       "invalid attribute \"name..x\"");
	refuse(u, "[{\"op\": \"add\", \"value\": {\"title\": \"ok\", \"bad key\": 1}}]",
	       SCIM_PATCH_INVALID_PATH, "invalid attribute \"bad key\"");
	json_decref(u);
}

static void test_names(void **state)
{
	json_t *u = load("{\"UserName\": \"a\", \"Emails\": []}");

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"username\", \"value\": \"b\"},"
				  " {\"op\": \"add\", \"path\": \"DISPLAYNAME\", \"value\": \"D\"},"
				  " {\"op\": \"add\", \"path\": \"customThing\", \"value\": 1},"
				  " {\"op\": \"add\", \"path\": \"emails\", \"value\": {\"value\": \"e@x\"}},"
				  " {\"op\": \"add\", \"path\": \"ROLES\", \"value\": {\"value\": \"r\"}},"
				  " {\"op\": \"add\", \"path\": \"externalid\", \"value\": \"X\"}]"),
			 0);
	expect(u, "{\"UserName\": \"b\", \"displayName\": \"D\", \"customThing\": 1,"
		  " \"Emails\": [{\"value\": \"e@x\"}], \"roles\": [{\"value\": \"r\"}], \"externalId\": \"X\"}");
	json_decref(u);
}

static void test_case_of_ops(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"ADD\", \"path\": \"title\", \"value\": \"A\"},"
				  " {\"op\": \"rEpLaCe\", \"path\": \"title\", \"value\": \"B\"},"
				  " {\"Op\": \"Add\", \"Path\": \"nickName\", \"Value\": \"N\"},"
				  " {\"op\": \"REMOVE\", \"path\": \"title\"}]"),
			 0);
	assert_null(json_object_get(u, "title"));
	assert_string_equal(json_string_value(json_object_get(u, "nickName")), "N");
	json_decref(u);
}

static void test_manager(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"Add\", \"path\": \"" ENT ":manager\", \"value\": \"m1\"}]"), 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m1\"}}");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\","
				  " \"value\": {\"value\": \"m2\", \"displayName\": \"Boss\"}}]"),
			 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m2\", \"displayName\": \"Boss\"}}");
	json_object_del(json_object_get(u, ENT), "manager");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\", \"value\": [\"m3\"]}]"), 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m3\"}}");
	json_object_del(json_object_get(u, ENT), "manager");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\","
				  " \"value\": [{\"value\": \"m4\"}]}]"),
			 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m4\"}}");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager.value\", \"value\": \"m5\"}]"), 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m5\"}}");
	refuse(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\", \"value\": [\"a\", \"b\"]}]",
	       SCIM_PATCH_INVALID_VALUE, "single value");
	refuse(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\", \"value\": 5}]",
	       SCIM_PATCH_INVALID_VALUE, "\"manager\"");
	/* Entra clears a manager with Remove (with or without a value) */
	assert_int_equal(patch(u, "[{\"op\": \"Remove\", \"path\": \"" ENT ":manager\","
				  " \"value\": [{\"value\": \"m5\"}]}]"),
			 0);
	expect(json_object_get(u, ENT), "{}");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\", \"value\": \"\"}]"), 0);
	expect(json_object_get(u, ENT), "{}");
	json_decref(u);
}

static void test_normalize_direct(void **state)
{
	json_t *r = load("{\"active\": \"TRUE\", \"emails\": [{\"primary\": \"False\"}, {\"primary\": true}],"
			 " \"roles\": [{\"Primary\": \"true\"}],"
			 " \"" ENT "\": {\"manager\": \"m\"}}");

	(void)state;
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_OK);
	expect(r, "{\"active\": true, \"emails\": [{\"primary\": false}, {\"primary\": true}],"
		  " \"roles\": [{\"Primary\": true}], \"" ENT "\": {\"manager\": {\"value\": \"m\"}}}");
	json_decref(r);
	r = load("{\"emails\": [{\"primary\": \"yes\"}]}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	assert_string_equal(err, "\"primary\" must be a boolean");
	json_decref(r);
	r = load("{\"active\": \"on\"}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	json_decref(r);
	r = load("{\"" ENT "\": {\"manager\": []}, \"active\": null}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_OK);
	expect(r, "{\"" ENT "\": {}, \"active\": null}");
	json_decref(r);
	r = json_array();
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	json_decref(r);
}

static void test_extension_paths(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"" ENT "\", \"value\": {\"department\": \"X\"}}]"), 0);
	expect(json_object_get(u, ENT), "{\"department\": \"X\"}");
	expect(json_object_get(u, "schemas"), "[\"" SCIM_URN_USER "\", \"" ENT "\"]");
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"urn:ietf:params:scim:schemas:extension:enterprise:2.0:user:Division\","
				  " \"value\": \"D\"}]"),
			 0);
	expect(json_object_get(u, ENT), "{\"department\": \"X\", \"division\": \"D\"}");
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"" ENT "\"}]"), 0);
	assert_null(json_object_get(u, ENT));
	/* removing inside a missing extension is fine, creating nothing */
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"" ENT ":department\"}]"), 0);
	assert_null(json_object_get(u, ENT));
	refuse(u, "[{\"op\": \"add\", \"path\": \"" ENT "\", \"value\": 3}]", SCIM_PATCH_INVALID_VALUE,
	       "must be an object");
	json_decref(u);
}

static void test_odd_shapes(void **state)
{
	json_t *u = load("{\"id\": \"u-1\", \"" ENT "\": \"oops\"}");
	char deep[400], urn[200];
	int i;

	(void)state;
	/* an unknown extension given by its URN; no schemas array to extend */
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"value\": {\"urn:acme:scim:ext:1.0:User\":"
				  " {\"badge\": \"7\"}}},"
				  " {\"op\": \"add\", \"path\": \"urn:acme:scim:ext:1.0:User:badge\", \"value\": \"8\"}]"),
			 0);
	expect(json_object_get(u, "urn:acme:scim:ext:1.0:User"), "{\"badge\": \"8\"}");
	assert_null(json_object_get(u, "schemas"));
	refuse(u, "[{\"op\": \"add\", \"path\": \"" ENT ":department\", \"value\": \"x\"}]",
	       SCIM_PATCH_INVALID_PATH, "not an extension object");
	refuse(u, "[{\"op\": \"remove\", \"path\": \"" SCIM_URN_USER "\"}]", SCIM_PATCH_MUTABILITY,
	       "core schema");
	/* add/replace with the core URN as path is a path-less value */
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"" SCIM_URN_USER "\","
				  " \"value\": {\"title\": \"T\", \"id\": \"no\"}}]"),
			 0);
	assert_string_equal(json_string_value(json_object_get(u, "title")), "T");
	assert_string_equal(json_string_value(json_object_get(u, "id")), "u-1");
	/* remove / null on things that are not there */
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"name.givenName\"},"
				  " {\"op\": \"replace\", \"path\": \"name.givenName\", \"value\": null},"
				  " {\"op\": \"replace\", \"path\": \"emails[type eq \\\"w\\\"].value\", \"value\": null},"
				  " {\"op\": \"remove\", \"path\": \"nothing\"}]"),
			 0);
	assert_null(json_object_get(u, "name"));
	assert_null(json_object_get(u, "emails"));
	/* nesting and length limits */
	strcpy(deep, "[{\"op\": \"add\", \"value\": {\"name\": ");
	for (i = 0; i < 34; i++)
		strcat(deep, "{\"a\": ");
	strcat(deep, "1");
	for (i = 0; i < 34; i++)
		strcat(deep, "}");
	strcat(deep, "}}]");
	assert_int_equal(patch(u, deep), 0); /* set, not merged */
	refuse(u, deep, SCIM_PATCH_INVALID_VALUE, "nested deeper than 32"); /* merged */
	memset(urn, 'x', sizeof urn);
	memcpy(urn, "[{\"op\": \"add\", \"value\": {\"urn:", strlen("[{\"op\": \"add\", \"value\": {\"urn:"));
	strcpy(urn + 170, ":User\": {}}}]");
	refuse(u, urn, SCIM_PATCH_INVALID_PATH, "schema URN too long");
	json_decref(u);
}

static void test_read_only(void **state)
{
	json_t *u = user();

	(void)state;
	refuse(u, "[{\"op\": \"replace\", \"path\": \"id\", \"value\": \"x\"}]", SCIM_PATCH_MUTABILITY,
	       "\"id\" is read-only");
	refuse(u, "[{\"op\": \"replace\", \"path\": \"meta.created\", \"value\": \"x\"}]",
	       SCIM_PATCH_MUTABILITY, "read-only");
	refuse(u, "[{\"op\": \"remove\", \"path\": \"" SCIM_URN_USER ":ID\"}]", SCIM_PATCH_MUTABILITY,
	       "read-only");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"schemas\", \"value\": []}]"), 0);
	assert_int_equal(json_array_size(json_object_get(u, "schemas")), 1);
	json_decref(u);
}

static void test_errors(void **state)
{
	json_t *u = user(), *body;
	char *big, *p;
	int i;

	(void)state;
	refuse(u, "[{\"op\": \"move\", \"path\": \"title\", \"value\": \"x\"}]",
	       SCIM_PATCH_INVALID_SYNTAX, "unknown op \"move\"");
	refuse(u, "[{\"path\": \"title\", \"value\": \"x\"}]", SCIM_PATCH_INVALID_SYNTAX, "\"op\"");
	refuse(u, "[{\"op\": 1}]", SCIM_PATCH_INVALID_SYNTAX, "\"op\"");
	refuse(u, "[\"add\"]", SCIM_PATCH_INVALID_SYNTAX, "must be an object");
	refuse(u, "[{\"op\": \"remove\"}]", SCIM_PATCH_NO_TARGET, "Operations[0]: remove requires a path");
	refuse(u, "[{\"op\": \"Remove\", \"path\": \" \"}]", SCIM_PATCH_NO_TARGET, "requires a path");
	refuse(u, "[{\"op\": \"add\", \"path\": \"emails[type eq\", \"value\": 1}]",
	       SCIM_PATCH_INVALID_PATH, "invalid path: missing value after 'eq'");
	refuse(u, "[{\"op\": \"add\", \"path\": \"name..x\", \"value\": 1}]", SCIM_PATCH_INVALID_PATH,
	       "invalid path");
	refuse(u, "[{\"op\": \"add\", \"path\": 5, \"value\": 1}]", SCIM_PATCH_INVALID_PATH,
	       "\"path\" must be a string");
	refuse(u, "[{\"op\": \"add\", \"path\": \"title\"}]", SCIM_PATCH_INVALID_VALUE, "requires a value");
	refuse(u, "[{\"op\": \"replace\"}]", SCIM_PATCH_INVALID_VALUE, "requires a value");
	refuse(u, "{}", SCIM_PATCH_INVALID_SYNTAX, "\"Operations\" must be an array");

	/* body checks */
	body = load("{\"schemas\": [\"urn:x\"], \"Operations\": []}");
	assert_int_equal(scim_patch_apply(u, body, err, sizeof err), SCIM_PATCH_INVALID_SYNTAX);
	assert_non_null(strstr(err, "schemas must contain"));
	json_decref(body);
	body = load("{\"Operations\": []}");
	assert_int_equal(scim_patch_apply(u, body, err, sizeof err), SCIM_PATCH_OK);
	json_decref(body);
	assert_int_equal(scim_patch_apply(u, NULL, err, sizeof err), SCIM_PATCH_INVALID_SYNTAX);

	/* at most 100 operations */
	big = malloc(101 * 64 + 8);
	assert_non_null(big);
	p = big;
	*p++ = '[';
	for (i = 0; i < 100; i++)
		p += sprintf(p, "%s{\"op\": \"add\", \"path\": \"title\", \"value\": \"t%d\"}", i ? "," : "", i);
	strcpy(p, "]");
	assert_int_equal(patch(u, big), 0);
	assert_string_equal(json_string_value(json_object_get(u, "title")), "t99");
	sprintf(p, ",{\"op\": \"add\", \"path\": \"title\", \"value\": \"x\"}]");
	refuse(u, big, SCIM_PATCH_INVALID_VALUE, "too many operations");
	free(big);
	json_decref(u);
}

static void test_atomic(void **state)
{
	json_t *u = user(), *before;

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"emails\", \"value\": [{\"value\": \"a@x\"}]}]"), 0);
	before = json_deep_copy(u);
	/* the first op would succeed, the second fails: nothing changes */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"displayName\", \"value\": \"New\"},"
				  " {\"op\": \"bogus\"}]"),
			 SCIM_PATCH_INVALID_SYNTAX);
	assert_true(json_equal(u, before));
	assert_non_null(strstr(err, "Operations[1]"));
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"emails\"},"
				  " {\"op\": \"add\", \"path\": \"name.givenName\", \"value\": \"Z\"},"
				  " {\"op\": \"replace\", \"path\": \"active\", \"value\": \"nope\"}]"),
			 SCIM_PATCH_INVALID_VALUE);
	assert_true(json_equal(u, before));
	json_decref(before);
	json_decref(u);
}

static void test_entra_roles(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(patch(u, "[{\"op\": \"Add\", \"path\": \"roles\", \"value\": [{\"primary\": \"False\","
				  " \"type\": \"WindowsAzureActiveDirectoryRole\", \"value\": \"Admin\"}]}]"),
			 0);
	expect(json_object_get(u, "roles"),
	       "[{\"primary\": false, \"type\": \"WindowsAzureActiveDirectoryRole\", \"value\": \"Admin\"}]");
	/* the same value with another type is another role */
	assert_int_equal(patch(u, "[{\"op\": \"Add\", \"path\": \"roles\", \"value\": [{\"type\": \"Other\", \"value\": \"Admin\"}]}]"), 0);
	assert_int_equal(json_array_size(json_object_get(u, "roles")), 2);
	/* emails.value without a filter applies to every element */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"roles.display\", \"value\": \"R\"}]"), 0);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(u, "roles"), 1), "display")), "R");
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"emails.value\", \"value\": \"only@x\"}]"), 0);
	expect(json_object_get(u, "emails"), "[{\"value\": \"only@x\"}]");
	json_decref(u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_okta_deactivate),
		cmocka_unit_test(test_entra_active_string),
		cmocka_unit_test(test_entra_add_email_creates),
		cmocka_unit_test(test_value_path_elements),
		cmocka_unit_test(test_entra_name),
		cmocka_unit_test(test_members),
		cmocka_unit_test(test_nopath_keys),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_case_of_ops),
		cmocka_unit_test(test_manager),
		cmocka_unit_test(test_normalize_direct),
		cmocka_unit_test(test_extension_paths),
		cmocka_unit_test(test_odd_shapes),
		cmocka_unit_test(test_read_only),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_atomic),
		cmocka_unit_test(test_entra_roles),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
