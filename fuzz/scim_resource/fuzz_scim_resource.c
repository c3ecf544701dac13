/* libFuzzer driver for the normalisation and schema check of SCIM
 * resources that POST and PUT bodies of /scim/v2/Users and /Groups go
 * through: the input is the request body, parsed by validate_parse_body as
 * pipeline.c parses a SCIM body, then scim_patch_normalize()d and checked with
 * scim_schema_check against the published schemas, as a User and as a
 * Group, in the order directory_user_prepare and directory_group_prepare
 * (src/identity/directory.c) run them. Then the whole preparation a
 * handler runs (directory_prepare: read-only and write-only attributes
 * dropped, normalised, checked, completed), as a user and as a group. A user both accept, as it would be
 * stored, is then matched against the filters identity providers list
 * users and groups with, as a list request does (fuzz/scim_filter fuzzes
 * the filters against a fixed resource; here the resource varies).
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise is broken: normalisation answers OK or INVALID_VALUE, and every
 * refusal (normalisation or schema) comes with a message fit for a JSON
 * error body; normalising again accepts and changes nothing; in a user
 * that passes both, "active" and every "primary" at any depth, in any
 * spelling, are no longer strings and the enterprise manager is an object
 * (regressions/: one attribute in two spellings, which normalisation
 * alone leaves half done); a filter match answers 0 or 1; a prepared
 * resource holds no id, meta or password (any spelling) and its core URN
 * first in schemas, and preparing it again (a PUT of what a GET returned)
 * accepts it and changes nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "identity/directory.h"
#include "core/validate.h"
#include "identity/scim_filter.h"
#include "identity/scim_patch.h"
#include "identity/scim_schema.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What Okta, Entra ID and the SCIM validators send as ?filter=. */
static const char *const filter_text[] = {
	"userName eq \"bjensen@example.com\"",
	"externalId eq \"00ujl29u0le5T6Aj10h7\" and active eq true",
	"emails[type eq \"work\" and value co \"@example.com\"] or name.familyName sw \"Mo\"",
	"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value pr",
	"displayName eq \"revenue-approver\" or members[value eq \"usr_1\"]",
	"meta.lastModified gt \"2011-05-13T04:42:34Z\" and not (roles pr)",
};
static struct scim_filter *filters[sizeof filter_text / sizeof *filter_text];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];
	size_t i;

	(void)argc;
	(void)argv;
	for (i = 0; i < sizeof filters / sizeof *filters; i++)
		if (scim_filter_parse(filter_text[i], &filters[i], err, sizeof err) < 0)
			abort();
	return 0;
}

/* No string left under a key named "primary" (any case), at any depth. */
static void check_primary(const json_t *v, int depth)
{
	const char *k;
	json_t *c;
	size_t i;

	if (depth > VALIDATE_MAX_DEPTH + 1)
		abort();
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, c) {
			if (!strcasecmp(k, "primary") && json_is_string(c))
				abort();
			check_primary(c, depth + 1);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, c)
			check_primary(c, depth + 1);
	}
}

static void check_message(const char *err)
{
	json_t *s;

	if (!err[0] || !(s = json_string(err)))
		abort();
	json_decref(s);
}

/* Checks doc as the given resource type; returns 1 when it conforms. */
static int schema_ok(const char *type, const json_t *doc)
{
	char err[256];

	err[0] = '\0';
	if (scim_schema_check(scim_schemas_builtin(), type, doc, NULL, err, sizeof err) == 0)
		return 1;
	check_message(err);
	return 0;
}

static void check_stored_user(const json_t *doc)
{
	const char *k;
	json_t *v, *m;

	json_object_foreach((json_t *)doc, k, v) {
		if (!strcasecmp(k, "active") && json_is_string(v))
			abort();
		if (!strcasecmp(k, SCIM_URN_ENTERPRISE) && json_is_object(v)) {
			m = json_object_get(v, "manager");
			if (m && !json_is_object(m))
				abort();
		}
	}
	check_primary(doc, 1);
}

/* No member named name, in any case, at the top of doc. */
static void check_absent(const json_t *doc, const char *name)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)doc, k, v)
		if (!strcasecmp(k, name))
			abort();
}

/* Runs body through directory_prepare as a user or a group and checks what a
 * handler would store. */
static void check_prepare(const json_t *body, int user)
{
	json_t *doc, *again, *schemas;
	char err[256];
	int rc;

	doc = directory_prepare(body, user, NULL, &rc, err, sizeof err);
	if (!doc) {
		if (rc >= 0)
			abort();
		check_message(err);
		return;
	}
	check_absent(doc, "id");
	check_absent(doc, "meta");
	if (user) {
		check_absent(doc, "password");
		check_absent(doc, "groups");
	}
	schemas = json_object_get(doc, "schemas");
	if (!json_is_string(json_array_get(schemas, 0)) ||
	    strcmp(json_string_value(json_array_get(schemas, 0)),
		   user ? "urn:ietf:params:scim:schemas:core:2.0:User"
			: "urn:ietf:params:scim:schemas:core:2.0:Group"))
		abort();
	again = directory_prepare(doc, user, doc, &rc, err, sizeof err);
	if (!again || !json_equal(again, doc))
		abort();
	json_decref(again);
	json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = NULL, *doc = NULL, *again = NULL;
	char err[256];
	int rc;

	if (validate_parse_body((const char *)data, size, &body, NULL) < 0)
		return 0;
	if (json_is_object(body)) {
		check_prepare(body, 1);
		check_prepare(body, 0);
	}
	doc = json_deep_copy(body);
	if (!doc)
		goto out;
	err[0] = '\0';
	rc = scim_patch_normalize(doc, err, sizeof err);
	if (rc != SCIM_PATCH_OK) {
		if (rc != SCIM_PATCH_INVALID_VALUE)
			abort();
		check_message(err);
		goto out;
	}
	(void)schema_ok("Group", doc);
	if (schema_ok("User", doc)) {
		check_stored_user(doc);
		for (size_t i = 0; i < sizeof filters / sizeof *filters; i++) {
			rc = scim_filter_match(filters[i], doc);
			if (rc != 0 && rc != 1)
				abort();
		}
	}
	again = json_deep_copy(doc);
	if (again && (scim_patch_normalize(again, err, sizeof err) != SCIM_PATCH_OK ||
		      !json_equal(again, doc)))
		abort();
out:
	json_decref(again);
	json_decref(doc);
	json_decref(body);
	return 0;
}
