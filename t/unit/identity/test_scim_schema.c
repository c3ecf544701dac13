/* Unit tests for scim_schema: the published schemas load; what Okta, Entra
 * ID and Microsoft's reference collection send passes; a wrong type in any
 * known attribute, sub-attribute, element, extension attribute or common
 * attribute is refused with a message naming it; nulls, unknown names and
 * the bare-string elements of roles and members are kept; values equal to
 * the stored ones pass; every RFC 7643 type through a schema of our own;
 * and the loader's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "json_fixture.h"

#include "identity/scim_filter.h"
#include "identity/scim_schema.h"

#define USER SCIM_URN_USER
#define GROUP SCIM_URN_GROUP
#define ENT SCIM_URN_ENTERPRISE

static char err[512];

/* Checks the document text as a resource of type against the built-in
 * schemas, with before (text or NULL); returns the result, err filled. */
static int check(const char *type, const char *doc_text, const char *before_text)
{
	json_t *doc = load(doc_text), *before = before_text ? load(before_text) : NULL;
	int rc;

	err[0] = '\0';
	rc = scim_schema_check(scim_schemas_builtin(), type, doc, before, err, sizeof err);
	if (rc)
		assert_true(err[0] != '\0');
	json_decref(doc);
	json_decref(before);
	return rc;
}

#define ok(type, doc)                                            \
	do {                                                     \
		if (check(type, doc, NULL) != 0)                 \
			fail_msg("refused: %s\n  %s", err, doc); \
	} while (0)

/* Refused with exactly the message want. */
#define refused(type, doc, want)                              \
	do {                                                  \
		assert_int_equal(check(type, doc, NULL), -1); \
		assert_string_equal(err, want);               \
	} while (0)

static void test_builtin_loads(void **state)
{
	(void)state;
	assert_non_null(scim_schemas_builtin());
	assert_ptr_equal(scim_schemas_builtin(), scim_schemas_builtin());
	ok("User", "{\"userName\": \"a\"}");
	ok("Group", "{\"displayName\": \"g\"}");
	assert_int_equal(check("Thing", "{}", NULL), -1);
	assert_non_null(strstr(err, "Thing"));
	assert_int_equal(check("User", "[]", NULL), -1);
}

/* What real clients send passes as it is. */
static void test_clients_pass(void **state)
{
	(void)state;
	/* Okta's create (groups is read-only and dropped before the check) */
	ok("User", "{\"schemas\": [\"" USER "\"], \"userName\": \"a@x\","
		   " \"name\": {\"givenName\": \"A\", \"familyName\": \"B\"},"
		   " \"emails\": [{\"primary\": true, \"value\": \"a@x\", \"type\": \"work\"}],"
		   " \"displayName\": \"A B\", \"locale\": \"en-US\", \"externalId\": \"00u1\","
		   " \"active\": true}");
	/* Entra's, after normalisation, with the enterprise extension */
	ok("User", "{\"schemas\": [\"" USER "\", \"" ENT "\"], \"externalId\": \"0a1b\","
		   " \"userName\": \"e@x\", \"active\": false, \"displayName\": \"E\","
		   " \"title\": \"Manager\", \"emails\": [{\"primary\": true, \"type\": \"work\","
		   " \"value\": \"e@x\"}], \"meta\": {\"resourceType\": \"User\"},"
		   " \"name\": {\"formatted\": \"E F\", \"familyName\": \"F\", \"givenName\": \"E\"},"
		   " \"" ENT "\": {\"employeeNumber\": \"701984\", \"department\": \"Sales\","
		   " \"manager\": {\"value\": \"mgr-1\"}},"
		   " \"roles\": [{\"value\": \"finance-operator\", \"primary\": false}]}");
	/* Microsoft's reference collection: names in any case, nulls inside
	 * complex values, addresses, phone numbers, empty roles */
	ok("User",
	   "{\"userName\": \"OMalley\", \"active\": true, \"addresses\": [{\"country\":"
	   " \"Bermuda\", \"formatted\": \"9132\\nSouth\", \"locality\": \"West\","
	   " \"postalCode\": \"99265\", \"region\": \"Montana\", \"streetAddress\": \"4939\","
	   " \"type\": \"work\", \"primary\": false}, {\"country\": null, \"locality\": null,"
	   " \"type\": \"other\", \"primary\": false}], \"emails\": [{\"Primary\": true,"
	   " \"type\": \"work\", \"value\": \"anna@example.com\"}], \"name\": {\"formatted\":"
	   " \"D M\", \"familyName\": \"OMalley\", \"honorificPrefix\": null},"
	   " \"phoneNumbers\": [{\"type\": \"fax\", \"primary\": false, \"value\": \"312\"}],"
	   " \"preferredLanguage\": \"xh\", \"roles\": [], \"title\": \"Site engineer\","
	   " \"" ENT "\": {\"Department\": \"bob\", \"Manager\": {\"Value\": \"SuzzyQ\"}}}");
	/* groups: members as objects or bare ids, empty, with other keys */
	ok("Group", "{\"schemas\": [\"" GROUP "\"], \"displayName\": \"g\", \"externalId\": \"x\","
		    " \"members\": [{\"value\": \"usr_1\", \"display\": \"VP\"}, \"usr_2\","
		    " {\"value\": \"grp_1\", \"type\": \"Group\", \"displayName\": \"new\","
		    " \"$ref\": \"https://x/Groups/grp_1\"}]}");
	ok("Group", "{\"displayName\": \"g\", \"members\": []}");
	/* roles as bare strings (documented in openapi.json) */
	ok("User", "{\"userName\": \"a\", \"roles\": [\"ops-manager\", {\"value\": \"x\"}]}");
}

/* null is "unassigned" (RFC 7643 §2.5); unknown names are kept unchecked. */
static void test_kept(void **state)
{
	(void)state;
	ok("User", "{\"userName\": \"a\", \"nickName\": null, \"name\": null, \"emails\": null,"
		   " \"" ENT "\": null, \"externalId\": null, \"schemas\": null}");
	ok("User", "{\"userName\": \"a\", \"adreses\": 5, \"name\": {\"nick\": [1]},"
		   " \"emails\": [{\"value\": \"a\", \"verified\": 1}],"
		   " \"urn:example:custom:2.0:User\": 7, \"urn:example:custom:2.0:User:x\": true,"
		   " \"" ENT "\": {\"badge\": 42}, \"id\": 5, \"meta\": \"x\"}");
	/* the enterprise extension belongs to users, not groups */
	ok("Group", "{\"displayName\": \"g\", \"" ENT "\": 5, \"nickName\": 5}");
}

static void test_user_wrong_types(void **state)
{
	(void)state;
	refused("User", "{\"userName\": \"a\", \"nickName\": 5}",
		"nickName must be a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"title\": [\"x\"]}",
		"title must be a string (got an array)");
	refused("User", "{\"userName\": \"a\", \"TITLE\": {}}",
		"title must be a string (got an object)");
	refused("User", "{\"userName\": \"a\", \"locale\": 4.5}",
		"locale must be a string (got a number with a fraction or exponent)");
	refused("User", "{\"userName\": \"a\", \"profileUrl\": true}",
		"profileUrl must be a reference (a URI string) (got a boolean)");
	refused("User", "{\"userName\": \"a\", \"active\": \"yes\"}",
		"active must be a boolean (got a string)");
	refused("User", "{\"userName\": \"a\", \"name\": \"A B\"}",
		"name must be a complex value (a JSON object) (got a string)");
	refused("User", "{\"userName\": \"a\", \"name\": {\"givenName\": 5}}",
		"name.givenName must be a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"emails\": \"a@x\"}",
		"emails must be an array of complex values (JSON objects) (got a string)");
	refused("User", "{\"userName\": \"a\", \"emails\": {\"value\": \"a@x\"}}",
		"emails must be an array of complex values (JSON objects) (got an object)");
	refused("User", "{\"userName\": \"a\", \"emails\": [\"a@x\"]}",
		"emails[0] must be a complex value (a JSON object) (got a string)");
	refused("User", "{\"userName\": \"a\", \"emails\": [{\"value\": \"a\"}, null]}",
		"emails[1] must be a complex value (a JSON object) (got null)");
	refused("User", "{\"userName\": \"a\", \"emails\": [{\"value\": \"a\"}, {\"value\": 5}]}",
		"emails[1].value must be a string (got an integer)");
	refused("User",
		"{\"userName\": \"a\", \"emails\": [{\"value\": \"a\", \"primary\": \"True\"}]}",
		"emails[0].primary must be a boolean (got a string)");
	refused("User", "{\"userName\": \"a\", \"addresses\": [{\"postalCode\": 99265}]}",
		"addresses[0].postalCode must be a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"roles\": [5]}",
		"roles[0] must be a complex value (a JSON object) or a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"roles\": [{\"value\": []}]}",
		"roles[0].value must be a string (got an array)");
	refused("User", "{\"userName\": \"a\", \"x509Certificates\": 5}",
		"x509Certificates must be an array of complex values (JSON objects) (got an integer)");
	/* common attributes */
	refused("User", "{\"userName\": \"a\", \"schemas\": \"" USER "\"}",
		"schemas must be an array of schema URIs (strings) (got a string)");
	refused("User", "{\"userName\": \"a\", \"schemas\": [\"" USER "\", 5]}",
		"schemas[1] must be a schema URI (a non-empty string) (got an integer)");
	refused("User", "{\"userName\": \"a\", \"schemas\": [\"\"]}",
		"schemas[0] must be a schema URI (a non-empty string) (got a string)");
	refused("User", "{\"userName\": \"a\", \"externalId\": 123}",
		"externalId must be a string (got an integer)");
	/* required */
	refused("User", "{\"displayName\": \"a\"}", "userName is required");
	refused("User", "{\"userName\": null}", "userName is required");
	refused("User", "{\"userName\": 5}", "userName must be a string (got an integer)");
}

static void test_extension_and_urns(void **state)
{
	(void)state;
	refused("User", "{\"userName\": \"a\", \"" ENT "\": \"x\"}",
		ENT " must be a JSON object of the extension's attributes (got a string)");
	refused("User", "{\"userName\": \"a\", \"" ENT "\": [{}]}",
		ENT " must be a JSON object of the extension's attributes (got an array)");
	refused("User", "{\"userName\": \"a\", \"" ENT "\": {\"employeeNumber\": 701984}}",
		ENT ":employeeNumber must be a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"" ENT "\": {\"manager\": \"mgr\"}}",
		ENT ":manager must be a complex value (a JSON object) (got a string)");
	refused("User", "{\"userName\": \"a\", \"" ENT "\": {\"Manager\": {\"value\": 5}}}",
		ENT ":manager.value must be a string (got an integer)");
	/* attributes named by their fully qualified URN (RFC 7644 §3.10) */
	refused("User", "{\"userName\": \"a\", \"" USER ":nickName\": 5}",
		USER ":nickName must be a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"" USER ":name.givenName\": 5}",
		USER ":name.givenName must be a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"" ENT ":department\": false}",
		ENT ":department must be a string (got a boolean)");
	refused("User", "{\"userName\": \"a\", \"" USER "\": {\"title\": 5}}",
		USER ":title must be a string (got an integer)");
	refused("User", "{\"userName\": \"a\", \"" USER "\": 5}",
		USER " must be a JSON object of attributes (got an integer)");
	ok("User", "{\"userName\": \"a\", \"" USER ":nickName\": \"n\", \"" USER ":emails.value\": 5,"
		   " \"" USER "\": {\"title\": \"t\"}, \"" ENT ":costCenter\": \"c\"}");
}

static void test_group_wrong_types(void **state)
{
	(void)state;
	refused("Group", "{\"displayName\": 5}", "displayName must be a string (got an integer)");
	refused("Group", "{\"members\": []}", "displayName is required");
	refused("Group", "{\"displayName\": \"g\", \"externalId\": {}}",
		"externalId must be a string (got an object)");
	refused("Group", "{\"displayName\": \"g\", \"schemas\": {}}",
		"schemas must be an array of schema URIs (strings) (got an object)");
	refused("Group", "{\"displayName\": \"g\", \"members\": \"usr_1\"}",
		"members must be an array of complex values (JSON objects) (got a string)");
	refused("Group", "{\"displayName\": \"g\", \"members\": [\"usr_1\", 5]}",
		"members[1] must be a complex value (a JSON object) or a string (got an integer)");
	refused("Group", "{\"displayName\": \"g\", \"members\": [{\"value\": 5}]}",
		"members[0].value must be a string (got an integer)");
	refused("Group", "{\"displayName\": \"g\", \"members\": [{\"value\": \"u\", \"$ref\": 1}]}",
		"members[0].$ref must be a reference (a URI string) (got an integer)");
}

/* Values equal to the stored ones at the same place pass as they are, so a
 * resource stored before the check can still be changed; a new wrong value
 * is refused. */
static void test_before(void **state)
{
	const char *legacy = "{\"userName\": \"a\", \"nickName\": 5, \"emails\": [{\"value\": 7}],"
			     " \"" ENT "\": {\"employeeNumber\": 1}, \"externalId\": 9}";

	(void)state;
	assert_int_equal(check("User",
			       "{\"userName\": \"a\", \"nickName\": 5, \"emails\":"
			       " [{\"value\": 7}, {\"value\": \"b\"}], \"active\": false,"
			       " \"" ENT "\": {\"employeeNumber\": 1, \"department\": \"d\"},"
			       " \"externalId\": 9}",
			       legacy),
			 0);
	assert_int_equal(check("User", "{\"userName\": \"a\", \"nickName\": 6}", legacy), -1);
	assert_string_equal(err, "nickName must be a string (got an integer)");
	assert_int_equal(check("User",
			       "{\"userName\": \"a\", \"emails\": [{\"value\": 7},"
			       " {\"value\": 8}]}",
			       legacy),
			 -1);
	assert_string_equal(err, "emails[1].value must be a string (got an integer)");
	assert_int_equal(check("User", "{\"userName\": \"a\", \"" ENT "\": {\"employeeNumber\": 2}}",
			       legacy),
			 -1);
	assert_string_equal(err, ENT ":employeeNumber must be a string (got an integer)");
	/* not a new resource: required attributes are still required */
	assert_int_equal(check("User", "{\"nickName\": 5}", legacy), -1);
	assert_string_equal(err, "userName is required");
}

/* One attribute under two spellings is ambiguous: invalidSyntax, unless
 * the stored resource already had both. Unknown names are not compared. */
static void test_two_spellings(void **state)
{
	(void)state;
	assert_int_equal(check("User", "{\"userName\": \"a\", \"active\": true, \"ACTIVE\": false}",
			       NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	assert_string_equal(err, "active is given twice, as \"active\" and \"ACTIVE\" (attribute"
				 " names are case-insensitive)");
	assert_int_equal(check("User", "{\"userName\": \"a\", \"UserName\": \"b\"}", NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	assert_int_equal(check("User",
			       "{\"userName\": \"a\", \"nickName\": null, \"NickName\": \"n\"}", NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	assert_int_equal(check("User",
			       "{\"userName\": \"a\", \"emails\": [{\"value\": \"x\","
			       " \"VALUE\": \"y\"}]}",
			       NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	assert_string_equal(err, "emails[0].value is given twice, as \"value\" and \"VALUE\""
				 " (attribute names are case-insensitive)");
	assert_int_equal(check("User",
			       "{\"userName\": \"a\", \"" ENT "\": {\"manager\": {\"value\":"
			       " \"m1\"}}, \"URN:IETF:PARAMS:SCIM:SCHEMAS:EXTENSION:ENTERPRISE:2.0:USER\":"
			       " {\"manager\": {\"value\": \"m2\"}}}",
			       NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	assert_non_null(strstr(err, ENT " is given twice"));
	assert_int_equal(check("User",
			       "{\"userName\": \"a\", \"" ENT "\": {\"department\": \"d\","
			       " \"Department\": \"e\"}}",
			       NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	assert_string_equal(err, ENT ":department is given twice, as \"department\" and"
				     " \"Department\" (attribute names are case-insensitive)");
	assert_int_equal(check("Group",
			       "{\"displayName\": \"g\", \"schemas\": [], \"Schemas\": []}", NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	assert_int_equal(check("Group",
			       "{\"displayName\": \"g\", \"externalId\": \"a\","
			       " \"EXTERNALID\": \"b\"}",
			       NULL),
			 SCIM_SCHEMA_INVALID_SYNTAX);
	/* a wrong type found first is still invalidValue */
	assert_int_equal(check("User", "{\"userName\": \"a\", \"title\": 5, \"TITLE\": \"t\"}", NULL),
			 SCIM_SCHEMA_INVALID_VALUE);
	/* unknown names, and names of the other resource type, are kept */
	assert_int_equal(check("User", "{\"userName\": \"a\", \"foo\": 1, \"FOO\": 2}", NULL), 0);
	assert_int_equal(check("Group", "{\"displayName\": \"g\", \"title\": 1, \"TITLE\": 2}", NULL),
			 0);
	/* a row stored with both spellings stays changeable */
	assert_int_equal(check("User", "{\"userName\": \"a\", \"active\": false, \"ACTIVE\": false}",
			       "{\"userName\": \"a\", \"active\": true, \"ACTIVE\": false}"),
			 0);
}

/* Every RFC 7643 type, required sub-attributes, and the loader's
 * refusals, through a schema document of our own. */
static const char custom[] =
	"{\"schemas\": [{\"id\": \"urn:t:Thing\", \"attributes\": ["
	" {\"name\": \"n\", \"type\": \"integer\"},"
	" {\"name\": \"d\", \"type\": \"decimal\", \"multiValued\": true},"
	" {\"name\": \"when\", \"type\": \"dateTime\"},"
	" {\"name\": \"blob\", \"type\": \"binary\"},"
	" {\"name\": \"c\", \"type\": \"complex\", \"subAttributes\": ["
	"   {\"name\": \"k\", \"type\": \"string\", \"required\": true},"
	"   {\"name\": \"on\", \"type\": \"boolean\"}]}]}],"
	" \"resource_types\": [{\"id\": \"Thing\", \"schema\": \"urn:t:Thing\"}]}";

static int check_custom(const struct scim_schemas *s, const char *doc_text)
{
	json_t *doc = load(doc_text);
	int rc;

	rc = scim_schema_check(s, "Thing", doc, NULL, err, sizeof err);
	json_decref(doc);
	return rc;
}

static void test_types(void **state)
{
	struct scim_schemas *s;

	(void)state;
	assert_int_equal(scim_schemas_load(custom, &s, err, sizeof err), 0);
	assert_int_equal(check_custom(s, "{\"n\": 5, \"d\": [1, 2.5, -3e2], \"when\":"
					 " \"2026-11-22T08:00:00.123Z\", \"blob\": \"AAE=\","
					 " \"c\": {\"k\": \"x\", \"on\": false}}"),
			 0);
	assert_int_equal(check_custom(s, "{\"when\": \"2015-10-10T14:38:21.8617979-07:00\"}"), 0);
	assert_int_equal(check_custom(s, "{\"n\": 5.0}"), -1);
	assert_string_equal(err, "n must be an integer (got a number with a fraction or exponent)");
	assert_int_equal(check_custom(s, "{\"n\": \"5\"}"), -1);
	assert_int_equal(check_custom(s, "{\"d\": [1, \"2\"]}"), -1);
	assert_string_equal(err, "d[1] must be a number (got a string)");
	assert_int_equal(check_custom(s, "{\"d\": 1}"), -1);
	assert_int_equal(check_custom(s, "{\"when\": \"2026-02-30T00:00:00Z\"}"), -1);
	assert_string_equal(err, "when must be a dateTime string (xsd:dateTime) (got a string)");
	assert_int_equal(check_custom(s, "{\"when\": \"yesterday\"}"), -1);
	assert_int_equal(check_custom(s, "{\"when\": 1700000000}"), -1);
	assert_int_equal(check_custom(s, "{\"blob\": 5}"), -1);
	assert_int_equal(check_custom(s, "{\"blob\": \"AAE\"}"), -1);
	assert_int_equal(check_custom(s, "{\"blob\": \"A=AE\"}"), -1);
	assert_int_equal(check_custom(s, "{\"blob\": \"AA-_\"}"), -1);
	assert_string_equal(err, "blob must be a binary value (a base64 string) (got a string)");
	assert_int_equal(check_custom(s, "{\"blob\": \"\"}"), 0);
	assert_int_equal(check_custom(s, "{\"blob\": \"AA==\"}"), 0);
	assert_int_equal(check_custom(s, "{\"c\": {\"on\": true}}"), -1);
	assert_string_equal(err, "c.k is required");
	assert_int_equal(check_custom(s, "{\"c\": {\"k\": null}}"), -1);
	assert_string_equal(err, "c.k is required");
	assert_int_equal(check_custom(s, "{\"c\": {\"k\": \"x\", \"on\": \"true\"}}"), -1);
	assert_string_equal(err, "c.on must be a boolean (got a string)");
	assert_int_equal(check_custom(s, "{\"urn:t:Thing:n\": \"a\"}"), -1);
	assert_string_equal(err, "urn:t:Thing:n must be an integer (got a string)");
	scim_schemas_free(s);
	scim_schemas_free(NULL);
}

/* A path longer than the message can hold is cut, never overrun. */
static void test_long_names(void **state)
{
	char name[601], *meta, *doc;
	struct scim_schemas *s;

	(void)state;
	memset(name, 'a', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	assert_true(asprintf(&meta,
			     "{\"schemas\": [{\"id\": \"urn:t:Thing\", \"attributes\": ["
			     "{\"name\": \"%s\", \"type\": \"complex\", \"subAttributes\": ["
			     "{\"name\": \"%s\", \"type\": \"integer\"}]}]}],"
			     " \"resource_types\": [{\"id\": \"Thing\", \"schema\": \"urn:t:Thing\"}]}",
			     name, name) > 0);
	assert_int_equal(scim_schemas_load(meta, &s, err, sizeof err), 0);
	assert_true(asprintf(&doc, "{\"%s\": {\"%s\": \"x\"}}", name, name) > 0);
	memset(err, 'X', sizeof err);
	assert_int_equal(check_custom(s, doc), -1);
	assert_true(strlen(err) < sizeof err);
	assert_int_equal(strncmp(err, name, 300), 0);
	free(doc);
	free(meta);
	scim_schemas_free(s);
}

static void test_load_refusals(void **state)
{
	struct scim_schemas *s = (void *)1;

	(void)state;
	assert_int_equal(scim_schemas_load("{", &s, err, sizeof err), -1);
	assert_null(s);
	assert_int_equal(scim_schemas_load("{\"schemas\": [{\"id\": \"u\", \"attributes\":"
					   " [{\"name\": \"a\", \"type\": \"text\"}]}],"
					   " \"resource_types\": []}",
					   &s, err, sizeof err),
			 -1);
	assert_string_equal(err, "attribute a has an unknown type");
	assert_int_equal(scim_schemas_load("{\"schemas\": [{\"id\": \"u\", \"attributes\":"
					   " [{\"name\": \"a\", \"type\": \"complex\", \"subAttributes\":"
					   " [{\"name\": \"b\", \"type\": \"complex\"}]}]}],"
					   " \"resource_types\": []}",
					   &s, err, sizeof err),
			 -1);
	assert_string_equal(err, "sub-attribute b is complex");
	assert_int_equal(scim_schemas_load("{\"schemas\": [{\"id\": \"u\", \"attributes\": []}],"
					   " \"resource_types\": [{\"id\": \"U\", \"schema\": \"v\"}]}",
					   &s, err, sizeof err),
			 -1);
	assert_string_equal(err, "resource type U names no known schema");
	assert_int_equal(scim_schemas_load("{\"schemas\": [{\"id\": \"u\", \"attributes\": []}],"
					   " \"resource_types\": [{\"id\": \"U\", \"schema\": \"u\","
					   " \"schemaExtensions\": [{\"schema\": \"w\"}]}]}",
					   &s, err, sizeof err),
			 -1);
	assert_string_equal(err, "resource type U names an unknown extension");
	assert_int_equal(scim_schemas_load("{\"schemas\": [{\"attributes\": []}]}", &s, err,
					   sizeof err),
			 -1);
	assert_string_equal(err, "a schema has no id");
	assert_null(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builtin_loads),
		cmocka_unit_test(test_clients_pass),
		cmocka_unit_test(test_kept),
		cmocka_unit_test(test_user_wrong_types),
		cmocka_unit_test(test_extension_and_urns),
		cmocka_unit_test(test_group_wrong_types),
		cmocka_unit_test(test_before),
		cmocka_unit_test(test_two_spellings),
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_load_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
