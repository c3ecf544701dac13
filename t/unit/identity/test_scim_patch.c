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
#include <strings.h>
#include <cmocka.h>

#include <jansson.h>

#include "json_fixture.h"

#include "identity/scim_filter.h"
#include "identity/scim_patch.h"

#define ENT SCIM_URN_ENTERPRISE

static char err[512];

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
	return load(
		"{\"schemas\": [\"" SCIM_URN_USER "\"], \"id\": \"u-1\","
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
	assert_int_equal(
		patch(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"False\"}]"), 0);
	assert_true(json_is_false(json_object_get(u, "active")));
	assert_int_equal(patch(u,
			       "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"True\"}]"),
			 0);
	assert_true(json_is_true(json_object_get(u, "active")));
	assert_int_equal(
		patch(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"false\"}]"), 0);
	assert_true(json_is_false(json_object_get(u, "active")));
	refuse(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": \"maybe\"}]",
	       SCIM_PATCH_INVALID_VALUE,
	       "active must be a boolean, or the string \"true\" or \"false\" (got a string)");
	refuse(u, "[{\"op\": \"Replace\", \"path\": \"active\", \"value\": 1}]",
	       SCIM_PATCH_INVALID_VALUE,
	       "active must be a boolean, or the string \"true\" or"
	       " \"false\" (got an integer)");
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
	assert_int_equal(
		patch(u, "[{\"op\": \"Add\", \"path\": \"phoneNumbers[type eq \\\"mobile\\\"].value\","
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
	assert_int_equal(patch(u,
			       "[{\"op\": \"remove\", \"path\": \"emails[type eq \\\"work\\\"].display\"},"
			       " {\"op\": \"remove\", \"path\": \"emails[type eq \\\"home\\\"]\"}]"),
			 0);
	expect(json_object_get(u, "emails"),
	       "[{\"type\": \"work\", \"value\": \"new@x\", \"primary\": true}]");
	/* no match on remove is fine */
	assert_int_equal(
		patch(u, "[{\"op\": \"remove\", \"path\": \"emails[type eq \\\"other\\\"]\"}]"), 0);
	/* a filter that does not describe an element cannot create one */
	refuse(u,
	       "[{\"op\": \"replace\", \"path\": \"emails[value co \\\"zzz\\\"].type\", \"value\": \"w\"}]",
	       SCIM_PATCH_NO_TARGET, "does not describe one");
	refuse(u,
	       "[{\"op\": \"replace\", \"path\": \"emails[type eq \\\"work\\\"]\", \"value\": \"x\"}]",
	       SCIM_PATCH_INVALID_VALUE, "must be an object");
	refuse(u,
	       "[{\"op\": \"replace\", \"path\": \"userName[type eq \\\"work\\\"]\", \"value\": {}}]",
	       SCIM_PATCH_INVALID_PATH, "not one");
	/* removing the last element drops the attribute */
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"emails[value ew \\\"@X\\\"]\"}]"),
			 0);
	assert_null(json_object_get(u, "emails"));
	json_decref(u);
}

static void test_entra_name(void **state)
{
	json_t *u = user();

	(void)state;
	assert_int_equal(
		patch(u, "[{\"op\": \"Replace\", \"path\": \"name.givenName\", \"value\": \"Bob\"}]"),
		0);
	expect(json_object_get(u, "name"), "{\"givenName\": \"Bob\", \"familyName\": \"Smith\"}");
	/* replace of a complex attribute keeps the sub-attributes not given */
	assert_int_equal(
		patch(u, "[{\"op\": \"replace\", \"path\": \"name\","
			 " \"value\": {\"familyName\": \"Jones\", \"formatted\": \"Bob Jones\"}}]"),
		0);
	expect(json_object_get(u, "name"),
	       "{\"givenName\": \"Bob\", \"familyName\": \"Jones\", \"formatted\": \"Bob Jones\"}");
	assert_int_equal(patch(u, "[{\"op\": \"remove\", \"path\": \"name.formatted\"}]"), 0);
	expect(json_object_get(u, "name"), "{\"givenName\": \"Bob\", \"familyName\": \"Jones\"}");
	json_object_del(u, "name");
	assert_int_equal(
		patch(u, "[{\"op\": \"add\", \"path\": \"NAME.GIVENNAME\", \"value\": \"Al\"}]"), 0);
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
	assert_int_equal(patch(g,
			       "[{\"op\": \"Remove\", \"path\": \"members[value eq \\\"u2\\\"]\"}]"),
			 0);
	expect(json_object_get(g, "members"), "[{\"value\": \"u4\"}]");
	/* add skips duplicates, also within one value */
	assert_int_equal(
		patch(g,
		      "[{\"op\": \"add\", \"path\": \"members\","
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
	assert_int_equal(
		patch(g,
		      "[{\"op\": \"remove\", \"path\": \"members[value eq \\\"nope\\\"]\"},"
		      " {\"op\": \"remove\", \"path\": \"members\", \"value\": [{\"value\": \"nope\"}]}]"),
		0);
	assert_int_equal(json_array_size(json_object_get(g, "members")), 2);
	/* a single object value is one member; bare ids name members too */
	assert_int_equal(patch(g,
			       "[{\"op\": \"add\", \"path\": \"members\", \"value\": {\"value\": \"u5\"}},"
			       " {\"op\": \"remove\", \"path\": \"members\", \"value\": [\"u4\"]}]"),
			 0);
	expect(json_object_get(g, "members"),
	       "[{\"value\": \"u3\", \"display\": \"Three\"}, {\"value\": \"u5\"}]");
	/* replace sets the whole array */
	assert_int_equal(
		patch(g,
		      "[{\"op\": \"replace\", \"path\": \"members\", \"value\": [{\"value\": \"u9\"}]}]"),
		0);
	expect(json_object_get(g, "members"), "[{\"value\": \"u9\"}]");
	/* removing every member, or the attribute, unassigns it */
	assert_int_equal(
		patch(g,
		      "[{\"op\": \"remove\", \"path\": \"members\", \"value\": [{\"value\": \"u9\"}]}]"),
		0);
	assert_null(json_object_get(g, "members"));
	assert_int_equal(patch(g, "[{\"op\": \"add\", \"path\": \"members\", \"value\": [{\"value\": \"u1\"}]},"
				  " {\"op\": \"remove\", \"path\": \"members\"}]"),
			 0);
	assert_null(json_object_get(g, "members"));
	/* Okta's group rename carries the id */
	assert_int_equal(
		patch(g,
		      "[{\"op\": \"replace\", \"value\": {\"id\": \"g-1\", \"displayName\": \"New\"}}]"),
		0);
	expect(g, "{\"schemas\": [\"" SCIM_URN_GROUP
		  "\"], \"id\": \"g-1\", \"displayName\": \"New\"}");
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
				  " {\"userName\": \"c@x\", \"id\": \"zzz\"}, \"" SCIM_URN_USER
				  ":id\": \"q\"}}]"),
			 0);
	assert_string_equal(json_string_value(json_object_get(u, "userName")), "c@x");
	assert_string_equal(json_string_value(json_object_get(u, "id")), "u-1");
	refuse(u, "[{\"op\": \"add\", \"value\": \"x\"}]", SCIM_PATCH_INVALID_VALUE,
	       "must be an object");
	refuse(u, "[{\"op\": \"add\", \"value\": {\"name..x\": 1}}]", SCIM_PATCH_INVALID_PATH,
	       "invalid attribute \"name..x\"");
	refuse(u, "[{\"op\": \"add\", \"value\": {\"title\": \"ok\", \"bad key\": 1}}]",
	       SCIM_PATCH_INVALID_PATH, "invalid attribute \"bad key\"");
	/* a prefix that is no schema URI does not reach meta (found by the fuzzer) */
	refuse(u, "[{\"op\": \"replace\", \"path\": \"meta:created\", \"value\": \"x\"}]",
	       SCIM_PATCH_INVALID_PATH, "invalid attribute path");
	refuse(u, "[{\"op\": \"add\", \"value\": {\"meta:created\": \"x\"}}]",
	       SCIM_PATCH_INVALID_PATH, "invalid attribute");
	json_decref(u);
}

static void test_names(void **state)
{
	json_t *u = load("{\"UserName\": \"a\", \"Emails\": []}");

	(void)state;
	assert_int_equal(
		patch(u, "[{\"op\": \"replace\", \"path\": \"username\", \"value\": \"b\"},"
			 " {\"op\": \"add\", \"path\": \"DISPLAYNAME\", \"value\": \"D\"},"
			 " {\"op\": \"add\", \"path\": \"customThing\", \"value\": 1},"
			 " {\"op\": \"add\", \"path\": \"emails\", \"value\": {\"value\": \"e@x\"}},"
			 " {\"op\": \"add\", \"path\": \"ROLES\", \"value\": {\"value\": \"r\"}},"
			 " {\"op\": \"add\", \"path\": \"externalid\", \"value\": \"X\"}]"),
		0);
	expect(u,
	       "{\"UserName\": \"b\", \"displayName\": \"D\", \"customThing\": 1,"
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
	assert_int_equal(patch(u, "[{\"op\": \"Add\", \"path\": \"" ENT
				  ":manager\", \"value\": \"m1\"}]"),
			 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m1\"}}");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\","
				  " \"value\": {\"value\": \"m2\", \"displayName\": \"Boss\"}}]"),
			 0);
	expect(json_object_get(u, ENT),
	       "{\"manager\": {\"value\": \"m2\", \"displayName\": \"Boss\"}}");
	json_object_del(json_object_get(u, ENT), "manager");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT
				  ":manager\", \"value\": [\"m3\"]}]"),
			 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m3\"}}");
	json_object_del(json_object_get(u, ENT), "manager");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT ":manager\","
				  " \"value\": [{\"value\": \"m4\"}]}]"),
			 0);
	expect(json_object_get(u, ENT), "{\"manager\": {\"value\": \"m4\"}}");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT
				  ":manager.value\", \"value\": \"m5\"}]"),
			 0);
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
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"" ENT
				  ":manager\", \"value\": \"\"}]"),
			 0);
	expect(json_object_get(u, ENT), "{}");
	json_decref(u);
}

static void test_normalize_direct(void **state)
{
	json_t *r = load(
		"{\"active\": \"TRUE\", \"emails\": [{\"primary\": \"False\"}, {\"primary\": true}],"
		" \"roles\": [{\"Primary\": \"true\"}],"
		" \"" ENT "\": {\"manager\": \"m\"}}");

	(void)state;
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_OK);
	expect(r, "{\"active\": true, \"emails\": [{\"primary\": false}, {\"primary\": true}],"
		  " \"roles\": [{\"Primary\": true}], \"" ENT
		  "\": {\"manager\": {\"value\": \"m\"}}}");
	json_decref(r);
	r = load("{\"emails\": [{\"primary\": \"yes\"}]}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	assert_string_equal(err, "emails[0].primary must be a boolean, or the string \"true\" or"
				 " \"false\" (got a string)");
	json_decref(r);
	r = load("{\"emails\": [{\"primary\": true}, {\"value\": \"x\"}],"
		 " \"phoneNumbers\": [{\"value\": \"1\"}, {\"Primary\": 1}]}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	assert_string_equal(err, "phoneNumbers[1].Primary must be a boolean, or the string \"true\""
				 " or \"false\" (got an integer)");
	json_decref(r);
	/* every spelling of a name is normalised (fuzz/scim_resource/regressions) */
	r = load("{\"active\": \"True\", \"ACTIVE\": \"false\", \"" ENT "\": {\"manager\": \"m1\","
		 " \"MANAGER\": [\"m3\"]}, \"URN:IETF:PARAMS:SCIM:SCHEMAS:EXTENSION:ENTERPRISE:2.0:USER\":"
		 " {\"Manager\": \"m2\"}}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_OK);
	expect(r,
	       "{\"active\": true, \"ACTIVE\": false, \"" ENT "\": {\"manager\": {\"value\": \"m1\"},"
	       " \"MANAGER\": {\"value\": \"m3\"}}, \"URN:IETF:PARAMS:SCIM:SCHEMAS:EXTENSION:ENTERPRISE:2.0:USER\":"
	       " {\"Manager\": {\"value\": \"m2\"}}}");
	json_decref(r);
	r = load("{\"active\": true, \"Active\": \"nope\"}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	json_decref(r);
	r = load("{\"x\": {\"y\": [[{\"primary\": []}]]}}");
	assert_int_equal(scim_patch_normalize(r, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	assert_string_equal(err, "x.y[0][0].primary must be a boolean, or the string \"true\" or"
				 " \"false\" (got an array)");
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
	assert_int_equal(patch(u, "[{\"op\": \"add\", \"path\": \"" ENT
				  "\", \"value\": {\"department\": \"X\"}}]"),
			 0);
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
	refuse(u, "[{\"op\": \"add\", \"path\": \"" ENT "\", \"value\": 3}]",
	       SCIM_PATCH_INVALID_VALUE, "must be an object");
	json_decref(u);
}

static void test_odd_shapes(void **state)
{
	json_t *u = load("{\"id\": \"u-1\", \"" ENT "\": \"oops\"}");
	char deep[400], urn[200];
	int i;

	(void)state;
	/* an unknown extension given by its URN; no schemas array to extend */
	assert_int_equal(
		patch(u,
		      "[{\"op\": \"add\", \"value\": {\"urn:acme:scim:ext:1.0:User\":"
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
	assert_int_equal(patch(u, deep), 0);                                /* set, not merged */
	refuse(u, deep, SCIM_PATCH_INVALID_VALUE, "nested deeper than 32"); /* merged */
	memset(urn, 'x', sizeof urn);
	memcpy(urn, "[{\"op\": \"add\", \"value\": {\"urn:",
	       strlen("[{\"op\": \"add\", \"value\": {\"urn:"));
	strcpy(urn + 170, ":User\": {}}}]");
	refuse(u, urn, SCIM_PATCH_INVALID_PATH, "schema URN too long");
	json_decref(u);
}

static void test_read_only(void **state)
{
	json_t *u = user();

	(void)state;
	refuse(u, "[{\"op\": \"replace\", \"path\": \"id\", \"value\": \"x\"}]",
	       SCIM_PATCH_MUTABILITY, "\"id\" is read-only");
	refuse(u, "[{\"op\": \"replace\", \"path\": \"meta.created\", \"value\": \"x\"}]",
	       SCIM_PATCH_MUTABILITY, "read-only");
	refuse(u, "[{\"op\": \"remove\", \"path\": \"" SCIM_URN_USER ":ID\"}]",
	       SCIM_PATCH_MUTABILITY, "read-only");
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"schemas\", \"value\": []}]"),
			 0);
	assert_int_equal(json_array_size(json_object_get(u, "schemas")), 1);
	json_decref(u);
}

static void test_errors(void **state)
{
	json_t *u = user(), *body, *before;
	char *big, *p;
	int i;

	(void)state;
	refuse(u, "[{\"op\": \"move\", \"path\": \"title\", \"value\": \"x\"}]",
	       SCIM_PATCH_INVALID_SYNTAX, "unknown op \"move\"");
	refuse(u, "[{\"path\": \"title\", \"value\": \"x\"}]", SCIM_PATCH_INVALID_SYNTAX, "\"op\"");
	refuse(u, "[{\"op\": 1}]", SCIM_PATCH_INVALID_SYNTAX, "\"op\"");
	refuse(u, "[\"add\"]", SCIM_PATCH_INVALID_SYNTAX, "must be an object");
	refuse(u, "[{\"op\": \"remove\"}]", SCIM_PATCH_NO_TARGET,
	       "Operations[0]: remove requires a path");
	refuse(u, "[{\"op\": \"Remove\", \"path\": \" \"}]", SCIM_PATCH_NO_TARGET, "requires a path");
	refuse(u, "[{\"op\": \"add\", \"path\": \"emails[type eq\", \"value\": 1}]",
	       SCIM_PATCH_INVALID_PATH, "invalid path: missing value after 'eq'");
	refuse(u, "[{\"op\": \"add\", \"path\": \"name..x\", \"value\": 1}]",
	       SCIM_PATCH_INVALID_PATH, "invalid path");
	refuse(u, "[{\"op\": \"add\", \"path\": 5, \"value\": 1}]", SCIM_PATCH_INVALID_PATH,
	       "\"path\" must be a string");
	refuse(u, "[{\"op\": \"add\", \"path\": \"title\"}]", SCIM_PATCH_INVALID_VALUE,
	       "requires a value");
	refuse(u, "[{\"op\": \"replace\"}]", SCIM_PATCH_INVALID_VALUE, "requires a value");
	refuse(u, "{}", SCIM_PATCH_INVALID_SYNTAX, "\"Operations\" must be an array");

	/* body checks */
	body = load("{\"schemas\": [\"urn:x\"], \"Operations\": []}");
	assert_int_equal(scim_patch_apply(u, body, err, sizeof err), SCIM_PATCH_INVALID_SYNTAX);
	assert_non_null(strstr(err, "schemas must contain"));
	json_decref(body);
	/* without "schemas" is fine; RFC 7644 §3.5.2 asks for one or more
	 * operations, so an empty list is refused as a missing one is */
	body = load("{\"Operations\": [{\"op\": \"add\", \"path\": \"title\", \"value\": \"t\"}]}");
	assert_int_equal(scim_patch_apply(u, body, err, sizeof err), SCIM_PATCH_OK);
	json_decref(body);
	before = json_deep_copy(u);
	body = load("{\"Operations\": []}");
	assert_int_equal(scim_patch_apply(u, body, err, sizeof err), SCIM_PATCH_INVALID_SYNTAX);
	assert_non_null(strstr(err, "one or more operations"));
	assert_true(json_equal(u, before));
	json_decref(body);
	body = load("{\"schemas\": [\"" SCIM_PATCH_URN "\"], \"Operations\": []}");
	assert_int_equal(scim_patch_apply(u, body, err, sizeof err), SCIM_PATCH_INVALID_SYNTAX);
	json_decref(body);
	json_decref(before);
	assert_int_equal(scim_patch_apply(u, NULL, err, sizeof err), SCIM_PATCH_INVALID_SYNTAX);

	/* at most 100 operations */
	big = malloc(101 * 64 + 8);
	assert_non_null(big);
	p = big;
	*p++ = '[';
	for (i = 0; i < 100; i++)
		p += sprintf(p, "%s{\"op\": \"add\", \"path\": \"title\", \"value\": \"t%d\"}",
			     i ? "," : "", i);
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
	assert_int_equal(
		patch(u,
		      "[{\"op\": \"add\", \"path\": \"emails\", \"value\": [{\"value\": \"a@x\"}]}]"),
		0);
	before = json_deep_copy(u);
	/* the first op would succeed, the second fails: nothing changes */
	assert_int_equal(patch(u, "[{\"op\": \"replace\", \"path\": \"displayName\", \"value\": \"New\"},"
				  " {\"op\": \"bogus\"}]"),
			 SCIM_PATCH_INVALID_SYNTAX);
	assert_true(json_equal(u, before));
	assert_non_null(strstr(err, "Operations[1]"));
	assert_int_equal(patch(u,
			       "[{\"op\": \"remove\", \"path\": \"emails\"},"
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
	assert_int_equal(
		patch(u, "[{\"op\": \"Add\", \"path\": \"roles\", \"value\": [{\"primary\": \"False\","
			 " \"type\": \"WindowsAzureActiveDirectoryRole\", \"value\": \"Admin\"}]}]"),
		0);
	expect(json_object_get(u, "roles"),
	       "[{\"primary\": false, \"type\": \"WindowsAzureActiveDirectoryRole\", \"value\": \"Admin\"}]");
	/* the same value with another type is another role */
	assert_int_equal(
		patch(u,
		      "[{\"op\": \"Add\", \"path\": \"roles\", \"value\": [{\"type\": \"Other\", \"value\": \"Admin\"}]}]"),
		0);
	assert_int_equal(json_array_size(json_object_get(u, "roles")), 2);
	/* emails.value without a filter applies to every element */
	assert_int_equal(
		patch(u, "[{\"op\": \"replace\", \"path\": \"roles.display\", \"value\": \"R\"}]"),
		0);
	assert_string_equal(json_string_value(
				    json_object_get(json_array_get(json_object_get(u, "roles"), 1),
						    "display")),
			    "R");
	assert_int_equal(
		patch(u, "[{\"op\": \"add\", \"path\": \"emails.value\", \"value\": \"only@x\"}]"),
		0);
	expect(json_object_get(u, "emails"), "[{\"value\": \"only@x\"}]");
	json_decref(u);
}

/* ---- de-duplication of multi-valued attributes ---- */

/* Adds (op add, path emails) the JSON array text items to a user whose
 * emails are the JSON array text have, and expects the emails want. */
static void add_emails(const char *have, const char *items, const char *want)
{
	json_t *u = user(), *body;
	char *ops;

	assert_int_equal(json_object_set_new(u, "emails", load(have)), 0);
	assert_true(asprintf(&ops, "[{\"op\": \"add\", \"path\": \"emails\", \"value\": %s}]",
			     items) > 0);
	assert_int_equal(patch(u, ops), 0);
	free(ops);
	body = json_object_get(u, "emails");
	if (!strcmp(want, "absent"))
		assert_null(body);
	else
		expect(body, want);
	json_decref(u);
}

static void test_dedupe_within_op(void **state)
{
	(void)state;
	/* equal elements, and nulls, are added once */
	add_emails("[]", "[{\"value\": \"a\"}, null, {\"value\": \"a\"}]", "[{\"value\": \"a\"}]");
	add_emails("[]", "[\"a\", \"a\", \"b\"]", "[\"a\", \"b\"]");
	/* member order inside an element does not matter */
	add_emails("[]",
		   "[{\"value\": \"a\", \"display\": \"D\"}, {\"display\": \"D\", \"value\": \"a\"}]",
		   "[{\"value\": \"a\", \"display\": \"D\"}]");
	/* the same value and type: the later one merges into the first */
	add_emails("[]",
		   "[{\"value\": \"a\"}, {\"value\": \"a\", \"display\": \"A\"}, {\"value\": \"b\"}]",
		   "[{\"value\": \"a\", \"display\": \"A\"}, {\"value\": \"b\"}]");
	/* type compares ignoring case; the later spelling of its value wins,
	 * the first element's key spelling stays */
	add_emails("[]",
		   "[{\"value\": \"x\", \"Type\": \"work\"}, {\"value\": \"x\", \"type\": \"WORK\"}]",
		   "[{\"value\": \"x\", \"Type\": \"WORK\"}]");
	/* value is case-exact; another type, or none, is another element */
	add_emails("[]",
		   "[{\"value\": \"a\"}, {\"value\": \"A\"}, {\"value\": \"a\", \"type\": \"work\"},"
		   " {\"value\": \"a\", \"type\": \"home\"}]",
		   "[{\"value\": \"a\"}, {\"value\": \"A\"}, {\"value\": \"a\", \"type\": \"work\"},"
		   " {\"value\": \"a\", \"type\": \"home\"}]");
	/* a bare id is not the object holding it; 1 and 1.0 differ, 0.0 and -0.0 do not */
	add_emails("[]",
		   "[\"a\", {\"value\": \"a\"}, 1, 1.0, 0.0, -0.0, {\"value\": 0.0}, {\"value\": -0.0}]",
		   "[\"a\", {\"value\": \"a\"}, 1, 1.0, 0.0, {\"value\": 0.0}]");
	/* a null value is no value: such elements only merge when equal */
	add_emails("[]",
		   "[{\"value\": null, \"display\": \"1\"}, {\"value\": null, \"display\": \"2\"},"
		   " {\"value\": null, \"display\": \"1\"}]",
		   "[{\"value\": null, \"display\": \"1\"}, {\"value\": null, \"display\": \"2\"}]");
}

static void test_dedupe_too_deep(void **state)
{
	json_t *u = user(), *deep = json_string("x"), *body;
	int i;

	(void)state;
	/* requests stop at 32 levels; an element nested past 64 is refused */
	for (i = 0; i < 70; i++)
		deep = json_pack("[o]", deep);
	body = json_pack("{s:[s], s:[{s:s, s:s, s:[o]}]}", "schemas", SCIM_PATCH_URN, "Operations",
			 "op", "add", "path", "emails", "value", deep);
	assert_int_equal(scim_patch_apply(u, body, err, sizeof err), SCIM_PATCH_INVALID_VALUE);
	assert_non_null(strstr(err, "deeper than 64"));
	assert_null(json_object_get(u, "emails"));
	json_decref(body);
	json_decref(u);
}

static void test_dedupe_against_existing(void **state)
{
	json_t *g = group();

	(void)state;
	/* existing members stay in place; new ones follow in the order given */
	assert_int_equal(
		patch(g, "[{\"op\": \"add\", \"path\": \"members\", \"value\": [{\"value\": \"u5\"},"
			 " {\"value\": \"u2\"}, {\"value\": \"u1\", \"display\": \"Uno\"}, {\"value\": \"u3\"},"
			 " {\"value\": \"u5\"}]}]"),
		0);
	expect(json_object_get(g, "members"),
	       "[{\"value\": \"u1\", \"display\": \"Uno\"}, {\"value\": \"u2\"}, {\"value\": \"u4\"},"
	       " {\"value\": \"u5\"}, {\"value\": \"u3\"}]");
	json_decref(g);
	/* duplicates already stored: an addition merges into the first of them */
	add_emails("[{\"value\": \"a\"}, {\"value\": \"a\", \"display\": \"2\"}, \"s\", \"s\"]",
		   "[{\"value\": \"a\", \"display\": \"X\"}, \"s\"]",
		   "[{\"value\": \"a\", \"display\": \"X\"}, {\"value\": \"a\", \"display\": \"2\"}, \"s\", \"s\"]");
	/* equal to a later stored element, same value as an earlier one: the earlier wins */
	add_emails("[{\"value\": \"a\", \"type\": \"W\"}, {\"value\": \"a\", \"type\": \"w\", \"display\": \"D\"}]",
		   "[{\"value\": \"a\", \"type\": \"w\", \"display\": \"D\"}]",
		   "[{\"value\": \"a\", \"type\": \"w\", \"display\": \"D\"},"
		   " {\"value\": \"a\", \"type\": \"w\", \"display\": \"D\"}]");
	/* an element merged into matches later additions under its new content */
	add_emails("[{\"value\": \"a\"}]",
		   "[{\"value\": \"a\", \"display\": \"D\"}, {\"value\": \"a\", \"display\": \"D\"}, {\"value\": \"a\"}]",
		   "[{\"value\": \"a\", \"display\": \"D\"}]");
}

/* Many members at once: 10,000 stored, 10,000 added of which half are
 * already members and every tenth is given twice. */
static void test_dedupe_many(void **state)
{
	json_t *g = json_pack("{s:s, s:[]}", "displayName", "big", "members"), *body, *add, *m;
	char id[32];
	size_t i;

	(void)state;
	for (i = 0; i < 10000; i++) {
		snprintf(id, sizeof id, "u%05zu", i);
		assert_int_equal(json_array_append_new(json_object_get(g, "members"),
						       json_pack("{s:s}", "value", id)),
				 0);
	}
	add = json_array();
	for (i = 5000; i < 15000; i++) {
		snprintf(id, sizeof id, "u%05zu", i);
		assert_int_equal(json_array_append_new(add, json_pack("{s:s, s:s}", "value", id,
								      "display", id)),
				 0);
		if (i % 10 == 0)
			assert_int_equal(json_array_append_new(add, json_pack("{s:s}", "value", id)),
					 0);
	}
	body = json_pack("{s:[s], s:[{s:s, s:s, s:o}]}", "schemas", SCIM_PATCH_URN, "Operations",
			 "op", "add", "path", "members", "value", add);
	assert_int_equal(scim_patch_apply(g, body, err, sizeof err), 0);
	m = json_object_get(g, "members");
	assert_int_equal(json_array_size(m), 15000);
	for (i = 0; i < 15000; i++) {
		snprintf(id, sizeof id, "u%05zu", i);
		assert_string_equal(json_string_value(json_object_get(json_array_get(m, i), "value")),
				    id);
		if (i < 5000)
			assert_null(json_object_get(json_array_get(m, i), "display"));
		else
			assert_string_equal(json_string_value(json_object_get(json_array_get(m, i),
									      "display")),
					    id);
	}
	/* Entra's removal of 10,000 at once, given as objects and as bare ids */
	json_decref(body);
	add = json_array();
	for (i = 0; i < 15000; i += 3) {
		snprintf(id, sizeof id, "u%05zu", i);
		assert_int_equal(json_array_append_new(add, i % 2 ? json_string(id)
								  : json_pack("{s:s}", "value", id)),
				 0);
	}
	body = json_pack("{s:[s], s:[{s:s, s:s, s:o}]}", "schemas", SCIM_PATCH_URN, "Operations",
			 "op", "remove", "path", "members", "value", add);
	assert_int_equal(scim_patch_apply(g, body, err, sizeof err), 0);
	m = json_object_get(g, "members");
	assert_int_equal(json_array_size(m), 10000);
	for (i = 0; i < 10000; i++) {
		snprintf(id, sizeof id, "u%05zu", i / 2 * 3 + 1 + i % 2);
		assert_string_equal(json_string_value(json_object_get(json_array_get(m, i), "value")),
				    id);
	}
	json_decref(body);
	json_decref(g);
}

/* ---- a reference model: the plain scans add and remove on a
 * multi-valued attribute were first written as. The engine must give the
 * same result for every input, including odd ones (keys that differ only
 * in case, null values, bare values, -0.0). */

static int model_ci(const char *a, const char *b)
{
	return !strcasecmp(a, b);
}

static int model_same_value(const json_t *a, const json_t *b)
{
	const json_t *va = scim_object_get(a, "value", NULL), *vb = scim_object_get(b, "value", NULL);
	const json_t *ta = scim_object_get(a, "type", NULL), *tb = scim_object_get(b, "type", NULL);

	if (!va || !vb || json_is_null(va) || !json_equal(va, vb))
		return 0;
	if (!ta && !tb)
		return 1;
	if (json_is_string(ta) && json_is_string(tb))
		return model_ci(json_string_value(ta), json_string_value(tb));
	return ta && tb && json_equal(ta, tb);
}

/* Replace-merges item's scalar members into e, as the engine does. */
static void model_merge(json_t *e, const json_t *item)
{
	static const char *const canon[] = {"value", "type", "display"};
	const char *k, *key, *name;
	json_t *v;
	char *kk;
	size_t i;

	json_object_foreach((json_t *)item, k, v) {
		if (scim_object_get(e, k, &key)) {
			kk = strdup(key);
			if (json_is_null(v))
				json_object_del(e, kk);
			else
				json_object_set_new(e, kk, json_deep_copy(v));
			free(kk);
			continue;
		}
		if (json_is_null(v))
			continue;
		name = k;
		for (i = 0; i < 3; i++)
			if (model_ci(k, canon[i]))
				name = canon[i];
		json_object_set_new(e, name, json_deep_copy(v));
	}
}

static void model_add(json_t *arr, const json_t *items)
{
	const json_t *item;
	json_t *e;
	size_t i, j;

	json_array_foreach((json_t *)items, i, item) {
		if (json_is_null(item))
			continue;
		for (j = 0; j < json_array_size(arr); j++) {
			e = json_array_get(arr, j);
			if (json_equal(e, item))
				break;
			if (json_is_object(e) && json_is_object(item) && model_same_value(e, item)) {
				model_merge(e, item);
				break;
			}
		}
		if (j == json_array_size(arr))
			json_array_append_new(arr, json_deep_copy(item));
	}
}

static void model_remove(json_t *arr, const json_t *items)
{
	const json_t *item, *ev, *iv;
	json_t *e;
	size_t i, j;

	json_array_foreach((json_t *)items, i, item)
		for (j = json_array_size(arr); j-- > 0;) {
			e = json_array_get(arr, j);
			ev = scim_object_get(e, "value", NULL);
			iv = json_is_object(item) ? scim_object_get(item, "value", NULL) : item;
			if (json_equal(e, item) ||
			    (ev && iv && !json_is_null(iv) && json_equal(ev, iv)))
				json_array_remove(arr, j);
		}
}

static unsigned model_seed = 1;

static unsigned rnd(unsigned n)
{
	model_seed = model_seed * 1103515245u + 12345u;
	return (model_seed >> 16) % n;
}

static json_t *rnd_scalar(void)
{
	switch (rnd(9)) {
	case 0:
		return json_string("A");
	case 1:
		return json_string("b");
	case 2:
		return json_integer(1);
	case 3:
		return json_real(1.0);
	case 4:
		return json_real(rnd(2) ? 0.0 : -0.0);
	case 5:
		return json_null();
	default:
		return json_string("a");
	}
}

static json_t *rnd_element(void)
{
	static const char *const vk[] = {"value", "Value", "VALUE"}, *const tk[] = {"type", "Type"};
	static const char *const types[] = {"work", "Work", "home"};
	json_t *o;
	unsigned i, n, first;

	switch (rnd(10)) {
	case 0:
		return json_string(rnd(2) ? "a" : "A");
	case 1:
		return json_null();
	case 2:
		return json_pack("[s]", "a");
	default:
		break;
	}
	o = json_object();
	n = rnd(5) ? 1 : rnd(3);
	first = rnd(3);
	for (i = 0; i < n; i++)
		json_object_set_new(o, vk[(first + i) % 3], rnd_scalar());
	n = rnd(2) ? 0 : rnd(6) ? 1 : 2;
	first = rnd(2);
	for (i = 0; i < n; i++)
		json_object_set_new(o, tk[(first + i) % 2],
				    rnd(5) ? json_string(types[rnd(3)]) : json_integer(1));
	if (rnd(2))
		json_object_set_new(o, rnd(3) ? "display" : "Display",
				    rnd(6) ? json_string(rnd(2) ? "d1" : "d2") : json_null());
	return o;
}

static json_t *rnd_array(unsigned max)
{
	json_t *a = json_array();
	unsigned i, n = rnd(max + 1);

	for (i = 0; i < n; i++)
		json_array_append_new(a, rnd_element());
	return a;
}

static void test_dedupe_matches_model(void **state)
{
	json_t *res, *want, *ops, *body, *items, *arr;
	char *got_s, *want_s;
	unsigned round, k, nops;

	(void)state;
	for (round = 0; round < 20000; round++) {
		res = json_pack("{s:s}", "userName", "m");
		if (rnd(4))
			json_object_set_new(res, "emails", rnd_array(6));
		want = json_deep_copy(res);
		ops = json_array();
		nops = 1 + rnd(3);
		for (k = 0; k < nops; k++) {
			items = rnd_array(6);
			if (rnd(3)) {
				json_array_append_new(ops,
						      json_pack("{s:s, s:s, s:O}", "op", "add",
								"path", "emails", "value", items));
				arr = json_object_get(want, "emails");
				if (!json_is_array(arr)) {
					arr = json_array();
					json_object_set_new(want, "emails", arr);
				}
				model_add(arr, items);
			} else {
				json_array_append_new(ops,
						      json_pack("{s:s, s:s, s:O}", "op", "remove",
								"path", "emails", "value", items));
				arr = json_object_get(want, "emails");
				if (arr) {
					model_remove(arr, items);
					if (!json_array_size(arr))
						json_object_del(want, "emails");
				}
			}
			json_decref(items);
		}
		body = json_pack("{s:[s], s:o}", "schemas", SCIM_PATCH_URN, "Operations", ops);
		if (scim_patch_apply(res, body, err, sizeof err))
			fail_msg("round %u: %s", round, err);
		got_s = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY);
		want_s = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
		if (strcmp(got_s, want_s)) {
			char *b = json_dumps(body, JSON_COMPACT);

			fail_msg("round %u: ops %s\ngot  %s\nwant %s", round, b, got_s, want_s);
		}
		free(got_s);
		free(want_s);
		json_decref(body);
		json_decref(res);
		json_decref(want);
	}
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
		cmocka_unit_test(test_dedupe_within_op),
		cmocka_unit_test(test_dedupe_too_deep),
		cmocka_unit_test(test_dedupe_against_existing),
		cmocka_unit_test(test_dedupe_many),
		cmocka_unit_test(test_dedupe_matches_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
