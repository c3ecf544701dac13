/* libFuzzer driver for the normalisation of SCIM resources that POST and
 * PUT bodies of /scim/v2/Users and /Groups go through: the input is the
 * request body, parsed by validate_parse_body as app.c parses a SCIM
 * body, then scim_patch_normalize()d as scim.c does before storing it.
 * (scim.c's own steps around it, dropping read-only and write-only
 * attributes, the schemas list and the user and group column checks, are
 * static there and not reached yet: docs/fuzzing.md.) The stored document
 * is then matched against the filters identity providers list users and
 * groups with, as a list request does (fuzz/scim_filter fuzzes the
 * filters against a fixed resource; here the resource varies).
 *
 * Besides memory errors, leaks and undefined behaviour it aborts when a
 * promise is broken: the status is OK or INVALID_VALUE, a refusal comes
 * with a message fit for a JSON error body; after an acceptance "active"
 * and every "primary" at any depth are no longer strings, the enterprise
 * manager is an object if present, and normalising again accepts and
 * changes nothing; a filter match answers 0 or 1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "scim_filter.h"
#include "scim_patch.h"
#include "validate.h"

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

static void check_accepted(const json_t *doc)
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *body = NULL, *doc = NULL, *again = NULL;
	char err[256];
	json_t *s;
	int rc;

	if (validate_parse_body((const char *)data, size, &body, NULL) < 0)
		return 0;
	doc = json_deep_copy(body);
	if (!doc)
		goto out;
	err[0] = '\0';
	rc = scim_patch_normalize(doc, err, sizeof err);
	if (rc != SCIM_PATCH_OK) {
		if (rc != SCIM_PATCH_INVALID_VALUE || !err[0] || !(s = json_string(err)))
			abort();
		json_decref(s);
		goto out;
	}
	check_accepted(doc);
	for (size_t i = 0; i < sizeof filters / sizeof *filters; i++) {
		rc = scim_filter_match(filters[i], doc);
		if (rc != 0 && rc != 1)
			abort();
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
